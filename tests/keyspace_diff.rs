//! Differential tests: the in-memory keyspace model (`tests/protocol/keyspace.rs`) and the
//! embedded-Lua script runner (`tests/protocol/lua.rs`) against a real redis-server.
//!
//! Random command sequences, and random EVALs of the real scripts in lua/, run on both the
//! server and the model, and every reply must agree. The model runs on the server's clock
//! (Unix time in ms). A command in flight from `t0` to `t1` ran on the server at some ms in
//! `t0..=t1`, so the model keeps every state it could be in (see `Model`), and after each
//! step asks the server for every key's type and absolute expire time (PEXPIRETIME) to
//! drop the states that disagree. Set `KEYSPACE_DIFF_SEED` to replay a sequence (the
//! timing, and so the expiries, still vary from run to run).
mod common;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keyspace::{Keyspace, Reply};
use lua::ScriptRunner;
use redis::aio::{ConnectionLike, MultiplexedConnection};

// ---------------------------------------------------------------------------------------
// The scripts under test. When a script in lua/ gains, loses or reorders KEYS or ARGV,
// update its row: each slot says what kind of value to generate there.
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Slot {
    /// The lock hash, `lk:{<lock>}`.
    Lock,
    /// One to three lock hashes (each `lk:{a}` or `lk:{b}`), for batch scripts.
    Locks,
    /// The lock's fencing counter.
    Fence,
    /// An owner id.
    Owner,
    /// A lease in ms (50..=500).
    Lease,
    /// A request id `<client-tag>.<seq>` from a small set (now and then a malformed one).
    Request,
    /// A request id from the same set in two ARGV, client tag and seq (release's form).
    RequestParts,
    /// A hold id: a request id from the same small set, so it is often the current one.
    Hold,
    /// One hold id per generated key (renew's ARGV[3..]).
    HoldPerKey,
    /// How many of the generated keys are renewed (renew's ARGV[2]): 0..=n.
    Renewing,
    /// acquire's flags: '0'..'3' (fenced, others waiting).
    Fenced,
    /// The lock's wake-up channel.
    Channel,
    /// release's re-arm ms: '0' half of the time.
    RearmMs,
    /// release's expected count: 0..=3.
    Expected,
}
use Slot::*;

struct Script {
    name: &'static str,
    body: &'static str,
    keys: &'static [Slot],
    argv: &'static [Slot],
}

const SCRIPTS: &[Script] = &[
    Script {
        name: "acquire",
        body: include_str!("../lua/acquire.lua"),
        keys: &[Lock, Fence],
        argv: &[Owner, Lease, Request, Fenced],
    },
    Script {
        name: "release",
        body: include_str!("../lua/release.lua"),
        keys: &[Lock],
        argv: &[Owner, Hold, RequestParts, Channel, RearmMs, Expected],
    },
    Script {
        name: "renew",
        body: include_str!("../lua/renew.lua"),
        keys: &[Locks],
        argv: &[Lease, Renewing, HoldPerKey],
    },
    Script {
        name: "probe",
        body: include_str!("../lua/probe.lua"),
        keys: &[Lock],
        argv: &[Owner, Request],
    },
    Script {
        name: "force_unlock",
        body: include_str!("../lua/force_unlock.lua"),
        keys: &[Lock],
        argv: &[Channel],
    },
    Script {
        name: "inspect",
        body: include_str!("../lua/inspect.lua"),
        keys: &[Lock, Fence],
        argv: &[],
    },
];

const OWNERS: &[&str] = &["o1", "o2"];
const LOCKS: &[&str] = &["a", "b"];
const REQUESTS: &[&str] = &["c1.1", "c1.2", "c2.1", "c2.2"];

// ---------------------------------------------------------------------------------------
// Random numbers (SplitMix64): reproducible from the printed seed.
// ---------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.next() as usize % items.len()]
    }
}

fn seed() -> u64 {
    let seed = match std::env::var("KEYSPACE_DIFF_SEED") {
        Ok(text) => text.parse().expect("KEYSPACE_DIFF_SEED is a u64"),
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    };
    println!("seed {seed} (replay with KEYSPACE_DIFF_SEED={seed})");
    seed
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn args(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

// ---------------------------------------------------------------------------------------
// Talking to the server.
// ---------------------------------------------------------------------------------------

fn from_value(value: redis::Value) -> Reply {
    use redis::Value as V;
    match value {
        V::Nil => Reply::Nil,
        V::Int(n) => Reply::Int(n),
        V::BulkString(bytes) => Reply::Bulk(bytes),
        V::Array(items) => Reply::Array(items.into_iter().map(from_value).collect()),
        V::SimpleString(text) => Reply::Status(text),
        V::Okay => Reply::Status("OK".into()),
        V::ServerError(err) => Reply::Error(match err.details() {
            Some(detail) => format!("{} {detail}", err.code()),
            None => err.code().to_string(),
        }),
        other => panic!("a RESP2 server does not send {other:?}"),
    }
}

async fn real(conn: &mut MultiplexedConnection, parts: &[Vec<u8>]) -> Reply {
    let mut cmd = redis::Cmd::new();
    for part in parts {
        cmd.arg(&part[..]);
    }
    match conn.req_packed_command(&cmd).await {
        Ok(value) => from_value(value),
        Err(err) => match err.code() {
            Some(code) => Reply::Error(match err.detail() {
                Some(detail) => format!("{code} {detail}"),
                None => code.to_string(),
            }),
            None => panic!("talking to redis-server: {err}"),
        },
    }
}

async fn real_eval(
    conn: &mut MultiplexedConnection,
    body: &str,
    keys: &[Vec<u8>],
    argv: &[Vec<u8>],
) -> Reply {
    let mut parts = args(&["EVAL", body, &keys.len().to_string()]);
    parts.extend(keys.iter().chain(argv).cloned());
    real(conn, &parts).await
}

// ---------------------------------------------------------------------------------------
// When do a model reply and a server reply agree?
// ---------------------------------------------------------------------------------------

const TTL_TOLERANCE_MS: i64 = 50;

fn first_word(text: &str) -> &str {
    text.split(' ').next().unwrap_or("")
}

/// Exact, except that an error that escaped a script (Redis appends " script: <sha>, on
/// @user_script:<line>.") is compared by its first word.
fn same(model: &Reply, real: &Reply) -> bool {
    match (model, real) {
        (Reply::Error(m), Reply::Error(r)) if r.contains(" script: ") => {
            first_word(m) == first_word(r)
        }
        (Reply::Array(m), Reply::Array(r)) => {
            m.len() == r.len() && m.iter().zip(r).all(|(m, r)| same(m, r))
        }
        _ => model == real,
    }
}

/// A remaining TTL: same sign class, and within the tolerance when positive.
fn ttl_close(model: &Reply, real: &Reply) -> bool {
    match (model, real) {
        (Reply::Int(m), Reply::Int(r)) if *m >= 0 && *r >= 0 => (m - r).abs() <= TTL_TOLERANCE_MS,
        _ => model == real,
    }
}

/// Field/value pairs in a canonical order (HGETALL's order differs: see keyspace.rs).
fn sorted_pairs(items: &[Reply]) -> Vec<Reply> {
    let mut pairs: Vec<&[Reply]> = items.chunks(2).collect();
    pairs.sort_by_key(|pair| format!("{pair:?}"));
    pairs.concat()
}

fn agree_command(name: &str, model: &Reply, real: &Reply) -> bool {
    match (name, model, real) {
        ("pttl", _, _) => ttl_close(model, real),
        ("time", Reply::Array(m), Reply::Array(r)) => {
            let numbers = |items: &[Reply]| {
                items.len() == 2
                    && items
                        .iter()
                        .all(|i| matches!(i, Reply::Bulk(b) if keyspace::parse_i64(b).is_some()))
            };
            numbers(m) && numbers(r)
        }
        ("hgetall", Reply::Array(m), Reply::Array(r)) => sorted_pairs(m) == sorted_pairs(r),
        _ => same(model, real),
    }
}

/// Fencing tokens floored at the server's TIME in microseconds: the model's clock has ms
/// resolution, so such numbers (integers or digit strings above 10^15) agree within the
/// TTL tolerance.
fn micros_close(model: &Reply, real: &Reply) -> bool {
    let micros = |reply: &Reply| {
        match reply {
            Reply::Int(n) => Some(*n),
            Reply::Bulk(bytes) => keyspace::parse_i64(bytes),
            _ => None,
        }
        .filter(|n| *n >= 1_000_000_000_000_000)
    };
    match (micros(model), micros(real)) {
        (Some(m), Some(r)) => (m - r).abs() <= TTL_TOLERANCE_MS * 1000,
        _ => false,
    }
}

/// Script replies: `{0, pttl}` and inspect's `{type, pttl, fence, field, value...}` carry a
/// TTL in second place; inspect's fields come in HGETALL order; fencing tokens are times.
fn agree_script(model: &Reply, real: &Reply) -> bool {
    let (Reply::Array(m), Reply::Array(r)) = (model, real) else {
        return same(model, real);
    };
    if m.len() != r.len() || m.len() < 2 {
        return same(model, real);
    }
    let inspect = matches!(m[0], Reply::Bulk(_)) && m.len() >= 3;
    let ttl_second = inspect || m[0] == Reply::Int(0);
    let (m, r) = if inspect {
        (
            [&m[..3], &sorted_pairs(&m[3..])[..]].concat(),
            [&r[..3], &sorted_pairs(&r[3..])[..]].concat(),
        )
    } else {
        (m.clone(), r.clone())
    };
    m.iter().zip(&r).enumerate().all(|(i, (m, r))| {
        if i == 1 && ttl_second {
            ttl_close(m, r)
        } else {
            same(m, r) || micros_close(m, r)
        }
    })
}

/// Most model states kept at once (they differ only in expire times until a sync).
const MAX_STATES: usize = 64;
/// How far (ms) a model expire time may be from the server's: inside a script Redis 7.0
/// reads the clock afresh for PEXPIRE, while the model runs the whole script at one instant.
const EXPIRE_TOLERANCE_MS: i64 = 2;

/// The model, kept in step with the server. A command in flight from `t0` to `t1` ran on
/// the server at some ms in `t0..=t1`, so every state the model could be in is kept: each
/// step runs on each state at each of those ms and keeps the results whose reply agrees.
/// `sync` then asks the server for the type and absolute expire time of every key, drops
/// the states that disagree and copies the server's exact expire times into the rest.
struct Model {
    states: Vec<Keyspace>,
    /// Every key the test may touch (what `sync` asks about).
    universe: Vec<String>,
    /// The last few steps, for failure reports.
    history: std::collections::VecDeque<String>,
}

impl Model {
    fn new(universe: Vec<String>) -> Self {
        Model {
            states: vec![Keyspace::default()],
            universe,
            history: Default::default(),
        }
    }

    fn step(
        &mut self,
        what: &str,
        (t0, t1): (u64, u64),
        real: &Reply,
        agree: impl Fn(&Reply, &Reply) -> bool,
        mut step: impl FnMut(&mut Keyspace, u64) -> Reply,
    ) {
        let mut next: Vec<Keyspace> = Vec::new();
        let mut tried = Vec::new();
        for state in &self.states {
            for t in t0..=t1 {
                let mut candidate = state.clone();
                let reply = step(&mut candidate, t);
                if !agree(&reply, real) {
                    tried.push(format!("  model at {t}: {}", show(&reply)));
                } else if !next.contains(&candidate) {
                    next.push(candidate);
                }
            }
        }
        if next.is_empty() {
            self.fail(
                &format!(
                    "{what}\nserver ({t0}..={t1}): {}\n{}",
                    show(real),
                    tried.join("\n")
                ),
                t0,
            );
        }
        assert!(
            next.len() <= MAX_STATES,
            "{what}: {} possible model states",
            next.len()
        );
        self.states = next;
        self.remember(format!("{t0}..={t1}: {what} -> {}", show(real)));
    }

    async fn sync(&mut self, conn: &mut MultiplexedConnection) {
        let mut pipe = redis::pipe();
        for key in &self.universe {
            pipe.cmd("TYPE").arg(key).cmd("PEXPIRETIME").arg(key);
        }
        let q0 = now_ms();
        let replies: Vec<redis::Value> = pipe.query_async(conn).await.expect("TYPE / PEXPIRETIME");
        let q1 = now_ms();
        let view: Vec<(&str, String, i64)> = self
            .universe
            .iter()
            .zip(replies.chunks(2))
            .map(|(key, pair)| match pair {
                [redis::Value::SimpleString(kind), redis::Value::Int(at)] => {
                    (key.as_str(), kind.clone(), *at)
                }
                other => panic!("TYPE / PEXPIRETIME {key}: {other:?}"),
            })
            .collect();
        let mut kept: Vec<Keyspace> = Vec::new();
        for state in &self.states {
            if let Some(state) = reconcile(state.clone(), &view, q0, q1)
                && !kept.contains(&state)
            {
                kept.push(state);
            }
        }
        if kept.is_empty() {
            let view: Vec<String> = view
                .iter()
                .map(|(key, kind, at)| format!("{key}: {kind} {at}"))
                .collect();
            self.fail(
                &format!("server state ({q0}..={q1}) is none of the model's: {view:?}"),
                q0,
            );
        }
        self.states = kept;
    }

    fn remember(&mut self, step: String) {
        if self.history.len() == 12 {
            self.history.pop_front();
        }
        self.history.push_back(step);
    }

    fn fail(&self, message: &str, now: u64) -> ! {
        panic!(
            "{message}\nmodel before ({} possible states; the first), at {now}:{}\nrecent steps:\n  {}",
            self.states.len(),
            dump(&self.states[0], now),
            Vec::from(self.history.clone()).join("\n  "),
        );
    }
}

/// `state` if it matches what the server said about each key (`TYPE`, `PEXPIRETIME`)
/// between `q0` and `q1`, with the server's exact expire times copied in.
fn reconcile(
    mut state: Keyspace,
    view: &[(&str, String, i64)],
    q0: u64,
    q1: u64,
) -> Option<Keyspace> {
    state.expire(q0); // the next step runs after q1 anyway
    for (key, kind, at) in view {
        let key = key.as_bytes();
        let model_kind = match (state.get_str(key, q0), state.hash(key, q0)) {
            (Some(_), _) => "string",
            (_, Some(_)) => "hash",
            _ if state.zset(key, q0).is_some() => "zset",
            _ => "none",
        };
        match (*at, state.pexpire_at(key, q0)) {
            (-2, None) => {}
            // Gone on the server when asked; the model lets it expire by then too.
            (-2, Some(Some(model_at))) if model_at < q1 => {}
            (-1, Some(None)) if model_kind == kind => {}
            (at, Some(Some(model_at))) if at >= 0 && model_kind == kind => {
                if (model_at as i64 - at).abs() > EXPIRE_TOLERANCE_MS {
                    return None;
                }
                let exact = args(&[
                    "PEXPIREAT",
                    std::str::from_utf8(key).unwrap(),
                    &at.to_string(),
                ]);
                state.command(0, &exact);
            }
            _ => return None,
        }
    }
    Some(state)
}

/// A reply with its strings readable.
fn show(reply: &Reply) -> String {
    match reply {
        Reply::Bulk(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
        Reply::Array(items) => format!(
            "[{}]",
            items.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        other => format!("{other:?}"),
    }
}

/// The model's keys, values and expire times, readable.
fn dump(ks: &Keyspace, now: u64) -> String {
    let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut out = String::new();
    for key in ks.keys(now) {
        let value = match (ks.get_str(&key, now), ks.hash(&key, now)) {
            (Some(s), _) => format!("{:?}", lossy(s)),
            (_, Some(h)) => format!(
                "{:?}",
                h.iter()
                    .map(|(f, v)| (lossy(f), lossy(v)))
                    .collect::<Vec<_>>()
            ),
            _ => match ks.zset(&key, now) {
                Some(z) => format!(
                    "{:?}",
                    keyspace::zset_order(z)
                        .into_iter()
                        .map(|(m, s)| (lossy(m), s))
                        .collect::<Vec<_>>()
                ),
                None => unreachable!("a live key is a string, a hash or a sorted set"),
            },
        };
        let ttl = ks
            .pexpire_at(&key, now)
            .flatten()
            .map(|at| format!(" (expires at {at})"));
        out += &format!("\n  {:?} = {value}{}", lossy(&key), ttl.unwrap_or_default());
    }
    out
}

fn text(parts: &[Vec<u8>]) -> String {
    parts
        .iter()
        .map(|p| String::from_utf8_lossy(p))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------------------
// Plain commands.
// ---------------------------------------------------------------------------------------

const KEYS: &[&str] = &["k1", "k2", "k3", "k4"];
const FIELDS: &[&str] = &["f1", "f2", "f3"];
const VALUES: &[&str] = &[
    "1",
    "0",
    "-7",
    "42",
    "abc",
    "1.5",
    "",
    "01",
    "9223372036854775807",
];
const PEXPIRE_OPTIONS: &[&[&str]] = &[
    &[],
    &["NX"],
    &["XX"],
    &["GT"],
    &["lt"],
    &["NX", "GT"],
    &["XX", "GT"],
    &["GT", "LT"],
    &["BOGUS"],
];
const INCREMENTS: &[&str] = &["1", "-1", "5", "-100", "x", "9223372036854775807"];

const MEMBERS: &[&str] = &["m1", "m2", "m3", "m4"];
const SCORES: &[&str] = &[
    "1", "2", "3", "-1", "0", "1.5", "100", "+inf", "-inf", "inf", "2e1", "x", "", "nan", "1e400",
    "1e-400", "-0",
];
const BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "1", "2", "(1", "(2", "3", "(3", "1.5", "100", "(", "", "x", "(x", "inf",
    "-1", "1e400",
];
const RANKS: &[&str] = &["0", "1", "2", "-1", "-2", "-5", "5", "x"];
const ZADD_OPTIONS: &[&[&str]] = &[
    &[],
    &[],
    &["NX"],
    &["XX"],
    &["GT"],
    &["lt"],
    &["XX", "GT"],
    &["CH"],
    &["GT", "CH"],
    &["NX", "XX"],
    &["NX", "GT"],
    &["GT", "LT"],
    &["INCR"],
    &["XX", "INCR"],
];

/// A sorted-set command (mostly on k4, now and then on k3, which other commands make a
/// string or a hash: WRONGTYPE).
fn random_zset_command(rng: &mut Rng) -> Vec<&'static str> {
    let zkey = *rng.pick(&["k4", "k4", "k4", "k3"]);
    let member = *rng.pick(MEMBERS);
    let member2 = *rng.pick(MEMBERS);
    let odd = *rng.pick(SCORES);
    let score = *rng.pick(&[odd, "1", "2", "3"]);
    let score2 = *rng.pick(&["1", "2", "3", "4"]);
    let (min, max) = (*rng.pick(BOUNDS), *rng.pick(BOUNDS));
    let (start, stop) = (*rng.pick(RANKS), *rng.pick(RANKS));
    match rng.next() % 14 {
        0..=2 => [
            &["ZADD", zkey][..],
            *rng.pick(ZADD_OPTIONS),
            &[score, member],
        ]
        .concat(),
        3 => vec!["ZADD", zkey, score, member, score2, member2],
        4 => match rng.next() % 3 {
            0 => vec!["ZADD", zkey],
            1 => vec!["ZADD", zkey, "1"],
            _ => vec!["ZADD", zkey, "INCR", "1", member, "2", member2],
        },
        5 => vec!["ZREM", zkey, member, member2],
        6 => vec!["ZSCORE", zkey, member],
        7 => vec!["ZCARD", zkey],
        8 => vec!["ZCOUNT", zkey, min, max],
        9 => match rng.next() % 5 {
            0 => vec!["ZRANGE", zkey, start, stop],
            1 => vec!["ZRANGE", zkey, start, stop, "WITHSCORES"],
            2 => vec!["ZRANGE", zkey, start, stop, "REV"],
            3 => vec!["zrange", zkey, min, max, "BYSCORE", "LIMIT", start, stop],
            _ => vec!["ZRANGE", zkey, start, stop, "LIMIT", "0", "1"],
        },
        10 | 11 => match rng.next() % 5 {
            0 | 1 => vec!["ZRANGEBYSCORE", zkey, min, max],
            2 => vec!["ZRANGEBYSCORE", zkey, min, max, "WITHSCORES"],
            3 => vec!["ZRANGEBYSCORE", zkey, min, max, "LIMIT", start, stop],
            _ => vec!["ZRANGEBYSCORE", zkey, min, max, "BOGUS"],
        },
        12 => vec!["ZREMRANGEBYSCORE", zkey, min, max],
        _ => match rng.next() % 4 {
            0 => vec!["TYPE", zkey],
            1 => vec!["PEXPIRE", zkey, *rng.pick(&["50", "200", "0"])],
            2 => vec!["PTTL", zkey],
            _ => vec!["DEL", zkey],
        },
    }
}

fn random_command(rng: &mut Rng) -> Vec<Vec<u8>> {
    if rng.chance(30) {
        return args(&random_zset_command(rng));
    }
    // String commands mostly go to k1, hash commands to k2; k3 gets both (WRONGTYPE).
    let skey = *rng.pick(&["k1", "k1", "k3"]);
    let hkey = *rng.pick(&["k2", "k2", "k3"]);
    let key = *rng.pick(KEYS);
    let other = *rng.pick(KEYS);
    let field = *rng.pick(FIELDS);
    let field2 = *rng.pick(FIELDS);
    let value = *rng.pick(VALUES);
    let value2 = *rng.pick(VALUES);
    let ttl = rng.range(20, 300).to_string();
    let at = (now_ms() + rng.range(20, 300)).to_string();
    let ttl = ttl.as_str();
    let parts: Vec<&str> = match rng.next() % 28 {
        0 => vec!["TYPE", key],
        1 => vec!["EXISTS", key, other],
        2 => vec!["DEL", *rng.pick(&[key, "k3"])],
        3 => vec!["GET", skey],
        4 | 5 => vec!["SET", skey, value],
        6 | 7 => vec!["SET", skey, value, "PX", ttl],
        8 => vec!["SET", skey, value, "NX", "PX", ttl],
        9 => match rng.next() % 8 {
            0 => vec!["SET", skey, value, "XX"],
            1 => vec!["set", skey, value, "GET"],
            2 => vec!["SET", skey, value, "KEEPTTL"],
            3 => vec!["SET", skey, value, "EX", "1"],
            4 => vec!["SET", skey, value, "PX", "0"],
            5 => vec!["SET", skey, value, "PX", "abc"],
            6 => vec!["SET", skey, value, "NX", "XX"],
            _ => vec!["SET", skey, value, "PXAT", &at],
        },
        10 => vec!["INCR", skey],
        11 => vec!["HGET", hkey, field],
        12 => vec!["HMGET", hkey, "f1", "f2", "f3"],
        13 | 14 => vec!["HSET", hkey, field, value],
        15 => vec!["hset", hkey, field, value, field2, value2],
        16 => vec!["HINCRBY", hkey, field, *rng.pick(INCREMENTS)],
        17 => vec!["HEXISTS", hkey, field],
        18 => vec!["HDEL", hkey, field, field2],
        19 => vec!["HLEN", hkey],
        20 => vec!["HGETALL", hkey],
        21 | 22 => {
            let ms = *rng.pick(&[ttl, ttl, ttl, "0", "-5", "x"]);
            [&["PEXPIRE", key, ms][..], *rng.pick(PEXPIRE_OPTIONS)].concat()
        }
        23 => vec!["PEXPIREAT", key, &at],
        24 => vec!["PTTL", key],
        25 => vec!["PERSIST", key],
        26 => match rng.next() % 3 {
            0 => vec!["PUBLISH", "chan", value],
            1 => vec!["TIME"],
            _ => vec!["pttl", key],
        },
        _ => match rng.next() % 5 {
            0 => vec!["GET"],
            1 => vec!["HSETNX", hkey, field, value],
            2 => vec!["PTTL"],
            3 => vec!["NOPE", key, value],
            _ => vec!["HSET", hkey, field, value, field2],
        },
    };
    args(&parts)
}

#[tokio::test]
async fn commands_match_real_redis() {
    let server = common::RedisServer::start();
    let mut conn = server.conn().await;
    let mut rng = Rng(seed());
    let mut model = Model::new(KEYS.iter().map(|k| k.to_string()).collect());
    let mut stats = std::collections::BTreeMap::<String, (u32, u32)>::new();
    const STEPS: usize = 3000;
    for step in 0..STEPS {
        if rng.chance(2) {
            tokio::time::sleep(Duration::from_millis(rng.range(10, 150))).await;
        }
        let parts = random_command(&mut rng);
        let name = String::from_utf8_lossy(&parts[0]).to_ascii_lowercase();
        let t0 = now_ms();
        let reply = real(&mut conn, &parts).await;
        let t1 = now_ms();
        let agree = |m: &Reply, r: &Reply| agree_command(&name, m, r);
        model.step(
            &format!("step {step}: {}", text(&parts)),
            (t0, t1),
            &reply,
            agree,
            |ks, t| ks.command(t, &parts),
        );
        model.sync(&mut conn).await;
        let tally = stats.entry(name).or_default();
        tally.0 += 1;
        tally.1 += matches!(reply, Reply::Error(_)) as u32;
    }
    println!("{STEPS} commands agreed; (count, errors) per command: {stats:?}");
    println!(
        "PUBLISH log in the model: {} messages",
        model.states[0].published.len()
    );
}

// ---------------------------------------------------------------------------------------
// The real scripts.
// ---------------------------------------------------------------------------------------

/// Random KEYS and ARGV for `script`. `held` tells who holds a lock key in the model (owner
/// and hold id), so that most calls name the current holder and reach the success paths.
fn script_call(
    rng: &mut Rng,
    script: &Script,
    held: impl Fn(&str) -> Option<(String, String)>,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let lock = *rng.pick(LOCKS);
    let holder = held(&format!("lk:{{{lock}}}"));
    let mut keys = Vec::new();
    for slot in script.keys {
        match slot {
            Lock => keys.push(format!("lk:{{{lock}}}")),
            Locks => {
                for _ in 0..rng.range(1, 3) {
                    keys.push(format!("lk:{{{}}}", rng.pick(LOCKS)));
                }
            }
            Fence => keys.push(format!("lk:{{{lock}}}:fence")),
            other => panic!("{}: {other:?} is not a KEYS slot", script.name),
        }
    }
    let mut argv = Vec::new();
    for slot in script.argv {
        match slot {
            Owner => match &holder {
                Some((owner, _)) if rng.chance(60) => argv.push(owner.clone()),
                _ => argv.push(rng.pick(OWNERS).to_string()),
            },
            Lease => argv.push(rng.range(50, 500).to_string()),
            Request if rng.chance(3) => argv.push("malformed".into()),
            Request => argv.push(rng.pick(REQUESTS).to_string()),
            RequestParts => {
                let (tag, seq) = rng.pick(REQUESTS).split_once('.').unwrap_or(("c1", "1"));
                argv.push(tag.to_owned());
                argv.push(seq.to_owned());
            }
            Hold => match &holder {
                Some((_, hold)) if rng.chance(70) => argv.push(hold.clone()),
                _ => argv.push(rng.pick(REQUESTS).to_string()),
            },
            HoldPerKey => {
                for key in &keys {
                    match held(key) {
                        Some((_, hold)) if rng.chance(70) => argv.push(hold),
                        _ => argv.push(rng.pick(REQUESTS).to_string()),
                    }
                }
            }
            Renewing => argv.push(rng.range(0, keys.len() as u64).to_string()),
            Fenced => argv.push(rng.pick(&["0", "1", "2", "3"]).to_string()),
            Channel => argv.push(format!("lk:{{{lock}}}:db0:released")),
            RearmMs if rng.chance(50) => argv.push("0".into()),
            RearmMs => argv.push(rng.range(20, 400).to_string()),
            Expected => argv.push(rng.range(0, 3).to_string()),
            other => panic!("{}: {other:?} is not an ARGV slot", script.name),
        }
    }
    let bytes = |v: Vec<String>| v.into_iter().map(String::into_bytes).collect();
    (bytes(keys), bytes(argv))
}

/// Who holds the lock hash `key` in `ks`: (an owner field, the hold id field "\1h").
fn holder(ks: &Keyspace, key: &str, now: u64) -> Option<(String, String)> {
    let fields = ks.hash(key.as_bytes(), now)?;
    let hold = String::from_utf8_lossy(fields.get(&b"\x01h"[..])?).into_owned();
    let owner = fields.keys().find(|field| !field.starts_with(b"\x01"))?;
    Some((String::from_utf8_lossy(owner).into_owned(), hold))
}

/// Every key `script_call` and `disturbance` can name.
fn script_keys() -> Vec<String> {
    LOCKS
        .iter()
        .flat_map(|lock| [format!("lk:{{{lock}}}"), format!("lk:{{{lock}}}:fence")])
        .collect()
}

/// Writes that put the keys into the states the scripts must cope with: wrong types, hashes
/// of somebody else, hashes without a TTL or a hold id, bad hold counts and counters, a
/// lost lock.
fn disturbance(rng: &mut Rng) -> Vec<Vec<u8>> {
    let lock = format!("lk:{{{}}}", rng.pick(LOCKS));
    let fence = format!("{lock}:fence");
    let owner = *rng.pick(OWNERS);
    let parts: Vec<&str> = match rng.next() % 10 {
        0 => vec!["SET", &lock, "x", "PX", "20"],
        1 => vec!["DEL", &lock],
        2 => vec!["PERSIST", &lock],
        3 => vec!["HSET", &lock, owner, "abc"],
        4 => vec!["HDEL", &lock, "\u{1}h"],
        5 => vec!["HSET", &lock, "o3", "1", "\u{1}h", "c9.1"],
        6 => vec!["SET", &fence, "nan", "PX", "30"],
        7 => vec!["DEL", &fence],
        8 => vec!["SET", &fence, "42"],
        _ => vec!["PEXPIRE", &lock, "5"],
    };
    args(&parts)
}

#[tokio::test]
async fn scripts_match_real_redis() {
    let server = common::RedisServer::start();
    let mut conn = server.conn().await;
    let mut rng = Rng(seed());
    let runner = ScriptRunner::new();
    let mut model = Model::new(script_keys());
    let mut outcomes = std::collections::BTreeMap::<String, u32>::new();
    const STEPS: usize = 2000;
    for step in 0..STEPS {
        if rng.chance(3) {
            tokio::time::sleep(Duration::from_millis(rng.range(10, 150))).await;
        }
        if rng.chance(8) {
            let parts = disturbance(&mut rng);
            let (t0, reply, t1) = (now_ms(), real(&mut conn, &parts).await, now_ms());
            model.step(
                &format!("step {step}: {}", text(&parts)),
                (t0, t1),
                &reply,
                same,
                |ks, t| ks.command(t, &parts),
            );
            model.sync(&mut conn).await;
            continue;
        }
        let script = rng.pick(SCRIPTS);
        let (keys, argv) = script_call(&mut rng, script, |key| {
            holder(&model.states[0], key, now_ms())
        });
        let t0 = now_ms();
        let reply = real_eval(&mut conn, script.body, &keys, &argv).await;
        let t1 = now_ms();
        let step_model = |ks: &mut Keyspace, t| runner.eval(script.body, &keys, &argv, ks, t);
        let what = format!(
            "step {step}: {} KEYS {} ARGV {}",
            script.name,
            text(&keys),
            text(&argv)
        );
        model.step(&what, (t0, t1), &reply, agree_script, step_model);
        model.sync(&mut conn).await;
        let shape = match &reply {
            Reply::Array(items) => items
                .first()
                .map_or("[]".into(), |first| format!("[{}, ..]", show(first))),
            other => show(other).chars().take(40).collect(),
        };
        *outcomes
            .entry(format!("{} -> {shape}", script.name))
            .or_default() += 1;
    }
    println!("{STEPS} steps agreed; script outcomes:");
    for (outcome, count) in &outcomes {
        println!("  {count:5}  {outcome}");
    }
}

// ---------------------------------------------------------------------------------------
// The Lua runner's conversion rules: expected replies (no server), then the same cases
// against the server.
// ---------------------------------------------------------------------------------------

fn err(prefix: &str) -> Reply {
    Reply::Error(prefix.into())
}
fn bulk(text: &str) -> Reply {
    Reply::Bulk(text.as_bytes().to_vec())
}
fn status(text: &str) -> Reply {
    Reply::Status(text.into())
}
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// (script, expected reply); an expected error matches a reply that starts with it.
/// KEYS = {"str", "h"}, ARGV = {"7", "x"}; "str" holds "v", "h" holds {f = 1}. The cases
/// run in order on one keyspace.
fn conversion_cases() -> Vec<(&'static str, Reply)> {
    use Reply::{Array, Int, Nil};
    vec![
        ("return {ok='fine'}", status("fine")),
        ("return redis.status_reply('fine')", status("fine")),
        ("return {err='BAD thing'}", err("BAD thing")),
        ("return redis.error_reply('My Error')", err("My Error")),
        ("return redis.error_reply('oops')", err("ERR oops")),
        ("return redis.error_reply('-CODE x')", err("CODE x")),
        (
            "return redis.status_reply(1)",
            err("ERR wrong number or type of arguments"),
        ),
        ("return redis.pcall('HGET', KEYS[1], 'f')", err(WRONGTYPE)),
        (
            "local r = redis.pcall('INCR', KEYS[2]) return {type(r), r.err}",
            Array(vec![bulk("table"), bulk(WRONGTYPE)]),
        ),
        ("return redis.call('HGET', KEYS[1], 'f')", err("WRONGTYPE")),
        (
            "redis.call('SET', 'after', '1') redis.call('HGET', KEYS[1], 'f') return 1",
            err("WRONGTYPE"),
        ),
        ("return redis.call('GET', 'after')", bulk("1")),
        // Redis 7.0's pcall hands the script the error table's message, not the table.
        (
            "local ok, e = pcall(redis.call, 'INCR', KEYS[2]) return {type(e), e}",
            Array(vec![bulk("string"), bulk(WRONGTYPE)]),
        ),
        (
            "local ok, e = pcall(function() error({err='X y'}) end) return {ok, e}",
            Array(vec![Nil, bulk("X y")]),
        ),
        (
            "local ok, e = pcall(error, 'plain', 0) return e",
            bulk("plain"),
        ),
        (
            "local ok, a, b = pcall(function() return 1, 2 end) return {ok, a, b}",
            Array(vec![Int(1), Int(1), Int(2)]),
        ),
        (
            "local ok, e = pcall(redis.call, 'INCR', KEYS[2]) error(e)",
            err("ERR"),
        ),
        ("return {1, 2, nil, 4}", Array(vec![Int(1), Int(2)])),
        (
            "return {1, 'two', {3, {ok='four'}, {err='E five'}}, false, 6}",
            Array(vec![
                Int(1),
                bulk("two"),
                Array(vec![Int(3), status("four"), err("E five")]),
                Nil,
                Int(6),
            ]),
        ),
        ("return {err=5}", Array(vec![])),
        ("return 3.99", Int(3)),
        ("return -3.99", Int(-3)),
        ("return 2^53", Int(1 << 53)),
        // (long long) of NaN or of an out-of-range double is i64::MIN on x86-64.
        ("return tonumber('nan')", Int(i64::MIN)),
        ("return 1e19", Int(i64::MIN)),
        ("return -1e19", Int(i64::MIN)),
        ("return redis.error_reply('-oops')", err("ERR oops")),
        ("return true", Int(1)),
        ("return false", Nil),
        ("return nil", Nil),
        ("return", Nil),
        ("return 'x', 'y'", bulk("x")),
        ("return type(redis.call('GET', 'missing'))", bulk("boolean")),
        ("return redis.call('GET', 'missing')", Nil),
        ("return redis.call('SET', 'k', 'v').ok", bulk("OK")),
        ("return redis.call('SET', 'k', 'v')", status("OK")),
        ("return redis.call('TYPE', KEYS[2])", status("hash")),
        ("return redis.call('HGETALL', 'missing')", Array(vec![])),
        ("return redis.call('HGET', KEYS[2], 'f') + 1", Int(2)),
        ("return redis.call('PTTL', KEYS[1])", Int(-1)),
        (
            "redis.call('HSET', KEYS[2], 'a', 0.1, 'b', 1e15, 'c', 2^53, 'd', -1.5, 'e', 1/3, 'g', 1e17) \
             return redis.call('HMGET', KEYS[2], 'a', 'b', 'c', 'd', 'e', 'g')",
            Array(
                [
                    "0.10000000000000001",
                    "1000000000000000",
                    "9007199254740992",
                    "-1.5",
                    "0.33333333333333331",
                    "1e+17",
                ]
                .map(bulk)
                .to_vec(),
            ),
        ),
        (
            "return tostring(1e15) .. ' ' .. string.format('%d', 3)",
            bulk("1e+15 3"),
        ),
        (
            "return {KEYS[1], ARGV[2], #KEYS, #ARGV, tonumber(ARGV[1]) * 2}",
            Array(vec![bulk("str"), bulk("x"), Int(2), Int(2), Int(14)]),
        ),
        ("return redis.call('PUBLISH', 'chan', 'msg')", Int(0)),
        ("redis.log(redis.LOG_WARNING, 'hello') return 1", Int(1)),
        ("return redis.pcall('SET', 'x', true)", err("ERR")),
        ("return redis.pcall()", err("ERR")),
        ("return redis.call('NOPE')", err("ERR")),
        ("return redis.pcall('GET')", err("ERR")),
        ("leaked = 1 return 1", err("ERR")),
        ("return leaked", err("ERR")),
        ("return nosuch()", err("ERR")),
        ("local t = nil return t.x", err("ERR")),
        ("error('boom')", err("ERR")),
        ("error({err='CUSTOM thing'})", err("CUSTOM thing")),
        ("return #redis.call('TIME')", Int(2)),
        ("return {", err("ERR")),
    ]
}

const CASE_KEYS: &[&str] = &["str", "h"];
const CASE_ARGV: &[&str] = &["7", "x"];
const CASE_SETUP: &[&[&str]] = &[&["SET", "str", "v"], &["HSET", "h", "f", "1"]];

#[test]
fn lua_runner_converts_like_redis() {
    let runner = ScriptRunner::new();
    let mut ks = Keyspace::default();
    for setup in CASE_SETUP {
        ks.command(0, &args(setup));
    }
    let (keys, argv) = (args(CASE_KEYS), args(CASE_ARGV));
    for (body, expected) in conversion_cases() {
        let got = runner.eval(body, &keys, &argv, &mut ks, 1000);
        let ok = match (&got, &expected) {
            (Reply::Error(g), Reply::Error(e)) => g.starts_with(e.as_str()),
            _ => got == expected,
        };
        assert!(ok, "{body}\n  got      {got:?}\n  expected {expected:?}");
    }
    assert_eq!(ks.published, vec![(b"chan".to_vec(), b"msg".to_vec())]);
    // Writes before a failing redis.call stay (no rollback); globals do not leak.
    assert_eq!(ks.get_str(b"after", 1000), Some(&b"1"[..]));
    assert_eq!(
        runner.eval(
            "return type(rawget(getfenv(1), 'leaked'))",
            &[],
            &[],
            &mut ks,
            1000
        ),
        bulk("nil")
    );
}

#[test]
fn lua_runner_reuses_state_and_keeps_time_frozen() {
    let runner = ScriptRunner::new();
    let mut ks = Keyspace::default();
    let body = "redis.call('SET', KEYS[1], '1', 'PX', ARGV[1]) return redis.call('PTTL', KEYS[1])";
    let started = std::time::Instant::now();
    for i in 0..20_000u64 {
        let reply = runner.eval(body, &args(&["k"]), &args(&["100"]), &mut ks, i);
        assert_eq!(reply, Reply::Int(100));
    }
    // Expiry at the boundary: alive (PTTL 0) at its expire time, gone 1 ms later.
    assert_eq!(ks.pexpire_at(b"k", 19_999), Some(Some(20_099)));
    assert_eq!(ks.command(20_099, &args(&["PTTL", "k"])), Reply::Int(0));
    assert_eq!(ks.command(20_100, &args(&["PTTL", "k"])), Reply::Int(-2));
    println!("20000 evals in {:?}", started.elapsed());
}

#[tokio::test]
async fn lua_conversions_match_real_redis() {
    let server = common::RedisServer::start();
    let mut conn = server.conn().await;
    let runner = ScriptRunner::new();
    let mut model = Model::new(Vec::new());
    for setup in CASE_SETUP {
        let parts = args(setup);
        real(&mut conn, &parts).await;
        model.states[0].command(now_ms(), &parts);
    }
    let (keys, argv) = (args(CASE_KEYS), args(CASE_ARGV));
    for (body, _) in conversion_cases() {
        let t0 = now_ms();
        let reply = real_eval(&mut conn, body, &keys, &argv).await;
        let t1 = now_ms();
        let step = |ks: &mut Keyspace, t| runner.eval(body, &keys, &argv, ks, t);
        model.step(body, (t0, t1), &reply, same, step);
    }
}
