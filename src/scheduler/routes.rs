//! The partitions a node admits here, as its machine decides them.
//!
//! [`super::NodeScheduler::route_of`] is a node's one routing table. The
//! actors that hand admissions and digest questions to the partitions held
//! here (the SeenSet, the DigestRouter) run on threads of their own; they
//! read the table's `Here` routes from a [`RouteTable`] the node publishes
//! from the machine ([`super::NodeScheduler::here`]) after each change of
//! its routes, rather than keep a copy of their own fed by messages. A
//! read is a lock and a reference count, once per batch of links.
//!
//! Each partition's route carries a generation that changes whenever its
//! handle does (held, handed back, its actor restarted), so a reader learns
//! that a partition moved, and forgets what it remembered of it (the seen
//! shortcut), even when it came back to this node between two reads.

use std::sync::{Arc, RwLock};

/// One published state of the table.
#[derive(Debug)]
pub struct Routes<H> {
    here: Vec<Option<H>>,
    generations: Vec<u64>,
}

impl<H> Routes<H> {
    /// The handle of partition `p` if it is admitted here.
    pub fn here(&self, p: u16) -> Option<&H> {
        self.here.get(usize::from(p))?.as_ref()
    }

    /// How many times partition `p`'s route changed.
    pub fn generation(&self, p: u16) -> u64 {
        self.generations.get(usize::from(p)).copied().unwrap_or(0)
    }

    /// The crawl's partitions.
    pub fn len(&self) -> usize {
        self.here.len()
    }

    /// Whether the crawl has no partition (never, in a crawl).
    pub fn is_empty(&self) -> bool {
        self.here.is_empty()
    }
}

/// The published table, shared between the node and its readers.
#[derive(Debug)]
pub struct RouteTable<H> {
    current: RwLock<Arc<Routes<H>>>,
}

impl<H: Clone + PartialEq> RouteTable<H> {
    /// A table admitting here the partitions `here` names (index =
    /// partition id).
    pub fn new(here: Vec<Option<H>>) -> Self {
        let generations = vec![0; here.len()];
        RouteTable {
            current: RwLock::new(Arc::new(Routes { here, generations })),
        }
    }

    /// The table now.
    pub fn load(&self) -> Arc<Routes<H>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Publishes `here` (one entry per partition): a partition whose
    /// handle changed gets a new generation.
    pub fn publish(&self, here: Vec<Option<H>>) {
        let mut current = self.current.write().unwrap_or_else(|e| e.into_inner());
        let generations = here
            .iter()
            .enumerate()
            .map(|(p, handle)| {
                let before = current.here.get(p);
                let generation = current.generations.get(p).copied().unwrap_or(0);
                match before.is_some_and(|b| b == handle) {
                    true => generation,
                    false => generation + 1,
                }
            })
            .collect();
        *current = Arc::new(Routes { here, generations });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_whose_handle_changes_gets_a_new_generation() {
        let table = RouteTable::new(vec![Some("a"), None, Some("c")]);
        let first = table.load();
        table.publish(vec![Some("a"), Some("b"), None]);
        let now = table.load();
        assert_eq!(now.here(0), Some(&"a"));
        assert_eq!(now.here(1), Some(&"b"));
        assert_eq!(now.here(2), None);
        assert_eq!(now.generation(0), first.generation(0), "unchanged");
        assert_ne!(now.generation(1), first.generation(1), "held here");
        assert_ne!(now.generation(2), first.generation(2), "handed back");
        // Handed back and held again (a restarted actor): moved, though
        // a reader that missed the gap sees a handle here both times.
        table.publish(vec![Some("a"), None, None]);
        table.publish(vec![Some("a"), Some("b2"), None]);
        assert_eq!(table.load().generation(1), now.generation(1) + 2);
        assert_eq!(first.here(1), None, "a reader keeps the table it read");
    }
}
