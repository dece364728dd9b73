//! WARC records: header layout and digests (compressed by
//! [`super::compress`]).

use std::net::IpAddr;

use chrono::{DateTime, Utc};
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
    /// The payload's type as detected from its bytes
    /// (`parse/sniff.rs`): the response record's
    /// `WARC-Identified-Payload-Type`.
    pub identified_type: Option<&'a str>,
    /// The page's language (ISO 639-3), for the index (`languages`).
    pub languages: Option<&'a str>,
}

/// A record ready to serialise: named headers in order, then the block.
///
/// The block is `block` then `payload`: a response's payload stays where
/// the fetch put it instead of being copied in after its HTTP head (15 KB
/// copied and allocated a page, for nothing: the digest and the
/// compressor read the two parts in turn).
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// Headers in the order written, canonical capitalisation.
    pub headers: Vec<(&'static str, String)>,
    /// The record block, or its first part (a response's HTTP head).
    pub block: Vec<u8>,
    /// The rest of the block (a response's payload), often empty.
    pub payload: &'a [u8],
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

impl Record<'_> {
    /// The warcinfo record opening a file.
    pub fn warcinfo(filename: &str, fields: &[(String, String)]) -> Record<'static> {
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
            payload: &[],
        }
    }

    /// A `metadata` record about the record `concurrent_to` of
    /// `target_uri` (Heritrix's: how the URL was reached, how long the
    /// fetch took, its outlinks), `fields` as `application/warc-fields`.
    pub fn metadata(
        target_uri: &str,
        date: DateTime<Utc>,
        concurrent_to: &str,
        fields: &[(&str, String)],
    ) -> Record<'static> {
        let mut block = String::new();
        for (name, value) in fields {
            block.push_str(name);
            block.push_str(": ");
            // A field is one line: a line break in a value would start a
            // field of the value's choosing.
            block.extend(value.chars().filter(|c| !matches!(c, '\r' | '\n')));
            block.push_str("\r\n");
        }
        Record {
            headers: vec![
                ("WARC-Type", "metadata".into()),
                ("WARC-Target-URI", target_uri.to_owned()),
                ("WARC-Date", warc_date(date)),
                ("WARC-Record-ID", new_record_id()),
                ("WARC-Concurrent-To", concurrent_to.to_owned()),
                ("WARC-Block-Digest", sha256_digest(block.as_bytes())),
                ("Content-Type", "application/warc-fields".into()),
            ],
            block: block.into_bytes(),
            payload: &[],
        }
    }

    /// The `response` record of a DNS answer (`dns:HOST`, `text/dns`),
    /// `block` as [`crate::archive::Archiver::dns`] writes it. Its block
    /// is its payload (no HTTP head), so both digests are the block's:
    /// an index reads the payload digest (pywb's indexer computes a SHA-1
    /// of its own for a record without one).
    pub fn dns(host: &str, date: DateTime<Utc>, block: String) -> Record<'static> {
        let digest = sha256_digest(block.as_bytes());
        Record {
            headers: vec![
                ("WARC-Type", "response".into()),
                ("WARC-Target-URI", format!("dns:{host}")),
                ("WARC-Date", warc_date(date)),
                ("WARC-Record-ID", new_record_id()),
                ("WARC-Block-Digest", digest.clone()),
                ("WARC-Payload-Digest", digest),
                ("Content-Type", "text/dns".into()),
            ],
            block: block.into_bytes(),
            payload: &[],
        }
    }

    /// The block's length: both parts.
    pub fn block_len(&self) -> usize {
        self.block.len() + self.payload.len()
    }

    /// The parts the record serialises to, in order: head, block, payload,
    /// the two closing CRLFs.
    pub fn parts<'r>(&'r self, head: &'r [u8]) -> [&'r [u8]; 4] {
        [head, &self.block, self.payload, b"\r\n\r\n"]
    }

    /// Serialises the record (WARC/1.1 header, block, two CRLFs).
    pub fn to_bytes(&self) -> Vec<u8> {
        let head = self.head_bytes();
        let mut out = Vec::with_capacity(head.len() + self.block_len() + 4);
        for part in self.parts(&head) {
            out.extend_from_slice(part);
        }
        out
    }

    /// The record's head: the WARC/1.1 line, its headers, Content-Length
    /// and the blank line.
    pub fn head_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        out.extend_from_slice(b"WARC/1.1\r\n");
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", self.block_len()).as_bytes());
        out
    }

    /// The value of header `name`, if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The SHA-256 of a payload.
pub fn payload_sha256(payload: &[u8]) -> [u8; 32] {
    Sha256::digest(payload).into()
}

/// The WARC 1.1 revisit profile for a payload identical to an earlier one.
pub const IDENTICAL_PAYLOAD_PROFILE: &str =
    "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";

/// The WARC 1.1 revisit profile for a 304 answer to a conditional request:
/// the server confirmed that the copy referred to is current.
pub const SERVER_NOT_MODIFIED_PROFILE: &str =
    "http://netpreserve.org/warc/1.1/revisit/server-not-modified";

/// The response record and the request record (concurrent to it) of one
/// exchange whose payload has the SHA-256 `payload_sha256`.
pub fn exchange_records<'a>(
    ex: &Exchange<'a>,
    payload_sha256: &[u8; 32],
) -> (Record<'a>, Record<'static>) {
    let response_id = new_record_id();
    let date = warc_date(ex.date);
    let mut headers = vec![
        ("WARC-Type", "response".to_owned()),
        ("WARC-Record-ID", response_id.clone()),
        ("WARC-Date", date.clone()),
        ("WARC-Target-URI", ex.target_uri.to_owned()),
    ];
    if let Some(ip) = ex.ip {
        headers.push(("WARC-IP-Address", ip.to_string()));
    }
    let block_digest = Sha256::new()
        .chain_update(ex.response_head)
        .chain_update(ex.payload)
        .finalize();
    headers.push(("WARC-Block-Digest", format_sha256(&block_digest.into())));
    headers.push(("WARC-Payload-Digest", format_sha256(payload_sha256)));
    if let Some(reason) = ex.truncated {
        headers.push(("WARC-Truncated", reason.to_owned()));
    }
    if let Some(kind) = ex.identified_type {
        headers.push(("WARC-Identified-Payload-Type", kind.to_owned()));
    }
    headers.push(("Content-Type", "application/http;msgtype=response".into()));
    let response = Record {
        headers,
        block: ex.response_head.to_vec(),
        payload: ex.payload,
    };
    let request = request_record(ex, response_id, date);
    (response, request)
}

/// A revisit record for an exchange whose payload is identical to the one
/// stored in `original`, and its request record. The revisit's block is
/// the response head alone (the payload is in the original).
pub fn revisit_records(
    ex: &Exchange<'_>,
    payload_sha256: &[u8; 32],
    original: &crate::dedup::Original,
    profile: &str,
) -> (Record<'static>, Record<'static>) {
    let revisit_id = new_record_id();
    let date = warc_date(ex.date);
    let block = ex.response_head.to_vec();
    let mut headers = vec![
        ("WARC-Type", "revisit".to_owned()),
        ("WARC-Record-ID", revisit_id.clone()),
        ("WARC-Date", date.clone()),
        ("WARC-Target-URI", ex.target_uri.to_owned()),
    ];
    if let Some(ip) = ex.ip {
        headers.push(("WARC-IP-Address", ip.to_string()));
    }
    headers.push(("WARC-Profile", profile.to_owned()));
    // A copy known from an earlier crawl's CDXJ index has no record ID
    // (`dedup/previous.rs`): the optional field is left out.
    if !original.record_id.is_empty() {
        headers.push(("WARC-Refers-To", original.record_id.clone()));
    }
    headers.extend([
        ("WARC-Refers-To-Target-URI", original.uri.clone()),
        ("WARC-Refers-To-Date", original.date.clone()),
        ("WARC-Block-Digest", sha256_digest(&block)),
        ("WARC-Payload-Digest", format_sha256(payload_sha256)),
        ("Content-Type", "application/http;msgtype=response".into()),
    ]);
    let revisit = Record {
        headers,
        block,
        payload: &[],
    };
    let request = request_record(ex, revisit_id, date);
    (revisit, request)
}

/// The request record of an exchange, concurrent to the record `to`.
fn request_record(ex: &Exchange<'_>, to: String, date: String) -> Record<'static> {
    let mut headers = vec![
        ("WARC-Type", "request".to_owned()),
        ("WARC-Record-ID", new_record_id()),
        ("WARC-Date", date),
        ("WARC-Target-URI", ex.target_uri.to_owned()),
    ];
    if let Some(ip) = ex.ip {
        headers.push(("WARC-IP-Address", ip.to_string()));
    }
    headers.push(("WARC-Concurrent-To", to));
    headers.push(("WARC-Block-Digest", sha256_digest(ex.request_head)));
    headers.push(("Content-Type", "application/http;msgtype=request".into()));
    Record {
        headers,
        block: ex.request_head.to_vec(),
        payload: &[],
    }
}
