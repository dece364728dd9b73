//! An operator's runtime controls of a node: paused or not, and the
//! node-wide request rate. Changed through the admin API, kept in a small
//! JSON file in the data directory (`controls.json`, per node on a
//! cluster) so a restart comes back as the operator left it: a paused
//! crawl stays paused.
//!
//! The file is replaced atomically (written beside, synced, renamed), so a
//! crash leaves the old or the new controls, never half of either. A file
//! that does not parse is an error at start, not a silent reset: a crawl
//! someone paused must not resume by accident.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The controls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Controls {
    /// No new request starts while paused (those in flight finish).
    pub paused: bool,
    /// Requests started per second, node-wide; 0 means no limit.
    pub max_requests_per_second: f64,
}

/// The controls file could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// Reading or writing failed.
    #[error("controls file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid controls.
    #[error("controls file {path} does not parse: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: serde_json::Error,
    },
    /// A rate out of range.
    #[error("max_requests_per_second must be 0 (no limit) or between {MIN_RATE} and {MAX_RATE}, got {0}")]
    BadRate(f64),
}

impl Controls {
    /// The controls of a node starting fresh: running, at `rate`.
    pub fn new(rate: f64) -> Self {
        Controls {
            paused: false,
            max_requests_per_second: rate,
        }
    }

    /// The controls saved at `path`, or `fresh` if there are none.
    pub fn load(path: &Path, fresh: Controls) -> Result<Self, ControlError> {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(fresh),
            Err(source) => {
                return Err(ControlError::Io {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        let controls: Controls =
            serde_json::from_slice(&bytes).map_err(|source| ControlError::Parse {
                path: path.to_owned(),
                source,
            })?;
        check_rate(controls.max_requests_per_second)?;
        Ok(controls)
    }

    /// Saves the controls at `path`, atomically and durably.
    pub fn save(&self, path: &Path) -> Result<(), ControlError> {
        let io = |source| ControlError::Io {
            path: path.to_owned(),
            source,
        };
        let tmp = path.with_extension("json.tmp");
        let mut file = std::fs::File::create(&tmp).map_err(io)?;
        let json = serde_json::to_vec_pretty(self).expect("controls serialise");
        file.write_all(&json).map_err(io)?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent().and_then(|d| std::fs::File::open(d).ok()) {
            dir.sync_all().map_err(io)?;
        }
        Ok(())
    }
}

/// The slowest rate there is: one request per 1,000 s.
pub const MIN_RATE: f64 = 0.001;
/// The fastest: a million requests per second (far above what a node does;
/// the limit then never binds).
pub const MAX_RATE: f64 = 1_000_000.0;

/// A rate is 0 (no limit) or within [`MIN_RATE`]..=[`MAX_RATE`].
pub fn check_rate(rate: f64) -> Result<(), ControlError> {
    if rate == 0.0 || (MIN_RATE..=MAX_RATE).contains(&rate) {
        Ok(())
    } else {
        Err(ControlError::BadRate(rate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_survive_a_save_and_absent_ones_are_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("controls.json");
        let fresh = Controls::new(5.0);
        assert_eq!(Controls::load(&path, fresh).unwrap(), fresh);
        let paused = Controls {
            paused: true,
            max_requests_per_second: 2.5,
        };
        paused.save(&path).unwrap();
        assert_eq!(Controls::load(&path, fresh).unwrap(), paused);
        assert!(!dir.path().join("controls.json.tmp").exists());
    }

    #[test]
    fn a_broken_file_is_an_error_not_a_reset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("controls.json");
        std::fs::write(&path, b"{\"paused\": tru").unwrap();
        let err = Controls::load(&path, Controls::new(0.0)).unwrap_err();
        assert!(matches!(err, ControlError::Parse { .. }), "{err}");
        std::fs::write(&path, br#"{"paused":false,"max_requests_per_second":-1}"#).unwrap();
        let err = Controls::load(&path, Controls::new(0.0)).unwrap_err();
        assert!(matches!(err, ControlError::BadRate(_)), "{err}");
        assert!(check_rate(f64::NAN).is_err() && check_rate(0.0).is_ok());
        assert!(check_rate(5e-324).is_err() && check_rate(1e300).is_err());
        assert!(check_rate(MIN_RATE).is_ok() && check_rate(MAX_RATE).is_ok());
    }
}
