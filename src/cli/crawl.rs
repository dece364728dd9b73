//! Running a node to the end: seeds in, then until idle or a signal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::Addr;
use anyhow::Context as _;
use trawl::actors::messages::ArchiveSnapshot;
use trawl::actors::messages::UrlOutcome;
use trawl::actors::messages::{GetReport, GetReportBook};
use trawl::actors::{GetStatus, Node, SeedEach, Shutdown, WhenIdle};
use trawl::archive::ReportBook;
use trawl::config::{Config, CrawlConfig};
use trawl::error::Failure;
use trawl::metrics::Metrics;

use super::progress::Progress;

/// How a crawl ended.
pub struct CrawlOutcome {
    /// The archive's counters at the end.
    pub archive: ArchiveSnapshot,
    /// Wall time of the crawl.
    pub elapsed: Duration,
    /// Stopped by SIGINT/SIGTERM rather than by running out of work.
    pub interrupted: bool,
    /// Pages completed during this run.
    pub completed: u64,
    /// Seeds were given and every one was refused (invalid, out of
    /// scope...): the crawl stopped at once, nothing of it fetched.
    pub seeds_all_refused: bool,
    /// What the run did, from the node's counters.
    pub summary: super::summary::Summary,
    /// The crawl report of the run (`src/report`), frontier included.
    pub report: trawl::report::CrawlReport,
}

/// Seeds offered to the node per message: a seeds file of millions of
/// URLs is read and admitted in batches, never held whole in memory.
const SEED_BATCH: usize = 10_000;
/// How often the pages completed are compared with `[crawl] max_pages`.
const BUDGET_POLL: Duration = Duration::from_millis(200);

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// Nothing was queued or in flight (`--until-idle`).
    Idle,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// `[crawl] max_pages` pages were completed.
    MaxPages,
    /// `[crawl] max_duration` passed.
    MaxDuration,
}

/// Resolves once a limit of `[crawl]` is reached: `max_duration` after
/// `started`, or `max_pages` pages completed (the node's count, read
/// every [`BUDGET_POLL`]); never if neither is set.
async fn limit_reached(node: &Addr<Node>, crawl: &CrawlConfig, started: Instant) -> Ended {
    let time = time_limit(crawl, started);
    let pages = async {
        if crawl.max_pages == 0 {
            return std::future::pending::<()>().await;
        }
        let mut tick = tokio::time::interval(BUDGET_POLL);
        loop {
            tick.tick().await;
            let status = node.send(GetStatus).await.unwrap_or_default();
            if status.completed >= crawl.max_pages {
                return;
            }
        }
    };
    tokio::select! {
        () = time => Ended::MaxDuration,
        () = pages => Ended::MaxPages,
    }
}

/// How `trawl run` (or the demo) runs its crawl.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunMode {
    /// Stop once nothing is queued or in flight (else at a signal).
    pub until_idle: bool,
    /// Offer the seeds as changed now (`--reseed`): removed ones come back
    /// though given before, fetched ones are due at once.
    pub reseed: bool,
}

/// With `[cluster] state_url`, checks before anything opens that the
/// state store refuses a second create of one key (its manifests are the
/// fence between owners): a store that overwrites is refused with a clear
/// error rather than let two nodes crawl one host.
async fn probe_state_store(config: &Config) -> anyhow::Result<()> {
    let c = &config.cluster;
    if !c.enabled || c.state_url.is_empty() {
        return Ok(());
    }
    let state = trawl::cluster::chain::StateStore::open(&c.state_url, &c.state_options)?;
    let nonce = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    state
        .probe_fence(&c.node_id, nonce ^ u64::from(std::process::id()))
        .await
        .with_context(|| format!("checking [cluster] state_url {}", c.state_url))?;
    tracing::info!(state_url = %c.state_url, "the state store refuses a second create: partition owners are fenced");
    Ok(())
}

/// Binds the admin API's address (`[admin] listen`; a name that resolves
/// to several addresses binds the first that can be bound).
fn bind_admin(listen: &str) -> anyhow::Result<std::net::TcpListener> {
    std::net::TcpListener::bind(listen).with_context(|| {
        format!("binding the admin api to {listen} ([admin] listen; is another node running?)")
    })
}

/// Stops a node that started when the crawl cannot go on (its seeds could
/// not be offered, the admin API would not serve): gracefully, as at the
/// end of a crawl, so that the error is reported by a process with nothing
/// left running (an actor dropped with the runtime panics on its way out).
async fn stop_after_failure(node: &actix::Addr<Node>) {
    match node.send(Shutdown).await {
        Ok(Ok(_)) => {}
        Ok(Err(err)) => tracing::error!(error = %err, "closing the archive after a failed start"),
        Err(err) => tracing::error!(error = %err, "stopping the node after a failed start"),
    }
}

/// Resolves once `[crawl] max_duration` has passed since `started`; never
/// if it is 0 (or too far off to be a time).
async fn time_limit(crawl: &CrawlConfig, started: Instant) {
    let end = started.checked_add(crawl.max_duration);
    match end.filter(|_| !crawl.max_duration.is_zero()) {
        Some(end) => tokio::time::sleep_until(end.into()).await,
        None => std::future::pending().await,
    }
}

/// Starts a node on `config`, seeds it, and runs until it is idle (when
/// `mode.until_idle`), a limit of `[crawl]` is reached (`max_pages`,
/// `max_duration`) or a SIGINT/SIGTERM arrives; then shuts down
/// gracefully.
pub async fn crawl(
    config: Config,
    seeds: impl IntoIterator<Item = anyhow::Result<String>>,
    mode: RunMode,
) -> anyhow::Result<CrawlOutcome> {
    let started = Instant::now();
    // Listened for from the start: a signal while the node joins its
    // cluster or takes its seeds stops it gracefully too.
    let stop = shutdown_signal();
    tokio::pin!(stop);
    // An unsafe admin setup is refused before anything opens.
    let access = match config.admin.enabled {
        true => Some(trawl::admin::Access::from_config(&config.admin)?),
        false => None,
    };
    let admin_tls = match config.admin.enabled {
        true => trawl::admin::tls::AdminTls::from_config(&config)?,
        false => None,
    };
    // Its port is taken before the node starts: a port in use is an
    // error before anything opened (and nothing is left to stop).
    let admin_socket = match &access {
        Some(_) => Some(bind_admin(&config.admin.listen)?),
        None => None,
    };
    probe_state_store(&config).await?;
    let previous = super::previous::Previous::open(&config.previous)?;
    let metrics = Arc::new(Metrics::for_node(config.node_id()));
    let node = Node::start(config.clone(), metrics.clone()).context("starting the node")?;
    let book = match node.send(GetReportBook).await {
        Ok(book) => book,
        Err(err) => {
            stop_after_failure(&node).await;
            return Err(err).context("node mailbox");
        }
    };
    let https = admin_tls.is_some();
    let admin = match (admin_socket, access) {
        (Some(socket), Some(access)) => {
            let server = trawl::admin::start_secured_on(
                socket,
                access,
                admin_tls,
                node.clone(),
                metrics.clone(),
            );
            let server = match server {
                Ok(server) => server,
                Err(err) => {
                    stop_after_failure(&node).await;
                    return Err(err).with_context(|| {
                        format!("starting the admin server on {}", config.admin.listen)
                    });
                }
            };
            tracing::info!(addr = %server.addr, https, "admin api listening (/metrics, /api/v1/openapi.json)");
            Some(server)
        }
        _ => None,
    };
    let joined = async {
        if config.cluster.enabled {
            tracing::info!(node = %config.cluster.node_id, "joining the cluster");
            node.send(trawl::actors::WhenAssigned)
                .await
                .context("node mailbox")?;
            tracing::info!("every partition has an owner");
        }
        // The earlier crawl's copies are known before anything is fetched.
        previous.register(&node).await?;
        let offered = offer_seeds(&node, seeds, mode.reseed, &book).await?;
        previous.offer(&node).await?;
        Ok(offered)
    };
    // The time limit counts from the start: joining and seeding too.
    let mut early = Ended::Interrupted;
    let offered = tokio::select! {
        offered = joined => Some(offered),
        _ = &mut stop => None,
        () = time_limit(&config.crawl, started) => {
            early = Ended::MaxDuration;
            None
        }
    };
    let offered = match offered.transpose() {
        Ok(offered) => offered,
        Err(err) => {
            stop_after_failure(&node).await;
            return Err(err);
        }
    };
    let seeds = offered.unwrap_or_default();
    if offered.is_some() {
        tracing::info!(
            admitted = seeds.admitted,
            seen = seeds.seen,
            filtered = seeds.filtered,
            "seeds offered"
        );
    }
    let seeds_all_refused = seeds.all_refused();
    if seeds_all_refused {
        tracing::error!("every seed was refused (see above why): nothing to crawl");
    }
    let progress = Progress::start(node.clone());

    let idle = async {
        if seeds_all_refused {
            // Straight to the shutdown: the caller exits with an error.
        } else if mode.until_idle {
            let _ = node.send(WhenIdle).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let limit = limit_reached(&node, &config.crawl, started);
    let ended = match offered {
        None => early,
        Some(_) => tokio::select! {
            _ = idle => Ended::Idle,
            _ = &mut stop => Ended::Interrupted,
            reached = limit => reached,
        },
    };
    let interrupted = ended == Ended::Interrupted;
    match ended {
        Ended::Interrupted => tracing::info!("signal received: stopping gracefully"),
        Ended::Idle => tracing::info!("nothing queued or in flight: stopping"),
        Ended::MaxPages => tracing::info!(
            max_pages = config.crawl.max_pages,
            "[crawl] max_pages reached: stopping gracefully (the next run resumes)"
        ),
        Ended::MaxDuration => tracing::info!(
            max_duration_s = config.crawl.max_duration.as_secs_f64(),
            "[crawl] max_duration reached: stopping gracefully (the next run resumes)"
        ),
    }
    let status = node
        .send(trawl::actors::GetStatus)
        .await
        .unwrap_or_default();
    // What is left queued, asked while the partitions still answer.
    let frontier = node.send(GetReport).await.ok().and_then(|r| r.frontier);
    let archive = node
        .send(Shutdown)
        .await
        .context("node mailbox")?
        .context("closing the archive")?;
    progress.finish();
    if let Some(admin) = admin {
        admin.handle.stop(true).await;
    }
    let elapsed = started.elapsed();
    let summary = super::summary::Summary::new(&metrics, elapsed, ended, status.completed, seeds);
    let mut report = book.lock().unwrap_or_else(|p| p.into_inner()).snapshot();
    report.frontier = frontier;
    Ok(CrawlOutcome {
        archive,
        elapsed,
        interrupted,
        completed: status.completed,
        seeds_all_refused,
        summary,
        report,
    })
}

/// What became of the seeds offered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct SeedCounts {
    /// Newly queued.
    pub admitted: usize,
    /// Known already (or forwarded to their partition's owner).
    pub seen: usize,
    /// Refused, each named in the log with its reason.
    pub filtered: usize,
}

impl SeedCounts {
    /// Adds one seed's outcome.
    fn count(&mut self, outcome: UrlOutcome) {
        match outcome {
            UrlOutcome::Admitted => self.admitted += 1,
            UrlOutcome::Seen | UrlOutcome::Forwarded => self.seen += 1,
            UrlOutcome::Filtered(_) => self.filtered += 1,
        }
    }

    /// Seeds were offered and none was taken.
    pub fn all_refused(&self) -> bool {
        self.filtered > 0 && self.admitted == 0 && self.seen == 0
    }
}

/// How long a batch of seeds is offered again while its partitions change
/// hands (a cluster forming or rebalancing as the node starts).
const SEED_REROUTE_FOR: Duration = Duration::from_secs(60);
/// The first wait before a batch is offered again (doubling to 2 s).
const SEED_REROUTE_WAIT: Duration = Duration::from_millis(50);

/// Whether a seed batch refused with `failure` is offered again: a
/// partition changed hands while the batch was admitted (not held here,
/// or no owner yet), which the next view of the cluster routes. Offering a
/// batch twice is safe: the URL-seen set admits each URL once, and those
/// that went in the first time count as seen the second.
fn reroutable(failure: &Failure) -> bool {
    matches!(failure, Failure::NotHeld { .. } | Failure::Peer(_))
}

/// Offers one batch of seeds, again while [`reroutable`] (for
/// [`SEED_REROUTE_FOR`] at most).
async fn offer_batch(
    node: &actix::Addr<Node>,
    batch: &[String],
    reseed: bool,
) -> anyhow::Result<Vec<UrlOutcome>> {
    offer_rerouted(node, || SeedEach {
        urls: batch.to_vec(),
        reseed,
    })
    .await
}

/// Sends the offer `make` makes, again while [`reroutable`] (for
/// [`SEED_REROUTE_FOR`] at most): each URL's outcome.
pub(super) async fn offer_rerouted<M>(
    node: &actix::Addr<Node>,
    make: impl Fn() -> M,
) -> anyhow::Result<Vec<UrlOutcome>>
where
    M: actix::Message<Result = Result<Vec<UrlOutcome>, Failure>> + Send + 'static,
    Node: actix::Handler<M>,
{
    let started = Instant::now();
    let mut wait = SEED_REROUTE_WAIT;
    loop {
        match node.send(make()).await.context("node mailbox")? {
            Ok(outcomes) => return Ok(outcomes),
            Err(failure) if reroutable(&failure) && started.elapsed() < SEED_REROUTE_FOR => {
                tracing::info!(error = %failure, "a seed batch's partition changed hands: offering it again");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(failure) => return Err(failure).context("admitting seeds"),
        }
    }
}

/// The URL a seed line is reported under: as its events name it (parsed,
/// without its fragment), or as given if it does not parse.
fn report_key(seed: &str) -> String {
    match url::Url::parse(seed.trim()) {
        Ok(mut url) => {
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => seed.to_owned(),
    }
}

/// Offers `seeds` in batches of [`SEED_BATCH`] (as changed now with
/// `reseed`), naming in the log each one refused and why; the counts of
/// them all.
async fn offer_seeds(
    node: &actix::Addr<Node>,
    seeds: impl IntoIterator<Item = anyhow::Result<String>>,
    reseed: bool,
    report: &ReportBook,
) -> anyhow::Result<SeedCounts> {
    let mut total = SeedCounts::default();
    let mut batch = Vec::with_capacity(SEED_BATCH);
    let mut seeds = seeds.into_iter().peekable();
    while seeds.peek().is_some() {
        batch.clear();
        for seed in seeds.by_ref().take(SEED_BATCH) {
            batch.push(seed?);
        }
        let outcomes = offer_batch(node, &batch, reseed).await?;
        let mut report = report.lock().unwrap_or_else(|p| p.into_inner());
        for (url, outcome) in batch.iter().zip(outcomes) {
            let offered = match &outcome {
                UrlOutcome::Admitted => "admitted".to_owned(),
                UrlOutcome::Seen => "seen".to_owned(),
                UrlOutcome::Forwarded => "forwarded".to_owned(),
                UrlOutcome::Filtered(reason) => {
                    tracing::warn!(seed = %url, reason, "seed refused");
                    format!("refused: {reason}")
                }
            };
            report.offered(&report_key(url), &offered);
            total.count(outcome);
        }
    }
    Ok(total)
}

/// Completes on SIGINT or SIGTERM. The handlers are installed when this
/// is called (in a runtime), not when the future is first polled: from
/// then on either signal is a graceful stop, never the default action
/// (the process killed).
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{signal, SignalKind};
        (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        )
    };
    async move {
        #[cfg(unix)]
        {
            let (Ok(mut term), Ok(mut int)) = signals else {
                return std::future::pending().await;
            };
            tokio::select! {
                _ = term.recv() => {},
                _ = int.recv() => {},
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_batch_is_offered_again_only_when_its_partition_changed_hands() {
        assert!(reroutable(&Failure::NotHeld { partition: 7 }));
        assert!(reroutable(&Failure::Peer(
            "a seed's partition has no owner yet".into()
        )));
        for kept in [
            Failure::Store("disk full".into()),
            Failure::Archive("disk full".into()),
            Failure::Mailbox("closed".into()),
            Failure::Invalid("no".into()),
        ] {
            assert!(!reroutable(&kept), "{kept}");
        }
    }
}
