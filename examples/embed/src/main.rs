//! Embedding Cheng: build a host with a custom role and approver, then call tools in a
//! workspace and show an ok, a denied and an error outcome.
//!
//! Run: `cargo run --release -p cheng-embed-example -- [WORKSPACE]`

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use cheng_host::approvals::{ApprovalRequest, Approver, Decision};
use cheng_host::policy::Config;
use cheng_host::{Context, HostBuilder};
use serde_json::json;

/// Approves requests whose summary starts with "ls", declines the rest.
struct OnlyLs;

impl Approver for OnlyLs {
    fn decide<'a>(&'a self, req: &'a ApprovalRequest) -> Pin<Box<dyn Future<Output = Decision> + Send + 'a>> {
        Box::pin(async move {
            if req.summary.starts_with("ls") { Decision::Approved } else { Decision::Declined }
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let workspace = std::env::args().nth(1).unwrap_or_else(|| ".".into());
    let config = Config::from_toml_str(
        r#"
        default_role = "reader"
        [roles.reader]
        tools = ["read_file", "list_dir"]
        [roles.lister]
        tools = ["list_dir"]
        "#,
        "embedded config",
    )?;
    let host = HostBuilder::new().config(config).approver(Arc::new(OnlyLs)).build().await?;

    let reader = Context::new(&workspace).role("reader");
    let lister = Context::new(&workspace).role("lister");
    for (cx, tool, input) in [
        (&reader, "list_dir", json!({})),
        (&lister, "read_file", json!({"path": "Cargo.toml"})),
        (&reader, "read_file", json!({"path": "../outside"})),
    ] {
        let r = host.call(cx, tool, input).await;
        println!("{:<8} {tool:<10} as {:<7} {:?}: {}", format!("{:?}", r.status), cx.role, r.error_kind, r.output["summary"]);
    }
    Ok(())
}
