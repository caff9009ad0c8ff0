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

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use redis_locks::Error;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use crate::acquire::{self, Kind};
use crate::args::{Global, RunArgs};
use crate::connect;
use crate::duration::human;
use crate::exit::{self, Failure};
use crate::group::{self, Group, Mode};
use crate::held::{Acquired, Held, prepare};
use crate::signals::{self, Received, Signals};

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
    if let Some(flag) = kind.flag().filter(|_| global.min_replicas.is_some()) {
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
            Kind::Lock | Kind::Read | Kind::Write | Kind::Fair if !args.also.is_empty() => {
                crate::multi::acquire(&client, &args, kind, &mut signals).await?
            }
            Kind::Lock => {
                let lock = prepare(&client, &args.name, &args)?;
                acquire::acquire(&lock, &args, global.quiet, &mut signals).await?
            }
            Kind::Permits(size) => {
                acquire::acquire_permit(&client, &args, size, &mut signals).await?
            }
            Kind::Read => acquire::acquire_rw(&client, &args, false, &mut signals).await?,
            Kind::Write => acquire::acquire_rw(&client, &args, true, &mut signals).await?,
            Kind::Fair => acquire::acquire_fair(&client, &args, &mut signals).await?,
            Kind::Redisson => acquire::acquire_redisson(&client, &args, &mut signals).await?,
            Kind::RedissonRw { write } => {
                acquire::acquire_redisson_rw(&client, &args, write, &mut signals).await?
            }
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
