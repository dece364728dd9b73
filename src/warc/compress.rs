//! Records compressed one member (or frame) each, by a compressor that is
//! kept from record to record.
//!
//! A fresh gzip encoder per record allocated and zero-filled deflate's
//! window and hash tables (~256 KB) for every record: at ~15 KB pages that
//! was more CPU than a third of the compression itself (profile of the
//! crawl bench: memset in zlib's init, fresh pages faulted in). Here one
//! raw deflate stream is reset per record, and the gzip framing (RFC 1952:
//! a 10-byte header, the deflate data, CRC-32 and size) is written around
//! it; the record's head, block and closing CRLFs are fed in turn, so the
//! record is never copied into one buffer first. Every record is still its
//! own complete gzip member (or zstd frame), as WARC readers need.
//!
//! A record under `store_below` bytes (`[warc] store_below`, 1,024 by
//! default: a request record, a revisit, a short error page) is written
//! as a gzip member holding one *stored* deflate block (RFC 1951 §3.2.4:
//! the bytes as they are, behind a 5-byte block header). Resetting the
//! deflate stream clears its 128 KB hash table whatever the input, so on
//! a ~600-byte request record the reset cost more than the compression:
//! about 1 % of a crawl's CPU on the side-by-side bench, for ~90 bytes
//! saved a page (1.5 % of that bench's WARC bytes). Every gzip reader
//! inflates stored blocks; the member is as valid as a compressed one.
//! With `store_below = 0` every record is compressed.

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

use super::record::Record;
use crate::config::WarcCompression;

/// The gzip member header: magic, deflate, no flags, no time, XFL 0, OS
/// unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// The largest `store_below` (`[warc] store_below`): records stored whole
/// are under the 65,535 bytes one stored deflate block holds.
pub const STORE_BELOW_MAX: usize = 65_535;

/// Compresses records, one member each, reusing its state.
pub struct MemberCompressor {
    codec: WarcCompression,
    level: u32,
    /// gzip records of fewer bytes are stored whole.
    store_below: usize,
    deflate: Compress,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl MemberCompressor {
    /// A compressor for `codec` at `level` (checked by the config) that
    /// stores gzip records of fewer than `store_below` bytes (at most
    /// [`STORE_BELOW_MAX`]) uncompressed.
    pub fn new(codec: WarcCompression, level: u32, store_below: usize) -> Self {
        MemberCompressor {
            codec,
            level,
            store_below: store_below.min(STORE_BELOW_MAX),
            deflate: Compress::new(Compression::new(level), false),
            zstd: None,
        }
    }

    /// `record` as one complete gzip member or zstd frame.
    pub fn member(&mut self, record: &Record<'_>) -> Vec<u8> {
        match self.codec {
            WarcCompression::Gzip => self.gzip(record),
            WarcCompression::Zstd => self.zstd(record),
        }
    }

    fn gzip(&mut self, record: &Record<'_>) -> Vec<u8> {
        let head = record.head_bytes();
        let parts = record.parts(&head);
        let size: usize = parts.iter().map(|part| part.len()).sum();
        if size < self.store_below {
            return stored_member(&parts, size);
        }
        let mut out = Vec::with_capacity(size / 3 + 64);
        out.extend_from_slice(&GZIP_HEADER);
        self.deflate.reset();
        let mut crc = Crc::new();
        for part in parts {
            crc.update(part);
            self.deflate_all(part, &mut out, FlushCompress::None);
        }
        self.deflate_all(&[], &mut out, FlushCompress::Finish);
        gzip_trailer(&mut out, &crc);
        out
    }

    /// Feeds `input` to the deflate stream, growing `out` as needed; with
    /// `Finish`, until the stream ends.
    fn deflate_all(&mut self, mut input: &[u8], out: &mut Vec<u8>, flush: FlushCompress) {
        loop {
            if out.capacity() - out.len() < 1024 {
                out.reserve(out.capacity().max(4096));
            }
            let before = self.deflate.total_in();
            let status = self
                .deflate
                .compress_vec(input, out, flush)
                .expect("deflate into a buffer with room cannot fail");
            let read = (self.deflate.total_in() - before) as usize;
            input = &input[read..];
            let done = match flush {
                FlushCompress::Finish => status == Status::StreamEnd,
                _ => input.is_empty(),
            };
            if done {
                return;
            }
        }
    }

    fn zstd(&mut self, record: &Record<'_>) -> Vec<u8> {
        use zstd::zstd_safe::CParameter;
        let level = self.level as i32;
        let compressor = self.zstd.get_or_insert_with(|| {
            let mut c = zstd::bulk::Compressor::new(level).expect("level checked by the config");
            c.set_parameter(CParameter::ChecksumFlag(true))
                .and_then(|()| c.set_parameter(CParameter::ContentSizeFlag(true)))
                .expect("valid zstd parameters");
            c
        });
        compressor
            .compress(&record.to_bytes())
            .expect("compressing into a growable buffer cannot fail")
    }
}

/// A gzip member of `parts` (`size` bytes in all, at most [`STORE_BELOW_MAX`])
/// in one final stored deflate block: header byte `BFINAL=1, BTYPE=00`,
/// then `LEN` and its ones' complement `NLEN`, little-endian, then the
/// bytes.
fn stored_member(parts: &[&[u8]], size: usize) -> Vec<u8> {
    debug_assert!(size <= STORE_BELOW_MAX);
    let len = size as u16;
    let mut out = Vec::with_capacity(GZIP_HEADER.len() + 5 + size + 8);
    out.extend_from_slice(&GZIP_HEADER);
    out.push(0b001);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    let mut crc = Crc::new();
    for part in parts {
        crc.update(part);
        out.extend_from_slice(part);
    }
    gzip_trailer(&mut out, &crc);
    out
}

/// The gzip member's trailer: CRC-32 and size (mod 2^32) of what it holds.
fn gzip_trailer(out: &mut Vec<u8>, crc: &Crc) {
    out.extend_from_slice(&crc.sum().to_le_bytes());
    out.extend_from_slice(&crc.amount().to_le_bytes());
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn record(body: &[u8]) -> Record<'static> {
        Record {
            headers: vec![("WARC-Type", "resource".into())],
            block: body.to_vec(),
            payload: &[],
        }
    }

    #[test]
    fn each_member_is_a_complete_gzip_of_the_record_and_state_does_not_leak() {
        let mut c = MemberCompressor::new(WarcCompression::Gzip, 1, 0);
        let big: Vec<u8> = (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        let records = [
            record(b"hello"),
            record(&big),
            record(b""),
            record(b"hello"),
        ];
        let members: Vec<Vec<u8>> = records.iter().map(|r| c.member(r)).collect();
        for (r, m) in records.iter().zip(&members) {
            let mut text = Vec::new();
            flate2::read::GzDecoder::new(&m[..])
                .read_to_end(&mut text)
                .expect("a valid gzip member");
            assert_eq!(text, r.to_bytes());
        }
        // The same record after others compresses to the same bytes.
        assert_eq!(members[0], members[3]);
        // Members concatenate into one multi-member stream (a WARC file).
        let file = members.concat();
        let mut all = Vec::new();
        flate2::read::MultiGzDecoder::new(&file[..])
            .read_to_end(&mut all)
            .unwrap();
        let want: Vec<u8> = records.iter().flat_map(|r| r.to_bytes()).collect();
        assert_eq!(all, want);
    }

    /// A record of `size` bytes in all (head, block, closing CRLFs).
    fn record_of_size(size: usize) -> Record<'static> {
        let head = record(b"").head_bytes().len();
        // The head's Content-Length grows by a digit or two with the block.
        let mut block = size - head - 4;
        while record(&vec![b'a'; block]).to_bytes().len() > size {
            block -= 1;
        }
        let r = record(&vec![b'a'; block]);
        assert_eq!(r.to_bytes().len(), size, "sizes around the threshold");
        r
    }

    #[test]
    fn records_under_the_threshold_are_stored_and_the_rest_compressed() {
        const BELOW: usize = 1024;
        let mut c = MemberCompressor::new(WarcCompression::Gzip, 1, BELOW);
        let small = record_of_size(BELOW - 1);
        let member = c.member(&small);
        // Gzip header, stored block header, the bytes, CRC and size.
        assert_eq!(member.len(), 10 + 5 + (BELOW - 1) + 8);
        assert_eq!(member[10], 0b001, "one final stored block");
        let at_threshold = record_of_size(BELOW);
        let compressed = c.member(&at_threshold);
        assert!(compressed.len() < BELOW / 2, "a run of one byte deflates");
        // With 0, the small one is compressed too.
        let mut every = MemberCompressor::new(WarcCompression::Gzip, 1, 0);
        let small_compressed = every.member(&small);
        assert!(small_compressed.len() < BELOW / 2);
        // The largest stored record fits one stored block.
        let mut most = MemberCompressor::new(WarcCompression::Gzip, 1, usize::MAX);
        let largest = record_of_size(STORE_BELOW_MAX - 1);
        let largest_member = most.member(&largest);
        assert_eq!(largest_member.len(), 10 + 5 + (STORE_BELOW_MAX - 1) + 8);
        assert!(most.member(&record_of_size(STORE_BELOW_MAX)).len() < BELOW);
        for (r, m) in [
            (&small, &member),
            (&at_threshold, &compressed),
            (&small, &small_compressed),
            (&largest, &largest_member),
        ] {
            let mut text = Vec::new();
            flate2::read::GzDecoder::new(&m[..])
                .read_to_end(&mut text)
                .expect("a valid gzip member");
            assert_eq!(text, r.to_bytes());
        }
    }

    #[test]
    fn zstd_frames_round_trip() {
        let mut c = MemberCompressor::new(WarcCompression::Zstd, 3, 1024);
        for body in [&b"abc"[..], &[7u8; 50_000][..]] {
            let r = record(body);
            let frame = c.member(&r);
            assert_eq!(
                zstd::bulk::decompress(&frame, 1 << 20).unwrap(),
                r.to_bytes()
            );
        }
    }
}
