//! The `cheng` command line, one file per group of commands: [`args`] (what clap
//! parses), [`offline`] (commands that need no host: records, plugins — with
//! [`plugin`] for OCI pulls —, approvals over the socket, tokens, settings), [`start`]
//! (setting a host up for a command), [`call`] (`tools` and `call`), [`serve`] and [`mcp`]; [`tty`] (in the library, where its
//! unit test runs) answers approvals on the terminal and [`settings`] holds what `cheng settings` saves.
//! The helpers every command shares are here.

pub mod args;
pub mod call;
pub mod mcp;
pub mod offline;
pub mod plugin;
pub mod serve;
pub mod settings;
pub mod start;
pub use cheng_serve::tty;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Result, bail};
use cheng_host::policy::Config;

use args::Cli;

/// A tool failed, or a command did.
pub const EXIT_ERROR: u8 = 1;
/// A tool call was denied.
pub const EXIT_DENIED: u8 = 2;
/// The command was invoked wrongly.
pub const EXIT_USAGE: u8 = 64;

/// The audit log of the host this process started: every way out of the process
/// brings its head file up to the last record written (see [`flush_audit_log`]).
static AUDIT: std::sync::OnceLock<cheng_host::records::AuditLog> = std::sync::OnceLock::new();

/// Remember `host`'s audit log for [`flush_audit_log`].
pub fn keep_audit_log(host: &cheng_host::Host) {
    if let Some(log) = host.audit_log() {
        let _ = AUDIT.set(log.clone());
    }
}

/// Make the records this process wrote durable and bring the head file up to the last
/// of them: on every way out — a command's end (ok, error, denial), a second signal, a
/// panic. A failure is said on stderr (never `eprintln!`: a closed stderr must not panic
/// here).
pub fn flush_audit_log() {
    let Some(log) = AUDIT.get() else { return };
    if let Err(e) = log.flush_at_exit(std::time::Duration::from_secs(2)) {
        let _ = writeln!(std::io::stderr(), "cheng: {e}");
    }
}

/// Write one document to stdout. A reader that went away (a closed pipe) is not an
/// error worth a panic: the output is simply not wanted any more.
pub fn emit(doc: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{doc}").and_then(|_| out.flush());
}

/// Write `value` to stdout as one pretty-printed JSON document.
pub fn emit_json(value: &impl serde::Serialize) -> Result<()> {
    emit(&serde_json::to_string_pretty(value)?);
    Ok(())
}

/// An error in how cheng was invoked (exit 64).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Logs on stderr, filtered by `CHENG_LOG`. Every field is written as one line with
/// control characters escaped, since fields carry text from tool arguments (an escape
/// sequence in a command must not retitle or clear the operator's terminal); colours
/// only when stderr is a terminal.
pub fn init_logging() {
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
pub fn config_places(cli: &Cli) -> Vec<PathBuf> {
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
pub fn load_config(cli: &Cli) -> Result<Config> {
    let usage = |e: cheng_host::policy::ConfigError| UsageError(e.to_string());
    if let Some(path) = &cli.config {
        return Ok(Config::load(path).map_err(usage)?);
    }
    if let Some(path) = std::env::var_os("CHENG_CONFIG") {
        return Ok(Config::load(&PathBuf::from(path)).map_err(usage)?);
    }
    match config_places(cli).last() {
        // Whatever is there is loaded (and a FIFO, device or oversized file refused by
        // name), not passed over as if missing.
        Some(path) if std::fs::metadata(path).is_ok() => Ok(Config::load(path).map_err(usage)?),
        _ => Ok(Config::default()),
    }
}

/// The state directory: `--state-dir`, else the platform's state (or local data) dir.
pub fn state_dir(cli: &Cli) -> Option<PathBuf> {
    if let Some(d) = &cli.state_dir {
        return Some(d.clone());
    }
    let dirs = directories::BaseDirs::new()?;
    let base = dirs.state_dir().unwrap_or(dirs.data_local_dir());
    Some(base.join("cheng"))
}

/// The state directory a command needs (a usage error without one).
pub fn need_state(state: &Option<PathBuf>) -> Result<PathBuf> {
    Ok(state.clone().ok_or_else(|| UsageError("no state directory; pass --state-dir".into()))?)
}

/// The workspace: `--workspace` (absolute and resolved, as records name it), else the
/// current directory — unless that is `/`, the home, or holds the home or the state dir
/// (refused with how to give one).
pub fn workspace_of(workspace: &Option<PathBuf>, state: &Option<PathBuf>) -> Result<PathBuf> {
    match workspace {
        Some(w) => Ok(cheng_serve::workspace::resolve_given(w)),
        None => {
            let state = state.clone().unwrap_or_default();
            Ok(cheng_serve::workspace::current_dir_default(&state).map_err(|e| UsageError(e.0))?)
        }
    }
}

/// `role` must be one the policy defines (a usage error naming the roles otherwise).
pub fn known_role(policy: &cheng_host::policy::Policy, role: &str) -> Result<()> {
    if !policy.has_role(role) {
        let roles: Vec<_> = policy.role_names().collect();
        bail!(UsageError(format!("unknown role \"{role}\"; roles: {}", roles.join(", "))));
    }
    Ok(())
}
