use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use super::idle::Totals;
use super::outbox::{Batch, OutboxSchedule, FULL_PASS_EVERY, PAGE};
use super::view::{Assigned, AssignmentEffect, ClusterView};
use super::*;
use crate::cluster::assign::Assignment;
use crate::cluster::hearing::HearingView;
use std::sync::Arc;

const TIMEOUT: Duration = Duration::from_secs(30);

fn scheduler(durable: bool) -> NodeScheduler<&'static str, u32> {
    NodeScheduler::new(4, TIMEOUT, durable, KnownHolders::default())
}

#[test]
fn a_crashed_life_holds_one_request_timeout_and_a_takeover_its_lease_hold() {
    let mut s = scheduler(true);
    assert_eq!(
        s.opening(1, 1_000, 0, false),
        Opening {
            hold_until_ms: 0,
            crashed: false
        }
    );
    assert_eq!(s.opening(1, 1_000, 0, true).hold_until_ms, 31_000);
    // A takeover's hold is kept when it is the later one, and the crash
    // hold when that is.
    assert_eq!(s.opening(1, 1_000, 90_000, true).hold_until_ms, 90_000);
    assert_eq!(s.opening(1, 1_000, 5_000, true).hold_until_ms, 31_000);
    assert_eq!(s.opening(1, 1_000, 5_000, false).hold_until_ms, 5_000);
}

/// Partitions of the cluster tests: enough that two nodes each get some.
const CLUSTER: u16 = 16;

fn cluster(me: &str, chain: bool, live: &[&str]) -> (NodeScheduler<&'static str, u32>, Assigned) {
    let mut s = NodeScheduler::new(CLUSTER, TIMEOUT, chain, KnownHolders::default());
    s.join(ClusterView::new(me, chain, CLUSTER));
    let live: Vec<String> = live.iter().map(|n| n.to_string()).collect();
    let assigned = Assigned {
        assignment: Arc::new(Assignment::compute(CLUSTER, &live)),
        holders: BTreeMap::new(),
        hearing: HearingView::default(),
        may_create_stores: true,
    };
    (s, assigned)
}

#[test]
fn batches_go_to_their_owner_and_wait_while_no_one_can_admit_them() {
    let (mut s, assigned) = cluster("n1", false, &["n1", "n2"]);
    // No assignment yet: nowhere.
    assert_eq!(s.route_of(1), Route::Nowhere);
    let assignment = assigned.assignment.clone();
    s.on_assignment(assigned, |_| false);
    let mine = assignment.held_by("n1");
    let theirs = assignment.held_by("n2");
    assert!(!mine.is_empty() && !theirs.is_empty(), "{assignment:?}");
    assert_eq!(s.route_of(theirs[0]), Route::Peer("n2".into()));
    // Assigned here, but not open yet.
    assert_eq!(s.route_of(mine[0]), Route::Nowhere);
    s.opened(mine[0], "p");
    assert_eq!(s.route_of(mine[0]), Route::Here);
    assert_eq!(s.seed_outbox(), Some((mine[0], &"p")));
    assert_eq!(s.held_ids(), vec![mine[0]]);
    assert!(
        s.holds_all(&[mine[0]])
            && !s.holds_all(&mine.iter().chain(&theirs).copied().collect::<Vec<_>>())
    );
    // Held here while gossip names another (a chain's lease not yet
    // handed over): answered here; handed back: the owner's.
    s.opened(theirs[0], "q");
    assert_eq!(s.route_of(theirs[0]), Route::Here);
    s.releasing(theirs[0]);
    assert_eq!(s.route_of(theirs[0]), Route::Peer("n2".into()));
    // A single node routes only to what it holds.
    let mut single = scheduler(false);
    assert_eq!(single.route_of(2), Route::Nowhere);
    single.opened(2, "p2");
    assert_eq!(single.route_of(2), Route::Here);
}

#[test]
fn an_assignment_opens_what_it_gives_and_hands_back_what_it_takes_away() {
    let (mut s, assigned) = cluster("n1", false, &["n1"]);
    let effects = s.on_assignment(assigned, |_| false);
    assert_eq!(
        effects,
        (0..CLUSTER).map(AssignmentEffect::Open).collect::<Vec<_>>()
    );
    for id in 0..CLUSTER {
        s.opened(id, "p");
    }
    assert!(s.ready());
    // n2 joins: n1 hands back what is now n2's, and opens nothing.
    let live = vec!["n1".to_string(), "n2".to_string()];
    let assignment = Arc::new(Assignment::compute(CLUSTER, &live));
    let given = Assigned {
        assignment: assignment.clone(),
        holders: BTreeMap::from([(0, "n1".to_string())]),
        hearing: HearingView::default(),
        may_create_stores: true,
    };
    let effects = s.on_assignment(given, |_| true);
    let mut expected = vec![AssignmentEffect::SaveHolders];
    expected.extend(
        assignment
            .held_by("n2")
            .into_iter()
            .map(AssignmentEffect::Release),
    );
    assert_eq!(effects, expected);
}

#[test]
fn an_assignment_refuses_a_store_another_disk_holds_and_one_no_peer_was_heard_of() {
    let (mut s, mut assigned) = cluster("n1", false, &["n1"]);
    assigned.holders = BTreeMap::from([(2, "n9".to_string())]);
    let effects = s.on_assignment(assigned.clone(), |id| id == 3);
    assert!(effects.contains(&AssignmentEffect::Open(3)));
    assert!(effects.contains(&AssignmentEffect::Refused(
        2,
        MayOpen::Wait {
            holder: "n9".into(),
            first: true
        }
    )));
    assigned.may_create_stores = false;
    assigned.holders.clear();
    let (mut s, _) = cluster("n1", false, &["n1"]);
    let effects = s.on_assignment(assigned, |id| id == 3);
    assert!(effects.contains(&AssignmentEffect::Open(3)));
    assert!(effects.contains(&AssignmentEffect::Refused(
        0,
        MayOpen::Unheard { first: true }
    )));
    assert!(!s.ready(), "nothing held, no peer heard");
}

#[test]
fn with_a_chain_gossip_only_advises_and_seeds_wait_for_the_leases() {
    let (mut s, assigned) = cluster("n1", true, &["n1"]);
    let effects = s.on_assignment(assigned, |_| false);
    let all: Vec<u16> = (0..CLUSTER).collect();
    assert_eq!(effects, vec![AssignmentEffect::Advise(all)]);
    assert!(!s.ready());
    for id in 0..CLUSTER - 1 {
        s.opened(id, "p");
    }
    assert!(!s.ready());
    s.on_shunned(vec![CLUSTER - 1]);
    assert_eq!(s.shunned(), vec![CLUSTER - 1]);
    assert!(s.ready(), "a shunned partition is not waited for");
}

#[test]
fn a_failed_actor_restarts_as_after_a_crash_numbered_after_its_last_life() {
    let mut s = scheduler(true);
    s.opened(1, "p");
    assert_eq!(s.admitted(1, 7, 70), None);
    let (opening, floor) = s.restart(1, 1_000);
    assert!(opening.crashed);
    assert_eq!(opening.hold_until_ms, 31_000);
    assert_eq!(floor, 7);
    // A checkpoint taken at write 20 (completions after the last
    // admission) may be published after the restart: the new life counts
    // from there, or its first admissions would count as covered by it.
    s.checkpoint_taken(1, 20);
    assert_eq!(s.restart(1, 1_000).1, 20);
    s.closed(1);
    assert_eq!(s.write_floor(1), 0, "a later owner numbers afresh");
}

#[test]
fn a_restart_during_a_takeovers_hold_keeps_the_hold() {
    let mut s = scheduler(true);
    let opening = s.opening(1, 1_000, 90_000, false);
    assert_eq!(opening.hold_until_ms, 90_000);
    s.opened(1, "p");
    let (opening, _) = s.restart(1, 2_000);
    assert_eq!(
        opening.hold_until_ms, 90_000,
        "not cut to a request timeout"
    );
    // Past the takeover's hold, a restart owes a request timeout.
    let (opening, _) = s.restart(1, 100_000);
    assert_eq!(opening.hold_until_ms, 130_000);
}

#[test]
fn a_closed_partition_refuses_what_waited_on_its_durability() {
    let mut s = scheduler(true);
    s.opened(2, "p2");
    s.taken(2, 10);
    // Covered by the checkpoint it was taken with: answered at once.
    assert_eq!(s.admitted(2, 9, 1), Some(1));
    assert_eq!(s.admitted(2, 11, 2), None);
    assert_eq!(s.admitted(2, 12, 3), None);
    assert_eq!(s.covered(2, 11), vec![2]);
    let (handle, waiting) = s.closed(2);
    assert_eq!((handle, waiting), (Some("p2"), vec![3]));
    assert_eq!(s.held(2), None);
    // Taken again from a later checkpoint: counted from there.
    s.opened(2, "p2'");
    s.taken(2, 20);
    assert_eq!(s.admitted(2, 15, 4), Some(4));
}

#[test]
fn without_a_chain_an_admission_is_answered_at_once() {
    let mut s = scheduler(false);
    s.opened(0, "p0");
    assert!(!s.durable());
    assert_eq!(s.admitted(0, 5, 7), Some(7));
    assert_eq!(s.closed(0), (Some("p0"), vec![]));
}

#[test]
fn a_partition_whose_state_is_on_another_disk_waits_and_is_said_once() {
    let mut s = scheduler(false);
    let gossip = BTreeMap::from([(3, "n2".to_owned())]);
    assert!(s.learn_holders(&gossip));
    assert!(!s.learn_holders(&gossip));
    assert_eq!(s.may_open(0, "n1", false, true), MayOpen::Yes);
    assert_eq!(s.may_open(3, "n1", true, true), MayOpen::Yes);
    assert_eq!(
        s.may_open(3, "n1", false, true),
        MayOpen::Wait {
            holder: "n2".into(),
            first: true
        }
    );
    assert_eq!(
        s.may_open(3, "n1", false, true),
        MayOpen::Wait {
            holder: "n2".into(),
            first: false
        }
    );
    assert_eq!(s.may_open(3, "n2", false, true), MayOpen::Yes);
}

#[test]
fn a_node_that_never_heard_a_peer_continues_its_own_stores_and_creates_none() {
    let mut s = scheduler(false);
    // Nothing known of holders: only gossip could say who holds what.
    assert_eq!(s.may_open(2, "n1", true, false), MayOpen::Yes, "on disk");
    assert_eq!(
        s.may_open(0, "n1", false, false),
        MayOpen::Unheard { first: true }
    );
    assert_eq!(
        s.may_open(0, "n1", false, false),
        MayOpen::Unheard { first: false }
    );
    // A peer heard: the store may be created.
    assert_eq!(s.may_open(0, "n1", false, true), MayOpen::Yes);
}

#[test]
fn restarts_are_counted_and_hand_backs_listed() {
    let mut s = scheduler(false);
    s.opened(0, "a");
    s.restarted(0, "b");
    assert_eq!((s.restarts(), s.held(0)), (1, Some(&"b")));
    s.releasing(0);
    assert_eq!(s.handing_back(), vec![0]);
    s.released(0);
    assert!(s.handing_back().is_empty());
}

#[test]
fn a_restarted_partition_numbers_its_writes_after_all_seen_so_none_is_acknowledged_early() {
    let mut s = scheduler(true);
    s.opened(0, "a");
    s.taken(0, 0);
    assert_eq!(s.admitted(0, 3, 1), None);
    assert_eq!(s.covered(0, 5), vec![1], "a checkpoint covering 5");
    assert_eq!(s.admitted(0, 7, 2), None, "waiting");
    // The actor fails; its successor continues the same store.
    s.restarted(0, "b");
    let floor = s.write_floor(0);
    assert_eq!(floor, 7);
    // Its first admission waits for a checkpoint like any other (numbered
    // from 0 again, write 1 would have counted as covered by 5).
    assert_eq!(s.admitted(0, floor + 1, 3), None);
    assert_eq!(s.covered(0, floor + 1), vec![2, 3]);
    // Without a chain there is nothing to wait for.
    assert_eq!(scheduler(false).write_floor(0), 0);
}

/// Reads `outbox` as the node does: pages of [`PAGE`] after the cursor.
fn read_pass(
    schedule: &mut OutboxSchedule<u64>,
    outbox: &BTreeMap<u64, ()>,
    deliverable: impl Fn(u64) -> bool,
) -> Vec<u64> {
    let pass = schedule.pass();
    let mut reading = schedule.read(0, pass);
    let mut sent = Vec::new();
    loop {
        let page: Vec<u64> = match reading.after() {
            Some(&k) => outbox.range(k + 1..).take(PAGE).map(|(k, _)| *k).collect(),
            None => outbox.keys().take(PAGE).copied().collect(),
        };
        let full = page.len() == PAGE;
        for key in page {
            if schedule.saw(&mut reading, key) == Batch::OnItsWay {
                continue;
            }
            if !deliverable(key) {
                reading.held_back();
                continue;
            }
            reading.sent();
            sent.push(key);
        }
        if !reading.more(full) {
            break;
        }
    }
    schedule.finish(reading);
    for &key in &sent {
        schedule.sending(0, key);
    }
    sent
}

#[test]
fn a_pass_reads_on_from_where_the_last_stopped_and_from_the_start_after_a_failure() {
    let mut schedule = OutboxSchedule::new(1);
    let mut outbox: BTreeMap<u64, ()> = (0..10).map(|k| (k, ())).collect();
    assert_eq!(
        read_pass(&mut schedule, &outbox, |_| true),
        (0..10).collect::<Vec<_>>()
    );
    // Nothing new: nothing sent, and nothing read again.
    assert!(read_pass(&mut schedule, &outbox, |_| true).is_empty());
    outbox.insert(10, ());
    assert_eq!(read_pass(&mut schedule, &outbox, |_| true), vec![10]);
    // Batch 3 is refused: the next pass starts over and finds it.
    schedule.answered(0, 3, false);
    assert_eq!(read_pass(&mut schedule, &outbox, |_| true), vec![3]);
    // A batch with no owner yet holds the cursor back.
    outbox.insert(11, ());
    assert!(read_pass(&mut schedule, &outbox, |k| k != 11).is_empty());
    assert_eq!(read_pass(&mut schedule, &outbox, |_| true), vec![11]);
    assert_eq!(schedule.on_way(), 12);
    assert!(!schedule.quiet());
}

#[test]
fn a_batch_committed_behind_the_cursor_is_found_by_a_full_pass() {
    let mut schedule = OutboxSchedule::new(1);
    let mut outbox: BTreeMap<u64, ()> = [(1, ()), (5, ())].into();
    assert_eq!(read_pass(&mut schedule, &outbox, |_| true), vec![1, 5]);
    // Key 3 was reserved before 5 and committed after the pass read 5.
    outbox.insert(3, ());
    let mut passes = 1;
    loop {
        passes += 1;
        if read_pass(&mut schedule, &outbox, |_| true) == vec![3] {
            break;
        }
        assert!(passes <= FULL_PASS_EVERY, "batch 3 never found");
    }
    assert_eq!(passes, FULL_PASS_EVERY);
}

#[test]
fn a_pass_sends_at_most_a_page_of_new_batches_per_outbox() {
    let mut schedule = OutboxSchedule::new(1);
    let outbox: BTreeMap<u64, ()> = (0..(3 * PAGE as u64)).map(|k| (k, ())).collect();
    assert_eq!(read_pass(&mut schedule, &outbox, |_| true).len(), PAGE);
    assert_eq!(read_pass(&mut schedule, &outbox, |_| true)[0], PAGE as u64);
}

/// A deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// Writers reserve keys in order but commit them in any order; sends fail
/// or wait; owners come and go. Every batch is delivered, and no batch is
/// ever on its way twice at once.
#[test]
fn every_batch_is_delivered_once_on_its_way_whatever_the_order() {
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut schedule = OutboxSchedule::new(1);
        let mut outbox = BTreeMap::new();
        let mut reserved = Vec::new();
        let mut next_key = 0u64;
        let mut in_flight = BTreeSet::new();
        let mut delivered = BTreeSet::new();
        for step in 0..400 {
            let writing = step < 300;
            if writing && rng.chance(60) {
                reserved.push(next_key);
                next_key += 1;
            }
            if !reserved.is_empty() && rng.chance(50) {
                let at = (rng.next() % reserved.len() as u64) as usize;
                outbox.insert(reserved.swap_remove(at), ());
            }
            if !writing {
                for key in reserved.drain(..) {
                    outbox.insert(key, ());
                }
            }
            let owned = rng.chance(80);
            for key in read_pass(&mut schedule, &outbox, |_| owned) {
                assert!(
                    in_flight.insert(key),
                    "seed {seed}: batch {key} sent twice at once"
                );
            }
            let answered: Vec<u64> = in_flight
                .iter()
                .copied()
                .filter(|_| rng.chance(40))
                .collect();
            for key in answered {
                in_flight.remove(&key);
                let ok = rng.chance(70);
                if ok {
                    outbox.remove(&key);
                    delivered.insert(key);
                }
                schedule.answered(0, key, ok);
            }
        }
        // Drain: every owner up, every send succeeds.
        for _ in 0..(4 * FULL_PASS_EVERY) {
            for key in read_pass(&mut schedule, &outbox, |_| true) {
                assert!(
                    in_flight.insert(key),
                    "seed {seed}: batch {key} sent twice at once"
                );
            }
            for key in std::mem::take(&mut in_flight) {
                outbox.remove(&key);
                delivered.insert(key);
                schedule.answered(0, key, true);
            }
        }
        assert!(
            outbox.is_empty(),
            "seed {seed}: left behind {:?}",
            outbox.keys()
        );
        assert_eq!(delivered.len() as u64, next_key, "seed {seed}");
        assert!(schedule.quiet());
    }
}

#[test]
fn a_node_is_idle_only_with_nothing_queued_and_every_partition_answering() {
    let totals = |queued| Totals {
        queued,
        ..Totals::default()
    };
    assert!(!totals(1).idle(true));
    // A partition that did not answer may hold work.
    assert!(!totals(0).idle(false));
    assert!(totals(0).idle(true));
}

#[test]
fn partitions_with_batches_awaiting_a_checkpoint_are_named() {
    let mut s = scheduler(true);
    s.opened(1, "p1");
    s.opened(2, "p2");
    s.taken(1, 0);
    s.taken(2, 0);
    assert!(s.awaiting_checkpoint().is_empty());
    assert_eq!(s.admitted(2, 3, 9), None);
    assert_eq!(s.awaiting_checkpoint(), vec![2]);
    assert_eq!(s.covered(2, 3), vec![9]);
    assert!(s.awaiting_checkpoint().is_empty());
    // Without a chain nothing ever waits.
    let mut s = scheduler(false);
    s.opened(1, "p1");
    assert_eq!(s.admitted(1, 3, 9), Some(9));
    assert!(s.awaiting_checkpoint().is_empty());
}

/// A seed view: `chain` or not, assigned 0..4, shunning `shunned`.
fn view<'a>(chain: bool, shunned: &'a [u16], alone: bool, may_create: bool) -> SeedView<'a> {
    SeedView {
        chain,
        assigned: &[0, 1, 2, 3],
        shunned,
        alone,
        may_create_stores: may_create,
    }
}

#[test]
fn seeds_wait_for_the_assignment_unless_the_node_is_alone_or_shuns_a_partition() {
    let mut s = scheduler(true);
    // With a chain, heard peers: every assigned partition must be held.
    assert!(!s.may_offer_seeds(view(true, &[], false, true)));
    s.opened(0, "p0");
    assert!(!s.may_offer_seeds(view(true, &[], false, true)));
    // Alone: what it holds is enough (the rest may be a peer's).
    assert!(s.may_offer_seeds(view(true, &[], true, true)));
    // A shunned partition is not waited for.
    s.opened(1, "p1");
    s.opened(2, "p2");
    assert!(!s.may_offer_seeds(view(true, &[], false, true)));
    assert!(s.may_offer_seeds(view(true, &[3], false, true)));
}

#[test]
fn without_a_chain_seeds_wait_only_while_no_peer_was_heard_and_nothing_is_held() {
    let mut s = scheduler(false);
    assert!(
        s.may_offer_seeds(view(false, &[], false, true)),
        "stores are made"
    );
    // Unheard: it holds nothing and may create nothing; seeds wait.
    assert!(!s.may_offer_seeds(view(false, &[], true, false)));
    // A store continued from its own disk is enough.
    s.opened(2, "p2");
    assert!(s.may_offer_seeds(view(false, &[], true, false)));
}

#[test]
fn links_go_straight_only_into_a_partition_held_here_and_with_a_chain_only_the_finders() {
    use super::view::admits_straight;
    // Without a chain, any partition held here takes them straight.
    assert!(admits_straight(true, false, 3, Some(1)));
    assert!(!admits_straight(false, false, 3, Some(3)), "not held here");
    // With a chain, only the finder's own partition, and seeds.
    assert!(admits_straight(true, true, 3, Some(3)));
    assert!(admits_straight(true, true, 3, None));
    assert!(!admits_straight(true, true, 3, Some(1)));
    assert!(!admits_straight(false, true, 3, None));
    // The machine's routes: held here until it is handed back.
    let mut s = scheduler(true);
    assert!(!s.admits_straight(2, None), "not held yet");
    s.opened(2, "p2");
    assert!(s.admits_straight(2, None));
    assert!(s.admits_straight(2, Some(2)));
    assert!(
        !s.admits_straight(2, Some(1)),
        "a chain: the finder's outbox"
    );
    s.releasing(2);
    assert!(!s.admits_straight(2, Some(2)), "being handed back");
    let mut plain = scheduler(false);
    plain.opened(2, "p2");
    assert!(plain.admits_straight(2, Some(1)), "one disk: straight");
}
