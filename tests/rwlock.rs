//! The read-write lock against a real redis-server: readers share, writers exclude,
//! reentrancy and downgrade through guards, the upgrade refused at once, a crashed
//! reader's hold ages out, writers are not starved by a stream of readers, lost signals,
//! and bad input.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::RedisServer;
use redis::AsyncCommands;
use redis_locks::{Error, LostReason, RwKind};

const SEC: Duration = Duration::from_secs(1);

#[tokio::test]
async fn readers_share_and_a_writer_excludes_them() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("shared").unwrap();
    let r1 = rw.try_read().await.unwrap().expect("first read");
    let r2 = rw
        .try_read()
        .await
        .unwrap()
        .expect("a second reader shares");
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "readers exclude a writer"
    );
    let state = rw.state().await.unwrap();
    assert_eq!((state.reads, state.writes), (2, 0));
    r1.release().await.unwrap();
    assert!(
        rw.try_write().await.unwrap().is_none(),
        "one reader is enough"
    );
    r2.release().await.unwrap();
    let w = rw.try_write().await.unwrap().expect("no reader left");
    assert!(w.is_write());
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "a writer excludes readers"
    );
    assert!(rw.try_write().await.unwrap().is_none(), "and other writers");
    w.release().await.unwrap();
    let mut conn = server.conn().await;
    let keys: Vec<String> = conn.keys("*").await.unwrap();
    assert!(
        keys.is_empty(),
        "nothing left after the last release: {keys:?}"
    );
}

#[tokio::test]
async fn reentrancy_and_downgrade_go_through_the_guard_and_upgrade_is_refused() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("nest").unwrap();
    let w = rw.write().await.unwrap();
    let w2 = w.reenter().await.unwrap();
    assert!(w2.is_write());
    // Downgrade: a read through the write guard, then the writes go.
    let r = w.read().await.unwrap();
    assert_eq!(r.kind(), RwKind::Read);
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "another owner cannot read while the write is held"
    );
    w2.release().await.unwrap();
    w.release().await.unwrap();
    let other = rw
        .try_read()
        .await
        .unwrap()
        .expect("after the downgrade others read too");
    assert!(rw.try_write().await.unwrap().is_none());
    // Upgrade: refused at once, through the guard and through an explicit owner.
    let started = Instant::now();
    match r.write().await {
        Err(Error::WouldDeadlock { .. }) => {}
        other => panic!("upgrade through the guard: {other:?}"),
    }
    let owned = rw.with_owner("alice").unwrap();
    let alice_read = owned.read().await.unwrap();
    match owned.write().await {
        Err(Error::WouldDeadlock { name, .. }) => assert_eq!(name, "nest"),
        other => panic!("upgrade by an explicit owner: {other:?}"),
    }
    assert!(
        started.elapsed() < 5 * SEC,
        "refused at once, not after a wait"
    );
    // The refused writes left nothing behind: no reservation holding readers back.
    assert!(!rw.state().await.unwrap().writer_waiting);
    let again = rw.try_read().await.unwrap().expect("readers still welcome");
    for guard in [r, other, alice_read, again] {
        guard.release().await.unwrap();
    }
    assert!(!rw.state().await.unwrap().is_locked());
}

#[tokio::test]
async fn a_reader_reenters_while_a_writer_waits_and_new_readers_queue_behind_it() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("prefer").unwrap();
    let r = rw.read().await.unwrap();
    let writer = {
        let rw = rw.clone();
        tokio::spawn(async move { rw.write().await })
    };
    assert!(
        common::eventually(5 * SEC, || async {
            rw.state().await.unwrap().writer_waiting
        })
        .await,
        "the writer reserves the lock"
    );
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "a new reader waits behind the waiting writer"
    );
    let nested = r
        .reenter()
        .await
        .expect("a live read re-enters (else it would deadlock)");
    nested.release().await.unwrap();
    r.release().await.unwrap();
    let w = tokio::time::timeout(5 * SEC, writer)
        .await
        .expect("the writer gets in once the reads are gone")
        .unwrap()
        .unwrap();
    w.release().await.unwrap();
}

#[tokio::test]
async fn a_crashed_readers_hold_ages_out_within_its_lease() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("crash").unwrap();
    // A reader that stops renewing: a fixed 1 s lease, and its guard forgotten.
    let crashed = rw.with_lease(SEC).unwrap().read().await.unwrap();
    std::mem::forget(crashed);
    let live = rw.read().await.unwrap(); // another reader, renewed: must not keep it alive
    let started = Instant::now();
    assert!(rw.try_write().await.unwrap().is_none());
    live.release().await.unwrap();
    let w = rw
        .try_write_for(5 * SEC)
        .await
        .unwrap()
        .expect("the crashed read ages out");
    let waited = started.elapsed();
    println!("writer got in {waited:?} after the crashed reader's acquire (lease 1 s)");
    assert!(
        waited >= Duration::from_millis(900),
        "not before its lease: {waited:?}"
    );
    w.release().await.unwrap();
}

#[tokio::test]
async fn writers_are_not_starved_by_a_stream_of_readers() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("stream").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    // Six readers with staggered starts and different hold times, so that their holds
    // always overlap: without writer preference the lock is never free of readers (checked
    // by disabling the reservation: the writer then timed out).
    for i in 0..6u64 {
        let (rw, stop, reads) = (rw.clone(), stop.clone(), reads.clone());
        readers.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(3 * i)).await;
            while !stop.load(Ordering::Relaxed) {
                let guard = rw.read().await.unwrap();
                reads.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(15 + 4 * i)).await;
                guard.release().await.unwrap();
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut waits = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let w = rw
            .try_write_for(5 * SEC)
            .await
            .unwrap()
            .expect("a writer gets in while readers keep coming");
        waits.push(started.elapsed());
        w.release().await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for reader in readers {
        reader.await.unwrap();
    }
    println!(
        "writer waits under a stream of 6 overlapping readers (15-35 ms holds): {waits:?}; {} reads",
        reads.load(Ordering::Relaxed)
    );
    assert!(reads.load(Ordering::Relaxed) > 20, "the readers did read");
}

#[tokio::test]
async fn exclusion_holds_across_clients_under_contention() {
    let server = RedisServer::start();
    let inside_readers = Arc::new(AtomicI64::new(0));
    let inside_writers = Arc::new(AtomicI64::new(0));
    let violations = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for c in 0..3 {
        let client = server.client(3 * SEC).await;
        for t in 0..4 {
            let rw = client.rw_lock("contended").unwrap();
            let (readers, writers, violations) = (
                inside_readers.clone(),
                inside_writers.clone(),
                violations.clone(),
            );
            tasks.push(tokio::spawn(async move {
                for round in 0..15 {
                    if (c + t + round) % 3 == 0 {
                        let guard = rw.write().await.unwrap();
                        if writers.fetch_add(1, Ordering::SeqCst) != 0
                            || readers.load(Ordering::SeqCst) != 0
                        {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        writers.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.unwrap();
                    } else {
                        let guard = rw.read().await.unwrap();
                        readers.fetch_add(1, Ordering::SeqCst);
                        if writers.load(Ordering::SeqCst) != 0 {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        tokio::time::sleep(Duration::from_millis(2)).await;
                        readers.fetch_sub(1, Ordering::SeqCst);
                        guard.release().await.unwrap();
                    }
                }
            }));
        }
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
async fn a_deleted_hold_is_told_and_its_release_is_lock_lost() {
    let server = RedisServer::start();
    let client = server.client(SEC).await;
    let rw = client.rw_lock("lost").unwrap();
    let w = rw.write().await.unwrap();
    let mut conn = server.conn().await;
    let _: () = conn.del(rw.write_key()).await.unwrap();
    tokio::time::timeout(3 * SEC, w.lost())
        .await
        .expect("the watchdog tells the loss within a tick");
    assert_eq!(w.lost_reason(), Some(LostReason::OwnerFieldGone));
    assert!(matches!(w.release().await, Err(Error::LockLost { .. })));
    // A fixed-lease read is told when its lease ends, and not renewed.
    let r = rw
        .with_lease(Duration::from_millis(500))
        .unwrap()
        .read()
        .await
        .unwrap();
    tokio::time::timeout(3 * SEC, r.lost())
        .await
        .expect("lease end told");
    assert!(matches!(r.release().await, Err(Error::LockLost { .. })));
}

#[tokio::test]
async fn a_stale_guard_never_frees_a_newer_hold() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("stale").unwrap().with_owner("o").unwrap();
    let old = rw.write().await.unwrap();
    let mut conn = server.conn().await;
    let _: () = conn.del(rw.write_key()).await.unwrap();
    let new = rw.write().await.unwrap();
    assert!(
        old.release().await.is_err(),
        "the stale guard's hold is gone"
    );
    let intruder = client.rw_lock("stale").unwrap();
    assert!(
        intruder.try_write().await.unwrap().is_none(),
        "the newer hold still excludes"
    );
    assert!(intruder.try_read().await.unwrap().is_none());
    new.release().await.unwrap();
}

#[tokio::test]
async fn fenced_writes_get_increasing_tokens_and_reentry_keeps_its_token() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("fenced").unwrap().with_fencing();
    let w = rw.write().await.unwrap();
    let t1 = w.fencing_token().expect("a fenced write has a token");
    let nested = w.reenter().await.unwrap();
    assert_eq!(nested.fencing_token(), Some(t1));
    let r = w.read().await.unwrap();
    assert_eq!(r.fencing_token(), None, "reads have no token");
    for guard in [r, nested, w] {
        guard.release().await.unwrap();
    }
    let w = rw.write().await.unwrap();
    assert!(w.fencing_token().unwrap() > t1);
    w.release().await.unwrap();
}

#[tokio::test]
async fn bad_input_and_wrong_types_are_typed_errors() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    assert!(matches!(client.rw_lock(""), Err(Error::InvalidName { .. })));
    let rw = client.rw_lock("typed").unwrap();
    assert!(matches!(
        rw.with_owner(""),
        Err(Error::InvalidName { .. } | Error::InvalidConfig(_))
    ));
    assert!(matches!(
        rw.with_lease(Duration::ZERO),
        Err(Error::InvalidDuration { .. })
    ));
    let mut conn = server.conn().await;
    let _: () = conn.set(rw.read_key(), "a string").await.unwrap();
    match rw.try_read().await {
        Err(Error::WrongType { found, .. }) => assert!(found.contains("string"), "{found}"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(rw.try_write().await, Err(Error::WrongType { .. })));
    assert!(matches!(rw.state().await, Err(Error::WrongType { .. })));
    let value: String = conn.get(rw.read_key()).await.unwrap();
    assert_eq!(value, "a string", "nothing was written");
}
