//! The durable half of the due index (see [`crate::frontier::due`]): the
//! time from which a passivated host has something to do, written in the
//! same batch as the host's state when it passivates.
//!
//! `due`: host name → due time (Unix ms, u64 BE). A host with queued work
//! and no entry here is due at once.
//!
//! `due.tier`: the dormant hosts the index keeps out of memory
//! ([`DueTier`]), scratch emptied for every new index.

use std::collections::HashMap;
use std::sync::Arc;

use rocksdb::WriteBatch;

use super::schema::{CF_DUE, CF_DUE_TIER};
use super::{HostState, PartitionStore, StoreError};
use crate::frontier::due::{ColdEntry, ColdError, ColdTier, Marks};
use crate::frontier::importance::Rank;

impl PartitionStore {
    /// Every persisted due time.
    pub fn due_times(&self) -> Result<HashMap<String, u64>, StoreError> {
        let mut due = HashMap::new();
        for item in self.scan(self.cf(CF_DUE)) {
            let (key, value) = item.map_err(|e| self.rocks(e))?;
            let ms = <[u8; 8]>::try_from(value.as_ref())
                .map(u64::from_be_bytes)
                .map_err(|_| self.corrupt("due time"))?;
            let host = std::str::from_utf8(&key).map_err(|_| self.corrupt("due host"))?;
            due.insert(host.to_owned(), ms);
        }
        Ok(due)
    }

    /// Saves a passivating host's state and its due time (`None`: it has
    /// no work, or is due at once) in one write.
    pub fn passivate(
        &self,
        host: &str,
        state: &HostState,
        due_ms: Option<u64>,
    ) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        self.put_host_state(&mut batch, host, state)?;
        match due_ms {
            Some(ms) => batch.put_cf(self.cf(CF_DUE), host.as_bytes(), ms.to_be_bytes()),
            None => batch.delete_cf(self.cf(CF_DUE), host.as_bytes()),
        }
        self.write(batch)
    }
}

/// The key of `host` in the tier's order: `o` ‖ due ms (BE) ‖ rank (BE)
/// ‖ name, so that key order is (due time, rank, name).
fn order_key(host: &str, entry: ColdEntry) -> Vec<u8> {
    let mut key = Vec::with_capacity(11 + host.len());
    key.push(ORDER);
    key.extend_from_slice(&entry.due_ms.to_be_bytes());
    key.extend_from_slice(&entry.rank.to_bytes());
    key.extend_from_slice(host.as_bytes());
    key
}

/// The key of `host`'s entry by name: `h` ‖ name → due ms ‖ rank ‖
/// marks (the order key's value is the marks).
fn host_key(host: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(1 + host.len());
    key.push(BY_HOST);
    key.extend_from_slice(host.as_bytes());
    key
}

const ORDER: u8 = b'o';
const BY_HOST: u8 = b'h';

/// An order key's host and entry (`value`: its marks).
fn decode_order<'a>(key: &'a [u8], value: &[u8]) -> Option<(&'a str, ColdEntry)> {
    let rest = key.strip_prefix(&[ORDER])?;
    let due_ms = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let rank = Rank::from_bytes(rest.get(8..10)?.try_into().ok()?);
    let host = std::str::from_utf8(rest.get(10..)?).ok()?;
    let marks = Marks::from_byte(*value.first()?);
    Some((
        host,
        ColdEntry {
            due_ms,
            rank,
            marks,
        },
    ))
}

/// The dormant hosts a partition's due index keeps out of memory (see
/// [`crate::frontier::due`]): the `due.tier` family of its store, both
/// in due order (to read the next hosts back) and by name (to find one).
///
/// Scratch, not truth: written without the WAL (a crash loses what the
/// index rebuilds anyway) and emptied whenever an index is made over it
/// ([`DueTier::emptied`]: a partition's actor starting, after a store's
/// open or a failed actor's restart over the same store), before the
/// index is filled from the queue and the `due` family. It travels in
/// checkpoints like every family; the next owner empties it too.
pub struct DueTier {
    store: Arc<PartitionStore>,
}

impl DueTier {
    /// The tier in `store`, emptied of what an earlier index left.
    pub fn emptied(store: Arc<PartitionStore>) -> Result<Self, StoreError> {
        store.clear_due_tier()?;
        Ok(DueTier { store })
    }

    fn failed(&self, err: StoreError) -> ColdError {
        ColdError(err.to_string())
    }

    fn write(&self, batch: WriteBatch) -> Result<(), ColdError> {
        self.store.write_unlogged(batch).map_err(|e| self.failed(e))
    }
}

impl ColdTier for DueTier {
    fn get(&self, host: &str) -> Result<Option<ColdEntry>, ColdError> {
        let Some(value) = self
            .store
            .get(CF_DUE_TIER, &host_key(host))
            .map_err(|e| self.failed(e))?
        else {
            return Ok(None);
        };
        let entry = (value.len() == 11).then(|| ColdEntry {
            due_ms: u64::from_be_bytes(value[..8].try_into().expect("8 bytes")),
            rank: Rank::from_bytes([value[8], value[9]]),
            marks: Marks::from_byte(value[10]),
        });
        entry
            .map(Some)
            .ok_or_else(|| self.failed(self.store.corrupt("due tier entry")))
    }

    fn put_many(&mut self, hosts: &[(&str, ColdEntry)]) -> Result<(), ColdError> {
        let cf = self.store.cf(CF_DUE_TIER);
        let mut batch = WriteBatch::default();
        for (host, entry) in hosts {
            let marks = entry.marks.to_byte();
            let mut value = [0u8; 11];
            value[..8].copy_from_slice(&entry.due_ms.to_be_bytes());
            value[8..10].copy_from_slice(&entry.rank.to_bytes());
            value[10] = marks;
            batch.put_cf(cf, order_key(host, *entry), [marks]);
            batch.put_cf(cf, host_key(host), value);
        }
        self.write(batch)
    }

    fn delete(&mut self, hosts: &[(&str, ColdEntry)]) -> Result<(), ColdError> {
        let cf = self.store.cf(CF_DUE_TIER);
        let mut batch = WriteBatch::default();
        for (host, entry) in hosts {
            batch.delete_cf(cf, order_key(host, *entry));
            batch.delete_cf(cf, host_key(host));
        }
        self.write(batch)
    }

    fn first(&self, n: usize) -> Result<Vec<(String, ColdEntry)>, ColdError> {
        let mut out = Vec::with_capacity(n.min(4_096));
        self.walk(&mut |host, entry| {
            out.push((host.to_owned(), entry));
            out.len() < n
        })?;
        Ok(out)
    }

    fn each(&self, f: &mut dyn FnMut(&str, ColdEntry)) -> Result<(), ColdError> {
        self.walk(&mut |host, entry| {
            f(host, entry);
            true
        })
    }
}

impl DueTier {
    /// Calls `f` on the entries in order while it answers true.
    fn walk(&self, f: &mut dyn FnMut(&str, ColdEntry) -> bool) -> Result<(), ColdError> {
        let mut it = self.store.raw_scan(self.store.cf(CF_DUE_TIER));
        it.seek([ORDER]);
        while it.valid() {
            let (Some(key), Some(value)) = (it.key(), it.value()) else {
                break;
            };
            if key.first() != Some(&ORDER) {
                break;
            }
            let (host, entry) = decode_order(key, value)
                .ok_or_else(|| self.failed(self.store.corrupt("due tier key")))?;
            if !f(host, entry) {
                return Ok(());
            }
            it.next();
        }
        it.status().map_err(|e| self.failed(self.store.rocks(e)))
    }
}

impl PartitionStore {
    /// Empties the due index's tier (it holds no truth). An empty one is
    /// left alone: no write, so a store opened and closed again is
    /// unchanged for its next checkpoint.
    fn clear_due_tier(&self) -> Result<(), StoreError> {
        let cf = self.cf(CF_DUE_TIER);
        let mut it = self.raw_scan(cf);
        it.seek_to_first();
        let empty = !it.valid();
        it.status().map_err(|e| self.rocks(e))?;
        drop(it);
        if empty {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, [0u8].as_slice(), [0xffu8; 2].as_slice());
        self.write(batch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::importance::Cash;

    fn entry(due_ms: u64, cash: f32) -> ColdEntry {
        ColdEntry {
            due_ms,
            rank: Rank::of(Cash::new(cash)),
            marks: Marks::default(),
        }
    }

    #[test]
    fn the_tier_reads_back_in_due_then_rank_order_and_starts_empty_for_each_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(super::super::test_support::open(dir.path()));
        let mut tier = DueTier::emptied(store.clone()).unwrap();
        let refresh = Marks {
            refresh: true,
            owes_delay: false,
        };
        let late = ColdEntry {
            marks: refresh,
            ..entry(900, 1.0)
        };
        tier.put("late.test", entry(900, 1.0)).unwrap();
        tier.put("late.test", late).unwrap(); // its marks rewritten
        tier.put("poor.test", entry(100, 0.01)).unwrap();
        tier.put("rich.test", entry(100, 0.5)).unwrap();
        tier.put("early.test", entry(5, 0.001)).unwrap();
        assert_eq!(tier.get("rich.test").unwrap(), Some(entry(100, 0.5)));
        assert_eq!(tier.get("absent.test").unwrap(), None);
        let names = |v: Vec<(String, ColdEntry)>| v.into_iter().map(|(h, _)| h).collect::<Vec<_>>();
        assert_eq!(
            names(tier.first(3).unwrap()),
            ["early.test", "rich.test", "poor.test"]
        );
        tier.delete(&[
            ("rich.test", entry(100, 0.5)),
            ("early.test", entry(5, 0.001)),
        ])
        .unwrap();
        assert_eq!(tier.get("rich.test").unwrap(), None);
        let mut all = Vec::new();
        tier.each(&mut |h, e| all.push((h.to_owned(), e))).unwrap();
        assert_eq!(
            all,
            [
                ("poor.test".to_owned(), entry(100, 0.01)),
                ("late.test".to_owned(), late)
            ]
        );
        // A partition's actor restarted over the same store (or the store
        // reopened) starts its index over an empty tier.
        drop(tier);
        let tier = DueTier::emptied(store.clone()).unwrap();
        assert_eq!(
            tier.first(10).unwrap(),
            [],
            "scratch: emptied for a new index"
        );
        assert_eq!(tier.get("late.test").unwrap(), None);
        drop(tier);
        drop(Arc::into_inner(store).expect("the last handle"));
        let store = Arc::new(super::super::test_support::open(dir.path()));
        assert_eq!(DueTier::emptied(store).unwrap().first(10).unwrap(), []);
    }
}
