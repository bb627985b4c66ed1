//! `workspace_git_write`'s host half: a typed git operation checked, decided by the
//! operator's `[[git.rules]]` (or a person), and run by the host's own git with
//! nothing the repository configures able to execute.
//!
//! What keeps the repository's programs from running, in layers:
//! - the operation is a fixed argument vector built here ([`Operation::argv`]): a
//!   builtin git command, never an alias, with every name checked ([`checks`]);
//! - git reads no global or system configuration (`GIT_CONFIG_GLOBAL=/dev/null`,
//!   `GIT_CONFIG_NOSYSTEM`), and the command-line settings of
//!   [`neutralising_env`](super::git::neutralising_env) override the repository's:
//!   hooks (`core.hooksPath=/dev/null`), fsmonitor, pager, editor, signing, every
//!   filter, diff and merge driver its configuration defines, plus automatic `gc` and
//!   maintenance; a configuration that includes another file is refused ([`repo`]);
//! - under Landlock git may execute only itself, its helper directory and its ELF
//!   interpreter: a hook, a filter or anything started through `/bin/sh` fails to
//!   execute even if a setting slipped through. It writes only the workspace and its
//!   temporary directory, and reaches no TCP port; no operation here talks to a remote.
//!
//! Nothing of the repository's runs before the decision: the checks read its files (by
//! the guard's rules: a FIFO, a device or a file over the cap refuses the operation at
//! once), never start git in it (even `git status` can write the index). The one git
//! that runs first is `git --exec-path` in `/`, once per host, to learn git's helper
//! directory: through the spawn path like every command, confined (it reads only the
//! system directories, writes nothing, executes only git and its interpreter) and
//! stopped at a timeout.

mod checks;
pub(crate) mod repo;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{Prepared, Refusal, Spawner, Termination, Tier, git, sandbox};
use crate::ErrorKind;
use crate::guard::Guard;
use crate::policy::process::{MAX_TIMEOUT_MS, RuleDecision};
use repo::{GitBinary, Repo};

/// One operation, as the `cheng:tool/git` interface carries it.
#[derive(Debug, Clone)]
pub(crate) enum Operation {
    /// Stage paths.
    Add(Vec<String>),
    /// Unstage paths.
    Unstage(Vec<String>),
    /// Discard working-tree changes.
    Restore(Vec<String>),
    /// Commit the index.
    Commit {
        /// Message.
        message: String,
        /// Replace the current commit.
        amend: bool,
        /// Commit without changes.
        allow_empty: bool,
    },
    /// Switch branches.
    Switch {
        /// Branch.
        branch: String,
        /// Create it.
        create: bool,
    },
    /// Delete a branch.
    BranchDelete {
        /// Branch.
        branch: String,
        /// Even unmerged.
        force: bool,
    },
    /// Stash changes.
    StashPush {
        /// Message.
        message: Option<String>,
        /// Untracked files too.
        include_untracked: bool,
        /// Only these paths.
        pathspecs: Vec<String>,
    },
    /// Apply and drop a stash entry.
    StashPop(u32),
    /// Create a tag.
    Tag {
        /// Name.
        name: String,
        /// What it names (`HEAD` when none).
        target: Option<String>,
        /// Annotated when given.
        message: Option<String>,
    },
}

/// A request from a component.
#[derive(Debug, Clone)]
pub(crate) struct GitRequest {
    /// Directory inside the repository, workspace-relative.
    pub cwd: Option<String>,
    /// What to do.
    pub operation: Operation,
    /// Budget in ms.
    pub timeout_ms: Option<u64>,
    /// Why.
    pub purpose: Option<String>,
}

impl Operation {
    /// The name rules and cards use.
    pub fn name(&self) -> &'static str {
        match self {
            Operation::Add(_) => "add",
            Operation::Unstage(_) => "unstage",
            Operation::Restore(_) => "restore",
            Operation::Commit { .. } => "commit",
            Operation::Switch { .. } => "switch",
            Operation::BranchDelete { .. } => "branch_delete",
            Operation::StashPush { .. } => "stash_push",
            Operation::StashPop(_) => "stash_pop",
            Operation::Tag { .. } => "tag",
        }
    }

    /// Check every name the operation carries.
    fn check(&self) -> Result<(), Refusal> {
        match self {
            Operation::Add(p) => checks::pathspecs(p, "add", true),
            Operation::Unstage(p) => checks::pathspecs(p, "unstage", true),
            Operation::Restore(p) => checks::pathspecs(p, "restore", true),
            Operation::Commit { message, .. } => checks::message(message, "commit", true),
            Operation::Switch { branch, .. } | Operation::BranchDelete { branch, .. } => checks::branch(branch),
            Operation::StashPush { message, pathspecs, .. } => {
                checks::message(message.as_deref().unwrap_or(""), "stash_push", false)?;
                checks::pathspecs(pathspecs, "stash_push", false)
            }
            Operation::StashPop(_) => Ok(()),
            Operation::Tag { name, target, message } => {
                checks::tag(name)?;
                if let Some(t) = target {
                    checks::revision(t)?;
                }
                match message {
                    Some(m) => checks::message(m, "an annotated tag", true),
                    None => Ok(()),
                }
            }
        }
    }

    /// Whether git will need an identity (a commit, a stash, an annotated tag).
    fn needs_identity(&self) -> bool {
        matches!(self, Operation::Commit { .. } | Operation::StashPush { .. } | Operation::Tag { message: Some(_), .. })
    }

    /// The branch rules match against: the one acted on.
    fn rule_branch<'a>(&'a self, current: Option<&'a str>) -> Option<&'a str> {
        match self {
            Operation::Switch { branch, .. } | Operation::BranchDelete { branch, .. } => Some(branch),
            _ => current,
        }
    }

    /// git's arguments (after `git`). `born`: whether `HEAD` names a commit.
    fn argv(&self, born: bool) -> Vec<String> {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<String>>();
        let with_paths = |mut head: Vec<String>, paths: &[String]| {
            head.push("--".into());
            head.extend(paths.iter().cloned());
            head
        };
        match self {
            Operation::Add(p) => with_paths(s(&["add"]), p),
            Operation::Unstage(p) if born => with_paths(s(&["restore", "--staged"]), p),
            // Before the first commit there is no HEAD to restore from.
            Operation::Unstage(p) => with_paths(s(&["rm", "--cached", "-r", "-q"]), p),
            Operation::Restore(p) => with_paths(s(&["restore", "--worktree"]), p),
            Operation::Commit { message, amend, allow_empty } => {
                let mut a = s(&["commit", "--no-verify", "-m"]);
                a.push(message.clone());
                if *amend {
                    a.push("--amend".into());
                }
                if *allow_empty {
                    a.push("--allow-empty".into());
                }
                a
            }
            Operation::Switch { branch, create: true } => s(&["switch", "-c", branch]),
            Operation::Switch { branch, create: false } => s(&["switch", "--no-guess", branch]),
            Operation::BranchDelete { branch, force } => s(&["branch", if *force { "-D" } else { "-d" }, branch]),
            Operation::StashPush { message, include_untracked, pathspecs } => {
                let mut a = s(&["stash", "push"]);
                if let Some(m) = message.as_deref().filter(|m| !m.is_empty()) {
                    a.extend(s(&["-m", m]));
                }
                if *include_untracked {
                    a.push("--include-untracked".into());
                }
                if pathspecs.is_empty() { a } else { with_paths(a, pathspecs) }
            }
            Operation::StashPop(n) => vec!["stash".into(), "pop".into(), format!("stash@{{{n}}}")],
            Operation::Tag { name, target, message } => {
                let mut a = s(&["tag"]);
                if let Some(m) = message {
                    a.extend(s(&["-a", "-m", m]));
                }
                a.push(name.clone());
                a.extend(target.iter().cloned());
                a
            }
        }
    }

    /// The approval card's lines for this operation (after the common ones).
    fn card_lines(&self) -> Vec<String> {
        let paths = |p: &[String]| format!("paths: {}", p.join(", "));
        let first = |m: &str| {
            let mut lines = m.trim().lines();
            let head = lines.next().unwrap_or("").to_string();
            match lines.filter(|l| !l.trim().is_empty()).count() {
                0 => format!("message: {head}"),
                n => format!("message: {head}  (+{n} more line{})", if n == 1 { "" } else { "s" }),
            }
        };
        match self {
            Operation::Add(p) | Operation::Unstage(p) => vec![paths(p)],
            Operation::Restore(p) => {
                vec![paths(p), "DESTRUCTIVE: uncommitted changes to these paths are discarded for good".into()]
            }
            Operation::Commit { message, amend, allow_empty } => {
                let mut v = vec![first(message)];
                if *amend {
                    v.push("AMEND: replaces the current commit (its message and content)".into());
                }
                if *allow_empty {
                    v.push("allow_empty: commits even without changes".into());
                }
                v
            }
            Operation::Switch { branch, create } => {
                vec![format!("to branch: {branch}{}", if *create { " (created at the current commit)" } else { "" })]
            }
            Operation::BranchDelete { branch, force } => {
                let mut v = vec![format!("branch: {branch}")];
                if *force {
                    v.push("FORCE: deleted even if its commits are merged nowhere (they may be lost)".into());
                }
                v
            }
            Operation::StashPush { message, include_untracked, pathspecs } => {
                let mut v = Vec::new();
                if !pathspecs.is_empty() {
                    v.push(paths(pathspecs));
                }
                if let Some(m) = message {
                    v.push(first(m));
                }
                if *include_untracked {
                    v.push("untracked files too".into());
                }
                v
            }
            Operation::StashPop(n) => vec![format!("stash entry: stash@{{{n}}} (applied, then dropped)")],
            Operation::Tag { name, target, message } => {
                let mut v = vec![format!("tag: {name} at {}", target.as_deref().unwrap_or("HEAD"))];
                match message {
                    Some(m) => v.push(first(m)),
                    None => v.push("lightweight (no message)".into()),
                }
                v
            }
        }
    }
}

/// A checked request, ready for its decision and run.
#[derive(Debug)]
pub(crate) struct PreparedGit {
    /// What runs.
    pub prepared: Prepared,
    /// The repository.
    pub repo: Repo,
    /// The card's first line.
    pub summary: String,
    /// The card's body.
    pub detail: String,
}

/// Settings git runs with here besides [`git::neutralising_env`]'s.
const WRITER_SETTINGS: &[(&str, &str)] = &[
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("user.useConfigOnly", "true"),
    ("core.attributesFile", "/dev/null"),
    ("advice.detachedHead", "false"),
    ("submodule.recurse", "false"),
    ("protocol.allow", "never"),
];

/// How long `git --exec-path` may take (it prints a compiled-in directory at once).
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// The host's git, found once per host process (a failure is not kept: the next call
/// tries again). The first call waits for the `git --exec-path` probe, at most
/// [`PROBE_TIMEOUT`] and the kill grace.
pub(crate) fn git_binary(spawner: &Spawner, root: &Path) -> Result<&'static GitBinary, Refusal> {
    static GIT: Mutex<Option<&'static GitBinary>> = Mutex::new(None);
    let mut slot = GIT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(git) = *slot {
        return Ok(git);
    }
    let git = spawner
        .find_git(root)
        .map_err(|why| Refusal::new(ErrorKind::SpawnFailed, format!("git cannot run here: {why}")))?;
    let git: &'static GitBinary = Box::leak(Box::new(git));
    *slot = Some(git);
    Ok(git)
}

impl Spawner {
    /// git on the host's `PATH`, with its helper directory (`git --exec-path`, asked
    /// through the spawn path) among what it may execute.
    fn find_git(&self, root: &Path) -> Result<GitBinary, String> {
        let mut git = GitBinary::locate(&self.path, root)?;
        // `git --exec-path` reads no configuration; it prints a compiled-in directory.
        let out = self.probe(&git.execute[0], &["--exec-path"], &git.execute, root, PROBE_TIMEOUT)?;
        let exec_path = PathBuf::from(out.trim());
        if exec_path.is_absolute() && exec_path.is_dir() {
            git.execute.push(std::fs::canonicalize(&exec_path).unwrap_or(exec_path));
        }
        Ok(git)
    }

    /// Run `program args` for the host's own use the way every command runs
    /// ([`Spawner::run`]: namespaces and a cgroup of its own, stopped at `timeout` with
    /// its whole tree), under Landlock reading only the system directories, writing
    /// only its temporary directory, reaching no network and executing only `execute`;
    /// in `/`, with an empty environment but `LC_ALL=C`. Its standard output, or why it
    /// failed. Synchronous: the run is driven on a thread of its own with a runtime of
    /// its own, so this works from any caller, inside a runtime or not.
    fn probe(
        &self,
        program: &Path,
        args: &[&str],
        execute: &[PathBuf],
        root: &Path,
        timeout: Duration,
    ) -> Result<String, String> {
        use rustix::fs::{Mode, OFlags};
        let cwd = rustix::fs::open("/", OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty())
            .map_err(|e| format!("cannot open /: {e}"))?;
        let argv0 = program.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let display = std::iter::once(program.display().to_string())
            .chain(args.iter().map(|a| a.to_string()))
            .collect::<Vec<_>>()
            .join(" ");
        let prepared = Prepared {
            program: program.to_path_buf(),
            argv0,
            args: args.iter().map(|a| a.to_string()).collect(),
            display: display.clone(),
            cwd_rel: "/".into(),
            root: root.to_path_buf(),
            cwd_fd: cwd,
            env: vec![("LC_ALL".into(), "C".into())],
            request_env: Vec::new(),
            timeout,
            purpose: String::new(),
            decision: RuleDecision::Allow,
            rule_network: Default::default(),
            offer: None,
            program_id: None,
            missing: None,
            plan: Some(sandbox::Plan {
                writable: Vec::new(),
                readable: Some(Vec::new()),
                network: false,
                system: None,
                connect: Vec::new(),
                execute: Some(execute.to_vec()),
            }),
            known_safe: None,
            carve: None,
        };
        let ran = std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start a runtime for `{display}`: {e}"))?;
                Ok(rt.block_on(self.run(
                    prepared,
                    Tier::Confined { net: Default::default() },
                    &CancellationToken::new(),
                )))
            })
            .join()
        });
        let out = match ran {
            Ok(Ok(out)) => out,
            Ok(Err(why)) => return Err(why),
            Err(_) => return Err(format!("`{display}` could not be run: its thread ended abnormally")),
        };
        match out.termination {
            Termination::Exited if out.exit_code == Some(0) => Ok(out.stdout),
            Termination::TimedOut => Err(format!("`{display}` did not finish within {} s", timeout.as_secs())),
            _ => Err(format!(
                "`{display}` failed ({}): {}",
                out.exit_code.map(|c| format!("exit code {c}")).unwrap_or_else(|| out.termination.as_str().into()),
                out.error.unwrap_or_else(|| out.stderr.trim().to_string())
            )),
        }
    }
}

impl Spawner {
    /// Check `req` and work out what would run; nothing runs and nothing is written.
    pub(crate) fn prepare_git(&self, guard: &Guard, req: &GitRequest) -> Result<PreparedGit, Refusal> {
        let op = &req.operation;
        op.check()?;
        let root = guard.root();

        // The repository, from the working directory through the guard.
        let cwd_req = req.cwd.as_deref().filter(|c| !c.trim().is_empty()).unwrap_or(".");
        if cwd_req.split(['/', '\\']).any(|s| s.eq_ignore_ascii_case(".git")) {
            return Err(Refusal::new(
                ErrorKind::PathRefused,
                format!("cwd \"{cwd_req}\" lies in a .git directory; give a directory of the work tree"),
            ));
        }
        let opened = guard.open(cwd_req).map_err(|e| Refusal::new(e.kind(), e.to_string()))?;
        let cwd_abs =
            if opened.rel.is_empty() || opened.rel == "." { root.to_path_buf() } else { root.join(&opened.rel) };
        if !cwd_abs.is_dir() {
            return Err(Refusal::new(ErrorKind::InvalidArgument, format!("cwd \"{cwd_req}\" is not a directory")));
        }
        let repo = repo::find(guard, &cwd_abs)?;
        let repo_cfg = repo.config(guard)?;
        let (branch, head) = repo.head(guard)?;

        // What git needs and must not meet.
        if repo.git_dir.join("index.lock").exists() {
            return Err(Refusal::new(
                ErrorKind::Io,
                format!(
                    "another git process seems to be running in \"{}\": its index.lock exists. Try again once it has \
                     finished; if no git is running, a person can remove the stale {}",
                    repo.top_rel,
                    repo.git_dir.join("index.lock").strip_prefix(root).unwrap_or(&repo.git_dir).display()
                ),
            ));
        }
        let identity = match (&self.git.user_name, &self.git.user_email) {
            (Some(n), Some(e)) => Some((n.clone(), e.clone())),
            _ => None,
        };
        if op.needs_identity() && identity.is_none() && (repo_cfg.user_name.is_none() || repo_cfg.user_email.is_none())
        {
            return Err(Refusal::new(
                ErrorKind::InvalidArgument,
                format!(
                    "{} needs an author identity and none is set: the operator sets [git] user_name and user_email in \
                     the host's configuration, or the repository's own config has user.name and user.email (git's \
                     global and system configuration are not read here)",
                    op.name()
                ),
            ));
        }
        let exists = match op {
            Operation::BranchDelete { branch: b, .. } | Operation::Switch { branch: b, .. } => {
                repo.has_branch(guard, b)?
            }
            _ => false,
        };
        match op {
            Operation::BranchDelete { branch: b, .. } if branch.as_deref() == Some(b) => {
                return Err(Refusal::new(
                    ErrorKind::InvalidArgument,
                    format!("\"{b}\" is the current branch and cannot be deleted; switch to another branch first"),
                ));
            }
            Operation::BranchDelete { branch: b, .. } | Operation::Switch { branch: b, create: false } if !exists => {
                return Err(Refusal::new(
                    ErrorKind::NotFound,
                    format!("there is no branch \"{b}\" in this repository"),
                ));
            }
            Operation::Switch { branch: b, create: true } if exists => {
                return Err(Refusal::new(
                    ErrorKind::InvalidArgument,
                    format!("a branch named \"{b}\" already exists; switch to it without `create`"),
                ));
            }
            _ => {}
        }

        // The operator's rules; a workspace holding the host's own files always asks.
        let mut decision = self.git.decide(op.name(), op.rule_branch(branch.as_deref()));
        if decision == RuleDecision::Allow && self.protected.iter().any(|p| p.starts_with(root)) {
            decision = RuleDecision::Prompt;
        }
        let args = op.argv(head.is_some());
        let display = shlex::try_join(std::iter::once("git").chain(args.iter().map(String::as_str)))
            .unwrap_or_else(|_| format!("git {}", args.join(" ")));
        if decision == RuleDecision::Forbid {
            return Err(Refusal::new(
                ErrorKind::CommandNotAllowed,
                format!(
                    "the operator's git rules forbid {} {}; do not retry it, leave it to the person",
                    op.name(),
                    op.rule_branch(branch.as_deref()).map(|b| format!("on branch \"{b}\"")).unwrap_or_default()
                ),
            ));
        }

        // How it runs.
        let git_bin = git_binary(self, root)?;
        let top = guard
            .open(if repo.top_rel == "." { "." } else { &repo.top_rel })
            .map_err(|e| Refusal::new(e.kind(), format!("the repository's directory cannot be opened: {e}")))?;
        let mut env: Vec<(String, String)> = vec![
            ("PATH".into(), self.path.env_value(root)),
            ("LC_ALL".into(), "C".into()),
            ("GIT_DIR".into(), repo.git_dir.to_string_lossy().into_owned()),
            ("GIT_WORK_TREE".into(), repo.top.to_string_lossy().into_owned()),
            ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
            ("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()),
            ("GIT_ATTR_NOSYSTEM".into(), "1".into()),
            ("GIT_TERMINAL_PROMPT".into(), "0".into()),
            ("GIT_ADVICE".into(), "0".into()),
        ];
        env.extend(git::neutralising_env(guard, &repo.top, WRITER_SETTINGS)?);
        if let Some((name, email)) = &identity {
            for who in ["AUTHOR", "COMMITTER"] {
                env.push((format!("GIT_{who}_NAME"), name.clone()));
                env.push((format!("GIT_{who}_EMAIL"), email.clone()));
            }
        }
        let mut writable = vec![root.to_path_buf()];
        if !repo.common.starts_with(root) {
            writable.push(repo.common.clone());
        }
        let plan = sandbox::Plan {
            writable,
            readable: Some(vec![root.to_path_buf()]),
            network: false,
            system: None,
            connect: Vec::new(),
            execute: Some(git_bin.execute.clone()),
        };

        let shown_repo = repo.top.display().to_string();
        let summary = format!("git {} in {shown_repo}", op.name().replace('_', " "));
        let mut detail = vec![
            format!("operation: {}", op.name()),
            format!("repository: {shown_repo}"),
            format!("branch: {}", branch.as_deref().unwrap_or("(detached HEAD)")),
        ];
        detail.extend(op.card_lines());
        // The command as it will run, the message (shown above by its first line) elided.
        let message = match op {
            Operation::Commit { message, .. } => Some(message.as_str()),
            Operation::StashPush { message, .. } | Operation::Tag { message, .. } => message.as_deref(),
            _ => None,
        };
        let shown_args = args.iter().map(|a| if Some(a.as_str()) == message { "<message>" } else { a.as_str() });
        let card_display =
            shlex::try_join(std::iter::once("git").chain(shown_args)).unwrap_or_else(|_| display.clone());
        detail.push(format!("runs: {card_display}"));
        detail.push("with the repository's hooks, filters and configured programs switched off".into());
        let timeout = Duration::from_millis(req.timeout_ms.unwrap_or(self.cfg.timeout_ms).clamp(1, MAX_TIMEOUT_MS));
        let prepared = Prepared {
            program: git_bin.program.clone(),
            argv0: "git".into(),
            args,
            display,
            cwd_rel: repo.top_rel.clone(),
            root: root.to_path_buf(),
            cwd_fd: top.fd,
            env,
            request_env: Vec::new(),
            timeout,
            purpose: req.purpose.clone().unwrap_or_default(),
            decision,
            rule_network: Default::default(),
            offer: None,
            program_id: None,
            missing: None,
            plan: Some(plan),
            known_safe: None,
            carve: None,
        };
        Ok(PreparedGit { prepared, repo, summary, detail: detail.join("\n") })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::process::ProcessConfig;
    use crate::process::Tier;

    /// The last layer on its own: git told to run a shell (an alias, bypassing every
    /// setting above) cannot execute `/bin/sh` under the host's ruleset; the same run
    /// without the execute list does (the control).
    #[tokio::test]
    async fn under_the_ruleset_git_can_execute_nothing_but_itself() {
        assert!(sandbox::abi_version().is_some(), "this test needs Landlock (Linux 5.13 or later)");
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("git").args(["init", "-q"]).current_dir(dir.path()).status().unwrap();
        assert!(ok.success());
        let root = dir.path().canonicalize().unwrap();
        let guard = Guard::new(&root).unwrap();
        let spawner = Spawner::new(ProcessConfig::default(), None, vec![]);
        let req =
            GitRequest { cwd: None, operation: Operation::Add(vec![".".into()]), timeout_ms: None, purpose: None };
        let marker = root.join("shell-ran");
        for limited in [true, false] {
            let mut p = spawner.prepare_git(&guard, &req).unwrap();
            p.prepared.args = vec!["-c".into(), format!("alias.x=!touch {}", marker.display()), "x".into()];
            if !limited {
                p.prepared.plan.as_mut().unwrap().execute = None;
            }
            let out = spawner.run(p.prepared, Tier::Full, &tokio_util::sync::CancellationToken::new()).await;
            assert_eq!(marker.exists(), !limited, "limited={limited}: {out:?}");
            if limited {
                assert_ne!(out.exit_code, Some(0), "{out:?}");
            }
        }
    }

    /// `git --exec-path` runs through the spawn path: the helper directory plain git
    /// names is among what git may execute.
    #[test]
    fn the_exec_path_is_asked_of_git_through_the_spawn_path() {
        let dir = tempfile::tempdir().unwrap();
        let spawner = Spawner::new(ProcessConfig::default(), None, vec![]);
        let git = spawner.find_git(dir.path()).unwrap();
        let plain = std::process::Command::new("git").arg("--exec-path").output().unwrap();
        let want = std::fs::canonicalize(String::from_utf8(plain.stdout).unwrap().trim()).unwrap();
        assert_eq!(git.execute.last(), Some(&want), "{:?}", git.execute);
    }

    /// The probe is stopped at its timeout, and confined: it cannot read a file outside
    /// the system directories that the same program reads when run plainly (the
    /// control), while it reads one inside them. From inside a runtime too.
    #[tokio::test]
    async fn a_probe_ends_at_its_timeout_and_reads_only_system_directories() {
        assert!(sandbox::abi_version().is_some(), "this test needs Landlock (Linux 5.13 or later)");
        let dir = tempfile::tempdir().unwrap();
        let spawner = Spawner::new(ProcessConfig::default(), None, vec![]);
        let exe = |name: &str| std::fs::canonicalize(format!("/usr/bin/{name}")).unwrap();
        let (sleep, cat) = (exe("sleep"), exe("cat"));
        let started = std::time::Instant::now();
        let timeout = Duration::from_millis(500);
        let e = spawner.probe(&sleep, &["60"], &repo::executable(&sleep).unwrap(), dir.path(), timeout).unwrap_err();
        assert!(e.contains("did not finish within"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "s3cret").unwrap();
        let secret = secret.to_str().unwrap();
        let cat_exec = repo::executable(&cat).unwrap();
        let t = Duration::from_secs(10);
        let e = spawner.probe(&cat, &[secret], &cat_exec, dir.path(), t).unwrap_err();
        assert!(e.contains("Permission denied"), "{e}");
        let plain = std::process::Command::new(&cat).arg(secret).output().unwrap();
        assert_eq!(plain.stdout, b"s3cret");
        let ok = spawner.probe(&cat, &["/etc/passwd"], &cat_exec, dir.path(), t);
        assert!(ok.is_ok(), "{ok:?}");
    }
}
