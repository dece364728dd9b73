use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use super::*;
use crate::cluster::wire::PROTOCOL_VERSION;

fn settings(node: &str, window: usize) -> BridgeSettings {
    let mut s = BridgeSettings::new("c", node, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    s.window = window;
    s.heartbeat = Duration::from_secs(1);
    s
}

fn loopback() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, 0))
}

fn hello(node: &str) -> Message {
    wire::hello("c", node)
}

fn established(node: &str, peer: &str, window: usize, t0: Instant) -> Connection {
    let mut c = Connection::accepted(&settings(node, window), t0);
    c.on_hello(&hello(peer), |_| true, t0)
        .expect("hello passes");
    c
}

fn admit(seq: u64) -> Message {
    Message::Admit {
        seq,
        partition: 1,
        entries: Vec::new(),
    }
}

#[test]
fn a_dialer_takes_only_the_node_it_dialled() {
    let t0 = Instant::now();
    let mut c = Connection::dialled(&settings("a", 4), "b", t0);
    assert!(matches!(
        c.on_hello(&hello("z"), |_| true, t0),
        Err(Closed::WrongNode { .. })
    ));
    let mut c = Connection::dialled(&settings("a", 4), "b", t0);
    assert_eq!(c.on_hello(&hello("b"), |_| true, t0).unwrap(), "b");
    assert_eq!(c.peer(), Some("b"));
}

#[test]
fn an_acceptor_refuses_the_wrong_direction_bad_ids_and_uncertified_peers() {
    let t0 = Instant::now();
    let accept = |node: &str| Connection::accepted(&settings(node, 4), t0);
    // "b" dials "a"? No: the smaller id dials.
    assert!(matches!(
        accept("a").on_hello(&hello("b"), |_| true, t0),
        Err(Closed::WrongDirection(_))
    ));
    assert!(matches!(
        accept("z").on_hello(&hello("bad id!"), |_| true, t0),
        Err(Closed::BadNodeId(_))
    ));
    assert!(matches!(
        accept("z").on_hello(&hello("b"), |_| false, t0),
        Err(Closed::NotCertified(_))
    ));
    let other_cluster = wire::hello("other", "b");
    assert!(matches!(
        accept("z").on_hello(&other_cluster, |_| true, t0),
        Err(Closed::Refused(Refusal::WrongCluster { .. }))
    ));
    let old = Message::Hello {
        cluster: "c".into(),
        node: "b".into(),
        protocol: PROTOCOL_VERSION - 1,
    };
    assert!(matches!(
        accept("z").on_hello(&old, |_| true, t0),
        Err(Closed::Refused(Refusal::OldProtocol { .. }))
    ));
    let refused = Message::Refuse {
        reason: "no".into(),
    };
    let closed = accept("z").on_hello(&refused, |_| true, t0).unwrap_err();
    assert!(matches!(closed, Closed::RefusedByPeer(_)));
    // A peer that refused us is not refused back.
    assert!(closed.refuse().is_none());
    assert!(Closed::WrongDirection("b".into()).refuse().is_some());
    assert!(Closed::Eof.refuse().is_none());
}

#[test]
fn the_handshake_is_bounded_by_one_silence_limit() {
    let t0 = Instant::now();
    let c = Connection::accepted(&settings("z", 4), t0);
    assert_eq!(c.handshake_deadline(), t0 + Duration::from_secs(3));
    assert_eq!(c.stall_limit(), Duration::from_secs(3));
}

#[test]
fn a_full_window_stops_reading_and_silence_does_not_count_while_it_is() {
    let t0 = Instant::now();
    let mut c = established("z", "b", 2, t0);
    assert!(c.may_read());
    assert!(matches!(
        c.on_message(admit(1), t0),
        Ok(Inbound::Admit { seq: 1, .. })
    ));
    assert!(c.may_read());
    c.on_message(admit(2), t0).unwrap();
    assert!(!c.may_read(), "two places taken of two");
    // Long after the silence limit, a connection that may not read is
    // not silent: its peer is waiting for us.
    let late = t0 + Duration::from_secs(60);
    assert!(c.on_silence(late).is_none());
    // An answer handled is not yet written: the place is still taken.
    let ack = c.on_handled(1, Handled::Admitted).unwrap();
    assert_eq!(ack, Message::Ack { seq: 1 });
    assert!(!c.may_read());
    c.on_written(true, late);
    assert!(c.may_read());
    // Reading resumes: the peer has a whole silence limit from now.
    assert_eq!(c.silent_at(), late + Duration::from_secs(3));
    assert!(c.on_silence(late + Duration::from_millis(2999)).is_none());
    assert!(matches!(
        c.on_silence(late + Duration::from_secs(3)),
        Some(Closed::Silent(_))
    ));
}

#[test]
fn reading_with_the_window_full_is_refused_not_counted_past_it() {
    let t0 = Instant::now();
    let mut c = established("z", "b", 1, t0);
    c.on_message(admit(1), t0).unwrap();
    assert!(matches!(c.on_message(admit(2), t0), Err(Closed::Stopping)));
}

#[test]
fn any_frame_resets_the_silence_and_any_write_the_heartbeat() {
    let t0 = Instant::now();
    let mut c = established("z", "b", 4, t0);
    assert_eq!(c.heartbeat_at(), t0 + Duration::from_secs(1));
    let t1 = t0 + Duration::from_millis(2500);
    assert_eq!(
        c.on_message(Message::Heartbeat, t1).unwrap(),
        Inbound::Nothing
    );
    assert!(c.on_silence(t0 + Duration::from_secs(3)).is_none());
    assert_eq!(c.silent_at(), t1 + Duration::from_secs(3));
    c.on_written(false, t1);
    assert_eq!(c.heartbeat_at(), t1 + Duration::from_secs(1));
}

#[test]
fn acks_and_refusals_are_progress_and_failures_close() {
    let t0 = Instant::now();
    let mut c = established("z", "b", 4, t0);
    assert!(!c.progress());
    let nack = Message::Nack {
        seq: 3,
        reason: "x".repeat(1000),
    };
    match c.on_message(nack, t0).unwrap() {
        Inbound::Nacked { seq: 3, reason } => assert_eq!(reason.len(), REASON_MAX),
        other => panic!("{other:?}"),
    }
    assert!(c.progress());
    let mut c = established("z", "b", 4, t0);
    c.on_message(admit(1), t0).unwrap();
    assert!(matches!(
        c.on_handled(1, Handled::Failed("disk".into())),
        Err(Closed::Rejected(_))
    ));
    assert!(!c.progress());
    assert_eq!(
        c.on_handled(1, Handled::NotHeld("moved".into())).unwrap(),
        Message::Nack {
            seq: 1,
            reason: "moved".into()
        }
    );
    assert!(matches!(
        c.on_message(hello("b"), t0),
        Err(Closed::Unexpected("hello"))
    ));
}

#[test]
fn short_cuts_on_a_char_boundary() {
    let text = "é".repeat(200);
    let cut = short(&text);
    assert!(cut.len() <= REASON_MAX);
    assert!(text.starts_with(cut));
}

#[test]
fn settings_are_checked_before_anything_binds() {
    let good = BridgeSettings::new("c1", "n1", loopback());
    assert!(good.check().is_ok());
    assert_eq!(good.silence(), Duration::from_secs(3));
    let bad = [
        BridgeSettings {
            window: 0,
            ..good.clone()
        },
        BridgeSettings {
            node_id: "n 1".into(),
            ..good.clone()
        },
        BridgeSettings {
            cluster_id: String::new(),
            ..good.clone()
        },
        BridgeSettings {
            heartbeat: Duration::ZERO,
            ..good.clone()
        },
        BridgeSettings {
            reconnect_max: Duration::from_millis(1),
            ..good.clone()
        },
    ];
    for settings in bad {
        assert!(
            matches!(settings.check(), Err(BridgeError::Settings(_))),
            "{settings:?}"
        );
    }
}

#[test]
fn peer_text_is_cut_in_reasons_and_labels_are_bounded() {
    let huge = "é".repeat(10_000);
    let closed = Closed::Refused(Refusal::WrongCluster {
        ours: "c1".into(),
        theirs: huge.clone(),
    });
    assert!(closed.to_string().len() <= REASON_MAX);
    assert_eq!(closed.label(), "wrong_cluster");
    assert!(closed.is_refusal());
    assert!(Closed::RefusedByPeer(huge).to_string().len() < REASON_MAX + 30);
    assert_eq!(short("abc"), "abc");
    for (closed, label, refusal) in [
        (Closed::TooLarge, "too_large", true),
        (Closed::Unexpected("hello"), "unexpected", true),
        (Closed::Silent(Duration::from_secs(3)), "silent", false),
        (Closed::Eof, "eof", false),
        (Closed::Rejected("store: x".into()), "rejected", false),
    ] {
        assert_eq!((closed.label(), closed.is_refusal()), (label, refusal));
    }
}
