//! `--redlock ... run NAME`: the lock NAME as a [`RedLock`] over independent servers, one
//! `LockClient` per `--url`, held while a majority (N/2 + 1) of them hold it.
//!
//! The servers are connected all at once. One that cannot be connected counts as a
//! server that refused: with fewer than a majority connected nothing is tried (exit 69).
//! With a majority connected but not all, the RedLock is built over the connected ones,
//! and the majority is still counted over all N: an acquire that got fewer than N/2 + 1
//! holds is given back and tried again, and the lock counts as lost once fewer than
//! N/2 + 1 holds remain. (The library's `RedLock` counts its majority over its members,
//! so it cannot be handed a server it has no client for; see `RedSet::attempt`.)

use std::collections::BTreeSet;
use std::time::Duration;

use redis_locks::{
    Error, LockClient, LockGuard, LostReason, REDLOCK_RETRY_DELAY, RedGuard, RedLock,
};
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::args::{Global, RunArgs};
use crate::connect::RedServer;
use crate::exit::{self, Failure};
use crate::run::{Acquired, CANCEL_SETTLE, Held, cli_owner, not_acquired, wait_limit};
use crate::signals::Signals;

/// How long a server may take to tell its state (busy message, outage check).
const PROBE: Duration = Duration::from_secs(1);

/// The usage errors of --redlock, found before connecting. `kind` is the flag of another
/// kind (--read, --write, --fair, --permits), if one was given.
pub fn check_usage(global: &Global, args: &RunArgs, kind: Option<&str>) -> Result<(), Failure> {
    let refuse = |text: &str| Err(Failure::usage(format!("--redlock {text}")));
    if global.cluster {
        return refuse(
            "takes one --url per independent Redis server; a Redis Cluster (--cluster) is one \
             lock service already: use one or the other",
        );
    }
    if global.min_replicas.is_some() {
        return refuse(
            "does not go with --min-replicas: a RedLock's safety comes from a majority of \
             independent servers, not from replicas of one",
        );
    }
    if let Some(flag) = kind {
        return refuse(&format!("takes a plain lock; {flag} has no RedLock form"));
    }
    if !args.also.is_empty() {
        return refuse("takes one lock; --also (a multi-lock on one target) does not go with it");
    }
    if args.fenced {
        return refuse(
            "does not go with --fenced: each server keeps its own fencing counter, so there \
             is no single token that grows with every acquisition across independent \
             servers (a maximum over the majority can repeat or go backwards when servers \
             restart or the majority changes). Use a single primary with --fenced (and \
             --min-replicas) where the protected resource checks tokens",
        );
    }
    let mut urls: Vec<&String> = global.url.iter().collect();
    urls.sort();
    if let Some(pair) = urls.windows(2).find(|pair| pair[0] == pair[1]) {
        return refuse(&format!(
            "needs each server once: {} is given twice (it would count twice towards the \
             majority)",
            crate::connect::redact(pair[0])
        ));
    }
    Ok(())
}

/// The connected servers of a --redlock run, as one RedLock.
pub struct RedSet {
    lock: RedLock,
    owner: String,
    /// N: every --url, connected or not.
    servers: usize,
    /// N/2 + 1.
    needed: usize,
    /// The connected servers' labels, in the RedLock's member order.
    labels: Vec<String>,
    /// Why the others could not be connected.
    unconnected: Vec<String>,
    clients: Vec<LockClient>,
    lease: Duration,
}

impl RedSet {
    /// From the connection attempts: a usage error for a bad URL, exit 69 when fewer than
    /// a majority could be connected.
    pub fn new(servers: Vec<RedServer>, args: &RunArgs, quiet: bool) -> Result<RedSet, Failure> {
        let total = servers.len();
        let needed = total / 2 + 1;
        let (mut clients, mut labels, mut unconnected) = (Vec::new(), Vec::new(), Vec::new());
        for server in servers {
            match server.client {
                Ok(client) => {
                    clients.push(client);
                    labels.push(server.label);
                }
                Err(err) => {
                    let failure = Failure::from(err);
                    if failure.code == exit::USAGE {
                        return Err(Failure::usage(format!(
                            "--redlock, {}: {}",
                            server.label, failure.message
                        )));
                    }
                    unconnected.push(failure.message);
                }
            }
        }
        if clients.len() < needed {
            return Err(Failure::new(
                exit::UNAVAILABLE,
                format!(
                    "RedLock {:?}: only {} of {total} servers could be connected, {needed} \
                     needed for a majority; the command was not run ({})",
                    args.name,
                    clients.len(),
                    unconnected.join("; ")
                ),
            ));
        }
        if !quiet {
            if total < 3 {
                eprintln!(
                    "redis-locks: warning: --redlock over {total} server{}: a majority is all of \
                     them, so it survives no server's loss (use 3 or more, usually 5)",
                    if total == 1 { "" } else { "s" }
                );
            }
            if !unconnected.is_empty() {
                eprintln!(
                    "redis-locks: warning: RedLock {:?}: {} of {total} servers could not be \
                     connected ({}); going on with {}, of which {needed} must grant it",
                    args.name,
                    unconnected.len(),
                    unconnected.join("; "),
                    clients.len()
                );
            }
        }
        let locks = clients
            .iter()
            .map(|client| client.lock(&args.name))
            .collect::<Result<Vec<_>, _>>()?;
        let owner = cli_owner(&clients[0]);
        let lock = RedLock::new(locks)?.with_owner(owner.clone())?;
        let lock = match args.lease {
            Some(lease) => lock.with_lease(lease)?,
            None => lock,
        };
        Ok(RedSet {
            lock,
            owner,
            servers: total,
            needed,
            labels,
            unconnected,
            clients,
            lease: args.lease.unwrap_or(args.watchdog),
        })
    }

    /// Takes the RedLock as --wait/--no-wait say; a signal stops the wait.
    pub async fn acquire(
        &self,
        args: &RunArgs,
        signals: &mut Signals,
    ) -> Result<Acquired, Failure> {
        let started = Instant::now();
        tokio::select! {
            acquired = self.attempt(wait_limit(args)) => match acquired? {
                Some(guard) => Ok(Acquired::Guard(Held::Red(Box::new(RedHeld::new(
                    guard,
                    self.owner.clone(),
                    (self.servers, self.needed),
                    args.lease.is_some(),
                ))))),
                None => Ok(Acquired::Busy(self.busy_message(args, started.elapsed()).await)),
            },
            got = signals.recv() => {
                // Holds of the attempt in flight are given back in the background.
                let settle = async {
                    for client in &self.clients {
                        client.flush().await;
                    }
                };
                let _ = tokio::time::timeout(CANCEL_SETTLE, settle).await;
                Ok(Acquired::Interrupted(got.signal))
            },
        }
    }

    /// The library's RedLock over the connected servers, plus the majority over all of
    /// them: a guard with fewer than N/2 + 1 holds (only possible when some server could
    /// not be connected) is given back, and the attempt goes on. When too few of the
    /// connected servers answer (rather than refuse) for longer than the lease, or when
    /// the wait ends meanwhile, it is `Error::NoQuorum`, as the library's own.
    async fn attempt(&self, wait: Option<Duration>) -> Result<Option<RedGuard>, Error> {
        let deadline = wait.map(|wait| Instant::now() + wait);
        let mut outage_since: Option<Instant> = None;
        loop {
            let got = match deadline {
                None => self.lock.acquire().await.map(Some),
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        self.lock.try_acquire().await
                    } else {
                        self.lock.try_acquire_for(left).await
                    }
                }
            };
            let Some(guard) = got? else {
                return Ok(None);
            };
            if guard.held_on() >= self.needed {
                return Ok(Some(guard));
            }
            // A majority of the connected servers, not of all: refused by the others, or
            // did they not answer?
            let mut unreachable = Vec::new();
            for (i, hold) in guard.holds().iter().enumerate() {
                if hold.is_none() {
                    let state = tokio::time::timeout(PROBE, self.lock.locks()[i].state()).await;
                    if !matches!(state, Ok(Ok(_))) {
                        unreachable.push(format!("{}: no answer", self.labels[i]));
                    }
                }
            }
            let held = guard.held_on();
            let _ = guard.release().await;
            tracing::debug!(
                held,
                needed = self.needed,
                unreachable = unreachable.len(),
                "RedLock: not a majority of all the servers; given back"
            );
            let out_of_time = deadline.is_some_and(|deadline| Instant::now() >= deadline);
            if self.labels.len() - unreachable.len() < self.needed {
                let since = *outage_since.get_or_insert_with(Instant::now);
                if out_of_time || since.elapsed() > self.lease {
                    let mut failed = self.unconnected.clone();
                    failed.extend(unreachable);
                    return Err(Error::NoQuorum {
                        name: self.lock.locks()[0].name().to_owned(),
                        servers: self.servers,
                        needed: self.needed,
                        failed,
                    });
                }
            } else {
                outage_since = None;
            }
            if out_of_time {
                return Ok(None);
            }
            let random = uuid::Uuid::new_v4().as_u64_pair().0;
            let mut pause = Duration::from_micros(
                random
                    % u64::try_from(REDLOCK_RETRY_DELAY.as_micros())
                        .unwrap_or(1)
                        .max(1),
            );
            if let Some(deadline) = deadline {
                pause = pause.min(deadline.saturating_duration_since(Instant::now()));
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// "RedLock "x" not acquired (--no-wait): held on 3 of 5 servers by ...", as of now
    /// (best effort).
    async fn busy_message(&self, args: &RunArgs, waited: Duration) -> String {
        let mut asking = tokio::task::JoinSet::new();
        for lock in self.lock.locks() {
            let lock = lock.clone();
            asking.spawn(async move { tokio::time::timeout(PROBE, lock.state()).await });
        }
        let (mut held, mut silent) = (0, self.unconnected.len());
        let mut owners = BTreeSet::new();
        while let Some(joined) = asking.join_next().await {
            match joined {
                Ok(Ok(Ok(state))) => {
                    if let Some((owner, _)) = state.holders.first() {
                        held += 1;
                        owners.insert(owner.clone());
                    }
                }
                _ => silent += 1,
            }
        }
        let total = self.servers;
        let mut parts = Vec::new();
        if held > 0 {
            let by = match owners.len() {
                1 => format!(" by {}", owners.first().map_or("", String::as_str)),
                n => format!(" by {n} owners"),
            };
            parts.push(format!("held on {held} of {total} servers{by}"));
        }
        if silent > 0 {
            parts.push(format!("{silent} of {total} servers unreachable"));
        }
        if parts.is_empty() {
            parts.push("released meanwhile".to_owned());
        }
        let how = not_acquired(args, waited);
        format!("RedLock {:?} {how}: {}", args.name, parts.join(", "))
    }
}

/// A RedLock held on at least N/2 + 1 of the N servers.
pub struct RedHeld {
    guard: RedGuard,
    owner: String,
    servers: usize,
    needed: usize,
    /// With a fixed --lease: the validity the acquire computed (the lease less the time
    /// the acquire took and the clock drift allowance), after which it is not relied on.
    valid_until: Option<std::time::Instant>,
    /// Fires when fewer than `needed` holds remain (or the library says the lock is
    /// lost), or the validity of a fixed lease has run out.
    lost: CancellationToken,
    _watch: DropGuard,
}

impl RedHeld {
    /// `(servers, needed)`: N and N/2 + 1. `fixed`: taken with a fixed --lease (no
    /// renewals), so that it ends with the validity the acquire computed.
    fn new(
        guard: RedGuard,
        owner: String,
        (servers, needed): (usize, usize),
        fixed: bool,
    ) -> RedHeld {
        let valid_until = fixed.then(|| guard.valid_until());
        let expiry = async move {
            match valid_until {
                Some(until) => tokio::time::sleep_until(Instant::from_std(until)).await,
                None => std::future::pending().await,
            }
        };
        let lost = CancellationToken::new();
        let stop = CancellationToken::new();
        let tokens: Vec<CancellationToken> = guard
            .holds()
            .iter()
            .flatten()
            .map(LockGuard::lost_token)
            .collect();
        let (library, fire, watching) = (guard.lost_token(), lost.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::pin!(expiry);
            let mut remaining = tokens.len();
            let mut holds = tokio::task::JoinSet::new();
            for token in tokens {
                holds.spawn(async move { token.cancelled_owned().await });
            }
            while remaining >= needed {
                tokio::select! {
                    Some(_) = holds.join_next() => remaining -= 1,
                    () = library.cancelled() => break,
                    () = &mut expiry => break,
                    () = watching.cancelled() => return,
                }
            }
            fire.cancel();
        });
        RedHeld {
            guard,
            owner,
            servers,
            needed,
            valid_until,
            lost,
            _watch: stop.drop_guard(),
        }
    }

    pub fn name(&self) -> &str {
        self.guard.name()
    }

    pub fn owner(&self) -> &str {
        &self.owner
    }

    pub async fn lost(&self) {
        self.lost.cancelled().await
    }

    fn is_lost(&self) -> bool {
        self.lost.is_cancelled()
            || self.guard.is_lost()
            || self.guard.held_on() < self.needed
            || self.expired()
    }

    fn expired(&self) -> bool {
        self.valid_until
            .is_some_and(|until| std::time::Instant::now() >= until)
    }

    fn first_reason(&self) -> Option<LostReason> {
        self.guard
            .holds()
            .iter()
            .flatten()
            .find_map(LockGuard::lost_reason)
    }

    /// "held on 2 of 5 servers, 3 needed; first loss: ...", when fewer than a majority
    /// of holds remain.
    pub fn lost_reason(&self) -> Option<String> {
        if !self.is_lost() {
            return None;
        }
        if self.expired() && self.guard.held_on() >= self.needed {
            return Some(
                "its --lease ran out, counted from before the acquire and less a clock drift \
                 allowance"
                    .to_owned(),
            );
        }
        let first = self
            .first_reason()
            .map_or_else(String::new, |reason| format!("; first loss: {reason}"));
        Some(format!(
            "held on {} of {} servers, {} needed{first}",
            self.guard.held_on(),
            self.servers,
            self.needed
        ))
    }

    /// Gives the lock back on every server that holds it. `Err(LockLost)` when fewer than
    /// a majority of holds were left.
    pub async fn release(self) -> Result<(), Error> {
        let lost = self.is_lost();
        let reason = match self.first_reason() {
            Some(reason) => reason,
            None if self.expired() => LostReason::LeaseElapsed,
            None => LostReason::OwnerFieldGone,
        };
        let name = self.guard.name().to_owned();
        let result = self.guard.release().await;
        if lost {
            return Err(Error::LockLost { name, reason });
        }
        result
    }
}
