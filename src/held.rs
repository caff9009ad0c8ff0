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
use std::time::{Duration, Instant};

use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use crate::client::LockClient;
use crate::error::{Error, LostReason, Result};
use crate::protocol::backoff::Backoff;
use crate::protocol::resend::{GivenBack, given_back};
use crate::protocol::{Call, Millis, Reply};
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
    /// Whether to subscribe before the first attempt (a channel shared by every waiter
    /// of the lock) rather than after a failed one (a channel of the waiter's own: the
    /// subscription is then paid only by those who wait).
    fn listen_first(&self) -> bool;
    /// When it subscribes after a failed attempt: whether it then waits for the server to
    /// confirm the subscription and attempts again (a release meanwhile is not missed),
    /// rather than going to sleep at once (such a release then costs at most one pause).
    fn confirms_listening(&self) -> bool {
        true
    }
    /// How many members `<hold id>:1..n` one hold has (a semaphore acquisition: its
    /// permits).
    fn members(&self) -> u32 {
        1
    }
    /// Whether a grant hands the wake-up on to the next local waiter (readers go in
    /// together).
    fn shares(&self) -> bool;
    /// At least this often a waiter re-attempts (it may keep a reservation or a place in
    /// a queue alive by doing so).
    fn recheck(&self) -> Duration;
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

/// Acquires `attempt` until `deadline` (`None`: no limit).
pub(crate) async fn acquire_until<K: SetKind>(
    kind: &K,
    attempt: Attempt,
    deadline: Option<Instant>,
) -> Result<Option<Held<K>>> {
    let inner = &kind.client().inner;
    let mut listener =
        (attempt.waits && kind.listen_first()).then(|| inner.hub.listen(&kind.channel(&attempt)));
    // Gives back what this acquisition may hold (or its place in a queue) if the caller
    // goes away, or an attempt's outcome stays unknown.
    let mut cleanup = Cleanup {
        kind: Some(kind.clone()),
        hold: attempt.hold.clone(),
    };
    let call = kind.attempt_call(&attempt);
    let started = Instant::now();
    let mut spin = Backoff::SPIN;
    loop {
        // Re-sent as it was through lost replies (the hold id is its idempotency key); a
        // grant is confirmed from the first copy's send time, as the core says.
        let give_up_at = inner.clock.now() + 3 * inner.response_timeout.as_millis() as Millis;
        let resent = inner
            .resend(&call, give_up_at)
            .await
            .map_err(|(error, _)| error)?;
        let sent_at = resent.first_sent_at;
        let outcome = kind.decode(&resent.reply).map_err(Error::UnexpectedReply)?;
        let pause = match outcome {
            Attempted::Granted(token) => {
                cleanup.kind = None;
                if kind.shares()
                    && let Some(listener) = &listener
                {
                    listener.pass_on();
                }
                let entry = inner.registry.grant_members(
                    kind.set_key(),
                    &attempt.hold,
                    kind.members(),
                    kind.lease_mode(),
                    kind.lease_ms(),
                    sent_at,
                );
                crate::observe::acquire_ended(kind.name(), started.elapsed(), "acquired");
                return Ok(Some(Held {
                    kind: kind.clone(),
                    owner: attempt.owner,
                    hold: attempt.hold,
                    token,
                    entry,
                    armed: true,
                }));
            }
            Attempted::Wait(ms) => Duration::from_millis(ms),
            Attempted::NotALock(what) => {
                cleanup.kind = None;
                return Err(kind.wrong_type(what));
            }
            Attempted::Refused(reason) => {
                cleanup.kind = None;
                return Err(Error::WouldDeadlock {
                    name: kind.name().to_string(),
                    reason,
                });
            }
            // The cleanup stays: an earlier copy whose reply was lost may hold something.
            Attempted::Invalid(message) => return Err(Error::InvalidConfig(message)),
        };
        let mut pause = pause.min(kind.recheck());
        if let Some(deadline) = deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                if !attempt.waits {
                    // A single attempt never queues or reserves: nothing to give back.
                    cleanup.kind = None;
                }
                return Ok(None);
            }
            pause = pause.min(left);
        }
        if !attempt.waits {
            cleanup.kind = None;
            return Ok(None);
        }
        let listener = match &mut listener {
            Some(listener) => listener,
            None => {
                // Subscribed only now that it waits; a release before the subscription
                // took effect would be missed, so attempt again once it has (or, for a
                // kind that does not confirm, sleep at most one pause).
                let fresh = listener.insert(inner.hub.listen(&kind.channel(&attempt)));
                if kind.confirms_listening() {
                    let _ = tokio::time::timeout(inner.response_timeout, fresh.ready()).await;
                    continue;
                }
                fresh
            }
        };
        if listener.denied() {
            pause = pause.min(Duration::from_micros(spin.pause(inner.jitter())));
            tokio::time::sleep(pause).await;
            continue;
        }
        tokio::select! {
            _ = listener.notified() => {}
            _ = tokio::time::sleep(pause) => {}
        }
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
    let call = kind.give_back_call(hold, hold_too, leaving);
    // Re-sent for as long as the hold could live (its lease, which for a fixed lease may
    // be longer than the watchdog's): a give-back that stopped earlier would leave the
    // hold of an abandoned acquire behind, an orphan until its lease ends ("no orphans").
    let lease = Duration::from_millis(kind.lease_ms());
    let bound = lease
        .max(inner.watchdog_timeout)
        .max(inner.response_timeout);
    let give_up_at = inner.clock.now() + bound.as_millis() as Millis;
    let resent = inner
        .resend(&call, give_up_at)
        .await
        .map_err(|(error, _)| error)?;
    match given_back(&resent, hold_too) {
        Ok(GivenBack::Removed) => Ok(true),
        Ok(GivenBack::Unconfirmed) => Err(Error::ReleaseUnconfirmed {
            name: kind.name().to_string(),
        }),
        Ok(GivenBack::NotHeld) => Ok(false),
        Ok(GivenBack::NotALock) => Err(kind.wrong_type(String::new())),
        Err(unreadable) => Err(Error::UnexpectedReply(format!(
            "{unreadable} ({:?})",
            kind.name()
        ))),
    }
}

/// Gives back, in the background, what an acquisition whose caller went away may hold (a
/// hold won by a reply that came too late, a reservation, a place in a queue).
struct Cleanup<K: SetKind> {
    kind: Option<K>,
    hold: Arc<str>,
}

impl<K: SetKind> Drop for Cleanup<K> {
    fn drop(&mut self) {
        let Some(kind) = self.kind.take() else {
            return;
        };
        let inner = kind.client().inner.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let hold = self.hold.clone();
        inner.background.spawn(&runtime, async move {
            if let Err(err) = give_back(&kind, &hold, true, true).await {
                tracing::debug!(lock = %kind.name(), error = %err, "cleanup of an abandoned acquire failed");
            }
        });
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
    /// when a retry after a lost reply found it gone.
    pub(crate) async fn release(mut self) -> Result<()> {
        let lost = if self.is_lost() {
            self.lost_reason()
        } else {
            None
        };
        self.disarm();
        let given = give_back(&self.kind, &self.hold, true, false).await?;
        if let Some(reason) = lost {
            return Err(Error::LockLost {
                name: self.kind.name().to_string(),
                reason,
            });
        }
        if !given {
            return Err(Error::LockLost {
                name: self.kind.name().to_string(),
                reason: LostReason::OwnerFieldGone,
            });
        }
        Ok(())
    }
}

impl<K: SetKind> Drop for Held<K> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.disarm();
        let kind = self.kind.clone();
        let inner = kind.client().inner.clone();
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| inner.runtime.clone());
        let hold = self.hold.clone();
        inner.background.spawn(&runtime, async move {
            if let Err(err) = give_back(&kind, &hold, true, false).await {
                tracing::warn!(lock = %kind.name(), error = %err, "dropped guard: background release failed; the hold expires with its lease");
            }
        });
    }
}
