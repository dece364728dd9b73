//! The partition's side of host and domain budgets (rules in
//! `frontier/budget.rs`): counts loaded on first use, kept in memory, and
//! written in the same batch as the admissions they allow.
//!
//! Keys in the `budgets` family:
//! - `d ‖ 0 ‖ domain` → pages admitted (u64 BE);
//! - `l ‖ 0 ‖ domain ‖ 0 ‖ linker` → empty, one per linking domain;
//! - `h ‖ 0 ‖ host` → URLs admitted (u64 BE).

use std::collections::{HashMap, HashSet};

use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::schema::CF_BUDGETS;
use super::{AdmitEntry, PartitionStore, StoreError};
use crate::frontier::budget::{DomainBudget, OverBudget};
use crate::url::registrable_domain;

/// What the cache may hold before its older generation is dropped: a
/// weight of one per host, and one per domain plus one per linking domain
/// remembered (about 40 bytes each).
const CACHE_WEIGHT: usize = 500_000;

/// A cache in two generations: entries are read and written in the hot
/// one; when it is full it becomes the cold one (the old cold one is
/// dropped), and a cold entry used again moves back to the hot one. So
/// memory stays within about twice [`CACHE_WEIGHT`], and what is in use
/// survives a rotation.
#[derive(Debug)]
struct Generations<V> {
    hot: HashMap<String, V>,
    cold: HashMap<String, V>,
}

impl<V> Default for Generations<V> {
    fn default() -> Self {
        Generations {
            hot: HashMap::new(),
            cold: HashMap::new(),
        }
    }
}

impl<V> Generations<V> {
    /// The entry for `key`, moved to the hot generation if it was cold;
    /// `moved` tells the caller to count its weight again. A hot entry
    /// (nearly every lookup) is not looked for in the cold generation.
    fn get_mut(&mut self, key: &str) -> Option<(&mut V, bool)> {
        if !self.hot.contains_key(key) {
            let v = self.cold.remove(key)?;
            return Some((self.hot.entry(key.to_owned()).or_insert(v), true));
        }
        self.hot.get_mut(key).map(|v| (v, false))
    }

    fn insert(&mut self, key: &str, value: V) -> &mut V {
        self.hot.entry(key.to_owned()).or_insert(value)
    }

    fn rotate(&mut self) {
        self.cold = std::mem::take(&mut self.hot);
    }

    fn clear(&mut self) {
        self.hot.clear();
        self.cold.clear();
    }
}

/// A cache of the counts of recently touched domains and hosts. The store
/// is the truth: the cache can be dropped at any time.
#[derive(Debug, Default)]
pub(super) struct Book {
    domains: Generations<DomainBudget>,
    hosts: Generations<u64>,
    /// Weight of the hot generations.
    weight: usize,
}

impl Book {
    /// Forgets everything (after a failed write, the cache may be ahead of
    /// the store).
    pub(super) fn clear(&mut self) {
        self.domains.clear();
        self.hosts.clear();
        self.weight = 0;
    }

    /// Keeps the cache bounded; called before a batch, never during one
    /// (a batch's pending counts live only here until it is written).
    pub(super) fn trim(&mut self) {
        if self.weight > CACHE_WEIGHT {
            self.domains.rotate();
            self.hosts.rotate();
            self.weight = 0;
        }
    }
}

fn domain_weight(d: &DomainBudget) -> usize {
    1 + d.linkers.len()
}

/// The hosts and domains a batch charged, whose counts it must write.
#[derive(Debug, Default)]
pub(super) struct Charged {
    hosts: HashSet<String>,
    domains: HashSet<String>,
}

impl Charged {
    /// Notes a page charged to `host` and `domain` (allocating only for
    /// the first of each).
    fn note(&mut self, host: &str, domain: &str) {
        if !self.hosts.contains(host) {
            self.hosts.insert(host.to_owned());
        }
        if !self.domains.contains(domain) {
            self.domains.insert(domain.to_owned());
        }
    }
}

fn key(tag: u8, parts: &[&str]) -> Vec<u8> {
    let mut k = vec![tag];
    for p in parts {
        k.push(0);
        k.extend_from_slice(p.as_bytes());
    }
    k
}

impl PartitionStore {
    /// Counts the link `entry` came from toward its domain's budget.
    pub(super) fn note_link(
        &self,
        book: &mut Book,
        entry: &AdmitEntry,
        batch: &mut WriteBatch,
    ) -> Result<(), StoreError> {
        let Some((linker, own)) = entry.foreign_linker() else {
            return Ok(());
        };
        if self.domain(book, own)?.note_linker(own, linker) {
            book.weight += 1;
            batch.put_cf(self.cf(CF_BUDGETS), key(b'l', &[own, linker]), []);
        }
        Ok(())
    }

    /// Takes a page of the budgets of `entry`'s host and domain. The new
    /// counts stay in the book; the hosts and domains charged are noted
    /// in `charged`, and [`PartitionStore::stage_charges`] puts each one's
    /// final count once per batch.
    pub(super) fn charge(
        &self,
        book: &mut Book,
        entry: &AdmitEntry,
        charged: &mut Charged,
    ) -> Result<Result<(), OverBudget>, StoreError> {
        let own = registrable_domain(&entry.host);
        let host_urls = self.host_count(book, &entry.host)?;
        let settings = self.budget;
        let domain = self.domain(book, own)?;
        if let Err(over) = domain.take(host_urls, &settings) {
            return Ok(Err(over));
        }
        let host = match book.hosts.get_mut(&entry.host) {
            Some((n, _)) => n,
            None => book.hosts.insert(&entry.host, 0),
        };
        *host += 1;
        charged.note(&entry.host, own);
        Ok(Ok(()))
    }

    /// Puts the counts of the hosts and domains `charged` in the batch
    /// into `batch`: one put per key, however many of the batch's pages it
    /// took. Every put of a key in one batch is a memtable entry of its
    /// own, and a page's links mostly admit pages of one host: with a put
    /// per page, the budget counts were two of the ~13 memtable entries a
    /// page cost. The book holds the batch's final counts (it is trimmed
    /// only between batches).
    pub(super) fn stage_charges(
        &self,
        book: &mut Book,
        charged: &Charged,
        batch: &mut WriteBatch,
    ) -> Result<(), StoreError> {
        let cf = self.cf(CF_BUDGETS);
        for domain in &charged.domains {
            let pages = self.domain(book, domain)?.pages;
            batch.put_cf(cf, key(b'd', &[domain]), pages.to_be_bytes());
        }
        for host in &charged.hosts {
            let urls = self.host_count(book, host)?;
            batch.put_cf(cf, key(b'h', &[host]), urls.to_be_bytes());
        }
        Ok(())
    }

    fn host_count(&self, book: &mut Book, host: &str) -> Result<u64, StoreError> {
        if let Some((n, moved)) = book.hosts.get_mut(host) {
            let n = *n;
            book.weight += usize::from(moved);
            return Ok(n);
        }
        let n = self.read_u64(&key(b'h', &[host]))?;
        book.hosts.insert(host, n);
        book.weight += 1;
        Ok(n)
    }

    fn domain<'b>(
        &self,
        book: &'b mut Book,
        domain: &str,
    ) -> Result<&'b mut DomainBudget, StoreError> {
        // A hot entry is looked up twice (to know, then to return): the
        // borrow checker does not end a returned borrow on the miss path.
        if book.domains.hot.contains_key(domain) {
            return Ok(book.domains.hot.get_mut(domain).expect("just found"));
        }
        if let Some(cold) = book.domains.cold.remove(domain) {
            book.weight += domain_weight(&cold);
            return Ok(book.domains.insert(domain, cold));
        }
        let mut loaded = DomainBudget {
            pages: self.read_u64(&key(b'd', &[domain]))?,
            ..Default::default()
        };
        let prefix = key(b'l', &[domain, ""]);
        let cf = self.cf(CF_BUDGETS);
        for item in self
            .db
            .iterator_cf(cf, IteratorMode::From(&prefix, Direction::Forward))
        {
            let (k, _) = item.map_err(|e| self.rocks(e))?;
            let Some(linker) = k.strip_prefix(prefix.as_slice()) else {
                break;
            };
            loaded
                .linkers
                .insert(String::from_utf8_lossy(linker).into_owned());
        }
        book.weight += domain_weight(&loaded);
        Ok(book.domains.insert(domain, loaded))
    }

    fn read_u64(&self, k: &[u8]) -> Result<u64, StoreError> {
        let value = self
            .db
            .get_cf(self.cf(CF_BUDGETS), k)
            .map_err(|e| self.rocks(e))?;
        Ok(value
            .and_then(|v| v.as_slice().try_into().ok())
            .map_or(0, u64::from_be_bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::Generations;

    #[test]
    fn entries_in_use_survive_a_rotation_and_the_rest_go_after_two() {
        let mut g: Generations<u32> = Generations::default();
        g.insert("used", 1);
        g.insert("idle", 2);
        g.rotate();
        // Used after the rotation: back in the hot generation.
        assert_eq!(
            g.get_mut("used").map(|(v, moved)| (*v, moved)),
            Some((1, true))
        );
        g.rotate();
        assert!(g.get_mut("used").is_some(), "survives: it was hot again");
        assert!(
            g.get_mut("idle").is_none(),
            "dropped: unused for two rotations"
        );
    }
}
