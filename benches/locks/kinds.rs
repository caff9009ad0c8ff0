//! The lock family's scenarios, each against the simplest correct raw baseline in the
//! same run, on the benchmark's single server:
//!
//! - K1 semaphore: 8 tasks (each its own client) contend for 4 permits, acquire + release
//!   in a loop; and 1 task alone (serial cycles). Raw baseline: one Lua script that drops
//!   expired members, admits if `ZCARD < size` (`ZADD token deadline`), and a `ZREM` to
//!   give back; its waiters poll every 1 ms (it has no wake-up).
//! - K2 count-down latch: serial count-downs (the library's exactly-once script against a
//!   raw `DECR`-and-delete-at-zero script), and the time from the opening count-down in one
//!   client to the wake-up of a waiter in another.
//! - K3 read-write lock: see [`k3`]; K4 fair lock: see [`k4`]; K5 semaphore hand-off: see
//!   [`k5`].

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis_locks::LockClient;
use serde_json::json;

use super::report::{Outcome, Row, num, ratio};
use super::scenarios::Ctx;
use super::util::{Res, err, manager, r1, r2, summarize_ns};

const RAW_SEM_ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
  return 1
end
return 0
";

const RAW_LATCH_DOWN: &str = r"
local n = redis.call('DECR', KEYS[1])
if n <= 0 then
  redis.call('DEL', KEYS[1])
  return 0
end
return n
";

/// Cycles/s of `tasks` tasks for `run`, each running `cycle` in a loop.
async fn cycles<F, Fut>(tasks: usize, run: Duration, cycle: F) -> Res<f64>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Res<()>> + Send,
{
    let cycle = Arc::new(cycle);
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for task in 0..tasks {
        let (cycle, done) = (cycle.clone(), done.clone());
        set.spawn(async move {
            while started.elapsed() < run {
                cycle(task).await?;
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, super::util::BoxError>(())
        });
    }
    while let Some(joined) = set.join_next().await {
        joined??;
    }
    Ok(done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64())
}

pub async fn k1(ctx: &mut Ctx) -> Res<Outcome> {
    let run = Duration::from_millis(if ctx.quick { 1000 } else { 3000 });
    let mut out = Outcome::new("K1", "semaphore: 8 tasks on 4 permits; 1 task alone");
    let size = 4u64;
    let mut clients = Vec::new();
    for _ in 0..8 {
        clients.push(LockClient::connect(&ctx.url).await?);
    }
    clients[0].semaphore("k1")?.set_permits(size).await?;
    let lib_sems: Arc<Vec<_>> = Arc::new(
        clients
            .iter()
            .map(|c| c.semaphore("k1"))
            .collect::<Result<_, _>>()?,
    );
    let raw_conn = manager(&ctx.url).await?;
    let raw_script = Arc::new(redis::Script::new(RAW_SEM_ACQUIRE));
    let token = Arc::new(AtomicU64::new(0));
    let raw_cycle = {
        let (conn, script, token) = (raw_conn.clone(), raw_script.clone(), token.clone());
        move |_task: usize| {
            let (mut conn, script, token) = (conn.clone(), script.clone(), token.clone());
            async move {
                let id = token.fetch_add(1, Ordering::Relaxed).to_string();
                loop {
                    let got: i64 = script
                        .key("raw:{k1}:permits")
                        .arg(size)
                        .arg(&id)
                        .arg(30_000)
                        .invoke_async(&mut conn)
                        .await?;
                    if got == 1 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let _: i64 = redis::cmd("ZREM")
                    .arg("raw:{k1}:permits")
                    .arg(&id)
                    .query_async(&mut conn)
                    .await?;
                Ok(())
            }
        }
    };
    let lib_cycle = {
        let sems = lib_sems.clone();
        move |task: usize| {
            let sems = sems.clone();
            async move {
                let permit = sems[task % sems.len()].acquire(1).await?;
                permit.release().await?;
                Ok(())
            }
        }
    };
    // Warm-up, then alternate.
    cycles(8, Duration::from_millis(200), lib_cycle.clone()).await?;
    cycles(8, Duration::from_millis(200), raw_cycle.clone()).await?;
    let lib8 = cycles(8, run, lib_cycle.clone()).await?;
    let raw8 = cycles(8, run, raw_cycle.clone()).await?;
    let lib1 = cycles(1, run, lib_cycle).await?;
    let raw1 = cycles(1, run, raw_cycle).await?;
    let state = lib_sems[0].state().await?;
    if state.in_use != 0 {
        out.fail(format!(
            "{} permits still in use after the run",
            state.in_use
        ));
    }
    out.set(
        "cycles_per_sec",
        json!({"lib_8_tasks": r1(lib8), "raw_8_tasks": r1(raw8), "lib_1_task": r1(lib1), "raw_1_task": r1(raw1)}),
    );
    out.set("params", json!({"permits": size, "seconds": run.as_secs_f64(),
        "raw": "Lua: drop expired, admit if ZCARD < size (ZADD), ZREM to give back; waiters poll every 1 ms"}));
    out.row(
        Row::new("acquire + release cycles/s, 8 tasks on 4 permits")
            .lib(num(lib8))
            .raw(num(raw8))
            .ratio(ratio(lib8, raw8)),
    );
    out.row(
        Row::new("acquire + release cycles/s, 1 task")
            .lib(num(lib1))
            .raw(num(raw1))
            .ratio(ratio(lib1, raw1)),
    );
    Ok(out)
}

pub async fn k2(ctx: &mut Ctx) -> Res<Outcome> {
    let rounds = if ctx.quick { 2000 } else { 10000 };
    let mut out = Outcome::new("K2", "count-down latch: serial count-downs; wake-up");
    let a = LockClient::connect(&ctx.url).await?;
    let b = LockClient::connect(&ctx.url).await?;
    let latch = a.latch("k2")?;
    let mut raw = manager(&ctx.url).await?;
    let raw_script = redis::Script::new(RAW_LATCH_DOWN);
    latch.try_set_count(1_000_000_000).await?;
    let _: () = redis::cmd("SET")
        .arg("raw:{k2}")
        .arg(1_000_000_000)
        .query_async(&mut raw)
        .await?;
    for _ in 0..200 {
        latch.count_down().await?;
        let _: i64 = raw_script.key("raw:{k2}").invoke_async(&mut raw).await?;
    }
    let (mut lib_ns, mut raw_ns) = (Vec::new(), Vec::new());
    for _ in 0..rounds / 100 {
        for _ in 0..100 {
            let t = Instant::now();
            latch.count_down().await?;
            lib_ns.push(t.elapsed().as_nanos() as u64);
        }
        for _ in 0..100 {
            let t = Instant::now();
            let _: i64 = raw_script.key("raw:{k2}").invoke_async(&mut raw).await?;
            raw_ns.push(t.elapsed().as_nanos() as u64);
        }
    }
    latch.delete().await?;
    let (lib, rawsum) = (summarize_ns(&lib_ns), summarize_ns(&raw_ns));
    // Wake-up: the opening count-down in A to the waiter's return in B.
    let mut wakes = Vec::new();
    for i in 0..if ctx.quick { 20 } else { 100 } {
        let name = format!("k2-wake-{i}");
        let closing = a.latch(&name)?;
        closing.try_set_count(1).await?;
        let waiting = b.latch(&name)?.with_recheck(Duration::from_secs(30))?;
        let waiter = tokio::spawn(async move {
            waiting.wait().await?;
            Ok::<_, redis_locks::Error>(Instant::now())
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
        let opened = Instant::now();
        closing.count_down().await?;
        let woke = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .map_err(|_| err("a latch waiter never woke"))???;
        wakes.push(woke.saturating_duration_since(opened).as_nanos() as u64);
    }
    let wake = summarize_ns(&wakes);
    out.set(
        "count_down_us",
        json!({"lib": lib.json(), "raw": rawsum.json(), "lib_vs_raw_p50": r2(lib.p50 / rawsum.p50)}),
    );
    out.set("wake_us", wake.json());
    out.row(
        Row::new("count-down p50 / p99 µs")
            .lib(format!("{} / {}", num(lib.p50), num(lib.p99)))
            .raw(format!("{} / {}", num(rawsum.p50), num(rawsum.p99)))
            .ratio(ratio(lib.p50, rawsum.p50)),
    );
    out.row(
        Row::new("opening count-down → waiter in another client returns, p50 / p99 µs")
            .lib(format!("{} / {}", num(wake.p50), num(wake.p99))),
    );
    Ok(out)
}

/// A raw read lock: drop expired readers; admit unless a writer key exists.
const RAW_READ_ACQUIRE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
return 1
";

/// K3: the read-write lock. Read cycles (8 tasks, 4 clients) against a raw read lock (a
/// sorted set of readers and a writer key, one Lua script to enter, `ZREM` to leave);
/// write cycles (1 task) against the library's own exclusive lock; and how long a writer
/// waits under a stream of 6 overlapping readers (writer preference).
pub async fn k3(ctx: &mut Ctx) -> Res<Outcome> {
    let run = Duration::from_millis(if ctx.quick { 1000 } else { 3000 });
    let mut out = Outcome::new(
        "K3",
        "read-write lock: reads (8 tasks), writes (1 task), a writer under a stream of readers",
    );
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(LockClient::connect(&ctx.url).await?);
    }
    let rws: Arc<Vec<_>> = Arc::new(
        clients
            .iter()
            .map(|c| c.rw_lock("k3"))
            .collect::<Result<_, _>>()?,
    );
    let raw_conn = manager(&ctx.url).await?;
    let raw_script = Arc::new(redis::Script::new(RAW_READ_ACQUIRE));
    let token = Arc::new(AtomicU64::new(0));
    let raw_read = {
        let (conn, script, token) = (raw_conn.clone(), raw_script.clone(), token.clone());
        move |_task: usize| {
            let (mut conn, script, token) = (conn.clone(), script.clone(), token.clone());
            async move {
                let id = token.fetch_add(1, Ordering::Relaxed).to_string();
                let got: i64 = script
                    .key("raw:{k3}:read")
                    .key("raw:{k3}:write")
                    .arg(&id)
                    .arg(30_000)
                    .invoke_async(&mut conn)
                    .await?;
                if got != 1 {
                    return Err(err("the raw read lock refused a reader with no writer"));
                }
                let _: i64 = redis::cmd("ZREM")
                    .arg("raw:{k3}:read")
                    .arg(&id)
                    .query_async(&mut conn)
                    .await?;
                Ok(())
            }
        }
    };
    let lib_read = {
        let rws = rws.clone();
        move |task: usize| {
            let rws = rws.clone();
            async move {
                let guard = rws[task % rws.len()].read().await?;
                guard.release().await?;
                Ok(())
            }
        }
    };
    let lib_write = {
        let rws = rws.clone();
        move |_task: usize| {
            let rws = rws.clone();
            async move {
                let guard = rws[0].write().await?;
                guard.release().await?;
                Ok(())
            }
        }
    };
    let lock_write = {
        let lock = Arc::new(clients[0].lock("k3-exclusive")?);
        move |_task: usize| {
            let lock = lock.clone();
            async move {
                let guard = lock.acquire().await?;
                guard.release().await?;
                Ok(())
            }
        }
    };
    cycles(8, Duration::from_millis(200), lib_read.clone()).await?;
    cycles(8, Duration::from_millis(200), raw_read.clone()).await?;
    let lib8 = cycles(8, run, lib_read).await?;
    let raw8 = cycles(8, run, raw_read).await?;
    let write1 = cycles(1, run, lib_write).await?;
    let lock1 = cycles(1, run, lock_write).await?;
    // A writer under a stream of readers whose holds always overlap.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut readers = tokio::task::JoinSet::new();
    for i in 0..6u64 {
        let (rw, stop) = (rws[i as usize % rws.len()].clone(), stop.clone());
        readers.spawn(async move {
            tokio::time::sleep(Duration::from_millis(3 * i)).await;
            while !stop.load(Ordering::Relaxed) {
                let guard = rw.read().await?;
                tokio::time::sleep(Duration::from_millis(15 + 4 * i)).await;
                guard.release().await?;
            }
            Ok::<_, redis_locks::Error>(())
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut waits = Vec::new();
    for _ in 0..if ctx.quick { 10 } else { 30 } {
        let started = Instant::now();
        let guard = rws[3]
            .try_write_for(Duration::from_secs(10))
            .await?
            .ok_or_else(|| err("a writer starved for 10 s under a stream of readers"))?;
        waits.push(started.elapsed().as_nanos() as u64);
        guard.release().await?;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    while let Some(joined) = readers.join_next().await {
        joined??;
    }
    let state = rws[0].state().await?;
    if state.is_locked() {
        out.fail(format!("holds left after the run: {state:?}"));
    }
    let wait = summarize_ns(&waits);
    out.set(
        "cycles_per_sec",
        json!({"lib_read_8_tasks": r1(lib8), "raw_read_8_tasks": r1(raw8),
               "lib_write_1_task": r1(write1), "lib_lock_1_task": r1(lock1)}),
    );
    out.set("writer_wait_under_readers_us", wait.json());
    out.row(
        Row::new("read + release cycles/s, 8 tasks, 4 clients")
            .lib(num(lib8))
            .raw(num(raw8))
            .ratio(ratio(lib8, raw8)),
    );
    out.row(
        Row::new("write + release cycles/s, 1 task (raw column: the library's exclusive lock)")
            .lib(num(write1))
            .raw(num(lock1))
            .ratio(ratio(write1, lock1)),
    );
    out.row(
        Row::new("writer wait under 6 overlapping readers (15-35 ms holds), p50 / p99 µs")
            .lib(format!("{} / {}", num(wait.p50), num(wait.p99))),
    );
    Ok(out)
}

/// K4: the fair lock. Four clients, one task each, contending for one name with a short
/// think time outside the lock: acquisitions/s and the spread between clients (max/min),
/// for the fair lock and, in the same run, the library's plain lock (which is not fair).
pub async fn k4(ctx: &mut Ctx) -> Res<Outcome> {
    let run = Duration::from_millis(if ctx.quick { 1000 } else { 3000 });
    let mut out = Outcome::new(
        "K4",
        "fair lock: 4 clients contend for 1 name (1 ms think time), against the plain lock",
    );
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(LockClient::connect(&ctx.url).await?);
    }
    let fair: Arc<Vec<_>> = Arc::new(
        clients
            .iter()
            .map(|c| c.fair_lock("k4"))
            .collect::<Result<_, _>>()?,
    );
    let plain: Arc<Vec<_>> = Arc::new(
        clients
            .iter()
            .map(|c| c.lock("k4-plain"))
            .collect::<Result<_, _>>()?,
    );
    // Per-client counts of one contended run.
    async fn contend<F, Fut>(run: Duration, cycle: F) -> Res<Vec<u64>>
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Res<()>> + Send,
    {
        let cycle = Arc::new(cycle);
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for task in 0..4 {
            let cycle = cycle.clone();
            set.spawn(async move {
                let mut done = 0u64;
                while started.elapsed() < run {
                    cycle(task).await?;
                    done += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Ok::<_, super::util::BoxError>(done)
            });
        }
        let mut counts = Vec::new();
        while let Some(joined) = set.join_next().await {
            counts.push(joined??);
        }
        Ok(counts)
    }
    let fair_cycle = {
        let fair = fair.clone();
        move |task: usize| {
            let fair = fair.clone();
            async move {
                let guard = fair[task].acquire().await?;
                guard.release().await?;
                Ok(())
            }
        }
    };
    let plain_cycle = {
        let plain = plain.clone();
        move |task: usize| {
            let plain = plain.clone();
            async move {
                let guard = plain[task].acquire().await?;
                guard.release().await?;
                Ok(())
            }
        }
    };
    contend(Duration::from_millis(200), fair_cycle.clone()).await?;
    let fair_counts = contend(run, fair_cycle).await?;
    let plain_counts = contend(run, plain_cycle).await?;
    let rate = |counts: &[u64]| counts.iter().sum::<u64>() as f64 / run.as_secs_f64();
    let spread = |counts: &[u64]| {
        let min = counts.iter().copied().min().unwrap_or(0).max(1) as f64;
        counts.iter().copied().max().unwrap_or(0) as f64 / min
    };
    let (fair_rate, plain_rate) = (rate(&fair_counts), rate(&plain_counts));
    let state = fair[0].state().await?;
    if state.is_locked() || state.waiters > 0 {
        out.fail(format!("fair lock not empty after the run: {state:?}"));
    }
    out.set(
        "acquisitions_per_sec",
        json!({"fair": r1(fair_rate), "plain": r1(plain_rate)}),
    );
    out.set(
        "per_client",
        json!({"fair": fair_counts, "plain": plain_counts,
               "fair_max_over_min": r2(spread(&fair_counts)), "plain_max_over_min": r2(spread(&plain_counts))}),
    );
    out.row(
        Row::new("acquisitions/s, 4 clients on 1 name (raw column: the plain lock)")
            .lib(num(fair_rate))
            .raw(num(plain_rate))
            .ratio(ratio(fair_rate, plain_rate)),
    );
    out.row(
        Row::new("per-client acquisitions, max / min")
            .lib(format!("{:.2}", spread(&fair_counts)))
            .raw(format!("{:.2}", spread(&plain_counts))),
    );
    Ok(out)
}

/// K5 local hand-off: `tasks` tasks of one client each take a 1-permit semaphore, work
/// 10 ms and give it back; the same shape on the plain lock is the baseline. Every
/// hand-off here is between waiters of one process, woken by one release message: it
/// measures that the wake-up reaches the waiter the permit is kept for (issue #23 found
/// each hand-off past the second costing the 700 ms re-check).
pub async fn k5(ctx: &mut Ctx) -> Res<Outcome> {
    let tasks = if ctx.quick { 20 } else { 100 };
    let work = Duration::from_millis(10);
    let mut out = Outcome::new(
        "K5",
        format!("semaphore hand-off: {tasks} tasks of one client on 1 permit, 10 ms work"),
    );
    let client = LockClient::connect(&ctx.url).await?;
    let semaphore = client.semaphore("k5")?;
    semaphore.set_permits(1).await?;
    let lock = client.lock("k5")?;
    let mut lib = Vec::new();
    let mut base = Vec::new();
    for _round in 0..if ctx.quick { 1 } else { 3 } {
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..tasks {
            let semaphore = semaphore.clone();
            set.spawn(async move {
                let permit = semaphore.acquire(1).await?;
                tokio::time::sleep(work).await;
                permit.release().await?;
                Ok::<_, redis_locks::Error>(())
            });
        }
        while let Some(joined) = set.join_next().await {
            joined??;
        }
        lib.push(started.elapsed().as_secs_f64());
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..tasks {
            let lock = lock.clone();
            set.spawn(async move {
                let guard = lock.acquire().await?;
                tokio::time::sleep(work).await;
                guard.release().await?;
                Ok::<_, redis_locks::Error>(())
            });
        }
        while let Some(joined) = set.join_next().await {
            joined??;
        }
        base.push(started.elapsed().as_secs_f64());
    }
    let median = |values: &mut Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values[values.len() / 2]
    };
    let (lib, base) = (median(&mut lib), median(&mut base));
    out.set(
        "seconds",
        json!({"semaphore": r2(lib), "plain_lock": r2(base), "tasks": tasks}),
    );
    out.row(
        Row::new(format!("seconds for {tasks} hand-offs (median of rounds)"))
            .lib(format!("{lib:.2}"))
            .raw(format!("{base:.2} (plain lock)"))
            .ratio(ratio(base, lib)),
    );
    Ok(out)
}
