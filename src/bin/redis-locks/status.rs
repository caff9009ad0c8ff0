//! `redis-locks status`: a lock's holders, TTL, waiters and fencing counter.

use redis_locks::{Lock, LockState};
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
    if args.json {
        crate::print_stdout(&format!("{}\n", to_json(&lock, &state, waiting)));
    } else {
        crate::print_stdout(&to_text(&lock, &state, waiting));
    }
    Ok(if args.check && state.is_locked() {
        exit::HELD
    } else {
        0
    })
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
