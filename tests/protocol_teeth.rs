//! Teeth for the protocol checker: each test plants one known defect in a copy of a real
//! script and asserts that the checker finds a counterexample to the property the defect
//! breaks. A checker that passed these would not be checking anything.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/configs.rs"]
mod configs;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/model.rs"]
mod model;

use model::{Config, Lock, Scripts, World};
use redis_locks_protocol::ScriptId;

/// The default bound of `tests/protocol_check.rs` in a release build.
const DEFAULT_DEPTH: usize = 13;

/// Explores every default configuration with `scripts` until one finds a violation.
fn counterexample(scripts: Scripts, depth: usize) -> Option<checker::Found> {
    counterexample_in(&configs::all(), scripts, depth)
}

/// Explores `configs` (each at `depth` plus its own extra depth) until one finds a
/// violation.
fn counterexample_in(configs: &[Config], scripts: Scripts, depth: usize) -> Option<checker::Found> {
    checker::counterexample::<Lock>(&World::new(scripts), configs, depth, 3_000_000)
}

fn expect(scripts: Scripts, depth: usize, properties: &[&str]) {
    checker::expect_found(counterexample(scripts, depth), properties);
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

/// A final release of a first hold (the string form) that deletes any unmarked first
/// hold, not only the one it names: the raw lock's compare-and-delete without the compare.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_release_of_a_first_hold_that_ignores_its_value_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Release,
        "if value == '\\1' .. mine then",
        "if string.byte(value) == 1 then",
    );
    expect(scripts, 10, &["never two holders", "release is true"]);
}

/// `release_first.lua` deleting any unmarked first hold, not only the one it names.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_first_release_that_ignores_its_value_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::ReleaseFirst,
        "  if value == ARGV[1] then",
        "  if string.byte(value) == 1 then",
    );
    expect(scripts, 10, &["never two holders", "release is true"]);
}

/// `release_first.lua` that takes the hash form for a given-back hold (0, not -4): the
/// owner's other client's re-entry keeps the lock while the release reports it freed.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_first_release_that_claims_a_hash_is_caught() {
    let scripts = Scripts::real().planted(ScriptId::ReleaseFirst, "return -4", "return 0");
    expect(
        scripts,
        13,
        &["release is true", "no orphans", "never two holders"],
    );
}

/// A renewal that extends any first hold (the string form), whoever's.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_of_a_first_hold_that_is_not_its_own_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Renew,
        "hold = (mark == 1 or mark == 2) and string.find(hold, id, 2, true) == 2\n        and string.byte(hold, #id + 2) == 1 and id",
        "hold = id",
    );
    expect(scripts, 12, &["never two holders", "losses are told"]);
}

/// A probe that takes any first hold (the string form) for the lost request's: the
/// client adopts, or gives back, a hold that is not its own.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_probe_that_owns_up_to_any_first_hold_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Probe,
        "if value == '\\1' .. mine or value == '\\2' .. mine then",
        "if true then",
    );
    expect(
        scripts,
        DEFAULT_DEPTH,
        &["never two holders", "release is true", "no orphans"],
    );
}

/// A re-entry into a first hold (the string form) that keeps the string's expiry when
/// the re-entry's lease reaches further (what PEXPIRE GT gives a hash): the re-entering
/// guard believes in a lease Redis does not keep.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_reentry_into_a_first_hold_that_keeps_its_expiry_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Acquire,
        "local expiry = math.max(pttl, tonumber(lease))",
        "local expiry = pttl",
    );
    expect(
        scripts,
        DEFAULT_DEPTH,
        &["never two holders", "losses are told"],
    );
}

/// A renewal that reads a hash-form hold's id with its '#' (the client's hint that the
/// hold is a hash) still on: every re-entered or fenced hold looks lost.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_that_keeps_the_hash_hint_in_the_id_is_caught() {
    let scripts = Scripts::real().planted(ScriptId::Renew, "    id = string.sub(id, 2)\n", "");
    expect(scripts, DEFAULT_DEPTH, &["losses are told"]);
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
    let scripts = Scripts::real().planted(ScriptId::Renew, "if hold == id then", "if hold then");
    expect(scripts, 12, &["never two holders", "losses are told"]);
}

/// Explores the one configuration whose users extend their guards (`model::extends`) at
/// the default bound, with `scripts` (and whatever core defect is planted): the
/// counterexample, which must be one of `properties` and must extend a guard on its way.
fn expect_found_by_an_extend(scripts: Scripts, properties: &[&str]) {
    let config = model::extends();
    let found = counterexample_in(
        std::slice::from_ref(&config),
        scripts.clone(),
        DEFAULT_DEPTH,
    );
    checker::expect_found(found.clone(), properties);
    let (_, _, spec) = found.expect("found");
    let (name, path) = spec.rsplit_once(':').expect("<config>:<steps>");
    assert_eq!(name, model::EXTENDS);
    let path = checker::parse_path(path).expect("a path");
    let (trace, violation) =
        checker::replay::<Lock>(&World::new(scripts), &config, &path, &[]).expect("replays");
    print!("{trace}");
    assert!(violation.is_some(), "the replay found no violation");
    assert!(
        trace.contains("Extend {"),
        "the counterexample extends no guard:\n{trace}"
    );
}

/// A renewal that sets the expiry without GT: the watchdog's tick after an extend to a
/// longer lease (or an extend to a shorter lease than the expiry left) cuts the expiry
/// below what the holder believes. Without extends nothing asks `renew.lua` for less than
/// the expiry a current hold has (a nested fixed lease is shorter than the watchdog's):
/// every other configuration explores its whole default bound without finding it (checked
/// once, about 100 s, so not on every run), and only the extend configuration is searched.
#[test]
fn a_renewal_without_gt_is_caught_by_an_extend() {
    let scripts = Scripts::real().planted(
        ScriptId::Renew,
        "redis.call('PEXPIRE', renewed[k], lease, 'GT')",
        "redis.call('PEXPIRE', renewed[k], lease)",
    );
    expect_found_by_an_extend(scripts, &["never two holders"]);
}

/// The same, for the watchdog's lease only (an extension's call keeps GT): what is left
/// is the watchdog's tick after an extend to a longer lease, which cuts the expiry the
/// extend set back to the watchdog's lease while the holder believes the extension.
#[test]
fn a_watchdog_renewal_without_gt_after_an_extend_is_caught() {
    let renewal = format!(
        "if lease == '{}' then redis.call('PEXPIRE', renewed[k], lease) else \
         redis.call('PEXPIRE', renewed[k], lease, 'GT') end",
        model::LEASE
    );
    let scripts = Scripts::real().planted(
        ScriptId::Renew,
        "redis.call('PEXPIRE', renewed[k], lease, 'GT')",
        &renewal,
    );
    expect_found_by_an_extend(scripts, &["never two holders"]);
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
    ignore = "depth 13 + 4: about 30 s in a release build; scripts/check-protocol.sh runs it"
)]
fn a_rearm_without_the_count_check_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::Release,
        "local rearm = ARGV[6] ~= '0' and count - 1 == tonumber(ARGV[7])",
        "local rearm = ARGV[6] ~= '0'",
    );
    // One owner on two clients, nothing else going on: the shortest way to the defect
    // (client 0 holds twice, client 1 joins with a longer lease, client 0 gives one
    // back, the clock passes client 0's end) is 17 steps, so the checker explores that
    // configuration 4 steps deeper than its default bound (`model::REARM_EXTRA_DEPTH`);
    // `tests/protocol_check.rs` runs the real script through the same exploration.
    let found = counterexample_in(&[model::rearm()], scripts, DEFAULT_DEPTH);
    checker::expect_found(found, &["never two holders", "losses are told"]);
}

/// Defects planted in the Rust core (`redis_locks_protocol::planted`): the checker runs
/// the library's own decisions, so a defect in them must be found too, at the default
/// bound. Needs the `planted-defects` feature (`scripts/check-protocol.sh` turns it on).
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
    fn the_drift_margin_added_instead_of_subtracted_is_caught() {
        expect_core(
            Defect::DriftAdded,
            &["never two holders", "losses are told"],
        );
    }

    /// Every hold taken for the hash form: a first hold's renewal reads a hash that is not
    /// there and tells a live hold lost.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn every_hold_taken_for_the_hash_form_is_caught() {
        expect_core(Defect::HashFormAssumed, &["losses are told"]);
    }

    /// `release_first.lua`'s "the hash form" (-4: another client of the owner re-entered
    /// the hold, nothing was written) read as the hold given back: the release reports Ok
    /// while no execution of it gave anything back, and the owner's count stays.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_first_release_that_reads_the_hash_form_as_released_is_caught() {
        expect_core(
            Defect::HashFormReadAsReleased,
            &["release is true", "no orphans", "never two holders"],
        );
    }

    /// A bare `SET NX` that found the key read as a grant.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_take_that_found_the_key_read_as_a_grant_is_caught() {
        expect_core(Defect::TakeNilReadAsGranted, &["never two holders"]);
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

    /// A reconciliation that stops a lease after the loss was noticed, whatever its
    /// probes met since: a timed-out acquire that runs later (the clock moved while it
    /// waited on the connection) leaves a hold nobody owns (the rule before the multi-lock
    /// checker found it).
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn reconciliation_that_stops_at_the_first_bound_is_caught() {
        expect_core(Defect::ReconcileStopsOnTimeouts, &["no orphans"]);
    }

    /// An extension credited from the end of the lease as last confirmed, not from its
    /// send ("extend by" for "extend to"): the holder believes past the expiry
    /// `renew.lua` set.
    #[test]
    fn an_extension_credited_from_the_lease_end_is_caught() {
        plant(Some(Defect::ExtensionCreditedFromLeaseEnd));
        let result = std::panic::catch_unwind(|| {
            expect_found_by_an_extend(Scripts::real(), &["never two holders"])
        });
        plant(None);
        if let Err(panic) = result {
            std::panic::resume_unwind(panic);
        }
    }

    /// A renewal reply that overwrites belief instead of only lengthening it: harmless
    /// while a client's renewals are answered in the order they were sent, so only the
    /// configuration in which two ticks of one client are in flight at once catches it
    /// (an older tick's reply, answered after a newer one's, moves belief back below what
    /// Redis keeps: the hold would be declared lost while it is healthy). That the default
    /// configurations explore their whole bound without finding it is the next test's,
    /// run by hand.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn an_older_renewal_reply_that_overwrites_belief_is_caught_only_with_overlapping_ticks() {
        plant(Some(Defect::RenewalReplyOverwrites));
        let config = model::overlapping_ticks();
        let world = World::new(Scripts::real());
        let report = checker::explore::<Lock>(&world, &config, DEFAULT_DEPTH, 3_000_000, &[]);
        plant(None);
        let (property, message, path) = report
            .violation
            .expect("the overlapping-ticks configuration found no counterexample");
        println!(
            "{property}: {message}; {}:{}",
            config.name,
            checker::path_text(&path)
        );
        assert_eq!(property, "losses are told", "{message}");
    }

    /// Why the overlapping-ticks configuration exists: the defect above passes every
    /// default configuration at the full bound. About 150 s (the whole default
    /// exploration again), so not in `./scripts/check-protocol.sh`; run it with
    /// `cargo test --release --features planted-defects --test protocol_teeth -- --ignored`.
    #[test]
    #[ignore = "by hand (about 150 s in a release build): the default configurations miss the overwriting renewal reply"]
    fn an_older_renewal_reply_that_overwrites_belief_passes_the_default_configurations() {
        plant(Some(Defect::RenewalReplyOverwrites));
        let elsewhere = counterexample(Scripts::real(), DEFAULT_DEPTH);
        plant(None);
        assert!(
            elsewhere.is_none(),
            "a default configuration caught it too: {elsewhere:?}"
        );
    }
}
