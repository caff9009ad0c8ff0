//! The script registry: every Lua script the library runs, compiled in from `lua/`, and
//! the one way they are sent.
//!
//! Scripts run with `EVALSHA`. Redis forgets loaded scripts on restart, failover and
//! `SCRIPT FLUSH`; a `NOSCRIPT` reply means the script did not run, so it is loaded and
//! the call sent again, a few times over (another flush can land in between). Callers
//! never see `NOSCRIPT`.

use redis::aio::ConnectionManager;
use redis::{Cmd, ErrorKind, FromRedisValue, RedisResult, Script, ServerErrorKind};

use crate::client::ClientInner;
use crate::error::{Error, Result};

/// How often one call may meet `NOSCRIPT` before the error is passed on.
const NOSCRIPT_ATTEMPTS: u32 = 4;

/// All scripts, hashed once per client.
#[derive(Debug)]
pub(crate) struct Scripts {
    pub(crate) acquire: Script,
    pub(crate) release: Script,
    pub(crate) renew: Script,
    pub(crate) force_unlock: Script,
    pub(crate) inspect: Script,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            acquire: Script::new(include_str!("../lua/acquire.lua")),
            release: Script::new(include_str!("../lua/release.lua")),
            renew: Script::new(include_str!("../lua/renew.lua")),
            force_unlock: Script::new(include_str!("../lua/force_unlock.lua")),
            inspect: Script::new(include_str!("../lua/inspect.lua")),
        }
    }
}

/// Starts `EVALSHA <sha> <numkeys> <keys...>`; the caller appends ARGV with `.arg()`.
/// Building a plain `Cmd` writes every argument into one buffer (a `ScriptInvocation`
/// allocates per argument), which matters for the watchdog's large batches.
pub(crate) fn evalsha(script: &Script, keys: &[&str]) -> Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash()).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    cmd
}

/// Sends a prepared `EVALSHA`, loading the script and resending on `NOSCRIPT`.
pub(crate) async fn call<T: FromRedisValue>(
    conn: &mut ConnectionManager,
    script: &Script,
    cmd: &Cmd,
) -> RedisResult<T> {
    let mut attempt = 1;
    loop {
        match cmd.query_async::<T>(conn).await {
            Err(err)
                if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript)
                    && attempt < NOSCRIPT_ATTEMPTS =>
            {
                tracing::debug!(sha = script.get_hash(), "NOSCRIPT: loading the script");
                script.load_async(conn).await?;
                attempt += 1;
            }
            other => return other,
        }
    }
}

impl ClientInner {
    /// Runs a script call on the command connection, bounded by the response timeout
    /// (which also bounds waiting for a reconnect).
    pub(crate) async fn eval<T: FromRedisValue>(&self, script: &Script, cmd: &Cmd) -> Result<T> {
        let mut conn = self.conn.clone();
        match tokio::time::timeout(self.response_timeout, call(&mut conn, script, cmd)).await {
            Ok(reply) => reply.map_err(Error::Redis),
            Err(_) => Err(Error::Redis(self.timeout_error())),
        }
    }

    pub(crate) fn timeout_error(&self) -> redis::RedisError {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!(
                "no reply from {} within {:?}",
                self.addr, self.response_timeout
            ),
        )
        .into()
    }
}

/// Whether a failed call may still have run on the server (its reply was lost), as
/// opposed to failing before it was sent or being refused.
pub(crate) fn may_have_run(err: &redis::RedisError) -> bool {
    !err.is_connection_refusal()
        && (err.is_timeout() || err.is_io_error() || err.is_connection_dropped())
}
