//! What every kind's guard does alike (the one generic `Guard<K>`), tested once for every
//! kind: the plain lock, a read and a write of a read-write lock, the fair lock and a
//! semaphore permit. A real redis-server; faults through the in-process TCP proxy.
//!
//! * a release that Redis does not answer returns an error within a bounded time, and
//!   finishes in the background once Redis answers (the hold is freed long before its
//!   lease ends);
//! * a release cancelled after it was sent still gives the hold back;
//! * a detached hold stays in Redis until its lease ends, and is no longer tracked;
//! * every guard reports its hold alike, and tells its loss alike;
//! * an operator's force-unlock frees every kind's hold and its holder is told;
//! * one API shape: scoped `run`, `*_timeout`, `is_locked`/`remaining_ttl`, and
//!   `extend` of a fixed lease.

mod common;
#[allow(dead_code)]
#[path = "faults/proxy.rs"]
mod proxy;

use std::time::Duration;

use common::{RedisServer, eventually};
use proxy::{FaultProxy, proxied_client};
use redis_locks::{Error, Guard, GuardKind, LockClient};

const SEC: Duration = Duration::from_secs(1);
/// A lease no test waits out: a hold freed within a test was given back, not expired.
const LONG_LEASE: Duration = Duration::from_secs(60);
/// Bound on a single library call.
const STEP: Duration = Duration::from_secs(10);

/// One kind, as these tests use it.
trait Kind {
    type K: GuardKind;
    const LABEL: &'static str;
    /// Takes a hold of `name` (with `lease`, or the watchdog's when `None`).
    async fn take(client: &LockClient, name: &str, lease: Option<Duration>) -> Guard<Self::K>;
    /// Whether another owner can take what the hold excludes, right now (given back at
    /// once if so).
    async fn is_free(client: &LockClient, name: &str) -> bool;
    /// An operator's force-unlock of the kind: how many holds (permits) were live.
    async fn force_unlock(client: &LockClient, name: &str) -> u64;
    /// The kind's scoped use (`run`-style), with a body that returns 7.
    async fn run_seven(client: &LockClient, name: &str) -> Result<u32, Error>;
    /// The kind's `*_timeout` for what the hold excludes, given up at once.
    async fn excluded_timeout(client: &LockClient, name: &str) -> Result<(), Error>;
    /// The kind's `is_locked` and remaining time to live.
    async fn inspect(client: &LockClient, name: &str) -> (bool, Option<Duration>);
}

struct Plain;
struct Read;
struct Write;
struct Fair;
struct Permit;

impl Kind for Plain {
    type K = redis_locks::Lock;
    const LABEL: &'static str = "lock";
    async fn run_seven(client: &LockClient, name: &str) -> Result<u32, Error> {
        client.lock(name).unwrap().run(async |_| 7).await
    }
    async fn excluded_timeout(client: &LockClient, name: &str) -> Result<(), Error> {
        let lock = client.lock(name).unwrap();
        lock.acquire_timeout(Duration::ZERO).await.map(drop)
    }
    async fn inspect(client: &LockClient, name: &str) -> (bool, Option<Duration>) {
        let lock = client.lock(name).unwrap();
        (
            lock.is_locked().await.unwrap(),
            lock.remaining_ttl().await.unwrap(),
        )
    }
    async fn take(client: &LockClient, name: &str, lease: Option<Duration>) -> Guard<Self::K> {
        let mut lock = client.lock(name).unwrap();
        if let Some(lease) = lease {
            lock = lock.with_lease(lease).unwrap();
        }
        lock.acquire().await.unwrap()
    }
    async fn is_free(client: &LockClient, name: &str) -> bool {
        let taken = client.lock(name).unwrap().try_acquire().await.unwrap();
        given_back(taken).await
    }
    async fn force_unlock(client: &LockClient, name: &str) -> u64 {
        u64::from(client.lock(name).unwrap().force_unlock().await.unwrap())
    }
}

impl Kind for Read {
    type K = redis_locks::RwLock;
    const LABEL: &'static str = "read";
    async fn run_seven(client: &LockClient, name: &str) -> Result<u32, Error> {
        client.rw_lock(name).unwrap().run_read(async |_| 7).await
    }
    async fn excluded_timeout(client: &LockClient, name: &str) -> Result<(), Error> {
        let lock = client.rw_lock(name).unwrap();
        lock.write_timeout(Duration::from_millis(30))
            .await
            .map(drop)
    }
    async fn inspect(client: &LockClient, name: &str) -> (bool, Option<Duration>) {
        let lock = client.rw_lock(name).unwrap();
        (
            lock.is_locked().await.unwrap(),
            lock.remaining_ttl().await.unwrap(),
        )
    }
    async fn take(client: &LockClient, name: &str, lease: Option<Duration>) -> Guard<Self::K> {
        let mut lock = client.rw_lock(name).unwrap();
        if let Some(lease) = lease {
            lock = lock.with_lease(lease).unwrap();
        }
        lock.read().await.unwrap()
    }
    async fn is_free(client: &LockClient, name: &str) -> bool {
        // A write is what a read excludes.
        let taken = client.rw_lock(name).unwrap().try_write().await.unwrap();
        given_back(taken).await
    }
    async fn force_unlock(client: &LockClient, name: &str) -> u64 {
        u64::from(client.rw_lock(name).unwrap().force_unlock().await.unwrap())
    }
}

impl Kind for Write {
    type K = redis_locks::RwLock;
    const LABEL: &'static str = "write";
    async fn run_seven(client: &LockClient, name: &str) -> Result<u32, Error> {
        client.rw_lock(name).unwrap().run_write(async |_| 7).await
    }
    async fn excluded_timeout(client: &LockClient, name: &str) -> Result<(), Error> {
        let lock = client.rw_lock(name).unwrap();
        lock.read_timeout(Duration::ZERO).await.map(drop)
    }
    async fn inspect(client: &LockClient, name: &str) -> (bool, Option<Duration>) {
        let lock = client.rw_lock(name).unwrap();
        (
            lock.is_locked().await.unwrap(),
            lock.remaining_ttl().await.unwrap(),
        )
    }
    async fn take(client: &LockClient, name: &str, lease: Option<Duration>) -> Guard<Self::K> {
        let mut lock = client.rw_lock(name).unwrap();
        if let Some(lease) = lease {
            lock = lock.with_lease(lease).unwrap();
        }
        lock.write().await.unwrap()
    }
    async fn is_free(client: &LockClient, name: &str) -> bool {
        let taken = client.rw_lock(name).unwrap().try_read().await.unwrap();
        given_back(taken).await
    }
    async fn force_unlock(client: &LockClient, name: &str) -> u64 {
        u64::from(client.rw_lock(name).unwrap().force_unlock().await.unwrap())
    }
}

impl Kind for Fair {
    type K = redis_locks::FairLock;
    const LABEL: &'static str = "fair";
    async fn run_seven(client: &LockClient, name: &str) -> Result<u32, Error> {
        client.fair_lock(name).unwrap().run(async |_| 7).await
    }
    async fn excluded_timeout(client: &LockClient, name: &str) -> Result<(), Error> {
        let lock = client.fair_lock(name).unwrap();
        lock.acquire_timeout(Duration::from_millis(30))
            .await
            .map(drop)
    }
    async fn inspect(client: &LockClient, name: &str) -> (bool, Option<Duration>) {
        let lock = client.fair_lock(name).unwrap();
        (
            lock.is_locked().await.unwrap(),
            lock.remaining_ttl().await.unwrap(),
        )
    }
    async fn take(client: &LockClient, name: &str, lease: Option<Duration>) -> Guard<Self::K> {
        let mut lock = client.fair_lock(name).unwrap();
        if let Some(lease) = lease {
            lock = lock.with_lease(lease).unwrap();
        }
        lock.acquire().await.unwrap()
    }
    async fn is_free(client: &LockClient, name: &str) -> bool {
        let taken = client.fair_lock(name).unwrap().try_acquire().await.unwrap();
        given_back(taken).await
    }
    async fn force_unlock(client: &LockClient, name: &str) -> u64 {
        u64::from(
            client
                .fair_lock(name)
                .unwrap()
                .force_unlock()
                .await
                .unwrap(),
        )
    }
}

impl Kind for Permit {
    type K = redis_locks::Semaphore;
    const LABEL: &'static str = "semaphore";
    async fn run_seven(client: &LockClient, name: &str) -> Result<u32, Error> {
        let semaphore = client.semaphore(name).unwrap();
        semaphore.try_set_permits(1).await.unwrap();
        semaphore.run(1, async |_| 7).await
    }
    async fn excluded_timeout(client: &LockClient, name: &str) -> Result<(), Error> {
        let semaphore = client.semaphore(name).unwrap();
        semaphore.acquire_timeout(1, Duration::ZERO).await.map(drop)
    }
    async fn inspect(client: &LockClient, name: &str) -> (bool, Option<Duration>) {
        // A semaphore has no single time to live: permits in use stand for it.
        let state = client.semaphore(name).unwrap().state().await.unwrap();
        let in_use = state.in_use > 0;
        (in_use, in_use.then_some(Duration::from_secs(1)))
    }
    async fn take(client: &LockClient, name: &str, lease: Option<Duration>) -> Guard<Self::K> {
        let mut semaphore = client.semaphore(name).unwrap();
        semaphore.try_set_permits(1).await.unwrap();
        if let Some(lease) = lease {
            semaphore = semaphore.with_lease(lease).unwrap();
        }
        semaphore.acquire(1).await.unwrap()
    }
    async fn is_free(client: &LockClient, name: &str) -> bool {
        let taken = client
            .semaphore(name)
            .unwrap()
            .try_acquire(1)
            .await
            .unwrap();
        given_back(taken).await
    }
    async fn force_unlock(client: &LockClient, name: &str) -> u64 {
        client
            .semaphore(name)
            .unwrap()
            .force_release()
            .await
            .unwrap()
    }
}

/// Whether a hold was taken; gives it back.
async fn given_back<K: GuardKind>(taken: Option<Guard<K>>) -> bool {
    match taken {
        Some(guard) => {
            guard.release().await.unwrap();
            true
        }
        None => false,
    }
}

/// A server, a proxy in front of it, a client through the proxy (200 ms response
/// timeout) and a client straight to the server (to look).
async fn rig() -> (RedisServer, FaultProxy, LockClient, LockClient) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port).await;
    let client = proxied_client(&proxy, 3 * SEC, Duration::from_millis(200)).await;
    let direct = server.client(3 * SEC).await;
    (server, proxy, client, direct)
}

async fn release_outlives_an_unanswering_redis<T: Kind>() {
    let (_server, proxy, client, direct) = rig().await;
    let name = format!("unanswered-{}", T::LABEL);
    let guard = T::take(&client, &name, Some(LONG_LEASE)).await;
    proxy.stall(true);
    let released = tokio::time::timeout(STEP, guard.release())
        .await
        .unwrap_or_else(|_| panic!("{}: release did not return within {STEP:?}", T::LABEL));
    println!("{}: release with Redis stalled: {released:?}", T::LABEL);
    assert!(
        matches!(released, Err(Error::Redis(_))),
        "{}: {released:?}",
        T::LABEL
    );
    assert!(
        !T::is_free(&direct, &name).await,
        "{}: freed while stalled",
        T::LABEL
    );
    proxy.stall(false);
    tokio::time::timeout(STEP, client.flush()).await.unwrap();
    assert!(
        T::is_free(&direct, &name).await,
        "{}: the background release did not give the hold back",
        T::LABEL
    );
}

async fn a_cancelled_release_gives_the_hold_back<T: Kind>() {
    let (_server, proxy, client, direct) = rig().await;
    let name = format!("cancelled-{}", T::LABEL);
    let guard = T::take(&client, &name, Some(LONG_LEASE)).await;
    proxy.stall(true);
    let cancelled = tokio::time::timeout(Duration::from_millis(100), guard.release()).await;
    assert!(
        cancelled.is_err(),
        "{}: release returned while stalled",
        T::LABEL
    );
    proxy.stall(false);
    tokio::time::timeout(STEP, client.flush()).await.unwrap();
    assert!(
        T::is_free(&direct, &name).await,
        "{}: a cancelled release left the hold behind",
        T::LABEL
    );
}

async fn detach_leaves_the_hold_until_its_lease_ends<T: Kind>() {
    let (_server, _proxy, client, direct) = rig().await;
    let name = format!("detached-{}", T::LABEL);
    let guard = T::take(&client, &name, Some(SEC)).await;
    assert_eq!(client.held_count(), 1, "{}", T::LABEL);
    guard.detach();
    assert_eq!(client.held_count(), 0, "{}: still tracked", T::LABEL);
    client.flush().await;
    assert!(
        !T::is_free(&direct, &name).await,
        "{}: detach gave the hold back",
        T::LABEL
    );
    assert!(
        eventually(5 * SEC, || T::is_free(&direct, &name)).await,
        "{}: the detached hold outlived its lease",
        T::LABEL
    );
}

async fn every_guard_reports_and_loses_alike<T: Kind>() {
    let (server, _proxy, client, _direct) = rig().await;
    let name = format!("reports-{}", T::LABEL);
    let guard = T::take(&client, &name, None).await;
    assert_eq!(guard.name(), name);
    assert!(!guard.owner().is_empty() && !guard.hold_id().is_empty());
    assert!(guard.is_watchdog_leased());
    assert!(guard.remaining_lease() > Duration::ZERO);
    assert!(!guard.is_lost() && guard.lost_reason().is_none());
    let debug = format!("{guard:?}");
    assert!(!debug.contains('\n') && debug.contains(&name), "{debug}");
    let token = guard.lost_token();
    // An operator wipes the keyspace: every kind's guard is told.
    let mut conn = server.conn().await;
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    tokio::time::timeout(STEP, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("{}: loss not told", T::LABEL));
    assert!(token.is_cancelled() && guard.is_lost() && guard.lost_reason().is_some());
    let released = tokio::time::timeout(STEP, guard.release()).await.unwrap();
    assert!(
        matches!(released, Err(Error::LockLost { .. })),
        "{}: {released:?}",
        T::LABEL
    );
}

/// An operator's force-unlock: the hold is gone at once (another owner gets in), its
/// holder is told (the lost signal, and a release that says `LockLost`), and a second
/// force-unlock finds nothing.
async fn force_unlock_frees_the_hold_and_tells_its_holder<T: Kind>() {
    let (_server, _proxy, client, _direct) = rig().await;
    let name = format!("forced-{}", T::LABEL);
    let guard = T::take(&client, &name, None).await;
    assert!(!T::is_free(&client, &name).await);
    assert_eq!(T::force_unlock(&client, &name).await, 1, "{}", T::LABEL);
    assert!(T::is_free(&client, &name).await, "{}: still held", T::LABEL);
    tokio::time::timeout(STEP, guard.lost())
        .await
        .unwrap_or_else(|_| panic!("{}: loss not told", T::LABEL));
    assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
    assert_eq!(T::force_unlock(&client, &name).await, 0, "{}", T::LABEL);
}

/// One API shape: every kind has a scoped `run` (the body's result, the hold given
/// back), a `*_timeout` that fails with `Timeout` while the hold excludes it (zero and
/// short waits), and `is_locked` with a remaining time to live.
async fn every_kind_has_run_timeout_and_inspection<T: Kind>() {
    let (_server, _proxy, client, _direct) = rig().await;
    let name = format!("shape-{}", T::LABEL);
    assert_eq!(T::run_seven(&client, &name).await.unwrap(), 7);
    assert!(
        T::is_free(&client, &name).await,
        "{}: run left it held",
        T::LABEL
    );
    assert_eq!(
        T::inspect(&client, &name).await,
        (false, None),
        "{}",
        T::LABEL
    );
    let guard = T::take(&client, &name, None).await;
    match T::excluded_timeout(&client, &name).await {
        Err(Error::Timeout { name: named, .. }) => assert_eq!(named, name),
        other => panic!("{}: expected Timeout, got {other:?}", T::LABEL),
    }
    let (locked, ttl) = T::inspect(&client, &name).await;
    assert!(locked, "{}", T::LABEL);
    assert!(ttl.is_some_and(|ttl| ttl > Duration::ZERO), "{}", T::LABEL);
    guard.release().await.unwrap();
}

/// `extend` on every kind's guard: a fixed lease lengthened, in the guard's belief and in
/// Redis (the hold outlives its first lease); a lost hold refuses to be extended.
async fn extend_lengthens_a_fixed_lease<T: Kind>() {
    let (server, _proxy, client, _direct) = rig().await;
    let name = format!("extend-{}", T::LABEL);
    let guard = T::take(&client, &name, Some(SEC)).await;
    assert!(guard.remaining_lease() <= SEC);
    guard.extend(LONG_LEASE).await.unwrap();
    assert!(guard.remaining_lease() > SEC * 50, "{}", T::LABEL);
    let (_, ttl) = T::inspect(&client, &name).await;
    if T::LABEL != "semaphore" {
        assert!(
            ttl.is_some_and(|ttl| ttl > SEC * 50),
            "{}: {ttl:?}",
            T::LABEL
        );
    }
    // Past the first lease, the hold is still there.
    tokio::time::sleep(SEC + SEC / 2).await;
    assert!(
        !T::is_free(&client, &name).await,
        "{}: the extension did not hold",
        T::LABEL
    );
    assert!(!guard.is_lost());
    let mut conn = server.conn().await;
    let () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    assert!(
        matches!(guard.extend(LONG_LEASE).await, Err(Error::LockLost { .. })),
        "{}",
        T::LABEL
    );
    assert!(guard.is_lost());
}

macro_rules! for_every_kind {
    ($check:ident) => {
        mod $check {
            use super::*;
            #[tokio::test]
            async fn lock() {
                $check::<Plain>().await
            }
            #[tokio::test]
            async fn read() {
                $check::<Read>().await
            }
            #[tokio::test]
            async fn write() {
                $check::<Write>().await
            }
            #[tokio::test]
            async fn fair() {
                $check::<Fair>().await
            }
            #[tokio::test]
            async fn semaphore() {
                $check::<Permit>().await
            }
        }
    };
}

for_every_kind!(release_outlives_an_unanswering_redis);
for_every_kind!(a_cancelled_release_gives_the_hold_back);
for_every_kind!(detach_leaves_the_hold_until_its_lease_ends);
for_every_kind!(every_guard_reports_and_loses_alike);
for_every_kind!(force_unlock_frees_the_hold_and_tells_its_holder);
for_every_kind!(every_kind_has_run_timeout_and_inspection);
for_every_kind!(extend_lengthens_a_fixed_lease);
