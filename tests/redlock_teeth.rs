//! Teeth for the RedLock checker (`tests/redlock_check.rs`): each test plants one known
//! defect, in a copy of a real script or in the Rust core, and asserts that the checker
//! finds a counterexample to a property the defect breaks, at the default bound.
//!
//! A counterexample counts only if it is the defect's: the real code's own first
//! violation in that configuration (the checker finds one in the configurations with lost
//! replies and timeouts: a RedLock's validity is counted from the attempt's start while a
//! hold adopted from an earlier attempt's lost request was taken before it; see
//! `redmodel::redlock_elapsed`) must be deeper, or absent. The real code has no violation
//! shallower than that, so a shallower one is the defect's.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redmodel.rs"]
mod redmodel;

use std::collections::HashMap;
use std::sync::Mutex;

use redis_locks_protocol::ScriptId;
use redmodel::{Config, Red, Scripts, World};

/// The default bound of `tests/redlock_check.rs` in a release build.
const DEFAULT_DEPTH: usize = 12;
const MAX_STATES: usize = 2_000_000;

const TWO_HOLDERS: &str = "never two holders within validity";
#[cfg_attr(not(feature = "planted-defects"), allow(dead_code))]
const VALIDITY: &str = "validity as documented";
const OUTLIVES: &str = "validity never outlives a counted hold";
const ORPHANS: &str = "no orphans";
const LOST_SIGNAL: &str = "the lost signal is never late";
#[cfg_attr(not(feature = "planted-defects"), allow(dead_code))]
const BUSY_NEVER_FAILS: &str = "BUSY never fails a give-back";
const FORCE_TRUE: &str = "a force-unlock deletes what it reports";

const OUTAGE: &str = "3 servers: an outage, a lost reply, slow replies";
const RESTART: &str = "3 servers: a restart without persistence";
const KEPT_OUT: &str = "3 servers: a restart kept out for a lease";
const DRIFT: &str = "3 servers: clock drift and expiry";
const LEASES: &str = "3 servers: timeouts, lost replies, two leases";
const EVEN: &str = "2 servers (an even count): an outage";
#[cfg_attr(not(feature = "planted-defects"), allow(dead_code))]
const STRAYS: &str = "3 servers: late requests (strays) and early decisions";
#[cfg_attr(not(feature = "planted-defects"), allow(dead_code))]
const BUSY: &str = "3 servers: BUSY/LOADING and a restart";
const FORCED: &str = "3 servers: two force-unlocks, an outage, a lost reply";

fn config(name: &str) -> Config {
    redmodel::configs()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no configuration {name:?}"))
}

/// Explores the named configuration at the default bound (ignoring `ignore`), with
/// `scripts` and whatever defect is planted; the bound on states must not be hit.
fn explore(scripts: &Scripts, name: &str, ignore: &[&str]) -> checker::Report {
    let world = World::new(scripts.clone());
    let report = checker::explore::<Red>(&world, &config(name), DEFAULT_DEPTH, MAX_STATES, ignore);
    assert!(!report.truncated, "{name}: state bound hit");
    report
}

/// The depth of the real code's first violation in `name` at the default bound (ignoring
/// `ignore`), once per test binary. Must be called with no defect planted.
fn baseline(name: &str, ignore: &[&str]) -> Option<usize> {
    static BASELINES: Mutex<Option<HashMap<String, Option<usize>>>> = Mutex::new(None);
    let key = format!("{name}|{ignore:?}");
    let mut cache = BASELINES.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(depth) = cache.get(&key) {
        return *depth;
    }
    let report = explore(&Scripts::real(), name, ignore);
    let depth = report.violation.map(|_| report.depth_reached);
    cache.insert(key, depth);
    depth
}

/// Explores the named configurations with `scripts` (and whatever defect is planted) until
/// one finds a violation (of a property not in `ignore`) shallower than the real code's
/// first one there (`baselines`, in the same order): the property, why, and the replay
/// (`<config>:<steps>`, with its depth).
fn caught(
    scripts: &Scripts,
    names: &[&str],
    baselines: &[Option<usize>],
    ignore: &[&str],
) -> Option<checker::Found> {
    names.iter().zip(baselines).find_map(|(name, baseline)| {
        let report = explore(scripts, name, ignore);
        let depth = report.depth_reached;
        let (property, message, path) = report.violation?;
        baseline.is_none_or(|real| depth < real).then(|| {
            let replay = format!("{name}:{} (depth {depth})", checker::path_text(&path));
            (property, message, replay)
        })
    })
}

fn judge(label: &str, found: Option<checker::Found>, properties: &[&str]) {
    println!("{label}:");
    checker::expect_found(found, properties);
}

fn expect(scripts: Scripts, names: &[&str], ignore: &[&str], properties: &[&str]) {
    let baselines: Vec<Option<usize>> = names.iter().map(|n| baseline(n, ignore)).collect();
    judge(
        "planted in lua/",
        caught(&scripts, names, &baselines, ignore),
        properties,
    );
}

/// Sanity: the configurations without lost replies or timeouts, and those the new teeth
/// are searched in (BUSY/LOADING, force-unlocks), hold every property with the real code
/// at the default bound (the restart and force-unlock exceptions included, as documented).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_code_passes_the_configurations_without_lost_replies() {
    for name in [RESTART, KEPT_OUT, DRIFT, BUSY, FORCED] {
        assert_eq!(baseline(name, &[]), None, "{name}");
    }
}

/// An acquire that grants while another owner holds (handing out the holder's hold, whose
/// key keeps its expiry). The new holder's guard believes past that expiry at once; past
/// that, two RedLock holders. Searched first in the restart configuration, to show that
/// the documented restart exception excuses nothing else.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_that_grants_over_another_owner_is_caught() {
    let scripts = Scripts::real().with_grant_over_another_owner();
    expect(
        scripts.clone(),
        &[RESTART, DRIFT],
        &[],
        &[LOST_SIGNAL, OUTLIVES, TWO_HOLDERS],
    );
    expect(
        scripts,
        &[RESTART, DRIFT],
        &[LOST_SIGNAL, OUTLIVES],
        &[TWO_HOLDERS],
    );
}

/// The same defect, searched in the force-unlock configuration: the force-unlock
/// exception (every server both majorities count had one of their holds force-unlocked)
/// excuses nothing else.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_that_grants_over_another_owner_is_caught_despite_force_unlocks() {
    let scripts = Scripts::real().with_grant_over_another_owner();
    expect(scripts, &[FORCED], &[LOST_SIGNAL, OUTLIVES], &[TWO_HOLDERS]);
}

/// A fresh hold whose expiry is set 5 ms shorter than the lease it was asked for: the
/// server's guard, and the RedLock's validity, outlive the key.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_that_sets_a_shorter_expiry_is_caught() {
    let scripts = Scripts::real().with_short_fresh_expiry();
    expect(scripts, &[DRIFT], &[], &[LOST_SIGNAL, OUTLIVES]);
}

/// A probe that never finds what a lost acquire took: the attempt sends a fresh request,
/// which re-enters the hold the lost one took, and one of its two counts is orphaned.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_probe_that_finds_nothing_is_caught() {
    let scripts = Scripts::real().with_probe_finding_nothing();
    expect(scripts, &[OUTAGE, EVEN, LEASES], &[], &[ORPHANS]);
}

/// The operator's force-unlock (`force_unlock.lua`) reports the lock deleted but deletes
/// nothing: only the force-unlock configuration runs it.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_force_unlock_that_deletes_nothing_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::ForceUnlock,
        "redis.call('DEL', KEYS[1])",
        "-- (planted: no DEL)",
    );
    expect(scripts, &[FORCED], &[], &[FORCE_TRUE]);
}

/// The force-unlock deletes the lock but reports that there was none (the operator is
/// told nothing was held): only the force-unlock configuration runs it.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_force_unlock_that_reports_nothing_is_caught() {
    let scripts = Scripts::real().planted(ScriptId::ForceUnlock, "return 1", "return 0");
    expect(scripts, &[FORCED], &[], &[FORCE_TRUE]);
}

/// Defects planted in the Rust core (`redis_locks_protocol::planted`), in the decisions
/// the model runs. Needs the `planted-defects` feature.
#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks_protocol::planted::{Defect, plant};

    fn expect_core(defect: Defect, names: &[&str], ignore: &[&str], properties: &[&str]) {
        // The real code's baselines first, with nothing planted on this thread.
        plant(None);
        let baselines: Vec<Option<usize>> = names.iter().map(|n| baseline(n, ignore)).collect();
        plant(Some(defect));
        let found = caught(&Scripts::real(), names, &baselines, ignore);
        plant(None);
        judge(
            &format!("{defect:?} ignoring {ignore:?}"),
            found,
            properties,
        );
    }

    /// Half of an even number of servers counted as a majority: with 2 servers, 1 grant
    /// wins. The decision breaks the documented rule at once; past it, two clients hold.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn half_is_a_majority_is_caught() {
        expect_core(Defect::RedlockHalfIsAMajority, &[EVEN], &[], &[VALIDITY]);
        expect_core(
            Defect::RedlockHalfIsAMajority,
            &[EVEN],
            &[VALIDITY],
            &[TWO_HOLDERS],
        );
    }

    /// The validity without the drift margin. The decision breaks the documented rule at
    /// once; past it, a server whose clock runs ahead (within the margin) expires a counted
    /// hold before the validity ends.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn drift_ignored_is_caught() {
        expect_core(Defect::RedlockDriftIgnored, &[DRIFT], &[], &[VALIDITY]);
        expect_core(
            Defect::RedlockDriftIgnored,
            &[DRIFT],
            &[VALIDITY],
            &[OUTLIVES, TWO_HOLDERS],
        );
    }

    /// A server's guard that adds the drift margin to its deadline: it believes its hold
    /// past the key's expiry, so the RedLock's lost signal would come late.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn drift_added_is_caught() {
        expect_core(Defect::DriftAdded, &[DRIFT], &[], &[LOST_SIGNAL]);
    }

    /// A lost acquire's hold adopted on other terms and credited with the caller's lease:
    /// a 15 ms hold taken by an earlier attempt's lost request, adopted by a 30 ms attempt
    /// of the same owner, is believed for 30 ms.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn adoption_that_ignores_the_lease_is_caught() {
        expect_core(
            Defect::AdoptionIgnoresLease,
            &[LEASES],
            &[],
            &[LOST_SIGNAL, OUTLIVES, TWO_HOLDERS],
        );
    }

    /// The early decision taken one grant short of a majority: the servers still running
    /// are left out before a majority granted. The decision breaks the documented rule at
    /// once.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn deciding_before_a_majority_is_caught() {
        expect_core(
            Defect::RedlockDecidesBeforeMajority,
            &[STRAYS, EVEN],
            &[],
            &[VALIDITY],
        );
    }

    /// Every transient server error (`BUSY`, `LOADING`, ...) classified `Permanent` by
    /// `Failure::from_server_error`: a give-back answered `BUSY` is given up at once, its
    /// hold left to its lease although asking again would give it back. Only the `BUSY`
    /// configuration answers `BUSY`.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_busy_read_as_permanent_is_caught() {
        expect_core(
            Defect::TransientReadAsPermanent,
            &[BUSY],
            &[],
            &[BUSY_NEVER_FAILS],
        );
    }

    /// `LOADING` classified `Permanent` (a classifier without it): only a give-back sent to
    /// a server still loading after its restart is given up. Only the `BUSY` configuration
    /// (which has a restart) answers `LOADING`.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn loading_read_as_permanent_is_caught() {
        expect_core(
            Defect::LoadingReadAsPermanent,
            &[BUSY],
            &[],
            &[BUSY_NEVER_FAILS],
        );
    }

    /// The release operation (`ReleaseOp::on_failure`) treats `Failure::Transient` as
    /// permanent: a give-back answered `BUSY` ends unreleased.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_release_that_gives_up_on_busy_is_caught() {
        expect_core(
            Defect::ReleaseGivesUpOnTransient,
            &[BUSY],
            &[],
            &[BUSY_NEVER_FAILS],
        );
    }

    /// The gap the checker found, planted back: the time spent counted from the attempt's
    /// start only, so a hold adopted from an earlier attempt's lost request (its lease
    /// started before) is outlived by the validity.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn elapsed_from_the_attempt_only_is_caught() {
        expect_core(
            Defect::RedlockElapsedFromAttempt,
            &[EVEN, OUTAGE, LEASES],
            &[],
            &[OUTLIVES, TWO_HOLDERS],
        );
    }
}
