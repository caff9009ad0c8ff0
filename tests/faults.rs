//! The fault suite (torture harness): worker OS processes × tasks contend for one fenced
//! lock on a real redis-server while faults are injected; a checker then verifies from
//! their logs and the protected resource's log that no two owners' critical sections
//! overlapped (or, after an out-of-model fault, that the resource refused the stale
//! token), and measures how fast the system recovered. See `faults/harness.rs`.
//!
//! Each scenario prints a `FAULT <n> <name>: ...` result line. The default run is small;
//! `FAULTS_SCALE=5 cargo test --release --test faults -- --nocapture --test-threads=1`
//! (or `scripts/faults.sh`) runs more processes, tasks, repetitions and longer phases.

mod common;
#[path = "faults/harness.rs"]
mod harness;
#[path = "faults/proxy.rs"]
mod proxy;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, Instant};

use common::{RedisServer, eventually, numsub};
use harness::{
    Fleet, Log, Report, WorkerConfig, check, now_us, read_records, resource_log, result_line,
    run_tasks, scale, worker_main,
};
use proxy::{FaultProxy, proxied_client, script_sha, take_pattern, warm_up};
use redis::AsyncCommands;
use redis_locks::{Error, LockClient};

const SEC: Duration = Duration::from_secs(1);
const LOCK: &str = "faults";
/// Generous slack on top of a lease for "the lock came back" bounds.
const SLACK: Duration = Duration::from_millis(3000);

/// The worker process. Runs only when spawned by a scenario (env `FW_*`).
#[test]
#[ignore = "worker process spawned by the fault scenarios"]
fn fault_worker() {
    if let Some(cfg) = WorkerConfig::from_env() {
        worker_main(cfg);
    }
}

/// The run of a worker in a scripted scenario, which ends it with `Fleet::stop` when its
/// script is done: only a bound in case the test never gets there.
const SCRIPTED_RUN_CEILING: Duration = Duration::from_secs(300);

fn base_config(
    id: usize,
    lock: &RedisServer,
    resource: &RedisServer,
    fleet: &Fleet,
) -> WorkerConfig {
    WorkerConfig {
        id,
        lock_url: lock.url(),
        resource_url: resource.url(),
        lock_name: LOCK.into(),
        log: fleet.log_path(id),
        tasks: 2,
        run: 5 * SEC,
        hold: Duration::from_millis(20),
        write_every: Duration::from_millis(10),
        think: Duration::ZERO,
        watchdog: SEC,
        check_interval: None,
        wait: 5 * SEC,
        // Long enough that a reply delayed by the machine's load is not a worker error.
        response_timeout: 2 * SEC,
        end_on_lost: false,
        shutdown_runtime_after: None,
    }
}

fn ms(us: u64) -> u64 {
    us / 1000
}

fn signed_ms(later: u64, earlier: u64) -> i64 {
    (later as i64 - earlier as i64) / 1000
}

/// The worker that owns `owner` (`<client-id>:task-N`).
fn worker_of(clients: &HashMap<String, usize>, owner: &str) -> Option<usize> {
    clients.get(owner.split(':').next()?).copied()
}

/// Polls the lock's state until a worker accepted by `pick` holds it.
async fn current_holder(
    lock: &redis_locks::Lock,
    clients: &HashMap<String, usize>,
    pick: impl Fn(usize) -> bool,
) -> (usize, String, Duration) {
    let deadline = Instant::now() + 20 * SEC;
    loop {
        let state = lock.state().await.unwrap();
        if let Some((owner, _)) = state.holders.first()
            && let Some(worker) = worker_of(clients, owner).filter(|w| pick(*w))
        {
            return (worker, owner.clone(), state.remaining.unwrap_or_default());
        }
        assert!(Instant::now() < deadline, "no worker ever held the lock");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

fn assert_in_model(report: &Report) {
    assert_eq!(
        report.overlaps, 0,
        "overlapping sections: {:?}",
        report.overlap_pairs
    );
    assert_eq!(
        report.excused_overlaps, 0,
        "no out-of-model fault here, yet sections overlapped: {:?}",
        report.overlap_pairs
    );
    assert_eq!(
        report.stale_accepted, 0,
        "the resource accepted a stale token"
    );
    assert_eq!(
        report.token_regressions, 0,
        "a later holder got a lower token"
    );
}

// ---- 1. SIGKILL of the holder ----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_1_sigkill_holder_process() {
    let runs = scale();
    let lock_server = RedisServer::start();
    let res_server = RedisServer::start();
    let mut fleet = Fleet::new();
    let workers = runs as usize + 2;
    for id in 0..workers {
        let mut cfg = base_config(id, &lock_server, &res_server, &fleet);
        cfg.tasks = 2 + scale() as usize / 2;
        cfg.hold = Duration::from_millis(50);
        cfg.run = SCRIPTED_RUN_CEILING;
        fleet.spawn(&cfg);
    }
    let clients = fleet.wait_started(30 * SEC).await;
    let observer = lock_server.client(30 * SEC).await;
    let lock = observer.lock(LOCK).unwrap();
    tokio::time::sleep(SEC).await;

    let mut kills = Vec::new();
    for _ in 0..runs {
        let killed: Vec<usize> = kills.iter().map(|(w, _, _)| *w).collect();
        let (victim, _, pttl) = current_holder(&lock, &clients, |w| !killed.contains(&w)).await;
        let at = fleet.kill(victim);
        kills.push((victim, at, pttl));
        let back = eventually(SEC + 5 * SEC, || async {
            let state = lock.state().await.unwrap();
            state
                .holders
                .first()
                .is_some_and(|(owner, _)| worker_of(&clients, owner) != Some(victim))
        })
        .await;
        assert!(back, "nobody took the lock after the holder was killed");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    fleet.stop();
    fleet.wait_all(30 * SEC).await;
    let report = check(
        &fleet.records(),
        &resource_log(&res_server.url()).await,
        &fleet.cut_off_times(),
    );

    let mut recoveries = Vec::new();
    let mut beyond_ttl = Vec::new();
    let mut killed_inside = 0;
    for &(victim, at, pttl) in &kills {
        let next = report
            .first_enter_after(at, Some(victim))
            .expect("recovered");
        let recovery = ms(next - at);
        recoveries.push(recovery);
        beyond_ttl.push(recovery as i64 - pttl.as_millis() as i64);
        killed_inside += report.sections_of(victim).filter(|s| !s.finished).count();
        assert!(
            Duration::from_millis(recovery) <= SEC + SLACK,
            "lock came back {recovery} ms after the kill (watchdog 1 s)"
        );
    }
    println!(
        "{}",
        result_line(
            "1",
            "sigkill-holder",
            runs,
            &report,
            &format!(
                "recovery_ms={} (per kill {recoveries:?}; beyond the remaining TTL {beyond_ttl:?} ms; \
                 killed inside a section {killed_inside}/{runs}; watchdog 1000 ms)",
                recoveries.iter().max().unwrap()
            )
        )
    );
    assert_in_model(&report);
    assert_eq!(report.errors, 0, "{:?}", report.error_messages);
    assert!(
        report.max_wait_overrun_ms < 1500,
        "an acquire overran its wait"
    );
}

// ---- 2. SIGSTOP past the lease ---------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_2_sigstop_holder_past_its_lease() {
    let runs = scale();
    // Longer than the takeover may take (lease + SLACK), so someone holds before SIGCONT.
    let stop_for = SEC + SLACK + Duration::from_millis(500);
    let lock_server = RedisServer::start();
    let res_server = RedisServer::start();
    let mut fleet = Fleet::new();
    for id in 0..3 {
        let mut cfg = base_config(id, &lock_server, &res_server, &fleet);
        cfg.hold = Duration::from_millis(100);
        cfg.run = SCRIPTED_RUN_CEILING;
        fleet.spawn(&cfg);
    }
    let clients = fleet.wait_started(30 * SEC).await;
    let observer = lock_server.client(30 * SEC).await;
    let lock = observer.lock(LOCK).unwrap();
    tokio::time::sleep(SEC).await;

    let mut stops = Vec::new();
    for _ in 0..runs {
        // Stop a holder, and make sure it was stopped while holding (its release not sent).
        let (victim, t_stop) = loop {
            let (victim, owner, _) = current_holder(&lock, &clients, |_| true).await;
            let t_stop = now_us();
            fleet.signal(victim, libc::SIGSTOP);
            tokio::time::sleep(Duration::from_millis(30)).await;
            let state = lock.state().await.unwrap();
            if state.count_of(&owner) > 0 {
                break (victim, t_stop);
            }
            fleet.signal(victim, libc::SIGCONT);
        };
        tokio::time::sleep(stop_for).await;
        let t_cont = now_us();
        fleet.signal(victim, libc::SIGCONT);
        stops.push((victim, t_stop, t_cont));
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    fleet.stop();
    fleet.wait_all(30 * SEC).await;
    let report = check(
        &fleet.records(),
        &resource_log(&res_server.url()).await,
        &fleet.cut_off_times(),
    );

    let mut recoveries = Vec::new();
    let mut lost_after_resume = Vec::new();
    for &(victim, t_stop, t_cont) in &stops {
        let paused: Vec<_> = report
            .sections_of(victim)
            .filter(|s| s.enter < t_stop && s.exit > t_cont)
            .collect();
        assert_eq!(paused.len(), 1, "exactly one section spans the pause");
        let v = paused[0];
        assert!(
            v.release.starts_with("lost:"),
            "the paused holder's release must report LockLost, got {:?}",
            v.release
        );
        assert!(
            v.writes_rejected >= 1,
            "the paused holder's write after resuming must be refused"
        );
        let lost_at = v.lost_at.expect("the paused holder's lost signal fired");
        lost_after_resume.push(signed_ms(lost_at, t_cont));
        let next = report
            .first_enter_after(t_stop, Some(victim))
            .expect("someone took the lock during the pause");
        assert!(
            next < t_cont,
            "nobody took the lock while the holder was stopped"
        );
        let recovery = ms(next - t_stop);
        recoveries.push(recovery);
        assert!(
            Duration::from_millis(recovery) <= SEC + SLACK,
            "{recovery} ms"
        );
    }
    println!(
        "{}",
        result_line(
            "2",
            "sigstop-past-lease",
            runs,
            &report,
            &format!(
                "recovery_ms={} (per stop {recoveries:?}; stopped {} ms, watchdog 1000 ms; \
                 lost signal after SIGCONT {lost_after_resume:?} ms)",
                recoveries.iter().max().unwrap(),
                stop_for.as_millis()
            )
        )
    );
    assert_eq!(report.overlaps, 0, "{:?}", report.overlap_pairs);
    assert!(
        report.excused_overlaps >= runs as usize,
        "the pause must have produced an overlap that fencing caught"
    );
    assert_eq!(report.stale_accepted, 0);
    assert!(report.stale_rejected >= runs as usize);
    assert_eq!(report.token_regressions, 0);
    // A call in flight when its process was stopped times out on resuming (its clock ran
    // on): allowed for the paused workers only.
    let victims: Vec<usize> = stops.iter().map(|(w, _, _)| *w).collect();
    let others_errors: Vec<String> = fleet
        .records()
        .iter()
        .filter(|r| r["k"] == "error")
        .filter(|r| !victims.contains(&(r["w"].as_u64().unwrap() as usize)))
        .map(|r| r["msg"].to_string())
        .collect();
    assert!(others_errors.is_empty(), "{others_errors:?}");
}

// ---- 3. Redis killed and restarted empty -------------------------------------------------

/// Long holds in the test process, across one restart: `HOLDERS` clients each hold a lock
/// (watchdog 1 s), and a waiter in yet another client waits for the first one.
struct LongHolds {
    guards: Vec<redis_locks::LockGuard>,
    clients: Vec<LockClient>,
    waiter: tokio::task::JoinHandle<(u64, u32, Option<String>)>,
}

const HOLDERS: usize = 3;

async fn long_holds(server: &RedisServer, round: u64) -> LongHolds {
    let mut guards = Vec::new();
    let mut clients = Vec::new();
    for i in 0..HOLDERS {
        let client = LockClient::builder(&server.url())
            .watchdog_timeout(SEC)
            .response_timeout(Duration::from_millis(500))
            .connect()
            .await
            .unwrap();
        let lock = client.lock(&format!("long-{round}-{i}")).unwrap();
        guards.push(lock.acquire().await.unwrap());
        clients.push(client);
    }
    let waiter_client = LockClient::builder(&server.url())
        .response_timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap();
    let lock = waiter_client.lock(&format!("long-{round}-0")).unwrap();
    // A caller that retries on Error::Redis, as the docs ask: returns when it got the
    // lock, how many attempts failed, and the first failure.
    let waiter = tokio::spawn(async move {
        let mut failures = 0;
        let mut first_error = None;
        loop {
            match lock.acquire_timeout(10 * SEC).await {
                Ok(guard) => {
                    let at = now_us();
                    guard.release().await.unwrap();
                    return (at, failures, first_error);
                }
                Err(Error::Redis(err)) => {
                    failures += 1;
                    first_error.get_or_insert(err.to_string());
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(other) => panic!("waiter: {other:?}"),
            }
            assert!(failures < 100, "waiter never recovered");
        }
    });
    assert!(
        eventually(5 * SEC, || async { waiter_client.waiting_channels() == 1 }).await,
        "the waiter did not start waiting"
    );
    clients.push(waiter_client);
    LongHolds {
        guards,
        clients,
        waiter,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_3_redis_killed_and_restarted_empty() {
    let runs = scale();
    let mut lock_server = RedisServer::start();
    let res_server = RedisServer::start();
    let mut fleet = Fleet::new();
    let period = Duration::from_millis(3000);
    for id in 0..3 {
        let mut cfg = base_config(id, &lock_server, &res_server, &fleet);
        cfg.hold = Duration::from_millis(100);
        cfg.write_every = Duration::from_millis(20);
        cfg.think = Duration::from_millis(30);
        cfg.end_on_lost = true;
        cfg.run = SCRIPTED_RUN_CEILING;
        fleet.spawn(&cfg);
    }
    fleet.wait_started(30 * SEC).await;
    let started = Instant::now();
    let mut outages = Vec::new();
    let mut lost_signals = Vec::new();
    let mut reacquired = Vec::new();
    let mut waiters = Vec::new();
    for r in 0..runs {
        let at = Duration::from_millis(1500) + period * r as u32;
        tokio::time::sleep(at.saturating_sub(started.elapsed() + SEC)).await;
        let holds = long_holds(&lock_server, r).await;
        tokio::time::sleep(at.saturating_sub(started.elapsed())).await;
        let t_down = now_us();
        tokio::task::block_in_place(|| lock_server.restart());
        let t_up = now_us();
        outages.push((t_down, t_up));
        for guard in &holds.guards {
            tokio::time::timeout(SEC + SLACK, guard.lost())
                .await
                .expect("a holder's lost signal did not fire after the restart");
            lost_signals.push(signed_ms(now_us(), t_up));
        }
        let (woke, failures, first_error) = tokio::time::timeout(10 * SEC, holds.waiter)
            .await
            .expect("the waiter hung")
            .unwrap();
        waiters.push((signed_ms(woke, t_up), failures, first_error));
        // The same clients take their locks again, no new client needed.
        let t = Instant::now();
        for (i, client) in holds.clients.iter().take(HOLDERS).enumerate() {
            let lock = client.lock(&format!("long-{r}-{i}")).unwrap();
            let guard = loop {
                match lock.acquire_timeout(5 * SEC).await {
                    Ok(guard) => break guard,
                    Err(Error::Redis(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
                    Err(other) => panic!("re-acquire: {other:?}"),
                }
                assert!(t.elapsed() < 10 * SEC, "a holder's client never recovered");
            };
            guard.release().await.unwrap();
        }
        reacquired.push(t.elapsed().as_millis());
        for guard in holds.guards {
            assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
        }
    }
    // Run on until every worker has taken the lock again after the last restart (checked
    // below on the report), however slowly a loaded machine gets there.
    let last_up = outages.last().unwrap().1;
    let all_back = eventually(30 * SEC, || async {
        let records = fleet.records();
        (0..3).all(|w| {
            records
                .iter()
                .any(|r| r["k"] == "enter" && r["w"] == w && r["t"].as_u64().unwrap() > last_up)
        })
    })
    .await;
    fleet.stop();
    fleet.wait_all(30 * SEC).await;
    assert!(
        all_back,
        "a worker never acquired again after Redis came back"
    );
    let report = check(
        &fleet.records(),
        &resource_log(&res_server.url()).await,
        &fleet.cut_off_times(),
    );

    let mut fleet_detections = Vec::new();
    let mut recoveries = Vec::new();
    let mut released_during_outage = 0;
    for &(t_down, t_up) in &outages {
        for s in report
            .sections
            .iter()
            .filter(|s| s.enter < t_down && s.exit > t_down)
        {
            if s.exit < t_up {
                released_during_outage += 1;
                continue;
            }
            assert!(
                s.knew_lost(),
                "holder {} never learnt it lost the lock",
                s.id
            );
            let by_release = s
                .release
                .starts_with("lost:")
                .then_some(s.released_at)
                .flatten();
            let detected = [s.lost_at, by_release].into_iter().flatten().min().unwrap();
            fleet_detections.push(signed_ms(detected, t_up));
        }
        let next = report.first_enter_after(t_up, None).expect("recovered");
        recoveries.push(ms(next - t_up));
    }
    // Every worker process recovered by itself after the last restart.
    report.debug_dump(last_up);
    if std::env::var("FAULTS_DEBUG").is_ok() {
        for r in fleet.records() {
            if r["k"] != "enter" && r["k"] != "exit" {
                let t = r["t"].as_u64().unwrap();
                println!("{} rel={}", r, signed_ms(t, last_up));
            }
        }
    }
    for worker in 0..3 {
        assert!(
            report.sections_of(worker).any(|s| s.enter > last_up),
            "worker {worker} never acquired again after Redis came back"
        );
    }
    let rejected_after = report
        .sections
        .iter()
        .filter(|s| s.enter > outages[0].1)
        .map(|s| s.writes_rejected)
        .sum::<u64>();
    println!(
        "{}",
        result_line(
            "3",
            "redis-restart-empty",
            runs,
            &report,
            &format!(
                "recovery_ms={} (first worker acquisition after each restart {recoveries:?}; \
                 long holders' lost signal {lost_signals:?} ms after Redis was back, renewal \
                 period 333 ms; same clients re-acquired in {reacquired:?} ms; waiter \
                 (woken ms after restart, failed attempts, first error) {waiters:?}; worker \
                 holders learnt the loss {fleet_detections:?} ms after; {released_during_outage} \
                 releases fell in the outage; {rejected_after} writes refused after the \
                 restart because fencing tokens restart at 1)",
                recoveries.iter().max().unwrap()
            )
        )
    );
    for &d in lost_signals.iter().chain(&fleet_detections) {
        assert!(
            d <= (SEC + SLACK).as_millis() as i64,
            "loss noticed {d} ms after restart"
        );
    }
    assert_eq!(report.overlaps, 0, "{:?}", report.overlap_pairs);
    assert_eq!(report.stale_accepted, 0);
    assert!(
        report.max_wait_overrun_ms < 1500,
        "an acquire overran its wait"
    );
}

// ---- 4. A TCP fault proxy between the client and Redis ------------------------------------

/// 4a. Depth-2 reentrant hold; the connection breaks while the inner release is in
/// flight (after Redis ran it, and before it reached Redis): one decrement each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_4a_release_retried_over_a_broken_connection_decrements_once() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port).await;
    let client = proxied_client(&proxy, 30 * SEC, SEC).await;
    warm_up(&client, None).await;
    let mut conn = server.conn().await;
    let release_sha = script_sha(include_str!("../lua/release.lua"));
    let owner = "retry-owner".to_string();
    let lock = client.lock("retry").unwrap().with_owner(&owner).unwrap();
    let count = |conn: &mut redis::aio::MultiplexedConnection| {
        let mut conn = conn.clone();
        let key = lock.key().to_owned();
        let owner = owner.clone();
        async move { conn.hget::<_, _, Option<u64>>(key, owner).await.unwrap() }
    };
    let mut runs = 0;
    let mut slowest = Duration::ZERO;
    for cut_after in [true, false] {
        let outer = lock.acquire().await.unwrap();
        let inner = lock.acquire().await.unwrap();
        assert_eq!(count(&mut conn).await, Some(2));
        let cuts = proxy.cuts();
        if cut_after {
            proxy.cut_after_request_containing(&release_sha);
        } else {
            proxy.cut_before_request_containing(&release_sha);
        }
        let started = Instant::now();
        inner.release().await.expect("the retried release succeeds");
        let took = started.elapsed();
        slowest = slowest.max(took);
        assert_eq!(proxy.cuts(), cuts + 1, "the proxy did not cut the release");
        assert_eq!(
            count(&mut conn).await,
            Some(1),
            "a retried release decremented twice (cut after: {cut_after})"
        );
        println!(
            "4a: release with the connection cut {} Redis ran it: ok after {took:?}",
            if cut_after { "after" } else { "before" }
        );
        outer.release().await.unwrap();
        assert_eq!(count(&mut conn).await, None);
        runs += 1;
    }
    println!(
        "FAULT 4a release-over-broken-connection: runs={runs} acquisitions={} overlaps=0 \
         stale_accepted=0 recovery_ms={} (slowest retried release; double_decrements=0)",
        runs * 2,
        slowest.as_millis()
    );
}

/// 4b. The proxy drops the waiter's pub/sub connection (FIN, then RST); the waiter
/// resubscribes and is still woken by the release, long before the 30 s lease.
/// (Breaking the waiter's command connection too is 4f.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_4b_waiter_resubscribes_after_its_pubsub_connection_drops() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port).await;
    let holder = server.client(30 * SEC).await;
    let waiter = proxied_client(&proxy, 30 * SEC, SEC).await;
    let conn = server.conn().await;
    let channel = holder.lock("wake").unwrap().channel().to_owned();
    let subscribed = |n: i64| {
        let conn = conn.clone();
        let channel = channel.clone();
        move || {
            let mut conn = conn.clone();
            let channel = channel.clone();
            async move { numsub(&mut conn, &channel).await == n }
        }
    };
    let mut hand_offs = Vec::new();
    for reset in [false, true] {
        let guard = holder.lock("wake").unwrap().acquire().await.unwrap();
        let lock = waiter.lock("wake").unwrap();
        let waiting = tokio::spawn(async move {
            let guard = lock.acquire_timeout(25 * SEC).await?;
            let at = Instant::now();
            guard.release().await?;
            Ok::<_, Error>(at)
        });
        assert!(
            eventually(5 * SEC, subscribed(1)).await,
            "waiter never subscribed"
        );
        let accepted = proxy.accepted();
        let dropped = if reset {
            proxy.reset_pubsub()
        } else {
            proxy.drop_pubsub()
        };
        assert!(dropped >= 1);
        assert!(
            eventually(5 * SEC, || async { proxy.accepted() > accepted }).await,
            "no reconnection through the proxy"
        );
        let resubscribed = eventually(5 * SEC, subscribed(1)).await;
        let pubsub_conns = proxy.pubsub_connections();
        assert!(
            resubscribed && pubsub_conns == 1,
            "the waiter did not resubscribe (reset: {reset}, numsub==1: {resubscribed}, \
             pub/sub connections through the proxy: {pubsub_conns})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        let woke = tokio::time::timeout(10 * SEC, waiting)
            .await
            .expect("the waiter was not woken after its connection broke")
            .unwrap()
            .expect("the waiter survives the broken connection");
        hand_offs.push(woke.saturating_duration_since(released));
    }
    println!(
        "FAULT 4b waiter-resubscribes: runs=2 acquisitions=4 overlaps=0 stale_accepted=0 \
         recovery_ms={} (hand-off after FIN / RST of the pub/sub connection: {hand_offs:?}; lease 30 s)",
        hand_offs.iter().max().unwrap().as_millis()
    );
    for hand_off in hand_offs {
        assert!(hand_off < 3 * SEC, "woken by the lease, not the release");
    }
}

/// 4c. A partition (the proxy holds every byte): nothing hangs past its wait limit plus
/// the response timeout, and the releases held back in the partition land exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_4c_partition_never_hangs_past_the_wait_limit() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port).await;
    let response = Duration::from_millis(500);
    // What a wait may overrun its limit by, beyond one response timeout: scheduling on a
    // loaded machine (a hang would be seconds past it).
    let margin = 2 * SEC;
    let holder = server.client(30 * SEC).await;
    let client = proxied_client(&proxy, 30 * SEC, response).await;
    warm_up(&client, None).await;
    let mut conn = server.conn().await;
    let held = holder.lock("part").unwrap().acquire().await.unwrap();
    let lock = client.lock("part").unwrap();
    let mine = client.lock("mine").unwrap();
    let outer = mine.acquire().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    let mine_owner = outer.owner().to_owned();

    proxy.stall(true);
    let mut worst = Duration::ZERO;
    let wait = SEC;
    let started = Instant::now();
    let outcome = lock.acquire_timeout(wait).await;
    let took = started.elapsed();
    println!("4c: acquire_timeout(1 s) in a partition: {outcome:?} after {took:?}");
    assert!(matches!(
        outcome,
        Err(Error::Timeout { .. } | Error::Redis(_))
    ));
    assert!(took <= wait + response + margin, "{took:?}");
    worst = worst.max(took.saturating_sub(wait));

    let started = Instant::now();
    let outcome = lock.acquire().await;
    let took = started.elapsed();
    println!("4c: acquire() in a partition: {outcome:?} after {took:?}");
    assert!(matches!(outcome, Err(Error::Redis(_))));
    assert!(took <= response + margin, "{took:?}");
    worst = worst.max(took);

    // A release in the partition: three attempts, each bounded by the response timeout.
    let started = Instant::now();
    let outcome = inner.release().await;
    let took = started.elapsed();
    println!("4c: release() in a partition: {outcome:?} after {took:?}");
    assert!(matches!(outcome, Err(Error::Redis(_))));
    assert!(took <= 3 * response + margin, "{took:?}");

    // Heal: the held-back release requests now reach Redis; the latch makes them count
    // once (depth 2 -> 1, not 0).
    let (held_back, _) = proxy.forwarded();
    proxy.stall(false);
    assert!(
        eventually(10 * SEC, || async { proxy.forwarded().0 > held_back }).await,
        "the held-back requests were never delivered"
    );
    // They went out together; let Redis run them all before looking.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let count: Option<u64> = conn.hget(mine.key(), &mine_owner).await.unwrap();
    assert_eq!(
        count,
        Some(1),
        "held-back release retries decremented more than once"
    );

    // And the waiter path works again.
    let started = Instant::now();
    let outcome = lock.acquire_timeout(wait).await;
    let took = started.elapsed();
    assert!(matches!(outcome, Err(Error::Timeout { .. })), "{outcome:?}");
    assert!(took <= wait + response + margin, "{took:?}");
    held.release().await.unwrap();
    let started = Instant::now();
    lock.acquire_timeout(5 * SEC)
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let recovery = started.elapsed();
    outer.release().await.unwrap();
    println!(
        "FAULT 4c partition-no-hang: runs=1 acquisitions=4 overlaps=0 stale_accepted=0 \
         recovery_ms={} (acquire after the heal; max overrun of a wait limit {} ms with \
         response timeout 500 ms; held-back release retries decremented once)",
        recovery.as_millis(),
        worst.as_millis()
    );
}

/// 4d. Load through a flapping proxy: two clients × tasks through the proxy, which drops
/// or resets every connection every few hundred ms and adds latency in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_4d_load_through_a_flapping_proxy() {
    let runs = 4 * scale();
    let lock_server = RedisServer::start();
    let res_server = RedisServer::start();
    let proxy = FaultProxy::start(lock_server.port).await;
    let dir = tempfile::tempdir().unwrap();
    let run = Duration::from_millis(1000 + runs * 500);
    let mut groups = Vec::new();
    for id in 0..2 {
        let cfg = WorkerConfig {
            id,
            lock_url: proxy.url(),
            resource_url: res_server.url(),
            lock_name: LOCK.into(),
            log: dir.path().join(format!("w{id:03}.jsonl")),
            tasks: 2 + scale() as usize / 2,
            run,
            hold: Duration::from_millis(20),
            write_every: Duration::from_millis(10),
            think: Duration::from_millis(5),
            watchdog: 2 * SEC,
            check_interval: None,
            wait: 3 * SEC,
            response_timeout: Duration::from_millis(500),
            end_on_lost: false,
            shutdown_runtime_after: None,
        };
        let client = proxied_client(&proxy, cfg.watchdog, cfg.response_timeout).await;
        groups.push(tokio::spawn(async move {
            let log = Log::open(&cfg.log);
            run_tasks(&cfg, &client, &log, &Arc::new(AtomicUsize::new(0))).await;
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut broken = 0;
    for i in 0..runs {
        proxy.set_delay(Duration::from_millis(if i % 2 == 0 { 5 } else { 0 }));
        broken += if i % 2 == 0 {
            proxy.drop_all()
        } else {
            proxy.reset_all()
        };
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    proxy.set_delay(Duration::ZERO);
    for group in groups {
        tokio::time::timeout(run + 30 * SEC, group)
            .await
            .expect("a task hung")
            .expect("a task panicked");
    }
    let report = check(
        &read_records(dir.path()),
        &resource_log(&res_server.url()).await,
        &HashMap::new(),
    );
    println!(
        "{}",
        result_line(
            "4d",
            "flapping-proxy-load",
            runs,
            &report,
            &format!(
                "connections_broken={broken} reentered_after_lost_acquire_reply={} errors_by_kind={:?}",
                report.reentered, report.error_messages
            )
        )
    );
    assert_eq!(report.overlaps, 0, "{:?}", report.overlap_pairs);
    assert_eq!(report.stale_accepted, 0);
    assert!(report.acquisitions > 0);
    assert!(
        report.max_wait_overrun_ms < 1500,
        "an acquire overran its wait"
    );
}

/// 4e. The connection breaks after Redis ran an acquire but before its reply arrived.
/// The lock is free, so the acquire is the bare `SET <key> <value> NX PX <lease>` (a first
/// hold in the string form, see `lua/take.lua`), and that is the request cut.
/// The caller either adopts the hold (the probe, `lua/probe.lua`, finds the string naming
/// its request) or gets `Error::Redis`; a hold it cannot know about must not block the
/// lock for everyone else for a whole lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_4e_lost_acquire_reply_strands_no_hold() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port).await;
    let client = proxied_client(&proxy, 30 * SEC, SEC).await;
    let other = server.client(30 * SEC).await;
    warm_up(&client, None).await;
    let lock = client.lock("stranded").unwrap();
    proxy.cut_after_request_containing(&take_pattern());
    let outcome = lock.acquire().await;
    println!("4e: acquire with its reply cut: {outcome:?}");
    assert_eq!(proxy.cuts(), 1);
    // Either the caller got the lock (the library resolved the ambiguity) or nobody holds it.
    match outcome {
        Ok(guard) => guard.release().await.unwrap(),
        Err(Error::Redis(_)) => {}
        Err(other) => panic!("unexpected {other:?}"),
    }
    // The library resolves a lost reply in the background; flush() waits for that.
    tokio::time::timeout(10 * SEC, client.flush())
        .await
        .expect("background reconciliation hung");
    let state = other.lock("stranded").unwrap().state().await.unwrap();
    assert!(
        !state.is_locked(),
        "an acquire whose reply was lost left a hold nobody tracks: {state:?}"
    );
}

/// 4f. Every connection of a waiting client is reset while it waits (30 s lease, 25 s
/// wait limit). Redis is reachable again at once, so the waiter should keep waiting and be
/// woken by the release rather than fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_4f_waiter_survives_a_reset_of_all_its_connections() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port).await;
    let holder = server.client(30 * SEC).await;
    let waiter = proxied_client(&proxy, 30 * SEC, SEC).await;
    warm_up(&waiter, None).await;
    let guard = holder.lock("blip").unwrap().acquire().await.unwrap();
    let lock = waiter.lock("blip").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = lock.acquire_timeout(25 * SEC).await?;
        guard.release().await?;
        Ok::<_, Error>(())
    });
    assert!(eventually(5 * SEC, || async { waiter.waiting_channels() == 1 }).await);
    assert!(proxy.reset_all() >= 2);
    tokio::time::sleep(SEC).await;
    guard.release().await.unwrap();
    let outcome = tokio::time::timeout(10 * SEC, waiting)
        .await
        .expect("hung")
        .unwrap();
    println!("4f: waiter after a reset of all its connections: {outcome:?}");
    outcome.expect("the waiter keeps waiting through a connection reset");
}

// ---- 5. SCRIPT FLUSH under load ----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_5_script_flush_under_load() {
    let s = scale();
    let lock_server = RedisServer::start();
    let res_server = RedisServer::start();
    let mut fleet = Fleet::new();
    let run = Duration::from_millis(3000 * s);
    for id in 0..3 {
        let mut cfg = base_config(id, &lock_server, &res_server, &fleet);
        cfg.tasks = 3 + s as usize / 2;
        cfg.hold = Duration::from_millis(5);
        cfg.write_every = Duration::from_millis(5);
        cfg.run = SCRIPTED_RUN_CEILING;
        if id == 0 {
            // Long holds renewed every 100 ms, so renewals run through the flushes too;
            // the 3 s lease keeps a process stalled by the machine's load in its lease.
            cfg.tasks = 1;
            cfg.watchdog = 3 * SEC;
            cfg.check_interval = Some(Duration::from_millis(100));
            cfg.hold = Duration::from_millis(400);
            cfg.think = Duration::from_millis(600);
            cfg.write_every = Duration::from_millis(50);
        }
        fleet.spawn(&cfg);
    }
    fleet.wait_started(30 * SEC).await;
    let mut conn = lock_server.conn().await;
    let started = Instant::now();
    let mut flushes = 0u64;
    while started.elapsed() < run {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut conn)
            .await
            .unwrap();
        flushes += 1;
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    fleet.stop();
    fleet.wait_all(30 * SEC).await;
    let report = check(
        &fleet.records(),
        &resource_log(&res_server.url()).await,
        &fleet.cut_off_times(),
    );
    let lost = report.sections.iter().filter(|s| s.knew_lost()).count();
    let failed_releases = report
        .sections
        .iter()
        .filter(|s| s.release != "ok")
        .map(|s| s.release.clone())
        .collect::<Vec<_>>();
    println!(
        "{}",
        result_line(
            "5",
            "script-flush-under-load",
            flushes,
            &report,
            &format!(
                "recovery_ms=0 (SCRIPT FLUSH every ~2 ms: {flushes} flushes; lost={lost} \
                 failed_releases={})",
                failed_releases.len()
            )
        )
    );
    assert_eq!(
        report.errors, 0,
        "errors reached callers: {:?}",
        report.error_messages
    );
    assert!(failed_releases.is_empty(), "{failed_releases:?}");
    assert_eq!(lost, 0, "a renewal failed after a flush");
    assert_in_model(&report);
}

// ---- 6. The holder's runtime shuts down while holding --------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_6_holder_runtime_shuts_down_while_holding() {
    let runs = scale();
    let lock_server = RedisServer::start();
    let res_server = RedisServer::start();
    let mut fleet = Fleet::new();
    let gap = Duration::from_millis(2500);
    let run = SEC + gap * runs as u32 + 3 * SEC;
    for id in 0..2 + runs as usize {
        let mut cfg = base_config(id, &lock_server, &res_server, &fleet);
        cfg.hold = Duration::from_millis(100);
        cfg.think = Duration::from_millis(20);
        cfg.run = run;
        if id >= 2 {
            cfg.shutdown_runtime_after = Some(SEC + gap * (id as u32 - 2));
        }
        fleet.spawn(&cfg);
    }
    fleet.wait_started(30 * SEC).await;
    // A monitor records, for every owner, when Redis last showed its hold.
    let observer = lock_server.client(30 * SEC).await;
    let lock = observer.lock(LOCK).unwrap();
    let last_seen = Arc::new(parking_lot::Mutex::new(HashMap::<String, u64>::new()));
    let monitor = {
        let last_seen = last_seen.clone();
        tokio::spawn(async move {
            loop {
                let state = lock.state().await.unwrap();
                let now = now_us();
                {
                    let mut seen = last_seen.lock();
                    for (owner, _) in state.holders {
                        seen.insert(owner, now);
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    fleet.wait_all(run + 30 * SEC).await;
    monitor.abort();
    let records = fleet.records();
    let mut frees = Vec::new();
    for worker in 2..2 + runs as usize {
        let down = records
            .iter()
            .find(|r| r["k"] == "runtime_down" && r["w"] == worker)
            .map(|r| r["t"].as_u64().unwrap())
            .unwrap_or_else(|| panic!("worker {worker}'s runtime never went down"));
        let ended: Vec<&str> = records
            .iter()
            .filter(|r| r["k"] == "exit" && r["w"] == worker)
            .map(|r| r["id"].as_str().unwrap())
            .collect();
        let held: Vec<&str> = records
            .iter()
            .filter(|r| r["k"] == "enter" && r["w"] == worker)
            .filter(|r| !ended.contains(&r["id"].as_str().unwrap()))
            .map(|r| r["owner"].as_str().unwrap())
            .collect();
        assert_eq!(held.len(), 1, "worker {worker} held the lock at shutdown");
        let last = last_seen.lock().get(held[0]).copied().unwrap_or(down);
        frees.push((worker, down, last.max(down)));
    }
    fleet.wait_all(run + 30 * SEC).await;
    // The runtime-less processes are still alive: this is not a process crash.
    for worker in fleet.workers.iter_mut().filter(|w| w.lingers) {
        assert!(
            worker.child.try_wait().unwrap().is_none(),
            "worker {} died with its runtime",
            worker.id
        );
    }
    let report = check(
        &fleet.records(),
        &resource_log(&res_server.url()).await,
        &fleet.cut_off_times(),
    );
    let mut recoveries = Vec::new();
    for &(worker, down, freed) in &frees {
        let recovery = ms(freed - down);
        recoveries.push(recovery);
        assert!(
            Duration::from_millis(recovery) <= SEC + SLACK,
            "worker {worker}: the lock freed {recovery} ms after its runtime went down"
        );
    }
    println!(
        "{}",
        result_line(
            "6",
            "runtime-shutdown-while-holding",
            runs,
            &report,
            &format!(
                "recovery_ms={} (hold gone from Redis after each shutdown {recoveries:?}: \
                 the lease expires, the dropped guard's release cannot run on a dying \
                 runtime; watchdog 1000 ms)",
                recoveries.iter().max().unwrap()
            )
        )
    );
    assert_in_model(&report);
    assert_eq!(report.errors, 0, "{:?}", report.error_messages);
}

/// Soundness issue, item 3: an acquire whose reply is lost in a partition that outlasts
/// every quick retry (here 5 s, response timeout 500 ms) leaves no orphan: once Redis
/// answers again, the background reconciliation gives the hold back, long before its
/// 30 s lease would have freed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_lost_in_a_long_partition_leaves_no_orphan() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port).await;
    let response = Duration::from_millis(500);
    let client = proxied_client(&proxy, 30 * SEC, response).await;
    warm_up(&client, None).await;
    let mut conn = server.conn().await;
    let lock = client.lock("orphan").unwrap();
    // The writes that take the lock: the bare `SET NX PX` of a free lock (`lua/take.lua`),
    // and `acquire.lua`'s (a string with `SET`, a hash with `HSET`).
    let takes = ["set", "hset"];
    let before = common::command_calls(&mut conn, &takes).await;

    proxy.stall(true);
    let outcome = lock.acquire_timeout(2 * SEC).await;
    assert!(outcome.is_err(), "{outcome:?}");
    tokio::time::sleep(3 * SEC).await;
    proxy.stall(false);
    let healed = Instant::now();
    // The held-back acquire reaches Redis now and runs; then the reconciliation finds it.
    // Wait for the run first: a key that is absent before it ran would prove nothing.
    let ran = eventually(5 * SEC, || {
        let mut conn = conn.clone();
        async move { common::command_calls(&mut conn, &takes).await > before }
    })
    .await;
    assert!(ran, "the acquire never ran: the test proved nothing");
    let gone = eventually(5 * SEC, || {
        let mut conn = conn.clone();
        async move {
            !conn
                .exists::<_, bool>("redis-locks:{orphan}")
                .await
                .unwrap()
        }
    })
    .await;
    println!(
        "long partition: hold gone {:?} after the heal",
        healed.elapsed()
    );
    assert!(gone, "the orphan stayed for its lease");
    // And the lock is free for anyone.
    let other = server.client(30 * SEC).await;
    let guard = other.lock("orphan").unwrap().try_acquire().await.unwrap();
    assert!(guard.is_some());
    guard.unwrap().release().await.unwrap();
}
