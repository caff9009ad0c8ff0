//! Locks on a Sentinel-managed primary (`redis-sentinel://…#service`), against real
//! processes (`common::topology::SentinelSet`: 1 primary, 1 replica, 3 sentinels with
//! down-after 1 s) and real faults (SIGKILL of the primary or the replica, restart of a
//! former primary).
//!
//! - basics and the CLI run on the binary's shared set, which nothing here kills;
//! - each test that kills a node starts a set of its own.
//!
//! Every test prints what it measured (`cargo test --all-features --test sentinel --
//! --nocapture`). Timing assertions are liveness bounds only.
#![cfg(feature = "cli")]

mod common;

use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::topology::{self, SentinelSet};
use redis_locks::{Error, LockClient, LockGuard, LostReason};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_redis-locks");
const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

/// `redis-locks` exit statuses used here (see the README's table).
const USAGE: i32 = 64;
const UNAVAILABLE: i32 = 69;
const NOT_ACQUIRED: i32 = 75;

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// Runs a blocking harness call (kill, wait for a failover, a direct query) without
/// stalling the clients' background tasks: the tests run on a multi-thread runtime.
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(work)
}

async fn client(url: &str, prefix: &str, watchdog: Duration) -> LockClient {
    LockClient::builder(url)
        .prefix(prefix)
        .watchdog_timeout(watchdog)
        .connect()
        .await
        .unwrap_or_else(|err| panic!("connect to {url}: {err}"))
}

/// One command on a fresh plain connection to the node on `port` (a data node or a
/// sentinel), bypassing the library.
fn query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> T {
    let mut conn = topology::node_conn(port);
    cmd.query(&mut conn)
        .unwrap_or_else(|err| panic!("{port}: {cmd:?}: {err}"))
}

/// [`query`], or `None` when the node answers an error (it may be between roles).
fn try_query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> Option<T> {
    let mut conn = topology::node_conn(port);
    cmd.query(&mut conn).ok()
}

/// Whether `owner` holds the lock `key` on the node `port`, in either form of the lock (a
/// first hold's string or the hash: `common::lock_hget`, a read-only script that replicas
/// answer too).
fn holds(port: u16, key: &str, owner: &str) -> bool {
    query::<Option<String>>(port, &common::lock_hget(key, owner)).is_some()
}

fn pttl(port: u16, key: &str) -> i64 {
    query(port, redis::cmd("PTTL").arg(key))
}

fn exists(port: u16, key: &str) -> bool {
    query(port, redis::cmd("EXISTS").arg(key))
}

fn numsub(port: u16, channel: &str) -> i64 {
    let reply: Vec<(String, i64)> = query(port, redis::cmd("PUBSUB").arg("NUMSUB").arg(channel));
    reply.first().map_or(0, |(_, n)| *n)
}

/// `role:` from `INFO replication`.
fn role(port: u16) -> String {
    let info: String = query(port, redis::cmd("INFO").arg("replication"));
    info.lines()
        .find_map(|line| line.trim_end().strip_prefix("role:"))
        .unwrap_or("?")
        .to_owned()
}

/// Calls of each of `commands` since the node started (`INFO commandstats`).
fn command_calls(port: u16, commands: &[&str]) -> Vec<(String, u64)> {
    let info: String = query(port, redis::cmd("INFO").arg("commandstats"));
    commands
        .iter()
        .map(|&name| {
            let calls = info
                .lines()
                .find_map(|line| line.strip_prefix(&format!("cmdstat_{name}:calls=")))
                .and_then(|rest| rest.split(',').next())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0);
            (name.to_owned(), calls)
        })
        .collect()
}

/// Polls `check` every 20 ms until it holds or `limit` passes.
async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if check() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(20 * MS).await;
    }
}

/// Waits until `waiter` has subscribed to `channel` on the primary `port`, so that a
/// release from now on wakes it.
async fn wait_until_subscribed(waiter: &LockClient, port: u16, channel: &str) {
    let subscribed = eventually(10 * SEC, || {
        waiter.waiting_channels() >= 1 && blocking(|| numsub(port, channel)) >= 1
    })
    .await;
    assert!(
        subscribed,
        "waiter not subscribed to {channel} on {port} within 10 s"
    );
}

/// The data node of `set` that is not `port`.
fn other_data_node(set: &SentinelSet, port: u16) -> u16 {
    *set.data_ports()
        .iter()
        .find(|&&p| p != port)
        .expect("two data nodes")
}

/// `redis-locks --url <url> args...`, output captured.
fn cli(url: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("--url")
        .arg(url)
        .args(args)
        .env_remove("REDIS_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

async fn output(mut cmd: Command) -> Output {
    tokio::time::timeout(30 * SEC, cmd.output())
        .await
        .expect("redis-locks finished within 30 s")
        .expect("spawn redis-locks")
}

fn code(out: &Output) -> i32 {
    out.status
        .code()
        .unwrap_or_else(|| panic!("killed by a signal: {out:?}"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An error's message with its whole `source()` chain, and its `Debug` form.
fn describe(err: &Error) -> String {
    let mut message = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    format!("{message} / {err:?}")
}

// ---------------------------------------------------------------------------------------
// 1. Basics on the shared set
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_reenter_release_and_hand_off_through_sentinel() {
    let set = blocking(topology::shared_sentinel);
    let url = set.url();
    let primary = blocking(|| set.current_primary());
    println!(
        "[basics] shared set started in {:?}, primary {primary}",
        set.startup_time()
    );

    // Acquire, re-enter, release: the hold lives on the primary the sentinels name.
    let started = Instant::now();
    let a = client(&url, "sentinel-basics", 30 * SEC).await;
    println!("[basics] connect via sentinels: {:?}", started.elapsed());
    let lock = a.lock("basic").unwrap();
    let guard = lock.acquire().await.unwrap();
    let key = lock.key().to_owned();
    let owner = guard.owner().to_owned();
    assert!(
        blocking(|| holds(primary, &key, &owner)),
        "hold not on {primary}"
    );
    let nested = guard.reenter().await.unwrap();
    assert_eq!(nested.hold_count(), 2);
    assert_eq!(lock.state().await.unwrap().count_of(&owner), 2);
    let count: String = blocking(|| query(primary, &common::lock_hget(&key, &owner)));
    assert_eq!(count, "2");
    // Another client is excluded meanwhile.
    let b = client(&url, "sentinel-basics", 30 * SEC).await;
    assert!(
        b.lock("basic")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    nested.release().await.unwrap();
    assert_eq!(lock.state().await.unwrap().count_of(&owner), 1);
    guard.release().await.unwrap();
    assert!(
        !blocking(|| exists(primary, &key)),
        "key left after the last release"
    );

    // Hand-off: A holds with a 30 s watchdog lease, B waits; only a pub/sub wake-up
    // explains B getting it well before the 30 s TTL.
    let held = a.lock("handoff").unwrap().acquire().await.unwrap();
    let waiter_lock = b.lock("handoff").unwrap();
    let channel = waiter_lock.channel().to_owned();
    let waiter = tokio::spawn(async move {
        let guard = waiter_lock.acquire().await;
        (guard, Instant::now())
    });
    wait_until_subscribed(&b, primary, &channel).await;
    let ttl = a.lock("handoff").unwrap().remaining_ttl().await.unwrap();
    let released = Instant::now();
    held.release().await.unwrap();
    let (guard_b, acquired) = tokio::time::timeout(10 * SEC, waiter)
        .await
        .expect("waiter acquired within 10 s of the release (the TTL was ~30 s)")
        .unwrap();
    let guard_b = guard_b.unwrap();
    let latency = acquired - released;
    println!("[basics] hand-off latency {latency:?} (holder's remaining TTL was {ttl:?})");
    assert!(latency < 10 * SEC, "no wake-up: {latency:?}");
    guard_b.release().await.unwrap();
    assert!(!a.lock("handoff").unwrap().is_locked().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_run_and_status_through_sentinel() {
    let set = blocking(topology::shared_sentinel);
    let url = set.url();
    let primary = blocking(|| set.current_primary());
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    let done = dir.path().join("done");

    // `run` holds the lock while the command runs; `status` and a library client see it.
    let script = format!(
        "touch '{}'; sleep 2; touch '{}'",
        started.display(),
        done.display()
    );
    let begun = Instant::now();
    let run = cli(&url, &["run", "cli-job", "--", "sh", "-c", &script])
        .spawn()
        .expect("spawn redis-locks run");
    assert!(
        eventually(10 * SEC, || started.exists()).await,
        "the command did not start"
    );
    println!(
        "[cli] run: command started {:?} after spawn",
        begun.elapsed()
    );

    let status = output(cli(&url, &["status", "cli-job", "--json"])).await;
    assert_eq!(code(&status), 0, "{}", text(&status.stderr));
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    println!("[cli] status while held: {json}");
    assert_eq!(json["held"], true, "{json}");
    let holder = json["holders"][0]["owner"].as_str().unwrap().to_owned();
    assert!(holder.contains(":cli-"), "{json}");
    let key = json["key"].as_str().unwrap().to_owned();
    assert!(
        blocking(|| holds(primary, &key, &holder)),
        "not on the primary"
    );
    let checked = output(cli(&url, &["status", "cli-job", "--check"])).await;
    assert_eq!(code(&checked), 1, "--check exits 1 while held");

    let lib = client(&url, "redis-locks", 30 * SEC).await;
    assert!(
        lib.lock("cli-job")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "the library got a lock the CLI holds"
    );

    let out = tokio::time::timeout(30 * SEC, run.wait_with_output())
        .await
        .expect("run finished")
        .unwrap();
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(done.exists(), "the command did not finish");
    println!("[cli] run finished after {:?}", begun.elapsed());

    let status = output(cli(&url, &["status", "cli-job", "--json"])).await;
    let json: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(json["held"], false, "{json}");
    assert!(!blocking(|| exists(primary, &key)));
    let guard = lib.lock("cli-job").unwrap().try_acquire().await.unwrap();
    guard.expect("free after the run").release().await.unwrap();
}

// ---------------------------------------------------------------------------------------
// 2, 3, 5. Failover with a long-lived holder and waiter
// ---------------------------------------------------------------------------------------

/// What happened to holder A and waiter B of one lock when the primary was killed.
#[derive(Debug)]
struct FailoverOutcome {
    old_primary: u16,
    new_primary: u16,
    /// From the kill until every sentinel named the promoted replica (the harness).
    failover: Duration,
    /// The replica had A's hold right after A's acquire returned / just before the kill.
    replica_had_at_acquire: bool,
    replica_had_at_kill: bool,
    /// PTTL of A's hold on the replica just before the kill.
    replica_pttl_at_kill: i64,
    /// A kept its hold through the failover (renewed on the new primary).
    kept: bool,
    /// From the kill until A's lost signal fired, and why.
    a_lost_after: Option<Duration>,
    a_lost_reason: Option<LostReason>,
    /// From the kill until B's `acquire()` returned the lock.
    b_acquired_after: Duration,
    /// Kept path only: from A's release until B had the lock.
    hand_off: Option<Duration>,
    /// What A's `release()` returned.
    a_release: String,
}

/// A holds `L` (taken through `a`), B waits for it with `acquire()` (no timeout), the
/// primary is SIGKILLed. Asserts:
/// - liveness: B acquires within 20 s of the kill (when A is lost), or A is seen to keep
///   the hold on the new primary within 20 s (B then gets it after A's release);
/// - no overlap: when B's acquire returns, A is lost (by its own clock or its watchdog) or
///   has released;
/// - B's hold is on the node the sentinels now name;
/// - A's release after a loss is an error (`LockLost`, or `ReleaseUnconfirmed`), never Ok;
///   without a loss it is Ok.
async fn holder_and_waiter_through_failover(
    label: &str,
    set: &SentinelSet,
    a: &LockClient,
    b: &LockClient,
) -> FailoverOutcome {
    let old_primary = blocking(|| set.current_primary());
    let replica = other_data_node(set, old_primary);

    let lock_a = a.lock("L").unwrap();
    let guard_a = lock_a.acquire().await.unwrap();
    let key = lock_a.key().to_owned();
    let owner_a = guard_a.owner().to_owned();
    let replica_had_at_acquire = blocking(|| holds(replica, &key, &owner_a));
    assert!(blocking(|| holds(old_primary, &key, &owner_a)));

    let a_token = guard_a.lost_token();
    let slot: Arc<Mutex<Option<LockGuard>>> = Arc::new(Mutex::new(Some(guard_a)));

    // B waits, and notes A's state the moment it gets the lock.
    let lock_b = b.lock("L").unwrap();
    let channel = lock_b.channel().to_owned();
    let seen_by_b = slot.clone();
    let b_task = tokio::spawn(async move {
        let result = lock_b.acquire().await;
        let at = Instant::now();
        // `None`: A had released. Otherwise whether A knew it was lost then.
        let a_state = seen_by_b
            .lock()
            .unwrap()
            .as_ref()
            .map(|guard| (guard.is_lost(), guard.lost_reason()));
        (result, at, a_state)
    });
    wait_until_subscribed(b, old_primary, &channel).await;
    // Let A's watchdog renew at least once before the kill.
    tokio::time::sleep(a.watchdog_timeout() / 3 + 200 * MS).await;
    let replica_had_at_kill = blocking(|| holds(replica, &key, &owner_a));
    let replica_pttl_at_kill = blocking(|| pttl(replica, &key));

    let lost_task = tokio::spawn(async move {
        a_token.cancelled().await;
        Instant::now()
    });

    let killed = Instant::now();
    blocking(|| set.kill(old_primary));
    let failover = blocking(|| set.wait_for_failover(old_primary, 30 * SEC));
    let new_primary = failover.new_primary;
    assert_eq!(new_primary, replica);
    println!(
        "[{label}] primary {old_primary} killed; sentinels promoted {new_primary} after {:?}",
        failover.elapsed
    );

    // Watch until B has the lock, A is lost, or A is seen renewing on the new primary
    // (its hold there gets a fresh TTL): whichever comes first.
    let deadline = killed + 20 * SEC;
    let mut last_pttl: Option<i64> = None;
    let kept = loop {
        if b_task.is_finished() {
            break false;
        }
        if slot
            .lock()
            .unwrap()
            .as_ref()
            .is_some_and(LockGuard::is_lost)
        {
            break false;
        }
        let (present, ttl) =
            blocking(|| (holds(new_primary, &key, &owner_a), pttl(new_primary, &key)));
        if present {
            if last_pttl.is_some_and(|last| ttl > last + 200) {
                break true;
            }
            last_pttl = Some(ttl);
        }
        assert!(
            Instant::now() < deadline,
            "[{label}] 20 s after the kill: B has no lock, A is not lost, and A's hold is \
             not renewed on {new_primary} (present: {present}, pttl {ttl})\n{}",
            set.logs()
        );
        tokio::time::sleep(50 * MS).await;
    };

    let outcome = if kept {
        // A kept its hold: B must still be waiting; A releases; B gets it promptly.
        assert!(
            !b_task.is_finished(),
            "[{label}] B acquired while A kept the lock"
        );
        assert!(blocking(|| holds(new_primary, &key, &owner_a)));
        let kept_seen = killed.elapsed();
        let guard_a = slot.lock().unwrap().take().unwrap();
        assert!(!guard_a.is_lost());
        let released = Instant::now();
        let release = guard_a.release().await;
        assert!(
            release.is_ok(),
            "[{label}] A kept the lock but its release failed: {release:?}"
        );
        let (result, at, a_state) = tokio::time::timeout(20 * SEC, b_task)
            .await
            .unwrap_or_else(|_| panic!("[{label}] B did not acquire within 20 s of A's release"))
            .unwrap();
        let guard_b = result.unwrap_or_else(|err| panic!("[{label}] B's acquire: {err}"));
        assert!(a_state.is_none(), "[{label}] overlap: {a_state:?}");
        let owner_b = guard_b.owner().to_owned();
        assert!(
            blocking(|| holds(new_primary, &key, &owner_b)),
            "[{label}] B's hold is not on the new primary {new_primary}"
        );
        lost_task.abort();
        println!(
            "[{label}] A kept its hold (renewal seen on {new_primary} {kept_seen:?} after the \
             kill); B acquired {:?} after A's release",
            at - released
        );
        let b_acquired_after = at - killed;
        guard_b.release().await.unwrap();
        FailoverOutcome {
            old_primary,
            new_primary,
            failover: failover.elapsed,
            replica_had_at_acquire,
            replica_had_at_kill,
            replica_pttl_at_kill,
            kept: true,
            a_lost_after: None,
            a_lost_reason: None,
            b_acquired_after,
            hand_off: Some(at - released),
            a_release: format!("{release:?}"),
        }
    } else {
        // A lost it: B must get it within 20 s of the kill, and not before A knew.
        let (result, at, a_state) = tokio::time::timeout_at(deadline.into(), b_task)
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "[{label}] B did not acquire within 20 s of the kill (A lost: {:?})\n{}",
                    slot.lock().unwrap().as_ref().map(LockGuard::lost_reason),
                    set.logs()
                )
            })
            .unwrap();
        let guard_b = result.unwrap_or_else(|err| panic!("[{label}] B's acquire failed: {err}"));
        let b_acquired_after = at - killed;
        assert!(
            matches!(a_state, Some((true, _))),
            "[{label}] overlap: B acquired {b_acquired_after:?} after the kill while A did not \
             know it had lost the lock ({a_state:?})"
        );
        let owner_b = guard_b.owner().to_owned();
        let named = blocking(|| set.current_primary());
        assert_eq!(named, new_primary);
        assert!(
            blocking(|| holds(new_primary, &key, &owner_b)),
            "[{label}] B's hold is not on the new primary {new_primary}"
        );
        let lost_at = tokio::time::timeout(5 * SEC, lost_task)
            .await
            .expect("A's lost signal fired")
            .unwrap();
        let guard_a = slot.lock().unwrap().take().unwrap();
        let reason = guard_a.lost_reason();
        let release = guard_a.release().await;
        assert!(
            matches!(
                release,
                Err(Error::LockLost { .. } | Error::ReleaseUnconfirmed { .. })
            ),
            "[{label}] A's release after the loss: {release:?}"
        );
        // B's hold is untouched by A's failed release.
        assert!(blocking(|| holds(new_primary, &key, &owner_b)));
        println!(
            "[{label}] A lost its hold {:?} after the kill ({reason:?}); B acquired on \
             {new_primary} {b_acquired_after:?} after the kill; A's release: {release:?}",
            lost_at - killed
        );
        guard_b.release().await.unwrap();
        FailoverOutcome {
            old_primary,
            new_primary,
            failover: failover.elapsed,
            replica_had_at_acquire,
            replica_had_at_kill,
            replica_pttl_at_kill,
            kept: false,
            a_lost_after: Some(lost_at - killed),
            a_lost_reason: reason,
            b_acquired_after,
            hand_off: None,
            a_release: format!("{release:?}"),
        }
    };
    println!("[{label}] {outcome:#?}");
    outcome
}

/// The key scenario (issue #11), then the restarted old primary. A's 3 s watchdog lease
/// is shorter than the failover, so A is expected to lose the lock and B to take it on
/// the promoted replica; either way nothing overlaps. Afterwards the same long-lived
/// clients keep working on the new primary (wake-ups, renewals for 3 leases), while the
/// killed primary is restarted and serves, empty and still a primary, until Sentinel
/// demotes it: nothing of ours may be written there meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_with_holder_and_waiter_then_stale_old_primary() {
    let set = blocking(SentinelSet::start);
    println!("[failover] private set started in {:?}", set.startup_time());
    let url = set.url();
    let prefix = "sentinel-failover";
    let a_lease = 3 * SEC;
    let a = client(&url, prefix, a_lease).await;
    // A waiter reports an outage longer than its client's watchdog timeout, so B's is
    // longer than a failover.
    let b = client(&url, prefix, 10 * SEC).await;

    let outcome = holder_and_waiter_through_failover("failover", &set, &a, &b).await;
    let (old, new) = (outcome.old_primary, outcome.new_primary);
    assert!(outcome.b_acquired_after < 20 * SEC);
    if outcome.kept {
        println!(
            "[failover] note: A's 3 s hold outlived the failover ({:?}) and was kept",
            outcome.failover
        );
    }

    // The old primary comes back, empty, as a primary: Sentinel demotes it seconds later.
    blocking(|| set.restart(old));
    let restarted = Instant::now();
    println!(
        "[stale] old primary {old} restarted; it says role:{}",
        blocking(|| role(old))
    );
    let stop_polling = Arc::new(AtomicBool::new(false));
    let poller = {
        let stop = stop_polling.clone();
        let pattern = format!("{prefix}:*");
        tokio::task::spawn_blocking(move || {
            let mut written = Vec::new();
            let mut polls = 0u32;
            let demoted_after = loop {
                // KEYS first: if the node still says master afterwards, it was one when
                // the keys were listed (a demoted node never turns primary by itself).
                // Our channels too: a hub subscribed there would miss every wake-up.
                // While Sentinel demotes it the node may answer an error (LOADING during
                // its resync): that poll sees nothing, the next one looks again.
                let (Some(keys), Some(channels)) = (
                    try_query::<Vec<String>>(old, redis::cmd("KEYS").arg(&pattern)),
                    try_query::<Vec<String>>(
                        old,
                        redis::cmd("PUBSUB").arg("CHANNELS").arg(&pattern),
                    ),
                ) else {
                    polls += 1;
                    if stop.load(Ordering::Relaxed) {
                        break None;
                    }
                    std::thread::sleep(100 * MS);
                    continue;
                };
                let role = role(old);
                polls += 1;
                if role != "master" {
                    break Some(restarted.elapsed());
                }
                written.extend(keys);
                written.extend(channels.into_iter().map(|c| format!("channel {c}")));
                if stop.load(Ordering::Relaxed) {
                    break None;
                }
                std::thread::sleep(100 * MS);
            };
            (demoted_after, written, polls)
        })
    };

    // Both clients churn locks for the whole stale window.
    let stop_churn = Arc::new(AtomicBool::new(false));
    let churn_ok = Arc::new(AtomicU64::new(0));
    let churn_errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut churners = Vec::new();
    for (i, c) in [a.clone(), b.clone()].into_iter().enumerate() {
        let (stop, ok, errors) = (stop_churn.clone(), churn_ok.clone(), churn_errors.clone());
        churners.push(tokio::spawn(async move {
            let lock = c.lock(&format!("churn-{i}")).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let done = match lock.acquire_timeout(5 * SEC).await {
                    Ok(guard) => guard.release().await,
                    Err(err) => Err(err),
                };
                match done {
                    Ok(()) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(err) => {
                        errors.lock().unwrap().push(err.to_string());
                        0
                    }
                };
                tokio::time::sleep(100 * MS).await;
            }
        }));
    }

    // Wake-ups follow the new primary: A holds M with a fixed 30 s lease, B waits; only
    // a wake-up on the new primary explains a fast hand-off.
    let held = a
        .lock("M")
        .unwrap()
        .with_lease(30 * SEC)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let m_b = b.lock("M").unwrap();
    let channel = m_b.channel().to_owned();
    let waiter = tokio::spawn(async move {
        let guard = m_b.acquire().await;
        (guard, Instant::now())
    });
    wait_until_subscribed(&b, new, &channel).await;
    let released = Instant::now();
    held.release().await.unwrap();
    let (guard, acquired) = tokio::time::timeout(10 * SEC, waiter)
        .await
        .expect("B woken on the new primary within 10 s (the lease was 30 s)")
        .unwrap();
    let guard = guard.unwrap();
    let wake_latency = acquired - released;
    let m_key = b.lock("M").unwrap().key().to_owned();
    let m_owner = guard.owner().to_owned();
    assert!(blocking(|| holds(new, &m_key, &m_owner)));
    guard.release().await.unwrap();
    println!("[stale] wake-up hand-off on the new primary: {wake_latency:?}");

    // Renewals follow the new primary: hold one lock on each client for 3 of A's leases.
    let na = a.lock("NA").unwrap();
    let nb = b.lock("NB").unwrap();
    let (ga, gb) = (na.acquire().await.unwrap(), nb.acquire().await.unwrap());
    let renewed_before = (a.watchdog_stats().renewed, b.watchdog_stats().renewed);
    let hold_for = 3 * a_lease;
    let until = Instant::now() + hold_for;
    let mut min_ttl = i64::MAX;
    while Instant::now() < until {
        let (ka, kb) = (na.key().to_owned(), nb.key().to_owned());
        let (oa, ob) = (ga.owner().to_owned(), gb.owner().to_owned());
        let (on_new, ttl) =
            blocking(|| (holds(new, &ka, &oa) && holds(new, &kb, &ob), pttl(new, &ka)));
        assert!(on_new, "a renewed hold vanished from the new primary {new}");
        min_ttl = min_ttl.min(ttl);
        assert!(
            !ga.is_lost() && !gb.is_lost(),
            "{:?} {:?}",
            ga.lost_reason(),
            gb.lost_reason()
        );
        tokio::time::sleep(250 * MS).await;
    }
    let renewed = (
        a.watchdog_stats().renewed - renewed_before.0,
        b.watchdog_stats().renewed - renewed_before.1,
    );
    ga.release().await.unwrap();
    gb.release().await.unwrap();
    println!(
        "[stale] held for {hold_for:?} on the new primary: renewals A {} (lease 3 s), B {} \
         (lease 10 s); lowest PTTL of A's hold seen {min_ttl} ms",
        renewed.0, renewed.1
    );
    assert!(
        renewed.0 >= 3,
        "A's watchdog did not renew on the new primary: {renewed:?}"
    );

    // Until Sentinel demotes the old node (the harness allows 30 s).
    let demote_deadline = restarted + 40 * SEC;
    while !poller.is_finished() {
        if Instant::now() > demote_deadline {
            stop_polling.store(true, Ordering::Relaxed);
        }
        tokio::time::sleep(100 * MS).await;
    }
    let (demoted_after, written, polls) = poller.await.unwrap();
    stop_churn.store(true, Ordering::Relaxed);
    for churner in churners {
        churner.await.unwrap();
    }
    let ok = churn_ok.load(Ordering::Relaxed);
    let errors = churn_errors.lock().unwrap().clone();
    let stats = blocking(|| {
        command_calls(
            old,
            &["eval", "evalsha", "hset", "publish", "subscribe", "ping"],
        )
    });
    println!(
        "[stale] old primary {old}: demoted {demoted_after:?} after its restart ({polls} polls); \
         our keys and channels seen there while it was a primary: {written:?}; commandstats \
         since restart \
         {stats:?}; churn during the window: {ok} acquire+release ok, {} errors {errors:?}",
        errors.len()
    );
    let demoted_after = demoted_after.unwrap_or_else(|| {
        panic!(
            "the restarted old primary was not demoted within 40 s\n{}",
            set.logs()
        )
    });
    assert!(
        written.is_empty(),
        "lock keys written to the stale primary: {written:?}"
    );
    let scripts_run: u64 = stats
        .iter()
        .filter(|(name, _)| name.starts_with("eval"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        scripts_run, 0,
        "scripts ran on the restarted old primary: {stats:?}"
    );
    assert!(
        errors.is_empty(),
        "operations failed during the stale window: {errors:?}"
    );
    assert!(ok > 0);

    // Still working once the old node is a replica again.
    for c in [&a, &b] {
        let guard = c
            .lock("after")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .unwrap();
        guard.release().await.unwrap();
    }
    println!(
        "[failover] summary: failover {:?}; A lost after {:?} ({:?}); B acquired after {:?}; \
         A's release {}; replica had A's hold at the kill: {} (PTTL {} ms); stale window \
         {demoted_after:?}",
        outcome.failover,
        outcome.a_lost_after,
        outcome.a_lost_reason,
        outcome.b_acquired_after,
        outcome.a_release,
        outcome.replica_had_at_kill,
        outcome.replica_pttl_at_kill,
    );
}

/// The same failover with replica acknowledgement on A (`min_replicas(1, 1 s)`) and a
/// watchdog lease (10 s) that outlives the failover: the replica had A's hold before A's
/// acquire returned, so the promoted replica has it, A's watchdog renews it there, A is
/// not lost, and B gets the lock only after A's release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_with_replica_ack_keeps_the_hold() {
    let set = blocking(SentinelSet::start);
    println!(
        "[replica-ack] private set started in {:?}",
        set.startup_time()
    );
    let url = set.url();
    let prefix = "sentinel-ack";
    let a = LockClient::builder(&url)
        .prefix(prefix)
        .watchdog_timeout(10 * SEC)
        .min_replicas(1, SEC)
        .connect()
        .await
        .unwrap();
    let b = client(&url, prefix, 10 * SEC).await;

    let outcome = holder_and_waiter_through_failover("replica-ack", &set, &a, &b).await;
    assert!(
        outcome.replica_had_at_acquire,
        "acknowledged, yet the replica lacked the hold right after acquire: {outcome:#?}"
    );
    assert!(
        outcome.kept,
        "A lost an acknowledged hold whose lease outlived the failover: {outcome:#?}"
    );

    println!(
        "[replica-ack] summary: failover {:?}; replica had A's hold at acquire {} and at the \
         kill {} (PTTL {} ms); A kept it: {}; B acquired {:?} after A's release ({:?} after \
         the kill); A's release {}",
        outcome.failover,
        outcome.replica_had_at_acquire,
        outcome.replica_had_at_kill,
        outcome.replica_pttl_at_kill,
        outcome.kept,
        outcome.hand_off,
        outcome.b_acquired_after,
        outcome.a_release
    );

    // The new primary has no replica left: A's next acquisition is given back.
    let begun = Instant::now();
    let result = a.lock("after").unwrap().acquire().await;
    println!(
        "[replica-ack] acquire with no replica left: {result:?} after {:?}",
        begun.elapsed()
    );
    assert!(
        matches!(
            result,
            Err(Error::NotReplicated {
                acked: Some(0),
                wanted: 1,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(a.held_count(), 0);
    let key = a.lock("after").unwrap().key().to_owned();
    assert!(!blocking(|| exists(outcome.new_primary, &key)));
}

// ---------------------------------------------------------------------------------------
// 4. Replica acknowledgement failure
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_ack_failure_gives_the_hold_back() {
    let set = blocking(SentinelSet::start);
    println!(
        "[no-replica] private set started in {:?}",
        set.startup_time()
    );
    let url = set.url();
    let prefix = "sentinel-noreplica";
    let primary = blocking(|| set.current_primary());
    let replica = other_data_node(&set, primary);
    let acked = LockClient::builder(&url)
        .prefix(prefix)
        .min_replicas(1, 300 * MS)
        .connect()
        .await
        .unwrap();
    let plain = client(&url, prefix, 30 * SEC).await;
    let lock = acked.lock("R").unwrap();
    let key = lock.key().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let cli_run = |file: &Path| {
        let file = file.display().to_string();
        cli(
            &url,
            &[
                "--prefix",
                prefix,
                "--min-replicas",
                "1",
                "--replica-timeout",
                "300ms",
                "run",
                "R",
                "--",
                "touch",
                &file,
            ],
        )
    };

    // With the replica alive: acknowledged, and on the replica when acquire returns.
    let begun = Instant::now();
    let guard = lock.acquire().await.unwrap();
    let took = begun.elapsed();
    let owner = guard.owner().to_owned();
    assert!(
        blocking(|| holds(replica, &key, &owner)),
        "acknowledged, yet not on the replica"
    );
    guard.release().await.unwrap();
    let before = dir.path().join("before");
    let out = output(cli_run(&before)).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(before.exists());
    println!("[no-replica] replica alive: acknowledged acquire took {took:?}; CLI exit 0");

    // Replica killed: WAIT gets 0 acknowledgements, the hold is given back.
    blocking(|| set.kill(replica));
    let begun = Instant::now();
    let result = lock.acquire().await;
    let took = begun.elapsed();
    println!("[no-replica] replica down: {result:?} after {took:?}");
    match &result {
        Err(
            err @ Error::NotReplicated {
                acked,
                wanted,
                timeout,
                ..
            },
        ) => {
            assert_eq!((*acked, *wanted, *timeout), (Some(0), 1, 300 * MS), "{err}");
        }
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert!(took < 10 * SEC, "{took:?}");
    assert_eq!(acked.held_count(), 0);
    assert!(
        !blocking(|| exists(primary, &key)),
        "the unreplicated hold was left"
    );
    let other = plain.lock("R").unwrap().try_acquire().await.unwrap();
    other
        .expect("another client gets the lock")
        .release()
        .await
        .unwrap();
    assert!(matches!(
        lock.try_acquire().await,
        Err(Error::NotReplicated { acked: Some(0), .. })
    ));

    // A WAIT blocks its connection for its whole timeout: while one acquire waits 3 s for
    // an acknowledgement that cannot come, the same client's other work (a read, a
    // release) must not queue behind it.
    let slow = LockClient::builder(&set.url())
        .min_replicas(1, 3 * SEC)
        .connect()
        .await
        .unwrap();
    let other_guard_client = slow.clone();
    let waiting = tokio::spawn(async move { slow.lock("R-slow").unwrap().acquire().await });
    tokio::time::sleep(200 * MS).await;
    let read_started = Instant::now();
    other_guard_client
        .lock("R-other")
        .unwrap()
        .state()
        .await
        .unwrap();
    let read_took = read_started.elapsed();
    println!("[no-replica] a read during a 3 s WAIT took {read_took:?}");
    assert!(read_took < SEC, "a read queued behind WAIT: {read_took:?}");
    let waited = waiting.await.unwrap();
    assert!(
        matches!(waited, Err(Error::NotReplicated { .. })),
        "{waited:?}"
    );

    let file = dir.path().join("touched");
    let begun = Instant::now();
    let out = output(cli_run(&file)).await;
    println!(
        "[no-replica] CLI exit {} after {:?}: {}",
        code(&out),
        begun.elapsed(),
        text(&out.stderr).trim()
    );
    assert_eq!(code(&out), NOT_ACQUIRED, "{}", text(&out.stderr));
    assert!(
        !file.exists(),
        "the command ran without an acknowledged lock"
    );
    assert!(!blocking(|| exists(primary, &key)));

    // Replica back: acknowledged again.
    blocking(|| set.restart(replica));
    let resynced = blocking(|| set.wait_for_replica(replica, 30 * SEC));
    let guard = lock.acquire().await.unwrap();
    let owner = guard.owner().to_owned();
    assert!(blocking(|| holds(replica, &key, &owner)));
    guard.release().await.unwrap();
    let out = output(cli_run(&file)).await;
    assert_eq!(code(&out), 0, "{}", text(&out.stderr));
    assert!(file.exists());
    println!("[no-replica] replica restarted and in sync after {resynced:?}: acquire and CLI ok");
}

// ---------------------------------------------------------------------------------------
// 6. Bad input
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sentinel_urls_and_unreachable_sentinels() {
    let connect = |url: String| async move {
        let begun = Instant::now();
        let result = LockClient::builder(&url)
            .connect_timeout(2 * SEC)
            .connect()
            .await;
        (result.map(|_| ()), begun.elapsed())
    };

    // Nothing listening.
    let (result, took) = connect("redis-sentinel://127.0.0.1:1#mymaster".into()).await;
    let err = result.unwrap_err();
    println!(
        "[bad-input] nothing listening: {took:?}: {}",
        describe(&err)
    );
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(took < 6 * SEC, "{took:?}");

    // A "sentinel" that accepts connections and never answers: the connect timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let (result, took) = connect(format!("redis-sentinel://127.0.0.1:{port}#mymaster")).await;
    let err = result.unwrap_err();
    println!("[bad-input] silent sentinel: {took:?}: {}", describe(&err));
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(took < 6 * SEC, "{took:?}");
    drop(silent);

    // Real sentinels, wrong service name: the message names it; no password shown.
    let set = blocking(topology::shared_sentinel);
    let nope = set.url().replace("#mymaster", "#nope");
    let (result, took) = connect(nope.clone()).await;
    let err = result.unwrap_err();
    let message = describe(&err);
    println!("[bad-input] wrong service: {took:?}: {message}");
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(err.to_string().contains("\"nope\""), "{message}");
    let with_password = nope.replace("redis-sentinel://", "redis-sentinel://app:hunter2@");
    let (result, _) = connect(with_password).await;
    let message = describe(&result.unwrap_err());
    assert!(!message.contains("hunter2"), "{message}");
    // The right service, a password the primary does not have.
    let wrong_password = set
        .url()
        .replace("redis-sentinel://", "redis-sentinel://app:hunter2@");
    let (result, took) = connect(wrong_password).await;
    let message = result.as_ref().err().map(describe);
    println!("[bad-input] password the primary refuses: {took:?}: {message:?}");
    let err = result.expect_err("the primary has no user app");
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
    assert!(!describe(&err).contains("hunter2"), "{}", describe(&err));

    // Malformed URLs: InvalidUrl, before any connection, without the password.
    for url in [
        "redis-sentinel://h",
        "redis-sentinel://app:hunter2@h",
        "redis-sentinel://app:hunter2@h#",
        "redis-sentinel://app:hunter2@h:99999#mymaster",
        "redis-sentinel://app:hunter2@h:x#mymaster",
        "redis-sentinel://app:hunter2@#mymaster",
        "redis-sentinel://app:hunter2@h1,,h2#mymaster",
        "redis-sentinel://app:hunter2@h1/zero#mymaster",
    ] {
        let (result, took) = connect(url.to_owned()).await;
        let err = result.unwrap_err();
        let message = describe(&err);
        assert!(matches!(err, Error::InvalidUrl(_)), "{url}: {message}");
        assert!(!message.contains("hunter2"), "{url}: {message}");
        assert!(took < SEC, "{url}: {took:?}");
        println!("[bad-input] {url}: {err}");
    }

    // The CLI: a malformed URL is a usage error, unreachable sentinels are 69.
    let out = output(cli("redis-sentinel://app:hunter2@h", &["status", "x"])).await;
    assert_eq!(code(&out), USAGE, "{}", text(&out.stderr));
    assert!(
        !text(&out.stderr).contains("hunter2"),
        "{}",
        text(&out.stderr)
    );
    let out = output(cli(
        "redis-sentinel://127.0.0.1:1#mymaster",
        &["status", "x"],
    ))
    .await;
    assert_eq!(code(&out), UNAVAILABLE, "{}", text(&out.stderr));
    println!("[bad-input] CLI: {}", text(&out.stderr).trim());
}

/// A TCP proxy to `127.0.0.1:upstream` that holds every chunk the client sends for
/// `delay` before passing it on (replies pass at once): a slow or distant sentinel.
async fn delaying_proxy(upstream: u16, delay: Duration) -> (u16, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                else {
                    return;
                };
                let (mut from_client, mut to_client) = client.into_split();
                let (mut from_server, mut to_server) = server.into_split();
                let up = async {
                    let mut buf = vec![0u8; 16 * 1024];
                    while let Ok(n @ 1..) = from_client.read(&mut buf).await {
                        tokio::time::sleep(delay).await;
                        if to_server.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                };
                let down = tokio::io::copy(&mut from_server, &mut to_client);
                tokio::select! {
                    _ = up => {}
                    _ = down => {}
                }
            });
        }
    });
    (port, task)
}

/// The builder's timeouts (connect 5 s, response 3 s) apply to the sentinel queries too:
/// a sentinel that takes 700 ms to answer is slow, not down.
///
/// Failed while the library used redis-rs's `SentinelClient`: its sentinel queries (and
/// the role check of the primary they name) ran on redis-rs's default connection
/// settings, 1 s to connect and 500 ms per reply, whatever the builder said. Measured
/// through this proxy then: 300 ms and 450 ms delays
/// connect (0.9 s, 1.4 s), 550 ms fails after 1.06 s and 700 ms after 1.2 s with
/// "timed out"; a sentinel with no reply at all fails after 1.0 s even with a 5 s connect
/// timeout. The same client is used for every later lookup, so a client behind such a
/// sentinel also never follows a failover ("sentinel: no primary named").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sentinel_within_the_configured_timeouts_is_used() {
    let set = blocking(topology::shared_sentinel);
    let sentinel = set.sentinel_ports()[0];
    let (proxy, task) = delaying_proxy(sentinel, 700 * MS).await;
    let url = format!("redis-sentinel://127.0.0.1:{proxy}/0#mymaster");
    let begun = Instant::now();
    let result = LockClient::builder(&url)
        .prefix("sentinel-slow")
        .connect_timeout(5 * SEC)
        .response_timeout(3 * SEC)
        .connect()
        .await;
    let took = begun.elapsed();
    println!(
        "[slow-sentinel] 700 ms sentinel, connect timeout 5 s, response timeout 3 s: {:?} after \
         {took:?}",
        result.as_ref().map(|_| ()).map_err(describe)
    );
    let client = result.expect("a sentinel answering within the configured timeouts is usable");
    let guard = client.lock("slow").unwrap().acquire().await.unwrap();
    guard.release().await.unwrap();
    task.abort();
}

/// Sentinels that require a password of their own (`requirepass`-style, through the
/// default ACL user): the URL's credentials are the primary's, so without
/// `sentinel_auth` the client cannot ask them and connect fails (typed, naming the
/// service, never showing a password); with it, everything works, including following
/// the announcements (`+switch-master` subscription).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinels_with_a_password_need_sentinel_auth() {
    const SENTINEL_PASS: &str = "s3ntinel-secret";
    let set = blocking(SentinelSet::start);
    for port in set.sentinel_ports() {
        // Sentinels talk to each other with sentinel-pass once they require one.
        let reply = set.redis_cli(
            port,
            &["SENTINEL", "CONFIG", "SET", "sentinel-pass", SENTINEL_PASS],
        );
        assert!(reply.trim() == "OK", "sentinel-pass on {port}: {reply}");
        let reply = set.redis_cli(
            port,
            &[
                "ACL",
                "SETUSER",
                "default",
                "on",
                "resetpass",
                &format!(">{SENTINEL_PASS}"),
            ],
        );
        assert!(reply.trim() == "OK", "password on sentinel {port}: {reply}");
    }
    let url = set.url();

    let refused = LockClient::builder(&url)
        .connect_timeout(2 * SEC)
        .connect()
        .await;
    match &refused {
        Err(Error::Connect { .. }) => {}
        other => panic!("sentinels refusing us: {other:?}"),
    }
    let wrong = LockClient::builder(&url)
        .sentinel_auth(None, "not-the-password")
        .connect_timeout(2 * SEC)
        .connect()
        .await;
    match &wrong {
        Err(err @ Error::Connect { .. }) => {
            let text = format!("{err} {err:?}");
            assert!(!text.contains("not-the-password"), "password in {text}");
        }
        other => panic!("a wrong sentinel password: {other:?}"),
    }

    let client = LockClient::builder(&url)
        .sentinel_auth(None, SENTINEL_PASS)
        .connect()
        .await
        .expect("connect with the sentinels' password");
    let guard = client.lock("auth").unwrap().acquire().await.unwrap();
    assert_eq!(guard.hold_count(), 1);
    guard.release().await.unwrap();
    // sentinel_auth is for sentinel URLs only.
    let misused = LockClient::builder("redis://127.0.0.1:1")
        .sentinel_auth(None, SENTINEL_PASS)
        .connect()
        .await;
    assert!(
        matches!(misused, Err(Error::InvalidConfig(_))),
        "{misused:?}"
    );
    println!("sentinel auth: refused without it, refused with a wrong one, works with it");
}
