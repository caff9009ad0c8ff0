//! Command-line arguments.

use std::ffi::OsString;
use std::time::Duration;

use clap::{ArgAction, ArgGroup, Args, Parser, Subcommand};

use crate::duration;

const RUN_HELP: &str = "\
DURATION is whole numbers with units h, m, s or ms, largest first: 500ms, 10s, 1m30s, 2h.

The command gets these environment variables:
  REDIS_LOCK_NAME    the lock's name
  REDIS_LOCK_OWNER   the owner id holding the lock, as shown by `redis-locks status`
                     (treat it as a secret: whoever knows it can release the lock)
  REDIS_LOCK_TOKEN   the fencing token, with --fenced (removed from the environment
                     otherwise); with --also, the tokens comma-separated
  REDIS_LOCK_NAMES   with --also: the names, one per line, in the order taken (removed
                     from the environment otherwise)

--permits N, --read, --write, --fair and --redisson take, instead of the lock NAME, another
kind of lock of the same name (a semaphore, a read-write lock, a fair lock, a lock in
Redisson's RLock layout, whose key is NAME itself) with keys of its own:
a plain `run NAME` and a `run NAME --write` do not exclude each other. What is taken is
renewed, lost and released like the lock; --wait, --no-wait, --lease, --watchdog and
--kill-after apply to it (--min-replicas does not: it is a usage error with them).

--also NAME2 (repeatable) takes the locks NAME, NAME2, ... together, all or none: a
multi-lock on the one --url target; with --read, --write or --fair, that kind of each name
(a read of every name, and so on). They are taken in one fixed order (by key), whatever
order they are named in, so runs that name the same locks in other orders never wait for
each other in a cycle. --no-wait or a --wait that runs out leaves none of them held and
exits 75 naming the ones found held; the loss of any of them is the loss of all. The
command also gets REDIS_LOCK_NAMES, the names one per line in the order they were taken;
with --fenced, REDIS_LOCK_TOKEN is their tokens, comma-separated, in that same order.

--redlock (a global option) takes NAME as a RedLock: one --url per independent Redis
server (not replicas of each other, not a cluster), and the lock is held while a majority
of them (N/2+1) hold it, with one owner id (REDIS_LOCK_OWNER) on each. The servers are
connected at once; one that cannot be connected counts as refusing (with 2 of 5 down, the
other 3 must all grant it). If fewer than a majority can be connected, or fewer than a
majority answer for longer than the lease, the exit status is 69 and nothing is run. It
goes with --wait, --no-wait, --lease, --watchdog and --kill-after; the command is stopped
(73) when fewer than a majority still hold it, and with --lease when the lease's validity
ends (the lease, less the time the acquire took and a clock drift allowance). It does not
go with --cluster, --min-replicas, --also, --read, --write, --fair, --redisson, --permits
or --fenced: the servers keep separate fencing counters, so there is no one token that grows
with every acquisition. With 1 or 2 servers it works but survives no server's loss (a
warning says so): use 3 or more, usually 5. A RedLock is only as safe as its servers'
clocks and the holder's pauses allow: see docs/redlock.md. status and unlock take one server
at a time (without --redlock).

Signals: SIGINT, SIGTERM and SIGHUP sent to redis-locks are forwarded to the command;
the lock is released once the command has exited. A signal that arrives while still
waiting for the lock stops the wait and exits with 128+N without running the command.

--process-group (the default on Linux; Linux only): the command runs in a process group
of its own; everything it starts stays in that group unless it moves itself out (setsid,
daemons, the jobs of an interactive shell). Forwarded signals and the stop on a lost lock
go to the whole group. When the command exits, processes it left running in its group
are sent SIGTERM, then SIGKILL after --kill-after, before the lock is released. If
redis-locks itself dies (SIGKILL, the OOM killer), the kernel kills the command and a
small watcher process kills the rest of its group at once, so nothing of it runs on
without the lock. In a terminal the command gets the terminal (when redis-locks shares
its job with other processes, as in a pipeline, only once the command needs it): Ctrl-C
reaches the whole group once, and Ctrl-Z suspends the command together with redis-locks
(which then does not renew the lock).

--no-process-group (the only mode on other platforms, where --process-group is a usage
error): the command runs in redis-locks's own process group. Forwarded signals and the
stop on a lost lock reach the command's own process only, not processes it starts (a
shell script should `exec` its last command, or trap signals and pass them on), and
processes it leaves running are not stopped: they go on after the lock is released. If
redis-locks dies, on Linux the kernel kills the command (SIGKILL), but not what it
started; elsewhere the command keeps running, unprotected once the lock expires. In a
terminal, Ctrl-C and Ctrl-Z reach redis-locks and the command together; on Linux,
redis-locks does not pass on a signal that the terminal sent (the command got it
already), so Ctrl-C reaches the command once. A signal sent to the whole process group
with kill (kill -INT -PGID) reaches the command twice: directly, and forwarded.

Lost lock: the lock is renewed or checked every second (every third of --watchdog if
that is shorter). If it is lost while the command runs (deleted, by `unlock --force` or
otherwise, expired because Redis was unreachable, or --lease ran out), the command (with
--process-group, its process group) is sent SIGTERM, then SIGKILL after --kill-after,
and redis-locks exits with 73. It also exits with 73 (the command was not signalled
then) when the loss is found only at the release, after the command finished: the end
of its work may not have been protected. stderr says which.

Examples:
  redis-locks run nightly-report --no-wait -- ./report.sh
  redis-locks run --fenced migrate-v42 --wait 10m -- ./migrate.sh
  redis-locks run config --read -- ./render.sh      (many at once)
  redis-locks run config --write -- ./update.sh     (alone)
  redis-locks run account:17 --also account:42 -- ./transfer.sh    (both, or wait)
  redis-locks --redlock --url redis://r1:6379 --url redis://r2:6379 \
      --url redis://r3:6379 run nightly --no-wait -- ./nightly.sh";

/// Distributed locks on Redis from the shell: run a command while holding a lock,
/// inspect a lock, or delete one.
#[derive(Debug, Parser)]
#[command(name = "redis-locks", version, after_long_help = crate::exit::SEE_TABLE)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct Global {
    /// Redis URL, e.g. redis://user:password@host:6379/0, or a Sentinel set:
    /// redis-sentinel://host1:26379,host2:26379/0#service-name. With --cluster, give one
    /// --url per seed node.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "REDIS_URL",
        hide_env_values = true,
        default_value = "redis://127.0.0.1:6379",
        value_name = "URL",
        action = ArgAction::Append
    )]
    pub url: Vec<String>,

    /// The sentinels' own password (the redis-sentinel:// URL's credentials are the
    /// primary's). Prefer the environment variable: a command line is visible to others.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        env = "REDIS_SENTINEL_PASSWORD",
        hide_env_values = true,
        value_name = "PASSWORD"
    )]
    pub sentinel_password: Option<String>,

    /// Wait without pub/sub: poll with exponential back-off and jitter (for proxies or
    /// services without SUBSCRIBE).
    #[arg(long, global = true, help_heading = "Global options")]
    pub spin: bool,

    /// The --url(s) are seed nodes of a Redis Cluster.
    #[arg(long, global = true, help_heading = "Global options")]
    pub cluster: bool,

    /// `run` takes its lock as a RedLock: each --url is an independent Redis server, and
    /// the lock is held while a majority of them hold it. Use 3 or more (usually 5); with
    /// fewer it survives no server's loss. See `redis-locks run --help`.
    #[arg(long, global = true, help_heading = "Global options")]
    pub redlock: bool,

    /// After taking a lock, wait until N replicas have the write (WAIT). When fewer
    /// acknowledge within --replica-timeout, the lock is given back, nothing is run, and
    /// the exit status is 75.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        value_name = "N",
        value_parser = parse_replicas
    )]
    pub min_replicas: Option<u32>,

    /// How long --min-replicas waits for acknowledgements.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        value_name = "DURATION",
        value_parser = duration::parse_positive,
        default_value = "1s",
        requires = "min_replicas"
    )]
    pub replica_timeout: Duration,

    /// Key prefix: locks live at <PREFIX>:{<NAME>}. Every client of a lock must use the
    /// same prefix.
    #[arg(
        long,
        global = true,
        help_heading = "Global options",
        default_value = redis_locks::DEFAULT_PREFIX,
        value_name = "PREFIX"
    )]
    pub prefix: String,

    /// Less output: only errors (no waiting indicator, warnings, or "not acquired"
    /// message).
    #[arg(
        short,
        long,
        global = true,
        help_heading = "Global options",
        conflicts_with = "verbose"
    )]
    pub quiet: bool,

    /// More log output on stderr: -v info, -vv debug, -vvv trace. RUST_LOG, when set,
    /// overrides -q and -v.
    #[arg(
        short,
        long,
        global = true,
        help_heading = "Global options",
        action = ArgAction::Count
    )]
    pub verbose: u8,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Acquire a lock, run a command while holding it, then release it.
    ///
    /// Exits with the command's exit status (128+N if it was killed by signal N), or with
    /// one of the codes listed below when the lock could not be taken or was lost. Without
    /// --lease the lock is renewed by a watchdog for as long as the command runs.
    #[command(after_long_help = format!("{RUN_HELP}\n\n{}", crate::exit::SEE_TABLE))]
    Run(RunArgs),

    /// Show whether a lock is held, by whom, for how long, and who is waiting.
    ///
    /// Also shows the semaphore, count-down latch, read-write lock and fair lock of the
    /// same name, each on a line of its own, when they exist.
    ///
    /// Exits 0 whether the lock is held or not (see --check).
    #[command(after_long_help = crate::exit::SEE_TABLE)]
    Status(StatusArgs),

    /// Delete a lock whoever holds it, and wake its waiters. Requires --force.
    ///
    /// Clears every kind held under NAME: the lock, the read-write lock (--read and
    /// --write holds), the fair lock and the semaphore's permits (its size stays). A
    /// count-down latch is left alone. The holders are not asked: they find out at their
    /// next renewal (a `redis-locks run` holder then stops its command and exits with 73).
    /// Prints what was deleted; exits 1 when nothing was held (0 with --missing-ok).
    #[command(after_long_help = crate::exit::SEE_TABLE)]
    Unlock(UnlockArgs),

    /// Print the exit-status table (also: `redis-locks help exit-codes`).
    #[command(name = "exit-codes", long_about = crate::exit::TABLE)]
    ExitCodes,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("kind").multiple(false)))]
pub struct RunArgs {
    /// The lock's name (1 to 512 bytes, without '{', '}' or control characters).
    pub name: String,

    /// Give up after waiting this long for the lock (exit 75). Default: wait forever.
    /// 0s tries once, like --no-wait.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, allow_hyphen_values = true)]
    pub wait: Option<Duration>,

    /// Try once; if the lock is held, exit 75 at once.
    #[arg(long, conflicts_with = "wait")]
    pub no_wait: bool,

    /// Take the lock with this fixed lease instead of the watchdog: it is not renewed,
    /// and when it runs out the command is stopped as for a lost lock.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse_positive, allow_hyphen_values = true)]
    pub lease: Option<Duration>,

    /// The watchdog lease: the lock expires this long after redis-locks stops renewing it
    /// (for example because it was killed); renewed every third of it. At least 30ms.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration::parse_positive,
        default_value = "30s",
        conflicts_with = "lease",
        allow_hyphen_values = true
    )]
    pub watchdog: Duration,

    /// Take a fencing token (a number that grows with every acquisition of this lock)
    /// and pass it to the command as REDIS_LOCK_TOKEN. Also with --write and --fair (the
    /// token of that lock); not with --permits or --read.
    #[arg(long, conflicts_with_all = ["permits", "read"])]
    pub fenced: bool,

    /// Take one permit of the semaphore NAME, whose size is N (set to N if it was unset
    /// or different), instead of the lock NAME: at most N commands run at once. The
    /// permit is renewed (or has --lease) and is lost like a lock; REDIS_LOCK_OWNER is
    /// the permit id.
    #[arg(long, value_name = "N", group = "kind", value_parser = parse_permits)]
    pub permits: Option<u64>,

    /// Take a read hold of the read-write lock NAME instead of the lock NAME: any number
    /// of --read commands run at once, but none starts while a --write command runs or
    /// waits for the readers to finish.
    #[arg(long, group = "kind")]
    pub read: bool,

    /// Take the write hold of the read-write lock NAME instead of the lock NAME: the
    /// command runs alone, with no --read or other --write command of that name.
    #[arg(long, group = "kind")]
    pub write: bool,

    /// Take the fair lock NAME instead of the lock NAME: exclusive like a lock, but
    /// waiting commands get it in the order they started waiting (first come, first
    /// served).
    #[arg(long, group = "kind")]
    pub fair: bool,

    /// Take NAME in Redisson's layout instead of this library's: an RLock (the hash NAME
    /// with a field per owner, Redisson's channel and unlock message), or with --read or
    /// --write a read or the write of an RReadWriteLock. A Java service that takes NAME
    /// with Redisson (3.x, 4.x: `redisson.getLock("NAME")`,
    /// `getReadWriteLock("NAME")`) and this command exclude each other, and each one's
    /// release wakes the other's waiters. Not with --also, --fenced, --permits or --fair.
    #[arg(long, conflicts_with_all = ["also", "fenced", "permits", "fair"])]
    pub redisson: bool,

    /// Also take the lock NAME2, all or none with NAME (a multi-lock; repeatable; with
    /// --read, --write or --fair, that kind of it). With --no-wait, if any is held none
    /// is taken and the exit status is 75.
    #[arg(
        long,
        value_name = "NAME2",
        action = ArgAction::Append,
        conflicts_with = "permits"
    )]
    pub also: Vec<String>,

    /// When the lock is lost, how long the command gets between SIGTERM and SIGKILL; with
    /// --process-group, also how long processes it left running get after it exits.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse, default_value = "10s", allow_hyphen_values = true)]
    pub kill_after: Duration,

    /// Run the command in a process group of its own and signal the whole group; kill
    /// the group if redis-locks dies (the default; Linux only). See below.
    #[arg(long, overrides_with = "no_process_group")]
    pub process_group: bool,

    /// Run the command in redis-locks's process group and signal its process only. See
    /// below.
    #[arg(long, overrides_with = "process_group")]
    pub no_process_group: bool,

    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The lock's name.
    pub name: String,

    /// Print one JSON object: {"name", "key", "channel", "held", "holders": [{"owner",
    /// "count"}], "ttl_ms", "waiting", "fence", "semaphore", "latch", "rwlock", "fair"}
    /// (ttl_ms and fence are null when absent; waiting counts subscribed Redis
    /// connections, one per waiting process). The last four are the other kinds of the
    /// same name, null unless they exist: {"size", "in_use", "reserved", "available"},
    /// {"count"}, {"writes", "writer", "reads", "writer_waiting", "ttl_ms"} and
    /// {"holds", "holder", "waiters", "ttl_ms"}.
    #[arg(long)]
    pub json: bool,

    /// Exit 1 when the lock is held (0 when free), for use in shell conditions.
    #[arg(long)]
    pub check: bool,

    /// Show NAME in Redisson's layout instead (the hash NAME: an RLock's holders, or a
    /// RReadWriteLock's mode, readers and writer; or the string NAME: an RCountDownLatch's
    /// count) and nothing else; --check then exits 1 also for a closed latch. With --json:
    /// {"name", "key", "layout": "redisson", "kind": "lock" | "rwlock" | null, "mode",
    /// "holders": [{"owner", "count"}], "writer", "ttl_ms"}, or for a closed latch {"name",
    /// "key", "layout": "redisson", "kind": "latch", "count"}.
    #[arg(long)]
    pub redisson: bool,
}

#[derive(Debug, Args)]
pub struct UnlockArgs {
    /// The lock's name.
    pub name: String,

    /// Really delete the lock, whoever holds it.
    #[arg(long)]
    pub force: bool,

    /// Exit 0 when nothing was held under NAME (by default: exit 1).
    #[arg(long)]
    pub missing_ok: bool,

    /// Delete NAME in Redisson's layout instead (the hash NAME: an RLock or a
    /// RReadWriteLock, whoever holds it, Java or Rust), waking the waiters of both sides.
    #[arg(long)]
    pub redisson: bool,
}

/// `--permits N`: a whole number of at least 1, said in a sentence (clap's range error
/// would print "0 is not in 1..18446744073709551615").
fn parse_permits(input: &str) -> Result<u64, String> {
    match input.parse::<u64>() {
        Ok(0) => Err("a semaphore needs at least 1 permit (--permits 1 or more)".into()),
        Ok(n) if n <= redis_locks::MAX_COUNT => Ok(n),
        Ok(_) => Err(format!(
            "at most {} permits (the scripts count in exact doubles)",
            redis_locks::MAX_COUNT
        )),
        Err(_) => Err(format!("{input:?} is not a whole number of permits")),
    }
}

/// `--min-replicas N`: a whole number of at least 1, said in a sentence.
fn parse_replicas(input: &str) -> Result<u32, String> {
    match input.parse::<u32>() {
        Ok(0) => Err(
            "waiting for 0 replicas waits for nothing: give 1 or more, or leave \
                      --min-replicas out"
                .into(),
        ),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{input:?} is not a whole number of replicas")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_options_around_the_name_and_the_command_after_dashes() {
        let cli = Cli::try_parse_from([
            "redis-locks",
            "run",
            "--fenced",
            "migrate",
            "--wait",
            "10m",
            "-v",
            "--",
            "./migrate.sh",
            "--dry-run",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.name, "migrate");
        assert!(run.fenced);
        assert_eq!(run.wait, Some(Duration::from_secs(600)));
        assert_eq!(run.command, ["./migrate.sh", "--dry-run"]);
        assert_eq!(cli.global.verbose, 1);
    }

    #[test]
    fn the_last_process_group_flag_wins() {
        let parse = |flags: &[&str]| {
            let args = [&["redis-locks", "run", "x"][..], flags, &["--", "true"]].concat();
            let Command::Run(run) = Cli::try_parse_from(args).unwrap().command else {
                panic!("not run")
            };
            (run.process_group, run.no_process_group)
        };
        assert_eq!(parse(&[]), (false, false));
        assert_eq!(parse(&["--process-group"]), (true, false));
        assert_eq!(parse(&["--no-process-group"]), (false, true));
        assert_eq!(
            parse(&["--no-process-group", "--process-group"]),
            (true, false)
        );
        assert_eq!(
            parse(&["--process-group", "--no-process-group"]),
            (false, true)
        );
    }

    #[test]
    fn usage_errors() {
        for args in [
            &["redis-locks", "run", "x", "true"][..],
            &["redis-locks", "run", "x", "--wait", "10", "--", "true"],
            &["redis-locks", "run", "x", "--lease", "0s", "--", "true"],
            &[
                "redis-locks",
                "run",
                "x",
                "--wait",
                "1s",
                "--no-wait",
                "--",
                "true",
            ],
            &[
                "redis-locks",
                "run",
                "x",
                "--lease",
                "1s",
                "--watchdog",
                "1s",
                "--",
                "true",
            ],
            &["redis-locks", "status", "x", "-q", "-v"],
            &["redis-locks", "run", "x", "--read", "--write", "--", "true"],
            &["redis-locks", "run", "x", "--read", "--fair", "--", "true"],
            &["redis-locks", "run", "x", "--write", "--fair", "--", "true"],
            &[
                "redis-locks",
                "run",
                "x",
                "--fair",
                "--permits",
                "2",
                "--",
                "true",
            ],
            &[
                "redis-locks",
                "run",
                "x",
                "--fenced",
                "--read",
                "--",
                "true",
            ],
            &[
                "redis-locks",
                "run",
                "x",
                "--fenced",
                "--permits",
                "2",
                "--",
                "true",
            ],
        ] {
            assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
        }
    }

    #[test]
    fn also_and_redlock_parse() {
        let cli = Cli::try_parse_from([
            "redis-locks",
            "--redlock",
            "--url",
            "redis://a",
            "--url",
            "redis://b",
            "run",
            "x",
            "--also",
            "y",
            "--also=z",
            "--",
            "true",
        ])
        .unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert!(cli.global.redlock);
        assert_eq!(cli.global.url, ["redis://a", "redis://b"]);
        assert_eq!(run.also, ["y", "z"]);
        // --also takes that kind of every name with --read, --write and --fair; a
        // semaphore permit is not a lock a multi-lock takes.
        for kind in ["--read", "--write", "--fair"] {
            let args = ["redis-locks", "run", "x", "--also", "y", kind, "--", "true"];
            assert!(Cli::try_parse_from(args).is_ok(), "{args:?}");
        }
        let args = [
            "redis-locks",
            "run",
            "x",
            "--also",
            "y",
            "--permits",
            "2",
            "--",
            "true",
        ];
        assert!(Cli::try_parse_from(args).is_err(), "{args:?}");
    }

    #[test]
    fn fenced_goes_with_write_and_fair() {
        for kind in ["--write", "--fair"] {
            let args = ["redis-locks", "run", "x", kind, "--fenced", "--", "true"];
            let Command::Run(run) = Cli::try_parse_from(args).unwrap().command else {
                panic!("not run")
            };
            assert!(run.fenced && (run.write || run.fair), "{kind}");
        }
    }
}
