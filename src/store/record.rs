//! The `urls` value: what the crawl knows about one URL, for its whole
//! life (see [`crate::frontier::lifecycle`] for the transitions).
//!
//! # Format
//!
//! Written as [`RECORD_VERSION`] (0x80) followed by the postcard encoding
//! of [`StoredRecord`]. Earlier releases wrote seven fixed bytes (state tag
//! 1–7, depth, status) with no version byte; their first byte is never
//! 0x80 or more, so [`UrlRecord::decode`] tells the two apart exactly and
//! reads the old form as a record without history. Old records are not
//! rewritten in bulk: each is written in the new form the next time its URL
//! changes state (a store of a billion URLs is not rewritten at open).
//!
//! A queued URL's record stays small (about a dozen bytes): everything
//! about fetches is `None` or zero until the URL is fetched.
//!
//! A URL queued under `[frontier] ordering = "importance"` also notes
//! where its queue entry is ([`QueueSlot`]): version [`SLOTTED_VERSION`]
//! (0x81), the same postcard body followed by the slot's. In-links found
//! later move the entry up (`admission.rs`), and the slot is how it is
//! found without scanning the host's queue. The slot is written only while
//! the URL is queued; a record that leaves that state is written as 0x80
//! again.

use serde::{Deserialize, Serialize};

use super::codec::CodecError;
use crate::frontier::recrawl::ChangeHistory;

/// The version byte of records written now.
pub const RECORD_VERSION: u8 = 0x80;
/// The version byte of a queued record that notes its [`QueueSlot`].
pub const SLOTTED_VERSION: u8 = 0x81;

/// Where a queued URL's entry is in its host's queue: the parts of its
/// key besides the host (`codec::queue_key`). Only a hint: the entry is
/// read at this key before anything moves it, and a slot whose key is gone
/// (the URL was taken and completed) moves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueSlot {
    /// The priority level.
    pub level: u8,
    /// The rank's steps (`importance::Rank`).
    pub rank: u16,
    /// The sequence number.
    pub seq: u64,
}

/// Why a URL left the crawl.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Removal {
    /// Answered 404 or 410 on two fetches in a row.
    Gone,
    /// robots.txt disallows it now, after it was fetched.
    Disallowed,
    /// A permanent redirect (301, 308) moved it; the target is crawled
    /// instead.
    Moved,
    /// An operator blocked its host or domain while it was queued.
    Blocked,
}

impl Removal {
    /// The reason as written in events and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Removal::Gone => "gone",
            Removal::Disallowed => "disallowed",
            Removal::Moved => "moved",
            Removal::Blocked => "blocked",
        }
    }
}

/// What the store knows about a URL it has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UrlState {
    /// Durably queued, not yet completed (possibly in flight).
    Queued,
    /// Fetched and fully processed, with its HTTP status; due again at
    /// [`UrlRecord::next_due_ms`] if that is set.
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
    /// A try failed and the URL waits to be tried again (its tries are in
    /// [`UrlRecord::tries`]).
    RetryDue,
    /// Removed from the crawl: not fetched again, links to it do not bring
    /// it back; only a seed, or a sitemap entry modified after
    /// [`UrlRecord::removed_ms`], re-admits it.
    Gone(Removal),
}

/// Failed tries of the current fetch of a URL.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tries {
    /// Tries that failed (errors, 5xx, timeouts).
    pub failed: u32,
    /// Tries the server throttled (429/503 with Retry-After).
    pub throttled: u32,
}

/// Where a payload is stored in full: what a revisit record refers to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredCopy {
    /// `WARC-Target-URI` of the record holding the payload.
    pub uri: String,
    /// Its `WARC-Date`.
    pub date: String,
    /// Its `WARC-Record-ID`.
    pub record_id: String,
}

/// The last fetch of a URL that got a response.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Visit {
    /// When the request started (Unix ms).
    pub at_ms: u64,
    /// HTTP status (a 304 keeps the status of the copy it confirmed).
    pub status: u16,
    /// The response's `ETag`, sent back as `If-None-Match`.
    pub etag: Option<String>,
    /// The response's `Last-Modified`, sent back as `If-Modified-Since`.
    pub last_modified: Option<String>,
    /// SHA-256 of the payload of the copy on record.
    pub digest: Option<[u8; 32]>,
    /// Simhash of its visible text (HTML pages).
    pub simhash: Option<u64>,
    /// Where that payload is stored in full, if it was archived.
    pub copy: Option<StoredCopy>,
}

/// The `urls` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlRecord {
    /// Where the URL is in its life.
    pub state: UrlState,
    /// Hops from the seed it was admitted at.
    pub depth: u32,
    /// Failed tries of the fetch in progress.
    pub tries: Tries,
    /// The last fetch that got a response.
    pub last: Option<Visit>,
    /// Visits compared with the one before, for the change-rate estimate.
    pub history: ChangeHistory,
    /// The revisit interval in force (ms; 0 before the first fetch).
    pub interval_ms: u64,
    /// When the URL is due to be fetched again (Unix ms), if it is.
    pub next_due_ms: Option<u64>,
    /// Consecutive fetches answered 404 or 410.
    pub misses: u8,
    /// When it was removed (Unix ms), if it is [`UrlState::Gone`].
    pub removed_ms: Option<u64>,
    /// Where its queue entry is, while it is queued under importance
    /// ordering (see the module docs).
    pub slot: Option<QueueSlot>,
}

impl UrlRecord {
    /// A record in `state` with no fetch history.
    pub fn new(state: UrlState, depth: u32) -> Self {
        UrlRecord {
            state,
            depth,
            tries: Tries::default(),
            last: None,
            history: ChangeHistory::default(),
            interval_ms: 0,
            next_due_ms: None,
            misses: 0,
            removed_ms: None,
            slot: None,
        }
    }

    const WHAT: &'static str = "url record";

    /// The versioned encoding (see the module docs).
    pub fn encode(&self) -> Result<Vec<u8>, CodecError> {
        let stored = StoredRecord {
            state: self.state,
            depth: self.depth,
            tries: self.tries,
            last: self.last.clone(),
            visits: self.history.visits,
            changes: self.history.changes,
            span_ms: self.history.span.as_millis().min(u64::MAX as u128) as u64,
            interval_ms: self.interval_ms,
            next_due_ms: self.next_due_ms,
            misses: self.misses,
            removed_ms: self.removed_ms,
        };
        let postcard = |source| CodecError::Postcard {
            what: Self::WHAT,
            source,
        };
        match self.slot.filter(|_| self.state == UrlState::Queued) {
            None => postcard::to_extend(&stored, vec![RECORD_VERSION]).map_err(postcard),
            Some(slot) => {
                let bytes =
                    postcard::to_extend(&stored, vec![SLOTTED_VERSION]).map_err(postcard)?;
                postcard::to_extend(&slot, bytes).map_err(postcard)
            }
        }
    }

    /// Decodes [`UrlRecord::encode`]'s form, or the seven bytes of earlier
    /// releases.
    pub fn decode(bytes: &[u8]) -> Result<Self, CodecError> {
        match bytes.first() {
            None => Err(CodecError::Empty { what: Self::WHAT }),
            Some(&version @ (RECORD_VERSION | SLOTTED_VERSION)) => {
                let postcard = |source| CodecError::Postcard {
                    what: Self::WHAT,
                    source,
                };
                let (s, rest): (StoredRecord, _) =
                    postcard::take_from_bytes(&bytes[1..]).map_err(postcard)?;
                let (slot, rest) = match version {
                    // Read, and kept only by a queued URL (as written).
                    SLOTTED_VERSION => {
                        let (slot, rest): (QueueSlot, _) =
                            postcard::take_from_bytes(rest).map_err(postcard)?;
                        (Some(slot).filter(|_| s.state == UrlState::Queued), rest)
                    }
                    _ => (None, rest),
                };
                if !rest.is_empty() {
                    return Err(CodecError::Trailing {
                        what: Self::WHAT,
                        extra: rest.len(),
                    });
                }
                Ok(UrlRecord {
                    state: s.state,
                    depth: s.depth,
                    tries: s.tries,
                    last: s.last,
                    history: ChangeHistory {
                        visits: s.visits,
                        changes: s.changes,
                        span: std::time::Duration::from_millis(s.span_ms),
                    },
                    interval_ms: s.interval_ms,
                    next_due_ms: s.next_due_ms,
                    misses: s.misses,
                    removed_ms: s.removed_ms,
                    slot,
                })
            }
            Some(&tag) if tag < RECORD_VERSION => {
                Self::decode_legacy(bytes).ok_or(CodecError::Malformed {
                    what: "url record (seven-byte form)",
                })
            }
            Some(&version) => Err(CodecError::UnknownVersion {
                what: Self::WHAT,
                version,
            }),
        }
    }

    /// The seven bytes of earlier releases: state tag, depth (LE), status
    /// (LE). A fetched URL of such a store has no validators or digest, so
    /// its first refetch is unconditional and starts its history.
    fn decode_legacy(bytes: &[u8]) -> Option<Self> {
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
        Some(UrlRecord::new(state, depth))
    }

    /// The seven-byte form of earlier releases (for migration tests).
    #[cfg(test)]
    pub fn encode_legacy(state: UrlState, depth: u32) -> Option<[u8; 7]> {
        let (tag, status) = match state {
            UrlState::Queued => (1, 0),
            UrlState::Fetched(s) => (2, s),
            UrlState::Failed => (3, 0),
            UrlState::Disallowed => (4, 0),
            UrlState::RobotsUnreachable => (5, 0),
            UrlState::Excluded => (6, 0),
            UrlState::Denied => (7, 0),
            UrlState::RetryDue | UrlState::Gone(_) => return None,
        };
        let mut out = [0u8; 7];
        out[0] = tag;
        out[1..5].copy_from_slice(&depth.to_le_bytes());
        out[5..7].copy_from_slice(&status.to_le_bytes());
        Some(out)
    }

    /// The record's place in the URL lifecycle at `now_ms`.
    pub fn lifecycle(&self, now_ms: u64) -> Lifecycle {
        match self.state {
            UrlState::Queued => Lifecycle::Queued,
            UrlState::RetryDue => Lifecycle::RetryDue,
            UrlState::Fetched(_) if self.next_due_ms.is_some_and(|d| d <= now_ms) => {
                Lifecycle::RecrawlDue
            }
            UrlState::Fetched(_) => Lifecycle::Fetched,
            UrlState::Gone(_) => Lifecycle::Gone,
            UrlState::Disallowed => Lifecycle::Disallowed,
            UrlState::Excluded => Lifecycle::Excluded,
            UrlState::Failed | UrlState::RobotsUnreachable | UrlState::Denied => Lifecycle::Failed,
        }
    }
}

/// The named stages of a URL's life, as operators see them. "Fetching"
/// (in flight) is not stored: writing every dispatch would double the
/// writes per page, and a URL in flight at a crash must be fetched again
/// anyway, which is exactly what its stored `Queued` (or due) state does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Lifecycle {
    /// Waiting for its first fetch.
    Queued,
    /// A try failed; it will be tried again.
    RetryDue,
    /// Fetched; due again later.
    Fetched,
    /// Fetched, and its revisit time has come.
    RecrawlDue,
    /// Removed (404/410 twice, newly disallowed, moved).
    Gone,
    /// Never fetched: robots.txt disallows it.
    Disallowed,
    /// Never fetched: out of scope by extension.
    Excluded,
    /// Given up: no response, robots.txt unreachable, address denied.
    Failed,
}

/// The stored shape of a [`UrlRecord`]; fields are only appended in a new
/// version.
#[derive(Serialize, Deserialize)]
struct StoredRecord {
    state: UrlState,
    depth: u32,
    tries: Tries,
    last: Option<Visit>,
    visits: u32,
    changes: u32,
    span_ms: u64,
    interval_ms: u64,
    next_due_ms: Option<u64>,
    misses: u8,
    removed_ms: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> UrlRecord {
        UrlRecord {
            state: UrlState::Fetched(200),
            depth: 3,
            tries: Tries {
                failed: 1,
                throttled: 2,
            },
            last: Some(Visit {
                at_ms: 1_700_000_000_000,
                status: 200,
                etag: Some("\"v1\"".into()),
                last_modified: Some("Tue, 15 Nov 1994 12:45:26 GMT".into()),
                digest: Some([7; 32]),
                simhash: Some(0xdead_beef),
                copy: Some(StoredCopy {
                    uri: "http://a.test/x".into(),
                    date: "2026-11-30T12:00:00Z".into(),
                    record_id: "<urn:uuid:1>".into(),
                }),
            }),
            history: ChangeHistory {
                visits: 4,
                changes: 1,
                span: std::time::Duration::from_secs(3600),
            },
            interval_ms: 86_400_000,
            next_due_ms: Some(1_700_086_400_000),
            misses: 1,
            removed_ms: None,
            slot: None,
        }
    }

    const SLOT: QueueSlot = QueueSlot {
        level: 2,
        rank: 1_900,
        seq: 70_000,
    };

    #[test]
    fn records_round_trip_with_the_version_byte() {
        let mut gone = full();
        gone.state = UrlState::Gone(Removal::Moved);
        gone.removed_ms = Some(9);
        for rec in [
            UrlRecord::new(UrlState::Queued, 0),
            UrlRecord::new(UrlState::RetryDue, u32::MAX),
            full(),
            gone,
        ] {
            let bytes = rec.encode().unwrap();
            assert_eq!(bytes[0], RECORD_VERSION);
            assert_eq!(UrlRecord::decode(&bytes).unwrap(), rec);
        }
        // A queued URL's record stays small.
        let queued = UrlRecord::new(UrlState::Queued, 5).encode().unwrap();
        assert!(queued.len() <= 16, "{}", queued.len());
    }

    #[test]
    fn a_queued_record_keeps_its_slot_and_drops_it_once_it_leaves_the_queue() {
        let mut queued = UrlRecord::new(UrlState::Queued, 5);
        queued.slot = Some(SLOT);
        let bytes = queued.encode().unwrap();
        assert_eq!(bytes[0], SLOTTED_VERSION);
        assert!(bytes.len() <= 24, "{}", bytes.len());
        assert_eq!(UrlRecord::decode(&bytes).unwrap(), queued);
        // Fetched, the slot is not written (the entry is gone).
        let mut fetched = queued.clone();
        fetched.state = UrlState::Fetched(200);
        let bytes = fetched.encode().unwrap();
        assert_eq!(bytes[0], RECORD_VERSION);
        assert_eq!(UrlRecord::decode(&bytes).unwrap().slot, None);
        // A slot beside another state is not kept (it was never written
        // so), and the record reads back as it encodes.
        let mut odd = postcard::to_extend(
            &StoredRecord {
                state: UrlState::Fetched(200),
                depth: 5,
                tries: Tries::default(),
                last: None,
                visits: 0,
                changes: 0,
                span_ms: 0,
                interval_ms: 0,
                next_due_ms: None,
                misses: 0,
                removed_ms: None,
            },
            vec![SLOTTED_VERSION],
        )
        .unwrap();
        odd = postcard::to_extend(&SLOT, odd).unwrap();
        let read = UrlRecord::decode(&odd).unwrap();
        assert_eq!(read.slot, None);
        assert_eq!(UrlRecord::decode(&read.encode().unwrap()).unwrap(), read);
        // A slotted record cut short, or with bytes after its slot, is an
        // error, not a guess.
        let bytes = queued.encode().unwrap();
        assert!(UrlRecord::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            UrlRecord::decode(&longer),
            Err(CodecError::Trailing { .. })
        ));
    }

    #[test]
    fn seven_byte_records_of_earlier_releases_still_decode() {
        for state in [
            UrlState::Queued,
            UrlState::Fetched(404),
            UrlState::Failed,
            UrlState::Disallowed,
            UrlState::RobotsUnreachable,
            UrlState::Excluded,
            UrlState::Denied,
        ] {
            let old = UrlRecord::encode_legacy(state, 7).unwrap();
            assert_eq!(
                UrlRecord::decode(&old).unwrap(),
                UrlRecord::new(state, 7),
                "{state:?}"
            );
        }
        assert!(matches!(
            UrlRecord::decode(&[9, 0, 0, 0, 0, 0, 0]),
            Err(CodecError::Malformed { .. })
        ));
        assert!(UrlRecord::decode(&[1]).is_err());
        assert!(matches!(
            UrlRecord::decode(&[0x82, 0]),
            Err(CodecError::UnknownVersion { version: 0x82, .. })
        ));
        let mut long = full().encode().unwrap();
        long.push(0);
        assert!(matches!(
            UrlRecord::decode(&long),
            Err(CodecError::Trailing { extra: 1, .. })
        ));
    }

    #[test]
    fn the_lifecycle_names_the_stage() {
        let mut rec = full();
        assert_eq!(rec.lifecycle(1_700_000_000_000), Lifecycle::Fetched);
        assert_eq!(rec.lifecycle(1_700_086_400_000), Lifecycle::RecrawlDue);
        rec.next_due_ms = None;
        assert_eq!(rec.lifecycle(u64::MAX), Lifecycle::Fetched);
        rec.state = UrlState::Gone(Removal::Gone);
        assert_eq!(rec.lifecycle(0), Lifecycle::Gone);
    }
}
