//! Lost replies on every retry path (issue #9): a real redis-server, the in-process TCP
//! fault proxy between one client and Redis, and the public API only.
//!
//! The matrix: operation ∈ {fresh acquire, re-entrant acquire (1 -> 2), partial release
//! (2 -> 1), final release (1 -> 0)} × fencing ∈ {unfenced, fenced} × cut ∈ {after Redis
//! ran the request (its reply is lost), before it reached Redis}. One test per operation
//! loops over fencing × cut and prints one line per cell. One more cuts the take of a
//! waiter woken by a release (its bare `SET NX PX`), both ways.
//!
//! Every cell reads Redis directly (a plain connection, not the library) and checks:
//! * the fault happened (`proxy.cuts()` grew by one) and was the kind intended: the number
//!   of requests that reached Redis (`INFO commandstats`: script calls, and for an unfenced
//!   lock the bare `SET ... NX PX` that takes it while free, `lua/take.lua`) is the one the
//!   cut implies;
//! * exactly once: the owner's count is what one application of the operation gives (read
//!   in either form of the lock: a first hold is a string, any other a hash, see
//!   `lua/acquire.lua`),
//!   or, for an acquire that returned an error, what the caller's guards account for after
//!   `client.flush()` (no orphan, no double increment);
//! * fenced: the token is > 0 and is the hash's `"\1fence"` (a fenced hold is always a
//!   hash), a re-entry keeps its outer
//!   hold's token, and a fresh acquire after the final release gets a strictly larger one;
//! * nothing stranded: after the last release the lock key is gone and the only keys left
//!   in Redis are the fencing counters (`<key>:fence`) of the fenced cells.
//!
//! Every lock handle uses the explicit owner `"o"`; re-entry acquires again on the same
//! handle while the first guard is held.
//!
//! Which request a cell cuts: a fresh unfenced acquire is the bare `SET <key> <value> NX PX
//! <lease>` (the lock is free, so it takes it as a string); a fresh fenced acquire and every
//! re-entry are an `EVALSHA` of `acquire.lua`; a release is an `EVALSHA` of `release.lua`,
//! but the final release of an unfenced first hold, which is `release_first.lua`.

mod common;
#[allow(dead_code)]
#[path = "faults/proxy.rs"]
mod proxy;

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use common::RedisServer;
use proxy::{FaultProxy, proxied_client, script_sha, take_pattern, warm_up};
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redis_locks::{Error, Lock, LockClient, LockGuard};

const SEC: Duration = Duration::from_secs(1);
const OWNER: &str = "o";
/// The reserved hash fields (see `lua/acquire.lua`; read through `common::lock_hget`, which
/// reads a first hold's string as the hash it stands for).
const HOLD_FIELD: &str = "\u{1}h";
const TOKEN_FIELD: &str = "\u{1}fence";
/// Bound on every single library call of a cell.
const STEP: Duration = Duration::from_secs(10);

// ---- the rig -------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// The request reaches Redis and runs; the connection is cut before the reply.
    AfterRedisRan,
    /// The connection is cut before the request reaches Redis.
    BeforeRedis,
}

impl Cut {
    fn label(self) -> &'static str {
        match self {
            Cut::AfterRedisRan => "after",
            Cut::BeforeRedis => "before",
        }
    }
}

const CELLS: [(bool, Cut); 4] = [
    (false, Cut::AfterRedisRan),
    (false, Cut::BeforeRedis),
    (true, Cut::AfterRedisRan),
    (true, Cut::BeforeRedis),
];

struct Rig {
    // Field order: the client and proxy go before the server they point at.
    client: LockClient,
    proxy: FaultProxy,
    conn: MultiplexedConnection,
    acquire_sha: Vec<u8>,
    release_sha: Vec<u8>,
    /// A first hold's final release (unfenced, never re-entered): `release_first.lua`.
    release_first_sha: Vec<u8>,
    /// Keys that may outlive their locks: the fencing counters of fenced cells so far.
    expected_keys: BTreeSet<String>,
    _server: RedisServer,
}

impl Rig {
    async fn start() -> Rig {
        let server = RedisServer::start();
        let proxy = FaultProxy::start(server.port).await;
        // A long watchdog timeout: no renewal script call lands in a cell's window, so the
        // request counts below see only the operation under test.
        let client = proxied_client(&proxy, 300 * SEC, 2 * SEC).await;
        let mut conn = server.conn().await;
        // Cache every script a cell sends (probe.lua included), so that no fault lands on
        // a NOSCRIPT round trip and every call counts once.
        for body in [
            include_str!("../lua/acquire.lua"),
            include_str!("../lua/release.lua"),
            include_str!("../lua/release_first.lua"),
            include_str!("../lua/probe.lua"),
        ] {
            let _: String = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(body)
                .query_async(&mut conn)
                .await
                .unwrap();
        }
        warm_up(&client, Some(OWNER)).await;
        Rig {
            client,
            proxy,
            conn,
            acquire_sha: script_sha(include_str!("../lua/acquire.lua")),
            release_sha: script_sha(include_str!("../lua/release.lua")),
            release_first_sha: script_sha(include_str!("../lua/release_first.lua")),
            expected_keys: BTreeSet::new(),
            _server: server,
        }
    }

    fn lock(&self, name: &str, fenced: bool) -> Lock {
        let lock = self.client.lock(name).unwrap().with_owner(OWNER).unwrap();
        if fenced { lock.with_fencing() } else { lock }
    }

    /// Arms a one-shot cut on the next request containing `pattern`; returns the cut
    /// count and the request count (of `fenced`'s kind of lock, see [`requests`]) before
    /// it.
    async fn arm(&mut self, cut: Cut, pattern: &[u8], fenced: bool) -> Armed {
        let armed = Armed {
            cuts: self.proxy.cuts(),
            requests: self.requests(fenced).await,
            fenced,
        };
        match cut {
            Cut::AfterRedisRan => self.proxy.cut_after_request_containing(pattern),
            Cut::BeforeRedis => self.proxy.cut_before_request_containing(pattern),
        }
        armed
    }

    /// Checks that exactly one cut happened since `arm`, and returns how many requests
    /// reached Redis since.
    async fn fault_happened(&mut self, armed: Armed, context: &str) -> u64 {
        assert_eq!(
            self.proxy.cuts(),
            armed.cuts + 1,
            "{context}: the proxy did not cut the request"
        );
        self.requests(armed.fenced).await - armed.requests
    }

    /// The requests the server has processed that count in a cell ([`requests`]).
    async fn requests(&mut self, fenced: bool) -> u64 {
        common::command_calls(&mut self.conn, requests(fenced)).await
    }

    /// The owner's hold count, in either form of the lock.
    async fn count(&mut self, key: &str) -> Option<u64> {
        common::lock_hget(key, OWNER)
            .query_async(&mut self.conn)
            .await
            .unwrap()
    }

    /// The current hold id, in either form of the lock.
    async fn hold(&mut self, key: &str) -> Option<String> {
        common::lock_hget(key, HOLD_FIELD)
            .query_async(&mut self.conn)
            .await
            .unwrap()
    }

    /// The hold's fencing token (a string form has none).
    async fn hash_token(&mut self, key: &str) -> Option<u64> {
        common::lock_hget(key, TOKEN_FIELD)
            .query_async(&mut self.conn)
            .await
            .unwrap()
    }

    async fn fence_counter(&mut self, key: &str) -> Option<u64> {
        self.conn.get(format!("{key}:fence")).await.unwrap()
    }

    /// The guard matches Redis: the owner's count, the hold id, and for fenced locks the
    /// token (> 0, the hash's token, at most the counter).
    async fn assert_guard_matches(
        &mut self,
        guard: &LockGuard,
        key: &str,
        count: u64,
        fenced: bool,
        context: &str,
    ) {
        assert_eq!(guard.hold_count(), count, "{context}: guard's count");
        assert_eq!(
            self.count(key).await,
            Some(count),
            "{context}: the owner's count in Redis"
        );
        assert_eq!(
            self.hold(key).await.as_deref(),
            Some(guard.hold_id()),
            "{context}: the guard names another hold than the current one"
        );
        if fenced {
            let token = guard.fencing_token().expect("a fenced guard has a token");
            assert!(token > 0, "{context}: token 0");
            assert_eq!(
                self.hash_token(key).await,
                Some(token),
                "{context}: the guard's token is not the hold's"
            );
            let counter = self.fence_counter(key).await.expect("fence counter");
            assert!(
                token <= counter,
                "{context}: token {token} above counter {counter}"
            );
        } else {
            assert_eq!(guard.fencing_token(), None, "{context}: unfenced token");
            assert_eq!(self.hash_token(key).await, None, "{context}: unfenced hold");
        }
    }

    /// After every guard of `lock` was released: waits for background work, then checks
    /// that the lock key is gone and that the only keys in Redis are the fencing counters
    /// of fenced cells. For fenced locks, a fresh acquire then gets a token above
    /// `highest` (the largest token handed out in the cell).
    async fn assert_nothing_stranded(&mut self, lock: &Lock, highest: Option<u64>, ctx: &str) {
        bounded(self.client.flush(), "flush").await;
        let key = lock.key().to_owned();
        assert_eq!(self.count(&key).await, None, "{ctx}: the owner still holds");
        let exists: bool = self.conn.exists(&key).await.unwrap();
        assert!(!exists, "{ctx}: the lock key outlived the lock");
        if lock.is_fenced() {
            let highest = highest.expect("a fenced cell saw a token");
            let guard = bounded(lock.acquire(), "fresh acquire").await.unwrap();
            let token = guard.fencing_token().expect("token");
            assert_eq!(guard.hold_count(), 1, "{ctx}: fresh acquire not fresh");
            assert!(
                token > highest,
                "{ctx}: a fresh acquire after the final release got token {token}, not \
                 above {highest}"
            );
            bounded(guard.release(), "release").await.unwrap();
            bounded(self.client.flush(), "flush").await;
            self.expected_keys.insert(format!("{key}:fence"));
        }
        let mut keys: Vec<String> = redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut self.conn)
            .await
            .unwrap();
        keys.sort();
        let expected: Vec<String> = self.expected_keys.iter().cloned().collect();
        assert_eq!(
            keys, expected,
            "{ctx}: keys other than fencing counters left"
        );
        let dbsize: u64 = redis::cmd("DBSIZE")
            .query_async(&mut self.conn)
            .await
            .unwrap();
        assert_eq!(dbsize, expected.len() as u64, "{ctx}: DBSIZE");
    }
}

/// The counts taken when a cut was armed.
struct Armed {
    cuts: u64,
    requests: u64,
    fenced: bool,
}

/// The commands whose calls (`INFO commandstats`) a cell counts as its requests: the
/// scripts (`EVALSHA`, and `EVAL` after a `NOSCRIPT`), and for an unfenced lock also `SET`:
/// the bare `SET ... NX PX` that takes the lock while it is free (`lua/take.lua`); no script
/// an unfenced cell runs calls `SET` (the probe and the release read with `GET`, a re-entry
/// rewrites the string as a hash). A fenced lock is taken by `acquire.lua` only, and its
/// scripts do `SET` the fencing counter, which commandstats would count too (it counts the
/// commands scripts run): a fenced cell counts the scripts only.
fn requests(fenced: bool) -> &'static [&'static str] {
    if fenced {
        &["evalsha", "eval"]
    } else {
        &["evalsha", "eval", "set"]
    }
}

/// The request an acquire on a lock of `fenced`'s kind sends first: the bare `SET NX PX`
/// when it is a fresh unfenced one (`fresh`; the lock is free), else `acquire.lua`.
fn acquire_pattern(rig: &Rig, fenced: bool, fresh: bool) -> Vec<u8> {
    if fresh && !fenced {
        take_pattern()
    } else {
        rig.acquire_sha.clone()
    }
}

async fn bounded<T>(fut: impl Future<Output = T>, what: &str) -> T {
    tokio::time::timeout(STEP, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {STEP:?}"))
}

fn cell_name(op: &str, fenced: bool, cut: Cut) -> String {
    format!(
        "lr-{op}-{}-{}",
        if fenced { "fenced" } else { "plain" },
        cut.label()
    )
}

fn describe<T>(result: &Result<T, Error>) -> String {
    match result {
        Ok(_) => "Ok".into(),
        Err(Error::ReleaseUnconfirmed { .. }) => "Err(ReleaseUnconfirmed)".into(),
        Err(err) => format!("Err({err})"),
    }
}

/// Requests that reach Redis for one acquire whose connection is cut: the acquire itself
/// (only when cut after Redis ran it) and the probe that reconciles it. (A fresh unfenced
/// acquire is the bare `SET NX PX`, counted with the scripts: see [`requests`].)
fn acquire_calls(_cut: Cut) -> u64 {
    // Cut after: the acquire and the probe that finds its hold. Cut before: the probe that
    // finds nothing, and the acquire sent afresh.
    2
}

/// Requests (script calls) that reach Redis for one release whose connection is cut: the first
/// attempt (only when cut after Redis ran it) and the retry with the same request id.
fn release_calls(cut: Cut) -> u64 {
    match cut {
        Cut::AfterRedisRan => 2,
        Cut::BeforeRedis => 1,
    }
}

/// The requests that reached Redis: at least the expected ones (the cut really hit
/// the operation under test), and at most two more. A read-only probe, or a retry with the
/// same request id, sent while the connection was still being rebuilt can reach Redis
/// twice (seen once in CI, on a cold first run: 4 calls for an expected 2); both are
/// idempotent by design, and the state checks after this (counts and hold ids in Redis)
/// are what prove that nothing was applied twice.
fn assert_calls(calls: u64, expected: u64, ctx: &str) {
    if calls != expected {
        println!("{ctx}: {calls} requests in Redis, expected {expected}");
    }
    assert!(
        (expected..=expected + 2).contains(&calls),
        "{ctx}: {calls} requests in Redis, expected {expected} (at most 2 more)"
    );
}

// ---- the cells -----------------------------------------------------------------------

/// Fresh acquire (0 -> 1) with its connection cut. The lock is free, so an unfenced acquire
/// is the bare `SET <key> <value> NX PX <lease>` (a first hold in the string form, whose
/// value names the request), and that is the request cut; a fenced one is `acquire.lua`.
///
/// Cut after Redis ran it: the probe finds the hold (`probe.lua` reads the string's value,
/// or the hash's record) and the caller adopts it (README,
/// "Lost replies": "A caller that is still waiting adopts the hold"): `Ok`, count 1.
/// Cut before: nothing ran; the probe (on the new connection) says so and the acquire is
/// sent afresh: `Ok`, count 1. Redis was reachable, so no error reaches the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_reply_fresh_acquire() {
    let mut rig = Rig::start().await;
    for (fenced, cut) in CELLS {
        let started = Instant::now();
        let ctx = cell_name("fresh", fenced, cut);
        let lock = rig.lock(&ctx, fenced);
        let key = lock.key().to_owned();
        // A token handed out before the cell, so the lost acquire's token must be above it.
        let mut highest = None;
        if fenced {
            let guard = bounded(lock.acquire(), "acquire").await.unwrap();
            highest = guard.fencing_token();
            bounded(guard.release(), "release").await.unwrap();
        }

        let pattern = acquire_pattern(&rig, fenced, true);
        let armed = rig.arm(cut, &pattern, fenced).await;
        let result = bounded(lock.acquire(), "acquire with a cut").await;
        let calls = rig.fault_happened(armed, &ctx).await;
        assert_calls(calls, acquire_calls(cut), &ctx);
        let outcome = describe(&result);
        let token = match result {
            Ok(guard) => {
                rig.assert_guard_matches(&guard, &key, 1, fenced, &ctx)
                    .await;
                let token = guard.fencing_token();
                if let (Some(token), Some(before)) = (token, highest) {
                    assert!(token > before, "{ctx}: token {token} not above {before}");
                    highest = Some(token);
                }
                // Nothing else happens to the adopted hold in the background.
                bounded(rig.client.flush(), "flush").await;
                assert_eq!(rig.count(&key).await, Some(1), "{ctx}: count after flush");
                bounded(guard.release(), "release")
                    .await
                    .unwrap_or_else(|err| panic!("{ctx}: releasing the adopted hold: {err}"));
                token
            }
            // Redis answered the probe: a dropped connection is not an outage, so the
            // acquire was sent afresh (cut before) or adopted (cut after).
            Err(err) => panic!("{ctx}: the acquire failed though Redis was reachable: {err:?}"),
        };
        rig.assert_nothing_stranded(&lock, highest, &ctx).await;
        println!(
            "lost_replies {ctx}: acquire -> {outcome}, requests {calls}, token {token:?}, \
             {:?}",
            started.elapsed()
        );
    }
}

/// Re-entrant acquire (1 -> 2) with its connection cut, on the same explicit-owner handle
/// while the outer guard is held.
///
/// Cut after: the probe finds this client's record of the re-entry; the caller adopts it
/// (count 2, same hold, same token; no second increment). Cut before: nothing ran; the
/// re-entry is sent afresh: `Ok` (count 2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_reply_reentrant_acquire() {
    let mut rig = Rig::start().await;
    for (fenced, cut) in CELLS {
        let started = Instant::now();
        let ctx = cell_name("reenter", fenced, cut);
        let lock = rig.lock(&ctx, fenced);
        let key = lock.key().to_owned();
        let outer = bounded(lock.acquire(), "outer acquire").await.unwrap();
        rig.assert_guard_matches(&outer, &key, 1, fenced, &ctx)
            .await;

        // A re-entry is always `acquire.lua` (it turns an unfenced first hold's string into
        // the hash).
        let pattern = acquire_pattern(&rig, fenced, false);
        let armed = rig.arm(cut, &pattern, fenced).await;
        let result = bounded(lock.acquire(), "re-entry with a cut").await;
        let calls = rig.fault_happened(armed, &ctx).await;
        assert_calls(calls, acquire_calls(cut), &ctx);
        let outcome = describe(&result);
        match result {
            Ok(inner) => {
                rig.assert_guard_matches(&inner, &key, 2, fenced, &ctx)
                    .await;
                assert_eq!(
                    inner.hold_id(),
                    outer.hold_id(),
                    "{ctx}: re-entry, new hold"
                );
                assert_eq!(
                    inner.fencing_token(),
                    outer.fencing_token(),
                    "{ctx}: a re-entry changed the token"
                );
                bounded(rig.client.flush(), "flush").await;
                assert_eq!(rig.count(&key).await, Some(2), "{ctx}: count after flush");
                bounded(inner.release(), "inner release")
                    .await
                    .unwrap_or_else(|err| panic!("{ctx}: releasing the adopted re-entry: {err}"));
                assert_eq!(rig.count(&key).await, Some(1), "{ctx}: after inner release");
            }
            Err(err) => panic!("{ctx}: the re-entry failed though Redis was reachable: {err:?}"),
        }
        // The outer hold is intact and releases normally.
        rig.assert_guard_matches(&outer, &key, 1, fenced, &ctx)
            .await;
        let highest = outer.fencing_token();
        bounded(outer.release(), "outer release")
            .await
            .unwrap_or_else(|err| panic!("{ctx}: outer release: {err}"));
        rig.assert_nothing_stranded(&lock, highest, &ctx).await;
        println!(
            "lost_replies {ctx}: re-entry -> {outcome}, requests {calls}, token {highest:?}, \
             {:?}",
            started.elapsed()
        );
    }
}

/// Partial release (2 -> 1) with its connection cut. The retry carries the same request
/// id: cut after, it finds its own record ("-3", already applied) and decrements nothing;
/// cut before, it applies the release. Both are `Ok` (README: a partial release's retry
/// "answers already done"), and the count is 1 either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_reply_partial_release() {
    let mut rig = Rig::start().await;
    for (fenced, cut) in CELLS {
        let started = Instant::now();
        let ctx = cell_name("partial", fenced, cut);
        let lock = rig.lock(&ctx, fenced);
        let key = lock.key().to_owned();
        let outer = bounded(lock.acquire(), "outer acquire").await.unwrap();
        let inner = bounded(lock.acquire(), "re-entry").await.unwrap();
        rig.assert_guard_matches(&inner, &key, 2, fenced, &ctx)
            .await;
        assert_eq!(
            inner.fencing_token(),
            outer.fencing_token(),
            "{ctx}: re-entry token"
        );

        let sha = rig.release_sha.clone();
        let armed = rig.arm(cut, &sha, fenced).await;
        let result = bounded(inner.release(), "partial release with a cut").await;
        let calls = rig.fault_happened(armed, &ctx).await;
        assert_calls(calls, release_calls(cut), &ctx);
        let outcome = describe(&result);
        result.unwrap_or_else(|err| panic!("{ctx}: a retried partial release failed: {err}"));
        assert_eq!(
            rig.count(&key).await,
            Some(1),
            "{ctx}: the retried partial release did not decrement exactly once"
        );
        bounded(rig.client.flush(), "flush").await;
        rig.assert_guard_matches(&outer, &key, 1, fenced, &ctx)
            .await;
        let highest = outer.fencing_token();
        bounded(outer.release(), "outer release")
            .await
            .unwrap_or_else(|err| panic!("{ctx}: outer release: {err}"));
        rig.assert_nothing_stranded(&lock, highest, &ctx).await;
        println!(
            "lost_replies {ctx}: release 2->1 -> {outcome}, requests {calls}, token \
             {highest:?}, {:?}",
            started.elapsed()
        );
    }
}

/// Final release (1 -> 0) with its connection cut.
///
/// Cut after: the first attempt deleted the lock (a string, or a fenced hold's hash); the
/// retry finds the hold gone and
/// cannot tell who ended it, so `release()` is `Err(ReleaseUnconfirmed)`, never `Ok`
/// (README, "Lost replies"; `LockGuard::release`). Cut before: the retry gives the hold
/// back while it is held: `Ok`. The key is gone either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_reply_final_release() {
    let mut rig = Rig::start().await;
    for (fenced, cut) in CELLS {
        let started = Instant::now();
        let ctx = cell_name("final", fenced, cut);
        let lock = rig.lock(&ctx, fenced);
        let key = lock.key().to_owned();
        let guard = bounded(lock.acquire(), "acquire").await.unwrap();
        rig.assert_guard_matches(&guard, &key, 1, fenced, &ctx)
            .await;
        let highest = guard.fencing_token();

        // A fenced hold is a hash (release.lua); an unfenced one a first hold's string.
        let sha = if fenced {
            rig.release_sha.clone()
        } else {
            rig.release_first_sha.clone()
        };
        let armed = rig.arm(cut, &sha, fenced).await;
        let result = bounded(guard.release(), "final release with a cut").await;
        let calls = rig.fault_happened(armed, &ctx).await;
        assert_calls(calls, release_calls(cut), &ctx);
        let outcome = describe(&result);
        match (cut, &result) {
            (Cut::AfterRedisRan, Err(Error::ReleaseUnconfirmed { .. })) => {}
            (Cut::BeforeRedis, Ok(())) => {}
            _ => panic!("{ctx}: the final release returned {outcome}"),
        }
        assert_eq!(rig.count(&key).await, None, "{ctx}: still held");
        rig.assert_nothing_stranded(&lock, highest, &ctx).await;
        println!(
            "lost_replies {ctx}: release 1->0 -> {outcome}, requests {calls}, token \
             {highest:?}, {:?}",
            started.elapsed()
        );
    }
}

/// A waiter woken by a release message takes the lock with the bare `SET NX PX` first
/// (issue 24: the lock is most likely free then; `acquire.lua` follows only if the key was
/// there), and that `SET`'s connection is cut. The holder is another client on a direct
/// connection, with a fixed 60 s lease, so that only the release message can wake the
/// waiter, and the cut is armed only once the waiter sleeps (its attempts made: the lock
/// marked, its subscription confirmed, no request from it for a second), so the one
/// `SET NX PX` it can hit is the woken waiter's.
///
/// Cut after Redis ran it: the waiter's reconciliation finds the hold its `SET` took and
/// adopts it: `Ok`, count 1, its guard names the hold in Redis. Cut before: nothing ran;
/// the probe says so and the attempt is sent afresh (the lock is free): `Ok`. Either way
/// the lock ends with its release and nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_reply_of_a_woken_waiters_take() {
    let mut rig = Rig::start().await;
    let holder_client = rig._server.client(300 * SEC).await;
    for cut in [Cut::AfterRedisRan, Cut::BeforeRedis] {
        let started = Instant::now();
        let ctx = format!("lr-woken-take-{}", cut.label());
        let held = holder_client
            .lock(&ctx)
            .unwrap()
            .with_lease(60 * SEC)
            .unwrap();
        let guard = bounded(held.acquire(), "the holder's acquire")
            .await
            .unwrap();
        let lock = rig.lock(&ctx, false);
        let key = lock.key().to_owned();
        let channel = lock.channel().to_owned();
        let waiting = {
            let lock = lock.clone();
            tokio::spawn(async move { lock.acquire().await })
        };
        // Asleep: the hold marked by its refusal, the subscription there, and no request
        // from it for a second (its attempt after the confirmation is made by then).
        let deadline = Instant::now() + 30 * SEC;
        let mut last = None;
        let mut quiet_since = Instant::now();
        loop {
            let value: Option<Vec<u8>> = rig.conn.get(&key).await.unwrap();
            let marked = value.is_some_and(|v| v.first() == Some(&2));
            let subscribed = common::numsub(&mut rig.conn, &channel).await >= 1;
            let calls = rig.requests(false).await;
            if last != Some(calls) {
                last = Some(calls);
                quiet_since = Instant::now();
            }
            if marked && subscribed && quiet_since.elapsed() >= SEC {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{ctx}: the waiter never fell asleep on the held lock"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }

        let armed = rig.arm(cut, &take_pattern(), false).await;
        bounded(guard.release(), "the holder's release")
            .await
            .unwrap();
        let result = bounded(waiting, "the woken waiter").await.unwrap();
        let calls = rig.fault_happened(armed, &ctx).await;
        let outcome = describe(&result);
        match result {
            Ok(taken) => {
                rig.assert_guard_matches(&taken, &key, 1, false, &ctx).await;
                bounded(rig.client.flush(), "flush").await;
                assert_eq!(rig.count(&key).await, Some(1), "{ctx}: count after flush");
                bounded(taken.release(), "release")
                    .await
                    .unwrap_or_else(|err| panic!("{ctx}: releasing the taken hold: {err}"));
            }
            Err(err) => {
                panic!("{ctx}: the woken waiter failed though Redis was reachable: {err:?}")
            }
        }
        rig.assert_nothing_stranded(&lock, None, &ctx).await;
        println!(
            "lost_replies {ctx}: woken acquire -> {outcome}, requests {calls} (the holder's \
             release included), {:?}",
            started.elapsed()
        );
    }
}

/// An acquire that the server reads only after the client's reconciliation bound (a
/// lease after it noticed the timeout: the server stalled for longer): the lane goes on
/// asking while its probes time out, so the hold the late acquire takes (the lock is free:
/// the bare `SET NX PX`, a `set` in Redis's keyspace events) is given back (a `del`),
/// never left to expire. `flush` does not
/// wait for that asking: it returns while the server still stalls.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acquire_run_after_the_reconciliation_bound_is_given_back() {
    let server = RedisServer::start_with(&["--notify-keyspace-events", "KA"]);
    let proxy = FaultProxy::start(server.port).await;
    let client = proxied_client(&proxy, 30 * SEC, Duration::from_millis(200)).await;
    warm_up(&client, None).await;
    let lock = client
        .lock("late-acquire")
        .unwrap()
        .with_lease(Duration::from_millis(800))
        .unwrap();
    let key = lock.key().to_owned();
    // Redis's own account of the key, on a connection of its own (not through the proxy).
    let mut events = redis::Client::open(server.url())
        .unwrap()
        .get_async_pubsub()
        .await
        .unwrap();
    events
        .subscribe(format!("__keyspace@0__:{key}"))
        .await
        .unwrap();

    proxy.stall(true);
    let attempt = lock.try_acquire().await;
    assert!(attempt.is_err(), "a stalled acquire returned {attempt:?}");
    // Past the bound (0.8 s lease after the timeout was noticed), the probes still time out.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    tokio::time::timeout(5 * SEC, client.flush())
        .await
        .expect("flush waited for the asking past the bound");
    proxy.stall(false);

    // The late acquire runs, and the next probe (behind it) finds and gives back its hold.
    let mut seen = Vec::new();
    let mut stream = std::pin::pin!(events.on_message());
    let ended = tokio::time::timeout(10 * SEC, async {
        while let Some(message) =
            std::future::poll_fn(|cx| futures_core::Stream::poll_next(stream.as_mut(), cx)).await
        {
            let event: String = message.get_payload().unwrap();
            seen.push(event.clone());
            if ["del", "expired"].contains(&event.as_str()) {
                return event;
            }
        }
        String::new()
    })
    .await
    .unwrap_or_else(|_| panic!("the late hold never ended: {seen:?}"));
    // `set`: the string form a free lock is taken in (`lua/take.lua`); a hash write would
    // be an acquire through `acquire.lua`, which runs too.
    assert!(
        seen.iter()
            .any(|e| ["set", "hset", "hincrby"].contains(&e.as_str())),
        "the late acquire did not run: {seen:?}"
    );
    assert_eq!(ended, "del", "the late hold was left to expire: {seen:?}");
}

/// What the reconciliation bound rests on when the driver's connection is replaced (a
/// fact about Redis, not about this library): a request that reached the server on a
/// connection the client then closed still runs, and runs before a request the client
/// sends afterwards on a new connection, also while the server is stalled (a script
/// runs) with both unread. So a probe on the new connection cannot overtake the lost
/// request on one Redis; what remains is a request still in transit in the network when
/// the probe arrives (README, Limits). Plain TCP and RESP, no library code.
#[test]
fn a_request_on_a_closed_connection_runs_before_a_later_one_on_a_new_connection() {
    use std::io::{BufRead, BufReader, Write};
    use std::net::{Shutdown, TcpStream};

    fn resp(args: &[&str]) -> Vec<u8> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
        }
        out
    }
    fn line(reader: &mut BufReader<TcpStream>) -> String {
        let mut text = String::new();
        reader.read_line(&mut text).expect("a reply line");
        text.trim_end().to_owned()
    }
    /// Busy for 300 ms on Redis's clock (below `lua-time-limit`: nothing else is read).
    const STALL: &str = "local t = redis.call('TIME') local start = t[1] * 1e6 + t[2] \
        repeat local u = redis.call('TIME') until u[1] * 1e6 + u[2] - start > 300000 return 1";

    let server = RedisServer::start();
    let addr = server
        .url()
        .trim_start_matches("redis://")
        .trim_end_matches('/')
        .to_owned();
    let connect = || TcpStream::connect(&addr).expect("connect");
    let mut while_stalled = 0;
    for trial in 0..5 {
        let mut reader = BufReader::new(connect());
        reader
            .get_mut()
            .write_all(&resp(&["DEL", "k"]))
            .expect("send");
        line(&mut reader);
        let mut stall = BufReader::new(connect());
        let new = connect();
        let mut old = connect();
        stall
            .get_mut()
            .write_all(&resp(&["EVAL", STALL, "0"]))
            .expect("send");
        std::thread::sleep(Duration::from_millis(20));
        old.write_all(&resp(&["APPEND", "k", "a"])).expect("send");
        old.shutdown(Shutdown::Both)
            .expect("close the old connection");
        drop(old);
        let mut new = BufReader::new(new);
        new.get_mut()
            .write_all(&resp(&["APPEND", "k", "b"]))
            .expect("send");
        // Did the new request go out while the server was still stalled?
        stall.get_mut().set_nonblocking(true).expect("nonblocking");
        let mut peek = [0u8; 1];
        let stalled = matches!(
            stall.get_mut().peek(&mut peek),
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock
        );
        stall.get_mut().set_nonblocking(false).expect("blocking");
        assert_eq!(line(&mut stall), ":1", "trial {trial}: the stall");
        line(&mut new);
        reader
            .get_mut()
            .write_all(&resp(&["GET", "k"]))
            .expect("send");
        assert_eq!(line(&mut reader), "$2", "trial {trial}: both requests ran");
        let order = line(&mut reader);
        assert_eq!(
            order, "ab",
            "trial {trial} (sent while stalled: {stalled}): the order they ran in"
        );
        while_stalled += usize::from(stalled);
        println!(
            "trial {trial}: ran {order}, new request sent while the server stalled: {stalled}"
        );
    }
    assert!(
        while_stalled >= 3,
        "only {while_stalled} of 5 trials overlapped the stall"
    );
}
