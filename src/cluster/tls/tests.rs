use std::os::unix::fs::PermissionsExt;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

fn nodes(ids: &[&str]) -> Vec<String> {
    ids.iter().map(|id| id.to_string()).collect()
}

/// A cluster's files for `ids` in a fresh directory.
fn cluster(ids: &[&str]) -> (tempfile::TempDir, CertsDir) {
    let dir = tempfile::tempdir().unwrap();
    let certs = CertsDir::new(dir.path());
    certs.make("test", &nodes(ids)).unwrap();
    (dir, certs)
}

fn identity(certs: &CertsDir, id: &str) -> NodeTls {
    NodeTls::load(&certs.ca(), &certs.cert(id), &certs.key(id), id).unwrap()
}

/// What each side of one TLS handshake saw: the dialler (asking for
/// `dial`) and the acceptor (the client certificate's first entry).
async fn handshake(
    client: &NodeTls,
    server: &NodeTls,
    dial: &str,
) -> (Result<(), String>, Result<CertificateDer<'static>, String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let acceptor = server.acceptor();
    let accepting = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.map_err(|e| e.to_string())?;
        let cert = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        let mut byte = [0u8; 1];
        tls.read_exact(&mut byte).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(cert)
    });
    let dialled = async {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = server_name(dial).unwrap();
        let mut tls = client
            .connector()
            .connect(name, tcp)
            .await
            .map_err(|e| e.to_string())?;
        tls.write_all(b"x").await.map_err(|e| e.to_string())?;
        tls.flush().await.map_err(|e| e.to_string())
    }
    .await;
    let accepted = accepting.await.unwrap();
    (dialled, accepted)
}

#[tokio::test]
async fn nodes_of_one_ca_connect_and_each_certificate_names_its_node() {
    let (_dir, certs) = cluster(&["n1", "n2"]);
    let (n1, n2) = (identity(&certs, "n1"), identity(&certs, "n2"));
    let (dialled, accepted) = handshake(&n1, &n2, "n2").await;
    dialled.unwrap();
    let client_cert = accepted.unwrap();
    assert!(certificate_names(&client_cert, "n1"));
    assert!(!certificate_names(&client_cert, "n2"));
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused_either_way() {
    let (_a, ours) = cluster(&["n1", "n2"]);
    let (_b, theirs) = cluster(&["n1", "n2"]);
    // An outsider dials us: we refuse its client certificate.
    let (_, accepted) = handshake(&identity(&theirs, "n1"), &identity(&ours, "n2"), "n2").await;
    assert!(accepted.is_err());
    // We dial an outsider: we refuse its server certificate.
    let (dialled, _) = handshake(&identity(&ours, "n1"), &identity(&theirs, "n2"), "n2").await;
    assert!(dialled.unwrap_err().contains("certificate"));
}

#[tokio::test]
async fn dialling_one_node_and_reaching_another_is_refused() {
    let (_dir, certs) = cluster(&["n1", "n2", "n3"]);
    // n3 answers at the address where n1 expects n2.
    let (dialled, _) = handshake(&identity(&certs, "n1"), &identity(&certs, "n3"), "n2").await;
    assert!(dialled.unwrap_err().contains("certificate"));
}

#[test]
fn a_node_refuses_to_start_with_another_nodes_certificate() {
    let (_dir, certs) = cluster(&["n1", "n2"]);
    let err = NodeTls::load(&certs.ca(), &certs.cert("n2"), &certs.key("n2"), "n1").unwrap_err();
    assert!(matches!(err, TlsError::NotOurs { .. }), "{err}");
    let missing = NodeTls::load(&certs.ca(), &certs.cert("n9"), &certs.key("n1"), "n9");
    assert!(matches!(missing, Err(TlsError::Io { .. })));
    let not_pem = NodeTls::load(
        &certs.gossip_key(),
        &certs.cert("n1"),
        &certs.key("n1"),
        "n1",
    );
    assert!(matches!(not_pem, Err(TlsError::Pem { .. })));
}

#[test]
fn making_certs_again_adds_nodes_and_overwrites_nothing() {
    let (_dir, certs) = cluster(&["n1"]);
    let ca = std::fs::read(certs.ca()).unwrap();
    let gossip = std::fs::read(certs.gossip_key()).unwrap();
    let n1 = std::fs::read(certs.cert("n1")).unwrap();
    let written = certs.make("test", &nodes(&["n1", "n2"])).unwrap();
    assert_eq!(written, vec![certs.key("n2"), certs.cert("n2")]);
    assert_eq!(std::fs::read(certs.ca()).unwrap(), ca);
    assert_eq!(std::fs::read(certs.gossip_key()).unwrap(), gossip);
    assert_eq!(std::fs::read(certs.cert("n1")).unwrap(), n1);
    // The added node's certificate comes from the same CA.
    identity(&certs, "n2");
    for key in [
        certs.key("n1"),
        certs.key("n2"),
        certs.ca_key(),
        certs.gossip_key(),
    ] {
        let mode = std::fs::metadata(&key).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} is readable by others", key.display());
    }
    let settings = certs.toml("n2");
    let parsed: toml::Table = settings.parse().unwrap();
    assert_eq!(
        parsed["tls_cert"].as_str(),
        Some(certs.cert("n2").to_str().unwrap())
    );
}

#[test]
fn ids_that_cannot_be_certificate_names_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let certs = CertsDir::new(dir.path());
    for bad in ["a".repeat(64), "n 1".into(), "".into()] {
        let err = certs.make("test", std::slice::from_ref(&bad)).unwrap_err();
        assert!(matches!(err, TlsError::Name(_)), "{bad:?}: {err}");
    }
    assert!(certs.make("test", &nodes(&["node_1", "a-b", "7"])).is_ok());
}
