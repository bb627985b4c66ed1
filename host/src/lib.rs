//! Cheng: a WebAssembly-component tool host for AI agents.
//!
//! Every tool is a WASI component. A [`Host`] loads the built-in components and vetted
//! third-party ones, and runs each call in a fresh sandbox that holds only what
//! the tool's grant allows: the workspace preopened read-only or read-write, or nothing.
//! Policy (roles and the tools they grant), approvals and limits are the host's.
//!
//! # Example
//!
//! ```no_run
//! use cheng_host::{Context, HostBuilder, Status};
//!
//! # async fn demo() -> Result<(), cheng_host::HostError> {
//! let host = HostBuilder::new().build().await?;
//! let cx = Context::new("/path/to/project").role("recon");
//! let result = host.call(&cx, "read_file", serde_json::json!({"path": "README.md"})).await;
//! assert_eq!(result.status, Status::Ok);
//! println!("{}", result.output["content"]);
//! # Ok(()) }
//! ```
//!
//! Two roles, a custom approver, a third-party plugin, and calls that are ok, denied,
//! and approved or declined (the program in `examples/embed` does the same):
//!
//! ```no_run
//! use std::{future::Future, pin::Pin, sync::Arc};
//! use cheng_host::approvals::{ApprovalRequest, Approver, Decision};
//! use cheng_host::{grant::Grant, policy::Config, Context, HostBuilder, PluginSpec, Status};
//! use serde_json::json;
//!
//! struct OnlyLs;
//! impl Approver for OnlyLs {
//!     fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
//!         Box::pin(async move { if req.summary.starts_with("ls") { Decision::Approved } else { Decision::Declined } })
//!     }
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let config = Config::from_toml_str(r#"
//!     [roles.reader]
//!     tools = ["read_file", "hello__hello"]
//!     [roles.builder]
//!     inherits = "reader"
//!     tools = ["workspace_shell"]
//! "#, "embedded")?;
//! let wasm = std::fs::read("hello_tool.wasm")?;
//! let mut b = HostBuilder::new();
//! b.config(config).approver(Arc::new(OnlyLs));
//! b.plugin(PluginSpec { id: "hello".into(), wasm, origin: "hello_tool.wasm".into(), grant: Grant::none() });
//! let host = b.build().await?;
//!
//! let reader = Context::new("/path/to/project").role("reader");
//! let builder = Context::new("/path/to/project").role("builder");
//! let ok = host.call(&reader, "hello__hello", json!({"name": "Ada"})).await;
//! assert_eq!(ok.output["greeting"], "Hello, Ada!");
//! let denied = host.call(&reader, "workspace_shell", json!({"command": "ls"})).await;
//! assert_eq!(denied.status, Status::Denied);
//! let approved = host.call(&builder, "workspace_shell", json!({"command": "ls"})).await;
//! assert_eq!(approved.output["termination"], "exited");
//! let declined = host.call(&builder, "workspace_shell", json!({"command": "rm", "args": ["-r", "src"]})).await;
//! assert_eq!(declined.error_kind, Some(cheng_host::ErrorKind::ApprovalDenied));
//! # Ok(()) }
//! ```
//!
//! # Map
//!
//! - [`runtime`]: engine, component cache, per-call stores and limits, WIT bindings.
//! - [`registry`]: tools by name.
//! - [`policy`]: `cheng.toml`, roles and grants.
//! - [`approvals`]: the [`approvals::Approver`] trait.
//! - [`records`]: call records.
//! - [`runstate`]: per-run data for components.
#![deny(missing_docs)]

pub mod approvals;
pub mod builtin;
mod error;
pub mod grant;
pub mod guard;
pub mod policy;
pub mod process;
pub mod records;
pub mod registry;
pub mod runstate;
pub mod runtime;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio_util::sync::CancellationToken;
use wasmtime::component::Linker;

pub use error::{ErrorKind, HostError};
pub use records::{CallRecord, Status};
pub use runtime::component::{FsAccess, Needs, ToolSpec};
use std::collections::HashMap;
use std::sync::Mutex;

use approvals::{ApprovalOutcome, Approver, Broker, RefuseAll};
use grant::{FsGrant, Grant};
use policy::{Config, FsGrantConfig, PluginConfig, Policy, ToolLimits};
use records::AuditLog;
use registry::Registry;
use runstate::RunStateStore;
use runtime::cache::ComponentCache;
use runtime::call::{CallSpec, GuestOutcome};
use runtime::component::{LoadedComponent, Source};
use runtime::engine::EngineHandle;
use runtime::store::{CallInfo, StoreState};

/// Who is calling, in which workspace, for which run.
#[derive(Debug, Clone)]
pub struct Context {
    /// The workspace root for this call.
    pub workspace: PathBuf,
    /// The caller's role.
    pub role: String,
    /// The run this call belongs to.
    pub run: String,
    /// Cancel the call by cancelling this token (or by dropping the call's future).
    pub cancel: CancellationToken,
}

impl Context {
    /// A context for `workspace`, role `developer`, a fresh run id.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Context {
            workspace: workspace.into(),
            role: policy::DEFAULT_ROLE.to_string(),
            run: new_id(),
            cancel: CancellationToken::new(),
        }
    }

    /// Set the role.
    pub fn role(mut self, role: impl Into<String>) -> Self {
        self.role = role.into();
        self
    }

    /// Set the run id.
    pub fn run(mut self, run: impl Into<String>) -> Self {
        self.run = run.into();
        self
    }

    /// Use `token` for cancellation.
    pub fn cancel_with(mut self, token: CancellationToken) -> Self {
        self.cancel = token;
        self
    }
}

/// A fresh random id.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The result of one call.
#[derive(Debug, Clone, Serialize)]
pub struct ToolResult {
    /// The call's id (as in its record).
    pub call_id: String,
    /// `ok`, `error` or `denied`.
    pub status: Status,
    /// The tool's output; for failures, the envelope `{success, summary, error_kind,
    /// terminal, error}`.
    pub output: serde_json::Value,
    /// The failure kind, if any.
    pub error_kind: Option<ErrorKind>,
    /// Whether the failure must not be retried.
    pub terminal: bool,
    /// How long the call took.
    #[serde(serialize_with = "ser_duration_ms")]
    pub duration: Duration,
}

fn ser_duration_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1000.0)
}

impl ToolResult {
    fn failure(
        call_id: String,
        status: Status,
        kind: ErrorKind,
        message: String,
        terminal: bool,
        started: Instant,
    ) -> Self {
        let output = serde_json::json!({
            "success": false,
            "summary": message,
            "error_kind": kind.code(),
            "terminal": terminal,
            "error": message,
        });
        ToolResult { call_id, status, output, error_kind: Some(kind), terminal, duration: started.elapsed() }
    }
}

/// A tool as listed for callers.
#[derive(Debug, Clone, Serialize)]
pub struct ToolInfo {
    /// The name a model calls.
    pub name: String,
    /// The name inside its component.
    pub component_tool: String,
    /// The component serving it.
    pub component: String,
    /// The description.
    pub description: String,
    /// Input JSON Schema.
    pub input_schema: serde_json::Value,
    /// Output JSON Schema.
    pub output_schema: serde_json::Value,
    /// Declared needs.
    pub needs: Needs,
}

/// Builds a [`Host`].
///
/// Defaults, every one of which denies: the built-in roles with `developer` as default,
/// an approver that refuses everything, no cache directory (components compile on
/// every start), no state directory (per-run data lives in memory only).
pub struct HostBuilder {
    config: Config,
    approver: Arc<dyn Approver>,
    cache_dir: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    on_compile: Arc<dyn Fn(&str) + Send + Sync>,
    plugins: Vec<PluginSpec>,
    engine: runtime::engine::EngineOptions,
    audit: Option<PathBuf>,
    audit_off: bool,
    external_answers: bool,
}

/// A third-party component to load.
#[derive(Debug, Clone)]
pub struct PluginSpec {
    /// Its id (`[a-z][a-z0-9-]{0,15}`); tools register as `<id>__<tool>`.
    pub id: String,
    /// The component's bytes.
    pub wasm: Vec<u8>,
    /// Where it came from (for messages).
    pub origin: String,
    /// What it is granted.
    pub grant: Grant,
}

impl Default for HostBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl HostBuilder {
    /// A builder with the defaults above.
    pub fn new() -> Self {
        HostBuilder {
            config: Config::default(),
            approver: Arc::new(RefuseAll),
            cache_dir: None,
            state_dir: None,
            on_compile: Arc::new(|_| {}),
            plugins: Vec::new(),
            engine: runtime::engine::EngineOptions::default(),
            audit: None,
            audit_off: false,
            external_answers: false,
        }
    }

    /// Append call records to this JSON Lines file (default: `<state dir>/audit.jsonl`
    /// when a state directory is set, else no audit log).
    pub fn audit_log(&mut self, path: impl Into<PathBuf>) -> &mut Self {
        self.audit = Some(path.into());
        self
    }

    /// Keep no audit log, even with a state directory (benchmarks, throwaway hosts).
    pub fn without_audit_log(&mut self) -> &mut Self {
        self.audit_off = true;
        self
    }

    /// Answers to approval requests may also arrive through
    /// [`Host::answer_approval`] (an API or console is attached): requests then wait
    /// for their timeout even when the approver cannot ask anyone.
    pub fn external_approval_answers(&mut self, on: bool) -> &mut Self {
        self.external_answers = on;
        self
    }

    /// Engine options: the pooling allocator (on by default; faster per call, costs a
    /// little at start), its slots, and the largest memory a component may reach. A
    /// one-shot process (the CLI's `cheng call`) starts faster without pooling.
    pub fn engine_options(&mut self, opts: runtime::engine::EngineOptions) -> &mut Self {
        self.engine = opts;
        self
    }

    /// Load a third-party component with `grant`. Its tools are granted to no role
    /// until a role names them. A plugin that cannot be loaded is reported by
    /// [`Host::load_errors`]; the host and the other plugins keep working.
    pub fn plugin(&mut self, spec: PluginSpec) -> &mut Self {
        self.plugins.push(spec);
        self
    }

    /// Use this configuration (roles, limits, approvals, tool settings).
    pub fn config(&mut self, config: Config) -> &mut Self {
        self.config = config;
        self
    }

    /// Who answers approval requests.
    pub fn approver(&mut self, approver: Arc<dyn Approver>) -> &mut Self {
        self.approver = approver;
        self
    }

    /// Where precompiled components are cached (shared safely between hosts).
    pub fn cache_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.cache_dir = Some(dir.into());
        self
    }

    /// Where per-run data is kept; also the cache directory (`<dir>/cache`) and the
    /// audit log (`<dir>/audit.jsonl`) unless those were set.
    pub fn state_dir(&mut self, dir: impl Into<PathBuf>) -> &mut Self {
        self.state_dir = Some(dir.into());
        self
    }

    /// Called with a component's name just before it is compiled (not when it comes
    /// from the cache): for a progress notice.
    pub fn on_compile(&mut self, f: impl Fn(&str) + Send + Sync + 'static) -> &mut Self {
        self.on_compile = Arc::new(f);
        self
    }

    /// Start the engine and load the built-in components.
    pub async fn build(&mut self) -> Result<Host, HostError> {
        let policy = self.config.policy()?;
        let t0 = Instant::now();
        let mut opts = self.engine;
        // The pool's slots must hold the largest memory any component is allowed.
        let largest = self
            .config
            .plugins
            .iter()
            .filter_map(|p| p.memory_mb)
            .chain(self.plugins.iter().filter_map(|p| p.grant.memory_mb))
            .chain([self.config.limits.memory_mb])
            .max()
            .unwrap_or(policy::DEFAULT_MEMORY_MB);
        opts.max_memory = opts.max_memory.max((largest as usize).saturating_mul(1 << 20));
        let engine = EngineHandle::with_options(opts)?;
        tracing::debug!(target: "cheng::startup", ms = t0.elapsed().as_secs_f64() * 1e3, "engine ready");
        let mut linker = Linker::<StoreState>::new(engine.engine());
        runtime::bindings::add_to_linker(&mut linker)
            .map_err(|e| HostError::Engine(format!("cannot link the host interfaces: {e:#}")))?;
        let cache_dir = self.cache_dir.clone().or_else(|| self.state_dir.as_ref().map(|d| d.join("cache")));
        let cache = ComponentCache::new(cache_dir);
        let mut registry = Registry::default();
        for (family, bytes, sha) in builtin::BUILTINS {
            let c = LoadedComponent::load(
                family,
                Source::Static(bytes, sha),
                engine.engine(),
                &linker,
                &cache,
                self.on_compile.as_ref(),
            )
            .await?;
            registry.add(Arc::new(c), "")?;
        }
        tracing::debug!(target: "cheng::startup", ms = t0.elapsed().as_secs_f64() * 1e3, "built-ins described");
        let mut load_errors = Vec::new();
        let mut specs = self.plugins.clone();
        for pc in &self.config.plugins {
            match plugin_from_config(&self.config, pc) {
                Ok(spec) => specs.push(spec),
                Err(e) => load_errors.push(e),
            }
        }
        for spec in specs {
            let origin = spec.origin.clone();
            if let Err(e) =
                load_plugin(spec, engine.engine(), &linker, &cache, self.on_compile.as_ref(), &mut registry).await
            {
                tracing::warn!(target: "cheng::plugins", plugin = %origin, "plugin refused: {e}");
                load_errors.push(e);
            }
        }
        // A role that names a plugin tool the plugin does not declare is reported now,
        // not at call time.
        for role in policy.role_names() {
            for tool in policy.tools_of(role) {
                let Some((id, _)) = tool.split_once("__") else { continue };
                if registry.get(tool).is_some() {
                    continue;
                }
                let declared: Vec<&str> =
                    registry.iter().filter(|e| e.component.name == id).map(|e| e.name.as_str()).collect();
                let msg = if declared.is_empty() {
                    format!("role \"{role}\" names \"{tool}\", but no plugin \"{id}\" is loaded")
                } else {
                    format!(
                        "role \"{role}\" names \"{tool}\", which plugin \"{id}\" does not declare; it declares: {}",
                        declared.join(", ")
                    )
                };
                tracing::warn!(target: "cheng::plugins", "{msg}");
                load_errors.push(msg);
            }
        }
        let run_state = RunStateStore::new(self.state_dir.as_ref().map(|d| d.join("runs")));
        let broker = Broker::new(
            self.approver.clone(),
            Duration::from_millis(self.config.approvals.timeout_ms),
            self.external_answers,
        );
        let audit_path = match self.audit_off {
            true => None,
            false => self.audit.clone().or_else(|| self.state_dir.as_ref().map(|d| d.join("audit.jsonl"))),
        };
        let audit = match audit_path {
            Some(p) => Some(
                AuditLog::open(&p, Duration::from_millis(self.config.records.commit_window_ms))
                    .map_err(|e| HostError::Audit(e.to_string()))?,
            ),
            None => None,
        };
        let mut tool_limits = HashMap::new();
        for name in self.config.tools.keys() {
            tool_limits.insert(name.clone(), self.config.tool_limits(name)?);
        }
        // The files a model must never edit through the built-in writers, wherever they
        // sit: the configuration in use and the state directory (resolved now).
        let mut protected_abs = Vec::new();
        if let Some(src) = &self.config.source {
            protected_abs.push(std::fs::canonicalize(src).unwrap_or_else(|_| src.clone()));
        }
        if let Some(d) = &self.state_dir {
            let _ = std::fs::create_dir_all(d);
            protected_abs.push(std::fs::canonicalize(d).unwrap_or_else(|_| d.clone()));
        }
        let workspaces_root =
            self.config.workspaces.root.as_ref().map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone()));
        Ok(Host {
            inner: Arc::new(Inner {
                engine,
                linker,
                cache,
                registry,
                policy,
                config: self.config.clone(),
                run_state,
                on_compile: self.on_compile.clone(),
                load_errors,
                broker,
                audit,
                tool_limits,
                protected_abs,
                workspaces_root,
                spawner: Arc::new(process::Spawner::new(self.config.process.clone())),
            }),
        })
    }
}

/// The tool host. Cheap to clone; serves many workspaces and concurrent calls.
#[derive(Clone)]
pub struct Host {
    inner: Arc<Inner>,
}

struct Inner {
    engine: EngineHandle,
    linker: Linker<StoreState>,
    cache: ComponentCache,
    registry: Registry,
    policy: Policy,
    config: Config,
    run_state: RunStateStore,
    on_compile: Arc<dyn Fn(&str) + Send + Sync>,
    load_errors: Vec<String>,
    broker: Broker,
    audit: Option<AuditLog>,
    tool_limits: HashMap<String, ToolLimits>,
    protected_abs: Vec<PathBuf>,
    workspaces_root: Option<PathBuf>,
    spawner: Arc<process::Spawner>,
}

/// Is `run` usable as a run id (it names a directory in the state dir)?
fn valid_run_id(run: &str) -> bool {
    !run.is_empty()
        && run.len() <= 128
        && !run.starts_with('.')
        && run.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Host {
    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The approvals broker: pending requests, answers, the event stream.
    pub fn approvals(&self) -> &Broker {
        &self.inner.broker
    }

    /// Answer a pending approval request from outside (API, console); false when it is
    /// no longer pending.
    pub fn answer_approval(&self, id: &str, approved: bool) -> bool {
        self.inner.broker.answer(id, approved)
    }

    /// The audit log, when there is one.
    pub fn audit_log(&self) -> Option<&AuditLog> {
        self.inner.audit.as_ref()
    }

    /// Plugins that could not be loaded, one message each (the rest work).
    pub fn load_errors(&self) -> &[String] {
        &self.inner.load_errors
    }

    /// Every registered tool.
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.inner
            .registry
            .iter()
            .map(|e| {
                let s = e.spec();
                ToolInfo {
                    name: e.name.clone(),
                    component_tool: s.name.clone(),
                    component: e.component.name.clone(),
                    description: s.description.clone(),
                    input_schema: s.input_schema.clone(),
                    output_schema: s.output_schema.clone(),
                    needs: s.needs.clone(),
                }
            })
            .collect()
    }

    /// Call `tool` with `input` (a JSON object) under `cx`.
    ///
    /// Never panics and never returns a Rust error: every outcome, including an unknown
    /// tool, a refused grant, bad arguments, a crashed or timed-out component and
    /// cancellation, is a [`ToolResult`].
    pub async fn call(&self, cx: &Context, tool: &str, input: serde_json::Value) -> ToolResult {
        self.call_recorded(cx, tool, input).await.0
    }

    /// Like [`Host::call`], also returning the call's record.
    pub async fn call_recorded(&self, cx: &Context, tool: &str, input: serde_json::Value) -> (ToolResult, CallRecord) {
        let started = Instant::now();
        let started_at_ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0);
        let call_id = new_id();
        let approvals: Arc<Mutex<Vec<ApprovalOutcome>>> = Arc::default();
        let record = |status: Status, result: &ToolResult| CallRecord {
            id: call_id.clone(),
            run: cx.run.clone(),
            role: cx.role.clone(),
            tool: tool.to_string(),
            arguments: input.clone(),
            status,
            preview: records::preview(&result.output),
            duration_ms: result.duration.as_secs_f64() * 1000.0,
            result: records::stored_result(&result.output),
            error_kind: result.error_kind.map(|k| k.code().to_string()),
            approvals: approvals.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            started_at_ms,
        };
        let on_start = || {
            if let Some(log) = &self.inner.audit {
                let running = ToolResult {
                    call_id: call_id.clone(),
                    status: Status::Running,
                    output: serde_json::json!({}),
                    error_kind: None,
                    terminal: false,
                    duration: Duration::ZERO,
                };
                log.append_later(record(Status::Running, &running));
            }
        };
        let processes: Arc<AtomicUsize> = Arc::default();
        let inner = self.call_inner(cx, tool, &input, &call_id, started, &approvals, &processes, &on_start);
        tokio::pin!(inner);
        let cancelled = || {
            ToolResult::failure(
                call_id.clone(),
                Status::Error,
                ErrorKind::Cancelled,
                format!("The call to \"{tool}\" was cancelled."),
                false,
                started,
            )
        };
        let result = tokio::select! {
            r = &mut inner => r,
            _ = cx.cancel.cancelled() => {
                // A command in flight sees the same token, stops its process tree and
                // lets the tool report `cancelled` with what the command printed; give
                // it the kill grace to do so. Anything else is abandoned at once.
                if processes.load(Ordering::SeqCst) > 0 {
                    let grace = Duration::from_millis(self.inner.config.process.kill_grace_ms + 2_000);
                    tokio::time::timeout(grace, &mut inner).await.unwrap_or_else(|_| cancelled())
                } else {
                    cancelled()
                }
            }
        };
        let rec = record(result.status, &result);
        // The record reaches the log (the OS) before the result reaches the caller.
        if let Some(log) = &self.inner.audit {
            if let Err(e) = log.append(&rec) {
                tracing::error!(target: "cheng::records", "{e}");
            }
        }
        (result, rec)
    }

    async fn call_inner(
        &self,
        cx: &Context,
        tool: &str,
        input: &serde_json::Value,
        call_id: &str,
        started: Instant,
        approvals: &Arc<Mutex<Vec<ApprovalOutcome>>>,
        processes: &Arc<AtomicUsize>,
        on_start: &(dyn Fn() + Sync),
    ) -> ToolResult {
        let inner = &*self.inner;
        let fail = |status, kind, message: String| {
            let terminal = ErrorKind::default_terminal(kind);
            ToolResult::failure(call_id.to_string(), status, kind, message, terminal, started)
        };
        // 1. The registry: does the tool exist at all?
        let Some(entry) = inner.registry.get(tool) else {
            return fail(Status::Error, ErrorKind::InvalidArgument, format!("unknown tool \"{tool}\""));
        };
        // 2. The grant: does the caller's role hold it?
        if !inner.policy.has_role(&cx.role) {
            let roles: Vec<_> = inner.policy.role_names().collect();
            return fail(
                Status::Denied,
                ErrorKind::NotGranted,
                format!("refused: role \"{}\" is not defined; roles: {}", cx.role, roles.join(", ")),
            );
        }
        if !inner.policy.grants(&cx.role, tool) {
            let held: Vec<&str> =
                inner.policy.tools_of(&cx.role).into_iter().filter(|t| inner.registry.get(t).is_some()).collect();
            tracing::info!(target: "cheng::denials", tool, role = %cx.role, run = %cx.run, "tool not granted to role");
            return fail(
                Status::Denied,
                ErrorKind::NotGranted,
                format!(
                    "refused: tool \"{tool}\" is not granted to role \"{}\"; granted: {}. Continue without it.",
                    cx.role,
                    held.join(", ")
                ),
            );
        }
        if !valid_run_id(&cx.run) {
            return fail(
                Status::Error,
                ErrorKind::InvalidArgument,
                format!("invalid run id \"{}\": use letters, digits, '-', '_' or '.' (at most 128)", cx.run),
            );
        }
        // The run's call budget (its round-trip limit).
        let max_calls = inner.config.runs.max_calls;
        if max_calls > 0 {
            let n = inner.run_state.count_call(&cx.run);
            if n > max_calls {
                tracing::info!(target: "cheng::denials", run = %cx.run, tool, max_calls, "run call budget exhausted");
                return fail(
                    Status::Denied,
                    ErrorKind::NotGranted,
                    format!(
                        "refused: run \"{}\" has used its budget of {max_calls} tool calls. Stop calling tools \
                         and give your final answer with what you have.",
                        cx.run
                    ),
                );
            }
        }
        // 3. The input: a JSON object matching the tool's schema.
        if !input.is_object() {
            return fail(
                Status::Error,
                ErrorKind::InvalidArgument,
                format!("bad arguments for \"{tool}\": the input must be a JSON object"),
            );
        }
        // The first validation of a tool compiles its schema (about a millisecond, most
        // of it one-time setup); it then runs beside the instance loading below.
        let validation = if entry.validator_ready() {
            Ok(entry.validate(input))
        } else {
            let (e, i) = (entry.clone(), input.clone());
            Err(tokio::task::spawn_blocking(move || e.validate(&i)))
        };
        // 4. The workspace: resolved once per call (it may sit behind a symlink).
        let guard = match guard::Guard::new(&cx.workspace) {
            Ok(g) => Arc::new(g),
            Err(e) => return fail(Status::Error, ErrorKind::NotFound, e.to_string()),
        };
        if let Some(root) = &inner.workspaces_root {
            if !inner.config.workspaces.allow_external && !guard.root().starts_with(root) {
                tracing::info!(target: "cheng::denials", workspace = %guard.root().display(), "external workspace refused");
                return fail(
                    Status::Denied,
                    ErrorKind::PathRefused,
                    format!(
                        "Refusing workspace \"{}\": it is outside the workspaces root \"{}\" and external workspaces are turned off",
                        guard.root().display(),
                        root.display()
                    ),
                );
            }
        }
        // 5. The instance.
        let pre = match entry
            .component
            .pre(inner.engine.engine(), &inner.linker, &inner.cache, inner.on_compile.as_ref())
            .await
        {
            Ok(p) => p,
            Err(e) => {
                return fail(
                    Status::Error,
                    ErrorKind::Crashed,
                    format!("The tool \"{tool}\" crashed: {e}. Report this to the user rather than working around it."),
                );
            }
        };
        tracing::trace!(target: "cheng::calls", us = started.elapsed().as_secs_f64() * 1e6, "instance ready");
        let valid = match validation {
            Ok(v) => v,
            Err(task) => task.await.unwrap_or_else(|e| Err(format!("schema validation failed: {e}"))),
        };
        if let Err(why) = valid {
            return fail(Status::Error, ErrorKind::InvalidArgument, format!("bad arguments for \"{tool}\": {why}"));
        }
        let spec = entry.spec();
        let limits = inner.tool_limits.get(tool).cloned().unwrap_or_default();
        let protected = inner
            .protected_abs
            .iter()
            .filter_map(|p| p.strip_prefix(guard.root()).ok())
            .map(|rel| rel.to_string_lossy().into_owned())
            .filter(|rel| !rel.is_empty())
            .collect();
        // Config can only narrow what the tool declared.
        let declared_fs = limits.fs.map_or(spec.needs.fs, |f| f.min(spec.needs.fs));
        let mounts = grant::mounts(declared_fs, &entry.component.grant.fs);
        let memory_mb = limits.memory_mb.or(entry.component.grant.memory_mb).unwrap_or(inner.config.limits.memory_mb);
        let cpu_ms = limits.cpu_ms.or(entry.component.grant.cpu_ms).unwrap_or(inner.config.limits.cpu_ms);
        let info = Arc::new(CallInfo {
            component: entry.component.name.clone(),
            tool: tool.to_string(),
            run: cx.run.clone(),
            role: cx.role.clone(),
            spawn_granted: spec.needs.spawn && entry.component.grant.spawn,
            broker: inner.broker.clone(),
            approvals: approvals.clone(),
            protected,
            guard: Some(guard.clone()),
            mounts: mounts.clone(),
            run_state: inner.run_state.scope(&cx.run, &entry.component.name),
            spawner: inner.spawner.clone(),
            cancel: cx.cancel.clone(),
            processes: processes.clone(),
        });
        on_start();
        let input_text = input.to_string();
        let outcome = runtime::call::call(CallSpec {
            engine: inner.engine.engine(),
            pre,
            local_name: &spec.name,
            display_name: tool,
            input: &input_text,
            guard: &guard,
            mounts: &mounts,
            memory: (memory_mb as usize).saturating_mul(1 << 20),
            cpu: Duration::from_millis(cpu_ms),
            call_id,
            info,
        })
        .await;
        match outcome {
            GuestOutcome::Ok(output) => ToolResult {
                call_id: call_id.to_string(),
                status: Status::Ok,
                output,
                error_kind: None,
                terminal: false,
                duration: started.elapsed(),
            },
            GuestOutcome::Failed { kind, message, terminal } => {
                // Refusals by policy or by a person are denials in the record.
                let status = match kind {
                    ErrorKind::NotGranted
                    | ErrorKind::ApprovalDenied
                    | ErrorKind::CommandNotAllowed
                    | ErrorKind::ShellSyntaxDisabled => Status::Denied,
                    _ => Status::Error,
                };
                ToolResult::failure(call_id.to_string(), status, kind, message, terminal, started)
            }
        }
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
fn check_grant_folder(id: &str, folder: &str, write: bool) -> Result<String, String> {
    let rel = cheng_path_rules::lexical(folder, "/")
        .map_err(|r| format!("plugin \"{id}\": grant folder \"{folder}\" is refused: {r}"))?;
    let norm = rel.normalized();
    if folder.starts_with('/') {
        return Err(format!("plugin \"{id}\": grant folder \"{folder}\" must be relative to the workspace"));
    }
    if write && norm == "." {
        return Err(format!(
            "plugin \"{id}\": a plugin never gets write access to the whole workspace; name sub-folders"
        ));
    }
    if norm == ".git" || norm.starts_with(".git/") {
        return Err(format!("plugin \"{id}\": grant folder \"{folder}\" would expose .git"));
    }
    Ok(norm)
}

/// A plugin entry from `cheng.toml`, read and checked (pin, id, grants).
fn plugin_from_config(cfg: &Config, pc: &PluginConfig) -> Result<PluginSpec, String> {
    let id = &pc.id;
    if !valid_plugin_id(id) {
        return Err(format!("plugin id \"{id}\" must match [a-z][a-z0-9-]{{0,15}}"));
    }
    if !pc.network.is_empty() {
        return Err(format!(
            "plugin \"{id}\": network grants ({}) are not supported yet; remove `network` to load it without network access",
            pc.network.join(", ")
        ));
    }
    let base = cfg.source.as_ref().and_then(|p| p.parent()).map(Path::to_path_buf).unwrap_or_default();
    let path = base.join(&pc.path);
    let wasm = std::fs::read(&path).map_err(|e| format!("plugin \"{id}\": cannot read {}: {e}", path.display()))?;
    let actual = runtime::cache::sha256_hex(&wasm);
    match &pc.sha256 {
        Some(expected) if !expected.eq_ignore_ascii_case(&actual) => {
            return Err(format!(
                "plugin \"{id}\": {} has sha256 {actual}, but cheng.toml pins {expected}; refusing to load it",
                path.display()
            ));
        }
        None if !cfg.allow_unpinned_plugins => {
            return Err(format!(
                "plugin \"{id}\": no sha256 pin in cheng.toml; add sha256 = \"{actual}\" after vetting {}",
                path.display()
            ));
        }
        _ => {}
    }
    let fs = match &pc.fs {
        FsGrantConfig::Simple(s) if s == "none" => FsGrant::None,
        FsGrantConfig::Simple(s) if s == "read" => FsGrant::Read,
        FsGrantConfig::Simple(s) => {
            return Err(format!(
                "plugin \"{id}\": fs = \"{s}\" is not none, read, or {{ read = [...], write = [...] }}"
            ));
        }
        FsGrantConfig::Scoped { read, write } => FsGrant::Scoped {
            read: read.iter().map(|f| check_grant_folder(id, f, false)).collect::<Result<_, _>>()?,
            write: write.iter().map(|f| check_grant_folder(id, f, true)).collect::<Result<_, _>>()?,
        },
    };
    Ok(PluginSpec {
        id: id.clone(),
        wasm,
        origin: path.display().to_string(),
        grant: Grant { fs, spawn: pc.spawn, memory_mb: pc.memory_mb, cpu_ms: pc.timeout_ms },
    })
}

/// Imports a component asks for beyond the `tool` world and WASI.
fn refused_imports(component: &wasmtime::component::Component, engine: &wasmtime::Engine) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .filter(|name| !(name.starts_with("cheng:tool/") || name.starts_with("wasi:")))
        .collect()
}

/// Network imports (`wasi:sockets/*`, `wasi:http/*`) a component asks for.
fn network_imports(component: &wasmtime::component::Component, engine: &wasmtime::Engine) -> Vec<String> {
    component
        .component_type()
        .imports(engine)
        .map(|(name, _)| name.to_string())
        .filter(|name| name.starts_with("wasi:sockets/") || name.starts_with("wasi:http/"))
        .collect()
}

/// What a component file holds, as `cheng plugin inspect` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    /// SHA-256 of the file (what `cheng.toml` pins).
    pub sha256: String,
    /// Size in bytes.
    pub size: usize,
    /// Every import it asks for.
    pub imports: Vec<String>,
    /// Imports beyond the tool world and WASI: a plugin asking for any is refused.
    pub refused_imports: Vec<String>,
    /// The tools its `describe` declares, with schemas and needs.
    pub tools: Vec<ToolSpec>,
}

/// Compile `wasm` and run its `describe` in a sandbox with no filesystem: what a
/// component declares, without loading it into a host.
pub async fn inspect(wasm: &[u8], name: &str) -> Result<Inspection, HostError> {
    let engine = EngineHandle::with_options(runtime::engine::EngineOptions { pooling: false, ..Default::default() })?;
    let err = |e: wasmtime::Error| HostError::Component { name: name.to_string(), reason: format!("{e:#}") };
    let component = wasmtime::component::Component::new(engine.engine(), wasm).map_err(err)?;
    let imports: Vec<String> =
        component.component_type().imports(engine.engine()).map(|(n, _)| n.to_string()).collect();
    let refused = refused_imports(&component, engine.engine());
    let mut tools = Vec::new();
    if refused.is_empty() {
        let mut linker = Linker::<StoreState>::new(engine.engine());
        runtime::bindings::add_to_linker(&mut linker).map_err(err)?;
        let c = LoadedComponent::load(
            name,
            Source::Owned(Arc::new(wasm.to_vec())),
            engine.engine(),
            &linker,
            &ComponentCache::new(None),
            &|_| {},
        )
        .await?;
        tools = c.tools;
    }
    Ok(Inspection {
        sha256: runtime::cache::sha256_hex(wasm),
        size: wasm.len(),
        imports,
        refused_imports: refused,
        tools,
    })
}

/// Load one plugin and register its tools as `<id>__<tool>`.
async fn load_plugin(
    spec: PluginSpec,
    engine: &wasmtime::Engine,
    linker: &Linker<StoreState>,
    cache: &ComponentCache,
    on_compile: &(dyn Fn(&str) + Send + Sync),
    registry: &mut Registry,
) -> Result<(), String> {
    let id = spec.id.clone();
    if !valid_plugin_id(&id) {
        return Err(format!("plugin id \"{id}\" must match [a-z][a-z0-9-]{{0,15}}"));
    }
    let origin = spec.origin.clone();
    let mut c = LoadedComponent::load(&id, Source::Owned(Arc::new(spec.wasm)), engine, linker, cache, on_compile)
        .await
        .map_err(|e| format!("plugin \"{id}\" ({origin}): {e}"))?;
    c.grant = spec.grant;
    // Plugins are compiled (or loaded from the cache) now, so that a corrupt or
    // wrong-world file is one clear error at start, naming the file.
    let pre = c.pre(engine, linker, cache, on_compile).await.map_err(|e| format!("plugin \"{id}\" ({origin}): {e}"))?;
    let refused = refused_imports(pre.instance_pre().component(), engine);
    if !refused.is_empty() {
        return Err(format!(
            "plugin \"{id}\" ({origin}) imports {}, beyond the tool world and WASI; refusing to load it",
            refused.join(", ")
        ));
    }
    // No plugin holds a network grant (the web tools that would broker it do not exist),
    // so a component that imports sockets or HTTP is refused now, by name, rather than
    // loaded to have every socket call fail at run time.
    let network = network_imports(pre.instance_pre().component(), engine);
    if !network.is_empty() {
        return Err(format!(
            "plugin \"{id}\" ({origin}) imports {}, but plugins get no network access; refusing to load it \
             (build it without networking, or leave it out)",
            network.join(", ")
        ));
    }
    for t in &c.tools {
        let name = format!("{id}__{}", t.name);
        if name.len() > 64 {
            return Err(format!("plugin \"{id}\": tool name \"{name}\" is longer than 64 characters"));
        }
    }
    registry.add(Arc::new(c), &format!("{id}__")).map_err(|e| e.to_string())
}
