//! A partition's durable queues: pages of one host's queue, the counts of
//! queued entries, and completions (which also save politeness schedules,
//! so a completion and the delay it imposes are one write, and schedule the
//! URL's next refresh, so a URL is never both finished and unscheduled).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::codec::{self, QueueValue, UrlRecord, UrlState};
use super::schema::{CF_META, CF_QUEUED, CF_RECRAWL, CF_SCHEDULES, CF_URLS, META_COUNTS};
use super::{PartitionStore, StoreError};
use crate::frontier::importance::{Cash, Rank};
use crate::frontier::{Priority, LEVELS};
use crate::politeness::Schedule;
use crate::url::Fingerprint;

/// One entry of a host's durable queue, or of its refresh schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// The queue (or `recrawl`) key; completing the entry deletes it.
    pub key: Vec<u8>,
    /// The decoded value.
    pub value: QueueValue,
    /// A refresh (its key is in `recrawl`), not a new URL.
    pub recrawl: bool,
    /// The URL's record when the entry was read (refreshes only: new URLs
    /// have no history worth a read).
    pub previous: Option<Arc<UrlRecord>>,
}

impl QueueEntry {
    /// The priority the entry was queued at.
    pub fn priority(&self) -> Priority {
        codec::queue_key_priority(&self.key).unwrap_or(Priority::LOW)
    }

    /// The rank the entry was queued at (none for refreshes, entries
    /// queued in admission order or before ranks).
    pub fn rank(&self) -> Option<Rank> {
        (!self.recrawl)
            .then(|| codec::queue_key_rank(&self.key))
            .flatten()
            .and_then(Rank::known)
    }

    /// The cash the entry was queued with, as its rank tells it
    /// ([`Cash::UNKNOWN`] without one).
    pub fn cash(&self) -> Cash {
        self.rank().map_or(Cash::UNKNOWN, Rank::cash)
    }
}

/// A queue entry finished, or tried and to be tried again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// Its key (in the queue, or in `recrawl` for a refresh).
    pub key: Vec<u8>,
    /// A refresh.
    pub recrawl: bool,
    /// What the entry holds.
    pub value: QueueValue,
    /// The URL's record from now on (see `frontier/lifecycle.rs`). With
    /// [`UrlState::RetryDue`] only the record (its tries) is written and
    /// the entry stays where it is; otherwise the entry is deleted and, if
    /// the record is due again, scheduled at that time.
    pub record: UrlRecord,
}

impl Completion {
    /// The URL's fingerprint.
    pub fn fp(&self) -> Fingerprint {
        self.value.fp
    }
}

impl PartitionStore {
    /// Records finished entries and removes them from their queues, with
    /// their hosts' politeness schedules (a later schedule of one host
    /// wins), in one atomic write.
    pub fn complete(
        &self,
        completions: &[Completion],
        schedules: &[(&str, &Schedule)],
    ) -> Result<(), StoreError> {
        self.complete_in(WriteBatch::default(), completions, schedules)
    }

    /// [`PartitionStore::complete`] with the writes added to `batch`.
    pub(super) fn complete_in(
        &self,
        mut batch: WriteBatch,
        completions: &[Completion],
        schedules: &[(&str, &Schedule)],
    ) -> Result<(), StoreError> {
        for (host, schedule) in schedules {
            let bytes = codec::encode_schedule(schedule).map_err(|e| self.codec(e))?;
            batch.put_cf(self.cf(CF_SCHEDULES), host.as_bytes(), bytes);
        }
        let mut done: HashMap<&str, i64> = HashMap::new();
        let mut due = DueChanges::default();
        for c in completions {
            let record = c.record.encode().map_err(|e| self.codec(e))?;
            batch.put_cf(self.cf(CF_URLS), c.fp().to_bytes(), record);
            if c.record.state == UrlState::RetryDue {
                continue;
            }
            let host = codec::queue_key_host(&c.key).ok_or_else(|| self.corrupt("queue key"))?;
            if c.recrawl {
                // A refresh made due again at admission meanwhile had its
                // key moved: only a key still there is counted out.
                if self.get(CF_RECRAWL, &c.key)?.is_some() {
                    due.removed.extend(codec::recrawl_key_due(&c.key));
                }
                batch.delete_cf(self.cf(CF_RECRAWL), &c.key);
            } else {
                batch.delete_cf(self.queue_cf(), &c.key);
                *done.entry(host).or_default() -= 1;
            }
            if let Some(due_ms) = c.record.next_due_ms {
                let key = codec::recrawl_key(host, due_ms, c.fp());
                batch.put_cf(
                    self.cf(CF_RECRAWL),
                    key,
                    c.value.encode().map_err(|e| self.codec(e))?,
                );
                due.added.push(due_ms);
            }
        }
        for (host, delta) in done {
            batch.merge_cf(self.cf(CF_QUEUED), host, delta.to_be_bytes());
        }
        self.write(batch)?;
        due.apply(&mut self.due_book());
        Ok(())
    }

    /// Up to `limit` entries of `host`'s queue at `priority` after key
    /// `after` (exclusive), in key order: richer rank first, then
    /// admission order.
    pub fn queue_page(
        &self,
        host: &str,
        priority: Priority,
        after: Option<&[u8]>,
        limit: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        self.queue_pages(host, &[(priority, after)], limit)
            .pop()
            .unwrap_or_else(|| Ok(Vec::new()))
    }

    /// [`PartitionStore::queue_page`] for several levels of one host at
    /// once, a page per `(priority, after)` read, in order.
    ///
    /// Why: one iterator seeks to each level in turn, where a read per
    /// level made an iterator each. Creating a RocksDB iterator (a
    /// reference to the current version, an iterator per memtable and
    /// file level, their arena) costs about twice a seek and its reads
    /// (`cargo bench --bench micro -- refill_levels`: 15.1 µs for four
    /// levels read apart, 7.4 µs together), and a host refills every
    /// empty level at once: a new host's first poll made four, three of
    /// them over empty levels (20 % of the CPU between a crawl's
    /// "listening" and its seeds offered, 500 hosts).
    pub fn queue_pages(
        &self,
        host: &str,
        reads: &[(Priority, Option<&[u8]>)],
        limit: usize,
    ) -> Vec<Result<Vec<QueueEntry>, StoreError>> {
        let mut iter = self.db.raw_iterator_cf(self.queue_cf());
        reads
            .iter()
            .map(|&(priority, after)| {
                let prefix = codec::queue_prefix(host, priority);
                iter.seek(after.unwrap_or(&prefix));
                let mut out = Vec::new();
                while out.len() < limit {
                    let (Some(key), Some(value)) = (iter.key(), iter.value()) else {
                        break;
                    };
                    if !key.starts_with(&prefix) {
                        break;
                    }
                    if Some(key) != after {
                        out.push(QueueEntry {
                            key: key.to_vec(),
                            value: self.queue.decode(value).map_err(|e| self.codec(e))?,
                            recrawl: false,
                            previous: None,
                        });
                    }
                    iter.next();
                }
                iter.status().map_err(|e| self.rocks(e))?;
                Ok(out)
            })
            .collect()
    }

    /// Every host with queued entries and how many it has. Used once at
    /// start to reactivate the hosts a previous run left with work.
    pub fn queued_by_host(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        if self.get(CF_META, META_COUNTS)?.is_none() {
            return self.count_queue();
        }
        let mut hosts = BTreeMap::new();
        for item in self.scan(self.cf(CF_QUEUED)) {
            let (key, value) = item.map_err(|e| self.rocks(e))?;
            let n = <[u8; 8]>::try_from(value.as_ref())
                .map(i64::from_be_bytes)
                .map_err(|_| self.corrupt("queued count"))?;
            if n > 0 {
                let host = std::str::from_utf8(&key).map_err(|_| self.corrupt("queued host"))?;
                hosts.insert(host.to_owned(), n as u64);
            }
        }
        Ok(hosts)
    }

    /// Counts the queue by scanning it, and stores the counts (a store made
    /// before counts were kept; once).
    fn count_queue(&self) -> Result<BTreeMap<String, u64>, StoreError> {
        let mut hosts = BTreeMap::new();
        for item in self.scan(self.queue_cf()) {
            let (key, _) = item.map_err(|e| self.rocks(e))?;
            let host = codec::queue_key_host(&key).ok_or_else(|| self.corrupt("queue key"))?;
            *hosts.entry(host.to_owned()).or_insert(0u64) += 1;
        }
        let mut batch = WriteBatch::default();
        for (host, n) in &hosts {
            batch.put_cf(
                self.cf(CF_QUEUED),
                host.as_bytes(),
                (*n as i64).to_be_bytes(),
            );
        }
        batch.put_cf(self.cf(CF_META), META_COUNTS, []);
        self.write(batch)?;
        Ok(hosts)
    }

    /// Queued entries of `host` (one read of its count).
    pub fn queued_of(&self, host: &str) -> Result<u64, StoreError> {
        match self.get(CF_QUEUED, host.as_bytes())? {
            None => Ok(0),
            Some(bytes) => <[u8; 8]>::try_from(bytes.as_slice())
                .map(|b| i64::from_be_bytes(b).max(0) as u64)
                .map_err(|_| self.corrupt("queued count")),
        }
    }

    /// Queued entries of `host` by priority level.
    pub fn queued_by_priority(&self, host: &str) -> Result<[u64; LEVELS], StoreError> {
        let prefix = codec::host_prefix(host);
        let mut counts = [0; LEVELS];
        let iter = self.db.iterator_cf(
            self.queue_cf(),
            IteratorMode::From(&prefix, Direction::Forward),
        );
        for item in iter {
            let (key, _) = item.map_err(|e| self.rocks(e))?;
            if !key.starts_with(&prefix) {
                break;
            }
            let level = codec::queue_key_priority(&key).ok_or_else(|| self.corrupt("queue key"))?;
            counts[level.level()] += 1;
        }
        Ok(counts)
    }

    /// Every queued URL (inspection and tests).
    pub fn queued_urls(&self) -> Result<Vec<String>, StoreError> {
        let mut urls = Vec::new();
        for item in self.db.iterator_cf(self.queue_cf(), IteratorMode::Start) {
            let (_, value) = item.map_err(|e| self.rocks(e))?;
            let value = self.queue.decode(&value).map_err(|e| self.codec(e))?;
            urls.push(value.url);
        }
        Ok(urls)
    }

    /// The completions of new URLs (queue entries) among `completions`.
    pub fn new_urls_done(completions: &[Completion]) -> u64 {
        completions
            .iter()
            .filter(|c| !c.recrawl && c.record.state != UrlState::RetryDue)
            .count() as u64
    }

    /// The family holding the queue (see `schema.rs`).
    pub(super) fn queue_cf(&self) -> &rocksdb::ColumnFamily {
        self.cf(self.queue.name())
    }
}

/// Refresh times a write adds and removes, applied to the [`super::recrawl::DueBook`]
/// once the write succeeded.
#[derive(Default)]
pub(super) struct DueChanges {
    pub(super) added: Vec<u64>,
    pub(super) removed: Vec<u64>,
}

impl DueChanges {
    pub(super) fn apply(self, book: &mut super::recrawl::DueBook) {
        for ms in self.added {
            book.add(ms);
        }
        for ms in self.removed {
            book.remove(ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::{entry, open, pages};

    fn finished(e: &QueueEntry, state: UrlState) -> Completion {
        Completion {
            key: e.key.clone(),
            recrawl: e.recrawl,
            value: e.value.clone(),
            record: UrlRecord::new(state, e.value.depth),
        }
    }

    #[test]
    fn queue_counts_are_kept_with_the_queue_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let expected = |a: u64, b: u64| {
            let mut m = BTreeMap::new();
            if a > 0 {
                m.insert("a.test".to_owned(), a);
            }
            if b > 0 {
                m.insert("b.test".to_owned(), b);
            }
            m
        };
        {
            let store = open(dir.path());
            // Admitted before counting started: counted once by a scan.
            store.admit(pages(0..3)).unwrap();
            assert_eq!(store.queued_by_host().unwrap(), expected(3, 0));
            // From then on, counts come from the counts family.
            store
                .admit(vec![entry("http://b.test/1", "b.test")])
                .unwrap();
            let head = store
                .queue_page("a.test", Priority::NORMAL, None, 2)
                .unwrap();
            let done: Vec<Completion> = head
                .iter()
                .map(|e| finished(e, UrlState::Fetched(200)))
                .collect();
            store.complete(&done, &[]).unwrap();
            assert_eq!(store.queued_by_host().unwrap(), expected(1, 1));
        }
        let store = open(dir.path());
        assert_eq!(store.queued_by_host().unwrap(), expected(1, 1));
        assert_eq!(store.queued_of("a.test").unwrap(), 1);
        assert_eq!(store.queued_of("nobody.test").unwrap(), 0);
        let last = store
            .queue_page("a.test", Priority::NORMAL, None, 1)
            .unwrap();
        let done = finished(&last[0], UrlState::Failed);
        store.complete(&[done], &[]).unwrap();
        assert_eq!(
            store.queued_by_host().unwrap(),
            expected(0, 1),
            "empty hosts are left out"
        );
    }

    #[test]
    fn one_read_of_several_levels_gives_each_level_its_own_page() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let at = |url: &str, host: &str, priority: Priority| {
            let mut e = entry(url, host);
            e.priority = priority;
            e
        };
        let mut batch: Vec<_> = (0..5)
            .map(|i| at(&format!("http://a.test/n{i}"), "a.test", Priority::NORMAL))
            .collect();
        batch.push(at("http://a.test/seed", "a.test", Priority::SEED));
        // Neighbours on both sides of the host's keys must not leak in.
        batch.push(at("http://a.tesu/x", "a.tesu", Priority::SEED));
        batch.push(at("http://a.tes/x", "a.tes", Priority::NORMAL));
        store.admit(batch).unwrap();
        let levels: Vec<Priority> = (0..LEVELS as u8).map(Priority::from_level).collect();
        let cursor = store
            .queue_page("a.test", Priority::NORMAL, None, 2)
            .unwrap()[1]
            .key
            .clone();
        for after in [None, Some(cursor.as_slice())] {
            for limit in [1, 3, 100] {
                let reads: Vec<_> = levels
                    .iter()
                    .map(|&p| (p, if p == Priority::NORMAL { after } else { None }))
                    .collect();
                let together = store.queue_pages("a.test", &reads, limit);
                assert_eq!(together.len(), reads.len());
                for ((priority, after), page) in reads.iter().zip(together) {
                    let page: Vec<String> =
                        page.unwrap().into_iter().map(|e| e.value.url).collect();
                    let alone: Vec<String> = store
                        .queue_page("a.test", *priority, *after, limit)
                        .unwrap()
                        .into_iter()
                        .map(|e| e.value.url)
                        .collect();
                    assert_eq!(page, alone, "{priority:?} after {after:?} limit {limit}");
                }
            }
        }
        // What the pages hold, read with both.
        let all = store.queue_pages(
            "a.test",
            &[(Priority::SEED, None), (Priority::NORMAL, Some(&cursor))],
            100,
        );
        let urls: Vec<Vec<String>> = all
            .into_iter()
            .map(|p| p.unwrap().into_iter().map(|e| e.value.url).collect())
            .collect();
        assert_eq!(urls[0], ["http://a.test/seed"]);
        assert_eq!(urls[1].len(), 3, "{urls:?}");
        assert!(!urls[1]
            .iter()
            .any(|u| u.contains("a.tes/") || u.contains("a.tesu")));
    }

    #[test]
    fn queue_pages_and_completion() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let batch: Vec<_> = (0..5)
            .map(|i| entry(&format!("http://a.test/{i}"), "a.test"))
            .chain([entry("http://a.test.b/x", "a.test.b")])
            .collect();
        store.admit(batch).unwrap();
        let mut seed = entry("http://a.test/seed", "a.test");
        seed.priority = Priority::SEED;
        store.admit(vec![seed]).unwrap();
        assert_eq!(store.queued_by_priority("a.test").unwrap(), [1, 0, 5, 0]);
        let n = Priority::NORMAL;
        let first = store.queue_page("a.test", n, None, 2).unwrap();
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].priority(), n);
        let rest = store
            .queue_page("a.test", n, Some(&first[1].key), 10)
            .unwrap();
        assert_eq!(
            rest.len(),
            3,
            "other hosts' and other priorities' keys are not in the range"
        );
        let done = finished(&first[0], UrlState::Fetched(200));
        let schedule = Schedule {
            next_allowed_ms: 7,
            ..Schedule::default()
        };
        store.complete(&[done], &[("a.test", &schedule)]).unwrap();
        assert_eq!(store.queue_page("a.test", n, None, 10).unwrap().len(), 4);
        assert_eq!(store.host_state("a.test").unwrap().schedule, Some(schedule));
        let rec = store.url_record(first[0].value.fp).unwrap().unwrap();
        assert_eq!(rec.state, UrlState::Fetched(200));
        // A completed URL stays seen.
        assert!(store
            .admit(vec![entry(&first[0].value.url, "a.test")])
            .unwrap()
            .entries
            .is_empty());
    }
}
