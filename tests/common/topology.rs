//! Test harness for multi-node topologies: a six-node Redis Cluster (3 primaries, 3
//! replicas) and a Sentinel set (1 primary, 1 replica, 3 sentinels), all real
//! `redis-server` processes on loopback ports in temporary directories.
//!
//! Each topology is meant to be started once per test binary ([`shared_cluster`],
//! [`shared_sentinel`]); a test that kills or fails over nodes starts its own
//! ([`Cluster::start`], [`SentinelSet::start`]). Every method is synchronous (it may block
//! for a moment, so call it from a `#[tokio::test]` only where blocking is acceptable) and
//! takes `&self`, so a shared topology can serve concurrent tests.
//!
//! No process outlives the test binary. An owned topology kills its processes when it is
//! dropped; the shared ones are statics, never dropped, so every `redis-server` is also
//! (1) listed for a `libc::atexit` handler that SIGKILLs it when the test process exits
//! normally, and (2) watched by a small `sh` blocked reading a pipe whose write end only
//! the test process holds: however the test process dies (panic = abort, SIGKILL,
//! Ctrl-C), the kernel closes that end and the watcher SIGKILLs its server.
//!
//! Ports come from 10000..22000 with the cluster bus port (+10000) free too: both ranges
//! stay below Linux's ephemeral range (32768..), so an outgoing connection cannot take the
//! port of a killed node before [`Cluster::restart`] reuses it.
//!
//! Every wait has a deadline and panics with what it last saw plus the tail of every
//! node's log file.

use std::ffi::OsString;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, Once, OnceLock, PoisonError, TryLockError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{answers_ping, redis_server_binary};

/// Number of hash slots in a Redis Cluster.
pub const SLOTS: u16 = 16384;
/// The Sentinel service name of [`SentinelSet`].
pub const SERVICE: &str = "mymaster";
/// Lines of each node's log quoted when a wait times out.
const LOG_TAIL_LINES: usize = 25;
/// How long a (re)started process gets to answer PING.
const SPAWN_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a topology gets to form.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `redis-cli` may run.
const CLI_TIMEOUT: Duration = Duration::from_secs(30);
/// Connect / read / write timeout of the harness's own connections.
const CONN_TIMEOUT: Duration = Duration::from_secs(5);

// ---------------------------------------------------------------------------------------
// Shared topologies
// ---------------------------------------------------------------------------------------

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static SENTINEL: OnceLock<SentinelSet> = OnceLock::new();

/// The cluster shared by every test of this binary, started on first use. Do not kill
/// its nodes or fail it over: start your own [`Cluster`] for that.
pub fn shared_cluster() -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        let cluster = Cluster::start();
        remove_at_exit(cluster.root.path());
        cluster
    })
}

/// The Sentinel set shared by every test of this binary, started on first use. Do not
/// kill its nodes: start your own [`SentinelSet`] for that.
pub fn shared_sentinel() -> &'static SentinelSet {
    SENTINEL.get_or_init(|| {
        let set = SentinelSet::start();
        remove_at_exit(set.root.path());
        set
    })
}

/// What a wait for a failover saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failover {
    /// Port of the node that now serves as primary.
    pub new_primary: u16,
    /// Time from the call of the wait until the failover was complete.
    pub elapsed: Duration,
}

// ---------------------------------------------------------------------------------------
// Cluster
// ---------------------------------------------------------------------------------------

/// One contiguous slot range of a cluster as `CLUSTER SLOTS` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRange {
    pub start: u16,
    pub end: u16,
    pub primary: u16,
    /// Sorted. Failed replicas are not listed (Redis 7 leaves them out of CLUSTER SLOTS).
    pub replicas: Vec<u16>,
}

impl SlotRange {
    pub fn contains(&self, slot: u16) -> bool {
        (self.start..=self.end).contains(&slot)
    }
}

/// A six-node Redis Cluster: 3 primaries with one replica each, node timeout 1 s.
/// Processes are killed when it is dropped.
pub struct Cluster {
    nodes: Vec<Proc>,
    started_in: Duration,
    // Last: removed after the processes are gone.
    root: tempfile::TempDir,
}

impl Cluster {
    /// Starts six nodes, joins them with `redis-cli --cluster create --cluster-replicas 1`
    /// and waits until every node reports `cluster_state:ok`, all agree on a slot map of 3
    /// ranges with one replica each, and every replica's link to its primary is up.
    pub fn start() -> Cluster {
        let begun = Instant::now();
        let root = tempfile::Builder::new()
            .prefix("redis-cluster-")
            .tempdir()
            .expect("temp dir");
        let nodes: Vec<Proc> = (0..6)
            .map(|i| {
                let dir = root.path().join(format!("node{i}"));
                std::fs::create_dir_all(&dir).expect("node dir");
                Proc::start_on_free_port(true, |port| cluster_node_args(port, &dir))
            })
            .collect();
        let mut cluster = Cluster {
            nodes,
            started_in: Duration::ZERO,
            root,
        };

        let mut create = Command::new("redis-cli");
        create.args(["--cluster", "create"]);
        create.args(cluster.ports().iter().map(|p| format!("127.0.0.1:{p}")));
        create.args(["--cluster-replicas", "1", "--cluster-yes"]);
        let (ok, output) = run_with_timeout(&mut create, CLI_TIMEOUT);
        if !ok || !output.contains("All 16384 slots covered") {
            panic!(
                "redis-cli --cluster create failed:\n{output}\n{}",
                cluster.logs()
            );
        }

        cluster.wait_for(FORM_TIMEOUT, "the cluster to form", || {
            let map = cluster.check_stable()?;
            if map.len() != 3 || map.iter().any(|r| r.replicas.len() != 1) {
                return Err(format!("slot map is not 3 primaries x 1 replica: {map:?}"));
            }
            Ok(())
        });
        cluster.started_in = begun.elapsed();
        cluster
    }

    /// How long [`Cluster::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// Ports of all six nodes (alive or not), in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// `redis://` URLs of all six nodes, for a cluster client's seed list.
    pub fn seeds(&self) -> Vec<String> {
        self.ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}/"))
            .collect()
    }

    /// The slot map as seen by the first live node that answers.
    pub fn slot_map(&self) -> Vec<SlotRange> {
        let mut errors = Vec::new();
        for port in self.live_ports() {
            match slot_map_of(port) {
                Ok(map) => return map,
                Err(err) => errors.push(err),
            }
        }
        panic!(
            "no live node returned CLUSTER SLOTS: {errors:?}\n{}",
            self.logs()
        );
    }

    /// Current primaries (sorted ports), from [`Cluster::slot_map`].
    pub fn primaries(&self) -> Vec<u16> {
        let mut primaries: Vec<u16> = self.slot_map().iter().map(|r| r.primary).collect();
        primaries.sort_unstable();
        primaries.dedup();
        primaries
    }

    /// Current replicas of `primary` (sorted ports), from [`Cluster::slot_map`].
    pub fn replicas_of(&self, primary: u16) -> Vec<u16> {
        let mut replicas: Vec<u16> = self
            .slot_map()
            .into_iter()
            .filter(|r| r.primary == primary)
            .flat_map(|r| r.replicas)
            .collect();
        replicas.sort_unstable();
        replicas.dedup();
        replicas
    }

    /// Port of the primary serving `slot`, as the first live node that answers sees it.
    pub fn primary_for_slot(&self, slot: u16) -> u16 {
        match self.slot_map().iter().find(|r| r.contains(slot)) {
            Some(range) => range.primary,
            None => panic!("slot {slot} is not served\n{}", self.logs()),
        }
    }

    /// The hash slot of `key` (same as [`slot_of`]).
    pub fn slot_of(&self, key: &str) -> u16 {
        slot_of(key)
    }

    /// Port of the primary serving `key`'s slot.
    pub fn primary_for_key(&self, key: &str) -> u16 {
        self.primary_for_slot(slot_of(key))
    }

    /// SIGKILLs the node on `port` (no shutdown, like a crash).
    pub fn kill(&self, port: u16) {
        self.node(port).kill();
    }

    /// Starts the node on `port` again: same port, directory and `nodes.conf`, so it
    /// rejoins the cluster under its old id (a former primary whose slots were taken over
    /// becomes a replica). Returns once it answers PING; see [`Cluster::wait_until_stable`].
    pub fn restart(&self, port: u16) {
        self.node(port).restart();
    }

    /// Whether the node on `port` is running and answers PING.
    pub fn is_alive(&self, port: u16) -> bool {
        self.node(port).is_running() && answers_ping(port)
    }

    /// Waits until the live nodes other than `old_primary` all report `cluster_state:ok`
    /// and agree that the slot of `key` is served by a live primary other than
    /// `old_primary`. Call it right after the kill: `elapsed` counts from this call.
    pub fn wait_for_failover(&self, old_primary: u16, key: &str, timeout: Duration) -> Failover {
        let begun = Instant::now();
        let slot = slot_of(key);
        let what = format!("slot {slot} (key {key:?}) to fail over from {old_primary}");
        let new_primary = self.wait_for(timeout, &what, || {
            let mut agreed: Option<u16> = None;
            for port in self.live_ports().into_iter().filter(|&p| p != old_primary) {
                cluster_state_ok(port)?;
                let map = slot_map_of(port)?;
                let Some(range) = map.iter().find(|r| r.contains(slot)) else {
                    return Err(format!("{port}: slot {slot} unassigned"));
                };
                if range.primary == old_primary {
                    return Err(format!("{port}: slot {slot} still on {old_primary}"));
                }
                match agreed {
                    Some(p) if p != range.primary => {
                        return Err(format!("nodes disagree: {p} vs {} ({port})", range.primary));
                    }
                    _ => agreed = Some(range.primary),
                }
            }
            let new = agreed.ok_or("no live node")?;
            if !self.owns(new) || !self.is_alive(new) {
                return Err(format!("new primary {new} is not alive"));
            }
            role_is(new, "master")?;
            Ok(new)
        });
        Failover {
            new_primary,
            elapsed: begun.elapsed(),
        }
    }

    /// Graceful manual failover: `CLUSTER FAILOVER` on `replica`, then waits (up to 15 s)
    /// until it is a primary and the cluster is stable again (its old primary replicating
    /// from it). Returns the time it took.
    pub fn cluster_failover(&self, replica: u16) -> Duration {
        let begun = Instant::now();
        if let Err(err) = query::<String>(replica, redis::cmd("CLUSTER").arg("FAILOVER")) {
            panic!("CLUSTER FAILOVER on {replica}: {err}\n{}", self.logs());
        }
        let what = format!("{replica} to become primary by CLUSTER FAILOVER");
        self.wait_for(Duration::from_secs(15), &what, || {
            role_is(replica, "master")?;
            let map = self.check_stable()?;
            if !map.iter().any(|r| r.primary == replica) {
                return Err(format!("{replica} is not a primary in {map:?}"));
            }
            Ok(())
        });
        begun.elapsed()
    }

    /// Waits until every live node reports `cluster_state:ok`, all agree on the slot map,
    /// every slot is served by a live primary, every live node is in the map, and every
    /// live replica's link to its primary is up. Returns the slot map.
    pub fn wait_until_stable(&self, timeout: Duration) -> Vec<SlotRange> {
        self.wait_for(timeout, "the cluster to be stable", || self.check_stable())
    }

    /// Runs `redis-cli -p port args...` and returns its stdout (and stderr).
    pub fn redis_cli(&self, port: u16, args: &[&str]) -> String {
        redis_cli(port, args)
    }

    /// A plain (non-cluster) connection to the node on `port`, with 5 s connect, read
    /// and write timeouts.
    pub fn node_conn(&self, port: u16) -> redis::Connection {
        node_conn(port)
    }

    /// The last lines of every node's log file.
    pub fn logs(&self) -> String {
        logs_of(&self.nodes)
    }

    fn node(&self, port: u16) -> &Proc {
        match self.nodes.iter().find(|n| n.port == port) {
            Some(node) => node,
            None => panic!("{port} is not a node of this cluster ({:?})", self.ports()),
        }
    }

    fn owns(&self, port: u16) -> bool {
        self.nodes.iter().any(|n| n.port == port)
    }

    fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.is_running())
            .map(|n| n.port)
            .collect()
    }

    fn wait_for<T>(
        &self,
        timeout: Duration,
        what: &str,
        check: impl FnMut() -> Result<T, String>,
    ) -> T {
        wait_until(timeout, what, || self.logs(), check)
    }

    /// One look at the condition of [`Cluster::wait_until_stable`].
    fn check_stable(&self) -> Result<Vec<SlotRange>, String> {
        let live = self.live_ports();
        let mut first: Option<(u16, Vec<SlotRange>)> = None;
        for &port in &live {
            cluster_state_ok(port)?;
            let map = slot_map_of(port)?;
            match &first {
                Some((p, seen)) if *seen != map => {
                    return Err(format!(
                        "nodes disagree: {p} sees {seen:?}, {port} sees {map:?}"
                    ));
                }
                Some(_) => {}
                None => first = Some((port, map)),
            }
        }
        let (_, map) = first.ok_or("no live node")?;
        let mut next = 0u32;
        for range in &map {
            if u32::from(range.start) != next {
                return Err(format!("slots {next}..{} not served: {map:?}", range.start));
            }
            next = u32::from(range.end) + 1;
            if !live.contains(&range.primary) {
                return Err(format!("primary {} is not alive: {map:?}", range.primary));
            }
        }
        if next != u32::from(SLOTS) {
            return Err(format!("slots {next}.. not served: {map:?}"));
        }
        for &port in &live {
            let primary = map.iter().find(|r| r.primary == port);
            let replica = map.iter().find(|r| r.replicas.contains(&port));
            match (primary, replica) {
                (Some(_), _) => {}
                (None, Some(range)) => {
                    let replication = info(port, "replication")?;
                    let link = info_field(&replication, "master_link_status");
                    let master = info_field(&replication, "master_port");
                    if link != Some("up") || master != Some(&range.primary.to_string()) {
                        return Err(format!(
                            "replica {port}: master_port {master:?}, link {link:?} \
                             (primary should be {})",
                            range.primary
                        ));
                    }
                }
                (None, None) => return Err(format!("{port} is not in the slot map {map:?}")),
            }
        }
        Ok(map)
    }
}

fn cluster_node_args(port: u16, dir: &Path) -> (Vec<OsString>, PathBuf) {
    let log = dir.join("redis.log");
    let port = port.to_string();
    let s = OsString::from;
    let args = vec![
        s("--port"),
        s(port.as_str()),
        s("--bind"),
        s("127.0.0.1"),
        s("--cluster-enabled"),
        s("yes"),
        s("--cluster-config-file"),
        dir.join("nodes.conf").into_os_string(),
        s("--cluster-node-timeout"),
        s("1000"),
        // A replica may always be promoted, however long its link was down (default: 10
        // node timeouts), so a test that kills one node after another cannot get stuck.
        s("--cluster-replica-validity-factor"),
        s("0"),
        // Redis 7 delays a diskless full sync by 5 s by default (waiting for more replicas).
        s("--repl-diskless-sync-delay"),
        s("0"),
        // CLUSTER SLOTS leaves out a replica whose replication offset is still 0, which on
        // an idle primary lasts until its first replication PING (default: every 10 s).
        s("--repl-ping-replica-period"),
        s("1"),
        s("--save"),
        s(""),
        s("--appendonly"),
        s("no"),
        s("--dir"),
        dir.as_os_str().to_owned(),
        s("--logfile"),
        log.clone().into_os_string(),
        s("--daemonize"),
        s("no"),
    ];
    (args, log)
}

fn cluster_state_ok(port: u16) -> Result<(), String> {
    let info: String = query(port, redis::cmd("CLUSTER").arg("INFO"))?;
    match info_field(&info, "cluster_state") {
        Some("ok") => Ok(()),
        state => Err(format!("{port}: cluster_state {state:?}")),
    }
}

/// `CLUSTER SLOTS` of one node, sorted by start slot.
fn slot_map_of(port: u16) -> Result<Vec<SlotRange>, String> {
    let reply: redis::Value = query(port, redis::cmd("CLUSTER").arg("SLOTS"))?;
    let bad = |what: &str| format!("{port}: unexpected CLUSTER SLOTS reply ({what}): {reply:?}");
    let redis::Value::Array(entries) = &reply else {
        return Err(bad("not an array"));
    };
    let int = |v: &redis::Value| match v {
        redis::Value::Int(n) => u16::try_from(*n).ok(),
        _ => None,
    };
    let node_port = |v: &redis::Value| match v {
        redis::Value::Array(node) => node.get(1).and_then(int),
        _ => None,
    };
    let mut map = Vec::new();
    for entry in entries {
        let redis::Value::Array(items) = entry else {
            return Err(bad("entry not an array"));
        };
        let (Some(start), Some(end), Some(primary)) = (
            items.first().and_then(int),
            items.get(1).and_then(int),
            items.get(2).and_then(node_port),
        ) else {
            return Err(bad("entry"));
        };
        let mut replicas = items[3..]
            .iter()
            .map(node_port)
            .collect::<Option<Vec<u16>>>()
            .ok_or_else(|| bad("replica"))?;
        replicas.sort_unstable();
        map.push(SlotRange {
            start,
            end,
            primary,
            replicas,
        });
    }
    map.sort_by_key(|r| r.start);
    Ok(map)
}

/// The Redis Cluster hash slot of `key`: CRC16 (XMODEM) of the key, or of its hash tag
/// (the bytes between the first `{` and the first `}` after it, when not empty), mod 16384.
pub fn slot_of(key: &str) -> u16 {
    slot_of_bytes(key.as_bytes())
}

/// [`slot_of`] for a binary key.
pub fn slot_of_bytes(key: &[u8]) -> u16 {
    let mut hashed = key;
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        let rest = &key[open + 1..];
        if let Some(len) = rest.iter().position(|&b| b == b'}')
            && len > 0
        {
            hashed = &rest[..len];
        }
    }
    crc16_xmodem(hashed) % SLOTS
}

fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

// ---------------------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------------------

/// One primary, one replica and three sentinels (quorum 2, down-after 1 s, failover
/// timeout 5 s) monitoring them as [`SERVICE`]. Processes are killed when it is dropped.
///
/// The data nodes run from a config file in their directory, so the role Sentinel gives
/// a node (`REPLICAOF` + `CONFIG REWRITE`) survives its restart, as in a real deployment.
pub struct SentinelSet {
    /// `[initial primary, initial replica]`.
    data: Vec<Proc>,
    sentinels: Vec<Proc>,
    started_in: Duration,
    // Last: removed after the processes are gone.
    root: tempfile::TempDir,
}

impl SentinelSet {
    /// Starts the primary, the replica and the sentinels, and waits until the replica is
    /// in sync and every sentinel sees the primary, one replica and the other two sentinels.
    pub fn start() -> SentinelSet {
        let begun = Instant::now();
        let root = tempfile::Builder::new()
            .prefix("redis-sentinel-")
            .tempdir()
            .expect("temp dir");
        let data_dir = |i: usize| {
            let dir = root.path().join(format!("data{i}"));
            std::fs::create_dir_all(&dir).expect("node dir");
            dir
        };
        let primary_dir = data_dir(0);
        let primary =
            Proc::start_on_free_port(false, |port| data_node_config(port, &primary_dir, None));
        let replica_dir = data_dir(1);
        let replica = Proc::start_on_free_port(false, |port| {
            data_node_config(port, &replica_dir, Some(primary.port))
        });
        let sentinels = (0..3)
            .map(|i| {
                let dir = root.path().join(format!("sentinel{i}"));
                std::fs::create_dir_all(&dir).expect("sentinel dir");
                Proc::start_on_free_port(false, |port| sentinel_config(port, &dir, primary.port))
            })
            .collect();
        let mut set = SentinelSet {
            data: vec![primary, replica],
            sentinels,
            started_in: Duration::ZERO,
            root,
        };

        let (primary, replica) = (set.data[0].port, set.data[1].port);
        set.wait_for(FORM_TIMEOUT, "the sentinel set to form", || {
            let replication = info(replica, "replication")?;
            if info_field(&replication, "master_link_status") != Some("up") {
                return Err(format!("replica {replica} not in sync:\n{replication}"));
            }
            let expected = format!(
                "name={SERVICE},status=ok,address=127.0.0.1:{primary},slaves=1,sentinels=3"
            );
            for port in set.sentinel_ports() {
                let seen = info(port, "sentinel")?;
                if info_field(&seen, "master0") != Some(&expected) {
                    return Err(format!("sentinel {port}:\n{seen}"));
                }
            }
            Ok(())
        });
        set.started_in = begun.elapsed();
        set
    }

    /// How long [`SentinelSet::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// The monitored service's name, `"mymaster"`.
    pub fn service(&self) -> &str {
        SERVICE
    }

    /// Ports of the three sentinels.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// Ports of the data nodes: `[initial primary, initial replica]`.
    pub fn data_ports(&self) -> Vec<u16> {
        self.data.iter().map(|s| s.port).collect()
    }

    /// `redis-sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/0#mymaster`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinel_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("redis-sentinel://{}/0#{SERVICE}", hosts.join(","))
    }

    /// The primary's port according to the first live sentinel that answers
    /// `SENTINEL get-master-addr-by-name`.
    pub fn current_primary(&self) -> u16 {
        let mut errors = Vec::new();
        for port in self.live_sentinels() {
            match sentinel_primary(port) {
                Ok(primary) => return primary,
                Err(err) => errors.push(err),
            }
        }
        panic!("no sentinel named the primary: {errors:?}\n{}", self.logs());
    }

    /// SIGKILLs the data node or sentinel on `port` (no shutdown, like a crash).
    pub fn kill(&self, port: u16) {
        self.node(port).kill();
    }

    /// Starts the data node or sentinel on `port` again from its (possibly rewritten)
    /// config file. Returns once it answers PING. A former primary comes back as a
    /// primary, empty, until Sentinel converts it into a replica (see
    /// [`SentinelSet::wait_for_replica`]).
    pub fn restart(&self, port: u16) {
        self.node(port).restart();
    }

    /// Whether the process on `port` is running and answers PING.
    pub fn is_alive(&self, port: u16) -> bool {
        self.node(port).is_running() && answers_ping(port)
    }

    /// Waits until every live sentinel names the same primary other than `old_primary`
    /// and that node says `role:master`. Call it right after the kill: `elapsed` counts
    /// from this call.
    pub fn wait_for_failover(&self, old_primary: u16, timeout: Duration) -> Failover {
        let begun = Instant::now();
        let what = format!("sentinels to fail over from {old_primary}");
        let new_primary = self.wait_for(timeout, &what, || {
            let mut agreed: Option<u16> = None;
            for port in self.live_sentinels() {
                let primary = sentinel_primary(port)?;
                if primary == old_primary {
                    return Err(format!("sentinel {port} still names {old_primary}"));
                }
                match agreed {
                    Some(p) if p != primary => {
                        return Err(format!("sentinels disagree: {p} vs {primary} ({port})"));
                    }
                    _ => agreed = Some(primary),
                }
            }
            let new = agreed.ok_or("no live sentinel")?;
            role_is(new, "master")?;
            Ok(new)
        });
        Failover {
            new_primary,
            elapsed: begun.elapsed(),
        }
    }

    /// Waits until the data node on `port` is a replica of the primary the sentinels name,
    /// with its link up. Returns the time it took. After restarting a former primary,
    /// allow 30 s: Sentinel converts it only after it has reported `role:master` for 8 s
    /// (`SENTINEL_PUBLISH_PERIOD * 4`), checking every 10 s.
    pub fn wait_for_replica(&self, port: u16, timeout: Duration) -> Duration {
        let begun = Instant::now();
        self.wait_for(
            timeout,
            &format!("{port} to be an up-to-date replica"),
            || {
                let primary = self
                    .live_sentinels()
                    .into_iter()
                    .find_map(|s| sentinel_primary(s).ok())
                    .ok_or("no sentinel answers")?;
                let replication = info(port, "replication")?;
                let role = info_field(&replication, "role");
                let master = info_field(&replication, "master_port");
                let link = info_field(&replication, "master_link_status");
                if role != Some("slave")
                    || master != Some(&primary.to_string())
                    || link != Some("up")
                {
                    return Err(format!(
                        "{port}: role {role:?}, master_port {master:?}, link {link:?}; \
                     sentinels name {primary}"
                    ));
                }
                Ok(())
            },
        );
        begun.elapsed()
    }

    /// Runs `redis-cli -p port args...` and returns its stdout (and stderr).
    pub fn redis_cli(&self, port: u16, args: &[&str]) -> String {
        redis_cli(port, args)
    }

    /// A plain connection to the data node or sentinel on `port`, with 5 s connect, read
    /// and write timeouts.
    pub fn node_conn(&self, port: u16) -> redis::Connection {
        node_conn(port)
    }

    /// The last lines of every data node's and sentinel's log file.
    pub fn logs(&self) -> String {
        logs_of(self.data.iter().chain(&self.sentinels))
    }

    fn node(&self, port: u16) -> &Proc {
        match self
            .data
            .iter()
            .chain(&self.sentinels)
            .find(|n| n.port == port)
        {
            Some(node) => node,
            None => panic!(
                "{port} is not in this sentinel set (data {:?}, sentinels {:?})",
                self.data_ports(),
                self.sentinel_ports()
            ),
        }
    }

    fn live_sentinels(&self) -> Vec<u16> {
        self.sentinels
            .iter()
            .filter(|s| s.is_running())
            .map(|s| s.port)
            .collect()
    }

    fn wait_for<T>(
        &self,
        timeout: Duration,
        what: &str,
        check: impl FnMut() -> Result<T, String>,
    ) -> T {
        wait_until(timeout, what, || self.logs(), check)
    }
}

/// Writes `<dir>/redis.conf` for a data node; returns the arguments and the log path.
fn data_node_config(port: u16, dir: &Path, replica_of: Option<u16>) -> (Vec<OsString>, PathBuf) {
    let log = dir.join("redis.log");
    let mut conf = format!(
        "port {port}\nbind 127.0.0.1\nsave \"\"\nappendonly no\ndaemonize no\n\
         repl-diskless-sync-delay 0\ndir \"{}\"\nlogfile \"{}\"\n",
        dir.display(),
        log.display()
    );
    if let Some(primary) = replica_of {
        conf.push_str(&format!("replicaof 127.0.0.1 {primary}\n"));
    }
    let path = dir.join("redis.conf");
    std::fs::write(&path, conf).expect("write redis.conf");
    (vec![path.into()], log)
}

/// Writes `<dir>/sentinel.conf` (Sentinel rewrites it, so one per sentinel).
fn sentinel_config(port: u16, dir: &Path, primary: u16) -> (Vec<OsString>, PathBuf) {
    let log = dir.join("sentinel.log");
    let conf = format!(
        "port {port}\nbind 127.0.0.1\ndaemonize no\ndir \"{}\"\nlogfile \"{}\"\n\
         sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
         sentinel down-after-milliseconds {SERVICE} 1000\n\
         sentinel failover-timeout {SERVICE} 5000\n\
         sentinel parallel-syncs {SERVICE} 1\n",
        dir.display(),
        log.display()
    );
    let path = dir.join("sentinel.conf");
    std::fs::write(&path, conf).expect("write sentinel.conf");
    let args = vec![
        path.into(),
        "--sentinel".into(),
        "--port".into(),
        port.to_string().into(),
    ];
    (args, log)
}

fn sentinel_primary(sentinel: u16) -> Result<u16, String> {
    let addr: Option<(String, String)> = query(
        sentinel,
        redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(SERVICE),
    )?;
    let (_, port) = addr.ok_or_else(|| format!("sentinel {sentinel} does not know {SERVICE}"))?;
    port.parse()
        .map_err(|_| format!("sentinel {sentinel}: bad port {port:?}"))
}

// ---------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------

/// One `redis-server` (data node or sentinel) that can be killed and started again with
/// the same arguments.
struct Proc {
    port: u16,
    args: Vec<OsString>,
    log: PathBuf,
    running: Mutex<Option<Running>>,
}

/// A live server and the watcher that kills it if the test process dies.
struct Running {
    server: Child,
    watcher: Child,
    /// The write end of the watcher's stdin: closed (by the kernel, at the latest) when
    /// the test process exits, which wakes the watcher.
    _lifeline: ChildStdin,
}

impl Drop for Running {
    fn drop(&mut self) {
        // The watcher first, so it cannot signal a recycled pid later.
        let _ = self.watcher.kill();
        let _ = self.watcher.wait();
        let _ = self.server.kill();
        let _ = self.server.wait();
        let pid = self.server.id();
        lock(&SERVER_PIDS).retain(|&p| p != pid);
    }
}

impl Proc {
    /// Picks a free port, builds the arguments with `make(port)` (which returns them and
    /// the log file path) and starts the server; retries on another port if it fails.
    fn start_on_free_port(
        with_bus_port: bool,
        mut make: impl FnMut(u16) -> (Vec<OsString>, PathBuf),
    ) -> Proc {
        let mut errors = Vec::new();
        for _ in 0..5 {
            let port = pick_port(with_bus_port);
            let (args, log) = make(port);
            let proc = Proc {
                port,
                args,
                log,
                running: Mutex::new(None),
            };
            match proc.spawn() {
                Ok(()) => return proc,
                Err(err) => errors.push(err),
            }
        }
        panic!("could not start redis-server: {errors:#?}");
    }

    fn spawn(&self) -> Result<(), String> {
        let mut slot = lock(&self.running);
        if slot.is_some() {
            return Err(format!("{} is already running", self.port));
        }
        install_at_exit();
        let server = Command::new(redis_server_binary())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawn redis-server: {e}"))?;
        let pid = server.id();
        lock(&SERVER_PIDS).push(pid);
        let watcher = Command::new("sh")
            .arg("-c")
            .arg(format!("read line; kill -9 {pid} 2>/dev/null"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let mut watcher = match watcher {
            Ok(watcher) => watcher,
            Err(err) => {
                let mut server = server;
                let _ = server.kill();
                let _ = server.wait();
                lock(&SERVER_PIDS).retain(|&p| p != pid);
                return Err(format!("spawn watcher: {err}"));
            }
        };
        let lifeline = watcher.stdin.take().expect("piped stdin");
        let mut running = Running {
            server,
            watcher,
            _lifeline: lifeline,
        };
        let deadline = Instant::now() + SPAWN_TIMEOUT;
        loop {
            if let Ok(Some(status)) = running.server.try_wait() {
                return Err(format!(
                    "redis-server on {} exited with {status}:\n{}",
                    self.port,
                    tail(&self.log)
                ));
            }
            if answers_ping(self.port) {
                // Someone else's server may answer on a port ours failed to bind.
                let server = info(self.port, "server").unwrap_or_default();
                if info_field(&server, "process_id") == Some(&pid.to_string()) {
                    *slot = Some(running);
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "redis-server on {} did not answer within {SPAWN_TIMEOUT:?}:\n{}",
                    self.port,
                    tail(&self.log)
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill(&self) {
        drop(lock(&self.running).take());
    }

    fn restart(&self) {
        self.kill();
        let deadline = Instant::now() + SPAWN_TIMEOUT;
        loop {
            match self.spawn() {
                Ok(()) => return,
                Err(err) if Instant::now() > deadline => {
                    panic!("restart of {} failed: {err}", self.port)
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    fn is_running(&self) -> bool {
        lock(&self.running)
            .as_mut()
            .is_some_and(|r| matches!(r.server.try_wait(), Ok(None)))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Servers to SIGKILL at exit (statics are never dropped).
static SERVER_PIDS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
/// Temporary directories of the shared topologies, removed at exit.
static DIRS_TO_REMOVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn remove_at_exit(dir: &Path) {
    lock(&DIRS_TO_REMOVE).push(dir.to_owned());
}

fn install_at_exit() {
    AT_EXIT.call_once(|| {
        // SAFETY: registers a function without captured state that never unwinds.
        let rc = unsafe { libc::atexit(kill_servers_at_exit) };
        assert_eq!(rc, 0, "atexit failed");
    });
}

extern "C" fn kill_servers_at_exit() {
    // Never block (a test thread may still hold the lock) nor panic in an exit handler.
    let pids = match SERVER_PIDS.try_lock() {
        Ok(pids) => pids,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(TryLockError::WouldBlock) => return,
    };
    let pids: Vec<libc::pid_t> = pids
        .iter()
        .filter_map(|&pid| libc::pid_t::try_from(pid).ok())
        .collect();
    for &pid in &pids {
        // SAFETY: kill(2) has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // Reap them (for up to 1 s each), so no `<defunct>` entry is left for init to collect.
    for &pid in &pids {
        for _ in 0..100 {
            let mut status = 0;
            // SAFETY: waitpid(2) on our own child, writing into a local.
            let reaped = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if reaped != 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    if let Ok(dirs) = DIRS_TO_REMOVE.try_lock() {
        for dir in dirs.iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A port in 10000..22000 that is free on 127.0.0.1 (and, with `with_bus_port`, so is
/// port + 10000). Ports are handed out round-robin from a per-process random start, so
/// concurrent test binaries rarely collide, and one process never reuses a port soon.
fn pick_port(with_bus_port: bool) -> u16 {
    const LOW: u32 = 10_000;
    const SPAN: u32 = 12_000;
    static START: OnceLock<u32> = OnceLock::new();
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = *START.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        (std::process::id().wrapping_mul(7919) ^ nanos) % SPAN
    });
    let free =
        |port: u32| u16::try_from(port).is_ok_and(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
    for _ in 0..SPAN {
        let port = LOW + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN;
        if free(port) && (!with_bus_port || free(port + 10_000)) {
            return port as u16;
        }
    }
    panic!("no free port in {LOW}..{}", LOW + SPAN);
}

// ---------------------------------------------------------------------------------------
// Queries, waits, logs
// ---------------------------------------------------------------------------------------

/// A plain connection to `127.0.0.1:port` with 5 s connect, read and write timeouts.
pub fn node_conn(port: u16) -> redis::Connection {
    try_conn(port).unwrap_or_else(|err| panic!("connect to {port}: {err}"))
}

fn try_conn(port: u16) -> Result<redis::Connection, String> {
    let open = || -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
        let conn = client.get_connection_with_timeout(CONN_TIMEOUT)?;
        conn.set_read_timeout(Some(CONN_TIMEOUT))?;
        conn.set_write_timeout(Some(CONN_TIMEOUT))?;
        Ok(conn)
    };
    open().map_err(|err| format!("{port}: {err}"))
}

/// Runs `cmd` on a fresh connection to `port`.
fn query<T: redis::FromRedisValue>(port: u16, cmd: &redis::Cmd) -> Result<T, String> {
    let mut conn = try_conn(port)?;
    cmd.query(&mut conn).map_err(|err| format!("{port}: {err}"))
}

/// `INFO section` of the server on `port`.
fn info(port: u16, section: &str) -> Result<String, String> {
    query(port, redis::cmd("INFO").arg(section))
}

/// The value of `name:value` in an INFO-style reply.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .filter_map(|line| line.trim_end().split_once(':'))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Checks `role:<role>` in `INFO replication` of `port`.
fn role_is(port: u16, role: &str) -> Result<(), String> {
    let replication = info(port, "replication")?;
    match info_field(&replication, "role") {
        Some(r) if r == role => Ok(()),
        other => Err(format!("{port}: role {other:?}, waiting for {role}")),
    }
}

/// Runs `redis-cli -h 127.0.0.1 -p port args...` (killed after 30 s) and returns its
/// stdout followed by its stderr.
pub fn redis_cli(port: u16, args: &[&str]) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args);
    run_with_timeout(&mut cmd, CLI_TIMEOUT).1
}

/// Runs `cmd`, killing it after `timeout`; returns whether it exited successfully and its
/// stdout followed by its stderr.
fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> (bool, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("spawn {cmd:?}: {err}"));
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut output = stdout.join().unwrap_or_default();
    output.push_str(&stderr.join().unwrap_or_default());
    if status.is_none() {
        output.push_str(&format!("\n(killed after {timeout:?})"));
    }
    (status.is_some_and(|s| s.success()), output)
}

/// Polls `check` every 50 ms until it returns `Ok`, or panics after `timeout` with its
/// last `Err` and `logs()`.
fn wait_until<T>(
    timeout: Duration,
    what: &str,
    logs: impl Fn() -> String,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match check() {
            Ok(value) => return value,
            Err(state) if Instant::now() >= deadline => {
                panic!(
                    "timed out after {timeout:?} waiting for {what}; last seen: {state}\n{}",
                    logs()
                )
            }
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_else(|err| format!("(no log: {err})\n"));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}

fn logs_of<'a>(procs: impl IntoIterator<Item = &'a Proc>) -> String {
    procs
        .into_iter()
        .map(|p| {
            format!(
                "--- {} ({}) ---\n{}\n",
                p.port,
                p.log.display(),
                tail(&p.log)
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// Secured topologies: ACL users and TLS
// ---------------------------------------------------------------------------------------

/// The files of a TLS setup. Nodes then listen on TLS only (`port 0`, `tls-port P`), trust
/// this CA, present this certificate, do not ask clients for one (`tls-auth-clients no`),
/// and replicate, gossip (cluster bus) and monitor (sentinels) over TLS too.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// How a secured topology ([`SecureCluster`], [`SecureSentinelSet`]) is set up.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// An admin user (`~* &* +@all`) that the harness, `redis-cli`, the replicas
    /// (`masteruser`/`masterauth`) and the sentinels (`sentinel auth-user`/`auth-pass`)
    /// authenticate as. The `default` user is then off.
    pub admin: Option<(String, String)>,
    /// Extra `redis.conf` lines for every data node, e.g. `user locks on >pw ~app:* +get`.
    pub data_conf: Vec<String>,
    /// TLS for every connection (clients, replication, cluster bus, sentinels).
    pub tls: Option<TlsFiles>,
}

impl Security {
    /// How the harness reaches the data nodes.
    fn data_access(&self) -> Access {
        Access {
            auth: self.admin.clone(),
            ca: self.tls.as_ref().map(|tls| tls.ca.clone()),
        }
    }

    /// How the harness reaches the sentinels (no credentials: they have none).
    fn sentinel_access(&self) -> Access {
        Access {
            auth: None,
            ca: self.tls.as_ref().map(|tls| tls.ca.clone()),
        }
    }

    /// `port`, and the TLS settings when TLS is on.
    fn listen_conf(&self, port: u16) -> String {
        match &self.tls {
            None => format!("port {port}\n"),
            Some(tls) => format!(
                "port 0\ntls-port {port}\ntls-cert-file \"{}\"\ntls-key-file \"{}\"\n\
                 tls-ca-cert-file \"{}\"\ntls-auth-clients no\ntls-replication yes\n",
                tls.cert.display(),
                tls.key.display(),
                tls.ca.display()
            ),
        }
    }

    /// The users and replication credentials of a data node.
    fn data_users_conf(&self) -> String {
        let mut conf = String::new();
        if let Some((user, pass)) = &self.admin {
            conf.push_str(&format!(
                "user default off\nuser {user} on >{pass} ~* &* +@all\n\
                 masteruser {user}\nmasterauth {pass}\n"
            ));
        }
        for line in &self.data_conf {
            conf.push_str(line);
            conf.push('\n');
        }
        conf
    }
}

/// Credentials and TLS roots for the harness's own connections to secured nodes.
#[derive(Debug, Clone, Default)]
struct Access {
    auth: Option<(String, String)>,
    /// The CA file: connect over TLS.
    ca: Option<PathBuf>,
}

impl Access {
    fn url(&self, port: u16) -> String {
        let scheme = if self.ca.is_some() { "rediss" } else { "redis" };
        let userinfo = match &self.auth {
            Some((user, pass)) => format!("{user}:{pass}@"),
            None => String::new(),
        };
        format!("{scheme}://{userinfo}127.0.0.1:{port}/")
    }

    fn client(&self, port: u16) -> redis::RedisResult<redis::Client> {
        let url = self.url(port);
        match &self.ca {
            None => redis::Client::open(url),
            #[cfg(feature = "tls")]
            Some(ca) => {
                let root = std::fs::read(ca).map_err(redis::RedisError::from)?;
                redis::Client::build_with_tls(
                    url,
                    redis::TlsCertificates {
                        client_tls: None,
                        root_cert: Some(root),
                    },
                )
            }
            #[cfg(not(feature = "tls"))]
            Some(_) => panic!("a TLS topology needs the `tls` feature"),
        }
    }

    fn conn(&self, port: u16) -> Result<redis::Connection, String> {
        let open = || -> redis::RedisResult<redis::Connection> {
            let conn = self
                .client(port)?
                .get_connection_with_timeout(CONN_TIMEOUT)?;
            conn.set_read_timeout(Some(CONN_TIMEOUT))?;
            conn.set_write_timeout(Some(CONN_TIMEOUT))?;
            Ok(conn)
        };
        open().map_err(|err| format!("{port}: {err}"))
    }

    fn query<T: redis::FromRedisValue>(&self, port: u16, cmd: &redis::Cmd) -> Result<T, String> {
        let mut conn = self.conn(port)?;
        cmd.query(&mut conn).map_err(|err| format!("{port}: {err}"))
    }

    fn info(&self, port: u16, section: &str) -> Result<String, String> {
        self.query(port, redis::cmd("INFO").arg(section))
    }

    /// `redis-cli` options for these credentials and roots.
    fn cli_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some((user, pass)) = &self.auth {
            args.extend(["--user".into(), user.clone(), "--pass".into(), pass.clone()]);
            args.push("--no-auth-warning".into());
        }
        if let Some(ca) = &self.ca {
            args.extend(["--tls".into(), "--cacert".into(), ca.display().to_string()]);
        }
        args
    }

    /// `ACL LOG` of the node on `port`, one line per entry (`reason`, `context`,
    /// `object`, `username`).
    fn acl_log(&self, port: u16) -> Result<Vec<String>, String> {
        let entries: Vec<redis::Value> = self.query(port, redis::cmd("ACL").arg("LOG"))?;
        Ok(entries.iter().map(describe_acl_entry).collect())
    }
}

fn describe_acl_entry(entry: &redis::Value) -> String {
    let text = |value: &redis::Value| match value {
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        redis::Value::SimpleString(text) => text.clone(),
        other => format!("{other:?}"),
    };
    let pairs: Vec<(String, String)> = match entry {
        redis::Value::Array(items) => items
            .chunks(2)
            .filter_map(|pair| match pair {
                [key, value] => Some((text(key), text(value))),
                _ => None,
            })
            .collect(),
        redis::Value::Map(items) => items.iter().map(|(k, v)| (text(k), text(v))).collect(),
        other => return format!("{other:?}"),
    };
    pairs
        .iter()
        .filter(|(key, _)| matches!(key.as_str(), "reason" | "context" | "object" | "username"))
        .map(|(key, value)| format!("{key}={value}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A `redis-server` of a secured topology, killed when dropped.
struct SecureNode {
    port: u16,
    log: PathBuf,
    _running: Running,
}

impl SecureNode {
    /// Picks a free port, builds the arguments with `make(port)` and starts the server;
    /// it is ready once `access` reaches it and it reports its own process id.
    fn start(
        with_bus_port: bool,
        access: &Access,
        mut make: impl FnMut(u16) -> (Vec<OsString>, PathBuf),
    ) -> SecureNode {
        let mut errors = Vec::new();
        for _ in 0..5 {
            let port = pick_port(with_bus_port);
            let (args, log) = make(port);
            match spawn_watched(&args).and_then(|running| wait_ready(running, port, &log, access)) {
                Ok(running) => {
                    return SecureNode {
                        port,
                        log,
                        _running: running,
                    };
                }
                Err(err) => errors.push(err),
            }
        }
        panic!("could not start redis-server: {errors:#?}");
    }

    fn as_proc_log(&self) -> String {
        format!(
            "--- {} ({}) ---\n{}\n",
            self.port,
            self.log.display(),
            tail(&self.log)
        )
    }
}

/// Starts `redis-server args...` with a watcher that kills it if the test process dies
/// (as [`Proc`] does).
fn spawn_watched(args: &[OsString]) -> Result<Running, String> {
    install_at_exit();
    let server = Command::new(redis_server_binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn redis-server: {e}"))?;
    let pid = server.id();
    lock(&SERVER_PIDS).push(pid);
    let watcher = Command::new("sh")
        .arg("-c")
        .arg(format!("read line; kill -9 {pid} 2>/dev/null"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let mut watcher = match watcher {
        Ok(watcher) => watcher,
        Err(err) => {
            let mut server = server;
            let _ = server.kill();
            let _ = server.wait();
            lock(&SERVER_PIDS).retain(|&p| p != pid);
            return Err(format!("spawn watcher: {err}"));
        }
    };
    let lifeline = watcher.stdin.take().expect("piped stdin");
    Ok(Running {
        server,
        watcher,
        _lifeline: lifeline,
    })
}

/// Waits until the server of `running` answers `access` on `port` with its own process
/// id (someone else's server may answer on a port ours failed to bind).
fn wait_ready(
    mut running: Running,
    port: u16,
    log: &Path,
    access: &Access,
) -> Result<Running, String> {
    let pid = running.server.id().to_string();
    let deadline = Instant::now() + SPAWN_TIMEOUT;
    loop {
        if let Ok(Some(status)) = running.server.try_wait() {
            return Err(format!(
                "redis-server on {port} exited with {status}:\n{}",
                tail(log)
            ));
        }
        let last = match access.info(port, "server") {
            Ok(server) if info_field(&server, "process_id") == Some(pid.as_str()) => {
                return Ok(running);
            }
            Ok(_) => "another process answers".to_owned(),
            Err(err) => err,
        };
        if Instant::now() > deadline {
            return Err(format!(
                "redis-server on {port} did not answer within {SPAWN_TIMEOUT:?} ({last}):\n{}",
                tail(log)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Parses a `CLUSTER SLOTS` reply of the node on `port`, sorted by start slot.
fn parse_slot_map(port: u16, reply: &redis::Value) -> Result<Vec<SlotRange>, String> {
    let bad = |what: &str| format!("{port}: unexpected CLUSTER SLOTS reply ({what}): {reply:?}");
    let redis::Value::Array(entries) = reply else {
        return Err(bad("not an array"));
    };
    let int = |v: &redis::Value| match v {
        redis::Value::Int(n) => u16::try_from(*n).ok(),
        _ => None,
    };
    let node_port = |v: &redis::Value| match v {
        redis::Value::Array(node) => node.get(1).and_then(int),
        _ => None,
    };
    let mut map = Vec::new();
    for entry in entries {
        let redis::Value::Array(items) = entry else {
            return Err(bad("entry not an array"));
        };
        let (Some(start), Some(end), Some(primary)) = (
            items.first().and_then(int),
            items.get(1).and_then(int),
            items.get(2).and_then(node_port),
        ) else {
            return Err(bad("entry"));
        };
        let mut replicas = items[3..]
            .iter()
            .map(node_port)
            .collect::<Option<Vec<u16>>>()
            .ok_or_else(|| bad("replica"))?;
        replicas.sort_unstable();
        map.push(SlotRange {
            start,
            end,
            primary,
            replicas,
        });
    }
    map.sort_by_key(|r| r.start);
    Ok(map)
}

/// A six-node Redis Cluster (3 primaries, 3 replicas, node timeout 1 s) with ACL users
/// and/or TLS as [`Security`] says. Processes are killed when it is dropped. No node can
/// be killed or restarted: it serves tests of who may connect and how.
pub struct SecureCluster {
    nodes: Vec<SecureNode>,
    access: Access,
    tls: bool,
    started_in: Duration,
    // Last: removed after the processes are gone.
    root: tempfile::TempDir,
}

impl SecureCluster {
    /// Starts six nodes, joins them with `redis-cli --cluster create --cluster-replicas 1`
    /// (as the admin, over TLS when set), and waits until every node reports
    /// `cluster_state:ok`, all agree on a map of 3 ranges with one replica each, and every
    /// replica's link is up.
    pub fn start(security: &Security) -> SecureCluster {
        let begun = Instant::now();
        let root = tempfile::Builder::new()
            .prefix("redis-secure-cluster-")
            .tempdir()
            .expect("temp dir");
        let access = security.data_access();
        let nodes: Vec<SecureNode> = (0..6)
            .map(|i| {
                let dir = root.path().join(format!("node{i}"));
                std::fs::create_dir_all(&dir).expect("node dir");
                SecureNode::start(true, &access, |port| {
                    secure_cluster_node_config(port, &dir, security)
                })
            })
            .collect();
        let mut cluster = SecureCluster {
            nodes,
            access,
            tls: security.tls.is_some(),
            started_in: Duration::ZERO,
            root,
        };

        let mut create = Command::new("redis-cli");
        create.args(cluster.access.cli_args());
        create.args(["--cluster", "create"]);
        create.args(cluster.ports().iter().map(|p| format!("127.0.0.1:{p}")));
        create.args(["--cluster-replicas", "1", "--cluster-yes"]);
        let (ok, output) = run_with_timeout(&mut create, CLI_TIMEOUT);
        if !ok || !output.contains("All 16384 slots covered") {
            panic!(
                "redis-cli --cluster create failed:\n{output}\n{}",
                cluster.logs()
            );
        }
        wait_until(
            FORM_TIMEOUT,
            "the secured cluster to form",
            || cluster.logs(),
            || cluster.check_formed(),
        );
        cluster.started_in = begun.elapsed();
        cluster
    }

    /// How long [`SecureCluster::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// Ports of the six nodes (the TLS ports with TLS: there is no other).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// Seed URLs of all six nodes: `redis://` or `rediss://`, then `userinfo` as given
    /// (e.g. `"user:pass@"`, or `""`).
    pub fn seeds(&self, userinfo: &str) -> Vec<String> {
        let scheme = if self.tls { "rediss" } else { "redis" };
        self.ports()
            .iter()
            .map(|p| format!("{scheme}://{userinfo}127.0.0.1:{p}"))
            .collect()
    }

    /// The slot map as the first node sees it.
    pub fn slot_map(&self) -> Vec<SlotRange> {
        let port = self.nodes[0].port;
        match self
            .access
            .query::<redis::Value>(port, redis::cmd("CLUSTER").arg("SLOTS"))
            .and_then(|reply| parse_slot_map(port, &reply))
        {
            Ok(map) => map,
            Err(err) => panic!("CLUSTER SLOTS: {err}\n{}", self.logs()),
        }
    }

    /// Runs `cmd` as the admin on the node on `port`.
    pub fn query<T: redis::FromRedisValue>(
        &self,
        port: u16,
        cmd: &redis::Cmd,
    ) -> Result<T, String> {
        self.access.query(port, cmd)
    }

    /// `ACL LOG` of every node, as `(port, entry)` pairs (see [`SecureCluster::start`]).
    pub fn acl_log(&self) -> Vec<(u16, String)> {
        self.ports()
            .into_iter()
            .flat_map(|port| match self.access.acl_log(port) {
                Ok(entries) => entries.into_iter().map(|e| (port, e)).collect::<Vec<_>>(),
                Err(err) => vec![(port, format!("ACL LOG failed: {err}"))],
            })
            .collect()
    }

    /// `ACL LOG RESET` on every node.
    pub fn reset_acl_log(&self) {
        for port in self.ports() {
            if let Err(err) = self
                .access
                .query::<()>(port, redis::cmd("ACL").arg("LOG").arg("RESET"))
            {
                panic!("ACL LOG RESET: {err}");
            }
        }
    }

    /// The last lines of every node's log file.
    pub fn logs(&self) -> String {
        self.nodes.iter().map(SecureNode::as_proc_log).collect()
    }

    fn check_formed(&self) -> Result<Vec<SlotRange>, String> {
        let mut first: Option<(u16, Vec<SlotRange>)> = None;
        for port in self.ports() {
            let info: String = self.access.query(port, redis::cmd("CLUSTER").arg("INFO"))?;
            if info_field(&info, "cluster_state") != Some("ok") {
                return Err(format!(
                    "{port}: cluster_state {:?}",
                    info_field(&info, "cluster_state")
                ));
            }
            let reply: redis::Value = self
                .access
                .query(port, redis::cmd("CLUSTER").arg("SLOTS"))?;
            let map = parse_slot_map(port, &reply)?;
            match &first {
                Some((p, seen)) if *seen != map => {
                    return Err(format!(
                        "nodes disagree: {p} sees {seen:?}, {port} sees {map:?}"
                    ));
                }
                Some(_) => {}
                None => first = Some((port, map)),
            }
        }
        let (_, map) = first.ok_or("no node")?;
        if map.len() != 3 || map.iter().any(|r| r.replicas.len() != 1) {
            return Err(format!("slot map is not 3 primaries x 1 replica: {map:?}"));
        }
        for range in &map {
            for &replica in &range.replicas {
                let replication = self.access.info(replica, "replication")?;
                let link = info_field(&replication, "master_link_status");
                if link != Some("up") {
                    return Err(format!("replica {replica}: link {link:?}"));
                }
            }
        }
        Ok(map)
    }
}

/// Writes `<dir>/redis.conf` for a node of a [`SecureCluster`] (the settings of
/// [`Cluster`]'s nodes, plus `security`); returns the arguments and the log path.
fn secure_cluster_node_config(
    port: u16,
    dir: &Path,
    security: &Security,
) -> (Vec<OsString>, PathBuf) {
    let log = dir.join("redis.log");
    let mut conf = security.listen_conf(port);
    if security.tls.is_some() {
        conf.push_str("tls-cluster yes\n");
    }
    conf.push_str(&format!(
        "bind 127.0.0.1\ncluster-enabled yes\ncluster-config-file \"{}\"\n\
         cluster-node-timeout 1000\ncluster-replica-validity-factor 0\n\
         repl-diskless-sync-delay 0\nrepl-ping-replica-period 1\n\
         save \"\"\nappendonly no\ndaemonize no\ndir \"{}\"\nlogfile \"{}\"\n",
        dir.join("nodes.conf").display(),
        dir.display(),
        log.display()
    ));
    conf.push_str(&security.data_users_conf());
    let path = dir.join("redis.conf");
    std::fs::write(&path, conf).expect("write redis.conf");
    (vec![path.into()], log)
}

/// One primary, one replica and three sentinels (quorum 2) monitoring them as
/// [`SERVICE`], with ACL users and/or TLS as [`Security`] says: the data nodes get the
/// users; the sentinels have no credentials of their own but use the admin's for the
/// data nodes (`sentinel auth-user`/`auth-pass`), and with TLS listen on TLS only and
/// reach the data nodes and each other over TLS (`tls-replication yes`). Processes are
/// killed when it is dropped.
pub struct SecureSentinelSet {
    /// `[primary, replica]`.
    data: Vec<SecureNode>,
    sentinels: Vec<SecureNode>,
    access: Access,
    sentinel_access: Access,
    tls: bool,
    started_in: Duration,
    // Last: removed after the processes are gone.
    root: tempfile::TempDir,
}

impl SecureSentinelSet {
    /// Starts the primary, the replica and the sentinels, and waits until the replica is
    /// in sync and every sentinel sees the primary, one replica and the other two.
    pub fn start(security: &Security) -> SecureSentinelSet {
        let begun = Instant::now();
        let root = tempfile::Builder::new()
            .prefix("redis-secure-sentinel-")
            .tempdir()
            .expect("temp dir");
        let access = security.data_access();
        let sentinel_access = security.sentinel_access();
        let dir_of = |name: String| {
            let dir = root.path().join(name);
            std::fs::create_dir_all(&dir).expect("node dir");
            dir
        };
        let primary_dir = dir_of("data0".into());
        let primary = SecureNode::start(false, &access, |port| {
            secure_data_node_config(port, &primary_dir, None, security)
        });
        let replica_dir = dir_of("data1".into());
        let replica = SecureNode::start(false, &access, |port| {
            secure_data_node_config(port, &replica_dir, Some(primary.port), security)
        });
        let sentinels = (0..3)
            .map(|i| {
                let dir = dir_of(format!("sentinel{i}"));
                SecureNode::start(false, &sentinel_access, |port| {
                    secure_sentinel_config(port, &dir, primary.port, security)
                })
            })
            .collect();
        let mut set = SecureSentinelSet {
            data: vec![primary, replica],
            sentinels,
            access,
            sentinel_access,
            tls: security.tls.is_some(),
            started_in: Duration::ZERO,
            root,
        };
        let (primary, replica) = (set.data[0].port, set.data[1].port);
        wait_until(
            FORM_TIMEOUT,
            "the secured sentinel set to form",
            || set.logs(),
            || {
                let replication = set.access.info(replica, "replication")?;
                if info_field(&replication, "master_link_status") != Some("up") {
                    return Err(format!("replica {replica} not in sync:\n{replication}"));
                }
                let expected = format!(
                    "name={SERVICE},status=ok,address=127.0.0.1:{primary},slaves=1,sentinels=3"
                );
                for port in set.sentinel_ports() {
                    let seen = set.sentinel_access.info(port, "sentinel")?;
                    if info_field(&seen, "master0") != Some(&expected) {
                        return Err(format!("sentinel {port}:\n{seen}"));
                    }
                }
                Ok(())
            },
        );
        set.started_in = begun.elapsed();
        set
    }

    /// How long [`SecureSentinelSet::start`] took.
    pub fn startup_time(&self) -> Duration {
        self.started_in
    }

    /// Ports of the three sentinels.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// Ports of the data nodes: `[primary, replica]`.
    pub fn data_ports(&self) -> Vec<u16> {
        self.data.iter().map(|s| s.port).collect()
    }

    /// `redis-sentinel://<userinfo>127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/0#mymaster`
    /// (`rediss-sentinel://` with TLS); `userinfo` as given (`"user:pass@"` or `""`).
    pub fn url(&self, userinfo: &str) -> String {
        let scheme = if self.tls {
            "rediss-sentinel"
        } else {
            "redis-sentinel"
        };
        let hosts: Vec<String> = self
            .sentinel_ports()
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("{scheme}://{userinfo}{}/0#{SERVICE}", hosts.join(","))
    }

    /// Runs `cmd` as the admin on the data node on `port`.
    pub fn query<T: redis::FromRedisValue>(
        &self,
        port: u16,
        cmd: &redis::Cmd,
    ) -> Result<T, String> {
        self.access.query(port, cmd)
    }

    /// Runs `cmd` on the sentinel on `port`.
    pub fn sentinel_query<T: redis::FromRedisValue>(
        &self,
        port: u16,
        cmd: &redis::Cmd,
    ) -> Result<T, String> {
        self.sentinel_access.query(port, cmd)
    }

    /// `ACL LOG` of both data nodes, as `(port, entry)` pairs.
    pub fn acl_log(&self) -> Vec<(u16, String)> {
        self.data_ports()
            .into_iter()
            .flat_map(|port| match self.access.acl_log(port) {
                Ok(entries) => entries.into_iter().map(|e| (port, e)).collect::<Vec<_>>(),
                Err(err) => vec![(port, format!("ACL LOG failed: {err}"))],
            })
            .collect()
    }

    /// The last lines of every data node's and sentinel's log file.
    pub fn logs(&self) -> String {
        self.data
            .iter()
            .chain(&self.sentinels)
            .map(SecureNode::as_proc_log)
            .collect()
    }
}

/// Writes `<dir>/redis.conf` for a data node of a [`SecureSentinelSet`].
fn secure_data_node_config(
    port: u16,
    dir: &Path,
    replica_of: Option<u16>,
    security: &Security,
) -> (Vec<OsString>, PathBuf) {
    let log = dir.join("redis.log");
    let mut conf = security.listen_conf(port);
    conf.push_str(&format!(
        "bind 127.0.0.1\nsave \"\"\nappendonly no\ndaemonize no\n\
         repl-diskless-sync-delay 0\ndir \"{}\"\nlogfile \"{}\"\n",
        dir.display(),
        log.display()
    ));
    conf.push_str(&security.data_users_conf());
    if let Some(primary) = replica_of {
        conf.push_str(&format!("replicaof 127.0.0.1 {primary}\n"));
    }
    let path = dir.join("redis.conf");
    std::fs::write(&path, conf).expect("write redis.conf");
    (vec![path.into()], log)
}

/// Writes `<dir>/sentinel.conf` for a sentinel of a [`SecureSentinelSet`].
fn secure_sentinel_config(
    port: u16,
    dir: &Path,
    primary: u16,
    security: &Security,
) -> (Vec<OsString>, PathBuf) {
    let log = dir.join("sentinel.log");
    let mut conf = security.listen_conf(port);
    conf.push_str(&format!(
        "bind 127.0.0.1\ndaemonize no\ndir \"{}\"\nlogfile \"{}\"\n\
         sentinel monitor {SERVICE} 127.0.0.1 {primary} 2\n\
         sentinel down-after-milliseconds {SERVICE} 1000\n\
         sentinel failover-timeout {SERVICE} 5000\n\
         sentinel parallel-syncs {SERVICE} 1\n",
        dir.display(),
        log.display()
    ));
    if let Some((user, pass)) = &security.admin {
        conf.push_str(&format!(
            "sentinel auth-user {SERVICE} {user}\nsentinel auth-pass {SERVICE} {pass}\n"
        ));
    }
    let path = dir.join("sentinel.conf");
    std::fs::write(&path, conf).expect("write sentinel.conf");
    (vec![path.into(), "--sentinel".into()], log)
}
