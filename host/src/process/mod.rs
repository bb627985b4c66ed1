//! Host-owned process spawning: the only way anything in Cheng starts a process.
//!
//! A component asks through the `cheng:tool/process` import; [`Spawner::prepare`]
//! checks the request against the operator's `[process]` policy (shell strings,
//! whitelist, allow/prompt/forbid rules, environment allowlist) and resolves the
//! program on the host's `PATH` (never from the workspace, unless it is a relative path
//! the guard accepts) and the working directory through the workspace guard; the
//! binding asks the approvals broker; [`Spawner::run`] starts the child with an empty
//! environment plus the allowlist, stdin closed, in its own process group and cgroup
//! (see [`contain`]), under Landlock ([`sandbox`]), reads stdout and stderr
//! concurrently into bounded head+tail buffers ([`capture`]), and stops the whole tree
//! at the timeout, on cancellation, or when the first process exits and leaves others
//! behind.

pub mod capture;
pub mod contain;
pub mod sandbox;
pub mod spawn;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::ErrorKind;
use crate::guard::Guard;

/// Default wall-clock budget of a command.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// The longest budget a request may ask for; longer ones are clamped.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
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
}

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
    /// Allow / prompt / forbid rules; the strictest matching rule wins.
    #[serde(default)]
    pub rules: Vec<CommandRule>,
    /// How command trees are tracked: `auto` (a cgroup where one can be made, else the
    /// walk) or `walk` (always the subreaper and `/proc` walk).
    #[serde(default)]
    pub containment: ContainmentChoice,
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
            rules: Vec::new(),
            containment: ContainmentChoice::Auto,
        }
    }
}

impl ProcessConfig {
    /// Check the settings; the message names the key.
    pub fn validate(&self) -> Result<(), String> {
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
        }
        Ok(())
    }
}

/// A request, as the component sent it.
#[derive(Debug, Clone, Default)]
pub struct Request {
    /// Program.
    pub command: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Shell string instead.
    pub shell_string: Option<String>,
    /// Working directory, workspace-relative.
    pub cwd: Option<String>,
    /// Extra environment.
    pub env: Vec<(String, String)>,
    /// Budget in ms.
    pub timeout_ms: Option<u64>,
    /// Why.
    pub purpose: Option<String>,
}

/// A refusal before anything ran.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    /// The kind.
    pub kind: ErrorKind,
    /// What happened and what to do instead.
    pub message: String,
}

fn refuse(kind: ErrorKind, message: impl Into<String>) -> Refusal {
    Refusal { kind, message: message.into() }
}

/// A request that passed the checks, ready to be approved and run.
#[derive(Debug)]
pub struct Prepared {
    /// The program's absolute path.
    pub program: PathBuf,
    /// argv[0]: the program as requested.
    pub argv0: String,
    /// Arguments after the program.
    pub args: Vec<String>,
    /// The command as shown to people (shell-quoted).
    pub display: String,
    /// The working directory, workspace-relative (`.` for the root).
    pub cwd_rel: String,
    /// The workspace root (writable under Landlock).
    pub root: PathBuf,
    cwd_fd: OwnedFd,
    env: Vec<(String, String)>,
    /// The clamped budget.
    pub timeout: Duration,
    /// Why, from the request.
    pub purpose: String,
    /// What the operator's rules say.
    pub decision: RuleDecision,
    /// Set when the program could not be found; the run reports `spawn_failed`.
    pub missing: Option<String>,
}

impl Prepared {
    /// The working directory, absolute (for the approval card).
    pub fn cwd_abs(&self) -> PathBuf {
        if self.cwd_rel == "." { self.root.clone() } else { self.root.join(&self.cwd_rel) }
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited.
    Exited,
    /// Killed at its timeout.
    TimedOut,
    /// Killed because the call was cancelled.
    Cancelled,
    /// Ended by a signal.
    Signalled,
    /// Never started.
    SpawnFailed,
}

/// What happened.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Display form.
    pub command_display: String,
    /// Workspace-relative cwd.
    pub cwd: String,
    /// Exit code when it exited.
    pub exit_code: Option<i32>,
    /// How it ended.
    pub termination: Termination,
    /// The signal, when signalled.
    pub signal: Option<i32>,
    /// Wall time.
    pub duration_ms: u64,
    /// The budget.
    pub timeout_ms: u64,
    /// Captured stdout.
    pub stdout: String,
    /// Cut?
    pub stdout_truncated: bool,
    /// Captured stderr.
    pub stderr: String,
    /// Cut?
    pub stderr_truncated: bool,
    /// Why it could not start.
    pub error: Option<String>,
}

/// Starts processes for one host.
#[derive(Debug, Clone)]
pub struct Spawner {
    cfg: ProcessConfig,
    whitelist: Vec<String>,
    writable: Vec<PathBuf>,
    path: Vec<PathBuf>,
    passthrough: BTreeMap<String, String>,
}

impl Spawner {
    /// A spawner with these settings. Reads the host's `PATH`, `HOME` and the
    /// allowlisted variables once.
    pub fn new(cfg: ProcessConfig) -> Spawner {
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let writable = cfg
            .writable
            .iter()
            .filter_map(|w| match (w.strip_prefix("~/"), &home) {
                (Some(rest), Some(h)) => Some(h.join(rest)),
                (Some(_), None) => None,
                (None, _) => Some(PathBuf::from(w)),
            })
            .filter(|p| p.is_absolute())
            .collect();
        let path = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).filter(|d| d.is_absolute()).collect())
            .unwrap_or_else(|| vec![PathBuf::from("/usr/local/bin"), PathBuf::from("/usr/bin"), PathBuf::from("/bin")]);
        let mut passthrough = BTreeMap::new();
        for (k, v) in std::env::vars() {
            if k == "PATH" || k == "TMPDIR" {
                continue;
            }
            if env_listed(&cfg, &k) && !env_never_passed(&k) {
                passthrough.insert(k, v);
            }
        }
        let whitelist = cfg.command_whitelist.programs();
        Spawner { cfg, whitelist, writable, path, passthrough }
    }

    /// The settings.
    pub fn config(&self) -> &ProcessConfig {
        &self.cfg
    }

    /// Check `req` and resolve its program and working directory.
    pub fn prepare(&self, guard: &Guard, req: &Request) -> Result<Prepared, Refusal> {
        // 1. The words to run.
        let (words, via_shell) = match (&req.shell_string, req.command.trim().is_empty()) {
            (Some(_), false) => {
                return Err(refuse(
                    ErrorKind::InvalidArgument,
                    "give either `command` (with `args`) or `shell_string`, not both",
                ));
            }
            (None, true) => {
                return Err(refuse(
                    ErrorKind::InvalidArgument,
                    "`command` is empty: name the program to run in `command` and its arguments in `args`",
                ));
            }
            (None, false) => {
                let mut w = vec![req.command.clone()];
                w.extend(req.args.iter().cloned());
                (w, false)
            }
            (Some(s), true) => {
                if !self.whitelist.is_empty() {
                    return Err(refuse(
                        ErrorKind::CommandNotAllowed,
                        "shell strings are refused while a command whitelist is set: pass the program in `command` and its arguments in `args`",
                    ));
                }
                if s.trim().is_empty() {
                    return Err(refuse(ErrorKind::InvalidArgument, "`shell_string` is empty"));
                }
                match shell_syntax(s) {
                    Err(msg) => return Err(refuse(ErrorKind::InvalidArgument, msg)),
                    Ok(Some(construct)) if !self.cfg.allow_shell_string => {
                        return Err(refuse(
                            ErrorKind::ShellSyntaxDisabled,
                            format!(
                                "shell syntax ({construct}) is disabled for shell strings: pass the program in `command` and each argument in `args`, \
                                 and run pipelines or sequences as separate calls"
                            ),
                        ));
                    }
                    Ok(Some(_)) => (vec!["sh".into(), "-c".into(), s.clone()], true),
                    Ok(None) => match shlex::split(s) {
                        Some(w) if !w.is_empty() => (w, false),
                        _ => {
                            return Err(refuse(
                                ErrorKind::InvalidArgument,
                                "`shell_string` could not be split into words (an unclosed quote?)",
                            ));
                        }
                    },
                }
            }
        };
        for w in &words {
            if w.contains('\0') {
                return Err(refuse(ErrorKind::InvalidArgument, "arguments cannot contain NUL bytes"));
            }
        }
        let display = if via_shell {
            req.shell_string.clone().unwrap_or_default()
        } else {
            shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
        };
        let name = words[0].clone();

        // 2. The whitelist and the operator's rules.
        if !self.whitelist.is_empty() && !self.whitelist.iter().any(|p| *p == name) {
            return Err(refuse(
                ErrorKind::CommandNotAllowed,
                format!(
                    "\"{name}\" is not in the operator's command whitelist ({}); use one of those programs or another tool",
                    self.whitelist.join(", ")
                ),
            ));
        }
        let decision = self.decide(&name, &words[1..]);
        if decision == RuleDecision::Forbid {
            return Err(refuse(
                ErrorKind::CommandNotAllowed,
                format!("the operator's policy forbids running `{display}`; do not retry it, use another approach"),
            ));
        }

        // 3. The working directory, through the guard.
        let cwd_req = req.cwd.as_deref().filter(|c| !c.trim().is_empty()).unwrap_or(".");
        let opened = guard.open(cwd_req).map_err(|e| refuse(e.kind(), e.to_string()))?;
        let st = rustix::fs::fstat(&opened.fd).map_err(|e| refuse(ErrorKind::Io, e.to_string()))?;
        if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir() {
            return Err(refuse(ErrorKind::InvalidArgument, format!("cwd \"{cwd_req}\" is a file, not a directory")));
        }
        let cwd_rel = if opened.rel.is_empty() { ".".to_string() } else { opened.rel.clone() };

        // 4. The program: the host's PATH, or a relative path inside the workspace.
        let (program, missing) = if via_shell {
            match self.lookup("sh", guard.root()) {
                Some(p) => (p, None),
                None => (PathBuf::from("sh"), Some("no `sh` on the host's PATH".to_string())),
            }
        } else if name.contains('/') {
            let in_ws = if Path::new(&name).is_absolute() {
                Path::new(&name).strip_prefix(guard.root()).ok().map(|p| p.to_string_lossy().into_owned())
            } else {
                Some(if cwd_rel == "." { name.clone() } else { format!("{cwd_rel}/{name}") })
            };
            match in_ws {
                Some(rel) => {
                    let o = guard.open(&rel).map_err(|e| refuse(e.kind(), e.to_string()))?;
                    let abs = guard.root().join(&o.rel);
                    (abs, None)
                }
                None => {
                    let p = PathBuf::from(&name);
                    if is_executable(&p) {
                        (p, None)
                    } else {
                        (p, Some(format!("\"{name}\" is not an executable file")))
                    }
                }
            }
        } else {
            match self.lookup(&name, guard.root()) {
                Some(p) => (p, None),
                None => (
                    PathBuf::from(&name),
                    Some(format!(
                        "\"{name}\" was not found on the host's PATH; check the spelling, or use a program that is installed (programs in the workspace run only by a relative path such as ./{name})"
                    )),
                ),
            }
        };

        // 5. The environment.
        let mut env: BTreeMap<String, String> = self.passthrough.clone();
        let path: Vec<&Path> =
            self.path.iter().map(PathBuf::as_path).filter(|d| !d.starts_with(guard.root())).collect();
        env.insert(
            "PATH".into(),
            std::env::join_paths(path).ok().and_then(|p| p.into_string().ok()).unwrap_or_default(),
        );
        for (k, v) in &req.env {
            if env_never_passed(k) {
                return Err(refuse(
                    ErrorKind::CommandNotAllowed,
                    format!("environment variable \"{k}\" is never passed to commands; leave it out"),
                ));
            }
            if k == "PATH" || k == "TMPDIR" {
                return Err(refuse(
                    ErrorKind::CommandNotAllowed,
                    format!("environment variable \"{k}\" is set by the host; leave it out"),
                ));
            }
            if !env_listed(&self.cfg, k) {
                return Err(refuse(
                    ErrorKind::CommandNotAllowed,
                    format!(
                        "environment variable \"{k}\" is not in the allowlist; the operator can add it under [process] env"
                    ),
                ));
            }
            if k.is_empty() || k.contains('=') || k.contains('\0') || v.contains('\0') {
                return Err(refuse(ErrorKind::InvalidArgument, format!("environment entry \"{k}\" is malformed")));
            }
            env.insert(k.clone(), v.clone());
        }

        let timeout = Duration::from_millis(req.timeout_ms.unwrap_or(self.cfg.timeout_ms).clamp(1, MAX_TIMEOUT_MS));
        Ok(Prepared {
            program,
            argv0: words[0].clone(),
            args: words[1..].to_vec(),
            display,
            cwd_rel,
            root: guard.root().to_path_buf(),
            cwd_fd: opened.fd,
            env: env.into_iter().collect(),
            timeout,
            purpose: req.purpose.clone().unwrap_or_default(),
            decision,
            missing,
        })
    }

    /// The strictest rule matching `program` with `args` (prompt when none matches).
    fn decide(&self, program: &str, args: &[String]) -> RuleDecision {
        self.cfg
            .rules
            .iter()
            .filter(|r| {
                r.program == program && args.len() >= r.args.len() && r.args.iter().zip(args).all(|(a, b)| a == b)
            })
            .map(|r| r.decision)
            .max()
            .unwrap_or(RuleDecision::Prompt)
    }

    /// Look `name` up on the host's PATH, skipping directories inside the workspace.
    fn lookup(&self, name: &str, workspace: &Path) -> Option<PathBuf> {
        self.path.iter().filter(|d| !d.starts_with(workspace)).map(|d| d.join(name)).find(|p| is_executable(p))
    }

    /// Run a prepared command to its end, its timeout, or `cancel`.
    pub async fn run(&self, p: Prepared, cancel: &CancellationToken) -> Outcome {
        let started = Instant::now();
        let mut outcome = Outcome {
            command_display: p.display.clone(),
            cwd: p.cwd_rel.clone(),
            exit_code: None,
            termination: Termination::SpawnFailed,
            signal: None,
            duration_ms: 0,
            timeout_ms: p.timeout.as_millis() as u64,
            stdout: String::new(),
            stdout_truncated: false,
            stderr: String::new(),
            stderr_truncated: false,
            error: None,
        };
        if let Some(why) = p.missing {
            outcome.error = Some(why);
            return outcome;
        }
        let id = crate::new_id();
        // A private temporary directory, removed afterwards.
        let tmp = std::env::temp_dir().join(format!("cheng-cmd-{id}"));
        if let Err(e) = std::fs::create_dir(&tmp) {
            outcome.error = Some(format!("cannot create the command's temporary directory: {e}"));
            return outcome;
        }
        let _tmp_guard = RemoveDir(tmp.clone());
        let mech = match self.cfg.containment {
            ContainmentChoice::Auto => contain::detect(),
            ContainmentChoice::Walk => &contain::Mechanism::Walk,
        };
        let cgroup = match contain::prepare(mech, &id) {
            Ok(c) => c,
            Err(e) => {
                outcome.error = Some(format!("cannot set up process containment: {e}"));
                return outcome;
            }
        };
        let mut ruleset = None;
        if self.cfg.landlock && sandbox::abi_version().is_some() {
            let mut w = vec![p.root.clone(), tmp.clone()];
            w.extend(self.writable.iter().cloned());
            match sandbox::ruleset(&w) {
                Ok(rs) => ruleset = Some(rs),
                Err(e) => {
                    outcome.error = Some(format!("cannot build the Landlock ruleset: {e}"));
                    return outcome;
                }
            }
        }

        let mut argv = vec![p.argv0.clone()];
        argv.extend(p.args.iter().cloned());
        let mut env = p.env.clone();
        env.push(("TMPDIR".into(), tmp.to_string_lossy().into_owned()));
        let landlock_fd: Option<OwnedFd> = ruleset.and_then(|rs| rs.into());
        let spec = spawn::ChildSpec {
            program: &p.program,
            argv: &argv,
            env: &env,
            cwd: p.cwd_fd.as_raw_fd(),
            cgroup_procs: contain::procs_fd(&cgroup),
            landlock: landlock_fd.as_ref().map(|f| f.as_raw_fd()),
        };
        let child = match spawn::spawn(&spec) {
            Ok(c) => c,
            Err(e) => {
                let hint = match e.raw_os_error() {
                    Some(libc::EACCES) => " (is it executable?)",
                    Some(libc::ENOEXEC) => " (not a program this machine can run)",
                    _ => "",
                };
                outcome.error = Some(format!("`{}` could not be started: {e}{hint}", p.display));
                outcome.duration_ms = started.elapsed().as_millis() as u64;
                return outcome;
            }
        };
        drop(landlock_fd);
        let mut reaper = Reaper::new(child.pidfd);
        let mut tree = contain::Tree::new(child.pid, cgroup);
        let cap = self.cfg.output_bytes;
        let out = capture_pipe(child.stdout, cap);
        let err = capture_pipe(child.stderr, cap);
        let grace = Duration::from_millis(self.cfg.kill_grace_ms);

        enum Ended {
            Exit(Option<spawn::Exit>),
            TimedOut,
            Cancelled,
        }
        let ended = match reaper.fd.as_ref() {
            Some(fd) => tokio::select! {
                s = spawn::wait(fd) => Ended::Exit(s.ok()),
                _ = tokio::time::sleep(p.timeout) => Ended::TimedOut,
                _ = cancel.cancelled() => Ended::Cancelled,
            },
            None => Ended::Exit(None),
        };
        if let Ended::Exit(Some(_)) = ended {
            reaper.reaped = true;
        }
        // Stop whatever is left of the tree: everything on timeout or cancel; after a
        // normal exit, what the command left running in the background (given a moment
        // to finish writing first).
        let (mut out, mut err) = (out, err);
        let mut captured = None;
        let leftovers = match ended {
            Ended::Exit(_) => {
                let both = async { ((&mut out).await, (&mut err).await) };
                match tokio::time::timeout(Duration::from_millis(50), both).await {
                    Ok((Ok(o), Ok(e))) => {
                        captured = Some((o.finish(), e.finish()));
                        let left = !tree.members().is_empty();
                        if !left {
                            tree.mark_empty();
                        }
                        left
                    }
                    _ => true,
                }
            }
            _ => true,
        };
        if leftovers {
            tree = tokio::task::spawn_blocking(move || {
                tree.terminate(grace);
                tree
            })
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        }
        let collect = |h: tokio::task::JoinHandle<capture::HeadTail>| async move {
            match tokio::time::timeout(Duration::from_secs(2), h).await {
                Ok(Ok(ht)) => ht.finish(),
                _ => (String::new(), false),
            }
        };
        let ((so, st), (se, et)) = match captured {
            Some(c) => c,
            None => tokio::join!(collect(out), collect(err)),
        };
        drop(tree);
        let exit = match ended {
            Ended::Exit(e) => e,
            _ => None,
        };
        drop(reaper);
        outcome.stdout = so;
        outcome.stdout_truncated = st;
        outcome.stderr = se;
        outcome.stderr_truncated = et;
        outcome.duration_ms = started.elapsed().as_millis() as u64;
        outcome.termination = match ended {
            Ended::TimedOut => Termination::TimedOut,
            Ended::Cancelled => Termination::Cancelled,
            Ended::Exit(_) => match exit {
                Some(spawn::Exit::Code(c)) => {
                    outcome.exit_code = Some(c);
                    Termination::Exited
                }
                Some(spawn::Exit::Signal(sig)) => {
                    outcome.signal = Some(sig);
                    Termination::Signalled
                }
                None => Termination::Signalled,
            },
        };
        outcome
    }
}

/// Read a pipe's read end to its end into a head+tail buffer, in a task.
fn capture_pipe(fd: OwnedFd, cap: usize) -> tokio::task::JoinHandle<capture::HeadTail> {
    // The receiver sets O_NONBLOCK, so no runtime thread blocks on the read.
    match tokio::net::unix::pipe::Receiver::from_owned_fd(fd) {
        Ok(r) => tokio::spawn(capture::drain(r, cap)),
        Err(e) => {
            tracing::warn!(target: "cheng::process", "cannot read the command's output: {e}");
            tokio::spawn(async move { capture::HeadTail::new(cap) })
        }
    }
}

/// Owns the child's pidfd; reaps the child on drop if nobody did (a dropped call), in
/// the background so that drop never blocks.
struct Reaper {
    fd: Option<tokio::io::unix::AsyncFd<OwnedFd>>,
    reaped: bool,
}

impl Reaper {
    fn new(pidfd: OwnedFd) -> Self {
        // SAFETY: the pidfd is owned by the AsyncFd for as long as it is registered.
        let fd = unsafe { tokio::io::unix::AsyncFd::register_with_interest(pidfd, tokio::io::Interest::READABLE) };
        Reaper { fd: fd.ok(), reaped: false }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        if let Some(fd) = self.fd.take() {
            let fd = fd.into_inner();
            if let Ok(Some(_)) = spawn::try_reap(fd.as_raw_fd()) {
                return;
            }
            std::thread::spawn(move || {
                // SAFETY: the pidfd is owned by this closure; a blocking wait reaps it.
                unsafe {
                    let mut info: libc::siginfo_t = std::mem::zeroed();
                    libc::waitid(libc::P_PIDFD, fd.as_raw_fd() as libc::id_t, &mut info, libc::WEXITED);
                }
            });
        }
    }
}

struct RemoveDir(PathBuf);
impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Whether `name` is on the allowlist: the defaults or the operator's `[process] env`.
fn env_listed(cfg: &ProcessConfig, name: &str) -> bool {
    DEFAULT_ENV.iter().any(|d| name_matches(d, name)) || cfg.env.iter().any(|d| name_matches(d, name))
}

/// `LC_*`-style patterns: a trailing `*` matches any suffix.
fn name_matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// The first shell construct in `s` that a plain word split would not honour, if any:
/// `Ok(Some(construct))`. Quotes and backslashes are fine (they split like a shell's);
/// `Err` for an unclosed quote.
pub fn shell_syntax(s: &str) -> Result<Option<&'static str>, String> {
    #[derive(PartialEq)]
    enum Q {
        None,
        Single,
        Double,
    }
    let mut q = Q::None;
    let mut chars = s.chars().peekable();
    let mut at_word_start = true;
    while let Some(c) = chars.next() {
        match q {
            Q::Single => {
                if c == '\'' {
                    q = Q::None;
                }
            }
            Q::Double => match c {
                '"' => q = Q::None,
                '\\' => {
                    chars.next();
                }
                '$' => return Ok(Some("a `$` expansion")),
                '`' => return Ok(Some("a backtick substitution")),
                _ => {}
            },
            Q::None => {
                let construct = match c {
                    '\'' => {
                        q = Q::Single;
                        None
                    }
                    '"' => {
                        q = Q::Double;
                        None
                    }
                    '\\' => {
                        if chars.next() == Some('\n') {
                            Some("a line continuation")
                        } else {
                            None
                        }
                    }
                    '|' => Some("a pipe `|`"),
                    '&' => Some("`&` (background or `&&`)"),
                    ';' => Some("a `;` sequence"),
                    '<' | '>' => Some("a redirection"),
                    '(' | ')' => Some("a subshell"),
                    '$' => Some("a `$` expansion"),
                    '`' => Some("a backtick substitution"),
                    '\n' | '\r' => Some("a newline"),
                    '*' | '?' | '[' => Some("a glob"),
                    '{' | '}' => Some("a brace expansion"),
                    '~' if at_word_start => Some("a `~` expansion"),
                    '#' if at_word_start => Some("a `#` comment"),
                    '=' => None,
                    _ => None,
                };
                if construct.is_some() {
                    return Ok(construct);
                }
                at_word_start = c.is_whitespace();
                continue;
            }
        }
        at_word_start = false;
    }
    if q != Q::None {
        return Err("`shell_string` has an unclosed quote".into());
    }
    Ok(None)
}

/// `s` with control and bidirectional-formatting characters shown as `\u{…}` escapes,
/// so an approval card shows what will run, not what it pretends to be.
pub fn escape_for_card(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let bidi =
            matches!(c as u32, 0x202A..=0x202E | 0x2066..=0x2069 | 0x200E | 0x200F | 0x061C | 0x200B..=0x200D | 0xFEFF);
        if (c.is_control() && c != '\n') || bidi {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// The approval card for `p`: the first line (escaped) as summary, the exact command
/// and working directory as detail.
pub fn card(p: &Prepared) -> (String, String) {
    let escaped = escape_for_card(&p.display);
    let first = escaped.lines().next().unwrap_or("").to_string();
    let summary = if escaped.lines().nth(1).is_some() { format!("{first} …") } else { first };
    let detail = format!("{escaped}\n(in {})", escape_for_card(&p.cwd_abs().to_string_lossy()));
    (summary, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_syntax_is_found_outside_quotes_only() {
        for (s, found) in [
            ("ls -la", false),
            ("echo 'a | b'", false),
            ("echo \"a;b\"", false),
            ("grep -r foo src", false),
            ("ls | wc", true),
            ("a && b", true),
            ("a; b", true),
            ("cat < x", true),
            ("echo $HOME", true),
            ("echo \"$HOME\"", true),
            ("echo `id`", true),
            ("echo a\nrm x", true),
            ("ls *.rs", true),
            ("cd ~", true),
            ("echo a~b", false),
            ("echo hi # there", true),
            ("echo a#b", false),
        ] {
            assert_eq!(shell_syntax(s).unwrap().is_some(), found, "{s:?}");
        }
        assert!(shell_syntax("echo 'open").is_err());
    }

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

    #[test]
    fn strictest_rule_wins() {
        let cfg = ProcessConfig {
            rules: vec![
                CommandRule { program: "git".into(), args: vec![], decision: RuleDecision::Allow },
                CommandRule { program: "git".into(), args: vec!["push".into()], decision: RuleDecision::Forbid },
            ],
            ..ProcessConfig::default()
        };
        let s = Spawner::new(cfg);
        assert_eq!(s.decide("git", &["status".into()]), RuleDecision::Allow);
        assert_eq!(s.decide("git", &["push".into(), "origin".into()]), RuleDecision::Forbid);
        assert_eq!(s.decide("ls", &[]), RuleDecision::Prompt);
    }

    #[test]
    fn cards_escape_controls_and_bidi() {
        let e = escape_for_card("ls \u{202e}txt.exe\u{1b}[2J");
        assert_eq!(e, "ls \\u{202e}txt.exe\\u{1b}[2J");
    }
}
