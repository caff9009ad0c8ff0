//! Shared plumbing for the benchmark: statistics, `INFO` parsing, `/proc` readings, and
//! the raw `SET NX PX` baseline. The throw-away redis-server is the test harness's
//! (`tests/common`).

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis::aio::{ConnectionManager, ConnectionManagerConfig, MultiplexedConnection};

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
pub type Res<T> = Result<T, BoxError>;

/// Builds a `BoxError` from a message.
pub fn err(msg: impl Into<String>) -> BoxError {
    msg.into().into()
}

/// The multi-thread tokio runtime used by the benchmark and its workers. For diagnosis,
/// `RLB_WORKER_THREADS=n` sets the number of worker threads (default: one per core); the
/// workers inherit it.
pub fn runtime_builder() -> tokio::runtime::Builder {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if let Some(n) = std::env::var("RLB_WORKER_THREADS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
    {
        builder.worker_threads(n);
    }
    builder
}

// ---------------------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------------------

/// A `ConnectionManager` configured like the library's own command connection.
pub async fn manager(url: &str) -> Res<ConnectionManager> {
    let client = redis::Client::open(url)?;
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(5)))
        .set_response_timeout(Some(Duration::from_secs(3)))
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_millis(500));
    Ok(ConnectionManager::new_with_config(client, config).await?)
}

/// A plain multiplexed connection, for control traffic (INFO, FLUSHALL, checks).
pub async fn control(url: &str) -> Res<MultiplexedConnection> {
    Ok(redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?)
}

// ---------------------------------------------------------------------------------------
// Clocks, statistics
// ---------------------------------------------------------------------------------------

/// Microseconds since the UNIX epoch (CLOCK_REALTIME: shared by processes on one host).
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as u64)
        .unwrap_or(0)
}

/// Distribution summary in microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
}

/// Summarises samples given in nanoseconds (nearest-rank percentiles), in microseconds.
pub fn summarize_ns(samples: &[u64]) -> Summary {
    if samples.is_empty() {
        return Summary::default();
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let n = sorted.len();
    let pct = |p: f64| {
        let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
        sorted[rank - 1] as f64 / 1000.0
    };
    let sum: u128 = sorted.iter().map(|&x| x as u128).sum();
    Summary {
        n,
        mean: sum as f64 / n as f64 / 1000.0,
        p50: pct(0.50),
        p90: pct(0.90),
        p99: pct(0.99),
        max: sorted[n - 1] as f64 / 1000.0,
    }
}

impl Summary {
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "n": self.n,
            "mean_us": r1(self.mean),
            "p50_us": r1(self.p50),
            "p90_us": r1(self.p90),
            "p99_us": r1(self.p99),
            "max_us": r1(self.max),
        })
    }
}

/// Rounds to one decimal (for JSON).
pub fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// Rounds to two decimals (for JSON).
pub fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

pub fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

/// Serial PING round trips on a `ConnectionManager` (the library's connection type).
pub async fn ping_rtt(conn: &ConnectionManager, warmup: usize, n: usize) -> Res<Summary> {
    let mut conn = conn.clone();
    let mut samples = Vec::with_capacity(n);
    for i in 0..warmup + n {
        let t = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        if i >= warmup {
            samples.push(ns(t.elapsed()));
        }
    }
    Ok(summarize_ns(&samples))
}

/// PING round trips each sent after `gap` of idleness: what a request costs when this
/// process (and its runtime's threads) had gone to sleep, as a woken waiter's does.
pub async fn idle_ping_rtt(conn: &ConnectionManager, n: usize, gap: Duration) -> Res<Summary> {
    let mut conn = conn.clone();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        tokio::time::sleep(gap).await;
        let t = Instant::now();
        let _: String = redis::cmd("PING").query_async(&mut conn).await?;
        samples.push(ns(t.elapsed()));
    }
    Ok(summarize_ns(&samples))
}

// ---------------------------------------------------------------------------------------
// INFO commandstats
// ---------------------------------------------------------------------------------------

/// Calls and total server time of one command, from `INFO commandstats`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calls {
    pub calls: u64,
    pub usec: u64,
}

pub type CmdStats = HashMap<String, Calls>;

/// `INFO commandstats` as command → calls and µs. Commands run inside scripts are counted
/// by Redis too (under their own names), and their time is also inside the script's.
pub async fn commandstats(conn: &mut MultiplexedConnection) -> Res<CmdStats> {
    let text: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let mut stats = HashMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((name, fields)) = rest.split_once(':') else {
            continue;
        };
        let field = |key: &str| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(key))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        stats.insert(
            name.to_owned(),
            Calls {
                calls: field("calls="),
                usec: field("usec="),
            },
        );
    }
    Ok(stats)
}

/// Commands between two snapshots, without the INFO calls themselves.
pub fn delta(before: &CmdStats, after: &CmdStats) -> CmdStats {
    after
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .map(|(name, now)| {
            let was = before.get(name).copied().unwrap_or_default();
            (
                name.clone(),
                Calls {
                    calls: now.calls.saturating_sub(was.calls),
                    usec: now.usec.saturating_sub(was.usec),
                },
            )
        })
        .filter(|(_, d)| d.calls > 0)
        .collect()
}

/// Adds one delta into an accumulator.
pub fn add_into(acc: &mut CmdStats, d: &CmdStats) {
    for (name, c) in d {
        let slot = acc.entry(name.clone()).or_default();
        slot.calls += c.calls;
        slot.usec += c.usec;
    }
}

/// Commands a client sends itself (as opposed to commands that scripts call inside Redis,
/// which `INFO commandstats` also counts). Every implementation also sends `SET` at top
/// level to take a free lock (the library's `lua/take.lua`; `extra_top`), which scripts
/// may run too (the library's acquire.lua marks a held first hold with one). Scenarios
/// measure one kind of client at a time, so "top-level commands" = round trips.
pub const TOP_LEVEL: &[&str] = &[
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "script",
    "subscribe",
    "unsubscribe",
    "psubscribe",
    "punsubscribe",
    "ping",
    "hello",
    "client",
    "select",
];

/// Command counts in a delta.
#[derive(Debug, Clone, Copy, Default)]
pub struct CmdCount {
    /// Every command, including those that scripts ran inside Redis.
    pub all: u64,
    /// Commands the client sent (= round trips).
    pub top: u64,
    /// Server execution time of the top-level commands (scripts include their inner calls).
    pub top_usec: u64,
}

pub fn count_cmds(d: &CmdStats, extra_top: &[&str]) -> CmdCount {
    let mut count = CmdCount::default();
    for (name, c) in d {
        count.all += c.calls;
        // Subcommands are reported as `script|load`, `client|setinfo`, ...
        let base = name.split('|').next().unwrap_or(name);
        if TOP_LEVEL.contains(&base) || extra_top.contains(&base) {
            count.top += c.calls;
            count.top_usec += c.usec;
        }
    }
    count
}

/// A delta as a JSON object with sorted keys: command → [calls, server µs].
pub fn cmds_json(d: &CmdStats) -> serde_json::Value {
    let sorted: std::collections::BTreeMap<_, _> =
        d.iter().map(|(k, v)| (k, [v.calls, v.usec])).collect();
    serde_json::json!(sorted)
}

/// Redis's own CPU time (user + system) in µs, from `INFO cpu`.
pub async fn redis_cpu_us(conn: &mut MultiplexedConnection) -> Res<f64> {
    let text: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    let mut total = 0.0;
    for line in text.lines() {
        if let Some(v) = line
            .strip_prefix("used_cpu_sys:")
            .or_else(|| line.strip_prefix("used_cpu_user:"))
        {
            total += v.trim().parse::<f64>().unwrap_or(0.0);
        }
    }
    Ok(total * 1e6)
}

/// Everything measured around one batch: commands, Redis CPU, this process's CPU.
pub struct Meter {
    cmds: CmdStats,
    redis_cpu_us: f64,
    client_cpu_ns: u64,
}

/// What a [`Meter`] saw.
#[derive(Default, Clone)]
pub struct Metered {
    pub cmds: CmdStats,
    pub redis_cpu_us: f64,
    pub client_cpu_us: f64,
}

impl Meter {
    pub async fn start(conn: &mut MultiplexedConnection) -> Res<Meter> {
        Ok(Meter {
            cmds: commandstats(conn).await?,
            redis_cpu_us: redis_cpu_us(conn).await?,
            client_cpu_ns: threads_cpu_ns(),
        })
    }

    pub async fn stop(self, conn: &mut MultiplexedConnection) -> Res<Metered> {
        let client_cpu_ns = threads_cpu_ns();
        let redis_cpu = redis_cpu_us(conn).await?;
        let cmds = commandstats(conn).await?;
        Ok(Metered {
            cmds: delta(&self.cmds, &cmds),
            redis_cpu_us: redis_cpu - self.redis_cpu_us,
            client_cpu_us: client_cpu_ns.saturating_sub(self.client_cpu_ns) as f64 / 1000.0,
        })
    }
}

impl Metered {
    pub fn add(&mut self, other: &Metered) {
        add_into(&mut self.cmds, &other.cmds);
        self.redis_cpu_us += other.redis_cpu_us;
        self.client_cpu_us += other.client_cpu_us;
    }
}

// ---------------------------------------------------------------------------------------
// /proc readings
// ---------------------------------------------------------------------------------------

fn getconf(name: &str, fallback: u64) -> u64 {
    Command::new("getconf")
        .arg(name)
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(fallback)
}

pub fn clock_ticks_per_sec() -> u64 {
    getconf("CLK_TCK", 100)
}

pub fn page_size() -> u64 {
    getconf("PAGESIZE", 4096)
}

/// This process's resident set size in bytes.
pub fn rss_bytes(page: u64) -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .unwrap_or(0)
        * page
}

/// CPU time of this process's live threads in ns (sum of `/proc/self/task/*/schedstat`),
/// finer than the clock ticks of `/proc/self/stat`.
pub fn threads_cpu_ns() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| std::fs::read_to_string(e.path().join("schedstat")).ok())
        .filter_map(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        })
        .sum()
}

/// This process's user + system CPU time in µs (all threads, `getrusage`).
pub fn process_cpu_us() -> u64 {
    // SAFETY: getrusage only writes into the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut usage) != 0 {
            return 0;
        }
        usage
    };
    let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
    us(usage.ru_utime) + us(usage.ru_stime)
}

/// This process's user + system CPU time in clock ticks.
pub fn cpu_ticks() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // Fields after the command name (which is in parentheses and may contain spaces):
    // state is field 3, utime field 14, stime field 15.
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    let get = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    get(11) + get(12)
}

// ---------------------------------------------------------------------------------------
// The raw baseline
// ---------------------------------------------------------------------------------------

pub const COMPARE_AND_DELETE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// The simplest correct single-node lock: `SET name token NX PX` to acquire, a
/// compare-and-delete script (EVALSHA) to release, on a `ConnectionManager`.
pub struct Raw {
    conn: ConnectionManager,
    release: redis::Script,
    counter: AtomicU64,
    prefix: String,
}

impl Raw {
    pub async fn connect(url: &str) -> Res<Arc<Self>> {
        Ok(Arc::new(Raw {
            conn: manager(url).await?,
            release: redis::Script::new(COMPARE_AND_DELETE),
            counter: AtomicU64::new(0),
            prefix: format!("raw-{}-{}", std::process::id(), now_us()),
        }))
    }

    /// One attempt; the token when acquired.
    pub async fn try_acquire(&self, key: &str, lease_ms: u64) -> Res<Option<String>> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let token = format!("{}-{n}", self.prefix);
        let mut conn = self.conn.clone();
        let reply: Option<String> = redis::cmd("SET")
            .arg(key)
            .arg(&token)
            .arg("NX")
            .arg("PX")
            .arg(lease_ms)
            .query_async(&mut conn)
            .await?;
        Ok(reply.map(|_| token))
    }

    /// Returns whether the key was ours and was deleted.
    pub async fn release(&self, key: &str, token: &str) -> Res<bool> {
        let mut conn = self.conn.clone();
        let deleted: i64 = self
            .release
            .key(key)
            .arg(token)
            .invoke_async(&mut conn)
            .await?;
        Ok(deleted == 1)
    }
}

// ---------------------------------------------------------------------------------------
// Keys left behind
// ---------------------------------------------------------------------------------------

/// Every key in the database, counted by the first of `prefixes` it starts with ("other"
/// when none matches). Used after every lock of a scenario was released: a lock should
/// leave nothing behind (the library keeps no per-request keys; its fencing counter exists
/// only for names that used fencing, which the benchmark does not).
pub async fn keys_left(
    conn: &mut MultiplexedConnection,
    prefixes: &[(&str, String)],
) -> Res<(u64, std::collections::BTreeMap<String, u64>)> {
    let mut by: std::collections::BTreeMap<String, u64> = prefixes
        .iter()
        .map(|(label, _)| ((*label).to_owned(), 0))
        .collect();
    let mut total = 0u64;
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        for key in keys {
            total += 1;
            let label = prefixes
                .iter()
                .find(|(_, prefix)| key.starts_with(prefix.as_str()))
                .map_or("other", |(label, _)| label);
            *by.entry(label.to_owned()).or_default() += 1;
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    Ok((total, by))
}

// ---------------------------------------------------------------------------------------
// Diagnostic: the library's scripts without the library
// ---------------------------------------------------------------------------------------

/// The library's own commands for an uncontended cycle, on a `ConnectionManager`, laid out
/// as the library lays them out (see `protocol/src/acquire.rs` and `release.rs`): the bare
/// `SET NX PX` of `lua/take.lua` with the value `"\1" <tag>.<seq> "\1" <owner>`, then
/// `lua/release.lua` with EVALSHA (the key, owner, the hold id, a new request id as client
/// tag and seq, and the wake-up channel),
/// but without any of the library's client-side code (no lanes, no task per attempt, no
/// registry, no extra timeout). Its gap to the raw baseline is the cost of the scripts in
/// Redis; the library's gap to it is the cost of the client code. Keys use the prefix
/// `diag`.
pub struct LibScripts {
    conn: ConnectionManager,
    release: redis::Script,
    owner: String,
    /// The request ids' client tag (no `.`: the scripts split `<tag>.<seq>` at the last dot).
    tag: String,
    counter: AtomicU64,
}

impl LibScripts {
    pub async fn connect(url: &str) -> Res<Arc<Self>> {
        let tag = format!("diag-{}-{}", std::process::id(), now_us());
        Ok(Arc::new(LibScripts {
            conn: manager(url).await?,
            release: redis::Script::new(include_str!("../../lua/release.lua")),
            owner: format!("{tag}:task-1"),
            tag,
            counter: AtomicU64::new(0),
        }))
    }

    fn request(&self) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        format!("{}.{n}", self.tag)
    }

    /// Acquires `name` (it must be free) as the library takes a free lock: the bare
    /// `SET <key> <mark><request>\x01<owner> NX PX <lease>` of `lua/take.lua`; returns the
    /// hold id.
    pub async fn acquire(&self, name: &str) -> Res<String> {
        let key = format!("diag:{{{name}}}");
        let mut conn = self.conn.clone();
        let request = self.request();
        let reply: redis::Value = redis::cmd("SET")
            .arg(&key)
            .arg(format!("\u{1}{request}\u{1}{}", self.owner))
            .arg("NX")
            .arg("PX")
            .arg(30_000)
            .query_async(&mut conn)
            .await?;
        match reply {
            // A fresh unfenced hold: its hold id is the request id.
            redis::Value::Okay => Ok(request),
            _ => Err(err(format!(
                "diagnostic acquire: unexpected reply {reply:?} (did lua/take.lua change?)"
            ))),
        }
    }

    pub async fn release(&self, name: &str, hold: &str) -> Res<()> {
        let hash = format!("diag:{{{name}}}");
        let mut conn = self.conn.clone();
        let reply: i64 = self
            .release
            .key(&hash)
            .arg(&self.owner)
            .arg(hold)
            .arg(&self.tag)
            .arg(self.counter.fetch_add(1, Ordering::Relaxed))
            .arg(format!("{hash}:db0:released"))
            .invoke_async(&mut conn)
            .await?;
        if reply == 0 {
            Ok(())
        } else {
            Err(err(format!(
                "diagnostic release: reply {reply} (did lua/release.lua change its arguments?)"
            )))
        }
    }
}
