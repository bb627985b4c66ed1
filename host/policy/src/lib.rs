//! Operator policy from `cheng.toml`: roles and the tools they grant, limits, per-tool
//! settings, the command policy, the path rules ([`files`]), plugin entries, grants
//! ([`grant`]) and the network rules ([`net`]). The host's lowest layer above the shared
//! contract, as a crate of its own: no engine, no process, no connection, no I/O beyond
//! reading the configuration (and the CA file it names), so cargo keeps every upper
//! layer out of it. The host asks it what a call may have ([`Policy::effective`]).
//! [`hostfile`] is how every layer reads the host's own files: regular files only, each
//! kind under its cap, never blocking.
//!
//! With no file, working defaults apply: the three built-in roles (`recon`, `writer`,
//! `developer`) and `developer` as the default role. Every table refuses a key it does
//! not know, naming the file, line and column, and the table the key belongs in when it
//! was written in the wrong one.
//!
//! # Example
//!
//! ```
//! use cheng_policy::Config;
//!
//! let cfg = Config::from_toml_str(r#"
//!     default_role = "reviewer"
//!     [roles.reviewer]
//!     inherits = "recon"
//!     tools = ["write_file"]
//! "#, "cheng.toml").unwrap();
//! let policy = cfg.policy().unwrap();
//! assert!(policy.grants("reviewer", "read_file"));
//! assert!(policy.grants("reviewer", "write_file"));
//! assert!(!policy.grants("reviewer", "workspace_shell"));
//!
//! // A key in the wrong table is refused with its home named.
//! let err = Config::from_toml_str("[tools.workspace_shell]\ncommand_whitelist = [\"echo\"]\n", "cheng.toml").unwrap_err();
//! assert!(err.to_string().contains("`command_whitelist` belongs in `[process]`"));
//! ```

#![deny(missing_docs)]

pub mod files;
pub mod git;
pub mod grant;
pub mod hostfile;
pub mod keys;
pub mod known_safe;
mod load;
pub mod mcp;
pub mod net;
mod plugins;
pub mod process;
mod resolve;
mod tables;
pub mod web;

pub use plugins::{FsGrantConfig, PluginConfig, check_grant_folder, valid_plugin_id};
pub use process::ProcessConfig;
pub use resolve::{Effective, Policy};
pub use tables::*;
pub use web::{Provider, SearchConfig, SearchSettings, Web, WebConfig};

/// Tools of the built-in `recon` role: inspection only.
pub const RECON_TOOLS: &[&str] = &[
    "list_dir",
    "find_files",
    "read_file",
    "read_files",
    "search_files",
    "workspace_git",
    "workspace_markdown",
    "workspace_preview",
    "think",
    "todo_write",
];
/// Tools the built-in `writer` role adds to `recon`: document writing.
pub const WRITER_EXTRA: &[&str] = &["write_file"];
/// Tools the built-in `developer` role adds to `writer`.
pub const DEVELOPER_EXTRA: &[&str] = &[
    "edit_file",
    "apply_patch",
    "workspace_shell",
    "workspace_tests",
    "workspace_git_write",
    "web_fetch",
    "web_search",
];
/// The tools of the built-in web component (what cheng-host's `web` feature brings).
pub const WEB_TOOLS: &[&str] = &["web_fetch", "web_search"];
/// The role used when neither the CLI nor the config names one.
pub const DEFAULT_ROLE: &str = "developer";
/// Default memory limit per call, in MiB.
pub const DEFAULT_MEMORY_MB: u64 = 256;
/// Default CPU deadline per call (guest computing time), in milliseconds.
pub const DEFAULT_CPU_MS: u64 = 30_000;
/// Default wall-clock limit per call, in milliseconds: an approval's longest default
/// wait and a command's longest budget, and then some.
pub const DEFAULT_WALL_MS: u64 = 30 * 60 * 1000;
/// The shortest approval wait the file may set, in milliseconds.
pub const MIN_APPROVAL_TIMEOUT_MS: u64 = 1_000;

/// A setting that cannot be used: the message names its table and key (or its entry)
/// and says what would be accepted. Loading a file turns it into a [`ConfigError`]
/// that names the file too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SettingError(pub String);

impl From<String> for SettingError {
    fn from(message: String) -> Self {
        SettingError(message)
    }
}

impl From<SettingError> for String {
    fn from(e: SettingError) -> Self {
        e.0
    }
}

/// A configuration file problem: which file, where, and why.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration {path}: {message}")]
pub struct ConfigError {
    /// The file.
    pub path: String,
    /// The reason, with line and column when the parser knows them.
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant::{Grant, Mount};
    use cheng_contract::{FsAccess, Needs};

    #[test]
    fn default_roles_nest() {
        let p = Policy::defaults();
        // recon reads but does not write.
        assert!(p.grants("recon", "read_file"));
        assert!(!p.grants("recon", "write_file"));
        // writer adds write_file only.
        assert!(p.grants("writer", "write_file"));
        assert!(!p.grants("writer", "edit_file"));
        // developer adds the shell.
        assert!(p.grants("developer", "workspace_shell"));
        assert!(p.grants("developer", "think"));
        // The default role is developer.
        assert_eq!(p.default_role(), "developer");
    }

    #[test]
    fn bad_files_name_line_and_reason() {
        // A type error points at its line.
        let e = Config::from_toml_str("default_role = 5\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("x.toml") && e.to_string().contains("line 1"), "{e}");
        // An unknown key is refused, not ignored.
        let e = Config::from_toml_str("\n\nbogus = true\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("line 3"), "{e}");
        // An inheritance cycle is refused.
        let e =
            Config::from_toml_str("[roles.a]\ninherits = \"b\"\n[roles.b]\ninherits = \"a\"\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("cycle"), "{e}");
        // A default role that does not exist is refused.
        let e = Config::from_toml_str("default_role = \"nobody\"\n", "x.toml").unwrap_err();
        assert!(e.to_string().contains("nobody"), "{e}");
    }

    /// A configuration with every key of every table (the README's reference has them
    /// all too).
    const EVERY_KEY: &str = r#"
default_role = "developer"
allow_unpinned_plugins = false
[limits]
memory_mb = 256
cpu_ms = 30000
wall_ms = 1800000
[approvals]
timeout_ms = 600000
[records]
commit_window_ms = 100
on_failure = "refuse"
max_bytes = 1048576
[runs]
max_calls = 0
[workspaces]
root = "/tmp"
allow_external = true
[roles.reviewer]
inherits = "recon"
tools = ["read_file"]
[tools.read_file]
memory_mb = 128
cpu_ms = 5000
fs = "read"
[process]
allow_shell_string = false
command_whitelist = ""
env = ["RUST_LOG"]
timeout_ms = 60000
output_bytes = 131072
kill_grace_ms = 2000
landlock = true
writable = ["~/.cache"]
readable = ["~/.rustup"]
private_caches = false
containment = "auto"
known_safe = true
known_safe_remove = ["find"]
[[process.rules]]
program = "git"
args = ["status"]
decision = "allow"
network = false
[[process.known_safe_rules]]
program = "jq"
subcommand = "x"
flags = ["-r"]
value_options = ["--arg"]
operands = true
[[files.rules]]
paths = ["secrets/**"]
read = "forbid"
write = "prompt"
[git]
user_name = "Agent"
user_email = "agent@example.com"
[[git.rules]]
operations = ["add", "commit"]
branches = ["agent/*"]
decision = "allow"
[serve]
approvals_via_client = false
max_request_bytes = 16777216
max_calls = 128
max_calls_per_session = 16
busy_wait_ms = 10000
idle_session_ms = 300000
allowed_hosts = ["cheng.internal"]
allowed_origins = ["https://console.internal"]
workspaces = ["/srv/work/*"]
[[plugins]]
id = "acme"
path = "acme.wasm"
sha256 = "00"
[[plugins]]
id = "pulled"
source = "oci://registry.example.com/tools/pulled:1.0"
auth_env = "REGISTRY_AUTH"
signed_by = ["RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3"]
fs = "read"
spawn = false
net = []
memory_mb = 64
timeout_ms = 10000
[web]
allow_hosts = ["*.example.com"]
deny_hosts = ["bad.example.com"]
allow_private = ["10.20.0.0/16"]
timeout_ms = 20000
connect_timeout_ms = 10000
max_bytes = 5242880
proxy = "http://proxy.internal:3128"
user_agent = "cheng"
ca_file = "intranet-ca.pem"
[telemetry]
endpoint = "http://127.0.0.1:4318"
headers = { "x-api-key" = "k" }
service_name = "cheng"
export_arguments = false
export_results = false
queue = 2048
timeout_ms = 10000
metrics_interval_ms = 60000
[web.search]
provider = "searxng"
url = "https://searx.internal"
api_key_env = "SEARCH_KEY"
[[mcp_servers]]
id = "files"
command = "node"
args = ["server.js", "."]
env = ["NODE_ENV"]
fs = { read = ["docs"], write = ["out"] }
net = false
approve = ["write_file"]
timeout_ms = 1000
output_bytes = 4096
read = ["/opt/mcp"]
etc_withheld = ["app/secret"]
[[mcp_servers]]
id = "remote"
url = "http://127.0.0.1:9/mcp"
bearer_env = "REMOTE_TOKEN"
"#;

    #[test]
    fn telemetry_needs_an_http_endpoint_and_says_where_it_sends() {
        let urls = |text: &str| Config::from_toml_str(text, "t.toml").map(|c| c.telemetry.urls().unwrap());
        // Off unless an endpoint is given.
        assert_eq!(urls("").unwrap(), None);
        let (traces, metrics) = urls("[telemetry]\nendpoint = \"https://otlp.example.com/otlp/\"\n").unwrap().unwrap();
        assert_eq!(traces, "https://otlp.example.com/otlp/v1/traces");
        assert_eq!(metrics, "https://otlp.example.com/otlp/v1/metrics");
        for (bad, says) in [
            ("endpoint = \"127.0.0.1:4318\"", "is not a URL"),
            ("endpoint = \"localhost:4318\"", "http:// or https://"),
            ("endpoint = \"grpc://c:4317\"", "http:// or https://"),
            ("endpoint = \"http://u:p@c:4318\"", "credentials go in [telemetry] headers"),
            ("endpoint = \"http://c:4318\"\nheaders = { \"bad header\" = \"x\" }", "not a valid HTTP header"),
            ("endpoint = \"http://c:4318\"\nqueue = 0", "must be positive"),
            ("endpoint = \"http://c:4318\"\nmetrics_interval_ms = 10", "at least 100"),
        ] {
            let e = urls(&format!("[telemetry]\n{bad}\n")).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn every_table_knows_its_keys_and_refuses_others() {
        // Every key the hint table lists is accepted where it belongs.
        Config::from_toml_str(EVERY_KEY, "every.toml").unwrap();
        for (table, keys) in keys::TABLES {
            for key in *keys {
                let present = EVERY_KEY.contains(&format!("\n{key} = ")) || EVERY_KEY.contains(&format!(".{key}]]"));
                assert!(present, "{table} {key} is missing from the sample");
            }
        }
        // Every table refuses a key it does not know, naming line and column.
        let headers = [
            "",
            "[serve]\n",
            "[limits]\n",
            "[approvals]\n",
            "[records]\n",
            "[runs]\n",
            "[workspaces]\n",
            "[roles.r]\n",
            "[tools.read_file]\n",
            "[process]\n",
            "[git]\n",
            "[files]\n",
            "[web]\n",
            "[web.search]\n",
            "[telemetry]\n",
        ];
        for h in headers {
            let e = Config::from_toml_str(&format!("{h}zz_unknown = 1\n"), "x.toml").unwrap_err().to_string();
            assert!(e.contains("unknown key `zz_unknown`") && e.contains("column 1"), "{h}: {e}");
        }
        for (h, body) in [
            ("[[process.rules]]\n", "program = \"ls\"\ndecision = \"allow\"\n"),
            ("[[plugins]]\n", "id = \"a\"\npath = \"a.wasm\"\n"),
            ("[[mcp_servers]]\n", "id = \"a\"\ncommand = \"x\"\n"),
            ("[[git.rules]]\n", "decision = \"allow\"\n"),
            ("[[files.rules]]\n", "paths = [\"x\"]\nread = \"allow\"\n"),
            ("[[process.known_safe_rules]]\n", "program = \"jq\"\n"),
        ] {
            let e = Config::from_toml_str(&format!("{h}{body}zz_unknown = 1\n"), "x.toml").unwrap_err().to_string();
            assert!(e.contains("unknown key `zz_unknown`"), "{h}: {e}");
        }
    }

    #[test]
    fn settings_in_the_wrong_place_are_refused_with_their_home() {
        // The whitelist written under the shell tool's table, as an operator might.
        let e = Config::from_toml_str("[tools.workspace_shell]\ncommand_whitelist = [\"echo\"]\n", "x.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2, column 1") && e.contains("`command_whitelist` belongs in `[process]`"), "{e}");
        // A made-up key in a tool's table.
        let e = Config::from_toml_str("[tools.read_file]\nbogus = 1\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("unknown key `bogus` in [tools.read_file]"), "{e}");
        // A tool table naming no tool.
        let e = Config::from_toml_str("\n[tools.read_fil]\ncpu_ms = 5\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("read_fil"), "{e}");
        // Config narrows, never widens: `fs = "write"` is refused.
        let e = Config::from_toml_str("[tools.read_file]\nfs = \"write\"\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("write"), "{e}");
        // An approval wait below the floor is refused, not silently raised.
        let e = Config::from_toml_str("[approvals]\ntimeout_ms = 0\n", "x.toml").unwrap_err().to_string();
        assert!(e.contains("floor of 1000"), "{e}");
    }

    #[test]
    fn effective_narrows_and_limits_resolve_in_order() {
        let cfg = Config::from_toml_str(
            "[limits]\nmemory_mb = 100\n[tools.write_file]\nfs = \"read\"\nmemory_mb = 300\n",
            "x.toml",
        )
        .unwrap();
        let p = cfg.policy().unwrap();
        let needs = Needs { fs: FsAccess::Write, spawn: false, network: vec![] };
        // A tool narrowed to read gets its workspace read-only, with its own memory limit.
        let e = p.effective("write_file", &needs, &Grant::builtin());
        assert_eq!(e.mounts, vec![Mount { rel: ".".into(), write: false }]);
        assert_eq!(e.memory_mb, 300);
        // Another tool gets what it declared and the [limits] memory.
        let e = p.effective("edit_file", &needs, &Grant::builtin());
        assert!(e.mounts[0].write && e.memory_mb == 100);
        // The pool must hold the largest of them all, plugin grants included.
        let big = Grant { memory_mb: Some(512), ..Grant::none() };
        assert_eq!(p.largest_memory_mb([&big]), 512);
        assert_eq!(p.largest_memory_mb([]), 300);
    }
}
