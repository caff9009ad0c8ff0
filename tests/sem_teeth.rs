//! Teeth for the semaphore's checker (`tests/sem_check.rs`): each test plants one known
//! defect, in a copy of a real script or in the Rust core, and asserts that the checker
//! finds a counterexample to the property the defect breaks.

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/semmodel.rs"]
mod semmodel;

use redis_locks_protocol::ScriptId;
use semmodel::{Config, Scripts, Sem, World};

/// Explores every default configuration with `scripts` until one finds a violation.
fn counterexample(scripts: Scripts, depth: usize) -> Option<checker::Found> {
    counterexample_in(&semmodel::configs(), scripts, depth)
}

/// Explores `configs` with `scripts` until one finds a violation.
fn counterexample_in(configs: &[Config], scripts: Scripts, depth: usize) -> Option<checker::Found> {
    let world = World::new(scripts);
    checker::counterexample::<Sem>(&world, configs, depth, 3_000_000)
}

fn expect(scripts: Scripts, depth: usize, properties: &[&str]) {
    checker::expect_found(counterexample(scripts, depth), properties);
}

/// A grant that counts one permit too many as free.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_past_the_size_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemAcquire,
        "if n >= 1 and used + reserved + n <= size then",
        "if n >= 1 and used + reserved + n <= size + 1 then",
    );
    expect(scripts, 8, &["never more permits than the size"]);
}

/// A retried acquire that does not look for the permits an earlier copy took: it takes
/// them again, with a later deadline.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_that_forgets_its_earlier_copy_is_caught() {
    let scripts = Scripts::real().planted(ScriptId::SemAcquire, "if mine then", "if false then");
    expect(scripts, 8, &["no permit counted twice"]);
}

/// A grant that leaves the permits set without a TTL.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_without_expiry_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemAcquire,
        "redis.call('PEXPIRE', permits, lease)",
        "local _ = lease",
    );
    expect(scripts, 6, &["no orphans, no garbage"]);
}

/// A give-back that removes whichever permit comes first in the set, once it found its
/// own.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_release_of_another_ids_permits_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRelease,
        "removed = removed + redis.call('ZREM', permits, ARGV[1] .. ':' .. k)",
        "local first = redis.call('ZRANGE', permits, 0, 0)[1]\n\
         removed = removed + redis.call('ZREM', permits, first)",
    );
    expect(
        scripts,
        10,
        &[
            "a call takes only its own permits and reservation",
            "belief is true",
        ],
    );
}

/// A give-back of an acquisition of n that removes only its first permit.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_release_of_one_permit_of_two_is_caught() {
    let scripts =
        Scripts::real().planted(ScriptId::SemRelease, "for k = 1, n do", "for k = 1, 1 do");
    expect(
        scripts,
        8,
        &["no permit counted twice", "no orphans, no garbage"],
    );
}

/// A waiter that stops waiting drops whoever's reservation is there.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_leave_that_drops_another_waiters_reservation_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRelease,
        "local unreserve = ARGV[5] == '1' and redis.call('HGET', sem, 'resv') == ARGV[1]",
        "local unreserve = ARGV[5] == '1'",
    );
    expect(
        scripts,
        10,
        &["a call takes only its own permits and reservation"],
    );
}

/// A renewal that finds an expired permit still in the set renews it instead of telling
/// the loss.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_renewal_that_revives_an_expired_permit_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRenew,
        "if type(score) ~= 'string' or tonumber(score) <= now then",
        "if type(score) ~= 'string' then",
    );
    expect(scripts, 11, &["losses are told"]);
}

/// An acquire that takes a missing size for a default one. Only a restart with data loss
/// (before the size is set again) leaves the semaphore without a size: found in the
/// restart configuration, and only there.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn an_acquire_that_defaults_a_lost_size_is_caught() {
    let scripts = Scripts::real()
        .planted(
            ScriptId::SemAcquire,
            "  if kind == 'none' then\n    return {3}\n  end\n  return {2, kind}",
            "  if kind ~= 'none' then\n    return {2, kind}\n  end",
        )
        .planted(
            ScriptId::SemAcquire,
            "local size = tonumber(state[1])",
            "local size = tonumber(state[1]) or 2",
        );
    let found = counterexample(scripts, 8);
    let replay = found.as_ref().map(|(_, _, replay)| replay.clone());
    let expected = ["never more permits than the size", "no orphans, no garbage"];
    checker::expect_found(found, &expected);
    let replay = replay.unwrap_or_default();
    assert!(replay.starts_with("sem: size 1, restart"), "{replay}");
}

/// A give-back of an abandoned acquire (`leaving`: the waiting loop's, with the
/// reservation) that drops only the reservation, as if an acquire that did not get its
/// grant could hold no permits: a copy of its attempt that ran unseen, or that is still on
/// the connection and runs late, took permits that nobody gives back. In the earlier
/// configurations a give-back that leaves finds no permits (a waiter between attempts was
/// refused, and a restart took what its lost copies had taken): they pass at the default
/// bound, and a configuration with late requests (an acquire dropped, or given up, while a
/// copy of its attempt may still run) catches it, its trace with a stray. Not with late
/// requests only: a copy that ran and lost its reply before the acquire was dropped (or
/// gave up) leaves the same orphan: the same trace with `Run` before `Drop`.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_leave_that_keeps_the_permits_of_an_abandoned_acquire_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRelease,
        "local held = n ~= 0 and redis.call('ZSCORE', permits, ARGV[1] .. ':1')",
        "local held = n ~= 0 and ARGV[5] ~= '1' and redis.call('ZSCORE', permits, ARGV[1] .. ':1')",
    );
    let world = World::new(scripts);
    let mut passed = Vec::new();
    for config in semmodel::configs() {
        let configs = std::slice::from_ref(&config);
        let found = checker::counterexample::<Sem>(&world, configs, 12, 3_000_000);
        let Some((property, message, replay)) = found else {
            passed.push(config.name);
            continue;
        };
        println!("{property}: {message}; {replay}; passed before: {passed:?}");
        assert_eq!(property, "no orphans, no garbage", "{message}; {replay}");
        assert!(
            config.timeouts > 0 || config.drops > 0,
            "caught without late requests: {replay}"
        );
        let earlier = semmodel::configs().into_iter().take(passed.len());
        assert!(earlier.into_iter().all(|c| c.timeouts == 0 && c.drops == 0));
        // The trace: a stray of the abandoned acquire ran.
        let (_, path) = replay.rsplit_once(':').expect("a replay spec");
        let path = checker::parse_path(path).expect("a path");
        let mut state = semmodel::State::initial(&config);
        let mut strays = 0;
        for &index in &path {
            let step = state.steps(&config)[index as usize].clone();
            strays += usize::from(matches!(step, semmodel::Step::ExecuteStray(_)));
            println!("  {step:?}");
            state.apply(&step, &world, &config);
        }
        assert!(strays > 0, "no stray ran: {replay}");
        return;
    }
    panic!("the checker found no counterexample (passed: {passed:?})");
}

/// The default configurations with drains (`Semaphore::drain_permits`: a request of 0
/// permits): the only ones that run `sem_acquire.lua` with n = 0 and `sem_release.lua`
/// with n = -1, so the only ones a defect there can show in.
fn drain_configs() -> Vec<Config> {
    let drains = |c: &Config| c.requests.iter().any(|&(n, _)| n == 0);
    semmodel::configs().into_iter().filter(drains).collect()
}

/// Explores the configurations with drains with `scripts` (a defect in a drain's branch
/// of a script) and expects a counterexample to one of `properties`, whose trace drains.
fn expect_in_drains(scripts: Scripts, depth: usize, properties: &[&str]) {
    let world = World::new(scripts);
    let found = checker::counterexample::<Sem>(&world, &drain_configs(), depth, 3_000_000);
    let replay = found.as_ref().map(|(_, _, replay)| replay.clone());
    checker::expect_found(found, properties);
    let replay = replay.unwrap_or_default();
    let (name, path) = replay.rsplit_once(':').expect("a replay spec");
    let config = drain_configs().into_iter().find(|c| c.name == name);
    let config = config.expect("a configuration with drains");
    let mut state = semmodel::State::initial(&config);
    let mut drained = false;
    for &index in &checker::parse_path(path).expect("a path") {
        let step = state.steps(&config)[index as usize].clone();
        drained |= matches!(step, semmodel::Step::Acquire(_, 0, _));
        println!("  {step:?}");
        state.apply(&step, &world, &config);
    }
    assert!(drained, "no drain in the trace: {replay}");
}

/// A drain that takes the permits kept for another waiter's reservation too (every
/// permit not in use): it starves the waiter the reservation is for. Only a drain's
/// branch is changed (an exact ask still leaves them).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_drain_that_takes_reserved_permits_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemAcquire,
        "  n = size - used - reserved\n",
        "  n = size - used\n  reserved = 0\n",
    );
    let properties = ["a call takes only its own permits and reservation"];
    expect_in_drains(scripts, 8, &properties);
}

/// A drain whose reply was lost, retried: the retry finds its permits and counts one too
/// few (its guard would renew, believe in and give back one permit less than it holds).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_drain_retry_that_counts_one_too_few_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemAcquire,
        "return {1, tonumber(mine), k}",
        "return {1, tonumber(mine), math.max(k - 1, 1)}",
    );
    expect_in_drains(scripts, 6, &["no permit counted twice"]);
}

/// The give-back of a drain (n = -1: however many it has) that stops one permit early:
/// the last one stays in use with nobody to give it back.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_drain_give_back_that_stops_one_early_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemRelease,
        "  while redis.call('ZREM', permits, ARGV[1] .. ':' .. (removed + 1)) == 1 do",
        "  while redis.call('ZSCORE', permits, ARGV[1] .. ':' .. (removed + 2))\n    \
         and redis.call('ZREM', permits, ARGV[1] .. ':' .. (removed + 1)) == 1 do",
    );
    expect_in_drains(
        scripts,
        6,
        &["no permit counted twice", "no orphans, no garbage"],
    );
}

/// A shrink (`add_permits` with a negative delta, `sem_set.lua` mode '2') that takes back
/// the permits in use beyond the new size: their holders still believe in them. Only an
/// operator's `add_permits` step runs it (the configurations set the size once, before
/// anything is in use).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_shrink_that_takes_permits_back_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::SemSet,
        "redis.call('HSET', sem, 'size', size)",
        "if used > tonumber(size) then\n  \
         for _, m in ipairs(redis.call('ZRANGE', permits, 0, used - tonumber(size) - 1)) do\n    \
         redis.call('ZREM', permits, m)\n  end\nend\nredis.call('HSET', sem, 'size', size)",
    );
    let adds: Vec<Config> = semmodel::configs()
        .into_iter()
        .filter(|c| c.adds > 0)
        .collect();
    let found = counterexample_in(&adds, scripts, 6);
    checker::expect_found(
        found,
        &[
            "a call takes only its own permits and reservation",
            "belief is true",
        ],
    );
}

/// Sanity: the real scripts pass at a small bound.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    assert_eq!(counterexample(Scripts::real(), 9), None);
}

/// Defects planted in the Rust core (`redis_locks_protocol::planted`) that the semaphore
/// checker runs: the hold bookkeeping, the re-send machine, the give-back reading (shared
/// with the other kinds), and the semaphore's own reply reader and renewal call. Each must
/// be found at the default bound. Needs the `planted-defects` feature.
#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks_protocol::planted::{Defect, plant};

    /// The default bound of `tests/sem_check.rs` in a release build.
    const DEFAULT_DEPTH: usize = 12;

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
        // Caught when the reply is read (its grant counts permits Redis does not hold
        // under the id), or later by what the client then believes.
        expect_core(
            Defect::SemWaitReadAsGrant,
            &[
                "no permit counted twice",
                "never more permits than the size",
                "belief is true",
            ],
        );
    }

    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_renewal_of_one_permit_of_two_is_caught() {
        // The renewed permit and its sibling part: caught as soon as their deadlines differ.
        expect_core(
            Defect::SemRenewsOnePermit,
            &["no permit counted twice", "belief is true"],
        );
    }
}

/// A waiter's next attempt, after one that gave up with its outcome unknown, confirms a
/// grant from its own first send (the defect the deeper configuration found in the
/// library, fixed by the core's `SendHistory`): "belief is true" fails at depth 14.
#[test]
#[cfg(feature = "planted-defects")]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_next_attempt_that_forgets_earlier_sends_is_caught() {
    use redis_locks_protocol::planted::{Defect, plant};
    plant(Some(Defect::AttemptsForgetEarlierSends));
    // The default bound, 12, and the probes' 2 steps more (`Config::extra_depth`): 14.
    let found = counterexample_in(&semmodel::probes(), Scripts::real(), 12);
    plant(None);
    checker::expect_found(found, &["belief is true"]);
}
