//! Teeth for the plain lock's wake-up checker (`tests/wake_check.rs`): each test plants one
//! known defect in a copy of `lua/acquire.lua` or `lua/release.lua` (the wake-up mark and
//! the conditional PUBLISH) and asserts that the checker finds a counterexample to the
//! property it breaks, at the default bound. No checker found any of these before this one:
//! the others run the scripts without waiters (`others_waiting` is always false there and
//! nobody listens), and `tests/wait_check.rs` runs the waiting loop without the scripts.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/wakemodel.rs"]
mod wakemodel;

use redis_locks_protocol::ScriptId;
use wakemodel::{Config, Scripts, Wake, World};

/// The default bound of `tests/wake_check.rs` in a release build.
const DEFAULT_DEPTH: usize = 22;
const MAX_STATES: usize = 3_000_000;

fn config(name: &str) -> Config {
    wakemodel::configs()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no configuration {name:?}"))
}

/// The first counterexample, in the order of the configurations (every configuration
/// before it passed with the defect planted); its trace is printed.
fn counterexample(scripts: Scripts) -> Option<checker::Found> {
    let world = World::new(scripts);
    let found =
        checker::counterexample::<Wake>(&world, &wakemodel::configs(), DEFAULT_DEPTH, MAX_STATES);
    if let Some((_, _, spec)) = &found
        && let Some((name, path)) = spec.rsplit_once(':')
        && let Ok(path) = checker::parse_path(path)
        && let Ok((trace, _)) = checker::replay::<Wake>(&world, &config(name), &path, &[])
    {
        print!("{trace}");
    }
    found
}

/// A failed attempt that does not mark the hash (a fenced hold): its release publishes nothing, and the
/// waiter sleeps its whole pttl although the lock is free.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_failed_attempt_that_does_not_mark_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Acquire,
        "  redis.call('HSETNX', lock, WAITING, 1)\n",
        "",
    );
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// A fresh fenced acquire (the hash form) that ignores flag '2' (other waiters of its client): the one waiter a
/// release woke takes the lock, and its own release wakes nobody, although the other
/// waiters of its client sleep on the wake-up only one of them got.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_fresh_hold_not_marked_for_local_waiters_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Acquire,
        "  if flags == '3' then",
        "  if false then",
    );
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// A release that never publishes.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_release_that_never_publishes_is_caught() {
    let scripts = Scripts::real().planted(ScriptId::Release, "if held[4] then", "if false then");
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// A release that publishes only when the hash is NOT marked (the condition inverted).
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_release_that_publishes_only_when_unmarked_is_caught() {
    let scripts =
        Scripts::real().planted(ScriptId::Release, "if held[4] then", "if not held[4] then");
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// A failed attempt that does not mark the lock (a first hold's string, the form every
/// hold in this model has: it has no re-entries): its release publishes nothing, and the
/// waiter sleeps its whole pttl although the lock is free.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_failed_attempt_that_does_not_mark_a_first_hold_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Acquire,
        "    if mark == '\\1' then\n      redis.call('SET'",
        "    if false then\n      redis.call('SET'",
    );
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// A fresh acquire that ignores flag '2' (other waiters of its client): the one waiter a
/// release woke takes the lock with the script, and its own release wakes nobody,
/// although the other waiters of its client sleep on the wake-up only one of them got.
/// Since a woken waiter sends the bare `SET` first (its mark is the core's:
/// `core::an_unmarked_first_hold_value_is_caught`), the script's fresh string path with
/// flag '2' is reached only in a race: the woken waiter's `SET` finds the lock taken
/// again, and it is free again when its `acquire.lua` runs. With every attempt in flight
/// that race is about 30 steps deep, past the state bound; the configuration that puts
/// only the woken waiter's take in flight ("... a woken waiter's take in flight") finds it
/// in 19.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_fresh_first_hold_not_marked_for_local_waiters_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Acquire,
        "local mark = flags == '2' and '\\2' or '\\1'",
        "local mark = '\\1'",
    );
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// `release_first.lua` that never publishes.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_first_release_that_never_publishes_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::ReleaseFirst,
        "    redis.call(ARGV[3] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[2], 'released')\n",
        "",
    );
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// `release_first.lua` that publishes only when the lock is NOT marked.
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_first_release_that_publishes_only_when_unmarked_is_caught() {
    let publish =
        "    redis.call(ARGV[3] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[2], 'released')\n";
    let scripts = Scripts::real()
        .planted(ScriptId::ReleaseFirst, publish, "")
        .planted(
            ScriptId::ReleaseFirst,
            "  if value == ARGV[1] then\n",
            &format!("  if value == ARGV[1] then\n{publish}"),
        );
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// A release that publishes only when the lock is NOT marked (the condition inverted).
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_release_of_a_first_hold_that_publishes_only_when_unmarked_is_caught() {
    let publish =
        "    redis.call(ARGV[8] == '1' and 'SPUBLISH' or 'PUBLISH', ARGV[5], 'released')\n";
    let scripts = Scripts::real()
        .planted(ScriptId::Release, publish, "")
        .planted(
            ScriptId::Release,
            "  if value == '\\1' .. mine then\n",
            &format!("  if value == '\\1' .. mine then\n{publish}"),
        );
    checker::expect_found(
        counterexample(scripts),
        &["no wake-up lost without a fault"],
    );
}

/// A refusal that reports the caller's own lease instead of the holder's remaining TTL:
/// the waiter sleeps past the key's expiry (the bound is read from the keyspace, not from
/// the reply).
#[test]
#[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
fn a_refusal_that_overstates_the_pttl_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Acquire,
        "  return math.max(pttl, 1)\n",
        "  return tonumber(lease)\n",
    );
    checker::expect_found(counterexample(scripts), &["a sleep is bounded by the pttl"]);
}

/// The core's own defects (feature `planted-defects`), in the real decision.
#[cfg(feature = "planted-defects")]
mod core {
    use redis_locks_protocol::planted::{Defect, plant};

    use super::{Scripts, checker, counterexample};

    fn found_with(defect: Defect) -> Option<checker::Found> {
        plant(Some(defect));
        let found = counterexample(Scripts::real());
        plant(None);
        found
    }

    /// The attempt's "others of this client wait" flag counts one listener too few: the
    /// woken waiter takes the lock without marking it, and its release wakes nobody.
    #[test]
    #[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
    fn others_waiting_one_short_is_caught() {
        checker::expect_found(
            found_with(Defect::OthersWaitingOffByOne),
            &["no wake-up lost without a fault"],
        );
    }

    /// A first hold's value is never marked: a waiter woken by a release takes the lock
    /// with its bare `SET` unmarked, and its release wakes none of its client's other
    /// waiters.
    #[test]
    #[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
    fn an_unmarked_first_hold_value_is_caught() {
        checker::expect_found(
            found_with(Defect::FirstHoldValueUnmarked),
            &["no wake-up lost without a fault"],
        );
    }

    /// The waiting loop sleeps without the pttl's bound.
    #[test]
    #[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
    fn a_sleep_past_the_pttl_is_caught() {
        checker::expect_found(
            found_with(Defect::WaitIgnoresPttl),
            &["a sleep is bounded by the pttl"],
        );
    }
}

/// Sanity: the real scripts pass this file's model at a small bound, every configuration
/// exhaustive (`tests/wake_check.rs`, the checker, runs the full bound).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    let world = World::new(Scripts::real());
    for config in wakemodel::configs() {
        let depth = 14 + <Wake as checker::Model>::extra_depth(&config);
        let report = checker::explore::<Wake>(&world, &config, depth, MAX_STATES, &[]);
        assert!(
            !report.truncated,
            "{}: the state bound was hit",
            config.name
        );
        assert!(
            report.violation.is_none(),
            "{}: {:?}",
            config.name,
            report.violation
        );
    }
}
