//! Restart-in-place: who held each partition, remembered on this node's
//! disk, for a cluster without `[cluster] state_url`.
//!
//! Without a durable copy in object storage, a partition's state lives on
//! the disk of the node that holds it. A node must then never open a
//! *new*, empty store for a partition another node held: the crawl would
//! go on there with an empty frontier while the real one waits on the
//! other disk, and what the two copies crawled could never be merged (the
//! behaviour measured in issue 33: survivors opened a dead node's
//! partitions as new stores and fetched 72 pages twice). So every node
//! remembers, in `data_dir/cluster-holders.json`, the last holder gossip
//! showed it for each partition, and creates a store only for a partition
//! no other node is known to have held. A store already on its disk (its
//! own, or on a data directory the nodes share) it opens as before: the
//! store's lock fences two openers.
//!
//! What this does not do: move a partition's state to a node that joins
//! (its assignment moves the partition, the old holder hands it back, and
//! the new one, holding no state for it, waits), or bring back the state
//! of a lost disk. Both need `state_url`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The remembered holders.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnownHolders {
    /// Partition → the node last seen holding it.
    holders: BTreeMap<u16, String>,
}

/// Why a store may not be created here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("partition {partition} was last held by {holder}, whose disk has its state")]
pub struct HeldElsewhere {
    /// The partition.
    pub partition: u16,
    /// Its last known holder.
    pub holder: String,
}

impl KnownHolders {
    /// The file in `data_dir`.
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join("cluster-holders.json")
    }

    /// Reads the remembered holders (none if the file is missing or
    /// unreadable: then this node knows only what gossip tells it next).
    pub fn load(data_dir: &Path) -> Self {
        std::fs::read(Self::path(data_dir))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Writes them (whole, through a temporary file).
    pub fn save(&self, data_dir: &Path) -> std::io::Result<()> {
        let path = Self::path(data_dir);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self).expect("serialises"))?;
        std::fs::rename(tmp, path)
    }

    /// Learns what gossip shows held now; whether anything changed.
    pub fn learn<'a>(&mut self, held: impl IntoIterator<Item = (&'a u16, &'a String)>) -> bool {
        let mut changed = false;
        for (&p, node) in held {
            if self.holders.get(&p) != Some(node) {
                self.holders.insert(p, node.clone());
                changed = true;
            }
        }
        changed
    }

    /// Whether node `me` may create a new store for `partition`.
    pub fn may_create(&self, partition: u16, me: &str) -> Result<(), HeldElsewhere> {
        match self.holders.get(&partition) {
            Some(holder) if holder != me => Err(HeldElsewhere {
                partition,
                holder: holder.clone(),
            }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_another_node_held_is_not_created_here_and_that_is_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let mut known = KnownHolders::load(dir.path());
        assert_eq!(known.may_create(3, "n1"), Ok(()));
        let gossip = BTreeMap::from([(3, "n2".to_owned()), (4, "n1".to_owned())]);
        assert!(known.learn(&gossip));
        assert!(!known.learn(&gossip), "nothing new");
        assert_eq!(
            known.may_create(3, "n1"),
            Err(HeldElsewhere {
                partition: 3,
                holder: "n2".into()
            })
        );
        assert_eq!(known.may_create(4, "n1"), Ok(()));
        assert_eq!(known.may_create(5, "n1"), Ok(()));
        known.save(dir.path()).unwrap();
        // n2 died: gossip no longer shows it, the file still does.
        let again = KnownHolders::load(dir.path());
        assert!(again.may_create(3, "n1").is_err());
        assert!(again.may_create(3, "n2").is_ok());
    }
}
