//! A link graph served as a web of hosts, and how good a crawl order is on
//! it: the measurement of issue #49 ("measured like the papers do").
//!
//! The papers on crawl ordering (Cho, Garcia-Molina and Page 1998; Najork
//! and Wiener 2001; Baeza-Yates et al. 2005) crawl a known graph and report
//! how much of the graph's total PageRank the first pages fetched hold,
//! beside breadth-first order and the best possible order. This module has
//! the pieces: a [`LinkGraph`] (read from a plain text file, or made by
//! [`generate`] with a realistic host structure), which the test web serves
//! (`trawl testweb --graph FILE`); [`pagerank`]; the baseline orders
//! ([`bfs_order`], [`polite_order`], [`inlink_order`], [`best_order`]); and
//! [`share`], the figure the papers plot.
//!
//! # File format
//!
//! UTF-8 text, one item per line; blank lines and lines starting with `#`
//! are ignored. A *page* is written `HOST/PATH` (`h3.test/p/7.html`), or
//! `HOST` alone for its homepage `/`; an `http://` or `https://` prefix is
//! allowed and dropped, so a list of real URLs reads as it is. A host name
//! has a dot, and only ASCII letters, digits, `-` and `.`.
//!
//! ```text
//! # trawl link graph
//! seed h0.test            # a seed: where a crawl starts
//! h0.test/p/1.html        # a page alone: declares it
//! h0.test h0.test/p/1.html  # two pages: a link from the first to the second
//! ```
//!
//! Pages are numbered in the order they first appear; [`LinkGraph::write`]
//! lists every page alone first, so a written graph reads back with the same
//! numbers. A graph needs at least one seed.

use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::frontier::importance::CROSS_DOMAIN_WEIGHT;

/// Why a graph file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GraphError {
    /// A line is not one of the forms the format has.
    #[error("line {line}: {reason}: {text:?}")]
    Line {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: &'static str,
        /// The line as written.
        text: String,
    },
    /// The graph names no seed, so a crawl of it could not start.
    #[error("no seed: a graph names at least one `seed PAGE` line")]
    NoSeeds,
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// A directed graph of pages grouped by host, with the seeds a crawl
/// starts from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkGraph {
    /// Host names, by host number.
    hosts: Vec<String>,
    /// Host number by name, to serve a request by its Host header.
    host_index: HashMap<String, u32>,
    /// The host of each page.
    page_host: Vec<u32>,
    /// The path of each page (starts with `/`).
    page_path: Vec<String>,
    /// Page number by (host, path), to serve a request and read a fetch
    /// log back.
    page_index: HashMap<(u32, String), u32>,
    /// Each page's links, distinct, in the order written.
    out: Vec<Vec<u32>>,
    /// Pages a crawl starts from.
    seeds: Vec<u32>,
}

impl LinkGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// The page `path` of `host`, added if new; returns its number.
    pub fn add_page(&mut self, host: &str, path: &str) -> u32 {
        let h = match self.host_index.get(host) {
            Some(&h) => h,
            None => {
                let h = self.hosts.len() as u32;
                self.hosts.push(host.to_owned());
                self.host_index.insert(host.to_owned(), h);
                h
            }
        };
        let key = (h, path.to_owned());
        if let Some(&p) = self.page_index.get(&key) {
            return p;
        }
        let p = self.page_host.len() as u32;
        self.page_host.push(h);
        self.page_path.push(path.to_owned());
        self.page_index.insert(key, p);
        self.out.push(Vec::new());
        p
    }

    /// Adds a link from `from` to `to` (once: a repeated link, as a second
    /// `<a href>` to the same page, adds nothing to a crawl or to PageRank).
    pub fn add_link(&mut self, from: u32, to: u32) {
        let out = &mut self.out[from as usize];
        if !out.contains(&to) {
            out.push(to);
        }
    }

    /// Makes `page` a seed.
    pub fn add_seed(&mut self, page: u32) {
        if !self.seeds.contains(&page) {
            self.seeds.push(page);
        }
    }

    /// Number of pages.
    pub fn pages(&self) -> usize {
        self.page_host.len()
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.hosts.len()
    }

    /// Number of links.
    pub fn links_count(&self) -> usize {
        self.out.iter().map(Vec::len).sum()
    }

    /// The name of host `h`.
    pub fn host_name(&self, h: u32) -> &str {
        &self.hosts[h as usize]
    }

    /// The number of the host named `name`, if the graph has it.
    pub fn host_of_name(&self, name: &str) -> Option<u32> {
        self.host_index.get(name).copied()
    }

    /// The host of `page`.
    pub fn host_of(&self, page: u32) -> u32 {
        self.page_host[page as usize]
    }

    /// The path of `page`.
    pub fn path_of(&self, page: u32) -> &str {
        &self.page_path[page as usize]
    }

    /// The page at `path` of host `host`, if the graph has it.
    pub fn page(&self, host: u32, path: &str) -> Option<u32> {
        self.page_index.get(&(host, path.to_owned())).copied()
    }

    /// The links of `page`.
    pub fn links(&self, page: u32) -> &[u32] {
        &self.out[page as usize]
    }

    /// The seeds.
    pub fn seeds(&self) -> &[u32] {
        &self.seeds
    }

    /// Pages per host, by host number.
    pub fn host_sizes(&self) -> Vec<usize> {
        let mut sizes = vec![0; self.hosts.len()];
        for &h in &self.page_host {
            sizes[h as usize] += 1;
        }
        sizes
    }

    /// Links to each page.
    pub fn in_degrees(&self) -> Vec<u32> {
        let mut degrees = vec![0; self.pages()];
        for out in &self.out {
            for &to in out {
                degrees[to as usize] += 1;
            }
        }
        degrees
    }

    /// The share of links that stay on their page's host.
    pub fn within_host_share(&self) -> f64 {
        let (mut within, mut all) = (0usize, 0usize);
        for (from, out) in self.out.iter().enumerate() {
            let host = self.page_host[from];
            within += out.iter().filter(|&&to| self.host_of(to) == host).count();
            all += out.len();
        }
        within as f64 / all.max(1) as f64
    }

    /// The URL of `page` on a test web listening on `port`.
    pub fn url(&self, page: u32, port: u16) -> String {
        let host = self.host_name(self.host_of(page));
        format!("http://{host}:{port}{}", self.path_of(page))
    }

    /// The seeds' URLs on a test web listening on `port`.
    pub fn seed_urls(&self, port: u16) -> Vec<String> {
        self.seeds.iter().map(|&p| self.url(p, port)).collect()
    }

    /// `page` as HTML, its links absolute to `scheme://HOST:port` (a crawl
    /// of the test web stays on the listener it started on).
    pub fn render(&self, page: u32, scheme: &str, port: u16) -> String {
        let host = self.host_name(self.host_of(page));
        let path = self.path_of(page);
        let mut html = String::with_capacity(256 + 64 * self.links(page).len());
        let title = escape(&format!("{host}{path}"));
        let _ = write!(
            html,
            "<!doctype html><html><head><title>{title}</title></head><body>\
             <h1>{title}</h1><p>Page {page} of the link graph, on host {host}.</p><ul>"
        );
        for &to in self.links(page) {
            let target = format!(
                "{scheme}://{}:{port}{}",
                self.host_name(self.host_of(to)),
                self.path_of(to)
            );
            let target = escape(&target);
            let _ = write!(html, "<li><a href=\"{target}\">{target}</a></li>");
        }
        html.push_str("</ul></body></html>\n");
        html
    }

    /// Reads a graph in the [file format](self#file-format).
    pub fn parse(text: &str) -> Result<Self, GraphError> {
        let mut graph = LinkGraph::new();
        for (i, raw) in text.lines().enumerate() {
            let fail = |reason| GraphError::Line {
                line: i + 1,
                reason,
                text: raw.to_owned(),
            };
            let line = raw.split('#').next().unwrap_or("").trim();
            let words: Vec<&str> = line.split_whitespace().collect();
            match words[..] {
                [] => {}
                ["seed", page] => {
                    let (host, path) = split_page(page).ok_or_else(|| fail("bad page"))?;
                    let p = graph.add_page(host, path);
                    graph.add_seed(p);
                }
                [page] => {
                    let (host, path) = split_page(page).ok_or_else(|| fail("bad page"))?;
                    graph.add_page(host, path);
                }
                [from, to] => {
                    let (fh, fp) = split_page(from).ok_or_else(|| fail("bad source page"))?;
                    let (th, tp) = split_page(to).ok_or_else(|| fail("bad target page"))?;
                    let from = graph.add_page(fh, fp);
                    let to = graph.add_page(th, tp);
                    graph.add_link(from, to);
                }
                _ => return Err(fail("expected PAGE, PAGE PAGE or seed PAGE")),
            }
        }
        if graph.seeds.is_empty() {
            return Err(GraphError::NoSeeds);
        }
        Ok(graph)
    }

    /// Reads the graph file at `path`.
    pub fn read(path: &Path) -> Result<Self, GraphError> {
        let text = std::fs::read_to_string(path).map_err(|source| GraphError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text)
    }

    /// Writes the graph in the [file format](self#file-format): seeds,
    /// every page alone (so numbers survive a round trip), then every link.
    pub fn write(&self, mut out: impl std::io::Write) -> std::io::Result<()> {
        writeln!(
            out,
            "# trawl link graph: {} hosts, {} pages, {} links",
            self.hosts(),
            self.pages(),
            self.links_count()
        )?;
        // A seed line would number its page first: the pages go first.
        for p in 0..self.pages() as u32 {
            writeln!(out, "{}", self.page_name(p))?;
        }
        for &s in &self.seeds {
            writeln!(out, "seed {}", self.page_name(s))?;
        }
        for (from, links) in self.out.iter().enumerate() {
            let name = self.page_name(from as u32);
            for &to in links {
                writeln!(out, "{name} {}", self.page_name(to))?;
            }
        }
        out.flush()
    }

    /// `HOST/PATH`, or `HOST` for the homepage, as the file writes a page.
    fn page_name(&self, page: u32) -> String {
        let host = self.host_name(self.host_of(page));
        match self.path_of(page) {
            "/" => host.to_owned(),
            path => format!("{host}{path}"),
        }
    }
}

/// A page as the file writes it, as (host, path); `None` if the host is
/// not a plausible DNS name.
fn split_page(word: &str) -> Option<(&str, &str)> {
    let word = word
        .strip_prefix("http://")
        .or_else(|| word.strip_prefix("https://"))
        .unwrap_or(word);
    let (host, path) = match word.find('/') {
        Some(i) => word.split_at(i),
        None => (word, "/"),
    };
    let valid = host.contains('.')
        && !host.starts_with('.')
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
    valid.then_some((host, path))
}

/// `text` safe inside an HTML attribute or element.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The shape of a generated graph.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphSpec {
    /// Pages in all.
    pub pages: u32,
    /// Hosts, named `h0.test`, `h1.test`, ... (at most `pages`).
    pub hosts: u32,
    /// Seed of every random choice.
    pub seed: u64,
    /// Share of a page's links beyond its navigation link that stay on
    /// its host (the web's is 80-90 %).
    pub within_host: f64,
    /// Mean number of links a page has beyond its navigation link.
    pub mean_links: u32,
    /// Hosts whose homepage is a seed.
    pub seeds: u32,
}

impl GraphSpec {
    /// `pages` pages over a host per ten pages, 85 % of links within a
    /// host, eight links a page, three seeds.
    pub fn new(pages: u32, seed: u64) -> Self {
        GraphSpec {
            pages,
            hosts: (pages / 10).max(1),
            seed,
            within_host: 0.85,
            mean_links: 8,
            seeds: 3,
        }
    }
}

/// The tail exponent of host sizes (Pareto): host sizes on the web are
/// heavy-tailed, a few hosts holding a large share of the pages.
const HOST_SIZE_ALPHA: f64 = 1.2;

/// Probability that a link's target is chosen uniformly rather than by
/// copying an earlier link's target (the copy model of Kumar et al.,
/// preferential attachment: in-degrees follow a power law whose exponent
/// is 1 + 1 / (1 - this), 2.4 here, near the web's 2.1).
const UNIFORM_TARGET: f64 = 0.1;

/// Probability that a link to another host goes to its homepage.
const CROSS_TO_HOMEPAGE: f64 = 0.5;

/// Probability that a link within a host goes to its homepage (the "home"
/// link of a site's navigation).
const WITHIN_TO_HOMEPAGE: f64 = 0.1;

/// Generates a graph of `spec`: a pure function of it.
///
/// Host sizes are Pareto-distributed; every host has a homepage `/` and
/// pages `/p/N.html`. Each page but a homepage is linked from an earlier
/// page of its host (the site's navigation tree, so every page is reachable
/// from its homepage), and each homepage of a non-seed host from a page of
/// an earlier host (so every page is reachable from the seeds). Every
/// page links to its host's homepage and menu ([`menu_size`]). Beyond
/// that, each page has about `mean_links` links, `within_host` of them to
/// its own host; targets are chosen by the copy model (preferential
/// attachment), within a host among its pages, across hosts among hosts
/// and then, half the time, the homepage. In-degrees follow a power law.
pub fn generate(spec: GraphSpec) -> LinkGraph {
    assert!(spec.pages >= 1, "a graph has at least one page");
    let hosts = spec.hosts.clamp(1, spec.pages);
    let mut rng = SplitMix64(spec.seed);
    let sizes = host_sizes(&mut rng, hosts, spec.pages);
    let mut graph = LinkGraph::new();
    let mut first = Vec::with_capacity(hosts as usize);
    for (h, &size) in sizes.iter().enumerate() {
        let name = format!("h{h}.test");
        first.push(graph.add_page(&name, "/"));
        for i in 1..size {
            graph.add_page(&name, &format!("/p/{i}.html"));
        }
    }
    let page_of = |h: u32, i: u32| first[h as usize] + i;
    // Earlier targets: copying one is choosing by in-degree.
    let mut host_targets: Vec<Vec<u32>> = vec![Vec::new(); hosts as usize];
    let mut cross_hosts: Vec<u32> = Vec::new();
    for h in 0..hosts {
        if h < spec.seeds.max(1) {
            graph.add_seed(page_of(h, 0));
        } else {
            let from_host = rng.below(u64::from(h)) as u32;
            let from = page_of(
                from_host,
                rng.below(u64::from(sizes[from_host as usize])) as u32,
            );
            graph.add_link(from, page_of(h, 0));
            cross_hosts.push(h);
        }
        for i in 1..sizes[h as usize] {
            let parent = rng.below(u64::from(i)) as u32;
            graph.add_link(page_of(h, parent), page_of(h, i));
            host_targets[h as usize].push(i);
        }
    }
    let mean = u64::from(spec.mean_links);
    for h in 0..hosts {
        let size = sizes[h as usize];
        let menu = menu_size(size);
        for i in 0..size {
            let from = page_of(h, i);
            // The site's template: home and the menu on every page.
            for j in (0..=menu).filter(|&j| j != i) {
                graph.add_link(from, page_of(h, j));
            }
            let links = mean / 2 + rng.below(mean + 1);
            for _ in 0..links {
                let (th, ti) = if rng.unit() < spec.within_host {
                    (
                        h,
                        within_target(&mut rng, &mut host_targets[h as usize], size),
                    )
                } else {
                    let th = pick(&mut rng, &mut cross_hosts, hosts);
                    let ti = if rng.unit() < CROSS_TO_HOMEPAGE {
                        0
                    } else {
                        let size = sizes[th as usize];
                        within_target(&mut rng, &mut host_targets[th as usize], size)
                    };
                    (th, ti)
                };
                if (th, ti) != (h, i) {
                    graph.add_link(from, page_of(th, ti));
                }
            }
        }
    }
    graph
}

/// How many pages besides the homepage a host of `size` pages links to
/// from every page (its menu): log2 of its size, so a large site's
/// section pages collect in-links from all its pages, as templates make
/// them do on the web (the main source of its heavy-tailed in-degrees).
fn menu_size(size: u32) -> u32 {
    (size.max(1).ilog2()).min(size - 1)
}

/// A page of a host of `size` pages for a link to point to: its homepage
/// now and then, else by the copy model over `targets`.
fn within_target(rng: &mut SplitMix64, targets: &mut Vec<u32>, size: u32) -> u32 {
    if rng.unit() < WITHIN_TO_HOMEPAGE {
        return 0;
    }
    pick(rng, targets, size)
}

/// One of `0..n`: uniformly with probability [`UNIFORM_TARGET`] or when
/// nothing was chosen yet, else a copy of an earlier choice; remembered.
fn pick(rng: &mut SplitMix64, earlier: &mut Vec<u32>, n: u32) -> u32 {
    let chosen = if earlier.is_empty() || rng.unit() < UNIFORM_TARGET {
        rng.below(u64::from(n)) as u32
    } else {
        earlier[rng.below(earlier.len() as u64) as usize]
    };
    earlier.push(chosen);
    chosen
}

/// `hosts` sizes summing to `pages`, each at least 1, in proportion to
/// Pareto weights.
fn host_sizes(rng: &mut SplitMix64, hosts: u32, pages: u32) -> Vec<u32> {
    let weights: Vec<f64> = (0..hosts)
        .map(|_| (1.0 - rng.unit()).powf(-1.0 / HOST_SIZE_ALPHA))
        .collect();
    let total: f64 = weights.iter().sum();
    let spare = f64::from(pages - hosts);
    let mut sizes: Vec<u32> = weights
        .iter()
        .map(|w| 1 + (spare * w / total).floor() as u32)
        .collect();
    // What flooring left over goes to hosts in turn.
    let mut left = pages - sizes.iter().sum::<u32>();
    let (mut h, n) = (0, sizes.len());
    while left > 0 {
        sizes[h % n] += 1;
        left -= 1;
        h += 1;
    }
    sizes
}

/// A small, fast, seedable generator (SplitMix64): the generator's output
/// must not change with a dependency's version.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `0..n` (`n` > 0).
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// The damping factor of PageRank, as in the original paper.
pub const DAMPING: f64 = 0.85;

/// PageRank of every page, summing to 1: power iteration with damping
/// [`DAMPING`], the rank of pages without links spread over all pages,
/// until the ranks move less than 1e-10 (L1) or 200 rounds.
pub fn pagerank(graph: &LinkGraph) -> Vec<f64> {
    let n = graph.pages();
    if n == 0 {
        return Vec::new();
    }
    let uniform = 1.0 / n as f64;
    let mut rank = vec![uniform; n];
    let mut next = vec![0.0; n];
    for _ in 0..200 {
        let dangling: f64 = (0..n)
            .filter(|&p| graph.out[p].is_empty())
            .map(|p| rank[p])
            .sum();
        let base = (1.0 - DAMPING) * uniform + DAMPING * dangling * uniform;
        next.fill(base);
        for (from, out) in graph.out.iter().enumerate() {
            if out.is_empty() {
                continue;
            }
            let part = DAMPING * rank[from] / out.len() as f64;
            for &to in out {
                next[to as usize] += part;
            }
        }
        let moved: f64 = rank.iter().zip(&next).map(|(a, b)| (a - b).abs()).sum();
        std::mem::swap(&mut rank, &mut next);
        if moved < 1e-10 {
            break;
        }
    }
    rank
}

/// Pages reachable from the seeds, breadth-first from them all at once
/// (the seeds first, then the pages they link to, in link order...): the
/// plain, global breadth-first order of the papers, without politeness.
pub fn bfs_order(graph: &LinkGraph) -> Vec<u32> {
    let mut seen = vec![false; graph.pages()];
    let mut queue: VecDeque<u32> = VecDeque::new();
    for &s in graph.seeds() {
        if !std::mem::replace(&mut seen[s as usize], true) {
            queue.push_back(s);
        }
    }
    let mut order = Vec::new();
    while let Some(p) = queue.pop_front() {
        order.push(p);
        for &to in graph.links(p) {
            if !std::mem::replace(&mut seen[to as usize], true) {
                queue.push_back(to);
            }
        }
    }
    order
}

/// How a host picks its next page in [`polite_order`].
#[derive(Debug, Clone, Copy)]
pub enum HostPick<'a> {
    /// The page it learnt of first (what trawl does without ordering).
    Fifo,
    /// The known page of highest rank (an oracle: what an importance
    /// ordering aims at under politeness).
    ByRank(&'a [f64]),
    /// The known page holding the most OPIC cash, as trawl's importance
    /// ordering estimates it online (`frontier/importance.rs`): a seed
    /// holds 1, a fetched page shares its cash among its links, a link to
    /// another host weighing [`CROSS_DOMAIN_WEIGHT`]; a queued page gains
    /// the share of every later link from another host too (trawl credits
    /// those only while the host is dormant, which every host of a round
    /// is not; so this is the estimate's ceiling, not trawl's order).
    Opic,
}

/// The fetch order of a polite crawl simulated in rounds: each round,
/// every host with a queued page fetches one (in the order the hosts were
/// discovered), and a page's links join their hosts' queues when it is
/// fetched. A host starts the round after the one it was discovered in (its
/// robots.txt comes first). This is breadth-first as politeness allows it:
/// per-host queues served round-robin, each picking by `pick`.
pub fn polite_order(graph: &LinkGraph, pick: HostPick<'_>) -> Vec<u32> {
    polite_order_capped(graph, pick, usize::MAX)
}

/// Like [`polite_order`], with at most `per_round` fetches a round: a
/// crawl bound by its fetch capacity rather than by politeness, as a
/// crawl of more hosts than it has connections for is. Which hosts fetch
/// is chosen by `pick` too: under [`HostPick::Fifo`] the next ones
/// round-robin, under [`HostPick::ByRank`] those whose best known page
/// ranks highest.
pub fn polite_order_capped(graph: &LinkGraph, pick: HostPick<'_>, per_round: usize) -> Vec<u32> {
    let mut crawl = PoliteCrawl::new(graph, pick);
    for &s in graph.seeds() {
        crawl.seed(s);
    }
    let mut order = Vec::new();
    let mut cursor = 0;
    loop {
        // Hosts discovered during this round start in the next.
        let round = match pick {
            HostPick::Fifo => {
                let (round, next) = round_robin(&crawl.active, &crawl.queues, cursor, per_round);
                cursor = next;
                round
            }
            HostPick::ByRank(_) | HostPick::Opic => {
                best_heads(&crawl.active, &crawl.queues, per_round)
            }
        };
        if round.is_empty() {
            return order;
        }
        for host in round {
            let page = crawl.queues[host as usize].pop().expect("a host with work");
            order.push(page);
            crawl.fetch(page);
        }
        crawl.settle();
    }
}

/// What a simulated polite crawl knows: the pages it has seen and each
/// host's queue.
struct PoliteCrawl<'a> {
    graph: &'a LinkGraph,
    pick: HostPick<'a>,
    /// Pages queued or fetched, so a page is queued once.
    seen: Vec<bool>,
    /// Queued pages, by host.
    queues: Vec<HostQueue>,
    /// Hosts known, in the order they were discovered.
    active: Vec<u32>,
    /// Whether a host is in `active`.
    discovered: Vec<bool>,
    /// Pages fetched: a page credited after it was queued is queued again
    /// at its new key, and the copies left behind are dropped once it is
    /// fetched ([`PoliteCrawl::settle`]).
    fetched: Vec<bool>,
    /// OPIC cash of every page ([`HostPick::Opic`]).
    cash: Vec<f64>,
}

impl<'a> PoliteCrawl<'a> {
    fn new(graph: &'a LinkGraph, pick: HostPick<'a>) -> Self {
        PoliteCrawl {
            graph,
            pick,
            seen: vec![false; graph.pages()],
            queues: (0..graph.hosts()).map(|_| HostQueue::default()).collect(),
            active: Vec::new(),
            discovered: vec![false; graph.hosts()],
            fetched: vec![false; graph.pages()],
            cash: vec![0.0; graph.pages()],
        }
    }

    /// A seed: known, with a seed's cash.
    fn seed(&mut self, page: u32) {
        self.cash[page as usize] += 1.0;
        self.learn(page);
    }

    /// `page` is fetched: its links are learnt, and under
    /// [`HostPick::Opic`] its cash is shared among them.
    fn fetch(&mut self, page: u32) {
        self.fetched[page as usize] = true;
        let graph = self.graph;
        let links = graph.links(page);
        let host = graph.host_of(page);
        let weight = |to: u32| {
            if graph.host_of(to) == host {
                1.0
            } else {
                f64::from(CROSS_DOMAIN_WEIGHT)
            }
        };
        let total: f64 = links.iter().map(|&to| weight(to)).sum();
        let cash = std::mem::take(&mut self.cash[page as usize]);
        for &to in links {
            let share = cash * weight(to) / total;
            let known = self.seen[to as usize];
            let credit = matches!(self.pick, HostPick::Opic)
                && known
                && !self.fetched[to as usize]
                && graph.host_of(to) != host;
            if !known {
                self.cash[to as usize] += share;
            } else if credit {
                self.cash[to as usize] += share;
                let key = self.cash[to as usize].to_bits();
                self.queues[graph.host_of(to) as usize].push(key, to);
            }
            self.learn(to);
        }
    }

    /// Drops the stale copies (pages fetched) from the heads of the
    /// queues, so each head is a page to fetch.
    fn settle(&mut self) {
        for &host in &self.active {
            self.queues[host as usize].settle(&self.fetched);
        }
    }

    /// Queues `page` on its host if it was not seen yet.
    fn learn(&mut self, page: u32) {
        if std::mem::replace(&mut self.seen[page as usize], true) {
            return;
        }
        let host = self.graph.host_of(page);
        if !std::mem::replace(&mut self.discovered[host as usize], true) {
            self.active.push(host);
        }
        let key = match self.pick {
            HostPick::Fifo => 0,
            HostPick::ByRank(rank) => rank[page as usize].to_bits(),
            HostPick::Opic => self.cash[page as usize].to_bits(),
        };
        self.queues[host as usize].push(key, page);
    }
}

/// Up to `n` of the `active` hosts with queued pages, round-robin from
/// `cursor`; and where the next round starts.
fn round_robin(active: &[u32], queues: &[HostQueue], cursor: usize, n: usize) -> (Vec<u32>, usize) {
    let mut round = Vec::new();
    let mut next = cursor;
    for k in 0..active.len() {
        if round.len() == n {
            break;
        }
        let i = (cursor + k) % active.len();
        if !queues[active[i] as usize].is_empty() {
            round.push(active[i]);
            next = i + 1;
        }
    }
    // Every host with work was served: the next round starts afresh.
    if round.len() < n {
        next = 0;
    }
    (round, next)
}

/// Up to `n` of the `active` hosts with queued pages, those whose best
/// queued page ranks highest first.
fn best_heads(active: &[u32], queues: &[HostQueue], n: usize) -> Vec<u32> {
    let mut ready: Vec<(u64, u32)> = active
        .iter()
        .filter_map(|&h| Some((queues[h as usize].head_key()?, h)))
        .collect();
    if n < ready.len() {
        ready.select_nth_unstable_by(n, |a, b| b.cmp(a));
        ready.truncate(n);
    }
    ready.sort_unstable_by(|a, b| b.cmp(a));
    ready.into_iter().map(|(_, h)| h).collect()
}

/// A host's queue in [`polite_order`]: highest key first, then first
/// learnt (so equal keys make it a FIFO).
#[derive(Default)]
struct HostQueue {
    heap: BinaryHeap<(u64, std::cmp::Reverse<u64>, u32)>,
    /// Pages pushed so far: the tie-break.
    pushed: u64,
}

impl HostQueue {
    fn push(&mut self, key: u64, page: u32) {
        self.heap.push((key, std::cmp::Reverse(self.pushed), page));
        self.pushed += 1;
    }

    fn pop(&mut self) -> Option<u32> {
        self.heap.pop().map(|(_, _, page)| page)
    }

    /// Pops the fetched pages off the head.
    fn settle(&mut self, fetched: &[bool]) {
        while let Some(&(_, _, page)) = self.heap.peek() {
            if !fetched[page as usize] {
                break;
            }
            self.heap.pop();
        }
    }

    fn head_key(&self) -> Option<u64> {
        self.heap.peek().map(|(key, _, _)| *key)
    }

    fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

/// The reachable pages by their number of in-links, most first (ties by
/// page number): Cho et al.'s backlink order, with the true counts.
pub fn inlink_order(graph: &LinkGraph) -> Vec<u32> {
    let degrees = graph.in_degrees();
    let mut order = bfs_order(graph);
    order.sort_by_key(|&p| (std::cmp::Reverse(degrees[p as usize]), p));
    order
}

/// The reachable pages by `rank`, highest first: the best possible order,
/// whose first N pages are the N of highest rank.
pub fn best_order(graph: &LinkGraph, rank: &[f64]) -> Vec<u32> {
    let mut order = bfs_order(graph);
    order.sort_by(|&a, &b| {
        rank[b as usize]
            .total_cmp(&rank[a as usize])
            .then(a.cmp(&b))
    });
    order
}

/// The share of the total `rank` (over every page of the graph) held by
/// the first `percent` % of `reachable` pages in `order` (a fetch order:
/// repeats count once). The count is rounded up, at least one page.
pub fn share(order: &[u32], rank: &[f64], reachable: usize, percent: f64) -> f64 {
    let take = ((percent / 100.0 * reachable as f64).ceil() as usize).max(1);
    let total: f64 = rank.iter().sum();
    let mut seen = std::collections::HashSet::new();
    let held: f64 = order
        .iter()
        .filter(|&&p| seen.insert(p))
        .take(take)
        .map(|&p| rank[p as usize])
        .sum();
    held / total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hub every other page links to, linking back to one of them; one
    /// page links nowhere (dangling).
    fn star() -> LinkGraph {
        let mut g = LinkGraph::new();
        let hub = g.add_page("a.test", "/");
        let leaves: Vec<u32> = (1..5)
            .map(|i| g.add_page("a.test", &format!("/{i}")))
            .collect();
        for &leaf in &leaves[..3] {
            g.add_link(leaf, hub);
        }
        g.add_link(hub, leaves[0]);
        g.add_seed(hub);
        g
    }

    #[test]
    fn pagerank_sums_to_one_and_ranks_the_hub_first() {
        let g = star();
        let rank = pagerank(&g);
        let sum: f64 = rank.iter().sum();
        assert!((sum - 1.0).abs() < 1e-9, "{sum}");
        let best = best_order(&g, &rank);
        assert_eq!(best[0], 0, "{rank:?}");
        // The page the hub links to comes second: it gets the hub's rank.
        assert_eq!(best[1], 1, "{rank:?}");
        // Leaves 2 and 3 link to the hub and are linked by nothing: equal.
        assert!((rank[2] - rank[3]).abs() < 1e-12);
        // Damping: nothing gets less than the teleport share.
        assert!(rank.iter().all(|&r| r >= (1.0 - DAMPING) / 5.0 - 1e-12));
    }

    #[test]
    fn pagerank_of_a_cycle_is_uniform() {
        let mut g = LinkGraph::new();
        let pages: Vec<u32> = (0..4)
            .map(|i| g.add_page("c.test", &format!("/{i}")))
            .collect();
        for i in 0..4 {
            g.add_link(pages[i], pages[(i + 1) % 4]);
        }
        g.add_seed(pages[0]);
        for r in pagerank(&g) {
            assert!((r - 0.25).abs() < 1e-9, "{r}");
        }
    }

    #[test]
    fn the_best_order_holds_at_least_the_share_of_any_other() {
        let g = generate(GraphSpec::new(2000, 7));
        let rank = pagerank(&g);
        let reachable = bfs_order(&g).len();
        let best = best_order(&g, &rank);
        let mut shuffled = bfs_order(&g);
        let mut rng = SplitMix64(3);
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let others = [
            bfs_order(&g),
            inlink_order(&g),
            polite_order(&g, HostPick::Fifo),
            polite_order(&g, HostPick::ByRank(&rank)),
            polite_order_capped(&g, HostPick::Fifo, 20),
            polite_order_capped(&g, HostPick::ByRank(&rank), 20),
            polite_order(&g, HostPick::Opic),
            polite_order_capped(&g, HostPick::Opic, 20),
            shuffled,
        ];
        for p in [1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0] {
            let top = share(&best, &rank, reachable, p);
            for order in &others {
                let s = share(order, &rank, reachable, p);
                assert!(s <= top + 1e-12, "p={p}: {s} > best {top}");
            }
        }
        assert!((share(&best, &rank, reachable, 100.0) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn share_counts_a_repeated_page_once_and_takes_at_least_one() {
        let rank = [0.5, 0.3, 0.2];
        assert!((share(&[0, 0, 1], &rank, 3, 60.0) - 0.8).abs() < 1e-12);
        assert!((share(&[2, 1], &rank, 3, 0.1) - 0.2).abs() < 1e-12);
    }

    #[test]
    fn every_polite_order_fetches_every_reachable_page_once() {
        let g = generate(GraphSpec::new(1500, 2));
        let rank = pagerank(&g);
        let mut reachable = bfs_order(&g);
        reachable.sort_unstable();
        for pick in [HostPick::Fifo, HostPick::ByRank(&rank), HostPick::Opic] {
            for cap in [1, 7, usize::MAX] {
                let mut order = polite_order_capped(&g, pick, cap);
                order.sort_unstable();
                assert_eq!(order, reachable);
            }
        }
    }

    /// Seed a.test/ linking to a.test/1, a.test/2 and b.test/: the graph
    /// and those four pages.
    fn two_hosts() -> (LinkGraph, [u32; 4]) {
        let mut g = LinkGraph::new();
        let a = g.add_page("a.test", "/");
        let a1 = g.add_page("a.test", "/1");
        let a2 = g.add_page("a.test", "/2");
        let b = g.add_page("b.test", "/");
        for to in [a1, a2, b] {
            g.add_link(a, to);
        }
        g.add_seed(a);
        (g, [a, a1, a2, b])
    }

    #[test]
    fn a_polite_crawl_fetches_a_host_once_a_round_and_starts_it_a_round_late() {
        let (g, [a, a1, a2, b]) = two_hosts();
        assert_eq!(polite_order(&g, HostPick::Fifo), [a, a1, b, a2]);
        // The oracle takes a.test/2 first when it ranks higher.
        let rank = [0.4, 0.1, 0.3, 0.2];
        assert_eq!(polite_order(&g, HostPick::ByRank(&rank)), [a, a2, b, a1]);
        // One fetch a round: the oracle serves the host whose best page
        // ranks highest, round-robin the next host in turn.
        assert_eq!(
            polite_order_capped(&g, HostPick::ByRank(&rank), 1),
            [a, a2, b, a1]
        );
        assert_eq!(polite_order_capped(&g, HostPick::Fifo, 1), [a, b, a1, a2]);
    }

    #[test]
    fn the_opic_estimate_moves_a_queued_page_up_by_links_from_other_hosts() {
        // Seed a.test/ links to a.test/1, a.test/2 and b.test/, which
        // links to a.test/2: once b.test/ is fetched, a.test/2 holds more
        // than a.test/1 and is fetched first, though learnt later.
        let (mut g, [a, a1, a2, b]) = two_hosts();
        g.add_link(b, a2);
        // a's cash: 1/6 to each of its own pages, 4/6 to b.test/ (another
        // host weighs 4). Without the credit a.test/1 and a.test/2 tie and
        // the first learnt goes first; b.test/ (the richest head) is
        // fetched first in round 2, and its link lifts a.test/2 over
        // a.test/1 before a.test takes its turn, capped or not.
        assert_eq!(polite_order(&g, HostPick::Fifo), [a, a1, b, a2]);
        assert_eq!(polite_order(&g, HostPick::Opic), [a, b, a2, a1]);
        assert_eq!(polite_order_capped(&g, HostPick::Opic, 1), [a, b, a2, a1]);
    }

    #[test]
    fn a_written_graph_reads_back_the_same() {
        let g = generate(GraphSpec::new(500, 11));
        let mut text = Vec::new();
        g.write(&mut text).unwrap();
        let back = LinkGraph::parse(std::str::from_utf8(&text).unwrap()).unwrap();
        assert_eq!(back, g);
    }

    #[test]
    fn parsing_reads_urls_comments_and_names_the_bad_line() {
        let text = "# a graph\n\nseed http://a.test/ # start\na.test https://b.test/x/y?z\nb.test/x/y?z a.test\n";
        let g = LinkGraph::parse(text).unwrap();
        assert_eq!(g.pages(), 2);
        assert_eq!(g.hosts(), 2);
        assert_eq!(g.seeds(), &[0]);
        assert_eq!(g.links(0), &[1]);
        assert_eq!(g.links(1), &[0]);
        assert_eq!(g.path_of(1), "/x/y?z");
        let err = LinkGraph::parse("seed a.test\na.test b.test c.test\n").unwrap_err();
        assert!(matches!(err, GraphError::Line { line: 2, .. }), "{err}");
        let err = LinkGraph::parse("seed a.test\nlocalhost/x a.test\n").unwrap_err();
        assert!(
            matches!(
                err,
                GraphError::Line {
                    line: 2,
                    reason: "bad source page",
                    ..
                }
            ),
            "{err}"
        );
        let err = LinkGraph::parse("a.test b.test\n").unwrap_err();
        assert!(matches!(err, GraphError::NoSeeds), "{err}");
    }

    #[test]
    fn generation_is_a_function_of_the_spec() {
        let a = generate(GraphSpec::new(1000, 5));
        assert_eq!(a, generate(GraphSpec::new(1000, 5)));
        assert_ne!(a, generate(GraphSpec::new(1000, 6)));
        assert_eq!(a.pages(), 1000);
        assert_eq!(a.hosts(), 100);
    }

    #[test]
    fn generated_graphs_have_the_web_s_shape() {
        let g = generate(GraphSpec::new(5000, 1));
        // Every page reachable from the seeds.
        assert_eq!(bfs_order(&g).len(), g.pages());
        // Most links stay within their host.
        let within = g.within_host_share();
        assert!((0.8..0.95).contains(&within), "within-host share {within}");
        // Heavy-tailed host sizes: the largest host is many times the
        // median one.
        let mut sizes = g.host_sizes();
        sizes.sort_unstable();
        let (median, largest) = (sizes[sizes.len() / 2], sizes[sizes.len() - 1]);
        assert!(largest >= 10 * median, "largest {largest}, median {median}");
        // Power-law in-degree: a heavy tail (the top 1 % of pages hold a
        // large share of the links) and a maximum far above the mean.
        let mut degrees = g.in_degrees();
        degrees.sort_unstable_by(|a, b| b.cmp(a));
        let total: u32 = degrees.iter().sum();
        let top: u32 = degrees[..degrees.len() / 100].iter().sum();
        let mean = f64::from(total) / degrees.len() as f64;
        assert!(
            f64::from(top) > 0.15 * f64::from(total),
            "top 1 % hold {top} of {total}"
        );
        assert!(
            f64::from(degrees[0]) > 20.0 * mean,
            "max {} mean {mean}",
            degrees[0]
        );
        // Homepages are linked from other hosts.
        let homepage_in = (0..g.hosts() as u32)
            .map(|h| g.page(h, "/").unwrap())
            .filter(|&p| {
                (0..g.pages() as u32)
                    .any(|from| g.host_of(from) != g.host_of(p) && g.links(from).contains(&p))
            })
            .count();
        assert!(
            homepage_in + 3 >= g.hosts(),
            "{homepage_in} of {}",
            g.hosts()
        );
    }
}
