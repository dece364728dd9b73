use super::*;

const TIMEOUT: Duration = Duration::from_secs(5);

fn activation(cap: usize, hold_until_ms: u64) -> Activation {
    Activation::new(ActiveSlots::new(cap), hold_until_ms, TIMEOUT)
}

fn started(steps: &[Step]) -> Vec<(&str, bool)> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Start { host, crashed, .. } => Some((host.as_str(), *crashed)),
            _ => None,
        })
        .collect()
}

fn timer(steps: &[Step]) -> Option<u64> {
    steps.iter().find_map(|s| match s {
        Step::Timer { at_ms } => Some(*at_ms),
        _ => None,
    })
}

fn generation(steps: &[Step], of: &str) -> u64 {
    steps
        .iter()
        .find_map(|s| match s {
            Step::Start {
                host, generation, ..
            }
            | Step::Wake {
                host, generation, ..
            } if host == of => Some(*generation),
            _ => None,
        })
        .expect("a step for the host")
}

#[test]
fn due_hosts_start_earliest_first_while_slots_last_then_a_timer() {
    let mut a = activation(2, 0);
    let due = HashMap::from([
        ("b.test".to_owned(), 1_000),
        ("c.test".to_owned(), 1_100),
        ("d.test".to_owned(), 5_000),
    ]);
    a.open(
        ["a.test", "b.test", "c.test", "d.test"],
        &due,
        &HashMap::<String, u64>::new(),
    );
    let steps = a.activate(1_000, |_| false);
    assert_eq!(started(&steps), [("a.test", false), ("b.test", false)]);
    // c is due (within the lead) but no slot is free: looked at again soon.
    assert_eq!(timer(&steps), Some(1_000 + SLOT_POLL_MS));
    assert!(a.idle("a.test", generation(&steps, "a.test")));
    let steps = a.activate(1_000 + SLOT_POLL_MS, |_| false);
    assert_eq!(started(&steps), [("c.test", false)]);
    // d is not due yet: a timer the lead before it.
    assert_eq!(timer(&steps), Some(5_000 - ACTIVATE_AHEAD_MS));
    assert!(a.idle("b.test", 2));
    let steps = a.activate(5_000 - ACTIVATE_AHEAD_MS, |_| false);
    assert_eq!(started(&steps), [("d.test", false)]);
    assert_eq!(timer(&steps), None, "nothing left");
}

#[test]
fn an_idle_report_counts_only_for_the_last_start_or_wake() {
    let mut a = activation(4, 0);
    a.wake("a.test", 1, false);
    let steps = a.activate(0, |_| false);
    let first = generation(&steps, "a.test");
    // Work arrives while active: a wake, with a newer generation.
    let woken = a.wake("a.test", 1, false).expect("a wake");
    let second = generation(&[woken], "a.test");
    assert!(second > first);
    assert!(!a.idle("a.test", first), "the report predates the work");
    assert!(a.is_active("a.test"));
    assert!(a.idle("a.test", second));
    assert!(!a.is_active("a.test"));
}

#[test]
fn after_a_takeover_nothing_comes_due_before_the_hold() {
    let mut a = activation(4, 10_000);
    a.open(["a.test"], &HashMap::new(), &HashMap::<String, u64>::new());
    let steps = a.activate(0, |_| false);
    assert!(started(&steps).is_empty());
    assert_eq!(timer(&steps), Some(10_000));
    let steps = a.activate(10_000, |_| false);
    assert_eq!(started(&steps), [("a.test", false)]);
}

#[test]
fn a_host_whose_actor_died_waits_out_its_last_request_and_owes_its_delay() {
    let mut a = activation(1, 0);
    a.wake("a.test", 1, false);
    a.activate(0, |_| false);
    assert!(a.died("a.test", 1_000));
    let wait = 1_000 + TIMEOUT.as_millis() as u64 + ACTIVATE_AHEAD_MS;
    assert_eq!(a.due_ms("a.test"), Some(wait));
    let steps = a.activate(wait - ACTIVATE_AHEAD_MS, |_| false);
    assert_eq!(
        started(&steps),
        [("a.test", true)],
        "its slot came back too"
    );
}

#[test]
fn new_work_makes_a_host_waiting_for_a_refresh_due_at_once_not_one_waiting_out_politeness() {
    let mut a = activation(4, 0);
    a.due_at("refresh.test", 60_000, true);
    a.due_at("polite.test", 60_000, false);
    assert_eq!(a.wake("refresh.test", 1, false), None);
    assert_eq!(a.wake("polite.test", 1, false), None);
    assert_eq!(a.due_ms("refresh.test"), Some(0));
    assert_eq!(a.due_ms("polite.test"), Some(60_000));
    // Refreshes made due move it too.
    a.wake("polite.test", RECRAWL_BIT, false);
    assert_eq!(a.due_ms("polite.test"), Some(0));
}

#[test]
fn blocked_hosts_are_held_back_and_a_draining_partition_starts_nobody() {
    let mut a = activation(4, 0);
    a.wake("a.test", 1, false);
    a.wake("b.test", 1, false);
    let steps = a.activate(0, |h| h == "b.test");
    assert_eq!(started(&steps), [("a.test", false)]);
    assert_eq!(a.held_back().collect::<Vec<_>>(), ["b.test"]);
    // Blocking an active host stops it; unblocked, it owes its delay.
    assert!(a.block("a.test"));
    assert_eq!(a.wake("a.test", 1, true), None, "blocked: left alone");
    a.unblock("a.test");
    a.wake("a.test", 1, false);
    a.drain();
    assert!(a.activate(0, |_| false).is_empty());
    assert_eq!(a.retire(), Vec::<String>::new());
}

#[test]
fn a_host_that_gets_work_during_the_hold_waits_for_its_end() {
    // Taken over with a hold until 10 s: a host with no work at open (so
    // not in the index) that gets some meanwhile may have a request of
    // the former owner on the wire all the same.
    let mut a = activation(4, 10_000);
    a.open(["a.test"], &HashMap::new(), &HashMap::<String, u64>::new());
    assert_eq!(a.wake("new.test", 1, false), None);
    let steps = a.activate(1_000, |_| false);
    assert!(started(&steps).is_empty(), "{steps:?}");
    assert_eq!(timer(&steps), Some(10_000));
    let steps = a.activate(10_000, |_| false);
    let mut hosts: Vec<&str> = started(&steps).into_iter().map(|(h, _)| h).collect();
    hosts.sort();
    assert_eq!(hosts, ["a.test", "new.test"]);
    // Likewise a host waiting for a refresh that gets new work.
    let mut a = activation(4, 10_000);
    let refreshes = HashMap::from([("r.test".to_owned(), 50_000u64)]);
    a.open(std::iter::empty::<&str>(), &HashMap::new(), &refreshes);
    assert_eq!(a.wake("r.test", 1, false), None);
    assert_eq!(a.due_ms("r.test"), Some(10_000 + ACTIVATE_AHEAD_MS));
}

#[test]
fn after_a_crash_each_host_owes_its_last_delay_at_its_first_start_only() {
    let mut a = activation(4, 0).after_crash();
    a.open(["a.test"], &HashMap::new(), &HashMap::<String, u64>::new());
    let steps = a.activate(1_000, |_| false);
    assert_eq!(started(&steps), [("a.test", true)]);
    // It passivates for a long wait and comes due again: a start of this
    // life, which owes nothing more (owing again at every start, a host
    // whose delay is longer than the passivation threshold never fetched).
    assert!(a.idle("a.test", generation(&steps, "a.test")));
    a.due_at("a.test", 90_000, false);
    let steps = a.activate(90_000, |_| false);
    assert_eq!(started(&steps), [("a.test", false)]);
    // A host that had no work at open had nothing in flight either.
    assert_eq!(a.wake("new.test", 1, false), None);
    let steps = a.activate(90_000, |_| false);
    assert_eq!(started(&steps), [("new.test", false)]);
}

#[test]
fn a_host_that_passivates_sooner_than_the_lead_is_started_no_earlier_than_half_of_it() {
    // Passivating after 100 ms, a host started 200 ms ahead would wait
    // 200 ms and passivate again at once, for ever.
    let mut a = activation(4, 0).with_lead(Duration::from_millis(100));
    assert_eq!(a.lead_ms(), 50);
    a.due_at("a.test", 10_000, false);
    assert_eq!(timer(&a.activate(9_000, |_| false)), Some(9_950));
    assert_eq!(started(&a.activate(9_950, |_| false)), [("a.test", false)]);
    // The default threshold keeps the full lead.
    let b = activation(4, 0).with_lead(Duration::from_secs(30));
    assert_eq!(b.lead_ms(), ACTIVATE_AHEAD_MS);
    // A hold keeps its meaning: nothing starts before it, lead or not.
    let mut held = activation(4, 5_000).with_lead(Duration::from_millis(100));
    held.open(["h.test"], &HashMap::new(), []);
    assert_eq!(timer(&held.activate(0, |_| false)), Some(5_000));
}

fn yields(steps: &[Step]) -> Vec<&str> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Yield { host, .. } => Some(host.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn with_a_cycle_hosts_that_held_their_slot_longest_are_asked_for_it_one_a_look() {
    let mut a = activation(2, 0).with_cycle(Duration::from_secs(10));
    a.open(
        ["a.test", "b.test", "c.test"],
        &HashMap::from([("b.test".to_owned(), 2_000)]),
        &HashMap::<String, u64>::new(),
    );
    let first = a.activate(0, |_| false);
    let mut both = started(&first);
    both.sort_unstable();
    assert_eq!(both, [("a.test", false), ("c.test", false)]);
    // Nothing waits yet, then b waits but nobody has held a slot 10 s.
    assert!(yields(&a.activate(5_000, |_| false)).is_empty());
    // 10 s on: the longest holder is asked, once; the next look asks the
    // other, and after that nobody more.
    assert_eq!(yields(&a.activate(10_000, |_| false)), ["a.test"]);
    assert_eq!(yields(&a.activate(10_020, |_| false)), ["c.test"]);
    assert!(yields(&a.activate(10_040, |_| false)).is_empty());
    // a gives its slot up: b starts; a is due again and waits its turn.
    assert!(a.idle("a.test", generation(&first, "a.test")));
    a.due_at("a.test", 10_100, false);
    let steps = a.activate(10_100, |_| false);
    assert_eq!(started(&steps), [("b.test", false)]);
    // Woken since it was asked (a new generation), c may be asked again.
    let woken = a.wake("c.test", 1, false).expect("c is active");
    assert!(matches!(woken, Step::Wake { .. }));
    assert_eq!(yields(&a.activate(10_120, |_| false)), ["c.test"]);
    // Without a cycle, nobody is ever asked.
    let mut off = activation(1, 0);
    off.open(
        ["a.test", "b.test"],
        &HashMap::new(),
        &HashMap::<String, u64>::new(),
    );
    off.activate(0, |_| false);
    assert!(yields(&off.activate(1_000_000, |_| false)).is_empty());
}
