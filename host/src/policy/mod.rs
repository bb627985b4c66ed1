//! Operator policy from `cheng.toml`: roles and the tools they grant, limits, and
//! per-tool settings. Free of engine types so it can be tested on its own.
//!
//! With no file, working defaults apply: the three built-in roles (`recon`, `writer`,
//! `developer`) and `developer` as the default role.
//!
//! # Example
//!
//! ```
//! use cheng_host::policy::Config;
//!
//! let cfg = Config::from_toml_str(r#"
//!     default_role = "reviewer"
//!     [roles.reviewer]
//!     inherits = "recon"
//!     tools = ["write_file"]
//! "#, "cheng.toml").unwrap();
//! let policy = cfg.policy().unwrap();
//! assert!(policy.grants("reviewer", "read_file"));
//! assert!(policy.grants("reviewer", "write_file"));
//! assert!(!policy.grants("reviewer", "workspace_shell"));
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Tools of the built-in `recon` role: inspection only.
pub const RECON_TOOLS: &[&str] = &[
    "list_dir",
    "find_files",
    "read_file",
    "read_files",
    "search_files",
    "workspace_git",
    "workspace_markdown",
    "workspace_preview",
    "think",
    "todo_write",
];
/// Tools the built-in `writer` role adds to `recon`: document writing.
pub const WRITER_EXTRA: &[&str] = &["write_file"];
/// Tools the built-in `developer` role adds to `writer`.
pub const DEVELOPER_EXTRA: &[&str] =
    &["edit_file", "apply_patch", "workspace_shell", "workspace_tests", "web_fetch", "web_search"];
/// The role used when neither the CLI nor the config names one.
pub const DEFAULT_ROLE: &str = "developer";
/// Default memory limit per call, in MiB.
pub const DEFAULT_MEMORY_MB: u64 = 256;
/// Default CPU deadline per call (guest computing time), in milliseconds.
pub const DEFAULT_CPU_MS: u64 = 30_000;

/// A configuration file problem: which file, where, and why.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration {path}: {message}")]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// The reason, with line and column when the parser knows them.
    pub message: String,
}

/// The operator's configuration file, as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The role `cheng call` uses when `--role` is not given.
    pub default_role: Option<String>,
    /// Roles, by name. A role named like a built-in one replaces it.
    #[serde(default)]
    pub roles: BTreeMap<String, RoleConfig>,
    /// Resource limits for every call.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Approval settings.
    #[serde(default)]
    pub approvals: ApprovalsConfig,
    /// Per-tool settings, by tool name (kept as TOML for the tool's own reader).
    #[serde(default)]
    pub tools: BTreeMap<String, toml::Table>,
    /// Third-party components to load.
    #[serde(default)]
    pub plugins: Vec<PluginConfig>,
    /// The audit log.
    #[serde(default)]
    pub records: RecordsConfig,
    /// Process spawning (`[process]`): shell strings, whitelist, rules, environment,
    /// output caps, Landlock.
    #[serde(default)]
    pub process: crate::process::ProcessConfig,
    /// Limits per run.
    #[serde(default)]
    pub runs: RunsConfig,
    /// Where workspaces may be.
    #[serde(default)]
    pub workspaces: WorkspacesConfig,
    /// Load plugins whose entry has no `sha256` (default false: a pin is required).
    #[serde(default)]
    pub allow_unpinned_plugins: bool,
    /// Where the file came from (not part of the file).
    #[serde(skip)]
    pub source: Option<PathBuf>,
}

/// One role.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoleConfig {
    /// Another role whose tools this one also holds.
    pub inherits: Option<String>,
    /// Tools this role holds.
    #[serde(default)]
    pub tools: Vec<String>,
}

/// Limits applied to every call.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitsConfig {
    /// Linear memory a component may grow to, in MiB.
    #[serde(default = "default_memory")]
    pub memory_mb: u64,
    /// Guest computing time per call, in milliseconds (time waiting on the host excluded).
    #[serde(default = "default_cpu")]
    pub cpu_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig { memory_mb: DEFAULT_MEMORY_MB, cpu_ms: DEFAULT_CPU_MS }
    }
}

/// The audit log (`[records]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordsConfig {
    /// Group-commit window: appended records are fsynced together at most this often.
    #[serde(default = "default_window")]
    pub commit_window_ms: u64,
}

impl Default for RecordsConfig {
    fn default() -> Self {
        RecordsConfig { commit_window_ms: default_window() }
    }
}

fn default_window() -> u64 {
    100
}

/// Limits per run (`[runs]`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunsConfig {
    /// Most tool calls one run may make (its round-trip budget); 0 for no limit.
    #[serde(default)]
    pub max_calls: u64,
}

/// Where workspaces may be (`[workspaces]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkspacesConfig {
    /// The directory projects live under.
    pub root: Option<PathBuf>,
    /// Whether a workspace outside `root` may be used (default true).
    #[serde(default = "yes")]
    pub allow_external: bool,
}

impl Default for WorkspacesConfig {
    fn default() -> Self {
        WorkspacesConfig { root: None, allow_external: true }
    }
}

fn yes() -> bool {
    true
}

/// Host-side settings for one tool, read from `[tools.<name>]` (other keys there are
/// the tool's own).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLimits {
    /// Memory limit in MiB.
    pub memory_mb: Option<u64>,
    /// CPU deadline in ms.
    pub cpu_ms: Option<u64>,
    /// Narrow the tool's filesystem access (`"none"` or `"read"`); never widens it.
    pub fs: Option<crate::FsAccess>,
}

/// One third-party component (`[[plugins]]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginConfig {
    /// Its id: `[a-z][a-z0-9-]{0,15}`; its tools are registered as `<id>__<tool>`.
    pub id: String,
    /// The `.wasm` file, relative to the configuration file's directory.
    pub path: PathBuf,
    /// The expected SHA-256 of the file (lower-case hex).
    pub sha256: Option<String>,
    /// Filesystem grant: `"none"`, `"read"`, or `{ read = [...], write = [...] }`.
    #[serde(default)]
    pub fs: FsGrantConfig,
    /// Process spawning through the host.
    #[serde(default)]
    pub spawn: bool,
    /// Network hosts (refused at load until the web tools exist).
    #[serde(default)]
    pub network: Vec<String>,
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

fn default_memory() -> u64 {
    DEFAULT_MEMORY_MB
}
fn default_cpu() -> u64 {
    DEFAULT_CPU_MS
}

/// Approval settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsConfig {
    /// How long a request waits for an answer, in milliseconds (floor 1000).
    #[serde(default = "default_approval_timeout")]
    pub timeout_ms: u64,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        ApprovalsConfig { timeout_ms: default_approval_timeout() }
    }
}

fn default_approval_timeout() -> u64 {
    600_000
}

impl Config {
    /// Parse a configuration from TOML text; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
        Self::parse(text, origin, Some(PathBuf::from(origin)))
    }

    fn parse(text: &str, origin: &str, source: Option<PathBuf>) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text)
            .map_err(|e| ConfigError { path: origin.to_string(), message: describe_toml_error(text, &e) })?;
        cfg.source = source;
        cfg.policy()?;
        if let Err(message) = cfg.process.validate() {
            return Err(ConfigError { path: origin.to_string(), message });
        }
        for name in cfg.tools.keys() {
            cfg.tool_limits(name)?;
        }
        Ok(cfg)
    }

    /// Read and parse a configuration file.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError { path: path.display().to_string(), message: format!("cannot read it: {e}") })?;
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        Self::parse(&text, &path.display().to_string(), Some(abs))
    }

    /// The resolved role table.
    pub fn policy(&self) -> Result<Policy, ConfigError> {
        Policy::from_config(self)
    }

    /// The host-side settings of `tool` from `[tools.<tool>]`.
    pub fn tool_limits(&self, tool: &str) -> Result<ToolLimits, ConfigError> {
        let Some(t) = self.tools.get(tool) else { return Ok(ToolLimits::default()) };
        let origin = self.source.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        let err = |key: &str, want: &str| ConfigError {
            path: origin.clone(),
            message: format!("[tools.{tool}] {key} must be {want}"),
        };
        let int = |key: &str| -> Result<Option<u64>, ConfigError> {
            match t.get(key) {
                None => Ok(None),
                Some(v) => v
                    .as_integer()
                    .filter(|i| *i > 0)
                    .map(|i| Some(i as u64))
                    .ok_or_else(|| err(key, "a positive integer")),
            }
        };
        let fs = match t.get("fs") {
            None => None,
            Some(v) => match v.as_str() {
                Some("none") => Some(crate::FsAccess::None),
                Some("read") => Some(crate::FsAccess::Read),
                Some("write") => Some(crate::FsAccess::Write),
                _ => return Err(err("fs", "\"none\", \"read\" or \"write\"")),
            },
        };
        Ok(ToolLimits { memory_mb: int("memory_mb")?, cpu_ms: int("cpu_ms")?, fs })
    }
}

/// A TOML error as "line L, column C: reason".
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let reason = e.message().trim().to_string();
    match e.span() {
        Some(span) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
            format!("line {line}, column {col}: {reason}")
        }
        None => reason,
    }
}

/// Resolved roles: each role's full tool set, inheritance applied.
#[derive(Debug, Clone)]
pub struct Policy {
    roles: BTreeMap<String, BTreeSet<String>>,
    default_role: String,
}

impl Policy {
    fn from_config(cfg: &Config) -> Result<Policy, ConfigError> {
        let origin =
            cfg.source.as_ref().map(|p| p.display().to_string()).unwrap_or_else(|| "(built-in defaults)".to_string());
        let err = |message: String| ConfigError { path: origin.clone(), message };

        let mut defs: BTreeMap<String, RoleConfig> = BTreeMap::new();
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        defs.insert("recon".into(), RoleConfig { inherits: None, tools: set(RECON_TOOLS) });
        defs.insert("writer".into(), RoleConfig { inherits: Some("recon".into()), tools: set(WRITER_EXTRA) });
        defs.insert("developer".into(), RoleConfig { inherits: Some("writer".into()), tools: set(DEVELOPER_EXTRA) });
        for (name, role) in &cfg.roles {
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
                return Err(err(format!("role name \"{name}\" must be letters, digits, '-' or '_'")));
            }
            defs.insert(name.clone(), role.clone());
        }

        let mut roles = BTreeMap::new();
        for name in defs.keys() {
            let mut tools = BTreeSet::new();
            let mut seen = Vec::new();
            let mut cur = Some(name.clone());
            while let Some(r) = cur {
                if seen.contains(&r) {
                    return Err(err(format!("role \"{name}\" inherits in a cycle: {}", seen.join(" -> "))));
                }
                let def = defs.get(&r).ok_or_else(|| {
                    err(format!("role \"{}\" inherits unknown role \"{r}\"", seen.last().unwrap_or(name)))
                })?;
                tools.extend(def.tools.iter().cloned());
                seen.push(r);
                cur = def.inherits.clone();
            }
            roles.insert(name.clone(), tools);
        }
        let default_role = cfg.default_role.clone().unwrap_or_else(|| DEFAULT_ROLE.to_string());
        if !roles.contains_key(&default_role) {
            return Err(err(format!("default_role \"{default_role}\" is not a defined role")));
        }
        Ok(Policy { roles, default_role })
    }

    /// The built-in defaults.
    pub fn defaults() -> Policy {
        Policy::from_config(&Config::default()).expect("built-in roles are consistent")
    }

    /// The default role's name.
    pub fn default_role(&self) -> &str {
        &self.default_role
    }

    /// Whether `role` exists.
    pub fn has_role(&self, role: &str) -> bool {
        self.roles.contains_key(role)
    }

    /// The role names.
    pub fn role_names(&self) -> impl Iterator<Item = &str> {
        self.roles.keys().map(String::as_str)
    }

    /// Whether `role` holds `tool`.
    pub fn grants(&self, role: &str, tool: &str) -> bool {
        self.roles.get(role).is_some_and(|t| t.contains(tool))
    }

    /// The tools `role` holds (empty for an unknown role).
    pub fn tools_of(&self, role: &str) -> Vec<&str> {
        self.roles.get(role).map(|t| t.iter().map(String::as_str).collect()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_roles_nest() {
        let p = Policy::defaults();
        // recon reads but does not write.
        assert!(p.grants("recon", "read_file"));
        assert!(!p.grants("recon", "write_file"));
        // writer adds write_file only.
        assert!(p.grants("writer", "write_file"));
        assert!(!p.grants("writer", "edit_file"));
        // developer adds the shell.
        assert!(p.grants("developer", "workspace_shell"));
        assert!(p.grants("developer", "think"));
        // The default role is developer.
        assert_eq!(p.default_role(), "developer");
    }

    #[test]
    fn bad_files_name_line_and_reason() {
        // A type error points at its line.
        let e = Config::from_toml_str("default_role = 5\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("x.toml") && e.to_string().contains("line 1"), "{e}");
        // An unknown key is refused, not ignored.
        let e = Config::from_toml_str("\n\nbogus = true\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        // An inheritance cycle is refused.
        let e =
            Config::from_toml_str("[roles.a]\ninherits = \"b\"\n[roles.b]\ninherits = \"a\"\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("cycle"), "{e}");
        // A default role that does not exist is refused.
        let e = Config::from_toml_str("default_role = \"nobody\"\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("nobody"), "{e}");
    }
}
