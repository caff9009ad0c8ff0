//! The read-write lock's calls (`lua/rw_*.lua`) and how to read their replies.
//!
//! Every hold is a member `<hold id>:1` of a sorted set scored by its deadline on Redis's
//! clock: the write holds in one set, the read holds in another. The hold id is
//! `<owner>\x01<request id>`, so the scripts can tell whose a hold is, and the watchdog
//! renews a hold as a one-permit semaphore acquisition (`lua/sem_renew.lua`).

use super::planted::{self, Defect};
use std::sync::Arc;

use super::{Call, Millis, Reply, ScriptId};

/// The keys and channels of one read-write lock (all in the name's hash slot).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RwKeys {
    /// Write holds `<prefix>:{<name>}:rw:write` (a sorted set).
    pub write: Arc<str>,
    /// Read holds `<prefix>:{<name>}:rw:read` (a sorted set).
    pub read: Arc<str>,
    /// The waiting writer's reservation `<prefix>:{<name>}:rw:writer-waiting` (a string).
    pub reservation: Arc<str>,
    /// The fencing counter `<prefix>:{<name>}:rw:fence`.
    pub fence: Arc<str>,
    /// Readers' wake-ups `<prefix>:{<name>}:rw:db<n>:read`.
    pub read_channel: Arc<str>,
    /// Writers' wake-ups `<prefix>:{<name>}:rw:db<n>:write`.
    pub write_channel: Arc<str>,
    /// Whether the channels are sharded (`SPUBLISH`, on a cluster).
    pub sharded: bool,
}

impl RwKeys {
    /// The keys of the lock `name` under `prefix`, with channels for database `db`.
    pub fn new(prefix: &str, db: i64, sharded: bool, name: &str) -> Self {
        let base = format!("{prefix}:{{{name}}}:rw");
        RwKeys {
            write: format!("{base}:write").into(),
            read: format!("{base}:read").into(),
            reservation: format!("{base}:writer-waiting").into(),
            fence: format!("{base}:fence").into(),
            read_channel: format!("{base}:db{db}:read").into(),
            write_channel: format!("{base}:db{db}:write").into(),
            sharded,
        }
    }

    /// The sorted set that holds holds of `kind`.
    pub fn set_of(&self, kind: RwKind) -> &Arc<str> {
        match kind {
            RwKind::Read => &self.read,
            RwKind::Write => &self.write,
        }
    }

    /// The channel that waiters for `kind` listen on.
    pub fn channel_of(&self, kind: RwKind) -> &Arc<str> {
        match kind {
            RwKind::Read => &self.read_channel,
            RwKind::Write => &self.write_channel,
        }
    }
}

/// Read (shared) or write (exclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RwKind {
    /// A shared hold.
    Read,
    /// An exclusive hold.
    Write,
}

impl RwKind {
    fn flag(self) -> Arc<str> {
        match self {
            RwKind::Read => "r".into(),
            RwKind::Write => "w".into(),
        }
    }
}

/// The hold id of an acquisition by `owner` with request id `request`.
pub fn hold_id(owner: &str, request: &str) -> Arc<str> {
    format!("{owner}\u{1}{request}").into()
}

/// One acquire request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RwAcquire {
    /// The hold id ([`hold_id`]).
    pub hold: Arc<str>,
    /// The owner id.
    pub owner: Arc<str>,
    /// Read or write.
    pub kind: RwKind,
    /// The lease in ms.
    pub lease_ms: Millis,
    /// The caller waits: a writer that finds readers reserves the lock.
    pub waits: bool,
    /// The owner was named explicitly: its holds from other handles count as its own.
    pub explicit_owner: bool,
    /// A fencing token is asked for (writes only).
    pub fenced: bool,
    /// The live hold this request re-enters through (a guard's `reenter`), if any.
    pub joins: Option<Arc<str>>,
    /// How long a writer's reservation lasts unless renewed.
    pub reservation_ms: Millis,
}

/// What an acquire attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RwAcquired {
    /// Granted; the write's fencing token when one was asked for.
    Granted(Option<u64>),
    /// Not granted; wait at most this long before the next attempt.
    Wait(Millis),
    /// A key is not part of a read-write lock.
    NotALock(String),
    /// A write asked by an owner that holds reads.
    Upgrade,
}

impl RwAcquired {
    /// What the attempt found, read alike for every sorted-set kind.
    pub fn attempted(self) -> super::attempted::Attempted {
        use super::attempted::Attempted;
        match self {
            RwAcquired::Granted(token) => Attempted::Granted(token),
            RwAcquired::Wait(ms) => Attempted::Wait(ms),
            RwAcquired::NotALock(what) => Attempted::NotALock(what),
            RwAcquired::Upgrade => {
                Attempted::Refused("the owner holds a read and asks for the write lock")
            }
        }
    }
}

impl RwAcquire {
    /// The `rw_acquire.lua` call.
    pub fn call(&self, keys: &RwKeys) -> Call {
        let fenced = self.fenced && self.kind == RwKind::Write;
        let mut flags = String::new();
        if self.waits {
            flags.push('q');
        }
        if self.explicit_owner {
            flags.push('o');
        }
        if fenced {
            flags.push('f');
        }
        if self.joins.is_some() {
            flags.push('j');
        }
        let mut declared = vec![
            keys.write.clone(),
            keys.read.clone(),
            keys.reservation.clone(),
        ];
        if fenced {
            declared.push(keys.fence.clone());
        }
        Call {
            script: ScriptId::RwAcquire,
            keys: declared,
            args: vec![
                self.hold.clone(),
                self.owner.clone(),
                self.kind.flag(),
                self.lease_ms.to_string().into(),
                flags.into(),
                self.joins
                    .as_ref()
                    .map_or_else(|| "".into(), |joined| format!("{joined}:1").into()),
                self.reservation_ms.to_string().into(),
            ],
        }
    }

    /// Reads `rw_acquire.lua`'s reply.
    pub fn decode(&self, reply: &Reply) -> Result<RwAcquired, String> {
        let bad = || format!("rw_acquire: {reply:?}");
        let Reply::Array(items) = reply else {
            return Err(bad());
        };
        match items.as_slice() {
            [Reply::Int(1), Reply::Int(token)] => Ok(RwAcquired::Granted(
                (self.fenced && self.kind == RwKind::Write && *token > 0).then_some(*token as u64),
            )),
            [Reply::Int(0), Reply::Int(_)] if planted::is(Defect::RwWaitReadAsGrant) => {
                Ok(RwAcquired::Granted(None))
            }
            [Reply::Int(0), Reply::Int(wait)] => Ok(RwAcquired::Wait((*wait).max(1) as Millis)),
            [Reply::Int(2), what] => Ok(RwAcquired::NotALock(what.text().unwrap_or_default())),
            [Reply::Int(3)] => Ok(RwAcquired::Upgrade),
            _ => Err(bad()),
        }
    }
}

/// The `rw_release.lua` call: gives back hold `hold` of `kind` (none when `kind` is
/// `None`), and the caller's reservation when `drop_reservation`.
pub fn release_call(
    keys: &RwKeys,
    hold: &Arc<str>,
    kind: Option<RwKind>,
    drop_reservation: bool,
) -> Call {
    Call {
        script: ScriptId::RwRelease,
        keys: vec![
            keys.write.clone(),
            keys.read.clone(),
            keys.reservation.clone(),
        ],
        args: vec![
            hold.clone(),
            kind.map_or_else(|| "".into(), RwKind::flag),
            keys.read_channel.clone(),
            keys.write_channel.clone(),
            if keys.sharded { "1" } else { "0" }.into(),
            if drop_reservation { "1" } else { "0" }.into(),
        ],
    }
}

/// The `rw_state.lua` call.
pub fn state_call(keys: &RwKeys) -> Call {
    Call {
        script: ScriptId::RwState,
        keys: vec![
            keys.write.clone(),
            keys.read.clone(),
            keys.reservation.clone(),
        ],
        args: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: RwKind) -> RwAcquire {
        RwAcquire {
            hold: hold_id("o", "c.1"),
            owner: "o".into(),
            kind,
            lease_ms: 1_000,
            waits: true,
            explicit_owner: false,
            fenced: true,
            joins: Some(hold_id("o", "c.0")),
            reservation_ms: 2_000,
        }
    }

    #[test]
    fn calls_declare_one_slot_and_name_the_joined_member() {
        let keys = RwKeys::new("p", 0, false, "n");
        let write = request(RwKind::Write).call(&keys);
        assert_eq!(write.keys.len(), 4, "a fenced write declares the counter");
        assert!(write.keys.iter().all(|key| key.starts_with("p:{n}:rw:")));
        assert_eq!(&*write.args[4], "qfj");
        assert_eq!(&*write.args[5], "o\u{1}c.0:1");
        let read = request(RwKind::Read).call(&keys);
        assert_eq!(read.keys.len(), 3, "a read never declares the counter");
        assert_eq!(&*read.args[4], "qj");
    }

    #[test]
    fn replies_are_read() {
        let int = Reply::Int;
        let write = request(RwKind::Write);
        assert_eq!(
            write.decode(&Reply::Array(vec![int(1), int(9)])),
            Ok(RwAcquired::Granted(Some(9)))
        );
        assert_eq!(
            request(RwKind::Read).decode(&Reply::Array(vec![int(1), int(0)])),
            Ok(RwAcquired::Granted(None))
        );
        assert_eq!(
            write.decode(&Reply::Array(vec![int(0), int(0)])),
            Ok(RwAcquired::Wait(1))
        );
        assert_eq!(
            write.decode(&Reply::Array(vec![int(3)])),
            Ok(RwAcquired::Upgrade)
        );
        assert!(write.decode(&int(0)).is_err());
    }
}
