//! The admin API's host listings (`GET /api/v1/hosts`): which hosts are
//! busy, waiting, parked or blocked, sorted to bring the busiest, slowest,
//! failing and stuck ones first, a page at a time.
//!
//! A listing covers the hosts a partition is attending to: those with an
//! actor, those waiting in its due index (for a politeness delay, a park,
//! or their next refresh) and those held back by a block. A host with
//! nothing queued and nothing scheduled is not listed (a crawl can know
//! millions of them); `GET /api/v1/hosts/{host}` still answers for it.
//! Partitions and nodes each give their rows; [`select`] merges them, so
//! asking every holder for its first `offset + limit` rows and selecting
//! again gives the same page as one list of everything would.

use serde::{Deserialize, Serialize};

use super::host::HostSnapshot;

/// What a listed host is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// A request is in flight or may start now.
    Active,
    /// Work is queued or scheduled, and the host waits: its politeness
    /// delay, a Crawl-delay, a backoff, or the due time of its next
    /// refresh.
    Waiting,
    /// Parked after repeated failures (its queue is kept).
    Parked,
    /// Blocked by an operator.
    Blocked,
}

/// The order of a listing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SortKey {
    /// Most queued URLs first (the busiest).
    #[default]
    Queued,
    /// Slowest responses first (smoothed response time).
    ResponseTime,
    /// Most failed requests first, then most consecutive failures.
    Failures,
    /// Longest wait before the next request first (the stuck ones).
    Wait,
    /// Most responses first.
    Fetched,
    /// By name.
    Host,
}

/// The most rows one page gives.
pub const MAX_LIMIT: usize = 1_000;

/// What a listing asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    /// Only hosts in this condition.
    pub state: Option<Condition>,
    /// The order.
    pub sort: SortKey,
    /// Rows skipped.
    pub offset: usize,
    /// Rows given (1 to [`MAX_LIMIT`]).
    pub limit: usize,
}

impl Default for ListQuery {
    fn default() -> Self {
        ListQuery {
            state: None,
            sort: SortKey::default(),
            offset: 0,
            limit: 50,
        }
    }
}

impl ListQuery {
    /// The query each holder answers so that merging their answers gives
    /// this page: the first `offset + limit` rows.
    pub fn for_holders(&self) -> ListQuery {
        ListQuery {
            offset: 0,
            limit: self.offset.saturating_add(self.limit),
            ..*self
        }
    }
}

/// One listed host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct HostRow {
    /// The host.
    pub host: String,
    /// What it is doing.
    pub state: Condition,
    /// URLs queued (all priorities).
    pub queued: u64,
    /// Requests in flight.
    pub in_flight: u32,
    /// Milliseconds until it may be asked again (0: now).
    pub wait_ms: u64,
    /// Consecutive failures.
    pub failures: u32,
    /// Responses since its actor started.
    pub fetched: u64,
    /// Failed requests since its actor started.
    pub errors: u64,
    /// Smoothed response time, milliseconds.
    pub response_ms: Option<f64>,
    /// Whether an operator slowed it down.
    pub slowed: bool,
}

impl HostRow {
    /// The row of `snapshot`; `blocked` from the partition's blocks;
    /// `due_in_ms`: a dormant host's wait for its due time.
    pub fn of(snapshot: &HostSnapshot, blocked: bool, due_in_ms: u64) -> HostRow {
        let p = &snapshot.politeness;
        let wait_ms = if snapshot.active {
            p.next_allowed_in_ms
        } else {
            p.next_allowed_in_ms.max(due_in_ms)
        };
        let state = if blocked {
            Condition::Blocked
        } else if p.parked {
            Condition::Parked
        } else if p.in_flight > 0 || (snapshot.active && wait_ms == 0) {
            Condition::Active
        } else {
            Condition::Waiting
        };
        HostRow {
            host: snapshot.host.clone(),
            state,
            queued: snapshot.queued_by_priority.iter().sum(),
            in_flight: p.in_flight,
            wait_ms,
            failures: p.failures,
            fetched: snapshot.stats.fetched,
            errors: snapshot.stats.errors,
            response_ms: snapshot.stats.response_ms,
            slowed: p.slowdown.is_some(),
        }
    }
}

/// One page of a listing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostPage {
    /// Rows matching the query, over all holders asked.
    pub total: usize,
    /// The page.
    pub hosts: Vec<HostRow>,
}

/// Filters, sorts (ties by name, so pages are stable) and pages `rows`;
/// `total` counts rows matching before paging (add holders' totals when
/// merging: see [`merge`]).
pub fn select(rows: Vec<HostRow>, query: &ListQuery) -> HostPage {
    let mut rows: Vec<HostRow> = rows
        .into_iter()
        .filter(|r| query.state.is_none_or(|s| r.state == s))
        .collect();
    let total = rows.len();
    rows.sort_by(|a, b| order(a, b, query.sort).then_with(|| a.host.cmp(&b.host)));
    let hosts = rows
        .into_iter()
        .skip(query.offset)
        .take(query.limit)
        .collect();
    HostPage { total, hosts }
}

/// Merges holders' answers to [`ListQuery::for_holders`] into the page
/// `query` asks for.
pub fn merge(pages: Vec<HostPage>, query: &ListQuery) -> HostPage {
    let total = pages.iter().map(|p| p.total).sum();
    let rows = pages.into_iter().flat_map(|p| p.hosts).collect();
    HostPage {
        total,
        ..select(rows, query)
    }
}

fn order(a: &HostRow, b: &HostRow, key: SortKey) -> std::cmp::Ordering {
    let response = |r: &HostRow| r.response_ms.unwrap_or(-1.0);
    match key {
        SortKey::Queued => b.queued.cmp(&a.queued),
        SortKey::ResponseTime => response(b).total_cmp(&response(a)),
        SortKey::Failures => (b.errors, b.failures).cmp(&(a.errors, a.failures)),
        SortKey::Wait => b.wait_ms.cmp(&a.wait_ms),
        SortKey::Fetched => b.fetched.cmp(&a.fetched),
        SortKey::Host => std::cmp::Ordering::Equal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::host::{HostStats, PolitenessSnapshot};

    fn snapshot(host: &str, queued: u64, active: bool) -> HostSnapshot {
        HostSnapshot {
            host: host.into(),
            active,
            queued_by_priority: [queued, 0, 0, 0],
            ..Default::default()
        }
    }

    fn row(host: &str, queued: u64, errors: u64, response_ms: Option<f64>) -> HostRow {
        let mut s = snapshot(host, queued, true);
        s.stats = HostStats {
            fetched: 1,
            errors,
            response_ms,
        };
        HostRow::of(&s, false, 0)
    }

    #[test]
    fn conditions_follow_blocks_parks_flights_and_waits() {
        let mut s = snapshot("a.test", 3, true);
        assert_eq!(HostRow::of(&s, false, 0).state, Condition::Active);
        assert_eq!(HostRow::of(&s, true, 0).state, Condition::Blocked);
        s.politeness = PolitenessSnapshot {
            next_allowed_in_ms: 400,
            ..Default::default()
        };
        assert_eq!(HostRow::of(&s, false, 0).state, Condition::Waiting);
        s.politeness.in_flight = 1;
        assert_eq!(HostRow::of(&s, false, 0).state, Condition::Active);
        s.politeness.parked = true;
        assert_eq!(HostRow::of(&s, false, 0).state, Condition::Parked);
        // A dormant host waits for its due time even when its delay ran out.
        let dormant = snapshot("b.test", 1, false);
        let r = HostRow::of(&dormant, false, 9_000);
        assert_eq!((r.state, r.wait_ms), (Condition::Waiting, 9_000));
    }

    #[test]
    fn sorts_filter_and_pages_are_stable() {
        let rows = vec![
            row("c.test", 5, 0, Some(20.0)),
            row("a.test", 5, 2, Some(900.0)),
            row("b.test", 9, 1, None),
        ];
        let q = |sort, offset, limit| ListQuery {
            state: None,
            sort,
            offset,
            limit,
        };
        let names = |p: HostPage| p.hosts.into_iter().map(|r| r.host).collect::<Vec<_>>();
        assert_eq!(
            names(select(rows.clone(), &q(SortKey::Queued, 0, 10))),
            ["b.test", "a.test", "c.test"]
        );
        assert_eq!(
            names(select(rows.clone(), &q(SortKey::ResponseTime, 0, 10))),
            ["a.test", "c.test", "b.test"]
        );
        assert_eq!(
            names(select(rows.clone(), &q(SortKey::Failures, 1, 1))),
            ["b.test"]
        );
        let page = select(rows.clone(), &q(SortKey::Host, 1, 5));
        assert_eq!(page.total, 3);
        assert_eq!(names(page), ["b.test", "c.test"]);
        let parked = ListQuery {
            state: Some(Condition::Parked),
            ..q(SortKey::Queued, 0, 10)
        };
        assert_eq!(select(rows, &parked).total, 0);
    }

    #[test]
    fn merging_holders_pages_gives_the_page_of_everything() {
        let all: Vec<HostRow> = (0..40)
            .map(|i| row(&format!("h{i:02}.test"), (i * 7 % 13) as u64, 0, None))
            .collect();
        let query = ListQuery {
            state: None,
            sort: SortKey::Queued,
            offset: 5,
            limit: 7,
        };
        let holders: Vec<HostPage> = all
            .chunks(9)
            .map(|chunk| select(chunk.to_vec(), &query.for_holders()))
            .collect();
        assert_eq!(merge(holders, &query), select(all, &query));
    }
}
