//! Owner ids are secrets (whoever knows one can release or renew that owner's holds), so
//! they never appear in `Debug` output or in logs: a short fingerprint (`#` and 8 hex
//! digits) stands in for them. Checked for every kind's handle and guard and for the
//! events of a whole life of a hold (acquire, renewal, loss, release), at TRACE level.
//! Owner ids are made of the client id (`<client id>:<n>`), and a set kind's hold id of the
//! owner id, so no text may contain the client id at all.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use common::{RedisServer, eventually};

/// Everything every test of this binary logged (one global subscriber: the library logs
/// from its background tasks, on any thread).
fn logs() -> &'static Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Arc::new(Mutex::new(Vec::new()));
        let sink = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("one subscriber");
        logs
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn assert_hidden(text: &str, secrets: &[&str], what: &str) {
    for secret in secrets {
        assert!(
            !text.contains(secret),
            "{what} shows the secret {secret:?}: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_debug_output_or_log_line_carries_an_owner_id() {
    let logs = logs();
    let server = RedisServer::start();
    let client = server.client(Duration::from_millis(300)).await;
    let explicit = "worker-7f3a-secret";
    let client_id = client.id().to_owned();
    let mut shown = Vec::new();

    // Every kind's handle and guard, with a fresh owner and with an explicit one.
    let lock = client.lock("hidden-lock").unwrap();
    let named = lock.with_owner(explicit).unwrap();
    let guard = lock.acquire().await.unwrap();
    let owner = guard.owner().to_owned();
    let hold = guard.hold_id().to_owned();
    shown.push(format!("{client:?} {lock:?} {named:?} {guard:?}"));
    let nested = guard.reenter().await.unwrap();
    shown.push(format!("{nested:?}"));
    let named_guard = client
        .lock("hidden-named")
        .unwrap()
        .with_owner(explicit)
        .unwrap()
        .acquire()
        .await
        .unwrap();
    shown.push(format!("{named_guard:?}"));

    let rw = client.rw_lock("hidden-rw").unwrap();
    let rw_named = rw.with_owner(explicit).unwrap();
    let write = rw_named.write().await.unwrap();
    let rw_hold = write.hold_id().to_owned();
    shown.push(format!("{rw:?} {rw_named:?} {write:?}"));

    let fair = client.fair_lock("hidden-fair").unwrap();
    let fair_named = fair.with_owner(explicit).unwrap();
    let fair_guard = fair_named.acquire().await.unwrap();
    let fair_hold = fair_guard.hold_id().to_owned();
    shown.push(format!("{fair:?} {fair_named:?} {fair_guard:?}"));

    let semaphore = client.semaphore("hidden-sem").unwrap();
    semaphore.set_permits(2).await.unwrap();
    let permit = semaphore.acquire(1).await.unwrap();
    let permit_hold = permit.hold_id().to_owned();
    shown.push(format!("{semaphore:?} {permit:?}"));

    // The multi-lock over every kind, and a RedLock (one server), with the explicit owner.
    let multi = redis_locks::MultiLock::new([
        redis_locks::Member::Lock(client.lock("hidden-m1").unwrap()),
        redis_locks::Member::Write(client.rw_lock("hidden-m2").unwrap()),
        redis_locks::Member::Fair(client.fair_lock("hidden-m3").unwrap()),
    ])
    .unwrap()
    .with_owner(explicit)
    .unwrap();
    let all = multi.acquire().await.unwrap();
    shown.push(format!("{multi:?} {all:?} {:?}", all.guards()));
    let red = redis_locks::RedLock::new([client.lock("hidden-red").unwrap()])
        .unwrap()
        .with_owner(explicit)
        .unwrap();
    let red_guard = red.acquire().await.unwrap();
    shown.push(format!("{red:?} {red_guard:?} {:?}", red_guard.holds()));

    let secrets = [
        client_id.as_str(),
        owner.as_str(),
        hold.as_str(),
        explicit,
        rw_hold.as_str(),
        fair_hold.as_str(),
        permit_hold.as_str(),
    ];
    for text in &shown {
        assert_hidden(text, &secrets, "Debug output");
        assert!(text.contains('#'), "no fingerprint in: {text}");
    }
    // A latch has no owner; its handle shows none either.
    let latch = format!("{:?}", client.latch("hidden-latch").unwrap());
    assert_hidden(&latch, &secrets, "Debug output");

    // Renewals, a loss, releases: their events, at TRACE level.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut conn = server.conn().await;
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), || async { guard.is_lost() }).await,
        "the flushed hold was never told lost"
    );
    drop(nested);
    let _ = guard.release().await;
    let _ = named_guard.release().await;
    let _ = write.release().await;
    let _ = fair_guard.release().await;
    let _ = permit.release().await;
    let _ = all.release().await;
    let _ = red_guard.release().await;
    client.flush().await;

    let logged = String::from_utf8_lossy(&logs.lock().unwrap()).into_owned();
    assert!(
        logged.contains("lock lost"),
        "the loss was not logged (is the subscriber installed?): {logged}"
    );
    assert_hidden(&logged, &secrets, "the log");
}

#[tokio::test]
async fn a_fingerprint_stands_for_one_owner_in_debug_and_logs() {
    let server = RedisServer::start();
    let client = server.client(Duration::from_secs(30)).await;
    let lock = client
        .lock("hidden-fp")
        .unwrap()
        .with_owner("ops-1")
        .unwrap();
    let a = format!("{lock:?}");
    let b = format!("{:?}", lock.with_lease(Duration::from_secs(5)).unwrap());
    let fingerprint = |text: &str| {
        let at = text.find("owner: Some(#").expect("a fingerprint") + "owner: Some(".len();
        text[at..at + 9].to_owned()
    };
    assert_eq!(fingerprint(&a), fingerprint(&b), "{a} / {b}");
    let other = format!(
        "{:?}",
        client
            .lock("hidden-fp")
            .unwrap()
            .with_owner("ops-2")
            .unwrap()
    );
    assert_ne!(fingerprint(&a), fingerprint(&other));
    client.flush().await;
}
