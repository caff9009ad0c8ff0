//! `redis-locks status`: a lock's holders, TTL, waiters and fencing counter, and the state
//! of the semaphore and the count-down latch of the same name when they exist.

use redis_locks::{Lock, LockState, SemaphoreState};
use serde_json::json;

use crate::args::{Global, StatusArgs};
use crate::duration::human;
use crate::exit::{self, Failure};

pub async fn status(global: &Global, args: StatusArgs) -> Result<u8, Failure> {
    redis_locks::validate_name(&args.name)?;
    let client = crate::connect::client(global, None).await?;
    let lock = client.lock(&args.name)?;
    let state = lock.state().await?;
    let waiting = lock.waiting_clients().await? as i64;
    // The other kinds of the same name, shown only when they exist.
    let semaphore = client
        .semaphore(&args.name)?
        .state()
        .await
        .ok()
        .filter(|state| state.size.is_some() || state.in_use > 0);
    let latch = client
        .latch(&args.name)?
        .count()
        .await
        .ok()
        .filter(|count| *count > 0);
    if args.json {
        let mut value = to_json(&lock, &state, waiting);
        value["semaphore"] = semaphore.map_or(serde_json::Value::Null, |s| {
            json!({"size": s.size, "in_use": s.in_use, "reserved": s.reserved, "available": s.available()})
        });
        value["latch"] = latch.map_or(serde_json::Value::Null, |count| json!({"count": count}));
        crate::print_stdout(&format!("{value}\n"));
    } else {
        let mut text = to_text(&lock, &state, waiting);
        if let Some(s) = semaphore {
            text.push_str(&semaphore_line(&s));
        }
        if let Some(count) = latch {
            text.push_str(&format!("{:<9}closed, count {count}\n", "latch:"));
        }
        crate::print_stdout(&text);
    }
    Ok(if args.check && state.is_locked() {
        exit::HELD
    } else {
        0
    })
}

fn semaphore_line(state: &SemaphoreState) -> String {
    let size = state
        .size
        .map_or_else(|| "no size".to_owned(), |size| format!("{size} permits"));
    format!(
        "{:<9}{size}, {} in use, {} reserved, {} available\n",
        "permits:",
        state.in_use,
        state.reserved,
        state.available()
    )
}

fn to_json(lock: &Lock, state: &LockState, waiting: i64) -> serde_json::Value {
    let holders: Vec<_> = state
        .holders
        .iter()
        .map(|(owner, count)| json!({ "owner": owner, "count": count }))
        .collect();
    json!({
        "name": lock.name(),
        "key": lock.key(),
        "channel": lock.channel(),
        "held": state.is_locked(),
        "holders": holders,
        "ttl_ms": state.ttl.map(|ttl| u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX)),
        "waiting": waiting,
        "fence": state.fence,
    })
}

fn to_text(lock: &Lock, state: &LockState, waiting: i64) -> String {
    let mut out = String::new();
    let mut line = |label: &str, value: &str| {
        out.push_str(&format!("{label:<9}{value}\n"));
    };
    line("lock:", &format!("{} (key {})", lock.name(), lock.key()));
    line("state:", if state.is_locked() { "held" } else { "free" });
    for (owner, count) in &state.holders {
        let holds = if *count == 1 { "hold" } else { "holds" };
        line("holder:", &format!("{owner} ({count} {holds})"));
    }
    if let Some(ttl) = state.ttl {
        line(
            "expires:",
            &format!("in {} ({} ms)", human(ttl), ttl.as_millis()),
        );
    }
    line(
        "waiting:",
        &format!("{waiting} subscribed client(s) on {}", lock.channel()),
    );
    match state.fence {
        Some(fence) => line("fence:", &fence.to_string()),
        None => line("fence:", "none (fencing never used on this name)"),
    }
    out
}
