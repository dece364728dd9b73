//! FetcherPool: the global fetch slots.
//!
//! Runs HTTP requests and never decides what to fetch. At most
//! `fetch.concurrency` requests run at once across all hosts; more wait for
//! a slot in arrival order. Under `concurrency = "auto"` the pool measures
//! each quarter second (requests ended, the time they held their slots,
//! their bodies, pages fetched, the process's CPU) and resizes its slots
//! and the pipeline's places to what [`InFlightSizer`] says. Before its slot, a request passes the node's
//! [`FetchGate`]: held while the operator paused the node, metered by the
//! node-wide rate limit. Before the gate, a page request takes its place in
//! the node's pipeline ([`PipelineBound`]), handed over with its response:
//! while `[fetch] max_pipeline_pages` pages are being fetched, parsed,
//! archived or completed, no other page request starts. Lives on one
//! arbiter because awc's client is bound to its thread; a single thread
//! drives thousands of connections.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::Semaphore;

use super::messages::{CloseConnections, Fetch};
use crate::config::{Concurrency, Config};
use crate::fetch::gate::FetchGate;
use crate::fetch::inflight::{self, AutoBounds, InFlightSizer, Window};
use crate::fetch::pipeline::PipelineBound;
use crate::fetch::{FetchError, FetchResponse, HttpClient};
use crate::metrics::Metrics;

/// How often the automatic limit is measured and applied.
const SIZING_INTERVAL: Duration = Duration::from_millis(250);

/// The fetch slots and the HTTP client.
pub struct FetcherPool {
    client: Rc<HttpClient>,
    slots: Rc<Semaphore>,
    /// Slots that exist (free or held).
    slot_count: usize,
    pipeline: PipelineBound,
    /// `[fetch] max_pipeline_pages`: the pipeline's places beyond the slots.
    processing_places: usize,
    /// Under `concurrency = "auto"`: the sizer and the window it is fed.
    sizing: Option<Sizing>,
    gate: Arc<FetchGate>,
    metrics: Arc<Metrics>,
}

/// The automatic limit's state.
struct Sizing {
    sizer: InFlightSizer,
    /// What the requests ending in this window measured (the requests run
    /// on this actor's thread).
    window: Rc<Cell<Window>>,
    /// Requests waiting for a slot now.
    waiting: Rc<Cell<u64>>,
    /// The process's CPU seconds at the window's start.
    cpu_at: f64,
}

impl FetcherPool {
    /// A pool for `config` with the TLS setup `tls`, the egress proxy
    /// `proxy` and the log of DNS answers `dns_log` (must be created on
    /// the arbiter it runs on).
    pub fn new(
        config: &Config,
        tls: Arc<rustls::ClientConfig>,
        proxy: Option<crate::fetch::proxy::ProxySettings>,
        dns_log: Option<crate::fetch::DnsLog>,
        gate: Arc<FetchGate>,
        metrics: Arc<Metrics>,
        clock: crate::clock::SharedClock,
    ) -> Self {
        let (sizing, slot_count) = match config.fetch.concurrency {
            Concurrency::Fixed(n) => (None, n),
            Concurrency::Auto => {
                let bounds = AutoBounds::of_this_process(config.fetch.max_inflight_bytes);
                let sizer = InFlightSizer::new(bounds);
                let limit = sizer.limit();
                let sizing = Sizing {
                    sizer,
                    window: Rc::new(Cell::new(Window::default())),
                    waiting: Rc::new(Cell::new(0)),
                    cpu_at: inflight::cpu_seconds(),
                };
                (Some(sizing), limit)
            }
        };
        let processing_places = config.fetch.max_pipeline_pages;
        metrics.fetch_concurrency_limit.set(slot_count as i64);
        FetcherPool {
            client: Rc::new(HttpClient::new(
                config,
                tls,
                proxy,
                dns_log,
                metrics.clone(),
                clock,
            )),
            slots: Rc::new(Semaphore::new(slot_count)),
            slot_count,
            pipeline: PipelineBound::new(
                sizing
                    .as_ref()
                    .map_or(slot_count, |s| s.sizer.pipeline_start())
                    .saturating_add(processing_places),
                config.fetch.max_pipeline_bytes,
                metrics.pipeline_pages.clone(),
                metrics.pipeline_bytes.clone(),
            ),
            processing_places,
            sizing,
            gate,
            metrics,
        }
    }

    /// Ends the sizing window: feeds it to the sizer and moves the slots
    /// and the pipeline's places to the new limit.
    fn resize(&mut self) {
        let Some(sizing) = &mut self.sizing else {
            return;
        };
        let cpu = inflight::cpu_seconds();
        let mut window = sizing.window.take();
        window.cpu_seconds = cpu - sizing.cpu_at;
        window.waiting = sizing.waiting.get();
        sizing.cpu_at = cpu;
        let limit = sizing.sizer.observe(&window);
        self.slot_count = inflight::resize(&self.slots, self.slot_count, limit);
        self.pipeline
            .resize(limit.saturating_add(self.processing_places));
        self.metrics.fetch_concurrency_limit.set(limit as i64);
    }
}

impl Actor for FetcherPool {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        // Requests wait for slots, not for the mailbox. What can wait here
        // is bounded all the same: one request per permit of an active host,
        // and active hosts are capped (`[frontier] max_active_hosts`).
        ctx.set_mailbox_capacity(usize::MAX);
        if self.sizing.is_some() {
            ctx.run_interval(SIZING_INTERVAL, |pool, _| pool.resize());
        }
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
        let window = self.sizing.as_ref().map(|s| s.window.clone());
        let waiting = self.sizing.as_ref().map(|s| s.waiting.clone());
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
            let _slot = {
                let _waiting = waiting.as_deref().map(Waiting::new);
                slots.acquire().await.expect("semaphore is never closed")
            };
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
            let started = Instant::now();
            if started >= msg.deadline {
                // It waited for a slot past its deadline: sent now, it
                // would outlive the hold its host wrote for it.
                return Err(FetchError::NotSent(
                    "its deadline passed while it waited".into(),
                ));
            }
            let deadline = Some(msg.deadline);
            let mut result = client.get_within(&msg.url, &msg.validators, deadline).await;
            if let Some(window) = window {
                window.set(measured(window.get(), started.elapsed(), &result, msg.page));
            }
            match &mut result {
                Ok(resp) => {
                    if let Some(place) = &place {
                        place.hold_bytes(resp.body.len());
                    }
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

/// `window` with one more request that held its slot for `held`.
fn measured(
    mut window: Window,
    held: Duration,
    result: &Result<FetchResponse, FetchError>,
    page: bool,
) -> Window {
    window.requests += 1;
    window.request_seconds += held.as_secs_f64();
    if let Ok(resp) = result {
        window.body_bytes += resp.body.len() as u64;
        window.pages += u64::from(page);
    }
    window
}

/// One request counted as waiting for a slot while this lives (a request
/// dropped while it waits is uncounted too).
struct Waiting<'a>(&'a Cell<u64>);

impl<'a> Waiting<'a> {
    fn new(count: &'a Cell<u64>) -> Self {
        count.set(count.get() + 1);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}
