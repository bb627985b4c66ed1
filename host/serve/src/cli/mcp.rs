//! `cheng mcp list | diff ID | accept ID`: the configured MCP servers and their tools,
//! and the review of a server's tool definitions against the accepted pins.

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use cheng_host::Host;
use cheng_host::policy::Config;
use serde_json::json;

use super::args::{Cli, McpCommand};
use super::{EXIT_ERROR, UsageError, emit_json, workspace_of};

/// Answer one `cheng mcp` command.
pub async fn run(cli: &Cli, config: &Config, state: &Option<PathBuf>, host: &Host, action: &McpCommand) -> Result<u8> {
    let (id, accept) = match action {
        McpCommand::List => return list(config, host),
        McpCommand::Diff { id } => (id, false),
        McpCommand::Accept { id } => (id, true),
    };
    let Some(server) = host.mcp_server(id) else {
        bail!(UsageError(format!("no MCP server \"{id}\" is set up (see `cheng mcp list` and the log above)")));
    };
    let root = workspace_of(&cli.workspace, state)?;
    let root = std::fs::canonicalize(&root).with_context(|| format!("cannot open {}", root.display()))?;
    let review = server.review(&root, accept).await.map_err(|e| anyhow::anyhow!("MCP server \"{id}\": {e}"))?;
    let mut shown = serde_json::to_value(&review)?;
    // What of a description reaches an agent: the rest is cut (and said so).
    shown["description_cap_chars"] = json!(cheng_host::sources::mcp::MAX_DESCRIPTION_CHARS);
    emit_json(&shown)?;
    Ok(if accept || review.diff.is_empty() { 0 } else { EXIT_ERROR })
}

/// Every configured server: its command, whether it is set up, the tools it offers.
fn list(config: &Config, host: &Host) -> Result<u8> {
    let tools = host.tools();
    let list: Vec<_> = config
        .mcp()
        .map_err(|e| UsageError(e.0))?
        .iter()
        .map(|s| {
            let prefix = format!("{}__", s.id);
            let offered: Vec<_> = tools.iter().filter(|t| t.name.starts_with(&prefix)).map(|t| t.name.clone()).collect();
            let server = host.mcp_server(&s.id);
            json!({"id": s.id, "command": server.as_ref().map(|x| x.display()), "set_up": server.is_some(), "tools": offered})
        })
        .collect();
    emit_json(&list)?;
    Ok(0)
}
