//! Quick start: eight tasks contend for one lock, and one of them re-enters it.
//!
//! Run with `./scripts/demo.sh`, or `REDIS_URL=redis://127.0.0.1:6379 cargo run --example quickstart`.

use std::time::{Duration, Instant};

use redis_locks::LockClient;

#[tokio::main]
async fn main() -> Result<(), redis_locks::Error> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = LockClient::builder(&url).prefix("demo").connect().await?;
    println!("client {} connected to {url}", client.id());

    let started = Instant::now();
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let lock = client.lock("shared-report")?;
            let guard = lock.acquire().await?;
            let waited = started.elapsed();
            // Nested critical section: re-enter through the guard (another plain
            // `acquire` would be another owner and wait for this one).
            let nested = guard.reenter().await?;
            println!(
                "worker {worker} in the critical section after {waited:>10.1?} (hold count {})",
                nested.hold_count()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
            nested.release().await?;
            guard.release().await?;
            Ok::<_, redis_locks::Error>(())
        }));
    }
    for task in tasks {
        task.await.expect("worker panicked")?;
    }
    println!(
        "8 workers x 50 ms of exclusive work took {:.1?}: one at a time, woken by pub/sub",
        started.elapsed()
    );
    Ok(())
}
