//! Host-owned process spawning: the only way anything in Cheng starts a process.
//!
//! A component asks through the `cheng:tool/process` import. [`Spawner::prepare`]
//! checks the request and works out what would run:
//! - the words ([`shellwords`]: shell strings split like a shell would, shell syntax
//!   refused unless the operator allows it),
//! - the working directory, through the workspace guard,
//! - the program ([`resolve`]): the host's `PATH` with every entry resolved and none in
//!   the workspace, or a relative path through the guard; never an absolute path into
//!   the workspace,
//! - the programs it starts through launchers such as `env` or `sh -c` ([`launchers`]),
//! - what the operator's rules and whitelist say of every one of them ([`rules`]),
//!   and, where no rule speaks, whether the command is on the known-safe list of
//!   read-only programs and argument forms ([`known_safe`]),
//! - the environment ([`environment`]): an allowlist, the host's own `PATH`, `HOME`,
//!   `TMPDIR`, and for git the repository's programs neutralised ([`git`]), its
//!   configuration read by the guard's rules ([`repo_files`]).
//!
//! The binding then asks the approvals broker (unless a rule allows the command or it
//! is known-safe), and
//! [`Spawner::run`] starts the child ([`spawn`]: empty environment plus the above,
//! stdin closed, its own process group and cgroup — [`contain`]) under Landlock
//! ([`sandbox`]) at the tier its approval earned: a command nobody answered for reads
//! only system directories, the workspace and the toolchains and reaches no network;
//! one a person approved reads what the host's user can; a known-safe one also writes
//! nothing but its temp dir and executes nothing but its own program. Output is read concurrently
//! into bounded head+tail buffers ([`capture`]) and the whole tree is stopped at the
//! timeout, on cancellation, or when the first process exits and leaves others behind.
//!
//! Everything here is the host's: the module is not part of the public API, so no
//! public function can start a process around the policy.

pub(crate) mod capture;
mod card;
mod carve;
pub(crate) mod contain;
mod environment;
mod git;
pub(crate) mod git_write;
mod known_safe;
mod launchers;
pub mod learned;
#[cfg(feature = "mcp-sources")]
pub(crate) mod mcp_server;
mod offer;
pub(crate) mod proxy;
mod repo_files;
mod resolve;
mod rules;
mod run;
pub(crate) mod sandbox;
mod shellwords;
pub(crate) mod spawn;

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) use card::card;
use known_safe::KnownSafe;
use resolve::{ProgramId, SearchPath};
use rules::Rules;

use crate::ErrorKind;
use crate::guard::Guard;
use crate::policy::process::{MAX_TIMEOUT_MS, ProcessConfig, RuleDecision};

/// A request, as the component sent it.
pub(crate) use cheng_contract::process::CommandRequest as Request;
/// What happened to a command, and how it ended.
pub(crate) use cheng_contract::process::{CommandOutcome as Outcome, Termination};

/// A refusal before anything ran.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct Refusal {
    /// The kind.
    pub kind: ErrorKind,
    /// What happened and what to do instead.
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Refusal {
        Refusal { kind, message: message.into() }
    }

    /// Whether this refusal is the operator's policy speaking (a denial), rather than a
    /// request that cannot be run as written (an error).
    pub fn is_policy(&self) -> bool {
        matches!(self.kind, ErrorKind::CommandNotAllowed | ErrorKind::ShellSyntaxDisabled)
    }
}

/// How much of the machine a command gets, which its rule or a person's answer chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tier {
    /// Full access, a person's explicit choice for one command: it reads what the
    /// host's user can, writes the workspace, its temp dir and the caches, and may use
    /// the whole network.
    Full,
    /// Confined (an allow rule, a known-safe command, a remembered answer, a plain
    /// yes): it reads only the system directories, the workspace and the toolchains and
    /// caches, writes as above, and reaches only the network `net` names.
    Confined {
        /// The network it may reach.
        net: Net,
    },
}

/// The network a confined command may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Net {
    /// None.
    #[default]
    None,
    /// All of it (a rule with `network = true`).
    All,
    /// Only these hosts, through the host's proxy, checked as `web_fetch` is.
    Hosts(Vec<String>),
}

impl Net {
    /// A rule's `network` setting.
    pub fn of(n: &crate::policy::process::RuleNetwork) -> Net {
        use crate::policy::process::RuleNetwork;
        match n {
            RuleNetwork::All(false) => Net::None,
            RuleNetwork::All(true) => Net::All,
            RuleNetwork::Hosts(h) => Net::Hosts(h.clone()),
        }
    }

    /// What two rules that both match allow together: the narrower.
    pub fn meet(&self, other: &Net) -> Net {
        match (self, other) {
            (Net::None, _) | (_, Net::None) => Net::None,
            (Net::All, n) | (n, Net::All) => n.clone(),
            (Net::Hosts(a), Net::Hosts(b)) => {
                let both: Vec<String> = a.iter().filter(|h| b.contains(h)).cloned().collect();
                if both.is_empty() { Net::None } else { Net::Hosts(both) }
            }
        }
    }

    /// For records: whether it reaches any network.
    pub fn any(&self) -> bool {
        !matches!(self, Net::None)
    }

    /// The hosts, for records (empty unless [`Net::Hosts`]).
    pub fn hosts(&self) -> Vec<String> {
        match self {
            Net::Hosts(h) => h.clone(),
            _ => Vec::new(),
        }
    }
}

/// A request that passed the checks, ready to be approved and run.
#[derive(Debug)]
pub(crate) struct Prepared {
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
    /// The entries the request itself set (shown on the card).
    pub request_env: Vec<(String, String)>,
    /// The clamped budget.
    pub timeout: Duration,
    /// Why, from the request.
    pub purpose: String,
    /// What the operator's rules say.
    pub decision: RuleDecision,
    /// For an allowed command: the network its rule grants.
    pub rule_network: Net,
    /// For a command that asks: what its card may be answered with (none for a card
    /// answered once, plainly: the host's git).
    pub offer: Option<crate::approvals::Offer>,
    /// The executable, resolved (what remembered answers match on).
    pub program_id: Option<PathBuf>,
    /// Set when the program could not be found; the run reports `spawn_failed`.
    pub missing: Option<String>,
    /// A Landlock plan of its own instead of the tier's (the host's git); the run adds
    /// the temporary directory to its writable trees.
    pub plan: Option<sandbox::Plan>,
    /// The known-safe entry (`ls`, `git status`) that lets it run without asking, when
    /// one does (`decision` is then `Allow`, and `plan` the known-safe confinement).
    pub known_safe: Option<String>,
    /// The path rules to carve out of its view of the workspace ([`carve`]) below full
    /// access; `None` for the host's own git, which keeps its own model.
    pub carve: Option<std::sync::Arc<crate::policy::files::FileRules>>,
}

impl Prepared {
    /// The working directory, absolute (for the approval card).
    pub fn cwd_abs(&self) -> PathBuf {
        if self.cwd_rel == "." { self.root.clone() } else { self.root.join(&self.cwd_rel) }
    }
}

/// Starts processes for one host.
#[derive(Debug, Clone)]
pub(crate) struct Spawner {
    cfg: ProcessConfig,
    rules: Rules,
    writable: Vec<PathBuf>,
    readable: Vec<PathBuf>,
    path: SearchPath,
    passthrough: BTreeMap<String, String>,
    /// Where private caches live (`<state>/caches`), when `private_caches` is on.
    caches: Option<PathBuf>,
    /// The host's own configuration files and state directory (and every place a
    /// configuration is looked up): when one lies in a workspace, no command runs there
    /// without a person's answer, since any command may write its workspace.
    protected: Vec<PathBuf>,
    /// `workspace_git_write`'s identity and rules.
    git: crate::policy::git::GitConfig,
    /// The known-safe list in force (empty when `known_safe` is off).
    known_safe: KnownSafe,
    /// Rules saved by "always" answers.
    pub(crate) learned: std::sync::Arc<learned::Store>,
    /// Grants of "this run" answers.
    pub(crate) run_grants: std::sync::Arc<learned::RunGrants>,
    /// How long a run may be idle before its "this run" grants end.
    pub(crate) run_idle: Duration,
    /// The network guard the proxy for commands with named hosts checks with.
    pub(crate) egress: Option<std::sync::Arc<crate::egress::Egress>>,
    /// The path rules carved out of an MCP server's view of the workspace.
    pub(crate) file_rules: Option<std::sync::Arc<crate::policy::files::FileRules>>,
    /// Each workspace's walk for the path rules' carve-outs, kept up to date.
    trees: std::sync::Arc<carve::Trees>,
}

/// `~/x` against the host's home; other entries as written; only absolute results.
fn expand_home(list: &[String]) -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    list.iter()
        .filter_map(|w| match (w.strip_prefix("~/"), &home) {
            (Some(rest), Some(h)) => Some(h.join(rest)),
            (Some(_), None) => None,
            (None, _) => Some(PathBuf::from(w)),
        })
        .filter(|p| p.is_absolute())
        .collect()
}

impl Spawner {
    /// A spawner with these settings. Reads the host's `PATH`, `HOME` and the
    /// allowlisted variables once, and resolves the rules' programs. `state` is the
    /// host's state directory (private caches live there).
    pub fn new(cfg: ProcessConfig, state: Option<&Path>, protected: Vec<PathBuf>) -> Spawner {
        static REAPED: std::sync::Once = std::sync::Once::new();
        REAPED.call_once(|| {
            let mech = match cfg.containment {
                crate::policy::process::ContainmentChoice::Auto => contain::detect(),
                crate::policy::process::ContainmentChoice::Walk => &contain::Mechanism::Walk,
            };
            contain::reap_stale(mech);
        });
        let path = SearchPath::from_env();
        // A bare name here is never resolved (no workspace is known yet, and a PATH entry
        // may lead into one): rules and whitelist entries written as bare names match by
        // name, and only a bare command word (`ls`, never `./ls`); a path resolves.
        let nowhere = Path::new("/");
        let rules = Rules::new(&cfg.rules, &cfg.command_whitelist.programs(), &|w| {
            let p = if w.contains('/') { PathBuf::from(w) } else { path.lookup(w, nowhere)? };
            ProgramId::of(&p, w)
        });
        Spawner {
            known_safe: KnownSafe::new(&cfg),
            writable: expand_home(&cfg.writable),
            readable: expand_home(&cfg.readable),
            passthrough: environment::passthrough(&cfg),
            caches: state.filter(|_| cfg.private_caches).map(|s| s.join("caches")),
            rules,
            path,
            protected,
            cfg,
            git: Default::default(),
            learned: std::sync::Arc::new(learned::Store::new(state)),
            run_grants: Default::default(),
            run_idle: Duration::from_millis(crate::policy::ServeConfig::default().idle_session_ms.max(1000)),
            egress: None,
            file_rules: None,
            trees: Default::default(),
        }
    }

    /// With the network guard that commands granted named hosts are checked by.
    pub fn with_egress(mut self, egress: std::sync::Arc<crate::egress::Egress>) -> Spawner {
        self.egress = Some(egress);
        self
    }

    /// With the path rules carved out of MCP servers' view of the workspace.
    pub fn with_file_rules(mut self, rules: std::sync::Arc<crate::policy::files::FileRules>) -> Spawner {
        self.file_rules = Some(rules);
        self
    }

    /// With the idle window that ends a run's "this run" grants.
    pub fn with_run_idle(mut self, idle: Duration) -> Spawner {
        self.run_idle = idle.max(Duration::from_secs(1));
        self
    }

    /// With `workspace_git_write`'s `[git]` settings.
    pub fn with_git(mut self, git: crate::policy::git::GitConfig) -> Spawner {
        self.git = git;
        self
    }

    /// Check `req` and resolve what it would run.
    pub fn prepare(&self, guard: &Guard, req: &Request) -> Result<Prepared, Refusal> {
        let (words, via_shell) = self.words(req)?;
        if words.iter().any(|w| w.contains('\0')) {
            return Err(Refusal::new(ErrorKind::InvalidArgument, "arguments cannot contain NUL bytes"));
        }
        let display = if via_shell {
            req.shell_string.clone().unwrap_or_default()
        } else {
            shlex::try_join(words.iter().map(String::as_str)).unwrap_or_else(|_| words.join(" "))
        };

        // The working directory, through the guard.
        let cwd_req = req.cwd.as_deref().filter(|c| !c.trim().is_empty()).unwrap_or(".");
        let opened = guard.open(cwd_req).map_err(|e| Refusal::new(e.kind(), e.to_string()))?;
        let st = rustix::fs::fstat(&opened.fd).map_err(|e| Refusal::new(ErrorKind::Io, e.to_string()))?;
        if !rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir() {
            return Err(Refusal::new(
                ErrorKind::InvalidArgument,
                format!("cwd \"{cwd_req}\" is a file, not a directory"),
            ));
        }
        let cwd_rel = if opened.rel.is_empty() { ".".to_string() } else { opened.rel.clone() };
        let root = guard.root();
        let cwd_abs = if cwd_rel == "." { root.to_path_buf() } else { root.join(&cwd_rel) };

        // The program, and what it starts.
        let (program, missing) = self.program(guard, &words[0], &cwd_rel)?;
        let resolve = |w: &str| -> Option<ProgramId> {
            let p = if w == words[0] {
                program.clone()
            } else if w.starts_with('/') {
                PathBuf::from(w)
            } else if w.contains('/') {
                cwd_abs.join(w)
            } else {
                self.path.lookup(w, root)?
            };
            ProgramId::of(&p, w)
        };
        let chain = launchers::chain(&words, &|w| resolve(w).map(|id| id.name().to_string()));

        // The whitelist and the operator's rules, for every program of the chain.
        match self.rules.not_whitelisted(&chain, &resolve) {
            Ok(None) => {}
            Ok(Some(step)) => {
                return Err(Refusal::new(
                    ErrorKind::CommandNotAllowed,
                    format!(
                        "\"{}\" is not in the operator's command whitelist ({}); use one of those programs or another tool",
                        step.name,
                        self.rules.whitelist_names().join(", ")
                    ),
                ));
            }
            Err(why) => {
                return Err(Refusal::new(
                    ErrorKind::CommandNotAllowed,
                    format!(
                        "a command whitelist is set and {why}; run a listed program ({}) directly",
                        self.rules.whitelist_names().join(", ")
                    ),
                ));
            }
        }
        let mut decided = self.rules.decide(&chain, &resolve);
        let protected_here = self.protected.iter().any(|p| p.starts_with(root));
        if decided.decision == RuleDecision::Allow && protected_here {
            tracing::info!(target: "cheng::process", workspace = %root.display(),
                "the host's configuration or state lies in this workspace: every command asks");
            decided = rules::Decided { decision: RuleDecision::Prompt, network: Net::None, ruled: true };
        }
        if decided.decision == RuleDecision::Forbid {
            return Err(Refusal::new(
                ErrorKind::CommandNotAllowed,
                format!("the operator's policy forbids running `{display}`; do not retry it, use another approach"),
            ));
        }
        // Where no rule speaks, a known-safe command runs unasked, confined.
        let mut known = None;
        if decided.decision == RuleDecision::Prompt && !decided.ruled && !protected_here && !via_shell {
            known = self.known_safe(&words, &chain, &program, missing.is_none(), &req.env, root);
            if known.is_some() {
                decided = rules::Decided { decision: RuleDecision::Allow, network: Net::None, ruled: false };
            }
        }

        // The environment.
        let mut env = self.passthrough.clone();
        env.insert("PATH".into(), self.path.env_value(root));
        if let Some(caches) = &self.caches {
            env.extend(environment::private_caches(&caches.join(workspace_key(root))));
        }
        environment::merge_request(&self.cfg, &mut env, &req.env)?;
        if chain.steps.iter().any(|s| resolve(&s.name).is_some_and(|id| id.name() == "git")) {
            env.extend(git::neutralising_env(guard, &cwd_abs, &[])?);
        }

        let timeout = Duration::from_millis(req.timeout_ms.unwrap_or(self.cfg.timeout_ms).clamp(1, MAX_TIMEOUT_MS));
        let program_id = missing.is_none().then(|| ProgramId::of(&program, &words[0])).flatten();
        let offer = (decided.decision == RuleDecision::Prompt).then(|| {
            self.offer(offer::Asking {
                words: &words,
                chain: &chain,
                via_shell,
                program: program_id.as_ref(),
                root,
                cwd_abs: &cwd_abs,
                explicit_prompt: decided.ruled,
                protected_here,
                guard,
            })
        });
        Ok(Prepared {
            program,
            argv0: words[0].clone(),
            args: words[1..].to_vec(),
            display,
            cwd_rel,
            root: root.to_path_buf(),
            cwd_fd: opened.fd,
            env: env.into_iter().collect(),
            request_env: req.env.clone(),
            timeout,
            purpose: req.purpose.clone().unwrap_or_default(),
            decision: decided.decision,
            rule_network: decided.network,
            offer,
            program_id: program_id.map(|id| id.path),
            missing,
            plan: known.as_ref().map(|(_, plan)| plan.clone()),
            known_safe: known.map(|(entry, _)| entry),
            carve: None,
        })
    }

    /// The known-safe entry admitting `words`, and the confinement it runs under, when
    /// the command may be known-safe at all: the list is on, Landlock confines commands
    /// here, the request sets no variable but locale and terminal ones, the command is
    /// one program started directly by a bare name, and that name is the real name of
    /// the executable the host's `PATH` gives — a program, not a script (which would need
    /// a shell), lying nowhere a command can write. It then reads only what an unasked
    /// command reads, writes only its temp dir, reaches no network, and executes only
    /// itself (and, for git, git's own helpers).
    fn known_safe(
        &self,
        words: &[String],
        chain: &launchers::Chain,
        program: &Path,
        found: bool,
        env: &[(String, String)],
        root: &Path,
    ) -> Option<(String, sandbox::Plan)> {
        let quiet_env = |name: &str| matches!(name, "LANG" | "TERM" | "TZ" | "USER") || name.starts_with("LC_");
        if self.known_safe.is_empty()
            || !self.cfg.landlock
            || sandbox::abi_version().is_none()
            || !found
            || !chain.is_direct()
            || words[0].contains('/')
            || !env.iter().all(|(k, _)| quiet_env(k))
        {
            return None;
        }
        // The words first (no I/O); then what the program is and where it lies.
        let entry = self.known_safe.admits(&words[0], &words[1..])?;
        let id = ProgramId::of(program, &words[0])?;
        if id.name() != words[0] {
            return None;
        }
        if self.writable_place_of(&id.path, root).is_some() {
            return None;
        }
        let execute = if words[0] == "git" {
            let git = git_write::git_binary(self, root).ok()?;
            (std::fs::canonicalize(&git.program).ok()? == id.path).then(|| git.execute.clone())?
        } else {
            // Itself and its ELF interpreter; a script (which would need a shell) is not.
            git_write::repo::executable(&id.path).ok()?
        };
        let mut readable = vec![root.to_path_buf()];
        readable.extend(self.readable.iter().cloned());
        let plan = sandbox::Plan {
            writable: Vec::new(),
            readable: Some(readable),
            network: false,
            system: None,
            connect: Vec::new(),
            execute: Some(execute),
        };
        Some((entry, plan))
    }

    /// The place commands can write (the workspace `root`, the temporary directory,
    /// `[process] writable`, the private caches), resolved, that holds `program`, if any:
    /// a program there may not stay the program a rule or the known-safe list vouched for.
    fn writable_place_of(&self, program: &Path, root: &Path) -> Option<PathBuf> {
        [root.to_path_buf(), std::env::temp_dir()]
            .into_iter()
            .chain(self.writable.iter().cloned())
            .chain(self.caches.iter().cloned())
            .map(|w| std::fs::canonicalize(&w).unwrap_or(w))
            .find(|w| program.starts_with(w))
    }

    /// The words to run, and whether they go through `sh -c`.
    fn words(&self, req: &Request) -> Result<(Vec<String>, bool), Refusal> {
        let invalid = |m: &str| Err(Refusal::new(ErrorKind::InvalidArgument, m));
        match (&req.shell_string, req.command.trim().is_empty()) {
            (Some(_), false) => invalid("give either `command` (with `args`) or `shell_string`, not both"),
            (None, true) => {
                invalid("`command` is empty: name the program to run in `command` and its arguments in `args`")
            }
            (None, false) => {
                Ok((std::iter::once(req.command.clone()).chain(req.args.iter().cloned()).collect(), false))
            }
            (Some(s), true) => {
                if self.rules.has_whitelist() {
                    return Err(Refusal::new(
                        ErrorKind::CommandNotAllowed,
                        "shell strings are refused while a command whitelist is set: pass the program in `command` and its arguments in `args`",
                    ));
                }
                if s.trim().is_empty() {
                    return invalid("`shell_string` is empty");
                }
                match shellwords::shell_syntax(s) {
                    Err(msg) => invalid(&msg),
                    Ok(Some(construct)) if !self.cfg.allow_shell_string => Err(Refusal::new(
                        ErrorKind::ShellSyntaxDisabled,
                        format!(
                            "shell syntax ({construct}) is disabled for shell strings: pass the program in `command` and each argument in `args`, \
                             and run pipelines or sequences as separate calls"
                        ),
                    )),
                    Ok(Some(_)) => Ok((vec!["sh".into(), "-c".into(), s.clone()], true)),
                    Ok(None) => match shlex::split(s) {
                        Some(w) if !w.is_empty() => Ok((w, false)),
                        _ => invalid("`shell_string` could not be split into words (an unclosed quote?)"),
                    },
                }
            }
        }
    }

    /// The executable `name` means, and why it cannot run when it cannot: the host's
    /// `PATH` for a bare name, the guard for a relative path, and for an absolute path
    /// only a file outside the workspace (one inside runs by its relative path, through
    /// the guard, or not at all).
    fn program(&self, guard: &Guard, name: &str, cwd_rel: &str) -> Result<(PathBuf, Option<String>), Refusal> {
        let root = guard.root();
        if !name.contains('/') {
            return Ok(match self.path.lookup(name, root) {
                Some(p) => (p, None),
                None => (
                    PathBuf::from(name),
                    Some(format!(
                        "\"{name}\" was not found on the host's PATH; check the spelling, or use a program that is installed \
                         (programs in the workspace run only by a relative path such as ./{name})"
                    )),
                ),
            });
        }
        if name.starts_with('/') {
            let p = PathBuf::from(name);
            let lexically_inside = cheng_contract::paths::lexical(name, &root.to_string_lossy()).is_ok();
            let really_inside = std::fs::canonicalize(&p).is_ok_and(|real| real.starts_with(root));
            if lexically_inside || really_inside {
                return Err(Refusal::new(
                    ErrorKind::PathRefused,
                    format!(
                        "Refusing program \"{name}\": it lies in the workspace; run a workspace program by its relative path \
                         (such as ./{}) so the workspace guard checks it",
                        resolve::basename(name)
                    ),
                ));
            }
            let missing = (!resolve::is_executable(&p)).then(|| format!("\"{name}\" is not an executable file"));
            return Ok((p, missing));
        }
        let rel = if cwd_rel == "." { name.to_string() } else { format!("{cwd_rel}/{name}") };
        let o = guard.open(&rel).map_err(|e| Refusal::new(e.kind(), e.to_string()))?;
        Ok((root.join(&o.rel), None))
    }
}

/// A short, stable name for a workspace's private caches.
fn workspace_key(root: &Path) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(root.as_os_str().as_encoded_bytes());
    let name = root.file_name().and_then(|n| n.to_str()).unwrap_or("workspace");
    let safe: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(32).collect();
    format!("{safe}-{}", &hex::encode(digest)[..12])
}
