//! Where the locks live: one server, a Redis Cluster, or a primary found through Sentinel.
//!
//! [`Target`] is what the builder was given; [`Conn`] is the command connection every
//! lock, the watchdog and the acquire path share, whatever the topology. The pub/sub hub
//! asks [`Target`] how to subscribe (classic `SUBSCRIBE` on one server or the current
//! Sentinel primary, sharded `SSUBSCRIBE` on a cluster).

mod conn;
mod sentinel;
mod settings;
mod slot;

pub(crate) use conn::{Conn, cluster_client};
pub(crate) use sentinel::SentinelConn;
pub(crate) use settings::Settings;
pub(crate) use slot::slot_of;

use crate::error::{Error, Result};
use crate::keys::redact_url;

/// The accepted URL forms, for error messages.
pub(crate) const ACCEPTED_URLS: &str = "redis://[user[:password]@]host[:port][/db], \
    rediss://... (TLS, feature `tls`), unix:///path/to/socket[?db=N], \
    redis-sentinel://[user[:password]@]host1[:port1][,host2[:port2]...][/db]#service-name, \
    and for a cluster LockClient::builder_cluster([seed URLs])";

/// What the client connects to.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// One server (or a proxy in front of one).
    Single(redis::Client),
    /// A Redis Cluster, reached through these seed nodes.
    Cluster(ClusterTarget),
    /// A primary discovered, and followed through failovers, by these sentinels.
    Sentinel(SentinelTarget),
}

/// Seed nodes of a cluster, and the TLS roots and client certificate to use with them.
/// Its `Debug` never prints the certificates (they hold the client's private key).
#[derive(Clone)]
pub(crate) struct ClusterTarget {
    pub(crate) seeds: Vec<redis::ConnectionInfo>,
    #[cfg(feature = "tls")]
    pub(crate) certs: Option<redis::TlsCertificates>,
}

impl std::fmt::Debug for ClusterTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = f.debug_struct("ClusterTarget");
        out.field("seeds", &self.seeds);
        #[cfg(feature = "tls")]
        out.field("certs", &self.certs.as_ref().map(|_| SECRET_SET));
        out.finish()
    }
}

/// `redis-sentinel://…#service`, taken apart. Its `Debug` never prints a password.
#[derive(Clone)]
pub(crate) struct SentinelTarget {
    pub(crate) sentinels: Vec<(String, u16)>,
    pub(crate) service: String,
    pub(crate) db: i64,
    /// Credentials for the primary (not for the sentinels, which usually have none).
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    /// Credentials for the sentinels themselves, when they require them.
    pub(crate) sentinel_auth: Option<(Option<String>, String)>,
    pub(crate) tls: bool,
    #[cfg(feature = "tls")]
    pub(crate) certs: Option<redis::TlsCertificates>,
}

impl std::fmt::Debug for SentinelTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Destructured so that a new field must be considered here.
        let SentinelTarget {
            sentinels,
            service,
            db,
            username,
            password,
            sentinel_auth,
            tls,
            #[cfg(feature = "tls")]
            certs,
        } = self;
        let mut out = f.debug_struct("SentinelTarget");
        out.field("sentinels", sentinels)
            .field("service", service)
            .field("db", db)
            .field("username", username)
            .field("password", &redacted(password.as_ref()))
            .field(
                "sentinel_auth",
                &sentinel_auth
                    .as_ref()
                    .map(|(username, _password)| (username, REDACTED)),
            )
            .field("tls", tls);
        #[cfg(feature = "tls")]
        out.field("certs", &certs.as_ref().map(|_| SECRET_SET));
        out.finish()
    }
}

/// What `Debug` shows for a password.
pub(crate) const REDACTED: &str = "<redacted>";

/// What `Debug` shows for TLS certificates that were given: they hold the client's
/// private key, and redis-rs before 1.2.3 has no `Debug` for them.
#[cfg(feature = "tls")]
pub(crate) const SECRET_SET: &str = "<set, redacted>";

/// What `Debug` shows for an optional password: whether there is one, never what it is.
fn redacted<T>(password: Option<T>) -> Option<&'static str> {
    password.map(|_| REDACTED)
}

impl Target {
    /// Parses one URL: a single server or `redis-sentinel://…`.
    pub(crate) fn parse(url: &str) -> Result<Target> {
        let lower = url.trim_start().to_ascii_lowercase();
        if lower.starts_with("redis-sentinel://") || lower.starts_with("rediss-sentinel://") {
            return parse_sentinel(url).map(Target::Sentinel);
        }
        redis::Client::open(url)
            .map(Target::Single)
            .map_err(|err| invalid_url(url, &err.to_string()))
    }

    /// A cluster from seed URLs (`redis://host:port`, `rediss://…`).
    pub(crate) fn cluster<S: AsRef<str>>(seeds: impl IntoIterator<Item = S>) -> Result<Target> {
        let mut infos = Vec::new();
        for seed in seeds {
            let seed = seed.as_ref();
            let info = redis::IntoConnectionInfo::into_connection_info(seed)
                .map_err(|err| invalid_url(seed, &err.to_string()))?;
            if info.redis_settings().db() != 0 {
                return Err(invalid_url(
                    seed,
                    "a cluster has only database 0; drop the /db part",
                ));
            }
            infos.push(info);
        }
        if infos.is_empty() {
            return Err(Error::InvalidUrl(
                "a cluster needs at least one seed URL".into(),
            ));
        }
        Ok(Target::Cluster(ClusterTarget {
            seeds: infos,
            #[cfg(feature = "tls")]
            certs: None,
        }))
    }

    /// Uses `certs` (a private CA's root, a client certificate) for every TLS connection
    /// of this target: the server, each cluster node, the sentinels and the primary.
    #[cfg(feature = "tls")]
    pub(crate) fn with_certificates(self, certs: redis::TlsCertificates) -> Result<Target> {
        Ok(match self {
            Target::Single(client) => Target::Single(
                redis::Client::build_with_tls(client.get_connection_info().clone(), certs)
                    .map_err(|err| Error::InvalidConfig(format!("TLS certificates: {err}")))?,
            ),
            Target::Cluster(cluster) => Target::Cluster(ClusterTarget {
                certs: Some(certs),
                ..cluster
            }),
            Target::Sentinel(sentinel) => Target::Sentinel(SentinelTarget {
                certs: Some(certs),
                ..sentinel
            }),
        })
    }

    /// Credentials for the sentinels (not the primary's, which come from the URL).
    pub(crate) fn with_sentinel_auth(
        self,
        username: Option<String>,
        password: String,
    ) -> Result<Target> {
        match self {
            Target::Sentinel(sentinel) => Ok(Target::Sentinel(SentinelTarget {
                sentinel_auth: Some((username, password)),
                ..sentinel
            })),
            _ => Err(Error::InvalidConfig(
                "sentinel_auth applies to a redis-sentinel:// URL only".into(),
            )),
        }
    }

    /// Whether locks publish and subscribe on sharded channels (`SPUBLISH`/`SSUBSCRIBE`).
    pub(crate) fn sharded(&self) -> bool {
        matches!(self, Target::Cluster(_))
    }

    /// The database the locks live in (part of the channel name).
    pub(crate) fn db(&self) -> i64 {
        match self {
            Target::Single(client) => client.get_connection_info().redis_settings().db(),
            Target::Cluster(_) => 0,
            Target::Sentinel(target) => target.db,
        }
    }

    /// A short description for error messages: never a password.
    /// One server's socket addresses, sorted (empty for a cluster, a Sentinel set, a
    /// Unix socket, or a name that does not resolve).
    pub(crate) async fn resolve(&self) -> Vec<std::net::SocketAddr> {
        let Target::Single(client) = self else {
            return Vec::new();
        };
        let (host, port) = match client.get_connection_info().addr() {
            redis::ConnectionAddr::Tcp(host, port) => (host.clone(), *port),
            redis::ConnectionAddr::TcpTls { host, port, .. } => (host.clone(), *port),
            _ => return Vec::new(),
        };
        let mut addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map(Iterator::collect)
            .unwrap_or_default();
        addrs.sort();
        addrs
    }

    /// Whether the connection speaks TLS (`rediss://`): a plain server then does not
    /// answer its handshake, and a connect timeout says so.
    pub(crate) fn uses_tls(&self) -> bool {
        let tls = |info: &redis::ConnectionInfo| {
            matches!(info.addr(), redis::ConnectionAddr::TcpTls { .. })
        };
        match self {
            Target::Single(client) => tls(client.get_connection_info()),
            Target::Cluster(cluster) => cluster.seeds.iter().any(tls),
            Target::Sentinel(target) => target.tls,
        }
    }

    pub(crate) fn describe(&self) -> String {
        match self {
            Target::Single(client) => client.get_connection_info().addr().to_string(),
            Target::Cluster(cluster) => format!(
                "cluster via {}",
                cluster
                    .seeds
                    .iter()
                    .map(|seed| seed.addr().to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Target::Sentinel(target) => format!(
                "sentinel service {:?} via {}",
                target.service,
                target
                    .sentinels
                    .iter()
                    .map(|(host, port)| format!("{host}:{port}"))
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        }
    }
}

fn invalid_url(url: &str, why: &str) -> Error {
    Error::InvalidUrl(format!(
        "{:?}: {why}; accepted forms: {ACCEPTED_URLS}",
        redact_url(url)
    ))
}

/// `redis-sentinel://[user[:password]@]h1[:p1][,h2[:p2]...][/db]#service` (Lettuce's
/// form). The default sentinel port is 26379.
fn parse_sentinel(url: &str) -> Result<SentinelTarget> {
    let bad = |why: &str| invalid_url(url, why);
    let trimmed = url.trim();
    let (scheme, rest) = trimmed
        .split_once("://")
        .ok_or_else(|| bad("missing ://"))?;
    let tls = scheme.eq_ignore_ascii_case("rediss-sentinel");
    let (rest, service) = rest
        .split_once('#')
        .ok_or_else(|| bad("missing #service-name (the name the sentinels monitor)"))?;
    let service = percent_decode(service);
    if service.is_empty() {
        return Err(bad("empty #service-name"));
    }
    let (userinfo, hosts_and_db) = match rest.rsplit_once('@') {
        Some((userinfo, after)) => (Some(userinfo), after),
        None => (None, rest),
    };
    let (hosts, db) = match hosts_and_db.split_once('/') {
        Some((hosts, "")) => (hosts, 0),
        Some((hosts, db)) => (
            hosts,
            db.parse::<i64>()
                .ok()
                .filter(|db| *db >= 0)
                .ok_or_else(|| bad("the database must be a number"))?,
        ),
        None => (hosts_and_db, 0),
    };
    let mut sentinels = Vec::new();
    for host in hosts.split(',') {
        if host.is_empty() {
            return Err(bad("empty sentinel address"));
        }
        let parse_port = |port: &str| {
            port.parse::<u16>()
                .ok()
                .filter(|port| *port > 0)
                .ok_or_else(|| bad("a sentinel port must be a number from 1 to 65535"))
        };
        let (name, port) = match host.strip_prefix('[') {
            // [v6-address] or [v6-address]:port
            Some(rest) => match rest.split_once(']') {
                Some((name, "")) => (name, 26379),
                Some((name, after)) => match after.strip_prefix(':') {
                    Some(port) => (name, parse_port(port)?),
                    None => return Err(bad("unexpected text after ] in a sentinel address")),
                },
                None => return Err(bad("unclosed [ in a sentinel address")),
            },
            None => match host.rsplit_once(':') {
                Some((name, port)) => (name, parse_port(port)?),
                None => (host, 26379),
            },
        };
        let name = name.trim_start_matches('[').trim_end_matches(']');
        if name.is_empty() {
            return Err(bad("empty sentinel host"));
        }
        sentinels.push((name.to_owned(), port));
    }
    let (username, password) = match userinfo {
        None => (None, None),
        Some(userinfo) => match userinfo.split_once(':') {
            Some((user, pass)) => (
                Some(percent_decode(user)).filter(|u| !u.is_empty()),
                Some(percent_decode(pass)),
            ),
            // `redis-sentinel://secret@…`: a password alone, as in Lettuce.
            None => (None, Some(percent_decode(userinfo))),
        },
    };
    Ok(SentinelTarget {
        sentinels,
        service,
        db,
        username,
        password,
        sentinel_auth: None,
        tls,
        #[cfg(feature = "tls")]
        certs: None,
    })
}

/// Decodes `%xx` escapes (passwords and names may carry reserved characters).
fn percent_decode(text: &str) -> String {
    fn hex(byte: u8) -> Option<u8> {
        (byte as char).to_digit(16).map(|digit| digit as u8)
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = match bytes[i] {
            b'%' => bytes
                .get(i + 1)
                .copied()
                .and_then(hex)
                .zip(bytes.get(i + 2).copied().and_then(hex)),
            _ => None,
        };
        if let Some((high, low)) = escaped {
            out.push(high << 4 | low);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sentinel(url: &str) -> SentinelTarget {
        match Target::parse(url) {
            Ok(Target::Sentinel(target)) => target,
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn sentinel_urls_in_lettuces_form() {
        let t = sentinel("redis-sentinel://h1:26380,h2,10.0.0.3:5000/2#mymaster");
        assert_eq!(
            t.sentinels,
            vec![
                ("h1".to_owned(), 26380),
                ("h2".to_owned(), 26379),
                ("10.0.0.3".to_owned(), 5000)
            ]
        );
        assert_eq!((t.service.as_str(), t.db, t.tls), ("mymaster", 2, false));
        assert_eq!((t.username, t.password), (None, None));

        let t = sentinel("redis-sentinel://app:p%40ss@h1#svc");
        assert_eq!(t.username.as_deref(), Some("app"));
        assert_eq!(t.password.as_deref(), Some("p@ss"));
        assert_eq!(t.db, 0);
        let t = sentinel("rediss-sentinel://secret@[::1]:26379/#svc");
        assert_eq!((t.password.as_deref(), t.tls), (Some("secret"), true));
        assert_eq!(t.sentinels, vec![("::1".to_owned(), 26379)]);
        let t = sentinel("redis-sentinel://[::1],[fe80::2]:5000#svc");
        assert_eq!(
            t.sentinels,
            vec![("::1".to_owned(), 26379), ("fe80::2".to_owned(), 5000)]
        );
    }

    #[test]
    fn bad_sentinel_urls_are_typed_errors_without_the_password() {
        for url in [
            "redis-sentinel://h1:26379",
            "redis-sentinel://h1:26379#",
            "redis-sentinel://h1:x#m",
            "redis-sentinel://h1,,h2#m",
            "redis-sentinel://h1/db#m",
            "redis-sentinel://u:hunter2@h1:0#m",
        ] {
            match Target::parse(url) {
                Err(Error::InvalidUrl(message)) => {
                    assert!(!message.contains("hunter2"), "{message}");
                    assert!(message.contains("redis-sentinel://"), "{message}");
                }
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    #[test]
    fn cluster_seeds_are_checked() {
        assert!(matches!(
            Target::cluster(["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"]),
            Ok(Target::Cluster(cluster)) if cluster.seeds.len() == 2
        ));
        assert!(matches!(
            Target::cluster(Vec::<String>::new()),
            Err(Error::InvalidUrl(_))
        ));
        assert!(matches!(
            Target::cluster(["redis://127.0.0.1:7000/3"]),
            Err(Error::InvalidUrl(_))
        ));
        assert!(matches!(
            Target::cluster(["nope"]),
            Err(Error::InvalidUrl(_))
        ));
    }
}
