//! An acquisition of permits as the shared machinery of the sorted-set kinds sees it
//! (`held.rs`): a hold of n members `<id>:1..n` of the permits set. n is the caller's, or
//! for a drain, Redis's: every permit free at the moment of the grant.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use super::Semaphore;
use crate::client::LockClient;
use crate::error::Error;
use crate::held::{Attempt, SetKind};
use crate::protocol::attempted::Attempted;
use crate::protocol::semaphore::{Asked, acquire_call, attempted, decode_acquire};
use crate::protocol::wait::{WaitPolicy, WaitTiming};
use crate::protocol::{Call, Reply};
use crate::watchdog::LeaseMode;

/// How long a waiter's reservation lasts without being renewed by its next attempt: a
/// waiter that died or gave up stops holding permits back after this long.
const RESERVATION: Duration = Duration::from_secs(2);

/// How many permits one acquisition takes: what it asked for (the core's [`Asked`]), and
/// for a drain, the count its grant's reply named (0 until read).
#[derive(Clone, Debug)]
pub(super) struct Count {
    pub(super) asked: Asked,
    granted: Arc<AtomicU32>,
}

impl Count {
    pub(super) fn exactly(n: u32) -> Self {
        Count {
            asked: Asked::Exactly(n),
            granted: Arc::new(AtomicU32::new(n)),
        }
    }

    pub(super) fn every_free() -> Self {
        Count {
            asked: Asked::EveryFree,
            granted: Arc::default(),
        }
    }

    fn now(&self) -> u32 {
        self.granted.load(Ordering::Acquire)
    }
}

/// An acquisition of permits of a semaphore.
#[derive(Clone)]
pub(super) struct Permits {
    pub(super) semaphore: Semaphore,
    pub(super) count: Count,
}

impl SetKind for Permits {
    const KIND: &'static str = "semaphore";
    type Handle = Semaphore;

    fn guarded(&self) -> (Semaphore, u32) {
        (self.semaphore.clone(), self.count.now())
    }

    fn client(&self) -> &LockClient {
        &self.semaphore.client
    }

    fn name(&self) -> &Arc<str> {
        &self.semaphore.name
    }

    fn lease_mode(&self) -> LeaseMode {
        self.semaphore.mode
    }

    fn set_key(&self) -> &Arc<str> {
        &self.semaphore.keys.permits
    }

    fn channel(&self, _attempt: &Attempt) -> Arc<str> {
        self.semaphore.keys.channel.clone()
    }

    fn wait_policy(&self, timing: WaitTiming) -> WaitPolicy {
        WaitPolicy::semaphore(timing)
    }

    fn members(&self) -> u32 {
        self.count.now()
    }

    /// `sem_acquire.lua`, retried through lost replies with the same permit id (the
    /// script finds permits an earlier copy took, and for a drain says how many); a
    /// waiter reserves.
    fn attempt_call(&self, attempt: &Attempt) -> Call {
        acquire_call(
            &self.semaphore.keys,
            &attempt.hold,
            self.count.asked.n(),
            self.lease_ms(),
            attempt.waits,
            RESERVATION.as_millis() as u64,
        )
    }

    fn decode(&self, reply: &Reply) -> std::result::Result<Attempted, String> {
        let found = decode_acquire(reply)?;
        if let Some(n) = self.count.asked.granted(&found)? {
            self.count.granted.store(n, Ordering::Release);
        }
        Ok(attempted(found, &self.semaphore.name, self.count.now()))
    }

    /// `sem_release.lua`: gives back the acquisition's permits (when `hold_too`) and, when
    /// `leaving`, the reservation it may hold as a waiter (the core's call shape).
    fn give_back_call(&self, hold: &Arc<str>, hold_too: bool, leaving: bool) -> Call {
        self.count
            .asked
            .give_back_call(&self.semaphore.keys, hold, hold_too, leaving)
    }

    fn wrong_type(&self, _found: String) -> Error {
        self.semaphore.wrong_type()
    }
}
