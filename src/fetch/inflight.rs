//! How many requests a node keeps in flight: `[fetch] concurrency`.
//!
//! Each host gets one request at a time, so the node's throughput on a
//! slow web is the number of requests in flight divided by the time each
//! takes (Little's law: in flight = rate × latency). A constant is right
//! for one web only: 256 slots saturate a loopback web and cap a web that
//! answers in 100 ms at 2,560 requests a second, whatever the node could
//! process. Under `concurrency = "auto"` (the default) the limit follows
//! what the web and the node do:
//!
//! ```text
//! limit = clamp(HEADROOM × capacity × latency, floor, ceiling)
//! capacity = cores / CPU seconds per page     (the rate the node can process)
//! latency  = mean time a request holds its slot (request start to last byte)
//! ceiling  = max_inflight_bytes / (REQUEST_COST + mean body bytes)
//! ```
//!
//! Both means are exponentially weighted over the windows the fetcher
//! measures (a quarter of a second each), so the limit follows a web that
//! slows down or speeds up within seconds. The mean only sees requests
//! that ended, so while requests wait for a slot the limit also grows by a
//! quarter a window, whatever the estimate, and comes back down to it by a
//! tenth a window once none wait ([`InFlightSizer::observe`]). Capacity is measured from the
//! process's CPU time per page fetched: the whole node's cost of a page
//! (fetching, parsing, archiving, the store), which is what bounds how
//! fast it can go when the network does not. `HEADROOM` keeps the limit
//! above the mean: latencies vary, and an idle slot costs nothing (a
//! semaphore permit); what a request in flight does cost is bounded by the
//! ceiling, a memory budget: [`REQUEST_COST`] for the connection and its
//! buffers (measured by `benches/inflight.rs`: 26–36 KiB a waiting
//! request) plus the mean body, which arrives while the request holds its
//! slot.
//!
//! What the limit does not decide: which requests start. Politeness does
//! (one request per host, its delay), and the pipeline bound
//! ([`super::pipeline`]) holds requests while fetched pages wait to be
//! processed. A slow host's request holds one slot for longer, which the
//! measured latency (and so the limit) accounts for: slow hosts raise the
//! limit rather than take the places of fast ones.
//!
//! This module decides; the fetcher pool (`actors/fetcher.rs`) measures
//! the windows, applies the limit to its slots with [`resize`], and
//! exports it (`trawl_fetch_concurrency_limit`).

use tokio::sync::Semaphore;

/// The limit is kept this many times the estimate of what is needed.
pub const HEADROOM: f64 = 2.0;
/// Memory counted for a request in flight besides its body: the
/// connection, its buffers, the request's future and timers.
pub const REQUEST_COST: usize = 40 * 1024;
/// The lowest limit: a loopback web's latency is so small that the
/// estimate would be a handful of slots, while the node's own queues
/// (the fetcher's thread, the hosts' turns) still need some in flight to
/// stay busy. 256 saturated the side-by-side bench's loopback web.
pub const FLOOR: usize = 256;
/// The limit before anything is measured. A crawl starts with every
/// active host asking for its robots.txt at once; a host whose request
/// waits for a slot there waits a whole round trip of the web, and that
/// wait is on its critical path to the end of the crawl. At [`FLOOR`], on
/// the side-by-side bench's 100 ms web (500 hosts), half the hosts sent
/// their first request 100 ms after the others and the crawl ended ~4 %
/// later (`docs/benchmarks.md`). 1,024 is about what that web settles at
/// (Little's law with the measured latency). It is a guess, dropped at the
/// first window that measures a latency: the limit is then the estimate
/// (or grows, if requests waited), so a fast web is back at its floor a
/// quarter second in. The pipeline's places do not follow the guess (the
/// fetcher pool starts them at [`FLOOR`]): robots.txt requests take no
/// place, and on a fast web pages fetched by a thousand slots would pile
/// up in memory before the first window ends.
pub const START: usize = 1024;
/// While requests wait for slots, the limit grows by this factor a window
/// (see [`InFlightSizer::observe`]).
const GROWTH: f64 = 1.25;
/// Without waiters, a limit above the estimate comes down by this factor a
/// window (slowly: an idle slot costs nothing, a limit that swings does).
const DECAY: f64 = 0.9;
/// The weight of a new window in the means.
const ALPHA: f64 = 0.3;
/// A window with fewer pages says little about the CPU a page costs (the
/// start, with its store opening and seeding, would look expensive).
const MIN_PAGES: u64 = 16;
/// Before any page was measured: 1 ms of CPU a page (a cautious guess,
/// about three times what the loopback bench measures).
const PRIOR_CPU_PER_PAGE: f64 = 0.001;
/// Before any body was measured.
const PRIOR_BODY_BYTES: f64 = 16.0 * 1024.0;

/// What the fetcher measured over one window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Window {
    /// Requests that ended (with a response or an error).
    pub requests: u64,
    /// The seconds those requests held their slots, summed.
    pub request_seconds: f64,
    /// Body bytes those requests received.
    pub body_bytes: u64,
    /// Pages fetched (responses to page requests).
    pub pages: u64,
    /// CPU seconds the process spent (user and system).
    pub cpu_seconds: f64,
    /// Requests waiting for a slot at the window's end.
    pub waiting: u64,
}

/// The bounds of the automatic limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoBounds {
    /// CPU cores the node may use.
    pub cores: usize,
    /// `[fetch] max_inflight_bytes`: the memory budget of requests in
    /// flight.
    pub memory_budget: usize,
    /// The most connections the process may open for requests (a share
    /// of its file descriptor limit).
    pub descriptors: usize,
}

impl AutoBounds {
    /// The bounds of this process: its cores, half its file descriptor
    /// limit (the other half for the store's files, the WARC files, the
    /// admin and cluster sockets), and `memory_budget`.
    pub fn of_this_process(memory_budget: usize) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        AutoBounds {
            cores,
            memory_budget,
            descriptors: (descriptor_limit() / 2).max(FLOOR),
        }
    }

    /// The highest the limit can ever be: the budget with empty bodies.
    /// The HTTP client's connection pool is sized to it.
    pub fn max_ceiling(&self) -> usize {
        (self.memory_budget / REQUEST_COST)
            .min(self.descriptors)
            .max(FLOOR)
    }
}

/// The limit under `concurrency = "auto"`, from the windows measured.
#[derive(Debug, Clone)]
pub struct InFlightSizer {
    bounds: AutoBounds,
    latency: Option<f64>,
    cpu_per_page: f64,
    body_bytes: f64,
    limit: usize,
    /// The limit is still [`START`]'s guess: no latency measured and no
    /// request waited yet.
    guessing: bool,
}

impl InFlightSizer {
    /// A sizer starting at [`START`] (within the memory budget).
    pub fn new(bounds: AutoBounds) -> Self {
        InFlightSizer {
            bounds,
            latency: None,
            cpu_per_page: PRIOR_CPU_PER_PAGE,
            body_bytes: PRIOR_BODY_BYTES,
            limit: START.min(bounds.max_ceiling()),
            guessing: true,
        }
    }

    /// The limit now.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The fetch slots the pipeline's places start with
    /// ([`super::pipeline`]): the floor, not [`START`]'s guess, so a fast
    /// web piles up no pages before the first window measures it.
    pub fn pipeline_start(&self) -> usize {
        self.limit.min(FLOOR)
    }

    /// Takes in one window and returns the new limit.
    ///
    /// Little's law needs the latency of requests that ended; requests
    /// slower than a window (a web answering in seconds, a server that
    /// holds its answer until a timeout) end late or never, so the mean
    /// lags behind them. Requests waiting for a slot say the limit is too
    /// low whatever the mean says: while they wait, the limit grows by
    /// [`GROWTH`] a window (up to the ceiling); without waiters it comes
    /// down to the estimate by [`DECAY`] a window.
    pub fn observe(&mut self, window: &Window) -> usize {
        let latency = window.request_seconds.max(0.0) / window.requests as f64;
        if window.requests > 0 && latency.is_finite() {
            self.latency = Some(match self.latency {
                None => latency,
                Some(mean) => ewma(mean, latency),
            });
            let body = window.body_bytes as f64 / window.requests as f64;
            self.body_bytes = ewma(self.body_bytes, body);
        }
        let cost = window.cpu_seconds / window.pages as f64;
        if window.pages >= MIN_PAGES && cost.is_finite() && cost > 0.0 {
            self.cpu_per_page = ewma(self.cpu_per_page, cost);
        }
        let estimate = self.target();
        let ceiling = self.ceiling();
        if self.guessing && self.latency.is_some() {
            // The start's guess, measured at last: the estimate stands in.
            self.limit = estimate.min(ceiling);
        }
        // Measured, or moved by requests that waited: no guess any more.
        self.guessing &= self.latency.is_none() && window.waiting == 0;
        self.limit = if window.waiting > 0 {
            estimate.max(scale(self.limit, GROWTH)).min(ceiling)
        } else if self.guessing {
            self.limit
        } else {
            estimate.max(scale(self.limit, DECAY)).min(ceiling)
        };
        self.limit
    }

    /// Pages a second the node could process with its CPU alone.
    pub fn capacity(&self) -> f64 {
        self.bounds.cores.max(1) as f64 / self.cpu_per_page.max(1e-6)
    }

    /// The most requests in flight the memory budget allows, with the
    /// bodies seen so far.
    pub fn ceiling(&self) -> usize {
        let per_request = REQUEST_COST as f64 + self.body_bytes.max(0.0);
        ((self.bounds.memory_budget as f64 / per_request) as usize)
            .min(self.bounds.descriptors)
            .max(FLOOR.min(self.bounds.max_ceiling()))
    }

    /// Little's law's estimate, within the floor and the ceiling.
    fn target(&self) -> usize {
        let Some(latency) = self.latency else {
            return FLOOR.min(self.ceiling());
        };
        let needed = (HEADROOM * self.capacity() * latency).ceil();
        let needed = if needed.is_finite() {
            needed.min(usize::MAX as f64) as usize
        } else {
            usize::MAX
        };
        needed.clamp(FLOOR.min(self.ceiling()), self.ceiling())
    }
}

/// The most requests `fetch` lets run at once: the fixed number, or the
/// highest the automatic limit can reach (the HTTP client's connection
/// pool is sized to it once; the slots do the limiting).
pub fn max_in_flight(fetch: &crate::config::FetchConfig) -> usize {
    match fetch.concurrency {
        crate::config::Concurrency::Fixed(n) => n,
        crate::config::Concurrency::Auto => {
            AutoBounds::of_this_process(fetch.max_inflight_bytes).max_ceiling()
        }
    }
}

/// The CPU seconds this process has spent, user and system.
pub fn cpu_seconds() -> f64 {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole `rusage` into the pointer it is
    // given, which points at one; RUSAGE_SELF cannot fail.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The process's soft limit of open files (1,024 when it cannot be read).
fn descriptor_limit() -> usize {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` into the pointer it is given.
    let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    if read != 0 || limit.rlim_cur == libc::RLIM_INFINITY {
        return if read != 0 { 1024 } else { usize::MAX / 2 };
    }
    usize::try_from(limit.rlim_cur).unwrap_or(usize::MAX / 2)
}

fn scale(limit: usize, factor: f64) -> usize {
    (limit as f64 * factor).ceil() as usize
}

fn ewma(mean: f64, sample: f64) -> f64 {
    mean + ALPHA * (sample - mean)
}

/// Moves `semaphore`'s permits from `current` towards `target` and returns
/// how many exist now. Growing is immediate; shrinking removes only
/// permits not held (a request in flight keeps its slot), so the count
/// reaches the target as requests end and `resize` is called again.
pub fn resize(semaphore: &Semaphore, current: usize, target: usize) -> usize {
    use std::cmp::Ordering;
    match target.cmp(&current) {
        Ordering::Greater => {
            semaphore.add_permits(target - current);
            target
        }
        Ordering::Less => current - semaphore.forget_permits(current - target),
        Ordering::Equal => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> AutoBounds {
        AutoBounds {
            cores: 2,
            memory_budget: 256 << 20,
            descriptors: 10_000,
        }
    }

    fn window(latency: f64, cpu_per_page: f64, pages: u64) -> Window {
        Window {
            requests: pages,
            request_seconds: latency * pages as f64,
            body_bytes: 15_000 * pages,
            pages,
            cpu_seconds: cpu_per_page * pages as f64,
            waiting: 0,
        }
    }

    fn settle(sizer: &mut InFlightSizer, w: Window) -> usize {
        for _ in 0..40 {
            sizer.observe(&w);
        }
        sizer.limit()
    }

    #[test]
    fn the_limit_is_littles_law_with_headroom() {
        let mut sizer = InFlightSizer::new(bounds());
        assert_eq!(sizer.limit(), START, "nothing measured yet");
        // 0.4 ms a page on 2 cores: 5,000 pages/s; 100 ms each: 500 in
        // flight, twice that as the limit.
        let limit = settle(&mut sizer, window(0.1, 0.0004, 500));
        assert!((990..=1010).contains(&limit), "{limit}");
        // Twice the latency, twice the limit.
        let slower = settle(&mut sizer, window(0.2, 0.0004, 500));
        assert!((1980..=2020).contains(&slower), "{slower}");
        // A costlier page: the node can take fewer, so fewer in flight.
        let costly = settle(&mut sizer, window(0.2, 0.0016, 500));
        assert!((490..=510).contains(&costly), "{costly}");
    }

    #[test]
    fn waiting_requests_grow_the_limit_when_none_end() {
        let mut sizer = InFlightSizer::new(bounds());
        // Servers that hold every request: nothing ends, requests wait.
        let stuck = Window {
            waiting: 3000,
            ..Window::default()
        };
        let mut limits = vec![sizer.limit()];
        for _ in 0..6 {
            limits.push(sizer.observe(&stuck));
        }
        assert!(limits.windows(2).all(|w| w[1] > w[0]), "{limits:?}");
        assert!(*limits.last().unwrap() > 3000, "{limits:?}");
        let ceiling = sizer.ceiling();
        assert_eq!(settle(&mut sizer, stuck), ceiling, "never past the budget");
        // The waiters gone and the web fast: back down to the floor,
        // a tenth a window.
        let fast = window(0.001, 0.0003, 1000);
        let high = sizer.limit();
        let next = sizer.observe(&fast);
        assert!(next < high && next * 10 >= high * 8, "{high} -> {next}");
        assert_eq!(settle(&mut sizer, fast), FLOOR);
    }

    #[test]
    fn the_limit_starts_at_start_within_the_budget() {
        assert_eq!(InFlightSizer::new(bounds()).limit(), START);
        // The pipeline's places do not start from the guess.
        assert_eq!(InFlightSizer::new(bounds()).pipeline_start(), FLOOR);
        let few = AutoBounds {
            descriptors: 700,
            ..bounds()
        };
        assert_eq!(InFlightSizer::new(few).limit(), 700);
    }

    #[test]
    fn the_start_guess_gives_way_to_the_first_measure() {
        // A fast web: at its estimate (the floor) after one window.
        let mut fast = InFlightSizer::new(bounds());
        assert_eq!(fast.observe(&window(0.001, 0.0003, 2000)), FLOOR);
        // Requests waiting then: grown from the estimate, not the guess.
        let mut waited = window(0.001, 0.0003, 2000);
        waited.waiting = 10;
        let mut busy = InFlightSizer::new(bounds());
        assert_eq!(busy.observe(&waited), scale(FLOOR, GROWTH));
        // Windows in which nothing ended keep the guess until one does.
        let mut slow = InFlightSizer::new(bounds());
        assert_eq!(slow.observe(&Window::default()), START);
        let limit = slow.observe(&window(0.1, 0.0004, 500));
        assert!(limit < START);
        assert_eq!(limit, slow.target(), "the estimate, not a decay");
    }

    #[test]
    fn a_fast_web_keeps_the_floor() {
        let mut sizer = InFlightSizer::new(bounds());
        assert_eq!(settle(&mut sizer, window(0.001, 0.0003, 2000)), FLOOR);
    }

    #[test]
    fn a_slow_web_stops_at_the_memory_budget() {
        let mut sizer = InFlightSizer::new(bounds());
        let limit = settle(&mut sizer, window(3.0, 0.0003, 100));
        let per_request = REQUEST_COST + 15_000;
        let budget = (256 << 20) / per_request;
        assert!(
            limit.abs_diff(budget) <= budget / 100,
            "{limit} vs {budget}"
        );
        assert!(limit * per_request <= (256 << 20) + per_request * 10);
        // And at the descriptors left for connections.
        let mut few = InFlightSizer::new(AutoBounds {
            descriptors: 700,
            ..bounds()
        });
        assert_eq!(settle(&mut few, window(3.0, 0.0003, 100)), 700);
    }

    #[test]
    fn larger_bodies_lower_the_ceiling() {
        let mut sizer = InFlightSizer::new(bounds());
        let small = settle(&mut sizer, window(5.0, 0.0003, 100));
        let mut big = window(5.0, 0.0003, 100);
        big.body_bytes = 500_000 * 100;
        let large = settle(&mut sizer, big);
        assert!(large * 5 < small, "{large} vs {small}");
        assert!(large >= FLOOR);
    }

    #[test]
    fn windows_with_few_pages_leave_the_cpu_estimate_alone() {
        let mut sizer = InFlightSizer::new(bounds());
        let before = sizer.capacity();
        // The start: seconds of CPU opening stores, two pages.
        sizer.observe(&Window {
            pages: 2,
            cpu_seconds: 3.0,
            ..Window::default()
        });
        assert_eq!(sizer.capacity(), before);
        // An idle window (no request ended) keeps the limit.
        let limit = settle(&mut sizer, window(0.1, 0.0004, 500));
        assert_eq!(sizer.observe(&Window::default()), limit);
    }

    #[test]
    fn odd_measures_do_not_break_the_limit() {
        let mut sizer = InFlightSizer::new(bounds());
        let w = Window {
            requests: 1,
            request_seconds: f64::INFINITY,
            body_bytes: 0,
            pages: 100,
            cpu_seconds: 1e-12,
            waiting: 0,
        };
        let limit = sizer.observe(&w);
        assert!(limit >= FLOOR && limit <= bounds().max_ceiling());
        let w = Window {
            request_seconds: -1.0,
            ..w
        };
        assert!(sizer.observe(&w) >= FLOOR);
    }

    #[test]
    fn this_process_is_measured() {
        let bounds = AutoBounds::of_this_process(256 << 20);
        assert!(bounds.cores >= 1 && bounds.descriptors >= FLOOR);
        let before = cpu_seconds();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_add(std::hint::black_box(i));
        }
        std::hint::black_box(x);
        assert!(cpu_seconds() > before, "spent CPU is counted");
    }

    #[test]
    fn resize_grows_at_once_and_shrinks_as_permits_come_back() {
        let semaphore = Semaphore::new(4);
        let held = semaphore.try_acquire_many(3).unwrap();
        let mut current = resize(&semaphore, 4, 6);
        assert_eq!((current, semaphore.available_permits()), (6, 3));
        // Down to 2: only the 3 free permits can go now.
        current = resize(&semaphore, current, 2);
        assert_eq!((current, semaphore.available_permits()), (3, 0));
        drop(held);
        current = resize(&semaphore, current, 2);
        assert_eq!((current, semaphore.available_permits()), (2, 2));
        assert_eq!(resize(&semaphore, current, 2), 2);
    }
}
