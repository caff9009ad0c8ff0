//! RedLock on 5 real local redis-servers (issue #13, section 4): exclusion across OS
//! processes with 5 and with 3 of 5 servers up, `NoQuorum` with 3 of 5 down, a server
//! killed and restarted (empty) under a held lock, slow and partitioned servers through
//! the fault proxy (and the lost signal when a quorum is lost), the validity of a fixed
//! lease, reentrancy (per guard and per explicit owner across handles), and bad input.
//!
//! Time bounds here are for liveness only (generous), never performance.

mod common;
#[allow(dead_code)]
#[path = "faults/proxy.rs"]
mod proxy;

use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{RedisServer, eventually};
use proxy::{FaultProxy, proxied_client, warm_up};
use redis::aio::MultiplexedConnection;
use redis_locks::{Error, Lock, LockClient, LostReason, RedGuard, RedLock};

const SEC: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);
const SERVERS: usize = 5;
const CHILD_ENV: &str = "REDIS_LOCKS_REDLOCK_CHILD";

// ---- helpers -------------------------------------------------------------------------

fn start_servers(n: usize) -> Vec<RedisServer> {
    (0..n).map(|_| RedisServer::start()).collect()
}

fn urls(servers: &[RedisServer]) -> Vec<String> {
    servers.iter().map(RedisServer::url).collect()
}

/// One client per URL, each with this watchdog timeout.
async fn clients_for(urls: &[String], watchdog: Duration) -> Vec<LockClient> {
    let mut clients = Vec::new();
    for url in urls {
        let client = LockClient::builder(url)
            .watchdog_timeout(watchdog)
            .connect()
            .await;
        clients.push(client.unwrap_or_else(|err| panic!("connect to {url}: {err:?}")));
    }
    clients
}

/// Runs `attempt` until its guard holds on every server. RedLock needs only a majority and
/// leaves out a server that answers late, by design; a test that needs every server's hold
/// retries the attempts that a machine slowed by load made so (giving back what they won).
async fn on_every_server<F, Fut>(mut attempt: F) -> RedGuard
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = RedGuard>,
{
    for _ in 0..50 {
        let guard = attempt().await;
        if guard.held_on() == SERVERS {
            return guard;
        }
        guard.release().await.unwrap();
    }
    panic!("50 attempts in a row left a server out");
}

/// The RedLock `name` over one lock per client.
fn redlock(clients: &[LockClient], name: &str) -> RedLock {
    RedLock::new(clients.iter().map(|c| c.lock(name).unwrap())).unwrap()
}

async fn conn_to(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// Every key on one server (test servers are private, so `KEYS *` is fine).
async fn keys_on(server: &RedisServer) -> Vec<String> {
    let mut conn = server.conn().await;
    redis::cmd("KEYS")
        .arg("*")
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// Waits (up to 5 s, for background give-backs) until none of `servers` has any key.
async fn assert_no_keys(servers: &[&RedisServer], context: &str) {
    let clean = eventually(5 * SEC, || async {
        for server in servers {
            if !keys_on(server).await.is_empty() {
                return false;
            }
        }
        true
    })
    .await;
    if !clean {
        let mut left = Vec::new();
        for server in servers {
            left.push((server.port, keys_on(server).await));
        }
        panic!("{context}: keys left behind: {left:?}");
    }
}

/// `PTTL` of the lock's key on one server.
async fn pttl(server: &RedisServer, key: &str) -> i64 {
    let mut conn = server.conn().await;
    redis::cmd("PTTL")
        .arg(key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

/// Which servers hold the lock's key.
async fn holding(servers: &[RedisServer], key: &str) -> Vec<bool> {
    let mut out = Vec::new();
    for server in servers {
        let mut conn = server.conn().await;
        let exists: bool = redis::cmd("EXISTS")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        out.push(exists);
    }
    out
}

/// An intruder must not get the RedLock in one attempt.
async fn assert_refused(intruder: &RedLock, context: &str) {
    if let Some(guard) = intruder.try_acquire().await.unwrap() {
        let held_on = guard.held_on();
        guard.release().await.unwrap();
        panic!("{context}: an intruder acquired the RedLock (held on {held_on})");
    }
    // A zero wait is one attempt too.
    if let Some(guard) = intruder.try_acquire_for(Duration::ZERO).await.unwrap() {
        let held_on = guard.held_on();
        guard.release().await.unwrap();
        panic!("{context}: an intruder's zero wait acquired the RedLock (held on {held_on})");
    }
}

fn counts(guard: &RedGuard) -> Vec<Option<u64>> {
    guard
        .holds()
        .iter()
        .map(|hold| hold.as_ref().map(|guard| guard.hold_count()))
        .collect()
}

// ---- 1, 2: exclusion across OS processes ---------------------------------------------

/// The body of a child process (this test binary re-executed with `CHILD_ENV` set):
/// connects to the 5 servers, says it is ready on the recorder (`INCR ready`), waits for
/// `go`, then takes the RedLock `rounds` times. Inside each section it counts holders on
/// the recorder (`INCR inside`); a count above 1 is a violation (`INCR violations`).
#[tokio::test]
async fn child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let (name, rounds, recorder) = (parts[0], parts[1].parse::<u32>().unwrap(), parts[2]);
    let server_urls: Vec<String> = parts[3..].iter().map(|s| s.to_string()).collect();
    assert_eq!(server_urls.len(), SERVERS);
    let clients = clients_for(&server_urls, SEC).await;
    let lock = redlock(&clients, name)
        .with_retry_delay(Duration::from_millis(50))
        .unwrap();
    let mut rec = conn_to(recorder).await;
    let _: i64 = redis::cmd("INCR")
        .arg("ready")
        .query_async(&mut rec)
        .await
        .unwrap();
    let deadline = Instant::now() + 30 * SEC;
    loop {
        let go: bool = redis::cmd("EXISTS")
            .arg("go")
            .query_async(&mut rec)
            .await
            .unwrap();
        if go {
            break;
        }
        assert!(Instant::now() < deadline, "never told to go");
        tokio::time::sleep(5 * MS).await;
    }
    for _ in 0..rounds {
        let guard = lock.acquire().await.unwrap();
        assert!(guard.held_on() >= lock.quorum(), "{guard:?}");
        let inside: i64 = redis::cmd("INCR")
            .arg("inside")
            .query_async(&mut rec)
            .await
            .unwrap();
        if inside > 1 {
            let _: i64 = redis::cmd("INCR")
                .arg("violations")
                .query_async(&mut rec)
                .await
                .unwrap();
        }
        let _: i64 = redis::cmd("INCR")
            .arg("sections")
            .query_async(&mut rec)
            .await
            .unwrap();
        tokio::time::sleep(2 * MS).await;
        let _: i64 = redis::cmd("DECR")
            .arg("inside")
            .query_async(&mut rec)
            .await
            .unwrap();
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

async fn get_i64(conn: &mut MultiplexedConnection, key: &str) -> Option<i64> {
    redis::cmd("GET").arg(key).query_async(conn).await.unwrap()
}

/// 4 processes, `rounds` sections each, over the 5 servers of which `kill` are killed
/// after the children connected and before they start. Returns the wall time of the
/// contention.
async fn processes_exclude_each_other(kill: &[usize], rounds: u32) -> Duration {
    const PROCESSES: usize = 4;
    let mut servers = start_servers(SERVERS);
    let recorder = RedisServer::start();
    let name = "jobs";
    let spec = format!(
        "{name} {rounds} {} {}",
        recorder.url(),
        urls(&servers).join(" ")
    );
    let mut children: Vec<_> = (0..PROCESSES).map(|_| spawn_child(spec.clone())).collect();
    let mut rec = recorder.conn().await;
    assert!(
        eventually(30 * SEC, || {
            let mut rec = rec.clone();
            async move { get_i64(&mut rec, "ready").await == Some(PROCESSES as i64) }
        })
        .await,
        "the children did not all connect"
    );
    for &i in kill {
        servers[i].kill();
    }
    let started = Instant::now();
    let _: () = redis::cmd("SET")
        .arg("go")
        .arg(1)
        .query_async(&mut rec)
        .await
        .unwrap();
    for child in &mut children {
        let status = tokio::time::timeout(60 * SEC, child.wait())
            .await
            .expect("a child finished within 60 s")
            .unwrap();
        assert!(status.success(), "a contending process failed: {status}");
    }
    let took = started.elapsed();
    assert_eq!(
        get_i64(&mut rec, "violations").await,
        None,
        "two processes were inside at once"
    );
    assert_eq!(
        get_i64(&mut rec, "sections").await,
        Some(i64::from(rounds) * PROCESSES as i64)
    );
    assert_eq!(get_i64(&mut rec, "inside").await, Some(0));
    let live: Vec<&RedisServer> = servers
        .iter()
        .enumerate()
        .filter(|(i, _)| !kill.contains(i))
        .map(|(_, s)| s)
        .collect();
    assert_no_keys(&live, "after the processes").await;
    took
}

/// 1. Four OS processes take the RedLock over 5 servers in a loop: never two inside.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_exclude_each_other_with_all_five_up() {
    let took = processes_exclude_each_other(&[], 15).await;
    eprintln!("4 processes x 15 sections on 5 of 5 servers: {took:?}");
}

/// 2. The same with 2 of the 5 servers killed before the contention starts: a quorum of 3
///    still works, and still excludes. (The children connect to all 5 first: a
///    `LockClient` cannot be connected to a server that is down.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_exclude_each_other_with_two_of_five_down() {
    let took = processes_exclude_each_other(&[1, 3], 10).await;
    eprintln!("4 processes x 10 sections on 3 of 5 servers: {took:?}");
}

// ---- 3: no quorum --------------------------------------------------------------------

fn assert_no_quorum(result: Result<Option<RedGuard>, Error>, context: &str) {
    match result {
        Err(Error::NoQuorum {
            servers,
            needed,
            failed,
            ..
        }) => {
            assert_eq!((servers, needed), (5, 3), "{context}");
            assert!(failed.len() >= 3, "{context}: {failed:?}");
        }
        other => panic!("{context}: expected NoQuorum, got {other:?}"),
    }
}

/// 3. With 3 of 5 servers down: `try_acquire`, `try_acquire_for` and `acquire` fail with
///    `NoQuorum` (`acquire` once the outage outlasted the lease), and nothing is left
///    held on the 2 live servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_of_five_down_is_no_quorum_and_leaves_nothing_held() {
    let mut servers = start_servers(SERVERS);
    let clients = clients_for(&urls(&servers), SEC).await;
    let lock = redlock(&clients, "report");
    assert_eq!(lock.quorum(), 3);
    for server in &mut servers[..3] {
        server.kill();
    }

    let t = Instant::now();
    assert_no_quorum(lock.try_acquire().await, "try_acquire");
    let try_took = t.elapsed();
    assert!(try_took < 10 * SEC, "try_acquire took {try_took:?}");

    let t = Instant::now();
    assert_no_quorum(
        lock.try_acquire_for(300 * MS).await,
        "try_acquire_for(300 ms)",
    );
    let try_for_took = t.elapsed();
    assert!(try_for_took >= 300 * MS, "gave up early: {try_for_took:?}");
    assert!(try_for_took < 10 * SEC, "{try_for_took:?}");

    let t = Instant::now();
    match lock.acquire().await {
        Err(Error::NoQuorum { failed, .. }) => assert!(failed.len() >= 3, "{failed:?}"),
        other => panic!("acquire: expected NoQuorum, got {other:?}"),
    }
    let acquire_took = t.elapsed();
    // It tries for longer than the lease (the watchdog timeout, 1 s), then gives up.
    assert!(
        acquire_took >= SEC,
        "gave up before the lease: {acquire_took:?}"
    );
    assert!(acquire_took < 10 * SEC, "{acquire_took:?}");

    let live: Vec<&RedisServer> = servers[3..].iter().collect();
    assert_no_keys(&live, "after NoQuorum").await;
    // The live servers' lock is free: a single lock there gets it at once.
    let single = clients[3].lock("report").unwrap();
    single
        .try_acquire()
        .await
        .unwrap()
        .unwrap()
        .release()
        .await
        .unwrap();
    eprintln!(
        "3 of 5 down: try_acquire {try_took:?}, try_acquire_for(300ms) {try_for_took:?}, \
         acquire {acquire_took:?}"
    );
}

// ---- 4: a server restarted under a held lock -----------------------------------------

/// 4. One server is killed and restarted (empty) while the lock is held: the guard stays
///    held on 4 of 5, `lost_holds()` counts the one loss once the watchdog sees it, no
///    second holder gets in (for longer than the lease), and the release gives back the
///    other 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_costs_one_hold_not_the_lock() {
    let mut servers = start_servers(SERVERS);
    let server_urls = urls(&servers);
    let lock = redlock(&clients_for(&server_urls, SEC).await, "ledger");
    let intruder = redlock(&clients_for(&server_urls, SEC).await, "ledger");
    let key = lock.locks()[0].key().to_owned();

    let guard = lock.acquire().await.unwrap();
    assert_eq!((guard.held_on(), guard.lost_holds()), (5, 0));
    assert!(!guard.is_lost());
    let token = guard.lost_token();

    let t = Instant::now();
    tokio::task::block_in_place(|| servers[2].restart());
    assert!(keys_on(&servers[2]).await.is_empty(), "restarted with data");
    assert!(
        eventually(10 * SEC, || async { guard.lost_holds() == 1 }).await,
        "the lost hold was never counted: {guard:?}"
    );
    let noticed = t.elapsed();
    assert_eq!(guard.held_on(), 4);
    assert!(!guard.is_lost() && !token.is_cancelled(), "{guard:?}");
    assert_eq!(guard.lost_reason(), None, "the RedLock is not lost");
    let hold = guard.holds()[2].as_ref().unwrap();
    assert!(hold.is_lost());
    assert_eq!(hold.lost_reason(), Some(LostReason::OwnerFieldGone));

    // No second holder, for longer than the lease (the 4 are renewed meanwhile).
    assert_refused(&intruder, "right after the restart").await;
    // Tried for 1.5 s in all (a wait may end a little early when the next attempt could
    // not finish within it: try again until the time has passed).
    let t = Instant::now();
    while t.elapsed() < 1500 * MS {
        let left = (1500 * MS).saturating_sub(t.elapsed());
        assert!(intruder.try_acquire_for(left).await.unwrap().is_none());
    }
    assert_eq!(
        holding(&servers, &key).await,
        [true, true, false, true, true],
        "the holds outside the restarted server are renewed"
    );
    assert!(!guard.is_lost() && guard.lost_holds() == 1, "{guard:?}");

    guard.release().await.unwrap();
    assert!(!token.is_cancelled(), "a release is not a loss");
    assert_no_keys(&servers.iter().collect::<Vec<_>>(), "after the release").await;
    // The restarted server works again.
    let next = on_every_server(|| async {
        intruder
            .try_acquire()
            .await
            .unwrap()
            .expect("free after release")
    })
    .await;
    next.release().await.unwrap();
    eprintln!("restart under a held lock: the lost hold was counted after {noticed:?}");
}

// ---- 5: slow and partitioned servers -------------------------------------------------

/// 5 servers, each behind its own fault proxy.
async fn proxied(servers: &[RedisServer]) -> Vec<FaultProxy> {
    let mut proxies = Vec::new();
    for server in servers {
        proxies.push(FaultProxy::start(server.port).await);
    }
    proxies
}

async fn proxied_clients(proxies: &[FaultProxy], response: Duration) -> Vec<LockClient> {
    let mut clients = Vec::new();
    for proxy in proxies {
        let client = proxied_client(proxy, SEC, response).await;
        warm_up(&client, None).await;
        clients.push(client);
    }
    clients
}

/// 5a. One slow server (300 ms each way, beyond the per-server limit of a tenth of the
///     lease) and one stalled server do not stop the acquisition on the other 3; the
///     guard stays held beyond the lease, and a hold the slow server granted too late is
///     given back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_stalled_servers_do_not_stop_the_acquisition() {
    let servers = start_servers(SERVERS);
    let proxies = proxied(&servers).await;
    let clients = proxied_clients(&proxies, SEC).await;
    let lock = redlock(&clients, "slow");
    let key = lock.locks()[0].key().to_owned();
    proxies[0].set_delay(300 * MS);
    proxies[1].stall(true);

    let t = Instant::now();
    let guard = lock
        .try_acquire()
        .await
        .unwrap()
        .expect("3 of 5 answered in time");
    let took = t.elapsed();
    assert!(took < 5 * SEC, "{took:?}");
    assert_eq!(guard.held_on(), 3, "{guard:?}");
    assert!(guard.holds()[0].is_none() && guard.holds()[1].is_none());
    assert!(guard.valid_until() > Instant::now());

    // The slow server ran the acquire late; that hold is given back, never kept.
    assert!(
        eventually(5 * SEC, || async { pttl(&servers[0], &key).await == -2 }).await,
        "the slow server's late hold was not given back"
    );
    // Held beyond the lease: the 3 holds are renewed.
    tokio::time::sleep(1500 * MS).await;
    assert!(!guard.is_lost(), "{guard:?}");
    assert_eq!(guard.lost_holds(), 0);
    assert_eq!(
        holding(&servers, &key).await,
        [false, false, true, true, true]
    );
    guard.release().await.unwrap();

    proxies[1].stall(false);
    proxies[0].set_delay(Duration::ZERO);
    assert_no_keys(&servers.iter().collect::<Vec<_>>(), "after the release").await;
    let again = on_every_server(|| async { lock.try_acquire().await.unwrap().unwrap() }).await;
    again.release().await.unwrap();
    eprintln!("a slow and a stalled server: acquired on 3 of 5 in {took:?}");
}

/// 5b. The holder is partitioned from 3 of 5 servers: its guard's `lost()` fires within
///     about the lease (its holds there could not be renewed), before anyone else can
///     get in; another client then acquires on those 3 servers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_from_a_majority_fires_lost_and_lets_another_in() {
    let servers = start_servers(SERVERS);
    let proxies = proxied(&servers).await;
    let holder = redlock(&proxied_clients(&proxies, 500 * MS).await, "part");
    let other = redlock(&clients_for(&urls(&servers), SEC).await, "part")
        .with_retry_delay(20 * MS)
        .unwrap();
    let key = holder.locks()[0].key().to_owned();

    let guard = on_every_server(|| async { holder.acquire().await.unwrap() }).await;
    let token = guard.lost_token();
    assert_refused(&other, "before the partition").await;

    let t0 = Instant::now();
    for proxy in &proxies[..3] {
        proxy.stall(true);
    }
    // The other side tries from the start of the partition; when it gets in, the holder
    // must already know it lost the lock.
    let contender = tokio::spawn({
        let other = other.clone();
        let token = token.clone();
        async move {
            let guard = other.acquire().await.unwrap();
            (t0.elapsed(), token.is_cancelled(), guard)
        }
    });
    tokio::time::timeout(10 * SEC, guard.lost())
        .await
        .expect("lost() fired within 10 s");
    let lost_after = t0.elapsed();
    assert!(guard.is_lost());
    assert!(guard.lost_holds() >= 3, "{guard:?}");
    assert_eq!(
        guard.lost_reason(),
        Some(LostReason::LeaseExpiredUnconfirmed)
    );

    let (got_after, holder_knew, theirs) = tokio::time::timeout(10 * SEC, contender)
        .await
        .expect("the other side got in within 10 s")
        .unwrap();
    assert!(
        holder_knew,
        "another client acquired ({got_after:?}) before the holder's lost() fired"
    );
    // The holder's 2 reachable holds are still its own; the other got exactly the 3.
    assert_eq!(theirs.held_on(), 3, "{theirs:?}");
    assert!(theirs.holds()[3].is_none() && theirs.holds()[4].is_none());

    // The holder's release gives back what it can, and says the lock had been lost.
    match guard.release().await {
        Err(Error::LockLost { .. }) => {}
        other => panic!("release of a lost RedLock: {other:?}"),
    }
    assert_eq!(
        holding(&servers, &key).await,
        [true, true, true, false, false]
    );
    for proxy in &proxies[..3] {
        proxy.stall(false);
    }
    // Late renewals from the holder, delivered now, must not disturb the new holder.
    tokio::time::sleep(300 * MS).await;
    assert!(!theirs.is_lost(), "{theirs:?}");
    theirs.release().await.unwrap();
    assert_no_keys(&servers.iter().collect::<Vec<_>>(), "after both").await;
    eprintln!("partition of 3 of 5: lost() after {lost_after:?}, other in after {got_after:?}");
}

// ---- 6: validity ---------------------------------------------------------------------

/// 6a. With a fixed lease, `valid_until` is before `start + lease` by at least the drift
///     (0.01 × lease + 2 ms), and before every server's key expires; the guard is lost
///     when the lease runs out (not before `valid_until`), after which another can acquire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_is_valid_for_less_than_the_lease_minus_the_drift() {
    let servers = start_servers(SERVERS);
    let server_urls = urls(&servers);
    let lease = 2 * SEC;
    let lock = redlock(&clients_for(&server_urls, SEC).await, "fixed")
        .with_lease(lease)
        .unwrap();
    let other = redlock(&clients_for(&server_urls, SEC).await, "fixed");
    let key = lock.locks()[0].key().to_owned();
    let drift = lease / 100 + 2 * MS;
    let mut conns = Vec::new();
    for server in &servers {
        conns.push(server.conn().await);
    }

    let mut start = Instant::now();
    let guard = on_every_server(|| {
        start = Instant::now();
        async { lock.try_acquire().await.unwrap().expect("free") }
    })
    .await;
    let acquired = Instant::now();
    assert!(
        guard
            .holds()
            .iter()
            .flatten()
            .all(|h| !h.is_watchdog_leased()),
        "fixed leases"
    );
    let valid_until = guard.valid_until();
    // `start` is taken just before the call; the acquire's own start is a few µs later,
    // which is all the 1 ms allows for (the algorithm's bound is its start + lease − drift).
    assert!(
        valid_until + drift <= start + lease + MS,
        "valid_until is {:?} after start; lease {lease:?}, drift {drift:?}",
        valid_until - start
    );
    assert!(valid_until > acquired, "no validity left");
    for (server, conn) in servers.iter().zip(&mut conns) {
        let asked = Instant::now();
        let left: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        assert!(left > 0 && left <= 2000, "PTTL {left}");
        // The server read the PTTL after `asked`, so the key expires no earlier than
        // `asked + left`: the lock must not be relied on after that.
        let expires_at_least = asked + Duration::from_millis(left as u64);
        assert!(
            valid_until <= expires_at_least,
            "valid_until is {:?} after server {}'s key expires",
            valid_until - expires_at_least,
            server.port
        );
    }
    assert_refused(&other, "within the lease").await;

    tokio::time::timeout(10 * SEC, guard.lost())
        .await
        .expect("lost() fired within 10 s");
    let lost_at = Instant::now();
    assert!(lost_at >= valid_until, "lost before valid_until");
    assert_eq!(guard.lost_reason(), Some(LostReason::LeaseElapsed));
    // The client gives up its belief before the keys expire (the drift margin), so wait
    // for every server's key to expire: otherwise a server whose key has not yet expired
    // refuses, and a majority of 4 is (rightly) enough.
    assert!(
        eventually(5 * SEC, || async {
            holding(&servers, &key).await == [false; 5]
        })
        .await,
        "the keys outlived their lease"
    );
    let theirs = other
        .try_acquire_for(2 * SEC)
        .await
        .unwrap()
        .expect("free after the lease");
    assert_eq!(theirs.held_on(), 5);
    assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
    assert_eq!(holding(&servers, &key).await, [true; 5], "theirs untouched");
    theirs.release().await.unwrap();
    assert_no_keys(&servers.iter().collect::<Vec<_>>(), "after the release").await;
    eprintln!(
        "fixed lease {lease:?}: acquired in {:?}, valid for {:?} from the start, lost after {:?}",
        acquired - start,
        valid_until - start,
        lost_at - start
    );
}

/// 6b. When the servers answer (within the per-server limit) but only after the lease
///     minus the drift has passed, no validity is left: no guard is returned, whatever
///     the outcome of each server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_guard_when_the_attempt_outlasts_the_lease() {
    let servers = start_servers(SERVERS);
    let proxies = proxied(&servers).await;
    let clients = proxied_clients(&proxies, SEC).await;
    // A 40 ms lease: the per-server limit is its floor of 50 ms; 20 ms each way make
    // every attempt take more than 40 ms − 2.4 ms of drift.
    let lock = redlock(&clients, "short")
        .with_lease(40 * MS)
        .unwrap()
        .with_retry_delay(5 * MS)
        .unwrap();
    for proxy in &proxies {
        proxy.set_delay(20 * MS);
    }
    match lock.try_acquire().await {
        Ok(None) | Err(Error::NoQuorum { .. }) => {}
        Ok(Some(guard)) => panic!(
            "a guard with no validity left: valid_until {:?} from now",
            guard.valid_until().checked_duration_since(Instant::now())
        ),
        Err(other) => panic!("{other:?}"),
    }
    match lock.try_acquire_for(300 * MS).await {
        Ok(None) | Err(Error::NoQuorum { .. }) => {}
        Ok(Some(guard)) => panic!("a guard with no validity left: {guard:?}"),
        Err(other) => panic!("{other:?}"),
    }
    for proxy in &proxies {
        proxy.set_delay(Duration::ZERO);
    }
    assert_no_keys(&servers.iter().collect::<Vec<_>>(), "after the attempts").await;
}

// ---- 7: reentrancy -------------------------------------------------------------------

/// 7a. `reenter` nests on every server (hold count 2 everywhere); an intruder stays out
///     until the outer release; every release gives back on every server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reenter_nests_on_every_server_and_release_gives_back_everywhere() {
    let servers = start_servers(SERVERS);
    let server_urls = urls(&servers);
    let lock = redlock(&clients_for(&server_urls, SEC).await, "nest");
    let intruder = redlock(&clients_for(&server_urls, SEC).await, "nest");
    let key = lock.locks()[0].key().to_owned();

    let outer = on_every_server(|| async { lock.acquire().await.unwrap() }).await;
    assert_eq!(counts(&outer), [Some(1); 5]);
    let inner = outer.reenter().await.unwrap();
    assert_eq!(counts(&inner), [Some(2); 5]);
    assert_eq!(inner.held_on(), 5);
    let innermost = inner.reenter().await.unwrap();
    assert_eq!(counts(&innermost), [Some(3); 5]);
    assert_refused(&intruder, "while nested").await;
    // Each server's count is the owner's, on every server.
    for member in lock.locks() {
        let state = member.state().await.unwrap();
        assert_eq!(state.holders.len(), 1, "{state:?}");
        assert_eq!(state.holders[0].1, 3, "{state:?}");
    }
    innermost.release().await.unwrap();
    inner.release().await.unwrap();
    assert_eq!(holding(&servers, &key).await, [true; 5]);
    assert_refused(&intruder, "after the inner releases").await;
    outer.release().await.unwrap();
    assert_no_keys(
        &servers.iter().collect::<Vec<_>>(),
        "after the outer release",
    )
    .await;
    let theirs = intruder.try_acquire().await.unwrap().expect("free");
    theirs.release().await.unwrap();
}

/// 7b. Two RedLocks on separate clients sharing an explicit owner re-enter each other;
///     other owners (none, or another explicit one) stay out until both released; no key
///     is left on any server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_explicit_owner_reenters_across_handles() {
    let servers = start_servers(SERVERS);
    let server_urls = urls(&servers);
    let a = redlock(&clients_for(&server_urls, SEC).await, "batch")
        .with_owner("batch-7")
        .unwrap();
    let b = redlock(&clients_for(&server_urls, SEC).await, "batch")
        .with_owner("batch-7")
        .unwrap();
    let intruder_clients = clients_for(&server_urls, SEC).await;
    let anonymous = redlock(&intruder_clients, "batch");
    let someone_else = anonymous.with_owner("batch-8").unwrap();

    let first = a.acquire().await.unwrap();
    let second = b
        .try_acquire()
        .await
        .unwrap()
        .expect("the same owner re-enters through another handle");
    assert_eq!(counts(&first), [Some(1); 5]);
    assert_eq!(counts(&second), [Some(2); 5]);
    assert_refused(&anonymous, "held by batch-7").await;
    assert_refused(&someone_else, "held by batch-7").await;
    for member in a.locks() {
        assert_eq!(member.state().await.unwrap().count_of("batch-7"), 2);
    }

    second.release().await.unwrap();
    assert!(!first.is_lost(), "{first:?}");
    assert_refused(&someone_else, "still held once by batch-7").await;
    first.release().await.unwrap();
    assert_no_keys(&servers.iter().collect::<Vec<_>>(), "after both releases").await;
    let theirs = someone_else.try_acquire().await.unwrap().expect("free");
    theirs.release().await.unwrap();
    assert_no_keys(&servers.iter().collect::<Vec<_>>(), "at the end").await;
}

/// 7c. `reenter` while 2 of 5 servers are partitioned re-enters the other 3 (a
///     majority) and no more; the re-entries sent into the partition, delivered once it
///     heals, do not leave a count behind: after both releases no key is left on any
///     server, long before the (10 s) lease could hide one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reenter_through_a_partition_leaves_no_count_behind() {
    let servers = start_servers(SERVERS);
    let proxies = proxied(&servers).await;
    let mut clients = Vec::new();
    for proxy in &proxies {
        let client = proxied_client(proxy, 10 * SEC, SEC).await;
        warm_up(&client, None).await;
        clients.push(client);
    }
    let lock = redlock(&clients, "nest-part");
    let outer = lock.try_acquire().await.unwrap().expect("free");
    proxies[0].stall(true);
    proxies[1].stall(true);
    let t = Instant::now();
    let inner = outer.reenter().await.unwrap();
    let took = t.elapsed();
    assert!(took < 10 * SEC, "{took:?}");
    assert_eq!(counts(&inner), [None, None, Some(2), Some(2), Some(2)]);
    assert_eq!(inner.held_on(), 3);
    proxies[0].stall(false);
    proxies[1].stall(false);
    tokio::time::sleep(300 * MS).await;
    for (i, member) in lock.locks().iter().enumerate() {
        let state = member.state().await.unwrap();
        let want = if i < 2 { 1 } else { 2 };
        assert_eq!(state.holders.len(), 1, "server {i}: {state:?}");
        assert_eq!(state.holders[0].1, want, "server {i}: {state:?}");
    }
    inner.release().await.unwrap();
    outer.release().await.unwrap();
    assert!(
        clean_within_a_second(&servers).await,
        "a count was left behind"
    );
    eprintln!("reenter with 2 of 5 partitioned (1 s response timeout): {took:?}");
}

/// Whether no server has a key, within 1 s.
async fn clean_within_a_second(servers: &[RedisServer]) -> bool {
    eventually(SEC, || async {
        for server in servers {
            if !keys_on(server).await.is_empty() {
                return false;
            }
        }
        true
    })
    .await
}

// ---- 8: bad input --------------------------------------------------------------------

fn is_invalid_config<T: std::fmt::Debug>(result: Result<T, Error>) -> bool {
    matches!(result, Err(Error::InvalidConfig(_)))
}

/// 8. An empty list, and the same server twice (one client twice, or two clients to the
///    same URL), are `InvalidConfig`; out-of-range durations are `InvalidDuration`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused() {
    let servers = start_servers(3);
    let server_urls = urls(&servers);
    let clients = clients_for(&server_urls, SEC).await;
    let again = clients_for(&server_urls[..1], SEC).await;

    assert!(is_invalid_config(RedLock::new(Vec::<Lock>::new())));
    let same_client_twice = [clients[0].lock("x").unwrap(), clients[0].lock("x").unwrap()];
    assert!(is_invalid_config(RedLock::new(same_client_twice)));
    let same_url_twice = [clients[0].lock("x").unwrap(), again[0].lock("x").unwrap()];
    assert!(is_invalid_config(RedLock::new(same_url_twice)));
    let repeated_among_others = [
        clients[0].lock("x").unwrap(),
        clients[1].lock("x").unwrap(),
        clients[2].lock("x").unwrap(),
        again[0].lock("x").unwrap(),
    ];
    assert!(is_invalid_config(RedLock::new(repeated_among_others)));

    let fine = redlock(&clients, "x");
    assert_eq!(fine.quorum(), 2);
    assert_eq!(redlock(&clients[..1], "x").quorum(), 1);
    assert_eq!(redlock(&clients[..2], "x").quorum(), 2);
    assert!(matches!(
        fine.clone().with_retry_delay(Duration::ZERO),
        Err(Error::InvalidDuration { .. })
    ));
    assert!(matches!(
        fine.with_lease(Duration::ZERO),
        Err(Error::InvalidDuration { .. })
    ));
    assert!(matches!(
        fine.with_owner(""),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        fine.try_acquire_for(Duration::from_secs(200 * 365 * 24 * 3600))
            .await,
        Err(Error::InvalidDuration { .. })
    ));
    // Nothing was taken by any of it.
    assert_no_keys(&servers.iter().collect::<Vec<_>>(), "after bad input").await;
}

/// 8b. The same server reached under two spellings of its address (`127.0.0.1` and
///     `localhost`) is the same server twice: it must not count twice towards the
///     majority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_server_under_another_address_is_refused() {
    let servers = start_servers(2);
    let numeric = LockClient::connect(&servers[0].url()).await.unwrap();
    let named = LockClient::connect(&format!("redis://localhost:{}/", servers[0].port))
        .await
        .unwrap();
    let other = LockClient::connect(&servers[1].url()).await.unwrap();
    let members = [
        numeric.lock("x").unwrap(),
        named.lock("x").unwrap(),
        other.lock("x").unwrap(),
    ];
    match RedLock::new(members) {
        Err(Error::InvalidConfig(_)) => {}
        Ok(lock) => {
            // What goes wrong: one server alone grants 2 of 3.
            let guard = lock.try_acquire().await.unwrap().unwrap();
            let held_on = guard.held_on();
            guard.release().await.unwrap();
            panic!("accepted; held on {held_on} of 3 entries over 2 servers");
        }
        Err(other) => panic!("{other:?}"),
    }
}

/// 8c. Two lock names on one server are that server twice too (the documented rule:
///     "the same server twice is an InvalidConfig: it would count twice towards the
///     majority").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_server_under_two_names_is_refused() {
    let servers = start_servers(2);
    let clients = clients_for(&urls(&servers), SEC).await;
    let members = [
        clients[0].lock("x").unwrap(),
        clients[0].lock("y").unwrap(),
        clients[1].lock("x").unwrap(),
    ];
    assert!(is_invalid_config(RedLock::new(members)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// An outage is measured from its start: a waiter that waited longer than its lease
/// behind a holder must not fail on a short blip (it did: the tolerance was counted from
/// the acquire's start).
async fn a_short_blip_after_a_long_wait_is_not_no_quorum() {
    let servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start()).collect();
    let mut holders = Vec::new();
    let mut waiters = Vec::new();
    for server in &servers {
        holders.push(server.client(10 * SEC).await);
        waiters.push(
            LockClient::builder(&server.url())
                .watchdog_timeout(SEC)
                .connect()
                .await
                .unwrap(),
        );
    }
    let red = |clients: &[LockClient]| {
        RedLock::new(clients.iter().map(|c| c.lock("outage").unwrap())).unwrap()
    };
    let held = red(&holders).acquire().await.unwrap();
    let waiter = red(&waiters);
    let waiting = tokio::spawn(async move { waiter.acquire().await.map(|g| g.held_on()) });
    // The waiter has waited longer than its lease (1 s, its outage tolerance) behind the
    // holder, with every server answering.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // A 300 ms blip on 2 of the 3 servers: much shorter than the tolerance.
    for server in &servers[..2] {
        let mut conn = server.conn().await;
        let _: () = redis::cmd("CLIENT")
            .arg(&["PAUSE", "300", "ALL"])
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    tokio::time::sleep(SEC).await;
    held.release().await.unwrap();
    let got = tokio::time::timeout(5 * SEC, waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(
        !matches!(got, Err(Error::NoQuorum { .. })),
        "a 300 ms blip failed an acquire with a 1 s outage tolerance: {got:?}"
    );
    assert!(got.is_ok(), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
/// Fewer members than a majority of `with_servers`: `NoQuorum` at once, not after a lease.
async fn fewer_members_than_a_majority_is_no_quorum_at_once() {
    let servers: Vec<RedisServer> = (0..2).map(|_| RedisServer::start()).collect();
    let mut clients = Vec::new();
    for server in &servers {
        clients.push(server.client(3 * SEC).await);
    }
    let lock = RedLock::new(clients.iter().map(|c| c.lock("few").unwrap()))
        .unwrap()
        .with_servers(5)
        .unwrap();
    let started = Instant::now();
    let got = lock.acquire().await;
    assert!(
        matches!(
            got,
            Err(Error::NoQuorum {
                servers: 5,
                needed: 3,
                ..
            })
        ),
        "{got:?}"
    );
    assert!(started.elapsed() < SEC, "took {:?}", started.elapsed());
}

/// An error is reported as itself, never turned into a loss (issue 23): with 3 of 5
/// servers refusing scripts (an ACL change), the holds are still there on those 3 and the
/// release says the servers' own error (NOPERM), not `LockLost`; once the ACL is back,
/// the RedLock's holds can still be told apart from a loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_refused_by_a_majority_reports_their_error_not_a_loss() {
    let servers = start_servers(SERVERS);
    let clients = clients_for(&urls(&servers), 30 * SEC).await;
    let lock = redlock(&clients, "refused-release")
        .with_lease(20 * SEC)
        .unwrap();
    let guard = on_every_server(|| async { lock.acquire().await.unwrap() }).await;
    for server in &servers[..3] {
        let mut conn = server.conn().await;
        let () = redis::cmd("ACL")
            .arg(&["SETUSER", "default", "-eval", "-evalsha"][..])
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let started = Instant::now();
    match guard.release().await {
        Err(Error::Redis(command)) => {
            assert!(
                command.to_string().to_lowercase().contains("noperm"),
                "{command}"
            );
        }
        other => panic!("expected the servers' NOPERM, got {other:?}"),
    }
    assert!(started.elapsed() < 30 * SEC, "the release did not end");
    // The refusing servers still hold their holds: nothing was lost.
    for server in &servers[..3] {
        assert!(
            !keys_on(server).await.is_empty(),
            "a refused server's hold vanished"
        );
    }
}

/// A dead member: a wait for a lock another client holds on the live majority ends by
/// its deadline (with `None`), not after the dead server's timeouts pile up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_dead_member_a_wait_ends_by_its_deadline() {
    let mut servers = start_servers(3);
    let clients = clients_for(&urls(&servers), 30 * SEC).await;
    let holder = redlock(&clients, "dead-member").acquire().await.unwrap();
    servers[2].kill();
    let other = clients_for(&urls(&servers[..2]), 30 * SEC).await;
    let mut locks: Vec<Lock> = other
        .iter()
        .map(|c| c.lock("dead-member").unwrap())
        .collect();
    locks.push(clients[2].lock("dead-member").unwrap());
    let waiter = RedLock::new(locks).unwrap();
    let wait = 800 * MS;
    let started = Instant::now();
    let got = waiter.try_acquire_for(wait).await;
    let took = started.elapsed();
    assert!(matches!(got, Ok(None)), "{got:?}");
    // Liveness, generously: the deadline plus one response timeout and a margin.
    assert!(took < wait + 5 * SEC, "the wait ended only after {took:?}");
    assert!(matches!(
        waiter.acquire_timeout(Duration::ZERO).await,
        Err(Error::Timeout { .. })
    ));
    drop(holder);
}

/// The RedLock's state and the guard's remaining capabilities (issue 23's table):
/// `is_locked` / `remaining_ttl` on a majority (a dead server counts for neither side,
/// and an undecided answer is the servers' error), `extend` of a fixed lease (valid_until
/// moves on; refused without a majority), `remaining_lease`, `detach`, and the scoped
/// `run` stopped when the lock is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_extend_detach_and_run() {
    let mut servers = start_servers(3);
    let clients = clients_for(&urls(&servers), 3 * SEC).await;
    let others = clients_for(&urls(&servers), 3 * SEC).await;
    let lock = redlock(&clients, "red-state");
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(lock.remaining_ttl().await.unwrap(), None);
    // Held on one server of three by someone else: not locked (no majority).
    let minority = others[0]
        .lock("red-state")
        .unwrap()
        .acquire()
        .await
        .unwrap();
    assert!(!lock.is_locked().await.unwrap());
    minority.release().await.unwrap();

    let fixed = lock.with_lease(2 * SEC).unwrap();
    let guard = fixed.acquire().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    let ttl = lock.remaining_ttl().await.unwrap().unwrap();
    assert!(ttl <= 2 * SEC && ttl > SEC, "{ttl:?}");
    let before = guard.valid_until();
    assert!(guard.remaining_lease() > SEC);
    guard.extend(20 * SEC).await.unwrap();
    assert!(
        guard.valid_until() > before + 10 * SEC,
        "valid_until did not move"
    );
    assert!(
        guard.remaining_lease() > 10 * SEC,
        "{:?}",
        guard.remaining_lease()
    );
    assert!(lock.remaining_ttl().await.unwrap().unwrap() > 10 * SEC);
    assert!(matches!(
        guard.extend(Duration::ZERO).await,
        Err(Error::InvalidDuration { .. })
    ));
    // One server dead: still locked on the majority, and extended on it.
    servers[2].kill();
    assert!(lock.is_locked().await.unwrap());
    guard.extend(30 * SEC).await.unwrap();
    // Two dead: the one answer left cannot decide; the servers' error says why.
    servers[1].kill();
    assert!(
        lock.is_locked().await.is_err(),
        "undecided must be an error"
    );
    let extended = guard.extend(40 * SEC).await;
    assert!(
        extended.is_err(),
        "extended without a majority: {extended:?}"
    );
    drop(guard);
    servers[1].restart();
    servers[2].restart();

    // detach: the holds stay until their leases end.
    let clients = clients_for(&urls(&servers), 3 * SEC).await;
    let lock = redlock(&clients, "red-detach").with_lease(SEC).unwrap();
    lock.acquire().await.unwrap().detach();
    assert!(
        lock.is_locked().await.unwrap(),
        "detach gave the holds back"
    );
    assert!(
        eventually(5 * SEC, || async { !lock.is_locked().await.unwrap() }).await,
        "the detached holds did not expire"
    );

    // run: the body's value; stopped with LockLost once a majority of holds is gone.
    let lock = redlock(&clients, "red-run");
    assert_eq!(lock.run(async |held| held.held_on()).await.unwrap(), 3);
    let operators: Vec<Lock> = clients.iter().map(|c| c.lock("red-run").unwrap()).collect();
    let stopped = lock
        .run(async |_held| {
            for operator in &operators[..2] {
                operator.force_unlock().await.unwrap();
            }
            tokio::time::sleep(30 * SEC).await;
            "finished"
        })
        .await;
    assert!(
        matches!(stopped, Err(Error::LockLost { .. })),
        "{stopped:?}"
    );
}
