//! Issue #10's audit: the points that had no test of their own, each through the public
//! API against a real redis-server.
//!
//! * item 1, as reported: a 1 s fixed lease nested in a watchdog hold of the same client
//!   and owner, held for 2.5 s, neither cuts nor loses the outer hold, and no loss is
//!   blamed on an unreachable Redis;
//! * item 1, the reverse through `guard.reenter()`: re-entering a fixed-lease hold never
//!   stretches it;
//! * item 3: a user that the ACL refuses (disabled) is an `Error::Connect` at connect,
//!   naming the server, with Redis's answer as its cause;
//! * item 5: `{:?}` of every public type is short, and a builder's does not print the
//!   password;
//! * item 7: `builder_from_client` reuses a redis-rs client's configuration (password,
//!   database); the `tracing` spans and events name the lock and the outcome;
//! * item 8: a fractional lease is sent rounded up (1.9 ms as 2 ms), checked on what the
//!   script received (`tests/bad_inputs.rs` checks a PTTL, which truncation also passes).
//!
//! Ignored (a bug, see its reason): a builder's `{:?}` prints Sentinel passwords.

mod common;

use std::time::{Duration, Instant};

use common::RedisServer;
use redis::AsyncCommands;
use redis_locks::{Error, LockClient, LostReason};

const SEC: Duration = Duration::from_secs(1);

async fn pttl(conn: &mut redis::aio::MultiplexedConnection, key: &str) -> i64 {
    conn.pttl(key).await.unwrap()
}

// ---- item 1: leases compose ------------------------------------------------------------

/// The report: `lock.acquire()` (watchdog), then a 1 s fixed-lease acquire inside it,
/// then 2.5 s of sleep. The nested acquire used to set the key's expiry to 1 s, the
/// renewal came too late, the outer guard was lost and `release()` blamed an unreachable
/// Redis (`LeaseExpiredUnconfirmed`). Now (same owner, so the inner acquire joins the
/// hold) the key lives on, the outer guard is not lost, and the releases give the lock
/// back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_lease_nested_in_a_watchdog_hold_neither_cuts_nor_loses_it() {
    let server = RedisServer::start();
    // A 3 s watchdog lease: renewed every second, so 2.5 s spans two renewals, and a
    // 1 s expiry set by the nested acquire would run out before the first one.
    let client = server.client(3 * SEC).await;
    let other = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let lock = client
        .lock("nested-lease")
        .unwrap()
        .with_owner("o")
        .unwrap();

    let outer = lock.acquire().await.unwrap();
    let inner = lock.with_lease(SEC).unwrap().acquire().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(
        inner.hold_id(),
        outer.hold_id(),
        "the nested acquire joins the hold"
    );
    let after_nested = pttl(&mut conn, lock.key()).await;
    assert!(
        after_nested > 2_000,
        "the nested 1 s lease cut the expiry to {after_nested} ms"
    );
    tokio::time::sleep(Duration::from_millis(2_500)).await;

    assert!(
        !outer.is_lost(),
        "the outer watchdog hold was lost: {:?}",
        outer.lost_reason()
    );
    assert!(lock.is_locked().await.unwrap(), "the lock expired");
    assert!(
        other
            .lock("nested-lease")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none(),
        "another owner got in while both holds lived"
    );
    // The inner guard's own lease (1 s) has run out: if it tells a loss, the loss says
    // what happened (its lease elapsed), never that Redis could not be reached.
    if let Some(reason) = inner.lost_reason() {
        assert_eq!(reason, LostReason::LeaseElapsed);
    }
    match inner.release().await {
        Ok(()) => {}
        Err(Error::LockLost { reason, .. }) => assert_eq!(reason, LostReason::LeaseElapsed),
        Err(other) => panic!("the inner release: {other:?}"),
    }
    assert!(!outer.is_lost(), "{:?}", outer.lost_reason());
    assert!(
        pttl(&mut conn, lock.key()).await > 1_000,
        "the inner release cut the watchdog hold"
    );
    outer.release().await.expect("the outer release");
    assert!(
        !lock.is_locked().await.unwrap(),
        "the lock outlived its last hold"
    );
    assert_eq!(
        client.watchdog_stats().lost,
        0,
        "{:?}",
        client.watchdog_stats()
    );
}

/// `guard.reenter()` on a fixed-lease hold takes the outer guard's remaining lease: it
/// never stretches the hold (a nested hold with the handle's full 1 s lease, taken
/// 500 ms in, would keep the key 500 ms past the outer lease). Both guards are told
/// `LeaseElapsed` at the outer lease's end, and the lock is free then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentering_a_fixed_lease_never_stretches_it() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let other = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    let lock = client
        .lock("fixed-reenter")
        .unwrap()
        .with_lease(SEC)
        .unwrap();

    let acquired = Instant::now();
    let outer = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let inner = outer.reenter().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    assert!(!inner.is_watchdog_leased());
    let left = pttl(&mut conn, lock.key()).await;
    assert!(
        left <= 1_000 - 450,
        "re-entry stretched the 1 s lease: {left} ms left 500 ms in"
    );
    assert!(
        inner.remaining_lease() <= outer.remaining_lease() + Duration::from_millis(5),
        "the nested guard believes in more than the outer hold: {:?} > {:?}",
        inner.remaining_lease(),
        outer.remaining_lease()
    );

    // Free at the outer lease's end, not half a second later.
    let intruder = other
        .lock("fixed-reenter")
        .unwrap()
        .acquire_timeout(3 * SEC)
        .await
        .unwrap();
    let freed = acquired.elapsed();
    assert!(
        freed < Duration::from_millis(1_400),
        "the lock freed only {freed:?} after the acquire"
    );
    assert_eq!(inner.lost_reason(), Some(LostReason::LeaseElapsed));
    assert_eq!(outer.lost_reason(), Some(LostReason::LeaseElapsed));
    for guard in [inner, outer] {
        match guard.release().await {
            Err(Error::LockLost { reason, .. }) => assert_eq!(reason, LostReason::LeaseElapsed),
            other => panic!("release after the lease ran out: {other:?}"),
        }
    }
    assert_eq!(
        other
            .lock("fixed-reenter")
            .unwrap()
            .state()
            .await
            .unwrap()
            .holders
            .len(),
        1,
        "a stale release touched the new holder"
    );
    intruder.release().await.unwrap();
}

// ---- item 8: a fractional lease ---------------------------------------------------------

/// The leases that the client sent to take `key`, read from `MONITOR` output (the
/// client's own commands, not the commands scripts run, logged as `lua`): the bare
/// `SET "<key>" "<value>" "NX" "PX" "<lease ms>"` of an uncontended acquire (lua/take.lua),
/// and the `EVALSHA`/`EVAL` calls of acquire.lua, of the form
/// `... "<key>" "<owner>" "<lease ms>" ...` (a release's third field is a hold id, not a
/// number).
fn leases_sent(monitor: &str, key: &str) -> Vec<String> {
    let quoted = format!("\"{key}\" \"");
    let client_lines = || monitor.lines().filter(|line| !line.contains(" lua]"));
    let scripts = client_lines()
        .filter(|line| line.contains("\"EVALSHA\"") || line.contains("\"EVAL\""))
        .filter_map(|line| {
            let rest = &line[line.find(&quoted)? + quoted.len()..];
            let mut fields = rest.split("\" \"");
            fields.next()?; // the owner
            Some(fields.next()?.trim_end_matches('"').to_owned())
        });
    let set_prefix = format!("\"SET\" {quoted}");
    let takes = client_lines()
        .filter(|line| line.contains(&set_prefix))
        .filter_map(|line| {
            let nx_px = "\"NX\" \"PX\" \"";
            let rest = &line[line.find(nx_px)? + nx_px.len()..];
            Some(rest.trim_end().trim_end_matches('"').to_owned())
        });
    scripts
        .chain(takes)
        .filter(|lease| lease.bytes().all(|b| b.is_ascii_digit()))
        .collect()
}

/// Durations are whole milliseconds in Redis and a fraction rounds up: a 1.9 ms lease is
/// sent as 2 ms (it was 1 ms), 60 000.9 ms as 60 001. Read from what the acquire sent
/// (`MONITOR`: an uncontended acquire is the bare `SET NX PX`), which the key's PTTL cannot
/// show (time passes before it is read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fractional_lease_is_sent_rounded_up() {
    use std::io::{Read, Write};
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut monitor = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    monitor.write_all(b"MONITOR\r\n").unwrap();
    monitor
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let mut buf = [0u8; 65536];
        let deadline = Instant::now() + 3 * SEC;
        while Instant::now() < deadline {
            match monitor.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => text.extend_from_slice(&buf[..n]),
                Err(_) => {}
            }
        }
        String::from_utf8_lossy(&text).into_owned()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    for (name, lease) in [
        ("frac-short", Duration::from_micros(1_900)),
        ("frac-long", Duration::from_micros(60_000_900)),
    ] {
        let lock = client.lock(name).unwrap().with_lease(lease).unwrap();
        let guard = lock.try_acquire().await.unwrap().expect("free");
        let _ = guard.release().await; // the 2 ms one may have run out: LockLost
    }
    let text = reader.join().unwrap();
    let short = leases_sent(&text, "redis-locks:{frac-short}");
    let long = leases_sent(&text, "redis-locks:{frac-long}");
    assert!(
        !short.is_empty() && short.iter().all(|ms| ms == "2"),
        "1.9 ms sent as {short:?}"
    );
    assert!(
        !long.is_empty() && long.iter().all(|ms| ms == "60001"),
        "60 000.9 ms sent as {long:?}"
    );
}

// ---- item 3: connect errors ------------------------------------------------------------

/// A user the ACL refuses (disabled, or a wrong password for an ACL user) fails at
/// connect with `Error::Connect` naming the server; the cause is Redis's answer.
#[tokio::test]
async fn a_user_the_acl_refuses_fails_at_connect_naming_the_server() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let _: () = redis::cmd("ACL")
        .arg(&["SETUSER", "disabled", "off", ">pw", "~*", "&*", "+@all"])
        .query_async(&mut admin)
        .await
        .unwrap();
    let addr = format!("127.0.0.1:{}", server.port);
    for url in [
        format!("redis://disabled:pw@{addr}/"),
        format!("redis://nobody:pw@{addr}/"),
    ] {
        match tokio::time::timeout(10 * SEC, LockClient::connect(&url))
            .await
            .expect("connect hung")
        {
            Err(err @ Error::Connect { .. }) => {
                let Error::Connect { addr: named, .. } = &err else {
                    unreachable!()
                };
                assert_eq!(named, &addr);
                // redis-rs reports Redis's WRONGPASS as its AuthenticationFailed kind
                // (without the server's words).
                let cause = std::error::Error::source(&err)
                    .map(|cause| cause.to_string())
                    .unwrap_or_default();
                assert!(
                    cause.to_lowercase().contains("auth"),
                    "the cause should say the authentication failed: {cause}"
                );
                assert!(!err.to_string().contains("pw@"), "password in {err}");
            }
            other => panic!("{url}: expected Error::Connect, got {other:?}"),
        }
    }
}

// ---- item 5: Debug ---------------------------------------------------------------------

fn short(what: &str, text: &str) {
    println!("{what}: {text}");
    assert!(text.len() < 300, "{what}: {} bytes: {text}", text.len());
    assert!(
        !text.contains('\n') && !text.contains("redis.call"),
        "{what}: {text}"
    );
}

/// Every public type's `{:?}` fits on a line (the guard, lock and client are checked in
/// `tests/bad_inputs.rs`): the semaphore, its guard and state, the latch, the lock's
/// state, the watchdog's stats, errors, and the builder, whose output must not carry the
/// password from the URL.
#[tokio::test]
async fn debug_output_of_every_public_type_is_short() {
    let server = RedisServer::start_with(&["--requirepass", "hunter2-secret"]);
    let url = format!("redis://:hunter2-secret@127.0.0.1:{}/", server.port);
    let builder = LockClient::builder(&url).watchdog_timeout(30 * SEC);
    let text = format!("{builder:?}");
    println!("builder: {text}");
    assert!(
        !text.contains("hunter2-secret"),
        "the builder's Debug prints the password: {text}"
    );
    let client = builder.connect().await.unwrap();
    short("client", &format!("{client:?}"));
    assert!(!format!("{client:?}").contains("hunter2-secret"));

    let semaphore = client.semaphore("dbg-sem").unwrap();
    semaphore.set_permits(2).await.unwrap();
    let permit = semaphore.acquire(1).await.unwrap();
    short("semaphore", &format!("{semaphore:?}"));
    short("semaphore guard", &format!("{permit:?}"));
    short(
        "semaphore state",
        &format!("{:?}", semaphore.state().await.unwrap()),
    );
    permit.release().await.unwrap();

    let latch = client.latch("dbg-latch").unwrap();
    latch.try_set_count(1).await.unwrap();
    short("latch", &format!("{latch:?}"));
    latch.delete().await.unwrap();

    let lock = client.lock("dbg-lock").unwrap();
    let guard = lock.acquire().await.unwrap();
    short("lock state", &format!("{:?}", lock.state().await.unwrap()));
    short("watchdog stats", &format!("{:?}", client.watchdog_stats()));
    guard.release().await.unwrap();

    let wrong = lock.with_lease(Duration::ZERO).unwrap_err();
    short("error", &format!("{wrong:?}"));
    let name = client.lock("").unwrap_err();
    short("error", &format!("{name:?}"));
}

/// The blocking API's types too.
#[cfg(feature = "blocking")]
#[test]
fn debug_output_of_the_blocking_types_is_short() {
    let server = RedisServer::start();
    let client = redis_locks::blocking::LockClient::connect(&server.url()).unwrap();
    let lock = client.lock("dbg-blocking").unwrap();
    let guard = lock.acquire().unwrap();
    short("blocking client", &format!("{client:?}"));
    short("blocking lock", &format!("{lock:?}"));
    short("blocking guard", &format!("{guard:?}"));
    guard.release().unwrap();
}

// ---- item 7: reuse of a redis-rs configuration -----------------------------------------

/// `builder_from_client` takes a `redis::Client` as configured by the caller: its
/// password and database are the ones used (the lock lands in database 2), and a client
/// with a wrong password is an `Error::Connect` at connect.
#[tokio::test]
async fn builder_from_client_reuses_the_connection_configuration() {
    let server = RedisServer::start_with(&["--requirepass", "s3cret"]);
    let addr = format!("127.0.0.1:{}", server.port);
    let configured = redis::Client::open(format!("redis://:s3cret@{addr}/2")).unwrap();
    let client = LockClient::builder_from_client(configured)
        .prefix("reused")
        .connect()
        .await
        .unwrap();
    let lock = client.lock("configured").unwrap();
    let guard = lock.acquire().await.unwrap();
    let mut db2 = redis::Client::open(format!("redis://:s3cret@{addr}/2"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let in_db2: bool = db2.exists("reused:{configured}").await.unwrap();
    assert!(in_db2, "the lock is not in the configured database");
    let mut db0 = redis::Client::open(format!("redis://:s3cret@{addr}/0"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let in_db0: bool = db0.exists("reused:{configured}").await.unwrap();
    assert!(!in_db0);
    assert_eq!(lock.channel(), "reused:{configured}:db2:released");
    guard.release().await.unwrap();

    let wrong = redis::Client::open(format!("redis://:nope@{addr}/2")).unwrap();
    match LockClient::builder_from_client(wrong).connect().await {
        Err(Error::Connect { addr: named, .. }) => assert_eq!(named, addr),
        other => panic!("expected Error::Connect, got {other:?}"),
    }
}

// ---- item 7: tracing -------------------------------------------------------------------

mod capture {
    //! A minimal `tracing` subscriber that records span names with their fields, and
    //! events with their level and fields, as text.

    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    #[derive(Default)]
    pub struct Records {
        pub spans: Mutex<Vec<String>>,
        pub events: Mutex<Vec<String>>,
        next: AtomicU64,
    }

    #[derive(Clone, Default)]
    pub struct Capture(pub Arc<Records>);

    struct Fields(String);

    impl Visit for Fields {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!(" {}={:?}", field.name(), value));
        }
        fn record_str(&mut self, field: &Field, value: &str) {
            self.0.push_str(&format!(" {}={}", field.name(), value));
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
            Some(tracing::level_filters::LevelFilter::TRACE)
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            let mut fields = Fields(span.metadata().name().to_owned());
            span.record(&mut fields);
            self.0.spans.lock().unwrap().push(fields.0);
            Id::from_u64(self.0.next.fetch_add(1, Ordering::Relaxed) + 1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut fields = Fields(event.metadata().level().to_string());
            event.record(&mut fields);
            self.0.events.lock().unwrap().push(fields.0);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}

/// The `tracing` output the README promises: spans `redis_locks::acquire` and
/// `redis_locks::release` with the lock's name; an event when an acquire ends (wait
/// time and outcome: acquired, timeout), when a hold ends (released), per watchdog tick,
/// and a warning per lost lock (key, owner, reason). Everything runs on this test's
/// thread (current-thread runtime), where the capturing subscriber is the default. It
/// runs in a process of its own: `tracing` caches per call site whether anyone is
/// interested, and another test's thread hitting a call site first (with no subscriber
/// of its own) races that cache.
#[tokio::test]
async fn tracing_spans_and_events_name_the_lock_and_the_outcome() {
    let out = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "helper_tracing_spans_and_events",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "the helper failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the helper did not run: {}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[tokio::test]
#[ignore = "helper process for tracing_spans_and_events_name_the_lock_and_the_outcome"]
async fn helper_tracing_spans_and_events() {
    let capture = capture::Capture::default();
    let records = capture.0.clone();
    let _default = tracing::subscriber::set_default(capture);

    let server = RedisServer::start();
    // Ticks every 100 ms on a 3 s lease: a machine slowed by load cannot lose the hold
    // that the release below must give back.
    let client = server
        .client_renewing(3 * SEC, Duration::from_millis(100))
        .await;
    let lock = client.lock("traced").unwrap();
    let guard = lock.acquire().await.unwrap();
    let timed_out = lock.acquire_timeout(Duration::from_millis(100)).await;
    assert!(
        matches!(timed_out, Err(Error::Timeout { .. })),
        "{timed_out:?}"
    );
    tokio::time::sleep(Duration::from_millis(400)).await; // a few watchdog ticks
    guard.release().await.unwrap();
    let lost = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    tokio::time::timeout(3 * SEC, lost.lost())
        .await
        .expect("the loss was not told");
    let owner = lost.owner().to_owned();
    let _ = lost.release().await;
    // Every kind's acquisition and release has the same spans, with its kind.
    let rw = client.rw_lock("traced-rw").unwrap();
    rw.write().await.unwrap().release().await.unwrap();
    let fair = client.fair_lock("traced-fair").unwrap();
    fair.acquire().await.unwrap().release().await.unwrap();
    let semaphore = client.semaphore("traced-semaphore").unwrap();
    semaphore.set_permits(1).await.unwrap();
    semaphore.acquire(1).await.unwrap().release().await.unwrap();

    let spans = records.spans.lock().unwrap().clone();
    let events = records.events.lock().unwrap().clone();
    let has = |list: &[String], parts: &[&str]| {
        list.iter()
            .any(|line| parts.iter().all(|part| line.contains(part)))
    };
    let show = || format!("spans: {spans:#?}\nevents: {events:#?}");
    assert!(
        has(&spans, &["redis_locks::acquire", "lock=traced"]),
        "no acquire span: {}",
        show()
    );
    assert!(
        has(&spans, &["redis_locks::release", "lock=traced"]),
        "no release span: {}",
        show()
    );
    for (kind, lock) in [
        ("lock", "traced"),
        ("rwlock", "traced-rw"),
        ("fair", "traced-fair"),
        ("semaphore", "traced-semaphore"),
    ] {
        for span in ["redis_locks::acquire", "redis_locks::release"] {
            assert!(
                has(
                    &spans,
                    &[span, &format!("kind={kind}"), &format!("lock={lock}")]
                ),
                "no {span} span for the {kind}: {}",
                show()
            );
        }
    }
    for outcome in ["acquired", "timeout"] {
        assert!(
            has(
                &events,
                &[
                    "DEBUG",
                    "lock=traced",
                    "waited_ms=",
                    &format!("outcome={outcome}")
                ]
            ),
            "no acquire event with outcome {outcome}: {}",
            show()
        );
    }
    assert!(
        has(&events, &["lock=traced", "held_ms=", "end=released"]),
        "no hold-ended event: {}",
        show()
    );
    assert!(
        has(&events, &["watchdog tick", "locks="]),
        "no watchdog tick event: {}",
        show()
    );
    // The owner appears as a fingerprint, never as the id (a secret).
    assert!(
        has(
            &events,
            &[
                "WARN",
                "lock lost",
                "key=redis-locks:{traced}",
                "owner=#",
                "reason="
            ]
        ),
        "no warning for the lost lock: {}",
        show()
    );
    assert!(
        !events.iter().any(|line| line.contains(&owner)),
        "an event carries the owner id: {}",
        show()
    );
}

/// `{:?}` of a builder must not print a password, whatever the topology. redis-rs
/// redacts its own `ConnectionInfo` (one server, cluster seeds); the Sentinel target's
/// primary password and `sentinel_auth`'s password (once printed as they were) are
/// redacted by hand.
#[test]
fn a_builder_debug_never_prints_a_password() {
    let builders = [
        LockClient::builder("redis://user:secret-single@127.0.0.1:6379/0"),
        LockClient::builder_cluster(["redis://:secret-cluster@127.0.0.1:7000"]),
        LockClient::builder("redis-sentinel://user:secret-primary@127.0.0.1:26379/0#mymaster")
            .sentinel_auth(Some("sentinel-user"), "secret-sentinel"),
    ];
    let mut leaks = Vec::new();
    for builder in builders {
        let text = format!("{builder:?}");
        if text.contains("secret-") {
            leaks.push(text);
        }
    }
    assert!(leaks.is_empty(), "passwords in Debug output: {leaks:#?}");
}
