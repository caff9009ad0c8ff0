//! The blocking API (feature `blocking`): plain threads, no async in sight.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::RedisServer;
use redis_locks::Error;
use redis_locks::blocking::LockClient;

#[test]
fn threads_exclude_each_other_and_nest_through_the_guard() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).unwrap();
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (client, inside, max_inside) = (client.clone(), inside.clone(), max_inside.clone());
            std::thread::spawn(move || {
                let lock = client.lock("threads").unwrap();
                for _ in 0..15 {
                    let guard = lock.acquire().unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, Ordering::SeqCst);
                    let nested = guard.reenter().unwrap();
                    assert_eq!(nested.hold_count(), 2);
                    std::thread::sleep(Duration::from_millis(2));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    nested.release().unwrap();
                    guard.release().unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(
        max_inside.load(Ordering::SeqCst),
        1,
        "two threads were inside"
    );
    assert!(!client.lock("threads").unwrap().is_locked().unwrap());
}

#[test]
fn run_try_and_timed_try() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).unwrap();
    let lock = client.lock("blocking-run").unwrap().with_fencing();
    let token = lock.run(|guard| guard.fencing_token()).unwrap();
    assert!(token.is_some());
    let held = lock.acquire().unwrap();
    let other = LockClient::connect(&server.url()).unwrap();
    let theirs = other.lock("blocking-run").unwrap();
    assert!(theirs.try_acquire().unwrap().is_none());
    assert!(
        theirs
            .try_acquire_for(Duration::from_millis(100))
            .unwrap()
            .is_none()
    );
    assert!(matches!(
        theirs.acquire_timeout(Duration::from_millis(100)),
        Err(Error::Timeout { .. })
    ));
    held.release().unwrap();
    let guard = theirs
        .try_acquire_for(Duration::from_secs(5))
        .unwrap()
        .expect("free now");
    guard.release().unwrap();
}

/// Dropping the last client handle waits for the background release of a dropped guard,
/// so the lock does not stay held for its lease.
#[test]
fn dropping_the_client_flushes_dropped_guards() {
    let server = RedisServer::start();
    let observer = LockClient::connect(&server.url()).unwrap();
    {
        let client = LockClient::connect(&server.url()).unwrap();
        let guard = client.lock("dropped").unwrap().acquire().unwrap();
        assert!(observer.lock("dropped").unwrap().is_locked().unwrap());
        drop(guard);
        drop(client);
    }
    assert!(
        !observer.lock("dropped").unwrap().is_locked().unwrap(),
        "the dropped guard's lock stayed held after the client was dropped"
    );
}

/// Inside an async runtime the blocking API refuses, with a typed error, instead of
/// blocking (or panicking in) a runtime thread.
#[test]
fn inside_a_runtime_it_refuses_with_a_typed_error() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).unwrap();
    let lock = client.lock("in-runtime").unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (acquired, connected) = runtime.block_on(async {
        (
            lock.try_acquire().map(|guard| guard.is_some()),
            LockClient::connect(&server.url()).map(|_| ()),
        )
    });
    assert!(
        matches!(acquired, Err(Error::InvalidConfig(_))),
        "{acquired:?}"
    );
    assert!(
        matches!(connected, Err(Error::InvalidConfig(_))),
        "{connected:?}"
    );
    assert!(!lock.is_locked().unwrap());
    assert!(matches!(
        LockClient::connect("not a url"),
        Err(Error::InvalidUrl(_))
    ));
}

/// Every other kind has the blocking shape too: the read-write lock (threads writing
/// alone, reading together, a read through the write), the fair lock (re-entry), the
/// semaphore (never more permits out than its size) and the latch (a thread waits until
/// others count it down). Zero waits try once.
#[test]
fn every_kind_blocks_the_same_way() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).unwrap();

    let rw = client.rw_lock("blocking-rw").unwrap();
    let write = rw.write().unwrap();
    assert!(write.is_write());
    assert!(rw.try_read().unwrap().is_none());
    assert!(rw.try_write_for(Duration::ZERO).unwrap().is_none());
    let downgrade = write.read().unwrap();
    assert!(!downgrade.is_write());
    downgrade.release().unwrap();
    write.release().unwrap();
    let (a, b) = (rw.read().unwrap(), rw.read().unwrap());
    assert!(
        rw.try_write_for(Duration::from_millis(20))
            .unwrap()
            .is_none()
    );
    assert_eq!(rw.state().unwrap().reads, 2);
    assert!(rw.is_locked().unwrap() && rw.remaining_ttl().unwrap().is_some());
    assert!(matches!(
        rw.write_timeout(Duration::ZERO),
        Err(Error::Timeout { .. })
    ));
    a.release().unwrap();
    b.release().unwrap();
    assert!(rw.run_write(|guard| guard.is_write()).unwrap());
    assert!(!rw.is_locked().unwrap());

    let fair = client.fair_lock("blocking-fair").unwrap().with_fencing();
    let turn = fair.acquire().unwrap();
    assert!(turn.fencing_token().is_some());
    let nested = turn.reenter().unwrap();
    assert!(fair.try_acquire_for(Duration::ZERO).unwrap().is_none());
    nested.release().unwrap();
    turn.release().unwrap();
    assert!(!fair.state().unwrap().is_locked());
    assert_eq!(fair.run(|_| 5).unwrap(), 5);
    assert!(!fair.is_locked().unwrap());

    let semaphore = client.semaphore("blocking-sem").unwrap();
    semaphore.set_permits(2).unwrap();
    let out = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let (semaphore, out, most) = (semaphore.clone(), out.clone(), most.clone());
            std::thread::spawn(move || {
                for _ in 0..5 {
                    let permit = semaphore.acquire(1).unwrap();
                    assert_eq!(permit.permits(), 1);
                    let now = out.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                    out.fetch_sub(1, Ordering::SeqCst);
                    permit.release().unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert!(
        most.load(Ordering::SeqCst) <= 2,
        "more permits out than the size"
    );
    assert_eq!(semaphore.state().unwrap().in_use, 0);
    assert_eq!(semaphore.run(2, |permits| permits.permits()).unwrap(), 2);
    let both = semaphore.acquire(2).unwrap();
    assert!(matches!(
        semaphore.acquire_timeout(1, Duration::ZERO),
        Err(Error::Timeout { .. })
    ));
    assert!(semaphore.drain_permits().unwrap().is_none(), "none free");
    both.release().unwrap();
    let drained = semaphore.drain_permits().unwrap().expect("both free");
    assert_eq!(drained.permits(), 2);
    drained.release().unwrap();

    let latch = client.latch("blocking-latch").unwrap();
    assert!(latch.try_set_count(2).unwrap());
    assert!(!latch.wait_for(Duration::ZERO).unwrap());
    let counters: Vec<_> = (0..2)
        .map(|_| {
            let latch = latch.clone();
            std::thread::spawn(move || latch.count_down().unwrap())
        })
        .collect();
    latch.wait().unwrap();
    for counter in counters {
        counter.join().unwrap();
    }
    assert_eq!(latch.count().unwrap(), 0);
}

/// The blocking multi-lock over members of every kind and of two clients (two runtimes):
/// threads naming them in opposite orders exclude each other and never deadlock; all or
/// none; re-entry, extend, run; a dropped guard gives every member back.
#[test]
fn blocking_multi_lock_over_every_kind_and_two_clients() {
    use redis_locks::blocking::{Member, MultiLock};
    let first = RedisServer::start();
    let second = RedisServer::start();
    let a = LockClient::connect(&first.url()).unwrap();
    let b = LockClient::connect(&second.url()).unwrap();
    let members = |reverse: bool| {
        let mut members = vec![
            Member::from(a.lock("bm-lock").unwrap()),
            Member::Write(b.rw_lock("bm-write").unwrap()),
            Member::Read(a.rw_lock("bm-read").unwrap()),
            Member::from(b.fair_lock("bm-fair").unwrap()),
        ];
        if reverse {
            members.reverse();
        }
        MultiLock::new(members).unwrap()
    };
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let multi = members(t % 2 == 1);
            let (inside, max_inside) = (inside.clone(), max_inside.clone());
            std::thread::spawn(move || {
                for _ in 0..8 {
                    let all = multi.acquire().unwrap();
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    max_inside.fetch_max(now, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(2));
                    inside.fetch_sub(1, Ordering::SeqCst);
                    all.release().unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(
        max_inside.load(Ordering::SeqCst),
        1,
        "two threads were inside"
    );

    let multi = members(false);
    // All or none: another client's fair hold stops it, and nothing is left taken.
    let other = LockClient::connect(&second.url()).unwrap();
    let fair = other.fair_lock("bm-fair").unwrap().acquire().unwrap();
    assert!(multi.try_acquire().unwrap().is_none());
    assert!(matches!(
        multi.acquire_timeout(Duration::from_millis(100)),
        Err(Error::Timeout { .. })
    ));
    a.flush().unwrap();
    assert!(
        !a.lock("bm-lock").unwrap().is_locked().unwrap(),
        "left held"
    );
    fair.release().unwrap();
    let all = multi
        .try_acquire_for(Duration::from_secs(5))
        .unwrap()
        .unwrap();
    assert_eq!(all.names(), ["bm-fair", "bm-lock", "bm-read", "bm-write"]);
    let nested = all.reenter().unwrap();
    nested.release().unwrap();
    all.extend(Duration::from_secs(60)).unwrap();
    assert!(!all.is_lost());
    drop(all);
    a.flush().unwrap();
    b.flush().unwrap();
    assert!(
        !a.lock("bm-lock").unwrap().is_locked().unwrap(),
        "the drop released"
    );
    assert!(
        !b.fair_lock("bm-fair").unwrap().is_locked().unwrap(),
        "the drop released"
    );
    assert_eq!(multi.run(|all| all.names().len()).unwrap(), 4);
}

/// The blocking RedLock over three servers (three clients, three runtimes): held on a
/// majority with one server dead, refused while another holds it, released.
#[test]
fn blocking_redlock_holds_on_a_majority() {
    use redis_locks::blocking::RedLock;
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let clients: Vec<LockClient> = servers
        .iter()
        .map(|server| LockClient::connect(&server.url()).unwrap())
        .collect();
    let others: Vec<LockClient> = servers
        .iter()
        .map(|server| LockClient::connect(&server.url()).unwrap())
        .collect();
    let lock = |clients: &[LockClient]| {
        RedLock::new(clients.iter().map(|c| c.lock("bred").unwrap())).unwrap()
    };
    let mine = lock(&clients);
    let theirs = lock(&others);
    assert_eq!(mine.quorum(), 2);
    let held = mine.acquire().unwrap();
    assert_eq!(held.held_on(), 3);
    assert!(theirs.try_acquire().unwrap().is_none());
    assert!(matches!(
        theirs.acquire_timeout(Duration::from_millis(200)),
        Err(Error::Timeout { .. })
    ));
    let nested = held.reenter().unwrap();
    nested.release().unwrap();
    held.release().unwrap();
    // One server dead: a majority still grants it, once.
    servers[2].kill();
    let held = theirs
        .try_acquire_for(Duration::from_secs(5))
        .unwrap()
        .unwrap();
    assert_eq!(held.held_on(), 2);
    assert!(mine.try_acquire().unwrap().is_none());
    held.release().unwrap();
    let again = mine.with_retry_delay(Duration::from_millis(20)).unwrap();
    again
        .try_acquire()
        .unwrap()
        .expect("free again")
        .release()
        .unwrap();
}

/// The blocking handles' accessors and inspections are the async ones': the client's
/// settings and counts, the lock's keys, options and owner's holds, the guard's re-entry,
/// and the waiters seen from Redis and from the waiting client.
#[test]
fn lock_and_client_accessors_match_the_async_api() {
    let server = RedisServer::start();
    let builder = redis_locks::LockClient::builder(&server.url())
        .prefix("bk")
        .watchdog_timeout(Duration::from_secs(10));
    let client = LockClient::from_builder(builder).unwrap();
    assert_eq!(client.prefix(), "bk");
    assert_eq!(client.watchdog_timeout(), Duration::from_secs(10));

    let lock = client.lock("acc").unwrap();
    assert_eq!(lock.key(), "bk:{acc}");
    assert!(lock.channel().starts_with("bk:{acc}:") && lock.channel().ends_with(":released"));
    assert_eq!(lock.client().id(), client.id());
    assert!(!lock.is_fenced() && lock.with_fencing().is_fenced());
    assert_eq!(lock.owner(), None);
    assert!(matches!(lock.hold_count(), Err(Error::InvalidConfig(_))));
    let fixed = lock.with_lease(Duration::from_secs(5)).unwrap();
    let guard = fixed.acquire().unwrap();
    assert!(!guard.is_watchdog_leased());
    guard.release().unwrap();
    let guard = fixed.with_watchdog().acquire().unwrap();
    assert!(guard.is_watchdog_leased() && !guard.is_reentrant());
    guard.release().unwrap();

    let owned = lock.with_owner("bk-owner").unwrap();
    assert_eq!(owned.owner(), Some("bk-owner"));
    assert!(!owned.is_held_by_owner().unwrap());
    let outer = owned.acquire().unwrap();
    let inner = outer.reenter().unwrap();
    assert!(!outer.is_reentrant() && inner.is_reentrant());
    assert_eq!(owned.hold_count().unwrap(), 2);
    assert!(owned.is_held_by_owner().unwrap());
    assert_eq!(client.held_count(), 1);
    assert_eq!(client.waiting_channels(), 0);
    assert_eq!(lock.waiting_clients().unwrap(), 0);

    // Another client waits: one waiting client in Redis, one waiting channel in it.
    let builder = redis_locks::LockClient::builder(&server.url()).prefix("bk");
    let other = LockClient::from_builder(builder).unwrap();
    let waiter = {
        let other = other.clone();
        std::thread::spawn(move || other.lock("acc").unwrap().acquire().unwrap().release())
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while lock.waiting_clients().unwrap() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the waiter never subscribed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(lock.waiting_clients().unwrap(), 1);
    assert_eq!(other.waiting_channels(), 1);
    inner.release().unwrap();
    outer.release().unwrap();
    waiter.join().unwrap().unwrap();
    assert_eq!(owned.hold_count().unwrap(), 0);
    assert_eq!(client.held_count(), 0);
}

/// The other kinds' keys, owners and clients, the read-write guard's kind, and the
/// latch's key and re-check interval.
#[test]
fn other_kinds_expose_keys_owners_and_clients() {
    use redis_locks::RwKind;
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).unwrap();

    let rw = client.rw_lock("bk-rw").unwrap();
    assert_eq!(rw.write_key(), "redis-locks:{bk-rw}:rw:write");
    assert_eq!(rw.read_key(), "redis-locks:{bk-rw}:rw:read");
    assert_eq!(rw.owner(), None);
    assert_eq!(rw.with_owner("bk-o").unwrap().owner(), Some("bk-o"));
    assert_eq!(rw.client().id(), client.id());
    let read = rw.read().unwrap();
    assert_eq!(read.kind(), RwKind::Read);
    read.release().unwrap();
    let write = rw.write().unwrap();
    assert_eq!(write.kind(), RwKind::Write);
    write.release().unwrap();

    let fair = client.fair_lock("bk-fair").unwrap();
    assert!(fair.key().starts_with("redis-locks:{bk-fair}:"));
    assert!(fair.queue_key().starts_with("redis-locks:{bk-fair}:"));
    assert_ne!(fair.key(), fair.queue_key());
    assert_eq!(fair.with_owner("bk-o").unwrap().owner(), Some("bk-o"));
    assert_eq!(fair.client().id(), client.id());
    // The returned client is a working handle of the same client.
    let turn = fair
        .client()
        .fair_lock("bk-fair")
        .unwrap()
        .acquire()
        .unwrap();
    assert!(fair.is_locked().unwrap());
    turn.release().unwrap();

    let semaphore = client.semaphore("bk-sem").unwrap();
    assert!(semaphore.key().starts_with("redis-locks:{bk-sem}"));
    assert_eq!(semaphore.permits_key(), "redis-locks:{bk-sem}:permits");

    let latch = client.latch("bk-latch").unwrap();
    assert_eq!(latch.key(), "redis-locks:{bk-latch}:latch");
    assert!(matches!(
        latch.with_recheck(Duration::from_millis(1)),
        Err(Error::InvalidDuration { .. })
    ));
    let latch = latch.with_recheck(Duration::from_millis(50)).unwrap();
    assert!(latch.try_set_count(1).unwrap());
    let counter = {
        let latch = latch.clone();
        std::thread::spawn(move || latch.count_down().unwrap())
    };
    assert!(latch.wait_for(Duration::from_secs(5)).unwrap());
    assert_eq!(counter.join().unwrap(), 0);
}

/// A multi-lock's members and a RedLock's locks come back as blocking handles of their
/// own clients (so of their own runtimes), in the async ones' order, and work.
#[test]
fn multi_members_and_redlock_locks_are_blocking_handles() {
    use redis_locks::blocking::{Member, MultiLock, RedLock};
    let first = RedisServer::start();
    let second = RedisServer::start();
    let a = LockClient::connect(&first.url()).unwrap();
    let b = LockClient::connect(&first.url()).unwrap();
    let multi = MultiLock::new([
        Member::from(a.fair_lock("bk-m3").unwrap()),
        Member::from(b.lock("bk-m2").unwrap()),
        Member::Read(a.rw_lock("bk-m1").unwrap()),
    ])
    .unwrap();
    let members = multi.members();
    let names: Vec<&str> = members.iter().map(Member::name).collect();
    assert_eq!(names, ["bk-m1", "bk-m2", "bk-m3"], "the global order");
    let ids: Vec<String> = members.iter().map(|m| m.client().id().to_owned()).collect();
    assert_eq!(ids, [a.id(), b.id(), a.id()]);
    assert!(matches!(&members[0], Member::Read(_)));
    assert_eq!(members[1].key(), b.lock("bk-m2").unwrap().key());
    let again = MultiLock::new(members).unwrap().acquire().unwrap();
    assert_eq!(again.names(), ["bk-m1", "bk-m2", "bk-m3"]);
    assert!(multi.try_acquire().unwrap().is_none());
    again.release().unwrap();

    let c = LockClient::connect(&second.url()).unwrap();
    let red = RedLock::new([a.lock("bk-red").unwrap(), c.lock("bk-red").unwrap()]).unwrap();
    let locks = red.locks();
    assert_eq!(locks.len(), 2);
    assert_eq!(locks[0].client().id(), a.id());
    assert_eq!(locks[1].client().id(), c.id());
    let held = red.acquire().unwrap();
    assert!(locks.iter().all(|lock| lock.is_locked().unwrap()));
    held.release().unwrap();
    let single = locks[1].acquire().unwrap();
    assert!(!locks[0].is_locked().unwrap());
    single.release().unwrap();
}

/// A lock in Redisson's layout, blocking: Redisson's hash and field counts, re-entry
/// through the guard, exclusion between two owners, and nothing held once released but
/// this library's request records.
#[test]
fn a_redisson_layout_lock_blocks_like_the_others() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).unwrap();
    let mut conn = redis::Client::open(server.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let lock = client.redisson_lock("invoice:42").unwrap();
    assert_eq!(lock.key(), "invoice:42");
    assert_eq!(lock.channel(), "redisson_lock__channel:{invoice:42}");
    let guard = lock.acquire().unwrap();
    let nested = guard.reenter().unwrap();
    let count: i64 = redis::cmd("HGET")
        .arg("invoice:42")
        .arg(guard.owner())
        .query(&mut conn)
        .unwrap();
    assert_eq!(count, 2);
    assert!(lock.try_acquire().unwrap().is_none(), "another owner waits");
    nested.release().unwrap();
    guard.release().unwrap();
    let exists: i64 = redis::cmd("EXISTS")
        .arg("invoice:42")
        .query(&mut conn)
        .unwrap();
    assert_eq!(exists, 0);
    let total = lock.run(|_| 7).unwrap();
    assert_eq!(total, 7);
}

/// A read-write lock in Redisson's layout, blocking: readers share, a writer waits, a
/// downgrade leaves it in read mode, and no upgrade.
#[test]
fn a_redisson_layout_rw_lock_blocks_like_the_others() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).unwrap();
    let lock = client.redisson_rw_lock("catalog").unwrap();
    let read = lock.read().unwrap();
    let other = lock.try_read().unwrap().expect("readers share");
    assert!(lock.try_write().unwrap().is_none(), "readers hold");
    assert!(matches!(read.write(), Err(Error::WouldDeadlock { .. })));
    other.release().unwrap();
    read.release().unwrap();
    let write = lock.write().unwrap();
    let downgraded = write.read().unwrap();
    write.release().unwrap();
    assert_eq!(lock.state().unwrap().mode, Some(redis_locks::RwKind::Read));
    downgraded.release().unwrap();
    assert!(!lock.is_locked().unwrap());
}

/// A count-down latch in Redisson's layout, blocking: the bare name holds the count, a
/// waiting thread wakes on the last count-down.
#[test]
fn a_redisson_layout_latch_blocks_like_the_others() {
    let server = RedisServer::start();
    let client = LockClient::connect(&server.url()).unwrap();
    let latch = client.redisson_latch("import").unwrap();
    assert!(latch.is_redisson());
    assert_eq!(latch.key(), "import");
    assert!(latch.try_set_count(2).unwrap());
    let waiter = {
        let latch = latch.clone();
        std::thread::spawn(move || latch.wait_for(Duration::from_secs(30)))
    };
    assert_eq!(latch.count_down().unwrap(), 1);
    assert_eq!(latch.count_down().unwrap(), 0);
    assert!(waiter.join().unwrap().unwrap());
    assert_eq!(latch.count().unwrap(), 0);
}
