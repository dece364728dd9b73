//! The durable half of the due index (see [`crate::frontier::due`]): the
//! time from which a passivated host has something to do, written in the
//! same batch as the host's state when it passivates.
//!
//! `due`: host name → due time (Unix ms, u64 BE). A host with queued work
//! and no entry here is due at once.

use std::collections::HashMap;

use rocksdb::WriteBatch;

use super::schema::CF_DUE;
use super::{HostState, PartitionStore, StoreError};

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
