//! The call driver's part of a client: how one call of the core is sent (on which
//! connection, bounded by the response timeout, with `WAIT` for replica acknowledgement),
//! how its failure is named, the clock the core's times are read on, and the ids the
//! client draws (owners, requests). `drive.rs` drives the core's machines on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::protocol::{Call, Failure, Reply};
use crate::scripts::{self, CallError, Scripts};
use crate::topology::Conn;

/// Replica acknowledgement settings (see
/// [`LockClientBuilder::min_replicas`](crate::LockClientBuilder::min_replicas)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplicaAck {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

/// See the module documentation.
#[derive(Debug)]
pub(crate) struct Calls {
    /// The command connection that every call but an acquire's shares.
    pub(crate) conn: Conn,
    /// With replica acknowledgement: the connection acquires (and their `WAIT`) go on.
    /// Redis blocks a connection for the whole of a `WAIT`, so it must not be the one the
    /// watchdog, releases and reads share; its response timeout covers the `WAIT`.
    ack_conn: Option<Conn>,
    /// Acquisitions wait for this many replicas to acknowledge them.
    pub(crate) replica_ack: Option<ReplicaAck>,
    scripts: Arc<Scripts>,
    pub(crate) response_timeout: Duration,
    /// The server, as errors name it.
    pub(crate) addr: String,
    pub(crate) clock: Clock,
    /// The client's id (a random UUID): the base of its default owners.
    pub(crate) id: Arc<str>,
    /// A short random tag naming this client in request and hold ids.
    pub(crate) tag: Arc<str>,
    request_counter: AtomicU64,
}

impl Calls {
    pub(crate) fn new(
        conn: Conn,
        ack_conn: Option<Conn>,
        replica_ack: Option<ReplicaAck>,
        scripts: Arc<Scripts>,
        response_timeout: Duration,
        addr: String,
        clock: Clock,
    ) -> Calls {
        let id = uuid::Uuid::new_v4();
        Calls {
            conn,
            ack_conn,
            replica_ack,
            scripts,
            response_timeout,
            addr,
            clock,
            id: id.to_string().into(),
            tag: format!("{:016x}", id.as_u64_pair().1).into(),
            request_counter: AtomicU64::new(0),
        }
    }

    /// A new owner id for one acquisition by a handle without an explicit owner (see
    /// `owner.rs`).
    pub(crate) fn next_owner(&self) -> Arc<str> {
        let n = self.request_counter.fetch_add(1, Ordering::Relaxed) + 1;
        crate::owner::fresh_owner(&self.id, n)
    }

    /// A request id unique across clients: `<tag>.<seq>` (see `lua/acquire.lua`).
    pub(crate) fn next_request_id(&self) -> Arc<str> {
        let n = self.request_counter.fetch_add(1, Ordering::Relaxed) + 1;
        crate::protocol::args::numbered(&[&self.tag, "."], n)
    }

    /// A random number for back-off jitter (the core draws none itself).
    pub(crate) fn jitter(&self) -> u64 {
        uuid::Uuid::new_v4().as_u64_pair().0
    }

    /// Sends one call of the protocol core, bounded by the response timeout (which also
    /// bounds waiting for a reconnect).
    pub(crate) async fn run(&self, call: &Call) -> std::result::Result<Reply, CallError> {
        self.run_on(&self.conn, call).await
    }

    /// [`Calls::run`] for a probe of what an acquire whose reply was lost did: on the
    /// connection acquires go on, so that the acquire, if it is still on its way, runs
    /// before the probe (one connection keeps its requests in order); on a separate
    /// acquire connection (replica acknowledgement), the probe could otherwise overtake it
    /// and report "nothing" for a hold that is taken a moment later.
    pub(crate) async fn run_probe(&self, call: &Call) -> std::result::Result<Reply, CallError> {
        self.run_on(self.ack_conn.as_ref().unwrap_or(&self.conn), call)
            .await
    }

    async fn run_on(&self, conn: &Conn, call: &Call) -> std::result::Result<Reply, CallError> {
        let mut conn = conn.clone();
        match tokio::time::timeout(
            self.response_timeout,
            scripts::run(&mut conn, &self.scripts, call),
        )
        .await
        {
            Ok(reply) => reply,
            Err(_) => Err(CallError {
                failure: Failure::TimedOut,
                error: self.timeout_error(),
            }),
        }
    }

    /// [`Calls::run`] for an acquire: with replica acknowledgement configured, the script
    /// is followed by `WAIT` in one pipeline, and the replicas that acknowledged come back
    /// too.
    pub(crate) async fn run_acquire(
        &self,
        call: &Call,
    ) -> std::result::Result<(Reply, Option<u32>), CallError> {
        let Some(ack) = self.replica_ack else {
            return self.run(call).await.map(|reply| (reply, None));
        };
        let mut conn = self.ack_conn.clone().unwrap_or_else(|| self.conn.clone());
        let ms = ack.timeout.as_millis() as u64;
        let sent = scripts::run_acknowledged(&mut conn, &self.scripts, call, ack.replicas, ms);
        // WAIT itself may take its whole timeout.
        match tokio::time::timeout(self.response_timeout + ack.timeout, sent).await {
            Ok(Ok((reply, acked))) => Ok((reply, Some(u32::try_from(acked.max(0)).unwrap_or(0)))),
            Ok(Err(err)) => Err(err),
            Err(_) => Err(CallError {
                failure: Failure::TimedOut,
                error: self.timeout_error(),
            }),
        }
    }

    /// [`Calls::run`] for calls whose failures are simply reported.
    pub(crate) async fn eval(&self, call: &Call) -> Result<Reply> {
        self.run(call)
            .await
            .map_err(|err| self.redis_error(err.error))
    }

    /// A failed command, naming this client's server.
    pub(crate) fn redis_error(&self, error: redis::RedisError) -> Error {
        Error::Redis(crate::error::CommandError {
            server: self.addr.clone(),
            error,
        })
    }

    pub(crate) fn timeout_error(&self) -> redis::RedisError {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply within {:?}", self.response_timeout),
        )
        .into()
    }
}
