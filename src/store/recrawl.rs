//! The refresh schedule: fetched URLs by the time they are due again.
//!
//! `recrawl`: `host ‖ 0x00 ‖ due (u64 BE) ‖ fingerprint` → [`QueueValue`].
//! One host's entries are one key range in due order, so a host reads what
//! is due with one forward scan that stops at the first entry not yet due,
//! and the first key of its range is when it next has a refresh to do (the
//! partition's due index learns it from there, at open and when the host
//! passivates). A completion writes the URL's record and its next key in
//! the same batch that deletes the entry it finished (`queue.rs`).
//!
//! How many URLs are due when is kept in memory by minute ([`DueBook`]),
//! built from the keys at open: operators ask "due now, within the hour,
//! within the day" every second, and a scan of millions of keys per ask is
//! not an answer.

use std::collections::BTreeMap;
use std::sync::Arc;

use rocksdb::{Direction, IteratorMode};

use super::codec::{self, QueueValue, UrlRecord};
use super::queue::QueueEntry;
use super::schema::{CF_RECRAWL, CF_URLS};
use super::{PartitionStore, StoreError};

/// Width of a [`DueBook`] bucket.
const BUCKET_MS: u64 = 60_000;

/// Refreshes by due minute. A URL counts as due only once the minute it is
/// due in has ended, so "due now" may lag by up to a minute but never
/// counts a URL early.
#[derive(Debug, Default)]
pub struct DueBook {
    /// Bucket end (Unix ms, exclusive) → URLs due in that minute.
    buckets: BTreeMap<u64, u64>,
    /// The sum of `buckets`, kept as they change: every partition snapshot
    /// (the node's idle poll, 20 a second) asks for it, and a schedule
    /// spread over weeks is tens of thousands of minutes to add up.
    total: u64,
}

impl DueBook {
    fn bucket(due_ms: u64) -> u64 {
        (due_ms / BUCKET_MS)
            .saturating_add(1)
            .saturating_mul(BUCKET_MS)
    }

    /// One more URL due at `due_ms`.
    pub fn add(&mut self, due_ms: u64) {
        *self.buckets.entry(Self::bucket(due_ms)).or_default() += 1;
        self.total += 1;
    }

    /// One URL less due at `due_ms`.
    pub fn remove(&mut self, due_ms: u64) {
        let bucket = Self::bucket(due_ms);
        if let Some(n) = self.buckets.get_mut(&bucket) {
            *n -= 1;
            self.total -= 1;
            if *n == 0 {
                self.buckets.remove(&bucket);
            }
        }
    }

    /// URLs due by `at_ms` (their minute ended by then).
    pub fn due_by(&self, at_ms: u64) -> u64 {
        self.buckets.range(..=at_ms).map(|(_, n)| n).sum()
    }

    /// All scheduled refreshes.
    pub fn total(&self) -> u64 {
        self.total
    }
}

/// The `recrawl` family, absent only from a store of an earlier release
/// opened read-only.
pub(super) fn family(store: &PartitionStore) -> Option<&rocksdb::ColumnFamily> {
    store.db.cf_handle(CF_RECRAWL)
}

/// Scheduled refreshes of a partition by when they are due.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct DueCounts {
    /// Due now.
    pub now: u64,
    /// Due within the next hour (now included).
    pub within_hour: u64,
    /// Due within the next day (now included).
    pub within_day: u64,
    /// Scheduled at all.
    pub scheduled: u64,
}

impl std::ops::AddAssign for DueCounts {
    fn add_assign(&mut self, o: Self) {
        self.now += o.now;
        self.within_hour += o.within_hour;
        self.within_day += o.within_day;
        self.scheduled += o.scheduled;
    }
}

impl PartitionStore {
    /// Up to `n` refreshes of `host` due by `due_by_ms`, after key `after`,
    /// in due order, each with the record of its URL (the last visit, for
    /// conditional headers and change detection).
    pub fn recrawl_page(
        &self,
        host: &str,
        due_by_ms: u64,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        let prefix = codec::host_prefix(host);
        let start = after.unwrap_or(&prefix);
        let Some(cf) = family(self) else {
            return Ok(Vec::new());
        };
        let iter = self
            .db
            .iterator_cf(cf, IteratorMode::From(start, Direction::Forward));
        let mut page = Vec::new();
        for item in iter {
            let (key, value) = item.map_err(|e| self.rocks(e))?;
            if !key.starts_with(&prefix) || page.len() >= n {
                break;
            }
            if Some(&key[..]) == after {
                continue;
            }
            let due = codec::recrawl_key_due(&key).ok_or_else(|| self.corrupt("recrawl key"))?;
            if due > due_by_ms {
                break;
            }
            let value = QueueValue::decode(&value).map_err(|e| self.codec(e))?;
            page.push((key.into_vec(), value));
        }
        let keys: Vec<[u8; 16]> = page.iter().map(|(_, v)| v.fp.to_bytes()).collect();
        let records = self.db.batched_multi_get_cf(self.cf(CF_URLS), &keys, false);
        page.into_iter()
            .zip(records)
            .map(|((key, value), record)| {
                let record = record.map_err(|e| self.rocks(e))?;
                let previous = match record {
                    Some(bytes) => Some(Arc::new(
                        UrlRecord::decode(&bytes).map_err(|e| self.codec(e))?,
                    )),
                    None => None,
                };
                Ok(QueueEntry {
                    key,
                    value,
                    recrawl: true,
                    previous,
                })
            })
            .collect()
    }

    /// When `host`'s next refresh after key `after` is due (Unix ms).
    pub fn next_recrawl_ms(
        &self,
        host: &str,
        after: Option<&[u8]>,
    ) -> Result<Option<u64>, StoreError> {
        let prefix = codec::host_prefix(host);
        let start = after.unwrap_or(&prefix);
        let Some(cf) = family(self) else {
            return Ok(None);
        };
        let iter = self
            .db
            .iterator_cf(cf, IteratorMode::From(start, Direction::Forward));
        for item in iter {
            let (key, _) = item.map_err(|e| self.rocks(e))?;
            if !key.starts_with(&prefix) {
                break;
            }
            if Some(&key[..]) == after {
                continue;
            }
            return codec::recrawl_key_due(&key)
                .map(Some)
                .ok_or_else(|| self.corrupt("recrawl key"));
        }
        Ok(None)
    }

    /// Every host with scheduled refreshes and when its first is due: one
    /// seek per host, not a read of every key.
    pub fn recrawl_hosts(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        let mut hosts = BTreeMap::new();
        let Some(cf) = family(self) else {
            return Ok(hosts);
        };
        let mut iter = self.raw_scan(cf);
        iter.seek_to_first();
        while iter.valid() {
            let key = iter.key().unwrap_or_default();
            let host = codec::queue_key_host(key).ok_or_else(|| self.corrupt("recrawl key"))?;
            let due = codec::recrawl_key_due(key).ok_or_else(|| self.corrupt("recrawl key"))?;
            // Past every key of this host: its prefix with 0x01 for 0x00.
            let mut next = host.as_bytes().to_vec();
            next.push(1);
            hosts.insert(host.to_owned(), due);
            iter.seek(&next);
        }
        iter.status().map_err(|e| self.rocks(e))?;
        Ok(hosts)
    }

    /// Counts the scheduled refreshes into the [`DueBook`] (at open).
    pub(super) fn load_due_book(&self) -> Result<(), StoreError> {
        let mut book = DueBook::default();
        let mut iter = self.raw_scan(self.cf(CF_RECRAWL));
        iter.seek_to_first();
        while iter.valid() {
            let key = iter.key().unwrap_or_default();
            book.add(codec::recrawl_key_due(key).ok_or_else(|| self.corrupt("recrawl key"))?);
            iter.next();
        }
        iter.status().map_err(|e| self.rocks(e))?;
        *self.due_book() = book;
        Ok(())
    }

    /// Scheduled refreshes due by `now_ms`, within the hour and the day.
    pub fn due_counts(&self, now_ms: u64) -> DueCounts {
        let book = self.due_book();
        DueCounts {
            now: book.due_by(now_ms),
            within_hour: book.due_by(now_ms.saturating_add(3_600_000)),
            within_day: book.due_by(now_ms.saturating_add(86_400_000)),
            scheduled: book.total(),
        }
    }

    pub(super) fn due_book(&self) -> std::sync::MutexGuard<'_, DueBook> {
        // A poisoned book only means a panic while counting: counts are
        // informative, never a reason to stop the crawl.
        self.due_book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::Priority;
    use crate::store::test_support::{entry, open};
    use crate::store::{Completion, Removal, UrlState, Visit};

    /// Admits `url` and completes it fetched at `at_ms`, due at `due_ms`.
    fn fetched(store: &PartitionStore, url: &str, at_ms: u64, due_ms: u64) {
        store.admit(vec![entry(url, "a.test")]).unwrap();
        let head = store
            .queue_page("a.test", Priority::NORMAL, None, 100)
            .unwrap();
        let e = head.iter().find(|e| e.value.url == url).unwrap();
        let mut record = UrlRecord::new(UrlState::Fetched(200), 1);
        record.last = Some(Visit {
            at_ms,
            status: 200,
            ..Visit::default()
        });
        record.next_due_ms = Some(due_ms);
        let done = Completion {
            key: e.key.clone(),
            recrawl: false,
            value: e.value.clone(),
            record,
        };
        store.complete(&[done], &[]).unwrap();
    }

    /// Completes the due refresh `due` as removed (gone) at `at_ms`.
    fn removed(store: &PartitionStore, due: &crate::store::QueueEntry, at_ms: u64) {
        let mut gone = (*due.previous.clone().unwrap()).clone();
        gone.state = UrlState::Gone(Removal::Gone);
        gone.removed_ms = Some(at_ms);
        gone.next_due_ms = None;
        let done = Completion {
            key: due.key.clone(),
            recrawl: true,
            value: due.value.clone(),
            record: gone,
        };
        store.complete(&[done], &[]).unwrap();
    }

    #[test]
    fn a_newer_sitemap_entry_makes_a_url_due_and_a_new_seed_brings_back_a_removed_one() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        fetched(&store, "http://a.test/1", 1_000, 9_000_000);
        assert_eq!(
            store.next_recrawl_ms("a.test", None).unwrap(),
            Some(9_000_000)
        );
        let offer = |lastmod_ms: Option<u64>, priority: Priority| {
            let mut e = entry("http://a.test/1", "a.test");
            e.lastmod_ms = lastmod_ms;
            e.priority = priority;
            e
        };
        // A link, or an older lastmod: nothing.
        let none = store
            .admit_at(vec![offer(None, Priority::NORMAL)], 5_000)
            .unwrap();
        assert!(none.refreshed.is_empty() && none.entries.is_empty());
        let old = store
            .admit_at(vec![offer(Some(900), Priority::LOW)], 5_000)
            .unwrap();
        assert!(old.refreshed.is_empty());
        // Newer than the fetch: due at once, its key moved.
        let newer = store
            .admit_at(vec![offer(Some(2_000), Priority::LOW)], 5_000)
            .unwrap();
        assert_eq!(newer.refreshed.len(), 1);
        assert!(newer.entries.is_empty(), "not queued as a new url");
        let due = store.recrawl_page("a.test", 5_000, None, 10).unwrap();
        assert_eq!(due.len(), 1);
        assert_eq!(due[0].previous.as_ref().unwrap().next_due_ms, Some(5_000));
        assert_eq!(
            store.due_counts(u64::MAX - 1).scheduled,
            1,
            "moved, not added"
        );

        // Removed: links and old sitemap entries do not bring it back.
        removed(&store, &due[0], 6_000);
        assert_eq!(store.due_counts(u64::MAX - 1).scheduled, 0);
        let link = store
            .admit_at(vec![offer(None, Priority::NORMAL)], 7_000)
            .unwrap();
        assert!(link.refreshed.is_empty());
        let stale = store
            .admit_at(vec![offer(Some(5_500), Priority::LOW)], 7_000)
            .unwrap();
        assert!(stale.refreshed.is_empty());
        let seed = store
            .admit_at(vec![offer(None, Priority::SEED)], 7_000)
            .unwrap();
        assert_eq!(seed.refreshed.len(), 1, "a new seed re-admits it");
        let fp = crate::url::Fingerprint::of("http://a.test/1");
        let back = store.url_record(fp).unwrap();
        assert_eq!(back.map(|r| r.state), Some(UrlState::Fetched(200)));
        assert_eq!(store.recrawl_hosts().unwrap()["a.test"], 7_000);

        // Removed again: the same seed offered again (a restart with the
        // same seed list) leaves it out, a reseed brings it back.
        let due = store.recrawl_page("a.test", 7_000, None, 10).unwrap();
        removed(&store, &due[0], 8_000);
        let again = store
            .admit_at(vec![offer(None, Priority::SEED)], 9_000)
            .unwrap();
        assert!(again.refreshed.is_empty(), "a seed given before");
        assert!(matches!(
            store.url_record(fp).unwrap().map(|r| r.state),
            Some(UrlState::Gone(_))
        ));
        let reseed = store
            .admit_at(vec![offer(Some(9_000), Priority::SEED)], 9_000)
            .unwrap();
        assert_eq!(reseed.refreshed.len(), 1, "the operator asked");
    }

    #[test]
    fn a_url_admitted_as_a_seed_is_not_new_when_seeded_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let seed = || {
            let mut e = entry("http://a.test/", "a.test");
            e.priority = Priority::SEED;
            e
        };
        assert_eq!(
            store.admit_at(vec![seed()], 1_000).unwrap().entries.len(),
            1
        );
        let head = store
            .queue_page("a.test", Priority::SEED, None, 10)
            .unwrap();
        let mut record = UrlRecord::new(UrlState::Gone(Removal::Gone), 0);
        record.removed_ms = Some(2_000);
        let done = Completion {
            key: head[0].key.clone(),
            recrawl: false,
            value: head[0].value.clone(),
            record,
        };
        store.complete(&[done], &[]).unwrap();
        // Reopened, as on the next start with the same seed list.
        drop(store);
        let store = open(dir.path());
        let again = store.admit_at(vec![seed()], 3_000).unwrap();
        assert!(again.refreshed.is_empty() && again.entries.is_empty());
    }

    #[test]
    fn the_book_counts_a_url_once_its_minute_is_over() {
        let mut book = DueBook::default();
        book.add(0);
        book.add(59_999);
        book.add(60_000);
        book.add(3_600_000);
        assert_eq!(book.due_by(59_999), 0, "never early");
        assert_eq!(book.due_by(60_000), 2);
        assert_eq!(book.due_by(120_000), 3);
        assert_eq!(book.total(), 4);
        book.remove(59_999);
        book.remove(7); // the same minute: one less there
        assert_eq!(book.due_by(60_000), 0);
        book.remove(999_999_999); // unknown: nothing happens
        assert_eq!(book.total(), 2);
        assert_eq!(book.total(), book.buckets.values().sum::<u64>());
    }
}
