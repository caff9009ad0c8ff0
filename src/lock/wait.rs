//! The plain lock's acquire: its attempts and waiting policy, run by the one waiting loop
//! (`src/waiting.rs`, deciding in `protocol::wait`).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::LockGuard;
use crate::error::Result;
use crate::protocol::wait::WaitPolicy;
use crate::waiting::{AttemptHints, Attempts, Outcome};

use super::{Attempt, Lock};

/// The plain lock's attempts, for the one waiting loop (`src/waiting.rs`).
struct LockAttempts<'a> {
    lock: &'a Lock,
    owner: Arc<str>,
}

impl Attempts for LockAttempts<'_> {
    type Won = LockGuard;

    fn attempt(&mut self, hints: AttemptHints) -> impl Future<Output = Outcome<LockGuard>> + Send {
        let attempt = self.lock.attempt(&self.owner, hints);
        async move {
            match attempt.await {
                Ok(Attempt::Acquired(guard)) => Outcome::Granted(guard),
                Ok(Attempt::Held { pttl }) => Outcome::Busy(crate::keys::ceil_ms(pttl)),
                // A lost attempt is reconciled by its lane, in the background.
                Err(error) => Outcome::from_error(error, false),
            }
        }
    }

    fn give_back_in_background(&self) {
        // The lane gives back what a lost attempt took (see `attempt.rs`); the policy
        // below never asks for this.
    }
}

impl Lock {
    /// One acquire call (wait `None`: without limit; zero: one attempt), observed: a
    /// `tracing` span and the acquisition metrics (see `observe.rs`).
    pub(super) async fn acquire_until(&self, wait: Option<Duration>) -> Result<Option<LockGuard>> {
        let inner = &self.client.inner;
        let policy = WaitPolicy::reentrant(inner.wait_timing());
        let attempts = LockAttempts {
            lock: self,
            owner: self.resolve_owner(),
        };
        crate::waiting::acquire(
            inner,
            "lock",
            &self.keys.name,
            &self.keys.channel,
            policy,
            wait.map(crate::keys::ceil_ms),
            attempts,
        )
        .await
    }
}
