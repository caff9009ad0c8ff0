//! The async shell around the core's operations ([`crate::protocol::Machine`]): it sends
//! the calls an operation asks for, sleeps when it asks to, and feeds the results back. It
//! decides nothing about the protocol; every decision (what to send next, the send time,
//! which lease a grant gets, what is re-sent and for how long, when to give up) is the
//! operation's.

use redis::RedisError;

use crate::calls::Calls;
use crate::error::{Error, Result};
use crate::protocol::{Call, Reply};
use crate::protocol::{Env, Machine, Millis, Next, ScriptId};
use crate::scripts::CallError;

/// The core's view of the client: its monotonic clock, random jitter and request ids.
pub(crate) struct ClientEnv<'a>(pub(crate) &'a Calls);

impl Env for ClientEnv<'_> {
    fn now(&self) -> Millis {
        self.0.clock.now()
    }

    fn jitter(&mut self) -> u64 {
        self.0.jitter()
    }

    fn next_id(&mut self) -> std::sync::Arc<str> {
        self.0.next_request_id()
    }
}

/// What driving an operation gave, beside its outcome.
pub(crate) struct Driven<T> {
    pub(crate) outcome: T,
    /// The error of the last call that failed (what the caller is told on a failure).
    pub(crate) last_error: Option<RedisError>,
    /// How many replicas acknowledged the last acquire call that got a reply (with
    /// replica acknowledgement configured).
    pub(crate) acked: Option<u32>,
}

/// Drives `machine` (in `lane`, its context) until it is done.
///
/// # Cancel safety
/// Not cancel-safe: a call may be in flight. Callers run it where dropping is handled
/// (an attempt is detached into the background, a release runs to its end).
pub(crate) async fn drive<M: Machine>(
    calls: &Calls,
    lane: &mut M::Ctx,
    machine: &mut M,
) -> Driven<M::Outcome> {
    let mut env = ClientEnv(calls);
    let mut last_error = None;
    let mut acked = None;
    let mut next = machine.start(&mut env, lane);
    loop {
        next = match next {
            Next::Send(call) => {
                // Acquires go where replica acknowledgement is waited for, and probes after
                // them on the same connection (in order); the rest on the shared one.
                let result = match call.script {
                    ScriptId::Take | ScriptId::Acquire => calls.run_acquire(&call).await,
                    ScriptId::Probe => calls.run_probe(&call).await.map(|reply| (reply, None)),
                    _ => calls.run(&call).await.map(|reply| (reply, None)),
                };
                match result {
                    Ok((reply, replicas)) => {
                        if matches!(call.script, ScriptId::Take | ScriptId::Acquire) {
                            acked = replicas;
                        }
                        machine.on_reply(&mut env, lane, &reply)
                    }
                    Err(CallError { failure, error }) => {
                        tracing::debug!(script = ?call.script, error = %error, "no reply");
                        last_error = Some(error);
                        machine.on_failure(&mut env, lane, failure)
                    }
                }
            }
            Next::SleepUntil(at) => {
                tokio::time::sleep_until(calls.clock.instant(at)).await;
                machine.resume(&mut env, lane)
            }
            Next::Done(outcome) => {
                return Driven {
                    outcome,
                    last_error,
                    acked,
                };
            }
        };
    }
}

/// The calls re-sent as they were (the core's `Resend`), driven here: they are the
/// driver's, not the call sender's (so `calls.rs` does not depend on the driver).
impl Calls {
    /// [`Calls::run`] for a read-only call (inspection), re-sent through connection
    /// errors and transient states for up to a response timeout: running it twice
    /// changes nothing, and right after a failover the first call may meet a connection
    /// to the dead node.
    pub(crate) async fn read(&self, call: &Call) -> Result<Reply> {
        let give_up_at = tokio::time::Instant::now() + self.response_timeout;
        self.resend_until(call, give_up_at).await.0
    }

    /// Sends `call`, and sends the *same* call again after a lost reply, a refused
    /// connection or a transient server state, with back-off, until `give_up_at`. Only for
    /// calls that are safe to repeat: read-only, or exactly-once by a request id carried
    /// in the call (`latch_count_down.lua`, `sem_acquire.lua`, `sem_release.lua`). Also
    /// returns whether an earlier copy may have run (a reply was lost).
    pub(crate) async fn resend_until(
        &self,
        call: &Call,
        give_up_at: tokio::time::Instant,
    ) -> (Result<Reply>, bool) {
        match self.resend(call, self.clock.ceil(give_up_at)).await {
            Ok(resent) => (Ok(resent.reply), resent.after_loss),
            Err((error, after_loss)) => (Err(error), after_loss),
        }
    }

    /// The core's [`Resend`](crate::protocol::resend::Resend) of `call` until `give_up_at`
    /// (on the client's clock), driven: the reply with the first copy's send time, or the
    /// error and whether a copy may have run.
    pub(crate) async fn resend(
        &self,
        call: &Call,
        give_up_at: crate::protocol::Millis,
    ) -> std::result::Result<crate::protocol::resend::Resent, (Error, bool)> {
        let resend = crate::protocol::resend::Resend::new(call.clone(), give_up_at);
        self.drive_resend(resend)
            .await
            .map_err(|(error, gave_up)| (error, gave_up.after_loss))
    }

    /// A [`Resend`](crate::protocol::resend::Resend) driven to its end: the reply, or the
    /// error and how it gave up.
    pub(crate) async fn drive_resend(
        &self,
        mut resend: crate::protocol::resend::Resend,
    ) -> std::result::Result<
        crate::protocol::resend::Resent,
        (Error, crate::protocol::resend::GaveUp),
    > {
        let driven = drive(self, &mut (), &mut resend).await;
        match driven.outcome {
            Ok(resent) => Ok(resent),
            Err(gave_up) => {
                let error = driven.last_error.unwrap_or_else(|| self.timeout_error());
                Err((self.redis_error(error), gave_up))
            }
        }
    }
}
