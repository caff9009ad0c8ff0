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

/// A give-back (of a failed attempt) or a release of every member taken, one member at a
/// time, in the reverse of the order they were taken, and what it tells its caller.
///
/// Reverse order: a rival multi-lock over the same members waits at the first member it
/// lacks, the first in the global order. Given back last, that member wakes the rival
/// when every later member is free already, so the rival's walk does not stop and wait
/// again a member further on.
///
/// Every member is given back whatever the others' outcomes (a member that cannot be is
/// left to its lease); the caller is told `Ok` only if every member was given back while
/// held, otherwise the first failure in the order the members were given back.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MultiRelease<E> {
    left: usize,
    first_failure: Option<E>,
}

impl<E> MultiRelease<E> {
    /// A give-back of the first `taken` members of the order.
    pub fn new(taken: usize) -> Self {
        MultiRelease {
            left: taken,
            first_failure: None,
        }
    }

    /// The position (in the order taken) of the member to give back next, or `None` when
    /// every member had its turn.
    pub fn next_member(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.left)
    }

    /// How many members are still to be named by [`next_member`](Self::next_member):
    /// the first this-many of the order taken.
    pub fn left(&self) -> usize {
        self.left
    }

    /// The member last named by [`next_member`](Self::next_member) was given back
    /// (`Ok`), or not.
    pub fn on_member(&mut self, outcome: Result<(), E>) {
        if self.first_failure.is_none() {
            self.first_failure = outcome.err();
        }
    }

    /// Whether a member's release failed so far.
    pub fn failed(&self) -> bool {
        self.first_failure.is_some()
    }

    /// What the caller is told once every member had its turn.
    pub fn told(self) -> Result<(), E> {
        if planted::is(Defect::MultiReleaseHidesFailure) {
            return Ok(());
        }
        match self.first_failure {
            None => Ok(()),
            Some(failure) => Err(failure),
        }
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

    #[test]
    fn members_are_given_back_last_taken_first_and_the_first_failure_told() {
        let mut give_back = MultiRelease::new(3);
        assert_eq!(give_back.next_member(), Some(2));
        give_back.on_member(Ok(()));
        assert_eq!(give_back.next_member(), Some(1));
        give_back.on_member(Err("lost"));
        assert_eq!(give_back.next_member(), Some(0));
        give_back.on_member(Err("timeout"));
        assert_eq!(give_back.next_member(), None);
        assert!(give_back.failed());
        assert_eq!(give_back.told(), Err("lost"));
        assert_eq!(MultiRelease::<()>::new(0).told(), Ok(()));
    }
}
