//! The `git` component: `workspace_git`, read-only git inspection with gix running
//! inside the sandbox. The workspace is mounted read-only; nothing runs: no process, no
//! hooks, filters, pagers, fsmonitor or external diff from the repository's config.
//! Destructive operations do not exist.
//!
//! - `status`: `git status --porcelain=v1 -uall` lines, and `files`: HEAD against the
//!   index guided by the index's cached tree (`staged.rs`; gix when renames with edits
//!   could be involved), the index against the working tree from the host's stats
//!   (`worktree.rs`), untracked files from the same listings.
//! - `diff`: the working tree against `HEAD` (`git diff HEAD`), as a patch `git apply`
//!   accepts, built from the `HEAD` tree, the index and the files (gix has no
//!   worktree-to-tree diff); renames with the same content paired.
//! - `log`: up to `max_count` commits from `revision` (default `HEAD`), narrowed by
//!   pathspecs, git's default format, and `commits`.
//! - `show`: one commit's header and its patch against its first parent.
//! - `branch`: local branches like `git branch`, `branches` and `current_branch`.
//!
//! gix maps files with memmap2 and reads file times with filetime; on WASI neither
//! works, so the plugins' build patches both with stand-ins written here
//! (`plugins/shims`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use cheng_sdk::prelude::*;
use gix::bstr::ByteSlice;

mod branch;
mod log;
mod names;
mod patch;
mod repo;
mod staged;
mod status;
mod worktree;

use branch::*;
use log::*;
use names::*;
use patch::*;
use repo::*;
use status::*;

/// Default cap on `stdout`.
pub const DEFAULT_MAX_BYTES: u64 = 262_144;

/// Default number of commits.
pub const DEFAULT_MAX_COUNT: u32 = 20;

/// Most commits.
pub const MAX_COUNT: u32 = 100;

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    // Explained by the tool's description; no doc comments, so the schema is a plain `enum`.
    Status,
    Diff,
    Log,
    Show,
    Branch,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitInput {
    operation: Operation,
    /// A directory inside the repository.
    #[serde(default)]
    cwd: Option<String>,
    /// Limit to these paths (repository-relative).
    #[serde(default)]
    pathspecs: Vec<String>,
    /// log, show: start commit (default HEAD).
    #[serde(default)]
    revision: Option<String>,
    /// stdout cap; default 262144.
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_bytes: Option<u64>,
    /// log; default 20.
    #[serde(default)]
    #[schemars(range(min = 1, max = 100))]
    max_count: Option<u32>,
}

#[derive(Serialize, JsonSchema)]
pub struct FileStatus {
    /// Path relative to the repository root.
    path: String,
    /// Index (staged) status letter, or space.
    index: String,
    /// Working-tree status letter, or space (`??` files have `?` in both).
    worktree: String,
    /// For a rename: the old path.
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<String>,
    /// The path's bytes as git stores them (for git's quoting of names that are not UTF-8).
    #[serde(skip)]
    raw: Vec<u8>,
    /// The old path's bytes.
    #[serde(skip)]
    raw_from: Option<Vec<u8>>,
}

impl FileStatus {
    fn new(path: String, raw: Vec<u8>) -> FileStatus {
        FileStatus { path, index: " ".into(), worktree: " ".into(), from: None, raw, raw_from: None }
    }
}

#[derive(Serialize, JsonSchema)]
pub struct Commit {
    /// Full hash.
    id: String,
    /// Author name.
    author: String,
    /// Author email.
    email: String,
    /// Author time, seconds since the epoch.
    time: i64,
    /// First line of the message.
    summary: String,
    /// Parent hashes.
    parents: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Branch {
    /// Short name.
    name: String,
    /// The commit it points at.
    commit: String,
    /// Whether HEAD is on it.
    current: bool,
}

#[derive(Serialize, JsonSchema, Default)]
pub struct GitOutput {
    operation: String,
    success: bool,
    summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<Vec<FileStatus>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    commits: Option<Vec<Commit>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    branches: Option<Vec<Branch>>,
    current_branch: Option<String>,
    /// What git would print.
    stdout: String,
    stdout_truncated: bool,
    /// Warnings (e.g. names that are not UTF-8, shown escaped).
    stderr: String,
    error_kind: Option<String>,
    terminal: bool,
    error: Option<String>,
}

pub struct WorkspaceGit;

impl Tool for WorkspaceGit {
    const NAME: &'static str = "workspace_git";
    const DESCRIPTION: &'static str = "Read-only git: status (porcelain), diff (working tree against HEAD), log, \
        show (a commit and its patch) or branch.";
    const NEEDS: Needs = Needs::READ;
    type Input = GitInput;
    type Output = GitOutput;

    fn run(input: GitInput, cx: &Context) -> Result<GitOutput, Failure> {
        let specs = Pathspecs::new(&input.pathspecs)?;
        if input.revision.as_deref().is_some_and(|r| r.trim().is_empty()) {
            return Err(Failure::invalid_argument("revision is empty; omit it for HEAD"));
        }
        let cwd = cx.resolve(input.cwd.as_deref().unwrap_or("."))?;
        let repo = open_repo(&cwd.path, cx)?;
        let max_bytes = input.max_bytes.unwrap_or(DEFAULT_MAX_BYTES).max(1) as usize;
        let mut out = GitOutput { success: true, ..Default::default() };
        out.current_branch = repo.head_name().ok().flatten().map(|n| n.shorten().to_str_lossy().into_owned());
        let mut stderr = String::new();
        let stdout = match input.operation {
            Operation::Status => {
                out.operation = "status".into();
                let files = status(&repo, cx, &specs, &mut stderr)?;
                let text: String = files
                    .iter()
                    .map(|f| match &f.raw_from {
                        Some(from) => {
                            format!("{}{} {} -> {}\n", f.index, f.worktree, quote_bytes(from), quote_bytes(&f.raw))
                        }
                        None => format!("{}{} {}\n", f.index, f.worktree, quote_bytes(&f.raw)),
                    })
                    .collect();
                out.summary = if files.is_empty() {
                    "Nothing to commit, working tree clean".into()
                } else {
                    format!("{} paths changed or untracked", files.len())
                };
                out.files = Some(files);
                text
            }
            Operation::Branch => {
                out.operation = "branch".into();
                let (branches, text) = branches(&repo)?;
                out.summary = format!(
                    "{} local branches; {}",
                    branches.len(),
                    match &out.current_branch {
                        Some(b) if branches.iter().any(|x| x.current) => format!("on {b}"),
                        Some(b) => format!("on {b}, which has no commits yet"),
                        None => "HEAD is detached".into(),
                    }
                );
                out.branches = Some(branches);
                text
            }
            Operation::Log => {
                out.operation = "log".into();
                let n = input.max_count.unwrap_or(DEFAULT_MAX_COUNT).clamp(1, MAX_COUNT) as usize;
                let (commits, text) = log(&repo, input.revision.as_deref(), n, &specs)?;
                out.summary = format!("{} commits from {}", commits.len(), input.revision.as_deref().unwrap_or("HEAD"));
                out.commits = Some(commits);
                text
            }
            Operation::Show => {
                out.operation = "show".into();
                let (commit, files, text) =
                    show(&repo, input.revision.as_deref().unwrap_or("HEAD"), &specs, &mut stderr)?;
                out.summary =
                    format!("Commit {} \"{}\": {} files changed", &commit.id[..12], commit.summary, files.len());
                out.commits = Some(vec![commit]);
                out.files = Some(files);
                text
            }
            Operation::Diff => {
                out.operation = "diff".into();
                let (files, text) = diff_head(&repo, cx, &specs, &mut stderr)?;
                out.summary = if files.is_empty() {
                    "No differences between HEAD and the working tree".into()
                } else {
                    format!("{} files differ from HEAD", files.len())
                };
                out.files = Some(files);
                text
            }
        };
        let (s, t) = cheng_fs_core::text::head_tail(&stdout, max_bytes);
        out.stdout = s;
        out.stdout_truncated = t;
        out.stderr = stderr;
        Ok(out)
    }
}

cheng_sdk::export_tools!(WorkspaceGit);
