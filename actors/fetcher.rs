//! FetcherPool: the global fetch slots.
//!
//! Runs HTTP requests and never decides what to fetch. At most
//! `fetch.concurrency` requests run at once across all hosts; more wait for
//! a slot in arrival order. Before its slot, a request passes the node's
//! [`FetchGate`]: held while the operator paused the node, metered by the
//! node-wide rate limit. Before the gate, a page request takes its place in
//! the node's pipeline ([`PipelineBound`]), handed over with its response:
//! while `[fetch] max_pipeline_pages` pages are being fetched, parsed,
//! archived or completed, no other page request starts. Lives on one
//! arbiter because awc's client is bound to its thread; a single thread
//! drives thousands of connections.

use std::rc::Rc;
use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::Semaphore;

use super::messages::{CloseConnections, Fetch};
use crate::config::Config;
use crate::fetch::gate::FetchGate;
use crate::fetch::pipeline::PipelineBound;
use crate::fetch::{FetchError, FetchResponse, HttpClient};
use crate::metrics::Metrics;

/// The fetch slots and the HTTP client.
pub struct FetcherPool {
    client: Rc<HttpClient>,
    slots: Rc<Semaphore>,
    pipeline: PipelineBound,
    gate: Arc<FetchGate>,
    metrics: Arc<Metrics>,
}

impl FetcherPool {
    /// A pool for `config` with the TLS setup `tls` (must be created on the
    /// arbiter it runs on).
    pub fn new(
        config: &Config,
        tls: Arc<rustls::ClientConfig>,
        gate: Arc<FetchGate>,
        metrics: Arc<Metrics>,
    ) -> Self {
        FetcherPool {
            client: Rc::new(HttpClient::new(config, tls, metrics.clone())),
            slots: Rc::new(Semaphore::new(config.fetch.concurrency)),
            pipeline: PipelineBound::new(
                config.fetch.max_pipeline_pages,
                metrics.pipeline_pages.clone(),
            ),
            gate,
            metrics,
        }
    }
}

impl Actor for FetcherPool {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Requests wait for slots, not for the mailbox. What can wait here
        // is bounded all the same: one request per permit of an active host,
        // and active hosts are capped (`[frontier] max_active_hosts`).
        ctx.set_mailbox_capacity(usize::MAX);
    }
}

impl Handler<CloseConnections> for FetcherPool {
    type Result = ();

    /// Stops the pool: its client, and with it every idle keep-alive
    /// connection, is dropped on this thread while the node's stop waits
    /// on the disk, instead of after it (a close per connection: ~70 ms
    /// for the side-by-side bench's 500 hosts). A request still running
    /// (abandoned at the drain's timeout) keeps its own handle on the
    /// client and ends as it would have.
    fn handle(&mut self, _: CloseConnections, ctx: &mut Self::Context) {
        ctx.stop();
    }
}

impl Handler<Fetch> for FetcherPool {
    type Result = ResponseFuture<Result<FetchResponse, FetchError>>;

    fn handle(&mut self, msg: Fetch, _: &mut Self::Context) -> Self::Result {
        let client = self.client.clone();
        let slots = self.slots.clone();
        let pipeline = self.pipeline.clone();
        let gate = self.gate.clone();
        let metrics = self.metrics.clone();
        Box::pin(async move {
            // First the place, then the gate: a request held here spends
            // no turn of the rate limit.
            let place = match msg.page {
                true => {
                    let waited = std::time::Instant::now();
                    let place = pipeline.enter().await;
                    metrics
                        .pipeline_wait
                        .observe(waited.elapsed().as_secs_f64());
                    Some(place)
                }
                false => None,
            };
            gate.pass().await;
            let _slot = slots.acquire().await.expect("semaphore is never closed");
            metrics
                .queue_wait
                .observe(msg.released.elapsed().as_secs_f64());
            if msg.asker.strong_count() == 0 {
                // Its host is gone (failed, or stopped): nobody would
                // honour the politeness this request owes.
                return Err(FetchError::NotSent("the asking host is gone".into()));
            }
            if msg.lease.as_ref().is_some_and(|lease| !lease.is_open()) {
                // Its owner's lease ended while it waited: another node
                // may own the host by now.
                return Err(FetchError::NotSent("the partition's lease ended".into()));
            }
            let mut result = client.get_with(&msg.url, &msg.validators).await;
            match &mut result {
                Ok(resp) => {
                    resp.pipeline = place.map(Arc::new);
                    metrics.count_status(resp.status);
                    metrics.fetched_bytes.inc_by(resp.body.len() as u64);
                    metrics.fetch_duration.observe(resp.elapsed.as_secs_f64());
                }
                Err(err) => {
                    metrics.fetch_errors.with_label_values(&[err.kind()]).inc();
                    tracing::debug!(url = %msg.url, error = %err, "fetch failed");
                }
            }
            result
        })
    }
}
