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
//!   pointing at the earlier copy by `WARC-Refers-To-Target-URI` and
//!   `WARC-Refers-To-Date`, not stored again. A CDXJ index names no record
//!   ID, so `WARC-Refers-To` is left out (it is optional; replay tools
//!   find the copy by URI and date). The first copy registered for a
//!   digest stays: a crawl resumed with the same `[previous]` registers
//!   nothing new.
//! - **The recrawl's start.** Its page captures (`http(s)`, status 2xx
//!   or 3xx, revisits included; not robots.txt) are this crawl's seeds
//!   ([`Capture::is_page`]), offered after the registrations: the crawl
//!   starts from what the earlier one fetched, and its own discoveries
//!   come on top. They are admitted as seeds are (scope, budgets and the
//!   URL-seen set apply: a URL captured several times is queued once).
//!
//! Digests of other algorithms (pywb's indexer writes SHA-1 for WARCs
//! that carry one) cannot be compared with trawl's SHA-256: their lines
//! are counted as skipped, and their URLs are still offered.

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
