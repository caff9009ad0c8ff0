//! A small TCP fault proxy, in the test process: listens on a free loopback port and
//! forwards every connection to one upstream (a redis-server). It can
//!
//! * drop every connection (FIN), or reset it (RST, zero linger);
//! * drop only the pub/sub connections (those that sent `SUBSCRIBE`);
//! * stall: hold every byte in both directions, connections stay open (a partition);
//! * add latency to every forwarded chunk;
//! * cut one connection right after forwarding a request that contains a byte pattern
//!   (the request reaches Redis, its reply never reaches the client), or right before
//!   forwarding it (the request never reaches Redis).
//!
//! Bytes are never dropped from a connection that stays open: TCP does not do that, and
//! a client would mismatch replies. Faults are whole-connection faults.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CutWhen {
    BeforeForwarding,
    AfterForwarding,
}

struct Conn {
    cancel: CancellationToken,
    reset: Arc<AtomicBool>,
    pubsub: Arc<AtomicBool>,
}

struct State {
    upstream: SocketAddr,
    conns: Mutex<Vec<Conn>>,
    stall: watch::Sender<bool>,
    delay_ms: AtomicU64,
    cut: Mutex<Option<(Vec<u8>, CutWhen)>>,
    cuts: AtomicU64,
    accepted: AtomicUsize,
    to_server: AtomicU64,
    to_client: AtomicU64,
}

/// The proxy. Dropping it stops accepting and closes every connection.
pub struct FaultProxy {
    pub port: u16,
    state: Arc<State>,
    shutdown: CancellationToken,
}

impl FaultProxy {
    pub async fn start(upstream_port: u16) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (stall, _) = watch::channel(false);
        let state = Arc::new(State {
            upstream: SocketAddr::from(([127, 0, 0, 1], upstream_port)),
            conns: Mutex::new(Vec::new()),
            stall,
            delay_ms: AtomicU64::new(0),
            cut: Mutex::new(None),
            cuts: AtomicU64::new(0),
            accepted: AtomicUsize::new(0),
            to_server: AtomicU64::new(0),
            to_client: AtomicU64::new(0),
        });
        let shutdown = CancellationToken::new();
        tokio::spawn(accept_loop(listener, state.clone(), shutdown.clone()));
        FaultProxy {
            port,
            state,
            shutdown,
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Closes every open connection (FIN). New connections are accepted as usual.
    pub fn drop_all(&self) -> usize {
        self.close_where(|_| true, false)
    }

    /// Resets every open connection (RST).
    pub fn reset_all(&self) -> usize {
        self.close_where(|_| true, true)
    }

    /// Closes only the connections that have sent `SUBSCRIBE` (the pub/sub ones).
    pub fn drop_pubsub(&self) -> usize {
        self.close_where(|c| c.pubsub.load(Ordering::SeqCst), false)
    }

    /// Resets only the pub/sub connections (RST).
    pub fn reset_pubsub(&self) -> usize {
        self.close_where(|c| c.pubsub.load(Ordering::SeqCst), true)
    }

    fn close_where(&self, pick: impl Fn(&Conn) -> bool, reset: bool) -> usize {
        let mut conns = self.state.conns.lock();
        let mut closed = 0;
        conns.retain(|conn| {
            if conn.cancel.is_cancelled() {
                return false;
            }
            if pick(conn) {
                conn.reset.store(reset, Ordering::SeqCst);
                conn.cancel.cancel();
                closed += 1;
                false
            } else {
                true
            }
        });
        closed
    }

    /// Holds every byte (both directions, all connections, new ones too) until unstalled.
    pub fn stall(&self, on: bool) {
        self.state.stall.send_replace(on);
    }

    /// Latency added before forwarding each chunk, in each direction.
    pub fn set_delay(&self, delay: Duration) {
        self.state
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// The next client request containing `pattern` is forwarded, then its connection is
    /// closed before any reply gets back (one shot).
    pub fn cut_after_request_containing(&self, pattern: &[u8]) {
        *self.state.cut.lock() = Some((pattern.to_vec(), CutWhen::AfterForwarding));
    }

    /// The next client request containing `pattern` is not forwarded; its connection is
    /// closed instead (one shot).
    pub fn cut_before_request_containing(&self, pattern: &[u8]) {
        *self.state.cut.lock() = Some((pattern.to_vec(), CutWhen::BeforeForwarding));
    }

    /// How many one-shot cuts have happened.
    pub fn cuts(&self) -> u64 {
        self.state.cuts.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.state.accepted.load(Ordering::SeqCst)
    }

    /// Bytes forwarded (client to server, server to client).
    pub fn forwarded(&self) -> (u64, u64) {
        (
            self.state.to_server.load(Ordering::SeqCst),
            self.state.to_client.load(Ordering::SeqCst),
        )
    }

    /// Open pub/sub connections.
    pub fn pubsub_connections(&self) -> usize {
        self.state
            .conns
            .lock()
            .iter()
            .filter(|c| !c.cancel.is_cancelled() && c.pubsub.load(Ordering::SeqCst))
            .count()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.drop_all();
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, shutdown: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        state.accepted.fetch_add(1, Ordering::SeqCst);
        let conn = Conn {
            cancel: shutdown.child_token(),
            reset: Arc::new(AtomicBool::new(false)),
            pubsub: Arc::new(AtomicBool::new(false)),
        };
        let (cancel, reset, pubsub) =
            (conn.cancel.clone(), conn.reset.clone(), conn.pubsub.clone());
        state.conns.lock().push(conn);
        let state = state.clone();
        tokio::spawn(async move {
            let Ok(server) = TcpStream::connect(state.upstream).await else {
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            pump(client, server, &state, &cancel, &pubsub, &reset).await;
            cancel.cancel();
        });
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

async fn wait_unstalled(state: &State, cancel: &CancellationToken) -> bool {
    let mut rx = state.stall.subscribe();
    tokio::select! {
        _ = cancel.cancelled() => false,
        ok = rx.wait_for(|stalled| !stalled) => ok.is_ok(),
    }
}

async fn delay(state: &State) {
    let ms = state.delay_ms.load(Ordering::SeqCst);
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

async fn pump(
    mut client: TcpStream,
    mut server: TcpStream,
    state: &State,
    cancel: &CancellationToken,
    pubsub: &AtomicBool,
    reset: &AtomicBool,
) {
    let mut from_client = vec![0u8; 64 * 1024];
    let mut from_server = vec![0u8; 64 * 1024];
    loop {
        tokio::select! {
            _ = cancel.cancelled() => break,
            read = client.read(&mut from_client) => {
                let n = match read { Ok(0) | Err(_) => break, Ok(n) => n };
                let chunk = &from_client[..n];
                if contains(chunk, b"SUBSCRIBE") || contains(chunk, b"subscribe") {
                    pubsub.store(true, Ordering::SeqCst);
                }
                if !wait_unstalled(state, cancel).await {
                    break;
                }
                delay(state).await;
                let cut = {
                    let mut slot = state.cut.lock();
                    match slot.as_ref() {
                        Some((pattern, when)) if contains(chunk, pattern) => {
                            let when = *when;
                            *slot = None;
                            Some(when)
                        }
                        _ => None,
                    }
                };
                match cut {
                    Some(CutWhen::BeforeForwarding) => {
                        state.cuts.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    Some(CutWhen::AfterForwarding) => {
                        let _ = server.write_all(chunk).await;
                        // Let Redis read and run it, but forward nothing back.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        state.cuts.fetch_add(1, Ordering::SeqCst);
                        break;
                    }
                    None => {
                        if server.write_all(chunk).await.is_err() {
                            break;
                        }
                        state.to_server.fetch_add(n as u64, Ordering::SeqCst);
                    }
                }
            }
            read = server.read(&mut from_server) => {
                let n = match read { Ok(0) | Err(_) => break, Ok(n) => n };
                if !wait_unstalled(state, cancel).await {
                    break;
                }
                delay(state).await;
                if client.write_all(&from_server[..n]).await.is_err() {
                    break;
                }
                state.to_client.fetch_add(n as u64, Ordering::SeqCst);
            }
        }
    }
    if reset.load(Ordering::SeqCst) {
        // Zero linger: dropping the sockets sends RST instead of FIN.
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
}

// ---- helpers the proxied tests share ------------------------------------------------------

/// A client whose every connection (commands and pub/sub) goes through `proxy`.
#[allow(dead_code)]
pub async fn proxied_client(
    proxy: &FaultProxy,
    watchdog: Duration,
    response: Duration,
) -> redis_locks::LockClient {
    redis_locks::LockClient::builder(&proxy.url())
        .watchdog_timeout(watchdog)
        .response_timeout(response)
        .connect_timeout(Duration::from_secs(1))
        .connect()
        .await
        .unwrap()
}

/// The SHA1 that `EVALSHA` requests of a script carry: the pattern to cut on.
#[allow(dead_code)]
pub fn script_sha(source: &str) -> Vec<u8> {
    redis::Script::new(source).get_hash().as_bytes().to_vec()
}

/// What every bare `SET <key> <value> NX PX <lease>` request carries on the wire (RESP):
/// the pattern to cut on for an acquire that takes a free lock without a script, i.e. an
/// uncontended, unfenced acquire of the reentrant lock (see `lua/take.lua`; a contended
/// or fenced acquire, and a re-entry, are an `EVALSHA` of `lua/acquire.lua`).
#[allow(dead_code)]
pub fn take_pattern() -> Vec<u8> {
    b"\r\n$2\r\nNX\r\n$2\r\nPX\r\n".to_vec()
}

/// Runs acquire, re-entry, release (of a hash, then of a first hold's string) and inspect
/// once (as `owner`, or a fresh owner), so that Redis has the scripts cached: otherwise
/// the first `EVALSHA` of a script is answered `NOSCRIPT` and a fault injected on it tests
/// the script loading, not the operation.
#[allow(dead_code)]
pub async fn warm_up(client: &redis_locks::LockClient, owner: Option<&str>) {
    let mut lock = client.lock("warm-up").unwrap();
    if let Some(owner) = owner {
        lock = lock.with_owner(owner).unwrap();
    }
    let outer = lock.acquire().await.unwrap();
    let inner = outer.reenter().await.unwrap();
    inner.release().await.unwrap();
    outer.release().await.unwrap();
    // release_first.lua: a first hold this client never re-entered.
    lock.acquire().await.unwrap().release().await.unwrap();
    lock.state().await.unwrap();
}
