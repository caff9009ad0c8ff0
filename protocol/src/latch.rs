//! The count-down latch's calls and replies (`lua/latch_*.lua`), sans I/O.
//!
//! A count-down carries its request id (`<client-tag>.<seq>`, in two parts) and is
//! re-sent as it was after a lost reply ([`super::resend::Resend`]): the script answers a
//! copy of an applied request with the current count instead of counting again.

use std::sync::Arc;

use super::planted::{self, Defect};
use super::{Call, Reply, ScriptId};

/// The key and channel of one latch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LatchKeys {
    /// `<prefix>:{<name>}:latch`: the remaining count while closed; no key while open.
    pub hash: Arc<str>,
    /// `<prefix>:{<name>}:latch:db<n>:open`: where an opening is announced.
    pub channel: Arc<str>,
    /// Whether the channel is sharded (`SPUBLISH`, on a cluster).
    pub sharded: bool,
}

impl LatchKeys {
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
    Call {
        script: ScriptId::LatchSet,
        keys: vec![keys.hash.clone()],
        args: vec![count.to_string().into()],
    }
}

/// `latch_count_down.lua` for the count-down with request id `request`
/// (`<client-tag>.<seq>`); every copy of one count-down is this same call.
pub fn count_down_call(keys: &LatchKeys, request: &str) -> Call {
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
        keys: vec![keys.hash.clone()],
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
    Call {
        script: ScriptId::LatchDelete,
        keys: vec![keys.hash.clone()],
        args: vec![keys.channel.clone(), keys.publish_flag()],
    }
}

/// `latch_count.lua`: the remaining count (read-only, so re-sent freely).
pub fn count_call(keys: &LatchKeys) -> Call {
    Call {
        script: ScriptId::LatchCount,
        keys: vec![keys.hash.clone()],
        args: Vec::new(),
    }
}

/// What a reading of the count found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum LatchCount {
    /// This many remain (0: open).
    Remaining(u64),
    /// The key is not a latch: what it is (its type; `hash` for a hash without a count).
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
        let keys = LatchKeys {
            hash: "p:{l}:latch".into(),
            channel: "p:{l}:latch:db0:open".into(),
            sharded: true,
        };
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
}
