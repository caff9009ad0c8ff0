//! The bad-input table: every rejected input gets a specific typed error, and Redis is
//! left exactly as it was (a snapshot of every key — type, `DUMP` payload and TTL — is
//! taken before and compared after).
//!
//! One `#[test]` per row, each against its own throw-away redis-server.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::RedisServer;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redis_locks::{Error, LockClient, LostReason, MAX_DURATION, MAX_NAME_LEN, MAX_OWNER_LEN};

const SEC: Duration = Duration::from_secs(1);

/// Every key of the current database: (type, DUMP payload, PTTL).
type Snapshot = BTreeMap<String, (String, Vec<u8>, i64)>;

async fn snapshot(conn: &mut MultiplexedConnection) -> Snapshot {
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query_async(conn).await.unwrap();
    let mut out = Snapshot::new();
    for key in keys {
        let kind: String = redis::cmd("TYPE")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let dump: Option<Vec<u8>> = redis::cmd("DUMP")
            .arg(&key)
            .query_async(conn)
            .await
            .unwrap();
        let pttl: i64 = conn.pttl(&key).await.unwrap();
        if let Some(dump) = dump {
            out.insert(key, (kind, dump, pttl));
        }
    }
    out
}

/// Same keys, types and values; a TTL may only have counted down (never been set,
/// extended or removed).
fn assert_untouched(before: &Snapshot, after: &Snapshot) {
    let keys = |s: &Snapshot| s.keys().cloned().collect::<Vec<_>>();
    assert_eq!(keys(before), keys(after), "the set of keys changed");
    for (key, (kind, dump, pttl)) in before {
        let (kind2, dump2, pttl2) = &after[key];
        assert_eq!(kind, kind2, "type of {key} changed");
        assert_eq!(dump, dump2, "value of {key} changed");
        if *pttl < 0 {
            assert_eq!(*pttl2, *pttl, "TTL of {key} changed from {pttl} to {pttl2}");
        } else {
            assert!(
                *pttl2 >= 0 && *pttl2 <= *pttl,
                "TTL of {key} was re-armed or removed: {pttl} -> {pttl2}"
            );
        }
    }
}

/// A server, a lock client on it, an inspection connection, and a snapshot taken after
/// some background data was written (so "untouched" is checked against a non-empty
/// database).
struct Fixture {
    server: RedisServer,
    client: LockClient,
    conn: MultiplexedConnection,
    before: Snapshot,
}

impl Fixture {
    async fn new() -> Self {
        let server = RedisServer::start();
        let client = server.client(30 * SEC).await;
        let mut conn = server.conn().await;
        // Unrelated data that must survive every case byte for byte.
        let _: () = conn.set("unrelated:string", "keep me").await.unwrap();
        let _: () = conn.hset("unrelated:hash", "f", "v").await.unwrap();
        let before = snapshot(&mut conn).await;
        Fixture {
            server,
            client,
            conn,
            before,
        }
    }

    /// Re-takes the baseline (after a case wrote its own setup keys).
    async fn rebase(&mut self) {
        self.before = snapshot(&mut self.conn).await;
    }

    async fn assert_untouched(&mut self) {
        let after = snapshot(&mut self.conn).await;
        assert_untouched(&self.before, &after);
    }
}

fn expect_invalid_name<T: std::fmt::Debug>(result: Result<T, Error>) {
    match result {
        Err(Error::InvalidName { .. }) => {}
        other => panic!("expected Error::InvalidName, got {other:?}"),
    }
}

fn expect_invalid_duration<T: std::fmt::Debug>(result: Result<T, Error>, what_expected: &str) {
    match result {
        Err(Error::InvalidDuration { what, .. }) => assert_eq!(what, what_expected),
        other => panic!("expected Error::InvalidDuration({what_expected}), got {other:?}"),
    }
}

fn expect_wrong_type<T: std::fmt::Debug>(result: Result<T, Error>, found_expected: &str) {
    match result {
        Err(Error::WrongType { found, .. }) => assert_eq!(found, found_expected),
        other => panic!("expected Error::WrongType({found_expected}), got {other:?}"),
    }
}

// ---- names -------------------------------------------------------------------------

#[tokio::test]
async fn empty_name_is_invalid_name() {
    let mut f = Fixture::new().await;
    expect_invalid_name(f.client.lock(""));
    f.assert_untouched().await;
}

#[tokio::test]
async fn huge_name_is_invalid_name() {
    let mut f = Fixture::new().await;
    expect_invalid_name(f.client.lock(&"n".repeat(MAX_NAME_LEN + 1)));
    expect_invalid_name(f.client.lock(&"n".repeat(1 << 20)));
    // The boundary itself is accepted (and does not touch Redis either).
    assert!(f.client.lock(&"n".repeat(MAX_NAME_LEN)).is_ok());
    f.assert_untouched().await;
}

#[tokio::test]
async fn name_with_braces_is_invalid_name() {
    let mut f = Fixture::new().await;
    expect_invalid_name(f.client.lock("a{b}"));
    expect_invalid_name(f.client.lock("{tag}"));
    expect_invalid_name(f.client.lock("only}"));
    f.assert_untouched().await;
}

#[tokio::test]
async fn name_with_control_characters_is_invalid_name() {
    let mut f = Fixture::new().await;
    expect_invalid_name(f.client.lock("line\nbreak"));
    expect_invalid_name(f.client.lock("nul\0byte"));
    f.assert_untouched().await;
}

// ---- durations ---------------------------------------------------------------------

#[tokio::test]
async fn zero_lease_is_invalid_duration() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("inputs").unwrap();
    expect_invalid_duration(lock.with_lease(Duration::ZERO), "lease");
    expect_invalid_duration(lock.with_lease(Duration::from_micros(999)), "lease");
    f.assert_untouched().await;
}

#[tokio::test]
async fn lease_of_u64_max_seconds_is_invalid_duration() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("inputs").unwrap();
    expect_invalid_duration(lock.with_lease(Duration::from_secs(u64::MAX)), "lease");
    expect_invalid_duration(lock.with_lease(Duration::MAX), "lease");
    f.assert_untouched().await;
}

#[tokio::test]
async fn lease_just_above_max_duration_is_invalid_and_max_itself_works() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("inputs").unwrap();
    expect_invalid_duration(
        lock.with_lease(MAX_DURATION + Duration::from_millis(1)),
        "lease",
    );
    f.assert_untouched().await;
    // The largest accepted lease really is accepted by Redis's PEXPIRE.
    let guard = lock
        .with_lease(MAX_DURATION)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let pttl: i64 = f.conn.pttl(lock.key()).await.unwrap();
    assert!(
        pttl > (MAX_DURATION - SEC).as_millis() as i64,
        "pttl {pttl}"
    );
    guard.release().await.unwrap();
    // Everything as before except the successful release's short-lived latch.
    let mut after = snapshot(&mut f.conn).await;
    after.retain(|key, _| !key.contains(":latch:"));
    assert_untouched(&f.before, &after);
}

#[tokio::test]
async fn wait_of_duration_max_is_invalid_duration() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("inputs").unwrap();
    let started = Instant::now();
    expect_invalid_duration(lock.acquire_timeout(Duration::MAX).await, "wait");
    expect_invalid_duration(
        lock.acquire_timeout(MAX_DURATION + Duration::from_millis(1))
            .await,
        "wait",
    );
    assert!(started.elapsed() < SEC, "rejected without waiting");
    f.assert_untouched().await;
}

// ---- keys that are not locks ---------------------------------------------------------

#[tokio::test]
async fn key_holding_a_string_is_wrong_type() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("as-string").unwrap();
    let _: () = f.conn.set(lock.key(), "payload").await.unwrap();
    f.rebase().await;
    expect_wrong_type(lock.acquire().await, "a string");
    expect_wrong_type(lock.try_acquire().await, "a string");
    expect_wrong_type(lock.acquire_timeout(SEC).await, "a string");
    expect_wrong_type(
        lock.with_owner("o").unwrap().unlock().await,
        "a value that is not a hash",
    );
    expect_wrong_type(lock.force_unlock().await, "a value that is not a hash");
    expect_wrong_type(lock.state().await, "a string");
    f.assert_untouched().await;
}

#[tokio::test]
async fn key_holding_a_list_is_wrong_type() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("as-list").unwrap();
    let _: () = f.conn.rpush(lock.key(), &["x", "y"]).await.unwrap();
    f.rebase().await;
    expect_wrong_type(lock.acquire().await, "a list");
    expect_wrong_type(lock.with_fencing().try_acquire().await, "a list");
    expect_wrong_type(
        lock.with_owner("o").unwrap().unlock().await,
        "a value that is not a hash",
    );
    expect_wrong_type(lock.force_unlock().await, "a value that is not a hash");
    f.assert_untouched().await;
}

#[tokio::test]
async fn key_holding_a_foreign_hash_without_ttl_is_wrong_type() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("as-hash").unwrap();
    let _: () = f.conn.hset(lock.key(), "field", "value").await.unwrap();
    f.rebase().await;
    expect_wrong_type(lock.acquire().await, "a hash without an expiry");
    expect_wrong_type(lock.try_acquire().await, "a hash without an expiry");
    expect_wrong_type(
        lock.with_lease(SEC).unwrap().acquire_timeout(SEC).await,
        "a hash without an expiry",
    );
    // The non-count field is reported when the state is read.
    expect_wrong_type(lock.state().await, "a hash with a non-count field");
    f.assert_untouched().await;
}

#[tokio::test]
async fn owner_field_that_is_not_a_count_is_wrong_type() {
    let mut f = Fixture::new().await;
    let lock = f
        .client
        .lock("bad-count")
        .unwrap()
        .with_owner("me")
        .unwrap();
    // A hold id, so the count is what is wrong (without one, the hash is refused for that).
    let _: () = f
        .conn
        .hset_multiple(lock.key(), &[("me", "many"), ("\u{1}h", "x.1")])
        .await
        .unwrap();
    let _: () = f.conn.pexpire(lock.key(), 60_000).await.unwrap();
    f.rebase().await;
    expect_wrong_type(
        lock.try_acquire().await,
        "a hash whose owner field is not a hold count",
    );
    f.assert_untouched().await;
}

// ---- releases that are not ours --------------------------------------------------------

#[tokio::test]
async fn release_twice_is_not_held() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("twice").unwrap();
    let guard = lock.acquire().await.unwrap();
    let guard_owner = guard.owner().to_owned();
    guard.release().await.unwrap();
    f.rebase().await; // includes the first release's latch
    // A guardless release needs an explicit owner; as that owner, it is NotHeld now.
    assert!(matches!(lock.unlock().await, Err(Error::InvalidConfig(_))));
    let as_owner = lock.with_owner(guard_owner).unwrap();
    match as_owner.unlock().await {
        Err(Error::NotHeld { name, owner }) => {
            assert_eq!(name, "twice");
            assert_eq!(Some(owner.as_str()), as_owner.owner());
        }
        other => panic!("expected NotHeld, got {other:?}"),
    }
    f.assert_untouched().await;
}

#[tokio::test]
async fn release_after_expiry_is_lock_lost_lease_elapsed() {
    let mut f = Fixture::new().await;
    let lock = f
        .client
        .lock("expired")
        .unwrap()
        .with_lease(Duration::from_millis(50))
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let exists: bool = f.conn.exists(lock.key()).await.unwrap();
    assert!(!exists, "the 50 ms lease did not expire");
    f.rebase().await;
    match guard.release().await {
        Err(Error::LockLost { reason, .. }) => assert_eq!(reason, LostReason::LeaseElapsed),
        other => panic!("expected LockLost(LeaseElapsed), got {other:?}"),
    }
    f.assert_untouched().await;
}

#[tokio::test]
async fn release_of_another_owners_lock_is_not_held_and_count_unchanged() {
    let mut f = Fixture::new().await;
    // A fixed lease: no watchdog renewal moves the TTL during the snapshot comparison.
    let lock = f
        .client
        .lock("theirs")
        .unwrap()
        .with_lease(60 * SEC)
        .unwrap();
    let first = lock.acquire().await.unwrap();
    let second = first.reenter().await.unwrap();
    let holder = first.owner().to_owned();
    f.rebase().await;
    let stranger = lock.with_owner("stranger").unwrap();
    assert!(matches!(
        stranger.unlock().await,
        Err(Error::NotHeld { .. })
    ));
    let other_client = f.server.client(30 * SEC).await;
    let other = other_client.lock("theirs").unwrap();
    // Without an explicit owner there is nobody to release for: a typed refusal.
    assert!(matches!(other.unlock().await, Err(Error::InvalidConfig(_))));
    let other = other.with_owner("somebody").unwrap();
    assert!(matches!(other.unlock().await, Err(Error::NotHeld { .. })));
    f.assert_untouched().await;
    assert_eq!(lock.state().await.unwrap().count_of(&holder), 2);
    second.release().await.unwrap();
    first.release().await.unwrap();
}

// ---- connections -------------------------------------------------------------------

#[tokio::test]
async fn acquire_while_redis_is_down_is_redis_error_without_hanging() {
    let mut server = RedisServer::start();
    let client = LockClient::builder(&server.url())
        .response_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_millis(500))
        .connect()
        .await
        .unwrap();
    let lock = client.lock("down").unwrap();
    server.kill();
    for attempt in 0..3 {
        let started = Instant::now();
        let result = lock.acquire().await;
        let took = started.elapsed();
        match result {
            // The error names the server it failed at.
            Err(err @ Error::Redis(_)) => assert!(
                err.to_string()
                    .contains(&format!("127.0.0.1:{}", server.port)),
                "{err}"
            ),
            other => panic!("attempt {attempt}: expected Error::Redis, got {other:?}"),
        }
        // Generous: one response timeout plus reconnect back-off, far from a hang.
        assert!(took < Duration::from_millis(2500), "took {took:?}");
        println!("redis down: acquire failed after {took:?}");
    }
    // Nothing was queued to land later: after a restart (empty), no lock appears.
    server.restart();
    tokio::time::sleep(SEC).await;
    let mut conn = server.conn().await;
    assert!(snapshot(&mut conn).await.is_empty());
}

#[tokio::test]
async fn wrong_password_is_connect_error() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let url = format!("redis://:wrong@127.0.0.1:{}/", server.port);
    match LockClient::connect(&url).await {
        Err(Error::Connect { addr, .. }) => assert!(addr.contains(&server.port.to_string())),
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    // The right password works, and the failed attempt wrote nothing.
    let good = format!("redis://:s3cret@127.0.0.1:{}/", server.port);
    let mut conn = redis::Client::open(good.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    assert!(snapshot(&mut conn).await.is_empty());
    let client = LockClient::connect(&good).await.unwrap();
    client
        .lock("pw")
        .unwrap()
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
}

#[tokio::test]
async fn wrong_database_index_is_connect_error() {
    let mut f = Fixture::new().await;
    let url = format!("redis://127.0.0.1:{}/99", f.server.port);
    match LockClient::connect(&url).await {
        Err(Error::Connect { .. }) => {}
        other => panic!("expected Error::Connect, got {other:?}"),
    }
    f.assert_untouched().await;
}

#[tokio::test]
async fn unparsable_url_is_invalid_url() {
    let mut f = Fixture::new().await;
    for url in [
        "not a url",
        "http://127.0.0.1:6379",
        "redis://127.0.0.1:notaport/",
    ] {
        match LockClient::connect(url).await {
            Err(Error::InvalidUrl(_)) => {}
            other => panic!("{url}: expected Error::InvalidUrl, got {other:?}"),
        }
    }
    f.assert_untouched().await;
}

// ---- client configuration -----------------------------------------------------------

#[tokio::test]
async fn watchdog_timeout_zero_is_invalid_duration() {
    let mut f = Fixture::new().await;
    let url = f.server.url();
    let result = LockClient::builder(&url)
        .watchdog_timeout(Duration::ZERO)
        .connect()
        .await;
    expect_invalid_duration(result, "watchdog timeout");
    // Below the 30 ms floor (renewals every third of it would be too tight).
    let result = LockClient::builder(&url)
        .watchdog_timeout(Duration::from_millis(29))
        .connect()
        .await;
    expect_invalid_duration(result, "watchdog timeout");
    f.assert_untouched().await;
}

#[tokio::test]
async fn zero_response_timeout_is_invalid_duration() {
    let mut f = Fixture::new().await;
    let result = LockClient::builder(&f.server.url())
        .response_timeout(Duration::ZERO)
        .connect()
        .await;
    expect_invalid_duration(result, "response timeout");
    f.assert_untouched().await;
}

#[tokio::test]
async fn empty_prefix_is_invalid_config() {
    let mut f = Fixture::new().await;
    let url = f.server.url();
    for prefix in ["", "a{b", "x".repeat(129).as_str()] {
        match LockClient::builder(&url).prefix(prefix).connect().await {
            Err(Error::InvalidConfig(_)) => {}
            other => panic!("prefix {prefix:?}: expected InvalidConfig, got {other:?}"),
        }
    }
    f.assert_untouched().await;
}

#[tokio::test]
async fn zero_renew_batch_is_invalid_config() {
    let mut f = Fixture::new().await;
    match LockClient::builder(&f.server.url())
        .renew_batch(0)
        .connect()
        .await
    {
        Err(Error::InvalidConfig(_)) => {}
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    f.assert_untouched().await;
}

#[tokio::test]
async fn empty_explicit_owner_is_invalid_name() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("owners").unwrap();
    expect_invalid_name(lock.with_owner(""));
    f.assert_untouched().await;
}

#[tokio::test]
async fn oversized_or_control_owner_is_invalid_name() {
    let mut f = Fixture::new().await;
    let lock = f.client.lock("owners").unwrap();
    expect_invalid_name(lock.with_owner("o".repeat(MAX_OWNER_LEN + 1)));
    expect_invalid_name(lock.with_owner("tab\there"));
    assert!(lock.with_owner("o".repeat(MAX_OWNER_LEN)).is_ok());
    f.assert_untouched().await;
}

// ---- first-day errors (issue #10) ------------------------------------------------------

/// A server that wants a password is a typed error at connect time, naming the server and
/// saying what Redis answered, not a protocol error at the first acquire.
#[tokio::test]
async fn a_missing_password_fails_at_connect_naming_the_server() {
    let server = RedisServer::start_with(&["--requirepass", "sesame"]);
    let addr = format!("127.0.0.1:{}", server.port);
    match LockClient::connect(&server.url()).await {
        Err(err @ Error::Connect { .. }) => {
            let Error::Connect { addr: named, .. } = &err else {
                unreachable!()
            };
            assert_eq!(named, &addr);
            let cause = std::error::Error::source(&err).map(|c| c.to_string());
            let cause = cause.unwrap_or_default();
            assert!(
                cause.contains("NOAUTH") || cause.to_lowercase().contains("auth"),
                "the cause should say what Redis answered: {cause}"
            );
        }
        Err(other) => panic!("expected Error::Connect, got {other:?}"),
        Ok(_) => panic!("connected without the password"),
    }
    let url = format!("redis://:sesame@{addr}/");
    let client = LockClient::connect(&url).await.expect("with the password");
    let guard = client.lock("pw").unwrap().acquire().await.unwrap();
    guard.release().await.unwrap();
}

/// A malformed URL: the message repeats it (password redacted) and names the accepted
/// forms.
#[tokio::test]
async fn a_bad_url_is_repeated_without_its_password() {
    match LockClient::connect("redis://user:hunter2@localhost:notaport/0").await {
        Err(Error::InvalidUrl(message)) => {
            assert!(!message.contains("hunter2"), "{message}");
            assert!(message.contains("redis://user:***@localhost"), "{message}");
            assert!(message.contains("accepted forms"), "{message}");
        }
        other => panic!("expected InvalidUrl, got {other:?}"),
    }
}

/// `prefix("app:")` means the prefix `app`, not `app::{name}`.
#[tokio::test]
async fn a_prefix_with_a_trailing_colon_gets_one_separator() {
    let server = RedisServer::start();
    let client = LockClient::builder(&server.url())
        .prefix("app:")
        .connect()
        .await
        .unwrap();
    assert_eq!(client.prefix(), "app");
    assert_eq!(client.lock("a").unwrap().key(), "app:{a}");
}

/// A lease with a fraction of a millisecond rounds up (Redis counts whole ms): never
/// shorter than asked.
#[tokio::test]
async fn a_fractional_lease_rounds_up() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let lock = client
        .lock("fraction")
        .unwrap()
        .with_lease(Duration::from_micros(60_000_900))
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    let pttl: i64 = conn.pttl(lock.key()).await.unwrap();
    // 60 000.9 ms is 60 001 ms; truncation would give at most 60 000.
    assert!(pttl > 59_000 && pttl <= 60_001, "pttl {pttl}");
    assert!(guard.remaining_lease() <= Duration::from_millis(60_001));
    guard.release().await.unwrap();
}

/// The timed try: `Some` when acquired within the wait, `None` when still held after it.
#[tokio::test]
async fn a_timed_try_returns_none_when_still_held() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("timed").unwrap();
    let held = lock.acquire().await.unwrap();
    let started = Instant::now();
    assert!(
        lock.try_acquire_for(Duration::from_millis(200))
            .await
            .unwrap()
            .is_none()
    );
    assert!(started.elapsed() >= Duration::from_millis(200));
    held.release().await.unwrap();
    let got = lock
        .try_acquire_for(Duration::from_millis(200))
        .await
        .unwrap();
    got.expect("free lock").release().await.unwrap();
    assert!(matches!(
        lock.try_acquire_for(Duration::MAX).await,
        Err(Error::InvalidDuration { what: "wait", .. })
    ));
}

/// `{:?}` of the public types fits on a line: what identifies them, no internals, no
/// scripts (they were printed twice, ~20 KB, flooding `#[instrument]` logs).
#[tokio::test]
async fn debug_output_is_one_short_line() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let lock = client.lock("dbg").unwrap().with_fencing();
    let guard = lock.acquire().await.unwrap();
    for (what, text) in [
        ("client", format!("{client:?}")),
        ("lock", format!("{lock:?}")),
        ("guard", format!("{guard:?}")),
    ] {
        println!("{what}: {text}");
        assert!(text.len() < 240, "{what}: {} bytes: {text}", text.len());
        assert!(
            !text.contains('\n') && !text.contains("redis.call"),
            "{text}"
        );
    }
    assert!(format!("{lock:?}").contains("redis-locks:{dbg}"));
    // The owner id is a secret: a fingerprint stands in for it (tests/owner_ids_hidden.rs).
    assert!(!format!("{guard:?}").contains(guard.owner()));
    assert!(format!("{guard:?}").contains("owner: #"));
    guard.release().await.unwrap();
}

/// The check interval: at least 10 ms, at most a third of the watchdog timeout.
#[tokio::test]
async fn check_interval_out_of_range_is_invalid_duration() {
    let server = RedisServer::start();
    for interval in [Duration::from_millis(5), Duration::from_secs(11)] {
        match LockClient::builder(&server.url())
            .watchdog_timeout(30 * SEC)
            .check_interval(interval)
            .connect()
            .await
        {
            Err(Error::InvalidDuration { what, .. }) => assert_eq!(what, "check interval"),
            other => panic!("{interval:?}: expected InvalidDuration, got {other:?}"),
        }
    }
}

/// `connect` outside a tokio runtime is a typed error, not a panic.
#[test]
fn connect_outside_a_runtime_is_invalid_config() {
    let mut connecting = std::pin::pin!(LockClient::connect("redis://127.0.0.1:1/"));
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match connecting.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Err(Error::InvalidConfig(message))) => {
            assert!(message.contains("tokio runtime"), "{message}")
        }
        other => panic!("expected InvalidConfig at once, got {other:?}"),
    }
}

/// A force-unlock of a kind whose keys hold something else (a user's own data under the
/// prefix) is `WrongType` and writes nothing.
#[tokio::test]
async fn force_unlock_of_foreign_keys_is_wrong_type_and_writes_nothing() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    for (key, kind) in [
        ("redis-locks:{foreign}:rw:read", "rw"),
        ("redis-locks:{foreign}:fair", "fair"),
        ("redis-locks:{foreign}:permits", "semaphore"),
    ] {
        let () = redis::cmd("SET")
            .arg(key)
            .arg("mine")
            .query_async(&mut conn)
            .await
            .unwrap();
        let result = match kind {
            "rw" => client
                .rw_lock("foreign")
                .unwrap()
                .force_unlock()
                .await
                .map(u64::from),
            "fair" => client
                .fair_lock("foreign")
                .unwrap()
                .force_unlock()
                .await
                .map(u64::from),
            _ => client.semaphore("foreign").unwrap().force_release().await,
        };
        assert!(
            matches!(result, Err(Error::WrongType { .. })),
            "{kind}: {result:?}"
        );
        let kept: String = redis::cmd("GET")
            .arg(key)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(kept, "mine", "{kind}");
    }
}

/// `rediss://` against a plain server: the TLS handshake is never answered, and the
/// timeout says why instead of only "no connection within ...".
#[cfg(feature = "tls")]
#[tokio::test]
async fn rediss_against_a_plain_server_says_so() {
    let server = RedisServer::start();
    let url = format!("rediss://127.0.0.1:{}/", server.port);
    let result = LockClient::builder(&url)
        .connect_timeout(Duration::from_millis(500))
        .connect()
        .await;
    let err = match result {
        Err(err @ Error::Connect { .. }) => err,
        other => panic!("expected Error::Connect, got {other:?}"),
    };
    let mut chain = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(s) = source {
        chain.push_str(": ");
        chain.push_str(&s.to_string());
        source = s.source();
    }
    assert!(chain.contains("TLS-enabled"), "{chain}");
}
