//! Setting a host up for a command: the configuration, the state directory, the places
//! tools may never write, and who answers approvals — for one call, a person on the
//! terminal or a fixed answer; while serving, the client, the terminal (when the MCP
//! session is not on it), the console, the API and the socket, whichever answers first.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use cheng_host::approvals::{Approver, FirstAnswer, RefuseAll};
use cheng_host::policy::Config;
use cheng_host::{Host, HostBuilder};
use cheng_serve::approver::ClientApprover;

use super::args::{ApproveMode, Cli, Command};
use super::{config_places, settings, tty};

/// A started host, and the approver that asks through MCP clients when serving.
pub struct Started {
    /// The host.
    pub host: Host,
    /// Asks the MCP client, when `[serve] approvals_via_client` is on.
    pub client_approver: Option<Arc<ClientApprover>>,
}

/// Start the host `cli`'s command needs.
pub async fn host(cli: &Cli, config: &Config, state: &Option<PathBuf>) -> Result<Started> {
    let mut builder = HostBuilder::new();
    builder.config(config.clone());
    let saved = match state {
        Some(dir) => settings::Settings::load_or_init(dir)?,
        None => settings::Settings::from_env(),
    };
    if let Some(dir) = state {
        builder.state_dir(dir);
    }
    for place in config_places(cli) {
        builder.protect(place);
    }
    builder.on_compile(|name| {
        let _ = writeln!(
            std::io::stderr(),
            "cheng: compiling the \"{name}\" component (first run only; it is cached afterwards)"
        );
    });
    let serving = matches!(cli.command, Command::Serve { .. });
    let client_approver = (serving && config.serve.approvals_via_client).then(|| Arc::new(ClientApprover::default()));
    match &cli.command {
        Command::Serve { http, stdio, .. } => {
            // The terminal asks only when the MCP session is not on it.
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
            builder.approver(Arc::new(FirstAnswer(paths)));
            // The console, the API and the socket answer too: requests wait for them.
            builder.external_approval_answers(true);
        }
        command => {
            let approve = match command {
                Command::Call { approve, .. } => *approve,
                _ => None,
            };
            builder.approver(approver_for(approve, saved.auto_approve));
            // One call per process: the pooling allocator's set-up would cost more than it saves.
            builder.one_shot();
        }
    }
    let host = builder.build().await.context("cannot start the host")?;
    super::keep_audit_log(&host);
    for e in host.load_errors() {
        eprintln!("cheng: plugin not loaded: {e}");
    }
    Ok(Started { host, client_approver })
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
