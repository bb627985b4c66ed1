//! Reading the host's own files safely: configuration, tokens, settings, plugin
//! components and their signatures, the component cache, MCP pins, the OCI store, run
//! state, the audit head, learned rules.
//!
//! Every such file is opened with `O_NONBLOCK | O_NOCTTY | O_CLOEXEC` (so a FIFO never
//! blocks the open and a terminal never becomes the host's), checked on the opened
//! descriptor to be a regular file (a FIFO, device, socket or directory is refused), and
//! read with a cap that fits its kind: a file over the cap is refused before anything is
//! read, and at most `cap + 1` bytes are ever read, so a file that grows while it is
//! read is refused too. Memory spent on a refused file is bounded by its cap.
//!
//! Symbolic links are followed by [`read`] (the target must still be a regular file, so
//! a link to `/dev/zero` is refused); [`read_no_follow`] refuses a link in the last
//! component for kinds that must not be one.
//!
//! A missing file is [`HostFileError::NotFound`] ([`HostFileError::is_not_found`]), which
//! many callers treat as "nothing there yet".
//!
//! ```
//! use cheng_policy::hostfile::{self, HostFileError};
//!
//! let dir = std::env::temp_dir().join(format!("hostfile-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let path = dir.join("cheng.toml");
//! std::fs::write(&path, "default_role = \"recon\"\n").unwrap();
//! assert_eq!(hostfile::read_to_string(&path, hostfile::CONFIG).unwrap(), "default_role = \"recon\"\n");
//!
//! let err = hostfile::read(&path, hostfile::Limit::new(4, "a test file")).unwrap_err();
//! assert!(err.to_string().ends_with("is 23 bytes, over the 4-byte limit for a test file"), "{err}");
//! assert!(hostfile::read(&dir.join("absent"), hostfile::CONFIG).unwrap_err().is_not_found());
//! std::fs::remove_dir_all(&dir).unwrap();
//! ```

use std::fmt;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The most bytes a file of one kind may hold, with the kind's name for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The cap in bytes (a file of exactly this size is accepted).
    pub bytes: u64,
    /// The kind, as a noun phrase with its article: "a configuration file".
    pub kind: &'static str,
}

impl Limit {
    /// A cap of `bytes` for files described as `kind` ("a configuration file").
    pub const fn new(bytes: u64, kind: &'static str) -> Self {
        Limit { bytes, kind }
    }
}

impl From<u64> for Limit {
    fn from(bytes: u64) -> Self {
        Limit { bytes, kind: "this kind of file" }
    }
}

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;

/// `cheng.toml`.
pub const CONFIG: Limit = Limit::new(MIB, "a configuration file");
/// A PEM file of CA certificates named by the configuration (system bundles are ~200 KiB).
pub const CA_FILE: Limit = Limit::new(4 * MIB, "a CA certificate file");
/// `tokens.json`.
pub const TOKENS: Limit = Limit::new(4 * MIB, "a tokens file");
/// A settings file (`cheng settings`).
pub const SETTINGS: Limit = Limit::new(MIB, "a settings file");
/// A plugin's `.minisig` signature (a real one is under 1 KiB).
pub const SIGNATURE: Limit = Limit::new(64 * KIB, "a signature file");
/// A plugin's `.wasm` component (also an OCI layer blob holding one).
pub const PLUGIN_WASM: Limit = Limit::new(256 * MIB, "a plugin component");
/// A compiled component in the component cache (native code is larger than its wasm).
pub const CACHE_ENTRY: Limit = Limit::new(1024 * MIB, "a component cache entry");
/// A small metadata file beside a cache entry (its check, its recorded tool list).
pub const CACHE_META: Limit = Limit::new(4 * MIB, "a component cache metadata file");
/// The pins of an MCP server's tool descriptions.
pub const MCP_PINS: Limit = Limit::new(4 * MIB, "an MCP pins file");
/// The OCI store's index, and a manifest or config blob (the OCI spec's 4 MiB manifest cap).
pub const OCI_INDEX: Limit = Limit::new(4 * MIB, "an OCI index or manifest");
/// One run's state for one component: at most 64 keys of 256 KiB each, JSON-escaped.
pub const RUN_STATE: Limit = Limit::new(64 * MIB, "a run state file");
/// The audit log's head file, `audit.head`.
pub const AUDIT_HEAD: Limit = Limit::new(64 * KIB, "an audit head file");
/// A file of learned rules.
pub const LEARNED_RULES: Limit = Limit::new(4 * MIB, "a learned rules file");

/// Why one of the host's files was not read. The message names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostFileError {
    /// No file at the path (or a directory on the way is missing).
    #[error("{} does not exist", path.display())]
    NotFound {
        /// The path asked for.
        path: PathBuf,
    },
    /// Not a regular file (a FIFO, device, socket, directory, or a link where none is allowed).
    #[error("{} is a {found}, not a regular file (refused as {kind})", path.display())]
    NotRegular {
        /// The path asked for.
        path: PathBuf,
        /// What it is: "FIFO (named pipe)", "character device", ...
        found: &'static str,
        /// The kind it was read as.
        kind: &'static str,
    },
    /// Larger than the cap for its kind (or grew past it while being read).
    #[error("{}", too_large(path, *size, *limit))]
    TooLarge {
        /// The path asked for.
        path: PathBuf,
        /// Its size when opened, `None` when it grew past the cap while being read.
        size: Option<u64>,
        /// The cap it broke.
        limit: Limit,
    },
    /// Any other failure to open or read it.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The path asked for.
        path: PathBuf,
        /// The operating system's answer.
        source: std::io::Error,
    },
    /// Not UTF-8 text where text was expected ([`read_to_string`]).
    #[error("{} is not UTF-8 text", path.display())]
    NotText {
        /// The path asked for.
        path: PathBuf,
    },
}

impl HostFileError {
    /// Whether the file simply does not exist.
    pub fn is_not_found(&self) -> bool {
        matches!(self, HostFileError::NotFound { .. })
    }

    /// The message without the file's name, for callers that name it already:
    /// "it is a FIFO (named pipe), not a regular file (refused as a signature file)".
    pub fn reason(&self) -> String {
        let text = self.to_string();
        let shown = self.path().display().to_string();
        match text.strip_prefix(&shown) {
            Some(rest) => format!("it{rest}"),
            None => text.replacen(&format!(" {shown}"), " it", 1),
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            HostFileError::NotFound { path }
            | HostFileError::NotRegular { path, .. }
            | HostFileError::TooLarge { path, .. }
            | HostFileError::Io { path, .. }
            | HostFileError::NotText { path } => path,
        }
    }
}

fn too_large(path: &Path, size: Option<u64>, limit: Limit) -> String {
    match size {
        Some(size) => format!(
            "{} is {}, over the {} limit for {}",
            path.display(),
            Size(size),
            Size(limit.bytes).adjective(),
            limit.kind
        ),
        None => format!(
            "{} grew past the {} limit for {} while it was read",
            path.display(),
            Size(limit.bytes).adjective(),
            limit.kind
        ),
    }
}

/// A byte count for people: "23 bytes", "64 KiB", "3.5 MiB".
struct Size(u64);

impl Size {
    /// The form before a noun: "4-byte", "64 KiB".
    fn adjective(&self) -> String {
        if self.0 < KIB { format!("{}-byte", self.0) } else { self.to_string() }
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        let (unit, name) = match n {
            n if n >= 1 << 30 => (1u64 << 30, "GiB"),
            n if n >= MIB => (MIB, "MiB"),
            n if n >= KIB => (KIB, "KiB"),
            1 => return f.write_str("1 byte"),
            n => return write!(f, "{n} bytes"),
        };
        if n.is_multiple_of(unit) {
            write!(f, "{} {name}", n / unit)
        } else {
            write!(f, "{:.1} {name}", n as f64 / unit as f64)
        }
    }
}

/// A file type's name for messages.
fn type_name(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_fifo() {
        "FIFO (named pipe)"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Read the regular file at `path` (symbolic links followed), at most `cap` bytes.
pub fn read(path: &Path, cap: impl Into<Limit>) -> Result<Vec<u8>, HostFileError> {
    read_with(path, cap.into(), true)
}

/// [`read`], refusing a symbolic link as the last component of `path`.
pub fn read_no_follow(path: &Path, cap: impl Into<Limit>) -> Result<Vec<u8>, HostFileError> {
    read_with(path, cap.into(), false)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path, cap: impl Into<Limit>) -> Result<String, HostFileError> {
    String::from_utf8(read(path, cap)?).map_err(|_| HostFileError::NotText { path: path.to_path_buf() })
}

/// Open the regular file at `path` for reading without blocking or reading it, checked
/// to be no larger than `cap`: for callers that read it their own way (a memory map).
/// The open file's size is `file.metadata()?.len()`.
pub fn open(path: &Path, cap: impl Into<Limit>) -> Result<std::fs::File, HostFileError> {
    open_checked(path, cap.into(), true).map(|(f, _)| f)
}

/// Open the lock file at `path` for reading and writing (created with mode 0600 when
/// missing, never truncated), for `flock`: never blocking on the open, and refused
/// unless it is a regular file (symbolic links followed). `kind` names it in messages
/// ("a lock file").
pub fn open_lock(path: &Path, kind: &'static str) -> Result<std::fs::File, HostFileError> {
    let refuse =
        |t: std::fs::FileType| HostFileError::NotRegular { path: path.to_path_buf(), found: type_name(t), kind };
    match std::fs::metadata(path) {
        Ok(m) if !m.file_type().is_file() => return Err(refuse(m.file_type())),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io_err(path, e)),
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| io_err(path, e))?;
    let meta = file.metadata().map_err(|e| io_err(path, e))?;
    if !meta.file_type().is_file() {
        return Err(refuse(meta.file_type()));
    }
    Ok(file)
}

fn io_err(path: &Path, e: std::io::Error) -> HostFileError {
    if e.kind() == std::io::ErrorKind::NotFound {
        HostFileError::NotFound { path: path.to_path_buf() }
    } else {
        HostFileError::Io { path: path.to_path_buf(), source: e }
    }
}

fn open_checked(path: &Path, limit: Limit, follow: bool) -> Result<(std::fs::File, u64), HostFileError> {
    let refuse = |t: std::fs::FileType| HostFileError::NotRegular {
        path: path.to_path_buf(),
        found: type_name(t),
        kind: limit.kind,
    };
    // A look before opening, so a device or FIFO is never opened at all (opening some
    // devices has effects); the opened descriptor is checked again below, which is what
    // counts if the path changes in between.
    let meta =
        if follow { std::fs::metadata(path) } else { std::fs::symlink_metadata(path) }.map_err(|e| io_err(path, e))?;
    if !meta.file_type().is_file() {
        return Err(refuse(meta.file_type()));
    }
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
    if !follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path).map_err(|e| {
        if !follow && e.raw_os_error() == Some(libc::ELOOP) {
            HostFileError::NotRegular { path: path.to_path_buf(), found: "symbolic link", kind: limit.kind }
        } else {
            io_err(path, e)
        }
    })?;
    let meta = file.metadata().map_err(|e| io_err(path, e))?;
    if !meta.file_type().is_file() {
        return Err(refuse(meta.file_type()));
    }
    if meta.len() > limit.bytes {
        return Err(HostFileError::TooLarge { path: path.to_path_buf(), size: Some(meta.len()), limit });
    }
    Ok((file, meta.len()))
}

fn read_with(path: &Path, limit: Limit, follow: bool) -> Result<Vec<u8>, HostFileError> {
    let (file, size) = open_checked(path, limit, follow)?;
    // One byte more than the cap is asked for: reading it means the file grew past it.
    let mut data = Vec::with_capacity(size.saturating_add(1).min(limit.bytes.saturating_add(1)) as usize);
    file.take(limit.bytes.saturating_add(1)).read_to_end(&mut data).map_err(|e| io_err(path, e))?;
    if data.len() as u64 > limit.bytes {
        return Err(HostFileError::TooLarge { path: path.to_path_buf(), size: None, limit });
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
    }

    const TEST: Limit = Limit::new(1000, "a test file");

    #[test]
    fn a_regular_file_is_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ok");
        std::fs::write(&p, vec![7u8; 1000]).unwrap();
        assert_eq!(read(&p, TEST).unwrap(), vec![7u8; 1000]);
        std::fs::write(&p, b"").unwrap();
        assert!(read(&p, TEST).unwrap().is_empty());
        // Through a link to a regular file: followed by `read`, refused by `read_no_follow`.
        let link = dir.path().join("link");
        std::fs::write(&p, b"text").unwrap();
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert_eq!(read_to_string(&link, TEST).unwrap(), "text");
        let e = read_no_follow(&link, TEST).unwrap_err();
        assert!(matches!(e, HostFileError::NotRegular { found: "symbolic link", .. }), "{e}");
        assert_eq!(read_no_follow(&p, TEST).unwrap(), b"text");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sig.minisig");
        mkfifo(&p);
        let t = Instant::now();
        let e = read(&p, SIGNATURE).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(2));
        assert_eq!(
            e.to_string(),
            format!("{} is a FIFO (named pipe), not a regular file (refused as a signature file)", p.display())
        );
        // Behind a link too.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(matches!(read(&link, SIGNATURE).unwrap_err(), HostFileError::NotRegular { .. }));
        // And opened directly (the check on the descriptor, past the look before it).
        let e = open_checked(&p, SIGNATURE, true).unwrap_err();
        assert!(matches!(e, HostFileError::NotRegular { .. }));
    }

    #[test]
    fn an_endless_device_behind_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("p.wasm");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read(&link, PLUGIN_WASM).unwrap_err();
        assert!(e.to_string().contains("is a character device, not a regular file"), "{e}");
        assert!(e.to_string().contains(&link.display().to_string()), "{e}");
        let e = read(Path::new("/dev/null"), CONFIG).unwrap_err();
        assert!(matches!(e, HostFileError::NotRegular { found: "character device", .. }), "{e}");
        let e = read(dir.path(), CONFIG).unwrap_err();
        assert!(matches!(e, HostFileError::NotRegular { found: "directory", .. }), "{e}");
    }

    #[test]
    fn a_file_over_the_cap_is_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("cheng.toml");
        // Sparse: 3 MiB of size, no data written, nothing to read.
        std::fs::File::create(&p).unwrap().set_len(3 * MIB).unwrap();
        let e = read(&p, CONFIG).unwrap_err();
        assert_eq!(e.to_string(), format!("{} is 3 MiB, over the 1 MiB limit for a configuration file", p.display()));
        std::fs::File::create(&p).unwrap().set_len(1001).unwrap();
        let e = read(&p, TEST).unwrap_err();
        assert!(e.to_string().ends_with("is 1001 bytes, over the 1000-byte limit for a test file"), "{e}");
        assert!(matches!(e, HostFileError::TooLarge { size: Some(1001), .. }));
        assert_eq!(e.reason(), "it is 1001 bytes, over the 1000-byte limit for a test file");
        // A bare number as the cap.
        assert!(matches!(read(&p, 1000).unwrap_err(), HostFileError::TooLarge { .. }));
        assert_eq!(read(&p, 1001).unwrap().len(), 1001);
    }

    #[test]
    fn a_missing_file_is_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("none/tokens.json");
        let e = read(&p, TOKENS).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(e.path(), p);
        assert_eq!(e.to_string(), format!("{} does not exist", p.display()));
        assert_eq!(e.reason(), "it does not exist");
        let e = HostFileError::Io { path: p.clone(), source: std::io::Error::other("boom") };
        assert_eq!(e.reason(), "cannot read it: boom");
        // A dangling link is missing too.
        let link = dir.path().join("dangling");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &link).unwrap();
        assert!(read(&link, TOKENS).unwrap_err().is_not_found());
    }

    #[test]
    fn a_lock_file_is_made_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.lock");
        let f = open_lock(&p, "a lock file").unwrap();
        f.lock().unwrap();
        assert!(p.is_file());
        drop(f);
        assert!(open_lock(&p, "a lock file").is_ok());
        let fifo = dir.path().join("fifo.lock");
        mkfifo(&fifo);
        let t = Instant::now();
        let e = open_lock(&fifo, "a lock file").unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(2));
        assert!(e.to_string().contains("is a FIFO (named pipe), not a regular file"), "{e}");
        let link = dir.path().join("zero.lock");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(open_lock(&link, "a lock file").unwrap_err(), HostFileError::NotRegular { .. }));
    }

    #[test]
    fn sizes_read_for_people() {
        assert_eq!(Size(1).to_string(), "1 byte");
        assert_eq!(Size(1023).to_string(), "1023 bytes");
        assert_eq!(Size(64 * KIB).to_string(), "64 KiB");
        assert_eq!(Size(3 * MIB + MIB / 2).to_string(), "3.5 MiB");
        assert_eq!(Size(1 << 30).to_string(), "1 GiB");
    }
}
