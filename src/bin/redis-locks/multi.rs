//! `run NAME --also NAME2 ...`: the locks NAME, NAME2, ... taken together, all or none (a
//! [`MultiLock`] on the one target); with `--read`, `--write` or `--fair`, that kind of
//! each name.
//!
//! The library takes the members in one global order (by key), so runs that name the
//! same locks in other orders never wait for each other in a cycle, and an attempt that
//! fails or runs out of time gives back what it took. The command gets `REDIS_LOCK_NAMES`
//! (the names in that order, one per line) and, with `--fenced`, `REDIS_LOCK_TOKEN` (the
//! tokens, comma-separated, in the same order).

use std::time::Duration;

use redis_locks::{Error, LockClient, Member, MultiGuard, MultiLock};
use tokio::time::Instant;

use crate::acquire::{Kind, RELEASED_MEANWHILE, fair_why, lock_why, rw_why};
use crate::args::RunArgs;
use crate::exit::Failure;
use crate::held::{
    Acquired, CANCEL_SETTLE, Holding, Pending, not_acquired, prepare, prepare_fair, prepare_rw,
    wait_limit,
};
use crate::signals::Signals;

/// Each name of NAME and the --also names is valid and named once (before connecting:
/// these are usage errors whether or not Redis is reachable).
pub fn check_names(args: &RunArgs) -> Result<(), Failure> {
    let mut seen = vec![args.name.as_str()];
    for name in &args.also {
        redis_locks::validate_name(name)?;
        if seen.contains(&name.as_str()) {
            return Err(Failure::usage(format!(
                "lock {name:?} is named twice (NAME and --also name the locks to take together)"
            )));
        }
        seen.push(name);
    }
    Ok(())
}

/// The member `name` of the kind `kind` (the lock, a read, the write or the fair lock).
fn member(client: &LockClient, name: &str, args: &RunArgs, kind: Kind) -> Result<Member, Failure> {
    Ok(match kind {
        Kind::Read => Member::Read(prepare_rw(client, name, args)?),
        Kind::Write => Member::Write(prepare_rw(client, name, args)?),
        Kind::Fair => Member::Fair(prepare_fair(client, name, args)?),
        Kind::Lock | Kind::Permits(_) => Member::Lock(prepare(client, name, args)?),
        // clap refuses it first; a multi-lock has no member in Redisson's layout.
        Kind::Redisson | Kind::RedissonRw { .. } => {
            return Err(Failure::usage("--redisson does not go with --also"));
        }
    })
}

/// Takes NAME and the --also names (of the kind `kind`), all or none.
pub async fn acquire(
    client: &LockClient,
    args: &RunArgs,
    kind: Kind,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let mut members = vec![member(client, &args.name, args, kind)?];
    for name in &args.also {
        members.push(member(client, name, args, kind)?);
    }
    let multi = MultiLock::new(members)?;
    let wait = wait_limit(args);
    let attempt = async {
        match wait {
            None => multi.acquire().await.map(Some),
            Some(wait) if wait.is_zero() => multi.try_acquire().await,
            Some(wait) => multi.try_acquire_for(wait).await,
        }
    };
    tokio::select! {
        acquired = attempt => match acquired? {
            Some(guard) => Ok(Acquired::Guard(Box::new(MultiHeld {
                guard,
                name: args.name.clone(),
                also: args.also.clone(),
                flag: kind.flag(),
            }))),
            None => Ok(Acquired::Busy(
                busy_message(&multi, args, started.elapsed()).await,
            )),
        },
        got = signals.recv() => {
            // Members taken so far are given back in the background; let that reach Redis.
            let _ = tokio::time::timeout(CANCEL_SETTLE, client.flush()).await;
            Ok(Acquired::Interrupted(got.signal))
        },
    }
}

/// `locks "a", "b"`, in the order named.
fn describe(name: &str, also: &[String]) -> String {
    let mut text = format!("locks {name:?}");
    for other in also {
        text.push_str(&format!(", {other:?}"));
    }
    text
}

/// "locks "a", "b" not acquired (--no-wait): "b" held by ..., expires in 29s", as of now
/// (best effort: what was held at the failed attempt may have been released since).
async fn busy_message(multi: &MultiLock, args: &RunArgs, waited: Duration) -> String {
    let once = wait_limit(args).is_some_and(|wait| wait.is_zero());
    let mut held = Vec::new();
    for member in multi.members() {
        let why = match member {
            Member::Read(rw) => rw_why(rw, false).await,
            Member::Write(rw) => rw_why(rw, true).await,
            Member::Fair(fair) => fair_why(fair, once).await,
            Member::Lock(lock) => lock_why(lock).await,
            other => format!("{other:?}"),
        };
        if why != RELEASED_MEANWHILE {
            held.push(format!("{:?} {why}", member.name()));
        }
    }
    let why = if held.is_empty() {
        RELEASED_MEANWHILE.to_owned()
    } else {
        held.join("; ")
    };
    let how = not_acquired(args, waited);
    format!("{} {how}: {why}", describe(&args.name, &args.also))
}

/// The locks of a multi-lock, held together.
pub struct MultiHeld {
    guard: MultiGuard,
    /// NAME, and the --also names, as given.
    name: String,
    also: Vec<String>,
    /// --read, --write or --fair: the kind of every member; `None` for locks.
    flag: Option<&'static str>,
}

impl Holding for MultiHeld {
    fn name(&self) -> &str {
        &self.name
    }

    /// `multi-lock "a", "b"`, in the order named (`multi-lock "a", "b" (--read)`).
    fn what(&self) -> String {
        let what = format!(
            "multi-{}",
            describe(&self.name, &self.also).replacen("locks", "lock", 1)
        );
        match self.flag {
            Some(flag) => format!("{what} ({flag})"),
            None => what,
        }
    }

    /// Every member has the same owner (this process's).
    fn owner(&self) -> &str {
        self.guard
            .guards()
            .first()
            .map_or("", |guard| guard.owner())
    }

    /// The names, one per line, in member order (names contain no control characters).
    fn names(&self) -> Option<String> {
        let names: Vec<&str> = self.guard.guards().iter().map(|g| g.name()).collect();
        Some(names.join("\n"))
    }

    /// The fencing tokens, comma-separated in member order; `None` without --fenced.
    fn token(&self) -> Option<String> {
        let tokens = self.guard.fencing_tokens();
        if tokens.iter().all(Option::is_none) {
            return None;
        }
        let text: Vec<String> = tokens
            .iter()
            .map(|token| token.map_or_else(String::new, |token| token.to_string()))
            .collect();
        Some(text.join(","))
    }

    fn is_multi(&self) -> bool {
        true
    }

    fn lost(&self) -> Pending<'_, ()> {
        Box::pin(self.guard.lost())
    }

    /// Which member was lost, and why.
    fn lost_reason(&self) -> Option<String> {
        let named = self.guard.guards().iter().find_map(|guard| {
            guard
                .lost_reason()
                .map(|reason| format!("{:?}: {reason}", guard.name()))
        });
        named.or_else(|| {
            self.guard
                .is_lost()
                .then(|| "one of the locks was lost".to_owned())
        })
    }

    /// Releases every member; `Err(LockLost)` naming a member that had been lost.
    fn release(self: Box<Self>) -> Pending<'static, Result<(), Error>> {
        Box::pin(async move {
            let result = self.guard.release().await;
            match &result {
                Ok(()) => tracing::info!("released the locks"),
                Err(err) => tracing::debug!(error = %err, "release of the locks failed"),
            }
            result
        })
    }
}
