//! Sitemaps (sitemaps.org): urlset, sitemapindex and plain-text files,
//! gzip or not, read by a streaming XML reader so a 50 MB file never
//! becomes a DOM.
//!
//! Limits per file (the protocol's own): at most `max_urls` entries and
//! `max_bytes` uncompressed bytes are read; the rest is dropped and counted.
//! Malformed XML ends the reading at the error; entries read before it are
//! kept. Which entries a crawl may use (same host, or the host that
//! submitted the sitemap in its robots.txt) is decided by the caller.

use std::io::Read;

use chrono::{DateTime, NaiveDate, Utc};
use quick_xml::events::Event;
use quick_xml::Reader;
use url::Url;

use crate::frontier::Priority;

/// Per-file limits.
#[derive(Debug, Clone, Copy)]
pub struct SitemapLimits {
    /// Entries read per file.
    pub max_urls: usize,
    /// Uncompressed bytes read per file.
    pub max_bytes: usize,
}

/// What kind of file it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SitemapKind {
    /// `<urlset>`: page URLs.
    UrlSet,
    /// `<sitemapindex>`: more sitemaps.
    Index,
    /// One URL per line.
    Text,
    /// Neither: nothing usable.
    Unknown,
}

/// One `<url>` or `<sitemap>` entry (or text line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitemapEntry {
    /// `<loc>`.
    pub loc: String,
    /// `<lastmod>`, when present and valid.
    pub lastmod: Option<DateTime<Utc>>,
}

/// A read sitemap file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedSitemap {
    /// The file's kind.
    pub kind: SitemapKind,
    /// Entries in file order (pages for urlsets and text, sitemaps for
    /// indexes).
    pub entries: Vec<SitemapEntry>,
    /// Entries dropped over `max_urls`.
    pub dropped: usize,
    /// The file was longer than `max_bytes` (uncompressed).
    pub truncated: bool,
    /// Why reading stopped early, if it did.
    pub error: Option<String>,
}

/// Reads a sitemap response's body: its Content-Encoding undone first
/// (bounded by `limits.max_bytes`: trawl asks for gzip, br and zstd), then
/// [`parse_sitemap`] (a `.xml.gz` file sent as such is still gzip after
/// that, and detected by its magic bytes). A body its coding does not
/// describe (a plain file labelled gzip, a corrupt stream) is read as it
/// came, as before trawl asked for codings.
pub fn read_sitemap(
    body: &[u8],
    content_encoding: Option<&str>,
    limits: SitemapLimits,
) -> ParsedSitemap {
    match crate::fetch::decode::decode_body(body, content_encoding, limits.max_bytes) {
        Ok(decoded) => {
            let mut parsed = parse_sitemap(&decoded.bytes, limits);
            parsed.truncated |= decoded.truncated;
            parsed
        }
        Err(_) => parse_sitemap(body, limits),
    }
}

/// Reads a sitemap body (gzip is detected by its magic bytes).
pub fn parse_sitemap(body: &[u8], limits: SitemapLimits) -> ParsedSitemap {
    let (bytes, truncated, gzip_error) = decompress(body, limits.max_bytes);
    let text_start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let content = bytes[text_start..]
        .strip_prefix("\u{feff}".as_bytes())
        .unwrap_or(&bytes[text_start..]);
    let mut parsed = if content.first() == Some(&b'<') {
        parse_xml(content, limits.max_urls)
    } else {
        parse_text(content, limits.max_urls)
    };
    parsed.truncated = truncated;
    if parsed.error.is_none() {
        parsed.error = gzip_error;
    }
    parsed
}

/// Decompresses gzip bodies up to `max` bytes; plain bodies are cut there.
fn decompress(body: &[u8], max: usize) -> (Vec<u8>, bool, Option<String>) {
    if !body.starts_with(&[0x1f, 0x8b]) {
        let cut = body.len() > max;
        return (body[..body.len().min(max)].to_vec(), cut, None);
    }
    let mut out = Vec::new();
    // Read one byte past the cap to learn whether there was more.
    let mut reader = flate2::read::MultiGzDecoder::new(body).take(max as u64 + 1);
    // On error, read_to_end keeps the bytes read before it.
    let error = reader.read_to_end(&mut out).err();
    let cut = out.len() > max;
    out.truncate(max);
    (out, cut, error.map(|e| format!("gzip: {e}")))
}

fn parse_text(content: &[u8], max_urls: usize) -> ParsedSitemap {
    let text = String::from_utf8_lossy(content);
    let mut parsed = empty(SitemapKind::Text);
    for line in text.lines().map(str::trim) {
        if !(line.starts_with("http://") || line.starts_with("https://")) {
            continue;
        }
        push(&mut parsed, max_urls, line.to_owned(), None);
    }
    parsed
}

fn empty(kind: SitemapKind) -> ParsedSitemap {
    ParsedSitemap {
        kind,
        entries: Vec::new(),
        dropped: 0,
        truncated: false,
        error: None,
    }
}

fn push(parsed: &mut ParsedSitemap, max: usize, loc: String, lastmod: Option<DateTime<Utc>>) {
    if parsed.entries.len() < max {
        parsed.entries.push(SitemapEntry { loc, lastmod });
    } else {
        parsed.dropped += 1;
    }
}

/// Which text is being collected.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    None,
    Loc,
    Lastmod,
}

fn parse_xml(content: &[u8], max_urls: usize) -> ParsedSitemap {
    let mut reader = Reader::from_reader(content);
    let mut parsed = empty(SitemapKind::Unknown);
    let mut buf = Vec::new();
    let (mut in_entry, mut field) = (false, Field::None);
    let (mut loc, mut lastmod) = (String::new(), String::new());
    loop {
        let event = match reader.read_event_into(&mut buf) {
            Ok(event) => event,
            Err(err) => {
                parsed.error = Some(format!("xml at byte {}: {err}", reader.buffer_position()));
                break;
            }
        };
        match event {
            Event::Start(e) => match e.local_name().as_ref() {
                "urlset" if parsed.kind == SitemapKind::Unknown => {
                    parsed.kind = SitemapKind::UrlSet
                }
                "sitemapindex" if parsed.kind == SitemapKind::Unknown => {
                    parsed.kind = SitemapKind::Index
                }
                "url" | "sitemap" => {
                    in_entry = true;
                    loc.clear();
                    lastmod.clear();
                }
                "loc" if in_entry => field = Field::Loc,
                "lastmod" if in_entry => field = Field::Lastmod,
                _ => field = Field::None,
            },
            Event::End(e) => match e.local_name().as_ref() {
                "url" | "sitemap" if in_entry => {
                    in_entry = false;
                    let url = loc.trim();
                    if !url.is_empty() {
                        push(
                            &mut parsed,
                            max_urls,
                            url.to_owned(),
                            parse_lastmod(lastmod.trim()),
                        );
                    }
                }
                _ => field = Field::None,
            },
            Event::Text(t) => collect(field, &mut loc, &mut lastmod, &t),
            Event::CData(t) => collect(field, &mut loc, &mut lastmod, &t.into_inner()),
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref() {
                    Ok(Some(c)) => Some(c),
                    _ => match &*r {
                        "amp" => Some('&'),
                        "lt" => Some('<'),
                        "gt" => Some('>'),
                        "quot" => Some('"'),
                        "apos" => Some('\''),
                        _ => None,
                    },
                };
                if let Some(c) = resolved {
                    collect(field, &mut loc, &mut lastmod, c.encode_utf8(&mut [0; 4]));
                }
            }
            Event::Eof => break,
            _ => {}
        }
        buf.clear();
    }
    if parsed.kind == SitemapKind::Unknown && parsed.entries.is_empty() && parsed.error.is_none() {
        parsed.error = Some("neither urlset nor sitemapindex".into());
    }
    parsed
}

fn collect(field: Field, loc: &mut String, lastmod: &mut String, text: &str) {
    match field {
        Field::Loc => loc.push_str(text),
        Field::Lastmod => lastmod.push_str(text),
        Field::None => {}
    }
}

/// What a crawl takes from a read sitemap.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Pages to queue, with their priority (fresh lastmod: high) and
    /// lastmod (a refresh is due when it is newer than the last fetch).
    pub pages: Vec<(Url, Priority, Option<DateTime<Utc>>)>,
    /// Child sitemaps of an index, within the depth limit.
    pub sitemaps: Vec<Url>,
    /// Entries of another host than the sitemap's or its submitter's.
    pub dropped_host: usize,
    /// Child sitemaps beyond the index depth limit.
    pub dropped_depth: usize,
}

/// Picks the usable entries of `parsed`, read from `sitemap_url`: a
/// sitemap may list URLs of its own host, and of `submitter` (the host
/// whose robots.txt named it); an index's children count only up to
/// `max_index_depth` (`child_depth` is their depth); a page whose lastmod
/// is at or after `fresh_since` gets high priority, others low.
pub fn select_entries(
    parsed: &ParsedSitemap,
    sitemap_url: &Url,
    submitter: Option<&str>,
    child_depth: u32,
    max_index_depth: u32,
    fresh_since: DateTime<Utc>,
) -> Selection {
    let own_host = sitemap_url.host_str();
    let mut selection = Selection::default();
    for entry in &parsed.entries {
        let Ok(url) = sitemap_url.join(&entry.loc) else {
            continue;
        };
        let host = url.host_str();
        if host != own_host && host != submitter {
            selection.dropped_host += 1;
            continue;
        }
        match parsed.kind {
            SitemapKind::Index if child_depth <= max_index_depth => selection.sitemaps.push(url),
            SitemapKind::Index => selection.dropped_depth += 1,
            _ => {
                let fresh = entry.lastmod.is_some_and(|t| t >= fresh_since);
                let priority = if fresh { Priority::HIGH } else { Priority::LOW };
                selection.pages.push((url, priority, entry.lastmod));
            }
        }
    }
    selection
}

/// W3C Datetime as sitemaps use it: a full RFC 3339 time or a date.
pub fn parse_lastmod(value: &str) -> Option<DateTime<Utc>> {
    if value.is_empty() {
        return None;
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Some(t.with_timezone(&Utc));
    }
    // W3C Datetime also allows minutes without seconds ("2026-11-30T10:00+01:00").
    if let Ok(t) = DateTime::parse_from_str(value, "%Y-%m-%dT%H:%M%:z") {
        return Some(t.with_timezone(&Utc));
    }
    let date = NaiveDate::parse_from_str(value, "%Y-%m-%d").ok()?;
    Some(date.and_hms_opt(0, 0, 0)?.and_utc())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const LIMITS: SitemapLimits = SitemapLimits {
        max_urls: 50_000,
        max_bytes: 50 * 1024 * 1024,
    };

    fn locs(p: &ParsedSitemap) -> Vec<&str> {
        p.entries.iter().map(|e| e.loc.as_str()).collect()
    }

    #[test]
    fn reads_a_urlset_with_namespaces_entities_and_lastmod() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc> http://a.test/x?a=1&amp;b=2 </loc><lastmod>2026-11-01</lastmod><priority>0.8</priority></url>
  <url><loc><![CDATA[http://a.test/y]]></loc><lastmod>2026-11-02T10:30:00+01:00</lastmod></url>
  <url><lastmod>2026-11-02</lastmod></url>
  <url><loc>http://a.test/&#122;</loc><lastmod>yesterday</lastmod></url>
</urlset>"#;
        let p = parse_sitemap(xml.as_bytes(), LIMITS);
        assert_eq!(p.kind, SitemapKind::UrlSet);
        assert_eq!(
            locs(&p),
            [
                "http://a.test/x?a=1&b=2",
                "http://a.test/y",
                "http://a.test/z"
            ]
        );
        assert_eq!(
            p.entries[0].lastmod.unwrap().to_rfc3339(),
            "2026-11-01T00:00:00+00:00"
        );
        assert_eq!(
            p.entries[1].lastmod.unwrap().to_rfc3339(),
            "2026-11-02T09:30:00+00:00"
        );
        assert_eq!(p.entries[2].lastmod, None);
        assert_eq!(p.error, None);
    }

    #[test]
    fn a_content_encoded_sitemap_is_decoded_first() {
        let xml = "<urlset><url><loc>http://a.test/b</loc></url></urlset>";
        let brotli = {
            let mut out = Vec::new();
            let mut w = brotli::CompressorWriter::new(&mut out, 4096, 5, 22);
            w.write_all(xml.as_bytes()).unwrap();
            drop(w);
            out
        };
        let p = read_sitemap(&brotli, Some("br"), LIMITS);
        assert_eq!(p.kind, SitemapKind::UrlSet);
        assert_eq!(locs(&p), ["http://a.test/b"]);
        assert_eq!(p.error, None);
        // A .xml.gz file sent gzip-encoded: gzip twice, both undone.
        let gz = |bytes: &[u8]| {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(bytes).unwrap();
            gz.finish().unwrap()
        };
        let p = read_sitemap(&gz(&gz(xml.as_bytes())), Some("gzip"), LIMITS);
        assert_eq!(locs(&p), ["http://a.test/b"]);
        // Plain, no coding.
        assert_eq!(
            locs(&read_sitemap(xml.as_bytes(), None, LIMITS)),
            ["http://a.test/b"]
        );
        // A body its coding does not describe: read as it came.
        let p = read_sitemap(xml.as_bytes(), Some("gzip"), LIMITS);
        assert_eq!(locs(&p), ["http://a.test/b"]);
        // Garbage in a coding: nothing, and no panic.
        let p = read_sitemap(b"\x1f\x8bgarbage", Some("br"), LIMITS);
        assert!(p.entries.is_empty());
    }

    #[test]
    fn reads_an_index_gzip_and_text() {
        let xml = "<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\"><sitemap><loc>http://a.test/s1.xml.gz</loc></sitemap></sitemapindex>";
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(xml.as_bytes()).unwrap();
        let p = parse_sitemap(&gz.finish().unwrap(), LIMITS);
        assert_eq!(p.kind, SitemapKind::Index);
        assert_eq!(locs(&p), ["http://a.test/s1.xml.gz"]);
        let p = parse_sitemap(
            b"\xef\xbb\xbfhttp://a.test/1\n\n# no\nftp://x\r\nhttps://a.test/2\n",
            LIMITS,
        );
        assert_eq!(p.kind, SitemapKind::Text);
        assert_eq!(locs(&p), ["http://a.test/1", "https://a.test/2"]);
    }

    #[test]
    fn limits_drop_and_count() {
        let mut xml = String::from("<urlset>");
        for i in 0..10 {
            xml.push_str(&format!("<url><loc>http://a.test/{i}</loc></url>"));
        }
        xml.push_str("</urlset>");
        let p = parse_sitemap(
            xml.as_bytes(),
            SitemapLimits {
                max_urls: 4,
                max_bytes: 1 << 20,
            },
        );
        assert_eq!((p.entries.len(), p.dropped), (4, 6));
        let p = parse_sitemap(
            xml.as_bytes(),
            SitemapLimits {
                max_urls: 100,
                max_bytes: 100,
            },
        );
        assert!(p.truncated);
        assert!(p.entries.len() < 10);
        // A gzip bomb stops at the byte cap.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        gz.write_all(&vec![b' '; 10 << 20]).unwrap();
        let p = parse_sitemap(
            &gz.finish().unwrap(),
            SitemapLimits {
                max_urls: 10,
                max_bytes: 1 << 16,
            },
        );
        assert!(p.truncated);
    }

    #[test]
    fn selection_keeps_own_and_submitter_hosts_and_ranks_by_lastmod() {
        let xml = "<urlset><url><loc>/a</loc><lastmod>2026-11-29</lastmod></url>\
                   <url><loc>http://b.test/b</loc></url>\
                   <url><loc>http://evil.test/c</loc></url></urlset>";
        let parsed = parse_sitemap(xml.as_bytes(), LIMITS);
        let at = Url::parse("http://a.test/sitemap.xml").unwrap();
        let since = parse_lastmod("2026-11-23").unwrap();
        let s = select_entries(&parsed, &at, Some("b.test"), 1, 2, since);
        let pages: Vec<_> = s.pages.iter().map(|(u, p, _)| (u.as_str(), *p)).collect();
        assert_eq!(
            pages,
            [
                ("http://a.test/a", Priority::HIGH),
                ("http://b.test/b", Priority::LOW)
            ]
        );
        assert_eq!(s.dropped_host, 1);
        let index = "<sitemapindex><sitemap><loc>/s1.xml</loc></sitemap></sitemapindex>";
        let parsed = parse_sitemap(index.as_bytes(), LIMITS);
        assert_eq!(
            select_entries(&parsed, &at, None, 2, 2, since)
                .sitemaps
                .len(),
            1
        );
        assert_eq!(
            select_entries(&parsed, &at, None, 3, 2, since).dropped_depth,
            1
        );
    }

    #[test]
    fn malformed_xml_keeps_what_came_before() {
        let xml = "<urlset><url><loc>http://a.test/1</loc></url><url><loc>http://a.test/2</loc></oops></urlset>";
        let p = parse_sitemap(xml.as_bytes(), LIMITS);
        assert_eq!(locs(&p), ["http://a.test/1"]);
        assert!(p.error.is_some());
        let p = parse_sitemap(b"<html><body>not a sitemap</body></html>", LIMITS);
        assert!(p.entries.is_empty());
    }
}
