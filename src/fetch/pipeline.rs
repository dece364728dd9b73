//! The pipeline bound: at most `[fetch] max_pipeline_pages` pages are in a
//! node's pipeline at once.
//!
//! Fetching a page costs the node less CPU than parsing, archiving and
//! completing it, so without a bound the fetcher runs ahead and fetched
//! pages pile up in memory: in the side-by-side bench (500 loopback hosts
//! × 40 pages) up to ~11,000 pages waited to be archived, and the node's
//! peak RSS was twice what it is with the default bound. With the bound,
//! fetching waits for the pipeline: back-pressure, never a drop.
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

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::metrics::{GaugeHold, HeldGauge};

/// The node's places for pages in the pipeline.
#[derive(Debug, Clone)]
pub struct PipelineBound {
    places: Arc<Semaphore>,
    in_use: Arc<HeldGauge>,
}

impl PipelineBound {
    /// `max` places (at least 1: 0 would never let a page in), counted in
    /// `in_use` (`trawl_pipeline_pages`).
    pub fn new(max: usize, in_use: Arc<HeldGauge>) -> Self {
        PipelineBound {
            places: Arc::new(Semaphore::new(max.max(1))),
            in_use,
        }
    }

    /// Waits for a place, in arrival order (the semaphore is fair: no
    /// request waits forever while later ones pass).
    pub async fn enter(&self) -> PipelinePermit {
        let permit = self
            .places
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed");
        PipelinePermit {
            _in_use: GaugeHold::new(&self.in_use),
            _permit: permit,
        }
    }

    /// Places free now.
    pub fn available(&self) -> usize {
        self.places.available_permits()
    }
}

/// One page's place in the pipeline, given back when dropped.
#[must_use = "the place is given back when this value is dropped"]
#[derive(Debug)]
pub struct PipelinePermit {
    // Fields drop in order: the count goes down before the place is free,
    // so the next page's count never meets this one's (the gauge's peak
    // never exceeds the bound).
    _in_use: GaugeHold,
    _permit: OwnedSemaphorePermit,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fetch::FetchResponse;
    use crate::metrics::Metrics;

    fn bound(max: usize) -> (PipelineBound, Arc<HeldGauge>) {
        let gauge = Metrics::new().pipeline_pages.clone();
        (PipelineBound::new(max, gauge.clone()), gauge)
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

    #[test]
    fn zero_places_would_stop_the_crawl_and_mean_one() {
        let (bound, _) = bound(0);
        assert_eq!(bound.available(), 1);
    }
}
