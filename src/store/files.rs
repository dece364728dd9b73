//! Files of the crawl directory beside the partition stores: the manifest
//! of facts fixed at creation, and the marker of a running crawl.

use std::path::Path;

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
        let tmp = path.with_extension("json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(&wanted).expect("serialises"),
        )
        .and_then(|_| std::fs::rename(&tmp, &path))
        .map_err(|e| err(e.to_string()))?;
        Ok(wanted)
    }
}

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
