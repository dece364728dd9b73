//! Exact content dedup's index, spread over the partitions by digest.
//!
//! `digests`: SHA-256 of a payload (32 bytes) → the [`StoredCopy`] holding
//! it in full, for the digests whose partition this is
//! ([`crate::dedup::digest_partition`]). A digest is thus looked up at one
//! place in the whole crawl, whichever node fetched the page, and the
//! index moves with its partition on a handoff like everything else of
//! it. Entries are written by the partition actor alone, in the batches
//! that complete pages ([`PartitionStore::complete_with_outbox`]); the
//! first copy recorded for a digest stays (a later one is not written).

use rocksdb::WriteBatch;

use super::codec::{decode_value, encode_value};
use super::schema::CF_DIGESTS;
use super::{PartitionStore, StoreError, StoredCopy};

const WHAT: &str = "digest entry";

/// A payload digest and where the payload is stored in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestEntry {
    /// The payload's SHA-256.
    pub digest: [u8; 32],
    /// The record holding it.
    pub copy: StoredCopy,
}

impl PartitionStore {
    /// Where the payload of SHA-256 `digest` is stored in full, if this
    /// partition knows it. An unreadable entry is reported as absent (the
    /// payload is then stored in full again rather than pointed at a copy
    /// we cannot name), and logged.
    pub fn stored_copy(&self, digest: &[u8; 32]) -> Result<Option<StoredCopy>, StoreError> {
        let Some(bytes) = self.get(CF_DIGESTS, digest)? else {
            return Ok(None);
        };
        match decode_value(WHAT, &bytes) {
            Ok(copy) => Ok(Some(copy)),
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "unreadable digest entry ignored");
                Ok(None)
            }
        }
    }

    /// Adds `entries` to `batch` (the caller checked they are new).
    pub(super) fn stage_digests(
        &self,
        batch: &mut WriteBatch,
        entries: &[DigestEntry],
    ) -> Result<(), StoreError> {
        for e in entries {
            let value = encode_value(WHAT, &e.copy).map_err(|err| self.codec(err))?;
            batch.put_cf(self.cf(CF_DIGESTS), e.digest, value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::open;
    use super::*;

    fn copy(uri: &str) -> StoredCopy {
        StoredCopy {
            uri: uri.into(),
            date: "2026-11-30T00:00:00.000000Z".into(),
            record_id: format!("<urn:uuid:{uri}>"),
        }
    }

    #[test]
    fn a_recorded_copy_is_found_after_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let entry = DigestEntry {
            digest: [3; 32],
            copy: copy("http://a.test/"),
        };
        {
            let store = open(dir.path());
            assert_eq!(store.stored_copy(&entry.digest).unwrap(), None);
            store
                .complete_with_outbox(&[], &[], &[], std::slice::from_ref(&entry))
                .unwrap();
            assert_eq!(
                store.stored_copy(&entry.digest).unwrap(),
                Some(entry.copy.clone())
            );
        }
        let store = open(dir.path());
        assert_eq!(store.stored_copy(&entry.digest).unwrap(), Some(entry.copy));
        assert_eq!(store.stored_copy(&[4; 32]).unwrap(), None);
    }

    #[test]
    fn an_unreadable_entry_reads_as_absent() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        store
            .db
            .put_cf(store.cf(CF_DIGESTS), [5u8; 32], b"\xffgarbage")
            .unwrap();
        assert_eq!(store.stored_copy(&[5; 32]).unwrap(), None);
    }
}
