//! Taking what `run` holds when it is one lock of one kind: the plain lock, a semaphore
//! permit, a read or write hold, a fair-lock hold (the multi-lock and RedLock have their
//! own modules), and the message that says why it was not taken.

use std::convert::Infallible;
use std::time::Duration;

use redis_locks::{Error, FairLock, Lock, LockClient, RwLock};
use tokio::time::Instant;

use crate::args::RunArgs;
use crate::duration::human;
use crate::exit::Failure;
use crate::held::{
    Acquired, CANCEL_SETTLE, not_acquired, prepare_fair, prepare_redisson, prepare_rw, wait_limit,
};
use crate::indicator;
use crate::signals::Signals;

/// What `run` takes: the lock NAME, or another kind of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Lock,
    /// `--permits N`: one permit of the semaphore NAME of size N.
    Permits(u64),
    /// `--read`: a read hold of the read-write lock NAME.
    Read,
    /// `--write`: the write hold of the read-write lock NAME.
    Write,
    /// `--fair`: the fair lock NAME.
    Fair,
    /// `--redisson`: the lock NAME in Redisson's RLock layout.
    Redisson,
    /// `--redisson --read` / `--redisson --write`: a read or the write of the read-write
    /// lock NAME in Redisson's RReadWriteLock layout.
    RedissonRw {
        write: bool,
    },
}

impl Kind {
    /// From the arguments (clap lets at most one of the flags through).
    pub fn of(args: &RunArgs) -> Kind {
        if args.redisson {
            return match (args.read, args.write) {
                (false, false) => Kind::Redisson,
                (_, write) => Kind::RedissonRw { write },
            };
        }
        match args.permits {
            Some(size) => Kind::Permits(size),
            None if args.read => Kind::Read,
            None if args.write => Kind::Write,
            None if args.fair => Kind::Fair,
            None => Kind::Lock,
        }
    }

    /// The flag that asked for it; `None` for the lock.
    pub fn flag(self) -> Option<&'static str> {
        match self {
            Kind::Lock => None,
            Kind::Permits(_) => Some("--permits"),
            Kind::Read => Some("--read"),
            Kind::Write => Some("--write"),
            Kind::Fair => Some("--fair"),
            Kind::Redisson => Some("--redisson"),
            Kind::RedissonRw { write: false } => Some("--redisson --read"),
            Kind::RedissonRw { write: true } => Some("--redisson --write"),
        }
    }

    /// What it takes, in the plural, for messages.
    pub fn what(self) -> &'static str {
        match self {
            Kind::Lock => "locks",
            Kind::Permits(_) => "semaphore permits",
            Kind::Read | Kind::Write => "read-write lock holds",
            Kind::Fair => "fair lock holds",
            Kind::Redisson => "Redisson-layout lock holds",
            Kind::RedissonRw { .. } => "Redisson-layout read-write lock holds",
        }
    }
}

pub async fn acquire(
    lock: &Lock,
    args: &RunArgs,
    quiet: bool,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let wait = wait_limit(args);
    let attempt = async {
        match wait {
            None => lock.acquire().await.map(Some),
            Some(wait) if wait.is_zero() => lock.try_acquire().await,
            Some(wait) => match lock.acquire_timeout(wait).await {
                Ok(guard) => Ok(Some(guard)),
                Err(Error::Timeout { .. }) => Ok(None),
                Err(err) => Err(err),
            },
        }
    };
    let indicator = async {
        if indicator::wanted(quiet) {
            indicator::show(lock, started).await;
        }
        std::future::pending::<Infallible>().await
    };
    tokio::select! {
        acquired = attempt => match acquired? {
            Some(guard) => Ok(Acquired::Guard(Box::new(guard))),
            None => Ok(Acquired::Busy(busy_message(lock, args, started.elapsed()).await)),
        },
        got = signals.recv() => {
            settle_cancelled(lock).await;
            Ok(Acquired::Interrupted(got.signal))
        },
        never = indicator => match never {},
    }
}

/// `--permits N`: one permit of the semaphore NAME of size N.
pub async fn acquire_permit(
    client: &LockClient,
    args: &RunArgs,
    size: u64,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let semaphore = client.semaphore(&args.name)?;
    let semaphore = match args.lease {
        Some(lease) => semaphore.with_lease(lease)?,
        None => semaphore,
    };
    if !semaphore.try_set_permits(size).await? && semaphore.state().await?.size != Some(size) {
        let previous = semaphore.set_permits(size).await?;
        tracing::info!(semaphore = %args.name, ?previous, size, "resized");
    }
    let wait = wait_limit(args);
    let attempt = async {
        match wait {
            None => semaphore.acquire(1).await.map(Some),
            Some(wait) if wait.is_zero() => semaphore.try_acquire(1).await,
            Some(wait) => semaphore.try_acquire_for(1, wait).await,
        }
    };
    tokio::select! {
        acquired = attempt => match acquired? {
            Some(permit) => Ok(Acquired::Guard(Box::new(permit))),
            None => {
                let how = if wait.is_some_and(|w| w.is_zero()) {
                    "no permit free (--no-wait)".to_owned()
                } else {
                    format!("no permit free within {}", human(started.elapsed()))
                };
                Ok(Acquired::Busy(format!(
                    "semaphore {:?} ({size} permits): {how}",
                    args.name
                )))
            }
        },
        got = signals.recv() => {
            let _ = tokio::time::timeout(CANCEL_SETTLE, client.flush()).await;
            Ok(Acquired::Interrupted(got.signal))
        },
    }
}

/// `--read` or `--write` (`write`): a hold of the read-write lock NAME.
pub async fn acquire_rw(
    client: &LockClient,
    args: &RunArgs,
    write: bool,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let lock = prepare_rw(client, &args.name, args)?;
    let wait = wait_limit(args);
    let attempt = async {
        match (write, wait) {
            (false, None) => lock.read().await.map(Some),
            (false, Some(wait)) if wait.is_zero() => lock.try_read().await,
            (false, Some(wait)) => lock.try_read_for(wait).await,
            (true, None) => lock.write().await.map(Some),
            (true, Some(wait)) if wait.is_zero() => lock.try_write().await,
            (true, Some(wait)) => lock.try_write_for(wait).await,
        }
    };
    tokio::select! {
        acquired = attempt => match acquired? {
            Some(guard) => Ok(Acquired::Guard(Box::new(guard))),
            None => Ok(Acquired::Busy(
                rw_busy_message(&lock, write, args, started.elapsed()).await,
            )),
        },
        got = signals.recv() => {
            let _ = tokio::time::timeout(CANCEL_SETTLE, client.flush()).await;
            Ok(Acquired::Interrupted(got.signal))
        },
    }
}

/// `--fair`: the fair lock NAME, in its turn.
pub async fn acquire_fair(
    client: &LockClient,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let lock = prepare_fair(client, &args.name, args)?;
    let wait = wait_limit(args);
    let attempt = async {
        match wait {
            None => lock.acquire().await.map(Some),
            Some(wait) if wait.is_zero() => lock.try_acquire().await,
            Some(wait) => lock.try_acquire_for(wait).await,
        }
    };
    tokio::select! {
        acquired = attempt => match acquired? {
            Some(guard) => Ok(Acquired::Guard(Box::new(guard))),
            None => Ok(Acquired::Busy(
                fair_busy_message(&lock, args, started.elapsed()).await,
            )),
        },
        got = signals.recv() => {
            // The wait leaves the queue when cancelled; let that reach Redis.
            let _ = tokio::time::timeout(CANCEL_SETTLE, client.flush()).await;
            Ok(Acquired::Interrupted(got.signal))
        },
    }
}

/// `--redisson`: the lock NAME in Redisson's RLock layout.
pub async fn acquire_redisson(
    client: &LockClient,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let lock = prepare_redisson(client, &args.name, args)?;
    let wait = wait_limit(args);
    let attempt = async {
        match wait {
            None => lock.acquire().await.map(Some),
            Some(wait) if wait.is_zero() => lock.try_acquire().await,
            Some(wait) => lock.try_acquire_for(wait).await,
        }
    };
    tokio::select! {
        acquired = attempt => match acquired? {
            Some(guard) => Ok(Acquired::Guard(Box::new(guard))),
            None => Ok(Acquired::Busy(format!(
                "lock {:?} (Redisson layout) {}: held by another owner",
                args.name,
                not_acquired(args, started.elapsed())
            ))),
        },
        got = signals.recv() => {
            // An attempt in flight is given back in the background; let that reach Redis.
            let _ = tokio::time::timeout(CANCEL_SETTLE, client.flush()).await;
            Ok(Acquired::Interrupted(got.signal))
        },
    }
}

/// `--redisson --read` / `--redisson --write`: a read or the write of the read-write lock
/// NAME in Redisson's RReadWriteLock layout.
pub async fn acquire_redisson_rw(
    client: &LockClient,
    args: &RunArgs,
    write: bool,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let lock = crate::held::prepare_redisson_rw(client, &args.name, args)?;
    let wait = wait_limit(args);
    let attempt = async {
        match (write, wait) {
            (false, None) => lock.read().await.map(Some),
            (false, Some(wait)) if wait.is_zero() => lock.try_read().await,
            (false, Some(wait)) => lock.try_read_for(wait).await,
            (true, None) => lock.write().await.map(Some),
            (true, Some(wait)) if wait.is_zero() => lock.try_write().await,
            (true, Some(wait)) => lock.try_write_for(wait).await,
        }
    };
    tokio::select! {
        acquired = attempt => match acquired? {
            Some(guard) => Ok(Acquired::Guard(Box::new(guard))),
            None => Ok(Acquired::Busy(format!(
                "read-write lock {:?} (Redisson layout, {}) {}: {}",
                args.name,
                if write { "write" } else { "read" },
                not_acquired(args, started.elapsed()),
                if write { "held by readers or a writer" } else { "held by a writer" },
            ))),
        },
        got = signals.recv() => {
            let _ = tokio::time::timeout(CANCEL_SETTLE, client.flush()).await;
            Ok(Acquired::Interrupted(got.signal))
        },
    }
}

/// "lock "x" is held by ..., not acquired ..." with the holder as of now (best effort).
async fn busy_message(lock: &Lock, args: &RunArgs, waited: Duration) -> String {
    let holder = lock_why(lock).await;
    let how = not_acquired(args, waited);
    format!("lock {:?} {how}: {holder}", args.name)
}

/// What a lock that could not be taken was found holding it, as of now (best effort):
/// "held by OWNER, expires in 29s"; [`RELEASED_MEANWHILE`] once free.
pub async fn lock_why(lock: &Lock) -> String {
    match lock.state().await {
        Ok(state) => match state.holders.first() {
            Some((owner, _)) => match state.remaining {
                Some(ttl) => format!("held by {owner}, expires in {}", human(ttl)),
                None => format!("held by {owner}"),
            },
            None => RELEASED_MEANWHILE.to_owned(),
        },
        Err(_) => "holder unknown".to_owned(),
    }
}

/// Why a lock that could not be taken is not held any more when looked at.
pub const RELEASED_MEANWHILE: &str = "released meanwhile";

/// "read-write lock "x" (write) not acquired ...: held by a writer (...)" (or "2 readers
/// hold it", "a writer is waiting for it"), as of now (best effort).
async fn rw_busy_message(lock: &RwLock, write: bool, args: &RunArgs, waited: Duration) -> String {
    let why = rw_why(lock, write).await;
    let side = if write { "write" } else { "read" };
    let how = not_acquired(args, waited);
    format!("read-write lock {:?} ({side}) {how}: {why}", args.name)
}

/// What stands in the way of a read (or with `write`, the write) of `lock`, as of now.
pub async fn rw_why(lock: &RwLock, write: bool) -> String {
    match lock.state().await {
        Ok(state) if state.writes > 0 => {
            let mut text = match &state.writer {
                Some(owner) => format!("held by a writer ({owner})"),
                None => "held by a writer".to_owned(),
            };
            if let Some(left) = state.remaining {
                text.push_str(&format!(", expires in {}", human(left)));
            }
            text
        }
        Ok(state) if write && state.reads > 0 => match state.reads {
            1 => "1 reader holds it".to_owned(),
            n => format!("{n} readers hold it"),
        },
        Ok(state) if state.writer_waiting => {
            if write {
                "another writer is waiting for it".to_owned()
            } else {
                "a writer is waiting for it (new readers let it go first)".to_owned()
            }
        }
        Ok(_) => RELEASED_MEANWHILE.to_owned(),
        Err(_) => "holder unknown".to_owned(),
    }
}

/// "fair lock "x" not acquired ...: held by ..., 2 waiters ahead", as of now (best effort).
async fn fair_busy_message(lock: &FairLock, args: &RunArgs, waited: Duration) -> String {
    let once = wait_limit(args).is_some_and(|wait| wait.is_zero());
    let why = fair_why(lock, once).await;
    let how = not_acquired(args, waited);
    format!("fair lock {:?} {how}: {why}", args.name)
}

/// Who holds `lock` and how many wait, as of now; `once`: the attempt tried once (so
/// everyone queued is ahead; after a wait we left the queue).
pub async fn fair_why(lock: &FairLock, once: bool) -> String {
    match lock.state().await {
        Ok(state) => {
            let mut parts = Vec::new();
            if let Some(holder) = &state.holder {
                parts.push(match state.remaining {
                    Some(left) => format!("held by {holder}, expires in {}", human(left)),
                    None => format!("held by {holder}"),
                });
            }
            if state.waiters > 0 {
                let waiters = if state.waiters == 1 {
                    "waiter"
                } else {
                    "waiters"
                };
                let place = if once { "ahead" } else { "queued" };
                parts.push(format!("{} {waiters} {place}", state.waiters));
            }
            if parts.is_empty() {
                RELEASED_MEANWHILE.to_owned()
            } else {
                parts.join(", ")
            }
        }
        Err(_) => "holder unknown".to_owned(),
    }
}

/// The acquire was cancelled by a signal. An attempt in flight at that moment may still
/// succeed; the library then releases that hold in a background task. Wait (briefly) for
/// that background work, so the hold does not linger for a whole lease after we exit.
async fn settle_cancelled(lock: &Lock) {
    let _ = tokio::time::timeout(CANCEL_SETTLE, lock.client().flush()).await;
}
