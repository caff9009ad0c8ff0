//! Observability: a `metrics` recorder, then a few contended acquisitions, a timed-out
//! wait, a loss and watchdog ticks; prints every `redis_locks_*` metric. (The library also
//! emits `tracing` spans `redis_locks::acquire` and `redis_locks::release`, and events for
//! losses and ticks, for any subscriber the application installs.)
//!
//! Run with `./scripts/demo.sh`, or
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run --features metrics --example observability`.
//!
//! The recorder here is a minimal one kept in memory; in a service, install an exporter
//! (Prometheus, StatsD, ...) from the `metrics` ecosystem instead.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use redis_locks::LockClient;

/// Every metric by name and labels: counters and gauges as a number, histograms as
/// (count, sum).
#[derive(Default)]
struct Memory {
    values: Mutex<BTreeMap<String, (u64, f64)>>,
}

struct Cell(Arc<Memory>, String);

impl CounterFn for Cell {
    fn increment(&self, value: u64) {
        self.0
            .values
            .lock()
            .unwrap()
            .entry(self.1.clone())
            .or_default()
            .0 += value;
    }
    fn absolute(&self, value: u64) {
        self.0
            .values
            .lock()
            .unwrap()
            .entry(self.1.clone())
            .or_default()
            .0 = value;
    }
}

impl GaugeFn for Cell {
    fn increment(&self, value: f64) {
        self.0
            .values
            .lock()
            .unwrap()
            .entry(self.1.clone())
            .or_default()
            .1 += value;
    }
    fn decrement(&self, value: f64) {
        self.0
            .values
            .lock()
            .unwrap()
            .entry(self.1.clone())
            .or_default()
            .1 -= value;
    }
    fn set(&self, value: f64) {
        self.0
            .values
            .lock()
            .unwrap()
            .entry(self.1.clone())
            .or_default()
            .1 = value;
    }
}

impl HistogramFn for Cell {
    fn record(&self, value: f64) {
        let mut values = self.0.values.lock().unwrap();
        let entry = values.entry(self.1.clone()).or_default();
        entry.0 += 1;
        entry.1 += value;
    }
}

struct MemoryRecorder(Arc<Memory>);

impl MemoryRecorder {
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

impl Recorder for MemoryRecorder {
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

#[tokio::main]
async fn main() -> Result<(), redis_locks::Error> {
    let memory = Arc::new(Memory::default());
    metrics::set_global_recorder(MemoryRecorder(memory.clone())).expect("one recorder");
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = LockClient::builder(&url)
        .prefix("demo")
        .watchdog_timeout(Duration::from_millis(300))
        .connect()
        .await?;

    // Three tasks take turns; one times out waiting.
    let lock = client.lock("observed")?;
    let mut tasks = Vec::new();
    for _ in 0..3 {
        let lock = lock.clone();
        tasks.push(tokio::spawn(async move {
            let guard = lock.acquire().await?;
            tokio::time::sleep(Duration::from_millis(30)).await;
            guard.release().await
        }));
    }
    let held = client.lock("busy")?.acquire().await?;
    let timed_out = client
        .lock("busy")?
        .try_acquire_for(Duration::from_millis(50))
        .await?;
    assert!(timed_out.is_none());
    for task in tasks {
        task.await.expect("task panicked")?;
    }
    // A loss: deleted behind the holder's back, noticed by the watchdog within a tick.
    assert!(client.lock("busy")?.force_unlock().await?);
    held.lost().await;
    let _ = held.release().await;
    client.flush().await;

    println!("redis_locks_* metrics (counters and gauges: value; histograms: count, sum):");
    for (name, (count, sum)) in memory.values.lock().unwrap().iter() {
        if name.contains("seconds") {
            println!("  {name}: {count} observations, {sum:.4} s in all");
        } else if name.contains("waiters") {
            println!("  {name}: {sum}");
        } else {
            println!("  {name}: {count}");
        }
    }
    Ok(())
}
