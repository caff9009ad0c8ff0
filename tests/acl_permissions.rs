//! The least-privilege ACL rule, one permission at a time, against one real redis-server.
//!
//! For each `+command` of the rule (`tests/common/acl.rs`) a user gets the rule with that
//! one command taken away, and runs every library operation: connect (also to a database
//! other than 0), try_acquire, re-entry, partial and final release, a waiter woken by a
//! release, watchdog renewal, extend, fenced acquire, explicit-owner unlock,
//! force_unlock, state, waiting_clients, an acquire on a key that is not a lock, and the
//! latch's, the semaphore's, the read-write lock's and the fair lock's operations. The reentrant lock's
//! operations that read a lock run on both of its forms where they differ (a first hold
//! is a string, taken by a bare `SET NX PX`; a re-entered or fenced hold is a hash): a
//! failed attempt, renewal, force_unlock. Every await is bounded.
//!
//! What must hold, per user: the operations that need the missing command fail with a
//! typed error that says the ACL refused it (`Error::Redis` naming the server, or
//! `Error::Connect`), none hangs or panics, and every other operation works. `ACL LOG`
//! names only the missing command for that user, and stays empty for the user with the
//! whole rule. A command that nothing needs would show up as a user whose operations all
//! work with an empty `ACL LOG` (`+incr` was such a command, and left the rule).
//!
//! A refused operation must also have written nothing: Redis does not roll back a script,
//! so each script fails before its first write or undoes it (`LATCH_ATOMIC`,
//! `RELEASE_ATOMIC`, `STRANDED`, and `a_script_refused_half_way_writes_nothing`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use common::RedisServer;
use common::acl::{ACL_RULES, REDISSON_ACL_RULES};
use redis::AsyncCommands;
use redis_locks::{Error, LockClient};

const SEC: Duration = Duration::from_secs(1);
/// Bound on every single operation: a hang is a failure, not a stuck test.
const OP_LIMIT: Duration = Duration::from_secs(10);
/// The watchdog lease of the users' clients: renewals every 200 ms, and a renewal that
/// fails shows as a loss within 0.6 s.
const WATCHDOG: Duration = Duration::from_millis(600);

// ---- operations ------------------------------------------------------------------------

const CONNECT: &str = "connect";
const CONNECT_DB3: &str = "connect to db 3, acquire, release";
const TRY_ACQUIRE: &str = "try_acquire (free)";
const REENTER: &str = "guard.reenter";
const RELEASE_PARTIAL: &str = "release (nested)";
const TRY_BUSY: &str = "try_acquire (held by another owner)";
const TRY_BUSY_HASH: &str = "try_acquire (held by another owner, hash form)";
const STATE: &str = "state";
const RELEASE_FINAL: &str = "release (last hold)";
const FENCED: &str = "fenced try_acquire";
const FENCED_STATE: &str = "state (fenced lock)";
const FENCED_RENEWAL: &str = "watchdog renews the fenced lock (hash form)";
const FENCED_RELEASE: &str = "release (fenced)";
const EXTEND_ACQUIRE: &str = "try_acquire (fixed lease)";
const EXTEND: &str = "guard.extend";
const EXTEND_RELEASE: &str = "release (extended)";
const OWNER_ACQUIRE: &str = "acquire (explicit owner)";
const UNLOCK: &str = "unlock (explicit owner)";
const FORCE_UNLOCK: &str = "force_unlock";
const FORCE_UNLOCK_HASH: &str = "force_unlock (hash form)";
const FOREIGN_KEY: &str = "try_acquire on a key that is not a lock (WrongType)";
const FOREIGN_LIST: &str = "try_acquire on a list (WrongType)";
const LATCH_SET: &str = "latch try_set_count";
const LATCH_COUNT: &str = "latch count";
const LATCH_COUNT_DOWN: &str = "latch count_down";
const LATCH_OPEN: &str = "latch count_down to zero";
const LATCH_WOKEN: &str = "latch waiter woken by the opening";
const LATCH_DELETE: &str = "latch delete";
const SEM_SET: &str = "semaphore try_set_permits";
const SEM_STATE: &str = "semaphore state";
const SEM_ACQUIRE: &str = "semaphore try_acquire";
const SEM_BUSY: &str = "semaphore try_acquire (none free)";
const WATCHDOG_ACQUIRE: &str = "acquire (watchdog lease)";
const RENEWAL: &str = "watchdog renews the lock";
const RENEWED_RELEASE: &str = "release (renewed lock)";
const SEM_RENEWAL: &str = "watchdog renews the permits";
const SEM_RELEASE: &str = "semaphore release (a waiter waits)";
const SEM_WOKEN: &str = "semaphore waiter gets the permit";
const SEM_WAITER_RELEASE: &str = "semaphore release (the waiter's)";
const WAIT_ACQUIRE: &str = "try_acquire (20 s lease, a waiter will wait)";
const WAITING_CLIENTS: &str = "waiting_clients";
const WAKING_RELEASE: &str = "release (wakes the waiter)";
const WOKEN: &str = "waiter woken by the release";
const LATCH_ATOMIC: &str = "a refused latch count_down counted nothing";
const RELEASE_ATOMIC: &str = "a refused release gave nothing back";
const STRANDED: &str = "no lock left without an expiry";
const EVAL_AFTER_FLUSH: &str = "try_acquire and release after SCRIPT FLUSH (EVAL)";
const RW_READ: &str = "rw try_read";
const RW_WRITE_BUSY: &str = "rw try_write (a read is held)";
const RW_STATE: &str = "rw state (a read is held)";
const RW_READ_RELEASE: &str = "rw release (the last read)";
const RW_WRITE: &str = "rw fenced try_write";
const RW_WRITE_STATE: &str = "rw state (the write is held)";
const RW_WRITE_RELEASE: &str = "rw release (the write)";
const FAIR_ACQUIRE: &str = "fair try_acquire";
const FAIR_RELEASE: &str = "fair release (the last hold)";

#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Ok,
    /// A typed error naming the server and saying that the ACL refused a command.
    Refused(String),
    /// Any other error, or an unexpected value.
    Failed(String),
    /// Did not finish within `OP_LIMIT`.
    Hung,
    /// Not run: what it needs could not be set up.
    Skipped,
}

/// The error with its sources, for the message.
fn chain(err: &Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(" | ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Whether `err` is the typed answer to an ACL refusal: `Error::Redis` (or
/// `Error::Connect`) naming the server, whose text says NOPERM (a refused command) or
/// "can't run this command" / "can't access" (Redis 7.0's words for a command or a key
/// refused inside a script, which do not name it: `ACL LOG` does).
fn judge(err: &Error, addr: &str) -> Outcome {
    let text = chain(err);
    let lower = text.to_lowercase();
    let says_acl = lower.contains("noperm")
        || lower.contains("can't run this command")
        || lower.contains("can't access")
        || lower.contains("no permissions");
    let names_server = match err {
        Error::Redis(cause) => cause.server == addr && text.contains(addr),
        Error::Connect { addr: named, .. } => named == addr,
        _ => false,
    };
    if says_acl && names_server {
        Outcome::Refused(text)
    } else {
        Outcome::Failed(format!("{err:?}"))
    }
}

/// The outcomes of one user's operations, in order.
struct Run {
    addr: String,
    results: Vec<(&'static str, Outcome)>,
}

impl Run {
    /// Runs one operation, bounded by `OP_LIMIT`, and records how it ended.
    async fn step<T>(
        &mut self,
        name: &'static str,
        op: impl Future<Output = Result<T, Error>>,
    ) -> Option<T> {
        match tokio::time::timeout(OP_LIMIT, op).await {
            Err(_) => {
                self.results.push((name, Outcome::Hung));
                None
            }
            Ok(Ok(value)) => {
                self.results.push((name, Outcome::Ok));
                Some(value)
            }
            Ok(Err(err)) => {
                let outcome = judge(&err, &self.addr);
                self.results.push((name, outcome));
                None
            }
        }
    }

    /// Turns the last step's `Ok` into `Failed(why)` when `ok` is false.
    fn demand(&mut self, ok: bool, why: impl FnOnce() -> String) {
        if ok {
            return;
        }
        if let Some((_, outcome @ Outcome::Ok)) = self.results.last_mut() {
            *outcome = Outcome::Failed(why());
        }
    }

    /// Records a check that is not a library call.
    fn check(&mut self, name: &'static str, ok: bool, why: impl FnOnce() -> String) {
        let outcome = if ok {
            Outcome::Ok
        } else {
            Outcome::Failed(why())
        };
        self.results.push((name, outcome));
    }

    fn skip(&mut self, names: &[&'static str]) {
        for name in names {
            self.results.push((name, Outcome::Skipped));
        }
    }
}

/// Polls `PUBSUB NUMSUB channel` (as the admin) until it is `want` or `limit` passes.
async fn await_numsub(
    admin: &mut redis::aio::MultiplexedConnection,
    channel: &str,
    want: i64,
    limit: Duration,
) -> i64 {
    let deadline = Instant::now() + limit;
    loop {
        let n = common::numsub(admin, channel).await;
        if n == want || Instant::now() > deadline {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every operation as the user of `url`; setups that are not under test (a foreign hold, a
/// latch's count, a semaphore's size) are made by `admin`, a client of the default user.
async fn scenario(
    tag: String,
    url: String,
    url_db3: String,
    addr: String,
    admin: LockClient,
    mut admin_conn: redis::aio::MultiplexedConnection,
) -> Vec<(&'static str, Outcome)> {
    let mut run = Run {
        addr,
        results: Vec::new(),
    };
    let connect = |url: String| async move {
        LockClient::builder(&url)
            .watchdog_timeout(WATCHDOG)
            .response_timeout(SEC)
            .connect()
            .await
    };
    let Some(holder) = run.step(CONNECT, connect(url.clone())).await else {
        return run.results;
    };
    // The waiter: another client (process) of the same user.
    let waiter = connect(url.clone()).await.expect("connected once already");
    let name = |what: &str| format!("{tag}-{what}");

    // A database other than 0 (needs SELECT).
    run.step(CONNECT_DB3, async {
        let client = connect(url_db3.clone()).await?;
        let lock = client.lock(&name("db3"))?;
        let guard = lock.try_acquire().await?;
        let guard = guard.ok_or_else(|| Error::UnexpectedReply("db3 lock busy".into()))?;
        guard.release().await
    })
    .await;

    // Acquire, re-enter, state, release; an attempt on a lock another owner holds.
    let lock = holder.lock(&name("a")).unwrap();
    let outer = match run.step(TRY_ACQUIRE, lock.try_acquire()).await {
        Some(Some(outer)) => Some(outer),
        Some(None) => {
            run.demand(false, || "a free lock was busy".into());
            None
        }
        None => None,
    };
    match &outer {
        Some(outer) => match run.step(REENTER, outer.reenter()).await {
            Some(nested) => {
                run.demand(nested.hold_count() == 2, || "count not 2".into());
                run.step(RELEASE_PARTIAL, nested.release()).await;
            }
            None => run.skip(&[RELEASE_PARTIAL]),
        },
        None => run.skip(&[REENTER, RELEASE_PARTIAL]),
    }
    // Whether or not the user got the lock, state() runs inspect.lua.
    let state = run.step(STATE, lock.state()).await;
    if let Some(outer) = &outer {
        run.demand(
            state.is_some_and(|s| s.count_of(outer.owner()) == 1 && s.holders.len() == 1),
            || "state does not show the holder".into(),
        );
    }
    match outer {
        Some(outer) => {
            run.step(RELEASE_FINAL, outer.release()).await;
        }
        None => run.skip(&[RELEASE_FINAL]),
    }
    let admin_hold = admin.lock(&name("busy")).unwrap().acquire().await.unwrap();
    let busy = run
        .step(TRY_BUSY, holder.lock(&name("busy")).unwrap().try_acquire())
        .await;
    run.demand(matches!(busy, Some(None)), || {
        "another owner got a held lock".into()
    });
    admin_hold.release().await.unwrap();
    // The same on a hold in the hash form (a fenced hold is a hash from the start): the
    // failed attempt reads it with HMGET and marks it with HSETNX.
    let admin_hold = admin
        .lock(&name("busy-hash"))
        .unwrap()
        .with_fencing()
        .acquire()
        .await
        .unwrap();
    let busy = run
        .step(
            TRY_BUSY_HASH,
            holder.lock(&name("busy-hash")).unwrap().try_acquire(),
        )
        .await;
    run.demand(matches!(busy, Some(None)), || {
        "another owner got a held lock".into()
    });
    admin_hold.release().await.unwrap();

    // extend (renew.lua on one hold).
    let fixed = holder
        .lock(&name("extend"))
        .unwrap()
        .with_lease(5 * SEC)
        .unwrap();
    match run
        .step(EXTEND_ACQUIRE, fixed.try_acquire())
        .await
        .flatten()
    {
        Some(guard) => {
            run.step(EXTEND, guard.extend(20 * SEC)).await;
            let mut conn = admin_conn.clone();
            let pttl: i64 = conn.pttl(fixed.key()).await.unwrap();
            run.demand(pttl > 10_000, || format!("not extended: pttl {pttl}"));
            run.step(EXTEND_RELEASE, guard.release()).await;
        }
        None => run.skip(&[EXTEND, EXTEND_RELEASE]),
    }

    // A guard-less unlock by an explicit owner (inspect.lua, then release.lua).
    let owned = holder
        .lock(&name("owned"))
        .unwrap()
        .with_owner(name("owner"))
        .unwrap();
    match run.step(OWNER_ACQUIRE, owned.acquire()).await {
        Some(guard) => {
            guard.detach();
            let left = run.step(UNLOCK, owned.unlock()).await;
            run.demand(left == Some(0), || format!("unlock left {left:?}"));
        }
        None => run.skip(&[UNLOCK]),
    }

    // force_unlock of the admin's hold.
    let admin_hold = admin
        .lock(&name("forced"))
        .unwrap()
        .acquire()
        .await
        .unwrap();
    let forced = run
        .step(
            FORCE_UNLOCK,
            holder.lock(&name("forced")).unwrap().force_unlock(),
        )
        .await;
    run.demand(forced == Some(true), || format!("force_unlock: {forced:?}"));
    admin_hold.detach();
    let _ = admin.lock(&name("forced")).unwrap().force_unlock().await;
    // The same on a hold in the hash form (HEXISTS of its hold id instead of GET).
    let admin_hold = admin
        .lock(&name("forced-hash"))
        .unwrap()
        .with_fencing()
        .acquire()
        .await
        .unwrap();
    let forced = run
        .step(
            FORCE_UNLOCK_HASH,
            holder.lock(&name("forced-hash")).unwrap().force_unlock(),
        )
        .await;
    run.demand(forced == Some(true), || format!("force_unlock: {forced:?}"));
    admin_hold.detach();
    let _ = admin
        .lock(&name("forced-hash"))
        .unwrap()
        .force_unlock()
        .await;

    // Keys that are not locks: WrongType, untouched. A string that is not a first hold
    // (the bare SET NX finds it, acquire.lua's GET reads it), and a list (GET and HMGET
    // answer WRONGTYPE, TYPE names it).
    for (op, foreign, fill) in [
        (FOREIGN_KEY, "foreign", false),
        (FOREIGN_LIST, "list", true),
    ] {
        let foreign = holder.lock(&name(foreign)).unwrap();
        if fill {
            let _: () = admin_conn.rpush(foreign.key(), "payload").await.unwrap();
        } else {
            let _: () = admin_conn.set(foreign.key(), "payload").await.unwrap();
        }
        match tokio::time::timeout(OP_LIMIT, foreign.try_acquire()).await {
            Ok(Err(Error::WrongType { .. })) => run.results.push((op, Outcome::Ok)),
            Ok(Err(err)) => run.results.push((op, judge(&err, &run.addr))),
            Ok(Ok(got)) => run.results.push((op, Outcome::Failed(format!("{got:?}")))),
            Err(_) => run.results.push((op, Outcome::Hung)),
        }
    }

    // The latch. try_set_count on a fresh latch; the rest on one the admin closed.
    let fresh = holder.latch(&name("latch-set")).unwrap();
    let set = run.step(LATCH_SET, fresh.try_set_count(2)).await;
    run.demand(set == Some(true), || format!("try_set_count: {set:?}"));
    let latch_name = name("latch");
    assert!(
        admin
            .latch(&latch_name)
            .unwrap()
            .try_set_count(2)
            .await
            .unwrap()
    );
    let latch = holder.latch(&latch_name).unwrap();
    let count = run.step(LATCH_COUNT, latch.count()).await;
    run.demand(count == Some(2), || format!("count {count:?}"));
    let left = run.step(LATCH_COUNT_DOWN, latch.count_down()).await;
    run.demand(left == Some(1), || format!("count_down left {left:?}"));
    if left.is_none() {
        // A refused count-down must not have counted (it is exactly-once: the caller
        // will retry it).
        let count = admin.latch(&latch_name).unwrap().count().await.unwrap();
        run.check(LATCH_ATOMIC, count == 2, || {
            format!("the refused count_down counted: the count is {count}, not 2")
        });
    } else {
        run.check(LATCH_ATOMIC, true, String::new);
    }
    let left = admin.latch(&latch_name).unwrap().count().await.unwrap();
    if left != 1 {
        // Bring it to 1 as the admin, so the opening below is the user's.
        admin
            .latch(&latch_name)
            .unwrap()
            .count_down()
            .await
            .unwrap();
    }
    let waiting = {
        // A long re-check: only the opening's message (or polling, without SUBSCRIBE)
        // wakes it early.
        let latch = waiter
            .latch(&latch_name)
            .unwrap()
            .with_recheck(20 * SEC)
            .unwrap();
        tokio::spawn(async move {
            let opened = latch.wait_for(6 * SEC).await;
            (opened, Instant::now())
        })
    };
    await_numsub(
        &mut admin_conn,
        &format!("{}:db0:open", latch.key()),
        1,
        SEC,
    )
    .await;
    let opened = run.step(LATCH_OPEN, latch.count_down()).await;
    run.demand(opened == Some(0), || format!("count_down left {opened:?}"));
    let counted_at = Instant::now();
    if opened != Some(0) {
        // Open it as the admin: whether the waiter hears that is not this user's doing.
        let _ = admin.latch(&latch_name).unwrap().delete().await;
    }
    match tokio::time::timeout(OP_LIMIT, waiting).await {
        Ok(Ok((Ok(true), at))) => {
            let after = at.saturating_duration_since(counted_at);
            run.check(LATCH_WOKEN, after < 3 * SEC, || {
                format!("woken {after:?} after the opening")
            })
        }
        Ok(Ok((Ok(false), _))) => run.check(LATCH_WOKEN, false, || "never opened".into()),
        Ok(Ok((Err(err), _))) => run.results.push((LATCH_WOKEN, judge(&err, &run.addr))),
        Ok(Err(panic)) => run.check(LATCH_WOKEN, false, || format!("panicked: {panic}")),
        Err(_) => run.results.push((LATCH_WOKEN, Outcome::Hung)),
    }
    let closed = name("latch-delete");
    admin
        .latch(&closed)
        .unwrap()
        .try_set_count(3)
        .await
        .unwrap();
    let deleted = run
        .step(LATCH_DELETE, holder.latch(&closed).unwrap().delete())
        .await;
    run.demand(deleted == Some(true), || format!("delete: {deleted:?}"));

    // The semaphore: try_set_permits on a fresh one; the rest on one the admin sized.
    let set = run
        .step(
            SEM_SET,
            holder
                .semaphore(&name("sem-set"))
                .unwrap()
                .try_set_permits(2),
        )
        .await;
    run.demand(set == Some(true), || format!("try_set_permits: {set:?}"));
    let sem_name = name("sem");
    admin
        .semaphore(&sem_name)
        .unwrap()
        .set_permits(1)
        .await
        .unwrap();
    let semaphore = holder.semaphore(&sem_name).unwrap();
    let state = run.step(SEM_STATE, semaphore.state()).await;
    run.demand(state.is_some_and(|s| s.size == Some(1)), || {
        format!("state {state:?}")
    });
    let permit = run.step(SEM_ACQUIRE, semaphore.try_acquire(1)).await;
    let permit = match permit {
        Some(Some(permit)) => Some(permit),
        Some(None) => {
            run.demand(false, || "no permit free".into());
            None
        }
        None => None,
    };

    // Renewal: a watchdog-leased lock (a first hold: the string form) and the permit live
    // three leases.
    let renewed = holder.lock(&name("renewed")).unwrap();
    let guard = run.step(WATCHDOG_ACQUIRE, renewed.acquire()).await;
    // Refused calls, not failed ones: a renewal call that times out on a busy machine is
    // retried and proves nothing about the ACL.
    let refused_before = holder.watchdog_stats().refused_calls;
    tokio::time::sleep(3 * WATCHDOG).await;
    let refused_calls = holder.watchdog_stats().refused_calls - refused_before;
    match guard {
        Some(guard) => {
            run.check(RENEWAL, !guard.is_lost() && refused_calls == 0, || {
                format!(
                    "lost: {:?}; refused renew calls: {refused_calls}",
                    guard.lost_reason()
                )
            });
            run.step(RENEWED_RELEASE, guard.release()).await;
        }
        None => run.skip(&[RENEWAL, RENEWED_RELEASE]),
    }
    // Fencing (TIME, GET, SET in the acquire; GET of the counter in state). A fenced hold
    // is a hash from the start: the watchdog renews it with renew.lua's HGET path (after
    // the string's renewal above, so that a refusal here cannot fail that one).
    let fenced = holder.lock(&name("fenced")).unwrap().with_fencing();
    match run.step(FENCED, fenced.try_acquire()).await.flatten() {
        Some(guard) => {
            let refused_before = holder.watchdog_stats().refused_calls;
            let token = guard.fencing_token();
            run.demand(token.is_some_and(|t| t > 0), || "no token".into());
            let state = run.step(FENCED_STATE, fenced.state()).await;
            run.demand(state.is_some_and(|s| s.fence == token), || {
                "state lacks the fence".into()
            });
            tokio::time::sleep(3 * WATCHDOG).await;
            let refused_calls = holder.watchdog_stats().refused_calls - refused_before;
            run.check(
                FENCED_RENEWAL,
                !guard.is_lost() && refused_calls == 0,
                || {
                    format!(
                        "lost: {:?}; refused renew calls: {refused_calls}",
                        guard.lost_reason()
                    )
                },
            );
            run.step(FENCED_RELEASE, guard.release()).await;
        }
        None => run.skip(&[FENCED_STATE, FENCED_RENEWAL, FENCED_RELEASE]),
    }
    match permit {
        Some(permit) => {
            run.check(SEM_RENEWAL, !permit.is_lost(), || {
                format!("lost: {:?}", permit.lost_reason())
            });
            let busy = run
                .step(
                    SEM_BUSY,
                    waiter.semaphore(&sem_name).unwrap().try_acquire(1),
                )
                .await;
            run.demand(matches!(busy, Some(None)), || {
                "a permit beyond the size".into()
            });
            let waiting = {
                let semaphore = waiter.semaphore(&sem_name).unwrap();
                tokio::spawn(async move {
                    let got = semaphore.try_acquire_for(1, 6 * SEC).await;
                    (got, Instant::now())
                })
            };
            tokio::time::sleep(Duration::from_millis(300)).await;
            run.step(SEM_RELEASE, permit.release()).await;
            let released_at = Instant::now();
            match tokio::time::timeout(OP_LIMIT, waiting).await {
                Ok(Ok((Ok(Some(permit)), at))) => {
                    let after = at.saturating_duration_since(released_at);
                    run.check(SEM_WOKEN, after < 3 * SEC, || {
                        format!("got it {after:?} after the release")
                    });
                    run.step(SEM_WAITER_RELEASE, permit.release()).await;
                }
                Ok(Ok((Ok(None), _))) => {
                    run.check(SEM_WOKEN, false, || "no permit within 6 s".into());
                    run.skip(&[SEM_WAITER_RELEASE]);
                }
                Ok(Ok((Err(err), _))) => {
                    run.results.push((SEM_WOKEN, judge(&err, &run.addr)));
                    run.skip(&[SEM_WAITER_RELEASE]);
                }
                Ok(Err(panic)) => {
                    run.check(SEM_WOKEN, false, || format!("panicked: {panic}"));
                    run.skip(&[SEM_WAITER_RELEASE]);
                }
                Err(_) => {
                    run.results.push((SEM_WOKEN, Outcome::Hung));
                    run.skip(&[SEM_WAITER_RELEASE]);
                }
            }
        }
        None => run.skip(&[
            SEM_RENEWAL,
            SEM_BUSY,
            SEM_RELEASE,
            SEM_WOKEN,
            SEM_WAITER_RELEASE,
        ]),
    }

    // The read-write lock: a read, a write refused while it is held, state, the release;
    // then a fenced write (fencing counter, no read), state and release.
    let rw = holder.rw_lock(&name("rw")).unwrap();
    match run.step(RW_READ, rw.try_read()).await {
        Some(Some(read)) => {
            let busy = run
                .step(
                    RW_WRITE_BUSY,
                    waiter.rw_lock(&name("rw")).unwrap().try_write(),
                )
                .await;
            run.demand(matches!(busy, Some(None)), || {
                "a write while a read is held".into()
            });
            let state = run.step(RW_STATE, rw.state()).await;
            run.demand(
                state
                    .as_ref()
                    .is_some_and(|s| s.reads == 1 && s.writes == 0),
                || format!("state {state:?}"),
            );
            run.step(RW_READ_RELEASE, read.release()).await;
        }
        Some(None) => {
            run.demand(false, || "a free read-write lock was busy".into());
            run.skip(&[RW_WRITE_BUSY, RW_STATE, RW_READ_RELEASE]);
        }
        None => run.skip(&[RW_WRITE_BUSY, RW_STATE, RW_READ_RELEASE]),
    }
    let rw = holder.rw_lock(&name("rw-write")).unwrap().with_fencing();
    match run.step(RW_WRITE, rw.try_write()).await {
        Some(Some(write)) => {
            let token = write.fencing_token();
            run.demand(token.is_some_and(|t| t > 0), || "no token".into());
            let state = run.step(RW_WRITE_STATE, rw.state()).await;
            run.demand(
                state
                    .as_ref()
                    .is_some_and(|s| s.writes == 1 && s.reads == 0),
                || format!("state {state:?}"),
            );
            run.step(RW_WRITE_RELEASE, write.release()).await;
        }
        Some(None) => {
            run.demand(false, || "a free read-write lock was busy".into());
            run.skip(&[RW_WRITE_STATE, RW_WRITE_RELEASE]);
        }
        None => run.skip(&[RW_WRITE_STATE, RW_WRITE_RELEASE]),
    }

    // The fair lock: a hold taken and given back (the last hold leaving asks whether the
    // lock is free, to wake the head of the queue).
    let fair = holder.fair_lock(&name("fair")).unwrap();
    match run.step(FAIR_ACQUIRE, fair.try_acquire()).await {
        Some(Some(guard)) => {
            run.step(FAIR_RELEASE, guard.release()).await;
        }
        Some(None) => {
            run.demand(false, || "a free fair lock was busy".into());
            run.skip(&[FAIR_RELEASE]);
        }
        None => run.skip(&[FAIR_RELEASE]),
    }

    // A waiter in another client woken by the release (a 20 s lease: only a wake-up, or
    // polling without SUBSCRIBE, gets it there within seconds).
    let contended = holder
        .lock(&name("wake"))
        .unwrap()
        .with_lease(20 * SEC)
        .unwrap();
    match run
        .step(WAIT_ACQUIRE, contended.try_acquire())
        .await
        .flatten()
    {
        Some(guard) => {
            let waiting = {
                let lock = waiter.lock(&name("wake")).unwrap();
                tokio::spawn(async move {
                    let got = lock.acquire_timeout(5 * SEC).await;
                    (got, Instant::now())
                })
            };
            let subscribed =
                await_numsub(&mut admin_conn, contended.channel(), 1, SEC).await as u64;
            let seen = run.step(WAITING_CLIENTS, contended.waiting_clients()).await;
            run.demand(seen == Some(subscribed), || {
                format!("waiting_clients {seen:?}, PUBSUB NUMSUB {subscribed}")
            });
            // Let the waiter's failed attempt mark the lock (HSETNX) and go to sleep.
            tokio::time::sleep(Duration::from_millis(200)).await;
            let released = run.step(WAKING_RELEASE, guard.release()).await;
            let released_at = Instant::now();
            // A refused release must have given nothing back: the caller was told it failed.
            let exists: bool = admin_conn.exists(contended.key()).await.unwrap();
            run.check(RELEASE_ATOMIC, released.is_some() || exists, || {
                "the refused release deleted the lock".into()
            });
            match tokio::time::timeout(OP_LIMIT, waiting).await {
                Ok(Ok((Ok(got), at))) => {
                    let after = at.saturating_duration_since(released_at);
                    run.check(WOKEN, after < 3 * SEC, || {
                        format!("got it {after:?} after the release")
                    });
                    let _ = tokio::time::timeout(OP_LIMIT, got.release()).await;
                }
                Ok(Ok((Err(err), _))) => run.results.push((WOKEN, judge(&err, &run.addr))),
                Ok(Err(panic)) => run.check(WOKEN, false, || format!("panicked: {panic}")),
                Err(_) => run.results.push((WOKEN, Outcome::Hung)),
            }
        }
        None => run.skip(&[WAITING_CLIENTS, WAKING_RELEASE, RELEASE_ATOMIC, WOKEN]),
    }

    // No lock is left without an expiry, in either form (a hash, or a first hold's
    // string): it would never free, and the library would refuse it as "not a lock" from
    // then on. (The foreign string and list above have none, and are not locks.)
    let keys: Vec<String> = admin_conn
        .keys(format!("redis-locks:{{{tag}-*"))
        .await
        .unwrap();
    let mut stranded = Vec::new();
    for key in keys.iter().filter(|key| key.ends_with('}')) {
        let kind: String = redis::cmd("TYPE")
            .arg(key)
            .query_async(&mut admin_conn)
            .await
            .unwrap();
        let pttl: i64 = admin_conn.pttl(key).await.unwrap();
        let first_hold = kind == "string"
            && common::lock_hget(key, "\x01h")
                .query_async::<Option<String>>(&mut admin_conn)
                .await
                .is_ok_and(|hold| hold.is_some());
        if (kind == "hash" || first_hold) && pttl == -1 {
            stranded.push(key.clone());
        }
    }
    run.check(STRANDED, stranded.is_empty(), || {
        format!("locks without an expiry: {stranded:?}")
    });
    run.results
}

// ---- the server and its users ----------------------------------------------------------

/// The documented rule, `ACL_RULES`.
fn whole_rule() -> Vec<&'static str> {
    ACL_RULES.to_vec()
}

/// The user names: `full`, and `no-<command>` per permission.
fn user_for(permission: &str) -> String {
    format!(
        "no-{}",
        permission.trim_start_matches('+').replace('|', "-")
    )
}

const PASSWORD: &str = "acl-perm-pw";

async fn set_user(admin: &mut redis::aio::MultiplexedConnection, user: &str, rule: &[&str]) {
    let mut args = vec!["SETUSER", user, "reset", "on"];
    let password = format!(">{PASSWORD}");
    args.push(&password);
    args.extend_from_slice(rule);
    let _: () = redis::cmd("ACL")
        .arg(&args)
        .query_async(admin)
        .await
        .unwrap_or_else(|err| panic!("ACL SETUSER {user}: {err}"));
}

/// `ACL LOG`: (user, refused object) -> count.
async fn acl_log(admin: &mut redis::aio::MultiplexedConnection) -> BTreeMap<(String, String), i64> {
    let entries: Vec<BTreeMap<String, redis::Value>> = redis::cmd("ACL")
        .arg("LOG")
        .arg(100_000)
        .query_async(admin)
        .await
        .unwrap();
    let text = |value: Option<&redis::Value>| match value {
        Some(redis::Value::BulkString(bytes)) => String::from_utf8_lossy(bytes).into_owned(),
        Some(redis::Value::SimpleString(text)) => text.clone(),
        other => format!("{other:?}"),
    };
    let mut log = BTreeMap::new();
    for entry in entries {
        let count = match entry.get("count") {
            Some(redis::Value::Int(n)) => *n,
            _ => 1,
        };
        let key = (
            text(entry.get("username")),
            format!(
                "{}:{}",
                text(entry.get("reason")),
                text(entry.get("object"))
            ),
        );
        *log.entry(key).or_insert(0) += count;
    }
    log
}

fn url(server: &RedisServer, user: &str, db: u8) -> String {
    format!("redis://{user}:{PASSWORD}@127.0.0.1:{}/{db}", server.port)
}

/// Runs the scenario for every user at once; returns user -> outcomes.
async fn run_all(
    server: &RedisServer,
    users: &[String],
) -> BTreeMap<String, Vec<(&'static str, Outcome)>> {
    let admin = LockClient::connect(&server.url()).await.unwrap();
    let addr = format!("127.0.0.1:{}", server.port);
    let mut tasks = Vec::new();
    for user in users {
        let scenario = scenario(
            user.clone(),
            url(server, user, 0),
            url(server, user, 3),
            addr.clone(),
            admin.clone(),
            server.conn().await,
        );
        tasks.push((user.clone(), tokio::spawn(scenario)));
    }
    let mut all = BTreeMap::new();
    for (user, task) in tasks {
        let results = match tokio::time::timeout(40 * SEC, task).await {
            Ok(Ok(results)) => results,
            Ok(Err(panic)) => panic!("{user}: the scenario panicked: {panic}"),
            Err(_) => panic!("{user}: the scenario did not end within 40 s"),
        };
        all.insert(user.clone(), results);
    }
    all
}

fn table(all: &BTreeMap<String, Vec<(&'static str, Outcome)>>) -> String {
    let mut out = String::new();
    for (user, results) in all {
        let not_ok: Vec<String> = results
            .iter()
            .filter(|(_, outcome)| *outcome != Outcome::Ok)
            .map(|(op, outcome)| {
                let short = match outcome {
                    Outcome::Refused(text) => format!("REFUSED ({})", &text[..text.len().min(140)]),
                    Outcome::Failed(text) => format!("FAILED ({})", &text[..text.len().min(300)]),
                    other => format!("{other:?}"),
                };
                format!("    {op}: {short}")
            })
            .collect();
        out.push_str(&format!(
            "{user}: {} ops, {} not Ok\n",
            results.len(),
            not_ok.len()
        ));
        for line in not_ok {
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// Runs, after a `SCRIPT FLUSH`, one acquire and release as `user`: the first call of
/// each script is then an `EVALSHA` answered `NOSCRIPT`, sent again as `EVAL`.
async fn eval_after_flush(
    server: &RedisServer,
    admin: &mut redis::aio::MultiplexedConnection,
    user: &str,
) -> (&'static str, Outcome) {
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query_async(admin)
        .await
        .unwrap();
    let mut run = Run {
        addr: format!("127.0.0.1:{}", server.port),
        results: Vec::new(),
    };
    let url = url(server, user, 0);
    run.step(EVAL_AFTER_FLUSH, async {
        let client = LockClient::builder(&url)
            .response_timeout(SEC)
            .connect()
            .await?;
        let guard = client.lock(&format!("{user}-eval"))?.try_acquire().await?;
        let guard = guard.ok_or_else(|| Error::UnexpectedReply("busy".into()))?;
        guard.release().await
    })
    .await;
    run.results.pop().unwrap()
}

// ---- what each permission is needed for -------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Ok,
    /// Fails with the typed ACL error (`Outcome::Refused`).
    Refused,
    /// Fails as a consequence of another refusal (a waiter nobody wakes, a lock lost
    /// because its renewals are refused): any error or failed check, never a hang.
    Fails,
    /// Not run: what it needs was refused.
    Skipped,
}

fn fits(expect: Expect, outcome: &Outcome) -> bool {
    match (expect, outcome) {
        (_, Outcome::Hung) => false,
        (Expect::Ok, Outcome::Ok) => true,
        (Expect::Refused, Outcome::Refused(_)) => true,
        (Expect::Fails, Outcome::Refused(_) | Outcome::Failed(_)) => true,
        (Expect::Skipped, Outcome::Skipped) => true,
        _ => false,
    }
}

/// The unfenced fresh acquisitions of a free lock: a first hold, taken with the bare
/// `SET <key> <value> NX PX <lease>` (no script; lua/take.lua) and kept in the string
/// form. `CONNECT_DB3` and `EVAL_AFTER_FLUSH` also release theirs (release.lua's string
/// path: GET, DEL).
const TAKES: &[&str] = &[
    CONNECT_DB3,
    TRY_ACQUIRE,
    EXTEND_ACQUIRE,
    OWNER_ACQUIRE,
    WATCHDOG_ACQUIRE,
    WAIT_ACQUIRE,
    EVAL_AFTER_FLUSH,
];
/// What needs a lock the user took with the bare SET.
const AFTER_TAKES: &[&str] = &[
    REENTER,
    RELEASE_PARTIAL,
    RELEASE_FINAL,
    EXTEND,
    EXTEND_RELEASE,
    UNLOCK,
    RENEWAL,
    RENEWED_RELEASE,
    WAITING_CLIENTS,
    WAKING_RELEASE,
    RELEASE_ATOMIC,
    WOKEN,
];
/// What needs the fenced lock (a hash from the start: acquire.lua's fresh branch, PTTL,
/// TIME, GET, HSET, PEXPIRE, SET).
const AFTER_FENCED: &[&str] = &[FENCED_STATE, FENCED_RENEWAL, FENCED_RELEASE];
/// What needs a permit the user acquired.
const AFTER_SEM_ACQUIRE: &[&str] = &[
    SEM_RENEWAL,
    SEM_BUSY,
    SEM_RELEASE,
    SEM_WOKEN,
    SEM_WAITER_RELEASE,
];
/// Both acquisitions of the read-write lock: rw_acquire.lua's TIME, ZRANGE (the first
/// writer and the first read: ZREMRANGEBYSCORE only when that one has expired), GET (the
/// reservation), ZADD, PEXPIRE; PTTL only when the set is there already; ZSCORE (a lost
/// copy's hold) only on a refusal and for a fenced write.
const RW_ACQUIRES: &[&str] = &[RW_READ, RW_WRITE];
/// What needs a read-write hold the user acquired.
const AFTER_RW_ACQUIRES: &[&str] = &[
    RW_WRITE_BUSY,
    RW_STATE,
    RW_READ_RELEASE,
    RW_WRITE_STATE,
    RW_WRITE_RELEASE,
];

/// The operations that taking `permission` away must break, and how; every other
/// operation must work. Derived from the commands each script calls (`lua/*.lua`) and
/// the library's own commands (PING at connect, SELECT for a database other than 0,
/// the bare `SET NX PX` of an uncontended acquire, TYPE and HGET in
/// `CountDownLatch::count`, PUBSUB NUMSUB in `waiting_clients`, SUBSCRIBE and UNSUBSCRIBE
/// for waiters).
///
/// The reentrant lock's paths, by the form of the lock:
/// * a first hold is a string: taken by `SET NX PX`; a failed attempt on it (after the
///   SET found the key) runs acquire.lua's PTTL, GET and marks it with SET XX KEEPTTL; a
///   re-entry turns it into a hash (PTTL, GET, then DEL, HSET, PEXPIRE, each checked
///   before the first); release.lua reads it with GET and DELs it (PUBLISH first when a
///   waiter marked it); renew.lua reads it with GET; inspect.lua (`state`, and `unlock`,
///   which reads the hold id through it) with TYPE, PTTL, GET; force_unlock.lua with
///   TYPE, GET;
/// * a hash (a re-entered or fenced hold): acquire.lua's GET answers WRONGTYPE, then
///   HMGET (HSETNX marks it on a failed attempt); release.lua the same, then HMGET
///   (HINCRBY, HSET for a partial release); renew.lua GET, then HGET; inspect.lua
///   HGETALL; force_unlock.lua HEXISTS.
fn expected(permission: &str) -> BTreeMap<&'static str, Expect> {
    use Expect::{Fails, Refused, Skipped};
    let groups: Vec<(&[&'static str], Expect)> = match permission {
        // Tolerated: connect() ignores a refused PING; waiters poll without SUBSCRIBE;
        // a refused UNSUBSCRIBE drops the subscription connection, which unsubscribes.
        // ACL LOG still names them (checked below).
        "+ping" | "+subscribe" | "+unsubscribe" => vec![],
        // The bare SET NX takes a free lock without a script: every other operation of
        // the lock (and the release of those two) is refused.
        "+evalsha" => vec![
            (&[FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
            (&[CONNECT_DB3, EVAL_AFTER_FLUSH, FENCED], Refused),
            (
                &[
                    REENTER,
                    STATE,
                    RELEASE_FINAL,
                    TRY_BUSY,
                    TRY_BUSY_HASH,
                    EXTEND,
                    EXTEND_RELEASE,
                    UNLOCK,
                    FORCE_UNLOCK,
                    FORCE_UNLOCK_HASH,
                    FOREIGN_KEY,
                    FOREIGN_LIST,
                    LATCH_SET,
                    LATCH_COUNT,
                    LATCH_COUNT_DOWN,
                    LATCH_OPEN,
                    LATCH_DELETE,
                    SEM_SET,
                    SEM_STATE,
                    SEM_ACQUIRE,
                    RENEWED_RELEASE,
                    WAKING_RELEASE,
                ],
                Refused,
            ),
            // The waiter's attempt (acquire.lua, after its SET NX found the key) and the
            // waiter's checks of the count (latch_count.lua) are refused too.
            (&[WOKEN, LATCH_WOKEN], Refused),
            // renew.lua is refused: the watchdog counts failed calls until the lease runs
            // out unconfirmed.
            (&[RENEWAL], Fails),
            (&[RELEASE_PARTIAL], Skipped),
            (AFTER_FENCED, Skipped),
            (AFTER_SEM_ACQUIRE, Skipped),
            (RW_ACQUIRES, Refused),
            (AFTER_RW_ACQUIRES, Skipped),
        ],
        // Only after NOSCRIPT (the scripts were cached before the other operations).
        "+eval" => vec![(&[EVAL_AFTER_FLUSH], Refused)],
        "+select" => vec![(&[CONNECT_DB3], Refused)],
        "+pubsub|numsub" => vec![(&[WAITING_CLIENTS], Refused)],
        "+type" => vec![
            (&[FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
            (
                &[
                    STATE,
                    FENCED_STATE,
                    UNLOCK,
                    FORCE_UNLOCK,
                    FORCE_UNLOCK_HASH,
                    FOREIGN_LIST,
                    LATCH_SET,
                    LATCH_COUNT,
                    LATCH_COUNT_DOWN,
                    LATCH_OPEN,
                    LATCH_DELETE,
                    SEM_SET,
                    SEM_STATE,
                    SEM_ACQUIRE,
                    RW_STATE,
                    RW_WRITE_STATE,
                ],
                Refused,
            ),
            // The waiter's checks of the count (CountDownLatch::count) are refused too.
            (&[LATCH_WOKEN], Refused),
            (AFTER_SEM_ACQUIRE, Skipped),
        ],
        // GET: every script's first read of the lock (the string form), the fencing
        // counter, and rw_acquire.lua's reservation. The bare SET NX needs none.
        "+get" => vec![
            (
                &[
                    CONNECT_DB3,
                    REENTER,
                    STATE,
                    RELEASE_FINAL,
                    TRY_BUSY,
                    TRY_BUSY_HASH,
                    FENCED,
                    EXTEND,
                    EXTEND_RELEASE,
                    UNLOCK,
                    FORCE_UNLOCK,
                    FOREIGN_KEY,
                    FOREIGN_LIST,
                    RENEWED_RELEASE,
                    WAKING_RELEASE,
                    EVAL_AFTER_FLUSH,
                ],
                Refused,
            ),
            // The waiter's attempt is refused too.
            (&[WOKEN], Refused),
            (&[RENEWAL], Fails),
            (&[RELEASE_PARTIAL], Skipped),
            (AFTER_FENCED, Skipped),
            (RW_ACQUIRES, Refused),
            (AFTER_RW_ACQUIRES, Skipped),
        ],
        // SET: the bare SET NX of every acquire not yet waiting, and the fencing counter.
        "+set" => vec![
            (TAKES, Refused),
            (
                &[
                    TRY_BUSY,
                    TRY_BUSY_HASH,
                    FENCED,
                    FOREIGN_KEY,
                    FOREIGN_LIST,
                    RW_WRITE,
                ],
                Refused,
            ),
            (AFTER_TAKES, Skipped),
            (AFTER_FENCED, Skipped),
            (&[RW_WRITE_STATE, RW_WRITE_RELEASE], Skipped),
        ],
        // DEL: every final release, force_unlock, and a re-entry into a string (checked
        // before it runs: the string is left as it was).
        "+del" => vec![
            (
                &[
                    CONNECT_DB3,
                    REENTER,
                    RELEASE_FINAL,
                    FENCED_RELEASE,
                    EXTEND_RELEASE,
                    UNLOCK,
                    FORCE_UNLOCK,
                    FORCE_UNLOCK_HASH,
                    LATCH_OPEN,
                    LATCH_DELETE,
                    RENEWED_RELEASE,
                    WAKING_RELEASE,
                    EVAL_AFTER_FLUSH,
                ],
                Refused,
            ),
            (&[RELEASE_PARTIAL], Skipped),
            // The lock stays held for its 20 s lease: the waiter's 5 s wait ends.
            (&[WOKEN], Fails),
        ],
        // PTTL: acquire.lua (not the bare SET NX), inspect.lua.
        "+pttl" => vec![
            (&[FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
            (
                &[
                    REENTER,
                    STATE,
                    TRY_BUSY,
                    TRY_BUSY_HASH,
                    FENCED,
                    UNLOCK,
                    FOREIGN_KEY,
                    FOREIGN_LIST,
                    SEM_ACQUIRE,
                ],
                Refused,
            ),
            // The waiter's attempt is refused: it never sleeps, nobody marks the lock.
            (&[WOKEN], Refused),
            (&[RELEASE_PARTIAL], Skipped),
            (AFTER_FENCED, Skipped),
            (AFTER_SEM_ACQUIRE, Skipped),
            // rw_acquire.lua reads a set's PTTL only when it is there already (a re-entry,
            // a second read): not here. rw_state.lua reads both.
            (&[RW_STATE, RW_WRITE_STATE], Refused),
        ],
        // A refused PEXPIRE leaves nothing behind: a fenced fresh acquire deletes the
        // hash it has just written, a re-entry into a string checks it before its first
        // write, rw_acquire.lua takes the hold back out (STRANDED finds no lock without
        // an expiry).
        "+pexpire" => vec![
            (&[FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
            (&[FENCED, REENTER, EXTEND, SEM_ACQUIRE], Refused),
            // renew.lua is refused: the lease runs out unconfirmed, and the release finds
            // the lock lost.
            (&[RENEWAL, RENEWED_RELEASE], Fails),
            (&[RELEASE_PARTIAL], Skipped),
            (AFTER_FENCED, Skipped),
            (AFTER_SEM_ACQUIRE, Skipped),
            (RW_ACQUIRES, Refused),
            (AFTER_RW_ACQUIRES, Skipped),
        ],
        // HGET: renew.lua on a hash (the fenced lock; a first hold's string is read with
        // GET). renew.lua is refused: the watchdog counts failed calls until the lease runs
        // out unconfirmed, and the release finds the lock lost.
        "+hget" => vec![
            (&[SEM_SET, LATCH_COUNT], Refused),
            (&[FENCED_RENEWAL, FENCED_RELEASE], Fails),
            // The waiter's checks of the count (CountDownLatch::count) are refused too.
            (&[LATCH_WOKEN], Refused),
        ],
        // HMGET: every script's read of a hash (a re-entered or fenced hold, a key of
        // another type). The refused partial release leaves the count at 2, which state
        // shows.
        "+hmget" => vec![
            (
                &[
                    RELEASE_PARTIAL,
                    RELEASE_FINAL,
                    TRY_BUSY_HASH,
                    FENCED_RELEASE,
                    FOREIGN_LIST,
                    LATCH_COUNT_DOWN,
                    LATCH_OPEN,
                    SEM_STATE,
                    SEM_ACQUIRE,
                ],
                Refused,
            ),
            (&[STATE], Fails),
            (AFTER_SEM_ACQUIRE, Skipped),
        ],
        // A refused count-down's record: latch_count_down.lua gives the count back
        // (LATCH_ATOMIC). A re-entry into a string checks its HSET before the DEL.
        "+hset" => vec![
            (
                &[
                    FENCED,
                    REENTER,
                    LATCH_SET,
                    LATCH_COUNT_DOWN,
                    SEM_SET,
                    SEM_WOKEN,
                ],
                Refused,
            ),
            (&[RELEASE_PARTIAL, SEM_WAITER_RELEASE], Skipped),
            (AFTER_FENCED, Skipped),
        ],
        // HSETNX: a failed attempt marks a hash (a string is marked with SET XX).
        "+hsetnx" => vec![(&[TRY_BUSY_HASH], Refused)],
        // A re-entry into a string writes the count (HSET); a release of a nested hold
        // decrements it. Both refused releases leave the count at 2, which state shows.
        // The count-down that opens the latch deletes it without counting.
        "+hincrby" => vec![
            (&[RELEASE_PARTIAL, RELEASE_FINAL, LATCH_COUNT_DOWN], Refused),
            (&[STATE], Fails),
        ],
        "+hexists" => vec![(&[FORCE_UNLOCK_HASH, LATCH_DELETE], Refused)],
        "+hdel" => vec![(&[SEM_WOKEN], Refused), (&[SEM_WAITER_RELEASE], Skipped)],
        "+time" => vec![
            (&[FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
            (&[FENCED, SEM_SET, SEM_STATE, SEM_ACQUIRE], Refused),
            (AFTER_FENCED, Skipped),
            (AFTER_SEM_ACQUIRE, Skipped),
            (RW_ACQUIRES, Refused),
            (AFTER_RW_ACQUIRES, Skipped),
        ],
        "+hgetall" => vec![(&[STATE, FENCED_STATE], Refused)],
        // Every script publishes before it writes: a refused PUBLISH gives nothing back
        // (RELEASE_ATOMIC), and the latch opened by the admin instead wakes its waiter.
        "+publish" => vec![
            (
                &[
                    FORCE_UNLOCK,
                    FORCE_UNLOCK_HASH,
                    LATCH_OPEN,
                    LATCH_DELETE,
                    SEM_SET,
                    SEM_RELEASE,
                    SEM_WAITER_RELEASE,
                    WAKING_RELEASE,
                    RW_READ_RELEASE,
                    RW_WRITE_RELEASE,
                ],
                Refused,
            ),
            // Nobody is woken: the waiter waits until its deadline.
            (&[WOKEN], Fails),
        ],
        "+zadd" => vec![
            (&[FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
            (&[SEM_ACQUIRE], Refused),
            (AFTER_SEM_ACQUIRE, Skipped),
            (RW_ACQUIRES, Refused),
            (AFTER_RW_ACQUIRES, Skipped),
        ],
        // The read-write lock's scripts drop expired holds only when a set's first one
        // has expired (none has here).
        "+zremrangebyscore" => vec![(&[SEM_ACQUIRE], Refused), (AFTER_SEM_ACQUIRE, Skipped)],
        // ZSCORE in rw_acquire.lua: only a refusal (here a write behind a read) and a
        // fenced write look for a hold that a lost copy took; a granted read does not.
        "+zscore" => vec![
            (&[FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
            (&[SEM_ACQUIRE], Refused),
            (AFTER_SEM_ACQUIRE, Skipped),
            (&[RW_WRITE_BUSY, RW_WRITE], Refused),
            (&[RW_WRITE_STATE, RW_WRITE_RELEASE], Skipped),
        ],
        // ZCARD: the semaphore's acquire (the read-write lock's scripts learn whether a
        // set holds anything from its first member).
        "+zcard" => vec![(&[SEM_ACQUIRE], Refused), (AFTER_SEM_ACQUIRE, Skipped)],
        "+zcount" => vec![(&[SEM_SET, SEM_STATE, RW_STATE, RW_WRITE_STATE], Refused)],
        "+zrange" => vec![
            (&[FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
            (&[SEM_BUSY, SEM_WOKEN], Refused),
            (&[SEM_WAITER_RELEASE], Skipped),
            (RW_ACQUIRES, Refused),
            (AFTER_RW_ACQUIRES, Skipped),
        ],
        // ZRANGEBYSCORE: rw_state.lua, for the writer of a live write; the fair lock's
        // scripts, for the expired holds and waiters they drop.
        "+zrangebyscore" => vec![
            (&[RW_WRITE_STATE, FAIR_ACQUIRE], Refused),
            (&[FAIR_RELEASE], Skipped),
        ],
        "+zrem" => vec![(
            &[
                SEM_RELEASE,
                SEM_WAITER_RELEASE,
                RW_READ_RELEASE,
                RW_WRITE_RELEASE,
                FAIR_RELEASE,
            ],
            Refused,
        )],
        other => panic!(
            "no expectations for {other:?}: a new command in the rule; say here which \
             operations need it"
        ),
    };
    let mut map = BTreeMap::new();
    for (ops, expect) in groups {
        for op in ops {
            let previous = map.insert(*op, expect);
            assert!(previous.is_none(), "{permission}: {op} listed twice");
        }
    }
    map
}

/// Sets up `users` (name, rule) on a fresh server, runs every operation as each of them
/// (at once), then the EVAL check one user at a time. Returns the server, the outcomes
/// and `ACL LOG` by user.
async fn run_users(
    users: &[(String, Vec<&'static str>)],
) -> (
    RedisServer,
    BTreeMap<String, Vec<(&'static str, Outcome)>>,
    BTreeMap<String, BTreeSet<String>>,
) {
    let server = RedisServer::start_with(&["--acllog-max-len", "10000"]);
    let mut admin = server.conn().await;
    for (user, rule) in users {
        set_user(&mut admin, user, rule).await;
    }
    // A user with every permission runs everything once first, so that every script is
    // cached and the users' calls are EVALSHA.
    set_user(&mut admin, "warmup", &["~*", "&*", "+@all"]).await;
    let warmup = run_all(&server, &["warmup".to_owned()]).await;
    let failed: Vec<_> = warmup["warmup"]
        .iter()
        .filter(|(_, outcome)| *outcome != Outcome::Ok)
        .collect();
    assert!(failed.is_empty(), "with every permission: {failed:?}");
    let names: Vec<String> = users.iter().map(|(user, _)| user.clone()).collect();
    let mut all = run_all(&server, &names).await;
    for user in &names {
        let outcome = eval_after_flush(&server, &mut admin, user).await;
        all.get_mut(user).unwrap().push(outcome);
    }
    let mut log: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for ((user, object), _) in acl_log(&mut admin).await {
        log.entry(user).or_default().insert(object);
    }
    (server, all, log)
}

/// Each permission of the rule taken away: exactly the operations that need it fail,
/// with the typed ACL error (or as its direct consequence), none hangs, the rest work;
/// `ACL LOG` names that command and nothing else. With the whole rule everything works
/// and `ACL LOG` stays empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_permission_taken_away_fails_exactly_the_operations_that_need_it() {
    let started = Instant::now();
    let rule = whole_rule();
    let permissions: Vec<&'static str> = rule
        .iter()
        .copied()
        .filter(|r| r.starts_with('+'))
        .collect();
    let mut users = vec![("full".to_owned(), rule.clone())];
    for permission in &permissions {
        let without: Vec<&'static str> = rule.iter().copied().filter(|r| r != permission).collect();
        users.push((user_for(permission), without));
    }
    let (_server, all, log) = run_users(&users).await;
    println!("{}", table(&all));
    for (user, objects) in &log {
        println!("ACL LOG {user}: {objects:?}");
    }

    let mut wrong = Vec::new();
    let everything_ok = BTreeMap::new();
    for (user, permission) in std::iter::once(("full".to_owned(), None))
        .chain(permissions.iter().map(|p| (user_for(p), Some(*p))))
    {
        let expect = permission.map_or_else(|| everything_ok.clone(), expected);
        let results = &all[&user];
        let ran: BTreeSet<&str> = results.iter().map(|(op, _)| *op).collect();
        for op in expect.keys() {
            assert!(
                ran.contains(op),
                "{user}: expectation for an unknown op {op:?}"
            );
        }
        for (op, outcome) in results {
            let want = expect.get(op).copied().unwrap_or(Expect::Ok);
            if !fits(want, outcome) {
                wrong.push(format!("{user}: {op}: expected {want:?}, got {outcome:?}"));
            }
        }
        // ACL LOG: the missing command, and only it; nothing for the whole rule or for
        // a command nothing needs.
        let logged = log.get(&user).cloned().unwrap_or_default();
        let want: BTreeSet<String> = match permission {
            Some(p) => BTreeSet::from([format!("command:{}", p.trim_start_matches('+'))]),
            None => BTreeSet::new(),
        };
        if logged != want {
            wrong.push(format!("{user}: ACL LOG {logged:?}, expected {want:?}"));
        }
    }
    let strangers: Vec<&String> = log.keys().filter(|user| !all.contains_key(*user)).collect();
    if !strangers.is_empty() {
        wrong.push(format!("ACL LOG entries of other users: {strangers:?}"));
    }
    println!("took {:?}", started.elapsed());
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---- audit regressions ------------------------------------------------------------------

/// The rule the README documents ("Everything the library does") and `ACL_RULES`: every
/// operation works and `ACL LOG` stays empty. (It once lacked the sorted-set commands and
/// HDEL of the semaphore's scripts, which refused every semaphore operation.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_rule_covers_every_operation() {
    let users = vec![("documented".to_owned(), ACL_RULES.to_vec())];
    let (_server, all, log) = run_users(&users).await;
    println!("{}", table(&all));
    let failed: Vec<_> = all["documented"]
        .iter()
        .filter(|(_, outcome)| *outcome != Outcome::Ok)
        .collect();
    assert!(
        failed.is_empty(),
        "refused with the documented rule: {failed:#?}"
    );
    assert!(log.is_empty(), "ACL LOG: {log:?}");
}

async fn restricted(server: &RedisServer, user: &str) -> LockClient {
    LockClient::builder(&url(server, user, 0))
        .response_timeout(SEC)
        .connect()
        .await
        .unwrap()
}

/// A script that the ACL refuses half-way must write nothing: Redis does not roll back
/// a script's writes when a later command fails, so a refused command after a write
/// would leave the write in place while the caller is told the operation failed. It
/// once did:
/// * without PEXPIRE, a fresh acquire left a lock hash without an expiry (HSET ran),
///   which never frees and which every later acquire refuses as "not a lock". A fresh
///   hold is now a string written with its expiry by one SET, except a fenced one, still
///   a hash (HSET, then PEXPIRE); and a re-entry turns a string into a hash (DEL, HSET,
///   PEXPIRE): neither may leave a half-written lock, nor lose the string;
/// * without PUBLISH, a release (with a waiter) and force_unlock deleted the lock (DEL
///   ran) but reported failure, and the waiters were not woken;
/// * without HSET, a latch count-down counted (HINCRBY ran) but reported failure, so the
///   caller's retry counted twice.
///
/// The semaphore's, the read-write lock's and the fair lock's scripts are held to the
/// same: without PEXPIRE a first permit, read hold or fair-lock hold (fenced or not) is
/// refused and leaves nothing, without PUBLISH a release is refused and gives nothing
/// back. (The fair lock's scripts once left both behind: a fresh hold without an expiry,
/// and a hold given back by a release reported failed.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_refused_half_way_writes_nothing() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let rule = whole_rule();
    for removed in ["+pexpire", "+publish", "+hset", "+del"] {
        let without: Vec<&str> = rule.iter().copied().filter(|r| *r != removed).collect();
        set_user(&mut admin, &user_for(removed), &without).await;
    }
    let full = LockClient::connect(&server.url()).await.unwrap();
    let mut problems = Vec::new();

    // No PEXPIRE: the fenced fresh acquire (a hash: HSET, then PEXPIRE) is refused, and
    // must leave no key and no fencing counter.
    let client = restricted(&server, "no-pexpire").await;
    let lock = client.lock("stranded").unwrap().with_fencing();
    let refused = tokio::time::timeout(OP_LIMIT, lock.try_acquire())
        .await
        .unwrap();
    assert!(matches!(refused, Err(Error::Redis(_))), "{refused:?}");
    let pttl: i64 = admin.pttl(lock.key()).await.unwrap();
    let fence: bool = admin.exists(format!("{}:fence", lock.key())).await.unwrap();
    if pttl != -2 || fence {
        let later = full.lock("stranded").unwrap().try_acquire().await;
        problems.push(format!(
            "no-pexpire: the refused fenced acquire left {} (pttl {pttl}, fencing counter: \
             {fence}); a later acquire with every permission: {later:?}",
            lock.key()
        ));
    }

    // No PEXPIRE, no HSET, no DEL: a re-entry into a first hold (a string; DEL, HSET,
    // PEXPIRE, each checked before the first) is refused, and must leave the string as it
    // was, with its expiry.
    for user in ["no-pexpire", "no-hset", "no-del"] {
        let client = restricted(&server, user).await;
        let name = format!("reentered-{user}");
        let lock = client.lock(&name).unwrap();
        let guard = lock.try_acquire().await.unwrap().unwrap();
        let before: Vec<u8> = admin.get(lock.key()).await.unwrap();
        let refused = tokio::time::timeout(OP_LIMIT, guard.reenter())
            .await
            .unwrap();
        assert!(
            matches!(refused, Err(Error::Redis(_))),
            "{user}: {refused:?}"
        );
        let kind: String = redis::cmd("TYPE")
            .arg(lock.key())
            .query_async(&mut admin)
            .await
            .unwrap();
        let pttl: i64 = admin.pttl(lock.key()).await.unwrap();
        let after: Option<Vec<u8>> = if kind == "string" {
            admin.get(lock.key()).await.unwrap()
        } else {
            None
        };
        if after.as_ref() != Some(&before) || pttl <= 0 {
            problems.push(format!(
                "{user}: the refused re-entry left a {kind} (pttl {pttl}, value {after:?}), \
                 not the string {before:?}"
            ));
        }
        // The first hold is intact: its guard gives it back (but for the user without
        // DEL: then force_unlock, with every permission).
        if user == "no-del" {
            guard.detach();
            full.lock(&name).unwrap().force_unlock().await.unwrap();
        } else {
            guard.release().await.unwrap();
        }
    }

    // No PEXPIRE: a semaphore's and a read-write lock's first holds are refused, and must
    // leave no permit or hold behind.
    full.semaphore("sized")
        .unwrap()
        .set_permits(1)
        .await
        .unwrap();
    let semaphore = client.semaphore("sized").unwrap();
    let refused = tokio::time::timeout(OP_LIMIT, semaphore.try_acquire(1))
        .await
        .unwrap();
    assert!(matches!(refused, Err(Error::Redis(_))), "{refused:?}");
    let permits: i64 = admin.zcard(semaphore.permits_key()).await.unwrap();
    if permits != 0 {
        problems.push(format!(
            "no-pexpire: the refused semaphore acquire left {permits} permits"
        ));
    }
    let rw = client.rw_lock("read-stranded").unwrap();
    let refused = tokio::time::timeout(OP_LIMIT, rw.try_read()).await.unwrap();
    assert!(matches!(refused, Err(Error::Redis(_))), "{refused:?}");
    let reads: i64 = admin.zcard(rw.read_key()).await.unwrap();
    if reads != 0 {
        problems.push(format!(
            "no-pexpire: the refused read acquire left {reads} read holds"
        ));
    }
    // The fair lock's first hold, plain and fenced (whose token is checked before the
    // grant's writes): no hold and no fencing counter left.
    for fenced in [false, true] {
        let fair = client
            .fair_lock(&format!("fair-stranded-{fenced}"))
            .unwrap();
        let fair = if fenced { fair.with_fencing() } else { fair };
        let refused = tokio::time::timeout(OP_LIMIT, fair.try_acquire())
            .await
            .unwrap();
        assert!(matches!(refused, Err(Error::Redis(_))), "{refused:?}");
        let holds: i64 = admin.zcard(fair.key()).await.unwrap();
        let counter: bool = admin.exists(format!("{}:fence", fair.key())).await.unwrap();
        if holds != 0 || counter {
            problems.push(format!(
                "no-pexpire: the refused fair acquire (fenced: {fenced}) left {holds} holds \
                 (fencing counter: {counter})"
            ));
        }
    }

    // No PUBLISH: a release with a marked waiter, and force_unlock.
    let client = restricted(&server, "no-publish").await;
    let lock = client.lock("published").unwrap();
    let guard = lock.try_acquire().await.unwrap().unwrap();
    // A failed attempt by another owner marks the lock: the release will publish.
    assert!(
        full.lock("published")
            .unwrap()
            .try_acquire()
            .await
            .unwrap()
            .is_none()
    );
    let released = guard.release().await;
    let exists: bool = admin.exists(lock.key()).await.unwrap();
    if released.is_err() && !exists {
        problems.push(format!(
            "no-publish: release returned {released:?} but deleted the lock"
        ));
    }
    let held = full.lock("forced").unwrap().acquire().await.unwrap();
    let forced = client.lock("forced").unwrap().force_unlock().await;
    let exists: bool = admin.exists("redis-locks:{forced}").await.unwrap();
    if forced.is_err() && !exists {
        problems.push(format!(
            "no-publish: force_unlock returned {forced:?} but deleted the lock"
        ));
    }
    held.detach();
    // A semaphore's release (a permit given back wakes waiters), and a read-write lock's
    // (the last read leaving wakes writers).
    full.semaphore("given")
        .unwrap()
        .set_permits(1)
        .await
        .unwrap();
    let semaphore = client.semaphore("given").unwrap();
    let permit = semaphore.try_acquire(1).await.unwrap().unwrap();
    let released = permit.release().await;
    let permits: i64 = admin.zcard(semaphore.permits_key()).await.unwrap();
    if released.is_err() && permits != 1 {
        problems.push(format!(
            "no-publish: the semaphore release returned {released:?} but gave the permit back"
        ));
    }
    let rw = client.rw_lock("read-published").unwrap();
    let read = rw.try_read().await.unwrap().unwrap();
    let released = read.release().await;
    let reads: i64 = admin.zcard(rw.read_key()).await.unwrap();
    if released.is_err() && reads != 1 {
        problems.push(format!(
            "no-publish: the read release returned {released:?} but gave the hold back"
        ));
    }

    // A fair lock's release with a waiter queued: it wakes the head.
    let fair = client.fair_lock("fair-published").unwrap();
    let guard = tokio::time::timeout(OP_LIMIT, fair.try_acquire())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let queued = full.fair_lock("fair-published").unwrap();
    let waiter = tokio::spawn(async move { queued.try_acquire_for(30 * SEC).await });
    let queue_key = fair.queue_key().to_owned();
    let mut queue = 0;
    for _ in 0..500 {
        queue = admin.zcard(&queue_key).await.unwrap();
        if queue == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(queue, 1, "the waiter never queued");
    let released = tokio::time::timeout(OP_LIMIT, guard.release())
        .await
        .unwrap();
    assert!(matches!(released, Err(Error::Redis(_))), "{released:?}");
    let holds: i64 = admin.zcard(fair.key()).await.unwrap();
    if holds != 1 {
        problems.push(format!(
            "no-publish: the fair release returned {released:?} but gave the hold back"
        ));
    }
    // The waiter gets the lock once the hold is gone.
    if holds == 1 {
        let fair = full.fair_lock("fair-published").unwrap();
        assert!(fair.force_unlock().await.unwrap());
    }
    let woken = tokio::time::timeout(OP_LIMIT, waiter)
        .await
        .unwrap()
        .unwrap();
    woken.unwrap().unwrap().release().await.unwrap();

    // No HSET: a count-down from 2.
    let client = restricted(&server, "no-hset").await;
    assert!(
        full.latch("counted")
            .unwrap()
            .try_set_count(2)
            .await
            .unwrap()
    );
    let counted = client.latch("counted").unwrap().count_down().await;
    let left = full.latch("counted").unwrap().count().await.unwrap();
    if counted.is_err() && left != 2 {
        problems.push(format!(
            "no-hset: count_down returned {counted:?} but counted down (count {left})"
        ));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `CountDownLatch::count` reads with a plain TYPE + HGET pipeline. A refused HGET or
/// TYPE is `Error::Redis` naming the server, at once, as for every other operation. (A
/// refused HGET was once reported as `WrongType`, "a hash without a count", and a
/// refused TYPE retried for a response timeout, then `UnexpectedReply`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_count_refused_by_the_acl_is_a_permission_error() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let rule = whole_rule();
    let full = LockClient::connect(&server.url()).await.unwrap();
    assert!(
        full.latch("closed")
            .unwrap()
            .try_set_count(2)
            .await
            .unwrap()
    );
    let addr = format!("127.0.0.1:{}", server.port);
    let mut problems = Vec::new();
    for removed in ["+hget", "+type"] {
        let user = user_for(removed);
        let without: Vec<&str> = rule.iter().copied().filter(|r| *r != removed).collect();
        set_user(&mut admin, &user, &without).await;
        let client = restricted(&server, &user).await;
        let counted = tokio::time::timeout(OP_LIMIT, client.latch("closed").unwrap().count())
            .await
            .expect("count hung");
        match counted {
            Err(err) if matches!(judge(&err, &addr), Outcome::Refused(_)) => {}
            other => problems.push(format!("{user}: count() gave {other:?}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The Redisson-layout scripts, refused half-way. No documented rule covers their keys (a
/// Redisson lock is named by its name alone), so the user here may touch every key and
/// run every command but `PTTL`. A fresh read or write of the read-write lock once stayed
/// in a hash with no expiry (`HSET`/`HINCRBY` ran, then the `PTTL` was refused: a hold
/// that never frees), and a re-entry of the lock raised the owner's count; both behind an
/// error reply. Now each reads before its first write, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_scripts_refused_half_way_write_nothing() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    set_user(&mut admin, "no-pttl", &["~*", "&*", "+@all", "-pttl"]).await;
    let client = restricted(&server, "no-pttl").await;
    let mut problems = Vec::new();
    for side in ["write", "read"] {
        let name = format!("redisson-rw-{side}");
        let rw = client.redisson_rw_lock(&name).unwrap();
        let refused = match side {
            "write" => tokio::time::timeout(OP_LIMIT, rw.try_write()).await,
            _ => tokio::time::timeout(OP_LIMIT, rw.try_read()).await,
        }
        .unwrap()
        .map(|guard| guard.is_some());
        assert!(matches!(refused, Err(Error::Redis(_))), "{refused:?}");
        let left: bool = admin.exists(&name).await.unwrap();
        if left {
            let pttl: i64 = admin.pttl(&name).await.unwrap();
            problems.push(format!(
                "no-pttl: the refused Redisson {side} left the hash {name} (pttl {pttl})"
            ));
        }
    }
    // A fresh hold needs no PTTL (there is no hash yet); its re-entry reads the expiry.
    let lock = client.redisson_lock("redisson-reentered").unwrap();
    let guard = tokio::time::timeout(OP_LIMIT, lock.try_acquire())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let refused = tokio::time::timeout(OP_LIMIT, guard.reenter())
        .await
        .unwrap();
    assert!(matches!(refused, Err(Error::Redis(_))), "{refused:?}");
    let counts: Vec<i64> = admin.hvals("redisson-reentered").await.unwrap();
    if counts != [1] {
        problems.push(format!(
            "no-pttl: the refused Redisson re-entry left the counts {counts:?}, not [1]"
        ));
    }
    guard.detach();
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The watchdog's renewal scripts, refused half-way. A tick renews many holds in one
/// call; `renew.lua` once lengthened the holds ahead of the first one whose read the ACL
/// refused (a re-entered hold's `HGET`), and `redisson_renew.lua` ahead of the first
/// Redisson read hold (its timeout keys' `EXISTS`): holds lengthened behind a reply that
/// says the tick failed. Now each reads every hold before its first `PEXPIRE`. The user
/// loses the command after its holds are taken and renewed once (an ACL change reaches
/// open connections), so every hold has the same expiry then; after a refused tick, a
/// hold whose expiry moved past the others' was lengthened by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_refused_half_way_lengthen_nothing() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let mut problems = Vec::new();
    for (removed, layout) in [("-hget", "default"), ("-exists", "redisson")] {
        let user = format!("renewer-{layout}");
        set_user(&mut admin, &user, &["~*", "&*", "+@all"]).await;
        let client = LockClient::builder(&url(&server, &user, 0))
            .response_timeout(SEC)
            .watchdog_timeout(WATCHDOG)
            .connect()
            .await
            .unwrap();
        // One hold whose renewal the removal refuses, and 23 whose renewal passes: the
        // batch's order is the registry's (a hash map's), and only the holds ahead of the
        // refused one could be lengthened: the old scripts' defect shows unless the
        // refused hold comes first (one order in 24).
        // Kept until the check; dropped (released in the background) after it.
        let mut guards: Vec<Box<dyn std::any::Any + Send>> = Vec::new();
        let mut keys = Vec::new();
        for i in 0..24 {
            match (layout, i) {
                ("default", 0) => {
                    // A re-entered hold is a hash: its renewal reads it with HGET.
                    let nested = client.lock("renewed-nested").unwrap();
                    keys.push(nested.key().to_owned());
                    let outer = nested.acquire().await.unwrap();
                    let inner = outer.reenter().await.unwrap();
                    guards.push(Box::new(outer));
                    guards.push(Box::new(inner));
                }
                ("default", _) => {
                    let plain = client.lock(&format!("renewed-plain-{i}")).unwrap();
                    keys.push(plain.key().to_owned());
                    guards.push(Box::new(plain.acquire().await.unwrap()));
                }
                (_, 0) => {
                    // A read hold's renewal checks its timeout keys with EXISTS.
                    let rw = "renewed-redisson-rw".to_owned();
                    let read = client.redisson_rw_lock(&rw).unwrap().read().await.unwrap();
                    keys.push(rw);
                    guards.push(Box::new(read));
                }
                _ => {
                    let lock = format!("renewed-redisson-{i}");
                    let held = client
                        .redisson_lock(&lock)
                        .unwrap()
                        .acquire()
                        .await
                        .unwrap();
                    keys.push(lock);
                    guards.push(Box::new(held));
                }
            }
        }
        // One tick after the last acquire: every hold renewed by the same call.
        let ticks = client.watchdog_stats().ticks;
        let deadline = std::time::Instant::now() + OP_LIMIT;
        while client.watchdog_stats().ticks < ticks + 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "{user}: the watchdog did not tick twice"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let refused = client.watchdog_stats().refused_calls;
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&user)
            .arg(removed)
            .query_async(&mut admin)
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + OP_LIMIT;
        while client.watchdog_stats().refused_calls == refused {
            assert!(
                std::time::Instant::now() < deadline,
                "{user}: no renewal was refused"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.pttl(key);
        }
        let pttls: Vec<i64> = pipe.query_async(&mut admin).await.unwrap();
        let (least, most) = (
            pttls.iter().copied().min().unwrap(),
            pttls.iter().copied().max().unwrap(),
        );
        // The same expiry, set by one call: the PTTLs read by one pipeline differ by the
        // milliseconds between its replies; a renewal a tick later, by ~200 ms.
        if most - least > 50 {
            problems.push(format!(
                "{user} ({removed}): a refused tick lengthened holds: pttls {pttls:?}"
            ));
        }
        drop(guards);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every operation of the Redisson layout (the lock, the read-write lock, the latch) as
/// the user of `url`, on names of its own under `jobs:`, each bounded by `OP_LIMIT`.
/// `admin` (the default user) only watches subscriptions.
async fn redisson_scenario(
    url: String,
    addr: String,
    tag: String,
    mut admin: redis::aio::MultiplexedConnection,
) -> Vec<(&'static str, Outcome)> {
    let mut run = Run {
        addr,
        results: Vec::new(),
    };
    let connect = || {
        LockClient::builder(&url)
            .response_timeout(SEC)
            .watchdog_timeout(WATCHDOG)
            .connect()
    };
    let Some(holder) = run.step("redisson: connect", connect()).await else {
        return run.results;
    };
    let Some(waiter) = run
        .step("redisson: connect (a second client)", connect())
        .await
    else {
        return run.results;
    };
    let name = |what: &str| format!("jobs:{tag}:{what}");

    // The lock: a hold, its re-entry, what it reports, the releases.
    let lock = holder.redisson_lock(&name("lock")).unwrap();
    if let Some(Some(outer)) = run.step("redisson try_acquire", lock.try_acquire()).await {
        if let Some(inner) = run.step("redisson guard.reenter", outer.reenter()).await {
            let state = run.step("redisson state", lock.state()).await;
            run.demand(state.is_some_and(|s| s.is_locked()), || "not locked".into());
            run.step("redisson remaining_ttl", lock.remaining_ttl())
                .await;
            run.step("redisson release (nested)", inner.release()).await;
        }
        run.step("redisson release (last hold)", outer.release())
            .await;
    }

    // A waiter in another client, woken by the release.
    let handoff = holder.redisson_lock(&name("handoff")).unwrap();
    if let Some(Some(held)) = run
        .step(
            "redisson try_acquire (a waiter will wait)",
            handoff.try_acquire(),
        )
        .await
    {
        let waiting = waiter.redisson_lock(&name("handoff")).unwrap();
        let channel = waiting.channel().to_owned();
        let woken = tokio::spawn(async move { waiting.acquire_timeout(OP_LIMIT).await });
        await_numsub(&mut admin, &channel, 1, OP_LIMIT).await;
        run.step("redisson release (wakes the waiter)", held.release())
            .await;
        let joined = async { woken.await.expect("the waiter's task panicked") };
        if let Some(guard) = run
            .step("redisson waiter woken by the release", joined)
            .await
        {
            run.step("redisson release (the waiter's)", guard.release())
                .await;
        }
    }

    // Renewal by the watchdog, and a force-unlock.
    let renewed = holder.redisson_lock(&name("renewed")).unwrap();
    if let Some(guard) = run
        .step("redisson acquire (watchdog lease)", renewed.acquire())
        .await
    {
        tokio::time::sleep(3 * WATCHDOG).await;
        run.check(
            "redisson watchdog renews the lock",
            !guard.is_lost(),
            || format!("lost: {:?}", guard.lost_reason()),
        );
        run.step("redisson release (renewed)", guard.release())
            .await;
    }
    let forced = holder.redisson_lock(&name("forced")).unwrap();
    if let Some(guard) = run
        .step("redisson acquire (to force-unlock)", forced.acquire())
        .await
    {
        let unlocked = run
            .step("redisson force_unlock", forced.force_unlock())
            .await;
        run.demand(unlocked == Some(true), || "nothing unlocked".into());
        guard.detach();
    }

    // The read-write lock: reads (a re-entry, renewed by the watchdog), then a write.
    let rw = holder.redisson_rw_lock(&name("rw")).unwrap();
    if let Some(Some(read)) = run.step("redisson rw try_read", rw.try_read()).await {
        if let Some(again) = run.step("redisson rw read reenter", read.reenter()).await {
            tokio::time::sleep(3 * WATCHDOG).await;
            run.check(
                "redisson watchdog renews the reads",
                !read.is_lost() && !again.is_lost(),
                || format!("lost: {:?} {:?}", read.lost_reason(), again.lost_reason()),
            );
            let state = run.step("redisson rw state", rw.state()).await;
            run.demand(state.is_some(), || "no state".into());
            // Another owner's read beside them, given back first: its field goes alone.
            let beside = waiter.redisson_rw_lock(&name("rw")).unwrap();
            if let Some(Some(other)) = run
                .step("redisson rw try_read (another client)", beside.try_read())
                .await
            {
                run.step(
                    "redisson rw release (another client's read)",
                    other.release(),
                )
                .await;
            }
            run.step("redisson rw release (a read of two)", again.release())
                .await;
        }
        run.step("redisson rw release (the last read)", read.release())
            .await;
    }
    if let Some(Some(write)) = run.step("redisson rw try_write", rw.try_write()).await {
        run.step("redisson rw release (the write)", write.release())
            .await;
    }

    // The latch: set, read, a waiter in another client opened by the last count-down,
    // and a delete.
    let latch = holder.redisson_latch(&name("latch")).unwrap();
    let set = run
        .step("redisson latch try_set_count", latch.try_set_count(2))
        .await;
    run.demand(set == Some(true), || "not set".into());
    let counted = run.step("redisson latch count", latch.count()).await;
    run.demand(counted == Some(2), || format!("count {counted:?}"));
    let watching = waiter.redisson_latch(&name("latch")).unwrap();
    let opened = tokio::spawn(async move { watching.wait_for(OP_LIMIT).await });
    let first = run
        .step("redisson latch count_down", latch.count_down())
        .await;
    let last = run
        .step("redisson latch count_down (opens it)", latch.count_down())
        .await;
    if first.is_some() && last.is_some() {
        let joined = async { opened.await.expect("the latch waiter's task panicked") };
        let open = run.step("redisson latch waiter opened", joined).await;
        run.demand(open == Some(true), || "the waiter timed out".into());
    } else {
        // Not opened: the waiter would wait out its limit.
        opened.abort();
        run.skip(&["redisson latch waiter opened"]);
    }
    let reset = run
        .step(
            "redisson latch try_set_count (again)",
            latch.try_set_count(1),
        )
        .await;
    run.demand(reset == Some(true), || "not set".into());
    let deleted = run.step("redisson latch delete", latch.delete()).await;
    run.demand(deleted == Some(true), || "nothing deleted".into());
    run.results
}

/// The Redisson layout's least-privilege rule (`REDISSON_ACL_RULES`, shown in
/// docs/security.md): every operation of the Redisson lock, read-write lock and latch
/// works under it and `ACL LOG` stays empty; and each command its scripts call is needed:
/// taken away, some operation gets the ACL's typed refusal, and none hangs. (Which ones,
/// exactly, is not pinned down here as it is for the default layout; the connection and
/// waiting commands before them are the default rule's, with the same reasons.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redisson_layout_rule_is_enough_and_each_command_is_needed() {
    let server = RedisServer::start();
    let mut admin = server.conn().await;
    let addr = format!("127.0.0.1:{}", server.port);
    let needed: Vec<&str> = REDISSON_ACL_RULES
        .iter()
        .copied()
        .skip_while(|rule| *rule != "+type")
        .collect();
    let mut users = vec![("redisson-full".to_owned(), None)];
    for removed in &needed {
        users.push((format!("redisson-no-{}", &removed[1..]), Some(*removed)));
    }
    let mut runs = tokio::task::JoinSet::new();
    for (user, removed) in &users {
        let rule: Vec<&str> = REDISSON_ACL_RULES
            .iter()
            .copied()
            .filter(|rule| Some(*rule) != *removed)
            .collect();
        set_user(&mut admin, user, &rule).await;
        let scenario = redisson_scenario(
            url(&server, user, 0),
            addr.clone(),
            user.clone(),
            server.conn().await,
        );
        let user = user.clone();
        runs.spawn(async move { (user, scenario.await) });
    }
    let mut all = BTreeMap::new();
    while let Some(joined) = runs.join_next().await {
        let (user, outcomes) = joined.unwrap();
        all.insert(user, outcomes);
    }
    let mut problems = Vec::new();
    for (user, outcomes) in &all {
        let hung: Vec<&str> = outcomes
            .iter()
            .filter(|(_, outcome)| *outcome == Outcome::Hung)
            .map(|(name, _)| *name)
            .collect();
        if !hung.is_empty() {
            problems.push(format!("{user}: hung: {hung:?}"));
        }
        if user == "redisson-full" {
            for (name, outcome) in outcomes {
                if *outcome != Outcome::Ok {
                    problems.push(format!("{user}: {name}: {outcome:?}"));
                }
            }
        } else if !outcomes
            .iter()
            .any(|(_, outcome)| matches!(outcome, Outcome::Refused(_)))
        {
            problems.push(format!(
                "{user}: nothing was refused, so the command is not needed"
            ));
        }
    }
    let refused_full: Vec<_> = acl_log(&mut admin)
        .await
        .into_iter()
        .filter(|((user, _), _)| user == "redisson-full")
        .collect();
    if !refused_full.is_empty() {
        problems.push(format!("ACL LOG for the whole rule: {refused_full:?}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// docs/security.md shows both documented rules as the tests use them (the same rules,
/// in any order).
#[test]
fn the_documented_rules_are_the_tested_ones() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/security.md"))
        .expect("docs/security.md");
    for (user, rules) in [
        ("locker", ACL_RULES),
        ("redisson-locker", REDISSON_ACL_RULES),
    ] {
        let start = format!("ACL SETUSER {user} on >PASSWORD ");
        let shown: BTreeSet<&str> = docs
            .lines()
            .find_map(|line| line.strip_prefix(start.as_str()))
            .unwrap_or_else(|| panic!("docs/security.md shows no `{start}…` rule"))
            .split_whitespace()
            .collect();
        let tested: BTreeSet<&str> = rules.iter().copied().collect();
        assert_eq!(
            shown, tested,
            "docs/security.md's rule for {user} is not the tested one"
        );
    }
}
