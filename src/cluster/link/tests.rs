use std::collections::{BTreeMap, BTreeSet};

use super::*;

const BASE: Duration = Duration::from_millis(100);
const MAX: Duration = Duration::from_secs(2);

fn link(window: usize) -> PeerLink<u32> {
    PeerLink::new(window, Backoff::new(BASE, MAX))
}

fn frame(seq: u64) -> Result<Bytes, String> {
    Ok(Bytes::from(format!("batch {seq}")))
}

fn seqs(out: &[Transmit]) -> Vec<u64> {
    out.iter().map(|t| t.seq).collect()
}

#[test]
fn batches_are_numbered_once_and_wait_for_a_connection() {
    let mut l = link(4);
    assert!(l.enqueue(frame, 1).unwrap().is_empty(), "no connection yet");
    assert!(l.enqueue(frame, 2).unwrap().is_empty());
    let t0 = Instant::now();
    let (old, out) = l.connected(7, t0);
    assert_eq!(old, None);
    assert_eq!(seqs(&out), vec![1, 2]);
    assert!(out.iter().all(|t| !t.resent));
    assert_eq!(out[0].frame, Bytes::from("batch 1"));
    // On the live connection a new batch goes out at once.
    assert_eq!(seqs(&l.enqueue(frame, 3).unwrap()), vec![3]);
}

#[test]
fn an_encoding_error_takes_no_number_and_queues_nothing() {
    let mut l = link(4);
    let err = l
        .enqueue(|_| Err::<Bytes, _>("too large".to_string()), 1)
        .unwrap_err();
    assert_eq!(err, "too large");
    assert_eq!(l.unacked() + l.waiting(), 0);
    l.connected(1, Instant::now());
    assert_eq!(seqs(&l.enqueue(frame, 2).unwrap()), vec![1]);
}

#[test]
fn the_window_holds_back_batches_until_answers_make_room() {
    let mut l = link(2);
    l.connected(1, Instant::now());
    assert_eq!(seqs(&l.enqueue(frame, 10).unwrap()), vec![1]);
    assert_eq!(seqs(&l.enqueue(frame, 11).unwrap()), vec![2]);
    assert!(l.enqueue(frame, 12).unwrap().is_empty(), "window full");
    assert!(l.enqueue(frame, 13).unwrap().is_empty());
    assert_eq!((l.unacked(), l.waiting()), (2, 2));
    let (reply, out) = l.acked(2).unwrap();
    assert_eq!(reply, 11);
    assert_eq!(seqs(&out), vec![3], "the first waiting one, in order");
    let (reply, out) = l.refused(1).unwrap();
    assert_eq!(reply, 10);
    assert_eq!(seqs(&out), vec![4]);
    assert_eq!((l.unacked(), l.waiting()), (2, 0));
}

#[test]
fn a_second_answer_to_one_batch_is_ignored() {
    let mut l = link(2);
    l.connected(1, Instant::now());
    l.enqueue(frame, 5).unwrap();
    assert_eq!(l.acked(1).map(|(r, _)| r), Some(5));
    assert!(l.acked(1).is_none());
    assert!(l.refused(1).is_none());
    assert!(l.acked(99).is_none(), "never sent");
}

#[test]
fn a_new_connection_resends_every_unacked_batch_and_replaces_the_old() {
    let mut l = link(3);
    let t0 = Instant::now();
    l.connected(1, t0);
    for r in 0..5 {
        l.enqueue(frame, r).unwrap();
    }
    assert!(l.closed(
        Closed {
            conn: 1,
            progress: true
        },
        t0
    ));
    assert!(!l.is_connected());
    // An ack read before the close, handled after it.
    assert!(
        l.acked(2).unwrap().1.is_empty(),
        "no connection to write 4 on"
    );
    assert!(l.enqueue(frame, 5).unwrap().is_empty(), "no connection");
    let (old, out) = l.connected(2, t0);
    assert_eq!(old, None, "the old one was closed");
    assert_eq!(seqs(&out), vec![1, 3, 4]);
    assert_eq!(
        out.iter().map(|t| t.resent).collect::<Vec<_>>(),
        vec![true, true, false],
        "4 entered the window when 2 was acked, with no connection up"
    );
    // A third connection replaces the second, which is to be closed.
    let (old, out) = l.connected(3, t0);
    assert_eq!(old, Some(2));
    assert_eq!(seqs(&out), vec![1, 3, 4]);
    // The replaced one's end does not take the link down.
    assert!(!l.closed(
        Closed {
            conn: 2,
            progress: false
        },
        t0
    ));
    assert!(l.is_connected());
}

#[test]
fn redials_back_off_until_progress_or_a_long_enough_connection() {
    let mut l = link(1);
    let t0 = Instant::now();
    let delays: Vec<_> = (0..6).map(|_| l.redial_delay()).collect();
    assert_eq!(
        delays,
        [100, 200, 400, 800, 1600, 2000].map(Duration::from_millis)
    );
    // A short connection without progress keeps the backoff.
    l.connected(1, t0);
    l.closed(
        Closed {
            conn: 1,
            progress: false,
        },
        t0 + MAX / 2,
    );
    assert_eq!(l.redial_delay(), MAX);
    // One that lasted the longest backoff starts it over.
    l.connected(2, t0);
    l.closed(
        Closed {
            conn: 2,
            progress: false,
        },
        t0 + MAX,
    );
    assert_eq!(l.redial_delay(), BASE);
    // So does progress, and an acknowledgement.
    l.redial_delay();
    l.connected(3, t0);
    l.closed(
        Closed {
            conn: 3,
            progress: true,
        },
        t0,
    );
    assert_eq!(l.redial_delay(), BASE);
    l.redial_delay();
    l.connected(4, t0);
    l.enqueue(frame, 1).unwrap();
    l.acked(1).unwrap();
    assert_eq!(l.redial_delay(), BASE);
}

#[test]
fn leaving_gives_back_every_reply_in_number_order() {
    let mut l = link(2);
    l.connected(1, Instant::now());
    for r in 10..14 {
        l.enqueue(frame, r).unwrap();
    }
    l.acked(1).unwrap();
    assert_eq!(l.leave(), vec![11, 12, 13]);
    assert_eq!((l.unacked(), l.waiting(), l.is_connected()), (0, 0, false));
}

/// SplitMix64, for the random walk below.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// A random walk of sends, connections that come and go, answers (some
/// duplicated, some to batches of a dead connection) and a final leave:
/// every reply comes back exactly once, the window is never exceeded, a
/// batch is written on every connection it is unacked on, and an answer
/// resolves the batch that carried its number.
#[test]
fn every_reply_comes_back_exactly_once_whatever_the_order_of_events() {
    for seed in 0..300 {
        let mut rng = Rng(seed);
        let window = 1 + rng.below(4) as usize;
        let mut l: PeerLink<u32> = link(window);
        let t0 = Instant::now();
        let mut next_reply = 0u32;
        let mut conn = 0u64;
        let mut up = false;
        // What the peer received on the current connection, not answered.
        let mut received: Vec<u64> = Vec::new();
        let mut seq_of: BTreeMap<u32, u64> = BTreeMap::new();
        let mut resolved: BTreeSet<u32> = BTreeSet::new();
        let mut resolve = |r: u32, seq: u64, seq_of: &BTreeMap<u32, u64>| {
            assert!(resolved.insert(r), "seed {seed}: reply {r} twice");
            assert_eq!(seq_of.get(&r), Some(&seq), "seed {seed}");
        };
        for _ in 0..200 {
            let out = match rng.below(6) {
                0 | 1 => {
                    let r = next_reply;
                    next_reply += 1;
                    let mut assigned = 0;
                    let out = l
                        .enqueue(
                            |seq| {
                                assigned = seq;
                                frame(seq)
                            },
                            r,
                        )
                        .unwrap();
                    seq_of.insert(r, assigned);
                    out
                }
                2 if !up => {
                    conn += 1;
                    up = true;
                    received.clear();
                    l.connected(conn, t0).1
                }
                2 => {
                    l.closed(
                        Closed {
                            conn,
                            progress: false,
                        },
                        t0,
                    );
                    up = false;
                    Vec::new()
                }
                _ if !received.is_empty() => {
                    let i = rng.below(received.len() as u64) as usize;
                    let seq = received[i];
                    // Sometimes the answer is duplicated.
                    if rng.below(4) != 0 {
                        received.swap_remove(i);
                    }
                    let answer = if rng.below(3) == 0 {
                        l.refused(seq)
                    } else {
                        l.acked(seq)
                    };
                    match answer {
                        Some((r, out)) => {
                            resolve(r, seq, &seq_of);
                            out
                        }
                        None => Vec::new(),
                    }
                }
                _ => Vec::new(),
            };
            assert!(l.unacked() <= window, "seed {seed}");
            assert!(
                up || out.is_empty(),
                "seed {seed}: written with no connection"
            );
            received.extend(seqs(&out));
        }
        for r in l.leave() {
            let seq = seq_of[&r];
            resolve(r, seq, &seq_of);
        }
        assert_eq!(
            resolved.len() as u32,
            next_reply,
            "seed {seed}: a reply lost"
        );
    }
}

#[test]
fn only_not_held_is_refused_and_other_failures_close_the_connection() {
    assert_eq!(
        answer(7, Handled::Admitted),
        Ok(WireMessage::Ack { seq: 7 })
    );
    assert_eq!(
        answer(8, Handled::Answered(WireReply::Claimed)),
        Ok(WireMessage::Answer {
            seq: 8,
            reply: WireReply::Claimed
        })
    );
    assert_eq!(
        answer(9, Handled::NotHeld("partition 3 is not held here".into())),
        Ok(WireMessage::Nack {
            seq: 9,
            reason: "partition 3 is not held here".into()
        })
    );
    // A store that failed, a mailbox gone: no answer, the connection
    // closes and the sender resends to the same node after its backoff.
    assert_eq!(
        answer(10, Handled::Failed("store: disk full".into())),
        Err("store: disk full".into())
    );
}

#[test]
fn a_question_that_fails_here_is_answered_unclaimed_unless_not_held() {
    assert_eq!(
        Handled::Failed("mailbox closed".into()).question(),
        Handled::Answered(WireReply::Unclaimed)
    );
    assert_eq!(
        Handled::NotHeld("p".into()).question(),
        Handled::NotHeld("p".into())
    );
    assert_eq!(
        Handled::Answered(WireReply::Claimed).question(),
        Handled::Answered(WireReply::Claimed)
    );
}
