//! Security: TLS (`rediss://`, behind the `tls` feature), a least-privilege ACL user,
//! unguessable owner ids, and name validation — all against real redis-server processes.

mod common;

use std::time::{Duration, Instant};

use common::{RedisServer, eventually};
use redis::AsyncCommands;
use redis_locks::{Error, LockClient, MAX_NAME_LEN};

const SEC: Duration = Duration::from_secs(1);

// ---- ACL ---------------------------------------------------------------------------

use common::acl::{ACL_PASS, ACL_RULES, ACL_USER};

fn acl_server() -> RedisServer {
    let mut args = vec!["--user", ACL_USER, "on"];
    let pass = format!(">{ACL_PASS}");
    args.push(&pass);
    args.extend_from_slice(ACL_RULES);
    RedisServer::start_with(&args)
}

fn acl_url(server: &RedisServer, db: u8) -> String {
    format!(
        "redis://{ACL_USER}:{ACL_PASS}@127.0.0.1:{}/{db}",
        server.port
    )
}

/// `ACL LOG` entries (each a list of field, value pairs), for the failure message.
async fn acl_log(conn: &mut redis::aio::MultiplexedConnection) -> Vec<String> {
    let entries: Vec<redis::Value> = redis::cmd("ACL")
        .arg("LOG")
        .query_async(conn)
        .await
        .unwrap();
    entries.iter().map(|entry| format!("{entry:?}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_user_limited_to_the_prefix_can_use_every_operation() {
    let server = acl_server();
    let mut admin = server.conn().await;
    let url = acl_url(&server, 0);
    let holder = LockClient::builder(&url)
        .watchdog_timeout(Duration::from_millis(600))
        .connect()
        .await
        .expect("the ACL user connects");
    let waiter = LockClient::connect(&url).await.unwrap();

    // Acquire, re-enter, fencing, state.
    let lock = holder.lock("acl").unwrap();
    let outer = lock.with_fencing().acquire().await.unwrap();
    let token = outer.fencing_token().expect("a token");
    let inner = outer.reenter().await.unwrap();
    assert_eq!(inner.hold_count(), 2);
    let state = lock.state().await.unwrap();
    assert_eq!(state.count_of(outer.owner()), 2);
    assert_eq!(state.fence, Some(token));
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.remaining_ttl().await.unwrap().is_some());

    // Renewal by the watchdog (600 ms lease held for 1.5 s).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !outer.is_lost(),
        "renewal refused: {:?}",
        outer.lost_reason()
    );
    assert!(holder.watchdog_stats().renewed >= 2);

    // A waiter in another client sleeps on pub/sub and is woken by the release.
    let wlock = waiter.lock("acl").unwrap();
    let waiting = tokio::spawn(async move {
        let guard = wlock.acquire_timeout(20 * SEC).await?;
        let at = Instant::now();
        guard.release().await?;
        Ok::<_, Error>(at)
    });
    assert!(
        eventually(5 * SEC, || async { waiter.waiting_channels() == 1 }).await,
        "the waiter did not subscribe"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(lock.waiting_clients().await.unwrap(), 1);
    inner.release().await.unwrap();
    let released = Instant::now();
    outer.release().await.unwrap();
    let woke = waiting.await.unwrap().expect("the waiter got the lock");
    assert!(
        woke.saturating_duration_since(released) < 2 * SEC,
        "woken by the release, not by its 20 s wait"
    );

    // Explicit owners and guard-less unlock.
    let mine = lock.with_owner("acl-owner").unwrap();
    mine.acquire().await.unwrap().detach();
    assert_eq!(mine.unlock().await.unwrap(), 0);

    // force_unlock, and SCRIPT FLUSH recovery (the call is sent again as EVAL).
    let held = lock.acquire().await.unwrap();
    assert!(waiter.lock("acl").unwrap().force_unlock().await.unwrap());
    assert!(matches!(held.release().await, Err(Error::LockLost { .. })));
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    let again = lock.acquire().await.unwrap();
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(&mut admin)
        .await
        .unwrap();
    tokio::time::sleep(SEC).await;
    assert!(!again.is_lost(), "renewal after SCRIPT FLUSH refused");
    again.release().await.unwrap();

    // Wrong types are still detected (acquire.lua reads the string with GET) and nothing
    // is written.
    let _: () = admin.set("redis-locks:{acl-str}", "x").await.unwrap();
    assert!(matches!(
        holder.lock("acl-str").unwrap().try_acquire().await,
        Err(Error::WrongType { .. })
    ));

    // A non-zero database needs +select, which the rule has.
    let db3 = LockClient::connect(&acl_url(&server, 3)).await.unwrap();
    db3.lock("acl")
        .unwrap()
        .acquire()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();

    let denied = acl_log(&mut admin).await;
    assert!(
        denied.is_empty(),
        "the ACL refused something the library sent: {denied:#?}"
    );
}

/// An ACL that refuses a command the scripts read a held lock with is reported as the
/// permission error it is: `Error::Redis` with NOPERM, never "the key is not a lock"
/// (WrongType), which is what a script's pcall made of every error before. Both reads
/// that acquire.lua runs under pcall (each answers WRONGTYPE for the other form) are
/// refused in turn: GET, which reads a first hold (a string), and HMGET, which reads a
/// hash (here a fenced hold, a hash from the start). The held lock is left as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_refusing_a_script_command_is_a_permission_error_not_wrong_type() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let holder = server.client(Duration::from_secs(30)).await;
    for (removed, fenced) in [("+get", false), ("+hmget", true)] {
        let user = format!("no{}", removed.trim_start_matches('+'));
        let password = format!(">{user}-pw");
        let mut rule = vec!["SETUSER", user.as_str(), "on", password.as_str()];
        rule.extend(ACL_RULES.iter().copied().filter(|r| *r != removed));
        let _: () = redis::cmd("ACL")
            .arg(&rule)
            .query_async(&mut admin)
            .await
            .unwrap();
        let name = format!("perm-{user}");
        let lock = holder.lock(&name).unwrap();
        let lock = if fenced { lock.with_fencing() } else { lock };
        let guard = lock.acquire().await.unwrap();
        let kind: String = redis::cmd("TYPE")
            .arg(lock.key())
            .query_async(&mut admin)
            .await
            .unwrap();
        assert_eq!(kind, if fenced { "hash" } else { "string" });
        let before: Vec<Vec<u8>> = common::lock_hgetall(lock.key())
            .query_async(&mut admin)
            .await
            .unwrap();
        let restricted = LockClient::connect(&format!(
            "redis://{user}:{user}-pw@127.0.0.1:{}/0",
            server.port
        ))
        .await
        .unwrap();
        // A held lock: the bare SET NX finds the key, and acquire.lua reads it (GET, then
        // HMGET on a hash).
        let refused = restricted.lock(&name).unwrap().try_acquire().await;
        match &refused {
            Err(Error::Redis(err)) => {
                let text = err.to_string();
                assert!(
                    text.contains("NOPERM") || text.contains("can't run this command"),
                    "{user}: {text}"
                );
            }
            other => panic!("{user}: an acquire refused by the ACL: {other:?}"),
        }
        let after: Vec<Vec<u8>> = common::lock_hgetall(lock.key())
            .query_async(&mut admin)
            .await
            .unwrap();
        assert_eq!(after, before, "{user}: the refused acquire wrote");
        guard.release().await.unwrap();
    }
}

#[tokio::test]
async fn acl_is_real_outside_the_prefix_everything_is_refused() {
    let server = acl_server();
    let mut admin = server.conn().await;
    let url = acl_url(&server, 0);

    // Raw commands as the restricted user.
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let refused: redis::RedisResult<()> = conn.set("other:key", "x").await;
    let err = refused.expect_err("SET outside the prefix must be refused");
    assert!(err.to_string().to_lowercase().contains("noperm"), "{err}");
    let refused: redis::RedisResult<()> = conn.set("redis-locks:{x}", "x").await;
    assert!(
        refused.is_ok(),
        "SET inside the prefix is allowed (the scripts need it)"
    );
    let refused: redis::RedisResult<Vec<String>> =
        redis::cmd("KEYS").arg("*").query_async(&mut conn).await;
    assert!(refused.is_err(), "KEYS must be refused");
    let refused: redis::RedisResult<()> = redis::cmd("FLUSHALL").query_async(&mut conn).await;
    assert!(refused.is_err(), "FLUSHALL must be refused");
    let refused: redis::RedisResult<i64> = conn.publish("other-channel", "x").await;
    assert!(
        refused.is_err(),
        "PUBLISH outside the prefix must be refused"
    );
    // Scripts cannot be used to escape: an EVAL body or a loaded script touching another
    // key fails on the key permission.
    let refused: redis::RedisResult<()> = redis::cmd("EVAL")
        .arg("return redis.call('SET', KEYS[1], 'x')")
        .arg(1)
        .arg("other:key")
        .query_async(&mut conn)
        .await;
    assert!(refused.is_err(), "EVAL must be refused");
    let other_key = redis::Script::new("return redis.call('SET', KEYS[1], 'x')");
    let refused: redis::RedisResult<()> = other_key.key("other:key").invoke_async(&mut conn).await;
    assert!(
        refused.is_err(),
        "a script writing outside the prefix must be refused"
    );
    let exists: bool = admin.exists("other:key").await.unwrap();
    assert!(!exists);

    // The library with another prefix gets a typed error, not a panic or a hang.
    let client = LockClient::builder(&url)
        .prefix("elsewhere")
        .connect()
        .await
        .unwrap();
    match client.lock("x").unwrap().try_acquire().await {
        Err(Error::Redis(err)) => {
            assert!(err.to_string().to_lowercase().contains("noperm"), "{err}")
        }
        other => panic!("expected Error::Redis(NOPERM), got {other:?}"),
    }
    // A waiter on a channel outside the pattern cannot subscribe either; its wait is
    // still bounded by the lock's TTL and its own limit.
    let outside: Vec<String> = redis::cmd("KEYS")
        .arg("elsewhere*")
        .query_async(&mut admin)
        .await
        .unwrap();
    assert!(outside.is_empty(), "{outside:?}");

    // Wrong password for the user: a connect error naming the address.
    let bad = format!("redis://{ACL_USER}:nope@127.0.0.1:{}/", server.port);
    assert!(matches!(
        LockClient::connect(&bad).await,
        Err(Error::Connect { .. })
    ));
}

// ---- owners ------------------------------------------------------------------------

fn is_uuid_v4(s: &str) -> bool {
    let bytes = s.as_bytes();
    s.len() == 36
        && [8, 13, 18, 23].iter().all(|&i| bytes[i] == b'-')
        && s.chars()
            .enumerate()
            .all(|(i, c)| [8, 13, 18, 23].contains(&i) || c.is_ascii_hexdigit())
        && bytes[14] == b'4'
        && matches!(bytes[19], b'8' | b'9' | b'a' | b'b')
}

#[tokio::test]
async fn default_owners_carry_a_random_uuid_v4() {
    let server = RedisServer::start();
    let a = server.client(30 * SEC).await;
    let b = server.client(30 * SEC).await;
    assert!(is_uuid_v4(a.id()), "{}", a.id());
    assert!(is_uuid_v4(b.id()), "{}", b.id());
    assert_ne!(a.id(), b.id());
    let lock = a.lock("o").unwrap();
    assert_eq!(lock.owner(), None, "no explicit owner");
    let first = lock.acquire().await.unwrap();
    assert!(
        first.owner().starts_with(&format!("{}:", a.id())),
        "{}",
        first.owner()
    );
    first.release().await.unwrap();
    // Every acquire of a handle without an explicit owner is a new owner.
    let second = lock.acquire().await.unwrap();
    assert!(second.owner().starts_with(&format!("{}:", a.id())));
    second.release().await.unwrap();
}

#[tokio::test]
async fn release_with_a_guessed_owner_id_is_refused() {
    let server = RedisServer::start();
    let holder = server.client(30 * SEC).await;
    let attacker = server.client(30 * SEC).await;
    let lock = holder
        .lock("guarded")
        .unwrap()
        .with_lease(60 * SEC)
        .unwrap();
    let guard = lock.acquire().await.unwrap();
    let real_owner = guard.owner().to_owned();

    // Plausible guesses: the attacker's own owner shape, the holder's client id with other
    // sequence numbers, and the bare client id.
    let mut guesses = vec![holder.id().to_string()];
    for n in 0..40 {
        guesses.push(format!("{}:{n}", holder.id()));
        guesses.push(format!("{}:{n}", attacker.id()));
    }
    guesses.retain(|g| *g != real_owner);
    for guess in &guesses {
        let forged = attacker.lock("guarded").unwrap().with_owner(guess).unwrap();
        match forged.unlock().await {
            Err(Error::NotHeld { owner, .. }) => assert_eq!(&owner, guess),
            other => panic!("release as {guess:?} must be NotHeld, got {other:?}"),
        }
    }
    let state = lock.state().await.unwrap();
    assert_eq!(state.holders, vec![(real_owner.clone(), 1)]);
    // The real id is a bearer credential: it does release (documented behaviour).
    let with_real_id = attacker
        .lock("guarded")
        .unwrap()
        .with_owner(&real_owner)
        .unwrap();
    assert_eq!(with_real_id.unlock().await.unwrap(), 0);
    assert!(matches!(guard.release().await, Err(Error::LockLost { .. })));
}

#[tokio::test]
async fn renew_with_a_wrong_owner_is_refused_and_does_not_extend_the_ttl() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    let mut conn = server.conn().await;
    // A fixed lease: nothing renews it but our forged call.
    let lock = client.lock("renew").unwrap().with_lease(5 * SEC).unwrap();
    let guard = lock.acquire().await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before: i64 = conn.pttl(lock.key()).await.unwrap();
    let renew = redis::Script::new(include_str!("../lua/renew.lua"));
    let forged = format!("{}.1", uuid_like(7));
    let reply: Vec<i64> = renew
        .key(lock.key())
        .arg(60_000)
        .arg(1)
        .arg(&forged)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        reply,
        vec![1],
        "renewal by a wrong owner must be refused (position 1 reported lost)"
    );
    let after: i64 = conn.pttl(lock.key()).await.unwrap();
    assert!(
        after <= before && after < 5_000,
        "TTL extended by a wrong owner: {before} -> {after}"
    );
    // The same call with the real owner does extend it (the check above is meaningful).
    let reply: Vec<i64> = renew
        .key(lock.key())
        .arg(60_000)
        .arg(1)
        .arg(guard.hold_id())
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert!(reply.is_empty(), "the real owner's renewal succeeds");
    let extended: i64 = conn.pttl(lock.key()).await.unwrap();
    assert!(extended > 50_000, "{extended}");
    guard.release().await.unwrap();
}

fn uuid_like(seed: u8) -> String {
    format!("{seed:08x}-0000-4000-8000-000000000000")
}

// ---- names -------------------------------------------------------------------------

#[tokio::test]
async fn empty_and_oversized_names_are_rejected() {
    let server = RedisServer::start();
    let client = server.client(30 * SEC).await;
    assert!(matches!(client.lock(""), Err(Error::InvalidName { .. })));
    assert!(matches!(
        client.lock(&"x".repeat(MAX_NAME_LEN + 1)),
        Err(Error::InvalidName { .. })
    ));
    assert!(client.lock(&"x".repeat(MAX_NAME_LEN)).is_ok());
}

// ---- TLS ---------------------------------------------------------------------------

#[cfg(feature = "tls")]
mod tls {
    use super::*;

    /// The throw-away CA, server and client certificates (`tests/common/certs.rs`).
    pub use crate::common::certs::{Certs, make_certs};

    fn free_port() -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    }

    /// A server with a TLS port next to its plain one (the plain one is the harness's
    /// readiness probe and the test's inspection connection).
    pub fn tls_server(certs: &Certs, require_client_cert: bool) -> (RedisServer, u16) {
        let tls_port = free_port().to_string();
        let (cert, key, ca) = (
            certs.path("server.crt"),
            certs.path("server.key"),
            certs.path("ca.crt"),
        );
        let auth = if require_client_cert { "yes" } else { "no" };
        let server = RedisServer::start_with(&[
            "--tls-port",
            &tls_port,
            "--tls-cert-file",
            &cert,
            "--tls-key-file",
            &key,
            "--tls-ca-cert-file",
            &ca,
            "--tls-auth-clients",
            auth,
        ]);
        let port = tls_port.parse().unwrap();
        // The TLS listener comes up with the plain one; wait until it accepts.
        let deadline = Instant::now() + 5 * SEC;
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "TLS port never listened");
            std::thread::sleep(Duration::from_millis(10));
        }
        (server, port)
    }

    fn tls_client(url: &str, certs: &Certs, with_client_cert: bool) -> redis::Client {
        let client_tls = with_client_cert.then(|| redis::ClientTlsConfig {
            client_cert: certs.read("client.crt"),
            client_key: certs.read("client.key"),
        });
        redis::Client::build_with_tls(
            url,
            redis::TlsCertificates {
                client_tls,
                root_cert: Some(certs.read("ca.crt")),
            },
        )
        .unwrap()
    }

    async fn connect(url: &str, certs: &Certs, mtls: bool, watchdog: Duration) -> LockClient {
        LockClient::builder_from_client(tls_client(url, certs, mtls))
            .watchdog_timeout(watchdog)
            .connect_timeout(5 * SEC)
            .connect()
            .await
            .expect("TLS connect")
    }

    /// Acquire, wait with a pub/sub wake-up, renew, release, force_unlock and state, all
    /// over `rediss://`.
    async fn exercise(url: &str, certs: &Certs, mtls: bool, name: &str) {
        let holder = connect(url, certs, mtls, Duration::from_millis(600)).await;
        let waiter = connect(url, certs, mtls, 30 * SEC).await;
        let lock = holder.lock(name).unwrap();
        let guard = lock.with_fencing().acquire().await.unwrap();
        assert!(guard.fencing_token().is_some());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(!guard.is_lost(), "renewal over TLS failed");
        assert!(holder.watchdog_stats().renewed >= 2);
        assert_eq!(lock.state().await.unwrap().count_of(guard.owner()), 1);

        let wlock = waiter.lock(name).unwrap();
        let waiting = tokio::spawn(async move {
            let guard = wlock.acquire_timeout(20 * SEC).await.unwrap();
            let at = Instant::now();
            guard.release().await.unwrap();
            at
        });
        assert!(eventually(5 * SEC, || async { waiter.waiting_channels() == 1 }).await);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let released = Instant::now();
        guard.release().await.unwrap();
        let woke = waiting.await.unwrap();
        assert!(woke.saturating_duration_since(released) < 2 * SEC);

        let held = lock.acquire().await.unwrap();
        assert!(waiter.lock(name).unwrap().force_unlock().await.unwrap());
        assert!(matches!(held.release().await, Err(Error::LockLost { .. })));
        assert!(!lock.is_locked().await.unwrap());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tls_rediss_with_a_private_ca_supports_every_operation() {
        let certs = make_certs();
        let (_server, port) = tls_server(&certs, false);
        exercise(
            &format!("rediss://localhost:{port}/"),
            &certs,
            false,
            "by-name",
        )
        .await;
        // An IP address is verified against the certificate's IP SAN.
        exercise(
            &format!("rediss://127.0.0.1:{port}/"),
            &certs,
            false,
            "by-ip",
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tls_mutual_authentication_with_a_client_certificate() {
        let certs = make_certs();
        let (_server, port) = tls_server(&certs, true);
        let url = format!("rediss://localhost:{port}/");
        exercise(&url, &certs, true, "mtls").await;
        // Without the client certificate the server refuses the handshake.
        let refused = LockClient::builder_from_client(tls_client(&url, &certs, false))
            .connect_timeout(2 * SEC)
            .connect()
            .await;
        assert!(matches!(refused, Err(Error::Connect { .. })), "{refused:?}");
    }

    #[tokio::test]
    async fn tls_refuses_an_untrusted_server_and_plain_text() {
        let certs = make_certs();
        let (_server, port) = tls_server(&certs, false);
        // The system roots do not include the test CA: verification fails.
        let untrusted = LockClient::builder(&format!("rediss://localhost:{port}/"))
            .connect_timeout(2 * SEC)
            .connect()
            .await;
        match untrusted {
            Err(err @ Error::Connect { .. }) => println!("untrusted CA: {err}"),
            other => panic!("expected Error::Connect, got {other:?}"),
        }
        // Plain text to the TLS port fails fast with a connect error.
        let started = Instant::now();
        let plain = LockClient::builder(&format!("redis://127.0.0.1:{port}/"))
            .connect_timeout(2 * SEC)
            .response_timeout(SEC)
            .connect()
            .await;
        match plain {
            Err(err @ Error::Connect { .. }) => println!("plain text to the TLS port: {err}"),
            other => panic!("expected Error::Connect, got {other:?}"),
        }
        assert!(started.elapsed() < 5 * SEC);
    }
}
