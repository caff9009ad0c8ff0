//! The extension of one hold (every guard's `extend`): one renewal of just that hold, to
//! a lease the caller names, with the call its shape needs. Its reply is read as a
//! renewal's (`renew::decode_renew`, one item).

use std::sync::Arc;

use super::renew::{RenewItem, renew_call};
use super::{Call, Millis};

/// What one hold is in Redis, for its renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldShape {
    /// A lock hash (`lua/acquire.lua`): renewed by `lua/renew.lua`, which checks the hold
    /// id in the hash.
    LockHash,
    /// Members `<id>:1..n` of a sorted set scored by their deadlines (a semaphore
    /// acquisition of n permits, or with n = 1 a read-write or fair lock hold): renewed by
    /// `lua/sem_renew.lua`.
    SetMembers(u32),
    /// A field of a lock hash in Redisson's layout (`lua/redisson_acquire.lua`), its
    /// owner's hold count: renewed by `lua/redisson_renew.lua`, which checks the field.
    RedissonField,
    /// A read of a read-write lock in Redisson's layout (`lua/redisson_rw_acquire.lua`):
    /// its owner's field and read timeout keys, renewed by `lua/redisson_renew.lua`.
    RedissonRead,
    /// The write of a read-write lock in Redisson's layout: the field `<owner>:write`,
    /// renewed by `lua/redisson_renew.lua`.
    RedissonWrite,
}

/// The call that makes `hold` (under `key`: the lock hash, or the sorted set) last at
/// least `lease_ms` from when it runs.
pub fn extension_call(lease_ms: Millis, key: Arc<str>, hold: Arc<str>, shape: HoldShape) -> Call {
    // The form is not known here: renew.lua reads a string first, then the hash.
    let item = RenewItem {
        key,
        hold,
        renew: true,
        hash_form: false,
    };
    match shape {
        HoldShape::LockHash => renew_call(lease_ms, vec![item]).0,
        HoldShape::SetMembers(n) => super::semaphore::renew_call(lease_ms, &[item], &[n]).0,
        HoldShape::RedissonField | HoldShape::RedissonRead | HoldShape::RedissonWrite => {
            super::redisson::renew_call_shaped(lease_ms, &[item], &[shape]).0
        }
    }
}
