//! The workspace guard: every path the host itself touches for a tool goes through it.
//!
//! Two layers. The lexical rules (shared with the SDK, in `cheng-path-rules`) refuse NUL
//! bytes, Windows drive and UNC forms, absolute paths outside the root, and `..`
//! segments that climb above it — before anything is opened. Then the remaining relative
//! path is resolved *beneath* the root's directory handle with no symlink, no magic link
//! and no mount point allowed anywhere on the way (Linux `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS`;
//! elsewhere, or on kernels without `openat2`, an equivalent walk one segment at a time
//! with `O_NOFOLLOW`). Nothing is canonicalized and compared as strings.
//!
//! The root itself is resolved once, when the guard is made (it may sit behind a
//! symlink, e.g. `/tmp` on macOS); refusals quote that resolved root.
//!
//! # Example
//!
//! ```
//! use cheng_core::guard::Guard;
//!
//! let dir = std::env::temp_dir().join(format!("guard-doc-{}", std::process::id()));
//! std::fs::create_dir_all(dir.join("src")).unwrap();
//! let guard = Guard::new(&dir).unwrap();
//! assert!(guard.open("src").is_ok());
//! let err = guard.open("../etc/passwd").unwrap_err();
//! assert!(err.to_string().starts_with("Refusing path \"../etc/passwd\": it escapes the workspace root"));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use cheng_contract::paths::{Refusal, lexical, not_found_message, symlink_message};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;

/// Why the guard refused a path. The `Display` text is the message a model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GuardError {
    /// Refused on its text alone.
    #[error("{message}")]
    Lexical {
        /// Which rule.
        refusal: Refusal,
        /// The message.
        message: String,
    },
    /// A symbolic link lies between the root and the target (the target included).
    #[error("{message}")]
    Symlink {
        /// The message.
        message: String,
    },
    /// The path crosses into another filesystem (a mount point).
    #[error("{message}")]
    MountPoint {
        /// The message.
        message: String,
    },
    /// Nothing exists at the path (inside the workspace).
    #[error("{message}")]
    NotFound {
        /// The message.
        message: String,
    },
    /// Another error from the filesystem.
    #[error("{message}")]
    Io {
        /// The message.
        message: String,
    },
}

impl GuardError {
    /// The stable error kind a caller sees.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            GuardError::NotFound { .. } => crate::ErrorKind::NotFound,
            GuardError::Io { .. } => crate::ErrorKind::Io,
            _ => crate::ErrorKind::PathRefused,
        }
    }
}

/// Why [`Guard::read`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// Refused or missing.
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// A directory, not a file.
    #[error("\"{0}\" is a directory, not a file; use list_dir to see what it holds")]
    IsDir(String),
    /// Neither a file nor a directory: a FIFO, a socket or a device, which could block
    /// or never end.
    #[error("\"{0}\" is not a regular file (it is a {1}); only regular files are read")]
    NotRegular(String, &'static str),
    /// Larger than allowed.
    #[error("\"{path}\" is {size} bytes, more than the {max} bytes that can be read at once")]
    TooLarge {
        /// The path.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// Another error.
    #[error("{0}")]
    Io(String),
}

impl ReadError {
    /// The stable error kind a tool's caller sees.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            ReadError::Guard(g) => g.kind(),
            ReadError::IsDir(_) | ReadError::NotRegular(..) => crate::ErrorKind::InvalidArgument,
            ReadError::TooLarge { .. } => crate::ErrorKind::TooLarge,
            ReadError::Io(_) => crate::ErrorKind::Io,
        }
    }
}

/// A workspace root and a handle on it.
#[derive(Debug)]
pub struct Guard {
    root: PathBuf,
    root_str: String,
    root_fd: OwnedFd,
}

/// A path that passed the guard: an `O_PATH` handle on it and its relative form.
#[derive(Debug)]
pub struct Opened {
    /// The handle (usable with `*at` calls, or through `/proc/self/fd`).
    pub fd: OwnedFd,
    /// The path relative to the root, normalized.
    pub rel: String,
}

impl Guard {
    /// A guard for the workspace at `root`, resolved once.
    pub fn new(root: &Path) -> Result<Guard, GuardError> {
        let resolved = std::fs::canonicalize(root).map_err(|e| GuardError::NotFound {
            message: format!("The workspace \"{}\" cannot be opened: {e}", root.display()),
        })?;
        let root_fd = rustix::fs::open(&resolved, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| GuardError::NotFound {
                message: format!("The workspace \"{}\" is not a directory: {e}", root.display()),
            })?;
        let root_str = resolved.to_string_lossy().into_owned();
        Ok(Guard { root: resolved, root_str, root_fd })
    }

    /// The resolved workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolve `path` (as a model sent it) to an existing file or directory.
    pub fn open(&self, path: &str) -> Result<Opened, GuardError> {
        let rel = lexical(path, &self.root_str)
            .map_err(|refusal| GuardError::Lexical { refusal, message: refusal.message(path, &self.root_str) })?;
        let fd = self.open_beneath(rel.as_str()).map_err(|e| self.explain(path, rel.as_str(), e))?;
        if rel.trailing_slash() {
            let st = rustix::fs::fstat(&fd).map_err(|e| self.explain(path, rel.as_str(), e))?;
            if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir() {
                return Err(self.explain(path, rel.as_str(), Errno::NOTDIR));
            }
        }
        Ok(Opened { fd, rel: rel.normalized() })
    }

    /// Read the whole file at `path` (as a model sent it), refusing files larger than
    /// `max` bytes. Opened beneath the root like [`Guard::open`], for reading.
    pub fn read(&self, path: &str, max: u64) -> Result<Vec<u8>, ReadError> {
        let opened = self.open(path)?;
        // Judge the file by its handle before opening it for reading: a FIFO would block
        // the open, a device could never end (or act on being opened).
        let st = rustix::fs::fstat(&opened.fd).map_err(|e| ReadError::Io(format!("cannot inspect \"{path}\": {e}")))?;
        match rustix::fs::FileType::from_raw_mode(st.st_mode) {
            rustix::fs::FileType::RegularFile => {}
            rustix::fs::FileType::Directory => return Err(ReadError::IsDir(path.to_string())),
            other => return Err(ReadError::NotRegular(path.to_string(), file_type_name(other))),
        }
        let (file, size) =
            self.open_for_reading(&opened, &st).map_err(|e| ReadError::Io(format!("cannot open \"{path}\": {e}")))?;
        if size > max {
            return Err(ReadError::TooLarge { path: path.to_string(), size, max });
        }
        let data = read_sized(&file, size, max).map_err(|e| ReadError::Io(format!("cannot read \"{path}\": {e}")))?;
        if data.len() as u64 > max {
            return Err(ReadError::TooLarge { path: path.to_string(), size: data.len() as u64, max });
        }
        Ok(data)
    }

    /// Open the regular file behind `opened` (whose `fstat` is `st`) for reading; its size
    /// as the open file has it.
    ///
    /// Its path is resolved again by the same rules, now for reading (non-blocking, never a
    /// controlling terminal), and kept only if it is the same file: the kernel's path
    /// lookup costs less than reopening the handle through `/proc/self/fd` (a lookup
    /// through procfs per file; see "search_files: the guard's read path" in
    /// BENCHMARKS.md). If the path now names something else (swapped since it was
    /// judged), or `openat2` is missing, the handle itself is reopened through
    /// `/proc/self/fd`, which can only be the file judged.
    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    fn open_for_reading(&self, opened: &Opened, st: &rustix::fs::Stat) -> std::io::Result<(std::fs::File, u64)> {
        use std::os::unix::fs::OpenOptionsExt as _;
        #[cfg(target_os = "linux")]
        if let Ok(fd) = self.openat2_beneath(&opened.rel, OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY) {
            let again = rustix::fs::fstat(&fd)?;
            if (again.st_dev, again.st_ino) == (st.st_dev, st.st_ino) {
                return Ok((std::fs::File::from(fd), again.st_size as u64));
            }
        }
        let by_fd = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&opened.fd));
        let file =
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(&by_fd)?;
        let size = file.metadata()?.len();
        Ok((file, size))
    }

    /// `openat2` of `rel` beneath the root with the guard's resolve flags (no symlink, no
    /// magic link, no mount point, nothing above the root), retried when a rename raced it.
    #[cfg(target_os = "linux")]
    fn openat2_beneath(&self, rel: &str, flags: OFlags) -> Result<OwnedFd, Errno> {
        use rustix::fs::ResolveFlags;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_XDEV | ResolveFlags::NO_MAGICLINKS;
        for _ in 0..8 {
            match rustix::fs::openat2(self.root_fd.as_fd(), rel, flags | OFlags::CLOEXEC, Mode::empty(), resolve) {
                // The kernel asks for a retry when a rename raced the lookup.
                Err(Errno::AGAIN) => continue,
                other => return other,
            }
        }
        Err(Errno::AGAIN)
    }

    /// Resolve `rel` (already through the lexical rules) beneath the root.
    fn open_beneath(&self, rel: &str) -> Result<OwnedFd, Errno> {
        #[cfg(target_os = "linux")]
        {
            match self.openat2_beneath(rel, OFlags::PATH) {
                Err(Errno::NOSYS) => walk_beneath(self.root_fd.as_fd(), rel),
                other => other,
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            walk_beneath(self.root_fd.as_fd(), rel)
        }
    }

    /// Turn a resolution error into the message a model sees.
    fn explain(&self, path: &str, rel: &str, e: Errno) -> GuardError {
        match e {
            Errno::NOENT | Errno::NOTDIR => GuardError::NotFound { message: not_found_message(path) },
            Errno::LOOP => {
                let link = self.first_symlink(rel).unwrap_or_else(|| rel.to_string());
                GuardError::Symlink { message: symlink_message(path, &link, &self.root_str) }
            }
            Errno::XDEV => GuardError::MountPoint {
                message: format!(
                    "Refusing path \"{}\": it crosses a mount point inside the workspace root \"{}\"",
                    cheng_contract::paths::display_path(path),
                    self.root_str
                ),
            },
            other => GuardError::Io {
                message: format!(
                    "cannot open \"{}\": {}",
                    cheng_contract::paths::display_path(path),
                    std::io::Error::from(other)
                ),
            },
        }
    }

    /// The first segment of `rel` that is a symbolic link (for messages only).
    fn first_symlink(&self, rel: &str) -> Option<String> {
        let mut so_far = PathBuf::new();
        let mut stack: Vec<String> = Vec::new();
        for seg in rel.split('/') {
            if seg == ".." {
                stack.pop();
                so_far.pop();
                continue;
            }
            stack.push(seg.to_string());
            so_far.push(seg);
            let st = rustix::fs::statat(self.root_fd.as_fd(), &so_far, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
            if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Symlink {
                return Some(stack.join("/"));
            }
        }
        None
    }
}

/// Read `file`, whose size was `size` (at most `max`) when it was opened, stopping past
/// `max` bytes. A file still that size takes one `read`: it is asked for one byte more
/// than the size, and a short answer at exactly the size is its end, where
/// `read_to_end` always needs a second `read` to see the end (one system call per file
/// that search pays thousands of times). A file that grew is read on until its end or
/// past `max`.
fn read_sized(file: &std::fs::File, size: u64, max: u64) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::with_capacity(size as usize + 1);
    while data.len() as u64 <= max {
        if data.len() == data.capacity() {
            let more = (max + 1 - data.len() as u64).min(data.len().max(8 << 10) as u64);
            data.reserve_exact(more as usize);
        }
        let asked = data.capacity() - data.len();
        match rustix::io::read(file, rustix::buffer::spare_capacity(&mut data)) {
            Ok(0) => break,
            Ok(n) if n < asked && data.len() as u64 == size => break,
            Ok(_) | Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(data)
}

/// A file type's name, for messages.
pub fn file_type_name(t: rustix::fs::FileType) -> &'static str {
    use rustix::fs::FileType as T;
    match t {
        T::RegularFile => "regular file",
        T::Directory => "directory",
        T::Symlink => "symbolic link",
        T::Fifo => "FIFO (named pipe)",
        T::Socket => "socket",
        T::CharacterDevice => "character device",
        T::BlockDevice => "block device",
        _ => "special file",
    }
}

/// Resolve `rel` beneath `root` one segment at a time: each segment opened with
/// `O_NOFOLLOW` (a symlink fails), each directory checked to be on the root's device,
/// and `..` taken back to the directory it came from (never above the root, which the
/// lexical rules already ensured). The same answers as `openat2` with the guard's flags.
pub fn walk_beneath(root: std::os::fd::BorrowedFd<'_>, rel: &str) -> Result<OwnedFd, Errno> {
    let root_dev = rustix::fs::fstat(root)?.st_dev;
    let mut stack: Vec<OwnedFd> = vec![rustix::io::dup(root)?];
    // Whether the top of the stack is a directory (a later segment needs one).
    let mut top_is_dir = true;
    for seg in rel.split('/').filter(|s| !s.is_empty()) {
        if !top_is_dir {
            return Err(Errno::NOTDIR);
        }
        if seg == "." {
            continue;
        }
        if seg == ".." {
            if stack.len() == 1 {
                return Err(Errno::XDEV);
            }
            stack.pop();
            continue;
        }
        let parent = stack.last().expect("the root stays on the stack");
        let st = rustix::fs::statat(parent, seg, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?;
        let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
        if ft == rustix::fs::FileType::Symlink {
            return Err(Errno::LOOP);
        }
        if st.st_dev != root_dev {
            return Err(Errno::XDEV);
        }
        let fd = rustix::fs::openat(parent, seg, OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC, Mode::empty())?;
        // Re-check through the handle: the entry may have been swapped since statat.
        let st2 = rustix::fs::fstat(&fd)?;
        if st2.st_ino != st.st_ino || st2.st_dev != st.st_dev {
            return Err(Errno::AGAIN);
        }
        top_is_dir = ft == rustix::fs::FileType::Directory;
        stack.push(fd);
    }
    // A trailing `..` or `.` resolves to a directory already on the stack.
    Ok(stack.pop().expect("the root stays on the stack"))
}

mod write;
pub use write::{DirEntry, EntryKind, WriteError, Written, escape_name};

#[cfg(test)]
mod tests;

/// The directories a workspace nobody gave explicitly may neither be nor hold, resolved,
/// each with what it is: the user's home (`$HOME`) and the host's `state_dir` — an agent
/// must not get the user's keys and shell start-up files, or the host's own state,
/// because a client was started in the wrong place. A host works this out once, when
/// it is built.
pub fn never_found(state_dir: Option<&Path>) -> Vec<(PathBuf, &'static str)> {
    let resolve = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| resolve(Path::new(&h)));
    let mut guarded: Vec<(PathBuf, &'static str)> = home.into_iter().map(|h| (h, "the home directory")).collect();
    guarded.extend(state_dir.map(|s| (resolve(s), "the host's state directory")));
    guarded
}

/// Why `root` (resolved) may not be a workspace nobody gave explicitly: the file
/// system's root, or one of `guarded` ([`never_found`]) or a directory holding one.
/// `None`: it may be.
///
/// The host applies this to every call whose [`Context`](crate::Context) says its
/// workspace was found rather than given ([`Context::given`](crate::Context::given)).
pub fn found_workspace_refusal(root: &Path, guarded: &[(PathBuf, &str)]) -> Option<String> {
    if root.parent().is_none() {
        return Some("the file system's root".into());
    }
    guarded.iter().find(|(g, _)| g.starts_with(root)).map(|(g, what)| {
        if g == root {
            format!("{what} ({})", g.display())
        } else {
            format!("a directory that holds {what} ({})", g.display())
        }
    })
}
