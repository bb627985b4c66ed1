//! The Landlock ruleset a command runs under (Linux), at the best ABI the kernel offers.
//!
//! Every command: writes only beneath the workspace, its private temporary directory,
//! a few device files and the caches the operator lists (linking or renaming a file in
//! from elsewhere is refused too, since Landlock's `Refer` right is only given inside
//! them, so a hard link cannot smuggle an outside file in), and no signals to processes
//! outside its own sandbox (ABI 6 scoping), so it cannot kill or stop the host.
//!
//! A command nobody answered for ([`super::Tier::Unasked`]) is tighter: it reads and
//! executes only beneath the system directories, the workspace, its temp dir, the
//! caches and the listed toolchains (`[process] readable`) — not the user's home,
//! other projects, keys or the host's own files — reaches no TCP port (ABI 4) unless
//! its rule grants the network, and cannot connect to abstract Unix sockets outside its
//! sandbox (ABI 6). A command a person approved reads what the host's user can and
//! keeps the network.
//!
//! The ruleset is built in the host before the child starts; the child only calls
//! `landlock_restrict_self` (after `no_new_privs`) between `clone` and `exec`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr, Scope,
};

/// The newest Landlock ABI this host asks for: 7 (Linux 6.15). Newer ABIs add rights
/// (Unix socket resolution, UDP) that would change what commands can do without a
/// decision here, so they are taken on deliberately, not by default.
const ABI_WANTED: ABI = ABI::V7;

/// The Landlock ABI the running kernel offers, if any (probed once).
pub fn abi_version() -> Option<i32> {
    static V: OnceLock<Option<i32>> = OnceLock::new();
    *V.get_or_init(|| {
        // landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
        // SAFETY: the version query takes no pointers.
        let v = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<u8>(), 0usize, 1u32) };
        if v > 0 {
            Some(v as i32)
        } else {
            tracing::warn!(
                target: "cheng::process",
                "Landlock is not available on this kernel: commands run without filesystem confinement \
                 (only their working directory, environment and time are controlled)"
            );
            None
        }
    })
}

/// The ABI a ruleset is enforced at here: the kernel's, up to [`ABI_WANTED`].
pub fn effective_abi() -> Option<i32> {
    abi_version().map(|v| v.min(7))
}

/// What this kernel lets the host confine, in words (for `cheng settings` and logs).
pub fn describe() -> String {
    match effective_abi() {
        None => "unavailable: commands run without filesystem confinement".to_string(),
        Some(v) => {
            let mut parts = vec![format!("Landlock ABI {v}: filesystem")];
            if v >= 4 {
                parts.push("TCP for unasked commands".into());
            }
            if v >= 6 {
                parts.push("signals and abstract sockets scoped".into());
            }
            parts.join(", ")
        }
    }
}

/// Device files a command may read and write.
const DEVICES: &[&str] =
    &["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"];

/// System directories a command that nobody approved may read and execute from.
pub const SYSTEM_READABLE: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/nix/store",
    "/snap",
];

/// What one command may touch.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Trees it may write (the workspace, its temp dir, caches). Missing ones are skipped.
    pub writable: Vec<PathBuf>,
    /// Trees it may read besides those: `None` for everything (an approved command).
    pub readable: Option<Vec<PathBuf>>,
    /// Whether it may bind and connect TCP sockets.
    pub network: bool,
    /// Without `network`: TCP ports it may still connect to (the proxy of a command
    /// granted named hosts, in its own network namespace).
    pub connect: Vec<u16>,
    /// The system trees it reads besides `readable` (when that is `Some`): `None` for
    /// [`SYSTEM_READABLE`].
    pub system: Option<Vec<PathBuf>>,
    /// The only files and trees it may execute from (a program, its ELF interpreter,
    /// its helper directory); `None` for everything it may read. With a list, nothing
    /// it reads or writes elsewhere can be executed — not a hook, not `/bin/sh`.
    pub execute: Option<Vec<PathBuf>>,
}

/// Build the ruleset for `plan`.
pub fn ruleset(plan: &Plan) -> Result<RulesetCreated, String> {
    let e = |e: landlock::RulesetError| e.to_string();
    let exec_limited = plan.execute.is_some();
    let strip = |r: landlock::BitFlags<AccessFs>| if exec_limited { r & !AccessFs::Execute } else { r };
    let all = strip(AccessFs::from_all(ABI_WANTED));
    let read = strip(AccessFs::from_read(ABI_WANTED));
    let mut scopes: landlock::BitFlags<Scope> = Scope::Signal.into();
    if plan.readable.is_some() {
        scopes |= Scope::AbstractUnixSocket;
    }
    let mut attr = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(ABI_WANTED))
        .map_err(e)?;
    if !plan.network {
        attr = attr.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp).map_err(e)?;
    }
    let mut rs = attr.scope(scopes).map_err(e)?.create().map_err(e)?;
    if !plan.network {
        for port in &plan.connect {
            rs = rs.add_rule(landlock::NetPort::new(*port, AccessNet::ConnectTcp)).map_err(e)?;
        }
    }
    match &plan.readable {
        None => rs = rs.add_rule(PathBeneath::new(PathFd::new("/").map_err(|x| x.to_string())?, read)).map_err(e)?,
        Some(dirs) => {
            let default_system: Vec<PathBuf> = SYSTEM_READABLE.iter().map(PathBuf::from).collect();
            let system = plan.system.as_ref().unwrap_or(&default_system);
            for path in system.iter().chain(dirs.iter()).map(PathBuf::as_path) {
                // A file (such as `~/.gitconfig`) takes only the rights a file has.
                let rights = if path.is_dir() { read } else { read & AccessFs::from_file(ABI_WANTED) };
                if let Ok(fd) = PathFd::new(path) {
                    rs = rs.add_rule(PathBeneath::new(fd, rights)).map_err(e)?;
                }
            }
        }
    }
    for dev in DEVICES {
        if let Ok(fd) = PathFd::new(dev) {
            let rights = if Path::new(dev).is_dir() { all } else { AccessFs::from_file(ABI_WANTED) };
            rs = rs.add_rule(PathBeneath::new(fd, rights)).map_err(e)?;
        }
    }
    for dir in &plan.writable {
        if let Ok(fd) = PathFd::new(dir) {
            rs = rs.add_rule(PathBeneath::new(fd, all)).map_err(e)?;
        }
    }
    for path in plan.execute.iter().flatten() {
        let exec = AccessFs::from_read(ABI_WANTED);
        let rights = if path.is_dir() { exec } else { exec & AccessFs::from_file(ABI_WANTED) };
        if let Ok(fd) = PathFd::new(path) {
            rs = rs.add_rule(PathBeneath::new(fd, rights)).map_err(e)?;
        }
    }
    Ok(rs)
}

/// The Landlock rights on the `/proc` a child mounts for its own pid namespace, when
/// `plan` lets it read `/proc` at all (0 otherwise): reading files and listing, nothing
/// more. A rule made here on the host's `/proc` does not reach that mount (Landlock
/// ignores rules on a mount point that another mount hides), so the child's init adds
/// this one to the ruleset after mounting it, before enforcing it.
pub fn proc_rights(plan: &Plan) -> u64 {
    let default_system: Vec<PathBuf> = SYSTEM_READABLE.iter().map(PathBuf::from).collect();
    let reads_proc = plan.readable.is_some()
        && plan.system.as_ref().unwrap_or(&default_system).iter().any(|p| p == Path::new("/proc"));
    match reads_proc {
        true => (AccessFs::ReadFile | AccessFs::ReadDir).bits(),
        false => 0,
    }
}
