//! Redisson interop (`LockClient::redisson_lock`) against a real redis-server and a test
//! peer that speaks Redisson's RLock protocol (`common/redisson_peer.rs`, Redisson 3.24 to
//! 4.x): the same keys, exclusion and wake-ups in both directions, re-entry on each side,
//! expiry and the watchdog, a Redisson force-unlock told as a loss, exactly-once scripts,
//! and processes of both kinds contending.

mod common;
#[path = "faults/proxy.rs"]
#[allow(dead_code)]
mod proxy;

use std::time::{Duration, Instant};

use common::redisson_peer::RedissonPeer;
use common::{RedisServer, eventually, numsub, subscribed};
use redis_locks::{Error, LockClient};
use redis_locks_protocol::ScriptId;

const SEC: Duration = Duration::from_secs(1);
const CHILD_ENV: &str = "REDIS_LOCKS_REDISSON_CHILD";

async fn hgetall(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Vec<(String, String)> {
    redis::cmd("HGETALL")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap()
}

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    redis::cmd("PTTL").arg(key).query_async(conn).await.unwrap()
}

/// A Rust hold is Redisson's layout (the name's hash, owner field → 1, an expiry of the
/// watchdog's lease); a Redisson peer is refused with the pttl, and gets the lock once the
/// Rust side released it; nothing is left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_hold_is_redissons_layout_and_excludes_a_redisson_peer() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let lock = client.redisson_lock("invoice:42").unwrap();
    let guard = lock.acquire().await.unwrap();
    let fields = hgetall(&mut conn, "invoice:42").await;
    assert_eq!(fields, vec![(guard.owner().to_owned(), "1".to_owned())]);
    let ttl = pttl(&mut conn, "invoice:42").await;
    assert!(ttl > 0 && ttl <= 30_000, "pttl {ttl}");
    let refused = peer.try_lock("invoice:42", 1, 30 * SEC).await;
    assert!(matches!(refused, Some(ttl) if ttl > 0), "{refused:?}");
    let state = lock.state().await.unwrap();
    assert_eq!(state.holders, vec![(guard.owner().to_owned(), 1)]);
    assert!(
        state.remaining.is_some_and(|left| left <= 30 * SEC),
        "{state:?}"
    );
    assert!(lock.is_locked().await.unwrap());
    guard.release().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    // What is left is this library's record of the acquisition, marked released, on its
    // way out (a watchdog lease and a response timeout at most: 30 s + 3 s by default).
    let left: Vec<String> = redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left.len(), 1, "left behind: {left:?}");
    assert!(
        left[0].starts_with("redis-locks_redisson_acquire:{invoice:42}:"),
        "{left:?}"
    );
    let record: String = redis::cmd("GET")
        .arg(&left[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(record, "released");
    let ttl = pttl(&mut conn, &left[0]).await;
    assert!(ttl > 0 && ttl <= 33_000, "record pttl {ttl}");
    assert_eq!(peer.try_lock("invoice:42", 1, 30 * SEC).await, None);
    assert_eq!(peer.unlock("invoice:42", 1, 30 * SEC).await, Some(true));
}

/// A Redisson hold refuses the Rust side; a Rust waiter is woken by Redisson's unlock
/// message (the peer's lease is 60 s, so only the message can wake it within 20 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_unlock_wakes_a_rust_waiter() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let conn = server.conn().await;
    let peer = RedissonPeer::connect(&server.url()).await;
    assert!(peer.lock("job", 1, 60 * SEC, SEC).await);
    let lock = client.redisson_lock("job").unwrap();
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "Redisson holds it"
    );
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire_timeout(20 * SEC).await }
    });
    let channel = RedissonPeer::channel("job");
    assert!(
        eventually(10 * SEC, || {
            let mut conn = conn.clone();
            let channel = channel.clone();
            async move { numsub(&mut conn, &channel).await >= 1 }
        })
        .await,
        "the Rust waiter subscribed to Redisson's channel"
    );
    let started = Instant::now();
    assert_eq!(peer.unlock("job", 1, 60 * SEC).await, Some(true));
    let guard = waiter
        .await
        .unwrap()
        .expect("woken by Redisson's unlock message");
    assert!(started.elapsed() < 20 * SEC);
    assert_eq!(peer.hold_count("job", guard.owner()).await, 1);
    guard.release().await.unwrap();
}

/// A Redisson waiter is woken by a Rust release: the Rust hold's expiry is the watchdog's
/// 30 s, and the peer waits at most 20 s, so it acquires only through the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_release_wakes_a_redisson_waiter() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let conn = server.conn().await;
    let url = server.url();
    let guard = client
        .redisson_lock("job")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let waiter = tokio::spawn(async move {
        let peer = RedissonPeer::connect(&url).await;
        let got = peer.lock("job", 9, 30 * SEC, 20 * SEC).await;
        if got {
            assert_eq!(peer.unlock("job", 9, 30 * SEC).await, Some(true));
        }
        got
    });
    let channel = RedissonPeer::channel("job");
    assert!(
        eventually(10 * SEC, || {
            let mut conn = conn.clone();
            let channel = channel.clone();
            async move { numsub(&mut conn, &channel).await >= 1 }
        })
        .await
    );
    guard.release().await.unwrap();
    assert!(
        waiter.await.unwrap(),
        "the Redisson waiter was woken by the Rust release"
    );
}

/// Re-entry on each side counts in the one field, and the lock is free only when the
/// count is back to zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn re_entry_on_each_side_counts_in_the_one_field() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let lock = client.redisson_lock("nested").unwrap();
    let outer = lock.acquire().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    assert_eq!(peer.hold_count("nested", outer.owner()).await, 2);
    inner.release().await.unwrap();
    assert_eq!(peer.hold_count("nested", outer.owner()).await, 1);
    assert!(
        peer.try_lock("nested", 1, 30 * SEC).await.is_some(),
        "still held"
    );
    outer.release().await.unwrap();

    // The same, explicit owner across handles re-enters, as a Java thread does.
    let named = lock.with_owner("billing-7").unwrap();
    let first = named.acquire().await.unwrap();
    let second = named
        .try_acquire()
        .await
        .unwrap()
        .expect("the owner re-enters");
    assert_eq!(peer.hold_count("nested", "billing-7").await, 2);
    drop(second);
    assert!(
        eventually(10 * SEC, || async {
            peer.hold_count("nested", "billing-7").await == 1
        })
        .await,
        "a dropped guard gives its count back"
    );
    first.release().await.unwrap();

    // Redisson's side: two nested locks, two unlocks.
    assert!(peer.lock("nested", 3, 30 * SEC, SEC).await);
    assert!(peer.lock("nested", 3, 30 * SEC, SEC).await);
    assert_eq!(peer.hold_count("nested", &peer.field(3)).await, 2);
    assert!(lock.try_acquire().await.unwrap().is_none());
    assert_eq!(peer.unlock("nested", 3, 30 * SEC).await, Some(false));
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "one count is left"
    );
    assert_eq!(peer.unlock("nested", 3, 30 * SEC).await, Some(true));
    let guard = lock.try_acquire().await.unwrap().expect("free again");
    guard.release().await.unwrap();
}

/// A fixed lease expires (and Redisson then gets the lock); a watchdog hold outlives its
/// lease many times over, renewed in Redisson's layout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_expire_and_the_watchdog_renews() {
    let server = RedisServer::start();
    let client = server
        .client_renewing(2 * SEC, Duration::from_millis(100))
        .await;
    let mut conn = server.conn().await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let lock = client.redisson_lock("lease").unwrap();

    let renewed = lock.acquire().await.unwrap();
    tokio::time::sleep(5 * SEC).await;
    assert!(!renewed.is_lost());
    assert!(
        peer.try_lock("lease", 1, 30 * SEC).await.is_some(),
        "renewed past its lease"
    );
    let ttl = pttl(&mut conn, "lease").await;
    assert!(ttl > 0 && ttl <= 2_000, "pttl {ttl}");
    renewed.release().await.unwrap();

    let fixed = lock
        .with_lease(Duration::from_millis(50))
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert!(
        eventually(10 * SEC, || async {
            peer.try_lock("lease", 1, 30 * SEC).await.is_none()
        })
        .await,
        "the fixed lease ended and Redisson took the lock"
    );
    assert!(matches!(fixed.release().await, Err(Error::LockLost { .. })));
    assert_eq!(peer.unlock("lease", 1, 30 * SEC).await, Some(true));
}

/// Redisson's `forceUnlock` deletes the Rust hold: the holder is told (its lost signal
/// fires), and its release says the hold was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redisson_force_unlock_is_told_to_the_rust_holder() {
    let server = RedisServer::start();
    let client = server
        .client_renewing(5 * SEC, Duration::from_millis(100))
        .await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let guard = client
        .redisson_lock("forced")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert!(peer.force_unlock("forced").await);
    tokio::time::timeout(10 * SEC, guard.lost())
        .await
        .expect("the loss is told");
    assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));

    // And the other way: this library's force-unlock deletes a Redisson hold, which
    // Redisson's watchdog then finds gone.
    assert!(peer.lock("forced", 4, 30 * SEC, SEC).await);
    let lock = client.redisson_lock("forced").unwrap();
    assert_eq!(
        lock.state().await.unwrap().holders,
        vec![(peer.field(4), 1)]
    );
    assert!(lock.force_unlock().await.unwrap());
    assert!(
        !lock.force_unlock().await.unwrap(),
        "nothing left to delete"
    );
    assert!(
        !peer.renew("forced", 4, 30 * SEC).await,
        "Redisson's renewal finds it gone"
    );
}

/// Bad input gets a typed error: a name that holds another type, an empty name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_a_typed_error() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let _: () = redis::cmd("SET")
        .arg("text")
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    let lock = client.redisson_lock("text").unwrap();
    assert!(matches!(
        lock.try_acquire().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(lock.state().await, Err(Error::WrongType { .. })));
    assert!(matches!(
        lock.force_unlock().await,
        Err(Error::WrongType { .. })
    ));
    let value: String = redis::cmd("GET")
        .arg("text")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "x", "nothing was written");
    assert!(client.redisson_lock("").is_err());
}

/// The scripts are exactly-once: an acquire sent twice with the same request counts once,
/// a give-back sent twice gives back once, a late copy of a released acquire takes
/// nothing, and an abandoned acquire that was never granted gives nothing back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_of_a_request_count_once() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let acquire = redis::Script::new(ScriptId::RedissonAcquire.source());
    let release = redis::Script::new(ScriptId::RedissonRelease.source());
    let record = "p_redisson_acquire:{n}:t.1";
    for _ in 0..2 {
        let reply: Vec<i64> = acquire
            .key("n")
            .key(record)
            .arg("o:1")
            .arg(30_000)
            .arg(30_000)
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(reply, vec![1]);
    }
    let count: i64 = redis::cmd("HGET")
        .arg("n")
        .arg("o:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, 1, "a re-sent acquire counted twice");
    // A second request of the same owner re-enters: 2.
    let _: Vec<i64> = acquire
        .key("n")
        .key("p_redisson_acquire:{n}:t.2")
        .arg("o:1")
        .arg(30_000)
        .arg(30_000)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    let give_back = |request: &'static str, abandoned: &'static str| {
        let mut call = release.key("n");
        call.key("redisson_lock__channel:{n}")
            .key(format!("p_redisson_acquire:{{n}}:{request}"))
            .arg("o:1")
            .arg("0")
            .arg(30_000)
            .arg(abandoned);
        call
    };
    for _ in 0..2 {
        let given: i64 = give_back("t.2", "0").invoke_async(&mut conn).await.unwrap();
        assert_eq!(given, 1);
    }
    let count: i64 = redis::cmd("HGET")
        .arg("n")
        .arg("o:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(count, 1, "a re-sent give-back gave back twice");
    let late: Vec<i64> = acquire
        .key("n")
        .key("p_redisson_acquire:{n}:t.2")
        .arg("o:1")
        .arg(30_000)
        .arg(30_000)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(late, vec![1], "a late copy is answered from the record");
    let count: i64 = redis::cmd("HGET")
        .arg("n")
        .arg("o:1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        count, 1,
        "a late copy of a released acquire took the lock again"
    );
    let given: i64 = give_back("t.3", "1").invoke_async(&mut conn).await.unwrap();
    assert_eq!(
        given, 0,
        "an acquire that was never granted gave something back"
    );
    let given: i64 = give_back("t.1", "0").invoke_async(&mut conn).await.unwrap();
    assert_eq!(given, 1);
    let exists: i64 = redis::cmd("EXISTS")
        .arg("n")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0);
}

/// The body of a child process (this test binary re-executed): `rust` or `redisson` takes
/// the lock `rounds` times, counting holders in Redis (`INCR` of `<name>:inside`) and
/// recording any moment with two (`<name>:violations`). The target is a server URL, or
/// `cluster:<seed>,<seed>,...`.
#[tokio::test]
async fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let (target, side, name, rounds) = (
        parts[0],
        parts[1],
        parts[2],
        parts[3].parse::<u32>().unwrap(),
    );
    let (client, peer) = match target.strip_prefix("cluster:") {
        Some(seeds) => {
            let seeds: Vec<String> = seeds.split(',').map(str::to_owned).collect();
            let client = LockClient::builder_cluster(&seeds)
                .watchdog_timeout(5 * SEC)
                .connect()
                .await
                .unwrap();
            (client, RedissonPeer::connect_cluster(&seeds).await)
        }
        None => {
            let client = LockClient::builder(target)
                .watchdog_timeout(5 * SEC)
                .connect()
                .await
                .unwrap();
            (client, RedissonPeer::connect(target).await)
        }
    };
    let (inside_key, violations_key) = (format!("{name}:inside"), format!("{name}:violations"));
    let lock = client.redisson_lock(name).unwrap();
    for round in 0..rounds {
        let guard = match side {
            "rust" => Some(lock.acquire().await.unwrap()),
            _ => {
                assert!(
                    peer.lock(name, 1, 30 * SEC, 120 * SEC).await,
                    "Redisson waited 120 s"
                );
                None
            }
        };
        let inside: i64 = peer.cmd(redis::cmd("INCR").arg(&inside_key)).await;
        if inside > 1 {
            let _: i64 = peer.cmd(redis::cmd("INCR").arg(&violations_key)).await;
        }
        tokio::time::sleep(Duration::from_millis(2 + u64::from(round % 3))).await;
        let _: i64 = peer.cmd(redis::cmd("DECR").arg(&inside_key)).await;
        match guard {
            Some(guard) => guard.release().await.unwrap(),
            None => assert_eq!(peer.unlock(name, 1, 30 * SEC).await, Some(true)),
        }
    }
}

/// Four processes, two through this library and two through the Redisson peer, each
/// taking the one lock 25 times: never two inside at once (counted in Redis inside each
/// section), everyone gets through (each side woken by the other's releases), and the
/// lock hash is gone at the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_on_both_sides_exclude_each_other() {
    let server = RedisServer::start();
    let url = server.url();
    let mut children = Vec::new();
    for side in ["rust", "redisson", "rust", "redisson"] {
        children.push(common::spawn_child(
            CHILD_ENV,
            format!("{url} {side} shared 25"),
        ));
    }
    for mut child in children {
        let status = tokio::time::timeout(240 * SEC, child.wait())
            .await
            .expect("a child finished")
            .unwrap();
        assert!(status.success(), "a contending process failed: {status}");
    }
    let mut conn = server.conn().await;
    let violations: Option<i64> = redis::cmd("GET")
        .arg("shared:violations")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(violations, None, "two holders at once");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("shared")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "the lock outlived its holds");
}

/// The same four processes on a Redis Cluster (sharded wake-ups; the lock's keys in its
/// name's slot), 15 rounds each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_on_both_sides_exclude_each_other_on_a_cluster() {
    let cluster = common::topology::shared_cluster();
    let seeds = cluster.seeds();
    let name = format!("job:{}", uuid::Uuid::new_v4().simple());
    let target = format!("cluster:{}", seeds.join(","));
    let mut children = Vec::new();
    for side in ["rust", "redisson", "rust", "redisson"] {
        children.push(common::spawn_child(
            CHILD_ENV,
            format!("{target} {side} {name} 15"),
        ));
    }
    for mut child in children {
        let status = tokio::time::timeout(240 * SEC, child.wait())
            .await
            .expect("a child finished")
            .unwrap();
        assert!(status.success(), "a contending process failed: {status}");
    }
    let peer = RedissonPeer::connect_cluster(&seeds).await;
    let violations: Option<i64> = peer
        .cmd(redis::cmd("GET").arg(format!("{name}:violations")))
        .await;
    assert_eq!(violations, None, "two holders at once");
    let exists: i64 = peer.cmd(redis::cmd("EXISTS").arg(&name)).await;
    assert_eq!(exists, 0, "the lock outlived its holds");
}

/// The number of sharded subscribers of `channel` on the node serving it.
fn shard_subscribers(cluster: &common::topology::Cluster, channel: &str) -> i64 {
    let port = cluster.primary_for_key(channel);
    let mut conn = cluster.node_conn(port);
    let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
        .arg("SHARDNUMSUB")
        .arg(channel)
        .query(&mut conn)
        .unwrap();
    match reply.get(1) {
        Some(redis::Value::Int(n)) => *n,
        _ => 0,
    }
}

/// On a Redis Cluster (Redisson's keys all carry `{name}`, so one slot; the wake-up is a
/// sharded `SPUBLISH`, as Redisson 3.22+ sends it on Redis 7): exclusion and wake-ups in
/// both directions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_both_sides_exclude_and_wake_each_other() {
    let cluster = common::topology::shared_cluster();
    let seeds = cluster.seeds();
    let client = LockClient::builder_cluster(&seeds)
        .watchdog_timeout(30 * SEC)
        .connect()
        .await
        .unwrap();
    let peer = RedissonPeer::connect_cluster(&seeds).await;
    let name = format!("order:{}", uuid::Uuid::new_v4().simple());
    let channel = RedissonPeer::channel(&name);
    let lock = client.redisson_lock(&name).unwrap();

    // Rust holds; a Redisson waiter is refused, then woken by the Rust release.
    let guard = lock.acquire().await.unwrap();
    assert!(peer.try_lock(&name, 1, 30 * SEC).await.is_some());
    let waiter = tokio::spawn({
        let seeds = seeds.clone();
        let name = name.clone();
        async move {
            let peer = RedissonPeer::connect_cluster(&seeds).await;
            let got = peer.lock(&name, 2, 30 * SEC, 20 * SEC).await;
            if got {
                assert_eq!(peer.unlock(&name, 2, 30 * SEC).await, Some(true));
            }
            got
        }
    });
    assert!(
        eventually(10 * SEC, || async {
            shard_subscribers(cluster, &channel) >= 1
        })
        .await,
        "the Redisson waiter subscribed"
    );
    guard.release().await.unwrap();
    assert!(
        waiter.await.unwrap(),
        "woken by the Rust release's SPUBLISH"
    );

    // Redisson holds; a Rust waiter is woken by Redisson's unlock.
    assert!(
        eventually(10 * SEC, || async {
            shard_subscribers(cluster, &channel) == 0
        })
        .await,
        "the Redisson waiter's subscription is gone"
    );
    assert!(peer.lock(&name, 3, 60 * SEC, SEC).await);
    assert!(lock.try_acquire().await.unwrap().is_none());
    let rust_waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire_timeout(20 * SEC).await }
    });
    assert!(
        eventually(10 * SEC, || async {
            shard_subscribers(cluster, &channel) >= 1
        })
        .await,
        "the Rust waiter subscribed"
    );
    assert_eq!(peer.unlock(&name, 3, 60 * SEC).await, Some(true));
    let guard = rust_waiter
        .await
        .unwrap()
        .expect("woken by Redisson's SPUBLISH");
    guard.release().await.unwrap();

    // The read-write lock: a Rust read (its timeout key in the name's slot) makes a Java
    // writer wait, and the Rust release wakes it.
    let rw_name = format!("catalog:{}", uuid::Uuid::new_v4().simple());
    let rw_channel = RedissonPeer::rw_channel(&rw_name);
    let rw = client.redisson_rw_lock(&rw_name).unwrap();
    let read = rw.read().await.unwrap();
    assert!(peer.try_write(&rw_name, 4, 30 * SEC).await.is_some());
    let java_writer = tokio::spawn({
        let seeds = seeds.clone();
        let rw_name = rw_name.clone();
        async move {
            let peer = RedissonPeer::connect_cluster(&seeds).await;
            let got = peer.rw_lock(&rw_name, 5, true, 30 * SEC, 20 * SEC).await;
            if got {
                assert_eq!(peer.unlock_write(&rw_name, 5, 30 * SEC).await, Some(true));
            }
            got
        }
    });
    assert!(
        eventually(10 * SEC, || async {
            shard_subscribers(cluster, &rw_channel) >= 1
        })
        .await,
        "the Redisson writer subscribed"
    );
    read.release().await.unwrap();
    assert!(
        java_writer.await.unwrap(),
        "woken by the Rust read release's SPUBLISH"
    );
}

/// Lost replies on every path, through the fault proxy and the public API: a fresh
/// acquire, a re-entry, a partial and a final release, each with its request cut after
/// Redis ran it (the reply is lost) and before it reached Redis. Each is re-sent as it
/// was, and the owner's count is what one application gives: the acquire's record
/// answers a copy that already ran, and the give-back's mark answers a release's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_replies_count_once() {
    let server = RedisServer::start();
    let proxy = proxy::FaultProxy::start(server.port).await;
    let client = proxy::proxied_client(&proxy, 300 * SEC, 2 * SEC).await;
    let mut conn = server.conn().await;
    let acquire_sha = proxy::script_sha(ScriptId::RedissonAcquire.source());
    let release_sha = proxy::script_sha(ScriptId::RedissonRelease.source());
    // Every script cached first, so that no cut lands on a NOSCRIPT round trip.
    let warm = client.redisson_lock("warm").unwrap();
    let outer = warm.acquire().await.unwrap();
    outer.reenter().await.unwrap().release().await.unwrap();
    outer.release().await.unwrap();
    let lock = client
        .redisson_lock("cut")
        .unwrap()
        .with_owner("o")
        .unwrap();
    let count = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        async move {
            let count: Option<i64> = redis::cmd("HGET")
                .arg("cut")
                .arg("o")
                .query_async(&mut conn)
                .await
                .unwrap();
            count.unwrap_or(0)
        }
    };
    for after_redis_ran in [true, false] {
        let arm = |sha: &[u8]| {
            let cuts = proxy.cuts();
            if after_redis_ran {
                proxy.cut_after_request_containing(sha);
            } else {
                proxy.cut_before_request_containing(sha);
            }
            cuts
        };
        let cell = if after_redis_ran {
            "reply lost"
        } else {
            "request lost"
        };

        let cuts = arm(&acquire_sha);
        let outer = lock.acquire().await.unwrap();
        assert_eq!(proxy.cuts(), cuts + 1, "{cell}: fresh acquire not cut");
        assert_eq!(count(&mut conn).await, 1, "{cell}: fresh acquire");

        let cuts = arm(&acquire_sha);
        let inner = outer.reenter().await.unwrap();
        assert_eq!(proxy.cuts(), cuts + 1, "{cell}: re-entry not cut");
        assert_eq!(count(&mut conn).await, 2, "{cell}: re-entry");

        let cuts = arm(&release_sha);
        inner.release().await.unwrap();
        assert_eq!(proxy.cuts(), cuts + 1, "{cell}: partial release not cut");
        assert_eq!(count(&mut conn).await, 1, "{cell}: partial release");

        let cuts = arm(&release_sha);
        outer.release().await.unwrap();
        assert_eq!(proxy.cuts(), cuts + 1, "{cell}: final release not cut");
        assert_eq!(count(&mut conn).await, 0, "{cell}: final release");
        let exists: i64 = redis::cmd("EXISTS")
            .arg("cut")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 0, "{cell}: the lock outlived its holds");
    }
}

/// The read-write lock in Redisson's layout: a Java reader shares with a Rust reader and
/// blocks a Rust writer, whose wait ends on the Java reader's release message (the Java
/// read's lease is 60 s); a Rust reader blocks a Java writer, which the Rust release wakes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rw_readers_and_writers_exclude_and_wake_across_sides() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let conn = server.conn().await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let lock = client.redisson_rw_lock("catalog").unwrap();
    let channel = RedissonPeer::rw_channel("catalog");

    // Java reads: a Rust read shares, a Rust write waits for the Java release.
    assert_eq!(peer.try_read("catalog", 1, 60 * SEC).await, None);
    let read = lock.try_read().await.unwrap().expect("readers share");
    let state = lock.state().await.unwrap();
    assert_eq!(state.mode, Some(redis_locks::RwKind::Read));
    assert_eq!(state.readers.len(), 2, "{state:?}");
    read.release().await.unwrap();
    assert!(
        lock.try_write().await.unwrap().is_none(),
        "a Java reader holds"
    );
    let writer = tokio::spawn({
        let lock = lock.clone();
        async move { lock.write_timeout(20 * SEC).await }
    });
    assert!(
        subscribed(&conn, &channel, 1).await,
        "the Rust writer waits"
    );
    assert_eq!(peer.unlock_read("catalog", 1).await, Some(true));
    let write = writer
        .await
        .unwrap()
        .expect("woken by the Java read release");
    assert_eq!(
        lock.state().await.unwrap().mode,
        Some(redis_locks::RwKind::Write)
    );
    assert!(
        peer.try_read("catalog", 2, 30 * SEC).await.is_some(),
        "a Rust writer holds"
    );
    assert!(peer.try_write("catalog", 2, 30 * SEC).await.is_some());
    write.release().await.unwrap();

    // Rust reads: a Java write waits, and the Rust release wakes it.
    let read = lock.read().await.unwrap();
    let url = server.url();
    let java_writer = tokio::spawn(async move {
        let peer = RedissonPeer::connect(&url).await;
        let got = peer.rw_lock("catalog", 7, true, 30 * SEC, 20 * SEC).await;
        if got {
            assert_eq!(peer.unlock_write("catalog", 7, 30 * SEC).await, Some(true));
        }
        got
    });
    assert!(
        subscribed(&conn, &channel, 1).await,
        "the Java writer waits"
    );
    read.release().await.unwrap();
    assert!(java_writer.await.unwrap(), "woken by the Rust read release");
}

/// A write release wakes every waiting reader (Redisson's message 1): two Java readers
/// waiting on a Rust write both get in; and a Java write release lets Rust readers in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rw_a_write_release_lets_every_reader_in() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let conn = server.conn().await;
    let lock = client.redisson_rw_lock("prices").unwrap();
    let channel = RedissonPeer::rw_channel("prices");
    let write = lock.write().await.unwrap();
    let mut readers = Vec::new();
    for thread in [1, 2] {
        let url = server.url();
        readers.push(tokio::spawn(async move {
            let peer = RedissonPeer::connect(&url).await;
            let got = peer
                .rw_lock("prices", thread, false, 30 * SEC, 20 * SEC)
                .await;
            (peer, got)
        }));
    }
    assert!(
        subscribed(&conn, &channel, 2).await,
        "both Java readers wait"
    );
    write.release().await.unwrap();
    let mut peers = Vec::new();
    for (thread, reader) in [1, 2].into_iter().zip(readers) {
        let (peer, got) = reader.await.unwrap();
        assert!(got, "Java reader {thread} got in on the write release");
        peers.push((thread, peer));
    }
    assert!(
        lock.try_write().await.unwrap().is_none(),
        "Java readers hold"
    );
    for (thread, peer) in &peers {
        peer.unlock_read("prices", *thread).await.unwrap();
    }

    // Java writes; two Rust readers wait and both get in on its release.
    let peer = RedissonPeer::connect(&server.url()).await;
    assert_eq!(peer.try_write("prices", 9, 60 * SEC).await, None);
    let mut rust_readers = Vec::new();
    for _ in 0..2 {
        let client = server.client(30 * SEC).await;
        rust_readers.push(tokio::spawn(async move {
            let lock = client.redisson_rw_lock("prices").unwrap();
            let read = lock.read_timeout(20 * SEC).await;
            (client, read)
        }));
    }
    assert!(
        subscribed(&conn, &channel, 2).await,
        "both Rust readers wait"
    );
    assert_eq!(peer.unlock_write("prices", 9, 60 * SEC).await, Some(true));
    for reader in rust_readers {
        let (_client, read) = reader.await.unwrap();
        read.expect("a Rust reader got in on the Java write release")
            .release()
            .await
            .unwrap();
    }
}

/// A downgrade (a read through a Rust write guard, then the write released) leaves the
/// lock in read mode, as Redisson's does: Java readers join, Java writers wait. No upgrade:
/// a write through a read guard is `WouldDeadlock`. Re-entered reads count in the one field
/// with a timeout key per level, which the watchdog keeps alive past the lease, and a Java
/// reader's release meanwhile keeps the lock (the Rust reader's timeout keys are live).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rw_downgrade_reentry_and_renewal_follow_redissons_layout() {
    let server = RedisServer::start();
    let client = server
        .client_renewing(2 * SEC, Duration::from_millis(100))
        .await;
    let mut conn = server.conn().await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let lock = client.redisson_rw_lock("inventory").unwrap();

    let write = lock.write().await.unwrap();
    let read = write.read().await.unwrap();
    write.release().await.unwrap();
    assert_eq!(
        lock.state().await.unwrap().mode,
        Some(redis_locks::RwKind::Read)
    );
    assert_eq!(
        peer.try_read("inventory", 1, 30 * SEC).await,
        None,
        "readers join"
    );
    assert!(peer.try_write("inventory", 2, 30 * SEC).await.is_some());
    assert!(matches!(
        read.write().await,
        Err(Error::WouldDeadlock { .. })
    ));

    let nested = read.reenter().await.unwrap();
    assert_eq!(peer.hold_count("inventory", read.owner()).await, 2);
    for level in 1..=2 {
        let key = format!("{{inventory}}:{}:rwlock_timeout:{level}", read.owner());
        let exists: i64 = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(exists, 1, "{key}");
    }
    tokio::time::sleep(5 * SEC).await;
    assert!(
        !read.is_lost() && !nested.is_lost(),
        "renewed past the 2 s lease"
    );
    assert_eq!(
        peer.unlock_read("inventory", 1).await,
        Some(false),
        "the Rust reads remain"
    );
    nested.release().await.unwrap();
    assert_eq!(peer.hold_count("inventory", read.owner()).await, 1);
    read.release().await.unwrap();
    let exists: i64 = redis::cmd("EXISTS")
        .arg("inventory")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0);
}

/// Readers and writers of both sides contend in tasks (two clients, two Redisson peers):
/// never a writer with anyone else inside, counted in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rw_both_sides_never_overlap_a_writer() {
    let server = RedisServer::start();
    let mut tasks = tokio::task::JoinSet::new();
    for (rust, write) in [(true, true), (true, false), (false, true), (false, false)] {
        let url = server.url();
        let client = server.client(30 * SEC).await;
        tasks.spawn(async move {
            let peer = RedissonPeer::connect(&url).await;
            let mut conn = redis::Client::open(url.as_str())
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let lock = client.redisson_rw_lock("shared").unwrap();
            for round in 0..15u64 {
                let guard = match (rust, write) {
                    (true, true) => Some(lock.write().await.unwrap()),
                    (true, false) => Some(lock.read().await.unwrap()),
                    (false, _) => {
                        assert!(peer.rw_lock("shared", 1, write, 30 * SEC, 60 * SEC).await);
                        None
                    }
                };
                let key = if write { "writers" } else { "readers" };
                let _: i64 = redis::cmd("INCR")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let (writers, readers): (Option<i64>, Option<i64>) = redis::pipe()
                    .cmd("GET")
                    .arg("writers")
                    .cmd("GET")
                    .arg("readers")
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                let (writers, readers) = (writers.unwrap_or(0), readers.unwrap_or(0));
                if writers > 1 || (writers == 1 && readers > 0) {
                    let _: i64 = redis::cmd("INCR")
                        .arg("violations")
                        .query_async(&mut conn)
                        .await
                        .unwrap();
                }
                tokio::time::sleep(Duration::from_millis(1 + round % 3)).await;
                let _: i64 = redis::cmd("DECR")
                    .arg(key)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                match guard {
                    Some(guard) => guard.release().await.unwrap(),
                    None if write => {
                        assert!(peer.unlock_write("shared", 1, 30 * SEC).await.is_some())
                    }
                    None => assert!(peer.unlock_read("shared", 1).await.is_some()),
                }
            }
        });
    }
    while let Some(done) = tokio::time::timeout(120 * SEC, tasks.join_next())
        .await
        .expect("the contenders finished")
    {
        done.unwrap();
    }
    let mut conn = server.conn().await;
    let violations: Option<i64> = redis::cmd("GET")
        .arg("violations")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(violations, None, "a writer overlapped another holder");
    let exists: i64 = redis::cmd("EXISTS")
        .arg("shared")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "the lock outlived its holds");
}

/// Reads of one explicit owner with different leases: a fixed-lease read's timeout key
/// expires between two ticks (its 50 ms lease, ticks every 500 ms), and the owner's renewed
/// read is still held (renewal counts any live key of the owner), and a Java writer still
/// waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rw_an_expired_fixed_read_does_not_end_its_owners_renewed_read() {
    let server = RedisServer::start();
    let client = server
        .client_renewing(3 * SEC, Duration::from_millis(500))
        .await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let lock = client
        .redisson_rw_lock("ledger")
        .unwrap()
        .with_owner("o")
        .unwrap();
    let renewed = lock.read().await.unwrap();
    let fixed = lock
        .with_lease(Duration::from_millis(300))
        .unwrap()
        .read()
        .await
        .unwrap();
    assert_eq!(peer.hold_count("ledger", "o").await, 2);
    tokio::time::sleep(2 * SEC).await;
    assert!(fixed.is_lost(), "the fixed lease ended");
    assert!(!renewed.is_lost(), "the renewed read is still held");
    assert!(
        peer.try_write("ledger", 1, 30 * SEC).await.is_some(),
        "a writer still waits"
    );
    drop(fixed);
    renewed.release().await.unwrap();
    client.flush().await;
    assert!(
        peer.try_write("ledger", 1, 30 * SEC).await.is_none(),
        "free once released"
    );
}

/// On a Redis Cluster the watchdog renews Redisson-layout holds in per-slot batches
/// (`redisson_renew.lua` with declared keys): a lock and a read held past many leases,
/// each hash's expiry kept within one lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_the_watchdog_renews_both_kinds() {
    let cluster = common::topology::shared_cluster();
    let seeds = cluster.seeds();
    let client = LockClient::builder_cluster(&seeds)
        .watchdog_timeout(2 * SEC)
        .check_interval(Duration::from_millis(100))
        .connect()
        .await
        .unwrap();
    let peer = RedissonPeer::connect_cluster(&seeds).await;
    let lock_name = format!("renewed:{}", uuid::Uuid::new_v4().simple());
    let rw_name = format!("renewed-rw:{}", uuid::Uuid::new_v4().simple());
    let guard = client
        .redisson_lock(&lock_name)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let read = client
        .redisson_rw_lock(&rw_name)
        .unwrap()
        .read()
        .await
        .unwrap();
    tokio::time::sleep(5 * SEC).await;
    assert!(
        !guard.is_lost() && !read.is_lost(),
        "renewed past the 2 s lease"
    );
    for name in [&lock_name, &rw_name] {
        let ttl: i64 = peer.cmd(redis::cmd("PTTL").arg(name)).await;
        assert!(ttl > 0 && ttl <= 2_000, "{name}: pttl {ttl}");
    }
    assert!(peer.try_lock(&lock_name, 1, 30 * SEC).await.is_some());
    assert!(peer.try_write(&rw_name, 1, 30 * SEC).await.is_some());
    guard.release().await.unwrap();
    read.release().await.unwrap();
}

/// A guard's `extend` lengthens a Redisson-layout hold (the hash, and a read's timeout
/// keys) and never shortens it; an extend of a hold a Redisson force-unlock removed is
/// `LockLost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_lengthens_both_kinds_and_tells_a_loss() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let lock = client
        .redisson_lock("extended")
        .unwrap()
        .with_lease(2 * SEC)
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    guard.extend(60 * SEC).await.unwrap();
    assert!(pttl(&mut conn, "extended").await > 50_000);
    guard.extend(SEC).await.unwrap();
    assert!(
        pttl(&mut conn, "extended").await > 50_000,
        "never shortened"
    );
    assert!(peer.force_unlock("extended").await);
    assert!(matches!(
        guard.extend(60 * SEC).await,
        Err(Error::LockLost { .. })
    ));

    let rw = client
        .redisson_rw_lock("extended-rw")
        .unwrap()
        .with_lease(2 * SEC)
        .unwrap();
    let read = rw.read().await.unwrap();
    read.extend(60 * SEC).await.unwrap();
    assert!(pttl(&mut conn, "extended-rw").await > 50_000);
    let key = format!("{{extended-rw}}:{}:rwlock_timeout:1", read.owner());
    assert!(
        pttl(&mut conn, &key).await > 50_000,
        "the read's timeout key too"
    );
    read.release().await.unwrap();
}

/// Redis restarts and loses every key (no persistence) under Redisson-layout holds: each
/// Rust guard (a lock, a read, a write) is told its hold is lost and its release is
/// `LockLost`; a Rust waiter of a lock a Java thread held (60 s lease) gets it after the
/// restart (its subscription comes back and it tries again), and Java then finds its hold
/// gone; a closed latch reads as open and its Rust waiter returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_is_told_to_every_rust_holder_and_frees_the_waiters() {
    let mut server = RedisServer::start();
    let client = server
        .client_renewing(5 * SEC, Duration::from_millis(100))
        .await;
    let conn = server.conn().await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let lock = client
        .redisson_lock("held")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let read = client
        .redisson_rw_lock("shared")
        .unwrap()
        .read()
        .await
        .unwrap();
    let write = client
        .redisson_rw_lock("owned")
        .unwrap()
        .write()
        .await
        .unwrap();
    assert!(peer.lock("java", 1, 60 * SEC, SEC).await);
    let waiter = tokio::spawn({
        let lock = client.redisson_lock("java").unwrap();
        async move { lock.acquire_timeout(30 * SEC).await }
    });
    assert!(subscribed(&conn, &RedissonPeer::channel("java"), 1).await);
    let latch = client.redisson_latch("batch").unwrap();
    assert!(latch.try_set_count(3).await.unwrap());
    let latch_waiter = tokio::spawn({
        let latch = latch.with_recheck(3600 * SEC).unwrap();
        async move { latch.wait_for(30 * SEC).await }
    });
    assert!(subscribed(&conn, &RedissonPeer::latch_channel("batch"), 1).await);

    server.restart();

    for lost in [lock.lost(), read.lost(), write.lost()] {
        tokio::time::timeout(20 * SEC, lost)
            .await
            .expect("the loss is told");
    }
    assert!(matches!(lock.release().await, Err(Error::LockLost { .. })));
    assert!(matches!(read.release().await, Err(Error::LockLost { .. })));
    assert!(matches!(write.release().await, Err(Error::LockLost { .. })));
    let taken = tokio::time::timeout(40 * SEC, waiter)
        .await
        .expect("the waiter returned")
        .unwrap()
        .expect("the waiter got the lock Java held before the restart");
    let peer = RedissonPeer::connect(&server.url()).await;
    assert!(
        !peer.renew("java", 1, 30 * SEC).await,
        "Java's hold is gone"
    );
    assert!(
        peer.try_lock("java", 1, 30 * SEC).await.is_some(),
        "Rust holds it now"
    );
    taken.release().await.unwrap();
    let opened = tokio::time::timeout(40 * SEC, latch_waiter)
        .await
        .expect("the latch waiter returned")
        .unwrap()
        .unwrap();
    assert!(opened, "a lost latch reads as open");
    assert_eq!(latch.count().await.unwrap(), 0);
}
