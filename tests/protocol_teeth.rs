//! Teeth for the protocol checker: each test plants one known defect in a copy of a real
//! script and asserts that the checker finds a counterexample to the property the defect
//! breaks. A checker that passed these would not be checking anything.

#[path = "protocol/configs.rs"]
mod configs;
#[path = "protocol/explore.rs"]
mod explore;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/model.rs"]
mod model;

use model::{Config, Scripts};
use redis_locks::protocol::ScriptId;

/// Explores every default configuration with `scripts` until one finds a violation.
fn counterexample(scripts: Scripts, depth: usize) -> Option<(&'static str, String, String)> {
    for config in configs::all() {
        let report = explore::explore(&config, scripts.clone(), depth, 2_000_000);
        if let Some((property, message, path)) = report.violation {
            let replay = format!("{}:{}", config.name, explore::path_text(&path));
            return Some((property, message, replay));
        }
    }
    None
}

fn expect(scripts: Scripts, depth: usize, properties: &[&str]) {
    let found = counterexample(scripts, depth);
    println!("{found:?}");
    let (property, message, replay) = found.expect("the checker found no counterexample");
    assert!(
        properties.contains(&property),
        "found {property} ({message}; {replay}), expected one of {properties:?}"
    );
}

/// The pre-redesign release: it ignored which hold it named, so a stale guard (or a late
/// retry) gave back a newer hold of the same owner.
#[test]
fn a_release_that_ignores_the_hold_id_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Release,
        "if not held[1] or held[2] ~= hold then",
        "if not held[1] then",
    );
    expect(scripts, 10, &["never two holders", "release is true"]);
}

/// A retried partial release that decrements again.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_retry_that_decrements_again_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Release,
        "if held[3] == seq then\n  return -3\nend",
        "",
    );
    expect(
        scripts,
        12,
        &["never two holders", "no orphans", "release is true"],
    );
}

/// A re-entry that sets the expiry without GT can cut an outer hold's lease short.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn pexpire_without_gt_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Acquire,
        "redis.call('PEXPIRE', lock, lease, 'GT')",
        "redis.call('PEXPIRE', lock, lease)",
    );
    expect(scripts, 10, &["never two holders"]);
}

/// An acquire that grants while another owner holds.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_that_grants_over_another_owner_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Acquire,
        "if not held[1] then\n  redis.call('HSETNX', lock, WAITING, 1)",
        "if not held[1] then\n  redis.call('HSET', lock, owner, 1)\n  return {1, 1, held[2], 0}\nend\nif false then",
    );
    expect(scripts, 8, &["never two holders"]);
}

/// A renewal that extends a hold that is not its own (no hold-id check).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_of_a_hold_that_is_not_its_own_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Renew,
        "if hold == ARGV[i + 2] then",
        "if hold then",
    );
    expect(scripts, 12, &["never two holders", "losses are told"]);
}

/// Sanity: the real scripts pass at the same bounds (the teeth above bite on the defect,
/// not on the model).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    assert_eq!(counterexample(Scripts::real(), 8), None);
}

/// A partial release that re-arms the expiry without checking that the owner's remaining
/// count is all the sender's own guards: it can cut short a hold of the same owner in
/// another client.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "depth 17: about 30 s in a release build; scripts/check-protocol.sh runs it"
)]
fn a_rearm_without_the_count_check_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Release,
        "local rearm = ARGV[6] ~= '0' and count - 1 == tonumber(ARGV[7])",
        "local rearm = ARGV[6] ~= '0'",
    );
    // One owner on two clients, nothing else going on: the shortest way to the defect
    // (client 0 holds twice, client 1 joins with a longer lease, client 0 gives one
    // back, the clock passes client 0's end) is longer than the default bound.
    let config = Config {
        name: "one owner on two clients, re-arm",
        owners: vec!["a", "a"],
        acquires: 2,
        fenced: false,
        faults: 0,
        restarts: 0,
        force_unlocks: 0,
        advances: 2,
    };
    let report = explore::explore(&config, scripts.clone(), 17, 3_000_000);
    println!("{:?}", report.violation.as_ref().map(|v| (v.0, &v.1)));
    let (property, message, _) = report
        .violation
        .expect("the checker found no counterexample");
    assert!(
        ["never two holders", "losses are told"].contains(&property),
        "{property}: {message}"
    );
    // The real script passes the same exploration.
    let report = explore::explore(&config, Scripts::real(), 17, 3_000_000);
    assert!(report.violation.is_none(), "{:?}", report.violation);
}

/// Defects planted in the Rust core (`redis_locks::protocol::planted`): the checker runs
/// the library's own decisions, so a defect in them must be found too, at the default
/// bound. Needs the `planted-defects` feature (`scripts/check-protocol.sh` turns it on).
#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks::protocol::planted::{Defect, plant};

    /// The default bound of `tests/protocol_check.rs` in a release build.
    const DEFAULT_DEPTH: usize = 13;

    fn expect_core(defect: Defect, properties: &[&str]) {
        plant(Some(defect));
        let found = counterexample(Scripts::real(), DEFAULT_DEPTH);
        plant(None);
        println!("{defect:?}: {found:?}");
        let (property, message, replay) = found.expect("the checker found no counterexample");
        assert!(
            properties.contains(&property),
            "found {property} ({message}; {replay}), expected one of {properties:?}"
        );
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn the_drift_margin_added_instead_of_subtracted_is_caught() {
        expect_core(
            Defect::DriftAdded,
            &["never two holders", "losses are told"],
        );
    }

    #[test]
    fn a_renewal_that_ignores_the_lease_mode_is_caught() {
        expect_core(
            Defect::RenewalIgnoresMode,
            &["never two holders", "losses are told"],
        );
    }

    #[test]
    fn adoption_that_ignores_the_lease_is_caught() {
        expect_core(
            Defect::AdoptionIgnoresLease,
            &["never two holders", "losses are told"],
        );
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_release_that_claims_a_gone_hold_is_caught() {
        expect_core(Defect::ReleaseClaimsGoneHold, &["release is true"]);
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_lost_acquire_that_is_forgotten_is_caught() {
        expect_core(Defect::LostAcquireForgotten, &["no orphans"]);
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn reconciliation_that_gives_up_early_is_caught() {
        expect_core(Defect::ReconcileGivesUpEarly, &["no orphans"]);
    }

    /// A renewal reply that overwrites belief instead of only lengthening it: harmless
    /// while a client's renewals are answered in the order they were sent, so only the
    /// configuration in which two ticks of one client are in flight at once catches it
    /// (an older tick's reply, answered after a newer one's, moves belief back below what
    /// Redis keeps: the hold would be declared lost while it is healthy). The default
    /// configurations explore their whole bound without finding it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn an_older_renewal_reply_that_overwrites_belief_is_caught_only_with_overlapping_ticks() {
        plant(Some(Defect::RenewalReplyOverwrites));
        let config = model::overlapping_ticks();
        let report = explore::explore(&config, Scripts::real(), DEFAULT_DEPTH, 3_000_000);
        let elsewhere = counterexample(Scripts::real(), DEFAULT_DEPTH);
        plant(None);
        let (property, message, path) = report
            .violation
            .expect("the overlapping-ticks configuration found no counterexample");
        println!(
            "{property}: {message}; {}:{}",
            config.name,
            explore::path_text(&path)
        );
        assert_eq!(property, "losses are told", "{message}");
        assert!(
            elsewhere.is_none(),
            "a default configuration caught it too: {elsewhere:?}"
        );
    }
}
