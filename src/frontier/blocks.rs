//! Hosts and registrable domains an operator blocked (seed 000 §11.2:
//! "per-host blocks apply at once"). A blocked host is not contacted
//! again: its queued URLs are dropped (each with a `removed` event, reason
//! `blocked`), links to it are not admitted, its refreshes wait, and its
//! actor, if active, finishes the request in flight and leaves. A block
//! is kept in the store of the partition the name belongs to, so it moves
//! with the partition and survives restarts; unblocking lets new links and
//! seeds in again and the host's refreshes come due.

use std::collections::BTreeSet;

/// What is blocked: one host, or every host of a registrable domain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BlockTarget {
    /// A host name, as URLs have it (lower case, no port).
    Host(String),
    /// A registrable domain (`example.co.uk`): all its hosts.
    Domain(String),
}

pub use crate::url::BadName;

impl BlockTarget {
    /// The block of `host` (checked, lower-cased).
    pub fn host(host: &str) -> Result<Self, BadName> {
        Ok(BlockTarget::Host(crate::url::host_name(host)?))
    }

    /// The block of the registrable domain `domain` (checked,
    /// lower-cased; a host name is taken to its registrable domain).
    pub fn domain(domain: &str) -> Result<Self, BadName> {
        let name = crate::url::host_name(domain)?;
        Ok(BlockTarget::Domain(
            crate::url::registrable_domain(&name).to_owned(),
        ))
    }

    /// The name.
    pub fn name(&self) -> &str {
        match self {
            BlockTarget::Host(n) | BlockTarget::Domain(n) => n,
        }
    }

    /// Whether it covers `host`.
    pub fn covers(&self, host: &str) -> bool {
        match self {
            BlockTarget::Host(h) => h == host,
            BlockTarget::Domain(d) => crate::url::registrable_domain(host) == d,
        }
    }
}

/// The blocks of one partition.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockList {
    targets: BTreeSet<BlockTarget>,
}

impl BlockList {
    /// A list of `targets`.
    pub fn new(targets: impl IntoIterator<Item = BlockTarget>) -> Self {
        BlockList {
            targets: targets.into_iter().collect(),
        }
    }

    /// Adds (`blocked`) or removes a block; whether that changed anything.
    pub fn set(&mut self, target: BlockTarget, blocked: bool) -> bool {
        match blocked {
            true => self.targets.insert(target),
            false => self.targets.remove(&target),
        }
    }

    /// Whether `host` is blocked, by its own name or its domain's.
    pub fn blocks(&self, host: &str) -> bool {
        !self.targets.is_empty() && self.targets.iter().any(|t| t.covers(host))
    }

    /// The blocks.
    pub fn targets(&self) -> impl Iterator<Item = &BlockTarget> {
        self.targets.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_domain_block_covers_its_hosts_and_a_host_block_only_itself() {
        let mut list = BlockList::default();
        assert!(!list.blocks("a.example.com"));
        assert!(list.set(BlockTarget::domain("WWW.Example.com").unwrap(), true));
        assert!(list.blocks("example.com") && list.blocks("a.b.example.com"));
        assert!(!list.blocks("example.org") && !list.blocks("notexample.com"));
        assert!(list.set(BlockTarget::host("shop.example.org").unwrap(), true));
        assert!(list.blocks("shop.example.org") && !list.blocks("www.example.org"));
        assert!(
            !list.set(BlockTarget::host("shop.example.org").unwrap(), true),
            "already"
        );
        assert!(list.set(BlockTarget::domain("example.com").unwrap(), false));
        assert!(!list.blocks("a.b.example.com"));
    }

    #[test]
    fn names_are_checked() {
        for bad in [
            "",
            "a b",
            "a/b",
            "..",
            ".a",
            "a..b",
            &"x".repeat(254),
            "a\u{e9}.com",
        ] {
            assert!(BlockTarget::host(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            BlockTarget::host("Site0001.TEST.").unwrap(),
            BlockTarget::Host("site0001.test".into())
        );
    }
}
