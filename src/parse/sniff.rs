//! What a payload is by its own bytes, not by what its server says: the
//! MIME type detected (WARC 1.1's `WARC-Identified-Payload-Type`, Common
//! Crawl's `content_mime_detected`) and the language of a page's visible
//! text (Common Crawl's `content_languages`).
//!
//! - **Type.** The first [`SNIFF_BYTES`] of the payload, its
//!   Content-Encoding undone (bounded, `fetch/decode.rs`), are matched
//!   against known signatures by the `infer` crate: images, audio, video,
//!   archives, documents, fonts, and for markup the WHATWG MIME Sniffing
//!   standard's HTML patterns (a tag such as `<html`, `<p` or `<!--`
//!   first, after white space) and XML's `<?xml`. Without a match, bytes
//!   that read as UTF-8 text (no control bytes but white space) are
//!   `text/plain` and anything else `application/octet-stream`. An empty
//!   payload, or one whose coding cannot be undone, has no detected type.
//! - **Language.** The first [`LANGUAGE_BYTES`] of a page's visible text
//!   (what its simhash is computed from) go to the `whatlang` crate's
//!   trigram detector; its answer is kept only when it calls it reliable,
//!   as the ISO 639-3 code Common Crawl uses (`eng`, `deu`). A page can be
//!   of several languages; one, the main one, is given. It costs: ~160 µs
//!   a page with this window, twice the page's parse (`cargo bench --bench
//!   micro -- parse/links_per_page`; mostly a fixed cost, 512 bytes take
//!   ~130 µs), which is why `[parse] detect_language` is off by default.

use crate::fetch::decode::decode_body;

/// Payload bytes read to detect its type.
pub const SNIFF_BYTES: usize = 4096;

/// Visible-text bytes read to detect its language.
pub const LANGUAGE_BYTES: usize = 1024;

/// The MIME type `body` (sent with `content_encoding`) is, by its bytes;
/// `None` for an empty body or a coding that cannot be undone.
pub fn payload_type(body: &[u8], content_encoding: Option<&str>) -> Option<&'static str> {
    let decoded = decode_body(body, content_encoding, SNIFF_BYTES).ok()?;
    decoded_type(&decoded.bytes)
}

/// The MIME type of a payload whose coding is undone already (`decoded`,
/// of which the first [`SNIFF_BYTES`] are read); `None` if it is empty.
pub fn decoded_type(decoded: &[u8]) -> Option<&'static str> {
    let head = &decoded[..decoded.len().min(SNIFF_BYTES)];
    if head.is_empty() {
        return None;
    }
    if let Some(kind) = infer::get(head) {
        return Some(kind.mime_type());
    }
    Some(if is_text(head) {
        "text/plain"
    } else {
        "application/octet-stream"
    })
}

/// Whether `head` reads as text: UTF-8 (a character cut at its end
/// allowed) without control bytes other than white space.
fn is_text(head: &[u8]) -> bool {
    let valid = match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none(),
    };
    valid
        && !head
            .iter()
            .any(|&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0c))
}

/// The main language of `text` (ISO 639-3), when the detector is sure of
/// it.
pub fn language(text: &str) -> Option<&'static str> {
    let mut end = text.len().min(LANGUAGE_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let info = whatlang::detect(&text[..end])?;
    info.is_reliable().then(|| info.lang().code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn types_come_from_the_bytes_whatever_the_coding() {
        let html = b"\n  <!DOCTYPE html><html><body><p>hi</p></body></html>";
        assert_eq!(payload_type(html, None), Some("text/html"));
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(html).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(payload_type(&gz, Some("gzip")), Some("text/html"));
        // Sent as gzip without saying so: what it is, is a gzip file.
        assert_eq!(payload_type(&gz, None), Some("application/gzip"));
        let png = [
            0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d,
        ];
        assert_eq!(payload_type(&png, None), Some("image/png"));
        assert_eq!(
            payload_type(b"%PDF-1.7\n...", None),
            Some("application/pdf")
        );
        assert_eq!(
            payload_type(b"<?xml version=\"1.0\"?><urlset/>", None),
            Some("text/xml")
        );
        assert_eq!(
            payload_type("plain words, é".as_bytes(), None),
            Some("text/plain")
        );
        assert_eq!(
            payload_type(&[0, 1, 2, 0xff, 0xfe, 3], None),
            Some("application/octet-stream")
        );
        assert_eq!(payload_type(b"", None), None);
        assert_eq!(payload_type(b"not gzip", Some("gzip")), None);
        assert_eq!(decoded_type(html), Some("text/html"));
        // A character cut by the sniff window is still text.
        let long = "é".repeat(SNIFF_BYTES);
        assert_eq!(payload_type(long.as_bytes(), None), Some("text/plain"));
    }

    #[test]
    fn a_language_is_given_only_when_the_detector_is_sure() {
        let english = "The quick brown fox jumps over the lazy dog while the farmer \
                       watches from the porch and the children play in the garden.";
        assert_eq!(language(english), Some("eng"));
        let german = "Der schnelle braune Fuchs springt über den faulen Hund, während \
                      der Bauer von der Veranda aus zusieht und die Kinder im Garten spielen.";
        assert_eq!(language(german), Some("deu"));
        assert_eq!(language(""), None);
        assert_eq!(language("ok"), None);
        // Only the window is read, and a window ending inside a character
        // ends before it (each `é` is two bytes from an odd offset).
        let cut = format!("a{}", "é".repeat(LANGUAGE_BYTES));
        assert!(!cut.is_char_boundary(LANGUAGE_BYTES));
        assert_eq!(language(&cut), language(&cut[..LANGUAGE_BYTES - 1]));
    }
}
