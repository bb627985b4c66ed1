//! Atomic writes and removals through the guard: the host side of the `fs` interface.
//!
//! A write never leaves a half-written file. The new content goes to an unnamed
//! temporary file (`O_TMPFILE`) in the target's directory, gets the old file's
//! permission bits, is flushed, and then appears in one step: `linkat` for a new file
//! (which also refuses a file created meanwhile), or a link to a per-target temporary
//! name followed by `renameat` over the old file. A crash at any point leaves the old
//! file or the new one; the only trace a crash can leave is the temporary name
//! `.<name>.cheng-tmp` (between the link and the rename), which the next write of the
//! same file replaces.
//!
//! Each step of a write is named for the crash tests ([`crate::testing`]), which kill
//! their own process at one of them and check that nothing was lost.

use std::io::Write as _;
use std::os::fd::{AsRawFd, OwnedFd};

use cheng_contract::paths::lexical;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::{Guard, GuardError};

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The file did not exist before.
    pub created: bool,
    /// Bytes written.
    pub bytes: u64,
}

pub use cheng_contract::entries::{DirEntry, EntryKind};

/// `bytes` as text, each byte that is not part of valid UTF-8 written `\xNN`.
pub fn escape_name(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02X}"));
        }
    }
    out
}

/// Why a write or removal was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WriteError {
    /// The path was refused by the guard.
    #[error(transparent)]
    Guard(#[from] GuardError),
    /// The target exists and overwriting was not asked for.
    #[error("File already exists: {0}; pass overwrite=true to replace it")]
    Exists(String),
    /// The target (or a parent) is a directory, or the parent is missing.
    #[error("{0}")]
    Invalid(String),
    /// A filesystem error.
    #[error("{0}")]
    Io(String),
}

impl WriteError {
    /// The stable error kind a tool's caller sees.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            WriteError::Guard(g) => g.kind(),
            WriteError::Exists(_) | WriteError::Invalid(_) => crate::ErrorKind::InvalidArgument,
            WriteError::Io(_) => crate::ErrorKind::Io,
        }
    }
}

fn io(what: &str, path: &str, e: Errno) -> WriteError {
    WriteError::Io(format!("cannot {what} \"{path}\": {}", std::io::Error::from(e)))
}

impl Guard {
    /// Split `path` into its parent directory (opened beneath the root, creating
    /// missing directories when asked) and its final name.
    fn parent_of(&self, path: &str, create_dirs: bool) -> Result<(OwnedFd, String, String), WriteError> {
        let rel = lexical(path, &self.root_str).map_err(|refusal| {
            WriteError::Guard(GuardError::Lexical { refusal, message: refusal.message(path, &self.root_str) })
        })?;
        let norm = rel.normalized();
        if norm == "." || rel.has_parent_segments() || rel.trailing_slash() {
            return Err(WriteError::Invalid(format!("\"{path}\" does not name a file inside the workspace")));
        }
        let (dir, name) = match norm.rsplit_once('/') {
            Some((d, n)) => (d.to_string(), n.to_string()),
            None => (".".to_string(), norm.clone()),
        };
        if create_dirs && dir != "." {
            let mut so_far = String::new();
            for seg in dir.split('/') {
                let parent = if so_far.is_empty() { ".".to_string() } else { so_far.clone() };
                so_far = if so_far.is_empty() { seg.to_string() } else { format!("{so_far}/{seg}") };
                match self.open_beneath(&so_far) {
                    Ok(_) => {}
                    Err(Errno::NOENT) => {
                        let pfd = self.open_beneath(&parent).map_err(|e| self.explain(path, &parent, e))?;
                        match rustix::fs::mkdirat(&pfd, seg, Mode::from_raw_mode(0o755)) {
                            Ok(()) | Err(Errno::EXIST) => {}
                            Err(e) => return Err(io("create the directory", &so_far, e)),
                        }
                    }
                    Err(e) => return Err(self.explain(path, &so_far, e).into()),
                }
            }
        }
        let fd = self.open_beneath(&dir).map_err(|e| match e {
            Errno::NOENT => WriteError::Invalid(format!(
                "The directory \"{dir}\" does not exist; pass create_dirs=true to create it"
            )),
            e => self.explain(path, &dir, e).into(),
        })?;
        // A real directory handle (O_PATH handles cannot be synced).
        let dirfd = rustix::fs::openat(&fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| match e {
            Errno::NOTDIR => WriteError::Invalid(format!("\"{dir}\" is not a directory")),
            e => io("open the directory", &dir, e),
        })?;
        Ok((dirfd, name, norm))
    }

    /// Write `contents` to `path` atomically (see the module docs).
    pub fn write_atomic(
        &self,
        path: &str,
        contents: &[u8],
        create_dirs: bool,
        overwrite: bool,
    ) -> Result<Written, WriteError> {
        let (dir, name, norm) = self.parent_of(path, create_dirs)?;
        // The target as it is now: its mode to keep, and what it is.
        let existing = match rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => {
                let ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
                if ft == rustix::fs::FileType::Symlink {
                    return Err(GuardError::Symlink {
                        message: cheng_contract::paths::symlink_message(path, &norm, &self.root_str),
                    }
                    .into());
                }
                if ft != rustix::fs::FileType::RegularFile {
                    return Err(WriteError::Invalid(format!("\"{norm}\" exists and is not a regular file")));
                }
                if !overwrite {
                    return Err(WriteError::Exists(norm));
                }
                Some(st.st_mode & 0o7777)
            }
            Err(Errno::NOENT) => None,
            Err(e) => return Err(io("inspect", &norm, e)),
        };
        let mode = existing.unwrap_or(0o644);
        let tmp = rustix::fs::openat(
            &dir,
            ".",
            OFlags::TMPFILE | OFlags::WRONLY | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )
        .map_err(|e| io("create a temporary file beside", &norm, e))?;
        crate::testing::write_step("tmpfile");
        let mut file = std::fs::File::from(tmp);
        file.write_all(contents).map_err(|e| WriteError::Io(format!("cannot write \"{norm}\": {e}")))?;
        crate::testing::write_step("written");
        // The umask may have narrowed the mode; set it exactly (this keeps +x).
        rustix::fs::fchmod(&file, Mode::from_raw_mode(mode)).map_err(|e| io("set the mode of", &norm, e))?;
        file.sync_all().map_err(|e| WriteError::Io(format!("cannot flush \"{norm}\": {e}")))?;
        crate::testing::write_step("synced");
        let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
        let created = match existing {
            None => {
                match rustix::fs::linkat(rustix::fs::CWD, by_fd.as_str(), &dir, name.as_str(), AtFlags::SYMLINK_FOLLOW)
                {
                    Ok(()) => true,
                    Err(Errno::EXIST) if overwrite => {
                        // Created meanwhile by someone else: replace it like an existing file.
                        self.replace(&dir, &name, &by_fd, &norm)?;
                        false
                    }
                    Err(Errno::EXIST) => return Err(WriteError::Exists(norm)),
                    Err(e) => return Err(io("create", &norm, e)),
                }
            }
            Some(_) => {
                self.replace(&dir, &name, &by_fd, &norm)?;
                false
            }
        };
        crate::testing::write_step("renamed");
        rustix::fs::fsync(&dir).map_err(|e| io("flush the directory of", &norm, e))?;
        Ok(Written { created, bytes: contents.len() as u64 })
    }

    /// Put the flushed unnamed file at `by_fd` in place of `name`.
    fn replace(&self, dir: &OwnedFd, name: &str, by_fd: &str, norm: &str) -> Result<(), WriteError> {
        let tmp_name = format!(".{name}.cheng-tmp");
        // A leftover from a crashed write of this same file is replaced.
        let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
        rustix::fs::linkat(rustix::fs::CWD, by_fd, dir, tmp_name.as_str(), AtFlags::SYMLINK_FOLLOW)
            .map_err(|e| io("stage", norm, e))?;
        crate::testing::write_step("linked");
        rustix::fs::renameat(dir, tmp_name.as_str(), dir, name).map_err(|e| {
            let _ = rustix::fs::unlinkat(dir, tmp_name.as_str(), AtFlags::empty());
            io("replace", norm, e)
        })
    }

    /// List the directory at `path`: names (escaped when not UTF-8), kinds, and file
    /// sizes when `sizes` (0 otherwise), sorted by name. Symlinks are reported, never
    /// followed.
    pub fn read_dir(&self, path: &str, sizes: bool) -> Result<Vec<DirEntry>, WriteError> {
        let want = |ft| ft == rustix::fs::FileType::Unknown || (sizes && ft == rustix::fs::FileType::RegularFile);
        Ok(self
            .list(path, want)?
            .into_iter()
            .map(|(mut e, _)| {
                if e.kind != EntryKind::File {
                    e.size = 0;
                }
                e
            })
            .collect())
    }

    /// List the directory at `path` with every entry's `lstat`, sorted by name.
    pub fn read_dir_stat(&self, path: &str) -> Result<Vec<(DirEntry, rustix::fs::Stat)>, WriteError> {
        Ok(self.list(path, |_| true)?.into_iter().filter_map(|(e, st)| Some((e, st?))).collect())
    }

    /// Open the directory at `path` for listing. On Linux one `openat2` beneath the root
    /// opens it for reading directly (a directory has no driver to act on the open; an
    /// automount point may be mounted by the lookup before the mount rule refuses it, as
    /// any lookup through it would); anything that fails that way (not a directory, a
    /// symlink, a mount point, no `openat2`) goes the general way — resolved as
    /// [`Guard::open`] does, then opened — for its exact error.
    fn open_dir(&self, path: &str) -> Result<OwnedFd, WriteError> {
        #[cfg(target_os = "linux")]
        if let Ok(rel) = lexical(path, &self.root_str)
            && let Ok(fd) = self.openat2_beneath(rel.as_str(), OFlags::RDONLY | OFlags::DIRECTORY)
        {
            return Ok(fd);
        }
        let opened = self.open(path)?;
        rustix::fs::openat(&opened.fd, ".", OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| match e {
                Errno::NOTDIR => WriteError::Invalid(format!("\"{path}\" is not a directory")),
                e => io("open the directory", path, e),
            })
    }

    /// The listing both of the above share: an entry is `lstat`ed when `want_stat`
    /// says so for its kind from the listing (`Unknown` when the filesystem does not
    /// give kinds); entries that vanish between the listing and the stat are skipped.
    fn list(
        &self,
        path: &str,
        want_stat: impl Fn(rustix::fs::FileType) -> bool,
    ) -> Result<Vec<(DirEntry, Option<rustix::fs::Stat>)>, WriteError> {
        // The listing owns the handle (`Dir::read_from` would open it once more).
        let mut dir = rustix::fs::Dir::new(self.open_dir(path)?).map_err(|e| io("list", path, e))?;
        let mut entries = Vec::new();
        while let Some(ent) = dir.read() {
            let ent = ent.map_err(|e| io("list", path, e))?;
            let raw = ent.file_name().to_bytes();
            if raw == b"." || raw == b".." {
                continue;
            }
            // The kind comes with the listing (d_type) on most filesystems.
            let mut ft = ent.file_type();
            let mut stat = None;
            let mut size = 0;
            if want_stat(ft) {
                let fd = dir.fd().map_err(|e| io("list", path, e))?;
                match rustix::fs::statat(fd, ent.file_name(), AtFlags::SYMLINK_NOFOLLOW) {
                    Ok(st) => {
                        ft = rustix::fs::FileType::from_raw_mode(st.st_mode);
                        size = st.st_size as u64;
                        stat = Some(st);
                    }
                    // Gone since it was listed.
                    Err(_) => continue,
                }
            }
            let kind = match ft {
                rustix::fs::FileType::RegularFile => EntryKind::File,
                rustix::fs::FileType::Directory => EntryKind::Dir,
                rustix::fs::FileType::Symlink => EntryKind::Symlink,
                _ => EntryKind::Other,
            };
            let (name, valid_utf8) = match std::str::from_utf8(raw) {
                Ok(s) => (s.to_string(), true),
                Err(_) => (escape_name(raw), false),
            };
            entries.push((raw.to_vec(), DirEntry { name, valid_utf8, kind, size }, stat));
        }
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(entries.into_iter().map(|(_, e, st)| (e, st)).collect())
    }

    /// Remove the file at `path` (not a directory, not through a symlink).
    pub fn remove_file(&self, path: &str) -> Result<(), WriteError> {
        let (dir, name, norm) = self.parent_of(path, false)?;
        let st = rustix::fs::statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW).map_err(|e| match e {
            Errno::NOENT => {
                WriteError::Guard(GuardError::NotFound { message: cheng_contract::paths::not_found_message(path) })
            }
            e => io("inspect", &norm, e),
        })?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
            return Err(WriteError::Invalid(format!("\"{norm}\" is a directory")));
        }
        rustix::fs::unlinkat(&dir, name.as_str(), AtFlags::empty()).map_err(|e| io("remove", &norm, e))?;
        rustix::fs::fsync(&dir).map_err(|e| io("flush the directory of", &norm, e))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn writes_are_atomic_keep_modes_and_respect_flags() {
        let dir = tempfile_dir("write");
        let g = Guard::new(&dir).unwrap();
        // A new file is created.
        assert_eq!(g.write_atomic("a.txt", b"one", false, true).unwrap(), Written { created: true, bytes: 3 });
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "one");
        // An executable keeps its mode when replaced.
        std::fs::set_permissions(dir.join("a.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!g.write_atomic("a.txt", b"two", false, true).unwrap().created);
        assert_eq!(std::fs::metadata(dir.join("a.txt")).unwrap().permissions().mode() & 0o777, 0o755);
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "two");
        // overwrite=false refuses an existing file and leaves it alone.
        assert!(matches!(g.write_atomic("a.txt", b"three", false, false), Err(WriteError::Exists(_))));
        assert_eq!(std::fs::read_to_string(dir.join("a.txt")).unwrap(), "two");
        // Missing parents need create_dirs.
        assert!(matches!(g.write_atomic("x/y/z.txt", b"z", false, true), Err(WriteError::Invalid(_))));
        g.write_atomic("x/y/z.txt", b"z", true, true).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("x/y/z.txt")).unwrap(), "z");
        // Symlinks are refused, as the target and on the way.
        std::os::unix::fs::symlink("a.txt", dir.join("link")).unwrap();
        std::os::unix::fs::symlink("x", dir.join("dirlink")).unwrap();
        assert!(matches!(
            g.write_atomic("link", b"!", false, true),
            Err(WriteError::Guard(GuardError::Symlink { .. }))
        ));
        assert!(matches!(
            g.write_atomic("dirlink/y/new", b"!", false, true),
            Err(WriteError::Guard(GuardError::Symlink { .. }))
        ));
        assert!(matches!(
            g.write_atomic("dirlink/q/new", b"!", true, true),
            Err(WriteError::Guard(GuardError::Symlink { .. }))
        ));
        assert!(!dir.join("x/q").exists());
        // Escapes are refused.
        assert!(matches!(
            g.write_atomic("../evil", b"!", true, true),
            Err(WriteError::Guard(GuardError::Lexical { .. }))
        ));
        // No temporary file is left anywhere.
        let leftovers: Vec<_> = walk(&dir).into_iter().filter(|p| p.contains("cheng-tmp")).collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        // Listing: kinds from the listing, sizes on request.
        let l = g.read_dir(".", true).unwrap();
        let a = l.iter().find(|e| e.name == "a.txt").unwrap();
        assert_eq!((a.kind, a.size), (EntryKind::File, 3));
        assert_eq!(l.iter().find(|e| e.name == "link").unwrap().kind, EntryKind::Symlink);
        assert_eq!(l.iter().find(|e| e.name == "x").unwrap().kind, EntryKind::Dir);
        // The same listing with each entry's lstat, matching std's.
        use std::os::unix::fs::MetadataExt;
        let st = g.read_dir_stat(".").unwrap();
        assert_eq!(
            st.iter().map(|(e, _)| e.name.clone()).collect::<Vec<_>>(),
            l.iter().map(|e| e.name.clone()).collect::<Vec<_>>()
        );
        for (e, s) in &st {
            let m = std::fs::symlink_metadata(dir.join(&e.name)).unwrap();
            assert_eq!((s.st_ino, s.st_mode, s.st_size as u64), (m.ino(), m.mode(), m.size()), "{}", e.name);
            assert_eq!((s.st_mtime, s.st_mtime_nsec as i64), (m.mtime(), m.mtime_nsec()), "{}", e.name);
        }
        assert!(g.read_dir_stat("a.txt").is_err());
        assert_eq!(g.read_dir(".", false).unwrap().iter().find(|e| e.name == "a.txt").unwrap().size, 0);
        // Removal: files only.
        g.remove_file("x/y/z.txt").unwrap();
        assert!(!dir.join("x/y/z.txt").exists());
        assert!(matches!(g.remove_file("x"), Err(WriteError::Invalid(_))));
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn walk(dir: &std::path::Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            out.push(p.display().to_string());
            if p.is_dir() && !p.is_symlink() {
                out.extend(walk(&p));
            }
        }
        out
    }

    fn tempfile_dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("cheng-write-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
