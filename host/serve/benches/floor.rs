//! The transport floor for the `serve` benchmark: an MCP server built with rmcp alone,
//! the library `cheng serve` is built on, with no sandbox, no policy and no records.
//! Its `read_file` reads the file natively and answers as `cheng serve` does (the output
//! as `structuredContent` and again as text); its `think` answers at once. The `serve`
//! benchmark starts this binary with `CHENG_BENCH_FLOOR=stdio` or `=http` and measures
//! it with the same client, in the same run, as `cheng serve`: what no server on this
//! transport can go below, and so what part of each goal the transport leaves.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt};

#[derive(Clone)]
struct Floor;

fn tool(name: &str, property: &str) -> Tool {
    let schema = serde_json::json!({
        "type": "object",
        "properties": {property: {"type": "string"}},
        "required": [property],
    });
    let serde_json::Value::Object(schema) = schema else { unreachable!("an object literal") };
    Tool::new(name.to_string(), format!("{name} (transport floor)"), Arc::new(schema))
}

impl ServerHandler for Floor {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![tool("read_file", "path"), tool("think", "thought")]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let arg = |k: &str| args.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
        let output = match &*request.name {
            "read_file" => {
                let path = arg("path");
                let content =
                    std::fs::read_to_string(&path).map_err(|e| ErrorData::invalid_params(e.to_string(), None))?;
                let lines = content.lines().count();
                serde_json::json!({"path": path, "content": content, "total_lines": lines, "truncated": false})
            }
            "think" => serde_json::json!({"thought": arg("thought")}),
            other => return Err(ErrorData::invalid_params(format!("Unknown tool: {other}"), None)),
        };
        let mut out = CallToolResult::success(vec![ContentBlock::text(output.to_string())]);
        out.structured_content = Some(output);
        Ok(out.into())
    }
}

/// Serve the floor over `kind` ("stdio", or "http" on a loopback port printed to stdout
/// as `listening <addr>`) until the client goes away or the process is killed.
pub async fn serve(kind: &str) {
    match kind {
        "stdio" => {
            // Read and written through the reactor, as `cheng serve` does with pipes.
            use std::os::fd::AsFd;
            use tokio::net::unix::pipe;
            let fd = |f: std::os::fd::BorrowedFd<'_>| f.try_clone_to_owned().expect("stdin and stdout are open");
            let rx = pipe::Receiver::from_owned_fd(fd(std::io::stdin().as_fd())).expect("stdin is a pipe");
            let tx = pipe::Sender::from_owned_fd(fd(std::io::stdout().as_fd())).expect("stdout is a pipe");
            let running = Floor.serve((rx, tx)).await.expect("the stdio session starts");
            let _ = running.waiting().await;
        }
        "http" => {
            let config = StreamableHttpServerConfig::default().disable_allowed_hosts().with_json_response(true);
            let service = StreamableHttpService::new(|| Ok(Floor), Arc::new(LocalSessionManager::default()), config);
            let app = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            println!("listening {}", listener.local_addr().unwrap());
            axum::serve(listener, app).await.unwrap();
        }
        other => panic!("CHENG_BENCH_FLOOR is \"stdio\" or \"http\", not \"{other}\""),
    }
}
