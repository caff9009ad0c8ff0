//! The semaphore's calls and replies (`lua/sem_*.lua`), sans I/O.

use std::sync::Arc;

use super::planted::{self, Defect};
use super::renew::RenewItem;
use super::{Call, Millis, Reply, ScriptId};

/// The keys and channel of one semaphore.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SemaphoreKeys {
    /// `<prefix>:{<name>}:semaphore`: the size and the reservation.
    pub hash: Arc<str>,
    /// `<prefix>:{<name>}:permits`: one member per permit, scored by its deadline.
    pub permits: Arc<str>,
    /// `<prefix>:{<name>}:semaphore:db<n>:released`.
    pub channel: Arc<str>,
    /// Sharded channel (a cluster).
    pub sharded: bool,
}

impl SemaphoreKeys {
    fn publish_flag(&self) -> Arc<str> {
        if self.sharded { "1".into() } else { "0".into() }
    }
}

/// What an acquire attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SemAcquired {
    /// Granted; the permits' deadline in Redis's milliseconds.
    Granted,
    /// A drain (every free permit) granted this many permits.
    Drained(u32),
    /// Not granted; wait at most this long before trying again.
    Wait(Millis),
    /// Not granted, but first in line: the next free permits are kept for this waiter
    /// (it holds the reservation). Wait at most this long before trying again.
    FirstInLine(Millis),
    /// The keys hold something else.
    NotASemaphore(String),
    /// No size was ever set.
    NoSize,
    /// More permits wanted than the semaphore has.
    TooMany(u64),
}

/// What an acquisition of `n` permits of the semaphore `name` found, read alike for
/// every sorted-set kind.
pub fn attempted(found: SemAcquired, name: &str, n: u32) -> super::attempted::Attempted {
    use super::attempted::Attempted;
    match found {
        SemAcquired::Granted | SemAcquired::Drained(_) => Attempted::Granted(None),
        SemAcquired::Wait(ms) => Attempted::Wait(ms),
        SemAcquired::FirstInLine(ms) => Attempted::FirstInLine(ms),
        SemAcquired::NotASemaphore(what) => Attempted::NotALock(what),
        SemAcquired::NoSize => Attempted::Invalid(format!(
            "semaphore {name:?} has no size: call set_permits first"
        )),
        SemAcquired::TooMany(size) => Attempted::Invalid(format!(
            "semaphore {name:?} has {size} permits; {n} can never be granted"
        )),
    }
}

/// How many permits one acquisition asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Asked {
    /// Exactly this many (at least 1).
    Exactly(u32),
    /// Every permit free at the grant, at least 1 (a drain): Redis decides how many.
    EveryFree,
}

impl Asked {
    /// The `n` of its `sem_acquire.lua` call (0: a drain).
    pub fn n(self) -> u32 {
        match self {
            Asked::Exactly(n) => n,
            Asked::EveryFree => 0,
        }
    }

    /// How many permits a reply says were granted: `Ok(None)` for a reply that is not a
    /// grant; an error for a grant of the other shape (a count for an exact ask, or no
    /// count for a drain: the reply of some other script version).
    pub fn granted(self, found: &SemAcquired) -> Result<Option<u32>, String> {
        match (self, found) {
            (Asked::Exactly(n), SemAcquired::Granted) => Ok(Some(n)),
            (Asked::EveryFree, SemAcquired::Drained(n)) => Ok(Some(*n)),
            (_, SemAcquired::Granted | SemAcquired::Drained(_)) => Err(format!(
                "sem_acquire: a grant of another shape than asked ({self:?}): {found:?}"
            )),
            _ => Ok(None),
        }
    }

    /// `sem_release.lua` giving back acquisition `id` (its permits when `hold_too`; its
    /// reservation when `leaving`). A drain's permits are given back however many there
    /// are: its grant may never have been read (a lost reply), so its count is unknown.
    pub fn give_back_call(
        self,
        keys: &SemaphoreKeys,
        id: &Arc<str>,
        hold_too: bool,
        leaving: bool,
    ) -> Call {
        match (self, hold_too) {
            (Asked::EveryFree, true) => release_count_call(keys, id, "-1".into(), leaving),
            (Asked::Exactly(n), true) => release_call(keys, id, n, leaving),
            (_, false) => release_call(keys, id, 0, leaving),
        }
    }
}

/// `sem_acquire.lua` for the acquisition `id` of `n` permits (0: a drain, every free
/// permit, at least 1; never waits, so `reserve` is ignored).
pub fn acquire_call(
    keys: &SemaphoreKeys,
    id: &Arc<str>,
    n: u32,
    lease_ms: Millis,
    reserve: bool,
    reservation_ms: Millis,
) -> Call {
    Call {
        script: ScriptId::SemAcquire,
        keys: vec![keys.hash.clone(), keys.permits.clone()],
        args: vec![
            id.clone(),
            n.to_string().into(),
            lease_ms.to_string().into(),
            if reserve { "1" } else { "0" }.into(),
            reservation_ms.to_string().into(),
        ],
    }
}

/// Reads `sem_acquire.lua`'s reply.
pub fn decode_acquire(reply: &Reply) -> Result<SemAcquired, String> {
    let Reply::Array(items) = reply else {
        return Err(format!("sem_acquire: {reply:?}"));
    };
    match items.as_slice() {
        [Reply::Int(1), Reply::Int(_)] => Ok(SemAcquired::Granted),
        [Reply::Int(1), Reply::Int(_), Reply::Int(n)] if *n >= 1 => {
            Ok(SemAcquired::Drained(u32::try_from(*n).unwrap_or(u32::MAX)))
        }
        [Reply::Int(0), Reply::Int(_)] if planted::is(Defect::SemWaitReadAsGrant) => {
            Ok(SemAcquired::Granted)
        }
        [Reply::Int(0), Reply::Int(wait)] => Ok(SemAcquired::Wait((*wait).max(1) as Millis)),
        [Reply::Int(0), Reply::Int(wait), Reply::Int(1)] => {
            Ok(SemAcquired::FirstInLine((*wait).max(1) as Millis))
        }
        [Reply::Int(2), Reply::Bulk(what)] => Ok(SemAcquired::NotASemaphore(
            String::from_utf8_lossy(what).into_owned(),
        )),
        [Reply::Int(2), Reply::Status(what)] => Ok(SemAcquired::NotASemaphore(what.clone())),
        [Reply::Int(3)] => Ok(SemAcquired::NoSize),
        [Reply::Int(4), Reply::Int(size)] => Ok(SemAcquired::TooMany((*size).max(0) as u64)),
        _ => Err(format!("sem_acquire: {reply:?}")),
    }
}

/// `sem_release.lua`: give back acquisition `id` of `n` permits (and, with
/// `drop_reservation`, the reservation it may hold as a waiter).
pub fn release_call(keys: &SemaphoreKeys, id: &Arc<str>, n: u32, drop_reservation: bool) -> Call {
    release_count_call(keys, id, n.to_string().into(), drop_reservation)
}

fn release_count_call(
    keys: &SemaphoreKeys,
    id: &Arc<str>,
    n: Arc<str>,
    drop_reservation: bool,
) -> Call {
    Call {
        script: ScriptId::SemRelease,
        keys: vec![keys.hash.clone(), keys.permits.clone()],
        args: vec![
            id.clone(),
            n,
            keys.channel.clone(),
            keys.publish_flag(),
            if drop_reservation { "1" } else { "0" }.into(),
        ],
    }
}

/// What `sem_set.lua` answered (a set, a set-if-unset or an add).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SizeSet {
    /// Done (for a set-if-unset with a size already set: left as it was): the size
    /// before (`None`: none was set) and the permits in use then.
    Done {
        /// The size before (`None`: none was set).
        previous: Option<u64>,
        /// The permits in use then.
        in_use: u64,
    },
    /// An add refused: it would leave the size outside 1 to 2^53 - 1. Nothing written.
    OutOfRange {
        /// The size, unchanged (`None`: none was set).
        previous: Option<u64>,
    },
    /// The keys are not a semaphore. Nothing written.
    NotASemaphore,
}

/// Reads `sem_set.lua`'s reply.
pub fn decode_set(reply: &Reply) -> Result<SizeSet, String> {
    let size = |n: i64| u64::try_from(n).ok();
    match reply {
        Reply::Array(items) => match items.as_slice() {
            [Reply::Int(-2)] => Ok(SizeSet::NotASemaphore),
            [Reply::Int(-3), Reply::Int(previous)] if *previous >= -1 => Ok(SizeSet::OutOfRange {
                previous: size(*previous),
            }),
            [Reply::Int(previous), Reply::Int(in_use)] if *previous >= -1 && *in_use >= 0 => {
                Ok(SizeSet::Done {
                    previous: size(*previous),
                    in_use: *in_use as u64,
                })
            }
            _ => Err(format!("sem_set: {reply:?}")),
        },
        _ => Err(format!("sem_set: {reply:?}")),
    }
}

/// The size an add of `delta` to `previous` leaves (what `sem_set.lua` writes: no size
/// set counts as 0).
pub fn added(previous: Option<u64>, delta: i64) -> i64 {
    previous.unwrap_or(0) as i64 + delta
}

/// `sem_set.lua`.
pub fn set_call(keys: &SemaphoreKeys, size: u64, only_if_unset: bool) -> Call {
    Call {
        script: ScriptId::SemSet,
        keys: vec![keys.hash.clone(), keys.permits.clone()],
        args: vec![
            size.to_string().into(),
            if only_if_unset { "1" } else { "0" }.into(),
            keys.channel.clone(),
            keys.publish_flag(),
        ],
    }
}

/// `sem_set.lua` adding `delta` permits to the size (negative: taking some away; no size
/// yet: the size becomes `delta`).
pub fn add_call(keys: &SemaphoreKeys, delta: i64) -> Call {
    Call {
        script: ScriptId::SemSet,
        keys: vec![keys.hash.clone(), keys.permits.clone()],
        args: vec![
            delta.to_string().into(),
            "2".into(),
            keys.channel.clone(),
            keys.publish_flag(),
        ],
    }
}

/// `sem_state.lua`.
pub fn state_call(keys: &SemaphoreKeys) -> Call {
    Call {
        script: ScriptId::SemState,
        keys: vec![keys.hash.clone(), keys.permits.clone()],
        args: Vec::new(),
    }
}

/// The `sem_renew.lua` call for acquisitions (`items[i].hold` is the permit id, `sizes[i]`
/// its number of permits); the renewed ones first. Returns the call and the order of the
/// reply's positions (indices into `items`).
pub fn renew_call(lease_ms: Millis, items: &[RenewItem], sizes: &[u32]) -> (Call, Vec<usize>) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|i| !items[*i].renew);
    let renewing = items.iter().filter(|item| item.renew).count();
    let mut args: Vec<Arc<str>> = Vec::with_capacity(2 + 2 * items.len());
    args.push(lease_ms.to_string().into());
    args.push(renewing.to_string().into());
    for i in &order {
        args.push(items[*i].hold.clone());
        let n = if planted::is(Defect::SemRenewsOnePermit) {
            1
        } else {
            sizes[*i]
        };
        args.push(n.to_string().into());
    }
    let call = Call {
        script: ScriptId::SemRenew,
        keys: order.iter().map(|i| items[*i].key.clone()).collect(),
        args,
    };
    (call, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> SemaphoreKeys {
        SemaphoreKeys {
            hash: "p:{s}:semaphore".into(),
            permits: "p:{s}:permits".into(),
            channel: "p:{s}:semaphore:db0:released".into(),
            sharded: false,
        }
    }

    #[test]
    fn replies_are_read() {
        let int = Reply::Int;
        assert_eq!(
            decode_acquire(&Reply::Array(vec![int(1), int(99)])),
            Ok(SemAcquired::Granted)
        );
        assert_eq!(
            decode_acquire(&Reply::Array(vec![int(0), int(0)])),
            Ok(SemAcquired::Wait(1))
        );
        assert_eq!(
            decode_acquire(&Reply::Array(vec![int(0), int(5), int(1)])),
            Ok(SemAcquired::FirstInLine(5))
        );
        assert_eq!(
            decode_acquire(&Reply::Array(vec![int(3)])),
            Ok(SemAcquired::NoSize)
        );
        assert_eq!(
            decode_acquire(&Reply::Array(vec![int(4), int(2)])),
            Ok(SemAcquired::TooMany(2))
        );
        assert!(decode_acquire(&int(1)).is_err());
    }

    #[test]
    fn renewals_put_the_renewed_first() {
        let item = |key: &str, renew| RenewItem {
            key: key.into(),
            hold: format!("id-{key}").into(),
            renew,
            hash_form: false,
        };
        let (call, order) = renew_call(3_000, &[item("a", false), item("b", true)], &[1, 2]);
        assert_eq!(order, vec![1, 0]);
        let args: Vec<&str> = call.args.iter().map(|a| &**a).collect();
        assert_eq!(args, vec!["3000", "1", "id-b", "2", "id-a", "1"]);
        let call = acquire_call(&keys(), &"r.1".into(), 2, 3_000, true, 2_000);
        assert_eq!(call.keys.len(), 2);
    }
}
