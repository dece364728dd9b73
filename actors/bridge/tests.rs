use super::*;
use crate::actors::messages::{RemoteAdmit, RemoteDigest};

struct Sink;

impl Actor for Sink {
    type Context = Context<Self>;
}

impl Handler<RemoteAdmit> for Sink {
    type Result = Result<(), Failure>;

    fn handle(&mut self, _: RemoteAdmit, _: &mut Self::Context) -> Self::Result {
        Ok(())
    }
}

impl Handler<RemoteDigest> for Sink {
    type Result = Result<DigestReply, Failure>;

    fn handle(&mut self, _: RemoteDigest, _: &mut Self::Context) -> Self::Result {
        Ok(DigestReply::Unclaimed)
    }
}

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn a_taken_address_is_an_error_not_a_panic() {
    System::new().block_on(async {
        let taken = std::net::TcpListener::bind(loopback()).unwrap();
        let settings = BridgeSettings::new("c1", "n1", taken.local_addr().unwrap());
        let sink = Sink.start();
        let inbound = BridgeInbound {
            admit: sink.clone().recipient(),
            digest: sink.recipient(),
        };
        let started = BridgeActor::start(settings, inbound, Arc::new(Metrics::new()));
        assert!(matches!(started, Err(BridgeError::Listen { .. })));
    });
}

#[test]
fn a_frame_over_the_cap_is_too_large_and_other_read_errors_are_io() {
    let mut huge = bytes::BytesMut::from(&(wire::MAX_FRAME as u32 + 1).to_be_bytes()[..]);
    let e = tokio_util::codec::Decoder::decode(&mut wire::codec(), &mut huge).unwrap_err();
    assert!(matches!(conn::read_error(e), Closed::TooLarge));
    let e = io::Error::new(io::ErrorKind::ConnectionReset, "reset");
    assert!(matches!(conn::read_error(e), Closed::Io(_)));
}
