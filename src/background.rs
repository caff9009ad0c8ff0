//! Work a client runs in the background (releases of dropped guards, acquire attempts
//! whose caller left), counted so that `LockClient::flush` can wait for it, and the notice
//! when such a release never ran (the runtime shut down first).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// Counts background work (releases of dropped guards, acquire attempts whose caller
/// left) so that [`LockClient::flush`] can wait for it.
#[derive(Debug, Default)]
pub(crate) struct Background {
    running: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

impl Background {
    /// Spawns `work` on `runtime`, counted until it finishes (or is dropped by a runtime
    /// shutdown).
    pub(crate) fn spawn<F>(self: &Arc<Self>, runtime: &tokio::runtime::Handle, work: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        struct Done(Arc<Background>);
        impl Drop for Done {
            fn drop(&mut self) {
                if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.0.idle.notify_waiters();
                }
            }
        }
        self.running.fetch_add(1, Ordering::AcqRel);
        let done = Done(self.clone());
        runtime.spawn(async move {
            let _done = done;
            work.await;
        });
    }

    pub(crate) async fn idle(&self) {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self.running.load(Ordering::Acquire) == 0 {
                return;
            }
            idle.await;
        }
    }
}

/// A dropped guard's background release, until it has run (every kind's guard): if the
/// runtime drops the task unrun, it says so.
pub(crate) struct Unreleased {
    /// The lock's name while the release has not run.
    name: Option<String>,
    lease_left: Duration,
}

impl Unreleased {
    pub(crate) fn new(name: &str, lease_left: Duration) -> Unreleased {
        Unreleased {
            name: Some(name.to_owned()),
            lease_left,
        }
    }

    pub(crate) fn ran(&mut self) {
        self.name = None;
    }
}

impl Drop for Unreleased {
    fn drop(&mut self) {
        if let Some(name) = &self.name {
            unreleased(
                name,
                self.lease_left,
                "the runtime shut down before the dropped guard's release ran; await \
                 `client.flush()` (or release the guard) before leaving `main` or shutting \
                 the runtime down",
            );
        }
    }
}

/// A hold that will not be given back: it stays in Redis until its lease runs out, and
/// everyone else waits for it. Logged at error level; printed to stderr too when no
/// `tracing` subscriber would show it, because nobody would learn of it otherwise.
fn unreleased(name: &str, lease_left: Duration, why: &str) {
    tracing::error!(lock = name, ?lease_left, "lock not released: {why}");
    let silent = tracing::dispatcher::get_default(|dispatch| {
        dispatch.is::<tracing::subscriber::NoSubscriber>()
    });
    if silent {
        eprintln!(
            "redis-locks: lock {name:?} was not released: {why}. It stays held until its \
             lease runs out, up to {lease_left:?} from now."
        );
    }
}
