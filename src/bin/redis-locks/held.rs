//! What `run` holds, whatever the kind: one trait, [`Holding`], that every kind's guard
//! is seen through (the plain lock, a semaphore permit, a read or write hold, a fair-lock
//! hold, a multi-lock, a RedLock), what acquiring any kind gives ([`Acquired`]), and the
//! helpers the kinds' acquire functions share. `run.rs`, `multi.rs` and `redlock.rs` all
//! depend on this module, not on each other.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use nix::sys::signal::Signal;
use redis_locks::{Error, FairLock, Guard, GuardKind, Lock, LockClient, RwLock};

use crate::args::RunArgs;
use crate::duration::human;
use crate::exit::Failure;

/// A future a [`Holding`] returns (boxed: the trait is used as `dyn Holding`).
pub type Pending<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A held guard of any kind, as `run` uses it: what to tell the command (its environment),
/// its lost signal, and its release. Renewed, lost and released alike for every kind.
pub trait Holding: Send + Sync {
    /// `REDIS_LOCK_NAME`: the name (NAME, also with --also).
    fn name(&self) -> &str;

    /// What is held, for messages: `lock "x"`, `multi-lock "a", "b"` or `RedLock "x"`.
    fn what(&self) -> String {
        format!("lock {:?}", self.name())
    }

    /// `REDIS_LOCK_OWNER`: the lock's owner id, or the permit id.
    fn owner(&self) -> &str;

    /// `REDIS_LOCK_TOKEN`: the fencing token; a multi-lock's tokens, comma-separated in
    /// member order.
    fn token(&self) -> Option<String> {
        None
    }

    /// `REDIS_LOCK_NAMES`: a multi-lock's names, one per line, in member order.
    fn names(&self) -> Option<String> {
        None
    }

    /// Whether it is several locks (messages say "locks").
    fn is_multi(&self) -> bool {
        false
    }

    /// Resolves when it is lost.
    fn lost(&self) -> Pending<'_, ()>;

    /// Why it was lost, when it was.
    fn lost_reason(&self) -> Option<String>;

    /// Gives it back. `Err(LockLost)` when it had been lost.
    fn release(self: Box<Self>) -> Pending<'static, Result<(), Error>>;
}

/// What `run` holds.
pub type Held = Box<dyn Holding>;

/// Logs how a release went.
fn logged(result: Result<(), Error>, what: &str) -> Result<(), Error> {
    match &result {
        Ok(()) => tracing::info!("released {what}"),
        Err(err) => tracing::debug!(error = %err, "release of {what} failed"),
    }
    result
}

/// Every kind's guard (the plain lock, a semaphore permit, a read or write hold, a
/// fair-lock hold) is the library's one generic guard.
impl<K: GuardKind> Holding for Guard<K> {
    fn name(&self) -> &str {
        Guard::name(self)
    }

    fn owner(&self) -> &str {
        Guard::owner(self)
    }

    fn token(&self) -> Option<String> {
        self.fencing_token().map(|token| token.to_string())
    }

    fn lost(&self) -> Pending<'_, ()> {
        Box::pin(Guard::lost(self))
    }

    fn lost_reason(&self) -> Option<String> {
        Guard::lost_reason(self).map(|reason| reason.to_string())
    }

    /// Gives the hold back (or, when it is already lost, just stops tracking it: its
    /// entry in Redis is gone or ends with its lease, and a release could only wait for a
    /// Redis that may be unreachable).
    fn release(self: Box<Self>) -> Pending<'static, Result<(), Error>> {
        Box::pin(async move {
            if let Some(reason) = Guard::lost_reason(&self) {
                let name = Guard::name(&self).to_owned();
                self.detach();
                return Err(Error::LockLost { name, reason });
            }
            let what = format!("{:?}", Guard::name(&self));
            logged(Guard::release(*self).await, &what)
        })
    }
}

/// What acquiring gave.
pub enum Acquired {
    Guard(Held),
    /// Not acquired: `--wait` ran out or `--no-wait` found it held. The message says so.
    Busy(String),
    Interrupted(Signal),
}

/// The most we wait for the library's background release of an acquire that was in
/// flight when a signal cancelled the wait.
pub const CANCEL_SETTLE: Duration = Duration::from_secs(2);
/// An explicit owner id, unique to this process and unguessable (the client id is a
/// random UUID), so that REDIS_LOCK_OWNER names the owner `status` shows.
pub fn cli_owner(client: &LockClient) -> String {
    format!("{}:cli-{}", client.id(), std::process::id())
}

/// `--wait`/`--no-wait` as one value: `None` waits forever, zero tries once.
pub fn wait_limit(args: &RunArgs) -> Option<Duration> {
    if args.no_wait {
        Some(Duration::ZERO)
    } else {
        args.wait
    }
}

/// "not acquired (--no-wait)" or "not acquired within 1.5s".
pub fn not_acquired(args: &RunArgs, waited: Duration) -> String {
    if wait_limit(args).is_some_and(|wait| wait.is_zero()) {
        "not acquired (--no-wait)".to_owned()
    } else {
        format!("not acquired within {}", human(waited))
    }
}

/// A handle of any kind with what `run` asks of every kind: the CLI's owner, --lease,
/// --fenced (clap refuses --fenced with --read and --permits: they carry no token).
macro_rules! with_run_options {
    ($handle:expr, $client:expr, $args:expr) => {{
        let handle = $handle.with_owner(cli_owner($client))?;
        let handle = match $args.lease {
            Some(lease) => handle.with_lease(lease)?,
            None => handle,
        };
        if $args.fenced {
            handle.with_fencing()
        } else {
            handle
        }
    }};
}

/// The lock `name` as `run` takes it.
pub fn prepare(client: &LockClient, name: &str, args: &RunArgs) -> Result<Lock, Failure> {
    Ok(with_run_options!(client.lock(name)?, client, args))
}

/// The read-write lock `name` as `run --read` or `--write` takes it.
pub fn prepare_rw(client: &LockClient, name: &str, args: &RunArgs) -> Result<RwLock, Failure> {
    Ok(with_run_options!(client.rw_lock(name)?, client, args))
}

/// The lock `name` in Redisson's layout as `run --redisson` takes it (the CLI's owner,
/// --lease; clap refuses --fenced with it).
pub fn prepare_redisson(
    client: &LockClient,
    name: &str,
    args: &RunArgs,
) -> Result<redis_locks::RedissonLock, Failure> {
    let lock = client.redisson_lock(name)?.with_owner(cli_owner(client))?;
    Ok(match args.lease {
        Some(lease) => lock.with_lease(lease)?,
        None => lock,
    })
}

/// The read-write lock `name` in Redisson's layout as `run --redisson --read`/`--write`
/// takes it.
pub fn prepare_redisson_rw(
    client: &LockClient,
    name: &str,
    args: &RunArgs,
) -> Result<redis_locks::RedissonRwLock, Failure> {
    let lock = client
        .redisson_rw_lock(name)?
        .with_owner(cli_owner(client))?;
    Ok(match args.lease {
        Some(lease) => lock.with_lease(lease)?,
        None => lock,
    })
}

/// The fair lock `name` as `run --fair` takes it.
pub fn prepare_fair(client: &LockClient, name: &str, args: &RunArgs) -> Result<FairLock, Failure> {
    Ok(with_run_options!(client.fair_lock(name)?, client, args))
}
