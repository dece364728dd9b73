//! Per-IP politeness: at most `max_in_flight_per_ip` requests in flight to
//! one address, across every host that resolves to it (virtual hosting puts
//! thousands of small sites on one machine). Off by default.
//!
//! Slots are RAII guards: dropping an [`IpSlot`] frees it and wakes the
//! hosts waiting for that address, so a slot cannot leak, whatever way the
//! request ended. A host that finds the address full gets a future that
//! completes when a slot may have freed; it was armed before the check, so
//! a release between the check and the wait is not missed.

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

#[derive(Default)]
struct Entry {
    in_flight: u32,
    freed: Arc<Notify>,
}

/// The per-IP counters, shared by every host of a node.
#[derive(Clone)]
pub struct IpSlots {
    limit: u32,
    table: Arc<Mutex<HashMap<IpAddr, Entry>>>,
}

/// A taken slot; dropping it frees the slot.
#[must_use = "dropping the slot frees it at once"]
pub struct IpSlot {
    ip: IpAddr,
    table: Arc<Mutex<HashMap<IpAddr, Entry>>>,
}

/// Completes when a slot of the address may have been freed.
pub type SlotFreed = Pin<Box<dyn Future<Output = ()> + Send>>;

impl std::fmt::Debug for IpSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpSlots")
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl IpSlots {
    /// Counters allowing `limit` requests per address.
    pub fn new(limit: u32) -> Self {
        IpSlots {
            limit: limit.max(1),
            table: Arc::default(),
        }
    }

    /// Takes a slot of `ip`, or returns a future to wait on before trying
    /// again.
    pub fn try_take(&self, ip: IpAddr) -> Result<IpSlot, SlotFreed> {
        let mut table = self.table.lock().expect("ip slots lock");
        let entry = table.entry(ip).or_default();
        if entry.in_flight < self.limit {
            entry.in_flight += 1;
            return Ok(IpSlot {
                ip,
                table: self.table.clone(),
            });
        }
        // Armed under the lock: a release after this point wakes it.
        let mut freed = Box::pin(entry.freed.clone().notified_owned());
        freed.as_mut().enable();
        Err(Box::pin(freed))
    }

    /// Requests in flight to `ip`.
    pub fn in_flight(&self, ip: IpAddr) -> u32 {
        let table = self.table.lock().expect("ip slots lock");
        table.get(&ip).map_or(0, |e| e.in_flight)
    }
}

impl Drop for IpSlot {
    fn drop(&mut self) {
        let mut table = self.table.lock().expect("ip slots lock");
        if let Some(entry) = table.get_mut(&self.ip) {
            entry.in_flight = entry.in_flight.saturating_sub(1);
            entry.freed.notify_waiters();
            if entry.in_flight == 0 {
                table.remove(&self.ip);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_address_and_freed_on_drop() {
        let slots = IpSlots::new(2);
        let a: IpAddr = "127.0.0.1".parse().unwrap();
        let b: IpAddr = "127.0.0.2".parse().unwrap();
        let first = slots.try_take(a).ok().unwrap();
        let _second = slots.try_take(a).ok().unwrap();
        assert!(slots.try_take(a).is_err());
        let _other = slots.try_take(b).ok().unwrap();
        assert_eq!(slots.in_flight(a), 2);
        drop(first);
        assert_eq!(slots.in_flight(a), 1);
        assert!(slots.try_take(a).is_ok());
    }

    #[test]
    fn a_waiter_armed_before_the_release_is_woken() {
        let slots = IpSlots::new(1);
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let held = slots.try_take(ip).ok().unwrap();
        let waiter = slots.try_take(ip).err().unwrap();
        drop(held);
        // Completes at once: the release happened after the waiter armed.
        actix_rt::System::new().block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
                .await
                .expect("woken by the release");
        });
        assert!(slots.try_take(ip).is_ok());
    }
}
