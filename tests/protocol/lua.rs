//! Runs the project's Lua scripts the way Redis 7.0's EVAL does, in an embedded Lua 5.1,
//! against the in-memory keyspace model (`crate::keyspace`).
//!
//! What is modelled: `redis.call` / `redis.pcall` / `redis.error_reply` /
//! `redis.status_reply` / `redis.log` / `redis.acl_check_cmd` (true, unless a test made the
//! runner refuse the command, as an ACL would: `ScriptRunner::refuse`), KEYS and ARGV, the
//! data type conversions in both directions (RESP2), Redis's `%.17g` rendering of Lua
//! numbers passed as command arguments, Redis's `pcall` (which hands a caught error table's
//! `err` string to the script), and global protection (reading an undefined global or
//! creating one is an error). Time is frozen for the whole script, as on the server.
//!
//! Not modelled: the " script: <sha>, on @user_script:<line>." suffix Redis appends to the
//! message of an error that escapes the script (compare errors by their first word), the
//! cjson / cmsgpack / struct / bit libraries, RESP3, and the read-only protection of the
//! standard library tables (`string.x = 1` works here; Redis refuses it).
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;

use mlua::{Function, Lua, LuaOptions, StdLib, Table, Value, Variadic};

use crate::keyspace::{self, Keyspace, Reply};

/// Defines the `redis` table and returns the function that runs one script.
/// `...` is the Rust command function: it returns the reply and whether it is an error.
const PRELUDE: &str = r#"
local command, acl_allows = ...
local base = {}
for name, value in pairs(_G) do base[name] = value end

local function bad_arguments(...)
  return select('#', ...) ~= 1 or type((...)) ~= 'string'
end
local WRONG_ARGUMENTS = 'ERR wrong number or type of arguments'

local redis = {
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REPL_NONE = 0, REPL_SLAVE = 1, REPL_REPLICA = 1, REPL_AOF = 2, REPL_ALL = 3,
}
function redis.call(...)
  local reply, failed = command(...)
  if failed then error(reply) end
  return reply
end
function redis.pcall(...)
  return (command(...))
end
function redis.status_reply(...)
  if bad_arguments(...) then return { err = WRONG_ARGUMENTS } end
  return { ok = (...) }
end
-- As Redis 7.0 does it: prepend '-' when missing, then "-CODE rest" keeps CODE and a
-- message without a space gets the code ERR ("oops" -> "ERR oops", "My Error" stays).
function redis.error_reply(...)
  if bad_arguments(...) then return { err = WRONG_ARGUMENTS } end
  local message = ...
  if message:sub(1, 1) ~= '-' then message = '-' .. message end
  local space = message:find(' ', 1, true)
  local code, text = 'ERR', message:sub(2)
  if space then code, text = message:sub(2, space - 1), message:sub(space + 1) end
  text = text:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return { err = code .. ' ' .. text }
end
-- Every command is allowed unless the test refuses it (ScriptRunner::refuse, standing in
-- for an ACL rule `-<command>`); as in Redis 7.0, a command that does not exist is an error.
function redis.acl_check_cmd(name)
  local allowed = acl_allows(name)
  if allowed == nil then
    error({ err = 'ERR Invalid command passed to redis.acl_check_cmd()' })
  end
  return allowed
end
function redis.log() end
function redis.replicate_commands() return true end
function redis.set_repl() end
base.redis = redis

-- Redis 7.0 replaces pcall: an error table's `err` string is what the script catches (so
-- `pcall(redis.call, ...)` yields the error message, not the table).
local lua_pcall = pcall
local function caught(ok, ...)
  if ok then return true, ... end
  local err = ...
  if type(err) == 'table' and (type(err.err) == 'string' or type(err.err) == 'number') then
    err = err.err
  end
  return false, err
end
function base.pcall(...)
  return caught(lua_pcall(...))
end

setmetatable(base, { __index = function(_, name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
end })
local env_meta = {
  __index = base,
  __newindex = function(_, name)
    error('Attempt to modify a readonly table', 2)
  end,
}
local function on_error(err)
  if type(err) == 'table' then return err end
  return { err = 'ERR ' .. tostring(err) }
end

return function(script, keys, argv)
  setfenv(script, setmetatable({ KEYS = keys, ARGV = argv }, env_meta))
  return xpcall(script, on_error)
end
"#;

/// The keyspace a running script works on (lent to the Lua state for one `eval`).
struct Session {
    ks: Keyspace,
    now_ms: u64,
}

/// The commands an ACL refuses to the script's user (`ScriptRunner::refuse`), lowercase.
struct Refused(Vec<String>);

/// Whether the test made the runner refuse `command` (lowercase).
fn refused(lua: &Lua, command: &str) -> bool {
    lua.app_data_ref::<Refused>()
        .is_some_and(|refused| refused.0.iter().any(|c| c == command))
}

/// A script body and its compiled chunk.
type Compiled = (String, Function);

/// One Lua state, reused for every script; compiled scripts are cached by their body.
pub struct ScriptRunner {
    lua: Lua,
    run: Function,
    /// Compiled scripts by the address and length of the body they were compiled from
    /// (then compared in full): the checker passes the same `include_str!` bodies again and
    /// again, and this spares hashing a few KB per call.
    compiled: RefCell<HashMap<(usize, usize), Vec<Compiled>>>,
}

impl Default for ScriptRunner {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptRunner {
    pub fn new() -> Self {
        let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH;
        let lua = Lua::new_with(libs, LuaOptions::default()).expect("create the Lua state");
        let command = lua
            .create_function(|lua, args: Variadic<Value>| redis_command(lua, &args))
            .expect("create redis.call");
        // redis.acl_check_cmd's answer: nil for a command that does not exist.
        let acl_allows = lua
            .create_function(|lua, name: mlua::LuaString| {
                let name = name.to_string_lossy().to_ascii_lowercase();
                Ok(keyspace::arity(&name).map(|_| !refused(lua, &name)))
            })
            .expect("create redis.acl_check_cmd");
        let run = lua
            .load(PRELUDE)
            .set_name("=prelude")
            .call::<Function>((command, acl_allows))
            .expect("run the prelude");
        ScriptRunner {
            lua,
            run,
            compiled: RefCell::new(HashMap::new()),
        }
    }

    /// Makes the next scripts run as a user whose ACL refuses `commands` (names, any case;
    /// `&[]`: nothing refused, the default): `redis.call` / `redis.pcall` of one of them
    /// fails with Redis 7.0's error, and `redis.acl_check_cmd` answers false for it.
    pub fn refuse(&self, commands: &[&str]) {
        let commands = commands.iter().map(|c| c.to_ascii_lowercase()).collect();
        self.lua.set_app_data(Refused(commands));
    }

    /// EVAL semantics: runs `body` with KEYS and ARGV against `ks` at `now_ms`, and returns
    /// the script's reply converted as Redis converts it.
    pub fn eval(
        &self,
        body: &str,
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
        ks: &mut Keyspace,
        now_ms: u64,
    ) -> Reply {
        let script = match self.compile(body) {
            Ok(script) => script,
            Err(mlua::Error::SyntaxError { message, .. }) => {
                return Reply::Error(format!(
                    "ERR Error compiling script (new function): {message}"
                ));
            }
            Err(err) => return Reply::Error(format!("ERR {err}")),
        };
        self.lua.set_app_data(Session {
            ks: std::mem::take(ks),
            now_ms,
        });
        let outcome = self.call(script, keys, argv);
        *ks = self
            .lua
            .remove_app_data::<Session>()
            .expect("the session is still there")
            .ks;
        outcome.unwrap_or_else(|err| Reply::Error(format!("ERR {err}")))
    }

    fn compile(&self, body: &str) -> mlua::Result<Function> {
        let address = (body.as_ptr() as usize, body.len());
        if let Some(entries) = self.compiled.borrow().get(&address)
            && let Some((_, script)) = entries.iter().find(|(text, _)| text == body)
        {
            return Ok(script.clone());
        }
        // Redis reads a first line `#!lua flags=...` itself (script flags); Lua 5.1 would
        // not: make it a comment, keeping the line numbers.
        let source = match body.strip_prefix("#!") {
            Some(rest) => format!("--{rest}"),
            None => body.to_owned(),
        };
        let script = self
            .lua
            .load(source)
            .set_name("@user_script")
            .into_function()?;
        let mut compiled = self.compiled.borrow_mut();
        compiled
            .entry(address)
            .or_default()
            .push((body.to_owned(), script.clone()));
        Ok(script)
    }

    fn call(&self, script: Function, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> mlua::Result<Reply> {
        let strings = |items: &[Vec<u8>]| -> mlua::Result<Table> {
            let table = self.lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, self.lua.create_string(item)?)?;
            }
            Ok(table)
        };
        let (ok, value): (bool, Value) = self.run.call((script, strings(keys)?, strings(argv)?))?;
        Ok(match (ok, value) {
            (true, value) => lua_to_reply(value)?,
            (false, Value::Table(err)) => match err.raw_get::<Value>("err")? {
                Value::String(message) => Reply::Error(one_line(&message.to_string_lossy())),
                _ => Reply::Error("ERR script raised an error without a message".into()),
            },
            (false, other) => Reply::Error(format!("ERR {other:?}")),
        })
    }
}

/// The body of `redis.call` / `redis.pcall`: runs one command on the session's keyspace.
fn redis_command(lua: &Lua, args: &[Value]) -> mlua::Result<(Value, bool)> {
    let failure = |message: &str| Ok((reply_to_lua(lua, &Reply::Error(message.into()))?, true));
    if args.is_empty() {
        return failure("ERR Please specify at least one argument for this redis lib call");
    }
    let mut argv = Vec::with_capacity(args.len());
    for arg in args {
        argv.push(match arg {
            Value::String(s) => s.as_bytes().to_vec(),
            // Lua 5.1 numbers are doubles: mlua hands integral ones over as Integer.
            Value::Integer(n) => format_number(*n as f64).into_bytes(),
            Value::Number(n) => format_number(*n).into_bytes(),
            _ => return failure("ERR Lua redis lib command arguments must be strings or integers"),
        });
    }
    // A script's command goes through the command table first, with its own messages.
    match keyspace::arity(&String::from_utf8_lossy(&argv[0]).to_ascii_lowercase()) {
        None => return failure("ERR Unknown Redis command called from script"),
        Some(arity) if !keyspace::arity_ok(arity, argv.len()) => {
            return failure("ERR Wrong number of args calling Redis command from script");
        }
        Some(_) => {}
    }
    // After the arity check, as Redis 7.0's scriptCall checks the ACL.
    if refused(lua, &String::from_utf8_lossy(&argv[0]).to_ascii_lowercase()) {
        return failure("ERR The user executing the script can't run this command or subcommand");
    }
    let reply = {
        let mut session = lua
            .app_data_mut::<Session>()
            .expect("redis.call runs inside eval");
        let now = session.now_ms;
        session.ks.command(now, &argv)
    };
    let failed = matches!(reply, Reply::Error(_));
    let value = reply_to_lua(lua, &reply)?;
    if let (true, Value::Table(err)) = (failed, &value) {
        err.raw_set("ignore_error_stats_update", true)?; // as Redis 7.0 marks them
    }
    Ok((value, failed))
}

/// Redis -> Lua.
fn reply_to_lua(lua: &Lua, reply: &Reply) -> mlua::Result<Value> {
    let single = |field: &str, text: &str| -> mlua::Result<Value> {
        let table = lua.create_table_with_capacity(0, 1)?;
        table.raw_set(field, text)?;
        Ok(Value::Table(table))
    };
    Ok(match reply {
        Reply::Nil => Value::Boolean(false),
        Reply::Int(n) => Value::Number(*n as f64),
        Reply::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        Reply::Status(text) => single("ok", text)?,
        Reply::Error(text) => single("err", text)?,
        Reply::Array(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, reply_to_lua(lua, item)?)?;
            }
            Value::Table(table)
        }
    })
}

/// Lua -> Redis.
fn lua_to_reply(value: Value) -> mlua::Result<Reply> {
    Ok(match value {
        Value::Boolean(true) => Reply::Int(1),
        Value::Integer(n) => Reply::Int(n),
        Value::Number(n) => Reply::Int(c_cast(n)),
        Value::String(s) => Reply::Bulk(s.as_bytes().to_vec()),
        Value::Table(table) => {
            if let Value::String(err) = table.raw_get::<Value>("err")? {
                return Ok(Reply::Error(one_line(&err.to_string_lossy())));
            }
            if let Value::String(ok) = table.raw_get::<Value>("ok")? {
                return Ok(Reply::Status(one_line(&ok.to_string_lossy())));
            }
            let mut items = Vec::new();
            loop {
                match table.raw_get::<Value>(items.len() + 1)? {
                    Value::Nil => break,
                    item => items.push(lua_to_reply(item)?),
                }
            }
            Reply::Array(items)
        }
        _ => Reply::Nil,
    })
}

/// Redis's `(long long)` cast of a Lua number on x86-64: truncation toward zero, and
/// i64::MIN for NaN, infinities and anything out of range (where Rust's `as` saturates).
fn c_cast(n: f64) -> i64 {
    let limit = -(i64::MIN as f64); // 2^63, exact
    if n.is_nan() || !(-limit..limit).contains(&n) {
        i64::MIN
    } else {
        n as i64
    }
}

/// Status and error replies are one line: Redis turns CR and LF into spaces.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// A Lua number as Redis 7.0 passes it to a command: C's `%.17g`.
pub fn format_number(x: f64) -> String {
    if x.is_nan() {
        return if x.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let scientific = format!("{:.16e}", x.abs());
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("LowerExp has an exponent");
    let exponent: i32 = exponent.parse().expect("a decimal exponent");
    let digits = mantissa.replace('.', ""); // 17 significant digits
    let sign = if x < 0.0 { "-" } else { "" };
    let joined = |int: &str, frac: &str| {
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            int.to_string()
        } else {
            format!("{int}.{frac}")
        }
    };
    if (-4..17).contains(&exponent) {
        if exponent >= 0 {
            let (int, frac) = digits.split_at(exponent as usize + 1);
            format!("{sign}{}", joined(int, frac))
        } else {
            let zeros = "0".repeat((-exponent - 1) as usize);
            format!("{sign}{}", joined("0", &format!("{zeros}{digits}")))
        }
    } else {
        let (int, frac) = digits.split_at(1);
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{sign}{}e{exp_sign}{:02}",
            joined(int, frac),
            exponent.abs()
        )
    }
}

/// The script sources a model runs: the files of `lua/` as the library loads them, or
/// copies with a planted defect. Shared by every checker's model.
#[derive(Clone)]
pub struct Scripts {
    sources: Vec<(redis_locks_protocol::ScriptId, String)>,
}

impl Scripts {
    /// The files of `lua/`, as the library loads them.
    pub fn real() -> Self {
        Scripts {
            sources: redis_locks_protocol::ScriptId::ALL
                .iter()
                .map(|&id| (id, id.source().to_owned()))
                .collect(),
        }
    }

    /// A copy with `from` replaced by `to` in one script. Panics if `from` is not there,
    /// so a planted defect cannot silently plant nothing.
    pub fn planted(mut self, id: redis_locks_protocol::ScriptId, from: &str, to: &str) -> Self {
        for (script, source) in &mut self.sources {
            if *script == id {
                assert!(source.contains(from), "{id:?} has no {from:?}");
                *source = source.replacen(from, to, 1);
            }
        }
        self
    }

    /// The source of `id` to run.
    pub fn source(&self, id: redis_locks_protocol::ScriptId) -> &str {
        self.sources
            .iter()
            .find(|(script, _)| *script == id)
            .map_or("", |(_, source)| source.as_str())
    }
}

/// The request id of a reentrant-lock acquire call: `acquire.lua`'s ARGV[3], or the one
/// that the value of `take.lua` (the bare `SET NX`) names (`<mark> <request> "\1" <owner>`).
/// `None` for any other call.
pub fn acquire_request(call: &redis_locks_protocol::Call) -> Option<std::sync::Arc<str>> {
    use redis_locks_protocol::ScriptId;
    match call.script {
        ScriptId::Acquire => call.args.get(2).cloned(),
        ScriptId::Take => {
            let value = call.args.first()?;
            let rest = value.get(1..)?;
            rest.split('\u{1}').next().map(std::sync::Arc::from)
        }
        _ => None,
    }
}

/// Whether `reply` to the reentrant-lock acquire call `call` says it took a fresh hold:
/// `take.lua`'s OK, `acquire.lua`'s bare 0 or `{1, 1, hold, token}`. Returns the hold's
/// token (0: none).
pub fn fresh_grant(call: &redis_locks_protocol::Call, reply: &Reply) -> Option<i64> {
    use redis_locks_protocol::ScriptId;
    match (call.script, reply) {
        (ScriptId::Take, Reply::Status(ok)) if ok == "OK" => Some(0),
        (ScriptId::Acquire, Reply::Int(0)) => Some(0),
        (ScriptId::Acquire, Reply::Array(items)) => match items.as_slice() {
            [Reply::Int(1), Reply::Int(1), _, Reply::Int(token)] => Some(*token),
            _ => None,
        },
        _ => None,
    }
}

/// The owner an acquire call asks for: `acquire.lua`'s ARGV[1], or the part of `take.lua`'s
/// value after the request id.
pub fn acquire_owner(call: &redis_locks_protocol::Call) -> Option<std::sync::Arc<str>> {
    use redis_locks_protocol::ScriptId;
    match call.script {
        ScriptId::Acquire => call.args.first().cloned(),
        ScriptId::Take => {
            let rest = call.args.first()?.get(1..)?;
            rest.split_once('\u{1}')
                .map(|(_, owner)| std::sync::Arc::from(owner))
        }
        _ => None,
    }
}

/// Defects that the teeth of several checkers plant in the reentrant lock's scripts, in
/// both forms a hold can have (a first hold's string, `lua/take.lua`, and the hash), so
/// that a tooth bites whichever form its configurations reach.
impl Scripts {
    /// `acquire.lua` grants while another owner holds.
    pub fn with_grant_over_another_owner(self) -> Self {
        self.planted(
            redis_locks_protocol::ScriptId::Acquire,
            "if not held[1] then\n  redis.call('HSETNX', lock, WAITING, 1)",
            "if not held[1] then\n  redis.call('HSET', lock, owner, 1)\n  return {1, 1, held[2], 0}\nend\nif false then",
        )
        .planted(
            redis_locks_protocol::ScriptId::Acquire,
            "  if holder ~= owner then\n",
            "  if holder ~= owner then\n    redis.call('SET', lock, '\\1' .. request .. '\\1' .. owner, 'KEEPTTL')\n    do return {1, 1, request, 0} end\n",
        )
    }

    /// `release.lua` gives back whatever hold it finds, any owner's.
    pub fn with_release_of_any_hold(self) -> Self {
        self.planted(
            redis_locks_protocol::ScriptId::Release,
            "if not held[1] or held[2] ~= hold then\n  return -1\nend",
            "",
        )
        .planted(
            redis_locks_protocol::ScriptId::Release,
            "  if string.match(value, '^[\\1\\2][^\\1]+\\1.+$') then\n    return -1\n",
            "  if string.match(value, '^[\\1\\2][^\\1]+\\1.+$') then\n    redis.call('DEL', lock)\n    return 0\n",
        )
        .planted(
            redis_locks_protocol::ScriptId::ReleaseFirst,
            "  if string.match(value, '^[\\1\\2][^\\1]+\\1.+$') then\n    return -1\n",
            "  if string.match(value, '^[\\1\\2][^\\1]+\\1.+$') then\n    redis.call('DEL', lock)\n    return 0\n",
        )
    }

    /// `release.lua` reports a lock it finds gone as given back (0), not "not current".
    pub fn with_gone_lock_reported_released(self) -> Self {
        self.planted(
            redis_locks_protocol::ScriptId::Release,
            "if not held[1] or held[2] ~= hold then\n  return -1\nend",
            "if not held[2] then\n  return 0\nend\nif not held[1] or held[2] ~= hold then\n  return -1\nend",
        )
        .planted(
            redis_locks_protocol::ScriptId::Release,
            "if not value then\n  return -1\nend",
            "if not value then\n  return 0\nend",
        )
        .planted(
            redis_locks_protocol::ScriptId::ReleaseFirst,
            "if not value then\n  return -1\nend",
            "if not value then\n  return 0\nend",
        )
    }

    /// `probe.lua` never finds what a lost acquire took.
    pub fn with_probe_finding_nothing(self) -> Self {
        self.planted(
            redis_locks_protocol::ScriptId::Probe,
            "if held[2] == request or held[3] == seq then",
            "if false then",
        )
        .planted(
            redis_locks_protocol::ScriptId::Probe,
            "if value == '\\1' .. mine or value == '\\2' .. mine then",
            "if false then",
        )
    }

    /// A fresh hold's expiry is set 5 ms shorter than the lease asked for (the take's bare
    /// `SET NX` too: as the library would send it with a wrong `PX`).
    pub fn with_short_fresh_expiry(self) -> Self {
        self.planted(
            redis_locks_protocol::ScriptId::Acquire,
            "local expiry = redis.pcall('PEXPIRE', lock, lease)",
            "local expiry = redis.pcall('PEXPIRE', lock, lease - 5)",
        )
        .planted(
            redis_locks_protocol::ScriptId::Acquire,
            "owner, 'PX', lease)",
            "owner, 'PX', lease - 5)",
        )
        .planted(
            redis_locks_protocol::ScriptId::Take,
            "'PX', ARGV[2])",
            "'PX', ARGV[2] - 5)",
        )
    }
}
