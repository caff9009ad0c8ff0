//! The count-down latch's protocol model: clients that close the latch, count it down and
//! delete it, while replies are lost, Redis answers `BUSY`/`LOADING`, Redis restarts and
//! loses the latch, and count-downs are re-sent. Every call is built and every reply read
//! by the library's own `redis_locks_protocol::latch`, every server error is classified
//! by its `Failure::from_server_error`, every re-send is decided by its `resend::Resend`
//! (the machine `LockClient` drives for a count-down), and every call runs the real
//! `lua/latch_*.lua` in the embedded Lua against the keyspace model. A small breadth-first
//! explorer checks the properties in every state.
//!
//! Assumptions: one latch, one Redis; one count-down at a time per client (the library's
//! lane); a copy of a count-down that the client gave up on never runs after the client's
//! next request (one connection keeps its requests in order). A count-down's `Resend`
//! never reaches its bound (the library's is the watchdog timeout; the model's faults run
//! out long before it). Another program may write the latch's key as something else
//! (`Clobber`, a name clash): every call must then leave it as it is and report that it
//! is not a latch.
//!
//! `BUSY`/`LOADING` (configurations with `busy`): a count-down sent and not yet run is
//! answered with a transient server error instead of running (`BUSY` before any restart,
//! `LOADING` after one). The model hands the error's text to the library's classifier and
//! the failure to the count-down's `Resend`, which must pause and re-send the same call.
//! A set or a delete is not re-sent (one `EVAL`): a `BUSY` there reaches the caller as the
//! error and changes nothing, so it is no step.
//!
//! Restarts (configurations with `restarts`): Redis restarts without persistence and loses
//! every key. A latch has no expiry, so this is data loss, and the latch reads as open
//! afterwards (no key: count 0, as in Redisson). Every connection drops: a count-down sent
//! and not yet run never runs, a reply on its way is lost, and the client sees
//! `Failure::Lost` (it cannot tell whether its copy ran); a count-down pausing before a
//! re-send is not touched. A copy re-sent after the restart finds no latch: the script
//! counts nothing, writes nothing and answers 0, which is true (the latch is open).
//!
//! Late count-downs (configurations with `timeouts`): a count-down sent and not yet run
//! times out (`Failure::TimedOut`, what the library's call sender reports after the
//! response timeout); its `Resend` pauses and re-sends it, and the copy it gave up on stays
//! on the connection, a *stray*. A stray runs late (`ExecuteStray`), after any steps of the
//! other clients (a delete, a new closing, other count-downs), but before the client's
//! re-sent copy (one connection keeps its requests in order), or never (`DropStray`: its
//! connection went away before Redis read it). A restart drops every stray with its
//! connection. A stray's reply reaches nobody (its sender gave up on it). The exactly-once
//! record must make the re-sent copy harmless after a stray that counted, and a stray that
//! runs after the latch was closed again counts in that closing (its caller is in doubt,
//! as after a lost reply: the same documented limit).
//!
//! What the properties say with data loss. "Opens exactly at zero": a closed latch
//! becomes open only by the count-down that finds count 1 (the last one), by a delete, or
//! by a restart (its data lost); a set, a copy of an applied count-down or anything else
//! that opens it is a violation. "Counted once": while one closing of the latch lives,
//! each count-down counts at most once in it (its count is [`COUNT`] minus the distinct
//! count-downs applied to it), and a count-down is re-sent through lost replies and
//! `BUSY`/`LOADING` until a copy runs (it never ends without one). The record that makes
//! a re-sent copy harmless lives in the latch's hash, so it goes with the latch: a
//! count-down whose copy counted in a closing that is gone since (opened by that very
//! count-down, deleted, or lost in a restart) and whose reply was lost may count once in
//! the next closing when its re-sent copy arrives after that closing. That is the
//! documented limit (the README's "One limit", no closing id in the protocol); the model
//! allows it only for a count-down that lost a reply, and reaches it as a milestone.
//! "Reports are true": every reply the library reads says what Redis had (for a
//! count-down, right after the copy that answered ran). "No garbage": only the latch's
//! hash exists, with a count of at least 1 and the clients' records.
#![allow(dead_code)]

use redis_locks_protocol::latch::{
    LatchKeys, LatchReply, count_down_call, decode_count_down, decode_done, delete_call, set_call,
};
use redis_locks_protocol::resend::Resend;
use redis_locks_protocol::{Call, Env, Failure, Machine, Millis, Next, Reply, RequestIds};

use crate::checker::{Model, Stepped};
use crate::keyspace::Keyspace;
use crate::lua::ScriptRunner;

/// The count a latch is closed with.
pub const COUNT: u64 = 2;

/// The properties, checked in every state.
pub const PROPERTIES: [&str; 4] = [
    "counted once",
    "opens exactly at zero",
    "reports are true",
    "no garbage",
];

/// What the configurations must reach (each its own list: [`must_reach`]).
pub const MILESTONES: [&str; 14] = [
    "opened by counting down",
    "a retried count-down counted once",
    "a count-down of an open latch",
    "closed again after opening",
    "a count-down of a key that is not a latch",
    // The BUSY/LOADING step.
    "a count-down re-sent after BUSY counted once",
    "a count-down re-sent after LOADING ran",
    // The restart step.
    "a restart opened a closed latch",
    "a count-down cut off by a restart found the latch open",
    "closed again after a restart and opened by counting down",
    "a count-down in doubt counted again in the next closing (the documented limit)",
    // Late count-downs (strays).
    "a stray count-down ran after its client gave up",
    "a stray count-down counted in a closing made after its client gave up",
    "a count-down whose stray never ran was counted by its re-sent copy",
];

pub use crate::lua::Scripts;

/// The server errors of the `Busy` step, as Redis words them.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSCRIPT.";
pub const LOADING: &str = "LOADING Redis is loading the dataset in memory";

/// How the model's driver hands a `BUSY`/`LOADING` reply to the count-down's `Resend`.
/// `Library` is what `src/drive.rs` does (the error, classified by
/// `Failure::from_server_error`, to `on_failure`). A defect in that classification is
/// planted in the core itself (`planted::Defect::TransientReadAsPermanent`,
/// `LoadingReadAsPermanent`) and reached through `Library`. `BusyReadAsReply` stays a
/// planted driver defect: whether a top-level error reply becomes a `Failure` or a
/// `Reply` is decided in the driver (`src/scripts.rs`), outside the sans-IO core, so no
/// core defect expresses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    Library,
    /// The error reply is handed to `on_reply`, as if the script had run and answered.
    BusyReadAsReply,
}

/// The parties and bounds of one exploration.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    pub clients: usize,
    /// Count-downs in all.
    pub count_downs: u8,
    /// Closings (`try_set_count(COUNT)`) in all.
    pub sets: u8,
    /// Deletes in all.
    pub deletes: u8,
    /// Lost replies in all.
    pub faults: u8,
    /// Writes of the latch's key as a string by another program, in all.
    pub clobbers: u8,
    /// `BUSY`/`LOADING` replies in all.
    pub busy: u8,
    /// Restarts that lose all data, in all.
    pub restarts: u8,
    /// Count-downs that time out before they run (their copy stays on the connection, a
    /// stray), in all.
    pub timeouts: u8,
}

pub fn configs() -> Vec<Config> {
    vec![
        Config {
            name: "latch: two clients, lost replies",
            clients: 2,
            count_downs: 5,
            sets: 2,
            deletes: 0,
            faults: 3,
            clobbers: 0,
            busy: 0,
            restarts: 0,
            timeouts: 0,
        },
        Config {
            name: "latch: three clients, a delete",
            clients: 3,
            count_downs: 4,
            sets: 2,
            deletes: 1,
            faults: 2,
            clobbers: 1,
            busy: 0,
            restarts: 0,
            timeouts: 0,
        },
        Config {
            name: "latch: two clients, a restart with data loss, BUSY/LOADING, a lost reply",
            clients: 2,
            count_downs: 4,
            sets: 2,
            deletes: 0,
            faults: 1,
            clobbers: 0,
            busy: 2,
            restarts: 1,
            timeouts: 0,
        },
        Config {
            name: "latch: three clients, a restart, BUSY, a delete",
            clients: 3,
            count_downs: 3,
            sets: 2,
            deletes: 1,
            faults: 0,
            clobbers: 0,
            busy: 1,
            restarts: 1,
            timeouts: 0,
        },
        Config {
            name: "latch: two clients, late count-downs (strays), a delete, a lost reply",
            clients: 2,
            count_downs: 4,
            sets: 2,
            deletes: 1,
            faults: 1,
            clobbers: 0,
            busy: 0,
            restarts: 0,
            timeouts: 2,
        },
        Config {
            name: "latch: two clients, late count-downs (strays), a restart",
            clients: 2,
            count_downs: 3,
            sets: 2,
            deletes: 0,
            faults: 0,
            clobbers: 0,
            busy: 0,
            restarts: 1,
            timeouts: 1,
        },
    ]
}

/// The milestones each configuration must reach at the default bound.
pub fn must_reach(name: &str) -> Vec<&'static str> {
    match name {
        "latch: two clients, lost replies" => MILESTONES[..4].to_vec(),
        "latch: three clients, a delete" => vec![
            "opened by counting down",
            "a count-down of an open latch",
            "closed again after opening",
            "a count-down of a key that is not a latch",
        ],
        "latch: two clients, a restart with data loss, BUSY/LOADING, a lost reply" => vec![
            "opened by counting down",
            "a retried count-down counted once",
            "a count-down re-sent after BUSY counted once",
            "a count-down re-sent after LOADING ran",
            "a restart opened a closed latch",
            "a count-down cut off by a restart found the latch open",
            "closed again after a restart and opened by counting down",
            "a count-down in doubt counted again in the next closing (the documented limit)",
        ],
        "latch: two clients, late count-downs (strays), a delete, a lost reply" => vec![
            "opened by counting down",
            "a retried count-down counted once",
            "closed again after opening",
            "a stray count-down ran after its client gave up",
            "a stray count-down counted in a closing made after its client gave up",
            "a count-down whose stray never ran was counted by its re-sent copy",
            "a count-down in doubt counted again in the next closing (the documented limit)",
        ],
        "latch: two clients, late count-downs (strays), a restart" => vec![
            "opened by counting down",
            "a restart opened a closed latch",
            "a stray count-down ran after its client gave up",
            "a count-down whose stray never ran was counted by its re-sent copy",
        ],
        "latch: three clients, a restart, BUSY, a delete" => vec![
            "opened by counting down",
            "a count-down re-sent after BUSY counted once",
            "a restart opened a closed latch",
            "a count-down cut off by a restart found the latch open",
            "closed again after a restart and opened by counting down",
            "a count-down in doubt counted again in the next closing (the documented limit)",
        ],
        _ => Vec::new(),
    }
}

pub fn keys() -> LatchKeys {
    LatchKeys::native("p", 0, false, "l")
}

/// The core's view of a model client: no clock to speak of, no randomness.
struct ModelEnv;

impl Env for ModelEnv {
    fn now(&self) -> Millis {
        0
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
    /// The reply of the copy that ran last, and the count right after it (0: open;
    /// `None`: the key is not a latch).
    pub ran: Option<(Reply, Option<u64>)>,
    pub sleeping: bool,
    /// A reply was lost (a copy may have run).
    pub retried: bool,
    /// A copy was refused with `BUSY` / with `LOADING` (it did not run) and re-sent since.
    pub busied: bool,
    pub loading: bool,
    /// A restart dropped a copy (not yet run, or its reply).
    pub cut_off: bool,
    /// A copy counted in a closing of the latch that is gone since.
    pub counted_in_gone: bool,
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
    pub clients: Vec<Client>,
    pub count_downs: u8,
    pub sets: u8,
    pub deletes: u8,
    pub faults: u8,
    pub clobbers: u8,
    pub busy: u8,
    pub restarts: u8,
    pub timeouts: u8,
    /// Redis restarted at least once (a transient refusal is then `LOADING`).
    pub restarted: bool,
    /// Count-down requests applied (counted) in the latch's current closing; empty once
    /// that closing is gone (opened, deleted, lost, overwritten).
    pub applied: Vec<String>,
    /// Whether the latch was opened by counting down at least once.
    pub opened: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A client closes the latch with [`COUNT`] (runs at once: a set is not re-sent).
    Set(usize),
    /// A client deletes the latch (runs at once).
    Delete(usize),
    /// Another program writes the latch's key as a string (a name clash).
    Clobber,
    /// A client starts a count-down.
    CountDown(usize),
    Run(usize),
    Deliver(usize),
    LoseReply(usize),
    /// Redis answers a client's count-down with `BUSY` (`LOADING` after a restart): it
    /// does not run it.
    Busy(usize),
    /// Redis restarts and loses all data; every connection drops.
    Restart,
    Resume(usize),
    /// A client's count-down, sent and not yet run, times out: the copy stays on the
    /// connection (a stray) and the client's `Resend` decides what follows.
    TimeOut(usize),
    /// A client's oldest stray runs (late, but before anything it sent after).
    ExecuteStray(usize),
    /// A client's oldest stray never runs (its connection went away).
    DropStray(usize),
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

pub struct World {
    runner: ScriptRunner,
    scripts: Scripts,
    driver: Driver,
}

impl World {
    pub fn new(scripts: Scripts, driver: Driver) -> Self {
        World {
            runner: ScriptRunner::new(),
            scripts,
            driver,
        }
    }

    fn run(&self, call: &Call, ks: &mut Keyspace) -> Reply {
        let keys: Vec<Vec<u8>> = call.keys.iter().map(|k| k.as_bytes().to_vec()).collect();
        let args: Vec<Vec<u8>> = call.args.iter().map(|a| a.as_bytes().to_vec()).collect();
        let reply = self
            .runner
            .eval(self.scripts.source(call.script), &keys, &args, ks, 0);
        ks.published.clear();
        reply
    }
}

/// The latch's count in Redis (0: open, no key); `None` when it is not a latch.
fn count_in(ks: &Keyspace) -> Option<u64> {
    match ks.hash(b"p:{l}:latch", 0) {
        None if ks.keys(0).is_empty() => Some(0),
        None => None,
        Some(fields) => fields
            .get(b"count".as_slice())
            .and_then(|count| std::str::from_utf8(count).ok()?.parse().ok()),
    }
}

impl State {
    pub fn initial(config: &Config) -> Self {
        State {
            ks: Keyspace::default(),
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
            faults: config.faults,
            clobbers: config.clobbers,
            busy: config.busy,
            restarts: config.restarts,
            timeouts: config.timeouts,
            restarted: false,
            applied: Vec::new(),
            opened: false,
        }
    }

    pub fn steps(&self) -> Vec<Step> {
        let mut steps = Vec::new();
        for (c, client) in self.clients.iter().enumerate() {
            let strays = !client.strays.is_empty();
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
        if self.clobbers > 0 {
            steps.push(Step::Clobber);
        }
        if self.restarts > 0 {
            steps.push(Step::Restart);
        }
        steps
    }

    /// The latch's current closing is gone (opened, deleted, lost, overwritten): the
    /// count-downs that counted in it are remembered as such while in flight.
    fn closing_gone(&mut self) {
        for client in &mut self.clients {
            if let Some(flight) = &mut client.flight
                && self.applied.contains(&flight.request)
            {
                flight.counted_in_gone = true;
            }
        }
        self.applied.clear();
    }

    pub fn apply(&mut self, step: &Step, world: &World) -> Effects {
        let mut fx = Effects::default();
        let keys = keys();
        let count_before = count_in(&self.ks);
        match *step {
            Step::Set(_) => {
                self.sets -= 1;
                let before = count_before;
                let reply = world.run(&set_call(&keys, COUNT), &mut self.ks);
                match decode_done(&reply) {
                    Ok(LatchReply::Done(true)) => {
                        if before != Some(0) {
                            fx.fail(
                                "reports are true",
                                format!("set closed a latch at {before:?}"),
                            );
                        }
                        if self.opened {
                            fx.reach("closed again after opening");
                        }
                        self.applied.clear();
                        for client in &mut self.clients {
                            client.strays.iter_mut().for_each(|s| s.closed_since = true);
                        }
                    }
                    Ok(LatchReply::Done(false)) if before == Some(0) => fx.fail(
                        "reports are true",
                        "set of an open latch said closed".into(),
                    ),
                    Ok(LatchReply::NotALatch) if before.is_some() => fx.fail(
                        "reports are true",
                        format!("set of a latch at {before:?} said not a latch"),
                    ),
                    Ok(other) if before.is_none() && other != LatchReply::NotALatch => fx.fail(
                        "reports are true",
                        format!("set of a key that is not a latch said {other:?}"),
                    ),
                    Ok(_) => {}
                    Err(err) => fx.fail("reports are true", err),
                }
            }
            Step::Delete(_) => {
                self.deletes -= 1;
                let before = count_before;
                let reply = world.run(&delete_call(&keys), &mut self.ks);
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
                if count_in(&self.ks) != before {
                    self.closing_gone();
                }
            }
            Step::Clobber => {
                self.clobbers -= 1;
                let key = keys.key.as_bytes().to_vec();
                self.ks
                    .command(0, &[b"SET".to_vec(), key, b"not a latch".to_vec()]);
                self.closing_gone();
            }
            Step::CountDown(c) => {
                self.count_downs -= 1;
                let client = &mut self.clients[c];
                let request = client.ids.next_id();
                let mut resend = Resend::new(count_down_call(&keys, &request), Millis::MAX);
                let call = match resend.start(&mut ModelEnv, &mut ()) {
                    Next::Send(call) => Some(call),
                    _ => None,
                };
                client.flight = Some(CountDown {
                    request: request.to_string(),
                    resend,
                    call,
                    ran: None,
                    sleeping: false,
                    retried: false,
                    busied: false,
                    loading: false,
                    cut_off: false,
                    counted_in_gone: false,
                    stray_dropped: false,
                });
            }
            Step::Run(c) => self.run(c, world, &mut fx),
            Step::Deliver(c) => {
                let flight = self.clients[c].flight.take().expect("a count-down");
                let (reply, after) = flight.ran.clone().expect("ran");
                let mut resend = flight.resend;
                let resent = match resend.on_reply(&mut ModelEnv, &mut (), &reply) {
                    Next::Done(Ok(resent)) => resent,
                    other => panic!("a re-send that got a reply: {other:?}"),
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
                self.fail_call(c, Failure::Lost, world, &mut fx);
            }
            Step::Busy(c) => {
                self.busy -= 1;
                let text = if self.restarted { LOADING } else { BUSY };
                match world.driver {
                    Driver::Library => {
                        self.fail_call(c, Failure::from_server_error(text), world, &mut fx)
                    }
                    Driver::BusyReadAsReply => {
                        let flight = self.clients[c].flight.as_mut().expect("a count-down");
                        let next = flight.resend.on_reply(
                            &mut ModelEnv,
                            &mut (),
                            &Reply::Error(text.into()),
                        );
                        self.resent(c, next, &mut fx);
                    }
                }
            }
            Step::Restart => {
                self.restarts -= 1;
                if matches!(count_before, Some(n) if n >= 1) {
                    fx.reach("a restart opened a closed latch");
                }
                self.ks.flush_all();
                self.restarted = true;
                self.closing_gone();
                // Every connection drops: a stray never runs.
                for client in &mut self.clients {
                    if !client.strays.is_empty()
                        && let Some(flight) = &mut client.flight
                    {
                        flight.stray_dropped = true;
                    }
                    client.strays.clear();
                }
                for c in 0..self.clients.len() {
                    // Every connection drops: what is on the wire (a request not yet run,
                    // a reply not yet delivered) is lost, and the client cannot tell which.
                    let on_the_wire = |f: &CountDown| f.call.is_some() && !f.sleeping;
                    if self.clients[c].flight.as_ref().is_some_and(on_the_wire) {
                        self.fail_call(c, Failure::Lost, world, &mut fx);
                        if let Some(flight) = &mut self.clients[c].flight {
                            flight.cut_off = true;
                        }
                    }
                }
            }
            Step::TimeOut(c) => {
                self.timeouts -= 1;
                let flight = self.clients[c].flight.as_ref().expect("a count-down");
                let call = flight.call.clone().expect("a call on the wire");
                self.clients[c].strays.push(Stray {
                    call,
                    closed_since: false,
                });
                self.fail_call(c, Failure::TimedOut, world, &mut fx);
            }
            Step::ExecuteStray(c) => {
                let stray = self.clients[c].strays.remove(0);
                fx.reach("a stray count-down ran after its client gave up");
                let before = count_in(&self.ks);
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
            Step::Resume(c) => {
                let flight = self.clients[c].flight.as_mut().expect("a count-down");
                flight.sleeping = false;
                flight.call = match flight.resend.resume(&mut ModelEnv, &mut ()) {
                    Next::Send(call) => Some(call),
                    _ => None,
                };
            }
        }
        // A closed latch opens only by its last count-down (checked in `run`), a delete or
        // a restart (its data lost).
        if let Some(n @ 1..) = count_before
            && count_in(&self.ks) == Some(0)
            && !matches!(
                step,
                Step::Run(_) | Step::ExecuteStray(_) | Step::Delete(_) | Step::Restart
            )
        {
            fx.fail(
                "opens exactly at zero",
                format!("{step:?} opened the latch at {n}"),
            );
        }
        self.check(&mut fx);
        fx
    }

    /// A count-down of client `c` got no reply (`failure`): its `Resend` decides.
    fn fail_call(&mut self, c: usize, failure: Failure, _world: &World, fx: &mut Effects) {
        let transient = matches!(failure, Failure::Transient(_));
        let (lost, loading) = (
            failure.may_have_run(),
            matches!(&failure, Failure::Transient(text) if text.starts_with("LOADING")),
        );
        let flight = self.clients[c].flight.as_mut().expect("a count-down");
        let next = flight.resend.on_failure(&mut ModelEnv, &mut (), failure);
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

    /// The count-down's `Resend` of client `c` answered `next` to a failure or a refusal:
    /// it must pause and re-send (its bound is never reached), never end.
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

    fn run(&mut self, c: usize, world: &World, fx: &mut Effects) {
        let flight = self.clients[c].flight.as_ref().expect("a count-down");
        let call = flight.call.clone().expect("a call to run");
        let ran = self.run_copy(c, &call, world, fx);
        let flight = self.clients[c].flight.as_mut().expect("a count-down");
        flight.ran = Some(ran);
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
        let flight = self.clients[c].flight.clone().expect("a count-down");
        let before = count_in(&self.ks);
        let foreign = self.ks.get_str(b"p:{l}:latch", 0).map(<[u8]>::to_vec);
        let reply = world.run(call, &mut self.ks);
        let after = count_in(&self.ks);
        let first = !self.applied.contains(&flight.request);
        if flight.loading {
            fx.reach("a count-down re-sent after LOADING ran");
        }
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
                if flight.counted_in_gone {
                    // Its copy counted in a closing that is gone since: the documented
                    // limit, only for a count-down whose reply was lost.
                    if !flight.retried {
                        fx.fail(
                            "counted once",
                            format!(
                                "count-down {} counted in two closings without a lost reply",
                                flight.request
                            ),
                        );
                    }
                    fx.reach(
                        "a count-down in doubt counted again in the next closing (the documented limit)",
                    );
                }
                if flight.busied {
                    fx.reach("a count-down re-sent after BUSY counted once");
                }
                if flight.stray_dropped && self.clients[c].strays.is_empty() {
                    fx.reach("a count-down whose stray never ran was counted by its re-sent copy");
                }
                self.applied.push(flight.request.clone());
                if a == 0 {
                    if b != 1 {
                        fx.fail(
                            "opens exactly at zero",
                            format!("count-down {} opened it at {b}", flight.request),
                        );
                    }
                    self.opened = true;
                    fx.reach("opened by counting down");
                    if self.restarted {
                        fx.reach("closed again after a restart and opened by counting down");
                    }
                    self.closing_gone();
                }
            }
            (Some(b), Some(a)) => {
                // A copy of an applied count-down: nothing changes.
                if a != b {
                    fx.fail(
                        "counted once",
                        format!(
                            "a copy of the applied count-down {} took {b} to {a}",
                            flight.request
                        ),
                    );
                } else if flight.retried {
                    fx.reach("a retried count-down counted once");
                }
            }
            (None, None) => {
                // Another program's key: left as it was.
                if self.ks.get_str(b"p:{l}:latch", 0).map(<[u8]>::to_vec) != foreign {
                    fx.fail(
                        "no garbage",
                        format!(
                            "count-down {} wrote over a key that is not a latch",
                            flight.request
                        ),
                    );
                }
                fx.reach("a count-down of a key that is not a latch");
            }
            _ => fx.fail(
                "no garbage",
                format!("the latch is not a latch: {before:?} -> {after:?}"),
            ),
        }
        (reply, after)
    }

    fn check(&self, fx: &mut Effects) {
        // The latch's only key is its hash: "count" (>= 1) and the clients' records.
        for key in self.ks.keys(0) {
            if key != b"p:{l}:latch" {
                fx.fail(
                    "no garbage",
                    format!("unexpected key {}", String::from_utf8_lossy(&key)),
                );
            }
        }
        if let Some(fields) = self.ks.hash(b"p:{l}:latch", 0) {
            for (field, value) in fields {
                let ok = field.as_slice() == b"count"
                    && std::str::from_utf8(value)
                        .ok()
                        .and_then(|v| v.parse::<u64>().ok())
                        .is_some_and(|n| n >= 1)
                    || field.starts_with(b"\x01r");
                if !ok {
                    fx.fail(
                        "no garbage",
                        format!(
                            "field {} = {}",
                            String::from_utf8_lossy(field),
                            String::from_utf8_lossy(value)
                        ),
                    );
                }
            }
        }
        // Closed with COUNT, each distinct applied count-down counts one.
        if let Some(count) = count_in(&self.ks)
            && count > 0
            && count + self.applied.len() as u64 != COUNT
        {
            fx.fail(
                "counted once",
                format!(
                    "count {count} after {} distinct count-downs of {COUNT}",
                    self.applied.len()
                ),
            );
        }
    }

    pub fn describe(&self) -> String {
        let mut out = format!("latch: {:?}", count_in(&self.ks));
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

/// The count-down latch's model, for the one checker (`tests/protocol/checker.rs`). Its
/// world (`World::new(scripts, driver)`) names the driver: the library's, or a planted
/// driver defect for the teeth.
pub struct Latch;

impl Model for Latch {
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
    fn steps(state: &State, _config: &Config) -> Vec<Step> {
        state.steps()
    }
    fn apply(state: &mut State, step: &Step, world: &World, _config: &Config) -> Stepped {
        let effects = state.apply(step, world);
        Stepped {
            milestones: effects.milestones,
            violations: effects.violation.into_iter().collect(),
        }
    }
    fn describe(state: &State) -> String {
        state.describe()
    }
}
