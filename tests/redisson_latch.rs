//! The count-down latch in Redisson's `RCountDownLatch` layout against a real
//! redis-server, beside a peer that speaks Redisson's own latch scripts
//! (`tests/common/redisson_peer.rs`): the layout, count-downs from both sides in one count,
//! wake-ups both ways (each only through the other side's message), deletes both ways,
//! exactly once under lost replies (where Redisson's own count-down is not), four
//! processes on one server and on a cluster, and bad input.

mod common;
#[path = "faults/proxy.rs"]
#[allow(dead_code)]
mod proxy;

use std::time::Duration;

use common::redisson_peer::RedissonPeer;
use common::{RedisServer, command_calls, eventually, subscribed};
use redis_locks::{Error, LockClient};
use redis_locks_protocol::ScriptId;

const SEC: Duration = Duration::from_secs(1);
const CHILD_ENV: &str = "REDIS_LOCKS_REDISSON_LATCH_CHILD";

async fn get(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> Option<String> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

async fn exists(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> bool {
    let n: i64 = redis::cmd("EXISTS")
        .arg(key)
        .query_async(conn)
        .await
        .unwrap();
    n == 1
}

/// The latch is the bare name holding the count as a string, with no expiry; a closing
/// announces `1` and an opening `0` on Redisson's channel; both sides count down in the
/// one count; the records of this library's count-downs are the only other keys, and
/// expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_layout_and_the_count_are_redissons() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let peer = RedissonPeer::connect(&server.url()).await;
    let latch = client.redisson_latch("batch").unwrap();
    assert!(latch.is_redisson());
    assert_eq!(latch.key(), "batch");

    let mut messages = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    messages
        .subscribe(RedissonPeer::latch_channel("batch"))
        .await
        .unwrap();
    assert!(latch.try_set_count(3).await.unwrap());
    assert!(!peer.latch_try_set_count("batch", 9).await, "already set");
    assert!(!latch.try_set_count(5).await.unwrap(), "already set");
    assert_eq!(get(&mut conn, "batch").await.as_deref(), Some("3"));
    let kind: String = redis::cmd("TYPE")
        .arg("batch")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(kind, "string");
    let ttl: i64 = redis::cmd("PTTL")
        .arg("batch")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(ttl, -1, "a latch has no expiry, as in Redisson");
    assert_eq!(peer.latch_count("batch").await, 3);

    assert_eq!(latch.count_down().await.unwrap(), 2);
    peer.latch_count_down("batch").await;
    assert_eq!(latch.count().await.unwrap(), 1);
    let records: Vec<String> = redis::cmd("KEYS")
        .arg("*redisson_count_down*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(records.len(), 1, "one record per count-down of ours");
    let record_ttl: i64 = redis::cmd("PTTL")
        .arg(&records[0])
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(record_ttl > 0, "a record expires");
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert!(!exists(&mut conn, "batch").await, "opened = no key");
    assert_eq!(
        latch.count_down().await.unwrap(),
        0,
        "open: nothing to count"
    );
    assert_eq!(peer.latch_count("batch").await, 0);

    // Redisson's messages: 1 on the closing, 0 on the opening (and nothing else).
    let mut seen = Vec::new();
    let mut stream = messages.on_message();
    while seen.len() < 2 {
        let message = tokio::time::timeout(10 * SEC, futures_next(&mut stream))
            .await
            .expect("a message")
            .expect("the stream is open");
        seen.push(message.get_payload::<String>().unwrap());
    }
    assert_eq!(seen, ["1", "0"]);
}

async fn futures_next<S: futures_core::Stream + Unpin>(stream: &mut S) -> Option<S::Item> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

/// Waits until Redis has run `commands` at least `calls` times in all (`INFO
/// commandstats`, inside scripts too): a waiter has read the count twice (before and after
/// subscribing) and sleeps. A subscriber count alone cannot tell: the previous waiter's
/// subscription may still be there, and a waiter subscribes before its second reading.
async fn read_twice(conn: &redis::aio::MultiplexedConnection, commands: &[&str], calls: u64) {
    let reached = eventually(10 * SEC, || {
        let mut conn = conn.clone();
        async move { command_calls(&mut conn, commands).await >= calls }
    })
    .await;
    assert!(reached, "the waiter did not read the count twice");
}

/// A Java waiter (the peer's `await`, at most 20 s) on the latch `name`, in a task of its
/// own; its result says whether a `0` message woke it.
fn java_waiter(url: &str, name: &'static str) -> tokio::task::JoinHandle<bool> {
    let url = url.to_owned();
    tokio::spawn(async move {
        let peer = RedissonPeer::connect(&url).await;
        peer.latch_await(name, 20 * SEC).await
    })
}

/// A Java waiter wakes on this library's last count-down, and a Rust waiter on Redisson's:
/// each side opens the latch only once the other side's waiter has read the count twice
/// (before and after subscribing) and sleeps; the peer wakes only on a `0` message, and the
/// Rust waiter re-checks only every hour and waits 60 s, but must be done within 30 s, so
/// each ends only through the other side's message. An opening that announces nothing (a
/// DEL by hand) leaves the Rust waiter asleep until a message comes: the test can tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wake_ups_cross_both_ways() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let conn = server.conn().await;
    let url = server.url();
    let channel = RedissonPeer::latch_channel("gate");
    let latch = client.redisson_latch("gate").unwrap();

    // Java waits, Rust opens. Nothing else runs a GET meanwhile: the peer's readings.
    assert!(latch.try_set_count(2).await.unwrap());
    let gets = command_calls(&mut conn.clone(), &["get"]).await;
    let java = java_waiter(&url, "gate");
    read_twice(&conn, &["get"], gets + 2).await;
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert_eq!(latch.count_down().await.unwrap(), 0);
    assert!(
        java.await.unwrap(),
        "the Java waiter was woken by the Rust count-down"
    );

    // Rust waits, Java opens. The count's script is loaded first (a NOSCRIPT round would
    // count twice); nothing else runs EVALSHA meanwhile: the Rust waiter's readings.
    let peer = RedissonPeer::connect(&url).await;
    assert!(peer.latch_try_set_count("gate", 2).await);
    assert_eq!(latch.count().await.unwrap(), 2);
    let reads = command_calls(&mut conn.clone(), &["evalsha"]).await;
    let waiting = latch.with_recheck(3600 * SEC).unwrap();
    let rust = tokio::spawn(async move { waiting.wait_for(60 * SEC).await });
    read_twice(&conn, &["evalsha"], reads + 2).await;
    assert!(subscribed(&conn, &channel, 1).await);
    peer.latch_count_down("gate").await;
    peer.latch_count_down("gate").await;
    let woken = tokio::time::timeout(30 * SEC, rust)
        .await
        .expect("the Rust waiter was woken by Redisson's count-down");
    assert!(woken.unwrap().unwrap());

    // Without a message, the Rust waiter sleeps on; the message wakes it.
    assert!(peer.latch_try_set_count("gate", 1).await);
    let reads = command_calls(&mut conn.clone(), &["evalsha"]).await;
    let waiting = latch.with_recheck(3600 * SEC).unwrap();
    let mut rust = tokio::spawn(async move { waiting.wait_for(60 * SEC).await });
    read_twice(&conn, &["evalsha"], reads + 2).await;
    assert!(subscribed(&conn, &channel, 1).await);
    let mut admin = conn.clone();
    let _: () = redis::cmd("DEL")
        .arg("gate")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(
        tokio::time::timeout(3 * SEC, &mut rust).await.is_err(),
        "an unannounced opening was seen before the re-check: the wake-ups above prove nothing"
    );
    let _: i64 = redis::cmd("PUBLISH")
        .arg(&channel)
        .arg("0")
        .query_async(&mut admin)
        .await
        .unwrap();
    let woken = tokio::time::timeout(30 * SEC, rust)
        .await
        .expect("woken by the message");
    assert!(woken.unwrap().unwrap());
}

/// Deletes both ways, each once the other side's waiter has read the count twice and
/// sleeps: a Rust delete announces `0`, so a Java waiter wakes (Redisson's own delete
/// announces `1`, which its waiters sleep through); Redisson's delete wakes a Rust waiter
/// (any message makes it read the count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_wake_both_sides() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let conn = server.conn().await;
    let url = server.url();
    let channel = RedissonPeer::latch_channel("job");
    let latch = client.redisson_latch("job").unwrap();

    assert!(latch.try_set_count(5).await.unwrap());
    let gets = command_calls(&mut conn.clone(), &["get"]).await;
    let java = java_waiter(&url, "job");
    read_twice(&conn, &["get"], gets + 2).await;
    assert!(subscribed(&conn, &channel, 1).await);
    assert!(latch.delete().await.unwrap());
    assert!(java.await.unwrap(), "a Rust delete wakes a Java waiter");
    assert!(!latch.delete().await.unwrap(), "nothing left to delete");

    let peer = RedissonPeer::connect(&url).await;
    assert!(peer.latch_try_set_count("job", 5).await);
    assert_eq!(latch.count().await.unwrap(), 5, "the count's script loaded");
    let reads = command_calls(&mut conn.clone(), &["evalsha"]).await;
    let waiting = latch.with_recheck(3600 * SEC).unwrap();
    let rust = tokio::spawn(async move { waiting.wait_for(60 * SEC).await });
    read_twice(&conn, &["evalsha"], reads + 2).await;
    assert!(subscribed(&conn, &channel, 1).await);
    assert!(peer.latch_delete("job").await);
    let woken = tokio::time::timeout(30 * SEC, rust)
        .await
        .expect("Redisson's delete wakes a Rust waiter");
    assert!(woken.unwrap().unwrap());
}

/// A count-down whose reply is lost, or whose request is lost, counts once: also when the
/// latch was opened and closed again before the re-sent copy arrives (the record is a key
/// of its own, not in the latch). Planting a count-down that ignores its record fails the
/// first case.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_replies_count_once() {
    let server = RedisServer::start();
    let proxy = proxy::FaultProxy::start(server.port).await;
    let through_proxy = proxy::proxied_client(&proxy, 30 * SEC, SEC).await;
    let direct = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let latch = direct.redisson_latch("once").unwrap();
    let proxied = through_proxy.redisson_latch("once").unwrap();
    // Every script cached first, so that no cut lands on a NOSCRIPT round trip.
    let warm = through_proxy.redisson_latch("warm").unwrap();
    warm.try_set_count(1).await.unwrap();
    warm.count_down().await.unwrap();
    let sha = proxy::script_sha(ScriptId::RedissonLatchCountDown.source());

    for after_redis_ran in [true, false] {
        let cell = if after_redis_ran {
            "reply lost"
        } else {
            "request lost"
        };
        assert!(latch.try_set_count(3).await.unwrap(), "{cell}");
        let cuts = proxy.cuts();
        if after_redis_ran {
            proxy.cut_after_request_containing(&sha);
        } else {
            proxy.cut_before_request_containing(&sha);
        }
        let remaining = tokio::time::timeout(20 * SEC, proxied.count_down())
            .await
            .expect("count_down returned")
            .expect("count_down through a lost reply");
        assert_eq!(proxy.cuts(), cuts + 1, "{cell}: not cut");
        assert_eq!(remaining, 2, "{cell}: counted twice or not at all");
        assert_eq!(get(&mut conn, "once").await.as_deref(), Some("2"), "{cell}");
        assert!(latch.delete().await.unwrap());
    }
}

/// The record answers a copy of a count-down that arrives after the latch was opened and
/// closed again, where this library's own layout (the record inside the latch) would count
/// it in the new closing: the copy is sent by hand, as the library re-sends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_copy_does_not_count_in_the_next_closing() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let latch = client.redisson_latch("late").unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    assert_eq!(latch.count_down().await.unwrap(), 0, "opened");
    let records: Vec<String> = redis::cmd("KEYS")
        .arg("*redisson_count_down*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert!(latch.try_set_count(2).await.unwrap(), "closed again");
    // The same call as the opening count-down's, re-sent late.
    let copy: i64 = redis::Script::new(ScriptId::RedissonLatchCountDown.source())
        .key("late")
        .key(RedissonPeer::latch_channel("late"))
        .key(&records[0])
        .arg("0")
        .arg("60000")
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(copy, 2, "the copy answers with the count");
    assert_eq!(latch.count().await.unwrap(), 2, "and does not count again");
}

/// Bad input: a zero count or one above the maximum, a name that is not one, and keys of
/// other types (a hash, a string that is not a count, `2.0`: a number to Lua but not to
/// Redis's DECR), which every call leaves as they are and reports as not a latch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_typed_and_nothing_is_written() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    for name in ["", "a{b}", "bad\nname"] {
        assert!(
            matches!(client.redisson_latch(name), Err(Error::InvalidName { .. })),
            "{name:?}"
        );
    }
    let latch = client.redisson_latch("typed").unwrap();
    assert!(matches!(
        latch.try_set_count(0).await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        latch.try_set_count(redis_locks::MAX_COUNT + 1).await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(!exists(&mut conn, "typed").await);

    let _: () = redis::cmd("HSET")
        .arg("typed")
        .arg("f")
        .arg("v")
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("words")
        .arg("not a count")
        .query_async(&mut conn)
        .await
        .unwrap();
    // A number to Lua, not to Redis's DECR nor to Redisson: another program's string.
    let _: () = redis::cmd("SET")
        .arg("decimal")
        .arg("2.0")
        .query_async(&mut conn)
        .await
        .unwrap();
    let words = client.redisson_latch("words").unwrap();
    let decimal = client.redisson_latch("decimal").unwrap();
    for latch in [&latch, &words, &decimal] {
        assert!(matches!(latch.count().await, Err(Error::WrongType { .. })));
        assert!(matches!(
            latch.count_down().await,
            Err(Error::WrongType { .. })
        ));
        assert!(matches!(
            latch.try_set_count(2).await,
            Err(Error::WrongType { .. })
        ));
        assert!(matches!(latch.delete().await, Err(Error::WrongType { .. })));
        assert!(matches!(
            latch.wait_for(SEC).await,
            Err(Error::WrongType { .. })
        ));
    }
    let field: Option<String> = redis::cmd("HGET")
        .arg("typed")
        .arg("f")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(field.as_deref(), Some("v"), "the hash is untouched");
    assert_eq!(
        get(&mut conn, "words").await.as_deref(),
        Some("not a count")
    );
    assert_eq!(get(&mut conn, "decimal").await.as_deref(), Some("2.0"));
    let records: Vec<String> = redis::cmd("KEYS")
        .arg("*redisson_count_down*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        records.is_empty(),
        "a refused count-down left a record: {records:?}"
    );
}

/// The body of a child process (this test binary re-executed): `rust` or `redisson`
/// counts the latch down `n` times, or `wait-rust`/`wait-redisson` waits for it to open
/// (at most 120 s) and fails if it does not. The target is a server URL, or
/// `cluster:<seed>,<seed>,...`.
#[tokio::test]
async fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let (target, side, name, n) = (
        parts[0],
        parts[1],
        parts[2],
        parts[3].parse::<u32>().unwrap(),
    );
    let (client, peer) = match target.strip_prefix("cluster:") {
        Some(seeds) => {
            let seeds: Vec<String> = seeds.split(',').map(str::to_owned).collect();
            let client = LockClient::builder_cluster(&seeds).connect().await.unwrap();
            (client, RedissonPeer::connect_cluster(&seeds).await)
        }
        None => (
            LockClient::builder(target).connect().await.unwrap(),
            RedissonPeer::connect(target).await,
        ),
    };
    let latch = client.redisson_latch(name).unwrap();
    match side {
        "rust" => {
            for _ in 0..n {
                latch.count_down().await.unwrap();
            }
        }
        "redisson" => {
            for _ in 0..n {
                peer.latch_count_down(name).await;
            }
        }
        "wait-rust" => assert!(latch.wait_for(120 * SEC).await.unwrap()),
        _ => assert!(peer.latch_await(name, 120 * SEC).await),
    }
}

/// Two processes of each side count one latch of 81 down together (20 each, interleaved),
/// while a waiting process of each side waits: every count lands once (the latch is still
/// closed after the 80, by a count of exactly 1, which the test's own count-down then
/// opens), and both waiters wake.
async fn four_processes(target: &str, name: &str) {
    let setter = {
        let mut children = Vec::new();
        for side in ["wait-rust", "wait-redisson"] {
            children.push(common::spawn_child(
                CHILD_ENV,
                format!("{target} {side} {name} 0"),
            ));
        }
        children
    };
    let mut counters = Vec::new();
    for side in ["rust", "redisson", "rust", "redisson"] {
        counters.push(common::spawn_child(
            CHILD_ENV,
            format!("{target} {side} {name} 20"),
        ));
    }
    for mut child in counters.into_iter().chain(setter) {
        let status = tokio::time::timeout(240 * SEC, child.wait())
            .await
            .expect("a child finished")
            .unwrap();
        assert!(status.success(), "a process failed: {status}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_on_both_sides_count_down_one_latch() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let latch = client.redisson_latch("shared").unwrap();
    assert!(latch.try_set_count(81).await.unwrap());
    let conn = server.conn().await;
    let url = server.url();
    // The 81st count-down is this test's: the latch must still be closed by exactly 1.
    let opener = tokio::spawn({
        let latch = latch.clone();
        async move {
            assert!(
                eventually(200 * SEC, || {
                    let latch = latch.clone();
                    async move { latch.count().await.unwrap() == 1 }
                })
                .await,
                "80 count-downs did not land"
            );
            assert_eq!(latch.count_down().await.unwrap(), 0);
        }
    });
    four_processes(&url, "shared").await;
    opener.await.unwrap();
    let mut conn = conn.clone();
    assert_eq!(get(&mut conn, "shared").await, None, "opened = no key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_on_both_sides_count_down_one_latch_on_a_cluster() {
    let cluster = common::topology::shared_cluster();
    let seeds = cluster.seeds();
    let client = LockClient::builder_cluster(&seeds).connect().await.unwrap();
    let name = format!("batch:{}", uuid::Uuid::new_v4().simple());
    let latch = client.redisson_latch(&name).unwrap();
    assert!(latch.try_set_count(81).await.unwrap());
    let peer = RedissonPeer::connect_cluster(&seeds).await;
    assert_eq!(
        peer.latch_count(&name).await,
        81,
        "one key, read by Redisson"
    );
    let opener = tokio::spawn({
        let latch = latch.clone();
        async move {
            assert!(
                eventually(200 * SEC, || {
                    let latch = latch.clone();
                    async move { latch.count().await.unwrap() == 1 }
                })
                .await,
                "80 count-downs did not land"
            );
            assert_eq!(latch.count_down().await.unwrap(), 0);
        }
    });
    let target = format!("cluster:{}", seeds.join(","));
    four_processes(&target, &name).await;
    opener.await.unwrap();
    let left: Option<i64> = peer.cmd(redis::cmd("GET").arg(&name)).await;
    assert_eq!(left, None, "opened = no key");
}
