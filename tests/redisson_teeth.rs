//! Teeth for the checker of the lock kept in Redisson's RLock layout
//! (`tests/redisson_check.rs`): each test plants one known defect, in a copy of a real
//! script or in the Rust core, and asserts that the checker finds a counterexample to the
//! property the defect breaks, at the default bound.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redissonmodel.rs"]
mod redissonmodel;

use redis_locks_protocol::ScriptId;
use redissonmodel::{Config, DEFAULT_DEPTH, Redisson, Scripts, World};

/// Explores every default configuration with `scripts` until one finds a violation.
fn counterexample(scripts: Scripts, depth: usize) -> Option<checker::Found> {
    counterexample_in(&redissonmodel::configs(), scripts, depth)
}

/// Explores `configs` with `scripts` until one finds a violation.
fn counterexample_in(configs: &[Config], scripts: Scripts, depth: usize) -> Option<checker::Found> {
    let world = World::new(scripts);
    checker::counterexample::<Redisson>(&world, configs, depth, 3_000_000)
}

fn expect(scripts: Scripts, properties: &[&str]) {
    checker::expect_found(counterexample(scripts, DEFAULT_DEPTH), properties);
}

/// An acquire that ignores its record: a copy re-sent after a lost reply counts the hold
/// a second time.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_that_ignores_its_record_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonAcquire,
        "if redis.call('EXISTS', record) == 1 then",
        "if false then",
    );
    expect(scripts, &["exactly once"]);
}

/// An acquire that grants whoever asks, even while another owner's field is there.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_over_another_owner_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonAcquire,
        "if (kind == 'hash' or joins) and not mine then",
        "if joins and not mine then",
    );
    expect(scripts, &["never two holders"]);
}

/// A re-entry through a guard that takes the lock afresh when its owner's field is gone
/// (a force-unlock or a restart took the hold before the guard was told): the first
/// guard's release then takes the new count (the gap this checker found in the first
/// version of `reenter`).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_re_entry_that_takes_a_gone_hold_afresh_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonAcquire,
        "if (kind == 'hash' or joins) and not mine then",
        "if kind == 'hash' and not mine then",
    );
    expect(
        scripts,
        &["exactly once", "belief is true", "never two holders"],
    );
}

/// A fresh grant that leaves the hash without an expiry.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_without_expiry_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonAcquire,
        "local extend = not mine or redis.call('PTTL', lock) < lease",
        "local extend = mine and redis.call('PTTL', lock) < lease",
    );
    expect(scripts, &["no orphans, no garbage", "belief is true"]);
}

/// A give-back that does not look at its record's `released` mark: a copy re-sent after
/// a lost reply gives back a second count of a re-entered owner.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_give_back_that_ignores_the_released_mark_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRelease,
        "if done == 'released' then",
        "if false then",
    );
    expect(scripts, &["exactly once"]);
}

/// An abandoned acquire's give-back that does not ask whether that acquire was granted:
/// a waiter that gives up takes a count of its owner's other handle. Only two clients of
/// one explicit owner can reach it (a default handle's waiter has an owner of its own).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_abandoned_give_back_without_its_record_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRelease,
        "if abandoned and not done then",
        "if false then",
    );
    let world = World::new(scripts);
    let mut passed = Vec::new();
    for config in redissonmodel::configs() {
        let configs = std::slice::from_ref(&config);
        let found = checker::counterexample::<Redisson>(&world, configs, DEFAULT_DEPTH, 3_000_000);
        if config.owners.iter().all(Option::is_none) {
            assert_eq!(
                found, None,
                "{}: caught without an explicit owner",
                config.name
            );
            passed.push(config.name);
            continue;
        }
        println!("passed: {passed:?}");
        checker::expect_found(found, &["exactly once"]);
        return;
    }
    panic!("no configuration shares an owner");
}

/// A release that never publishes the unlock message: Redisson's waiters sleep on.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_release_that_publishes_nothing_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRelease,
        "  redis.call(publish, channel, '0')\n",
        "",
    );
    expect(scripts, &["waiters are woken"]);
}

/// A release that deletes the hash whatever the count: a partial release of a
/// re-entered owner ends its other holds.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_partial_release_that_deletes_the_hash_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRelease,
        "local last = count <= 1",
        "local last = true",
    );
    expect(scripts, &["exactly once", "belief is true"]);
}

/// A renewal that does not look for the owner's field: a hold a restart or a Redisson
/// force-unlock took (or a stray renewal that runs after the hash expired) is reported
/// current, and its holder is never told.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_without_the_field_check_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonRenew,
        "local alive = type(count) == 'string'",
        "local alive = true",
    );
    expect(scripts, &["losses are told"]);
}

/// Sanity: the real scripts pass this file's model at a small bound
/// (`tests/redisson_check.rs`, the checker, runs the full bound).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    assert_eq!(counterexample(Scripts::real(), 8), None);
}

/// Defects planted in the Rust core (`redis_locks_protocol::planted`), which this
/// checker runs: the Redisson layout's own reply reader and record naming, and the hold
/// bookkeeping, re-send machine, give-back reading and waiting loop it shares with the
/// sorted-set kinds. Each must be found at the default bound. Needs the
/// `planted-defects` feature.
#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks_protocol::planted::{Defect, plant};

    fn expect_core(defect: Defect, properties: &[&str]) {
        plant(Some(defect));
        let found = counterexample(Scripts::real(), DEFAULT_DEPTH);
        plant(None);
        println!("{defect:?}");
        checker::expect_found(found, properties);
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_wait_read_as_a_grant_is_caught() {
        expect_core(
            Defect::RedissonWaitReadAsGrant,
            &["belief is true", "never two holders"],
        );
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_record_named_by_the_owner_is_caught() {
        expect_core(
            Defect::RedissonRecordPerOwner,
            &["belief is true", "exactly once"],
        );
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn the_drift_margin_added_is_caught() {
        expect_core(Defect::DriftAdded, &["belief is true"]);
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_resend_that_moves_the_send_time_is_caught() {
        expect_core(Defect::ResendMovesSendTime, &["belief is true"]);
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_give_back_that_claims_a_gone_hold_is_caught() {
        expect_core(
            Defect::GiveBackClaimsGoneHold,
            &["release is true", "losses are told"],
        );
    }

    /// An acquire dropped or cancelled with its attempt in flight that gives back only
    /// what earlier attempts left (`Wait::give_back_if_dropped`): the hold that attempt
    /// took is nobody's.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_drop_that_forgets_its_attempt_in_flight_is_caught() {
        expect_core(
            Defect::DropForgetsAttemptInFlight,
            &["no orphans, no garbage"],
        );
    }
}
