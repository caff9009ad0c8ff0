//! RedLock against rslock 0.10 (itself a RedLock implementation) on the same five
//! independent redis-servers, started by the benchmark:
//!
//! - R1: serial lock/unlock cycles, 1 task, 1 name (acquire on a majority, release on
//!   all): cycles/s and p50/p99, interleaved rounds;
//! - R3: 4 clients, one task each, contend for 1 name with a 1 ms think time outside the
//!   lock (tokio's timer, so about 1-2 ms, the same for both): acquisitions/s, with each
//!   library's default retry delay (up to 200 ms for both) and with 10 ms.
//!
//! Both use a 30 s lease; the library's holds are watchdog-renewed, rslock's are not
//! (nothing to renew in a cycle this short).

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis_locks::{LockClient, RedLock};
use serde_json::json;

use super::common::RedisServer;
use super::report::{Outcome, Row, num, ratio};
use super::rslock_impl;
use super::scenarios::Ctx;
use super::util::{Res, r1 as round1, summarize_ns};

const LEASE: Duration = Duration::from_secs(30);
const SERVERS: usize = 5;

async fn redlock(urls: &[String], delay: Duration) -> Res<RedLock> {
    let mut locks = Vec::new();
    for url in urls {
        locks.push(LockClient::connect(url).await?.lock("r")?);
    }
    Ok(RedLock::new(locks)?.with_retry_delay(delay)?)
}

fn rslock(urls: &[String], delay: Duration) -> rslock_impl::LockManager {
    let mut manager = rslock_impl::LockManager::new(urls.to_vec());
    if delay != Duration::ZERO {
        manager.set_retry(3, delay);
    }
    manager
}

pub async fn r1(ctx: &mut Ctx) -> Res<Outcome> {
    let rounds = if ctx.quick { 5 } else { 20 };
    let per_round = 100;
    let mut out = Outcome::new("R1", "RedLock on 5 servers: serial cycles against rslock");
    let servers: Vec<RedisServer> = (0..SERVERS).map(|_| RedisServer::start()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let lib = redlock(&urls, Duration::from_millis(200)).await?;
    let rs = rslock(&urls, Duration::ZERO);
    let (mut lib_ns, mut rs_ns) = (Vec::new(), Vec::new());
    for round in 0..=rounds {
        for _ in 0..per_round {
            let t = Instant::now();
            let guard = lib.acquire().await?;
            guard.release().await?;
            if round > 0 {
                lib_ns.push(t.elapsed().as_nanos() as u64);
            }
        }
        for _ in 0..per_round {
            let t = Instant::now();
            let lock = loop {
                match rs.lock("rslock:r", LEASE).await {
                    Ok(lock) => break lock,
                    Err(_) => continue,
                }
            };
            rs.unlock(&lock).await;
            if round > 0 {
                rs_ns.push(t.elapsed().as_nanos() as u64);
            }
        }
    }
    let (lib_sum, rs_sum) = (summarize_ns(&lib_ns), summarize_ns(&rs_ns));
    let lib_rate = lib_ns.len() as f64 / (lib_ns.iter().sum::<u64>() as f64 / 1e9);
    let rs_rate = rs_ns.len() as f64 / (rs_ns.iter().sum::<u64>() as f64 / 1e9);
    out.set(
        "cycles_per_sec",
        json!({"lib": round1(lib_rate), "rslock": round1(rs_rate), "servers": SERVERS}),
    );
    out.set(
        "cycle_us",
        json!({"lib": lib_sum.json(), "rslock": rs_sum.json()}),
    );
    out.row(
        Row::new("serial cycles/s, 5 servers (raw column: rslock)")
            .lib(num(lib_rate))
            .raw(num(rs_rate))
            .ratio(ratio(lib_rate, rs_rate)),
    );
    out.row(
        Row::new("cycle p50 / p99 µs")
            .lib(format!("{} / {}", num(lib_sum.p50), num(lib_sum.p99)))
            .raw(format!("{} / {}", num(rs_sum.p50), num(rs_sum.p99))),
    );
    drop(servers);
    Ok(out)
}

pub async fn r3(ctx: &mut Ctx) -> Res<Outcome> {
    let run = Duration::from_millis(if ctx.quick { 1500 } else { 4000 });
    let mut out = Outcome::new(
        "R3",
        "RedLock on 5 servers: 4 clients contend for 1 name (1 ms think time), against rslock",
    );
    let servers: Vec<RedisServer> = (0..SERVERS).map(|_| RedisServer::start()).collect();
    let urls: Arc<Vec<String>> = Arc::new(servers.iter().map(RedisServer::url).collect());
    let mut rows = Vec::new();
    for delay in [Duration::from_millis(200), Duration::from_millis(10)] {
        // The library: 4 RedLocks, each on its own 5 clients.
        let mut libs = Vec::new();
        for _ in 0..4 {
            libs.push(redlock(&urls, delay).await?);
        }
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for lock in libs {
            set.spawn(async move {
                let mut done = 0u64;
                while started.elapsed() < run {
                    let guard = lock.acquire().await?;
                    guard.release().await?;
                    done += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                Ok::<_, redis_locks::Error>(done)
            });
        }
        let mut lib_done = 0;
        while let Some(joined) = set.join_next().await {
            lib_done += joined??;
        }
        let lib_rate = lib_done as f64 / started.elapsed().as_secs_f64();
        // rslock: 4 managers over the same servers, retrying until they get it.
        let started = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..4 {
            let manager = rslock(&urls, delay);
            set.spawn(async move {
                let mut done = 0u64;
                while started.elapsed() < run {
                    let lock = loop {
                        match manager.lock("rslock:r3", LEASE).await {
                            Ok(lock) => break Some(lock),
                            Err(_) if started.elapsed() < run => continue,
                            Err(_) => break None,
                        }
                    };
                    let Some(lock) = lock else { break };
                    manager.unlock(&lock).await;
                    done += 1;
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                done
            });
        }
        let mut rs_done = 0;
        while let Some(joined) = set.join_next().await {
            rs_done += joined?;
        }
        let rs_rate = rs_done as f64 / started.elapsed().as_secs_f64();
        rows.push((delay, lib_rate, rs_rate));
    }
    out.set(
        "acquisitions_per_sec",
        json!(rows.iter().map(|(delay, lib, rs)| json!({"retry_delay_ms": delay.as_millis() as u64, "lib": round1(*lib), "rslock": round1(*rs)})).collect::<Vec<_>>()),
    );
    for (delay, lib, rs) in rows {
        out.row(
            Row::new(format!(
                "acquisitions/s, retry delay up to {} ms (raw column: rslock)",
                delay.as_millis()
            ))
            .lib(num(lib))
            .raw(num(rs))
            .ratio(ratio(lib, rs)),
        );
    }
    drop(servers);
    Ok(out)
}
