//! The object-store side of a partition's checkpoint chain (see
//! [`super::manifest`] for what a link says, [`super::lease`] for the
//! protocol on it).
//!
//! Layout under the state prefix `P` (`[cluster] state_url`), per
//! partition `NNN`:
//!
//! ```text
//! P/partitions/NNN/manifests/{number:020}.json        the chain
//! P/partitions/NNN/files/{epoch:020}/{name}            SST and blob files
//! P/partitions/NNN/files/{epoch:020}/{number:020}/{name}  the others
//! ```
//!
//! A [`FileRef`]'s key is relative to `P/partitions/NNN/`.
//!
//! Why the epoch in a file's key: a store restored from a checkpoint goes
//! on numbering files from where the checkpoint left off, so an old owner
//! (fenced, but not yet aware of it) and the new one can each write a
//! `000123.sst` with different contents. Under different epochs their keys
//! never meet, and within one epoch only one process writes. An immutable
//! file is uploaded once, by the owner that wrote it, and later manifests
//! (of any epoch) name the same object; the small per-checkpoint files go
//! under the manifest's number, since a MANIFEST or `CURRENT` of one
//! checkpoint is not the next one's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::TryStreamExt;
use object_store::path::Path as Key;
use object_store::{
    ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutMode, PutOptions, PutPayload,
};
use tokio::io::AsyncWriteExt;

use super::manifest::{FileRef, Manifest, ManifestError};
use crate::store::CheckpointFile;
use crate::upload::{Target, TargetError};

/// How many of the newest manifests a collection leaves in a chain (the
/// newest names every file a restore reads; the few before it are kept
/// for an operator's look, not for restores).
pub const KEEP_MANIFESTS: u64 = 4;

/// Retries of one request to the state store. Few: a renewal that waits
/// minutes on a store's retries outlives its lease, and the lease
/// protocol tries again on its own.
const STATE_RETRIES: usize = 2;

/// Why a chain operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The manifest's number exists already: another owner created it
    /// first, and the caller is fenced.
    #[error("manifest {number} of partition {partition} is taken")]
    Taken { partition: u16, number: u64 },
    /// The object store failed (after its own retries).
    #[error("state store at {key}: {source}")]
    Store {
        key: String,
        source: object_store::Error,
    },
    /// A manifest does not decode.
    #[error("{key}: {source}")]
    Manifest { key: String, source: ManifestError },
    /// A manifest is not what its key says, or names a file that could
    /// escape the restore directory: the state prefix holds something
    /// other than this chain.
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: &'static str },
    /// A local file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A downloaded object is not the size its manifest gives.
    #[error("{key} is {got} bytes, its manifest says {expected}")]
    Size {
        key: String,
        expected: u64,
        got: u64,
    },
    /// A restore's target directory holds files already.
    #[error("restoring into {path}: the directory is not empty")]
    NotEmpty { path: PathBuf },
    /// The store does not refuse a second create of one key, so
    /// manifests cannot fence owners: two nodes could both publish a
    /// partition's next manifest, and both crawl its hosts.
    #[error("the state store at {key} {what}: it does not honour create-only puts (S3 If-None-Match: *), so it cannot fence partition owners; use a store that does (for S3, one with conditional writes; object_store's aws_conditional_put option for S3-compatible ones)")]
    NoFence { key: String, what: &'static str },
}

/// What a [`StateStore::restore`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RestoreStats {
    /// Bytes downloaded.
    pub downloaded: u64,
    /// Bytes of immutable files found in the reuse directory instead.
    pub reused: u64,
}

/// The partitions' checkpoint chains in one object store.
#[derive(Debug, Clone)]
pub struct StateStore {
    /// The store of `[cluster] state_url`.
    store: Arc<dyn ObjectStore>,
    /// The URL's path: every key is under it.
    prefix: Key,
}

impl StateStore {
    /// The chains under `[cluster] state_url` with `state_options`, built
    /// as `[upload]` builds its store (environment variables read, unknown
    /// options refused; no request is made).
    pub fn open(url: &str, options: &BTreeMap<String, String>) -> Result<Self, TargetError> {
        let keys = ("cluster.state_url", "cluster.state_options");
        let target = Target::open_keyed(url, options, STATE_RETRIES, keys)?;
        // The target has checked the URL; its path is the prefix.
        let bad_url = |message: String| TargetError::Url {
            key: keys.0,
            url: url.to_owned(),
            message,
        };
        let parsed = url::Url::parse(url).map_err(|e| bad_url(e.to_string()))?;
        let (_, prefix) = ObjectStoreScheme::parse(&parsed).map_err(|e| bad_url(e.to_string()))?;
        Ok(StateStore::new(target.store().clone(), prefix))
    }

    /// The chains under `prefix` of `store` (tests use an in-memory one).
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Key) -> Self {
        StateStore { store, prefix }
    }

    /// The latest manifest of `partition` (the highest number), `None` if
    /// its chain is empty.
    ///
    /// `after`, a number known to exist, lists only the keys after it
    /// (a chain grows forever, and S3 lists a thousand keys a request).
    pub async fn head(
        &self,
        partition: u16,
        after: Option<u64>,
    ) -> Result<Option<Manifest>, ChainError> {
        let dir = self.key(partition, "manifests");
        let listing = match after {
            Some(n) => {
                let offset = self.key(partition, &Manifest::key(n));
                self.store.list_with_offset(Some(&dir), &offset)
            }
            None => self.store.list(Some(&dir)),
        };
        let newest = listing
            .try_fold(None, |max: Option<u64>, meta| async move {
                Ok(max.max(Manifest::number_of(meta.location.as_ref())))
            })
            .await
            .map_err(|source| store_error(&dir, source))?;
        match newest.or(after) {
            Some(number) => self.get(partition, number).await.map(Some),
            None => Ok(None),
        }
    }

    /// Manifest `number` of `partition`.
    pub async fn get(&self, partition: u16, number: u64) -> Result<Manifest, ChainError> {
        let key = self.key(partition, &Manifest::key(number));
        let stored = |source| store_error(&key, source);
        let bytes = self
            .store
            .get(&key)
            .await
            .map_err(stored)?
            .bytes()
            .await
            .map_err(stored)?;
        let m = Manifest::decode(&bytes).map_err(|source| ChainError::Manifest {
            key: key.to_string(),
            source,
        })?;
        if m.partition != partition || m.number != number {
            return Err(ChainError::Invalid {
                key: key.to_string(),
                reason: "the manifest names another partition or number",
            });
        }
        Ok(m)
    }

    /// Creates manifest `m.number` of `m.partition`, if no one has:
    /// [`ChainError::Taken`] if it exists. This is the fence: each number
    /// goes to exactly one writer.
    ///
    /// Creating the same manifest again succeeds: a create whose answer
    /// was lost (a timeout, then a retry) must not read as being fenced.
    pub async fn create(&self, m: &Manifest) -> Result<(), ChainError> {
        let key = self.key(m.partition, &Manifest::key(m.number));
        let opts = PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        match self.store.put_opts(&key, m.encode().into(), opts).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => {
                match self.get(m.partition, m.number).await {
                    Ok(existing) if existing == *m => Ok(()),
                    Ok(_) | Err(ChainError::Manifest { .. } | ChainError::Invalid { .. }) => {
                        Err(ChainError::Taken {
                            partition: m.partition,
                            number: m.number,
                        })
                    }
                    Err(e) => Err(e),
                }
            }
            Err(source) => Err(store_error(&key, source)),
        }
    }

    /// Checks, before a node relies on it, that the store refuses a
    /// second create-only put of one key: the fence every manifest is.
    /// Writes a probe object under `probes/` (named after `node` and
    /// `nonce`, so nodes starting together do not meet), creates it again,
    /// and removes it. A store that overwrote it, or cannot create
    /// conditionally, is [`ChainError::NoFence`]: with it, two owners
    /// would each believe they published the same manifest number.
    pub async fn probe_fence(&self, node: &str, nonce: u64) -> Result<(), ChainError> {
        let key = self
            .prefix
            .clone()
            .join("probes")
            .join(format!("{node}-{nonce:016x}"));
        let create = || PutOptions {
            mode: PutMode::Create,
            ..PutOptions::default()
        };
        let no_fence = |what| ChainError::NoFence {
            key: key.to_string(),
            what,
        };
        let first = self
            .store
            .put_opts(&key, PutPayload::from_static(b"first"), create())
            .await;
        match first {
            Ok(_) => {}
            Err(
                object_store::Error::NotImplemented { .. }
                | object_store::Error::NotSupported { .. },
            ) => return Err(no_fence("cannot create an object only if it is absent")),
            Err(source) => return Err(store_error(&key, source)),
        }
        let second = self
            .store
            .put_opts(&key, PutPayload::from_static(b"second"), create())
            .await;
        // Removed whatever the answer: a probe left behind is harmless
        // (nothing reads `probes/`), so a failed delete is not an error.
        let _ = self.store.delete(&key).await;
        match second {
            Err(object_store::Error::AlreadyExists { .. }) => Ok(()),
            Ok(_) => Err(no_fence("overwrote an object a create-only put had made")),
            Err(source) => Err(store_error(&key, source)),
        }
    }

    /// Uploads checkpoint `dir` (its `files`, as
    /// [`PartitionStore::checkpoint`](crate::store::PartitionStore::checkpoint)
    /// listed them) for manifest `number`, written by the owner of
    /// `epoch`. Returns the new manifest's files and the bytes uploaded.
    ///
    /// An immutable file that `previous` names with the same name and size
    /// is not uploaded: its reference is kept as it is, under the epoch
    /// that uploaded it. `previous` must be the manifest this store
    /// descends from (the one it was restored from, or its owner's last
    /// one): only in one lineage does a name denote one file.
    ///
    /// Each file is read whole and sent in one PUT, one at a time: SSTs
    /// are at most tens of MiB. Multipart uploads (and several at once)
    /// are left for when checkpoints are larger.
    pub async fn upload_checkpoint(
        &self,
        partition: u16,
        epoch: u64,
        number: u64,
        dir: &Path,
        files: &[CheckpointFile],
        previous: Option<&Manifest>,
    ) -> Result<(Vec<FileRef>, u64), ChainError> {
        let mut refs = Vec::with_capacity(files.len());
        let mut uploaded = 0;
        for file in files {
            if let Some(kept) = reusable(previous, file) {
                refs.push(kept.clone());
                continue;
            }
            let key = if file.immutable {
                format!("files/{epoch:020}/{}", file.name)
            } else {
                format!("files/{epoch:020}/{number:020}/{}", file.name)
            };
            let path = dir.join(&file.name);
            let bytes = tokio::fs::read(&path).await.map_err(io_error(&path))?;
            let size = bytes.len() as u64;
            let object = self.key(partition, &key);
            self.store
                .put(&object, PutPayload::from(bytes))
                .await
                .map_err(|source| store_error(&object, source))?;
            uploaded += size;
            refs.push(FileRef {
                name: file.name.clone(),
                key,
                size,
            });
        }
        Ok((refs, uploaded))
    }

    /// Keeps the immutable files of `refs` (uploaded from checkpoint
    /// `dir` of `partition`) in the reuse directory `reuse`, hard-linked
    /// by object key: a later restore of the partition on this node (its
    /// own restart, or a hand-back returning) finds them there instead of
    /// downloading them. A file that cannot be linked is simply not kept.
    pub fn keep_for_reuse(partition: u16, refs: &[FileRef], dir: &Path, reuse: &Path) {
        if std::fs::create_dir_all(reuse).is_err() {
            return;
        }
        for file in refs {
            if !CheckpointFile::is_immutable(&file.name) {
                continue;
            }
            let kept = reuse.join(reuse_name(partition, &file.key));
            if file_size(&kept) != Some(file.size) {
                let _ = std::fs::hard_link(dir.join(&file.name), &kept);
            }
        }
    }

    /// Removes from `reuse` the kept files of `partition` that `keep` (its
    /// latest manifest's files) does not name: the cache holds what the
    /// chain's head needs, not every file the partition ever had.
    pub fn prune_reuse(partition: u16, keep: &[FileRef], reuse: &Path) {
        let prefix = format!("{partition:03}+");
        let wanted: std::collections::HashSet<String> =
            keep.iter().map(|f| reuse_name(partition, &f.key)).collect();
        let Ok(entries) = std::fs::read_dir(reuse) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) && !wanted.contains(&name) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// Restores `m`'s files into `into` (which must not exist, or be
    /// empty), ready to open as the partition's store.
    ///
    /// `reuse` is a directory of immutable files downloaded before (by
    /// object key; one directory may serve every partition): a file there
    /// of the right size is hard-linked (or, across filesystems, copied)
    /// instead of downloaded, and each immutable file downloaded is kept
    /// there. The per-checkpoint files are always downloaded: no later
    /// manifest names them, and RocksDB appends to some (a MANIFEST, a
    /// WAL), which would change a linked copy. Pruning `reuse` of files no
    /// manifest names any more is the caller's.
    pub async fn restore(
        &self,
        m: &Manifest,
        into: &Path,
        reuse: &Path,
    ) -> Result<RestoreStats, ChainError> {
        for file in &m.files {
            check_names(&self.key(m.partition, &file.key), file)?;
        }
        prepare_empty_dir(into)?;
        std::fs::create_dir_all(reuse).map_err(io_error(reuse))?;
        let mut stats = RestoreStats::default();
        for file in &m.files {
            let object = self.key(m.partition, &file.key);
            let target = into.join(&file.name);
            if !CheckpointFile::is_immutable(&file.name) {
                self.download(&object, file.size, &target).await?;
                stats.downloaded += file.size;
                continue;
            }
            let cached = reuse.join(reuse_name(m.partition, &file.key));
            let reused = file_size(&cached) == Some(file.size);
            if !reused {
                self.download(&object, file.size, &cached).await?;
            }
            match link_or_copy(&cached, &target) {
                Ok(()) if reused => stats.reused += file.size,
                Ok(()) => stats.downloaded += file.size,
                // Pruned in between (a publish of this partition keeps
                // only its head's files): fetched again, into place.
                Err(_) if !cached.exists() => {
                    self.download(&object, file.size, &target).await?;
                    stats.downloaded += file.size;
                }
                Err(e) => return Err(e),
            }
        }
        sync_dir(reuse)?;
        sync_dir(into)?;
        Ok(stats)
    }

    /// Downloads `object` to `to` (through a temporary file beside it, so
    /// `to` is whole or absent) and makes it durable; it must be `size`
    /// bytes.
    async fn download(&self, object: &Key, size: u64, to: &Path) -> Result<(), ChainError> {
        let mut partial = to.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        let result = match self.write_object(object, size, &partial).await {
            Ok(got) if got == size => std::fs::rename(&partial, to).map_err(io_error(to)),
            Ok(got) => Err(ChainError::Size {
                key: object.to_string(),
                expected: size,
                got,
            }),
            Err(e) => Err(e),
        };
        if result.is_err() {
            let _ = std::fs::remove_file(&partial);
        }
        result
    }

    /// Streams `object` into a new file at `path`, synced; returns its
    /// size, or stops as soon as it is more than `limit`.
    async fn write_object(&self, object: &Key, limit: u64, path: &Path) -> Result<u64, ChainError> {
        let mut stream = self
            .store
            .get(object)
            .await
            .map_err(|source| store_error(object, source))?
            .into_stream();
        let mut out = tokio::fs::File::create(path)
            .await
            .map_err(io_error(path))?;
        let mut written = 0;
        while let Some(chunk) = stream
            .try_next()
            .await
            .map_err(|source| store_error(object, source))?
        {
            written += chunk.len() as u64;
            if written > limit {
                return Ok(written);
            }
            out.write_all(&chunk).await.map_err(io_error(path))?;
        }
        out.sync_all().await.map_err(io_error(path))?;
        Ok(written)
    }

    /// Collects partition `latest.partition`'s chain: deletes what
    /// [`garbage`] finds among its objects, `latest` being the manifest
    /// its owner (the caller) published last. Returns how many objects
    /// were deleted. Only the owner collects, after a publish of its own.
    pub async fn collect(&self, latest: &Manifest) -> Result<usize, ChainError> {
        let base = self.key(latest.partition, "");
        let listing: Vec<object_store::ObjectMeta> = self
            .store
            .list(Some(&base))
            .try_collect()
            .await
            .map_err(|source| store_error(&base, source))?;
        let relative: Vec<String> = listing
            .iter()
            .filter_map(|meta| {
                let key = meta.location.as_ref();
                Some(
                    key.strip_prefix(base.as_ref())?
                        .trim_start_matches('/')
                        .to_owned(),
                )
            })
            .collect();
        let doomed = garbage(&relative, latest);
        for key in &doomed {
            let object = self.key(latest.partition, key);
            match self.store.delete(&object).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => return Err(store_error(&object, source)),
            }
        }
        Ok(doomed.len())
    }

    /// The key of `relative` (slash-separated) under partition's prefix.
    fn key(&self, partition: u16, relative: &str) -> Key {
        let base = self
            .prefix
            .clone()
            .join("partitions")
            .join(format!("{partition:03}"));
        relative.split('/').fold(base, |key, part| key.join(part))
    }
}

/// What of a partition's chain may be deleted, from its objects' keys
/// (relative to the partition's prefix) and the manifest its owner
/// published last (`latest`, whose epoch is the collecting owner's).
///
/// Deleted: manifests more than [`KEEP_MANIFESTS`] before `latest`, and
/// files `latest` does not name that no one may still publish:
/// - under an older epoch (that owner is fenced: any manifest it still
///   tries to create is refused);
/// - under the owner's own epoch, an immutable file numbered at most the
///   highest file number `latest` names (RocksDB numbers files from one
///   counter, so a file a later checkpoint names was made after
///   `latest`'s and numbers higher; one numbered lower that `latest`
///   does not name was compacted away before it), and a per-checkpoint
///   file of a manifest number up to `latest`'s (the checkpoint under
///   way is for a higher number).
///
/// Kept: everything `latest` names (all a restore reads: a node restores
/// only the head it claimed over, and an owner collects only after its
/// own publish, so the head is `latest` or a later manifest whose files
/// are newer or `latest`'s), files of newer epochs (a new owner's), and
/// any key this layout does not name.
pub fn garbage(keys: &[String], latest: &Manifest) -> Vec<String> {
    let named: std::collections::HashSet<&str> =
        latest.files.iter().map(|f| f.key.as_str()).collect();
    let newest_file = latest
        .files
        .iter()
        .filter_map(|f| file_number(&f.name))
        .max()
        .unwrap_or(0);
    let epoch = latest.owner.epoch;
    let doomed = |key: &String| {
        if named.contains(key.as_str()) {
            return false;
        }
        let parts: Vec<&str> = key.split('/').collect();
        match parts[..] {
            ["manifests", name] => {
                Manifest::number_of(name).is_some_and(|n| n + KEEP_MANIFESTS <= latest.number)
            }
            ["files", e, name] => match e.parse::<u64>() {
                Ok(e) if e < epoch => true,
                Ok(e) if e == epoch => file_number(name).is_some_and(|n| n <= newest_file),
                _ => false,
            },
            ["files", e, number, _] => match (e.parse::<u64>(), number.parse::<u64>()) {
                (Ok(e), Ok(_)) if e < epoch => true,
                (Ok(e), Ok(n)) if e == epoch => n <= latest.number,
                _ => false,
            },
            _ => false,
        }
    };
    keys.iter().filter(|k| doomed(k)).cloned().collect()
}

/// The number RocksDB gave an immutable file (`000123.sst` → 123).
fn file_number(name: &str) -> Option<u64> {
    if !CheckpointFile::is_immutable(name) {
        return None;
    }
    let digits = name.split('.').next()?;
    digits.parse().ok()
}

/// `previous`'s reference to `file`, if `file` is immutable and `previous`
/// names it (the same name and size).
fn reusable<'m>(previous: Option<&'m Manifest>, file: &CheckpointFile) -> Option<&'m FileRef> {
    if !file.immutable {
        return None;
    }
    previous?
        .files
        .iter()
        .find(|f| f.name == file.name && f.size == file.size)
}

/// Refuses a file reference whose name or key could leave the directory
/// it is restored into (or the reuse directory): a manifest is read from
/// a shared store, so its names are checked like any input.
fn check_names(object: &Key, file: &FileRef) -> Result<(), ChainError> {
    let plain = |part: &str| {
        !part.is_empty()
            && !part.starts_with('.')
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    };
    if plain(&file.name) && file.key.split('/').all(plain) {
        Ok(())
    } else {
        Err(ChainError::Invalid {
            key: object.to_string(),
            reason: "a file's name or key is not a plain relative path",
        })
    }
}

/// The name in the reuse directory of a partition's object: its key with
/// `+` for `/` (neither is in a checked key part, so names do not
/// collide), after the partition.
fn reuse_name(partition: u16, key: &str) -> String {
    format!("{partition:03}+{}", key.replace('/', "+"))
}

/// Creates `dir` (and its parents), or checks that it is empty.
fn prepare_empty_dir(dir: &Path) -> Result<(), ChainError> {
    std::fs::create_dir_all(dir).map_err(io_error(dir))?;
    let mut entries = std::fs::read_dir(dir).map_err(io_error(dir))?;
    if entries.next().is_some() {
        return Err(ChainError::NotEmpty {
            path: dir.to_owned(),
        });
    }
    Ok(())
}

/// The size of the file at `path`, if there is one.
fn file_size(path: &Path) -> Option<u64> {
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len())
}

/// Hard-links `from` at `to`; copies (and syncs) it where a link is
/// refused, e.g. across filesystems.
fn link_or_copy(from: &Path, to: &Path) -> Result<(), ChainError> {
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to).map_err(io_error(to))?;
    std::fs::File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(io_error(to))
}

/// Makes the entries of `dir` durable.
fn sync_dir(dir: &Path) -> Result<(), ChainError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(dir))
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ChainError + '_ {
    move |source| ChainError::Io {
        path: path.to_owned(),
        source,
    }
}

fn store_error(key: &Key, source: object_store::Error) -> ChainError {
    ChainError::Store {
        key: key.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use object_store::memory::InMemory;

    use super::*;
    use crate::cluster::manifest::{Owner, MANIFEST_VERSION};
    use crate::config::Config;
    use crate::store::test_support::entry;
    use crate::store::{AdmitEntry, PartitionStore, StoreEnv};

    fn memory() -> StateStore {
        StateStore::new(Arc::new(InMemory::new()), Key::from("state"))
    }

    /// A store that ignores create-only puts and overwrites (as some
    /// S3-compatible stores do without their conditional-write option).
    #[derive(Debug)]
    struct Overwriting(InMemory);

    impl std::fmt::Display for Overwriting {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Overwriting({})", self.0)
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for Overwriting {
        async fn put_opts(
            &self,
            location: &Key,
            payload: PutPayload,
            _: PutOptions,
        ) -> object_store::Result<object_store::PutResult> {
            self.0
                .put_opts(location, payload, PutOptions::default())
                .await
        }

        async fn put_multipart_opts(
            &self,
            location: &Key,
            opts: object_store::PutMultipartOptions,
        ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
            self.0.put_multipart_opts(location, opts).await
        }

        async fn get_opts(
            &self,
            location: &Key,
            options: object_store::GetOptions,
        ) -> object_store::Result<object_store::GetResult> {
            self.0.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: futures_util::stream::BoxStream<'static, object_store::Result<Key>>,
        ) -> futures_util::stream::BoxStream<'static, object_store::Result<Key>> {
            self.0.delete_stream(locations)
        }

        fn list(
            &self,
            prefix: Option<&Key>,
        ) -> futures_util::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>>
        {
            self.0.list(prefix)
        }

        async fn list_with_delimiter(
            &self,
            prefix: Option<&Key>,
        ) -> object_store::Result<object_store::ListResult> {
            self.0.list_with_delimiter(prefix).await
        }

        async fn copy_opts(
            &self,
            from: &Key,
            to: &Key,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.0.copy_opts(from, to, options).await
        }
    }

    #[tokio::test]
    async fn the_fence_probe_passes_a_store_that_refuses_a_second_create_and_leaves_nothing() {
        let inner = Arc::new(InMemory::new());
        let state = StateStore::new(inner.clone(), Key::from("state"));
        state.probe_fence("n1", 7).await.unwrap();
        let left: Vec<_> = inner.list(None).try_collect().await.unwrap();
        assert!(left.is_empty(), "the probe is removed: {left:?}");
    }

    #[tokio::test]
    async fn the_fence_probe_refuses_a_store_that_overwrites() {
        let store = Arc::new(Overwriting(InMemory::new()));
        let state = StateStore::new(store, Key::from("state"));
        let err = state.probe_fence("n1", 7).await.unwrap_err();
        assert!(matches!(err, ChainError::NoFence { .. }), "{err:?}");
        assert!(err.to_string().contains("cannot fence"), "{err}");
        // And such a store would let two owners publish one number.
        let m = manifest(1, "n1", 1, Vec::new());
        state.create(&m).await.unwrap();
        let rival = manifest(1, "n2", 2, Vec::new());
        assert!(
            state.create(&rival).await.is_ok(),
            "no fence without the probe"
        );
    }

    fn manifest(number: u64, node: &str, epoch: u64, files: Vec<FileRef>) -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            partition: 0,
            number,
            owner: Owner {
                node: node.into(),
                incarnation: 7,
                epoch,
            },
            released: false,
            hold_ms: 0,
            covers: 0,
            files,
        }
    }

    fn open(data_dir: &Path) -> PartitionStore {
        let env = StoreEnv::new(&Config::defaults().storage);
        PartitionStore::open(&env, data_dir, 0).unwrap()
    }

    fn pages(range: std::ops::Range<u32>) -> Vec<AdmitEntry> {
        range
            .map(|i| entry(&format!("http://a.test/{i}"), "a.test"))
            .collect()
    }

    fn urls_of(range: std::ops::Range<u32>) -> BTreeSet<String> {
        pages(range).into_iter().map(|e| e.url).collect()
    }

    fn queued(store: &PartitionStore) -> BTreeSet<String> {
        store.queued_urls().unwrap().into_iter().collect()
    }

    /// Checkpoints `store` into a new directory under `scratch`.
    fn checkpoint(
        store: &PartitionStore,
        scratch: &Path,
        name: &str,
    ) -> (PathBuf, Vec<CheckpointFile>) {
        let dir = scratch.join(name);
        let files = store.checkpoint(&dir).unwrap();
        (dir, files)
    }

    fn total(files: &[CheckpointFile]) -> u64 {
        files.iter().map(|f| f.size).sum()
    }

    async fn a_chain_grows_one_create_per_number(chain: StateStore) {
        assert_eq!(chain.head(0, None).await.unwrap(), None);
        let first = manifest(1, "n1", 1, vec![]);
        let second = manifest(2, "n1", 1, vec![]);
        chain.create(&first).await.unwrap();
        chain.create(&second).await.unwrap();
        assert_eq!(chain.head(0, None).await.unwrap(), Some(second.clone()));
        assert_eq!(chain.head(0, Some(1)).await.unwrap(), Some(second.clone()));
        assert_eq!(chain.head(0, Some(2)).await.unwrap(), Some(second.clone()));
        // Another owner's claim of a taken number is refused...
        let rival = manifest(2, "n2", 2, vec![]);
        assert!(matches!(
            chain.create(&rival).await,
            Err(ChainError::Taken {
                partition: 0,
                number: 2
            })
        ));
        // ...while the same create, retried, is not (a lost answer).
        chain.create(&second).await.unwrap();
        assert_eq!(chain.get(0, 2).await.unwrap(), second);
        // Chains are per partition.
        assert_eq!(chain.head(1, None).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_chain_in_memory_grows_one_create_per_number() {
        a_chain_grows_one_create_per_number(memory()).await;
    }

    #[tokio::test]
    async fn a_chain_in_a_directory_grows_one_create_per_number() {
        let root = tempfile::tempdir().unwrap();
        let url = format!("file://{}/state", root.path().display());
        let chain = StateStore::open(&url, &BTreeMap::new()).unwrap();
        a_chain_grows_one_create_per_number(chain).await;
        let manifests = root.path().join("state/partitions/000/manifests");
        assert!(manifests.join(format!("{:020}.json", 1)).is_file());
    }

    #[test]
    fn a_state_store_names_its_own_config_keys() {
        let options = BTreeMap::from([("region".to_owned(), "x".to_owned())]);
        let err = StateStore::open("file:///tmp/state", &options).unwrap_err();
        assert_eq!(err.key(), "cluster.state_options.region");
        let err = StateStore::open("ftp://host/state", &BTreeMap::new()).unwrap_err();
        assert_eq!(err.key(), "cluster.state_url");
    }

    #[tokio::test]
    async fn a_checkpoint_round_trips_and_the_next_uploads_only_new_files() {
        let chain = memory();
        let scratch = tempfile::tempdir().unwrap();
        let reuse = scratch.path().join("reuse");

        // Owner of epoch 1 writes, checkpoints and publishes manifest 1.
        let live = tempfile::tempdir().unwrap();
        let store = open(live.path());
        store.admit(pages(0..100)).unwrap();
        let (dir, files) = checkpoint(&store, scratch.path(), "cp1");
        let (refs, uploaded) = chain
            .upload_checkpoint(0, 1, 1, &dir, &files, None)
            .await
            .unwrap();
        assert_eq!(uploaded, total(&files));
        for (file, r) in files.iter().zip(&refs) {
            assert_eq!((&r.name, r.size), (&file.name, file.size));
            let expected = match file.immutable {
                true => format!("files/{:020}/{}", 1, file.name),
                false => format!("files/{:020}/{:020}/{}", 1, 1, file.name),
            };
            assert_eq!(r.key, expected);
        }
        let first = manifest(1, "n1", 1, refs);
        chain.create(&first).await.unwrap();
        drop(store);

        // Owner of epoch 2 restores it on another machine.
        let head = chain.head(0, None).await.unwrap().unwrap();
        let data = tempfile::tempdir().unwrap();
        let into = PartitionStore::dir(data.path(), 0);
        let stats = chain.restore(&head, &into, &reuse).await.unwrap();
        assert_eq!(
            stats,
            RestoreStats {
                downloaded: total(&files),
                reused: 0
            }
        );
        let store = open(data.path());
        assert_eq!(queued(&store), urls_of(0..100));

        // Its next checkpoint shares the files it restored.
        store.admit(pages(100..200)).unwrap();
        let (dir, files) = checkpoint(&store, scratch.path(), "cp2");
        let (refs, uploaded) = chain
            .upload_checkpoint(0, 2, 2, &dir, &files, Some(&head))
            .await
            .unwrap();
        assert!(uploaded < total(&files), "{uploaded} of {}", total(&files));
        let kept: Vec<_> = refs
            .iter()
            .filter(|r| head.files.contains(r))
            .cloned()
            .collect();
        assert!(!kept.is_empty());
        assert!(kept
            .iter()
            .all(|r| r.key.starts_with(&format!("files/{:020}/", 1))));
        let new: u64 = refs
            .iter()
            .filter(|r| !head.files.contains(r))
            .inspect(|r| assert!(r.key.starts_with(&format!("files/{:020}/", 2))))
            .map(|r| r.size)
            .sum();
        assert_eq!(uploaded, new);
        let second = manifest(2, "n2", 2, refs);
        chain.create(&second).await.unwrap();
        drop(store);

        // A restore of manifest 2 links what the first restore kept.
        let data = tempfile::tempdir().unwrap();
        let stats = chain
            .restore(&second, &PartitionStore::dir(data.path(), 0), &reuse)
            .await
            .unwrap();
        let kept_bytes: u64 = kept.iter().map(|r| r.size).sum();
        assert_eq!(stats.reused, kept_bytes);
        assert_eq!(stats.downloaded, total(&files) - kept_bytes);
        assert_eq!(queued(&open(data.path())), urls_of(0..200));
    }

    /// What a node uploaded it keeps for its own later restore, and only
    /// what the chain's head still names.
    #[tokio::test]
    async fn uploaded_files_are_kept_for_reuse_until_the_head_drops_them() {
        let chain = memory();
        let scratch = tempfile::tempdir().unwrap();
        let reuse = scratch.path().join("reuse");
        let live = tempfile::tempdir().unwrap();
        let store = open(live.path());
        store.admit(pages(0..50)).unwrap();
        let (dir, files) = checkpoint(&store, scratch.path(), "cp");
        let (refs, _) = chain
            .upload_checkpoint(0, 1, 1, &dir, &files, None)
            .await
            .unwrap();
        StateStore::keep_for_reuse(0, &refs, &dir, &reuse);
        let m = manifest(1, "n1", 1, refs.clone());
        let data = tempfile::tempdir().unwrap();
        let stats = chain
            .restore(&m, &PartitionStore::dir(data.path(), 0), &reuse)
            .await
            .unwrap();
        let immutable: u64 = refs
            .iter()
            .filter(|f| CheckpointFile::is_immutable(&f.name))
            .map(|f| f.size)
            .sum();
        assert!(immutable > 0);
        assert_eq!(stats.reused, immutable, "nothing immutable downloaded");
        assert_eq!(queued(&open(data.path())), urls_of(0..50));
        // A head that names none of them: the cache lets them go.
        StateStore::prune_reuse(0, &[], &reuse);
        assert_eq!(std::fs::read_dir(&reuse).unwrap().count(), 0);
    }

    #[tokio::test]
    async fn a_restore_takes_immutable_files_from_the_reuse_directory() {
        let chain = memory();
        let scratch = tempfile::tempdir().unwrap();
        let reuse = scratch.path().join("reuse");
        let live = tempfile::tempdir().unwrap();
        let store = open(live.path());
        store.admit(pages(0..50)).unwrap();
        let (dir, files) = checkpoint(&store, scratch.path(), "cp");
        let (refs, _) = chain
            .upload_checkpoint(0, 1, 1, &dir, &files, None)
            .await
            .unwrap();
        let m = manifest(1, "n1", 1, refs);
        let first = scratch.path().join("first");
        chain.restore(&m, &first, &reuse).await.unwrap();

        // Gone from the store: only the reuse directory has them now.
        let immutable: Vec<_> = m
            .files
            .iter()
            .filter(|f| CheckpointFile::is_immutable(&f.name))
            .collect();
        assert!(!immutable.is_empty());
        for f in &immutable {
            chain.store.delete(&chain.key(0, &f.key)).await.unwrap();
        }
        let data = tempfile::tempdir().unwrap();
        let stats = chain
            .restore(&m, &PartitionStore::dir(data.path(), 0), &reuse)
            .await
            .unwrap();
        let reused: u64 = immutable.iter().map(|f| f.size).sum();
        assert_eq!(
            stats,
            RestoreStats {
                downloaded: total(&files) - reused,
                reused
            }
        );
        assert_eq!(queued(&open(data.path())), urls_of(0..50));

        // A non-empty target is refused; so is a restore it cannot finish.
        assert!(matches!(
            chain.restore(&m, &first, &reuse).await,
            Err(ChainError::NotEmpty { .. })
        ));
        let err = chain
            .restore(
                &m,
                &scratch.path().join("second"),
                &scratch.path().join("empty"),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, ChainError::Store { .. }), "{err}");
    }

    #[tokio::test]
    async fn a_restore_checks_sizes_and_names() {
        let chain = memory();
        let key = "files/00000000000000000001/000009.sst";
        chain
            .store
            .put(&chain.key(0, key), PutPayload::from(vec![1u8; 10]))
            .await
            .unwrap();
        let file = |name: &str, key: &str, size| FileRef {
            name: name.into(),
            key: key.into(),
            size,
        };
        let scratch = tempfile::tempdir().unwrap();
        let reuse = scratch.path().join("reuse");
        // Shorter and longer than its manifest says.
        for (expected, into) in [(11, "a"), (9, "b")] {
            let wrong = manifest(1, "n1", 1, vec![file("000009.sst", key, expected)]);
            let err = chain
                .restore(&wrong, &scratch.path().join(into), &reuse)
                .await
                .unwrap_err();
            assert!(matches!(err, ChainError::Size { got: 10, .. }), "{err}");
        }
        // Nothing half-written is left to be taken for a good copy.
        assert_eq!(std::fs::read_dir(&reuse).unwrap().count(), 0);

        for (name, key) in [("../x.sst", key), ("000009.sst", "files/../../x.sst")] {
            let escaping = manifest(1, "n1", 1, vec![file(name, key, 10)]);
            let err = chain
                .restore(&escaping, &scratch.path().join("c"), &reuse)
                .await
                .unwrap_err();
            assert!(matches!(err, ChainError::Invalid { .. }), "{err}");
        }
    }

    #[test]
    fn the_chain_futures_can_be_spawned() {
        fn send<T: Send>(_: T) {}
        let chain = memory();
        let m = manifest(1, "n1", 1, vec![]);
        send(chain.head(0, None));
        send(chain.create(&m));
        send(chain.upload_checkpoint(0, 1, 1, Path::new("x"), &[], None));
        send(chain.restore(&m, Path::new("x"), Path::new("y")));
    }
}

#[cfg(test)]
mod collection_tests {
    use super::*;
    use crate::cluster::manifest::{Owner, MANIFEST_VERSION};
    use crate::config::Config;
    use crate::store::test_support::entry;
    use crate::store::{PartitionStore, StoreEnv};
    use object_store::memory::InMemory;

    fn file(name: &str, key: &str) -> FileRef {
        FileRef {
            name: name.into(),
            key: key.into(),
            size: 1,
        }
    }

    fn latest(number: u64, epoch: u64, files: Vec<FileRef>) -> Manifest {
        Manifest {
            version: MANIFEST_VERSION,
            partition: 0,
            number,
            owner: Owner {
                node: "n2".into(),
                incarnation: 1,
                epoch,
            },
            released: false,
            hold_ms: 0,
            covers: 0,
            files,
        }
    }

    fn keys(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn garbage_is_what_no_restore_reads_and_no_owner_may_still_publish() {
        let e = |n: u64| format!("{n:020}");
        let m = |n: u64| Manifest::key(n);
        // Owner of epoch 20 published manifest 30: its files are an SST of
        // epoch 10's (shared since a claim), two of its own, and its
        // per-checkpoint files under number 30.
        let head = latest(
            30,
            20,
            vec![
                file("000005.sst", &format!("files/{}/000005.sst", e(10))),
                file("000040.sst", &format!("files/{}/000040.sst", e(20))),
                file("000044.blob", &format!("files/{}/000044.blob", e(20))),
                file("CURRENT", &format!("files/{}/{}/CURRENT", e(20), e(30))),
            ],
        );
        let listing = keys(&[
            &m(25),
            &m(26),
            &m(27),
            &m(30),
            &format!("files/{}/000005.sst", e(10)),
            &format!("files/{}/000006.sst", e(10)),
            &format!("files/{}/000007/CURRENT", e(10)),
            &format!("files/{}/000040.sst", e(20)),
            &format!("files/{}/000044.blob", e(20)),
            &format!("files/{}/000031.sst", e(20)),
            &format!("files/{}/000050.sst", e(20)),
            &format!("files/{}/{}/CURRENT", e(20), e(29)),
            &format!("files/{}/{}/CURRENT", e(20), e(30)),
            &format!("files/{}/{}/CURRENT", e(20), e(31)),
            &format!("files/{}/000001.sst", e(33)),
            "notes.txt",
        ]);
        let doomed: BTreeSet<String> = garbage(&listing, &head).into_iter().collect();
        let expected: BTreeSet<String> = keys(&[
            // Manifests 26 and older: more than four before the head.
            &m(25),
            &m(26),
            // An older epoch's files the head does not name.
            &format!("files/{}/000006.sst", e(10)),
            &format!("files/{}/000007/CURRENT", e(10)),
            // Its own, compacted away before the head.
            &format!("files/{}/000031.sst", e(20)),
            // Its own per-checkpoint files of an earlier number.
            &format!("files/{}/{}/CURRENT", e(20), e(29)),
        ])
        .into_iter()
        .collect();
        assert_eq!(doomed, expected);
        // Never anything the head names, a checkpoint under way (file 50,
        // number 31), a newer owner's files or an unknown key.
        for kept in head.files.iter().map(|f| f.key.clone()) {
            assert!(!doomed.contains(&kept));
        }
    }

    use std::collections::BTreeSet;

    #[tokio::test]
    async fn a_collected_chain_stays_small_and_its_head_restores() {
        let chain = StateStore::new(Arc::new(InMemory::new()), Key::from("state"));
        let env = StoreEnv::new(&Config::defaults().storage);
        let live = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let store = PartitionStore::open(&env, live.path(), 0).unwrap();
        let mut previous: Option<Manifest> = None;
        let mut objects = Vec::new();
        // An owner (epoch 1) publishing 40 checkpoints of a growing
        // partition, collecting after each.
        for number in 1..=40u64 {
            let urls = (0..20).map(|i| entry(&format!("http://a.test/{number}/{i}"), "a.test"));
            store.admit(urls.collect()).unwrap();
            let dir = scratch.path().join(format!("cp{number}"));
            let files = store.checkpoint(&dir).unwrap();
            let (refs, _) = chain
                .upload_checkpoint(0, 1, number, &dir, &files, previous.as_ref())
                .await
                .unwrap();
            let mut m = latest(number, 1, refs);
            m.owner.node = "n1".into();
            chain.create(&m).await.unwrap();
            chain.collect(&m).await.unwrap();
            let count: Vec<_> = chain
                .store
                .list(Some(&chain.key(0, "")))
                .try_collect::<Vec<_>>()
                .await
                .unwrap();
            objects.push(count.len());
            previous = Some(m);
        }
        // Bounded: the head's files and a few manifests, not 40 checkpoints.
        let head = previous.unwrap();
        let most = *objects.iter().max().unwrap();
        assert!(
            most <= head.files.len() + 2 * KEEP_MANIFESTS as usize + 8,
            "objects per checkpoint: {objects:?}"
        );
        // And the head still restores whole.
        let into = PartitionStore::dir(scratch.path().join("restored").as_path(), 0);
        let reuse = scratch.path().join("reuse");
        chain.restore(&head, &into, &reuse).await.unwrap();
        let restored = PartitionStore::open(&env, &scratch.path().join("restored"), 0).unwrap();
        assert_eq!(restored.queued_urls().unwrap().len(), 40 * 20);
    }
}
