//! Teeth for the checker of the read-write lock kept in Redisson's RReadWriteLock layout
//! (`tests/redisson_rw_check.rs`): each test plants one known defect, in a copy of a real
//! script or in the Rust core, and asserts that the checker finds a counterexample to the
//! property the defect breaks, at the default bound.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redissonrwmodel.rs"]
mod redissonrwmodel;

use redis_locks_protocol::ScriptId;
use redissonrwmodel::{Config, DEFAULT_DEPTH, RedissonRw, Scripts, World};

/// The default configurations.
fn configs() -> Vec<Config> {
    redissonrwmodel::configs()
}

/// Explores the default configurations with `scripts` until one finds a violation.
fn counterexample(scripts: Scripts, depth: usize) -> Option<checker::Found> {
    let world = World::new(scripts);
    checker::counterexample::<RedissonRw>(&world, &configs(), depth, 3_000_000)
}

fn expect(scripts: Scripts, properties: &[&str]) {
    checker::expect_found(counterexample(scripts, DEFAULT_DEPTH), properties);
}

/// A read granted in write mode to an owner that does not hold the write.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_read_granted_beside_another_owners_write_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRwAcquire,
        "elseif not (mode == 'read' or (mode == 'write' and redis.call('HEXISTS', lock, write_field) == 1)) then",
        "elseif false then",
    );
    expect(scripts, &["readers-writers exclusion"]);
}

/// A write granted in read mode: over other owners' reads (and as an upgrade).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_write_granted_over_readers_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRwAcquire,
        "  elseif not mode then\n    writes = {{'HSET', lock, 'mode', 'write'}",
        "  elseif not mode or mode == 'read' then\n    writes = {{'HSET', lock, 'mode', 'write'}",
    );
    expect(scripts, &["readers-writers exclusion"]);
}

/// A read release that empties the lock without the message: Redisson's waiters sleep on.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_read_release_that_publishes_nothing_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRwRelease,
        "{publish, channel, message}, {'DEL', lock}}",
        "{'DEL', lock}}\n  if message == '1' then table.insert(writes, 2, {publish, channel, message}) end",
    );
    expect(scripts, &["waiters are woken"]);
}

/// A write release that empties the lock with the read release's message (`0`, one
/// waiter per process) instead of `1` (every waiter: the readers go in together).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_write_release_that_publishes_0_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRwRelease,
        "delete, message = true, '1'",
        "delete, message = true, '0'",
    );
    expect(scripts, &["waiters are woken"]);
}

/// A read release that keeps the hash and leaves its level's timeout key behind.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_read_release_that_keeps_its_timeout_key_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRwRelease,
        "if side == 'read' then\n  writes[#writes + 1] = {'DEL', timeout_prefix(owner) .. count}\nend\n",
        "",
    );
    expect(scripts, &["no orphans, no garbage"]);
}

/// A renewal that lengthens a reader's hash but not its timeout keys: the holder believes
/// the renewed lease while its key expires first.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_that_skips_the_timeout_keys_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRenew,
        "    for _, key in ipairs(levels) do\n      lengthen(key)\n    end\n",
        "",
    );
    expect(scripts, &["belief is true"]);
}

/// A re-entry or downgrade through a guard that takes the lock afresh when its owner's
/// holds are gone (a force-unlock or a restart took them before the guard was told).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_join_without_its_check_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRwAcquire,
        "if joins then",
        "if false then",
    );
    expect(
        scripts,
        &[
            "exactly once",
            "belief is true",
            "readers-writers exclusion",
        ],
    );
}

/// Sanity: the real scripts pass this file's configurations at a small bound
/// (`tests/redisson_rw_check.rs`, the checker, runs the full bound).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    assert_eq!(counterexample(Scripts::real(), 7), None);
}

/// The gap this checker found (see the model's header), planted back: a read give-back
/// that deletes its owner's top timeout key without giving its expiry to the shortest
/// remaining one leaves a younger read on an older read's key.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_give_back_that_leaves_a_read_on_a_shorter_key_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRwRelease,
        "if top > 0 and shortest and shortest_ttl < top then",
        "if false then",
    );
    let world = World::new(scripts);
    let config = redissonrwmodel::known_gap();
    let found = checker::counterexample::<RedissonRw>(&world, &[config], DEFAULT_DEPTH, 100_000);
    checker::expect_found(found, &["belief is true"]);
}

/// Defects planted in the Rust core (`redis_locks_protocol::planted`): the read-write
/// lock's own reply reader. Needs the `planted-defects` feature.
#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks_protocol::planted::{Defect, plant};

    /// A refused upgrade read as a wait: the owner would wait for its own read.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_refused_upgrade_read_as_a_wait_is_caught() {
        plant(Some(Defect::RedissonRwRefusalReadAsWait));
        let found = counterexample(Scripts::real(), DEFAULT_DEPTH);
        plant(None);
        checker::expect_found(found, &["readers-writers exclusion"]);
    }
}
