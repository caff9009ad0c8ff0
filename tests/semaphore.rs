//! The semaphore with expiring permits against a real redis-server: never more permits
//! out than its size (across processes), multi-permit waiters not starved, a killed
//! holder's permits back within its lease, lost signals, exactly once under a lost reply,
//! and bad input.

mod common;
#[path = "faults/proxy.rs"]
#[allow(dead_code)]
mod proxy;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{RedisServer, eventually};
use redis_locks::{Error, LockClient, LostReason};

const SEC: Duration = Duration::from_secs(1);
const CHILD_ENV: &str = "REDIS_LOCKS_SEMAPHORE_CHILD";

/// The body of a child process (this test binary re-executed): `contend` takes one permit
/// at a time `rounds` times, counting holders in Redis (`INCR`) and recording any moment
/// with more than the size; `hold` takes permits and sleeps until killed.
#[tokio::test]
async fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let (url, role, name) = (parts[0], parts[1], parts[2]);
    let client = LockClient::builder(url)
        .watchdog_timeout(SEC)
        .connect()
        .await
        .unwrap();
    let semaphore = client.semaphore(name).unwrap();
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    match role {
        "contend" => {
            let size: i64 = parts[3].parse().unwrap();
            for _ in 0..parts[4].parse::<u32>().unwrap() {
                let permit = semaphore.acquire(1).await.unwrap();
                let inside: i64 = redis::cmd("INCR")
                    .arg("inside")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                if inside > size {
                    let _: () = redis::cmd("INCR")
                        .arg("violations")
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
                let _: i64 = redis::cmd("DECR")
                    .arg("inside")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                permit.release().await.unwrap();
            }
        }
        "hold" => {
            let permit = semaphore.acquire(parts[3].parse().unwrap()).await.unwrap();
            let _: () = redis::cmd("SET")
                .arg("holding")
                .arg(1)
                .query_async(&mut conn)
                .await
                .unwrap();
            tokio::time::sleep(Duration::from_secs(600)).await;
            drop(permit);
        }
        other => panic!("unknown role {other}"),
    }
}

fn spawn_child(spec: String) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Five processes, each taking one of 3 permits 20 times: never more than 3 holders at
/// once (counted in Redis inside each section), everyone gets through, and nothing is
/// left in the permits set afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_never_hold_more_permits_than_the_size() {
    let server = RedisServer::start();
    let url = server.url();
    let client = server.client(30 * SEC).await;
    let semaphore = client.semaphore("pool").unwrap();
    assert!(semaphore.try_set_permits(3).await.unwrap());
    assert!(!semaphore.try_set_permits(9).await.unwrap(), "set twice");
    let mut children = Vec::new();
    for _ in 0..5 {
        children.push(spawn_child(format!("{url} contend pool 3 20")));
    }
    for mut child in children {
        let status = tokio::time::timeout(120 * SEC, child.wait())
            .await
            .expect("a child finished")
            .unwrap();
        assert!(status.success(), "a contending process failed: {status}");
    }
    let mut conn = server.conn().await;
    let violations: Option<i64> = redis::cmd("GET")
        .arg("violations")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(violations, None, "more holders than permits");
    let state = semaphore.state().await.unwrap();
    assert_eq!((state.size, state.in_use), (Some(3), 0), "{state:?}");
    let exists: i64 = redis::cmd("EXISTS")
        .arg(semaphore.permits_key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "the permits set outlived its permits");
}

/// Twelve tasks keep taking single permits of 4 (each held 20 ms, taken again at once),
/// so the permits are almost never all free at once; a waiter for all 4 still gets them
/// within seconds, because its reservation keeps freed permits for it. (Without the
/// reservation it was still starved after 20 s in a trial run; with it, 47 ms.) Measured:
/// how long it waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_permit_waiter_is_not_starved_by_single_permits() {
    let server = RedisServer::start();
    let setup = server.client(30 * SEC).await;
    setup
        .semaphore("mixed")
        .unwrap()
        .set_permits(4)
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let singles = Arc::new(AtomicU64::new(0));
    let mut churn = Vec::new();
    for _ in 0..12 {
        let client = server.client(30 * SEC).await;
        let (stop, singles) = (stop.clone(), singles.clone());
        churn.push(tokio::spawn(async move {
            let semaphore = client.semaphore("mixed").unwrap();
            while !stop.load(Ordering::SeqCst) {
                let permit = semaphore.acquire(1).await.unwrap();
                tokio::time::sleep(Duration::from_millis(20)).await;
                permit.release().await.unwrap();
                singles.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let big = server.client(30 * SEC).await;
    let started = Instant::now();
    let all = tokio::time::timeout(20 * SEC, big.semaphore("mixed").unwrap().acquire(4))
        .await
        .expect("the 4-permit waiter was starved for 20 s")
        .unwrap();
    let waited = started.elapsed();
    let during = singles.load(Ordering::SeqCst);
    all.release().await.unwrap();
    stop.store(true, Ordering::SeqCst);
    for task in churn {
        task.await.unwrap();
    }
    println!(
        "4-permit waiter got them after {waited:?}; {during} single-permit cycles ran meanwhile"
    );
    assert!(waited < 5 * SEC, "{waited:?}");
}

/// A SIGKILLed holder's permits come back within its lease (1 s watchdog), and the
/// waiter gets them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holders_permits_return_within_its_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let client = server.client(30 * SEC).await;
    let semaphore = client.semaphore("crash").unwrap();
    semaphore.set_permits(2).await.unwrap();
    let mut holder = spawn_child(format!("{url} hold crash 2"));
    let mut conn = server.conn().await;
    assert!(
        common::eventually(20 * SEC, || {
            let mut conn = conn.clone();
            async move {
                redis::cmd("EXISTS")
                    .arg("holding")
                    .query_async::<i64>(&mut conn)
                    .await
                    .unwrap()
                    == 1
            }
        })
        .await,
        "the holder never held"
    );
    assert_eq!(semaphore.state().await.unwrap().in_use, 2);
    assert!(semaphore.try_acquire(1).await.unwrap().is_none());
    holder.kill().await.unwrap();
    let killed = Instant::now();
    let permit = tokio::time::timeout(10 * SEC, semaphore.acquire(2))
        .await
        .expect("the killed holder's permits never came back")
        .unwrap();
    let back = killed.elapsed();
    println!("killed holder's permits back after {back:?} (lease 1 s)");
    assert!(back < 3 * SEC, "{back:?}");
    permit.release().await.unwrap();
    let _: () = redis::cmd("DEL")
        .arg("holding")
        .query_async(&mut conn)
        .await
        .unwrap();
}

/// The watchdog keeps permits past several leases; deleting the permits behind the holder
/// fires its lost signal within a tick; a fixed lease is lost when it elapses and its
/// permits are free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_and_lost_signals() {
    let server = RedisServer::start();
    let client = server.client(SEC).await;
    let semaphore = client.semaphore("leases").unwrap();
    semaphore.set_permits(3).await.unwrap();
    let kept = semaphore.acquire(2).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert!(
        !kept.is_lost(),
        "lost under the watchdog: {:?}",
        kept.lost_reason()
    );
    assert_eq!(semaphore.state().await.unwrap().in_use, 2);
    assert!(client.watchdog_stats().renewed >= 3);

    let mut conn = server.conn().await;
    let _: () = redis::cmd("DEL")
        .arg(semaphore.permits_key())
        .query_async(&mut conn)
        .await
        .unwrap();
    tokio::time::timeout(3 * SEC, kept.lost())
        .await
        .expect("the lost signal never fired");
    assert_eq!(kept.lost_reason(), Some(LostReason::OwnerFieldGone));
    assert!(matches!(kept.release().await, Err(Error::LockLost { .. })));

    let fixed = semaphore
        .clone()
        .with_lease(Duration::from_millis(400))
        .unwrap()
        .acquire(3)
        .await
        .unwrap();
    tokio::time::timeout(3 * SEC, fixed.lost())
        .await
        .expect("a fixed lease was never told");
    assert_eq!(fixed.lost_reason(), Some(LostReason::LeaseElapsed));
    // The signal fires a drift margin before Redis's deadline; then they are free.
    assert!(
        common::eventually(SEC, || {
            let semaphore = semaphore.clone();
            async move { semaphore.state().await.unwrap().in_use == 0 }
        })
        .await,
        "the expired permits still count"
    );
    let again = semaphore.try_acquire(3).await.unwrap().expect("free again");
    again.release().await.unwrap();
    assert!(matches!(fixed.release().await, Err(Error::LockLost { .. })));
}

/// An acquire whose reply is lost is retried with the same permit id: the permits are
/// taken once, not twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_reply_is_lost_takes_its_permits_once() {
    let server = RedisServer::start();
    let proxy = proxy::FaultProxy::start(server.port).await;
    let through = proxy::proxied_client(&proxy, 30 * SEC, SEC).await;
    let direct = server.client(30 * SEC).await;
    direct
        .semaphore("once")
        .unwrap()
        .set_permits(4)
        .await
        .unwrap();
    let semaphore = through.semaphore("once").unwrap();
    // Cache the script first: a cut on the NOSCRIPT round would test script loading.
    semaphore.acquire(1).await.unwrap().release().await.unwrap();
    let sha = proxy::script_sha(redis_locks_protocol::ScriptId::SemAcquire.source());
    proxy.cut_after_request_containing(&sha);
    let permit = tokio::time::timeout(20 * SEC, semaphore.acquire(2))
        .await
        .expect("acquire returned")
        .expect("acquire through a lost reply");
    assert_eq!(proxy.cuts(), 1, "the reply was not cut");
    assert_eq!(
        direct
            .semaphore("once")
            .unwrap()
            .state()
            .await
            .unwrap()
            .in_use,
        2
    );
    permit.release().await.unwrap();
    assert_eq!(
        direct
            .semaphore("once")
            .unwrap()
            .state()
            .await
            .unwrap()
            .in_use,
        0
    );
}

/// Resizing, the state, and every bad input: typed errors, nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_states_and_bad_input() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    assert!(matches!(
        client.semaphore(""),
        Err(Error::InvalidName { .. })
    ));
    let semaphore = client.semaphore("sized").unwrap();
    assert!(matches!(
        semaphore.acquire(1).await,
        Err(Error::InvalidConfig(message)) if message.contains("no size")
    ));
    assert!(matches!(
        semaphore.set_permits(0).await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        semaphore.set_permits(redis_locks::MAX_COUNT + 1).await,
        Err(Error::InvalidConfig(_))
    ));
    assert_eq!(semaphore.set_permits(2).await.unwrap(), None);
    assert!(matches!(
        semaphore.acquire(0).await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        semaphore.acquire(3).await,
        Err(Error::InvalidConfig(message)) if message.contains("never")
    ));
    let one = semaphore.acquire(1).await.unwrap();
    let state = semaphore.state().await.unwrap();
    assert_eq!(
        (state.size, state.in_use, state.available()),
        (Some(2), 1, 1)
    );
    assert_eq!(semaphore.set_permits(1).await.unwrap(), Some(2));
    assert!(
        semaphore.try_acquire(1).await.unwrap().is_none(),
        "shrunk to 1, 1 in use"
    );
    // More than the size is an error at once, not a wait.
    assert!(matches!(
        semaphore.acquire(2).await,
        Err(Error::InvalidConfig(_))
    ));
    let waiter = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire(1).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "granted beyond the size");
    assert_eq!(semaphore.set_permits(3).await.unwrap(), Some(1));
    let woken = Instant::now();
    let two = tokio::time::timeout(5 * SEC, waiter)
        .await
        .expect("grown")
        .unwrap()
        .unwrap();
    assert!(woken.elapsed() < 2 * SEC, "{:?}", woken.elapsed());
    assert_eq!(two.permits(), 1);
    two.release().await.unwrap();
    one.release().await.unwrap();
    // A zero wait tries once (the deadline pattern `deadline - now` may reach zero).
    let once = semaphore.try_acquire_for(1, Duration::ZERO).await.unwrap();
    once.expect("free permits").release().await.unwrap();
    assert!(matches!(
        semaphore.try_acquire_for(1, Duration::MAX).await,
        Err(Error::InvalidDuration { .. })
    ));

    let foreign = client.semaphore("foreign").unwrap();
    let mut conn = server.conn().await;
    let _: () = redis::cmd("SET")
        .arg(foreign.key())
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(
        foreign.set_permits(2).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        foreign.acquire(1).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        foreign.state().await,
        Err(Error::WrongType { .. })
    ));
    let value: String = redis::cmd("GET")
        .arg(foreign.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "x");
}

/// `with_lease` and `with_watchdog` take `&self`, as on every other kind: each returns a
/// new handle and leaves the one it was called on as it was.
#[tokio::test]
async fn lease_options_return_new_handles() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let semaphore = client.semaphore("sem-options").unwrap();
    semaphore.set_permits(3).await.unwrap();
    let leased = semaphore.with_lease(5 * SEC).unwrap();
    let renewed = leased.with_watchdog();
    let by_default = semaphore.acquire(1).await.unwrap();
    let fixed = leased.acquire(1).await.unwrap();
    let watched = renewed.acquire(1).await.unwrap();
    assert!(by_default.is_watchdog_leased());
    assert!(!fixed.is_watchdog_leased());
    assert!(fixed.remaining_lease() <= 5 * SEC);
    assert!(watched.is_watchdog_leased());
    assert!(matches!(
        semaphore.with_lease(Duration::ZERO),
        Err(Error::InvalidDuration { .. })
    ));
    for permit in [by_default, fixed, watched] {
        permit.release().await.unwrap();
    }
}

/// A hand-over between processes: the holder detaches its guard and passes the permits'
/// id on; another client gives them back by id, exactly once.
#[tokio::test]
async fn permits_are_given_back_by_id_without_their_guard() {
    let server = RedisServer::start();
    let holder = server.client(30 * SEC).await;
    let receiver = server.client(30 * SEC).await;
    let semaphore = holder.semaphore("sem-handover").unwrap();
    semaphore.set_permits(3).await.unwrap();
    let permits = semaphore.acquire(2).await.unwrap();
    let id = permits.id().to_owned();
    permits.detach();
    let theirs = receiver.semaphore("sem-handover").unwrap();
    assert_eq!(theirs.state().await.unwrap().in_use, 2);
    assert!(theirs.release_permits(&id, 2).await.unwrap());
    assert_eq!(theirs.state().await.unwrap().in_use, 0);
    assert!(
        !theirs.release_permits(&id, 2).await.unwrap(),
        "given back twice"
    );
    for (bad, n) in [("", 1), ("id\nwith a newline", 1), (id.as_str(), 0)] {
        assert!(
            matches!(
                theirs.release_permits(bad, n).await,
                Err(Error::InvalidConfig(_))
            ),
            "{bad:?} {n}"
        );
    }
}

/// `add_permits` changes the size atomically, up or down, never below 1, and a waiter
/// gets a permit that is added.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_are_added_and_taken_away() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let semaphore = client.semaphore("sem-add").unwrap();
    assert_eq!(
        semaphore.add_permits(1).await.unwrap(),
        1,
        "no size: it becomes 1"
    );
    let held = semaphore.acquire(1).await.unwrap();
    let waiter = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire(1).await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished());
    assert_eq!(semaphore.add_permits(2).await.unwrap(), 3);
    let second = tokio::time::timeout(10 * SEC, waiter)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(semaphore.add_permits(-2).await.unwrap(), 1);
    assert_eq!(semaphore.state().await.unwrap().size, Some(1));
    for delta in [-1, -5, i64::MAX] {
        assert!(
            matches!(
                semaphore.add_permits(delta).await,
                Err(Error::InvalidConfig(_))
            ),
            "{delta}"
        );
    }
    assert_eq!(
        semaphore.state().await.unwrap().size,
        Some(1),
        "changed by a refusal"
    );
    held.release().await.unwrap();
    second.release().await.unwrap();
}

/// `drain_permits` (Redisson's `drainPermits`): takes every free permit at once as one
/// acquisition, leaves a waiter's reservation alone, `None` when none is free; its
/// permits are renewed together, handed over by id and given back together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_takes_every_free_permit_at_once() {
    let server = RedisServer::start();
    // Renewed every 200 ms as with a 600 ms watchdog, on a 6 s lease that a stalled
    // machine does not run out.
    let client = server
        .client_renewing(6 * SEC, Duration::from_millis(200))
        .await;
    let other = server.client(30 * SEC).await;
    let semaphore = client.semaphore("sem-drain").unwrap();
    assert!(matches!(
        semaphore.drain_permits().await,
        Err(Error::InvalidConfig(_))
    ));
    semaphore.set_permits(5).await.unwrap();
    let two = other
        .semaphore("sem-drain")
        .unwrap()
        .acquire(2)
        .await
        .unwrap();
    let drained = semaphore
        .drain_permits()
        .await
        .unwrap()
        .expect("3 were free");
    assert_eq!(drained.permits(), 3);
    let state = semaphore.state().await.unwrap();
    assert_eq!((state.in_use, state.available()), (5, 0));
    assert!(
        semaphore.drain_permits().await.unwrap().is_none(),
        "none free"
    );
    assert!(semaphore.try_acquire(1).await.unwrap().is_none());
    // Renewed together by the watchdog (every 200 ms, five of them).
    let renewed = client.watchdog_stats().renewed;
    assert!(
        eventually(10 * SEC, || async {
            client.watchdog_stats().renewed >= renewed + 5
        })
        .await
    );
    assert!(!drained.is_lost());
    assert_eq!(semaphore.state().await.unwrap().in_use, 5);
    drained.release().await.unwrap();
    assert_eq!(semaphore.state().await.unwrap().in_use, 2);

    // A waiter for 3 reserves the next free permits: a drain leaves them to it.
    let waiting = {
        let semaphore = other.semaphore("sem-drain").unwrap();
        tokio::spawn(async move { semaphore.acquire(4).await })
    };
    assert!(
        eventually(10 * SEC, || async {
            semaphore.state().await.unwrap().reserved == 4
        })
        .await,
        "the waiter never reserved"
    );
    assert!(
        semaphore.drain_permits().await.unwrap().is_none(),
        "the drain took permits kept for the waiter"
    );
    two.release().await.unwrap();
    let four = tokio::time::timeout(10 * SEC, waiting)
        .await
        .expect("the waiter was served")
        .unwrap()
        .unwrap();
    let one = semaphore.drain_permits().await.unwrap().expect("1 left");
    assert_eq!(one.permits(), 1);
    four.release().await.unwrap();

    // Handed over by id: the receiver gives back what the drain took.
    let id = one.id().to_owned();
    one.detach();
    assert!(
        other
            .semaphore("sem-drain")
            .unwrap()
            .release_permits(&id, 1)
            .await
            .unwrap()
    );
    assert_eq!(semaphore.state().await.unwrap().in_use, 0);

    // Wrong type.
    let mut conn = server.conn().await;
    let _: () = redis::AsyncCommands::set(&mut conn, semaphore.key(), "x")
        .await
        .unwrap();
    assert!(matches!(
        semaphore.drain_permits().await,
        Err(Error::WrongType { .. })
    ));
}

/// A drain whose reply is lost: the retry finds the permits its first copy took and
/// says how many, so the guard gives back exactly those, once.
#[tokio::test]
async fn a_drain_whose_reply_is_lost_takes_its_permits_once() {
    let server = RedisServer::start();
    let proxy = proxy::FaultProxy::start(server.port).await;
    let through = proxy::proxied_client(&proxy, 30 * SEC, SEC).await;
    let direct = server.client(30 * SEC).await;
    let theirs = direct.semaphore("drain-once").unwrap();
    theirs.set_permits(4).await.unwrap();
    let held = theirs.acquire(1).await.unwrap();
    let semaphore = through.semaphore("drain-once").unwrap();
    semaphore.acquire(1).await.unwrap().release().await.unwrap();
    let sha = proxy::script_sha(redis_locks_protocol::ScriptId::SemAcquire.source());
    proxy.cut_after_request_containing(&sha);
    let drained = tokio::time::timeout(20 * SEC, semaphore.drain_permits())
        .await
        .expect("the drain returned")
        .expect("a drain through a lost reply")
        .expect("3 were free");
    assert_eq!(proxy.cuts(), 1, "the reply was not cut");
    assert_eq!(drained.permits(), 3);
    assert_eq!(theirs.state().await.unwrap().in_use, 4);
    drained.release().await.unwrap();
    assert_eq!(theirs.state().await.unwrap().in_use, 1);
    held.release().await.unwrap();
}
