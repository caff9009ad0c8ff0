//! Teeth for the read-write lock's checker (`tests/rw_check.rs`): each test plants one
//! known defect in a copy of a real script and asserts that the checker finds a
//! counterexample to the property the defect breaks. The fencing and upgrade teeth plant
//! defects that only the fenced, explicit-owner and re-entry steps reach (the other
//! configurations never ask for a token, name an owner or join a hold); the dropped-acquire
//! teeth plant defects that only the late-request configurations reach (the others never
//! drop an acquire); the extension tooth plants one that only a guard's `extend` reaches
//! (only the configurations with extends run one).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/rwmodel.rs"]
mod rwmodel;

use redis_locks_protocol::ScriptId;
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
        "if reads_already() then\n  if taken_earlier() then\n    return {1, 0}\n  end\n  return {3}\nend",
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
        "if reads_already() then\n  if taken_earlier() then\n    return {1, 0}\n  end\n  return {3}\nend",
        "",
    );
    expect_new(
        scripts,
        &["an upgrade is refused, never granted and never waits"],
    );
}

/// A re-sent acquire that never looks for the hold its lost earlier copy took: a refusal
/// then leaves that hold behind, held by no one who knows (the grant path sets the hold's
/// deadline again instead of looking, so only the refusals must look).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_resent_acquire_that_forgets_its_earlier_hold_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RwAcquire,
        "  return redis.call('ZSCORE', mine, member) ~= false",
        "  return false",
    );
    let found = counterexample_in(rwmodel::configs(), scripts, CHECK_DEPTH);
    checker::expect_found(found, &["no orphans, no garbage"]);
}

/// The configurations with late requests (timeouts, dropped acquires).
#[cfg_attr(not(feature = "planted-defects"), allow(dead_code))]
fn late_configs() -> Vec<rwmodel::Config> {
    let configs = rwmodel::configs().into_iter();
    let late: Vec<rwmodel::Config> = configs.filter(|c| c.timeouts + c.drops > 0).collect();
    assert!(!late.is_empty());
    late
}

/// The steps of a counterexample's replay spec (`<config>:<path>`), replayed with
/// `scripts`.
fn replayed(replay: &str, scripts: Scripts) -> (rwmodel::Config, Vec<rwmodel::Step>) {
    let (name, path) = replay.rsplit_once(':').expect("a replay spec");
    let path = checker::parse_path(path).expect("a path");
    let mut configs = rwmodel::configs().into_iter();
    let config = configs
        .find(|c| c.name == name)
        .expect("a default configuration");
    let world = rwmodel::World::new(scripts);
    let mut state = rwmodel::State::initial(&config);
    let mut steps = Vec::new();
    for &index in &path {
        let step = state.steps()[index as usize].clone();
        state.apply(&step, &world);
        println!("  {step:?} -> {}", state.describe());
        steps.push(step);
    }
    (config, steps)
}

/// A renewal that reads a hold whose deadline passed but which is still in the set
/// (another hold keeps the key) as current: it tells no loss of it and moves it past its
/// end. A late renewal (sent while the hold was live, run after it expired: a stray) names
/// such a hold, and so does the watchdog's first tick for a grant whose reply came after
/// the hold's deadline (the clock moved while it was on its way): found by the first
/// configuration already, without late requests.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_that_revives_an_expired_hold_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRenew,
        "if type(score) ~= 'string' or tonumber(score) <= now then",
        "if type(score) ~= 'string' then",
    );
    expect(scripts, 10, &["losses are told"]);
}

/// A give-back of a dropped acquire (`leaving`: the waiting loop's, with the reservation)
/// that drops only the reservation, as if an acquire without its grant could hold nothing:
/// a copy of its attempt that ran unseen, or that is still on the connection and runs late,
/// took a hold that nobody gives back. Only a dropped acquire gives back a hold while
/// leaving (a waiting writer that leaves after its `Wait` reply holds nothing: a copy of
/// its attempt that took one would have been granted), so every configuration without
/// late requests passes at the default bound, and the first one with them catches it, on
/// a path that drops an acquire. Not with strays only: a copy that ran and lost its reply
/// to the drop leaves the same orphan (`Run` before `Drop`).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_leave_that_keeps_the_hold_of_a_dropped_acquire_is_caught() {
    let scripts = Scripts::real()
        .planted(
            ScriptId::RwRelease,
            "if ARGV[2] == 'w' then\n  set = W",
            "if ARGV[2] == 'w' and ARGV[6] ~= '1' then\n  set = W",
        )
        .planted(
            ScriptId::RwRelease,
            "elseif ARGV[2] == 'r' then\n  set = R",
            "elseif ARGV[2] == 'r' and ARGV[6] ~= '1' then\n  set = R",
        );
    let world = rwmodel::World::new(scripts.clone());
    let mut passed = Vec::new();
    for config in rwmodel::configs() {
        let configs = std::slice::from_ref(&config);
        let found = checker::counterexample::<rwmodel::Rw>(&world, configs, CHECK_DEPTH, 3_000_000);
        let Some((property, message, replay)) = found else {
            passed.push(config.name);
            continue;
        };
        println!("{property}: {message}; {replay}; passed before: {passed:?}");
        assert_eq!(property, "no orphans, no garbage", "{message}; {replay}");
        assert!(
            config.timeouts + config.drops > 0,
            "caught without late requests: {replay}"
        );
        let earlier = rwmodel::configs().into_iter().take(passed.len());
        assert!(earlier.into_iter().all(|c| c.timeouts + c.drops == 0));
        // The trace: an acquire was dropped.
        let (_, steps) = replayed(&replay, scripts);
        let drops = steps.iter().filter(|s| matches!(s, rwmodel::Step::Drop(_)));
        assert!(drops.count() > 0, "no acquire was dropped: {replay}");
        return;
    }
    panic!("the checker found no counterexample (passed: {passed:?})");
}

/// A renewal that moves a hold's score to its own lease from now even when that is
/// earlier (`ZADD XX` without `GT`): a watchdog tick after a guard's `extend` (to twice the
/// watchdog's lease) shortens the extended hold behind its holder's back. Without an
/// `extend` every score is some run's now plus the one lease, so a later renewal never
/// moves one back: every configuration without extends passes at the default bound, and
/// each one with them catches it, on a path that extends.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_that_shortens_an_extended_hold_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRenew,
        "redis.call('ZADD', key, 'XX', 'GT', now + lease, id .. ':' .. k)",
        "redis.call('ZADD', key, 'XX', now + lease, id .. ':' .. k)",
    );
    let world = rwmodel::World::new(scripts.clone());
    let (mut passed, mut caught) = (Vec::new(), Vec::new());
    for config in rwmodel::configs() {
        let configs = std::slice::from_ref(&config);
        let found = checker::counterexample::<rwmodel::Rw>(&world, configs, CHECK_DEPTH, 3_000_000);
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
        let expected = ["a release removes only its own hold", "belief is true"];
        assert!(
            expected.contains(&property),
            "{property}: {message}; {replay}"
        );
        // The trace: a guard extended its hold.
        let (_, steps) = replayed(&replay, scripts.clone());
        let extends = steps
            .iter()
            .filter(|s| matches!(s, rwmodel::Step::Extend(..)));
        assert!(extends.count() > 0, "no extend in the trace: {replay}");
        caught.push(config.name);
    }
    assert!(!caught.is_empty(), "no configuration extends");
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

/// Defects planted in the Rust core (`redis_locks_protocol::planted`), which the
/// read-write checker runs: the re-send machine, the give-back reading, the reply reader
/// and the hold bookkeeping the library drives. Each must be found at the default bound
/// (12). Needs the `planted-defects` feature (`scripts/check-protocol.sh` turns it on).
#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks_protocol::planted::{Defect, plant};

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

    /// An acquire dropped with its attempt in flight that gives back only what earlier
    /// attempts left (the core's `Wait::give_back_if_dropped` forgetting the attempt in
    /// flight): the hold that attempt took unseen, or takes late as a stray, is an orphan.
    /// Only the configurations with late requests drop acquires; the trace drops one.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_dropped_acquire_that_forgets_its_attempt_in_flight_is_caught() {
        plant(Some(Defect::DropForgetsAttemptInFlight));
        let found = counterexample_in(late_configs(), Scripts::real(), DEFAULT_DEPTH);
        let replay = found.as_ref().map(|(_, _, replay)| replay.clone());
        let steps = replay
            .as_ref()
            .map(|replay| replayed(replay, Scripts::real()).1);
        plant(None);
        checker::expect_found(found, &["no orphans, no garbage"]);
        let drops = steps.unwrap_or_default().into_iter();
        let drops = drops.filter(|s| matches!(s, rwmodel::Step::Drop(_)));
        assert!(drops.count() > 0, "no acquire was dropped");
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
