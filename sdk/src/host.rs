//! Typed calls into the host: approvals, processes, git operations, per-run state and
//! logging.
//!
//! Each is a capability the host checks: a component that was not granted process
//! spawning gets a `NotGranted` failure from [`run_process`], and the refusal is
//! recorded.

use crate::Failure;
use crate::wit::cheng::tool::{approval, git, log as wlog, process, run_state};

/// What a directory entry is, and one entry from [`read_dir`] (the contract's types).
pub use cheng_contract::entries::{DirEntry, EntryKind};
/// A command for the host to run ([`run_process`]), what happened to it, how it ended,
/// and what that says ([`Outcome::verdict`]) — the contract's types, so every tool that
/// runs a command words its outcome the same way.
pub use cheng_contract::process::{
    CommandOutcome as Outcome, CommandRequest as Command, MAX_TIMEOUT_MS, Termination, Verdict, signal_name,
};

/// The typed git operations [`git_write`] takes, as the `cheng:tool/git` interface
/// defines them.
pub use crate::wit::cheng::tool::git::{
    BranchDeleteOptions, CommitOptions, Operation as GitOperation, StashPushOptions, SwitchOptions, TagOptions,
    WriteOutcome as GitOutcome, WriteRequest as GitRequest,
};

/// A person's answer to an approval request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Go ahead.
    Approved,
    /// Do not.
    Declined,
    /// Nobody answered in time; treat as declined.
    TimedOut,
}

/// Ask a person to approve an action, and wait for the answer.
///
/// `summary` is one line (shown first), `detail` the exact action, `purpose` why.
pub fn request_approval(summary: &str, detail: &str, purpose: &str) -> Decision {
    let req = approval::ApprovalRequest {
        summary: summary.to_string(),
        detail: detail.to_string(),
        purpose: purpose.to_string(),
    };
    match approval::request(&req) {
        approval::Decision::Approved => Decision::Approved,
        approval::Decision::Declined => Decision::Declined,
        approval::Decision::TimedOut => Decision::TimedOut,
    }
}

/// Ask the host to change a repository in the workspace: the host checks every path
/// and name, asks a person unless the operator's git rules decide, and runs its own git
/// with the repository's hooks, filters and configured programs switched off. A git that
/// ran and failed is an `Ok` outcome with its exit code; a refusal is an `Err`.
pub fn git_write(req: &GitRequest) -> Result<GitOutcome, Failure> {
    git::write(req).map_err(Failure::from_wit)
}

/// Ask the host to run a command (policy, approval, confinement and caps are the host's).
pub fn run_process(cmd: &Command) -> Result<Outcome, Failure> {
    process::run(&cmd.clone().into()).map(Outcome::from).map_err(Failure::from_wit)
}

/// Read a per-run value this component stored earlier in the same run.
pub fn state_get(key: &str) -> Option<String> {
    run_state::get(key)
}

/// Store a per-run value (kept by the host, outside the workspace).
pub fn state_set(key: &str, value: &str) -> Result<(), Failure> {
    run_state::set(key, value).map_err(Failure::from_wit)
}

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Very detailed.
    Trace,
    /// Debugging.
    Debug,
    /// Information.
    Info,
    /// Unexpected but survivable.
    Warn,
    /// Failed.
    Error,
}

/// Write a line to the host's log (never into a tool result).
pub fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => wlog::Level::Trace,
        Level::Debug => wlog::Level::Debug,
        Level::Info => wlog::Level::Info,
        Level::Warn => wlog::Level::Warn,
        Level::Error => wlog::Level::Error,
    };
    wlog::log(level, message);
}

/// What [`write_file`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteResult {
    /// The file did not exist before.
    pub created: bool,
    /// Bytes written.
    pub bytes_written: u64,
}

/// Write a whole workspace file atomically through the host: readers (and crashes) see
/// the old file or the new one, never a mix, and the file keeps its permission bits.
/// `path` is relative to the workspace root; it must lie under a read-write grant and
/// must not be protected (see [`crate::Context::is_protected`]).
pub fn write_file(path: &str, contents: &[u8], create_dirs: bool, overwrite: bool) -> Result<WriteResult, Failure> {
    let r =
        crate::wit::cheng::tool::fs::write_file(path, contents, create_dirs, overwrite).map_err(Failure::from_wit)?;
    Ok(WriteResult { created: r.created, bytes_written: r.bytes_written })
}

/// Remove a workspace file through the host (same rules as [`write_file`]).
pub fn remove_file(path: &str) -> Result<(), Failure> {
    crate::wit::cheng::tool::fs::remove_file(path).map_err(Failure::from_wit)
}

/// Ask the host whether this call may write every one of `paths` (within its grant, and
/// none of them protected), before writing any: for all-or-nothing changes to several
/// files. The first refusal comes back as the failure the write would have given.
pub fn may_write(paths: &[String]) -> Result<(), Failure> {
    crate::wit::cheng::tool::fs::may_write(paths).map_err(Failure::from_wit)
}

/// List a workspace directory in one host call, sorted by name: the fast way to walk
/// (one call per directory instead of several per entry), and the only way to see names
/// that are not valid UTF-8. `path` is relative to the workspace root; `sizes` asks for
/// file sizes (they cost the host one more system call per file).
pub fn read_dir(path: &str, sizes: bool) -> Result<Vec<DirEntry>, Failure> {
    use crate::wit::cheng::tool::fs as wfs;
    let list = wfs::read_dir(path, sizes).map_err(Failure::from_wit)?;
    Ok(list.into_iter().map(DirEntry::from).collect())
}

/// One directory entry with its `lstat`, from [`stat_dirs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryStat {
    /// The name; bytes that are not UTF-8 are escaped as `\xNN`.
    pub name: String,
    /// False when the name had to be escaped.
    pub valid_utf8: bool,
    /// What it is (a symbolic link is described, not followed).
    pub kind: EntryKind,
    /// File type and permission bits (`st_mode`).
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
    /// Last modification: seconds since the epoch and nanoseconds.
    pub mtime: (i64, u32),
    /// Last status change: seconds since the epoch and nanoseconds.
    pub ctime: (i64, u32),
    /// Device number.
    pub device: u64,
    /// Inode number.
    pub inode: u64,
    /// Owner id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// List many workspace directories in one host call, each sorted by name with every
/// entry's metadata: what a tool needs to tell changed files from unchanged ones
/// without opening them (a version-control status, a build's freshness check). Each
/// directory succeeds or fails alone.
pub fn stat_dirs(paths: &[String]) -> Vec<Result<Vec<EntryStat>, Failure>> {
    use crate::wit::cheng::tool::fs as wfs;
    let one = |e: wfs::EntryStat| EntryStat {
        name: e.name,
        valid_utf8: e.valid_utf8,
        kind: e.kind.into(),
        mode: e.mode,
        size: e.size,
        mtime: (e.mtime_seconds, e.mtime_nanoseconds),
        ctime: (e.ctime_seconds, e.ctime_nanoseconds),
        device: e.device,
        inode: e.inode,
        uid: e.uid,
        gid: e.gid,
    };
    wfs::stat_dirs(paths)
        .into_iter()
        .map(|r| r.map_err(Failure::from_wit).map(|list| list.into_iter().map(one).collect()))
        .collect()
}

/// Read a whole workspace file in one host call (the fast way: one call instead of an
/// open, a stat and several reads through WASI). `path` may be what a model sent: the
/// host applies the workspace rules (and quotes `path` in its refusals). Files larger
/// than `max_bytes` fail with [`crate::ErrorKind::TooLarge`].
pub fn read_file(path: &str, max_bytes: u64) -> Result<Vec<u8>, Failure> {
    crate::wit::cheng::tool::fs::read_file(path, max_bytes).map_err(Failure::from_wit)
}

/// Whether this call may read the contents of each of `paths`, asked of the host before
/// reading any by another route than [`read_file`] (streaming a file through the
/// component's own mount): the grant and the path rules apply, and a protected file is
/// asked of a person (once per call). The first refusal comes back.
pub fn may_read(paths: &[String]) -> Result<(), Failure> {
    crate::wit::cheng::tool::fs::may_read(paths).map_err(Failure::from_wit)
}

/// Read many workspace files as [`read_files`] does, without ever asking a person: a
/// file the host's path rules protect from reading is not read, and its entry fails
/// with [`crate::ErrorKind::NotGranted`]. For a tool that reads files nobody named one
/// by one (a search): it skips those and says how many.
pub fn read_unprotected(paths: &[String], max_bytes_each: u64) -> Vec<Result<Vec<u8>, Failure>> {
    crate::wit::cheng::tool::fs::read_unprotected(paths, max_bytes_each)
        .into_iter()
        .map(|r| r.map_err(Failure::from_wit))
        .collect()
}

/// What the host's path rules say of one access to a file (see [`path_rules`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRule {
    /// Nothing stands in the way (or a person already answered for this call or run).
    Allow,
    /// Reading (or writing) it asks a person first.
    Ask,
    /// It is refused.
    Refuse,
}

/// What the host's path rules say of reading (or, with `write`, changing) each of
/// `paths`, without asking anyone. A tool that reads many files skips the ones that
/// are not [`PathRule::Allow`] and says how many it skipped, rather than asking a person
/// once per file (reading such a file still asks).
pub fn path_rules(paths: &[String], write: bool) -> Vec<PathRule> {
    use crate::wit::cheng::tool::fs::{self as wfs, PathRule as W};
    wfs::path_rules(paths, write)
        .into_iter()
        .map(|r| match r {
            W::Allow => PathRule::Allow,
            W::Ask => PathRule::Ask,
            W::Refuse => PathRule::Refuse,
        })
        .collect()
}

/// Read many workspace files in one host call; each entry succeeds or fails alone.
pub fn read_files(paths: &[String], max_bytes_each: u64) -> Vec<Result<Vec<u8>, Failure>> {
    crate::wit::cheng::tool::fs::read_files(paths, max_bytes_each)
        .into_iter()
        .map(|r| r.map_err(Failure::from_wit))
        .collect()
}
