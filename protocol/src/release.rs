//! Giving back one hold, exactly once.
//!
//! One [`ReleaseOp`] is one logical release: every retry sends the same request id, so the
//! script applies it at most once (`lua/release.lua`). It names the hold, so it can never
//! give back a newer hold of the same owner. Its outcome is true: `Released` only when
//! this release gave the hold back; a retry that finds the hold gone after an attempt
//! whose reply was lost cannot know whether that attempt did it, and says so
//! (`Unconfirmed`) instead of claiming success.

use std::sync::Arc;

use super::hold::{HoldState, Rearm};
use super::lane::{Lane, Resolved};
use super::planted::{self, Defect};
use super::{Call, Env, Failure, LockKeys, Machine, Millis, Next, Reply, ScriptId, args, backoff};

/// One release in progress.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReleaseOp {
    owner: Arc<str>,
    hold: Arc<str>,
    request: Arc<str>,
    give_up_at: Millis,
    attempts: u32,
    may_have_run: bool,
    rearm: Option<Rearm>,
    /// Sends `lua/release_first.lua` (the string form only) until it answers that the hold
    /// is in the hash form; then `lua/release.lua`.
    first_hold: bool,
}

/// How a release ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReleaseOutcome {
    /// This release gave the hold back; `remaining` holds of the owner remain (0: the lock
    /// was freed), `None` when a retry found its own earlier attempt applied.
    Released {
        /// Holds left, when known.
        remaining: Option<u64>,
    },
    /// The hold had already ended before this release (nothing was written).
    NotHeld,
    /// An attempt's reply was lost and the hold is gone now: that attempt gave it back, or
    /// the hold had ended before. Nothing else was touched.
    Unconfirmed,
    /// The key is not one of our locks.
    NotALock,
    /// Redis could not be reached before the hold's lease ran out, or answered with a
    /// permanent error.
    Failed(Failure),
}

/// What a guard leaving its hold (released, dropped) takes along, in the order the core
/// requires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Leaving {
    /// Until when its release keeps retrying.
    pub give_up_at: Millis,
    /// The expiry re-arm its release carries, when guards of the hold remain here.
    pub rearm: Option<Rearm>,
    /// Whether it was the last local guard of the hold (renewal stops).
    pub last: bool,
    /// Whether the hold may still be a first hold's string: this client never re-entered
    /// it, and it was granted with count 1 and no token ([`HoldState::hash_form`] is
    /// false). Its release then sends `lua/release_first.lua` first.
    pub first_hold: bool,
}

/// One guard of `hold` leaves at `now` to be given back: first the release's retry bound
/// (from the lease as confirmed while the guard still counted: the re-arm below may lower
/// the confirmed deadline, and a release must not stop retrying before the hold can have
/// ended), then the guard leaves (`watchdog`: it was renewed by the watchdog; `fixed_end`:
/// its fixed lease's end), then, if guards remain here, the re-arm of the expiry to what
/// they need.
pub fn leave(
    hold: &mut HoldState,
    now: Millis,
    response_ms: Millis,
    watchdog: bool,
    fixed_end: Option<Millis>,
    watchdog_lease_ms: Millis,
) -> Leaving {
    let give_up_at = super::timing::release_give_up_at(hold, now, response_ms);
    let last = hold.leave(watchdog, fixed_end);
    let rearm = if last {
        None
    } else {
        hold.prepare_rearm(now, watchdog_lease_ms)
    };
    Leaving {
        give_up_at,
        rearm,
        last,
        first_hold: !hold.hash_form(),
    }
}

/// What a guard's release found, whatever the kind: the kinds' replies
/// ([`ReleaseOutcome`], [`GivenBack`](super::resend::GivenBack)) read alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Found {
    /// This release gave the hold back.
    Removed,
    /// The hold had ended before this release.
    NotHeld,
    /// A copy whose reply was lost may have given it back; it is gone now.
    Unconfirmed,
}

impl Found {
    /// A give-back's reading; `None` for keys that are not of the kind.
    pub fn of_given_back(given: &super::resend::GivenBack) -> Option<Found> {
        use super::resend::GivenBack;
        match given {
            GivenBack::Removed => Some(Found::Removed),
            GivenBack::NotHeld => Some(Found::NotHeld),
            GivenBack::Unconfirmed => Some(Found::Unconfirmed),
            GivenBack::NotALock => None,
        }
    }

    /// A plain-lock release's outcome; `None` when it is not one of these.
    pub fn of_release(outcome: &ReleaseOutcome) -> Option<Found> {
        match outcome {
            ReleaseOutcome::Released { .. } => Some(Found::Removed),
            ReleaseOutcome::NotHeld => Some(Found::NotHeld),
            ReleaseOutcome::Unconfirmed => Some(Found::Unconfirmed),
            ReleaseOutcome::NotALock | ReleaseOutcome::Failed(_) => None,
        }
    }
}

/// What a guard's release tells its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Told {
    /// `Ok`: this release gave the hold back, and the hold was never lost before.
    Released,
    /// The hold was lost before the release: the critical section was not protected to
    /// the end. `gone`: the release found it gone, so every other guard of the hold must
    /// be told too.
    Lost {
        /// Why.
        reason: super::hold::LostReason,
        /// Whether the hold is now known to be gone (tell its other guards).
        gone: bool,
    },
    /// A reply was lost and the hold is gone: whether this release or an earlier loss
    /// ended it cannot be told.
    Unconfirmed,
}

/// What a guard's release tells its caller, for every kind: from what the release
/// `found`, the loss the client had `noticed` before or during it, and whether the hold
/// had a fixed lease (a hold found gone without a noticed loss ran out of it) or the
/// watchdog's (it was deleted, flushed or replaced).
pub fn told(found: Found, noticed: Option<super::hold::LostReason>, fixed_lease: bool) -> Told {
    use super::hold::LostReason;
    match (found, noticed) {
        (Found::Removed, None) => Told::Released,
        (Found::Removed | Found::Unconfirmed, Some(reason)) => Told::Lost {
            reason,
            gone: false,
        },
        (Found::NotHeld, noticed) => Told::Lost {
            reason: noticed.unwrap_or(if fixed_lease {
                LostReason::LeaseElapsed
            } else {
                LostReason::OwnerFieldGone
            }),
            gone: true,
        },
        (Found::Unconfirmed, None) => Told::Unconfirmed,
    }
}

/// The next step of a release.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReleaseStep {
    /// Finished.
    Done(ReleaseOutcome),
    /// Send the same call again at this time.
    RetryAt(Millis),
}

impl ReleaseOp {
    /// A release of `hold` (held by `owner`) with request id `request`. Retries stop at
    /// `give_up_at`: by then the hold has expired anyway.
    pub fn new(owner: Arc<str>, hold: Arc<str>, request: Arc<str>, give_up_at: Millis) -> Self {
        ReleaseOp {
            owner,
            hold,
            request,
            give_up_at,
            attempts: 0,
            may_have_run: false,
            rearm: None,
            first_hold: false,
        }
    }

    /// The same release of a hold that may still be a first hold's string
    /// ([`Leaving::first_hold`]): it sends `lua/release_first.lua` first.
    pub fn first_hold(mut self, first_hold: bool) -> Self {
        self.first_hold = first_hold;
        self
    }

    /// The same release, re-arming the expiry if it is partial (see
    /// [`HoldState::prepare_rearm`](super::hold::HoldState::prepare_rearm)).
    pub fn with_rearm(mut self, rearm: Option<Rearm>) -> Self {
        self.rearm = rearm;
        self
    }

    /// The hold being released.
    pub fn hold(&self) -> &Arc<str> {
        &self.hold
    }

    /// The request id every attempt sends.
    pub fn request(&self) -> &str {
        &self.request
    }

    /// How many attempts failed so far (0: the first attempt is the only one).
    pub fn retries(&self) -> u32 {
        self.attempts
    }

    /// The call to send: `release_first.lua` while the hold may be a first hold's string,
    /// else `release.lua`; every retry sends the same.
    pub fn call(&self, keys: &LockKeys) -> Call {
        if self.first_hold {
            return Call {
                script: ScriptId::ReleaseFirst,
                keys: vec![keys.hash.clone()],
                args: vec![
                    args::joined(&["\u{1}", &self.hold, "\u{1}", &self.owner]),
                    keys.channel.clone(),
                    keys.publish_flag(),
                ],
            };
        }
        Call {
            script: ScriptId::Release,
            keys: vec![keys.hash.clone()],
            args: {
                // '<tag>.<seq>': sent in two parts, so the script need not parse it.
                let (tag, seq) = self.request.rsplit_once('.').unwrap_or((&self.request, ""));
                let (ms, expected) = self.rearm.map_or((0, 0), |r| (r.ms, r.expected));
                vec![
                    self.owner.clone(),
                    self.hold.clone(),
                    args::joined(&[tag]),
                    args::joined(&[seq]),
                    keys.channel.clone(),
                    args::number(ms),
                    args::number(expected),
                    keys.publish_flag(),
                ]
            },
        }
    }

    /// Reads the reply to [`ReleaseOp::call`]: `Ok(None)` when `release_first.lua` found
    /// the hash form (it wrote nothing); [`ReleaseOp::call`] is then `release.lua`, with
    /// the same request id, to send next.
    pub fn read(&mut self, reply: &Reply) -> Result<Option<ReleaseOutcome>, String> {
        if self.first_hold && reply.int() == Some(-4) {
            if planted::is(Defect::HashFormReadAsReleased) {
                return Ok(Some(ReleaseOutcome::Released { remaining: Some(0) }));
            }
            self.first_hold = false;
            return Ok(None);
        }
        self.on_reply(reply).map(Some)
    }

    /// Reads `release.lua`'s reply (`release_first.lua`'s reads alike, but for its -4:
    /// see [`ReleaseOp::read`]).
    pub fn on_reply(&self, reply: &Reply) -> Result<ReleaseOutcome, String> {
        match reply.int() {
            Some(n) if n >= 0 => Ok(ReleaseOutcome::Released {
                remaining: Some(n as u64),
            }),
            Some(-3) => Ok(ReleaseOutcome::Released { remaining: None }),
            Some(-1) if planted::is(Defect::ReleaseClaimsGoneHold) => {
                Ok(ReleaseOutcome::Released { remaining: None })
            }
            Some(-1) if self.may_have_run => Ok(ReleaseOutcome::Unconfirmed),
            Some(-1) => Ok(ReleaseOutcome::NotHeld),
            Some(-2) => Ok(ReleaseOutcome::NotALock),
            _ => Err(format!("release: {reply:?}")),
        }
    }

    /// An attempt got no reply at `now`.
    pub fn on_failure(&mut self, failure: &Failure, now: Millis, jitter: u64) -> ReleaseStep {
        if failure.may_have_run() {
            self.may_have_run = true;
        }
        let permanent = match failure {
            Failure::Permanent(_) => true,
            Failure::Transient(_) => planted::is(Defect::ReleaseGivesUpOnTransient),
            _ => false,
        };
        if permanent || now >= self.give_up_at {
            return ReleaseStep::Done(if self.may_have_run {
                ReleaseOutcome::Unconfirmed
            } else {
                ReleaseOutcome::Failed(failure.clone())
            });
        }
        self.attempts += 1;
        ReleaseStep::RetryAt((now + backoff(self.attempts, jitter)).min(self.give_up_at))
    }
}

/// A whole release of one hold in its (lock, owner) lane: an earlier acquire of the
/// owner whose reply was lost is resolved first (a hold it took is given back, so this
/// release's record cannot hide it), then the hold is given back by one [`ReleaseOp`].
/// Probes that get no reply are retried until `give_up_at`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReleaseFlow {
    keys: LockKeys,
    owner: Arc<str>,
    hold: Arc<str>,
    give_up_at: Millis,
    rearm: Option<Rearm>,
    first_hold: bool,
    stage: FlowStage,
    abandoned: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum FlowStage {
    Probing,
    ProbeBackoff,
    /// Giving back a hold an earlier lost acquire took.
    GivingBack(ReleaseOp),
    /// The release itself.
    Releasing(ReleaseOp),
    Finished,
}

impl ReleaseFlow {
    /// A release of `hold` of `owner`, re-arming the expiry as `rearm` says.
    pub fn new(
        keys: LockKeys,
        owner: Arc<str>,
        hold: Arc<str>,
        give_up_at: Millis,
        rearm: Option<Rearm>,
    ) -> Self {
        ReleaseFlow {
            keys,
            owner,
            hold,
            give_up_at,
            rearm,
            first_hold: false,
            stage: FlowStage::Finished,
            abandoned: None,
        }
    }

    /// The same release of a hold that may still be a first hold's string
    /// ([`Leaving::first_hold`]); a hold a lost acquire took is given back with
    /// `release.lua` either way.
    pub fn first_hold(mut self, first_hold: bool) -> Self {
        self.first_hold = first_hold;
        self
    }

    /// A hold that a lost earlier acquire took and that could not be given back: it
    /// expires with its lease.
    pub fn abandoned(&self) -> Option<&Arc<str>> {
        self.abandoned.as_ref()
    }

    /// The release itself, once it was sent (its request id and retries).
    pub fn release(&self) -> Option<&ReleaseOp> {
        match &self.stage {
            FlowStage::Releasing(op) => Some(op),
            _ => None,
        }
    }

    /// A give-back (`giving_back`) or the release itself got no reply.
    fn op_failed(
        &mut self,
        env: &mut dyn Env,
        lane: &mut Lane,
        mut op: ReleaseOp,
        giving_back: bool,
        failure: Failure,
    ) -> Next<ReleaseResult> {
        match op.on_failure(&failure, env.now(), env.jitter()) {
            ReleaseStep::RetryAt(at) => {
                self.stage = if giving_back {
                    FlowStage::GivingBack(op)
                } else {
                    FlowStage::Releasing(op)
                };
                Next::SleepUntil(at)
            }
            // A hold that cannot be given back expires with its lease; the release goes on
            // unless Redis cannot be reached at all.
            ReleaseStep::Done(ReleaseOutcome::Failed(failure)) if giving_back => {
                self.abandoned = Some(op.hold().clone());
                Next::Done(Ok(ReleaseOutcome::Failed(failure)))
            }
            ReleaseStep::Done(outcome) if giving_back => {
                if outcome == ReleaseOutcome::Unconfirmed {
                    self.abandoned = Some(op.hold().clone());
                }
                self.start(env, lane)
            }
            ReleaseStep::Done(outcome) => {
                self.stage = FlowStage::Releasing(op);
                Next::Done(Ok(outcome))
            }
        }
    }
}

impl Machine for ReleaseFlow {
    type Ctx = Lane;
    type Outcome = ReleaseResult;

    /// Starts (or goes on after resolving an earlier lost acquire).
    fn start(&mut self, env: &mut dyn Env, lane: &mut Lane) -> Next<ReleaseResult> {
        if let Some(probe) = lane.probe(&self.keys) {
            self.stage = FlowStage::Probing;
            return Next::Send(probe);
        }
        let op = ReleaseOp::new(
            self.owner.clone(),
            self.hold.clone(),
            env.next_id(),
            self.give_up_at,
        )
        .with_rearm(self.rearm)
        .first_hold(self.first_hold);
        let call = op.call(&self.keys);
        self.stage = FlowStage::Releasing(op);
        Next::Send(call)
    }

    /// The call asked for got this reply.
    fn on_reply(
        &mut self,
        env: &mut dyn Env,
        lane: &mut Lane,
        reply: &Reply,
    ) -> Next<ReleaseResult> {
        match std::mem::replace(&mut self.stage, FlowStage::Finished) {
            FlowStage::Probing => match lane.on_probe_reply(reply) {
                Ok(Resolved::Holds { granted, .. }) => {
                    let op = ReleaseOp::new(
                        self.owner.clone(),
                        granted.hold,
                        env.next_id(),
                        self.give_up_at,
                    );
                    let call = op.call(&self.keys);
                    self.stage = FlowStage::GivingBack(op);
                    Next::Send(call)
                }
                Ok(Resolved::Nothing) | Err(_) => self.start(env, lane),
            },
            FlowStage::GivingBack(op) => match op.on_reply(reply) {
                Ok(_) => self.start(env, lane),
                Err(unreadable) => Next::Done(Err(unreadable)),
            },
            FlowStage::Releasing(mut op) => {
                let read = op.read(reply);
                let next = match read {
                    Ok(Some(outcome)) => Next::Done(Ok(outcome)),
                    // The hash form: the same release, now with release.lua.
                    Ok(None) => Next::Send(op.call(&self.keys)),
                    Err(unreadable) => Next::Done(Err(unreadable)),
                };
                self.stage = FlowStage::Releasing(op);
                next
            }
            FlowStage::ProbeBackoff | FlowStage::Finished => {
                Next::Done(Err("release: a reply nobody asked for".into()))
            }
        }
    }

    /// The call asked for got no reply.
    fn on_failure(
        &mut self,
        env: &mut dyn Env,
        lane: &mut Lane,
        failure: Failure,
    ) -> Next<ReleaseResult> {
        let now = env.now();
        match std::mem::replace(&mut self.stage, FlowStage::Finished) {
            FlowStage::Probing => {
                lane.on_probe_failure(&failure, now, env.jitter());
                if now >= self.give_up_at || matches!(failure, Failure::Permanent(_)) {
                    return Next::Done(Ok(ReleaseOutcome::Failed(failure)));
                }
                self.stage = FlowStage::ProbeBackoff;
                Next::SleepUntil(now.saturating_add(backoff(1, env.jitter())))
            }
            FlowStage::GivingBack(op) => self.op_failed(env, lane, op, true, failure),
            FlowStage::Releasing(op) => self.op_failed(env, lane, op, false, failure),
            FlowStage::ProbeBackoff | FlowStage::Finished => {
                Next::Done(Ok(ReleaseOutcome::Failed(failure)))
            }
        }
    }

    /// A sleep asked for is over.
    fn resume(&mut self, env: &mut dyn Env, lane: &mut Lane) -> Next<ReleaseResult> {
        match &self.stage {
            FlowStage::GivingBack(op) | FlowStage::Releasing(op) => Next::Send(op.call(&self.keys)),
            _ => self.start(env, lane),
        }
    }
}

/// A release's outcome, or why its reply could not be read.
pub type ReleaseResult = Result<ReleaseOutcome, String>;

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> ReleaseOp {
        ReleaseOp::new("o".into(), "c.1".into(), "c.2".into(), 1_000)
    }

    #[test]
    fn a_gone_hold_is_not_held_first_and_unconfirmed_after_a_lost_reply() {
        let mut release = op();
        assert_eq!(
            release.on_reply(&Reply::Int(-1)),
            Ok(ReleaseOutcome::NotHeld)
        );
        assert!(matches!(
            release.on_failure(&Failure::Lost, 10, 0),
            ReleaseStep::RetryAt(_)
        ));
        assert_eq!(
            release.on_reply(&Reply::Int(-1)),
            Ok(ReleaseOutcome::Unconfirmed)
        );
        assert_eq!(
            release.on_reply(&Reply::Int(-3)),
            Ok(ReleaseOutcome::Released { remaining: None })
        );
    }

    fn keys() -> LockKeys {
        LockKeys {
            hash: "p:{l}".into(),
            fence: "p:{l}:fence".into(),
            channel: "p:{l}:db0:released".into(),
            sharded: false,
        }
    }

    #[test]
    fn a_first_hold_goes_back_with_three_arguments_and_falls_back_on_a_hash() {
        let mut release = op().first_hold(true);
        let call = release.call(&keys());
        assert_eq!(call.script, ScriptId::ReleaseFirst);
        assert_eq!(&*call.args[0], "\u{1}c.1\u{1}o");
        assert_eq!(call.args.len(), 3);
        // Nothing was written: the same release goes on with release.lua.
        assert_eq!(release.read(&Reply::Int(-4)), Ok(None));
        let call = release.call(&keys());
        assert_eq!(call.script, ScriptId::Release);
        assert_eq!(&*call.args[3], "2");
        assert_eq!(
            release.read(&Reply::Int(1)),
            Ok(Some(ReleaseOutcome::Released { remaining: Some(1) }))
        );
        // -4 means something only to release_first.lua.
        assert!(op().read(&Reply::Int(-4)).is_err());
        assert_eq!(
            op().first_hold(true).read(&Reply::Int(0)),
            Ok(Some(ReleaseOutcome::Released { remaining: Some(0) }))
        );
    }

    #[test]
    fn transient_errors_are_retried_until_the_lease_is_over() {
        let mut release = op();
        let busy = Failure::Transient("BUSY".into());
        assert!(matches!(
            release.on_failure(&busy, 10, 0),
            ReleaseStep::RetryAt(_)
        ));
        assert_eq!(
            release.on_failure(&busy, 1_000, 0),
            ReleaseStep::Done(ReleaseOutcome::Failed(busy))
        );
    }
}
