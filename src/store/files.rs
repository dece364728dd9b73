//! Files of the crawl directory beside the partition stores: the manifest
//! of facts fixed at creation, and the marker of a running crawl.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::StoreError;

/// The crawl manifest (`data_dir/crawl.json`): facts fixed when a crawl is
/// created. Reopening a crawl with another partition count would route URLs
/// to the wrong stores, so it is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Number of partitions.
    pub partitions: u16,
}

impl Manifest {
    /// The manifest of the crawl in `data_dir`, if one was created there.
    pub fn existing(data_dir: &Path) -> Result<Option<Manifest>, StoreError> {
        let path = data_dir.join("crawl.json");
        match std::fs::read(&path) {
            Ok(bytes) => {
                serde_json::from_slice(&bytes)
                    .map(Some)
                    .map_err(|e| StoreError::Manifest {
                        path,
                        message: e.to_string(),
                    })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::Manifest {
                path,
                message: e.to_string(),
            }),
        }
    }

    /// The partition count to open the crawl in `data_dir` with: the
    /// configured one if the config set it (`given`) or the crawl is new,
    /// else the count the crawl was created with.
    pub fn partitions_to_open(
        data_dir: &Path,
        configured: u16,
        given: bool,
    ) -> Result<u16, StoreError> {
        if given {
            return Ok(configured);
        }
        Ok(Self::existing(data_dir)?.map_or(configured, |m| m.partitions))
    }

    /// Reads the manifest, writing it first if the crawl is new; errors if it
    /// disagrees with `partitions`.
    pub fn ensure(data_dir: &Path, partitions: u16) -> Result<Manifest, StoreError> {
        let path = data_dir.join("crawl.json");
        let err = |message: String| StoreError::Manifest {
            path: path.clone(),
            message,
        };
        let wanted = Manifest { partitions };
        if let Some(found) = Self::existing(data_dir)? {
            if found != wanted {
                return Err(err(format!(
                    "crawl was created with {} partitions, config says {}",
                    found.partitions, partitions
                )));
            }
            return Ok(found);
        }
        std::fs::create_dir_all(data_dir).map_err(|e| err(e.to_string()))?;
        // Written whole under a name of this writer's own, then linked in
        // place: the nodes of a cluster on one machine share the data dir
        // and may create the crawl at once. With one temporary name for
        // all, one node's rename moved the file another had just written,
        // whose own rename then failed ("No such file or directory") and
        // the node did not start. A link fails if the manifest is there:
        // the first writer's manifest is the crawl's, and the others read
        // it (and refuse it if their partition count differs).
        let tmp = data_dir.join(format!(
            "crawl.json.{}-{}.tmp",
            std::process::id(),
            NEXT_TMP.fetch_add(1, Ordering::Relaxed)
        ));
        let written = std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(&wanted).expect("serialises"),
        );
        let placed = written.and_then(|()| match std::fs::hard_link(&tmp, &path) {
            // A filesystem without hard links: the rename of before.
            Err(e) if e.kind() == std::io::ErrorKind::Unsupported => std::fs::rename(&tmp, &path),
            other => other,
        });
        let _ = std::fs::remove_file(&tmp);
        match placed {
            Ok(()) => Ok(wanted),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::ensure(data_dir, partitions)
            }
            Err(e) => Err(err(e.to_string())),
        }
    }
}

/// Numbers the manifest's temporary files within this process (nodes of
/// one process may create the same crawl at once, in tests).
static NEXT_TMP: AtomicU64 = AtomicU64::new(0);

/// The marker of a running crawl (`data_dir/RUNNING`): created at start,
/// removed after a clean shutdown. Finding it at start means the last run
/// crashed, so hosts may have had requests in flight.
pub struct RunMarker;

impl RunMarker {
    const FILE: &'static str = "RUNNING";

    /// Marks the crawl as running; returns whether the last run crashed.
    pub fn begin(data_dir: &Path) -> std::io::Result<bool> {
        let path = data_dir.join(Self::FILE);
        let crashed = path.exists();
        std::fs::write(&path, format!("pid {}\n", std::process::id()))?;
        Ok(crashed)
    }

    /// Marks a clean stop.
    pub fn end(data_dir: &Path) -> std::io::Result<()> {
        match std::fs::remove_file(data_dir.join(Self::FILE)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_marker_tells_a_crash_from_a_clean_stop() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!RunMarker::begin(dir.path()).unwrap());
        RunMarker::end(dir.path()).unwrap();
        assert!(!RunMarker::begin(dir.path()).unwrap());
        // No end: the next start sees a crash.
        assert!(RunMarker::begin(dir.path()).unwrap());
    }

    /// Writers creating one crawl at once (a cluster's nodes sharing a
    /// data dir) all get its manifest, and leave no temporary file.
    #[test]
    fn writers_creating_a_crawl_at_once_all_get_its_manifest() {
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let start = std::sync::Barrier::new(8);
            let results: Vec<_> = std::thread::scope(|scope| {
                let writers: Vec<_> = (0..8)
                    .map(|_| {
                        scope.spawn(|| {
                            start.wait();
                            Manifest::ensure(dir.path(), 8)
                        })
                    })
                    .collect();
                writers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            for result in results {
                assert_eq!(result.unwrap(), Manifest { partitions: 8 });
            }
            let names: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            assert_eq!(names, ["crawl.json"]);
        }
    }

    #[test]
    fn manifest_refuses_a_different_partition_count() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Manifest::existing(dir.path()).unwrap(), None);
        Manifest::ensure(dir.path(), 8).unwrap();
        Manifest::ensure(dir.path(), 8).unwrap();
        assert_eq!(
            Manifest::existing(dir.path()).unwrap(),
            Some(Manifest { partitions: 8 })
        );
        let err = Manifest::ensure(dir.path(), 16).unwrap_err();
        assert!(err.to_string().contains("8 partitions"), "{err}");
        // The default count gives way to the crawl's; a count the config
        // names does not (and is refused above).
        assert_eq!(
            Manifest::partitions_to_open(dir.path(), 16, false).unwrap(),
            8
        );
        assert_eq!(
            Manifest::partitions_to_open(dir.path(), 16, true).unwrap(),
            16
        );
        let new = tempfile::tempdir().unwrap();
        assert_eq!(
            Manifest::partitions_to_open(new.path(), 16, false).unwrap(),
            16
        );
    }
}
