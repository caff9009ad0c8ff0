//! `redis-locks unlock --force`: delete every kind of lock held under a name, whoever
//! holds it: the lock, the read-write lock, the fair lock and the semaphore's permits.

use redis_locks::LockClient;

use crate::args::{Global, UnlockArgs};
use crate::duration::human;
use crate::exit::{self, Failure};

pub async fn unlock(global: &Global, args: UnlockArgs) -> Result<u8, Failure> {
    if !args.force {
        return Err(Failure::usage(format!(
            "refusing to delete lock {:?} without --force: its holder would keep running \
             unprotected until its next renewal notices the loss. Let the holder release \
             it, or pass --force if it must go now.",
            args.name
        )));
    }
    redis_locks::validate_name(&args.name)?;
    let client = crate::connect::client(global, None).await?;
    let mut report = String::new();
    if args.redisson {
        redisson(&client, &args.name, &mut report).await?;
        if report.is_empty() {
            let message = format!(
                "nothing was held under {:?} in Redisson's layout; nothing deleted\n",
                args.name
            );
            if args.missing_ok {
                crate::print_stdout(&message);
                return Ok(0);
            }
            return Err(Failure::new(exit::NOTHING_HELD, message.trim_end()));
        }
        crate::print_stdout(&report);
        tracing::info!(lock = %args.name, "force-unlocked (Redisson layout); waiters woken");
        return Ok(0);
    }
    // Each kind is read first, to say what is being deleted. The holders may change in
    // between; each deletion itself is one atomic script.
    plain(&client, &args.name, &mut report).await?;
    read_write(&client, &args.name, &mut report).await?;
    fair(&client, &args.name, &mut report).await?;
    semaphore(&client, &args.name, &mut report).await?;
    if report.is_empty() {
        let message = format!(
            "nothing was held under {:?} (lock, read-write lock, fair lock, semaphore); \
             nothing deleted\n",
            args.name
        );
        if args.missing_ok {
            crate::print_stdout(&message);
            return Ok(0);
        }
        return Err(Failure::new(exit::NOTHING_HELD, message.trim_end()));
    }
    crate::print_stdout(&report);
    tracing::info!(lock = %args.name, "force-unlocked; waiters woken");
    Ok(0)
}

async fn plain(client: &LockClient, name: &str, report: &mut String) -> Result<(), Failure> {
    let lock = client.lock(name)?;
    let before = lock.state().await?;
    if !lock.force_unlock().await? {
        return Ok(());
    }
    let ttl = before
        .remaining
        .map_or_else(String::new, |ttl| format!(", {} left", human(ttl)));
    report.push_str(&format!(
        "deleted lock {name:?} (key {}{ttl})\n",
        lock.key()
    ));
    for (owner, count) in &before.holders {
        let holds = if *count == 1 { "hold" } else { "holds" };
        report.push_str(&format!("  was held by {owner} ({count} {holds})\n"));
    }
    Ok(())
}

/// The hash `name` in Redisson's layout (an RLock or a read-write lock).
async fn redisson(client: &LockClient, name: &str, report: &mut String) -> Result<(), Failure> {
    let lock = client.redisson_lock(name)?;
    let before = lock.state().await?;
    if !lock.force_unlock().await? {
        return Ok(());
    }
    let ttl = before
        .remaining
        .map_or_else(String::new, |ttl| format!(", {} left", human(ttl)));
    report.push_str(&format!(
        "deleted {name:?} in Redisson's layout (key {}{ttl})\n",
        lock.key()
    ));
    for (owner, count) in before.holders.iter().filter(|(field, _)| field != "mode") {
        let holds = if *count == 1 { "hold" } else { "holds" };
        report.push_str(&format!("  was held by {owner} ({count} {holds})\n"));
    }
    Ok(())
}

async fn read_write(client: &LockClient, name: &str, report: &mut String) -> Result<(), Failure> {
    let rw = client.rw_lock(name)?;
    let before = rw.state().await?;
    if !rw.force_unlock().await? {
        return Ok(());
    }
    report.push_str(&format!(
        "deleted read-write lock {name:?} ({} write, {} read holds)\n",
        before.writes, before.reads
    ));
    if let Some(writer) = &before.writer {
        report.push_str(&format!("  was written by {writer}\n"));
    }
    Ok(())
}

async fn fair(client: &LockClient, name: &str, report: &mut String) -> Result<(), Failure> {
    let fair = client.fair_lock(name)?;
    let before = fair.state().await?;
    if !fair.force_unlock().await? {
        return Ok(());
    }
    report.push_str(&format!(
        "deleted fair lock {name:?} ({} waiting keep their places)\n",
        before.waiters
    ));
    if let Some(holder) = &before.holder {
        report.push_str(&format!("  was held by {holder}\n"));
    }
    Ok(())
}

async fn semaphore(client: &LockClient, name: &str, report: &mut String) -> Result<(), Failure> {
    let semaphore = client.semaphore(name)?;
    let taken = semaphore.force_release().await?;
    if taken == 0 {
        return Ok(());
    }
    let permits = if taken == 1 { "permit" } else { "permits" };
    report.push_str(&format!(
        "took back {taken} {permits} of semaphore {name:?} (its size stays)\n"
    ));
    Ok(())
}
