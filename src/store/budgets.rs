//! The partition's side of host and domain budgets (rules in
//! `frontier/budget.rs`): counts loaded on first use, kept in memory, and
//! written in the same batch as the admissions they allow.
//!
//! Keys in the `budgets` family:
//! - `d ‖ 0 ‖ domain` → pages admitted (u64 BE);
//! - `l ‖ 0 ‖ domain ‖ 0 ‖ linker` → more linking domains written with it
//!   (a [`codec::encode_value`] list; empty: none, like every record
//!   earlier releases wrote);
//! - `h ‖ 0 ‖ host` → URLs admitted (u64 BE);
//! - `s ‖ 0 ‖ domain` → empty: the operator seeded the domain (its base
//!   is `seeded_base_pages`, see `frontier/budget.rs`).
//!
//! # When linking domains are written
//!
//! A linking domain is written with the first admission to the domain it
//! links to, in the same batch, with every other one noted for that domain
//! since its last write, as one record: an admission is only ever
//! justified by linking domains that are stored with it. Linking domains
//! no admission has used yet wait in the book (at most [`UNSAVED_MAX`] a
//! partition; reaching that writes them all) and are written by
//! [`PartitionStore::sync`], which every clean stop and handover runs.
//!
//! The choice, and its price: a record per new linking domain was a third
//! of the memtable entries a crawled page cost (4.6 of 13.9 a page on the
//! crawl bench's web, where every host links to ~190 others), and the
//! skiplist inserts were the largest part of the partition's write. A
//! crash forgets the linking domains noted since their domain's last
//! admission (at most [`UNSAVED_MAX`] a partition): no admission made
//! relied on them, no queued URL is lost, and each counts again when a
//! link from it is seen again; until then the domain's budget is that
//! much smaller.

use std::collections::{HashMap, HashSet};

use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::schema::CF_BUDGETS;
use super::{codec, AdmitEntry, PartitionStore, StoreError};
use crate::frontier::budget::{linker_id, DomainBudget, OverBudget};
use crate::url::registrable_domain;

/// What a partition's cache may hold, in bytes, before its older
/// generation is dropped (so at most about twice this): 4 MiB, 128 MiB
/// for a node of 16 partitions at the most.
///
/// Weighed in bytes, not entries: a linking domain costs 16 bytes (a
/// fingerprint), a host or a domain ~100; at one entry each, a bound low
/// enough to matter for a million hosts (32,000 entries a partition:
/// −126 MB of RSS seeding 10 M URLs over 1 M hosts) made the 2,000-host
/// crawl, whose domains each remember ~190 linking domains, reload them
/// over and over (+1–3 % CPU a page). In bytes that crawl's budgets take
/// well under a MiB a partition and never rotate, while a partition of
/// 60,000 hosts (a million on a node) rotates its cache.
const CACHE_BYTES: usize = 4 << 20;

/// What a cached host costs besides its name: its `String` and count in
/// the map, with the table's slack.
const HOST_BYTES: usize = 64;

/// What a cached domain costs besides its name and linking domains: its
/// `String` and [`DomainBudget`] in the map, with the table's slack.
const DOMAIN_BYTES: usize = 112;

/// What a remembered linking domain costs: its fingerprint in the
/// domain's set, with the set's slack.
const LINKER_BYTES: usize = 16;

/// Linking domains a partition keeps unwritten at most (see the module
/// doc): the most a crash forgets, ~40 bytes each in memory.
pub(super) const UNSAVED_MAX: usize = 8192;

/// A cache in two generations: entries are read and written in the hot
/// one; when it is full it becomes the cold one (the old cold one is
/// dropped), and a cold entry used again moves back to the hot one. So
/// memory stays within about twice [`CACHE_BYTES`], and what is in use
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
    /// Bytes of the hot generations (see [`CACHE_BYTES`]).
    weight: usize,
    /// Linking domains noted and not written yet, by the domain they link
    /// to; each is in that domain's set too, whether the set is cached or
    /// not (a set loaded again takes them in).
    unsaved: HashMap<String, Vec<String>>,
    /// The linking domains in `unsaved`.
    unsaved_count: usize,
}

impl Book {
    /// Forgets everything (after a failed write, the cache may be ahead of
    /// the store), unwritten linking domains included: the store is the
    /// truth, and what it lacks counts again when it is seen again.
    pub(super) fn clear(&mut self) {
        self.domains.clear();
        self.hosts.clear();
        self.weight = 0;
        self.unsaved.clear();
        self.unsaved_count = 0;
    }

    fn note_unsaved(&mut self, domain: &str, linker: &str) {
        match self.unsaved.get_mut(domain) {
            Some(linkers) => linkers.push(linker.to_owned()),
            None => {
                self.unsaved
                    .insert(domain.to_owned(), vec![linker.to_owned()]);
            }
        }
        self.unsaved_count += 1;
    }

    /// The unwritten linking domains to write with a batch that charged
    /// `charged`: those of the domains charged, or all of them once there
    /// are [`UNSAVED_MAX`].
    fn take_unsaved(&mut self, charged: &Charged) -> Vec<(String, Vec<String>)> {
        let taken: Vec<_> = if self.unsaved_count >= UNSAVED_MAX {
            self.unsaved.drain().collect()
        } else {
            charged
                .domains
                .iter()
                .filter_map(|d| self.unsaved.remove_entry(d.as_str()))
                .collect()
        };
        self.unsaved_count -= taken.iter().map(|(_, l)| l.len()).sum::<usize>();
        taken
    }

    /// Keeps the cache bounded; called before a batch, never during one
    /// (a batch's pending counts live only here until it is written).
    pub(super) fn trim(&mut self) {
        if self.weight > CACHE_BYTES {
            self.domains.rotate();
            self.hosts.rotate();
            self.weight = 0;
        }
    }
}

fn domain_weight(name: &str, d: &DomainBudget) -> usize {
    DOMAIN_BYTES + name.len() + LINKER_BYTES * d.linkers.len()
}

fn host_weight(name: &str) -> usize {
    HOST_BYTES + name.len()
}

/// The hosts and domains a batch charged, whose counts it must write.
#[derive(Debug, Default)]
pub(super) struct Charged {
    hosts: HashSet<String>,
    domains: HashSet<String>,
    /// Domains found seeded by this batch.
    seeded: HashSet<String>,
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

/// What a list of linking domains is called in codec errors.
const LINKERS: &str = "linking domains";

fn key(tag: u8, parts: &[&str]) -> Vec<u8> {
    let mut k = vec![tag];
    for p in parts {
        k.push(0);
        k.extend_from_slice(p.as_bytes());
    }
    k
}

impl PartitionStore {
    /// Counts the link `entry` came from toward its domain's budget (in
    /// the book: written as the module doc says).
    pub(super) fn note_link(&self, book: &mut Book, entry: &AdmitEntry) -> Result<(), StoreError> {
        let Some((linker, own)) = entry.foreign_linker() else {
            return Ok(());
        };
        if self.domain(book, own)?.note_linker(own, linker) {
            book.weight += LINKER_BYTES;
            book.note_unsaved(own, linker);
        }
        Ok(())
    }

    /// Notes that the operator seeded `entry`'s domain, if it is a seed
    /// (written with the batch: [`PartitionStore::stage_charges`]).
    pub(super) fn note_seeded(
        &self,
        book: &mut Book,
        entry: &AdmitEntry,
        charged: &mut Charged,
    ) -> Result<(), StoreError> {
        if !entry.is_seed() {
            return Ok(());
        }
        let own = registrable_domain(&entry.host);
        let domain = self.domain(book, own)?;
        if !domain.seeded {
            domain.seeded = true;
            charged.seeded.insert(own.to_owned());
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
    /// only between batches). The linking domains of the domains charged
    /// go in too (see the module doc).
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
        for domain in &charged.seeded {
            batch.put_cf(cf, key(b's', &[domain]), []);
        }
        for (domain, linkers) in book.take_unsaved(charged) {
            self.stage_linkers(&domain, &linkers, batch)?;
        }
        Ok(())
    }

    /// The budget book, locked. A poisoned lock only means a panic
    /// mid-batch: the book may be ahead of the store, so it is dropped,
    /// as after any failed write (its counts are reloaded from the store).
    pub(super) fn lock_book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(|poisoned| {
            let mut book = poisoned.into_inner();
            book.clear();
            book
        })
    }

    /// Writes the linking domains no admission has written yet (see the
    /// module doc), in one batch.
    pub(super) fn save_linkers(&self) -> Result<(), StoreError> {
        let mut book = self.lock_book();
        if book.unsaved_count == 0 {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        let all = std::mem::take(&mut book.unsaved);
        book.unsaved_count = 0;
        for (domain, linkers) in &all {
            self.stage_linkers(domain, linkers, &mut batch)?;
        }
        let written = self.write(batch);
        if written.is_err() {
            book.clear();
        }
        written
    }

    /// Puts `linkers` of `domain` (at least one) as one record: the first
    /// in the key, the rest in the value.
    fn stage_linkers(
        &self,
        domain: &str,
        linkers: &[String],
        batch: &mut WriteBatch,
    ) -> Result<(), StoreError> {
        let (first, rest) = linkers
            .split_first()
            .expect("a domain's unsaved linkers are never empty");
        let value = match rest {
            [] => Vec::new(),
            rest => codec::encode_value(LINKERS, rest).map_err(|e| self.codec(e))?,
        };
        batch.put_cf(self.cf(CF_BUDGETS), key(b'l', &[domain, first]), value);
        Ok(())
    }

    fn host_count(&self, book: &mut Book, host: &str) -> Result<u64, StoreError> {
        if let Some((n, moved)) = book.hosts.get_mut(host) {
            let n = *n;
            if moved {
                book.weight += host_weight(host);
            }
            return Ok(n);
        }
        let n = self.read_u64(&key(b'h', &[host]))?;
        book.hosts.insert(host, n);
        book.weight += host_weight(host);
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
            book.weight += domain_weight(domain, &cold);
            return Ok(book.domains.insert(domain, cold));
        }
        let mut loaded = DomainBudget {
            pages: self.read_u64(&key(b'd', &[domain]))?,
            seeded: self.get(CF_BUDGETS, &key(b's', &[domain]))?.is_some(),
            ..Default::default()
        };
        let prefix = key(b'l', &[domain, ""]);
        let cf = self.cf(CF_BUDGETS);
        for item in self
            .db
            .iterator_cf(cf, IteratorMode::From(&prefix, Direction::Forward))
        {
            let (k, v) = item.map_err(|e| self.rocks(e))?;
            let Some(linker) = k.strip_prefix(prefix.as_slice()) else {
                break;
            };
            loaded
                .linkers
                .insert(linker_id(&String::from_utf8_lossy(linker)));
            if !v.is_empty() {
                let more: Vec<String> =
                    codec::decode_value(LINKERS, &v).map_err(|e| self.codec(e))?;
                loaded.linkers.extend(more.iter().map(|l| linker_id(l)));
            }
        }
        if let Some(unsaved) = book.unsaved.get(domain) {
            loaded.linkers.extend(unsaved.iter().map(|l| linker_id(l)));
        }
        book.weight += domain_weight(domain, &loaded);
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
    use std::path::Path;

    use super::{Generations, CACHE_BYTES, DOMAIN_BYTES, HOST_BYTES, LINKER_BYTES, UNSAVED_MAX};
    use crate::config::Config;
    use crate::frontier::budget::BudgetSettings;
    use crate::store::schema::CF_BUDGETS;
    use crate::store::test_support::entry;
    use crate::store::{AdmitEntry, PartitionStore, StoreEnv};

    /// A store whose domains may have one page, and one more per linking
    /// domain.
    fn open(dir: &Path) -> PartitionStore {
        let budget = BudgetSettings {
            base_pages: 1,
            pages_per_linking_domain: 1,
            max_pages_per_domain: 0,
            max_urls_per_host: 0,
            seeded_base_pages: 0,
        };
        let env = StoreEnv::new(&Config::defaults().storage).with_budgets(budget);
        PartitionStore::open(&env, dir, 0).unwrap()
    }

    /// A link to page `i` of `target.test`, from a page of `referrer`.
    fn link(i: u32, referrer: Option<&str>) -> AdmitEntry {
        AdmitEntry {
            provenance: Default::default(),
            referrer: referrer.map(str::to_owned),
            ..entry(&format!("http://target.test/{i}"), "target.test")
        }
    }

    /// How many of `entries` the store admits as new.
    fn admitted(store: &PartitionStore, entries: Vec<AdmitEntry>) -> usize {
        store.admit(entries).unwrap().entries.len()
    }

    /// How many new pages of `target.test` the store admits now, offered
    /// `tries` of them (each admitted one takes a page of the budget).
    fn room(store: &PartitionStore, tries: u32) -> usize {
        let offered = (1000..1000 + tries).map(|i| link(i, None)).collect();
        admitted(store, offered)
    }

    #[test]
    fn an_admission_writes_the_linking_domains_it_relies_on_in_its_batch() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            // A new page linked from a.test: one record, one linking domain.
            assert_eq!(admitted(&store, vec![link(0, Some("a.test"))]), 1);
            let written = store.memtable_entries(CF_BUDGETS);
            // Links to a page already seen: counted, nothing written.
            let seen = vec![link(0, Some("b.test")), link(0, Some("c.test"))];
            assert_eq!(admitted(&store, seen), 0);
            assert_eq!(store.memtable_entries(CF_BUDGETS), written);
            // An admission to the domain writes both with it, as one record
            // (and the domain's and host's counts).
            assert_eq!(admitted(&store, vec![link(1, Some("d.test"))]), 1);
            assert_eq!(store.memtable_entries(CF_BUDGETS), written + 3);
            // Dropped without a sync, as a crash would leave it.
        }
        let store = open(dir.path());
        // 1 + 4 linking domains = 5 pages, 2 taken.
        assert_eq!(room(&store, 5), 3);
    }

    #[test]
    fn linking_domains_no_admission_used_wait_for_a_sync() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            assert_eq!(admitted(&store, vec![link(0, None)]), 1);
            assert_eq!(admitted(&store, vec![link(0, Some("a.test"))]), 0);
        }
        {
            // Not written: the crash forgot it (no admission relied on it).
            let store = open(dir.path());
            assert_eq!(
                room(&store, 1),
                0,
                "the one page of the base budget is taken"
            );
            let seen = vec![link(0, Some("a.test")), link(0, Some("b.test"))];
            assert_eq!(admitted(&store, seen), 0);
            store.sync().unwrap();
        }
        let store = open(dir.path());
        // 1 + 2 linking domains, 1 taken.
        assert_eq!(room(&store, 5), 2);
    }

    #[test]
    fn a_partition_writes_all_its_linking_domains_once_it_holds_the_most_it_may() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            assert_eq!(admitted(&store, vec![link(0, None)]), 1);
            let almost: Vec<_> = (1..UNSAVED_MAX)
                .map(|i| link(0, Some(&format!("l{i}.test"))))
                .collect();
            store.admit(almost).unwrap();
            let written = store.memtable_entries(CF_BUDGETS);
            store.admit(vec![link(0, Some("last.test"))]).unwrap();
            assert_eq!(
                store.memtable_entries(CF_BUDGETS),
                written + 1,
                "all {UNSAVED_MAX} in one record of their domain"
            );
            assert_eq!(store.book.lock().unwrap().unsaved_count, 0);
        }
        let store = open(dir.path());
        let offered = UNSAVED_MAX as u32 + 5;
        assert_eq!(
            room(&store, offered),
            UNSAVED_MAX,
            "1 + {UNSAVED_MAX} pages, 1 taken"
        );
    }

    #[test]
    fn a_domain_dropped_from_the_cache_keeps_its_unwritten_linking_domains() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        assert_eq!(admitted(&store, vec![link(0, None)]), 1);
        assert_eq!(admitted(&store, vec![link(0, Some("a.test"))]), 0);
        {
            let mut book = store.book.lock().unwrap();
            book.domains.rotate();
            book.domains.rotate();
            assert!(book.domains.get_mut("target.test").is_none());
        }
        // Loaded again from the store, with a.test still unwritten: a.test
        // is known, b.test is new.
        let seen = vec![link(0, Some("a.test")), link(0, Some("b.test"))];
        assert_eq!(admitted(&store, seen), 0);
        assert_eq!(store.book.lock().unwrap().unsaved_count, 2);
        assert_eq!(room(&store, 5), 2, "1 + 2 linking domains, 1 taken");
    }

    /// The cache weighs what its entries take: a domain remembering many
    /// linking domains is 16 bytes a linker, and only hosts enough to
    /// fill [`CACHE_BYTES`] rotate it; a host dropped from it is counted
    /// on from the store.
    #[test]
    fn the_cache_weighs_bytes_and_a_host_dropped_from_it_counts_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let linkers: Vec<_> = (0..2_000)
            .map(|i| link(0, Some(&format!("l{i}.test"))))
            .collect();
        assert_eq!(admitted(&store, linkers), 1);
        let expected = DOMAIN_BYTES
            + "target.test".len()
            + 2_000 * LINKER_BYTES
            + HOST_BYTES
            + "target.test".len();
        assert_eq!(store.book.lock().unwrap().weight, expected);

        // Hosts of their own domains, past the bound: the cache rotates.
        let per_host = HOST_BYTES + DOMAIN_BYTES + 2 * "h00000.test".len();
        let hosts = 3 * CACHE_BYTES / per_host;
        for chunk in (0..hosts).collect::<Vec<_>>().chunks(5_000) {
            let entries = chunk
                .iter()
                .map(|i| {
                    let host = format!("h{i:05}.test");
                    entry(&format!("http://{host}/"), &host)
                })
                .collect();
            assert_eq!(admitted(&store, entries), chunk.len());
        }
        {
            let mut book = store.book.lock().unwrap();
            book.trim();
            assert!(book.weight <= CACHE_BYTES, "{} bytes", book.weight);
            assert!(book.hosts.get_mut("target.test").is_none(), "rotated out");
        }
        // Its count and its domain's linking domains come back from the
        // store: 1 + 2,000 pages, 1 taken.
        assert_eq!(room(&store, 2_005), 2_000);
    }

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
