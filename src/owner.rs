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
pub(crate) fn fresh_owner(client_id: &str, n: u64) -> std::sync::Arc<str> {
    crate::protocol::args::numbered(&[client_id, ":"], n)
}

/// A short, non-secret stand-in for an owner id, a hold id or a client id in `Debug`
/// output and logs: `#` and 8 hex digits of a hash of it. Anyone who knows an owner id can
/// release or renew that owner's holds (the scripts trust it), so the id itself never
/// appears there; the fingerprint still lets two log lines about the same owner be matched.
pub(crate) struct Fingerprint<'a>(pub(crate) &'a str);

impl Fingerprint<'_> {
    fn hash(&self) -> u32 {
        // FNV-1a: stable across builds and platforms (std's hasher is seeded per process),
        // so fingerprints in two processes' logs agree.
        self.0.bytes().fold(0x811c_9dc5_u32, |hash, byte| {
            (hash ^ u32::from(byte)).wrapping_mul(0x0100_0193)
        })
    }
}

impl std::fmt::Display for Fingerprint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{:08x}", self.hash())
    }
}

impl std::fmt::Debug for Fingerprint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

/// [`Fingerprint`] of an optional id (`None` stays `None`).
pub(crate) fn fingerprint(id: Option<&str>) -> Option<Fingerprint<'_>> {
    id.map(Fingerprint)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_is_short_stable_and_hides_the_id() {
        let id = "6f1c1a52-3c1e-4a8e-9d51-2f0c7f4e8b11:7";
        let shown = Fingerprint(id).to_string();
        assert_eq!(shown.len(), 9);
        assert!(shown.starts_with('#'));
        assert!(!shown.contains("6f1c"));
        assert_eq!(shown, Fingerprint(id).to_string());
        assert_ne!(
            shown,
            Fingerprint("6f1c1a52-3c1e-4a8e-9d51-2f0c7f4e8b11:8").to_string()
        );
        assert_eq!(format!("{:?}", Fingerprint("")), "#811c9dc5");
    }

    #[test]
    fn fresh_owners_differ() {
        assert_eq!(&*fresh_owner("c", 1), "c:1");
        assert_ne!(fresh_owner("c", 1), fresh_owner("c", 2));
    }
}
