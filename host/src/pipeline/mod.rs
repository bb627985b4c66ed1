//! The call pipeline: one call, top to bottom. Every caller — the CLI, an MCP client,
//! an embedder — comes through [`crate::Host::call`], and every call takes the same stages:
//!
//! 1. admission (`admit.rs`): the registry, the role's grant, the run, the input, the
//!    workspace — each refusal a result, never a panic or a Rust error;
//! 2. the instance: the component compiled (or taken from the cache) and prepared;
//! 3. what the call gets, as the policy resolves it ([`crate::policy::Policy::effective`]):
//!    mounts, spawn, memory and CPU limits;
//! 4. the `running` record (`call::RecordSink`), which must reach the audit log before the
//!    tool runs (fail closed);
//! 5. the guest, in a fresh store, its imports checked by the capability layer;
//! 6. the outcome (`settle.rs`): ok, error, or denied — denied only when the host issued
//!    the denial;
//! 7. the final record, written before the result is returned (and the call's span,
//!    when the host exports to a collector, ended with it).
//!
//! A `CallScope` ([`crate::call`]) carries the call through all of them.

mod admit;
mod settle;

use std::sync::Arc;
use std::time::Duration;

pub use admit::MAX_INPUT_BYTES;

use std::path::{Path, PathBuf};

use wasmtime::component::Linker;

use crate::approvals::Broker;
use crate::call::{CallScope, RecordSink, say};
use crate::policy::files::FileRules;
use crate::policy::{Config, Policy};
use crate::process::Spawner;
use crate::records::{CallRecord, Status};
use crate::registry::Registry;
use crate::runstate::RunStateStore;
use crate::runtime::bindings::CallCaps;
use crate::runtime::bindings::http::HttpHooks;
use crate::runtime::cache::ComponentCache;
use crate::runtime::call::CallSpec;
use crate::runtime::engine::EngineHandle;
use crate::runtime::store::StoreState;
use crate::{Context, ErrorKind, ToolResult};

/// What a host holds; shared by every clone and every call.
pub(crate) struct Inner {
    pub(crate) engine: EngineHandle,
    pub(crate) linker: Linker<StoreState>,
    pub(crate) cache: ComponentCache,
    pub(crate) registry: Registry,
    pub(crate) policy: Policy,
    pub(crate) config: Config,
    pub(crate) run_state: RunStateStore,
    pub(crate) on_compile: Arc<dyn Fn(&str) + Send + Sync>,
    pub(crate) load_errors: Vec<String>,
    pub(crate) broker: Broker,
    pub(crate) records: RecordSink,
    pub(crate) protected_abs: Vec<PathBuf>,
    pub(crate) workspaces_root: Option<PathBuf>,
    /// What a found workspace may neither be nor hold: the home and the state
    /// directory, resolved once ([`crate::guard::never_found`]).
    pub(crate) never_found: Vec<(PathBuf, &'static str)>,
    pub(crate) spawner: Arc<Spawner>,
    pub(crate) observer: Arc<crate::observe::Observer>,
    pub(crate) egress: Arc<crate::egress::Egress>,
    #[cfg(feature = "mcp-sources")]
    pub(crate) mcp: crate::sources::mcp::Hub,
    #[cfg(feature = "telemetry")]
    pub(crate) telemetry: Option<crate::telemetry::Telemetry>,
    /// `HostBuilder::blocking_fs_on_workers` (benchmarks and tests only).
    pub(crate) fs_on_workers: bool,
    /// The path rules (`[files]`) for a workspace holding none of the host's files.
    pub(crate) file_rules: Arc<FileRules>,
    /// The path rules for workspaces that hold some (the host's files as a floor), by
    /// those files.
    pub(crate) file_rules_here: std::sync::Mutex<std::collections::HashMap<Vec<String>, Arc<FileRules>>>,
}

impl Inner {
    /// The protected paths that lie in the workspace at `root`, relative to it.
    pub(crate) fn protected_in(&self, root: &Path) -> Vec<String> {
        self.protected_abs
            .iter()
            .filter_map(|p| p.strip_prefix(root).ok())
            .map(|rel| rel.to_string_lossy().into_owned())
            .filter(|rel| !rel.is_empty())
            .collect()
    }

    /// The path rules for a workspace holding the host's files `protected` (relative):
    /// the configured rules with those files as a floor, compiled once per set.
    pub(crate) fn file_rules_in(&self, protected: &[String]) -> Arc<FileRules> {
        if protected.is_empty() {
            return self.file_rules.clone();
        }
        let mut cache = self.file_rules_here.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = cache.get(protected) {
            return r.clone();
        }
        // The configuration compiled once at build, so only the host files can differ;
        // should they not compile, the capability check still refuses every write to
        // them.
        let rules = match self.config.file_rules(protected) {
            Ok(r) => Arc::new(r),
            Err(e) => {
                tracing::error!(target: "cheng::files", "the path rules with the host's files: {e}");
                self.file_rules.clone()
            }
        };
        if cache.len() > 64 {
            cache.clear();
        }
        cache.insert(protected.to_vec(), rules.clone());
        rules
    }

    /// One call, every stage, and its record ([`crate::Host::call_recorded`]).
    pub(crate) async fn call_recorded(
        &self,
        cx: &Context,
        tool: &str,
        input: serde_json::Value,
    ) -> (ToolResult, CallRecord) {
        let id = crate::new_id();
        // A call keeps its run's "this run" answers alive (they end when it is idle).
        self.spawner.run_grants.touch(&cx.run);
        // The call's span (when exported) starts now; what the call sends on carries its
        // context, or the caller's when nothing is exported.
        #[cfg(feature = "telemetry")]
        let span = self.telemetry.as_ref().map(|t| t.start(cx, &id, tool));
        #[cfg(feature = "telemetry")]
        let trace = span.as_ref().map(|s| s.context()).or_else(|| cx.trace.clone());
        #[cfg(not(feature = "telemetry"))]
        let trace = cx.trace.clone();
        let scope = Arc::new(CallScope::new(id, cx, tool, input, trace));
        let observer = &self.observer;
        observer.call_started(&scope.id, &cx.run, &cx.role, tool, &cx.workspace.display().to_string());
        let work = async {
            match self.stages(&scope).await {
                Ok(r) | Err(r) => r,
            }
        };
        tokio::pin!(work);
        let result = tokio::select! {
            r = &mut work => r,
            _ = cx.cancel.cancelled() => {
                // A command in flight sees the same token, stops its process tree and
                // lets the tool report `cancelled` with what the command printed; give
                // it the kill grace to do so. Anything else is abandoned at once.
                let grace = Duration::from_millis(self.config.process.kill_grace_ms + 2_000);
                let cancelled = || scope.fail(Status::Error, ErrorKind::Cancelled, say::cancelled(tool));
                if scope.has_commands() {
                    tokio::time::timeout(grace, &mut work).await.unwrap_or_else(|_| cancelled())
                } else {
                    cancelled()
                }
            }
        };
        let (result, mut rec) = self.records.finish(&scope, result);
        if rec.arguments.is_null() {
            rec.arguments = crate::records::stored_arguments(&scope.input);
        }
        let rights: Vec<&str> = rec.denials.iter().map(|d| d.right.as_str()).collect();
        for a in &rec.approvals {
            observer.approval_answered(a.decision.as_str());
        }
        observer.call_finished(&scope.id, &cx.run, tool, rec.status.as_str(), rec.duration_ms, &rights);
        #[cfg(feature = "telemetry")]
        if let (Some(t), Some(span)) = (&self.telemetry, span) {
            t.end(span, &rec);
        }
        (result, rec)
    }

    /// The stages of one call; `Err` carries the result of a call that stopped early.
    async fn stages(&self, scope: &Arc<CallScope>) -> Result<ToolResult, ToolResult> {
        let inner = self;
        // 1. Admission.
        let entry = admit::entry(inner, scope)?;
        admit::grant(inner, scope)?;
        admit::run(inner, scope)?;
        let (input_text, validation) = admit::input(&entry, scope)?;
        let guard = admit::workspace(inner, scope)?;

        // A tool of an external MCP server takes its own stage from here.
        let component = match &entry.source {
            crate::registry::Source::Component(c, _) => c,
            #[cfg(feature = "mcp-sources")]
            crate::registry::Source::Mcp(server, spec) => {
                admit::validated(scope, validation).await?;
                return Ok(crate::sources::mcp::call::run(
                    &inner.records,
                    &inner.broker,
                    scope,
                    server,
                    &spec.name,
                    guard.root(),
                )
                .await);
            }
        };

        // 2. The instance (compiled on first use), while the schema check finishes.
        let pre = component
            .pre(inner.engine.engine(), &inner.linker, &inner.cache, inner.on_compile.as_ref())
            .await
            .map_err(|e| scope.crashed(&e.to_string()))?;
        admit::validated(scope, validation).await?;

        // 3. What this call gets.
        let spec = entry.spec();
        let effective = inner.policy.effective(&scope.tool, &spec.needs, &component.grant);
        let protected = inner.protected_in(guard.root());
        let file_rules = inner.file_rules_in(&protected);

        // 4. The running record; the audit log must take it.
        inner.records.start(scope)?;

        // 5. The guest, bounded by its CPU budget and by the wall clock.
        let caps = CallCaps {
            scope: scope.clone(),
            component: component.name.clone(),
            guard: guard.clone(),
            mounts: effective.mounts.clone(),
            protected,
            file_rules,
            reads_git: component.is_builtin() && matches!(component.name.as_str(), "git" | "git-write"),
            paths_answered: std::sync::Mutex::default(),
            spawn: effective.spawn,
            run_state: inner.run_state.scope(&scope.cx.run, &component.name),
            spawner: inner.spawner.clone(),
            broker: inner.broker.clone(),
            fs_on_worker: inner.fs_on_workers,
        };
        let run = crate::runtime::call::call(CallSpec {
            engine: inner.engine.engine(),
            pre,
            local_name: &spec.name,
            display_name: &scope.tool,
            input: &input_text,
            guard: &guard,
            mounts: &effective.mounts,
            memory: (effective.memory_mb as usize).saturating_mul(1 << 20),
            cpu: Duration::from_millis(effective.cpu_ms),
            http: HttpHooks::for_call(inner.egress.clone(), scope.clone(), component.reach.clone()),
            env: &component.env,
            caps,
        });
        let wall = Duration::from_millis(inner.config.limits.wall_ms);
        let Ok(outcome) = tokio::time::timeout(wall, run).await else {
            return Ok(scope.timed_out(&format!(
                "it ran for {} ms of wall-clock time and was stopped",
                inner.config.limits.wall_ms
            )));
        };

        // 6. The outcome.
        Ok(settle::result(scope, outcome))
    }
}
