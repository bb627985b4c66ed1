//! Starting the child, `posix_spawn`-style: `clone(CLONE_VM | CLONE_VFORK | CLONE_PIDFD)`
//! on a small separate stack, so the host's (large, pooled) address space is never
//! copied — a plain `fork` of a host with the pooling allocator costs milliseconds in
//! page-table copies — and the host gets a pidfd to wait on without racing pid reuse.
//!
//! The child shares the host's memory until `execve`, so it makes only raw system calls
//! on data prepared before the clone, with every signal blocked until its handlers are
//! reset: it joins its cgroup, starts a new process group, takes stdin from `/dev/null`
//! and stdout/stderr from the capture pipes, `fchdir`s to the guarded working directory,
//! resets signal dispositions and mask, sets `no_new_privs` and enters its Landlock
//! domain, then `execve`s. A failure on the way is reported as an errno through a
//! close-on-exec pipe.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Everything the child needs, prepared before the clone (no allocation after it).
pub struct ChildSpec<'a> {
    /// Absolute program path.
    pub program: &'a Path,
    /// argv[0] and the arguments.
    pub argv: &'a [String],
    /// `NAME=value` entries.
    pub env: &'a [(String, String)],
    /// The working directory (an `O_PATH` handle from the guard).
    pub cwd: RawFd,
    /// The cgroup's `cgroup.procs`, which the child joins (cgroup mechanism).
    pub cgroup_procs: Option<RawFd>,
    /// A Landlock ruleset to enforce.
    pub landlock: Option<RawFd>,
    /// Standard input (a pipe's read end); `/dev/null` when `None`.
    pub stdin: Option<RawFd>,
    /// Start in a new user and network namespace, with only loopback (brought up).
    pub netns: bool,
    /// Killed (`SIGKILL`) when the thread that started it ends: a long-lived server
    /// must not outlive the host.
    pub die_with_host: bool,
}

/// A started child.
pub struct Child {
    /// Its pid.
    pub pid: i32,
    /// A pidfd for it.
    pub pidfd: OwnedFd,
    /// Read end of its stdout.
    pub stdout: OwnedFd,
    /// Read end of its stderr.
    pub stderr: OwnedFd,
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command"))
}

/// A close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The child's stack size (it runs a few system calls, then `execve`).
const STACK: usize = 64 * 1024;

/// Start the child described by `spec`.
pub fn spawn(spec: &ChildSpec<'_>) -> io::Result<Child> {
    let program = cstring(spec.program.as_os_str().as_bytes())?;
    let argv_c: Vec<CString> = spec.argv.iter().map(|a| cstring(a.as_bytes())).collect::<io::Result<_>>()?;
    let env_c: Vec<CString> =
        spec.env.iter().map(|(k, v)| cstring(format!("{k}={v}").as_bytes())).collect::<io::Result<_>>()?;
    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env_c.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());

    let devnull = std::fs::File::open("/dev/null")?;
    let (out_r, out_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let (fail_r, fail_w) = pipe()?;
    // `struct ifreq` for bringing `lo` up in a new network namespace.
    let mut ifreq = IfReq { name: [0; 16], flags: 0, _pad: [0; 22] };
    ifreq.name[..2].copy_from_slice(b"lo");
    ifreq.flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    let mut data = ChildData {
        stdin: spec.stdin.unwrap_or(devnull.as_raw_fd()),
        netns: spec.netns,
        pdeathsig: spec.die_with_host,
        ifreq: &ifreq,
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        fail: fail_w.as_raw_fd(),
        cwd: spec.cwd,
        procs: spec.cgroup_procs.unwrap_or(-1),
        landlock: spec.landlock.unwrap_or(-1),
        program: program.as_ptr(),
        argv: argv.as_ptr(),
        envp: envp.as_ptr(),
    };
    // A 16-byte aligned stack; it grows down from its end.
    let mut stack = vec![0u128; STACK / 16];
    let top = stack.as_mut_ptr_range().end.cast::<libc::c_void>();

    let mut pidfd: RawFd = -1;
    let flags = libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PIDFD | libc::SIGCHLD;
    // Block every signal across the clone: the child shares our memory and must not run
    // our handlers; it resets them before unblocking.
    let pid = unsafe {
        // SAFETY: plain signal-mask calls on local sets.
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        // SAFETY: the child runs `child_main` on `stack` with `data`, both alive until
        // it execs or exits (CLONE_VFORK suspends this thread until then); the pidfd is
        // written to `pidfd`.
        let pid = libc::clone(child_main, top, flags, (&mut data as *mut ChildData).cast(), &mut pidfd as *mut RawFd);
        let e = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(e);
        }
        pid
    };
    drop(stack);
    drop((out_w, err_w, fail_w, devnull));
    // SAFETY: the pidfd was just created for us.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    // Did exec succeed? The failure pipe closed on exec, or carries an errno.
    let mut buf = [0u8; 4];
    // SAFETY: a non-blocking read into a 4-byte buffer; the child is past exec or dead.
    let n = unsafe { libc::read(fail_r.as_raw_fd(), buf.as_mut_ptr().cast(), 4) };
    if n == 4 {
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: reap the failed child through its pidfd.
        unsafe { libc::waitid(libc::P_PIDFD, pidfd.as_raw_fd() as libc::id_t, &mut info, libc::WEXITED) };
        return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(buf)));
    }
    Ok(Child { pid, pidfd, stdout: out_r, stderr: err_r })
}

/// `struct ifreq` as `SIOCSIFFLAGS` reads it: the name, then the flags (40 bytes).
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

#[repr(C)]
struct ChildData {
    stdin: RawFd,
    netns: bool,
    pdeathsig: bool,
    ifreq: *const IfReq,
    stdout: RawFd,
    stderr: RawFd,
    fail: RawFd,
    cwd: RawFd,
    procs: RawFd,
    landlock: RawFd,
    program: *const libc::c_char,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
}

/// The child's side: raw system calls only, then `execve`. Never returns.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `ChildData`, alive while the parent is suspended.
    unsafe {
        let d = &*(arg as *const ChildData);
        let fail = |fd: RawFd| -> ! {
            let errno = *libc::__errno_location();
            let bytes = errno.to_ne_bytes();
            libc::write(fd, bytes.as_ptr().cast(), 4);
            libc::_exit(127)
        };
        // Handlers first (we share the host's memory), then the mask.
        for sig in 1..libc::SIGRTMAX() {
            if sig == libc::SIGKILL || sig == libc::SIGSTOP {
                continue;
            }
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && (old.sa_sigaction != libc::SIG_DFL || sig == libc::SIGPIPE)
            {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(sig, &dfl, std::ptr::null_mut());
            }
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        if d.procs >= 0 && libc::write(d.procs, b"0\n".as_ptr().cast(), 2) < 0 {
            fail(d.fail);
        }
        if libc::setpgid(0, 0) != 0 {
            fail(d.fail);
        }
        if d.pdeathsig && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            fail(d.fail);
        }
        if d.netns {
            // A user namespace to own a network namespace with nothing but loopback.
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                fail(d.fail);
            }
            let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            if s < 0 || libc::ioctl(s, libc::SIOCSIFFLAGS, d.ifreq) != 0 {
                fail(d.fail);
            }
            libc::close(s);
        }
        if libc::dup2(d.stdin, 0) < 0 || libc::dup2(d.stdout, 1) < 0 || libc::dup2(d.stderr, 2) < 0 {
            fail(d.fail);
        }
        if libc::fchdir(d.cwd) != 0 {
            fail(d.fail);
        }
        if d.landlock >= 0 {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                fail(d.fail);
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, d.landlock, 0u32) != 0 {
                fail(d.fail);
            }
        }
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(d.program, d.argv, d.envp);
        fail(d.fail)
    }
}

/// How a reaped child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// `exit(code)`.
    Code(i32),
    /// Killed by a signal.
    Signal(i32),
}

/// Wait (asynchronously) for the child behind `pidfd` to end, and reap it.
pub async fn wait(pidfd: &tokio::io::unix::AsyncFd<OwnedFd>) -> io::Result<Exit> {
    loop {
        let mut guard = pidfd.readable().await?;
        match try_reap(pidfd.get_ref().as_raw_fd())? {
            Some(e) => return Ok(e),
            None => guard.clear_ready(),
        }
    }
}

/// Reap the child behind `pidfd` if it has ended.
pub fn try_reap(pidfd: RawFd) -> io::Result<Option<Exit>> {
    // SAFETY: waitid with a zeroed siginfo to fill.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(libc::P_PIDFD, pidfd as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG);
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        if info.si_pid() == 0 {
            return Ok(None);
        }
        let status = info.si_status();
        Ok(Some(if info.si_code == libc::CLD_EXITED { Exit::Code(status) } else { Exit::Signal(status) }))
    }
}
