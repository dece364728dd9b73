//! The politeness schedule, with an injected clock: every instant is an
//! offset from one `t0`, nothing sleeps.

use super::*;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn policy(max_in_flight: u32) -> Policy {
    Policy::simple(Duration::from_secs(1), 10.0, max_in_flight)
}

#[test]
fn one_in_flight_then_delay_from_completion() {
    let p = policy(1);
    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0);
    let permit = host.try_acquire(&p, t0).unwrap();
    assert_eq!(host.try_acquire(&p, t0), Err(Wait::Busy));
    let done = t0 + ms(200);
    let r = host.release(&p, permit, done, ms(200), Outcome::Success, 0.0);
    // 200 ms response × 10 = 2 s after completion.
    assert_eq!(r.delay, Duration::from_secs(2));
    let due = done + Duration::from_secs(2);
    assert_eq!(host.try_acquire(&p, due - ms(1)), Err(Wait::Until(due)));
    assert!(host.try_acquire(&p, due).is_ok());
}

#[test]
fn two_slots_and_every_completion_pushes_the_schedule() {
    let p = policy(2);
    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0);
    let a = host.try_acquire(&p, t0).unwrap();
    let b = host.try_acquire(&p, t0).unwrap();
    assert_eq!(host.try_acquire(&p, t0), Err(Wait::Busy));
    host.release(&p, a, t0 + ms(10), ms(10), Outcome::Success, 0.0);
    assert_eq!(host.in_flight(), 1);
    assert_eq!(
        host.try_acquire(&p, t0 + ms(500)),
        Err(Wait::Until(t0 + ms(1010)))
    );
    // A later, slower completion moves the schedule further out, never back.
    host.release(&p, b, t0 + ms(150), ms(150), Outcome::Success, 0.0);
    assert_eq!(host.next_allowed(), t0 + ms(150) + ms(1500));
}

#[test]
fn crawl_delay_counts_up_to_its_cap() {
    let p = policy(1);
    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0);
    host.set_crawl_delay(Some(Duration::from_secs(5)));
    let permit = host.try_acquire(&p, t0).unwrap();
    host.release(&p, permit, t0 + ms(10), ms(10), Outcome::Success, 0.0);
    assert_eq!(host.next_allowed(), t0 + ms(10) + Duration::from_secs(5));
    host.set_crawl_delay(Some(Duration::from_secs(3600)));
    let t1 = host.next_allowed();
    let permit = host.try_acquire(&p, t1).unwrap();
    host.release(&p, permit, t1, ms(0), Outcome::Success, 0.0);
    assert_eq!(host.next_allowed(), t1 + p.max_crawl_delay);
}

#[test]
fn retry_after_is_honoured_and_capped() {
    let p = policy(1);
    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0);
    let permit = host.try_acquire(&p, t0).unwrap();
    let throttled = Outcome::Throttled {
        retry_after: Some(Duration::from_secs(30)),
    };
    host.release(&p, permit, t0, ms(0), throttled, 0.0);
    assert_eq!(host.next_allowed(), t0 + Duration::from_secs(30));
    let t1 = host.next_allowed();
    let permit = host.try_acquire(&p, t1).unwrap();
    let huge = Outcome::Throttled {
        retry_after: Some(Duration::from_secs(86_400)),
    };
    host.release(&p, permit, t1, ms(0), huge, 0.0);
    assert_eq!(host.next_allowed(), t1 + p.max_retry_after);
}

#[test]
fn retry_after_parses_seconds_and_http_dates() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    assert_eq!(
        parse_retry_after("120", now),
        Some(Duration::from_secs(120))
    );
    let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
    assert_eq!(
        parse_retry_after(&later, now),
        Some(Duration::from_secs(90))
    );
    let earlier = httpdate::fmt_http_date(now - Duration::from_secs(90));
    assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
    assert_eq!(parse_retry_after("soon", now), None);
    assert_eq!(
        Outcome::of_status(429, Some("7"), now),
        Outcome::Throttled {
            retry_after: Some(Duration::from_secs(7))
        }
    );
    assert_eq!(
        Outcome::of_status(503, None, now),
        Outcome::Throttled { retry_after: None }
    );
    assert_eq!(Outcome::of_status(502, Some("7"), now), Outcome::Failure);
    assert_eq!(Outcome::of_status(404, None, now), Outcome::Success);
}

#[test]
fn failures_back_off_exponentially_with_bounded_jitter_then_park() {
    let mut p = policy(1);
    p.backoff_base = Duration::from_secs(2);
    p.backoff_max = Duration::from_secs(20);
    p.park_after_failures = 5;
    p.park_duration = Duration::from_secs(3600);
    assert_eq!(p.backoff(1, 0.0), Duration::from_secs(2));
    assert_eq!(p.backoff(3, 0.0), Duration::from_secs(8));
    assert_eq!(p.backoff(10, 0.0), Duration::from_secs(20));
    assert_eq!(
        p.backoff(1, 0.999),
        Duration::from_secs(2).mul_f64(1.0 + 0.25 * 0.999)
    );

    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0);
    let mut now = t0;
    let mut delays = Vec::new();
    for _ in 0..5 {
        now = host.next_allowed().max(now);
        let permit = host.try_acquire(&p, now).unwrap();
        let r = host.release(&p, permit, now, ms(0), Outcome::Failure, 0.0);
        delays.push((r.delay.as_secs(), r.parked));
    }
    assert_eq!(
        delays,
        [
            (2, false),
            (4, false),
            (8, false),
            (16, false),
            (3600, true)
        ]
    );
    assert!(host.parked(now));
    assert!(!host.parked(now + Duration::from_secs(3600)));
    // A success clears the failure count.
    now = host.next_allowed();
    let permit = host.try_acquire(&p, now).unwrap();
    host.release(&p, permit, now, ms(0), Outcome::Failure, 0.0);
    let permit = host.try_acquire(&p, host.next_allowed()).unwrap();
    host.release(
        &p,
        permit,
        host.next_allowed(),
        ms(0),
        Outcome::Success,
        0.0,
    );
    assert_eq!(host.failures(), 0);
}

#[test]
fn schedule_survives_a_restart_and_a_crash_owes_the_last_delay() {
    let p = policy(1);
    let t0 = Instant::now();
    let wall0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut host = HostPoliteness::new(t0);
    let permit = host.try_acquire(&p, t0).unwrap();
    host.release(&p, permit, t0 + ms(300), ms(300), Outcome::Success, 0.0); // owes 3 s
    let saved = host.schedule(t0 + ms(300), wall0 + ms(300));
    // Clean restart 1 s later (wall and monotonic clocks both moved 1 s).
    let (t1, wall1) = (t0 + ms(1300), wall0 + ms(1300));
    let clean = HostPoliteness::restore(&saved, t1, wall1, false);
    assert!(clean.next_allowed() >= t0 + ms(3300));
    assert!(clean.next_allowed() <= t0 + ms(3302));
    // After a crash the last delay is owed again from the restart.
    let crashed = HostPoliteness::restore(&saved, t1, wall1, true);
    assert!(crashed.next_allowed() >= t1 + Duration::from_secs(3));
}

#[test]
fn deferral_never_moves_the_schedule_earlier() {
    let p = policy(1);
    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0 + Duration::from_secs(5));
    host.defer_until(t0 + Duration::from_secs(1));
    assert_eq!(host.next_allowed(), t0 + Duration::from_secs(5));
    host.defer_until(t0 + Duration::from_secs(9));
    assert_eq!(
        host.try_acquire(&p, t0 + Duration::from_secs(8)),
        Err(Wait::Until(t0 + Duration::from_secs(9)))
    );
}

#[test]
fn a_cancelled_permit_changes_nothing_but_the_slot() {
    let p = policy(1);
    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0);
    let permit = host.try_acquire(&p, t0).unwrap();
    host.cancel(permit);
    assert_eq!(host.in_flight(), 0);
    assert_eq!(host.next_allowed(), t0);
    assert!(host.try_acquire(&p, t0).is_ok());
}

#[test]
fn the_adaptive_delay_has_a_ceiling_and_counts_only_the_wire_time() {
    let mut p = policy(1);
    p.max_delay = Duration::from_secs(20);
    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0);
    // The permit was taken at t0, but the request only reached the wire
    // 5 s later (a global fetch slot, DNS) and took 100 ms there.
    let permit = host.try_acquire(&p, t0).unwrap();
    let done = t0 + ms(5100);
    let r = host.release(&p, permit, done, ms(100), Outcome::Success, 0.0);
    assert_eq!(
        r.delay,
        Duration::from_secs(1),
        "10 × 100 ms, not 10 × 5.1 s"
    );
    // A 30 s timeout would owe 300 s; the ceiling holds it to 20 s.
    let t1 = host.next_allowed();
    let permit = host.try_acquire(&p, t1).unwrap();
    let r = host.release(
        &p,
        permit,
        t1 + ms(30_000),
        ms(30_000),
        Outcome::Success,
        0.0,
    );
    assert_eq!(r.delay, Duration::from_secs(20));
    // Crawl-delay keeps its own cap, above max_delay.
    host.set_crawl_delay(Some(Duration::from_secs(45)));
    let t2 = host.next_allowed();
    let permit = host.try_acquire(&p, t2).unwrap();
    let r = host.release(&p, permit, t2, ms(10), Outcome::Success, 0.0);
    assert_eq!(
        (r.delay, r.reason),
        (Duration::from_secs(45), WaitReason::CrawlDelay)
    );
}

#[test]
fn a_slowdown_stretches_the_wait_owed_since_the_last_completion() {
    let p = policy(1);
    let t0 = Instant::now();
    let mut host = HostPoliteness::new(t0);
    let permit = host.try_acquire(&p, t0).unwrap();
    let done = t0 + ms(50);
    // 50 ms × 10 = 500 ms, under the 1 s floor: owes 1 s.
    host.release(&p, permit, done, ms(50), Outcome::Success, 0.0);
    assert_eq!(host.next_allowed(), done + Duration::from_secs(1));
    host.stretch_to(Duration::from_secs(5));
    assert_eq!(host.next_allowed(), done + Duration::from_secs(5));
    // A shorter floor than what is owed changes nothing.
    host.stretch_to(Duration::from_secs(2));
    assert_eq!(host.next_allowed(), done + Duration::from_secs(5));
    let slowed = p.slowed(&slowdown::Slowdown {
        min_delay_ms: Some(5_000),
        max_in_flight: None,
    });
    let due = done + Duration::from_secs(5);
    assert_eq!(
        host.try_acquire(&slowed, due - ms(1)),
        Err(Wait::Until(due))
    );
    assert!(host.try_acquire(&slowed, due).is_ok());
}
