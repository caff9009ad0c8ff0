//! Owner identity: who a reentrant hold belongs to.
//!
//! Redisson identifies an owner as `<client-uuid>:<thread-id>`. The async analogue is the
//! tokio task: the default owner is `<client-uuid>:task-<id>` inside a task and
//! `<client-uuid>:thread-<id>` outside one. Consequences worth knowing:
//!
//! * a spawned task is a different owner, so it cannot re-enter its parent's lock (it
//!   waits for it, like another thread would in Java);
//! * futures joined inside one task (`join!`, `select!`, `FuturesUnordered`) share the
//!   task's owner, so they re-enter each other's locks instead of excluding each other.
//!   Give them explicit owners ([`Lock::with_owner`](crate::Lock::with_owner)) when they must
//!   exclude each other.

/// The default owner id for the current task or thread, under the given client id.
pub(crate) fn current_owner(client_id: &str) -> String {
    match tokio::task::try_id() {
        Some(task) => format!("{client_id}:task-{task}"),
        None => {
            // ThreadId's Debug form is "ThreadId(N)"; keep just N.
            let thread = format!("{:?}", std::thread::current().id());
            let digits: String = thread.chars().filter(char::is_ascii_digit).collect();
            format!("{client_id}:thread-{digits}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_owner_outside_a_task() {
        let owner = current_owner("c");
        assert!(owner.starts_with("c:thread-"), "{owner}");
        let other = std::thread::spawn(|| current_owner("c")).join().unwrap();
        assert_ne!(owner, other);
    }

    #[tokio::test]
    async fn task_owner_differs_per_task() {
        let (first, joined) = tokio::spawn(async {
            let here = current_owner("c");
            let joined = async { current_owner("c") }.await;
            (here, joined)
        })
        .await
        .unwrap();
        assert!(first.starts_with("c:task-"), "{first}");
        assert_eq!(first, joined, "futures in one task share an owner");
        let second = tokio::spawn(async { current_owner("c") }).await.unwrap();
        assert_ne!(first, second, "a spawned task is another owner");
        // The future passed to `block_on` (e.g. `#[tokio::main]`) is not a task: it owns as
        // its thread.
        assert!(current_owner("c").starts_with("c:thread-"));
    }
}
