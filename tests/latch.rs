//! The count-down latch against a real redis-server: processes counting down, waiters
//! in other processes and clients woken by the opening, exactly once under lost replies,
//! bounded waits when the wake-up is lost, and bad input.

mod common;
#[path = "faults/proxy.rs"]
#[allow(dead_code)]
mod proxy;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{RedisServer, command_calls};
use redis_locks::{Error, LockClient};

const SEC: Duration = Duration::from_secs(1);
const CHILD_ENV: &str = "REDIS_LOCKS_LATCH_CHILD";

async fn client(server: &RedisServer) -> LockClient {
    server.client(30 * SEC).await
}

/// The body of a child process (re-executed test binary): counts the latch down
/// `count` times. A no-op when run as an ordinary test.
#[tokio::test]
async fn child_counts_down() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.splitn(3, ' ');
    let (url, name, times) = (
        parts.next().unwrap().to_owned(),
        parts.next().unwrap().to_owned(),
        parts.next().unwrap().parse::<u64>().unwrap(),
    );
    let client = LockClient::connect(&url).await.unwrap();
    let latch = client.latch(&name).unwrap();
    for _ in 0..times {
        latch.count_down().await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn spawn_child(url: &str, name: &str, times: u64) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_counts_down",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, format!("{url} {name} {times}"))
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Four processes count a latch of 21 down (5 each) while waiters in two other clients
/// wait: the count is then exactly 1 (no count-down lost or doubled, and nobody woke);
/// the last count-down opens it, every waiter wakes, and the opening is heard at once (a
/// 30 s re-check, so only the wake-up explains it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_count_down_and_waiters_wake() {
    let server = RedisServer::start();
    let url = server.url();
    let setter = client(&server).await;
    let latch = setter.latch("jobs").unwrap();
    assert!(latch.try_set_count(21).await.unwrap());
    assert!(!latch.try_set_count(5).await.unwrap(), "set twice");
    assert_eq!(latch.count().await.unwrap(), 21);

    let mut waiters = Vec::new();
    for _ in 0..2 {
        let other = client(&server).await;
        for _ in 0..3 {
            let latch = other.latch("jobs").unwrap().with_recheck(30 * SEC).unwrap();
            waiters.push(tokio::spawn(async move {
                latch.wait().await.unwrap();
                Instant::now()
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut children = Vec::new();
    for _ in 0..4 {
        children.push(spawn_child(&url, "jobs", 5));
    }
    for mut child in children {
        let status = tokio::time::timeout(60 * SEC, child.wait())
            .await
            .expect("a child finished")
            .unwrap();
        assert!(status.success(), "a counting process failed: {status}");
    }
    assert_eq!(latch.count().await.unwrap(), 1, "20 count-downs from 21");
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "a waiter woke early"
    );
    assert_eq!(latch.count_down().await.unwrap(), 0);
    let opened = Instant::now();
    for waiter in waiters {
        let woke = tokio::time::timeout(10 * SEC, waiter)
            .await
            .expect("a waiter woke")
            .unwrap();
        let late = woke.saturating_duration_since(opened);
        assert!(late < 5 * SEC, "a waiter woke {late:?} after the opening");
    }
    assert_eq!(latch.count().await.unwrap(), 0);
    let mut conn = server.conn().await;
    let exists: i64 = redis::cmd("EXISTS")
        .arg(latch.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(exists, 0, "an open latch leaves no key");
    // Counting down an open latch does nothing.
    assert_eq!(latch.count_down().await.unwrap(), 0);
}

/// A count-down whose reply is lost (the proxy drops the connection after forwarding it)
/// is retried with the same request id and counts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_down_whose_reply_is_lost_counts_once() {
    let server = RedisServer::start();
    let proxy = proxy::FaultProxy::start(server.port).await;
    let through_proxy = proxy::proxied_client(&proxy, 30 * SEC, SEC).await;
    let direct = client(&server).await;
    let latch = direct.latch("once").unwrap();
    assert!(latch.try_set_count(3).await.unwrap());
    let proxied = through_proxy.latch("once").unwrap();
    // Redis must have the script cached, or the cut would hit the NOSCRIPT round.
    let warm = through_proxy.latch("warm").unwrap();
    warm.try_set_count(1).await.unwrap();
    warm.count_down().await.unwrap();
    let sha = proxy::script_sha(redis_locks_protocol::ScriptId::LatchCountDown.source());
    proxy.cut_after_request_containing(&sha);
    let remaining = tokio::time::timeout(20 * SEC, proxied.count_down())
        .await
        .expect("count_down returned")
        .expect("count_down through a lost reply");
    assert_eq!(proxy.cuts(), 1, "the reply was not cut");
    assert_eq!(remaining, 2, "the lost reply's retry counted again");
    assert_eq!(latch.count().await.unwrap(), 2);
    assert_eq!(proxied.count_down().await.unwrap(), 1);
}

/// Waits end on time when the latch stays closed; an absent latch is open; an opening
/// nobody announces (the key deleted behind the library's back: no message at all) is
/// noticed within the re-check interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bounded_waits_and_lost_wake_ups() {
    let server = RedisServer::start();
    let a = client(&server).await;
    let latch = a.latch("bounded").unwrap();
    assert!(
        latch.wait_for(Duration::from_millis(50)).await.unwrap(),
        "never set = open"
    );
    latch.try_set_count(1).await.unwrap();
    let started = Instant::now();
    assert!(!latch.wait_for(Duration::from_millis(300)).await.unwrap());
    assert!(started.elapsed() >= Duration::from_millis(300));

    let b = client(&server).await;
    let waiting = b
        .latch("bounded")
        .unwrap()
        .with_recheck(Duration::from_millis(500))
        .unwrap();
    let waiter = tokio::spawn(async move { waiting.wait_for(20 * SEC).await });
    let mut admin = server.conn().await;
    assert!(
        common::eventually(5 * SEC, || {
            let mut admin = admin.clone();
            async move {
                common::numsub(
                    &mut admin,
                    &format!("{}:db0:open", "redis-locks:{bounded}:latch"),
                )
                .await
                    == 1
            }
        })
        .await,
        "the waiter never subscribed"
    );
    // Open without a message.
    let opened = Instant::now();
    let _: () = redis::cmd("DEL")
        .arg(latch.key())
        .query_async(&mut admin)
        .await
        .unwrap();
    let woke = tokio::time::timeout(10 * SEC, waiter)
        .await
        .expect("woke")
        .unwrap();
    assert!(woke.unwrap());
    let late = opened.elapsed();
    println!("noticed an unannounced opening after {late:?} (re-check 500 ms)");
    assert!(late < 3 * SEC, "{late:?}");
}

/// `delete` opens a closed latch and wakes its waiters; spin-mode waiters never subscribe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_opens_and_spinning_waiters_poll() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let a = client(&server).await;
    let spin = LockClient::builder(&server.url())
        .spin_wait(true)
        .connect()
        .await
        .unwrap();
    let latch = a.latch("gate").unwrap();
    latch.try_set_count(100).await.unwrap();
    let subscribes = command_calls(&mut admin, &["subscribe"]).await;
    let waiting = spin.latch("gate").unwrap().with_recheck(30 * SEC).unwrap();
    let waiter = tokio::spawn(async move { waiting.wait().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let opened = Instant::now();
    assert!(latch.delete().await.unwrap());
    tokio::time::timeout(10 * SEC, waiter)
        .await
        .expect("woke")
        .unwrap()
        .unwrap();
    assert!(opened.elapsed() < 2 * SEC, "{:?}", opened.elapsed());
    assert_eq!(command_calls(&mut admin, &["subscribe"]).await, subscribes);
    assert!(!latch.delete().await.unwrap());
}

/// Bad input: a zero count, a name that is not one, keys of other types (untouched).
#[tokio::test]
async fn bad_input_is_typed_and_nothing_is_written() {
    let server = RedisServer::start();
    let a = client(&server).await;
    assert!(matches!(a.latch(""), Err(Error::InvalidName { .. })));
    assert!(matches!(a.latch("a{b}"), Err(Error::InvalidName { .. })));
    let latch = a.latch("typed").unwrap();
    assert!(matches!(
        latch.try_set_count(0).await,
        Err(Error::InvalidConfig(_))
    ));
    // Beyond what the scripts' Lua numbers hold exactly (found by the benchmark: a count
    // of 2^62 came back as a negative number).
    assert!(matches!(
        latch.try_set_count(redis_locks::MAX_COUNT + 1).await,
        Err(Error::InvalidConfig(_))
    ));
    assert!(latch.try_set_count(redis_locks::MAX_COUNT).await.unwrap());
    assert_eq!(
        latch.count_down().await.unwrap(),
        redis_locks::MAX_COUNT - 1
    );
    assert!(latch.delete().await.unwrap());
    assert!(matches!(
        latch.clone().with_recheck(Duration::ZERO),
        Err(Error::InvalidDuration { .. })
    ));
    // A zero wait reads once (the latch was deleted: open).
    assert!(latch.wait_for(Duration::ZERO).await.unwrap());
    assert!(latch.try_set_count(1).await.unwrap());
    assert!(!latch.wait_for(Duration::ZERO).await.unwrap());
    assert!(latch.delete().await.unwrap());
    assert!(matches!(
        latch.wait_for(Duration::MAX).await,
        Err(Error::InvalidDuration { .. })
    ));
    let mut conn = server.conn().await;
    let _: () = redis::cmd("SET")
        .arg(latch.key())
        .arg("x")
        .query_async(&mut conn)
        .await
        .unwrap();
    for result in [
        latch.count().await.map(|_| ()),
        latch.count_down().await.map(|_| ()),
        latch.try_set_count(2).await.map(|_| ()),
        latch.delete().await.map(|_| ()),
        latch.wait_for(SEC).await.map(|_| ()),
    ] {
        match result {
            Err(Error::WrongType { found, .. }) => assert_eq!(found, "a string"),
            other => panic!("a string at the latch's key: {other:?}"),
        }
    }
    let value: String = redis::cmd("GET")
        .arg(latch.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(value, "x", "a foreign key was written");
    let _: () = redis::cmd("DEL")
        .arg(latch.key())
        .query_async(&mut conn)
        .await
        .unwrap();
    let _: () = redis::cmd("HSET")
        .arg(latch.key())
        .arg("other")
        .arg(1)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(
        latch.count_down().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(latch.count().await, Err(Error::WrongType { .. })));
}
