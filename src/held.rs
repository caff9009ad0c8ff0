//! What the kinds whose holds live in sorted sets share (the semaphore, the read-write lock
//! and the fair lock): the waiting loop, the give-back of abandoned attempts, and the
//! guard's core.
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

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::background::Unreleased;
use crate::client::LockClient;
use crate::error::{Error, LostReason, Result};
use crate::protocol::release::{Found, Told, told};
use crate::protocol::resend::{SendHistory, attempt_give_up_at, give_back_give_up_at, given_back};
use crate::protocol::wait::{WaitPolicy, WaitTiming};
use crate::protocol::{Call, Millis, Reply};
use crate::waiting::{Attempts, Outcome};
use crate::watchdog::{HoldEntry, LeaseMode};

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

/// What an attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attempted {
    /// Granted; the hold's fencing token if it has one.
    Granted(Option<u64>),
    /// Not granted; the next attempt within this long.
    Wait(Millis),
    /// Not granted, but the next free capacity is kept for this waiter (a semaphore's
    /// reservation): a release wakes it first. The next attempt within this long.
    FirstInLine(Millis),
    /// A key of the kind holds something else.
    NotALock(String),
    /// It could never be granted: the caller's own holds stand in the way.
    Refused(&'static str),
    /// It could never be granted: the kind's configuration rules it out (the message
    /// names the kind). What an earlier copy of the attempt may have taken is given back.
    Invalid(String),
}

/// A kind of hold kept in a sorted set.
pub(crate) trait SetKind: Clone + Send + Sync + 'static {
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
) -> Result<Option<Held<K>>> {
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
    async fn attempt_once(&mut self) -> Outcome<Held<K>> {
        let kind = &self.kind;
        let inner = &kind.client().inner;
        // Re-sent as it was through lost replies (the hold id is its idempotency key); a
        // grant is confirmed from the first copy's send time, as the core says.
        let give_up_at = attempt_give_up_at(
            inner.clock.now(),
            inner.response_timeout.as_millis() as Millis,
        );
        // Continues the acquisition's send history: a grant is confirmed from the first
        // send of any earlier attempt that may have taken it (the core's `SendHistory`).
        let resend = self.sends.resend(self.call.clone(), give_up_at);
        let resent = match inner.drive_resend(resend).await {
            Ok(resent) => {
                self.sends.ended(None);
                resent
            }
            Err((error, gave_up)) => {
                self.sends.ended(Some(&gave_up));
                return Outcome::from_error(error, gave_up.after_loss);
            }
        };
        let claim_may_remain = resent.after_loss;
        let refused = |error| Outcome::Refused {
            error,
            claim_may_remain,
        };
        match kind.decode(&resent.reply) {
            Ok(Attempted::Granted(token)) => {
                let entry = inner.registry.grant_members(
                    kind.set_key(),
                    &self.attempt.hold,
                    kind.members(),
                    kind.lease_mode(),
                    kind.lease_ms(),
                    resent.first_sent_at,
                );
                Outcome::Granted(Held {
                    kind: kind.clone(),
                    owner: self.attempt.owner.clone(),
                    hold: self.attempt.hold.clone(),
                    token,
                    entry,
                    armed: true,
                    acquired_at: std::time::Instant::now(),
                })
            }
            Ok(Attempted::Wait(ms)) => Outcome::Busy(ms),
            Ok(Attempted::FirstInLine(ms)) => Outcome::FirstInLine(ms),
            Ok(Attempted::NotALock(what)) => refused(kind.wrong_type(what)),
            Ok(Attempted::Refused(reason)) => refused(Error::WouldDeadlock {
                name: kind.name().to_string(),
                reason,
            }),
            // An earlier copy whose reply was lost may hold something: given back.
            Ok(Attempted::Invalid(message)) => Outcome::Refused {
                error: Error::InvalidConfig(message),
                claim_may_remain: true,
            },
            Err(unreadable) => Outcome::Refused {
                error: Error::UnexpectedReply(unreadable),
                claim_may_remain: true,
            },
        }
    }
}

impl<K: SetKind> Attempts for SetAttempts<K> {
    type Won = Held<K>;

    fn attempt(
        &mut self,
        _waits: bool,
        _listening: bool,
    ) -> impl std::future::Future<Output = Outcome<Held<K>>> + Send {
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
    match give_back_found(kind, hold, hold_too, leaving).await? {
        Found::Removed => Ok(true),
        Found::Unconfirmed => Err(Error::ReleaseUnconfirmed {
            name: kind.name().to_string(),
        }),
        Found::NotHeld => Ok(false),
    }
}

/// Gives back `hold` (see [`give_back`]): what the give-back found.
async fn give_back_found<K: SetKind>(
    kind: &K,
    hold: &Arc<str>,
    hold_too: bool,
    leaving: bool,
) -> Result<Found> {
    let inner = &kind.client().inner;
    let call = kind.give_back_call(hold, hold_too, leaving);
    let give_up_at = give_back_give_up_at(
        inner.clock.now(),
        kind.lease_ms(),
        inner.watchdog_timeout.as_millis() as Millis,
        inner.response_timeout.as_millis() as Millis,
    );
    let resent = inner
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

/// The core of a guard: one hold, its lost signal, and its release.
pub(crate) struct Held<K: SetKind> {
    pub(crate) kind: K,
    pub(crate) owner: Arc<str>,
    pub(crate) hold: Arc<str>,
    pub(crate) token: Option<u64>,
    entry: Arc<HoldEntry>,
    armed: bool,
    /// For the `hold_seconds` metric.
    acquired_at: std::time::Instant,
}

impl<K: SetKind> Held<K> {
    pub(crate) fn lost(&self) -> WaitForCancellationFuture<'_> {
        self.entry.lost_token().cancelled()
    }

    pub(crate) fn lost_token(&self) -> CancellationToken {
        self.entry.lost_token().child_token()
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.entry.is_lost(&self.kind.client().inner.registry)
    }

    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        self.entry.lost_reason()
    }

    pub(crate) fn remaining_lease(&self) -> Duration {
        self.entry.remaining_lease()
    }

    pub(crate) fn lost_error(&self) -> Error {
        Error::LockLost {
            name: self.kind.name().to_string(),
            reason: self.lost_reason().unwrap_or(LostReason::OwnerFieldGone),
        }
    }

    fn disarm(&mut self) {
        self.armed = false;
        let inner = &self.kind.client().inner;
        let lease = inner.watchdog_timeout.as_millis() as u64;
        let _ = inner
            .registry
            .leave(&self.entry, self.kind.lease_mode(), None, lease);
    }

    /// Gives the hold back: `Err(LockLost)` when it had been lost, `Err(ReleaseUnconfirmed)`
    /// when a retry after a lost reply found it gone (as the core's `release::told` says,
    /// for every kind).
    pub(crate) async fn release(mut self) -> Result<()> {
        // A lease that ran out before this call is a loss, even if the watchdog task has
        // not run since: check the clock before leaving.
        self.is_lost();
        self.disarm();
        crate::observe::hold_ended(self.kind.name(), self.acquired_at.elapsed(), "released");
        let found = give_back_found(&self.kind, &self.hold, true, false).await?;
        let fixed = matches!(self.kind.lease_mode(), LeaseMode::Fixed(_));
        let name = || self.kind.name().to_string();
        match told(found, self.lost_reason(), fixed) {
            Told::Released => Ok(()),
            Told::Lost { reason, gone } => {
                if gone {
                    // Tell every other guard of this hold (a read re-entered through it).
                    self.kind.client().inner.registry.gone(&self.entry);
                }
                Err(Error::LockLost {
                    name: name(),
                    reason,
                })
            }
            Told::Unconfirmed => Err(Error::ReleaseUnconfirmed { name: name() }),
        }
    }
}

impl<K: SetKind> Drop for Held<K> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let lease_left = self.remaining_lease();
        self.disarm();
        crate::observe::hold_ended(self.kind.name(), self.acquired_at.elapsed(), "dropped");
        let kind = self.kind.clone();
        let inner = kind.client().inner.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let hold = self.hold.clone();
        let mut unfinished = Unreleased::new(kind.name(), lease_left);
        inner.background.spawn(&runtime, async move {
            let outcome = give_back(&kind, &hold, true, false).await;
            unfinished.ran();
            if let Err(err) = outcome {
                tracing::warn!(lock = %kind.name(), error = %err, "dropped guard: background release failed; the hold expires with its lease");
            }
        });
    }
}
