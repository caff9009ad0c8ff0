//! Per-(lock, owner) request lanes: this client sends one write request at a time for
//! each (lock, owner).
//!
//! Exactly-once without latch keys rests on it (see `lua/release.lua`): a client's record
//! of its last applied request in the lock hash answers "did my lost request run?" only if
//! no other request of that client for that (lock, owner) ran in between. A lane is held
//! for one acquire attempt, or one release with its retries.
//!
//! The decisions are the protocol core's ([`crate::protocol::lane`]); this module only
//! keeps one async mutex per lane, with the core's lane state inside.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

use crate::protocol::lane::Lane as LaneState;

type LaneKey = (Arc<str>, Arc<str>);

/// The lanes of one client.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    lanes: Mutex<HashMap<LaneKey, Arc<AsyncMutex<LaneState>>>>,
}

/// The right to send on one lane; the lane is free again when this is dropped.
#[derive(Debug)]
pub(crate) struct LaneGuard {
    lanes: Arc<Lanes>,
    key: LaneKey,
    lane: Arc<AsyncMutex<LaneState>>,
    held: OwnedMutexGuard<LaneState>,
}

impl LaneGuard {
    /// The lane's state.
    pub(crate) fn state(&mut self) -> &mut LaneState {
        &mut self.held
    }
}

impl Lanes {
    /// Waits for the lane of (`lock`, `owner`).
    ///
    /// # Cancel safety
    /// Cancel-safe: a waiter that is dropped holds nothing.
    pub(crate) async fn enter(self: &Arc<Self>, lock: &Arc<str>, owner: &Arc<str>) -> LaneGuard {
        let key = (lock.clone(), owner.clone());
        let lane = self.lanes.lock().entry(key.clone()).or_default().clone();
        // If this future is dropped while waiting, `lane` goes with it; the map entry then
        // stays until the lane's next user leaves (harmless, and rare).
        let held = lane.clone().lock_owned().await;
        LaneGuard {
            lanes: self.clone(),
            key,
            lane,
            held,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.lanes.lock().len()
    }
}

impl Drop for LaneGuard {
    fn drop(&mut self) {
        let mut lanes = self.lanes.lanes.lock();
        // Three references, the map's, `self.lane` and the owned guard's: nobody else
        // waits. A lane with a pending reconciliation is kept.
        if Arc::strong_count(&self.lane) == 3 && !self.held.is_pending() {
            lanes.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lane_serialises_and_is_forgotten_when_idle() {
        let lanes = Arc::new(Lanes::default());
        let (k, o) = (Arc::from("k"), Arc::from("o"));
        let first = lanes.enter(&k, &o).await;
        let second = tokio::spawn({
            let lanes = lanes.clone();
            let (k, o) = (k.clone(), o.clone());
            async move {
                let _lane = lanes.enter(&k, &o).await;
            }
        });
        tokio::task::yield_now().await;
        assert!(!second.is_finished());
        drop(first);
        second.await.unwrap();
        assert_eq!(lanes.len(), 0);
        let other = lanes.enter(&k, &Arc::from("p")).await;
        assert_eq!(lanes.len(), 1);
        drop(other);
        assert_eq!(lanes.len(), 0);
    }
}
