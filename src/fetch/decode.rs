//! Bounded decoding of a body's Content-Encoding, for parsing.
//!
//! The archive keeps the body as it came (with its Content-Encoding header,
//! which replay tools honour); the parser needs the decoded bytes. Decoding
//! streams and stops at a cap on the *decoded* size, so a gzip or brotli
//! bomb (a few KB expanding to gigabytes) costs at most the cap. awc's own
//! decompression expands each network chunk whole before its limit applies,
//! which is why it is compiled out and this module used instead.

use std::borrow::Cow;
use std::io::Read;

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// A coding we do not implement.
    #[error("unsupported content-encoding {0}")]
    Unsupported(String),
    /// The compressed data is corrupt.
    #[error("corrupt {coding} body: {reason}")]
    Corrupt {
        /// The coding.
        coding: &'static str,
        /// What the decoder said.
        reason: String,
    },
}

/// A decoded body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// The decoded bytes: at most the cap when a coding was undone; the
    /// body itself (borrowed, whatever its size) when there was none.
    pub bytes: Cow<'a, [u8]>,
    /// The decoded body was longer than the cap.
    pub truncated: bool,
}

/// Decodes `body` per its Content-Encoding header (a comma-separated list,
/// applied in order) into at most `cap` bytes. A body without a coding
/// (none given, or `identity`) is returned as it is, not cut at `cap`: the
/// cap bounds what decompression makes of a body, and the fetch's own
/// body cap already bounds the body.
pub fn decode_body<'a>(
    body: &'a [u8],
    content_encoding: Option<&str>,
    cap: usize,
) -> Result<Decoded<'a>, DecodeError> {
    let codings: Vec<String> = content_encoding
        .unwrap_or("")
        .split(',')
        .map(|c| c.trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty() && c != "identity")
        .collect();
    let mut current = Decoded {
        bytes: Cow::Borrowed(body),
        truncated: false,
    };
    // Codings were applied in order, so they are undone in reverse.
    for coding in codings.iter().rev() {
        let (bytes, truncated) = decode_one(&current.bytes, coding, cap)?;
        current = Decoded {
            bytes: Cow::Owned(bytes),
            truncated: current.truncated || truncated,
        };
    }
    Ok(current)
}

/// The content codings [`decode_body`] undoes (`identity` is none), the
/// only ones trawl may ask for (`[fetch] accept_encoding`).
pub const CODINGS: [&str; 6] = ["gzip", "x-gzip", "deflate", "br", "zstd", "identity"];

fn decode_one(data: &[u8], coding: &str, cap: usize) -> Result<(Vec<u8>, bool), DecodeError> {
    let corrupt = |coding: &'static str| {
        move |e: std::io::Error| DecodeError::Corrupt {
            coding,
            reason: e.to_string(),
        }
    };
    match coding {
        "gzip" | "x-gzip" => {
            read_capped(flate2::read::MultiGzDecoder::new(data), cap).map_err(corrupt("gzip"))
        }
        // "deflate" is zlib-wrapped by the RFC, raw in some servers' hands.
        "deflate" => read_capped(flate2::read::ZlibDecoder::new(data), cap)
            .or_else(|_| read_capped(flate2::read::DeflateDecoder::new(data), cap))
            .map_err(corrupt("deflate")),
        "br" if is_large_window_brotli(data) => Err(DecodeError::Corrupt {
            coding: "br",
            reason: "large-window brotli stream (not RFC 7932)".into(),
        }),
        "br" => read_capped(brotli_decompressor::Decompressor::new(data, 4096), cap)
            .map_err(corrupt("br")),
        "zstd" => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(data).map_err(|e| {
                DecodeError::Corrupt {
                    coding: "zstd",
                    reason: e.to_string(),
                }
            })?;
            read_capped(decoder, cap).map_err(corrupt("zstd"))
        }
        other => Err(DecodeError::Unsupported(other.to_owned())),
    }
}

/// Whether a brotli stream declares a large window (up to 1 GiB, an
/// extension of brotli's reference decoder): the first seven bits of the
/// stream header are `0010001` (RFC 7932 §9.1's window bits, read from the
/// lowest bit, with the value that RFC 7932 leaves unused). HTTP's `br` is
/// RFC 7932, whose windows are at most 16 MiB; `brotli_decompressor`
/// accepts large windows, and allocates the whole window for the ring
/// buffer before a byte is decoded, so six bytes of body asked for a
/// gigabyte.
fn is_large_window_brotli(data: &[u8]) -> bool {
    data.first().is_some_and(|b| b & 0x7f == 0x11)
}

/// Reads at most `cap` bytes (one more to learn whether there was more).
fn read_capped(reader: impl Read, cap: usize) -> std::io::Result<(Vec<u8>, bool)> {
    let mut out = Vec::new();
    reader.take(cap as u64 + 1).read_to_end(&mut out)?;
    let truncated = out.len() > cap;
    out.truncate(cap);
    Ok((out, truncated))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(data).unwrap();
        enc.finish().unwrap()
    }

    /// Found by the `decode` fuzz target: six bytes of `br` body
    /// declaring a large window made the decoder allocate a 1 GiB ring
    /// buffer at once (a process abort where the allocation fails).
    #[test]
    fn a_large_window_brotli_stream_is_refused_before_allocating() {
        let body = [0x11, 0x9d, 0x4a, 0x8b, 0x9f, 0x06];
        match decode_body(&body, Some("br"), 384) {
            Err(DecodeError::Corrupt { coding, reason }) => {
                assert_eq!(coding, "br");
                assert!(reason.contains("large-window"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        // An ordinary stream still decodes (its header is no marker).
        let mut out = Vec::new();
        {
            let mut enc = brotli::CompressorWriter::new(&mut out, 4096, 5, 24);
            enc.write_all(b"<a href=x>").unwrap();
        }
        assert!(!is_large_window_brotli(&out));
        assert_eq!(
            decode_body(&out, Some("br"), 100).unwrap().bytes.as_ref(),
            b"<a href=x>"
        );
    }

    #[test]
    fn identity_and_known_codings() {
        let d = decode_body(b"plain", None, 100).unwrap();
        assert_eq!(d.bytes.as_ref(), b"plain");
        assert!(matches!(d.bytes, Cow::Borrowed(_)));
        let gz = gzip(b"<a href=x>");
        let d = decode_body(&gz, Some("gzip"), 100).unwrap();
        assert_eq!(d.bytes.as_ref(), b"<a href=x>");
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        z.write_all(b"zlib").unwrap();
        assert_eq!(
            decode_body(&z.finish().unwrap(), Some("deflate"), 100)
                .unwrap()
                .bytes
                .as_ref(),
            b"zlib"
        );
        let mut raw = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
        raw.write_all(b"raw").unwrap();
        assert_eq!(
            decode_body(&raw.finish().unwrap(), Some("deflate"), 100)
                .unwrap()
                .bytes
                .as_ref(),
            b"raw"
        );
        // gzip applied twice, listed in order.
        let twice = gzip(&gzip(b"twice"));
        assert_eq!(
            decode_body(&twice, Some("gzip, gzip"), 100)
                .unwrap()
                .bytes
                .as_ref(),
            b"twice"
        );
        // A brotli stream of "hello" (from the reference encoder).
        let br: &[u8] = &[0x0b, 0x02, 0x80, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x03];
        assert_eq!(
            decode_body(br, Some("br"), 100).unwrap().bytes.as_ref(),
            b"hello"
        );
    }

    #[test]
    fn bombs_stop_at_the_cap() {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&vec![0u8; 50 << 20]).unwrap();
        let bomb = enc.finish().unwrap();
        assert!(bomb.len() < 200 << 10, "{}", bomb.len());
        let d = decode_body(&bomb, Some("gzip"), 1 << 20).unwrap();
        assert_eq!(d.bytes.len(), 1 << 20);
        assert!(d.truncated);
    }

    #[test]
    fn corrupt_and_unknown_codings_are_typed_errors() {
        assert!(matches!(
            decode_body(b"not gzip at all", Some("gzip"), 100),
            Err(DecodeError::Corrupt { coding: "gzip", .. })
        ));
        assert!(matches!(
            decode_body(b"x", Some("compress"), 100),
            Err(DecodeError::Unsupported(_))
        ));
        assert!(decode_body(b"\x28\xb5\x2f\xfd garbage", Some("zstd"), 100).is_err());
    }

    #[test]
    fn every_coding_listed_is_decoded() {
        for coding in CODINGS.iter().filter(|c| **c != "identity") {
            let err = decode_one(b"", coding, 10).err();
            assert!(
                !matches!(err, Some(DecodeError::Unsupported(_))),
                "{coding} is listed but not decoded"
            );
        }
        assert!(matches!(
            decode_one(b"", "compress", 10),
            Err(DecodeError::Unsupported(_))
        ));
    }
}
