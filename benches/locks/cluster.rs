//! The cluster scenarios: S1, S3 and S5 again, on a local Redis Cluster (3 primaries with
//! a replica each, started by the benchmark itself), each next to its single-node
//! counterpart in the same run.
//!
//! - C1: serial acquire + release of one name, 1 task: the library on the cluster, the
//!   raw `SET NX PX` + compare-and-delete baseline on the cluster, and both on the single
//!   node, in interleaved rounds.
//! - C3: S3's contended shape (4 processes, 1 name, 1 ms think time) with the lock on the
//!   cluster, next to the same run on the single node. The critical section's counters
//!   stay on the single node in both, so only the lock differs.
//! - C5: watchdog scale on the cluster: N locks over every slot, renewed in per-slot
//!   batches of up to 500 locks per primary, whatever their slots.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::cluster_async::ClusterConnection;
use redis_locks::{LockClient, LockGuard};
use serde_json::json;

use super::common::topology::Cluster;
use super::report::{Outcome, Row, num, ratio};
use super::scenarios::{Ctx, s3_variant};
use super::util::{Raw, Res, err, ns, r1, r2, summarize_ns};

/// Starts the benchmark's cluster on first use (about 3 s).
async fn seeds(ctx: &mut Ctx) -> Res<Vec<String>> {
    if ctx.cluster_seeds.is_empty() {
        let cluster = tokio::task::spawn_blocking(Cluster::start).await?;
        ctx.cluster_seeds = cluster.seeds();
        // The cluster lives until the benchmark process exits (the harness kills its
        // servers then).
        std::mem::forget(cluster);
    }
    Ok(ctx.cluster_seeds.clone())
}

/// The raw baseline on a cluster connection.
struct RawCluster {
    conn: ClusterConnection,
    release: redis::Script,
    n: std::sync::atomic::AtomicU64,
}

impl RawCluster {
    async fn connect(seeds: &[String]) -> Res<Self> {
        let conn = redis::cluster::ClusterClient::new(seeds.to_vec())?
            .get_async_connection()
            .await?;
        Ok(RawCluster {
            conn,
            release: redis::Script::new(super::util::COMPARE_AND_DELETE),
            n: Default::default(),
        })
    }

    async fn cycle(&self, key: &str) -> Res<()> {
        let token = format!(
            "{}-{}",
            std::process::id(),
            self.n.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut conn = self.conn.clone();
        let set: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut conn)
            .await?;
        if set.is_none() {
            return Err(err("raw (cluster): the key was held"));
        }
        let deleted: i64 = self
            .release
            .key(key)
            .arg(&token)
            .invoke_async(&mut conn)
            .await?;
        if deleted != 1 {
            return Err(err("raw (cluster): release did not delete"));
        }
        Ok(())
    }
}

enum C1Imp {
    Lib(redis_locks::Lock),
    Raw(Arc<Raw>, String),
    RawCluster(RawCluster, String),
}

impl C1Imp {
    async fn cycle(&self) -> Res<()> {
        match self {
            C1Imp::Lib(lock) => lock.acquire().await?.release().await?,
            C1Imp::Raw(raw, key) => {
                let token = raw
                    .try_acquire(key, 30_000)
                    .await?
                    .ok_or_else(|| err("raw: the key was held"))?;
                raw.release(key, &token).await?;
            }
            C1Imp::RawCluster(raw, key) => raw.cycle(key).await?,
        }
        Ok(())
    }
}

pub async fn c1(ctx: &mut Ctx) -> Res<Outcome> {
    let seeds = seeds(ctx).await?;
    let (rounds, per_round, warm) = if ctx.quick {
        (6, 200, 200)
    } else {
        (30, 250, 1000)
    };
    let mut out = Outcome::new("C1", "serial on a 3-primary cluster: 1 task, 1 name");
    let imps = [
        C1Imp::Lib(
            LockClient::builder_cluster(&seeds)
                .connect()
                .await?
                .lock("c1")?,
        ),
        C1Imp::RawCluster(RawCluster::connect(&seeds).await?, "raw:{c1}".into()),
        C1Imp::Lib(LockClient::connect(&ctx.url).await?.lock("c1")?),
        C1Imp::Raw(Raw::connect(&ctx.url).await?, "raw:{c1}".into()),
    ];
    let labels = [
        "redis-locks cluster",
        "raw cluster",
        "redis-locks single",
        "raw single",
    ];
    for imp in &imps {
        for _ in 0..warm {
            imp.cycle().await?;
        }
    }
    let mut cycles: Vec<Vec<u64>> = vec![Vec::new(); imps.len()];
    let mut busy = vec![Duration::ZERO; imps.len()];
    for _ in 0..rounds {
        for (i, imp) in imps.iter().enumerate() {
            let round = Instant::now();
            for _ in 0..per_round {
                let t = Instant::now();
                imp.cycle().await?;
                cycles[i].push(ns(t.elapsed()));
            }
            busy[i] += round.elapsed();
        }
    }
    let rate = |i: usize| cycles[i].len() as f64 / busy[i].as_secs_f64();
    let sums: Vec<_> = cycles.iter().map(|c| summarize_ns(c)).collect();
    for (i, label) in labels.iter().enumerate() {
        out.set(
            label,
            json!({"cycles_per_sec": r1(rate(i)), "cycle_us": sums[i].json()}),
        );
    }
    out.set(
        "params",
        json!({"rounds": rounds, "cycles_per_round": per_round, "warmup": warm,
               "cluster": "3 primaries + 3 replicas, local"}),
    );
    out.set("lib_vs_raw_on_cluster", json!(r2(rate(0) / rate(1))));
    out.set("lib_cluster_vs_lib_single", json!(r2(rate(0) / rate(2))));
    out.row(
        Row::new("cycles/s on the cluster")
            .lib(num(rate(0)))
            .raw(num(rate(1)))
            .ratio(format!("{} raw", ratio(rate(0), rate(1)))),
    );
    out.row(
        Row::new("cycles/s on one node")
            .lib(num(rate(2)))
            .raw(num(rate(3)))
            .ratio(format!(
                "{} raw; cluster/single {}",
                ratio(rate(2), rate(3)),
                ratio(rate(0), rate(2))
            )),
    );
    out.row(
        Row::new("cycle p50 / p99 µs, cluster")
            .lib(format!("{} / {}", num(sums[0].p50), num(sums[0].p99)))
            .raw(format!("{} / {}", num(sums[1].p50), num(sums[1].p99))),
    );
    Ok(out)
}

pub async fn c3(ctx: &mut Ctx) -> Res<Outcome> {
    seeds(ctx).await?;
    let procs = 4;
    let duration = Duration::from_millis(if ctx.quick { 1500 } else { 3000 });
    let mut out = Outcome::new("C3", "contended on a cluster: 4 processes × 1 task, 1 name");
    let single = s3_variant(ctx, "redis-locks", procs, duration).await?;
    let cluster = s3_variant(ctx, "redis-locks-cluster", procs, duration).await?;
    for (label, run) in [
        ("redis-locks single", &single),
        ("redis-locks cluster", &cluster),
    ] {
        out.set(
            label,
            json!({"acquisitions_per_sec": r1(run.rate), "per_process": run.counts,
                   "violations": run.violations, "late": run.late,
                   "acquire_wait_p99_us_worst_process": r1(run.wait_p99_us)}),
        );
        if run.violations > 0 {
            out.fail(format!(
                "{label}: {} mutual-exclusion violations",
                run.violations
            ));
        }
    }
    out.set(
        "params",
        json!({"processes": procs, "seconds": duration.as_secs_f64(), "think_ms": 1,
               "critical_section": "2 round trips to the single node, in both runs"}),
    );
    out.set("cluster_vs_single", json!(r2(cluster.rate / single.rate)));
    out.row(
        Row::new("acquisitions/s (4 processes)")
            .lib(format!("{} cluster", num(cluster.rate)))
            .raw(format!("{} single node", num(single.rate)))
            .ratio(format!(
                "cluster/single {}",
                ratio(cluster.rate, single.rate)
            )),
    );
    out.row(
        Row::new("mutual-exclusion violations")
            .lib(format!("{} cluster", cluster.violations))
            .raw(format!("{} single node", single.violations)),
    );
    Ok(out)
}

pub async fn c5(ctx: &mut Ctx) -> Res<Outcome> {
    let seeds = seeds(ctx).await?;
    let (n, hold) = if ctx.quick {
        (10_000usize, Duration::from_secs(4))
    } else {
        (100_000usize, Duration::from_secs(10))
    };
    let mut out = Outcome::new("C5", "watchdog scale on a cluster");
    let client = LockClient::builder_cluster(&seeds)
        .watchdog_timeout(Duration::from_secs(3))
        .connect()
        .await?;
    let setup_started = Instant::now();
    let workers = 64;
    let mut set = tokio::task::JoinSet::new();
    for w in 0..workers {
        let client = client.clone();
        set.spawn(async move {
            let mut guards = Vec::new();
            for j in (w..n).step_by(workers) {
                guards.push(client.lock(&format!("c5:{j}"))?.acquire().await?);
            }
            Ok::<_, super::util::BoxError>(guards)
        });
    }
    let mut guards: Vec<LockGuard> = Vec::with_capacity(n);
    while let Some(joined) = set.join_next().await {
        guards.extend(joined??);
    }
    let setup = setup_started.elapsed();

    let clk = super::util::clock_ticks_per_sec();
    let stats0 = client.watchdog_stats();
    let cpu0 = super::util::cpu_ticks();
    let t0 = Instant::now();
    let mut ticks = Vec::new();
    let (mut seen, mut pending) = (stats0.ticks, false);
    while t0.elapsed() < hold {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let s = client.watchdog_stats();
        if pending {
            ticks.push((s.last_tick_calls, s.last_tick_micros));
            pending = false;
        }
        if s.ticks != seen {
            seen = s.ticks;
            pending = true;
        }
    }
    let wall = t0.elapsed();
    let cpu_pct =
        (super::util::cpu_ticks() - cpu0) as f64 / clk as f64 / wall.as_secs_f64() * 100.0;
    let stats1 = client.watchdog_stats();
    let lost = guards.iter().filter(|g| g.is_lost()).count();
    for guard in guards {
        guard.detach();
    }
    let mean_ms = ticks.iter().map(|t| t.1 as f64).sum::<f64>() / ticks.len().max(1) as f64 / 1e3;
    let max_ms = ticks.iter().map(|t| t.1).max().unwrap_or(0) as f64 / 1e3;
    let calls = ticks.iter().map(|t| t.0).max().unwrap_or(0);
    out.set(
        "params",
        json!({"locks": n, "watchdog_timeout_s": 3, "hold_s": hold.as_secs_f64(),
               "batching": "renew.lua with up to 500 locks of one primary, any slots (keys in ARGV, allow-cross-slot-keys), sent to that primary by address after one CLUSTER SLOTS per tick"}),
    );
    out.set(
        "setup_acquires_per_sec",
        json!(r1(n as f64 / setup.as_secs_f64())),
    );
    out.set("calls_per_tick", json!(calls));
    out.set("mean_tick_ms", json!(r1(mean_ms)));
    out.set("max_tick_ms", json!(r1(max_ms)));
    out.set("cpu_percent_of_one_core", json!(r2(cpu_pct)));
    out.set("lost", json!(lost));
    out.set(
        "watchdog_delta",
        json!({"ticks": stats1.ticks - stats0.ticks, "failed_calls": stats1.failed_calls - stats0.failed_calls}),
    );
    if lost > 0 || stats1.lost > 0 {
        out.fail(format!("{lost} of {n} locks lost on the cluster"));
    }
    if ticks.is_empty() {
        out.fail("no watchdog tick during the hold");
    }
    out.row(
        Row::new(format!("renewal tick, {n} locks over 3 primaries"))
            .lib(format!("{} ms mean, {} calls", num(mean_ms), calls))
            .ratio(format!("client CPU {} % of a core", r1(cpu_pct))),
    );
    // Make sure the keys are gone before the next scenario.
    drop(client);
    Ok(out)
}
