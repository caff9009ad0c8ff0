//! The calls of a lock kept in Redisson's RLock layout (`lua/redisson_*.lua`), sans I/O:
//! what a Java service using Redisson 3.24 to 4.x reads and writes for `RLock`, so that
//! the two exclude each other on the same name.
//!
//! The layout (Redisson's, `RedissonLock` and `RedissonBaseLock`):
//! * the lock is the hash named by the lock's name alone, one field per owner
//!   (`<client uuid>:<thread id>` in Redisson) holding its hold count, with an expiry;
//! * waiters listen on `redisson_lock__channel:{<name>}`, and a final release publishes
//!   `0` there (`LockPubSub.UNLOCK_MESSAGE`).
//!
//! What this library adds, invisible to Redisson: a record per granted acquire
//! (`<prefix>_redisson_acquire:{<name>}:<request id>`, for the lease) so that an acquire
//! re-sent after a lost reply is not counted twice; its give-back marks it `released` for
//! a short while, so that a re-sent give-back is not counted twice either (where Redisson
//! uses an unlock latch key per unlock request, which only that request reads). Helper names put the lock's name in braces, as
//! Redisson's `prefixName` does (or leave it bare when it already has a brace), so that
//! every key of one lock is in one cluster slot.

use std::sync::Arc;

use super::attempted::Attempted;
use super::extend::HoldShape;
use super::planted::{self, Defect};
use super::renew::RenewItem;
use super::rwlock::RwKind;
use super::{Call, Millis, Reply, ScriptId};

/// The keys and channel of one lock in Redisson's layout.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RedissonKeys {
    /// The lock hash: the name itself.
    pub hash: Arc<str>,
    /// `redisson_lock__channel:{<name>}`.
    pub channel: Arc<str>,
    /// `redisson_rwlock:{<name>}`: the channel of a read-write lock's readers and writers.
    pub rw_channel: Arc<str>,
    /// `<prefix>_redisson_acquire:{<name>}:`, followed by an acquire's request id.
    pub record_prefix: Arc<str>,
    /// Whether the channel is sharded (`SPUBLISH`, on a cluster: Redisson 3.22+ does the
    /// same on a Redis 7 cluster).
    pub sharded: bool,
}

/// Redisson's `prefixName(prefix, name)`: `prefix:{name}`, or `prefix:name` when the name
/// already has a brace (its own hash tag is then kept).
pub fn prefix_name(prefix: &str, name: &str) -> String {
    if name.contains('{') {
        format!("{prefix}:{name}")
    } else {
        format!("{prefix}:{{{name}}}")
    }
}

impl RedissonKeys {
    /// The keys of the lock `name`; `prefix` names this library's own acquire records.
    pub fn new(prefix: &str, sharded: bool, name: &str) -> Self {
        RedissonKeys {
            hash: name.into(),
            channel: prefix_name("redisson_lock__channel", name).into(),
            rw_channel: prefix_name("redisson_rwlock", name).into(),
            record_prefix: format!(
                "{}:",
                prefix_name(&format!("{prefix}_redisson_acquire"), name)
            )
            .into(),
            sharded,
        }
    }

    fn record(&self, request: &str) -> Arc<str> {
        format!("{}{request}", self.record_prefix).into()
    }
}

/// The request id inside a hold id `<owner>\x01<request id>` (the whole id if it has no
/// separator).
pub fn request_of(hold: &str) -> &str {
    if planted::is(Defect::RedissonRecordPerOwner) {
        return owner_of(hold);
    }
    hold.rsplit_once('\u{1}')
        .map_or(hold, |(_, request)| request)
}

/// The owner (the hash field) inside a hold id `<owner>\x01<request id>` (an owner never
/// contains `\x01`).
pub fn owner_of(hold: &str) -> &str {
    hold.split_once('\u{1}').map_or(hold, |(owner, _)| owner)
}

/// How many response timeouts an acquire's record lives: a copy of the request is re-sent
/// for up to 3 (`resend::attempt_give_up_at`), and the record outlives the last one.
pub const RECORD_RESPONSES: Millis = 4;

/// How long an acquire's record lives (at least the lease: `acquire_call` makes it so).
pub const fn acquire_record_ms(response_ms: Millis) -> Millis {
    response_ms.saturating_mul(RECORD_RESPONSES)
}

/// How long a record lives once its hold is given back: as long as a copy of the give-back
/// is re-sent (`resend::give_back_give_up_at`: the lease, at least the watchdog's), and a
/// response timeout more.
pub const fn release_record_ms(
    lease_ms: Millis,
    watchdog_ms: Millis,
    response_ms: Millis,
) -> Millis {
    let longest = if lease_ms > watchdog_ms {
        lease_ms
    } else {
        watchdog_ms
    };
    longest.saturating_add(response_ms)
}

/// The `redisson_acquire.lua` call: one attempt by `owner` (the hash field) for the hold
/// `hold` (`<owner>\x01<request id>`: the request id names the attempt's record), with a
/// lease of `lease_ms`; the record lives `record_ms` ([`acquire_record_ms`]), at least the
/// lease. With `joins`, a re-entry through a guard (`RedissonGuard::reenter`): granted only
/// while the owner's field exists, so that a hold a force-unlock or a restart took is not
/// taken afresh behind its guard.
pub fn acquire_call(
    keys: &RedissonKeys,
    owner: &Arc<str>,
    hold: &str,
    lease_ms: Millis,
    record_ms: Millis,
    joins: bool,
) -> Call {
    Call {
        script: ScriptId::RedissonAcquire,
        keys: vec![keys.hash.clone(), keys.record(request_of(hold))],
        args: vec![
            owner.clone(),
            lease_ms.to_string().into(),
            record_ms.max(lease_ms).to_string().into(),
            if joins { "1" } else { "0" }.into(),
        ],
    }
}

/// How long a waiter sleeps at most when the hash has no expiry (Redisson always sets one;
/// a hash written by hand may not have one), so that a lost wake-up costs this much.
pub const NO_TTL_RECHECK: Millis = 1_000;

/// Reads `redisson_acquire.lua`'s reply.
pub fn decode_acquire(reply: &Reply) -> Result<Attempted, String> {
    let bad = || format!("redisson_acquire: {reply:?}");
    let Reply::Array(items) = reply else {
        return Err(bad());
    };
    match items.as_slice() {
        [Reply::Int(1)] => Ok(Attempted::Granted(None)),
        [Reply::Int(0), Reply::Int(_)] if planted::is(Defect::RedissonWaitReadAsGrant) => {
            Ok(Attempted::Granted(None))
        }
        [Reply::Int(0), Reply::Int(pttl)] if *pttl > 0 => Ok(Attempted::Wait(*pttl as Millis)),
        // -1: no expiry; -2 (cannot happen: the script saw the hash): gone meanwhile.
        [Reply::Int(0), Reply::Int(_)] => Ok(Attempted::Wait(NO_TTL_RECHECK)),
        [Reply::Int(-2), what] => Ok(Attempted::NotALock(what.text().unwrap_or_default())),
        _ => Err(bad()),
    }
}

/// The `redisson_release.lua` call: gives back one hold of `owner` (`abandoned`: only if
/// the acquire `hold` was granted, for an attempt whose caller left); the acquire's record
/// then lives `record_ms` more, marked released.
pub fn release_call(
    keys: &RedissonKeys,
    owner: &Arc<str>,
    hold: &str,
    abandoned: bool,
    record_ms: Millis,
) -> Call {
    Call {
        script: ScriptId::RedissonRelease,
        keys: vec![
            keys.hash.clone(),
            keys.channel.clone(),
            keys.record(request_of(hold)),
        ],
        args: vec![
            owner.clone(),
            if keys.sharded { "1" } else { "0" }.into(),
            record_ms.to_string().into(),
            if abandoned { "1" } else { "0" }.into(),
        ],
    }
}

/// The `redisson_renew.lua` call for `items` that are all RLock holds (each `hold` a hold
/// id `<owner>\x01<request id>`: the owner is the hash field it checks), renewed ones
/// first; all in one slot on a cluster. Returns the call and, for each position of the
/// reply, the index in `items`.
pub fn renew_call(lease_ms: Millis, items: &[RenewItem]) -> (Call, Vec<usize>) {
    let shapes = vec![HoldShape::RedissonField; items.len()];
    renew_call_shaped(lease_ms, items, &shapes)
}

/// [`renew_call`] for holds of any of Redisson's layouts, `shapes[i]` the shape of
/// `items[i]`: an RLock field, a read-write lock's read or write.
pub fn renew_call_shaped(
    lease_ms: Millis,
    items: &[RenewItem],
    shapes: &[HoldShape],
) -> (Call, Vec<usize>) {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|i| !items[*i].renew);
    let renewing = items.iter().filter(|item| item.renew).count();
    let mut args: Vec<Arc<str>> = Vec::with_capacity(2 + items.len());
    args.push(lease_ms.to_string().into());
    args.push(renewing.to_string().into());
    args.extend(order.iter().map(|i| {
        let side = match shapes.get(*i) {
            Some(HoldShape::RedissonRead) => "r",
            Some(HoldShape::RedissonWrite) => "w",
            _ => "l",
        };
        Arc::from(format!("{side}{}", owner_of(&items[*i].hold)))
    }));
    let call = Call {
        script: ScriptId::RedissonRenew,
        keys: order.iter().map(|i| items[*i].key.clone()).collect(),
        args,
    };
    (call, order)
}

fn side(kind: RwKind) -> Arc<str> {
    match kind {
        RwKind::Read => "read".into(),
        RwKind::Write => "write".into(),
    }
}

/// The `redisson_rw_acquire.lua` call: one attempt at a read or the write (`kind`) of a
/// read-write lock in Redisson's layout, as [`acquire_call`] for a lock (`joins`:
/// a re-entry or a downgrade through a guard).
pub fn rw_acquire_call(
    keys: &RedissonKeys,
    owner: &Arc<str>,
    hold: &str,
    kind: RwKind,
    lease_ms: Millis,
    record_ms: Millis,
    joins: bool,
) -> Call {
    Call {
        script: ScriptId::RedissonRwAcquire,
        keys: vec![keys.hash.clone(), keys.record(request_of(hold))],
        args: vec![
            owner.clone(),
            lease_ms.to_string().into(),
            record_ms.max(lease_ms).to_string().into(),
            side(kind),
            if joins { "1" } else { "0" }.into(),
        ],
    }
}

/// Reads `redisson_rw_acquire.lua`'s reply.
pub fn decode_rw_acquire(reply: &Reply) -> Result<Attempted, String> {
    match reply {
        Reply::Array(items)
            if items.as_slice() == [Reply::Int(-3)]
                && planted::is(Defect::RedissonRwRefusalReadAsWait) =>
        {
            Ok(Attempted::Wait(NO_TTL_RECHECK))
        }
        Reply::Array(items) if items.as_slice() == [Reply::Int(-3)] => Ok(Attempted::Refused(
            "the owner holds a read and asks for the write lock",
        )),
        _ => decode_acquire(reply).map_err(|_| format!("redisson_rw_acquire: {reply:?}")),
    }
}

/// The `redisson_rw_release.lua` call: gives back one read or write (`kind`) of `owner`,
/// as [`release_call`] for a lock.
pub fn rw_release_call(
    keys: &RedissonKeys,
    owner: &Arc<str>,
    hold: &str,
    kind: RwKind,
    abandoned: bool,
    record_ms: Millis,
) -> Call {
    Call {
        script: ScriptId::RedissonRwRelease,
        keys: vec![
            keys.hash.clone(),
            keys.rw_channel.clone(),
            keys.record(request_of(hold)),
        ],
        args: vec![
            owner.clone(),
            if keys.sharded { "1" } else { "0" }.into(),
            record_ms.to_string().into(),
            if abandoned { "1" } else { "0" }.into(),
            side(kind),
        ],
    }
}

/// The `redisson_state.lua` call (read-only).
pub fn state_call(keys: &RedissonKeys) -> Call {
    Call {
        script: ScriptId::RedissonState,
        keys: vec![keys.hash.clone()],
        args: Vec::new(),
    }
}

/// What `redisson_state.lua` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedissonFound {
    /// No lock.
    Free,
    /// Held: the remaining TTL in ms (`None`: the hash has none) and each owner's hold
    /// count.
    Held {
        /// The hash's remaining TTL in ms, if it has one.
        pttl: Option<Millis>,
        /// `(owner, hold count)` for each field.
        holders: Vec<(String, u64)>,
    },
    /// The name holds something else (its type).
    NotALock(String),
}

/// Reads `redisson_state.lua`'s reply.
pub fn decode_state(reply: &Reply) -> Result<RedissonFound, String> {
    let bad = || format!("redisson_state: {reply:?}");
    let Reply::Array(items) = reply else {
        return Err(bad());
    };
    match items.as_slice() {
        [Reply::Int(0)] => Ok(RedissonFound::Free),
        [Reply::Int(-2), what] => Ok(RedissonFound::NotALock(what.text().unwrap_or_default())),
        [Reply::Int(1), Reply::Int(pttl), fields @ ..] if fields.len() % 2 == 0 => {
            let mut holders = Vec::with_capacity(fields.len() / 2);
            for pair in fields.chunks(2) {
                let owner = pair[0].text().ok_or_else(bad)?;
                // A count Redisson or this library wrote is a positive integer; anything
                // else is kept visible as 0 rather than hidden.
                let count = pair[1].text().and_then(|c| c.parse().ok()).unwrap_or(0);
                holders.push((owner, count));
            }
            Ok(RedissonFound::Held {
                pttl: (*pttl > 0).then_some(*pttl as Millis),
                holders,
            })
        }
        _ => Err(bad()),
    }
}

/// The `redisson_force_unlock.lua` call (either layout: the script tells them apart).
pub fn force_unlock_call(keys: &RedissonKeys) -> Call {
    Call {
        script: ScriptId::RedissonForceUnlock,
        keys: vec![
            keys.hash.clone(),
            keys.channel.clone(),
            keys.rw_channel.clone(),
        ],
        args: vec![if keys.sharded { "1" } else { "0" }.into()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_redissons_naming() {
        let keys = RedissonKeys::new("redis-locks", false, "invoice:42");
        assert_eq!(&*keys.hash, "invoice:42");
        assert_eq!(&*keys.channel, "redisson_lock__channel:{invoice:42}");
        assert_eq!(
            &*keys.record_prefix,
            "redis-locks_redisson_acquire:{invoice:42}:"
        );
        let tagged = RedissonKeys::new("p", true, "{user}:7");
        assert_eq!(&*tagged.channel, "redisson_lock__channel:{user}:7");
        assert_eq!(&*tagged.record_prefix, "p_redisson_acquire:{user}:7:");
    }

    #[test]
    fn calls_name_the_request_and_replies_are_read() {
        let keys = RedissonKeys::new("p", false, "n");
        let owner: Arc<str> = "uuid:1".into();
        let call = acquire_call(&keys, &owner, "uuid:1\u{1}t.9", 30_000, 5_000, false);
        assert_eq!(&*call.keys[1], "p_redisson_acquire:{n}:t.9");
        assert_eq!(&*call.args[2], "30000");
        let call = release_call(&keys, &owner, "uuid:1\u{1}t.9", true, 10_000);
        assert_eq!(&*call.keys[2], "p_redisson_acquire:{n}:t.9");
        assert_eq!(&*call.args[3], "1");
        let int = Reply::Int;
        let arr = Reply::Array;
        assert_eq!(
            decode_acquire(&arr(vec![int(1)])),
            Ok(Attempted::Granted(None))
        );
        assert_eq!(
            decode_acquire(&arr(vec![int(0), int(250)])),
            Ok(Attempted::Wait(250))
        );
        assert_eq!(
            decode_acquire(&arr(vec![int(0), int(-1)])),
            Ok(Attempted::Wait(NO_TTL_RECHECK))
        );
        assert!(decode_acquire(&int(1)).is_err());
        let text = |t: &str| Reply::Bulk(t.into());
        assert_eq!(decode_state(&arr(vec![int(0)])), Ok(RedissonFound::Free));
        assert_eq!(
            decode_state(&arr(vec![int(1), int(900), text("u:1"), text("2")])),
            Ok(RedissonFound::Held {
                pttl: Some(900),
                holders: vec![("u:1".into(), 2)]
            })
        );
        assert!(decode_state(&arr(vec![int(1), int(900), text("u:1")])).is_err());
    }
}
