//! Exit codes, and the error type that carries one to `main`.
//!
//! The codes come from BSD `sysexits.h` where one fits, and from the shell's conventions
//! for commands that cannot be run or were killed by a signal. `redis-locks run` otherwise
//! exits with its command's own status, so a command that itself uses one of these codes
//! is indistinguishable from `redis-locks`; the message on stderr tells them apart.

use redis_locks::Error;

/// Bad arguments: usage errors, malformed durations or URLs, invalid lock names,
/// `unlock` without `--force` (`EX_USAGE`).
pub const USAGE: u8 = 64;
/// The lock's key exists in Redis but is not a lock (`EX_DATAERR`). Nothing was changed.
pub const NOT_A_LOCK: u8 = 65;
/// Redis cannot be reached or failed a command; with `--redlock`, fewer than a majority
/// of the servers can be reached (`EX_UNAVAILABLE`).
pub const UNAVAILABLE: u8 = 69;
/// Internal error: an unexpected reply from Redis or from the operating system
/// (`EX_SOFTWARE`).
pub const INTERNAL: u8 = 70;
/// `run`: the lock was lost while the command ran (`EX_CANTCREAT`, chosen as a code that
/// common tools do not use for their own failures).
pub const LOCK_LOST: u8 = 73;
/// `run`: the lock was not acquired: `--wait` ran out or `--no-wait` found it held
/// (`EX_TEMPFAIL`: try again later).
pub const NOT_ACQUIRED: u8 = 75;
/// `status --check`: the lock is held.
pub const HELD: u8 = 1;
/// `unlock --force`: nothing was held (without `--missing-ok`).
pub const NOTHING_HELD: u8 = 1;
/// `run`: the command was found but could not be executed (as in shells).
pub const CANNOT_EXECUTE: u8 = 126;
/// `run`: the command was not found (as in shells).
pub const NOT_FOUND: u8 = 127;

/// The shell's code for "ended by signal `signo`": 128 + signo.
pub fn signalled(signo: i32) -> u8 {
    u8::try_from(128 + signo.clamp(0, 127)).unwrap_or(u8::MAX)
}

/// Where `--help` points for the exit codes (the table itself is printed once, by
/// `redis-locks exit-codes` and `redis-locks help exit-codes`).
pub const SEE_TABLE: &str = "Exit status: see `redis-locks help exit-codes`.";

/// The exit-code table.
pub const TABLE: &str = "\
Exit status:
  0        success (run: the command's own status passes through unchanged)
  1        status --check: the lock is held; unlock --force: nothing was held
  64       bad arguments: usage, durations, URL, lock name, unlock without --force
  65       the lock's key holds something that is not a lock (nothing was changed)
  69       Redis is unreachable or failed a command (--redlock: fewer than a
           majority of the servers could be connected or answered)
  70       internal error (unexpected reply)
  73       run: the lock was lost while the command ran (it was sent SIGTERM), or
           was found lost at the release after it finished
  75       run: the lock was not acquired (--wait ran out, --no-wait found it held, or
           fewer than --min-replicas acknowledged it; nothing is left held)
  126      run: the command could not be executed
  127      run: the command was not found
  128+N    run: the command was killed by signal N, or redis-locks got signal N
           while waiting for the lock (130 for SIGINT, 143 for SIGTERM)";

/// A failure to report on stderr with an exit code.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Failure::new(USAGE, message)
    }
}

/// The exit code for a library error.
pub fn for_error(err: &Error) -> u8 {
    match err {
        Error::InvalidUrl(_)
        | Error::InvalidConfig(_)
        | Error::InvalidName { .. }
        | Error::InvalidDuration { .. } => USAGE,
        // A RedLock that cannot reach a majority of its servers: unreachable, as one
        // Redis is.
        Error::Connect { .. } | Error::Redis(_) | Error::NoQuorum { .. } => UNAVAILABLE,
        Error::WrongType { .. } => NOT_A_LOCK,
        Error::Timeout { .. } | Error::NotReplicated { .. } => NOT_ACQUIRED,
        Error::LockLost { .. } => LOCK_LOST,
        _ => INTERNAL,
    }
}

impl From<Error> for Failure {
    fn from(err: Error) -> Self {
        // The message and each cause once: "cannot connect to Redis at X: refused".
        let mut message = err.to_string();
        let mut cause = std::error::Error::source(&err);
        while let Some(inner) = cause {
            let text = inner.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
            cause = inner.source();
        }
        Failure::new(for_error(&err), in_cli_terms(&message))
    }
}

/// The library's messages name its calls and features where a CLI user needs the CLI's
/// flags and build.
fn in_cli_terms(message: &str) -> String {
    let tls = if cfg!(feature = "tls") {
        "(TLS)"
    } else {
        "(TLS: not in this build; install with --features cli,tls)"
    };
    [
        (
            "LockClient::builder_cluster([seed URLs])",
            "--cluster with each seed node as a --url",
        ),
        ("(TLS, feature `tls`)", tls),
    ]
    .iter()
    .fold(message.to_owned(), |text, (library, cli)| {
        text.replace(library, cli)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_cli_flags_not_library_calls() {
        let err = Error::InvalidUrl(format!(
            "bad; accepted: {}",
            "and for a cluster LockClient::builder_cluster([seed URLs])"
        ));
        let failure = Failure::from(err);
        assert!(failure.message.contains("--cluster"), "{}", failure.message);
        assert!(
            !failure.message.contains("builder_cluster"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn signal_codes() {
        assert_eq!(signalled(libc::SIGINT), 130);
        assert_eq!(signalled(libc::SIGTERM), 143);
        assert_eq!(signalled(libc::SIGKILL), 137);
        assert_eq!(signalled(1_000), 255);
    }

    #[test]
    fn library_errors_map_to_documented_codes() {
        assert_eq!(for_error(&Error::InvalidUrl("x".into())), USAGE);
        let timeout = Error::Timeout {
            name: "n".into(),
            waited: std::time::Duration::ZERO,
        };
        assert_eq!(for_error(&timeout), NOT_ACQUIRED);
        let wrong = Error::WrongType {
            key: "k".into(),
            found: "string".into(),
        };
        assert_eq!(for_error(&wrong), NOT_A_LOCK);
        assert_eq!(for_error(&Error::UnexpectedReply("x".into())), INTERNAL);
        let no_quorum = Error::NoQuorum {
            name: "n".into(),
            servers: 5,
            needed: 3,
            failed: vec![],
        };
        assert_eq!(for_error(&no_quorum), UNAVAILABLE);
        for code in [
            USAGE,
            NOT_A_LOCK,
            UNAVAILABLE,
            INTERNAL,
            LOCK_LOST,
            NOT_ACQUIRED,
        ] {
            assert!(
                TABLE.contains(&format!("\n  {code} ")),
                "{code} undocumented"
            );
        }
    }
}
