//! The cluster bridge on loopback: batches both ways, the window, hostile
//! connections, silence, reconnects, peers leaving.
//!
//! Every wait is on a signal (a batch reaching a recipient, a send
//! resolving, a socket closing), bounded by [`WAIT`] so a bug fails fast
//! instead of hanging.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use futures_util::stream::FuturesUnordered;
use futures_util::{FutureExt, SinkExt, StreamExt};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_util::codec::{FramedRead, FramedWrite};

use trawl::actors::bridge::{BridgeActor, BridgeSettings};
use trawl::actors::messages::{
    BridgeInbound, BridgeStatus, DigestQuery, Failure, GetBridgeStatus, PeerStatus, RemoteAdmit,
    RemoteDigest, SendBatch, SendDigest, SetPeers,
};
use trawl::cluster::tls::{CertsDir, NodeTls};
use trawl::cluster::wire::{self, Message, WireEntry, WireKind};
use trawl::dedup::exact::{DigestAsk, DigestReply};
use trawl::metrics::Metrics;
use trawl::store::StoredCopy;

const CLUSTER: &str = "c1";
/// The longest any awaited signal may take.
const WAIT: Duration = Duration::from_secs(5);
const HEARTBEAT: Duration = Duration::from_millis(100);

/// A batch as the recipient saw it, and the answer it holds, if it holds.
struct Delivery {
    admit: RemoteAdmit,
    answer: Option<oneshot::Sender<Result<(), Failure>>>,
}

/// The inbound recipient of a bridge under test: reports each batch to the
/// test before answering, and answers `Ok` at once or holds the answer for
/// the test to give.
struct Probe {
    tx: mpsc::UnboundedSender<Delivery>,
    hold: bool,
    /// Digest questions that reached it.
    digests: Arc<AtomicU64>,
}

impl Actor for Probe {
    type Context = Context<Self>;
}

impl Handler<RemoteAdmit> for Probe {
    type Result = ResponseFuture<Result<(), Failure>>;

    fn handle(&mut self, admit: RemoteAdmit, _: &mut Self::Context) -> Self::Result {
        if !self.hold {
            let _ = self.tx.send(Delivery {
                admit,
                answer: None,
            });
            return Box::pin(async { Ok(()) });
        }
        let (answer, rx) = oneshot::channel();
        let _ = self.tx.send(Delivery {
            admit,
            answer: Some(answer),
        });
        Box::pin(async move {
            rx.await
                .unwrap_or_else(|_| Err(Failure::Mailbox("answer dropped".into())))
        })
    }
}

/// Answers digest questions as a partition holding only partition 1
/// would: a registration is answered with the copy registered, a claim
/// with `Claimed`; any other partition is not held here.
impl Handler<RemoteDigest> for Probe {
    type Result = Result<DigestReply, Failure>;

    fn handle(&mut self, msg: RemoteDigest, _: &mut Self::Context) -> Self::Result {
        self.digests.fetch_add(1, Ordering::SeqCst);
        if msg.partition != 1 {
            return Err(Failure::NotHeld {
                partition: msg.partition,
            });
        }
        Ok(match msg.query.ask {
            DigestAsk::Register(copy) => DigestReply::Stored(copy),
            DigestAsk::Claim => DigestReply::Claimed,
            DigestAsk::Abandon => DigestReply::Unclaimed,
        })
    }
}

/// A bridge under test and what its recipient sees.
struct TestNode {
    id: &'static str,
    addr: Addr<BridgeActor>,
    bound: SocketAddr,
    deliveries: mpsc::UnboundedReceiver<Delivery>,
    digests: Arc<AtomicU64>,
    metrics: Arc<Metrics>,
}

fn settings(id: &str, listen: SocketAddr, window: usize) -> BridgeSettings {
    BridgeSettings {
        window,
        reconnect_base: Duration::from_millis(10),
        reconnect_max: Duration::from_millis(100),
        heartbeat: HEARTBEAT,
        ..BridgeSettings::new(CLUSTER, id, listen)
    }
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Starts a bridge on the current arbiter.
fn start_at(id: &'static str, listen: SocketAddr, window: usize, hold: bool) -> TestNode {
    start_with(id, settings(id, listen, window), hold)
}

/// Starts a bridge with `settings` on the current arbiter.
fn start_with(id: &'static str, settings: BridgeSettings, hold: bool) -> TestNode {
    let (tx, deliveries) = mpsc::unbounded_channel();
    let digests = Arc::new(AtomicU64::new(0));
    let probe = Probe {
        tx,
        hold,
        digests: digests.clone(),
    }
    .start();
    let metrics = Arc::new(Metrics::new());
    let inbound = BridgeInbound {
        admit: probe.clone().recipient(),
        digest: probe.recipient(),
    };
    let (addr, bound) =
        BridgeActor::start(settings, inbound, metrics.clone()).expect("bridge starts");
    TestNode {
        id,
        addr,
        bound,
        deliveries,
        digests,
        metrics,
    }
}

fn start(id: &'static str, window: usize, hold: bool) -> TestNode {
    start_at(id, loopback(), window, hold)
}

/// Makes `x` and `y` each other's peer, the acceptor first so that it
/// knows the dialer as a member when it connects.
async fn pair(x: &TestNode, y: &TestNode) {
    let (dialer, acceptor) = if x.id < y.id { (x, y) } else { (y, x) };
    introduce(acceptor, dialer).await;
    introduce(dialer, acceptor).await;
}

/// Tells `to` about `peer`.
async fn introduce(to: &TestNode, peer: &TestNode) {
    let peers = BTreeMap::from([(peer.id.to_owned(), peer.bound)]);
    to.addr.send(SetPeers { peers }).await.unwrap();
}

async fn within<F: Future>(what: &str, f: F) -> F::Output {
    match tokio::time::timeout(WAIT, f).await {
        Ok(out) => out,
        Err(_) => panic!("timed out waiting for {what}"),
    }
}

fn entries(batch: u32, n: u32) -> Vec<WireEntry> {
    (0..n)
        .map(|i| WireEntry {
            fp: u128::from(batch) << 32 | u128::from(i),
            url: format!("http://h{batch}.test/{i}"),
            host: format!("h{batch}.test"),
            depth: i,
            priority: 1,
            kind: if i % 2 == 0 {
                WireKind::Page
            } else {
                WireKind::Redirected { hops: 1 }
            },
            queue: true,
            referrer: None,
            lastmod_ms: None,
            cash: trawl::frontier::importance::Cash::new(1.0 / f32::from(i as u16 + 1)),
            via: (i > 0).then(|| format!("http://h{batch}.test/")),
            hops: if i > 0 { "L".into() } else { String::new() },
        })
        .collect()
}

fn batch(peer: &str, n: u32) -> SendBatch {
    SendBatch {
        peer: peer.into(),
        partition: (n % 7) as u16,
        entries: entries(n, 3),
    }
}

fn peer_status(status: &BridgeStatus, id: &str) -> PeerStatus {
    status
        .peers
        .iter()
        .find(|p| p.node == id)
        .cloned()
        .unwrap_or_else(|| panic!("no peer {id} in {status:?}"))
}

fn count(m: &prometheus::IntCounterVec, labels: &[&str]) -> u64 {
    m.with_label_values(labels).get()
}

#[test]
fn batches_cross_both_ways_and_resolve_once_the_peer_has_them() {
    System::new().block_on(async {
        let mut a = start("a", 4, false);
        let mut b = start("b", 4, false);
        pair(&a, &b).await;
        // More batches than the window, both ways at once.
        let mut sends = FuturesUnordered::new();
        for n in 0..12u32 {
            let (from, to) = if n % 2 == 0 { (&a, "b") } else { (&b, "a") };
            let request = from.addr.send(batch(to, n));
            sends.push(async move { (n, request.await.unwrap()) });
        }
        let mut got_a = Vec::new();
        let mut got_b = Vec::new();
        while let Some((n, result)) = within("a send", sends.next()).await {
            assert_eq!(result, Ok(()), "batch {n}");
            // Resolved: the receiving recipient already had exactly it.
            while let Ok(d) = a.deliveries.try_recv() {
                got_a.push(d.admit);
            }
            while let Ok(d) = b.deliveries.try_recv() {
                got_b.push(d.admit);
            }
            let (got, from) = if n % 2 == 0 {
                (&got_b, "a")
            } else {
                (&got_a, "b")
            };
            let sent = batch("", n);
            assert!(
                got.iter().any(|r| r.from == from
                    && r.partition == sent.partition
                    && r.entries == sent.entries),
                "batch {n} acked before its recipient had it"
            );
        }
        // Exactly once each: no loss, no duplicate on a healthy link.
        assert_eq!(got_a.len(), 6);
        assert_eq!(got_b.len(), 6);
        for (node, to) in [(&a, "b"), (&b, "a")] {
            let m = &node.metrics;
            assert_eq!(count(&m.bridge_batches, &[to, "sent"]), 6);
            assert_eq!(count(&m.bridge_batches, &[to, "acked"]), 6);
            assert_eq!(count(&m.bridge_batches, &[to, "received"]), 6);
            assert_eq!(count(&m.bridge_connections, &[to]), 1);
            assert!(count(&m.bridge_bytes, &[to, "out"]) > 0);
            assert_eq!(m.bridge_unacked.with_label_values(&[to]).get(), 0);
        }
        let status = a.addr.send(GetBridgeStatus).await.unwrap();
        let b_seen = peer_status(&status, "b");
        assert!(b_seen.dials && b_seen.connected, "{b_seen:?}");
        // A batch to a node that is not a member fails at once.
        let stray = a.addr.send(batch("zz", 1)).await.unwrap();
        assert!(matches!(stray, Err(Failure::Peer(_))), "{stray:?}");
    });
}

#[test]
fn the_window_holds_further_sends_until_an_ack() {
    System::new().block_on(async {
        let window = 2;
        let a = start("a", window, false);
        let mut b = start("b", 4, true);
        pair(&a, &b).await;
        let mut sends: Vec<_> = (0..=window as u32)
            .map(|n| Box::pin(a.addr.send(batch("b", n))))
            .collect();
        let mut held = Vec::new();
        for _ in 0..window {
            held.push(within("a held batch", b.deliveries.recv()).await.unwrap());
        }
        // The bridge has handled every send (the status query is behind
        // them in its mailbox): two in flight, the third waits.
        let status = a.addr.send(GetBridgeStatus).await.unwrap();
        let to_b = peer_status(&status, "b");
        assert_eq!((to_b.unacked, to_b.waiting), (2, 1), "{to_b:?}");
        assert_eq!(count(&a.metrics.bridge_batches, &["b", "sent"]), 2);
        assert_eq!(a.metrics.bridge_unacked.with_label_values(&["b"]).get(), 2);
        for send in &mut sends {
            assert!(send.now_or_never().is_none(), "a send resolved unacked");
        }
        // Acking the first lets the third go.
        let first = held.remove(0);
        assert_eq!(first.admit.entries, entries(0, 3));
        first.answer.unwrap().send(Ok(())).unwrap();
        assert_eq!(within("the first ack", &mut sends[0]).await, Ok(Ok(())));
        let third = within("the third batch", b.deliveries.recv())
            .await
            .unwrap();
        assert_eq!(third.admit.entries, entries(2, 3));
        assert!((&mut sends[1]).now_or_never().is_none());
        assert!((&mut sends[2]).now_or_never().is_none());
        for d in held.into_iter().chain([third]) {
            d.answer.unwrap().send(Ok(())).unwrap();
        }
        assert_eq!(within("the second ack", &mut sends[1]).await, Ok(Ok(())));
        assert_eq!(within("the third ack", &mut sends[2]).await, Ok(Ok(())));
        assert!(b.deliveries.try_recv().is_err(), "a batch delivered twice");
    });
}

/// Connects to `to`, writes `frames` (raw bytes, framing included), and
/// reads until the bridge closes: the messages it sent.
async fn raw_exchange(to: SocketAddr, bytes: &[u8]) -> Vec<Message> {
    let stream = TcpStream::connect(to).await.unwrap();
    let (read, mut write) = stream.into_split();
    write.write_all(bytes).await.unwrap();
    write.shutdown().await.unwrap();
    let mut frames = FramedRead::new(read, wire::codec());
    let mut got = Vec::new();
    // EOF or a reset: either way the bridge closed the connection.
    while let Some(Ok(frame)) = within("the bridge to close", frames.next()).await {
        got.push(wire::decode(&frame).expect("the bridge sends only messages"));
    }
    got
}

fn framed(msgs: &[Message]) -> Vec<u8> {
    let mut out = bytes::BytesMut::new();
    let mut codec = wire::codec();
    for m in msgs {
        tokio_util::codec::Encoder::encode(&mut codec, wire::encode(m).unwrap(), &mut out).unwrap();
    }
    out.to_vec()
}

fn frame_of(payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(payload);
    out
}

#[test]
fn hostile_connections_are_cut_off_and_the_bridge_goes_on() {
    System::new().block_on(async {
        let mut a = start("a", 4, false);
        let mut b = start("b", 4, false);
        let hello_from = |cluster: &str, node: &str, protocol: u16| Message::Hello {
            cluster: cluster.into(),
            node: node.into(),
            protocol,
        };
        let cases: Vec<(&str, Vec<u8>, &str)> = vec![
            ("malformed", frame_of(&[0xff; 9]), "malformed"),
            (
                "too_large",
                (1u32 << 30).to_be_bytes().to_vec(),
                "frame over",
            ),
            (
                "wrong_cluster",
                framed(&[hello_from("c2", "a0", wire::PROTOCOL_VERSION)]),
                "wrong cluster",
            ),
            (
                "old_protocol",
                framed(&[hello_from(CLUSTER, "a0", 0)]),
                "protocol 0",
            ),
            ("not_hello", framed(&[Message::Heartbeat]), "hello"),
            (
                "same_node",
                framed(&[wire::hello(CLUSTER, "b")]),
                "our node id",
            ),
            (
                "wrong_direction",
                framed(&[wire::hello(CLUSTER, "c")]),
                "smaller id dials",
            ),
            (
                "unexpected",
                framed(&[wire::hello(CLUSTER, "a0"), wire::hello(CLUSTER, "a0")]),
                "unexpected hello",
            ),
        ];
        for (label, bytes, reason) in cases {
            let got = raw_exchange(b.bound, &bytes).await;
            assert_eq!(got.first(), Some(&wire::hello(CLUSTER, "b")), "{label}");
            match got.get(1) {
                Some(Message::Refuse { reason: r }) => {
                    assert!(r.contains(reason), "{label}: {r:?}")
                }
                other => panic!("{label}: no refusal but {other:?}"),
            }
            assert_eq!(got.len(), 2, "{label}: {got:?}");
            assert_eq!(
                count(&b.metrics.bridge_refusals, &[label]),
                1,
                "{label}: {}",
                b.metrics.render()
            );
        }
        // A raw client that closes mid-frame is an I/O end, not a refusal.
        let got = raw_exchange(b.bound, &(100u32.to_be_bytes())).await;
        assert_eq!(got, vec![wire::hello(CLUSTER, "b")]);
        // The bridge still serves a good peer, both ways.
        pair(&a, &b).await;
        let there = a.addr.send(batch("b", 1)).await.unwrap();
        let back = b.addr.send(batch("a", 2)).await.unwrap();
        assert_eq!((there, back), (Ok(()), Ok(())));
        assert_eq!(
            b.deliveries.recv().await.unwrap().admit.entries,
            entries(1, 3)
        );
        assert_eq!(
            a.deliveries.recv().await.unwrap().admit.entries,
            entries(2, 3)
        );
    });
}

#[test]
fn a_silent_connection_is_closed_after_three_heartbeats() {
    System::new().block_on(async {
        let b = start("b", 4, false);
        let stream = TcpStream::connect(b.bound).await.unwrap();
        let started = tokio::time::Instant::now();
        let (read, write) = stream.into_split();
        let mut write = FramedWrite::new(write, wire::codec());
        write
            .send(wire::encode(&wire::hello(CLUSTER, "a")).unwrap())
            .await
            .unwrap();
        // Then nothing: the bridge's heartbeats come, then it gives up.
        let mut frames = FramedRead::new(read, wire::codec());
        let mut got = Vec::new();
        while let Some(Ok(frame)) = within("the silence cut", frames.next()).await {
            got.push(wire::decode(&frame).unwrap());
        }
        assert!(started.elapsed() >= HEARTBEAT * 3);
        assert_eq!(got[0], wire::hello(CLUSTER, "b"));
        assert!(got[1..].iter().all(|m| *m == Message::Heartbeat), "{got:?}");
        assert!(got.len() >= 2, "no heartbeat: {got:?}");
        assert_eq!(count(&b.metrics.bridge_disconnects, &["silent"]), 1);
        drop(write);
    });
}

/// A bridge on its own arbiter (thread), to be stopped for good.
struct Remote {
    arbiter: Arbiter,
    node: TestNode,
}

async fn start_remote(id: &'static str, hold: bool) -> Remote {
    let arbiter = Arbiter::new();
    let (tx, rx) = oneshot::channel();
    arbiter.spawn_fn(move || {
        let _ = tx.send(start(id, 4, hold));
    });
    let node = within("the remote bridge", rx).await.unwrap();
    Remote { arbiter, node }
}

/// Stops `remote`'s arbiter and waits for its thread to end: its actors,
/// listener and connections are gone.
async fn stop_remote(remote: Remote) -> TestNode {
    let Remote { arbiter, node } = remote;
    arbiter.stop();
    within(
        "the arbiter to stop",
        actix_rt::task::spawn_blocking(move || arbiter.join()),
    )
    .await
    .unwrap()
    .unwrap();
    node
}

#[test]
fn an_unacked_batch_is_delivered_after_the_peer_restarts() {
    System::new().block_on(async {
        let a = start("a", 4, false);
        let mut b1 = start_remote("b", true).await;
        pair(&a, &b1.node).await;
        let mut send = Box::pin(a.addr.send(batch("b", 5)));
        let held = within("the first delivery", b1.node.deliveries.recv())
            .await
            .unwrap();
        assert_eq!(held.admit.entries, entries(5, 3));
        let old = stop_remote(b1).await;
        drop(held);
        assert!((&mut send).now_or_never().is_none(), "acked by a dead peer");
        // A new bridge on the same address; `a` redials and sends again.
        let mut b2 = start_at("b", old.bound, 4, false);
        introduce(&b2, &a).await;
        assert_eq!(within("the ack after restart", send).await, Ok(Ok(())));
        let again = within("the redelivery", b2.deliveries.recv())
            .await
            .unwrap();
        assert_eq!(
            (again.admit.from.as_str(), again.admit.entries),
            ("a", entries(5, 3))
        );
        let m = &a.metrics;
        assert_eq!(count(&m.bridge_connections, &["b"]), 2);
        assert_eq!(count(&m.bridge_batches, &["b", "resent"]), 1);
        assert_eq!(count(&m.bridge_batches, &["b", "acked"]), 1);
    });
}

#[test]
fn an_acceptor_that_restarts_is_dialled_by_its_new_self() {
    System::new().block_on(async {
        // The sender accepts ("b" > "a"): after "a" restarts, it dials "b"
        // again and "b" resends.
        let b = start("b", 4, false);
        let mut a1 = start_remote("a", true).await;
        pair(&a1.node, &b).await;
        let mut send = Box::pin(b.addr.send(batch("a", 8)));
        let held = within("the first delivery", a1.node.deliveries.recv())
            .await
            .unwrap();
        let old = stop_remote(a1).await;
        drop(held);
        assert!((&mut send).now_or_never().is_none());
        let mut a2 = start_at("a", old.bound, 4, false);
        introduce(&a2, &b).await;
        assert_eq!(within("the ack after restart", send).await, Ok(Ok(())));
        let again = within("the redelivery", a2.deliveries.recv())
            .await
            .unwrap();
        assert_eq!(again.admit.entries, entries(8, 3));
    });
}

#[test]
fn a_peer_that_leaves_fails_its_batches_and_a_rejecting_one_gets_them_again() {
    System::new().block_on(async {
        let a = start("a", 4, false);
        let mut b = start("b", 4, true);
        pair(&a, &b).await;
        // Rejected: the connection closes and the batch comes again.
        let mut send = Box::pin(a.addr.send(batch("b", 3)));
        let first = within("the delivery", b.deliveries.recv()).await.unwrap();
        first
            .answer
            .unwrap()
            .send(Err(Failure::Store("disk full".into())))
            .unwrap();
        let second = within("the redelivery", b.deliveries.recv()).await.unwrap();
        assert_eq!(second.admit.entries, entries(3, 3));
        assert!((&mut send).now_or_never().is_none());
        assert_eq!(count(&b.metrics.bridge_disconnects, &["rejected"]), 1);
        assert_eq!(count(&b.metrics.bridge_batches, &["a", "rejected"]), 1);
        second.answer.unwrap().send(Ok(())).unwrap();
        assert_eq!(within("the ack", &mut send).await, Ok(Ok(())));
        // Leaving: what is unacked fails, to be routed again.
        let send = a.addr.send(batch("b", 4));
        let _held = within("the delivery", b.deliveries.recv()).await.unwrap();
        a.addr.send(SetPeers::default()).await.unwrap();
        let left = within("the failure", send).await.unwrap();
        assert!(matches!(left, Err(Failure::Peer(_))), "{left:?}");
        let status = a.addr.send(GetBridgeStatus).await.unwrap();
        assert!(status.peers.iter().all(|p| p.node != "b"), "{status:?}");
        assert_eq!(count(&a.metrics.bridge_batches, &["b", "failed"]), 1);
    });
}

#[test]
fn a_batch_for_a_partition_not_held_there_is_refused_back_to_its_sender() {
    System::new().block_on(async {
        let a = start("a", 4, false);
        let mut b = start("b", 4, true);
        pair(&a, &b).await;
        // Any failure but "not held" is no refusal: the connection closes
        // and the batch comes again, to the same node.
        let send = a.addr.send(batch("b", 5));
        let first = within("the delivery", b.deliveries.recv()).await.unwrap();
        first
            .answer
            .unwrap()
            .send(Err(Failure::Peer("some other failure".into())))
            .unwrap();
        let again = within("the redelivery", b.deliveries.recv()).await.unwrap();
        assert_eq!(again.admit.entries, entries(5, 3));
        assert_eq!(count(&b.metrics.bridge_disconnects, &["rejected"]), 1);
        assert_eq!(count(&a.metrics.bridge_batches, &["b", "nacked"]), 0);
        // b does not hold the partition: the sender learns it, typed (to
        // route the batch again by its own view), and the connection
        // stays up.
        again
            .answer
            .unwrap()
            .send(Err(Failure::NotHeld { partition: 5 }))
            .unwrap();
        let refused = within("the refusal", send).await.unwrap();
        assert_eq!(refused, Err(Failure::NotHeld { partition: 5 }));
        assert_eq!(count(&a.metrics.bridge_batches, &["b", "nacked"]), 1);
        assert_eq!(count(&b.metrics.bridge_batches, &["a", "nacked"]), 1);
        assert_eq!(count(&b.metrics.bridge_disconnects, &["rejected"]), 1);
        let connections = count(&a.metrics.bridge_connections, &["b"]);
        // The same connection carries the next batch.
        let send = a.addr.send(batch("b", 6));
        let next = within("the next delivery", b.deliveries.recv())
            .await
            .unwrap();
        next.answer.unwrap().send(Ok(())).unwrap();
        assert_eq!(within("the ack", send).await, Ok(Ok(())));
        assert_eq!(count(&a.metrics.bridge_connections, &["b"]), connections);
    });
}

#[test]
fn digest_questions_are_answered_across_the_bridge_or_refused_if_not_held() {
    System::new().block_on(async {
        let a = start("a", 4, false);
        let b = start("b", 4, false);
        pair(&a, &b).await;
        let copy = StoredCopy {
            uri: "http://mirror-a.test/".into(),
            date: "2026-11-30T00:00:00.000000Z".into(),
            record_id: "<urn:uuid:1>".into(),
        };
        let ask = |partition, ask| SendDigest {
            peer: "b".into(),
            partition,
            query: DigestQuery {
                digest: [7; 32],
                ask,
            },
        };
        let claim = within("a claim", a.addr.send(ask(1, DigestAsk::Claim))).await;
        assert_eq!(claim, Ok(Ok(DigestReply::Claimed)));
        let register = a.addr.send(ask(1, DigestAsk::Register(copy.clone())));
        assert_eq!(
            within("a registration", register).await,
            Ok(Ok(DigestReply::Stored(copy)))
        );
        // Not held there: refused back, and the link stays up.
        let stray = within("a refusal", a.addr.send(ask(2, DigestAsk::Claim))).await;
        assert_eq!(stray, Ok(Err(Failure::NotHeld { partition: 2 })));
        assert_eq!(count(&a.metrics.bridge_batches, &["b", "acked"]), 2);
        assert_eq!(count(&a.metrics.bridge_batches, &["b", "nacked"]), 1);
        assert_eq!(count(&a.metrics.bridge_connections, &["b"]), 1);
    });
}

// ------------------------------------------------------- Authentication

/// A node's bridge in an authenticated cluster: TLS with its certificate
/// from `certs`.
fn start_secure(id: &'static str, certs: &CertsDir) -> TestNode {
    certs.make(CLUSTER, &[id.to_owned()]).unwrap();
    let tls = NodeTls::load(&certs.ca(), &certs.cert(id), &certs.key(id), id).unwrap();
    let settings = BridgeSettings {
        tls: Some(Arc::new(tls)),
        ..settings(id, loopback(), 4)
    };
    start_with(id, settings, false)
}

/// Waits until `node` has refused `n` connections for `label`.
async fn refused(node: &TestNode, label: &str, n: u64) {
    within(&format!("{n} refusals for {label}"), async {
        while count(&node.metrics.bridge_refusals, &[label]) < n {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

/// What an intruder says once connected: a hello as node `a`, a batch of
/// links and a digest claim.
fn intrusion() -> Vec<u8> {
    let digest = Message::Digest {
        seq: 2,
        partition: 1,
        digest: [9; 32],
        ask: trawl::cluster::wire::WireAsk::Claim,
    };
    framed(&[
        wire::hello(CLUSTER, "a"),
        Message::Admit {
            seq: 1,
            partition: 1,
            entries: entries(7, 3),
        },
        digest,
    ])
}

/// Dials `to` with TLS as `client` says (its certificate, if any, and the
/// CA it trusts), asking for node `b`'s name, and writes `bytes`; reads
/// until the connection ends. Whether the handshake completed.
async fn tls_intrude(to: SocketAddr, client: rustls::ClientConfig, bytes: &[u8]) -> bool {
    use tokio::io::AsyncReadExt;
    let tcp = TcpStream::connect(to).await.unwrap();
    let name = trawl::cluster::tls::server_name("b").unwrap();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let Ok(mut tls) = connector.connect(name, tcp).await else {
        return false;
    };
    let _ = tls.write_all(bytes).await;
    let _ = tls.flush().await;
    let mut sink = Vec::new();
    let _ = within("the bridge to close", tls.read_to_end(&mut sink)).await;
    true
}

/// A client configuration trusting `ca`, presenting `cert`/`key` if given.
fn client_config(ca: &Path, identity: Option<(&Path, &Path)>) -> rustls::ClientConfig {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .unwrap()
                .map(Result::unwrap)
                .collect();
            let key = PrivateKeyDer::from_pem_file(key).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
    }
}

/// Two nodes of one CA: batches and digest answers cross, over TLS.
#[test]
fn an_authenticated_pair_exchanges_batches_and_digest_answers() {
    System::new().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let certs = CertsDir::new(dir.path());
        let mut a = start_secure("a", &certs);
        let mut b = start_secure("b", &certs);
        pair(&a, &b).await;
        let there = within("a batch a to b", a.addr.send(batch("b", 1))).await;
        let back = within("a batch b to a", b.addr.send(batch("a", 2))).await;
        assert_eq!((there, back), (Ok(Ok(())), Ok(Ok(()))));
        assert_eq!(b.deliveries.recv().await.unwrap().admit.from, "a");
        assert_eq!(a.deliveries.recv().await.unwrap().admit.from, "b");
        let claim = a.addr.send(SendDigest {
            peer: "b".into(),
            partition: 1,
            query: DigestQuery {
                digest: [7; 32],
                ask: DigestAsk::Claim,
            },
        });
        assert_eq!(within("a claim", claim).await, Ok(Ok(DigestReply::Claimed)));
        assert_eq!(count(&a.metrics.bridge_connections, &["b"]), 1);
        assert_eq!(count(&b.metrics.bridge_refusals, &["tls"]), 0);
    });
}

/// Without a certificate of the cluster's CA for the node it says it is,
/// nothing a process sends reaches the node: no hello is answered, no
/// link admitted, no digest claim asked, whether it speaks plain TCP,
/// TLS with no certificate, TLS with another CA's certificate, or TLS
/// with a real node's certificate while claiming to be another node.
#[test]
fn without_the_clusters_certificate_nothing_crosses_the_bridge() {
    System::new().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let (ours, theirs) = (
            CertsDir::new(dir.path().join("ours")),
            CertsDir::new(dir.path().join("theirs")),
        );
        let mut b = start_secure("b", &ours);
        ours.make(CLUSTER, &["c".to_owned()]).unwrap();
        theirs.make(CLUSTER, &["a".to_owned()]).unwrap();

        // Plain TCP: the bridge's TLS handshake fails on the first bytes;
        // it sends no hello of its own.
        let got = raw_exchange(b.bound, &intrusion()).await;
        assert!(got.is_empty(), "answered in the clear: {got:?}");
        refused(&b, "tls", 1).await;

        // TLS, no client certificate.
        tls_intrude(b.bound, client_config(&ours.ca(), None), &intrusion()).await;
        refused(&b, "tls", 2).await;

        // TLS with a certificate for "a" from another CA.
        let foreign = client_config(&ours.ca(), Some((&theirs.cert("a"), &theirs.key("a"))));
        tls_intrude(b.bound, foreign, &intrusion()).await;
        refused(&b, "tls", 3).await;

        // TLS with node c's real certificate, saying it is node a.
        let impostor = client_config(&ours.ca(), Some((&ours.cert("c"), &ours.key("c"))));
        assert!(tls_intrude(b.bound, impostor, &intrusion()).await);
        refused(&b, "not_certified", 1).await;

        // Each connection is over (counted when it closed): nothing of
        // what was sent reached the node.
        assert!(
            b.deliveries.try_recv().is_err(),
            "an intruder's links were admitted"
        );
        assert_eq!(
            b.digests.load(Ordering::SeqCst),
            0,
            "an intruder's claim was asked"
        );
        for label in ["a", "unknown"] {
            assert_eq!(count(&b.metrics.bridge_batches, &[label, "received"]), 0);
            assert_eq!(count(&b.metrics.bridge_connections, &[label]), 0);
        }
    });
}
