//! The synthetic web's content: a pure function of (seed, hosts, pages).
//!
//! Hosts are `siteNNNN.test`, each its own registrable domain (as most
//! hosts of the real web are), so they spread over partitions. Every host
//! has `pages_per_host` pages: the root `/`, ordinary pages `/p/N.html`,
//! and private pages `/private/N.html` and `/private/open-N.html` which
//! robots.txt disallows and re-allows. Links are mostly relative within the
//! host (in several written forms: relative, root-relative, absolute, with
//! fragments), some go to other hosts, a few to pages that do not exist
//! (404). Each host has a [`HostProfile`]: its robots.txt (groups,
//! wildcards, Crawl-delay, oversized, 403/404/500, flaky, redirected),
//! sitemaps listing pages nothing links to (`/orphan/N.html`), throttling
//! with Retry-After, slowness.
//!
//! [`SyntheticWeb::ground_truth`] walks the link graph from the seeds with
//! the robots rules applied, computed from how the hosts were generated
//! (not with the crawler's matcher), giving the exact set a correct crawl
//! fetches.

use std::collections::{BTreeSet, VecDeque};
use std::fmt::Write;

use xxhash_rust::xxh3::xxh3_64_with_seed;

pub use super::profile::{HostProfile, RobotsEffect, RobotsMode, SitemapMode, Throttle, ORPHANS};

/// Size and seed of a synthetic web.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebSpec {
    /// Number of hosts.
    pub hosts: u32,
    /// Pages per host (including the root).
    pub pages_per_host: u32,
    /// Seed of every random choice.
    pub seed: u64,
    /// Give hosts their [`HostProfile`] behaviours; off, every host is a
    /// plain one (a `*` robots.txt, no sitemaps, fast, never throttling),
    /// which is what the throughput benchmark measures.
    pub behaviours: bool,
}

/// What a page path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    /// `/` or `/p/N.html`.
    Normal,
    /// `/private/N.html`, disallowed by robots.txt.
    Private,
    /// `/private/open-N.html`, re-allowed by an Allow rule.
    PrivateOpen,
}

/// A resolved request path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// A page of the host (orphans included).
    Page(u32),
    /// A linked page that does not exist (404).
    Missing(u32),
    /// robots.txt (hop 0) or a hop of its redirect chain.
    Robots(u32),
    /// A sitemap file.
    Sitemap(SitemapFile),
}

/// The sitemap files a host may serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SitemapFile {
    /// `/sitemap.xml`: a urlset.
    Main,
    /// `/sitemap_index.xml`: an index.
    Index,
    /// `/sitemaps/a.xml.gz`: a gzip urlset.
    GzipPart,
    /// `/sitemaps/b.txt`: a text sitemap.
    TextPart,
}

/// What kind of request a path is, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// robots.txt or a redirect hop of it.
    Robots,
    /// A sitemap file.
    Sitemap,
    /// Anything else.
    Page,
}

/// Classifies a request path of the synthetic web.
pub fn request_kind(path: &str) -> RequestKind {
    if path == "/robots.txt" || path.starts_with("/robots-") {
        RequestKind::Robots
    } else if path == "/sitemap.xml"
        || path == "/sitemap_index.xml"
        || path.starts_with("/sitemaps/")
    {
        RequestKind::Sitemap
    } else {
        RequestKind::Page
    }
}

/// Where a link points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Target {
    /// Page `id` of host `host`.
    Page { host: u32, id: u32 },
    /// The missing page `k` of `host`.
    Missing { host: u32, k: u32 },
}

/// A link as written in a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The `href` attribute value.
    pub href: String,
    /// What it points to.
    pub target: Target,
}

const WORDS: &[&str] = &[
    "harbour", "net", "tide", "vessel", "crew", "north", "catch", "current", "deep", "shoal",
    "keel", "rope", "storm", "calm", "buoy", "signal", "chart", "depth", "anchor", "wave",
    "season", "market", "weather", "coast", "island", "light", "engine", "winch", "deck", "hull",
    "report", "survey", "index", "archive", "record", "page", "link", "site", "crawl", "fetch",
    "the", "a", "of", "and", "to", "in", "is", "for", "on", "with", "as", "by", "at", "from",
];

/// The synthetic web of a [`WebSpec`].
#[derive(Debug, Clone)]
pub struct SyntheticWeb {
    spec: WebSpec,
}

impl SyntheticWeb {
    /// The web of `spec`.
    pub fn new(spec: WebSpec) -> Self {
        assert!(
            spec.pages_per_host >= 1,
            "a host has at least its root page"
        );
        SyntheticWeb { spec }
    }

    /// Its spec.
    pub fn spec(&self) -> WebSpec {
        self.spec
    }

    fn rand(&self, host: u32, id: u32, salt: u32) -> u64 {
        let mut key = [0u8; 12];
        key[..4].copy_from_slice(&host.to_le_bytes());
        key[4..8].copy_from_slice(&id.to_le_bytes());
        key[8..].copy_from_slice(&salt.to_le_bytes());
        xxh3_64_with_seed(&key, self.spec.seed)
    }

    /// Host name of host `i`.
    pub fn host_name(i: u32) -> String {
        format!("site{i:04}.test")
    }

    /// Host index of a name (case-insensitive, port ignored).
    pub fn host_index(&self, name: &str) -> Option<u32> {
        let name = name.split(':').next()?.to_ascii_lowercase();
        let digits = name.strip_prefix("site")?.strip_suffix(".test")?;
        let i: u32 = digits.parse().ok()?;
        (i < self.spec.hosts && Self::host_name(i) == name).then_some(i)
    }

    /// The behaviour profile of host `host`.
    pub fn profile(&self, host: u32) -> HostProfile {
        if self.spec.behaviours {
            HostProfile::of(host)
        } else {
            HostProfile::plain()
        }
    }

    /// What the politeness audit expects of the host named `host_name`
    /// under a policy of `min_delay` and `delay_factor`: its Crawl-delay
    /// raises the floor.
    pub fn politeness_rule(
        &self,
        host_name: &str,
        min_delay: std::time::Duration,
        delay_factor: f64,
    ) -> super::audit::HostRule {
        let crawl_delay = match self.host_index(host_name).map(|h| self.profile(h).robots) {
            Some(RobotsMode::CrawlDelay(d)) => d,
            _ => std::time::Duration::ZERO,
        };
        super::audit::HostRule {
            min_gap: min_delay.max(crawl_delay),
            factor: delay_factor,
        }
    }

    /// Ids of the pages of `host` that only sitemaps list.
    pub fn orphans(&self, host: u32) -> std::ops::Range<u32> {
        let m = self.spec.pages_per_host;
        if self.profile(host).sitemap == SitemapMode::None {
            m..m
        } else {
            m..m + ORPHANS
        }
    }

    /// Kind of page `id` (the root is always normal).
    pub fn page_kind(&self, host: u32, id: u32) -> PageKind {
        if id == 0 || id >= self.spec.pages_per_host {
            return PageKind::Normal;
        }
        match self.rand(host, id, 1) % 10 {
            0 => PageKind::Private,
            1 => PageKind::PrivateOpen,
            _ => PageKind::Normal,
        }
    }

    /// Path of page `id`.
    pub fn path_of(&self, host: u32, id: u32) -> String {
        if id >= self.spec.pages_per_host {
            return format!("/orphan/{id}.html");
        }
        match (id, self.page_kind(host, id)) {
            (0, _) => "/".to_owned(),
            (_, PageKind::Normal) => format!("/p/{id}.html"),
            (_, PageKind::Private) => format!("/private/{id}.html"),
            (_, PageKind::PrivateOpen) => format!("/private/open-{id}.html"),
        }
    }

    /// What a request path on `host` names, if anything.
    pub fn resolve(&self, host: u32, path: &str) -> Option<Resource> {
        if path == "/robots.txt" {
            return Some(Resource::Robots(0));
        }
        if let Some(k) = path
            .strip_prefix("/robots-")
            .and_then(|r| r.strip_suffix(".txt"))
            .and_then(|k| k.parse().ok())
        {
            let hops = match self.profile(host).robots {
                RobotsMode::Redirects { hops } => hops,
                _ => 0,
            };
            return (k >= 1 && k <= hops).then_some(Resource::Robots(k));
        }
        if let Some(file) = self.sitemap_file(host, path) {
            return Some(Resource::Sitemap(file));
        }
        if path == "/" {
            return Some(Resource::Page(0));
        }
        if let Some(id) = path
            .strip_prefix("/orphan/")
            .and_then(|r| r.strip_suffix(".html"))
            .and_then(|id| id.parse::<u32>().ok())
        {
            return self
                .orphans(host)
                .contains(&id)
                .then_some(Resource::Page(id));
        }
        if let Some(k) = path
            .strip_prefix("/missing/")
            .and_then(|r| r.strip_suffix(".html"))
        {
            return k.parse().ok().map(Resource::Missing);
        }
        let name = path
            .strip_prefix("/p/")
            .or_else(|| path.strip_prefix("/private/open-"))
            .or_else(|| path.strip_prefix("/private/"))?;
        let id: u32 = name.strip_suffix(".html")?.parse().ok()?;
        (id > 0 && id < self.spec.pages_per_host && self.path_of(host, id) == path)
            .then_some(Resource::Page(id))
    }

    fn sitemap_file(&self, host: u32, path: &str) -> Option<SitemapFile> {
        let file = match path {
            "/sitemap.xml" => SitemapFile::Main,
            "/sitemap_index.xml" => SitemapFile::Index,
            "/sitemaps/a.xml.gz" => SitemapFile::GzipPart,
            "/sitemaps/b.txt" => SitemapFile::TextPart,
            _ => return None,
        };
        let served = match self.profile(host).sitemap {
            SitemapMode::Listed | SitemapMode::DefaultLocation => file == SitemapFile::Main,
            SitemapMode::Index => file != SitemapFile::Main,
            SitemapMode::None => false,
        };
        served.then_some(file)
    }

    /// Whether robots.txt of `host` lets `trawl` fetch page `id`.
    pub fn allowed(&self, host: u32, id: u32) -> bool {
        match self.profile(host).robots_effect() {
            RobotsEffect::AllowAll => true,
            RobotsEffect::Nothing => false,
            RobotsEffect::HidePrivate => self.page_kind(host, id) != PageKind::Private,
        }
    }

    /// Whether robots.txt of `host` lets `trawl` request `path` (any path
    /// of the host; tests judge the server's log with it).
    pub fn path_allowed(&self, host: u32, path: &str) -> bool {
        if request_kind(path) == RequestKind::Robots {
            return true;
        }
        match self.profile(host).robots_effect() {
            RobotsEffect::AllowAll => true,
            RobotsEffect::Nothing => false,
            RobotsEffect::HidePrivate => {
                !path.starts_with("/private/") || path.starts_with("/private/open-")
            }
        }
    }

    /// The body of a sitemap file of `host` served on `port`.
    pub fn sitemap_body(&self, host: u32, file: SitemapFile, port: u16) -> Vec<u8> {
        let orphans: Vec<String> = self
            .orphans(host)
            .map(|id| self.url_of(Target::Page { host, id }, port))
            .collect();
        let base = format!("http://{}:{port}", Self::host_name(host));
        let half = orphans.len() / 2;
        match file {
            SitemapFile::Main => {
                let mut urls = orphans;
                urls.push(format!("{base}/"));
                // A URL of another host, which this sitemap may not list.
                let other = (host + 1) % self.spec.hosts.max(1);
                urls.push(format!(
                    "http://{}:{port}/orphan/999999.html",
                    Self::host_name(other)
                ));
                urlset(&urls).into_bytes()
            }
            SitemapFile::Index => format!(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
                 <sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n\
                 <sitemap><loc>{base}/sitemaps/a.xml.gz</loc></sitemap>\n\
                 <sitemap><loc>{base}/sitemaps/b.txt</loc></sitemap>\n</sitemapindex>\n"
            )
            .into_bytes(),
            SitemapFile::GzipPart => {
                use std::io::Write as _;
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(urlset(&orphans[..half]).as_bytes())
                    .expect("writing to a Vec");
                gz.finish().expect("writing to a Vec")
            }
            SitemapFile::TextPart => (orphans[half..].join("\n") + "\n").into_bytes(),
        }
    }

    /// The links of page `id` of `host`, `port` being the server's.
    pub fn links(&self, host: u32, id: u32, port: u16) -> Vec<Link> {
        let m = self.spec.pages_per_host;
        let mut targets = Vec::new();
        if id == 0 {
            targets.extend((1..m.min(12)).map(|t| Target::Page { host, id: t }));
        }
        if id + 1 < m {
            targets.push(Target::Page { host, id: id + 1 });
        }
        let intra = 6 + (self.rand(host, id, 2) % 10) as u32;
        for k in 0..intra {
            let t = (self.rand(host, id, 100 + k) % u64::from(m)) as u32;
            targets.push(Target::Page { host, id: t });
        }
        if self.spec.hosts > 1 && self.rand(host, id, 3) % 10 < 4 {
            for k in 0..1 + (self.rand(host, id, 4) % 2) as u32 {
                let other = (self.rand(host, id, 200 + k) % u64::from(self.spec.hosts)) as u32;
                let t = (self.rand(host, id, 300 + k) % u64::from(m.min(20))) as u32;
                targets.push(Target::Page { host: other, id: t });
            }
        }
        if self.rand(host, id, 5) % 20 == 0 {
            let k = (self.rand(host, id, 6) % 5) as u32;
            targets.push(Target::Missing { host, k });
        }
        let from_dir = dir_of(&self.path_of(host, id)).to_owned();
        targets
            .into_iter()
            .enumerate()
            .map(|(n, target)| Link {
                href: self.href(host, &from_dir, target, port, n as u32, id),
                target,
            })
            .collect()
    }

    /// Writes the link in one of the forms pages use in the wild.
    fn href(
        &self,
        host: u32,
        from_dir: &str,
        target: Target,
        port: u16,
        n: u32,
        id: u32,
    ) -> String {
        let (t_host, path) = match target {
            Target::Page { host, id } => (host, self.path_of(host, id)),
            Target::Missing { host, k } => (host, format!("/missing/{k}.html")),
        };
        let absolute = format!("http://{}:{port}{path}", Self::host_name(t_host));
        if t_host != host {
            return absolute;
        }
        match self.rand(host, id, 400 + n) % 8 {
            0 => absolute,
            1 => format!("{path}#section-{n}"),
            2 if from_dir == "/private/" && path.starts_with("/p/") => format!("..{path}"),
            3 | 4 if dir_of(&path) == from_dir && path != "/" => path[from_dir.len()..].to_owned(),
            _ => path,
        }
    }

    /// The HTML of page `id` of `host`.
    pub fn render(&self, host: u32, id: u32, port: u16) -> String {
        let target = {
            let r = self.rand(host, id, 7);
            let spread = if r % 100 < 70 { 8_000 } else { 20_000 };
            10_000 + (self.rand(host, id, 8) % spread) as usize
        };
        let mut html = String::with_capacity(target + 2048);
        let _ = write!(
            html,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>Site {host} page {id}</title></head>\n<body>\n<h1>Site {host}, page {id}</h1>\n"
        );
        let links = self.links(host, id, port);
        let mut state = self.rand(host, id, 9) | 1;
        let mut next_link = 0;
        while html.len() < target {
            html.push_str("<p>");
            for _ in 0..40 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                html.push_str(WORDS[(state % WORDS.len() as u64) as usize]);
                html.push(' ');
            }
            if let Some(link) = links.get(next_link) {
                let _ = write!(html, "<a href=\"{}\">more {}</a>", link.href, next_link);
                next_link += 1;
            }
            html.push_str("</p>\n");
        }
        html.push_str("<ul>\n");
        for link in &links[next_link.min(links.len())..] {
            let _ = writeln!(html, "<li><a href=\"{}\">link</a></li>", link.href);
        }
        html.push_str("</ul>\n</body></html>\n");
        html
    }

    /// URL of page `id` of `host` as the crawler names it.
    pub fn url_of(&self, target: Target, port: u16) -> String {
        let (host, path) = match target {
            Target::Page { host, id } => (host, self.path_of(host, id)),
            Target::Missing { host, k } => (host, format!("/missing/{k}.html")),
        };
        format!("http://{}:{port}{path}", Self::host_name(host))
    }

    /// The root URL of every host: the default seeds.
    pub fn seeds(&self, port: u16) -> Vec<String> {
        (0..self.spec.hosts)
            .map(|h| self.url_of(Target::Page { host: h, id: 0 }, port))
            .collect()
    }

    /// The exact set of URLs a correct crawl from `seeds` (given as targets)
    /// fetches: reachability over links of fetched pages, skipping pages
    /// robots.txt disallows (they are neither fetched nor followed).
    pub fn ground_truth_from(&self, seeds: &[Target], port: u16) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut fetched = BTreeSet::new();
        let mut queue: VecDeque<Target> = VecDeque::new();
        let mut hosts_reached = BTreeSet::new();
        let mut offer = |t: Target, seen: &mut BTreeSet<Target>, queue: &mut VecDeque<Target>| {
            if seen.insert(t) {
                queue.push_back(t);
            }
            let host = match t {
                Target::Page { host, .. } | Target::Missing { host, .. } => host,
            };
            // A host's sitemaps are read once its robots.txt is.
            if hosts_reached.insert(host) && self.profile(host).has_sitemaps() {
                for id in self.orphans(host) {
                    let orphan = Target::Page { host, id };
                    if seen.insert(orphan) {
                        queue.push_back(orphan);
                    }
                }
            }
        };
        for &s in seeds {
            offer(s, &mut seen, &mut queue);
        }
        while let Some(t) = queue.pop_front() {
            match t {
                Target::Missing { host, .. } => {
                    if self.profile(host).robots_effect() != RobotsEffect::Nothing {
                        fetched.insert(self.url_of(t, port));
                    }
                }
                Target::Page { host, id } => {
                    if !self.allowed(host, id) {
                        continue;
                    }
                    fetched.insert(self.url_of(t, port));
                    for link in self.links(host, id, port) {
                        offer(link.target, &mut seen, &mut queue);
                    }
                }
            }
        }
        fetched
    }

    /// Ground truth from the default seeds (every host's root).
    pub fn ground_truth(&self, port: u16) -> BTreeSet<String> {
        let seeds: Vec<Target> = (0..self.spec.hosts)
            .map(|host| Target::Page { host, id: 0 })
            .collect();
        self.ground_truth_from(&seeds, port)
    }
}

/// A urlset of `urls`, every other one with a fresh lastmod.
fn urlset(urls: &[String]) -> String {
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
    );
    let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
    for (i, url) in urls.iter().enumerate() {
        let lastmod = if i % 2 == 0 {
            today.as_str()
        } else {
            "2001-01-01"
        };
        let _ = writeln!(
            xml,
            "  <url><loc>{url}</loc><lastmod>{lastmod}</lastmod></url>"
        );
    }
    xml.push_str("</urlset>\n");
    xml
}

fn dir_of(path: &str) -> &str {
    &path[..path.rfind('/').map_or(0, |i| i + 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn web() -> SyntheticWeb {
        SyntheticWeb::new(WebSpec {
            hosts: 20,
            pages_per_host: 30,
            seed: 7,
            behaviours: true,
        })
    }

    #[test]
    fn deterministic_and_sized() {
        let (a, b) = (web(), web());
        assert_eq!(a.render(3, 5, 80), b.render(3, 5, 80));
        let sizes: Vec<usize> = (0..30).map(|id| a.render(1, id, 80).len()).collect();
        assert!(
            sizes.iter().all(|&s| (10_000..=31_000).contains(&s)),
            "{sizes:?}"
        );
        let mean = sizes.iter().sum::<usize>() / sizes.len();
        assert!((12_000..=22_000).contains(&mean), "mean {mean}");
    }

    #[test]
    fn every_link_resolves_to_what_it_names() {
        let w = web();
        let base = url::Url::parse("http://site0001.test:8080/").unwrap();
        for id in 0..30 {
            let page_url = base.join(&w.path_of(1, id)).unwrap();
            for link in w.links(1, id, 8080) {
                let abs = page_url.join(&link.href).unwrap();
                let host = w.host_index(abs.host_str().unwrap()).unwrap();
                let expected = match link.target {
                    Target::Page { host: h, id } => {
                        assert_eq!(host, h);
                        Resource::Page(id)
                    }
                    Target::Missing { k, .. } => Resource::Missing(k),
                };
                assert_eq!(w.resolve(host, abs.path()), Some(expected), "{}", link.href);
            }
        }
    }

    #[test]
    fn ground_truth_respects_robots_and_includes_404s() {
        let w = web();
        let truth = w.ground_truth(8080);
        assert!(truth.contains("http://site0000.test:8080/"));
        let private_on_star = truth
            .iter()
            .any(|u| u.starts_with("http://site0001.test:8080/private/") && !u.contains("open-"));
        assert!(!private_on_star, "Star-mode hosts hide /private/");
        // Host 10's robots.txt always fails: nothing of it is fetched.
        assert!(!truth.iter().any(|u| u.starts_with("http://site0010.test")));
        // Sitemap-only pages of hosts 0, 9 and 13 are fetched.
        for host in [0, 9, 13] {
            let orphan = format!("http://site{host:04}.test:8080/orphan/30.html");
            assert!(truth.contains(&orphan), "{orphan}");
        }
        assert!(!truth.iter().any(|u| u.contains("/orphan/999999")));
        assert!(truth.iter().any(|u| u.contains("/private/open-")));
        // Host 3 has no robots.txt, so its private pages are crawled.
        assert!(truth
            .iter()
            .any(|u| u.starts_with("http://site0003.test:8080/private/")));
        assert!(truth.iter().any(|u| u.contains("/missing/")));
        assert!(truth.len() > 400, "{}", truth.len());
    }

    #[test]
    fn sitemaps_list_the_orphans() {
        let w = web();
        let limits = crate::sitemap::SitemapLimits {
            max_urls: 100,
            max_bytes: 1 << 20,
        };
        let read =
            |host, file| crate::sitemap::parse_sitemap(&w.sitemap_body(host, file, 8080), limits);
        let main = read(0, SitemapFile::Main);
        assert_eq!(main.entries.len(), ORPHANS as usize + 2);
        let a = read(9, SitemapFile::GzipPart);
        let b = read(9, SitemapFile::TextPart);
        assert_eq!(a.entries.len() + b.entries.len(), ORPHANS as usize);
        assert_eq!(read(9, SitemapFile::Index).entries.len(), 2);
    }

    #[test]
    fn host_names_round_trip() {
        let w = web();
        assert_eq!(w.host_index("SITE0012.test:8080"), Some(12));
        assert_eq!(w.host_index("site12.test"), None);
        assert_eq!(w.host_index("site0099.test"), None);
        assert_eq!(w.resolve(1, "/p/0.html"), None);
        assert_eq!(w.resolve(1, "/robots.txt"), Some(Resource::Robots(0)));
        assert_eq!(w.resolve(5, "/robots-2.txt"), Some(Resource::Robots(2)));
        assert_eq!(w.resolve(5, "/robots-3.txt"), None);
        let b = w.resolve(9, "/sitemaps/b.txt");
        assert_eq!(b, Some(Resource::Sitemap(SitemapFile::TextPart)));
        assert_eq!(w.resolve(9, "/sitemap.xml"), None);
        assert_eq!(w.resolve(0, "/orphan/31.html"), Some(Resource::Page(31)));
        assert_eq!(w.resolve(1, "/orphan/31.html"), None);
        assert_eq!(request_kind("/robots-3.txt"), RequestKind::Robots);
        assert_eq!(request_kind("/sitemaps/a.xml.gz"), RequestKind::Sitemap);
        assert_eq!(request_kind("/p/1.html"), RequestKind::Page);
    }
}
