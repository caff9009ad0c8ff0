//! Waiting on several futures in one task, without spawning one per future: the
//! multi-lock and RedLock talk to N locks at once on every acquire and release, and a
//! task per call cost more than the calls' own client work (`./scripts/bench.sh
//! --scenario R1`).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

/// Runs every future to completion, concurrently in the caller's task; outputs in input
/// order.
pub(crate) async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut open = false;
        for (slot, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => {
                        *output = Some(value);
                        *slot = None;
                    }
                    Poll::Pending => open = true,
                }
            }
        }
        if open { Poll::Pending } else { Poll::Ready(()) }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

/// Resolves once `needed` of `futures` have completed (at once if `needed` is 0, never if
/// it is more than there are).
pub(crate) async fn first_n<F: Future>(futures: Vec<F>, needed: usize) {
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut done = 0;
    std::future::poll_fn(|cx| {
        for slot in pending.iter_mut() {
            if slot
                .as_mut()
                .is_some_and(|future| future.as_mut().poll(cx).is_ready())
            {
                *slot = None;
                done += 1;
            }
        }
        if done >= needed {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}

/// Runs the futures concurrently until all are done, or, once `enough(&outputs)` holds,
/// for `grace(took)` more (`took`: the time until then), then drops those still running
/// (`None` in their slot). For a RedLock attempt: once a majority granted, a stalled
/// server must not hold up every acquire for its whole timeout (the core decides both).
pub(crate) async fn join_until<F, E, G>(
    futures: Vec<F>,
    enough: E,
    grace: G,
) -> Vec<Option<F::Output>>
where
    F: Future,
    E: Fn(&[Option<F::Output>]) -> bool,
    G: Fn(std::time::Duration) -> std::time::Duration,
{
    let started = tokio::time::Instant::now();
    let mut pending: Vec<Option<Pin<Box<F>>>> =
        futures.into_iter().map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    let mut extra: Option<Pin<Box<tokio::time::Sleep>>> = None;
    std::future::poll_fn(|cx| {
        let mut open = false;
        for (slot, output) in pending.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => {
                        *output = Some(value);
                        *slot = None;
                    }
                    Poll::Pending => open = true,
                }
            }
        }
        if !open {
            return Poll::Ready(());
        }
        if extra.is_none() && enough(&outputs) {
            let more = grace(started.elapsed());
            extra = Some(Box::pin(tokio::time::sleep(more)));
        }
        match extra.as_mut() {
            Some(sleep) => sleep.as_mut().poll(cx),
            None => Poll::Pending,
        }
    })
    .await;
    outputs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn outputs_keep_the_input_order_and_first_n_counts() {
        let sleeps = [30u64, 10, 20];
        let out = join_all(
            sleeps
                .iter()
                .map(|ms| async move {
                    tokio::time::sleep(std::time::Duration::from_millis(*ms)).await;
                    *ms
                })
                .collect(),
        )
        .await;
        assert_eq!(out, vec![30, 10, 20]);
        let started = std::time::Instant::now();
        first_n(
            sleeps
                .iter()
                .map(|ms| tokio::time::sleep(std::time::Duration::from_millis(*ms * 10)))
                .collect(),
            2,
        )
        .await;
        let took = started.elapsed();
        assert!(took >= std::time::Duration::from_millis(200), "{took:?}");
    }
}
