//! One acquire attempt, and the reconciliation of an attempt whose reply was lost.
//!
//! An attempt is not retried blindly when its reply is lost: it may have run. The client
//! instead sends nothing else for that (lock, owner) and asks `lua/probe.lua` what the
//! request did ([`Reconcile`]). A hold it took is then adopted by a caller who still
//! waits, or given back, so no orphan is left ("no orphans"), however long the partition
//! lasts, for as long as the hold could still exist.

use std::sync::Arc;

use super::planted::{self, Defect};
use super::{Call, Failure, LockKeys, Millis, Reply, ScriptId, args, backoff};

/// One acquire request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AcquireRequest {
    /// The owner id (hash field).
    pub owner: Arc<str>,
    /// The lease in ms that the script sets (fresh) or lengthens to (re-entry).
    pub lease_ms: Millis,
    /// The request id; the hold id when it creates a fresh hold.
    pub request: Arc<str>,
    /// Whether a fencing token is asked for.
    pub fenced: bool,
    /// Whether other waiters of this client wait for the lock: a fresh hold is then marked
    /// so that its release wakes them (see `lua/acquire.lua`, "\1w").
    pub others_waiting: bool,
    /// Whether the lock is most likely held ([`Wait::expects_held`](crate::wait::Wait::expects_held):
    /// the caller failed an attempt and no release message has come since): then
    /// `acquire.lua` is sent at once rather than after a bare `SET NX`
    /// ([`AcquireRequest::take_call`]) that would most likely fail. A waiter woken by a
    /// release message sends the `SET NX` first: the lock is most likely free, and the
    /// hand-off then costs what a raw lock's does (a failed `SET NX` costs one more round
    /// trip, off the winner's path).
    pub contended: bool,
}

/// A hold that a request got.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Granted {
    /// The owner's hold count after the acquire (1 for a fresh hold).
    pub count: u64,
    /// The hold id.
    pub hold: Arc<str>,
    /// The hold's fencing token, when it has one.
    pub token: Option<u64>,
}

impl Granted {
    /// Whether the hold is in the hash form in Redis for certain (see `lua/acquire.lua`):
    /// a count above 1 is a re-entry, which turned any string into the hash, and a token
    /// lives only in the hash.
    pub fn hash_form(&self) -> bool {
        self.count > 1 || self.token.is_some()
    }
}

/// What an acquire attempt found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AcquireReply {
    /// Acquired or re-entered.
    Granted(Granted),
    /// Another owner holds the lock for `pttl_ms` more.
    Held {
        /// The key's remaining TTL (at least 1).
        pttl_ms: Millis,
    },
    /// The key is not one of our locks; nothing was written.
    NotALock(String),
}

/// What to do after an attempt failed without a reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AfterFailure {
    /// It did not run: try again (after a back-off) or give up, as the wait allows.
    DidNotRun,
    /// It may have run: reconcile ([`Reconcile`]) before anything else is sent for this
    /// (lock, owner).
    Reconcile,
    /// A permanent error: report it.
    Fail,
}

impl AcquireRequest {
    /// Whether a hold taken by `self` can stand for an attempt of `other`: same owner,
    /// same lease, same fencing. A hold adopted on other terms would carry a lease (or
    /// token) the caller did not ask for; it is given back instead.
    pub fn same_terms(&self, other: &AcquireRequest) -> bool {
        let same_lease =
            self.lease_ms == other.lease_ms || planted::is(Defect::AdoptionIgnoresLease);
        self.owner == other.owner && same_lease && self.fenced == other.fenced
    }

    /// The value of the first hold this request takes in the string form:
    /// `<mark> <request id> "\1" <owner>`, the mark `"\2"` when others of this client
    /// wait (its release must wake them), else `"\1"` (see `lua/acquire.lua`).
    pub fn value(&self) -> Arc<str> {
        let mark = if self.others_waiting && !planted::is(Defect::FirstHoldValueUnmarked) {
            "\u{2}"
        } else {
            "\u{1}"
        };
        args::joined(&[mark, &self.request, "\u{1}", &self.owner])
    }

    /// The `lua/take.lua` call (sent as the bare `SET <key> <value> NX PX <lease>`) that
    /// takes a free lock in one plain command, when this request may: an unfenced request
    /// (a token needs the counter), not contended (the caller already waits). `None`:
    /// send [`AcquireRequest::call`] at once.
    pub fn take_call(&self, keys: &LockKeys) -> Option<Call> {
        if self.fenced || self.contended {
            return None;
        }
        Some(Call {
            script: ScriptId::Take,
            keys: vec![keys.hash.clone()],
            args: vec![self.value(), args::number(self.lease_ms)],
        })
    }

    /// Reads the take's reply: `Some` hold when it took the lock; `None` when the key
    /// exists (held, by this owner too, or not a lock), for [`AcquireRequest::call`],
    /// with the same request id, to tell which.
    pub fn decode_take(&self, reply: &Reply) -> Result<Option<Granted>, String> {
        match reply {
            Reply::Status(ok) if ok == "OK" => Ok(Some(self.fresh())),
            Reply::Nil if planted::is(Defect::TakeNilReadAsGranted) => Ok(Some(self.fresh())),
            Reply::Nil => Ok(None),
            _ => Err(format!("take: {reply:?}")),
        }
    }

    fn fresh(&self) -> Granted {
        Granted {
            count: 1,
            hold: self.request.clone(),
            token: None,
        }
    }

    /// The `acquire.lua` call.
    pub fn call(&self, keys: &LockKeys) -> Call {
        Call {
            script: ScriptId::Acquire,
            // The counter only when it is used: during a cluster slot migration Redis
            // refuses (TRYAGAIN) a command declaring keys that are not all on one node.
            keys: if self.fenced {
                vec![keys.hash.clone(), keys.fence.clone()]
            } else {
                vec![keys.hash.clone()]
            },
            args: vec![
                self.owner.clone(),
                args::number(self.lease_ms),
                self.request.clone(),
                args::number(match (self.fenced, self.others_waiting) {
                    (false, false) => 0,
                    (true, false) => 1,
                    (false, true) => 2,
                    (true, true) => 3,
                }),
            ],
        }
    }

    /// Reads `acquire.lua`'s reply.
    pub fn decode(&self, reply: &Reply) -> Result<AcquireReply, String> {
        let bad = || format!("acquire: {reply:?}");
        let items = match reply {
            Reply::Int(0) if !self.fenced => return Ok(AcquireReply::Granted(self.fresh())),
            // At least 1 ms (the script sees to it), so a lock on the verge of expiry
            // cannot make a waiter spin.
            Reply::Int(pttl) if *pttl > 0 => {
                return Ok(AcquireReply::Held {
                    pttl_ms: *pttl as Millis,
                });
            }
            Reply::Array(items) => items,
            _ => return Err(bad()),
        };
        match items.as_slice() {
            [Reply::Int(1), Reply::Int(count), hold, Reply::Int(token)] if *count >= 1 => {
                Ok(AcquireReply::Granted(Granted {
                    count: *count as u64,
                    hold: hold.text().ok_or_else(bad)?.into(),
                    token: (self.fenced && *token > 0).then_some(*token as u64),
                }))
            }
            [Reply::Int(2), what] => Ok(AcquireReply::NotALock(what.text().unwrap_or_default())),
            _ => Err(bad()),
        }
    }
}

/// Whether an attempt must mark the lock as awaited (`lua/acquire.lua`'s `"\1w"`, so that
/// its release announces itself): other local waiters than the caller listen on the
/// lock's channel (they may sleep on a wake-up that only one of them got).
pub fn others_waiting(listeners: usize, caller_listens: bool) -> bool {
    let others_from =
        usize::from(caller_listens) + usize::from(planted::is(Defect::OthersWaitingOffByOne));
    listeners > others_from
}

/// When a plain-lock hold granted from a call sent at `sent_at` with `lease_ms` ends for a
/// guard with a fixed lease; `None` for a watchdog guard (renewed, no end of its own).
pub fn fixed_end(watchdog: bool, sent_at: Millis, lease_ms: Millis) -> Option<Millis> {
    (!watchdog).then(|| sent_at.saturating_add(lease_ms))
}

/// How many replicas are known to have acknowledged a won hold: `acked` as the acquire's
/// reply said, and none known for an adopted hold (found by a probe after a lost reply).
pub fn acknowledged(acked: Option<u32>, adopted: bool) -> Option<u32> {
    if adopted { None } else { acked }
}

/// With replica acknowledgement configured (`wanted` replicas): whether a won hold that
/// [`acknowledged`] says `acked` replicas took may be kept (an unknown count may not).
pub fn replicated(acked: Option<u32>, wanted: u32) -> bool {
    acked.is_some_and(|acked| acked >= wanted)
}

/// What to do when an attempt got no reply.
pub fn after_failure(failure: &Failure) -> AfterFailure {
    match failure {
        Failure::NotSent | Failure::Transient(_) => AfterFailure::DidNotRun,
        Failure::Lost | Failure::TimedOut if planted::is(Defect::LostAcquireForgotten) => {
            AfterFailure::DidNotRun
        }
        Failure::TimedOut if planted::is(Defect::TimeoutReadAsNotRun) => AfterFailure::DidNotRun,
        Failure::Lost | Failure::TimedOut => AfterFailure::Reconcile,
        Failure::Permanent(_) => AfterFailure::Fail,
    }
}

/// Finding out what an acquire whose reply was lost did.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Reconcile {
    request: AcquireRequest,
    /// Until when (inclusive) a hold the request took could still exist: a lease after
    /// the last moment the request could have run. That is when the loss was noticed,
    /// and later each probe that failed in a way that leaves the request's connection
    /// able to have delivered it until then (see [`Reconcile::on_failure`]).
    hold_could_exist_until: Millis,
    /// The first such bound (when the loss was noticed plus the lease): asking past it
    /// is [`asks_late`](Reconcile::asks_late).
    noticed_bound: Millis,
    /// A probe failed in a way that shows the request's connection gone (`Lost`,
    /// `NotSent`): the request cannot run after that, so the bound moves no more.
    connection_gone: bool,
    attempts: u32,
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Probed {
    /// The request holds this hold now: adopt it or give it back.
    Holds(Granted),
    /// The request holds nothing now.
    Nothing,
}

/// The next step of a reconciliation that got no reply.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReconcileStep {
    /// Probe again at this time.
    RetryAt(Millis),
    /// Stop: a hold the request took has expired by now (or the error is permanent).
    GiveUp,
}

impl Reconcile {
    /// Starts reconciling `request`, whose reply was found lost at `noticed_at`.
    pub fn new(request: AcquireRequest, noticed_at: Millis) -> Self {
        let hold_could_exist_until = noticed_at.saturating_add(request.lease_ms);
        Reconcile {
            request,
            hold_could_exist_until,
            noticed_bound: hold_could_exist_until,
            connection_gone: false,
            attempts: 0,
        }
    }

    /// The request being reconciled.
    pub fn request(&self) -> &AcquireRequest {
        &self.request
    }

    /// Until when a hold the request took could still exist.
    pub fn hold_could_exist_until(&self) -> Millis {
        self.hold_could_exist_until
    }

    /// Whether asking at `now` is past a lease from when the loss was noticed: only a
    /// request that ran after that (late, on a stalled server) could have left a hold.
    pub fn asks_late(&self, now: Millis) -> bool {
        now > self.noticed_bound
    }

    /// The `probe.lua` call.
    pub fn call(&self, keys: &LockKeys) -> Call {
        Call {
            script: ScriptId::Probe,
            keys: vec![keys.hash.clone()],
            args: vec![self.request.owner.clone(), self.request.request.clone()],
        }
    }

    /// Reads `probe.lua`'s reply.
    pub fn decode(&self, reply: &Reply) -> Result<Probed, String> {
        let bad = || format!("probe: {reply:?}");
        let Reply::Array(items) = reply else {
            return Err(bad());
        };
        match items.as_slice() {
            [Reply::Int(0)] => Ok(Probed::Nothing),
            [Reply::Int(1), Reply::Int(count), hold, Reply::Int(token)] if *count >= 1 => {
                Ok(Probed::Holds(Granted {
                    count: *count as u64,
                    hold: hold.text().ok_or_else(bad)?.into(),
                    token: (self.request.fenced && *token > 0).then_some(*token as u64),
                }))
            }
            _ => Err(bad()),
        }
    }

    /// A probe got no reply at `now`: try again while a hold could still exist.
    ///
    /// A hold the request took lives a lease from when the request ran, and the request
    /// may not have run when its loss was noticed: a timed-out request waits on its
    /// connection until the server reads it (a stalled server), and runs before anything
    /// sent after it there (the probes). So until a failure shows that connection gone,
    /// every probe failure moves the bound to a lease from `now`: a probe that timed out
    /// (it, and the request before it, may still run: asked again for as long as probes
    /// time out), one refused as `BUSY` (the server read the request before it, so it ran
    /// by now at the latest), and the first one that finds the connection gone (`Lost`,
    /// `NotSent`: the request may have run just before it went, and cannot after). Past
    /// the bound, the reconciliation ends.
    pub fn on_failure(&mut self, failure: &Failure, now: Millis, jitter: u64) -> ReconcileStep {
        if matches!(failure, Failure::Permanent(_)) || planted::is(Defect::ReconcileGivesUpEarly) {
            return ReconcileStep::GiveUp;
        }
        if !self.connection_gone && !planted::is(Defect::ReconcileStopsOnTimeouts) {
            let lease_from_now = now.saturating_add(self.request.lease_ms);
            self.hold_could_exist_until = self.hold_could_exist_until.max(lease_from_now);
        }
        if matches!(failure, Failure::Lost | Failure::NotSent) {
            self.connection_gone = true;
        }
        // Redis expires a key only once its expiry time has passed (a key whose expiry is
        // `t` still exists at `t`): a hold could exist until and including that instant.
        if now > self.hold_could_exist_until {
            return ReconcileStep::GiveUp;
        }
        self.attempts += 1;
        let at = now + backoff(self.attempts, jitter);
        ReconcileStep::RetryAt(at.min(self.hold_could_exist_until))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> AcquireRequest {
        AcquireRequest {
            owner: "o".into(),
            lease_ms: 1_000,
            request: "c.1".into(),
            fenced: true,
            others_waiting: false,
            contended: false,
        }
    }

    #[test]
    fn decodes_every_acquire_reply() {
        let req = request();
        let granted = Reply::Array(vec![
            Reply::Int(1),
            Reply::Int(2),
            Reply::Bulk(b"c.0".to_vec()),
            Reply::Int(7),
        ]);
        assert_eq!(
            req.decode(&granted),
            Ok(AcquireReply::Granted(Granted {
                count: 2,
                hold: "c.0".into(),
                token: Some(7)
            }))
        );
        assert_eq!(
            req.decode(&Reply::Int(3)),
            Ok(AcquireReply::Held { pttl_ms: 3 })
        );
        // A bare 0 is a fresh unfenced hold; a fenced request must get its token.
        assert!(req.decode(&Reply::Int(0)).is_err());
        let unfenced = AcquireRequest {
            fenced: false,
            ..request()
        };
        assert_eq!(
            unfenced.decode(&Reply::Int(0)),
            Ok(AcquireReply::Granted(Granted {
                count: 1,
                hold: "c.1".into(),
                token: None
            }))
        );
        assert!(req.decode(&Reply::Int(-1)).is_err());
        assert!(
            req.decode(&Reply::Array(vec![Reply::Int(0), Reply::Int(5)]))
                .is_err()
        );
    }

    #[test]
    fn reconciliation_stops_once_the_hold_must_have_expired() {
        // The first failure that finds the connection gone moves the bound to 1 200 (the
        // request may have run just before); later ones move nothing.
        let mut rec = Reconcile::new(request(), 100);
        assert!(matches!(
            rec.on_failure(&Failure::NotSent, 200, 0),
            ReconcileStep::RetryAt(_)
        ));
        assert!(matches!(
            rec.on_failure(&Failure::NotSent, 1_150, 0),
            ReconcileStep::RetryAt(_)
        ));
        assert_eq!(
            rec.on_failure(&Failure::NotSent, 1_201, 0),
            ReconcileStep::GiveUp
        );
    }

    #[test]
    fn a_probe_lost_with_its_connection_moves_the_bound_a_lease_on() {
        // The request may have run just before the connection went, at 600.
        let mut rec = Reconcile::new(request(), 100);
        assert!(matches!(
            rec.on_failure(&Failure::Lost, 600, 0),
            ReconcileStep::RetryAt(_)
        ));
        assert!(matches!(
            rec.on_failure(&Failure::NotSent, 1_500, 0),
            ReconcileStep::RetryAt(_)
        ));
        assert_eq!(
            rec.on_failure(&Failure::NotSent, 1_601, 0),
            ReconcileStep::GiveUp
        );
    }

    #[test]
    fn past_its_bound_a_timed_out_probe_is_asked_again() {
        // The probe, and the lost request before it, may still run: only an answer (or a
        // dropped connection) ends it.
        let mut rec = Reconcile::new(request(), 100);
        match rec.on_failure(&Failure::TimedOut, 5_000, 0) {
            ReconcileStep::RetryAt(at) => assert!(at > 5_000),
            other => panic!("gave up on a timed-out probe: {other:?}"),
        }
        // The connection found gone at 6 000: the request may have run just before, so a
        // lease on (7 000), and then nothing can run any more.
        assert!(matches!(
            rec.on_failure(&Failure::NotSent, 6_000, 0),
            ReconcileStep::RetryAt(_)
        ));
        assert!(matches!(
            rec.on_failure(&Failure::TimedOut, 6_500, 0),
            ReconcileStep::RetryAt(_)
        ));
        assert_eq!(
            rec.on_failure(&Failure::NotSent, 7_001, 0),
            ReconcileStep::GiveUp
        );
    }
}

#[cfg(test)]
mod decisions {
    use super::*;

    #[test]
    fn the_small_decisions_of_an_attempt() {
        // Only the caller listens: nobody else to wake; another listener: mark the lock.
        assert!(!others_waiting(1, true));
        assert!(others_waiting(2, true));
        assert!(others_waiting(1, false));
        assert_eq!(fixed_end(false, 100, 30), Some(130));
        assert_eq!(fixed_end(true, 100, 30), None);
        assert!(replicated(acknowledged(Some(2), false), 2));
        assert!(!replicated(acknowledged(Some(1), false), 2));
        assert!(!replicated(acknowledged(None, false), 1));
        assert_eq!(
            acknowledged(Some(3), true),
            None,
            "an adopted hold's acknowledgement is unknown"
        );
        assert!(!replicated(acknowledged(Some(3), true), 1));
    }
}
