//! The protocol model of the count-down latch kept in Redisson's `RCountDownLatch` layout
//! (`LockClient::redisson_latch`): clients of this library close the latch, count it down
//! and delete it, while a Java service using Redisson does the same with Redisson's own
//! scripts (the [`JAVA_TRY_SET_COUNT`], [`JAVA_COUNT_DOWN`] and [`JAVA_DELETE`] below, as
//! `RedissonCountDownLatch` sends them), replies are lost, Redis answers `BUSY`/`LOADING`,
//! Redis restarts and loses every key, another program writes the latch's key as something
//! else, count-downs time out and run late, and the clock moves (records expire). Every
//! call of ours is built and every reply read by the library's own
//! `redis_locks_protocol::latch` (`set_call`, `count_down_call`, `delete_call`,
//! `count_call`, `decode_done`, `decode_count_down`, `decode_count`, with
//! `LatchKeys::redisson` and the record lifetime `count_down_record_ms`), every server
//! error is classified by its `Failure::from_server_error`, every re-send is decided by its
//! `resend::Resend` with the bound `timing::count_down_give_up_at` (the machine and the
//! bound `CountDownLatch::count_down` drives), and every call runs the real
//! `lua/redisson_latch_*.lua` in the embedded Lua against the keyspace model; the Java
//! peer's scripts run in the same Lua against the same keyspace. The one checker
//! (`tests/protocol/checker.rs`) explores it breadth-first and checks the properties in
//! every state.
//!
//! The layout: the latch is the string `l` holding the count (no key: open); openings are
//! announced on `redisson_countdownlatch__channel__{l}` with `0`, closings with `1`. Each
//! count-down of ours leaves a record of its own, `p_redisson_count_down:{l}:<request id>`,
//! with an expiry (`count_down_record_ms(WATCHDOG, RESPONSE)`): a copy re-sent after a lost
//! reply finds it and answers with the current count instead of counting again, even when
//! the latch was opened and closed again in between (unlike the native layout, whose record
//! lives in the latch's hash and goes with it).
//!
//! Assumptions (as the native latch's model, `tests/protocol/latchmodel.rs`): one latch,
//! one Redis; one count-down at a time per client (the library's lane); a copy of a
//! count-down that the client gave up on never runs after the client's next request (one
//! connection keeps its requests in order). A set, a delete and every call of the Java
//! peer run at once (one `EVAL`, not re-sent): a `BUSY` there reaches the caller as the
//! error and changes nothing, so it is no step. A Java count-down is sent without retries:
//! a lost reply (`JavaCountDown { lost: true }`, one of the faults) leaves its caller in
//! doubt and nothing is re-sent, so it counts at most once by construction.
//!
//! `BUSY`/`LOADING` (configurations with `busy`): a count-down sent and not yet run is
//! answered with a transient server error instead of running (`BUSY` before any restart,
//! `LOADING` after one). The model hands the error's text to the library's classifier and
//! the failure to the count-down's `Resend`, which must pause and re-send the same call.
//!
//! Restarts (configurations with `restarts`): Redis restarts without persistence and loses
//! every key, the latch and the records. The latch reads as open afterwards (no key: count
//! 0). Every connection drops: a count-down sent and not yet run never runs, a reply on its
//! way is lost (`Failure::Lost`), a stray never runs; a count-down pausing before a re-send
//! is not touched.
//!
//! Late count-downs (configurations with `timeouts`): a count-down sent and not yet run
//! times out (`Failure::TimedOut`); its `Resend` pauses and re-sends it, and the copy it
//! gave up on stays on the connection, a *stray*, which runs late (`ExecuteStray`), after
//! any steps of the others but before the client's re-sent copy, or never (`DropStray`).
//!
//! Time (configurations with `advances` or `idles`): the clock moves by [`ADVANCE`] while
//! count-downs are in flight, and, when nothing of ours is in flight (no count-down, no
//! stray), jumps past every record's expiry (`Idle`: the records expire, the latch stays).
//! The records live as `src/latch.rs` sizes them ([`RECORD_MS`]); a count-down is re-sent
//! until [`resend_window`] after its start. The model's clock never runs that far within
//! one count-down (asserted at the start and at every copy), so every copy meets its record:
//! a copy that arrives after its record expired is outside the library's assumptions (it
//! sizes the records to outlive every copy it re-sends) and is not modelled.
//!
//! Clobbers (configurations with `clobbers`): another program writes the latch's key as
//! something else (a name clash): a hash, or a string that is not a number. Every call of
//! ours must then leave it as it is and report that it is not a latch. (Redisson's own
//! delete removes it, as Redisson does; its count-down fails on it.) A string that Lua
//! reads as a number and Redis does not (`2.0`, [`Clobber::Decimal`]) is one too: this
//! checker found the scripts taking it for a latch (see there).
//!
//! The properties:
//! 1. "counted once": each count-down of ours counts at most once in total, in whichever
//!    closings of the latch its copies meet, while its record lives: a copy re-sent after
//!    the latch was opened and closed again (by either side) must not count in the new
//!    closing. The one exception is a restart, which loses the records with the latch: a
//!    count-down whose copy counted in a closing a restart lost, and whose client is in
//!    doubt, may count once more in a later closing (reached as a milestone: the layout's
//!    limit, as the native layout's is a re-closing's). A first copy that meets a closed latch
//!    counts exactly one; every count-down of ours is re-sent through lost replies,
//!    timeouts and `BUSY`/`LOADING` until a copy runs (its `Resend` never ends without
//!    one). While a closing lives, its count is what it was closed with minus the distinct
//!    count-downs (ours and Java's) that counted in it.
//! 2. "opens exactly at zero": a closed latch becomes open only by the count-down (ours or
//!    Java's) that finds count 1, by a delete (ours or Java's), or by a restart.
//! 3. "reports are true": every reply the library reads says what Redis had (a count-down:
//!    right after the copy that answered ran; a set: closed it or found it closed; a
//!    delete: opened it or found it open; a reading of the count, in every state: the
//!    count, or what the key is when it is not a latch); no script of ours answers with an
//!    error.
//! 4. "no garbage": only the latch's string (a whole number >= 1, without expiry), another
//!    program's key where it wrote one, and our records exist; each record belongs to a
//!    count-down of ours that counted, and has an expiry within its lifetime (never none).
//! 5. "waiters are woken": every opening by a count-down (ours or Java's) or by our delete
//!    publishes `0` once on Redisson's channel, every closing by a set (ours or Java's)
//!    publishes `1` once, and nothing else of ours publishes (Redisson's own delete
//!    publishes `1`, as Redisson does; its waiters then sleep on until their timeout: not
//!    ours to change).
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;

use redis_locks_protocol::backoff::Backoff;
use redis_locks_protocol::latch::{
    LatchCount, LatchKeys, LatchReply, count_call, count_down_call, count_down_record_ms,
    decode_count, decode_count_down, decode_done, delete_call, set_call,
};
use redis_locks_protocol::resend::Resend;
use redis_locks_protocol::timing::count_down_give_up_at;
use redis_locks_protocol::{Call, Env, Failure, Machine, Millis, Next, Reply, RequestIds};

use crate::checker::{Model, Stepped};
use crate::keyspace::{Keyspace, parse_i64};
use crate::lua::ScriptRunner;

pub use crate::lua::Scripts;

/// The count our clients close the latch with.
pub const COUNT: u64 = 2;
/// The count the Java peer closes it with (`trySetCount(1)`): its closings open at the
/// first count-down.
pub const JAVA_COUNT: u64 = 1;

/// The client's watchdog timeout and response timeout (the library's defaults), from which
/// `src/latch.rs` sizes a count-down's re-sending and its record.
pub const WATCHDOG: Millis = 30_000;
pub const RESPONSE: Millis = 3_000;
/// How long a count-down's record lives (`src/latch.rs`'s `redisson_latch`).
pub const RECORD_MS: Millis = count_down_record_ms(WATCHDOG, RESPONSE);
/// How long a count-down is re-sent after its start (`src/latch.rs`'s `count_down`).
pub fn resend_window() -> Millis {
    count_down_give_up_at(0, WATCHDOG, RESPONSE)
}
/// The longest pause of a re-send (`Backoff::RESEND`'s cap, from the core): the model's
/// clock must leave room for it before the re-send's bound.
fn max_pause() -> Millis {
    let mut backoff = Backoff::RESEND;
    (0..64).map(|_| backoff.pause_ms(0)).max().unwrap_or(0)
}
/// How far the clock moves in one `Advance` step.
pub const ADVANCE: Millis = 5_000;
/// The model's clock at the start.
const START: Millis = 1_000_000;

/// The bound (steps per run) of a release build: `tests/redisson_latch_check.rs` runs it
/// and `tests/redisson_latch_teeth.rs` must find every planted defect within it.
pub const DEFAULT_DEPTH: usize = 20;

/// Redisson's `trySetCount` (`RedissonCountDownLatch.trySetCountAsync`, 3.x to 4.x), as a
/// Java service sends it: KEYS = the latch and its channel, ARGV = the new-count message
/// (`1`), the count, the publish command.
pub const JAVA_TRY_SET_COUNT: &str = "\
if redis.call('exists', KEYS[1]) == 0 then \
redis.call('set', KEYS[1], ARGV[2]); \
redis.call(ARGV[3], KEYS[2], ARGV[1]); \
return 1 \
else \
return 0 \
end";

/// Redisson's `countDown` (`RedissonCountDownLatch.countDownAsync`): KEYS = the latch and
/// its channel, ARGV = the zero-count message (`0`), the publish command. Sent without
/// retries.
pub const JAVA_COUNT_DOWN: &str = "\
local v = redis.call('decr', KEYS[1]); \
if v <= 0 then redis.call('del', KEYS[1]) end; \
if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";

/// Redisson's `delete` (`RedissonCountDownLatch.deleteAsync`): KEYS = the latch and its
/// channel, ARGV = the new-count message (`1`: Redisson's delete publishes 1, not 0), the
/// publish command.
pub const JAVA_DELETE: &str = "\
if redis.call('del', KEYS[1]) == 1 then \
redis.call(ARGV[2], KEYS[2], ARGV[1]); \
return 1 \
else \
return 0 \
end";

/// The properties, checked in every state (see the header).
pub const PROPERTIES: [&str; 5] = [
    "counted once",
    "opens exactly at zero",
    "reports are true",
    "no garbage",
    "waiters are woken",
];

/// What the configurations must reach (each its own list: [`must_reach`]).
pub const MILESTONES: [&str; 23] = [
    "opened by our count-down",
    "opened by a Java count-down",
    "a Java closing opened by our count-down",
    "our closing opened by a Java count-down",
    "a retried count-down of ours counted once",
    "a retried count-down answered by its record after the latch was opened and closed again",
    "a Java count-down in doubt",
    "a count-down of an open latch",
    "closed again after opening",
    "opened by our delete",
    "opened by a Java delete",
    "a count-down of a key that is not a latch",
    "a Java delete removed a key that is not a latch",
    // The BUSY/LOADING step.
    "a count-down re-sent after BUSY counted once",
    "a count-down re-sent after LOADING ran",
    // The restart step.
    "a restart opened a closed latch",
    "a count-down cut off by a restart found the latch open",
    "a count-down whose record a restart lost counted again in a later closing (the layout's limit)",
    // Late count-downs (strays).
    "a stray count-down ran after its client gave up",
    "a stray count-down counted in a closing made after its client gave up",
    "a count-down whose stray never ran was counted by its re-sent copy",
    // Time.
    "a re-sent copy found its record after the clock moved",
    "records expired",
];

/// What another program writes under the latch's name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Clobber {
    /// A hash.
    Hash,
    /// A string that is not a number.
    Text,
    /// A string that is a number to Lua's `tonumber` but not an integer to Redis's `DECR`
    /// (`2.0`; `" 2"`, `0x2`, `2e0`, `02` alike): not a latch for Redis and Redisson (whose
    /// `DECR` and `Long` parsing refuse it). Found by this checker: the first
    /// `lua/redisson_latch_*.lua` read the count with `tonumber` and took it for a latch at
    /// 2 (the count read 2, a set said "already closed", a delete removed it and published
    /// `0`), and a count-down wrote its record, then failed in `DECR` (an error reply after
    /// a write; a copy of it re-sent after a lost reply then found that record once the
    /// latch was real, and never counted). The scripts now read a count as `DECR` does
    /// (`count_of`).
    Decimal,
}

impl Clobber {
    fn command(self, key: &[u8]) -> Vec<Vec<u8>> {
        let key = key.to_vec();
        match self {
            Clobber::Hash => vec![b"HSET".to_vec(), key, b"f".to_vec(), b"v".to_vec()],
            Clobber::Text => vec![b"SET".to_vec(), key, b"not a latch".to_vec()],
            Clobber::Decimal => vec![b"SET".to_vec(), key, b"2.0".to_vec()],
        }
    }
}

/// The parties and bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    /// Clients of this library (the Redisson-layout handle).
    pub clients: usize,
    /// Our count-downs in all.
    pub count_downs: u8,
    /// Our closings (`try_set_count(COUNT)`) in all.
    pub sets: u8,
    /// Our deletes in all.
    pub deletes: u8,
    /// The Java peer's `trySetCount(JAVA_COUNT)`, `countDown` and `delete`, in all.
    pub java_sets: u8,
    pub java_count_downs: u8,
    pub java_deletes: u8,
    /// Lost replies in all (ours re-sent; a Java count-down's leaves it in doubt).
    pub faults: u8,
    /// Writes of the latch's key by another program, in all, and what it writes.
    pub clobbers: u8,
    pub clobber_kinds: &'static [Clobber],
    /// `BUSY`/`LOADING` replies in all.
    pub busy: u8,
    /// Restarts that lose all data, in all.
    pub restarts: u8,
    /// Count-downs that time out before they run (a stray), in all.
    pub timeouts: u8,
    /// Clock moves of [`ADVANCE`] in all (while a count-down of ours is in flight).
    pub advances: u8,
    /// Jumps past every record's expiry (with nothing of ours in flight), in all.
    pub idles: u8,
    /// Steps beyond the run's depth.
    pub extra_depth: usize,
}

const NONE: Config = Config {
    name: "",
    clients: 2,
    count_downs: 0,
    sets: 0,
    deletes: 0,
    java_sets: 0,
    java_count_downs: 0,
    java_deletes: 0,
    faults: 0,
    clobbers: 0,
    clobber_kinds: &[],
    busy: 0,
    restarts: 0,
    timeouts: 0,
    advances: 0,
    idles: 0,
    extra_depth: 0,
};

/// `kinds` and the decimal string (see [`Clobber::Decimal`]).
fn clobber_kinds(kinds: &'static [Clobber]) -> &'static [Clobber] {
    match kinds {
        [Clobber::Text] => &[Clobber::Text, Clobber::Decimal],
        _ => &[Clobber::Hash, Clobber::Text, Clobber::Decimal],
    }
}

pub fn configs() -> Vec<Config> {
    vec![
        Config {
            name: "redisson latch: two clients and a Java peer, lost replies",
            count_downs: 4,
            sets: 2,
            java_sets: 1,
            java_count_downs: 2,
            faults: 2,
            ..NONE
        },
        Config {
            name: "redisson latch: two clients and a Java peer, deletes, clobbers",
            count_downs: 3,
            sets: 1,
            deletes: 1,
            java_sets: 1,
            java_count_downs: 1,
            java_deletes: 1,
            faults: 1,
            clobbers: 1,
            clobber_kinds: clobber_kinds(&[Clobber::Hash, Clobber::Text]),
            ..NONE
        },
        Config {
            name: "redisson latch: two clients, a restart with data loss, BUSY/LOADING, a lost reply",
            count_downs: 3,
            sets: 2,
            java_count_downs: 1,
            faults: 1,
            busy: 2,
            restarts: 1,
            ..NONE
        },
        Config {
            name: "redisson latch: two clients and a Java peer, late count-downs (strays), a lost reply",
            count_downs: 3,
            sets: 1,
            java_sets: 1,
            java_count_downs: 1,
            faults: 1,
            timeouts: 2,
            ..NONE
        },
        Config {
            name: "redisson latch: two clients and a Java peer, late count-downs (strays), a restart",
            count_downs: 3,
            sets: 2,
            java_count_downs: 1,
            restarts: 1,
            timeouts: 1,
            ..NONE
        },
        Config {
            name: "redisson latch: two clients and a Java peer, time moves, records expire",
            count_downs: 3,
            sets: 2,
            java_count_downs: 1,
            faults: 1,
            advances: 2,
            idles: 1,
            ..NONE
        },
        Config {
            name: "redisson latch: a client and a Java peer, a clobber, a restart, a stray, a lost reply",
            clients: 1,
            count_downs: 3,
            sets: 1,
            deletes: 1,
            java_sets: 1,
            java_count_downs: 1,
            java_deletes: 1,
            faults: 1,
            clobbers: 1,
            clobber_kinds: clobber_kinds(&[Clobber::Text]),
            restarts: 1,
            timeouts: 1,
            ..NONE
        },
    ]
}

/// The milestones each configuration must reach at the default bound.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    match name {
        "redisson latch: two clients and a Java peer, lost replies" => vec![
            "opened by our count-down",
            "opened by a Java count-down",
            "a Java closing opened by our count-down",
            "our closing opened by a Java count-down",
            "a retried count-down of ours counted once",
            "a retried count-down answered by its record after the latch was opened and closed again",
            "a Java count-down in doubt",
            "a count-down of an open latch",
            "closed again after opening",
        ],
        "redisson latch: two clients and a Java peer, deletes, clobbers" => vec![
            "opened by our count-down",
            "a count-down of an open latch",
            "opened by our delete",
            "opened by a Java delete",
            "a count-down of a key that is not a latch",
            "a Java delete removed a key that is not a latch",
            "a retried count-down answered by its record after the latch was opened and closed again",
        ],
        "redisson latch: two clients, a restart with data loss, BUSY/LOADING, a lost reply" => {
            vec![
                "opened by our count-down",
                "opened by a Java count-down",
                "a retried count-down of ours counted once",
                "a count-down re-sent after BUSY counted once",
                "a count-down re-sent after LOADING ran",
                "a restart opened a closed latch",
                "a count-down cut off by a restart found the latch open",
                "a count-down whose record a restart lost counted again in a later closing (the layout's limit)",
            ]
        }
        "redisson latch: two clients and a Java peer, late count-downs (strays), a lost reply" => {
            vec![
                "opened by our count-down",
                "a retried count-down of ours counted once",
                "a stray count-down ran after its client gave up",
                "a stray count-down counted in a closing made after its client gave up",
                "a count-down whose stray never ran was counted by its re-sent copy",
                "a retried count-down answered by its record after the latch was opened and closed again",
            ]
        }
        "redisson latch: two clients and a Java peer, late count-downs (strays), a restart" => {
            vec![
                "opened by our count-down",
                "a restart opened a closed latch",
                "a stray count-down ran after its client gave up",
                "a count-down whose stray never ran was counted by its re-sent copy",
            ]
        }
        "redisson latch: a client and a Java peer, a clobber, a restart, a stray, a lost reply" => {
            vec![
                "opened by our count-down",
                "opened by a Java count-down",
                "opened by our delete",
                "opened by a Java delete",
                "a count-down of a key that is not a latch",
                "a Java delete removed a key that is not a latch",
                "a restart opened a closed latch",
                "a count-down cut off by a restart found the latch open",
                "a count-down whose record a restart lost counted again in a later closing (the layout's limit)",
                "a stray count-down ran after its client gave up",
                "a stray count-down counted in a closing made after its client gave up",
                "a retried count-down answered by its record after the latch was opened and closed again",
            ]
        }
        "redisson latch: two clients and a Java peer, time moves, records expire" => vec![
            "opened by our count-down",
            "a retried count-down of ours counted once",
            "a re-sent copy found its record after the clock moved",
            "records expired",
        ],
        _ => Vec::new(),
    }
}

pub fn keys() -> LatchKeys {
    LatchKeys::redisson("p", false, "l", RECORD_MS)
}

/// The core's view of a model client: the model clock, no randomness.
struct ModelEnv(Millis);

impl Env for ModelEnv {
    fn now(&self) -> Millis {
        self.0
    }
    fn jitter(&mut self) -> u64 {
        0
    }
    fn next_id(&mut self) -> std::sync::Arc<str> {
        "".into()
    }
}

/// A count-down in flight: its request id, the library's re-send machine, the call it
/// asked to send, and what Redis answered once a copy ran.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CountDown {
    pub request: String,
    pub resend: Resend,
    pub call: Option<Call>,
    /// When it started (its re-send window and its record's lifetime run from here on).
    pub started_at: Millis,
    /// The reply of the copy that ran last, and the count right after it (0: open;
    /// `None`: the key is not a latch).
    pub ran: Option<(Reply, Option<u64>)>,
    pub sleeping: bool,
    /// A reply was lost or a copy timed out (a copy may have run): its caller is in doubt.
    pub retried: bool,
    /// A copy was refused with `BUSY` / with `LOADING` (it did not run) and re-sent since.
    pub busied: bool,
    pub loading: bool,
    /// A restart dropped a copy (not yet run, or its reply).
    pub cut_off: bool,
    /// When a copy counted (`None`: none did).
    pub counted_at: Option<Millis>,
    /// The closing it counted in is gone since (opened, deleted, lost, overwritten).
    pub counted_in_gone: bool,
    /// A restart lost its record since a copy counted.
    pub record_lost: bool,
    /// A stray copy of it never ran (its connection went away).
    pub stray_dropped: bool,
}

/// A copy of a count-down its client gave up on (timed out), still on the connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Stray {
    pub call: Call,
    /// The latch was closed again (a set) after the client gave up on it.
    pub closed_since: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    pub ids: RequestIds,
    pub flight: Option<CountDown>,
    /// Copies it gave up on, oldest first: each runs, if at all, before its next request.
    pub strays: Vec<Stray>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub ks: Keyspace,
    pub now: Millis,
    pub clients: Vec<Client>,
    pub count_downs: u8,
    pub sets: u8,
    pub deletes: u8,
    pub java_sets: u8,
    pub java_count_downs: u8,
    pub java_deletes: u8,
    pub faults: u8,
    pub clobbers: u8,
    pub busy: u8,
    pub restarts: u8,
    pub timeouts: u8,
    pub advances: u8,
    pub idles: u8,
    /// Redis restarted at least once (a transient refusal is then `LOADING`).
    pub restarted: bool,
    /// The count the latch's current closing was made with (0: no closing lives).
    pub closed_with: u64,
    /// Count-downs (ours by request id, Java's as `java<n>`) that counted in the current
    /// closing; empty once that closing is gone.
    pub applied: Vec<String>,
    /// The record keys (as the core named them: the call's third key) of our count-downs
    /// that counted, while no restart or expiry took them: every key but the latch must
    /// be one of them.
    pub recorded: Vec<String>,
    /// Another program's key is under the latch's name (a clobber; gone once deleted).
    pub foreign: bool,
    /// The latch was opened (by any step) at least once.
    pub opened: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A client closes the latch with [`COUNT`] (runs at once: a set is not re-sent).
    Set(usize),
    /// A client deletes the latch (runs at once).
    Delete(usize),
    /// A client starts a count-down.
    CountDown(usize),
    Run(usize),
    Deliver(usize),
    LoseReply(usize),
    /// Redis answers a client's count-down with `BUSY` (`LOADING` after a restart): it
    /// does not run it.
    Busy(usize),
    Resume(usize),
    /// A client's count-down, sent and not yet run, times out: the copy stays on the
    /// connection (a stray) and the client's `Resend` decides what follows.
    TimeOut(usize),
    /// A client's oldest stray runs (late, but before anything it sent after).
    ExecuteStray(usize),
    /// A client's oldest stray never runs (its connection went away).
    DropStray(usize),
    /// The Java peer's `trySetCount(JAVA_COUNT)`.
    JavaSet,
    /// The Java peer's `countDown` (`lost`: its reply is lost; it is not re-sent).
    JavaCountDown {
        lost: bool,
    },
    /// The Java peer's `delete`.
    JavaDelete,
    /// Another program writes the latch's key.
    Clobber(Clobber),
    /// Redis restarts and loses all data; every connection drops.
    Restart,
    /// The clock moves by [`ADVANCE`].
    Advance,
    /// Nothing of ours in flight: the clock runs past every record's expiry.
    Idle,
}

#[derive(Default)]
pub struct Effects {
    pub milestones: Vec<usize>,
    pub violation: Option<(&'static str, String)>,
}

impl Effects {
    fn fail(&mut self, property: &'static str, message: String) {
        debug_assert!(PROPERTIES.contains(&property));
        if self.violation.is_none() {
            self.violation = Some((property, message));
        }
    }

    fn reach(&mut self, milestone: &str) {
        let index = MILESTONES
            .iter()
            .position(|m| *m == milestone)
            .expect("a known milestone");
        self.milestones.push(index);
    }
}

type Published = Vec<(Vec<u8>, Vec<u8>)>;

pub struct World {
    runner: ScriptRunner,
    scripts: Scripts,
    keys: LatchKeys,
    /// `count_call`'s replies by what is under the latch's name (the one key it reads),
    /// so that the reading checked in every state runs once per distinct latch.
    counts: RefCell<HashMap<Option<String>, (Reply, Published)>>,
}

impl World {
    pub fn new(scripts: Scripts) -> Self {
        World {
            runner: ScriptRunner::new(),
            scripts,
            keys: keys(),
            counts: RefCell::new(HashMap::new()),
        }
    }

    /// Reads the count as `CountDownLatch::count` does (`count_call`, read-only).
    fn read_count(&self, ks: &mut Keyspace, now: Millis) -> (Reply, Published) {
        let latch = raw(ks, &self.keys, now);
        if let Some(known) = self.counts.borrow().get(&latch) {
            return known.clone();
        }
        let read = self.run(&count_call(&self.keys), ks, now);
        self.counts.borrow_mut().insert(latch, read.clone());
        read
    }

    /// Runs one of our calls: its reply and what it published.
    fn run(&self, call: &Call, ks: &mut Keyspace, now: Millis) -> (Reply, Published) {
        let keys: Vec<Vec<u8>> = call.keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let args: Vec<Vec<u8>> = call.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let source = self.scripts.source(call.script);
        let reply = self.runner.eval(source, &keys, &args, ks, now);
        (reply, std::mem::take(&mut ks.published))
    }

    /// Runs one of the Java peer's scripts (KEYS = the latch and its channel): its reply
    /// and what it published.
    fn run_java(
        &self,
        source: &str,
        args: &[&str],
        ks: &mut Keyspace,
        now: Millis,
    ) -> (Reply, Published) {
        let keys = [&self.keys.key, &self.keys.channel].map(|k| k.as_bytes().to_vec());
        let args: Vec<Vec<u8>> = args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let reply = self.runner.eval(source, &keys, &args, ks, now);
        (reply, std::mem::take(&mut ks.published))
    }
}

/// The latch's count in Redis (0: open, no key); `None` when it is not a latch (not a
/// string holding an integer >= 1, as Redis's `DECR` and Redisson read it).
fn count_in(ks: &Keyspace, keys: &LatchKeys, now: Millis) -> Option<u64> {
    let key = keys.key.as_bytes();
    if ks.pexpire_at(key, now).is_none() {
        return Some(0);
    }
    let n = parse_i64(ks.get_str(key, now)?)?;
    (n >= 1).then_some(n as u64)
}

/// What is under the latch's name, as it is (for "left as it was").
fn raw(ks: &Keyspace, keys: &LatchKeys, now: Millis) -> Option<String> {
    let key = keys.key.as_bytes();
    ks.pexpire_at(key, now)?;
    Some(match (ks.get_str(key, now), ks.hash(key, now)) {
        (Some(s), _) => format!("string {:?}", String::from_utf8_lossy(s)),
        (_, Some(h)) => format!(
            "hash {:?}",
            (h.iter())
                .map(|(f, v)| (String::from_utf8_lossy(f), String::from_utf8_lossy(v)))
                .collect::<Vec<_>>()
        ),
        _ => "another type".into(),
    })
}

/// The publishes a step must make on the latch's channel: `0` for an opening, `1` for a
/// closing.
fn expect_published(keys: &LatchKeys, message: Option<&str>) -> Published {
    message
        .map(|m| (keys.channel.as_bytes().to_vec(), m.as_bytes().to_vec()))
        .into_iter()
        .collect()
}

fn check_published(
    fx: &mut Effects,
    keys: &LatchKeys,
    what: &str,
    published: &Published,
    message: Option<&str>,
) {
    let expected = expect_published(keys, message);
    if *published != expected {
        let show = |p: &Published| -> Vec<(String, String)> {
            p.iter()
                .map(|(c, m)| {
                    (
                        String::from_utf8_lossy(c).into_owned(),
                        String::from_utf8_lossy(m).into_owned(),
                    )
                })
                .collect()
        };
        fx.fail(
            "waiters are woken",
            format!(
                "{what} published {:?}, expected {:?}",
                show(published),
                show(&expected)
            ),
        );
    }
}

impl State {
    pub fn initial(config: &Config) -> Self {
        // Every copy meets its record and every re-send stays within its bound (see the
        // header): the clock moves only `advances * ADVANCE` within one count-down.
        let horizon = Millis::from(config.advances) * ADVANCE;
        assert!(horizon + max_pause() < resend_window());
        assert!(horizon < RECORD_MS);
        State {
            ks: Keyspace::default(),
            now: START,
            clients: (0..config.clients)
                .map(|i| Client {
                    ids: RequestIds::new(format!("c{i}")),
                    flight: None,
                    strays: Vec::new(),
                })
                .collect(),
            count_downs: config.count_downs,
            sets: config.sets,
            deletes: config.deletes,
            java_sets: config.java_sets,
            java_count_downs: config.java_count_downs,
            java_deletes: config.java_deletes,
            faults: config.faults,
            clobbers: config.clobbers,
            busy: config.busy,
            restarts: config.restarts,
            timeouts: config.timeouts,
            advances: config.advances,
            idles: config.idles,
            restarted: false,
            closed_with: 0,
            applied: Vec::new(),
            recorded: Vec::new(),
            foreign: false,
            opened: false,
        }
    }

    pub fn steps(&self, config: &Config) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut in_flight = false;
        for (c, client) in self.clients.iter().enumerate() {
            let strays = !client.strays.is_empty();
            in_flight |= strays || client.flight.is_some();
            if strays {
                steps.push(Step::ExecuteStray(c));
                steps.push(Step::DropStray(c));
            }
            match &client.flight {
                None => {
                    if self.sets > 0 {
                        steps.push(Step::Set(c));
                    }
                    if self.deletes > 0 {
                        steps.push(Step::Delete(c));
                    }
                    if self.count_downs > 0 {
                        steps.push(Step::CountDown(c));
                    }
                }
                Some(CountDown { sleeping: true, .. }) => steps.push(Step::Resume(c)),
                // Its connection runs (or loses) the strays before it.
                Some(CountDown { ran: None, .. }) if !strays => {
                    steps.push(Step::Run(c));
                    if self.busy > 0 {
                        steps.push(Step::Busy(c));
                    }
                    if self.timeouts > 0 {
                        steps.push(Step::TimeOut(c));
                    }
                }
                Some(CountDown { ran: None, .. }) => {}
                Some(CountDown { ran: Some(_), .. }) => {
                    steps.push(Step::Deliver(c));
                    if self.faults > 0 {
                        steps.push(Step::LoseReply(c));
                    }
                }
            }
        }
        if self.java_sets > 0 {
            steps.push(Step::JavaSet);
        }
        if self.java_count_downs > 0 {
            steps.push(Step::JavaCountDown { lost: false });
            if self.faults > 0 {
                steps.push(Step::JavaCountDown { lost: true });
            }
        }
        if self.java_deletes > 0 {
            steps.push(Step::JavaDelete);
        }
        if self.clobbers > 0 {
            steps.extend(config.clobber_kinds.iter().map(|&kind| Step::Clobber(kind)));
        }
        if self.restarts > 0 {
            steps.push(Step::Restart);
        }
        if self.advances > 0 && in_flight {
            steps.push(Step::Advance);
        }
        if self.idles > 0 && !in_flight && !self.recorded.is_empty() {
            steps.push(Step::Idle);
        }
        steps
    }

    /// The latch's current closing is gone (opened, deleted, lost, overwritten): the
    /// count-downs in flight that counted in it are remembered as such.
    fn closing_gone(&mut self) {
        for client in &mut self.clients {
            if let Some(flight) = &mut client.flight
                && self.applied.contains(&flight.request)
            {
                flight.counted_in_gone = true;
            }
        }
        self.applied.clear();
        self.closed_with = 0;
    }

    /// The latch was closed with `count` (by either side).
    fn closed(&mut self, count: u64, fx: &mut Effects) {
        if self.opened {
            fx.reach("closed again after opening");
        }
        self.applied.clear();
        self.closed_with = count;
        for client in &mut self.clients {
            client.strays.iter_mut().for_each(|s| s.closed_since = true);
        }
    }

    pub fn apply(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = Effects::default();
        let keys = &world.keys;
        let now = self.now;
        let count_before = count_in(&self.ks, keys, now);
        let raw_before = raw(&self.ks, keys, now);
        match *step {
            Step::Set(_) => {
                self.sets -= 1;
                let before = count_before;
                let (reply, published) = world.run(&set_call(keys, COUNT), &mut self.ks, now);
                let after = count_in(&self.ks, keys, now);
                let closed = before == Some(0);
                let expected = match before {
                    Some(0) => LatchReply::Done(true),
                    Some(_) => LatchReply::Done(false),
                    None => LatchReply::NotALatch,
                };
                match decode_done(&reply) {
                    Ok(said) if said != expected => fx.fail(
                        "reports are true",
                        format!("set of a latch at {before:?} said {said:?}"),
                    ),
                    Ok(_) => {}
                    Err(err) => fx.fail("reports are true", err),
                }
                if closed {
                    if after != Some(COUNT) {
                        fx.fail(
                            "reports are true",
                            format!("set of an open latch left it at {after:?}"),
                        );
                    }
                    self.closed(COUNT, &mut fx);
                } else if raw(&self.ks, keys, now) != raw_before {
                    fx.fail(
                        if before.is_some() {
                            "counted once"
                        } else {
                            "no garbage"
                        },
                        format!(
                            "set of a latch at {before:?} changed it: {raw_before:?} -> {:?}",
                            raw(&self.ks, keys, now)
                        ),
                    );
                }
                check_published(&mut fx, keys, "our set", &published, closed.then_some("1"));
            }
            Step::Delete(_) => {
                self.deletes -= 1;
                let before = count_before;
                let (reply, published) = world.run(&delete_call(keys), &mut self.ks, now);
                let after = count_in(&self.ks, keys, now);
                let expected = match before {
                    Some(0) => LatchReply::Done(false),
                    Some(_) => LatchReply::Done(true),
                    None => LatchReply::NotALatch,
                };
                match decode_done(&reply) {
                    Ok(said) if said != expected => fx.fail(
                        "reports are true",
                        format!("delete of a latch at {before:?} said {said:?}"),
                    ),
                    Ok(_) => {}
                    Err(err) => fx.fail("reports are true", err),
                }
                let opened = matches!(before, Some(1..));
                match before {
                    Some(_) if after != Some(0) => fx.fail(
                        "reports are true",
                        format!("delete of a latch at {before:?} left it at {after:?}"),
                    ),
                    None if raw(&self.ks, keys, now) != raw_before => fx.fail(
                        "no garbage",
                        format!(
                            "delete wrote over a key that is not a latch: {raw_before:?} -> {:?}",
                            raw(&self.ks, keys, now)
                        ),
                    ),
                    _ => {}
                }
                if opened {
                    fx.reach("opened by our delete");
                    self.opened = true;
                    self.closing_gone();
                }
                check_published(
                    &mut fx,
                    keys,
                    "our delete",
                    &published,
                    opened.then_some("0"),
                );
            }
            Step::CountDown(c) => {
                self.count_downs -= 1;
                let client = &mut self.clients[c];
                let request = client.ids.next_id();
                // As `CountDownLatch::count_down`: the call, re-sent until the bound.
                let call = count_down_call(keys, &request);
                let give_up_at = count_down_give_up_at(now, WATCHDOG, RESPONSE);
                let mut resend = Resend::new(call, give_up_at);
                let call = match resend.start(&mut ModelEnv(now), &mut ()) {
                    Next::Send(call) => Some(call),
                    _ => None,
                };
                client.flight = Some(CountDown {
                    request: request.to_string(),
                    resend,
                    call,
                    started_at: now,
                    ran: None,
                    sleeping: false,
                    retried: false,
                    busied: false,
                    loading: false,
                    cut_off: false,
                    counted_at: None,
                    counted_in_gone: false,
                    record_lost: false,
                    stray_dropped: false,
                });
            }
            Step::Run(c) => {
                let flight = self.clients[c].flight.as_ref().expect("a count-down");
                let call = flight.call.clone().expect("a call to run");
                let ran = self.run_copy(c, &call, world, &mut fx);
                let flight = self.clients[c].flight.as_mut().expect("a count-down");
                flight.ran = Some(ran);
            }
            Step::Deliver(c) => {
                let flight = self.clients[c].flight.take().expect("a count-down");
                let (reply, after) = flight.ran.clone().expect("ran");
                let mut resend = flight.resend;
                // As the driver: an error reply reaches the core as a failure.
                let next = match &reply {
                    Reply::Error(text) => resend.on_failure(
                        &mut ModelEnv(now),
                        &mut (),
                        Failure::from_server_error(text),
                    ),
                    reply => resend.on_reply(&mut ModelEnv(now), &mut (), reply),
                };
                let resent = match next {
                    Next::Done(Ok(resent)) => resent,
                    other => {
                        // An error reply was flagged when the copy ran.
                        if fx.violation.is_none() {
                            fx.fail(
                                "reports are true",
                                format!("count-down {} ended with {other:?}", flight.request),
                            );
                        }
                        return fx;
                    }
                };
                // What the library reports is what Redis had right after that copy ran.
                let expected = match after {
                    Some(n) => LatchReply::Remaining(n),
                    None => LatchReply::NotALatch,
                };
                match decode_count_down(&resent.reply) {
                    Ok(said) if said != expected => fx.fail(
                        "reports are true",
                        format!(
                            "count-down {} reported {said:?}; Redis had {}",
                            flight.request,
                            after.map_or("not a latch".into(), |n| n.to_string())
                        ),
                    ),
                    Ok(_) => {}
                    Err(err) => fx.fail("reports are true", err),
                }
            }
            Step::LoseReply(c) => {
                self.faults -= 1;
                self.fail_call(c, Failure::Lost, &mut fx);
            }
            Step::Busy(c) => {
                self.busy -= 1;
                let text = if self.restarted {
                    "LOADING Redis is loading the dataset in memory"
                } else {
                    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT."
                };
                self.fail_call(c, Failure::from_server_error(text), &mut fx);
            }
            Step::Resume(c) => {
                let flight = self.clients[c].flight.as_mut().expect("a count-down");
                flight.sleeping = false;
                flight.call = match flight.resend.resume(&mut ModelEnv(now), &mut ()) {
                    Next::Send(call) => Some(call),
                    _ => None,
                };
            }
            Step::TimeOut(c) => {
                self.timeouts -= 1;
                let flight = self.clients[c].flight.as_ref().expect("a count-down");
                let call = flight.call.clone().expect("a call on the wire");
                self.clients[c].strays.push(Stray {
                    call,
                    closed_since: false,
                });
                self.fail_call(c, Failure::TimedOut, &mut fx);
            }
            Step::ExecuteStray(c) => {
                let stray = self.clients[c].strays.remove(0);
                fx.reach("a stray count-down ran after its client gave up");
                let before = count_in(&self.ks, keys, now);
                // Its reply reaches nobody: the client gave up on it.
                let (_, after) = self.run_copy(c, &stray.call, world, &mut fx);
                if stray.closed_since && matches!((before, after), (Some(b), Some(a)) if a < b) {
                    fx.reach(
                        "a stray count-down counted in a closing made after its client gave up",
                    );
                }
            }
            Step::DropStray(c) => {
                self.clients[c].strays.remove(0);
                if let Some(flight) = &mut self.clients[c].flight {
                    flight.stray_dropped = true;
                }
            }
            Step::JavaSet => {
                self.java_sets -= 1;
                let count = JAVA_COUNT.to_string();
                let (reply, published) = world.run_java(
                    JAVA_TRY_SET_COUNT,
                    &["1", &count, "PUBLISH"],
                    &mut self.ks,
                    now,
                );
                let closed = reply == Reply::Int(1);
                if closed {
                    self.closed(JAVA_COUNT, &mut fx);
                }
                check_published(
                    &mut fx,
                    keys,
                    "Redisson's trySetCount",
                    &published,
                    closed.then_some("1"),
                );
            }
            Step::JavaCountDown { lost } => {
                self.java_count_downs -= 1;
                let id = format!("java{}", self.java_count_downs);
                if lost {
                    self.faults -= 1;
                    // Redisson does not re-send it: its caller is in doubt, and that is all.
                    fx.reach("a Java count-down in doubt");
                }
                let (_, published) =
                    world.run_java(JAVA_COUNT_DOWN, &["0", "PUBLISH"], &mut self.ks, now);
                let after = count_in(&self.ks, keys, now);
                let mut opened = false;
                match (count_before, after) {
                    (Some(b @ 1..), Some(a)) => {
                        // Sent once, so it counts once (its one copy runs here).
                        if a + 1 != b {
                            fx.fail(
                                "counted once",
                                format!("Redisson's count-down took {b} to {a}"),
                            );
                        }
                        self.applied.push(id);
                        if a == 0 {
                            opened = true;
                            self.opened = true;
                            fx.reach("opened by a Java count-down");
                            if self.closed_with == COUNT {
                                fx.reach("our closing opened by a Java count-down");
                            }
                            self.closing_gone();
                        }
                    }
                    (before, after) if before != after => fx.fail(
                        "no garbage",
                        format!("Redisson's count-down took {before:?} to {after:?}"),
                    ),
                    _ => {}
                }
                check_published(
                    &mut fx,
                    keys,
                    "Redisson's count-down",
                    &published,
                    opened.then_some("0"),
                );
            }
            Step::JavaDelete => {
                self.java_deletes -= 1;
                let (reply, published) =
                    world.run_java(JAVA_DELETE, &["1", "PUBLISH"], &mut self.ks, now);
                let deleted = reply == Reply::Int(1);
                if deleted {
                    match count_before {
                        Some(1..) => {
                            fx.reach("opened by a Java delete");
                            self.opened = true;
                            self.closing_gone();
                        }
                        None => {
                            fx.reach("a Java delete removed a key that is not a latch");
                            self.foreign = false;
                        }
                        Some(_) => unreachable!("no key, nothing deleted"),
                    }
                }
                // Redisson's delete publishes 1 (its new-count message), not 0.
                check_published(
                    &mut fx,
                    keys,
                    "Redisson's delete",
                    &published,
                    deleted.then_some("1"),
                );
            }
            Step::Clobber(kind) => {
                self.clobbers -= 1;
                let key = keys.key.as_bytes();
                // Another program's key replaces whatever was there.
                self.ks.command(now, &[b"DEL".to_vec(), key.to_vec()]);
                self.ks.command(now, &kind.command(key));
                self.foreign = true;
                if matches!(count_before, Some(1..)) {
                    self.closing_gone();
                }
            }
            Step::Restart => {
                self.restarts -= 1;
                if matches!(count_before, Some(n) if n >= 1) {
                    fx.reach("a restart opened a closed latch");
                    self.opened = true;
                }
                self.ks.flush_all();
                self.restarted = true;
                self.foreign = false;
                self.closing_gone();
                self.recorded.clear();
                for client in &mut self.clients {
                    if let Some(flight) = &mut client.flight {
                        if flight.counted_at.is_some() {
                            flight.record_lost = true;
                        }
                        // Every connection drops: a stray never runs.
                        if !client.strays.is_empty() {
                            flight.stray_dropped = true;
                        }
                    }
                    client.strays.clear();
                }
                for c in 0..self.clients.len() {
                    // What is on the wire (a request not yet run, a reply not yet
                    // delivered) is lost, and the client cannot tell which.
                    let on_the_wire = |f: &CountDown| f.call.is_some() && !f.sleeping;
                    if self.clients[c].flight.as_ref().is_some_and(on_the_wire) {
                        self.fail_call(c, Failure::Lost, &mut fx);
                        if let Some(flight) = &mut self.clients[c].flight {
                            flight.cut_off = true;
                        }
                    }
                }
            }
            Step::Advance => {
                self.advances -= 1;
                self.now += ADVANCE;
            }
            Step::Idle => {
                self.idles -= 1;
                // Every record was written at or before now and lives RECORD_MS at most.
                self.now += RECORD_MS + 1;
                self.recorded.clear();
                fx.reach("records expired");
            }
        }
        self.ks.expire(self.now);
        // A closed latch opens only by its last count-down (checked where one runs), a
        // delete or a restart (its data lost).
        if let Some(n @ 1..) = count_before
            && count_in(&self.ks, keys, self.now) == Some(0)
            && !matches!(
                step,
                Step::Run(_)
                    | Step::ExecuteStray(_)
                    | Step::JavaCountDown { .. }
                    | Step::Delete(_)
                    | Step::JavaDelete
                    | Step::Restart
            )
        {
            fx.fail(
                "opens exactly at zero",
                format!("{step:?} opened the latch at {n}"),
            );
        }
        self.check(world, &mut fx);
        fx
    }

    /// A count-down of client `c` got no reply (`failure`): its `Resend` decides.
    fn fail_call(&mut self, c: usize, failure: Failure, fx: &mut Effects) {
        let now = self.now;
        let transient = matches!(failure, Failure::Transient(_));
        let (lost, loading) = (
            failure.may_have_run(),
            matches!(&failure, Failure::Transient(text) if text.starts_with("LOADING")),
        );
        let flight = self.clients[c].flight.as_mut().expect("a count-down");
        let next = flight
            .resend
            .on_failure(&mut ModelEnv(now), &mut (), failure);
        if let Next::SleepUntil(_) = next {
            flight.ran = None;
            flight.sleeping = true;
            flight.retried |= lost;
            flight.busied |= transient && !loading;
            flight.loading |= loading;
            return;
        }
        self.resent(c, next, fx);
    }

    /// The count-down's `Resend` of client `c` answered `next` to a failure: it must pause
    /// and re-send (its bound is never reached), never end.
    fn resent(&mut self, c: usize, next: Next<<Resend as Machine>::Outcome>, fx: &mut Effects) {
        let flight = self.clients[c].flight.as_mut().expect("a count-down");
        match next {
            Next::SleepUntil(_) => {
                flight.ran = None;
                flight.sleeping = true;
            }
            other => {
                let request = flight.request.clone();
                self.clients[c].flight = None;
                fx.fail(
                    "counted once",
                    format!(
                        "count-down {request} ended without a copy that ran (it must be \
                         re-sent until one runs): {other:?}"
                    ),
                );
            }
        }
    }

    /// Runs a copy `call` of client `c`'s count-down (sent now, or a stray) and checks
    /// what it did: the reply and the count right after it.
    fn run_copy(
        &mut self,
        c: usize,
        call: &Call,
        world: &World,
        fx: &mut Effects,
    ) -> (Reply, Option<u64>) {
        let keys = &world.keys;
        let now = self.now;
        let flight = self.clients[c].flight.clone().expect("a count-down");
        // Within its re-send window, so its record (if it counted) lives (see the header).
        assert!(now < flight.started_at + resend_window());
        let before = count_in(&self.ks, keys, now);
        let raw_before = raw(&self.ks, keys, now);
        let (reply, published) = world.run(call, &mut self.ks, now);
        let after = count_in(&self.ks, keys, now);
        if let Reply::Error(text) = &reply {
            let written: Vec<String> = (self.ks.keys(now).iter())
                .map(|k| String::from_utf8_lossy(k).into_owned())
                .collect();
            fx.fail(
                "reports are true",
                format!(
                    "count-down {} answered an error ({text}); the latch went {raw_before:?} \
                     -> {:?}; keys now {written:?}",
                    flight.request,
                    raw(&self.ks, keys, now)
                ),
            );
        }
        // A first copy, or one whose record a restart lost.
        let first = flight.counted_at.is_none() || flight.record_lost;
        if flight.loading {
            fx.reach("a count-down re-sent after LOADING ran");
        }
        let mut opened = false;
        match (before, after) {
            (Some(0), Some(0)) => {
                fx.reach("a count-down of an open latch");
                if flight.cut_off && self.restarted {
                    fx.reach("a count-down cut off by a restart found the latch open");
                }
            }
            (Some(b), Some(a)) if first => {
                // A first copy on a closed latch counts one, and opens it at one.
                if a + 1 != b {
                    fx.fail(
                        "counted once",
                        format!("count-down {} took {b} to {a}", flight.request),
                    );
                }
                if flight.counted_at.is_some() {
                    // Its record went with a restart: the documented limit, only for a
                    // count-down whose caller is in doubt.
                    if !flight.retried {
                        fx.fail(
                            "counted once",
                            format!(
                                "count-down {} counted twice without a lost reply",
                                flight.request
                            ),
                        );
                    }
                    fx.reach(
                        "a count-down whose record a restart lost counted again in a later closing (the layout's limit)",
                    );
                }
                if flight.busied {
                    fx.reach("a count-down re-sent after BUSY counted once");
                }
                if flight.stray_dropped && self.clients[c].strays.is_empty() {
                    fx.reach("a count-down whose stray never ran was counted by its re-sent copy");
                }
                self.applied.push(flight.request.clone());
                let record = call.keys.get(2).map_or("", |k| k).to_string();
                if !self.recorded.contains(&record) {
                    self.recorded.push(record);
                }
                let mine = self.clients[c].flight.as_mut().expect("a count-down");
                mine.counted_at = Some(now);
                mine.record_lost = false;
                mine.counted_in_gone = false;
                if a == 0 {
                    if b != 1 {
                        fx.fail(
                            "opens exactly at zero",
                            format!("count-down {} opened it at {b}", flight.request),
                        );
                    }
                    opened = true;
                    self.opened = true;
                    fx.reach("opened by our count-down");
                    if self.closed_with == JAVA_COUNT {
                        fx.reach("a Java closing opened by our count-down");
                    }
                    self.closing_gone();
                }
            }
            (Some(b), Some(a)) => {
                // A copy of a count-down that counted: nothing changes, whichever closing
                // it meets.
                if a != b {
                    fx.fail(
                        "counted once",
                        format!(
                            "a copy of the count-down {} that counted took {b} to {a}{}",
                            flight.request,
                            if flight.counted_in_gone {
                                " (in a later closing)"
                            } else {
                                ""
                            }
                        ),
                    );
                } else if b >= 1 {
                    if flight.retried {
                        fx.reach("a retried count-down of ours counted once");
                    }
                    if flight.counted_in_gone {
                        fx.reach(
                            "a retried count-down answered by its record after the latch was opened and closed again",
                        );
                    }
                    if flight.counted_at.is_some_and(|at| at < now) {
                        fx.reach("a re-sent copy found its record after the clock moved");
                    }
                }
            }
            (None, None) => {
                // Another program's key: left as it was.
                if raw(&self.ks, keys, now) != raw_before {
                    fx.fail(
                        "no garbage",
                        format!(
                            "count-down {} wrote over a key that is not a latch: \
                             {raw_before:?} -> {:?}",
                            flight.request,
                            raw(&self.ks, keys, now)
                        ),
                    );
                }
                fx.reach("a count-down of a key that is not a latch");
            }
            _ => fx.fail(
                "no garbage",
                format!(
                    "count-down {} made the latch {before:?} -> {after:?}",
                    flight.request
                ),
            ),
        }
        check_published(
            fx,
            keys,
            &format!("count-down {}", flight.request),
            &published,
            opened.then_some("0"),
        );
        (reply, after)
    }

    fn check(&mut self, world: &World, fx: &mut Effects) {
        let keys = &world.keys;
        let now = self.now;
        let latch = keys.key.as_bytes();
        let count = count_in(&self.ks, keys, now);
        for key in self.ks.keys(now) {
            let expiry = self.ks.pexpire_at(&key, now).flatten();
            if key == latch {
                if count.is_some() && expiry.is_some() {
                    fx.fail("no garbage", format!("the latch has an expiry {expiry:?}"));
                }
                if count.is_none() && !self.foreign {
                    fx.fail(
                        "no garbage",
                        format!(
                            "the latch is {:?}, and nobody else wrote it",
                            raw(&self.ks, keys, now)
                        ),
                    );
                }
                continue;
            }
            // Else a record, of a count-down of ours that counted.
            let text = String::from_utf8_lossy(&key).into_owned();
            if !self.recorded.contains(&text) {
                fx.fail(
                    "no garbage",
                    format!(
                        "{text}: not the record of a count-down that counted (or one a \
                         restart or its expiry took)"
                    ),
                );
            }
            match expiry {
                None => fx.fail("no garbage", format!("the record {text} has no expiry")),
                Some(at) if at > now + RECORD_MS => fx.fail(
                    "no garbage",
                    format!(
                        "the record {text} lives {} ms, longer than {RECORD_MS}",
                        at - now
                    ),
                ),
                Some(_) => {}
            }
        }
        // Closed with `closed_with`, each distinct count-down applied counts one.
        if let Some(n @ 1..) = count
            && n + self.applied.len() as u64 != self.closed_with
        {
            fx.fail(
                "counted once",
                format!(
                    "count {n} after {} distinct count-downs of {}",
                    self.applied.len(),
                    self.closed_with
                ),
            );
        }
        // Reading the count (`CountDownLatch::count`, read-only) says what Redis has.
        let (reply, published) = world.read_count(&mut self.ks, now);
        let expected = match count {
            Some(n) => LatchCount::Remaining(n),
            None if self.ks.hash(latch, now).is_some() => LatchCount::NotALatch("hash".into()),
            None => LatchCount::NotALatch("string".into()),
        };
        match decode_count(&reply) {
            Ok(said) if said != expected => fx.fail(
                "reports are true",
                format!("the count read {said:?}; Redis had {expected:?}"),
            ),
            Ok(_) => {}
            Err(err) => fx.fail("reports are true", err),
        }
        if !published.is_empty() {
            fx.fail(
                "waiters are woken",
                "reading the count published".to_string(),
            );
        }
    }

    pub fn describe(&self, keys: &LatchKeys) -> String {
        let mut out = format!(
            "t+{} latch: {}",
            self.now - START,
            match count_in(&self.ks, keys, self.now) {
                Some(0) => "open".to_string(),
                Some(n) => format!("{n} (of {}: {:?})", self.closed_with, self.applied),
                None => format!("not a latch ({:?})", raw(&self.ks, keys, self.now)),
            }
        );
        if !self.recorded.is_empty() {
            out.push_str(&format!(" | records {:?}", self.recorded));
        }
        for (c, client) in self.clients.iter().enumerate() {
            if !client.strays.is_empty() {
                out.push_str(&format!(
                    " | client {c}: {} stray copies",
                    client.strays.len()
                ));
            }
            if let Some(flight) = &client.flight {
                out.push_str(&format!(
                    " | client {c}: count-down {} {}",
                    flight.request,
                    match (&flight.ran, flight.sleeping) {
                        (_, true) => "sleeping before a re-send".to_string(),
                        (None, _) => "sent".to_string(),
                        (Some((reply, _)), _) => format!("ran, reply {reply:?} on its way"),
                    }
                ));
            }
        }
        out
    }
}

/// The Redisson-layout latch's model, for the one checker (`tests/protocol/checker.rs`).
pub struct RedissonLatch;

impl Model for RedissonLatch {
    type Config = Config;
    type State = State;
    type Step = Step;
    type World = World;
    const MILESTONES: &'static [&'static str] = &MILESTONES;

    fn name(config: &Config) -> &'static str {
        config.name
    }
    fn initial(config: &Config) -> State {
        State::initial(config)
    }
    fn steps(state: &State, config: &Config) -> Vec<Step> {
        state.steps(config)
    }
    fn apply(state: &mut State, step: &Step, world: &World, _config: &Config) -> Stepped {
        let effects = state.apply(step, world);
        Stepped {
            milestones: effects.milestones,
            violations: effects.violation.into_iter().collect(),
        }
    }
    fn describe(state: &State) -> String {
        state.describe(&keys())
    }
    fn extra_depth(config: &Config) -> usize {
        config.extra_depth
    }
}
