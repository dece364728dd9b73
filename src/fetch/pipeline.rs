//! The pipeline bound: at most the fetch slots plus `[fetch]
//! max_pipeline_pages` pages are in a node's pipeline at once, and new
//! pages wait while those hold `[fetch] max_pipeline_bytes` of bodies.
//!
//! Fetching a page costs the node less CPU than parsing, archiving and
//! completing it, so without a bound the fetcher runs ahead and fetched
//! pages pile up in memory: in the side-by-side bench (500 loopback hosts
//! × 40 pages) up to ~11,000 pages waited to be archived, and the node's
//! peak RSS was twice what it is with the default bound. With the bound,
//! fetching waits for the pipeline: back-pressure, never a drop.
//!
//! The places are the fetch slots plus `max_pipeline_pages` and follow the
//! slots when `concurrency = "auto"` moves them ([`PipelineBound::resize`]):
//! a request in flight holds a place the slots brought, so pages being
//! processed always have `max_pipeline_pages` places, however many slow
//! requests are out. (Before, the places were one number: on a slow web the
//! requests waiting on their servers took them and capped the requests in
//! flight below the slots.) The bytes are counted once a response is in
//! ([`PipelinePermit::hold_bytes`]); they can exceed the budget by the
//! bodies of requests already in flight, never by more.
//!
//! A page's place is taken by its request, before the node's
//! [`super::gate::FetchGate`] and its fetch slot (so a request waiting here
//! spends neither a slot nor a turn of the rate limit), and carried with
//! its response ([`super::FetchResponse::pipeline`]); it is given back
//! when the last copy of the response is dropped: the page completed, or
//! not to be processed (a failed request, a retry), or dropped with its
//! host (failed, stopped, drained). The place lives as long as the page's
//! response, so the bound is one of memory (with the bodies' cap,
//! `max_body_bytes`), and it holds on every path without bookkeeping.
//!
//! Politeness: a host's request waits here only after the host's
//! politeness allowed it, so waiting only ever lengthens the host's gap.
//!
//! No deadlock: a place is held only by a page request and then by its
//! processing (parse, dedup question, archive, admission of its links,
//! completion), and none of those steps waits for a request. robots.txt
//! requests take no place: a host needs its robots.txt before any of its
//! pages, and its response is read at once by the host (archived as a side
//! record); what they hold is bounded by the active hosts instead
//! (`[frontier] max_active_hosts`, one request in flight each by default).
//! A failed processing step that will run again (the store down) keeps its
//! page and so its place: fetching slows down rather than piling up pages
//! that cannot be completed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::metrics::{GaugeHold, HeldGauge};

/// The node's places for pages in the pipeline.
#[derive(Debug, Clone)]
pub struct PipelineBound {
    places: Arc<Semaphore>,
    /// Places that exist (free or held), moved by [`PipelineBound::resize`].
    size: Arc<Mutex<usize>>,
    in_use: Arc<HeldGauge>,
    bytes: Arc<BodyBytes>,
}

/// The body bytes held by pages in the pipeline, against their budget.
#[derive(Debug)]
struct BodyBytes {
    budget: usize,
    held: watch::Sender<usize>,
    gauge: prometheus::IntGauge,
}

impl PipelineBound {
    /// `max` places (at least 1: 0 would never let a page in), counted in
    /// `in_use` (`trawl_pipeline_pages`); new pages wait while the bodies
    /// held reach `max_bytes` (counted in `bytes_gauge`,
    /// `trawl_pipeline_bytes`).
    pub fn new(
        max: usize,
        max_bytes: usize,
        in_use: Arc<HeldGauge>,
        bytes_gauge: prometheus::IntGauge,
    ) -> Self {
        let max = max.max(1);
        PipelineBound {
            places: Arc::new(Semaphore::new(max)),
            size: Arc::new(Mutex::new(max)),
            in_use,
            bytes: Arc::new(BodyBytes {
                budget: max_bytes.max(1),
                held: watch::Sender::new(0),
                gauge: bytes_gauge,
            }),
        }
    }

    /// Moves the number of places towards `max` (at least 1): at once when
    /// growing, as pages leave when shrinking (a page keeps its place).
    pub fn resize(&self, max: usize) {
        let mut size = self.size.lock().expect("pipeline size lock");
        *size = super::inflight::resize(&self.places, *size, max.max(1));
    }

    /// Waits for a place, in arrival order (the semaphore is fair: no
    /// request waits forever while later ones pass), then for the bodies
    /// held to be under their budget.
    pub async fn enter(&self) -> PipelinePermit {
        let permit = self
            .places
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        let budget = self.bytes.budget;
        // The sender lives as long as the bound: this cannot fail.
        let _ = self
            .bytes
            .held
            .subscribe()
            .wait_for(|held| *held < budget)
            .await;
        PipelinePermit {
            bytes: PermitBytes {
                count: AtomicUsize::new(0),
                of: self.bytes.clone(),
            },
            _in_use: GaugeHold::new(&self.in_use),
            _permit: permit,
        }
    }

    /// Places free now.
    pub fn available(&self) -> usize {
        self.places.available_permits()
    }

    /// Body bytes the pages in the pipeline hold now.
    pub fn bytes_held(&self) -> usize {
        *self.bytes.held.borrow()
    }
}

/// One page's place in the pipeline, given back when dropped.
#[must_use = "the place is given back when this value is dropped"]
#[derive(Debug)]
pub struct PipelinePermit {
    // Fields drop in order: the bytes and the count go down before the
    // place is free, so the next page's count never meets this one's (the
    // gauge's peak never exceeds the bound).
    bytes: PermitBytes,
    _in_use: GaugeHold,
    _permit: OwnedSemaphorePermit,
}

impl PipelinePermit {
    /// Counts the page's body against the pipeline's byte budget until the
    /// place is given back.
    pub fn hold_bytes(&self, bytes: usize) {
        self.bytes.count.fetch_add(bytes, Ordering::Relaxed);
        self.bytes.of.add(bytes as isize);
    }
}

/// The bytes one permit counts, given back with it.
#[derive(Debug)]
struct PermitBytes {
    count: AtomicUsize,
    of: Arc<BodyBytes>,
}

impl Drop for PermitBytes {
    fn drop(&mut self) {
        let count = *self.count.get_mut();
        if count > 0 {
            self.of.add(-(count as isize));
        }
    }
}

impl BodyBytes {
    fn add(&self, delta: isize) {
        self.held.send_modify(|held| {
            *held = held.saturating_add_signed(delta);
            self.gauge.set(*held as i64);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::FetchResponse;
    use crate::metrics::Metrics;

    fn bound(max: usize) -> (PipelineBound, Arc<HeldGauge>) {
        bound_of(max, usize::MAX)
    }

    fn bound_of(max: usize, max_bytes: usize) -> (PipelineBound, Arc<HeldGauge>) {
        let metrics = Metrics::new();
        let gauge = metrics.pipeline_pages.clone();
        let bound = PipelineBound::new(max, max_bytes, gauge.clone(), metrics.pipeline_bytes);
        (bound, gauge)
    }

    #[actix_rt::test]
    async fn a_full_pipeline_holds_requests_until_a_page_leaves() {
        let (bound, gauge) = bound(2);
        let first = bound.enter().await;
        let second = bound.enter().await;
        assert_eq!((bound.available(), gauge.get()), (0, 2));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let waiting = bound.clone();
        actix_rt::spawn(async move {
            let third = waiting.enter().await;
            tx.send(third).unwrap();
        });
        // The third request is parked on the full pipeline.
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err());
        drop(first);
        let third = rx.recv().await.expect("let in once a place is free");
        assert_eq!((bound.available(), gauge.get()), (0, 2));
        drop((second, third));
        assert_eq!((bound.available(), gauge.get(), gauge.peak()), (2, 0, 2));
    }

    #[actix_rt::test]
    async fn the_place_goes_with_the_last_copy_of_the_response() {
        let (bound, gauge) = bound(1);
        let mut response = FetchResponse::synthetic(200, &[], "<p>page</p>");
        response.pipeline = Some(Arc::new(bound.enter().await));
        // The host keeps one copy (its task), the archive gets another.
        let task = Arc::new(response);
        let archive = task.clone();
        let copied = (*task).clone();
        drop(task);
        drop(archive);
        assert_eq!(bound.available(), 0, "a copy still holds the page");
        drop(copied);
        assert_eq!((bound.available(), gauge.get()), (1, 0));
    }

    #[actix_rt::test]
    async fn a_waiting_request_dropped_takes_no_place() {
        let (bound, gauge) = bound(1);
        let held = bound.enter().await;
        // A request whose host died while it waited: its future is dropped.
        let waiter = bound.clone();
        let task = actix_rt::spawn(async move { waiter.enter().await });
        tokio::task::yield_now().await;
        task.abort();
        assert!(task.await.is_err(), "aborted while waiting");
        drop(held);
        assert_eq!((bound.available(), gauge.get()), (1, 0));
    }

    #[actix_rt::test]
    async fn bodies_over_their_budget_hold_new_pages_until_processed() {
        let (bound, _) = bound_of(10, 1000);
        let big = bound.enter().await;
        big.hold_bytes(600);
        let small = bound.enter().await;
        small.hold_bytes(500);
        assert_eq!(bound.bytes_held(), 1100);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let waiting = bound.clone();
        actix_rt::spawn(async move {
            tx.send(waiting.enter().await).unwrap();
        });
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "1,100 bytes held of 1,000");
        drop(small);
        let third = rx.recv().await.expect("under the budget again");
        assert_eq!(bound.bytes_held(), 600);
        drop((big, third));
        assert_eq!((bound.bytes_held(), bound.available()), (0, 10));
    }

    #[actix_rt::test]
    async fn resizing_grows_at_once_and_shrinks_as_pages_leave() {
        let (bound, _) = bound(2);
        let first = bound.enter().await;
        let second = bound.enter().await;
        bound.resize(3);
        let third = bound.enter().await;
        bound.resize(1);
        assert_eq!(bound.available(), 0);
        drop((first, second));
        bound.resize(1);
        assert_eq!(bound.available(), 0, "the third still holds the one place");
        drop(third);
        assert_eq!(bound.available(), 1);
    }

    #[test]
    fn zero_places_would_stop_the_crawl_and_mean_one() {
        let (bound, _) = bound(0);
        assert_eq!(bound.available(), 1);
    }
}
