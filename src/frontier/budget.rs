//! Budgets: how many URLs a host and a domain may put in the frontier.
//!
//! After IRLbot's STAR and BEAST (Lee et al., WWW 2008): a registrable
//! domain's page budget grows with the number of distinct *other* domains
//! linking to it, so spam farms (thousands of subdomains of one domain
//! linking to each other, with few links from outside) cannot eat the
//! crawl, while a site the web links to widely gets room to be crawled:
//!
//! ```text
//! budget(domain) = base_pages + pages_per_linking_domain × linking_domains
//! ```
//!
//! capped by `max_pages_per_domain` (0: no cap). A domain the operator
//! seeded is one the operator asked for, not a farm to defend against: its
//! base is `seeded_base_pages` instead (a site of 300,000 pages given as a
//! seed is crawled, not cut at 2,000), still under the two caps. A seeded
//! domain that hits a budget is refused under labels of its own
//! (`budget_seeded_domain`, `budget_seeded_host`), logged once by name with
//! the setting that would let it through. Subdomains share their
//! domain's budget (`a.farm.example` and `b.farm.example` are one domain).
//! Separately, `max_urls_per_host` caps any one host. Pages (links,
//! redirects, sitemap entries, seeds) count; sitemap files do not.
//!
//! A URL over budget is not recorded as seen: when more domains link in
//! later and the budget grows, rediscovering it admits it (IRLbot keeps
//! such URLs in a delayed queue; re-discovery is the cheaper equivalent
//! for a crawl that keeps finding links).
//!
//! Linking domains are counted from every link seen, new or not, up to
//! [`MAX_LINKERS`] per domain (past that the budget is beyond any sane
//! cap). In memory a linking domain is its 64-bit xxh3 fingerprint, not
//! its name: the sets of every domain a crawl knows are the largest
//! per-domain state a node holds (20 MB of a 2,000-host crawl's heap as
//! `String`s, a fifth of that as `u64`s). Two linking domains of one
//! domain share a fingerprint with odds of about n²/2⁶⁵ (n ≤ 10,000:
//! below 10⁻¹¹); the price would be one linking domain not counted.
//!
//! These are pure functions over the counts; the partition store owns the
//! counts (a domain and all its hosts live in one partition), persists them
//! with the admissions they allow, and keeps a bounded two-generation cache
//! of them in memory (`store/budgets.rs`).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::config::BudgetConfig;

/// Linking domains remembered per domain.
pub const MAX_LINKERS: usize = 10_000;

/// The budgets a partition enforces (built from `[budget]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BudgetSettings {
    /// Pages any domain may have, linked to or not.
    pub base_pages: u64,
    /// Extra pages per distinct other domain linking to it.
    pub pages_per_linking_domain: u64,
    /// Upper bound of a domain's budget; 0: none.
    pub max_pages_per_domain: u64,
    /// URLs any one host may have; 0: no cap.
    pub max_urls_per_host: u64,
    /// The base of a domain the operator seeded (instead of `base_pages`).
    pub seeded_base_pages: u64,
}

impl BudgetSettings {
    /// Whether no budget limits anything (the store then keeps no counts).
    pub fn is_unlimited(&self) -> bool {
        *self == BudgetSettings::default()
    }
}

impl From<&BudgetConfig> for BudgetSettings {
    fn from(c: &BudgetConfig) -> Self {
        BudgetSettings {
            base_pages: c.base_pages,
            pages_per_linking_domain: c.pages_per_linking_domain,
            max_pages_per_domain: c.max_pages_per_domain,
            max_urls_per_host: c.max_urls_per_host,
            seeded_base_pages: c.seeded_base_pages,
        }
    }
}

impl Default for BudgetSettings {
    /// No limits.
    fn default() -> Self {
        BudgetSettings {
            base_pages: u64::MAX / 2,
            pages_per_linking_domain: 0,
            max_pages_per_domain: 0,
            max_urls_per_host: 0,
            seeded_base_pages: u64::MAX / 2,
        }
    }
}

/// Why an admission was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverBudget {
    /// The host holds `max_urls_per_host` URLs.
    Host,
    /// The domain used its budget.
    Domain,
    /// A host of a domain the operator seeded holds `max_urls_per_host`.
    SeededHost,
    /// A domain the operator seeded used its budget.
    SeededDomain,
}

impl OverBudget {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            OverBudget::Host => "budget_host",
            OverBudget::Domain => "budget_domain",
            OverBudget::SeededHost => "budget_seeded_host",
            OverBudget::SeededDomain => "budget_seeded_domain",
        }
    }

    /// Whether the domain refused was one the operator seeded.
    pub fn is_seeded(self) -> bool {
        matches!(self, OverBudget::SeededHost | OverBudget::SeededDomain)
    }

    /// The settings that would let more through, for the operator.
    pub fn settings_to_raise(self) -> &'static str {
        match self {
            OverBudget::Host | OverBudget::SeededHost => "[budget] max_urls_per_host",
            OverBudget::Domain => {
                "[budget] base_pages, pages_per_linking_domain or max_pages_per_domain"
            }
            OverBudget::SeededDomain => "[budget] seeded_base_pages or max_pages_per_domain",
        }
    }
}

/// What a domain's set of linking domains holds for `linker` (see the
/// module doc).
pub fn linker_id(linker: &str) -> u64 {
    xxh3_64(linker.as_bytes())
}

/// One domain's counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainBudget {
    /// URLs admitted.
    pub pages: u64,
    /// Distinct other domains seen linking in, by [`linker_id`] (a hash
    /// set: every link from another domain is looked up here).
    pub linkers: HashSet<u64>,
    /// The operator gave a seed in it.
    pub seeded: bool,
}

impl DomainBudget {
    /// The domain's budget now.
    pub fn limit(&self, s: &BudgetSettings) -> u64 {
        let earned = s
            .pages_per_linking_domain
            .saturating_mul(self.linkers.len() as u64);
        let base = match self.seeded {
            true => s.seeded_base_pages.max(s.base_pages),
            false => s.base_pages,
        };
        let limit = base.saturating_add(earned);
        match s.max_pages_per_domain {
            0 => limit,
            cap => limit.min(cap),
        }
    }

    /// Records a link from `linker` (a registrable domain); returns whether
    /// it was new. Links from the domain itself do not count.
    pub fn note_linker(&mut self, own: &str, linker: &str) -> bool {
        if linker == own || self.linkers.len() >= MAX_LINKERS {
            return false;
        }
        self.linkers.insert(linker_id(linker))
    }

    /// Takes one page of the budget for a host holding `host_urls` URLs.
    pub fn take(&mut self, host_urls: u64, s: &BudgetSettings) -> Result<(), OverBudget> {
        if s.max_urls_per_host > 0 && host_urls >= s.max_urls_per_host {
            return Err(match self.seeded {
                true => OverBudget::SeededHost,
                false => OverBudget::Host,
            });
        }
        if self.pages >= self.limit(s) {
            return Err(match self.seeded {
                true => OverBudget::SeededDomain,
                false => OverBudget::Domain,
            });
        }
        self.pages += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> BudgetSettings {
        BudgetSettings {
            base_pages: 10,
            pages_per_linking_domain: 5,
            max_pages_per_domain: 30,
            max_urls_per_host: 8,
            seeded_base_pages: 25,
        }
    }

    #[test]
    fn a_seeded_domain_has_the_seeded_base_under_the_same_caps() {
        let s = settings();
        let mut d = DomainBudget {
            seeded: true,
            ..Default::default()
        };
        assert_eq!(d.limit(&s), 25);
        for _ in 0..25 {
            d.take(0, &s).unwrap();
        }
        let over = d.take(0, &s).unwrap_err();
        assert_eq!(over, OverBudget::SeededDomain);
        assert!(over.is_seeded());
        assert_eq!(over.label(), "budget_seeded_domain");
        assert!(over.settings_to_raise().contains("seeded_base_pages"));
        assert_eq!(d.take(8, &s), Err(OverBudget::SeededHost));
        for n in 0..10 {
            d.note_linker("seeded.test", &format!("l{n}.test"));
        }
        assert_eq!(d.limit(&s), 30, "max_pages_per_domain still caps it");
        // A seeded base below base_pages never lowers a budget.
        let low = BudgetSettings {
            seeded_base_pages: 1,
            ..s
        };
        assert_eq!(
            DomainBudget {
                seeded: true,
                ..Default::default()
            }
            .limit(&low),
            10
        );
    }

    #[test]
    fn the_budget_grows_with_distinct_outside_linkers_up_to_the_cap() {
        let s = settings();
        let mut d = DomainBudget::default();
        assert_eq!(d.limit(&s), 10);
        assert!(d.note_linker("farm.test", "a.test"));
        assert!(!d.note_linker("farm.test", "a.test"), "counted once");
        assert!(
            !d.note_linker("farm.test", "farm.test"),
            "self-links earn nothing"
        );
        assert_eq!(d.limit(&s), 15);
        for n in 0..10 {
            d.note_linker("farm.test", &format!("l{n}.test"));
        }
        assert_eq!(d.limit(&s), 30, "capped");
    }

    #[test]
    fn pages_are_taken_until_the_domain_or_the_host_is_full() {
        let s = settings();
        let mut d = DomainBudget::default();
        for _ in 0..10 {
            d.take(0, &s).unwrap();
        }
        assert_eq!(d.take(0, &s), Err(OverBudget::Domain));
        d.note_linker("x.test", "y.test");
        assert_eq!(d.take(0, &s), Ok(()), "a new linker earns room");
        assert_eq!(d.take(8, &s), Err(OverBudget::Host));
        let unlimited = BudgetSettings::default();
        let mut d = DomainBudget {
            pages: 1 << 40,
            ..Default::default()
        };
        assert_eq!(d.take(1 << 40, &unlimited), Ok(()));
    }
}
