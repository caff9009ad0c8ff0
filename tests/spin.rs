//! Spin mode (`LockClientBuilder::spin_wait`): waiting without pub/sub, against a real
//! redis-server, alone and mixed with subscribing clients.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{RedisServer, command_calls, numsub};
use redis_locks::LockClient;

const SEC: Duration = Duration::from_secs(1);

async fn spinning(server: &RedisServer) -> LockClient {
    LockClient::builder(&server.url())
        .spin_wait(true)
        .connect()
        .await
        .expect("connect a spinning client")
}

/// A spinning waiter gets a lock held under a 30 s lease soon after its release, without
/// ever subscribing: only polling explains the quick hand-off (the pttl bound is 30 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_waiter_takes_over_without_subscribing() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let holder = server.client(30 * SEC).await;
    let waiter = spinning(&server).await;
    let subscribes_before = command_calls(&mut admin, &["subscribe", "ssubscribe"]).await;

    let guard = holder.lock("spin").unwrap().acquire().await.unwrap();
    let lock = waiter.lock("spin").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = lock.acquire().await.unwrap();
        let at = Instant::now();
        guard.release().await.unwrap();
        at
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    let channel = format!("{}:db0:released", holder.lock("spin").unwrap().key());
    assert_eq!(
        numsub(&mut admin, &channel).await,
        0,
        "a spinning client subscribed"
    );
    assert!(!waiting.is_finished(), "the waiter got a held lock");
    let released = Instant::now();
    guard.release().await.unwrap();
    let acquired = tokio::time::timeout(10 * SEC, waiting)
        .await
        .expect("the spinning waiter never acquired")
        .unwrap();
    let hand_off = acquired.saturating_duration_since(released);
    println!("spin hand-off after the release: {hand_off:?} (lease 30 s)");
    assert!(hand_off < 2 * SEC, "hand-off took {hand_off:?}");
    let subscribes = command_calls(&mut admin, &["subscribe", "ssubscribe"]).await;
    assert_eq!(
        subscribes, subscribes_before,
        "SUBSCRIBE was sent in spin mode"
    );
    assert_eq!(waiter.waiting_channels(), 0);
}

/// Spinning and subscribing clients contend for one lock: never two inside, everyone
/// gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_and_subscribing_clients_exclude_each_other() {
    let server = RedisServer::start();
    let mut clients = Vec::new();
    for i in 0..4 {
        clients.push(if i % 2 == 0 {
            spinning(&server).await
        } else {
            server.client(30 * SEC).await
        });
    }
    let inside = Arc::new(AtomicUsize::new(0));
    let max_inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for client in clients {
        let (inside, max_inside, done) = (inside.clone(), max_inside.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let lock = client.lock("mixed").unwrap();
            for _ in 0..15 {
                let guard = lock.acquire().await.unwrap();
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                max_inside.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.unwrap();
                done.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }
    for task in tasks {
        tokio::time::timeout(60 * SEC, task)
            .await
            .expect("contention finished")
            .unwrap();
    }
    assert_eq!(max_inside.load(Ordering::SeqCst), 1);
    assert_eq!(done.load(Ordering::SeqCst), 60);
}

/// A spinning waiter with a bounded wait gives up on time and leaves nothing behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spinning_timed_wait_ends_with_none() {
    let server = RedisServer::start();
    let holder = server.client(30 * SEC).await;
    let waiter = spinning(&server).await;
    let guard = holder.lock("busy").unwrap().acquire().await.unwrap();
    let started = Instant::now();
    let got = waiter
        .lock("busy")
        .unwrap()
        .try_acquire_for(Duration::from_millis(400))
        .await
        .unwrap();
    assert!(got.is_none());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    assert!(waited < 5 * SEC, "{waited:?}");
    assert_eq!(guard.hold_count(), 1);
    guard.release().await.unwrap();
}
