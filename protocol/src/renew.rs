//! The watchdog's batched call: renew the watchdog-leased holds, check the fixed ones.

use std::sync::Arc;

use super::hold::HoldState;
use super::{Call, Millis, Reply, ScriptId};

/// One hold in a renewal batch.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RenewItem {
    /// The lock hash.
    pub key: Arc<str>,
    /// The hold id that must be current.
    pub hold: Arc<str>,
    /// Whether to lengthen the lease (watchdog) or only check the hold exists (fixed lease).
    pub renew: bool,
    /// The hold is certainly in the hash form (`HoldState::hash_form`): `renew.lua` reads
    /// the hash first (a reentrant-lock hold only; other kinds ignore it).
    pub hash_form: bool,
}

impl RenewItem {
    /// The renewal item of the reentrant-lock hold `state` of the lock `key`.
    pub fn of(key: Arc<str>, state: &HoldState) -> RenewItem {
        RenewItem {
            key,
            hold: state.hold().clone(),
            renew: state.renews(),
            hash_form: state.hash_form(),
        }
    }

    /// The hold's argument to `renew.lua`: its id, after a `#` when it is in the hash
    /// form (a hold id never starts with `#`: it is a request id, `<tag>.<seq>`).
    fn argument(&self) -> Arc<str> {
        if self.hash_form {
            format!("#{}", self.hold).into()
        } else {
            self.hold.clone()
        }
    }
}

/// The `renew.lua` call for `items`; the renewed ones first, as the script expects.
/// Returns the call and the items in the order the reply refers to.
pub fn renew_call(lease_ms: Millis, mut items: Vec<RenewItem>) -> (Call, Vec<RenewItem>) {
    items.sort_by_key(|item| !item.renew);
    let renewing = items.iter().filter(|item| item.renew).count();
    let mut args = Vec::with_capacity(items.len() + 2);
    args.push(lease_ms.to_string().into());
    args.push(renewing.to_string().into());
    args.extend(items.iter().map(RenewItem::argument));
    let call = Call {
        script: ScriptId::Renew,
        keys: items.iter().map(|item| item.key.clone()).collect(),
        args,
    };
    (call, items)
}

/// The `renew.lua` call for `items` that are all served by one cluster node, in any
/// slots: the keys go after the hold ids in ARGV (undeclared, which the script's
/// `allow-cross-slot-keys` flag permits), so the call is routed to the node by address.
/// Returns the call and the items in the order the reply refers to.
pub fn renew_call_on_node(lease_ms: Millis, items: Vec<RenewItem>) -> (Call, Vec<RenewItem>) {
    let (mut call, items) = renew_call(lease_ms, items);
    call.args.append(&mut call.keys);
    (call, items)
}

/// What a renewal found for one hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewed {
    /// Still current: renewed (watchdog lease) or checked (fixed lease).
    Current,
    /// No longer current: lost.
    Gone,
    /// Not served by the node the call went to (its slot moved): nothing was done.
    Elsewhere,
}

/// Reads `renew.lua`'s reply for a batch of `len`, one status per position.
pub fn decode_renew(reply: &Reply, len: usize) -> Result<Vec<Renewed>, String> {
    let Reply::Array(positions) = reply else {
        return Err(format!("renew: {reply:?}"));
    };
    let mut status = vec![Renewed::Current; len];
    for position in positions {
        match position {
            Reply::Int(i) if *i >= 1 && (*i as usize) <= len => {
                status[*i as usize - 1] = Renewed::Gone;
            }
            Reply::Int(i) if *i <= -1 && (i.unsigned_abs() as usize) <= len => {
                status[i.unsigned_abs() as usize - 1] = Renewed::Elsewhere;
            }
            _ => return Err(format!("renew: position outside the batch: {reply:?}")),
        }
    }
    Ok(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renewed_holds_come_first_and_positions_map_back() {
        let item = |key: &str, renew| RenewItem {
            key: key.into(),
            hold: format!("h-{key}").into(),
            renew,
            hash_form: false,
        };
        let (call, order) = renew_call(30_000, vec![item("a", false), item("b", true)]);
        let args: Vec<&str> = call.args.iter().map(|a| &**a).collect();
        assert_eq!(args, vec!["30000", "1", "h-b", "h-a"]);
        assert_eq!(order[0].key.as_ref(), "b");
        let status = decode_renew(&Reply::Array(vec![Reply::Int(2)]), 2).unwrap();
        assert_eq!(status, vec![Renewed::Current, Renewed::Gone]);
        let status = decode_renew(&Reply::Array(vec![Reply::Int(-1)]), 2).unwrap();
        assert_eq!(status, vec![Renewed::Elsewhere, Renewed::Current]);
        assert!(decode_renew(&Reply::Array(vec![Reply::Int(3)]), 2).is_err());
        assert!(decode_renew(&Reply::Array(vec![Reply::Int(-3)]), 2).is_err());
        assert!(decode_renew(&Reply::Array(vec![Reply::Int(0)]), 2).is_err());

        let (call, _) = renew_call_on_node(30_000, vec![item("a", false), item("b", true)]);
        assert!(call.keys.is_empty());
        let args: Vec<&str> = call.args.iter().map(|a| &**a).collect();
        assert_eq!(args, vec!["30000", "1", "h-b", "h-a", "b", "a"]);
    }
}
