//! Per-run data kept by the host for components (the `run-state` import): for example
//! `todo_write`'s plan. Values are scoped by run and component, kept in memory and, when
//! the host has a state directory, in `<state>/runs/<run>/<component>.json` so that a
//! run's data survives across `cheng call` processes. Never in the workspace.
//!
//! Writes to one run are serialized — within the process by a lock per run and
//! component, across processes by an advisory lock on the run's directory — and each
//! reads the file afresh before changing it, so two concurrent writers never lose
//! each other's keys.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Largest value one key may hold.
pub const MAX_VALUE_BYTES: usize = 256 * 1024;
/// Most keys one component may keep per run.
pub const MAX_KEYS: usize = 64;

type Scope = (String, String);

/// The host-wide store of per-run data.
#[derive(Clone, Default)]
pub struct RunStateStore {
    dir: Option<PathBuf>,
    mem: Arc<Mutex<HashMap<Scope, BTreeMap<String, String>>>>,
    counts: Arc<Mutex<HashMap<String, u64>>>,
    writers: Arc<Mutex<HashMap<Scope, Arc<Mutex<()>>>>>,
}

/// One component's view of one run's data.
#[derive(Clone)]
pub struct RunState {
    store: RunStateStore,
    scope: Scope,
}

impl RunStateStore {
    /// A store persisting under `dir` (`None`: memory only).
    pub fn new(dir: Option<PathBuf>) -> Self {
        RunStateStore { dir, mem: Arc::default(), counts: Arc::default(), writers: Arc::default() }
    }

    /// The view for `run` and `component`.
    pub fn scope(&self, run: &str, component: &str) -> RunState {
        RunState { store: self.clone(), scope: (run.to_string(), component.to_string()) }
    }

    /// Count one more call for `run` and return the count so far (this one included).
    /// With a state directory the count is one byte appended per call to
    /// `<runs>/<run>/calls`, so concurrent processes count correctly.
    pub fn count_call(&self, run: &str) -> u64 {
        if let Some(dir) = &self.dir {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt as _;
            let d = dir.join(run);
            // Never blocking on a FIFO's open, and appended to only if a regular file.
            let opened = std::fs::create_dir_all(&d).and_then(|_| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
                    .open(d.join("calls"))
            });
            if let Ok(mut f) = opened
                && f.metadata().is_ok_and(|m| m.is_file())
                && f.write_all(b".").is_ok()
                && let Ok(m) = f.metadata()
            {
                return m.len();
            }
        }
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let c = counts.entry(run.to_string()).or_insert(0);
        *c += 1;
        *c
    }

    fn file(&self, scope: &Scope) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(&scope.0).join(format!("{}.json", scope.1)))
    }

    fn load(&self, scope: &Scope) -> BTreeMap<String, String> {
        let mut mem = self.mem.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(m) = mem.get(scope) {
            return m.clone();
        }
        let loaded = self.read_file(scope);
        mem.insert(scope.clone(), loaded.clone());
        loaded
    }

    fn read_file(&self, scope: &Scope) -> BTreeMap<String, String> {
        use crate::policy::hostfile;
        let Some(file) = self.file(scope) else { return BTreeMap::new() };
        match hostfile::read(&file, hostfile::RUN_STATE) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_default(),
            Err(e) if e.is_not_found() => BTreeMap::new(),
            // Not a regular file, or over its cap: the run starts afresh (said in the log);
            // the next `set` replaces it.
            Err(e) => {
                tracing::warn!(target: "cheng::runstate", "ignoring run state: {e}");
                BTreeMap::new()
            }
        }
    }

    /// The lock serializing writers of `scope` in this process.
    fn writer(&self, scope: &Scope) -> Arc<Mutex<()>> {
        self.writers.lock().unwrap_or_else(|p| p.into_inner()).entry(scope.clone()).or_default().clone()
    }
}

/// Why a value was not stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunStateError {
    /// The value is larger than [`MAX_VALUE_BYTES`].
    #[error("run state value for \"{key}\" is {bytes} bytes; the limit is {MAX_VALUE_BYTES}")]
    ValueTooLarge {
        /// The key.
        key: String,
        /// The value's size.
        bytes: usize,
    },
    /// The run holds [`MAX_KEYS`] keys already, and this is a new one.
    #[error("run state holds {MAX_KEYS} keys already; reuse one")]
    TooManyKeys,
    /// The run's state could not be locked or saved.
    #[error("cannot {what} run state: {source}")]
    Io {
        /// What was being done (`lock`, `save`).
        what: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl RunState {
    /// Read a value.
    pub fn get(&self, key: &str) -> Option<String> {
        self.store.load(&self.scope).get(key).cloned()
    }

    /// Store a value; refused past [`MAX_VALUE_BYTES`] or [`MAX_KEYS`].
    pub fn set(&self, key: &str, value: &str) -> Result<(), RunStateError> {
        if value.len() > MAX_VALUE_BYTES {
            return Err(RunStateError::ValueTooLarge { key: key.to_string(), bytes: value.len() });
        }
        let writer = self.store.writer(&self.scope);
        let _in_process = writer.lock().unwrap_or_else(|p| p.into_inner());
        let file = self.store.file(&self.scope);
        // Across processes: an advisory lock on the run's directory, then the file as
        // another process may have left it.
        let _across = match &file {
            Some(f) => {
                Some(lock_dir(f.parent().unwrap_or(f)).map_err(|e| RunStateError::Io { what: "lock", source: e })?)
            }
            None => None,
        };
        let mut map = if file.is_some() { self.store.read_file(&self.scope) } else { self.store.load(&self.scope) };
        if !map.contains_key(key) && map.len() >= MAX_KEYS {
            return Err(RunStateError::TooManyKeys);
        }
        map.insert(key.to_string(), value.to_string());
        if let Some(file) = &file {
            crate::atomic::write_atomic(file, &serde_json::to_vec(&map).unwrap_or_default())
                .map_err(|e| RunStateError::Io { what: "save", source: e })?;
        }
        let mut mem = self.store.mem.lock().unwrap_or_else(|p| p.into_inner());
        mem.insert(self.scope.clone(), map);
        Ok(())
    }
}

/// Hold an exclusive advisory lock on `dir` (created if missing) until the handle drops.
fn lock_dir(dir: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::create_dir_all(dir)?;
    let f = std::fs::File::open(dir)?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_persistent_and_capped() {
        let dir = std::env::temp_dir().join(format!("cheng-runstate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = RunStateStore::new(Some(dir.clone()));
        let a = store.scope("run1", "notes");
        // A value set is read back.
        a.set("plan", "[1]").unwrap();
        assert_eq!(a.get("plan").as_deref(), Some("[1]"));
        // Another run does not see it.
        assert_eq!(store.scope("run2", "notes").get("plan"), None);
        // Another component does not see it.
        assert_eq!(store.scope("run1", "fs").get("plan"), None);
        // A fresh store over the same directory (a new process) does.
        let again = RunStateStore::new(Some(dir.clone()));
        assert_eq!(again.scope("run1", "notes").get("plan").as_deref(), Some("[1]"));
        // Oversized values are refused.
        assert!(a.set("big", &"x".repeat(MAX_VALUE_BYTES + 1)).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn concurrent_writers_lose_nothing() {
        let dir = std::env::temp_dir().join(format!("cheng-runstate-race-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // Two stores over one directory stand for two processes; each has threads.
        let stores = [RunStateStore::new(Some(dir.clone())), RunStateStore::new(Some(dir.clone()))];
        std::thread::scope(|s| {
            for (i, store) in stores.iter().enumerate() {
                for t in 0..4 {
                    let view = store.scope("run", "notes");
                    s.spawn(move || {
                        for k in 0..8 {
                            view.set(&format!("k{i}-{t}-{k}"), "v").unwrap();
                        }
                    });
                }
            }
        });
        // Every key written by every writer is there.
        let fresh = RunStateStore::new(Some(dir.clone())).scope("run", "notes");
        for i in 0..2 {
            for t in 0..4 {
                for k in 0..8 {
                    assert!(fresh.get(&format!("k{i}-{t}-{k}")).is_some(), "k{i}-{t}-{k} lost");
                }
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
