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

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

use super::record::Record;
use crate::config::WarcCompression;

/// The gzip member header: magic, deflate, no flags, no time, XFL 0, OS
/// unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// Compresses records, one member each, reusing its state.
pub struct MemberCompressor {
    codec: WarcCompression,
    level: u32,
    deflate: Compress,
    zstd: Option<zstd::bulk::Compressor<'static>>,
}

impl MemberCompressor {
    /// A compressor for `codec` at `level` (checked by the config).
    pub fn new(codec: WarcCompression, level: u32) -> Self {
        MemberCompressor {
            codec,
            level,
            deflate: Compress::new(Compression::new(level), false),
            zstd: None,
        }
    }

    /// `record` as one complete gzip member or zstd frame.
    pub fn member(&mut self, record: &Record) -> Vec<u8> {
        match self.codec {
            WarcCompression::Gzip => self.gzip(record),
            WarcCompression::Zstd => self.zstd(record),
        }
    }

    fn gzip(&mut self, record: &Record) -> Vec<u8> {
        let head = record.head_bytes();
        let size = head.len() + record.block.len() + 4;
        let mut out = Vec::with_capacity(size / 3 + 64);
        out.extend_from_slice(&GZIP_HEADER);
        self.deflate.reset();
        let mut crc = Crc::new();
        for part in [&head[..], &record.block[..], b"\r\n\r\n"] {
            crc.update(part);
            self.deflate_all(part, &mut out, FlushCompress::None);
        }
        self.deflate_all(&[], &mut out, FlushCompress::Finish);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(crc.amount()).to_le_bytes());
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

    fn zstd(&mut self, record: &Record) -> Vec<u8> {
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

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn record(body: &[u8]) -> Record {
        Record {
            headers: vec![("WARC-Type", "resource".into())],
            block: body.to_vec(),
        }
    }

    #[test]
    fn each_member_is_a_complete_gzip_of_the_record_and_state_does_not_leak() {
        let mut c = MemberCompressor::new(WarcCompression::Gzip, 1);
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

    #[test]
    fn zstd_frames_round_trip() {
        let mut c = MemberCompressor::new(WarcCompression::Zstd, 3);
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
