//! The waiting loop's checker: drives the core's `protocol::wait::Wait` (the code every
//! kind's acquire runs, through `src/waiting.rs`) for each kind's own policy through every
//! sequence of attempt results, wake-ups, lost wake-ups, subscription confirmations and
//! Redis errors up to a bound (the latch's wait too: a reading is its attempt), and checks
//! each step against what the waiting loop promises (README, "Correctness"):
//! * **pttl-bounded**: after a refusal that says the hold lasts `w` ms more, the next
//!   attempt comes within `w` (so a lost wake-up costs only latency), and within the
//!   kind's re-check interval;
//! * **deadline**: nothing runs past the deadline; a wait gives up only at it;
//! * **one attempt**: a zero wait makes one attempt, never subscribes, never sleeps;
//! * **no orphans**: an acquire that ends without a grant gives back what its attempts may
//!   have left (a place in a queue, a reservation, a hold whose reply was lost), and only
//!   then; dropped at any point, it does the same;
//! * **no stranded waiters**: a wake-up received and not used is handed on when the
//!   waiter leaves (through errors it is kept: the waiter retries itself after a pause, as
//!   handing it on at once could bounce it between waiters without pause); a grant of a
//!   sharing kind lets the next waiter look;
//! * **errors ridden out**: a waiter reports an error that is not permanent only after the
//!   outage tolerance; a permanent one at once;
//! * **no busy loop**: time passes between two attempts, but for one right after a
//!   subscription;
//! * **first in line as told**: a waiter whose last refusal kept capacity for it (a
//!   semaphore's reservation) asks to be woken before the other local waiters, and one
//!   whose last refusal did not, does not (errors leave it as it was).
//!
//! The teeth plant defects in the real `Wait` (feature `planted-defects`) and require a
//! counterexample. `CHECK_DEPTH` sets the bound (default 10).

use std::collections::{HashSet, VecDeque};

use redis_locks_protocol::wait::{Tried, Wait, WaitEnd, WaitPolicy, WaitStep, WaitTiming};
use redis_locks_protocol::{Failure, Millis};

/// Small numbers, so that the bound reaches the tolerance, the deadline and the re-check.
const TIMING: WaitTiming = WaitTiming {
    tolerance: 120,
    response: 15,
};

/// The kinds' own policies, from the core (nothing restated here).
fn policies() -> Vec<(&'static str, WaitPolicy)> {
    let mut policies = vec![
        ("reentrant", WaitPolicy::reentrant(TIMING)),
        ("read", WaitPolicy::read_write(true, TIMING)),
        ("write", WaitPolicy::read_write(false, TIMING)),
        ("fair", WaitPolicy::fair(TIMING)),
        ("semaphore", WaitPolicy::semaphore(TIMING)),
        ("redlock", WaitPolicy::redlock(TIMING.tolerance)),
        (
            "latch",
            WaitPolicy::latch(
                redis_locks::DEFAULT_LATCH_RECHECK.as_millis() as Millis,
                TIMING,
            ),
        ),
    ];
    // The re-check intervals are hundreds of ms: scaled down so that the bound reaches
    // them (the rule checked is the same).
    for (_, policy) in &mut policies {
        if let Some(recheck) = &mut policy.recheck {
            *recheck = (*recheck / 20).max(1);
        }
    }
    policies
}

/// What the world may answer an attempt of `run` with.
fn attempt_results(run: &Run) -> Vec<Tried> {
    let policy = &run.policy;
    let mut results = vec![
        Tried::Granted,
        Tried::Busy { within: 0 },
        Tried::Busy { within: 7 },
        Tried::Busy { within: 400 },
        Tried::Failed(Failure::NotSent),
        Tried::Failed(Failure::Lost),
        // (`TimedOut` is read as `Lost` is: both may have run.)
        Tried::Failed(Failure::Transient("BUSY".into())),
        Tried::Failed(Failure::Permanent("NOPERM".into())),
        Tried::Refused {
            claim_may_remain: false,
        },
        Tried::Refused {
            claim_may_remain: true,
        },
    ];
    if run.name == "semaphore" {
        // Only a semaphore's refusal keeps capacity for the waiter (its reservation).
        results.push(Tried::FirstInLine { within: 7 });
    }
    if policy.recheck.is_some() {
        // No TTL (the latch's "closed"): only the re-check bounds the wait.
        results.push(Tried::Busy {
            within: Millis::MAX,
        });
    }
    results
}

/// What the checker knows independently of the machine (the specification's state).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Spec {
    /// Something may be held under the acquisition's id.
    claim: bool,
    /// A wake-up was received and neither used nor handed on.
    wake_up: bool,
    /// Ever subscribed.
    subscribed: bool,
    /// A refusal was seen (the caller is a waiter).
    refused: bool,
    /// The latest instant the next attempt may come at (pttl and re-check bound).
    next_attempt_by: Option<Millis>,
    /// When the current run of errors began.
    errors_since: Option<Millis>,
    /// The last attempt came at this instant, with no subscription since.
    attempted_at: Option<Millis>,
    attempts: u32,
    /// The last attempt's result (what a `Done` answers).
    last: Option<Tried>,
    /// The last refusal kept capacity for this waiter (a release must wake it first).
    first_in_line: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct State {
    wait: Wait,
    step: WaitStep,
    now: Millis,
    spec: Spec,
}

struct Run {
    name: &'static str,
    policy: WaitPolicy,
    wait: Option<Millis>,
    deadline: Option<Millis>,
}

type Violation = (&'static str, String, Vec<String>);

/// Checks one step the machine took (`step`, at `state.now`, after `state.spec`).
fn check(run: &Run, state: &State, step: &WaitStep) -> Result<(), (&'static str, String)> {
    let spec = &state.spec;
    let now = state.now;
    let policy = &run.policy;
    let single = run.wait == Some(0);
    let fail = |property, message: String| Err((property, message));
    if state.wait.first_in_line() != spec.first_in_line {
        return fail(
            "first in line as told",
            format!(
                "the waiter says first in line {}, its last refusal {:?}",
                state.wait.first_in_line(),
                spec.last
            ),
        );
    }
    let bound = |at: Millis| -> Result<(), (&'static str, String)> {
        if let Some(deadline) = run.deadline
            && at > deadline
        {
            return fail("deadline", format!("{at} past the deadline {deadline}"));
        }
        if let Some(by) = spec.next_attempt_by
            && at > by
        {
            return fail(
                "pttl-bounded",
                format!("the next attempt at {at}, after {by} (pttl / re-check)"),
            );
        }
        Ok(())
    };
    match step {
        WaitStep::Attempt => {
            if single && spec.attempts >= 1 {
                return fail("one attempt", "a zero wait attempts again".into());
            }
            if spec.attempted_at == Some(now) {
                return fail("no busy loop", format!("two attempts at {now}"));
            }
            bound(now)?;
        }
        WaitStep::Subscribe { confirm_until } => {
            if single {
                return fail("one attempt", "a zero wait subscribes".into());
            }
            if let Some(until) = confirm_until {
                bound(*until)?;
            }
        }
        WaitStep::Sleep {
            until,
            wake_on_release: _,
        } => {
            if single {
                return fail("one attempt", "a zero wait sleeps".into());
            }
            if *until <= now {
                return fail("no busy loop", format!("a sleep until {until} at {now}"));
            }
            bound(*until)?;
            if matches!(spec.last, Some(Tried::Failed(Failure::Permanent(_))))
                || matches!(spec.last, Some(Tried::Refused { .. }))
            {
                return fail("errors ridden out", "a permanent error is retried".into());
            }
        }
        WaitStep::Done(end) => {
            let give_back = match end {
                WaitEnd::Granted { pass_on } => {
                    if !matches!(spec.last, Some(Tried::Granted)) {
                        return fail("outcome", "granted without a grant".into());
                    }
                    if *pass_on != (policy.shares && spec.subscribed) {
                        return fail(
                            "no stranded waiters",
                            format!("a grant passes on: {pass_on}"),
                        );
                    }
                    false
                }
                WaitEnd::TimedOut { give_back, pass_on } => {
                    if !matches!(
                        spec.last,
                        Some(Tried::Busy { .. } | Tried::FirstInLine { .. } | Tried::Failed(_))
                    ) {
                        return fail("outcome", format!("timed out after {:?}", spec.last));
                    }
                    let over = run.deadline.is_some_and(|deadline| now >= deadline);
                    if !single && !over {
                        return fail(
                            "deadline",
                            format!("gave up at {now}, before the deadline {:?}", run.deadline),
                        );
                    }
                    if *pass_on != spec.wake_up {
                        return fail(
                            "no stranded waiters",
                            format!("timed out with pass_on {pass_on}, wake-up {}", spec.wake_up),
                        );
                    }
                    *give_back
                }
                WaitEnd::Failed { give_back, pass_on } => {
                    if *pass_on != spec.wake_up {
                        return fail(
                            "no stranded waiters",
                            format!("failed with pass_on {pass_on}, wake-up {}", spec.wake_up),
                        );
                    }
                    match &spec.last {
                        Some(Tried::Refused { .. })
                        | Some(Tried::Failed(Failure::Permanent(_))) => {}
                        Some(Tried::Failed(failure)) => {
                            let retryable =
                                spec.refused || matches!(failure, Failure::Transient(_));
                            let since = spec.errors_since.unwrap_or(now);
                            let out_of_time = run.deadline.is_some_and(|deadline| now >= deadline);
                            // Before the first refusal, the deadline ends retries too.
                            let may_end = out_of_time && !spec.refused;
                            if retryable && now - since <= policy.tolerance && !may_end {
                                return fail(
                                    "errors ridden out",
                                    format!(
                                        "{failure:?} reported after {} ms of errors",
                                        now - since
                                    ),
                                );
                            }
                        }
                        other => return fail("outcome", format!("failed after {other:?}")),
                    }
                    *give_back
                }
            };
            let must = policy.gives_back && spec.claim;
            if give_back != must {
                return fail(
                    "no orphans",
                    format!("gives back: {give_back}, something may be left: {must}"),
                );
            }
        }
    }
    Ok(())
}

/// The spec's state after the machine took `step` at `now`.
fn after_step(spec: &Spec, step: &WaitStep, now: Millis) -> Spec {
    let mut spec = spec.clone();
    match step {
        WaitStep::Attempt => {
            spec.attempts += 1;
            spec.attempted_at = Some(now);
            spec.next_attempt_by = None;
        }
        WaitStep::Subscribe { .. } => {
            spec.subscribed = true;
            spec.attempted_at = None;
        }
        // A waiter that sleeps keeps the wake-up it holds (it retries itself).
        WaitStep::Sleep { .. } | WaitStep::Done(_) => {}
    }
    spec
}

/// The spec's state after an attempt's result at `now`.
fn after_result(run: &Run, spec: &Spec, tried: &Tried, now: Millis, waits: bool) -> Spec {
    let mut spec = spec.clone();
    spec.last = Some(tried.clone());
    match tried {
        Tried::Granted => {
            spec.claim = false;
            spec.wake_up = false;
        }
        Tried::Busy { within } | Tried::FirstInLine { within } => {
            spec.first_in_line = matches!(tried, Tried::FirstInLine { .. });
            // The wake-up was used: someone else holds and will announce its release.
            spec.wake_up = false;
            spec.refused = true;
            spec.errors_since = None;
            if waits {
                spec.claim = true;
            }
            let mut by = now.saturating_add((*within).max(1));
            if let Some(recheck) = run.policy.recheck {
                by = by.min(now + recheck);
            }
            spec.next_attempt_by = Some(by);
        }
        Tried::Failed(failure) => {
            if failure.may_have_run() {
                spec.claim = true;
            }
            spec.errors_since.get_or_insert(now);
        }
        Tried::Refused { claim_may_remain } => spec.claim = *claim_may_remain,
    }
    spec
}

/// The interesting places a run must reach (else the bound is too small to check them).
fn milestones_of(run: &Run, state: &State) -> Vec<&'static str> {
    let mut reached = Vec::new();
    let spec = &state.spec;
    if let WaitStep::Sleep { until, .. } = &state.step {
        if spec.wake_up {
            reached.push("a wake-up kept through an error");
        }
        if spec.next_attempt_by == Some(*until) {
            reached.push("a sleep cut by a pttl or the re-check");
        }
    }
    if let WaitStep::Done(
        WaitEnd::Failed { pass_on: true, .. } | WaitEnd::TimedOut { pass_on: true, .. },
    ) = &state.step
    {
        reached.push("a wake-up handed on");
    }
    if matches!(state.step, WaitStep::Done(WaitEnd::Failed { .. }))
        && matches!(spec.last, Some(Tried::Failed(Failure::Lost)))
        && spec.refused
        && spec
            .errors_since
            .is_some_and(|since| state.now - since > run.policy.tolerance)
    {
        reached.push("errors reported after the tolerance");
    }
    if let WaitStep::Done(WaitEnd::TimedOut { give_back, .. }) = &state.step {
        if run.deadline.is_some_and(|deadline| state.now >= deadline) && run.wait != Some(0) {
            reached.push("timed out at the deadline");
        }
        if *give_back {
            reached.push("gave back");
        }
    }
    if let WaitStep::Done(WaitEnd::Granted { pass_on: true }) = &state.step {
        reached.push("a grant that lets the next waiter look");
    }
    if spec.first_in_line && matches!(state.step, WaitStep::Sleep { .. }) {
        reached.push("a waiter asleep first in line");
    }
    reached
}

/// What every run of `run`'s kind and wait must reach.
fn required(run: &Run) -> Vec<&'static str> {
    let mut required = Vec::new();
    if run.wait != Some(0) {
        required.extend([
            "a wake-up handed on",
            "a sleep cut by a pttl or the re-check",
        ]);
        if run.wait.is_none() {
            required.push("errors reported after the tolerance");
        }
    }
    if run.deadline.is_some() && run.wait != Some(0) {
        required.push("timed out at the deadline");
        if run.policy.gives_back {
            required.push("gave back");
        }
    }
    if run.policy.shares && run.wait != Some(0) {
        required.push("a grant that lets the next waiter look");
    }
    if run.name == "semaphore" && run.wait != Some(0) {
        required.push("a waiter asleep first in line");
    }
    required
}

/// Explores every run from the start up to `depth` steps; the first violation, or a
/// place the run must reach and did not (a violation of "milestones").
fn explore(run: &Run, depth: usize) -> (usize, Option<Violation>) {
    let (states, violation, reached) = explore_states(run, depth);
    if violation.is_some() {
        return (states, violation);
    }
    for milestone in required(run) {
        if !reached.contains(milestone) {
            return (
                states,
                Some((
                    "milestones",
                    format!("never reached: {milestone} (raise CHECK_DEPTH)"),
                    Vec::new(),
                )),
            );
        }
    }
    (states, None)
}

fn explore_states(run: &Run, depth: usize) -> (usize, Option<Violation>, HashSet<&'static str>) {
    let mut reached = HashSet::new();
    let mut wait = Wait::new(run.policy.clone(), 0, run.wait);
    let step = wait.start(0);
    let spec = Spec {
        claim: false,
        wake_up: false,
        subscribed: false,
        refused: false,
        next_attempt_by: None,
        errors_since: None,
        attempted_at: None,
        attempts: 0,
        last: None,
        first_in_line: false,
    };
    let start = State {
        wait,
        step,
        now: 0,
        spec,
    };
    // Breadth first; each node keeps its parent, for the trace of a counterexample.
    let mut nodes: Vec<(State, Option<usize>, String)> =
        vec![(start.clone(), None, "start".into())];
    let mut seen = HashSet::from([start]);
    let mut queue = VecDeque::from([(0usize, 1usize)]);
    let trace = |nodes: &Vec<(State, Option<usize>, String)>, mut at: usize| {
        let mut path = Vec::new();
        loop {
            let (state, parent, label) = &nodes[at];
            path.push(format!("{label}\n  t={} {:?}", state.now, state.step));
            match parent {
                Some(parent) => at = *parent,
                None => break,
            }
        }
        path.reverse();
        path
    };
    while let Some((at, steps)) = queue.pop_front() {
        let state = nodes[at].0.clone();
        if let Err((property, message)) = check(run, &state, &state.step) {
            return (
                nodes.len(),
                Some((property, message, trace(&nodes, at))),
                reached,
            );
        }
        reached.extend(milestones_of(run, &state));
        let spec = after_step(&state.spec, &state.step, state.now);
        // A caller may drop the acquire at any step (once the step began): what it leaves.
        if !matches!(state.step, WaitStep::Done(_)) {
            let claim =
                run.policy.gives_back && (spec.claim || matches!(state.step, WaitStep::Attempt));
            let violation = if state.wait.give_back_if_dropped() != claim {
                Some((
                    "no orphans",
                    format!(
                        "dropped: gives back {}, something may be left {claim}",
                        state.wait.give_back_if_dropped()
                    ),
                ))
            } else if state.wait.pass_on_if_dropped() != spec.wake_up {
                Some((
                    "no stranded waiters",
                    "dropped holding a wake-up it does not hand on".to_string(),
                ))
            } else {
                None
            };
            if let Some((property, message)) = violation {
                return (
                    nodes.len(),
                    Some((property, message, trace(&nodes, at))),
                    reached,
                );
            }
        }
        if steps >= depth {
            continue;
        }
        for (next, label) in successors(run, &state, &spec) {
            if seen.insert(next.clone()) {
                nodes.push((next, Some(at), label));
                queue.push_back((nodes.len() - 1, steps + 1));
            }
        }
    }
    (nodes.len(), None, reached)
}

/// Every way the world can answer the step the machine asked for.
fn successors(run: &Run, state: &State, spec: &Spec) -> Vec<(State, String)> {
    let mut next = Vec::new();
    let now = state.now;
    match &state.step {
        WaitStep::Attempt => {
            for took in [0, 2] {
                for tried in attempt_results(run) {
                    let at = now + took;
                    let listening = state.wait.subscribed();
                    for spinning in [false, true] {
                        if spinning && !listening {
                            continue;
                        }
                        // The jitter matters only for the pauses of errors and of polling.
                        let jitters: &[u64] = if spinning || matches!(tried, Tried::Failed(_)) {
                            &[0, u64::MAX]
                        } else {
                            &[0]
                        };
                        for &jitter in jitters {
                            let mut wait = state.wait.clone();
                            let spec = after_result(run, spec, &tried, at, wait.waits());
                            let step = wait.attempted(at, tried.clone(), spinning, jitter);
                            next.push((
                                State {
                                    wait,
                                    step,
                                    now: at,
                                    spec,
                                },
                                format!("attempt → {tried:?} at {at} spinning={spinning} jitter={jitter}"),
                            ));
                        }
                    }
                }
            }
        }
        WaitStep::Subscribe { confirm_until } => {
            let mut ats = vec![now];
            if let Some(until) = confirm_until {
                ats = vec![now + 1, (*until).max(now)];
            }
            for at in ats {
                let mut wait = state.wait.clone();
                let step = wait.subscribed_at(at);
                next.push((
                    State {
                        wait,
                        step,
                        now: at,
                        spec: spec.clone(),
                    },
                    format!("subscribed at {at}"),
                ));
            }
        }
        WaitStep::Sleep {
            until,
            wake_on_release,
            ..
        } => {
            let mut ends = vec![(*until, false)];
            if *wake_on_release {
                ends.push(((now + 1).min(*until), true));
                ends.push((*until, true));
            }
            for (at, notified) in ends {
                let mut wait = state.wait.clone();
                let mut spec = spec.clone();
                if notified {
                    spec.wake_up = true;
                }
                let step = wait.woke(at, notified);
                next.push((
                    State {
                        wait,
                        step,
                        now: at,
                        spec,
                    },
                    format!("woke at {at} notified={notified}"),
                ));
            }
        }
        WaitStep::Done(_) => {}
    }
    next
}

fn runs() -> Vec<Run> {
    let mut runs = Vec::new();
    for (name, policy) in policies() {
        for wait in [None, Some(0), Some(60)] {
            runs.push(Run {
                name,
                policy: policy.clone(),
                wait,
                deadline: wait,
            });
        }
    }
    runs
}

fn depth() -> usize {
    std::env::var("CHECK_DEPTH")
        .ok()
        .and_then(|depth| depth.parse().ok())
        .unwrap_or(10)
}

/// Checks every kind's policy; the first violation.
pub fn check_all(depth: usize) -> Option<(String, Violation)> {
    for run in runs() {
        let (states, violation) = explore(&run, depth);
        println!(
            "{} wait={:?}: {states} states, depth {depth}",
            run.name, run.wait
        );
        if let Some(violation) = violation {
            return Some((format!("{} wait={:?}", run.name, run.wait), violation));
        }
    }
    None
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "release only (slow in a debug build): ./scripts/check-protocol.sh runs it"
)]
fn every_kind_waits_as_promised() {
    if let Some((run, (property, message, path))) = check_all(depth()) {
        panic!("{run}: {property} violated: {message}\n{}", path.join("\n"));
    }
}

#[cfg(feature = "planted-defects")]
mod teeth {
    use redis_locks_protocol::planted::{Defect, plant};

    fn expect(defect: Defect, property: &str) {
        plant(Some(defect));
        let found = super::check_all(super::depth());
        plant(None);
        let (run, (found, message, _)) = found.expect("the checker found no counterexample");
        assert_eq!(found, property, "{run}: {message}");
    }

    #[test]
    #[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
    fn a_sleep_past_the_pttl_is_caught() {
        expect(Defect::WaitIgnoresPttl, "pttl-bounded");
    }

    #[test]
    #[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
    fn a_waiter_that_forgets_its_claim_is_caught() {
        expect(Defect::WaitForgetsClaim, "no orphans");
    }

    #[test]
    #[cfg_attr(debug_assertions, ignore = "release only: ./scripts/check-protocol.sh")]
    fn a_leaving_waiter_that_keeps_its_wake_up_is_caught() {
        expect(Defect::WaitDropsWakeUp, "no stranded waiters");
    }
}
