//! WARC records: header layout, digests, gzip members.

use std::io::Write;
use std::net::IpAddr;

use chrono::{DateTime, Utc};
use flate2::write::GzEncoder;
use flate2::Compression;
use sha2::{Digest, Sha256};

/// One HTTP exchange to archive.
#[derive(Debug, Clone)]
pub struct Exchange<'a> {
    /// The URL requested.
    pub target_uri: &'a str,
    /// When the request started.
    pub date: DateTime<Utc>,
    /// Address of the server, when known.
    pub ip: Option<IpAddr>,
    /// The HTTP request head, as sent (request line, headers, blank line).
    pub request_head: &'a [u8],
    /// The HTTP response head (status line, headers, blank line).
    pub response_head: &'a [u8],
    /// The response body as received (transfer coding removed).
    pub payload: &'a [u8],
    /// `Some("length")` when the body was cut at the size cap.
    pub truncated: Option<&'a str>,
}

/// A record ready to serialise: named headers in order, then the block.
#[derive(Debug, Clone)]
pub struct Record {
    /// Headers in the order written, canonical capitalisation.
    pub headers: Vec<(&'static str, String)>,
    /// The record block.
    pub block: Vec<u8>,
}

/// `<urn:uuid:...>`, the form WARC-Record-ID takes.
pub fn new_record_id() -> String {
    format!("<urn:uuid:{}>", uuid::Uuid::new_v4())
}

/// `sha256:BASE32` of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    format_sha256(&Sha256::digest(bytes).into())
}

/// `sha256:BASE32` of a computed SHA-256.
pub fn format_sha256(digest: &[u8; 32]) -> String {
    format!("sha256:{}", data_encoding::BASE32.encode(digest))
}

/// WARC-Date form: UTC with microseconds (WARC 1.1 allows fractions).
pub fn warc_date(date: DateTime<Utc>) -> String {
    date.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

impl Record {
    /// The warcinfo record opening a file.
    pub fn warcinfo(filename: &str, fields: &[(String, String)]) -> Record {
        let mut block = String::new();
        for (k, v) in fields {
            block.push_str(&format!("{k}: {v}\r\n"));
        }
        Record {
            headers: vec![
                ("WARC-Type", "warcinfo".into()),
                ("WARC-Record-ID", new_record_id()),
                ("WARC-Date", warc_date(Utc::now())),
                ("WARC-Filename", filename.to_owned()),
                ("WARC-Block-Digest", sha256_digest(block.as_bytes())),
                ("Content-Type", "application/warc-fields".into()),
            ],
            block: block.into_bytes(),
        }
    }

    /// Serialises the record (WARC/1.1 header, block, two CRLFs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.block.len() + 512);
        out.extend_from_slice(b"WARC/1.1\r\n");
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", self.block.len()).as_bytes());
        out.extend_from_slice(&self.block);
        out.extend_from_slice(b"\r\n\r\n");
        out
    }

    /// The record as one complete gzip member.
    pub fn to_gzip_member(&self, level: u32) -> Vec<u8> {
        let raw = self.to_bytes();
        let mut enc = GzEncoder::new(
            Vec::with_capacity(raw.len() / 3 + 64),
            Compression::new(level),
        );
        enc.write_all(&raw).expect("writing to a Vec cannot fail");
        enc.finish().expect("writing to a Vec cannot fail")
    }

    /// The value of header `name`, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The response record and the request record (concurrent to it) of one
/// exchange, and the payload's SHA-256 (computed once, reused by events).
pub fn exchange_records(ex: &Exchange<'_>) -> (Record, Record, [u8; 32]) {
    let payload_sha256: [u8; 32] = Sha256::digest(ex.payload).into();
    let response_id = new_record_id();
    let date = warc_date(ex.date);
    let mut block = Vec::with_capacity(ex.response_head.len() + ex.payload.len());
    block.extend_from_slice(ex.response_head);
    block.extend_from_slice(ex.payload);
    let mut headers = vec![
        ("WARC-Type", "response".to_owned()),
        ("WARC-Record-ID", response_id.clone()),
        ("WARC-Date", date.clone()),
        ("WARC-Target-URI", ex.target_uri.to_owned()),
    ];
    if let Some(ip) = ex.ip {
        headers.push(("WARC-IP-Address", ip.to_string()));
    }
    headers.push(("WARC-Block-Digest", sha256_digest(&block)));
    headers.push(("WARC-Payload-Digest", format_sha256(&payload_sha256)));
    if let Some(reason) = ex.truncated {
        headers.push(("WARC-Truncated", reason.to_owned()));
    }
    headers.push(("Content-Type", "application/http;msgtype=response".into()));
    let response = Record { headers, block };

    let mut headers = vec![
        ("WARC-Type", "request".to_owned()),
        ("WARC-Record-ID", new_record_id()),
        ("WARC-Date", date),
        ("WARC-Target-URI", ex.target_uri.to_owned()),
    ];
    if let Some(ip) = ex.ip {
        headers.push(("WARC-IP-Address", ip.to_string()));
    }
    headers.push(("WARC-Concurrent-To", response_id));
    headers.push(("WARC-Block-Digest", sha256_digest(ex.request_head)));
    headers.push(("Content-Type", "application/http;msgtype=request".into()));
    let request = Record {
        headers,
        block: ex.request_head.to_vec(),
    };
    (response, request, payload_sha256)
}
