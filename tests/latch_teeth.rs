//! Teeth for the count-down latch's checker (`tests/latch_check.rs`): each test plants one
//! known defect, in a copy of a script, in the Rust core, or in the model's driver (how a
//! `BUSY`/`LOADING` error reply is handed to the core: the one driver defect no core
//! defect expresses, since the driver decides it), and asserts that the checker finds a
//! counterexample to the property it breaks, at the default bound. The teeth of how a
//! `BUSY`/`LOADING` reply is read (in the driver or in the core's classifier) also assert
//! that only a configuration with the `Busy` step finds them.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/latchmodel.rs"]
mod latchmodel;
#[path = "protocol/lua.rs"]
mod lua;

use latchmodel::{Config, Driver, Latch, Scripts, World};
use redis_locks_protocol::ScriptId;

/// The default bound of `tests/latch_check.rs` in a release build.
const DEFAULT_DEPTH: usize = 18;
const MAX_STATES: usize = 3_000_000;

fn config(name: &str) -> Config {
    latchmodel::configs()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no configuration {name:?}"))
}

fn counterexample(scripts: Scripts) -> Option<checker::Found> {
    found_with(scripts, Driver::Library)
}

/// The first counterexample, in the order of the configurations (every configuration
/// before it passed with the defect planted), with the model's driver `driver`; its trace
/// is printed.
fn found_with(scripts: Scripts, driver: Driver) -> Option<checker::Found> {
    let world = World::new(scripts, driver);
    let found =
        checker::counterexample::<Latch>(&world, &latchmodel::configs(), DEFAULT_DEPTH, MAX_STATES);
    if let Some((_, _, spec)) = &found
        && let Some((name, path)) = spec.rsplit_once(':')
        && let Ok(path) = checker::parse_path(path)
        && let Ok((trace, _)) = checker::replay::<Latch>(&world, &config(name), &path, &[])
    {
        print!("{trace}");
    }
    found
}

fn expect(scripts: Scripts, properties: &[&str]) {
    checker::expect_found(counterexample(scripts), properties);
}

/// A copy of an applied count-down that counts again (no record check).
#[test]
fn a_retry_that_counts_again_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::LatchCountDown,
        "if state[2] == ARGV[2] then\n  return count\nend",
        "",
    );
    expect(scripts, &["counted once", "opens exactly at zero"]);
}

/// The same defect, with no lost reply and no restart: a stray count-down that ran late,
/// and the copy its client re-sent after timing out, count twice. Late copies alone
/// expose it (the late-count-down configuration without its lost reply).
#[test]
fn a_retry_that_counts_again_is_caught_by_late_count_downs_alone() {
    let scripts = Scripts::real().planted(
        ScriptId::LatchCountDown,
        "if state[2] == ARGV[2] then\n  return count\nend",
        "",
    );
    let mut strays =
        config("latch: two clients, late count-downs (strays), a delete, a lost reply");
    strays.faults = 0;
    let world = World::new(scripts, Driver::Library);
    let found = checker::counterexample::<Latch>(&world, &[strays], DEFAULT_DEPTH, MAX_STATES);
    checker::expect_found(found, &["counted once", "opens exactly at zero"]);
}

/// A latch that opens one count-down early.
#[test]
fn an_early_opening_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::LatchCountDown,
        "if count <= 1 then",
        "if count <= 2 then",
    );
    expect(scripts, &["opens exactly at zero", "counted once"]);
}

/// A closing of a closed latch that deletes it (a re-close read as "start over"): the
/// latch opens without reaching zero. "Opens exactly at zero" used to be checked on
/// count-downs only, so this passed; it now names the only three ways a closed latch
/// opens (its last count-down, a delete, a restart) and checks every step.
#[test]
fn a_set_that_opens_a_closed_latch_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::LatchSet,
        "  return -2\nend\nreturn 0",
        "  return -2\nend\nredis.call('DEL', KEYS[1])\nreturn 0",
    );
    expect(scripts, &["opens exactly at zero"]);
}

/// Asserts that `found` (a counterexample of the defect `what`) was found, by a
/// configuration with the `Busy` step (and with a restart when `restart`; every
/// configuration before it passed with the defect planted), to one of `properties`.
fn expect_busy_found(
    what: &str,
    found: Option<checker::Found>,
    restart: bool,
    properties: &[&str],
) {
    let (_, message, spec) = found.as_ref().expect("the checker found no counterexample");
    println!("{what}:");
    let (name, _) = spec.rsplit_once(':').expect("a replay spec");
    let config = config(name);
    assert!(
        config.busy > 0,
        "{what} found without BUSY: {message}; {spec}"
    );
    assert!(
        !restart || config.restarts > 0,
        "{what} found without a restart: {message}; {spec}"
    );
    checker::expect_found(found, properties);
}

/// The driver hands a `BUSY` reply to the count-down's `Resend` as its reply (as if the
/// script had run and answered): the count-down ends without counting, its caller told
/// of an unreadable reply. A driver defect: whether an error reply reaches the core as a
/// reply or as a failure is decided in the driver (`src/scripts.rs`), not in the core.
#[test]
fn a_busy_reply_read_as_ran_is_caught() {
    let found = found_with(Scripts::real(), Driver::BusyReadAsReply);
    expect_busy_found("BusyReadAsReply", found, false, &["counted once"]);
}

/// Sanity: the real scripts pass this file's model at a small bound
/// (`tests/latch_check.rs`, the checker, runs the full bound).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    let world = World::new(Scripts::real(), Driver::Library);
    for config in latchmodel::configs() {
        let report = checker::explore::<Latch>(&world, &config, 12, MAX_STATES, &[]);
        assert!(!report.truncated, "{}: NOT exhaustive", config.name);
        assert_eq!(report.violation, None, "{}", config.name);
    }
}

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

    /// The reply reader takes "1 remains" for "open".
    #[test]
    fn a_reader_that_opens_early_is_caught() {
        expect_core(Defect::LatchOneReadAsOpen, &["reports are true"]);
    }

    /// Every count-down of a client sent under one sequence number: the script takes a
    /// new count-down for a copy of the last one.
    #[test]
    fn a_count_down_without_its_own_id_is_caught() {
        expect_core(Defect::LatchSeqDropped, &["counted once"]);
    }

    /// Every client's count-downs sent under one empty client tag: another client's
    /// count-down with the same sequence number is taken for a copy of an applied one.
    #[test]
    fn a_count_down_without_its_client_is_caught() {
        expect_core(Defect::LatchTagDropped, &["counted once"]);
    }

    /// The count-down's reader takes "not a latch" for "open": a count-down of a key that
    /// another program wrote reports the latch open.
    #[test]
    fn a_wrong_type_read_as_open_is_caught() {
        expect_core(Defect::LatchWrongTypeReadAsOpen, &["reports are true"]);
    }

    /// The set's and delete's reader takes "not a latch" for "nothing to do": closing a
    /// key that another program wrote reports the latch already closed.
    #[test]
    fn a_wrong_type_read_as_not_done_is_caught() {
        expect_core(Defect::LatchWrongTypeReadAsNotDone, &["reports are true"]);
    }

    /// [`expect_busy_found`] with `defect` planted in the core (the model's driver is the
    /// library's).
    fn expect_core_busy(defect: Defect, restart: bool, properties: &[&str]) {
        plant(Some(defect));
        let found = found_with(Scripts::real(), Driver::Library);
        plant(None);
        expect_busy_found(&format!("{defect:?}"), found, restart, properties);
    }

    /// The core's classifier (`Failure::from_server_error`) reads `BUSY`/`LOADING` as
    /// permanent: the count-down's `Resend` gives up at the first `BUSY`, without
    /// counting.
    #[test]
    fn a_busy_reply_read_as_permanent_is_caught() {
        expect_core_busy(Defect::TransientReadAsPermanent, false, &["counted once"]);
    }

    /// The core's classifier reads only `LOADING` as permanent: a count-down refused
    /// while Redis loads after a restart gives up without counting. Only a restart
    /// reaches it.
    #[test]
    fn a_loading_reply_read_as_permanent_is_caught() {
        expect_core_busy(Defect::LoadingReadAsPermanent, true, &["counted once"]);
    }
}
