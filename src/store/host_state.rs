//! A host's durable state (robots.txt fetches and the politeness
//! schedule): loaded when its actor activates, saved when it passivates.

use std::collections::BTreeMap;

use rocksdb::WriteBatch;
use serde::{Deserialize, Serialize};

use super::codec;
use super::schema::{CF_HOSTS, CF_SCHEDULES};
use super::{PartitionStore, StoreError};
use crate::politeness::{Hold, Schedule};
use crate::robots::{RobotsRecord, RobotsRetry};

/// Durable state of a host: loaded when its actor activates, saved when it
/// passivates (the schedule also with every completion).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostState {
    /// robots.txt fetches by origin key (`scheme://host:port`).
    pub robots: BTreeMap<String, RobotsRecord>,
    /// The politeness schedule, if the host was ever fetched from.
    pub schedule: Option<Schedule>,
    /// Tries so far of URLs still queued to be tried again, by URL
    /// fingerprint: `(failures, throttled answers)`. Saved when the host
    /// passivates, so a host that passivates between tries still gives a
    /// URL up after `max_attempts` (stored with the schedule).
    #[serde(default)]
    pub attempts: Vec<(u128, u32, u32)>,
    /// The address the host was last reached at, so per-IP politeness
    /// applies from a revived host's first request (stored with the
    /// schedule).
    #[serde(default)]
    pub ip: Option<std::net::IpAddr>,
    /// The requests the host may have on the wire ([`Hold`]): written on
    /// its own before each request leaves ([`PartitionStore::hold_host`]),
    /// kept by saves made while one is out, removed by saves made with
    /// none out. Under its own key, so the completions that rewrite the
    /// schedule never lower it.
    #[serde(default)]
    pub hold: Option<Hold>,
}

impl HostState {
    /// When the host may next be asked (Unix ms, on the clock that saved
    /// it): after its schedule's delay, any parking, and the deadline of
    /// any request it may still have out; 0 if nothing holds it.
    pub fn next_request_ms(&self) -> u64 {
        let schedule = self
            .schedule
            .map_or(0, |s| s.next_allowed_ms.max(s.parked_until_ms));
        schedule.max(self.hold.map_or(0, |h| h.until_ms))
    }
}

impl PartitionStore {
    /// The saved state of `host` (empty if it has none). Reads the JSON of
    /// earlier releases too (see `codec.rs`).
    pub fn host_state(&self, host: &str) -> Result<HostState, StoreError> {
        let mut robots = match self.get(CF_HOSTS, host.as_bytes())? {
            None => BTreeMap::new(),
            Some(bytes) => codec::decode_robots(&bytes).map_err(|e| self.codec(e))?,
        };
        let schedule = match self.get(CF_SCHEDULES, host.as_bytes())? {
            None => None,
            Some(bytes) => Some(codec::decode_schedule(&bytes).map_err(|e| self.codec(e))?),
        };
        let memory = match self.get(CF_SCHEDULES, &codec::memory_key(host))? {
            None => codec::HostMemory::default(),
            Some(bytes) => codec::decode_memory(&bytes).map_err(|e| self.codec(e))?,
        };
        for (origin, attempts, at_ms) in memory.robots_retry {
            if let Some(record) = robots.get_mut(&origin) {
                record.retry = Some(RobotsRetry { attempts, at_ms });
            }
        }
        let hold = match self.get(CF_SCHEDULES, &codec::hold_key(host))? {
            None => None,
            Some(bytes) => Some(codec::decode_hold(&bytes).map_err(|e| self.codec(e))?),
        };
        Ok(HostState {
            robots,
            schedule,
            attempts: memory.attempts,
            ip: memory.ip,
            hold,
        })
    }

    /// Adds `host`'s hold to `batch`: a request is about to leave (see
    /// [`HostState::hold`]).
    pub fn hold_host(
        &self,
        batch: &mut WriteBatch,
        host: &str,
        hold: &Hold,
    ) -> Result<(), StoreError> {
        let bytes = codec::encode_hold(hold).map_err(|e| self.codec(e))?;
        batch.put_cf(self.cf(CF_SCHEDULES), codec::hold_key(host), bytes);
        Ok(())
    }

    /// Saves the state of `host` in one write.
    pub fn save_host_state(&self, host: &str, state: &HostState) -> Result<(), StoreError> {
        self.save_host_states([(host, state)])
    }

    /// Saves the states of several hosts in one write: a partition's hosts
    /// at a drain, one WAL write instead of one per host (~30 µs each; a
    /// stopping node of 500 hosts spent ~15 ms on them).
    pub fn save_host_states<'a>(
        &self,
        states: impl IntoIterator<Item = (&'a str, &'a HostState)>,
    ) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for (host, state) in states {
            self.put_host_state(&mut batch, host, state)?;
        }
        if batch.is_empty() {
            return Ok(());
        }
        self.write(batch)
    }

    /// Adds the writes of `host`'s state to `batch`.
    pub(super) fn put_host_state(
        &self,
        batch: &mut WriteBatch,
        host: &str,
        state: &HostState,
    ) -> Result<(), StoreError> {
        let robots = codec::encode_robots(&state.robots).map_err(|e| self.codec(e))?;
        batch.put_cf(self.cf(CF_HOSTS), host.as_bytes(), robots);
        if let Some(schedule) = &state.schedule {
            let bytes = codec::encode_schedule(schedule).map_err(|e| self.codec(e))?;
            batch.put_cf(self.cf(CF_SCHEDULES), host.as_bytes(), bytes);
        }
        let memory = codec::HostMemory {
            attempts: state.attempts.clone(),
            ip: state.ip,
            robots_retry: state
                .robots
                .iter()
                .filter_map(|(origin, r)| r.retry.map(|t| (origin.clone(), t.attempts, t.at_ms)))
                .collect(),
        };
        let bytes = codec::encode_memory(&memory).map_err(|e| self.codec(e))?;
        batch.put_cf(self.cf(CF_SCHEDULES), codec::memory_key(host), bytes);
        match &state.hold {
            Some(hold) => self.hold_host(batch, host, hold)?,
            None => batch.delete_cf(self.cf(CF_SCHEDULES), codec::hold_key(host)),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::test_support::open;

    #[test]
    fn host_state_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        assert_eq!(store.host_state("a.test").unwrap(), HostState::default());
        let mut state = HostState {
            attempts: vec![(7, 2, 1)],
            ip: Some("127.0.0.9".parse().unwrap()),
            schedule: Some(Schedule {
                next_allowed_ms: 42,
                ..Schedule::default()
            }),
            ..HostState::default()
        };
        state.robots.insert(
            "http://a.test:80".into(),
            RobotsRecord {
                retry: None,
                status: Some(200),
                fetched_at_ms: 1,
                body: b"User-agent: *\nDisallow: /x".to_vec(),
            },
        );
        state.robots.insert(
            "http://a.test:8080".into(),
            RobotsRecord {
                retry: Some(RobotsRetry {
                    attempts: 3,
                    at_ms: 99,
                }),
                status: None,
                fetched_at_ms: 5,
                body: Vec::new(),
            },
        );
        store.save_host_state("a.test", &state).unwrap();
        assert_eq!(store.host_state("a.test").unwrap(), state);
        // Completions rewrite the schedule; what the host remembers beside
        // it (tries, address, robots.txt retries) stays.
        let later = Schedule {
            next_allowed_ms: 77,
            ..Schedule::default()
        };
        store.complete(&[], &[("a.test", &later)]).unwrap();
        let reread = store.host_state("a.test").unwrap();
        assert_eq!(reread.schedule, Some(later));
        assert_eq!(
            (reread.attempts, reread.ip, reread.robots),
            (state.attempts, state.ip, state.robots)
        );
    }

    #[test]
    fn a_hold_outlives_the_schedules_completions_write_and_a_quiet_save_clears_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let hold = Hold {
            sent_ms: 1_000,
            until_ms: 31_000,
        };
        // Written on its own before the request leaves.
        let mut batch = WriteBatch::default();
        store.hold_host(&mut batch, "a.test", &hold).unwrap();
        store.write(batch).unwrap();
        assert_eq!(store.host_state("a.test").unwrap().hold, Some(hold));
        // A completion batched earlier rewrites the schedule, not the hold.
        let schedule = Schedule {
            next_allowed_ms: 5,
            ..Schedule::default()
        };
        store.complete(&[], &[("a.test", &schedule)]).unwrap();
        assert_eq!(store.host_state("a.test").unwrap().hold, Some(hold));
        // A save made while the request runs keeps it; one made with none
        // out (a passivation, a drain) removes it.
        let running = HostState {
            hold: Some(hold),
            ..HostState::default()
        };
        store.save_host_state("a.test", &running).unwrap();
        assert_eq!(store.host_state("a.test").unwrap().hold, Some(hold));
        store
            .save_host_state("a.test", &HostState::default())
            .unwrap();
        assert_eq!(store.host_state("a.test").unwrap().hold, None);
    }

    #[test]
    fn several_hosts_states_are_saved_in_one_write() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let state = |n: u32| HostState {
            attempts: vec![(u128::from(n), 1, n)],
            schedule: Some(Schedule {
                next_allowed_ms: u64::from(n),
                ..Schedule::default()
            }),
            ..HostState::default()
        };
        let (a, b) = (state(11), state(22));
        store.save_host_states([]).unwrap();
        store
            .save_host_states([("a.test", &a), ("b.test", &b)])
            .unwrap();
        assert_eq!(store.host_state("a.test").unwrap(), a);
        assert_eq!(store.host_state("b.test").unwrap(), b);
        assert_eq!(store.host_state("c.test").unwrap(), HostState::default());
    }
}
