//! The `cheng` command line: list tools, call one, and (later) serve them.
//!
//! `stdout` carries exactly one JSON document per command; notices, prompts and logs go
//! to `stderr` (logs filtered by `CHENG_LOG`, default `warn`). Exit codes: 0 ok, 1 tool
//! error, 2 denied, 64 usage error.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand, ValueEnum};

use cheng_host::approvals::{Approver, RefuseAll};
use cheng_host::policy::Config;
use cheng_host::records::{Filter, Status as RecordStatus};
use cheng_host::{Context, HostBuilder, Status};

mod settings;
mod tty;

const EXIT_ERROR: u8 = 1;
const EXIT_DENIED: u8 = 2;
const EXIT_USAGE: u8 = 64;

#[derive(Parser, Debug)]
#[command(name = "cheng", version, about = "A WebAssembly-component tool host for AI agents")]
struct Cli {
    /// The workspace (project directory) tools work in.
    #[arg(long, global = true, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Configuration file (else $CHENG_CONFIG, else the platform config dir's cheng/cheng.toml).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// State directory: component cache, per-run data, audit log.
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Role to call tools as (else the config's default_role, else developer).
    #[arg(long, global = true)]
    role: Option<String>,
    /// Run id (else a fresh one).
    #[arg(long, global = true)]
    run: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the tools with their schemas.
    Tools {
        /// Print a JSON array of {name, description, input_schema, output_schema}.
        #[arg(long)]
        json: bool,
    },
    /// Call a tool: `cheng call read_file '{"path":"README.md"}'` (JSON, or - for stdin).
    Call {
        /// The tool's name.
        tool: String,
        /// The input as a JSON object, or - to read it from stdin.
        input: Option<String>,
        /// Print the whole call record instead of the tool's output.
        #[arg(long)]
        record: bool,
        /// How approvals are answered for this call (never saved).
        #[arg(long, value_enum)]
        approve: Option<ApproveMode>,
    },
    /// Show call records from the audit log, oldest first (a JSON array); `--run R`
    /// keeps one run's.
    Records {
        /// Only this status.
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
        /// Only this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Only the last N.
        #[arg(long)]
        last: Option<usize>,
    },
    /// Operate on plugin component files.
    Plugin {
        #[command(subcommand)]
        action: PluginCommand,
    },
    /// Show the saved settings (a JSON object), or change one.
    Settings {
        #[command(subcommand)]
        action: Option<SettingsCommand>,
    },
    /// Serve the tools over MCP: on stdio (the default), over streamable HTTP at
    /// /mcp (`--http 127.0.0.1:PORT`), or both (`--http ADDR --stdio`).
    Serve {
        /// Serve streamable HTTP on this address (loopback unless --allow-remote).
        #[arg(long, value_name = "ADDR", value_parser = bind_address)]
        http: Option<std::net::SocketAddr>,
        /// Also speak MCP on stdin/stdout when serving HTTP.
        #[arg(long)]
        stdio: bool,
        /// Allow a non-loopback HTTP address (put TLS in front of it).
        #[arg(long)]
        allow_remote: bool,
    },
    /// List the approval requests a running `cheng serve` waits on (over its socket).
    Approvals,
    /// Approve a pending request of a running `cheng serve`.
    Approve {
        /// The request's id (from `cheng approvals`).
        id: String,
    },
    /// Decline a pending request of a running `cheng serve`.
    Decline {
        /// The request's id (from `cheng approvals`).
        id: String,
    },
    /// Manage the bearer tokens HTTP clients present.
    Token {
        #[command(subcommand)]
        action: TokenCommand,
    },
    /// External MCP servers (`[[mcp_servers]]`): their tools and pinned definitions.
    Mcp {
        #[command(subcommand)]
        action: McpCommand,
    },
}

#[derive(Subcommand, Debug)]
enum McpCommand {
    /// The configured servers, each with its command and the tools it offers.
    List,
    /// Start server ID in the workspace and show how its tools differ from the
    /// accepted definitions (exit 1 when they differ).
    Diff {
        /// The server's id.
        id: String,
    },
    /// Start server ID in the workspace and accept its tools' current definitions.
    Accept {
        /// The server's id.
        id: String,
    },
}

#[derive(Subcommand, Debug)]
enum TokenCommand {
    /// Make a token and print it (once; only its hash is kept).
    Add {
        /// Its name (for revoking it, and in logs).
        #[arg(long)]
        name: Option<String>,
        /// The role an agent token calls tools as.
        #[arg(long)]
        role: Option<String>,
        /// An operator token: reads and answers approvals, calls no tool.
        #[arg(long, conflicts_with = "role")]
        operator: bool,
    },
    /// Remove a token by name.
    Revoke {
        /// The token's name.
        name: String,
    },
    /// List the tokens (names, kinds, roles; never the tokens).
    List,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum StatusArg {
    Ok,
    Error,
    Denied,
    Running,
}

#[derive(Subcommand, Debug)]
enum PluginCommand {
    /// Show a component's SHA-256, imports and declared tools (schemas, needs) as JSON.
    Inspect {
        /// The .wasm component file.
        file: PathBuf,
    },
}

#[derive(Subcommand, Debug)]
enum SettingsCommand {
    /// Change a setting: `cheng settings set auto_approve false`.
    Set {
        /// The setting's name.
        key: String,
        /// Its new value.
        value: String,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ApproveMode {
    /// Ask on the terminal; refuse at once without one.
    Ask,
    /// Refuse every request.
    Deny,
    /// Approve every request.
    Yes,
}

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
    init_logging();
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
    // Everything is written and flushed; skip tearing down the engine and runtime (the
    // process ends either way, and unmapping compiled code only costs time).
    let _ = std::io::stdout().flush();
    std::mem::forget(rt);
    std::process::exit(code.into())
}

/// Write one document to stdout. A reader that went away (a closed pipe) is not an
/// error worth a panic: the output is simply not wanted any more.
fn emit(doc: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{doc}").and_then(|_| out.flush());
}

/// An error in how cheng was invoked (exit 64).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UsageError(String);

/// Logs on stderr, filtered by `CHENG_LOG`. Every field is written as one line with
/// control characters escaped, since fields carry text from tool arguments (an escape
/// sequence in a command must not retitle or clear the operator's terminal); colours
/// only when stderr is a terminal.
fn init_logging() {
    use std::io::IsTerminal as _;
    use tracing_subscriber::field::MakeExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_env("CHENG_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let fields = tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = cheng_contract::text::escape_line(&format!("{value:?}"));
        if field.name() == "message" { write!(w, "{text}") } else { write!(w, "{}={text}", field.name()) }
    })
    .delimited(" ");
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .fmt_fields(fields)
        .init();
}

/// Every place a configuration is looked up, in order: `--config`, `$CHENG_CONFIG`,
/// the platform config dir's `cheng/cheng.toml`. The host protects them all from its
/// tools' writes, whichever is in use (a model must not plant the next start's config).
fn config_places(cli: &Cli) -> Vec<PathBuf> {
    let mut places: Vec<PathBuf> = cli.config.iter().cloned().collect();
    places.extend(std::env::var_os("CHENG_CONFIG").map(PathBuf::from));
    if let Some(dirs) = directories::BaseDirs::new() {
        places.push(dirs.config_dir().join("cheng").join("cheng.toml"));
    }
    places
}

/// The configuration in use: the first place that names one (`--config` and
/// `$CHENG_CONFIG` must exist; the platform file may not), else the defaults. A bad
/// file is a usage error.
fn load_config(cli: &Cli) -> Result<Config> {
    let usage = |e: cheng_host::policy::ConfigError| UsageError(e.to_string());
    if let Some(path) = &cli.config {
        return Ok(Config::load(path).map_err(usage)?);
    }
    if let Some(path) = std::env::var_os("CHENG_CONFIG") {
        return Ok(Config::load(&PathBuf::from(path)).map_err(usage)?);
    }
    match config_places(cli).last() {
        Some(path) if path.is_file() => Ok(Config::load(path).map_err(usage)?),
        _ => Ok(Config::default()),
    }
}

fn state_dir(cli: &Cli) -> Option<PathBuf> {
    if let Some(d) = &cli.state_dir {
        return Some(d.clone());
    }
    let dirs = directories::BaseDirs::new()?;
    let base = dirs.state_dir().unwrap_or(dirs.data_local_dir());
    Some(base.join("cheng"))
}

/// The state directory a command needs (a usage error without one).
fn need_state(state: &Option<PathBuf>) -> Result<PathBuf> {
    Ok(state.clone().ok_or_else(|| UsageError("no state directory; pass --state-dir".into()))?)
}

/// The workspace: `--workspace`, else the current directory — unless that is `/`, the
/// home, or holds the home or the state dir (refused with how to give one).
fn workspace_of(workspace: &Option<PathBuf>, state: &Option<PathBuf>) -> Result<PathBuf> {
    match workspace {
        Some(w) => Ok(w.clone()),
        None => {
            let state = state.clone().unwrap_or_default();
            Ok(cheng_host::server::workspace::current_dir_default(&state).map_err(|e| UsageError(e.0))?)
        }
    }
}

/// `role` must be one the policy defines (a usage error naming the roles otherwise).
fn known_role(policy: &cheng_host::policy::Policy, role: &str) -> Result<()> {
    if !policy.has_role(role) {
        let roles: Vec<_> = policy.role_names().collect();
        bail!(UsageError(format!("unknown role \"{role}\"; roles: {}", roles.join(", "))));
    }
    Ok(())
}

async fn run(cli: Cli) -> Result<u8> {
    tracing::debug!(target: "cheng::startup", "runtime started");
    let config = load_config(&cli)?;
    let state = state_dir(&cli);
    // Commands that need no engine.
    match &cli.command {
        Command::Records { status, tool, last } => {
            let dir = need_state(&state)?;
            let filter = Filter {
                status: status.map(|s| match s {
                    StatusArg::Ok => RecordStatus::Ok,
                    StatusArg::Error => RecordStatus::Error,
                    StatusArg::Denied => RecordStatus::Denied,
                    StatusArg::Running => RecordStatus::Running,
                }),
                tool: tool.clone(),
                run: cli.run.clone(),
                last: *last,
            };
            let recs = cheng_host::records::read_log(&dir.join("audit.jsonl"), &filter)?;
            emit(&serde_json::to_string_pretty(&recs)?);
            return Ok(0);
        }
        Command::Plugin { action: PluginCommand::Inspect { file } } => {
            let wasm = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
            let report = cheng_host::inspect(&wasm, &file.display().to_string()).await?;
            emit(&serde_json::to_string_pretty(&report)?);
            return Ok(if report.refused_imports.is_empty() { 0 } else { EXIT_ERROR });
        }
        Command::Approvals | Command::Approve { .. } | Command::Decline { .. } => {
            let dir = need_state(&state)?;
            let req = match &cli.command {
                Command::Approve { id } => serde_json::json!({"op": "answer", "id": id, "approve": true}),
                Command::Decline { id } => serde_json::json!({"op": "answer", "id": id, "approve": false}),
                _ => serde_json::json!({"op": "list"}),
            };
            let reply = cheng_host::server::socket::request(&dir, &req).await?;
            emit(&serde_json::to_string_pretty(&reply)?);
            return Ok(match reply["result"].as_str() {
                None | Some("applied") => 0,
                Some("unknown") => EXIT_USAGE,
                Some(_) => EXIT_ERROR,
            });
        }
        Command::Token { action } => {
            let dir = need_state(&state)?;
            let store = cheng_host::server::tokens::TokenStore::new(&dir);
            match action {
                TokenCommand::Add { name, role, operator } => {
                    use cheng_host::server::tokens::Kind;
                    let (kind, role) = match (operator, role) {
                        (true, _) => (Kind::Operator, None),
                        (false, Some(r)) => {
                            known_role(&config.policy()?, r)?;
                            (Kind::Agent, Some(r.as_str()))
                        }
                        (false, None) => bail!(UsageError("give --role ROLE for an agent token, or --operator".into())),
                    };
                    let name = name.clone().unwrap_or_else(|| format!("token-{}", &cheng_host::new_id()[..8]));
                    // `--workspace DIR` pins an agent token: its sessions work there, whatever
                    // roots their client names.
                    let pin = cli.workspace.as_deref().filter(|_| kind == Kind::Agent);
                    let secret = store.add_pinned(&name, kind, role, pin).map_err(|e| UsageError(e.to_string()))?;
                    eprintln!("cheng: token \"{name}\" made; it is shown once, only its hash is kept");
                    emit(&serde_json::to_string_pretty(&serde_json::json!({"name": name, "token": secret}))?);
                }
                TokenCommand::Revoke { name } => {
                    store.revoke(name).map_err(|e| UsageError(e.to_string()))?;
                    emit(&serde_json::to_string_pretty(&serde_json::json!({"revoked": name}))?);
                }
                TokenCommand::List => {
                    let list: Vec<_> = store
                        .list()?
                        .into_iter()
                        .map(|t| serde_json::json!({"name": t.name, "kind": t.kind, "role": t.role, "created_ms": t.created_ms}))
                        .collect();
                    emit(&serde_json::to_string_pretty(&list)?);
                }
            }
            return Ok(0);
        }
        Command::Settings { action } => {
            let dir = need_state(&state)?;
            let mut s = settings::Settings::load_or_init(&dir)?;
            if let Some(SettingsCommand::Set { key, value }) = action {
                s.set(key, value).map_err(UsageError)?;
                s.save(&dir)?;
            }
            // What confines commands on this machine (shown, not saved).
            let mut shown = serde_json::to_value(&s)?;
            let c = cheng_host::confinement();
            shown["process_confinement"] = serde_json::json!({
                "landlock": match c.landlock_abi {
                    Some(v) => format!("available (ABI {v}); {}", c.landlock),
                    None => c.landlock,
                },
                "containment": c.containment,
                "mcp_servers_without_network": c.mcp_network,
            });
            emit(&serde_json::to_string_pretty(&shown)?);
            return Ok(0);
        }
        _ => {}
    }
    let mut builder = HostBuilder::new();
    builder.config(config.clone());
    let saved = match &state {
        Some(dir) => settings::Settings::load_or_init(dir)?,
        None => settings::Settings::from_env(),
    };
    if let Some(dir) = &state {
        builder.state_dir(dir);
    }
    for place in config_places(&cli) {
        builder.protect(place);
    }
    builder.on_compile(|name| {
        let _ = writeln!(
            std::io::stderr(),
            "cheng: compiling the \"{name}\" component (first run only; it is cached afterwards)"
        );
    });
    let approve = match &cli.command {
        Command::Call { approve, .. } => *approve,
        _ => None,
    };
    let serving = matches!(cli.command, Command::Serve { .. });
    let client_approver = (serving && config.serve.approvals_via_client)
        .then(|| Arc::new(cheng_host::server::approver::ClientApprover::default()));
    if let Command::Serve { http, stdio, .. } = &cli.command {
        // Approvals while serving: the client (when enabled and able), and the terminal
        // when the MCP session is not on it; an API or console may answer too.
        let stdio_used = *stdio || http.is_none();
        let mut paths: Vec<Arc<dyn Approver>> = Vec::new();
        if saved.auto_approve {
            paths.push(Arc::new(tty::AutoApprover));
        } else {
            if let Some(c) = &client_approver {
                paths.push(c.clone());
            }
            if !stdio_used && let Some(t) = tty::TtyApprover::open() {
                paths.push(Arc::new(t));
            }
        }
        builder.approver(Arc::new(cheng_host::approvals::FirstAnswer(paths)));
        // The console, the API and the socket answer too: requests wait for them.
        builder.external_approval_answers(true);
    } else {
        builder.approver(approver_for(approve, saved.auto_approve));
        // One call per process: the pooling allocator's set-up would cost more than it saves.
        builder.engine_options(cheng_host::runtime::engine::EngineOptions { pooling: false, ..Default::default() });
    }
    let host = builder.build().await.context("cannot start the host")?;
    for e in host.load_errors() {
        eprintln!("cheng: plugin not loaded: {e}");
    }

    match cli.command {
        Command::Tools { json } => {
            let tools = host.tools();
            if json {
                let list: Vec<_> = tools
                    .iter()
                    .map(|t| {
                        serde_json::json!({
                            "name": t.name,
                            "description": t.description,
                            "input_schema": t.input_schema,
                            "output_schema": t.output_schema,
                            "component": t.component,
                            "component_tool": t.component_tool,
                        })
                    })
                    .collect();
                emit(&serde_json::to_string_pretty(&list)?);
            } else {
                let mut out = std::io::stdout().lock();
                for t in &tools {
                    let first = t.description.split(". ").next().unwrap_or("");
                    // A plugin's tool is called by its registered name; the name inside
                    // the component is shown beside it when they differ.
                    let origin = if t.component_tool == t.name {
                        t.component.clone()
                    } else {
                        format!("{}:{}", t.component, t.component_tool)
                    };
                    // A server's or plugin's text is shown, never interpreted by the
                    // terminal (escape sequences, bidi overrides), and cut.
                    let esc = |s: &str| cheng_contract::text::escape_line(&cheng_contract::text::cut_chars(s, 200));
                    writeln!(out, "{:<24} {:<16} {}", esc(&t.name), esc(&origin), esc(first))?;
                }
            }
            Ok(0)
        }
        Command::Call { tool, input, record, .. } => {
            let text = match input.as_deref() {
                None => "{}".to_string(),
                Some("-") => {
                    let mut s = String::new();
                    std::io::stdin().read_to_string(&mut s).map_err(|e| match e.kind() {
                        std::io::ErrorKind::InvalidData => anyhow::Error::new(UsageError(
                            "the input on stdin is not valid UTF-8 (JSON is UTF-8)".into(),
                        )),
                        _ => anyhow::Error::new(e).context("cannot read the input from stdin"),
                    })?;
                    s
                }
                Some(s) => s.to_string(),
            };
            let value: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| UsageError(format!("the input is not valid JSON: {e}")))?;
            let workspace = workspace_of(&cli.workspace, &state)?;
            let role = match &cli.role {
                Some(r) => r.clone(),
                None => {
                    let r = host.policy().default_role().to_string();
                    eprintln!("cheng: calling as role \"{r}\" (the default; --role to change)");
                    r
                }
            };
            known_role(host.policy(), &role)?;
            let mut cx = Context::new(workspace).role(role);
            if let Some(run) = &cli.run {
                cx = cx.run(run.clone());
            }
            let token = cx.cancel.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    eprintln!("cheng: cancelling the call");
                    token.cancel();
                }
            });
            tracing::debug!(target: "cheng::startup", "calling");
            let (result, rec) = host.call_recorded(&cx, &tool, value).await;
            tracing::debug!(target: "cheng::startup", "called");
            // The process exits right after printing: dropping the host would only unmap
            // compiled code first.
            std::mem::forget(host);
            let doc = if record { serde_json::to_value(&rec)? } else { result.output.clone() };
            emit(&serde_json::to_string_pretty(&doc)?);
            Ok(match result.status {
                Status::Ok => 0,
                Status::Denied => EXIT_DENIED,
                _ => EXIT_ERROR,
            })
        }
        Command::Serve { http, stdio, allow_remote } => {
            use cheng_host::server::workspace::WorkspaceChoice;
            let state_dir = need_state(&state)?;
            let workspace = match &cli.workspace {
                Some(w) => WorkspaceChoice::Given(w.clone()),
                None => {
                    WorkspaceChoice::from_roots(&config.serve.workspaces, &state_dir).map_err(|e| UsageError(e.0))?
                }
            };
            if http.is_some() && cli.workspace.is_none() && config.serve.workspaces.is_empty() {
                bail!(UsageError(
                    "cheng serve --http needs a workspace: give --workspace DIR, or list the directories sessions \
                     may choose from their roots in [serve] workspaces (tokens may be pinned to one with \
                     `cheng token add --role R --workspace DIR`)"
                        .into()
                ));
            }
            let role = cli.role.clone().unwrap_or_else(|| host.policy().default_role().to_string());
            known_role(host.policy(), &role)?;
            let opts = cheng_host::server::ServeOptions {
                stdio: stdio || http.is_none(),
                http,
                allow_remote,
                workspace,
                role,
                state_dir,
            };
            // SIGTERM and SIGINT: stop accepting, cancel what runs, flush the log, exit 0.
            let shutdown = tokio_util::sync::CancellationToken::new();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                use tokio::signal::unix::{SignalKind, signal};
                let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt()))
                else {
                    return;
                };
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
                // Never `eprintln!` here: with stderr's reader gone it would panic and
                // the server would never stop.
                let _ = writeln!(std::io::stderr(), "cheng: shutting down");
                stop.cancel();
            });
            if let Err(e) = cheng_host::server::serve(host.clone(), opts, client_approver, shutdown).await {
                if matches!(e, cheng_host::server::ServeError::Remote(_)) {
                    bail!(UsageError(e.to_string()));
                }
                return Err(e.into());
            }
            if let Some(log) = host.audit_log() {
                log.flush().context("cannot flush the audit log")?;
            }
            Ok(0)
        }
        Command::Mcp { action } => {
            let (id, accept) = match action {
                McpCommand::List => {
                    let tools = host.tools();
                    let list: Vec<_> = config
                        .mcp()
                        .map_err(UsageError)?
                        .iter()
                        .map(|s| {
                            let prefix = format!("{}__", s.id);
                            let offered: Vec<_> =
                                tools.iter().filter(|t| t.name.starts_with(&prefix)).map(|t| t.name.clone()).collect();
                            let set_up = host.mcp_server(&s.id).is_some();
                            serde_json::json!({"id": s.id, "command": host.mcp_server(&s.id).map(|x| x.display()),
                                "set_up": set_up, "tools": offered})
                        })
                        .collect();
                    emit(&serde_json::to_string_pretty(&list)?);
                    return Ok(0);
                }
                McpCommand::Diff { id } => (id.clone(), false),
                McpCommand::Accept { id } => (id.clone(), true),
            };
            let Some(server) = host.mcp_server(&id) else {
                bail!(UsageError(format!("no MCP server \"{id}\" is set up (see `cheng mcp list` and the log above)")));
            };
            let root = workspace_of(&cli.workspace, &state)?;
            let root = std::fs::canonicalize(&root).with_context(|| format!("cannot open {}", root.display()))?;
            let review = server.review(&root, accept).await.map_err(|e| anyhow::anyhow!("MCP server \"{id}\": {e}"))?;
            let mut shown = serde_json::to_value(&review)?;
            // What of a description reaches an agent: the rest is cut (and said so).
            shown["description_cap_chars"] = serde_json::json!(cheng_host::mcp::MAX_DESCRIPTION_CHARS);
            emit(&serde_json::to_string_pretty(&shown)?);
            Ok(if accept || review.diff.is_empty() { 0 } else { EXIT_ERROR })
        }
        // Answered above, before the host started.
        Command::Records { .. }
        | Command::Settings { .. }
        | Command::Plugin { .. }
        | Command::Token { .. }
        | Command::Approvals
        | Command::Approve { .. }
        | Command::Decline { .. } => Ok(0),
    }
}

/// The approver for `cheng call`: an explicit `--approve`, else auto-approve when the
/// saved settings say so (seeded from `CHENG_AUTO_APPROVE=true` at first boot), else the
/// terminal when there is one, else refuse at once.
fn approver_for(mode: Option<ApproveMode>, auto: bool) -> Arc<dyn Approver> {
    match mode {
        Some(ApproveMode::Yes) => Arc::new(tty::AutoApprover),
        Some(ApproveMode::Deny) => Arc::new(tty::DeclineAll),
        Some(ApproveMode::Ask) => {
            tty::TtyApprover::open().map_or_else(|| Arc::new(RefuseAll) as Arc<dyn Approver>, |t| Arc::new(t))
        }
        None if auto => Arc::new(tty::AutoApprover),
        None => match tty::TtyApprover::open() {
            Some(t) => Arc::new(t),
            None => Arc::new(RefuseAll),
        },
    }
}

/// `--http`'s address: `IP:PORT`, or `localhost:PORT` for 127.0.0.1 (never looked up:
/// the name must not decide where the server listens).
fn bind_address(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Some(port) = text.strip_prefix("localhost:") {
        let port: u16 = port.parse().map_err(|_| format!("\"{port}\" is not a port number"))?;
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| format!("\"{text}\" is not IP:PORT (for example 127.0.0.1:8931 or localhost:8931)"))
}
