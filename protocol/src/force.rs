//! An operator's force-unlock of a kind whose holds live in sorted sets (the read-write
//! lock, the fair lock, the semaphore's permits): `lua/force_delete.lua`'s calls and what
//! its reply means. The plain lock's is `force_unlock_call` (`lua/force_unlock.lua`).

use std::sync::Arc;

use super::fair::FairKeys;
use super::rwlock::RwKeys;
use super::semaphore::SemaphoreKeys;
use super::{Call, Reply, ScriptId};

/// What a force-delete found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForceDeleted {
    /// This many live holds (permits, for a semaphore) were deleted; 0: none was held.
    Holds(u64),
    /// A key is not a sorted set (it holds something else, of this type): nothing was
    /// written.
    NotOurs(String),
}

fn flag(sharded: bool) -> Arc<str> {
    if sharded { "1".into() } else { "0".into() }
}

fn call(keys: Vec<Arc<str>>, sharded: bool, channels: &[Arc<str>], wake_prefix: &str) -> Call {
    let mut args = vec![flag(sharded), channels.len().to_string().into()];
    args.extend(channels.iter().cloned());
    args.push(wake_prefix.into());
    Call {
        script: ScriptId::ForceDelete,
        keys,
        args,
    }
}

/// Deletes every write and read hold of a read-write lock and wakes readers and writers
/// (the fencing counter and a waiting writer's reservation stay).
pub fn rwlock_call(keys: &RwKeys) -> Call {
    call(
        vec![keys.write.clone(), keys.read.clone()],
        keys.sharded,
        &[keys.read_channel.clone(), keys.write_channel.clone()],
        "",
    )
}

/// Deletes the fair lock's holds and wakes the head of its queue (the queue, the
/// waiters' liveness and the fencing counter stay).
pub fn fair_call(keys: &FairKeys) -> Call {
    call(
        vec![keys.holds.clone(), keys.queue.clone()],
        keys.sharded,
        &[],
        &keys.wake_prefix,
    )
}

/// Deletes every permit taken from a semaphore and wakes its waiters (its size and a
/// waiter's reservation stay).
pub fn semaphore_call(keys: &SemaphoreKeys) -> Call {
    call(
        vec![keys.permits.clone()],
        keys.sharded,
        std::slice::from_ref(&keys.channel),
        "",
    )
}

/// Reads `force_delete.lua`'s reply.
pub fn decode(reply: &Reply) -> Result<ForceDeleted, String> {
    match reply {
        Reply::Int(n) if *n >= 0 => Ok(ForceDeleted::Holds(*n as u64)),
        Reply::Array(items) => match items.as_slice() {
            [Reply::Int(-2), found] => Ok(ForceDeleted::NotOurs(found.text().unwrap_or_default())),
            _ => Err(format!("force_delete: {reply:?}")),
        },
        other => Err(format!("force_delete: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_name_their_keys_and_channels_and_replies_are_read() {
        let rw = RwKeys::new("p", 0, false, "n");
        let call = rwlock_call(&rw);
        assert_eq!(call.keys, vec![rw.write.clone(), rw.read.clone()]);
        assert_eq!(&*call.args[1], "2");
        assert_eq!(call.args.last().map(|a| &**a), Some(""));
        let fair = FairKeys::new("p", 0, true, "n");
        let call = fair_call(&fair);
        assert_eq!(call.keys.last(), Some(&fair.queue));
        assert_eq!((&*call.args[0], &*call.args[1]), ("1", "0"));
        assert_eq!(call.args.last(), Some(&fair.wake_prefix));
        assert_eq!(decode(&Reply::Int(3)), Ok(ForceDeleted::Holds(3)));
        assert_eq!(
            decode(&Reply::Array(vec![
                Reply::Int(-2),
                Reply::Bulk(b"hash".to_vec())
            ])),
            Ok(ForceDeleted::NotOurs("hash".into()))
        );
        assert!(decode(&Reply::Int(-1)).is_err());
    }
}
