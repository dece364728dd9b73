//! A partition's checkpoint: a consistent copy of its RocksDB instance in a
//! directory of its own, the unit that goes into the partition's chain in
//! object storage (see `cluster/chain.rs`).
//!
//! RocksDB makes it cheaply: it flushes the memtables, hard-links the SST
//! and blob files (which it never rewrites) and writes a MANIFEST,
//! `CURRENT` and `OPTIONS` of the checkpoint's own. So the copy opens
//! without the live WAL, and its immutable files can be shared by every
//! later checkpoint that still holds them: only new ones are uploaded.

use std::path::{Path, PathBuf};

use rocksdb::checkpoint::Checkpoint;

use super::PartitionStore;

/// One file of a checkpoint directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFile {
    /// Its name in the directory (`000123.sst`, `MANIFEST-000005`).
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// An SST or blob file: RocksDB never rewrites one, and never reuses
    /// its number in one database, so an uploaded copy stays valid for as
    /// long as a checkpoint names it. The other files (MANIFEST, `CURRENT`,
    /// `OPTIONS`, WAL) belong to this checkpoint alone.
    pub immutable: bool,
}

impl CheckpointFile {
    /// Whether a RocksDB file of this name is immutable (see
    /// [`CheckpointFile::immutable`]).
    pub fn is_immutable(name: &str) -> bool {
        name.ends_with(".sst") || name.ends_with(".blob")
    }
}

/// Why a checkpoint could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// RocksDB refused (e.g. the directory exists already).
    #[error("checkpoint into {dir}: {source}")]
    Rocks {
        dir: PathBuf,
        source: rocksdb::Error,
    },
    /// The checkpoint directory could not be listed.
    #[error("listing checkpoint {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl PartitionStore {
    /// The store's last write sequence number: every write moves it, so a
    /// store whose number is what it was before a checkpoint holds nothing
    /// that checkpoint lacks.
    pub fn sequence(&self) -> u64 {
        self.db.latest_sequence_number()
    }

    /// Makes a checkpoint of the store in `dir` (which must not exist yet;
    /// on the store's filesystem, so that SSTs are hard links, not copies)
    /// and returns its files, sorted by name.
    ///
    /// Memtables are flushed first, so the checkpoint holds every write
    /// acknowledged before the call and needs no WAL replay to open.
    pub fn checkpoint(&self, dir: &Path) -> Result<Vec<CheckpointFile>, CheckpointError> {
        let rocks = |source| CheckpointError::Rocks {
            dir: dir.to_owned(),
            source,
        };
        Checkpoint::new(&self.db)
            .map_err(rocks)?
            .create_checkpoint(dir)
            .map_err(rocks)?;
        list_files(dir)
    }
}

/// The regular files of checkpoint `dir`, sorted by name.
fn list_files(dir: &Path) -> Result<Vec<CheckpointFile>, CheckpointError> {
    let io = |source| CheckpointError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut files = Vec::new();
    for item in std::fs::read_dir(dir).map_err(io)? {
        let item = item.map_err(io)?;
        let meta = item.metadata().map_err(io)?;
        if !meta.is_file() {
            continue;
        }
        // RocksDB's names are ASCII; a file that is not is none of its own.
        let Ok(name) = item.file_name().into_string() else {
            continue;
        };
        files.push(CheckpointFile {
            immutable: CheckpointFile::is_immutable(&name),
            name,
            size: meta.len(),
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::store::test_support::{open, pages};
    use crate::store::StoreEnv;

    /// Copies checkpoint `from` into partition 0 of a new data directory.
    fn as_partition_zero(from: &Path, data_dir: &Path) {
        let to = PartitionStore::dir(data_dir, 0);
        std::fs::create_dir_all(&to).unwrap();
        for item in std::fs::read_dir(from).unwrap() {
            let item = item.unwrap();
            std::fs::copy(item.path(), to.join(item.file_name())).unwrap();
        }
    }

    #[test]
    fn the_sequence_moves_with_every_write_and_not_with_a_checkpoint() {
        let live = tempfile::tempdir().unwrap();
        let store = open(live.path());
        store.admit(pages(0..10)).unwrap();
        let before = store.sequence();
        let scratch = tempfile::tempdir().unwrap();
        store.checkpoint(&scratch.path().join("cp")).unwrap();
        // A checkpoint (its flush) writes nothing: the next one may be
        // skipped while the number stays.
        assert_eq!(store.sequence(), before);
        store.admit(pages(10..11)).unwrap();
        assert!(store.sequence() > before);
    }

    #[test]
    fn a_checkpoint_opens_as_a_store_with_every_admitted_url() {
        let live = tempfile::tempdir().unwrap();
        let store = open(live.path());
        store.admit(pages(0..100)).unwrap();
        // Not flushed: the checkpoint must flush the memtables itself.
        let scratch = tempfile::tempdir().unwrap();
        let dir = scratch.path().join("cp");
        let files = store.checkpoint(&dir).unwrap();

        let names: Vec<_> = files.iter().map(|f| f.name.as_str()).collect();
        assert!(names.windows(2).all(|w| w[0] < w[1]), "sorted: {names:?}");
        assert!(names.contains(&"CURRENT"));
        assert!(names.iter().any(|n| n.starts_with("MANIFEST-")));
        assert!(files
            .iter()
            .any(|f| f.immutable && f.name.ends_with(".sst")));
        for f in &files {
            assert_eq!(f.immutable, f.name.ends_with(".sst"), "{}", f.name);
            assert_eq!(std::fs::metadata(dir.join(&f.name)).unwrap().len(), f.size);
        }

        // The live store is still held open: the copy stands on its own.
        let restored = tempfile::tempdir().unwrap();
        as_partition_zero(&dir, restored.path());
        let env = StoreEnv::new(&Config::defaults().storage);
        let copy = PartitionStore::open(&env, restored.path(), 0).unwrap();
        let mut urls = copy.queued_urls().unwrap();
        let mut expected: Vec<_> = pages(0..100).into_iter().map(|e| e.url).collect();
        urls.sort();
        expected.sort();
        assert_eq!(urls, expected);
        // Seen as well as queued: admitting them again admits nothing.
        assert!(copy.admit(pages(0..100)).unwrap().entries.is_empty());
    }

    #[test]
    fn a_checkpoint_refuses_an_existing_directory() {
        let live = tempfile::tempdir().unwrap();
        let store = open(live.path());
        let scratch = tempfile::tempdir().unwrap();
        assert!(matches!(
            store.checkpoint(scratch.path()),
            Err(CheckpointError::Rocks { .. })
        ));
    }
}
