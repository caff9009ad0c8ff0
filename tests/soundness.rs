//! Soundness: a hold is never silently freed, extended or corrupted by something it does
//! not own — fixed leases stay fixed, stale guards cannot free newer holds, releases ride
//! through BUSY, waiters without SUBSCRIBE poll politely, releases racing renewals are not
//! losses, and the scripts never write into a user's own hash.

mod common;

use std::time::{Duration, Instant};

use common::RedisServer;
use redis::AsyncCommands;
use redis_locks::{Error, LockClient, LostReason};

const SEC: Duration = Duration::from_secs(1);

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

// ---- 1. fixed lease + force_unlock --------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_hold_learns_of_a_force_unlock_within_a_tick() {
    let server = RedisServer::start();
    let client = server.client(Duration::from_millis(600)).await;
    let other = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let lock = client.lock("fixed").unwrap().with_lease(30 * SEC).unwrap();
    let guard = lock.acquire().await.unwrap();

    // The watchdog only checks a fixed-lease hold, it never extends it.
    tokio::time::sleep(SEC).await;
    let left = pttl(&mut conn, lock.key()).await;
    assert!(
        left > 0 && left < 30_000 - 900,
        "fixed lease was extended (or is gone): PTTL {left} ms after 1 s"
    );
    assert!(!guard.is_lost(), "lost early: {:?}", guard.lost_reason());

    assert!(
        other.lock("fixed").unwrap().force_unlock().await.unwrap(),
        "force_unlock found nothing to delete"
    );
    let started = Instant::now();
    tokio::time::timeout(Duration::from_millis(1500), guard.lost())
        .await
        .expect("guard.lost() did not resolve within 1.5 s of a force_unlock");
    assert!(
        started.elapsed() <= SEC,
        "loss noticed only after {:?} (tick is ~200 ms)",
        started.elapsed()
    );
    assert_eq!(guard.lost_reason(), Some(LostReason::OwnerFieldGone));
    match guard.release().await {
        Err(Error::LockLost { reason, .. }) => assert_eq!(reason, LostReason::OwnerFieldGone),
        other => panic!("release after force_unlock: expected LockLost, got {other:?}"),
    }
}

// ---- 2. stale guard vs newer hold of the same owner ---------------------------------

async fn stale_guard_case(drop_instead_of_release: bool) {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let rival_client = server.client(30 * SEC).await;
    let lock = client.lock("stale").unwrap().with_owner("o").unwrap();
    let rival = rival_client.lock("stale").unwrap().with_owner("p").unwrap();

    let g1 = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    let g2 = lock.acquire().await.unwrap();
    assert_ne!(
        g1.hold_id(),
        g2.hold_id(),
        "the new acquire joined the dead hold"
    );

    if drop_instead_of_release {
        drop(g1);
        tokio::time::timeout(5 * SEC, client.flush())
            .await
            .expect("flush hung");
    } else {
        match g1.release().await {
            Err(Error::LockLost { .. }) => {}
            other => panic!("stale g1.release(): expected LockLost, got {other:?}"),
        }
    }

    // g2 still holds.
    let state = lock.state().await.unwrap();
    assert_eq!(
        state.count_of("o"),
        1,
        "stale guard changed the newer hold: {state:?}"
    );
    assert!(
        rival.try_acquire().await.unwrap().is_none(),
        "stale guard freed the newer hold"
    );
    assert!(!g2.is_lost(), "g2 lost: {:?}", g2.lost_reason());
    g2.release().await.expect("g2.release()");
    let g = rival
        .try_acquire()
        .await
        .unwrap()
        .expect("the lock is free after g2.release()");
    g.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_guard_does_not_free_a_newer_hold() {
    stale_guard_case(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stale_guard_does_not_free_a_newer_hold() {
    stale_guard_case(true).await;
}

// ---- 3. release through BUSY --------------------------------------------------------

const BUSY_SCRIPT: &str = "local t=redis.call('TIME'); local s=t[1]*1e6+t[2]; \
    while true do local n=redis.call('TIME'); if n[1]*1e6+n[2]-s > 2000000 then break end end \
    return 1";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_rides_through_busy() {
    let server =
        std::panic::catch_unwind(|| RedisServer::start_with(&["--busy-reply-threshold", "100"]))
            .unwrap_or_else(|_| RedisServer::start_with(&["--lua-time-limit", "100"]));
    let holder = server.client(30 * SEC).await;
    let waiter = server.client(30 * SEC).await;
    let lock = holder.lock("busy").unwrap();
    let guard = lock.acquire().await.unwrap();
    let holder_owner = guard.owner().to_owned();

    let wlock = waiter.lock("busy").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = wlock.acquire_timeout(20 * SEC).await?;
        Ok::<_, Error>((Instant::now(), guard))
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    // A raw connection without a response timeout runs the 2 s script.
    let mut raw = redis::Client::open(server.url())
        .unwrap()
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await
        .unwrap();
    let busy = tokio::spawn(async move {
        redis::cmd("EVAL")
            .arg(BUSY_SCRIPT)
            .arg(0)
            .query_async::<i64>(&mut raw)
            .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The server really is busy now.
    let mut probe = server.conn().await;
    let ping: redis::RedisResult<String> = redis::cmd("PING").query_async(&mut probe).await;
    assert!(
        matches!(&ping, Err(e) if e.to_string().contains("BUSY")),
        "server not busy: {ping:?}"
    );

    let release_started = Instant::now();
    guard
        .release()
        .await
        .expect("release must ride through BUSY");
    assert_eq!(busy.await.unwrap().expect("busy script"), 1);

    // The holder's field is gone (the waiter may already own the key).
    let state = lock.state().await.unwrap();
    assert_eq!(
        state.count_of(&holder_owner),
        0,
        "holder still in {state:?}"
    );

    let (got_at, wguard) = tokio::time::timeout(10 * SEC, waiting)
        .await
        .expect("waiter hung")
        .unwrap()
        .expect("waiter acquire");
    let delay = got_at.saturating_duration_since(release_started);
    assert!(
        delay <= 3 * SEC,
        "waiter got the lock {delay:?} after the release started"
    );
    wguard.release().await.unwrap();
    let mut conn = server.conn().await;
    let exists: bool = conn.exists(lock.key()).await.unwrap();
    assert!(!exists, "lock key left behind");
}

// ---- 4. waiter without SUBSCRIBE ----------------------------------------------------

use common::acl::{ACL_PASS, ACL_RULES, ACL_USER};

/// The shared least-privilege rules, with `+subscribe` taken away.
fn acl_rules_without_subscribe() -> Vec<&'static str> {
    ACL_RULES
        .iter()
        .map(|rule| {
            if *rule == "+subscribe" {
                "-subscribe"
            } else {
                rule
            }
        })
        .collect()
}

async fn connections_received(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("stats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .expect("total_connections_received in INFO stats")
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_without_subscribe_permission_polls_and_does_not_storm() {
    let mut args = vec!["--user", ACL_USER, "on"];
    let pass = format!(">{ACL_PASS}");
    args.push(&pass);
    let rules = acl_rules_without_subscribe();
    assert!(rules.contains(&"-subscribe"));
    args.extend_from_slice(&rules);
    let server = RedisServer::start_with(&args);
    let mut admin = server.conn().await;
    let url = format!("redis://{ACL_USER}:{ACL_PASS}@127.0.0.1:{}/0", server.port);

    let holder = server.client(30 * SEC).await;
    let waiter = LockClient::builder(&url)
        .watchdog_timeout(30 * SEC)
        .connect()
        .await
        .expect("the ACL user connects");
    let guard = holder.lock("nosub").unwrap().acquire().await.unwrap();

    let before = connections_received(&mut admin).await;
    let wlock = waiter.lock("nosub").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = wlock.acquire_timeout(10 * SEC).await?;
        Ok::<_, Error>((Instant::now(), guard))
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released_at = Instant::now();
    guard.release().await.unwrap();
    let (got_at, wguard) = tokio::time::timeout(12 * SEC, waiting)
        .await
        .expect("waiter hung")
        .unwrap()
        .expect("waiter without SUBSCRIBE must still acquire (by polling)");
    let after = connections_received(&mut admin).await;
    let delay = got_at.saturating_duration_since(released_at);
    assert!(
        delay <= Duration::from_millis(1500),
        "waiter got the lock {delay:?} after the release"
    );
    assert!(
        after - before < 20,
        "connection storm: {} connections during the wait",
        after - before
    );
    wguard.release().await.unwrap();
}

// ---- 5. release racing the watchdog -------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_racing_the_watchdog_is_never_a_loss() {
    let server = RedisServer::start();
    // Renewal ticks every 20 ms, as with a 60 ms watchdog, but a 3 s lease: a tick racing
    // a release is what is tested, and a 60 ms lease would also fail on a machine that
    // stalls this process for 60 ms.
    let client = server
        .client_renewing(3 * SEC, Duration::from_millis(20))
        .await;
    let mut tasks = Vec::new();
    for t in 0..3usize {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock(&format!("race-{t}")).unwrap();
            let mut lost = Vec::new();
            for i in 0..100usize {
                let guard = lock.acquire().await.unwrap();
                // 0..=26 ms: crosses 20 ms ticks at varying phases.
                let hold = Duration::from_millis(((i * 7 + t * 3) % 27) as u64);
                tokio::time::sleep(hold).await;
                if guard.is_lost() {
                    lost.push(format!("{t}/{i}: is_lost {:?}", guard.lost_reason()));
                }
                if let Err(e) = guard.release().await {
                    lost.push(format!("{t}/{i}: release {e:?}"));
                }
                if i % 3 == 0 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            lost
        }));
    }
    let mut lost = Vec::new();
    for task in tasks {
        lost.extend(task.await.unwrap());
    }
    let stats = client.watchdog_stats();
    assert!(lost.is_empty(), "losses: {lost:?} (stats {stats:?})");
    assert_eq!(stats.lost, 0, "watchdog declared losses: {stats:?}");
    assert!(stats.renewed > 0, "the watchdog never renewed: {stats:?}");
}

// ---- 6. a user's own hash under the lock key ----------------------------------------

type Snapshot = (Vec<(String, String)>, i64);

async fn snapshot(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Snapshot {
    let mut fields: Vec<(String, String)> = conn.hgetall(key).await.unwrap();
    fields.sort();
    (fields, pttl(conn, key).await)
}

/// Same fields, and the TTL class unchanged and never extended.
fn assert_untouched(before: &Snapshot, after: &Snapshot, what: &str) {
    assert_eq!(before.0, after.0, "{what} changed the user's hash");
    if before.1 == -1 {
        assert_eq!(after.1, -1, "{what} put a TTL on the user's hash");
    } else {
        assert!(
            after.1 > 0 && after.1 <= before.1,
            "{what} changed the user's TTL: {} -> {}",
            before.1,
            after.1
        );
    }
}

fn acceptable<T: std::fmt::Debug>(what: &str, result: &Result<T, Error>) {
    match result {
        Ok(_) | Err(Error::WrongType { .. }) | Err(Error::NotHeld { .. }) => {}
        Err(Error::Timeout { .. }) | Err(Error::LockLost { .. }) => {}
        // A guardless release or count query without an explicit owner: refused before
        // Redis is asked.
        Err(Error::InvalidConfig(_)) => {}
        Err(other) => panic!("{what}: untyped/unexpected error {other:?}"),
    }
}

async fn user_hash_case(with_ttl: bool) {
    let server = RedisServer::start();
    let client = server.client(Duration::from_millis(600)).await;
    let admin_client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let lock = client.lock("user").unwrap();
    let key = lock.key().to_string();
    assert_eq!(key, "redis-locks:{user}");

    let write_user_hash = |mut conn: redis::aio::MultiplexedConnection, key: String| async move {
        let _: () = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: () = conn
            .hset_multiple(&key, &[("a", "1"), ("b", "x")])
            .await
            .unwrap();
        if with_ttl {
            let _: () = conn.pexpire(&key, 100_000).await.unwrap();
        }
    };

    // Guards taken before the user's hash appears: their watchdog renewal / check and
    // their release must not touch it.
    let fixed_lock = admin_client
        .lock("user")
        .unwrap()
        .with_owner("fixed-owner")
        .unwrap()
        .with_lease(30 * SEC)
        .unwrap();
    for kind in ["watchdog", "fixed-lease"] {
        // The previous round's user hash is not a lock: clear it first.
        let _: () = redis::cmd("DEL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        let guard = if kind == "watchdog" {
            lock.acquire().await.unwrap()
        } else {
            fixed_lock.acquire().await.unwrap()
        };
        write_user_hash(conn.clone(), key.clone()).await;
        let before = snapshot(&mut conn, &key).await;
        // Several 200 ms ticks (the 600 ms client) against the user's hash.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_untouched(
            &before,
            &snapshot(&mut conn, &key).await,
            &format!("{kind} tick"),
        );
        let released = guard.release().await;
        assert!(
            matches!(
                released,
                Err(Error::LockLost { .. }) | Err(Error::WrongType { .. })
            ),
            "{kind}: release of a guard whose key became a user hash: {released:?}"
        );
        assert_untouched(
            &before,
            &snapshot(&mut conn, &key).await,
            &format!("release of an old {kind} guard"),
        );
    }

    // Fresh operations on the user's hash.
    write_user_hash(conn.clone(), key.clone()).await;
    let owners = [None, Some("a"), Some("b")];
    for owner in owners {
        let l = match owner {
            None => admin_client.lock("user").unwrap(),
            Some(o) => admin_client.lock("user").unwrap().with_owner(o).unwrap(),
        };
        let tag = format!("owner {owner:?}");
        let before = snapshot(&mut conn, &key).await;

        let r = l.try_acquire().await;
        assert!(
            matches!(r, Err(Error::WrongType { .. })),
            "{tag}: try_acquire on a user hash: {r:?}"
        );
        assert_untouched(&before, &snapshot(&mut conn, &key).await, "try_acquire");

        let r = l.acquire_timeout(Duration::from_millis(300)).await;
        assert!(
            matches!(r, Err(Error::WrongType { .. })),
            "{tag}: acquire_timeout on a user hash: {r:?}"
        );
        assert_untouched(&before, &snapshot(&mut conn, &key).await, "acquire_timeout");

        // A user's hash (with or without a TTL) is never taken for a held lock: no wait.
        match tokio::time::timeout(Duration::from_millis(500), l.acquire()).await {
            Err(_elapsed) => panic!("{tag}: acquire waited on a user hash"),
            Ok(r) => assert!(
                matches!(r, Err(Error::WrongType { .. })),
                "{tag}: acquire on a user hash: {r:?}"
            ),
        }
        assert_untouched(&before, &snapshot(&mut conn, &key).await, "acquire");

        let r = l.unlock().await;
        acceptable(&format!("{tag}: unlock"), &r);
        assert!(
            matches!(
                r,
                Err(Error::WrongType { .. } | Error::NotHeld { .. } | Error::InvalidConfig(_))
            ),
            "{tag}: unlock on a user hash: {r:?}"
        );
        assert_untouched(&before, &snapshot(&mut conn, &key).await, "unlock");

        let r = l.state().await;
        acceptable(&format!("{tag}: state"), &r);
        assert_untouched(&before, &snapshot(&mut conn, &key).await, "state");

        // Expected Err(WrongType): force_unlock must not delete a key that is not a lock.
        let r = l.force_unlock().await;
        assert!(
            matches!(r, Err(Error::WrongType { .. })),
            "{tag}: force_unlock on a user hash: {r:?}"
        );
        assert_untouched(&before, &snapshot(&mut conn, &key).await, "force_unlock");
    }
    tokio::time::timeout(5 * SEC, admin_client.flush())
        .await
        .expect("flush hung");
    tokio::time::timeout(5 * SEC, client.flush())
        .await
        .expect("flush hung");
    let mut fields: Vec<(String, String)> = conn.hgetall(&key).await.unwrap();
    fields.sort();
    assert_eq!(
        fields,
        vec![
            ("a".to_string(), "1".to_string()),
            ("b".to_string(), "x".to_string())
        ],
        "background work changed the user's hash"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_never_write_into_a_users_hash() {
    user_hash_case(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_never_write_into_a_users_hash_with_a_ttl() {
    user_hash_case(true).await;
}
