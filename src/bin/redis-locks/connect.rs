//! Connecting to Redis with the global options.

use std::time::Duration;

use redis_locks::{DEFAULT_WATCHDOG_TIMEOUT, Error, LockClient, LockClientBuilder};

use crate::args::Global;
use crate::exit::Failure;

/// How often `run` renews or checks its lock (at most a third of the watchdog lease).
const CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// A lock client for `--url` and `--prefix`, with the given watchdog lease (`None`: the
/// library's default; it matters only to commands that take locks).
pub async fn client(global: &Global, watchdog: Option<Duration>) -> Result<LockClient, Failure> {
    if global.redlock {
        return Err(Failure::usage(
            "--redlock applies to `run` only: for status or unlock, give each server's \
             --url in turn (the RedLock's keys are those of the plain lock on each server)",
        ));
    }
    // clap uses the default only when no --url is given.
    let urls: Vec<&String> = global.url.iter().collect();
    let builder = if global.cluster {
        LockClient::builder_cluster(urls)
    } else if let [url] = urls.as_slice() {
        LockClient::builder(url)
    } else {
        return Err(Failure::usage(
            "several --url given: add --cluster if they are seed nodes of one Redis Cluster, \
             or --redlock if they are independent servers for a RedLock",
        ));
    };
    let client = configure(builder, global, watchdog).connect().await?;
    tracing::debug!(client = client.id(), prefix = client.prefix(), "connected");
    Ok(client)
}

/// One server of `--redlock`: the `--url` without its credentials (for messages), and
/// its client, or why it could not be connected.
pub struct RedServer {
    pub label: String,
    pub client: Result<LockClient, Error>,
}

/// A client for each `--url` of `--redlock`, connected all at once, in the order given.
pub async fn redlock_clients(global: &Global, watchdog: Option<Duration>) -> Vec<RedServer> {
    let mut connecting = tokio::task::JoinSet::new();
    for (i, url) in global.url.iter().enumerate() {
        let builder = configure(LockClient::builder(url), global, watchdog);
        connecting.spawn(async move { (i, builder.connect().await) });
    }
    let mut clients: Vec<Option<Result<LockClient, Error>>> =
        global.url.iter().map(|_| None).collect();
    while let Some(joined) = connecting.join_next().await {
        // A connect task cannot panic short of a bug; such a server counts as failed.
        if let Ok((i, client)) = joined {
            clients[i] = Some(client);
        }
    }
    global
        .url
        .iter()
        .zip(clients)
        .map(|(url, client)| RedServer {
            label: redact(url),
            client: client.unwrap_or_else(|| {
                Err(Error::UnexpectedReply(
                    "the connection attempt failed".into(),
                ))
            }),
        })
        .collect()
}

/// The options every client of this process gets.
fn configure(
    builder: LockClientBuilder,
    global: &Global,
    watchdog: Option<Duration>,
) -> LockClientBuilder {
    let timeout = watchdog.unwrap_or(DEFAULT_WATCHDOG_TIMEOUT);
    // One lock per process: checking it every second is cheap, and a command under a lost
    // lock (even one with a long --lease) is stopped within about a second.
    let check = CHECK_INTERVAL.min(timeout / 3);
    let builder = builder.spin_wait(global.spin);
    let builder = match &global.sentinel_password {
        Some(password) => builder.sentinel_auth(None, password),
        None => builder,
    };
    let builder = match global.min_replicas {
        Some(n) => builder.min_replicas(n, global.replica_timeout),
        None => builder,
    };
    builder
        .prefix(global.prefix.as_str())
        .watchdog_timeout(timeout)
        .check_interval(check)
}

/// A URL without its credentials: `redis://user:secret@host:6379/0` → `redis://host:6379/0`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn credentials_are_left_out_of_server_labels() {
        assert_eq!(
            redact("redis://user:s3cr@t@host:6379/0"),
            "redis://host:6379/0"
        );
        assert_eq!(redact("redis://:pw@h:1"), "redis://h:1");
        assert_eq!(redact("redis://h:1/2"), "redis://h:1/2");
        assert_eq!(redact("rediss://h:1/0#x@y"), "rediss://h:1/0#x@y");
        assert_eq!(redact("not a url"), "not a url");
    }
}
