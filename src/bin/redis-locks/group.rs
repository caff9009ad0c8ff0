//! The command's process group, and what keeps it from outliving `redis-locks`.
//!
//! Two modes, chosen by `run --process-group` (the default on Linux) and
//! `--no-process-group` (the only mode elsewhere).
//!
//! # `--process-group` (Linux only)
//!
//! The command runs in a process group of its own (it is the group's leader, so the
//! group's id is its pid), and everything it starts stays in that group unless it moves
//! itself to another group or session (`setsid`, a job-control shell's own jobs, daemons).
//! The group is what `redis-locks` signals: forwarded signals, SIGTERM then SIGKILL when
//! the lock is lost, and whatever the command left behind when it exits. That way nothing
//! of the command runs on after the lock is released or lost.
//!
//! When `redis-locks` itself dies, even by SIGKILL, the group is killed too:
//!
//! * the command has `PR_SET_PDEATHSIG` = SIGKILL, so the kernel kills it when
//!   `redis-locks` dies (checked against the race with a death before the `prctl`);
//! * `PR_SET_PDEATHSIG` only covers the direct child, so a *watcher* process covers the
//!   rest of the group. It blocks in `read(2)` on a pipe whose only write end
//!   `redis-locks` holds. End of file means `redis-locks` is gone (the kernel closes the
//!   descriptors of a process however it dies), and the watcher sends SIGKILL to the
//!   command's group. When `redis-locks` has itself dealt with the group (the command
//!   exited and the group was emptied), it writes one byte instead, and the watcher exits
//!   without killing anything.
//!
//! The watcher is forked from the command's own process, between `fork` and `exec`
//! (there, only async-signal-safe calls), and forked twice so that it is nobody's child:
//! not `redis-locks`'s, where it would be a zombie nobody waits for, and not the
//! command's, which may wait for all of its children (`while wait(NULL) > 0`) and would
//! then wait forever for a watcher that waits for `redis-locks`. It is reparented to init
//! (or the nearest subreaper), which reaps it. Starting it from the command before `exec`
//! leaves no window: the command does not run before the watcher exists. The pid that
//! `redis-locks` waits for stays the command's, so its exit status is reported as before.
//!
//! The watcher sits in a process group of its own, not in the command's: signals meant for
//! the command's group must not stop it, and `kill(-pgid, 0)` failing with ESRCH then
//! tells that the command's group is empty. It keeps no descriptor but the pipe (and, with
//! a terminal, the terminal): its stdio is `/dev/null`, so it never holds a pipe that
//! someone reads the command's output from.
//!
//! Designs not taken: `PR_SET_CHILD_SUBREAPER` on `redis-locks` collects orphans only while
//! `redis-locks` lives; a cgroup needs privileges or a service manager; a watcher that is
//! the command's parent would hide the command's exit status.
//!
//! ## The terminal
//!
//! A process group of its own would make the command a background job of the terminal:
//! reading it, or changing its modes, stops a background job with SIGTTIN or SIGTTOU. So
//! when `redis-locks` is in the foreground of its terminal, it hands the terminal to the
//! command's group before the command starts, unless other processes of its own job could
//! need it (`redis-locks run ... | less`: only ancestors waiting for `redis-locks` may share
//! its group). Otherwise the hand-over happens when the command is stopped that way, as
//! soon as `redis-locks` is in the foreground. When the command exits, `redis-locks` takes
//! the terminal back (and the watcher does, if `redis-locks` died while the command had
//! it). Ctrl-C then reaches the command's group from the terminal alone (`redis-locks`, in
//! another group, gets none to forward), or, before a hand-over, reaches `redis-locks`,
//! which forwards it: once either way. Ctrl-Z (SIGTSTP) suspends the command's group and
//! `redis-locks` together, as it did when they shared a group; when continued (`fg`, `bg`),
//! `redis-locks` continues the command. If `redis-locks` is a background job, a command
//! that needs the terminal stops the job, as a shell would show it ("Stopped (tty
//! input)"). A suspended `redis-locks` does not renew the lock.
//!
//! # `--no-process-group`
//!
//! The command runs in `redis-locks`'s own process group, and forwarded signals and the
//! stop on a lost lock go to the command's process only, not to processes it starts.
//! Nothing is looked for after the command exits: what it left running goes on after the
//! release. On Linux the command still has `PR_SET_PDEATHSIG` = SIGKILL, so the kernel kills
//! the command (only) when `redis-locks` dies; there is no watcher. Elsewhere nothing
//! kills the command if `redis-locks` dies: it keeps running, unprotected once the lock
//! expires, and signals are forwarded only while `redis-locks` lives.
//!
//! Sharing the group, the command shares the terminal as any job's member does (no
//! hand-over; Ctrl-Z stops both). A terminal's Ctrl-C, Ctrl-\ or hang-up reaches it
//! directly, so `run` does not forward a signal that the kernel sent while the command is
//! in its group (Linux tells that from `siginfo_t`, see `crate::signals`): Ctrl-C reaches
//! the command once. A signal sent to the whole group with kill(2) (`kill -INT -PGID`)
//! cannot be told from one sent to `redis-locks` alone, and reaches the command twice.
//!
//! # Why `nix`
//!
//! The system calls go through `nix` rather than raw `libc`: typed `Pid` and `Signal`,
//! errors as `Result`. Measured against the `libc` version: 10 `unsafe` blocks instead of
//! 17, each around one call where `in_child`, `start_watcher` and `watch` were one block
//! each; 6 `libc::` paths instead of 104; 472 lines of code instead of 477, with the
//! shared-group mode added. The wrappers used between `fork` and `exec` are thin: each
//! makes one system call on integers, borrowed descriptors or a `&CStr`, and allocates
//! nothing. Still raw `libc`: `_exit` and `close_range`, which `nix` 0.31 does not wrap.

use nix::sys::signal::Signal;
use nix::unistd::Pid;

pub use imp::{Group, prepare};

/// Where the command runs: see the module's documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `--process-group`: a process group of its own, signalled as a whole (Linux only).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    OwnGroup,
    /// `--no-process-group`: `redis-locks`'s process group; its own process is signalled.
    SharedGroup,
}

/// Something for [`Group::handle`] to act on: job control on a terminal.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub enum Event {
    /// The command was stopped by this signal.
    CommandStopped(Signal),
    /// `redis-locks` got SIGTSTP: suspend the command and ourselves.
    Suspend,
    /// `redis-locks` got SIGCONT.
    Continued,
}

/// Whether `pid` is in our own process group (false once it is gone).
fn in_our_group(pid: Pid) -> bool {
    nix::unistd::getpgid(Some(pid)) == Ok(nix::unistd::getpgrp())
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};

    use nix::errno::Errno;
    use nix::fcntl::{FcntlArg, OFlag, fcntl, open};
    use nix::libc::{self, c_uint};
    use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
    use nix::sys::signal::{SigHandler, SigSet, SigmaskHow, Signal, kill, killpg};
    use nix::sys::stat::Mode as FileMode;
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid, waitpid};
    use nix::unistd::{
        ForkResult, Pid, chdir, dup2_stderr, dup2_stdin, dup2_stdout, fork, getpgrp, getpid,
        getppid, pipe2, read, setpgid, tcgetpgrp, tcsetpgrp, write,
    };
    use tokio::process::{Child, Command};
    use tokio::signal::unix::{SignalKind, signal};

    use super::{Event, Mode};

    /// What the watcher reads when `redis-locks` has dealt with the group itself.
    const STAND_DOWN: u8 = b'.';

    /// Set up for a command about to be spawned; see [`prepare`].
    pub struct Pending {
        /// With a group of its own: the watcher's pipe, read and write ends.
        watch: Option<(OwnedFd, OwnedFd)>,
        job: Option<JobControl>,
    }

    /// A running command: its process group, or with `Mode::SharedGroup` its process.
    ///
    /// Dropping it without [`Group::dismiss`] lets the watcher kill the group.
    pub struct Group {
        /// The command's pid, which with a group of its own is also the group's id.
        pid: Option<Pid>,
        /// With a group of its own: the write end of the watcher's pipe.
        watch: Option<OwnedFd>,
        job: Option<JobControl>,
    }

    /// Job control on our controlling terminal.
    struct JobControl {
        tty: OwnedFd,
        /// `redis-locks`'s own process group.
        own_group: Pid,
        children: tokio::signal::unix::Signal,
        suspend: tokio::signal::unix::Signal,
        continued: tokio::signal::unix::Signal,
        /// The command's group is stopped, by this signal, and is to be continued when
        /// `redis-locks` is.
        held: Option<Signal>,
    }

    /// Makes `command` die with `redis-locks` and, with `Mode::OwnGroup`, start in a
    /// process group of its own and leave a watcher behind that kills its group when
    /// `redis-locks` dies.
    pub fn prepare(command: &mut Command, mode: Mode) -> io::Result<Pending> {
        let parent = getpid();
        if mode == Mode::SharedGroup {
            // SAFETY: runs in the forked child before exec, and only makes
            // async-signal-safe calls (prctl, getppid, _exit) on captured integers.
            unsafe {
                command.pre_exec(move || die_with(parent));
            }
            return Ok(Pending {
                watch: None,
                job: None,
            });
        }
        let (watch_read, watch_write) = pipe()?;
        let job = JobControl::new();
        let read_fd = watch_read.as_raw_fd();
        let tty_fd = job.as_ref().map(|job| job.tty.as_raw_fd());
        let cli_group = job.as_ref().map_or(getpgrp(), |job| job.own_group);
        let hand_over = job
            .as_ref()
            .is_some_and(|job| job.foreground() && alone_in_group(job.own_group));
        // SAFETY: the closure runs in the forked child before exec. It only makes
        // async-signal-safe calls (setpgid, pthread_sigmask, tcsetpgrp, prctl, getppid,
        // getpid, fork, waitpid, _exit and, in the watcher, signal, close_range/close,
        // getrlimit, open, dup2, chdir, read, kill, tcgetpgrp) through wrappers that
        // allocate nothing, and its captures are plain integers.
        unsafe {
            command.pre_exec(move || in_child(parent, read_fd, tty_fd, cli_group, hand_over));
        }
        Ok(Pending {
            watch: Some((watch_read, watch_write)),
            job,
        })
    }

    impl Pending {
        /// The command started: from here on the group is ours to stop.
        pub fn spawned(self, child: &Child) -> Group {
            Group {
                pid: child
                    .id()
                    .and_then(|pid| i32::try_from(pid).ok())
                    .map(Pid::from_raw),
                // Dropping the read end: the watcher holds the only one left.
                watch: self.watch.map(|(_, write)| write),
                job: self.job,
            }
        }

        /// The command could not be started. If the watcher was already forked, it exits
        /// (its group is gone, and its id may be reused).
        pub fn failed(self) {
            if let Some((_, write)) = &self.watch {
                stand_down(write);
            }
        }
    }

    impl Group {
        /// Sends `signal` to every process in the command's group, or with
        /// `Mode::SharedGroup` to the command. Returns whether at least one got it.
        pub fn signal(&self, signal: Signal) -> bool {
            // The group cannot be another one reusing the id: its leader, the command, is
            // our child, and as long as it is not reaped, or any process of the group is
            // left, the id stays taken. Once the group is empty and the leader reaped,
            // `redis-locks` is done with it. Likewise the pid, signalled only unreaped.
            match (self.pid, self.own_group()) {
                (Some(pid), true) => killpg(pid, signal).is_ok(),
                (Some(pid), false) => kill(pid, signal).is_ok(),
                (None, _) => false,
            }
        }

        /// Whether a signal the kernel sent to our process group (a terminal's) reached
        /// the command too: it shares our group.
        pub fn shares_our_group(&self) -> bool {
            !self.own_group() && self.pid.is_some_and(super::in_our_group)
        }

        fn own_group(&self) -> bool {
            self.watch.is_some()
        }

        /// Whether any process of the command's group still runs (never, with
        /// `Mode::SharedGroup`). Only once the command itself was reaped: orphans that come
        /// to us (when we are init or a subreaper) are reaped here. Zombies do not count:
        /// they can no longer do anything, and an init that reaps slowly, or not at all,
        /// must not hold the lock up.
        pub fn occupied(&self) -> bool {
            let Some(pid) = self.pid.filter(|_| self.own_group()) else {
                return false;
            };
            let members = Pid::from_raw(-pid.as_raw());
            while waitpid(members, Some(WaitPidFlag::WNOHANG)).is_ok_and(|s| s.pid().is_some()) {}
            let exists = matches!(killpg(pid, None), Ok(()) | Err(Errno::EPERM));
            exists && !all_zombies(pid)
        }

        /// Job control on our terminal to act on (never, without a terminal).
        ///
        /// # Cancel safety
        /// Cancel-safe: events that arrive meanwhile are kept for the next call.
        pub async fn event(&mut self) -> Event {
            let (Some(pid), Some(job)) = (self.pid, self.job.as_mut()) else {
                return std::future::pending().await;
            };
            loop {
                tokio::select! {
                    Some(()) = job.children.recv() => {
                        if let Some(signal) = stop_signal(pid) {
                            return Event::CommandStopped(signal);
                        }
                    }
                    Some(()) = job.suspend.recv() => return Event::Suspend,
                    Some(()) = job.continued.recv() => return Event::Continued,
                    else => return std::future::pending().await,
                }
            }
        }

        pub fn handle(&mut self, event: Event) {
            if let (Some(pid), Some(job)) = (self.pid, self.job.as_mut()) {
                job.handle(pid, event);
            }
        }

        /// The command exited: take the terminal back if its group had it.
        pub fn command_ended(&mut self) {
            if let (Some(pid), Some(job)) = (self.pid, self.job.as_mut()) {
                job.held = None;
                job.take_terminal(pid);
            }
        }

        /// The group is empty or killed: the watcher has nothing left to do.
        pub fn dismiss(mut self) {
            if let Some(watch) = self.watch.take() {
                stand_down(&watch);
            }
        }
    }

    impl JobControl {
        /// Job control when we have a controlling terminal (and can follow the signals it
        /// takes); `None` otherwise.
        fn new() -> Option<JobControl> {
            let flags = OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
            let tty = above_stdio(open(c"/dev/tty", flags, FileMode::empty()).ok()?).ok()?;
            let listen = |on: Signal| signal(SignalKind::from_raw(on as i32));
            let job = (|| {
                Ok::<_, io::Error>(JobControl {
                    tty,
                    own_group: getpgrp(),
                    children: listen(Signal::SIGCHLD)?,
                    suspend: listen(Signal::SIGTSTP)?,
                    continued: listen(Signal::SIGCONT)?,
                    held: None,
                })
            })();
            match job {
                Ok(job) => Some(job),
                Err(err) => {
                    tracing::warn!(error = %err, "no job control for the command");
                    None
                }
            }
        }

        fn foreground(&self) -> bool {
            tcgetpgrp(&self.tty) == Ok(self.own_group)
        }

        /// Gives the terminal back to our group if `group` has it.
        fn take_terminal(&self, group: Pid) {
            if tcgetpgrp(&self.tty) == Ok(group) {
                give_terminal(self.tty.as_fd(), self.own_group);
            }
        }

        fn handle(&mut self, group: Pid, event: Event) {
            tracing::debug!(?event, "job control");
            match event {
                Event::CommandStopped(signal @ (Signal::SIGTTIN | Signal::SIGTTOU)) => {
                    // The command wants the terminal.
                    if self.foreground() {
                        give_terminal(self.tty.as_fd(), group);
                        let _ = killpg(group, Signal::SIGCONT);
                    } else {
                        // We are a background job ourselves: stop our job the same way, so
                        // the shell shows it as waiting for the terminal; on `fg` we get it
                        // and pass it on. (With no job-control shell to continue us, an
                        // orphaned group, the stop is discarded and the command stays
                        // stopped until we get SIGCONT.)
                        self.held = Some(signal);
                        let _ = killpg(self.own_group, signal);
                        self.resume(group);
                    }
                }
                Event::CommandStopped(Signal::SIGTSTP) if self.held.is_none() => {
                    // Ctrl-Z while the command had the terminal. Stop our own group (the rest
                    // of our job) the same way; our own SIGTSTP comes back as `Suspend`.
                    self.take_terminal(group);
                    let _ = killpg(self.own_group, Signal::SIGTSTP);
                }
                // SIGSTOP is someone's deliberate act: leave it.
                Event::CommandStopped(_) => {}
                Event::Suspend => {
                    self.take_terminal(group);
                    self.held = Some(Signal::SIGTSTP);
                    let _ = killpg(group, Signal::SIGTSTP);
                    // SIGTSTP is caught (it is how we got here), so stop with SIGTTOU, whose
                    // default action stops us unless our group is orphaned (no job-control
                    // shell to continue us), in which case the kernel discards it and the
                    // suspension is undone at once, as Ctrl-Z would have been ignored.
                    let _ = kill(getpid(), Signal::SIGTTOU);
                    self.resume(group);
                }
                Event::Continued => self.resume(group),
            }
        }

        /// We run again: continue the command if it can run.
        fn resume(&mut self, group: Pid) {
            let Some(signal) = self.held else {
                return;
            };
            let foreground = self.foreground();
            if signal != Signal::SIGTSTP {
                if !foreground {
                    // Continued in the background: the command would stop again at once.
                    return;
                }
                give_terminal(self.tty.as_fd(), group);
            }
            self.held = None;
            let _ = killpg(group, Signal::SIGCONT);
        }
    }

    /// The signal that stopped `pid`, if it was stopped since the last look. Never reaps:
    /// WSTOPPED without WEXITED leaves the exit status for tokio's `wait`.
    fn stop_signal(pid: Pid) -> Option<Signal> {
        match waitid(Id::Pid(pid), WaitPidFlag::WSTOPPED | WaitPidFlag::WNOHANG) {
            Ok(WaitStatus::Stopped(stopped, signal)) if stopped == pid => Some(signal),
            _ => None,
        }
    }

    /// A pipe, both ends close-on-exec and above the stdio descriptors (which the child's
    /// setup overwrites).
    fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
        let (read, write) = pipe2(OFlag::O_CLOEXEC)?;
        Ok((above_stdio(read)?, above_stdio(write)?))
    }

    fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
        if fd.as_raw_fd() > 2 {
            return Ok(fd);
        }
        let moved = fcntl(&fd, FcntlArg::F_DUPFD_CLOEXEC(3))?;
        // SAFETY: fcntl just created the descriptor, which nobody else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(moved) })
    }

    /// If the watcher is gone, the write fails with EPIPE (SIGPIPE is ignored in Rust
    /// programs), which is fine.
    fn stand_down(watch: &OwnedFd) {
        let _ = write(watch, &[STAND_DOWN]);
    }

    /// Makes `group` the foreground process group of `tty`. SIGTTOU, which a background
    /// caller would get, is blocked for the call. Async-signal-safe.
    fn give_terminal(tty: BorrowedFd<'_>, group: Pid) -> bool {
        let mut block = SigSet::empty();
        block.add(Signal::SIGTTOU);
        let Ok(old) = block.thread_swap_mask(SigmaskHow::SIG_BLOCK) else {
            return false;
        };
        let done = tcsetpgrp(tty, group).is_ok();
        let _ = old.thread_set_mask();
        done
    }

    /// State, parent and process group of a process, from /proc/PID/stat.
    fn proc_stat(pid: &str) -> Option<(char, Pid, Pid)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name, in parentheses, may contain anything: skip to after it.
        let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let parent = Pid::from_raw(fields.next()?.parse().ok()?);
        let group = Pid::from_raw(fields.next()?.parse().ok()?);
        Some((state, parent, group))
    }

    /// The numeric entries of /proc, with their pids.
    fn processes() -> impl Iterator<Item = (String, Pid)> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let pid = Pid::from_raw(name.parse().ok()?);
                Some((name, pid))
            })
    }

    /// Whether every process in `group` is a zombie, as far as /proc tells (false when it
    /// cannot be read).
    fn all_zombies(group: Pid) -> bool {
        if std::fs::metadata("/proc/self/stat").is_err() {
            return false;
        }
        processes().all(|(name, _)| {
            proc_stat(&name).is_none_or(|(state, _, of)| of != group || state == 'Z')
        })
    }

    /// Whether the processes in our process group, other than us, are all our ancestors
    /// (a script waiting for us), so that none of them needs the terminal while the
    /// command runs. A pipeline (`redis-locks run ... | less`) has siblings in the group.
    fn alone_in_group(own_group: Pid) -> bool {
        if std::fs::metadata("/proc/self/stat").is_err() {
            return false;
        }
        let mut ancestors = vec![getpid()];
        let mut pid = getppid();
        while pid.as_raw() > 1 {
            match proc_stat(&pid.to_string()) {
                Some((_, parent, group)) if group == own_group => {
                    ancestors.push(pid);
                    pid = parent;
                }
                _ => break,
            }
        }
        processes().all(|(name, pid)| {
            ancestors.contains(&pid)
                || proc_stat(&name)
                    .is_none_or(|(state, _, group)| group != own_group || state == 'Z')
        })
    }

    /// `_exit(2)`, which `nix` does not wrap. Async-signal-safe.
    fn exit(code: i32) -> ! {
        // SAFETY: ends the process at once; nothing of it runs afterwards.
        unsafe { libc::_exit(code) }
    }

    /// In the command's process, between fork and exec: the kernel kills it when
    /// `parent` dies. Async-signal-safe.
    fn die_with(parent: Pid) -> io::Result<()> {
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
        // `redis-locks` may have died before the prctl: then nobody would signal us.
        if getppid() != parent {
            exit(1);
        }
        Ok(())
    }

    /// In the command's process, between fork and exec. Async-signal-safe calls only.
    fn in_child(
        parent: Pid,
        watch_read: RawFd,
        tty: Option<RawFd>,
        cli_group: Pid,
        hand_over: bool,
    ) -> io::Result<()> {
        // SAFETY: this process's copies of descriptors that `Pending` keeps open in
        // `redis-locks` until the spawn is over: open until exec (close-on-exec).
        let (watch_read, tty) = unsafe {
            (
                BorrowedFd::borrow_raw(watch_read),
                tty.map(|fd| BorrowedFd::borrow_raw(fd)),
            )
        };
        setpgid(Pid::from_raw(0), Pid::from_raw(0))?;
        if let Some(tty) = tty.filter(|_| hand_over) {
            // Before exec, so that the command finds itself in the foreground.
            give_terminal(tty, getpid());
        }
        die_with(parent)?;
        start_watcher(getpid(), watch_read, tty, cli_group)
    }

    /// Forks the watcher for `group` (twice: see the module's documentation). Returns once
    /// it runs. Async-signal-safe.
    fn start_watcher(
        group: Pid,
        watch_read: BorrowedFd<'_>,
        tty: Option<BorrowedFd<'_>>,
        cli_group: Pid,
    ) -> io::Result<()> {
        // SAFETY: we are between fork and exec, with one thread; the forked processes
        // make async-signal-safe calls only and never return from here.
        match unsafe { fork() }? {
            // SAFETY: as above.
            ForkResult::Child => match unsafe { fork() } {
                Ok(ForkResult::Child) => watch(group, watch_read, tty, cli_group),
                Ok(ForkResult::Parent { .. }) => exit(0),
                Err(_) => exit(1),
            },
            ForkResult::Parent { child: middle } => loop {
                match waitpid(middle, None) {
                    Err(Errno::EINTR) => {}
                    Err(err) => return Err(err.into()),
                    Ok(WaitStatus::Exited(_, 0)) => return Ok(()),
                    Ok(_) => return Err(Errno::EAGAIN.into()),
                }
            },
        }
    }

    /// The watcher: waits for `redis-locks` to go, then kills `group`. Never returns.
    /// Async-signal-safe.
    fn watch(
        group: Pid,
        watch_read: BorrowedFd<'_>,
        tty: Option<BorrowedFd<'_>>,
        cli_group: Pid,
    ) -> ! {
        // Out of the command's group, so signals to it do not reach us.
        let _ = setpgid(Pid::from_raw(0), Pid::from_raw(0));
        // Handlers inherited from redis-locks would run its code: default everything, but
        // ignore what a terminal or a dying session could send us.
        for signal in Signal::iterator() {
            use Signal::*;
            let handler = match signal {
                SIGKILL | SIGSTOP => continue,
                SIGHUP | SIGINT | SIGQUIT | SIGPIPE | SIGTSTP | SIGTTIN | SIGTTOU => {
                    SigHandler::SigIgn
                }
                _ => SigHandler::SigDfl,
            };
            // SAFETY: default or ignore: no handler of ours runs in this process again.
            let _ = unsafe { nix::sys::signal::signal(signal, handler) };
        }
        let _ = SigSet::empty().thread_set_mask();

        // Keep nothing of redis-locks's open: its connections, and above all the
        // descriptor through which the standard library learns that the command's exec
        // succeeded (spawn would wait for us otherwise).
        close_all_but(
            watch_read.as_raw_fd(),
            tty.map_or(-1, |tty| tty.as_raw_fd()),
        );
        if let Ok(null) = open(c"/dev/null", OFlag::O_RDWR, FileMode::empty()) {
            let _ = (dup2_stdin(&null), dup2_stdout(&null), dup2_stderr(&null));
            if null.as_raw_fd() <= 2 {
                // It is one of the standard descriptors now: keep it open.
                let _ = null.into_raw_fd();
            }
        }
        let _ = chdir(c"/");

        let mut byte = [0u8];
        loop {
            match read(watch_read, &mut byte) {
                // redis-locks dealt with the group itself.
                Ok(1) => exit(0),
                Err(Errno::EINTR) => {}
                // End of file (or a broken pipe): redis-locks is gone.
                _ => break,
            }
        }
        let _ = killpg(group, Signal::SIGKILL);
        if let Some(tty) = tty.filter(|tty| tcgetpgrp(tty) == Ok(group)) {
            let _ = tcsetpgrp(tty, cli_group);
        }
        exit(0)
    }

    /// Closes every descriptor from 3 up, except `a` and `b` (either may be -1).
    /// Async-signal-safe.
    fn close_all_but(a: RawFd, b: RawFd) {
        let mut next: c_uint = 3;
        for keep in [a.min(b), a.max(b)] {
            let Ok(keep) = c_uint::try_from(keep) else {
                continue;
            };
            if keep > next {
                close_range(next, keep - 1);
            }
            next = next.max(keep + 1);
        }
        close_range(next, c_uint::MAX);
    }

    fn close_range(first: c_uint, last: c_uint) {
        // SAFETY: close_range(2), which `nix` does not wrap, on descriptors nothing in this
        // process uses afterwards.
        if unsafe { libc::syscall(libc::SYS_close_range, first, last, 0 as c_uint) } == 0 {
            return;
        }
        // Linux before 5.9: one by one, up to the descriptor limit.
        let max = match getrlimit(Resource::RLIMIT_NOFILE) {
            Ok((soft, _)) if soft != RLIM_INFINITY => c_uint::try_from(soft).unwrap_or(c_uint::MAX),
            _ => 1 << 20,
        };
        for fd in first..=last.min(max) {
            // SAFETY: as above.
            let _ = unsafe { libc::close(fd as libc::c_int) };
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;

    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    use tokio::process::{Child, Command};

    use super::{Event, Mode};

    /// Nothing to set up: see the module's documentation.
    pub struct Pending;

    /// The command's process only.
    pub struct Group {
        pid: Option<Pid>,
    }

    /// Only `Mode::SharedGroup` exists here (`run` rejects `--process-group`).
    pub fn prepare(_command: &mut Command, mode: Mode) -> io::Result<Pending> {
        debug_assert_eq!(mode, Mode::SharedGroup);
        Ok(Pending)
    }

    impl Pending {
        pub fn spawned(self, child: &Child) -> Group {
            Group {
                pid: child
                    .id()
                    .and_then(|pid| i32::try_from(pid).ok())
                    .map(Pid::from_raw),
            }
        }

        pub fn failed(self) {}
    }

    impl Group {
        pub fn signal(&self, signal: Signal) -> bool {
            self.pid.is_some_and(|pid| kill(pid, signal).is_ok())
        }

        pub fn shares_our_group(&self) -> bool {
            self.pid.is_some_and(super::in_our_group)
        }

        pub fn occupied(&self) -> bool {
            false
        }

        pub async fn event(&mut self) -> Event {
            std::future::pending().await
        }

        pub fn handle(&mut self, _event: Event) {}

        pub fn command_ended(&mut self) {}

        pub fn dismiss(self) {}
    }
}
