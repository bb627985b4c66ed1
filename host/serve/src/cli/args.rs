//! The command line's shape: global options and every command with its arguments, as
//! clap parses them.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser, Debug)]
#[command(name = "cheng", version, about = "A WebAssembly-component tool host for AI agents")]
pub struct Cli {
    /// The workspace (project directory) tools work in.
    #[arg(long, global = true, value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Configuration file (else $CHENG_CONFIG, else the platform config dir's cheng/cheng.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// State directory: component cache, per-run data, audit log.
    #[arg(long, global = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Role to call tools as (else the config's default_role, else developer).
    #[arg(long, global = true)]
    pub role: Option<String>,
    /// Run id (else a fresh one).
    #[arg(long, global = true)]
    pub run: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
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
    /// keeps one run's. `records verify` checks the log's hash chain instead.
    Records {
        #[command(subcommand)]
        action: Option<RecordsCommand>,
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
    /// Plugin components: inspect a file; pull, compare and accept OCI components.
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
    /// Approve a pending request of a running `cheng serve`: confined, with the hosts
    /// its card proposes, unless told otherwise.
    Approve {
        /// The request's id (from `cheng approvals`); with `--all-of-run`, a run's id.
        id: String,
        /// How long the answer holds: `once` (the default), `run` (the same command
        /// prefix for the rest of this run), `always` (saved as a learned rule).
        #[arg(long = "for", value_name = "SCOPE", default_value = "once", value_parser = ["once", "run", "always"])]
        scope: String,
        /// The tier: `confined`, `hosts` (confined + the hosts given or proposed), or
        /// `full` (everything the host's user can read, the whole network; once only).
        #[arg(long, value_parser = ["confined", "hosts", "full"])]
        tier: Option<String>,
        /// The hosts it may reach (comma-separated names or `*.domain` patterns).
        #[arg(long, value_delimiter = ',')]
        hosts: Option<Vec<String>>,
        /// For `--for run|always`: how many words of the command the rule keeps (the
        /// card lists the choices; the program is the first word).
        #[arg(long)]
        prefix: Option<usize>,
        /// For `--for always`: in every workspace, not only the card's.
        #[arg(long)]
        every_workspace: bool,
        /// For `--for always`: the rule ends after this many hours.
        #[arg(long, value_name = "HOURS")]
        expires_in_hours: Option<u64>,
        /// Answer every request the run `ID` waits on.
        #[arg(long)]
        all_of_run: bool,
    },
    /// Decline a pending request of a running `cheng serve`.
    Decline {
        /// The request's id (from `cheng approvals`); with `--all-of-run`, a run's id.
        id: String,
        /// What the agent should do instead; it reaches the model with the refusal.
        #[arg(long)]
        message: Option<String>,
        /// Decline every request the run `ID` waits on.
        #[arg(long)]
        all_of_run: bool,
    },
    /// The learned rules: answers "always" saved in the state directory.
    Rules {
        #[command(subcommand)]
        action: Option<RulesCommand>,
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
pub enum McpCommand {
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
pub enum TokenCommand {
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
pub enum StatusArg {
    Ok,
    Error,
    Denied,
    Running,
}

#[derive(Subcommand, Debug)]
pub enum PluginCommand {
    /// Show a component's SHA-256, imports and declared tools (schemas, needs) as JSON.
    Inspect {
        /// The .wasm component file.
        file: PathBuf,
    },
    /// Pull the components of the `[[plugins]]` entries with an OCI `source` (or of
    /// entry ID) into the state directory; `oci://…` pulls a reference on its own, to
    /// inspect before writing an entry. Exit 1 when one failed or its tag moved.
    Pull {
        /// An entry's id, or an `oci://` reference; none: every OCI entry.
        target: Option<String>,
    },
    /// Compare plugin ID's accepted component with the one its tag names now (sizes,
    /// digests, the tools each declares); exit 1 while one is pending.
    Diff {
        /// The plugin's id.
        id: String,
    },
    /// Accept plugin ID's pending component: the host loads it from its next start.
    Accept {
        /// The plugin's id.
        id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum RecordsCommand {
    /// Walk the audit log's hash chain (rotated files too) and report that it holds, or
    /// the first record edited, removed, inserted or reordered, or a cut tail (exit 1).
    Verify {
        /// Print only the chain's head, its first and latest links
        /// (`{"version","seq","sha256","first"}`), to keep elsewhere.
        #[arg(long, conflicts_with = "expect")]
        head: bool,
        /// Also check the log against a head kept elsewhere (a file `--head` wrote, or a
        /// copy of audit.head): the chain must start at its first link and hold its
        /// latest.
        #[arg(long, value_name = "HEADFILE")]
        expect: Option<PathBuf>,
    },
}

#[derive(Subcommand, Debug)]
pub enum RulesCommand {
    /// List them (JSON): each with its rule in words, who saved it from which card,
    /// when, how often it matched and when last.
    List,
    /// Remove one (recorded in the audit log); commands it admitted ask again.
    Revoke {
        /// The rule's id.
        id: String,
    },
}

#[derive(Subcommand, Debug)]
pub enum SettingsCommand {
    /// Change a setting: `cheng settings set auto_approve false`.
    Set {
        /// The setting's name.
        key: String,
        /// Its new value.
        value: String,
    },
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ApproveMode {
    /// Ask on the terminal; refuse at once without one.
    Ask,
    /// Refuse every request.
    Deny,
    /// Approve every request.
    Yes,
}

/// `--http`'s address: `IP:PORT`, or `localhost:PORT` for 127.0.0.1 (never looked up:
/// the name must not decide where the server listens).
pub fn bind_address(text: &str) -> Result<std::net::SocketAddr, String> {
    if let Some(port) = text.strip_prefix("localhost:") {
        let port: u16 = port.parse().map_err(|_| format!("\"{port}\" is not a port number"))?;
        return Ok(std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    }
    text.parse().map_err(|_| format!("\"{text}\" is not IP:PORT (for example 127.0.0.1:8931 or localhost:8931)"))
}
