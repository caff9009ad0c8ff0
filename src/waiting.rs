//! The runtime of the waiting loop: the one async shell around the core's
//! `protocol::wait::Wait`, for every kind that waits (the plain lock, the read-write lock,
//! the fair lock, the semaphore, RedLock, and the latch's wait). It makes the attempts,
//! subscribes, sleeps and wakes as the core decides, and records the acquire's span and
//! metrics. What differs between kinds is only how one attempt is made ([`Attempts`]) and
//! their [`WaitPolicy`].

use std::future::Future;
use std::sync::Arc;

use crate::client::ClientInner;
use crate::error::{Error, Result};
use crate::protocol::wait::{Tried, Wait, WaitEnd, WaitPolicy, WaitStep};
use crate::protocol::{Failure, Millis};
use crate::pubsub::Listener;

/// What one attempt found, as a kind reports it.
pub(crate) enum Outcome<G> {
    /// Granted: the guard.
    Granted(G),
    /// Someone else holds: attempt again within this long (ms).
    Busy(Millis),
    /// As `Busy`, and the next free capacity is kept for this waiter (a semaphore's
    /// reservation): a release message wakes it before any other local waiter, since a
    /// wake-up that reaches another one is wasted (it cannot take what is kept).
    FirstInLine(Millis),
    /// It can never be granted: the error for the caller. `claim_may_remain`: an earlier
    /// copy of the attempt whose reply was lost may have taken something all the same.
    Refused {
        error: Error,
        claim_may_remain: bool,
    },
    /// No usable reply: the error, and how it failed.
    Failed { error: Error, failure: Failure },
}

impl<G> Outcome<G> {
    /// An attempt's error: Redis errors are classified (`after_loss`: an earlier copy of
    /// the call may have run, whatever the last one's error says); any other error cannot
    /// be retried.
    pub(crate) fn from_error(error: Error, after_loss: bool) -> Self {
        match &error {
            Error::Redis(command) => {
                let failure =
                    crate::scripts::classify(&command.error).after_earlier_loss(after_loss);
                Outcome::Failed { error, failure }
            }
            _ => Outcome::Refused {
                error,
                claim_may_remain: after_loss,
            },
        }
    }
}

/// What the core's waiting loop says about the coming attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttemptHints {
    /// The caller is subscribed to the kind's channel.
    pub(crate) listening: bool,
    /// The lock is most likely held ([`Wait::expects_held`]).
    pub(crate) expects_held: bool,
}

/// How a kind makes one attempt (the `lock_api`-style raw part of a kind, for waiting).
pub(crate) trait Attempts: Send {
    /// The guard a grant gives.
    type Won: Send;
    /// One attempt.
    fn attempt(&mut self, hints: AttemptHints) -> impl Future<Output = Outcome<Self::Won>> + Send;
    /// Gives back, in the background, what the acquisition's attempts may have left under
    /// its id (only called for a policy that [gives back](WaitPolicy::gives_back)).
    fn give_back_in_background(&self);
    /// The listeners of a kind that waits on several channels (RedLock: one per server);
    /// `None`: the one channel passed to [`acquire`].
    fn listen_all(&self) -> Option<Vec<Listener>> {
        None
    }
}

/// What a waiter listens on: one channel, or several (woken by any).
enum Listening {
    One(Listener),
    Many(Vec<Listener>),
}

impl Listening {
    fn all(&self) -> &[Listener] {
        match self {
            Listening::One(listener) => std::slice::from_ref(listener),
            Listening::Many(listeners) => listeners,
        }
    }

    async fn ready(&self) {
        for listener in self.all() {
            listener.ready().await;
        }
    }

    /// No wake-up can come: every subscription was refused.
    fn denied(&self) -> bool {
        self.all().iter().all(Listener::denied)
    }

    async fn notified(&self) {
        match self {
            Listening::One(listener) => listener.notified().await,
            Listening::Many(listeners) => {
                crate::join::first_n(listeners.iter().map(|l| l.notified()).collect(), 1).await
            }
        }
    }

    /// Hands a wake-up on (of several channels, to each: which one woke it is not kept).
    fn pass_on(&self) {
        self.all().iter().for_each(Listener::pass_on);
    }

    fn set_first_in_line(&mut self, first: bool) {
        if let Listening::One(listener) = self {
            listener.set_first_in_line(first);
        }
    }
}

/// One acquire, in flight: what must happen if its caller drops it.
struct Acquiring<A: Attempts> {
    attempts: A,
    wait: Wait,
    listener: Option<Listening>,
    done: bool,
}

impl<A: Attempts> Drop for Acquiring<A> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self.wait.pass_on_if_dropped() {
            if let Some(listener) = &self.listener {
                listener.pass_on();
            }
        }
        if self.wait.give_back_if_dropped() {
            self.attempts.give_back_in_background();
        }
    }
}

/// Acquires through `attempts` within `wait` ms (`None`: without limit; `0`: one
/// attempt), waking on `channel`: the guard, `None` when the wait ran out, or the error.
/// Records the `redis_locks::acquire` span and the acquisition metrics for `name`.
///
/// # Cancel safety
/// Cancel-safe when the kind's attempt is: dropping it gives back what its attempts may
/// have left (as the core decides) and hands on a wake-up it did not use.
pub(crate) async fn acquire<A: Attempts>(
    inner: &ClientInner,
    kind: &'static str,
    name: &str,
    channel: &Arc<str>,
    policy: WaitPolicy,
    wait: Option<Millis>,
    attempts: A,
) -> Result<Option<A::Won>> {
    use tracing::Instrument;
    let started = tokio::time::Instant::now();
    let span = tracing::debug_span!("redis_locks::acquire", kind, lock = %name);
    let outcome = run_counted(inner, channel, policy, wait, attempts, Some(kind))
        .instrument(span)
        .await;
    let label = match &outcome {
        Ok(Some(_)) => "acquired",
        // A try without a wait found it held: not a wait that ran out.
        Ok(None) if wait == Some(0) => "would_block",
        Ok(None) => "timeout",
        Err(_) => "error",
    };
    crate::observe::acquire_ended(kind, name, started.elapsed(), label);
    outcome
}

/// [`acquire`] without the acquisition's span and metrics (a latch's wait is not an
/// acquisition, a RedLock's members are observed on their own); `counted`: whether a
/// subscribed waiter counts in the waiters gauge (as a plain lock's).
pub(crate) async fn run<A: Attempts>(
    inner: &ClientInner,
    channel: &Arc<str>,
    policy: WaitPolicy,
    wait: Option<Millis>,
    attempts: A,
    counted: bool,
) -> Result<Option<A::Won>> {
    run_counted(
        inner,
        channel,
        policy,
        wait,
        attempts,
        counted.then_some("lock"),
    )
    .await
}

/// [`run`], counting a subscribed waiter in the waiters gauge as a `counted` one (`None`:
/// not counted).
async fn run_counted<A: Attempts>(
    inner: &ClientInner,
    channel: &Arc<str>,
    policy: WaitPolicy,
    wait: Option<Millis>,
    attempts: A,
    counted: Option<&'static str>,
) -> Result<Option<A::Won>> {
    let now = inner.calls.clock.now();
    let mut acquiring = Acquiring {
        attempts,
        wait: Wait::new(policy, now, wait),
        listener: None,
        done: false,
    };
    let mut waiting_gauge = None;
    let mut step = acquiring.wait.start(now);
    loop {
        step = match step {
            WaitStep::Attempt => {
                let hints = AttemptHints {
                    listening: acquiring.wait.subscribed(),
                    expects_held: acquiring.wait.expects_held(),
                };
                let outcome = acquiring.attempts.attempt(hints).await;
                let spinning = acquiring.listener.as_ref().is_some_and(Listening::denied);
                let now = inner.calls.clock.now();
                let (tried, result) = match outcome {
                    Outcome::Granted(guard) => (Tried::Granted, Some(Ok(guard))),
                    Outcome::Busy(within) => (Tried::Busy { within }, None),
                    Outcome::FirstInLine(within) => (Tried::FirstInLine { within }, None),
                    Outcome::Refused {
                        error,
                        claim_may_remain,
                    } => (Tried::Refused { claim_may_remain }, Some(Err(error))),
                    Outcome::Failed { error, failure } => {
                        tracing::debug!(error = %error, "attempt failed");
                        (Tried::Failed(failure), Some(Err(error)))
                    }
                };
                // The random number only feeds a pause: none is drawn for a grant (the hot
                // path; drawing one costs a getrandom call).
                let jitter = match tried {
                    Tried::Granted => 0,
                    _ => inner.calls.jitter(),
                };
                let next = acquiring.wait.attempted(now, tried, spinning, jitter);
                // Which local waiter a release wakes first is the core's call.
                if let Some(listener) = &mut acquiring.listener {
                    listener.set_first_in_line(acquiring.wait.first_in_line());
                }
                if let WaitStep::Done(end) = &next {
                    acquiring.done = true;
                    return finish(&acquiring, end, result);
                }
                next
            }
            WaitStep::Subscribe { confirm_until } => {
                let listening = match acquiring.attempts.listen_all() {
                    Some(listeners) => Listening::Many(listeners),
                    None => Listening::One(inner.hub.listen(channel)),
                };
                let listener = acquiring.listener.insert(listening);
                listener.set_first_in_line(acquiring.wait.first_in_line());
                if let Some(kind) = counted {
                    waiting_gauge.get_or_insert_with(|| crate::observe::Waiting::start(kind));
                }
                if let Some(until) = confirm_until {
                    let _ =
                        tokio::time::timeout_at(inner.calls.clock.instant(until), listener.ready())
                            .await;
                }
                acquiring.wait.subscribed_at(inner.calls.clock.now())
            }
            WaitStep::Sleep {
                until,
                wake_on_release,
            } => {
                let sleep = tokio::time::sleep_until(inner.calls.clock.instant(until));
                let notified = match &acquiring.listener {
                    Some(listener) if wake_on_release => {
                        tokio::select! {
                            _ = listener.notified() => true,
                            _ = sleep => false,
                        }
                    }
                    _ => {
                        sleep.await;
                        false
                    }
                };
                acquiring.wait.woke(inner.calls.clock.now(), notified)
            }
            WaitStep::Done(end) => {
                // Only an attempt's result ends the loop (handled above).
                acquiring.done = true;
                return finish(&acquiring, &end, None);
            }
        };
    }
}

/// Carries out how the core ended the acquire; `result`: the last attempt's guard or error.
fn finish<A: Attempts>(
    acquiring: &Acquiring<A>,
    end: &WaitEnd,
    result: Option<Result<A::Won>>,
) -> Result<Option<A::Won>> {
    let pass_on = match end {
        WaitEnd::Granted { pass_on }
        | WaitEnd::Failed { pass_on, .. }
        | WaitEnd::TimedOut { pass_on, .. } => *pass_on,
    };
    if pass_on {
        if let Some(listener) = &acquiring.listener {
            listener.pass_on();
        }
    }
    if let WaitEnd::TimedOut {
        give_back: true, ..
    }
    | WaitEnd::Failed {
        give_back: true, ..
    } = end
    {
        acquiring.attempts.give_back_in_background();
    }
    match (end, result) {
        (WaitEnd::Granted { .. }, Some(Ok(guard))) => Ok(Some(guard)),
        (WaitEnd::TimedOut { .. }, _) => Ok(None),
        (WaitEnd::Failed { .. }, Some(Err(error))) => Err(error),
        (_, other) => Err(Error::UnexpectedReply(format!(
            "waiting loop: the core ended with {end:?} after {}",
            match other {
                Some(Ok(_)) => "a grant",
                Some(Err(_)) => "an error",
                None => "no attempt",
            }
        ))),
    }
}
