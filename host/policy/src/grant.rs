//! What a component may touch: the operator's grant, intersected with what the
//! component declared it needs. Never more than declared, never more than granted.
//!
//! # Example
//!
//! ```
//! use cheng_policy::grant::{mounts, FsGrant};
//! use cheng_contract::FsAccess;
//!
//! // A component that declares write, granted write on `out/` and read on `docs/`:
//! let m = mounts(FsAccess::Write, &FsGrant::Scoped { read: vec!["docs".into()], write: vec!["out".into()] });
//! assert_eq!(m.len(), 2);
//! // The same component declaring only read gets `out/` read-only.
//! let m = mounts(FsAccess::Read, &FsGrant::Scoped { read: vec![], write: vec!["out".into()] });
//! assert!(!m[0].write);
//! ```

use serde::Serialize;

use cheng_contract::FsAccess;

/// Filesystem access granted to a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FsGrant {
    /// No files.
    None,
    /// The whole workspace, read-only.
    Read,
    /// The whole workspace, read-write (built-in components only).
    Write,
    /// Named sub-folders, mounted at the same relative paths.
    Scoped {
        /// Read-only sub-folders.
        read: Vec<String>,
        /// Read-write sub-folders.
        write: Vec<String>,
    },
}

/// Everything granted to a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// Files.
    pub fs: FsGrant,
    /// Process spawning through the host.
    pub spawn: bool,
    /// Memory limit in MiB (else the config's).
    pub memory_mb: Option<u64>,
    /// CPU deadline in ms (else the config's).
    pub cpu_ms: Option<u64>,
    /// Hosts it may reach over `wasi:http` (`api.example.com`, `*.example.com`, an
    /// address, optionally `:port`), through the host's egress guard; empty for none.
    /// Built-in components that declare network needs reach any public host instead.
    pub net: Vec<String>,
}

impl Grant {
    /// What built-in components get: their declared needs, in full.
    pub fn builtin() -> Grant {
        Grant { fs: FsGrant::Write, spawn: true, memory_mb: None, cpu_ms: None, net: vec![] }
    }

    /// Nothing at all.
    pub fn none() -> Grant {
        Grant { fs: FsGrant::None, spawn: false, memory_mb: None, cpu_ms: None, net: vec![] }
    }
}

/// One directory preopened for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Workspace-relative directory (`.` for the root).
    pub rel: String,
    /// Read-write when true.
    pub write: bool,
}

/// The directories a component gets: the intersection of `declared` and `grant`.
pub fn mounts(declared: FsAccess, grant: &FsGrant) -> Vec<Mount> {
    let can_write = declared == FsAccess::Write;
    match (declared, grant) {
        (FsAccess::None, _) | (_, FsGrant::None) => Vec::new(),
        (_, FsGrant::Read) => vec![Mount { rel: ".".into(), write: false }],
        (_, FsGrant::Write) => vec![Mount { rel: ".".into(), write: can_write }],
        (_, FsGrant::Scoped { read, write }) => read
            .iter()
            .map(|r| Mount { rel: r.clone(), write: false })
            .chain(write.iter().map(|w| Mount { rel: w.clone(), write: can_write }))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intersection() {
        // Declared none: nothing, whatever the grant.
        assert!(mounts(FsAccess::None, &FsGrant::Write).is_empty());
        // Granted none: nothing, whatever was declared.
        assert!(mounts(FsAccess::Write, &FsGrant::None).is_empty());
        // Declared write, granted read: read-only.
        assert_eq!(mounts(FsAccess::Write, &FsGrant::Read), vec![Mount { rel: ".".into(), write: false }]);
        // Declared read, granted write: read-only.
        assert_eq!(mounts(FsAccess::Read, &FsGrant::Write), vec![Mount { rel: ".".into(), write: false }]);
        // Declared write, granted write: read-write.
        assert_eq!(mounts(FsAccess::Write, &FsGrant::Write), vec![Mount { rel: ".".into(), write: true }]);
    }
}
