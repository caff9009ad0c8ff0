//! What the kinds whose holds live in sorted sets share (the semaphore, the read-write lock
//! and the fair lock): their attempts in the one waiting loop, and the give-back (of an
//! abandoned attempt, and of a guard's hold: their [`GiveBack`]). Their guards are the
//! one generic [`Guard`] (`src/guard.rs`).
//!
//! A hold of such a kind is n members `<hold id>:1..n` of a sorted set (n = 1 but for a
//! semaphore acquisition of n permits), each scored by its deadline on Redis's clock; the
//! hold id is `<owner>\x01<request id>` (a semaphore's: the request id). So:
//! * the id is its own idempotency key: a retried acquire finds the hold an earlier copy
//!   took, and a give-back removes only its own members ("exactly once", "release is
//!   true");
//! * the one watchdog renews it as a semaphore acquisition (`lua/sem_renew.lua`) and
//!   tells its loss the same way.
//!
//! A kind plugs in through [`SetKind`]: the calls to attempt and to give back, how to
//! read an attempt's reply, and the channel its waiters listen on (`lock_api`'s raw
//! trait, in miniature).

use std::sync::Arc;
use std::time::Duration;

use crate::client::LockClient;
use crate::error::{Error, Result};
use crate::guard::{GiveBack, GivingBack, Grant, Guard, GuardKind};
use crate::protocol::attempted::Attempted;
use crate::protocol::release::Found;
use crate::protocol::release::Leaving;
use crate::protocol::resend::{SendHistory, attempt_give_up_at, give_back_give_up_at, given_back};
use crate::protocol::wait::{WaitPolicy, WaitTiming};
use crate::protocol::{Call, Millis, Reply};
use crate::waiting::{Attempts, Outcome};
use crate::watchdog::{HoldShape, LeaseMode};

/// One acquisition being attempted.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    /// `<owner>\x01<request id>` (a semaphore's: the request id): the hold's id, the same
    /// on every retry.
    pub(crate) hold: Arc<str>,
    /// The hold's owner (a semaphore acquisition has none: its hold id).
    pub(crate) owner: Arc<str>,
    /// The caller waits (it may queue or reserve).
    pub(crate) waits: bool,
    /// The owner was named explicitly (its holds from other handles count as its own).
    pub(crate) explicit_owner: bool,
    /// The live hold this attempt re-enters through (a guard's `reenter`).
    pub(crate) joins: Option<Arc<str>>,
}

/// A kind of hold kept in a sorted set.
pub(crate) trait SetKind: Clone + Send + Sync + 'static {
    /// The kind, as the metrics label it.
    const KIND: &'static str;
    /// The public handle whose guard holds this kind's holds.
    type Handle: GuardKind;
    /// The handle, and what its guard knows about a hold of this kind.
    fn guarded(&self) -> (Self::Handle, <Self::Handle as GuardKind>::Detail);
    fn client(&self) -> &LockClient;
    fn name(&self) -> &Arc<str>;
    fn lease_mode(&self) -> LeaseMode;
    /// The sorted set that holds its holds (what the watchdog renews).
    fn set_key(&self) -> &Arc<str>;
    /// The channel a waiter listens on.
    fn channel(&self, attempt: &Attempt) -> Arc<str>;
    /// How a waiter of this kind waits (the core's policy for it).
    fn wait_policy(&self, timing: WaitTiming) -> WaitPolicy;
    /// How many members `<hold id>:1..n` one hold has (a semaphore acquisition: its
    /// permits).
    fn members(&self) -> u32 {
        1
    }
    /// What a hold is in Redis, for the watchdog: members of [`SetKind::set_key`] by
    /// default.
    fn shape(&self) -> HoldShape {
        HoldShape::SetMembers(self.members())
    }
    fn attempt_call(&self, attempt: &Attempt) -> Call;
    fn decode(&self, reply: &Reply) -> std::result::Result<Attempted, String>;
    /// Gives back `hold` (when `hold_too`) and takes the waiter `hold` out of any queue or
    /// reservation (when `leaving`).
    fn give_back_call(&self, hold: &Arc<str>, hold_too: bool, leaving: bool) -> Call;
    fn wrong_type(&self, found: String) -> Error;

    fn lease_ms(&self) -> u64 {
        match self.lease_mode() {
            LeaseMode::Watchdog => self.client().inner.watchdog_timeout.as_millis() as u64,
            LeaseMode::Fixed(lease) => lease.as_millis() as u64,
        }
    }
}

/// Acquires `attempt` within `wait` (`None`: no limit; zero: one attempt), through the
/// one waiting loop (`src/waiting.rs`, deciding in `protocol::wait`).
pub(crate) async fn acquire_until<K: SetKind>(
    kind: &K,
    attempt: Attempt,
    wait: Option<Duration>,
) -> Result<Option<Guard<K::Handle>>> {
    let inner = &kind.client().inner;
    let policy = kind.wait_policy(inner.wait_timing());
    let channel = kind.channel(&attempt);
    let attempts = SetAttempts {
        call: kind.attempt_call(&attempt),
        kind: kind.clone(),
        attempt,
        sends: SendHistory::default(),
    };
    crate::waiting::acquire(
        inner,
        K::KIND,
        kind.name(),
        &channel,
        policy,
        wait.map(crate::keys::ceil_ms),
        attempts,
    )
    .await
}

/// A set kind's attempts, for the one waiting loop.
struct SetAttempts<K: SetKind> {
    kind: K,
    attempt: Attempt,
    /// The attempt's call: the same on every attempt (its hold id is its idempotency key).
    call: Call,
    /// The send history of the acquisition's attempts.
    sends: SendHistory,
}

impl<K: SetKind> SetAttempts<K> {
    async fn attempt_once(&mut self) -> Outcome<Guard<K::Handle>> {
        let kind = &self.kind;
        let inner = &kind.client().inner;
        // Re-sent as it was through lost replies (the hold id is its idempotency key); a
        // grant is confirmed from the first copy's send time, as the core says.
        let give_up_at = attempt_give_up_at(
            inner.calls.clock.now(),
            inner.calls.response_timeout.as_millis() as Millis,
        );
        // Continues the acquisition's send history: a grant is confirmed from the first
        // send of any earlier attempt that may have taken it (the core's `SendHistory`).
        let resend = self.sends.resend(self.call.clone(), give_up_at);
        let resent = match inner.calls.drive_resend(resend).await {
            Ok(resent) => {
                self.sends.ended(None);
                resent
            }
            Err((error, gave_up)) => {
                self.sends.ended(Some(&gave_up));
                return Outcome::from_error(error, gave_up.after_loss);
            }
        };
        let attempted = match kind.decode(&resent.reply) {
            Ok(attempted) => attempted,
            // Whatever it was, an earlier copy whose reply was lost may hold something:
            // given back.
            Err(unreadable) => {
                return Outcome::Refused {
                    error: Error::UnexpectedReply(unreadable),
                    claim_may_remain: true,
                };
            }
        };
        // Whether a refusal may leave something behind is the core's call.
        let claim_may_remain = attempted.claim_may_remain(resent.after_loss);
        let refused = |error| Outcome::Refused {
            error,
            claim_may_remain,
        };
        match attempted {
            Attempted::Granted(token) => {
                let held = crate::watchdog::SetMembers {
                    kind: K::KIND,
                    key: kind.set_key(),
                    id: &self.attempt.hold,
                    shape: kind.shape(),
                };
                let entry = inner.registry.grant_members(
                    held,
                    kind.lease_mode(),
                    kind.lease_ms(),
                    resent.first_sent_at,
                );
                let (handle, detail) = kind.guarded();
                let grant = Grant {
                    client: kind.client().clone(),
                    name: kind.name().clone(),
                    mode: kind.lease_mode(),
                    owner: self.attempt.owner.clone(),
                    hold: self.attempt.hold.clone(),
                    token,
                    entry,
                    fixed_end: None,
                    give_back: Arc::new(SetGiveBack(kind.clone())),
                };
                Outcome::Granted(Guard::new(handle, detail, grant))
            }
            Attempted::Wait(ms) => Outcome::Busy(ms),
            Attempted::FirstInLine(ms) => Outcome::FirstInLine(ms),
            Attempted::NotALock(what) => refused(kind.wrong_type(what)),
            Attempted::Refused(reason) => refused(Error::WouldDeadlock {
                name: kind.name().to_string(),
                reason,
            }),
            Attempted::Invalid(message) => refused(Error::InvalidConfig(message)),
        }
    }
}

impl<K: SetKind> Attempts for SetAttempts<K> {
    type Won = Guard<K::Handle>;

    fn attempt(
        &mut self,
        _hints: crate::waiting::AttemptHints,
    ) -> impl std::future::Future<Output = Outcome<Guard<K::Handle>>> + Send {
        self.attempt_once()
    }

    fn give_back_in_background(&self) {
        let kind = self.kind.clone();
        let inner = kind.client().inner.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let hold = self.attempt.hold.clone();
        inner.background.spawn(&runtime, async move {
            if let Err(err) = give_back(&kind, &hold, true, true).await {
                tracing::debug!(lock = %kind.name(), error = %err, "cleanup of an abandoned acquire failed");
            }
        });
    }
}

/// Gives back `hold` (and its place in a queue or its reservation when `leaving`);
/// `Ok(true)` when this call gave the hold back (the reply counts the members removed).
pub(crate) async fn give_back<K: SetKind>(
    kind: &K,
    hold: &Arc<str>,
    hold_too: bool,
    leaving: bool,
) -> Result<bool> {
    let inner = &kind.client().inner;
    let give_up_at = give_back_give_up_at(
        inner.calls.clock.now(),
        kind.lease_ms(),
        inner.watchdog_timeout.as_millis() as Millis,
        inner.calls.response_timeout.as_millis() as Millis,
    );
    match give_back_found(kind, hold, hold_too, leaving, give_up_at).await? {
        Found::Removed => Ok(true),
        Found::Unconfirmed => Err(Error::ReleaseUnconfirmed {
            name: kind.name().to_string(),
        }),
        Found::NotHeld => Ok(false),
    }
}

/// Gives back `hold` (see [`give_back`]), re-sending through lost replies until
/// `give_up_at`: what the give-back found.
async fn give_back_found<K: SetKind>(
    kind: &K,
    hold: &Arc<str>,
    hold_too: bool,
    leaving: bool,
    give_up_at: Millis,
) -> Result<Found> {
    let inner = &kind.client().inner;
    let call = kind.give_back_call(hold, hold_too, leaving);
    let resent = inner
        .calls
        .resend(&call, give_up_at)
        .await
        .map_err(|(error, _)| error)?;
    match given_back(&resent, hold_too) {
        Ok(given) => Found::of_given_back(&given).ok_or_else(|| kind.wrong_type(String::new())),
        Err(unreadable) => Err(Error::UnexpectedReply(format!(
            "{unreadable} ({:?})",
            kind.name()
        ))),
    }
}

/// How a guard gives a set kind's hold back: its members (a place in a queue or a
/// reservation it cannot have while it holds).
struct SetGiveBack<K: SetKind>(K);

impl<K: SetKind> GiveBack for SetGiveBack<K> {
    fn give_back(
        &self,
        _owner: Arc<str>,
        hold: Arc<str>,
        // A set kind's members carry their own deadlines: its release has no expiry to
        // re-arm, and no first form.
        leaving: Leaving,
    ) -> GivingBack {
        let kind = self.0.clone();
        let give_up_at = leaving.give_up_at;
        Box::pin(async move { give_back_found(&kind, &hold, true, false, give_up_at).await })
    }
}

/// Sends a force-delete (`lua/force_delete.lua`, see `protocol::force`): the live holds it
/// deleted, or the type of a key that is not a sorted set (nothing was written).
pub(crate) async fn force_delete(
    client: &LockClient,
    call: &Call,
) -> Result<std::result::Result<u64, String>> {
    let reply = client.inner.calls.eval(call).await?;
    match crate::protocol::force::decode(&reply) {
        Ok(crate::protocol::force::ForceDeleted::Holds(holds)) => Ok(Ok(holds)),
        Ok(crate::protocol::force::ForceDeleted::NotOurs(found)) => Ok(Err(found)),
        Err(unreadable) => Err(Error::UnexpectedReply(unreadable)),
    }
}
