//! Teeth for the read-write lock's checker (`tests/rw_check.rs`): each test plants one
//! known defect in a copy of a real script and asserts that the checker finds a
//! counterexample to the property the defect breaks. The fencing and upgrade teeth plant
//! defects that only the fenced, explicit-owner and re-entry steps reach (the other
//! configurations never ask for a token, name an owner or join a hold).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/rwmodel.rs"]
mod rwmodel;

use redis_locks::protocol::ScriptId;
use rwmodel::Scripts;

/// Explores every default configuration with `scripts` until one finds a violation.
fn counterexample(scripts: Scripts, depth: usize) -> Option<checker::Found> {
    counterexample_in(rwmodel::configs(), scripts, depth)
}

/// The configurations with restarts, force-unlocks or `BUSY` replies.
fn wipe_configs() -> Vec<rwmodel::Config> {
    let configs = rwmodel::configs().into_iter();
    let wipes = |c: &rwmodel::Config| c.restarts + c.force_unlocks + c.busy > 0;
    let wipe: Vec<rwmodel::Config> = configs.filter(wipes).collect();
    assert!(!wipe.is_empty());
    wipe
}

/// Explores `configs` with `scripts` until one finds a violation.
fn counterexample_in(
    configs: Vec<rwmodel::Config>,
    scripts: Scripts,
    depth: usize,
) -> Option<checker::Found> {
    let world = rwmodel::World::new(scripts);
    checker::counterexample::<rwmodel::Rw>(&world, &configs, depth, 2_000_000)
}

fn expect(scripts: Scripts, depth: usize, properties: &[&str]) {
    checker::expect_found(counterexample(scripts, depth), properties);
}

/// A read granted without looking at the write holds: a reader joins another owner's
/// writer.
#[test]
fn a_read_that_ignores_the_writer_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RwAcquire,
        "if writer_owner and writer_owner ~= owner then",
        "if writer_owner and writer_owner ~= owner and mode == 'w' then",
    );
    expect(scripts, 6, &["never a writer with another holder"]);
}

/// A release that gives back the first hold of the set, whoever's it is.
#[test]
fn a_release_that_ignores_the_hold_id_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RwRelease,
        "local set, member = nil, ARGV[1] .. ':1'",
        "local set, member = nil, ARGV[1] .. ':1'\n\
         if ARGV[2] ~= '' then\n\
           local first = redis.call('ZRANGE', ARGV[2] == 'w' and W or R, 0, 0)[1]\n\
           if first then member = first end\n\
         end",
    );
    expect(
        scripts,
        8,
        &["a release removes only its own hold", "release is true"],
    );
}

/// The configurations with restarts, force-unlocks and `BUSY` have teeth of their own: a
/// read that ignores the writer is caught there too (the wiped beliefs are left out, not
/// every belief).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_wipe_configurations_catch_a_read_that_ignores_the_writer() {
    let scripts = Scripts::real().planted(
        ScriptId::RwAcquire,
        "if writer_owner and writer_owner ~= owner then",
        "if writer_owner and writer_owner ~= owner and mode == 'w' then",
    );
    let found = counterexample_in(wipe_configs(), scripts, 8);
    println!("{found:?}");
    let (property, message, replay) = found.expect("the checker found no counterexample");
    assert_eq!(
        property, "never a writer with another holder",
        "{message}; {replay}"
    );
}

/// The configurations with fenced handles, explicit owners, re-entries through guards or
/// renewals racing their owner's calls.
fn new_step_configs() -> Vec<rwmodel::Config> {
    let configs = rwmodel::configs().into_iter();
    let new = |c: &rwmodel::Config| c.fenced || c.explicit || c.reentries > 0 || c.racing_renewals;
    let new: Vec<rwmodel::Config> = configs.filter(new).collect();
    assert!(!new.is_empty());
    new
}

/// The default bound of `tests/rw_check.rs` in a release build.
const CHECK_DEPTH: usize = 12;

/// A defect that only the fenced, explicit-owner and re-entry steps reach: found by those
/// configurations at the checker's default bound.
fn expect_new(scripts: Scripts, properties: &[&str]) {
    let found = counterexample_in(new_step_configs(), scripts, CHECK_DEPTH);
    checker::expect_found(found, properties);
}

/// A fresh fenced write that does not move the counter on (`max(counter, time)`): two
/// fresh writes within one tick of Redis's clock get the same token.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_fencing_counter_not_incremented_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RwAcquire,
        "token = math.max(last + 1, floor)",
        "token = math.max(last, floor)",
    );
    expect_new(scripts, &["tokens only go up"]);
}

/// A fenced re-entry of the owner's write that gets a token of its own (one past the
/// counter's, not stored) instead of its outer hold's.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_reentered_write_with_a_new_token_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RwAcquire,
        "return grant(current_token(), extends())\nend\nif reads_already() then",
        "return grant(fenced and current_token() + 1 or 0, extends())\nend\n\
         if reads_already() then",
    );
    expect_new(scripts, &["tokens only go up"]);
}

/// An upgrade granted: a write asked by an owner that holds reads is let in as if it
/// were a re-entry of its write.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_upgrade_granted_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RwAcquire,
        "if reads_already() then\n  return {3}\nend",
        "if reads_already() then\n  return grant(current_token(), extends())\nend",
    );
    expect_new(
        scripts,
        &["an upgrade is refused, never granted and never waits"],
    );
}

/// No upgrade check: a write asked by an owner that holds reads waits (and reserves the
/// lock) behind its own reads, a deadlock the library would only see as a timeout.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_upgrade_that_waits_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RwAcquire,
        "if reads_already() then\n  return {3}\nend",
        "",
    );
    expect_new(
        scripts,
        &["an upgrade is refused, never granted and never waits"],
    );
}

/// Sanity: the real scripts pass at the same bounds.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    assert_eq!(counterexample(Scripts::real(), 8), None);
}

/// Defects planted in the Rust core (`redis_locks::protocol::planted`), which the
/// read-write checker runs: the re-send machine, the give-back reading, the reply reader
/// and the hold bookkeeping the library drives. Each must be found at the default bound
/// (12). Needs the `planted-defects` feature (`scripts/check-protocol.sh` turns it on).
#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks::protocol::planted::{Defect, plant};

    /// The default bound of `tests/rw_check.rs` in a release build.
    const DEFAULT_DEPTH: usize = 12;

    fn expect_core(defect: Defect, properties: &[&str]) {
        expect_core_in(rwmodel::configs(), defect, properties);
    }

    fn expect_core_in(configs: Vec<rwmodel::Config>, defect: Defect, properties: &[&str]) {
        plant(Some(defect));
        let found = counterexample_in(configs, Scripts::real(), DEFAULT_DEPTH);
        plant(None);
        println!("{defect:?}");
        checker::expect_found(found, properties);
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
        expect_core(Defect::GiveBackClaimsGoneHold, &["release is true"]);
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_wait_read_as_a_grant_is_caught() {
        expect_core(
            Defect::RwWaitReadAsGrant,
            &["never a writer with another holder", "belief is true"],
        );
    }

    /// The configurations with restarts, force-unlocks and `BUSY` catch a give-back that
    /// claims a gone hold on their own (a release after a wipe finds nothing).
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn the_wipe_configurations_catch_a_give_back_that_claims_a_gone_hold() {
        expect_core_in(
            wipe_configs(),
            Defect::GiveBackClaimsGoneHold,
            &["release is true", "losses are told"],
        );
    }
}
