//! Plugin entries (`[[plugins]]`): the table as written, and the checks every entry
//! that names a component or a server passes — the id's shape and each grant folder.

use std::path::PathBuf;

use serde::Deserialize;

/// One third-party component (`[[plugins]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// Its id: `[a-z][a-z0-9-]{0,15}`; its tools are registered as `<id>__<tool>`.
    pub id: String,
    /// The `.wasm` file, relative to the configuration file's directory. An entry names
    /// either a file or a `source`.
    pub path: Option<PathBuf>,
    /// An OCI reference (`oci://registry/repository:tag` or `…@sha256:<hex>`): the
    /// component as `cheng plugin pull` stored it in the state directory. Nothing is
    /// fetched when the host starts.
    pub source: Option<String>,
    /// The environment variable holding the registry's credentials for `source`:
    /// `user:password` (basic) or `Bearer <token>`.
    pub auth_env: Option<String>,
    /// The expected SHA-256 of the component (lower-case hex).
    pub sha256: Option<String>,
    /// Minisign public keys (the base64 line of a `.pub` file): the file loads only
    /// with a signature by one of them beside it (`<file>.minisig`). Without `sha256`,
    /// a new version signed by the same key loads without editing the entry.
    #[serde(default)]
    pub signed_by: Vec<String>,
    /// Filesystem grant: `"none"`, `"read"`, or `{ read = [...], write = [...] }`.
    #[serde(default)]
    pub fs: FsGrantConfig,
    /// Process spawning through the host.
    #[serde(default)]
    pub spawn: bool,
    /// Hosts the plugin may reach over `wasi:http` (`api.example.com`, `*.example.com`,
    /// an address; optionally `:port`), through the same guard as the web tools. Empty:
    /// no network, and a plugin that imports `wasi:http` or sockets is refused at load.
    #[serde(default, alias = "network")]
    pub net: Vec<String>,
    /// Memory limit in MiB.
    pub memory_mb: Option<u64>,
    /// CPU deadline in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// A plugin's filesystem grant as written in the file.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum FsGrantConfig {
    /// `"none"` or `"read"`.
    Simple(String),
    /// Sub-folders.
    Scoped {
        /// Read-only sub-folders.
        #[serde(default)]
        read: Vec<String>,
        /// Read-write sub-folders.
        #[serde(default)]
        write: Vec<String>,
    },
}

impl Default for FsGrantConfig {
    fn default() -> Self {
        FsGrantConfig::Simple("none".into())
    }
}

/// Whether `id` is a valid plugin id: `[a-z][a-z0-9-]{0,15}`.
pub fn valid_plugin_id(id: &str) -> bool {
    let mut chars = id.chars();
    matches!(chars.next(), Some('a'..='z'))
        && id.len() <= 16
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Check a plugin's sub-folder grant: relative, inside the workspace, never the whole
/// workspace for writing, never `.git`.
/// `who` names the entry in messages (`plugin "x"`, `MCP server "y"`).
pub fn check_grant_folder(who: &str, folder: &str, write: bool) -> Result<String, crate::SettingError> {
    grant_folder(who, folder, write).map_err(crate::SettingError)
}

fn grant_folder(who: &str, folder: &str, write: bool) -> Result<String, String> {
    let rel = cheng_contract::paths::lexical(folder, "/")
        .map_err(|r| format!("{who}: grant folder \"{folder}\" is refused: {r}"))?;
    let norm = rel.normalized();
    if folder.starts_with('/') {
        return Err(format!("{who}: grant folder \"{folder}\" must be relative to the workspace"));
    }
    if write && norm == "." {
        return Err(format!("{who}: a scoped grant never gets write access to the whole workspace; name sub-folders"));
    }
    if norm.split('/').any(cheng_contract::paths::is_git_dir_name) {
        return Err(format!("{who}: grant folder \"{folder}\" would expose .git"));
    }
    Ok(norm)
}
