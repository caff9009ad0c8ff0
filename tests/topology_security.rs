//! TLS and ACL users in every topology (issue #11), against real servers: a six-node
//! Redis Cluster and a Sentinel set (primary, replica, three sentinels) whose `default`
//! user is off, whose replicas and sentinels authenticate as an admin, and whose only
//! client user is a least-privilege `locks` user; then the same topologies and users
//! with every connection on TLS only (`port 0`, a private CA): clients, replication, the
//! cluster bus, and the sentinels' links to the data nodes and to each other.
//!
//! Each test acquires, re-enters, lets the watchdog renew a short lease, hands a lock
//! over to a waiter in another client by a pub/sub wake-up, force-unlocks, and checks that
//! the ACL refused nothing the library sent (`ACL LOG` empty on every data node); then
//! that wrong or missing credentials, and missing TLS roots, are `Error::Connect` at
//! connect time without the password in the message. Figures are printed
//! (`-- --nocapture`).

#![cfg(feature = "tls")]

mod common;

use std::time::{Duration, Instant};

use common::certs::{Certs, make_certs};
use common::eventually;
use common::topology::{SecureCluster, SecureSentinelSet, Security, TlsFiles};
use redis_locks::{Error, LockClient};

const SEC: Duration = Duration::from_secs(1);

const ADMIN: (&str, &str) = ("admin", "admin-pw-5e1f");
const USER: &str = "locks";
const PASS: &str = "locks-pw-8c2d";
const WRONG: &str = "wrong-pw-d00d";

/// The least-privilege rule for a cluster client with the default prefix (`redis-locks`),
/// found by removing one entry at a time from a working rule and running every operation
/// (`ACL LOG` shows what each removal breaks). It is the single-server rule of
/// `tests/common/acl.rs` with the cluster's commands in place of classic pub/sub and
/// `SELECT`, and without `+incr` (no script calls `INCR`): the cluster client asks
/// `CLUSTER SLOTS` for the slot map (and the watchdog once per tick); wake-ups are sharded
/// (`SSUBSCRIBE`/`SUNSUBSCRIBE`, the scripts' `SPUBLISH`). `+pubsub|shardnumsub` is only
/// for `Lock::waiting_clients`; `+ping` only keeps connect's check out of `ACL LOG` (a
/// refusal is tolerated); `+eval` runs a script a node does not have yet (fresh nodes
/// here, so it is exercised). Not needed: `+asking` (the library never sends `ASKING`),
/// `+readonly` (no reads from replicas), `+cluster|shards`; `+wait` only with
/// `min_replicas`.
const CLUSTER_RULE: &[&str] = &[
    "resetchannels",
    "~redis-locks:*",
    "&redis-locks:*",
    "-@all",
    "+ping",
    "+cluster|slots",
    "+evalsha",
    "+eval",
    "+ssubscribe",
    "+sunsubscribe",
    "+pubsub|shardnumsub",
    // Called by the scripts:
    "+type",
    "+get",
    "+set",
    "+del",
    "+pttl",
    "+pexpire",
    "+hget",
    "+hmget",
    "+hset",
    "+hsetnx",
    "+hincrby",
    "+hexists",
    "+time",
    "+hgetall",
    "+spublish",
];

/// The least-privilege rule for a client of a Sentinel-managed primary (database 0),
/// found the same way: the single-server rule plus `+role` (the library checks with
/// `ROLE` that the node the sentinels name is a primary), without `+incr`, and without
/// `+select`, which only a database other than 0 needs. The sentinels are asked without
/// credentials; the rule is the primary's (and the replica's, for after a failover).
const SENTINEL_RULE: &[&str] = &[
    "resetchannels",
    "~redis-locks:*",
    "&redis-locks:*",
    "-@all",
    "+ping",
    "+role",
    "+evalsha",
    "+eval",
    "+subscribe",
    "+unsubscribe",
    "+pubsub|numsub",
    // Called by the scripts:
    "+type",
    "+get",
    "+set",
    "+del",
    "+pttl",
    "+pexpire",
    "+hget",
    "+hmget",
    "+hset",
    "+hsetnx",
    "+hincrby",
    "+hexists",
    "+time",
    "+hgetall",
    "+publish",
];

fn security(rule: &[&str], tls: Option<&Certs>) -> Security {
    Security {
        admin: Some((ADMIN.0.into(), ADMIN.1.into())),
        data_conf: vec![format!("user {USER} on >{PASS} {}", rule.join(" "))],
        tls: tls.map(|certs| TlsFiles {
            cert: certs.path_buf("server.crt"),
            key: certs.path_buf("server.key"),
            ca: certs.path_buf("ca.crt"),
        }),
    }
}

fn creds() -> String {
    format!("{USER}:{PASS}@")
}

/// A cluster client with a 600 ms watchdog lease (and the test CA, when given).
async fn cluster_client(seeds: &[String], certs: Option<&Certs>) -> LockClient {
    let mut builder =
        LockClient::builder_cluster(seeds).watchdog_timeout(Duration::from_millis(600));
    if let Some(certs) = certs {
        builder = builder.tls_certificates(certs.ca_only());
    }
    builder
        .connect()
        .await
        .unwrap_or_else(|err| panic!("connect to the cluster via {seeds:?}: {}", chain(&err)))
}

/// A client of the Sentinel-managed primary with a 600 ms watchdog lease (and the test
/// CA, when given).
async fn sentinel_client(url: &str, certs: Option<&Certs>) -> LockClient {
    let mut builder = LockClient::builder(url).watchdog_timeout(Duration::from_millis(600));
    if let Some(certs) = certs {
        builder = builder.tls_certificates(certs.ca_only());
    }
    builder
        .connect()
        .await
        .unwrap_or_else(|err| panic!("connect through the sentinels: {}", chain(&err)))
}

/// An error and its sources, on one line.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Asserts that `result` is `Error::Connect` whose message (Display, sources, Debug)
/// does not contain `secret`; returns the message.
fn expect_connect_error(what: &str, result: Result<LockClient, Error>, secret: &str) -> String {
    match result {
        Err(err @ Error::Connect { .. }) => {
            let text = chain(&err);
            let debug = format!("{err:?}");
            assert!(
                !text.contains(secret) && !debug.contains(secret),
                "{what}: the error shows the password: {text} / {debug}"
            );
            println!("{what}: {text}");
            text
        }
        Err(other) => panic!("{what}: expected Error::Connect, got {other:?}"),
        Ok(client) => panic!("{what}: expected Error::Connect, connected: {client:?}"),
    }
}

/// What [`exercise`] measured.
struct Figures {
    first_acquire: Duration,
    renewals: u64,
    waiting_clients: u64,
    wake_up: Duration,
}

impl std::fmt::Display for Figures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "first acquire {:?}, {} renewals of a 600 ms lease in 1.5 s, {} waiting client(s) \
             seen, waiter woken {:?} after the release (lease 30 s)",
            self.first_acquire, self.renewals, self.waiting_clients, self.wake_up
        )
    }
}

/// Acquire (with fencing), re-enter, state; the watchdog renewing `holder`'s 600 ms lease
/// for 1.5 s; a waiter in `waiter` woken by the release of a 30 s-lease hold (so only the
/// wake-up, not the lease, can make it quick); force_unlock. `holder` must have a 600 ms
/// watchdog timeout.
async fn exercise(holder: &LockClient, waiter: &LockClient, name: &str) -> Figures {
    assert_eq!(holder.watchdog_timeout(), Duration::from_millis(600));
    let lock = holder.lock(name).unwrap();

    let started = Instant::now();
    let outer = lock.with_fencing().acquire().await.expect("acquire");
    let first_acquire = started.elapsed();
    assert!(outer.fencing_token().is_some(), "a fencing token");
    let inner = outer.reenter().await.expect("re-enter");
    assert_eq!(inner.hold_count(), 2);
    let state = lock.state().await.expect("state");
    assert_eq!(state.count_of(outer.owner()), 2, "{state:?}");
    assert_eq!(state.fence, outer.fencing_token(), "{state:?}");

    // The watchdog: a 600 ms lease is still held after 1.5 s only if it was renewed.
    let before = holder.watchdog_stats().renewed;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let renewals = holder.watchdog_stats().renewed - before;
    assert!(
        !outer.is_lost(),
        "the watchdog's renewal failed: {:?} ({:?})",
        outer.lost_reason(),
        holder.watchdog_stats()
    );
    assert!(renewals >= 2, "{:?}", holder.watchdog_stats());
    assert!(lock.remaining_ttl().await.expect("pttl").is_some());
    inner.release().await.expect("release the inner hold");
    outer.release().await.expect("release");
    assert!(!lock.is_locked().await.expect("is_locked"));

    // Hand-off: a 30 s lease, a waiter willing to wait 20 s: quick only by the wake-up.
    let held = lock
        .with_lease(30 * SEC)
        .unwrap()
        .acquire()
        .await
        .expect("acquire with a 30 s lease");
    let wlock = waiter.lock(name).unwrap();
    let waiting = tokio::spawn(async move {
        let guard = wlock.acquire_timeout(20 * SEC).await?;
        let at = Instant::now();
        guard.release().await?;
        Ok::<_, Error>(at)
    });
    assert!(
        eventually(5 * SEC, || async {
            lock.waiting_clients().await.unwrap_or(0) == 1
        })
        .await,
        "the waiter never subscribed (waiting_channels {})",
        waiter.waiting_channels()
    );
    let waiting_clients = lock.waiting_clients().await.expect("waiting_clients");
    let released = Instant::now();
    held.release().await.expect("release to the waiter");
    let woke = waiting
        .await
        .unwrap()
        .expect("the waiter got the lock and released it");
    let wake_up = woke.saturating_duration_since(released);
    assert!(
        wake_up < 2 * SEC,
        "woken after {wake_up:?}: not by the release's wake-up"
    );

    // force_unlock from the other client.
    let taken = lock.acquire().await.expect("acquire again");
    assert!(waiter.lock(name).unwrap().force_unlock().await.unwrap());
    assert!(matches!(taken.release().await, Err(Error::LockLost { .. })));
    assert!(!lock.is_locked().await.unwrap());

    Figures {
        first_acquire,
        renewals,
        waiting_clients,
        wake_up,
    }
}

/// Nothing the library sent was refused by the ACL.
fn assert_no_refusals(log: Vec<(u16, String)>) {
    assert!(
        log.is_empty(),
        "the ACL refused something the library sent: {log:#?}"
    );
}

/// The ACL is real: the same user under another prefix is refused (NOPERM), as a typed
/// error.
async fn assert_acl_is_enforced(client: LockClient) {
    match client.lock("x").unwrap().try_acquire().await {
        Err(Error::Redis(err)) => {
            let text = err.to_string();
            assert!(text.to_lowercase().contains("noperm"), "{text}");
            println!("prefix outside the ACL: {text}");
        }
        other => panic!("expected Error::Redis(NOPERM) outside the key pattern, got {other:?}"),
    }
}

/// Wrong-password attempts must show in the server's ACL LOG as `reason=auth` for the
/// user: the server, not something else, refused them.
fn assert_auth_refused(log: &[(u16, String)]) {
    assert!(
        log.iter().any(|(_, entry)| entry.contains("reason=auth")
            && entry.contains(&format!("username={USER}"))),
        "no auth failure of {USER} in ACL LOG: {log:#?}"
    );
}

// ---------------------------------------------------------------------------------------
// ACL
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acl_user_on_a_cluster() {
    let cluster = SecureCluster::start(&security(CLUSTER_RULE, None));
    println!(
        "ACL cluster: started in {:?}, nodes {:?}",
        cluster.startup_time(),
        cluster.ports()
    );
    println!("cluster client rule: {}", CLUSTER_RULE.join(" "));
    let seeds = cluster.seeds(&creds());

    let started = Instant::now();
    let holder = cluster_client(&seeds, None).await;
    let connect_time = started.elapsed();
    let waiter = cluster_client(&seeds, None).await;
    let figures = exercise(&holder, &waiter, "acl-cluster").await;
    println!("ACL cluster: connect {connect_time:?}, {figures}");
    assert_no_refusals(cluster.acl_log());

    assert_acl_is_enforced(
        LockClient::builder_cluster(&seeds)
            .prefix("elsewhere")
            .connect()
            .await
            .unwrap(),
    )
    .await;

    // The default user is off: no credentials, no connection.
    expect_connect_error(
        "cluster without credentials",
        LockClient::builder_cluster(cluster.seeds(""))
            .connect()
            .await,
        PASS,
    );
    cluster.reset_acl_log();
    let started = Instant::now();
    expect_connect_error(
        "cluster with a wrong password",
        LockClient::builder_cluster(cluster.seeds(&format!("{USER}:{WRONG}@")))
            .connect()
            .await,
        WRONG,
    );
    println!("wrong password refused in {:?}", started.elapsed());
    assert_auth_refused(&cluster.acl_log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acl_user_behind_sentinel() {
    let set = SecureSentinelSet::start(&security(SENTINEL_RULE, None));
    println!(
        "ACL sentinel set: started in {:?}, data {:?}, sentinels {:?}",
        set.startup_time(),
        set.data_ports(),
        set.sentinel_ports()
    );
    println!("sentinel client rule: {}", SENTINEL_RULE.join(" "));
    let url = set.url(&creds());

    let started = Instant::now();
    let holder = sentinel_client(&url, None).await;
    let connect_time = started.elapsed();
    let waiter = sentinel_client(&url, None).await;
    let figures = exercise(&holder, &waiter, "acl-sentinel").await;
    println!("ACL sentinel: connect {connect_time:?}, {figures}");
    assert_no_refusals(set.acl_log());

    assert_acl_is_enforced(
        LockClient::builder(&url)
            .prefix("elsewhere")
            .connect()
            .await
            .unwrap(),
    )
    .await;

    expect_connect_error(
        "sentinel without credentials",
        LockClient::builder(&set.url("")).connect().await,
        PASS,
    );
    for port in set.data_ports() {
        let _: () = set
            .query(port, redis::cmd("ACL").arg("LOG").arg("RESET"))
            .unwrap();
    }
    let started = Instant::now();
    expect_connect_error(
        "sentinel with a wrong password",
        LockClient::builder(&set.url(&format!("{USER}:{WRONG}@")))
            .connect()
            .await,
        WRONG,
    );
    println!("wrong password refused in {:?}", started.elapsed());
    assert_auth_refused(&set.acl_log());
}

// ---------------------------------------------------------------------------------------
// TLS (with the ACL user too)
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tls_on_a_cluster() {
    let certs = make_certs();
    let cluster = SecureCluster::start(&security(CLUSTER_RULE, Some(&certs)));
    println!(
        "TLS cluster: started in {:?}, TLS ports {:?}",
        cluster.startup_time(),
        cluster.ports()
    );
    // TLS only: no plain listener, and the slot map names the TLS ports.
    for port in cluster.ports() {
        let plain: Vec<String> = cluster
            .query(port, redis::cmd("CONFIG").arg("GET").arg("port"))
            .unwrap();
        assert_eq!(plain, vec!["port".to_owned(), "0".to_owned()], "{port}");
        let tls: Vec<String> = cluster
            .query(port, redis::cmd("CONFIG").arg("GET").arg("tls-cluster"))
            .unwrap();
        assert_eq!(tls[1], "yes");
    }
    let map = cluster.slot_map();
    assert!(
        map.iter().all(|r| cluster.ports().contains(&r.primary)),
        "{map:?}"
    );

    let seeds = cluster.seeds(&creds());
    assert!(seeds[0].starts_with("rediss://"), "{seeds:?}");
    let started = Instant::now();
    let holder = cluster_client(&seeds, Some(&certs)).await;
    let connect_time = started.elapsed();
    let waiter = cluster_client(&seeds, Some(&certs)).await;
    let figures = exercise(&holder, &waiter, "tls-cluster").await;
    println!("TLS cluster: connect {connect_time:?}, {figures}");
    assert_no_refusals(cluster.acl_log());

    // The system roots do not include the test CA.
    let started = Instant::now();
    let untrusted = expect_connect_error(
        "TLS cluster without tls_certificates",
        LockClient::builder_cluster(&seeds)
            .connect_timeout(2 * SEC)
            .connect()
            .await,
        PASS,
    );
    assert!(started.elapsed() < 5 * SEC);
    assert!(
        untrusted.to_lowercase().contains("certificate"),
        "not a certificate failure: {untrusted}"
    );
    // Plain text to TLS-only ports.
    let plain: Vec<String> = cluster
        .ports()
        .iter()
        .map(|p| format!("redis://{}127.0.0.1:{p}", creds()))
        .collect();
    let started = Instant::now();
    expect_connect_error(
        "plain text to the TLS cluster",
        LockClient::builder_cluster(&plain)
            .connect_timeout(2 * SEC)
            .response_timeout(SEC)
            .connect()
            .await,
        PASS,
    );
    assert!(started.elapsed() < 5 * SEC);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tls_behind_sentinel() {
    let certs = make_certs();
    let set = SecureSentinelSet::start(&security(SENTINEL_RULE, Some(&certs)));
    println!(
        "TLS sentinel set: started in {:?}, data {:?}, sentinels {:?}",
        set.startup_time(),
        set.data_ports(),
        set.sentinel_ports()
    );
    for port in set.data_ports() {
        let plain: Vec<String> = set
            .query(port, redis::cmd("CONFIG").arg("GET").arg("port"))
            .unwrap();
        assert_eq!(plain[1], "0", "{port}");
    }
    // The sentinels run with `port 0` too (they have no CONFIG command to show it, and
    // their INFO reports the TLS port as tcp_port): plain text to them fails below.

    let url = set.url(&creds());
    assert!(url.starts_with("rediss-sentinel://"), "{url}");
    let started = Instant::now();
    let holder = sentinel_client(&url, Some(&certs)).await;
    let connect_time = started.elapsed();
    let waiter = sentinel_client(&url, Some(&certs)).await;
    let figures = exercise(&holder, &waiter, "tls-sentinel").await;
    println!("TLS sentinel: connect {connect_time:?}, {figures}");
    assert_no_refusals(set.acl_log());

    let started = Instant::now();
    let untrusted = expect_connect_error(
        "TLS sentinels without tls_certificates",
        LockClient::builder(&url)
            .connect_timeout(2 * SEC)
            .connect()
            .await,
        PASS,
    );
    assert!(started.elapsed() < 5 * SEC);
    assert!(
        untrusted.to_lowercase().contains("certificate"),
        "not a certificate failure: {untrusted}"
    );
    let started = Instant::now();
    expect_connect_error(
        "plain text to the TLS sentinels",
        LockClient::builder(&set.url(&creds()).replacen("rediss-", "redis-", 1))
            .connect_timeout(2 * SEC)
            .response_timeout(SEC)
            .connect()
            .await,
        PASS,
    );
    assert!(started.elapsed() < 5 * SEC);
}
