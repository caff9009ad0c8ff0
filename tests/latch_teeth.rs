//! Teeth for the count-down latch's checker (`tests/latch_check.rs`): each test plants one
//! known defect, in a copy of a script or in the Rust core, and asserts that the checker
//! finds a counterexample to the property it breaks, at the default bound.

#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/latchmodel.rs"]
mod latchmodel;
#[path = "protocol/lua.rs"]
mod lua;

use latchmodel::Scripts;
use redis_locks::protocol::ScriptId;

/// The default bound of `tests/latch_check.rs` in a release build.
const DEFAULT_DEPTH: usize = 18;

fn counterexample(scripts: Scripts) -> Option<(&'static str, String)> {
    for config in latchmodel::configs() {
        let report = latchmodel::explore(&config, scripts.clone(), DEFAULT_DEPTH, 3_000_000);
        assert!(!report.truncated, "{}: NOT exhaustive", config.name);
        if let Some((property, message, path)) = report.violation {
            let message = format!("{message} ({}, depth {})", config.name, path.len());
            return Some((property, message));
        }
    }
    None
}

fn expect(scripts: Scripts, properties: &[&str]) {
    let found = counterexample(scripts);
    println!("{found:?}");
    let (property, message) = found.expect("the checker found no counterexample");
    assert!(
        properties.contains(&property),
        "found {property} ({message}), expected one of {properties:?}"
    );
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

/// Sanity: the real scripts pass at the same bound.
#[test]
fn the_real_scripts_pass() {
    assert_eq!(counterexample(Scripts::real()), None);
}

#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks::protocol::planted::{Defect, plant};

    fn expect_core(defect: Defect, properties: &[&str]) {
        plant(Some(defect));
        let found = counterexample(Scripts::real());
        plant(None);
        println!("{defect:?}: {found:?}");
        let (property, message) = found.expect("the checker found no counterexample");
        assert!(
            properties.contains(&property),
            "found {property} ({message}), expected one of {properties:?}"
        );
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
}
