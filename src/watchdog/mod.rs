//! The watchdog: one task per client that keeps every watchdog-leased hold alive, checks
//! every fixed-lease hold, and tells holders when a hold is lost.
//!
//! Every hold taken through this client is recorded in the [`Registry`] (`registry.rs`),
//! one [`HoldEntry`] per (lock key, owner) and current hold id. The decisions (what a grant
//! joins, when a hold is lost, what a renewal confirms) are the protocol core's
//! ([`HoldState`](crate::protocol::hold::HoldState)); this module only does the I/O. Every
//! `timeout / 3` one tick sends all entries in batches of many keys per script call, all
//! batches at once over the multiplexed connection, so a tick costs about one round trip
//! whatever the number of locks. Watchdog-leased holds are renewed, fixed-lease holds only
//! checked, so a fixed lease also learns of a loss within one tick and is never extended.

mod registry;

pub use registry::WatchdogStats;
pub(crate) use registry::{HoldEntry, HoldShape, LeaseMode, Registry, SetMembers};

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::topology::{Conn, slot_of};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::protocol::renew::{RenewItem, Renewed, decode_renew, renew_call, renew_call_on_node};
use crate::protocol::{Call, Millis, Reply, timing};
use crate::scripts::{self, Scripts};

/// What the watchdog task needs; owned by the task, shared with nothing but the registry.
pub(crate) struct Watchdog {
    pub(crate) registry: Arc<Registry>,
    pub(crate) conn: Conn,
    pub(crate) scripts: Arc<Scripts>,
    pub(crate) lease: Duration,
    pub(crate) period: Duration,
    pub(crate) batch: usize,
    pub(crate) call_timeout: Duration,
    pub(crate) shutdown: CancellationToken,
}

impl Watchdog {
    /// How often renewals and checks run: every third of the lease by default, so two
    /// can fail before it runs out; shorter when the client asked for it.
    fn period(&self) -> Duration {
        self.period
    }

    /// Runs until the client's shutdown token is cancelled.
    pub(crate) async fn run(self) {
        let period = self.period();
        let clock = self.registry.clock;
        let mut next_tick = Instant::now() + period;
        // The earliest confirmed deadline seen by the last scan. Until then no hold can be
        // overdue and scanning (which visits every hold) is skipped; a new hold forces a
        // scan.
        let mut next_scan = Instant::now();
        let mut ticks: JoinSet<bool> = JoinSet::new();
        loop {
            let now = Instant::now();
            if now >= next_scan {
                // Grants made while this scan runs wake the watchdog (see `deadline_set`).
                self.registry.planned_scan.store(0, Ordering::SeqCst);
                next_scan = self
                    .registry
                    .expire_overdue(clock.now())
                    .map_or(next_tick, |at| clock.instant(at).min(next_tick));
                let planned = clock.ceil(next_scan).max(1);
                self.registry.planned_scan.store(planned, Ordering::SeqCst);
            }
            let wake_at = next_scan.min(next_tick);
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = self.registry.deadline_added.notified() => {
                    next_scan = Instant::now();
                    continue;
                }
                _ = tokio::time::sleep_until(wake_at) => {}
                // Reap finished ticks so the set does not grow. A tick with failed calls
                // (a primary died, the connection is being rebuilt) is followed by another
                // one soon rather than a whole period later: renewing is idempotent
                // (PEXPIRE GT), and a short lease can then outlast a failover.
                Some(done) = ticks.join_next(), if !ticks.is_empty() => {
                    if matches!(done, Ok(true)) {
                        next_tick = next_tick.min(Instant::now() + self.retry_after());
                    }
                    continue;
                }
            }
            let now = Instant::now();
            if now >= next_tick {
                next_tick = now + period;
                if ticks.len() < timing::MAX_TICKS_IN_FLIGHT {
                    ticks.spawn(self.tick());
                } else {
                    tracing::warn!("watchdog: previous renewals still running; skipping a tick");
                }
            }
        }
    }

    /// How soon a tick with failed calls is retried (the core's
    /// [`tick_retry_after`](timing::tick_retry_after)).
    fn retry_after(&self) -> Duration {
        Duration::from_millis(timing::tick_retry_after(self.period.as_millis() as Millis))
    }

    /// Renews (or checks) every hold once: all batches concurrently. On a cluster the
    /// holds are grouped by the primary that serves their slot, and each batch goes to its
    /// primary by address (see [`send_by_node`]).
    /// Resolves to whether any call failed.
    fn tick(&self) -> impl std::future::Future<Output = bool> + Send + 'static {
        let mut entries = self.registry.entries();
        let by_slot = self.conn.is_cluster();
        if by_slot {
            entries.sort_by_cached_key(|entry| slot_of(entry.key.as_bytes()));
        }
        let registry = self.registry.clone();
        let conn = self.conn.clone();
        let scripts = self.scripts.clone();
        let lease_ms = self.lease.as_millis() as Millis;
        let batch = self.batch.max(1);
        let call_timeout = Duration::from_millis(timing::renewal_call_timeout(
            self.call_timeout.as_millis() as Millis,
            lease_ms,
        ));
        async move {
            if entries.is_empty() {
                return false;
            }
            let failed_before = registry.counters.failed_calls.load(Ordering::Relaxed);
            let started = Instant::now();
            // Holds whose scripts take declared keys (sorted-set members, Redisson
            // fields): batched per slot on a cluster, routed by key. The lock hashes'
            // renew.lua goes by node on a cluster (below).
            let (keyed, entries): (Vec<_>, Vec<_>) = entries
                .into_iter()
                .partition(|entry| !matches!(entry.shape, HoldShape::LockHash));
            let (permit_entries, field_entries): (Vec<_>, Vec<_>) = keyed
                .into_iter()
                .partition(|entry| matches!(entry.shape, HoldShape::SetMembers(_)));
            let mut batches = keyed_batches(permit_entries, batch, by_slot, lease_ms);
            batches.extend(keyed_batches(field_entries, batch, by_slot, lease_ms));
            let permit_calls = batches.len() as u64;
            let permits_renewed = if batches.is_empty() {
                0
            } else {
                send_each(&conn, &scripts, &registry, batches, lease_ms, call_timeout).await
            };
            let (call_count, renewed) = if entries.is_empty() {
                (0, 0)
            } else if by_slot {
                send_by_node(
                    &conn,
                    &scripts,
                    &registry,
                    entries,
                    batch,
                    lease_ms,
                    call_timeout,
                )
                .await
            } else {
                let batches = into_batches(entries, batch, false, lease_ms, renew_call);
                let calls = batches.len() as u64;
                let renewed =
                    send_each(&conn, &scripts, &registry, batches, lease_ms, call_timeout).await;
                (calls, renewed)
            };
            let (call_count, renewed) = (call_count + permit_calls, renewed + permits_renewed);
            let c = &registry.counters;
            c.ticks.fetch_add(1, Ordering::Relaxed);
            c.last_tick_calls.store(call_count, Ordering::Relaxed);
            c.last_tick_locks.store(renewed, Ordering::Relaxed);
            let took = started.elapsed();
            c.last_tick_micros
                .store(took.as_micros() as u64, Ordering::Relaxed);
            crate::observe::renewal_tick(took, renewed, call_count);
            c.failed_calls.load(Ordering::Relaxed) > failed_before
        }
    }
}

/// One renewal script call: the holds it covers, in the order of its reply.
struct Batch {
    entries: Vec<Arc<HoldEntry>>,
    items: Vec<RenewItem>,
    call: Call,
}

/// Cuts the holds into batches of at most `batch`, each within one slot when `by_slot`
/// (the entries are then sorted by slot), each with the call `build` makes for it
/// (`renew_call`, or `renew_call_on_node` for a batch sent to a cluster node by address).
fn into_batches(
    entries: Vec<Arc<HoldEntry>>,
    batch: usize,
    by_slot: bool,
    lease_ms: Millis,
    build: fn(Millis, Vec<RenewItem>) -> (Call, Vec<RenewItem>),
) -> Vec<Batch> {
    let mut batches = Vec::new();
    let mut entries = entries.into_iter().peekable();
    loop {
        let mut chunk: Vec<Arc<HoldEntry>> = Vec::new();
        let mut slot = 0;
        while chunk.len() < batch {
            let Some(next) = entries.peek() else {
                break;
            };
            let next_slot = if by_slot {
                slot_of(next.key.as_bytes())
            } else {
                0
            };
            if !chunk.is_empty() && next_slot != slot {
                break;
            }
            slot = next_slot;
            chunk.extend(entries.next());
        }
        if chunk.is_empty() {
            return batches;
        }
        let mut pairs: Vec<(Arc<HoldEntry>, RenewItem)> = chunk
            .into_iter()
            .map(|entry| {
                let state = entry.state.lock();
                let item = RenewItem::of(entry.key.clone(), &state);
                drop(state);
                (entry, item)
            })
            .collect();
        // In the order the script wants (renewed first), so that the reply's positions
        // are positions in the batch: no lookup per lock.
        pairs.sort_by_key(|(_, item)| !item.renew);
        let (entries, items): (Vec<_>, Vec<_>) = pairs.into_iter().unzip();
        let (call, items) = build(lease_ms, items);
        batches.push(Batch {
            entries,
            items,
            call,
        });
    }
}

/// Batches of holds of one shape whose script takes declared keys: sorted-set members
/// (`sem_renew.lua`) or Redisson fields (`redisson_renew.lua`), within one slot when
/// `by_slot`.
fn keyed_batches(
    mut entries: Vec<Arc<HoldEntry>>,
    batch: usize,
    by_slot: bool,
    lease_ms: Millis,
) -> Vec<Batch> {
    if by_slot {
        entries.sort_by_cached_key(|entry| slot_of(entry.key.as_bytes()));
    }
    let mut batches = Vec::new();
    let mut rest = entries.into_iter().peekable();
    loop {
        let mut chunk: Vec<Arc<HoldEntry>> = Vec::new();
        while let Some(next) = rest.peek() {
            if chunk.len() >= batch
                || (by_slot
                    && chunk.first().is_some_and(|first| {
                        slot_of(first.key.as_bytes()) != slot_of(next.key.as_bytes())
                    }))
            {
                break;
            }
            chunk.extend(rest.next());
        }
        let Some(first) = chunk.first() else {
            return batches;
        };
        let items: Vec<RenewItem> = chunk
            .iter()
            .map(|entry| {
                let state = entry.state.lock();
                RenewItem::of(entry.key.clone(), &state)
            })
            .collect();
        let (call, order) = match first.shape {
            HoldShape::SetMembers(_) | HoldShape::LockHash => {
                let sizes: Vec<u32> = chunk
                    .iter()
                    .map(|entry| match entry.shape {
                        HoldShape::SetMembers(n) => n,
                        _ => 1,
                    })
                    .collect();
                crate::protocol::semaphore::renew_call(lease_ms, &items, &sizes)
            }
            HoldShape::RedissonField | HoldShape::RedissonRead | HoldShape::RedissonWrite => {
                let shapes: Vec<HoldShape> = chunk.iter().map(|entry| entry.shape).collect();
                crate::protocol::redisson::renew_call_shaped(lease_ms, &items, &shapes)
            }
        };
        batches.push(Batch {
            entries: order.iter().map(|i| chunk[*i].clone()).collect(),
            items: order.iter().map(|i| items[*i].clone()).collect(),
            call,
        });
    }
}

/// One call per batch, all concurrently (one server).
async fn send_each(
    conn: &Conn,
    scripts: &Arc<Scripts>,
    registry: &Arc<Registry>,
    batches: Vec<Batch>,
    lease_ms: Millis,
    call_timeout: Duration,
) -> u64 {
    let mut calls = JoinSet::new();
    for batch in batches {
        let mut conn = conn.clone();
        let scripts = scripts.clone();
        let registry = registry.clone();
        calls.spawn(async move {
            let sent_at = registry.clock.now();
            let reply =
                tokio::time::timeout(call_timeout, scripts::run(&mut conn, &scripts, &batch.call))
                    .await
                    .map_err(|_| RenewFailed::timed_out())
                    .and_then(|reply| reply.map_err(|err| RenewFailed::of(&err.error)));
            // Calls routed by key reach the node serving the key: nothing is elsewhere.
            settle(&registry, &batch, sent_at, lease_ms, reply).0
        });
    }
    let mut renewed = 0;
    while let Some(result) = calls.join_next().await {
        renewed += result.unwrap_or(0);
    }
    renewed
}

/// On a cluster: the holds of each primary in batches of `batch`, whatever their slots
/// (`renew.lua` with the keys in ARGV, under `allow-cross-slot-keys`), sent to that
/// primary by address, all concurrently. The primary of each slot comes from
/// `CLUSTER SLOTS`, asked once per tick. Holds whose slot moved meanwhile (the script
/// reports them, or the call met `MOVED`), and every hold when the map is unknown, are
/// renewed in per-slot batches routed by key. Returns (calls, holds renewed or checked).
async fn send_by_node(
    conn: &Conn,
    scripts: &Arc<Scripts>,
    registry: &Arc<Registry>,
    entries: Vec<Arc<HoldEntry>>,
    batch: usize,
    lease_ms: Millis,
    call_timeout: Duration,
) -> (u64, u64) {
    let by_key = |entries: Vec<Arc<HoldEntry>>| {
        let mut entries = entries;
        entries.sort_by_cached_key(|entry| slot_of(entry.key.as_bytes()));
        into_batches(entries, batch, true, lease_ms, renew_call)
    };
    let slots = match tokio::time::timeout(call_timeout, conn.cluster_slots()).await {
        Ok(Ok(slots)) => slots,
        _ => {
            let batches = by_key(entries);
            let calls = batches.len() as u64;
            let renewed = send_each(conn, scripts, registry, batches, lease_ms, call_timeout).await;
            return (calls, renewed);
        }
    };
    let mut by_node: std::collections::HashMap<(String, u16), Vec<Arc<HoldEntry>>> =
        Default::default();
    let mut unmapped = Vec::new();
    for entry in entries {
        let slot = slot_of(entry.key.as_bytes());
        match slots
            .iter()
            .find(|range| range.start <= slot && slot <= range.end)
        {
            Some(range) => by_node
                .entry((range.host.clone(), range.port))
                .or_default()
                .push(entry),
            None => unmapped.push(entry),
        }
    }
    let mut calls = 0u64;
    let mut tasks = JoinSet::new();
    for ((host, port), entries) in by_node {
        for batch in into_batches(entries, batch, false, lease_ms, renew_call_on_node) {
            calls += 1;
            let conn = conn.clone();
            let scripts = scripts.clone();
            let registry = registry.clone();
            let (host, port) = (host.clone(), port);
            tasks.spawn(async move {
                let sent_at = registry.clock.now();
                let reply = tokio::time::timeout(
                    call_timeout,
                    scripts::run_on_node(&conn, &scripts, &[&batch.call], &host, port),
                )
                .await;
                match reply {
                    Ok(Ok(mut replies)) => match replies.pop() {
                        Some(Err(err)) if matches!(err.code(), Some("MOVED" | "ASK")) => {
                            (0, batch.entries)
                        }
                        Some(reply) => {
                            let reply = reply.map_err(|err| RenewFailed::of(&err));
                            settle(&registry, &batch, sent_at, lease_ms, reply)
                        }
                        None => {
                            let reply = Err(RenewFailed::no_reply());
                            settle(&registry, &batch, sent_at, lease_ms, reply)
                        }
                    },
                    Ok(Err(err)) => settle(
                        &registry,
                        &batch,
                        sent_at,
                        lease_ms,
                        Err(RenewFailed::of(&err)),
                    ),
                    Err(_) => {
                        let reply = Err(RenewFailed::timed_out());
                        settle(&registry, &batch, sent_at, lease_ms, reply)
                    }
                }
            });
        }
    }
    let mut renewed = 0;
    while let Some(result) = tasks.join_next().await {
        if let Ok((count, elsewhere)) = result {
            renewed += count;
            unmapped.extend(elsewhere);
        }
    }
    if !unmapped.is_empty() {
        let batches = by_key(unmapped);
        calls += batches.len() as u64;
        renewed += send_each(conn, scripts, registry, batches, lease_ms, call_timeout).await;
    }
    (calls, renewed)
}

/// Why a renewal call got no reply to read.
struct RenewFailed {
    text: String,
    /// Redis answered with an error reply (counted apart: `WatchdogStats::refused_calls`).
    refused: bool,
}

impl RenewFailed {
    fn of(err: &redis::RedisError) -> Self {
        RenewFailed {
            text: err.to_string(),
            refused: matches!(
                err.kind(),
                redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
            ),
        }
    }

    fn timed_out() -> Self {
        RenewFailed {
            text: "renewal timed out".to_owned(),
            refused: false,
        }
    }

    fn no_reply() -> Self {
        RenewFailed {
            text: "no reply to a renewal".to_owned(),
            refused: false,
        }
    }
}

/// Applies one batch's reply (or failure) to its holds; returns how many were renewed or
/// checked, and the holds the node did not serve (their slot moved).
fn settle(
    registry: &Registry,
    batch: &Batch,
    sent_at: Millis,
    lease_ms: Millis,
    reply: std::result::Result<Reply, RenewFailed>,
) -> (u64, Vec<Arc<HoldEntry>>) {
    let c = &registry.counters;
    c.renew_calls.fetch_add(1, Ordering::Relaxed);
    let status = match reply.map(|reply| decode_renew(&reply, batch.entries.len())) {
        Ok(Ok(status)) => status,
        Ok(Err(err)) => {
            tracing::error!(error = %err, "watchdog: unreadable renew reply");
            c.failed_calls.fetch_add(1, Ordering::Relaxed);
            crate::observe::renewal_failed();
            return (0, Vec::new());
        }
        Err(err) => {
            tracing::warn!(error = %err.text, "watchdog: renewal failed; will retry");
            c.failed_calls.fetch_add(1, Ordering::Relaxed);
            if err.refused {
                c.refused_calls.fetch_add(1, Ordering::Relaxed);
            }
            crate::observe::renewal_failed();
            return (0, Vec::new());
        }
    };
    let (mut renewed, mut checked) = (0, 0);
    let mut elsewhere = Vec::new();
    // Counted per kind, then reported once per kind: a batch holds a few kinds at most.
    let mut by_kind: Vec<(&'static str, u64)> = Vec::new();
    for ((entry, item), status) in batch.entries.iter().zip(&batch.items).zip(status) {
        match status {
            Renewed::Gone => registry.gone(entry),
            Renewed::Elsewhere => elsewhere.push(entry.clone()),
            Renewed::Current => {
                entry.state.lock().on_renewal(item.renew, sent_at, lease_ms);
                if item.renew {
                    renewed += 1;
                } else {
                    checked += 1;
                }
                match by_kind.iter_mut().find(|(kind, _)| *kind == entry.kind) {
                    Some((_, count)) => *count += 1,
                    None => by_kind.push((entry.kind, 1)),
                }
            }
        }
    }
    for (kind, holds) in by_kind {
        crate::observe::renewed(kind, holds);
    }
    c.renewed.fetch_add(renewed, Ordering::Relaxed);
    c.checked.fetch_add(checked, Ordering::Relaxed);
    (renewed + checked, elsewhere)
}
