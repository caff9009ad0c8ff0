//! A service that guards each request by the resource it touches: 8 workers handle 400
//! deposits to 5 accounts, each a read-modify-write of a balance stored in Redis with
//! plain GET and SET (not atomic on its own). The per-account lock makes the updates
//! exclusive across workers (and would across processes): no deposit is lost, and
//! requests for different accounts do not wait for each other.
//!
//! Run with `./scripts/demo.sh`, or
//! `REDIS_URL=redis://127.0.0.1:6379 cargo run --example service`.

use std::time::{Duration, Instant};

use redis_locks::LockClient;
use redis_locks::redis::AsyncCommands;

const ACCOUNTS: u64 = 5;
const DEPOSITS: u64 = 400;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One request: deposit `amount` into `account`, under that account's lock.
async fn deposit(
    client: &LockClient,
    store: &mut redis_locks::redis::aio::MultiplexedConnection,
    account: u64,
    amount: u64,
) -> Result<(), BoxError> {
    let lock = client.lock(&format!("account:{account}"))?;
    // A request gives up after 2 s instead of queueing forever behind a stuck holder.
    let Some(guard) = lock.try_acquire_for(Duration::from_secs(2)).await? else {
        return Err(format!("account {account} is busy; try again later").into());
    };
    let key = format!("demo:balance:{account}");
    let balance: u64 = store.get(&key).await?;
    tokio::task::yield_now().await; // another worker would interleave here without the lock
    let _: () = store.set(&key, balance + amount).await?;
    guard.release().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = LockClient::builder(&url).prefix("demo").connect().await?;
    let mut store = redis_locks::redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    for account in 0..ACCOUNTS {
        let _: () = store.set(format!("demo:balance:{account}"), 0).await?;
    }

    let started = Instant::now();
    let mut workers = Vec::new();
    for worker in 0..8u64 {
        let (client, mut store) = (client.clone(), store.clone());
        workers.push(tokio::spawn(async move {
            for n in 0..DEPOSITS / 8 {
                deposit(&client, &mut store, (worker + n) % ACCOUNTS, 1).await?;
            }
            Ok::<_, BoxError>(())
        }));
    }
    for worker in workers {
        worker.await??;
    }
    let mut total = 0;
    for account in 0..ACCOUNTS {
        let balance: u64 = store.get(format!("demo:balance:{account}")).await?;
        println!("account {account}: {balance}");
        total += balance;
    }
    println!(
        "{DEPOSITS} deposits of 1 by 8 workers in {:.1?}: total {total} (no update lost)",
        started.elapsed()
    );
    assert_eq!(total, DEPOSITS, "an update was lost");
    client.flush().await;
    Ok(())
}
