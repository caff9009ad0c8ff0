//! The scenarios S1–S7 (see `docs/performance.md` and issue #3).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, MultiplexedConnection};
use redis_locks::{Lock, LockClient, LockGuard};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use super::report::{Outcome, Row, num, ratio};
use super::rslock_impl;
use super::util::{
    self, BoxError, CmdStats, LibScripts, Meter, Metered, Raw, Res, Summary, add_into, cmds_json,
    commandstats, count_cmds, delta, err, now_us, ns, ping_rtt, r1, r2, summarize_ns,
};
use super::workers::{ROLE_ENV, wait_for_value};

/// What every scenario gets.
pub struct Ctx {
    pub url: String,
    pub quick: bool,
    /// INFO, FLUSHALL and checks go over this connection, never over a measured one.
    pub control: MultiplexedConnection,
    /// For PING round trips (the library's connection type).
    pub cm: ConnectionManager,
    pub exe: PathBuf,
    /// Seed URLs of the benchmark's Redis Cluster, once a cluster scenario started it.
    pub cluster_seeds: Vec<String>,
}

impl Ctx {
    pub async fn flushall(&mut self) -> Res<()> {
        let _: () = redis::cmd("FLUSHALL")
            .query_async(&mut self.control)
            .await?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The implementations behind one interface
// ---------------------------------------------------------------------------------------

#[derive(Clone)]
enum Imp {
    Lib(LockClient),
    Raw(Arc<Raw>),
    Rs(rslock_impl::LockManager),
    /// Diagnostic: the library's Lua scripts without the library's client code.
    Diag(Arc<LibScripts>),
}

enum Handle {
    Lib(Lock),
    Raw(Arc<Raw>, String),
    Rs(rslock_impl::LockManager, String),
    Diag(Arc<LibScripts>, String),
}

const LEASE: Duration = Duration::from_secs(30);

/// Index of each implementation in the vectors below.
const LIB: usize = 0;
const RAW: usize = 1;
const RSL: usize = 2;
const DIAG: usize = 3;
/// 1 when owner ARGV[1] holds the reentrant lock KEYS[1], in either form (see
/// `lua/acquire.lua`), else 0. Read-only.
const OWNER_HOLDS: &str = "#!lua flags=no-writes
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'hash' then return redis.call('HEXISTS', KEYS[1], ARGV[1]) end
if kind ~= 'string' then return 0 end
local value = redis.call('GET', KEYS[1])
local owner = string.match(value, '^[\\1\\2][^\\1]+\\1(.+)$')
return owner == ARGV[1] and 1 or 0";

const LABELS: [&str; 4] = ["redis-locks", "raw", "rslock", "diag_lib_scripts_direct"];

impl Imp {
    async fn all(url: &str) -> Res<Vec<Imp>> {
        Ok(vec![
            Imp::Lib(LockClient::connect(url).await?),
            Imp::Raw(Raw::connect(url).await?),
            Imp::Rs(rslock_impl::LockManager::new(vec![url.to_owned()])),
            Imp::Diag(LibScripts::connect(url).await?),
        ])
    }

    /// Commands this client sends at top level besides scripts (see `util::TOP_LEVEL`).
    fn extra_top(&self) -> &'static [&'static str] {
        // Every implementation takes a free lock with a bare SET (the library's
        // lua/take.lua). Commandstats counts a SET run inside a script the same way; in
        // these uncontended scenarios the library's scripts run none.
        &["set"]
    }

    /// The prefix of every key this implementation writes (see `handle`).
    fn key_prefix(&self) -> String {
        match self {
            Imp::Lib(client) => format!("{}:", client.prefix()),
            Imp::Raw(_) => "raw:".into(),
            Imp::Rs(_) => "rslock:".into(),
            Imp::Diag(_) => "diag:".into(),
        }
    }

    fn handle(&self, name: &str) -> Res<Handle> {
        Ok(match self {
            Imp::Lib(client) => Handle::Lib(client.lock(name)?),
            Imp::Raw(raw) => Handle::Raw(raw.clone(), format!("raw:{name}")),
            Imp::Rs(manager) => Handle::Rs(manager.clone(), format!("rslock:{name}")),
            Imp::Diag(diag) => Handle::Diag(diag.clone(), name.to_owned()),
        })
    }
}

impl Handle {
    /// One uncontended acquire + release: (acquire ns, release ns).
    async fn cycle(&self) -> Res<(u64, u64)> {
        let t0 = Instant::now();
        match self {
            Handle::Lib(lock) => {
                let guard = lock.acquire().await?;
                let t1 = Instant::now();
                guard.release().await?;
                Ok((ns(t1 - t0), ns(t1.elapsed())))
            }
            Handle::Raw(raw, key) => {
                let token = raw
                    .try_acquire(key, LEASE.as_millis() as u64)
                    .await?
                    .ok_or_else(|| err(format!("raw: {key} unexpectedly held")))?;
                let t1 = Instant::now();
                if !raw.release(key, &token).await? {
                    return Err(err(format!("raw: {key} was not ours at release")));
                }
                Ok((ns(t1 - t0), ns(t1.elapsed())))
            }
            Handle::Rs(manager, key) => {
                let lock = manager.lock(key.as_bytes(), LEASE).await?;
                let t1 = Instant::now();
                lock.release().await;
                Ok((ns(t1 - t0), ns(t1.elapsed())))
            }
            Handle::Diag(diag, name) => {
                let hold = diag.acquire(name).await?;
                let t1 = Instant::now();
                diag.release(name, &hold).await?;
                Ok((ns(t1 - t0), ns(t1.elapsed())))
            }
        }
    }
}

#[derive(Default, Clone)]
struct Acc {
    cycle: Vec<u64>,
    acquire: Vec<u64>,
    release: Vec<u64>,
    cycles: u64,
    elapsed: Duration,
    m: Metered,
}

/// Per-cycle costs of one implementation.
struct Costs {
    round_trips: f64,
    commands: f64,
    server_us: f64,
    redis_cpu_us: f64,
    client_cpu_us: f64,
}

impl Acc {
    fn rate(&self) -> f64 {
        self.cycles as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    fn costs(&self, extra_top: &[&str]) -> Costs {
        let c = count_cmds(&self.m.cmds, extra_top);
        let n = self.cycles.max(1) as f64;
        Costs {
            round_trips: c.top as f64 / n,
            commands: c.all as f64 / n,
            server_us: c.top_usec as f64 / n,
            redis_cpu_us: self.m.redis_cpu_us / n,
            client_cpu_us: self.m.client_cpu_us / n,
        }
    }
    fn json(&self, extra_top: &[&str], latencies: bool) -> Value {
        let c = self.costs(extra_top);
        let mut v = json!({
            "cycles": self.cycles,
            "seconds": r2(self.elapsed.as_secs_f64()),
            "cycles_per_sec": r1(self.rate()),
            "cycle": summarize_ns(&self.cycle).json(),
            "round_trips_per_cycle": r2(c.round_trips),
            "commands_per_cycle_incl_scripts": r2(c.commands),
            "redis_exec_us_per_cycle": r2(c.server_us),
            "redis_cpu_us_per_cycle": r2(c.redis_cpu_us),
            "client_cpu_us_per_cycle": r2(c.client_cpu_us),
            "commandstats_calls_usec": cmds_json(&self.m.cmds),
        });
        if latencies {
            v["acquire"] = summarize_ns(&self.acquire).json();
            v["release"] = summarize_ns(&self.release).json();
        }
        v
    }
}

/// `n` serial cycles in one spawned task (the library's default owner is the task).
async fn serial(handle: Arc<Handle>, n: usize) -> Res<Acc> {
    tokio::spawn(async move {
        let mut acc = Acc {
            cycle: Vec::with_capacity(n),
            acquire: Vec::with_capacity(n),
            release: Vec::with_capacity(n),
            ..Acc::default()
        };
        let start = Instant::now();
        for _ in 0..n {
            let (a, r) = handle.cycle().await?;
            acc.acquire.push(a);
            acc.release.push(r);
            acc.cycle.push(a + r);
        }
        acc.elapsed = start.elapsed();
        acc.cycles = n as u64;
        Ok::<_, BoxError>(acc)
    })
    .await?
}

fn merge(into: &mut Acc, from: Acc) {
    into.cycle.extend(from.cycle);
    into.acquire.extend(from.acquire);
    into.release.extend(from.release);
    into.cycles += from.cycles;
    into.elapsed += from.elapsed;
    into.m.add(&from.m);
}

/// Table rows shared by S1 and S2: per-cycle costs of each implementation.
fn cost_rows(out: &mut Outcome, accs: &[Acc], imps: &[Imp]) {
    let c: Vec<Costs> = accs
        .iter()
        .zip(imps)
        .map(|(a, imp)| a.costs(imp.extra_top()))
        .collect();
    let f = |c: &Costs| format!("{:.2} ({:.1})", c.round_trips, c.commands);
    out.row(
        Row::new("round trips / cycle (all cmds incl. in scripts)")
            .lib(f(&c[LIB]))
            .raw(f(&c[RAW]))
            .rslock(f(&c[RSL])),
    );
    let g = |c: &Costs| format!("{} / {}", num(c.client_cpu_us), num(c.redis_cpu_us));
    out.row(
        Row::new("CPU µs / cycle: client / redis-server")
            .lib(g(&c[LIB]))
            .raw(g(&c[RAW]))
            .rslock(g(&c[RSL]))
            .ratio(format!(
                "{} / {}",
                ratio(c[LIB].client_cpu_us, c[RAW].client_cpu_us),
                ratio(c[LIB].redis_cpu_us, c[RAW].redis_cpu_us)
            )),
    );
    // Server time of the commands the client sent (a script's time includes the commands
    // it runs), summed over a cycle: what one cycle costs Redis.
    let exec = c[LIB].server_us / c[RAW].server_us.max(1e-9);
    out.set("lib_vs_raw_redis_exec_us_per_cycle", json!(r2(exec)));
    let met = out.check("Redis exec µs/cycle vs raw", "<= 2x raw", exec, exec <= 2.0);
    out.row(
        Row::new("Redis exec µs / cycle (commandstats)")
            .lib(num(c[LIB].server_us))
            .raw(num(c[RAW].server_us))
            .rslock(num(c[RSL].server_us))
            .ratio(ratio(c[LIB].server_us, c[RAW].server_us))
            .target("≤ 2× raw", met),
    );
    let per_call = |acc: &Acc, imp: &Imp| {
        let k = count_cmds(&acc.m.cmds, imp.extra_top());
        k.top_usec as f64 / k.top.max(1) as f64
    };
    let pc: Vec<f64> = accs.iter().zip(imps).map(|(a, i)| per_call(a, i)).collect();
    // Of the scripts' time: the commands they ran, and the rest (Lua, argument handling).
    let split = |acc: &Acc, imp: &Imp| {
        let (mut scripts, mut inner) = (0u64, 0u64);
        for (name, c) in &acc.m.cmds {
            let base = name.split('|').next().unwrap_or(name);
            if base == "evalsha" || base == "eval" {
                scripts += c.usec;
            } else if !util::TOP_LEVEL.contains(&base) && !imp.extra_top().contains(&base) {
                inner += c.usec;
            }
        }
        let n = acc.cycles.max(1) as f64;
        format!(
            "{} / {}",
            num(inner as f64 / n),
            num(scripts.saturating_sub(inner) as f64 / n)
        )
    };
    out.row(
        Row::new("of the scripts' exec µs / cycle: commands inside / Lua and call overhead")
            .lib(split(&accs[LIB], &imps[LIB]))
            .raw(split(&accs[RAW], &imps[RAW]))
            .rslock(split(&accs[RSL], &imps[RSL])),
    );
    out.row(
        Row::new("Redis exec µs / top-level call (commandstats)")
            .lib(num(pc[LIB]))
            .raw(num(pc[RAW]))
            .rslock(num(pc[RSL]))
            .ratio(ratio(pc[LIB], pc[RAW])),
    );
}

/// After every lock of S1 or S2 was released: the keys left in Redis, in all and by the
/// implementation that wrote them (by key prefix). Target: none.
async fn keys_left_rows(ctx: &mut Ctx, out: &mut Outcome, imps: &[Imp]) -> Res<()> {
    let prefixes: Vec<(&str, String)> = LABELS
        .iter()
        .zip(imps)
        .map(|(label, imp)| (*label, imp.key_prefix()))
        .collect();
    let (total, by) = util::keys_left(&mut ctx.control, &prefixes).await?;
    out.set("keys_left_in_redis_after_all_released", json!(total));
    out.set("keys_left_by_impl", json!(by));
    let met = out.check(
        "keys left after all released",
        "0",
        total as f64,
        total == 0,
    );
    let of = |i: usize| by.get(LABELS[i]).copied().unwrap_or(0).to_string();
    out.row(
        Row::new("keys left in Redis after every lock was released")
            .lib(of(LIB))
            .raw(of(RAW))
            .rslock(of(RSL))
            .ratio(format!("{total} in all"))
            .target("0", met),
    );
    Ok(())
}

/// Runs `batch` for each implementation, `rounds` times, rotating the order so drift in
/// machine load hits all of them; commands and CPU are metered around each batch.
async fn interleaved<F, Fut>(
    ctx: &mut Ctx,
    imps: &[Imp],
    rounds: usize,
    mut batch: F,
) -> Res<Vec<Acc>>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Res<Acc>>,
{
    let mut accs = vec![Acc::default(); imps.len()];
    for round in 0..rounds {
        for k in 0..imps.len() {
            let i = (round + k) % imps.len();
            let meter = Meter::start(&mut ctx.control).await?;
            let mut acc = batch(i).await?;
            acc.m = meter.stop(&mut ctx.control).await?;
            merge(&mut accs[i], acc);
        }
    }
    Ok(accs)
}

// ---------------------------------------------------------------------------------------
// S1 serial
// ---------------------------------------------------------------------------------------

/// One handle per implementation on the lock `name`, each warmed by `warm` serial cycles.
async fn warmed_handles(imps: &[Imp], name: &str, warm: usize) -> Res<Vec<Arc<Handle>>> {
    let handles: Vec<Arc<Handle>> = imps
        .iter()
        .map(|imp| imp.handle(name).map(Arc::new))
        .collect::<Res<_>>()?;
    for handle in &handles {
        serial(handle.clone(), warm).await?;
    }
    Ok(handles)
}

/// S1's cycles again, on a current-thread runtime in a thread of its own, with clients of
/// its own (the library, raw, rslock; taking turns as in [`interleaved`], no meters).
///
/// Why: on the benchmark's multi-thread runtime a serial loop runs in one of two modes,
/// about 3× apart on this VM, and which one is luck: with two workers, a connection
/// whose calls happen to be answered while a worker is still awake gets ~22 µs per call,
/// one whose calls wait for an idle worker to be woken gets ~60–70. The mode sticks to
/// a connection for the run, and lands on any implementation (five `--scenario S1` runs
/// of one build: the library's acquire p50 ~24 µs in one, ~56–74 in four; raw's ~22–27
/// in four). A ratio between two connections in different modes measures the luck, not
/// the lock. On one thread every implementation's calls wake the same thread the same
/// way, so the ratio compares what each does per cycle.
async fn s1_current_thread(
    url: String,
    rounds: usize,
    per_round: usize,
    warm: usize,
) -> Res<Vec<Acc>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let measured = (|| -> Res<Vec<Acc>> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let imps = [
                    Imp::Lib(LockClient::connect(&url).await?),
                    Imp::Raw(Raw::connect(&url).await?),
                    Imp::Rs(rslock_impl::LockManager::new(vec![url.clone()])),
                ];
                let handles = warmed_handles(&imps, "s1-one-thread", warm).await?;
                let mut accs = vec![Acc::default(); handles.len()];
                for round in 0..rounds {
                    for k in 0..handles.len() {
                        let i = (round + k) % handles.len();
                        let acc = serial(handles[i].clone(), per_round).await?;
                        merge(&mut accs[i], acc);
                    }
                }
                Ok(accs)
            })
        })();
        let _ = tx.send(measured);
    });
    rx.await
        .map_err(|_| err("S1 on one thread: the measuring thread ended without a result"))?
}

pub async fn s1(ctx: &mut Ctx) -> Res<Outcome> {
    // Many short interleaved batches, so bursts of load from other processes on the
    // machine spread evenly over the implementations (this matters for p99).
    let (rounds, per_round, warm) = if ctx.quick {
        (10, 200, 300)
    } else {
        (40, 250, 1000)
    };
    let mut out = Outcome::new("S1", "serial: 1 task, 1 name");
    let imps = Imp::all(&ctx.url).await?;
    let handles = warmed_handles(&imps, "s1", warm).await?;
    let accs = interleaved(ctx, &imps, rounds, |i| {
        serial(handles[i].clone(), per_round)
    })
    .await?;
    drop(handles);
    let sums: Vec<Summary> = accs.iter().map(|a| summarize_ns(&a.cycle)).collect();
    let acq: Vec<Summary> = accs.iter().map(|a| summarize_ns(&a.acquire)).collect();
    let rel: Vec<Summary> = accs.iter().map(|a| summarize_ns(&a.release)).collect();
    let rates: Vec<f64> = accs.iter().map(Acc::rate).collect();
    for (i, label) in LABELS.iter().enumerate() {
        out.set(label, accs[i].json(imps[i].extra_top(), true));
    }
    out.set(
        "params",
        json!({"rounds": rounds, "cycles_per_round": per_round, "warmup": warm, "lease_ms": 30000}),
    );
    let thr = rates[LIB] / rates[RAW];
    let p99 = sums[LIB].p99 / sums[RAW].p99;
    out.set("lib_vs_raw_cycles_per_sec", json!(r2(thr)));
    out.set(
        "lib_vs_rslock_cycles_per_sec",
        json!(r2(rates[LIB] / rates[RSL])),
    );
    out.set("lib_vs_raw_p99", json!(r2(p99)));
    let vs_rs = rates[LIB] / rates[RSL];
    let m1 = out.check("cycles/s vs raw", ">= 0.95x raw", thr, thr >= 0.95);
    let m1r = out.check(
        "cycles/s vs rslock",
        ">= 0.95x rslock",
        vs_rs,
        vs_rs >= 0.95,
    );
    let m2 = out.check("p99 vs raw p99", "<= 1.2x raw p99", p99, p99 <= 1.2);
    out.row(
        Row::new("cycles/s")
            .lib(num(rates[LIB]))
            .raw(num(rates[RAW]))
            .rslock(num(rates[RSL]))
            .ratio(format!(
                "{} raw, {} rslock",
                ratio(rates[LIB], rates[RAW]),
                ratio(rates[LIB], rates[RSL])
            ))
            .target("≥ 0.95× raw and ≥ 0.95× rslock", m1 && m1r),
    );
    let one = s1_current_thread(ctx.url.clone(), rounds, per_round, warm).await?;
    let one_rates: Vec<f64> = one.iter().map(Acc::rate).collect();
    let one_p50: Vec<f64> = one.iter().map(|a| summarize_ns(&a.cycle).p50).collect();
    let (one_raw, one_rs) = (
        one_rates[LIB] / one_rates[RAW],
        one_rates[LIB] / one_rates[RSL],
    );
    out.set(
        "current_thread",
        json!({"why": "the same cycles on a current-thread runtime: no thread-placement luck",
               "cycles_per_sec": {"redis-locks": r1(one_rates[LIB]), "raw": r1(one_rates[RAW]),
                                  "rslock": r1(one_rates[RSL])},
               "cycle_p50_us": {"redis-locks": r1(one_p50[LIB]), "raw": r1(one_p50[RAW]),
                                "rslock": r1(one_p50[RSL])},
               "lib_vs_raw_cycles_per_sec": r2(one_raw),
               "lib_vs_rslock_cycles_per_sec": r2(one_rs)}),
    );
    let m3 = out.check(
        "cycles/s vs raw, current-thread runtime",
        ">= 0.95x raw",
        one_raw,
        one_raw >= 0.95,
    );
    let m3r = out.check(
        "cycles/s vs rslock, current-thread runtime",
        ">= 0.95x rslock",
        one_rs,
        one_rs >= 0.95,
    );
    out.row(
        Row::new("cycles/s on a current-thread runtime (no thread-placement luck); cycle p50 µs")
            .lib(format!("{}; {}", num(one_rates[LIB]), num(one_p50[LIB])))
            .raw(format!("{}; {}", num(one_rates[RAW]), num(one_p50[RAW])))
            .rslock(format!("{}; {}", num(one_rates[RSL]), num(one_p50[RSL])))
            .ratio(format!(
                "{} raw, {} rslock",
                ratio(one_rates[LIB], one_rates[RAW]),
                ratio(one_rates[LIB], one_rates[RSL])
            ))
            .target("≥ 0.95× raw and ≥ 0.95× rslock", m3 && m3r),
    );
    out.row(
        Row::new("cycle p50 µs")
            .lib(num(sums[LIB].p50))
            .raw(num(sums[RAW].p50))
            .rslock(num(sums[RSL].p50))
            .ratio(ratio(sums[LIB].p50, sums[RAW].p50)),
    );
    out.row(
        Row::new("cycle p99 µs")
            .lib(num(sums[LIB].p99))
            .raw(num(sums[RAW].p99))
            .rslock(num(sums[RSL].p99))
            .ratio(ratio(sums[LIB].p99, sums[RAW].p99))
            .target("≤ 1.2× raw p99", m2),
    );
    let ar = |i: usize| format!("{} / {}", num(acq[i].p50), num(rel[i].p50));
    out.row(
        Row::new("acquire / release p50 µs")
            .lib(ar(LIB))
            .raw(ar(RAW))
            .rslock(ar(RSL)),
    );
    cost_rows(&mut out, &accs, &imps);
    let label = "diagnostic: library's Lua scripts sent directly \
                 (cycles/s; cycle p50 / p99 µs; acquire / release p50 µs)";
    out.row(
        Row::new(label)
            .lib(format!(
                "{}; {} / {}; {}",
                num(rates[DIAG]),
                num(sums[DIAG].p50),
                num(sums[DIAG].p99),
                ar(DIAG)
            ))
            .ratio(format!("{} raw", ratio(rates[DIAG], rates[RAW]))),
    );
    keys_left_rows(ctx, &mut out, &imps).await?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// S2 parallel
// ---------------------------------------------------------------------------------------

async fn parallel(imp: Imp, tasks: usize, duration: Duration, tag: &'static str) -> Res<Acc> {
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let end = start + duration;
    let mut set = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let handle = imp.handle(&format!("s2:{tag}:{t}"))?;
        set.spawn(async move {
            let mut cycles = Vec::with_capacity(4096);
            tokio::time::sleep_until(start).await;
            while tokio::time::Instant::now() < end {
                let (a, r) = handle.cycle().await?;
                cycles.push(a + r);
            }
            Ok::<_, BoxError>((cycles, tokio::time::Instant::now()))
        });
    }
    let mut acc = Acc::default();
    let mut last = end;
    while let Some(joined) = set.join_next().await {
        let (cycles, finished) = joined??;
        last = last.max(finished);
        acc.cycles += cycles.len() as u64;
        acc.cycle.extend(cycles);
    }
    acc.elapsed = last - start;
    Ok(acc)
}

pub async fn s2(ctx: &mut Ctx) -> Res<Outcome> {
    let tasks = 64;
    let (rounds, dur) = if ctx.quick {
        (4, Duration::from_millis(300))
    } else {
        (10, Duration::from_millis(800))
    };
    let mut out = Outcome::new("S2", "parallel: 64 tasks, distinct names, 1 client");
    let imps = Imp::all(&ctx.url).await?;
    for imp in &imps {
        parallel(imp.clone(), tasks, Duration::from_millis(300), "warm").await?;
    }
    let accs = interleaved(ctx, &imps, rounds, |i| {
        parallel(imps[i].clone(), tasks, dur, "run")
    })
    .await?;
    let rates: Vec<f64> = accs.iter().map(Acc::rate).collect();
    let sums: Vec<Summary> = accs.iter().map(|a| summarize_ns(&a.cycle)).collect();
    for (i, label) in LABELS.iter().enumerate() {
        out.set(label, accs[i].json(imps[i].extra_top(), false));
    }
    out.set(
        "params",
        json!({"tasks": tasks, "rounds": rounds, "seconds_per_round": dur.as_secs_f64()}),
    );
    let thr = rates[LIB] / rates[RAW];
    out.set("lib_vs_raw_cycles_per_sec", json!(r2(thr)));
    out.set(
        "lib_vs_rslock_cycles_per_sec",
        json!(r2(rates[LIB] / rates[RSL])),
    );
    let met = out.check("cycles/s vs raw", ">= 0.8x raw", thr, thr >= 0.8);
    out.row(
        Row::new("cycles/s")
            .lib(num(rates[LIB]))
            .raw(num(rates[RAW]))
            .rslock(num(rates[RSL]))
            .ratio(format!(
                "{} raw, {} rslock",
                ratio(rates[LIB], rates[RAW]),
                ratio(rates[LIB], rates[RSL])
            ))
            .target("≥ 0.8× raw", met),
    );
    let pp = |i: usize| format!("{} / {}", num(sums[i].p50), num(sums[i].p99));
    out.row(
        Row::new("cycle p50 / p99 µs")
            .lib(pp(LIB))
            .raw(pp(RAW))
            .rslock(pp(RSL)),
    );
    cost_rows(&mut out, &accs, &imps);
    out.row(
        Row::new("diagnostic: library's Lua scripts sent directly (cycles/s)")
            .lib(num(rates[DIAG]))
            .ratio(format!("{} raw", ratio(rates[DIAG], rates[RAW]))),
    );
    keys_left_rows(ctx, &mut out, &imps).await?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Worker processes
// ---------------------------------------------------------------------------------------

struct Proc {
    role: String,
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    stdin: Option<ChildStdin>,
}

fn spawn_worker(ctx: &Ctx, role: &str, env: &[(&str, String)]) -> Res<Proc> {
    let mut cmd = Command::new(&ctx.exe);
    cmd.env(ROLE_ENV, role)
        .env("RLB_URL", &ctx.url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| err("worker stdout missing"))?;
    let stdin = child.stdin.take();
    Ok(Proc {
        role: role.to_owned(),
        child,
        lines: BufReader::new(stdout).lines(),
        stdin,
    })
}

impl Proc {
    /// The next JSON line the worker prints; an `"error"` field becomes an error.
    async fn json(&mut self, limit: Duration) -> Res<Value> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .map_err(|_| err(format!("worker {} silent for {limit:?}", self.role)))??
                .ok_or_else(|| err(format!("worker {} exited without a result", self.role)))?;
            if !line.starts_with('{') {
                continue;
            }
            let value: Value = serde_json::from_str(&line)?;
            if let Some(e) = value.get("error") {
                return Err(err(format!("worker {} failed: {e}", self.role)));
            }
            return Ok(value);
        }
    }

    async fn send_line(&mut self) -> Res<()> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| err("worker stdin missing"))?;
        stdin.write_all(b"go\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    async fn finish(mut self, limit: Duration) -> Res<()> {
        drop(self.stdin.take());
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(status) => {
                let status = status?;
                if status.success() {
                    Ok(())
                } else {
                    Err(err(format!("worker {} exited with {status}", self.role)))
                }
            }
            Err(_) => {
                let _ = self.child.kill().await;
                Err(err(format!("worker {} did not exit; killed", self.role)))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// S3 contended
// ---------------------------------------------------------------------------------------

pub(crate) struct S3Run {
    pub(crate) counts: Vec<u64>,
    pub(crate) late: u64,
    pub(crate) violations: u64,
    pub(crate) wait_p99_us: f64,
    /// Think time outside the lock as measured in the workers: mean of the processes'
    /// means, mean of their p50s, worst p99 (µs).
    pub(crate) think_mean_us: f64,
    pub(crate) think_p50_us: f64,
    pub(crate) think_p99_us: f64,
    /// Mean over the processes of their mean acquire wait, critical section, release (µs).
    pub(crate) acquire_mean_us: f64,
    pub(crate) section_mean_us: f64,
    pub(crate) release_mean_us: f64,
    /// Acquisitions (all processes) whose wait exceeded 100 / 200 / 500 / 1000 µs.
    pub(crate) waits_over: [u64; 4],
    pub(crate) acquisitions: u64,
    /// Lock commands (not the critical section's) per acquisition, and their Redis exec µs.
    pub(crate) lock_calls: f64,
    pub(crate) lock_exec_us: f64,
    pub(crate) redis_cpu_us: f64,
    /// The workers' CPU per acquisition (all threads, think-time spin included).
    pub(crate) client_cpu_us: f64,
    pub(crate) cmds: CmdStats,
    pub(crate) rate: f64,
}

pub(crate) async fn s3_variant(
    ctx: &mut Ctx,
    imp: &str,
    procs: usize,
    duration: Duration,
) -> Res<S3Run> {
    let name = format!("s3-{imp}");
    let start_us = now_us() + 1_500_000;
    let mut workers = Vec::new();
    for id in 0..procs {
        workers.push(spawn_worker(
            ctx,
            "s3",
            &[
                ("RLB_IMPL", imp.to_owned()),
                ("RLB_ID", id.to_string()),
                ("RLB_START_US", start_us.to_string()),
                ("RLB_DURATION_MS", duration.as_millis().to_string()),
                ("RLB_NAME", name.clone()),
                ("RLB_SEEDS", ctx.cluster_seeds.join(",")),
            ],
        )?);
    }
    let limit = duration + Duration::from_secs(60);
    // Meter Redis from the common start time until every worker reported.
    let wait = Duration::from_micros(start_us.saturating_sub(now_us()));
    tokio::time::sleep(wait).await;
    let meter = Meter::start(&mut ctx.control).await?;
    let mut results = Vec::new();
    for worker in &mut workers {
        results.push(worker.json(limit).await?);
    }
    let metered = meter.stop(&mut ctx.control).await?;
    for worker in workers {
        worker.finish(Duration::from_secs(10)).await?;
    }
    let get = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let counts: Vec<u64> = results.iter().map(|v| get(v, "count")).collect();
    let late: u64 = results.iter().map(|v| get(v, "late")).sum();
    let violations: u64 = results.iter().map(|v| get(v, "violations")).sum();
    let wait_p99_us = results
        .iter()
        .filter_map(|v| v.pointer("/wait/p99_us").and_then(Value::as_f64))
        .fold(0.0, f64::max);
    let think = |field: &str| -> Vec<f64> {
        results
            .iter()
            .filter_map(|v| {
                v.pointer(&format!("/think/{field}"))
                    .and_then(Value::as_f64)
            })
            .collect()
    };
    let mean_of = |v: Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let think_mean_us = mean_of(think("mean_us"));
    let think_p50_us = mean_of(think("p50_us"));
    let think_p99_us = think("p99_us").into_iter().fold(0.0, f64::max);
    let mean_field = |ptr: &str| {
        mean_of(
            results
                .iter()
                .filter_map(|v| v.pointer(ptr).and_then(Value::as_f64))
                .collect(),
        )
    };
    let acquire_mean_us = mean_field("/wait/mean_us");
    let section_mean_us = mean_field("/critical_section/mean_us");
    let release_mean_us = mean_field("/release/mean_us");
    let over = |us: &str| -> u64 {
        results
            .iter()
            .filter_map(|v| {
                v.pointer(&format!("/waits_over_us/{us}"))
                    .and_then(Value::as_u64)
            })
            .sum()
    };
    let waits_over = [over("100"), over("200"), over("500"), over("1000")];
    let cpu: u64 = results.iter().map(|v| get(v, "cpu_us")).sum();
    let total: Option<u64> = redis::cmd("GET")
        .arg(format!("{name}:total"))
        .query_async(&mut ctx.control)
        .await?;
    let sum: u64 = counts.iter().sum::<u64>() + late;
    let per = sum.max(1) as f64;
    // The lock's own commands: scripts, pub/sub, and rslock's SET (the critical section's
    // INCR/DECR are not top-level commands in `util::TOP_LEVEL`). The library's bare SETs
    // (a first attempt's take of a free lock, lua/take.lua, and a woken waiter's) are left
    // out: commandstats cannot tell them from the SETs its scripts run here (acquire.lua
    // takes a free lock with one, and marks a held one with another), so the library's
    // figure is a lower bound (it was exact before the first hold became a string).
    let extra: &[&str] = if imp.starts_with("rslock") {
        &["set"]
    } else {
        &[]
    };
    let lock = count_cmds(&metered.cmds, extra);
    if total.unwrap_or(0) != sum {
        return Err(err(format!(
            "{imp}: counter says {total:?} critical sections, workers say {sum}"
        )));
    }
    Ok(S3Run {
        rate: counts.iter().sum::<u64>() as f64 / duration.as_secs_f64(),
        counts,
        late,
        violations,
        wait_p99_us,
        think_mean_us,
        think_p50_us,
        think_p99_us,
        acquire_mean_us,
        section_mean_us,
        release_mean_us,
        waits_over,
        acquisitions: sum,
        lock_calls: lock.top as f64 / per,
        lock_exec_us: lock.top_usec as f64 / per,
        redis_cpu_us: metered.redis_cpu_us / per,
        client_cpu_us: cpu as f64 / per,
        cmds: metered.cmds,
    })
}

pub async fn s3(ctx: &mut Ctx) -> Res<Outcome> {
    let procs = 4;
    let duration = Duration::from_millis(if ctx.quick { 1500 } else { 3000 });
    let mut out = Outcome::new("S3", "contended: 4 processes × 1 task, 1 name");
    let rtt = ping_rtt(&ctx.cm, 200, 1000).await?;
    let variants = ["redis-locks", "rslock", "rslock-10ms"];
    let mut runs = Vec::new();
    for imp in variants {
        let run = s3_variant(ctx, imp, procs, duration).await?;
        let min = run.counts.iter().copied().min().unwrap_or(0);
        let max = run.counts.iter().copied().max().unwrap_or(0);
        out.set(
            imp,
            json!({
                "acquisitions_per_sec": r1(run.rate),
                "per_process": run.counts,
                "per_process_min": min,
                "per_process_max": max,
                "max_over_min": if min > 0 { json!(r2(max as f64 / min as f64)) } else { Value::Null },
                "late": run.late,
                "violations": run.violations,
                "acquire_wait_p99_us_worst_process": r1(run.wait_p99_us),
                "think_us": {"mean": r1(run.think_mean_us), "p50": r1(run.think_p50_us),
                             "p99_worst_process": r1(run.think_p99_us)},
                "process_cycle_mean_us": {"acquire_wait": r1(run.acquire_mean_us),
                    "critical_section": r1(run.section_mean_us), "release": r1(run.release_mean_us),
                    "think": r1(run.think_mean_us)},
                "lock_round_trips_per_acquisition": r2(run.lock_calls),
                "lock_redis_exec_us_per_acquisition": r2(run.lock_exec_us),
                "redis_cpu_us_per_acquisition": r2(run.redis_cpu_us),
                "client_cpu_us_per_acquisition": r2(run.client_cpu_us),
                "commandstats_calls_usec": cmds_json(&run.cmds),
                "acquisitions_waiting_over_us": {"100": run.waits_over[0], "200": run.waits_over[1],
                    "500": run.waits_over[2], "1000": run.waits_over[3], "of": run.acquisitions},
            }),
        );
        if run.violations > 0 {
            out.fail(format!(
                "{imp}: {} mutual-exclusion violations",
                run.violations
            ));
        }
        runs.push(run);
    }
    // Ideal: the lock is busy for at least (critical-section round trips + 1) RTT per
    // acquisition (acquire reply, 2 RTT of critical section, release reaching Redis); and
    // each process needs at least its 1 ms think time + (cs + 2) RTT per acquisition.
    // The think time is the nominal 1 ms: `workers::think` keeps to it within a few µs
    // (reported as `think_us`), so the ratio to the ideal is the locks' own cost.
    let think_us = super::workers::THINK.as_secs_f64() * 1e6;
    let cs_rtts = 2.0;
    let serial_bound = 1e6 / ((cs_rtts + 1.0) * rtt.p50);
    let process_bound = procs as f64 * 1e6 / (think_us + (cs_rtts + 2.0) * rtt.p50);
    let ideal = serial_bound.min(process_bound);
    out.set(
        "ideal",
        json!({
            "rtt_p50_us": r1(rtt.p50),
            "critical_section_round_trips": cs_rtts,
            "lock_serial_bound_per_sec": r1(serial_bound),
            "process_bound_per_sec": r1(process_bound),
            "ideal_per_sec": r1(ideal),
        }),
    );
    out.set(
        "params",
        json!({"processes": procs, "seconds": duration.as_secs_f64(), "sleep_outside_ms": 1,
               "think": "1 ms outside the lock, the same for every implementation: thread sleep (timer slack 1 ns) to 60 µs before the deadline, then a spin (not tokio::time::sleep, which rounds up to ~2 ms)",
               "rslock": "acquire(): lock() with default retry (3 tries, random 0-200 ms), looped",
               "rslock-10ms": "same with set_retry(3, 10 ms)"}),
    );
    let lib = &runs[0];
    let rs = &runs[1];
    let rs10 = &runs[2];
    let vs = lib.rate / rs.rate.max(1e-9);
    let lmin = lib.counts.iter().copied().min().unwrap_or(0);
    let lmax = lib.counts.iter().copied().max().unwrap_or(0);
    let fair = if lmin > 0 {
        lmax as f64 / lmin as f64
    } else {
        f64::INFINITY
    };
    out.set("lib_vs_rslock", json!(r2(vs)));
    out.set(
        "lib_vs_rslock_10ms",
        json!(r2(lib.rate / rs10.rate.max(1e-9))),
    );
    let vs_ideal = lib.rate / ideal;
    out.set("lib_vs_ideal", json!(r2(vs_ideal)));
    out.set("vs_ideal", json!(r2(vs_ideal)));
    out.set("vs_rslock", json!(r2(vs)));
    out.set("rslock_vs_ideal", json!(r2(rs.rate / ideal)));
    out.set("rslock_10ms_vs_ideal", json!(r2(rs10.rate / ideal)));
    let m0 = out.check("acq/s vs ideal", ">= 0.9x ideal", vs_ideal, vs_ideal >= 0.9);
    let m1 = out.check("acq/s vs rslock", ">= 2x rslock", vs, vs >= 2.0);
    let m2 = out.check(
        "violations",
        "0",
        lib.violations as f64,
        lib.violations == 0,
    );
    let m3 = out.check("per-process max/min", "<= 1.5", fair, fair <= 1.5);
    let mm = |r: &S3Run| {
        format!(
            "{} / {}",
            r.counts.iter().min().unwrap_or(&0),
            r.counts.iter().max().unwrap_or(&0)
        )
    };
    out.row(
        Row::new("acquisitions/s")
            .lib(num(lib.rate))
            .rslock(num(rs.rate))
            .ratio(format!("{} rslock", ratio(lib.rate, rs.rate)))
            .target("≥ 2× rslock", m1),
    );
    out.row(
        Row::new("acquisitions/s, rslock retry 10 ms")
            .rslock(num(rs10.rate))
            .ratio(format!("{} rslock-10ms", ratio(lib.rate, rs10.rate))),
    );
    out.row(
        Row::new(format!(
            "ideal acq/s from RTT {} µs and 1 ms think time",
            num(rtt.p50)
        ))
        .lib(num(ideal))
        .rslock(format!(
            "{} of ideal; 10 ms: {}",
            ratio(rs.rate, ideal),
            ratio(rs10.rate, ideal)
        ))
        .ratio(format!("{} of ideal", ratio(lib.rate, ideal)))
        .target("≥ 0.9× ideal", m0),
    );
    let th = |r: &S3Run| format!("{} / {}", num(r.think_p50_us), num(r.think_p99_us));
    let bd = |r: &S3Run| {
        format!(
            "{} / {} / {}",
            num(r.acquire_mean_us),
            num(r.section_mean_us),
            num(r.release_mean_us)
        )
    };
    out.row(
        Row::new(format!(
            "per-process cycle means µs: acquire wait / critical section / release (ideal {} / {} / {})",
            num(rtt.p50),
            num(cs_rtts * rtt.p50),
            num(rtt.p50)
        ))
        .lib(bd(lib))
        .rslock(format!("{}; 10 ms: {}", bd(rs), bd(rs10))),
    );
    let pct = |r: &S3Run, k: usize| {
        format!(
            "{:.0} %",
            100.0 * r.waits_over[k] as f64 / r.acquisitions.max(1) as f64
        )
    };
    let costs = |r: &S3Run| {
        format!(
            "{:.2}; {} / {} / {}",
            r.lock_calls,
            num(r.lock_exec_us),
            num(r.redis_cpu_us),
            num(r.client_cpu_us)
        )
    };
    let label = "per acquisition: lock round trips; their Redis exec µs / \
                 Redis CPU µs / client CPU µs (4 processes, think spin included)";
    out.row(Row::new(label).lib(costs(lib)).rslock(format!(
        "{}; 10 ms: {}",
        costs(rs),
        costs(rs10)
    )));
    out.row(
        Row::new("acquisitions that waited > 200 µs / > 1 ms")
            .lib(format!("{} / {}", pct(lib, 1), pct(lib, 3)))
            .rslock(format!(
                "{} / {}; 10 ms: {} / {}",
                pct(rs, 1),
                pct(rs, 3),
                pct(rs10, 1),
                pct(rs10, 3)
            )),
    );
    out.row(
        Row::new("think time outside the lock, p50 / worst p99 µs (nominal 1000)")
            .lib(th(lib))
            .rslock(format!("{}; 10 ms: {}", th(rs), th(rs10))),
    );
    out.row(
        Row::new("per-process min / max")
            .lib(mm(lib))
            .rslock(format!("{}; 10 ms: {}", mm(rs), mm(rs10)))
            .ratio(if fair.is_finite() {
                format!("{fair:.2}")
            } else {
                "∞".into()
            })
            .target("max/min ≤ 1.5", m3),
    );
    out.row(
        Row::new("violations")
            .lib(lib.violations.to_string())
            .rslock(format!("{}; 10 ms: {}", rs.violations, rs10.violations))
            .target("0", m2),
    );
    out.row(
        Row::new("worst per-process acquire wait p99 µs")
            .lib(num(lib.wait_p99_us))
            .rslock(format!(
                "{}; 10 ms: {}",
                num(rs.wait_p99_us),
                num(rs10.wait_p99_us)
            )),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// S4 hand-off between processes
// ---------------------------------------------------------------------------------------

/// How long process A stays busy right before releasing in S4.
const HOT: Duration = Duration::from_millis(2);

/// Process A's side of S4.
enum Holder {
    Lib(Lock),
    Raw {
        conn: ConnectionManager,
        release: redis::Script,
        key: String,
        channel: String,
        /// The grant-on-release floor: the waiter's registration, the release's KEYS[2].
        next_key: Option<String>,
    },
}

/// Runs `n` hand-offs A → B of one kind (`block`: a name of their own for each block);
/// returns B's latencies in µs (release start → acquired, and release message received in
/// B → acquired).
async fn s4_variant(
    ctx: &mut Ctx,
    kind: &str,
    block: u64,
    n: u64,
    settle: Duration,
) -> Res<(Vec<i64>, Vec<i64>)> {
    let name = format!("s4-{kind}-{block}");
    let mut _client = None;
    let (holder, channel) = match kind {
        "redis-locks" => {
            let client = LockClient::connect(&ctx.url).await?;
            let warm = client.lock(&format!("{name}:warm-a"))?;
            tokio::spawn(async move { warm.acquire().await?.release().await }).await??;
            let lock = client.lock(&name)?;
            let channel = lock.channel().to_owned();
            _client = Some(client);
            (Holder::Lib(lock), channel)
        }
        _ => {
            let channel = format!("{name}:released");
            let grant = kind == "raw-grant";
            let mut conn = util::manager(&ctx.url).await?;
            let release = redis::Script::new(if grant {
                super::workers::RAW_RELEASE_AND_GRANT
            } else {
                super::workers::RAW_RELEASE_AND_PUBLISH
            });
            release.load_async(&mut conn).await?;
            (
                Holder::Raw {
                    conn,
                    release,
                    key: name.clone(),
                    channel: channel.clone(),
                    next_key: grant.then(|| format!("{name}:next")),
                },
                channel,
            )
        }
    };
    let mut worker = spawn_worker(
        ctx,
        "s4",
        &[
            ("RLB_NAME", name.clone()),
            ("RLB_N", n.to_string()),
            ("RLB_KIND", kind.to_owned()),
        ],
    )?;
    worker.json(Duration::from_secs(30)).await?; // ready

    let mut conn = util::manager(&ctx.url).await?;
    let mut ctl = ctx.control.clone();
    let holder_task = tokio::spawn(async move {
        for i in 1..=n {
            let guard = match &holder {
                Holder::Lib(lock) => Some(lock.acquire().await?),
                Holder::Raw { conn, key, .. } => {
                    let ok: Option<String> = redis::cmd("SET")
                        .arg(key)
                        .arg(format!("a-{i}"))
                        .arg("NX")
                        .arg("PX")
                        .arg(30_000)
                        .query_async(&mut conn.clone())
                        .await?;
                    if ok.is_none() {
                        return Err(err("S4 raw: A could not take the free lock"));
                    }
                    None
                }
            };
            let _: () = redis::cmd("SET")
                .arg(format!("{name}:a_held"))
                .arg(i)
                .query_async(&mut conn)
                .await?;
            wait_for_value(
                &mut conn,
                &format!("{name}:b_waiting"),
                i,
                Duration::from_secs(30),
            )
            .await?;
            // B is inside acquire(); wait until its subscription is confirmed, then give
            // it time for its retry, so only the release message can wake it.
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let reply: Vec<(String, i64)> = redis::cmd("PUBSUB")
                    .arg("NUMSUB")
                    .arg(&channel)
                    .query_async(&mut ctl)
                    .await?;
                if reply.first().is_some_and(|(_, subs)| *subs >= 1) {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(err("S4: the waiter never subscribed"));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            // Then stay busy for the last 2 ms, as a holder finishing its work would be:
            // a release sent from a fully idle process pays the OS wake-up first.
            tokio::time::sleep(settle.saturating_sub(HOT)).await;
            let hot_until = Instant::now() + HOT;
            while Instant::now() < hot_until {
                tokio::task::yield_now().await;
            }
            let release_us = now_us();
            match (&holder, guard) {
                (_, Some(guard)) => guard.release().await?,
                (
                    Holder::Raw {
                        conn,
                        release,
                        key,
                        channel,
                        next_key,
                    },
                    None,
                ) => {
                    let mut call = release.key(key);
                    if let Some(next_key) = next_key {
                        call.key(next_key);
                    }
                    let released: i64 = call
                        .arg(format!("a-{i}"))
                        .arg(channel)
                        .invoke_async(&mut conn.clone())
                        .await?;
                    if released != 1 {
                        return Err(err("S4 raw: A's release found another token"));
                    }
                }
                (Holder::Lib(_), None) => unreachable!(),
            }
            let _: () = redis::cmd("SET")
                .arg(format!("{name}:ts:{i}"))
                .arg(release_us)
                .query_async(&mut conn)
                .await?;
            wait_for_value(
                &mut conn,
                &format!("{name}:b_done"),
                i,
                Duration::from_secs(30),
            )
            .await?;
        }
        Ok::<_, BoxError>(())
    });
    let result = worker.json(Duration::from_secs(30) + n as u32 * Duration::from_secs(1));
    let (result, held) = tokio::join!(result, holder_task);
    held??;
    let result = result?;
    worker.finish(Duration::from_secs(10)).await?;
    let latencies: Vec<i64> = result
        .get("latencies_us")
        .and_then(Value::as_array)
        .ok_or_else(|| err("S4: no latencies"))?
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    if latencies.len() as u64 != n {
        return Err(err(format!(
            "S4 {kind}: {} of {n} hand-offs",
            latencies.len()
        )));
    }
    let tail: Vec<i64> = result
        .get("message_to_acquired_us")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default();
    Ok((latencies, tail))
}

pub async fn s4(ctx: &mut Ctx) -> Res<Outcome> {
    let n: u64 = if ctx.quick { 60 } else { 300 };
    let settle = Duration::from_millis(10);
    let mut out = Outcome::new("S4", "hand-off: release in A → acquired in B");
    let rtt = ping_rtt(&ctx.cm, 200, 1000).await?;
    let idle_rtt = util::idle_ping_rtt(
        &ctx.cm,
        if ctx.quick { 100 } else { 300 },
        Duration::from_millis(5),
    )
    .await?;
    // The two kinds take turns in blocks, so that the machine's speed, which drifts over a
    // run, weighs on both alike (one block each moved the ratio by more than a change
    // to the hand-off did).
    let blocks = if ctx.quick { 1 } else { 6 };
    let (mut lib, mut lib_tail, mut raw, mut raw_tail) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut grant, mut grant_tail) = (Vec::new(), Vec::new());
    for block in 0..blocks {
        let (l, lt) = s4_variant(ctx, "redis-locks", block, n / blocks, settle).await?;
        lib.extend(l);
        lib_tail.extend(lt);
        let (r, rt) = s4_variant(ctx, "raw", block, n / blocks, settle).await?;
        raw.extend(r);
        raw_tail.extend(rt);
        let (g, gt) = s4_variant(ctx, "raw-grant", block, n / blocks, settle).await?;
        grant.extend(g);
        grant_tail.extend(gt);
    }
    let summary = |l: &[i64]| {
        let as_ns: Vec<u64> = l.iter().map(|&us| us.max(0) as u64 * 1000).collect();
        summarize_ns(&as_ns)
    };
    let s = summary(&lib);
    let r = summary(&raw);
    let st = summary(&lib_tail);
    let rt = summary(&raw_tail);
    let g = summary(&grant);
    let gt = summary(&grant_tail);
    let p50_rtt = s.p50 / rtt.p50;
    let p99_rtt = s.p99 / rtt.p50;
    out.set("handoffs", json!(n));
    out.set(
        "redis-locks",
        json!({"latency": s.json(), "p50_in_rtt": r2(p50_rtt), "p99_in_rtt": r2(p99_rtt),
               "message_to_acquired": st.json(),
               "message_probe": "a second, plain subscription in process B (in both kinds' runs) timestamps the release message"}),
    );
    out.set(
        "raw",
        json!({"latency": r.json(), "p50_in_rtt": r2(r.p50 / rtt.p50), "p99_in_rtt": r2(r.p99 / rtt.p50),
               "message_to_acquired": rt.json(),
               "what": "A: SET NX + script DEL+PUBLISH; B: redis-rs subscription, SET NX on each message"}),
    );
    out.set(
        "raw_grant",
        json!({"latency": g.json(), "p50_in_rtt": r2(g.p50 / rtt.p50),
               "message_to_acquired": gt.json(),
               "vs_raw_pubsub_p50": r2(g.p50 / r.p50.max(1e-9)),
               "what": "a reference, not the library: A's release script grants the lock to the one waiter registered by its failed SET NX (its value, a fresh lease) and the message names it; B holds on the message, with no call"}),
    );
    out.set("rtt", rtt.json());
    out.set("idle_rtt", idle_rtt.json());
    out.set(
        "params",
        json!({"watchdog_lease_s": 30, "settle_ms": settle.as_millis() as u64, "holder_busy_before_release_ms": HOT.as_millis() as u64,
               "blocks_per_kind_taking_turns": blocks,
               "clock": "CLOCK_REALTIME µs, A's release start vs B's acquire return"}),
    );
    let m1 = out.check("p50 in RTT", "<= 3 RTT", p50_rtt, p50_rtt <= 3.0);
    let m2 = out.check("p99 in RTT", "<= 10 RTT", p99_rtt, p99_rtt <= 10.0);
    // The raw pub/sub hand-off is the floor for any lock that wakes waiters by pub/sub.
    let vs_floor = s.p50 / r.p50.max(1e-9);
    out.set("lib_vs_raw_pubsub_p50", json!(r2(vs_floor)));
    let m3 = out.check(
        "p50 vs raw pub/sub floor",
        "<= 1.2x raw p50",
        vs_floor,
        vs_floor <= 1.2,
    );
    out.row(
        Row::new(format!(
            "release→acquired p50 µs (RTT p50 {} µs)",
            num(rtt.p50)
        ))
        .lib(format!("{} ({p50_rtt:.2} RTT)", num(s.p50)))
        .raw(format!("{} ({:.2} RTT)", num(r.p50), r.p50 / rtt.p50))
        .ratio(ratio(s.p50, r.p50))
        .target("≤ 3 RTT; ≤ 1.2× raw pub/sub", m1 && m3),
    );
    out.row(
        Row::new("release→acquired p99 µs")
            .lib(format!("{} ({p99_rtt:.2} RTT)", num(s.p99)))
            .raw(format!("{} ({:.2} RTT)", num(r.p99), r.p99 / rtt.p50))
            .ratio(ratio(s.p99, r.p99))
            .target("≤ 10 RTT", m2),
    );
    out.row(
        Row::new("of which: release message in B → acquired, p50 µs")
            .lib(format!("{} ({:.2} RTT)", num(st.p50), st.p50 / rtt.p50))
            .raw(format!("{} ({:.2} RTT)", num(rt.p50), rt.p50 / rtt.p50))
            .ratio(ratio(st.p50, rt.p50)),
    );
    out.row(
        Row::new("grant-on-release floor (raw, a reference), p50 µs; message → held")
            .raw(format!(
                "{} ({:.2} RTT); {}",
                num(g.p50),
                g.p50 / rtt.p50,
                num(gt.p50)
            ))
            .ratio(format!("{} the floor", ratio(g.p50, r.p50))),
    );
    out.row(
        Row::new("hand-offs / max µs")
            .lib(format!("{n} / {}", num(s.max)))
            .raw(format!("{n} / {}", num(r.max))),
    );
    out.row(
        Row::new("PING after 5 ms idle, p50 / p99 µs (vs busy RTT p50)")
            .lib(format!("{} / {}", num(idle_rtt.p50), num(idle_rtt.p99)))
            .ratio(format!("{:.2} RTT", idle_rtt.p50 / rtt.p50)),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// S5 watchdog scale
// ---------------------------------------------------------------------------------------

/// What one renewal per lock costs Redis, measured on the held locks with no client code
/// in the way (S5, after its hold): `renew.lua` as the watchdog sends it; a script that
/// only runs `GET` and `PEXPIRE … GT` per lock (the least a renewal that reads the hold
/// before it extends does on Redis 7.0, the comparison left out); plain `PEXPIRE … GT`
/// commands, pipelined (what one command per lock costs, such as a conditional expiry a
/// later Redis has). Each over every lock, in batches as the watchdog makes them, three
/// rounds in turns; the median round of each.
struct RenewalFloor {
    /// Per variant: Redis's own µs per lock (`INFO commandstats`) and its CPU µs per lock
    /// (`INFO cpu`, which also counts reading and parsing the commands).
    variants: Vec<(&'static str, f64, f64)>,
}

impl RenewalFloor {
    fn json(&self) -> Value {
        let mut map = serde_json::Map::new();
        for (name, exec, cpu) in &self.variants {
            map.insert(
                (*name).to_owned(),
                json!({"exec_us_per_lock": r2(*exec), "cpu_us_per_lock": r2(*cpu)}),
            );
        }
        Value::Object(map)
    }

    fn row(&self) -> String {
        self.variants
            .iter()
            .map(|(_, exec, cpu)| format!("{exec:.2} / {cpu:.2}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The `GET` and `PEXPIRE … GT` of a renewal per lock, and nothing else.
const GET_AND_PEXPIRE: &str = r"
for i = 1, #KEYS do
  redis.call('GET', KEYS[i])
  redis.call('PEXPIRE', KEYS[i], ARGV[1], 'GT')
end
return {}
";

async fn renewal_floor(
    conn: &mut MultiplexedConnection,
    keys: &[String],
    ids: &[String],
    batch: usize,
) -> Res<RenewalFloor> {
    // Longer than the watchdog's: the first variant keeps every lock alive for the others.
    let lease = "60000";
    let n = keys.len().max(1) as f64;
    let renew = redis::Script::new(include_str!("../../lua/renew.lua"));
    let alone = redis::Script::new(GET_AND_PEXPIRE);
    renew.load_async(conn).await?;
    alone.load_async(conn).await?;
    // Three rounds, the variants in turns; each variant's median round.
    let names = ["renew.lua", "get_pexpire", "pexpire"];
    let mut rounds: Vec<Vec<(f64, f64)>> = vec![Vec::new(); names.len()];
    for _ in 0..3 {
        // renew.lua takes the hold ids after the lease; the floor script only the lease.
        let kinds = [(Some(&renew), true), (Some(&alone), false), (None, false)];
        for (v, (script, with_ids)) in kinds.into_iter().enumerate() {
            let meter = Meter::start(conn).await?;
            for (keys, ids) in keys.chunks(batch).zip(ids.chunks(batch)) {
                let mut pipe = redis::pipe();
                match script {
                    Some(script) => {
                        let call = pipe
                            .cmd("EVALSHA")
                            .arg(script.get_hash())
                            .arg(keys.len())
                            .arg(keys)
                            .arg(lease);
                        if with_ids {
                            call.arg(keys.len()).arg(ids);
                        }
                    }
                    None => {
                        for key in keys {
                            pipe.cmd("PEXPIRE").arg(key).arg(lease).arg("GT");
                        }
                    }
                }
                let _: Vec<redis::Value> = pipe.query_async(conn).await?;
            }
            let metered = meter.stop(conn).await?;
            let command = if script.is_some() {
                "evalsha"
            } else {
                "pexpire"
            };
            let exec = metered.cmds.get(command).map_or(0, |c| c.usec) as f64;
            rounds[v].push((exec / n, metered.redis_cpu_us / n));
        }
    }
    let variants = names
        .iter()
        .zip(rounds)
        .map(|(name, mut rounds)| {
            rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (exec, cpu) = rounds[rounds.len() / 2];
            (*name, exec, cpu)
        })
        .collect();
    Ok(RenewalFloor { variants })
}

pub async fn s5(ctx: &mut Ctx) -> Res<Outcome> {
    let (n, hold) = if ctx.quick {
        (20_000usize, Duration::from_secs(4))
    } else {
        (100_000usize, Duration::from_secs(10))
    };
    let timeout = Duration::from_secs(3);
    let batch = redis_locks::DEFAULT_RENEW_BATCH;
    let mut out = Outcome::new("S5", "watchdog scale");
    let client = LockClient::builder(&ctx.url)
        .watchdog_timeout(timeout)
        .connect()
        .await?;

    // Setup (not timed): acquire N locks with 64 concurrent tasks.
    let setup_started = Instant::now();
    let workers = 64;
    let mut set = tokio::task::JoinSet::new();
    for w in 0..workers {
        let client = client.clone();
        set.spawn(async move {
            let mut guards = Vec::new();
            for j in (w..n).step_by(workers) {
                guards.push(client.lock(&format!("s5:{j}"))?.acquire().await?);
            }
            Ok::<_, BoxError>(guards)
        });
    }
    let mut guards: Vec<LockGuard> = Vec::with_capacity(n);
    while let Some(joined) = set.join_next().await {
        guards.extend(joined??);
    }
    let setup = setup_started.elapsed();

    // Hold, sampling the watchdog's per-tick statistics.
    let clk = util::clock_ticks_per_sec();
    let meter = Meter::start(&mut ctx.control).await?;
    let stats0 = client.watchdog_stats();
    let cpu0 = util::cpu_ticks();
    let t0 = Instant::now();
    let mut ticks = Vec::new(); // (calls, micros, locks)
    let mut seen = stats0.ticks;
    let mut pending = false;
    while t0.elapsed() < hold {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let s = client.watchdog_stats();
        // `ticks` is bumped just before the tick's other fields are stored: read them one
        // sample later.
        if pending {
            ticks.push((s.last_tick_calls, s.last_tick_micros, s.last_tick_locks));
            pending = false;
        }
        if s.ticks != seen {
            seen = s.ticks;
            pending = true;
        }
    }
    let wall = t0.elapsed();
    let cpu1 = util::cpu_ticks();
    let stats1 = client.watchdog_stats();
    if pending {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let s = client.watchdog_stats();
        ticks.push((s.last_tick_calls, s.last_tick_micros, s.last_tick_locks));
    }
    let metered = meter.stop(&mut ctx.control).await?;
    let cpu_pct = (cpu1 - cpu0) as f64 / clk as f64 / wall.as_secs_f64() * 100.0;
    let hold_ticks = (stats1.ticks - stats0.ticks).max(1) as f64;
    let redis_exec = count_cmds(&metered.cmds, &[]);
    let redis_exec_ms_per_tick = redis_exec.top_usec as f64 / 1000.0 / hold_ticks;
    let redis_cpu_ms_per_tick = metered.redis_cpu_us / 1000.0 / hold_ticks;
    let client_cpu_ms_per_tick = metered.client_cpu_us / 1000.0 / hold_ticks;

    // Which locks are still held by their owner, in Redis (either form of a hold: a first
    // hold's string, `<mark><hold id>\x01<owner>`, or the hash; see lua/acquire.lua).
    let mut held = 0u64;
    for chunk in guards.chunks(2000) {
        let mut pipe = redis::pipe();
        for g in chunk {
            pipe.cmd("EVAL")
                .arg(OWNER_HOLDS)
                .arg(1)
                .arg(format!("{}:{{{}}}", client.prefix(), g.name()))
                .arg(g.owner());
        }
        let flags: Vec<i64> = pipe.query_async(&mut ctx.control).await?;
        held += flags.iter().filter(|&&f| f == 1).count() as u64;
    }
    let held_count = client.held_count();
    let keys: Vec<String> = guards
        .iter()
        .map(|g| format!("{}:{{{}}}", client.prefix(), g.name()))
        .collect();
    let ids: Vec<String> = guards.iter().map(|g| g.hold_id().to_owned()).collect();
    for g in guards {
        g.detach();
    }
    drop(client);
    // With the watchdog gone, what one renewal per lock costs Redis, sent directly.
    let floor = renewal_floor(&mut ctx.control, &keys, &ids, batch).await?;
    ctx.flushall().await?;

    let max_calls = ticks.iter().map(|t| t.0).max().unwrap_or(0);
    let max_micros = ticks.iter().map(|t| t.1).max().unwrap_or(0);
    let mean_micros = if ticks.is_empty() {
        0.0
    } else {
        ticks.iter().map(|t| t.1 as f64).sum::<f64>() / ticks.len() as f64
    };
    let want_calls = n.div_ceil(batch) as u64;
    out.set(
        "params",
        json!({"locks": n, "watchdog_timeout_s": 3, "hold_s": hold.as_secs_f64(), "renew_batch": batch,
               "setup_concurrency": workers}),
    );
    out.set("setup_seconds", json!(r2(setup.as_secs_f64())));
    out.set(
        "setup_acquires_per_sec",
        json!(r1(n as f64 / setup.as_secs_f64())),
    );
    out.set(
        "ticks_during_hold",
        json!(
            ticks
                .iter()
                .map(|t| json!({"calls": t.0, "micros": t.1, "locks": t.2}))
                .collect::<Vec<_>>()
        ),
    );
    out.set("max_calls_per_tick", json!(max_calls));
    out.set("max_tick_ms", json!(r1(max_micros as f64 / 1000.0)));
    out.set("mean_tick_ms", json!(r1(mean_micros / 1000.0)));
    out.set("cpu_percent_of_one_core", json!(r2(cpu_pct)));
    out.set(
        "per_tick",
        json!({"redis_exec_ms": r1(redis_exec_ms_per_tick), "redis_cpu_ms": r1(redis_cpu_ms_per_tick),
               "client_cpu_ms": r1(client_cpu_ms_per_tick),
               "client_cpu_us_per_lock": r2(client_cpu_ms_per_tick * 1000.0 / n as f64),
               "redis_exec_us_per_lock": r2(redis_exec_ms_per_tick * 1000.0 / n as f64)}),
    );
    out.set("hold_commandstats_calls_usec", cmds_json(&metered.cmds));
    out.set("locks_held_at_end", json!(held));
    out.set("client_held_count", json!(held_count));
    out.set(
        "watchdog_delta",
        json!({"ticks": stats1.ticks - stats0.ticks, "renew_calls": stats1.renew_calls - stats0.renew_calls,
               "renewed": stats1.renewed - stats0.renewed, "lost": stats1.lost - stats0.lost,
               "failed_calls": stats1.failed_calls - stats0.failed_calls}),
    );
    if held != n as u64 {
        out.fail(format!("{} of {n} locks lost", n as u64 - held));
    }
    if stats1.lost > 0 {
        out.fail(format!("watchdog declared {} locks lost", stats1.lost));
    }
    if ticks.is_empty() {
        out.fail("no watchdog tick during the hold");
    }
    let m1 = out.check(
        "calls per tick",
        &format!("<= ceil(N/500) = {want_calls}"),
        max_calls as f64,
        max_calls <= want_calls && !ticks.is_empty(),
    );
    let m2 = out.check(
        "tick duration ms",
        "<= 150",
        max_micros as f64 / 1000.0,
        max_micros <= 150_000 && !ticks.is_empty(),
    );
    let m3 = out.check("client CPU %", "<= 5", cpu_pct, cpu_pct <= 5.0);
    let m4 = out.check("locks held", "all", held as f64, held == n as u64);
    out.row(
        Row::new(format!(
            "round trips per tick ({n} locks, {} ticks)",
            ticks.len()
        ))
        .lib(max_calls.to_string())
        .target(format!("≤ {want_calls}"), m1),
    );
    out.row(
        Row::new("tick duration ms (max / mean)")
            .lib(format!(
                "{} / {}",
                num(max_micros as f64 / 1000.0),
                num(mean_micros / 1000.0)
            ))
            .target("≤ 150", m2),
    );
    out.row(
        Row::new("client CPU % of one core")
            .lib(num(cpu_pct))
            .target("≤ 5 %", m3),
    );
    out.row(
        Row::new("per tick: Redis exec ms / Redis CPU ms / client CPU ms").lib(format!(
            "{} / {} / {}",
            num(redis_exec_ms_per_tick),
            num(redis_cpu_ms_per_tick),
            num(client_cpu_ms_per_tick)
        )),
    );
    out.row(
        Row::new("locks still held")
            .lib(format!("{held} / {n}"))
            .target("all", m4),
    );
    out.set("renewal_alone", floor.json());
    out.row(
        Row::new(
            "Redis µs per lock, sent directly (exec / CPU): renew.lua; GET + PEXPIRE GT \
             alone in a script; PEXPIRE GT alone, pipelined",
        )
        .lib(floor.row()),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// S6 local waiters
// ---------------------------------------------------------------------------------------

pub async fn s6(ctx: &mut Ctx) -> Res<Outcome> {
    let waiters = if ctx.quick { 2_000usize } else { 10_000 };
    let handoffs = 100usize;
    let name = "s6";
    let mut out = Outcome::new("S6", "local waiters");
    let page = util::page_size();

    let mut holder = spawn_worker(ctx, "s6-holder", &[("RLB_NAME", name.to_owned())])?;
    holder.json(Duration::from_secs(30)).await?; // holds the lock now

    let client = LockClient::connect(&ctx.url).await?;
    // Warm-up: scripts loaded and the subscription connection open.
    {
        let warm = client.lock("s6:warm")?;
        let w2 = warm.clone();
        let g = tokio::spawn(async move { w2.acquire().await }).await??;
        let w3 = warm.clone();
        let r = tokio::spawn(async move { w3.acquire_timeout(Duration::from_millis(50)).await })
            .await?;
        if r.is_ok() {
            return Err(err("S6 warm-up: a second owner got a held lock"));
        }
        g.release().await?;
    }
    let rtt = ping_rtt(&ctx.cm, 200, 1000).await?;
    let lock = client.lock(name)?;
    let acquired = Arc::new(AtomicUsize::new(0));
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<Instant>();
    let done_tx = Arc::new(std::sync::Mutex::new(Some(done_tx)));
    let mut tasks = Vec::with_capacity(waiters);

    let before_setup = commandstats(&mut ctx.control).await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let rss0 = util::rss_bytes(page);
    for _ in 0..waiters {
        let lock = lock.clone();
        let acquired = acquired.clone();
        let done_tx = done_tx.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire().await?;
            let k = acquired.fetch_add(1, Ordering::SeqCst) + 1;
            if k < handoffs {
                guard.release().await?;
            } else {
                let tx = done_tx.lock().ok().and_then(|mut slot| slot.take());
                if let Some(tx) = tx {
                    let _ = tx.send(Instant::now());
                }
                // Hold until aborted.
                std::future::pending::<()>().await;
                drop(guard);
            }
            Ok::<_, BoxError>(())
        }));
    }
    // Every waiter makes two failed attempts (before and after subscribing), then sleeps.
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let now = commandstats(&mut ctx.control).await?;
        let d = delta(&before_setup, &now);
        if d.get("evalsha").map_or(0, |c| c.calls) >= 2 * waiters as u64 {
            break;
        }
        if Instant::now() > deadline {
            return Err(err("S6: waiters did not all start waiting within 90 s"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss1 = util::rss_bytes(page);
    let per_waiter = rss1.saturating_sub(rss0) as f64 / waiters as f64;
    let setup_cmds = {
        let now = commandstats(&mut ctx.control).await?;
        delta(&before_setup, &now)
    };

    // Hand-offs.
    let before = commandstats(&mut ctx.control).await?;
    let t0 = Instant::now();
    holder.send_line().await?;
    let finished = tokio::time::timeout(Duration::from_secs(60), done_rx).await;
    let after = commandstats(&mut ctx.control).await?;
    let finished = match finished {
        Ok(Ok(at)) => at,
        _ => {
            for t in &tasks {
                t.abort();
            }
            return Err(err(format!(
                "S6: only {} of {handoffs} hand-offs within 60 s",
                acquired.load(Ordering::SeqCst)
            )));
        }
    };
    let elapsed = finished - t0;
    let window = delta(&before, &after);
    // A waiter woken by a release takes the lock with a bare SET (a round trip); only if
    // that finds the lock taken again does it send acquire.lua, whose SETs (a fresh take,
    // a mark) commandstats counts the same way. So every SET is counted as a round trip:
    // an upper bound, exact when no woken waiter's SET finds the lock taken.
    let util::CmdCount { all, top, .. } = count_cmds(&window, &["set"]);
    let per_all = all as f64 / handoffs as f64;
    let per_top = top as f64 / handoffs as f64;
    let mut failed = 0;
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        if let Ok(Err(_)) = t.await {
            failed += 1;
        }
    }
    holder.json(Duration::from_secs(10)).await?;
    holder.finish(Duration::from_secs(10)).await?;
    if failed > 0 {
        out.fail(format!("{failed} waiters failed with an error"));
    }
    let per_handoff_us = elapsed.as_secs_f64() * 1e6 / handoffs as f64;
    out.set(
        "params",
        json!({"waiters": waiters, "handoffs": handoffs,
               "holder": "another process (worker s6-holder), watchdog lease 30 s",
               "window": "holder release sent → 100th waiter acquired"}),
    );
    out.set("round_trips_per_handoff", json!(r2(per_top)));
    out.set("commands_per_handoff_incl_scripts", json!(r2(per_all)));
    out.set("window_commandstats_calls_usec", cmds_json(&window));
    out.set("setup_commandstats_calls_usec", cmds_json(&setup_cmds));
    out.set("rss_before_bytes", json!(rss0));
    out.set("rss_after_bytes", json!(rss1));
    out.set("bytes_per_waiter", json!(r1(per_waiter)));
    out.set("handoff_us_mean", json!(r1(per_handoff_us)));
    out.set("handoff_in_rtt", json!(r2(per_handoff_us / rtt.p50)));
    out.set("rtt", rtt.json());
    let m1 = out.check("round trips per hand-off", "<= 3", per_top, per_top <= 3.0);
    let m2 = out.check(
        "bytes per waiter",
        "<= 2048",
        per_waiter,
        per_waiter <= 2048.0,
    );
    out.row(
        Row::new(format!(
            "Redis commands / hand-off ({waiters} waiters; all incl. in scripts)"
        ))
        .lib(format!("{per_top:.2} ({per_all:.1})"))
        .target("≤ 3", m1),
    );
    out.row(
        Row::new("client memory / waiter (RSS)")
            .lib(format!("{} B", num(per_waiter)))
            .target("≤ 2 KiB", m2),
    );
    out.row(
        Row::new("hand-off time mean µs")
            .lib(num(per_handoff_us))
            .ratio(format!("{:.2} RTT", per_handoff_us / rtt.p50)),
    );
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// S7 nested
// ---------------------------------------------------------------------------------------

pub async fn s7(ctx: &mut Ctx) -> Res<Outcome> {
    let depth = 8usize;
    let (rounds, per_round) = if ctx.quick { (4, 60) } else { (8, 250) };
    let mut out = Outcome::new("S7", "nested: reentrant depth 8");
    let client = LockClient::connect(&ctx.url).await?;
    let lock = client.lock("s7")?;
    let flat_handle = Arc::new(Handle::Lib(lock.clone()));
    serial(flat_handle.clone(), 300).await?;

    let mut flat = Acc::default();
    let mut outer_acq = Vec::new();
    let mut nested_acq = Vec::new();
    let mut nested_rel = Vec::new();
    let mut outer_rel = Vec::new();
    let mut cmds = CmdStats::new();
    let mut ops = 0u64;
    let mut bad_counts = 0u64;
    let mut nested_elapsed = Duration::ZERO;
    for _ in 0..rounds {
        merge(&mut flat, serial(flat_handle.clone(), per_round * 2).await?);
        let before = commandstats(&mut ctx.control).await?;
        let lock2 = lock.clone();
        let (oa, na, nr, or, bad, el) = tokio::spawn(async move {
            let (mut oa, mut na, mut nr, mut or) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            let mut bad = 0u64;
            let started = Instant::now();
            for _ in 0..per_round {
                let mut guards: Vec<redis_locks::LockGuard> = Vec::with_capacity(depth);
                for d in 0..depth {
                    let t = Instant::now();
                    // The outer acquire, then re-entries through the innermost guard.
                    let g = match guards.last() {
                        None => lock2.acquire().await?,
                        Some(outer) => outer.reenter().await?,
                    };
                    let e = ns(t.elapsed());
                    if g.hold_count() != d as u64 + 1 {
                        bad += 1;
                    }
                    if d == 0 {
                        oa.push(e)
                    } else {
                        na.push(e)
                    }
                    guards.push(g);
                }
                for d in (0..depth).rev() {
                    let g = guards.pop().ok_or_else(|| err("guard missing"))?;
                    let t = Instant::now();
                    g.release().await?;
                    let e = ns(t.elapsed());
                    if d == 0 { or.push(e) } else { nr.push(e) }
                }
            }
            Ok::<_, BoxError>((oa, na, nr, or, bad, started.elapsed()))
        })
        .await??;
        let after = commandstats(&mut ctx.control).await?;
        add_into(&mut cmds, &delta(&before, &after));
        ops += (per_round * depth * 2) as u64;
        outer_acq.extend(oa);
        nested_acq.extend(na);
        nested_rel.extend(nr);
        outer_rel.extend(or);
        bad_counts += bad;
        nested_elapsed += el;
    }
    if bad_counts > 0 {
        out.fail(format!("{bad_counts} acquires reported a wrong hold count"));
    }
    // The first acquire of each nesting is the bare take of a free lock (lua/take.lua).
    let util::CmdCount { all, top, .. } = count_cmds(&cmds, &["set"]);
    let rt_per_op = top as f64 / ops as f64;
    let all_per_op = all as f64 / ops as f64;
    let flat_cycle = summarize_ns(&flat.cycle);
    let flat_acq = summarize_ns(&flat.acquire);
    let flat_rel = summarize_ns(&flat.release);
    let na = summarize_ns(&nested_acq);
    let nr = summarize_ns(&nested_rel);
    let oa = summarize_ns(&outer_acq);
    let or = summarize_ns(&outer_rel);
    out.set(
        "params",
        json!({"depth": depth, "rounds": rounds, "nestings_per_round": per_round}),
    );
    out.set("round_trips_per_op", json!(r2(rt_per_op)));
    out.set("commands_per_op_incl_scripts", json!(r2(all_per_op)));
    out.set("commandstats_calls_usec", cmds_json(&cmds));
    out.set("nested_acquire", na.json());
    out.set("nested_release", nr.json());
    out.set("outer_acquire", oa.json());
    out.set("outer_release", or.json());
    out.set("s1_style_cycle", flat_cycle.json());
    out.set("s1_style_acquire", flat_acq.json());
    out.set("s1_style_release", flat_rel.json());
    out.set(
        "nested_acquire_p50_over_cycle_p50",
        json!(r2(na.p50 / flat_cycle.p50)),
    );
    out.set(
        "nested_ops_per_sec",
        json!(r1(ops as f64 / nested_elapsed.as_secs_f64())),
    );
    out.row(
        Row::new("round trips per acquire/release op (all cmds incl. in scripts)")
            .lib(format!("{rt_per_op:.2} ({all_per_op:.1})")),
    );
    out.row(
        Row::new("nested acquire p50 / p99 µs (depth 2–8)")
            .lib(format!("{} / {}", num(na.p50), num(na.p99)))
            .ratio(format!(
                "{} S1 acquire, {} S1 cycle (p50)",
                ratio(na.p50, flat_acq.p50),
                ratio(na.p50, flat_cycle.p50)
            )),
    );
    out.row(
        Row::new("nested release p50 / p99 µs (depth 8–2)")
            .lib(format!("{} / {}", num(nr.p50), num(nr.p99)))
            .ratio(format!("{} S1 release (p50)", ratio(nr.p50, flat_rel.p50))),
    );
    out.row(
        Row::new("S1-style cycle in this run: acquire / release / cycle p50 µs").lib(format!(
            "{} / {} / {}",
            num(flat_acq.p50),
            num(flat_rel.p50),
            num(flat_cycle.p50)
        )),
    );
    Ok(out)
}
