//! The signals that `run` catches and forwards: SIGINT, SIGTERM and SIGHUP.

use tokio::signal::unix::{Signal, SignalKind, signal};

/// Listeners for the forwarded signals. Once created, these signals no longer end the
/// process by default: whoever holds this must act on them.
pub struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

impl Signals {
    pub fn listen() -> std::io::Result<Self> {
        Ok(Signals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
            hangup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal's number.
    ///
    /// # Cancel safety
    /// Cancel-safe: a signal that arrives meanwhile is kept for the next call.
    pub async fn recv(&mut self) -> i32 {
        tokio::select! {
            Some(()) = self.interrupt.recv() => libc::SIGINT,
            Some(()) = self.terminate.recv() => libc::SIGTERM,
            Some(()) = self.hangup.recv() => libc::SIGHUP,
            else => std::future::pending().await,
        }
    }

    /// A signal that has already arrived and not been received yet, if any.
    pub async fn pending(&mut self) -> Option<i32> {
        tokio::select! {
            biased;
            signo = self.recv() => Some(signo),
            () = std::future::ready(()) => None,
        }
    }
}

/// `SIGTERM`-style name of a signal number, for messages.
pub fn name(signo: i32) -> String {
    let known = match signo {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        _ => return format!("signal {signo}"),
    };
    known.to_owned()
}

/// Sends `signo` to `target`, as kill(2) reads it: a pid, or minus a process group's id.
/// Returns whether it was delivered to at least one process (false once they are gone).
///
/// Callers signal only their own child, unreaped, or its process group while the group
/// cannot be gone (see `group::Group::signal`), so the id cannot have been reused by an
/// unrelated process.
pub fn send(target: libc::pid_t, signo: i32) -> bool {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe { libc::kill(target, signo) == 0 }
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
