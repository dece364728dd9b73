//! What an operator sees of one host's queue (`GET
//! /api/v1/hosts/{host}/queue`, `trawl ctl queue`): its queued URLs in the
//! order its priority queues hold them, and its scheduled refreshes by due
//! time. Each new URL shows why it is where it is: its priority level
//! (the host takes turns between levels, 8:4:2:1), then its score (the
//! richest first within a level, `frontier/importance.rs`), then arrival.

use rocksdb::{Direction, IteratorMode};
use serde::Serialize;

use super::{codec, recrawl, PartitionStore, QueueValue, StoreError};

/// One queued URL.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct QueuedUrl {
    /// The URL.
    pub url: String,
    /// Its priority level (0 = seeds, 1 = high, 2 = links, 3 = low).
    pub priority: u8,
    /// Hops from its seed.
    pub depth: u32,
    /// Its estimated importance (OPIC cash) as its queue key ranks it; none
    /// under `[frontier] ordering = "fifo"`, for refreshes and for entries
    /// queued before scores existed.
    pub score: Option<f32>,
    /// `page`, `redirected` or `sitemap`.
    pub kind: &'static str,
    /// When it is due (Unix ms): for a refresh its scheduled time; `None`
    /// for a new URL, taken as soon as the host's politeness allows.
    pub due_ms: Option<u64>,
}

/// A host's queue as stored: up to `limit` of each kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostQueue {
    /// New URLs, by priority then arrival.
    pub queued: Vec<QueuedUrl>,
    /// Refreshes, by due time.
    pub refreshes: Vec<QueuedUrl>,
}

impl QueuedUrl {
    fn of(value: QueueValue, priority: u8, score: Option<f32>, due_ms: Option<u64>) -> Self {
        use crate::frontier::EntryKind;
        let kind = match value.kind {
            EntryKind::Page => "page",
            EntryKind::Redirected { .. } => "redirected",
            EntryKind::Sitemap { .. } => "sitemap",
        };
        QueuedUrl {
            url: value.url,
            priority,
            depth: value.depth,
            score,
            kind,
            due_ms,
        }
    }
}

impl PartitionStore {
    /// Up to `limit` queued URLs and `limit` refreshes of `host`.
    pub fn host_queue(&self, host: &str, limit: usize) -> Result<HostQueue, StoreError> {
        let prefix = codec::host_prefix(host);
        let mut queue = HostQueue::default();
        let iter = self.db.iterator_cf(
            self.queue_cf(),
            IteratorMode::From(&prefix, Direction::Forward),
        );
        for item in iter.take(limit) {
            let (key, value) = item.map_err(|e| self.rocks(e))?;
            if !key.starts_with(&prefix) {
                break;
            }
            let priority =
                codec::queue_key_priority(&key).ok_or_else(|| self.corrupt("queue key"))?;
            let value = self.queue.decode(&value).map_err(|e| self.codec(e))?;
            let level = priority.level() as u8;
            let score = codec::queue_key_rank(&key)
                .and_then(crate::frontier::importance::Rank::known)
                .map(|rank| rank.cash().get());
            queue.queued.push(QueuedUrl::of(value, level, score, None));
        }
        let Some(cf) = recrawl::family(self) else {
            return Ok(queue);
        };
        let iter = self
            .db
            .iterator_cf(cf, IteratorMode::From(&prefix, Direction::Forward));
        for item in iter.take(limit) {
            let (key, value) = item.map_err(|e| self.rocks(e))?;
            if !key.starts_with(&prefix) {
                break;
            }
            let due = codec::recrawl_key_due(&key).ok_or_else(|| self.corrupt("recrawl key"))?;
            let value = QueueValue::decode(&value).map_err(|e| self.codec(e))?;
            let level = crate::frontier::Priority::NORMAL.level() as u8;
            queue
                .refreshes
                .push(QueuedUrl::of(value, level, None, Some(due)));
        }
        Ok(queue)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{entry, open};
    use crate::frontier::Priority;

    #[test]
    fn a_hosts_queue_is_listed_by_priority_and_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let mut seed = entry("http://a.test/seed", "a.test");
        seed.priority = Priority::SEED;
        store
            .admit(vec![
                entry("http://a.test/link", "a.test"),
                seed,
                entry("http://ab.test/other", "ab.test"),
            ])
            .unwrap();
        let queue = store.host_queue("a.test", 10).unwrap();
        let urls: Vec<(&str, u8)> = queue
            .queued
            .iter()
            .map(|q| (q.url.as_str(), q.priority))
            .collect();
        assert_eq!(
            urls,
            [
                ("http://a.test/seed", 0),
                ("http://a.test/link", Priority::NORMAL.level() as u8)
            ]
        );
        assert!(queue.refreshes.is_empty());
        assert_eq!(store.host_queue("a.test", 1).unwrap().queued.len(), 1);
        assert_eq!(store.host_queue("b.test", 10).unwrap().queued.len(), 0);
    }

    #[test]
    fn within_a_level_the_listing_shows_the_richest_first_with_its_score() {
        use crate::frontier::importance::Cash;
        let dir = tempfile::tempdir().unwrap();
        let store = super::super::test_support::open_by_importance(dir.path());
        let with = |url: &str, cash: f32| {
            let mut e = entry(url, "a.test");
            e.cash = Cash::new(cash);
            e
        };
        store
            .admit(vec![
                with("http://a.test/poor", 0.001),
                with("http://a.test/rich", 0.5),
            ])
            .unwrap();
        let queue = store.host_queue("a.test", 10).unwrap();
        let listed: Vec<(&str, f32)> = queue
            .queued
            .iter()
            .map(|q| (q.url.as_str(), q.score.unwrap()))
            .collect();
        assert_eq!(listed[0].0, "http://a.test/rich");
        assert!((listed[0].1 / 0.5 - 1.0).abs() < 0.003, "{listed:?}");
        assert_eq!(listed[1].0, "http://a.test/poor");
        // In admission order, no score is shown: the key carries none.
        let dir = tempfile::tempdir().unwrap();
        let fifo = open(dir.path());
        fifo.admit(vec![with("http://a.test/rich", 0.5)]).unwrap();
        assert_eq!(fifo.host_queue("a.test", 10).unwrap().queued[0].score, None);
        assert!(store.host_queue("b.test", 10).unwrap().queued.is_empty());
    }
}
