//! moto's S3 server, started by a test (scripts/setup.sh installs
//! `moto[server]` into the test virtualenv, `TRAWL_PYTHON`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use futures_util::TryStreamExt;
use object_store::ObjectStoreExt;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use trawl::cluster::manifest::Manifest;

/// moto's S3 server with bucket [`Moto::BUCKET`], stopped on drop (if
/// this test started it).
pub struct Moto {
    child: Option<Child>,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl Moto {
    /// The bucket every test uses.
    pub const BUCKET: &'static str = "trawl";

    /// On a free loopback port.
    pub fn start() -> Moto {
        Self::start_on(IpAddr::from([127, 0, 0, 1]))
    }

    /// On a free port of `ip`, an address of this network namespace.
    pub fn start_on(ip: IpAddr) -> Moto {
        let python = std::env::var("TRAWL_PYTHON").unwrap_or_else(|_| "python3".into());
        // On loopback, a port no ephemeral socket can take meanwhile.
        let port = match ip.is_loopback() {
            true => super::reserved_port().port(),
            false => TcpListener::bind((ip, 0))
                .unwrap()
                .local_addr()
                .unwrap()
                .port(),
        };
        let child = Command::new(&python)
            .args(["-m", "moto.server", "-H", &ip.to_string(), "-p"])
            .arg(port.to_string())
            // Parts of 64 KiB (S3 itself wants 5 MiB), so small files go
            // up in several parts.
            .env("S3_UPLOAD_PART_MIN_SIZE", "1024")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("{python} -m moto.server (scripts/setup.sh installs moto[server]): {e}")
            });
        let mut moto = Moto {
            child: Some(child),
            addr: SocketAddr::new(ip, port),
        };
        let up = super::eventually_true(Duration::from_secs(30), || {
            if let Some(Ok(Some(status))) = moto.child.as_mut().map(Child::try_wait) {
                panic!("moto exited with {status}: is moto[server] installed for {python}?");
            }
            request(moto.addr, "GET / HTTP/1.1").is_ok()
        });
        assert!(up, "moto did not start");
        let created = request(moto.addr, &format!("PUT /{} HTTP/1.1", Self::BUCKET)).unwrap();
        assert!(created.starts_with("HTTP/1.1 200"), "{created}");
        moto
    }

    /// One started elsewhere (a container), at `addr`, with the bucket.
    pub fn at(addr: SocketAddr) -> Moto {
        Moto { child: None, addr }
    }

    /// `object_store` options that reach this server.
    pub fn options(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("aws_endpoint".to_owned(), format!("http://{}", self.addr)),
            ("aws_allow_http".to_owned(), "true".to_owned()),
            ("aws_region".to_owned(), "us-east-1".to_owned()),
            ("aws_access_key_id".to_owned(), "test".to_owned()),
            ("aws_secret_access_key".to_owned(), "test".to_owned()),
        ])
    }

    /// Every object of the bucket under `prefix`: its bytes by key.
    pub fn objects(&self, prefix: &str) -> BTreeMap<String, Vec<u8>> {
        self.objects_where(prefix, |_| true)
    }

    /// The keys under `prefix` and their sizes (nothing downloaded).
    pub fn sizes(&self, prefix: &str) -> BTreeMap<String, u64> {
        let url = format!("s3://{}/{prefix}", Self::BUCKET);
        let target = trawl::upload::Target::open(&url, &self.options(), 3).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let listed: Vec<_> = target
                .store()
                .list(Some(&object_store::path::Path::from(prefix)))
                .try_collect()
                .await
                .unwrap();
            listed
                .into_iter()
                .map(|m| (m.location.to_string(), m.size))
                .collect()
        })
    }

    /// The objects under `prefix` whose key `wanted` keeps (the others are
    /// not downloaded).
    pub fn objects_where(
        &self,
        prefix: &str,
        wanted: impl Fn(&str) -> bool,
    ) -> BTreeMap<String, Vec<u8>> {
        let url = format!("s3://{}/{prefix}", Self::BUCKET);
        let target = trawl::upload::Target::open(&url, &self.options(), 3).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let store = target.store();
            let listed: Vec<_> = store
                .list(Some(&object_store::path::Path::from(prefix)))
                .try_collect()
                .await
                .unwrap();
            let mut out = BTreeMap::new();
            for meta in listed.into_iter().filter(|m| wanted(m.location.as_ref())) {
                let bytes = store.get(&meta.location).await.unwrap().bytes().await;
                out.insert(meta.location.to_string(), bytes.unwrap().to_vec());
            }
            out
        })
    }

    /// The same options as a TOML table's body.
    pub fn options_toml(&self) -> String {
        self.options()
            .iter()
            .map(|(k, v)| format!("{k} = \"{v}\"\n"))
            .collect()
    }
}

/// What a cluster left in the bucket: its partitions' chains (under
/// `state/`) and its uploaded WARC files (under `warcs/`).
impl Moto {
    /// Every manifest of every partition's chain.
    pub fn manifests(&self) -> Vec<Manifest> {
        self.objects_where("state/partitions", |key| key.contains("/manifests/"))
            .into_iter()
            .map(|(key, bytes)| Manifest::decode(&bytes).unwrap_or_else(|e| panic!("{key}: {e}")))
            .collect()
    }

    /// Whether `node` published a checkpoint with content.
    pub fn checkpointed_by(&self, node: &str) -> bool {
        self.manifests()
            .iter()
            .any(|m| m.owner.node == node && !m.files.is_empty())
    }

    /// Each partition's chain head.
    pub fn heads(&self) -> BTreeMap<u16, Manifest> {
        let mut heads: BTreeMap<u16, Manifest> = BTreeMap::new();
        for m in self.manifests() {
            if heads.get(&m.partition).is_none_or(|h| h.number < m.number) {
                heads.insert(m.partition, m);
            }
        }
        heads
    }

    /// The target URIs of the response and revisit records in the WARC
    /// files uploaded to the bucket (copied under `dir` to be read).
    pub fn uploaded_uris(&self, dir: &Path) -> BTreeSet<String> {
        let copies = dir.join("uploaded");
        std::fs::create_dir_all(&copies).unwrap();
        for (key, bytes) in self.objects("warcs") {
            // A segment (`<file>.segments/<range>`) is read as the WARC
            // records it holds.
            let name = match key.contains(".segments/") {
                true => format!("{}.warc.gz", key.replace('/', "_")),
                false => key.replace('/', "_"),
            };
            std::fs::write(copies.join(name), bytes).unwrap();
        }
        super::archived_uris(&copies)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// One request without a body; the response's text.
pub fn request(addr: SocketAddr, line: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect(addr)?;
    write!(
        s,
        "{line}\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}
