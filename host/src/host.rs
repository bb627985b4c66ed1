//! [`Host`]: the tool host an embedder holds — cheap to clone, serving many workspaces
//! and concurrent calls — and what it shows about itself: its tools, policy, approvals
//! broker, audit log and load errors. Calls go through the pipeline
//! ([`crate::pipeline`]).

use std::sync::Arc;

use serde::Serialize;

use crate::approvals::Broker;
use crate::pipeline::Inner;
use crate::policy::{Config, Policy};
use crate::records::{AuditLog, CallRecord};
use crate::{Context, HostError, Needs, ToolResult};

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
    /// One of the host's own tools (a built-in component's, under its own name).
    pub builtin: bool,
}

/// The tool host. Cheap to clone; serves many workspaces and concurrent calls.
#[derive(Clone)]
pub struct Host {
    pub(crate) inner: Arc<Inner>,
}

impl Host {
    /// Call `tool` with `input` (a JSON object) under `cx`.
    ///
    /// Never panics and never returns a Rust error: every outcome, including an unknown
    /// tool, a refused grant, bad arguments, a crashed or timed-out component and
    /// cancellation, is a [`ToolResult`].
    pub async fn call(&self, cx: &Context, tool: &str, input: serde_json::Value) -> ToolResult {
        self.inner.call_recorded(cx, tool, input).await.0
    }

    /// Like [`Host::call`], also returning the call's record.
    pub async fn call_recorded(&self, cx: &Context, tool: &str, input: serde_json::Value) -> (ToolResult, CallRecord) {
        self.inner.call_recorded(cx, tool, input).await
    }

    /// Compile (or load from the component cache) every component now, so that no
    /// tool's first call waits for it. A host lists its built-in tools without compiling
    /// them ([`crate::builtin`]); a server calls this in the background as it starts.
    /// A component that fails to compile is left for the call that needs it to report.
    pub async fn warm_up(&self) {
        let inner = &self.inner;
        let mut seen = std::collections::HashSet::new();
        for entry in inner.registry.iter() {
            if let Some(c) = entry.component()
                && seen.insert(c.name.clone())
            {
                let _ = c.pre(inner.engine.engine(), &inner.linker, &inner.cache, inner.on_compile.as_ref()).await;
            }
        }
    }

    /// The configuration the host was built with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Send the call spans and counters waiting for the collector now, waiting for the
    /// collector up to `[telemetry] timeout_ms`; nothing without `[telemetry] endpoint`.
    /// (A host flushes when it is dropped too.)
    pub fn flush_telemetry(&self) {
        #[cfg(feature = "telemetry")]
        if let Some(t) = &self.inner.telemetry {
            t.flush();
        }
    }

    /// What operators watch: runs, the event stream, metrics.
    pub fn observer(&self) -> &crate::observe::Observer {
        &self.inner.observer
    }

    /// Per-run data a component keeps (for example `todo_write`'s plan under
    /// component `notes`, key `todos`).
    pub fn run_state(&self, run: &str, component: &str, key: &str) -> Option<String> {
        self.inner.run_state.scope(run, component).get(key)
    }

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

    /// The learned rules in force (saved by answers "always"), as on disk now.
    pub fn learned_rules(
        &self,
    ) -> Result<Vec<crate::process::learned::LearnedRule>, crate::process::learned::StoreError> {
        self.inner.spawner.learned.list()
    }

    /// Revoke learned rule `id` on behalf of `by` (`operator:<token>`, `socket:uid N`):
    /// removed from the state directory for every host sharing it, and recorded in the
    /// audit log (tool `cheng.rules.revoke`). `Ok(None)` when there is no such rule.
    pub fn revoke_rule(&self, id: &str, by: &str) -> Result<Option<crate::process::learned::LearnedRule>, HostError> {
        let store = &self.inner.spawner.learned;
        let removed = store.revoke(id).map_err(|e| HostError::State(e.to_string()))?;
        if let Some(rule) = &removed {
            tracing::info!(target: "approvals", rule = %rule.id, by = %by,
                text = %cheng_contract::text::escape_line(&rule.text), "learned rule revoked");
            self.record_operator_action(
                "cheng.rules.revoke",
                rule.workspace.as_ref().map(|w| w.display().to_string()).unwrap_or_default(),
                serde_json::json!({"rule": rule.id, "by": by}),
                serde_json::json!({"revoked": rule}),
            )?;
        }
        Ok(removed)
    }

    /// The "this run" answers still live, as `(run, rule)`: kept in memory only, they
    /// end with their run, after the run's idle window, or at most twelve hours after
    /// they were given.
    pub fn run_grants(&self) -> Vec<(String, crate::process::learned::LearnedRule)> {
        let spawner = &self.inner.spawner;
        spawner.run_grants.list(spawner.run_idle)
    }

    /// End run `run`: its "this run" answers are forgotten (the MCP session closed).
    pub fn end_run(&self, run: &str) {
        self.inner.spawner.run_grants.end(run);
    }

    /// Append a record of something an operator did outside a tool call (a rule
    /// revoked) to the audit log, in the hash chain like every call.
    fn record_operator_action(
        &self,
        tool: &str,
        workspace: String,
        arguments: serde_json::Value,
        result: serde_json::Value,
    ) -> Result<(), HostError> {
        let Some(log) = &self.inner.records.log else { return Ok(()) };
        let record = crate::records::operator_record(tool, workspace, arguments, result);
        log.append(&record).map_err(|e| HostError::State(format!("the audit log did not take the record: {e}")))?;
        log.flush().map_err(|e| HostError::State(format!("the audit log did not take the record: {e}")))
    }

    /// The audit log, when there is one.
    pub fn audit_log(&self) -> Option<&AuditLog> {
        self.inner.records.log.as_ref()
    }

    /// Plugins that could not be loaded, one message each (the rest work).
    pub fn load_errors(&self) -> &[String] {
        &self.inner.load_errors
    }

    /// Whether a tool of this name is registered (without building every tool's info).
    pub fn has_tool(&self, name: &str) -> bool {
        self.inner.registry.get(name).is_some()
    }

    /// The MCP server called `id`, if one is configured and set up.
    #[cfg(feature = "mcp-sources")]
    pub fn mcp_server(&self, id: &str) -> Option<&Arc<crate::sources::mcp::Server>> {
        self.inner.mcp.get(id)
    }

    /// Every registered tool (a server's withheld tools are left out).
    pub fn tools(&self) -> Vec<ToolInfo> {
        self.inner
            .registry
            .iter()
            .filter(|e| match &e.source {
                #[cfg(feature = "mcp-sources")]
                crate::registry::Source::Mcp(server, spec) => server.withheld(&spec.name).is_none(),
                crate::registry::Source::Component(..) => true,
            })
            .map(|e| {
                let s = e.spec();
                ToolInfo {
                    name: e.name.clone(),
                    component_tool: s.name.clone(),
                    component: e.served_by(),
                    description: s.description.clone(),
                    input_schema: s.input_schema.clone(),
                    output_schema: s.output_schema.clone(),
                    needs: s.needs.clone(),
                    builtin: matches!(&e.source, crate::registry::Source::Component(c, _)
                        if e.name == s.name && crate::builtin::BUILTINS.iter().any(|(f, ..)| *f == c.name)),
                }
            })
            .collect()
    }
}
