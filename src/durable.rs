//! When the archive's bytes may be vouched for: tickets that settle once
//! a page's records and event reached the OS ([`Tickets`]), or, for
//! `[storage] sync_writes`, the disk ([`GroupCommit`]); and the files'
//! writeback as they grow ([`Writeback`]).
//!
//! The page's completion (its URL leaves the queue) vouches for its
//! records: it must not be written before they are safe. Without
//! `sync_writes`, safe means in the OS (a kill -9 loses nothing); with it,
//! on disk (RocksDB fsyncs its write-ahead log on every batch, so a
//! completion survives a power loss, and so must what it vouches for).
//!
//! Both cost system calls, and handing each page over on its own was two
//! write(2) a page: ~40% of the calls of a side-by-side bench run (94,000
//! against 54,000 batched), about 2% of its CPU. So the archive thread
//! buffers what it writes, takes a [`Ticket`] (a sequence number)
//! for each page from [`Tickets::issue`], and goes on with the next page;
//! it hands the buffers to the OS when its mailbox has no more pages ahead
//! of a flush it queued ([`Tickets::handed_over`]). That settles every
//! ticket issued before; with `sync_writes`, a sync thread then runs
//! `File::sync_data` on every file written since its last round and
//! settles every ticket handed over before that round began, all at once.
//! A round starts once the oldest unsynced ticket has waited
//! [`GroupSettings::window`] or [`GroupSettings::max_group`] tickets wait,
//! and while one round runs the next group gathers: the fsync count
//! follows the disk's speed, not the page rate.
//!
//! Whoever completes the page (the host actor) awaits
//! [`Ticket::durable`] before sending the completion: its wait overlaps
//! the admission of the page's links, so it rarely waits long. Waiting
//! there, rather than in the partition's completion batch, keeps the
//! partition's batching as it is (one write per batch, never held back by
//! another host's page).
//!
//! A failed write or fsync fails every ticket of its group with
//! [`SyncError::Failed`] (the kernel may have dropped the dirty pages, so a
//! later successful fsync does not vouch for them): their pages are not
//! completed and are archived again. The archive starts a new WARC file
//! after such a failure ([`Tickets::take_failure`]).

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::metrics::Metrics;

/// Something whose written bytes can be made durable: a file, or a fake in
/// tests.
pub trait SyncData: Send + Sync {
    /// Makes every byte written so far durable (`fdatasync`).
    fn sync_data(&self) -> std::io::Result<()>;
}

impl SyncData for File {
    fn sync_data(&self) -> std::io::Result<()> {
        File::sync_data(self)
    }
}

/// A file to sync, shared between the writer and the sync thread.
pub type SyncHandle = Arc<dyn SyncData>;

/// Why a ticket's bytes are not known to be durable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncError {
    /// Writing the ticket's bytes, or the fsync of its round, failed.
    #[error("writing or syncing the archive's files failed: {0}")]
    Failed(String),
    /// The sync thread stopped before the ticket's round.
    #[error("the archive's sync thread stopped")]
    Stopped,
}

impl From<SyncError> for crate::error::Failure {
    /// The archive's failure: the host's task runs again (the page is
    /// archived again), and the host is not slowed for it.
    fn from(err: SyncError) -> Self {
        crate::error::Failure::Archive(err.to_string())
    }
}

/// When a round of fsyncs starts.
#[derive(Debug, Clone, Copy)]
pub struct GroupSettings {
    /// The oldest unsynced ticket waits at most this long for company.
    pub window: Duration,
    /// A round starts at once when this many tickets wait.
    pub max_group: u64,
}

impl Default for GroupSettings {
    /// 2 ms or 256 tickets: a page's completion waits about as long as the
    /// partition's own batching (1 ms), plus the fsync.
    fn default() -> Self {
        GroupSettings {
            window: Duration::from_millis(2),
            max_group: 256,
        }
    }
}

/// What the sync thread has settled, as the tickets' waiters see it.
#[derive(Debug, Clone, Default)]
struct Progress {
    /// Every ticket up to this one is settled: durable unless in `failed`.
    settled: u64,
    /// Inclusive ranges of tickets whose round failed (rare: kept whole).
    failed: Arc<Vec<(u64, u64, String)>>,
    /// The sync thread stopped: tickets after `settled` never will be.
    stopped: bool,
}

impl Progress {
    /// `Some` once `seq` is settled.
    fn outcome(&self, seq: u64) -> Option<Result<(), SyncError>> {
        if seq > self.settled {
            return self.stopped.then_some(Err(SyncError::Stopped));
        }
        let failed = self
            .failed
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&seq));
        Some(match failed {
            Some((_, _, why)) => Err(SyncError::Failed(why.clone())),
            None => Ok(()),
        })
    }
}

/// A claim that some bytes handed to the OS will be made durable: await
/// [`Ticket::durable`] before acting on them.
#[derive(Clone)]
pub struct Ticket {
    seq: u64,
    progress: watch::Receiver<Progress>,
}

impl Ticket {
    /// Its sequence number (tickets of one archive are issued in order).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// `Some` once its round is over: whether its bytes are durable.
    pub fn outcome(&self) -> Option<Result<(), SyncError>> {
        self.progress.borrow().outcome(self.seq)
    }

    /// Whether its bytes are known to be durable now.
    pub fn is_durable(&self) -> bool {
        matches!(self.outcome(), Some(Ok(())))
    }

    /// Waits until its bytes are durable, or known not to be.
    pub async fn durable(&self) -> Result<(), SyncError> {
        let mut progress = self.progress.clone();
        let seq = self.seq;
        let settled = progress
            .wait_for(|p| p.outcome(seq).is_some())
            .await
            .map_err(|_| SyncError::Stopped)?;
        settled.outcome(seq).unwrap_or(Err(SyncError::Stopped))
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Ticket({})", self.seq)
    }
}

/// Two tickets are the same ticket when they have the same number (they
/// come from one archive).
impl PartialEq for Ticket {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl Eq for Ticket {}

/// Counters of the sync thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SyncStats {
    /// Rounds run (each syncs every file written since the last).
    pub rounds: u64,
    /// Tickets settled durable.
    pub durable: u64,
    /// Tickets failed.
    pub failed: u64,
}

/// Tickets issued and files touched since the last round.
#[derive(Default)]
struct Pending {
    /// The last ticket issued.
    issued: u64,
    /// The last ticket a round has taken.
    taken: u64,
    /// Files written since the last round was taken.
    files: Vec<SyncHandle>,
    /// When the oldest ticket not yet taken was issued.
    oldest: Option<Instant>,
    /// Tickets whose bytes never reached the OS (a failed write): their
    /// round fails them whatever its fsync does.
    doomed: Vec<(u64, u64, String)>,
    /// A round failed since the writer last asked.
    failed: bool,
    stop: bool,
}

impl Pending {
    fn waiting(&self) -> u64 {
        self.issued - self.taken
    }
}

struct Shared {
    pending: Mutex<Pending>,
    wake: Condvar,
    progress: watch::Sender<Progress>,
    settings: GroupSettings,
    rounds: AtomicU64,
    durable: AtomicU64,
    failed: AtomicU64,
    metrics: Arc<Metrics>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Pending> {
        // A panic while holding it leaves plain counters: still usable.
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The writer's side of group commit, and the sync thread it runs.
pub struct GroupCommit {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GroupCommit {
    /// Starts the sync thread.
    pub fn start(settings: GroupSettings, metrics: Arc<Metrics>) -> std::io::Result<Self> {
        let (progress, _) = watch::channel(Progress::default());
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
            progress,
            settings,
            rounds: AtomicU64::new(0),
            durable: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            metrics,
        });
        let thread = std::thread::Builder::new()
            .name("trawl-archive-sync".into())
            .spawn({
                let shared = shared.clone();
                move || sync_loop(&shared)
            })?;
        Ok(GroupCommit {
            shared,
            thread: Some(thread),
        })
    }

    /// Tickets up to `upto` are handed to the OS, in `files` (or, with
    /// `doomed`, failed to be): the first round that starts after this
    /// call settles them.
    fn submit(&self, upto: u64, files: &[SyncHandle], doomed: Option<(u64, String)>) {
        let mut pending = self.shared.lock();
        pending.issued = upto;
        for file in files {
            if !pending.files.iter().any(|f| Arc::ptr_eq(f, file)) {
                pending.files.push(Arc::clone(file));
            }
        }
        if let Some((from, why)) = doomed {
            pending.doomed.push((from, upto, why));
        }
        pending.oldest.get_or_insert_with(Instant::now);
        drop(pending);
        self.shared.wake.notify_one();
    }

    /// Whether a round failed since the last call.
    fn take_failure(&self) -> bool {
        std::mem::take(&mut self.shared.lock().failed)
    }

    /// What the sync thread did so far.
    fn stats(&self) -> SyncStats {
        SyncStats {
            rounds: self.shared.rounds.load(Ordering::Relaxed),
            durable: self.shared.durable.load(Ordering::Relaxed),
            failed: self.shared.failed.load(Ordering::Relaxed),
        }
    }

    /// Runs a last round for what is pending and stops the sync thread.
    fn close(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("the archive's sync thread panicked");
            }
        }
        self.shared.progress.send_modify(|p| p.stopped = true);
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.close();
    }
}

/// The sync thread: takes a round, syncs its files, settles its tickets;
/// until stopped with nothing pending.
fn sync_loop(shared: &Shared) {
    while let Some(round) = next_round(shared) {
        let result = round.files.iter().try_for_each(|f| f.sync_data());
        settle(shared, round, result);
    }
}

/// What one round syncs and settles.
struct Round {
    /// Its tickets: `from..=to`.
    from: u64,
    to: u64,
    files: Vec<SyncHandle>,
    /// Those of its tickets whose write failed.
    doomed: Vec<(u64, u64, String)>,
}

/// Waits for the next round and takes it. `None` once stopped and
/// drained.
fn next_round(shared: &Shared) -> Option<Round> {
    let settings = shared.settings;
    let mut pending = shared.lock();
    loop {
        if pending.waiting() > 0 {
            if pending.stop || pending.waiting() >= settings.max_group {
                break;
            }
            let since = pending.oldest.map_or(Duration::ZERO, |t| t.elapsed());
            if since >= settings.window {
                break;
            }
            pending = shared
                .wake
                .wait_timeout(pending, settings.window - since)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        } else if pending.stop {
            return None;
        } else {
            pending = shared.wake.wait(pending).unwrap_or_else(|e| e.into_inner());
        }
    }
    let from = pending.taken + 1;
    pending.taken = pending.issued;
    pending.oldest = None;
    Some(Round {
        from,
        to: pending.taken,
        files: std::mem::take(&mut pending.files),
        doomed: std::mem::take(&mut pending.doomed),
    })
}

/// Publishes a round's outcome to its tickets' waiters.
fn settle(shared: &Shared, round: Round, result: std::io::Result<()>) {
    let Round {
        from, to, doomed, ..
    } = round;
    let group = to - from + 1;
    shared.rounds.fetch_add(1, Ordering::Relaxed);
    shared.metrics.archive_syncs.inc();
    shared.metrics.archive_sync_group.observe(group as f64);
    let failures = match result {
        Ok(()) => doomed,
        Err(e) => {
            let why = e.to_string();
            tracing::error!(error = %why, tickets = group, "fsync of the archive's files failed; their pages will be archived again");
            shared.metrics.archive_sync_failures.inc();
            shared.lock().failed = true;
            vec![(from, to, why)]
        }
    };
    let failed: u64 = failures.iter().map(|(lo, hi, _)| hi - lo + 1).sum();
    shared.failed.fetch_add(failed, Ordering::Relaxed);
    shared.durable.fetch_add(group - failed, Ordering::Relaxed);
    publish(&shared.progress, to, failures);
}

/// Settles every ticket up to `to`, failing those in `failures`.
fn publish(progress: &watch::Sender<Progress>, to: u64, failures: Vec<(u64, u64, String)>) {
    progress.send_modify(|p| {
        if !failures.is_empty() {
            let mut failed = (*p.failed).clone();
            failed.extend(failures);
            p.failed = Arc::new(failed);
        }
        p.settled = to;
    });
}

/// The tickets one writer (the archive) issues, in order, and how they
/// settle: at handover to the OS, or through a [`GroupCommit`].
pub struct Tickets {
    /// The last ticket issued.
    issued: u64,
    /// The last ticket whose bytes were handed over (or failed to be).
    handed: u64,
    settle: Settle,
}

/// Where tickets settle.
enum Settle {
    /// At handover: the bytes are in the OS (kill -9 safe). `failed`: a
    /// write failed since the writer last asked.
    Handover {
        progress: watch::Sender<Progress>,
        failed: bool,
    },
    /// When the group commit's fsync made them durable.
    Synced(GroupCommit),
}

impl Tickets {
    /// Tickets that settle once their bytes are in the OS.
    pub fn handover() -> Self {
        Tickets {
            issued: 0,
            handed: 0,
            settle: Settle::Handover {
                progress: watch::channel(Progress::default()).0,
                failed: false,
            },
        }
    }

    /// Tickets that settle once `commit` made their bytes durable.
    pub fn synced(commit: GroupCommit) -> Self {
        Tickets {
            issued: 0,
            handed: 0,
            settle: Settle::Synced(commit),
        }
    }

    /// A ticket for bytes just written to a buffer: it settles once the
    /// next handover (and, synced, the round after it) is done.
    pub fn issue(&mut self) -> Ticket {
        self.issued += 1;
        let progress = match &self.settle {
            Settle::Handover { progress, .. } => progress.subscribe(),
            Settle::Synced(commit) => commit.shared.progress.subscribe(),
        };
        Ticket {
            seq: self.issued,
            progress,
        }
    }

    /// Whether tickets wait for a handover.
    pub fn waiting(&self) -> bool {
        self.issued > self.handed
    }

    /// Every ticket issued so far has its bytes in the OS, in `files`
    /// (`Err`: writing them failed, and they fail); how many there were.
    pub fn handed_over(&mut self, files: &[SyncHandle], written: Result<(), String>) -> u64 {
        if !self.waiting() {
            return 0;
        }
        let (from, to) = (self.handed + 1, self.issued);
        self.handed = to;
        match (&mut self.settle, written) {
            (Settle::Handover { progress, .. }, Ok(())) => publish(progress, to, Vec::new()),
            (Settle::Handover { progress, failed }, Err(why)) => {
                *failed = true;
                publish(progress, to, vec![(from, to, why)]);
            }
            (Settle::Synced(commit), written) => {
                if written.is_err() {
                    commit.shared.lock().failed = true;
                }
                commit.submit(to, files, written.err().map(|why| (from, why)));
            }
        }
        to - from + 1
    }

    /// Whether a write or a round failed since the last call: the writer
    /// then starts new files rather than append to one whose state is
    /// unknown.
    pub fn take_failure(&mut self) -> bool {
        match &mut self.settle {
            Settle::Handover { failed, .. } => std::mem::take(failed),
            Settle::Synced(commit) => commit.take_failure(),
        }
    }

    /// What the sync thread did so far (nothing without one).
    pub fn stats(&self) -> SyncStats {
        match &self.settle {
            Settle::Handover { .. } => SyncStats::default(),
            Settle::Synced(commit) => commit.stats(),
        }
    }

    /// Settles what is handed over and stops: synced, the last round
    /// runs first; tickets never handed over fail as stopped.
    pub fn close(&mut self) {
        match &mut self.settle {
            Settle::Handover { progress, .. } => progress.send_modify(|p| p.stopped = true),
            Settle::Synced(commit) => commit.close(),
        }
    }
}

/// Makes a directory's entries (a file created or renamed in it) durable.
pub fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Starts the kernel writing a growing file's bytes to disk every
/// [`Writeback::EVERY_BYTES`], without waiting for it (RocksDB's
/// `bytes_per_sync`, for the archive's files).
///
/// Why: a WARC file is fsynced when it closes. Left to the kernel, whose
/// own writeback starts only after ~30 s or once gigabytes are dirty, a
/// short crawl's whole file (~90 MB for 20,000 pages) was still in the
/// page cache at that fsync, and the stop waited for all of it (~0.15 s of
/// a 5 s crawl on the side-by-side bench). Started as the file grows, the
/// writing overlaps the crawl, and the fsync waits for the last few MiB.
/// Nothing about durability changes: the fsync at close is still what
/// vouches for the file, and `sync_writes` still syncs in groups.
///
/// Every MiB (RocksDB's advice for `bytes_per_sync`): at 8 MiB, a stop
/// still found up to 8 MiB of each file to write (the WARC file, and the
/// events file, which had none: ~40 ms of the side-by-side bench's stop);
/// a call per MiB is one syscall per ~70 pages.
#[derive(Debug, Default)]
pub struct Writeback {
    /// The file's bytes before this offset have had their writing started.
    started_to: u64,
}

impl Writeback {
    /// How many written bytes wait before their writing is started.
    pub const EVERY_BYTES: u64 = 1 << 20;

    /// For a file whose first `offset` bytes were there before (an events
    /// file a run appends to): their writing is not started again.
    pub fn from_offset(offset: u64) -> Self {
        Writeback { started_to: offset }
    }

    /// Where the writing started so far ends.
    pub fn started_to(&self) -> u64 {
        self.started_to
    }

    /// Notes that `file`'s first `handed_over` bytes have been handed to the
    /// OS (written, not buffered in the process), and starts writing them
    /// out once enough wait. Returns the range started, if any.
    pub fn advance(&mut self, file: &File, handed_over: u64) -> Option<(u64, u64)> {
        if handed_over < self.started_to + Self::EVERY_BYTES {
            return None;
        }
        let range = (self.started_to, handed_over - self.started_to);
        start_writeback(file, range.0, range.1);
        self.started_to = handed_over;
        Some(range)
    }
}

/// Asks the kernel to start writing `len` bytes of `file` at `offset`
/// (`sync_file_range(SYNC_FILE_RANGE_WRITE)`: it returns without waiting).
/// Advisory: where it fails or does not exist, the pages are written as
/// they would have been without it, by the kernel or at the next fsync.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: sync_file_range reads the descriptor (open, owned by `file`
    // for the call) and two integers; it touches no memory of ours.
    let _ = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_: &File, _: u64, _: u64) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn writeback_starts_every_few_mib_of_what_reached_the_os() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = File::create(dir.path().join("f")).unwrap();
        let mut wb = Writeback::default();
        let every = Writeback::EVERY_BYTES;
        // Below the step nothing is started; at it, everything so far.
        assert_eq!(wb.advance(&file, every - 1), None);
        std::io::Write::write_all(&mut file, &vec![7u8; every as usize + 10]).unwrap();
        assert_eq!(wb.advance(&file, every + 10), Some((0, every + 10)));
        // The next range starts where the last one ended.
        assert_eq!(wb.advance(&file, 2 * every), None);
        assert_eq!(wb.advance(&file, 2 * every + 10), Some((every + 10, every)));
        // What was written is intact (the call only starts writing).
        assert_eq!(file.metadata().unwrap().len(), every + 10);
    }

    /// A file whose every sync announces itself and waits for the test's
    /// verdict: `Ok` lets it succeed, `Err` fails it.
    struct Gated {
        entered: Mutex<mpsc::Sender<()>>,
        verdict: Mutex<mpsc::Receiver<Result<(), String>>>,
        syncs: AtomicU64,
    }

    impl SyncData for Gated {
        fn sync_data(&self) -> std::io::Result<()> {
            self.syncs.fetch_add(1, Ordering::SeqCst);
            self.entered.lock().unwrap().send(()).unwrap();
            let verdict = self.verdict.lock().unwrap().recv().unwrap();
            verdict.map_err(std::io::Error::other)
        }
    }

    struct Rig {
        tickets: Tickets,
        file: SyncHandle,
        gated: Arc<Gated>,
        entered: mpsc::Receiver<()>,
        verdict: mpsc::Sender<Result<(), String>>,
        metrics: Arc<Metrics>,
    }

    fn rig(settings: GroupSettings) -> Rig {
        let (entered_tx, entered) = mpsc::channel();
        let (verdict, verdict_rx) = mpsc::channel();
        let gated = Arc::new(Gated {
            entered: Mutex::new(entered_tx),
            verdict: Mutex::new(verdict_rx),
            syncs: AtomicU64::new(0),
        });
        let metrics = Arc::new(Metrics::new());
        Rig {
            tickets: Tickets::synced(GroupCommit::start(settings, metrics.clone()).unwrap()),
            file: gated.clone(),
            gated,
            entered,
            verdict,
            metrics,
        }
    }

    impl Rig {
        /// A ticket for bytes written to `files` and handed over at once.
        fn issue(&mut self, files: &[SyncHandle]) -> Ticket {
            let ticket = self.tickets.issue();
            assert_eq!(self.tickets.handed_over(files, Ok(())), 1);
            ticket
        }

        fn issue_one(&mut self) -> Ticket {
            let file = self.file.clone();
            self.issue(&[file])
        }
    }

    /// A round starts as soon as a ticket waits.
    fn eager() -> GroupSettings {
        GroupSettings {
            window: Duration::ZERO,
            max_group: 1,
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn one_round_settles_every_ticket_issued_before_it() {
        let mut r = rig(eager());
        let first = r.issue_one();
        r.entered.recv().unwrap();
        // Issued while the first round syncs: all of them wait for the
        // next round, which settles them together.
        let later: Vec<Ticket> = (0..20).map(|_| r.issue_one()).collect();
        assert_eq!(first.outcome(), None);
        r.verdict.send(Ok(())).unwrap();
        assert_eq!(block_on(first.durable()), Ok(()));
        r.entered.recv().unwrap();
        assert!(later.iter().all(|t| t.outcome().is_none()));
        r.verdict.send(Ok(())).unwrap();
        for t in &later {
            assert_eq!(block_on(t.durable()), Ok(()));
        }
        assert_eq!(r.gated.syncs.load(Ordering::SeqCst), 2);
        assert_eq!(
            r.tickets.stats(),
            SyncStats {
                rounds: 2,
                durable: 21,
                failed: 0
            }
        );
        assert_eq!(r.metrics.archive_syncs.get(), 2);
        assert_eq!(r.metrics.archive_sync_group.get_sample_sum(), 21.0);
    }

    #[test]
    fn a_full_group_starts_a_round_without_waiting_for_the_window() {
        let mut r = rig(GroupSettings {
            window: Duration::from_secs(3600),
            max_group: 10,
        });
        let tickets: Vec<Ticket> = (0..10).map(|_| r.issue_one()).collect();
        r.entered.recv().unwrap();
        r.verdict.send(Ok(())).unwrap();
        for t in &tickets {
            assert_eq!(block_on(t.durable()), Ok(()));
        }
        assert_eq!(r.gated.syncs.load(Ordering::SeqCst), 1);
        // One ticket alone waits for the window (an hour here): closing
        // runs its round at once.
        let lone = r.issue_one();
        assert_eq!(lone.outcome(), None);
        let (mut tickets, verdict) = (r.tickets, r.verdict);
        let closer = std::thread::spawn(move || tickets.close());
        r.entered.recv().unwrap();
        verdict.send(Ok(())).unwrap();
        closer.join().unwrap();
        assert_eq!(block_on(lone.durable()), Ok(()));
    }

    #[test]
    fn a_failed_fsync_fails_its_round_only() {
        let mut r = rig(eager());
        let doomed = r.issue_one();
        r.entered.recv().unwrap();
        let next = r.issue_one();
        r.verdict.send(Err("EIO".into())).unwrap();
        assert_eq!(
            block_on(doomed.durable()),
            Err(SyncError::Failed("EIO".into()))
        );
        assert!(r.tickets.take_failure());
        assert!(!r.tickets.take_failure(), "reported once");
        // A later successful round does not vouch for the failed one.
        r.entered.recv().unwrap();
        r.verdict.send(Ok(())).unwrap();
        assert_eq!(block_on(next.durable()), Ok(()));
        assert!(!doomed.is_durable());
        assert_eq!(doomed.outcome(), Some(Err(SyncError::Failed("EIO".into()))));
        assert_eq!(r.tickets.stats().failed, 1);
        assert_eq!(r.metrics.archive_sync_failures.get(), 1);
    }

    #[test]
    fn each_file_touched_since_the_last_round_is_synced_once() {
        let (mut a, b) = (rig(eager()), rig(eager()));
        let (fa, fb) = (a.file.clone(), b.file.clone());
        let ticket = a.issue(&[fa.clone(), fb, fa]);
        a.entered.recv().unwrap();
        a.verdict.send(Ok(())).unwrap();
        b.entered.recv().unwrap();
        b.verdict.send(Ok(())).unwrap();
        assert_eq!(block_on(ticket.durable()), Ok(()));
        assert_eq!(a.gated.syncs.load(Ordering::SeqCst), 1);
        assert_eq!(b.gated.syncs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn handover_tickets_settle_when_their_bytes_reach_the_os() {
        let mut tickets = Tickets::handover();
        let (first, second) = (tickets.issue(), tickets.issue());
        assert!(tickets.waiting());
        assert_eq!(first.outcome(), None);
        assert_eq!(tickets.handed_over(&[], Ok(())), 2);
        assert_eq!(tickets.handed_over(&[], Ok(())), 0, "none waits");
        assert!(!tickets.waiting());
        assert_eq!(block_on(first.durable()), Ok(()));
        assert_eq!(block_on(second.durable()), Ok(()));
        assert!(!tickets.take_failure());
        // A failed write fails its group only, and is reported once.
        let doomed = tickets.issue();
        tickets.handed_over(&[], Err("ENOSPC".into()));
        assert_eq!(
            block_on(doomed.durable()),
            Err(SyncError::Failed("ENOSPC".into()))
        );
        assert!(first.is_durable());
        assert!(tickets.take_failure());
        assert!(!tickets.take_failure());
        // Never handed over: closing fails it as stopped.
        let lost = tickets.issue();
        tickets.close();
        assert_eq!(block_on(lost.durable()), Err(SyncError::Stopped));
    }

    #[test]
    fn a_synced_ticket_waits_for_its_handover_before_any_round() {
        let mut r = rig(eager());
        let unwritten = r.tickets.issue();
        // Were it submitted, closing would sync it: let such a sync pass.
        r.verdict.send(Ok(())).unwrap();
        let mut tickets = r.tickets;
        tickets.close();
        assert_eq!(block_on(unwritten.durable()), Err(SyncError::Stopped));
        assert_eq!(r.gated.syncs.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_failed_write_fails_its_tickets_though_the_fsync_succeeds() {
        let mut r = rig(eager());
        let doomed = r.tickets.issue();
        let file = r.file.clone();
        r.tickets.handed_over(&[file], Err("ENOSPC".into()));
        r.entered.recv().unwrap();
        r.verdict.send(Ok(())).unwrap();
        assert_eq!(
            block_on(doomed.durable()),
            Err(SyncError::Failed("ENOSPC".into()))
        );
        assert!(r.tickets.take_failure());
        assert_eq!(r.tickets.stats().failed, 1);
        assert_eq!(r.tickets.stats().durable, 0);
        let next = r.issue_one();
        r.entered.recv().unwrap();
        r.verdict.send(Ok(())).unwrap();
        assert_eq!(block_on(next.durable()), Ok(()));
    }

    #[test]
    fn a_ticket_never_synced_fails_as_stopped() {
        let progress = Progress {
            settled: 3,
            failed: Arc::new(vec![(2, 2, "EIO".into())]),
            stopped: true,
        };
        assert_eq!(progress.outcome(1), Some(Ok(())));
        assert_eq!(
            progress.outcome(2),
            Some(Err(SyncError::Failed("EIO".into())))
        );
        assert_eq!(progress.outcome(4), Some(Err(SyncError::Stopped)));
        let running = Progress {
            stopped: false,
            ..progress
        };
        assert_eq!(running.outcome(4), None);
    }
}
