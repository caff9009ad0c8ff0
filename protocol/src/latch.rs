//! The count-down latch's calls and replies, sans I/O, in either layout: this library's
//! (`lua/latch_*.lua`) or Redisson's `RCountDownLatch` (`lua/redisson_latch_*.lua`).
//!
//! A count-down carries its request id (`<client-tag>.<seq>`) and is re-sent as it was
//! after a lost reply ([`super::resend::Resend`]): the script answers a copy of an applied
//! request with the current count instead of counting again. In this library's layout the
//! latch's hash keeps each client's last applied count-down; in Redisson's, where the
//! latch is a bare string, each count-down leaves a record key of its own for as long as
//! a copy of it can arrive ([`count_down_record_ms`]). Both layouts' scripts answer alike,
//! so one set of decoders reads them.

use std::sync::Arc;

use super::planted::{self, Defect};
use super::redisson::prefix_name;
use super::{Call, Millis, Reply, ScriptId};

/// Where a latch's count lives, and so which scripts a call runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LatchLayout {
    /// This library's: the hash `<prefix>:{<name>}:latch` (`count`, and each client's last
    /// applied count-down).
    Native,
    /// Redisson's `RCountDownLatch`: the string `<name>` holding the count, which a Java
    /// service using Redisson reads and counts down too.
    Redisson {
        /// `<prefix>_redisson_count_down:{<name>}:`, followed by a count-down's request id:
        /// its record (Redisson never reads it).
        record_prefix: Arc<str>,
        /// How long a count-down's record lives ([`count_down_record_ms`]).
        record_ms: Millis,
    },
}

/// The key and channel of one latch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LatchKeys {
    /// Where the remaining count lives while the latch is closed (no key while open):
    /// `<prefix>:{<name>}:latch` (a hash), or in Redisson's layout the name (a string).
    pub key: Arc<str>,
    /// Where an opening is announced: `<prefix>:{<name>}:latch:db<n>:open`, or in
    /// Redisson's layout `redisson_countdownlatch__channel__{<name>}`.
    pub channel: Arc<str>,
    /// Whether the channel is sharded (`SPUBLISH`, on a cluster; Redisson 3.22+ does the
    /// same on a Redis 7 cluster).
    pub sharded: bool,
    /// Which layout.
    pub layout: LatchLayout,
}

/// How long a count-down's record lives in Redisson's layout: a copy of the count-down is
/// re-sent until [`super::timing::count_down_give_up_at`] (the watchdog timeout, at least a
/// response timeout, after the first), and the last copy may take two response timeouts
/// more to run.
pub const fn count_down_record_ms(watchdog_ms: Millis, response_ms: Millis) -> Millis {
    let resent_for = if watchdog_ms > response_ms {
        watchdog_ms
    } else {
        response_ms
    };
    resent_for.saturating_add(response_ms.saturating_mul(2))
}

impl LatchKeys {
    /// The latch `name` in this library's layout.
    pub fn native(prefix: &str, db: i64, sharded: bool, name: &str) -> Self {
        let key = format!("{prefix}:{{{name}}}:latch");
        LatchKeys {
            channel: format!("{key}:db{db}:open").into(),
            key: key.into(),
            sharded,
            layout: LatchLayout::Native,
        }
    }

    /// The latch `name` in Redisson's `RCountDownLatch` layout; `prefix` names this
    /// library's count-down records, which live `record_ms`. Redisson builds the channel by
    /// putting the name in braces as it is, so for a name with a brace the channel hashes
    /// to another slot than the key: the caller refuses such a name on a cluster.
    pub fn redisson(prefix: &str, sharded: bool, name: &str, record_ms: Millis) -> Self {
        LatchKeys {
            key: name.into(),
            channel: format!("redisson_countdownlatch__channel__{{{name}}}").into(),
            sharded,
            layout: LatchLayout::Redisson {
                record_prefix: format!(
                    "{}:",
                    prefix_name(&format!("{prefix}_redisson_count_down"), name)
                )
                .into(),
                record_ms,
            },
        }
    }

    fn publish_flag(&self) -> Arc<str> {
        if self.sharded { "1".into() } else { "0".into() }
    }
}

/// What a set, count-down or delete found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LatchReply {
    /// `latch_set.lua`: closed with the count (it was open) or not (already closed);
    /// `latch_delete.lua`: deleted (it was closed) or not (there was no latch).
    Done(bool),
    /// `latch_count_down.lua`: this many remain (0: open, by this count-down or before).
    Remaining(u64),
    /// The key is not a latch; nothing was written.
    NotALatch,
}

/// `latch_set.lua`: close the latch with `count`, unless it is closed.
pub fn set_call(keys: &LatchKeys, count: u64) -> Call {
    match keys.layout {
        LatchLayout::Native => Call {
            script: ScriptId::LatchSet,
            keys: vec![keys.key.clone()],
            args: vec![count.to_string().into()],
        },
        LatchLayout::Redisson { .. } => Call {
            script: ScriptId::RedissonLatchSet,
            keys: vec![keys.key.clone(), keys.channel.clone()],
            args: vec![count.to_string().into(), keys.publish_flag()],
        },
    }
}

/// `latch_count_down.lua` (or `redisson_latch_count_down.lua`) for the count-down with
/// request id `request` (`<client-tag>.<seq>`); every copy of one count-down is this same
/// call.
pub fn count_down_call(keys: &LatchKeys, request: &str) -> Call {
    if let LatchLayout::Redisson {
        record_prefix,
        record_ms,
    } = &keys.layout
    {
        let named = if planted::is(Defect::RedissonLatchRecordSeqDropped) {
            request.rsplit_once('.').map_or(request, |(tag, _)| tag)
        } else {
            request
        };
        let record_ms = if planted::is(Defect::RedissonLatchRecordShortLived) {
            record_ms / 4
        } else {
            *record_ms
        };
        return Call {
            script: ScriptId::RedissonLatchCountDown,
            keys: vec![
                keys.key.clone(),
                keys.channel.clone(),
                format!("{record_prefix}{named}").into(),
            ],
            args: vec![keys.publish_flag(), record_ms.to_string().into()],
        };
    }
    let (tag, seq) = request.rsplit_once('.').unwrap_or((request, "0"));
    let seq = if planted::is(Defect::LatchSeqDropped) {
        "0"
    } else {
        seq
    };
    let tag = if planted::is(Defect::LatchTagDropped) {
        ""
    } else {
        tag
    };
    Call {
        script: ScriptId::LatchCountDown,
        keys: vec![keys.key.clone()],
        args: vec![
            tag.into(),
            seq.into(),
            keys.channel.clone(),
            keys.publish_flag(),
        ],
    }
}

/// `latch_delete.lua`: open the latch whatever its count.
pub fn delete_call(keys: &LatchKeys) -> Call {
    match keys.layout {
        LatchLayout::Native => Call {
            script: ScriptId::LatchDelete,
            keys: vec![keys.key.clone()],
            args: vec![keys.channel.clone(), keys.publish_flag()],
        },
        LatchLayout::Redisson { .. } => Call {
            script: ScriptId::RedissonLatchDelete,
            keys: vec![keys.key.clone(), keys.channel.clone()],
            args: vec![keys.publish_flag()],
        },
    }
}

/// `latch_count.lua`: the remaining count (read-only, so re-sent freely).
pub fn count_call(keys: &LatchKeys) -> Call {
    let script = match keys.layout {
        LatchLayout::Native => ScriptId::LatchCount,
        LatchLayout::Redisson { .. } => ScriptId::RedissonLatchCount,
    };
    Call {
        script,
        keys: vec![keys.key.clone()],
        args: Vec::new(),
    }
}

/// What a reading of the count found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LatchCount {
    /// This many remain (0: open).
    Remaining(u64),
    /// The key is not a latch: what it is (its type; in this library's layout `hash` for a
    /// hash without a count, in Redisson's `string` for a string that is not a count).
    NotALatch(String),
}

/// Reads `latch_count.lua`'s reply.
pub fn decode_count(reply: &Reply) -> Result<LatchCount, String> {
    match reply {
        Reply::Int(n) if *n >= 0 => Ok(LatchCount::Remaining(*n as u64)),
        Reply::Array(items) => match items.as_slice() {
            [Reply::Int(-2), found] => Ok(LatchCount::NotALatch(found.text().unwrap_or_default())),
            _ => Err(format!("latch_count: {reply:?}")),
        },
        other => Err(format!("latch_count: {other:?}")),
    }
}

/// Reads `latch_set.lua`'s or `latch_delete.lua`'s reply.
pub fn decode_done(reply: &Reply) -> Result<LatchReply, String> {
    match reply {
        Reply::Int(1) => Ok(LatchReply::Done(true)),
        Reply::Int(0) => Ok(LatchReply::Done(false)),
        Reply::Int(-2) if planted::is(Defect::LatchWrongTypeReadAsNotDone) => {
            Ok(LatchReply::Done(false))
        }
        Reply::Int(-2) => Ok(LatchReply::NotALatch),
        other => Err(format!("latch: {other:?}")),
    }
}

/// Reads `latch_count_down.lua`'s reply.
pub fn decode_count_down(reply: &Reply) -> Result<LatchReply, String> {
    match reply {
        Reply::Int(1) if planted::is(Defect::LatchOneReadAsOpen) => Ok(LatchReply::Remaining(0)),
        Reply::Int(n) if *n >= 0 => Ok(LatchReply::Remaining(*n as u64)),
        Reply::Int(-2) if planted::is(Defect::LatchWrongTypeReadAsOpen) => {
            Ok(LatchReply::Remaining(0))
        }
        Reply::Int(-2) => Ok(LatchReply::NotALatch),
        other => Err(format!("latch_count_down: {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_down_names_its_request_in_two_parts() {
        let keys = LatchKeys::native("p", 0, true, "l");
        let call = count_down_call(&keys, "c1.7");
        let args: Vec<&str> = call.args.iter().map(|a| &**a).collect();
        assert_eq!(args, ["c1", "7", "p:{l}:latch:db0:open", "1"]);
        assert_eq!(
            decode_count_down(&Reply::Int(3)),
            Ok(LatchReply::Remaining(3))
        );
        assert_eq!(decode_done(&Reply::Int(-2)), Ok(LatchReply::NotALatch));
        assert!(decode_count_down(&Reply::Int(-1)).is_err());
    }

    #[test]
    fn redissons_layout_is_its_own_key_channel_and_a_record_per_count_down() {
        let keys = LatchKeys::redisson("p", false, "batch", 90_000);
        assert_eq!(&*keys.key, "batch");
        assert_eq!(&*keys.channel, "redisson_countdownlatch__channel__{batch}");
        let call = count_down_call(&keys, "c1.7");
        assert_eq!(call.script, ScriptId::RedissonLatchCountDown);
        let named: Vec<&str> = call.keys.iter().map(|k| &**k).collect();
        assert_eq!(
            named,
            [
                "batch",
                "redisson_countdownlatch__channel__{batch}",
                "p_redisson_count_down:{batch}:c1.7"
            ]
        );
        let args: Vec<&str> = call.args.iter().map(|a| &**a).collect();
        assert_eq!(args, ["0", "90000"]);
        // A name with its own hash tag keeps it, as Redisson's prefixName does.
        let tagged = LatchKeys::redisson("p", false, "a{x}", 1);
        assert_eq!(
            &*count_down_call(&tagged, "c.1").keys[2],
            "p_redisson_count_down:a{x}:c.1"
        );
        assert_eq!(count_down_record_ms(30_000, 3_000), 36_000);
        assert_eq!(count_down_record_ms(100, 3_000), 9_000);
        assert_eq!(count_call(&keys).script, ScriptId::RedissonLatchCount);
        assert_eq!(set_call(&keys, 3).args[0].as_ref(), "3");
        assert_eq!(delete_call(&keys).keys.len(), 2);
    }
}
