//! `cheng serve`: the host as an MCP server, over stdio (what local clients launch) and
//! streamable HTTP at `/mcp`, in one process if asked. The server adds transports and
//! credentials, never policy: every tool call is one [`cheng_host::Host::call`].
//!
//! - [`mcp`]: the MCP handler (tools per role, calls, progress, cancellation, limits);
//! - [`http`]: the HTTP gate (Host, Origin, bearer token → role) and the axum server;
//! - [`tokens`]: the bearer tokens (hashed, constant-time, revocable);
//! - [`approver`]: approvals answered through the client, as elicitations;
//! - `api`: the operator API and the console page (see `docs/api.md`);
//! - [`socket`]: `cheng approvals` / `approve` / `decline` on a Unix socket;
//! - [`workspace`]: which directory a session works in (given, pinned, or from roots);
//! - [`tty`]: approvals answered on the terminal, for the command line.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use cheng_serve::{ServeOptions, serve};
//!
//! let host = cheng_host::HostBuilder::new().build().await?;
//! let opts = ServeOptions {
//!     stdio: false,
//!     http: Some("127.0.0.1:8931".parse()?),
//!     allow_remote: false,
//!     workspace: cheng_serve::workspace::WorkspaceChoice::Given("/path/to/project".into()),
//!     role: "developer".into(),
//!     state_dir: "/var/lib/cheng".into(),
//! };
//! serve(host, opts, None, tokio_util::sync::CancellationToken::new()).await?;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub(crate) mod api;
pub mod approver;
pub mod http;
pub mod listed;
pub mod mcp;
mod peer;
pub mod socket;
pub mod tokens;
pub mod tty;
pub mod workspace;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use cheng_host::Host;

/// What to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Speak MCP on stdin and stdout.
    pub stdio: bool,
    /// Serve streamable HTTP on this address, at `/mcp`.
    pub http: Option<SocketAddr>,
    /// Allow a non-loopback HTTP address (with TLS in front).
    pub allow_remote: bool,
    /// Where sessions work: a given workspace, or one chosen from each client's roots.
    pub workspace: workspace::WorkspaceChoice,
    /// The role of the stdio client.
    pub role: String,
    /// The state directory (tokens, access log).
    pub state_dir: PathBuf,
}

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// A socket or stream failed. Transparent: its message is said once (a `{0}` message
    /// with the error also as the source was printed twice in a chain).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A non-loopback address without `--allow-remote`.
    #[error("{0}")]
    Remote(String),
    /// The MCP session over stdio failed.
    #[error("the MCP session over stdio failed: {0}")]
    Stdio(String),
    /// The token store (`tokens.json`) cannot be read: HTTP is not served without it.
    #[error(transparent)]
    Tokens(#[from] tokens::TokenError),
}

/// Serve until `shutdown` fires — or, with stdio, until the stdio client goes away.
/// `approver`: the client-elicitation approval path, when the host's approver includes
/// it.
pub async fn serve(
    host: Host,
    opts: ServeOptions,
    approver: Option<Arc<approver::ClientApprover>>,
    shutdown: CancellationToken,
) -> Result<(), ServeError> {
    let config = host.config().serve.clone();
    let mut tasks = tokio::task::JoinSet::new();
    // The tools are listed from their recorded descriptions at once; their code is
    // compiled now, beside the first requests, so the first call of each does not wait.
    let warm = host.clone();
    tokio::task::spawn_blocking(move || tokio::runtime::Handle::current().block_on(warm.warm_up()));
    let mut hint = format!(
        "Answer it with `cheng --state-dir {dir} approve {{id}}` (or `decline {{id}}`) in a terminal",
        dir = opts.state_dir.display()
    );
    let mut reach = vec![format!("`cheng --state-dir {} approvals`", opts.state_dir.display())];
    let mut listener = None;
    if let Some(addr) = opts.http {
        http::check_bind(addr, opts.allow_remote)?;
        // Every request is checked against the token store: one that cannot be read (not
        // a regular file, over its cap, damaged) stops the start rather than each request.
        tokens::TokenStore::new(&opts.state_dir).list()?;
        let l = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}")))?;
        let bound = l.local_addr()?;
        hint.push_str(&format!(", or in the console at http://{bound}/"));
        reach.push(format!("the console at http://{bound}/"));
        listener = Some((l, bound));
    }
    if approver.is_some() {
        reach.push("the client (elicitation)".into());
    }
    hint.push('.');
    if opts.stdio {
        eprintln!(
            "cheng: serving MCP on stdio as role \"{}\"; workspace: {}; state: {}; approvals: {}",
            opts.role,
            opts.workspace.describe(true),
            opts.state_dir.display(),
            reach.join(", ")
        );
    }
    if let Some((listener, bound)) = listener {
        eprintln!("cheng: serving MCP over HTTP at http://{bound}/mcp");
        eprintln!(
            "cheng: HTTP sessions work in {}; roles come from their tokens; state: {}; approvals: {}",
            opts.workspace.describe(false),
            opts.state_dir.display(),
            reach.join(", ")
        );
        let mcp = mcp::ChengMcp::new(
            host.clone(),
            opts.workspace.clone(),
            None,
            config.clone(),
            approver.clone(),
            hint.clone(),
        );
        eprintln!(
            "cheng: operator console at http://{bound}/ (sign in with an operator token: cheng token add --operator)"
        );
        let gate = http::Gate::new(bound, &opts.state_dir, &config);
        let (cfg, stop, h) = (config.clone(), shutdown.clone(), host.clone());
        tasks.spawn(async move { http::serve(listener, h, mcp, gate, &cfg, stop).await });
    }
    if opts.stdio {
        let mcp = mcp::ChengMcp::new(
            host.clone(),
            opts.workspace.clone(),
            Some(opts.role.clone()),
            config.clone(),
            approver,
            hint,
        );
        let stop = shutdown.clone();
        tasks.spawn(async move {
            let running =
                mcp.serve_with_ct(stdio(), stop.child_token()).await.map_err(|e| ServeError::Stdio(e.to_string()))?;
            let ended = running.waiting().await.map_err(|e| ServeError::Stdio(e.to_string()));
            // The stdio client launched this process: when it goes, everything stops.
            stop.cancel();
            ended.map(|_| ())
        });
    }
    {
        let (h, dir, stop) = (host.clone(), opts.state_dir.clone(), shutdown.clone());
        tasks.spawn(async move {
            // Without the socket, approvals still come through the client, the API and
            // the console: a warning, not a reason to stop serving.
            if let Err(e) = socket::serve(h, &dir, stop).await {
                tracing::warn!(target: "cheng::server", "the approvals socket in {}: {e}", socket::dir(&dir).display());
                eprintln!("cheng: warning: no approvals socket ({e}); `cheng approve` will not reach this server");
            }
            Ok(())
        });
    }
    let mut first_error = None;
    while let Some(done) = tasks.join_next().await {
        let r = done.unwrap_or_else(|e| Err(ServeError::Stdio(format!("a server task failed: {e}"))));
        if let Err(e) = r {
            shutdown.cancel();
            first_error.get_or_insert(e);
        }
    }
    // The calls in flight were cancelled with the sessions: each is given time to settle
    // — its command stopped, its record written — before the process may exit, so a
    // client that closes stdin mid-call loses no record.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while host.observer().active_runs() > 0 && std::time::Instant::now() < until {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The MCP session's stdin and stdout. A pipe (what a client that launches the server
/// hands it) is read or written through the reactor, sparing every message a hand-off to
/// tokio's blocking threads; a terminal or a file goes through tokio's stdin and stdout.
/// Nothing else in the process writes to stdout while it serves.
fn stdio() -> (Box<dyn tokio::io::AsyncRead + Send + Unpin>, Box<dyn tokio::io::AsyncWrite + Send + Unpin>) {
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::os::unix::fs::FileTypeExt;
    use tokio::net::unix::pipe;
    let fifo = |fd: BorrowedFd<'_>| -> Option<OwnedFd> {
        let owned = fd.try_clone_to_owned().ok()?;
        let meta = std::fs::File::from(owned.try_clone().ok()?).metadata().ok()?;
        meta.file_type().is_fifo().then_some(owned)
    };
    let reader: Box<dyn tokio::io::AsyncRead + Send + Unpin> =
        match fifo(std::io::stdin().as_fd()).map(pipe::Receiver::from_owned_fd) {
            Some(Ok(rx)) => Box::new(rx),
            _ => Box::new(tokio::io::stdin()),
        };
    let writer: Box<dyn tokio::io::AsyncWrite + Send + Unpin> =
        match fifo(std::io::stdout().as_fd()).map(pipe::Sender::from_owned_fd) {
            Some(Ok(tx)) => Box::new(tx),
            _ => Box::new(tokio::io::stdout()),
        };
    (reader, writer)
}
