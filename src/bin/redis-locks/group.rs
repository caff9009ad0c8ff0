//! The command's process group, and what keeps it from outliving `redis-locks`.
//!
//! # Linux
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
//! it). Ctrl-Z (SIGTSTP) suspends the command's group and
//! `redis-locks` together, as it did when they shared a group; when continued (`fg`, `bg`),
//! `redis-locks` continues the command. If `redis-locks` is a background job, a command
//! that needs the terminal stops the job, as a shell would show it ("Stopped (tty
//! input)"). A suspended `redis-locks` does not renew the lock.
//!
//! # Other platforms
//!
//! The command runs in `redis-locks`'s own process group, signals and the stop on a lost
//! lock go to the command's process only, and nothing kills the command if `redis-locks`
//! dies: it keeps running, unprotected once the lock expires. Signals are forwarded only
//! while `redis-locks` lives.

pub use imp::{Group, prepare};

/// Something for [`Group::handle`] to act on: job control on a terminal.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub enum Event {
    /// The command was stopped by this signal.
    CommandStopped(i32),
    /// `redis-locks` got SIGTSTP: suspend the command and ourselves.
    Suspend,
    /// `redis-locks` got SIGCONT.
    Continued,
}

#[cfg(target_os = "linux")]
mod imp {
    use std::fs::OpenOptions;
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    use std::os::unix::fs::OpenOptionsExt;

    use libc::{c_int, c_uint, pid_t};
    use tokio::process::{Child, Command};
    use tokio::signal::unix::{Signal, SignalKind, signal};

    use super::Event;

    /// What the watcher reads when `redis-locks` has dealt with the group itself.
    const STAND_DOWN: u8 = b'.';

    /// Set up for a command about to be spawned; see [`prepare`].
    pub struct Pending {
        watch_read: OwnedFd,
        watch_write: OwnedFd,
        job: Option<JobControl>,
    }

    /// A running command's process group.
    ///
    /// Dropping it without [`Group::dismiss`] lets the watcher kill the group.
    pub struct Group {
        /// The command's pid, which is also its group's id.
        pid: pid_t,
        watch: Option<OwnedFd>,
        job: Option<JobControl>,
    }

    /// Job control on our controlling terminal.
    struct JobControl {
        tty: OwnedFd,
        /// `redis-locks`'s own process group.
        own_group: pid_t,
        children: Signal,
        suspend: Signal,
        continued: Signal,
        /// The command's group is stopped, by this signal, and is to be continued when
        /// `redis-locks` is.
        held: Option<c_int>,
    }

    /// Makes `command` start in a process group of its own, die with `redis-locks`, and
    /// leave a watcher behind that kills its group when `redis-locks` dies.
    pub fn prepare(command: &mut Command) -> io::Result<Pending> {
        let (watch_read, watch_write) = pipe()?;
        let job = JobControl::new();
        let parent = std::process::id() as pid_t;
        let read_fd = watch_read.as_raw_fd();
        let tty_fd = job.as_ref().map_or(-1, |job| job.tty.as_raw_fd());
        let cli_group = job.as_ref().map_or(0, |job| job.own_group);
        let hand_over = job
            .as_ref()
            .is_some_and(|job| job.foreground() && alone_in_group(job.own_group));
        // SAFETY: the closure runs in the forked child before exec. It only makes
        // async-signal-safe calls (setpgid, sigemptyset, sigaddset, pthread_sigmask,
        // tcsetpgrp, prctl, getppid, getpid, fork, waitpid, _exit and, in the watcher,
        // signal, close_range/close, getrlimit, open, dup2, chdir, read, kill, tcgetpgrp),
        // and allocates nothing: its captures are plain integers.
        unsafe {
            command.pre_exec(move || in_child(parent, read_fd, tty_fd, cli_group, hand_over));
        }
        Ok(Pending {
            watch_read,
            watch_write,
            job,
        })
    }

    impl Pending {
        /// The command started: from here on the group is ours to stop.
        pub fn spawned(self, child: &Child) -> Group {
            drop(self.watch_read);
            Group {
                pid: child.id().map_or(0, |pid| pid as pid_t),
                watch: Some(self.watch_write),
                job: self.job,
            }
        }

        /// The command could not be started. If the watcher was already forked, it exits
        /// (its group is gone, and its id may be reused).
        pub fn failed(self) {
            stand_down(&self.watch_write);
        }
    }

    impl Group {
        /// Sends `signo` to every process in the command's group. Returns whether at least
        /// one got it.
        pub fn signal(&self, signo: c_int) -> bool {
            // The group cannot be another one reusing the id: its leader, the command, is
            // our child, and as long as it is not reaped, or any process of the group is
            // left, the id stays taken. Once the group is empty and the leader reaped,
            // `redis-locks` is done with it.
            self.pid > 0 && crate::signals::send(-self.pid, signo)
        }

        /// Whether any process of the command's group still runs. Only once the command
        /// itself was reaped: orphans that come to us (when we are init or a subreaper)
        /// are reaped here. Zombies do not count: they can no longer do anything, and an
        /// init that reaps slowly, or not at all, must not hold the lock up.
        pub fn occupied(&self) -> bool {
            if self.pid <= 0 {
                return false;
            }
            // SAFETY: waitpid with WNOHANG on our children in the command's group (the
            // command itself was reaped already) and kill with signal 0: no memory
            // involved.
            let exists = unsafe {
                while libc::waitpid(-self.pid, std::ptr::null_mut(), libc::WNOHANG) > 0 {}
                libc::kill(-self.pid, 0) == 0 || errno() == libc::EPERM
            };
            exists && !all_zombies(self.pid)
        }

        /// Job control on our terminal to act on (never, without a terminal).
        ///
        /// # Cancel safety
        /// Cancel-safe: events that arrive meanwhile are kept for the next call.
        pub async fn event(&mut self) -> Event {
            let pid = self.pid;
            let Some(job) = self.job.as_mut() else {
                return std::future::pending().await;
            };
            loop {
                tokio::select! {
                    Some(()) = job.children.recv() => {
                        if let Some(signo) = stop_signal(pid) {
                            return Event::CommandStopped(signo);
                        }
                    }
                    Some(()) = job.suspend.recv() => return Event::Suspend,
                    Some(()) = job.continued.recv() => return Event::Continued,
                    else => return std::future::pending().await,
                }
            }
        }

        pub fn handle(&mut self, event: Event) {
            let pid = self.pid;
            if let Some(job) = self.job.as_mut() {
                job.handle(pid, event);
            }
        }

        /// The command exited: take the terminal back if its group had it.
        pub fn command_ended(&mut self) {
            if let Some(job) = self.job.as_mut() {
                job.held = None;
                job.take_terminal(self.pid);
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
            let tty = OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NOCTTY)
                .open("/dev/tty")
                .ok()?;
            let tty = above_stdio(tty.into()).ok()?;
            let listen = |signo| signal(SignalKind::from_raw(signo));
            let job = (|| {
                Ok::<_, io::Error>(JobControl {
                    tty,
                    // SAFETY: getpgrp(2) cannot fail and touches no memory.
                    own_group: unsafe { libc::getpgrp() },
                    children: listen(libc::SIGCHLD)?,
                    suspend: listen(libc::SIGTSTP)?,
                    continued: listen(libc::SIGCONT)?,
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
            // SAFETY: tcgetpgrp on a descriptor we own.
            unsafe { libc::tcgetpgrp(self.tty.as_raw_fd()) == self.own_group }
        }

        /// Gives the terminal back to our group if `group` has it.
        fn take_terminal(&self, group: pid_t) {
            let tty = self.tty.as_raw_fd();
            // SAFETY: terminal calls on a descriptor we own.
            if unsafe { libc::tcgetpgrp(tty) } == group {
                give_terminal(tty, self.own_group);
            }
        }

        fn handle(&mut self, group: pid_t, event: Event) {
            tracing::debug!(?event, "job control");
            match event {
                Event::CommandStopped(signo @ (libc::SIGTTIN | libc::SIGTTOU)) => {
                    // The command wants the terminal.
                    if self.foreground() {
                        give_terminal(self.tty.as_raw_fd(), group);
                        send(-group, libc::SIGCONT);
                    } else {
                        // We are a background job ourselves: stop our job the same way, so
                        // the shell shows it as waiting for the terminal; on `fg` we get it
                        // and pass it on. (With no job-control shell to continue us, an
                        // orphaned group, the stop is discarded and the command stays
                        // stopped until we get SIGCONT.)
                        self.held = Some(signo);
                        send(0, signo);
                        self.resume(group);
                    }
                }
                Event::CommandStopped(libc::SIGTSTP) if self.held.is_none() => {
                    // Ctrl-Z while the command had the terminal. Stop our own group (the rest
                    // of our job) the same way; our own SIGTSTP comes back as `Suspend`.
                    self.take_terminal(group);
                    send(0, libc::SIGTSTP);
                }
                // SIGSTOP is someone's deliberate act: leave it.
                Event::CommandStopped(_) => {}
                Event::Suspend => {
                    self.take_terminal(group);
                    self.held = Some(libc::SIGTSTP);
                    send(-group, libc::SIGTSTP);
                    // SIGTSTP is caught (it is how we got here), so stop with SIGTTOU, whose
                    // default action stops us unless our group is orphaned (no job-control
                    // shell to continue us), in which case the kernel discards it and the
                    // suspension is undone at once, as Ctrl-Z would have been ignored.
                    // SAFETY: getpid cannot fail.
                    send(unsafe { libc::getpid() }, libc::SIGTTOU);
                    self.resume(group);
                }
                Event::Continued => self.resume(group),
            }
        }

        /// We run again: continue the command if it can run.
        fn resume(&mut self, group: pid_t) {
            let Some(signo) = self.held else {
                return;
            };
            let foreground = self.foreground();
            if signo != libc::SIGTSTP {
                if !foreground {
                    // Continued in the background: the command would stop again at once.
                    return;
                }
                give_terminal(self.tty.as_raw_fd(), group);
            }
            self.held = None;
            send(-group, libc::SIGCONT);
        }
    }

    /// The signal that stopped `pid`, if it was stopped since the last look. Never reaps.
    fn stop_signal(pid: pid_t) -> Option<c_int> {
        // SAFETY: waitid writes into the zeroed siginfo_t we pass; WSTOPPED without
        // WEXITED never reaps, so the exit status stays for tokio's `wait`.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let done = libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WSTOPPED | libc::WNOHANG,
            );
            (done == 0 && info.si_pid() == pid && info.si_code == libc::CLD_STOPPED)
                .then(|| info.si_status())
        }
    }

    fn send(target: pid_t, signo: c_int) {
        crate::signals::send(target, signo);
    }

    /// A pipe, both ends close-on-exec and above the stdio descriptors (which the child's
    /// setup overwrites).
    fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills the two-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Ok((above_stdio(read)?, above_stdio(write)?))
    }

    fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
        if fd.as_raw_fd() > 2 {
            return Ok(fd);
        }
        // SAFETY: fcntl duplicates a descriptor we own; the new one is owned by nobody else.
        unsafe {
            let moved = libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3);
            if moved < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(OwnedFd::from_raw_fd(moved))
        }
    }

    fn stand_down(watch: &OwnedFd) {
        // SAFETY: a one-byte write from a live buffer. If the watcher is gone, the write
        // fails with EPIPE (SIGPIPE is ignored in Rust programs), which is fine.
        unsafe {
            libc::write(watch.as_raw_fd(), [STAND_DOWN].as_ptr().cast(), 1);
        }
    }

    fn errno() -> c_int {
        io::Error::last_os_error().raw_os_error().unwrap_or(0)
    }

    /// Makes `group` the foreground process group of `tty`. SIGTTOU, which a background
    /// caller would get, is blocked for the call. Async-signal-safe.
    fn give_terminal(tty: RawFd, group: pid_t) -> bool {
        // SAFETY: signal-set operations on local, initialised sets; tcsetpgrp on a
        // descriptor the caller holds.
        unsafe {
            let mut block: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGTTOU);
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
            let done = libc::tcsetpgrp(tty, group) == 0;
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            done
        }
    }

    /// State, parent and process group of a process, from /proc/PID/stat.
    fn proc_stat(pid: &str) -> Option<(char, pid_t, pid_t)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name, in parentheses, may contain anything: skip to after it.
        let mut fields = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
        let state = fields.next()?.chars().next()?;
        let parent = fields.next()?.parse().ok()?;
        let group = fields.next()?.parse().ok()?;
        Some((state, parent, group))
    }

    /// The numeric entries of /proc, with their pids.
    fn processes() -> impl Iterator<Item = (String, pid_t)> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name().into_string().ok()?;
                let pid = name.parse().ok()?;
                Some((name, pid))
            })
    }

    /// Whether every process in `group` is a zombie, as far as /proc tells (false when it
    /// cannot be read).
    fn all_zombies(group: pid_t) -> bool {
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
    fn alone_in_group(own_group: pid_t) -> bool {
        if std::fs::metadata("/proc/self/stat").is_err() {
            return false;
        }
        let me = std::process::id() as pid_t;
        let mut ancestors = vec![me];
        // SAFETY: getppid cannot fail.
        let mut pid = unsafe { libc::getppid() };
        while pid > 1 {
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

    /// In the command's process, between fork and exec. Async-signal-safe calls only.
    fn in_child(
        parent: pid_t,
        watch_read: RawFd,
        tty: RawFd,
        cli_group: pid_t,
        hand_over: bool,
    ) -> io::Result<()> {
        // SAFETY: see `prepare`: async-signal-safe calls only, no allocation.
        unsafe {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if hand_over {
                // Before exec, so that the command finds itself in the foreground.
                give_terminal(tty, libc::getpid());
            }
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // `redis-locks` may have died before the prctl: then nobody would signal us.
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            start_watcher(libc::getpid(), watch_read, tty, cli_group)
        }
    }

    /// Forks the watcher for `group` (twice: see the module's documentation). Returns once
    /// it runs. Async-signal-safe.
    fn start_watcher(
        group: pid_t,
        watch_read: RawFd,
        tty: RawFd,
        cli_group: pid_t,
    ) -> io::Result<()> {
        // SAFETY: fork, _exit and waitpid; the forked processes never return from here.
        unsafe {
            match libc::fork() {
                -1 => Err(io::Error::last_os_error()),
                0 => match libc::fork() {
                    0 => watch(group, watch_read, tty, cli_group),
                    -1 => libc::_exit(1),
                    _ => libc::_exit(0),
                },
                middle => {
                    let mut status: c_int = 0;
                    while libc::waitpid(middle, &mut status, 0) == -1 {
                        if errno() != libc::EINTR {
                            return Err(io::Error::last_os_error());
                        }
                    }
                    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::from_raw_os_error(libc::EAGAIN))
                    }
                }
            }
        }
    }

    /// The watcher: waits for `redis-locks` to go, then kills `group`. Never returns.
    /// Async-signal-safe.
    fn watch(group: pid_t, watch_read: RawFd, tty: RawFd, cli_group: pid_t) -> ! {
        // SAFETY: async-signal-safe calls on integers and local buffers only.
        unsafe {
            // Out of the command's group, so signals to it do not reach us.
            libc::setpgid(0, 0);
            // Handlers inherited from redis-locks would run its code: default everything,
            // then ignore what a terminal or a dying session could send us.
            for signo in 1..32 {
                if signo != libc::SIGKILL && signo != libc::SIGSTOP {
                    libc::signal(signo, libc::SIG_DFL);
                }
            }
            for signo in [
                libc::SIGHUP,
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGPIPE,
                libc::SIGTSTP,
                libc::SIGTTIN,
                libc::SIGTTOU,
            ] {
                libc::signal(signo, libc::SIG_IGN);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::pthread_sigmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());

            // Keep nothing of redis-locks's open: its connections, and above all the
            // descriptor through which the standard library learns that the command's exec
            // succeeded (spawn would wait for us otherwise).
            close_all_but(watch_read, tty);
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            if null >= 0 {
                for fd in 0..3 {
                    if fd != null && fd != watch_read && fd != tty {
                        libc::dup2(null, fd);
                    }
                }
                if null > 2 {
                    libc::close(null);
                }
            }
            libc::chdir(c"/".as_ptr());

            let mut byte = 0u8;
            loop {
                match libc::read(watch_read, (&raw mut byte).cast(), 1) {
                    // redis-locks dealt with the group itself.
                    1 => libc::_exit(0),
                    -1 if errno() == libc::EINTR => {}
                    // End of file (or a broken pipe): redis-locks is gone.
                    _ => break,
                }
            }
            libc::kill(-group, libc::SIGKILL);
            if tty >= 0 && libc::tcgetpgrp(tty) == group {
                libc::tcsetpgrp(tty, cli_group);
            }
            libc::_exit(0)
        }
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
        // SAFETY: closing descriptors we do not use afterwards; getrlimit fills a local.
        unsafe {
            if libc::syscall(libc::SYS_close_range, first, last, 0 as c_uint) == 0 {
                return;
            }
            // Linux before 5.9: one by one, up to the descriptor limit.
            let mut limit: libc::rlimit = std::mem::zeroed();
            let max = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur != libc::RLIM_INFINITY
            {
                c_uint::try_from(limit.rlim_cur).unwrap_or(c_uint::MAX)
            } else {
                1 << 20
            };
            for fd in first..=last.min(max) {
                libc::close(fd as c_int);
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;

    use tokio::process::{Child, Command};

    use super::Event;

    /// Nothing to set up: see the module's documentation.
    pub struct Pending;

    /// The command's process only.
    pub struct Group {
        pid: libc::pid_t,
    }

    pub fn prepare(_command: &mut Command) -> io::Result<Pending> {
        Ok(Pending)
    }

    impl Pending {
        pub fn spawned(self, child: &Child) -> Group {
            Group {
                pid: child
                    .id()
                    .and_then(|pid| libc::pid_t::try_from(pid).ok())
                    .unwrap_or(0),
            }
        }

        pub fn failed(self) {}
    }

    impl Group {
        pub fn signal(&self, signo: i32) -> bool {
            self.pid > 0 && crate::signals::send(self.pid, signo)
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
