//! Embedding Cheng: see `lib.rs`. Prints each call's outcome.
//!
//! Run: `cargo run --release -p cheng-embed-example -- WORKSPACE PLUGIN.wasm`
//! (PLUGIN.wasm: build `examples/hello-tool` with `cargo build --release` in it).

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let workspace = args.next().unwrap_or_else(|| ".".into());
    let plugin =
        args.next().unwrap_or_else(|| "examples/hello-tool/target/wasm32-wasip2/release/hello_tool.wasm".into());
    for o in cheng_embed_example::run(workspace.as_ref(), plugin.as_ref()).await? {
        let r = &o.result;
        println!("{:<22} {:<7} {:?}: {}", o.label, format!("{:?}", r.status), r.error_kind, r.output["summary"]);
    }
    Ok(())
}
