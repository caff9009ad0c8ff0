//! Locks on a real Redis Cluster (Redis 7.0: 3 primaries, 3 replicas, node timeout 1 s):
//! exclusion across OS processes (the `redis-locks` binary), thousands of locks over
//! every primary, sharded wake-ups between clients, the watchdog renewing per slot,
//! failovers of a held lock's primary with and without `min_replicas`, a dead replica
//! under `min_replicas`, `NOSCRIPT` recovery, and bad cluster input.
//!
//! Tests that kill nothing share one cluster ([`topology::shared_cluster`]), each with its
//! own key prefix; each test that kills a node starts its own ([`Cluster::start`]).
//! Every test prints what it measured (`-- --nocapture`). The only timing assertions are
//! liveness bounds, chosen far above what a working implementation needs and far below
//! what the fallback (sleeping for the lock's remaining TTL) would take.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::topology::{self, Cluster, SlotRange};
use parking_lot::Mutex;
use redis_locks::{Error, LockClient, LockGuard, LostReason};
use tokio::process::Command;
use tokio::task::JoinSet;

const BIN: &str = env!("CARGO_BIN_EXE_redis-locks");
const SEC: Duration = Duration::from_secs(1);

// The documented exit codes of the binary.
const USAGE: i32 = 64;
const UNAVAILABLE: i32 = 69;
const NOT_ACQUIRED: i32 = 75;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// The lock hash of `name` under `prefix`, as the library lays it out.
fn key_of(prefix: &str, name: &str) -> String {
    format!("{prefix}:{{{name}}}")
}

/// The primary serving `key` in `map`.
fn primary_in(map: &[SlotRange], key: &str) -> u16 {
    let slot = topology::slot_of(key);
    match map.iter().find(|range| range.contains(slot)) {
        Some(range) => range.primary,
        None => panic!("slot {slot} of {key:?} is not in {map:?}"),
    }
}

/// A cluster client on `seeds` with this prefix and watchdog lease.
async fn connect(seeds: &[String], prefix: &str, watchdog: Duration) -> LockClient {
    LockClient::builder_cluster(seeds)
        .prefix(prefix)
        .watchdog_timeout(watchdog)
        .connect()
        .await
        .unwrap_or_else(|err| panic!("connect a cluster client via {seeds:?}: {err}"))
}

/// Every key matching `pattern` on the node on `port` (SCAN, so a replica answers too).
fn scan(cluster: &Cluster, port: u16, pattern: &str) -> Vec<String> {
    let mut conn = cluster.node_conn(port);
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query(&mut conn)
            .unwrap_or_else(|err| panic!("SCAN on {port}: {err}"));
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

/// `HGET key field` of a lock in either form (`common::lock_hget`, a read-only script) and
/// its `PTTL` on a node; on a replica after `READONLY`.
fn hget_on(cluster: &Cluster, port: u16, key: &str, field: &str) -> (Option<u64>, i64) {
    let mut conn = cluster.node_conn(port);
    let _: redis::Value = redis::cmd("READONLY").query(&mut conn).unwrap();
    let count: Option<u64> = common::lock_hget(key, field)
        .query(&mut conn)
        .unwrap_or_else(|err| panic!("HGET on {port}: {err}"));
    let pttl: i64 = redis::cmd("PTTL").arg(key).query(&mut conn).unwrap();
    (count, pttl)
}

/// The `count` of `errorstat_<code>` in `INFO errorstats` of a node (0 when absent).
fn error_count(cluster: &Cluster, port: u16, code: &str) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("errorstats")
        .query(&mut cluster.node_conn(port))
        .unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("errorstat_{code}:count=")))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// `redis-locks --cluster --url <seed>...` with output captured.
fn cli(seeds: &[String]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.env_remove("REDIS_URL")
        .env_remove("RUST_LOG")
        .arg("--cluster");
    for seed in seeds {
        cmd.arg("--url").arg(seed);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs a `redis-locks` to completion (at most 60 s).
async fn output(cmd: &mut Command) -> Output {
    tokio::time::timeout(60 * SEC, cmd.output())
        .await
        .expect("redis-locks finished within 60 s")
        .expect("spawn redis-locks")
}

fn code(out: &Output) -> i32 {
    out.status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {out:?}"))
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A loopback port nothing listens on.
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// `n` lock names, checked to cover all three primaries of `map`, with the count per
/// primary.
fn names_over_all_primaries(
    map: &[SlotRange],
    prefix: &str,
    stem: &str,
    n: usize,
) -> (Vec<String>, BTreeMap<u16, usize>) {
    let names: Vec<String> = (0..n).map(|i| format!("{stem}-{i}")).collect();
    let mut per_primary = BTreeMap::new();
    for name in &names {
        *per_primary
            .entry(primary_in(map, &key_of(prefix, name)))
            .or_insert(0) += 1;
    }
    assert_eq!(
        per_primary.len(),
        3,
        "{n} names do not cover 3 primaries: {per_primary:?}"
    );
    (names, per_primary)
}

fn millis(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

// ---------------------------------------------------------------------------------------
// 1. Exclusion across processes
// ---------------------------------------------------------------------------------------

/// Four workers run 6 `redis-locks --cluster ... run` processes each, one after another,
/// all on one lock; every critical section increments a counter file with a pause
/// between the read and the write, and flags overlap with an atomic `mkdir`. Seeds are
/// nodes that do not serve the lock's slot, so each process finds the owner through the
/// cluster map.
///
/// The first run of every worker starts while the test itself holds the lock (30 s
/// watchdog lease), and the test releases only once all four processes are subscribed
/// (`PUBSUB SHARDNUMSUB` = 4): the first critical section must then start within 5 s,
/// which only a sharded wake-up across processes explains (the fallback is the 30 s TTL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_exclude_each_other_through_the_cluster() {
    let cluster = topology::shared_cluster();
    let map = cluster.slot_map();
    let prefix = "cl-procs";
    let name = "counter";
    let key = key_of(prefix, name);
    let owner = primary_in(&map, &key);
    let seeds: Vec<String> = std::iter::once(cluster.replicas_of(owner)[0])
        .chain(
            map.iter()
                .map(|r| r.primary)
                .filter(|&p| p != owner)
                .take(1),
        )
        .map(|port| format!("redis://127.0.0.1:{port}/"))
        .collect();
    assert!(!seeds.iter().any(|s| s.contains(&format!(":{owner}/"))));

    let holder = connect(&cluster.seeds(), prefix, 30 * SEC).await;
    let lock = holder.lock(name).unwrap();
    let held = lock.acquire().await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("counter"), "0").unwrap();
    let script = r#"
        mkdir "$DIR/inside" 2>/dev/null || echo "overlap $$" >> "$DIR/overlaps"
        echo "$$ $(date +%s%N)" >> "$DIR/entered"
        n=$(cat "$DIR/counter")
        sleep 0.02
        echo $((n + 1)) > "$DIR/counter"
        rmdir "$DIR/inside" 2>/dev/null || echo "lost marker $$" >> "$DIR/overlaps"
    "#;
    const WORKERS: usize = 4;
    const RUNS: usize = 6;
    let begun = Instant::now();
    let mut workers = JoinSet::new();
    for _ in 0..WORKERS {
        let seeds = seeds.clone();
        let dir = dir.path().to_owned();
        workers.spawn(async move {
            let mut busy = Duration::ZERO;
            for _ in 0..RUNS {
                let started = Instant::now();
                let out = output(cli(&seeds).env("DIR", &dir).args([
                    "--prefix", prefix, "run", name, "--wait", "50s", "--", "sh", "-c", script,
                ]))
                .await;
                assert_eq!(code(&out), 0, "run failed: {}", stderr(&out));
                busy += started.elapsed();
            }
            busy
        });
    }
    let all_waiting = common::eventually(20 * SEC, || async {
        lock.waiting_clients().await.unwrap() == WORKERS as u64
    })
    .await;
    assert!(
        all_waiting,
        "{} of {WORKERS} processes subscribed",
        lock.waiting_clients().await.unwrap()
    );
    assert!(
        !dir.path().join("entered").exists(),
        "a process entered while the test held the lock"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    let released_at = std::time::SystemTime::now();
    held.release().await.unwrap();

    let mut busy = Duration::ZERO;
    while let Some(worker) = workers.join_next().await {
        busy += worker.expect("worker panicked");
    }
    let elapsed = begun.elapsed();

    let overlaps = std::fs::read_to_string(dir.path().join("overlaps")).unwrap_or_default();
    assert!(
        overlaps.is_empty(),
        "critical sections overlapped:\n{overlaps}"
    );
    let counter: usize = std::fs::read_to_string(dir.path().join("counter"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(
        counter,
        WORKERS * RUNS,
        "a lost update: the counter says {counter}"
    );
    let entered = std::fs::read_to_string(dir.path().join("entered")).unwrap();
    assert_eq!(entered.lines().count(), WORKERS * RUNS);
    let first_entry: u128 = entered
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1)?.parse().ok())
        .min()
        .expect("entry times");
    let released_ns = released_at
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let wake = Duration::from_nanos(first_entry.saturating_sub(released_ns) as u64);
    println!(
        "processes: {} runs by {WORKERS} concurrent workers through seeds {seeds:?} (lock on \
         {owner}): 0 overlaps, counter {counter}; all {WORKERS} processes waited on the test's \
         hold (TTL {ttl:?}), the first entered {} after its release; {elapsed:?} in all, {:.1} \
         processes running on average",
        WORKERS * RUNS,
        millis(wake),
        busy.as_secs_f64() / elapsed.as_secs_f64(),
    );
    assert!(
        wake < 5 * SEC,
        "the first waiting process entered {wake:?} after the release: no wake-up"
    );
    assert!(
        elapsed < 60 * SEC,
        "liveness: {} runs took {elapsed:?}",
        WORKERS * RUNS
    );
    // Released, not left to expire.
    let left = scan(cluster, owner, &format!("{prefix}:*"));
    assert!(left.is_empty(), "keys left on {owner}: {left:?}");
}

// ---------------------------------------------------------------------------------------
// 2. Locks over all slots
// ---------------------------------------------------------------------------------------

/// 3000 locks from one client over all three primaries: each is held (another client's
/// try fails; the key is on the primary that serves its slot, with the holder's count
/// (read in either form of the lock) and a TTL), and after releasing them no key of the
/// prefix is left on any node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_locks_over_every_primary() {
    let cluster = topology::shared_cluster();
    let seeds = cluster.seeds();
    let map = cluster.slot_map();
    let prefix = "cl-spread";
    const N: usize = 3000;
    let (names, per_primary) = names_over_all_primaries(&map, prefix, "spread", N);
    let slots: BTreeSet<u16> = names
        .iter()
        .map(|n| topology::slot_of(&key_of(prefix, n)))
        .collect();
    let a = connect(&seeds, prefix, 30 * SEC).await;
    let b = connect(&seeds, prefix, 30 * SEC).await;

    // Acquire all, 30 tasks of 100 locks each.
    let begun = Instant::now();
    let mut tasks = JoinSet::new();
    for chunk in names.chunks(100) {
        let chunk = chunk.to_vec();
        let a = a.clone();
        tasks.spawn(async move {
            let mut guards = Vec::new();
            for name in chunk {
                let guard = a
                    .lock(&name)
                    .unwrap()
                    .try_acquire()
                    .await
                    .unwrap_or_else(|err| panic!("acquire {name}: {err}"))
                    .unwrap_or_else(|| panic!("{name} is held by someone else"));
                guards.push(guard);
            }
            guards
        });
    }
    let mut guards: Vec<LockGuard> = Vec::new();
    while let Some(chunk) = tasks.join_next().await {
        guards.extend(chunk.unwrap());
    }
    let acquire_time = begun.elapsed();
    assert_eq!(guards.len(), N);
    assert_eq!(a.held_count(), N);

    // Another client cannot take any of a sample (one in 20).
    for guard in guards.iter().step_by(20) {
        let other = b.lock(guard.name()).unwrap().try_acquire().await.unwrap();
        assert!(
            other.is_none(),
            "{} was taken by a second client",
            guard.name()
        );
    }

    // Each key is on the primary serving its slot, with the holder's count and a TTL (a
    // first hold is the string form: `common::lock_hget` reads it as the hash's count 1).
    let mut by_node: BTreeMap<u16, Vec<(String, String)>> = BTreeMap::new();
    for guard in &guards {
        let key = key_of(prefix, guard.name());
        by_node
            .entry(primary_in(&map, &key))
            .or_default()
            .push((key, guard.owner().to_owned()));
    }
    for (&port, entries) in &by_node {
        let mut conn = cluster.node_conn(port);
        let mut counts = redis::pipe();
        let mut ttls = redis::pipe();
        for (key, owner) in entries {
            counts.add_command(common::lock_hget(key, owner));
            ttls.cmd("PTTL").arg(key);
        }
        let counts: Vec<Option<u64>> = counts.query(&mut conn).unwrap();
        let ttls: Vec<i64> = ttls.query(&mut conn).unwrap();
        for (((key, _), count), ttl) in entries.iter().zip(&counts).zip(&ttls) {
            assert_eq!(*count, Some(1), "{key} on {port}: holder's count");
            assert!((1..=30_000).contains(ttl), "{key} on {port}: PTTL {ttl}");
        }
    }

    // Release all.
    let begun = Instant::now();
    let mut releases = JoinSet::new();
    let mut guards = guards.into_iter();
    loop {
        let chunk: Vec<LockGuard> = guards.by_ref().take(100).collect();
        if chunk.is_empty() {
            break;
        }
        releases.spawn(async move {
            for guard in chunk {
                let name = guard.name().to_owned();
                guard
                    .release()
                    .await
                    .unwrap_or_else(|err| panic!("release {name}: {err}"));
            }
        });
    }
    while let Some(done) = releases.join_next().await {
        done.unwrap();
    }
    let release_time = begun.elapsed();
    assert_eq!(a.held_count(), 0);

    // Nothing of the prefix is left anywhere (replicas follow their primaries).
    let pattern = format!("{prefix}:*");
    let clean = common::eventually(5 * SEC, || async {
        cluster
            .ports()
            .iter()
            .all(|&port| scan(cluster, port, &pattern).is_empty())
    })
    .await;
    let leftovers: Vec<(u16, usize)> = cluster
        .ports()
        .iter()
        .map(|&port| (port, scan(cluster, port, &pattern).len()))
        .collect();
    assert!(clean, "keys left after releasing everything: {leftovers:?}");
    println!(
        "spread: {N} locks in {} slots, per primary {per_primary:?}; acquired in {acquire_time:?} \
         ({:.0}/s), released in {release_time:?} ({:.0}/s); nothing left on any of 6 nodes",
        slots.len(),
        N as f64 / acquire_time.as_secs_f64(),
        N as f64 / release_time.as_secs_f64(),
    );
}

// ---------------------------------------------------------------------------------------
// 3. Waiting and hand-off across clients
// ---------------------------------------------------------------------------------------

/// Client A holds a lock with a 30 s watchdog lease; client B waits in `acquire()`. When A
/// releases, B must get the lock within 5 s: B would otherwise sleep for the lock's TTL
/// (~30 s), so only a sharded wake-up explains a fast hand-off. Then the same with 60
/// locks over all primaries and one waiter each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releases_wake_waiters_of_another_client() {
    let cluster = topology::shared_cluster();
    let seeds = cluster.seeds();
    let map = cluster.slot_map();
    let prefix = "cl-handoff";
    let a = connect(&seeds, prefix, 30 * SEC).await;
    let b = connect(&seeds, prefix, 30 * SEC).await;

    // One lock, one waiter.
    let lock_a = a.lock("one").unwrap();
    let held = lock_a.acquire().await.unwrap();
    let lock_b = b.lock("one").unwrap();
    let waiter = tokio::spawn(async move {
        let guard = lock_b.acquire().await;
        (guard, Instant::now())
    });
    let subscribed = common::eventually(5 * SEC, || async {
        b.waiting_channels() == 1 && lock_a.waiting_clients().await.unwrap() == 1
    })
    .await;
    assert!(
        subscribed,
        "B's wait is not visible: {} local channels, SHARDNUMSUB {}",
        b.waiting_channels(),
        lock_a.waiting_clients().await.unwrap()
    );
    // Let B fall asleep.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ttl = lock_a.remaining_ttl().await.unwrap().expect("held");
    assert!(
        ttl > 20 * SEC,
        "TTL {ttl:?}: the hand-off would not prove a wake-up"
    );
    let released_at = Instant::now();
    held.release().await.unwrap();
    let (guard, acquired_at) = tokio::time::timeout(20 * SEC, waiter)
        .await
        .expect("liveness: B acquired within 20 s of the release")
        .unwrap();
    let guard = guard.unwrap();
    let latency = acquired_at - released_at;
    println!(
        "hand-off: one waiter in another client got the lock {} after the release (lock on \
         {}, TTL was {ttl:?})",
        millis(latency),
        primary_in(&map, lock_a.key())
    );
    assert!(
        latency < 5 * SEC,
        "hand-off took {latency:?}: no wake-up arrived"
    );

    // A force-unlock wakes the waiter too (force_unlock.lua publishes on the sharded
    // channel): A now waits on B's hold, and a third party deletes it.
    let again = lock_a.clone();
    let waiter = tokio::spawn(async move {
        let guard = again.acquire().await;
        (guard, Instant::now())
    });
    let waiting = common::eventually(5 * SEC, || async { a.waiting_channels() == 1 }).await;
    assert!(waiting, "A is not waiting");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = connect(&seeds, prefix, 30 * SEC).await;
    let forced_at = Instant::now();
    assert!(third.lock("one").unwrap().force_unlock().await.unwrap());
    let (taken, acquired_at) = tokio::time::timeout(20 * SEC, waiter)
        .await
        .expect("liveness: A acquired within 20 s of the force-unlock")
        .unwrap();
    let force_latency = acquired_at - forced_at;
    println!(
        "hand-off: a waiter got the lock {} after a third client's force_unlock",
        millis(force_latency)
    );
    assert!(
        force_latency < 5 * SEC,
        "force-unlock hand-off took {force_latency:?}: no wake-up arrived"
    );
    let released = guard.release().await;
    assert!(
        matches!(
            released,
            Err(Error::LockLost {
                reason: LostReason::OwnerFieldGone,
                ..
            })
        ),
        "B's release after the force-unlock: {released:?}"
    );
    taken.unwrap().release().await.unwrap();
    let unsubscribed = common::eventually(5 * SEC, || async {
        a.waiting_channels() == 0
            && b.waiting_channels() == 0
            && lock_a.waiting_clients().await.unwrap() == 0
    })
    .await;
    assert!(unsubscribed, "still subscribed after acquiring");

    // Many locks over all primaries, one waiter each.
    const N: usize = 60;
    let (names, per_primary) = names_over_all_primaries(&map, prefix, "many", N);
    let mut held = Vec::new();
    for name in &names {
        held.push(a.lock(name).unwrap().acquire().await.unwrap());
    }
    let mut waiters = JoinSet::new();
    for name in &names {
        let lock = b.lock(name).unwrap();
        waiters.spawn(async move {
            let guard = lock.acquire().await.unwrap();
            (guard, Instant::now())
        });
    }
    let subscribed = common::eventually(10 * SEC, || async { b.waiting_channels() == N }).await;
    assert!(
        subscribed,
        "{} of {N} channels subscribed",
        b.waiting_channels()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released_at = Instant::now();
    let mut releases = JoinSet::new();
    for guard in held {
        releases.spawn(guard.release());
    }
    while let Some(done) = releases.join_next().await {
        done.unwrap().unwrap();
    }
    let released_all = released_at.elapsed();
    let mut latencies = Vec::new();
    let mut guards = Vec::new();
    let deadline = tokio::time::Instant::now() + 20 * SEC;
    while let Some(done) = tokio::time::timeout_at(deadline, waiters.join_next())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "liveness: {} of {N} waiters still waiting after 20 s",
                waiters.len()
            )
        })
    {
        let (guard, at) = done.unwrap();
        latencies.push(at - released_at);
        guards.push(guard);
    }
    latencies.sort();
    let max = *latencies.last().unwrap();
    println!(
        "hand-off: {N} waiters on {N} locks (per primary {per_primary:?}) all acquired; \
         releases took {}, acquisitions after the first release: median {}, max {}",
        millis(released_all),
        millis(latencies[N / 2]),
        millis(max)
    );
    assert!(
        max < 5 * SEC,
        "a hand-off took {max:?}: a wake-up was missed"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------
// 4. Watchdog over thousands of locks
// ---------------------------------------------------------------------------------------

/// 2400 locks over all primaries with a 2 s watchdog lease, held for 6.5 s (3x the
/// lease): none is lost, every key still has its holder and a TTL within the lease, and
/// each renewal tick sends one script call per slot (a script may only touch one slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_thousands_of_locks_across_shards() {
    let cluster = topology::shared_cluster();
    let seeds = cluster.seeds();
    let map = cluster.slot_map();
    let prefix = "cl-watchdog";
    const N: usize = 2400;
    let lease = 2 * SEC;
    let (names, per_primary) = names_over_all_primaries(&map, prefix, "wd", N);
    let slots: BTreeSet<u16> = names
        .iter()
        .map(|n| topology::slot_of(&key_of(prefix, n)))
        .collect();
    let client = connect(&seeds, prefix, lease).await;

    let mut tasks = JoinSet::new();
    for chunk in names.chunks(200) {
        let chunk = chunk.to_vec();
        let client = client.clone();
        tasks.spawn(async move {
            let mut guards = Vec::new();
            for name in chunk {
                guards.push(client.lock(&name).unwrap().acquire().await.unwrap());
            }
            guards
        });
    }
    let mut guards: Vec<LockGuard> = Vec::new();
    while let Some(chunk) = tasks.join_next().await {
        guards.extend(chunk.unwrap());
    }
    let held_since = Instant::now();
    let before = client.watchdog_stats();
    let mut worst_remaining = lease;
    while held_since.elapsed() < lease * 3 + lease / 4 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let lost: Vec<&str> = guards
            .iter()
            .filter(|g| g.is_lost())
            .map(|g| g.name())
            .collect();
        assert!(
            lost.is_empty(),
            "{} locks lost, e.g. {:?}",
            lost.len(),
            &lost[..lost.len().min(5)]
        );
        worst_remaining = guards
            .iter()
            .map(LockGuard::remaining_lease)
            .min()
            .unwrap()
            .min(worst_remaining);
    }
    let stats = client.watchdog_stats();

    // In Redis: every key still there, with the holder and a TTL within the lease.
    let mut by_node: BTreeMap<u16, Vec<(String, String)>> = BTreeMap::new();
    for guard in &guards {
        let key = key_of(prefix, guard.name());
        by_node
            .entry(primary_in(&map, &key))
            .or_default()
            .push((key, guard.owner().to_owned()));
    }
    let mut min_pttl = i64::MAX;
    for (&port, entries) in &by_node {
        let mut conn = cluster.node_conn(port);
        let mut counts = redis::pipe();
        let mut ttls = redis::pipe();
        for (key, owner) in entries {
            counts.add_command(common::lock_hget(key, owner));
            ttls.cmd("PTTL").arg(key);
        }
        let counts: Vec<Option<u64>> = counts.query(&mut conn).unwrap();
        let ttls: Vec<i64> = ttls.query(&mut conn).unwrap();
        for (((key, _), count), ttl) in entries.iter().zip(&counts).zip(&ttls) {
            assert_eq!(*count, Some(1), "{key} on {port} lost its holder");
            assert!((1..=2000).contains(ttl), "{key} on {port}: PTTL {ttl}");
            min_pttl = min_pttl.min(*ttl);
        }
    }
    println!(
        "watchdog: {N} locks in {} slots (per primary {per_primary:?}), lease {lease:?}, held \
         {:?}: 0 lost; stats {stats:?}; during the hold {} ticks, {} calls, {} renewals; last \
         tick {} calls for {} locks in {}; lowest remaining lease seen {worst_remaining:?}, \
         lowest PTTL at the end {min_pttl} ms",
        slots.len(),
        held_since.elapsed(),
        stats.ticks - before.ticks,
        stats.renew_calls - before.renew_calls,
        stats.renewed - before.renewed,
        stats.last_tick_calls,
        stats.last_tick_locks,
        millis(Duration::from_micros(stats.last_tick_micros)),
    );
    assert_eq!(stats.lost, 0, "{stats:?}");
    // Refused, not failed: a call that timed out on this 2-core machine is retried (the
    // holds' PTTLs above say whether renewal kept up).
    assert_eq!(stats.refused_calls, 0, "{stats:?}");
    assert_eq!(stats.last_tick_locks, N as u64, "{stats:?}");
    // One call per 500 locks of each primary, whatever their slots (renew.lua with the
    // keys in ARGV under allow-cross-slot-keys), not one per slot.
    let per_node_calls: u64 = per_primary
        .values()
        .map(|n| (*n as u64).div_ceil(redis_locks::DEFAULT_RENEW_BATCH as u64))
        .sum();
    assert_eq!(
        stats.last_tick_calls,
        per_node_calls,
        "one call per primary and 500 locks expected ({} slots): {stats:?}",
        slots.len()
    );
    // 6.5 s at a renewal every 667 ms: at least 5 full rounds must have happened (the
    // keys' TTLs above already show that renewals reached Redis).
    assert!(
        stats.renewed - before.renewed >= 5 * N as u64,
        "too few renewals: {stats:?}"
    );

    let mut releases = JoinSet::new();
    let mut guards = guards.into_iter();
    loop {
        let chunk: Vec<LockGuard> = guards.by_ref().take(200).collect();
        if chunk.is_empty() {
            break;
        }
        releases.spawn(async move {
            for guard in chunk {
                guard.release().await.unwrap();
            }
        });
    }
    while let Some(done) = releases.join_next().await {
        done.unwrap();
    }
    assert_eq!(client.held_count(), 0);
}

// ---------------------------------------------------------------------------------------
// 5. Failover while held
// ---------------------------------------------------------------------------------------

/// What one failover scenario measured.
#[derive(Debug)]
struct FailoverReport {
    failover: Duration,
    /// A's owner field on the promoted replica right after the failover, and its PTTL.
    promoted_copy: (Option<u64>, i64),
    /// When A's lost signal fired (after the kill) and why.
    a_lost: Option<(Duration, Option<LostReason>)>,
    /// When B acquired (after the kill); A's view at that moment (lost, remaining lease).
    b_acquired: Option<(Duration, bool, Duration)>,
    /// When A kept its hold: the hand-off to B after A's release, and the TTL then.
    handoff_after_release: Option<(Duration, Duration)>,
    /// When A kept its hold: its remaining lease two leases after the failover.
    a_left_at_end: Option<Duration>,
    noscript_on_new_primary: u64,
    a_stats: redis_locks::WatchdogStats,
}

/// In a private cluster: A holds a lock with a watchdog lease of `lease` (with replica
/// acknowledgement when `ack` is set), B waits for it in `acquire()`, and the lock's
/// primary is SIGKILLed. Watches A's lost signal and B's acquisition. The invariant
/// checked in every case: when B's acquire returns, A already knows it lost the lock.
/// Liveness: B gets the lock within 20 s of the kill, or (if A kept it) within 20 s of
/// A's release.
async fn failover_while_held(
    label: &str,
    lease: Duration,
    ack: Option<Duration>,
) -> FailoverReport {
    let cluster = Cluster::start();
    let seeds = cluster.seeds();
    println!(
        "{label}: private cluster started in {:?}",
        cluster.startup_time()
    );
    let prefix = "cl-failover";
    let mut builder = LockClient::builder_cluster(&seeds)
        .prefix(prefix)
        .watchdog_timeout(lease);
    if let Some(timeout) = ack {
        builder = builder.min_replicas(1, timeout);
    }
    let a = builder.connect().await.unwrap();
    let b = connect(&seeds, prefix, lease).await;
    let lock_a = a.lock("held-through-failover").unwrap();
    let key = lock_a.key().to_owned();
    let primary = cluster.primary_for_key(&key);
    let replica = match cluster.replicas_of(primary)[..] {
        [replica] => replica,
        ref other => panic!("{primary} has replicas {other:?}"),
    };

    let guard = lock_a.acquire().await.expect("A acquires");
    let owner = guard.owner().to_owned();
    let a_lost_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    {
        let token = guard.lost_token();
        let at = a_lost_at.clone();
        tokio::spawn(async move {
            token.cancelled().await;
            *at.lock() = Some(Instant::now());
        });
    }
    // The kill must test the client's failover handling, not the replication race:
    // wait until the replica has A's hold (with WAIT it has it already).
    let replicated_after = Instant::now();
    let on_replica = common::eventually(5 * SEC, || async {
        hget_on(&cluster, replica, &key, &owner).0 == Some(1)
    })
    .await;
    assert!(on_replica, "the replica {replica} never got A's hold");
    let replicated_after = replicated_after.elapsed();

    // A's guard, where B's waiter can look at it the moment it acquires (`None` once the
    // test has taken it out to release it).
    let a_slot: Arc<Mutex<Option<LockGuard>>> = Arc::new(Mutex::new(Some(guard)));
    let lock_b = b.lock("held-through-failover").unwrap();
    let a_view = a_slot.clone();
    let waiter = tokio::spawn(async move {
        let result = lock_b.acquire().await;
        let at = Instant::now();
        // A's belief at the moment B holds: (lost, remaining lease).
        let view = a_view
            .lock()
            .as_ref()
            .map(|a| (a.is_lost(), a.remaining_lease()));
        (result, at, view)
    });
    let waiting = common::eventually(5 * SEC, || async { b.waiting_channels() == 1 }).await;
    assert!(waiting, "B is not waiting");
    tokio::time::sleep(Duration::from_millis(200)).await;

    let killed_at = Instant::now();
    cluster.kill(primary);
    let failover = cluster.wait_for_failover(primary, &key, 20 * SEC);
    assert_eq!(failover.new_primary, replica);
    let promoted_copy = hget_on(&cluster, replica, &key, &owner);
    println!(
        "{label}: killed primary {primary}; replica {replica} had A's hold {} after the \
         acquire; failover complete after {:?}; the promoted copy: count {:?}, PTTL {} ms",
        millis(replicated_after),
        failover.elapsed,
        promoted_copy.0,
        promoted_copy.1
    );

    // Watch until B acquires, or for 1.5 leases after the failover: by then A's lease as
    // of the kill has run out, so A has either renewed on the new primary or been told.
    let renewed_at_failover = a.watchdog_stats().renewed;
    let watch_until = Instant::now() + lease * 3 / 2;
    let mut waiter = Some(waiter);
    let mut b_acquired = None;
    let mut b_guard = None;
    while Instant::now() < watch_until {
        if waiter.as_ref().is_some_and(|w| w.is_finished()) {
            let (result, at, view) = waiter.take().unwrap().await.unwrap();
            b_guard = Some(result.expect("B's acquire failed"));
            let (a_lost, a_left) = view.expect("A's guard is still in its slot");
            b_acquired = Some((at - killed_at, a_lost, a_left));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut handoff_after_release = None;
    let mut a_reason = None;
    let mut a_left_at_end = None;
    // Before any release (which may end the signal's task too).
    let a_lost_at = *a_lost_at.lock();
    if let Some(waiter) = waiter {
        // B has not got it within 1.5 leases: A must still hold it, and know it.
        let guard = a_slot.lock().take().expect("A's guard");
        assert!(
            !guard.is_lost(),
            "{label}: A lost the lock ({:?}) but B did not get it within 1.5 leases of the \
             failover",
            guard.lost_reason()
        );
        let renewed = a.watchdog_stats().renewed - renewed_at_failover;
        assert!(
            renewed > 0,
            "{label}: A kept the lock without a renewal after the failover"
        );
        let (count, pttl) = hget_on(&cluster, replica, &key, &owner);
        assert!(
            count == Some(1) && pttl > 0,
            "{label}: A believes, Redis has {count:?}, PTTL {pttl}"
        );
        a_left_at_end = Some(guard.remaining_lease());
        let ttl = lock_a.remaining_ttl().await.unwrap().unwrap_or_default();
        let released_at = Instant::now();
        guard
            .release()
            .await
            .expect("A releases on the new primary");
        let (result, at, view) = tokio::time::timeout(20 * SEC, waiter)
            .await
            .expect("liveness: B acquires within 20 s of A's release")
            .unwrap();
        b_guard = Some(result.expect("B's acquire failed"));
        // A's guard was out of its slot (being released) before B could acquire.
        assert!(view.is_none(), "B acquired before A's release: {view:?}");
        b_acquired = Some((at - killed_at, true, Duration::ZERO));
        handoff_after_release = Some((at - released_at, ttl));
    } else {
        let (at, a_lost, a_left) = b_acquired.unwrap();
        let guard = a_slot.lock().take().expect("A's guard");
        a_reason = guard.lost_reason();
        assert!(
            a_lost,
            "{label}: B acquired {at:?} after the kill while A still believed it held the lock \
             ({a_left:?} of lease left)"
        );
        assert!(
            at < 20 * SEC,
            "liveness: B acquired only {at:?} after the kill"
        );
        let release = guard.release().await;
        assert!(
            matches!(release, Err(Error::LockLost { .. })),
            "A's release after its loss: {release:?}"
        );
    }
    let a_lost = a_lost_at.map(|at| (at - killed_at, a_reason));
    let b_guard = b_guard.unwrap();
    b_guard.release().await.expect("B releases");
    let report = FailoverReport {
        failover: failover.elapsed,
        promoted_copy,
        a_lost,
        b_acquired,
        handoff_after_release,
        a_left_at_end,
        noscript_on_new_primary: error_count(&cluster, replica, "NOSCRIPT"),
        a_stats: a.watchdog_stats(),
    };
    print_report(label, &report);
    // Acquire and release still work on the new primary.
    let again = b.lock("held-through-failover").unwrap().try_acquire().await;
    let again = again.expect("acquire after the failover").expect("free");
    again.release().await.unwrap();
    if ack.is_some() {
        // The new primary has no replica (its old primary is dead): A cannot be acknowledged.
        let result = a.lock("held-through-failover").unwrap().try_acquire().await;
        assert!(
            matches!(result, Err(Error::NotReplicated { acked: Some(0), .. })),
            "{label}: acquire with the only replica dead: {result:?}"
        );
        // The old primary comes back as the new primary's replica: acknowledged again.
        let begun = Instant::now();
        cluster.restart(primary);
        cluster.wait_until_stable(20 * SEC);
        assert_eq!(cluster.replicas_of(replica), vec![primary]);
        let rejoined = begun.elapsed();
        let guard = a.lock("held-through-failover").unwrap().try_acquire().await;
        let guard = guard
            .expect("acknowledged once the old primary is back")
            .expect("free");
        guard.release().await.unwrap();
        println!(
            "{label}: without a replica A's acquire was NotReplicated; {primary} rejoined as \
             replica of {replica} in {rejoined:?}, then A's acquire was acknowledged"
        );
    }
    report
}

fn print_report(label: &str, report: &FailoverReport) {
    let kept = report.handoff_after_release.is_some();
    println!(
        "{label}: failover {:?}; promoted copy of A's hold: count {:?}, PTTL {} ms; A {}; B \
         acquired {}; {}NOSCRIPT replies on the new primary: {}; A's watchdog: {:?}",
        report.failover,
        report.promoted_copy.0,
        report.promoted_copy.1,
        match report.a_lost {
            Some((at, reason)) =>
                format!("was told it lost the lock {at:?} after the kill ({reason:?})"),
            None if kept => format!(
                "kept the lock through the failover (never told it was lost; {:?} of lease \
                 left 1.5 leases after the failover)",
                report.a_left_at_end.unwrap_or_default()
            ),
            None => "was never told".into(),
        },
        match report.b_acquired {
            Some((at, _, _)) => format!("{at:?} after the kill"),
            None => "never".into(),
        },
        match report.handoff_after_release {
            Some((latency, ttl)) => format!(
                "hand-off after A's release on the new primary: {} (TTL then {ttl:?}); ",
                millis(latency)
            ),
            None => String::new(),
        },
        report.noscript_on_new_primary,
        report.a_stats,
    );
}

/// Without replica acknowledgement: whatever happens to A's hold (it survives if a
/// renewal reaches the new primary in time, else A is told it lost it when its lease
/// runs out), B gets the lock, and never while A believes it holds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_while_held_without_replica_ack() {
    let label = "failover (no ack, lease 3 s)";
    let report = failover_while_held(label, 3 * SEC, None).await;
    assert!(report.b_acquired.is_some());
    // The promoted replica had no scripts: the library fell back to EVAL.
    assert!(report.noscript_on_new_primary > 0, "{report:?}");
}

/// With `min_replicas(1, 1 s)`: the acquisition reached the replica before A was told it
/// holds the lock, so the promoted replica has it, A keeps it (its 7.5 s lease leaves a
/// renewal after a failover of up to ~4.5 s) and B gets it only after A releases. Then,
/// with the new primary's only replica dead, A's acquire is `NotReplicated`, and once the
/// old primary has rejoined as a replica it is acknowledged again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_while_held_with_min_replicas() {
    let label = "failover (min_replicas 1, lease 7.5 s)";
    let report = failover_while_held(label, Duration::from_millis(7500), Some(SEC)).await;
    assert_eq!(
        report.promoted_copy.0,
        Some(1),
        "the promoted replica lacks A's acknowledged hold: {report:?}"
    );
    assert!(
        report.a_lost.is_none() && report.handoff_after_release.is_some(),
        "A did not keep its replicated hold through the failover: {report:?}"
    );
}

// ---------------------------------------------------------------------------------------
// 6. Replica acknowledgement failure
// ---------------------------------------------------------------------------------------

/// In a private cluster, one primary's replica is killed. A `min_replicas(1, 300 ms)`
/// acquire of a lock on that primary fails with `NotReplicated { acked: Some(0) }` and
/// leaves nothing held; a lock on another primary (replica alive) is acquired as usual.
/// The binary does the same: exit 75 without running the command, and 0 on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_replica_fails_min_replicas_and_leaves_nothing_held() {
    let cluster = Cluster::start();
    let seeds = cluster.seeds();
    println!(
        "replica ack: private cluster started in {:?}",
        cluster.startup_time()
    );
    let map = cluster.slot_map();
    let prefix = "cl-ack";
    let acked = LockClient::builder_cluster(&seeds)
        .prefix(prefix)
        .min_replicas(1, Duration::from_millis(300))
        .connect()
        .await
        .unwrap();
    let plain = connect(&seeds, prefix, 30 * SEC).await;

    // One name on the primary whose replica dies, one on another primary.
    let (names, _) = names_over_all_primaries(&map, prefix, "ack", 30);
    let victim_primary = primary_in(&map, &key_of(prefix, &names[0]));
    let other = names
        .iter()
        .find(|n| primary_in(&map, &key_of(prefix, n)) != victim_primary)
        .unwrap()
        .clone();
    let victim = names[0].clone();

    // Control: with every replica alive, both are acknowledged.
    for name in [&victim, &other] {
        let begun = Instant::now();
        let guard = acked.lock(name).unwrap().acquire().await.unwrap();
        println!(
            "replica ack: {name} acknowledged in {}",
            millis(begun.elapsed())
        );
        guard.release().await.unwrap();
    }

    let replica = cluster.replicas_of(victim_primary)[0];
    cluster.kill(replica);
    // The primary sees the replica's link close at once.
    let gone = common::eventually(5 * SEC, || async {
        let info = cluster.redis_cli(victim_primary, &["INFO", "replication"]);
        info.contains("connected_slaves:0")
    })
    .await;
    assert!(gone, "primary {victim_primary} still counts its replica");

    let begun = Instant::now();
    let result = acked.lock(&victim).unwrap().acquire().await;
    let took = begun.elapsed();
    match &result {
        Err(Error::NotReplicated {
            acked: Some(0),
            wanted: 1,
            timeout,
            ..
        }) if *timeout == Duration::from_millis(300) => {}
        other => panic!("expected NotReplicated with 0 of 1 acks, got {other:?}"),
    }
    println!(
        "replica ack: with replica {replica} of {victim_primary} dead: {} after {}",
        result.unwrap_err(),
        millis(took)
    );
    assert!(took < 5 * SEC, "liveness: the failed acquire took {took:?}");
    assert_eq!(acked.held_count(), 0);
    // Nothing is left held: the key is gone and another client takes the lock at once.
    let left: i64 = redis::cmd("EXISTS")
        .arg(key_of(prefix, &victim))
        .query(&mut cluster.node_conn(victim_primary))
        .unwrap();
    assert_eq!(left, 0, "the unacknowledged hold was left in Redis");
    let taken = plain.lock(&victim).unwrap().try_acquire().await.unwrap();
    taken
        .expect("another client takes the lock")
        .release()
        .await
        .unwrap();
    // The other primary still acknowledges.
    let guard = acked.lock(&other).unwrap().acquire().await.unwrap();
    guard.release().await.unwrap();

    // The binary: exit 75 and the command does not run; on the other primary it runs.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ran");
    let out = output(
        cli(&seeds)
            .args([
                "--prefix",
                prefix,
                "--min-replicas",
                "1",
                "--replica-timeout",
                "300ms",
            ])
            .args(["run", &victim, "--"])
            .arg("touch")
            .arg(&file),
    )
    .await;
    println!(
        "replica ack: `redis-locks --cluster --min-replicas 1 run {victim}` exited {}: {}",
        code(&out),
        stderr(&out).trim()
    );
    assert_eq!(code(&out), NOT_ACQUIRED, "{}", stderr(&out));
    assert!(
        !file.exists(),
        "the command ran without an acknowledged lock"
    );
    let left: i64 = redis::cmd("EXISTS")
        .arg(key_of(prefix, &victim))
        .query(&mut cluster.node_conn(victim_primary))
        .unwrap();
    assert_eq!(left, 0, "the binary left the unacknowledged hold in Redis");
    let out = output(
        cli(&seeds)
            .args([
                "--prefix",
                prefix,
                "--min-replicas",
                "1",
                "--replica-timeout",
                "300ms",
            ])
            .args(["run", &other, "--"])
            .arg("touch")
            .arg(&file),
    )
    .await;
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(file.exists());
}

// ---------------------------------------------------------------------------------------
// 7. NOSCRIPT
// ---------------------------------------------------------------------------------------

/// `SCRIPT FLUSH` on every node while locks on all three primaries are held by a client
/// with a 600 ms watchdog lease: renewals, re-entry, a wake-up hand-off, release and a
/// fresh acquire all still work, and each primary answered `NOSCRIPT` at least once (so
/// the recovery path did run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn script_flush_on_every_node_is_survived() {
    let cluster = topology::shared_cluster();
    let seeds = cluster.seeds();
    let map = cluster.slot_map();
    let prefix = "cl-noscript";
    let lease = Duration::from_millis(600);
    let a = connect(&seeds, prefix, lease).await;
    let b = connect(&seeds, prefix, lease).await;
    // One name per primary.
    let (names, _) = names_over_all_primaries(&map, prefix, "ns", 30);
    let mut one_per_primary: BTreeMap<u16, String> = BTreeMap::new();
    for name in names {
        one_per_primary
            .entry(primary_in(&map, &key_of(prefix, &name)))
            .or_insert(name);
    }
    let mut guards = Vec::new();
    for name in one_per_primary.values() {
        guards.push(a.lock(name).unwrap().acquire().await.unwrap());
    }
    let before: BTreeMap<u16, u64> = one_per_primary
        .keys()
        .map(|&p| (p, error_count(cluster, p, "NOSCRIPT")))
        .collect();
    for port in cluster.ports() {
        let reply = cluster.redis_cli(port, &["SCRIPT", "FLUSH"]);
        assert!(reply.contains("OK"), "SCRIPT FLUSH on {port}: {reply}");
    }
    // Three leases: renewals must go through EVAL after the flush.
    tokio::time::sleep(lease * 3).await;
    for guard in &guards {
        assert!(!guard.is_lost(), "{} lost after SCRIPT FLUSH", guard.name());
    }
    for port in cluster.ports() {
        cluster.redis_cli(port, &["SCRIPT", "FLUSH"]);
    }
    // Re-entry, then a hand-off to a waiter in B, after another flush.
    let mut waiters = JoinSet::new();
    for (guard, name) in guards.iter().zip(one_per_primary.values()) {
        let nested = guard.reenter().await.unwrap();
        assert_eq!(nested.hold_count(), 2);
        nested.release().await.unwrap();
        let lock = b.lock(name).unwrap();
        waiters.spawn(async move { lock.acquire().await.unwrap() });
    }
    let waiting = common::eventually(5 * SEC, || async { b.waiting_channels() == 3 }).await;
    assert!(waiting, "B's waiters are not subscribed");
    for port in cluster.ports() {
        cluster.redis_cli(port, &["SCRIPT", "FLUSH"]);
    }
    for guard in guards {
        guard.release().await.unwrap();
    }
    let mut handed = Vec::new();
    while let Some(guard) = tokio::time::timeout(10 * SEC, waiters.join_next())
        .await
        .expect("liveness: B's waiters acquired within 10 s")
    {
        handed.push(guard.unwrap());
    }
    for guard in handed {
        guard.release().await.unwrap();
    }
    let after: BTreeMap<u16, u64> = one_per_primary
        .keys()
        .map(|&p| (p, error_count(cluster, p, "NOSCRIPT")))
        .collect();
    println!("noscript: NOSCRIPT replies per primary before {before:?}, after {after:?}");
    for (port, n) in &after {
        assert!(
            *n > before[port],
            "{port} never answered NOSCRIPT: the flush was not exercised"
        );
    }
    assert!(
        one_per_primary.values().all(|n| scan(
            cluster,
            primary_in(&map, &key_of(prefix, n)),
            &key_of(prefix, n)
        )
        .is_empty()),
        "keys left after the releases"
    );
}

// ---------------------------------------------------------------------------------------
// 8. Bad input
// ---------------------------------------------------------------------------------------

/// No seeds, a seed with a database number, a seed nothing listens on, and a seed that is
/// not a cluster node: typed errors, in time. A dead seed next to a live one is fine.
/// The binary: several `--url` without `--cluster` is a usage error (64).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cluster_input_is_a_typed_error() {
    let err = LockClient::builder_cluster(Vec::<String>::new())
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUrl(_)), "{err:?}");
    println!("bad input: no seeds: {err}");

    let err = LockClient::builder_cluster(["redis://127.0.0.1:7000/3"])
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidUrl(_)), "{err:?}");
    println!("bad input: seed /3: {err}");

    let dead = dead_port();
    let connect_timeout = 2 * SEC;
    let begun = Instant::now();
    let err = LockClient::builder_cluster([format!("redis://127.0.0.1:{dead}/")])
        .connect_timeout(connect_timeout)
        .connect()
        .await
        .unwrap_err();
    let took = begun.elapsed();
    match &err {
        Error::Connect { addr, .. } => {
            assert!(addr.contains(&format!("127.0.0.1:{dead}")), "{addr}")
        }
        other => panic!("expected Connect, got {other:?}"),
    }
    println!(
        "bad input: dead seed: {err} ({:?}) after {}",
        std::error::Error::source(&err).map(ToString::to_string),
        millis(took)
    );
    assert!(took < connect_timeout + SEC, "took {took:?}");

    // A plain (non-cluster) server as a seed.
    let single = common::RedisServer::start();
    let begun = Instant::now();
    let result = LockClient::builder_cluster([single.url()])
        .connect_timeout(connect_timeout)
        .connect()
        .await;
    let took = begun.elapsed();
    match &result {
        Err(Error::Connect { addr, source }) => {
            assert!(addr.contains(&single.port.to_string()), "{addr}");
            println!(
                "bad input: non-cluster seed: Connect after {}: {source}",
                millis(took)
            );
        }
        other => panic!("a non-cluster seed: expected Connect, got {other:?}"),
    }

    // A dead seed first, then a live one: the client connects and works.
    let cluster = topology::shared_cluster();
    let mut seeds = vec![format!("redis://127.0.0.1:{dead}/")];
    seeds.extend(cluster.seeds().into_iter().take(1));
    let client = connect(&seeds, "cl-bad", 30 * SEC).await;
    let guard = client.lock("works").unwrap().acquire().await.unwrap();
    guard.release().await.unwrap();

    // The binary.
    let urls = cluster.seeds();
    let out = output(
        Command::new(BIN)
            .env_remove("REDIS_URL")
            .args([
                "--url", &urls[0], "--url", &urls[1], "run", "x", "--", "true",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    )
    .await;
    println!(
        "bad input: two --url without --cluster: exit {}: {}",
        code(&out),
        stderr(&out).trim()
    );
    assert_eq!(code(&out), USAGE);
    assert!(stderr(&out).contains("--cluster"), "{}", stderr(&out));

    let out =
        output(cli(&["redis://127.0.0.1:7000/3".into()]).args(["run", "x", "--", "true"])).await;
    println!(
        "bad input: --cluster with a /3 seed: exit {}: {}",
        code(&out),
        stderr(&out).trim()
    );
    assert_eq!(code(&out), USAGE);

    let out =
        output(cli(&[format!("redis://127.0.0.1:{dead}/")]).args(["run", "x", "--", "true"])).await;
    println!(
        "bad input: --cluster with a dead seed: exit {}: {}",
        code(&out),
        stderr(&out).trim()
    );
    assert_eq!(code(&out), UNAVAILABLE);
    assert!(stderr(&out).contains(&dead.to_string()), "{}", stderr(&out));
}

/// A lock whose slot is being migrated (MIGRATING on its primary, IMPORTING on another)
/// and whose key is not on the old node: Redis answers `ASK`, and the client must follow
/// it (`ASKING` + the command on the new node) instead of failing. Acquire, a second
/// client's failed attempt, re-entry and release all go through the redirection; the hold
/// lives on the importing node. Then the slot is made stable again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_in_a_migrating_slot_follows_ask() {
    let cluster = topology::shared_cluster();
    let seeds = cluster.seeds();
    let map = cluster.slot_map();
    let prefix = "cl-ask";
    let name = "migrating";
    let key = key_of(prefix, name);
    let slot = topology::slot_of(&key);
    let source = primary_in(&map, &key);
    let target = *cluster
        .primaries()
        .iter()
        .find(|p| **p != source)
        .expect("another primary");
    let id = |port: u16| {
        cluster
            .redis_cli(port, &["CLUSTER", "MYID"])
            .trim()
            .to_owned()
    };
    let (source_id, target_id) = (id(source), id(target));
    let slot_text = slot.to_string();
    let set = |port: u16, args: &[&str]| {
        let mut all = vec!["CLUSTER", "SETSLOT", slot_text.as_str()];
        all.extend_from_slice(args);
        let reply = cluster.redis_cli(port, &all);
        assert!(reply.trim() == "OK", "SETSLOT {args:?} on {port}: {reply}");
    };
    set(target, &["IMPORTING", &source_id]);
    set(source, &["MIGRATING", &target_id]);

    let a = connect(&seeds, prefix, 30 * SEC).await;
    let b = connect(&seeds, prefix, 30 * SEC).await;
    let outcome = async {
        let guard = a.lock(name)?.acquire().await?;
        let held_elsewhere = b.lock(name)?.try_acquire().await?.is_some();
        let nested = guard.reenter().await?;
        let count = nested.hold_count();
        // The hold is on the importing node (reads there need ASKING too).
        let mut conn = cluster.node_conn(target);
        let (_, exists): (redis::Value, i64) = redis::pipe()
            .cmd("ASKING")
            .cmd("EXISTS")
            .arg(&key)
            .query(&mut conn)
            .map_err(|err| Error::InvalidConfig(err.to_string()))?;
        nested.release().await?;
        guard.release().await?;
        Ok::<_, Error>((held_elsewhere, count, exists))
    }
    .await;
    // Stable again, whatever happened.
    set(source, &["NODE", &source_id]);
    set(target, &["NODE", &source_id]);
    let (held_elsewhere, count, exists) = outcome.expect("lock operations during the migration");
    assert!(!held_elsewhere, "a second client acquired a held lock");
    assert_eq!(count, 2);
    assert_eq!(exists, 1, "the hold was not on the importing node");
    let mut conn = cluster.node_conn(target);
    let (_, left): (redis::Value, i64) = redis::pipe()
        .cmd("ASKING")
        .cmd("EXISTS")
        .arg(&key)
        .query(&mut conn)
        .unwrap();
    assert_eq!(left, 0, "the release left the key on the importing node");
    println!(
        "ASK: slot {slot} migrating {source} -> {target}; acquire, re-entry, a refused attempt and release followed ASK"
    );
}

/// renew.lua in its one-node form (keys in ARGV, any slots of the node): a key whose slot
/// the node does not serve is reported as elsewhere (-i), never as lost, and a held key
/// the node serves is renewed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_one_node_renewal_reports_keys_of_other_nodes_as_elsewhere() {
    let cluster = topology::shared_cluster();
    let seeds = cluster.seeds();
    let map = cluster.slot_map();
    let prefix = "cl-elsewhere";
    let client = connect(&seeds, prefix, 30 * SEC).await;
    let guard = client.lock("here").unwrap().acquire().await.unwrap();
    let key = key_of(prefix, "here");
    let home = primary_in(&map, &key);
    let other = *cluster.primaries().iter().find(|p| **p != home).unwrap();
    let script = redis::Script::new(include_str!("../lua/renew.lua"));
    let renew_on = |port: u16| -> Vec<i64> {
        let mut conn = cluster.node_conn(port);
        script
            .arg(5_000)
            .arg(1)
            .arg(guard.hold_id())
            .arg(&key)
            .invoke(&mut conn)
            .unwrap()
    };
    assert_eq!(renew_on(other), vec![-1], "a key of another node");
    assert_eq!(
        renew_on(home),
        Vec::<i64>::new(),
        "the held key on its node"
    );
    guard.release().await.unwrap();
}

/// A held lock whose slot is migrated to another primary while its watchdog runs (a
/// short lease, so several renewals happen after the move): it is never lost, and its
/// key keeps being renewed on the new primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_lock_survives_its_slot_moving_to_another_primary() {
    let cluster = tokio::task::block_in_place(Cluster::start);
    let seeds = cluster.seeds();
    let map = cluster.slot_map();
    let prefix = "cl-move";
    let lease = Duration::from_millis(900);
    let client = connect(&seeds, prefix, lease).await;
    let guard = client.lock("moving").unwrap().acquire().await.unwrap();
    let key = key_of(prefix, "moving");
    let slot = topology::slot_of(&key).to_string();
    let source = primary_in(&map, &key);
    let target = *cluster.primaries().iter().find(|p| **p != source).unwrap();
    let id = |port: u16| {
        cluster
            .redis_cli(port, &["CLUSTER", "MYID"])
            .trim()
            .to_owned()
    };
    let (source_id, target_id) = (id(source), id(target));
    let ok = |reply: String, what: &str| {
        assert!(
            reply.trim() == "OK" || reply.trim() == "NOKEY",
            "{what}: {reply}"
        )
    };
    tokio::time::sleep(lease).await;
    ok(
        cluster.redis_cli(
            target,
            &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &source_id],
        ),
        "importing",
    );
    ok(
        cluster.redis_cli(
            source,
            &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &target_id],
        ),
        "migrating",
    );
    let target_port = target.to_string();
    ok(
        cluster.redis_cli(
            source,
            &[
                "MIGRATE",
                "127.0.0.1",
                &target_port,
                "",
                "0",
                "5000",
                "KEYS",
                &key,
            ],
        ),
        "migrate",
    );
    for port in cluster.primaries() {
        ok(
            cluster.redis_cli(port, &["CLUSTER", "SETSLOT", &slot, "NODE", &target_id]),
            "node",
        );
    }
    let moved_at = Instant::now();
    // Several renewal periods after the move.
    tokio::time::sleep(4 * lease).await;
    assert!(
        !guard.is_lost(),
        "lost after its slot moved: {:?}",
        guard.lost_reason()
    );
    let mut conn = cluster.node_conn(target);
    let pttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut conn).unwrap();
    assert!(pttl > 0 && pttl <= 900, "PTTL on the new primary: {pttl}");
    let stats = client.watchdog_stats();
    println!(
        "slot {slot} moved {source} -> {target}; {:?} later the hold is current, PTTL {pttl} ms on the new primary; {stats:?}",
        moved_at.elapsed()
    );
    guard.release().await.unwrap();
    let exists: i64 = redis::cmd("EXISTS").arg(&key).query(&mut conn).unwrap();
    assert_eq!(exists, 0);
}

/// The count-down latch on a cluster: its key and its (sharded) channel share the name's
/// slot; a waiter in another client is woken by the opening count-down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_opens_across_clients_on_the_cluster() {
    let cluster = topology::shared_cluster();
    let seeds = cluster.seeds();
    let a = connect(&seeds, "cl-latch", 30 * SEC).await;
    let b = connect(&seeds, "cl-latch", 30 * SEC).await;
    let latch = a.latch("gate").unwrap();
    assert!(latch.try_set_count(2).await.unwrap());
    let waiting = b.latch("gate").unwrap().with_recheck(30 * SEC).unwrap();
    let waiter = tokio::spawn(async move {
        waiting.wait().await.unwrap();
        Instant::now()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(latch.count_down().await.unwrap(), 1);
    assert!(!waiter.is_finished());
    assert_eq!(latch.count_down().await.unwrap(), 0);
    let opened = Instant::now();
    let woke = tokio::time::timeout(10 * SEC, waiter)
        .await
        .unwrap()
        .unwrap();
    let late = woke.saturating_duration_since(opened);
    println!("cluster latch: waiter woke {late:?} after the opening");
    assert!(late < 5 * SEC, "{late:?}");
    assert_eq!(latch.count().await.unwrap(), 0);
}

/// The semaphore on a cluster: its keys share the name's slot, the watchdog renews its
/// permits (per slot, routed by key), and a waiter in another client is woken by a
/// release over the sharded channel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_works_across_clients_on_the_cluster() {
    let cluster = topology::shared_cluster();
    let seeds = cluster.seeds();
    let a = connect(&seeds, "cl-sem", SEC).await;
    let b = connect(&seeds, "cl-sem", 30 * SEC).await;
    let semaphore = a.semaphore("pool").unwrap();
    semaphore.set_permits(2).await.unwrap();
    let held = semaphore.acquire(2).await.unwrap();
    let other = b.semaphore("pool").unwrap();
    let waiter = tokio::spawn(async move {
        let permit = other.acquire(1).await.unwrap();
        let at = Instant::now();
        permit.release().await.unwrap();
        at
    });
    // Several renewals of the 1 s lease.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(!held.is_lost(), "{:?}", held.lost_reason());
    assert!(!waiter.is_finished(), "granted beyond the size");
    let released = Instant::now();
    held.release().await.unwrap();
    let got = tokio::time::timeout(10 * SEC, waiter)
        .await
        .unwrap()
        .unwrap();
    let late = got.saturating_duration_since(released);
    println!("cluster semaphore: waiter got a permit {late:?} after the release");
    assert!(late < 5 * SEC, "{late:?}");
}
