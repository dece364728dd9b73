//! Which of a partition's hosts are active, and when a dormant one is
//! started: the partition's scheduling decisions, with no I/O, on the
//! times it is given (as the host machine is).
//!
//! A host with work is *active* (it has an actor, which holds its
//! politeness timer) or *dormant* in the [`DueIndex`]. The partition actor
//! tells an [`Activation`] what happened (work arrived, a host went idle
//! or died, an operator blocked one, the partition drains) and carries out
//! the [`Step`]s it answers: start a host's actor, wake an active one, look
//! again at a time. The rules in one place:
//!
//! - **Generations.** Every start and every wake takes the next number of
//!   one counter; a host's idle report counts only if it carries the
//!   generation of its last start or wake (new work came meanwhile, or the
//!   report is from an earlier actor of the same host: refused, the host
//!   stays).
//! - **Activation** runs earliest-due first, [`ACTIVATE_AHEAD_MS`] early
//!   (among hosts already due, the one with the most important work
//!   first, aged by how long it has been due: [`DueIndex`])
//!   (less when hosts passivate sooner: [`Activation::with_lead`])
//!   (so the actor is up and has read its queue when the moment comes),
//!   while the node's [`ActiveSlots`] have room; when they have none it
//!   looks again after [`SLOT_POLL_MS`]. A draining partition starts
//!   nobody. A blocked host found due is held back until unblocked.
//! - **The hold.** After a restart (the partition's actor failed) or a
//!   takeover, nothing dormant comes due before the hold (`hold_until_ms`):
//!   requests of the former owner or actor may still be on the wire. A
//!   host whose actor died comes due only once its last request could have
//!   ended (`request_timeout`), and starts owing its last delay again
//!   (`crashed`), as does a host an operator stopped.
//! - **Refreshes.** A dormant host whose due time is its next refresh, not
//!   a politeness wait, becomes due at once when new work arrives.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use super::due::{ActiveSlots, ColdTier, DueIndex, Marks, Moves, Window};
use super::host::RECRAWL_BIT;
use super::importance::Rank;

/// A dormant host is started this long before it comes due.
pub const ACTIVATE_AHEAD_MS: u64 = 200;
/// With due hosts and no free slot, the partition looks again after this.
pub const SLOT_POLL_MS: u64 = 20;

/// What the partition actor does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Start `host`'s actor at `generation` (a slot is taken for it);
    /// `crashed`: it owes its last delay again first.
    Start {
        host: String,
        generation: u64,
        crashed: bool,
    },
    /// Tell active `host` that work arrived at `levels`.
    Wake {
        host: String,
        generation: u64,
        levels: u8,
    },
    /// Call [`Activation::activate`] again at `at_ms` (Unix ms).
    Timer { at_ms: u64 },
    /// Ask active `host` (started or woken at `generation`) to give its
    /// slot up: hosts wait for one ([`Activation::with_cycle`]).
    Yield { host: String, generation: u64 },
}

/// One partition's active and dormant hosts.
#[derive(Debug)]
pub struct Activation {
    /// Dormant hosts (their marks: refresh-waiting, owing their delay).
    due: DueIndex,
    /// Blocked hosts with work left: started again on an unblock.
    held_back: HashSet<String>,
    /// Active hosts, by the generation of their last start or wake.
    active: HashMap<String, u64>,
    generations: u64,
    /// Held-back hosts to be started owing their last delay (once: their
    /// next start, not every start of this life); a dormant host in the
    /// index carries [`Marks::owes_delay`] instead, so this set does not
    /// grow with the hosts a crashed partition opens with.
    restarted: HashSet<String>,
    /// The partition's last life did not end cleanly: every host it
    /// opens with owes its last delay at its first start.
    crashed: bool,
    /// Nothing dormant comes due before this (activation lead included).
    hold_ms: u64,
    request_timeout: Duration,
    /// How early a dormant host is started ([`Activation::with_lead`]).
    lead_ms: u64,
    draining: bool,
    slots: Arc<ActiveSlots>,
    /// When each active host started (Unix ms), for its cycle.
    started: HashMap<String, u64>,
    /// Active hosts asked for their slot, at the generation asked.
    asked: HashMap<String, u64>,
    /// `[frontier] host_cycle` in ms (0: a host keeps its slot until it
    /// has nothing to do soon).
    cycle_ms: u64,
}

impl Activation {
    /// A partition with no host yet, taking slots from `slots`, its hosts
    /// held until `hold_until_ms` (0: not held).
    pub fn new(slots: Arc<ActiveSlots>, hold_until_ms: u64, request_timeout: Duration) -> Self {
        Activation {
            due: DueIndex::new(),
            held_back: HashSet::new(),
            active: HashMap::new(),
            generations: 0,
            restarted: HashSet::new(),
            crashed: false,
            hold_ms: match hold_until_ms {
                0 => 0,
                ms => ms + ACTIVATE_AHEAD_MS,
            },
            request_timeout,
            draining: false,
            slots,
            lead_ms: ACTIVATE_AHEAD_MS,
            started: HashMap::new(),
            asked: HashMap::new(),
            cycle_ms: 0,
        }
    }

    /// Hosts wait for a slot while this partition's active hosts hold
    /// theirs: the one that started longest ago, once it has held its
    /// slot for `cycle` (`[frontier] host_cycle`; zero never asks), is
    /// asked to give it up ([`Step::Yield`]), one per look. This is the
    /// per-host budget of a crawl cycle: a site too large to finish in
    /// one turn crawls for a cycle, then the due hosts holding the most
    /// important work go first (it rejoins them, ranked by its best URL).
    pub fn with_cycle(mut self, cycle: Duration) -> Self {
        self.cycle_ms = cycle.as_millis() as u64;
        self
    }

    /// Starts dormant hosts at most half of `passivate_after` early
    /// ([`ACTIVATE_AHEAD_MS`] at most): a host started further ahead than
    /// it passivates would passivate again at once, and since its schedule
    /// is persisted rounded up (never early), each round trip pushed its
    /// due time on by a millisecond: with `passivate_after = "100ms"` a
    /// host never asked at all.
    pub fn with_lead(mut self, passivate_after: Duration) -> Self {
        let lead = ACTIVATE_AHEAD_MS.min(passivate_after.as_millis() as u64 / 2);
        if self.hold_ms > 0 {
            self.hold_ms = self.hold_ms - self.lead_ms + lead;
        }
        self.lead_ms = lead;
        self
    }

    /// How early a dormant host is started.
    pub fn lead_ms(&self) -> u64 {
        self.lead_ms
    }

    /// Keeps `window` of the dormant hosts in memory and the rest in
    /// `tier` (the partition's store): memory bounded by the window, not
    /// by the hosts the partition knows (see [`DueIndex`]). Before
    /// [`Activation::open`].
    pub fn with_due_tier(mut self, tier: Box<dyn ColdTier>, window: Window) -> Self {
        self.due = DueIndex::with_tier(tier, window);
        self
    }

    /// The partition's last life did not end cleanly (a crash, a kill,
    /// a takeover as after one): each host [`Activation::open`] finds owes
    /// its last delay at its *first* start. Only then: a host started
    /// again later in this life (after a passivation) owes nothing more,
    /// or a host whose delay is longer than the passivation threshold
    /// would be pushed back at every start and never fetch again.
    pub fn after_crash(mut self) -> Self {
        self.crashed = true;
        self
    }

    /// Fills the index from the store at open: every host with queued
    /// work, due when it passivated (`due_times`) or at once, and every
    /// host with scheduled refreshes, due at its first. Starts nobody.
    pub fn open<'a>(
        &mut self,
        queued: impl IntoIterator<Item = &'a str>,
        due_times: &HashMap<String, u64>,
        refreshes: impl IntoIterator<Item = (&'a String, &'a u64)>,
    ) {
        // After a crash a request (a refresh too) may have been in flight.
        let owes_delay = self.crashed;
        let hold = self.hold_ms;
        let mut entries: HashMap<&str, (u64, Marks)> = queued
            .into_iter()
            .map(|host| {
                let at = due_times.get(host).copied().unwrap_or(0);
                let marks = Marks {
                    refresh: false,
                    owes_delay,
                };
                (host, (at.max(hold), marks))
            })
            .collect();
        for (host, first) in refreshes {
            // A host with queued work comes due at the earlier of the two
            // (its politeness still applies once it is active); one with
            // refreshes alone waits for its first.
            entries
                .entry(host.as_str())
                .and_modify(|(at, _)| *at = (*at).min(*first).max(hold))
                .or_insert((
                    (*first).max(hold),
                    Marks {
                        refresh: true,
                        owes_delay,
                    },
                ));
        }
        let entries = entries
            .into_iter()
            .map(|(host, (at, marks))| (host, at, marks))
            .collect();
        self.due.load(entries);
    }

    /// Work arrived for `host` at `levels`. An active host is woken (the
    /// step); a dormant one waiting in the index keeps its place (it may
    /// not be contacted earlier) unless it waits for a refresh or
    /// refreshes were made due; any other becomes due now, or at the end
    /// of the partition's hold if that is later (then
    /// [`Activation::activate`]). A blocked host is left alone.
    pub fn wake(&mut self, host: &str, levels: u8, blocked: bool) -> Option<Step> {
        if blocked {
            return None;
        }
        if self.active.contains_key(host) {
            let generation = self.next_generation();
            self.active.insert(host.to_owned(), generation);
            return Some(Step::Wake {
                host: host.to_owned(),
                generation,
                levels,
            });
        }
        let waits_for_refresh = self.due.unmark_refresh(host);
        // "At once" is never before the partition's hold: a host that had
        // no work at a takeover may still have a request of the former
        // owner on the wire.
        let now = self.hold_ms;
        match self.due.due_ms(host) {
            None => self.due.insert(host, now),
            Some(due) if due > now && (waits_for_refresh || levels & RECRAWL_BIT != 0) => {
                self.due.insert(host, now)
            }
            Some(_) => {}
        }
        None
    }

    /// Starts the hosts due by `now_ms` (plus the lead) while slots are
    /// free, earliest first; ends with when to look again, if ever.
    pub fn activate(&mut self, now_ms: u64, blocked: impl Fn(&str) -> bool) -> Vec<Step> {
        let mut steps = Vec::new();
        if self.draining {
            return steps;
        }
        loop {
            let Some(next) = self.due.next_due_ms() else {
                return steps;
            };
            if next > now_ms + self.lead_ms {
                steps.push(Step::Timer {
                    at_ms: next - self.lead_ms,
                });
                return steps;
            }
            if !self.slots.try_take() {
                // Hosts waiting for a slot age from now on.
                self.due.find_due(now_ms + self.lead_ms);
                steps.extend(self.ask_for_a_slot(now_ms));
                steps.push(Step::Timer {
                    at_ms: now_ms + SLOT_POLL_MS,
                });
                return steps;
            }
            let Some((host, marks)) = self.due.pop_due(now_ms + self.lead_ms) else {
                self.slots.give_back();
                return steps;
            };
            if blocked(&host) {
                // Its refreshes wait for an unblock, and its debt.
                self.slots.give_back();
                if marks.owes_delay {
                    self.restarted.insert(host.clone());
                }
                self.held_back.insert(host);
                continue;
            }
            let generation = self.next_generation();
            let crashed = self.restarted.remove(&host) | marks.owes_delay;
            self.active.insert(host.clone(), generation);
            self.started.insert(host.clone(), now_ms);
            steps.push(Step::Start {
                host,
                generation,
                crashed,
            });
        }
    }

    /// The active host to ask for its slot, if one has held it for a
    /// cycle (see [`Activation::with_cycle`]).
    fn ask_for_a_slot(&mut self, now_ms: u64) -> Option<Step> {
        if self.cycle_ms == 0 {
            return None;
        }
        let (host, generation) = self
            .active
            .iter()
            .filter(|(host, generation)| self.asked.get(*host) != Some(generation))
            .filter_map(|(host, generation)| {
                let started = *self.started.get(host)?;
                (now_ms >= started + self.cycle_ms).then_some((started, host, *generation))
            })
            .min()
            .map(|(_, host, generation)| (host.clone(), generation))?;
        self.asked.insert(host.clone(), generation);
        Some(Step::Yield { host, generation })
    }

    /// Forgets what is kept of an active host that is no longer.
    fn forget_active(&mut self, host: &str) {
        self.started.remove(host);
        self.asked.remove(host);
    }

    /// Active `host` reports itself idle at `generation`: whether the
    /// report counts (then it is no longer active and its slot is free;
    /// [`Activation::due_at`] enters it in the index if it has work).
    pub fn idle(&mut self, host: &str, generation: u64) -> bool {
        if self.active.get(host) != Some(&generation) {
            return false;
        }
        self.active.remove(host);
        self.forget_active(host);
        self.slots.give_back();
        true
    }

    /// `host`'s best queued URL is at least as important as `rank`: its
    /// place among due dormant hosts (see [`DueIndex`]); nothing for a
    /// host that is not dormant.
    pub fn prefer(&mut self, host: &str, rank: Rank) {
        self.due.prefer(host, rank);
    }

    /// Dormant `host`'s best queued URL is at `rank` (it passivated).
    pub fn rank_as(&mut self, host: &str, rank: Rank) {
        self.due.set_rank(host, rank);
    }

    /// `host` is dormant with work due at `due_ms`; `refresh`: that is its
    /// next refresh, not a politeness wait.
    pub fn due_at(&mut self, host: &str, due_ms: u64, refresh: bool) {
        let marks = Marks {
            refresh,
            owes_delay: false,
        };
        self.due.insert_marked(host, due_ms, marks);
    }

    /// `host`'s actor died at `now_ms`: it comes due once a request it
    /// may have left on the wire has ended, and starts owing its last
    /// delay. Whether it was active.
    pub fn died(&mut self, host: &str, now_ms: u64) -> bool {
        if self.active.remove(host).is_none() {
            return false;
        }
        self.forget_active(host);
        self.slots.give_back();
        let hold = self.request_timeout.as_millis() as u64 + self.lead_ms;
        let marks = Marks {
            refresh: false,
            owes_delay: true,
        };
        self.due.insert_marked(host, now_ms + hold, marks);
        true
    }

    /// An operator blocked `host`: no longer active (it starts owing its
    /// last delay when unblocked) nor due; held back. Whether it was
    /// active.
    pub fn block(&mut self, host: &str) -> bool {
        let was_active = self.active.remove(host).is_some();
        self.forget_active(host);
        let owed = self
            .due
            .take(host)
            .is_some_and(|(_, marks)| marks.owes_delay);
        if was_active || owed {
            self.restarted.insert(host.to_owned());
        }
        if was_active {
            self.slots.give_back();
        }
        self.held_back.insert(host.to_owned());
        was_active
    }

    /// An operator unblocked `host`: no longer held back (wake it).
    pub fn unblock(&mut self, host: &str) {
        self.held_back.remove(host);
    }

    /// No new host starts; the active ones drain.
    pub fn drain(&mut self) {
        self.draining = true;
    }

    /// The partition stops: every active host's slot is given back; the
    /// hosts that were active.
    pub fn retire(&mut self) -> Vec<String> {
        let hosts: Vec<String> = self.active.drain().map(|(h, _)| h).collect();
        for _ in &hosts {
            self.slots.give_back();
        }
        hosts
    }

    /// Whether `host` is active.
    pub fn is_active(&self, host: &str) -> bool {
        self.active.contains_key(host)
    }

    /// Every host it knows of: active, dormant (in memory or the store's
    /// tier; a tier that cannot be read gives what was read), held back.
    pub fn hosts(&self) -> Vec<String> {
        let mut hosts: Vec<String> = self.active.keys().cloned().collect();
        let listed = self.due.each(|host, _, _| hosts.push(host.to_owned()));
        if let Err(err) = listed {
            tracing::warn!(%err, "cannot list every dormant host");
        }
        hosts.extend(self.held_back.iter().cloned());
        hosts
    }

    /// Dormant hosts that are neither active nor due: held back.
    pub fn held_back(&self) -> impl Iterator<Item = &str> {
        self.held_back.iter().map(String::as_str)
    }

    /// Hosts without an actor and when each comes due: due (in memory or
    /// in the store's tier), or held back (`None`). A tier that cannot be
    /// read lists what was read.
    pub fn dormant_hosts(&self) -> Vec<(String, Option<u64>)> {
        let mut hosts = Vec::new();
        let listed = self.due.each(|host, due_ms, _| {
            if !self.active.contains_key(host) {
                hosts.push((host.to_owned(), Some(due_ms)));
            }
        });
        if let Err(err) = listed {
            tracing::warn!(%err, "cannot list every dormant host");
        }
        hosts.extend(self.held_back().map(|h| (h.to_owned(), None)));
        hosts
    }

    /// When each dormant host that waits on politeness (not for its next
    /// refresh) comes due (Unix ms): what a hand-back owes for them
    /// ([`crate::politeness::handover`]). If the tier cannot be read,
    /// what they owe is not known: `u64::MAX`, the most a hand-back owes
    /// once clamped.
    pub fn politeness_dues(&self) -> Vec<u64> {
        let mut dues = Vec::new();
        let read = self.due.each(|host, due_ms, marks| {
            if !self.active.contains_key(host) && !marks.refresh {
                dues.push(due_ms);
            }
        });
        if let Err(err) = read {
            tracing::error!(%err, "cannot read the dormant hosts' due times");
            dues.push(u64::MAX);
        }
        dues
    }

    /// When dormant `host` comes due, if it does.
    pub fn due_ms(&self, host: &str) -> Option<u64> {
        self.due.due_ms(host)
    }

    /// Active hosts.
    pub fn active_len(&self) -> usize {
        self.active.len()
    }

    /// Dormant hosts moved between memory and the store so far.
    pub fn due_moves(&self) -> Moves {
        self.due.moves()
    }

    /// Dormant hosts with work.
    pub fn due_len(&self) -> usize {
        self.due.len()
    }

    /// Dormant hosts waiting for a refresh.
    pub fn refresh_len(&self) -> usize {
        self.due.refresh_len()
    }

    /// Draining.
    pub fn is_draining(&self) -> bool {
        self.draining
    }

    fn next_generation(&mut self) -> u64 {
        self.generations += 1;
        self.generations
    }
}

#[cfg(test)]
mod tests;
