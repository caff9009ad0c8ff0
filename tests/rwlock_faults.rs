//! The read-write lock under real faults, with features combined as users combine them:
//! real `redis-server` processes, real OS processes (this test binary re-executed, see
//! [`child`]) that are SIGKILLed, the in-process TCP fault proxy (`faults/proxy.rs`)
//! losing replies, spin mode, cancelled waiters, and a Redis Cluster.
//!
//! 1. exclusion across 4 processes mixing reads and writes, checked in Redis;
//! 2. a SIGKILLed reader (1 s watchdog lease): a waiting writer gets in within ~the lease;
//! 3. a SIGKILLed writer: waiting readers get in within ~its lease;
//! 4. lost replies on acquire (read, fenced write, waiting write, cancelled) and release
//!    (read, write, a nested read, a dropped guard): exactly one hold, no orphan, no hold
//!    left behind;
//! 5. spin mode: writers wait for readers and readers for a writer without pub/sub;
//! 6. a cancelled waiting writer (dropped future, timed-out `try_write_for`, SIGKILLed
//!    process) stops keeping readers out within ~2 s;
//! 7. fixed-lease reads nested with watchdog reads, fencing with a downgrade, and an
//!    explicit owner shared by two clients while a writer waits;
//! 8. readers and writers on a Redis Cluster (the shared cluster of this binary).
//!
//! Timing assertions are liveness bounds only (far above what a working implementation
//! needs); every measurement is printed (`-- --nocapture`).

mod common;
#[allow(dead_code)]
#[path = "faults/proxy.rs"]
mod proxy;

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::RedisServer;
use common::topology;
use proxy::{FaultProxy, proxied_client, script_sha};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redis_locks::{Error, LockClient, LostReason, RwGuard, RwKind, RwLock};
use redis_locks_protocol::ScriptId;

const SEC: Duration = Duration::from_secs(1);
const CHILD_ENV: &str = "REDIS_LOCKS_RWLOCK_FAULTS_CHILD";
/// Bound on any single library call that should not wait long.
const STEP: Duration = Duration::from_secs(10);

// ---- child processes -----------------------------------------------------------------

/// Enters a section atomically: `INCR KEYS[1]` and read `KEYS[2]` in one step, so that of
/// two overlapping sections the one entering second always sees the other's count.
const ENTER_LUA: &str = r#"
local mine = redis.call('INCR', KEYS[1])
local other = tonumber(redis.call('GET', KEYS[2]) or '0')
return {mine, other}
"#;

/// The body of a child process (this test binary re-executed with `CHILD_ENV` set; in
/// the normal run it returns at once). Roles:
/// * `contend <index> <rounds>`: waits for `go`, then reads or writes (every 4th section
///   a write), counting readers and writers inside in Redis and recording violations;
/// * `hold-read` / `hold-write`: takes the hold, sets `holding`, sleeps until killed;
/// * `wait-write`: sets `waiting`, waits for the write lock (sets `got-write` if it ever
///   gets it), sleeps until killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let (url, role, name) = (parts[0], parts[1], parts[2]);
    // Contending children renew with a generous lease, so a slow machine cannot make
    // them lose holds; the holders that are killed use a 1 s lease.
    let watchdog = if role == "contend" { 10 * SEC } else { SEC };
    let client = LockClient::builder(url)
        .watchdog_timeout(watchdog)
        .connect()
        .await
        .unwrap();
    let rw = client.rw_lock(name).unwrap();
    let mut conn = redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    match role {
        "contend" => {
            contend(
                &rw,
                &mut conn,
                parts[3].parse().unwrap(),
                parts[4].parse().unwrap(),
            )
            .await
        }
        "hold-read" | "hold-write" => {
            let guard = if role == "hold-read" {
                rw.read().await.unwrap()
            } else {
                rw.write().await.unwrap()
            };
            let _: () = conn.set("holding", 1).await.unwrap();
            tokio::time::sleep(Duration::from_secs(600)).await;
            drop(guard);
        }
        "wait-write" => {
            let _: () = conn.set("waiting", 1).await.unwrap();
            let guard = rw.write().await.unwrap();
            let _: () = conn.set("got-write", 1).await.unwrap();
            tokio::time::sleep(Duration::from_secs(600)).await;
            drop(guard);
        }
        other => panic!("unknown role {other}"),
    }
}

async fn contend(rw: &RwLock, conn: &mut MultiplexedConnection, index: u32, rounds: u32) {
    let enter = redis::Script::new(ENTER_LUA);
    let _: i64 = conn.incr("ready", 1).await.unwrap();
    let deadline = Instant::now() + 30 * SEC;
    while !conn.exists::<_, bool>("go").await.unwrap() {
        assert!(Instant::now() < deadline, "never told to go");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for round in 0..rounds {
        let write = (index + round) % 4 == 0;
        let (mine, other) = if write {
            ("writers", "readers")
        } else {
            ("readers", "writers")
        };
        let guard = if write {
            rw.write().await.unwrap()
        } else {
            rw.read().await.unwrap()
        };
        let (inside, others): (i64, i64) =
            enter.key(mine).key(other).invoke_async(conn).await.unwrap();
        if others != 0 || (write && inside != 1) {
            let _: i64 = conn.incr("violations", 1).await.unwrap();
        }
        if !write && inside > 1 {
            let _: i64 = conn.incr("shared-reads", 1).await.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(if write { 2 } else { 4 })).await;
        let _: i64 = conn.decr(mine, 1).await.unwrap();
        if guard.is_lost() {
            let _: i64 = conn.incr("lost", 1).await.unwrap();
        }
        let done = if write { "writes-done" } else { "reads-done" };
        let _: i64 = conn.incr(done, 1).await.unwrap();
        guard.release().await.unwrap();
    }
}

fn spawn_child(spec: String) -> tokio::process::Child {
    tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

// ---- helpers -------------------------------------------------------------------------

async fn get_int(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    conn.get::<_, Option<i64>>(key).await.unwrap().unwrap_or(0)
}

async fn zcard(conn: &mut MultiplexedConnection, key: &str) -> i64 {
    conn.zcard(key).await.unwrap()
}

async fn exists(conn: &mut MultiplexedConnection, key: &str) -> bool {
    conn.exists(key).await.unwrap()
}

/// Waits (up to 20 s) until a child set `key`, or panics.
async fn until_set(conn: &MultiplexedConnection, key: &str, what: &str) {
    let ok = common::eventually(20 * SEC, || {
        let mut conn = conn.clone();
        async move { exists(&mut conn, key).await }
    })
    .await;
    assert!(ok, "{what}");
}

async fn until_writer_waits(rw: &RwLock) {
    let ok = common::eventually(10 * SEC, || async {
        rw.state().await.unwrap().writer_waiting
    })
    .await;
    assert!(ok, "the writer never reserved the lock");
}

async fn bounded<T>(fut: impl Future<Output = T>, what: &str) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {STEP:?}"))
}

/// The reservation key and the two wake-up channels (database 0) of `rw`.
fn reservation_key(rw: &RwLock) -> String {
    format!(
        "{}:writer-waiting",
        rw.write_key().strip_suffix(":write").unwrap()
    )
}

fn channel(rw: &RwLock, kind: RwKind) -> String {
    let base = rw.write_key().strip_suffix(":write").unwrap();
    match kind {
        RwKind::Read => format!("{base}:db0:read"),
        RwKind::Write => format!("{base}:db0:write"),
    }
}

fn fence_key(rw: &RwLock) -> String {
    format!("{}:fence", rw.write_key().strip_suffix(":write").unwrap())
}

/// No key of `rw` left except its fencing counter.
async fn assert_no_keys_left(conn: &mut MultiplexedConnection, rw: &RwLock, ctx: &str) {
    for key in [
        rw.write_key().to_owned(),
        rw.read_key().to_owned(),
        reservation_key(rw),
    ] {
        assert!(!exists(conn, &key).await, "{ctx}: {key} left behind");
    }
}

fn describe<T>(result: &Result<T, Error>) -> String {
    match result {
        Ok(_) => "Ok".into(),
        Err(Error::ReleaseUnconfirmed { .. }) => "Err(ReleaseUnconfirmed)".into(),
        Err(err) => format!("Err({err})"),
    }
}

// ---- 1. exclusion across processes ---------------------------------------------------

/// Four processes, 30 sections each (every 4th a write, staggered by process), on one
/// lock: the section counters in Redis never show a writer with anyone else inside, every
/// section ran, nothing was lost, and nothing is left in Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_mixing_reads_and_writes_exclude_each_other() {
    const PROCS: u32 = 4;
    const ROUNDS: u32 = 30;
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn().await;
    let client = server.client(30 * SEC).await;
    let rw = client.rw_lock("procs").unwrap();
    let mut children: Vec<_> = (0..PROCS)
        .map(|i| spawn_child(format!("{url} contend procs {i} {ROUNDS}")))
        .collect();
    let ready = common::eventually(30 * SEC, || {
        let mut conn = conn.clone();
        async move { get_int(&mut conn, "ready").await == PROCS as i64 }
    })
    .await;
    assert!(ready, "the processes never got ready");
    let started = Instant::now();
    let _: () = conn.set("go", 1).await.unwrap();
    for child in &mut children {
        let status = tokio::time::timeout(60 * SEC, child.wait())
            .await
            .expect("a contending process hung")
            .unwrap();
        assert!(status.success(), "a contending process failed: {status}");
    }
    let elapsed = started.elapsed();
    let violations = get_int(&mut conn, "violations").await;
    let writes = get_int(&mut conn, "writes-done").await;
    let reads = get_int(&mut conn, "reads-done").await;
    let shared = get_int(&mut conn, "shared-reads").await;
    let lost = get_int(&mut conn, "lost").await;
    println!(
        "processes: {PROCS} x {ROUNDS} sections ({writes} writes, {reads} reads) in \
         {elapsed:?}: {violations} violations, {shared} reads entered beside another reader, \
         {lost} holds lost"
    );
    assert_eq!(violations, 0, "a writer overlapped another section");
    assert_eq!(writes + reads, (PROCS * ROUNDS) as i64);
    assert_eq!(writes, (PROCS * ROUNDS / 4) as i64);
    assert_eq!(lost, 0);
    assert_eq!(get_int(&mut conn, "readers").await, 0);
    assert_eq!(get_int(&mut conn, "writers").await, 0);
    let state = rw.state().await.unwrap();
    assert!(!state.is_locked() && !state.writer_waiting, "{state:?}");
    assert_no_keys_left(&mut conn, &rw, "processes").await;
}

// ---- 2 and 3. SIGKILLed holders ------------------------------------------------------

/// A process holding a read (1 s watchdog lease) is SIGKILLed while a writer waits in
/// this process: the writer did not get in while the reader lived (1.5 s, past its lease:
/// it was renewed), and gets in soon after the kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_readers_hold_lets_a_waiting_writer_in_within_its_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn().await;
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("killed-reader").unwrap();
    let mut reader = spawn_child(format!("{url} hold-read killed-reader"));
    until_set(&conn, "holding", "the reader process never held").await;
    assert_eq!(rw.state().await.unwrap().reads, 1);
    assert!(rw.try_write().await.unwrap().is_none());

    let writer = {
        let rw = rw.clone();
        tokio::spawn(async move {
            let guard = rw.write().await.unwrap();
            (guard, Instant::now())
        })
    };
    until_writer_waits(&rw).await;
    tokio::time::sleep(1500 * Duration::from_millis(1)).await;
    assert!(
        !writer.is_finished(),
        "the writer got in while the reader process lived (its lease was not renewed?)"
    );
    reader.kill().await.unwrap();
    let killed = Instant::now();
    let (guard, acquired) = tokio::time::timeout(10 * SEC, writer)
        .await
        .expect("the killed reader's hold never aged out")
        .unwrap();
    assert!(acquired >= killed, "the writer got in before the kill");
    let after = acquired - killed;
    println!("killed reader (lease 1 s): the waiting writer got in {after:?} after the SIGKILL");
    assert!(after < 10 * SEC, "{after:?}");
    assert_eq!(
        zcard(&mut conn, rw.read_key()).await,
        0,
        "the dead reader's hold is still a member"
    );
    let state = rw.state().await.unwrap();
    assert_eq!((state.writes, state.reads), (1, 0), "{state:?}");
    assert!(
        client
            .rw_lock("killed-reader")
            .unwrap()
            .try_read()
            .await
            .unwrap()
            .is_none(),
        "a reader got in beside the writer"
    );
    guard.release().await.unwrap();
    assert_no_keys_left(&mut conn, &rw, "killed reader").await;
}

/// A process holding the write lock (1 s watchdog lease) is SIGKILLed while two readers
/// wait in this process: neither got in while it lived; both get in after its lease, and
/// hold together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_writers_hold_lets_waiting_readers_in_after_its_lease() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn().await;
    let client = server.client(3 * SEC).await;
    let other = server.client(3 * SEC).await;
    let rw = client.rw_lock("killed-writer").unwrap();
    let mut writer = spawn_child(format!("{url} hold-write killed-writer"));
    until_set(&conn, "holding", "the writer process never held").await;
    assert_eq!(rw.state().await.unwrap().writes, 1);

    let readers: Vec<_> = [&client, &other]
        .into_iter()
        .map(|c| {
            let rw = c.rw_lock("killed-writer").unwrap();
            tokio::spawn(async move {
                let guard = rw.read().await.unwrap();
                (guard, Instant::now())
            })
        })
        .collect();
    tokio::time::sleep(1500 * Duration::from_millis(1)).await;
    assert!(
        readers.iter().all(|r| !r.is_finished()),
        "a reader got in while the writer process lived"
    );
    writer.kill().await.unwrap();
    let killed = Instant::now();
    let mut guards = Vec::new();
    for reader in readers {
        let (guard, acquired) = tokio::time::timeout(10 * SEC, reader)
            .await
            .expect("the killed writer's hold never aged out")
            .unwrap();
        assert!(acquired >= killed, "a reader got in before the kill");
        println!(
            "killed writer (lease 1 s): a waiting reader got in {:?} after the SIGKILL",
            acquired - killed
        );
        assert!(acquired - killed < 10 * SEC);
        guards.push(guard);
    }
    let state = rw.state().await.unwrap();
    assert_eq!(
        (state.writes, state.reads),
        (0, 2),
        "both readers hold at once"
    );
    assert_eq!(zcard(&mut conn, rw.write_key()).await, 0);
    for guard in guards {
        guard.release().await.unwrap();
    }
    assert_no_keys_left(&mut conn, &rw, "killed writer").await;
}

// ---- 4. lost replies -----------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// The request runs in Redis; its reply is lost.
    After,
    /// The request never reaches Redis.
    Before,
}

struct Rig {
    client: LockClient,
    direct: LockClient,
    proxy: FaultProxy,
    conn: MultiplexedConnection,
    _server: RedisServer,
}

impl Rig {
    async fn start() -> Rig {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port).await;
        // A long watchdog: no renewal lands in a cell.
        let client = proxied_client(&proxy, 30 * SEC, 2 * SEC).await;
        let direct = server.client(30 * SEC).await;
        let mut conn = server.conn().await;
        // Cache the scripts, so that no cut lands on a NOSCRIPT round trip.
        for id in [ScriptId::RwAcquire, ScriptId::RwRelease, ScriptId::RwState] {
            let _: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(id.source())
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        Rig {
            client,
            direct,
            proxy,
            conn,
            _server: server,
        }
    }

    fn arm(&self, cut: Cut, script: ScriptId) -> u64 {
        let sha = script_sha(script.source());
        let before = self.proxy.cuts();
        match cut {
            Cut::After => self.proxy.cut_after_request_containing(&sha),
            Cut::Before => self.proxy.cut_before_request_containing(&sha),
        }
        before
    }

    fn cuts_since(&self, armed: u64) -> u64 {
        self.proxy.cuts() - armed
    }

    fn assert_cut(&self, armed: u64, ctx: &str) {
        assert_eq!(self.proxy.cuts(), armed + 1, "{ctx}: the proxy did not cut");
    }

    /// Live holds as the library counts them and members as Redis stores them.
    async fn holds(&mut self, rw: &RwLock) -> (u64, u64, i64, i64) {
        let state = self
            .direct
            .rw_lock(rw.name())
            .unwrap()
            .state()
            .await
            .unwrap();
        (
            state.reads,
            state.writes,
            zcard(&mut self.conn, rw.read_key()).await,
            zcard(&mut self.conn, rw.write_key()).await,
        )
    }
}

/// A read acquire and a fenced write acquire whose reply is lost (cut after Redis ran
/// it) or whose request is lost (cut before): exactly one hold afterwards (in the
/// library's count and in Redis's set, also after the background work settled), the
/// write's token is the counter's, and once the guard is released (or dropped) nothing is
/// left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_whose_reply_is_lost_takes_exactly_one_hold() {
    let mut rig = Rig::start().await;
    for kind in [RwKind::Read, RwKind::Write] {
        for cut in [Cut::After, Cut::Before] {
            for drop_it in [false, true] {
                let ctx = format!(
                    "{kind:?}-{cut:?}-{}",
                    if drop_it { "drop" } else { "release" }
                );
                let started = Instant::now();
                let rw = rig.client.rw_lock(&ctx).unwrap().with_fencing();
                let armed = rig.arm(cut, ScriptId::RwAcquire);
                let guard = match kind {
                    RwKind::Read => bounded(rw.read(), &ctx).await,
                    RwKind::Write => bounded(rw.write(), &ctx).await,
                }
                .unwrap_or_else(|err| panic!("{ctx}: acquire failed: {err}"));
                rig.assert_cut(armed, &ctx);
                let want = match kind {
                    RwKind::Read => (1, 0, 1, 0),
                    RwKind::Write => (0, 1, 0, 1),
                };
                assert_eq!(rig.holds(&rw).await, want, "{ctx}: holds after the acquire");
                bounded(rig.client.flush(), "flush").await;
                assert_eq!(rig.holds(&rw).await, want, "{ctx}: holds after flush");
                if kind == RwKind::Write {
                    let counter = get_int(&mut rig.conn, &fence_key(&rw)).await;
                    assert_eq!(guard.fencing_token(), Some(counter as u64), "{ctx}: token");
                }
                assert!(!guard.is_lost(), "{ctx}");
                if drop_it {
                    drop(guard);
                    bounded(rig.client.flush(), "flush").await;
                } else {
                    bounded(guard.release(), &ctx).await.unwrap();
                }
                assert_eq!(rig.holds(&rw).await, (0, 0, 0, 0), "{ctx}: orphan");
                assert_no_keys_left(&mut rig.conn, &rw, &ctx).await;
                println!(
                    "lost acquire {ctx}: one hold, none after; {:?}",
                    started.elapsed()
                );
            }
        }
    }
}

/// A waiting writer's attempt whose reply is lost (it set the reservation): the writer
/// still gets in exactly once when the reader leaves, the reservation is gone, no orphan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writers_lost_reply_leaves_one_hold_and_no_reservation() {
    let mut rig = Rig::start().await;
    let rw = rig.client.rw_lock("lost-waiting").unwrap();
    let reader = rig
        .direct
        .rw_lock("lost-waiting")
        .unwrap()
        .try_read()
        .await
        .unwrap()
        .unwrap();
    let armed = rig.arm(Cut::After, ScriptId::RwAcquire);
    let writer = {
        let rw = rw.clone();
        tokio::spawn(async move { rw.write().await })
    };
    until_writer_waits(&rig.direct.rw_lock("lost-waiting").unwrap()).await;
    let cut = common::eventually(5 * SEC, || async { rig.proxy.cuts() > armed }).await;
    assert!(cut, "the proxy did not cut");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "the writer got in beside a reader");
    let released = Instant::now();
    reader.release().await.unwrap();
    let guard = bounded(writer, "the writer").await.unwrap().unwrap();
    println!(
        "lost waiting-writer reply: in {:?} after the reader left",
        released.elapsed()
    );
    assert_eq!(rig.holds(&rw).await, (0, 1, 0, 1));
    assert!(!exists(&mut rig.conn, &reservation_key(&rw)).await);
    guard.release().await.unwrap();
    bounded(rig.client.flush(), "flush").await;
    assert_no_keys_left(&mut rig.conn, &rw, "lost waiting").await;
}

/// A read acquire whose reply is lost, and a writer (another client) that arrives before
/// the retry: the writer finds the read the lost reply granted and reserves the lock, so a
/// retry that did not recognise its own hold would wait behind the writer, which waits
/// for that very hold (an orphan until its 30 s lease). The retry must adopt it: one
/// read, then the writer gets in when it is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_read_reply_is_adopted_even_when_a_writer_reserved_meanwhile() {
    let mut rig = Rig::start().await;
    let rw = rig.client.rw_lock("lost-then-writer").unwrap();
    let armed = rig.arm(Cut::After, ScriptId::RwAcquire);
    let reader = {
        let rw = rw.clone();
        tokio::spawn(async move { rw.try_read_for(20 * SEC).await })
    };
    let ran = common::eventually(5 * SEC, || {
        let mut conn = rig.conn.clone();
        let key = rw.read_key().to_owned();
        async move { zcard(&mut conn, &key).await == 1 }
    })
    .await;
    assert!(ran, "the read request never ran");
    // Hold the retry back while a writer arrives and reserves.
    rig.proxy.stall(true);
    let direct = rig.direct.rw_lock("lost-then-writer").unwrap();
    let writer = {
        let direct = direct.clone();
        tokio::spawn(async move {
            let guard = direct.write().await.unwrap();
            (guard, Instant::now())
        })
    };
    until_writer_waits(&direct).await;
    rig.proxy.stall(false);
    let retried = Instant::now();
    let guard = bounded(reader, "the retried read")
        .await
        .unwrap()
        .unwrap()
        .expect("the retried read did not adopt its hold (it waited behind the writer)");
    let adopted = retried.elapsed();
    rig.assert_cut(armed, "lost-then-writer");
    assert_eq!(rig.holds(&rw).await, (1, 0, 1, 0), "exactly one read");
    assert!(!writer.is_finished(), "the writer got in beside the read");
    let released = Instant::now();
    guard.release().await.unwrap();
    let (w, at) = bounded(writer, "the writer").await.unwrap();
    println!(
        "lost read reply + writer meanwhile: the retry adopted the read {adopted:?} after the \
         heal; the writer got in {:?} after its release",
        at.saturating_duration_since(released)
    );
    w.release().await.unwrap();
    assert_no_keys_left(&mut rig.conn, &rw, "lost-then-writer").await;
}

/// An acquire whose request ran but whose reply is lost, and whose caller then goes away
/// (the task is aborted while the proxy holds the retry back): the hold it took is given
/// back in the background; no orphan.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_acquire_whose_reply_is_lost_leaves_no_orphan() {
    let mut rig = Rig::start().await;
    for kind in [RwKind::Read, RwKind::Write] {
        let ctx = format!("cancelled-{kind:?}");
        let rw = rig.client.rw_lock(&ctx).unwrap();
        let set = match kind {
            RwKind::Read => rw.read_key().to_owned(),
            RwKind::Write => rw.write_key().to_owned(),
        };
        let armed = rig.arm(Cut::After, ScriptId::RwAcquire);
        let task = {
            let rw = rw.clone();
            tokio::spawn(async move {
                match kind {
                    RwKind::Read => rw.read().await,
                    RwKind::Write => rw.write().await,
                }
            })
        };
        // The request ran (its hold is in Redis); hold back the retry and cancel.
        let ran = common::eventually(5 * SEC, || {
            let mut conn = rig.conn.clone();
            let set = set.clone();
            async move { zcard(&mut conn, &set).await == 1 }
        })
        .await;
        assert!(ran, "{ctx}: the request never ran");
        rig.proxy.stall(true);
        let cut = common::eventually(5 * SEC, || async { rig.cuts_since(armed) == 1 }).await;
        assert!(cut, "{ctx}: the proxy did not cut");
        task.abort();
        let outcome = match task.await {
            Err(err) if err.is_cancelled() => "cancelled".to_owned(),
            Ok(result) => format!("finished first: {}", describe(&result)),
            Err(err) => panic!("{ctx}: {err}"),
        };
        rig.proxy.stall(false);
        bounded(rig.client.flush(), "flush").await;
        assert_eq!(
            rig.holds(&rw).await,
            (0, 0, 0, 0),
            "{ctx}: orphan ({outcome})"
        );
        assert_no_keys_left(&mut rig.conn, &rw, &ctx).await;
        println!("lost + cancelled acquire {ctx}: {outcome}; nothing left");
    }
}

/// BUG (reproduction): the give-back of an abandoned acquire (`held.rs`, `give_back`)
/// re-sends only for `max(watchdog_timeout, response_timeout)`, but a `with_lease` hold
/// can live longer than that. Here: watchdog 2 s, fixed lease 30 s. A read's reply is
/// lost and a partition starts before the retry; the acquire fails (~1.7 s), its
/// background give-back gives up 2 s later, and the 6 s partition outlasts it. After the
/// heal nothing gives the hold back: an orphan read keeps writers out until its 30 s lease
/// ends (~19 s after the heal), though the caller got an error and holds no guard.
/// `Lock` bounds the same give-back by the lock's own lease (`lock.rs`, `lease_ms()`).
/// With the fix proposed in the report (give up after `max(lease, watchdog, response)`),
/// the orphan is gone ~0.6 s after the heal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abandoned_long_fixed_lease_acquire_leaves_no_orphan_after_a_partition() {
    const PARTITION: Duration = Duration::from_secs(6);
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port).await;
    let client = proxied_client(&proxy, 2 * SEC, Duration::from_millis(500)).await;
    let direct = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    for id in [ScriptId::RwAcquire, ScriptId::RwRelease, ScriptId::RwState] {
        let _: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(id.source())
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let rw = client
        .rw_lock("long")
        .unwrap()
        .with_lease(30 * SEC)
        .unwrap();
    let key = rw.read_key().to_owned();
    for attempt in 1..=3 {
        let armed = proxy.cuts();
        proxy.cut_after_request_containing(&script_sha(ScriptId::RwAcquire.source()));
        let acquiring = {
            let rw = rw.clone();
            tokio::spawn(async move { rw.read().await })
        };
        let ran = common::eventually(5 * SEC, || {
            let mut conn = conn.clone();
            let key = key.clone();
            async move { zcard(&mut conn, &key).await == 1 }
        })
        .await;
        assert!(ran, "the read never ran");
        // The retry needs a new connection (the proxy cuts 50 ms after forwarding): the
        // stall holds it back.
        proxy.stall(true);
        let stalled = Instant::now();
        let outcome = bounded(acquiring, "the acquire in a partition")
            .await
            .unwrap();
        if let Ok(guard) = outcome {
            proxy.stall(false);
            guard.release().await.unwrap();
            println!("attempt {attempt}: the stall came too late; again");
            continue;
        }
        let failed_after = stalled.elapsed();
        assert_eq!(proxy.cuts(), armed + 1, "the proxy did not cut");
        tokio::time::sleep_until((stalled + PARTITION).into()).await;
        let left: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(
            zcard(&mut conn, &key).await == 1 && left > 10_000,
            "no orphan before the heal (PTTL {left} ms): nothing to prove"
        );
        proxy.stall(false);
        let healed = Instant::now();
        bounded(client.flush(), "flush").await;
        let writer = direct
            .rw_lock("long")
            .unwrap()
            .try_write_for(5 * SEC)
            .await
            .unwrap();
        println!(
            "abandoned 30 s fixed-lease read (watchdog 2 s): acquire failed {failed_after:?} \
             into a {PARTITION:?} partition; orphan PTTL at the heal {left} ms; a writer got in \
             after the heal: {:?}",
            writer.as_ref().map(|_| healed.elapsed())
        );
        assert!(
            writer.is_some(),
            "the abandoned acquire's read stayed after the heal (PTTL {} ms)",
            redis::cmd("PTTL")
                .arg(&key)
                .query_async::<i64>(&mut conn)
                .await
                .unwrap()
        );
        writer.unwrap().release().await.unwrap();
        return;
    }
    panic!("the partition never landed between the acquire and its retry");
}

/// A release whose reply is lost (or whose request is lost): the hold is gone, the result
/// is `Ok` or `Err(ReleaseUnconfirmed)`; a nested read's lost release leaves the outer
/// read alone; a dropped guard whose background release is cut ends with the hold gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_reply_is_lost_leaves_no_hold() {
    let mut rig = Rig::start().await;
    for kind in [RwKind::Read, RwKind::Write] {
        for cut in [Cut::After, Cut::Before] {
            let ctx = format!("release-{kind:?}-{cut:?}");
            let rw = rig.client.rw_lock(&ctx).unwrap().with_fencing();
            let guard = match kind {
                RwKind::Read => rw.read().await,
                RwKind::Write => rw.write().await,
            }
            .unwrap();
            let armed = rig.arm(cut, ScriptId::RwRelease);
            let result = bounded(guard.release(), &ctx).await;
            rig.assert_cut(armed, &ctx);
            let outcome = describe(&result);
            assert!(
                matches!(result, Ok(()) | Err(Error::ReleaseUnconfirmed { .. })),
                "{ctx}: {outcome}"
            );
            assert_eq!(rig.holds(&rw).await, (0, 0, 0, 0), "{ctx}: a hold left");
            bounded(rig.client.flush(), "flush").await;
            assert_no_keys_left(&mut rig.conn, &rw, &ctx).await;
            println!("lost release {ctx}: {outcome}, hold gone");
        }
    }

    // A nested read's release is lost: only the nested hold goes.
    for cut in [Cut::After, Cut::Before] {
        let ctx = format!("nested-{cut:?}");
        let rw = rig.client.rw_lock(&ctx).unwrap();
        let outer = rw.read().await.unwrap();
        let nested = outer.reenter().await.unwrap();
        assert_eq!(rig.holds(&rw).await, (2, 0, 2, 0));
        let armed = rig.arm(cut, ScriptId::RwRelease);
        let result = bounded(nested.release(), &ctx).await;
        rig.assert_cut(armed, &ctx);
        let outcome = describe(&result);
        assert!(
            matches!(result, Ok(()) | Err(Error::ReleaseUnconfirmed { .. })),
            "{ctx}: {outcome}"
        );
        assert_eq!(rig.holds(&rw).await, (1, 0, 1, 0), "{ctx}: the outer read");
        assert!(
            rig.direct
                .rw_lock(&ctx)
                .unwrap()
                .try_write()
                .await
                .unwrap()
                .is_none(),
            "{ctx}: the outer read no longer excludes"
        );
        bounded(outer.release(), &ctx).await.unwrap();
        assert_no_keys_left(&mut rig.conn, &rw, &ctx).await;
        println!("lost release {ctx}: {outcome}, outer read intact");
    }

    // A dropped guard's background release is lost.
    for kind in [RwKind::Read, RwKind::Write] {
        let ctx = format!("dropped-{kind:?}");
        let rw = rig.client.rw_lock(&ctx).unwrap();
        let guard = match kind {
            RwKind::Read => rw.read().await,
            RwKind::Write => rw.write().await,
        }
        .unwrap();
        let armed = rig.arm(Cut::After, ScriptId::RwRelease);
        drop(guard);
        bounded(rig.client.flush(), "flush").await;
        rig.assert_cut(armed, &ctx);
        assert_eq!(rig.holds(&rw).await, (0, 0, 0, 0), "{ctx}: a hold left");
        assert_no_keys_left(&mut rig.conn, &rw, &ctx).await;
        println!("lost release {ctx}: hold gone");
    }
}

// ---- 5. spin mode --------------------------------------------------------------------

async fn spinning(server: &RedisServer) -> LockClient {
    LockClient::builder(&server.url())
        .spin_wait(true)
        .connect()
        .await
        .expect("connect a spinning client")
}

/// Spin mode (`spin_wait(true)`): a spinning writer waits for two readers of a subscribing
/// client (30 s watchdog leases: the holds would not expire during the test), holding new
/// readers back with its reservation, and gets in after the last read is released; then two
/// spinning readers wait for that writer and both get in after its release, together. No
/// SUBSCRIBE reaches Redis (`INFO commandstats`; `PUBSUB NUMSUB` of both channels is 0).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spinning_writers_and_readers_get_in_after_release_without_pubsub() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let holder = server.client(30 * SEC).await;
    let spinner = spinning(&server).await;
    let subscribes = common::command_calls(&mut admin, &["subscribe", "ssubscribe"]).await;
    let held = holder.rw_lock("spin").unwrap();
    let spun = spinner.rw_lock("spin").unwrap();

    // A spinning writer waits for readers.
    let r1 = held.try_read().await.unwrap().unwrap();
    let r2 = held.try_read().await.unwrap().unwrap();
    let writer = {
        let rw = spun.clone();
        tokio::spawn(async move {
            let guard = rw.write().await.unwrap();
            (guard, Instant::now())
        })
    };
    until_writer_waits(&held).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!writer.is_finished(), "the writer got in beside readers");
    assert_eq!(
        common::numsub(&mut admin, &channel(&spun, RwKind::Write)).await,
        0
    );
    assert!(
        held.try_read().await.unwrap().is_none(),
        "a new reader got in past the spinning writer's reservation"
    );
    r1.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!writer.is_finished(), "the writer got in beside a reader");
    let released = Instant::now();
    r2.release().await.unwrap();
    let (w, at) = bounded(writer, "the spinning writer").await.unwrap();
    let writer_hand_off = at.saturating_duration_since(released);
    assert_eq!(
        holder
            .rw_lock("spin")
            .unwrap()
            .state()
            .await
            .unwrap()
            .writes,
        1
    );

    // Spinning readers wait for that writer.
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let rw = spun.clone();
            tokio::spawn(async move {
                let guard = rw.read().await.unwrap();
                (guard, Instant::now())
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        readers.iter().all(|r| !r.is_finished()),
        "a reader got in beside the writer"
    );
    assert_eq!(
        common::numsub(&mut admin, &channel(&spun, RwKind::Read)).await,
        0
    );
    let released = Instant::now();
    w.release().await.unwrap();
    let mut guards = Vec::new();
    let mut reader_hand_offs = Vec::new();
    for reader in readers {
        let (guard, at) = bounded(reader, "a spinning reader").await.unwrap();
        reader_hand_offs.push(at.saturating_duration_since(released));
        guards.push(guard);
    }
    assert_eq!(
        held.state().await.unwrap().reads,
        2,
        "both readers hold at once"
    );
    for guard in guards {
        guard.release().await.unwrap();
    }
    println!(
        "spin mode (leases 30 s): writer in {writer_hand_off:?} after the last read left; \
         readers in {reader_hand_offs:?} after the write left"
    );
    assert!(writer_hand_off < 5 * SEC);
    assert!(reader_hand_offs.iter().all(|d| *d < 5 * SEC));
    assert_eq!(
        common::command_calls(&mut admin, &["subscribe", "ssubscribe"]).await,
        subscribes,
        "SUBSCRIBE was sent in spin mode"
    );
    assert_eq!(spinner.waiting_channels(), 0);
    assert_no_keys_left(&mut admin, &spun, "spin").await;
}

// ---- 6. cancelled writers ------------------------------------------------------------

/// How long a new reader waits to get in from `since` (bounded by 10 s).
async fn reader_wait(rw: &RwLock, since: Instant) -> (RwGuard, Duration) {
    let guard = rw
        .try_read_for(10 * SEC)
        .await
        .unwrap()
        .expect("the reader was kept out for 10 s");
    (guard, since.elapsed())
}

/// A waiting writer whose future is dropped, and one whose `try_write_for` times out:
/// while they wait, a new reader is kept out (the reservation works); after they gave up,
/// a new reader gets in within ~2 s (measured; asserted < 5 s), and no reservation stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiting_writer_stops_keeping_readers_out() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let a = server.client(3 * SEC).await;
    let b = server.client(3 * SEC).await;
    let rw = a.rw_lock("cancel").unwrap();
    let holder = rw.read().await.unwrap();

    // Dropped future.
    let writer = {
        let rw = b.rw_lock("cancel").unwrap();
        tokio::spawn(async move { rw.write().await })
    };
    until_writer_waits(&rw).await;
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "the reservation let a reader in"
    );
    writer.abort();
    let aborted = Instant::now();
    assert!(writer.await.unwrap_err().is_cancelled());
    let (reader, dropped_wait) = reader_wait(&rw, aborted).await;
    reader.release().await.unwrap();

    // Timed out.
    let timed_out = {
        let rw = b.rw_lock("cancel").unwrap();
        tokio::spawn(async move {
            let got = rw.try_write_for(Duration::from_millis(800)).await.unwrap();
            (got.is_none(), Instant::now())
        })
    };
    until_writer_waits(&rw).await;
    assert!(
        rw.try_read().await.unwrap().is_none(),
        "the reservation let a reader in"
    );
    let (none, gave_up) = bounded(timed_out, "try_write_for").await.unwrap();
    assert!(none, "the writer got in beside a reader");
    let (reader, timed_out_wait) = reader_wait(&rw, gave_up).await;
    reader.release().await.unwrap();

    bounded(b.flush(), "flush").await;
    let state = rw.state().await.unwrap();
    assert!(!state.writer_waiting, "a reservation stayed: {state:?}");
    println!(
        "cancelled writer: a new reader got in {dropped_wait:?} after the writer's future was \
         dropped, {timed_out_wait:?} after try_write_for timed out"
    );
    assert!(dropped_wait < 5 * SEC, "{dropped_wait:?}");
    assert!(timed_out_wait < 5 * SEC, "{timed_out_wait:?}");
    holder.release().await.unwrap();
    assert_no_keys_left(&mut conn, &rw, "cancel").await;
}

/// A writer process waiting for a reader is SIGKILLed (no cleanup can run): while it
/// lived, a new reader was kept out (1 s and more: the reservation was renewed); after
/// the kill its reservation lapses and the new reader gets in within ~2 s (the
/// reservation's life) plus a re-check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_waiting_writers_reservation_lapses() {
    let server = RedisServer::start();
    let url = server.url();
    let mut conn = server.conn().await;
    let client = server.client(3 * SEC).await;
    let rw = client.rw_lock("killed-waiter").unwrap();
    let holder = rw.read().await.unwrap();
    let mut writer = spawn_child(format!("{url} wait-write killed-waiter"));
    until_set(&conn, "waiting", "the writer process never started").await;
    until_writer_waits(&rw).await;
    let reader = {
        let rw = rw.clone();
        tokio::spawn(async move {
            let guard = rw.read().await.unwrap();
            (guard, Instant::now())
        })
    };
    // Longer than a reservation's life (2 s): the living writer renews it.
    tokio::time::sleep(2500 * Duration::from_millis(1)).await;
    assert!(
        !reader.is_finished(),
        "a new reader got in past a living writer's reservation"
    );
    writer.kill().await.unwrap();
    let killed = Instant::now();
    let (guard, at) = bounded(reader, "the reader").await.unwrap();
    let after = at.saturating_duration_since(killed);
    println!("killed waiting writer: a new reader got in {after:?} after the SIGKILL");
    assert!(after < 5 * SEC, "{after:?}");
    assert!(
        !exists(&mut conn, "got-write").await,
        "the killed writer got in"
    );
    assert!(!rw.state().await.unwrap().writer_waiting);
    guard.release().await.unwrap();
    holder.release().await.unwrap();
    assert_no_keys_left(&mut conn, &rw, "killed waiter").await;
}

// ---- 7. combinations -----------------------------------------------------------------

/// Reads of one owner with both lease modes, nested, while another owner's writer waits
/// (1 s watchdog): a fixed-lease read re-entered through its guard is fixed too (the
/// handle's terms) and both age out on their own, told as `LeaseElapsed`; the watchdog
/// reads of the same owner (an outer one and a re-entry) are renewed past several leases
/// and keep the writer out until released; the lost guards cannot re-enter and release as
/// `LockLost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_lease_reads_nested_with_watchdog_reads_age_out_alone() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let a = server.client(SEC).await;
    let b = server.client(SEC).await;
    let owned = a.rw_lock("mixed").unwrap().with_owner("o").unwrap();
    let fixed = owned.with_lease(Duration::from_millis(700)).unwrap();

    let outer = owned.read().await.unwrap(); // watchdog
    let writer = {
        let rw = b.rw_lock("mixed").unwrap();
        tokio::spawn(async move {
            let guard = rw.write().await.unwrap();
            (guard, Instant::now())
        })
    };
    until_writer_waits(&owned).await;
    // The owner reads again while the writer waits: a fixed-lease read (by its explicit
    // owner), re-entered through its guard; and a watchdog re-entry.
    let inner_fixed = fixed
        .try_read()
        .await
        .unwrap()
        .expect("the owner's fixed read");
    let fixed_at = Instant::now();
    let nested_fixed = inner_fixed.reenter().await.unwrap();
    let nested_watchdog = outer.reenter().await.unwrap();
    assert!(
        b.rw_lock("mixed")
            .unwrap()
            .try_read()
            .await
            .unwrap()
            .is_none(),
        "another owner read past the waiting writer"
    );
    assert_eq!(owned.state().await.unwrap().reads, 4);
    for guard in [&inner_fixed, &nested_fixed] {
        tokio::time::timeout(5 * SEC, guard.lost())
            .await
            .expect("a fixed-lease read was never told");
        assert_eq!(guard.lost_reason(), Some(LostReason::LeaseElapsed));
    }
    println!(
        "fixed 700 ms reads told lost after {:?}",
        fixed_at.elapsed()
    );
    let aged = common::eventually(3 * SEC, || async {
        owned.state().await.unwrap().reads == 2
    })
    .await;
    assert!(
        aged,
        "the fixed reads did not age out: {:?}",
        owned.state().await
    );
    assert!(matches!(
        nested_fixed.reenter().await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        nested_fixed.release().await,
        Err(Error::LockLost { .. })
    ));
    assert!(matches!(
        inner_fixed.release().await,
        Err(Error::LockLost { .. })
    ));
    // Past several 1 s leases: the watchdog reads live, and the writer still waits.
    tokio::time::sleep(2500 * Duration::from_millis(1)).await;
    assert!(!outer.is_lost() && !nested_watchdog.is_lost());
    assert!(
        !writer.is_finished(),
        "the writer got in beside watchdog reads"
    );
    assert_eq!(owned.state().await.unwrap().reads, 2);
    nested_watchdog.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !writer.is_finished(),
        "the writer got in beside the outer read"
    );
    let released = Instant::now();
    outer.release().await.unwrap();
    let (w, at) = bounded(writer, "the writer").await.unwrap();
    println!(
        "writer in {:?} after the last watchdog read left",
        at.saturating_duration_since(released)
    );
    w.release().await.unwrap();
    assert_no_keys_left(&mut conn, &owned, "mixed").await;
}

/// Fencing with a downgrade: a fenced write downgrades to a read (no token); a reader
/// that waited for the write gets in once the write goes; no fenced writer gets in while
/// the downgraded read lives; the next writer (another client) gets a strictly larger
/// token, the counter's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_write_downgrades_and_the_next_writer_gets_a_larger_token() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let a = server.client(SEC).await;
    let b = server.client(SEC).await;
    let rw = a.rw_lock("fenced-down").unwrap().with_fencing();
    let other = b.rw_lock("fenced-down").unwrap().with_fencing();

    let w = rw.write().await.unwrap();
    let t1 = w.fencing_token().expect("a fenced write has a token");
    let waiting_reader = {
        let other = other.clone();
        tokio::spawn(async move { other.read().await.unwrap() })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting_reader.is_finished(),
        "a reader got in beside the write"
    );
    let down = w.read().await.unwrap();
    assert_eq!(down.fencing_token(), None);
    let state = rw.state().await.unwrap();
    assert_eq!((state.writes, state.reads), (1, 1), "{state:?}");
    let released = Instant::now();
    w.release().await.unwrap();
    let theirs = bounded(waiting_reader, "the waiting reader").await.unwrap();
    println!(
        "downgrade: the waiting reader got in {:?} after the write left",
        released.elapsed()
    );
    assert!(
        other.try_write().await.unwrap().is_none(),
        "a writer got in past the read"
    );
    let writer = {
        let other = other.clone();
        tokio::spawn(async move { other.write().await.unwrap() })
    };
    until_writer_waits(&rw).await;
    assert!(
        a.rw_lock("fenced-down")
            .unwrap()
            .try_read()
            .await
            .unwrap()
            .is_none(),
        "a new reader got in past the waiting writer"
    );
    let again = down.reenter().await.expect("the downgraded read re-enters");
    for guard in [again, theirs] {
        guard.release().await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !writer.is_finished(),
        "the writer got in beside the downgraded read"
    );
    down.release().await.unwrap();
    let w2 = bounded(writer, "the next writer").await.unwrap();
    let t2 = w2.fencing_token().expect("token");
    assert!(t2 > t1, "token {t2} not above {t1}");
    assert_eq!(get_int(&mut conn, &fence_key(&rw)).await as u64, t2);
    let nested = w2.reenter().await.unwrap();
    assert_eq!(nested.fencing_token(), Some(t2));
    nested.release().await.unwrap();
    w2.release().await.unwrap();
    println!("fencing + downgrade: tokens {t1} then {t2}");
    assert_no_keys_left(&mut conn, &rw, "fenced-down").await;
}

/// One explicit owner on two clients while another owner's writer waits: the owner reads
/// again from the other client (its reads let it in past the reservation), a third owner
/// cannot, the owner's write is `WouldDeadlock` from either client, and the writer gets
/// in only when the owner's last read (on either client) is gone. Then the owner's write
/// is shared the same way: re-entered from the other client, exclusive for everyone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_owner_shares_its_holds_across_clients_while_a_writer_waits() {
    let server = RedisServer::start();
    let mut conn = server.conn().await;
    let a = server.client(SEC).await;
    let b = server.client(SEC).await;
    let c = server.client(SEC).await;
    let on_a = a.rw_lock("svc").unwrap().with_owner("svc-owner").unwrap();
    let on_b = b.rw_lock("svc").unwrap().with_owner("svc-owner").unwrap();
    let third = c.rw_lock("svc").unwrap();

    let read_a = on_a.read().await.unwrap();
    let writer = {
        let rw = third.clone();
        tokio::spawn(async move {
            let guard = rw.write().await.unwrap();
            (guard, Instant::now())
        })
    };
    until_writer_waits(&third).await;
    let read_b = on_b
        .try_read_for(2 * SEC)
        .await
        .unwrap()
        .expect("the owner reads again from another client while a writer waits");
    assert!(
        third.try_read().await.unwrap().is_none(),
        "a third owner read past the writer"
    );
    for rw in [&on_a, &on_b] {
        assert!(matches!(rw.write().await, Err(Error::WouldDeadlock { .. })));
    }
    assert_eq!(third.state().await.unwrap().reads, 2);
    read_a.release().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !writer.is_finished(),
        "the writer got in beside the owner's read on B"
    );
    let released = Instant::now();
    read_b.release().await.unwrap();
    let (w, at) = bounded(writer, "the writer").await.unwrap();
    println!(
        "shared owner: the writer got in {:?} after the owner's last read left",
        at.saturating_duration_since(released)
    );
    assert!(
        on_a.try_read().await.unwrap().is_none(),
        "the owner read beside another's write"
    );
    w.release().await.unwrap();

    // The owner's write, shared across its clients.
    let write_a = on_a.write().await.unwrap();
    let write_b = on_b
        .try_write()
        .await
        .unwrap()
        .expect("the owner's write re-entered from another client");
    let read_b = on_b
        .try_read()
        .await
        .unwrap()
        .expect("the owner reads under its write");
    assert!(third.try_read().await.unwrap().is_none());
    assert!(third.try_write().await.unwrap().is_none());
    let state = third.state().await.unwrap();
    assert_eq!((state.writes, state.reads), (2, 1), "{state:?}");
    assert_eq!(state.writer.as_deref(), Some("svc-owner"));
    for guard in [write_a, write_b, read_b] {
        guard.release().await.unwrap();
    }
    assert!(!third.state().await.unwrap().is_locked());
    assert_no_keys_left(&mut conn, &third, "svc").await;
}

// ---- 8. a Redis Cluster ----------------------------------------------------------------

/// Every key matching `pattern` on the node on `port`.
fn scan(cluster: &topology::Cluster, port: u16, pattern: &str) -> Vec<String> {
    let mut conn = cluster.node_conn(port);
    let mut cursor: u64 = 0;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1000)
            .query(&mut conn)
            .unwrap();
        keys.extend(batch);
        if next == 0 {
            return keys;
        }
        cursor = next;
    }
}

/// On the shared cluster (3 primaries), one read-write lock per primary: 3 clients × 2
/// tasks per lock mix reads and writes; never a writer beside anyone; a writer waiting on
/// a reader is subscribed on the lock's shard and gets in after the release; no key of
/// the prefix is left on any node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_and_writers_exclude_each_other_on_a_cluster() {
    let begun = Instant::now();
    let cluster = topology::shared_cluster();
    println!("cluster ready after {:?}", begun.elapsed());
    let prefix = "rwf-cluster";
    let map = cluster.slot_map();
    let mut names: Vec<(String, u16)> = Vec::new();
    for i in 0..200 {
        let name = format!("rw{i}");
        let slot = topology::slot_of(&format!("{prefix}:{{{name}}}:rw:write"));
        let primary = map.iter().find(|r| r.contains(slot)).unwrap().primary;
        if !names.iter().any(|(_, p)| *p == primary) {
            names.push((name, primary));
        }
    }
    assert_eq!(names.len(), 3, "{names:?}");
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(
            LockClient::builder_cluster(cluster.seeds())
                .prefix(prefix)
                .watchdog_timeout(10 * SEC)
                .connect()
                .await
                .unwrap(),
        );
    }

    // A writer waiting on a reader: subscribed on the lock's shard, in after the release.
    let (name, primary) = &names[0];
    let reader = clients[0]
        .rw_lock(name)
        .unwrap()
        .try_read()
        .await
        .unwrap()
        .unwrap();
    let waiting_rw = clients[1].rw_lock(name).unwrap();
    let writer = {
        let rw = waiting_rw.clone();
        tokio::spawn(async move {
            let guard = rw.write().await.unwrap();
            (guard, Instant::now())
        })
    };
    until_writer_waits(&waiting_rw).await;
    let write_channel = channel(&waiting_rw, RwKind::Write);
    let subscribed = common::eventually(5 * SEC, || async {
        let mut conn = cluster.node_conn(*primary);
        let reply: Vec<redis::Value> = redis::cmd("PUBSUB")
            .arg("SHARDNUMSUB")
            .arg(&write_channel)
            .query(&mut conn)
            .unwrap();
        matches!(reply.get(1), Some(redis::Value::Int(n)) if *n >= 1)
    })
    .await;
    assert!(
        subscribed,
        "the waiting writer is not subscribed on {primary}"
    );
    assert!(!writer.is_finished());
    let released = Instant::now();
    reader.release().await.unwrap();
    let (w, at) = bounded(writer, "the cluster writer").await.unwrap();
    let hand_off = at.saturating_duration_since(released);
    w.release().await.unwrap();

    // Contention on one lock per primary.
    let violations = Arc::new(AtomicU64::new(0));
    let shared_reads = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    let started = Instant::now();
    for (name, _) in &names {
        let readers = Arc::new(AtomicI64::new(0));
        let writers = Arc::new(AtomicI64::new(0));
        for (c, client) in clients.iter().enumerate() {
            for t in 0..2 {
                let rw = client.rw_lock(name).unwrap();
                let (readers, writers) = (readers.clone(), writers.clone());
                let (violations, shared_reads) = (violations.clone(), shared_reads.clone());
                tasks.push(tokio::spawn(async move {
                    for round in 0..10 {
                        if (c + t + round).is_multiple_of(3) {
                            let guard = rw.write().await.unwrap();
                            if writers.fetch_add(1, Ordering::SeqCst) != 0
                                || readers.load(Ordering::SeqCst) != 0
                            {
                                violations.fetch_add(1, Ordering::SeqCst);
                            }
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            writers.fetch_sub(1, Ordering::SeqCst);
                            guard.release().await.unwrap();
                        } else {
                            let guard = rw.read().await.unwrap();
                            if readers.fetch_add(1, Ordering::SeqCst) != 0 {
                                shared_reads.fetch_add(1, Ordering::SeqCst);
                            }
                            if writers.load(Ordering::SeqCst) != 0 {
                                violations.fetch_add(1, Ordering::SeqCst);
                            }
                            tokio::time::sleep(Duration::from_millis(3)).await;
                            readers.fetch_sub(1, Ordering::SeqCst);
                            guard.release().await.unwrap();
                        }
                    }
                }));
            }
        }
    }
    for task in tasks {
        tokio::time::timeout(60 * SEC, task)
            .await
            .expect("no deadlock")
            .unwrap();
    }
    println!(
        "cluster: writer in {hand_off:?} after the reader left; 3 locks on primaries {:?}, \
         180 sections in {:?}: {} violations, {} reads beside another",
        names.iter().map(|(_, p)| *p).collect::<Vec<_>>(),
        started.elapsed(),
        violations.load(Ordering::SeqCst),
        shared_reads.load(Ordering::SeqCst),
    );
    assert_eq!(violations.load(Ordering::SeqCst), 0);
    assert!(hand_off < 5 * SEC, "{hand_off:?}");
    for client in &clients {
        bounded(client.flush(), "flush").await;
    }
    for primary in cluster.primaries() {
        let left = scan(cluster, primary, &format!("{prefix}:*"));
        assert!(left.is_empty(), "keys left on {primary}: {left:?}");
    }
}
