//! External MCP servers as tool sources (`[[mcp_servers]]`), confined by the host.
//!
//! A server's tools are registered as `<id>__<tool>`, granted to no role until a role
//! names them, and every call takes the call pipeline like any other tool: the grant,
//! the input checked against the pinned schema, the approval its `approve` setting
//! asks for (a server's annotations never lower it), the record, the per-call timeout
//! (the server is told to cancel), and the output cap. A failure says where it
//! happened ([`SourceError::kind`]): the server could not be started (`spawn_failed`),
//! did not finish its handshake in time (`handshake_timeout`), its tool list could not
//! be read (`refresh_failed`), or its connection failed — it exited, hung up, sent
//! garbage or an oversize message (`transport_error`); the host and the other servers
//! go on.
//!
//! - [`pins`]: definitions hashed and stored the first time they are seen; a changed
//!   one is withheld until `cheng mcp accept ID`.
//! - `conn`: one live connection — the process (`process::mcp_server`, confined
//!   by Landlock on reads and writes and without the network unless granted), MCP
//!   over its stdio through rmcp's client, the host's own framing and bounds.
//! - `call`: the pipeline's stage for these tools.
//!
//! A server runs once per workspace it is used in (its working directory and its
//! filesystem grant are that workspace's), started on the first call there and
//! restarted on a later call after it dies (at once the first time, then with a
//! growing wait). The tools offered are the pinned ones, so listing them needs no
//! running server; only a server never seen before is started when the host is built,
//! in an empty directory, to learn its tools.

pub(crate) mod call;
mod conn;
pub mod pins;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::grant::FsGrant;
use crate::policy::mcp::{DEFAULT_MESSAGE_BYTES, Launch, McpServer};
use crate::process::Spawner;
use crate::process::mcp_server::ServerLaunch;
use crate::runtime::component::ToolSpec;
use cheng_contract::{ErrorKind, FsAccess, Needs};
use conn::Conn;
use pins::{Diff, Pinned, Pins, PinsError};

/// Why a server's tools could not be reached.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// The server could not be started (its command missing, not executable, or refused
    /// by the host's rules; its process or pipes not set up), or its URL not reached.
    #[error("{0}")]
    Start(String),
    /// It did not finish the MCP handshake within its budget.
    #[error("{0}")]
    HandshakeTimeout(String),
    /// The connection failed: the server exited or hung up (during the handshake or a
    /// request), sent what is not JSON-RPC, or a message over the cap.
    #[error("{0}")]
    Transport(String),
    /// The variable its `bearer_env` names is not set.
    #[error("the variable {0} (bearer_env) is not set")]
    BearerUnset(String),
    /// It is running but its tool list could not be read.
    #[error("{0}")]
    Protocol(String),
    /// It stopped, and is started again only after a pause.
    #[error("{why}; it is restarted on a call after {retry_ms} ms")]
    Backoff {
        /// Why it stopped.
        why: String,
        /// How long until the next start is tried, in milliseconds.
        retry_ms: u128,
        /// The kind of the failure that stopped it.
        kind: ErrorKind,
    },
    /// Its pins could not be read or stored.
    #[error(transparent)]
    Pins(#[from] PinsError),
    /// The scratch folder its first listing runs in could not be made.
    #[error("cannot create {}: {source}", path.display())]
    Scratch {
        /// The folder.
        path: PathBuf,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

impl SourceError {
    /// The kind a call fails with when it meets this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            SourceError::Start(_) | SourceError::BearerUnset(_) => ErrorKind::SpawnFailed,
            SourceError::HandshakeTimeout(_) => ErrorKind::HandshakeTimeout,
            SourceError::Transport(_) => ErrorKind::TransportError,
            SourceError::Protocol(_) => ErrorKind::RefreshFailed,
            SourceError::Backoff { kind, .. } => *kind,
            SourceError::Pins(_) | SourceError::Scratch { .. } => ErrorKind::Io,
        }
    }
}

/// The output schema every server tool is offered with: the result's content blocks,
/// its structured content when the server sent one, and whether the cap cut it.
pub fn output_schema() -> serde_json::Value {
    serde_json::json!({
        "type": "object",
        "properties": {
            "content": {"type": "array", "items": {"type": "object"}},
            "structuredContent": {},
            "truncated": {"type": "boolean"}
        },
        "required": ["content", "truncated"]
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A server's connection in one workspace, and how its restarts go.
#[derive(Default)]
struct Slot {
    conn: Option<Arc<Conn>>,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: String,
    last_kind: Option<ErrorKind>,
}

/// The wait before the `n`th restart in a row: none for the first, then 0.5 s
/// doubling to 30 s.
fn backoff(n: u32) -> Duration {
    if n <= 1 { Duration::ZERO } else { Duration::from_millis((500u64 << (n - 2).min(6)).min(30_000)) }
}

/// One configured server.
pub struct Server {
    cfg: McpServer,
    spawner: Arc<Spawner>,
    egress: Arc<crate::egress::Egress>,
    pins_path: Option<PathBuf>,
    pins: Mutex<Pins>,
    live: Mutex<Option<BTreeMap<String, Pinned>>>,
    withheld: Mutex<BTreeMap<String, String>>,
    slots: tokio::sync::Mutex<HashMap<PathBuf, Slot>>,
}

impl Server {
    /// Its id.
    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    /// Its checked configuration.
    pub fn config(&self) -> &McpServer {
        &self.cfg
    }

    /// The command line it is started with, as people read it.
    pub fn display(&self) -> String {
        match &self.cfg.launch {
            Launch::Command { command, args } => {
                shlex::try_join(std::iter::once(command.as_str()).chain(args.iter().map(String::as_str)))
                    .unwrap_or_else(|_| command.clone())
            }
            Launch::Url { url, .. } => url.clone(),
        }
    }

    /// Why `tool` is withheld, if it is.
    pub fn withheld(&self, tool: &str) -> Option<String> {
        lock(&self.withheld).get(tool).cloned()
    }

    /// The tools as pinned, for the registry.
    fn specs(&self) -> Vec<ToolSpec> {
        let fs = match &self.cfg.fs {
            FsGrant::None => FsAccess::None,
            FsGrant::Read => FsAccess::Read,
            FsGrant::Write => FsAccess::Write,
            FsGrant::Scoped { write, .. } if !write.is_empty() => FsAccess::Write,
            FsGrant::Scoped { .. } => FsAccess::Read,
        };
        lock(&self.pins)
            .tools
            .iter()
            .filter(|(name, _)| valid_tool_name(name))
            .map(|(name, p)| {
                let d = &p.definition;
                ToolSpec {
                    name: name.clone(),
                    description: capped_description(d.get("description").and_then(|v| v.as_str()).unwrap_or_default()),
                    input_schema: d.get("inputSchema").cloned().unwrap_or(serde_json::json!({"type": "object"})),
                    output_schema: output_schema(),
                    needs: Needs {
                        fs,
                        spawn: false,
                        network: if self.cfg.net { vec!["*".into()] } else { Vec::new() },
                    },
                }
            })
            .collect()
    }

    /// Start the server in `root` (or reach it, for a URL) and talk MCP to it.
    async fn start(&self, root: &Path) -> Result<Conn, SourceError> {
        let handshake = Duration::from_millis(self.cfg.timeout_ms.max(10_000));
        let (command, args) = match &self.cfg.launch {
            Launch::Url { url, bearer_env } => {
                let bearer = match bearer_env {
                    Some(name) => Some(std::env::var(name).map_err(|_| SourceError::BearerUnset(name.clone()))?),
                    None => None,
                };
                return conn::connect_http(url, bearer, self.egress.clone(), handshake).await;
            }
            Launch::Command { command, args } => (command, args),
        };
        let launch = ServerLaunch {
            command: command.clone(),
            args: args.clone(),
            env: self.cfg.env.clone(),
            root: root.to_path_buf(),
            fs: self.cfg.fs.clone(),
            net: self.cfg.net,
            read: self.cfg.read.clone(),
            etc_withheld: self.cfg.etc_withheld.clone(),
        };
        let process = self.spawner.start_server(&launch).map_err(|e| SourceError::Start(e.to_string()))?;
        tracing::info!(target: "cheng::mcp", server = %self.cfg.id, pid = process.pid, workspace = %root.display(),
            readable = ?process.readable, "started");
        conn::connect(process, handshake, DEFAULT_MESSAGE_BYTES.max(self.cfg.output_bytes * 4)).await
    }

    /// The live connection in `root`, started (or restarted) when there is none.
    async fn conn(&self, root: &Path) -> Result<Arc<Conn>, SourceError> {
        let mut slots = self.slots.lock().await;
        let slot = slots.entry(root.to_path_buf()).or_default();
        if let Some(c) = &slot.conn {
            if c.alive() {
                return Ok(c.clone());
            }
            slot.failures += 1;
            slot.last_error = c.why("the server stopped");
            slot.last_kind = Some(ErrorKind::TransportError);
            slot.retry_at = Some(Instant::now() + backoff(slot.failures));
            slot.conn = None;
        }
        if let Some(at) = slot.retry_at {
            let now = Instant::now();
            if now < at {
                return Err(SourceError::Backoff {
                    why: slot.last_error.clone(),
                    retry_ms: (at - now).as_millis(),
                    kind: slot.last_kind.unwrap_or(ErrorKind::TransportError),
                });
            }
        }
        match self.start(root).await {
            Ok(c) => {
                let c = Arc::new(c);
                slot.conn = Some(c.clone());
                slot.retry_at = None;
                drop(slots);
                self.refresh(&c).await?;
                Ok(c)
            }
            Err(e) => {
                slot.failures += 1;
                slot.last_error = e.to_string();
                slot.last_kind = Some(e.kind());
                slot.retry_at = Some(Instant::now() + backoff(slot.failures.max(2)));
                Err(e)
            }
        }
    }

    /// A call through `root`'s connection went well: restarts start over.
    async fn succeeded(&self, root: &Path) {
        if let Some(slot) = self.slots.lock().await.get_mut(root) {
            slot.failures = 0;
        }
    }

    /// List the server's tools now and withhold every pinned one whose definition
    /// differs (or that is gone). The first list of a server without pins pins them.
    /// A refresh that fails leaves the list to be read again before the next call.
    async fn refresh(&self, c: &Conn) -> Result<Diff, SourceError> {
        c.watch.list_changed.store(false, std::sync::atomic::Ordering::SeqCst);
        let done = self.take_list(c).await;
        if done.is_err() {
            c.watch.list_changed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        done
    }

    /// The listing and what follows from it, for [`Server::refresh`].
    async fn take_list(&self, c: &Conn) -> Result<Diff, SourceError> {
        let live = c.list().await.map_err(SourceError::Protocol)?;
        let first = lock(&self.pins).tools.is_empty() && !self.pins_path.as_ref().is_some_and(|p| p.exists());
        if first {
            let pins = Pins { tools: live.clone() };
            if let Some(path) = &self.pins_path {
                pins::save(path, &pins)?;
            }
            *lock(&self.pins) = pins;
        }
        let diff = pins::diff(&lock(&self.pins), &live);
        let mut withheld = BTreeMap::new();
        for name in diff.changed.keys() {
            withheld.insert(name.clone(), "its definition changed since the operator accepted it".to_string());
        }
        for name in &diff.removed {
            withheld.insert(name.clone(), "the server no longer offers it".to_string());
        }
        {
            let mut w = lock(&self.withheld);
            for (name, why) in &withheld {
                if !w.contains_key(name) {
                    tracing::warn!(target: "cheng::mcp", server = %self.cfg.id, tool = %name,
                        "tool withheld: {why}; review it with `cheng mcp diff {}` and take it with `cheng mcp accept {}`",
                        self.cfg.id, self.cfg.id);
                }
            }
            *w = withheld;
        }
        if !diff.added.is_empty() {
            tracing::info!(target: "cheng::mcp", server = %self.cfg.id, tools = ?diff.added,
                "the server offers tools nobody accepted yet; `cheng mcp accept {}` takes them", self.cfg.id);
        }
        *lock(&self.live) = Some(live);
        Ok(diff)
    }
}

/// Whether an MCP tool name can be offered (as `<id>__<name>`).
fn valid_tool_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Every configured server.
#[derive(Default)]
pub struct Hub {
    servers: BTreeMap<String, Arc<Server>>,
}

/// What an operator command found: the server's tools now against the accepted ones.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Review {
    /// The server.
    pub server: String,
    /// The command line.
    pub command: String,
    /// What differs.
    #[serde(flatten)]
    pub diff: Diff,
    /// Whether the new definitions were taken (`cheng mcp accept`).
    pub accepted: bool,
}

impl Hub {
    /// Set up every server of `configs`: read its pins, and start a server never seen
    /// before once (in an empty directory) to learn and pin its tools. A server that
    /// cannot be set up is a load error; the others work.
    pub(crate) async fn new(
        configs: Vec<McpServer>,
        spawner: Arc<Spawner>,
        egress: Arc<crate::egress::Egress>,
        state: Option<&Path>,
        errors: &mut Vec<String>,
    ) -> Hub {
        let mut servers = BTreeMap::new();
        for cfg in configs {
            let id = cfg.id.clone();
            let pins_path = state.map(|s| pins::path(s, &id));
            let pins = match pins_path.as_deref().map(pins::load) {
                Some(Err(e)) => {
                    errors.push(format!("MCP server \"{id}\": {e}"));
                    continue;
                }
                Some(Ok(p)) => p,
                None => None,
            };
            let known = pins.is_some();
            let server = Arc::new(Server {
                cfg,
                spawner: spawner.clone(),
                egress: egress.clone(),
                pins_path,
                pins: Mutex::new(pins.unwrap_or_default()),
                live: Mutex::new(None),
                withheld: Mutex::new(BTreeMap::new()),
                slots: tokio::sync::Mutex::new(HashMap::new()),
            });
            if !known && let Err(e) = server.discover().await {
                errors.push(format!("MCP server \"{id}\": its tools could not be listed: {e}"));
                continue;
            }
            servers.insert(id, server);
        }
        Hub { servers }
    }

    /// The server called `id`.
    pub fn get(&self, id: &str) -> Option<&Arc<Server>> {
        self.servers.get(id)
    }

    /// Every server with its tools as pinned, for the registry.
    pub(crate) fn tools(&self) -> Vec<(Arc<Server>, Vec<ToolSpec>)> {
        self.servers.values().map(|s| (s.clone(), s.specs())).collect()
    }
}

impl Server {
    /// Start the server once in an empty directory and pin what it lists.
    async fn discover(&self) -> Result<(), SourceError> {
        let dir = std::env::temp_dir().join(format!("cheng-mcp-discover-{}-{}", std::process::id(), crate::new_id()));
        std::fs::create_dir(&dir).map_err(|source| SourceError::Scratch { path: dir.clone(), source })?;
        let result = async {
            let c = self.start(&dir).await?;
            self.refresh(&c).await.map(|_| ())
        }
        .await;
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    /// Compare the server's tools now (started in `root`) with the accepted ones; with
    /// `accept`, take them as the new pins.
    pub async fn review(&self, root: &Path, accept: bool) -> Result<Review, SourceError> {
        let c = self.start(root).await?;
        let diff = self.refresh(&c).await?;
        if accept {
            let live = lock(&self.live).clone().unwrap_or_default();
            let pins = Pins { tools: live };
            if let Some(path) = &self.pins_path {
                pins::save(path, &pins)?;
            }
            *lock(&self.pins) = pins;
            lock(&self.withheld).clear();
        }
        Ok(Review { server: self.cfg.id.clone(), command: self.display(), diff, accepted: accept })
    }
}

/// The longest description of a server's tool that reaches an agent, in characters:
/// every description is read by every agent session, and a server's text is not the
/// operator's (`cheng mcp diff` shows the cap).
pub const MAX_DESCRIPTION_CHARS: usize = 2048;

/// A server's description, cut to [`MAX_DESCRIPTION_CHARS`] with the cut said.
pub fn capped_description(text: &str) -> String {
    match text.chars().count() > MAX_DESCRIPTION_CHARS {
        false => text.to_string(),
        true => format!(
            "{} [description cut at {MAX_DESCRIPTION_CHARS} of {} characters]",
            cheng_contract::text::cut_chars(text, MAX_DESCRIPTION_CHARS),
            text.chars().count()
        ),
    }
}
