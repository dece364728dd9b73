//! An operator's slow-down of one host (`PUT /api/v1/hosts/{host}/politeness`):
//! a larger floor between requests, a lower in-flight limit, or both.
//!
//! It can only slow a host: the effective policy takes the larger of the
//! configured and the requested minimum delay and the smaller of the two
//! in-flight limits, and robots.txt's Crawl-delay, Retry-After and backoff
//! still apply on top ([`super::Policy::delay_after`] takes the largest of
//! them). So no override makes trawl faster than its configuration or a
//! site's robots.txt allows. A slow-down is kept in the store of the
//! host's partition (it survives restarts and moves with the partition).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::Policy;

/// The longest minimum delay an operator may ask for: a day (a host that
/// should wait longer is better blocked).
pub const MAX_MIN_DELAY_MS: u64 = 86_400_000;

/// The largest in-flight limit that can be asked for (it can only lower
/// the configured one anyway).
pub const MAX_IN_FLIGHT: u32 = 1_000;

/// An operator's slow-down of one host. `None` fields leave the
/// configuration's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Slowdown {
    /// Floor between a response and the next request, in milliseconds.
    pub min_delay_ms: Option<u64>,
    /// Requests in flight at once (at least 1).
    pub max_in_flight: Option<u32>,
}

/// A slow-down that cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadSlowdown {
    /// Neither field given.
    #[error("give min_delay_ms, max_in_flight or both")]
    Empty,
    /// The delay is over a day.
    #[error("min_delay_ms must be at most {MAX_MIN_DELAY_MS} (a day), got {0}")]
    DelayTooLong(u64),
    /// The limit is 0 or too large.
    #[error("max_in_flight must be 1 to {MAX_IN_FLIGHT}, got {0}")]
    InFlight(u32),
}

impl Slowdown {
    /// Checks the values an operator gave.
    pub fn check(&self) -> Result<(), BadSlowdown> {
        if self.min_delay_ms.is_none() && self.max_in_flight.is_none() {
            return Err(BadSlowdown::Empty);
        }
        if let Some(ms) = self.min_delay_ms.filter(|&ms| ms > MAX_MIN_DELAY_MS) {
            return Err(BadSlowdown::DelayTooLong(ms));
        }
        if let Some(n) = self.max_in_flight.filter(|&n| n == 0 || n > MAX_IN_FLIGHT) {
            return Err(BadSlowdown::InFlight(n));
        }
        Ok(())
    }
}

impl Policy {
    /// This policy slowed by `slowdown`, if any.
    pub fn slowed_by(&self, slowdown: Option<&Slowdown>) -> Policy {
        slowdown.map_or_else(|| self.clone(), |s| self.slowed(s))
    }

    /// This policy slowed by `slowdown`: never faster than `self`.
    pub fn slowed(&self, slowdown: &Slowdown) -> Policy {
        let mut policy = self.clone();
        if let Some(ms) = slowdown.min_delay_ms {
            policy.min_delay = policy.min_delay.max(Duration::from_millis(ms));
        }
        if let Some(n) = slowdown.max_in_flight {
            policy.max_in_flight = policy.max_in_flight.min(n.max(1));
        }
        policy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Policy {
        Policy::simple(Duration::from_millis(500), 2.0, 4)
    }

    #[test]
    fn a_slowdown_only_ever_slows() {
        let faster = Slowdown {
            min_delay_ms: Some(10),
            max_in_flight: Some(8),
        };
        assert_eq!(base().slowed(&faster), base());
        let slower = Slowdown {
            min_delay_ms: Some(3_000),
            max_in_flight: Some(1),
        };
        let policy = base().slowed(&slower);
        assert_eq!(policy.min_delay, Duration::from_secs(3));
        assert_eq!(policy.max_in_flight, 1);
        assert_eq!(base().slowed(&Slowdown::default()), base());
    }

    #[test]
    fn crawl_delay_still_wins_over_a_smaller_slowdown() {
        let policy = base().slowed(&Slowdown {
            min_delay_ms: Some(1_000),
            max_in_flight: None,
        });
        let crawl_delay = Some(Duration::from_secs(5));
        assert_eq!(
            policy.delay_after(Duration::from_millis(1), crawl_delay),
            Duration::from_secs(5)
        );
        assert_eq!(
            policy.delay_after(Duration::from_millis(1), None),
            Duration::from_secs(1)
        );
    }

    #[test]
    fn bad_slowdowns_are_refused_with_the_reason() {
        assert_eq!(Slowdown::default().check(), Err(BadSlowdown::Empty));
        let zero = Slowdown {
            max_in_flight: Some(0),
            ..Default::default()
        };
        assert_eq!(zero.check(), Err(BadSlowdown::InFlight(0)));
        let long = Slowdown {
            min_delay_ms: Some(MAX_MIN_DELAY_MS + 1),
            ..Default::default()
        };
        assert!(matches!(long.check(), Err(BadSlowdown::DelayTooLong(_))));
        let fine = Slowdown {
            min_delay_ms: Some(MAX_MIN_DELAY_MS),
            max_in_flight: Some(1),
        };
        assert_eq!(fine.check(), Ok(()));
    }
}
