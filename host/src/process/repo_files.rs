//! The files of a repository the host reads itself before it runs git: its
//! configuration and every file that configuration includes, a `.git` file, a
//! worktree's `commondir`, `HEAD` and refs ([`super::git`] for every git the host
//! starts, [`super::git_write`] for `workspace_git_write`).
//!
//! The workspace's commands write these files, so any of them may be a FIFO (whose
//! open blocks until a writer comes, for good), a link to `/dev/zero` (endless) or a
//! file of gigabytes — and they are read while a call is being prepared, before anyone
//! is asked, so even a call a person then declines would hang. Each one is read by the
//! guard's rules instead, and a file that breaks them refuses the call with an error
//! naming it:
//! - its path is resolved by the kernel the way git resolves it (links followed, `..`
//!   after them), without opening anything;
//! - inside the workspace the resolved path is read through the workspace guard
//!   ([`Guard::read`]): beneath the root with no link or mount point on the way, a
//!   regular file (judged on its handle before it is opened for reading, so a FIFO's
//!   open never blocks), opened non-blocking, at most the kind's cap;
//! - outside the workspace — an include naming an outside file, a linked worktree
//!   whose git directory is elsewhere — by the host's bounded reader
//!   ([`hostfile::read`]), under the same three rules. Such files are read rather than
//!   refused: a workspace that is a linked worktree of a repository elsewhere is common,
//!   and git would read them anyway.
//!
//! A missing file is `None`, as git treats a missing include. At most [`MAX_FILES`]
//! files are read for one call.

use std::path::{Component, Path, PathBuf};

use super::Refusal;
use crate::ErrorKind;
use crate::guard::{Guard, GuardError, ReadError};
use crate::policy::hostfile::{self, HostFileError};

/// A kind of file the host reads from a repository: its cap, and what it is to a reader.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kind {
    /// The most bytes it may hold.
    pub cap: u64,
    /// What it is, for messages: "the repository's configuration".
    pub what: &'static str,
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// `config` (and `config.worktree`) of a repository.
pub(crate) const CONFIG: Kind = Kind { cap: MIB, what: "the repository's configuration" };
/// A file a configuration includes (`include.path`, `includeIf.*.path`).
pub(crate) const INCLUDED: Kind = Kind { cap: MIB, what: "a file the repository's configuration includes" };
/// A `.git` file (`gitdir: ...`).
pub(crate) const DOTGIT: Kind = Kind { cap: 64 * KIB, what: "a .git file" };
/// A linked worktree's `commondir`.
pub(crate) const COMMONDIR: Kind = Kind { cap: 64 * KIB, what: "a worktree's commondir file" };
/// `HEAD`.
pub(crate) const HEAD: Kind = Kind { cap: 64 * KIB, what: "the repository's HEAD" };
/// A loose ref.
pub(crate) const REF: Kind = Kind { cap: 64 * KIB, what: "a ref" };
/// `packed-refs` (one line per ref: large repositories have hundreds of thousands).
pub(crate) const PACKED_REFS: Kind = Kind { cap: 64 * MIB, what: "the repository's packed refs" };

/// The most files read for one call (configuration files and includes together).
pub(crate) const MAX_FILES: usize = 256;

/// The text of the file at `path` (absolute) as git would read it, by the guard's rules;
/// `None` when nothing is there.
pub(crate) fn read(guard: &Guard, path: &Path, kind: Kind) -> Result<Option<String>, Refusal> {
    let root = guard.root();
    if !path.is_absolute() {
        // Only from an include under `~/` with no home to expand it: git cannot read it either.
        return Ok(None);
    }
    let real = match std::fs::canonicalize(path) {
        Ok(r) => r,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => {
            return Ok(None);
        }
        Err(e) => return Err(refuse(root, path, None, kind, ErrorKind::Io, &format!("cannot be resolved ({e})"))),
    };
    let via = (real != lexically_normal(path)).then_some(real.as_path());
    let bytes = match real.strip_prefix(root) {
        Ok(rel) => {
            let Some(rel) = rel.to_str() else {
                return Err(refuse(root, path, via, kind, ErrorKind::PathRefused, "has a name that is not UTF-8"));
            };
            match guard.read(if rel.is_empty() { "." } else { rel }, kind.cap) {
                Ok(b) => b,
                Err(ReadError::Guard(GuardError::NotFound { .. })) => return Ok(None),
                Err(e) => {
                    let (ek, problem) = guard_problem(&e);
                    return Err(refuse(root, path, via, kind, ek, &problem));
                }
            }
        }
        Err(_) => match hostfile::read(&real, hostfile::Limit::new(kind.cap, kind.what)) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => {
                let (ek, problem) = hostfile_problem(&e, kind);
                return Err(refuse(root, path, via, kind, ek, &problem));
            }
        },
    };
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// `path` with `.` segments dropped and `..` taken back lexically (for telling whether
/// resolving it followed a link).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Why the guard would not read a file, as the end of a sentence about it.
fn guard_problem(e: &ReadError) -> (ErrorKind, String) {
    match e {
        ReadError::NotRegular(_, t) => (ErrorKind::PathRefused, format!("is a {t}, not a regular file")),
        ReadError::IsDir(_) => (ErrorKind::PathRefused, "is a directory, not a regular file".into()),
        ReadError::TooLarge { size, max, .. } => {
            (ErrorKind::TooLarge, format!("is {}, over the {} limit", size_text(*size), size_text(*max)))
        }
        ReadError::Guard(GuardError::Symlink { .. }) => {
            (ErrorKind::PathRefused, "changed into a symbolic link while it was read".into())
        }
        ReadError::Guard(GuardError::MountPoint { .. }) => {
            (ErrorKind::PathRefused, "lies beyond a mount point inside the workspace".into())
        }
        ReadError::Guard(g) => (g.kind(), format!("cannot be read ({g})")),
        ReadError::Io(m) => (ErrorKind::Io, format!("cannot be read ({m})")),
        other => (other.kind(), format!("cannot be read ({other})")),
    }
}

/// Why the host's reader would not read a file outside the workspace.
fn hostfile_problem(e: &HostFileError, kind: Kind) -> (ErrorKind, String) {
    match e {
        HostFileError::NotRegular { found, .. } => {
            (ErrorKind::PathRefused, format!("is a {found}, not a regular file"))
        }
        HostFileError::TooLarge { size: Some(size), .. } => {
            (ErrorKind::TooLarge, format!("is {}, over the {} limit", size_text(*size), size_text(kind.cap)))
        }
        HostFileError::TooLarge { size: None, .. } => {
            (ErrorKind::TooLarge, format!("grew past the {} limit while it was read", size_text(kind.cap)))
        }
        HostFileError::Io { source, .. } => (ErrorKind::Io, format!("cannot be read ({source})")),
        other => (ErrorKind::Io, format!("cannot be read ({other})")),
    }
}

/// The refusal for a file the host would not read: what it is, where (through a link
/// to where), what is wrong with it, and what to do.
fn refuse(root: &Path, path: &Path, via: Option<&Path>, kind: Kind, ek: ErrorKind, problem: &str) -> Refusal {
    let shown = |p: &Path| match p.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => p.display().to_string(),
    };
    let via = via.map(|v| format!(" (which resolves to \"{}\")", shown(v))).unwrap_or_default();
    Refusal::new(
        ek,
        format!(
            "git cannot run here: the host reads {}, \"{}\"{via}, before it runs git, and that file {problem}; it \
             reads only regular files of at most {} there. Nothing ran. Fix or remove the file (or ask the person to), \
             then try again",
            kind.what,
            shown(path),
            size_text(kind.cap)
        ),
    )
}

/// A byte count for people: "23 bytes", "64 KiB", "2.0 MiB".
fn size_text(n: u64) -> String {
    let (unit, name) = match n {
        n if n >= MIB => (MIB, "MiB"),
        n if n >= KIB => (KIB, "KiB"),
        1 => return "1 byte".into(),
        n => return format!("{n} bytes"),
    };
    if n.is_multiple_of(unit) {
        format!("{} {name}", n / unit)
    } else {
        format!("{:.1} {name}", n as f64 / unit as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }

    #[test]
    fn each_rule_inside_and_outside_the_workspace() {
        let ws = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        let guard = Guard::new(ws.path()).unwrap();
        let root = guard.root().to_path_buf();
        let outside = out.path().canonicalize().unwrap();
        // Regular files, directly, through `..` and through links, inside and out: read.
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::write(root.join("a.cfg"), "[a]").unwrap();
        std::fs::write(outside.join("b.cfg"), "[b]").unwrap();
        std::os::unix::fs::symlink("../a.cfg", root.join(".git/link")).unwrap();
        std::os::unix::fs::symlink(outside.join("b.cfg"), root.join("out-link")).unwrap();
        for (p, text) in [
            (root.join("a.cfg"), "[a]"),
            (root.join(".git/../a.cfg"), "[a]"),
            (root.join(".git/link"), "[a]"),
            (root.join("out-link"), "[b]"),
            (outside.join("b.cfg"), "[b]"),
        ] {
            assert_eq!(read(&guard, &p, CONFIG).unwrap().as_deref(), Some(text), "{}", p.display());
        }
        // Missing: nothing there, as git treats it.
        assert!(read(&guard, &root.join("none"), CONFIG).unwrap().is_none());
        assert!(read(&guard, &root.join("a.cfg/none"), CONFIG).unwrap().is_none());
        assert!(read(&guard, &outside.join("none"), CONFIG).unwrap().is_none());
        // FIFOs inside and outside, and /dev/zero behind a link: refused at once.
        mkfifo(&root.join("fifo"));
        mkfifo(&outside.join("fifo"));
        std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
        let started = std::time::Instant::now();
        for (p, says) in [
            (
                root.join("fifo"),
                "the repository's configuration, \"fifo\", before it runs git, and that file is a FIFO",
            ),
            (outside.join("fifo"), "is a FIFO (named pipe), not a regular file"),
            (
                root.join("zero"),
                "the repository's configuration, \"zero\" (which resolves to \"/dev/zero\"), before it runs git, and \
                 that file is a character device, not a regular file",
            ),
        ] {
            let e = read(&guard, &p, CONFIG).unwrap_err();
            assert_eq!(e.kind, ErrorKind::PathRefused, "{}", e.message);
            assert!(e.message.contains(says), "{}", e.message);
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        // Over the cap, inside and out (sparse files: nothing is read).
        for dir in [&root, &outside] {
            let big = dir.join("big.cfg");
            std::fs::File::create(&big).unwrap().set_len(2 * MIB + 1).unwrap();
            let e = read(&guard, &big, CONFIG).unwrap_err();
            assert_eq!(e.kind, ErrorKind::TooLarge);
            assert!(e.message.contains("is 2.0 MiB, over the 1 MiB limit"), "{}", e.message);
        }
        // A directory where a file should be.
        let e = read(&guard, &root.join(".git"), CONFIG).unwrap_err();
        assert!(e.message.contains("is a directory"), "{}", e.message);
    }

    #[test]
    fn sizes_read_for_people() {
        assert_eq!(size_text(1), "1 byte");
        assert_eq!(size_text(1000), "1000 bytes");
        assert_eq!(size_text(64 * KIB), "64 KiB");
        assert_eq!(size_text(2 * MIB + MIB / 2), "2.5 MiB");
    }
}
