//! `redis-locks unlock --force`: delete a lock whoever holds it.

use crate::args::{Global, UnlockArgs};
use crate::duration::human;
use crate::exit::Failure;

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
    let lock = client.lock(&args.name)?;
    // Read first, to say what is being deleted. The holders may change in between; the
    // deletion itself is one atomic script.
    let before = lock.state().await?;
    let deleted = lock.force_unlock().await?;
    if !deleted {
        crate::print_stdout(&format!(
            "lock {:?} was not held; nothing deleted\n",
            args.name
        ));
        return Ok(0);
    }
    let ttl = before
        .ttl
        .map_or_else(String::new, |ttl| format!(", {} left", human(ttl)));
    let mut report = format!("deleted lock {:?} (key {}{ttl})\n", args.name, lock.key());
    for (owner, count) in &before.holders {
        let holds = if *count == 1 { "hold" } else { "holds" };
        report.push_str(&format!("  was held by {owner} ({count} {holds})\n"));
    }
    crate::print_stdout(&report);
    tracing::info!(lock = %args.name, "force-unlocked; waiters woken");
    Ok(0)
}
