//! An operator's blocks ([`crate::frontier::blocks`]) as the partition
//! keeps them: `meta` keys `block:h:<host>` and `block:d:<domain>`, and
//! the dropping of a blocked host's queue.

use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::codec;
use super::schema::{CF_META, CF_QUEUED, CF_URLS};
use super::{PartitionStore, Removal, StoreError, UrlRecord, UrlState};
use crate::frontier::blocks::{BlockList, BlockTarget};

const HOST: &[u8] = b"block:h:";
const DOMAIN: &[u8] = b"block:d:";

fn key(target: &BlockTarget) -> Vec<u8> {
    let (prefix, name) = match target {
        BlockTarget::Host(h) => (HOST, h),
        BlockTarget::Domain(d) => (DOMAIN, d),
    };
    [prefix, name.as_bytes()].concat()
}

/// A queued URL dropped because its host is blocked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedUrl {
    /// The URL.
    pub url: String,
    /// Hops from its seed.
    pub depth: u32,
}

impl PartitionStore {
    /// Records (`blocked`) or removes a block, synced.
    pub fn set_block(&self, target: &BlockTarget, blocked: bool) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        match blocked {
            true => batch.put_cf(self.cf(CF_META), key(target), []),
            false => batch.delete_cf(self.cf(CF_META), key(target)),
        }
        self.write(batch)?;
        self.sync()
    }

    /// The partition's blocks.
    pub fn blocks(&self) -> Result<BlockList, StoreError> {
        let mut targets = Vec::new();
        let iter = self.db.iterator_cf(
            self.cf(CF_META),
            IteratorMode::From(b"block:", Direction::Forward),
        );
        for item in iter {
            let (k, _) = item.map_err(|e| self.rocks(e))?;
            let name = |prefix: &[u8]| String::from_utf8_lossy(&k[prefix.len()..]).into_owned();
            if k.starts_with(HOST) {
                targets.push(BlockTarget::Host(name(HOST)));
            } else if k.starts_with(DOMAIN) {
                targets.push(BlockTarget::Domain(name(DOMAIN)));
            } else {
                break;
            }
        }
        Ok(BlockList::new(targets))
    }

    /// Drops every queued URL of `host`: out of the queue, its record
    /// removed (reason blocked) at `now_ms`, in one write. Returns them.
    pub fn drop_queued(&self, host: &str, now_ms: u64) -> Result<Vec<DroppedUrl>, StoreError> {
        let prefix = codec::host_prefix(host);
        let mut batch = WriteBatch::default();
        let mut dropped = Vec::new();
        let iter = self.db.iterator_cf(
            self.queue_cf(),
            IteratorMode::From(&prefix, Direction::Forward),
        );
        for item in iter {
            let (k, v) = item.map_err(|e| self.rocks(e))?;
            if !k.starts_with(&prefix) {
                break;
            }
            let value = self.queue.decode(&v).map_err(|e| self.codec(e))?;
            let fp = value.fp;
            let mut record = self
                .url_record(fp)?
                .unwrap_or_else(|| UrlRecord::new(UrlState::Queued, value.depth));
            record.state = UrlState::Gone(Removal::Blocked);
            record.removed_ms = Some(now_ms);
            record.next_due_ms = None;
            let bytes = record.encode().map_err(|e| self.codec(e))?;
            batch.put_cf(self.cf(CF_URLS), fp.to_bytes(), bytes);
            batch.delete_cf(self.queue_cf(), &k);
            dropped.push(DroppedUrl {
                url: value.url,
                depth: value.depth,
            });
        }
        if dropped.is_empty() {
            return Ok(dropped);
        }
        let delta = -(dropped.len() as i64);
        batch.merge_cf(self.cf(CF_QUEUED), host, delta.to_be_bytes());
        self.write(batch)?;
        Ok(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{entry, open};
    use super::*;

    #[test]
    fn blocks_are_kept_and_a_blocked_hosts_queue_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let a = BlockTarget::host("a.test").unwrap();
        let d = BlockTarget::domain("b.test").unwrap();
        {
            let store = open(dir.path());
            store
                .admit(vec![
                    entry("http://a.test/1", "a.test"),
                    entry("http://a.test/2", "a.test"),
                    entry("http://c.test/1", "c.test"),
                ])
                .unwrap();
            store.set_block(&a, true).unwrap();
            store.set_block(&d, true).unwrap();
            store.set_block(&d, false).unwrap();
            let dropped = store.drop_queued("a.test", 42).unwrap();
            let mut urls: Vec<&str> = dropped.iter().map(|d| d.url.as_str()).collect();
            urls.sort();
            assert_eq!(urls, ["http://a.test/1", "http://a.test/2"]);
        }
        let store = open(dir.path());
        assert_eq!(store.blocks().unwrap(), BlockList::new([a]));
        assert_eq!(store.queued_urls().unwrap(), ["http://c.test/1"]);
        assert_eq!(store.queued_by_host().unwrap().get("a.test"), None);
        let record = store
            .url_record(crate::url::Fingerprint::of("http://a.test/1"))
            .unwrap()
            .unwrap();
        assert_eq!(record.state, UrlState::Gone(Removal::Blocked));
        assert_eq!(record.removed_ms, Some(42));
        assert!(store.drop_queued("a.test", 43).unwrap().is_empty());
    }
}
