//! The pub/sub hub: one subscription connection per client, shared by every local waiter.
//!
//! Waiters call [`Hub::listen`] and get a [`Listener`] for a channel. All listeners of one
//! channel share one `SUBSCRIBE`; the hub unsubscribes when the last listener is dropped.
//! A message wakes **one** local waiter (`Notify::notify_one`), so a release costs one
//! retry per process rather than one per waiter: the waiter first in line if one is marked
//! ([`Listener::set_first_in_line`]), else any. A waiter that was woken but leaves
//! without taking the lock passes the wake-up on ([`Listener::pass_on`]).
//!
//! The hub task reconciles the wanted set of channels with what the server has confirmed.
//! After a disconnect it reconnects with back-off, re-subscribes everything, and wakes
//! every waiter once, since messages published meanwhile were lost (pub/sub is
//! at-most-once). Waiters never depend on a message alone: each sleeps at most the lock's
//! remaining TTL, so a lost message costs latency, not liveness.
//!
//! Topologies: on one server and on a Sentinel primary the hub uses classic `SUBSCRIBE`
//! on a dedicated connection; on a cluster it uses sharded `SSUBSCRIBE` through a RESP3
//! cluster connection, one channel per command (each channel is in its lock's slot).
//! When the command connection follows a topology change (a new Sentinel primary, a
//! rebuilt cluster map; see `topology`), the hub reconnects too. A server-sent
//! `sunsubscribe` (the slot moved to another shard) is answered by subscribing again,
//! which redis-rs routes to the slot's new owner.

use crate::protocol::backoff::Backoff;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use redis::aio::{PubSubSink, PubSubStream};
use redis::cluster_async::ClusterConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::topology::{Conn, SentinelConn, Settings, Target};

/// One channel's local state.
#[derive(Debug)]
struct Channel {
    name: Arc<str>,
    /// Guarded by the hub's map lock; atomic only so the struct is `Sync`.
    listeners: AtomicUsize,
    /// Set once the server confirmed the subscription; cleared on disconnect.
    subscribed: AtomicBool,
    subscribed_changed: Notify,
    wake: Notify,
    /// Listeners that are first in line (a semaphore waiter holding the reservation: the
    /// freed permits are kept for it, so a wake-up given to anyone else is wasted).
    first_in_line: AtomicUsize,
    /// Wakes the first in line.
    wake_first: Notify,
}

#[derive(Debug, Default)]
struct Shared {
    channels: Mutex<HashMap<Arc<str>, Arc<Channel>>>,
    /// Wakes the hub task to reconcile subscriptions.
    changed: Notify,
    /// Set once the server refused SUBSCRIBE with NOPERM (reconnecting cannot change an
    /// ACL, so the hub stops asking), or from the start in spin mode: waiters poll instead
    /// (see `Lock::acquire`).
    denied: AtomicBool,
    /// Wakes `Listener::ready` waiters when `denied` is set.
    denied_changed: Notify,
}

/// Handle to the hub; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Hub {
    shared: Arc<Shared>,
}

/// A waiter's interest in one channel. Dropping it withdraws the interest.
#[derive(Debug)]
pub(crate) struct Listener {
    shared: Arc<Shared>,
    channel: Arc<Channel>,
    /// Counted in its channel's `first_in_line`.
    first: bool,
}

impl Hub {
    /// A hub that never subscribes (spin mode, see
    /// [`LockClientBuilder::spin_wait`](crate::LockClientBuilder::spin_wait)): every
    /// listener is "denied" from the start, so waiters poll with back-off.
    pub(crate) fn spinning() -> Self {
        let shared = Arc::new(Shared::default());
        shared.denied.store(true, Ordering::Release);
        Hub { shared }
    }

    /// Starts the hub task. It connects lazily, when the first listener appears.
    pub(crate) fn start(
        target: &Target,
        conn: &Conn,
        settings: Settings,
        shutdown: CancellationToken,
    ) -> Self {
        let shared = Arc::new(Shared::default());
        let source = match (target, conn.sentinel()) {
            (_, Some(sentinel)) => Source::Sentinel(sentinel.clone()),
            (Target::Cluster(cluster), _) => Source::Cluster(cluster.clone()),
            (Target::Single(client), _) => Source::Fixed(Box::new(client.clone())),
            // A Sentinel target always has a Sentinel connection; this arm is unreachable
            // in practice and falls back to "no wake-ups" (waits stay pttl-bounded).
            (Target::Sentinel(_), None) => Source::None,
        };
        let task = HubTask {
            shared: shared.clone(),
            source,
            generation: conn.generation(),
            connect_timeout: settings.connect_timeout,
            command_timeout: settings.response_timeout,
            settings,
            shutdown,
        };
        tokio::spawn(task.run());
        Hub { shared }
    }

    /// Registers interest in `channel`. The returned listener is usable at once; await
    /// [`Listener::ready`] to know that the server confirmed the subscription.
    pub(crate) fn listen(&self, channel: &Arc<str>) -> Listener {
        let mut channels = self.shared.channels.lock();
        let entry = channels
            .entry(channel.clone())
            .or_insert_with(|| {
                self.shared.changed.notify_one();
                Arc::new(Channel {
                    name: channel.clone(),
                    listeners: AtomicUsize::new(0),
                    subscribed: AtomicBool::new(false),
                    subscribed_changed: Notify::new(),
                    wake: Notify::new(),
                    first_in_line: AtomicUsize::new(0),
                    wake_first: Notify::new(),
                })
            })
            .clone();
        entry.listeners.fetch_add(1, Ordering::Relaxed);
        Listener {
            shared: self.shared.clone(),
            channel: entry,
            first: false,
        }
    }

    /// How many local waiters listen on `channel`.
    pub(crate) fn listeners(&self, channel: &str) -> usize {
        self.shared
            .channels
            .lock()
            .get(channel)
            .map_or(0, |entry| entry.listeners.load(Ordering::Relaxed))
    }

    /// Number of channels with at least one local listener (for tests and diagnostics).
    pub(crate) fn channel_count(&self) -> usize {
        self.shared.channels.lock().len()
    }
}

impl Listener {
    /// Resolves once the server has confirmed the subscription, or refused it for good
    /// (see [`Listener::denied`]).
    ///
    /// Cancel safety: cancel-safe; it only observes state.
    pub(crate) async fn ready(&self) {
        loop {
            let changed = self.channel.subscribed_changed.notified();
            let denied = self.shared.denied_changed.notified();
            tokio::pin!(changed);
            tokio::pin!(denied);
            changed.as_mut().enable();
            denied.as_mut().enable();
            if self.channel.subscribed.load(Ordering::Acquire) || self.denied() {
                return;
            }
            tokio::select! {
                _ = changed => {}
                _ = denied => {}
            }
        }
    }

    /// Whether the server refused SUBSCRIBE for lack of permission: no wake-up will ever
    /// come, and the waiter must poll.
    pub(crate) fn denied(&self) -> bool {
        self.shared.denied.load(Ordering::Acquire)
    }

    /// Resolves when this waiter is woken by a release message (or by a wake-up handed
    /// on).
    pub(crate) async fn notified(&self) {
        if self.first {
            tokio::select! {
                _ = self.channel.wake_first.notified() => {}
                _ = self.channel.wake.notified() => {}
            }
        } else {
            self.channel.wake.notified().await
        }
    }

    /// Marks this waiter first in line (or no longer): while one is, a release message
    /// wakes it rather than another local waiter.
    pub(crate) fn set_first_in_line(&mut self, first: bool) {
        if first != self.first {
            self.first = first;
            if first {
                self.channel.first_in_line.fetch_add(1, Ordering::AcqRel);
            } else {
                self.channel.first_in_line.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Hands a wake-up this waiter received, but will not use, to the next local waiter.
    pub(crate) fn pass_on(&self) {
        self.channel.wake.notify_one();
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.set_first_in_line(false);
        let mut channels = self.shared.channels.lock();
        if self.channel.listeners.fetch_sub(1, Ordering::Relaxed) == 1 {
            if channels
                .get(&self.channel.name)
                .is_some_and(|current| Arc::ptr_eq(current, &self.channel))
            {
                channels.remove(&self.channel.name);
            }
            self.shared.changed.notify_one();
        }
    }
}

struct HubTask {
    shared: Arc<Shared>,
    source: Source,
    /// The command connection's topology generation: a change means "reconnect".
    generation: watch::Receiver<u64>,
    connect_timeout: Duration,
    command_timeout: Duration,
    settings: Settings,
    shutdown: CancellationToken,
}

/// Where subscriptions go.
enum Source {
    Fixed(Box<redis::Client>),
    Sentinel(SentinelConn),
    Cluster(crate::topology::ClusterTarget),
    None,
}

struct Connection {
    link: Link,
    /// Channels the server has confirmed on this connection.
    subscribed: HashSet<Arc<str>>,
}

enum Link {
    Classic {
        sink: PubSubSink,
        stream: PubSubStream,
    },
    Sharded {
        conn: ClusterConnection,
        pushes: UnboundedReceiver<PushInfo>,
    },
}

/// What the subscription connection reported.
enum Event {
    /// A message on this channel.
    Message(String),
    /// The server dropped this subscription by itself (its slot moved).
    Dropped(String),
    /// The connection is gone.
    Gone,
    /// Nothing for us (confirmations, other pushes).
    Other,
}

impl Link {
    async fn subscribe(&mut self, names: &[&str]) -> redis::RedisResult<()> {
        match self {
            Link::Classic { sink, .. } => sink.subscribe(names).await,
            Link::Sharded { conn, .. } => {
                // One channel per command: the channels of different locks are in
                // different slots.
                for name in names {
                    conn.ssubscribe(*name).await?;
                }
                Ok(())
            }
        }
    }

    async fn unsubscribe(&mut self, names: &[&str]) -> redis::RedisResult<()> {
        match self {
            Link::Classic { sink, .. } => sink.unsubscribe(names).await,
            Link::Sharded { conn, .. } => {
                for name in names {
                    conn.sunsubscribe(*name).await?;
                }
                Ok(())
            }
        }
    }

    async fn next_event(&mut self) -> Event {
        match self {
            Link::Classic { stream, .. } => match futures_next(stream).await {
                Some(message) => Event::Message(message.get_channel_name().to_owned()),
                None => Event::Gone,
            },
            Link::Sharded { pushes, .. } => match pushes.recv().await {
                None => Event::Gone,
                Some(push) => match push.kind {
                    PushKind::SMessage => {
                        first_text(&push.data).map_or(Event::Other, Event::Message)
                    }
                    PushKind::SUnsubscribe => {
                        first_text(&push.data).map_or(Event::Other, Event::Dropped)
                    }
                    PushKind::Disconnection => Event::Gone,
                    _ => Event::Other,
                },
            },
        }
    }
}

fn first_text(data: &[Value]) -> Option<String> {
    match data.first()? {
        Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(text) => Some(text.clone()),
        _ => None,
    }
}

impl HubTask {
    async fn run(mut self) {
        let mut connection: Option<Connection> = None;
        // Reconnecting: 50 ms doubling to 2 s, spread (many clients lose a server at once).
        let reconnect = Backoff::new(50_000, 2_000_000);
        let mut backoff = reconnect.clone();
        loop {
            if self.shutdown.is_cancelled() {
                return;
            }
            if self.shared.denied.load(Ordering::Acquire) {
                // No subscription will ever be allowed: nothing to do but stop.
                return;
            }
            if connection.is_none() {
                if self.shared.channels.lock().is_empty() {
                    tokio::select! {
                        _ = self.shutdown.cancelled() => return,
                        _ = self.shared.changed.notified() => continue,
                    }
                }
                // Whatever changed before this connection is made is reflected in it.
                self.generation.borrow_and_update();
                match self.connect().await {
                    Some(fresh) => {
                        backoff.reset(&reconnect);
                        connection = Some(fresh);
                    }
                    None => {
                        let pause = Duration::from_micros(
                            backoff.pause(uuid::Uuid::new_v4().as_u64_pair().0),
                        );
                        tokio::select! {
                            _ = self.shutdown.cancelled() => return,
                            _ = tokio::time::sleep(pause) => {}
                        }
                        continue;
                    }
                }
                // Wake everyone after the re-subscription below, because messages sent
                // while we were away are gone.
                if self.reconcile(&mut connection).await {
                    self.wake_everyone();
                } else {
                    // A connection that cannot subscribe is not retried at once: that would
                    // open connections as fast as the server accepts them.
                    let pause =
                        Duration::from_micros(backoff.pause(uuid::Uuid::new_v4().as_u64_pair().0));
                    tokio::select! {
                        _ = self.shutdown.cancelled() => return,
                        _ = tokio::time::sleep(pause) => {}
                    }
                }
                continue;
            }
            let Some(conn) = connection.as_mut() else {
                continue;
            };
            tokio::select! {
                _ = self.shutdown.cancelled() => return,
                _ = self.shared.changed.notified() => {
                    self.reconcile(&mut connection).await;
                }
                Ok(()) = self.generation.changed() => {
                    tracing::info!("pub/sub: the topology changed; resubscribing");
                    connection = None;
                    self.mark_unsubscribed();
                    self.wake_everyone();
                }
                event = conn.link.next_event() => match event {
                    Event::Message(channel) => self.dispatch(&channel),
                    Event::Dropped(channel) => {
                        // Subscribe again (reconcile sees it missing); whatever was
                        // published meanwhile is lost, so wake its waiters.
                        conn.subscribed.remove(channel.as_str());
                        if let Some(target) = self.shared.channels.lock().get(channel.as_str()) {
                            target.subscribed.store(false, Ordering::Release);
                            target.wake.notify_waiters();
                            target.wake_first.notify_waiters();
                        }
                        self.reconcile(&mut connection).await;
                    }
                    Event::Other => {}
                    Event::Gone => {
                        tracing::warn!("pub/sub connection lost; reconnecting");
                        connection = None;
                        self.mark_unsubscribed();
                        self.wake_everyone();
                    }
                },
            }
        }
    }

    async fn connect(&self) -> Option<Connection> {
        let connecting = async {
            match &self.source {
                Source::Fixed(client) => classic(client).await,
                Source::Sentinel(sentinel) => classic(&sentinel.primary_client()).await,
                Source::Cluster(seeds) => {
                    let (tx, pushes) = unbounded_channel();
                    let conn = crate::topology::cluster_client(seeds, self.settings)
                        .use_protocol(redis::ProtocolVersion::RESP3)
                        .push_sender(tx)
                        .retries(3)
                        .build()?
                        .get_async_connection()
                        .await?;
                    Ok(Link::Sharded { conn, pushes })
                }
                Source::None => Err(redis::RedisError::from((
                    redis::ErrorKind::InvalidClientConfig,
                    "no subscription source",
                ))),
            }
        };
        match tokio::time::timeout(self.connect_timeout, connecting).await {
            Ok(Ok(link)) => Some(Connection {
                link,
                subscribed: HashSet::new(),
            }),
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "pub/sub connect failed");
                None
            }
            Err(_) => {
                tracing::warn!("pub/sub connect timed out");
                None
            }
        }
    }

    /// Brings the server's subscriptions in line with the wanted channels. Returns false,
    /// and drops the connection, if a command failed.
    async fn reconcile(&self, connection: &mut Option<Connection>) -> bool {
        let Some(conn) = connection.as_mut() else {
            return false;
        };
        let wanted: HashSet<Arc<str>> = self.shared.channels.lock().keys().cloned().collect();
        let to_add: Vec<Arc<str>> = wanted.difference(&conn.subscribed).cloned().collect();
        let to_remove: Vec<Arc<str>> = conn.subscribed.difference(&wanted).cloned().collect();
        let mut ok = true;
        if !to_add.is_empty() {
            let names: Vec<&str> = to_add.iter().map(|c| &**c).collect();
            match tokio::time::timeout(self.command_timeout, conn.link.subscribe(&names)).await {
                Ok(Ok(())) => conn.subscribed.extend(to_add),
                Ok(Err(err)) if is_permission_error(&err) => {
                    tracing::warn!(
                        error = %err,
                        "SUBSCRIBE refused: the Redis user lacks the `+subscribe` command or \
                         `&<prefix>:*` channel permission in its ACL; waiters fall back to \
                         polling (1 ms to 128 ms back-off, bounded by the lock's TTL)"
                    );
                    self.shared.denied.store(true, Ordering::Release);
                    self.shared.denied_changed.notify_waiters();
                    *connection = None;
                    return false;
                }
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "SUBSCRIBE failed");
                    ok = false;
                }
                Err(_) => {
                    tracing::warn!("SUBSCRIBE timed out");
                    ok = false;
                }
            }
        }
        if ok && !to_remove.is_empty() {
            let names: Vec<&str> = to_remove.iter().map(|c| &**c).collect();
            match tokio::time::timeout(self.command_timeout, conn.link.unsubscribe(&names)).await {
                Ok(Ok(())) => {
                    for name in &to_remove {
                        conn.subscribed.remove(name);
                    }
                }
                Ok(Err(err)) => {
                    tracing::warn!(error = %err, "UNSUBSCRIBE failed");
                    ok = false;
                }
                Err(_) => {
                    tracing::warn!("UNSUBSCRIBE timed out");
                    ok = false;
                }
            }
        }
        if !ok {
            *connection = None;
            self.mark_unsubscribed();
            self.wake_everyone();
            return false;
        }
        for channel in self.shared.channels.lock().values() {
            if conn.subscribed.contains(&channel.name)
                && !channel.subscribed.swap(true, Ordering::AcqRel)
            {
                channel.subscribed_changed.notify_waiters();
            }
        }
        true
    }

    fn dispatch(&self, channel: &str) {
        let target = self.shared.channels.lock().get(channel).cloned();
        if let Some(target) = target {
            // A wake-up stored for the first in line (it is between attempts) is taken at
            // its next sleep.
            if target.first_in_line.load(Ordering::Acquire) > 0 {
                target.wake_first.notify_one();
            } else {
                target.wake.notify_one();
            }
        }
    }

    fn mark_unsubscribed(&self) {
        for channel in self.shared.channels.lock().values() {
            channel.subscribed.store(false, Ordering::Release);
        }
    }

    fn wake_everyone(&self) {
        for channel in self.shared.channels.lock().values() {
            channel.wake.notify_waiters();
            channel.wake_first.notify_waiters();
        }
    }
}

async fn classic(client: &redis::Client) -> redis::RedisResult<Link> {
    let (sink, stream) = client.get_async_pubsub().await?.split();
    Ok(Link::Classic { sink, stream })
}

/// Whether a subscription was refused by the ACL (NOPERM), which no reconnect can fix.
fn is_permission_error(err: &redis::RedisError) -> bool {
    err.code() == Some("NOPERM")
        || err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
        || err.to_string().contains("NOPERM")
}

/// `StreamExt::next` without pulling in `futures`: polls the stream once per wake-up.
async fn futures_next(stream: &mut PubSubStream) -> Option<redis::Msg> {
    std::future::poll_fn(|cx| {
        use futures_core::Stream;
        std::pin::Pin::new(&mut *stream).poll_next(cx)
    })
    .await
}
