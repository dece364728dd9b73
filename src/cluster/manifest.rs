//! A partition's checkpoint manifest: one link of its chain in object
//! storage (`[cluster] state_url`).
//!
//! Each partition's durable copy is a chain of manifests numbered 1, 2, 3,
//! ... under `partitions/NNN/manifests/`, each created create-only
//! (`PutMode::Create`: S3 `If-None-Match: *`, an atomic create on the other
//! stores). A manifest names the immutable files of one RocksDB checkpoint
//! of the partition and says whose it is: the owner's node id, its epoch
//! (the number of the manifest with which that owner claimed the
//! partition) and an incarnation (a random id of the owner's process, so a
//! node that restarts is a new owner).
//!
//! Why a chain of create-only objects: the next number goes to exactly one
//! writer, whatever clocks or gossip say, so the chain *is* the ownership
//! record; an owner whose create of the next number fails has been
//! replaced (fenced). See [`super::lease`] for the protocol that runs on
//! it, and [`super::chain`] for the object-store side.

use serde::{Deserialize, Serialize};

/// The version of the manifest layout written by this build.
pub const MANIFEST_VERSION: u32 = 1;

/// Who owns (owned) a partition: a node's process, in an epoch.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Owner {
    /// The node id (`[cluster] node_id`).
    pub node: String,
    /// A random id of the node's process: a restarted node is a new owner
    /// and must claim anew (its in-memory lease is gone).
    pub incarnation: u64,
    /// The number of the manifest with which this owner claimed the
    /// partition; unique by construction (the chain's numbers are created
    /// once each), so two owners never publish under one epoch.
    pub epoch: u64,
}

/// One file of a checkpoint, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// Its name in the RocksDB directory (`000123.sst`, `MANIFEST-000005`,
    /// `CURRENT`, `OPTIONS-000007`).
    pub name: String,
    /// Its object's key, relative to the partition's prefix. Immutable
    /// files (SST, blob) are uploaded once, under their epoch, and later
    /// manifests name the same object; the small mutable files go under
    /// the manifest's own number.
    pub key: String,
    /// Its size in bytes (checked after a download).
    pub size: u64,
}

/// What a manifest records beyond the files: the protocol's durable state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version ([`MANIFEST_VERSION`]).
    pub version: u32,
    /// The partition.
    pub partition: u16,
    /// Its number in the chain (1 for the first).
    pub number: u64,
    /// The owner that created it.
    pub owner: Owner,
    /// The owner handed the partition back with it: its hosts drained (no
    /// request in flight) and nothing after this checkpoint was written.
    pub released: bool,
    /// How long, from the moment this manifest was *sent*, a next owner
    /// must still hold every host of the partition before its first
    /// request (milliseconds): the rest of a hold the owner was itself
    /// serving, or the longest delay its hosts still owed. A next owner
    /// holds at least this long from when its claim is acknowledged (a
    /// later moment), whatever clocks say. Not used for an unreleased
    /// manifest, whose next owner holds `lease + fetch.timeout`.
    pub hold_ms: u64,
    /// The owner's admission watermark the checkpoint covers: every link,
    /// completion and record the owner wrote up to this sequence number is
    /// in it (the receiver of a link batch acknowledges it once a
    /// published manifest covers its admission).
    pub covers: u64,
    /// The checkpoint's files (empty for a partition never written).
    pub files: Vec<FileRef>,
}

impl Manifest {
    /// The object key of manifest `number`, relative to the partition's
    /// prefix: zero-padded, so names sort as numbers.
    pub fn key(number: u64) -> String {
        format!("manifests/{number:020}.json")
    }

    /// The number a manifest key names, if it names one.
    pub fn number_of(key: &str) -> Option<u64> {
        let name = key.rsplit('/').next()?;
        let digits = name.strip_suffix(".json")?;
        (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
    }

    /// Encodes the manifest (JSON: small, and an operator can read it).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).expect("a manifest serialises")
    }

    /// Decodes a manifest; refuses one of a newer layout.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(ManifestError::Json)?;
        if m.version > MANIFEST_VERSION {
            return Err(ManifestError::Version(m.version));
        }
        Ok(m)
    }
}

/// A manifest that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Not a manifest.
    #[error("manifest does not parse: {0}")]
    Json(serde_json::Error),
    /// Written by a newer trawl.
    #[error("manifest version {0} is newer than this build reads ({MANIFEST_VERSION})")]
    Version(u32),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            partition: 7,
            number: 42,
            owner: Owner {
                node: "n1".into(),
                incarnation: 9,
                epoch: 40,
            },
            released: false,
            hold_ms: 0,
            covers: 1234,
            files: vec![FileRef {
                name: "000012.sst".into(),
                key: "files/00000000000000000040/000012.sst".into(),
                size: 4096,
            }],
        }
    }

    #[test]
    fn a_manifest_round_trips_and_its_key_names_its_number() {
        let m = sample();
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
        let key = Manifest::key(m.number);
        assert_eq!(key, "manifests/00000000000000000042.json");
        assert_eq!(Manifest::number_of(&key), Some(42));
        assert_eq!(Manifest::number_of("manifests/42.json"), None);
        assert_eq!(Manifest::number_of("files/x.sst"), None);
        // Keys sort as their numbers do.
        assert!(Manifest::key(9) < Manifest::key(10));
    }

    #[test]
    fn a_manifest_of_a_newer_layout_is_refused() {
        let mut m = sample();
        m.version = MANIFEST_VERSION + 1;
        let bytes = serde_json::to_vec(&m).unwrap();
        assert!(matches!(
            Manifest::decode(&bytes),
            Err(ManifestError::Version(_))
        ));
        assert!(matches!(
            Manifest::decode(b"{}"),
            Err(ManifestError::Json(_))
        ));
    }
}
