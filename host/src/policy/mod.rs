//! Operator policy from `cheng.toml`: roles and the tools they grant, limits, per-tool
//! settings, the command policy, plugin entries. Free of engine and process types so it
//! can be tested on its own; the rest of the host asks it what a call may have
//! ([`Policy::effective`]).
//!
//! With no file, working defaults apply: the three built-in roles (`recon`, `writer`,
//! `developer`) and `developer` as the default role. Every table refuses a key it does
//! not know, naming the file, line and column, and the table the key belongs in when it
//! was written in the wrong one.
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
//!
//! // A key in the wrong table is refused with its home named.
//! let err = Config::from_toml_str("[tools.workspace_shell]\ncommand_whitelist = [\"echo\"]\n", "cheng.toml").unwrap_err();
//! assert!(err.to_string().contains("`command_whitelist` belongs in `[process]`"));
//! ```

pub mod git;
pub mod keys;
pub mod mcp;
pub mod process;
pub mod web;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use cheng_contract::{FsAccess, Needs};
use serde::Deserialize;

use crate::grant::{Grant, Mount};
pub use process::ProcessConfig;
pub use web::{Provider, SearchConfig, SearchSettings, Web, WebConfig};

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
pub const DEVELOPER_EXTRA: &[&str] = &[
    "edit_file",
    "apply_patch",
    "workspace_shell",
    "workspace_tests",
    "workspace_git_write",
    "web_fetch",
    "web_search",
];
/// The role used when neither the CLI nor the config names one.
pub const DEFAULT_ROLE: &str = "developer";
/// Default memory limit per call, in MiB.
pub const DEFAULT_MEMORY_MB: u64 = 256;
/// Default CPU deadline per call (guest computing time), in milliseconds.
pub const DEFAULT_CPU_MS: u64 = 30_000;
/// Default wall-clock limit per call, in milliseconds: an approval's longest default
/// wait and a command's longest budget, and then some.
pub const DEFAULT_WALL_MS: u64 = 30 * 60 * 1000;
/// The shortest approval wait the file may set, in milliseconds.
pub const MIN_APPROVAL_TIMEOUT_MS: u64 = 1_000;

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
    /// Host-side settings per tool, by tool name.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
    /// Third-party components to load.
    #[serde(default)]
    pub plugins: Vec<PluginConfig>,
    /// External MCP servers whose tools the host offers (`[[mcp_servers]]`).
    #[serde(default)]
    pub mcp_servers: Vec<mcp::McpServerConfig>,
    /// The audit log.
    #[serde(default)]
    pub records: RecordsConfig,
    /// Process spawning (`[process]`).
    #[serde(default)]
    pub process: ProcessConfig,
    /// `workspace_git_write`'s identity and rules (`[git]`, `[[git.rules]]`).
    #[serde(default)]
    pub git: git::GitConfig,
    /// Limits per run.
    #[serde(default)]
    pub runs: RunsConfig,
    /// Where workspaces may be.
    #[serde(default)]
    pub workspaces: WorkspacesConfig,
    /// `cheng serve` (`[serve]`): limits, approvals through the client, allowed hosts.
    #[serde(default)]
    pub serve: ServeConfig,
    /// The web tools' reach and limits (`[web]`, `[web.search]`).
    #[serde(default)]
    pub web: WebConfig,
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
    /// Wall-clock time per call, in milliseconds, waits included: no call, and no host
    /// import it is waiting in, holds a caller longer.
    #[serde(default = "default_wall")]
    pub wall_ms: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig { memory_mb: DEFAULT_MEMORY_MB, cpu_ms: DEFAULT_CPU_MS, wall_ms: DEFAULT_WALL_MS }
    }
}

fn default_wall() -> u64 {
    DEFAULT_WALL_MS
}

/// What happens to a call when its record cannot be written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnRecordFailure {
    /// The call fails, saying the audit log is unavailable, and no call runs until the
    /// log can be written again (the default: no call goes unrecorded).
    #[default]
    Refuse,
    /// The call's result goes out anyway and the lost record is logged.
    Continue,
}

/// The audit log (`[records]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordsConfig {
    /// Group-commit window: appended records are fsynced together at most this often.
    #[serde(default = "default_window")]
    pub commit_window_ms: u64,
    /// When a record cannot be written: `refuse` (default) or `continue`.
    #[serde(default)]
    pub on_failure: OnRecordFailure,
}

impl Default for RecordsConfig {
    fn default() -> Self {
        RecordsConfig { commit_window_ms: default_window(), on_failure: OnRecordFailure::Refuse }
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

/// `cheng serve`'s settings (`[serve]`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeConfig {
    /// Also send approval cards to the MCP client as elicitations, when it can show them.
    #[serde(default)]
    pub approvals_via_client: bool,
    /// The largest HTTP request body accepted, in bytes (past it: 413).
    #[serde(default = "default_request_bytes")]
    pub max_request_bytes: usize,
    /// Calls in flight at once, over every session.
    #[serde(default = "default_max_calls")]
    pub max_calls: usize,
    /// Calls in flight at once in one session.
    #[serde(default = "default_max_session_calls")]
    pub max_calls_per_session: usize,
    /// How long a call waits for a free place before it is refused as busy, in ms.
    #[serde(default = "default_busy_wait")]
    pub busy_wait_ms: u64,
    /// An HTTP session unused this long expires, in ms.
    #[serde(default = "default_idle")]
    pub idle_session_ms: u64,
    /// Host names (besides the bind address, `localhost`, `127.0.0.1`, `::1`) that HTTP
    /// requests may name in their `Host` header.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Origins (`https://console.example`) a browser request may come from; any other
    /// `Origin` is refused (403).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Directories (absolute globs, `*` within one level) a session may choose as its
    /// workspace by naming it as a root, when `cheng serve` is given no `--workspace`.
    #[serde(default)]
    pub workspaces: Vec<String>,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            approvals_via_client: false,
            max_request_bytes: default_request_bytes(),
            max_calls: default_max_calls(),
            max_calls_per_session: default_max_session_calls(),
            busy_wait_ms: default_busy_wait(),
            idle_session_ms: default_idle(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            workspaces: Vec::new(),
        }
    }
}

fn default_request_bytes() -> usize {
    16 << 20
}
fn default_max_calls() -> usize {
    128
}
fn default_max_session_calls() -> usize {
    16
}
fn default_busy_wait() -> u64 {
    10_000
}
fn default_idle() -> u64 {
    300_000
}

/// How far a tool's filesystem access may be narrowed from `[tools.<name>]`: config
/// narrows, never widens, so `write` is not a value here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NarrowFs {
    /// No files.
    None,
    /// Read-only.
    Read,
}

impl From<NarrowFs> for FsAccess {
    fn from(n: NarrowFs) -> FsAccess {
        match n {
            NarrowFs::None => FsAccess::None,
            NarrowFs::Read => FsAccess::Read,
        }
    }
}

/// Host-side settings for one tool (`[tools.<name>]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// Memory limit in MiB.
    pub memory_mb: Option<u64>,
    /// CPU deadline in ms.
    pub cpu_ms: Option<u64>,
    /// Narrow the tool's filesystem access (`"none"` or `"read"`).
    pub fs: Option<NarrowFs>,
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
    /// How long a request waits for an answer, in milliseconds (at least 1000).
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

/// Whether `name` can name a tool in `[tools.<name>]` or a role: a built-in tool, or a
/// plugin tool (`<id>__<tool>`, checked against what is loaded when the host starts).
fn known_tool_shape(name: &str) -> bool {
    let builtin = RECON_TOOLS.iter().chain(WRITER_EXTRA).chain(DEVELOPER_EXTRA).any(|t| *t == name);
    builtin || name.split_once("__").is_some_and(|(id, tool)| !id.is_empty() && !tool.is_empty())
}

impl Config {
    /// Parse a configuration from TOML text; `origin` names it in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Config, ConfigError> {
        Self::parse(text, origin, Some(PathBuf::from(origin)))
    }

    fn parse(text: &str, origin: &str, source: Option<PathBuf>) -> Result<Config, ConfigError> {
        let err = |message: String| ConfigError { path: origin.to_string(), message };
        let mut cfg: Config = toml::from_str(text).map_err(|e| err(describe_toml_error(text, &e)))?;
        cfg.source = source;
        cfg.policy()?;
        cfg.process.validate().map_err(err)?;
        cfg.git.validate().map_err(err)?;
        cfg.web.read(&|_| None).map_err(err)?;
        cfg.mcp().map_err(err)?;
        if cfg.approvals.timeout_ms < MIN_APPROVAL_TIMEOUT_MS {
            return Err(err(format!(
                "[approvals] timeout_ms = {} is below the floor of {MIN_APPROVAL_TIMEOUT_MS} ms; a request must be \
                 answerable (a timeout is a refusal)",
                cfg.approvals.timeout_ms
            )));
        }
        if cfg.limits.wall_ms == 0 || cfg.limits.cpu_ms == 0 || cfg.limits.memory_mb == 0 {
            return Err(err("[limits] memory_mb, cpu_ms and wall_ms must be positive".into()));
        }
        for (name, t) in &cfg.tools {
            if !known_tool_shape(name) {
                return Err(err(format!(
                    "{}: [tools.{name}] names no built-in tool (plugin tools are written <plugin-id>__<tool>)",
                    position(text, &format!("[tools.{name}]"))
                )));
            }
            for (key, v) in [("memory_mb", t.memory_mb), ("cpu_ms", t.cpu_ms)] {
                if v == Some(0) {
                    return Err(err(format!("[tools.{name}] {key} must be a positive integer")));
                }
            }
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

    /// The `[[mcp_servers]]` entries, checked: ids unique and distinct from plugin ids.
    pub fn mcp(&self) -> Result<Vec<mcp::McpServer>, String> {
        let base = self.source.as_ref().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default();
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for entry in &self.mcp_servers {
            let server = entry.check(&base)?;
            if !seen.insert(server.id.clone()) || self.plugins.iter().any(|p| p.id == server.id) {
                return Err(format!(
                    "[[mcp_servers]] id \"{}\" is used twice (plugins and servers share ids)",
                    server.id
                ));
            }
            out.push(server);
        }
        Ok(out)
    }

    /// The resolved policy: roles with inheritance applied, limits, per-tool settings.
    pub fn policy(&self) -> Result<Policy, ConfigError> {
        Policy::from_config(self)
    }
}

/// "line L, column C" of the first occurrence of `needle` in `text` (else "at its end").
fn position(text: &str, needle: &str) -> String {
    match text.find(needle) {
        Some(at) => line_col(text, at),
        None => "somewhere in the file".to_string(),
    }
}

fn line_col(text: &str, at: usize) -> String {
    let before = &text[..text.floor_char_boundary(at.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
    format!("line {line}, column {col}")
}

/// A TOML error as "line L, column C: reason", with the key's home when an unknown key
/// is known to another table.
fn describe_toml_error(text: &str, e: &toml::de::Error) -> String {
    let mut reason = e.message().trim().to_string();
    let at = e.span().map(|s| s.start);
    if let Some(key) = reason.strip_prefix("unknown field `").and_then(|r| r.split('`').next()).map(str::to_string) {
        let table = keys::table_at(text, at.unwrap_or(0));
        reason = match keys::home_of(&key, &table) {
            Some(home) => format!("unknown key `{key}` in {table}: {home}"),
            None => format!("unknown key `{key}` in {table} ({reason})"),
        };
    }
    match at {
        Some(at) => format!("{}: {reason}", line_col(text, at)),
        None => reason,
    }
}

/// What one call of a tool gets, resolved by [`Policy::effective`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    /// The directories preopened for the component.
    pub mounts: Vec<Mount>,
    /// Whether it may ask the host to run processes.
    pub spawn: bool,
    /// Its memory limit in MiB.
    pub memory_mb: u64,
    /// Its CPU deadline in milliseconds.
    pub cpu_ms: u64,
}

/// The resolved policy: each role's full tool set (inheritance applied), the limits
/// and the per-tool settings.
#[derive(Debug, Clone)]
pub struct Policy {
    roles: BTreeMap<String, BTreeSet<String>>,
    default_role: String,
    limits: LimitsConfig,
    tools: BTreeMap<String, ToolConfig>,
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
        Ok(Policy { roles, default_role, limits: cfg.limits.clone(), tools: cfg.tools.clone() })
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

    /// The tool names `[tools.<name>]` configures.
    pub fn configured_tools(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// What a call of `tool` gets: the intersection of what it declared (`needs`), what
    /// its component was granted (`grant`) and what `[tools.<tool>]` narrows it to, with
    /// its limits — the tool's own settings, else the component's grant, else `[limits]`.
    pub fn effective(&self, tool: &str, needs: &Needs, grant: &Grant) -> Effective {
        let t = self.tools.get(tool);
        let declared = t.and_then(|t| t.fs).map_or(needs.fs, |narrow| needs.fs.min(narrow.into()));
        Effective {
            mounts: crate::grant::mounts(declared, &grant.fs),
            spawn: needs.spawn && grant.spawn,
            memory_mb: t.and_then(|t| t.memory_mb).or(grant.memory_mb).unwrap_or(self.limits.memory_mb),
            cpu_ms: t.and_then(|t| t.cpu_ms).or(grant.cpu_ms).unwrap_or(self.limits.cpu_ms),
        }
    }

    /// The largest memory any call may be given, in MiB: `[limits]`, every
    /// `[tools.<name>]` and every grant in `grants` (what the instance pool must hold).
    pub fn largest_memory_mb<'a>(&self, grants: impl IntoIterator<Item = &'a Grant>) -> u64 {
        let tools = self.tools.values().filter_map(|t| t.memory_mb);
        let granted = grants.into_iter().filter_map(|g| g.memory_mb);
        tools.chain(granted).chain([self.limits.memory_mb]).max().unwrap_or(DEFAULT_MEMORY_MB)
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

    /// A configuration with every key of every table (the README's reference has them
    /// all too).
    const EVERY_KEY: &str = r#"
default_role = "developer"
allow_unpinned_plugins = false
[limits]
memory_mb = 256
cpu_ms = 30000
wall_ms = 1800000
[approvals]
timeout_ms = 600000
[records]
commit_window_ms = 100
on_failure = "refuse"
[runs]
max_calls = 0
[workspaces]
root = "/tmp"
allow_external = true
[roles.reviewer]
inherits = "recon"
tools = ["read_file"]
[tools.read_file]
memory_mb = 128
cpu_ms = 5000
fs = "read"
[process]
allow_shell_string = false
command_whitelist = ""
env = ["RUST_LOG"]
timeout_ms = 60000
output_bytes = 131072
kill_grace_ms = 2000
landlock = true
writable = ["~/.cache"]
readable = ["~/.rustup"]
private_caches = false
containment = "auto"
[[process.rules]]
program = "git"
args = ["status"]
decision = "allow"
network = false
[git]
user_name = "Agent"
user_email = "agent@example.com"
[[git.rules]]
operations = ["add", "commit"]
branches = ["agent/*"]
decision = "allow"
[serve]
approvals_via_client = false
max_request_bytes = 16777216
max_calls = 128
max_calls_per_session = 16
busy_wait_ms = 10000
idle_session_ms = 300000
allowed_hosts = ["cheng.internal"]
allowed_origins = ["https://console.internal"]
workspaces = ["/srv/work/*"]
[[plugins]]
id = "acme"
path = "acme.wasm"
sha256 = "00"
fs = "read"
spawn = false
net = []
memory_mb = 64
timeout_ms = 10000
[web]
allow_hosts = ["*.example.com"]
deny_hosts = ["bad.example.com"]
allow_private = ["10.20.0.0/16"]
timeout_ms = 20000
connect_timeout_ms = 10000
max_bytes = 5242880
proxy = "http://proxy.internal:3128"
user_agent = "cheng"
ca_file = "intranet-ca.pem"
[web.search]
provider = "searxng"
url = "https://searx.internal"
api_key_env = "SEARCH_KEY"
[[mcp_servers]]
id = "files"
command = "node"
args = ["server.js", "."]
env = ["NODE_ENV"]
fs = { read = ["docs"], write = ["out"] }
net = false
approve = ["write_file"]
timeout_ms = 1000
output_bytes = 4096
read = ["/opt/mcp"]
etc_withheld = ["app/secret"]
[[mcp_servers]]
id = "remote"
url = "http://127.0.0.1:9/mcp"
bearer_env = "REMOTE_TOKEN"
"#;

    #[test]
    fn every_table_knows_its_keys_and_refuses_others() {
        // Every key the hint table lists is accepted where it belongs.
        Config::from_toml_str(EVERY_KEY, "every.toml").unwrap();
        for (table, keys) in keys::TABLES {
            for key in *keys {
                let present = EVERY_KEY.contains(&format!("\n{key} = ")) || EVERY_KEY.contains(&format!(".{key}]]"));
                assert!(present, "{table} {key} is missing from the sample");
            }
        }
        // Every table refuses a key it does not know, naming line and column.
        let headers = [
            "",
            "[serve]\n",
            "[limits]\n",
            "[approvals]\n",
            "[records]\n",
            "[runs]\n",
            "[workspaces]\n",
            "[roles.r]\n",
            "[tools.read_file]\n",
            "[process]\n",
            "[git]\n",
            "[web]\n",
            "[web.search]\n",
        ];
        for h in headers {
            let e = Config::from_toml_str(&format!("{h}zz_unknown = 1\n"), "x.toml").unwrap_err().to_string();
            assert!(e.contains("unknown key `zz_unknown`") && e.contains("column 1"), "{h}: {e}");
        }
        for (h, body) in [
            ("[[process.rules]]\n", "program = \"ls\"\ndecision = \"allow\"\n"),
            ("[[plugins]]\n", "id = \"a\"\npath = \"a.wasm\"\n"),
            ("[[mcp_servers]]\n", "id = \"a\"\ncommand = \"x\"\n"),
            ("[[git.rules]]\n", "decision = \"allow\"\n"),
        ] {
            let e = Config::from_toml_str(&format!("{h}{body}zz_unknown = 1\n"), "x.toml").unwrap_err().to_string();
            assert!(e.contains("unknown key `zz_unknown`"), "{h}: {e}");
        }
    }

    #[test]
    fn settings_in_the_wrong_place_are_refused_with_their_home() {
        // The whitelist written under the shell tool's table, as an operator might.
        let e = Config::from_toml_str("[tools.workspace_shell]\ncommand_whitelist = [\"echo\"]\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2, column 1") && e.contains("`command_whitelist` belongs in `[process]`"), "{e}");
        // A made-up key in a tool's table.
        let e = Config::from_toml_str("[tools.read_file]\nbogus = 1\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("unknown key `bogus` in [tools.read_file]"), "{e}");
        // A tool table naming no tool.
        let e = Config::from_toml_str("\n[tools.read_fil]\ncpu_ms = 5\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("read_fil"), "{e}");
        // Config narrows, never widens: `fs = "write"` is refused.
        let e = Config::from_toml_str("[tools.read_file]\nfs = \"write\"\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("write"), "{e}");
        // An approval wait below the floor is refused, not silently raised.
        let e = Config::from_toml_str("[approvals]\ntimeout_ms = 0\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("floor of 1000"), "{e}");
    }

    #[test]
    fn effective_narrows_and_limits_resolve_in_order() {
        let cfg = Config::from_toml_str(
            "[limits]\nmemory_mb = 100\n[tools.write_file]\nfs = \"read\"\nmemory_mb = 300\n",
            "x.toml",
        )
        .unwrap();
        let p = cfg.policy().unwrap();
        let needs = Needs { fs: FsAccess::Write, spawn: false, network: vec![] };
        // A tool narrowed to read gets its workspace read-only, with its own memory limit.
        let e = p.effective("write_file", &needs, &Grant::builtin());
        assert_eq!(e.mounts, vec![Mount { rel: ".".into(), write: false }]);
        assert_eq!(e.memory_mb, 300);
        // Another tool gets what it declared and the [limits] memory.
        let e = p.effective("edit_file", &needs, &Grant::builtin());
        assert!(e.mounts[0].write && e.memory_mb == 100);
        // The pool must hold the largest of them all, plugin grants included.
        let big = Grant { memory_mb: Some(512), ..Grant::none() };
        assert_eq!(p.largest_memory_mb([&big]), 512);
        assert_eq!(p.largest_memory_mb([]), 300);
    }
}
