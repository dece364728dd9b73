//! The host state machine driven by a manual clock: every schedule is
//! asserted exactly, with no sockets and no sleeps.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::frontier::importance::Cash;
use crate::frontier::EntryKind;
use crate::store::codec::{host_prefix, queue_key, queue_prefix, recrawl_key, QueueValue};

const HOST: &str = "a.test";

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A host's durable queue, refresh schedule and URL records in maps.
#[derive(Default)]
struct FakeQueue {
    entries: RefCell<BTreeMap<Vec<u8>, QueueEntry>>,
    seq: RefCell<u64>,
    refreshes: RefCell<BTreeMap<Vec<u8>, QueueEntry>>,
    records: RefCell<HashMap<Fingerprint, UrlRecord>>,
}

impl FakeQueue {
    fn push(&self, url: &str, priority: Priority) {
        self.push_ranked(url, priority, Rank::FIFO);
    }

    /// Queues `url` at `rank`, as a partition does; returns the rank.
    fn push_with(&self, url: &str, cash: f32) -> Rank {
        let rank = Rank::of(Cash::new(cash));
        self.push_ranked(url, Priority::NORMAL, rank);
        rank
    }

    fn push_ranked(&self, url: &str, priority: Priority, rank: Rank) {
        let mut seq = self.seq.borrow_mut();
        *seq += 1;
        let key = queue_key(HOST, priority, rank, *seq);
        let value = QueueValue {
            provenance: Default::default(),
            fp: crate::url::Fingerprint::of(url),
            depth: 0,
            kind: EntryKind::Page,
            url: url.to_owned(),
        };
        let entry = QueueEntry {
            key: key.clone(),
            value,
            recrawl: false,
            previous: None,
        };
        self.entries.borrow_mut().insert(key, entry);
    }

    /// Schedules a refresh of `url`, fetched before as `record`, at
    /// `due_ms`.
    fn schedule(&self, url: &str, due_ms: u64, record: UrlRecord) {
        let fp = crate::url::Fingerprint::of(url);
        let key = recrawl_key(HOST, due_ms, fp);
        let value = QueueValue {
            provenance: Default::default(),
            fp,
            depth: 0,
            kind: EntryKind::Page,
            url: url.to_owned(),
        };
        self.records.borrow_mut().insert(fp, record);
        let entry = QueueEntry {
            key: key.clone(),
            value,
            recrawl: true,
            previous: None,
        };
        self.refreshes.borrow_mut().insert(key, entry);
    }

    /// Completing an entry removes it, as the partition would.
    fn remove(&self, key: &[u8]) {
        self.entries.borrow_mut().remove(key);
        self.refreshes.borrow_mut().remove(key);
    }
}

impl QueueSource for FakeQueue {
    fn queue_page(
        &self,
        host: &str,
        priority: Priority,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        let prefix = queue_prefix(host, priority);
        Ok(self
            .entries
            .borrow()
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, _)| after.is_none_or(|a| k.as_slice() > a))
            .take(n)
            .map(|(_, e)| e.clone())
            .collect())
    }

    fn recrawl_page(
        &self,
        host: &str,
        due_by_ms: u64,
        after: Option<&[u8]>,
        n: usize,
    ) -> Result<Vec<QueueEntry>, StoreError> {
        let prefix = host_prefix(host);
        let records = self.records.borrow();
        Ok(self
            .refreshes
            .borrow()
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter(|(k, _)| after.is_none_or(|a| k.as_slice() > a))
            .take_while(|(k, _)| crate::store::codec::recrawl_key_due(k).unwrap() <= due_by_ms)
            .take(n)
            .map(|(_, e)| QueueEntry {
                previous: records.get(&e.value.fp).cloned().map(Arc::new),
                ..e.clone()
            })
            .collect())
    }

    fn next_recrawl_ms(&self, host: &str, after: Option<&[u8]>) -> Result<Option<u64>, StoreError> {
        let prefix = host_prefix(host);
        Ok(self
            .refreshes
            .borrow()
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .find(|(k, _)| after.is_none_or(|a| k.as_slice() > a))
            .and_then(|(k, _)| crate::store::codec::recrawl_key_due(k)))
    }

    fn url_record(&self, fp: Fingerprint) -> Result<Option<UrlRecord>, StoreError> {
        Ok(self.records.borrow().get(&fp).cloned())
    }
}

fn settings() -> HostSettings {
    let mut policy = Policy::simple(secs(1), 10.0, 1);
    policy.max_delay = secs(20);
    HostSettings {
        policy,
        robots: RobotsSettings {
            product_token: "trawl".into(),
            ttl: secs(24 * 3600),
            retry_base: secs(60),
            retry_max: secs(3600),
            give_up_after: secs(30 * 24 * 3600),
        },
        retries: RetryLimits {
            max_attempts: 3,
            max_throttled_attempts: 20,
        },
        max_redirects: 5,
        archive_non_html: true,
        exact_dedup: true,
        sitemaps: None,
        crashed: false,
        ip_slots: None,
        dns: DnsOverrides::default(),
        // Long waits are asserted on the timer here; the passivation tests
        // set their own threshold.
        passivate_after: secs(30 * 24 * 3600),
        request_timeout: secs(30),
        recrawl: RecrawlSettings {
            enabled: true,
            policy: crate::frontier::recrawl::RecrawlPolicy {
                min_interval: secs(60),
                max_interval: secs(90 * 86_400),
                default_interval: secs(3600),
            },
            refresh_share: 0.5,
            change_distance: 3,
        },
        ordering: crate::frontier::importance::Ordering::Importance,
        host_cycle: Duration::ZERO,
        dormant_in_memory: 4_096,
    }
}

/// The settings with passivation after `after` of nothing to do.
fn passivating(after: Duration) -> HostSettings {
    HostSettings {
        passivate_after: after,
        ..settings()
    }
}

/// A machine, its queue and the clock it is driven by.
struct Harness {
    m: HostMachine,
    q: FakeQueue,
    clock: ManualClock,
    metrics: Arc<Metrics>,
}

impl Harness {
    fn new(settings: HostSettings) -> Self {
        Self::with_state(settings, HostState::default())
    }

    fn with_state(settings: HostSettings, state: HostState) -> Self {
        let clock = ManualClock::new();
        let metrics = Arc::new(Metrics::new());
        let m = HostMachine::new(
            HOST.into(),
            Arc::new(settings),
            metrics.clone(),
            state,
            clock.now(),
        );
        Harness {
            m,
            q: FakeQueue::default(),
            clock,
            metrics,
        }
    }

    fn now(&self) -> Now {
        self.clock.now()
    }

    fn poll(&mut self) -> Vec<Effect> {
        let now = self.now();
        self.m.poll(&self.q, now)
    }

    fn wake(&mut self) -> Vec<Effect> {
        let now = self.now();
        self.m.wake(Arrivals::levels(u8::MAX), &self.q, now)
    }

    fn timer(&mut self) -> Vec<Effect> {
        let now = self.now();
        self.m.timer(&self.q, now)
    }

    /// Answers fetch `id` after `took` on the wire, the clock moved by it.
    fn answer(
        &mut self,
        id: TaskId,
        took: Duration,
        result: Result<FetchResponse, FetchError>,
    ) -> Vec<Effect> {
        self.clock.advance(took);
        let now = self.now();
        let result = result.map(|mut r| {
            r.elapsed = took;
            r
        });
        self.m.fetched(id, result, &self.q, now)
    }

    /// Runs every task in `fx` successfully (completions leave the
    /// queue), and returns the effects that follow.
    fn finish_tasks(&mut self, fx: &[Effect]) -> Vec<Effect> {
        let mut out = Vec::new();
        for (id, task) in runs(fx) {
            if let Task::Complete(c) = &task {
                self.q.remove(&c.completion.key);
            }
            if let Task::Process(job) = &task {
                self.q.remove(&job.entry.key);
            }
            let now = self.now();
            out.extend(self.m.task_done(id, task, Ok(()), &self.q, now));
        }
        out
    }

    /// Runs the tasks of `fx`; `fx` followed by what came of them.
    fn settle_tasks(&mut self, mut fx: Vec<Effect>) -> Vec<Effect> {
        let more = self.finish_tasks(&fx);
        fx.extend(more);
        fx
    }

    /// Fetches robots.txt with `status` and `body`, runs its tasks.
    fn robots(&mut self, status: u16, body: &str) -> Vec<Effect> {
        let fx = self.wake();
        let (id, url) = only_fetch(&fx);
        assert_eq!(url, "http://a.test/robots.txt");
        let fx = self.answer(id, ms(10), Ok(response(status, &[], body)));
        let mut all = self.finish_tasks(&fx);
        all.extend(fx);
        all
    }
}

fn response(status: u16, headers: &[(&str, &str)], body: &str) -> FetchResponse {
    FetchResponse::synthetic(status, headers, body)
}

fn html() -> FetchResponse {
    response(200, &[("content-type", "text/html")], "<p>hi</p>")
}

fn fetches(fx: &[Effect]) -> Vec<(TaskId, String)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Fetch { id, url, .. } => Some((*id, url.to_string())),
            _ => None,
        })
        .collect()
}

fn only_fetch(fx: &[Effect]) -> (TaskId, String) {
    let f = fetches(fx);
    assert_eq!(f.len(), 1, "expected one fetch in {fx:?}");
    f[0].clone()
}

fn wake_at(fx: &[Effect]) -> Option<Instant> {
    fx.iter().rev().find_map(|e| match e {
        Effect::WakeAt(at) => Some(*at),
        _ => None,
    })
}

fn runs(fx: &[Effect]) -> Vec<(TaskId, Task)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Run { id, task, .. } => Some((*id, task.clone())),
            _ => None,
        })
        .collect()
}

fn completions(fx: &[Effect]) -> Vec<UrlState> {
    runs(fx)
        .into_iter()
        .filter_map(|(_, t)| match t {
            Task::Complete(c) => Some(c.completion.record.state),
            _ => None,
        })
        .collect()
}

fn passivation(fx: &[Effect]) -> Option<Option<u64>> {
    fx.iter().find_map(|e| match e {
        Effect::Passivate { due_ms, .. } => Some(*due_ms),
        _ => None,
    })
}

/// Fetches the next page at the time the machine asks for, answering it
/// with `resp` after `took`; returns the fetch time and the effects.
fn fetch_next(h: &mut Harness, took: Duration, resp: FetchResponse) -> (Instant, Vec<Effect>) {
    let mut fx = h.poll();
    if fetches(&fx).is_empty() {
        let at = h.m.armed().expect("a fetch or a timer");
        h.clock.advance_to(at);
        fx = h.timer();
    }
    let started = h.now().at;
    let (id, _) = only_fetch(&fx);
    let fx = h.answer(id, took, Ok(resp));
    let mut all = h.finish_tasks(&fx);
    all.extend(fx);
    (started, all)
}

#[test]
fn robots_first_then_the_completion_to_start_delay() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.q.push("http://a.test/2", Priority::SEED);
    let fx = h.robots(200, "User-agent: *\nAllow: /");
    // robots.txt took 10 ms: the floor of 1 s applies after it.
    let robots_done = h.now().at;
    assert_eq!(wake_at(&fx), Some(robots_done + secs(1)));
    assert!(fetches(&h.poll()).is_empty(), "nothing before the delay");
    h.clock.advance(ms(999));
    assert!(fetches(&h.timer()).is_empty());
    h.clock.advance(ms(1));
    let fx = h.timer();
    let (id, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/1");
    // One in flight per host: no second fetch meanwhile.
    assert!(fetches(&h.poll()).is_empty());
    // 300 ms on the wire: the adaptive delay is 10 × 300 ms = 3 s.
    let fx = h.answer(id, ms(300), Ok(html()));
    let done = h.now().at;
    let fx = h.settle_tasks(fx);
    assert_eq!(wake_at(&fx), Some(done + secs(3)));
    let (started, _) = fetch_next(&mut h, ms(10), html());
    assert_eq!(started, done + secs(3));
}

#[test]
fn adaptive_delay_counts_the_wire_not_the_wait_for_a_fetch_slot() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    h.clock.advance(secs(1));
    let (id, _) = only_fetch(&h.timer());
    // The answer comes 5 s after dispatch (a global slot was busy), but
    // the request took 100 ms on the wire.
    h.clock.advance(ms(4_900));
    let now = h.now();
    let mut resp = html();
    resp.elapsed = ms(100);
    h.clock.advance(ms(100));
    let now2 = h.now();
    let _ = now;
    let fx = h.m.fetched(id, Ok(resp), &h.q, now2);
    assert_eq!(wake_at(&fx), None, "nothing queued, no timer");
    assert_eq!(
        h.m.snapshot(now2, [0; LEVELS])
            .politeness
            .next_allowed_in_ms,
        1_000
    );
}

#[test]
fn the_adaptive_delay_stops_at_its_ceiling() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.q.push("http://a.test/2", Priority::SEED);
    h.robots(200, "");
    // 25 s on the wire would owe 250 s; max_delay holds it to 20 s.
    let (_, fx) = fetch_next(&mut h, secs(25), html());
    let done = h.now().at;
    assert_eq!(wake_at(&fx), Some(done + secs(20)));
}

#[test]
fn crawl_delay_governs_the_wait_after_robots_txt_itself() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.q.push("http://a.test/2", Priority::SEED);
    let fx = h.robots(200, "User-agent: *\nCrawl-delay: 7\n");
    let done = h.now().at;
    assert_eq!(wake_at(&fx), Some(done + secs(7)));
    let (started, _) = fetch_next(&mut h, ms(10), html());
    assert_eq!(started, done + secs(7));
    let done = h.now().at;
    let (started, _) = fetch_next(&mut h, ms(10), html());
    assert_eq!(started, done + secs(7));
    // A Crawl-delay over the cap counts at the cap.
    let capped = Harness::new(settings());
    let cap = capped.m.settings.policy.max_crawl_delay;
    let mut h = capped;
    h.q.push("http://a.test/1", Priority::SEED);
    let fx = h.robots(200, "User-agent: *\nCrawl-delay: 86400\n");
    assert_eq!(wake_at(&fx), Some(h.now().at + cap));
    assert_eq!(h.metrics.crawl_delay_capped.get(), 1);
}

#[test]
fn retry_after_in_seconds_and_as_a_date_and_throttling_is_not_a_failed_attempt() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    // Five 503s with Retry-After in a row: more than max_attempts (3), yet
    // the URL is still tried again, each time after the server's wait.
    for _ in 0..5 {
        let (_, fx) = fetch_next(&mut h, ms(10), response(503, &[("retry-after", "120")], ""));
        assert!(completions(&fx).is_empty(), "not given up: {fx:?}");
        assert_eq!(wake_at(&fx), Some(h.now().at + secs(120)));
    }
    // The HTTP-date form: a date 90 s after the answer (whole seconds, as
    // HTTP dates are, so the wait is between 89 and 90 s).
    let answer_at = h.now().wall + (h.m.armed().unwrap() - h.now().at) + ms(10);
    let date = httpdate::fmt_http_date(answer_at + secs(90));
    let (_, fx) = fetch_next(&mut h, ms(10), response(429, &[("retry-after", &date)], ""));
    let wait = wake_at(&fx).unwrap() - h.now().at;
    assert!(wait > secs(89) && wait <= secs(90), "{wait:?}");
    // A 200 at last: processed and completed.
    let (_, fx) = fetch_next(&mut h, ms(10), html());
    assert!(runs(&fx)
        .iter()
        .any(|(_, t)| matches!(t, Task::Process(j) if j.url.as_str() == "http://a.test/1")));
}

#[test]
fn throttling_has_its_own_larger_bound() {
    let mut s = settings();
    s.retries.max_throttled_attempts = 4;
    s.policy.park_after_failures = 0;
    let mut h = Harness::new(s);
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    for throttled in 1..=3 {
        let (_, fx) = fetch_next(&mut h, ms(10), response(429, &[("retry-after", "1")], ""));
        // Only the tries are stored: the URL stays queued.
        let tries: Vec<_> = runs(&fx)
            .into_iter()
            .map(|(_, t)| match t {
                Task::RecordTries(c) => (c.record.state, c.record.tries),
                other => panic!("{other:?}"),
            })
            .collect();
        let expected = Tries {
            failed: 0,
            throttled,
        };
        assert_eq!(tries, [(UrlState::RetryDue, expected)]);
    }
    // The fourth 429 is final: its answer is processed (archived) as is.
    let (_, fx) = fetch_next(&mut h, ms(10), response(429, &[("retry-after", "1")], ""));
    assert!(matches!(runs(&fx)[..], [(_, Task::Process(ref j))] if j.response.status == 429));
}

#[test]
fn failures_back_off_exponentially_then_park_and_passivate() {
    let mut s = passivating(secs(30));
    s.retries.max_attempts = 100;
    let mut h = Harness::new(s);
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    let mut waits = Vec::new();
    let mut last = None;
    for _ in 0..5 {
        let (_, fx) = fetch_next(&mut h, ms(0), response(500, &[], ""));
        let done = h.now().at;
        if let Some(at) = wake_at(&fx) {
            waits.push((at - done).as_secs_f64());
        }
        last = Some(fx);
    }
    // Backoff 2, 4, 8, 16 s (jitter adds at most 25 %), then parked 1 h.
    assert_eq!(waits.len(), 5);
    for (wait, base) in waits.iter().zip([2.0, 4.0, 8.0, 16.0]) {
        assert!((base..=base * 1.25).contains(wait), "{waits:?}");
    }
    assert_eq!(waits[4], 3600.0);
    // Waiting an hour, the host asks to be passivated until then.
    let due = passivation(&last.unwrap()).expect("passivated");
    assert_eq!(due, Some(h.now().ms_at(h.now().at + secs(3600))));
    let snap = h.m.snapshot(h.now(), [1, 0, 0, 0]);
    assert!(snap.politeness.parked);
}

#[test]
fn transient_failures_use_max_attempts_then_the_url_is_recorded_failed() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    for attempt in 1..=3 {
        let mut fx = h.poll();
        if fetches(&fx).is_empty() {
            h.clock.advance_to(h.m.armed().unwrap());
            fx = h.timer();
        }
        let (id, _) = only_fetch(&fx);
        let fx = h.answer(id, ms(5), Err(FetchError::Timeout));
        if attempt < 3 {
            assert!(completions(&fx).is_empty());
        } else {
            assert_eq!(completions(&fx), [UrlState::Failed]);
        }
    }
}

#[test]
fn robots_4xx_allows_everything() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/private/1", Priority::SEED);
    h.robots(404, "");
    let (_, fx) = fetch_next(&mut h, ms(5), html());
    assert!(!runs(&fx).is_empty());
}

#[test]
fn robots_5xx_or_unreachable_holds_every_url_then_gives_up() {
    let mut s = settings();
    s.policy.park_after_failures = 0;
    let give_up = s.robots.give_up_after;
    let mut h = Harness::new(s);
    h.q.push("http://a.test/1", Priority::SEED);
    let fx = h.wake();
    let (id, _) = only_fetch(&fx);
    let fx = h.answer(id, ms(5), Ok(response(503, &[], "")));
    let fx = h.settle_tasks(fx);
    // Nothing of the origin is fetched; robots.txt is retried at 1 min.
    assert!(fetches(&fx).is_empty());
    let retry = wake_at(&fx).expect("a retry is armed");
    assert_eq!(retry, h.now().at + secs(60));
    // Unreachable (no response) is the same; then 2 min.
    h.clock.advance_to(retry);
    let (id, url) = only_fetch(&h.timer());
    assert_eq!(url, "http://a.test/robots.txt");
    let fx = h.answer(id, ms(5), Err(FetchError::Connect("refused".into())));
    assert_eq!(wake_at(&fx), Some(h.now().at + secs(120)));
    assert!(completions(&fx).is_empty());
    // Far past give_up_after, after a third failure: the URL is given up.
    h.clock.advance(give_up);
    let (id, _) = only_fetch(&h.timer());
    let fx = h.answer(id, ms(5), Err(FetchError::Timeout));
    assert_eq!(completions(&fx), [UrlState::RobotsUnreachable]);
}

#[test]
fn an_address_the_ssrf_guard_denies_records_its_urls_denied_at_once() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.q.push("http://a.test/2", Priority::SEED);
    let (id, _) = only_fetch(&h.wake());
    let fx = h.answer(id, ms(1), Err(FetchError::SsrfDenied("127.0.0.1".into())));
    assert_eq!(completions(&fx), [UrlState::Denied, UrlState::Denied]);
    assert!(fetches(&fx).is_empty());
    assert!(wake_at(&fx).is_none(), "nothing to retry");
    // With the completions written the host is idle: passivated for good.
    let fx = h.finish_tasks(&fx);
    assert_eq!(passivation(&fx), Some(None));
}

#[test]
fn robots_redirects_are_followed_under_politeness() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    let (id, _) = only_fetch(&h.wake());
    let fx = h.answer(
        id,
        ms(5),
        Ok(response(301, &[("location", "/robots-2.txt")], "")),
    );
    // The hop waits the host's delay like any request.
    let at = wake_at(&fx).expect("the next hop waits");
    assert_eq!(at, h.now().at + secs(1));
    h.clock.advance_to(at);
    let (id, url) = only_fetch(&h.timer());
    assert_eq!(url, "http://a.test/robots-2.txt");
    let fx = h.answer(
        id,
        ms(5),
        Ok(response(200, &[], "User-agent: *\nDisallow: /")),
    );
    // The page is decided at once: a disallowed URL costs no request.
    assert_eq!(completions(&fx), [UrlState::Disallowed]);
}

#[test]
fn a_drain_in_the_middle_of_a_fetch_waits_for_it_and_starts_nothing_new() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.q.push("http://a.test/2", Priority::SEED);
    h.robots(200, "");
    h.clock.advance(secs(1));
    let (id, _) = only_fetch(&h.timer());
    let now = h.now();
    let fx = h.m.drain(now);
    assert!(fx.is_empty(), "a request is in flight: {fx:?}");
    // The response is still processed (archived, links admitted)...
    let fx = h.answer(id, ms(20), Ok(html()));
    assert!(fetches(&fx).is_empty());
    assert!(!fx.iter().any(|e| matches!(e, Effect::Drained(_))));
    let process = runs(&fx);
    assert_eq!(process.len(), 1);
    // ...and the drain answers once it is done, with the schedule owed.
    let fx = h.finish_tasks(&fx);
    let state = fx
        .iter()
        .find_map(|e| match e {
            Effect::Drained(s) => Some(s.clone()),
            _ => None,
        })
        .expect("drained");
    let schedule = state.schedule.unwrap();
    assert!(schedule.next_allowed_ms >= h.now().ms_at(h.now().at + ms(1000)) - 1);
    assert!(fetches(&h.poll()).is_empty(), "nothing after a drain");
}

#[test]
fn a_failed_task_runs_again_with_backoff_and_is_not_the_hosts_failure() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    h.clock.advance(secs(1));
    let (id, _) = only_fetch(&h.timer());
    let fx = h.answer(id, ms(10), Ok(html()));
    let (task_id, task) = runs(&fx).remove(0);
    let now = h.now();
    let fx = h.m.task_done(
        task_id,
        task,
        Err(Failure::Store("disk full".into())),
        &h.q,
        now,
    );
    let again = wake_at(&fx).expect("a retry is armed");
    assert_eq!(again, now.at + secs(1));
    assert_eq!(h.m.snapshot(now, [1, 0, 0, 0]).politeness.failures, 0);
    assert_eq!(h.m.snapshot(now, [1, 0, 0, 0]).failing_tasks, 1);
    assert!(passivation(&fx).is_none(), "work is pending: not idle");
    h.clock.advance_to(again);
    let fx = h.timer();
    let rerun = runs(&fx);
    assert_eq!(rerun.len(), 1);
    assert_eq!(rerun[0].0, task_id, "the same task, not a new fetch");
    let fx = h.finish_tasks(&fx);
    assert_eq!(passivation(&fx), Some(None), "done and idle");
    assert_eq!(
        h.metrics
            .pipeline_failures
            .with_label_values(&["process", "store"])
            .get(),
        1
    );
}

#[test]
fn a_lost_answer_is_not_the_hosts_failure_but_owes_the_ordinary_delay() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    h.clock.advance(secs(1));
    let (id, _) = only_fetch(&h.timer());
    let now = h.now();
    let fx = h.m.fetch_lost(id, false, &h.q, now);
    // The request may have reached the host: the floor delay, no backoff.
    assert!(fetches(&fx).is_empty());
    assert_eq!(wake_at(&fx), Some(now.at + secs(1)));
    assert_eq!(h.m.snapshot(now, [1, 0, 0, 0]).politeness.failures, 0);
    h.clock.advance(secs(1));
    let (id, url) = only_fetch(&h.timer());
    assert_eq!(url, "http://a.test/1", "the same URL, first");
    // A failure, then a lost answer: the failure count is kept (not reset
    // as a success would), and the backoff owed is owed again.
    let fx = h.answer(id, ms(5), Ok(response(500, &[], "")));
    let backoff = wake_at(&fx).unwrap() - h.now().at;
    h.clock.advance(backoff);
    let (id, _) = only_fetch(&h.timer());
    let now = h.now();
    let fx = h.m.fetch_lost(id, false, &h.q, now);
    assert_eq!(h.m.snapshot(now, [1, 0, 0, 0]).politeness.failures, 1);
    assert_eq!(wake_at(&fx), Some(now.at + backoff));
}

/// The host's next life, from its saved `state`, at `clock`'s now.
fn revive(state: HostState, clock: &ManualClock) -> HostMachine {
    HostMachine::new(
        HOST.into(),
        Arc::new(settings()),
        Arc::new(Metrics::new()),
        state,
        clock.now(),
    )
}

#[test]
fn an_idle_host_passivates_for_good_and_a_restored_one_keeps_its_schedule() {
    let mut h = Harness::new(passivating(secs(30)));
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "User-agent: *\nCrawl-delay: 5\n");
    let (_, fx) = fetch_next(&mut h, ms(10), html());
    let state = match fx.iter().find(|e| matches!(e, Effect::Passivate { .. })) {
        Some(Effect::Passivate { state, due_ms, .. }) => {
            assert_eq!(*due_ms, None, "no work left");
            state.clone()
        }
        _ => panic!("expected a passivation in {fx:?}"),
    };
    // Revived with new work 1 s later, the host still owes 4 s, and knows
    // its robots.txt (no refetch).
    let clock = h.clock.clone();
    clock.advance(secs(1));
    let mut revived = revive(state, &clock);
    h.q.push("http://a.test/2", Priority::SEED);
    let fx = revived.wake(Arrivals::levels(u8::MAX), &h.q, clock.now());
    assert!(fetches(&fx).is_empty());
    let at = wake_at(&fx).expect("timer");
    let owed = at - clock.now().at;
    assert!(owed >= secs(4) && owed <= secs(4) + ms(2), "{owed:?}");
}

#[test]
fn a_long_wait_passivates_with_its_due_time_and_a_short_one_does_not() {
    let mut h = Harness::new(passivating(secs(30)));
    h.q.push("http://a.test/1", Priority::SEED);
    h.q.push("http://a.test/2", Priority::SEED);
    let fx = h.robots(200, "User-agent: *\nCrawl-delay: 10\n");
    assert_eq!(passivation(&fx), None, "10 s is under passivate_after");
    let mut h = Harness::new(passivating(secs(30)));
    h.q.push("http://a.test/1", Priority::SEED);
    h.q.push("http://a.test/2", Priority::SEED);
    let fx = h.robots(200, "User-agent: *\nCrawl-delay: 45\n");
    let due = passivation(&fx).expect("passivated").expect("with work");
    assert_eq!(due, h.now().ms_at(h.now().at + secs(45)));
    // Refused (new work came): the host goes on waiting on its timer.
    let now = h.now();
    let fx = h.m.passivation_refused(&h.q, now);
    assert!(fetches(&fx).is_empty());
}

#[test]
fn a_host_asked_for_its_slot_passivates_once_quiet_due_at_its_next_request() {
    let mut h = Harness::new(passivating(secs(30)));
    for i in 1..=3 {
        h.q.push(&format!("http://a.test/{i}"), Priority::SEED);
    }
    // A 10 s wait is under passivate_after: the host keeps its slot.
    let fx = h.robots(200, "User-agent: *\nCrawl-delay: 10\n");
    assert_eq!(passivation(&fx), None);
    let next = h.m.armed().expect("waiting for its next request");
    // Asked for its slot while waiting: it passivates at once, due when
    // its politeness allows (not sooner), with its work left queued.
    let now = h.now();
    let fx = h.m.yield_slot(now);
    assert_eq!(passivation(&fx), Some(Some(now.ms_at(next))));
    assert!(fetches(&fx).is_empty());
    // Refused (new work came meanwhile): it keeps its slot and goes on.
    let fx = h.m.passivation_refused(&h.q, now);
    assert_eq!(passivation(&fx), None);
    // Asked while a request is in flight: it answers once it is quiet.
    h.clock.advance(secs(10));
    let fx = h.timer();
    let (id, _) = only_fetch(&fx);
    let now = h.now();
    assert_eq!(passivation(&h.m.yield_slot(now)), None, "in flight");
    let fx = h.answer(id, ms(5), Ok(response(200, &[], "")));
    let fx = h.settle_tasks(fx);
    let due = passivation(&fx).expect("passivated").expect("with work");
    assert_eq!(Some(due), h.m.armed().map(|at| h.now().ms_at(at)));
    assert!(
        due >= h.now().unix_ms() + 9_000,
        "due after its delay, not sooner"
    );
}

#[test]
fn an_unreachable_robots_txt_passivates_the_host_and_its_retry_survives_revival() {
    let mut s = passivating(secs(30));
    s.policy.park_after_failures = 0;
    let mut h = Harness::new(s.clone());
    h.q.push("http://a.test/1", Priority::SEED);
    let (id, _) = only_fetch(&h.wake());
    let fx = h.answer(id, ms(5), Ok(response(500, &[], "")));
    let fx = h.settle_tasks(fx);
    // The retry is a minute away: the host hands its state back.
    let (state, due) = fx
        .iter()
        .find_map(|e| match e {
            Effect::Passivate { state, due_ms, .. } => Some((state.clone(), *due_ms)),
            _ => None,
        })
        .expect("passivated");
    assert_eq!(due, Some(h.now().ms_at(h.now().at + secs(60))));
    // Revived at its due time from the saved state: robots.txt is asked
    // for again first, and the failures go on counting (2 min next).
    h.clock.advance(secs(60));
    let mut revived = HostMachine::new(
        HOST.into(),
        Arc::new(s),
        Arc::new(Metrics::new()),
        state,
        h.now(),
    );
    let fx = revived.wake(Arrivals::levels(u8::MAX), &h.q, h.now());
    let (id, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/robots.txt");
    h.clock.advance(ms(5));
    let fx = revived.fetched(id, Err(FetchError::Timeout), &h.q, h.now());
    assert_eq!(revived.armed(), Some(h.now().at + secs(120)));
    assert!(passivation(&fx).is_some());
}

#[test]
fn robots_txt_is_persisted_only_once_its_sitemaps_are_admitted() {
    let mut s = settings();
    s.sitemaps = Some(SitemapSettings {
        limits: crate::sitemap::SitemapLimits {
            max_urls: 50_000,
            max_bytes: 50 << 20,
        },
        max_index_depth: 2,
        fresh_within: secs(86_400),
    });
    let mut h = Harness::new(s);
    h.q.push("http://a.test/1", Priority::SEED);
    let (id, _) = only_fetch(&h.wake());
    let fx = h.answer(
        id,
        ms(5),
        Ok(response(
            200,
            &[],
            "Sitemap: /s.xml\nUser-agent: *\nAllow: /\n",
        )),
    );
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::Save(_))),
        "nothing persisted before the sitemaps are queued"
    );
    let (discover, task) = runs(&fx)
        .into_iter()
        .find(|(_, t)| matches!(t, Task::Discover(_)))
        .expect("the sitemaps are offered");
    let Task::Discover(found) = &task else {
        unreachable!()
    };
    assert_eq!(found[0].url.as_str(), "http://a.test/s.xml");
    // A crash now would find no robots.txt in the saved state: it is
    // fetched again, and its sitemaps found again.
    assert!(h.m.state(h.now()).robots.is_empty());
    // The admission fails once (store down): still not persisted.
    let now = h.now();
    let fx = h.m.task_done(
        discover,
        task.clone(),
        Err(Failure::Store("down".into())),
        &h.q,
        now,
    );
    assert!(!fx.iter().any(|e| matches!(e, Effect::Save(_))));
    // It succeeds on its second run: now robots.txt is saved.
    h.clock.advance(secs(1));
    let fx = h.timer();
    let rerun = runs(&fx)
        .into_iter()
        .find(|(_, t)| matches!(t, Task::Discover(_)))
        .expect("run again");
    let now = h.now();
    let fx = h.m.task_done(rerun.0, rerun.1, Ok(()), &h.q, now);
    let saved = fx
        .iter()
        .find_map(|e| match e {
            Effect::Save(state) => Some(state.clone()),
            _ => None,
        })
        .expect("saved after admission");
    assert!(saved.robots.contains_key("http://a.test:80"));
}

#[test]
fn tries_are_stored_with_the_url_so_a_failing_url_is_given_up_on_time() {
    // A 45 s Crawl-delay: the host passivates after every request.
    let s = passivating(secs(30));
    let mut h = Harness::new(s.clone());
    h.q.push("http://a.test/1", Priority::SEED);
    let fx = h.robots(200, "User-agent: *\nCrawl-delay: 45\n");
    let mut state = match fx.iter().find(|e| matches!(e, Effect::Passivate { .. })) {
        Some(Effect::Passivate { state, .. }) => state.clone(),
        _ => panic!("passivated after robots.txt: {fx:?}"),
    };
    let mut failed = Vec::new();
    for _ in 0..3 {
        // Revived when due (persisted times round up a millisecond), from
        // the saved state alone.
        h.clock.advance(secs(46));
        let mut m = HostMachine::new(
            HOST.into(),
            Arc::new(s.clone()),
            Arc::new(Metrics::new()),
            state.clone(),
            h.now(),
        );
        let (id, url) = only_fetch(&m.wake(Arrivals::levels(u8::MAX), &h.q, h.now()));
        assert_eq!(url, "http://a.test/1");
        h.clock.advance(ms(5));
        let fx = m.fetched(id, Err(FetchError::Timeout), &h.q, h.now());
        failed.extend(completions(&fx));
        // The tries are stored in the URL's record, as the partition would.
        for (_, task) in runs(&fx) {
            if let Task::RecordTries(c) = task {
                h.q.records.borrow_mut().insert(c.fp(), c.record.clone());
            }
        }
        assert!(
            state.attempts.is_empty(),
            "not in the host's state any more"
        );
        if let Some(Effect::Passivate { state: s, .. }) =
            fx.iter().find(|e| matches!(e, Effect::Passivate { .. }))
        {
            state = s.clone();
        }
    }
    assert_eq!(failed, [UrlState::Failed], "given up at the third try");
}

// ------------------------------------------------------------- refreshes

/// The record of a URL fetched at `at_ms` whose copy is on record, with
/// validators.
fn fetched_before(at_ms: u64, etag: Option<&str>, last_modified: Option<&str>) -> UrlRecord {
    let mut record = UrlRecord::new(UrlState::Fetched(200), 0);
    record.interval_ms = 3_600_000;
    record.last = Some(crate::store::Visit {
        at_ms,
        status: 200,
        etag: etag.map(str::to_owned),
        last_modified: last_modified.map(str::to_owned),
        digest: Some([1; 32]),
        simhash: None,
        copy: Some(crate::store::StoredCopy {
            uri: "http://a.test/x".into(),
            date: "2026-11-30T00:00:00Z".into(),
            record_id: "<urn:uuid:x>".into(),
        }),
    });
    record
}

fn fetch_validators(fx: &[Effect]) -> Vec<(String, Validators)> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Fetch {
                url, validators, ..
            } => Some((url.to_string(), validators.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_due_refresh_is_asked_for_conditionally_and_a_later_one_waits_its_time() {
    let mut h = Harness::new(passivating(secs(30)));
    let now_ms = h.now().unix_ms();
    let date = "Tue, 15 Nov 1994 12:45:26 GMT";
    h.q.schedule(
        "http://a.test/due",
        now_ms,
        fetched_before(0, Some("\"v1\""), Some(date)),
    );
    let later = now_ms + 600_000;
    h.q.schedule(
        "http://a.test/later",
        later,
        fetched_before(0, Some("\"v9\""), None),
    );
    h.robots(200, "");
    let mut fx = h.poll();
    if fetches(&fx).is_empty() {
        h.clock.advance_to(h.m.armed().unwrap());
        fx = h.timer();
    }
    let sent = fetch_validators(&fx);
    assert_eq!(sent.len(), 1, "{fx:?}");
    assert_eq!(sent[0].0, "http://a.test/due");
    assert_eq!(sent[0].1.etag.as_deref(), Some("\"v1\""));
    assert_eq!(sent[0].1.last_modified.as_deref(), Some(date));
    let (id, _) = only_fetch(&fx);
    let fx = h.answer(id, ms(10), Ok(response(304, &[], "")));
    let processed: Vec<_> = runs(&fx)
        .into_iter()
        .filter_map(|(_, t)| match t {
            Task::Process(job) => Some(job),
            _ => None,
        })
        .collect();
    assert_eq!(processed.len(), 1);
    assert!(processed[0].entry.recrawl);
    assert!(
        processed[0].entry.previous.is_some(),
        "its record comes along"
    );
    let fx = h.settle_tasks(fx);
    // Nothing else is due for ten minutes: the host passivates until then.
    assert_eq!(passivation(&fx), Some(Some(later)), "{fx:?}");
}

#[test]
fn a_refresh_without_a_copy_on_record_is_asked_for_unconditionally() {
    let mut h = Harness::new(settings());
    let now_ms = h.now().unix_ms();
    let mut record = fetched_before(0, Some("\"v1\""), None);
    if let Some(last) = &mut record.last {
        last.copy = None; // e.g. a near-duplicate dedup chose not to store
    }
    h.q.schedule("http://a.test/1", now_ms, record);
    h.robots(200, "");
    h.clock.advance_to(h.m.armed().unwrap());
    let sent = fetch_validators(&h.timer());
    assert_eq!(sent.len(), 1);
    assert!(sent[0].1.is_empty(), "a 304 must confirm a stored copy");
}

#[test]
fn refreshes_and_new_urls_share_the_host_by_refresh_share() {
    let mut h = Harness::new(settings());
    let now_ms = h.now().unix_ms();
    for i in 0..6 {
        h.q.push(&format!("http://a.test/new{i}"), Priority::NORMAL);
        let url = format!("http://a.test/old{i}");
        h.q.schedule(&url, now_ms, fetched_before(0, None, None));
    }
    h.robots(200, "");
    let mut order = Vec::new();
    for _ in 0..8 {
        let mut fx = h.poll();
        if fetches(&fx).is_empty() {
            h.clock.advance_to(h.m.armed().unwrap());
            fx = h.timer();
        }
        let (id, url) = only_fetch(&fx);
        order.push(url.contains("old"));
        let fx = h.answer(id, ms(10), Ok(html()));
        h.finish_tasks(&fx);
    }
    // refresh_share 0.5: they take turns.
    assert_eq!(
        order,
        [false, true, false, true, false, true, false, true],
        "refresh = true"
    );
}

#[test]
fn a_url_robots_txt_newly_disallows_is_removed_and_a_new_one_is_not() {
    let mut h = Harness::new(settings());
    let now_ms = h.now().unix_ms();
    h.q.schedule(
        "http://a.test/private/1",
        now_ms,
        fetched_before(0, None, None),
    );
    h.q.push("http://a.test/private/2", Priority::NORMAL);
    let fx = h.robots(200, "User-agent: *\nDisallow: /private/");
    let finished: Vec<_> = runs(&fx)
        .into_iter()
        .filter_map(|(_, t)| match t {
            Task::Complete(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(finished.len(), 2, "{fx:?}");
    let fetched_before = finished.iter().find(|f| f.completion.recrawl).unwrap();
    assert_eq!(
        fetched_before.completion.record.state,
        UrlState::Gone(Removal::Disallowed)
    );
    let removed = fetched_before
        .removed
        .as_ref()
        .expect("a removal to report");
    assert_eq!(removed.reason, Removal::Disallowed);
    assert_eq!(removed.url.as_str(), "http://a.test/private/1");
    assert_eq!(removed.last_status, Some(200));
    let never = finished.iter().find(|f| !f.completion.recrawl).unwrap();
    assert_eq!(never.completion.record.state, UrlState::Disallowed);
    assert!(never.removed.is_none(), "never fetched: nothing to remove");
}

#[test]
fn a_refresh_scheduled_by_a_completion_keeps_the_host_due() {
    let mut h = Harness::new(passivating(secs(30)));
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    let mut fx = h.poll();
    if fetches(&fx).is_empty() {
        h.clock.advance_to(h.m.armed().unwrap());
        fx = h.timer();
    }
    let (id, _) = only_fetch(&fx);
    let fx = h.answer(id, ms(10), Ok(html()));
    // The runner settled the page: due again in an hour.
    let due = h.now().unix_ms() + 3_600_000;
    let mut out = Vec::new();
    for (id, task) in runs(&fx) {
        let mut task = task;
        if let Task::Process(job) = &mut task {
            h.q.remove(&job.entry.key);
            job.next_due_ms = Some(due);
            h.q.schedule("http://a.test/1", due, fetched_before(0, None, None));
        }
        let now = h.now();
        out.extend(h.m.task_done(id, task, Ok(()), &h.q, now));
    }
    assert_eq!(passivation(&out), Some(Some(due)), "{out:?}");
}

#[test]
fn a_slowdown_lowers_the_in_flight_limit_and_stretches_the_wait_at_once() {
    let mut two = settings();
    two.policy.max_in_flight = 2;
    let mut h = Harness::new(two);
    for i in 1..=4 {
        h.q.push(&format!("http://a.test/{i}"), Priority::SEED);
    }
    h.robots(200, "");
    h.clock.advance(secs(1));
    // Two slots: two requests at once.
    let fx = h.timer();
    let flying = fetches(&fx);
    assert_eq!(flying.len(), 2, "{flying:?}");
    // Slowed to one in flight and 5 s: the requests in flight finish, the
    // next starts 5 s after the last response, alone.
    h.m.set_slowdown(Some(Slowdown {
        min_delay_ms: Some(5_000),
        max_in_flight: Some(1),
    }));
    let fx = h.answer(flying[0].0, ms(10), Ok(html()));
    let fx = h.settle_tasks(fx);
    assert!(fetches(&fx).is_empty(), "a slot freed but the wait runs");
    let fx = h.answer(flying[1].0, ms(10), Ok(html()));
    let last = h.now().at;
    let fx = h.settle_tasks(fx);
    assert_eq!(wake_at(&fx), Some(last + secs(5)));
    h.clock.advance(secs(5));
    assert_eq!(fetches(&h.timer()).len(), 1, "one in flight now");
    let snapshot = h.m.snapshot(h.now(), [0; LEVELS]);
    assert_eq!(snapshot.politeness.max_in_flight, 1);
    assert_eq!(snapshot.stats.fetched, 2, "robots.txt is not a page");
    // Lifted: the configured limit again.
    h.m.set_slowdown(None);
    assert_eq!(
        h.m.snapshot(h.now(), [0; LEVELS]).politeness.max_in_flight,
        2
    );
}

#[test]
fn a_visit_is_stamped_by_the_machine_clock_when_the_request_was_sent() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    let mut fx = h.poll();
    if fetches(&fx).is_empty() {
        let at = h.m.armed().expect("a fetch or a timer");
        h.clock.advance_to(at);
        fx = h.timer();
    }
    let sent_ms = h.now().unix_ms();
    let (id, _) = only_fetch(&fx);
    // The response's own start is the epoch (a synthetic response): the
    // visit must not read it, nor the answer's time 3 s later.
    let fx = h.answer(id, secs(3), Ok(html()));
    let visited: Vec<u64> = runs(&fx)
        .into_iter()
        .filter_map(|(_, t)| match t {
            Task::Process(job) => Some(job.visited_ms),
            _ => None,
        })
        .collect();
    assert_eq!(visited, vec![sent_ms]);
    assert!(sent_ms > 0 && h.now().unix_ms() == sent_ms + 3000);
}

#[test]
fn robots_txt_is_read_through_its_coding_or_as_it_came() {
    use std::io::Write;
    let rules = "User-agent: *\nDisallow: /private\n";
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(rules.as_bytes()).unwrap();
    let mut encoded = FetchResponse::synthetic(200, &[("content-encoding", "gzip")], "");
    encoded.body = bytes::Bytes::from(gz.finish().unwrap());
    assert_eq!(robots_result(&encoded).body, rules.as_bytes());
    // Labelled gzip, sent plain: the file's rules still apply.
    let mislabelled = FetchResponse::synthetic(200, &[("content-encoding", "gzip")], rules);
    assert_eq!(robots_result(&mislabelled).body, rules.as_bytes());
    // Not 2xx: no body, whatever came.
    let missing = FetchResponse::synthetic(404, &[("content-encoding", "br")], "gone");
    let result = robots_result(&missing);
    assert!(result.body.is_empty());
    assert_eq!(result.status, Some(404));
}

// ---------------------------------------------------------------- the hold

/// The hold to write (if any) and the deadline of the one request in `fx`.
fn hold_of(fx: &[Effect]) -> (Option<Hold>, Instant) {
    let holds: Vec<(Option<Hold>, Instant)> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Fetch { hold, deadline, .. } => Some((*hold, *deadline)),
            _ => None,
        })
        .collect();
    assert_eq!(holds.len(), 1, "expected one fetch in {fx:?}");
    holds[0]
}

/// A host whose robots.txt was read, its page request just sent, the
/// hold it asked for written (as the host actor does before sending it).
fn page_in_flight(s: HostSettings) -> (Harness, TaskId, Hold, Instant) {
    let mut h = Harness::new(s);
    h.q.push("http://a.test/1", Priority::SEED);
    h.q.push("http://a.test/2", Priority::SEED);
    h.robots(200, "");
    h.clock.advance(secs(1));
    let fx = h.timer();
    let (id, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/1");
    let (hold, deadline) = hold_of(&fx);
    let hold = hold.expect("no claim on record yet: one to write");
    h.m.hold_written(hold);
    (h, id, hold, deadline)
}

#[test]
fn a_request_carries_its_deadline_and_its_hold_which_the_state_keeps_while_it_runs() {
    let (mut h, id, hold, deadline) = page_in_flight(settings());
    let sent = h.now();
    assert_eq!(deadline, sent.at + secs(30), "one request timeout");
    assert_eq!(
        hold,
        Hold {
            sent_ms: sent.unix_ms(),
            // A quarter of the timeout past the deadline.
            until_ms: sent.unix_ms() + 30_000 + 7_500
        }
    );
    assert_eq!(h.m.state(sent).hold, Some(hold), "saved while it runs");
    let fx = h.answer(id, ms(200), Ok(html()));
    h.settle_tasks(fx);
    assert_eq!(h.m.state(h.now()).hold, None, "answered: no claim left");
}

/// Answers request `id` with a page after 200 ms, runs its tasks, and
/// fires the timer `wait` later: the effects of that timer.
fn answer_then_wait(h: &mut Harness, id: TaskId, wait: Duration) -> Vec<Effect> {
    let fx = h.answer(id, ms(200), Ok(html()));
    h.settle_tasks(fx);
    h.clock.advance(wait);
    h.timer()
}

#[test]
fn a_written_hold_lets_the_requests_it_reaches_go_at_once_until_a_state_without_one_is_saved() {
    let (mut h, id, hold, _) = page_in_flight(settings());
    h.q.push("http://a.test/3", Priority::SEED);
    // /1 answered; /2 leaves a second later, within the hold on record:
    // nothing to write first.
    let fx = answer_then_wait(&mut h, id, secs(2));
    let (id, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/2");
    let (write, deadline) = hold_of(&fx);
    assert_eq!(write, None, "covered by {hold:?}");
    assert!(h.now().ms_at(deadline) <= hold.until_ms);
    // A state saved meanwhile keeps the claim on record whole.
    assert_eq!(
        h.m.state(h.now()).hold.map(|h| h.until_ms),
        Some(hold.until_ms)
    );
    // /3 leaves past the hold's reach (its deadline beyond the hold's
    // end): it writes a new one, reaching past its own deadline again.
    let fx = answer_then_wait(&mut h, id, secs(8));
    let (_, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/3");
    let (write, deadline) = hold_of(&fx);
    let write = write.expect("past the hold on record");
    assert_eq!(write.until_ms, h.now().ms_at(deadline) + 7_500);
}

#[test]
fn a_saved_state_without_a_claim_makes_the_next_request_write_one() {
    let mut h = Harness::new(settings());
    h.q.push("http://a.test/1", Priority::SEED);
    let fx = h.wake();
    let (id, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/robots.txt");
    let hold = hold_of(&fx).0.expect("the first request writes a hold");
    h.m.hold_written(hold);
    // robots.txt read: the host's state is saved with no request out, so
    // the claim on record is deleted with it.
    let fx = h.answer(id, ms(10), Ok(response(200, &[], "")));
    let fx = h.settle_tasks(fx);
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Save(state) if state.hold.is_none())),
        "{fx:?}"
    );
    h.clock.advance(secs(1));
    let fx = h.timer();
    let (_, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/1");
    assert!(hold_of(&fx).0.is_some(), "nothing on record: written again");
}

#[test]
fn a_timed_out_request_holds_its_host_until_its_deadline_then_owes_the_delay_of_its_whole_time() {
    let (mut h, id, _, deadline) = page_in_flight(settings());
    // The crawl stops waiting at 20 s (first byte); the server may work
    // until the deadline at 30 s. A request that took 30 s owes
    // min(10 × 30 s, max_delay 20 s) = 20 s, more than the backoff.
    let fx = h.answer(id, secs(20), Err(FetchError::Timeout));
    let fx = h.settle_tasks(fx);
    assert!(fetches(&fx).is_empty());
    assert_eq!(wake_at(&fx), Some(deadline + secs(20)));
    assert_eq!(h.metrics.requests_abandoned.get(), 1);
    // Nothing starts at the deadline itself, while the server may still
    // be finishing.
    h.clock.advance_to(deadline);
    assert!(fetches(&h.poll()).is_empty());
    h.clock.advance_to(deadline + secs(20));
    let (_, url) = only_fetch(&h.timer());
    assert_eq!(url, "http://a.test/1", "tried again");
}

#[test]
fn a_request_that_never_reached_the_server_holds_its_host_no_longer_than_its_backoff() {
    let (mut h, id, _, _) = page_in_flight(settings());
    let fx = h.answer(id, ms(5), Err(FetchError::Connect("refused".into())));
    let done = h.now().at;
    let wait = wake_at(&h.settle_tasks(fx)).expect("a timer") - done;
    assert!(
        wait >= secs(2) && wait <= ms(2_500),
        "the backoff: {wait:?}"
    );
    assert_eq!(h.metrics.requests_abandoned.get(), 0);
}

#[test]
fn a_lost_answer_of_a_request_that_left_holds_until_its_deadline_and_an_unsent_one_does_not() {
    let (mut h, id, _, deadline) = page_in_flight(settings());
    h.clock.advance(secs(3));
    let now = h.now();
    let fx = h.m.fetch_lost(id, true, &h.q, now);
    // Lost: no failure, the ordinary delay of a request that took 30 s.
    assert_eq!(wake_at(&fx), Some(deadline + secs(20)));
    let (mut h, id, _, _) = page_in_flight(settings());
    let now = h.now();
    let fx = h.m.fetch_lost(id, false, &h.q, now);
    assert_eq!(wake_at(&fx), Some(now.at + secs(1)), "only its last delay");
}

#[test]
fn repeated_timeouts_back_off_then_park_the_host_counted() {
    let mut s = passivating(secs(30 * 24 * 3600));
    s.retries.max_attempts = 100;
    s.request_timeout = secs(2);
    s.policy.max_delay = secs(1);
    let mut h = Harness::new(s);
    h.q.push("http://a.test/1", Priority::SEED);
    h.robots(200, "");
    let mut waits = Vec::new();
    for _ in 0..5 {
        let mut fx = h.poll();
        if fetches(&fx).is_empty() {
            h.clock.advance_to(h.m.armed().expect("a timer"));
            fx = h.timer();
        }
        let (id, deadline) = {
            let (id, _) = only_fetch(&fx);
            (id, hold_of(&fx).1)
        };
        let fx = h.answer(id, secs(1), Err(FetchError::Timeout));
        let fx = h.settle_tasks(fx);
        waits.push((wake_at(&fx).expect("a timer") - deadline).as_secs_f64());
    }
    // After each deadline: the backoff, 2, 4, 8, 16 s (with up to 25 %
    // jitter; the delay a 2 s request owes is capped at 1 s here), then
    // parked for an hour.
    for (wait, base) in waits.iter().zip([2.0, 4.0, 8.0, 16.0]) {
        assert!((base..=base * 1.25).contains(wait), "{waits:?}");
    }
    assert_eq!(waits[4], 3600.0);
    assert!(h.m.snapshot(h.now(), [1, 0, 0, 0]).politeness.parked);
    let parked = |cause: &str| h.metrics.hosts_parked.with_label_values(&[cause]).get();
    assert_eq!((parked("timeouts"), parked("errors")), (1, 0));
    assert_eq!(h.metrics.requests_abandoned.get(), 5);
}

#[test]
fn a_host_opened_with_a_hold_waits_for_its_deadline_and_the_delay_whatever_opened_it() {
    let (h, _, hold, deadline) = page_in_flight(settings());
    // The life that sent it ends (a kill -9, a drain that gave up, a
    // hand-back) 3 s into the request; the store keeps its last state.
    let state = h.m.state(h.now());
    assert_eq!(state.hold, Some(hold));
    let clock = h.clock.clone();
    clock.advance(secs(3));
    let mut revived = revive(state, &clock);
    let fx = revived.wake(Arrivals::levels(u8::MAX), &h.q, clock.now());
    assert!(fetches(&fx).is_empty(), "held: {fx:?}");
    let at = wake_at(&fx).expect("a timer");
    // Until the hold's end (a quarter of the timeout past the deadline),
    // then the delay after a 37.5 s request (max_delay: 20 s).
    let expected = deadline + ms(7_500) + secs(20);
    assert!(
        at >= expected && at <= expected + ms(2),
        "{at:?} vs {expected:?}"
    );
    clock.advance_to(at);
    let fx = revived.timer(&h.q, clock.now());
    let (_, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/1", "then the held host resumes");
}

// ------------------------------------------------------------ importance

/// Queues `url` with `cash` and wakes the host as its partition would
/// (the best rank of the level that got work); returns the effects.
fn arrive(h: &mut Harness, url: &str, cash: f32) -> Vec<Effect> {
    let rank = h.q.push_with(url, cash);
    let mut arrivals = Arrivals::default();
    arrivals.add(Priority::NORMAL.level(), rank);
    let now = h.now();
    h.m.wake(arrivals, &h.q, now)
}

/// Fetches pages one after another until `n` were fetched, answering
/// each at once; returns their URLs in fetch order. `between` runs after
/// each fetch, before the next (new work arriving).
fn crawl_in_order(
    h: &mut Harness,
    n: usize,
    mut between: impl FnMut(&mut Harness, usize),
) -> Vec<String> {
    let mut order = Vec::new();
    for i in 0..n {
        let mut fx = h.poll();
        if fetches(&fx).is_empty() {
            let at =
                h.m.armed()
                    .unwrap_or_else(|| panic!("a fetch or a timer after {order:?}: {fx:?}"));
            h.clock.advance_to(at);
            fx = h.timer();
        }
        let (id, url) = only_fetch(&fx);
        order.push(url);
        between(h, i);
        let fx = h.answer(id, ms(10), Ok(html()));
        h.finish_tasks(&fx);
    }
    order
}

#[test]
fn within_a_level_the_richest_url_goes_first_then_admission_order() {
    let mut h = Harness::new(settings());
    h.q.push_with("http://a.test/poor", 0.001);
    h.q.push_with("http://a.test/rich", 0.5);
    h.q.push_with("http://a.test/middle", 0.01);
    h.q.push_with("http://a.test/middle-later", 0.01);
    h.robots(404, "");
    let order = crawl_in_order(&mut h, 4, |_, _| {});
    assert_eq!(
        order,
        [
            "http://a.test/rich",
            "http://a.test/middle",
            "http://a.test/middle-later",
            "http://a.test/poor"
        ]
    );
}

#[test]
fn a_richer_url_arriving_later_goes_before_what_was_read_and_nothing_twice() {
    let mut h = Harness::new(settings());
    // More than one refill's worth, so the level was read past where the
    // newcomer belongs.
    for i in 0..(REFILL + 8) {
        h.q.push_with(&format!("http://a.test/old{i}"), 0.001);
    }
    h.robots(404, "");
    let order = crawl_in_order(&mut h, REFILL + 10, |h, i| {
        if i == 2 {
            // While old2 is on the wire, a rich page and a poorer one
            // arrive; the host is woken with the best rank of its level.
            h.q.push_with("http://a.test/poorest", 0.0001);
            let fx = arrive(h, "http://a.test/rich", 0.5);
            assert!(fetches(&fx).is_empty(), "one request in flight: {fx:?}");
        }
    });
    assert_eq!(order[3], "http://a.test/rich", "{order:?}");
    let mut expected: Vec<String> = (0..3).map(|i| format!("http://a.test/old{i}")).collect();
    expected.push("http://a.test/rich".into());
    expected.extend((3..REFILL + 8).map(|i| format!("http://a.test/old{i}")));
    expected.push("http://a.test/poorest".into());
    assert_eq!(order, expected, "each once, in rank order");
}

#[test]
fn a_poorer_arrival_does_not_make_the_host_read_its_level_again() {
    let mut h = Harness::new(settings());
    h.q.push_with("http://a.test/1", 0.5);
    h.q.push_with("http://a.test/2", 0.5);
    h.robots(404, "");
    let order = crawl_in_order(&mut h, 3, |h, i| {
        if i == 0 {
            arrive(h, "http://a.test/3", 0.01);
        }
    });
    assert_eq!(
        order,
        ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
    );
}

#[test]
fn a_level_read_again_reads_past_a_page_of_entries_still_being_processed() {
    let mut h = Harness::new(settings());
    let n = REFILL + 8;
    for i in 0..n {
        h.q.push_with(&format!("http://a.test/old{i}"), 0.001);
    }
    h.robots(404, "");
    // More than a refill's worth fetched, their processing still running.
    let mut running = Vec::new();
    for i in 0..REFILL + 2 {
        let mut fx = h.poll();
        if fetches(&fx).is_empty() {
            h.clock.advance_to(h.m.armed().expect("a timer"));
            fx = h.timer();
        }
        let (id, url) = only_fetch(&fx);
        assert_eq!(url, format!("http://a.test/old{i}"));
        running.extend(h.answer(id, ms(10), Ok(html())));
    }
    arrive(&mut h, "http://a.test/rich", 0.5);
    // The host itself asks to be called when its delay is over: one
    // timer, and the newcomer leaves.
    h.clock
        .advance_to(h.m.armed().expect("the host waits for its delay"));
    let fx = h.timer();
    let (id, url) = only_fetch(&fx);
    assert_eq!(url, "http://a.test/rich");
    let fx = h.answer(id, ms(10), Ok(html()));
    h.finish_tasks(&fx);
    let order = crawl_in_order(&mut h, 6, |_, _| {});
    let mut expected = vec![];
    expected.extend((REFILL + 2..n).map(|i| format!("http://a.test/old{i}")));
    assert_eq!(order, expected, "nothing twice, nothing stuck");
    h.finish_tasks(&running);
}

#[test]
fn two_richer_arrivals_before_the_next_read_are_both_fetched_first() {
    let mut h = Harness::new(settings());
    h.q.push_with("http://a.test/top", 0.9);
    h.q.push_with("http://a.test/mid", 0.8);
    for i in 0..3 {
        h.q.push_with(&format!("http://a.test/old{i}"), 0.001);
    }
    h.robots(404, "");
    let order = crawl_in_order(&mut h, 7, |h, i| {
        if i == 0 {
            // Two wakes while top is on the wire and mid waits chosen: the
            // level is not read between them, so the second comes while
            // its cursor is the first's rank.
            for (url, cash) in [("http://a.test/rich", 0.1), ("http://a.test/richer", 0.5)] {
                arrive(h, url, cash);
            }
        }
    });
    assert_eq!(
        order,
        [
            "http://a.test/top",
            "http://a.test/mid",
            "http://a.test/richer",
            "http://a.test/rich",
            "http://a.test/old0",
            "http://a.test/old1",
            "http://a.test/old2"
        ]
    );
}
