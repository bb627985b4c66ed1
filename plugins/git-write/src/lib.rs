//! The `git-write` component: `workspace_git_write`. Like the shell component it holds
//! no authority of its own and mounts no files: it turns the model's request into one
//! typed `cheng:tool/git` operation, and the host checks every path and name, applies
//! the operator's git rules or asks a person, and runs its own git with the
//! repository's hooks, filters and configured programs switched off and confined.
//! There is no network operation to ask for: `push`, `fetch`, `pull`, `clone` and
//! submodule updates are refused here with a message that says so.

use cheng_sdk::host::{self, GitOperation, Termination};
use cheng_sdk::prelude::*;

/// Operations that reach another machine; none exists in this tool.
const NETWORK: &[&str] =
    &["push", "fetch", "pull", "clone", "submodule", "submodule_update", "remote", "ls_remote", "ls-remote"];

/// The operations, for messages.
const OPERATIONS: &str = "add, unstage, restore, commit, switch, branch_delete, stash_push, stash_pop or tag";

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitWriteInput {
    /// add, unstage, restore, commit, switch, branch_delete, stash_push, stash_pop or tag.
    operation: String,
    /// A directory inside the repository.
    #[serde(default)]
    cwd: Option<String>,
    /// add, unstage, restore (required), stash_push: repository-relative; "." for all.
    #[serde(default)]
    pathspecs: Vec<String>,
    /// commit (required), tag (annotates), stash_push.
    #[serde(default)]
    message: Option<String>,
    /// commit.
    #[serde(default)]
    amend: bool,
    /// commit.
    #[serde(default)]
    allow_empty: bool,
    /// switch, branch_delete.
    #[serde(default)]
    branch: Option<String>,
    /// switch: create it.
    #[serde(default)]
    create: bool,
    /// branch_delete: even if unmerged.
    #[serde(default)]
    force: bool,
    /// stash_push.
    #[serde(default)]
    include_untracked: bool,
    /// stash_pop: entry; 0 (default) is the newest.
    #[serde(default)]
    stash: Option<u32>,
    /// tag.
    #[serde(default)]
    name: Option<String>,
    /// tag: default HEAD.
    #[serde(default)]
    target: Option<String>,
    /// Default 60000, at most 600000.
    #[serde(default)]
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
    #[serde(default)]
    purpose: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct GitWriteOutput {
    operation: String,
    success: bool,
    summary: String,
    repository: String,
    /// Without the host's settings.
    command_display: String,
    exit_code: Option<i32>,
    termination: String,
    duration_ms: u64,
    current_branch: Option<String>,
    head: Option<String>,
    stdout: String,
    stdout_truncated: bool,
    stderr: String,
    stderr_truncated: bool,
    error_kind: Option<String>,
    terminal: bool,
    error: Option<String>,
}

/// Which input fields each operation takes (besides operation, cwd, timeout_ms, purpose).
fn fields_used(input: &GitWriteInput) -> Vec<&'static str> {
    let mut v = Vec::new();
    let set = [
        ("pathspecs", !input.pathspecs.is_empty()),
        ("message", input.message.is_some()),
        ("amend", input.amend),
        ("allow_empty", input.allow_empty),
        ("branch", input.branch.is_some()),
        ("create", input.create),
        ("force", input.force),
        ("include_untracked", input.include_untracked),
        ("stash", input.stash.is_some()),
        ("name", input.name.is_some()),
        ("target", input.target.is_some()),
    ];
    for (name, given) in set {
        if given {
            v.push(name);
        }
    }
    v
}

fn allowed_fields(op: &str) -> &'static [&'static str] {
    match op {
        "add" | "unstage" | "restore" => &["pathspecs"],
        "commit" => &["message", "amend", "allow_empty"],
        "switch" => &["branch", "create"],
        "branch_delete" => &["branch", "force"],
        "stash_push" => &["message", "include_untracked", "pathspecs"],
        "stash_pop" => &["stash"],
        "tag" => &["name", "target", "message"],
        _ => &[],
    }
}

fn required(value: Option<String>, field: &str, op: &str) -> Result<String, Failure> {
    value.ok_or_else(|| Failure::invalid_argument(format!("{op} needs `{field}`")))
}

/// The typed operation the input asks for.
fn operation(input: &mut GitWriteInput) -> Result<GitOperation, Failure> {
    let raw = std::mem::take(&mut input.operation);
    input.operation = raw.trim().to_ascii_lowercase().replace('-', "_");
    let op = input.operation.clone();
    if NETWORK.contains(&op.as_str()) {
        return Err(Failure::new(
            ErrorKind::CommandNotAllowed,
            format!(
                "`{op}` would reach another machine, and workspace_git_write has no network operations (no push, \
                 fetch, pull, clone or submodule update). Do not retry; ask the person to run it themselves"
            ),
        ));
    }
    let allowed = allowed_fields(&op);
    if allowed.is_empty() {
        return Err(Failure::invalid_argument(format!("unknown operation \"{raw}\": use {OPERATIONS}")));
    }
    if let Some(extra) = fields_used(input).into_iter().find(|f| !allowed.contains(f)) {
        return Err(Failure::invalid_argument(format!(
            "`{extra}` does not apply to {op} (it takes: {})",
            allowed.join(", ")
        )));
    }
    let paths = std::mem::take(&mut input.pathspecs);
    Ok(match op.as_str() {
        "add" => GitOperation::Add(paths),
        "unstage" => GitOperation::Unstage(paths),
        "restore" => GitOperation::Restore(paths),
        "commit" => GitOperation::Commit(host::CommitOptions {
            message: required(input.message.take(), "message", "commit")?,
            amend: input.amend,
            allow_empty: input.allow_empty,
        }),
        "switch" => GitOperation::Switch(host::SwitchOptions {
            branch: required(input.branch.take(), "branch", "switch")?,
            create: input.create,
        }),
        "branch_delete" => GitOperation::BranchDelete(host::BranchDeleteOptions {
            branch: required(input.branch.take(), "branch", "branch_delete")?,
            force: input.force,
        }),
        "stash_push" => GitOperation::StashPush(host::StashPushOptions {
            message: input.message.take(),
            include_untracked: input.include_untracked,
            pathspecs: paths,
        }),
        "stash_pop" => GitOperation::StashPop(input.stash.unwrap_or(0)),
        _ => GitOperation::Tag(host::TagOptions {
            name: required(input.name.take(), "name", "tag")?,
            target: input.target.take(),
            message: input.message.take(),
        }),
    })
}

/// git's first meaningful stderr line (`fatal: …`, `error: …`), for summaries.
fn first_complaint(stderr: &str) -> Option<&str> {
    let mut lines = stderr.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.clone().next();
    lines.find(|l| l.starts_with("fatal:") || l.starts_with("error:")).or(first)
}

pub struct WorkspaceGitWrite;
impl Tool for WorkspaceGitWrite {
    const NAME: &'static str = "workspace_git_write";
    const DESCRIPTION: &'static str = "Change the git repository; no network operations; hooks never run. A failing \
        git is reported, not an error.";
    const NEEDS: Needs = Needs::NONE.with_spawn();
    type Input = GitWriteInput;
    type Output = GitWriteOutput;

    fn run(mut input: GitWriteInput, _cx: &Context) -> Result<GitWriteOutput, Failure> {
        let operation = operation(&mut input)?;
        let op_name = input.operation;
        let req = host::GitRequest { cwd: input.cwd, operation, timeout_ms: input.timeout_ms, purpose: input.purpose };
        let host::GitOutcome {
            command_display,
            repository,
            exit_code,
            termination,
            signal,
            duration_ms,
            timeout_ms,
            stdout,
            stdout_truncated,
            stderr,
            stderr_truncated,
            error,
            branch,
            head,
        } = host::git_write(&req)?;
        let out = host::Outcome {
            cwd: repository,
            exit_code,
            signal,
            duration_ms,
            timeout_ms,
            stdout,
            stdout_truncated,
            stderr,
            stderr_truncated,
            error,
            ..host::Outcome::new(command_display, Termination::from(termination))
        };
        Ok(shape(op_name, out, branch, head))
    }
}

/// The tool's answer: the contract's verdict on git's outcome (its `cwd` the
/// repository), with where the branch is after a success and git's own complaint after
/// a failure.
fn shape(operation: String, out: host::Outcome, branch: Option<String>, head: Option<String>) -> GitWriteOutput {
    let verdict = out.verdict();
    let mut summary = verdict.summary;
    let mut error = verdict.error;
    if verdict.success {
        let on = branch.as_deref().map(|b| format!("branch {b}")).unwrap_or("detached HEAD".into());
        match &head {
            Some(h) => summary.push_str(&format!("; {on} is at {}", &h[..h.len().min(12)])),
            None => summary.push_str(&format!("; {on} has no commits yet")),
        }
    } else if out.termination == Termination::Exited
        && let Some(why) = first_complaint(&out.stderr).or_else(|| first_complaint(&out.stdout))
    {
        summary.push_str(&format!(": {why}"));
        error = Some(why.to_string());
    }
    GitWriteOutput {
        operation,
        success: verdict.success,
        summary,
        repository: out.cwd,
        command_display: out.command_display,
        exit_code: out.exit_code,
        termination: out.termination.as_str().to_string(),
        duration_ms: out.duration_ms,
        current_branch: branch,
        head,
        stdout: out.stdout,
        stdout_truncated: out.stdout_truncated,
        stderr: out.stderr,
        stderr_truncated: out.stderr_truncated,
        error_kind: verdict.error_kind.map(|k| k.code().to_string()),
        terminal: verdict.terminal,
        error,
    }
}

cheng_sdk::export_tools!(WorkspaceGitWrite);

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(termination: Termination) -> host::Outcome {
        host::Outcome {
            cwd: ".".into(),
            duration_ms: 61_500,
            timeout_ms: 60_000,
            ..host::Outcome::new("git commit -m x", termination)
        }
    }

    fn shaped(out: host::Outcome) -> GitWriteOutput {
        shape("commit".into(), out, Some("main".into()), Some("0123456789abcdef0123".into()))
    }

    #[test]
    fn a_success_says_where_the_branch_is() {
        let r = shaped(host::Outcome { exit_code: Some(0), ..outcome(Termination::Exited) });
        assert!(r.success);
        assert_eq!(r.summary, "`git commit -m x` exited with code 0; branch main is at 0123456789ab");
        let r =
            shape("commit".into(), host::Outcome { exit_code: Some(0), ..outcome(Termination::Exited) }, None, None);
        assert_eq!(r.summary, "`git commit -m x` exited with code 0; detached HEAD has no commits yet");
    }

    #[test]
    fn a_failure_gives_gits_complaint() {
        let stderr = "hint: something\nerror: nothing added to commit\n".to_string();
        let r = shaped(host::Outcome { exit_code: Some(1), stderr, ..outcome(Termination::Exited) });
        assert!(!r.success);
        assert_eq!(r.summary, "`git commit -m x` failed with exit code 1: error: nothing added to commit");
        assert_eq!((r.error_kind, r.error.as_deref()), (None, Some("error: nothing added to commit")));
        let r = shaped(host::Outcome { exit_code: Some(1), ..outcome(Termination::Exited) });
        assert_eq!((r.summary.as_str(), r.error), ("`git commit -m x` failed with exit code 1", None));
    }

    #[test]
    fn the_other_endings_are_the_contracts_words() {
        let r = shaped(outcome(Termination::TimedOut));
        assert_eq!(r.summary, "Command timed out after 60000 ms and was killed");
        assert_eq!((r.error_kind.as_deref(), r.terminal), (Some("LOCAL_EXECUTOR_TIMEOUT"), false));
        let r = shaped(outcome(Termination::Cancelled));
        assert_eq!(r.summary, "Command was cancelled after 61500 ms and was killed");
        assert_eq!(r.error_kind.as_deref(), Some("LOCAL_EXECUTOR_CANCELLED"));
        // The host passes the signal on: it is named, as a command's is.
        let r = shaped(host::Outcome { signal: Some(9), ..outcome(Termination::Signalled) });
        assert_eq!(r.summary, "`git commit -m x` was killed by SIGKILL");
        assert_eq!(r.error.as_deref(), Some("`git commit -m x` was killed by SIGKILL"));
        let why = "git was not found on the host's PATH";
        let r = shaped(host::Outcome { error: Some(why.into()), ..outcome(Termination::SpawnFailed) });
        assert_eq!(r.summary, format!("`git commit -m x` could not be started: {why}"));
        assert_eq!(
            (r.error_kind.as_deref(), r.terminal, r.error.as_deref()),
            (Some("LOCAL_EXECUTOR_SPAWN_FAILED"), true, Some(why))
        );
        assert_eq!(r.repository, ".");
    }
}
