//! Teeth for the multi-lock's checker (`tests/multi_check.rs`): each test plants one known
//! defect, in a copy of a script or in the Rust core, and asserts that the checker finds a
//! counterexample to the property it breaks, at the default bound. A checker that passed
//! these would not be checking anything. The restart teeth also assert that the same
//! configuration without its restart finds nothing: only the restart step catches them;
//! the force-unlock teeth, the same of the force-unlock configuration and its
//! force-unlock; the late-request teeth, the same of the late-request configurations and
//! their timeouts.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/multimodel.rs"]
mod multimodel;

use multimodel::{Config, Multi, Scripts, World};

/// The default bound of `tests/multi_check.rs` in a release build.
const DEFAULT_DEPTH: usize = 22;
const MAX_STATES: usize = 3_000_000;

/// Explores every default configuration with `scripts` until one finds a violation:
/// the property, its message, and the replay (`<config>:<path>`).
fn counterexample(scripts: Scripts) -> Option<checker::Found> {
    let world = World::new(scripts);
    checker::counterexample::<Multi>(&world, &multimodel::configs(), DEFAULT_DEPTH, MAX_STATES)
}

/// Explores `config` alone at the default bound with `scripts` (and whatever defect is
/// planted); the bound on states must not be hit.
fn explore(config: &Config, scripts: Scripts) -> checker::Report {
    let world = World::new(scripts);
    let report = checker::explore::<Multi>(&world, config, DEFAULT_DEPTH, MAX_STATES, &[]);
    assert!(!report.truncated, "{}: NOT exhaustive", config.name);
    report
}

/// `config`'s violation, if `report` (of `config`) found one, as a counterexample.
fn found_in(config: &Config, report: checker::Report) -> Option<checker::Found> {
    report.violation.map(|(property, message, path)| {
        let replay = format!("{}:{}", config.name, checker::path_text(&path));
        (property, message, replay)
    })
}

/// Asserts that the restart configurations find a counterexample to "release is true" with
/// `scripts` (and whatever defect is planted), and that the same configurations without
/// their restart find none: the defect is one only a restart shows.
fn expect_only_with_restarts(scripts: Scripts) {
    let mut caught = None;
    for config in multimodel::configs().into_iter().filter(|c| c.restarts > 0) {
        let without = Config {
            restarts: 0,
            ..config.clone()
        };
        let report = explore(&without, scripts.clone());
        assert!(
            report.violation.is_none(),
            "{} without restarts already finds {:?}",
            config.name,
            report.violation
        );
        if caught.is_none() {
            caught = found_in(&config, explore(&config, scripts.clone()));
        }
    }
    checker::expect_found(caught, &["release is true"]);
}

/// Asserts that the force-unlock configurations find a counterexample to "release is true"
/// with `scripts` (and whatever defect is planted), and that the same configurations
/// without their force-unlock find none: there the defect is one only the force-unlock
/// shows (a force-unlock is a wipe of one key, as a restart is of all).
fn expect_only_with_force_unlocks(scripts: Scripts) {
    let mut caught = None;
    let configs = multimodel::configs().into_iter();
    for config in configs.filter(|c| c.force_unlocks > 0) {
        assert_eq!(config.restarts, 0, "{}: a restart too", config.name);
        let without = Config {
            force_unlocks: 0,
            ..config.clone()
        };
        let report = explore(&without, scripts.clone());
        assert!(
            report.violation.is_none(),
            "{} without its force-unlock already finds {:?}",
            config.name,
            report.violation
        );
        if caught.is_none() {
            caught = found_in(&config, explore(&config, scripts.clone()));
        }
    }
    checker::expect_found(caught, &["release is true"]);
}

/// Asserts that the late-request configurations find a counterexample to one of
/// `properties` with `scripts` (and whatever defect is planted), and that the same
/// configurations without their timeouts find none: the defect is one only late requests
/// (strays) show.
#[cfg_attr(not(feature = "planted-defects"), allow(dead_code))]
fn expect_only_with_timeouts(scripts: Scripts, properties: &[&str]) {
    let mut caught = None;
    for config in multimodel::configs().into_iter().filter(|c| c.timeouts > 0) {
        let without = Config {
            timeouts: 0,
            ..config.clone()
        };
        let report = explore(&without, scripts.clone());
        assert!(
            report.violation.is_none(),
            "{} without timeouts already finds {:?}",
            config.name,
            report.violation
        );
        if caught.is_none() {
            caught = found_in(&config, explore(&config, scripts.clone()));
        }
    }
    checker::expect_found(caught, properties);
}

fn expect(scripts: Scripts, properties: &[&str]) {
    checker::expect_found(counterexample(scripts), properties);
}

/// An acquire that grants while another owner holds (the text of
/// `tests/protocol_teeth.rs`): two owners believe they hold one member.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_that_grants_over_another_owner_is_caught() {
    let scripts = Scripts::real().with_grant_over_another_owner();
    expect(scripts, &["never two holders of one lock"]);
}

/// A release that gives back any owner's hold (no owner or hold check): a give-back or
/// a stale release frees a member another client holds.
#[test]
fn a_release_that_ignores_the_owner_is_caught() {
    let scripts = Scripts::real().with_release_of_any_hold();
    expect(scripts, &["never two holders of one lock", "all or none"]);
}

/// A release that finds the lock gone reports the last hold given back (0) instead of "not
/// current" (-1), taking "nothing there" for "released". Without restarts a member is found
/// gone only once its lease ran out, which its holder noticed first (the release then tells
/// the loss anyway), or after its own lost reply gave it back; a restart wipes a member its
/// holder still believes in, and the multi-lock's release then tells the user `Ok` for it.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_release_that_reports_a_gone_lock_released_is_caught_only_with_restarts() {
    let scripts = Scripts::real().with_gone_lock_reported_released();
    expect_only_with_restarts(scripts);
}

/// The same defect in the force-unlock configuration (which has no restart): an operator
/// force-unlocks a member its multi-lock's holder still believes in, and the release tells
/// the user `Ok` for it instead of the loss.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_release_that_reports_a_force_unlocked_lock_released_is_caught_only_with_the_force_unlock() {
    let scripts = Scripts::real().with_gone_lock_reported_released();
    expect_only_with_force_unlocks(scripts);
}

/// Sanity: the real scripts pass this file's model at a small bound (the teeth above bite
/// on the defect, not on the model; `tests/multi_check.rs`, the checker, runs the full
/// bound).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    let world = World::new(Scripts::real());
    for config in multimodel::configs() {
        let report = checker::explore::<Multi>(&world, &config, 14, MAX_STATES, &[]);
        assert!(!report.truncated, "{}: NOT exhaustive", config.name);
        let found = found_in(&config, report);
        assert!(found.is_none(), "{found:?}");
    }
}

/// Defects planted in the Rust core (`redis_locks_protocol::planted`): the model runs
/// the library's own decisions, so a defect in them must be found too, at the default
/// bound. Needs the `planted-defects` feature.
#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks_protocol::planted::{Defect, plant};

    fn expect_core(defect: Defect, properties: &[&str]) {
        plant(Some(defect));
        let found = counterexample(Scripts::real());
        plant(None);
        println!("{defect:?}:");
        checker::expect_found(found, properties);
    }

    /// Members taken in the order the user named them: two users naming two locks in
    /// opposite orders each take one and wait for the other.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn members_taken_as_named_are_caught() {
        expect_core(Defect::MultiOrderAsNamed, &["no deadlock"]);
    }

    /// The same defect with three users naming three locks in a cycle (a before b, b
    /// before c, c before a): a wait-for cycle through all three.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn members_taken_as_named_are_caught_in_a_cycle_of_three() {
        let config = multimodel::by_name("multi: three clients in a named cycle")
            .expect("a default configuration");
        plant(Some(Defect::MultiOrderAsNamed));
        let found = found_in(&config, explore(&config, Scripts::real()));
        plant(None);
        let message = found.as_ref().map(|(_, message, _)| message.clone());
        checker::expect_found(found, &["no deadlock"]);
        let message = message.unwrap_or_default();
        assert_eq!(message.matches("waits for").count(), 3, "{message}");
    }

    /// A failed acquisition keeps the members it took.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_failed_acquisition_that_keeps_its_members_is_caught() {
        expect_core(Defect::MultiKeepsPartial, &["all or none"]);
    }

    /// The walk reports the multi-lock held once all but its last member are taken.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_multi_lock_held_before_its_last_member_is_caught() {
        expect_core(Defect::MultiHeldBeforeLast, &["all or none"]);
    }

    /// A failed acquisition gives back one member fewer than it took.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_give_back_one_member_short_is_caught() {
        expect_core(Defect::MultiGivesBackOneFewer, &["all or none"]);
    }

    /// A multi-lock's release tells `Ok` although a member's release failed (here, one a
    /// force-unlock took): only the core's `MultiRelease` decides it, so the user's
    /// "every member was given back" comes from the code that ships.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_release_that_hides_a_member_failure_is_caught() {
        let config = multimodel::by_name(
            "multi: two clients, opposite orders, a force-unlock, a lost reply",
        )
        .expect("a default configuration");
        plant(Some(Defect::MultiReleaseHidesFailure));
        let found = found_in(&config, explore(&config, Scripts::real()));
        plant(None);
        println!("MultiReleaseHidesFailure:");
        checker::expect_found(found, &["release is true"]);
    }

    /// Members ordered by key only: two users naming one key on two servers in opposite
    /// orders each take one and wait for the other (found only in the configuration that
    /// places one key on two servers).
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn members_ordered_by_key_only_are_caught() {
        let config = multimodel::by_name("multi: one key on two servers, opposite orders")
            .expect("a default configuration");
        plant(Some(Defect::MultiOrderByKeyOnly));
        let found = found_in(&config, explore(&config, Scripts::real()));
        plant(None);
        println!("MultiOrderByKeyOnly:");
        checker::expect_found(found, &["no deadlock"]);
    }

    /// A release whose hold is gone (`release.lua` answers -1) read as "released": as the
    /// script defect above, only a restart shows it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_release_that_claims_a_gone_hold_is_caught_only_with_restarts() {
        plant(Some(Defect::ReleaseClaimsGoneHold));
        expect_only_with_restarts(Scripts::real());
        plant(None);
    }

    /// The same core defect in the force-unlock configuration: only its force-unlock
    /// shows it there.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_release_that_claims_a_force_unlocked_hold_is_caught_only_with_the_force_unlock() {
        plant(Some(Defect::ReleaseClaimsGoneHold));
        expect_only_with_force_unlocks(Scripts::real());
        plant(None);
    }

    /// Explores the default configurations with `defect` planted until one finds a
    /// violation, and asserts that it is a configuration with the `Busy` step (every
    /// configuration before it passed with the defect planted) and that the violation is
    /// of one of `properties`.
    fn expect_core_busy(defect: Defect, properties: &[&str]) {
        plant(Some(defect));
        let found = counterexample(Scripts::real());
        plant(None);
        println!("{defect:?}:");
        if let Some((_, message, replay)) = &found {
            let (name, _) = replay.rsplit_once(':').expect("a replay spec");
            let config = multimodel::by_name(name).expect("a default configuration");
            assert!(
                config.busy > 0,
                "{defect:?} found without BUSY: {message}; {replay}"
            );
        }
        checker::expect_found(found, properties);
    }

    /// A release (a give-back or the user's) answered `BUSY` gives up, as on a permanent
    /// error: the member stays held by nobody until its lease runs out. Only the `BUSY`
    /// configurations reach it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_release_that_gives_up_on_busy_is_caught() {
        expect_core_busy(Defect::ReleaseGivesUpOnTransient, &["all or none"]);
    }

    /// Every transient server error (`BUSY`, `LOADING`, ...) classified `Permanent` by
    /// `Failure::from_server_error`: a member attempt answered `BUSY` ends the wait with
    /// an error (a give-back, a release or a probe would give up too). The library's own
    /// rules accept a permanent error; the model judges by what Redis did (it answered
    /// `BUSY`, the call did not run). Only the `BUSY` configurations reach it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_busy_read_as_permanent_is_caught() {
        expect_core_busy(
            Defect::TransientReadAsPermanent,
            &["BUSY never fails an operation"],
        );
    }

    /// A member acquire that timed out read as one that did not run (no reconciliation:
    /// its lane forgets it): its stray, still on the connection, takes the member after
    /// the walk gave up, and nobody gives it back. Only late requests show it (a lost
    /// reply is still reconciled), and the late configurations catch it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_timed_out_member_acquire_read_as_not_run_is_caught_only_with_timeouts() {
        plant(Some(Defect::TimeoutReadAsNotRun));
        expect_only_with_timeouts(Scripts::real(), &["all or none"]);
        plant(None);
    }

    /// A lost acquire's reconciliation that stops at its bound while its probes time out
    /// (the library asks again: the lost request may not have run yet): the stray runs
    /// after the lane gave up, and its hold is nobody's until it expires. Only late
    /// requests show it, and the late configurations catch it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_reconciliation_that_stops_while_its_probes_time_out_is_caught_only_with_timeouts() {
        plant(Some(Defect::ReconcileStopsOnTimeouts));
        expect_only_with_timeouts(Scripts::real(), &["all or none"]);
        plant(None);
    }

    /// The late configuration (which loses no reply and answers nothing `BUSY`: its only
    /// failures are timeouts) with `defect` planted finds a counterexample to "all or none".
    fn expect_late_alone(defect: Defect) {
        let config = multimodel::by_name(multimodel::LATE).expect("a default configuration");
        assert_eq!((config.faults, config.busy), (0, 0), "{}", config.name);
        plant(Some(defect));
        let found = found_in(&config, explore(&config, Scripts::real()));
        plant(None);
        println!("{defect:?}:");
        checker::expect_found(found, &["all or none"]);
    }

    /// A lost or timed-out acquire treated as one that did not run (the existing defect):
    /// the late configuration alone finds it by its timeouts.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_forgotten_lost_acquire_is_caught_by_timeouts_alone() {
        expect_late_alone(Defect::LostAcquireForgotten);
    }

    /// Reconciliation that gives up at the first probe that gets no reply (here, one that
    /// timed out), before a hold the timed-out acquire took must have expired: the late
    /// configuration alone finds the hold stranded. "All or none" leaves a late member
    /// hold to its lease only when the lane gave up past its bound (see the model's
    /// header), so the exception is no loophole for a give-up before it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_reconciliation_that_gives_up_early_is_caught_by_timeouts_alone() {
        expect_late_alone(Defect::ReconcileGivesUpEarly);
    }

    /// The drift margin added instead of subtracted: a member is believed past the
    /// expiry Redis has for it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn the_drift_margin_added_instead_of_subtracted_is_caught() {
        expect_core(Defect::DriftAdded, &["never two holders of one lock"]);
    }
}
