//! Worker sub-modes: the bench binary re-executes itself (`std::env::current_exe()`) with
//! `REDIS_LOCKS_BENCH_WORKER=<role>` for the multi-process scenarios. Workers take their
//! parameters from `RLB_*` environment variables and print JSON lines on stdout.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use redis_locks::LockClient;
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use super::rslock_impl;
use super::util::{self, Res, err, now_us};

/// The environment variable that selects a worker role.
pub const ROLE_ENV: &str = "REDIS_LOCKS_BENCH_WORKER";

fn env(name: &str) -> Res<String> {
    std::env::var(name).map_err(|_| err(format!("worker: {name} is not set")))
}

fn env_u64(name: &str) -> Res<u64> {
    env(name)?
        .parse()
        .map_err(|e| err(format!("worker: {name}: {e}")))
}

/// Prints one JSON line (stdout is line-buffered, so the parent sees it at once).
pub fn emit(value: &Value) {
    println!("{value}");
}

pub fn main(role: &str) -> ExitCode {
    let runtime = match util::runtime_builder().build() {
        Ok(rt) => rt,
        Err(e) => {
            emit(&json!({"worker": role, "error": e.to_string()}));
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(async {
        match role {
            "s3" => s3().await,
            "s4" => s4().await,
            "s6-holder" => s6_holder().await,
            other => Err(err(format!("unknown worker role {other:?}"))),
        }
    });
    match outcome {
        Ok(value) => {
            emit(&value);
            ExitCode::SUCCESS
        }
        Err(e) => {
            emit(&json!({"worker": role, "error": e.to_string()}));
            ExitCode::FAILURE
        }
    }
}

async fn sleep_until_us(at_us: u64) {
    let now = now_us();
    if at_us > now {
        tokio::time::sleep(Duration::from_micros(at_us - now)).await;
    }
}

/// Polls `GET key` until it equals `want` (1 ms steps), up to `limit`.
pub async fn wait_for_value(
    conn: &mut redis::aio::ConnectionManager,
    key: &str,
    want: u64,
    limit: Duration,
) -> Res<()> {
    let deadline = Instant::now() + limit;
    loop {
        let v: Option<u64> = redis::cmd("GET").arg(key).query_async(conn).await?;
        if v == Some(want) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(err(format!(
                "timed out waiting for {key} = {want} (got {v:?})"
            )));
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// S3's think time outside the lock: how long [`think`] sleeps in full.
pub const THINK: Duration = Duration::from_millis(1);

/// How long before the deadline [`think`] stops sleeping and starts spinning. Measured on
/// Linux (2-core VM) with the timer slack at 1 ns: `std::thread::sleep(1 ms)` oversleeps by
/// 20 µs at p50, 35 µs at p90 and 60 µs at p99 (with the default 50 µs slack: 67 / 86 /
/// 117 µs). The margin absorbs most wake-ups; the spin takes the rest of the way.
const SPIN_TAIL: Duration = Duration::from_micros(60);

/// Asks Linux to wake this thread's timed sleeps on time (the default timer slack lets a
/// sleep end up to 50 µs late, so timers can be batched).
fn precise_timers() {
    // SAFETY: prctl(PR_SET_TIMERSLACK, ns) only changes the calling thread's timer slack.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// S3's think time: returns after exactly `d` (to a few µs), the same way for every
/// implementation compared, and says how long it took.
///
/// Not `tokio::time::sleep(d)`: tokio's timer has 1 ms resolution and rounds a deadline
/// up to the next tick, so a 1 ms sleep lasts 1–2 ms: 2.07 ms at p50 as measured in S3
/// (where it starts right after the release reply). That capped every implementation near
/// 4 processes / 2.2 ms and made S3 measure tokio's timer rather than the locks. Not a
/// plain spin either: four spinning processes would take the CPU from redis-server and
/// from the lock traffic being measured (the benchmark runs on small machines: 2 cores).
/// So the thread sleeps in the kernel (timer slack 1 ns) until [`SPIN_TAIL`] before the
/// deadline, then spins to it: 1000 µs at p50, mean ≤ 1002 µs in S3. `block_in_place`
/// tells tokio this worker thread is busy, so the runtime's other tasks (the redis-rs
/// connection drivers, the library's pub/sub reader) move to another thread meanwhile.
pub fn think(d: Duration) -> Duration {
    let start = Instant::now();
    let deadline = start + d;
    tokio::task::block_in_place(|| {
        precise_timers();
        let coarse = deadline.checked_sub(SPIN_TAIL).unwrap_or(deadline);
        let now = Instant::now();
        if coarse > now {
            std::thread::sleep(coarse - now);
        }
        while Instant::now() < deadline {
            std::hint::spin_loop();
        }
    });
    start.elapsed()
}

enum S3Lock {
    Lib(redis_locks::Lock),
    Rs(rslock_impl::LockManager),
    None,
}

/// S3: one task in this process loops {acquire, critical section, release, think 1 ms}
/// on one shared lock name between a common start time and end time. The think time is
/// [`think`]'s: exactly 1 ms for every implementation.
async fn s3() -> Res<Value> {
    let url = env("RLB_URL")?;
    let imp = env("RLB_IMPL")?;
    let id = env_u64("RLB_ID")?;
    let start_us = env_u64("RLB_START_US")?;
    let duration = Duration::from_millis(env_u64("RLB_DURATION_MS")?);
    let name = env("RLB_NAME")?;
    let lease = Duration::from_secs(10);

    let mut cs = util::manager(&url).await?;
    let lock = match imp.as_str() {
        "redis-locks" | "redis-locks-cluster" => {
            let client = if imp == "redis-locks-cluster" {
                // The lock on a cluster; the critical section's counters stay on `url`.
                LockClient::builder_cluster(env("RLB_SEEDS")?.split(','))
                    .connect()
                    .await?
            } else {
                LockClient::connect(&url).await?
            };
            // Warm-up on a private name: loads the scripts, opens the connection.
            let warm = client.lock(&format!("{name}:warm:{id}"))?;
            tokio::spawn(async move { warm.acquire().await?.release().await }).await??;
            S3Lock::Lib(client.lock(&name)?)
        }
        "rslock" | "rslock-10ms" => {
            let mut manager = rslock_impl::LockManager::new(vec![url.clone()]);
            if imp == "rslock-10ms" {
                manager.set_retry(3, Duration::from_millis(10));
            }
            let warm = format!("rslock:{name}:warm:{id}");
            manager.lock(warm.as_bytes(), lease).await?.release().await;
            S3Lock::Rs(manager)
        }
        // No lock at all: only for checking by hand that violations are detected.
        "none" => S3Lock::None,
        other => return Err(err(format!("unknown implementation {other}"))),
    };
    let key = format!("rslock:{name}");
    let inside = format!("{name}:inside");
    let total = format!("{name}:total");

    sleep_until_us(start_us).await;
    let cpu0 = util::process_cpu_us();
    let end = Instant::now() + duration;
    let task = tokio::spawn(async move {
        let mut counted = 0u64;
        let mut late = 0u64;
        let mut violations = 0u64;
        let mut waits = Vec::new();
        let mut thinks = Vec::new();
        let mut sections = Vec::new();
        let mut releases = Vec::new();
        while Instant::now() < end {
            let t0 = Instant::now();
            // Acquire.
            enum G {
                Lib(redis_locks::LockGuard),
                Rs(rslock_impl::LockGuard),
                None,
            }
            let guard = match &lock {
                S3Lock::Lib(lock) => G::Lib(lock.acquire().await?),
                S3Lock::Rs(manager) => G::Rs(manager.acquire(key.as_bytes(), lease).await?),
                S3Lock::None => G::None,
            };
            let acquired = Instant::now();
            waits.push(util::ns(acquired - t0));
            // Critical section: enter (must be alone), count, leave.
            let (now_inside, _): (i64, i64) = redis::pipe()
                .incr(&inside, 1)
                .incr(&total, 1)
                .query_async(&mut cs)
                .await?;
            if now_inside != 1 {
                violations += 1;
            }
            let _: i64 = redis::cmd("DECR").arg(&inside).query_async(&mut cs).await?;
            let left = Instant::now();
            sections.push(util::ns(left - acquired));
            // Release.
            match guard {
                G::Lib(guard) => guard.release().await?,
                G::Rs(guard) => guard.release().await,
                G::None => {}
            }
            releases.push(util::ns(left.elapsed()));
            if acquired <= end {
                counted += 1;
            } else {
                late += 1;
            }
            thinks.push(util::ns(think(THINK)));
        }
        Ok::<_, util::BoxError>((counted, late, violations, waits, thinks, sections, releases))
    });
    let (counted, late, violations, waits, thinks, sections, releases) = task.await??;
    let cpu_us = util::process_cpu_us().saturating_sub(cpu0);
    let waited_over = |us: u64| waits.iter().filter(|&&w| w > us * 1000).count();
    let wait = util::summarize_ns(&waits);
    let think = util::summarize_ns(&thinks);
    Ok(json!({
        "worker": "s3",
        "impl": imp,
        "id": id,
        "count": counted,
        "late": late,
        "violations": violations,
        "wait": wait.json(),
        "waits_over_us": {"100": waited_over(100), "200": waited_over(200),
                          "500": waited_over(500), "1000": waited_over(1000)},
        "critical_section": util::summarize_ns(&sections).json(),
        "release": util::summarize_ns(&releases).json(),
        "think": think.json(),
        "cpu_us": cpu_us,
    }))
}

/// The raw pub/sub hand-off baseline's release: compare-and-delete, then announce.
pub const RAW_RELEASE_AND_PUBLISH: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], 'released')
  return 1
end
return 0
";

/// S4's grant-on-release floor, the holder's release: compare-and-delete, but when a
/// waiter has registered (KEYS[2], its value), the lock goes to that waiter in the same
/// script (its value, a fresh lease) and the message names it. A reference for what a
/// grant made by the release could reach (issue 24), not the library's protocol: no
/// registration of more than one waiter, no defence against a dead or departed one.
pub const RAW_RELEASE_AND_GRANT: &str = r"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
local next = redis.call('GETDEL', KEYS[2])
if next then
  redis.call('SET', KEYS[1], next, 'PX', 30000)
  redis.call('PUBLISH', ARGV[2], next)
  return 1
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[2], 'released')
return 1
";

/// S4's grant-on-release floor, the waiter's attempt: `SET NX PX`, and when that fails
/// the waiter's registration (KEYS[2]), in one call.
const RAW_TAKE_OR_REGISTER: &str = r"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', 30000) then
  return 1
end
redis.call('SET', KEYS[2], ARGV[1], 'PX', 30000)
return 0
";

/// The raw baseline's waiter side: a plain redis-rs subscription, `SET NX` on each message.
/// With `grant` (the grant-on-release floor): a failed attempt registers the waiter, and
/// a message that names its value means it holds the lock, with no call.
struct RawWaiter {
    conn: redis::aio::ConnectionManager,
    stream: redis::aio::PubSubStream,
    _sink: redis::aio::PubSubSink,
    key: String,
    grant: Option<(redis::Script, String)>,
}

impl RawWaiter {
    /// Takes the lock, trying again on each release message.
    async fn acquire(&mut self, token: &str) -> Res<()> {
        loop {
            let taken = match &self.grant {
                Some((take_or_register, next_key)) => {
                    let taken: i64 = take_or_register
                        .key(&self.key)
                        .key(next_key)
                        .arg(token)
                        .invoke_async(&mut self.conn)
                        .await?;
                    taken == 1
                }
                None => {
                    let ok: Option<String> = redis::cmd("SET")
                        .arg(&self.key)
                        .arg(token)
                        .arg("NX")
                        .arg("PX")
                        .arg(30_000)
                        .query_async(&mut self.conn)
                        .await?;
                    ok.is_some()
                }
            };
            if taken {
                return Ok(());
            }
            let message =
                tokio::time::timeout(Duration::from_secs(30), next_message(&mut self.stream))
                    .await
                    .map_err(|_| err("raw waiter: no release message within 30 s"))?
                    .ok_or_else(|| err("raw waiter: subscription closed"))?;
            if self.grant.is_some() && message.get_payload_bytes() == token.as_bytes() {
                return Ok(());
            }
        }
    }

    async fn release(&mut self) -> Res<()> {
        let _: i64 = redis::cmd("DEL")
            .arg(&self.key)
            .query_async(&mut self.conn)
            .await?;
        Ok(())
    }
}

async fn next_message(stream: &mut redis::aio::PubSubStream) -> Option<redis::Msg> {
    std::future::poll_fn(|cx| {
        use futures_core::Stream;
        std::pin::Pin::new(&mut *stream).poll_next(cx)
    })
    .await
}

enum Waiter {
    Lib(redis_locks::Lock),
    Raw(Box<RawWaiter>),
}

/// S4, process B: waits for the lock that process A holds, records when it got it, and
/// compares with the release-start time A wrote into Redis. `RLB_KIND` is `redis-locks`
/// or `raw` (plain SET NX + a redis-rs subscription: the floor for a pub/sub hand-off).
async fn s4() -> Res<Value> {
    let url = env("RLB_URL")?;
    let name = env("RLB_NAME")?;
    let kind = env("RLB_KIND")?;
    let n = env_u64("RLB_N")?;
    let mut conn = util::manager(&url).await?;
    // Keep the client alive for the whole run.
    let mut _client = None;
    // For both kinds alike: a separate plain subscription to the lock's channel in this
    // process, recording when release messages arrive, to split the latency into
    // "message reached B" and "the waiter turned it into an acquisition". Both kinds
    // have it, so the probe's own wake-up costs each the same.
    let probe: std::sync::Arc<std::sync::Mutex<Vec<u64>>> = Default::default();
    let spawn_probe = |channel: String| {
        let url = url.clone();
        let seen = probe.clone();
        async move {
            let pubsub = redis::Client::open(url.as_str())?
                .get_async_pubsub()
                .await?;
            let (mut sink, mut stream) = pubsub.split();
            sink.subscribe(channel).await?;
            tokio::spawn(async move {
                let _sink = sink;
                while next_message(&mut stream).await.is_some() {
                    let at = now_us();
                    if let Ok(mut v) = seen.lock() {
                        v.push(at);
                    }
                }
            });
            Ok::<_, util::BoxError>(())
        }
    };
    let mut waiter = match kind.as_str() {
        "redis-locks" => {
            let client = LockClient::connect(&url).await?;
            let warm = client.lock(&format!("{name}:warm-b"))?;
            tokio::spawn(async move { warm.acquire().await?.release().await }).await??;
            let lock = client.lock(&name)?;
            spawn_probe(lock.channel().to_owned()).await?;
            _client = Some(client);
            Waiter::Lib(lock)
        }
        "raw" | "raw-grant" => {
            let pubsub = redis::Client::open(url.as_str())?
                .get_async_pubsub()
                .await?;
            let (mut sink, stream) = pubsub.split();
            sink.subscribe(format!("{name}:released")).await?;
            spawn_probe(format!("{name}:released")).await?;
            let mut conn = util::manager(&url).await?;
            let grant = if kind == "raw-grant" {
                let take_or_register = redis::Script::new(RAW_TAKE_OR_REGISTER);
                take_or_register.load_async(&mut conn).await?;
                Some((take_or_register, format!("{name}:next")))
            } else {
                None
            };
            Waiter::Raw(Box::new(RawWaiter {
                conn,
                stream,
                _sink: sink,
                key: name.clone(),
                grant,
            }))
        }
        other => return Err(err(format!("unknown kind {other}"))),
    };
    emit(&json!({"worker": "s4", "ready": true}));

    let task = tokio::spawn(async move {
        let mut latencies = Vec::with_capacity(n as usize);
        let mut message_to_acquired = Vec::with_capacity(n as usize);
        for i in 1..=n {
            wait_for_value(
                &mut conn,
                &format!("{name}:a_held"),
                i,
                Duration::from_secs(30),
            )
            .await?;
            let _: () = redis::cmd("SET")
                .arg(format!("{name}:b_waiting"))
                .arg(i)
                .query_async(&mut conn)
                .await?;
            let guard = match &mut waiter {
                Waiter::Lib(lock) => Some(lock.acquire().await?),
                Waiter::Raw(raw) => {
                    raw.acquire(&format!("b-{i}")).await?;
                    None
                }
            };
            let acquired_us = now_us();
            let ts_key = format!("{name}:ts:{i}");
            let deadline = Instant::now() + Duration::from_secs(30);
            let release_us = loop {
                let v: Option<u64> = redis::cmd("GET")
                    .arg(&ts_key)
                    .query_async(&mut conn)
                    .await?;
                if let Some(v) = v {
                    break v;
                }
                if Instant::now() > deadline {
                    return Err(err(format!("no release timestamp for hand-off {i}")));
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            };
            latencies.push(acquired_us as i64 - release_us as i64);
            // The probe's first message at or after A's release start.
            let message_us = probe
                .lock()
                .ok()
                .and_then(|v| v.iter().copied().find(|&t| t >= release_us));
            if let Some(m) = message_us {
                message_to_acquired.push(acquired_us as i64 - m as i64);
            }
            match (&mut waiter, guard) {
                (_, Some(guard)) => guard.release().await?,
                (Waiter::Raw(raw), None) => raw.release().await?,
                (Waiter::Lib(_), None) => unreachable!(),
            }
            let _: () = redis::cmd("SET")
                .arg(format!("{name}:b_done"))
                .arg(i)
                .query_async(&mut conn)
                .await?;
            // Forget probe messages up to now (B's own release announces too).
            if let Ok(mut v) = probe.lock() {
                v.clear();
            }
        }
        Ok::<_, util::BoxError>((latencies, message_to_acquired))
    });
    let (latencies, message_to_acquired) = task.await??;
    Ok(
        json!({"worker": "s4", "kind": kind, "latencies_us": latencies,
              "message_to_acquired_us": message_to_acquired}),
    )
}

/// S6: holds the lock in another process until told (a line on stdin) to release it.
async fn s6_holder() -> Res<Value> {
    let url = env("RLB_URL")?;
    let name = env("RLB_NAME")?;
    let client = LockClient::connect(&url).await?;
    let guard = client.lock(&name)?.acquire().await?;
    emit(&json!({"worker": "s6-holder", "ready": true}));
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let _ = lines.next_line().await?;
    let released_us = now_us();
    guard.release().await?;
    Ok(json!({"worker": "s6-holder", "released_us": released_us}))
}
