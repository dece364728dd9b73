//! Starting a node: every actor opened and wired from the config (the
//! only place that knows the concrete actor types), and a cluster node's
//! bridge, controller and ownership.

use super::*;

impl Node {
    /// Opens the crawl in `config.storage.data_dir` and starts every actor.
    /// Must run inside an actix system.
    pub fn start(config: Config, metrics: Arc<Metrics>) -> Result<Addr<Node>, NodeError> {
        Self::start_with_clock(config, metrics, Arc::new(SystemClock))
    }

    /// [`Node::start`] on an injected clock: every time decision of the
    /// node's actors reads it.
    pub fn start_with_clock(
        config: Config,
        metrics: Arc<Metrics>,
        clock: SharedClock,
    ) -> Result<Addr<Node>, NodeError> {
        let idle_poll = crate::scheduler::idle::poll_every(!config.cluster.enabled);
        Self::start_with_idle_poll(config, metrics, clock, idle_poll)
    }

    /// [`Node::start_with_clock`] whose partitions are polled every
    /// `idle_poll` instead of `scheduler::idle::poll_every`'s period. A
    /// single node's end is announced (`QueueEmptied`), so a test that
    /// sets this beyond its deadline shows the announcement alone ends a
    /// crawl; the poll's timer is actix's, not the injected clock.
    pub fn start_with_idle_poll(
        mut config: Config,
        metrics: Arc<Metrics>,
        clock: SharedClock,
        idle_poll: Duration,
    ) -> Result<Addr<Node>, NodeError> {
        let tls = crate::fetch::tls::client_config(&config.fetch.extra_root_certificates)?;
        let proxy = crate::fetch::proxy::ProxySettings::parse(
            config.fetch.proxy.as_str(),
            &config.fetch.proxy_hosts,
        )?;
        let started = clock.now();
        let year = chrono::Datelike::year(&chrono::DateTime::<chrono::Utc>::from(started.wall));
        let scope = crate::url::Scope::new(&config.scope, &config.traps, year)?;
        let data_dir = config.storage.data_dir.clone();
        let open_with = Manifest::partitions_to_open(
            &data_dir,
            config.storage.partitions,
            config.storage.partitions_given,
        )?;
        if open_with != config.storage.partitions {
            tracing::info!(
                partitions = open_with,
                "the crawl keeps the partition count it was created with (the config does not set one)"
            );
            config.storage.partitions = open_with;
        }
        Manifest::ensure(&data_dir, config.storage.partitions)?;
        // Hosts ask the node digest questions, and the cluster's actors
        // report to it: its mailbox exists first.
        let node_ctx = Context::<Node>::new();
        // A cluster node joins before anything opens: what can fail there
        // (its credentials, the bridge's port) fails a start that has
        // nothing to close yet. Until the node runs, what the cluster says
        // waits in its mailbox.
        let cluster = match config.cluster.enabled {
            true => Some(Self::join(
                &config,
                node_ctx.address(),
                metrics.clone(),
                clock.clone(),
            )?),
            false => None,
        };
        // A cluster node learns whether a partition's last run crashed from
        // the partition itself (`begin_run`), when it takes it: the data
        // directory is shared, and so would be a marker in it.
        let crashed = !config.cluster.enabled
            && RunMarker::begin(&data_dir).map_err(|e| NodeError::Marker(data_dir.clone(), e))?;
        if crashed {
            tracing::warn!("the last run did not stop cleanly: every host waits its last delay again before its first request");
        }
        let env = StoreEnv::new(&config.storage)
            .with_seen(SeenSettings::per_partition(
                &config.seen,
                config.storage.partitions,
            ))
            .with_budgets((&config.budget).into())
            .with_ordering(config.frontier.ordering);
        // The stores' shared memory is read when /metrics is, not polled.
        let memory = env.memory_reader();
        metrics.read_at_render("store_memory", move |m| m.set_store_memory(memory()));
        // A single node holds every partition; a cluster node those the
        // assignment gives it, once it has joined.
        //
        // The archive's dedup index is a store of its own: it opens on a
        // thread beside the partitions' (each open is mostly RocksDB
        // writing, syncing and reading back its files; one after the
        // other, the dedup index's came last on every start).
        let (stores, dedup) = std::thread::scope(|scope| {
            let dedup = scope.spawn(|| DedupIndex::open(&config.dedup_dir()));
            let stores: Result<Vec<Option<Arc<PartitionStore>>>, StoreError> =
                match config.cluster.enabled {
                    false => {
                        let ids: Vec<u16> = (0..config.storage.partitions).collect();
                        PartitionStore::open_all(&env, &data_dir, &ids)
                            .map(|stores| stores.into_iter().map(|s| Some(Arc::new(s))).collect())
                    }
                    true => Ok((0..config.storage.partitions).map(|_| None).collect()),
                };
            let dedup = dedup
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (stores, dedup)
        });
        let stores = stores?;
        let dedup = dedup.map_err(ArchiveOpenError::from)?;
        let uploads = UploadActor::start(&config, metrics.clone(), clock.clone())?;
        let closed_to = uploads.as_ref().map(|u| u.addr.clone().recipient());
        let archive_health = Arc::new(ArchiveHealth::new(config.data_path(&config.warc.dir)));
        let report: ReportBook = Arc::new(std::sync::Mutex::new(crate::report::CrawlReport::new(
            config.report.limits(),
        )));
        let archive = ArchiveActor::start(
            &config,
            dedup,
            metrics.clone(),
            closed_to,
            archive_health.clone(),
            report.clone(),
        )?;
        if let Some(u) = &uploads {
            u.addr.do_send(ArchiveOpened(archive.clone().recipient()));
        }
        let parser = ParserPool::start(&config.parse, config.fetch.max_body_bytes, metrics.clone());
        let controls_path = config.controls_file();
        let controls = Controls::load(
            &controls_path,
            Controls::new(config.fetch.max_requests_per_second),
        )?;
        if controls.paused {
            tracing::warn!(file = %controls_path.display(), "the crawl is paused (by an operator, before this start): POST /api/v1/crawl/resume to go on");
        }
        let gate = Arc::new(FetchGate::new(&controls));
        // The fetcher's DNS answers go to the archive as `dns:` records.
        let dns_log = config.warc.dns_records.then(|| {
            let archive = archive.clone();
            std::rc::Rc::new(move |resolved| archive.do_send(ArchiveDns(resolved)))
                as crate::fetch::DnsLog
        });
        let fetcher = FetcherPool::new(
            &config,
            tls,
            proxy,
            dns_log,
            gate.clone(),
            metrics.clone(),
            clock.clone(),
        )
        .start();
        let settings = Arc::new(HostSettings::from_config(&config, crashed));
        let store_arbiters: Vec<Arbiter> = (0..config.storage.store_arbiters())
            .map(|_| Arbiter::new())
            .collect();
        let config = Arc::new(config);
        // The SeenSet needs the partitions and the partitions the SeenSet:
        // create the SeenSet's mailbox first (actix's default capacity) and
        // start it once wired.
        let (seen_tx, seen_rx) = actix::dev::channel::channel::<SeenSet>(16);
        let seen_addr = Addr::new(seen_tx);
        // Hosts ask the DigestRouter, which asks the partitions: likewise.
        let (digests_tx, digests_rx) = actix::dev::channel::channel::<DigestRouter>(16);
        let digests_addr = Addr::new(digests_tx);
        let pipeline = PipelineLinks {
            fetch: fetcher.clone().recipient(),
            parse: parser.clone().recipient(),
            parse_sitemap: parser.clone().recipient(),
            digest: parser.recipient(),
            archive: archive.clone().recipient(),
            removed: archive.clone().recipient(),
            discover: seen_addr.clone().recipient(),
            digests: digests_addr.clone().recipient(),
        };
        let slots = ActiveSlots::new(config.frontier.active_hosts_cap(config.fetch.concurrency));
        let setup = PartitionSetup {
            settings,
            pipeline,
            slots: slots.clone(),
            clock: clock.clone(),
            metrics: metrics.clone(),
            // A single node after a crash holds its partitions as a
            // cluster node does (the scheduler's hold rule).
            hold_until_ms: crate::scheduler::opening(
                clock.now().unix_ms(),
                0,
                crashed,
                config.fetch.timeout,
            )
            .hold_until_ms,
            covers: 0,
            lease: None,
            emptied: node_ctx.address().recipient(),
        };
        let restart_setup = setup.clone();
        let partitions: Vec<Option<Held>> = stores
            .into_iter()
            .enumerate()
            .map(|(id, store)| {
                let store = store?;
                let arbiter = &store_arbiters[id % store_arbiters.len()];
                let setup = setup.clone();
                let actor_store = store.clone();
                let addr = PartitionActor::start_in_arbiter(&arbiter.handle(), move |_| {
                    PartitionActor::new(id as u16, actor_store, setup)
                });
                Some(Held {
                    addr,
                    store,
                    lease: None,
                })
            })
            .collect();
        let routes = PartitionRoutes::new(&partitions);
        // The SeenSet runs beside the first partitions and their hosts
        // (with one store thread, all of them): every page's links go from
        // a host to it and on to a partition, and each message between
        // threads is a wake-up (an eventfd write and a context switch).
        // On the side-by-side bench that took ~3 % of the CPU a page.
        let seen = SeenSet::new(&config, scope, routes.admit.clone(), metrics.clone());
        store_arbiters[0].spawn_fn(move || {
            Context::with_receiver(seen_rx).run(seen);
        });
        // The DigestRouter too: each page asks it twice (see its docs).
        let node_addr = node_ctx.address().recipient();
        let router = DigestRouter::new(routes.digest.clone(), node_addr, metrics.clone());
        store_arbiters[0].spawn_fn(move || {
            Context::with_receiver(digests_rx).run(router);
        });
        let self_addr = node_ctx.address();
        let mut schedule = Scheduler::new(
            config.storage.partitions,
            config.fetch.timeout,
            cluster.as_ref().is_some_and(|c| c.ownership.is_some()),
            crate::cluster::holders::KnownHolders::load(&data_dir),
        );
        if config.cluster.enabled {
            let chain = !config.cluster.state_url.is_empty();
            let view = ClusterView::new(&config.cluster.node_id, chain, config.storage.partitions);
            schedule.join(view);
        }
        for (id, held) in partitions.into_iter().enumerate() {
            if let Some(held) = held {
                schedule.opened(id as u16, held);
            }
        }
        Ok(node_ctx.run(Node {
            self_addr,
            data_dir,
            schedule,
            env: Arc::new(env),
            cluster,
            setup: restart_setup,
            seen: seen_addr,
            routes,
            archive,
            archive_health,
            report,
            fetcher,
            uploads,
            upload_wait: config.upload.shutdown_wait,
            metrics,
            clock,
            started,
            slots,
            shutdown_timeout: config.crawl.shutdown_timeout,
            store_arbiters,
            idle_waiters: Vec::new(),
            idle_poll,
            shutting_down: false,
            controls,
            controls_path,
            gate,
        }))
    }

    /// The bridge's TLS identity and the gossip key, unless the cluster is
    /// insecure (config validation makes sure it is one or the other).
    pub(super) fn credentials(
        c: &crate::config::ClusterConfig,
    ) -> Result<(Option<Arc<NodeTls>>, Option<GossipKey>), NodeError> {
        if c.insecure {
            tracing::warn!(
                node = %c.node_id,
                "cluster.insecure: the bridge and gossip are not authenticated"
            );
            return Ok((None, None));
        }
        let tls = NodeTls::load(&c.tls_ca, &c.tls_cert, &c.tls_key, &c.node_id)?;
        let key_error = |reason: String| NodeError::GossipKey {
            path: c.gossip_key.clone(),
            reason,
        };
        let text = std::fs::read_to_string(&c.gossip_key).map_err(|e| key_error(e.to_string()))?;
        let key = GossipKey::from_hex(&text).map_err(|e| key_error(e.to_string()))?;
        Ok((Some(Arc::new(tls)), Some(key)))
    }

    /// Starts the bridge and the cluster controller of a cluster node.
    pub(super) fn join(
        config: &Config,
        node: Addr<Node>,
        metrics: Arc<Metrics>,
        clock: SharedClock,
    ) -> Result<ClusterLinks, NodeError> {
        let c = &config.cluster;
        let addr = |a: &str| {
            a.parse::<std::net::SocketAddr>()
                .map_err(|_| NodeError::Address(a.to_owned()))
        };
        let mut settings = BridgeSettings::new(&c.cluster_id, &c.node_id, addr(&c.bridge)?);
        let (tls, gossip_key) = Self::credentials(c)?;
        settings.tls = tls;
        settings.clock = clock.clone();
        if !c.state_url.is_empty() {
            // A batch is acknowledged once a published checkpoint covers
            // its admission, up to a checkpoint interval later: the window
            // must hold what a peer sends in that time (Little's law), or
            // it, not the web, paces the crawl. At the default window's
            // rate per 100 ms of acknowledgement delay.
            let intervals = (c.checkpoint_interval.as_millis() / 100).max(1) as usize;
            settings.window = settings
                .window
                .saturating_mul(intervals)
                .min(MAX_DURABLE_WINDOW);
        }
        let inbound = BridgeInbound {
            admit: node.clone().recipient(),
            digest: node.clone().recipient(),
        };
        let (bridge, bridge_addr) = BridgeActor::start(settings, inbound, metrics.clone())?;
        let mut membership = crate::cluster::membership::MembershipConfig::new(
            &c.cluster_id,
            &c.node_id,
            addr(&c.gossip)?,
        );
        membership.seeds = c.peers.clone();
        membership.gossip_key = gossip_key;
        membership.gossip_rejected = Some(metrics.gossip_rejected.clone());
        membership.gossip_interval = c.gossip_interval;
        let arbiter = Arbiter::new();
        let controller = ClusterActor::start_on(
            &arbiter.handle(),
            ClusterSettings {
                membership,
                bridge_addr,
                partitions: config.storage.partitions,
                admin_addr: config
                    .admin
                    .enabled
                    .then(|| config.admin.listen.parse().ok())
                    .flatten(),
                clock: clock.clone(),
                metrics: metrics.clone(),
            },
            node.clone().recipient(),
            node.clone().recipient(),
            bridge.clone().recipient(),
        );
        let ownership = Self::own(config, node, clock, metrics)?;
        Ok(ClusterLinks {
            bridge,
            controller,
            assigned_waiters: Vec::new(),
            ownership,
            _arbiter: arbiter,
        })
    }

    /// Starts the OwnershipActor, with `[cluster] state_url` set.
    pub(super) fn own(
        config: &Config,
        node: Addr<Node>,
        clock: SharedClock,
        metrics: Arc<Metrics>,
    ) -> Result<Option<Ownership>, NodeError> {
        let c = &config.cluster;
        if c.state_url.is_empty() {
            return Ok(None);
        }
        let state = crate::cluster::chain::StateStore::open(&c.state_url, &c.state_options)?;
        let settings = OwnershipSettings {
            node: c.node_id.clone(),
            partitions: config.storage.partitions,
            lease: crate::cluster::lease::LeaseSettings::of(config),
            data_dir: config.storage.data_dir.clone(),
            state: Arc::new(state),
            clock,
            owed: config.politeness.min_delay,
            request_timeout: config.fetch.timeout,
            metrics,
        };
        let orders = NodeOrders {
            take: node.clone().recipient(),
            checkpoint: node.clone().recipient(),
            drain: node.clone().recipient(),
            stop: node.clone().recipient(),
            durable: node.clone().recipient(),
            seal: config.upload.enabled.then(|| node.clone().recipient()),
            shunned: node.recipient(),
        };
        if !config.upload.enabled {
            tracing::warn!("[cluster] state_url without [upload]: WARC records stay on this node's disk, and a lost disk loses them (the frontier it does not)");
        }
        let addr = OwnershipActor::new(settings, orders, incarnation(&c.node_id)).start();
        Ok(Some(Ownership { addr }))
    }
}

/// A random id of this node's process: a restarted node is a new owner.
pub(super) fn incarnation(node: &str) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!("{node}/{}/{nanos}", std::process::id());
    xxhash_rust::xxh3::xxh3_64(seed.as_bytes())
}
