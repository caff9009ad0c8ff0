//! The protocol checker of the count-down latch kept in Redisson's RCountDownLatch layout:
//! explores every interleaving of our clients' closings, count-downs (re-sent through lost
//! replies, timeouts with late copies and `BUSY`/`LOADING` by the library's own `Resend`)
//! and deletes, a Java peer's Redisson `trySetCount`/`countDown`/`delete` (Redisson's own
//! scripts), restarts that lose every key, another program's writes of the latch's key and
//! the clock running past the count-downs' records, up to a bound, with the library's own
//! `protocol::latch` calls and decoders and the real `lua/redisson_latch_*.lua` (see
//! `tests/protocol/redissonlatchmodel.rs`), and checks the properties in every state.
//!
//! `CHECK_DEPTH=n` runs deeper; `CHECK_CONFIG=<part of a name>` runs only the matching
//! configurations; `CHECK_REPLAY='<config>:<path>'` replays a counterexample step by step
//! (see `tests/protocol/checker.rs`).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redissonlatchmodel.rs"]
mod redissonlatchmodel;

use std::process::ExitCode;

use checker::Checker;
use redissonlatchmodel::{PROPERTIES, RedissonLatch, Scripts, World};

fn main() -> ExitCode {
    Checker::<RedissonLatch> {
        title: "Redisson-layout count-down latch checker: real lua/redisson_latch_*.lua + \
                Redisson's own scripts + redis_locks_protocol",
        test: "redisson_latch_check",
        release_depth: redissonlatchmodel::DEFAULT_DEPTH,
        debug_depth: 9,
        max_states: 3_000_000,
        properties: &PROPERTIES,
        configs: redissonlatchmodel::configs(),
        must_reach: redissonlatchmodel::must_reach,
        world: || World::new(Scripts::real()),
    }
    .run()
}
