//! The upload manifest: what was uploaded, durably, in `uploads.jsonl`.
//!
//! Two kinds of line, each appended and fsynced:
//! `{"step":"uploaded",...}` once a file's upload is verified (before its
//! local copy may be deleted), and `{"step":"announced","file":...}` once
//! its `uploaded` event is in the events file. At start, an uploaded file
//! is not uploaded again, and an uploaded file not announced gets its
//! event then (a crash between the two lines repeats at most that event).
//! A line torn by a crash is cut off when the manifest is opened.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// One verified upload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UploadRecord {
    /// The WARC file name.
    pub file: String,
    /// The object's URL (`s3://bucket/prefix/file`).
    pub location: String,
    /// The file's size.
    pub bytes: u64,
    /// Hex SHA-256 of the file (and of the object, verified).
    pub sha256: String,
    /// RFC 3339 time the upload was verified.
    pub uploaded_at: String,
}

/// A manifest line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "lowercase")]
enum Line {
    Uploaded(UploadRecord),
    Announced { file: String },
}

/// Errors of the manifest.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Reading or writing the file failed.
    #[error("upload manifest {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A complete line does not parse.
    #[error("upload manifest {path}, line {line}: {message}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The manifest, read at open and appended to.
pub struct Manifest {
    path: PathBuf,
    out: File,
    uploaded: BTreeMap<String, UploadRecord>,
    announced: BTreeSet<String>,
}

impl Manifest {
    /// Opens (or creates) the manifest at `path`, cutting a torn last line.
    pub fn open(path: &Path) -> Result<Self, ManifestError> {
        let io = |source| ManifestError::Io {
            path: path.to_owned(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let mut out = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        crate::events::cut_torn_line(&mut out).map_err(io)?;
        let mut text = String::new();
        File::open(path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .map_err(io)?;
        let mut manifest = Manifest {
            path: path.to_owned(),
            out,
            uploaded: BTreeMap::new(),
            announced: BTreeSet::new(),
        };
        for (i, line) in text.lines().enumerate() {
            let parsed = serde_json::from_str(line).map_err(|e| ManifestError::Corrupt {
                path: path.to_owned(),
                line: i + 1,
                message: e.to_string(),
            })?;
            manifest.apply(parsed);
        }
        Ok(manifest)
    }

    fn apply(&mut self, line: Line) {
        match line {
            Line::Uploaded(record) => {
                self.uploaded.insert(record.file.clone(), record);
            }
            Line::Announced { file } => {
                self.announced.insert(file);
            }
        }
    }

    /// Appends `line` and fsyncs it.
    fn append(&mut self, line: Line) -> Result<(), ManifestError> {
        let mut text = serde_json::to_vec(&line).expect("manifest lines serialise");
        text.push(b'\n');
        self.out
            .write_all(&text)
            .and_then(|()| self.out.sync_data())
            .map_err(|source| ManifestError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.apply(line);
        Ok(())
    }

    /// Records a verified upload, durably.
    pub fn record(&mut self, record: UploadRecord) -> Result<(), ManifestError> {
        self.append(Line::Uploaded(record))
    }

    /// Records that `file`'s `uploaded` event is written.
    pub fn announced(&mut self, file: &str) -> Result<(), ManifestError> {
        self.append(Line::Announced {
            file: file.to_owned(),
        })
    }

    /// Whether `file` was uploaded.
    pub fn contains(&self, file: &str) -> bool {
        self.uploaded.contains_key(file)
    }

    /// Uploads whose event is not yet written, oldest name first.
    pub fn unannounced(&self) -> Vec<UploadRecord> {
        self.uploaded
            .values()
            .filter(|r| !self.announced.contains(&r.file))
            .cloned()
            .collect()
    }

    /// Every upload recorded.
    pub fn uploads(&self) -> impl Iterator<Item = &UploadRecord> {
        self.uploaded.values()
    }
}
