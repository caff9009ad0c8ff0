//! The async shell around the core's operations ([`crate::protocol::Machine`]): it sends
//! the calls an operation asks for, sleeps when it asks to, and feeds the results back. It
//! decides nothing about the protocol; every decision (what to send next, the send time,
//! which lease a grant gets, what is re-sent and for how long, when to give up) is the
//! operation's.

use redis::RedisError;

use crate::client::ClientInner;
use crate::protocol::{Env, Machine, Millis, Next, ScriptId};
use crate::scripts::CallError;

/// The core's view of the client: its monotonic clock, random jitter and request ids.
pub(crate) struct ClientEnv<'a>(pub(crate) &'a ClientInner);

impl Env for ClientEnv<'_> {
    fn now(&self) -> Millis {
        self.0.clock.now()
    }

    fn jitter(&mut self) -> u64 {
        self.0.jitter()
    }

    fn next_id(&mut self) -> String {
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
    inner: &ClientInner,
    lane: &mut M::Ctx,
    machine: &mut M,
) -> Driven<M::Outcome> {
    let mut env = ClientEnv(inner);
    let mut last_error = None;
    let mut acked = None;
    let mut next = machine.start(&mut env, lane);
    loop {
        next = match next {
            Next::Send(call) => {
                // Acquires go where replica acknowledgement is waited for, and probes after
                // them on the same connection (in order); the rest on the shared one.
                let result = match call.script {
                    ScriptId::Acquire => inner.run_acquire(&call).await,
                    ScriptId::Probe => inner.run_probe(&call).await.map(|reply| (reply, None)),
                    _ => inner.run(&call).await.map(|reply| (reply, None)),
                };
                match result {
                    Ok((reply, replicas)) => {
                        if call.script == ScriptId::Acquire {
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
                tokio::time::sleep_until(inner.clock.instant(at)).await;
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
