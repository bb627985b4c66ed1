//! `[[mcp_servers]]`: external MCP servers whose tools the host offers as its own, each
//! started by the host under confinement. This module only reads and checks the
//! entries; the MCP sources run the servers.
//!
//! ```toml
//! [[mcp_servers]]
//! id = "files"                 # its tools are named files__<tool>
//! command = "node"             # found on the host's PATH, as for workspace_shell
//! args = ["/opt/mcp/server-filesystem/dist/index.js", "."]
//! env = ["NODE_ENV"]           # names passed from the host's environment
//! fs = "read"                  # "none" | "read" | "write" | { read = [...], write = [...] }
//! net = false                  # true: the server keeps the network
//! approve = "always"           # "always" | "never" | ["tool_a", "tool_b"] (those ask)
//! timeout_ms = 30000           # per call
//! ```

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::FsGrantConfig;
use crate::grant::FsGrant;

/// Default per-call budget of an MCP server's tool, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 30_000;
/// Default cap on the text of one result, in bytes (head and tail kept past it).
pub const DEFAULT_OUTPUT_BYTES: usize = 256 * 1024;
/// Default cap on one JSON-RPC message from a server, in bytes.
pub const DEFAULT_MESSAGE_BYTES: usize = 16 << 20;

/// Files under `/etc` a server never reads, whatever else it is given: password and
/// group shadows, SSH host keys, sudo rules, TLS private keys and the like.
pub const ETC_WITHHELD: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "ssh",
    "sudoers",
    "sudoers.d",
    "ssl/private",
    "security/opasswd",
    "machine-id",
    "krb5.keytab",
    "credstore",
    "credstore.encrypted",
    "wireguard",
    "NetworkManager/system-connections",
];

/// One `[[mcp_servers]]` entry, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Its id: `[a-z][a-z0-9-]{0,15}`; its tools are registered as `<id>__<tool>`.
    pub id: String,
    /// The program, found on the host's `PATH` when it has no `/`.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// A streamable-HTTP server's address (`http://`) instead of a command; it is
    /// reached through the web egress guard (`[web]`).
    pub url: Option<String>,
    /// For `url`: the environment variable holding a bearer token to send.
    pub bearer_env: Option<String>,
    /// Environment variables passed from the host's environment, by name.
    #[serde(default)]
    pub env: Vec<String>,
    /// What of the workspace it may read and write.
    #[serde(default)]
    pub fs: FsGrantConfig,
    /// Whether it keeps the network (`false`: a network namespace with only loopback,
    /// or no TCP at all where namespaces are unavailable).
    #[serde(default)]
    pub net: NetSetting,
    /// Which of its tools ask a person first.
    #[serde(default)]
    pub approve: ApproveSetting,
    /// Per-call budget in milliseconds.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Cap on the text of one result, in bytes.
    #[serde(default = "default_output")]
    pub output_bytes: usize,
    /// More directories (absolute, or `~/…`) it may read and execute from: where it is
    /// installed, when that is not found from `command` and `args`.
    #[serde(default)]
    pub read: Vec<String>,
    /// Paths under `/etc` (relative to it) withheld on top of [`ETC_WITHHELD`].
    #[serde(default)]
    pub etc_withheld: Vec<String>,
}

/// `net`: a boolean (a host list cannot be enforced on a native process).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum NetSetting {
    /// `true` or `false`.
    Flag(bool),
    /// A list of hosts (refused: see [`McpServerConfig::check`]).
    Hosts(Vec<String>),
    /// Not given: no network.
    #[default]
    #[serde(skip)]
    Unset,
}

/// `approve`: which calls ask a person.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum ApproveSetting {
    /// `"always"` or `"never"`.
    Word(String),
    /// These tools ask; the others do not.
    Tools(Vec<String>),
}

impl Default for ApproveSetting {
    fn default() -> Self {
        ApproveSetting::Word("always".into())
    }
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}
fn default_output() -> usize {
    DEFAULT_OUTPUT_BYTES
}

/// How the host reaches a server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Launch {
    /// A program it starts, speaking MCP on stdin and stdout.
    Command {
        /// As written (resolved on the host's `PATH` when started).
        command: String,
        /// Its arguments.
        args: Vec<String>,
    },
    /// A streamable-HTTP endpoint.
    Url {
        /// The endpoint.
        url: String,
        /// The variable with the bearer token.
        bearer_env: Option<String>,
    },
}

/// A checked entry: what the MCP sources run.
#[derive(Debug, Clone)]
pub struct McpServer {
    /// Its id.
    pub id: String,
    /// How it is reached.
    pub launch: Launch,
    /// Variables passed by name.
    pub env: Vec<String>,
    /// Its workspace grant.
    pub fs: FsGrant,
    /// Whether it keeps the network.
    pub net: bool,
    /// Which tools ask.
    pub approve: Approve,
    /// Per-call budget.
    pub timeout_ms: u64,
    /// Result text cap.
    pub output_bytes: usize,
    /// Extra readable directories, absolute.
    pub read: Vec<PathBuf>,
    /// Everything under `/etc` withheld, relative to it.
    pub etc_withheld: Vec<String>,
}

/// Which calls of a server's tools ask a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approve {
    /// Every call.
    Always,
    /// None.
    Never,
    /// Calls of these tools (names as the server gives them).
    Tools(Vec<String>),
}

impl Approve {
    /// Whether a call of `tool` asks.
    pub fn asks(&self, tool: &str) -> bool {
        match self {
            Approve::Always => true,
            Approve::Never => false,
            Approve::Tools(t) => t.iter().any(|x| x == tool),
        }
    }
}

impl McpServerConfig {
    /// Check the entry; `base` is the configuration file's directory.
    pub fn check(&self, base: &Path) -> Result<McpServer, crate::SettingError> {
        self.checked(base).map_err(crate::SettingError)
    }

    fn checked(&self, base: &Path) -> Result<McpServer, String> {
        let id = &self.id;
        if !super::valid_plugin_id(id) {
            return Err(format!("[[mcp_servers]] id \"{id}\" must match [a-z][a-z0-9-]{{0,15}}"));
        }
        let who = format!("MCP server \"{id}\"");
        let launch = match (&self.command, &self.url) {
            (Some(c), None) if !c.trim().is_empty() => Launch::Command { command: c.clone(), args: self.args.clone() },
            (None, Some(u)) => {
                if !self.args.is_empty() {
                    return Err(format!("{who}: `args` goes with `command`, not `url`"));
                }
                let parsed = url::Url::parse(u).map_err(|e| format!("{who}: url \"{u}\" is not a URL: {e}"))?;
                if parsed.scheme() != "http" {
                    return Err(format!(
                        "{who}: url \"{u}\" must be http:// (https:// servers are not reached yet: start the server \
                         as a command, or put it behind a local http:// endpoint)"
                    ));
                }
                Launch::Url { url: u.clone(), bearer_env: self.bearer_env.clone() }
            }
            (Some(_), Some(_)) => return Err(format!("{who}: give either `command` or `url`, not both")),
            _ => return Err(format!("{who}: give `command` (a program to start) or `url`")),
        };
        if self.bearer_env.is_some() && !matches!(launch, Launch::Url { .. }) {
            return Err(format!("{who}: `bearer_env` goes with `url`"));
        }
        let fs = match &self.fs {
            FsGrantConfig::Simple(s) if s == "none" => FsGrant::None,
            FsGrantConfig::Simple(s) if s == "read" => FsGrant::Read,
            FsGrantConfig::Simple(s) if s == "write" => FsGrant::Write,
            FsGrantConfig::Simple(s) => {
                return Err(format!(
                    "{who}: fs = \"{s}\" is not none, read, write, or {{ read = [...], write = [...] }}"
                ));
            }
            FsGrantConfig::Scoped { read, write } => FsGrant::Scoped {
                read: read.iter().map(|f| super::check_grant_folder(&who, f, false)).collect::<Result<_, _>>()?,
                write: write.iter().map(|f| super::check_grant_folder(&who, f, true)).collect::<Result<_, _>>()?,
            },
        };
        let net = match &self.net {
            NetSetting::Flag(b) => *b,
            NetSetting::Unset => false,
            NetSetting::Hosts(_) => {
                return Err(format!(
                    "{who}: net = [hosts] cannot be enforced on a program the host starts (it would reach every host \
                     the machine can); write net = true to give it the network, or net = false"
                ));
            }
        };
        let approve = match &self.approve {
            ApproveSetting::Word(w) if w == "always" => Approve::Always,
            ApproveSetting::Word(w) if w == "never" => Approve::Never,
            ApproveSetting::Word(w) => {
                return Err(format!("{who}: approve = \"{w}\" is not \"always\", \"never\" or a list of tools"));
            }
            ApproveSetting::Tools(t) => Approve::Tools(t.clone()),
        };
        if self.timeout_ms == 0 || self.timeout_ms > super::process::MAX_TIMEOUT_MS {
            return Err(format!("{who}: timeout_ms must be between 1 and {} (ms)", super::process::MAX_TIMEOUT_MS));
        }
        if self.output_bytes < 1024 || self.output_bytes > 64 << 20 {
            return Err(format!("{who}: output_bytes must be between 1024 and 67108864"));
        }
        for name in &self.env {
            if super::process::host_owned_env(name) || name.is_empty() || name.contains('=') {
                return Err(format!(
                    "{who}: env \"{name}\" cannot be passed (the host sets PATH, HOME, TMPDIR and XDG_*)"
                ));
            }
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut read = Vec::new();
        for r in &self.read {
            let p = match (r.strip_prefix("~/"), &home) {
                (Some(rest), Some(h)) => h.join(rest),
                _ => base.join(r),
            };
            if !p.is_absolute() || p == Path::new("/") {
                return Err(format!("{who}: read = \"{r}\" must be an absolute directory other than /"));
            }
            read.push(p);
        }
        for w in &self.etc_withheld {
            if w.starts_with('/') || w.split('/').any(|c| c == "..") {
                return Err(format!("{who}: etc_withheld \"{w}\" must be relative to /etc"));
            }
        }
        let mut etc_withheld: Vec<String> = ETC_WITHHELD.iter().map(|s| s.to_string()).collect();
        etc_withheld.extend(self.etc_withheld.iter().cloned());
        Ok(McpServer {
            id: id.clone(),
            launch,
            env: self.env.clone(),
            fs,
            net,
            approve,
            timeout_ms: self.timeout_ms,
            output_bytes: self.output_bytes,
            read,
            etc_withheld,
        })
    }
}
