//! WARC 1.1 writer: one gzip member (or zstd frame) per record, rotation,
//! crash recovery, a CDXJ index beside each closed file.
//!
//! Why our own writer: the `warc` crate writes lower-case header names in a
//! random order, computes no digests and may write partially. This writer
//! emits canonical header names in one stable order, SHA-256 block and
//! payload digests (base32, as warcio and pywb verify them), and gzips every
//! record as its own member so each record has a byte offset that
//! `(file, offset, length)` can point to.
//!
//! A file is written as `NAME.warc.gz.open` and renamed to `NAME.warc.gz`
//! when closed, so readers never pick up a file being written. Just before
//! the rename, its CDXJ index (`NAME.warc.gz.cdxj`, see [`cdxj`]) is
//! written from what the writer knew of each record. A file left `.open`
//! by a crash is recovered on the next start: cut after its last complete
//! record, indexed and renamed.
//!
//! With `[warc] compression = "zstd"` each record is one zstd frame (with
//! content size and checksum) in `NAME.warc.zst`, as the IIPC proposal for
//! zstd WARC files describes, without a dictionary frame: a dictionary
//! would have to be trained on records before the file's first one is
//! written, and files without one can be concatenated.

pub mod cdxj;
mod compress;
pub mod parquet;
mod record;
mod recover;
pub mod surt;

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use compress::MemberCompressor;
pub use compress::STORE_BELOW_MAX;
pub use record::{payload_sha256, warc_date, Exchange, Record};
pub use recover::{recover_open_files, RecoverError};

use crate::config::WarcCompression;

/// Where a record landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WarcRef {
    /// File name (final, without `.open`), relative to the WARC directory.
    pub file: String,
    /// Byte offset of the record's gzip member (or zstd frame).
    pub offset: u64,
    /// Compressed length of the member (or frame).
    pub length: u64,
}

/// The open file's bytes that a seal made durable ([`WarcWriter::seal`]):
/// `0..to` of `file`, ending where a record ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    /// The open file's final name (without `.open`).
    pub file: String,
    /// The end of its last complete record, flushed and fsynced.
    pub to: u64,
}

/// Where an exchange was archived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// The response (or revisit) record's location.
    pub at: WarcRef,
    /// SHA-256 of the payload.
    pub payload_sha256: [u8; 32],
    /// The response (or revisit) record's WARC-Record-ID.
    pub record_id: String,
}

/// Errors of WARC writing.
#[derive(Debug, thiserror::Error)]
pub enum WarcError {
    /// A file operation failed.
    #[error("warc file {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file a crash left open could not be recovered.
    #[error(transparent)]
    Recover(#[from] RecoverError),
}

/// Settings of a [`WarcWriter`].
#[derive(Debug, Clone)]
pub struct WarcSettings {
    /// Output directory.
    pub dir: PathBuf,
    /// File name prefix.
    pub prefix: String,
    /// Rotate once a file reaches this many bytes.
    pub max_file_bytes: u64,
    /// gzip member or zstd frame per record.
    pub compression: WarcCompression,
    /// gzip level 0–9, zstd level 1–19.
    pub compression_level: u32,
    /// gzip records of fewer bytes are stored uncompressed (0: none).
    pub store_below: usize,
    /// Lines of the warcinfo record (`software`, `http-header-user-agent`, ...).
    pub info: Vec<(String, String)>,
    /// Write a Parquet index beside each closed file's CDXJ index
    /// ([`parquet`]).
    pub parquet_index: bool,
}

struct OpenFile {
    name: String,
    open_path: PathBuf,
    out: BufWriter<File>,
    offset: u64,
    /// Offset after the warcinfo record.
    info_end: u64,
    /// CDXJ lines of the records written so far, for the index written
    /// when the file closes.
    index: cdxj::IndexLines,
    /// A second handle on the file, for a thread that fsyncs it while
    /// records are appended (see [`WarcWriter::sync_handle`]).
    sync_handle: Option<Arc<File>>,
    /// Writing to disk started as the file grows, so closing it does not
    /// wait for all of it.
    writeback: crate::durable::Writeback,
}

/// Writes records to rotating `.warc.gz` (or `.warc.zst`) files.
pub struct WarcWriter {
    settings: WarcSettings,
    current: Option<OpenFile>,
    /// Distinguishes files of one run; the run id distinguishes runs.
    serial: u32,
    run_id: String,
    /// Closed files, in order.
    closed: Vec<String>,
    /// Files whose close failed (a full disk): left `.open`, finished
    /// like a crash's files at the next seal ([`WarcWriter::seal`]), which
    /// fails while one is left, so no checkpoint covers pages whose records
    /// are in a file object storage never got.
    unfinished: Vec<String>,
    /// Records written (all types).
    records: u64,
    /// Compressed bytes written.
    bytes: u64,
    /// fsync the directory when a file is created or renamed in it, so
    /// the file's name survives a power loss, not only its bytes.
    sync_dir: bool,
    /// Kept from record to record (see [`compress`]).
    compressor: MemberCompressor,
}

impl WarcWriter {
    /// A writer into `settings.dir`, recovering files a crash left open.
    pub fn new(settings: WarcSettings) -> Result<Self, WarcError> {
        let io = |source| WarcError::Io {
            path: settings.dir.clone(),
            source,
        };
        std::fs::create_dir_all(&settings.dir).map_err(io)?;
        recover_open_files(&settings.dir, &settings.prefix, settings.parquet_index)?;
        let run_id = uuid::Uuid::new_v4().simple().to_string()[..8].to_owned();
        let compressor = MemberCompressor::new(
            settings.compression,
            settings.compression_level,
            settings.store_below,
        );
        Ok(WarcWriter {
            settings,
            compressor,
            current: None,
            serial: 0,
            run_id,
            closed: Vec::new(),
            unfinished: Vec::new(),
            records: 0,
            bytes: 0,
            sync_dir: false,
        })
    }

    /// With `on`, creating or renaming a file fsyncs the directory too
    /// (`[storage] sync_writes`): a record made durable by syncing its
    /// file is then also found after a power loss.
    pub fn sync_directory(&mut self, on: bool) {
        self.sync_dir = on;
    }

    /// A handle on the current file (`None` before the first record),
    /// for syncing its bytes from another thread while this writer
    /// appends: [`crate::durable`]. A rotation closes (and fsyncs) the
    /// file; its handle stays valid.
    pub fn sync_handle(&mut self) -> Result<Option<Arc<File>>, WarcError> {
        let Some(file) = &mut self.current else {
            return Ok(None);
        };
        if file.sync_handle.is_none() {
            let handle = file
                .out
                .get_ref()
                .try_clone()
                .map_err(|source| WarcError::Io {
                    path: file.open_path.clone(),
                    source,
                })?;
            file.sync_handle = Some(Arc::new(handle));
        }
        Ok(file.sync_handle.clone())
    }

    /// fsyncs the WARC directory, if asked to ([`WarcWriter::sync_directory`]).
    fn sync_dir_entries(&self) -> Result<(), WarcError> {
        if !self.sync_dir {
            return Ok(());
        }
        crate::durable::sync_dir(&self.settings.dir).map_err(|source| WarcError::Io {
            path: self.settings.dir.clone(),
            source,
        })
    }

    /// Writes the response and request records of one exchange.
    pub fn write_exchange(&mut self, exchange: &Exchange<'_>) -> Result<Stored, WarcError> {
        let sha = record::payload_sha256(exchange.payload);
        self.write_digested(exchange, sha)
    }

    /// [`WarcWriter::write_exchange`] for a payload whose SHA-256 is known.
    pub fn write_digested(
        &mut self,
        exchange: &Exchange<'_>,
        payload_sha256: [u8; 32],
    ) -> Result<Stored, WarcError> {
        let (response, request) = record::exchange_records(exchange, &payload_sha256);
        self.write_pair(&response, &request, payload_sha256, exchange.languages)
    }

    /// Writes a revisit record (and the request record) for an exchange
    /// whose payload is stored in `original`.
    pub fn write_revisit(
        &mut self,
        exchange: &Exchange<'_>,
        payload_sha256: [u8; 32],
        original: &crate::dedup::Original,
    ) -> Result<Stored, WarcError> {
        let profile = record::IDENTICAL_PAYLOAD_PROFILE;
        self.write_revisit_as(profile, exchange, payload_sha256, original)
    }

    /// Writes a `server-not-modified` revisit record (and the request
    /// record) for a 304 that confirmed the copy in `original`, whose
    /// payload digest is `payload_sha256`: the record says where the
    /// current content is, and carries that content's digest.
    pub fn write_not_modified(
        &mut self,
        exchange: &Exchange<'_>,
        payload_sha256: [u8; 32],
        original: &crate::dedup::Original,
    ) -> Result<Stored, WarcError> {
        let profile = record::SERVER_NOT_MODIFIED_PROFILE;
        self.write_revisit_as(profile, exchange, payload_sha256, original)
    }

    /// Writes a revisit record of `profile` and its request record.
    fn write_revisit_as(
        &mut self,
        profile: &str,
        exchange: &Exchange<'_>,
        payload_sha256: [u8; 32],
        original: &crate::dedup::Original,
    ) -> Result<Stored, WarcError> {
        let (revisit, request) =
            record::revisit_records(exchange, &payload_sha256, original, profile);
        self.write_pair(&revisit, &request, payload_sha256, None)
    }

    /// Writes a record and its request record to one file; `languages`
    /// goes to the first one's index line.
    fn write_pair(
        &mut self,
        first: &Record<'_>,
        request: &Record<'_>,
        payload_sha256: [u8; 32],
        languages: Option<&str>,
    ) -> Result<Stored, WarcError> {
        let record_id = first.header("WARC-Record-ID").unwrap_or("").to_owned();
        let first_bytes = self.compress(first);
        let request_bytes = self.compress(request);
        // Both records of an exchange go to the same file.
        self.file_for((first_bytes.len() + request_bytes.len()) as u64)?;
        let at = self.write_member(&first_bytes, first, languages)?;
        self.write_member(&request_bytes, request, None)?;
        Ok(Stored {
            at,
            payload_sha256,
            record_id,
        })
    }

    /// Writes a `metadata` record ([`Record::metadata`]) about the record
    /// `concurrent_to` of `target_uri`.
    pub fn write_metadata(
        &mut self,
        target_uri: &str,
        date: chrono::DateTime<chrono::Utc>,
        concurrent_to: &str,
        fields: &[(&str, String)],
    ) -> Result<WarcRef, WarcError> {
        self.write_record(&Record::metadata(target_uri, date, concurrent_to, fields))
    }

    /// Writes one record as its own gzip member (or zstd frame).
    pub fn write_record(&mut self, record: &Record<'_>) -> Result<WarcRef, WarcError> {
        let member = self.compress(record);
        self.file_for(member.len() as u64)?;
        self.write_member(&member, record, None)
    }

    /// `record` compressed as the settings say.
    fn compress(&mut self, record: &Record<'_>) -> Vec<u8> {
        self.compressor.member(record)
    }

    /// Appends `record`, compressed as `member`, to the current file
    /// (opened by `file_for`), and its line to the file's index.
    /// Appends one compressed record (`member`) and indexes it, with
    /// `languages` in its index line.
    fn write_member(
        &mut self,
        member: &[u8],
        record: &Record<'_>,
        languages: Option<&str>,
    ) -> Result<WarcRef, WarcError> {
        let file = self.current.as_mut().expect("file_for opened a file");
        let at = WarcRef {
            file: file.name.clone(),
            offset: file.offset,
            length: member.len() as u64,
        };
        file.out.write_all(member).map_err(|source| WarcError::Io {
            path: file.open_path.clone(),
            source,
        })?;
        file.offset += member.len() as u64;
        let handed_over = file.offset - file.out.buffer().len() as u64;
        file.writeback.advance(file.out.get_ref(), handed_over);
        let view = cdxj::RecordView {
            languages,
            ..cdxj::RecordView::from(record)
        };
        file.index.push(&view, at.offset, at.length);
        self.records += 1;
        self.bytes += member.len() as u64;
        Ok(at)
    }

    /// Pushes buffered bytes to the OS, so a process crash loses nothing
    /// acknowledged.
    pub fn flush(&mut self) -> Result<(), WarcError> {
        if let Some(file) = &mut self.current {
            file.out.flush().map_err(|source| WarcError::Io {
                path: file.open_path.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// Closes the current file: flush, fsync, write its index, rename it
    /// to its final name. The index is in place before the file is: a
    /// crash in between leaves an `.open` file, which recovery indexes
    /// again.
    ///
    /// The index is written (and synced) while the file's fsync waits on
    /// the disk, on a thread of its own: one after the other, the index's
    /// lines and its own fsync came after the file's whole wait (~40 ms
    /// of the side-by-side bench's stop).
    pub fn close(&mut self) -> Result<(), WarcError> {
        let Some(file) = self.current.take() else {
            return Ok(());
        };
        let name = file.name.clone();
        let closed = self.close_file(file);
        if closed.is_err() {
            self.unfinished.push(name);
        }
        closed
    }

    /// [`WarcWriter::close`] of `file`.
    fn close_file(&mut self, file: OpenFile) -> Result<(), WarcError> {
        let final_path = self.settings.dir.join(&file.name);
        let io = |source| WarcError::Io {
            path: file.open_path.clone(),
            source,
        };
        let inner = file.out.into_inner().map_err(|e| io(e.into_error()))?;
        let parquet = self.settings.parquet_index;
        let (synced, indexed) = std::thread::scope(|scope| {
            let synced = scope.spawn(|| inner.sync_all());
            let indexed = file.index.write(&final_path).inspect(|cdxj| {
                if parquet {
                    parquet::write_beside(cdxj, &final_path);
                }
            });
            let synced = synced
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (synced, indexed)
        });
        synced.map_err(io)?;
        indexed.map_err(|source| WarcError::Io {
            path: cdxj::index_path(&final_path),
            source,
        })?;
        std::fs::rename(&file.open_path, &final_path).map_err(io)?;
        self.closed.push(file.name);
        self.sync_dir_entries()
    }

    /// Makes the records written so far durable on this disk and says
    /// where they are: files whose close failed are finished first (and
    /// counted closed); the open file, if it holds a record beyond its
    /// warcinfo, is flushed and fsynced and stays open. A checkpoint seals
    /// the archive so that `[upload]` can put the records of the pages it
    /// covers in object storage before it is published: the closed files
    /// whole, the open one as the segment of bytes up to [`Sealed::to`]
    /// (see `crate::upload::segments`). The file is not closed, so files
    /// still grow to `max_file_bytes` however often checkpoints come.
    ///
    /// Fails while a file whose close failed cannot be finished (the disk
    /// is still full), so no checkpoint covers pages whose records could
    /// not reach object storage.
    pub fn seal(&mut self) -> Result<Option<Sealed>, WarcError> {
        self.finish_unfinished()?;
        let Some(file) = self.current.as_mut().filter(|f| f.offset > f.info_end) else {
            return Ok(None);
        };
        let io = |source| WarcError::Io {
            path: file.open_path.clone(),
            source,
        };
        file.out.flush().map_err(io)?;
        file.out.get_ref().sync_data().map_err(io)?;
        Ok(Some(Sealed {
            file: file.name.clone(),
            to: file.offset,
        }))
    }

    /// Finishes the files whose close failed, as recovery finishes a
    /// crash's: cut after the last complete record, indexed, renamed, and
    /// counted closed (so uploaded). Fails while one cannot be finished
    /// (the disk is still full).
    fn finish_unfinished(&mut self) -> Result<(), WarcError> {
        while let Some(name) = self.unfinished.first().cloned() {
            let open_path = self.settings.dir.join(format!("{name}.open"));
            let final_path = self.settings.dir.join(&name);
            let codec = self.settings.compression;
            let parquet = self.settings.parquet_index;
            let kept = recover::recover_file(&open_path, &final_path, codec, parquet).map_err(
                |source| WarcError::Io {
                    path: open_path,
                    source,
                },
            )?;
            self.unfinished.remove(0);
            if kept == 0 {
                tracing::warn!(file = %name, "removed a WARC file whose creation failed");
                continue;
            }
            tracing::warn!(file = %name, "finished a WARC file whose close had failed");
            self.closed.push(name);
        }
        Ok(())
    }

    /// Files closed so far by this writer.
    pub fn closed_files(&self) -> &[String] {
        &self.closed
    }

    /// Records written by this writer.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Compressed bytes written by this writer.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Makes sure a file with room for `next_len` more bytes is open. A file
    /// holding only its warcinfo takes any record, however large.
    fn file_for(&mut self, next_len: u64) -> Result<(), WarcError> {
        let full = self.current.as_ref().is_some_and(|f| {
            f.offset > f.info_end && f.offset + next_len > self.settings.max_file_bytes
        });
        if full {
            self.close()?;
        }
        if self.current.is_none() {
            self.open_next()?;
        }
        Ok(())
    }

    fn open_next(&mut self) -> Result<(), WarcError> {
        let stamp = chrono::Utc::now().format("%Y%m%d%H%M%S");
        let name = format!(
            "{}-{}-{:05}-{}{}",
            self.settings.prefix,
            stamp,
            self.serial,
            self.run_id,
            self.settings.compression.extension()
        );
        self.serial += 1;
        let open_path = self.settings.dir.join(format!("{name}.open"));
        let file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&open_path)
            .map_err(|source| WarcError::Io {
                path: open_path.clone(),
                source,
            })?;
        self.current = Some(OpenFile {
            name: name.clone(),
            open_path,
            out: BufWriter::with_capacity(256 * 1024, file),
            offset: 0,
            info_end: 0,
            index: cdxj::IndexLines::new(&name, &self.settings.dir),
            sync_handle: None,
            writeback: crate::durable::Writeback::default(),
        });
        self.sync_dir_entries()?;
        let info = Record::warcinfo(&name, &self.settings.info);
        let member = self.compress(&info);
        let at = self.write_member(&member, &info, None)?;
        if let Some(file) = &mut self.current {
            file.info_end = at.offset + at.length;
        }
        Ok(())
    }
}

impl Drop for WarcWriter {
    fn drop(&mut self) {
        if let Err(err) = self.close() {
            tracing::error!(error = %err, "closing warc file on drop failed");
        }
    }
}

/// Lists finished `.warc.gz` and `.warc.zst` files in `dir`, sorted.
pub fn list_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".warc.gz") || name.ends_with(".warc.zst")
        })
        .collect();
    files.sort();
    Ok(files)
}

#[cfg(test)]
mod tests;
