//! Components precompiled once and cached on disk by content hash and engine
//! compatibility.
//!
//! A cache file is `CHENGCW1` + the SHA-256 of the payload + the payload (wasmtime's
//! serialized component). On load the digest is checked before wasmtime sees a byte,
//! and wasmtime itself checks that the payload was made by a compatible engine; any
//! mismatch (a truncated, corrupt or foreign file) means the component is compiled
//! again and the file replaced. Files are written to a temporary name and renamed, so
//! concurrent hosts sharing a cache directory never read a half-written file.
//!
//! The digest protects against corruption, not against someone who can write the state
//! directory: that directory is trusted, and the built-in writers refuse it.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::error::HostError;

const MAGIC: &[u8; 8] = b"CHENGCW1";

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

/// A valid cached component, or `None` (missing, corrupt, or made by another engine).
fn read_cached(engine: &Engine, path: &Path) -> Option<Component> {
    let t = std::time::Instant::now();
    let bytes = std::fs::read(path).ok()?;
    tracing::trace!(target: "cheng::cache", us = t.elapsed().as_secs_f64() * 1e6, "read");
    if bytes.len() < MAGIC.len() + 32 || &bytes[..MAGIC.len()] != MAGIC {
        tracing::warn!(target: "cheng::cache", path = %path.display(), "ignoring a cache file with a bad header");
        return None;
    }
    let (digest, payload) = bytes[MAGIC.len()..].split_at(32);
    if Sha256::digest(payload).as_slice() != digest {
        tracing::warn!(target: "cheng::cache", path = %path.display(), "ignoring a corrupt cache file");
        return None;
    }
    tracing::trace!(target: "cheng::cache", us = t.elapsed().as_secs_f64() * 1e6, "digest checked");
    // SAFETY: the payload is byte-for-byte what this host wrote after compiling it with
    // an engine of the same compatibility hash (part of the file name); wasmtime also
    // checks its own header and refuses payloads from incompatible engines.
    match unsafe { Component::deserialize(engine, payload) } {
        Ok(c) => {
            tracing::trace!(target: "cheng::cache", us = t.elapsed().as_secs_f64() * 1e6, "deserialized");
            Some(c)
        }
        Err(e) => {
            tracing::warn!(target: "cheng::cache", path = %path.display(), "ignoring a cache file wasmtime refused: {e}");
            None
        }
    }
}

fn write_cached(path: &Path, payload: &[u8]) -> std::io::Result<()> {
    let mut data = Vec::with_capacity(MAGIC.len() + 32 + payload.len());
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&Sha256::digest(payload));
    data.extend_from_slice(payload);
    crate::atomic::write_atomic(path, &data)
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
        // Flip one payload byte: the digest catches it and the component is recompiled.
        let path = dir.join(format!("{}.cwasm", ComponentCache::key(engine, &sha)));
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, &bytes).unwrap();
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Compiled);
        // A truncated file is recompiled too.
        std::fs::write(&path, b"CHENGCW1").unwrap();
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Compiled);
        // A file with a valid digest but a payload no engine made is refused by wasmtime.
        let junk = b"not a wasmtime artifact".to_vec();
        let mut forged = MAGIC.to_vec();
        forged.extend_from_slice(&Sha256::digest(&junk));
        forged.extend_from_slice(&junk);
        std::fs::write(&path, &forged).unwrap();
        let (_, how) = cache.load(engine, "t", &wasm, &sha, &|_| {}).unwrap();
        assert_eq!(how, Loaded::Compiled);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The smallest component: no imports, no exports.
    fn wat_component() -> Vec<u8> {
        // `(component)` in the binary format: magic, version 0x0d layer 1.
        vec![0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00]
    }
}
