//! The per-(lock, owner) lane: what a client must do before its next request.
//!
//! A client sends one write request at a time per (lock, owner); that is what lets the
//! scripts answer "did my lost request run?" from one record per client in the lock hash
//! instead of a latch key per request. An acquire whose reply was lost leaves a pending
//! reconciliation in the lane, and the next request on the lane, whatever it is, first
//! sends the probe ([`Lane::probe`]) and acts on the answer: a hold the lost acquire took
//! is adopted by an acquire attempt, or given back before a release. Only then is the
//! record of the client's last request free to be overwritten ("no orphans").

use super::acquire::{AcquireRequest, Granted, Probed, Reconcile, ReconcileStep};
use super::{Call, Failure, LockKeys, Millis, Reply};

/// An acquire whose reply was lost.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pending {
    reconcile: Reconcile,
    sent_at: Millis,
    /// The client tracked a live hold of the owner when the request was sent: it may have
    /// re-entered that hold, whose count then lives as long as the hold, not only for the
    /// request's lease.
    may_reenter: bool,
}

/// One lane's state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Lane {
    pending: Option<Pending>,
}

/// What a probe found about the pending acquire.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Resolved {
    /// It holds `granted`, confirmed from `sent_at` for the lost request's lease: an
    /// acquire attempt on the same terms ([`AcquireRequest::same_terms`]) adopts it;
    /// anything else gives it back first.
    Holds {
        /// The hold.
        granted: Granted,
        /// When the lost acquire was sent.
        sent_at: Millis,
        /// The lost acquire itself (its lease is the one Redis set).
        request: AcquireRequest,
    },
    /// It holds nothing (now).
    Nothing,
}

impl Lane {
    /// `request`, sent at `sent_at`, got no reply and may have run (noticed at `now`).
    /// `may_reenter`: the client tracked a live hold of the owner when it was sent.
    pub fn lost_acquire(
        &mut self,
        request: AcquireRequest,
        sent_at: Millis,
        now: Millis,
        may_reenter: bool,
    ) {
        self.pending = Some(Pending {
            reconcile: Reconcile::new(request, now),
            sent_at,
            may_reenter,
        });
    }

    /// Whether a lost acquire is waiting to be resolved.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Whether the pending acquire is asked about at `now` past its bound (see
    /// [`Reconcile::asks_late`]).
    pub fn asks_late(&self, now: Millis) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|pending| pending.reconcile.asks_late(now))
    }

    /// The probe to send before any other request on this lane, if one is pending.
    pub fn probe(&self, keys: &LockKeys) -> Option<Call> {
        self.pending
            .as_ref()
            .map(|pending| pending.reconcile.call(keys))
    }

    /// The probe's reply: the pending acquire is resolved.
    pub fn on_probe_reply(&mut self, reply: &Reply) -> Result<Resolved, String> {
        let Some(pending) = self.pending.take() else {
            return Ok(Resolved::Nothing);
        };
        match pending.reconcile.decode(reply)? {
            Probed::Holds(granted) => Ok(Resolved::Holds {
                granted,
                sent_at: pending.sent_at,
                request: pending.reconcile.request().clone(),
            }),
            Probed::Nothing => Ok(Resolved::Nothing),
        }
    }

    /// The probe got no reply at `now`. The pending acquire stays, unless a hold it took
    /// must have expired by now and the request cannot run any more (see
    /// [`Reconcile::on_failure`]: a timed-out probe is asked again). A request that may
    /// have re-entered a live hold stays pending even then (the count it may have added
    /// lives as long as that hold): asking stops, but the owner's next request on the
    /// lane, its release at the latest, asks first.
    pub fn on_probe_failure(
        &mut self,
        failure: &Failure,
        now: Millis,
        jitter: u64,
    ) -> ReconcileStep {
        let Some(pending) = self.pending.as_mut() else {
            return ReconcileStep::GiveUp;
        };
        let step = pending.reconcile.on_failure(failure, now, jitter);
        if step == ReconcileStep::GiveUp && !pending.may_reenter {
            self.pending = None;
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_acquire_is_probed_first_and_resolved_once() {
        let keys = LockKeys {
            hash: "k".into(),
            fence: "k:fence".into(),
            channel: "k:c".into(),
            sharded: false,
        };
        let mut lane = Lane::default();
        assert!(lane.probe(&keys).is_none());
        let request = AcquireRequest {
            owner: "o".into(),
            lease_ms: 100,
            request: "c.1".into(),
            fenced: false,
            others_waiting: false,
            contended: false,
        };
        lane.lost_acquire(request, 5, 10, false);
        assert!(lane.probe(&keys).is_some());
        assert!(matches!(
            lane.on_probe_failure(&Failure::Lost, 20, 0),
            ReconcileStep::RetryAt(_)
        ));
        assert!(lane.is_pending());
        let holds = Reply::Array(vec![
            Reply::Int(1),
            Reply::Int(1),
            Reply::Bulk(b"c.1".to_vec()),
            Reply::Int(0),
        ]);
        assert!(matches!(
            lane.on_probe_reply(&holds),
            Ok(Resolved::Holds { sent_at: 5, .. })
        ));
        assert!(!lane.is_pending());
        assert_eq!(
            lane.on_probe_failure(&Failure::Lost, 30, 0),
            ReconcileStep::GiveUp
        );
    }
}
