//! The multi-lock against real redis-servers: all or none, no deadlock between
//! multi-locks naming the same locks in opposite orders, one lost signal, reentrancy.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use common::RedisServer;
use redis::AsyncCommands;
use redis_locks::{Error, LostReason, MultiLock};

const SEC: Duration = Duration::from_secs(1);

#[tokio::test]
async fn all_or_none() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let other = server.client(3 * SEC).await;
    let b_held = other.lock("b").unwrap().acquire().await.unwrap();
    let multi = MultiLock::new([
        client.lock("a").unwrap(),
        client.lock("b").unwrap(),
        client.lock("c").unwrap(),
    ])
    .unwrap();
    assert!(multi.try_acquire().await.unwrap().is_none());
    // A zero wait tries once (the `deadline - now` pattern may reach zero).
    assert!(
        multi
            .try_acquire_for(Duration::ZERO)
            .await
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        multi.try_acquire_for(Duration::MAX).await,
        Err(Error::InvalidDuration { .. })
    ));
    assert!(
        multi
            .try_acquire_for(Duration::from_millis(300))
            .await
            .unwrap()
            .is_none()
    );
    // Nothing left held by the failed attempts.
    client.flush().await;
    for name in ["a", "c"] {
        assert!(
            !client.lock(name).unwrap().is_locked().await.unwrap(),
            "{name} was left held"
        );
    }
    b_held.release().await.unwrap();
    let all = multi.acquire().await.unwrap();
    assert_eq!(all.guards().len(), 3);
    for name in ["a", "b", "c"] {
        assert!(
            other
                .lock(name)
                .unwrap()
                .try_acquire()
                .await
                .unwrap()
                .is_none()
        );
    }
    all.release().await.unwrap();
    let mut conn = server.conn().await;
    let keys: Vec<String> = conn.keys("*").await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn opposite_orders_never_deadlock_or_overlap() {
    let first = RedisServer::start();
    let second = RedisServer::start();
    let inside = Arc::new(AtomicI64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..6 {
        let c1 = first.client(3 * SEC).await;
        let c2 = second.client(3 * SEC).await;
        // Half name the locks x, y, z; the other half z, y, x; across two servers.
        let mut locks = vec![
            c1.lock("x").unwrap(),
            c2.lock("y").unwrap(),
            c1.lock("z").unwrap(),
        ];
        if t % 2 == 1 {
            locks.reverse();
        }
        let multi = MultiLock::new(locks).unwrap();
        let (inside, violations) = (inside.clone(), violations.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..15 {
                let all = multi.acquire().await.unwrap();
                if inside.fetch_add(1, Ordering::SeqCst) != 0 {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                all.release().await.unwrap();
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(60 * SEC, task)
            .await
            .expect("no deadlock")
            .unwrap();
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn one_lost_signal_and_reentrancy() {
    let server = RedisServer::start();
    let client = server.client(SEC).await;
    let multi = MultiLock::new([client.lock("p").unwrap(), client.lock("q").unwrap()]).unwrap();
    let outer = multi.acquire().await.unwrap();
    let nested = outer.reenter().await.unwrap();
    assert_eq!(
        client.lock("q").unwrap().state().await.unwrap().holders[0].1,
        2,
        "re-entered every member"
    );
    nested.release().await.unwrap();
    assert!(!outer.is_lost(), "releasing the nested guard loses nothing");
    let mut conn = server.conn().await;
    let _: () = conn.del(client.lock("q").unwrap().key()).await.unwrap();
    tokio::time::timeout(3 * SEC, outer.lost())
        .await
        .expect("a lost member is told within a tick");
    assert_eq!(outer.lost_reason(), Some(LostReason::OwnerFieldGone));
    assert!(matches!(outer.release().await, Err(Error::LockLost { .. })));
    assert!(
        !client.lock("p").unwrap().is_locked().await.unwrap(),
        "the other member was released anyway"
    );
}

#[tokio::test]
async fn bad_input() {
    let server = RedisServer::start();
    let client = server.client(SEC).await;
    assert!(matches!(
        MultiLock::new(Vec::new()),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        MultiLock::new([client.lock("d").unwrap(), client.lock("d").unwrap()]),
        Err(Error::InvalidConfig(_))
    ));
    // The same lock through another spelling of the server's address is the same lock.
    let aliased = redis_locks::LockClient::connect(&format!("redis://localhost:{}/", server.port))
        .await
        .unwrap();
    assert!(matches!(
        MultiLock::new([client.lock("d").unwrap(), aliased.lock("d").unwrap()]),
        Err(Error::InvalidConfig(_))
    ));
}

/// `acquire_timeout` on the multi-lock: `Timeout` naming the members when one of them is
/// held elsewhere (zero and short waits), and nothing left taken.
#[tokio::test]
async fn acquire_timeout_takes_none_and_says_timeout() {
    let server = RedisServer::start();
    let client = server.client(Duration::from_secs(30)).await;
    let other = server.client(Duration::from_secs(30)).await;
    let held = other.lock("mt-b").unwrap().acquire().await.unwrap();
    let multi =
        MultiLock::new([client.lock("mt-a").unwrap(), client.lock("mt-b").unwrap()]).unwrap();
    for wait in [Duration::ZERO, Duration::from_millis(50)] {
        match multi.acquire_timeout(wait).await {
            Err(Error::Timeout { name, .. }) => assert_eq!(name, "mt-a,mt-b"),
            other => panic!("{wait:?}: expected Timeout, got {other:?}"),
        }
    }
    assert!(!client.lock("mt-a").unwrap().is_locked().await.unwrap());
    held.release().await.unwrap();
    multi
        .acquire_timeout(Duration::ZERO)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}
