//! The fair lock against a real redis-server: grants in arrival order across clients, a
//! newcomer never jumps the queue, only the head is woken, a dead waiter leaves within its
//! waiter lease, a cancelled one at once, reentrancy, fencing, lost signals, bad input.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::RedisServer;
use redis::AsyncCommands;
use redis_locks::{Error, FAIR_WAITER_LEASE, LockClient, LostReason};

const SEC: Duration = Duration::from_secs(1);
const CHILD_ENV: &str = "REDIS_LOCKS_FAIR_CHILD";

/// The body of a child process (this test binary re-executed): queues for the lock and
/// sleeps until killed.
#[tokio::test]
async fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (url, name) = spec.split_once(' ').unwrap();
    // A 1 s watchdog lease: a killed holder's hold must age out within it.
    let client = LockClient::builder(url)
        .watchdog_timeout(SEC)
        .connect()
        .await
        .unwrap();
    let guard = client.fair_lock(name).unwrap().acquire().await.unwrap();
    println!("child acquired");
    tokio::time::sleep(Duration::from_secs(3600)).await;
    drop(guard);
}

async fn waiters(lock: &redis_locks::FairLock) -> u64 {
    lock.state().await.unwrap().waiters
}

async fn until_waiters(lock: &redis_locks::FairLock, n: u64) {
    assert!(
        common::eventually(10 * SEC, || async { waiters(lock).await == n }).await,
        "expected {n} waiters, have {}",
        waiters(lock).await
    );
}

#[tokio::test]
async fn grants_follow_arrival_order_across_clients() {
    let server = RedisServer::start();
    let holder_client = server.client(5 * SEC).await;
    let lock = holder_client.fair_lock("fifo").unwrap();
    let guard = lock.acquire().await.unwrap();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(server.client(5 * SEC).await);
    }
    let mut tasks = Vec::new();
    for i in 0..6 {
        let fair = clients[i % 3].fair_lock("fifo").unwrap();
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = fair.acquire().await.unwrap();
            order.lock().push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            guard.release().await.unwrap();
        }));
        // Each waiter queued before the next arrives: the arrival order is 0, 1, 2, ...
        until_waiters(&lock, i as u64 + 1).await;
    }
    guard.release().await.unwrap();
    for task in tasks {
        tokio::time::timeout(20 * SEC, task).await.unwrap().unwrap();
    }
    assert_eq!(*order.lock(), vec![0, 1, 2, 3, 4, 5]);
    let mut conn = server.conn().await;
    let keys: Vec<String> = conn.keys("*").await.unwrap();
    assert!(keys.is_empty(), "nothing left: {keys:?}");
}

/// Starts a child process that queues for `name` (and holds it once granted).
fn queued_child(server: &RedisServer, name: &str) -> std::process::Child {
    std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture"])
        .env(CHILD_ENV, format!("{} {name}", server.url()))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

#[tokio::test]
async fn a_newcomer_does_not_jump_the_queue() {
    let server = RedisServer::start();
    let client = server.client(5 * SEC).await;
    let lock = client.fair_lock("nojump").unwrap();
    let guard = lock.acquire().await.unwrap();
    // The head of the queue is a process that is alive but slow to answer (stopped): the
    // lock, once free, is its to take until it counts as dead.
    let mut head = queued_child(&server, "nojump");
    until_waiters(&lock, 1).await;
    unsafe { libc::kill(head.id() as i32, libc::SIGSTOP) };
    let stopped = Instant::now();
    guard.release().await.unwrap();
    let newcomer = client.fair_lock("nojump").unwrap();
    let mut jumped = 0;
    // The head renews its place at least every second, so its place outlives the stop by
    // at least the waiter lease less a second, less however late its last renewal ran on
    // a loaded machine: one more second of margin.
    while stopped.elapsed() < FAIR_WAITER_LEASE - 2 * SEC {
        if let Some(g) = newcomer.try_acquire().await.unwrap() {
            jumped += 1;
            g.release().await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        jumped, 0,
        "a try_acquire took the lock from the head of the queue"
    );
    // Once the stopped head stops counting as alive, the lock is free for others.
    let g = newcomer
        .try_acquire_for(5 * SEC)
        .await
        .unwrap()
        .expect("the silent head leaves the queue within its waiter lease");
    println!(
        "the silent head was passed over {:?} after it stopped",
        stopped.elapsed()
    );
    g.release().await.unwrap();
    head.kill().unwrap();
    head.wait().unwrap();
}

#[tokio::test]
async fn a_release_wakes_the_head_alone() {
    let server = RedisServer::start();
    let client = server.client(5 * SEC).await;
    let lock = client.fair_lock("head").unwrap();
    let guard = lock.acquire().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let fair = client.fair_lock("head").unwrap();
        tasks.push(tokio::spawn(async move {
            let guard = fair.acquire().await.unwrap();
            guard.release().await.unwrap();
        }));
    }
    until_waiters(&lock, 5).await;
    // Every wake-up message of this lock, seen by an outside subscriber.
    let url = server.url();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn(move || {
        let mut conn = redis::Client::open(url).unwrap().get_connection().unwrap();
        let mut pubsub = conn.as_pubsub();
        pubsub.psubscribe("*:fair:db*:wake:*").unwrap();
        pubsub
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        ready_tx.send(()).unwrap();
        let mut channels = Vec::new();
        while let Ok(message) = pubsub.get_message() {
            channels.push(message.get_channel_name().to_owned());
        }
        channels
    });
    ready_rx.recv().unwrap();
    let mut conn = server.conn().await;
    let head: Vec<String> = conn.zrange(lock.queue_key(), 0, 0).await.unwrap();
    guard.release().await.unwrap();
    let channels = watcher.join().unwrap();
    println!("wake-up messages after one release: {channels:?}");
    assert!(!channels.is_empty(), "the release announced nothing");
    assert!(
        channels[0].ends_with(&head[0]),
        "to the head of the queue: {channels:?}"
    );
    for task in tasks {
        tokio::time::timeout(20 * SEC, task).await.unwrap().unwrap();
    }
    // Six releases, five of them with someone queued: one message each, to one waiter's
    // own channel (PUBSUB NUMSUB would show one subscriber per waiter channel).
    let publishes = common::command_calls(&mut conn, &["publish"]).await;
    assert_eq!(publishes, 5, "one message per release with a queue");
}

#[tokio::test]
async fn a_cancelled_wait_leaves_the_queue_at_once() {
    let server = RedisServer::start();
    let client = server.client(5 * SEC).await;
    let lock = client.fair_lock("cancel").unwrap();
    let guard = lock.acquire().await.unwrap();
    // A timed-out wait and a dropped future both leave.
    assert!(
        lock.try_acquire_for(Duration::from_millis(200))
            .await
            .unwrap()
            .is_none()
    );
    let dropped = {
        let fair = lock.clone();
        tokio::spawn(async move { fair.acquire().await })
    };
    until_waiters(&lock, 1).await;
    dropped.abort();
    let started = Instant::now();
    until_waiters(&lock, 0).await;
    println!(
        "a cancelled waiter left the queue after {:?}",
        started.elapsed()
    );
    assert!(
        started.elapsed() < FAIR_WAITER_LEASE,
        "left at once, not by aging out"
    );
    guard.release().await.unwrap();
    assert!(lock.try_acquire().await.unwrap().is_some());
}

#[tokio::test]
async fn a_dead_waiter_leaves_within_its_waiter_lease() {
    let server = RedisServer::start();
    let client = server.client(5 * SEC).await;
    let lock = client.fair_lock("dead").unwrap();
    let guard = lock.acquire().await.unwrap();
    let mut child = queued_child(&server, "dead");
    until_waiters(&lock, 1).await;
    let behind = {
        let fair = client.fair_lock("dead").unwrap();
        tokio::spawn(async move {
            let guard = fair.acquire().await.unwrap();
            let at = Instant::now();
            guard.release().await.unwrap();
            at
        })
    };
    until_waiters(&lock, 2).await;
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    guard.release().await.unwrap();
    let got = tokio::time::timeout(20 * SEC, behind)
        .await
        .unwrap()
        .unwrap();
    let after = got.duration_since(killed);
    println!("the waiter behind a dead head got the lock {after:?} after the kill");
    assert!(after < FAIR_WAITER_LEASE + 2 * SEC, "{after:?}");
}

#[tokio::test]
async fn a_killed_holders_hold_ages_out_within_its_lease() {
    let server = RedisServer::start();
    let client = server.client(5 * SEC).await;
    let lock = client.fair_lock("killed").unwrap();
    // A child process takes the free lock (watchdog lease 1 s) and is killed holding it.
    let mut holder = queued_child(&server, "killed");
    assert!(
        common::eventually(10 * SEC, || async {
            lock.state().await.unwrap().holds == 1
        })
        .await
    );
    // Renewed while it lives: still held well past its lease.
    tokio::time::sleep(2 * SEC).await;
    assert!(
        lock.try_acquire().await.unwrap().is_none(),
        "renewed while alive"
    );
    holder.kill().unwrap();
    holder.wait().unwrap();
    let killed = Instant::now();
    let guard = lock
        .try_acquire_for(10 * SEC)
        .await
        .unwrap()
        .expect("the killed holder's hold ages out");
    let after = killed.elapsed();
    println!("the lock was taken {after:?} after its holder was killed (lease 1 s)");
    assert!(after < 3 * SEC, "{after:?}");
    guard.release().await.unwrap();
}

#[tokio::test]
async fn reentrancy_fencing_and_lost_signals() {
    let server = RedisServer::start();
    let client = server.client(SEC).await;
    let lock = client.fair_lock("nest").unwrap().with_fencing();
    let outer = lock.acquire().await.unwrap();
    let token = outer.fencing_token().unwrap();
    // A waiter queued behind does not stop the holder re-entering.
    let waiting = {
        let fair = lock.clone();
        tokio::spawn(async move { fair.acquire().await })
    };
    until_waiters(&lock, 1).await;
    let inner = outer.reenter().await.unwrap();
    assert_eq!(inner.fencing_token(), Some(token));
    assert_eq!(lock.state().await.unwrap().holds, 2);
    inner.release().await.unwrap();
    outer.release().await.unwrap();
    let next = tokio::time::timeout(10 * SEC, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(next.fencing_token().unwrap() > token);
    // Deleted under the holder: told within a tick.
    let mut conn = server.conn().await;
    let _: () = conn.del(lock.key()).await.unwrap();
    tokio::time::timeout(3 * SEC, next.lost()).await.unwrap();
    assert_eq!(next.lost_reason(), Some(LostReason::OwnerFieldGone));
    assert!(matches!(next.release().await, Err(Error::LockLost { .. })));
}

/// Found by the fair lock's checker (`tests/fair_check.rs`): with one explicit owner on
/// two clients, a waiter of that owner granted as a re-entry (the owner already held
/// through the other client) kept its entry in the queue, and once both let go every other
/// owner stood behind that stale head for a whole waiter lease.
#[tokio::test]
async fn a_waiter_granted_as_a_reentry_leaves_the_queue() {
    let server = RedisServer::start();
    let (c1, c2, c3) = (
        server.client(5 * SEC).await,
        server.client(5 * SEC).await,
        server.client(5 * SEC).await,
    );
    let other = c3.fair_lock("shared").unwrap();
    let held = other.acquire().await.unwrap();
    let first = c1.fair_lock("shared").unwrap().with_owner("a").unwrap();
    let second = c2.fair_lock("shared").unwrap().with_owner("a").unwrap();
    let t1 = tokio::spawn(async move { first.acquire().await });
    until_waiters(&other, 1).await;
    let t2 = tokio::spawn(async move { second.acquire().await });
    until_waiters(&other, 2).await;
    held.release().await.unwrap();
    let g1 = tokio::time::timeout(10 * SEC, t1)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let g2 = tokio::time::timeout(10 * SEC, t2)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(other.state().await.unwrap().holds, 2, "owner a holds twice");
    assert_eq!(waiters(&other).await, 0, "nobody is left in the queue");
    g2.release().await.unwrap();
    g1.release().await.unwrap();
    // The lock is free and nobody queues: another owner's single attempt gets it (with the
    // stale entry it was refused: a queue stood in its way).
    let taken = other.try_acquire().await.unwrap();
    assert!(
        taken.is_some(),
        "a free lock with no live waiter is granted"
    );
}

#[tokio::test]
async fn bad_input_and_wrong_types_are_typed_errors() {
    let server = RedisServer::start();
    let client = server.client(3 * SEC).await;
    assert!(matches!(
        client.fair_lock(""),
        Err(Error::InvalidName { .. })
    ));
    let lock = client.fair_lock("typed").unwrap();
    assert!(lock.with_lease(Duration::ZERO).is_err());
    let mut conn = server.conn().await;
    let _: () = conn.set(lock.queue_key(), "a string").await.unwrap();
    assert!(matches!(
        lock.try_acquire().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(lock.state().await, Err(Error::WrongType { .. })));
    let value: String = conn.get(lock.queue_key()).await.unwrap();
    assert_eq!(value, "a string");
    let _: () = conn.del(lock.queue_key()).await.unwrap();
    let _: () = conn.hset(lock.key(), "f", "v").await.unwrap();
    match lock.acquire().await {
        Err(Error::WrongType { found, .. }) => assert!(found.contains("hash"), "{found}"),
        other => panic!("{other:?}"),
    }
}
