//! The blocking API (feature `blocking`): plain threads take turns on one lock, with a
//! nested critical section, and no async code anywhere.
//!
//! Run with `./scripts/demo.sh`, or
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run --features blocking --example blocking`.

use std::time::{Duration, Instant};

use redis_locks::blocking::LockClient;

fn main() -> Result<(), redis_locks::Error> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = LockClient::from_builder(redis_locks::LockClient::builder(&url).prefix("demo"))?;
    let started = Instant::now();
    let threads: Vec<_> = (0..4)
        .map(|worker| {
            let client = client.clone();
            std::thread::spawn(move || -> Result<(), redis_locks::Error> {
                let lock = client.lock("blocking-ledger")?;
                let guard = lock.acquire()?;
                let nested = guard.reenter()?; // a nested critical section
                println!(
                    "thread {worker} inside after {:>8.1?} (hold count {})",
                    started.elapsed(),
                    nested.hold_count()
                );
                std::thread::sleep(Duration::from_millis(50));
                nested.release()?;
                guard.release()
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("thread panicked")?;
    }
    println!(
        "4 threads x 50 ms, one at a time: {:.1?}",
        started.elapsed()
    );
    Ok(())
}
