//! Fencing tokens against a real redis-server.

mod common;

use std::time::Duration;

use common::RedisServer;
use redis::AsyncCommands;

const SEC: Duration = Duration::from_secs(1);

#[tokio::test]
async fn tokens_grow_strictly_and_reentry_keeps_its_token() {
    let server = RedisServer::start();
    let a = server.client(30 * SEC).await;
    let b = server.client(30 * SEC).await;
    // Re-entries with other terms (plain, then fenced) go through an explicit owner.
    let owner_a = "owner-a";
    let lock_a = a
        .lock("ledger")
        .unwrap()
        .with_owner(owner_a)
        .unwrap()
        .with_fencing();
    let lock_b = b.lock("ledger").unwrap().with_fencing();
    assert!(lock_a.is_fenced());

    let first = lock_a.acquire().await.unwrap();
    let t1 = first.fencing_token().unwrap();
    let nested = first.reenter().await.unwrap();
    assert_eq!(
        nested.fencing_token(),
        Some(t1),
        "reentry takes no new number"
    );
    nested.release().await.unwrap();
    first.release().await.unwrap();

    let second = lock_b.acquire().await.unwrap();
    let t2 = second.fencing_token().unwrap();
    assert!(t2 > t1);
    second.release().await.unwrap();

    // A plain (unfenced) hold takes no number; re-entering it with fencing takes a fresh
    // one (never a number an earlier holder had), and the hold keeps it.
    let plain = a
        .lock("ledger")
        .unwrap()
        .with_owner(owner_a)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert_eq!(plain.fencing_token(), None);
    assert_eq!(
        a.lock("ledger").unwrap().state().await.unwrap().fence,
        Some(t2)
    );
    let inner = lock_a.acquire().await.unwrap();
    let t3 = inner.fencing_token().unwrap();
    assert!(
        t3 > t2,
        "a fresh number for the re-entered plain hold ({t3} vs {t2})"
    );
    let again = inner.reenter().await.unwrap();
    assert_eq!(again.fencing_token(), Some(t3), "the hold keeps its token");
    let state = a.lock("ledger").unwrap().state().await.unwrap();
    assert_eq!((state.fence, state.hold_token), (Some(t3), Some(t3)));
    assert_eq!(state.holders.len(), 1, "the token field is not a holder");
    again.release().await.unwrap();
    inner.release().await.unwrap();
    plain.release().await.unwrap();

    let mut conn = server.conn().await;
    let counter: u64 = conn.get("redis-locks:{ledger}:fence").await.unwrap();
    assert_eq!(counter, t3);
    let ttl: i64 = conn.ttl("redis-locks:{ledger}:fence").await.unwrap();
    assert_eq!(ttl, -1, "the counter must not expire");
}

#[tokio::test]
async fn unfenced_locks_create_no_counter() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("plain").unwrap();
    lock.acquire().await.unwrap().release().await.unwrap();
    let mut conn = server.conn().await;
    let exists: bool = conn.exists("redis-locks:{plain}:fence").await.unwrap();
    assert!(!exists);
    assert_eq!(lock.state().await.unwrap().fence, None);
}

#[tokio::test]
async fn a_nested_fenced_acquire_takes_a_fresh_number() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("late").unwrap().with_owner("o").unwrap();
    let outer = lock.acquire().await.unwrap();
    let inner = lock.with_fencing().acquire().await.unwrap();
    let first = inner.fencing_token().expect("a token");
    inner.release().await.unwrap();
    outer.release().await.unwrap();
    let next = lock.with_fencing().acquire().await.unwrap();
    assert!(next.fencing_token().expect("a token") > first);
    next.release().await.unwrap();
}

/// Redis restarts without persistence (the counter is lost) between two fenced holds, and
/// then the counter is deleted by hand: the next token is still larger each time. Fails on
/// a plain INCR counter, which starts again at 1.
#[tokio::test]
async fn tokens_keep_growing_when_redis_loses_the_counter() {
    let mut server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("migrate").unwrap().with_fencing();
    let mut last = 0;
    for _ in 0..3 {
        let guard = lock.acquire().await.unwrap();
        let token = guard.fencing_token().expect("a token");
        assert!(token > last, "token went backwards: {token} after {last}");
        last = token;
        guard.release().await.unwrap();
    }
    server.restart();
    // The same client reconnects on its own.
    let guard = common::eventually_ok(10 * SEC, || lock.acquire()).await;
    let token = guard.fencing_token().expect("a token");
    assert!(token > last, "after a restart: {token} after {last}");
    last = token;
    guard.release().await.unwrap();
    let mut conn = server.conn().await;
    let _: () = conn.del("redis-locks:{migrate}:fence").await.unwrap();
    let guard = lock.acquire().await.unwrap();
    assert!(
        guard.fencing_token().unwrap() > last,
        "after DEL of the counter"
    );
    guard.release().await.unwrap();
}

/// Many clients, many acquisitions, one name: the tokens they were handed, in the order the
/// holds happened, strictly increase.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_under_contention() {
    let server = RedisServer::start();
    let history = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let client = server.client(30 * SEC).await;
        let history = history.clone();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock("contended").unwrap().with_fencing();
            for _ in 0..50 {
                let guard = lock.acquire().await.unwrap();
                // Recorded while the hold is held: the order of the list is the hold order.
                history.lock().push(guard.fencing_token().unwrap());
                guard.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let history = history.lock();
    assert_eq!(history.len(), 200);
    assert!(
        history.windows(2).all(|pair| pair[0] < pair[1]),
        "not strictly increasing: {history:?}"
    );
}
