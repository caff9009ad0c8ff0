//! Metrics through the `metrics` facade (feature `metrics`): each event is counted once,
//! with the documented names and labels.

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::RedisServer;
use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};

type Values = Arc<Mutex<BTreeMap<String, f64>>>;

struct Cell(Values, String);

impl Cell {
    fn add(&self, value: f64) {
        *self.0.lock().unwrap().entry(self.1.clone()).or_default() += value;
    }
}

impl CounterFn for Cell {
    fn increment(&self, value: u64) {
        self.add(value as f64);
    }
    fn absolute(&self, _: u64) {}
}

impl GaugeFn for Cell {
    fn increment(&self, value: f64) {
        self.add(value);
    }
    fn decrement(&self, value: f64) {
        self.add(-value);
    }
    fn set(&self, _: f64) {}
}

impl HistogramFn for Cell {
    /// Histograms count observations.
    fn record(&self, _: f64) {
        self.add(1.0);
    }
}

struct Memory(Values);

impl Memory {
    fn cell(&self, key: &Key) -> Arc<Cell> {
        let labels: Vec<String> = key
            .labels()
            .map(|label| format!("{}={}", label.key(), label.value()))
            .collect();
        Arc::new(Cell(
            self.0.clone(),
            format!("{}{{{}}}", key.name(), labels.join(",")),
        ))
    }
}

impl Recorder for Memory {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.cell(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.cell(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.cell(key))
    }
}

const KINDS: [&str; 4] = ["lock", "rwlock", "fair", "semaphore"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_event_is_counted_with_its_labels() {
    let values: Values = Arc::default();
    metrics::set_global_recorder(Memory(values.clone())).unwrap();
    let server = RedisServer::start();
    // Ticks every 100 ms (a loss is noticed at once), on a 3 s lease that a machine slowed
    // by load does not run out: the exact loss counts below must not see an extra one.
    let client = server
        .client_renewing(Duration::from_secs(3), Duration::from_millis(100))
        .await;
    let lock = client.lock("metered").unwrap();

    let held = lock.acquire().await.unwrap();
    let waiter = {
        let lock = lock.clone();
        tokio::spawn(async move { lock.acquire().await.unwrap().release().await.unwrap() })
    };
    let get = |name: &str| values.lock().unwrap().get(name).copied().unwrap_or(0.0);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            get("redis_locks_waiters{kind=lock}") == 1.0
        })
        .await,
        "the waiter is not in the gauge"
    );
    assert!(lock.try_acquire().await.unwrap().is_none());
    held.release().await.unwrap();
    waiter.await.unwrap();

    let lost = lock.acquire().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    tokio::time::timeout(Duration::from_secs(5), lost.lost())
        .await
        .unwrap();
    drop(lost);

    // The other kinds wait in the same loop and are observed the same way.
    let rw = client.rw_lock("metered-rw").unwrap();
    let write = rw.write().await.unwrap();
    assert!(
        rw.try_read_for(Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
    write.release().await.unwrap();
    let fair = client.fair_lock("metered-fair").unwrap();
    let turn = fair.acquire().await.unwrap();
    assert!(
        fair.try_acquire_for(Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
    drop(turn);
    let semaphore = client.semaphore("metered-semaphore").unwrap();
    semaphore.set_permits(1).await.unwrap();
    let permit = semaphore.acquire(1).await.unwrap();
    assert!(
        semaphore
            .try_acquire_for(1, Duration::from_millis(50))
            .await
            .unwrap()
            .is_none()
    );
    permit.release().await.unwrap();
    // A permit taken back by an operator is lost as a semaphore's.
    let taken = semaphore.acquire(1).await.unwrap();
    assert_eq!(semaphore.force_release().await.unwrap(), 1);
    tokio::time::timeout(Duration::from_secs(5), taken.lost())
        .await
        .unwrap();
    drop(taken);
    client.flush().await;

    let snapshot = values.lock().unwrap().clone();
    println!("{snapshot:#?}");
    // Every kind is labelled as itself; a try without a wait that finds the lock held is
    // `would_block`, not a timeout.
    let acquisitions = |kind: &str, outcome: &str| {
        get(&format!(
            "redis_locks_acquisitions_total{{kind={kind},outcome={outcome}}}"
        ))
    };
    assert_eq!(acquisitions("lock", "acquired"), 3.0);
    assert_eq!(acquisitions("lock", "would_block"), 1.0);
    assert_eq!(acquisitions("lock", "timeout"), 0.0);
    assert_eq!(acquisitions("semaphore", "acquired"), 2.0);
    for kind in ["rwlock", "fair"] {
        assert_eq!(acquisitions(kind, "acquired"), 1.0, "{kind}");
        assert_eq!(acquisitions(kind, "timeout"), 1.0, "{kind}");
        let waited = get(&format!("redis_locks_acquire_wait_seconds{{kind={kind}}}"));
        assert_eq!(waited, 2.0, "{kind}");
    }
    for kind in ["rwlock", "fair", "semaphore"] {
        assert_eq!(acquisitions(kind, "timeout"), 1.0, "{kind}");
        assert_eq!(
            get(&format!("redis_locks_waiters{{kind={kind}}}")),
            0.0,
            "{kind}"
        );
    }
    assert_eq!(get("redis_locks_acquire_wait_seconds{kind=lock}"), 4.0);
    assert_eq!(get("redis_locks_hold_seconds{kind=lock,end=released}"), 2.0);
    assert_eq!(
        get("redis_locks_hold_seconds{kind=rwlock,end=released}"),
        1.0
    );
    assert_eq!(
        get("redis_locks_hold_seconds{kind=semaphore,end=released}"),
        1.0
    );
    assert_eq!(get("redis_locks_hold_seconds{kind=lock,end=dropped}"), 1.0);
    assert_eq!(get("redis_locks_hold_seconds{kind=fair,end=dropped}"), 1.0);
    assert_eq!(
        get("redis_locks_hold_seconds{kind=semaphore,end=dropped}"),
        1.0
    );
    let semaphore_lost: f64 = snapshot
        .iter()
        .filter(|(key, _)| key.starts_with("redis_locks_lost_total{kind=semaphore,"))
        .map(|(_, value)| value)
        .sum();
    assert_eq!(semaphore_lost, 1.0, "{snapshot:#?}");
    assert_eq!(
        get("redis_locks_lost_total{kind=lock,reason=owner_field_gone}"),
        1.0
    );
    assert_eq!(get("redis_locks_waiters{kind=lock}"), 0.0);
    assert!(get("redis_locks_renewal_seconds{}") >= 1.0);

    // Renewals are counted per kind: one hold of each, through a few watchdog ticks
    // (every 100 ms).
    let before: Vec<f64> = KINDS
        .iter()
        .map(|kind| get(&format!("redis_locks_renewals_total{{kind={kind}}}")))
        .collect();
    let holds = (
        lock.acquire().await.unwrap(),
        rw.read().await.unwrap(),
        fair.acquire().await.unwrap(),
        semaphore.acquire(1).await.unwrap(),
    );
    let renewed_twice = || {
        KINDS.iter().zip(&before).all(|(kind, before)| {
            get(&format!("redis_locks_renewals_total{{kind={kind}}}")) >= before + 2.0
        })
    };
    assert!(
        common::eventually(Duration::from_secs(10), || async { renewed_twice() }).await,
        "{:#?}",
        values.lock().unwrap()
    );
    drop(holds);
}
