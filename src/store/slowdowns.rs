//! Operators' slow-downs ([`crate::politeness::slowdown`]) as the
//! partition keeps them: `meta` keys `slow:<host>` (a handful of keys,
//! read once at open).

use std::collections::HashMap;

use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::codec;
use super::schema::CF_META;
use super::{PartitionStore, StoreError};
use crate::politeness::slowdown::Slowdown;

const PREFIX: &[u8] = b"slow:";
const WHAT: &str = "slow-down";

impl PartitionStore {
    /// Records (`Some`) or lifts (`None`) the slow-down of `host`, synced.
    pub fn set_slowdown(&self, host: &str, slowdown: Option<&Slowdown>) -> Result<(), StoreError> {
        let key = [PREFIX, host.as_bytes()].concat();
        let mut batch = WriteBatch::default();
        match slowdown {
            Some(s) => {
                let value = codec::encode_value(WHAT, s).map_err(|e| self.codec(e))?;
                batch.put_cf(self.cf(CF_META), key, value)
            }
            None => batch.delete_cf(self.cf(CF_META), key),
        }
        self.write(batch)?;
        self.sync()
    }

    /// The partition's slow-downs, by host.
    pub fn slowdowns(&self) -> Result<HashMap<String, Slowdown>, StoreError> {
        let mut slowdowns = HashMap::new();
        let iter = self.db.iterator_cf(
            self.cf(CF_META),
            IteratorMode::From(PREFIX, Direction::Forward),
        );
        for item in iter {
            let (k, v) = item.map_err(|e| self.rocks(e))?;
            if !k.starts_with(PREFIX) {
                break;
            }
            let host = String::from_utf8_lossy(&k[PREFIX.len()..]).into_owned();
            let slowdown = codec::decode_value(WHAT, &v).map_err(|e| self.codec(e))?;
            slowdowns.insert(host, slowdown);
        }
        Ok(slowdowns)
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::open;
    use super::*;

    #[test]
    fn slowdowns_are_kept_and_lifted() {
        let dir = tempfile::tempdir().unwrap();
        let slow = Slowdown {
            min_delay_ms: Some(5_000),
            max_in_flight: Some(1),
        };
        {
            let store = open(dir.path());
            store.set_slowdown("a.test", Some(&slow)).unwrap();
            store.set_slowdown("b.test", Some(&slow)).unwrap();
            store.set_slowdown("b.test", None).unwrap();
        }
        let store = open(dir.path());
        let all = store.slowdowns().unwrap();
        assert_eq!(all.len(), 1);
        assert_eq!(all.get("a.test"), Some(&slow));
        // Blocks share the meta family and are not read as slow-downs.
        let block = crate::frontier::blocks::BlockTarget::host("c.test").unwrap();
        store.set_block(&block, true).unwrap();
        assert_eq!(store.slowdowns().unwrap().len(), 1);
    }
}
