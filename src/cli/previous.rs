//! `[previous]`: a recurring crawl starts from the crawl before it
//! (`trawl::dedup::previous`). Its stored copies are registered with exact
//! dedup before the seeds are offered; then (with `reseed`) its page URLs
//! follow the seeds given, as URLs it fetched rather than as seeds.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};

use actix::Addr;
use anyhow::Context as _;
use futures_util::StreamExt as _;
use trawl::actors::messages::{DigestQuery, UrlOutcome};
use trawl::actors::{Node, OfferEarlier};
use trawl::config::PreviousConfig;
use trawl::dedup::exact::{DigestAsk, DigestReply};
use trawl::dedup::previous::{exact_copy, read_chunk, Chunk};
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

/// Captures picked from an index before they are registered or offered
/// (a file of any size is read in chunks).
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
            let mut index = ChunkedIndex::open(path)?;
            while let Some(chunk) = index.next(|dir, c| exact_copy(dir, &c)).await? {
                done.lines += chunk.lines;
                done.skipped += chunk.skipped;
                register_chunk(node, chunk.items, &mut done).await;
            }
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

    /// Offers the earlier crawl's page URLs (with `reseed`), read as
    /// they are offered, in batches, as URLs it fetched, not as seeds
    /// (`OfferEarlier`); logs what became of them.
    pub async fn offer(&self, node: &Addr<Node>) -> anyhow::Result<()> {
        if !self.reseed || self.files.is_empty() {
            return Ok(());
        }
        let (mut admitted, mut seen, mut refused) = (0u64, 0u64, 0u64);
        for path in &self.files {
            let mut index = ChunkedIndex::open(path)?;
            while let Some(chunk) = index.next(|_, c| c.is_page().then_some(c.url)).await? {
                if chunk.items.is_empty() {
                    continue;
                }
                let urls = chunk.items;
                let offer = || OfferEarlier { urls: urls.clone() };
                for outcome in super::crawl::offer_rerouted(node, offer).await? {
                    match outcome {
                        UrlOutcome::Admitted => admitted += 1,
                        UrlOutcome::Seen | UrlOutcome::Forwarded => seen += 1,
                        UrlOutcome::Filtered(_) => refused += 1,
                    }
                }
            }
        }
        tracing::info!(
            admitted,
            seen,
            refused,
            "[previous] the earlier crawl's pages are offered"
        );
        Ok(())
    }
}

/// An index file read [`CHUNK`] picks at a time on a blocking thread
/// (a pick may read the WARC file beside it), not on the executor the
/// node's actors run on.
struct ChunkedIndex {
    path: PathBuf,
    /// `None` once its lines have ended.
    lines: Option<std::io::Lines<std::io::BufReader<std::fs::File>>>,
}

impl ChunkedIndex {
    fn open(path: &Path) -> anyhow::Result<ChunkedIndex> {
        let file =
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
        Ok(ChunkedIndex {
            path: path.to_owned(),
            lines: Some(std::io::BufReader::new(file).lines()),
        })
    }

    /// The next chunk of what `pick` takes from the lines (given the
    /// index's directory, where its WARC files are); `None` after the last.
    async fn next<T: Send + 'static>(
        &mut self,
        pick: fn(&Path, Capture) -> Option<T>,
    ) -> anyhow::Result<Option<Chunk<T>>> {
        let Some(mut lines) = self.lines.take() else {
            return Ok(None);
        };
        let dir = self.path.parent().unwrap_or(Path::new(".")).to_owned();
        let (lines, chunk) = actix_rt::task::spawn_blocking(move || {
            let chunk = read_chunk(&mut lines, CHUNK, |c| pick(&dir, c));
            (lines, chunk)
        })
        .await
        .context("reading an index")?;
        let chunk = chunk.with_context(|| format!("reading {}", self.path.display()))?;
        if !chunk.done {
            self.lines = Some(lines);
        }
        Ok(Some(chunk))
    }
}
