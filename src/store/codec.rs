//! Key and value encodings of the partition store (and of the dedup
//! index's values).
//!
//! # Keys
//!
//! Keys are designed for RocksDB's byte order:
//! - `urls`: 16-byte big-endian fingerprint → [`UrlRecord`] (its own
//!   versioned format, see `record.rs`);
//! - `recrawl`: `host ‖ 0x00 ‖ due (u64 BE, Unix ms) ‖ fingerprint` →
//!   [`QueueValue`]: fetched URLs by the time they are due again, one
//!   host's in due order;
//! - `queue.v1`: `host ‖ 0x00 ‖ priority (u8) ‖ rank (u16 BE) ‖ seq (u64
//!   BE)` → [`QueueValue`], so one host's queue of one priority is one
//!   contiguous key range, most important first (the rank, see
//!   `frontier/importance.rs`), then in admission order. Keys written
//!   before ranks have no rank bytes and sort first (see there);
//! - `hosts`: host name → robots.txt records by origin;
//! - `schedules`: host name → [`Schedule`]; `host ‖ 0x00 ‖ memory` →
//!   [`HostMemory`]; `host ‖ 0x00 ‖ hold` → [`Hold`] (the request it may
//!   have on the wire);
//! - `queued`: host name → URLs queued (i64 BE, summed by a merge operator);
//! - `budgets`: see `budgets.rs`;
//! - `meta`: small named counters and markers.
//!
//! # Values
//!
//! Every structured value is written by [`encode_value`] as one version
//! byte ([`VERSION`]) followed by its [postcard] encoding, and read by
//! [`decode_value`], which dispatches on that byte. postcard is compact
//! (a `Vec<u8>` is its length and its bytes, so a 500 KiB robots.txt body
//! costs 500 KiB, not the 2 MB of a JSON array of numbers) but not
//! self-describing: a value is only readable with the exact shape it was
//! written with. Hence:
//!
//! - What is stored are the `Stored*` types of this module, not the domain
//!   types: a field added to `Schedule` or `RobotsRecord` by its module
//!   cannot silently change the stored format (the conversions stop
//!   compiling instead).
//! - Changing a stored shape means a new version byte, and
//!   [`decode_value`]'s callers keep reading the old shape.
//! - Enum variants of stored types are only ever appended (postcard writes
//!   a variant's index).
//!
//! Formats of earlier releases, still read:
//! - JSON (host robots records, schedules, dedup originals): a JSON object
//!   starts with `{`, which is no version byte, so [`decode_value`] tells
//!   it apart exactly and reads it with the same `Stored*` types.
//! - The unversioned binary queue value (fingerprint first, so its first
//!   byte can be anything, and no version byte could be told apart from
//!   it): it lived in the family `queue`, and a store that still has that
//!   family is migrated into `queue.v1` when opened for writing (see
//!   `schema.rs`); [`QueueValue::decode_legacy`] reads it.
//!
//! Kept as they are, on purpose:
//! - Counters (`meta` seq, `queued`, `budgets`) are fixed-width integers:
//!   the `queued` merge operator adds them in place, and 8 bytes are all
//!   they will ever be.
//! - The crawl manifest is a small JSON file (`crawl.json`) beside the
//!   stores, meant to be read by people; it is not in RocksDB.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::frontier::importance::Rank;
use crate::frontier::provenance::{HopPath, Provenance};
use crate::frontier::{EntryKind, Priority};
use crate::politeness::{Hold, Schedule};
use crate::robots::RobotsRecord;
use crate::url::Fingerprint;

/// The version byte of values written now: postcard, shapes as in this
/// module.
pub const VERSION: u8 = 1;

/// The first byte of a value written as JSON by earlier releases.
const LEGACY_JSON: u8 = b'{';

/// A stored value that cannot be encoded or decoded; `what` names the value
/// (`"queue entry"`, `"robots records"`, ...).
#[derive(Debug, thiserror::Error)]
pub enum CodecError {
    /// The value is empty: no version byte.
    #[error("{what}: empty value")]
    Empty { what: &'static str },
    /// The version byte is none this build knows (a newer build wrote it,
    /// or the store is corrupt).
    #[error("{what}: unknown format version {version}")]
    UnknownVersion { what: &'static str, version: u8 },
    /// postcard could not encode or decode the value.
    #[error("{what}: {source}")]
    Postcard {
        what: &'static str,
        source: postcard::Error,
    },
    /// Bytes are left after the value: it is not of the expected shape.
    #[error("{what}: {extra} bytes after the value")]
    Trailing { what: &'static str, extra: usize },
    /// A value of an earlier release's JSON format does not parse.
    #[error("{what} (JSON of an earlier release): {source}")]
    Json {
        what: &'static str,
        source: serde_json::Error,
    },
    /// A hand-written binary layout does not parse.
    #[error("{what}: malformed")]
    Malformed { what: &'static str },
}

/// Encodes `value` as [`VERSION`] followed by its postcard encoding.
pub fn encode_value<T: Serialize + ?Sized>(
    what: &'static str,
    value: &T,
) -> Result<Vec<u8>, CodecError> {
    postcard::to_extend(value, vec![VERSION])
        .map_err(|source| CodecError::Postcard { what, source })
}

/// Encodes `value` as `version` followed by its postcard encoding: a
/// stored shape that changed (see the module docs) is written under a
/// version byte of its own.
pub fn encode_value_as<T: Serialize + ?Sized>(
    what: &'static str,
    version: u8,
    value: &T,
) -> Result<Vec<u8>, CodecError> {
    postcard::to_extend(value, vec![version])
        .map_err(|source| CodecError::Postcard { what, source })
}

/// Decodes what [`encode_value_as`] wrote under `version`, if `bytes`
/// starts with it (`None` otherwise: an older shape, for the caller).
pub fn decode_value_as<T: DeserializeOwned>(
    what: &'static str,
    version: u8,
    bytes: &[u8],
) -> Result<Option<T>, CodecError> {
    if bytes.first() != Some(&version) {
        return Ok(None);
    }
    postcard_exact(what, &bytes[1..]).map(Some)
}

/// The postcard value that is all of `bytes`.
fn postcard_exact<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T, CodecError> {
    let (value, rest) =
        postcard::take_from_bytes(bytes).map_err(|source| CodecError::Postcard { what, source })?;
    if !rest.is_empty() {
        return Err(CodecError::Trailing {
            what,
            extra: rest.len(),
        });
    }
    Ok(value)
}

/// Decodes what [`encode_value`] wrote, or the JSON of an earlier release.
pub fn decode_value<T: DeserializeOwned>(
    what: &'static str,
    bytes: &[u8],
) -> Result<T, CodecError> {
    match bytes.first() {
        None => Err(CodecError::Empty { what }),
        Some(&VERSION) => postcard_exact(what, &bytes[1..]),
        Some(&LEGACY_JSON) => {
            serde_json::from_slice(bytes).map_err(|source| CodecError::Json { what, source })
        }
        Some(&version) => Err(CodecError::UnknownVersion { what, version }),
    }
}

pub use super::record::{UrlRecord, UrlState};

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

/// The queue key of entry `seq` of `host` at `priority` and `rank`.
pub fn queue_key(host: &str, priority: Priority, rank: Rank, seq: u64) -> Vec<u8> {
    let mut key = rank_start(host, priority, rank);
    key.extend_from_slice(&seq.to_be_bytes());
    key
}

/// The first possible key of `host`'s queue at `priority` and `rank`: as
/// a refill's "after" bound (which no real key equals), reading from it
/// reads that rank and every lesser one.
pub fn rank_start(host: &str, priority: Priority, rank: Rank) -> Vec<u8> {
    let mut key = queue_prefix(host, priority);
    key.extend_from_slice(&rank.to_bytes());
    key
}

/// The rank of a queue key, if it has one (keys written before ranks
/// have none).
pub fn queue_key_rank(key: &[u8]) -> Option<Rank> {
    let end = key.iter().position(|&b| b == 0)?;
    let rest = key.get(end + 2..)?;
    (rest.len() == 10).then(|| Rank::from_bytes([rest[0], rest[1]]))
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

/// The `recrawl` key of `fp` of `host`, due at `due_ms`.
pub fn recrawl_key(host: &str, due_ms: u64, fp: Fingerprint) -> Vec<u8> {
    let mut key = host_prefix(host);
    key.extend_from_slice(&due_ms.to_be_bytes());
    key.extend_from_slice(&fp.to_bytes());
    key
}

/// The due time (Unix ms) of a `recrawl` key.
pub fn recrawl_key_due(key: &[u8]) -> Option<u64> {
    let end = key.iter().position(|&b| b == 0)?;
    let due = key.get(end + 1..end + 9)?;
    Some(u64::from_be_bytes(due.try_into().ok()?))
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
    /// Where it was found ([`Provenance`]).
    pub provenance: Provenance,
}

/// The stored shape of a [`QueueValue`] (version 1: written before
/// provenance was kept, read as a seed's).
#[derive(Serialize, Deserialize)]
struct StoredQueueValue<'a> {
    fp: [u8; 16],
    depth: u32,
    kind: StoredKind<'a>,
    url: Cow<'a, str>,
}

/// The version byte of queue values with their provenance.
pub const QUEUE_WITH_PROVENANCE: u8 = 2;

/// The stored shape of a [`QueueValue`] (version 2): version 1's, then
/// the URL it was found on and its hop path.
#[derive(Serialize, Deserialize)]
struct StoredQueueValueV2<'a> {
    value: StoredQueueValue<'a>,
    via: Option<Cow<'a, str>>,
    hops: Cow<'a, str>,
}

/// The stored shape of an [`EntryKind`]; variants are only appended.
#[derive(Serialize, Deserialize)]
enum StoredKind<'a> {
    Page,
    Sitemap { submitter: Option<Cow<'a, str>> },
    Redirected { hops: u8 },
}

impl QueueValue {
    const WHAT: &'static str = "queue entry";

    /// The versioned encoding (see the module docs).
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        let kind = match &self.kind {
            EntryKind::Page => StoredKind::Page,
            EntryKind::Redirected { hops } => StoredKind::Redirected { hops: *hops },
            EntryKind::Sitemap { submitter } => StoredKind::Sitemap {
                submitter: submitter.as_deref().map(Cow::Borrowed),
            },
        };
        let stored = StoredQueueValueV2 {
            value: StoredQueueValue {
                fp: self.fp.to_bytes(),
                depth: self.depth,
                kind,
                url: Cow::Borrowed(&self.url),
            },
            via: self.provenance.via.as_deref().map(Cow::Borrowed),
            hops: Cow::Borrowed(self.provenance.hops.as_str()),
        };
        encode_value_as(Self::WHAT, QUEUE_WITH_PROVENANCE, &stored)
    }

    /// Decodes [`QueueValue::encode`]'s form, or version 1's (a value
    /// written before provenance was kept: read as a seed's).
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        let with: Option<StoredQueueValueV2> =
            decode_value_as(Self::WHAT, QUEUE_WITH_PROVENANCE, bytes)?;
        let (stored, provenance) = match with {
            Some(v2) => {
                let provenance = Provenance {
                    via: v2.via.map(|via| Arc::from(via.as_ref())),
                    hops: HopPath::from_letters(&v2.hops),
                };
                (v2.value, provenance)
            }
            None => (decode_value(Self::WHAT, bytes)?, Provenance::seed()),
        };
        let kind = match stored.kind {
            StoredKind::Page => EntryKind::Page,
            StoredKind::Redirected { hops } => EntryKind::Redirected { hops },
            StoredKind::Sitemap { submitter } => EntryKind::Sitemap {
                submitter: submitter.map(Cow::into_owned),
            },
        };
        Ok(QueueValue {
            fp: Fingerprint::from_bytes(&stored.fp)
                .ok_or(CodecError::Malformed { what: Self::WHAT })?,
            depth: stored.depth,
            kind,
            url: stored.url.into_owned(),
            provenance,
        })
    }

    /// Decodes the unversioned layout of earlier releases (family `queue`):
    /// fingerprint (16) ‖ depth (4, LE) ‖ kind (1) ‖ [submitter length (2,
    /// LE) ‖ submitter] ‖ url bytes. Kind 0 is a page, 1 a sitemap, 2 a
    /// sitemap with a submitter, 3 a redirected page (followed by its hop
    /// count, one byte).
    pub fn decode_legacy(bytes: &[u8]) -> Result<Self, CodecError> {
        Self::parse_legacy(bytes).ok_or(CodecError::Malformed {
            what: "queue entry (unversioned)",
        })
    }

    fn parse_legacy(bytes: &[u8]) -> Option<Self> {
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
            provenance: Provenance::seed(),
        })
    }
}

/// The stored shape of a [`RobotsRecord`] (version 1; JSON before, with
/// the same field names).
#[derive(Serialize, Deserialize)]
struct StoredRobots<'a> {
    status: Option<u16>,
    fetched_at_ms: u64,
    body: Cow<'a, [u8]>,
}

const ROBOTS: &str = "robots records";
const SCHEDULE: &str = "politeness schedule";

/// Encodes a host's robots.txt records by origin (the `hosts` value).
pub fn encode_robots(records: &BTreeMap<String, RobotsRecord>) -> Result<Vec<u8>, CodecError> {
    let stored: BTreeMap<&str, StoredRobots> = records
        .iter()
        .map(|(origin, r)| {
            let r = StoredRobots {
                status: r.status,
                fetched_at_ms: r.fetched_at_ms,
                body: Cow::Borrowed(&r.body),
            };
            (origin.as_str(), r)
        })
        .collect();
    encode_value(ROBOTS, &stored)
}

/// Decodes [`encode_robots`]'s form, or an earlier release's JSON.
pub fn decode_robots(bytes: &[u8]) -> Result<BTreeMap<String, RobotsRecord>, CodecError> {
    let stored: BTreeMap<String, StoredRobots> = decode_value(ROBOTS, bytes)?;
    Ok(stored
        .into_iter()
        .map(|(origin, r)| {
            let r = RobotsRecord {
                retry: None,
                status: r.status,
                fetched_at_ms: r.fetched_at_ms,
                body: r.body.into_owned(),
            };
            (origin, r)
        })
        .collect())
}

/// The stored shape of a [`Schedule`] (version 1; JSON before, with the
/// same field names).
#[derive(Serialize, Deserialize)]
struct StoredSchedule {
    next_allowed_ms: u64,
    last_delay_ms: u64,
    failures: u32,
    parked_until_ms: u64,
}

/// What a host remembers beside its robots.txt copies and schedule,
/// written when it passivates or drains (its own value, under
/// [`memory_key`], so the completions that rewrite the schedule leave it
/// alone). Version 1.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostMemory {
    /// Tries of URLs to be tried again: (fingerprint, failures, throttled).
    /// Written empty now that tries live in each URL's record; still read,
    /// so a store of the previous release keeps its URLs' tries.
    pub attempts: Vec<(u128, u32, u32)>,
    /// The address the host was last reached at.
    pub ip: Option<std::net::IpAddr>,
    /// Unreachable robots.txt: (origin, failed attempts, next attempt in
    /// Unix ms).
    pub robots_retry: Vec<(String, u32, u64)>,
}

const MEMORY: &str = "host memory";

/// The key of a host's [`HostMemory`] in the `schedules` family: the host
/// name, a NUL (no host name has one) and `memory`.
pub fn memory_key(host: &str) -> Vec<u8> {
    let mut key = host_prefix(host);
    key.extend_from_slice(b"memory");
    key
}

/// Encodes a [`HostMemory`].
pub fn encode_memory(m: &HostMemory) -> Result<Vec<u8>, CodecError> {
    encode_value(MEMORY, m)
}

/// Decodes [`encode_memory`]'s form.
pub fn decode_memory(bytes: &[u8]) -> Result<HostMemory, CodecError> {
    decode_value(MEMORY, bytes)
}

const HOLD: &str = "request hold";

/// The key of a host's [`Hold`] in the `schedules` family: the host name,
/// a NUL and `hold`.
pub fn hold_key(host: &str) -> Vec<u8> {
    let mut key = host_prefix(host);
    key.extend_from_slice(b"hold");
    key
}

/// The stored shape of a [`Hold`] (version 1).
#[derive(Serialize, Deserialize)]
struct StoredHold {
    sent_ms: u64,
    until_ms: u64,
}

/// Encodes a host's [`Hold`].
pub fn encode_hold(h: &Hold) -> Result<Vec<u8>, CodecError> {
    let stored = StoredHold {
        sent_ms: h.sent_ms,
        until_ms: h.until_ms,
    };
    encode_value(HOLD, &stored)
}

/// Decodes [`encode_hold`]'s form.
pub fn decode_hold(bytes: &[u8]) -> Result<Hold, CodecError> {
    let s: StoredHold = decode_value(HOLD, bytes)?;
    Ok(Hold {
        sent_ms: s.sent_ms,
        until_ms: s.until_ms,
    })
}

/// Encodes a host's politeness schedule (the `schedules` value).
pub fn encode_schedule(s: &Schedule) -> Result<Vec<u8>, CodecError> {
    let stored = StoredSchedule {
        next_allowed_ms: s.next_allowed_ms,
        last_delay_ms: s.last_delay_ms,
        failures: s.failures,
        parked_until_ms: s.parked_until_ms,
    };
    encode_value(SCHEDULE, &stored)
}

/// Decodes [`encode_schedule`]'s form, or an earlier release's JSON.
pub fn decode_schedule(bytes: &[u8]) -> Result<Schedule, CodecError> {
    let s: StoredSchedule = decode_value(SCHEDULE, bytes)?;
    Ok(Schedule {
        next_allowed_ms: s.next_allowed_ms,
        last_delay_ms: s.last_delay_ms,
        failures: s.failures,
        parked_until_ms: s.parked_until_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::encode_legacy_queue_value;

    #[test]
    fn recrawl_keys_sort_by_host_then_due_time() {
        let fp = Fingerprint(u128::MAX);
        let early = recrawl_key("a.test", 5, fp);
        let late = recrawl_key("a.test", 256, Fingerprint(0));
        assert!(early < late);
        assert!(late < recrawl_key("a.test.b", 0, fp));
        assert_eq!(recrawl_key_due(&late), Some(256));
        assert_eq!(queue_key_host(&late), Some("a.test"));
        assert_eq!(recrawl_key_due(b"a.test"), None);
    }

    #[test]
    fn queue_keys_group_by_host_and_priority_in_sequence_order() {
        let rank = Rank::FIFO;
        let a1 = queue_key("a.test", Priority::NORMAL, rank, 1);
        let a2 = queue_key("a.test", Priority::NORMAL, rank, 256);
        let a0 = queue_key("a.test", Priority::SEED, rank, 900);
        let ab = queue_key("a.test.b", Priority::SEED, rank, 0);
        assert!(a1 < a2);
        assert!(a0 < a1, "higher priority sorts first");
        assert!(a1.starts_with(&queue_prefix("a.test", Priority::NORMAL)));
        assert!(a0.starts_with(&host_prefix("a.test")));
        assert!(!ab.starts_with(&host_prefix("a.test")));
        assert_eq!(queue_key_host(&a2), Some("a.test"));
        assert_eq!(queue_key_priority(&a0), Some(Priority::SEED));
    }

    #[test]
    fn within_a_level_the_richer_rank_sorts_first_then_admission_order() {
        use crate::frontier::importance::Cash;
        let rich = Rank::of(Cash::SEED);
        let poor = Rank::of(Cash::new(0.001));
        let late_rich = queue_key("a.test", Priority::NORMAL, rich, 900);
        let early_poor = queue_key("a.test", Priority::NORMAL, poor, 1);
        let later_poor = queue_key("a.test", Priority::NORMAL, poor, 2);
        assert!(late_rich < early_poor && early_poor < later_poor);
        assert!(rank_start("a.test", Priority::NORMAL, poor) < early_poor);
        assert!(rank_start("a.test", Priority::NORMAL, poor) > late_rich);
        assert_eq!(queue_key_rank(&late_rich), Some(rich));
        assert_eq!(queue_key_host(&late_rich), Some("a.test"));
        // A key written before ranks has none.
        let mut old = queue_prefix("a.test", Priority::NORMAL);
        old.extend_from_slice(&7u64.to_be_bytes());
        assert_eq!(queue_key_rank(&old), None);
        assert!(old < late_rich, "old keys sort first in their level");
    }

    fn queue_values() -> Vec<QueueValue> {
        [
            EntryKind::Page,
            EntryKind::Redirected { hops: 4 },
            EntryKind::Sitemap { submitter: None },
            EntryKind::Sitemap {
                submitter: Some("b.test".into()),
            },
        ]
        .into_iter()
        .map(|kind| QueueValue {
            fp: Fingerprint(42 << 100 | 7),
            depth: 3,
            kind,
            url: "http://a.test/ü".into(),
            provenance: Provenance::seed(),
        })
        .collect()
    }

    #[test]
    fn queue_values_round_trip_with_a_version_byte() {
        use crate::frontier::provenance::Hop;
        let via: Arc<str> = Arc::from("http://a.test/from");
        for (i, mut v) in queue_values().into_iter().enumerate() {
            let bytes = v.encode().unwrap();
            assert_eq!(bytes[0], QUEUE_WITH_PROVENANCE);
            assert_eq!(QueueValue::decode(&bytes).unwrap(), v);
            // A seed's costs two bytes over the unversioned layout.
            assert!(
                bytes.len() <= encode_legacy_queue_value(&v).len() + 2,
                "{v:?}"
            );
            // A found URL's keeps where it was found.
            let hop = [Hop::Link, Hop::Redirect, Hop::Manifest][i % 3];
            v.provenance = Provenance::seed().then(&via, Hop::Link).then(&via, hop);
            let bytes = v.encode().unwrap();
            assert_eq!(QueueValue::decode(&bytes).unwrap(), v);
        }
    }

    #[test]
    fn a_queue_value_written_before_provenance_reads_as_a_seeds() {
        for v in queue_values() {
            let kind = match &v.kind {
                EntryKind::Page => StoredKind::Page,
                EntryKind::Redirected { hops } => StoredKind::Redirected { hops: *hops },
                EntryKind::Sitemap { submitter } => StoredKind::Sitemap {
                    submitter: submitter.as_deref().map(Cow::Borrowed),
                },
            };
            let old = StoredQueueValue {
                fp: v.fp.to_bytes(),
                depth: v.depth,
                kind,
                url: Cow::Borrowed(&v.url),
            };
            let bytes = encode_value(QueueValue::WHAT, &old).unwrap();
            assert_eq!(bytes[0], VERSION);
            assert_eq!(QueueValue::decode(&bytes).unwrap(), v);
        }
    }

    #[test]
    fn legacy_queue_values_still_decode() {
        for v in queue_values() {
            let old = encode_legacy_queue_value(&v);
            assert_eq!(QueueValue::decode_legacy(&old).unwrap(), v);
        }
        assert!(QueueValue::decode_legacy(&[0; 5]).is_err());
        assert_eq!(
            QueueValue::decode_legacy(&[0; 21][..])
                .map(|v| v.kind)
                .unwrap(),
            EntryKind::Page
        );
        let mut bad = vec![0; 20];
        bad.extend_from_slice(&[2, 200, 0]);
        let err = QueueValue::decode_legacy(&bad).unwrap_err();
        assert!(err.to_string().contains("queue entry"), "{err}");
    }

    #[test]
    fn decode_errors_name_the_value_and_the_fault() {
        let v = &queue_values()[0];
        let mut bytes = v.encode().unwrap();
        bytes[0] = 9;
        let err = QueueValue::decode(&bytes).unwrap_err();
        assert!(
            matches!(err, CodecError::UnknownVersion { version: 9, .. }),
            "{err:?}"
        );
        assert_eq!(err.to_string(), "queue entry: unknown format version 9");
        let mut long = v.encode().unwrap();
        long.push(0);
        assert!(matches!(
            QueueValue::decode(&long),
            Err(CodecError::Trailing { extra: 1, .. })
        ));
        let short = &v.encode().unwrap()[..10];
        assert!(matches!(
            QueueValue::decode(short),
            Err(CodecError::Postcard { .. })
        ));
        assert!(matches!(
            decode_schedule(&[]),
            Err(CodecError::Empty {
                what: "politeness schedule"
            })
        ));
        assert!(matches!(
            decode_schedule(b"{\"next_allowed_ms\":"),
            Err(CodecError::Json { .. })
        ));
    }

    fn robots(body: Vec<u8>) -> BTreeMap<String, RobotsRecord> {
        let mut records = BTreeMap::new();
        records.insert(
            "http://a.test:80".to_owned(),
            RobotsRecord {
                retry: None,
                status: Some(200),
                fetched_at_ms: 1_700_000_000_000,
                body,
            },
        );
        records.insert(
            "https://a.test:443".to_owned(),
            RobotsRecord {
                retry: None,
                status: None,
                fetched_at_ms: 5,
                body: Vec::new(),
            },
        );
        records
    }

    #[test]
    fn a_500_kib_robots_body_is_stored_as_500_kib() {
        let body: Vec<u8> = (0..500 * 1024).map(|i| (i % 251) as u8).collect();
        let records = robots(body.clone());
        let bytes = encode_robots(&records).unwrap();
        // The body, plus two origins, lengths and numbers: well under 100
        // bytes of overhead (JSON would spend up to four bytes per byte).
        assert!(bytes.len() >= body.len(), "{}", bytes.len());
        assert!(bytes.len() < body.len() + 100, "{}", bytes.len());
        assert_eq!(decode_robots(&bytes).unwrap(), records);
    }

    #[test]
    fn host_values_written_as_json_by_earlier_releases_still_decode() {
        let records = robots(b"User-agent: *\nDisallow: /x".to_vec());
        let json = serde_json::to_vec(&records).unwrap();
        assert!(json.windows(4).any(|w| w == b"[85,"), "a body as numbers");
        assert_eq!(decode_robots(&json).unwrap(), records);
        let schedule = Schedule {
            next_allowed_ms: 42,
            last_delay_ms: 1500,
            failures: 2,
            parked_until_ms: 9,
        };
        let json = serde_json::to_vec(&schedule).unwrap();
        assert_eq!(decode_schedule(&json).unwrap(), schedule);
        let bytes = encode_schedule(&schedule).unwrap();
        assert_eq!(bytes[0], VERSION);
        assert_eq!(decode_schedule(&bytes).unwrap(), schedule);
    }
}
