//! An in-memory model of one Redis 7.0 database: strings and hashes with millisecond
//! expiry, and the handful of commands the lock scripts use, with Redis's exact replies and
//! error messages (checked against a real server by `tests/keyspace_diff.rs`).
//!
//! Time is passed in by the caller (`now_ms`, milliseconds) and never read from a clock.
//!
//! Expiry follows the server, not the documentation's shorthand: a key whose expire time is
//! `t` is still there at `now == t` (its PTTL is 0) and gone from `now == t + 1` on
//! (`keyIsExpired` is `now > when`). Setting an expire time that is `<= now` (PEXPIRE with a
//! non-positive TTL, PEXPIREAT in the past) deletes the key at once.
//!
//! HGETALL lists fields in byte order. A real server lists a small hash in insertion order
//! and a large one in no fixed order: compare HGETALL replies as sets of pairs.
#![allow(dead_code)]

use std::collections::BTreeMap;

/// A reply, as RESP2 carries it: the protocol core's own reply type, so script replies
/// reach the core as they are.
pub use redis_locks::protocol::Reply;

/// A hash's fields and values.
pub type Fields = BTreeMap<Vec<u8>, Vec<u8>>;

/// A stored value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Str(Vec<u8>),
    Hash(Fields),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Entry {
    value: Value,
    /// Absolute expire time in ms; `None` = no TTL.
    expire_at: Option<u64>,
}

impl Entry {
    fn live(&self, now_ms: u64) -> bool {
        self.expire_at.is_none_or(|at| now_ms <= at)
    }
}

/// The keyspace, plus a log of everything PUBLISHed (the model has no subscribers).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Keyspace {
    data: BTreeMap<Vec<u8>, Entry>,
    /// PUBLISH log: (channel, message), oldest first. Survives `flush_all`.
    pub published: Vec<(Vec<u8>, Vec<u8>)>,
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const HASH_NOT_INTEGER: &str = "ERR hash value is not an integer";
const OVERFLOW: &str = "ERR increment or decrement would overflow";
const SYNTAX: &str = "ERR syntax error";

/// Redis's arity of a (lowercase) command the model knows: `n` = exactly n arguments
/// (command name included), `-n` = at least n; `None` = not a command of the model.
pub fn arity(command: &str) -> Option<i32> {
    Some(match command {
        "time" => 1,
        "type" | "get" | "incr" | "hlen" | "hgetall" | "pttl" | "persist" => 2,
        "exists" | "del" => -2,
        "hget" | "hexists" | "publish" | "spublish" => 3,
        "set" | "hmget" | "hdel" | "pexpire" | "pexpireat" => -3,
        "hset" => -4,
        "hincrby" | "hsetnx" => 4,
        _ => return None,
    })
}

/// Whether `argc` arguments (command name included) fit `arity`.
pub fn arity_ok(arity: i32, argc: usize) -> bool {
    let argc = argc as i32;
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}

/// Redis's `string2ll`: optional '-', no '+', no spaces, no leading zeros, fits in i64.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if digits.starts_with('0') && text != "0" {
        return None;
    }
    text.parse().ok()
}

fn int(n: usize) -> Reply {
    Reply::Int(n as i64)
}

fn bulk(bytes: &[u8]) -> Reply {
    Reply::Bulk(bytes.to_vec())
}

impl Keyspace {
    /// Runs one command at model time `now_ms` with Redis 7.0 semantics.
    pub fn command(&mut self, now_ms: u64, args: &[Vec<u8>]) -> Reply {
        self.expire(now_ms);
        let Some(name) = args.first() else {
            return Reply::Error("ERR empty command".into());
        };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        let Some(arity) = arity(&name) else {
            let rest: String = args[1..]
                .iter()
                .map(|a| format!("'{}' ", String::from_utf8_lossy(a)))
                .collect();
            return Reply::Error(format!(
                "ERR unknown command '{}', with args beginning with: {rest}",
                String::from_utf8_lossy(&args[0])
            ));
        };
        if !arity_ok(arity, args.len()) {
            return Reply::Error(format!(
                "ERR wrong number of arguments for '{name}' command"
            ));
        }
        self.run(now_ms, &name, &args[1..])
            .unwrap_or_else(Reply::Error)
    }

    /// Removes every key that has expired at `now_ms` (expire time < now_ms: see the module
    /// docs for why a key is still there at exactly its expire time).
    pub fn expire(&mut self, now_ms: u64) {
        self.data.retain(|_, entry| entry.live(now_ms));
    }

    /// Loses every key (a restart without persistence). The PUBLISH log is kept.
    pub fn flush_all(&mut self) {
        self.data.clear();
    }

    /// The keys alive at `now_ms`, sorted.
    pub fn keys(&self, now_ms: u64) -> Vec<Vec<u8>> {
        self.data
            .iter()
            .filter(|(_, entry)| entry.live(now_ms))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// `None`: no such key; `Some(None)`: no TTL; `Some(Some(t))`: expires after ms `t`.
    pub fn pexpire_at(&self, key: &[u8], now_ms: u64) -> Option<Option<u64>> {
        self.live(key, now_ms).map(|entry| entry.expire_at)
    }

    /// The hash at `key`; `None` when there is no key or it is not a hash.
    pub fn hash(&self, key: &[u8], now_ms: u64) -> Option<&BTreeMap<Vec<u8>, Vec<u8>>> {
        match &self.live(key, now_ms)?.value {
            Value::Hash(hash) => Some(hash),
            Value::Str(_) => None,
        }
    }

    /// The string at `key`; `None` when there is no key or it is not a string.
    pub fn get_str(&self, key: &[u8], now_ms: u64) -> Option<&[u8]> {
        match &self.live(key, now_ms)?.value {
            Value::Str(bytes) => Some(bytes),
            Value::Hash(_) => None,
        }
    }

    fn live(&self, key: &[u8], now_ms: u64) -> Option<&Entry> {
        self.data.get(key).filter(|entry| entry.live(now_ms))
    }

    // The helpers below run inside `command`, after `expire`: every stored key is alive.

    fn string(&self, key: &[u8]) -> Result<Option<&Vec<u8>>, String> {
        match self.data.get(key).map(|entry| &entry.value) {
            None => Ok(None),
            Some(Value::Str(bytes)) => Ok(Some(bytes)),
            Some(Value::Hash(_)) => Err(WRONGTYPE.into()),
        }
    }

    fn hash_of(&self, key: &[u8]) -> Result<Option<&Fields>, String> {
        match self.data.get(key).map(|entry| &entry.value) {
            None => Ok(None),
            Some(Value::Hash(hash)) => Ok(Some(hash)),
            Some(Value::Str(_)) => Err(WRONGTYPE.into()),
        }
    }

    /// The hash at `key`, created empty (without TTL) when missing. The caller must leave it
    /// non-empty or call `drop_if_empty`.
    fn hash_for_write(&mut self, key: &[u8]) -> Result<&mut Fields, String> {
        self.hash_of(key)?;
        let entry = self.data.entry(key.to_vec()).or_insert_with(|| Entry {
            value: Value::Hash(BTreeMap::new()),
            expire_at: None,
        });
        match &mut entry.value {
            Value::Hash(hash) => Ok(hash),
            Value::Str(_) => unreachable!("checked above"),
        }
    }

    fn drop_if_empty(&mut self, key: &[u8]) {
        if matches!(self.data.get(key), Some(Entry { value: Value::Hash(h), .. }) if h.is_empty()) {
            self.data.remove(key);
        }
    }

    fn run(&mut self, now: u64, name: &str, a: &[Vec<u8>]) -> Result<Reply, String> {
        Ok(match name {
            "type" => Reply::Status(
                match self.data.get(&a[0]).map(|entry| &entry.value) {
                    None => "none",
                    Some(Value::Str(_)) => "string",
                    Some(Value::Hash(_)) => "hash",
                }
                .into(),
            ),
            "exists" => int(a.iter().filter(|key| self.data.contains_key(*key)).count()),
            "del" => int(a
                .iter()
                .filter(|key| self.data.remove(*key).is_some())
                .count()),
            "get" => self.string(&a[0])?.map_or(Reply::Nil, |v| bulk(v)),
            "set" => self.set(now, a)?,
            "incr" => {
                let old = match self.string(&a[0])? {
                    None => 0,
                    Some(bytes) => parse_i64(bytes).ok_or(NOT_INTEGER)?,
                };
                let new = old.checked_add(1).ok_or(OVERFLOW)?;
                let expire_at = self.data.get(&a[0]).and_then(|entry| entry.expire_at);
                let value = Value::Str(new.to_string().into_bytes());
                self.data.insert(a[0].clone(), Entry { value, expire_at });
                Reply::Int(new)
            }
            "hget" => self
                .hash_of(&a[0])?
                .and_then(|h| h.get(&a[1]))
                .map_or(Reply::Nil, |v| bulk(v)),
            "hmget" => {
                let hash = self.hash_of(&a[0])?;
                let field =
                    |f: &Vec<u8>| hash.and_then(|h| h.get(f)).map_or(Reply::Nil, |v| bulk(v));
                Reply::Array(a[1..].iter().map(field).collect())
            }
            "hset" => {
                if a.len().is_multiple_of(2) {
                    return Err("ERR wrong number of arguments for 'hset' command".into());
                }
                let hash = self.hash_for_write(&a[0])?;
                let pairs = a[1..].chunks(2);
                int(pairs
                    .filter(|p| hash.insert(p[0].clone(), p[1].clone()).is_none())
                    .count())
            }
            "hsetnx" => {
                let hash = self.hash_for_write(&a[0])?;
                let added = !hash.contains_key(&a[1]);
                if added {
                    hash.insert(a[1].clone(), a[2].clone());
                }
                int(added as usize)
            }
            "hincrby" => {
                let by = parse_i64(&a[2]).ok_or(NOT_INTEGER)?;
                let old = match self.hash_of(&a[0])?.and_then(|h| h.get(&a[1])) {
                    None => 0,
                    Some(bytes) => parse_i64(bytes).ok_or(HASH_NOT_INTEGER)?,
                };
                let new = old.checked_add(by).ok_or(OVERFLOW)?;
                let hash = self.hash_for_write(&a[0])?;
                hash.insert(a[1].clone(), new.to_string().into_bytes());
                Reply::Int(new)
            }
            "hexists" => int(self.hash_of(&a[0])?.is_some_and(|h| h.contains_key(&a[1])) as usize),
            "hdel" => {
                let Some(Entry {
                    value: Value::Hash(hash),
                    ..
                }) = self.data.get_mut(&a[0])
                else {
                    return self.hash_of(&a[0]).map(|_| Reply::Int(0));
                };
                let removed = a[1..].iter().filter(|f| hash.remove(*f).is_some()).count();
                self.drop_if_empty(&a[0]);
                int(removed)
            }
            "hlen" => int(self.hash_of(&a[0])?.map_or(0, |h| h.len())),
            "hgetall" => Reply::Array(
                self.hash_of(&a[0])?
                    .into_iter()
                    .flatten()
                    .flat_map(|(f, v)| [bulk(f), bulk(v)])
                    .collect(),
            ),
            "pexpire" => self.pexpire(now, name, a, now as i64)?,
            "pexpireat" => self.pexpire(now, name, a, 0)?,
            "pttl" => Reply::Int(match self.data.get(&a[0]) {
                None => -2,
                Some(Entry {
                    expire_at: None, ..
                }) => -1,
                Some(Entry {
                    expire_at: Some(at),
                    ..
                }) => (at - now) as i64,
            }),
            "persist" => {
                let entry = self.data.get_mut(&a[0]);
                int(entry.and_then(|entry| entry.expire_at.take()).is_some() as usize)
            }
            "publish" | "spublish" => {
                self.published.push((a[0].clone(), a[1].clone()));
                Reply::Int(0)
            }
            "time" => Reply::Array(vec![
                bulk((now / 1000).to_string().as_bytes()),
                bulk(((now % 1000) * 1000).to_string().as_bytes()),
            ]),
            _ => unreachable!("every command with an arity has an arm"),
        })
    }

    /// SET key value [NX | XX] [GET] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL]
    fn set(&mut self, now: u64, a: &[Vec<u8>]) -> Result<Reply, String> {
        let (mut nx, mut xx, mut get, mut keepttl) = (false, false, false, false);
        let mut expire: Option<(String, &[u8])> = None;
        let mut i = 2;
        while i < a.len() {
            let option = String::from_utf8_lossy(&a[i]).to_ascii_uppercase();
            let next = a.get(i + 1);
            let unit_free = expire.as_ref().is_none_or(|(kind, _)| *kind == option);
            match option.as_str() {
                "NX" if !xx => nx = true,
                "XX" if !nx => xx = true,
                "GET" => get = true,
                "KEEPTTL" if expire.is_none() => keepttl = true,
                "EX" | "PX" | "EXAT" | "PXAT" if !keepttl && unit_free && next.is_some() => {
                    expire = Some((option, next.unwrap()));
                    i += 1;
                }
                _ => return Err(SYNTAX.into()),
            }
            i += 1;
        }
        let invalid = || "ERR invalid expire time in 'set' command".to_string();
        let expire_at = match &expire {
            None => None,
            Some((kind, amount)) => {
                let amount = parse_i64(amount).ok_or(NOT_INTEGER)?;
                let seconds = kind.starts_with('E');
                if amount <= 0 || (seconds && amount > i64::MAX / 1000) {
                    return Err(invalid());
                }
                let ms = if seconds { amount * 1000 } else { amount };
                let relative = kind == "EX" || kind == "PX";
                let at = if relative {
                    ms.checked_add(now as i64).ok_or_else(invalid)?
                } else {
                    ms
                };
                Some(at as u64)
            }
        };
        let old = if get {
            self.string(&a[0])?.map_or(Reply::Nil, |v| bulk(v))
        } else {
            Reply::Nil
        };
        let found = self.data.get(&a[0]);
        if (nx && found.is_some()) || (xx && found.is_none()) {
            return Ok(old);
        }
        let expire_at = if keepttl {
            found.and_then(|e| e.expire_at)
        } else {
            expire_at
        };
        let value = Value::Str(a[1].clone());
        self.data.insert(a[0].clone(), Entry { value, expire_at });
        Ok(if get { old } else { Reply::Status("OK".into()) })
    }

    /// PEXPIRE / PEXPIREAT key ms [NX | XX | GT | LT]; `base` is added to `ms`.
    fn pexpire(&mut self, now: u64, name: &str, a: &[Vec<u8>], base: i64) -> Result<Reply, String> {
        let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
        for option in &a[2..] {
            match String::from_utf8_lossy(option)
                .to_ascii_uppercase()
                .as_str()
            {
                "NX" => nx = true,
                "XX" => xx = true,
                "GT" => gt = true,
                "LT" => lt = true,
                _ => {
                    return Err(format!(
                        "ERR Unsupported option {}",
                        String::from_utf8_lossy(option)
                    ));
                }
            }
        }
        if nx && (xx || gt || lt) {
            return Err(
                "ERR NX and XX, GT or LT options at the same time are not compatible".into(),
            );
        }
        if gt && lt {
            return Err("ERR GT and LT options at the same time are not compatible".into());
        }
        let when = parse_i64(&a[1]).ok_or(NOT_INTEGER)?;
        let when = when
            .checked_add(base)
            .ok_or_else(|| format!("ERR invalid expire time in '{name}' command"))?;
        let Some(entry) = self.data.get_mut(&a[0]) else {
            return Ok(Reply::Int(0));
        };
        // A key without a TTL counts as an infinite TTL for GT and LT.
        let current = entry.expire_at.map(|at| at as i64);
        let refused = (nx && current.is_some())
            || (xx && current.is_none())
            || (gt && current.is_none_or(|cur| when <= cur))
            || (lt && current.is_some_and(|cur| when >= cur));
        if refused {
            return Ok(Reply::Int(0));
        }
        if when <= now as i64 {
            self.data.remove(&a[0]);
        } else {
            entry.expire_at = Some(when as u64);
        }
        Ok(Reply::Int(1))
    }
}
