//! Differential tests: the in-memory keyspace model (`tests/protocol/keyspace.rs`) and the
//! embedded-Lua script runner (`tests/protocol/lua.rs`) against a real redis-server.
//!
//! Random command sequences, and random EVALs of every script in lua/ (with the keys laid
//! out as the library lays them out, the sharded publish flag now and then, and, in
//! `scripts_match_real_redis_when_the_acl_refuses`, as users whose ACL refuses one
//! command), run on both the server and the model, and every reply must agree. The model
//! runs on the server's clock (Unix time in ms). A command in flight from `t0` to `t1` ran
//! on the server at some ms in `t0..=t1`, so the model keeps every state it could be in
//! (see `Model`), and after each step reads every key's type, absolute expire time and
//! content from the server in one atomic snapshot to drop the states that disagree. Set
//! `KEYSPACE_DIFF_SEED` to replay a sequence (the timing, and so the expiries, still vary
//! from run to run).
mod common;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keyspace::{Keyspace, Reply};
use lua::ScriptRunner;
use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis_locks_protocol::ScriptId;
use redis_locks_protocol::fair::FairKeys;
use redis_locks_protocol::latch::{LatchKeys, count_down_call};
use redis_locks_protocol::redisson::RedissonKeys;
use redis_locks_protocol::rwlock::RwKeys;

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

/// Where a script's reply carries numbers read from the clock (ms): those agree within the
/// step's slack (`slack_ms`), since inside a script Redis 7.0 reads the clock afresh for
/// each PTTL or PEXPIRE while the model runs the whole script at one instant.
#[derive(Clone, Copy, Debug)]
enum Times {
    /// No clock readings (fencing tokens, which are times in µs, agree by `micros_close`).
    No,
    /// The second item, when the first is one of these (`{0, wait_ms}`, `{1, deadline}`).
    SecondAfter(&'static [i64]),
    /// These items (0-based).
    At(&'static [usize]),
    /// inspect's `{type, pttl, fence, field, value...}`: the TTL second (within
    /// `TTL_TOLERANCE_MS`), the fields in HGETALL order.
    Inspect,
    /// redisson_state's `{1, pttl, field, value...}`: the TTL second (a clock reading), the
    /// fields in HGETALL order.
    StatePairs,
}

/// How far (ms) a clock reading of the model (an expire time, a TTL or deadline in a reply)
/// may be from the server's after a step that ran from `t0` to `t1`: every clock reading
/// inside a script falls in `t0..=t1`, and the model reads the clock once, so the state
/// with the right instant is within `t1 - t0` of the server, and the usual 2 ms when the
/// server ran the script in one go (under load it may stall in the middle).
fn slack_ms((t0, t1): (u64, u64)) -> i64 {
    EXPIRE_TOLERANCE_MS.max(t1 as i64 - t0 as i64)
}

fn agree_script(times: Times, slack: i64, model: &Reply, real: &Reply) -> bool {
    let (Reply::Array(m), Reply::Array(r)) = (model, real) else {
        return same(model, real);
    };
    if m.len() != r.len() {
        return false;
    }
    let (m, r) = match times {
        Times::Inspect if m.len() >= 3 => (
            [&m[..3], &sorted_pairs(&m[3..])[..]].concat(),
            [&r[..3], &sorted_pairs(&r[3..])[..]].concat(),
        ),
        Times::StatePairs if m.len() >= 2 => (
            [&m[..2], &sorted_pairs(&m[2..])[..]].concat(),
            [&r[..2], &sorted_pairs(&r[2..])[..]].concat(),
        ),
        _ => (m.clone(), r.clone()),
    };
    let is_time = |i: usize| match times {
        Times::No | Times::Inspect => false,
        Times::SecondAfter(firsts) => {
            i == 1 && matches!(m[0], Reply::Int(first) if firsts.contains(&first))
        }
        Times::StatePairs => i == 1 && m[0] == Reply::Int(1),
        Times::At(items) => items.contains(&i),
    };
    m.iter()
        .zip(&r)
        .enumerate()
        .all(|(i, (m, r))| match (m, r) {
            _ if matches!(times, Times::Inspect) && i == 1 => ttl_close(m, r),
            (Reply::Int(m), Reply::Int(r)) if is_time(i) => (m - r).abs() <= slack,
            _ => same(m, r) || micros_close(m, r),
        })
}

/// Most model states left after a sync (which copies the server's expire times into them).
const MAX_STATES: usize = 64;
/// How far (ms) a model expire time may be from the server's at least: inside a script
/// Redis 7.0 reads the clock afresh for PEXPIRE, while the model runs the whole script at
/// one instant (see `slack_ms`).
const EXPIRE_TOLERANCE_MS: i64 = 2;

/// The model, kept in step with the server. A command in flight from `t0` to `t1` ran on
/// the server at some ms in `t0..=t1`, so every state the model could be in is kept: each
/// step runs on each state at each of those ms and keeps the results whose reply agrees.
/// `sync` then reads every key from the server (`Snapshot`), drops the states that disagree
/// and copies the server's exact expire times and clock readings into the rest.
struct Model {
    states: Vec<Keyspace>,
    /// Every key the test may touch (what `sync` asks about).
    universe: Vec<String>,
    /// The last few steps, for failure reports.
    history: VecDeque<String>,
    /// The server's keys after the last step (the last `sync`).
    last: Option<Snapshot>,
    /// The last step's `slack_ms`.
    slack: i64,
}

impl Model {
    fn new(universe: Vec<String>) -> Self {
        Model {
            states: vec![Keyspace::default()],
            universe,
            history: Default::default(),
            last: None,
            slack: EXPIRE_TOLERANCE_MS,
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
        self.states = next;
        self.slack = slack_ms((t0, t1));
        self.remember(format!("{t0}..={t1}: {what} -> {}", show(real)));
    }

    async fn sync(&mut self, conn: &mut MultiplexedConnection) {
        let snapshot = Snapshot::take(conn, &self.universe).await;
        let mut kept: Vec<Keyspace> = Vec::new();
        for state in &self.states {
            if let Some(state) = reconcile(state.clone(), &snapshot, self.slack)
                && !kept.contains(&state)
            {
                kept.push(state);
            }
        }
        if kept.is_empty() {
            self.fail(
                &format!(
                    "server state at {} is none of the model's:{}",
                    snapshot.at_ms,
                    snapshot.show()
                ),
                snapshot.at_ms,
            );
        }
        // Checked after the sync, not after the step: a step keeps one state per ms of
        // its round trip (a stalled machine makes that hundreds), which the sync collapses.
        assert!(
            kept.len() <= MAX_STATES,
            "{} possible model states after a sync",
            kept.len()
        );
        self.states = kept;
        self.last = Some(snapshot);
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

/// Reads the keys in one atomic script: the server's time (ms) first, then per key its
/// type, absolute expire time (PEXPIRETIME) and content.
const SNAPSHOT: &str = r#"
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)}
for i = 1, #KEYS do
  local key, value = KEYS[i], {}
  local kind = redis.call('TYPE', key).ok
  if kind == 'string' then
    value = {redis.call('GET', key)}
  elseif kind == 'hash' then
    value = redis.call('HGETALL', key)
  elseif kind == 'zset' then
    value = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  end
  out[i + 1] = {kind, redis.call('PEXPIRETIME', key), value}
end
return out
"#;

/// One key as the server has it.
#[derive(Clone, Debug, PartialEq)]
struct KeyView {
    key: String,
    /// TYPE: "none", "string", "hash" or "zset".
    kind: String,
    /// PEXPIRETIME: -2 no key, -1 no expiry.
    at: i64,
    /// The string; a hash's fields and values; a sorted set's members and scores (as
    /// ZRANGE WITHSCORES replies them).
    value: Vec<Vec<u8>>,
}

impl KeyView {
    fn show(&self) -> String {
        let value: Vec<_> = self
            .value
            .iter()
            .map(|v| String::from_utf8_lossy(v))
            .collect();
        format!("{} {} {value:?}", self.kind, self.at)
    }

    /// A hash's or a sorted set's pairs.
    fn pairs(&self) -> BTreeMap<&[u8], &[u8]> {
        self.value
            .chunks(2)
            .map(|pair| (&pair[0][..], &pair[1][..]))
            .collect()
    }
}

/// The server's keys at one instant.
#[derive(Clone, Debug)]
struct Snapshot {
    /// The client's clock when it asked (ms): the server read the keys later.
    asked_ms: u64,
    /// The server's clock when it read them (TIME, ms).
    at_ms: u64,
    keys: Vec<KeyView>,
}

impl Snapshot {
    async fn take(conn: &mut MultiplexedConnection, universe: &[String]) -> Snapshot {
        let keys: Vec<Vec<u8>> = universe.iter().map(|k| k.as_bytes().to_vec()).collect();
        let asked_ms = now_ms();
        let reply = real_eval(conn, SNAPSHOT, &keys, &[]).await;
        let bad = || panic!("snapshot: {}", show(&reply));
        let Reply::Array(items) = &reply else { bad() };
        let Some(Reply::Int(at_ms)) = items.first() else {
            bad()
        };
        let keys = universe
            .iter()
            .zip(&items[1..])
            .map(|(key, item)| match item {
                Reply::Array(parts) => match parts.as_slice() {
                    [Reply::Bulk(kind), Reply::Int(at), Reply::Array(value)] => KeyView {
                        key: key.clone(),
                        kind: String::from_utf8_lossy(kind).into_owned(),
                        at: *at,
                        value: value
                            .iter()
                            .map(|v| match v {
                                Reply::Bulk(bytes) => bytes.clone(),
                                _ => bad(),
                            })
                            .collect(),
                    },
                    _ => bad(),
                },
                _ => bad(),
            })
            .collect();
        Snapshot {
            asked_ms,
            at_ms: *at_ms as u64,
            keys,
        }
    }

    fn show(&self) -> String {
        self.keys
            .iter()
            .filter(|view| view.kind != "none")
            .map(|view| format!("\n  {:?}: {}", view.key, view.show()))
            .collect()
    }
}

/// Whether `model` is `real` but for the last digits of a clock reading in µs (a fair
/// queue's arrival, a fencing token): the model's clock has ms resolution, so its reading
/// is the server's truncated to the ms (or the same: a token from the counter).
fn micros_behind(model: f64, real: f64) -> bool {
    model >= 1e15 && (0.0..1000.0).contains(&(real - model))
}

fn micros_behind_bytes(model: &[u8], real: &[u8]) -> bool {
    match (keyspace::parse_i64(model), keyspace::parse_i64(real)) {
        (Some(m), Some(r)) => micros_behind(m as f64, r as f64),
        _ => false,
    }
}

/// `state` if it matches the server's `snapshot` (every key's type, expire time within
/// `slack` ms, content), with the server's exact expire times and µs clock readings
/// copied in.
fn reconcile(mut state: Keyspace, snapshot: &Snapshot, slack: i64) -> Option<Keyspace> {
    let at = snapshot.at_ms;
    // The server read the keys after they were asked for; the model's expire times may be
    // `slack` early.
    let floor = snapshot.asked_ms.saturating_sub(slack as u64);
    state.expire(floor);
    for view in &snapshot.keys {
        let key = view.key.as_str();
        match (view.at, state.pexpire_at(key.as_bytes(), floor)) {
            (-2, None) => continue,
            // Gone on the server; the model lets it expire by then too.
            (-2, Some(Some(model_at))) if model_at as i64 <= at as i64 + slack => {
                state.command(0, &args(&["DEL", key]));
                continue;
            }
            (-1, Some(None)) => {}
            (server_at, Some(Some(model_at)))
                if server_at >= 0 && (model_at as i64 - server_at).abs() <= slack =>
            {
                state.command(0, &args(&["PEXPIREAT", key, &server_at.to_string()]));
            }
            _ => return None,
        }
        adopt_value(&mut state, view, floor)?;
    }
    Some(state)
}

/// `Some` when the model's value at `view.key` is the server's (see `micros_behind`), which
/// is then copied in.
fn adopt_value(state: &mut Keyspace, view: &KeyView, now: u64) -> Option<()> {
    let key = view.key.as_bytes();
    let command = |parts: &[&[u8]]| -> Vec<Vec<u8>> { parts.iter().map(|p| p.to_vec()).collect() };
    let mut fixes = Vec::new();
    match view.kind.as_str() {
        "string" => {
            let (model, real) = (state.get_str(key, now)?, &view.value[0]);
            if model != &real[..] {
                micros_behind_bytes(model, real).then_some(())?;
                fixes.push(command(&[b"SET", key, real, b"KEEPTTL"]));
            }
        }
        "hash" => {
            let (model, real) = (state.hash(key, now)?, view.pairs());
            (model.len() == real.len()).then_some(())?;
            for (field, value) in real {
                let mine = model.get(field)?;
                if mine != value {
                    micros_behind_bytes(mine, value).then_some(())?;
                    fixes.push(command(&[b"HSET", key, field, value]));
                }
            }
        }
        "zset" => {
            let (model, real) = (state.zset(key, now)?, view.pairs());
            (model.len() == real.len()).then_some(())?;
            for (member, score) in real {
                let mine = model.get(member)?.0;
                if keyspace::score_text(mine) != score {
                    let real_score = keyspace::parse_score(score)?;
                    micros_behind(mine, real_score).then_some(())?;
                    fixes.push(command(&[b"ZADD", key, score, member]));
                }
            }
        }
        _ => return None,
    }
    for fix in fixes {
        state.command(0, &fix);
    }
    Some(())
}

/// What a call wrote on the server, judged from the snapshots before and after it: `None`
/// when nothing. A key that expired in between was not written; with `drops`, neither were
/// sorted-set members whose score (a deadline) had passed by `t1`, the end of the call.
fn written(before: &Snapshot, after: &Snapshot, t1: u64, drops: bool) -> Option<String> {
    for (b, a) in before.keys.iter().zip(&after.keys) {
        if b == a || (a.kind == "none" && b.at >= 0 && b.at as u64 <= after.at_ms) {
            continue;
        }
        if drops && b.kind == "zset" && (a.kind == "none" || (a.kind == "zset" && a.at == b.at)) {
            let (kept, was) = (a.pairs(), b.pairs());
            let expired =
                |score: &[u8]| keyspace::parse_score(score).is_some_and(|s| s <= t1 as f64);
            if kept.iter().all(|(m, s)| was.get(m) == Some(s))
                && was.iter().all(|(m, s)| kept.contains_key(m) || expired(s))
            {
                continue;
            }
        }
        return Some(format!("{:?}: {} -> {}", b.key, b.show(), a.show()));
    }
    None
}

/// `reconcile` without a server: content must match, expire times within the tolerance,
/// and only µs clock readings behind the server's by less than a ms are adopted.
#[test]
fn reconcile_compares_content_and_adopts_only_clock_digits() {
    let view = |key: &str, kind: &str, at: i64, value: &[&str]| KeyView {
        key: key.into(),
        kind: kind.into(),
        at,
        value: value.iter().map(|v| v.as_bytes().to_vec()).collect(),
    };
    let snapshot = |keys: Vec<KeyView>| Snapshot {
        asked_ms: 999_999,
        at_ms: 1_000_000,
        keys,
    };
    let mut ks = Keyspace::default();
    ks.command(
        999_000,
        &args(&["HSET", "h", "f", "1", "tok", "1795636974628000"]),
    );
    ks.command(999_000, &args(&["PEXPIRE", "h", "5000"]));
    ks.command(999_000, &args(&["ZADD", "z", "1795636974628000", "w"]));
    let (h_at, server) = (1_004_000, "1795636974628913");
    let fine = snapshot(vec![
        view("h", "hash", h_at + 2, &["f", "1", "tok", server]),
        view("z", "zset", -1, &["w", server]),
    ]);
    let slack = EXPIRE_TOLERANCE_MS;
    let adopted = reconcile(ks.clone(), &fine, slack).expect("the server's clock digits");
    assert_eq!(
        adopted.pexpire_at(b"h", 1_000_000),
        Some(Some(h_at as u64 + 2))
    );
    let token = adopted
        .hash(b"h", 1_000_000)
        .unwrap()
        .get(&b"tok"[..])
        .cloned();
    assert_eq!(token, Some(server.as_bytes().to_vec()));
    let score = adopted
        .zset(b"z", 1_000_000)
        .unwrap()
        .get(&b"w"[..])
        .unwrap()
        .0;
    assert_eq!(score, 1795636974628913.0);
    let differs = [
        view("h", "hash", h_at, &["f", "2", "tok", server]),
        view("h", "hash", h_at, &["f", "1"]),
        view("h", "hash", h_at, &["f", "1", "tok", "1795636974627999"]),
        view("h", "hash", h_at, &["f", "1", "tok", "1795636974629000"]),
        view("h", "hash", h_at + 3, &["f", "1", "tok", server]),
        view("h", "hash", -1, &["f", "1", "tok", server]),
        view("h", "zset", h_at, &["f", "1"]),
        view("z", "zset", -1, &["w", "2"]),
        view("z", "zset", -1, &["v", "1795636974628000"]),
        view("z", "none", -2, &[]),
    ];
    for view in differs {
        let what = view.show();
        assert!(
            reconcile(ks.clone(), &snapshot(vec![view]), slack).is_none(),
            "{what}"
        );
    }
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

/// Command or call arguments, readable (control characters such as the hold ids' "\1"
/// escaped).
fn text(parts: &[Vec<u8>]) -> String {
    parts
        .iter()
        .map(|p| String::from_utf8_lossy(p).escape_debug().to_string())
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
// The real scripts. When a script in lua/ gains, loses or reorders KEYS or ARGV, update its
// generator below (each one lists the script's KEYS and ARGV as its header does).
// ---------------------------------------------------------------------------------------

const PREFIX: &str = "lk";
/// The primitives' names: every key of one call shares its name's hash tag (one slot),
/// except renew's, which may span slots (`allow-cross-slot-keys`).
const NAMES: &[&str] = &["a", "b"];
const OWNERS: &[&str] = &["o1", "o2"];
/// Request ids `<client-tag>.<seq>`: a small set, so that retries and re-entries happen.
const REQUESTS: &[&str] = &["c1.1", "c1.2", "c2.1", "c2.2"];
/// Semaphore permit ids.
const PERMIT_IDS: &[&str] = &["p1", "p2", "p3", "p4"];

/// The keys and channels of every primitive called `name`, laid out as the library lays
/// them out (`src/keys.rs`, `src/latch.rs`, `src/semaphore.rs`, `RwKeys::new`,
/// `FairKeys::new`), with prefix `PREFIX` and database 0.
struct Names {
    lock: String,
    fence: String,
    channel: String,
    latch: String,
    latch_channel: String,
    sem: String,
    permits: String,
    sem_channel: String,
    rw: RwKeys,
    fair: FairKeys,
    redisson: RedissonKeys,
    redisson_latch: LatchKeys,
}

impl Names {
    fn of(name: &str) -> Names {
        let base = format!("{PREFIX}:{{{name}}}");
        Names {
            fence: format!("{base}:fence"),
            channel: format!("{base}:db0:released"),
            latch: format!("{base}:latch"),
            latch_channel: format!("{base}:latch:db0:open"),
            sem: format!("{base}:semaphore"),
            permits: format!("{base}:permits"),
            sem_channel: format!("{base}:semaphore:db0:released"),
            rw: RwKeys::new(PREFIX, 0, false, name),
            fair: FairKeys::new(PREFIX, 0, false, name),
            redisson: RedissonKeys::new(PREFIX, false, name),
            // Not the lock's name: in Redisson's layout both would be the bare name, and a
            // latch's string there sends the lock scripts down their wrong-type path.
            redisson_latch: LatchKeys::redisson(PREFIX, false, &format!("{name}.latch"), 500),
            lock: base,
        }
    }

    /// Every key (what the snapshots read).
    fn keys(&self) -> Vec<String> {
        let (rw, fair) = (&self.rw, &self.fair);
        let mut keys = vec![
            self.lock.clone(),
            self.fence.clone(),
            self.latch.clone(),
            self.sem.clone(),
            self.permits.clone(),
        ];
        for key in [&rw.write, &rw.read, &rw.reservation, &rw.fence] {
            keys.push(key.to_string());
        }
        for key in [&fair.holds, &fair.queue, &fair.alive, &fair.fence] {
            keys.push(key.to_string());
        }
        keys.push(self.redisson.hash.to_string());
        keys.push(self.redisson_latch.key.to_string());
        for request in REQUESTS {
            keys.push(self.redisson_record(request));
            keys.push(self.redisson_count_down_record(request));
        }
        for owner in OWNERS {
            for level in 1..=4 {
                keys.push(self.redisson_read_timeout(owner, level));
            }
        }
        keys
    }

    /// The timeout key of `owner`'s read at `level` of the Redisson-layout read-write lock
    /// (Redisson's `suffixName(name, owner) + ":rwlock_timeout:" + level`).
    fn redisson_read_timeout(&self, owner: &str, level: u32) -> String {
        format!("{{{}}}:{owner}:rwlock_timeout:{level}", self.redisson.hash)
    }

    /// The record of the Redisson-layout latch's count-down `request` (the count-down
    /// call's third key).
    fn redisson_count_down_record(&self, request: &str) -> String {
        count_down_call(&self.redisson_latch, request).keys[2].to_string()
    }

    /// The record of the Redisson-layout acquire `request`.
    fn redisson_record(&self, request: &str) -> String {
        format!("{}{request}", self.redisson.record_prefix)
    }
}

/// Every key the script calls and the disturbances can name.
fn script_keys() -> Vec<String> {
    NAMES
        .iter()
        .flat_map(|name| Names::of(name).keys())
        .collect()
}

/// A script call's KEYS and ARGV.
type Call = (Vec<String>, Vec<String>);

/// What a generator sees: the randomness, the model's state (the first of its possible
/// states, at `now`), so that most calls name a holder, permit or waiter that exists, and
/// the keys of the primitives called `name`.
struct Gen<'a> {
    rng: &'a mut Rng,
    ks: &'a Keyspace,
    now: u64,
    k: Names,
    /// The share (%) of publishing calls that ask for SPUBLISH.
    sharded: u64,
}

impl Gen<'_> {
    fn chance(&mut self, percent: u64) -> bool {
        self.rng.chance(percent)
    }
    fn range(&mut self, lo: u64, hi: u64) -> String {
        self.rng.range(lo, hi).to_string()
    }
    fn pick(&mut self, items: &[&str]) -> String {
        self.rng.pick(items).to_string()
    }
    /// One of `items`, `percent` of the time when there are any.
    fn maybe(&mut self, items: &[String], percent: u64) -> Option<String> {
        (!items.is_empty() && self.chance(percent)).then(|| self.rng.pick(items).clone())
    }
    fn lease(&mut self) -> String {
        self.range(50, 500)
    }
    /// A publish flag: '1' (SPUBLISH) for a share of the calls.
    fn publish_how(&mut self) -> String {
        let sharded = self.sharded;
        if self.chance(sharded) { "1" } else { "0" }.into()
    }
    /// A request id, now and then a malformed one.
    fn request(&mut self) -> String {
        if self.chance(3) {
            "malformed".into()
        } else {
            self.pick(REQUESTS)
        }
    }
    /// A read-write or fair lock hold id `<owner>\1<request id>` for `owner`.
    fn hold_id(&mut self, owner: &str) -> String {
        format!("{owner}\u{1}{}", self.pick(REQUESTS))
    }
    /// Who holds the lock `key`, in either form: (an owner, the hold id).
    fn holder(&self, key: &str) -> Option<(String, String)> {
        holder(self.ks, key, self.now)
    }
    /// The members of the sorted set `key`, in Redis's order.
    fn members(&self, key: &str) -> Vec<String> {
        let zset = self.ks.zset(key.as_bytes(), self.now);
        let members = zset.map(|z| keyspace::zset_order(z)).unwrap_or_default();
        members.into_iter().map(|(m, _)| lossy(m)).collect()
    }
    /// The acquisitions in the sorted set `key`: its members without their ':<k>'.
    fn ids(&self, key: &str) -> Vec<String> {
        let mut ids: Vec<String> = Vec::new();
        for member in self.members(key) {
            let id = member.rsplit_once(':').map_or(&member[..], |(id, _)| id);
            if !ids.iter().any(|known| known == id) {
                ids.push(id.to_owned());
            }
        }
        ids
    }
    /// How many members of `key` belong to acquisition `id`.
    fn count(&self, key: &str, id: &str) -> usize {
        let members = self.members(key);
        let mine = |m: &&String| m.rsplit_once(':').is_some_and(|(i, _)| i == id);
        members.iter().filter(mine).count()
    }
    fn field(&self, key: &str, field: &str) -> Option<String> {
        let hash = self.ks.hash(key.as_bytes(), self.now)?;
        hash.get(field.as_bytes()).map(|v| lossy(v))
    }
    /// The fields of the hash `key` (none if it is not a hash).
    fn hash_fields(&self, key: &str) -> Vec<String> {
        let Some(hash) = self.ks.hash(key.as_bytes(), self.now) else {
            return Vec::new();
        };
        let mut fields: Vec<String> = hash.keys().map(|f| lossy(f)).collect();
        fields.sort();
        fields
    }
    fn string(&self, key: &str) -> Option<String> {
        self.ks.get_str(key.as_bytes(), self.now).map(lossy)
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The owner in a hold id `<owner>\1<request id>`.
fn owner_of(hold: &str) -> String {
    hold.split('\u{1}').next().unwrap_or_default().to_owned()
}

/// Who holds the lock `key` in `ks`: (an owner field, the hold id field "\1h") of the hash,
/// or of the hash that a first hold's string stands for (`Keyspace::lock_hash`).
fn holder(ks: &Keyspace, key: &str, now: u64) -> Option<(String, String)> {
    let fields = ks.lock_hash(key.as_bytes(), now)?;
    let hold = lossy(fields.get(&b"\x01h"[..])?);
    let owner = fields.keys().find(|field| !field.starts_with(b"\x01"))?;
    Some((lossy(owner), hold))
}

// --- The lock: KEYS and ARGV as in each script's header. --------------------------------

/// KEYS lock, [fence: declared only by a fenced acquire, as the library does, and now and
/// then anyway]; ARGV owner, lease, request, flags.
fn acquire(g: &mut Gen) -> Call {
    let owner = match g.holder(&g.k.lock) {
        Some((owner, _)) if g.chance(60) => owner,
        _ => g.pick(OWNERS),
    };
    let flags = g.pick(&["0", "1", "2", "3"]);
    let mut keys = vec![g.k.lock.clone()];
    if flags == "1" || flags == "3" || g.chance(10) {
        keys.push(g.k.fence.clone());
    }
    let (lease, request) = (g.lease(), g.request());
    (keys, vec![owner, lease, request, flags])
}

/// KEYS lock; ARGV value `<mark><request id>\1<owner>` (the mark "\2" when other waiters
/// of the client wait, flag '2' of acquire), lease. The library sends the bare command the
/// script wraps (`SET NX PX`); here both sides run the script.
fn take(g: &mut Gen) -> Call {
    let owner = match g.holder(&g.k.lock) {
        Some((owner, _)) if g.chance(30) => owner,
        _ => g.pick(OWNERS),
    };
    let mark = if g.chance(25) { "\u{2}" } else { "\u{1}" };
    let value = format!("{mark}{}\u{1}{owner}", g.request());
    (vec![g.k.lock.clone()], vec![value, g.lease()])
}

/// KEYS lock; ARGV owner, hold, client tag, seq, channel, re-arm ms, expected, publish how.
fn release(g: &mut Gen) -> Call {
    let holder = g.holder(&g.k.lock);
    let owner = match &holder {
        Some((owner, _)) if g.chance(60) => owner.clone(),
        _ => g.pick(OWNERS),
    };
    let hold = match holder {
        Some((_, hold)) if g.chance(70) => hold,
        _ => g.pick(REQUESTS),
    };
    let request = g.pick(REQUESTS);
    let (tag, seq) = request.split_once('.').expect("a request id");
    let rearm = if g.chance(50) {
        "0".into()
    } else {
        g.range(20, 400)
    };
    let argv = vec![
        owner,
        hold,
        tag.into(),
        seq.into(),
        g.k.channel.clone(),
        rearm,
        g.range(0, 3),
        g.publish_how(),
    ];
    (vec![g.k.lock.clone()], argv)
}

/// KEYS lock; ARGV the unmarked value "\1" <hold> "\1" <owner>, channel, publish how.
fn release_first(g: &mut Gen) -> Call {
    let holder = g.holder(&g.k.lock);
    let owner = match &holder {
        Some((owner, _)) if g.chance(60) => owner.clone(),
        _ => g.pick(OWNERS),
    };
    let hold = match holder {
        Some((_, hold)) if g.chance(70) => hold,
        _ => g.pick(REQUESTS),
    };
    let argv = vec![
        format!("\u{1}{hold}\u{1}{owner}"),
        g.k.channel.clone(),
        g.publish_how(),
    ];
    (vec![g.k.lock.clone()], argv)
}

/// KEYS locks (any names: the script may span slots), or none and the locks after the hold
/// ids in ARGV; ARGV lease, m renewed, a hold id per lock.
fn renew(g: &mut Gen) -> Call {
    let n = g.rng.range(1, 3);
    let mut locks = Vec::new();
    for _ in 0..n {
        let name = *g.rng.pick(NAMES);
        locks.push(Names::of(name).lock);
    }
    let mut argv = vec![g.lease(), g.range(0, n)];
    for lock in &locks {
        argv.push(match g.holder(lock) {
            Some((_, hold)) if g.chance(70) => hold,
            _ => g.pick(REQUESTS),
        });
    }
    if g.chance(25) {
        argv.extend(locks);
        return (Vec::new(), argv);
    }
    (locks, argv)
}

/// KEYS lock; ARGV owner, request (often the hold id: a lost fresh acquire).
fn probe(g: &mut Gen) -> Call {
    let holder = g.holder(&g.k.lock);
    let owner = match &holder {
        Some((owner, _)) if g.chance(60) => owner.clone(),
        _ => g.pick(OWNERS),
    };
    let request = match holder {
        Some((_, hold)) if g.chance(40) => hold,
        _ => g.request(),
    };
    (vec![g.k.lock.clone()], vec![owner, request])
}

/// KEYS lock; ARGV channel, publish how.
fn force_unlock(g: &mut Gen) -> Call {
    let argv = vec![g.k.channel.clone(), g.publish_how()];
    (vec![g.k.lock.clone()], argv)
}

/// KEYS lock, fence.
fn inspect(g: &mut Gen) -> Call {
    (vec![g.k.lock.clone(), g.k.fence.clone()], Vec::new())
}

// --- The latch. ---------------------------------------------------------------------------

/// KEYS latch; ARGV count (now and then not a count).
fn latch_set(g: &mut Gen) -> Call {
    let count = if g.chance(90) {
        g.range(1, 4)
    } else {
        g.pick(&["0", "x", "2.5"])
    };
    (vec![g.k.latch.clone()], vec![count])
}

/// KEYS latch; ARGV client tag, seq (often the recorded one: a retry), channel, publish how.
fn latch_count_down(g: &mut Gen) -> Call {
    let tag = g.pick(&["c1", "c2"]);
    let seq = match g.field(&g.k.latch, &format!("\u{1}r{tag}")) {
        Some(seq) if g.chance(30) => seq,
        _ => g.range(1, 4),
    };
    let argv = vec![tag, seq, g.k.latch_channel.clone(), g.publish_how()];
    (vec![g.k.latch.clone()], argv)
}

/// KEYS latch; ARGV channel, publish how.
fn latch_delete(g: &mut Gen) -> Call {
    let argv = vec![g.k.latch_channel.clone(), g.publish_how()];
    (vec![g.k.latch.clone()], argv)
}

/// KEYS latch; no ARGV (read-only).
fn latch_count(g: &mut Gen) -> Call {
    (vec![g.k.latch.clone()], Vec::new())
}

/// KEYS latch (the name), channel; ARGV count (now and then not a count, or one that Lua
/// reads as a number and Redis's DECR does not, which the set then writes as it is).
fn redisson_latch_set(g: &mut Gen) -> Call {
    let count = if g.chance(85) {
        g.range(1, 4)
    } else {
        g.pick(&["0", "x", "2.5", "2.0", " 2", "02", "0x2"])
    };
    let latch = &g.k.redisson_latch;
    let keys = vec![latch.key.to_string(), latch.channel.to_string()];
    (keys, vec![count, g.publish_how()])
}

/// KEYS latch, channel, record (a small set of request ids: retries happen); ARGV publish
/// how, record ms.
fn redisson_latch_count_down(g: &mut Gen) -> Call {
    let request = g.pick(REQUESTS);
    let keys = vec![
        g.k.redisson_latch.key.to_string(),
        g.k.redisson_latch.channel.to_string(),
        g.k.redisson_count_down_record(&request),
    ];
    (keys, vec![g.publish_how(), g.range(50, 800)])
}

/// KEYS latch, channel; ARGV publish how.
fn redisson_latch_delete(g: &mut Gen) -> Call {
    let latch = &g.k.redisson_latch;
    let keys = vec![latch.key.to_string(), latch.channel.to_string()];
    (keys, vec![g.publish_how()])
}

/// KEYS latch; no ARGV (read-only).
fn redisson_latch_count(g: &mut Gen) -> Call {
    (vec![g.k.redisson_latch.key.to_string()], Vec::new())
}

// --- The semaphore. -------------------------------------------------------------------------

fn sem_keys(g: &Gen) -> Vec<String> {
    vec![g.k.sem.clone(), g.k.permits.clone()]
}

/// KEYS sem, permits; ARGV size, only if unset, channel, publish how.
fn sem_set(g: &mut Gen) -> Call {
    let size = if g.chance(95) {
        g.range(1, 4)
    } else {
        g.pick(&["0", "x"])
    };
    let how = g.pick(&["0", "0", "1", "2"]);
    // Adding takes a signed count (the library's add_permits), now and then one that
    // would leave the size out of range.
    let size = if how == "2" {
        g.pick(&["1", "2", "-1", "-3", "3"])
    } else {
        size
    };
    let argv = vec![size, how, g.k.sem_channel.clone(), g.publish_how()];
    (sem_keys(g), argv)
}

/// KEYS sem, permits; ARGV permit id (held: a retry; reserving: the waiter's next try),
/// n (0: a drain), lease, reserve, reservation ms.
fn sem_acquire(g: &mut Gen) -> Call {
    let held = g.ids(&g.k.permits);
    let reserving: Vec<String> = g.field(&g.k.sem, "resv").into_iter().collect();
    let id = match (g.maybe(&held, 25), g.maybe(&reserving, 30)) {
        (Some(id), _) | (None, Some(id)) => id,
        _ => g.pick(PERMIT_IDS),
    };
    // 0: a drain (every free permit), also on a retry of a drain.
    let n = if g.chance(85) {
        g.range(1, 3)
    } else {
        "0".into()
    };
    let reserve = if g.chance(50) { "1" } else { "0" }.to_string();
    let argv = vec![id, n, g.range(100, 600), reserve, g.range(50, 300)];
    (sem_keys(g), argv)
}

/// KEYS sem, permits; ARGV permit id, n, channel, publish how, drop reservation.
fn sem_release(g: &mut Gen) -> Call {
    let held = g.ids(&g.k.permits);
    let reserving: Vec<String> = g.field(&g.k.sem, "resv").into_iter().collect();
    let (id, waiter) = match (g.maybe(&held, 70), g.maybe(&reserving, 50)) {
        (Some(id), _) => (id, false),
        (None, Some(id)) => (id, true),
        _ => (g.pick(PERMIT_IDS), false),
    };
    let count = g.count(&g.k.permits, &id);
    // -1: every permit of the acquisition (a drain's, whose count may be unknown).
    let n = if count > 0 && g.chance(75) {
        count.to_string()
    } else if g.chance(40) {
        "-1".into()
    } else {
        g.range(0, 3)
    };
    let drop = if g.chance(if waiter { 80 } else { 25 }) {
        "1"
    } else {
        "0"
    };
    let argv = vec![id, n, g.k.sem_channel.clone(), g.publish_how(), drop.into()];
    (sem_keys(g), argv)
}

/// KEYS one to three sorted sets of acquisitions (the semaphore's permits, and the
/// read-write and fair locks' holds, which the watchdog renews with this script too);
/// ARGV lease, m renewed, then per key a permit or hold id and its number of permits.
fn sem_renew(g: &mut Gen) -> Call {
    let n = g.rng.range(1, 3);
    let mut keys = Vec::new();
    let mut items = Vec::new();
    for _ in 0..n {
        let key = match g.rng.next() % 10 {
            0..=4 => g.k.permits.clone(),
            5 | 6 => g.k.rw.write.to_string(),
            7 | 8 => g.k.rw.read.to_string(),
            _ => g.k.fair.holds.to_string(),
        };
        let held = g.ids(&key);
        let id = match g.maybe(&held, 80) {
            Some(id) => id,
            None => g.pick(PERMIT_IDS),
        };
        let count = g.count(&key, &id);
        let permits = if count > 0 && g.chance(85) {
            count.to_string()
        } else {
            g.range(1, 3)
        };
        items.extend([id, permits]);
        keys.push(key);
    }
    let mut argv = vec![g.range(100, 600), g.range(0, n)];
    argv.extend(items);
    (keys, argv)
}

/// KEYS sem, permits.
fn sem_state(g: &mut Gen) -> Call {
    (sem_keys(g), Vec::new())
}

// --- The read-write lock. -------------------------------------------------------------------

fn rw_keys(g: &Gen) -> Vec<String> {
    let rw = &g.k.rw;
    vec![
        rw.write.to_string(),
        rw.read.to_string(),
        rw.reservation.to_string(),
    ]
}

/// KEYS write, read, reservation, [fence: a fenced write only]; ARGV hold id (often a live
/// one: a retry, or the waiting writer's), owner, 'r' / 'w', lease, flags (q o f j), the
/// read re-entered ('j'), reservation ms.
fn rw_acquire(g: &mut Gen) -> Call {
    let (write, read) = (g.k.rw.write.to_string(), g.k.rw.read.to_string());
    let live: Vec<String> = [g.ids(&write), g.ids(&read)].concat();
    let waiting: Vec<String> = g.string(&g.k.rw.reservation).into_iter().collect();
    let mut flags = String::new();
    let (id, mode) = if let Some(id) = g.maybe(&waiting, 40) {
        flags.push('q');
        (id, "w".to_string())
    } else if let Some(id) = g.maybe(&live, 25) {
        (id, g.pick(&["r", "w"]))
    } else {
        let owner = g.pick(OWNERS);
        (g.hold_id(&owner), g.pick(&["r", "w"]))
    };
    for (flag, percent) in [('q', 50), ('o', 30), ('f', 30), ('j', 20)] {
        if !flags.contains(flag) && g.chance(percent) {
            flags.push(flag);
        }
    }
    let joined = if flags.contains('j') {
        let reads = g.members(&read);
        match g.maybe(&reads, 70) {
            Some(member) => member,
            None => format!("{}:1", g.hold_id(&owner_of(&id))),
        }
    } else {
        String::new()
    };
    let mut keys = rw_keys(g);
    if mode == "w" && flags.contains('f') {
        keys.push(g.k.rw.fence.to_string());
    }
    let argv = vec![
        id.clone(),
        owner_of(&id),
        mode,
        g.range(100, 600),
        flags,
        joined,
        g.range(50, 300),
    ];
    (keys, argv)
}

/// KEYS write, read, reservation; ARGV hold id, 'r' / 'w' / '' (none), readers' channel,
/// writers' channel, publish how, leaving (drop the reservation).
fn rw_release(g: &mut Gen) -> Call {
    let rw = &g.k.rw;
    let (write, read) = (rw.write.to_string(), rw.read.to_string());
    let holds: Vec<String> = g
        .ids(&write)
        .into_iter()
        .map(|id| format!("w{id}"))
        .chain(g.ids(&read).into_iter().map(|id| format!("r{id}")))
        .collect();
    let waiting: Vec<String> = g.string(&rw.reservation).into_iter().collect();
    let (id, kind) = match (g.maybe(&holds, 70), g.maybe(&waiting, 40)) {
        (Some(hold), _) => (hold[1..].to_string(), hold[..1].to_string()),
        (None, Some(id)) => (id, String::new()),
        _ => {
            let owner = g.pick(OWNERS);
            (g.hold_id(&owner), g.pick(&["r", "w", ""]))
        }
    };
    let leave = kind.is_empty() || g.chance(if waiting.contains(&id) { 60 } else { 20 });
    let argv = vec![
        id,
        kind,
        g.k.rw.read_channel.to_string(),
        g.k.rw.write_channel.to_string(),
        g.publish_how(),
        if leave { "1" } else { "0" }.into(),
    ];
    (rw_keys(g), argv)
}

/// KEYS write, read, reservation.
fn rw_state(g: &mut Gen) -> Call {
    (rw_keys(g), Vec::new())
}

// --- The fair lock. -------------------------------------------------------------------------

fn fair_keys(g: &Gen) -> Vec<String> {
    let fair = &g.k.fair;
    vec![
        fair.holds.to_string(),
        fair.queue.to_string(),
        fair.alive.to_string(),
    ]
}

/// KEYS holds, queue, alive, [fence: a fenced acquire only]; ARGV hold id (often the
/// queue's head, or the holder's: a retry, or a re-entry of its owner), owner, lease, flags
/// (q f), waiter lease.
fn fair_acquire(g: &mut Gen) -> Call {
    let head: Vec<String> = g.members(&g.k.fair.queue).into_iter().take(1).collect();
    let holders = g.ids(&g.k.fair.holds);
    let id = if let Some(id) = g.maybe(&head, 45) {
        id
    } else if let Some(id) = g.maybe(&holders, 20) {
        id
    } else if let Some(holder) = g.maybe(&holders, 20) {
        g.hold_id(&owner_of(&holder))
    } else {
        let owner = g.pick(OWNERS);
        g.hold_id(&owner)
    };
    let mut flags = String::new();
    if g.chance(70) {
        flags.push('q');
    }
    let mut keys = fair_keys(g);
    if g.chance(30) {
        flags.push('f');
        keys.push(g.k.fair.fence.to_string());
    }
    let argv = vec![
        id.clone(),
        owner_of(&id),
        g.range(100, 600),
        flags,
        g.range(100, 400),
    ];
    (keys, argv)
}

/// KEYS holds, queue, alive; ARGV hold id, give the hold back, leave the queue, wake-up
/// channel prefix, publish how.
/// An operator's force-unlock of one of the sorted-set kinds, as the library builds it
/// (`protocol::force`): KEYS its hold sets (the fair lock's queue last); ARGV publish how,
/// the number of channels, the channels, the fair lock's wake-up prefix or ''.
fn force_delete(g: &mut Gen) -> Call {
    use redis_locks_protocol::force;
    let call = match g.range(0, 2).as_str() {
        "0" => force::rwlock_call(&g.k.rw),
        "1" => force::fair_call(&g.k.fair),
        _ => {
            let mut call = force::rwlock_call(&g.k.rw);
            call.keys = vec![g.k.permits.as_str().into()];
            call.args = vec![
                "0".into(),
                "1".into(),
                g.k.sem_channel.as_str().into(),
                "".into(),
            ];
            call
        }
    };
    let mut argv: Vec<String> = call.args.iter().map(|a| a.to_string()).collect();
    argv[0] = g.publish_how();
    (call.keys.iter().map(|k| k.to_string()).collect(), argv)
}

fn fair_release(g: &mut Gen) -> Call {
    let holders = g.ids(&g.k.fair.holds);
    let queued = g.members(&g.k.fair.queue);
    let id = match (g.maybe(&holders, 55), g.maybe(&queued, 50)) {
        (Some(id), _) | (None, Some(id)) => id,
        _ => {
            let owner = g.pick(OWNERS);
            g.hold_id(&owner)
        }
    };
    let give = g.chance(if holders.contains(&id) { 85 } else { 40 });
    let leave = g.chance(if queued.contains(&id) { 70 } else { 20 });
    let flag = |on: bool| if on { "1" } else { "0" }.to_string();
    let argv = vec![
        id,
        flag(give),
        flag(leave),
        g.k.fair.wake_prefix.to_string(),
        g.publish_how(),
    ];
    (fair_keys(g), argv)
}

/// KEYS holds, queue, alive.
fn fair_state(g: &mut Gen) -> Call {
    (fair_keys(g), Vec::new())
}

/// KEYS hash, record; ARGV owner, lease, record ms.
fn redisson_acquire(g: &mut Gen) -> Call {
    let hash = g.k.redisson.hash.to_string();
    let owner = match g.hash_fields(&hash).first() {
        Some(field) if g.chance(40) => field.clone(),
        _ => g.pick(OWNERS),
    };
    let request = g.pick(REQUESTS);
    let lease = g.lease();
    let record_ms = g.range(50, 800);
    let joins = if g.chance(25) { "1" } else { "0" }.to_string();
    (
        vec![hash, g.k.redisson_record(&request)],
        vec![owner, lease, record_ms, joins],
    )
}

/// KEYS hash, channel, record; ARGV owner, publish how, record ms, abandoned.
fn redisson_release(g: &mut Gen) -> Call {
    let hash = g.k.redisson.hash.to_string();
    let owner = match g.hash_fields(&hash).first() {
        Some(field) if g.chance(70) => field.clone(),
        _ => g.pick(OWNERS),
    };
    let request = g.pick(REQUESTS);
    let argv = vec![
        owner,
        g.publish_how(),
        g.range(50, 800),
        if g.chance(30) { "1" } else { "0" }.to_string(),
    ];
    (
        vec![
            hash,
            g.k.redisson.channel.to_string(),
            g.k.redisson_record(&request),
        ],
        argv,
    )
}

/// KEYS the lock hash 1 to 3 times (holds of one slot, as the watchdog batches them);
/// ARGV lease, how many are renewed, their owners.
fn redisson_renew(g: &mut Gen) -> Call {
    let n = g.rng.range(1, 3);
    let hashes = vec![g.k.redisson.hash.to_string(); n as usize];
    let mut argv = vec![g.lease(), g.range(0, n)];
    for hash in &hashes {
        let fields = g.hash_fields(hash);
        let owner = match g.maybe(&fields, 70) {
            Some(field) => field.trim_end_matches(":write").to_owned(),
            None => g.pick(OWNERS),
        };
        let side = g.pick(&["l", "r", "w"]);
        argv.push(format!("{side}{owner}"));
    }
    (hashes, argv)
}

/// KEYS hash, record; ARGV owner, lease, record ms, side.
fn redisson_rw_acquire(g: &mut Gen) -> Call {
    let hash = g.k.redisson.hash.to_string();
    let owner = g.pick(OWNERS);
    let request = g.pick(REQUESTS);
    let lease = g.lease();
    let record_ms = g.range(50, 800);
    let side = g.pick(&["read", "read", "write"]);
    let joins = if g.chance(25) { "1" } else { "0" }.to_string();
    (
        vec![hash, g.k.redisson_record(&request)],
        vec![owner, lease, record_ms, side, joins],
    )
}

/// KEYS hash, channel, record; ARGV owner, publish how, record ms, abandoned, side.
fn redisson_rw_release(g: &mut Gen) -> Call {
    let hash = g.k.redisson.hash.to_string();
    let owner = g.pick(OWNERS);
    let request = g.pick(REQUESTS);
    let side = g.pick(&["read", "read", "write"]);
    let argv = vec![
        owner,
        g.publish_how(),
        g.range(50, 800),
        if g.chance(30) { "1" } else { "0" }.to_string(),
        side,
    ];
    (
        vec![
            hash,
            g.k.redisson.rw_channel.to_string(),
            g.k.redisson_record(&request),
        ],
        argv,
    )
}

/// KEYS hash.
fn redisson_state(g: &mut Gen) -> Call {
    (vec![g.k.redisson.hash.to_string()], Vec::new())
}

/// KEYS hash, lock channel, read-write channel; ARGV publish how.
fn redisson_force_unlock(g: &mut Gen) -> Call {
    let keys = vec![
        g.k.redisson.hash.to_string(),
        g.k.redisson.channel.to_string(),
        g.k.redisson.rw_channel.to_string(),
    ];
    (keys, vec![g.publish_how()])
}

// --- The table. -----------------------------------------------------------------------------

/// One script under test.
struct Script {
    id: ScriptId,
    /// Its file in lua/, without ".lua".
    name: &'static str,
    /// How often it is called, relative to the others.
    weight: u64,
    /// Random KEYS and ARGV, mostly of the library's form.
    call: fn(&mut Gen) -> Call,
    /// Whether a reply is one of the script's success replies (it did what it is for).
    success: fn(&Reply, &Call) -> bool,
    /// Where its reply carries clock readings.
    times: Times,
}

impl Script {
    fn body(&self) -> &'static str {
        self.id.source()
    }

    /// What the script's header promises of an error reply: `None` nothing; `Some(false)`
    /// that nothing was written; `Some(true)` nothing but the dropping of expired members.
    fn promise(&self) -> Option<bool> {
        let header: Vec<&str> = self
            .body()
            .lines()
            .take_while(|line| line.starts_with("--") || line.starts_with("#!"))
            .map(|line| line.trim_start_matches('-').trim())
            .collect();
        let header = header.join(" ");
        let (_, rest) = header.split_once("means that nothing was written")?;
        Some(rest.starts_with(" but the dropping of expired"))
    }
}

fn int_at_least(reply: &Reply, least: i64) -> bool {
    matches!(reply, Reply::Int(n) if *n >= least)
}
fn first_is(reply: &Reply, first: i64) -> bool {
    matches!(reply, Reply::Array(items) if items.first() == Some(&Reply::Int(first)))
}
fn array_of(reply: &Reply, len: usize) -> bool {
    let Reply::Array(items) = reply else {
        return false;
    };
    items.len() == len && int_at_least(&items[0], 0)
}
/// A renewal reply (the lost positions) that did not lose every item.
fn renewed_some(reply: &Reply, items: usize) -> bool {
    matches!(reply, Reply::Array(lost) if lost.len() < items)
}

const SCRIPTS: &[Script] = &[
    Script {
        id: ScriptId::Acquire,
        name: "acquire",
        weight: 3,
        call: acquire,
        success: |r, _| *r == Reply::Int(0) || first_is(r, 1),
        times: Times::No,
    },
    Script {
        id: ScriptId::Take,
        name: "take",
        weight: 3,
        call: take,
        success: |r, _| *r == Reply::Status("OK".into()),
        times: Times::No,
    },
    Script {
        id: ScriptId::Release,
        name: "release",
        weight: 3,
        call: release,
        success: |r, _| int_at_least(r, 0),
        times: Times::No,
    },
    Script {
        id: ScriptId::ReleaseFirst,
        name: "release_first",
        weight: 2,
        call: release_first,
        success: |r, _| *r == Reply::Int(0),
        times: Times::No,
    },
    Script {
        id: ScriptId::Renew,
        name: "renew",
        weight: 2,
        call: renew,
        success: |r, (keys, argv)| renewed_some(r, keys.len().max((argv.len() - 2) / 2)),
        times: Times::No,
    },
    Script {
        id: ScriptId::Probe,
        name: "probe",
        weight: 1,
        call: probe,
        success: |r, _| first_is(r, 1),
        times: Times::No,
    },
    Script {
        id: ScriptId::ForceUnlock,
        name: "force_unlock",
        weight: 1,
        call: force_unlock,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::Inspect,
        name: "inspect",
        weight: 1,
        call: inspect,
        success: |r, _| {
            let hash = Reply::Bulk(b"hash".to_vec());
            matches!(r, Reply::Array(items) if items.first() == Some(&hash))
        },
        times: Times::Inspect,
    },
    Script {
        id: ScriptId::LatchSet,
        name: "latch_set",
        weight: 2,
        call: latch_set,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::LatchCountDown,
        name: "latch_count_down",
        weight: 3,
        call: latch_count_down,
        success: |r, _| int_at_least(r, 1),
        times: Times::No,
    },
    Script {
        id: ScriptId::LatchDelete,
        name: "latch_delete",
        weight: 1,
        call: latch_delete,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::LatchCount,
        name: "latch_count",
        weight: 1,
        call: latch_count,
        success: |r, _| int_at_least(r, 1),
        times: Times::No,
    },
    Script {
        id: ScriptId::SemAcquire,
        name: "sem_acquire",
        weight: 4,
        call: sem_acquire,
        success: |r, _| first_is(r, 1),
        times: Times::SecondAfter(&[0, 1]),
    },
    Script {
        id: ScriptId::SemRelease,
        name: "sem_release",
        weight: 3,
        call: sem_release,
        success: |r, _| int_at_least(r, 1),
        times: Times::No,
    },
    Script {
        id: ScriptId::SemRenew,
        name: "sem_renew",
        weight: 2,
        call: sem_renew,
        success: |r, (keys, _)| renewed_some(r, keys.len()),
        times: Times::No,
    },
    Script {
        id: ScriptId::SemSet,
        name: "sem_set",
        weight: 2,
        call: sem_set,
        success: |r, _| matches!(r, Reply::Array(items) if items.len() == 2),
        times: Times::No,
    },
    Script {
        id: ScriptId::SemState,
        name: "sem_state",
        weight: 1,
        call: sem_state,
        success: |r, _| matches!(r, Reply::Array(items) if items.len() == 3),
        times: Times::No,
    },
    Script {
        id: ScriptId::RwAcquire,
        name: "rw_acquire",
        weight: 4,
        call: rw_acquire,
        success: |r, _| first_is(r, 1),
        times: Times::SecondAfter(&[0]),
    },
    Script {
        id: ScriptId::RwRelease,
        name: "rw_release",
        weight: 3,
        call: rw_release,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::RwState,
        name: "rw_state",
        weight: 1,
        call: rw_state,
        success: |r, _| array_of(r, 5),
        times: Times::At(&[3, 4]),
    },
    Script {
        id: ScriptId::FairAcquire,
        name: "fair_acquire",
        weight: 4,
        call: fair_acquire,
        success: |r, _| first_is(r, 1),
        times: Times::SecondAfter(&[0]),
    },
    Script {
        id: ScriptId::FairRelease,
        name: "fair_release",
        weight: 3,
        call: fair_release,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::FairState,
        name: "fair_state",
        weight: 1,
        call: fair_state,
        success: |r, _| array_of(r, 4),
        times: Times::At(&[3]),
    },
    Script {
        id: ScriptId::RedissonAcquire,
        name: "redisson_acquire",
        weight: 2,
        call: redisson_acquire,
        success: |r, _| first_is(r, 1),
        times: Times::SecondAfter(&[0]),
    },
    Script {
        id: ScriptId::RedissonRelease,
        name: "redisson_release",
        weight: 2,
        call: redisson_release,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::RedissonRenew,
        name: "redisson_renew",
        weight: 1,
        call: redisson_renew,
        success: |r, _| matches!(r, Reply::Array(_)),
        times: Times::No,
    },
    Script {
        id: ScriptId::RedissonRwAcquire,
        name: "redisson_rw_acquire",
        weight: 3,
        call: redisson_rw_acquire,
        success: |r, _| first_is(r, 1),
        times: Times::SecondAfter(&[0]),
    },
    Script {
        id: ScriptId::RedissonRwRelease,
        name: "redisson_rw_release",
        weight: 3,
        call: redisson_rw_release,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::RedissonState,
        name: "redisson_state",
        weight: 1,
        call: redisson_state,
        success: |r, _| first_is(r, 1),
        times: Times::StatePairs,
    },
    Script {
        id: ScriptId::RedissonForceUnlock,
        name: "redisson_force_unlock",
        weight: 1,
        call: redisson_force_unlock,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::RedissonLatchSet,
        name: "redisson_latch_set",
        weight: 2,
        call: redisson_latch_set,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::RedissonLatchCountDown,
        name: "redisson_latch_count_down",
        weight: 3,
        call: redisson_latch_count_down,
        success: |r, _| int_at_least(r, 1),
        times: Times::No,
    },
    Script {
        id: ScriptId::RedissonLatchDelete,
        name: "redisson_latch_delete",
        weight: 1,
        call: redisson_latch_delete,
        success: |r, _| *r == Reply::Int(1),
        times: Times::No,
    },
    Script {
        id: ScriptId::RedissonLatchCount,
        name: "redisson_latch_count",
        weight: 1,
        call: redisson_latch_count,
        success: |r, _| int_at_least(r, 1),
        times: Times::No,
    },
    Script {
        id: ScriptId::ForceDelete,
        name: "force_delete",
        weight: 1,
        call: force_delete,
        success: |r, _| int_at_least(r, 1),
        times: Times::No,
    },
];

/// Every script of the library has one row, named after its file.
#[test]
fn every_script_has_a_row() {
    for id in ScriptId::ALL {
        let rows: Vec<&Script> = SCRIPTS.iter().filter(|s| s.id == id).collect();
        assert_eq!(rows.len(), 1, "{id:?} needs exactly one row in SCRIPTS");
        let header = format!("-- {}.lua:", rows[0].name);
        assert!(
            id.source()
                .lines()
                .take(2)
                .any(|line| line.starts_with(&header)),
            "{id:?}: the row's name does not match the script's header"
        );
    }
    assert_eq!(SCRIPTS.len(), ScriptId::ALL.len());
}

/// The Redis commands the scripts call (every quoted upper-case word of their sources that
/// is a command), in order.
fn script_commands() -> Vec<String> {
    let mut commands: Vec<String> = Vec::new();
    for id in ScriptId::ALL {
        for word in id.source().split('\'').skip(1).step_by(2) {
            let command = !word.is_empty() && word.bytes().all(|b| b.is_ascii_uppercase());
            if command
                && keyspace::arity(&word.to_ascii_lowercase()).is_some()
                && !commands.iter().any(|c| c == word)
            {
                commands.push(word.to_owned());
            }
        }
    }
    commands.sort();
    commands
}

// --- Disturbances. --------------------------------------------------------------------------

/// Writes that put the keys into the states the scripts must cope with: wrong types,
/// somebody else's holds, permits, reservations and waiters, dead waiters, expired members,
/// keys without a TTL, bad counts and counters, lost keys. Some are two commands.
fn disturbance(rng: &mut Rng) -> Vec<Vec<String>> {
    let name = *rng.pick(NAMES);
    let k = Names::of(name);
    let now = now_ms();
    // Deadlines in ms from now, and queue arrivals in µs (Redis time, as the scripts write).
    let at = |ms: i64| (now as i64 + ms).to_string();
    let (past, soon, later, latest) = (at(-5), at(60), at(80), at(100));
    let (arrived, arrived_before) = ((now * 1000).to_string(), ((now - 1) * 1000).to_string());
    let owner = *rng.pick(OWNERS);
    let (rw, fair) = (&k.rw, &k.fair);
    let (write, read, waiting) = (&*rw.write, &*rw.read, &*rw.reservation);
    let (holds, queue, alive) = (&*fair.holds, &*fair.queue, &*fair.alive);
    let (lock, fence) = (k.lock.as_str(), k.fence.as_str());
    let (latch, sem, permits) = (k.latch.as_str(), k.sem.as_str(), k.permits.as_str());
    let dead = "o3\u{1}c9.1";
    let commands: Vec<Vec<&str>> = match rng.next() % 5 {
        0 => vec![match rng.next() % 12 {
            0 => vec!["SET", lock, "x", "PX", "20"],
            1 => vec!["DEL", lock],
            2 => vec!["PERSIST", lock],
            3 => vec!["HSET", lock, owner, "abc"],
            4 => vec!["HDEL", lock, "\u{1}h"],
            5 => vec!["HSET", lock, "o3", "1", "\u{1}h", "c9.1"],
            6 => vec!["SET", fence, "nan", "PX", "30"],
            7 => vec!["DEL", fence],
            8 => vec!["SET", fence, "42"],
            // Somebody else's first hold (the string form), marked; and one without a TTL.
            9 => vec!["SET", lock, "\u{2}c9.1\u{1}o3", "PX", "80"],
            10 => vec!["SET", lock, "\u{1}c9.1\u{1}o3"],
            _ => vec!["PEXPIRE", lock, "5"],
        }],
        1 => vec![match rng.next() % 6 {
            0 => vec!["SET", latch, "x", "PX", "20"],
            1 => vec!["HSET", latch, "count", "x"],
            2 => vec!["HDEL", latch, "count"],
            3 => vec!["HSET", latch, "count", "2.5"],
            4 => vec!["HSET", latch, "\u{1}rc1", "1"],
            _ => vec!["DEL", latch],
        }],
        2 => match rng.next() % 11 {
            0 => vec![vec!["SET", sem, "x", "PX", "30"]],
            1 => vec![vec!["HSET", sem, "size", "x"]],
            2 => vec![vec!["HDEL", sem, "size"]],
            3 => vec![vec![
                "HSET",
                sem,
                "resv",
                "p9",
                "resv_n",
                "2",
                "resv_until",
                &latest,
            ]],
            4 => vec![vec!["SET", permits, "x", "PX", "30"]],
            5 => vec![
                vec!["HSET", permits, "f", "v"],
                vec!["PEXPIRE", permits, "40"],
            ],
            6 => vec![vec!["ZADD", permits, &later, "p9:1"]],
            7 => vec![vec!["ZADD", permits, &past, "p8:1"]],
            8 => vec![vec!["DEL", permits]],
            9 => vec![vec!["PERSIST", permits]],
            _ => vec![vec!["DEL", sem]],
        },
        3 => match rng.next() % 11 {
            0 => vec![vec!["SET", write, "x", "PX", "30"]],
            1 => vec![vec!["HSET", read, "f", "v"], vec!["PEXPIRE", read, "40"]],
            2 => vec![
                vec!["HSET", waiting, "f", "v"],
                vec!["PEXPIRE", waiting, "40"],
            ],
            3 => vec![vec!["ZADD", write, &latest, "o3\u{1}c9.1:1"]],
            4 => vec![vec!["SET", waiting, dead, "PX", "80"]],
            5 => vec![vec!["ZADD", read, &past, "o1\u{1}c9.1:1"]],
            6 => vec![vec!["ZADD", read, &latest, "o3\u{1}c9.2:1"]],
            7 => vec![vec!["PERSIST", *rng.pick(&[write, read])]],
            8 => vec![vec!["DEL", *rng.pick(&[write, read, waiting])]],
            9 => vec![vec!["SET", &rw.fence, "nan", "PX", "30"]],
            _ => vec![vec!["SET", &rw.fence, "42"]],
        },
        _ => match rng.next() % 9 {
            0 => vec![vec!["SET", holds, "x", "PX", "30"]],
            1 => vec![vec!["HSET", alive, "f", "v"], vec!["PEXPIRE", alive, "40"]],
            2 => vec![vec!["SET", queue, "x", "PX", "30"]],
            // A waiter that will die: it stops asking, and is alive for 60 ms more.
            3 => vec![
                vec!["ZADD", queue, &arrived, dead],
                vec!["ZADD", alive, &soon, dead],
            ],
            // A dead waiter: dropped from the queue by the next call.
            4 => vec![
                vec!["ZADD", queue, &arrived_before, "o3\u{1}c9.2"],
                vec!["ZADD", alive, &past, "o3\u{1}c9.2"],
            ],
            5 => vec![vec!["ZADD", holds, &later, "o3\u{1}c9.1:1"]],
            6 => vec![vec!["DEL", *rng.pick(&[holds, queue, alive])]],
            7 => vec![vec!["PERSIST", holds]],
            _ => vec![vec!["SET", &fair.fence, "nan", "PX", "30"]],
        },
    };
    commands
        .into_iter()
        .map(|parts| parts.into_iter().map(String::from).collect())
        .collect()
}

// --- The driver. ----------------------------------------------------------------------------

/// How one script fared.
#[derive(Default)]
struct Tally {
    calls: u32,
    successes: u32,
    outcomes: BTreeMap<String, u32>,
}

/// A reply, for the outcome counts: long numbers (TTLs, deadlines) and script suffixes cut.
fn outcome(reply: &Reply) -> String {
    match reply {
        Reply::Int(n) if *n > 9 => "Int(>9)".into(),
        Reply::Array(items) => match items.as_slice() {
            [] => "[]".into(),
            [one] => format!("[{}]", outcome(one)),
            [first, ..] => format!("[{}, ..]", outcome(first)),
        },
        Reply::Error(text) => {
            let text = text.split(" script: ").next().unwrap_or_default();
            format!("Error({:?})", text.chars().take(60).collect::<String>())
        }
        Reply::Bulk(bytes) if bytes.len() > 24 => format!("{:?}..", lossy(&bytes[..24])),
        other => show(other),
    }
}

/// One server, the model kept in step with it, and the outcomes so far.
struct Run {
    /// The default user's connection: disturbances, snapshots, calls nothing refuses.
    conn: MultiplexedConnection,
    model: Model,
    runner: ScriptRunner,
    rng: Rng,
    steps: usize,
    tally: BTreeMap<&'static str, Tally>,
    /// The share (%) of publishing calls that ask for SPUBLISH.
    sharded: u64,
    /// PUBLISH and SPUBLISH calls on the server so far.
    published: u64,
}

impl Run {
    async fn start(server: &common::RedisServer) -> Run {
        let mut run = Run {
            conn: server.conn().await,
            model: Model::new(script_keys()),
            runner: ScriptRunner::new(),
            rng: Rng(seed()),
            steps: 0,
            tally: BTreeMap::new(),
            sharded: 35,
            published: 0,
        };
        run.model.sync(&mut run.conn).await;
        run
    }

    /// Now and then lets time pass, so that leases, reservations and waiters expire.
    async fn pause(&mut self) {
        if self.rng.chance(3) {
            let ms = self.rng.range(10, 150);
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
    }

    /// A weighted random script among those that `fits`.
    fn pick(&mut self, fits: impl Fn(&Script) -> bool) -> &'static Script {
        let fitting: Vec<&'static Script> = SCRIPTS.iter().filter(|s| fits(s)).collect();
        let total: u64 = fitting.iter().map(|s| s.weight).sum();
        let mut roll = self.rng.range(0, total - 1);
        for script in &fitting {
            if roll < script.weight {
                return script;
            }
            roll -= script.weight;
        }
        unreachable!("the roll is below the total weight")
    }

    async fn disturb(&mut self) {
        for parts in disturbance(&mut self.rng) {
            let parts: Vec<Vec<u8>> = parts.into_iter().map(String::into_bytes).collect();
            let (t0, reply, t1) = (now_ms(), real(&mut self.conn, &parts).await, now_ms());
            let what = format!("step {}: {}", self.steps, text(&parts));
            self.model
                .step(&what, (t0, t1), &reply, same, |ks, t| ks.command(t, &parts));
            self.model.sync(&mut self.conn).await;
            self.steps += 1;
        }
    }

    /// Calls `script` with random KEYS and ARGV on `conn` (a user whose ACL refuses the
    /// commands `refused`; `None`: the default user) and on the model, compares the replies
    /// and then the keys. Returns the reply, the call's description and when it ended.
    async fn call(
        &mut self,
        script: &'static Script,
        conn: Option<&mut MultiplexedConnection>,
        refused: &[&str],
    ) -> (Reply, String, u64) {
        let name = *self.rng.pick(NAMES);
        let now = now_ms();
        let call = (script.call)(&mut Gen {
            rng: &mut self.rng,
            ks: &self.model.states[0],
            now,
            k: Names::of(name),
            sharded: self.sharded,
        });
        // Every key of one call in one slot (one hash tag), as the library sends them; only
        // renew may span slots (its flag allow-cross-slot-keys).
        // A key's slot is its hash tag's, or the whole key's when it has none (a lock in
        // Redisson's layout is the bare name, its helper keys tag the name).
        let tag = |key: &String| {
            let tagged = key
                .split_once('{')
                .and_then(|(_, rest)| rest.split_once('}'))
                .map(|(tag, _)| tag)
                .filter(|tag| !tag.is_empty());
            Some(tagged.unwrap_or(key).to_owned())
        };
        assert!(
            script.id == ScriptId::Renew
                || call
                    .0
                    .iter()
                    .all(|key| tag(key).is_some() && tag(key) == tag(&call.0[0])),
            "{}: KEYS {:?} are not in one slot",
            script.name,
            call.0
        );
        let bytes =
            |v: &[String]| -> Vec<Vec<u8>> { v.iter().map(|s| s.as_bytes().to_vec()).collect() };
        let (keys, argv) = (bytes(&call.0), bytes(&call.1));
        let latch_was_closed = script.id == ScriptId::LatchCountDown
            && self.model.states[0].hash(&keys[0], now).is_some();
        let mut own = self.conn.clone();
        let conn = conn.unwrap_or(&mut own);
        let t0 = now_ms();
        let reply = real_eval(conn, script.body(), &keys, &argv).await;
        let t1 = now_ms();
        // How many messages the call published (commandstats counts the commands a script
        // ran; not those the ACL refused, nor does the model log those).
        let published = common::command_calls(&mut self.conn, &["publish", "spublish"]).await;
        let sent = published - std::mem::replace(&mut self.published, published);
        let as_whom = match refused {
            [] => String::new(),
            _ => format!(" (the ACL refuses {})", refused.join(", ")),
        };
        let what = format!(
            "step {}: {}{as_whom} KEYS {} ARGV {}",
            self.steps,
            script.name,
            text(&keys),
            text(&argv)
        );
        self.runner.refuse(refused);
        let runner = &self.runner;
        self.model.step(
            &what,
            (t0, t1),
            &reply,
            |m, r| agree_script(script.times, slack_ms((t0, t1)), m, r),
            |ks, t| {
                let reply = runner.eval(script.body(), &keys, &argv, ks, t);
                // Each step's log is compared, then dropped (states then differ in keys only).
                match std::mem::take(&mut ks.published).len() as u64 {
                    logged if logged == sent => reply,
                    logged => Reply::Error(format!("MODEL published {logged}, the server {sent}")),
                }
            },
        );
        self.runner.refuse(&[]);
        self.model.sync(&mut self.conn).await;
        self.steps += 1;
        let tally = self.tally.entry(script.name).or_default();
        tally.calls += 1;
        tally.successes += (script.success)(&reply, &call) as u32;
        let mut shape = outcome(&reply);
        if latch_was_closed && reply == Reply::Int(0) {
            shape += " (opened it)";
        }
        *tally.outcomes.entry(shape).or_default() += 1;
        (reply, what, t1)
    }

    fn report(&self) {
        println!("{} steps agreed; script outcomes:", self.steps);
        for script in SCRIPTS {
            let Some(tally) = self.tally.get(script.name) else {
                println!("  {}: never called", script.name);
                continue;
            };
            println!(
                "  {} ({} calls, {} successes):",
                script.name, tally.calls, tally.successes
            );
            for (outcome, count) in &tally.outcomes {
                println!("    {count:5}  {outcome}");
            }
        }
    }

    /// The scripts not yet called, or never answered with a success reply.
    fn never_succeeded(&self) -> Vec<&'static str> {
        SCRIPTS
            .iter()
            .filter(|s| self.tally.get(s.name).is_none_or(|t| t.successes == 0))
            .map(|s| s.name)
            .collect()
    }

    /// Fails unless every script was called and reached a success reply.
    fn assert_every_script_succeeded(&self) {
        let missing = self.never_succeeded();
        assert!(
            missing.is_empty(),
            "never called, or never successful: {missing:?} (see the outcomes above)"
        );
    }

    /// Some publishes were sharded (each call's count was compared in `call`).
    async fn check_publishes(&mut self) {
        let publish = common::command_calls(&mut self.conn, &["publish"]).await;
        let spublish = common::command_calls(&mut self.conn, &["spublish"]).await;
        println!("PUBLISH {publish}, SPUBLISH {spublish} (each call's count agreed)");
        assert_eq!(publish + spublish, self.published);
        assert!(spublish > 0, "no script call used SPUBLISH");
    }
}

#[tokio::test]
async fn scripts_match_real_redis() {
    let server = common::RedisServer::start();
    let mut run = Run::start(&server).await;
    const STEPS: usize = 5000;
    // Longer (up to 4 times) until every script has succeeded once: the Redisson latch's
    // scripts succeed only while no other kind's key holds their name, and reached no
    // success in 5 000 steps in 3 of 18 runs.
    while run.steps < STEPS || (!run.never_succeeded().is_empty() && run.steps < 4 * STEPS) {
        run.pause().await;
        if run.rng.chance(8) {
            run.disturb().await;
        } else {
            let script = run.pick(|_| true);
            run.call(script, None, &[]).await;
        }
    }
    run.report();
    run.assert_every_script_succeeded();
    run.check_publishes().await;
}

/// Whether a reply is an ACL refusal (of a command the script ran, or checked with
/// `redis.acl_check_cmd` and then ran for the error).
fn refusal(reply: &Reply) -> bool {
    matches!(reply, Reply::Error(text) if text.contains("can't run this command"))
}

/// For each command the scripts call, a user whose ACL refuses it (`+@all -<command>`)
/// calls the scripts that use it, between calls of the default user that build up state;
/// the model runs with the same refusal (`ScriptRunner::refuse`). Replies and keys must
/// agree, and on a refusal the server's keys must show that nothing was written where the
/// script's header promises it.
#[tokio::test]
async fn scripts_match_real_redis_when_the_acl_refuses() {
    let server = common::RedisServer::start();
    let mut run = Run::start(&server).await;
    const STEPS_PER_COMMAND: usize = 110;
    let commands = script_commands();
    // (command, script) -> refusals
    let mut refusals = BTreeMap::<(String, &str), u32>::new();
    let mut broken = Vec::new();
    let mut unpromised = BTreeMap::<&str, (u32, String)>::new();
    for command in &commands {
        let user = format!("no-{}", command.to_ascii_lowercase());
        let rule = format!("-{}", command.to_ascii_lowercase());
        let setuser = [
            "ACL", "SETUSER", &user, "on", "nopass", "~*", "&*", "+@all", &rule,
        ];
        assert_eq!(
            real(&mut run.conn, &args(&setuser)).await,
            Reply::Status("OK".into())
        );
        let url = format!("redis://{user}:any@127.0.0.1:{}/", server.port);
        let mut limited = redis::Client::open(url)
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();
        let quoted = format!("'{command}'");
        // The publishing calls of the refused user ask for the refused one.
        let sharded = match command.as_str() {
            "SPUBLISH" => 100,
            "PUBLISH" => 0,
            _ => 35,
        };
        let (first, mut hits) = (run.steps, 0);
        // Longer (up to 20 times) until the user was refused at least once: a command
        // that only a rare branch calls (HDEL: a semaphore's reservation) was once missed
        // in 4 times the steps.
        while run.steps < first + STEPS_PER_COMMAND
            || (hits == 0 && run.steps < first + 20 * STEPS_PER_COMMAND)
        {
            run.pause().await;
            if run.rng.chance(8) {
                run.disturb().await;
                continue;
            }
            if !run.rng.chance(50) {
                let script = run.pick(|_| true);
                run.call(script, None, &[]).await;
                continue;
            }
            let script = run.pick(|s| s.body().contains(&quoted));
            let before = run.model.last.clone().expect("synced");
            run.sharded = sharded;
            let (reply, what, t1) = run.call(script, Some(&mut limited), &[command]).await;
            run.sharded = 35;
            if !refusal(&reply) {
                continue;
            }
            hits += 1;
            *refusals.entry((command.clone(), script.name)).or_default() += 1;
            let after = run.model.last.as_ref().expect("synced");
            match (script.promise(), written(&before, after, t1, true)) {
                (_, None) => {}
                (Some(drops), Some(_)) => {
                    if let Some(change) = written(&before, after, t1, drops) {
                        broken.push(format!("{what}\n  -> {}\n  wrote {change}", show(&reply)));
                    }
                }
                (None, Some(change)) => {
                    let seen = unpromised.entry(script.name).or_default();
                    seen.0 += 1;
                    if seen.1.is_empty() {
                        seen.1 = format!("{what}\n      wrote {change}");
                    }
                }
            }
        }
    }
    run.report();
    println!("refusals (command: script count ...):");
    for command in &commands {
        let per_script: Vec<String> = refusals
            .iter()
            .filter(|((c, _), _)| c == command)
            .map(|((_, script), n)| format!("{script} {n}"))
            .collect();
        println!("  {command}: {}", per_script.join(", "));
    }
    for (script, (count, example)) in &unpromised {
        println!(
            "{script} (its header promises nothing of error replies) left writes behind \
             {count} time(s), e.g.\n    {example}"
        );
    }
    let never: Vec<&String> = commands
        .iter()
        .filter(|c| !refusals.keys().any(|(refused, _)| refused == *c))
        .collect();
    assert!(never.is_empty(), "no script call was refused {never:?}");
    assert!(
        broken.is_empty(),
        "refused calls that wrote although their script promises otherwise:\n{}",
        broken.join("\n")
    );
    run.check_publishes().await;
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
