//! The Landlock ruleset a command runs under (Linux): the whole filesystem readable and
//! executable, writes only beneath the workspace, the command's private temporary
//! directory, a few device files and the caches the operator lists. Linking or renaming
//! a file from outside those trees into them is refused too (Landlock's `Refer` right
//! is only given inside them), so a hard link cannot smuggle an outside file in.
//!
//! The ruleset is built in the host before the fork; the child only calls
//! `landlock_restrict_self` (after `no_new_privs`) between `fork` and `exec`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr,
};

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

/// Device files a command may write.
const DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"];

/// Build the ruleset for a command. `writable` are the workspace, the private temp dir
/// and the operator's cache folders (those that do not exist are skipped).
pub fn ruleset(writable: &[PathBuf]) -> Result<RulesetCreated, String> {
    let abi = ABI::V5;
    let all = AccessFs::from_all(abi);
    let read = AccessFs::from_read(abi);
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?;
    let root = PathFd::new("/").map_err(|e| e.to_string())?;
    rs = rs.add_rule(PathBeneath::new(root, read)).map_err(|e| e.to_string())?;
    for dev in DEVICES {
        if let Ok(fd) = PathFd::new(dev) {
            let rights = if Path::new(dev).is_dir() { all } else { AccessFs::from_file(abi) };
            rs = rs.add_rule(PathBeneath::new(fd, rights)).map_err(|e| e.to_string())?;
        }
    }
    for dir in writable {
        if let Ok(fd) = PathFd::new(dir) {
            rs = rs.add_rule(PathBeneath::new(fd, all)).map_err(|e| e.to_string())?;
        }
    }
    Ok(rs)
}

/// Apply `rs` to the calling process. Runs in the child between `fork` and `exec`.
pub fn restrict_in_child(rs: RulesetCreated) -> std::io::Result<()> {
    rs.restrict_self().map(|_| ()).map_err(|_| std::io::Error::from_raw_os_error(libc::EPERM))
}
