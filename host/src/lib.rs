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
//! A [`Context`]'s workspace counts as *found* (a client's root, the current
//! directory) unless the caller says it was given ([`Context::given`]): a found one that
//! is `/`, the home, or holds the home or the host's state directory is refused.
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
//! - [`HostBuilder`] (`builder.rs`) sets a host up; [`Host`] (`host.rs`) is what an
//!   embedder holds.
//! - [`pipeline`]: one call, stage by stage, from admission to its record;
//!   [`call`]: what a call carries through them, the one approval path, and the
//!   sentences a model reads when a call fails.
//! - [`capability`]: every grant check, engine-free, with typed denials.
//! - [`policy`] (the cheng-policy crate): `cheng.toml` — roles, limits, per-tool
//!   settings, the command policy, network rules; [`grant`]: what a component may touch.
//! - [`approvals`]: the broker and the [`approvals::Approver`] trait.
//! - [`records`]: call records and the audit log.
//! - [`guard`]: the workspace path guard.
//! - [`runtime`]: engine, component cache, per-call stores and limits, WIT bindings.
//! - [`registry`]: tools by name; [`inspect()`] looks into a component file;
//!   [`schema`]: tool schemas in the forms clients and models read them.
//! - [`sources`]: tools beside the components — external MCP servers ([`sources::mcp`]),
//!   confined, their definitions pinned.
//! - [`runstate`]: per-run data for components; [`atomic`]: the host's file writes.
//! - [`signature`]: minisign signatures on plugin components (`signed_by`);
//!   [`oci`]: plugin components pulled from OCI registries into the state directory.
//! - [`observe`]: runs, events and metrics for operators; [`telemetry`]: calls as
//!   OpenTelemetry spans and the counters as OTLP metrics, sent to the operator's
//!   collector; [`trace`]: W3C trace context read from callers and sent on.
//!
//! `cheng serve` (MCP over stdio and streamable HTTP, tokens, the operator API and
//! console) and the `cheng` command line are the crate above this one, `cheng-serve`.
//!
//! # Features
//!
//! All on by default (and for the `cheng` binary). Without any
//! (`default-features = false`), the host runs every built-in tool but the two web tools.
//! A config section whose feature is off is refused at load, naming the feature.
//!
//! - `oci`: plugins pulled from OCI registries (`source = "oci://…"`); the `oci` module.
//! - `mcp-sources`: tools of external MCP servers (`[[mcp_servers]]`); rmcp's client and
//!   reqwest.
//! - `telemetry`: calls as OpenTelemetry spans and the counters over OTLP
//!   (`[telemetry]`), the caller's trace context continued; the `telemetry` module.
//! - `web`: `wasi:http` for components and the `web_fetch`/`web_search` component, which
//!   is otherwise neither built nor embedded; a plugin importing `wasi:http` is refused.
//! - `metrics`: the counters in Prometheus' text format ([`observe::Observer`]'s
//!   `metrics_text`).
//!
//! `oci`, `telemetry` and `web` share the host's own HTTP client (hyper and rustls,
//! through the egress guard); with none of the three, neither is compiled.
//!
//! # Layers
//!
//! Crates keep the lower layers, so cargo refuses an import against them: the contract
//! (cheng-contract) → the operator policy ([`policy`], cheng-policy, with [`grant`] and the
//! network rules) → the call core (cheng-core: [`Context`], [`call`], [`capability`],
//! [`guard`], [`approvals`], [`records`], [`runstate`], [`atomic`], [`trace`], re-exported
//! here under their own names) → this crate → `cheng-serve`. Inside this crate each module
//! uses only modules below it (`tests/all/layers.rs` checks every `crate::` path): the
//! leaves ([`egress`], [`schema`], [`signature`]) → errors, [`oci`] → processes →
//! [`runtime`] → [`builtin`], [`sources`] → [`registry`], [`observe`] → [`telemetry`] →
//! plugins, [`pipeline`] → [`inspect()`], [`Host`] → [`HostBuilder`]. Processes stay a
//! private module here, not a crate: a crate's spawning functions would be public, a way
//! to start a process around the policy and approvals the host applies first.
#![deny(missing_docs)]

mod builder;
pub mod builtin;
pub mod egress;
mod error;
mod host;
mod inspect;
pub mod observe;
#[cfg(feature = "oci")]
pub mod oci;
pub mod pipeline;
mod plugins;
mod process;
pub mod registry;
pub mod runtime;
mod schema;
pub mod signature;
pub mod sources;
#[cfg(feature = "telemetry")]
pub mod telemetry;

pub use builder::HostBuilder;
pub use cheng_contract::{FsAccess, Needs};
#[doc(hidden)]
pub use cheng_core::testing;
pub use cheng_core::{
    CallRecord, Context, ErrorKind, Status, ToolResult, approvals, atomic, call, capability, grant, guard, new_id,
    policy, records, runstate, trace, unix_ms,
};
pub use error::HostError;
pub use host::{Host, ToolInfo};
pub use inspect::{Inspection, inspect};
pub use plugins::{PluginError, PluginSpec, signature_path as plugin_signature_path};
pub use policy::valid_plugin_id;
pub use process::contain::{Stat as ProcessStat, stat as process_stat};
pub use process::learned;
pub use runtime::component::ToolSpec;

/// How this machine confines the commands a host runs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Confinement {
    /// The Landlock ABI the kernel offers, if any.
    pub landlock_abi: Option<i32>,
    /// What Landlock confines here, in words.
    pub landlock: String,
    /// How command trees are contained (a cgroup per command, or the `/proc` walk).
    pub containment: String,
    /// How an MCP server without the network is kept off it.
    pub mcp_network: String,
    /// What keeps children apart from the host (namespaces, a private `/proc`).
    pub isolation: String,
    /// Whether children get namespaces of their own here, which a command granted
    /// named hosts needs (its own network, whose only way out is the host's proxy).
    pub isolated: bool,
}

/// What confines commands on this machine (for `cheng settings` and diagnostics).
pub fn confinement() -> Confinement {
    Confinement {
        landlock_abi: process::sandbox::abi_version(),
        landlock: process::sandbox::describe(),
        containment: process::contain::detect().to_string(),
        #[cfg(feature = "mcp-sources")]
        mcp_network: process::mcp_server::describe_network(),
        #[cfg(not(feature = "mcp-sources"))]
        mcp_network: "no MCP servers (cheng-host built without its `mcp-sources` feature)".to_string(),
        isolation: process::spawn::describe_isolation().to_string(),
        isolated: process::spawn::isolation(),
    }
}
