//! The benchmark command (issue #3): `cargo bench --bench locks [-- --quick] [--scenario S1,S3]`.
//!
//! Starts its own `redis-server` on a free loopback port (persistence off), runs the
//! scenarios of `docs/performance.md` against it, prints one JSON line per result
//! on stdout (each starts with `{"scenario":`), then a Markdown table, and stops the server.
//!
//! Every scenario compares in the same run: a raw baseline (`SET k tok NX PX` + a
//! compare-and-delete script via EVALSHA, on a `redis::aio::ConnectionManager` like the
//! library's), rslock 0.10 where the scenario says so, the PING round-trip time on the same
//! connection type, and Redis commands from `INFO commandstats` deltas.
//!
//! Exit status: 0 when every scenario ran and no correctness check failed (mutual-exclusion
//! violations, lost locks, worker errors). Missed *performance* targets are reported
//! (`"met": false`) but do not fail the run, so `--quick` can serve as a CI smoke test.
//!
//! Multi-process scenarios re-execute this binary with `REDIS_LOCKS_BENCH_WORKER=<role>`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;

// The same throw-away redis-server the tests use.
#[path = "locks/cluster.rs"]
mod cluster;
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "locks/kinds.rs"]
mod kinds;
#[path = "locks/redlock.rs"]
mod redlock;
#[path = "locks/report.rs"]
mod report;
#[path = "locks/scenarios.rs"]
mod scenarios;
#[path = "locks/util.rs"]
mod util;
#[path = "locks/workers.rs"]
mod workers;

use report::{Outcome, Row, num};
// The peer: the rslock 0.10 crate itself (dev-dependency with its `tokio-comp` feature).
use rslock as rslock_impl;
use scenarios::Ctx;
use util::{Res, err};

const ALL: [&str; 17] = [
    "S1", "S2", "S3", "S4", "S5", "S6", "S7", "C1", "C3", "C5", "K1", "K2", "K3", "K4", "K5", "R1",
    "R3",
];

const USAGE: &str = "\
usage: cargo bench --bench locks -- [--quick] [--scenario S1,S3,...]

  --quick            short run (< 60 s): fewer cycles, S3 1.5 s, S5 20 000 locks for 4 s,
                     S6 2 000 waiters
  --scenario LIST    only these scenarios (comma-separated, e.g. S1,S3); default all.
                     C1, C3, C5 are S1, S3, S5 on a local 3-primary cluster that the
                     benchmark starts itself; K1 the semaphore, K2 the count-down latch,
                     K3 the read-write lock, K4 the fair lock, K5 the semaphore's
                     hand-off between one client's tasks; R1, R3 RedLock on 5 servers
                     against rslock
  -h, --help         this text

Needs redis-server on PATH (or REDIS_SERVER_BIN); see scripts/ensure-redis.sh.";

struct Args {
    quick: bool,
    scenarios: Vec<&'static str>,
}

fn parse_args() -> Result<Args, String> {
    let mut quick = false;
    let mut scenarios: Vec<&'static str> = ALL.to_vec();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let list = if arg == "--scenario" || arg == "--scenarios" {
            Some(args.next().ok_or("--scenario needs a list, e.g. S1,S3")?)
        } else {
            arg.strip_prefix("--scenario=")
                .or_else(|| arg.strip_prefix("--scenarios="))
                .map(str::to_owned)
        };
        if let Some(list) = list {
            let mut picked = Vec::new();
            for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let id = ALL
                    .iter()
                    .find(|id| id.eq_ignore_ascii_case(part))
                    .ok_or_else(|| {
                        format!("unknown scenario {part:?} (known: {})", ALL.join(","))
                    })?;
                if !picked.contains(id) {
                    picked.push(*id);
                }
            }
            picked.sort_unstable();
            scenarios = picked;
            continue;
        }
        match arg.as_str() {
            "--quick" => quick = true,
            // cargo passes --bench to harness = false targets.
            "--bench" => {}
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(Args { quick, scenarios })
}

fn main() -> ExitCode {
    if let Ok(role) = std::env::var(workers::ROLE_ENV) {
        return workers::main(&role);
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(msg) => {
            if msg.is_empty() {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            eprintln!("{msg}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let runtime = match util::runtime_builder().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot build the tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("benchmark failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Returns whether every scenario ran cleanly.
async fn run(args: Args) -> Res<bool> {
    let started = Instant::now();
    let mut server = common::RedisServer::start();
    let url = server.url();
    let mut control = util::control(&url).await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut control)
        .await?;
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_owned();
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let cm = util::manager(&url).await?;
    let exe = std::env::current_exe()?;
    let mut ctx = Ctx {
        url: url.clone(),
        quick: args.quick,
        control,
        cm,
        exe,
        cluster_seeds: Vec::new(),
    };
    eprintln!(
        "redis-locks benchmark: {} run, scenarios {}, redis-server {version} at {url}, {cores} cores",
        if args.quick { "quick" } else { "full" },
        args.scenarios.join(",")
    );

    let mut outcomes = Vec::new();
    // (c) round-trip time on the library's connection type, in this run.
    {
        let t = Instant::now();
        let rtt = util::ping_rtt(&ctx.cm, 500, if args.quick { 2000 } else { 5000 }).await?;
        let mut out = Outcome::new("RTT", "PING on ConnectionManager");
        out.set("rtt", rtt.json());
        out.set(
            "env",
            json!({"cores": cores, "redis_version": version, "quick": args.quick}),
        );
        out.row(Row::new("PING p50 / p99 µs").lib(format!("{} / {}", num(rtt.p50), num(rtt.p99))));
        out.seconds = t.elapsed().as_secs_f64();
        println!("{}", out.json_line(args.quick));
        outcomes.push(out);
    }

    let limit = Duration::from_secs(if args.quick { 45 } else { 240 });
    for id in &args.scenarios {
        eprintln!("[{:>6.1}s] {id} ...", started.elapsed().as_secs_f64());
        let t = Instant::now();
        if let Err(e) = ctx.flushall().await {
            eprintln!("FLUSHALL failed: {e}");
        }
        let result = tokio::time::timeout(limit, run_one(id, &mut ctx)).await;
        let mut out = match result {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => {
                let mut out = Outcome::new(id_static(id), "error");
                out.fail(e.to_string());
                out
            }
            Err(_) => {
                let mut out = Outcome::new(id_static(id), "timed out");
                out.fail(format!("did not finish within {limit:?}"));
                out
            }
        };
        out.seconds = t.elapsed().as_secs_f64();
        println!("{}", out.json_line(args.quick));
        outcomes.push(out);
    }
    let _ = ctx.flushall().await;
    drop(ctx);
    server.kill();

    let total = started.elapsed().as_secs_f64();
    let ok = outcomes.iter().all(|o| o.failures.is_empty());
    let missed: Vec<String> = outcomes
        .iter()
        .flat_map(|o| {
            o.checks
                .iter()
                .filter(|c| !c.met)
                .map(move |c| format!("{} {}", o.id, c.metric))
        })
        .collect();
    println!(
        "\n## redis-locks benchmark ({} run, {:.1} s, {cores} cores, Redis {version})\n",
        if args.quick { "quick" } else { "full" },
        total
    );
    print!("{}", report::markdown(&outcomes));
    println!();
    if missed.is_empty() {
        println!("All performance targets met.");
    } else {
        println!("Performance targets missed: {}.", missed.join("; "));
    }
    if !ok {
        println!("CORRECTNESS FAILURES: see the FAILURES rows above; exiting non-zero.");
    }
    Ok(ok)
}

fn id_static(id: &str) -> &'static str {
    ALL.iter().find(|a| **a == id).copied().unwrap_or("S?")
}

async fn run_one(id: &str, ctx: &mut Ctx) -> Res<Outcome> {
    match id {
        "S1" => scenarios::s1(ctx).await,
        "S2" => scenarios::s2(ctx).await,
        "S3" => scenarios::s3(ctx).await,
        "S4" => scenarios::s4(ctx).await,
        "S5" => scenarios::s5(ctx).await,
        "S6" => scenarios::s6(ctx).await,
        "S7" => scenarios::s7(ctx).await,
        "C1" => cluster::c1(ctx).await,
        "C3" => cluster::c3(ctx).await,
        "C5" => cluster::c5(ctx).await,
        "K1" => kinds::k1(ctx).await,
        "K2" => kinds::k2(ctx).await,
        "K3" => kinds::k3(ctx).await,
        "K4" => kinds::k4(ctx).await,
        "K5" => kinds::k5(ctx).await,
        "R1" => redlock::r1(ctx).await,
        "R3" => redlock::r3(ctx).await,
        other => Err(err(format!("unknown scenario {other}"))),
    }
}
