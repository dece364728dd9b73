//! Recovery of WARC files a crash left open.
//!
//! Every record is its own gzip member, so a file is valid up to the end of
//! its last complete member. Recovery decodes member by member, cuts the
//! file after the last one that decodes completely, and renames it to its
//! final name. Responses lost that way were never acknowledged, so their
//! URLs are still queued and are fetched again.

use std::fs::OpenOptions;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use flate2::bufread::GzDecoder;

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

/// The length of the longest prefix of `path` made of complete gzip members.
pub fn complete_prefix_len(path: &Path) -> io::Result<u64> {
    let file = std::fs::File::open(path)?;
    let total = file.metadata()?.len();
    let mut reader = Counting {
        inner: BufReader::new(file),
        consumed: 0,
    };
    let mut good = 0;
    while good < total {
        let mut member = GzDecoder::new(&mut reader);
        if io::copy(&mut member, &mut io::sink()).is_err() {
            break;
        }
        if reader.consumed <= good {
            break;
        }
        good = reader.consumed;
    }
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

/// Truncates and renames every `*.warc.gz.open` file of `prefix` in
/// `dir`: only this writer's own files (on a cluster, other nodes write
/// into the same directory, and their open files are theirs).
pub fn recover_open_files(dir: &Path, prefix: &str) -> io::Result<Vec<String>> {
    let mut recovered = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let name = path.to_string_lossy().into_owned();
        let Some(final_name) = name.strip_suffix(".open") else {
            continue;
        };
        if !final_name.ends_with(".warc.gz") {
            continue;
        }
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        if !file_name.is_some_and(|n| written_with(&n, prefix)) {
            continue;
        }
        let good = complete_prefix_len(&path)?;
        let file = OpenOptions::new().write(true).open(&path)?;
        file.set_len(good)?;
        file.sync_all()?;
        std::fs::rename(&path, final_name)?;
        tracing::warn!(file = %final_name, bytes = good, "recovered warc file left open by a crash");
        recovered.push(final_name.to_owned());
    }
    Ok(recovered)
}
