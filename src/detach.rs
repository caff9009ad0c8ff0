//! Work that runs in the caller's task while the caller waits, and finishes in a background
//! task if the caller stops waiting (drops the future).
//!
//! Polling inline keeps the hot path free of a task spawn per operation; the move to the
//! background happens only on cancellation. An acquire attempt uses it so that a hold won
//! after the caller left is released at once; a release uses it so that a cancelled or
//! timed-out `release()` still gives the hold back exactly once.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::background::Background;
use crate::error::{Error, Result};

type Work<T> = Pin<Box<dyn Future<Output = Result<T>> + Send>>;

/// See the module documentation.
pub(crate) struct Detachable<T: Send + 'static> {
    work: Option<Work<T>>,
    started: bool,
    /// Whether work that was never polled must still run when dropped (a release must;
    /// an acquire attempt that was never sent need not).
    run_if_unstarted: bool,
    background: Arc<Background>,
    /// The client's runtime, for a drop outside any runtime.
    runtime: tokio::runtime::Handle,
}

impl<T: Send + 'static> Detachable<T> {
    /// `work`, moved to `background` on `runtime` (the client's) if its caller drops it.
    pub(crate) fn new(
        work: Work<T>,
        background: &Arc<Background>,
        runtime: &tokio::runtime::Handle,
        run_if_unstarted: bool,
    ) -> Self {
        Detachable {
            work: Some(work),
            started: false,
            run_if_unstarted,
            background: background.clone(),
            runtime: runtime.clone(),
        }
    }
}

impl<T: Send + 'static> Future for Detachable<T> {
    type Output = Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(work) = this.work.as_mut() else {
            return Poll::Ready(Err(Error::UnexpectedReply(
                "operation polled after completion".into(),
            )));
        };
        this.started = true;
        let outcome = work.as_mut().poll(cx);
        if outcome.is_ready() {
            this.work = None;
        }
        outcome
    }
}

impl<T: Send + 'static> Drop for Detachable<T> {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        if !self.started && !self.run_if_unstarted {
            return; // never sent
        }
        // The current runtime, or else the client's own.
        let runtime =
            tokio::runtime::Handle::try_current().unwrap_or_else(|_| self.runtime.clone());
        self.background.spawn(&runtime, async move {
            // A guard in an acquire's outcome releases its hold when dropped here.
            let _ = work.await;
        });
    }
}
