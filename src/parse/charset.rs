//! Which encoding an HTML body is in, and its text.
//!
//! The order browsers use (WHATWG "encoding sniffing", simplified): a byte
//! order mark wins; then the `charset` of the Content-Type header; then a
//! `<meta charset>` or `<meta http-equiv="Content-Type">` in the first
//! 1024 bytes; else UTF-8 (the web's overwhelming majority today, where
//! WHATWG would guess windows-1252). Labels are resolved by `encoding_rs`
//! (so `latin1` means windows-1252, as in browsers). Invalid bytes become
//! U+FFFD: a mislabelled page never fails, its links still resolve.

use std::borrow::Cow;

use encoding_rs::{Encoding, UTF_8};

/// Bytes of the body searched for a `<meta>` charset.
const PRESCAN: usize = 1024;

/// The encoding named by a Content-Type header's `charset` parameter.
fn from_content_type(content_type: &str) -> Option<&'static Encoding> {
    content_type.split(';').skip(1).find_map(|param| {
        let (name, value) = param.split_once('=')?;
        if !name.trim().eq_ignore_ascii_case("charset") {
            return None;
        }
        Encoding::for_label(value.trim().trim_matches(['"', '\'']).as_bytes())
    })
}

/// The encoding a `<meta>` in the first bytes declares.
fn from_meta(body: &[u8]) -> Option<&'static Encoding> {
    let head = &body[..body.len().min(PRESCAN)];
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut at = 0;
    while let Some(pos) = find(&lower[at..], b"charset") {
        let rest = &lower[at + pos + 7..];
        at += pos + 7;
        let rest = trim_start(rest);
        let Some(rest) = rest.strip_prefix(b"=") else {
            continue;
        };
        let rest = trim_start(rest);
        let rest = rest
            .strip_prefix(b"\"")
            .or_else(|| rest.strip_prefix(b"'"))
            .unwrap_or(rest);
        let end = rest
            .iter()
            .position(|b| matches!(b, b'"' | b'\'' | b';' | b'>' | b' ' | b'/'))
            .unwrap_or(rest.len());
        if let Some(enc) = Encoding::for_label(&rest[..end]) {
            // A page cannot declare itself UTF-16 in ASCII: browsers read
            // that as UTF-8.
            return Some(
                if enc == encoding_rs::UTF_16LE || enc == encoding_rs::UTF_16BE {
                    UTF_8
                } else {
                    enc
                },
            );
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn trim_start(b: &[u8]) -> &[u8] {
    let n = b.iter().take_while(|c| c.is_ascii_whitespace()).count();
    &b[n..]
}

/// Decodes an HTML body; returns the text and the encoding used.
pub fn decode_html<'a>(
    body: &'a [u8],
    content_type: Option<&str>,
) -> (Cow<'a, str>, &'static Encoding) {
    if let Some((enc, bom_len)) = Encoding::for_bom(body) {
        let (text, _) = enc.decode_without_bom_handling(&body[bom_len..]);
        return (text, enc);
    }
    let enc = content_type
        .and_then(from_content_type)
        .or_else(|| from_meta(body))
        .unwrap_or(UTF_8);
    let (text, _) = enc.decode_without_bom_handling(body);
    (text, enc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bom_then_header_then_meta_then_utf8() {
        let (text, enc) = decode_html(b"\xff\xfeh\x00i\x00", Some("text/html; charset=iso-8859-1"));
        assert_eq!((text.as_ref(), enc.name()), ("hi", "UTF-16LE"));
        let (text, enc) = decode_html(b"caf\xe9", Some("text/html; charset=\"ISO-8859-1\""));
        assert_eq!((text.as_ref(), enc.name()), ("café", "windows-1252"));
        let page = b"<html><head><meta charset='windows-1251'></head><body>\xcf\xf0\xe8</body>";
        let (text, enc) = decode_html(page, Some("text/html"));
        assert_eq!(enc.name(), "windows-1251");
        assert!(text.contains("При"));
        let page = b"<meta http-equiv=\"Content-Type\" content=\"text/html; charset=koi8-r\">";
        assert_eq!(decode_html(page, None).1.name(), "KOI8-R");
        assert_eq!(decode_html(b"<p>plain</p>", None).1, UTF_8);
    }

    #[test]
    fn invalid_and_mislabelled_bytes_never_fail() {
        let (text, _) = decode_html(
            b"<a href=/x>\xff\xfe\xfd</a>",
            Some("text/html; charset=utf-8"),
        );
        assert!(text.contains('\u{fffd}'));
        assert!(text.contains("href=/x"));
        let (text, enc) = decode_html(b"<meta charset=utf-16>ok", None);
        assert_eq!((text.as_ref(), enc), ("<meta charset=utf-16>ok", UTF_8));
        assert_eq!(decode_html(b"<meta charset=nonsense>", None).1, UTF_8);
        assert_eq!(decode_html(b"", Some("text/html; charset=")).1, UTF_8);
    }
}
