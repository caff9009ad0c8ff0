//! The watchdog's batched call: renew the watchdog-leased holds, check the fixed ones.

use std::sync::Arc;

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
}

/// The `renew.lua` call for `items`; the renewed ones first, as the script expects.
/// Returns the call and the items in the order the reply refers to.
pub fn renew_call(lease_ms: Millis, mut items: Vec<RenewItem>) -> (Call, Vec<RenewItem>) {
    items.sort_by_key(|item| !item.renew);
    let renewing = items.iter().filter(|item| item.renew).count();
    let mut args = Vec::with_capacity(items.len() + 2);
    args.push(lease_ms.to_string().into());
    args.push(renewing.to_string().into());
    args.extend(items.iter().map(|item| item.hold.clone()));
    let call = Call {
        script: ScriptId::Renew,
        keys: items.iter().map(|item| item.key.clone()).collect(),
        args,
    };
    (call, items)
}

/// Reads `renew.lua`'s reply for a batch of `len`: which positions (0-based) are gone.
pub fn decode_renew(reply: &Reply, len: usize) -> Result<Vec<bool>, String> {
    let Reply::Array(positions) = reply else {
        return Err(format!("renew: {reply:?}"));
    };
    let mut gone = vec![false; len];
    for position in positions {
        match position {
            Reply::Int(i) if *i >= 1 && (*i as usize) <= len => gone[*i as usize - 1] = true,
            _ => return Err(format!("renew: position outside the batch: {reply:?}")),
        }
    }
    Ok(gone)
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
        };
        let (call, order) = renew_call(30_000, vec![item("a", false), item("b", true)]);
        let args: Vec<&str> = call.args.iter().map(|a| &**a).collect();
        assert_eq!(args, vec!["30000", "1", "h-b", "h-a"]);
        assert_eq!(order[0].key.as_ref(), "b");
        let gone = decode_renew(&Reply::Array(vec![Reply::Int(2)]), 2).unwrap();
        assert_eq!(gone, vec![false, true]);
        assert!(decode_renew(&Reply::Array(vec![Reply::Int(3)]), 2).is_err());
    }
}
