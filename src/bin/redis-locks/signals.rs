//! The signals that `run` catches and forwards: SIGINT, SIGTERM and SIGHUP, and how each
//! was sent.
//!
//! tokio's listeners wake `run`; beside them, a small handler of our own records from the
//! signal's `siginfo_t` whether the kernel sent it (`SI_KERNEL`, Linux) or a process did
//! (kill(2)). Both are registered through `signal-hook-registry`, the crate tokio itself
//! installs its handlers with, which runs every action registered for a signal, in
//! registration order: ours is registered first, so its record is written before tokio
//! is woken. The kernel sends SIGINT (Ctrl-C), SIGQUIT and SIGHUP (hang-up) from a
//! terminal to the whole foreground process group: when the command shares
//! `redis-locks`'s group (`--no-process-group`), it got the signal itself, and `run` does
//! not send it a second time.

use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc;
use nix::sys::signal::Signal;
use tokio::signal::unix::{SignalKind, signal};

/// The signals forwarded to the command.
const FORWARDED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// Per signal number: one was sent by the kernel, or by a process, since the last look.
static BY_KERNEL: [AtomicBool; 32] = [const { AtomicBool::new(false) }; 32];
static BY_PROCESS: [AtomicBool; 32] = [const { AtomicBool::new(false) }; 32];

/// A signal `redis-locks` got.
#[derive(Debug, Clone, Copy)]
pub struct Received {
    pub signal: Signal,
    /// Sent by the kernel alone (Linux: a terminal's Ctrl-C, Ctrl-\ or hang-up, which
    /// reach the whole foreground process group), not by kill(2). Always false on other
    /// platforms.
    pub by_kernel: bool,
}

/// Listeners for the forwarded signals. Once created, these signals no longer end the
/// process by default: whoever holds this must act on them.
pub struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
    hangup: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn listen() -> std::io::Result<Self> {
        for forwarded in FORWARDED {
            let index = forwarded as usize;
            // SAFETY: the action only stores to static atomics, which is
            // async-signal-safe, and reads the `siginfo_t` the kernel passed.
            unsafe {
                signal_hook_registry::register_sigaction(forwarded as libc::c_int, move |info| {
                    let flag = if sent_by_kernel(info) {
                        &BY_KERNEL[index]
                    } else {
                        &BY_PROCESS[index]
                    };
                    flag.store(true, Ordering::SeqCst);
                })?;
            }
        }
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal.
    ///
    /// # Cancel safety
    /// Cancel-safe: a signal that arrives meanwhile is kept for the next call.
    pub async fn recv(&mut self) -> Received {
        let signal = tokio::select! {
            Some(()) = self.interrupt.recv() => Signal::SIGINT,
            Some(()) = self.terminate.recv() => Signal::SIGTERM,
            Some(()) = self.hangup.recv() => Signal::SIGHUP,
            else => std::future::pending().await,
        };
        // Several signals of one kind may have come together (tokio wakes once for them):
        // when any was sent by a process, it is to be passed on.
        let by_process = BY_PROCESS[signal as usize].swap(false, Ordering::SeqCst);
        let by_kernel = BY_KERNEL[signal as usize].swap(false, Ordering::SeqCst);
        Received {
            signal,
            by_kernel: by_kernel && !by_process,
        }
    }

    /// A signal that has already arrived and not been received yet, if any.
    pub async fn pending(&mut self) -> Option<Received> {
        tokio::select! {
            biased;
            received = self.recv() => Some(received),
            () = std::future::ready(()) => None,
        }
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn sent_by_kernel(info: &libc::siginfo_t) -> bool {
    info.si_code == libc::SI_KERNEL
}

/// Elsewhere no `siginfo_t` code is known to mark a terminal's signals: every signal is
/// taken as sent by a process, and forwarded.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn sent_by_kernel(_info: &libc::siginfo_t) -> bool {
    false
}

/// `SIGTERM`-style name of a signal number, for messages.
pub fn name(signo: i32) -> String {
    Signal::try_from(signo).map_or_else(|_| format!("signal {signo}"), |s| s.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(name(libc::SIGTERM), "SIGTERM");
        assert_eq!(name(libc::SIGKILL), "SIGKILL");
        assert_eq!(name(99), "signal 99");
    }
}
