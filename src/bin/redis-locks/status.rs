//! `redis-locks status`: a lock's holders, TTL, waiters and fencing counter, and the state
//! of the semaphore, the count-down latch, the read-write lock and the fair lock of the
//! same name when they exist.

use std::time::Duration;

use redis_locks::{FairLockState, Lock, LockState, RwLockState, SemaphoreState};
use serde_json::json;

use crate::args::{Global, StatusArgs};
use crate::duration::human;
use crate::exit::{self, Failure};

pub async fn status(global: &Global, args: StatusArgs) -> Result<u8, Failure> {
    redis_locks::validate_name(&args.name)?;
    let client = crate::connect::client(global, None).await?;
    if args.redisson {
        return redisson(&client, &args).await;
    }
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
    let rw = client
        .rw_lock(&args.name)?
        .state()
        .await
        .ok()
        .filter(|state| state.is_locked() || state.writer_waiting);
    let fair = client
        .fair_lock(&args.name)?
        .state()
        .await
        .ok()
        .filter(|state| state.is_locked() || state.waiters > 0);
    // What is held under the name, whichever kind: the first lines say it once for all.
    let mut held = Vec::new();
    if state.is_locked() {
        held.push((
            "lock",
            counted(state.holders.len() as u64, "holder", "holders"),
        ));
    }
    if let Some(s) = rw.as_ref().filter(|s| s.is_locked()) {
        let holds = format!(
            "{}, {}",
            counted(s.writes, "write", "writes"),
            counted(s.reads, "read", "reads")
        );
        held.push(("rwlock", holds));
    }
    if let Some(s) = fair.as_ref().filter(|s| s.is_locked()) {
        held.push(("fair", counted(s.holds, "hold", "holds")));
    }
    if let Some(s) = semaphore.as_ref().filter(|s| s.in_use > 0) {
        held.push((
            "semaphore",
            format!("{} in use", counted(s.in_use, "permit", "permits")),
        ));
    }
    if args.json {
        let mut value = to_json(&lock, &state, waiting);
        value["held_kinds"] = held.iter().map(|(kind, _)| *kind).collect();
        value["semaphore"] = semaphore.map_or(serde_json::Value::Null, |s| {
            json!({"size": s.size, "in_use": s.in_use, "reserved": s.reserved, "available": s.available()})
        });
        value["latch"] = latch.map_or(serde_json::Value::Null, |count| json!({"count": count}));
        value["rwlock"] = rw.map_or(serde_json::Value::Null, |s| {
            json!({
                "writes": s.writes,
                "writer": s.writer,
                "reads": s.reads,
                "writer_waiting": s.writer_waiting,
                "ttl_ms": s.remaining.map(millis),
            })
        });
        value["fair"] = fair.map_or(serde_json::Value::Null, |s| {
            json!({
                "holds": s.holds,
                "holder": s.holder,
                "waiters": s.waiters,
                "ttl_ms": s.remaining.map(millis),
            })
        });
        crate::print_stdout(&format!("{value}\n"));
    } else {
        let summary = if held.is_empty() {
            "free".to_owned()
        } else {
            let kinds: Vec<String> = held
                .iter()
                .map(|(kind, what)| format!("{} ({what})", kind_name(kind)))
                .collect();
            format!("held: {}", kinds.join("; "))
        };
        let mut text = to_text(&lock, &state, waiting, &summary);
        if let Some(s) = semaphore {
            text.push_str(&semaphore_line(&s));
        }
        if let Some(count) = latch {
            text.push_str(&format!("{:<9}closed, count {count}\n", "latch:"));
        }
        if let Some(s) = rw {
            text.push_str(&rw_line(&s));
        }
        if let Some(s) = fair {
            text.push_str(&fair_line(&s));
        }
        crate::print_stdout(&text);
    }
    Ok(if args.check && !held.is_empty() {
        exit::HELD
    } else {
        0
    })
}

/// `status --redisson`: NAME in Redisson's layout: a hash, an RLock or a read-write lock
/// (it has a `mode` field), or a string, a count-down latch.
async fn redisson(client: &redis_locks::LockClient, args: &StatusArgs) -> Result<u8, Failure> {
    let latch = client.redisson_latch(&args.name)?;
    match latch.count().await {
        Ok(0) | Err(redis_locks::Error::WrongType { .. }) => {}
        Ok(count) => {
            if args.json {
                let value = json!({
                    "name": args.name,
                    "key": latch.key(),
                    "layout": "redisson",
                    "kind": "latch",
                    "count": count,
                });
                crate::print_stdout(&format!("{value}\n"));
            } else {
                crate::print_stdout(&format!(
                    "{:<9}{} (Redisson's layout)\n{:<9}count-down latch, closed, count {count}\n",
                    "key:",
                    latch.key(),
                    "status:"
                ));
            }
            return Ok(if args.check { exit::HELD } else { 0 });
        }
        Err(other) => return Err(other.into()),
    }
    let lock = client.redisson_lock(&args.name)?;
    let state = lock.state().await?;
    let is_rw = state.holders.iter().any(|(field, _)| field == "mode");
    let (kind, mode, holders, writer) = if is_rw {
        let rw = client.redisson_rw_lock(&args.name)?.state().await?;
        let mode = rw.mode.map(|mode| match mode {
            redis_locks::RwKind::Read => "read",
            redis_locks::RwKind::Write => "write",
        });
        (Some("rwlock"), mode, rw.readers, rw.writer)
    } else {
        let kind = state.is_locked().then_some("lock");
        (kind, None, state.holders.clone(), None)
    };
    let held = kind.is_some();
    if args.json {
        let owners = |list: &[(String, u64)]| -> Vec<serde_json::Value> {
            list.iter()
                .map(|(owner, count)| json!({"owner": owner, "count": count}))
                .collect()
        };
        let value = json!({
            "name": args.name,
            "key": lock.key(),
            "layout": "redisson",
            "kind": kind,
            "mode": mode,
            "holders": owners(&holders),
            "writer": writer.map(|(owner, count)| json!({"owner": owner, "count": count})),
            "ttl_ms": state.remaining.map(millis),
        });
        crate::print_stdout(&format!("{value}\n"));
    } else {
        let mut text = format!("{:<9}{} (Redisson's layout)\n", "key:", lock.key());
        let ttl = state
            .remaining
            .map_or_else(String::new, |left| format!(", expires in {}", human(left)));
        let line = match kind {
            None => "free".to_owned(),
            Some("lock") => {
                let who: Vec<String> = holders
                    .iter()
                    .map(|(owner, count)| format!("{owner} ({})", counted(*count, "hold", "holds")))
                    .collect();
                format!("held by {}{ttl}", who.join(", "))
            }
            Some(_) => {
                let mut parts = Vec::new();
                if let Some((owner, count)) = &writer {
                    parts.push(format!("{} by {owner}", counted(*count, "write", "writes")));
                }
                let reads: u64 = holders.iter().map(|(_, count)| count).sum();
                parts.push(format!(
                    "{} by {}",
                    counted(reads, "read", "reads"),
                    counted(holders.len() as u64, "owner", "owners")
                ));
                format!(
                    "read-write lock in mode {}: {}{ttl}",
                    mode.unwrap_or("?"),
                    parts.join(", ")
                )
            }
        };
        text.push_str(&format!("{:<9}{line}\n", "status:"));
        crate::print_stdout(&text);
    }
    Ok(if args.check && held { exit::HELD } else { 0 })
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

/// "rwlock:  1 write by OWNER, 0 reads, expires in 25s" (or "0 writes, 3 reads, a writer
/// waiting, expires in 9.8s").
fn rw_line(state: &RwLockState) -> String {
    let mut text = match &state.writer {
        Some(owner) => format!("{} by {owner}", counted(state.writes, "write", "writes")),
        None => counted(state.writes, "write", "writes"),
    };
    text.push_str(&format!(", {}", counted(state.reads, "read", "reads")));
    if state.writer_waiting {
        text.push_str(", a writer waiting");
    }
    if let Some(left) = state.remaining {
        text.push_str(&format!(", expires in {}", human(left)));
    }
    format!("{:<9}{text}\n", "rwlock:")
}

/// "fair:    1 hold by OWNER, 2 waiting, expires in 25s" (or "free, 1 waiting").
fn fair_line(state: &FairLockState) -> String {
    let holds = counted(state.holds, "hold", "holds");
    let mut text = match &state.holder {
        _ if state.holds == 0 => "free".to_owned(),
        Some(holder) => format!("{holds} by {holder}"),
        None => holds,
    };
    text.push_str(&format!(", {} waiting", state.waiters));
    if let Some(left) = state.remaining {
        text.push_str(&format!(", expires in {}", human(left)));
    }
    format!("{:<9}{text}\n", "fair:")
}

/// A kind as the summary names it.
fn kind_name(kind: &str) -> &'static str {
    match kind {
        "lock" => "lock",
        "rwlock" => "read-write lock",
        "fair" => "fair lock",
        _ => "semaphore",
    }
}

fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
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
        "ttl_ms": state.remaining.map(millis),
        "waiting": waiting,
        "fence": state.fence,
    })
}

/// The name, what is held under it (`summary`, every kind), then the lock's own details.
fn to_text(lock: &Lock, state: &LockState, waiting: i64, summary: &str) -> String {
    let mut out = String::new();
    let mut line = |label: &str, value: &str| {
        out.push_str(&format!("{label:<9}{value}\n"));
    };
    line("lock:", &format!("{} (key {})", lock.name(), lock.key()));
    line("state:", summary);
    for (owner, count) in &state.holders {
        let holds = if *count == 1 { "hold" } else { "holds" };
        line("holder:", &format!("{owner} ({count} {holds})"));
    }
    if let Some(ttl) = state.remaining {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rw_and_fair_lines() {
        // The state structs are `#[non_exhaustive]`: built from their defaults.
        let mut rw = RwLockState::default();
        rw.writes = 1;
        rw.writer = Some("abc:cli-7".into());
        rw.remaining = Some(Duration::from_millis(25_400));
        assert_eq!(
            rw_line(&rw),
            "rwlock:  1 write by abc:cli-7, 0 reads, expires in 25.4s\n"
        );
        let mut rw = RwLockState::default();
        rw.reads = 3;
        rw.writer_waiting = true;
        assert_eq!(
            rw_line(&rw),
            "rwlock:  0 writes, 3 reads, a writer waiting\n"
        );
        let mut fair = FairLockState::default();
        fair.holds = 2;
        fair.holder = Some("abc:cli-7".into());
        fair.waiters = 1;
        assert_eq!(
            fair_line(&fair),
            "fair:    2 holds by abc:cli-7, 1 waiting\n"
        );
        let mut fair = FairLockState::default();
        fair.waiters = 2;
        assert_eq!(fair_line(&fair), "fair:    free, 2 waiting\n");
    }
}
