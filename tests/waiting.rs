//! The one waiting loop (`src/waiting.rs`, deciding in `protocol::wait`) as every kind that
//! waits for a release runs it, against a real redis-server: the plain lock, both sides
//! of the read-write lock, the fair lock and the semaphore. Each test body loops over the
//! kinds, so a rule of the loop is checked on all of them at once:
//! * a zero wait is one attempt, which never queues or reserves;
//! * a waiter without limit rides out a Redis outage shorter than its tolerance;
//! * a waiter whose wait ran out gives back its place in the queue or its reservation.

mod common;

use std::time::Duration;

use common::{RedisServer, eventually};
use redis::AsyncCommands;
use redis_locks::{Error, FairGuard, LockClient, LockGuard, RwGuard, SemaphoreGuard};

const SEC: Duration = Duration::from_secs(1);
/// The watchdog lease of the clients that hold and of the plain waiters.
const WATCHDOG: Duration = Duration::from_secs(10);
/// A bound on how long anything that must end does take: liveness, not performance.
const LIVENESS: Duration = Duration::from_secs(20);

/// A kind that waits for a release, as a test drives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// The plain (reentrant) lock.
    Lock,
    /// The read side of the read-write lock (kept out by a writer).
    Read,
    /// The write side of the read-write lock (kept out by a reader).
    Write,
    /// The fair lock.
    Fair,
    /// The semaphore, with one permit, acquired one permit at a time.
    Semaphore,
}

const KINDS: [Kind; 5] = [
    Kind::Lock,
    Kind::Read,
    Kind::Write,
    Kind::Fair,
    Kind::Semaphore,
];

/// Whatever guard a kind's acquire gives.
#[derive(Debug)]
enum Guard {
    Lock(LockGuard),
    Rw(RwGuard),
    Fair(FairGuard),
    Permits(SemaphoreGuard),
}

impl Guard {
    async fn release(self) -> Result<(), Error> {
        match self {
            Guard::Lock(guard) => guard.release().await,
            Guard::Rw(guard) => guard.release().await,
            Guard::Fair(guard) => guard.release().await,
            Guard::Permits(guard) => guard.release().await,
        }
    }
}

impl Kind {
    /// A lock name of its own for this kind in the test `test`.
    fn name(self, test: &str) -> String {
        format!("{test}-{self:?}")
    }

    /// What must exist before anyone can acquire: the semaphore's single permit.
    async fn prepare(self, client: &LockClient, name: &str) {
        if self == Kind::Semaphore {
            client
                .semaphore(name)
                .unwrap()
                .set_permits(1)
                .await
                .unwrap();
        }
    }

    /// Takes, for an owner of its own, what keeps this kind's acquirer out: the lock, a
    /// write hold (against a reader), a read hold (against a writer), the one permit.
    /// `lease`: a fixed lease, else the watchdog's.
    async fn hold(self, client: &LockClient, name: &str, lease: Option<Duration>) -> Guard {
        match self {
            Kind::Lock => {
                let mut lock = client.lock(name).unwrap();
                if let Some(lease) = lease {
                    lock = lock.with_lease(lease).unwrap();
                }
                Guard::Lock(lock.acquire().await.unwrap())
            }
            Kind::Read | Kind::Write => {
                let mut rw = client.rw_lock(name).unwrap();
                if let Some(lease) = lease {
                    rw = rw.with_lease(lease).unwrap();
                }
                let held = if self == Kind::Read {
                    rw.write().await
                } else {
                    rw.read().await
                };
                Guard::Rw(held.unwrap())
            }
            Kind::Fair => {
                let mut fair = client.fair_lock(name).unwrap();
                if let Some(lease) = lease {
                    fair = fair.with_lease(lease).unwrap();
                }
                Guard::Fair(fair.acquire().await.unwrap())
            }
            Kind::Semaphore => {
                let mut semaphore = client.semaphore(name).unwrap();
                if let Some(lease) = lease {
                    semaphore = semaphore.with_lease(lease).unwrap();
                }
                Guard::Permits(semaphore.acquire(1).await.unwrap())
            }
        }
    }

    /// This kind's acquire, for a fresh owner, waiting at most `wait` (`None`: the
    /// acquire without limit, whose guard is returned as `Some`).
    async fn acquire(
        self,
        client: &LockClient,
        name: &str,
        wait: Option<Duration>,
    ) -> Result<Option<Guard>, Error> {
        Ok(match self {
            Kind::Lock => {
                let lock = client.lock(name)?;
                match wait {
                    Some(wait) => lock.try_acquire_for(wait).await?.map(Guard::Lock),
                    None => Some(Guard::Lock(lock.acquire().await?)),
                }
            }
            Kind::Read => {
                let rw = client.rw_lock(name)?;
                match wait {
                    Some(wait) => rw.try_read_for(wait).await?.map(Guard::Rw),
                    None => Some(Guard::Rw(rw.read().await?)),
                }
            }
            Kind::Write => {
                let rw = client.rw_lock(name)?;
                match wait {
                    Some(wait) => rw.try_write_for(wait).await?.map(Guard::Rw),
                    None => Some(Guard::Rw(rw.write().await?)),
                }
            }
            Kind::Fair => {
                let fair = client.fair_lock(name)?;
                match wait {
                    Some(wait) => fair.try_acquire_for(wait).await?.map(Guard::Fair),
                    None => Some(Guard::Fair(fair.acquire().await?)),
                }
            }
            Kind::Semaphore => {
                let semaphore = client.semaphore(name)?;
                match wait {
                    Some(wait) => semaphore
                        .try_acquire_for(1, wait)
                        .await?
                        .map(Guard::Permits),
                    None => Some(Guard::Permits(semaphore.acquire(1).await?)),
                }
            }
        })
    }

    /// Whether a waiter has a place in the kind's queue or a reservation now: a fair
    /// lock's queue, a writer's reservation against new readers, a semaphore's reserved
    /// permits. The plain lock and the read side keep nothing for a waiter: never.
    async fn queued(self, client: &LockClient, name: &str) -> bool {
        match self {
            Kind::Lock | Kind::Read => false,
            Kind::Write => {
                let rw = client.rw_lock(name).unwrap();
                rw.state().await.unwrap().writer_waiting
            }
            Kind::Fair => {
                let fair = client.fair_lock(name).unwrap();
                fair.state().await.unwrap().waiters > 0
            }
            Kind::Semaphore => {
                let semaphore = client.semaphore(name).unwrap();
                semaphore.state().await.unwrap().reserved > 0
            }
        }
    }
}

/// Takes `name` with one attempt (a zero wait) from `client`, which must succeed, and
/// gives it back.
async fn takes_at_once(kind: Kind, client: &LockClient, name: &str, what: &str) {
    match kind.acquire(client, name, Some(Duration::ZERO)).await {
        Ok(Some(guard)) => guard.release().await.unwrap(),
        other => panic!("{kind:?}: {what}: one attempt should get it, got {other:?}"),
    }
}

/// A zero wait is exactly one attempt on every kind: it takes what is free, it is
/// refused (`Ok(None)`, not an error) by another owner's hold, and being refused it leaves
/// nothing behind: no place in the fair queue, no reservation of a writer or of semaphore
/// permits, so that a newcomer's own single attempt gets the lock (or the permit) as soon
/// as the holder lets go. A wait too long to express (`Duration::MAX`) is
/// `Error::InvalidDuration` on every kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_wait_tries_once_on_every_kind() {
    let server = RedisServer::start();
    let holder = server.client(WATCHDOG).await;
    let tryer = server.client(WATCHDOG).await;
    let newcomer = server.client(WATCHDOG).await;
    for kind in KINDS {
        let name = kind.name("zero");
        kind.prepare(&holder, &name).await;

        takes_at_once(kind, &tryer, &name, "while it is free").await;

        let hold = kind.hold(&holder, &name, None).await;
        let refused = kind.acquire(&tryer, &name, Some(Duration::ZERO)).await;
        assert!(
            matches!(refused, Ok(None)),
            "{kind:?}: a zero wait while another holds should be Ok(None), got {refused:?}"
        );
        // Checked at once: a single attempt must not queue or reserve in the first place
        // (not queue and give back later).
        assert!(
            !kind.queued(&holder, &name).await,
            "{kind:?}: a single attempt left a place in the queue or a reservation"
        );
        hold.release().await.unwrap();

        takes_at_once(
            kind,
            &newcomer,
            &name,
            "a newcomer once the holder let go (nothing kept for the refused attempt)",
        )
        .await;

        let invalid = kind.acquire(&tryer, &name, Some(Duration::MAX)).await;
        assert!(
            matches!(invalid, Err(Error::InvalidDuration { .. })),
            "{kind:?}: a wait of Duration::MAX should be InvalidDuration, got {invalid:?}"
        );
    }
}

/// A waiter without limit, of every kind, rides out a Redis outage shorter than its
/// outage tolerance (max(watchdog timeout, response timeout) = 4 s here) and ends with a
/// guard, not an error: the server is killed while each kind's waiter waits behind a
/// holder, kept down for 1 s (five response timeouts: every attempt meanwhile fails),
/// and started again on the same port. Two rounds: the server comes back with its data
/// (saved before the kill: the holds, the queue and the semaphore's size are there again,
/// and the waiters go on waiting until the holders' leases end), then empty (the holds are
/// gone and the waiters are granted at their next attempt). The semaphore is left out of
/// the empty round: its size would be gone too, and its waiter's first attempt after the
/// restart could come before the test set it again (then an `InvalidConfig` for "no size
/// set" would be the right answer, and the test would be racy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_of_every_kind_rides_out_a_short_outage() {
    /// The holders' fixed lease: it ends after the restart (the kill comes well within
    /// it), so with the data kept the waiters wait again after the outage.
    const HOLDER_LEASE: Duration = Duration::from_secs(3);
    /// How long the server stays down.
    const DOWN: Duration = Duration::from_secs(1);
    let mut server = RedisServer::start();
    for keeps_data in [true, false] {
        let round = if keeps_data { "kept" } else { "empty" };
        let kinds: Vec<Kind> = KINDS
            .into_iter()
            .filter(|kind| keeps_data || *kind != Kind::Semaphore)
            .collect();
        let holder = server.client(WATCHDOG).await;
        let waiter = LockClient::builder(&server.url())
            .watchdog_timeout(4 * SEC)
            .response_timeout(Duration::from_millis(200))
            .connect()
            .await
            .unwrap();

        let mut holds = Vec::new();
        for &kind in &kinds {
            let name = kind.name(&format!("outage-{round}"));
            kind.prepare(&holder, &name).await;
            holds.push(kind.hold(&holder, &name, Some(HOLDER_LEASE)).await);
        }
        let waiting: Vec<_> = kinds
            .iter()
            .map(|&kind| {
                let waiter = waiter.clone();
                let name = kind.name(&format!("outage-{round}"));
                tokio::spawn(async move { kind.acquire(&waiter, &name, None).await })
            })
            .collect();

        // Only a waiter rides out errors (a first attempt fails fast): each must have been
        // refused once before the kill. Each subscribes (the read side before its first
        // attempt, the others after their first refusal); the queue and the reservations
        // show too; the pause lets the read side's first attempt come back.
        assert!(
            eventually(10 * SEC, || async {
                waiter.waiting_channels() == kinds.len()
            })
            .await,
            "{round}: the waiters did not all subscribe: {} channels",
            waiter.waiting_channels()
        );
        for &kind in &kinds {
            if matches!(kind, Kind::Write | Kind::Fair | Kind::Semaphore) {
                let name = kind.name(&format!("outage-{round}"));
                assert!(
                    eventually(10 * SEC, || kind.queued(&holder, &name)).await,
                    "{kind:?} ({round}): the waiter never queued or reserved"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        for (kind, task) in kinds.iter().zip(&waiting) {
            assert!(
                !task.is_finished(),
                "{kind:?} ({round}): the waiter ended while the holder held"
            );
        }

        if keeps_data {
            let _: () = redis::cmd("SAVE")
                .query_async(&mut server.conn().await)
                .await
                .unwrap();
        }
        server.kill();
        tokio::time::sleep(DOWN).await;
        tokio::task::block_in_place(|| server.restart());
        if keeps_data {
            // The premise of this round: the server came back with its data.
            let semaphore = waiter
                .semaphore(&Kind::Semaphore.name("outage-kept"))
                .unwrap();
            let size: Option<u64> = server
                .conn()
                .await
                .hget(semaphore.key(), "size")
                .await
                .unwrap();
            assert_eq!(size, Some(1), "the restarted server did not load its data");
        }

        for (kind, task) in kinds.iter().zip(waiting) {
            let outcome = tokio::time::timeout(LIVENESS, task)
                .await
                .unwrap_or_else(|_| {
                    panic!("{kind:?} ({round}): still waiting {LIVENESS:?} after the restart")
                })
                .unwrap();
            let guard = match outcome {
                Ok(Some(guard)) => guard,
                other => panic!(
                    "{kind:?} ({round}): the waiter should ride out the outage and get a \
                     guard, got {other:?}"
                ),
            };
            guard.release().await.unwrap_or_else(|err| {
                panic!("{kind:?} ({round}): releasing the waiter's guard: {err:?}")
            });
        }
        // The holders' holds ended with their lease (or the restart): their release only
        // reports that.
        for hold in holds {
            let _ = hold.release().await;
        }
    }
}

/// A waiter of a kind that queues or reserves (the fair lock's queue, the write side's
/// reservation against new readers, the semaphore's reserved permits) whose wait runs out
/// gets `Ok(None)` and gives its place back: the queue is empty and nothing is reserved
/// soon after (the give-back runs in the background), well before the place would have
/// expired by itself, and a newcomer's single attempt gets the lock or the permit as soon
/// as the holder lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_waiter_leaves_nothing_behind() {
    /// The waiter's wait: long enough for the test to see it queued meanwhile.
    const WAIT: Duration = Duration::from_secs(1);
    /// How soon the place must be gone once the wait ran out: a place not given back would
    /// outlive this, as each lasts 2 s (a reservation) or 3 s (a place in the fair queue)
    /// after the waiter's last attempt, which it makes at the end of its wait.
    const GIVE_BACK: Duration = Duration::from_secs(1);
    let server = RedisServer::start();
    let holder = server.client(WATCHDOG).await;
    let waiter = server.client(WATCHDOG).await;
    let newcomer = server.client(WATCHDOG).await;
    for kind in [Kind::Write, Kind::Fair, Kind::Semaphore] {
        let name = kind.name("timed-out");
        kind.prepare(&holder, &name).await;
        let hold = kind.hold(&holder, &name, None).await;

        let waiting = {
            let waiter = waiter.clone();
            let name = name.clone();
            tokio::spawn(async move { kind.acquire(&waiter, &name, Some(WAIT)).await })
        };
        // It does queue or reserve while it waits (else what follows would prove nothing).
        assert!(
            eventually(WAIT, || kind.queued(&holder, &name)).await,
            "{kind:?}: the waiter never queued or reserved"
        );
        let outcome = tokio::time::timeout(LIVENESS, waiting)
            .await
            .expect("a bounded wait ended")
            .unwrap();
        assert!(
            matches!(outcome, Ok(None)),
            "{kind:?}: a wait that ran out while another held should be Ok(None), got \
             {outcome:?}"
        );

        waiter.flush().await;
        assert!(
            eventually(GIVE_BACK, || async { !kind.queued(&holder, &name).await }).await,
            "{kind:?}: the timed-out waiter's place in the queue or its reservation is \
             still there"
        );
        hold.release().await.unwrap();
        takes_at_once(
            kind,
            &newcomer,
            &name,
            "a newcomer once the holder let go (nothing kept for the timed-out waiter)",
        )
        .await;
    }
}
