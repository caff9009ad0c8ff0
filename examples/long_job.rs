//! A long job that relies on the watchdog, and stops when its lock is lost.
//!
//! The lock is taken with a 2 s watchdog lease and held for 5 s: the watchdog renews it.
//! Then an operator force-unlocks it from another client, the guard's lost signal fires,
//! and the job stops instead of carrying on unprotected.
//!
//! Run with `./scripts/demo.sh`, or `REDIS_URL=redis://127.0.0.1:6379 cargo run --example long_job`.

use std::time::{Duration, Instant};

use redis_locks::{Error, LockClient};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = LockClient::builder(&url)
        .prefix("demo")
        .watchdog_timeout(Duration::from_secs(2))
        .connect()
        .await?;
    let operator = LockClient::builder(&url).prefix("demo").connect().await?;

    let guard = client.lock("nightly-migration")?.acquire().await?;
    println!("job: lock taken with a 2 s lease; the watchdog renews it every ~667 ms");

    // The operator pulls the lock after 5 s.
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let lock = operator.lock("nightly-migration").expect("valid name");
        let deleted = lock.force_unlock().await.expect("force unlock");
        println!("operator: force_unlock deleted the lock: {deleted}");
    });

    let started = Instant::now();
    let mut step = 0;
    loop {
        tokio::select! {
            _ = guard.lost() => {
                println!(
                    "job: lock LOST after {:.1?} ({}); stopping at step {step}",
                    started.elapsed(),
                    guard.lost_reason().map(|r| r.to_string()).unwrap_or_default()
                );
                break;
            }
            _ = tokio::time::sleep(Duration::from_millis(500)) => {
                step += 1;
                println!(
                    "job: step {step:>2} done, lease left {:>4} ms",
                    guard.remaining_lease().as_millis()
                );
            }
        }
    }
    match guard.release().await {
        Err(Error::LockLost { reason, .. }) => println!("job: release reports the loss: {reason}"),
        other => println!("job: release returned {other:?}"),
    }
    Ok(())
}
