//! The lease machine, step by step on a fake clock.

use super::*;

const S: LeaseSettings = LeaseSettings {
    lease: Duration::from_secs(10),
    checkpoint_every: Duration::from_secs(3),
    request_timeout: Duration::from_secs(5),
    retry: Duration::from_secs(1),
};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn drain(m: &mut PartitionLease) -> Vec<Effect> {
    std::iter::from_fn(|| m.poll()).collect()
}

fn other(epoch: u64) -> Owner {
    Owner {
        node: "n2".into(),
        incarnation: 77,
        epoch,
    }
}

fn head(number: u64, owner: Owner, released: bool, hold_ms: u64) -> HeadView {
    HeadView {
        number,
        owner,
        released,
        hold_ms,
        covers: 40,
    }
}

/// The draft of the only `Publish` among `effects`.
fn published(effects: &[Effect]) -> Draft {
    let drafts: Vec<_> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Publish(d) => Some(d.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(drafts.len(), 1, "{effects:?}");
    drafts[0].clone()
}

/// Runs an owner's timers up to `until`, every checkpoint and publish
/// succeeding at once.
fn renew_until(m: &mut PartitionLease, until: Instant) {
    while let Some(at) = m.poll_timeout().filter(|&at| at <= until) {
        m.handle_timeout(at);
        while let Some(effect) = m.poll() {
            match effect {
                Effect::Checkpoint { .. } => m.on_checkpoint(at, Some(0)),
                Effect::Publish(d) => m.on_published(at, d.number, Published::Created),
                Effect::Durable { .. } => {}
                other => panic!("unexpected {other:?}"),
            }
        }
    }
}

/// A machine of node n1 holding a new partition (epoch 1) since `t0`.
fn owner(t0: Instant) -> PartitionLease {
    owner_as(PartitionLease::new("n1", 1, S), t0)
}

/// Machine `m` of node n1, holding a new partition (epoch 1) since `t0`.
fn owner_as(mut m: PartitionLease, t0: Instant) -> PartitionLease {
    m.want(t0, true);
    assert_eq!(drain(&mut m), [Effect::ReadHead]);
    m.on_head(t0, Ok(None));
    let claim = published(&drain(&mut m));
    assert_eq!(
        (claim.number, claim.kind, claim.owner.epoch),
        (1, DraftKind::Claim, 1)
    );
    m.on_published(t0, 1, Published::Created);
    let effects = drain(&mut m);
    assert!(
        matches!(&effects[..], [Effect::Take { from: None, hold_until, .. }] if *hold_until == t0),
        "{effects:?}"
    );
    m
}

#[test]
fn a_new_partition_is_claimed_at_once_and_fetches_at_once() {
    let t0 = Instant::now();
    let m = owner(t0);
    assert!(m.may_fetch(t0));
    assert_eq!(m.snapshot().phase, "held");
    assert_eq!(m.snapshot().epoch, Some(1));
}

#[test]
fn a_live_owners_head_is_claimed_only_after_a_whole_lease_unchanged_and_held_after() {
    let t0 = Instant::now();
    let mut m = PartitionLease::new("n1", 1, S);
    m.want(t0, true);
    drain(&mut m);
    m.on_head(t0, Ok(Some(head(4, other(3), false, 0))));
    assert!(drain(&mut m).is_empty(), "no claim over a fresh head");
    // It reads again before the lease is out, sees the same head...
    let wake = m.poll_timeout().unwrap();
    assert!(wake <= t0 + S.lease);
    m.handle_timeout(wake);
    assert_eq!(drain(&mut m), [Effect::ReadHead]);
    m.on_head(wake, Ok(Some(head(4, other(3), false, 0))));
    assert!(drain(&mut m).is_empty());
    // ...then the owner renews: the watch starts over.
    let t1 = t0 + secs(6);
    m.handle_timeout(t1);
    drain(&mut m);
    m.on_head(t1, Ok(Some(head(5, other(3), false, 0))));
    assert!(drain(&mut m).is_empty());
    m.handle_timeout(t0 + secs(12));
    drain(&mut m);
    m.on_head(t0 + secs(12), Ok(Some(head(5, other(3), false, 0))));
    assert!(
        drain(&mut m).is_empty(),
        "5 was seen at t1; t1 + lease is t0 + 16"
    );
    let t2 = t1 + S.lease;
    m.handle_timeout(t2);
    assert_eq!(drain(&mut m), [Effect::ReadHead]);
    m.on_head(t2, Ok(Some(head(5, other(3), false, 0))));
    let claim = published(&drain(&mut m));
    assert_eq!((claim.number, claim.owner.epoch, claim.covers), (6, 6, 40));
    m.on_published(t2 + secs(1), 6, Published::Created);
    let effects = drain(&mut m);
    let hold = t1 + S.lease + S.request_timeout;
    assert!(
        matches!(&effects[..], [Effect::Take { hold_until, from: Some(h), .. }] if *hold_until == hold && h.number == 5),
        "{effects:?}"
    );
    assert!(!m.may_fetch(hold - Duration::from_millis(1)));
    assert!(m.may_fetch(hold));
}

#[test]
fn a_released_head_is_claimed_at_once_and_its_hold_kept() {
    let t0 = Instant::now();
    let mut m = PartitionLease::new("n1", 1, S);
    m.want(t0, true);
    drain(&mut m);
    m.on_head(t0, Ok(Some(head(9, other(7), true, 2_500))));
    let claim = published(&drain(&mut m));
    assert_eq!(claim.number, 10);
    let ack = t0 + secs(1);
    m.on_published(ack, 10, Published::Created);
    drain(&mut m);
    assert!(!m.may_fetch(ack + Duration::from_millis(2_499)));
    assert!(m.may_fetch(ack + Duration::from_millis(2_500)));
}

#[test]
fn a_restarted_node_claims_its_old_lifes_partition_at_once_but_holds_it() {
    let t0 = Instant::now();
    let mut m = PartitionLease::new("n1", 2, S);
    m.want(t0, true);
    drain(&mut m);
    let old_life = Owner {
        node: "n1".into(),
        incarnation: 1,
        epoch: 3,
    };
    m.on_head(t0, Ok(Some(head(8, old_life, false, 0))));
    let claim = published(&drain(&mut m));
    assert_eq!(claim.number, 9);
    m.on_published(t0, 9, Published::Created);
    drain(&mut m);
    renew_until(&mut m, t0 + S.lease + S.request_timeout);
    assert!(!m.may_fetch(t0 + S.lease));
    assert!(m.may_fetch(t0 + S.lease + S.request_timeout));
}

#[test]
fn an_owner_checkpoints_and_what_it_publishes_becomes_durable() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    assert_eq!(m.poll_timeout(), Some(t0 + S.checkpoint_every));
    m.handle_timeout(t0 + S.checkpoint_every);
    assert_eq!(drain(&mut m), [Effect::Checkpoint { number: 2 }]);
    let t1 = t0 + secs(4);
    m.on_checkpoint(t1, Some(17));
    let draft = published(&drain(&mut m));
    assert_eq!(
        (draft.kind, draft.covers, draft.owner.epoch),
        (DraftKind::Checkpoint, 17, 1)
    );
    m.on_published(t1 + secs(2), 2, Published::Created);
    assert_eq!(drain(&mut m), [Effect::Durable { covers: 17 }]);
    // The lease counts from the send, not the answer.
    assert!(m.may_fetch(deadline(t1) - Duration::from_millis(1)));
    assert!(!m.may_fetch(deadline(t1)));
}

#[test]
fn a_failed_checkpoint_renews_the_lease_with_the_last_files() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    m.handle_timeout(t0 + S.checkpoint_every);
    drain(&mut m);
    m.on_checkpoint(t0 + S.checkpoint_every, None);
    let draft = published(&drain(&mut m));
    assert_eq!(
        (draft.kind, draft.new_checkpoint, draft.covers),
        (DraftKind::Renewal, false, 0)
    );
}

/// The last instant an owner whose lease runs from `t` may start.
fn deadline(t: Instant) -> Instant {
    t + S.lease - S.margin()
}

#[test]
fn an_owner_that_cannot_publish_for_a_lease_stops_by_itself() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    let t1 = t0 + S.checkpoint_every;
    m.handle_timeout(t1);
    drain(&mut m);
    m.on_checkpoint(t1, Some(3));
    drain(&mut m);
    // Every attempt fails, until the lease (from t0) runs out.
    let mut now = t1;
    let stopped = loop {
        m.on_published(now, 2, Published::Failed);
        assert!(m.may_fetch(now));
        now = m.poll_timeout().unwrap();
        m.handle_timeout(now);
        let effects = drain(&mut m);
        if effects.iter().any(|e| matches!(e, Effect::Stop { .. })) {
            break effects;
        }
    };
    assert_eq!(now, deadline(t0));
    assert_eq!(
        stopped,
        [
            Effect::Stop {
                reason: StopReason::Lapsed
            },
            Effect::ReadHead
        ]
    );
    assert!(!m.may_fetch(now));
    assert_eq!(m.snapshot().phase, "observing");
    // Its last create lands after all: ignored (the head shows it; the
    // node claims again over its own manifest, and holds).
    m.on_published(now, 2, Published::Created);
    assert!(drain(&mut m).is_empty());
    let mine = HeadView {
        number: 2,
        owner: Owner {
            node: "n1".into(),
            incarnation: 1,
            epoch: 1,
        },
        released: false,
        hold_ms: 0,
        covers: 3,
    };
    m.on_head(now, Ok(Some(mine)));
    let claim = published(&drain(&mut m));
    assert_eq!((claim.number, claim.owner.epoch), (3, 3));
    m.on_published(now, 3, Published::Created);
    drain(&mut m);
    renew_until(&mut m, now + S.lease + S.request_timeout);
    assert!(!m.may_fetch(now + S.lease));
    assert!(m.may_fetch(now + S.lease + S.request_timeout));
}

#[test]
fn the_lease_counts_from_the_first_attempts_send() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    let t1 = t0 + S.checkpoint_every;
    m.handle_timeout(t1);
    drain(&mut m);
    m.on_checkpoint(t1, Some(3));
    drain(&mut m);
    m.on_published(t1, 2, Published::Failed);
    let t2 = m.poll_timeout().unwrap();
    m.handle_timeout(t2);
    drain(&mut m);
    m.on_published(t2, 2, Published::Created);
    assert_eq!(drain(&mut m), [Effect::Durable { covers: 3 }]);
    assert!(m.may_fetch(deadline(t1) - Duration::from_millis(1)));
    assert!(!m.may_fetch(deadline(t1)));
}

#[test]
fn an_owner_whose_number_is_taken_by_another_is_fenced_at_once() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    m.handle_timeout(t0 + S.checkpoint_every);
    drain(&mut m);
    m.on_checkpoint(t0 + S.checkpoint_every, Some(5));
    drain(&mut m);
    m.on_published(t0 + secs(4), 2, Published::Taken { by: Some(other(2)) });
    assert_eq!(
        drain(&mut m),
        [
            Effect::Stop {
                reason: StopReason::Fenced
            },
            Effect::ReadHead
        ]
    );
    assert!(!m.may_fetch(t0 + secs(4)));
    assert_eq!(m.snapshot().phase, "observing");
}

#[test]
fn a_create_that_landed_but_whose_answer_was_lost_counts_as_ours() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    m.handle_timeout(t0 + S.checkpoint_every);
    drain(&mut m);
    m.on_checkpoint(t0 + S.checkpoint_every, Some(5));
    let draft = published(&drain(&mut m));
    m.on_published(t0 + secs(4), 2, Published::Failed);
    m.handle_timeout(t0 + secs(5));
    assert_eq!(published(&drain(&mut m)), draft);
    m.on_published(
        t0 + secs(5),
        2,
        Published::Taken {
            by: Some(draft.owner.clone()),
        },
    );
    assert_eq!(drain(&mut m), [Effect::Durable { covers: 5 }]);
    assert!(m.may_fetch(t0 + secs(5)));
}

#[test]
fn a_claim_whose_answer_was_lost_is_adopted_from_the_head() {
    let t0 = Instant::now();
    let mut m = PartitionLease::new("n1", 1, S);
    m.want(t0, true);
    drain(&mut m);
    m.on_head(t0, Ok(Some(head(4, other(1), true, 0))));
    let claim = published(&drain(&mut m));
    m.on_published(t0 + secs(1), 5, Published::Failed);
    assert_eq!(drain(&mut m), [Effect::ReadHead]);
    let mine = HeadView {
        number: 5,
        owner: claim.owner.clone(),
        released: false,
        hold_ms: 0,
        covers: 40,
    };
    m.on_head(t0 + secs(2), Ok(Some(mine)));
    let effects = drain(&mut m);
    assert!(
        matches!(&effects[..], [Effect::Take { owner, .. }] if owner.epoch == 5),
        "{effects:?}"
    );
    // The lease counts from the claim's send.
    assert!(m.may_fetch(deadline(t0) - Duration::from_millis(1)));
    assert!(!m.may_fetch(deadline(t0)));
}

#[test]
fn a_clean_hand_back_drains_then_publishes_its_hold_and_stops() {
    let t0 = Instant::now();
    let mut m = PartitionLease::new("n1", 1, S);
    m.want(t0, true);
    drain(&mut m);
    // Claimed over a dead owner: held until t0 + 15 s.
    m.on_head(t0, Ok(Some(head(2, other(1), false, 0))));
    m.on_head(t0, Ok(Some(head(2, other(1), false, 0))));
    let t1 = t0 + S.lease;
    m.handle_timeout(t1);
    drain(&mut m);
    m.on_head(t1, Ok(Some(head(2, other(1), false, 0))));
    drain(&mut m);
    m.on_published(t1, 3, Published::Created);
    drain(&mut m);
    // Gossip moves it away a second later, before any host started.
    let t2 = t1 + secs(1);
    m.want(t2, false);
    assert_eq!(drain(&mut m), [Effect::Drain]);
    assert!(!m.may_fetch(t0 + secs(20)));
    m.on_drained(t2, Duration::from_millis(300));
    assert_eq!(drain(&mut m), [Effect::Checkpoint { number: 4 }]);
    m.on_checkpoint(t2, Some(50));
    let draft = published(&drain(&mut m));
    assert_eq!(draft.kind, DraftKind::Release);
    assert!(draft.released);
    // The hold it serves (to t0 + 15 s) is handed on: 4 s are left.
    assert_eq!(draft.hold_ms, 4_000);
    m.on_published(t2, 4, Published::Created);
    assert_eq!(
        drain(&mut m),
        [
            Effect::Durable { covers: 50 },
            Effect::Stop {
                reason: StopReason::Released
            }
        ]
    );
    assert_eq!(m.snapshot().phase, "idle");
}

#[test]
fn settings_need_two_publishes_per_lease() {
    assert!(S.validate().is_ok());
    let bad = LeaseSettings {
        checkpoint_every: secs(6),
        ..S
    };
    assert!(bad.validate().unwrap_err().contains("half the lease"));
}

#[test]
fn watermarks_acknowledge_only_what_a_publish_covers() {
    let mut w = Watermarks::default();
    assert_eq!(w.admitted(3, "a"), None);
    assert_eq!(w.admitted(7, "b"), None);
    assert_eq!(w.durable(5), ["a"]);
    assert_eq!(w.admitted(4, "late"), Some("late"));
    assert_eq!(w.waiting(), 1);
    assert_eq!(w.forget(), ["b"]);
    assert!(w.durable(100).is_empty());
}

#[test]
fn requests_may_start_until_the_lease_ends_and_not_while_handing_back() {
    let t0 = Instant::now();
    let mut m = PartitionLease::new("n1", 1, S);
    assert_eq!(m.fetch_until(), None, "not held");
    m.want(t0, true);
    drain(&mut m);
    m.on_head(t0, Ok(None));
    drain(&mut m);
    assert_eq!(m.fetch_until(), None, "claimed, not yet acknowledged");
    m.on_published(t0, 1, Published::Created);
    drain(&mut m);
    assert_eq!(m.fetch_until(), Some(deadline(t0)));
    // A renewal moves it on, to a lease from the renewal's send.
    let t1 = t0 + S.checkpoint_every;
    renew_until(&mut m, t1);
    assert_eq!(m.fetch_until(), Some(deadline(t1)));
    // Past it, no request may start, stopped or not yet.
    assert!(!m.may_fetch(deadline(t1)));
    // Handing back: none at all.
    m.want(t1, false);
    drain(&mut m);
    assert_eq!(m.fetch_until(), None);
}

#[test]
fn a_take_that_cannot_be_opened_is_handed_back_and_shunned_for_a_doubling_while() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    assert_eq!(m.on_open_failed(t0), TAKE_RETRY_FIRST);
    // Handed back, through a drain (its final checkpoint follows).
    assert!(drain(&mut m).contains(&Effect::Drain));
    assert!(!m.snapshot().wanted);
    // Advice to take it again is ignored until the wait is over...
    m.want(t0 + TAKE_RETRY_FIRST / 2, true);
    assert!(!m.snapshot().wanted);
    // ...and heeded after it.
    m.want(t0 + TAKE_RETRY_FIRST, true);
    assert!(m.snapshot().wanted);
    // Each failure in a row waits twice as long, up to the cap; an open
    // that works starts over.
    let t1 = t0 + secs(100);
    assert_eq!(m.on_open_failed(t1), TAKE_RETRY_FIRST * 2);
    for _ in 0..10 {
        m.on_open_failed(t1);
    }
    assert_eq!(m.on_open_failed(t1), TAKE_RETRY_MAX);
    m.on_opened();
    assert_eq!(m.on_open_failed(t1), TAKE_RETRY_FIRST);
}

/// The checkpoint a held machine asks for next, and when.
fn next_checkpoint(m: &mut PartitionLease) -> (Instant, u64) {
    let at = m.poll_timeout().expect("a held machine has a timer");
    m.handle_timeout(at);
    match drain(m)[..] {
        [Effect::Checkpoint { number }] => (at, number),
        ref other => panic!("no checkpoint at {at:?}: {other:?}"),
    }
}

#[test]
fn an_idle_owner_checkpoints_at_once_but_not_sooner_than_the_gap() {
    let t0 = Instant::now();
    let gap = S.checkpoint_every.mul_f64(HURRY_GAP);
    // Hurried right after the take: at the gap.
    let mut m = owner(t0);
    m.hurry(t0 + gap / 2);
    assert!(drain(&mut m).is_empty());
    assert_eq!(next_checkpoint(&mut m), (t0 + gap, 2));
    // Hurried later: at once.
    let mut m = owner(t0);
    m.hurry(t0 + secs(1));
    assert_eq!(drain(&mut m), [Effect::Checkpoint { number: 2 }]);
    // Not hurried: a whole interval.
    let mut m = owner(t0);
    assert_eq!(next_checkpoint(&mut m), (t0 + S.checkpoint_every, 2));
    // A hurry while a checkpoint is under way changes nothing.
    m.hurry(t0 + secs(4));
    assert!(drain(&mut m).is_empty());
}

#[test]
fn partitions_taken_together_checkpoint_spread_over_half_an_interval() {
    let t0 = Instant::now();
    let firsts: Vec<Duration> = (0..4)
        .map(|slot| {
            let mut m = owner_as(PartitionLease::new("n1", 1, S).staggered(slot, 4), t0);
            next_checkpoint(&mut m).0 - t0
        })
        .collect();
    let every = S.checkpoint_every;
    assert_eq!(
        firsts,
        vec![
            every,
            every.mul_f64(0.875),
            every.mul_f64(0.75),
            every.mul_f64(0.625)
        ]
    );
}

/// Fails every checkpoint the machine asks for (renewals published at
/// once) until one is answered otherwise than by a renewal: when, and the
/// effects then.
fn fail_checkpoints(m: &mut PartitionLease) -> (Instant, Vec<Effect>) {
    for _ in 0..100 {
        let (at, number) = next_checkpoint(m);
        m.on_checkpoint(at, None);
        let effects = drain(m);
        match &effects[..] {
            [Effect::Publish(d)] if d.kind == DraftKind::Renewal => {
                assert_eq!(d.number, number);
                m.on_published(at, d.number, Published::Created);
                drain(m);
            }
            _ => return (at, effects),
        }
    }
    panic!("renewed for ever")
}

#[test]
fn an_owner_whose_checkpoints_fail_for_a_lease_gives_the_partition_up() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    // One good checkpoint (covers 9), then only failures: renewals keep
    // the lease while the failures last less than a lease.
    let (t1, n) = next_checkpoint(&mut m);
    m.on_checkpoint(t1, Some(9));
    let d = published(&drain(&mut m));
    m.on_published(t1, d.number, Published::Created);
    drain(&mut m);
    assert_eq!(n, 2);
    let (t2, _) = next_checkpoint(&mut m);
    m.on_checkpoint(t2, None);
    let renewal = published(&drain(&mut m));
    assert_eq!(renewal.kind, DraftKind::Renewal);
    m.on_published(t2, renewal.number, Published::Created);
    drain(&mut m);
    assert!(!m.shunned(t2));
    // Failing since t2: the first failure a lease later gives it up.
    let (at, effects) = fail_checkpoints(&mut m);
    assert!(at >= t2 + S.lease && at < t2 + S.lease + S.checkpoint_every);
    assert_eq!(
        effects,
        [
            // Away for a lease at first (doubling while it fails again).
            Effect::GaveUp { wait: S.lease },
            Effect::Drain
        ],
    );
    assert!(m.shunned(at), "published as shunned, so gossip moves it");
    assert!(!m.snapshot().wanted);
    assert!(!m.may_fetch(at), "no request while handing back");
    // Its release names the last published files (nothing new is made)
    // and covers what was durable: nothing acknowledged is lost.
    m.on_drained(at, Duration::ZERO);
    let [Effect::Checkpoint { number }] = drain(&mut m)[..] else {
        panic!("no final checkpoint");
    };
    m.on_checkpoint(at, None);
    let release = published(&drain(&mut m));
    assert_eq!(release.number, number);
    assert_eq!(
        (
            release.kind,
            release.released,
            release.new_checkpoint,
            release.covers
        ),
        (DraftKind::Release, true, false, 9)
    );
    // The files it names lack the holds saved since: the next owner waits
    // out any request of this life (a timeout, then the delay).
    assert_eq!(release.hold_ms, S.request_timeout.as_millis() as u64);
    m.on_published(at, number, Published::Created);
    assert!(drain(&mut m).contains(&Effect::Stop {
        reason: StopReason::Released
    }));
    // Advice to take it back is ignored until the wait is over.
    m.want(at, true);
    assert!(!m.snapshot().wanted);
    m.want(at + S.lease, true);
    assert!(m.snapshot().wanted);
    assert!(!m.shunned(at + S.lease));
}

#[test]
fn a_checkpoint_that_works_again_within_the_lease_keeps_the_partition() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    let (t1, _) = next_checkpoint(&mut m);
    m.on_checkpoint(t1, None);
    let d = published(&drain(&mut m));
    m.on_published(t1, d.number, Published::Created);
    drain(&mut m);
    // A success resets the count: a failure a lease after the first one
    // starts a new count rather than giving the partition up.
    loop {
        let (t, _) = next_checkpoint(&mut m);
        if t >= t1 + S.lease {
            m.on_checkpoint(t, None);
            assert_eq!(published(&drain(&mut m)).kind, DraftKind::Renewal);
            assert!(!m.shunned(t));
            break;
        }
        m.on_checkpoint(t, Some(4));
        let d = published(&drain(&mut m));
        m.on_published(t, d.number, Published::Created);
        drain(&mut m);
    }
}

#[test]
fn a_head_this_build_cannot_read_makes_the_node_step_aside() {
    let t0 = Instant::now();
    let mut m = PartitionLease::new("n1", 1, S);
    m.want(t0, true);
    assert_eq!(drain(&mut m), [Effect::ReadHead]);
    // A newer trawl's manifest: not retried forever, shunned instead.
    assert_eq!(m.on_head_unreadable(t0), TAKE_RETRY_FIRST);
    assert!(drain(&mut m).is_empty());
    assert_eq!(m.snapshot().phase, "idle");
    assert!(m.shunned(t0));
    m.want(t0 + TAKE_RETRY_FIRST / 2, true);
    assert_eq!(m.snapshot().phase, "idle", "advice ignored meanwhile");
    // After the wait it looks again (a newer node may have moved on).
    m.want(t0 + TAKE_RETRY_FIRST, true);
    assert_eq!(drain(&mut m), [Effect::ReadHead]);
    assert_eq!(m.on_head_unreadable(t0 + secs(2)), TAKE_RETRY_FIRST * 2);
}

#[test]
fn an_idle_partition_renews_with_its_files_and_every_half_lease() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    let (t1, _) = next_checkpoint(&mut m);
    m.on_checkpoint(t1, Some(7));
    let d = published(&drain(&mut m));
    m.on_published(t1, d.number, Published::Created);
    drain(&mut m);
    // Nothing written since: a renewal naming the same files, covering
    // what the checkpoint covered.
    let (t2, number) = next_checkpoint(&mut m);
    assert_eq!(t2, t1 + S.checkpoint_every);
    m.on_checkpoint_unchanged(t2, 7);
    let renewal = published(&drain(&mut m));
    assert_eq!(
        (
            renewal.number,
            renewal.kind,
            renewal.new_checkpoint,
            renewal.covers
        ),
        (number, DraftKind::Renewal, false, 7)
    );
    m.on_published(t2, number, Published::Created);
    assert_eq!(drain(&mut m), [Effect::Durable { covers: 7 }]);
    // The next one half a lease later, not a checkpoint interval.
    assert_eq!(S.idle_every(), S.lease / 2);
    let (t3, _) = next_checkpoint(&mut m);
    assert_eq!(t3, t2 + S.idle_every());
    // Idle for ever is not failing: the partition is never given up.
    let mut t = t3;
    for _ in 0..20 {
        m.on_checkpoint_unchanged(t, 7);
        let d = published(&drain(&mut m));
        assert_eq!(d.kind, DraftKind::Renewal);
        m.on_published(t, d.number, Published::Created);
        drain(&mut m);
        t = next_checkpoint(&mut m).0;
    }
    assert!(!m.shunned(t));
    // A write makes the next one a checkpoint again, on the usual pace.
    m.on_checkpoint(t, Some(9));
    let d = published(&drain(&mut m));
    assert_eq!(d.kind, DraftKind::Checkpoint);
    m.on_published(t, d.number, Published::Created);
    drain(&mut m);
    assert_eq!(next_checkpoint(&mut m).0, t + S.checkpoint_every);
}

#[test]
fn a_checkpoint_begun_before_the_drain_ended_hands_back_an_unsaved_hold() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    // A checkpoint is under way when gossip moves the partition away;
    // the drain ends (a request sent after the checkpoint began was given
    // up on, its hold saved after the checkpoint's files) before it does.
    let (at, number) = next_checkpoint(&mut m);
    m.want(at, false);
    assert_eq!(drain(&mut m), [Effect::Drain]);
    let owed = Duration::from_millis(300);
    m.on_drained(at, owed);
    assert!(
        drain(&mut m).is_empty(),
        "the checkpoint is still being made"
    );
    m.on_checkpoint(at, Some(50));
    let release = published(&drain(&mut m));
    assert_eq!(release.number, number);
    assert!(release.released && release.new_checkpoint);
    // Its files may lack the drain's holds: the next owner waits a request
    // timeout more than the hosts owe.
    assert_eq!(
        release.hold_ms,
        (S.request_timeout + owed).as_millis() as u64
    );
}

#[test]
fn a_stale_head_older_than_a_manifest_known_is_read_again_not_claimed_over() {
    let t0 = Instant::now();
    // Held (epoch 1), then handed back: manifest 2 is its release.
    let mut m = owner(t0);
    m.want(t0, false);
    assert_eq!(drain(&mut m), [Effect::Drain]);
    m.on_drained(t0, Duration::ZERO);
    assert_eq!(drain(&mut m), [Effect::Checkpoint { number: 2 }]);
    m.on_checkpoint(t0, Some(10));
    assert_eq!(published(&drain(&mut m)).kind, DraftKind::Release);
    m.on_published(t0, 2, Published::Created);
    drain(&mut m);
    // Wanted again, a read sent before the release answers only now:
    // no head at all. Claimed over, manifest 1 would be "taken by this
    // very process" and read as the claim's success.
    let t1 = t0 + secs(1);
    m.want(t1, true);
    assert_eq!(drain(&mut m), [Effect::ReadHead]);
    m.on_head(t1, Ok(None));
    assert_eq!(drain(&mut m), [], "no claim over a stale head");
    m.handle_timeout(t1 + S.retry);
    assert_eq!(drain(&mut m), [Effect::ReadHead], "read again");
    // The real head: its own release, claimed at once.
    m.on_head(t1 + S.retry, Ok(Some(head(2, m_owner(1), true, 0))));
    let claim = published(&drain(&mut m));
    assert_eq!((claim.number, claim.kind), (3, DraftKind::Claim));
}

#[test]
fn a_store_that_went_back_is_believed_after_a_lease_of_older_heads() {
    let t0 = Instant::now();
    let mut m = owner(t0);
    m.want(t0, false);
    drain(&mut m);
    m.on_drained(t0, Duration::ZERO);
    drain(&mut m);
    m.on_checkpoint(t0, Some(10));
    drain(&mut m);
    m.on_published(t0, 2, Published::Created);
    drain(&mut m);
    // The store is wiped: every read finds no chain at all.
    m.want(t0, true);
    let mut t = t0;
    while t < t0 + S.lease {
        assert_eq!(drain(&mut m), [Effect::ReadHead]);
        m.on_head(t, Ok(None));
        t += S.retry;
        m.handle_timeout(t);
    }
    assert_eq!(drain(&mut m), [Effect::ReadHead]);
    m.on_head(t, Ok(None));
    let claim = published(&drain(&mut m));
    assert_eq!((claim.number, claim.kind), (1, DraftKind::Claim));
}

/// This test module's own owner `n1` (incarnation 1) at `epoch`.
fn m_owner(epoch: u64) -> Owner {
    Owner {
        node: "n1".into(),
        incarnation: 1,
        epoch,
    }
}
