//! Test harness: real `redis-server` processes on free loopback ports, in temporary
//! directories, started and stopped by the tests themselves.
#![allow(dead_code)]

pub mod acl;
pub mod certs;
pub mod redisson_peer;
pub mod topology;

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use redis_locks::LockClient;

/// One `redis-server` owned by a test. Killed when dropped.
pub struct RedisServer {
    pub port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    extra_args: Vec<String>,
}

pub fn redis_server_binary() -> PathBuf {
    if let Ok(path) = std::env::var("REDIS_SERVER_BIN") {
        return path.into();
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let candidate = PathBuf::from(dir).join("redis-server");
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "redis-server not found on PATH. Run the suite with `./scripts/test.sh`, which installs \
         it (apt-get install -y redis-server), or set REDIS_SERVER_BIN."
    );
}

/// Whether a Redis server on `port` answers PING (a listening socket alone is not enough:
/// a server can accept and then exit, e.g. on a bad ACL rule).
fn answers_ping(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 64];
    match stream.read(&mut reply) {
        // +PONG, or -NOAUTH when a password is required: either way the server is up.
        Ok(n) if n > 0 => reply[0] == b'+' || reply.starts_with(b"-NOAUTH"),
        _ => false,
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr").port()
}

impl RedisServer {
    /// Starts a fresh, empty server with persistence off.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (e.g. `["--requirepass", "x"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        let mut last_error = String::new();
        for _ in 0..5 {
            let mut server = RedisServer {
                port: free_port(),
                dir: tempfile::tempdir().expect("temp dir"),
                child: None,
                extra_args: extra.iter().map(|s| s.to_string()).collect(),
            };
            match server.spawn() {
                Ok(()) => return server,
                Err(err) => last_error = err,
            }
        }
        panic!("could not start redis-server: {last_error}");
    }

    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("redis.log");
        let mut cmd = Command::new(redis_server_binary());
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .args(["--daemonize", "no"])
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let log = std::fs::read_to_string(&log).unwrap_or_default();
                return Err(format!("exited with {status}: {log}"));
            }
            if answers_ping(self.port) {
                self.child = Some(child);
                return Ok(());
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return Err("did not listen within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// SIGKILL the server (no shutdown save, like a crash).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(err) if Instant::now() > deadline => panic!("restart failed: {err}"),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    /// A plain redis-rs multiplexed connection for inspecting state from the test.
    pub async fn conn(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// A lock client with the given watchdog timeout.
    pub async fn client(&self, watchdog: Duration) -> LockClient {
        LockClient::builder(&self.url())
            .watchdog_timeout(watchdog)
            .connect()
            .await
            .expect("connect lock client")
    }

    /// A lock client whose watchdog renews every `every` on a `lease`: frequent ticks on
    /// a lease long enough that a machine slowed by load does not end a hold.
    pub async fn client_renewing(&self, lease: Duration, every: Duration) -> LockClient {
        LockClient::builder(&self.url())
            .watchdog_timeout(lease)
            .check_interval(every)
            .connect()
            .await
            .expect("connect lock client")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Polls `check` until it returns true or `limit` passes; returns whether it succeeded.
pub async fn eventually<F, Fut>(limit: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + limit;
    loop {
        if check().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How many times Redis ran each of `commands` (lowercase, as `INFO commandstats` names
/// them), summed; inside scripts too.
#[allow(dead_code)]
pub async fn command_calls(conn: &mut redis::aio::MultiplexedConnection, commands: &[&str]) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            if !commands.contains(&name) {
                return None;
            }
            stats
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Waits (at most 10 s) until `channel` has at least `n` subscribers.
#[allow(dead_code)]
pub async fn subscribed(conn: &redis::aio::MultiplexedConnection, channel: &str, n: i64) -> bool {
    eventually(Duration::from_secs(10), || {
        let mut conn = conn.clone();
        let channel = channel.to_owned();
        async move { numsub(&mut conn, &channel).await >= n }
    })
    .await
}

/// Runs this test binary again as a child process that runs only its test `child`, with
/// `spec` in the environment variable `env` (the child's instructions).
#[allow(dead_code)]
pub fn spawn_child(env: &str, spec: String) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env(env, spec)
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// `PUBSUB NUMSUB channel`.
pub async fn numsub(conn: &mut redis::aio::MultiplexedConnection, channel: &str) -> i64 {
    let reply: Vec<(String, i64)> = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(conn)
        .await
        .unwrap();
    reply.first().map_or(0, |(_, n)| *n)
}

/// Retries `attempt` until it succeeds or `limit` passes (then panics with the last error).
#[allow(dead_code)]
pub async fn eventually_ok<T, E, F, Fut>(limit: Duration, mut attempt: F) -> T
where
    E: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, E>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match attempt().await {
            Ok(value) => return value,
            Err(err) if tokio::time::Instant::now() >= deadline => {
                panic!("still failing after {limit:?}: {err:?}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Reads field ARGV[1] of the reentrant lock at KEYS[1] in either form it has (see
/// `lua/acquire.lua`): a hash as `HGET` reads it, and a first hold's string
/// (`<mark><hold id>\x01<owner>`) as the hash it stands for: `<owner>` → `1`, `"\x01h"` →
/// the hold id, `"\x01w"` → `1` when the mark is `\x02`. Nil when there is no such field or
/// key; an error for a key that is neither form. Read-only (runs on replicas too).
pub const LOCK_FIELD_SCRIPT: &str = "#!lua flags=no-writes
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then return false end
if kind == 'hash' then return redis.call('HGET', KEYS[1], ARGV[1]) end
if kind ~= 'string' then return redis.error_reply('WRONGTYPE not a lock: ' .. kind) end
local mark, hold, owner = string.match(redis.call('GET', KEYS[1]), '^([\\1\\2])([^\\1]+)\\1(.+)$')
if not mark then return redis.error_reply('WRONGTYPE a string that is not a lock') end
if ARGV[1] == owner then return '1' end
if ARGV[1] == '\\1h' then return hold end
if ARGV[1] == '\\1w' and mark == '\\2' then return '1' end
return false";

/// The same, every field: a flat `field, value, ...` array as `HGETALL` returns it.
pub const LOCK_FIELDS_SCRIPT: &str = "#!lua flags=no-writes
local kind = redis.call('TYPE', KEYS[1]).ok
if kind == 'none' then return {} end
if kind == 'hash' then return redis.call('HGETALL', KEYS[1]) end
if kind ~= 'string' then return redis.error_reply('WRONGTYPE not a lock: ' .. kind) end
local mark, hold, owner = string.match(redis.call('GET', KEYS[1]), '^([\\1\\2])([^\\1]+)\\1(.+)$')
if not mark then return redis.error_reply('WRONGTYPE a string that is not a lock') end
local fields = {owner, '1', '\\1h', hold}
if mark == '\\2' then fields[5], fields[6] = '\\1w', '1' end
return fields";

/// `HGET key field` for a reentrant lock in either form ([`LOCK_FIELD_SCRIPT`]); use it
/// like the `HGET` command (`query`, `query_async`, in a pipeline).
pub fn lock_hget(key: &str, field: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(LOCK_FIELD_SCRIPT).arg(1).arg(key).arg(field);
    cmd
}

/// `HGETALL key` for a reentrant lock in either form ([`LOCK_FIELDS_SCRIPT`]).
pub fn lock_hgetall(key: &str) -> redis::Cmd {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(LOCK_FIELDS_SCRIPT).arg(1).arg(key);
    cmd
}
