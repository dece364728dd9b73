//! Running a node to the end: seeds in, then until idle or a signal.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use trawl::actors::messages::ArchiveSnapshot;
use trawl::actors::{Node, Seed, Shutdown, WhenIdle};
use trawl::config::Config;
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
}

/// Seeds offered to the node per message: a seeds file of millions of
/// URLs is read and admitted in batches, never held whole in memory.
const SEED_BATCH: usize = 10_000;

/// Starts a node on `config`, seeds it, and runs until it is idle (when
/// `until_idle`) or a SIGINT/SIGTERM arrives; then shuts down gracefully.
pub async fn crawl(
    config: Config,
    seeds: impl IntoIterator<Item = anyhow::Result<String>>,
    until_idle: bool,
) -> anyhow::Result<CrawlOutcome> {
    let started = Instant::now();
    // An unsafe admin setup is refused before anything opens.
    let access = match config.admin.enabled {
        true => Some(trawl::admin::Access::from_config(&config.admin)?),
        false => None,
    };
    let metrics = Arc::new(Metrics::for_node(config.node_id()));
    let node = Node::start(config.clone(), metrics.clone()).context("starting the node")?;
    let admin = if let Some(access) = access {
        let server =
            trawl::admin::start_with(&config.admin.listen, access, node.clone(), metrics.clone())
                .with_context(|| format!("starting the admin server on {}", config.admin.listen))?;
        tracing::info!(addr = %server.addr, "admin api listening (/metrics, /api/v1/openapi.json)");
        Some(server)
    } else {
        None
    };
    if config.cluster.enabled {
        tracing::info!(node = %config.cluster.node_id, "joining the cluster");
        node.send(trawl::actors::WhenAssigned)
            .await
            .context("node mailbox")?;
        tracing::info!("every partition has an owner");
    }
    let seeds = offer_seeds(&node, seeds).await?;
    tracing::info!(
        admitted = seeds.admitted,
        seen = seeds.seen,
        filtered = seeds.filtered,
        "seeds offered"
    );
    let progress = Progress::start(node.clone());

    let idle = async {
        if until_idle {
            let _ = node.send(WhenIdle).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let interrupted = tokio::select! {
        _ = idle => false,
        _ = shutdown_signal() => true,
    };
    if interrupted {
        tracing::info!("signal received: stopping gracefully");
    } else {
        tracing::info!("nothing queued or in flight: stopping");
    }
    let status = node
        .send(trawl::actors::GetStatus)
        .await
        .unwrap_or_default();
    let archive = node
        .send(Shutdown)
        .await
        .context("node mailbox")?
        .context("closing the archive")?;
    progress.finish();
    if let Some(admin) = admin {
        admin.handle.stop(true).await;
    }
    Ok(CrawlOutcome {
        archive,
        elapsed: started.elapsed(),
        interrupted,
        completed: status.completed,
    })
}

/// Offers `seeds` in batches of [`SEED_BATCH`]; the counts of them all.
async fn offer_seeds(
    node: &actix::Addr<Node>,
    seeds: impl IntoIterator<Item = anyhow::Result<String>>,
) -> anyhow::Result<trawl::actors::messages::Admission> {
    let mut total = trawl::actors::messages::Admission::default();
    let mut batch = Vec::with_capacity(SEED_BATCH);
    let mut seeds = seeds.into_iter().peekable();
    while seeds.peek().is_some() {
        batch.clear();
        for seed in seeds.by_ref().take(SEED_BATCH) {
            batch.push(seed?);
        }
        let admission = node
            .send(Seed {
                urls: std::mem::take(&mut batch),
            })
            .await
            .context("node mailbox")?
            .context("admitting seeds")?;
        total.admitted += admission.admitted;
        total.seen += admission.seen;
        total.filtered += admission.filtered;
    }
    Ok(total)
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
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
