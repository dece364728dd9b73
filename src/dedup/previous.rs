//! A recurring crawl's knowledge of the crawl before it, read from that
//! crawl's CDXJ indexes (`[previous] indexes`).
//!
//! Two uses, as Heritrix's DeDuplicator and its recrawl setups make of an
//! earlier crawl:
//! - **Revisits.** Each of its captures stored in full (a 2xx `response`
//!   whose digest is SHA-256) is registered with exact dedup
//!   ([`crate::dedup::exact`]) as the copy of its payload, before this
//!   crawl fetches anything. A page fetched again with the same payload
//!   then becomes a `revisit` record (profile `identical-payload-digest`)
//!   pointing at the earlier copy by `WARC-Refers-To`,
//!   `WARC-Refers-To-Target-URI` and `WARC-Refers-To-Date`, not stored
//!   again. A CDXJ line names no record ID and dates to the second only,
//!   so the copy's record is read from its WARC file when that file is
//!   beside the index ([`exact_copy`]): its own `WARC-Record-ID` and
//!   `WARC-Date`. Without the file, the line's URI and time are all
//!   there is: `WARC-Refers-To` is left out (it is optional) and the date
//!   is the line's, to the second. The first copy registered for a digest
//!   stays: a crawl resumed with the same `[previous]` registers nothing
//!   new.
//! - **The recrawl's start.** Its page captures (`http(s)`, status 2xx
//!   or 3xx, revisits included; not robots.txt; [`Capture::is_page`])
//!   are offered after the registrations and the seeds: the crawl starts
//!   from what the earlier one fetched, and its own discoveries come on
//!   top. They are not seeds: they come at the priority below seeds and
//!   mark no domain as seeded (a seeded domain's budget is larger);
//!   scope, budgets and the URL-seen set apply (a URL captured several
//!   times is queued once).
//!
//! Digests of other algorithms (pywb's indexer writes SHA-1 for WARCs
//! that carry one) cannot be compared with trawl's SHA-256: their lines
//! are counted as skipped, and their URLs are still offered.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::store::StoredCopy;
use crate::warc::cdxj::Capture;

/// Errors finding an earlier crawl's indexes.
#[derive(Debug, thiserror::Error)]
pub enum PreviousError {
    /// A path given cannot be read.
    #[error("[previous] indexes: {path}: {source}")]
    Unreadable {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A directory given holds no CDXJ index.
    #[error("[previous] indexes: {0} holds no *.cdxj file")]
    Empty(PathBuf),
}

/// The index files `paths` name: each file as given, and each directory's
/// `*.cdxj` files, sorted by name.
pub fn index_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, PreviousError> {
    let unreadable = |path: &Path| {
        let path = path.to_owned();
        move |source| PreviousError::Unreadable { path, source }
    };
    let mut files = Vec::new();
    for path in paths {
        let meta = std::fs::metadata(path).map_err(unreadable(path))?;
        if !meta.is_dir() {
            files.push(path.clone());
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(unreadable(path))?
            .filter_map(|entry| Some(entry.ok()?.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "cdxj"))
            .collect();
        if found.is_empty() {
            return Err(PreviousError::Empty(path.clone()));
        }
        found.sort();
        files.extend(found);
    }
    Ok(files)
}

impl Capture {
    /// The copy of its payload a later fetch may point at: a 2xx response
    /// stored in full whose digest is SHA-256 (its payload digest and
    /// where it is, by URI and date).
    pub fn stored_copy(&self) -> Option<([u8; 32], StoredCopy)> {
        let full = self.status.is_some_and(|s| (200..300).contains(&s))
            && self.mime.as_deref() != Some("warc/revisit");
        if !full || !is_http(&self.url) {
            return None;
        }
        let copy = StoredCopy {
            uri: self.url.clone(),
            date: self.warc_date()?,
            record_id: String::new(),
        };
        Some((self.sha256()?, copy))
    }

    /// Whether it is a page the recrawl starts from: `http(s)`, answered
    /// 2xx or 3xx (a revisit too), not a robots.txt.
    pub fn is_page(&self) -> bool {
        let answered = self.status.is_some_and(|s| (200..400).contains(&s));
        let robots = url::Url::parse(&self.url).is_ok_and(|u| u.path() == "/robots.txt");
        answered && is_http(&self.url) && !robots
    }
}

/// Up to a chunk's worth of what a pass over an index picks from its
/// lines ([`read_chunk`]).
#[derive(Debug)]
pub struct Chunk<T> {
    /// What was picked.
    pub items: Vec<T>,
    /// Lines read.
    pub lines: u64,
    /// Lines read that gave nothing (not a capture, or not picked).
    pub skipped: u64,
    /// The lines have ended.
    pub done: bool,
}

/// Reads `lines` (an index's) until `max` captures were picked by `pick`
/// or the lines end. Blocking work (`pick` may read the WARC files, see
/// [`exact_copy`]): run it off an async executor.
pub fn read_chunk<T>(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    max: usize,
    mut pick: impl FnMut(Capture) -> Option<T>,
) -> std::io::Result<Chunk<T>> {
    let mut chunk = Chunk {
        items: Vec::new(),
        lines: 0,
        skipped: 0,
        done: false,
    };
    while chunk.items.len() < max {
        let Some(line) = lines.next() else {
            chunk.done = true;
            break;
        };
        chunk.lines += 1;
        match Capture::parse(&line?).and_then(&mut pick) {
            Some(item) => chunk.items.push(item),
            None => chunk.skipped += 1,
        }
    }
    Ok(chunk)
}

/// The most of a record read to find its header: a record's WARC header
/// is a few hundred bytes, and no more is decompressed than this.
const HEADER_BYTES: u64 = 16 * 1024;

/// The copy `capture` names, as [`Capture::stored_copy`] has it, made
/// exact from the record itself when its WARC file is in `dir` (the
/// index's directory): the record's `WARC-Record-ID` and full `WARC-Date`.
pub fn exact_copy(dir: &Path, capture: &Capture) -> Option<([u8; 32], StoredCopy)> {
    let (digest, mut copy) = capture.stored_copy()?;
    if let Some((date, record_id)) = record_identity(dir, capture) {
        copy.date = date;
        copy.record_id = record_id;
    }
    Some((digest, copy))
}

/// The `WARC-Date` and `WARC-Record-ID` of the record at `capture`'s
/// `offset` of its `filename` in `dir`; `None` when the file is not there
/// or what is there is not a record of the capture's URL (an index and
/// files that do not belong together). A `filename` that is a path, not a
/// name, is not followed.
pub fn record_identity(dir: &Path, capture: &Capture) -> Option<(String, String)> {
    let name = capture.filename.as_deref()?;
    if name.is_empty() || name.contains(['/', '\\']) || name == ".." {
        return None;
    }
    let mut file = std::fs::File::open(dir.join(name)).ok()?;
    file.seek(SeekFrom::Start(capture.offset?)).ok()?;
    let member = file.take(capture.length?);
    let mut head = Vec::new();
    // A member read only in part ends in an error once its input ends:
    // what was decompressed before is the header sought.
    let _ = match name.ends_with(".zst") {
        true => zstd::stream::read::Decoder::new(member)
            .ok()?
            .take(HEADER_BYTES)
            .read_to_end(&mut head),
        false => flate2::read::GzDecoder::new(member)
            .take(HEADER_BYTES)
            .read_to_end(&mut head),
    };
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    let text = std::str::from_utf8(&head[..end]).ok()?;
    let mut lines = text.split("\r\n");
    if !lines.next()?.starts_with("WARC/") {
        return None;
    }
    let (mut target, mut date, mut id) = (None, None, None);
    for (name, value) in lines.filter_map(|l| l.split_once(':')) {
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "warc-target-uri" => target = Some(value),
            "warc-date" => date = Some(value),
            "warc-record-id" => id = Some(value),
            _ => {}
        }
    }
    if target? != capture.url {
        return None;
    }
    Some((date?.to_owned(), id?.to_owned()))
}

fn is_http(url: &str) -> bool {
    url.starts_with("http://") || url.starts_with("https://")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(url: &str, mime: &str, status: &str, digest: &str) -> String {
        format!(
            "key 20261130154354 {{\"url\": \"{url}\", \"mime\": \"{mime}\", \"status\": \"{status}\", \"digest\": \"{digest}\", \"length\": \"10\", \"offset\": \"0\", \"filename\": \"f.warc.gz\"}}"
        )
    }

    #[test]
    fn a_full_2xx_with_a_sha256_digest_is_a_copy_and_pages_start_the_recrawl() {
        let digest = [7u8; 32];
        let b32 = format!("sha256:{}", data_encoding::BASE32.encode(&digest));
        let page = Capture::parse(&line("http://a.test/x", "text/html", "200", &b32)).unwrap();
        let (sha, copy) = page.stored_copy().unwrap();
        assert_eq!(sha, digest);
        assert_eq!(copy.uri, "http://a.test/x");
        assert_eq!(copy.date, "2026-11-30T15:43:54Z");
        assert_eq!(copy.record_id, "");
        assert!(page.is_page());
        let hex = format!("sha256:{}", data_encoding::HEXLOWER.encode(&digest));
        let hexed = Capture::parse(&line("http://a.test/x", "text/html", "200", &hex)).unwrap();
        assert_eq!(hexed.stored_copy().unwrap().0, digest);

        let revisit =
            Capture::parse(&line("http://a.test/y", "warc/revisit", "200", &b32)).unwrap();
        assert_eq!(revisit.stored_copy(), None);
        assert!(revisit.is_page());
        let moved = Capture::parse(&line("http://a.test/m", "text/html", "301", &b32)).unwrap();
        assert_eq!(moved.stored_copy(), None);
        assert!(moved.is_page());
        let sha1 =
            Capture::parse(&line("http://a.test/z", "text/html", "200", "sha1:ABCD")).unwrap();
        assert_eq!(sha1.stored_copy(), None);
        assert!(sha1.is_page());
        for not_a_page in [
            line("http://a.test/robots.txt", "text/plain", "200", &b32),
            line("http://a.test/gone", "text/html", "404", &b32),
            line("dns:a.test", "text/dns", "200", &b32),
        ] {
            assert!(
                !Capture::parse(&not_a_page).unwrap().is_page(),
                "{not_a_page}"
            );
        }
    }

    #[test]
    fn the_copy_is_made_exact_from_its_record_when_the_file_is_there() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let record = "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:abc>\r\n\
                      WARC-Date: 2026-11-30T15:43:54.123456Z\r\nWARC-Target-URI: http://a.test/x\r\n\
                      Content-Length: 0\r\n\r\n\r\n\r\n";
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(record.as_bytes()).unwrap();
        let member = gz.finish().unwrap();
        let mut file = b"something before".to_vec();
        let offset = file.len();
        file.extend(&member);
        std::fs::write(dir.path().join("f.warc.gz"), &file).unwrap();
        let digest = format!("sha256:{}", data_encoding::BASE32.encode(&[1u8; 32]));
        let at = |url: &str, name: &str, offset: usize| {
            Capture::parse(&format!(
                "key 20261130154354 {{\"url\": \"{url}\", \"mime\": \"text/html\", \"status\": \"200\", \"digest\": \"{digest}\", \"length\": \"{}\", \"offset\": \"{offset}\", \"filename\": \"{name}\"}}",
                member.len()
            ))
            .unwrap()
        };
        let (_, copy) =
            exact_copy(dir.path(), &at("http://a.test/x", "f.warc.gz", offset)).unwrap();
        assert_eq!(copy.record_id, "<urn:uuid:abc>");
        assert_eq!(copy.date, "2026-11-30T15:43:54.123456Z");
        // Not its record, not its file, not a name: the line's own copy.
        for capture in [
            at("http://a.test/other", "f.warc.gz", offset),
            at("http://a.test/x", "f.warc.gz", 0),
            at("http://a.test/x", "gone.warc.gz", offset),
            at("http://a.test/x", "../f.warc.gz", offset),
        ] {
            assert_eq!(record_identity(dir.path(), &capture), None, "{capture:?}");
            let (_, copy) = exact_copy(dir.path(), &capture).unwrap();
            assert_eq!(
                (copy.record_id.as_str(), copy.date.as_str()),
                ("", "2026-11-30T15:43:54Z")
            );
        }
    }

    #[test]
    fn an_index_is_read_a_chunk_of_picks_at_a_time() {
        let page = line("http://a.test/p", "text/html", "200", "sha1:AB");
        let gone = line("http://a.test/g", "text/html", "404", "sha1:AB");
        let text = [page.as_str(), "not a line", gone.as_str(), page.as_str()].join("\n");
        let mut lines = text.lines().map(|l| Ok(l.to_owned()));
        let pick = |c: Capture| c.is_page().then_some(c.url);
        let first = read_chunk(&mut lines, 1, pick).unwrap();
        assert_eq!(
            (first.items.len(), first.lines, first.skipped, first.done),
            (1, 1, 0, false)
        );
        let rest = read_chunk(&mut lines, 5, pick).unwrap();
        assert_eq!(
            (rest.items.len(), rest.lines, rest.skipped, rest.done),
            (1, 3, 2, true)
        );
    }

    #[test]
    fn directories_give_their_indexes_and_a_missing_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["b.warc.gz.cdxj", "a.warc.gz.cdxj", "a.warc.gz"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let single = dir.path().join("a.warc.gz");
        let files = index_files(&[dir.path().to_owned(), single.clone()]).unwrap();
        let names: Vec<_> = files
            .iter()
            .map(|p| p.file_name().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["a.warc.gz.cdxj", "b.warc.gz.cdxj", "a.warc.gz"]);
        let missing = dir.path().join("nope");
        let err = index_files(&[missing]).unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        let err = index_files(&[empty.path().to_owned()]).unwrap_err();
        assert!(matches!(err, PreviousError::Empty(_)), "{err}");
    }
}
