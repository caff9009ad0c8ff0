//! Counterexamples the protocol checker found, and the reproductions of the soundness
//! issue, kept as named step sequences: each must pass on the real scripts. Where a
//! sequence shows a defect of the pre-redesign protocol, it must also fail on a copy of the
//! scripts with that defect planted back.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/model.rs"]
mod model;

use model::{Config, Lock, Scripts, Step, World};
use redis_locks_protocol::ScriptId;

/// Replays named steps with `scripts`: the first violation, if any.
fn replay_steps(
    config: &Config,
    scripts: Scripts,
    steps: &[Step],
) -> Result<Option<checker::Violation>, String> {
    checker::replay_steps::<Lock>(&World::new(scripts), config, steps)
}

/// Fenced, so that every hold has the hash form these sequences were found in, one round
/// trip per acquire (an unfenced first hold is a string taken with a bare `SET NX`, and a
/// held lock then costs a second round trip: `tests/protocol_teeth.rs` plants the same
/// defects in the string form, and the checker explores both).
fn config(owners: Vec<&'static str>) -> Config {
    Config {
        name: "regression",
        owners,
        acquires: 3,
        fenced: true,
        faults: 3,
        restarts: 1,
        force_unlocks: 1,
        advances: 6,
    }
}

use Step::*;

fn acquire(client: usize, watchdog: bool) -> Step {
    Acquire { client, watchdog }
}
fn execute(client: usize) -> Step {
    Execute {
        client,
        renewal: false,
    }
}
fn deliver(client: usize) -> Step {
    Deliver {
        client,
        renewal: false,
    }
}
fn release(client: usize, guard: usize) -> Step {
    Release {
        client,
        guard,
        drop: false,
    }
}

/// The pre-redesign release: no hold id check.
fn legacy_release() -> Scripts {
    Scripts::real().planted(
        ScriptId::Release,
        "if not held[1] or held[2] ~= hold then",
        "if not held[1] then",
    )
}

/// Found by the checker while the redesign was under way: a fixed-lease acquire's reply is
/// lost, the probe is lost too, and a later watchdog-lease attempt adopted the hold with
/// the watchdog's lease. Its guard believed it held until t=28 while Redis expired the
/// key at t=15. Now a hold is adopted only on the same terms, else given back first.
#[test]
fn a_lost_fixed_lease_acquire_is_not_adopted_as_a_watchdog_hold() {
    let steps = [
        acquire(0, false),
        execute(0),
        LoseReply {
            client: 0,
            renewal: false,
        },
        LoseRequest {
            client: 0,
            renewal: false,
        },
        Advance,
        acquire(0, true),
        execute(0),
        deliver(0),
        // The hold is given back; the watchdog attempt is sent on its own terms.
        execute(0),
        deliver(0),
        execute(0),
        deliver(0),
        Advance,
        Tick { client: 0 },
        Execute {
            client: 0,
            renewal: true,
        },
        Deliver {
            client: 0,
            renewal: true,
        },
        Advance,
    ];
    let outcome = replay_steps(&config(vec!["a", "b"]), Scripts::real(), &steps);
    assert_eq!(outcome, Ok(None));
}

/// Soundness issue, item 1: owner a acquires (g1), the lock is force-unlocked, a acquires
/// again (g2). g1's release must not free g2's hold.
#[test]
fn a_stale_guard_cannot_free_a_newer_hold() {
    let steps = [
        acquire(0, true),
        execute(0),
        deliver(0),
        ForceUnlock,
        acquire(0, true),
        execute(0),
        deliver(0),
        release(0, 0),
        execute(0),
        deliver(0),
        acquire(1, true),
        execute(1),
        deliver(1),
    ];
    let cfg = config(vec!["a", "b"]);
    assert_eq!(replay_steps(&cfg, Scripts::real(), &steps), Ok(None));
    let legacy = replay_steps(&cfg, legacy_release(), &steps);
    assert!(
        matches!(legacy, Ok(Some(("never two holders", _)))),
        "{legacy:?}"
    );
}

/// Soundness issue, item 2: a final release runs but its reply is lost; before the retry
/// arrives, the same owner (another client, handover) acquires afresh. The retry must not
/// free that hold, and must not report Ok.
#[test]
fn a_retried_final_release_cannot_free_a_fresh_hold_of_the_same_owner() {
    let steps = [
        acquire(0, true),
        execute(0),
        deliver(0),
        release(0, 0),
        execute(0),
        LoseReply {
            client: 0,
            renewal: false,
        },
        acquire(1, true),
        execute(1),
        deliver(1),
        execute(0),
        deliver(0),
        acquire(0, true),
        execute(0),
        deliver(0),
    ];
    let cfg = config(vec!["a", "a"]);
    assert_eq!(replay_steps(&cfg, Scripts::real(), &steps), Ok(None));
    let legacy = replay_steps(&cfg, legacy_release(), &steps);
    assert!(legacy != Ok(None), "{legacy:?}");
}

/// Soundness issue, item 3: an acquire whose reply is lost in a long partition leaves no
/// orphan: the background reconciliation gives the hold back once Redis answers.
#[test]
fn an_acquire_lost_in_a_partition_is_reconciled() {
    let steps = [
        acquire(0, true),
        execute(0),
        LoseReply {
            client: 0,
            renewal: false,
        },
        LoseRequest {
            client: 0,
            renewal: false,
        },
        Reconcile { client: 0 },
        execute(0),
        deliver(0),
        // The give-back.
        execute(0),
        deliver(0),
        acquire(1, true),
        execute(1),
        deliver(1),
    ];
    assert_eq!(
        replay_steps(&config(vec!["a", "b"]), Scripts::real(), &steps),
        Ok(None)
    );
}

/// Soundness issue, item 4: a watchdog hold re-entered with a short fixed lease by the same
/// owner from another client must keep its expiry. Without GT, the key expires early while
/// the outer guard still believes it holds.
#[test]
fn a_nested_short_lease_from_another_client_does_not_cut_the_hold() {
    let steps = [
        acquire(0, true),
        execute(0),
        deliver(0),
        Advance,
        Tick { client: 0 },
        Execute {
            client: 0,
            renewal: true,
        },
        Deliver {
            client: 0,
            renewal: true,
        },
        acquire(1, false),
        execute(1),
        deliver(1),
        release(1, 0),
        execute(1),
        deliver(1),
        Advance,
        Tick { client: 0 },
        // This renewal is lost: only the expiry set before protects the outer hold now.
        LoseRequest {
            client: 0,
            renewal: true,
        },
        Advance,
    ];
    let cfg = config(vec!["a", "a"]);
    assert_eq!(replay_steps(&cfg, Scripts::real(), &steps), Ok(None));
    let no_gt = Scripts::real().planted(
        ScriptId::Acquire,
        "redis.call('PEXPIRE', lock, lease, 'GT')",
        "redis.call('PEXPIRE', lock, lease)",
    );
    let broken = replay_steps(&cfg, no_gt, &steps);
    assert!(broken != Ok(None), "{broken:?}");
}

/// Found when the checker first drove the library's own attempt machine: a re-entry's
/// reply times out, the background probe fails after the re-entry's own lease has run
/// out, and reconciliation gave up, although the count the re-entry added lives as long
/// as the outer hold (an orphaned count: after the last guard's release the lock stayed
/// held until it expired). The lane now keeps a request that may have re-entered a live
/// hold pending, so the owner's next request (its release at the latest) asks first.
#[test]
fn a_timed_out_reentry_is_not_given_up_while_its_hold_lives() {
    let steps = [
        acquire(0, true),
        execute(0),
        deliver(0),
        acquire(0, false),
        execute(0),
        TimeOut { client: 0 },
        Advance,
        Tick { client: 0 },
        Execute {
            client: 0,
            renewal: true,
        },
        Deliver {
            client: 0,
            renewal: true,
        },
        Advance,
        Reconcile { client: 0 },
        LoseRequest {
            client: 0,
            renewal: false,
        },
        // The owner's release probes first, gives the re-entry's count back, then
        // releases its own: nothing is left.
        release(0, 0),
        execute(0),
        deliver(0),
        execute(0),
        deliver(0),
        execute(0),
        deliver(0),
    ];
    let outcome = replay_steps(&config(vec!["a", "b"]), Scripts::real(), &steps);
    assert_eq!(outcome, Ok(None));
}

/// Found at depth 15 (`CHECK_DEPTH=15`): owner a holds, re-enters, and the re-entry runs;
/// the lock is force-unlocked; a watchdog tick finds the hold gone and tells its guard;
/// only then does the re-entry's reply arrive, and the registry tracks the same hold id
/// afresh. The next tick's "gone" must reach that new guard. The checker's model once
/// applied the reply to the first state with that hold id (the one already told), a glue
/// the real watchdog never had (its batch carries the registry entries it renews); the
/// model's renewals now carry the states they renew, as the batch does.
#[test]
fn a_reentry_answered_after_its_hold_was_told_lost_is_told_too() {
    let renewal = |client| {
        [
            Tick { client },
            Execute {
                client,
                renewal: true,
            },
            Deliver {
                client,
                renewal: true,
            },
        ]
    };
    let mut steps = vec![
        acquire(0, true),
        execute(0),
        deliver(0),
        Advance,
        acquire(0, true),
        execute(0),
        ForceUnlock,
    ];
    steps.extend(renewal(0));
    steps.extend([deliver(0), Advance]);
    steps.extend(renewal(0));
    let outcome = replay_steps(&config(vec!["a", "b"]), Scripts::real(), &steps);
    assert_eq!(outcome, Ok(None));
}
