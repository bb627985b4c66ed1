//! What a tool declares it needs and what a grant gives: filesystem access to the
//! workspace, process spawning through the host, network hosts.
//!
//! # Example
//!
//! ```
//! use cheng_contract::FsAccess;
//!
//! // Access narrows with `min`: a tool declaring write, granted read, gets read.
//! assert_eq!(FsAccess::Write.min(FsAccess::Read), FsAccess::Read);
//! ```

/// Filesystem access to the workspace, ordered from least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
pub enum FsAccess {
    /// No files.
    None,
    /// The workspace, read-only.
    Read,
    /// The workspace, read-write.
    Write,
}

/// What a tool declares it needs; the host grants at most this.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Needs {
    /// Filesystem access.
    pub fs: FsAccess,
    /// Process spawning through the host.
    pub spawn: bool,
    /// Network hosts (`host` or `host:port`).
    pub network: Vec<String>,
}
