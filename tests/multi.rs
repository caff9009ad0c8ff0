//! The multi-lock against real redis-servers: all or none, no deadlock between
//! multi-locks naming the same locks in opposite orders, one lost signal, reentrancy.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use common::RedisServer;
use redis::AsyncCommands;
use redis_locks::{Error, LostReason, Member, MemberGuard, MultiLock, RwKind};

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
        MultiLock::new(Vec::<Member>::new()),
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

/// The members of one multi-lock, of every kind that holds: a read, a write, a plain lock
/// and a fair lock, named in an order that is not the global one.
fn every_kind(client: &redis_locks::LockClient) -> MultiLock {
    MultiLock::new([
        Member::Fair(client.fair_lock("mk-fair").unwrap()),
        Member::Read(client.rw_lock("mk-read").unwrap()),
        Member::Lock(client.lock("mk-plain").unwrap()),
        Member::Write(client.rw_lock("mk-write").unwrap()),
    ])
    .unwrap()
}

/// Nothing of `every_kind` is held (a read elsewhere is not a hold of ours, so a write
/// of "mk-read" by `other` must get through).
async fn none_left(other: &redis_locks::LockClient) {
    let write = other.rw_lock("mk-read").unwrap().try_write().await.unwrap();
    write
        .expect("the read was left held")
        .release()
        .await
        .unwrap();
    for (what, held) in [
        (
            "write",
            other
                .rw_lock("mk-write")
                .unwrap()
                .is_locked()
                .await
                .unwrap(),
        ),
        (
            "plain",
            other.lock("mk-plain").unwrap().is_locked().await.unwrap(),
        ),
        (
            "fair",
            other
                .fair_lock("mk-fair")
                .unwrap()
                .is_locked()
                .await
                .unwrap(),
        ),
    ] {
        assert!(!held, "the {what} member was left held");
    }
}

/// A multi-lock over every kind (Redisson's `RedissonMultiLock` over read, write and fair
/// locks): all or none against each kind's own holder, shared where the member is a
/// read, each member's guard of its own kind, re-entry, one lost signal.
#[tokio::test]
async fn every_kind_all_or_none() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let other = server.client(3 * SEC).await;
    let multi = every_kind(&client);
    assert_eq!(
        multi.members().iter().map(Member::name).collect::<Vec<_>>(),
        ["mk-fair", "mk-plain", "mk-read", "mk-write"],
        "the global order, whatever order they were named in"
    );
    // Each kind's own holder stands in the way, and the failed attempts leave nothing.
    {
        let held = other.rw_lock("mk-read").unwrap().write().await.unwrap();
        assert!(
            multi.try_acquire().await.unwrap().is_none(),
            "a writer blocks the read"
        );
        held.release().await.unwrap();
        client.flush().await;
        none_left(&other).await;
    }
    {
        let held = other.rw_lock("mk-write").unwrap().read().await.unwrap();
        let got = multi
            .try_acquire_for(Duration::from_millis(200))
            .await
            .unwrap();
        assert!(got.is_none(), "a reader blocks the write");
        held.release().await.unwrap();
        client.flush().await;
        none_left(&other).await;
    }
    {
        let held = other.fair_lock("mk-fair").unwrap().acquire().await.unwrap();
        assert!(matches!(
            multi.acquire_timeout(Duration::ZERO).await,
            Err(Error::Timeout { .. })
        ));
        held.release().await.unwrap();
        client.flush().await;
        none_left(&other).await;
    }
    // A read elsewhere does not stand in the way of the read member.
    let reader = other.rw_lock("mk-read").unwrap().read().await.unwrap();
    let all = multi.acquire_timeout(3 * SEC).await.unwrap();
    let kinds: Vec<&str> = all
        .guards()
        .iter()
        .map(|guard| match guard {
            MemberGuard::Lock(_) => "lock",
            MemberGuard::Rw(rw) if rw.kind() == RwKind::Read => "read",
            MemberGuard::Rw(_) => "write",
            MemberGuard::Fair(_) => "fair",
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["fair", "lock", "read", "write"]);
    // Held: no other holder of any member, except another reader of the read.
    assert!(
        other
            .lock("mk-plain")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        other
            .fair_lock("mk-fair")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        other
            .rw_lock("mk-write")
            .unwrap()
            .try_read()
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        other
            .rw_lock("mk-read")
            .unwrap()
            .try_write()
            .await
            .unwrap()
            .is_none()
    );
    other
        .rw_lock("mk-read")
        .unwrap()
        .try_read()
        .await
        .unwrap()
        .expect("readers share the read member")
        .release()
        .await
        .unwrap();
    reader.release().await.unwrap();
    // Re-entry takes one more hold of every member, of its own kind.
    let nested = all.reenter().await.unwrap();
    assert_eq!(nested.guards().len(), 4);
    assert_eq!(
        client
            .lock("mk-plain")
            .unwrap()
            .state()
            .await
            .unwrap()
            .holders[0]
            .1,
        2
    );
    nested.release().await.unwrap();
    assert!(!all.is_lost());
    // One lost signal: an operator clears the fair member.
    assert!(
        other
            .fair_lock("mk-fair")
            .unwrap()
            .force_unlock()
            .await
            .unwrap()
    );
    tokio::time::timeout(5 * SEC, all.lost())
        .await
        .expect("a lost member is told within a tick");
    assert!(all.lost_reason().is_some());
    assert!(matches!(all.release().await, Err(Error::LockLost { .. })));
    none_left(&other).await;
}

/// Multi-locks of mixed kinds naming the same locks in opposite orders, across two
/// servers: never two inside at once, never a wait in a cycle.
#[tokio::test]
async fn mixed_kinds_in_opposite_orders_never_deadlock_or_overlap() {
    let first = RedisServer::start();
    let second = RedisServer::start();
    let inside = Arc::new(AtomicI64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..6 {
        let c1 = first.client(3 * SEC).await;
        let c2 = second.client(3 * SEC).await;
        let mut members = vec![
            Member::Write(c1.rw_lock("mx-w").unwrap()),
            Member::Read(c2.rw_lock("mx-r").unwrap()),
            Member::Fair(c2.fair_lock("mx-f").unwrap()),
            Member::Lock(c1.lock("mx-l").unwrap()),
        ];
        if t % 2 == 1 {
            members.reverse();
        }
        let multi = MultiLock::new(members).unwrap();
        let (inside, violations) = (inside.clone(), violations.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..10 {
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
        tokio::time::timeout(90 * SEC, task)
            .await
            .expect("no deadlock")
            .unwrap();
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0);
}

/// A read and a write of one read-write lock in one multi-lock would wait for each other
/// (there is no upgrade): refused like a lock named twice.
#[tokio::test]
async fn a_read_and_a_write_of_one_lock_are_refused() {
    let server = RedisServer::start();
    let client = server.client(SEC).await;
    let rw = client.rw_lock("rw-twice").unwrap();
    match MultiLock::new([Member::Read(rw.clone()), Member::Write(rw.clone())]) {
        Err(Error::InvalidConfig(message)) => {
            assert!(message.contains("rw-twice"), "{message}")
        }
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    // A lock and a read-write lock of the same name are different locks.
    MultiLock::new([
        Member::Lock(client.lock("rw-twice").unwrap()),
        Member::Write(rw),
    ])
    .unwrap();
}

/// The scoped `run` and the guard's `extend` over members of every kind: `extend`
/// lengthens each member's fixed lease; `run` returns the body's value and gives every
/// member back, and a member lost meanwhile stops the body with `LockLost` naming it.
#[tokio::test]
async fn run_and_extend_over_every_kind() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let lease = Duration::from_millis(1500);
    let multi = MultiLock::new([
        Member::Lock(client.lock("re-plain").unwrap().with_lease(lease).unwrap()),
        Member::Write(
            client
                .rw_lock("re-write")
                .unwrap()
                .with_lease(lease)
                .unwrap(),
        ),
        Member::Fair(
            client
                .fair_lock("re-fair")
                .unwrap()
                .with_lease(lease)
                .unwrap(),
        ),
    ])
    .unwrap();
    let all = multi.acquire().await.unwrap();
    all.extend(Duration::from_secs(20)).await.unwrap();
    let left = [
        client
            .lock("re-plain")
            .unwrap()
            .remaining_ttl()
            .await
            .unwrap(),
        client
            .rw_lock("re-write")
            .unwrap()
            .remaining_ttl()
            .await
            .unwrap(),
        client
            .fair_lock("re-fair")
            .unwrap()
            .remaining_ttl()
            .await
            .unwrap(),
    ];
    for ttl in left {
        assert!(ttl.unwrap() > Duration::from_secs(10), "{left:?}");
    }
    assert!(matches!(
        all.extend(Duration::ZERO).await,
        Err(Error::InvalidDuration { .. })
    ));
    assert!(all.remaining_lease() > Duration::from_secs(10));
    all.release().await.unwrap();
    // detach: every member stays held until its lease ends.
    multi.acquire().await.unwrap().detach();
    assert!(
        client
            .fair_lock("re-fair")
            .unwrap()
            .is_locked()
            .await
            .unwrap()
    );
    assert!(
        common::eventually(5 * SEC, || async {
            !client.lock("re-plain").unwrap().is_locked().await.unwrap()
        })
        .await,
        "the detached members did not expire"
    );

    let value = multi.run(async |held| held.guards().len()).await.unwrap();
    assert_eq!(value, 3);
    assert!(
        !client
            .fair_lock("re-fair")
            .unwrap()
            .is_locked()
            .await
            .unwrap()
    );

    let operator = client.rw_lock("re-write").unwrap();
    let stopped = multi
        .run(async |_held| {
            operator.force_unlock().await.unwrap();
            tokio::time::sleep(Duration::from_secs(30)).await;
            "finished"
        })
        .await;
    match stopped {
        Err(Error::LockLost { name, .. }) => assert_eq!(name, "re-write"),
        other => panic!("expected LockLost for re-write, got {other:?}"),
    }
    client.flush().await;
    assert!(!client.lock("re-plain").unwrap().is_locked().await.unwrap());
}
