//! Starting the child, `posix_spawn`-style, without ever copying the host's (large,
//! pooled) address space — a plain `fork` of a host with the pooling allocator costs
//! milliseconds in page-table copies. The child gets a pidfd the host waits on without
//! racing pid reuse.
//!
//! **Isolated** (wherever the kernel allows unprivileged user namespaces, probed once):
//! the host clones a small init with `CLONE_VM` into a new user, pid and mount namespace
//! (and a network namespace holding only loopback, when asked). The init maps the host's
//! uid and gid to themselves, mounts a `/proc` of its own pid namespace
//! (`hidepid=ptraceable`, so the init itself, which runs on the host's non-dumpable
//! memory, is not there either), joins the
//! command's cgroup, sets the parent-death signal, takes the standard descriptors,
//! enters the Landlock domain, closes every other descriptor it inherited, and starts
//! the command (`CLONE_VM | CLONE_VFORK`) as pid 2, which `execve`s. The init stays as
//! pid 1 only to reap, then passes the command's wait status back and exits — and the
//! kernel ends everything left in the namespace with it. So nothing the host starts:
//! - sees the host at all: its `/proc` holds only its own namespace, so the host's
//!   environment, arguments and descriptors are not there to read, and the host is
//!   not dumpable besides ([`harden_host`]), so no process of another namespace may
//!   read them either;
//! - holds any capability over the host: its capabilities belong to its own user
//!   namespace, and every connection it makes to the host's approvals socket is told
//!   apart by that namespace (`server::socket`);
//! - outlives the host: the init dies with the host's thread that started it (the
//!   parent-death signal, on every exit path including `kill -9`), and its pid
//!   namespace with it, double-forked `setsid` daemons included.
//!
//! **Direct** (no user namespaces here): one `CLONE_VM | CLONE_VFORK` child that sets
//! itself up and `execve`s, as pid 1 would hand over to pid 2 above.
//!
//! Either way the process that execs makes only raw system calls on data prepared
//! before the clone, with every signal blocked until its handlers are reset: it starts
//! a new session (no controlling terminal, so nothing can be pushed into the operator's
//! terminal input), takes stdin from `/dev/null` or a pipe and stdout/stderr from the
//! capture pipes, `fchdir`s to the guarded working directory, resets signal
//! dispositions and mask, and `execve`s. A failure on the way is reported as an errno
//! through a close-on-exec pipe.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicI32, Ordering};

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
    /// Landlock rights the ruleset gives on the child's own `/proc` (added by the init
    /// once it is mounted; 0 for none): [`super::sandbox::proc_rights`].
    pub proc_rights: u64,
    /// Standard input (a pipe's read end); `/dev/null` when `None`.
    pub stdin: Option<RawFd>,
    /// Start in a new network namespace, with only loopback (brought up).
    pub netns: bool,
    /// With `netns`, when isolated: the init's end of a Unix socket pair on which it
    /// sends a TCP socket listening on `127.0.0.1:`[`super::proxy::PORT`] in the new
    /// namespace, for the host to serve the command's proxy on.
    pub proxy: Option<RawFd>,
    /// Killed (`SIGKILL`) when the thread that started it ends, even where the child
    /// cannot be isolated: a long-lived server must not outlive the host. (An isolated
    /// child always is.)
    pub die_with_host: bool,
    /// When isolated: paths made read-only or unreadable in the child's mount
    /// namespace ([`super::carve`]), relative to its working directory. Each must take,
    /// or the child does not start.
    pub carve: &'a [(std::ffi::CString, super::carve::Kind, u64)],
    /// When isolated: a namespace prepared with the carve-outs already in place, to
    /// enter instead of mounting `carve` (which is mounted after all if entering
    /// fails), and the working directory's absolute path.
    pub enter: Option<(&'a Namespace, &'a std::ffi::CStr)>,
}

impl<'a> ChildSpec<'a> {
    /// `program` with `argv` in the directory `cwd`: no environment, stdin from
    /// `/dev/null`, no cgroup, Landlock, network namespace or carve-outs; killed with the
    /// thread that started it.
    pub(crate) fn plain(program: &'a Path, argv: &'a [String], cwd: RawFd) -> Self {
        ChildSpec {
            program,
            argv,
            env: &[],
            cwd,
            cgroup_procs: None,
            landlock: None,
            proc_rights: 0,
            stdin: None,
            netns: false,
            proxy: None,
            die_with_host: true,
            carve: &[],
            enter: None,
        }
    }
}

/// A started child.
pub struct Child {
    /// Its pid (the init's, when isolated: the whole tree is beneath it).
    pub pid: i32,
    /// A pidfd for it.
    pub pidfd: OwnedFd,
    /// Read end of its stdout.
    pub stdout: OwnedFd,
    /// Read end of its stderr.
    pub stderr: OwnedFd,
    /// The isolated child's init: what it reads while it runs and the status it
    /// leaves. Must outlive the init, so it goes wherever the pidfd goes.
    pub init: Option<InitMemory>,
}

/// Memory an isolated child's init runs on (it shares the host's address space): its
/// stack, its instructions and the command's wait status. Dropped only once the init
/// has been reaped.
pub struct InitMemory(Box<Shared>);

// SAFETY: the raw pointers inside point at data the init and the command read only
// before the command's exec (while the host waits on the failure pipe); afterwards the
// host touches nothing in it but the atomic status word. Moving or sharing the box
// between threads changes nothing about that.
unsafe impl Send for InitMemory {}
// SAFETY: as above: through a shared reference only the atomics are read.
unsafe impl Sync for InitMemory {}

impl InitMemory {
    /// The command's wait status as the init saw it, or `None` if the init ended
    /// first (it was killed).
    fn status(&self) -> Option<i32> {
        match self.0.status.load(Ordering::Acquire) {
            NO_STATUS => None,
            s => Some(s),
        }
    }
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

/// The stack size of the init and of the child (each runs a few system calls).
const STACK: usize = 64 * 1024;

/// The status word before the init has stored one.
const NO_STATUS: i32 = i32::MIN;

/// Whether children are isolated here (unprivileged user, pid and mount namespaces):
/// probed once by starting `/bin/true` that way.
pub fn isolation() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| match start_true(false, true) {
        Ok(private) => {
            if !private {
                tracing::warn!(target: "cheng::process",
                    "children run in namespaces of their own, but this kernel refused them a /proc of their \
                     own with hidden pids: the host's command line may be read there (not its \
                     environment: the host is not dumpable)");
            }
            true
        }
        Err(e) => {
            tracing::warn!(target: "cheng::process",
                "no unprivileged user namespaces here ({e}): children share the host's pid namespace and /proc; \
                 the approvals socket still refuses them by ancestry and cgroup");
            false
        }
    })
}

/// Start `/bin/true` (in a network namespace of its own with `netns`; isolated with
/// `isolated`, else as [`spawn`] would) and wait for it: a probe of what this machine
/// allows. `Ok(true)` when it got a private `/proc`.
pub(crate) fn start_true(netns: bool, isolated: bool) -> io::Result<bool> {
    let dir = std::fs::File::open("/")?;
    let argv = vec!["true".to_string()];
    let spec = ChildSpec { netns, ..ChildSpec::plain(Path::new("/bin/true"), &argv, dir.as_raw_fd()) };
    let c = if isolated { spawn_isolated(&spec)? } else { spawn(&spec)? };
    let private = c.init.as_ref().is_some_and(|m| m.0.proc_private.load(Ordering::Acquire) == 1);
    block_reap(&c.pidfd);
    Ok(private)
}

/// In words, for `cheng settings`.
pub fn describe_isolation() -> &'static str {
    if isolation() {
        "user, pid and mount namespaces of their own with a private /proc; the host is not dumpable"
    } else {
        "none (no unprivileged user namespaces): children share the host's /proc; the host is not dumpable"
    }
}

/// Make this process unreadable to every other process of its user: not dumpable, so
/// its `/proc/<pid>/environ`, `mem`, `fd` and `maps` need `CAP_SYS_PTRACE` in the
/// host's own user namespace — which no child has — and it leaves no core dump holding
/// keys or tokens. Called when a host is built; idempotent.
pub fn harden_host() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: prctl with integer arguments has no memory effects.
        if unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } != 0 {
            tracing::warn!(target: "cheng::process", "cannot make the host non-dumpable: {}",
                io::Error::last_os_error());
        }
    });
}

/// Start the child described by `spec`: isolated where this machine allows it.
pub fn spawn(spec: &ChildSpec<'_>) -> io::Result<Child> {
    if isolation() { spawn_isolated(spec) } else { spawn_direct(spec) }
}

/// The parts of the exec'ing child's data that both paths build the same way.
struct Prepared {
    program: CString,
    _argv: Vec<CString>,
    _env: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    devnull: std::fs::File,
}

/// A pipe: (read end, write end).
type Pipe = (OwnedFd, OwnedFd);

/// What both paths build first: the exec's strings, and the stdout, stderr and failure
/// pipes.
fn prepare(spec: &ChildSpec<'_>) -> io::Result<(Prepared, Pipe, Pipe, Pipe)> {
    let program = cstring(spec.program.as_os_str().as_bytes())?;
    let argv_c: Vec<CString> = spec.argv.iter().map(|a| cstring(a.as_bytes())).collect::<io::Result<_>>()?;
    let env_c: Vec<CString> =
        spec.env.iter().map(|(k, v)| cstring(format!("{k}={v}").as_bytes())).collect::<io::Result<_>>()?;
    let mut argv: Vec<*const libc::c_char> = argv_c.iter().map(|c| c.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = env_c.iter().map(|c| c.as_ptr()).collect();
    envp.push(std::ptr::null());
    let devnull = std::fs::File::open("/dev/null")?;
    Ok((Prepared { program, _argv: argv_c, _env: env_c, argv, envp, devnull }, pipe()?, pipe()?, pipe()?))
}

fn lo_up() -> IfReq {
    let mut ifreq = IfReq { name: [0; 16], flags: 0, _pad: [0; 22] };
    ifreq.name[..2].copy_from_slice(b"lo");
    ifreq.flags = (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    ifreq
}

/// `clone` with every signal blocked across it: the child shares our memory and must
/// not run our handlers; it resets them (or keeps them blocked, the init) itself.
///
/// SAFETY: `entry` must only touch `arg` and `stack`, which must stay alive while it
/// runs (for `CLONE_VFORK`, until this returns).
unsafe fn clone_blocked(
    entry: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    stack: *mut libc::c_void,
    flags: libc::c_int,
    arg: *mut libc::c_void,
) -> io::Result<(i32, OwnedFd)> {
    let mut pidfd: RawFd = -1;
    // SAFETY: plain signal-mask calls on local sets; the clone's contract is the caller's.
    let pid = unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let pid = libc::clone(entry, stack, flags | libc::CLONE_PIDFD | libc::SIGCHLD, arg, &mut pidfd as *mut RawFd);
        let e = io::Error::last_os_error();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        if pid < 0 {
            return Err(e);
        }
        pid
    };
    // SAFETY: the pidfd was just created for us.
    Ok((pid, unsafe { OwnedFd::from_raw_fd(pidfd) }))
}

/// Read the failure pipe to its end: `Some(errno)` when the child reported one.
fn read_failure(fail_r: &OwnedFd) -> Option<i32> {
    let mut buf = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        // SAFETY: a read into the rest of a 4-byte buffer.
        let n = unsafe { libc::read(fail_r.as_raw_fd(), buf[got..].as_mut_ptr().cast(), 4 - got) };
        if n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            break;
        }
        got += n as usize;
    }
    (got == 4).then(|| i32::from_ne_bytes(buf))
}

/// Wait for the child behind `pidfd` to end, blocking.
fn block_reap(pidfd: &OwnedFd) {
    // SAFETY: a blocking waitid on our own pidfd with a zeroed siginfo.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        libc::waitid(libc::P_PIDFD, pidfd.as_raw_fd() as libc::id_t, &mut info, libc::WEXITED);
    }
}

/// The direct path: one vfork-style child that sets itself up and execs.
fn spawn_direct(spec: &ChildSpec<'_>) -> io::Result<Child> {
    let (p, (out_r, out_w), (err_r, err_w), (fail_r, fail_w)) = prepare(spec)?;
    let ifreq = lo_up();
    let mut data = ChildData {
        stdin: spec.stdin.unwrap_or(p.devnull.as_raw_fd()),
        netns: spec.netns,
        pdeathsig: spec.die_with_host,
        no_root: false,
        ifreq: &ifreq,
        stdout: out_w.as_raw_fd(),
        stderr: err_w.as_raw_fd(),
        fail: fail_w.as_raw_fd(),
        cwd: spec.cwd,
        procs: spec.cgroup_procs.unwrap_or(-1),
        landlock: spec.landlock.unwrap_or(-1),
        program: p.program.as_ptr(),
        argv: p.argv.as_ptr(),
        envp: p.envp.as_ptr(),
    };
    // A 16-byte aligned stack; it grows down from its end.
    let mut stack = vec![0u128; STACK / 16];
    let top = stack.as_mut_ptr_range().end.cast::<libc::c_void>();
    // SAFETY: the child runs `child_main` on `stack` with `data`, both alive until it
    // execs or exits (CLONE_VFORK suspends this thread until then).
    let (pid, pidfd) = unsafe {
        clone_blocked(child_main, top, libc::CLONE_VM | libc::CLONE_VFORK, (&mut data as *mut ChildData).cast())?
    };
    drop(stack);
    drop((out_w, err_w, fail_w));
    // Did exec succeed? The child is past exec or dead: the failure pipe closed on
    // exec, or carries an errno.
    if let Some(errno) = read_failure(&fail_r) {
        block_reap(&pidfd);
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(Child { pid, pidfd, stdout: out_r, stderr: err_r, init: None })
}

/// The isolated path: an init in namespaces of its own, which starts the command.
fn spawn_isolated(spec: &ChildSpec<'_>) -> io::Result<Child> {
    let (p, (out_r, out_w), (err_r, err_w), (fail_r, fail_w)) = prepare(spec)?;
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    // Alive until the command has exec'd (the failure pipe is read below).
    let carve: Vec<CarveC> =
        spec.carve.iter().map(|(p, k, l)| CarveC { path: p.as_ptr(), kind: *k as u8, locked: *l }).collect();
    let mut shared = Box::new(Shared {
        init: InitData {
            stdin: spec.stdin.unwrap_or(p.devnull.as_raw_fd()),
            stdout: out_w.as_raw_fd(),
            stderr: err_w.as_raw_fd(),
            fail: fail_w.as_raw_fd(),
            cwd: spec.cwd,
            procs: spec.cgroup_procs.unwrap_or(-1),
            landlock: spec.landlock.unwrap_or(-1),
            proc_rights: spec.proc_rights,
            netns: spec.netns,
            proxy: spec.proxy.unwrap_or(-1),
            uid_map: Line::new(format_args!("{uid} {uid} 1\n")),
            gid_map: Line::new(format_args!("{gid} {gid} 1\n")),
            carve: carve.as_ptr(),
            carve_len: carve.len(),
            hidden: super::carve::hidden().0.as_ptr(),
            entered: spec.enter.is_some(),
        },
        enter: EnterData {
            user: spec.enter.map_or(-1, |(ns, _)| ns.user.as_raw_fd()),
            mnt: spec.enter.map_or(-1, |(ns, _)| ns.mnt.as_raw_fd()),
            cwd_path: spec.enter.map_or(std::ptr::null(), |(_, cwd)| cwd.as_ptr()),
            flags: 0,
            init_pid: AtomicI32::new(0),
        },
        ifreq: lo_up(),
        child: ChildData {
            stdin: 0,
            netns: false,
            pdeathsig: false,
            no_root: true,
            ifreq: std::ptr::null(),
            stdout: 1,
            stderr: 2,
            fail: 3,
            cwd: -1,
            procs: -1,
            landlock: -1,
            program: p.program.as_ptr(),
            argv: p.argv.as_ptr(),
            envp: p.envp.as_ptr(),
        },
        status: AtomicI32::new(NO_STATUS),
        proc_private: AtomicI32::new(0),
        init_stack: [0; STACK / 16],
        child_stack: [0; STACK / 16],
        enter_stack: [0; STACK / 16],
    });
    let (pid, pidfd) = if spec.enter.is_some() {
        // Entering the prepared namespace: a short-lived process joins it and starts
        // the init as the host's own child (`CLONE_PARENT`), in new pid and mount
        // namespaces, then exits; this thread waits for that (`CLONE_VFORK`).
        let mut flags = libc::CLONE_VM | libc::CLONE_PARENT | libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::SIGCHLD;
        if spec.netns {
            flags |= libc::CLONE_NEWNET;
        }
        shared.enter.flags = flags;
        let top = shared.enter_stack.as_mut_ptr_range().end.cast::<libc::c_void>();
        let arg: *mut Shared = &mut *shared;
        // SAFETY: the entering process runs `enter_main` on its own stack inside
        // `shared` and has exited when this returns; the init it starts runs on
        // `shared` too, which is kept as below.
        let (_, enter_fd) = unsafe { clone_blocked(enter_main, top, libc::CLONE_VM | libc::CLONE_VFORK, arg.cast())? };
        block_reap(&enter_fd);
        let init = shared.enter.init_pid.load(Ordering::Acquire);
        if init <= 0 {
            // It reported why on the failure pipe: start the command the ordinary way.
            drop((out_w, err_w, fail_w));
            let why = read_failure(&fail_r).map(|c| io::Error::from_raw_os_error(c - ENTER_FAILED));
            tracing::debug!(target: "cheng::process", "the prepared namespace could not be entered ({why:?}); mounting the carve-outs");
            return spawn_isolated(&ChildSpec { enter: None, ..*spec });
        }
        // SAFETY: pidfd_open of our own unreaped child (`CLONE_PARENT`), whose pid
        // cannot be reused before we reap it.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, init, 0) } as RawFd;
        if fd < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: kill and reap our own child by pid, as above.
            unsafe {
                libc::kill(init, libc::SIGKILL);
                libc::waitpid(init, std::ptr::null_mut(), libc::__WALL);
            }
            return Err(e);
        }
        // SAFETY: the pidfd was just opened for us.
        (init, unsafe { OwnedFd::from_raw_fd(fd) })
    } else {
        let top = shared.init_stack.as_mut_ptr_range().end.cast::<libc::c_void>();
        // The mount namespace comes later, from the init itself (see `init_main`).
        let mut flags = libc::CLONE_VM | libc::CLONE_NEWUSER | libc::CLONE_NEWPID;
        if spec.netns {
            flags |= libc::CLONE_NEWNET;
        }
        let arg: *mut Shared = &mut *shared;
        // SAFETY: the init runs `init_main` on its own stack inside `shared`, which is kept
        // (in the returned `Child`, or until it is reaped below) for as long as it runs.
        unsafe { clone_blocked(init_main, top, flags, arg.cast())? }
    };
    drop((out_w, err_w, fail_w));
    // The pipe reaches its end when the command has exec'd (its copy closes on exec,
    // then the init closes its own), or carries the errno of the step that failed.
    // The strings the command's exec reads stay alive until then.
    let failed = read_failure(&fail_r);
    drop(p);
    drop(carve);
    if let Some(errno) = failed {
        // The init ends at once after a failure; its memory is freed after that.
        block_reap(&pidfd);
        return Err(io::Error::from_raw_os_error(errno));
    }
    Ok(Child { pid, pidfd, stdout: out_r, stderr: err_r, init: Some(InitMemory(shared)) })
}

/// `struct ifreq` as `SIOCSIFFLAGS` reads it: the name, then the flags (40 bytes).
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// `struct landlock_path_beneath_attr` (packed, as the kernel reads it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// A short line prepared for a raw `write`.
#[repr(C)]
struct Line {
    bytes: [u8; 48],
    len: usize,
}

impl Line {
    fn new(args: std::fmt::Arguments<'_>) -> Line {
        let text = args.to_string();
        let mut bytes = [0u8; 48];
        let len = text.len().min(48);
        bytes[..len].copy_from_slice(&text.as_bytes()[..len]);
        Line { bytes, len }
    }
}

/// What the exec'ing child reads.
#[repr(C)]
struct ChildData {
    stdin: RawFd,
    netns: bool,
    pdeathsig: bool,
    /// In its own user namespace: no capabilities across `execve`, even as uid 0.
    no_root: bool,
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

/// What the init reads (descriptors are the host's numbers, copied into its table).
#[repr(C)]
struct InitData {
    stdin: RawFd,
    stdout: RawFd,
    stderr: RawFd,
    fail: RawFd,
    cwd: RawFd,
    procs: RawFd,
    landlock: RawFd,
    proc_rights: u64,
    netns: bool,
    proxy: RawFd,
    uid_map: Line,
    gid_map: Line,
    carve: *const CarveC,
    carve_len: usize,
    /// The file bound over unreadable ones (`/dev/null` where none could be made).
    hidden: *const libc::c_char,
    /// Started by [`enter_main`] inside a prepared namespace: maps, working directory
    /// and carve-outs are there already.
    entered: bool,
}

/// One carve-out as the init reads it.
#[repr(C)]
struct CarveC {
    path: *const libc::c_char,
    kind: u8,
    locked: u64,
}

/// Everything an isolated child's init touches, in one allocation that outlives it.
#[repr(C)]
struct Shared {
    init: InitData,
    enter: EnterData,
    ifreq: IfReq,
    child: ChildData,
    /// The command's wait status, stored by the init before it exits.
    status: AtomicI32,
    /// 1 when the init mounted a `/proc` of its own.
    proc_private: AtomicI32,
    init_stack: [u128; STACK / 16],
    child_stack: [u128; STACK / 16],
    /// [`enter_main`]'s (it has exited before the init's command starts).
    enter_stack: [u128; STACK / 16],
}

/// Report the current errno on `fd` and end this process.
///
/// SAFETY: raw system calls only.
unsafe fn fail_with(fd: RawFd) -> ! {
    // SAFETY: errno is thread-local.
    unsafe { report_and_exit(fd, *libc::__errno_location()) }
}

/// Write `code` on `fd` (the failure pipe) and end this process.
///
/// SAFETY: raw system calls only.
unsafe fn report_and_exit(fd: RawFd, code: i32) -> ! {
    // SAFETY: write and _exit are plain system calls.
    unsafe {
        libc::write(fd, code.to_ne_bytes().as_ptr().cast(), 4);
        libc::_exit(127)
    }
}

/// Write `line` to the file at `path` (a `/proc/self` map).
///
/// SAFETY: raw system calls only; `path` is NUL-terminated.
unsafe fn write_proc(path: &[u8], line: &[u8]) -> bool {
    // SAFETY: open/write/close on a NUL-terminated path and a live buffer.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, line.as_ptr().cast(), line.len()) == line.len() as isize;
        libc::close(fd);
        ok
    }
}

/// Bring `lo` up in a fresh network namespace.
///
/// SAFETY: raw system calls only; `ifreq` points to a live `IfReq`.
unsafe fn bring_lo_up(ifreq: *const IfReq) -> bool {
    // SAFETY: a datagram socket for the ioctl, closed after.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        let ok = s >= 0 && libc::ioctl(s, libc::SIOCSIFFLAGS, ifreq) == 0;
        if s >= 0 {
            libc::close(s);
        }
        ok
    }
}

/// Open a TCP socket listening on `127.0.0.1:`[`super::proxy::PORT`] in this (new)
/// network namespace and send it on `to` (`SCM_RIGHTS`), then close it here.
///
/// SAFETY: raw system calls only, on stack buffers.
unsafe fn send_listener(to: RawFd) -> bool {
    // SAFETY: socket, bind, listen and sendmsg over local structures, as documented.
    unsafe {
        let sock = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if sock < 0 {
            return false;
        }
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = super::proxy::PORT.to_be();
        addr.sin_addr.s_addr = u32::from_ne_bytes([127, 0, 0, 1]);
        let ok = libc::bind(
            sock,
            (&addr as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) == 0
            && libc::listen(sock, 128) == 0;
        if !ok {
            libc::close(sock);
            return false;
        }
        let mut byte = [0u8; 1];
        let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
        let mut space = [0u64; 4];
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), sock);
        let sent = libc::sendmsg(to, &msg, libc::MSG_NOSIGNAL) == 1;
        libc::close(sock);
        sent
    }
}

/// Map the caller's uid and gid to the host's in its new user namespace, where the
/// kernel lets it (see `init_main`).
///
/// SAFETY: raw system calls only.
unsafe fn write_maps(uid_map: &Line, gid_map: &Line) {
    // SAFETY: NUL-terminated paths and in-bounds slices.
    unsafe {
        if write_proc(b"/proc/self/setgroups\0", b"deny") {
            let _ = write_proc(b"/proc/self/uid_map\0", &uid_map.bytes[..uid_map.len])
                && write_proc(b"/proc/self/gid_map\0", &gid_map.bytes[..gid_map.len]);
        }
    }
}

/// Make every mount of the caller's (new) mount namespace private, so nothing mounted
/// in it propagates back.
///
/// SAFETY: raw system calls only.
unsafe fn make_private() -> bool {
    // SAFETY: a mount call on a static path.
    unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) == 0
    }
}

/// Mount the carve-outs (`len` of them at `carve`, paths relative to the working
/// directory) in the caller's private mount namespace: each takes, or `false`.
///
/// SAFETY: raw system calls only; `carve` points at `len` entries whose paths, and
/// `hidden`, are NUL-terminated and alive.
unsafe fn mount_carves(carve: *const CarveC, len: usize, hidden: *const libc::c_char) -> bool {
    // SAFETY: as the contract says.
    unsafe {
        for i in 0..len {
            let c = &*carve.add(i);
            let ro = |target: *const libc::c_char, locked: u64| {
                libc::mount(
                    std::ptr::null(),
                    target,
                    std::ptr::null(),
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | locked as libc::c_ulong,
                    std::ptr::null(),
                ) == 0
            };
            let ok = match c.kind {
                0 => {
                    libc::mount(c.path, c.path, std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null()) == 0
                        && ro(c.path, c.locked)
                }
                1 => {
                    libc::mount(hidden, c.path, std::ptr::null(), libc::MS_BIND, std::ptr::null()) == 0
                        && ro(c.path, c.locked)
                }
                _ => {
                    libc::mount(
                        c"tmpfs".as_ptr(),
                        c.path,
                        c"tmpfs".as_ptr(),
                        libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        c"size=4k,mode=0555".as_ptr().cast(),
                    ) == 0
                }
            };
            if !ok {
                return false;
            }
        }
        true
    }
}

/// A user and mount namespace prepared once with a workspace's carve-outs, which
/// confined commands enter instead of mounting the carve-outs each time: the cost of
/// a command no longer grows with the number of protected paths. Held by its two
/// descriptors (the namespaces live as long as they are open). Each command still gets
/// a mount namespace of its own, copied from this one, for its `/proc`.
///
/// A carve-out is a mount on one directory entry: if that entry is renamed over,
/// removed or moved away, the kernel detaches the mount here too. Whoever keeps a
/// namespace must therefore drop it when anything happens to a carved path or one of
/// its parents ([`super::carve::Tree`] does, from its watches).
#[derive(Debug)]
pub struct Namespace {
    user: OwnedFd,
    mnt: OwnedFd,
}

/// What the namespace's maker reads and leaves.
#[repr(C)]
struct MakerData {
    root: RawFd,
    uid_map: Line,
    gid_map: Line,
    carve: *const CarveC,
    carve_len: usize,
    hidden: *const libc::c_char,
    user: AtomicI32,
    mnt: AtomicI32,
    errno: AtomicI32,
    stack: [u128; STACK / 16],
}

impl Namespace {
    /// Make the namespace: the carve-outs `carve` (paths relative to the workspace
    /// root, whose `O_PATH` handle is `root`) mounted in a new mount namespace owned by
    /// a new user namespace, both of which the host keeps a descriptor to.
    pub(crate) fn prepare(root: RawFd, carve: &[(CString, super::carve::Kind, u64)]) -> io::Result<Namespace> {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let carve_c: Vec<CarveC> =
            carve.iter().map(|(p, k, l)| CarveC { path: p.as_ptr(), kind: *k as u8, locked: *l }).collect();
        let mut data = Box::new(MakerData {
            root,
            uid_map: Line::new(format_args!("{uid} {uid} 1\n")),
            gid_map: Line::new(format_args!("{gid} {gid} 1\n")),
            carve: carve_c.as_ptr(),
            carve_len: carve_c.len(),
            hidden: super::carve::hidden().0.as_ptr(),
            user: AtomicI32::new(-1),
            mnt: AtomicI32::new(-1),
            errno: AtomicI32::new(0),
            stack: [0; STACK / 16],
        });
        let top = data.stack.as_mut_ptr_range().end.cast::<libc::c_void>();
        let arg: *mut MakerData = &mut *data;
        // SAFETY: the maker runs `maker_main` on the stack inside `data`, alive until
        // this returns (`CLONE_VFORK`: until the maker has exited). It shares our
        // descriptor table, so the two it opens are ours.
        let (_, pidfd) = unsafe {
            clone_blocked(
                maker_main,
                top,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::CLONE_NEWUSER,
                arg.cast(),
            )?
        };
        block_reap(&pidfd);
        // SAFETY: descriptors the maker opened in our table (or -1), ours alone now.
        let own = |fd: i32| (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) });
        let (user, mnt) = (own(data.user.load(Ordering::Acquire)), own(data.mnt.load(Ordering::Acquire)));
        match (user, mnt) {
            (Some(user), Some(mnt)) => Ok(Namespace { user, mnt }),
            _ => Err(match data.errno.load(Ordering::Acquire) {
                0 => io::Error::other("the carve-outs' namespace could not be made"),
                e => io::Error::from_raw_os_error(e),
            }),
        }
    }
}

/// The namespace maker: in its own user namespace (sharing the host's memory and
/// descriptor table), maps itself, makes a private mount namespace, mounts the
/// carve-outs and opens both namespaces. Never returns.
extern "C" fn maker_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the host's `MakerData`, alive until this process has exited.
    unsafe {
        let d = &*(arg as *const MakerData);
        let fail = || maker_failed(d);
        write_maps(&d.uid_map, &d.gid_map);
        if libc::fchdir(d.root) != 0 || libc::unshare(libc::CLONE_NEWNS) != 0 || !make_private() {
            fail();
        }
        if !mount_carves(d.carve, d.carve_len, d.hidden) {
            fail();
        }
        let user = libc::open(c"/proc/self/ns/user".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if user < 0 {
            fail();
        }
        d.user.store(user, Ordering::Release);
        let mnt = libc::open(c"/proc/self/ns/mnt".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        if mnt < 0 {
            fail();
        }
        d.mnt.store(mnt, Ordering::Release);
        libc::_exit(0)
    }
}

/// Leave the maker's errno for the host and end.
///
/// SAFETY: raw system calls only.
unsafe fn maker_failed(d: &MakerData) -> ! {
    // SAFETY: errno is thread-local; _exit is a plain system call.
    unsafe {
        d.errno.store(*libc::__errno_location(), Ordering::Release);
        libc::_exit(1)
    }
}

/// `struct open_how`, as `openat2` reads it.
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// What the process entering a prepared namespace reads.
#[repr(C)]
struct EnterData {
    user: RawFd,
    mnt: RawFd,
    /// The working directory's absolute path, resolved again inside the namespace.
    cwd_path: *const libc::c_char,
    /// The init's clone flags.
    flags: libc::c_int,
    /// The init's pid, once started.
    init_pid: AtomicI32,
}

/// The code [`enter_main`] reports its failures with (the errno is added), so the host
/// tells them from the command's and starts it the ordinary way instead.
const ENTER_FAILED: i32 = 1 << 20;

/// Enters the prepared namespace (user, then mount), goes to the working directory by
/// its path — with no symbolic link on the way, and checked to be the directory the
/// guard opened —, then starts the init in new pid and mount namespaces (and network,
/// when asked) as the host's child, and exits. Raw system calls only. Never returns.
extern "C" fn enter_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the host's `Shared`, alive until the init has been reaped; this
    // process has exited before the host goes on (`CLONE_VFORK`).
    unsafe {
        let s = arg as *mut Shared;
        let (fail, cwd) = ((*s).init.fail, (*s).init.cwd);
        let e = &(*s).enter;
        let errno = || *libc::__errno_location();
        if libc::setns(e.user, libc::CLONE_NEWUSER) != 0 || libc::setns(e.mnt, libc::CLONE_NEWNS) != 0 {
            enter_failed(fail, errno());
        }
        let how = OpenHow {
            flags: (libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) as u64,
            mode: 0,
            resolve: libc::RESOLVE_NO_SYMLINKS,
        };
        let dir = libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            e.cwd_path,
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        ) as libc::c_int;
        if dir < 0 {
            enter_failed(fail, errno());
        }
        let mut here: libc::stat = std::mem::zeroed();
        let mut guarded: libc::stat = std::mem::zeroed();
        if libc::fstat(dir, &mut here) != 0 || libc::fstat(cwd, &mut guarded) != 0 {
            enter_failed(fail, errno());
        }
        if here.st_dev != guarded.st_dev || here.st_ino != guarded.st_ino {
            enter_failed(fail, libc::ESTALE);
        }
        if libc::fchdir(dir) != 0 {
            enter_failed(fail, errno());
        }
        libc::close(dir);
        let top = (*s).init_stack.as_mut_ptr_range().end.cast::<libc::c_void>();
        let pid = libc::clone(init_main, top, e.flags, arg);
        if pid < 0 {
            enter_failed(fail, errno());
        }
        e.init_pid.store(pid, Ordering::Release);
        libc::_exit(0)
    }
}

/// Report a failure of [`enter_main`] (`ENTER_FAILED` + `errno`) on `fd` and end.
///
/// SAFETY: raw system calls only.
unsafe fn enter_failed(fd: RawFd, errno: i32) -> ! {
    // SAFETY: as `report_and_exit`.
    unsafe { report_and_exit(fd, ENTER_FAILED + errno) }
}

/// The isolated child's pid 1: raw system calls only (it shares the host's memory, and
/// runs beside it), every signal blocked throughout. Never returns.
extern "C" fn init_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the host's `Shared`, alive until this process has been reaped.
    unsafe {
        let s = &mut *(arg as *mut Shared);
        let d = &s.init;
        // Entered into a prepared namespace (`enter_main`): the maps, the working
        // directory, the private mounts and the carve-outs are already there.
        let private = if d.entered {
            true
        } else {
            // Its own uid and gid, mapped to the host's, where the kernel lets it write
            // the maps: a host running as root can; another user's cannot (this init
            // shares the host's memory, which is not dumpable, so its /proc files are
            // root's). Unmapped, the command runs as the overflow id inside its
            // namespace — files keep their real owners and access is checked as the
            // host's user all the same.
            write_maps(&d.uid_map, &d.gid_map);
            // The working directory first, from the guard's handle: a handle opened in
            // the host's mount namespace names a mount the new namespace does not have,
            // but the working directory is carried over when the namespace is made
            // (unshare).
            if libc::fchdir(d.cwd) != 0 || libc::unshare(libc::CLONE_NEWNS) != 0 {
                fail_with(d.fail);
            }
            // A /proc of its own pid namespace, over the host's, in its own mount
            // namespace (mounts made private first so nothing propagates back), showing
            // only the processes the command could trace: not this init, whose memory —
            // and so whose command line — is the host's, and not dumpable. Where the
            // kernel refuses (one older than 5.8, or a /proc partly hidden by the
            // machine's own runtime), it goes on with what it could mount: the
            // namespaces still hold, and the host's environment and memory stay
            // unreadable.
            let private = make_private();
            // The carve-outs, in this namespace only (mounts are private now): each
            // takes, or the command does not start.
            if !private && d.carve_len > 0 {
                fail_with(d.fail);
            }
            if !mount_carves(d.carve, d.carve_len, d.hidden) {
                fail_with(d.fail);
            }
            private
        };
        if private {
            let proc_ = |data: *const libc::c_char| {
                libc::mount(
                    c"proc".as_ptr(),
                    c"/proc".as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    data.cast(),
                ) == 0
            };
            // `ptraceable`: a process is listed only to those who may trace it — not
            // `invisible`, which shows everything to members of the mount's group (root's
            // group by default, which a root host's children are in).
            if proc_(c"hidepid=ptraceable".as_ptr()) {
                s.proc_private.store(1, Ordering::Release);
            } else {
                proc_(std::ptr::null());
            }
        }
        if d.netns && !bring_lo_up(&s.ifreq) {
            fail_with(d.fail);
        }
        if d.netns && d.proxy >= 0 && !send_listener(d.proxy) {
            fail_with(d.fail);
        }
        // Ends with the host's thread that started it; the namespace ends with it.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            fail_with(d.fail);
        }
        if d.procs >= 0 && libc::write(d.procs, b"0\n".as_ptr().cast(), 2) < 0 {
            fail_with(d.fail);
        }
        // The command's descriptors at 0-3 (through copies above them, so no source is
        // overwritten first), then nothing else of the host's: its table was copied
        // whole at the clone.
        let hi = |fd: RawFd| libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10);
        let (i, o, e, f) = (hi(d.stdin), hi(d.stdout), hi(d.stderr), hi(d.fail));
        if i < 0 || o < 0 || e < 0 || f < 0 {
            fail_with(d.fail);
        }
        if libc::dup2(i, 0) < 0 || libc::dup2(o, 1) < 0 || libc::dup2(e, 2) < 0 || libc::dup2(f, 3) < 0 {
            fail_with(d.fail);
        }
        libc::fcntl(3, libc::F_SETFD, libc::FD_CLOEXEC);
        if d.landlock >= 0 {
            // Its own /proc, readable where the plan reads /proc (an error leaves it
            // unreadable: the safe side).
            if d.proc_rights != 0 && s.proc_private.load(Ordering::Acquire) == 1 {
                let fd = libc::open(c"/proc".as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC);
                if fd >= 0 {
                    let attr = PathBeneathAttr { allowed_access: d.proc_rights, parent_fd: fd };
                    libc::syscall(
                        libc::SYS_landlock_add_rule,
                        d.landlock,
                        1u32, // LANDLOCK_RULE_PATH_BENEATH
                        &attr as *const PathBeneathAttr,
                        0u32,
                    );
                    libc::close(fd);
                }
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                fail_with(3);
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, d.landlock, 0u32) != 0 {
                fail_with(3);
            }
        }
        if libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) != 0 {
            fail_with(3);
        }
        let top = s.child_stack.as_mut_ptr_range().end.cast::<libc::c_void>();
        let pid = libc::clone(
            child_main,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&mut s.child as *mut ChildData).cast(),
        );
        if pid < 0 {
            fail_with(3);
        }
        // The command has exec'd or failed (reported on 3); the init keeps nothing.
        for fd in 0..4 {
            libc::close(fd);
        }
        loop {
            let mut status = 0;
            let r = libc::waitpid(-1, &mut status, libc::__WALL);
            if r == pid {
                s.status.store(status, Ordering::Release);
                break;
            }
            if r < 0 && *libc::__errno_location() != libc::EINTR {
                break;
            }
        }
        libc::_exit(0)
    }
}

/// The child that execs: raw system calls only, then `execve`. Never returns.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is a `ChildData`, alive while its parent is suspended (vfork).
    unsafe {
        let d = &*(arg as *const ChildData);
        // Handlers first (we share the parent's memory), then the mask.
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
            fail_with(d.fail);
        }
        // A session of its own: a new process group, and no controlling terminal.
        if libc::setsid() < 0 {
            fail_with(d.fail);
        }
        if d.pdeathsig && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
            fail_with(d.fail);
        }
        if d.netns {
            // A user namespace to own a network namespace with nothing but loopback.
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 || !bring_lo_up(d.ifreq) {
                fail_with(d.fail);
            }
        }
        if libc::dup2(d.stdin, 0) < 0 || libc::dup2(d.stdout, 1) < 0 || libc::dup2(d.stderr, 2) < 0 {
            fail_with(d.fail);
        }
        if d.cwd >= 0 && libc::fchdir(d.cwd) != 0 {
            fail_with(d.fail);
        }
        if d.landlock >= 0 {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                fail_with(d.fail);
            }
            if libc::syscall(libc::SYS_landlock_restrict_self, d.landlock, 0u32) != 0 {
                fail_with(d.fail);
            }
        }
        // A root host's command is uid 0 in its namespace: it execs without the
        // capabilities root would get, so file modes bind it as they bind anyone (the
        // path rules' unreadable stand-in refuses it too). Best effort: where the kernel
        // refuses, the namespace's bounds still hold.
        if d.no_root {
            const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
            const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
            libc::prctl(libc::PR_SET_SECUREBITS, SECBIT_NOROOT | SECBIT_NOROOT_LOCKED, 0, 0, 0);
        }
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::execve(d.program, d.argv, d.envp);
        fail_with(d.fail)
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
pub async fn wait(pidfd: &tokio::io::unix::AsyncFd<OwnedFd>, init: Option<&InitMemory>) -> io::Result<Exit> {
    loop {
        let mut guard = pidfd.readable().await?;
        match try_reap(pidfd.get_ref().as_raw_fd(), init)? {
            Some(e) => return Ok(e),
            None => guard.clear_ready(),
        }
    }
}

/// Reap the child behind `pidfd` if it has ended. For an isolated child, how the
/// command itself ended (the init passes it on); an init killed before its command
/// ended reads as `SIGKILL`.
pub fn try_reap(pidfd: RawFd, init: Option<&InitMemory>) -> io::Result<Option<Exit>> {
    // SAFETY: waitid with a zeroed siginfo to fill.
    let (code, status) = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(libc::P_PIDFD, pidfd as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG);
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        if info.si_pid() == 0 {
            return Ok(None);
        }
        (info.si_code, info.si_status())
    };
    Ok(Some(match init {
        None if code == libc::CLD_EXITED => Exit::Code(status),
        None => Exit::Signal(status),
        Some(m) => match m.status() {
            Some(s) if libc::WIFEXITED(s) => Exit::Code(libc::WEXITSTATUS(s)),
            Some(s) if libc::WIFSIGNALED(s) => Exit::Signal(libc::WTERMSIG(s)),
            _ => Exit::Signal(libc::SIGKILL),
        },
    }))
}

/// Owns a child's pidfd (and an isolated child's init memory); reaps the child on drop
/// if nobody did (a dropped call), in the background so that drop never blocks.
pub struct Reaper {
    /// The pidfd, registered with the runtime.
    pub fd: Option<tokio::io::unix::AsyncFd<OwnedFd>>,
    /// Whether the child has been reaped.
    pub reaped: bool,
    init: Option<InitMemory>,
}

impl Reaper {
    /// Take over `child`'s pidfd and init memory.
    pub fn new(pidfd: OwnedFd, init: Option<InitMemory>) -> Self {
        // SAFETY: the pidfd is owned by the AsyncFd for as long as it is registered.
        let fd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) };
        Reaper { fd: fd.ok(), reaped: false, init }
    }

    /// Wait for the child to end (and reap it).
    pub async fn wait(&mut self) -> io::Result<Exit> {
        let Some(fd) = self.fd.as_ref() else { return Err(io::Error::other("the child's pidfd is gone")) };
        let e = wait(fd, self.init.as_ref()).await;
        self.reaped = e.is_ok();
        e
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        let init = self.init.take();
        if self.reaped {
            return;
        }
        if let Some(fd) = self.fd.take() {
            let fd = fd.into_inner();
            if let Ok(Some(_)) = try_reap(fd.as_raw_fd(), init.as_ref()) {
                return;
            }
            std::thread::spawn(move || {
                block_reap(&fd);
                // Only now is the init's memory no longer in use.
                drop(init);
            });
        } else if let Some(init) = init {
            // No pidfd to wait on: keep the memory rather than free it under a runner.
            std::mem::forget(init);
        }
    }
}
