//! Host behaviours of the synthetic web: how each host's robots.txt,
//! sitemaps, speed and throttling look. A pure function of the host index
//! (a 20-host cycle), so tests know what every host does.

use std::time::Duration;

/// How a host answers `/robots.txt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RobotsMode {
    /// `User-agent: *` with Disallow/Allow rules for the private pages.
    Star,
    /// A `trawl` group with the private rules; `*` is disallowed entirely.
    AgentGroup,
    /// The private rules written with `*` and `$` patterns.
    Wildcards,
    /// [`RobotsMode::Star`] plus a Crawl-delay.
    CrawlDelay(Duration),
    /// [`RobotsMode::Star`], padded past 500 KiB, then `Disallow: /p/`
    /// (which a correct parser never reads).
    Huge,
    /// 404: everything allowed.
    Missing,
    /// 403: everything allowed (RFC 9309 treats 4xx alike).
    Forbidden,
    /// 500 forever: nothing but robots.txt may be requested.
    ServerError,
    /// 503 for the first `failures` requests, then [`RobotsMode::Star`].
    FlakyThenStar {
        /// Failed answers before the good one.
        failures: u32,
    },
    /// A chain of `hops` redirects to a [`RobotsMode::Star`] file; more than
    /// five hops are not followed, so the file counts as unavailable.
    Redirects {
        /// Redirect hops.
        hops: u32,
    },
}

/// What the crawler may fetch of a host, as its robots.txt decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RobotsEffect {
    /// Private pages hidden, everything else allowed.
    HidePrivate,
    /// Everything allowed.
    AllowAll,
    /// Nothing allowed (robots.txt unreachable).
    Nothing,
}

/// How a host throttles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Throttle {
    /// Never.
    None,
    /// The first request of page 2 gets 429 with `Retry-After: SECONDS`.
    TooManyRequests,
    /// The first request of page 2 gets 503 with an HTTP-date Retry-After.
    Unavailable,
}

/// Which sitemaps a host has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SitemapMode {
    /// None (`/sitemap.xml` is 404).
    None,
    /// robots.txt lists `/sitemap.xml`, a urlset with lastmod.
    Listed,
    /// robots.txt lists `/sitemap_index.xml`, an index of a gzip urlset
    /// (`/sitemaps/a.xml.gz`) and a text sitemap (`/sitemaps/b.txt`).
    Index,
    /// `/sitemap.xml` exists, named nowhere: found only where robots.txt
    /// is missing (the crawler then tries the conventional location).
    DefaultLocation,
}

/// Everything special about one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostProfile {
    /// robots.txt behaviour.
    pub robots: RobotsMode,
    /// Throttling.
    pub throttle: Throttle,
    /// Time the server takes for every response.
    pub slow: Option<Duration>,
    /// Sitemaps.
    pub sitemap: SitemapMode,
}

/// Pages per sitemap host that only sitemaps list (`/orphan/N.html`).
pub const ORPHANS: u32 = 4;
/// The page that throttling hosts refuse once.
pub const THROTTLED_PAGE: u32 = 2;
/// Retry-After (seconds form) of throttling hosts.
pub const RETRY_AFTER_SECS: u64 = 1;
/// Crawl-delay of Crawl-delay hosts.
pub const CRAWL_DELAY: Duration = Duration::from_millis(200);
/// Response time of slow hosts.
pub const SLOW: Duration = Duration::from_millis(10);

impl HostProfile {
    /// A host with nothing special: a `*` robots.txt, no sitemaps, fast.
    pub fn plain() -> HostProfile {
        HostProfile {
            robots: RobotsMode::Star,
            throttle: Throttle::None,
            slow: None,
            sitemap: SitemapMode::None,
        }
    }

    /// The profile of host `i`.
    pub fn of(i: u32) -> HostProfile {
        let plain = Self::plain();
        match i % 20 {
            0 => HostProfile {
                sitemap: SitemapMode::Listed,
                ..plain
            },
            1 => HostProfile {
                slow: Some(SLOW),
                ..plain
            },
            2 => HostProfile {
                robots: RobotsMode::Forbidden,
                ..plain
            },
            3 => HostProfile {
                robots: RobotsMode::Missing,
                ..plain
            },
            4 => HostProfile {
                throttle: Throttle::TooManyRequests,
                ..plain
            },
            5 => HostProfile {
                robots: RobotsMode::Redirects { hops: 2 },
                ..plain
            },
            6 => HostProfile {
                robots: RobotsMode::FlakyThenStar { failures: 2 },
                ..plain
            },
            7 => HostProfile {
                robots: RobotsMode::AgentGroup,
                ..plain
            },
            8 => HostProfile {
                robots: RobotsMode::CrawlDelay(CRAWL_DELAY),
                ..plain
            },
            9 => HostProfile {
                sitemap: SitemapMode::Index,
                ..plain
            },
            10 => HostProfile {
                robots: RobotsMode::ServerError,
                ..plain
            },
            11 => HostProfile {
                robots: RobotsMode::Wildcards,
                ..plain
            },
            12 => HostProfile {
                robots: RobotsMode::Huge,
                ..plain
            },
            13 => HostProfile {
                robots: RobotsMode::Missing,
                sitemap: SitemapMode::DefaultLocation,
                ..plain
            },
            14 => HostProfile {
                throttle: Throttle::Unavailable,
                ..plain
            },
            15 => HostProfile {
                robots: RobotsMode::Redirects { hops: 6 },
                ..plain
            },
            _ => plain,
        }
    }

    /// What robots.txt lets the crawler fetch.
    pub fn robots_effect(&self) -> RobotsEffect {
        match self.robots {
            RobotsMode::Missing | RobotsMode::Forbidden => RobotsEffect::AllowAll,
            RobotsMode::Redirects { hops } if hops > 5 => RobotsEffect::AllowAll,
            RobotsMode::ServerError => RobotsEffect::Nothing,
            _ => RobotsEffect::HidePrivate,
        }
    }

    /// Whether the crawler finds sitemaps on this host: robots.txt names
    /// them (and is not unreachable), or, at the conventional location,
    /// the host has no robots.txt (its rules allow all).
    pub fn has_sitemaps(&self) -> bool {
        match self.sitemap {
            SitemapMode::None => false,
            SitemapMode::DefaultLocation => self.robots_effect() == RobotsEffect::AllowAll,
            SitemapMode::Listed | SitemapMode::Index => {
                self.robots_effect() != RobotsEffect::Nothing
            }
        }
    }

    /// Whether the crawler queues a sitemap file for this host from its
    /// robots.txt: one it names, or `/sitemap.xml` where the host has no
    /// robots.txt (found or a 404); none where robots.txt names none or
    /// cannot be read.
    pub fn asks_for_a_sitemap(&self) -> bool {
        match self.robots_effect() {
            RobotsEffect::Nothing => false,
            RobotsEffect::AllowAll => true,
            RobotsEffect::HidePrivate => {
                matches!(self.sitemap, SitemapMode::Listed | SitemapMode::Index)
            }
        }
    }

    /// The Sitemap lines robots.txt carries.
    fn sitemap_lines(&self, base: &str) -> String {
        match self.sitemap {
            SitemapMode::Listed => format!("Sitemap: {base}/sitemap.xml\n"),
            SitemapMode::Index => format!("Sitemap: {base}/sitemap_index.xml\n"),
            SitemapMode::None | SitemapMode::DefaultLocation => String::new(),
        }
    }

    /// The body of the final robots.txt file (after redirects), for a host
    /// served at `base` (`http://host:port`).
    pub fn robots_body(&self, host: u32, base: &str) -> String {
        let star = "User-agent: *\nDisallow: /private/\nAllow: /private/open-\n";
        let sitemaps = self.sitemap_lines(base);
        match self.robots {
            RobotsMode::AgentGroup => format!(
                "User-agent: otherbot\nUser-agent: *\nDisallow: /\n\nUser-agent: trawl\nDisallow: /private/\nAllow: /private/open-\n{sitemaps}"
            ),
            RobotsMode::Wildcards => format!(
                "User-agent: *\nDisallow: /private/*.html$\nAllow: /private/open-*.html$\n{sitemaps}"
            ),
            RobotsMode::CrawlDelay(d) => format!(
                "User-agent: *\nCrawl-delay: {}\nDisallow: /private/\nAllow: /private/open-\n{sitemaps}",
                d.as_secs_f64()
            ),
            RobotsMode::Huge => {
                let mut body = format!("# synthetic site {host}\n{star}{sitemaps}");
                let line = "# this file is long on purpose; a parser reads at most 500 KiB of it\n";
                while body.len() < crate::robots::MAX_ROBOTS_BYTES + 4096 {
                    body.push_str(line);
                }
                body.push_str("Disallow: /p/\n");
                body
            }
            _ => format!("# synthetic site {host}\n{star}{sitemaps}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::robots::Rules;

    #[test]
    fn every_robots_body_hides_exactly_the_private_pages() {
        let base = "http://site.test:80";
        for i in 0..20 {
            let profile = HostProfile::of(i);
            if profile.robots_effect() != RobotsEffect::HidePrivate {
                continue;
            }
            let rules = Rules::parse(profile.robots_body(i, base).as_bytes(), "trawl");
            let allows =
                |path: &str| rules.allows(&url::Url::parse(&format!("{base}{path}")).unwrap());
            assert!(allows("/p/3.html"), "host {i}");
            assert!(allows("/"), "host {i}");
            assert!(!allows("/private/3.html"), "host {i}");
            assert!(allows("/private/open-3.html"), "host {i}");
            assert!(allows("/orphan/40.html"), "host {i}");
        }
        let crawl_delay = HostProfile::of(8).robots_body(8, base);
        let rules = Rules::parse(crawl_delay.as_bytes(), "trawl");
        assert_eq!(rules.crawl_delay, Some(CRAWL_DELAY));
    }
}
