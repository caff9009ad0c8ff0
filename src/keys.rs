//! Key layout and input validation.
//!
//! Every key and channel that one lock touches embeds the lock name in a hash tag
//! (`{name}`), so they all share one Redis Cluster slot and a script may touch them together.
//!
//! | what | key or channel |
//! |------|----------------|
//! | lock hash (field = owner id, value = hold count) | `<prefix>:{<name>}` |
//! | wake-up channel | `<prefix>:{<name>}:db<n>:released` |
//! | fencing counter (only once fencing was used) | `<prefix>:{<name>}:fence` |
//!
//! The database number is part of the channel because Redis pub/sub ignores `SELECT`: two
//! applications on different databases would otherwise wake each other's waiters.

use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};

/// Longest accepted lock name, in bytes. Longer names are rejected with
/// [`Error::InvalidName`] instead of silently producing huge keys.
///
/// ```
/// let long = "x".repeat(redis_locks::MAX_NAME_LEN + 1);
/// assert!(redis_locks::validate_name(&long).is_err());
/// assert!(redis_locks::validate_name(&long[..redis_locks::MAX_NAME_LEN]).is_ok());
/// ```
pub const MAX_NAME_LEN: usize = 512;

/// Longest accepted explicit owner id, in bytes.
///
/// ```no_run
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// let owner = "o".repeat(redis_locks::MAX_OWNER_LEN + 1);
/// assert!(client.lock("invoice:42")?.with_owner(owner).is_err());
/// # Ok(()) }
/// ```
pub const MAX_OWNER_LEN: usize = 256;

/// The largest lease Redis accepts for `PEXPIRE` without overflow once it is added to the
/// current time. Redis rejects `PEXPIRE` values whose absolute expiry would overflow a
/// signed 64-bit millisecond count; we stay far below that with a hundred years.
///
/// ```no_run
/// # use std::time::Duration;
/// # async fn demo(client: redis_locks::LockClient) -> redis_locks::Result<()> {
/// use redis_locks::MAX_DURATION;
/// let lock = client.lock("archive")?;
/// assert!(lock.with_lease(MAX_DURATION).is_ok());
/// assert!(lock.with_lease(MAX_DURATION + Duration::from_secs(1)).is_err());
/// # Ok(()) }
/// ```
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// Resolved names for one lock: its name, and the keys and channel of the protocol core.
#[derive(Debug, Clone)]
pub(crate) struct LockKeys {
    pub(crate) name: Arc<str>,
    /// The lock hash, fencing counter and release channel, as the protocol core takes them.
    pub(crate) protocol: crate::protocol::LockKeys,
}

impl std::ops::Deref for LockKeys {
    type Target = crate::protocol::LockKeys;

    fn deref(&self) -> &Self::Target {
        &self.protocol
    }
}

impl LockKeys {
    pub(crate) fn new(prefix: &str, db: i64, sharded: bool, name: &str) -> Result<Self> {
        validate_name(name)?;
        let hash: Arc<str> = format!("{prefix}:{{{name}}}").into();
        Ok(LockKeys {
            name: name.into(),
            protocol: crate::protocol::LockKeys {
                channel: format!("{hash}:db{db}:released").into(),
                fence: format!("{hash}:fence").into(),
                hash,
                sharded,
            },
        })
    }
}

fn shorten(s: &str) -> String {
    if s.len() <= 64 {
        return s.to_owned();
    }
    let mut end = 64;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... ({} bytes)", &s[..end], s.len())
}

/// Checks a lock name: non-empty, at most [`MAX_NAME_LEN`] bytes, no `{` or `}` (they
/// would change the hash tag and split one lock's keys across cluster slots), and no
/// control characters (they make keys unreadable in logs and `redis-cli`).
///
/// [`LockClient::lock`](crate::LockClient::lock) applies it; call it directly to check
/// a name before connecting.
///
/// ```
/// assert!(redis_locks::validate_name("orders:42").is_ok());
/// assert!(redis_locks::validate_name("").is_err());
/// assert!(redis_locks::validate_name("a{b}").is_err());
/// ```
pub fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "the name is empty"
    } else if name.len() > MAX_NAME_LEN {
        "the name is longer than 512 bytes"
    } else if name.contains(['{', '}']) {
        "the name contains '{' or '}', which would break the key's hash tag"
    } else if name.chars().any(char::is_control) {
        "the name contains control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: shorten(name),
        reason,
    })
}

/// Checks an explicit owner id: non-empty, at most [`MAX_OWNER_LEN`] bytes, no control
/// characters.
pub(crate) fn validate_owner(owner: &str) -> Result<()> {
    let reason = if owner.is_empty() {
        "the owner id is empty"
    } else if owner.len() > MAX_OWNER_LEN {
        "the owner id is longer than 256 bytes"
    } else if owner.chars().any(char::is_control) {
        "the owner id contains control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidName {
        name: shorten(owner),
        reason,
    })
}

/// Checks a key prefix: non-empty, no braces (they would steal the hash tag), no control
/// characters, at most 128 bytes.
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    if prefix.is_empty()
        || prefix.len() > 128
        || prefix.contains(['{', '}'])
        || prefix.chars().any(char::is_control)
    {
        return Err(Error::InvalidConfig(format!(
            "key prefix {:?} must be 1 to 128 bytes without braces or control characters",
            shorten(prefix)
        )));
    }
    Ok(())
}

/// `url` with its password replaced by `***`, for error messages.
pub(crate) fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &url[..scheme_end + 3],
            &rest[..colon],
            &rest[at..]
        ),
        // A lone user info part is a password in redis://password@host form.
        None => format!("{}***{}", &url[..scheme_end + 3], &rest[at..]),
    }
}

/// Checks a duration that is sent to Redis as milliseconds: at least 1 ms, at most
/// [`MAX_DURATION`].
pub(crate) fn validate_ms(what: &'static str, value: Duration) -> Result<u64> {
    if value < Duration::from_millis(1) {
        return Err(Error::InvalidDuration {
            what,
            value,
            reason: "must be at least 1 ms",
        });
    }
    if value > MAX_DURATION {
        return Err(Error::InvalidDuration {
            what,
            value,
            reason: "must be at most 100 years",
        });
    }
    // Redis counts in whole milliseconds: a fraction rounds up (1.9 ms is 2 ms, never 1),
    // so a lease is never shorter than asked. MAX_DURATION in ms fits in u64.
    let whole = value.as_millis() as u64;
    Ok(whole + u64::from(value.subsec_nanos() % 1_000_000 != 0))
}

/// `duration` in whole milliseconds, rounded up (a wait or a pttl is never cut short).
pub(crate) fn ceil_ms(duration: Duration) -> u64 {
    let whole = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    whole.saturating_add(u64::from(duration.subsec_nanos() % 1_000_000 != 0))
}

/// What a bounded wait got, or [`Error::Timeout`] naming `name` (every handle's
/// `*_timeout`).
pub(crate) fn or_timeout<G>(got: Option<G>, name: &str, wait: Duration) -> Result<G> {
    got.ok_or_else(|| Error::Timeout {
        name: name.to_owned(),
        waited: wait,
    })
}

/// Checks a bounded wait: zero means a single attempt; above [`MAX_DURATION`] is
/// [`Error::InvalidDuration`] (wait without limit instead).
pub(crate) fn validate_wait(wait: Duration) -> Result<()> {
    if wait > MAX_DURATION {
        return Err(Error::InvalidDuration {
            what: "wait",
            value: wait,
            reason: "must be at most 100 years; wait without limit instead",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted_from_urls() {
        use super::redact_url;
        assert_eq!(redact_url("redis://u:secret@h:1/0"), "redis://u:***@h:1/0");
        assert_eq!(redact_url("redis://secret@h"), "redis://***@h");
        assert_eq!(redact_url("redis://h:6379/0"), "redis://h:6379/0");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(redact_url("redis://:p@ss@h/x@y"), "redis://:***@h/x@y");
    }

    use super::*;

    #[test]
    fn layout_shares_one_hash_tag() {
        let keys = LockKeys::new("app", 3, false, "orders:42").unwrap();
        assert_eq!(&*keys.hash, "app:{orders:42}");
        assert_eq!(&*keys.channel, "app:{orders:42}:db3:released");
        assert_eq!(&*keys.fence, "app:{orders:42}:fence");
    }

    #[test]
    fn names_are_validated() {
        assert!(matches!(validate_name(""), Err(Error::InvalidName { .. })));
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN)).is_ok());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(validate_name("a{b").is_err());
        assert!(validate_name("a}b").is_err());
        assert!(validate_name("a\nb").is_err());
        assert!(validate_name("ünïcode ok").is_ok());
        assert!(validate_owner("").is_err());
        assert!(validate_prefix("").is_err());
        assert!(validate_prefix("a{").is_err());
    }

    #[test]
    fn long_names_are_shortened_in_errors() {
        let err = validate_name(&"é".repeat(1000)).unwrap_err();
        let Error::InvalidName { name, .. } = err else {
            panic!("wrong variant")
        };
        assert!(name.len() < 100, "{name}");
    }

    #[test]
    fn durations_are_validated() {
        assert!(validate_ms("lease", Duration::ZERO).is_err());
        assert!(validate_ms("lease", Duration::from_micros(999)).is_err());
        assert_eq!(validate_ms("lease", Duration::from_millis(1)).unwrap(), 1);
        assert!(validate_ms("lease", Duration::MAX).is_err());
        assert!(validate_ms("lease", MAX_DURATION).is_ok());
    }
}
