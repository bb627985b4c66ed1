//! The tables of `cheng.toml` as written: each a struct that refuses keys it does not
//! know, with the defaults that apply when a key is left out.

use std::collections::BTreeMap;
use std::path::PathBuf;

use cheng_contract::FsAccess;
use serde::Deserialize;

use super::*;

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
    /// Path rules for every tool, command and MCP server (`[files]`, `[[files.rules]]`).
    #[serde(default)]
    pub files: files::FilesConfig,
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
    /// Export of calls and counters to an OpenTelemetry collector (`[telemetry]`).
    #[serde(default)]
    pub telemetry: TelemetryConfig,
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
    /// Rotate the log before it passes this many bytes, keeping the old files as
    /// `audit.N.jsonl` (the chain runs on across them); 0 (the default) never rotates.
    #[serde(default)]
    pub max_bytes: u64,
}

/// The smallest `[records] max_bytes` other than 0.
pub const MIN_RECORDS_MAX_BYTES: u64 = 1024;

impl Default for RecordsConfig {
    fn default() -> Self {
        RecordsConfig { commit_window_ms: default_window(), on_failure: OnRecordFailure::Refuse, max_bytes: 0 }
    }
}

fn default_window() -> u64 {
    100
}

/// Export to an OpenTelemetry collector (`[telemetry]`): every call as a span and the
/// `/metrics` counters, over OTLP (HTTP, protobuf). Off without an `endpoint`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans go to
    /// `<endpoint>/v1/traces`, counters to `<endpoint>/v1/metrics`. None: no export.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Headers sent with every export (an API key a hosted backend asks for).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The `service.name` the host reports.
    #[serde(default = "default_service_name")]
    pub service_name: String,
    /// Put each call's arguments (as its record keeps them), and its denials' targets and
    /// messages, on its span (default false).
    #[serde(default)]
    pub export_arguments: bool,
    /// Put each call's result (as its record keeps it) on its span (default false).
    #[serde(default)]
    pub export_results: bool,
    /// Spans waiting for export at most; past it new spans are dropped and counted.
    #[serde(default = "default_telemetry_queue")]
    pub queue: usize,
    /// How long one export may take before it is given up.
    #[serde(default = "default_telemetry_timeout")]
    pub timeout_ms: u64,
    /// How often the counters are exported.
    #[serde(default = "default_metrics_interval")]
    pub metrics_interval_ms: u64,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            endpoint: None,
            headers: BTreeMap::new(),
            service_name: default_service_name(),
            export_arguments: false,
            export_results: false,
            queue: default_telemetry_queue(),
            timeout_ms: default_telemetry_timeout(),
            metrics_interval_ms: default_metrics_interval(),
        }
    }
}

fn default_service_name() -> String {
    "cheng".into()
}

fn default_telemetry_queue() -> usize {
    2048
}

fn default_telemetry_timeout() -> u64 {
    10_000
}

fn default_metrics_interval() -> u64 {
    60_000
}

impl TelemetryConfig {
    /// The endpoint's two signal URLs (traces, metrics), or why the table is refused.
    pub fn urls(&self) -> Result<Option<(String, String)>, SettingError> {
        let Some(endpoint) = &self.endpoint else { return Ok(None) };
        let bad = |why: &str| SettingError(format!("[telemetry] endpoint = \"{endpoint}\" {why}"));
        let url = url::Url::parse(endpoint).map_err(|e| bad(&format!("is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(bad(
                "must be an http:// or https:// URL with a host (an OTLP/HTTP collector, port 4318 by default)",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
            return Err(bad("must have no query, fragment or credentials (credentials go in [telemetry] headers)"));
        }
        for (name, value) in &self.headers {
            if http::HeaderName::from_bytes(name.as_bytes()).is_err() || http::HeaderValue::from_str(value).is_err() {
                return Err(SettingError(format!("[telemetry] headers: \"{name}\" is not a valid HTTP header")));
            }
        }
        if self.queue == 0 || self.timeout_ms == 0 || self.metrics_interval_ms < 100 {
            return Err(SettingError(
                "[telemetry] queue and timeout_ms must be positive, metrics_interval_ms at least 100".into(),
            ));
        }
        let base = url.as_str().trim_end_matches('/');
        Ok(Some((format!("{base}/v1/traces"), format!("{base}/v1/metrics"))))
    }
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
