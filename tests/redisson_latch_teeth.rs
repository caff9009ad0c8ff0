//! Teeth for the checker of the count-down latch in Redisson's RCountDownLatch layout
//! (`tests/redisson_latch_check.rs`): each test plants one known defect, in a copy of a
//! script (`lua/redisson_latch_*.lua`) or in the Rust core (`planted::Defect`, feature
//! `planted-defects`), and asserts that the checker finds a counterexample to the property
//! it breaks, at the default bound. The Java peer's scripts (Redisson's own) are never
//! planted: they are what the library must live with. In a debug build only the teeth that
//! the first configuration finds within a few steps run; the others explore whole
//! configurations before theirs, and are release only (`./scripts/check-protocol.sh`).

#[path = "protocol/checker.rs"]
mod checker;
#[path = "protocol/keyspace.rs"]
mod keyspace;
#[path = "protocol/lua.rs"]
mod lua;
#[path = "protocol/redissonlatchmodel.rs"]
mod redissonlatchmodel;

use redis_locks_protocol::ScriptId;
use redissonlatchmodel::{Config, DEFAULT_DEPTH, RedissonLatch, Scripts, World};

const MAX_STATES: usize = 3_000_000;

fn config(name: &str) -> Config {
    redissonlatchmodel::configs()
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no configuration {name:?}"))
}

/// The first counterexample, in the order of the configurations (every configuration
/// before it passed with the defect planted); its trace is printed.
fn counterexample(scripts: Scripts) -> Option<checker::Found> {
    let world = World::new(scripts);
    let found = checker::counterexample::<RedissonLatch>(
        &world,
        &redissonlatchmodel::configs(),
        DEFAULT_DEPTH,
        MAX_STATES,
    );
    if let Some((_, _, spec)) = &found
        && let Some((name, path)) = spec.rsplit_once(':')
        && let Ok(path) = checker::parse_path(path)
        && let Ok((trace, _)) = checker::replay::<RedissonLatch>(&world, &config(name), &path, &[])
    {
        print!("{trace}");
    }
    found
}

fn expect(scripts: Scripts, properties: &[&str]) {
    checker::expect_found(counterexample(scripts), properties);
}

/// Asserts that `found` came from a configuration that `needs` (what the defect needs
/// to show: a clobber, the clock, `BUSY`), and broke one of `properties`.
fn expect_found_by(
    found: Option<checker::Found>,
    needs: (&str, fn(&Config) -> bool),
    properties: &[&str],
) {
    let (_, message, spec) = found.as_ref().expect("the checker found no counterexample");
    let (name, _) = spec.rsplit_once(':').expect("a replay spec");
    let (what, has) = needs;
    assert!(
        has(&config(name)),
        "found without {what}: {message}; {spec}"
    );
    checker::expect_found(found, properties);
}

/// A count-down that does not look for its record: a copy re-sent after a lost reply (or
/// after a time-out whose stray ran) counts again.
#[test]
fn a_count_down_ignoring_its_record_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchCountDown,
        "if redis.call('EXISTS', record) == 1 then\n  return count\nend",
        "",
    );
    expect(scripts, &["counted once", "opens exactly at zero"]);
}

/// The record written without its expiry (`PX`): it outlives the latch for good.
#[test]
fn a_record_without_expiry_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchCountDown,
        "redis.call('SET', record, '1', 'PX', record_ms)",
        "redis.call('SET', record, '1')",
    );
    expect(scripts, &["no garbage"]);
}

/// A count-down of an open latch that records itself (it counted nothing): a copy of it
/// re-sent after the latch was closed again is answered by that record and never counts.
#[test]
fn a_record_of_a_count_down_that_did_not_count_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchCountDown,
        "if count <= 0 then\n  return count\nend",
        "if count <= 0 then\n  redis.call('SET', record, '1', 'PX', record_ms)\n  return count\nend",
    );
    expect(scripts, &["no garbage", "counted once"]);
}

/// The opening count-down deletes its record with the latch (as the native layout's record
/// goes with the latch's hash): a copy of it re-sent after a lost reply, once the latch was
/// closed again, counts in the new closing. The native layout allows that (its documented
/// limit); this layout promises better, and the model holds it to that.
#[test]
fn a_record_that_goes_with_the_opening_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchCountDown,
        "  redis.call('DEL', latch)\n  return 0",
        "  redis.call('DEL', latch, record)\n  return 0",
    );
    expect(scripts, &["counted once"]);
}

/// A latch that opens one count-down early (at 2).
#[test]
fn an_early_opening_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchCountDown,
        "if count == 1 then\n  redis.call(publish",
        "if count <= 2 then\n  redis.call(publish",
    );
    expect(scripts, &["opens exactly at zero", "counted once"]);
}

/// Our delete announces the opening with Redisson's delete message (`1`, "a new count"):
/// Redisson's waiters read it as "closed" and sleep on.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_delete_publishing_one_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchDelete,
        "redis.call(publish, channel, '0')",
        "redis.call(publish, channel, '1')",
    );
    expect(scripts, &["waiters are woken"]);
}

/// The last count-down announces the opening with this library's native message (`open`)
/// instead of Redisson's `0`: Redisson's waiters do not wake.
#[test]
fn an_opening_with_the_native_message_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchCountDown,
        "  redis.call(publish, channel, '0')\n  redis.call('DEL', latch)\n  return 0",
        "  redis.call(publish, channel, 'open')\n  redis.call('DEL', latch)\n  return 0",
    );
    expect(scripts, &["waiters are woken"]);
}

/// A closing that sets the count whether or not the latch is closed (Redisson's `SET`
/// without its `EXISTS`): a closed latch's count goes back up, and its count-downs are
/// counted for nothing.
#[test]
fn a_set_that_overwrites_a_closed_latch_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchSet,
        "  return -2\nend\nreturn 0",
        "  return -2\nend\nredis.call('SET', latch, ARGV[1])\nreturn 0",
    );
    expect(scripts, &["counted once"]);
}

/// A count-down that goes on to `DECR` a key that is not a latch (its "not a latch" check
/// dropped, as Redisson's count-down has none): it writes its record, then fails on the
/// foreign key with an error reply after a write. Only a clobber reaches it.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_count_down_of_a_key_that_is_not_a_latch_is_caught() {
    let scripts = Scripts::real().planted(
        ScriptId::RedissonLatchCountDown,
        "if count <= 0 then\n  return count\nend",
        "if count == 0 then\n  return count\nend",
    );
    expect_found_by(
        counterexample(scripts),
        ("a clobber", |c| c.clobbers > 0),
        &["reports are true", "no garbage"],
    );
}

/// The count read with Lua's `tonumber` (as the first scripts did, which this checker
/// found): another program's `2.0` under the name is taken for a latch at 2, and a
/// count-down writes its record before `DECR` fails on it.
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn a_count_read_as_lua_reads_a_number_is_caught() {
    let lenient = "  if type(value) ~= 'string' or not tonumber(value) then";
    let strict =
        "  if type(value) ~= 'string' or #value > 16 or not string.find(value, '^[1-9]%d*$') then";
    let scripts = Scripts::real()
        .planted(ScriptId::RedissonLatchCount, strict, lenient)
        .planted(ScriptId::RedissonLatchCountDown, strict, lenient)
        .planted(ScriptId::RedissonLatchSet, strict, lenient)
        .planted(ScriptId::RedissonLatchDelete, strict, lenient);
    expect_found_by(
        counterexample(scripts),
        ("a clobber", |c| c.clobbers > 0),
        &["reports are true", "no garbage", "counted once"],
    );
}

/// Sanity: the real scripts pass this file's model at a small bound
/// (`tests/redisson_latch_check.rs`, the checker, runs the full bound).
#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn the_real_scripts_pass_at_a_small_bound() {
    let world = World::new(Scripts::real());
    for config in redissonlatchmodel::configs() {
        let report = checker::explore::<RedissonLatch>(&world, &config, 11, MAX_STATES, &[]);
        assert!(!report.truncated, "{}: NOT exhaustive", config.name);
        assert_eq!(report.violation, None, "{}", config.name);
    }
}

#[cfg(feature = "planted-defects")]
mod rust_core {
    use super::*;
    use redis_locks_protocol::planted::{Defect, plant};

    fn found_with(defect: Defect) -> Option<checker::Found> {
        plant(Some(defect));
        let found = counterexample(Scripts::real());
        plant(None);
        println!("{defect:?}:");
        found
    }

    fn expect_core(defect: Defect, properties: &[&str]) {
        checker::expect_found(found_with(defect), properties);
    }

    /// A count-down's record named by its client alone: the client's next count-down
    /// finds it and never counts.
    #[test]
    fn a_record_without_its_request_seq_is_caught() {
        expect_core(Defect::RedissonLatchRecordSeqDropped, &["counted once"]);
    }

    /// A record that lives a quarter of its lifetime: a copy re-sent after the clock moved
    /// past it counts again. Only a configuration where the clock moves reaches it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_short_lived_record_is_caught() {
        expect_found_by(
            found_with(Defect::RedissonLatchRecordShortLived),
            ("the clock moving", |c| c.advances > 0),
            &["counted once", "opens exactly at zero"],
        );
    }

    /// The shared reader takes "1 remains" for "open" (the native latch's defect, met in
    /// this layout too).
    #[test]
    fn a_reader_that_opens_early_is_caught() {
        expect_core(Defect::LatchOneReadAsOpen, &["reports are true"]);
    }

    /// The shared reader takes "not a latch" for "open": only a clobber reaches it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_wrong_type_read_as_open_is_caught() {
        expect_found_by(
            found_with(Defect::LatchWrongTypeReadAsOpen),
            ("a clobber", |c| c.clobbers > 0),
            &["reports are true"],
        );
    }

    /// The classifier reads `BUSY`/`LOADING` as permanent: the count-down's `Resend` gives
    /// up at the first `BUSY`, without counting. Only a configuration with `BUSY` reaches
    /// it.
    #[test]
    #[cfg_attr(
        debug_assertions,
        ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
    )]
    fn a_busy_reply_read_as_permanent_is_caught() {
        expect_found_by(
            found_with(Defect::TransientReadAsPermanent),
            ("BUSY", |c| c.busy > 0),
            &["counted once"],
        );
    }
}
