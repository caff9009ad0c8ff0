//! The fair lock's calls (`lua/fair_*.lua`) and how to read their replies.
//!
//! Holds are members `<hold id>:1` of a sorted set scored by their deadlines (as the
//! read-write lock's); waiters queue in a second sorted set in arrival order (Redis time)
//! and stay in it while they keep asking (a third set holds until when each counts as
//! alive). Each waiter is woken on a channel of its own, so a release wakes the head alone.

use std::sync::Arc;

use super::planted::{self, Defect};
use super::{Call, Millis, Reply, ScriptId};

/// The keys and channels of one fair lock (all in the name's hash slot).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FairKeys {
    /// Holds `<prefix>:{<name>}:fair` (a sorted set).
    pub holds: Arc<str>,
    /// The queue `<prefix>:{<name>}:fair:queue` (waiter id → arrival, Redis µs).
    pub queue: Arc<str>,
    /// Waiters' liveness `<prefix>:{<name>}:fair:alive` (waiter id → deadline, Redis ms).
    pub alive: Arc<str>,
    /// The fencing counter `<prefix>:{<name>}:fair:fence`.
    pub fence: Arc<str>,
    /// The prefix of each waiter's wake-up channel
    /// `<prefix>:{<name>}:fair:db<n>:wake:<waiter id>`.
    pub wake_prefix: Arc<str>,
    /// Whether the channels are sharded (`SPUBLISH`, on a cluster).
    pub sharded: bool,
}

impl FairKeys {
    /// The keys of the fair lock `name` under `prefix`, with channels for database `db`.
    pub fn new(prefix: &str, db: i64, sharded: bool, name: &str) -> Self {
        let base = format!("{prefix}:{{{name}}}:fair");
        FairKeys {
            queue: format!("{base}:queue").into(),
            alive: format!("{base}:alive").into(),
            fence: format!("{base}:fence").into(),
            wake_prefix: format!("{base}:db{db}:wake:").into(),
            holds: base.into(),
            sharded,
        }
    }

    /// The wake-up channel of waiter `id`.
    pub fn wake_channel(&self, id: &str) -> Arc<str> {
        format!("{}{id}", self.wake_prefix).into()
    }
}

/// One acquire request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FairAcquire {
    /// The hold id (`<owner>\x01<request id>`), also the waiter's id.
    pub hold: Arc<str>,
    /// The owner id.
    pub owner: Arc<str>,
    /// The lease in ms.
    pub lease_ms: Millis,
    /// The caller waits: it takes or keeps its place in the queue.
    pub waits: bool,
    /// A fencing token is asked for.
    pub fenced: bool,
    /// How long a queued waiter counts as alive without asking again.
    pub waiter_lease_ms: Millis,
}

/// What an acquire attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FairAcquired {
    /// Granted; the fencing token when one was asked for.
    Granted(Option<u64>),
    /// Not granted; ask again within this long.
    Wait(Millis),
    /// A key is not part of a fair lock.
    NotALock(String),
}

impl FairAcquired {
    /// What the attempt found, read alike for every sorted-set kind.
    pub fn attempted(self) -> super::attempted::Attempted {
        use super::attempted::Attempted;
        match self {
            FairAcquired::Granted(token) => Attempted::Granted(token),
            FairAcquired::Wait(ms) => Attempted::Wait(ms),
            FairAcquired::NotALock(what) => Attempted::NotALock(what),
        }
    }
}

impl FairAcquire {
    /// The `fair_acquire.lua` call.
    pub fn call(&self, keys: &FairKeys) -> Call {
        let mut declared = vec![keys.holds.clone(), keys.queue.clone(), keys.alive.clone()];
        let mut flags = String::new();
        if self.waits && !planted::is(Defect::FairQueueFlagDropped) {
            flags.push('q');
        }
        if self.fenced {
            flags.push('f');
            declared.push(keys.fence.clone());
        }
        Call {
            script: ScriptId::FairAcquire,
            keys: declared,
            args: vec![
                self.hold.clone(),
                self.owner.clone(),
                self.lease_ms.to_string().into(),
                flags.into(),
                self.waiter_lease_ms.to_string().into(),
            ],
        }
    }
}

/// Reads `fair_acquire.lua`'s reply (`fenced`: whether a token was asked for).
pub fn decode_acquire(reply: &Reply, fenced: bool) -> Result<FairAcquired, String> {
    let bad = || format!("fair_acquire: {reply:?}");
    let Reply::Array(items) = reply else {
        return Err(bad());
    };
    match items.as_slice() {
        [Reply::Int(1), Reply::Int(token)] => Ok(FairAcquired::Granted(
            (fenced && *token > 0).then_some(*token as u64),
        )),
        [Reply::Int(0), Reply::Int(_)] if planted::is(Defect::FairWaitReadAsGrant) => {
            Ok(FairAcquired::Granted(None))
        }
        [Reply::Int(0), Reply::Int(wait)] => Ok(FairAcquired::Wait((*wait).max(1) as Millis)),
        [Reply::Int(2), what] => Ok(FairAcquired::NotALock(what.text().unwrap_or_default())),
        _ => Err(bad()),
    }
}

/// The `fair_release.lua` call: gives back hold `hold` (when `hold_too`) and takes the
/// waiter `hold` out of the queue (when `leaving`).
pub fn release_call(keys: &FairKeys, hold: &Arc<str>, hold_too: bool, leaving: bool) -> Call {
    Call {
        script: ScriptId::FairRelease,
        keys: vec![keys.holds.clone(), keys.queue.clone(), keys.alive.clone()],
        args: vec![
            hold.clone(),
            if hold_too { "1" } else { "0" }.into(),
            if leaving { "1" } else { "0" }.into(),
            keys.wake_prefix.clone(),
            if keys.sharded { "1" } else { "0" }.into(),
        ],
    }
}

/// The `fair_state.lua` call.
pub fn state_call(keys: &FairKeys) -> Call {
    Call {
        script: ScriptId::FairState,
        keys: vec![keys.holds.clone(), keys.queue.clone(), keys.alive.clone()],
        args: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_slot_and_each_waiter_has_a_channel() {
        let keys = FairKeys::new("p", 3, false, "n");
        assert_eq!(&*keys.holds, "p:{n}:fair");
        assert_eq!(
            &*keys.wake_channel("o\u{1}c.1"),
            "p:{n}:fair:db3:wake:o\u{1}c.1"
        );
        let call = FairAcquire {
            hold: "o\u{1}c.1".into(),
            owner: "o".into(),
            lease_ms: 1_000,
            waits: true,
            fenced: true,
            waiter_lease_ms: 3_000,
        }
        .call(&keys);
        assert_eq!(call.keys.len(), 4);
        assert!(call.keys.iter().all(|key| key.starts_with("p:{n}:fair")));
        assert_eq!(&*call.args[3], "qf");
    }

    #[test]
    fn replies_are_read() {
        let int = Reply::Int;
        assert_eq!(
            decode_acquire(&Reply::Array(vec![int(1), int(5)]), true),
            Ok(FairAcquired::Granted(Some(5)))
        );
        assert_eq!(
            decode_acquire(&Reply::Array(vec![int(1), int(0)]), false),
            Ok(FairAcquired::Granted(None))
        );
        assert_eq!(
            decode_acquire(&Reply::Array(vec![int(0), int(0)]), false),
            Ok(FairAcquired::Wait(1))
        );
        assert!(decode_acquire(&int(1), false).is_err());
    }
}
