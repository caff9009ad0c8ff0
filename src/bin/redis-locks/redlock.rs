//! `--redlock ... run NAME`: the lock NAME as a [`RedLock`] over independent servers, one
//! `LockClient` per `--url`, held while a majority (N/2 + 1) of them hold it.
//!
//! The servers are connected all at once. One that cannot be connected counts as a
//! server that refused: the RedLock is built over the connected ones with
//! [`RedLock::with_servers`] counting its majority over all N, so an acquire needs N/2 + 1
//! holds and the guard is lost once fewer remain. With fewer than a majority connected
//! nothing is tried (exit 69): no attempt could win one.

use std::collections::BTreeSet;
use std::time::Duration;

use redis_locks::{Error, LostReason, RedGuard, RedLock};
use tokio::time::Instant;

use crate::args::{Global, RunArgs};
use crate::connect::RedServer;
use crate::exit::{self, Failure};
use crate::held::{Acquired, CANCEL_SETTLE, Holding, Pending, cli_owner, not_acquired, wait_limit};
use crate::signals::Signals;

/// How long a server may take to tell its state (busy message).
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

/// The connected servers of a --redlock run, as one RedLock whose majority is counted
/// over every --url.
pub struct RedSet {
    lock: RedLock,
    owner: String,
    /// N: every --url, connected or not.
    servers: usize,
    /// Why the others could not be connected (each naming its server).
    unconnected: Vec<String>,
}

impl RedSet {
    /// From the connection attempts: a usage error for a bad URL, exit 69 when fewer than
    /// a majority could be connected.
    pub fn new(servers: Vec<RedServer>, args: &RunArgs, quiet: bool) -> Result<RedSet, Failure> {
        let total = servers.len();
        let (mut clients, mut unconnected) = (Vec::new(), Vec::new());
        for server in servers {
            match server.client {
                Ok(client) => clients.push(client),
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
        let Some(first) = clients.first() else {
            return Err(Failure::new(
                exit::UNAVAILABLE,
                format!(
                    "RedLock {:?}: none of its {total} servers could be connected; the command \
                     was not run ({})",
                    args.name,
                    unconnected.join("; ")
                ),
            ));
        };
        let owner = cli_owner(first);
        let locks = clients
            .iter()
            .map(|client| client.lock(&args.name))
            .collect::<Result<Vec<_>, _>>()?;
        let lock = RedLock::new(locks)?
            .with_servers(total)?
            .with_owner(owner.clone())?;
        let lock = match args.lease {
            Some(lease) => lock.with_lease(lease)?,
            None => lock,
        };
        let needed = lock.quorum();
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
        Ok(RedSet {
            lock,
            owner,
            servers: total,
            unconnected,
        })
    }

    /// Takes the RedLock as --wait/--no-wait say; a signal stops the wait.
    pub async fn acquire(
        &self,
        args: &RunArgs,
        signals: &mut Signals,
    ) -> Result<Acquired, Failure> {
        let started = Instant::now();
        let attempt = async {
            match wait_limit(args) {
                None => self.lock.acquire().await.map(Some),
                Some(wait) if wait.is_zero() => self.lock.try_acquire().await,
                Some(wait) => self.lock.try_acquire_for(wait).await,
            }
        };
        tokio::select! {
            acquired = attempt => match acquired.map_err(|err| self.name_unconnected(err))? {
                Some(guard) => Ok(Acquired::Guard(Box::new(RedHeld::new(
                    guard,
                    self.owner.clone(),
                    (self.servers, self.lock.quorum()),
                    args.lease.is_some(),
                )))),
                None => Ok(Acquired::Busy(self.busy_message(args, started.elapsed()).await)),
            },
            got = signals.recv() => {
                // Holds of the attempt in flight are given back in the background.
                let settle = async {
                    for lock in self.lock.locks() {
                        lock.client().flush().await;
                    }
                };
                let _ = tokio::time::timeout(CANCEL_SETTLE, settle).await;
                Ok(Acquired::Interrupted(got.signal))
            },
        }
    }

    /// `NoQuorum` counts the servers that could not be connected without naming them (the
    /// library has no client for them): the reasons they failed go first.
    fn name_unconnected(&self, err: Error) -> Error {
        match err {
            Error::NoQuorum {
                name,
                servers,
                needed,
                failed,
            } => Error::NoQuorum {
                name,
                servers,
                needed,
                failed: self.unconnected.iter().cloned().chain(failed).collect(),
            },
            other => other,
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

/// A RedLock held on at least N/2 + 1 of the N servers. Lost when the guard is (fewer
/// than N/2 + 1 holds remain) or, with a fixed --lease, when the validity the acquire
/// computed has run out.
pub struct RedHeld {
    guard: RedGuard,
    owner: String,
    /// N and N/2 + 1, for messages.
    servers: usize,
    needed: usize,
    /// With a fixed --lease (no renewals): the guard's validity, after which it is not
    /// relied on.
    valid_until: Option<std::time::Instant>,
}

impl RedHeld {
    /// `(servers, needed)`: N and N/2 + 1. `fixed`: taken with a fixed --lease.
    fn new(
        guard: RedGuard,
        owner: String,
        (servers, needed): (usize, usize),
        fixed: bool,
    ) -> RedHeld {
        RedHeld {
            valid_until: fixed.then(|| guard.valid_until()),
            guard,
            owner,
            servers,
            needed,
        }
    }

    fn expired(&self) -> bool {
        self.valid_until
            .is_some_and(|until| std::time::Instant::now() >= until)
    }
}

impl Holding for RedHeld {
    fn name(&self) -> &str {
        self.guard.name()
    }

    fn what(&self) -> String {
        format!("RedLock {:?}", self.guard.name())
    }

    fn owner(&self) -> &str {
        &self.owner
    }

    fn lost(&self) -> Pending<'_, ()> {
        Box::pin(async move {
            match self.valid_until {
                Some(until) => tokio::select! {
                    () = self.guard.lost() => {}
                    () = tokio::time::sleep_until(Instant::from_std(until)) => {}
                },
                None => self.guard.lost().await,
            }
        })
    }

    /// "held on 2 of 5 servers, 3 needed; first loss: ...", when fewer than a majority
    /// of holds remain; the --lease message when its validity ran out.
    fn lost_reason(&self) -> Option<String> {
        if !self.guard.is_lost() {
            return self.expired().then(|| {
                "its --lease ran out, counted from before the acquire and less a clock drift \
                 allowance"
                    .to_owned()
            });
        }
        let first = self
            .guard
            .lost_reason()
            .map_or_else(String::new, |reason| format!("; first loss: {reason}"));
        Some(format!(
            "held on {} of {} servers, {} needed{first}",
            self.guard.held_on(),
            self.servers,
            self.needed
        ))
    }

    /// Gives the lock back on every server that holds it. `Err(LockLost)` when fewer than
    /// a majority of holds were given back, or a fixed --lease's validity had run out.
    fn release(self: Box<Self>) -> Pending<'static, Result<(), Error>> {
        Box::pin(async move {
            let expired = self.expired();
            let name = self.guard.name().to_owned();
            let result = self.guard.release().await;
            let result = if expired && result.is_ok() {
                Err(Error::LockLost {
                    name,
                    reason: LostReason::LeaseElapsed,
                })
            } else {
                result
            };
            match &result {
                Ok(()) => tracing::info!("released the RedLock"),
                Err(err) => tracing::debug!(error = %err, "release of the RedLock failed"),
            }
            result
        })
    }
}
