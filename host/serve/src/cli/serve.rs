//! `cheng serve`: the tools over MCP on stdio, streamable HTTP, or both, until SIGTERM
//! or SIGINT, after which what runs is cancelled and the audit log flushed.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use cheng_host::Host;
use cheng_host::policy::Config;
use cheng_serve::approver::ClientApprover;
use cheng_serve::workspace::WorkspaceChoice;
use cheng_serve::{ServeError, ServeOptions};

use super::args::Cli;
use super::{UsageError, known_role, need_state};

/// What `cheng serve` was asked for.
pub struct Serve {
    /// `--http ADDR`.
    pub http: Option<std::net::SocketAddr>,
    /// `--stdio`.
    pub stdio: bool,
    /// `--allow-remote`.
    pub allow_remote: bool,
}

/// Serve until a signal.
pub async fn serve(
    cli: &Cli,
    config: &Config,
    state: &Option<PathBuf>,
    host: Host,
    client_approver: Option<Arc<ClientApprover>>,
    asked: Serve,
) -> Result<u8> {
    let state_dir = need_state(state)?;
    let workspace = match &cli.workspace {
        Some(w) => WorkspaceChoice::given(w),
        None => WorkspaceChoice::from_roots(&config.serve.workspaces, &state_dir).map_err(|e| UsageError(e.0))?,
    };
    if asked.http.is_some() && cli.workspace.is_none() && config.serve.workspaces.is_empty() {
        bail!(UsageError(
            "cheng serve --http needs a workspace: give --workspace DIR, or list the directories sessions may choose \
             from their roots in [serve] workspaces (tokens may be pinned to one with `cheng token add --role R \
             --workspace DIR`)"
                .into()
        ));
    }
    let role = cli.role.clone().unwrap_or_else(|| host.policy().default_role().to_string());
    known_role(host.policy(), &role)?;
    let opts = ServeOptions {
        stdio: asked.stdio || asked.http.is_none(),
        http: asked.http,
        allow_remote: asked.allow_remote,
        workspace,
        role,
        state_dir,
    };
    // SIGTERM and SIGINT: stop accepting, cancel what runs, flush the log, exit 0.
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        // Never `eprintln!` here: with stderr's reader gone it would panic and the
        // server would never stop.
        let _ = writeln!(std::io::stderr(), "cheng: shutting down");
        stop.cancel();
    });
    if let Err(e) = cheng_serve::serve(host.clone(), opts, client_approver, shutdown).await {
        if matches!(e, ServeError::Remote(_)) {
            bail!(UsageError(e.to_string()));
        }
        return Err(e.into());
    }
    if let Some(log) = host.audit_log() {
        log.flush().context("cannot flush the audit log")?;
    }
    host.flush_telemetry();
    Ok(0)
}
