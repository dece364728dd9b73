//! Recovery of WARC files a crash left open.
//!
//! Every record is its own gzip member (or zstd frame), so a file is valid
//! up to the end of its last complete member. Recovery decodes member by
//! member, cuts the file after the last one that decodes completely (a
//! zstd frame's checksum must match too), writes the CDXJ index of the
//! records kept, and renames the file to its final name. Responses lost
//! that way were never acknowledged, so their URLs are still queued and
//! are fetched again. Both `.warc.gz.open` and `.warc.zst.open` files are
//! recovered.

use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use flate2::bufread::GzDecoder;

use super::cdxj;
use crate::config::WarcCompression;

/// A file a crash left open that could not be recovered.
#[derive(Debug, thiserror::Error)]
#[error("recovering warc file {path}: {source}")]
pub struct RecoverError {
    /// The file (or directory) concerned.
    pub path: PathBuf,
    /// What failed.
    pub source: io::Error,
}

/// A `BufRead` that counts the bytes its reader consumed.
struct Counting<R> {
    inner: R,
    consumed: u64,
}

impl<R: BufRead> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.consumed += n as u64;
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Counting<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        self.inner.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        self.consumed += amt as u64;
        self.inner.consume(amt);
    }
}

/// One complete member (or frame): where it is and what it decodes to.
struct Unit {
    offset: u64,
    length: u64,
    record: Vec<u8>,
}

/// Calls `each` on every complete member (or frame) at the start of the
/// file, in order; returns the length of that complete prefix.
fn scan(path: &Path, codec: WarcCompression, mut each: impl FnMut(Unit)) -> io::Result<u64> {
    let file = std::fs::File::open(path)?;
    let total = file.metadata()?.len();
    let mut reader = Counting {
        inner: BufReader::new(file),
        consumed: 0,
    };
    let mut good = 0;
    while good < total {
        let mut record = Vec::new();
        let decoded = match codec {
            WarcCompression::Gzip => {
                io::copy(&mut GzDecoder::new(&mut reader), &mut record).map(drop)
            }
            WarcCompression::Zstd => zstd::stream::read::Decoder::with_buffer(&mut reader)
                .and_then(|d| io::copy(&mut d.single_frame(), &mut record).map(drop)),
        };
        if decoded.is_err() || reader.consumed <= good {
            break;
        }
        each(Unit {
            offset: good,
            length: reader.consumed - good,
            record,
        });
        good = reader.consumed;
    }
    Ok(good)
}

/// The codec of a WARC file, by its name.
fn codec_of(final_name: &str) -> Option<WarcCompression> {
    [WarcCompression::Gzip, WarcCompression::Zstd]
        .into_iter()
        .find(|c| final_name.ends_with(c.extension()))
}

/// Cuts the open file at `path` after its last complete record, writes
/// the index of what it kept (and, with `parquet`, its Parquet index), and
/// renames it to `final_path`; the bytes kept. A file without one
/// complete record is removed (0).
pub(super) fn recover_file(
    path: &Path,
    final_path: &Path,
    codec: WarcCompression,
    parquet: bool,
) -> io::Result<u64> {
    let file_name = final_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = final_path.parent().unwrap_or(Path::new("."));
    let mut lines = cdxj::IndexLines::new(&file_name, dir);
    let good = scan(path, codec, |unit| {
        if let Some(view) = cdxj::parse_record(&unit.record) {
            lines.push(&view, unit.offset, unit.length);
        }
    })?;
    if good == 0 {
        // Not even its warcinfo was written (a full disk, a crash at its
        // creation): nothing to keep.
        std::fs::remove_file(path)?;
        return Ok(0);
    }
    let file = OpenOptions::new().write(true).open(path)?;
    file.set_len(good)?;
    file.sync_all()?;
    let cdxj = lines.write(final_path)?;
    if parquet {
        super::parquet::write_beside(&cdxj, final_path);
    }
    std::fs::rename(path, final_path)?;
    Ok(good)
}

/// Whether `file_name` is a WARC file written with `prefix`: the prefix,
/// `-`, then the file's 14-digit timestamp (so the files of node `n1`,
/// prefix `trawl-n1`, are told apart from those of `n10`, and from those
/// of the single-node prefix `trawl`).
pub fn written_with(file_name: &str, prefix: &str) -> bool {
    let Some(rest) = file_name
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
    else {
        return false;
    };
    rest.len() > 14
        && rest.as_bytes()[..14].iter().all(u8::is_ascii_digit)
        && rest.as_bytes()[14] == b'-'
}

/// Recovers every `*.warc.gz.open` and `*.warc.zst.open` file of
/// `prefix` in `dir`: cut, indexed, renamed. Only this writer's own files
/// (on a cluster, other nodes write into the same directory, and their
/// open files are theirs). With `parquet`, each gets its Parquet index
/// too.
pub fn recover_open_files(
    dir: &Path,
    prefix: &str,
    parquet: bool,
) -> Result<Vec<String>, RecoverError> {
    let at = |path: &Path| {
        let path = path.to_owned();
        move |source| RecoverError { path, source }
    };
    let mut recovered = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(at(dir))? {
        let path = entry.map_err(at(dir))?.path();
        let name = path.to_string_lossy().into_owned();
        let Some(final_name) = name.strip_suffix(".open") else {
            continue;
        };
        let Some(codec) = codec_of(final_name) else {
            continue;
        };
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if !file_name.is_some_and(|n| written_with(&n, prefix)) {
            continue;
        }
        let good = recover_file(&path, Path::new(final_name), codec, parquet).map_err(at(&path))?;
        if good == 0 {
            tracing::warn!(file = %final_name, "removed an empty warc file left open by a crash");
            continue;
        }
        tracing::warn!(file = %final_name, bytes = good, "recovered warc file left open by a crash");
        recovered.push(final_name.to_owned());
    }
    Ok(recovered)
}
