//! Tool sources beside the components: tools served by external MCP servers ([`mcp`]),
//! each confined, its definitions pinned, its calls taken through the same pipeline
//! stages (grant, run, input, workspace, records, approvals) as a component's.

#[cfg(feature = "mcp-sources")]
pub mod mcp;
