//! The partition's side of host and domain budgets (rules in
//! `frontier/budget.rs`): counts loaded on first use, kept in memory, and
//! written in the same batch as the admissions they allow.
//!
//! Keys in the `budgets` family:
//! - `d ‖ 0 ‖ domain` → pages admitted (u64 BE);
//! - `l ‖ 0 ‖ domain ‖ 0 ‖ linker` → empty, one per linking domain;
//! - `h ‖ 0 ‖ host` → URLs admitted (u64 BE).

use std::collections::HashMap;

use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::{AdmitEntry, PartitionStore, StoreError, CF_BUDGETS};
use crate::frontier::budget::{DomainBudget, OverBudget};
use crate::url::registrable_domain;

/// Domains and hosts whose counts are kept in memory at most (each); past
/// that the cache is dropped and counts are read again as they are needed.
const CACHED: usize = 100_000;

/// A cache of the counts of recently touched domains and hosts. The store
/// is the truth: the cache can be dropped at any time.
#[derive(Debug, Default)]
pub(super) struct Book {
    domains: HashMap<String, DomainBudget>,
    hosts: HashMap<String, u64>,
}

impl Book {
    /// Forgets everything (after a failed write, the cache may be ahead of
    /// the store).
    pub(super) fn clear(&mut self) {
        self.domains.clear();
        self.hosts.clear();
    }

    /// Keeps the cache bounded; called before a batch, never during one
    /// (a batch's pending counts live only here until it is written).
    pub(super) fn trim(&mut self) {
        if self.domains.len() > CACHED || self.hosts.len() > CACHED {
            self.clear();
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
        let Some(linker) = entry.referrer.as_deref() else {
            return Ok(());
        };
        let own = registrable_domain(&entry.host);
        if linker == own {
            return Ok(());
        }
        if self.domain(book, own)?.note_linker(own, linker) {
            batch.put_cf(self.cf(CF_BUDGETS), key(b'l', &[own, linker]), []);
        }
        Ok(())
    }

    /// Takes a page of the budgets of `entry`'s host and domain.
    pub(super) fn charge(
        &self,
        book: &mut Book,
        entry: &AdmitEntry,
        batch: &mut WriteBatch,
    ) -> Result<Result<(), OverBudget>, StoreError> {
        let own = registrable_domain(&entry.host);
        let host_urls = self.host_count(book, &entry.host)?;
        let settings = self.budget;
        let domain = self.domain(book, own)?;
        if let Err(over) = domain.take(host_urls, &settings) {
            return Ok(Err(over));
        }
        let pages = domain.pages;
        let cf = self.cf(CF_BUDGETS);
        batch.put_cf(cf, key(b'd', &[own]), pages.to_be_bytes());
        let host = book.hosts.entry(entry.host.clone()).or_default();
        *host += 1;
        batch.put_cf(cf, key(b'h', &[&entry.host]), host.to_be_bytes());
        Ok(Ok(()))
    }

    fn host_count(&self, book: &mut Book, host: &str) -> Result<u64, StoreError> {
        if let Some(n) = book.hosts.get(host) {
            return Ok(*n);
        }
        let n = self.read_u64(&key(b'h', &[host]))?;
        book.hosts.insert(host.to_owned(), n);
        Ok(n)
    }

    fn domain<'b>(
        &self,
        book: &'b mut Book,
        domain: &str,
    ) -> Result<&'b mut DomainBudget, StoreError> {
        if !book.domains.contains_key(domain) {
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
            book.domains.insert(domain.to_owned(), loaded);
        }
        Ok(book.domains.get_mut(domain).expect("inserted above"))
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
