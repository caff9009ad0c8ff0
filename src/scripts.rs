//! The script registry and the one way a [`Call`] of the protocol core reaches Redis.
//!
//! Scripts run with `EVALSHA`. Redis forgets loaded scripts on restart, failover and
//! `SCRIPT FLUSH`; a `NOSCRIPT` reply means the script did not run, so the same call is
//! sent once more as `EVAL` with the script's body, which runs it (and caches it) in one
//! step: no window for another flush to land in, as there would be between a
//! `SCRIPT LOAD` and a second `EVALSHA`. Callers never see `NOSCRIPT`.
//!
//! Errors are classified here into the core's [`Failure`]: never sent, reply lost (may
//! have run), a transient server state (did not run), or permanent.

use crate::topology::Conn;
use redis::{Arg, Cmd, ErrorKind, RedisError, ServerErrorKind, Value};

use crate::protocol::{Call, Failure, Reply, ScriptId};

/// One Lua script: its body and its SHA1.
#[derive(Debug)]
pub(crate) struct Script {
    body: &'static str,
    hashed: redis::Script,
}

/// All scripts, hashed once per client.
pub(crate) struct Scripts {
    scripts: Vec<(ScriptId, Script)>,
}

impl std::fmt::Debug for Scripts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The bodies are long; logging a client must not print them.
        f.debug_struct("Scripts")
            .field("count", &self.scripts.len())
            .finish()
    }
}

impl Scripts {
    pub(crate) fn new() -> Self {
        Scripts {
            scripts: ScriptId::ALL
                .iter()
                .map(|&id| {
                    let body = id.source();
                    (
                        id,
                        Script {
                            body,
                            hashed: redis::Script::new(body),
                        },
                    )
                })
                .collect(),
        }
    }

    fn get(&self, id: ScriptId) -> &Script {
        // ALL lists every id, so the lookup cannot miss; fall back to the first script
        // rather than panic if it ever did (the server would then reject the arguments).
        self.scripts
            .iter()
            .find(|(candidate, _)| *candidate == id)
            .map_or(&self.scripts[0].1, |(_, script)| script)
    }
}

/// A failed call: the core's classification and the error as Redis reported it.
#[derive(Debug)]
pub(crate) struct CallError {
    pub(crate) failure: Failure,
    pub(crate) error: RedisError,
}

/// `EVALSHA <sha> <numkeys> <keys...> <args...>` for a call. Building a plain `Cmd` writes
/// every argument into one buffer, which matters for the watchdog's large batches.
///
/// [`ScriptId::Take`] is the exception: its script is one command, and that command is
/// sent itself, `SET <key> <value> NX PX <lease>`, so that an uncontended acquire runs no
/// Lua (see `lua/take.lua`; the checker runs the script, which does the same).
fn evalsha(script: &Script, call: &Call) -> Cmd {
    if call.script == ScriptId::Take {
        return take_command(call);
    }
    // Sized once: growing the buffers argument by argument cost a dozen reallocations a
    // call. The first three are the command, the SHA1 and the key count.
    let bytes: usize = call.keys.iter().chain(&call.args).map(|p| p.len()).sum();
    let mut cmd = Cmd::with_capacity(3 + call.keys.len() + call.args.len(), 7 + 40 + 4 + bytes);
    cmd.arg("EVALSHA")
        .arg(script.hashed.get_hash())
        .arg(call.keys.len());
    for key in &call.keys {
        cmd.arg(&**key);
    }
    for arg in &call.args {
        cmd.arg(&**arg);
    }
    cmd
}

/// `lua/take.lua` as the command it wraps: `SET KEYS[1] ARGV[1] NX PX ARGV[2]`.
fn take_command(call: &Call) -> Cmd {
    let bytes: usize = call.keys.iter().chain(&call.args).map(|p| p.len()).sum();
    let mut cmd = Cmd::with_capacity(6, 3 + 2 + 2 + bytes);
    cmd.arg("SET");
    for part in call.keys.iter().take(1).chain(call.args.iter().take(1)) {
        cmd.arg(&**part);
    }
    cmd.arg("NX").arg("PX");
    for lease in call.args.iter().skip(1).take(1) {
        cmd.arg(&**lease);
    }
    cmd
}

/// Sends `call`; on `NOSCRIPT` sends the same call as `EVAL`.
pub(crate) async fn run(
    conn: &mut Conn,
    scripts: &Scripts,
    call: &Call,
) -> Result<Reply, CallError> {
    let script = scripts.get(call.script);
    let cmd = evalsha(script, call);
    let reply = match cmd.query_async::<Value>(conn).await {
        Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            tracing::debug!(sha = script.hashed.get_hash(), "NOSCRIPT: sending the body");
            as_eval(script, &cmd).query_async::<Value>(conn).await
        }
        other => other,
    };
    match reply {
        Ok(value) => Ok(to_reply(value)),
        Err(error) => Err(CallError {
            failure: classify(&error),
            error,
        }),
    }
}

/// Sends `call` followed, in one pipeline on one connection, by `WAIT replicas timeout`,
/// and returns the script's reply with the number of replicas that acknowledged.
/// `WAIT` counts the replicas that reached this connection's last write, so it must
/// share the script's connection: sent on its own after a reconnect it would count
/// nothing of ours and answer at once. On a cluster the pipeline goes to the key's node
/// (the keyless `WAIT` does not vote on the route). On `NOSCRIPT` the pair is sent again
/// with `EVAL`.
pub(crate) async fn run_acknowledged(
    conn: &mut Conn,
    scripts: &Scripts,
    call: &Call,
    replicas: u32,
    timeout_ms: u64,
) -> Result<(Reply, i64), CallError> {
    let script = scripts.get(call.script);
    let evalsha = evalsha(script, call);
    let mut pipe = redis::pipe();
    pipe.ignore_errors()
        .add_command(evalsha.clone())
        .cmd("WAIT")
        .arg(replicas)
        .arg(timeout_ms);
    let failed = |error: RedisError| CallError {
        failure: classify(&error),
        error,
    };
    let mut values: Vec<Value> = pipe.query_async(conn).await.map_err(failed)?;
    if matches!(values.first(), Some(Value::ServerError(err)) if err.code() == "NOSCRIPT") {
        let mut pipe = redis::pipe();
        pipe.ignore_errors()
            .add_command(as_eval(script, &evalsha))
            .cmd("WAIT")
            .arg(replicas)
            .arg(timeout_ms);
        values = pipe.query_async(conn).await.map_err(failed)?;
    }
    let mut values = values.into_iter();
    match (values.next(), values.next()) {
        (Some(Value::ServerError(err)), _) => Err(failed(err.into())),
        (Some(reply), Some(Value::Int(acked))) => Ok((to_reply(reply), acked)),
        (Some(_), Some(Value::ServerError(err))) => Err(failed(err.into())),
        (reply, acked) => Err(failed(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "unexpected reply to the script and WAIT pipeline",
            format!("{reply:?}, {acked:?}"),
        )))),
    }
}

/// Sends `calls` to the cluster node `host:port` in one pipeline; calls that met
/// `NOSCRIPT` (a node that just became primary) are sent again as `EVAL` in a second one.
/// Returns one result per call, in order; `Err` only when the pipeline as a whole failed.
pub(crate) async fn run_on_node(
    conn: &Conn,
    scripts: &Scripts,
    calls: &[&Call],
    host: &str,
    port: u16,
) -> Result<Vec<Result<Reply, RedisError>>, RedisError> {
    let cmds: Vec<Cmd> = calls
        .iter()
        .map(|call| evalsha(scripts.get(call.script), call))
        .collect();
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for cmd in &cmds {
        pipe.add_command(cmd.clone());
    }
    let values = conn.pipeline_on_node(pipe, cmds.len(), host, port).await?;
    let mut results: Vec<Result<Reply, RedisError>> =
        values.into_iter().map(value_result).collect();
    let missing: Vec<usize> = (0..results.len())
        .filter(|i| {
            matches!(&results[*i], Err(err) if err.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
        })
        .collect();
    if !missing.is_empty() {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for i in &missing {
            pipe.add_command(as_eval(scripts.get(calls[*i].script), &cmds[*i]));
        }
        let values = conn
            .pipeline_on_node(pipe, missing.len(), host, port)
            .await?;
        for (i, value) in missing.into_iter().zip(values) {
            results[i] = value_result(value);
        }
    }
    if results.len() != calls.len() {
        return Err(RedisError::from((
            ErrorKind::UnexpectedReturnType,
            "unexpected reply",
            format!("{} replies to {} renewal calls", results.len(), calls.len()),
        )));
    }
    Ok(results)
}

fn value_result(value: Value) -> Result<Reply, RedisError> {
    match value {
        Value::ServerError(err) => Err(err.into()),
        value => Ok(to_reply(value)),
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

fn to_reply(value: Value) -> Reply {
    match value {
        Value::Nil => Reply::Nil,
        Value::Int(n) => Reply::Int(n),
        Value::BulkString(bytes) => Reply::Bulk(bytes),
        Value::SimpleString(text) => Reply::Status(text),
        Value::Okay => Reply::Status("OK".into()),
        Value::Array(items) | Value::Set(items) => {
            Reply::Array(items.into_iter().map(to_reply).collect())
        }
        Value::Boolean(b) => Reply::Int(i64::from(b)),
        Value::ServerError(err) => Reply::Error(format!("{err:?}")),
        other => Reply::Error(format!("unexpected value {other:?}")),
    }
}

/// The core's view of an error.
pub(crate) fn classify(err: &RedisError) -> Failure {
    if err.is_connection_refusal() {
        return Failure::NotSent;
    }
    if err.is_timeout() {
        return Failure::TimedOut;
    }
    if err.is_io_error() || err.is_connection_dropped() {
        return Failure::Lost;
    }
    match err.code() {
        Some(code) => Failure::from_server_error(&format!("{code} {}", err.detail().unwrap_or(""))),
        None => Failure::Permanent(err.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn evalsha_becomes_eval_with_the_same_keys_and_arguments() {
        let script = Script {
            body: "return 1",
            hashed: redis::Script::new("return 1"),
        };
        let call = Call {
            script: ScriptId::Acquire,
            keys: vec![Arc::from("k1"), Arc::from("k2")],
            args: vec![Arc::from("owner"), Arc::from("30000")],
        };
        let eval = as_eval(&script, &evalsha(&script, &call));
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

    #[test]
    fn the_take_is_sent_as_the_one_command_its_script_runs() {
        let call = Call {
            script: ScriptId::Take,
            keys: vec![Arc::from("p:{n}")],
            args: vec![Arc::from("\u{1}c.1\u{1}o"), Arc::from("30000")],
        };
        let scripts = Scripts::new();
        let args: Vec<Vec<u8>> = evalsha(scripts.get(ScriptId::Take), &call)
            .args_iter()
            .map(|arg| match arg {
                Arg::Simple(bytes) => bytes.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        let expected: Vec<&[u8]> = vec![b"SET", b"p:{n}", b"\x01c.1\x01o", b"NX", b"PX", b"30000"];
        assert_eq!(args, expected);
        // The script the checker runs is that command and nothing else.
        let body: Vec<&str> = ScriptId::Take
            .source()
            .lines()
            .filter(|line| !line.starts_with("--") && !line.trim().is_empty())
            .collect();
        assert_eq!(
            body,
            ["return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])"]
        );
    }

    #[test]
    fn scripts_debug_is_short() {
        assert!(format!("{:?}", Scripts::new()).len() < 100);
    }
}
