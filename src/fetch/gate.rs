//! The gate every request passes before it starts: shut while the
//! operator has paused the node, and metered by the node-wide rate limit
//! (`[fetch] max_requests_per_second`). Both change at runtime
//! ([`FetchGate::set`]); requests already waiting see the change (a pause
//! stops them where they wait; a new rate applies to requests that reach
//! the limiter afterwards).
//!
//! The limit is governor's GCRA with no burst: requests start at most once
//! per `1 / rate` seconds, evenly spaced, whatever the number of hosts.
//! Politeness per host is decided before a request reaches the gate, so
//! waiting here only ever makes a host's gaps longer.

use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::watch;

use crate::control::Controls;

/// The gate.
pub struct FetchGate {
    paused: watch::Sender<bool>,
    limiter: Mutex<Option<Arc<DefaultDirectRateLimiter>>>,
}

impl FetchGate {
    /// A gate set to `controls`.
    pub fn new(controls: &Controls) -> Self {
        let gate = FetchGate {
            paused: watch::Sender::new(controls.paused),
            limiter: Mutex::new(None),
        };
        gate.set(controls);
        gate
    }

    /// Applies new controls.
    pub fn set(&self, controls: &Controls) {
        *self.limiter.lock().expect("gate lock") = limiter(controls.max_requests_per_second);
        self.paused.send_replace(controls.paused);
    }

    /// Whether requests are held.
    pub fn is_paused(&self) -> bool {
        *self.paused.borrow()
    }

    /// Waits until a request may start: not paused, and within the rate.
    pub async fn pass(&self) {
        let mut paused = self.paused.subscribe();
        loop {
            // The sender lives as long as the gate: this cannot fail.
            let _ = paused.wait_for(|p| !*p).await;
            let limiter = self.limiter.lock().expect("gate lock").clone();
            if let Some(limiter) = limiter {
                limiter.until_ready().await;
            }
            if !*paused.borrow() {
                return;
            }
        }
    }
}

/// The limiter of `rate` requests per second; none for 0 (or anything
/// [`crate::control::check_rate`] refuses).
fn limiter(rate: f64) -> Option<Arc<DefaultDirectRateLimiter>> {
    crate::control::check_rate(rate)
        .ok()
        .filter(|_| rate > 0.0)?;
    let period = Duration::from_secs_f64(1.0 / rate).max(Duration::from_nanos(1));
    let quota = Quota::with_period(period)?.allow_burst(NonZeroU32::MIN);
    Some(Arc::new(RateLimiter::direct(quota)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn controls(paused: bool, rate: f64) -> Controls {
        Controls {
            paused,
            max_requests_per_second: rate,
        }
    }

    #[actix_rt::test]
    async fn a_paused_gate_holds_requests_until_resumed() {
        let gate = Arc::new(FetchGate::new(&controls(true, 0.0)));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let waiting = gate.clone();
        actix_rt::spawn(async move {
            waiting.pass().await;
            tx.send(()).unwrap();
        });
        // The waiter is parked on the pause: let it run, nothing passes.
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err());
        gate.set(&controls(false, 0.0));
        assert_eq!(rx.recv().await, Some(()));
        assert!(!gate.is_paused());
    }

    #[test]
    fn the_rate_spaces_requests_and_zero_means_none() {
        assert!(limiter(0.0).is_none());
        assert!(limiter(f64::NAN).is_none());
        let one = limiter(1.0).unwrap();
        assert!(one.check().is_ok(), "the first request passes");
        assert!(one.check().is_err(), "no burst: the second waits");
        let fast = limiter(crate::control::MAX_RATE).unwrap();
        assert!(fast.check().is_ok());
        assert!(limiter(1e300).is_none(), "out of range: refused before");
    }
}
