//! Key and value encodings of the partition store.
//!
//! Keys are designed for RocksDB's byte order:
//! - `urls`:  16-byte big-endian fingerprint → [`UrlRecord`];
//! - `queue`: `host ‖ 0x00 ‖ priority (u8) ‖ seq (u64 BE)` → [`QueueValue`],
//!   so one host's queue of one priority is one contiguous key range in
//!   admission order;
//! - `hosts`: host name → JSON robots records by origin;
//! - `schedules`: host name → JSON [`Schedule`](crate::politeness::Schedule);
//! - `meta`:  small named counters.

use crate::frontier::{EntryKind, Priority};
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
    /// Not fetched: robots.txt stayed unreachable past `give_up_after`.
    RobotsUnreachable,
    /// Recorded, never fetched: excluded by `[scope] deny_extensions`.
    Excluded,
    /// Not fetched: the SSRF guard denies its address.
    Denied,
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
            UrlState::RobotsUnreachable => (5, 0),
            UrlState::Excluded => (6, 0),
            UrlState::Denied => (7, 0),
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
            5 => UrlState::RobotsUnreachable,
            6 => UrlState::Excluded,
            7 => UrlState::Denied,
            _ => return None,
        };
        Some(UrlRecord { state, depth })
    }
}

/// The key prefix of all of one host's queues.
pub fn host_prefix(host: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(host.len() + 10);
    key.extend_from_slice(host.as_bytes());
    key.push(0);
    key
}

/// The key prefix of one host's queue of one priority.
pub fn queue_prefix(host: &str, priority: Priority) -> Vec<u8> {
    let mut key = host_prefix(host);
    key.push(priority.level() as u8);
    key
}

/// The queue key of entry `seq` of `host` at `priority`.
pub fn queue_key(host: &str, priority: Priority, seq: u64) -> Vec<u8> {
    let mut key = queue_prefix(host, priority);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The priority of a queue key.
pub fn queue_key_priority(key: &[u8]) -> Option<Priority> {
    let end = key.iter().position(|&b| b == 0)?;
    key.get(end + 1).map(|&l| Priority::from_level(l))
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
    /// Hops from the seed (pages) or index depth (sitemaps).
    pub depth: u32,
    /// Page or sitemap.
    pub kind: EntryKind,
    /// The URL to fetch.
    pub url: String,
}

impl QueueValue {
    /// fingerprint (16) ‖ depth (4, LE) ‖ kind (1) ‖ [submitter length (2,
    /// LE) ‖ submitter] ‖ url bytes. Kind 0 is a page, 1 a sitemap, 2 a
    /// sitemap with a submitter, 3 a redirected page (followed by its hop
    /// count, one byte).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(24 + self.url.len());
        out.extend_from_slice(&self.fp.to_bytes());
        out.extend_from_slice(&self.depth.to_le_bytes());
        match &self.kind {
            EntryKind::Page => out.push(0),
            EntryKind::Redirected { hops } => out.extend_from_slice(&[3, *hops]),
            EntryKind::Sitemap { submitter: None } => out.push(1),
            EntryKind::Sitemap {
                submitter: Some(host),
            } => {
                out.push(2);
                let len = host.len().min(u16::MAX as usize);
                out.extend_from_slice(&(len as u16).to_le_bytes());
                out.extend_from_slice(&host.as_bytes()[..len]);
            }
        }
        out.extend_from_slice(self.url.as_bytes());
        out
    }

    /// Decodes [`QueueValue::encode`]'s form.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let fp = Fingerprint::from_bytes(bytes.get(..16)?)?;
        let depth = u32::from_le_bytes(bytes.get(16..20)?.try_into().ok()?);
        let (kind, rest) = match *bytes.get(20)? {
            0 => (EntryKind::Page, &bytes[21..]),
            3 => (
                EntryKind::Redirected {
                    hops: *bytes.get(21)?,
                },
                &bytes[22..],
            ),
            1 => (EntryKind::Sitemap { submitter: None }, &bytes[21..]),
            2 => {
                let len = u16::from_le_bytes(bytes.get(21..23)?.try_into().ok()?) as usize;
                let host = std::str::from_utf8(bytes.get(23..23 + len)?).ok()?;
                let kind = EntryKind::Sitemap {
                    submitter: Some(host.to_owned()),
                };
                (kind, &bytes[23 + len..])
            }
            _ => return None,
        };
        Some(QueueValue {
            fp,
            depth,
            kind,
            url: String::from_utf8(rest.to_vec()).ok()?,
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
            UrlState::RobotsUnreachable,
        ] {
            let rec = UrlRecord { state, depth: 7 };
            assert_eq!(UrlRecord::decode(&rec.encode()), Some(rec));
        }
        assert_eq!(UrlRecord::decode(&[9, 0, 0, 0, 0, 0, 0]), None);
        assert_eq!(UrlRecord::decode(&[1]), None);
    }

    #[test]
    fn queue_keys_group_by_host_and_priority_in_sequence_order() {
        let a1 = queue_key("a.test", Priority::NORMAL, 1);
        let a2 = queue_key("a.test", Priority::NORMAL, 256);
        let a0 = queue_key("a.test", Priority::SEED, 900);
        let ab = queue_key("a.test.b", Priority::SEED, 0);
        assert!(a1 < a2);
        assert!(a0 < a1, "higher priority sorts first");
        assert!(a1.starts_with(&queue_prefix("a.test", Priority::NORMAL)));
        assert!(a0.starts_with(&host_prefix("a.test")));
        assert!(!ab.starts_with(&host_prefix("a.test")));
        assert_eq!(queue_key_host(&a2), Some("a.test"));
        assert_eq!(queue_key_priority(&a0), Some(Priority::SEED));
    }

    #[test]
    fn queue_value_round_trips() {
        for kind in [
            EntryKind::Page,
            EntryKind::Redirected { hops: 4 },
            EntryKind::Sitemap { submitter: None },
            EntryKind::Sitemap {
                submitter: Some("b.test".into()),
            },
        ] {
            let v = QueueValue {
                fp: Fingerprint(42),
                depth: 3,
                kind,
                url: "http://a.test/ü".into(),
            };
            assert_eq!(QueueValue::decode(&v.encode()), Some(v));
        }
        assert_eq!(QueueValue::decode(&[0; 5]), None);
        assert_eq!(
            QueueValue::decode(&[0; 21][..]).map(|v| v.kind),
            Some(EntryKind::Page)
        );
        let mut bad = vec![0; 20];
        bad.extend_from_slice(&[2, 200, 0]);
        assert_eq!(
            QueueValue::decode(&bad),
            None,
            "submitter length past the end"
        );
    }
}
