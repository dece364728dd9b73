//! Admission: the seen check, the durable enqueue and the budgets of a
//! batch of URLs, in one `WriteBatch`, so after any crash a URL is either
//! both seen and queued, or neither.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use rocksdb::WriteBatch;

use super::budgets;
use super::codec::{self, QueueValue, UrlRecord, UrlState};
use super::queue::DueChanges;
use super::record::QueueSlot;
use super::schema::{CF_META, CF_QUEUED, CF_RECRAWL, CF_URLS, META_SEQ, SEQ_RESERVE};
use super::{PartitionStore, SeenCache, SeenMode, StoreError};
use crate::frontier::budget::OverBudget;
use crate::frontier::importance::{rank_for, Cash, Rank};
use crate::frontier::lifecycle::{self, Offer, SeedOffer};
use crate::frontier::provenance::Provenance;
use crate::frontier::{EntryKind, Priority};
use crate::url::{registrable_domain, Fingerprint};

/// A URL offered for admission to a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdmitEntry {
    /// Fingerprint of the normalised URL (the identity).
    pub fp: Fingerprint,
    /// The URL to fetch.
    pub url: String,
    /// Host key (queue owner).
    pub host: String,
    /// Hops from the seed (pages) or index depth (sitemaps).
    pub depth: u32,
    /// Which of the host's queues it joins.
    pub priority: Priority,
    /// Page or sitemap.
    pub kind: EntryKind,
    /// Queue it for fetching; `false` records it as seen
    /// ([`UrlState::Excluded`]) and nothing more.
    pub queue: bool,
    /// Registrable domain of the page linking to it, if it is a link.
    pub referrer: Option<String>,
    /// The `lastmod` of the sitemap entry that lists it (Unix ms): newer
    /// than the URL's last fetch, it makes a seen URL due at once.
    pub lastmod_ms: Option<u64>,
    /// Its estimated importance (`frontier/importance.rs`): where it goes
    /// in its host's queue.
    pub cash: Cash,
    /// Where it was found (`frontier/provenance.rs`), kept with its queue
    /// entry for the records of its fetch.
    pub provenance: Provenance,
}

impl AdmitEntry {
    /// Whether an operator gave it as a seed.
    pub(super) fn is_seed(&self) -> bool {
        self.priority == Priority::SEED
    }

    /// What the offer means for a URL seen before (see
    /// [`lifecycle::due_again`]); `seeded_before`: the URL was given as a
    /// seed by an earlier offer.
    fn offer(&self, seeded_before: bool) -> Offer {
        let seed = match (self.is_seed(), seeded_before) {
            (false, _) => SeedOffer::No,
            (true, false) => SeedOffer::New,
            (true, true) => SeedOffer::Repeated,
        };
        Offer {
            seed,
            lastmod_ms: self.lastmod_ms,
        }
    }

    /// Whether the offer could change a seen URL's record: only seeds and
    /// sitemap entries with a `lastmod` are worth a read.
    fn may_bring_back(&self) -> bool {
        self.queue && (self.is_seed() || self.lastmod_ms.is_some())
    }

    /// The domain linking to the entry and the entry's own, when the link
    /// comes from another registrable domain: the links a budget counts
    /// (`budgets.rs`). A link from the site itself, or from no page, is
    /// `None`.
    pub(super) fn foreign_linker(&self) -> Option<(&str, &str)> {
        let linker = self.referrer.as_deref()?;
        let own = registrable_domain(&self.host);
        (linker != own).then_some((linker, own))
    }

    /// Whether admitting the entry, were its URL seen, would change
    /// nothing in the store: a queued entry that cannot bring its URL back
    /// and whose link no budget counts. Such an entry's seen URL can be
    /// answered without its partition (`dedup/shortcut.rs`).
    pub fn settled_if_seen(&self) -> bool {
        self.queue && !self.may_bring_back() && self.foreign_linker().is_none()
    }
}

/// Where a URL given as a seed is noted (in `meta`, value empty), so that
/// the same seed offered again is told from a new one (see
/// [`lifecycle::due_again`]). Stores written before this note existed
/// take each seed as new once: a removed seed comes back on the first
/// start after the upgrade, and never again.
const SEED_PREFIX: &[u8] = b"seed/";

/// The `meta` key noting `fp` was given as a seed.
fn seed_key(fp: Fingerprint) -> Vec<u8> {
    [SEED_PREFIX, &fp.to_bytes()[..]].concat()
}

/// What [`PartitionStore::admit`] did with a batch.
#[derive(Debug, Default)]
pub struct Admitted {
    /// Entries queued, sorted by fingerprint (the cash of a URL linked
    /// more than once in the batch is the sum of its links').
    pub entries: Vec<AdmitEntry>,
    /// The rank each of `entries` was queued at, in the same order.
    pub ranks: Vec<Rank>,
    /// Entries refused by a budget, and which (not recorded: rediscovery
    /// may admit them once the budget has grown).
    pub over_budget: Vec<(Fingerprint, OverBudget)>,
    /// Domains the operator seeded that a budget refused URLs of, once
    /// each per batch: the operator is told which setting to raise.
    pub seeded_cut: Vec<(String, OverBudget)>,
    /// What the seen filter answered for the batch's distinct URLs.
    pub filter: FilterCounts,
    /// Seen URLs the offer made due at once (a seed for a removed URL, a
    /// sitemap `lastmod` newer than the last fetch): scheduled for refresh
    /// now, their hosts to be woken.
    pub refreshed: Vec<AdmitEntry>,
    /// Queued URLs of dormant hosts moved up by links from other domains
    /// ([`PartitionStore::admit_crediting`]): host, level, new rank.
    pub credited: Vec<(String, Priority, Rank)>,
}

/// What the seen filter (and cache) said of one URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Maybe {
    /// Certainly new.
    No,
    /// Maybe seen, taken as seen (Bloom mode).
    Unchecked,
    /// Seen: the seen cache knows it.
    Cached,
    /// Maybe seen: the store is read to know.
    Read,
}

/// The seen filter's answers for one batch.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FilterCounts {
    /// "Certainly new": no read.
    pub absent: u64,
    /// "Maybe seen", and the store had it (or, in Bloom mode, unchecked).
    pub maybe_seen: u64,
    /// "Maybe seen", and the seen cache knew it: no read
    /// (`dedup/seen_cache.rs`).
    pub cached: u64,
    /// "Maybe seen", but the store did not have it: a false positive that
    /// cost a read (exact mode; their rate tells whether the filter is
    /// sized right).
    pub false_positive: u64,
}

impl PartitionStore {
    /// Admits the entries not seen before: marks them seen and appends them
    /// to their host's queue in one atomic write. Returns the admitted ones
    /// (duplicates within `entries` count once).
    ///
    /// Only entries the seen filter may have seen are looked up (see
    /// `dedup/bloom.rs`); in Bloom mode none are.
    pub fn admit(&self, entries: Vec<AdmitEntry>) -> Result<Admitted, StoreError> {
        self.admit_at(entries, 0)
    }

    /// [`PartitionStore::admit`] at `now_ms`: seen URLs an offer makes due
    /// ([`Admitted::refreshed`]) are due at that time.
    pub fn admit_at(&self, entries: Vec<AdmitEntry>, now_ms: u64) -> Result<Admitted, StoreError> {
        self.admit_crediting(entries, now_ms, &|_| false)
    }

    /// [`PartitionStore::admit_at`], which also credits queued URLs of the
    /// hosts `dormant` says have no actor with the cash of links to them
    /// from other registrable domains found since they were queued
    /// (importance ordering, exact seen set): each such URL moves up its
    /// host's queue ([`Admitted::credited`]).
    ///
    /// Why only dormant hosts: an active host may have taken the entry
    /// (read it into memory) already; moving it to a new key would leave a
    /// copy its completion does not delete, and the URL would be fetched
    /// twice. A dormant host has taken nothing (it passivated with its
    /// queue on disk), and the partition actor that asks is the one that
    /// starts hosts, so none starts between the question and the write.
    /// Measured (`benches/ordering`), the credit matters most where hosts
    /// wait for a slot, which is where they are dormant.
    pub fn admit_crediting(
        &self,
        entries: Vec<AdmitEntry>,
        now_ms: u64,
        dormant: &dyn Fn(&str) -> bool,
    ) -> Result<Admitted, StoreError> {
        let mut book = self.lock_book();
        book.trim();
        let mut cache = self
            .seen_cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let result = self.admit_with(&mut book, &mut cache, entries, now_ms, dormant);
        if result.is_err() {
            // Counts of a batch that was not written must not be kept.
            book.clear();
        }
        result
    }

    fn admit_with(
        &self,
        book: &mut budgets::Book,
        cache: &mut SeenCache,
        mut entries: Vec<AdmitEntry>,
        now_ms: u64,
        dormant: &dyn Fn(&str) -> bool,
    ) -> Result<Admitted, StoreError> {
        let mut batch = WriteBatch::default();
        let budgets = !self.budget.is_unlimited();
        let mut charged = budgets::Charged::default();
        if budgets {
            // Every link counts toward its target's budget, before the
            // batch's duplicates (other referrers of one URL) are dropped;
            // every seed marks its domain, new or seen.
            for entry in &entries {
                self.note_link(book, entry)?;
                self.note_seeded(book, entry, &mut charged)?;
            }
        }
        // Sorted keys let RocksDB's batched multi-get walk each SST once.
        entries.sort_unstable_by_key(|e| e.fp);
        entries.dedup_by(|later, kept| {
            let same = later.fp == kept.fp;
            if same {
                kept.cash = kept.cash.plus(later.cash);
            }
            same
        });
        let maybe: Vec<Maybe> = entries
            .iter()
            .map(|e| self.filter_answer(cache, e))
            .collect();
        let probe: Vec<[u8; 16]> = entries
            .iter()
            .zip(&maybe)
            .filter(|(_, m)| **m == Maybe::Read)
            .map(|(e, _)| e.fp.to_bytes())
            .collect();
        let urls = self.cf(CF_URLS);
        let mut found = self.db.batched_multi_get_cf(urls, &probe, true).into_iter();
        let mut seq = self.next_seq.load(Ordering::Relaxed);
        let mut admitted = Vec::new();
        let mut ranks = Vec::new();
        let mut over_budget = Vec::new();
        let mut seeded_cut = Vec::new();
        let mut filter = FilterCounts::default();
        let mut fresh = Vec::new();
        let mut refreshed = Vec::new();
        let mut credited = Vec::new();
        let mut due = DueChanges::default();
        for (entry, maybe) in entries.into_iter().zip(maybe) {
            let key = entry.fp.to_bytes();
            let (seen, stored) = match maybe {
                Maybe::No => (false, None),
                Maybe::Unchecked | Maybe::Cached => (true, None),
                Maybe::Read => {
                    let hit = found.next().expect("one lookup per probed entry");
                    let hit = hit.map_err(|e| self.rocks(e))?;
                    if hit.is_some() {
                        cache.insert(entry.fp);
                    }
                    (hit.is_some(), hit)
                }
            };
            match (maybe, seen) {
                (Maybe::No, _) => filter.absent += 1,
                (Maybe::Cached, _) => filter.cached += 1,
                (_, true) => filter.maybe_seen += 1,
                (_, false) => filter.false_positive += 1,
            }
            if seen {
                if self.may_credit(&entry, maybe) && dormant(&entry.host) {
                    // A queued URL: nothing for `may_bring_back` to do.
                    if let Some(credit) = self.credit(&mut batch, &entry, stored.as_deref())? {
                        credited.push(credit);
                        continue;
                    }
                }
                if entry.may_bring_back() {
                    let stored = match stored {
                        Some(bytes) => Some(bytes.to_vec()),
                        None => self.get(CF_URLS, &key)?,
                    };
                    let seeded_before =
                        entry.is_seed() && self.seeded_before(&mut batch, &entry)?;
                    if let Some(bytes) = stored {
                        let record = UrlRecord::decode(&bytes).map_err(|e| self.codec(e))?;
                        if lifecycle::due_again(&record, entry.offer(seeded_before)) {
                            self.bring_back(&mut batch, &entry, record, now_ms, &mut due)?;
                            refreshed.push(entry);
                        }
                    }
                }
                continue;
            }
            // Pages are budgeted; sitemaps (a few per host) are not.
            if budgets && entry.queue && entry.kind.is_page() {
                if let Err(over) = self.charge(book, &entry, &mut charged)? {
                    let domain = registrable_domain(&entry.host);
                    if over.is_seeded() && !seeded_cut.iter().any(|(d, _)| d == domain) {
                        seeded_cut.push((domain.to_owned(), over));
                    }
                    over_budget.push((entry.fp, over));
                    continue;
                }
            }
            fresh.push(entry.fp);
            if entry.is_seed() {
                batch.put_cf(self.cf(CF_META), seed_key(entry.fp), []);
            }
            if !entry.queue {
                let record = UrlRecord::new(UrlState::Excluded, entry.depth);
                batch.put_cf(urls, key, record.encode().map_err(|e| self.codec(e))?);
                continue;
            }
            let rank = rank_for(self.ordering, entry.cash);
            let mut record = UrlRecord::new(UrlState::Queued, entry.depth);
            record.slot = rank.known().map(|rank| QueueSlot {
                level: entry.priority.level() as u8,
                rank: rank.steps(),
                seq,
            });
            batch.put_cf(urls, key, record.encode().map_err(|e| self.codec(e))?);
            let value = QueueValue {
                fp: entry.fp,
                depth: entry.depth,
                kind: entry.kind.clone(),
                url: entry.url.clone(),
                provenance: entry.provenance.clone(),
            };
            batch.put_cf(
                self.queue_cf(),
                codec::queue_key(&entry.host, entry.priority, rank, seq),
                value.encode().map_err(|e| self.codec(e))?,
            );
            seq += 1;
            admitted.push(entry);
            ranks.push(rank);
        }
        self.stage_charges(book, &charged, &mut batch)?;
        if batch.is_empty() {
            return Ok(Admitted {
                entries: admitted,
                ranks,
                over_budget,
                seeded_cut,
                filter,
                refreshed,
                credited,
            });
        }
        // Numbers up to `seq` (exclusive) are used: the stored bound must
        // be at least `seq`; moved ahead by a block when it is not.
        let reserve = (seq > self.seq_reserved.load(Ordering::Relaxed)).then(|| seq + SEQ_RESERVE);
        if let Some(bound) = reserve {
            batch.put_cf(self.cf(CF_META), META_SEQ, bound.to_be_bytes());
        }
        let mut queued: HashMap<&str, i64> = HashMap::new();
        for entry in &admitted {
            *queued.entry(entry.host.as_str()).or_default() += 1;
        }
        for (host, delta) in queued {
            batch.merge_cf(self.cf(CF_QUEUED), host, delta.to_be_bytes());
        }
        self.write(batch)?;
        self.next_seq.store(seq, Ordering::Relaxed);
        if let Some(bound) = reserve {
            self.seq_reserved.store(bound, Ordering::Relaxed);
        }
        due.apply(&mut self.due_book());
        // After the write: neither the filter nor the cache ever claims
        // what the store lacks.
        for fp in fresh {
            self.seen.insert(fp);
            cache.insert(fp);
        }
        Ok(Admitted {
            entries: admitted,
            ranks,
            over_budget,
            seeded_cut,
            filter,
            refreshed,
            credited,
        })
    }

    /// Whether `entry`'s URL was given as a seed before this offer; if not,
    /// `batch` notes that it now was (a seed is new once).
    fn seeded_before(
        &self,
        batch: &mut WriteBatch,
        entry: &AdmitEntry,
    ) -> Result<bool, StoreError> {
        let key = seed_key(entry.fp);
        let before = self.get(CF_META, &key)?.is_some();
        if !before {
            batch.put_cf(self.cf(CF_META), key, []);
        }
        Ok(before)
    }

    /// Whether a seen `entry` may credit its queued URL: a page linked from
    /// another registrable domain, under importance ordering, with the
    /// seen set exact (a Bloom answer may be a false positive: no record).
    fn may_credit(&self, entry: &AdmitEntry, maybe: Maybe) -> bool {
        self.ordering == crate::frontier::importance::Ordering::Importance
            && entry.queue
            && entry.kind.is_page()
            && maybe != Maybe::Unchecked
            && entry.foreign_linker().is_some()
    }

    /// Moves `entry`'s queued URL up its host's queue by the entry's cash,
    /// in `batch`: the entry at the record's slot is put at the key of the
    /// richer rank, and the slot follows. Returns the host, the entry's
    /// level (that of its slot) and its new rank; `None`
    /// when the URL is not queued (fetched, in a retry, ...), its record
    /// notes no slot, the slot's key is gone, or the rank would not move.
    /// `stored`: the record, if admission read it already.
    fn credit(
        &self,
        batch: &mut WriteBatch,
        entry: &AdmitEntry,
        stored: Option<&[u8]>,
    ) -> Result<Option<(String, Priority, Rank)>, StoreError> {
        let bytes = match stored {
            Some(bytes) => bytes.to_vec(),
            None => match self.get(CF_URLS, &entry.fp.to_bytes())? {
                Some(bytes) => bytes,
                None => return Ok(None),
            },
        };
        let mut record = UrlRecord::decode(&bytes).map_err(|e| self.codec(e))?;
        let slot = match record.slot {
            Some(slot) if record.state == UrlState::Queued => slot,
            _ => return Ok(None),
        };
        let (priority, old) = (
            Priority::from_level(slot.level),
            Rank::from_steps(slot.rank),
        );
        let rank = Rank::of(old.cash().plus(entry.cash));
        if rank >= old {
            return Ok(None);
        }
        let old_key = codec::queue_key(&entry.host, priority, old, slot.seq);
        let Some(value) = self.get(self.queue.name(), &old_key)? else {
            return Ok(None);
        };
        batch.delete_cf(self.queue_cf(), old_key);
        batch.put_cf(
            self.queue_cf(),
            codec::queue_key(&entry.host, priority, rank, slot.seq),
            value,
        );
        record.slot = Some(QueueSlot {
            rank: rank.steps(),
            ..slot
        });
        let bytes = record.encode().map_err(|e| self.codec(e))?;
        batch.put_cf(self.cf(CF_URLS), entry.fp.to_bytes(), bytes);
        Ok(Some((entry.host.clone(), priority, rank)))
    }

    /// What the seen filter and cache say of `entry`'s URL, and so whether
    /// the store must be read to know.
    fn filter_answer(&self, cache: &mut SeenCache, entry: &AdmitEntry) -> Maybe {
        if !self.seen.maybe_seen(entry.fp) {
            return Maybe::No;
        }
        match self.seen.mode() {
            SeenMode::Bloom => Maybe::Unchecked,
            // An entry that may bring its URL back needs the stored record.
            SeenMode::Exact if !entry.may_bring_back() && cache.contains(entry.fp) => Maybe::Cached,
            SeenMode::Exact => Maybe::Read,
        }
    }

    /// Makes a seen URL due at `now_ms` in `batch`: its record back in the
    /// crawl ([`lifecycle::bring_back`]), its refresh key moved to now.
    fn bring_back(
        &self,
        batch: &mut WriteBatch,
        entry: &AdmitEntry,
        record: UrlRecord,
        now_ms: u64,
        due: &mut DueChanges,
    ) -> Result<(), StoreError> {
        let recrawl = self.cf(CF_RECRAWL);
        if let Some(old) = record.next_due_ms {
            let old_key = codec::recrawl_key(&entry.host, old, entry.fp);
            if self.get(CF_RECRAWL, &old_key)?.is_some() {
                batch.delete_cf(recrawl, old_key);
                due.removed.push(old);
            }
        }
        let record = lifecycle::bring_back(record, now_ms);
        let value = QueueValue {
            fp: entry.fp,
            depth: record.depth,
            kind: entry.kind.clone(),
            url: entry.url.clone(),
            provenance: entry.provenance.clone(),
        };
        batch.put_cf(
            recrawl,
            codec::recrawl_key(&entry.host, now_ms, entry.fp),
            value.encode().map_err(|e| self.codec(e))?,
        );
        due.added.push(now_ms);
        let bytes = record.encode().map_err(|e| self.codec(e))?;
        batch.put_cf(self.cf(CF_URLS), entry.fp.to_bytes(), bytes);
        Ok(())
    }

    /// The record of a URL, if it was ever admitted.
    pub fn url_record(&self, fp: Fingerprint) -> Result<Option<UrlRecord>, StoreError> {
        match self.get(CF_URLS, &fp.to_bytes())? {
            None => Ok(None),
            Some(bytes) => UrlRecord::decode(&bytes)
                .map(Some)
                .map_err(|e| self.codec(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::frontier::budget::BudgetSettings;
    use crate::store::schema::CF_BUDGETS;
    use crate::store::test_support::{entry, open, open_with, pages};
    use crate::store::{SeenSettings, StoreEnv};

    #[test]
    fn an_overfull_filter_costs_reads_in_exact_mode_and_urls_in_bloom_mode() {
        // A filter sized for 10 URLs at 30% holding 2,000: most new URLs
        // look "maybe seen".
        for (mode, all_new_admitted) in [(SeenMode::Exact, true), (SeenMode::Bloom, false)] {
            let dir = tempfile::tempdir().unwrap();
            let store = open_with(dir.path(), mode, 10);
            assert_eq!(
                store.admit(pages(0..2000)).unwrap().entries.len(),
                2000,
                "{mode:?}: an empty filter"
            );
            let outcome = store.admit(pages(2000..3000)).unwrap();
            let admitted = outcome.entries.len();
            assert_eq!(
                admitted == 1000,
                all_new_admitted,
                "{mode:?}: {admitted} of 1000"
            );
            if mode == SeenMode::Exact {
                // Every "maybe" was a false positive, and each is counted.
                let f = outcome.filter;
                assert!(f.false_positive > 0, "{f:?}");
                assert_eq!((f.absent + f.false_positive, f.maybe_seen), (1000, 0));
            }
            assert!(
                store.admit(pages(0..3000)).unwrap().entries.is_empty(),
                "{mode:?}"
            );
        }
    }

    #[test]
    fn the_seen_cache_answers_known_urls_without_a_read_and_stays_exact() {
        let open_cached = |dir: &std::path::Path, cache_urls: usize| {
            let seen = SeenSettings {
                cache_urls,
                ..SeenSettings::default()
            };
            let env = StoreEnv::new(&Config::defaults().storage).with_seen(seen);
            PartitionStore::open(&env, dir, 0).unwrap()
        };
        for cache_urls in [0, 16_384] {
            let dir = tempfile::tempdir().unwrap();
            let store = open_cached(dir.path(), cache_urls);
            assert_eq!(store.admit(pages(0..1000)).unwrap().entries.len(), 1000);
            let again = store.admit(pages(0..1000)).unwrap();
            assert!(again.entries.is_empty(), "{cache_urls}: all seen");
            let f = again.filter;
            assert_eq!(f.cached + f.maybe_seen, 1000, "{cache_urls}: {f:?}");
            if cache_urls == 0 {
                assert_eq!(f.cached, 0, "no cache, every maybe read");
            } else {
                // Admitted URLs were cached after their write; three of
                // them in one two-way set would push one out.
                assert!(f.cached >= 990, "{f:?}");
            }
            // New and known together: exactly the new ones admitted.
            let mixed = store.admit(pages(500..1500)).unwrap();
            let mut admitted: Vec<u32> = mixed
                .entries
                .iter()
                .map(|e| e.url["http://a.test/".len()..].parse().unwrap())
                .collect();
            admitted.sort_unstable();
            assert_eq!(admitted, (1000..1500).collect::<Vec<_>>(), "{cache_urls}");
        }
        // A cache starts empty at open: what it holds was read or written
        // by this process.
        let dir = tempfile::tempdir().unwrap();
        open_cached(dir.path(), 16_384)
            .admit(pages(0..100))
            .unwrap();
        let store = open_cached(dir.path(), 16_384);
        let f = store.admit(pages(0..100)).unwrap().filter;
        assert_eq!(
            (f.cached, f.maybe_seen),
            (0, 100),
            "read once after a reopen"
        );
        let f = store.admit(pages(0..100)).unwrap().filter;
        assert!(f.cached >= 99, "then cached: {f:?}");
    }

    #[test]
    fn links_from_other_domains_move_a_dormant_hosts_queued_url_up_once() {
        use crate::frontier::importance::Cash;
        use crate::store::queue::Completion;
        use crate::store::test_support::open_by_importance;
        let dir = tempfile::tempdir().unwrap();
        let store = open_by_importance(dir.path());
        let link = |url: &str, cash: f32, from: Option<&str>| {
            let mut e = entry(url, "a.test");
            e.cash = Cash::new(cash);
            e.referrer = from.map(str::to_owned);
            e
        };
        let order = |store: &PartitionStore| -> Vec<(String, f32)> {
            let queue = store.host_queue("a.test", 10).unwrap().queued;
            queue
                .into_iter()
                .map(|q| (q.url, q.score.unwrap()))
                .collect()
        };
        let (rich, poor) = ("http://a.test/rich", "http://a.test/poor");
        store
            .admit(vec![link(rich, 0.5, None), link(poor, 0.01, None)])
            .unwrap();
        let dormant = |_: &str| true;
        let active = |_: &str| false;
        // Not moved: a link from the site itself, or a host whose actor
        // may hold the entry.
        let own = store
            .admit_crediting(vec![link(poor, 1.0, Some("a.test"))], 0, &dormant)
            .unwrap();
        let live = store
            .admit_crediting(vec![link(poor, 1.0, Some("b.test"))], 0, &active)
            .unwrap();
        assert!(own.credited.is_empty() && live.credited.is_empty());
        assert_eq!(order(&store)[0].0, rich);
        // Moved: a link from another domain to a dormant host's URL, its
        // cash added to what the URL was queued with.
        let moved = store
            .admit_crediting(vec![link(poor, 1.0, Some("b.test"))], 0, &dormant)
            .unwrap();
        assert!(moved.entries.is_empty(), "nothing new is queued");
        let rank = Rank::of(Cash::new(1.01));
        assert_eq!(
            moved.credited,
            [("a.test".to_owned(), Priority::NORMAL, rank)]
        );
        let listed = order(&store);
        assert_eq!(listed.len(), 2, "moved, not copied: {listed:?}");
        assert_eq!(listed[0].0, poor);
        assert!((listed[0].1 / 1.01 - 1.0).abs() < 0.01, "{listed:?}");
        assert_eq!(store.queued_of("a.test").unwrap(), 2);
        // Durable: after a reopen the slot still finds the entry.
        drop(store);
        let store = open_by_importance(dir.path());
        let again = store
            .admit_crediting(vec![link(poor, 2.0, Some("c.test"))], 0, &dormant)
            .unwrap();
        assert_eq!(again.credited.len(), 1);
        assert!((order(&store)[0].1 / 3.01 - 1.0).abs() < 0.01);
        // Fetched, the URL is credited no more and no entry comes back.
        let taken = store
            .queue_page("a.test", Priority::NORMAL, None, 1)
            .unwrap()
            .remove(0);
        assert_eq!(taken.value.url, poor);
        let record = UrlRecord::new(UrlState::Fetched(200), 1);
        let done = Completion {
            key: taken.key,
            recrawl: false,
            value: taken.value,
            record,
        };
        store.complete(&[done], &[]).unwrap();
        let after = store
            .admit_crediting(vec![link(poor, 8.0, Some("d.test"))], 0, &dormant)
            .unwrap();
        assert!(after.credited.is_empty());
        assert_eq!(order(&store).len(), 1);
        assert_eq!(store.queued_of("a.test").unwrap(), 1);
    }

    #[test]
    fn budgets_hold_across_a_reopen_and_grow_with_linking_domains() {
        let dir = tempfile::tempdir().unwrap();
        let budget = BudgetSettings {
            base_pages: 3,
            pages_per_linking_domain: 2,
            max_pages_per_domain: 0,
            max_urls_per_host: 0,
            seeded_base_pages: 0,
        };
        let open = || {
            let env = StoreEnv::new(&Config::defaults().storage).with_budgets(budget);
            PartitionStore::open(&env, dir.path(), 0).unwrap()
        };
        let farm = |range: std::ops::Range<u32>, referrer: Option<&str>| -> Vec<AdmitEntry> {
            range
                .map(|i| AdmitEntry {
                    referrer: referrer.map(str::to_owned),
                    ..entry(
                        &format!("http://s{i}.farm.test/"),
                        &format!("s{i}.farm.test"),
                    )
                })
                .collect()
        };
        {
            let store = open();
            let outcome = store.admit(farm(0..5, Some("farm.test"))).unwrap();
            assert_eq!(outcome.entries.len(), 3, "self-links earn nothing");
            let reasons: Vec<_> = outcome.over_budget.iter().map(|(_, o)| *o).collect();
            assert_eq!(reasons, [OverBudget::Domain; 2]);
        }
        let store = open();
        assert!(store.admit(farm(5..8, None)).unwrap().entries.is_empty());
        // One outside domain links in: two more pages.
        let outcome = store.admit(farm(8..12, Some("other.test"))).unwrap();
        assert_eq!(outcome.entries.len(), 2);
    }

    #[test]
    fn a_seeded_domain_gets_the_seeded_base_across_a_reopen_and_says_so_when_cut() {
        let dir = tempfile::tempdir().unwrap();
        let budget = BudgetSettings {
            base_pages: 3,
            pages_per_linking_domain: 0,
            max_pages_per_domain: 0,
            max_urls_per_host: 0,
            seeded_base_pages: 6,
        };
        let open = || {
            let env = StoreEnv::new(&Config::defaults().storage).with_budgets(budget);
            PartitionStore::open(&env, dir.path(), 0).unwrap()
        };
        let site = |range: std::ops::Range<u32>, host: &str| -> Vec<AdmitEntry> {
            range
                .map(|i| entry(&format!("http://{host}/{i}"), host))
                .collect()
        };
        {
            let store = open();
            let mut seed = entry("http://www.site.test/", "www.site.test");
            seed.priority = Priority::SEED;
            assert_eq!(store.admit(vec![seed]).unwrap().entries.len(), 1);
            // Another host of the seeded domain shares its budget.
            let outcome = store.admit(site(0..3, "blog.site.test")).unwrap();
            assert_eq!(outcome.entries.len(), 3);
            assert!(outcome.seeded_cut.is_empty());
            // An unseeded domain keeps base_pages.
            let other = store.admit(site(0..5, "other.test")).unwrap();
            assert_eq!(other.entries.len(), 3);
            assert_eq!(other.over_budget[0].1, OverBudget::Domain);
            assert!(other.seeded_cut.is_empty());
        }
        let store = open();
        let outcome = store.admit(site(3..8, "blog.site.test")).unwrap();
        assert_eq!(
            outcome.entries.len(),
            2,
            "1 seed + 3 + 2 = the seeded base of 6"
        );
        let reasons: Vec<_> = outcome.over_budget.iter().map(|(_, o)| *o).collect();
        assert_eq!(reasons, [OverBudget::SeededDomain; 3]);
        assert_eq!(
            outcome.seeded_cut,
            [("site.test".to_owned(), OverBudget::SeededDomain)],
            "named once per batch"
        );
    }

    #[test]
    fn a_batch_stores_its_final_host_count_once() {
        let dir = tempfile::tempdir().unwrap();
        let budget = BudgetSettings {
            max_urls_per_host: 5,
            ..BudgetSettings::from(&Config::defaults().budget)
        };
        let open = || {
            let env = StoreEnv::new(&Config::defaults().storage).with_budgets(budget);
            PartitionStore::open(&env, dir.path(), 0).unwrap()
        };
        {
            let store = open();
            assert_eq!(store.admit(pages(0..3)).unwrap().entries.len(), 3);
            // One put for the three pages' count: the last value, not the
            // first, is what a reopen reads.
            assert_eq!(
                store.memtable_entries(CF_BUDGETS),
                2,
                "one count of the domain, one of the host"
            );
        }
        let store = open();
        let outcome = store.admit(pages(3..10)).unwrap();
        assert_eq!(outcome.entries.len(), 2, "3 stored + 2 = the cap of 5");
        let reasons: Vec<_> = outcome.over_budget.iter().map(|(_, o)| *o).collect();
        assert_eq!(reasons, [OverBudget::Host; 5]);
    }

    #[test]
    fn the_filter_is_rebuilt_from_the_store_at_open() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open_with(dir.path(), SeenMode::Bloom, 100_000);
            assert_eq!(store.admit(pages(0..500)).unwrap().entries.len(), 500);
        }
        // Bloom mode trusts the filter alone: only a rebuilt filter knows
        // the 500 URLs admitted before the reopen.
        let store = open_with(dir.path(), SeenMode::Bloom, 100_000);
        assert!(store.admit(pages(0..500)).unwrap().entries.is_empty());
        assert_eq!(store.admit(pages(500..600)).unwrap().entries.len(), 100);
    }

    #[test]
    fn admit_is_exact_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let batch = vec![
            entry("http://a.test/1", "a.test"),
            entry("http://a.test/2", "a.test"),
            entry("http://a.test/1", "a.test"),
            entry("http://b.test/1", "b.test"),
        ];
        let admitted = store.admit(batch.clone()).unwrap().entries;
        assert_eq!(admitted.len(), 3, "in-batch duplicate counted once");
        assert!(
            store.admit(batch).unwrap().entries.is_empty(),
            "second offer is seen"
        );
        let queued = store.queued_by_host().unwrap();
        assert_eq!(queued["a.test"], 2);
        assert_eq!(queued["b.test"], 1);
        let rec = store
            .url_record(Fingerprint::of("http://a.test/2"))
            .unwrap();
        assert_eq!(rec.map(|r| r.state), Some(UrlState::Queued));
    }

    #[test]
    fn admit_survives_reopen_and_keeps_sequence() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = open(dir.path());
            store
                .admit(vec![entry("http://a.test/1", "a.test")])
                .unwrap();
        }
        let store = open(dir.path());
        assert!(store
            .admit(vec![entry("http://a.test/1", "a.test")])
            .unwrap()
            .entries
            .is_empty());
        store
            .admit(vec![entry("http://a.test/2", "a.test")])
            .unwrap();
        let page = store
            .queue_page("a.test", Priority::NORMAL, None, 10)
            .unwrap();
        let urls: Vec<_> = page.iter().map(|e| e.value.url.as_str()).collect();
        assert_eq!(
            urls,
            ["http://a.test/1", "http://a.test/2"],
            "admission order kept"
        );
    }

    /// The bound stored for the queue's sequence: moved a block ahead only
    /// when the numbers in use reach it, and where a reopened store goes on.
    #[test]
    fn the_sequence_bound_moves_by_blocks_and_a_reopen_continues_above_it() {
        let dir = tempfile::tempdir().unwrap();
        let stored = |store: &PartitionStore| {
            let bytes = store.get(CF_META, META_SEQ).unwrap().unwrap();
            u64::from_be_bytes(bytes.try_into().unwrap())
        };
        let batch = |from: u64, n: u64| -> Vec<AdmitEntry> {
            (from..from + n)
                .map(|i| entry(&format!("http://a.test/{i}"), "a.test"))
                .collect()
        };
        {
            let store = open(dir.path());
            store.admit(batch(0, 1)).unwrap();
            assert_eq!(stored(&store), 1 + SEQ_RESERVE, "a block reserved");
            store.admit(batch(1, SEQ_RESERVE)).unwrap();
            assert_eq!(
                stored(&store),
                1 + SEQ_RESERVE,
                "numbers up to the bound need no write"
            );
            store.admit(batch(1 + SEQ_RESERVE, 1)).unwrap();
            assert_eq!(
                stored(&store),
                2 + 2 * SEQ_RESERVE,
                "past the bound: the next block"
            );
        }
        let store = open(dir.path());
        store.admit(batch(2 + SEQ_RESERVE, 1)).unwrap();
        let page = store
            .queue_page("a.test", Priority::NORMAL, None, usize::MAX)
            .unwrap();
        assert_eq!(page.len() as u64, 3 + SEQ_RESERVE);
        let last = page.last().map(|e| e.value.url.as_str());
        let want = format!("http://a.test/{}", 2 + SEQ_RESERVE);
        assert_eq!(
            last,
            Some(want.as_str()),
            "admitted after the reopen, queued last"
        );
        let keys: Vec<_> = page.iter().map(|e| e.key.clone()).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(keys, sorted, "one key per entry, in admission order");
    }
}
