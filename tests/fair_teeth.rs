//! Teeth for the fair lock's checker (`tests/fair_check.rs`): each test plants one known
//! defect, in a copy of a real script or in the Rust core, and asserts that the checker
//! finds a counterexample to the property the defect breaks, at the default bound.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/fairmodel.rs"]
mod fairmodel;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;

use fairmodel::{Config, DEFAULT_DEPTH, Fair, Scripts, State, Step, World};
use redis_locks_protocol::ScriptId;

/// Explores every default configuration with `scripts` until one finds a violation.
fn counterexample(scripts: Scripts, depth: usize) -> Option<checker::Found> {
    counterexample_in(&fairmodel::configs(), scripts, depth)
}

/// Explores `configs` with `scripts` until one finds a violation.
fn counterexample_in(configs: &[Config], scripts: Scripts, depth: usize) -> Option<checker::Found> {
    let world = World::new(scripts);
    checker::counterexample::<Fair>(&world, configs, depth, 3_000_000)
}

fn expect(scripts: Scripts, properties: &[&str]) {
    checker::expect_found(counterexample(scripts, DEFAULT_DEPTH), properties);
}

/// The gate that keeps a newcomer out of a free lock with a queue lets a `try_acquire`
/// through.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_try_acquire_that_jumps_the_queue_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::FairAcquire,
        "if head and head ~= id then",
        "if head and head ~= id and string.find(flags, 'q', 1, true) then",
    );
    expect(scripts, &["no queue jumping"]);
}

/// Any queued waiter that asks on a free lock is granted, not only the head.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_grant_to_a_waiter_behind_the_head_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::FairAcquire,
        "if head and head ~= id then",
        "if head and head ~= id and not redis.call('ZSCORE', Q, id) then",
    );
    expect(scripts, &["FIFO among live waiters"]);
}

/// An attempt no longer drops the waiters whose alive deadline passed: a dead waiter
/// stays queued, and once a queue keeps it alive it is granted (or blocks) ahead of the live
/// waiters behind it.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_dead_waiter_that_is_never_dropped_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::FairAcquire,
        "for _, key in ipairs({H, A}) do",
        "for _, key in ipairs({H}) do",
    );
    expect(
        scripts,
        &["a dead waiter leaves", "FIFO among live waiters"],
    );
}

/// A waiter's alive deadline is set twice as far as the waiter lease: a dead one holds the
/// queue up twice as long.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_waiter_kept_alive_too_long_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::FairAcquire,
        "redis.call('ZADD', A, now + waiter_lease, id)",
        "redis.call('ZADD', A, now + 2 * waiter_lease, id)",
    );
    expect(scripts, &["a dead waiter leaves"]);
}

/// A waiter that leaves takes its place out of the queue but not its alive deadline.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_leave_that_keeps_the_alive_entry_is_caught() {
    let scripts =
        Scripts::real().planted(ScriptId::FairRelease, "  redis.call('ZREM', A, id)\n", "");
    expect(scripts, &["no orphans, no garbage"]);
}

/// A release wakes the last waiter in the queue instead of the head: the head sleeps until
/// its recheck.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_wake_up_to_the_wrong_waiter_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::FairRelease,
        "local first = redis.call('ZRANGE', Q, 0, 1)",
        "local first = redis.call('ZRANGE', Q, -1, -1)",
    );
    expect(scripts, &["a dead waiter leaves"]);
}

/// A renewal that reads a missing hold as still there (only one whose deadline passed as
/// gone): a holder whose hold a restart or a force-unlock took, or whose holds' set
/// expired as a whole, is not told by its watchdog.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_that_does_not_tell_a_deleted_hold_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRenew,
        "if type(score) ~= 'string' or tonumber(score) <= now then",
        "if type(score) == 'string' and tonumber(score) <= now then",
    );
    expect(scripts, &["losses are told"]);
}

/// The gap the checker found (see `fairmodel::shared_owner`), planted back: with one
/// explicit owner on two clients, a queued waiter granted as a re-entry keeps its place in
/// the queue.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_reentry_that_keeps_its_place_in_the_queue_is_caught() {
    let config = fairmodel::shared_owner();
    let unfixed = Scripts::real().planted(
        ScriptId::FairAcquire,
        "      redis.call('ZREM', Q, id)\n      redis.call('ZREM', A, id)\n",
        "",
    );
    let found = counterexample_in(&[config], unfixed, DEFAULT_DEPTH);
    checker::expect_found(found, &["no orphans, no garbage"]);
}

/// A renewal that reads a hold whose deadline passed but which is still in the set (another
/// hold of the same owner keeps the key) as current: it tells no loss of it and moves it
/// past its end. On time the watchdog never names such a hold (a guard's belief ends
/// before Redis's deadline, by the drift margin), so only a late renewal (sent while the
/// hold was live, run after it expired) reaches the branch: only the late-request
/// configuration catches it, after every earlier one passed, on a path with a stray.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_late_renewal_that_revives_an_expired_hold_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRenew,
        "if type(score) ~= 'string' or tonumber(score) <= now then",
        "if type(score) ~= 'string' then",
    );
    let found = counterexample(scripts.clone(), DEFAULT_DEPTH);
    let replay = found.as_ref().map(|(_, _, replay)| replay.clone());
    checker::expect_found(found, &["losses are told"]);
    let replay = replay.unwrap_or_default();
    let (name, path) = replay.rsplit_once(':').expect("a replay spec");
    let path = checker::parse_path(path).expect("a path");
    let mut configs = fairmodel::configs().into_iter();
    let config = configs
        .find(|c| c.name == name)
        .expect("a default configuration");
    assert!(
        config.timeouts > 0,
        "found by {}, which has no late requests",
        config.name
    );
    // The path runs a stray.
    let world = World::new(scripts);
    let mut state = State::initial(&config);
    let mut stray_ran = false;
    for &index in &path {
        let step = state.steps()[index as usize];
        stray_ran |= matches!(step, Step::ExecuteStray(_));
        state.apply(&step, &world);
        println!("  {step:?} -> t={}", fairmodel::t(state.now));
    }
    assert!(stray_ran, "no stray ran on {replay}");
}

/// A renewal that sets the holds' set's expiry to its own lease from now even when the
/// set already lasts longer (`PEXPIRE` without the `PTTL` check): a watchdog tick after a
/// guard's `extend` (to twice the watchdog's lease) cuts the set's expiry below the extended
/// hold's deadline, and the key would vanish while its holder still believes. Without an
/// `extend` every score is some run's now plus the one lease, so the renewed hold's new
/// deadline is the set's latest anyway: every configuration without extends passes at the
/// default bound, and each one with them catches it, on a path that extends.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_that_cuts_an_extended_set_short_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRenew,
        "local extend = redis.call('PTTL', KEYS[i]) < lease",
        "local extend = true",
    );
    let world = World::new(scripts.clone());
    let (mut passed, mut caught) = (Vec::new(), Vec::new());
    for config in fairmodel::configs() {
        let configs = std::slice::from_ref(&config);
        let found = checker::counterexample::<Fair>(&world, configs, DEFAULT_DEPTH, 3_000_000);
        let Some((property, message, replay)) = found else {
            assert!(
                config.extends == 0,
                "{}: not caught with extends (passed: {passed:?})",
                config.name
            );
            passed.push(config.name);
            continue;
        };
        println!("{property}: {message}; {replay}");
        assert!(config.extends > 0, "caught without an extend: {replay}");
        let expected = ["no orphans, no garbage", "belief is true"];
        assert!(
            expected.contains(&property),
            "{property}: {message}; {replay}"
        );
        // The trace: a guard extended its hold.
        let (_, path) = replay.rsplit_once(':').expect("a replay spec");
        let mut state = State::initial(&config);
        let mut extended = false;
        for &index in &checker::parse_path(path).expect("a path") {
            let step = state.steps()[index as usize];
            extended |= matches!(step, Step::Extend(..));
            state.apply(&step, &world);
            println!("  {step:?} -> {}", state.describe());
        }
        assert!(extended, "no extend in the trace: {replay}");
        caught.push(config.name);
    }
    assert!(!caught.is_empty(), "no configuration extends");
}

/// Sanity: the real scripts pass this file's model at a small bound
/// (`tests/fair_check.rs`, the checker, runs the full bound; running it here again would
/// only double its minute).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    assert_eq!(counterexample(Scripts::real(), 8), None);
}

/// Defects planted in the Rust core (`redis_locks_protocol::planted`), which the fair
/// lock's checker runs: the hold bookkeeping, the re-send machine and the give-back
/// reading it shares with the other sorted-set kinds, and the fair lock's own call builder
/// and reply reader. Each must be found at the default bound. Needs the
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
            Defect::FairWaitReadAsGrant,
            &["belief is true", "never two holders"],
        );
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_waiter_that_does_not_queue_is_caught() {
        expect_core(Defect::FairQueueFlagDropped, &["FIFO among live waiters"]);
    }
}

/// The operator's force-unlock (`force_delete.lua`) reports the holds it found but
/// deletes none of them.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_force_unlock_that_deletes_nothing_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::ForceDelete,
        "for i = 1, holds do",
        "for i = 1, holds - 1 do",
    );
    expect(scripts, &["release is true"]);
}

/// The force-unlock deletes the holds but wakes nobody when it took a single live hold:
/// the queue's head would wait its whole re-check for a lock that is free.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_force_unlock_that_wakes_nobody_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::ForceDelete,
        "if live > 0 then",
        "if live > 1 then",
    );
    expect(scripts, &["a dead waiter leaves"]);
}
