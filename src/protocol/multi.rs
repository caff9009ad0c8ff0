//! The multi-lock's decisions, sans I/O: the one global order its members are taken in,
//! and the all-or-none walk over them.
//!
//! Members are taken one by one in a global order (by key, then by server), so that two
//! multi-locks over the same locks never wait for each other in a cycle, whatever order
//! their callers named the locks in (the classic lock-ordering rule). An attempt that
//! cannot take a member gives back every member it took.

use super::planted::{self, Defect};

/// A member's place in the global order: its key, then its server.
pub type OrderKey = (String, String);

/// The order to take members named by `keys` in (indices into `keys`), or the index of a
/// member named twice (it would wait for itself).
pub fn global_order(keys: &[OrderKey]) -> Result<Vec<usize>, usize> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    if planted::is(Defect::MultiOrderByKeyOnly) {
        order.sort_by(|a, b| keys[*a].0.cmp(&keys[*b].0));
    } else if !planted::is(Defect::MultiOrderAsNamed) {
        order.sort_by(|a, b| keys[*a].cmp(&keys[*b]));
    }
    let mut sorted = order.clone();
    sorted.sort_by(|a, b| keys[*a].cmp(&keys[*b]));
    match sorted
        .windows(2)
        .find(|pair| keys[pair[0]] == keys[pair[1]])
    {
        Some(pair) => Err(pair[1]),
        None => Ok(order),
    }
}

/// What to do next in an all-or-none acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MultiStep {
    /// Take the member at this position of the order.
    Take(usize),
    /// Every member is held: done.
    Held,
    /// A member could not be taken: give back the first this-many members (in reverse),
    /// then report the failure.
    GiveBack(usize),
}

/// An all-or-none acquisition over `members` members in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultiAcquire {
    members: usize,
    taken: usize,
}

impl MultiAcquire {
    /// An acquisition of `members` members.
    pub fn new(members: usize) -> Self {
        MultiAcquire { members, taken: 0 }
    }

    /// The first step.
    pub fn start(&self) -> MultiStep {
        self.next()
    }

    fn next(&self) -> MultiStep {
        let all = if planted::is(Defect::MultiHeldBeforeLast) {
            self.members.saturating_sub(1)
        } else {
            self.members
        };
        if self.taken >= all {
            MultiStep::Held
        } else {
            MultiStep::Take(self.taken)
        }
    }

    /// The member asked for was taken (`true`) or not (`false`: held elsewhere until the
    /// wait ran out, or an error).
    pub fn on_member(&mut self, taken: bool) -> MultiStep {
        if !taken {
            let keep = if planted::is(Defect::MultiKeepsPartial) {
                0
            } else if planted::is(Defect::MultiGivesBackOneFewer) {
                self.taken.saturating_sub(1)
            } else {
                self.taken
            };
            return MultiStep::GiveBack(keep);
        }
        self.taken += 1;
        self.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str, s: &str) -> OrderKey {
        (k.to_owned(), s.to_owned())
    }

    #[test]
    fn members_are_taken_in_one_order_and_given_back_on_failure() {
        let named = [key("b", "s1"), key("a", "s2"), key("a", "s1")];
        assert_eq!(global_order(&named), Ok(vec![2, 1, 0]));
        assert_eq!(global_order(&[key("a", "s"), key("a", "s")]), Err(1));
        let mut walk = MultiAcquire::new(3);
        assert_eq!(walk.start(), MultiStep::Take(0));
        assert_eq!(walk.on_member(true), MultiStep::Take(1));
        assert_eq!(walk.on_member(false), MultiStep::GiveBack(1));
        let mut walk = MultiAcquire::new(1);
        assert_eq!(walk.on_member(true), MultiStep::Held);
    }
}
