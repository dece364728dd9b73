//! FetcherPool: the global fetch slots.
//!
//! Runs HTTP requests and never decides what to fetch. At most
//! `fetch.concurrency` requests run at once across all hosts; more wait for
//! a slot in arrival order. Before its slot, a request passes the node's
//! [`FetchGate`]: held while the operator paused the node, metered by the
//! node-wide rate limit. Lives on one arbiter because awc's client is
//! bound to its thread; a single thread drives thousands of connections.

use std::rc::Rc;
use std::sync::Arc;

use actix::prelude::*;
use tokio::sync::Semaphore;

use super::messages::Fetch;
use crate::config::Config;
use crate::fetch::gate::FetchGate;
use crate::fetch::{FetchError, FetchResponse, HttpClient};
use crate::metrics::Metrics;

/// The fetch slots and the HTTP client.
pub struct FetcherPool {
    client: Rc<HttpClient>,
    slots: Rc<Semaphore>,
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

impl Handler<Fetch> for FetcherPool {
    type Result = ResponseFuture<Result<FetchResponse, FetchError>>;

    fn handle(&mut self, msg: Fetch, _: &mut Self::Context) -> Self::Result {
        let client = self.client.clone();
        let slots = self.slots.clone();
        let gate = self.gate.clone();
        let metrics = self.metrics.clone();
        Box::pin(async move {
            gate.pass().await;
            let _slot = slots.acquire().await.expect("semaphore is never closed");
            metrics
                .queue_wait
                .observe(msg.released.elapsed().as_secs_f64());
            if msg.asker.strong_count() == 0 {
                // Its host is gone (failed, or stopped): nobody would
                // honour the politeness this request owes.
                return Err(FetchError::Protocol("the asking host is gone".into()));
            }
            let result = client.get_with(&msg.url, &msg.validators).await;
            match &result {
                Ok(resp) => {
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
