//! Every benchmark in one binary, so that building them links the host once rather than
//! once per benchmark: `cargo bench --bench all -- <name> [--quick]`, where `<name>` is
//! `calls`, `records`, `fs`, `process`, `git`, `serve`, `web`, `mcp`, `tokens` or `startup`; with no name, all
//! of them in that order. Each module's documentation says what it measures (BENCHMARKS.md
//! has the figures).

mod calls;
mod common;
mod fs;
mod git;
mod mcp;
mod process;
mod records;
mod serve;
mod startup;
mod tokens;
mod web;

const NAMES: &[&str] = &["calls", "records", "fs", "process", "git", "serve", "web", "mcp", "tokens", "startup"];

#[tokio::main]
async fn main() {
    // cargo passes `--bench`; options start with `--`, names do not.
    let asked: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with("--")).collect();
    if let Some(bad) = asked.iter().find(|a| !NAMES.contains(&a.as_str())) {
        eprintln!("unknown benchmark \"{bad}\"; the benchmarks are {}", NAMES.join(", "));
        std::process::exit(2);
    }
    for name in NAMES.iter().filter(|n| asked.is_empty() || asked.iter().any(|a| a == *n)) {
        println!("== {name}");
        match *name {
            "calls" => calls::main().await,
            "records" => records::main().await,
            "fs" => fs::main().await,
            "process" => process::main().await,
            "git" => git::main().await,
            "serve" => serve::main().await,
            "web" => web::main().await,
            "mcp" => mcp::main().await,
            "tokens" => tokens::main().await,
            _ => startup::main().await,
        }
    }
}
