//! The `cheng` command line: list tools, call one, serve them over MCP, and the
//! operator's commands (records, approvals, tokens, settings, plugins, MCP servers).
//!
//! `stdout` carries exactly one JSON document per command; notices, prompts and logs go
//! to `stderr` (logs filtered by `CHENG_LOG`, default `warn`). Exit codes: 0 ok, 1 tool
//! error, 2 denied, 64 usage error. This file dispatches; each command lives in
//! [`cli`].

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

mod cli;

use cli::args::{Cli, Command};
use cli::{EXIT_ERROR, EXIT_USAGE, UsageError};

/// The binary's allocator. The library crates leave the choice to whoever links them; the
/// server makes and frees many short-lived buffers per call (a MiB-sized answer is mapped
/// and unmapped by the C library's allocator each time), which mimalloc keeps and reuses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    // Guest-visible errors are ordinary results: never capture a host backtrace for them,
    // whatever RUST_BACKTRACE says (it made error-heavy guest work up to 1.5x slower).
    // Panics still honour RUST_BACKTRACE.
    if std::env::var_os("RUST_LIB_BACKTRACE").is_none() {
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var("RUST_LIB_BACKTRACE", "0") };
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    cli::init_logging();
    // A panic anywhere still leaves the audit log's head file at the last record written.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        report(info);
        cli::flush_audit_log();
    }));
    // One call per process: a current-thread runtime starts fastest (blocking work still
    // gets its own threads). A server takes every core.
    let built = if matches!(cli.command, Command::Serve { .. }) {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    };
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cheng: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let code = match rt.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cheng: {e:#}");
            e.downcast_ref::<UsageError>().map_or(EXIT_ERROR, |_| EXIT_USAGE)
        }
    };
    // Every way out of `run` (ok, error, denial) leaves the head file at the last record.
    cli::flush_audit_log();
    // Everything is written and flushed; skip tearing down the engine and runtime (the
    // process ends either way, and unmapping compiled code only costs time).
    let _ = std::io::stdout().flush();
    std::mem::forget(rt);
    std::process::exit(code.into())
}

/// One command: those that need no engine first, then the host and the rest.
async fn run(cli: Cli) -> Result<u8> {
    tracing::debug!(target: "cheng::startup", "runtime started");
    let config = cli::load_config(&cli)?;
    let state = cli::state_dir(&cli);
    if let Some(code) = cli::offline::run(&cli, &config, &state).await? {
        return Ok(code);
    }
    let cli::start::Started { host, client_approver } = cli::start::host(&cli, &config, &state).await?;
    match &cli.command {
        Command::Tools { json } => cli::call::tools(&host, *json),
        Command::Call { tool, input, record, .. } => {
            cli::call::call(&cli, &state, host, tool, input.as_deref(), *record).await
        }
        Command::Serve { http, stdio, allow_remote } => {
            let asked = cli::serve::Serve { http: *http, stdio: *stdio, allow_remote: *allow_remote };
            cli::serve::serve(&cli, &config, &state, host, client_approver, asked).await
        }
        Command::Mcp { action } => cli::mcp::run(&cli, &config, &state, &host, action).await,
        // Answered by `offline`, before a host started.
        Command::Records { .. }
        | Command::Rules { .. }
        | Command::Settings { .. }
        | Command::Plugin { .. }
        | Command::Token { .. }
        | Command::Approvals
        | Command::Approve { .. }
        | Command::Decline { .. } => Ok(0),
    }
}
