//! Which live node owns which partition: rendezvous hashing.
//!
//! Each partition goes to the live member with the highest weight
//! `xxh3(node id ‖ partition)` (highest-random-weight hashing, Thaler &
//! Ravishankar 1998). Every node computes the same assignment from the same
//! member list, with no coordination and whatever order it learned the
//! members in; when a member leaves, only its partitions move (each to the
//! member that was second for it), and when one joins it takes about
//! `1/n` of the partitions, from every other member alike. Consistent
//! hashing with a ring needs virtual nodes to balance as well; rendezvous
//! hashing over 64 to 4,096 partitions is a few hundred thousand hashes at
//! most per membership change, which is nothing.
//!
//! The assignment says who *should* hold a partition. Who *does* is fenced
//! by the partition's store: a node crawls a partition only while it holds
//! that store open (RocksDB's lock file), so two nodes that disagree for a
//! moment about membership can never both crawl it.

use std::collections::{BTreeMap, BTreeSet};

use xxhash_rust::xxh3::xxh3_64;

/// The weight of `node` for `partition`.
fn weight(node: &str, partition: u16) -> u64 {
    let mut key = Vec::with_capacity(node.len() + 3);
    key.extend_from_slice(node.as_bytes());
    key.push(0);
    key.extend_from_slice(&partition.to_be_bytes());
    xxh3_64(&key)
}

/// The owner of `partition` among `members` (node ids), if any: the member
/// of highest weight, ties (which need equal 64-bit hashes) broken by id.
pub fn owner(partition: u16, members: &[String]) -> Option<&str> {
    members
        .iter()
        .max_by(|a, b| (weight(a, partition), a.as_str()).cmp(&(weight(b, partition), b.as_str())))
        .map(String::as_str)
}

/// The owner of every partition of a crawl.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    owners: Vec<Option<String>>,
}

/// A partition changing owner between two assignments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    /// The partition.
    pub partition: u16,
    /// Its owner before (none if nobody was live).
    pub from: Option<String>,
    /// Its owner after.
    pub to: Option<String>,
}

impl Assignment {
    /// The assignment of `partitions` partitions over the `live` members.
    pub fn compute(partitions: u16, live: &[String]) -> Self {
        Assignment {
            owners: (0..partitions)
                .map(|p| owner(p, live).map(str::to_owned))
                .collect(),
        }
    }

    /// The assignment over the `live` members when some of them shun some
    /// partitions (they could not open, read or checkpoint them, and
    /// publish that in gossip: `src/cluster/lease.rs`'s
    /// `PartitionLease::shunned`): each partition goes to the member of
    /// highest weight among those that do not shun it, or among all if
    /// every live member does (someone must keep trying). Every node
    /// computes the same from the same view, so a partition one node
    /// cannot hold moves to the next, rather than staying assigned to the
    /// node that keeps handing it back.
    pub fn compute_avoiding(
        partitions: u16,
        live: &[String],
        shuns: &BTreeMap<String, BTreeSet<u16>>,
    ) -> Self {
        let shuns_it = |node: &String, p: u16| shuns.get(node).is_some_and(|s| s.contains(&p));
        Assignment {
            owners: (0..partitions)
                .map(|p| {
                    let willing: Vec<String> =
                        live.iter().filter(|n| !shuns_it(n, p)).cloned().collect();
                    let from = if willing.is_empty() { live } else { &willing };
                    owner(p, from).map(str::to_owned)
                })
                .collect(),
        }
    }

    /// The owner of `partition`.
    pub fn owner(&self, partition: u16) -> Option<&str> {
        self.owners
            .get(usize::from(partition))
            .and_then(|o| o.as_deref())
    }

    /// The partitions `node` owns, in order.
    pub fn held_by(&self, node: &str) -> Vec<u16> {
        (0..self.owners.len() as u16)
            .filter(|&p| self.owner(p) == Some(node))
            .collect()
    }

    /// Whether every partition has an owner (some member is live).
    pub fn is_complete(&self) -> bool {
        self.owners.iter().all(Option::is_some)
    }

    /// What `node` must do to hold what this assignment gives it, given
    /// whether it holds each partition now: the partitions to open, and
    /// those to hand back.
    pub fn changes_for(&self, node: &str, holds: impl Fn(u16) -> bool) -> (Vec<u16>, Vec<u16>) {
        let (mut take, mut release) = (Vec::new(), Vec::new());
        for p in 0..self.owners.len() as u16 {
            match (self.owner(p) == Some(node), holds(p)) {
                (true, false) => take.push(p),
                (false, true) => release.push(p),
                _ => {}
            }
        }
        (take, release)
    }

    /// How many partitions each owner has.
    pub fn counts(&self) -> BTreeMap<&str, usize> {
        let mut counts = BTreeMap::new();
        for owner in self.owners.iter().flatten() {
            *counts.entry(owner.as_str()).or_default() += 1;
        }
        counts
    }

    /// The partitions whose owner differs in `next`.
    pub fn moves(&self, next: &Assignment) -> Vec<Move> {
        let len = self.owners.len().max(next.owners.len()) as u16;
        (0..len)
            .filter_map(|p| {
                let (from, to) = (self.owner(p), next.owner(p));
                (from != to).then(|| Move {
                    partition: p,
                    from: from.map(str::to_owned),
                    to: to.map(str::to_owned),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_node_computes_the_same_owners_whatever_the_order() {
        let a = Assignment::compute(64, &ids(&["n1", "n2", "n3"]));
        let b = Assignment::compute(64, &ids(&["n3", "n1", "n2"]));
        assert_eq!(a, b);
        assert!((0..64).all(|p| a.owner(p).is_some()));
        assert_eq!(Assignment::compute(4, &[]).owner(0), None);
        assert_eq!(a.owner(64), None, "no such partition");
    }

    #[test]
    fn a_node_takes_what_is_newly_its_own_and_hands_back_the_rest() {
        let a = Assignment::compute(16, &ids(&["n1", "n2"]));
        let mine = a.held_by("n1");
        // Holding nothing: take all of n1's.
        assert_eq!(a.changes_for("n1", |_| false), (mine.clone(), vec![]));
        // Holding everything: hand back n2's.
        assert_eq!(a.changes_for("n1", |_| true), (vec![], a.held_by("n2")));
        assert!(a.is_complete());
        assert!(!Assignment::compute(4, &[]).is_complete());
    }

    #[test]
    fn a_shunned_partition_goes_to_the_next_member_and_only_it_moves() {
        let live = ids(&["n1", "n2", "n3"]);
        let plain = Assignment::compute(64, &live);
        let mine = plain.held_by("n1");
        let shunned = mine[0];
        let shuns = BTreeMap::from([("n1".to_owned(), BTreeSet::from([shunned]))]);
        let avoiding = Assignment::compute_avoiding(64, &live, &shuns);
        let moves = plain.moves(&avoiding);
        assert_eq!(moves.len(), 1, "{moves:?}");
        assert_eq!(moves[0].partition, shunned);
        assert_ne!(avoiding.owner(shunned), Some("n1"));
        // The same as if n1 were not there, for that partition.
        let without = Assignment::compute(64, &ids(&["n2", "n3"]));
        assert_eq!(avoiding.owner(shunned), without.owner(shunned));
        // Shunned by every member: still assigned, as if nobody shunned it.
        let all: BTreeMap<String, BTreeSet<u16>> = live
            .iter()
            .map(|n| (n.clone(), BTreeSet::from([shunned])))
            .collect();
        assert_eq!(Assignment::compute_avoiding(64, &live, &all), plain);
        assert_eq!(
            Assignment::compute_avoiding(64, &live, &BTreeMap::new()),
            plain
        );
    }

    #[test]
    fn partitions_spread_over_the_members() {
        let a = Assignment::compute(64, &ids(&["n1", "n2", "n3"]));
        let counts = a.counts();
        assert_eq!(counts.values().sum::<usize>(), 64);
        for (node, n) in &counts {
            assert!((10..=32).contains(n), "{node}: {n} of 64");
        }
        let big = Assignment::compute(4096, &ids(&["n1", "n2", "n3", "n4"]));
        for n in big.counts().values() {
            // Within 10 % of the fair share, 1,024.
            assert!((922..=1126).contains(n), "{n}");
        }
    }

    #[test]
    fn a_leaving_member_moves_only_its_partitions_and_a_joining_one_takes_a_share() {
        let three = Assignment::compute(64, &ids(&["n1", "n2", "n3"]));
        let two = Assignment::compute(64, &ids(&["n1", "n3"]));
        let moves = three.moves(&two);
        assert_eq!(moves.len(), three.held_by("n2").len());
        assert!(moves.iter().all(|m| m.from.as_deref() == Some("n2")));
        // Coming back, it takes exactly those again.
        let back = two.moves(&three);
        assert_eq!(back.len(), moves.len());
        assert!(back.iter().all(|m| m.to.as_deref() == Some("n2")));
        // A fourth member takes about a quarter, from everyone.
        let four = Assignment::compute(64, &ids(&["n1", "n2", "n3", "n4"]));
        let taken = three.moves(&four);
        assert!(taken.iter().all(|m| m.to.as_deref() == Some("n4")));
        assert_eq!(taken.len(), four.held_by("n4").len());
        assert!((8..=26).contains(&taken.len()), "{}", taken.len());
    }
}
