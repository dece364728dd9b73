//! The outbox: URLs found here for partitions another node owns, kept
//! until that node says it admitted them durably.
//!
//! `outbox`: `seq (u64 BE) ‖ partition (u16 BE)` → the batch of
//! [`AdmitEntry`]s for that partition. Batches are written in the same
//! `WriteBatch` as the completion of the page they were found on
//! ([`PartitionStore::complete_with_outbox`]), so a link survives a crash
//! of the sender between "page done" and "link delivered": either the page
//! is still queued (and is fetched again), or its links wait here. The
//! bridge reads batches in the order they were written
//! ([`PartitionStore::outbox_page`]) and deletes one
//! ([`PartitionStore::outbox_done`]) only after the owner acknowledged it;
//! sending a batch twice is harmless, since admission is idempotent. The
//! outbox belongs to the partition's store, so when the partition moves to
//! another node its undelivered links move with it.
//!
//! (Issue 10 wires this into the crawl with the bridge; a node that holds
//! every partition writes nothing here.)

use std::sync::atomic::Ordering;

use rocksdb::{IteratorMode, WriteBatch};
use serde::{Deserialize, Serialize};

use super::admission::AdmitEntry;
use super::codec::{decode_value, decode_value_as, encode_value_as, CodecError};
use super::queue::Completion;
use super::schema::CF_OUTBOX;
use super::{PartitionStore, StoreError};
use crate::frontier::importance::Cash;
use crate::frontier::provenance::{HopPath, Provenance};
use crate::frontier::{EntryKind, Priority};
use crate::politeness::Schedule;
use crate::url::Fingerprint;

/// URLs for one partition owned elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboxBatch {
    /// The partition they belong to.
    pub partition: u16,
    /// The URLs.
    pub entries: Vec<AdmitEntry>,
}

/// A batch waiting in the outbox, with the key that deletes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Its key (the position it was written at).
    pub key: [u8; 10],
    /// The batch.
    pub batch: OutboxBatch,
}

impl Pending {
    /// The order it was written in.
    pub fn seq(&self) -> u64 {
        u64::from_be_bytes(self.key[..8].try_into().expect("eight bytes"))
    }
}

const WHAT: &str = "outbox batch";

/// The version byte of batches whose entries carry their cash (version 1:
/// [`StoredEntry`] alone, read with [`Cash::UNKNOWN`]).
const WITH_CASH: u8 = 2;

/// The version byte of batches whose entries carry their cash and their
/// provenance (via, hop path): versions 1 and 2 are read as seeds'.
const WITH_PROVENANCE: u8 = 3;

/// An entry of a version-3 batch: version 2's, then where it was found.
type StoredWithProvenance = (StoredEntry, f32, Option<String>, String);

/// The stored shape of an [`AdmitEntry`] (version 1; version 2 is it with
/// the entry's cash).
#[derive(Serialize, Deserialize)]
struct StoredEntry {
    fp: u128,
    url: String,
    host: String,
    depth: u32,
    priority: u8,
    kind: StoredEntryKind,
    queue: bool,
    referrer: Option<String>,
    lastmod_ms: Option<u64>,
}

/// The stored shape of an [`EntryKind`]; variants are only appended.
#[derive(Serialize, Deserialize)]
enum StoredEntryKind {
    Page,
    Redirected { hops: u8 },
    Sitemap { submitter: Option<String> },
}

impl From<&AdmitEntry> for StoredEntry {
    fn from(e: &AdmitEntry) -> Self {
        StoredEntry {
            fp: e.fp.0,
            url: e.url.clone(),
            host: e.host.clone(),
            depth: e.depth,
            priority: e.priority.level() as u8,
            kind: match &e.kind {
                EntryKind::Page => StoredEntryKind::Page,
                EntryKind::Redirected { hops } => StoredEntryKind::Redirected { hops: *hops },
                EntryKind::Sitemap { submitter } => StoredEntryKind::Sitemap {
                    submitter: submitter.clone(),
                },
            },
            queue: e.queue,
            referrer: e.referrer.clone(),
            lastmod_ms: e.lastmod_ms,
        }
    }
}

impl From<StoredEntry> for AdmitEntry {
    fn from(s: StoredEntry) -> Self {
        AdmitEntry {
            fp: Fingerprint(s.fp),
            url: s.url,
            host: s.host,
            depth: s.depth,
            priority: Priority::from_level(s.priority),
            kind: match s.kind {
                StoredEntryKind::Page => EntryKind::Page,
                StoredEntryKind::Redirected { hops } => EntryKind::Redirected { hops },
                StoredEntryKind::Sitemap { submitter } => EntryKind::Sitemap { submitter },
            },
            queue: s.queue,
            referrer: s.referrer,
            lastmod_ms: s.lastmod_ms,
            cash: Cash::UNKNOWN,
            provenance: Provenance::seed(),
        }
    }
}

/// The most URL bytes (the URLs, their hosts and the URLs they were found
/// on) one stored batch holds: a quarter of a bridge frame
/// ([`crate::cluster::wire::MAX_FRAME`]), so a batch, with its encoding's
/// overhead, always fits one. A page's 5,000 links of 2 KiB, each found on
/// a 2 KiB URL, are three batches.
pub const MAX_BATCH_BYTES: usize = crate::cluster::wire::MAX_FRAME / 4;

/// `entries` in consecutive runs of at most [`MAX_BATCH_BYTES`] (at least
/// one entry each); none for no entries.
fn sized_chunks(entries: &[AdmitEntry]) -> impl Iterator<Item = &[AdmitEntry]> {
    let mut rest = entries;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let mut end = 0;
        for e in rest {
            let size = e.url.len() + e.host.len() + e.provenance.via.as_deref().map_or(0, str::len);
            if end > 0 && bytes + size > MAX_BATCH_BYTES {
                break;
            }
            bytes += size;
            end += 1;
        }
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        Some(chunk)
    })
}

/// The stored form of a batch's entries (the current version).
fn encode_entries(entries: &[AdmitEntry]) -> Result<Vec<u8>, CodecError> {
    let stored: Vec<StoredWithProvenance> = entries
        .iter()
        .map(|e| {
            let via = e.provenance.via.as_deref().map(str::to_owned);
            let hops = e.provenance.hops.as_str().to_owned();
            (StoredEntry::from(e), e.cash.get(), via, hops)
        })
        .collect();
    encode_value_as(WHAT, WITH_PROVENANCE, &stored)
}

/// A stored batch's entries, of any version.
fn decode_entries(bytes: &[u8]) -> Result<Vec<AdmitEntry>, CodecError> {
    let with_provenance: Option<Vec<StoredWithProvenance>> =
        decode_value_as(WHAT, WITH_PROVENANCE, bytes)?;
    if let Some(stored) = with_provenance {
        return Ok(stored
            .into_iter()
            .map(|(s, cash, via, hops)| AdmitEntry {
                cash: Cash::new(cash),
                provenance: Provenance {
                    via: via.map(|v| std::sync::Arc::from(v.as_str())),
                    hops: HopPath::from_letters(&hops),
                },
                ..AdmitEntry::from(s)
            })
            .collect());
    }
    let with_cash: Option<Vec<(StoredEntry, f32)>> = decode_value_as(WHAT, WITH_CASH, bytes)?;
    Ok(match with_cash {
        Some(stored) => stored
            .into_iter()
            .map(|(s, cash)| AdmitEntry {
                cash: Cash::new(cash),
                ..AdmitEntry::from(s)
            })
            .collect(),
        None => {
            let stored: Vec<StoredEntry> = decode_value(WHAT, bytes)?;
            stored.into_iter().map(AdmitEntry::from).collect()
        }
    })
}

fn key(seq: u64, partition: u16) -> [u8; 10] {
    let mut key = [0u8; 10];
    key[..8].copy_from_slice(&seq.to_be_bytes());
    key[8..].copy_from_slice(&partition.to_be_bytes());
    key
}

impl PartitionStore {
    /// [`PartitionStore::complete`], with `outbox` written in the same
    /// batch (the links a page found for partitions owned elsewhere), and
    /// `digests` (new entries of this partition's part of the exact
    /// dedup index, `digests.rs`).
    pub fn complete_with_outbox(
        &self,
        completions: &[Completion],
        schedules: &[(&str, &Schedule)],
        outbox: &[OutboxBatch],
        digests: &[super::DigestEntry],
    ) -> Result<(), StoreError> {
        self.complete_with_holds(completions, schedules, &[], outbox, digests)
    }

    /// [`PartitionStore::complete_with_outbox`], with the holds of
    /// requests about to leave (`holds`, see
    /// [`super::HostState::hold`]) in the same write.
    pub fn complete_with_holds(
        &self,
        completions: &[Completion],
        schedules: &[(&str, &Schedule)],
        holds: &[(&str, &crate::politeness::Hold)],
        outbox: &[OutboxBatch],
        digests: &[super::DigestEntry],
    ) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for (host, hold) in holds {
            self.hold_host(&mut batch, host, hold)?;
        }
        self.stage_outbox(&mut batch, outbox)?;
        self.stage_digests(&mut batch, digests)?;
        self.complete_in(batch, completions, schedules)
    }

    /// Adds `outbox` to `batch`, under sequence numbers reserved at once:
    /// two writers (the partition's actor, the node's seeding) never take
    /// one number, whichever commits first. A number reserved by a write
    /// that then fails is skipped. A page's links for one partition are
    /// stored (and so sent) in batches of at most [`MAX_BATCH_BYTES`] of
    /// URLs, so a batch always fits one bridge frame.
    fn stage_outbox(
        &self,
        batch: &mut WriteBatch,
        outbox: &[OutboxBatch],
    ) -> Result<(), StoreError> {
        let chunks: Vec<(u16, &[AdmitEntry])> = outbox
            .iter()
            .flat_map(|b| sized_chunks(&b.entries).map(move |c| (b.partition, c)))
            .collect();
        let first = self
            .outbox_seq
            .fetch_add(chunks.len() as u64, Ordering::Relaxed);
        for (seq, (partition, entries)) in (first..).zip(chunks) {
            let value = encode_entries(entries).map_err(|e| self.codec(e))?;
            batch.put_cf(self.cf(CF_OUTBOX), key(seq, partition), value);
        }
        Ok(())
    }

    /// Up to `n` waiting batches after key `after`, oldest first.
    pub fn outbox_page(
        &self,
        after: Option<&[u8; 10]>,
        n: usize,
    ) -> Result<Vec<Pending>, StoreError> {
        let mode = match after {
            Some(k) => IteratorMode::From(k, rocksdb::Direction::Forward),
            None => IteratorMode::Start,
        };
        let mut out = Vec::new();
        for item in self.db.iterator_cf(self.cf(CF_OUTBOX), mode) {
            let (k, v) = item.map_err(|e| self.rocks(e))?;
            if out.len() >= n {
                break;
            }
            let Ok(k) = <[u8; 10]>::try_from(&k[..]) else {
                return Err(self.corrupt("outbox key"));
            };
            if Some(&k) == after {
                continue;
            }
            let entries = decode_entries(&v).map_err(|e| self.codec(e))?;
            let partition = u16::from_be_bytes([k[8], k[9]]);
            out.push(Pending {
                key: k,
                batch: OutboxBatch { partition, entries },
            });
        }
        Ok(out)
    }

    /// Deletes batches the owners acknowledged.
    pub fn outbox_done(&self, keys: &[[u8; 10]]) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for k in keys {
            batch.delete_cf(self.cf(CF_OUTBOX), k);
        }
        self.write(batch)
    }

    /// The sequence number after the last batch in the outbox (at open).
    pub(super) fn load_outbox_seq(&self) -> Result<(), StoreError> {
        let mut iter = self.db.raw_iterator_cf(self.cf(CF_OUTBOX));
        iter.seek_to_last();
        let next = match iter.key() {
            Some(k) if k.len() == 10 => {
                u64::from_be_bytes(k[..8].try_into().expect("eight bytes")) + 1
            }
            Some(_) => return Err(self.corrupt("outbox key")),
            None => 0,
        };
        iter.status().map_err(|e| self.rocks(e))?;
        self.outbox_seq.store(next, Ordering::Relaxed);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::codec::encode_value;
    use crate::store::test_support::{entry, open};
    use crate::store::{UrlRecord, UrlState};

    fn links(partition: u16, n: u32) -> OutboxBatch {
        let mut entries: Vec<AdmitEntry> = (0..n)
            .map(|i| entry(&format!("http://b.test/{partition}/{i}"), "b.test"))
            .collect();
        entries[0].kind = EntryKind::Sitemap {
            submitter: Some("a.test".into()),
        };
        entries[0].lastmod_ms = Some(5);
        entries[0].referrer = Some("a.test".into());
        OutboxBatch { partition, entries }
    }

    #[test]
    fn long_links_are_split_into_batches_that_each_fit_a_frame() {
        use crate::frontier::provenance::Hop;
        let long = "x".repeat(2000);
        let via: std::sync::Arc<str> = std::sync::Arc::from(format!("http://a.test/{long}"));
        let entries: Vec<AdmitEntry> = (0..5000)
            .map(|i| AdmitEntry {
                provenance: Provenance::seed().then(&via, Hop::Link),
                ..entry(&format!("http://b.test/{i}/{long}"), "b.test")
            })
            .collect();
        let chunks: Vec<&[AdmitEntry]> = sized_chunks(&entries).collect();
        assert!(chunks.len() >= 3, "{}", chunks.len());
        assert_eq!(chunks.iter().map(|c| c.len()).sum::<usize>(), 5000);
        for chunk in &chunks {
            // Each, as the bridge sends it, fits a frame.
            let wire: Vec<crate::cluster::wire::WireEntry> = chunk.iter().map(Into::into).collect();
            let message = crate::cluster::wire::Message::Admit {
                seq: 1,
                partition: 0,
                entries: wire,
            };
            assert!(crate::cluster::wire::encode(&message).is_ok());
        }
        assert_eq!(sized_chunks(&[]).count(), 0);
    }

    #[test]
    fn batches_written_before_cash_read_with_unknown_cash() {
        let mut batch = links(3, 2);
        for e in &mut batch.entries {
            e.cash = Cash::new(0.5);
        }
        let old: Vec<StoredEntry> = batch.entries.iter().map(StoredEntry::from).collect();
        let bytes = encode_value(WHAT, &old).unwrap();
        let read = decode_entries(&bytes).unwrap();
        assert_eq!(read.len(), 2);
        assert!(read.iter().all(|e| e.cash == Cash::UNKNOWN));
        assert_eq!(read[1].url, batch.entries[1].url);
        // The current version keeps each entry's cash.
        let mut rich = links(3, 2);
        rich.entries[1].cash = Cash::new(0.25);
        let stored: Vec<(StoredEntry, f32)> = rich
            .entries
            .iter()
            .map(|e| (StoredEntry::from(e), e.cash.get()))
            .collect();
        let bytes = encode_value_as(WHAT, WITH_CASH, &stored).unwrap();
        assert_eq!(decode_entries(&bytes).unwrap(), rich.entries);
        // The current version keeps where each was found too.
        use crate::frontier::provenance::Hop;
        let via: std::sync::Arc<str> = std::sync::Arc::from("http://a.test/p");
        rich.entries[0].provenance = Provenance::seed().then(&via, Hop::Manifest);
        rich.entries[1].provenance = rich.entries[0].provenance.then(&via, Hop::Link);
        let bytes = encode_entries(&rich.entries).unwrap();
        assert_eq!(bytes[0], WITH_PROVENANCE);
        assert_eq!(decode_entries(&bytes).unwrap(), rich.entries);
    }

    #[test]
    fn links_for_other_partitions_wait_with_the_completion_until_acknowledged() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            store
                .admit(vec![entry("http://a.test/1", "a.test")])
                .unwrap();
            let head = store
                .queue_page("a.test", Priority::NORMAL, None, 1)
                .unwrap();
            let done = Completion {
                key: head[0].key.clone(),
                recrawl: false,
                value: head[0].value.clone(),
                record: UrlRecord::new(UrlState::Fetched(200), 1),
            };
            let outbox = [
                links(7, 3),
                links(2, 2),
                OutboxBatch {
                    partition: 9,
                    entries: vec![],
                },
            ];
            store
                .complete_with_outbox(&[done], &[], &outbox, &[])
                .unwrap();
            // One write: the page is done and its links wait.
            assert!(store.queued_urls().unwrap().is_empty());
            let pending = store.outbox_page(None, 10).unwrap();
            assert_eq!(pending.len(), 2, "an empty batch is not written");
            assert_eq!(pending[0].batch, outbox[0], "written order, entries intact");
            assert_eq!(pending[1].batch, outbox[1]);
            assert_eq!((pending[0].seq(), pending[1].seq()), (0, 1));
            // Acknowledged: gone.
            store.outbox_done(&[pending[0].key]).unwrap();
        }
        // What was not acknowledged survives a reopen, and numbering goes on.
        let store = open(dir.path());
        let pending = store.outbox_page(None, 10).unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].batch.partition, 2);
        store
            .complete_with_outbox(&[], &[], &[links(3, 1)], &[])
            .unwrap();
        let all = store.outbox_page(None, 10).unwrap();
        assert_eq!(all.iter().map(Pending::seq).collect::<Vec<_>>(), [1, 2]);
        let after = store.outbox_page(Some(&all[0].key), 10).unwrap();
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].batch.partition, 3);
    }

    #[test]
    fn two_writers_never_take_one_number() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(open(dir.path()));
        let start = std::sync::Arc::new(std::sync::Barrier::new(2));
        let writers: Vec<_> = (0..2u16)
            .map(|w| {
                let (store, start) = (store.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    for _ in 0..2000 {
                        store
                            .complete_with_outbox(&[], &[], &[links(w, 1), links(w, 2)], &[])
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        // Every batch of both writers is there, none written over.
        let all = store.outbox_page(None, 10_000).unwrap();
        assert_eq!(all.len(), 8000);
        for w in 0..2 {
            assert_eq!(all.iter().filter(|p| p.batch.partition == w).count(), 4000);
        }
    }
}
