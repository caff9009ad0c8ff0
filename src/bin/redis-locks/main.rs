//! `redis-locks`: distributed locks on Redis from the shell.
//!
//! * `run NAME [OPTIONS] -- CMD [ARGS...]` runs a command while holding a lock (or, with
//!   `--also NAME2`, several locks at once; with `--redlock`, a RedLock over independent
//!   servers);
//! * `status NAME [--json] [--check]` shows a lock;
//! * `unlock NAME --force` deletes one.
//!
//! See `redis-locks --help` (and `redis-locks run --help`) for options and exit codes.

mod acquire;
mod args;
mod connect;
mod duration;
mod exit;
mod group;
mod held;
mod indicator;
mod multi;
mod redlock;
mod run;
mod signals;
mod status;
mod unlock;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use crate::args::{Cli, Command};
use crate::exit::Failure;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version print to stdout and succeed; every usage error exits
            // with EX_USAGE (clap's own default would be 2).
            let _ = err.print();
            if err.kind() == clap::error::ErrorKind::UnknownArgument && missing_separator() {
                eprintln!(
                    "hint: put `--` between the lock name and the command, as in \
                     `redis-locks run NAME -- CMD ARGS...`"
                );
            }
            return ExitCode::from(if err.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    init_logging(cli.global.quiet, cli.global.verbose);

    // One thread: the command is spawned from the main thread, which is what Linux's
    // parent-death signal is tied to (see the `group` module); job control on a terminal
    // also relies on the main thread being the one that stops the process.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("redis-locks: cannot start the async runtime: {err}");
            return ExitCode::from(exit::INTERNAL);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => run::run(&cli.global, args).await,
            Command::Status(args) => status::status(&cli.global, args).await,
            Command::Unlock(args) => unlock::unlock(&cli.global, args).await,
            Command::ExitCodes => {
                print_stdout(&format!("{}\n", exit::TABLE));
                Ok(0)
            }
        }
    });
    // Background tasks (watchdog, pub/sub) have nothing left to do that matters.
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result {
        Ok(code) => ExitCode::from(code),
        Err(Failure { code, message }) => {
            eprintln!("redis-locks: {message}");
            ExitCode::from(code)
        }
    }
}

/// Prints to stdout. A closed stdout (`redis-locks status x | head -1`) is not an error
/// worth a panic; anything else is reported once on stderr.
pub fn print_stdout(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let written = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush());
    // A closed pipe (`| head`) is the reader's choice, not a failure worth a message.
    if let Err(err) = written {
        if err.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("redis-locks: cannot write to stdout: {err}");
        }
    }
}

/// Whether this is a `run` without the `--` that separates the command.
fn missing_separator() -> bool {
    let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    args.iter().any(|arg| arg == "run") && !args.iter().any(|arg| arg == "--")
}

/// Logs go to stderr. Default level `warn`; `-q` `error`; `-v` `info`, `-vv` `debug`,
/// `-vvv` `trace`. `RUST_LOG`, when set, wins.
fn init_logging(quiet: bool, verbose: u8) {
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
