//! What one attempt of a sorted-set kind (the semaphore, the read-write lock, the fair
//! lock) found, read alike for every kind, and what a refusal may leave behind. Each
//! kind's module reads its own script's reply into it (`semaphore::attempted`,
//! `rwlock::attempted`, `fair::attempted`); the waiting loop's core decides the rest.

use super::Millis;

/// What an attempt found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Attempted {
    /// Granted; the hold's fencing token if it has one.
    Granted(Option<u64>),
    /// Not granted; the next attempt within this long.
    Wait(Millis),
    /// Not granted, but the next free capacity is kept for this waiter (a semaphore's
    /// reservation): a release wakes it first. The next attempt within this long.
    FirstInLine(Millis),
    /// A key of the kind holds something else (what it is).
    NotALock(String),
    /// It could never be granted: the caller's own holds stand in the way (why).
    Refused(&'static str),
    /// It could never be granted: the kind's configuration rules it out (the message
    /// names the kind).
    Invalid(String),
}

impl Attempted {
    /// For a refusal (not a grant, not a wait): whether something may still be held under
    /// the acquisition's id, so that the waiting loop gives it back. `after_loss`: a copy
    /// of the attempt lost its reply, so it may have run. A configuration that rules the
    /// request out may have changed after an earlier copy ran (a semaphore whose size a
    /// restart lost, or that was made smaller): always given back.
    pub fn claim_may_remain(&self, after_loss: bool) -> bool {
        match self {
            Attempted::Invalid(_) => true,
            _ => after_loss,
        }
    }
}
