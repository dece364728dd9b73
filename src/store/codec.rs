//! Key and value encodings of the partition store.
//!
//! Keys are designed for RocksDB's byte order:
//! - `urls`:  16-byte big-endian fingerprint → [`UrlRecord`];
//! - `queue`: `host ‖ 0x00 ‖ seq (u64 BE)` → [`QueueValue`], so one host's
//!   queue is one contiguous key range in admission order;
//! - `hosts`: host name → JSON [`HostState`](super::HostState);
//! - `meta`:  small named counters.

use crate::url::Fingerprint;

/// What the store knows about a URL it has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlState {
    /// Durably queued, not yet completed (possibly in flight).
    Queued,
    /// Fetched and fully processed, with its HTTP status.
    Fetched(u16),
    /// Fetch failed without a response.
    Failed,
    /// Not fetched: robots.txt disallows it.
    Disallowed,
}

/// The `urls` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UrlRecord {
    /// Where the URL is in its life.
    pub state: UrlState,
    /// Hops from the seed it was admitted at.
    pub depth: u32,
}

impl UrlRecord {
    /// Seven bytes: state tag, depth (LE), status (LE).
    pub fn encode(&self) -> [u8; 7] {
        let (tag, status) = match self.state {
            UrlState::Queued => (1, 0),
            UrlState::Fetched(s) => (2, s),
            UrlState::Failed => (3, 0),
            UrlState::Disallowed => (4, 0),
        };
        let mut out = [0u8; 7];
        out[0] = tag;
        out[1..5].copy_from_slice(&self.depth.to_le_bytes());
        out[5..7].copy_from_slice(&status.to_le_bytes());
        out
    }

    /// Decodes [`UrlRecord::encode`]'s form.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() != 7 {
            return None;
        }
        let depth = u32::from_le_bytes(bytes[1..5].try_into().ok()?);
        let status = u16::from_le_bytes(bytes[5..7].try_into().ok()?);
        let state = match bytes[0] {
            1 => UrlState::Queued,
            2 => UrlState::Fetched(status),
            3 => UrlState::Failed,
            4 => UrlState::Disallowed,
            _ => return None,
        };
        Some(UrlRecord { state, depth })
    }
}

/// The key prefix of one host's queue.
pub fn queue_prefix(host: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(host.len() + 9);
    key.extend_from_slice(host.as_bytes());
    key.push(0);
    key
}

/// The queue key of entry `seq` of `host`.
pub fn queue_key(host: &str, seq: u64) -> Vec<u8> {
    let mut key = queue_prefix(host);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The host of a queue key.
pub fn queue_key_host(key: &[u8]) -> Option<&str> {
    let end = key.iter().position(|&b| b == 0)?;
    std::str::from_utf8(&key[..end]).ok()
}

/// The `queue` value: what a host needs to fetch the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueValue {
    /// Fingerprint of the normalised URL.
    pub fp: Fingerprint,
    /// Hops from the seed.
    pub depth: u32,
    /// The URL to fetch.
    pub url: String,
}

impl QueueValue {
    /// fingerprint (16) ‖ depth (4, LE) ‖ url bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.url.len());
        out.extend_from_slice(&self.fp.to_bytes());
        out.extend_from_slice(&self.depth.to_le_bytes());
        out.extend_from_slice(self.url.as_bytes());
        out
    }

    /// Decodes [`QueueValue::encode`]'s form.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        if bytes.len() < 20 {
            return None;
        }
        Some(QueueValue {
            fp: Fingerprint::from_bytes(&bytes[..16])?,
            depth: u32::from_le_bytes(bytes[16..20].try_into().ok()?),
            url: String::from_utf8(bytes[20..].to_vec()).ok()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_record_round_trips() {
        for state in [
            UrlState::Queued,
            UrlState::Fetched(404),
            UrlState::Failed,
            UrlState::Disallowed,
        ] {
            let rec = UrlRecord { state, depth: 7 };
            assert_eq!(UrlRecord::decode(&rec.encode()), Some(rec));
        }
        assert_eq!(UrlRecord::decode(&[9, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(UrlRecord::decode(&[1]), None);
    }

    #[test]
    fn queue_keys_group_by_host_in_sequence_order() {
        let a1 = queue_key("a.test", 1);
        let a2 = queue_key("a.test", 256);
        let ab = queue_key("a.test.b", 0);
        assert!(a1 < a2);
        assert!(a1.starts_with(&queue_prefix("a.test")));
        assert!(!ab.starts_with(&queue_prefix("a.test")));
        assert_eq!(queue_key_host(&a2), Some("a.test"));
    }

    #[test]
    fn queue_value_round_trips() {
        let v = QueueValue {
            fp: Fingerprint(42),
            depth: 3,
            url: "http://a.test/ü".into(),
        };
        assert_eq!(QueueValue::decode(&v.encode()), Some(v));
        assert_eq!(QueueValue::decode(&[0; 5]), None);
    }
}
