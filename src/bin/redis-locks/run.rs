//! `redis-locks run`: acquire a lock, run a command under it, release it.
//!
//! The command is supervised: SIGINT, SIGTERM and SIGHUP are forwarded to it, and if the
//! lock is lost it is sent SIGTERM, then SIGKILL after a grace period. The lock is released
//! only once the command has exited.
//!
//! "The lock" is the lock NAME, or with `--permits N`, `--read`, `--write` or `--fair` a
//! semaphore permit, a read or write hold of the read-write lock, or a hold of the fair
//! lock of that name; with `--also` the locks NAME, NAME2, ... together (a multi-lock,
//! [`crate::multi`]); with `--redlock` the RedLock NAME over independent servers
//! ([`crate::redlock`]). All of them are held as one [`Held`](crate::held::Held) (a boxed
//! [`Holding`](crate::held::Holding)) and renewed, lost and released alike.
//!
//! With `--process-group` (the default on Linux) "the command" is its whole process group
//! (see [`crate::group`]): signals and the stop on a lost lock reach everything it started,
//! whatever it left running when it exits is stopped the same way before the lock is
//! released, and if `redis-locks` itself dies, even by SIGKILL, the group is killed at
//! once. With `--no-process-group` (the only mode elsewhere), these reach the command's
//! own process only; on Linux the kernel still kills the command (not its children) when
//! `redis-locks` dies, elsewhere the command outlives a killed `redis-locks`.

use std::convert::Infallible;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use redis_locks::{Error, FairLock, Lock, LockClient, RwLock};
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::args::{Global, RunArgs};
use crate::duration::human;
use crate::exit::{self, Failure};
use crate::group::{self, Group, Mode};
use crate::held::{Acquired, CANCEL_SETTLE, Held, cli_owner, not_acquired, prepare, wait_limit};
use crate::signals::{self, Received, Signals};
use crate::{connect, indicator};

/// How long what the command left behind may take to exit by itself (processes ending at
/// the same time as the command, not reaped yet) before it is told to.
const LEFTOVER_SETTLE: Duration = Duration::from_millis(100);

/// After SIGKILL, how long we wait for the group's processes to be gone (reaped) before
/// releasing the lock anyway: they can no longer run.
const KILL_SETTLE: Duration = Duration::from_secs(2);

/// How often we look whether the command's group is empty.
const GROUP_POLL: Duration = Duration::from_millis(20);

pub async fn run(global: &Global, args: RunArgs) -> Result<u8, Failure> {
    // A bad name is a usage error, whether or not Redis is reachable.
    redis_locks::validate_name(&args.name)?;
    crate::multi::check_names(&args)?;
    let mode = group_mode(&args)?;
    let kind = Kind::of(&args);
    if global.min_replicas.is_some()
        && let Some(flag) = kind.flag()
    {
        return Err(Failure::usage(format!(
            "--min-replicas applies to locks; {} ({flag}) are not acknowledged by replicas",
            kind.what()
        )));
    }
    if global.redlock {
        crate::redlock::check_usage(global, &args, kind.flag())?;
    }
    // From here on SIGINT/SIGTERM/SIGHUP no longer kill us: every await below either
    // watches them or is short.
    let mut signals = Signals::listen()
        .map_err(|err| Failure::new(exit::INTERNAL, format!("cannot catch signals: {err}")))?;

    let watchdog = args.lease.is_none().then_some(args.watchdog);
    let acquired = if global.redlock {
        let servers = tokio::select! {
            servers = connect::redlock_clients(global, watchdog) => servers,
            got = signals.recv() => return Ok(interrupted(got.signal, &args.name, "connecting")),
        };
        let set = crate::redlock::RedSet::new(servers, &args, global.quiet)?;
        set.acquire(&args, &mut signals).await?
    } else {
        let client = tokio::select! {
            client = connect::client(global, watchdog) => client?,
            got = signals.recv() => return Ok(interrupted(got.signal, &args.name, "connecting")),
        };
        match kind {
            Kind::Lock if !args.also.is_empty() => {
                crate::multi::acquire(&client, &args, &mut signals).await?
            }
            Kind::Lock => {
                let lock = prepare(&client, &args.name, &args)?;
                acquire(&lock, &args, global.quiet, &mut signals).await?
            }
            Kind::Permits(size) => acquire_permit(&client, &args, size, &mut signals).await?,
            Kind::Read => acquire_rw(&client, &args, false, &mut signals).await?,
            Kind::Write => acquire_rw(&client, &args, true, &mut signals).await?,
            Kind::Fair => acquire_fair(&client, &args, &mut signals).await?,
        }
    };
    let guard = match acquired {
        Acquired::Guard(guard) => guard,
        Acquired::Interrupted(signal) => {
            return Ok(interrupted(signal, &args.name, "waiting for the lock"));
        }
        Acquired::Busy(message) => {
            if !global.quiet {
                eprintln!("redis-locks: {message}");
            }
            return Ok(exit::NOT_ACQUIRED);
        }
    };
    tracing::info!(
        lock = %guard.what(),
        owner = guard.owner(),
        token = guard.token(),
        "acquired"
    );

    // A signal between the acquire and now: the command has not started, so do not start it.
    if let Some(got) = signals.pending().await {
        let _ = guard.release().await;
        return Ok(interrupted(got.signal, &args.name, "acquiring the lock"));
    }
    let (mut child, mut group) = match spawn(&args, &guard, mode) {
        Ok(spawned) => spawned,
        Err(failure) => {
            // The command never ran, so how the release went does not change the outcome.
            let _ = guard.release().await;
            return Err(failure);
        }
    };
    let outcome = supervise(
        &mut child,
        &mut group,
        &guard,
        &mut signals,
        args.kill_after,
    )
    .await;
    let outcome = match outcome {
        Ok((status, stopping)) => {
            group.command_ended();
            clear(
                &group,
                stopping,
                args.kill_after,
                &mut signals,
                global.quiet,
            )
            .await;
            group.dismiss();
            Ok(status)
        }
        // We do not know what became of the command: dropping the group lets the watcher
        // kill it.
        Err(err) => Err(err),
    };
    let lost = guard.lost_reason();
    let what = guard.what();
    let multi = guard.is_multi();
    let released = guard.release().await;

    let status = match outcome {
        Ok(status) => status,
        Err(err) => {
            return Err(Failure::new(
                exit::INTERNAL,
                format!("cannot wait for the command: {err}"),
            ));
        }
    };
    match (lost, released) {
        (Some(reason), _) => Err(Failure::new(
            exit::LOCK_LOST,
            format!(
                "{what} was lost while the command ran ({reason}); the command {}",
                describe(status)
            ),
        )),
        (None, Err(Error::LockLost { name, reason })) => {
            // A multi-lock names the member that was lost.
            let reason = if multi {
                format!("{name:?}: {reason}")
            } else {
                reason.to_string()
            };
            Err(Failure::new(
                exit::LOCK_LOST,
                format!(
                    "{what} was found lost when releasing it ({reason}), so it may not have \
                     protected the command to its end; the command {}",
                    describe(status)
                ),
            ))
        }
        (None, Err(Error::ReleaseUnconfirmed { .. })) => Err(Failure::new(
            exit::LOCK_LOST,
            format!(
                "{what}: the release's reply was lost and the hold was gone when it was \
                 retried, so it cannot be confirmed that the lock protected the command to \
                 its end; the command {}",
                describe(status)
            ),
        )),
        (None, Err(err)) => {
            // The command ran under the lock to its end; only the release failed, and the
            // lease ends the hold. The command's status is the meaningful result.
            tracing::warn!(
                lock = %args.name,
                error = %err,
                "release failed; the lock expires with its lease"
            );
            Ok(status_code(status))
        }
        (None, Ok(())) => Ok(status_code(status)),
    }
}

/// `--process-group` or `--no-process-group`; the default is a process group of its own
/// where that mode exists (Linux).
fn group_mode(args: &RunArgs) -> Result<Mode, Failure> {
    if cfg!(target_os = "linux") {
        Ok(if args.no_process_group {
            Mode::SharedGroup
        } else {
            Mode::OwnGroup
        })
    } else if args.process_group {
        Err(Failure::usage(
            "--process-group is supported on Linux only (it needs PR_SET_PDEATHSIG to kill \
             the group when redis-locks dies); here the command always runs as with \
             --no-process-group",
        ))
    } else {
        Ok(Mode::SharedGroup)
    }
}

/// What `run` takes: the lock NAME, or another kind of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Lock,
    /// `--permits N`: one permit of the semaphore NAME of size N.
    Permits(u64),
    /// `--read`: a read hold of the read-write lock NAME.
    Read,
    /// `--write`: the write hold of the read-write lock NAME.
    Write,
    /// `--fair`: the fair lock NAME.
    Fair,
}

impl Kind {
    /// From the arguments (clap lets at most one of the flags through).
    fn of(args: &RunArgs) -> Kind {
        match args.permits {
            Some(size) => Kind::Permits(size),
            None if args.read => Kind::Read,
            None if args.write => Kind::Write,
            None if args.fair => Kind::Fair,
            None => Kind::Lock,
        }
    }

    /// The flag that asked for it; `None` for the lock.
    fn flag(self) -> Option<&'static str> {
        match self {
            Kind::Lock => None,
            Kind::Permits(_) => Some("--permits"),
            Kind::Read => Some("--read"),
            Kind::Write => Some("--write"),
            Kind::Fair => Some("--fair"),
        }
    }

    /// What it takes, in the plural, for messages.
    fn what(self) -> &'static str {
        match self {
            Kind::Lock => "locks",
            Kind::Permits(_) => "semaphore permits",
            Kind::Read | Kind::Write => "read-write lock holds",
            Kind::Fair => "fair lock holds",
        }
    }
}

async fn acquire(
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
async fn acquire_permit(
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
async fn acquire_rw(
    client: &LockClient,
    args: &RunArgs,
    write: bool,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let lock = client.rw_lock(&args.name)?.with_owner(cli_owner(client))?;
    let lock = match args.lease {
        Some(lease) => lock.with_lease(lease)?,
        None => lock,
    };
    // (clap refuses --fenced with --read: reads carry no token.)
    let lock = if args.fenced {
        lock.with_fencing()
    } else {
        lock
    };
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
async fn acquire_fair(
    client: &LockClient,
    args: &RunArgs,
    signals: &mut Signals,
) -> Result<Acquired, Failure> {
    let started = Instant::now();
    let lock = client
        .fair_lock(&args.name)?
        .with_owner(cli_owner(client))?;
    let lock = match args.lease {
        Some(lease) => lock.with_lease(lease)?,
        None => lock,
    };
    let lock = if args.fenced {
        lock.with_fencing()
    } else {
        lock
    };
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

/// "lock "x" is held by ..., not acquired ..." with the holder as of now (best effort).
async fn busy_message(lock: &Lock, args: &RunArgs, waited: Duration) -> String {
    let holder = match lock.state().await {
        Ok(state) => match state.holders.first() {
            Some((owner, _)) => match state.ttl {
                Some(ttl) => format!("held by {owner}, expires in {}", human(ttl)),
                None => format!("held by {owner}"),
            },
            None => "released meanwhile".to_owned(),
        },
        Err(_) => "holder unknown".to_owned(),
    };
    let how = not_acquired(args, waited);
    format!("lock {:?} {how}: {holder}", args.name)
}

/// "read-write lock "x" (write) not acquired ...: held by a writer (...)" (or "2 readers
/// hold it", "a writer is waiting for it"), as of now (best effort).
async fn rw_busy_message(lock: &RwLock, write: bool, args: &RunArgs, waited: Duration) -> String {
    let why = match lock.state().await {
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
        Ok(_) => "released meanwhile".to_owned(),
        Err(_) => "holder unknown".to_owned(),
    };
    let side = if write { "write" } else { "read" };
    let how = not_acquired(args, waited);
    format!("read-write lock {:?} ({side}) {how}: {why}", args.name)
}

/// "fair lock "x" not acquired ...: held by ..., 2 waiters ahead", as of now (best effort).
async fn fair_busy_message(lock: &FairLock, args: &RunArgs, waited: Duration) -> String {
    let once = wait_limit(args).is_some_and(|wait| wait.is_zero());
    let why = match lock.state().await {
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
                // After --no-wait everyone queued is ahead; after --wait we left the queue.
                let place = if once { "ahead" } else { "queued" };
                parts.push(format!("{} {waiters} {place}", state.waiters));
            }
            if parts.is_empty() {
                "released meanwhile".to_owned()
            } else {
                parts.join(", ")
            }
        }
        Err(_) => "holder unknown".to_owned(),
    };
    let how = not_acquired(args, waited);
    format!("fair lock {:?} {how}: {why}", args.name)
}

/// The acquire was cancelled by a signal. An attempt in flight at that moment may still
/// succeed; the library then releases that hold in a background task. Wait (briefly) for
/// that background work, so the hold does not linger for a whole lease after we exit.
async fn settle_cancelled(lock: &Lock) {
    let _ = tokio::time::timeout(CANCEL_SETTLE, lock.client().flush()).await;
}

/// Reports a signal that arrived before the command started (`during` says when) and
/// returns the exit code for it.
pub fn interrupted(signal: Signal, name: &str, during: &str) -> u8 {
    eprintln!("redis-locks: got {signal} while {during} (lock {name:?}); the command was not run");
    exit::signalled(signal as i32)
}

fn spawn(args: &RunArgs, guard: &Held, mode: Mode) -> Result<(Child, Group), Failure> {
    let Some((program, rest)) = args.command.split_first() else {
        return Err(Failure::usage("no command given after `--`"));
    };
    let mut command = Command::new(program);
    command
        .args(rest)
        .env("REDIS_LOCK_NAME", guard.name())
        .env("REDIS_LOCK_OWNER", guard.owner());
    match guard.token() {
        Some(token) => command.env("REDIS_LOCK_TOKEN", token),
        None => command.env_remove("REDIS_LOCK_TOKEN"),
    };
    match guard.names() {
        Some(names) => command.env("REDIS_LOCK_NAMES", names),
        None => command.env_remove("REDIS_LOCK_NAMES"),
    };
    let pending = group::prepare(&mut command, mode).map_err(|err| {
        Failure::new(
            exit::INTERNAL,
            format!("cannot set up the command's supervision: {err}"),
        )
    })?;
    match command.spawn() {
        Ok(child) => {
            let group = pending.spawned(&child);
            Ok((child, group))
        }
        Err(err) => {
            pending.failed();
            let shown = program.to_string_lossy();
            Err(match err.kind() {
                std::io::ErrorKind::NotFound => {
                    Failure::new(exit::NOT_FOUND, format!("command not found: {shown}"))
                }
                _ => Failure::new(
                    exit::CANNOT_EXECUTE,
                    format!("cannot execute {shown}: {err}"),
                ),
            })
        }
    }
}

/// How far stopping the command had gone when it exited.
#[derive(Debug, Clone, Copy)]
enum Stopping {
    /// Not asked to stop by us (signals may have been forwarded).
    No,
    /// Sent SIGTERM because the lock was lost; SIGKILL is due at this instant.
    Terminated(Instant),
    /// Sent SIGKILL.
    Killed,
}

/// Waits for the command, forwarding signals, and stopping it if the lock is lost.
async fn supervise(
    child: &mut Child,
    group: &mut Group,
    guard: &Held,
    signals: &mut Signals,
    kill_after: Duration,
) -> std::io::Result<(ExitStatus, Stopping)> {
    let kill_timer = tokio::time::sleep(Duration::MAX);
    tokio::pin!(kill_timer);
    let mut stopping = Stopping::No;
    loop {
        tokio::select! {
            status = child.wait() => return status.map(|status| (status, stopping)),
            got = signals.recv() => forward(group, got),
            () = guard.lost(), if matches!(stopping, Stopping::No) => {
                let reason = guard
                    .lost_reason()
                    .unwrap_or_else(|| "reason unknown".to_owned());
                eprintln!(
                    "redis-locks: {} was lost ({reason}); sending SIGTERM to the command, \
                     SIGKILL in {}",
                    guard.what(),
                    human(kill_after)
                );
                group.signal(Signal::SIGTERM);
                let kill_at = Instant::now() + kill_after;
                stopping = Stopping::Terminated(kill_at);
                kill_timer.as_mut().reset(kill_at);
            }
            () = &mut kill_timer, if matches!(stopping, Stopping::Terminated(_)) => {
                stopping = Stopping::Killed;
                eprintln!("redis-locks: the command is still running; sending SIGKILL");
                group.signal(Signal::SIGKILL);
            }
            event = group.event() => group.handle(event),
        }
    }
}

/// Passes a signal that `redis-locks` got on to the command, unless the command got it
/// already: the kernel sends a terminal's signals (Ctrl-C, Ctrl-\, hang-up) to the whole
/// foreground process group, which with `--no-process-group` the command is in too.
fn forward(group: &Group, got: Received) {
    if got.by_kernel && group.shares_our_group() {
        tracing::info!(
            signal = %got.signal,
            "not forwarded: the terminal sent it to the command's process group too"
        );
    } else {
        tracing::info!(signal = %got.signal, "forwarding to the command");
        group.signal(got.signal);
    }
}

/// The command has exited. Whatever it left running in its process group must not outlive
/// the lock: it gets SIGTERM, then SIGKILL after --kill-after (when the lock was lost, the
/// countdown started then), and the lock is released once it is gone. A signal to
/// `redis-locks` meanwhile cuts the grace short.
async fn clear(
    group: &Group,
    stopping: Stopping,
    kill_after: Duration,
    signals: &mut Signals,
    quiet: bool,
) {
    let kill_at = match stopping {
        Stopping::No => {
            if gone(group, Instant::now() + LEFTOVER_SETTLE, None).await {
                return;
            }
            if !quiet {
                eprintln!(
                    "redis-locks: the command exited but left processes running in its process \
                     group; sending them SIGTERM, SIGKILL in {}",
                    human(kill_after)
                );
            }
            group.signal(Signal::SIGTERM);
            Some(Instant::now() + kill_after)
        }
        Stopping::Terminated(kill_at) => Some(kill_at),
        // The whole group got SIGKILL while the command ran.
        Stopping::Killed => None,
    };
    // (Signalled only while `gone` finds processes in the group, so its id is still
    // taken: it cannot be another group's.)
    if let Some(kill_at) = kill_at {
        if gone(group, kill_at, Some(signals)).await {
            return;
        }
        eprintln!("redis-locks: processes the command left are still running; sending SIGKILL");
        group.signal(Signal::SIGKILL);
    }
    if !gone(group, Instant::now() + KILL_SETTLE, None).await {
        tracing::warn!("the command's process group still has processes after SIGKILL");
    }
}

/// Waits until the command's group is empty (true), `deadline` passes or, with `signals`,
/// a signal arrives (false).
async fn gone(group: &Group, deadline: Instant, mut signals: Option<&mut Signals>) -> bool {
    loop {
        if !group.occupied() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        let pause = tokio::time::sleep(GROUP_POLL);
        match signals.as_deref_mut() {
            Some(signals) => tokio::select! {
                () = pause => {}
                got = signals.recv() => {
                    tracing::info!(signal = %got.signal, "not waiting any longer");
                    return false;
                }
            },
            None => pause.await,
        }
    }
}

/// The shell's view of a status: the code, or 128+N for death by signal N.
fn status_code(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
        (None, Some(signo)) => exit::signalled(signo),
        (None, None) => exit::INTERNAL,
    }
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exited with status {code}"),
        (None, Some(signo)) => format!("was killed by {}", signals::name(signo)),
        (None, None) => format!("ended with {status}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::libc;

    #[test]
    fn statuses_map_like_a_shell() {
        assert_eq!(status_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(status_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(status_code(ExitStatus::from_raw(libc::SIGKILL)), 137);
        assert_eq!(
            describe(ExitStatus::from_raw(libc::SIGTERM)),
            "was killed by SIGTERM"
        );
        assert_eq!(
            describe(ExitStatus::from_raw(3 << 8)),
            "exited with status 3"
        );
    }
}
