//! `[previous]`: a recurring crawl starts from the crawl before it
//! (`trawl::dedup::previous`). Its stored copies are registered with exact
//! dedup before anything is fetched; then (with `reseed`) its page URLs
//! follow the seeds given.

use std::io::BufRead as _;
use std::path::PathBuf;

use actix::Addr;
use anyhow::Context as _;
use futures_util::StreamExt as _;
use trawl::actors::messages::DigestQuery;
use trawl::actors::Node;
use trawl::config::PreviousConfig;
use trawl::dedup::exact::{DigestAsk, DigestReply};
use trawl::warc::cdxj::Capture;

/// Registrations in flight at once.
const IN_FLIGHT: usize = 256;

/// What registering an earlier crawl's copies did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    /// Lines read.
    pub lines: u64,
    /// Copies the digests' partitions now know (this one or an earlier).
    pub copies: u64,
    /// Lines that name no copy to point at (not a full 2xx response, not
    /// a SHA-256 digest, not a capture line).
    pub skipped: u64,
    /// Copies whose partition could not take them (no owner yet, a store
    /// error): their payloads are stored in full again if fetched.
    pub failed: u64,
}

/// Copies read before they are registered (a file of any size is read
/// in chunks).
const CHUNK: usize = 10_000;

/// Registers `copies`, [`IN_FLIGHT`] at a time, counting the answers.
async fn register_chunk(
    node: &Addr<Node>,
    copies: Vec<([u8; 32], trawl::store::StoredCopy)>,
    done: &mut Registered,
) {
    let replies: Vec<_> = futures_util::stream::iter(copies)
        .map(|(digest, copy)| {
            node.send(DigestQuery {
                digest,
                ask: DigestAsk::Register(copy),
            })
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    for reply in replies {
        match reply {
            Ok(Ok(DigestReply::Stored(_))) => done.copies += 1,
            _ => done.failed += 1,
        }
    }
}

/// The earlier crawl's indexes.
pub struct Previous {
    files: Vec<PathBuf>,
    reseed: bool,
}

impl Previous {
    /// The indexes `config` names (none: nothing to do).
    pub fn open(config: &PreviousConfig) -> anyhow::Result<Previous> {
        let files = trawl::dedup::previous::index_files(&config.indexes)?;
        Ok(Previous {
            files,
            reseed: config.reseed,
        })
    }

    /// Registers every stored copy of the earlier crawl with the partition
    /// its digest belongs to, waiting for each answer.
    pub async fn register(&self, node: &Addr<Node>) -> anyhow::Result<Registered> {
        let mut done = Registered::default();
        for path in &self.files {
            let file =
                std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
            let mut copies = Vec::with_capacity(CHUNK);
            for line in std::io::BufReader::new(file).lines() {
                let line = line.with_context(|| format!("reading {}", path.display()))?;
                done.lines += 1;
                match Capture::parse(&line).and_then(|c| c.stored_copy()) {
                    Some(copy) => copies.push(copy),
                    None => done.skipped += 1,
                }
                if copies.len() == CHUNK {
                    register_chunk(node, std::mem::take(&mut copies), &mut done).await;
                }
            }
            register_chunk(node, copies, &mut done).await;
        }
        if self.files.is_empty() {
            return Ok(done);
        }
        tracing::info!(
            files = self.files.len(),
            lines = done.lines,
            copies = done.copies,
            skipped = done.skipped,
            failed = done.failed,
            "[previous] the earlier crawl's copies are registered: unchanged payloads become revisits of them"
        );
        Ok(done)
    }

    /// The earlier crawl's page URLs (with `reseed`; none without), read
    /// as they are offered.
    pub fn seeds(&self) -> impl Iterator<Item = anyhow::Result<String>> + use<> {
        let files = if self.reseed {
            self.files.clone()
        } else {
            Vec::new()
        };
        files.into_iter().flat_map(|path| {
            let lines: Box<dyn Iterator<Item = anyhow::Result<String>>> =
                match std::fs::File::open(&path) {
                    Ok(file) => {
                        let path = path.clone();
                        Box::new(
                            std::io::BufReader::new(file).lines().map(move |l| {
                                l.with_context(|| format!("reading {}", path.display()))
                            }),
                        )
                    }
                    Err(e) => Box::new(std::iter::once(
                        Err(e).with_context(|| format!("opening {}", path.display())),
                    )),
                };
            lines.filter_map(|line| match line {
                Ok(line) => Capture::parse(&line)
                    .filter(Capture::is_page)
                    .map(|c| Ok(c.url)),
                Err(e) => Some(Err(e)),
            })
        })
    }
}
