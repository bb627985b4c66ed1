//! The operator's `[process]` settings: how the host runs commands for components —
//! shell strings, the whitelist, allow/prompt/forbid rules, the environment allowlist,
//! time and output budgets, Landlock and containment. Only settings live here; the
//! host's process module applies them.

use serde::Deserialize;

/// Names the host sets for every command; neither a request nor an operator's entry may
/// change them, because each decides what a command reads, runs or reaches (`HOME` and
/// `XDG_*` locate its configuration, `PATH` its programs, `TMPDIR` its scratch space,
/// the proxy variables its way to the network).
pub fn host_owned_env(name: &str) -> bool {
    matches!(name, "PATH" | "HOME" | "TMPDIR") || name.starts_with("XDG_") || proxy_env(name)
}

/// The proxy variables, in both cases, which the host sets for a command granted named
/// hosts (and clears for every other).
pub fn proxy_env(name: &str) -> bool {
    matches!(
        name.to_ascii_lowercase().as_str(),
        "http_proxy"
            | "https_proxy"
            | "all_proxy"
            | "no_proxy"
            | "ftp_proxy"
            | "npm_config_proxy"
            | "npm_config_https_proxy"
    )
}

/// Default wall-clock budget of a command.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// The longest budget a request may ask for; longer ones are clamped (the contract's
/// number, which the tools' outcome messages quote).
pub use cheng_contract::process::MAX_TIMEOUT_MS;
/// Default bytes kept of each of stdout and stderr.
pub const DEFAULT_OUTPUT_BYTES: usize = 128 * 1024;
/// Default time between `SIGTERM` and `SIGKILL`.
pub const DEFAULT_KILL_GRACE_MS: u64 = 2_000;

/// Environment variables passed from the host by default (when set), and which a
/// request may set. `LC_*` stands for every locale variable.
pub const DEFAULT_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_*", "TERM", "TZ", "USER", "TMPDIR"];

/// Caches build tools write, made writable under Landlock when they exist (`~` is the
/// host's home).
pub const DEFAULT_WRITABLE: &[&str] = &[
    "~/.cargo/registry",
    "~/.cargo/git",
    "~/.npm",
    "~/.cache",
    "~/.local/share/pnpm",
    "~/.yarn",
    "~/go/pkg",
    "~/.gradle",
    "~/.m2",
];

/// Toolchains installed under the home directory that a command run without asking may
/// read (when they exist), besides the system directories and the caches.
pub const DEFAULT_READABLE: &[&str] = &[
    "~/.rustup",
    "~/.cargo/bin",
    "~/.nvm",
    "~/.pyenv",
    "~/.local/bin",
    "~/.local/lib",
    "~/go/bin",
    "~/.sdkman",
    "~/.gitconfig",
    "~/.config/git",
];

/// Whether an environment variable name is never passed to a child, whatever the
/// configuration says: loader and interpreter hooks, git's own variables, programs a
/// tool might start on its own, and anything that looks like a credential.
pub fn env_never_passed(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    const EXACT: &[&str] = &[
        "PAGER",
        "EDITOR",
        "VISUAL",
        "BASH_ENV",
        "ENV",
        "NODE_OPTIONS",
        "PYTHONSTARTUP",
        "PERL5OPT",
        "RUBYOPT",
        "IFS",
        "PS4",
        "PROMPT_COMMAND",
        "SHELLOPTS",
        "BASHOPTS",
    ];
    const PREFIX: &[&str] = &["LD_", "GIT_", "DYLD_"];
    const CREDENTIAL: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "API_KEY",
        "APIKEY",
        "PRIVATE_KEY",
        "ACCESS_KEY",
        "AUTH",
        "SESSION",
        "COOKIE",
    ];
    EXACT.contains(&upper.as_str())
        || PREFIX.iter().any(|p| upper.starts_with(p))
        || CREDENTIAL.iter().any(|c| upper.contains(c))
}

/// A command whitelist: one program per line (blank lines and `#` comments skipped), or
/// a TOML array.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Whitelist {
    /// `"cargo\nls\n"`
    Lines(String),
    /// `["cargo", "ls"]`
    List(Vec<String>),
}

impl Default for Whitelist {
    fn default() -> Self {
        Whitelist::List(Vec::new())
    }
}

impl Whitelist {
    /// The programs listed.
    pub fn programs(&self) -> Vec<String> {
        let items: Vec<String> = match self {
            Whitelist::Lines(s) => s.lines().map(str::to_string).collect(),
            Whitelist::List(v) => v.clone(),
        };
        items.into_iter().map(|s| s.trim().to_string()).filter(|s| !s.is_empty() && !s.starts_with('#')).collect()
    }
}

/// What a command rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuleDecision {
    /// Run without asking.
    Allow,
    /// Ask a person (the default for every command).
    Prompt,
    /// Never run.
    Forbid,
}

/// An operator rule: a program and an argument prefix.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRule {
    /// The program as requested (`git`, `./gradlew`).
    pub program: String,
    /// The arguments must start with these (empty: any arguments).
    #[serde(default)]
    pub args: Vec<String>,
    /// What to do.
    pub decision: RuleDecision,
    /// For an allow rule: the network the command may use when it runs without a
    /// person's answer: `false` (the default: none), `true` (all of it), or a list of
    /// host names and patterns (`["registry.npmjs.org", "*.crates.io"]`), reached
    /// through the host's proxy and checked as `[web]` checks `web_fetch`.
    #[serde(default)]
    pub network: RuleNetwork,
}

/// A rule's `network`: none, all, or named hosts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum RuleNetwork {
    /// `true` or `false`.
    All(bool),
    /// Host names and patterns.
    Hosts(Vec<String>),
}

impl Default for RuleNetwork {
    fn default() -> Self {
        RuleNetwork::All(false)
    }
}

/// The hosts proposed on an approval card for a program, by its name, unless the
/// operator's `[process.hosts]` table says otherwise: package registries and their file
/// hosts. (`git` is proposed its remote's host, read from the arguments or the
/// repository's configuration.)
pub const DEFAULT_HOSTS: &[(&str, &[&str])] = &[
    ("npm", &["registry.npmjs.org"]),
    ("npx", &["registry.npmjs.org"]),
    ("pnpm", &["registry.npmjs.org"]),
    ("yarn", &["registry.yarnpkg.com", "registry.npmjs.org"]),
    ("bun", &["registry.npmjs.org"]),
    ("cargo", &["crates.io", "index.crates.io", "static.crates.io"]),
    ("pip", &["pypi.org", "files.pythonhosted.org"]),
    ("pip3", &["pypi.org", "files.pythonhosted.org"]),
    ("uv", &["pypi.org", "files.pythonhosted.org"]),
    ("poetry", &["pypi.org", "files.pythonhosted.org"]),
    ("go", &["proxy.golang.org", "sum.golang.org"]),
    ("gem", &["rubygems.org", "index.rubygems.org"]),
    ("bundle", &["rubygems.org", "index.rubygems.org"]),
];

/// The operator's `[process]` settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessConfig {
    /// Allow `shell_string` with shell syntax (run under `sh -c`). Default false.
    #[serde(default)]
    pub allow_shell_string: bool,
    /// When non-empty, only these programs run and shell strings are refused.
    #[serde(default)]
    pub command_whitelist: Whitelist,
    /// Environment names added to the allowlist.
    #[serde(default)]
    pub env: Vec<String>,
    /// Default timeout in ms.
    #[serde(default = "default_timeout")]
    pub timeout_ms: u64,
    /// Bytes kept of each of stdout and stderr.
    #[serde(default = "default_output")]
    pub output_bytes: usize,
    /// Time between `SIGTERM` and `SIGKILL`, in ms.
    #[serde(default = "default_grace")]
    pub kill_grace_ms: u64,
    /// Run commands under Landlock where the kernel has it (default true).
    #[serde(default = "yes")]
    pub landlock: bool,
    /// Folders commands may write besides the workspace and their temp dir.
    #[serde(default = "default_writable")]
    pub writable: Vec<String>,
    /// Folders a command run without a person's answer may read besides the system
    /// directories, the workspace and the `writable` caches (toolchains installed in
    /// the home directory, such as `~/.rustup`).
    #[serde(default = "default_readable")]
    pub readable: Vec<String>,
    /// Give commands caches of their own under the state directory (`CARGO_HOME`,
    /// `npm_config_cache`, …) instead of the user's shared ones.
    #[serde(default)]
    pub private_caches: bool,
    /// Allow / prompt / forbid rules; the strictest matching rule wins.
    #[serde(default)]
    pub rules: Vec<CommandRule>,
    /// How command trees are tracked: `auto` (a cgroup where one can be made, else the
    /// walk) or `walk` (always the subreaper and `/proc` walk).
    #[serde(default)]
    pub containment: ContainmentChoice,
    /// Run a command on the known-safe list ([`crate::known_safe`]: read-only programs
    /// in read-only argument forms) without asking, in the confined tier (default true).
    #[serde(default = "yes")]
    pub known_safe: bool,
    /// Built-in known-safe entries to drop, by name (`find`, `git log`) or program (`git`).
    #[serde(default)]
    pub known_safe_remove: Vec<String>,
    /// Known-safe entries to add (one of the same name replaces the built-in one).
    #[serde(default)]
    pub known_safe_rules: Vec<crate::known_safe::KnownSafeRule>,
    /// The hosts an approval card proposes for a program, by name (`npm =
    /// ["registry.npmjs.org"]`); an entry replaces the built-in one of that name, an
    /// empty list proposes none.
    #[serde(default)]
    pub hosts: std::collections::BTreeMap<String, Vec<String>>,
}

impl ProcessConfig {
    /// The hosts a card proposes for the program named `name`: the operator's entry,
    /// else the built-in one, else none.
    pub fn proposed_hosts(&self, name: &str) -> Vec<String> {
        if let Some(list) = self.hosts.get(name) {
            return list.clone();
        }
        DEFAULT_HOSTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, hosts)| hosts.iter().map(|h| h.to_string()).collect())
            .unwrap_or_default()
    }
}

/// The `containment` setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainmentChoice {
    /// A cgroup when available, else the walk.
    #[default]
    Auto,
    /// Always the walk.
    Walk,
}

fn default_timeout() -> u64 {
    DEFAULT_TIMEOUT_MS
}
fn default_output() -> usize {
    DEFAULT_OUTPUT_BYTES
}
fn default_grace() -> u64 {
    DEFAULT_KILL_GRACE_MS
}
fn yes() -> bool {
    true
}
fn default_readable() -> Vec<String> {
    DEFAULT_READABLE.iter().map(|s| s.to_string()).collect()
}
fn default_writable() -> Vec<String> {
    DEFAULT_WRITABLE.iter().map(|s| s.to_string()).collect()
}

impl Default for ProcessConfig {
    fn default() -> Self {
        ProcessConfig {
            allow_shell_string: false,
            command_whitelist: Whitelist::default(),
            env: Vec::new(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            output_bytes: DEFAULT_OUTPUT_BYTES,
            kill_grace_ms: DEFAULT_KILL_GRACE_MS,
            landlock: true,
            writable: default_writable(),
            readable: default_readable(),
            private_caches: false,
            rules: Vec::new(),
            containment: ContainmentChoice::Auto,
            known_safe: true,
            known_safe_remove: Vec::new(),
            known_safe_rules: Vec::new(),
            hosts: Default::default(),
        }
    }
}

impl ProcessConfig {
    /// The known-safe entries in force: none when `known_safe` is off, else the built-in
    /// ones less `known_safe_remove`, plus `known_safe_rules`.
    pub fn known_safe_entries(&self) -> Vec<crate::known_safe::KnownSafeRule> {
        if !self.known_safe {
            return Vec::new();
        }
        crate::known_safe::entries(&self.known_safe_remove, &self.known_safe_rules)
    }

    /// Check the settings; the message names the key.
    pub fn validate(&self) -> Result<(), crate::SettingError> {
        self.checked().map_err(crate::SettingError)
    }

    fn checked(&self) -> Result<(), String> {
        for name in &self.env {
            if env_never_passed(name) {
                return Err(format!(
                    "[process] env: \"{name}\" is never passed to commands (loader hooks, git variables and credentials are refused)"
                ));
            }
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(format!("[process] env: \"{name}\" is not a variable name"));
            }
        }
        if self.output_bytes < 1024 || self.output_bytes > 64 << 20 {
            return Err("[process] output_bytes must be between 1024 and 67108864".into());
        }
        if self.timeout_ms == 0 || self.timeout_ms > MAX_TIMEOUT_MS {
            return Err(format!("[process] timeout_ms must be between 1 and {MAX_TIMEOUT_MS}"));
        }
        for r in &self.rules {
            if r.program.trim().is_empty() {
                return Err("[process] rules: every rule needs a program".into());
            }
            if let RuleNetwork::Hosts(hosts) = &r.network {
                if hosts.is_empty() {
                    return Err(format!(
                        "[process] rules: the rule for \"{}\" gives network = [] (write network = false for none)",
                        r.program
                    ));
                }
                for h in hosts {
                    crate::net::HostPattern::parse(h)
                        .map_err(|e| format!("[process] rules: the rule for \"{}\": network: {e}", r.program))?;
                }
            }
        }
        for (program, hosts) in &self.hosts {
            for h in hosts {
                crate::net::HostPattern::parse(h).map_err(|e| format!("[process.hosts] {program}: {e}"))?;
            }
        }
        for r in &self.known_safe_rules {
            r.check().map_err(|m| format!("[process] known_safe_rules: {m}"))?;
        }
        let known: Vec<crate::known_safe::KnownSafeRule> = crate::known_safe::built_in();
        for name in &self.known_safe_remove {
            if !known.iter().any(|e| e.name() == *name || e.program == *name) {
                let names: Vec<String> = known.iter().map(|e| e.name()).collect();
                return Err(format!(
                    "[process] known_safe_remove: \"{name}\" is not a built-in known-safe entry ({})",
                    names.join(", ")
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_never_passed() {
        for n in [
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "GIT_DIR",
            "GIT_SSH_COMMAND",
            "PAGER",
            "EDITOR",
            "BASH_ENV",
            "NODE_OPTIONS",
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "my_api_key",
        ] {
            assert!(env_never_passed(n), "{n}");
        }
        for n in ["PATH", "HOME", "LANG", "LC_ALL", "RUST_LOG", "CARGO_TARGET_DIR"] {
            assert!(!env_never_passed(n), "{n}");
        }
    }

    #[test]
    fn whitelist_accepts_lines_and_arrays() {
        let w = Whitelist::Lines("cargo\n\n# comment\n  ls  \n".into());
        assert_eq!(w.programs(), vec!["cargo", "ls"]);
        assert_eq!(Whitelist::List(vec!["git".into()]).programs(), vec!["git"]);
    }
}
