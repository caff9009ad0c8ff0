//! The torture harness: worker processes (the test binary re-executed), their
//! acquisition logs, the fenced "protected resource", and the checker.
//!
//! * **Clock.** Every timestamp is `CLOCK_MONOTONIC` in microseconds, which on Linux is
//!   one clock for every process on the host, so logs of different processes compare.
//! * **Workers.** `N` processes × `M` tasks loop: acquire (fenced) → write to the
//!   resource every few ms while holding → one last write → release. Each section is
//!   logged as an `enter` line (before the first write) and an `exit` line (taken before
//!   the release is sent), one JSON object per line, one file per process, written with
//!   one unbuffered `write` each so a SIGKILL loses nothing already logged.
//! * **Resource.** A hash and a list on a SEPARATE redis-server that is never faulted. A
//!   Lua script accepts a write when its token is higher than the highest seen, or equal
//!   and from the same owner; it appends every decision to a log list, whose order is
//!   the resource's own serial order.
//! * **Checker.** Two sections of different owners must not overlap in time. An overlap
//!   is *excused* only when one of them learnt it had lost the lock (lost signal or
//!   `LockLost` from release) and their accepted writes did not interleave at the
//!   resource: that is the out-of-model case (a paused process, Redis losing data) that
//!   fencing exists for. The resource must never accept a stale token.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis_locks::{Error, LockClient};
use serde_json::{Value, json};

/// `CLOCK_MONOTONIC` in µs: system-wide on Linux, so comparable across processes.
pub fn now_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime");
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

/// `FAULTS_SCALE` (default 1): multiplies workers, tasks, repetitions and durations.
pub fn scale() -> u64 {
    std::env::var("FAULTS_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|&s| s >= 1)
        .unwrap_or(1)
}

// ---- the protected resource ------------------------------------------------------------

const RESOURCE_LUA: &str = r#"
-- KEYS[1] state hash {token, owner}; KEYS[2] decision log (list)
-- ARGV[1] token, ARGV[2] owner, ARGV[3] section id
local max = tonumber(redis.call('HGET', KEYS[1], 'token') or '0')
local holder = redis.call('HGET', KEYS[1], 'owner') or ''
local token = tonumber(ARGV[1])
local ok = 0
if token > max or (token == max and holder == ARGV[2]) then
  redis.call('HSET', KEYS[1], 'token', ARGV[1], 'owner', ARGV[2])
  ok = 1
end
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ok .. ' ' .. ARGV[3] .. ' ' .. ARGV[2])
return ok
"#;

const RESOURCE_STATE: &str = "resource:state";
const RESOURCE_LOG: &str = "resource:log";

/// A connection to the resource server and its compare-token script.
#[derive(Clone)]
pub struct Resource {
    conn: MultiplexedConnection,
    script: Arc<redis::Script>,
}

impl Resource {
    pub async fn connect(url: &str) -> Self {
        // No response timeout: a worker that was SIGSTOPped must not see its in-flight
        // write "time out" on resuming (its clock ran on while it was stopped).
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        let conn = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .expect("resource server");
        Resource {
            conn,
            script: Arc::new(redis::Script::new(RESOURCE_LUA)),
        }
    }

    /// Writes with `token`; true when the resource accepted it.
    pub async fn write(&self, token: u64, owner: &str, section: &str) -> bool {
        let mut conn = self.conn.clone();
        let ok: i64 = self
            .script
            .key(RESOURCE_STATE)
            .key(RESOURCE_LOG)
            .arg(token)
            .arg(owner)
            .arg(section)
            .invoke_async(&mut conn)
            .await
            .expect("the resource server is never faulted");
        ok == 1
    }
}

/// One decision of the resource, in its serial order.
#[derive(Debug, Clone)]
pub struct Decision {
    pub token: u64,
    pub ok: bool,
    pub section: String,
    pub owner: String,
}

pub async fn resource_log(url: &str) -> Vec<Decision> {
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let lines: Vec<String> = redis::cmd("LRANGE")
        .arg(RESOURCE_LOG)
        .arg(0)
        .arg(-1)
        .query_async(&mut conn)
        .await
        .unwrap();
    lines
        .iter()
        .map(|line| {
            let mut parts = line.splitn(4, ' ');
            Decision {
                token: parts.next().unwrap().parse().unwrap(),
                ok: parts.next().unwrap() == "1",
                section: parts.next().unwrap().to_owned(),
                owner: parts.next().unwrap_or("").to_owned(),
            }
        })
        .collect()
}

// ---- logs ----------------------------------------------------------------------------

/// Append-only JSON-lines log; one `write` per line.
#[derive(Clone)]
pub struct Log(Arc<std::sync::Mutex<File>>);

impl Log {
    pub fn open(path: &Path) -> Self {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        Log(Arc::new(std::sync::Mutex::new(file)))
    }

    pub fn write(&self, record: Value) {
        let mut line = record.to_string();
        line.push('\n');
        let mut file = self.0.lock().unwrap_or_else(|e| e.into_inner());
        file.write_all(line.as_bytes()).unwrap();
    }
}

pub fn read_records(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    paths.sort();
    for path in paths {
        let text = std::fs::read_to_string(&path).unwrap();
        for line in text.lines() {
            // A SIGKILL can in principle cut the very last line; skip a partial one.
            if let Ok(value) = serde_json::from_str::<Value>(line) {
                out.push(value);
            }
        }
    }
    out
}

// ---- the worker loop (shared by worker processes and in-process runs) ----------------------

/// What one worker (process, or in-process group of tasks) does.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    pub id: usize,
    pub lock_url: String,
    pub resource_url: String,
    pub lock_name: String,
    pub log: PathBuf,
    pub tasks: usize,
    /// The longest a worker runs. A scripted scenario sets a generous ceiling and ends the
    /// run with [`Fleet::stop`] when its script is done: the workers' own clocks start
    /// seconds apart on a loaded machine, so a deadline of theirs cannot track the
    /// scenario's timeline.
    pub run: Duration,
    pub hold: Duration,
    pub write_every: Duration,
    /// Pause after each release before the next acquire (without it the releasing task
    /// usually wins the next race: the lock is not fair).
    pub think: Duration,
    pub watchdog: Duration,
    /// The watchdog's renewal period, when shorter than a third of `watchdog`.
    pub check_interval: Option<Duration>,
    pub wait: Duration,
    pub response_timeout: Duration,
    /// End a section early when its lost signal fires.
    pub end_on_lost: bool,
    /// Shut the runtime down after this long, while a task holds the lock.
    pub shutdown_runtime_after: Option<Duration>,
}

fn ms(d: Duration) -> String {
    d.as_millis().to_string()
}

impl WorkerConfig {
    pub fn to_env(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("FW_ID".into(), self.id.to_string()),
            ("FW_LOCK_URL".into(), self.lock_url.clone()),
            ("FW_RES_URL".into(), self.resource_url.clone()),
            ("FW_LOCK".into(), self.lock_name.clone()),
            ("FW_LOG".into(), self.log.to_str().unwrap().to_owned()),
            ("FW_TASKS".into(), self.tasks.to_string()),
            ("FW_RUN_MS".into(), ms(self.run)),
            ("FW_HOLD_MS".into(), ms(self.hold)),
            ("FW_WRITE_EVERY_MS".into(), ms(self.write_every)),
            ("FW_THINK_MS".into(), ms(self.think)),
            ("FW_WATCHDOG_MS".into(), ms(self.watchdog)),
            ("FW_WAIT_MS".into(), ms(self.wait)),
            ("FW_RESPONSE_MS".into(), ms(self.response_timeout)),
            (
                "FW_END_ON_LOST".into(),
                (self.end_on_lost as u8).to_string(),
            ),
        ];
        if let Some(after) = self.shutdown_runtime_after {
            env.push(("FW_SHUTDOWN_AFTER_MS".into(), ms(after)));
        }
        if let Some(every) = self.check_interval {
            env.push(("FW_CHECK_MS".into(), ms(every)));
        }
        env
    }

    /// `None` when not spawned by a scenario (e.g. `cargo test -- --ignored` by hand).
    pub fn from_env() -> Option<Self> {
        let var = |k: &str| std::env::var(k).ok();
        let dur = |k: &str| Duration::from_millis(var(k).unwrap().parse().unwrap());
        var("FW_ID")?;
        Some(WorkerConfig {
            id: var("FW_ID")?.parse().unwrap(),
            lock_url: var("FW_LOCK_URL")?,
            resource_url: var("FW_RES_URL")?,
            lock_name: var("FW_LOCK")?,
            log: var("FW_LOG")?.into(),
            tasks: var("FW_TASKS")?.parse().unwrap(),
            run: dur("FW_RUN_MS"),
            hold: dur("FW_HOLD_MS"),
            write_every: dur("FW_WRITE_EVERY_MS"),
            think: dur("FW_THINK_MS"),
            watchdog: dur("FW_WATCHDOG_MS"),
            check_interval: var("FW_CHECK_MS").map(|v| Duration::from_millis(v.parse().unwrap())),
            wait: dur("FW_WAIT_MS"),
            response_timeout: dur("FW_RESPONSE_MS"),
            end_on_lost: var("FW_END_ON_LOST").as_deref() == Some("1"),
            shutdown_runtime_after: var("FW_SHUTDOWN_AFTER_MS")
                .map(|v| Duration::from_millis(v.parse().unwrap())),
        })
    }
}

/// Runs the configured tasks with a client of its own, logging to `log`. `in_section`
/// counts tasks currently inside a critical section.
pub async fn run_worker(cfg: WorkerConfig, log: Log, in_section: Arc<AtomicUsize>) {
    let mut builder = LockClient::builder(&cfg.lock_url)
        .watchdog_timeout(cfg.watchdog)
        .response_timeout(cfg.response_timeout)
        .connect_timeout(Duration::from_secs(2));
    if let Some(every) = cfg.check_interval {
        builder = builder.check_interval(every);
    }
    let client = builder
        .connect()
        .await
        .expect("worker: connect lock client");
    run_tasks(&cfg, &client, &log, &in_section).await;
}

/// The task loop with an existing client (used in-process through the fault proxy).
pub async fn run_tasks(
    cfg: &WorkerConfig,
    client: &LockClient,
    log: &Log,
    in_section: &Arc<AtomicUsize>,
) {
    let resource = Resource::connect(&cfg.resource_url).await;
    log.write(json!({
        "k": "start", "w": cfg.id, "pid": std::process::id(), "client": client.id(),
        "t": now_us(),
    }));
    let deadline = Instant::now() + cfg.run;
    let stop_file = stop_file_beside(&cfg.log);
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..cfg.tasks {
        let (cfg, client, log, resource, in_section, stop_file) = (
            cfg.clone(),
            client.clone(),
            log.clone(),
            resource.clone(),
            in_section.clone(),
            stop_file.clone(),
        );
        tasks.spawn(async move {
            let until = Until {
                deadline,
                stop_file,
            };
            task_loop(cfg, client, log, resource, in_section, task, until).await
        });
    }
    let mut acquisitions = 0u64;
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(n) => acquisitions += n,
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(err) => panic!("worker task failed: {err}"),
        }
    }
    log.write(json!({"k": "done", "w": cfg.id, "t": now_us(), "acquisitions": acquisitions}));
}

/// When a worker's tasks stop taking the lock: at the deadline, or once the scenario has
/// created the stop file ([`Fleet::stop`]), whichever comes first.
struct Until {
    deadline: Instant,
    stop_file: PathBuf,
}

/// The stop file of the fleet whose log directory holds `log`.
fn stop_file_beside(log: &Path) -> PathBuf {
    log.with_file_name("stop")
}

async fn task_loop(
    cfg: WorkerConfig,
    client: LockClient,
    log: Log,
    resource: Resource,
    in_section: Arc<AtomicUsize>,
    task: usize,
    until: Until,
) -> u64 {
    let lock = client.lock(&cfg.lock_name).unwrap().with_fencing();
    let mut seq = 0u64;
    loop {
        let now = Instant::now();
        if now >= until.deadline || until.stop_file.exists() {
            return seq;
        }
        let wait = cfg.wait.min(until.deadline - now);
        let started = now_us();
        let outcome = lock.acquire_timeout(wait).await;
        let took_ms = (now_us() - started) / 1000;
        let guard = match outcome {
            Ok(guard) => guard,
            Err(err) => {
                let kind = match &err {
                    Error::Timeout { .. } => "timeout",
                    _ => "error",
                };
                log.write(json!({
                    "k": kind, "w": cfg.id, "task": task, "t": now_us(),
                    "asked_ms": wait.as_millis() as u64, "took_ms": took_ms,
                    "msg": err.to_string(),
                }));
                if kind == "error" {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                continue;
            }
        };
        seq += 1;
        in_section.fetch_add(1, Ordering::SeqCst);
        let section = format!("w{}-t{}-{}", cfg.id, task, seq);
        let owner = guard.owner().to_owned();
        let token = guard.fencing_token().expect("fenced lock");
        log.write(json!({
            "k": "enter", "w": cfg.id, "task": task, "seq": seq, "id": section,
            "owner": owner, "token": token, "count": guard.hold_count(), "t": now_us(),
            "asked_ms": wait.as_millis() as u64, "took_ms": took_ms,
        }));

        // Record when the lost signal fires, from a watcher task.
        let lost_at = Arc::new(AtomicU64::new(0));
        let done = tokio_util::sync::CancellationToken::new();
        let watcher = {
            let lost = guard.lost_token();
            let lost_at = lost_at.clone();
            let done = done.clone();
            tokio::spawn(async move {
                tokio::select! {
                    _ = lost.cancelled() => lost_at.store(now_us(), Ordering::SeqCst),
                    _ = done.cancelled() => {}
                }
            })
        };

        let hold_until = Instant::now() + cfg.hold;
        let (mut writes_ok, mut writes_rejected) = (0u64, 0u64);
        loop {
            if resource.write(token, &owner, &section).await {
                writes_ok += 1;
            } else {
                writes_rejected += 1;
            }
            let now = Instant::now();
            if now >= hold_until || (cfg.end_on_lost && guard.is_lost()) {
                break;
            }
            let nap = cfg.write_every.min(hold_until - now);
            if cfg.end_on_lost {
                tokio::select! {
                    _ = tokio::time::sleep(nap) => {}
                    _ = guard.lost() => {}
                }
            } else {
                tokio::time::sleep(nap).await;
            }
        }
        // A holder writes its result as it leaves the section: for a holder that was paused
        // past its lease this is the stale write the resource must refuse, whatever moment
        // of the loop the pause hit.
        if resource.write(token, &owner, &section).await {
            writes_ok += 1;
        } else {
            writes_rejected += 1;
        }
        let lost_seen = guard.is_lost();
        let exit = now_us();
        in_section.fetch_sub(1, Ordering::SeqCst);
        let release = match guard.release().await {
            Ok(()) => "ok".to_owned(),
            Err(Error::LockLost { reason, .. }) => format!("lost:{reason:?}"),
            Err(err) => format!("err:{err}"),
        };
        done.cancel();
        let _ = watcher.await;
        let lost_at = lost_at.load(Ordering::SeqCst);
        log.write(json!({
            "k": "exit", "w": cfg.id, "task": task, "seq": seq, "id": section, "t": exit,
            "writes_ok": writes_ok, "writes_rejected": writes_rejected,
            "lost_at": (lost_at > 0).then_some(lost_at), "lost_seen": lost_seen,
            "release": release, "released_at": now_us(),
        }));
        if !cfg.think.is_zero() {
            tokio::time::sleep(cfg.think).await;
        }
    }
}

/// The body of the worker process (`fault_worker`).
pub fn worker_main(cfg: WorkerConfig) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let log = Log::open(&cfg.log);
    let in_section = Arc::new(AtomicUsize::new(0));
    let handle = runtime.spawn(run_worker(cfg.clone(), log.clone(), in_section.clone()));
    match cfg.shutdown_runtime_after {
        None => {
            if let Err(err) = runtime.block_on(handle) {
                if err.is_panic() {
                    std::panic::resume_unwind(err.into_panic());
                }
                panic!("worker failed: {err}");
            }
        }
        Some(after) => {
            let started = Instant::now();
            // Wait until past `after` with a task inside its critical section.
            while started.elapsed() < after || in_section.load(Ordering::SeqCst) == 0 {
                assert!(
                    started.elapsed() < after + Duration::from_secs(30),
                    "never held"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            let begin = now_us();
            drop(runtime); // drops every task, guards included, on a dying runtime
            log.write(json!({"k": "runtime_down", "w": cfg.id, "t": now_us(), "begin": begin}));
            // The process lives on without its runtime until the scenario kills it.
            std::thread::sleep(Duration::from_secs(600));
        }
    }
}

// ---- the fleet of worker processes, seen from the test ------------------------------------

pub struct Worker {
    pub id: usize,
    pub child: Child,
    pub stderr: PathBuf,
    pub killed_at: Option<u64>,
    /// Stays alive without its runtime until the scenario kills it.
    pub lingers: bool,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let pid = self.child.id() as i32;
        // SAFETY: plain kill(2) on our own child.
        unsafe {
            libc::kill(pid, libc::SIGCONT);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Fleet {
    pub dir: tempfile::TempDir,
    pub workers: Vec<Worker>,
}

impl Fleet {
    pub fn new() -> Self {
        Fleet {
            dir: tempfile::tempdir().unwrap(),
            workers: Vec::new(),
        }
    }

    pub fn log_path(&self, id: usize) -> PathBuf {
        self.dir.path().join(format!("w{id:03}.jsonl"))
    }

    pub fn spawn(&mut self, cfg: &WorkerConfig) {
        let stderr = self.dir.path().join(format!("w{:03}.stderr", cfg.id));
        let child = Command::new(std::env::current_exe().unwrap())
            .args(["fault_worker", "--exact", "--ignored", "--nocapture"])
            .envs(cfg.to_env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&stderr).unwrap())
            .spawn()
            .expect("spawn worker process");
        self.workers.push(Worker {
            id: cfg.id,
            child,
            stderr,
            killed_at: None,
            lingers: cfg.shutdown_runtime_after.is_some(),
        });
    }

    pub fn records(&self) -> Vec<Value> {
        read_records(self.dir.path())
    }

    /// Client id → worker id, once every worker has logged its start.
    pub async fn wait_started(&self, limit: Duration) -> HashMap<String, usize> {
        let deadline = Instant::now() + limit;
        loop {
            let started: HashMap<String, usize> = self
                .records()
                .iter()
                .filter(|r| r["k"] == "start")
                .map(|r| {
                    (
                        r["client"].as_str().unwrap().to_owned(),
                        r["w"].as_u64().unwrap() as usize,
                    )
                })
                .collect();
            if started.len() == self.workers.len() {
                return started;
            }
            if Instant::now() > deadline {
                self.dump_stderr();
                panic!(
                    "only {} of {} workers started",
                    started.len(),
                    self.workers.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub fn worker_mut(&mut self, id: usize) -> &mut Worker {
        self.workers.iter_mut().find(|w| w.id == id).unwrap()
    }

    pub fn signal(&self, id: usize, signal: i32) {
        let pid = self.workers.iter().find(|w| w.id == id).unwrap().child.id();
        // SAFETY: plain kill(2) on our own child.
        let rc = unsafe { libc::kill(pid as i32, signal) };
        assert_eq!(rc, 0, "kill({pid}, {signal})");
    }

    /// SIGKILL; returns the time after the process is reaped.
    pub fn kill(&mut self, id: usize) -> u64 {
        let worker = self.worker_mut(id);
        worker.child.kill().unwrap();
        worker.child.wait().unwrap();
        let at = now_us();
        worker.killed_at = Some(at);
        at
    }

    /// Ends the run: each worker's tasks finish the section they are in and take the lock
    /// no more.
    pub fn stop(&self) {
        File::create(stop_file_beside(&self.log_path(0))).expect("create the stop file");
    }

    /// Waits for every live worker to exit by itself; panics on a failed exit (a panic
    /// in the worker) or on a hang.
    pub async fn wait_all(&mut self, limit: Duration) {
        let deadline = Instant::now() + limit;
        for i in 0..self.workers.len() {
            if self.workers[i].killed_at.is_some() || self.workers[i].lingers {
                continue;
            }
            loop {
                if let Some(status) = self.workers[i].child.try_wait().unwrap() {
                    if !status.success() {
                        self.dump_stderr();
                        panic!("worker {} exited with {status}", self.workers[i].id);
                    }
                    break;
                }
                if Instant::now() > deadline {
                    self.dump_stderr();
                    panic!("worker {} hung (still running)", self.workers[i].id);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }

    pub fn dump_stderr(&self) {
        for worker in &self.workers {
            let text = std::fs::read_to_string(&worker.stderr).unwrap_or_default();
            let tail: String = text
                .lines()
                .filter(|l| !l.starts_with("running ") && !l.trim().is_empty())
                .collect::<Vec<_>>()
                .join("\n");
            if !tail.is_empty() {
                eprintln!("--- worker {} stderr ---\n{tail}", worker.id);
            }
        }
    }

    /// Worker id → time its critical sections were cut off by a fault (kill or runtime
    /// shutdown), for sections that have no `exit` line.
    pub fn cut_off_times(&self) -> HashMap<usize, u64> {
        let mut out: HashMap<usize, u64> = self
            .workers
            .iter()
            .filter_map(|w| w.killed_at.map(|t| (w.id, t)))
            .collect();
        for r in self.records() {
            if r["k"] == "runtime_down" {
                out.insert(r["w"].as_u64().unwrap() as usize, r["t"].as_u64().unwrap());
            }
        }
        out
    }
}

// ---- the checker -------------------------------------------------------------------------

#[derive(Debug, Clone)]
pub struct Section {
    pub id: String,
    pub worker: usize,
    pub owner: String,
    pub token: u64,
    pub count: u64,
    pub enter: u64,
    pub exit: u64,
    /// False when the section was cut off by a fault (no `exit` line).
    pub finished: bool,
    pub writes_ok: u64,
    pub writes_rejected: u64,
    pub lost_at: Option<u64>,
    pub release: String,
    pub released_at: Option<u64>,
}

impl Section {
    /// Whether the holder learnt it had lost the lock.
    pub fn knew_lost(&self) -> bool {
        self.lost_at.is_some() || self.release.starts_with("lost:")
    }
}

#[derive(Debug, Default)]
pub struct Report {
    pub acquisitions: usize,
    pub overlaps: usize,
    pub excused_overlaps: usize,
    pub stale_accepted: usize,
    pub stale_rejected: usize,
    pub writes: usize,
    pub token_regressions: usize,
    pub reentered: usize,
    pub errors: usize,
    pub timeouts: usize,
    /// Largest (time an acquire took − the wait it was given), over every acquire.
    pub max_wait_overrun_ms: i64,
    pub sections: Vec<Section>,
    pub overlap_pairs: Vec<(String, String)>,
    pub error_messages: BTreeMap<String, usize>,
}

impl Report {
    /// With `FAULTS_DEBUG` set: every section, times in ms relative to `origin`.
    pub fn debug_dump(&self, origin: u64) {
        if std::env::var("FAULTS_DEBUG").is_err() {
            return;
        }
        let rel = |t: u64| (t as i64 - origin as i64) / 1000;
        for s in &self.sections {
            println!(
                "{} enter={} exit={} token={} count={} ok={} rej={} lost_at={:?} release={}",
                s.id,
                rel(s.enter),
                rel(s.exit),
                s.token,
                s.count,
                s.writes_ok,
                s.writes_rejected,
                s.lost_at.map(rel),
                s.release
            );
        }
        println!("errors: {:?}", self.error_messages);
    }

    pub fn sections_of(&self, worker: usize) -> impl Iterator<Item = &Section> {
        self.sections.iter().filter(move |s| s.worker == worker)
    }

    /// First entry into a critical section after `t` by any owner not in `except`.
    pub fn first_enter_after(&self, t: u64, except_worker: Option<usize>) -> Option<u64> {
        self.sections
            .iter()
            .filter(|s| s.enter > t && Some(s.worker) != except_worker)
            .map(|s| s.enter)
            .min()
    }
}

pub fn check(records: &[Value], decisions: &[Decision], cut_off: &HashMap<usize, u64>) -> Report {
    let mut report = Report::default();
    let mut sections: HashMap<String, Section> = HashMap::new();
    for r in records {
        let k = r["k"].as_str().unwrap();
        let took = r["took_ms"].as_i64().unwrap_or(0);
        let asked = r["asked_ms"].as_i64().unwrap_or(0);
        match k {
            "enter" | "timeout" | "error" => {
                report.max_wait_overrun_ms = report.max_wait_overrun_ms.max(took - asked);
            }
            _ => {}
        }
        match k {
            "enter" => {
                let id = r["id"].as_str().unwrap().to_owned();
                sections.insert(
                    id.clone(),
                    Section {
                        id,
                        worker: r["w"].as_u64().unwrap() as usize,
                        owner: r["owner"].as_str().unwrap().to_owned(),
                        token: r["token"].as_u64().unwrap(),
                        count: r["count"].as_u64().unwrap(),
                        enter: r["t"].as_u64().unwrap(),
                        exit: u64::MAX,
                        finished: false,
                        writes_ok: 0,
                        writes_rejected: 0,
                        lost_at: None,
                        release: String::new(),
                        released_at: None,
                    },
                );
            }
            "error" => {
                report.errors += 1;
                let msg = r["msg"].as_str().unwrap_or("").to_owned();
                *report.error_messages.entry(msg).or_default() += 1;
            }
            "timeout" => report.timeouts += 1,
            _ => {}
        }
    }
    for r in records.iter().filter(|r| r["k"] == "exit") {
        let s = sections
            .get_mut(r["id"].as_str().unwrap())
            .expect("exit without enter");
        s.exit = r["t"].as_u64().unwrap();
        s.finished = true;
        s.writes_ok = r["writes_ok"].as_u64().unwrap();
        s.writes_rejected = r["writes_rejected"].as_u64().unwrap();
        s.lost_at = r["lost_at"].as_u64();
        s.release = r["release"].as_str().unwrap().to_owned();
        s.released_at = r["released_at"].as_u64();
    }
    for s in sections.values_mut().filter(|s| !s.finished) {
        match cut_off.get(&s.worker) {
            Some(&t) => s.exit = t,
            None => panic!(
                "section {} never ended and its worker was not faulted",
                s.id
            ),
        }
    }
    let mut sections: Vec<Section> = sections.into_values().collect();
    sections.sort_by_key(|s| (s.enter, s.id.clone()));
    report.acquisitions = sections.len();
    report.reentered = sections.iter().filter(|s| s.count > 1).count();

    // The resource: re-check every decision against the rule, count stale acceptances.
    let (mut max_token, mut max_owner) = (0u64, String::new());
    let mut position: HashMap<&str, Vec<(usize, bool)>> = HashMap::new();
    for (i, d) in decisions.iter().enumerate() {
        let fresh = d.token > max_token || (d.token == max_token && d.owner == max_owner);
        if d.ok {
            if !fresh {
                report.stale_accepted += 1;
            }
            max_token = max_token.max(d.token);
            max_owner = d.owner.clone();
        } else {
            assert!(!fresh, "the resource rejected a fresh token: {d:?}");
            report.stale_rejected += 1;
        }
        position.entry(&d.section).or_default().push((i, d.ok));
    }
    report.writes = decisions.len();

    // Overlaps: a sweep over sections ordered by entry.
    let mut active: Vec<usize> = Vec::new();
    for (i, s) in sections.iter().enumerate() {
        active.retain(|&j| sections[j].exit > s.enter);
        for &j in &active {
            let a = &sections[j];
            if a.owner == s.owner {
                continue;
            }
            let interleaved = accepted_interleave(&position, &a.id, &s.id);
            if (a.knew_lost() || s.knew_lost()) && !interleaved {
                report.excused_overlaps += 1;
            } else {
                report.overlaps += 1;
            }
            report.overlap_pairs.push((a.id.clone(), s.id.clone()));
        }
        active.push(i);
    }

    // Fencing order: a section entered after another one exited has a higher token.
    let mut by_exit: Vec<&Section> = sections.iter().collect();
    by_exit.sort_by_key(|s| s.exit);
    let (mut k, mut max_ended) = (0, 0u64);
    for s in &sections {
        while k < by_exit.len() && by_exit[k].exit < s.enter {
            max_ended = max_ended.max(by_exit[k].token);
            k += 1;
        }
        // A reentrant hold (count > 1, e.g. on top of a hold stranded by a lost acquire
        // reply) takes no new number by design; only fresh holds must move forward.
        if s.count == 1 && s.token <= max_ended {
            report.token_regressions += 1;
        }
    }
    report.sections = sections;
    report
}

/// Whether the accepted writes of sections `a` and `b` interleave in the resource's order
/// (some accepted write of one lies between two accepted writes of the other).
fn accepted_interleave(position: &HashMap<&str, Vec<(usize, bool)>>, a: &str, b: &str) -> bool {
    let accepted = |id: &str| -> Vec<usize> {
        position
            .get(id)
            .map(|v| v.iter().filter(|(_, ok)| *ok).map(|(i, _)| *i).collect())
            .unwrap_or_default()
    };
    let (a, b) = (accepted(a), accepted(b));
    if a.is_empty() || b.is_empty() {
        return false;
    }
    let (a_first, a_last) = (a[0], a[a.len() - 1]);
    let (b_first, b_last) = (b[0], b[b.len() - 1]);
    !(a_last < b_first || b_last < a_first)
}

/// The scenario's result line.
pub fn result_line(n: &str, name: &str, runs: u64, report: &Report, extra: &str) -> String {
    format!(
        "FAULT {n} {name}: runs={runs} acquisitions={} overlaps={} stale_accepted={} {extra} \
         excused_overlaps={} stale_rejected={} token_regressions={} errors={} timeouts={} \
         max_wait_overrun_ms={} scale={}",
        report.acquisitions,
        report.overlaps,
        report.stale_accepted,
        report.excused_overlaps,
        report.stale_rejected,
        report.token_regressions,
        report.errors,
        report.timeouts,
        report.max_wait_overrun_ms,
        scale(),
    )
}
