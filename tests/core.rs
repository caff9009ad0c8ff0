//! Core lock behaviour against real redis-server processes.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{RedisServer, eventually, numsub};
use redis::AsyncCommands;
use redis_locks::{Error, LockClient, LostReason};

const SEC: Duration = Duration::from_secs(1);

/// 1. Mutual exclusion: 3 clients x 8 tasks on one name, a read-modify-write counter in
/// Redis and an "inside" flag; no overlap and no lost update.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_exclusion_across_clients_and_tasks() {
    let server = RedisServer::start();
    let inside = Arc::new(AtomicBool::new(false));
    let overlaps = Arc::new(AtomicUsize::new(0));
    const ROUNDS: usize = 8;
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let client = server.client(30 * SEC).await;
        for _ in 0..8 {
            let client = client.clone();
            let inside = inside.clone();
            let overlaps = overlaps.clone();
            let mut conn = server.conn().await;
            tasks.push(tokio::spawn(async move {
                let lock = client.lock("counter").unwrap();
                for _ in 0..ROUNDS {
                    let guard = lock.acquire().await.unwrap();
                    if inside.swap(true, Ordering::SeqCst) {
                        overlaps.fetch_add(1, Ordering::SeqCst);
                    }
                    let value: Option<u64> = conn.get("counter:value").await.unwrap();
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let _: () = conn
                        .set("counter:value", value.unwrap_or(0) + 1)
                        .await
                        .unwrap();
                    inside.store(false, Ordering::SeqCst);
                    guard.release().await.unwrap();
                }
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut conn = server.conn().await;
    let total: u64 = conn.get("counter:value").await.unwrap();
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "critical sections overlapped"
    );
    assert_eq!(total, (3 * 8 * ROUNDS) as u64, "an update was lost");
    let exists: bool = conn.exists("redis-locks:{counter}").await.unwrap();
    assert!(!exists, "lock key left behind");
}

/// 2. Reentrancy at depth 3 (through the guards): one field whose count goes 3, 2, 1,
/// gone; another owner (another acquire, even in this task) is kept out meanwhile.
#[tokio::test]
async fn reentrancy_counts_in_one_field() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let lock = client.lock("nested").unwrap();
    let g1 = lock.acquire().await.unwrap();
    let owner = g1.owner().to_owned();
    let g2 = g1.reenter().await.unwrap();
    let g3 = g2.reenter().await.unwrap();
    assert_eq!((g2.owner(), g3.owner()), (g1.owner(), g1.owner()));
    assert_eq!((g2.hold_id(), g3.hold_id()), (g1.hold_id(), g1.hold_id()));
    assert_eq!(
        (g1.hold_count(), g2.hold_count(), g3.hold_count()),
        (1, 2, 3)
    );
    assert!(g3.is_reentrant() && !g1.is_reentrant());

    let fields = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let all: Vec<(String, String)> = conn.hgetall("redis-locks:{nested}").await.unwrap();
            // The hold id and the per-client request records are reserved fields.
            all.into_iter()
                .filter(|(field, _)| !field.starts_with('\u{1}'))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        fields(&mut conn).await,
        vec![(owner.clone(), "3".to_string())]
    );

    // Another acquire is another owner, in this task as in any other.
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "a second acquire in the holder's task entered the held lock"
    );
    let other = lock.clone();
    let stolen = tokio::spawn(async move { other.try_acquire().await.unwrap().is_some() })
        .await
        .unwrap();
    assert!(!stolen, "another owner entered a held lock");

    g3.release().await.unwrap();
    assert_eq!(
        fields(&mut conn).await,
        vec![(owner.clone(), "2".to_string())]
    );
    let ttl: i64 = conn.pttl("redis-locks:{nested}").await.unwrap();
    assert!(ttl > 25_000, "the watchdog lease stays, pttl {ttl}");
    g2.release().await.unwrap();
    assert_eq!(
        fields(&mut conn).await,
        vec![(owner.clone(), "1".to_string())]
    );
    assert_eq!(
        lock.with_owner(&owner).unwrap().hold_count().await.unwrap(),
        1
    );
    g1.release().await.unwrap();
    assert!(fields(&mut conn).await.is_empty());
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(client.held_count(), 0);
}

/// 3. An explicit lease expires and is never renewed; the guard learns it was lost.
#[tokio::test]
async fn explicit_lease_expires_without_renewal() {
    let server = RedisServer::start();
    let client = server.client(SEC).await;
    let mut conn = server.conn().await;
    let lock = client
        .lock("leased")
        .unwrap()
        .with_lease(Duration::from_millis(600))
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    assert!(!guard.is_watchdog_leased());
    tokio::time::sleep(Duration::from_millis(400)).await;
    let ttl: i64 = conn.pttl("redis-locks:{leased}").await.unwrap();
    assert!(
        (0..=250).contains(&ttl),
        "lease must count down, not be renewed (pttl {ttl})"
    );
    tokio::time::timeout(SEC, guard.lost())
        .await
        .expect("lost signal for an elapsed lease");
    assert_eq!(guard.lost_reason(), Some(LostReason::LeaseElapsed));
    assert!(
        eventually(SEC, || {
            let mut conn = conn.clone();
            async move {
                !conn
                    .exists::<_, bool>("redis-locks:{leased}")
                    .await
                    .unwrap()
            }
        })
        .await
    );
    assert_eq!(
        client.watchdog_stats().renewed,
        0,
        "a fixed lease was renewed"
    );
    match guard.release().await {
        Err(Error::LockLost { reason, .. }) => assert_eq!(reason, LostReason::LeaseElapsed),
        other => panic!("expected LockLost, got {other:?}"),
    }
}

/// 4. The watchdog keeps a 1 s lease alive for 5 s; after release nothing is renewed and
/// the key is gone.
#[tokio::test]
async fn watchdog_keeps_lock_alive_then_stops() {
    let server = RedisServer::start();
    let client = server.client(SEC).await;
    let mut conn = server.conn().await;
    let guard = client.lock("long-job").unwrap().acquire().await.unwrap();
    let start = Instant::now();
    while start.elapsed() < 5 * SEC {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let ttl: i64 = conn.pttl("redis-locks:{long-job}").await.unwrap();
        assert!(ttl > 0, "lock expired while the guard lived (pttl {ttl})");
        assert!(!guard.is_lost());
    }
    assert!(guard.remaining_lease() > Duration::from_millis(300));
    let renewed = client.watchdog_stats().renewed;
    assert!(renewed >= 10, "expected ~15 renewals in 5 s, saw {renewed}");
    guard.release().await.unwrap();
    let exists: bool = conn.exists("redis-locks:{long-job}").await.unwrap();
    assert!(!exists);
    tokio::time::sleep(SEC).await;
    assert_eq!(
        client.watchdog_stats().renewed,
        renewed,
        "renewal continued after release"
    );
    assert_eq!(client.held_count(), 0);
}

/// 5a. A holder whose runtime (and so its watchdog) dies without releasing frees the
/// lock within the watchdog timeout.
#[tokio::test]
async fn dead_runtime_frees_lock_within_watchdog_timeout() {
    let server = RedisServer::start();
    let url = server.url();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let client = LockClient::builder(&url)
                .watchdog_timeout(SEC)
                .connect()
                .await
                .unwrap();
            let guard = client.lock("crash").unwrap().acquire().await.unwrap();
            // Simulate a crash: neither release nor drop runs.
            std::mem::forget(guard);
            std::mem::forget(client);
        });
        drop(runtime);
    })
    .join()
    .unwrap();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("crash").unwrap();
    assert!(
        lock.is_locked().await.unwrap(),
        "the dead holder's lock must still exist"
    );
    let start = Instant::now();
    let guard = lock.acquire_timeout(5 * SEC).await.unwrap();
    let waited = start.elapsed();
    println!("dead runtime: lock free after {waited:?} (watchdog 1 s)");
    assert!(
        waited <= SEC + Duration::from_millis(500),
        "took {waited:?}"
    );
    guard.release().await.unwrap();
}

/// Helper process for 5b: holds a lock until killed. Runs only when spawned by the test.
#[tokio::test]
#[ignore = "helper process for killed_holder_process_frees_lock"]
async fn helper_hold_lock_until_killed() {
    let url = std::env::var("REDIS_LOCKS_HELPER_URL").expect("spawned by a test");
    let client = LockClient::builder(&url)
        .watchdog_timeout(SEC)
        .connect()
        .await
        .unwrap();
    let _guard = client.lock("killed").unwrap().acquire().await.unwrap();
    println!("HELPER-ACQUIRED");
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// 5b. SIGKILL of a holding process frees the lock within the watchdog timeout.
#[tokio::test]
async fn killed_holder_process_frees_lock() {
    use std::io::{BufRead, BufReader};
    let server = RedisServer::start();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "helper_hold_lock_until_killed",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("REDIS_LOCKS_HELPER_URL", server.url())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let acquired = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains("HELPER-ACQUIRED"))
    });
    assert!(acquired.join().unwrap() || child.try_wait().unwrap().is_none());
    let client = server.client(30 * SEC).await;
    let lock = client.lock("killed").unwrap();
    assert!(lock.is_locked().await.unwrap());
    // Let it renew a few times, proving the lock outlives its 1 s lease while alive.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        lock.is_locked().await.unwrap(),
        "holder's watchdog did not renew"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let start = Instant::now();
    let guard = lock.acquire_timeout(5 * SEC).await.unwrap();
    let waited = start.elapsed();
    println!("killed process: lock free after {waited:?} (watchdog 1 s)");
    assert!(
        waited <= SEC + Duration::from_millis(500),
        "took {waited:?}"
    );
    guard.release().await.unwrap();
}

/// 6a. Deleting the key behind the holder's back fires its lost signal.
#[tokio::test]
async fn lost_signal_when_key_deleted() {
    let server = RedisServer::start();
    let client = server.client(Duration::from_millis(900)).await;
    let mut conn = server.conn().await;
    let guard = client.lock("victim").unwrap().acquire().await.unwrap();
    let token = guard.lost_token();
    let _: () = conn.del("redis-locks:{victim}").await.unwrap();
    tokio::time::timeout(2 * SEC, guard.lost())
        .await
        .expect("lost signal after DEL");
    assert!(token.is_cancelled());
    assert_eq!(guard.lost_reason(), Some(LostReason::OwnerFieldGone));
    assert_eq!(guard.remaining_lease(), Duration::ZERO);
    assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
    assert_eq!(client.held_count(), 0);
}

/// 6b. A Redis restart (empty) fires the lost signal; the same client then recovers.
#[tokio::test]
async fn lost_signal_when_redis_restarts_empty() {
    let mut server = RedisServer::start();
    let client = server.client(SEC).await;
    let lock = client.lock("restart").unwrap();
    let guard = lock.acquire().await.unwrap();
    server.restart();
    tokio::time::timeout(3 * SEC, guard.lost())
        .await
        .expect("lost signal after restart");
    println!("restart: lost reason {:?}", guard.lost_reason());
    assert!(guard.lost_reason().is_some());
    assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
    // No new client needed: the connection manager reconnects.
    let mut again = None;
    for _ in 0..50 {
        match lock.try_acquire().await {
            Ok(guard) => {
                again = guard;
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let again = again.expect("acquire after the restart");
    again.release().await.unwrap();
}

/// 7. Pub/sub wake-up: with a 30 s lease, a waiter in another client gets the lock right
/// after the release, not after the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_wakes_on_release_not_on_lease() {
    let server = RedisServer::start();
    let holder = server.client(30 * SEC).await;
    let waiter = server.client(30 * SEC).await;
    let mut samples = Vec::new();
    for _ in 0..10 {
        let guard = holder.lock("handoff").unwrap().acquire().await.unwrap();
        let lock = waiter.lock("handoff").unwrap();
        let waiting = tokio::spawn(async move {
            let guard = lock.acquire().await.unwrap();
            let at = Instant::now();
            guard.release().await.unwrap();
            at
        });
        // Let the waiter subscribe and go to sleep on the 30 s pttl.
        assert!(
            eventually(5 * SEC, || async { waiter.waiting_channels() == 1 }).await,
            "waiter never subscribed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        let acquired = waiting.await.unwrap();
        samples.push(acquired.saturating_duration_since(released));
    }
    samples.sort();
    println!(
        "pub/sub hand-off: median {:?}, max {:?} (lease 30 s)",
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );
    // Far below the 30 s lease proves the wake-up came from the release message.
    assert!(samples[samples.len() - 1] < 5 * SEC);
}

/// 8. After 100 waiters have come and gone there are no subscribers left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_cleaned_up_after_a_burst() {
    let server = RedisServer::start();
    let holder = server.client(30 * SEC).await;
    let client = server.client(30 * SEC).await;
    let conn = server.conn().await;
    let guard = holder.lock("burst").unwrap().acquire().await.unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let mut waiters = Vec::new();
    for _ in 0..100 {
        let lock = client.lock("burst").unwrap();
        let done = done.clone();
        waiters.push(tokio::spawn(async move {
            let guard = lock.acquire_timeout(60 * SEC).await.unwrap();
            done.fetch_add(1, Ordering::SeqCst);
            guard.release().await.unwrap();
        }));
    }
    let channel = client.lock("burst").unwrap().channel().to_owned();
    assert!(
        eventually(5 * SEC, || {
            let mut conn = conn.clone();
            let channel = channel.clone();
            async move { numsub(&mut conn, &channel).await == 1 }
        })
        .await,
        "100 local waiters must share one subscription"
    );
    assert_eq!(
        holder
            .lock("burst")
            .unwrap()
            .waiting_clients()
            .await
            .unwrap(),
        1
    );
    guard.release().await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(30 * SEC, waiter)
            .await
            .expect("waiters were not woken in turn")
            .unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 100);
    assert!(
        eventually(5 * SEC, || {
            let mut conn = conn.clone();
            let channel = channel.clone();
            async move { numsub(&mut conn, &channel).await == 0 }
        })
        .await,
        "subscription left behind"
    );
    assert_eq!(client.waiting_channels(), 0);
}

/// 9. SCRIPT FLUSH is invisible to callers: acquire, release and renewal reload scripts.
#[tokio::test]
async fn survives_script_flush() {
    let server = RedisServer::start();
    // Renewals every 200 ms on a 6 s lease (not a 600 ms one, which a stall could end).
    let client = server
        .client_renewing(6 * SEC, Duration::from_millis(200))
        .await;
    let mut conn = server.conn().await;
    let lock = client.lock("flush").unwrap();
    lock.acquire().await.unwrap().release().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    let renewed = client.watchdog_stats().renewed;
    assert!(
        eventually(10 * SEC, || async {
            client.watchdog_stats().renewed > renewed
        })
        .await,
        "renewal failed after flush"
    );
    assert!(!guard.is_lost());
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    guard.release().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// 10a. A waiter cancelled while waiting leaves no subscription and no hold behind.
#[tokio::test]
async fn cancelled_waiter_leaves_nothing_behind() {
    let server = RedisServer::start();
    let holder = server.client(30 * SEC).await;
    let client = server.client(30 * SEC).await;
    let conn = server.conn().await;
    let held = holder.lock("cancel").unwrap().acquire().await.unwrap();
    let lock = client.lock("cancel").unwrap();
    let cancelled = tokio::time::timeout(Duration::from_millis(300), lock.acquire()).await;
    assert!(cancelled.is_err(), "acquire should still be waiting");
    assert_eq!(client.waiting_channels(), 0);
    let channel = lock.channel().to_owned();
    assert!(
        eventually(5 * SEC, || {
            let mut conn = conn.clone();
            let channel = channel.clone();
            async move { numsub(&mut conn, &channel).await == 0 }
        })
        .await
    );
    held.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !lock.is_locked().await.unwrap(),
        "cancelled waiter took the lock"
    );
}

/// 10b. Acquires cancelled mid-flight (after the script was sent) never strand a hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_cancelled_in_flight_never_strands_a_hold() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("in-flight").unwrap();
    let mut completed = 0;
    for i in 0..200u64 {
        // Timeouts from 0 to ~100 us land before, during and after the round trip.
        let limit = Duration::from_micros(i % 100);
        if let Ok(result) = tokio::time::timeout(limit, lock.acquire()).await {
            result.unwrap().release().await.unwrap();
            completed += 1;
        }
    }
    println!("in-flight cancellation: {completed}/200 attempts completed before the timeout");
    // flush() waits for the background releases of holds won by cancelled attempts.
    tokio::time::timeout(5 * SEC, client.flush())
        .await
        .expect("flush hung");
    assert!(
        !lock.is_locked().await.unwrap(),
        "a cancelled acquire left the lock held"
    );
    // And it is immediately acquirable by another owner.
    let other = lock.with_owner("someone-else").unwrap();
    other
        .try_acquire()
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
}

/// 11. Bad inputs get typed errors and leave Redis untouched.
#[tokio::test]
async fn bad_inputs_get_typed_errors() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;

    assert!(matches!(client.lock(""), Err(Error::InvalidName { .. })));
    assert!(matches!(
        client.lock(&"n".repeat(10_000)),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        client.lock("a{b}"),
        Err(Error::InvalidName { .. })
    ));
    let lock = client.lock("inputs").unwrap();
    assert!(matches!(
        lock.with_owner(""),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        lock.with_lease(Duration::ZERO),
        Err(Error::InvalidDuration { what: "lease", .. })
    ));
    assert!(matches!(
        lock.with_lease(Duration::from_secs(u64::MAX)),
        Err(Error::InvalidDuration { what: "lease", .. })
    ));
    assert!(matches!(
        lock.acquire_timeout(Duration::MAX).await,
        Err(Error::InvalidDuration { what: "wait", .. })
    ));

    // Wrong types: typed error, value untouched.
    let _: () = conn
        .set("redis-locks:{as-string}", "payload")
        .await
        .unwrap();
    let err = client
        .lock("as-string")
        .unwrap()
        .acquire()
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::WrongType { found, .. } if found == "a string"),
        "{err}"
    );
    let value: String = conn.get("redis-locks:{as-string}").await.unwrap();
    assert_eq!(value, "payload");
    let _: () = conn.rpush("redis-locks:{as-list}", "x").await.unwrap();
    assert!(matches!(
        client.lock("as-list").unwrap().try_acquire().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        client.lock("as-list").unwrap().force_unlock().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        client
            .lock("as-list")
            .unwrap()
            .with_owner("o")
            .unwrap()
            .unlock()
            .await,
        Err(Error::WrongType { .. })
    ));
    let len: i64 = conn.llen("redis-locks:{as-list}").await.unwrap();
    assert_eq!(len, 1);
    let _: () = conn
        .hset("redis-locks:{as-hash}", "field", "value")
        .await
        .unwrap();
    assert!(matches!(
        client.lock("as-hash").unwrap().try_acquire().await,
        Err(Error::WrongType { .. })
    ));
    let all: Vec<(String, String)> = conn.hgetall("redis-locks:{as-hash}").await.unwrap();
    assert_eq!(all, vec![("field".to_string(), "value".to_string())]);
    let ttl: i64 = conn.pttl("redis-locks:{as-hash}").await.unwrap();
    assert_eq!(ttl, -1, "foreign hash got an expiry");

    // Release by a non-owner.
    let guard = lock.acquire().await.unwrap();
    let stranger = lock.with_owner("stranger").unwrap();
    assert!(matches!(
        stranger.unlock().await,
        Err(Error::NotHeld { .. })
    ));
    let as_holder = lock.with_owner(guard.owner()).unwrap();
    assert_eq!(as_holder.hold_count().await.unwrap(), 1);
    // Counting or releasing without a guard needs an explicit owner.
    assert!(matches!(
        lock.hold_count().await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(lock.unlock().await, Err(Error::InvalidConfig(_))));
    guard.release().await.unwrap();
    // Release twice (guard-less unlock after the guard's release).
    assert!(matches!(
        as_holder.unlock().await,
        Err(Error::NotHeld { .. })
    ));

    // Bad URL, unreachable server, bad watchdog timeout.
    assert!(matches!(
        LockClient::connect("not a url").await,
        Err(Error::InvalidUrl(_))
    ));
    let dead_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    match LockClient::connect(&format!("redis://127.0.0.1:{dead_port}")).await {
        Err(err @ Error::Connect { .. }) => {
            assert!(err.to_string().contains(&dead_port.to_string()), "{err}");
        }
        other => panic!("expected Connect error, got {other:?}"),
    }
    assert!(matches!(
        LockClient::builder(&server.url())
            .watchdog_timeout(Duration::ZERO)
            .connect()
            .await,
        Err(Error::InvalidDuration { .. })
    ));
    assert!(matches!(
        LockClient::builder(&server.url())
            .prefix("")
            .connect()
            .await,
        Err(Error::InvalidConfig(_))
    ));
}

/// A retried release (same request id) decrements once: the client's record in the hash
/// answers the retry of a partial release, a retried final release finds nothing left to
/// decrement, and a release naming another hold writes nothing. No key is left.
#[tokio::test]
async fn release_record_answers_a_retry_and_the_hold_id_guards_newer_holds() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let script = redis::Script::new(include_str!("../lua/release.lua"));
    let key = "redis-locks:{record}";
    let _: () = redis::cmd("HSET")
        .arg(key)
        .arg("me")
        .arg(2)
        .arg("\u{1}h")
        .arg("c.1")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = conn.pexpire(key, 30_000).await.unwrap();
    let probe = conn.clone();
    let call = |hold: &'static str, request: &'static str| {
        let mut conn = probe.clone();
        let script = &script;
        async move {
            let mut invocation = script.prepare_invoke();
            invocation
                .key(key)
                .arg("me")
                .arg(hold)
                .arg(request)
                .arg("redis-locks:{record}:db0:released");
            invocation.invoke_async::<i64>(&mut conn).await.unwrap()
        }
    };
    assert_eq!(call("c.0", "c.5").await, -1, "another hold id: not yours");
    assert_eq!(call("c.1", "c.6").await, 1, "partial release");
    assert_eq!(call("c.1", "c.6").await, -3, "the retry is recognised");
    let count: i64 = conn.hget(key, "me").await.unwrap();
    assert_eq!(count, 1, "a retried release decremented twice");
    assert_eq!(call("c.1", "c.7").await, 0, "final release");
    assert_eq!(
        call("c.1", "c.7").await,
        -1,
        "a retried final release decrements nothing"
    );
    let keys: Vec<String> = conn.keys("*").await.unwrap();
    assert!(keys.is_empty(), "left behind: {keys:?}");
}

/// An explicit lease's lost signal fires on time even when the watchdog period is long.
#[tokio::test]
async fn explicit_lease_lost_signal_is_timely_with_a_long_watchdog() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client
        .lock("short-lease")
        .unwrap()
        .with_lease(Duration::from_millis(300))
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    let start = Instant::now();
    // Not before the lease could have run out: a guard whose lease was sent before `start`
    // reads as lost by then on its own clock, however late this task wakes (a timed
    // bound on the wake-up would only measure the machine's load).
    tokio::time::sleep_until((start + Duration::from_millis(300)).into()).await;
    assert!(guard.is_lost(), "the guard still claims its 300 ms lease");
    tokio::time::timeout(2 * SEC, guard.lost())
        .await
        .expect("lost signal within 2 s for a 300 ms lease (watchdog period is 10 s)");
    println!("300 ms lease: lost signal after {:?}", start.elapsed());
}

/// Subscriptions are restored after the pub/sub connection is killed, and a release
/// after that still wakes the waiter (long before its 30 s pttl).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscriptions_are_restored_after_reconnect() {
    let server = RedisServer::start();
    let holder = server.client(30 * SEC).await;
    let waiter = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let guard = holder.lock("resub").unwrap().acquire().await.unwrap();
    let lock = waiter.lock("resub").unwrap();
    let channel = lock.channel().to_owned();
    let waiting = tokio::spawn(async move {
        let guard = lock.acquire().await.unwrap();
        let at = Instant::now();
        guard.release().await.unwrap();
        at
    });
    let probe = conn.clone();
    let subscribed = |n: i64| {
        let conn = probe.clone();
        let channel = channel.clone();
        move || {
            let mut conn = conn.clone();
            let channel = channel.clone();
            async move { numsub(&mut conn, &channel).await == n }
        }
    };
    assert!(eventually(5 * SEC, subscribed(1)).await);
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(killed, 1);
    // The hub reconnects and subscribes again.
    assert!(
        eventually(5 * SEC, subscribed(1)).await,
        "subscription not restored"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    guard.release().await.unwrap();
    let acquired = tokio::time::timeout(10 * SEC, waiting)
        .await
        .expect("waiter not woken after the reconnect")
        .unwrap();
    let latency = acquired.saturating_duration_since(released);
    println!("after pub/sub reconnect: hand-off in {latency:?}");
    assert!(latency < 5 * SEC);
}

/// 6c. Redis unreachable until the lease must have run out: the lost signal fires, with
/// the "unconfirmed" reason, no later than the lease after the last confirmed renewal.
#[tokio::test]
async fn lost_signal_when_redis_stays_unreachable() {
    let mut server = RedisServer::start();
    let client = LockClient::builder(&server.url())
        .watchdog_timeout(SEC)
        .response_timeout(Duration::from_millis(200))
        .connect()
        .await
        .unwrap();
    let guard = client.lock("unreachable").unwrap().acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let lease_left = guard.remaining_lease();
    let killed_at = Instant::now();
    server.kill();
    // By the time the lease could have expired the guard reads as lost on its own clock
    // (checked by the clock: how soon a task is woken only measures the machine's load).
    tokio::time::sleep_until((killed_at + lease_left).into()).await;
    assert!(
        guard.is_lost(),
        "the guard still claims a lease that could have expired"
    );
    tokio::time::timeout(3 * SEC, guard.lost())
        .await
        .expect("lost signal while Redis is down");
    let fired = killed_at.elapsed();
    println!("Redis down: lost after {fired:?} (lease left at the kill: {lease_left:?})");
    assert_eq!(
        guard.lost_reason(),
        Some(LostReason::LeaseExpiredUnconfirmed)
    );
    let stats = client.watchdog_stats();
    assert!(stats.failed_calls > 0, "{stats:?}");
    assert_eq!(
        stats.refused_calls, 0,
        "no reply is not a refusal: {stats:?}"
    );
}

/// A renewal the ACL refuses (its PEXPIRE taken away after the acquire) counts in
/// `refused_calls` as well as `failed_calls`, and the hold is told lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_renewal_is_counted_apart() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let user = |rule: &'static str| {
        let mut cmd = redis::cmd("ACL");
        cmd.arg(&[
            "SETUSER", "renewer", "on", "nopass", "~*", "&*", "+@all", rule,
        ]);
        cmd
    };
    let _: () = user("+pexpire").query_async(&mut admin).await.unwrap();
    let client = LockClient::builder(&format!("redis://renewer:x@127.0.0.1:{}/", server.port))
        .watchdog_timeout(Duration::from_millis(900))
        .connect()
        .await
        .unwrap();
    let guard = client.lock("refused").unwrap().acquire().await.unwrap();
    let _: () = user("-pexpire").query_async(&mut admin).await.unwrap();
    tokio::time::timeout(10 * SEC, guard.lost())
        .await
        .expect("the loss is told");
    let stats = client.watchdog_stats();
    assert!(stats.refused_calls > 0, "{stats:?}");
    assert!(stats.failed_calls >= stats.refused_calls, "{stats:?}");
}

/// force_unlock deletes a lock held by someone else and wakes its waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_wakes_waiters() {
    let server = RedisServer::start();
    // A short watchdog so the old holder learns of the loss at its next renewal (333 ms).
    let holder = server.client(SEC).await;
    let waiter = server.client(30 * SEC).await;
    let admin = server.client(30 * SEC).await;
    let guard = holder.lock("stuck").unwrap().acquire().await.unwrap();
    let lock = waiter.lock("stuck").unwrap();
    let waiting = tokio::spawn(async move { lock.acquire().await.map(|g| g.owner().to_owned()) });
    assert!(eventually(5 * SEC, || async { waiter.waiting_channels() == 1 }).await);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let admin_lock = admin.lock("stuck").unwrap();
    let state = admin_lock.state().await.unwrap();
    assert_eq!(state.holders, vec![(guard.owner().to_owned(), 1)]);
    assert!(admin_lock.force_unlock().await.unwrap());
    let owner = tokio::time::timeout(5 * SEC, waiting)
        .await
        .expect("waiter not woken by force_unlock")
        .unwrap()
        .unwrap();
    assert!(owner.starts_with(waiter.id()));
    tokio::time::timeout(2 * SEC, guard.lost())
        .await
        .expect("the old holder learns it lost the lock");
}

/// A release publishes only when someone may be waiting (the "\1w" mark): uncontended
/// cycles send no PUBLISH, while two waiters of one client, both asleep on a 30 s pttl,
/// are still woken release by release, never by the lease. The release wakes only one of
/// them; the winner must mark its fresh hold for the other, which never failed on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_publish_only_when_someone_may_wait() {
    let server = RedisServer::start();
    let holder = server.client(30 * SEC).await;
    let other = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let lock = holder.lock("marked").unwrap();
    for _ in 0..20 {
        lock.acquire().await.unwrap().release().await.unwrap();
    }
    assert_eq!(
        common::command_calls(&mut conn, &["publish"]).await,
        0,
        "uncontended cycles published"
    );

    let guard = lock.acquire().await.unwrap();
    let started = Instant::now();
    let mut waiters = Vec::new();
    for client in [&other, &other] {
        let lock = client.lock("marked").unwrap();
        waiters.push(tokio::spawn(async move {
            let guard = lock.acquire().await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
            guard.release().await.unwrap();
        }));
    }
    assert!(
        eventually(5 * SEC, || async { other.waiting_channels() == 1 }).await,
        "waiters never subscribed"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.release().await.unwrap();
    for waiter in waiters {
        tokio::time::timeout(10 * SEC, waiter)
            .await
            .expect("a waiter slept on: a release it needed did not publish")
            .unwrap();
    }
    assert!(started.elapsed() < 10 * SEC);
    let published = common::command_calls(&mut conn, &["publish"]).await;
    // The holder's release and the first waiter's; nobody waits for the last one.
    assert_eq!(published, 2, "PUBLISH calls for 3 releases");
}

/// Futures joined in one task (`join!`) exclude each other: each acquire is its own owner.
/// (With a per-task owner both were inside at once.) A spawned helper enters the holder's
/// critical section through `reenter` on a guard handed to it, without deadlocking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joined_futures_exclude_each_other_and_helpers_reenter_through_the_guard() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("joined").unwrap();
    let inside = AtomicUsize::new(0);
    let max_inside = AtomicUsize::new(0);
    let section = |n: u32| {
        let (lock, inside, max_inside) = (&lock, &inside, &max_inside);
        async move {
            for _ in 0..n {
                let guard = lock.acquire_timeout(10 * SEC).await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
            }
        }
    };
    tokio::join!(section(10), section(10), section(10));
    assert_eq!(
        max_inside.load(Ordering::SeqCst),
        1,
        "futures joined in one task were inside together"
    );

    let outer = lock.acquire().await.unwrap();
    let nested = outer.reenter().await.unwrap();
    let helper = tokio::spawn(async move {
        let deeper = nested.reenter().await.unwrap();
        assert_eq!(deeper.hold_count(), 3);
        deeper.release().await.unwrap();
        nested.release().await.unwrap();
    });
    tokio::time::timeout(5 * SEC, helper)
        .await
        .expect("a helper re-entering through the guard deadlocked")
        .unwrap();
    outer.release().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    // Re-entering a hold that ended is LockLost, and takes nothing.
    let gone = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert!(matches!(gone.reenter().await, Err(Error::LockLost { .. })));
    assert!(
        gone.is_lost(),
        "reenter found the hold gone but did not say so"
    );
    client.flush().await;
    assert!(!lock.is_locked().await.unwrap());
}

/// Helper process: the end of a `main` whose guard is dropped without `client.flush()`
/// (current-thread runtime, so the background release has no chance to run), or with it
/// when `REDIS_LOCKS_HELPER_FLUSH` is set.
#[test]
#[ignore = "helper process for the end-of-main test"]
fn helper_drop_a_guard_at_the_end_of_main() {
    let url = std::env::var("REDIS_LOCKS_HELPER_URL").expect("spawned by a test");
    let mode = std::env::var("REDIS_LOCKS_HELPER_MODE").unwrap_or_default();
    let runtime = if mode == "thread-mt" {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    }
    .unwrap();
    let (client, guard) = runtime.block_on(async {
        let client = LockClient::connect(&url).await.unwrap();
        let guard = client.lock("end-of-main").unwrap().acquire().await.unwrap();
        (client, guard)
    });
    match mode.as_str() {
        "flush" => runtime.block_on(async {
            drop(guard);
            client.flush().await;
        }),
        // Handed to a plain thread, outside any runtime, and dropped there: the release
        // goes to the client's runtime. A multi-thread runtime runs it (flush waits for
        // it); a current-thread one is not driven any more, so the release never runs.
        "thread" | "thread-mt" => {
            std::thread::spawn(move || drop(guard)).join().unwrap();
            if mode == "thread-mt" {
                runtime.block_on(client.flush());
            }
        }
        _ => runtime.block_on(async { drop(guard) }),
    }
}

/// A guard dropped at the end of `main` is either released (`client.flush()`), or the
/// process says loudly, on stderr when no `tracing` subscriber is installed, that the lock
/// stays held and for how long. Never silent. A guard dropped on a plain thread is
/// released on the client's runtime while that runtime runs.
#[tokio::test]
async fn a_guard_dropped_at_the_end_of_main_is_flushed_or_reported() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("end-of-main").unwrap();
    for mode in ["end", "flush", "thread", "thread-mt"] {
        let flush = mode == "flush" || mode == "thread-mt";
        let mut command = std::process::Command::new(std::env::current_exe().unwrap());
        command
            .args([
                "helper_drop_a_guard_at_the_end_of_main",
                "--exact",
                "--ignored",
                "--nocapture",
            ])
            .env("REDIS_LOCKS_HELPER_URL", server.url())
            .env("REDIS_LOCKS_HELPER_MODE", mode);
        let out = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "helper failed: {stderr}");
        let locked = lock.is_locked().await.unwrap();
        println!("{mode}: locked {locked}; stderr: {}", stderr.trim());
        if flush {
            assert!(!locked, "flush() did not release the dropped guard");
            assert!(!stderr.contains("was not released"), "{stderr}");
        } else {
            assert!(
                stderr.contains("\"end-of-main\" was not released")
                    && stderr.contains("client.flush()"),
                "silent about a lock left held: {stderr}"
            );
            // It is still held, as reported; clean up for the next round.
            assert!(locked);
            assert!(lock.force_unlock().await.unwrap());
        }
    }
}

/// The scoped helper: the body runs under the lock and its result comes back; when the
/// lock is lost mid-way the body is stopped and the call is LockLost. It can be spawned
/// (its future is Send) and re-enter through the guard it is given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_returns_the_body_result_and_stops_the_body_on_loss() {
    let server = RedisServer::start();
    let client = server.client(Duration::from_millis(600)).await;
    let admin = server.client(30 * SEC).await;
    let lock = client.lock("scoped").unwrap();

    let spawned = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.run(async |guard| {
                let nested = guard.reenter().await.unwrap();
                let count = nested.hold_count();
                nested.release().await.unwrap();
                count
            })
            .await
        })
    };
    assert_eq!(spawned.await.unwrap().unwrap(), 2);
    assert!(!lock.is_locked().await.unwrap(), "run left the lock held");

    let reached_end = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let body_end = reached_end.clone();
    let running = {
        let lock = lock.clone();
        tokio::spawn(async move {
            lock.run(async |_guard| {
                tokio::time::sleep(10 * SEC).await;
                body_end.store(true, Ordering::SeqCst);
            })
            .await
        })
    };
    assert!(eventually(5 * SEC, || async { lock.is_locked().await.unwrap() }).await);
    assert!(admin.lock("scoped").unwrap().force_unlock().await.unwrap());
    let outcome = tokio::time::timeout(5 * SEC, running)
        .await
        .expect("the body was not stopped when the lock was lost")
        .unwrap();
    assert!(
        matches!(outcome, Err(Error::LockLost { .. })),
        "{outcome:?}"
    );
    assert!(
        !reached_end.load(Ordering::SeqCst),
        "the body ran on unprotected"
    );
    assert!(started.elapsed() < 5 * SEC);
}

/// `extend` lengthens a fixed lease (the key lives past the original lease, and the guard
/// is not told lost at the original end); on a hold that ended it is LockLost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_lengthens_a_fixed_lease_and_fails_on_a_lost_hold() {
    let server = RedisServer::start();
    let client = server.client(Duration::from_millis(300)).await;
    let mut conn = server.conn().await;
    let lock = client
        .lock("extended")
        .unwrap()
        .with_lease(Duration::from_millis(800))
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    guard.extend(3 * SEC).await.unwrap();
    let pttl: i64 = conn.pttl(lock.key()).await.unwrap();
    assert!(pttl > 2_500, "not extended: pttl {pttl}");
    // A shorter extension never shortens.
    guard.extend(Duration::from_millis(100)).await.unwrap();
    let pttl: i64 = conn.pttl(lock.key()).await.unwrap();
    assert!(
        pttl > 2_000,
        "an extension shortened the lease: pttl {pttl}"
    );
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        lock.is_locked().await.unwrap(),
        "expired at the original lease"
    );
    assert!(
        !guard.is_lost(),
        "told lost at the original lease: {:?}",
        guard.lost_reason()
    );
    guard.release().await.unwrap();

    let guard = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert!(matches!(
        guard.extend(3 * SEC).await,
        Err(Error::LockLost { .. })
    ));
    assert!(
        !lock.is_locked().await.unwrap(),
        "extend revived a deleted lock"
    );
    assert!(matches!(
        guard.extend(Duration::ZERO).await,
        Err(Error::InvalidDuration { .. })
    ));
}

/// A guardless `unlock` of the last count tells this client's guards of that hold why it
/// ended: `Unlocked`, not "the hold is gone" (which reads as if something else took it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlock_tells_the_guards_it_ended_their_hold() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client
        .lock("handover")
        .unwrap()
        .with_owner("worker-7")
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    assert_eq!(lock.unlock().await.unwrap(), 0);
    tokio::time::timeout(SEC, guard.lost())
        .await
        .expect("the guard was not told");
    assert_eq!(guard.lost_reason(), Some(LostReason::Unlocked));
    match guard.release().await {
        Err(Error::LockLost { reason, .. }) => assert_eq!(reason, LostReason::Unlocked),
        other => panic!("release after unlock: {other:?}"),
    }
    assert!(!lock.is_locked().await.unwrap());
}

/// With a short check interval, a fixed-lease hold learns of a force-unlock within about
/// that interval, though the watchdog timeout (and its default period, 10 s) is long.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_check_interval_tells_fixed_leases_sooner() {
    let server = RedisServer::start();
    let client = server
        .client_renewing(30 * SEC, Duration::from_millis(200))
        .await;
    let lock = client
        .lock("checked")
        .unwrap()
        .with_lease(60 * SEC)
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!guard.is_lost(), "checks must not end a live hold");
    assert!(lock.force_unlock().await.unwrap());
    let started = Instant::now();
    tokio::time::timeout(3 * SEC, guard.lost())
        .await
        .expect("not told within 3 s (default period would be 10 s)");
    println!("told after {:?} (interval 200 ms)", started.elapsed());
    assert_eq!(guard.lost_reason(), Some(LostReason::OwnerFieldGone));
}

/// Leases compose: a watchdog re-entry into a 1 s fixed hold (same owner, same client)
/// keeps the key alive while it lives, and when it is released the expiry comes back to
/// what the outer hold needs, so the lock frees at the outer lease's end, not 30 s later.
/// The reverse (a short fixed re-entry into a watchdog hold) never shortens it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_longer_nested_lease_does_not_outlive_it() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let other = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let pttl = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move { conn.pttl::<_, i64>("redis-locks:{compose}").await.unwrap() }
    };
    let owned = client.lock("compose").unwrap().with_owner("o").unwrap();
    let outer = owned.with_lease(SEC).unwrap().acquire().await.unwrap();
    let inner = owned.acquire().await.unwrap(); // watchdog lease, joins the hold
    assert!(
        pttl(&mut conn).await > 25_000,
        "the watchdog re-entry keeps it alive"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    inner.release().await.unwrap();
    let left = pttl(&mut conn).await;
    assert!(
        left > 0 && left <= 1_000,
        "the expiry did not come back to the outer 1 s lease: pttl {left}"
    );
    // The outer lease runs out: the lock is free (within its drift), not held 30 s more.
    let intruder = other.lock("compose").unwrap();
    let started = Instant::now();
    let taken = intruder.acquire_timeout(3 * SEC).await.unwrap();
    assert!(
        started.elapsed() < 2 * SEC,
        "freed only after {:?}",
        started.elapsed()
    );
    assert!(
        outer.is_lost(),
        "the outer guard must know its lease ran out"
    );
    taken.release().await.unwrap();
    assert!(matches!(outer.release().await, Err(Error::LockLost { .. })));

    // The reverse: a short fixed re-entry into a watchdog hold, then released.
    let outer = owned.acquire().await.unwrap();
    let inner = owned.with_lease(SEC).unwrap().acquire().await.unwrap();
    inner.release().await.unwrap();
    assert!(
        pttl(&mut conn).await > 25_000,
        "a short nested lease cut the outer one"
    );
    outer.release().await.unwrap();
}
