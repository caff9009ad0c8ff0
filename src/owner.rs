//! Owner identity: who a reentrant hold belongs to.
//!
//! Redisson's owner is `<client-uuid>:<thread-id>`, so a thread re-enters its own locks.
//! The async analogue, the tokio task, cannot tell nesting from concurrency: futures joined
//! in one task (`join!`, `select!`, `FuturesUnordered`) would all be inside the lock at
//! once. So reentrancy here is explicit:
//!
//! * every `acquire` of a handle without an explicit owner is a **new owner**
//!   (`<client-uuid>:<n>`): concurrent futures exclude each other, wherever they run;
//! * a nested critical section re-enters through the guard it is nested in
//!   ([`LockGuard::reenter`](crate::LockGuard::reenter)), which joins that hold
//!   (`<owner>: count + 1`);
//! * [`Lock::with_owner`](crate::Lock::with_owner) names an owner explicitly: every handle
//!   with that id (in any task or process) shares the holds, by the user's choice.

/// A fresh owner id under `client_id`: one per acquisition of a handle without an
/// explicit owner.
pub(crate) fn fresh_owner(client_id: &str, n: u64) -> String {
    format!("{client_id}:{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_owners_differ() {
        assert_eq!(fresh_owner("c", 1), "c:1");
        assert_ne!(fresh_owner("c", 1), fresh_owner("c", 2));
    }
}
