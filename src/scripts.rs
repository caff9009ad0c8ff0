//! The script registry: every Lua script the library runs, compiled in from `lua/`, and
//! the one way they are sent.
//!
//! Scripts run with `EVALSHA`. Redis forgets loaded scripts on restart, failover and
//! `SCRIPT FLUSH`; a `NOSCRIPT` reply means the script did not run, so the same call is
//! sent once more as `EVAL` with the script's body, which runs it (and caches it) in one
//! step: no window for another flush to land in, as there would be between a
//! `SCRIPT LOAD` and a second `EVALSHA`. Callers never see `NOSCRIPT`.

use redis::aio::ConnectionManager;
use redis::{Arg, Cmd, ErrorKind, FromRedisValue, RedisResult, ServerErrorKind};

use crate::client::ClientInner;
use crate::error::{Error, Result};

/// One Lua script: its body and its SHA1.
#[derive(Debug)]
pub(crate) struct Script {
    body: &'static str,
    hashed: redis::Script,
}

impl Script {
    fn new(body: &'static str) -> Self {
        Script {
            body,
            hashed: redis::Script::new(body),
        }
    }
}

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
    cmd.arg(script.hashed.get_hash()).arg(keys.len());
    for key in keys {
        cmd.arg(*key);
    }
    cmd
}

/// Sends a prepared `EVALSHA`; on `NOSCRIPT` sends the same call as `EVAL`.
pub(crate) async fn call<T: FromRedisValue>(
    conn: &mut ConnectionManager,
    script: &Script,
    cmd: &Cmd,
) -> RedisResult<T> {
    match cmd.query_async::<T>(conn).await {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            tracing::debug!(sha = script.hashed.get_hash(), "NOSCRIPT: sending the body");
            as_eval(script, cmd).query_async::<T>(conn).await
        }
        other => other,
    }
}

/// `EVALSHA <sha> <numkeys> <rest...>` as `EVAL <body> <numkeys> <rest...>`.
fn as_eval(script: &Script, evalsha: &Cmd) -> Cmd {
    let mut eval = redis::cmd("EVAL");
    eval.arg(script.body);
    // Skip the command name and the SHA1.
    for arg in evalsha.args_iter().skip(2) {
        if let Arg::Simple(bytes) = arg {
            eval.arg(bytes);
        }
    }
    eval
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evalsha_becomes_eval_with_the_same_keys_and_arguments() {
        let script = Script::new("return 1");
        let mut cmd = evalsha(&script, &["k1", "k2"]);
        cmd.arg("owner").arg(30_000u64);
        let eval = as_eval(&script, &cmd);
        let args: Vec<Vec<u8>> = eval
            .args_iter()
            .map(|arg| match arg {
                Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        let expected: Vec<&[u8]> =
            vec![b"EVAL", b"return 1", b"2", b"k1", b"k2", b"owner", b"30000"];
        assert_eq!(args, expected);
    }
}
