//! Embedding Cheng in an agent engine: a host with two roles, a custom [`Approver`],
//! one third-party plugin, and calls that come back ok, denied, and approved or
//! declined by the approver.
//!
//! The binary (`src/main.rs`) prints the outcomes; the host's tests call [`run`].
//!
//! It links `cheng-host` without its optional features (the workspace's dependency
//! turns default features off; `cheng` turns them on): every built-in tool but the two
//! web tools, and local plugins; no OCI client, MCP client, OpenTelemetry exporter,
//! Prometheus text or component-side HTTP. Add to its `features`: `"oci"` for plugins
//! pulled from registries, `"mcp-sources"` for tools of external MCP servers
//! (`[[mcp_servers]]`), `"telemetry"` for spans and counters sent to an OTLP collector
//! (`[telemetry]`), `"web"` for `web_fetch`, `web_search` and plugins that fetch over
//! `wasi:http`, `"metrics"` for `Observer::metrics_text`. A section whose feature is off
//! is a load error naming it.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use cheng_host::approvals::{ApprovalRequest, Approver, Decision};
use cheng_host::grant::Grant;
use cheng_host::policy::Config;
use cheng_host::{Context, HostBuilder, PluginSpec, ToolResult};
use serde_json::json;

/// Approves commands whose card summary starts with `ls`, declines everything else.
pub struct OnlyLs;

impl Approver for OnlyLs {
    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async move { if req.summary.starts_with("ls") { Decision::Approved } else { Decision::Declined } })
    }
}

/// One call and how it came back.
pub struct Outcome {
    /// What was asked, for printing.
    pub label: &'static str,
    /// The result.
    pub result: ToolResult,
}

/// Build the host and make the calls in `workspace`. `plugin` is a component file (the
/// hello-tool example), registered as `hello` with no grant: its tools are
/// `hello__<tool>`, held only by roles that name them.
pub async fn run(workspace: &Path, plugin: &Path) -> anyhow::Result<Vec<Outcome>> {
    let wasm = std::fs::read(plugin)?;
    let config = Config::from_toml_str(
        r#"
        default_role = "reader"
        [roles.reader]
        tools = ["read_file", "list_dir", "hello__hello"]
        [roles.builder]
        inherits = "reader"
        tools = ["workspace_shell"]
        "#,
        "embedded config",
    )?;
    let mut builder = HostBuilder::new();
    builder.config(config).approver(Arc::new(OnlyLs)).without_audit_log();
    builder.plugin(PluginSpec { id: "hello".into(), wasm, origin: plugin.display().to_string(), grant: Grant::none() });
    let host = builder.build().await?;

    let reader = Context::new(workspace).role("reader");
    let builder_cx = Context::new(workspace).role("builder");
    let mut out = Vec::new();
    for (label, cx, tool, input) in [
        ("plugin tool, granted", &reader, "hello__hello", json!({"name": "Ada"})),
        ("built-in, granted", &reader, "list_dir", json!({})),
        ("not in the role", &reader, "workspace_shell", json!({"command": "ls"})),
        ("approved by OnlyLs", &builder_cx, "workspace_shell", json!({"command": "ls"})),
        ("declined by OnlyLs", &builder_cx, "workspace_shell", json!({"command": "touch", "args": ["made-by-shell"]})),
    ] {
        out.push(Outcome { label, result: host.call(cx, tool, input).await });
    }
    Ok(out)
}
