//! Components precompiled once and cached on disk by content hash and engine
//! compatibility.
//!
//! A component is cached as two files: `<key>.cwasm`, wasmtime's serialized component
//! exactly as the engine wrote it, and `<key>.check`, the SHA-256 of that file and the
//! identity (device, inode, size, modification and change times) it had when the digest
//! was last verified. A load whose file still has that identity maps the file as it
//! stands (no read, no hash: wasmtime maps it and checks its own header, which includes
//! the engine's compatibility); a file whose identity changed is read and hashed once,
//! and the check rewritten when it matches. A missing check, a digest that does not
//! match, or a file wasmtime refuses means the component is compiled again and both files
//! replaced. Files are written to a temporary name and renamed, never changed in place,
//! so concurrent hosts sharing a cache directory never read a half-written file.
//!
//! The digest protects against corruption, not against someone who can write the state
//! directory: that directory is trusted, and the built-in writers refuse it. A change
//! made in place within one tick of the file system's clock, keeping the size, keeps the
//! identity; renames, copies and any later write do not.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::HostError;
use crate::policy::hostfile;

/// What `<key>.check` holds.
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Check {
    /// SHA-256 of the `.cwasm` file, hex.
    sha256: String,
    /// The file's identity when the digest was verified.
    identity: Identity,
}

/// Device, inode, size, and modification and change times (nanoseconds) of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Identity(u64, u64, u64, i128, i128);

impl Identity {
    fn of(path: &Path) -> Option<Identity> {
        Some(Identity::of_meta(&std::fs::metadata(path).ok()?))
    }

    fn of_meta(m: &std::fs::Metadata) -> Identity {
        use std::os::unix::fs::MetadataExt as _;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Identity(m.dev(), m.ino(), m.size(), ns(m.mtime(), m.mtime_nsec()), ns(m.ctime(), m.ctime_nsec()))
    }
}

/// What a cache file read gave, as a hit or a miss: a file that is not a regular file or
/// is over its cap is a miss (said in the log), and the component is compiled again.
fn usable<T>(read: Result<T, hostfile::HostFileError>) -> Option<T> {
    match read {
        Ok(v) => Some(v),
        Err(e) if e.is_not_found() => None,
        Err(e) => {
            tracing::warn!(target: "cheng::cache", "ignoring a cache file: {e}");
            None
        }
    }
}

/// A path that opens the very file `file` is (its descriptor under `/proc/self/fd`), for
/// wasmtime's map of it; `path` itself where there is no `/proc`.
fn reopen_path(file: &std::fs::File, path: &Path) -> PathBuf {
    use std::os::fd::AsRawFd as _;
    let fd = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    if fd.exists() { fd } else { path.to_path_buf() }
}

/// The lower-case hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A directory of precompiled components.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: Option<PathBuf>,
}

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loaded {
    /// From a valid cache file.
    Cached,
    /// Compiled now (and cached when a directory is set).
    Compiled,
}

impl ComponentCache {
    /// A cache in `dir` (created on first write); `None` compiles every time.
    pub fn new(dir: Option<PathBuf>) -> Self {
        ComponentCache { dir }
    }

    /// The cache directory, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The cache key: content hash plus a hash of the engine's compatibility settings.
    pub fn key(engine: &Engine, wasm_sha: &str) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        format!("{wasm_sha}-{:016x}", h.finish())
    }

    /// Load `wasm` (whose SHA-256 is `wasm_sha`) from the cache, or compile and store it.
    /// `on_compile` runs just before a compilation starts (for a progress notice).
    pub fn load(
        &self,
        engine: &Engine,
        name: &str,
        wasm: &[u8],
        wasm_sha: &str,
        on_compile: &dyn Fn(&str),
    ) -> Result<(Component, Loaded), HostError> {
        let path = self.dir.as_ref().map(|d| d.join(format!("{}.cwasm", Self::key(engine, wasm_sha))));
        if let Some(path) = &path
            && let Some(component) = read_cached(engine, path)
        {
            return Ok((component, Loaded::Cached));
        }
        on_compile(name);
        let serialized = engine
            .precompile_component(wasm)
            .map_err(|e| HostError::Component { name: name.to_string(), reason: root_cause(&e) })?;
        // SAFETY: the bytes were produced by this engine a moment ago.
        let component = unsafe { Component::deserialize(engine, &serialized) }
            .map_err(|e| HostError::Component { name: name.to_string(), reason: root_cause(&e) })?;
        if let Some(path) = &path
            && let Err(e) = write_cached(path, &serialized)
        {
            tracing::warn!(target: "cheng::cache", path = %path.display(), "cannot write the component cache: {e}");
        }
        Ok((component, Loaded::Compiled))
    }
}

/// The check file beside the cached component at `path`.
fn check_path(path: &Path) -> PathBuf {
    path.with_extension("check")
}

/// A valid cached component, or `None` (missing, corrupt, or made by another engine).
fn read_cached(engine: &Engine, path: &Path) -> Option<Component> {
    let t = std::time::Instant::now();
    let check: Check =
        serde_json::from_slice(&usable(hostfile::read(&check_path(path), hostfile::CACHE_META))?).ok()?;
    // Opened without blocking and checked to be a regular file under the cap: a FIFO, a
    // link to a device or an oversized file in the cache is a miss, never waited on.
    let file = usable(hostfile::open(path, hostfile::CACHE_ENTRY))?;
    let identity = Identity::of_meta(&file.metadata().ok()?);
    let loaded = if identity == check.identity {
        tracing::trace!(target: "cheng::cache", us = t.elapsed().as_secs_f64() * 1e6, "identity unchanged");
        // SAFETY: the file is byte-for-byte what this host wrote after compiling it with
        // an engine of the same compatibility hash (part of the file name), verified
        // against its digest when it got the identity it still has; cache files are
        // replaced by rename, never changed in place, so the mapping stays as verified.
        // wasmtime also checks its own header and refuses incompatible engines' output.
        // The file mapped is the one just opened and checked (through its descriptor).
        unsafe { Component::deserialize_file(engine, reopen_path(&file, path)) }
    } else {
        let bytes = usable(hostfile::read(path, hostfile::CACHE_ENTRY))?;
        if sha256_hex(&bytes) != check.sha256 {
            tracing::warn!(target: "cheng::cache", path = %path.display(), "ignoring a corrupt cache file");
            return None;
        }
        tracing::trace!(target: "cheng::cache", us = t.elapsed().as_secs_f64() * 1e6, "read and digest checked");
        // The digest holds for this identity now: the next load skips the hash.
        if let Err(e) = write_check(path, &check.sha256) {
            tracing::debug!(target: "cheng::cache", path = %path.display(), "cannot rewrite the cache check: {e}");
        }
        // SAFETY: as above, with the bytes just verified against the digest.
        unsafe { Component::deserialize(engine, &bytes) }
    };
    match loaded {
        Ok(c) => {
            tracing::trace!(target: "cheng::cache", us = t.elapsed().as_secs_f64() * 1e6, "deserialized");
            Some(c)
        }
        Err(e) => {
            tracing::warn!(target: "cheng::cache", path = %path.display(), "ignoring a cache file wasmtime refused: {e:#}");
            None
        }
    }
}

/// Record `sha256` as verified for the file at `path` as it stands.
fn write_check(path: &Path, sha256: &str) -> std::io::Result<()> {
    let identity = Identity::of(path).ok_or_else(|| std::io::Error::other("the cache file is gone"))?;
    let check = Check { sha256: sha256.to_string(), identity };
    crate::atomic::write_atomic(&check_path(path), &serde_json::to_vec(&check).map_err(std::io::Error::other)?)
}

fn write_cached(path: &Path, payload: &[u8]) -> std::io::Result<()> {
    // The component first, then its check: a check never vouches for a file not yet
    // in place, and a stale check only costs a hash (its identity no longer matches).
    crate::atomic::write_atomic(path, payload)?;
    write_check(path, &sha256_hex(payload))
}

/// The innermost message of an error chain.
pub(crate) fn root_cause(e: &wasmtime::Error) -> String {
    format!("{e:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_and_foreign_files_are_recompiled() {
        let engine = crate::runtime::engine::EngineHandle::new().unwrap();
        let engine = engine.engine();
        let dir = std::env::temp_dir().join(format!("cheng-cache-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = ComponentCache::new(Some(dir.clone()));
        let wasm = wat_component();
        let sha = sha256_hex(&wasm);
        // First load compiles and writes the file.
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Compiled);
        // Second load comes from the cache.
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Cached);
        let path = dir.join(format!("{}.cwasm", ComponentCache::key(engine, &sha)));
        let check = || serde_json::from_slice::<Check>(&std::fs::read(check_path(&path)).unwrap()).unwrap();
        assert_eq!(check().identity, Identity::of(&path).unwrap());
        // A copy of the same bytes (a new inode) is hashed once, accepted, and its new
        // identity recorded.
        let bytes = std::fs::read(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        assert_ne!(check().identity, Identity::of(&path).unwrap());
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Cached);
        assert_eq!(check().identity, Identity::of(&path).unwrap());
        // Flip one byte (a moment later, so the file's times move): the identity changed,
        // the digest catches it and the component is recompiled.
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut flipped = bytes.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Compiled);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        // A truncated file is recompiled too, and so is a file with no check beside it.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Compiled);
        std::fs::remove_file(check_path(&path)).unwrap();
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Compiled);
        // A file whose check vouches for it but which no engine made is refused by
        // wasmtime (it checks its own header).
        let junk = b"not a wasmtime artifact".to_vec();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, &junk).unwrap();
        write_check(&path, &sha256_hex(&junk)).unwrap();
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Compiled);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// `cache.load` on another thread, failing the test rather than hanging it.
    fn load_within(cache: &ComponentCache, wasm: &[u8], sha: &str) -> Loaded {
        let (tx, rx) = std::sync::mpsc::channel();
        let (cache, wasm, sha) = (cache.clone(), wasm.to_vec(), sha.to_string());
        std::thread::spawn(move || {
            let engine = crate::runtime::engine::EngineHandle::new().unwrap();
            let _ = tx.send(cache.load(engine.engine(), "t", &wasm, &sha, &|_| {}).unwrap().1);
        });
        rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the cache load hung")
    }

    #[test]
    fn a_fifo_device_or_oversized_file_in_the_cache_is_a_miss() {
        let engine = crate::runtime::engine::EngineHandle::new().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(Some(dir.path().to_path_buf()));
        let wasm = wat_component();
        let sha = sha256_hex(&wasm);
        let path = dir.path().join(format!("{}.cwasm", ComponentCache::key(engine.engine(), &sha)));
        // Positive control: compiled once, then a hit.
        assert_eq!(load_within(&cache, &wasm, &sha), Loaded::Compiled);
        assert_eq!(load_within(&cache, &wasm, &sha), Loaded::Cached);
        let good = std::fs::read(&path).unwrap();
        let mkfifo = |p: &Path| {
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        };
        // A FIFO in place of the entry, with a check forged to vouch for it (the fast
        // path would map it), then without (the slow path would read it).
        for forged in [true, false] {
            std::fs::remove_file(&path).unwrap();
            mkfifo(&path);
            if forged {
                write_check(&path, &sha256_hex(&good)).unwrap();
            }
            assert_eq!(load_within(&cache, &wasm, &sha), Loaded::Compiled, "forged check: {forged}");
            assert_eq!(std::fs::read(&path).unwrap(), good, "the entry is written again");
        }
        // A link to an endless device, with a forged check.
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        write_check(&path, &sha256_hex(&good)).unwrap();
        assert_eq!(load_within(&cache, &wasm, &sha), Loaded::Compiled);
        assert!(std::fs::symlink_metadata(&path).unwrap().file_type().is_file());
        // The check beside it a FIFO.
        std::fs::remove_file(check_path(&path)).unwrap();
        mkfifo(&check_path(&path));
        assert_eq!(load_within(&cache, &wasm, &sha), Loaded::Compiled);
        assert_eq!(load_within(&cache, &wasm, &sha), Loaded::Cached);
        // An entry over the cap (sparse: no data written).
        std::fs::remove_file(&path).unwrap();
        std::fs::File::create(&path).unwrap().set_len(hostfile::CACHE_ENTRY.bytes + 1).unwrap();
        write_check(&path, &sha256_hex(&good)).unwrap();
        assert_eq!(load_within(&cache, &wasm, &sha), Loaded::Compiled);
        assert_eq!(std::fs::read(&path).unwrap(), good);
    }

    /// The smallest component: no imports, no exports.
    fn wat_component() -> Vec<u8> {
        // `(component)` in the binary format: magic, version 0x0d layer 1.
        vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
    }
}
