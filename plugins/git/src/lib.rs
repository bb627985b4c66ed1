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

mod staged;
mod worktree;

/// Default cap on `stdout`.
pub const DEFAULT_MAX_BYTES: u64 = 262_144;
/// Default number of commits.
pub const DEFAULT_MAX_COUNT: u32 = 20;
/// Most commits.
pub const MAX_COUNT: u32 = 100;

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// Working tree and index state.
    Status,
    /// Working tree against HEAD, as a patch.
    Diff,
    /// Commit history.
    Log,
    /// One commit with its patch.
    Show,
    /// Local branches.
    Branch,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GitInput {
    /// status, diff, log, show or branch.
    operation: Operation,
    /// Directory inside the repository, relative to the workspace root; omit for the root.
    #[serde(default)]
    cwd: Option<String>,
    /// Limit status, diff, log and show to these paths (relative to the repository root;
    /// no absolute paths, no `..`). A path names a file or everything below a directory.
    #[serde(default)]
    pathspecs: Vec<String>,
    /// log and show: the commit to start from (a name, a hash or any revision gix
    /// parses); default HEAD. Always data, never an option.
    #[serde(default)]
    revision: Option<String>,
    /// Cap on stdout in bytes (default 262144); head and tail are kept.
    #[serde(default)]
    #[schemars(range(min = 1))]
    max_bytes: Option<u64>,
    /// log: how many commits (default 20, at most 100).
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
    /// The operation.
    operation: String,
    /// True when it ran.
    success: bool,
    /// One sentence.
    summary: String,
    /// status, diff, show: the files concerned.
    #[serde(skip_serializing_if = "Option::is_none")]
    files: Option<Vec<FileStatus>>,
    /// log, show: commits.
    #[serde(skip_serializing_if = "Option::is_none")]
    commits: Option<Vec<Commit>>,
    /// branch: local branches.
    #[serde(skip_serializing_if = "Option::is_none")]
    branches: Option<Vec<Branch>>,
    /// The branch HEAD is on (null when detached or unborn… see summary).
    current_branch: Option<String>,
    /// What git would print (capped, head and tail kept).
    stdout: String,
    /// True when stdout was cut.
    stdout_truncated: bool,
    /// Warnings (e.g. names that are not UTF-8, shown escaped).
    stderr: String,
    /// Never set on success.
    error_kind: Option<String>,
    /// False on success.
    terminal: bool,
    /// Never set on success.
    error: Option<String>,
}

pub struct WorkspaceGit;
impl Tool for WorkspaceGit {
    const NAME: &'static str = "workspace_git";
    const DESCRIPTION: &'static str = "Inspect the git repository read-only: status (porcelain), diff (working tree \
        against HEAD, as a patch), log (commits from a revision), show (one commit and its patch) or branch (local \
        branches and the current one). Runs no git process and changes nothing.";
    const NEEDS: Needs = Needs::READ;
    type Input = GitInput;
    type Output = GitOutput;

    fn run(input: GitInput, cx: &Context) -> Result<GitOutput, Failure> {
        for p in &input.pathspecs {
            check_pathspec(p)?;
        }
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
                let files = status(&repo, cx, &input.pathspecs, &mut stderr)?;
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
                let (commits, text) = log(&repo, input.revision.as_deref(), n, &input.pathspecs)?;
                out.summary = format!("{} commits from {}", commits.len(), input.revision.as_deref().unwrap_or("HEAD"));
                out.commits = Some(commits);
                text
            }
            Operation::Show => {
                out.operation = "show".into();
                let (commit, files, text) =
                    show(&repo, input.revision.as_deref().unwrap_or("HEAD"), &input.pathspecs, &mut stderr)?;
                out.summary =
                    format!("Commit {} \"{}\": {} files changed", &commit.id[..12], commit.summary, files.len());
                out.commits = Some(vec![commit]);
                out.files = Some(files);
                text
            }
            Operation::Diff => {
                out.operation = "diff".into();
                let (files, text) = diff_head(&repo, cx, &input.pathspecs, &mut stderr)?;
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

fn fail(kind: ErrorKind, msg: impl Into<String>) -> Failure {
    Failure::new(kind, msg)
}

fn io(e: impl std::fmt::Display) -> Failure {
    fail(ErrorKind::Io, format!("git: {e}"))
}

fn check_pathspec(p: &str) -> Result<(), Failure> {
    if p.starts_with('/') || p.starts_with('\\') || p.get(1..2) == Some(":") {
        return Err(fail(
            ErrorKind::PathRefused,
            format!("pathspec \"{p}\" is absolute; give it relative to the repository root"),
        ));
    }
    if p.split(['/', '\\']).any(|s| s == "..") {
        return Err(fail(
            ErrorKind::PathRefused,
            format!("pathspec \"{p}\" climbs with `..`; give it relative to the repository root"),
        ));
    }
    if p.contains('\0') {
        return Err(Failure::invalid_argument("a pathspec cannot contain NUL"));
    }
    Ok(())
}

/// Does `path` fall under one of `specs` (empty: everything)?
fn selected(specs: &[String], path: &str) -> bool {
    specs.is_empty()
        || specs.iter().any(|s| {
            let s = s.trim_end_matches('/');
            s.is_empty() || s == "." || path == s || path.starts_with(&format!("{s}/"))
        })
}

/// Find and open the repository containing `dir`, within the workspace. A `.git` file
/// (a linked worktree, a submodule checkout) is followed when its `gitdir:` stays inside
/// the workspace, and refused when it points outside.
fn open_repo(dir: &Path, cx: &Context) -> Result<gix::Repository, Failure> {
    let mut cur: PathBuf = dir.to_path_buf();
    loop {
        let dotgit = cur.join(".git");
        if let Ok(meta) = std::fs::symlink_metadata(&dotgit) {
            let shown = |p: &Path| cx.host_path(&p.to_string_lossy()).into_owned();
            if meta.is_file() {
                let text = std::fs::read_to_string(&dotgit).map_err(io)?;
                let target = text.trim().strip_prefix("gitdir:").map(str::trim).unwrap_or("").to_string();
                let Some(git_dir) = inside_workspace(&target, &cur, cx) else {
                    return Err(fail(
                        ErrorKind::PathRefused,
                        format!(
                            "\"{}\" is a .git file pointing to \"{target}\", outside the workspace; this tool reads only repositories inside it",
                            shown(&dotgit)
                        ),
                    ));
                };
                let mut repo = gix::open_opts(&git_dir, options().open_path_as_is(true)).map_err(|e| {
                    fail(
                        ErrorKind::Io,
                        format!("cannot open the repository of \"{}\" at \"{target}\": {e}", shown(&dotgit)),
                    )
                })?;
                repo.set_workdir(Some(cur.clone())).map_err(io)?;
                return Ok(repo);
            }
            return gix::open_opts(&cur, options())
                .map_err(|e| fail(ErrorKind::Io, format!("cannot open the repository at \"{}\": {e}", shown(&cur))));
        }
        if cur == cx.guest_root() || !cur.pop() {
            break;
        }
    }
    Err(fail(ErrorKind::NotFound, "not a git repository: no .git in this directory or any parent within the workspace"))
}

/// How repositories are opened: the repository's own configuration only (there is no
/// system or user configuration in the sandbox anyway). File stats are compared with the
/// repository's settings against the host's `lstat` (see worktree.rs).
fn options() -> gix::open::Options {
    // The index's trailing checksum is not verified on read, as git does not.
    gix::open::Options::isolated().config_overrides(["index.skipHash=true"])
}

/// The guest path of a `gitdir:` target (absolute on the host, or relative to `base`),
/// if it lies inside the workspace.
fn inside_workspace(target: &str, base: &Path, cx: &Context) -> Option<PathBuf> {
    if target.is_empty() {
        return None;
    }
    let host_root = cx.sandbox_root().trim_end_matches('/');
    let guest_root = cx.guest_root();
    let joined = if target.starts_with('/') {
        let rest = target.strip_prefix(host_root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        guest_root.join(rest.trim_start_matches('/'))
    } else {
        base.join(target)
    };
    // Lexically normalise, refusing to climb above the workspace.
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out.starts_with(guest_root).then_some(out)
}

/// A path as git prints it in porcelain v1: quoted with C escapes when needed (names
/// that are not UTF-8 keep their bytes, octal-escaped).
fn quote_bytes(p: &[u8]) -> String {
    // As `git status` quotes: also when the path holds a space.
    let needs = p.iter().any(|&b| b == b'"' || b == b'\\' || b == b' ' || !(0x20..0x7f).contains(&b));
    if !needs {
        return String::from_utf8_lossy(p).into_owned();
    }
    let mut s = String::from("\"");
    for &b in p {
        match b {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            b'\n' => s.push_str("\\n"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(b as char),
            _ => s.push_str(&format!("\\{b:03o}")),
        }
    }
    s.push('"');
    s
}

fn lossy(b: &gix::bstr::BStr, stderr: &mut String) -> String {
    match b.to_str() {
        Ok(s) => s.to_string(),
        Err(_) => {
            let s = b.to_str_lossy().into_owned();
            stderr.push_str(&format!("warning: a path is not UTF-8 and is shown with replacement characters: {s}\n"));
            s
        }
    }
}

/// The commit the submodule checked out at `path` (repository-relative) is at: `None`
/// when it is not checked out, or its repository is outside the workspace.
fn submodule_head(workdir: &Path, path: &gix::bstr::BStr, cx: &Context) -> Option<gix::ObjectId> {
    let dir = workdir.join(gix::path::from_bstr(path).ok()?);
    std::fs::symlink_metadata(dir.join(".git")).ok()?;
    open_repo(&dir, cx).ok()?.head_id().ok().map(|id| id.detach())
}

/// HEAD's tree, or the empty tree before the first commit.
fn head_tree(repo: &gix::Repository) -> Result<gix::ObjectId, Failure> {
    match head_commit_id(repo) {
        Some(id) => Ok(repo.find_commit(id).map_err(io)?.tree_id().map_err(io)?.detach()),
        None => Ok(gix::ObjectId::empty_tree(repo.object_hash())),
    }
}

/// The working tree: its guest path, and its workspace-relative path for the host.
fn root_rel(repo: &gix::Repository, cx: &Context) -> Result<(PathBuf, String), Failure> {
    let workdir = repo
        .workdir()
        .ok_or_else(|| fail(ErrorKind::InvalidArgument, "a bare repository has no working tree"))?
        .to_path_buf();
    let rel = cx.host_path(&workdir.to_string_lossy()).into_owned();
    Ok((workdir, rel))
}

fn status(
    repo: &gix::Repository,
    cx: &Context,
    specs: &[String],
    stderr: &mut String,
) -> Result<Vec<FileStatus>, Failure> {
    use gix::diff::index::ChangeRef;
    let want = |p: &gix::bstr::BStr| selected(specs, &p.to_str_lossy());
    let index = repo.index_or_empty().map_err(io)?;
    let mut map: BTreeMap<Vec<u8>, FileStatus> = BTreeMap::new();
    fn entry<'m>(map: &'m mut BTreeMap<Vec<u8>, FileStatus>, raw: &[u8], stderr: &mut String) -> &'m mut FileStatus {
        map.entry(raw.to_vec()).or_insert_with(|| FileStatus::new(lossy(raw.as_bstr(), stderr), raw.to_vec()))
    }
    // HEAD against the index: where the index's cached tree vouches for a directory it
    // is skipped (staged.rs); when renames with edits could be involved, gix compares
    // the whole (renames as the repository configures them, by similarity).
    let head = head_tree(repo)?;
    let renames = repo
        .config_snapshot()
        .boolean("status.renames")
        .or_else(|| repo.config_snapshot().boolean("diff.renames"))
        .unwrap_or(true);
    let head_side = staged::HeadSide::read(repo, &index, head).map_err(io)?;
    let mut staged: Vec<staged::Staged> = Vec::new();
    if let Some(changes) = staged::changes(&index, &head_side, renames) {
        staged.extend(
            changes
                .into_iter()
                .filter(|(p, _, from)| want(p.as_bstr()) || from.as_deref().is_some_and(|f| want(f.as_bstr()))),
        );
    } else {
        let renames = gix::status::tree_index::TrackRenames::AsConfigured;
        repo.tree_index_status(&head, &index, None, renames, |change, _, _| {
            let (path, letter, from) = match &change {
                ChangeRef::Addition { location, .. } => (location.as_ref(), "A", None),
                ChangeRef::Deletion { location, .. } => (location.as_ref(), "D", None),
                ChangeRef::Modification { location, previous_entry_mode, entry_mode, .. } => {
                    let kind = |m: &gix::index::entry::Mode| m.to_tree_entry_mode().map(|t| t.kind());
                    (location.as_ref(), if kind(previous_entry_mode) != kind(entry_mode) { "T" } else { "M" }, None)
                }
                ChangeRef::Rewrite { source_location, location, copy, .. } => {
                    (location.as_ref(), if *copy { "C" } else { "R" }, Some(source_location.to_vec()))
                }
            };
            // An intent-to-add entry shows in the working-tree column only.
            let intent = letter == "A"
                && index.entry_by_path(path).is_some_and(|e| e.flags.contains(gix::index::entry::Flags::INTENT_TO_ADD));
            if !intent && (want(path) || from.as_deref().is_some_and(|f| want(f.as_bstr()))) {
                staged.push((path.to_vec(), letter, from));
            }
            Ok(std::ops::ControlFlow::Continue(()))
        })
        .map_err(io)?;
    }
    for (path, letter, from) in staged {
        let f = entry(&mut map, &path, stderr);
        f.index = letter.into();
        if let Some(from) = from {
            f.from = Some(lossy(from.as_bstr(), stderr));
            f.raw_from = Some(from);
        }
    }
    // The index against the working tree (host listings with stats, see worktree.rs).
    let (workdir, rel) = root_rel(repo, cx)?;
    let scan = worktree::scan(repo, &index, &workdir, &rel, want, |p| submodule_head(&workdir, p, cx))?;
    for w in &scan.warnings {
        stderr.push_str(w);
        stderr.push('\n');
    }
    for (path, change) in &scan.changes {
        let f = entry(&mut map, path, stderr);
        match change {
            worktree::Change::Unmerged(code) => {
                f.index = code[..1].into();
                f.worktree = code[1..].into();
                f.from = None;
                f.raw_from = None;
            }
            worktree::Change::Deleted => f.worktree = "D".into(),
            worktree::Change::Modified => f.worktree = "M".into(),
            worktree::Change::TypeChanged => f.worktree = "T".into(),
            worktree::Change::IntentToAdd => f.worktree = "A".into(),
        }
    }
    let mut files: Vec<FileStatus> = map.into_values().collect();
    let mut untracked_files = Vec::new();
    for (mut raw, dir) in untracked(repo, &index, &scan.listing)? {
        let mut shown = lossy(raw.as_bstr(), stderr);
        if dir {
            shown.push('/');
            raw.push(b'/');
        }
        if !selected(specs, &shown) {
            continue;
        }
        let mut f = FileStatus::new(shown, raw);
        f.index = "?".into();
        f.worktree = "?".into();
        untracked_files.push(f);
    }
    // git lists tracked changes by path, then untracked ones (each by path bytes).
    untracked_files.sort_by(|a, b| a.raw.cmp(&b.raw));
    files.extend(untracked_files);
    Ok(files)
}

/// Untracked paths as `git status -uall` lists them: every untracked file, except
/// ignored ones, not descending into ignored directories; a nested repository as its
/// directory (flag true). Tracked directories come from the scan's listings; untracked
/// ones are listed through the host as the walk reaches them.
fn untracked(
    repo: &gix::Repository,
    index: &gix::index::State,
    listing: &worktree::Listing,
) -> Result<Vec<(Vec<u8>, bool)>, Failure> {
    use cheng_sdk::host::EntryKind;
    let mut excludes = None;
    let mut is_excluded = |rel: &[u8], is_dir: bool| -> Result<bool, Failure> {
        if excludes.is_none() {
            excludes = Some(
                repo.excludes(
                    index,
                    None,
                    gix::worktree::stack::state::ignore::Source::WorktreeThenIdMappingIfNotSkipped,
                )
                .map_err(io)?,
            );
        }
        let stack = excludes.as_mut().expect("set above");
        let mode = is_dir.then_some(gix::index::entry::Mode::DIR);
        Ok(stack.at_entry(rel.as_bstr(), mode).map(|p| p.is_excluded()).unwrap_or(false))
    };
    let mut out = Vec::new();
    // Directories to walk: repository-relative bytes, and whether the directory itself
    // is untracked (then a `.git` inside makes it a nested repository, listed whole).
    let mut stack: Vec<(Vec<u8>, bool)> = vec![(Vec::new(), false)];
    while let Some((dir, untracked_dir)) = stack.pop() {
        let fetched: Vec<(Vec<u8>, bool, EntryKind)>;
        let entries: Vec<(&[u8], bool, EntryKind)> = match listing.dir(&dir) {
            Some(Some(list)) => {
                list.iter().filter(|e| !e.tracked).map(|e| (e.name.as_slice(), e.valid_utf8, e.kind)).collect()
            }
            Some(None) => continue,
            None => {
                let Some(path) = listing.host_path(&dir) else { continue };
                let Ok(list) = cheng_sdk::host::read_dir(&path, false) else { continue };
                fetched = list
                    .into_iter()
                    .map(|e| {
                        (
                            if e.valid_utf8 { e.name.into_bytes() } else { worktree::unescape(&e.name) },
                            e.valid_utf8,
                            e.kind,
                        )
                    })
                    .collect();
                fetched.iter().map(|(n, v, k)| (n.as_slice(), *v, *k)).collect()
            }
        };
        if untracked_dir && entries.iter().any(|e| e.0 == b".git") {
            out.push((dir, true));
            continue;
        }
        for (name, valid_utf8, kind) in entries {
            if dir.is_empty() && name == b".git" {
                continue;
            }
            let mut rel = dir.clone();
            if !rel.is_empty() {
                rel.push(b'/');
            }
            rel.extend_from_slice(name);
            let is_dir = kind == EntryKind::Dir;
            if is_dir && listing.tracked_dirs.contains(&rel) {
                // git descends into a directory holding tracked files even when it is ignored.
                stack.push((rel, false));
            } else if is_dir {
                if !is_excluded(&rel, true)? {
                    if valid_utf8 {
                        stack.push((rel, true));
                    } else {
                        // Cannot be listed by name: shown as a directory.
                        out.push((rel, true));
                    }
                }
            } else if matches!(kind, EntryKind::File | EntryKind::Symlink) && !is_excluded(&rel, false)? {
                out.push((rel, false));
            }
        }
    }
    Ok(out)
}

fn branches(repo: &gix::Repository) -> Result<(Vec<Branch>, String), Failure> {
    let head_name = repo.head_name().ok().flatten();
    let mut out = Vec::new();
    let refs = repo.references().map_err(io)?;
    for r in refs.local_branches().map_err(io)? {
        let mut r = r.map_err(io)?;
        let name = r.name().shorten().to_str_lossy().into_owned();
        let current = head_name.as_ref().is_some_and(|h| h.as_bstr() == r.name().as_bstr());
        let commit = r.peel_to_id().map(|id| id.to_string()).unwrap_or_default();
        out.push(Branch { name, commit, current });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    let mut text = String::new();
    let detached = head_name.is_none();
    if detached && let Ok(id) = repo.head_id() {
        text.push_str(&format!("* (HEAD detached at {})\n", id.shorten_or_id()));
    }
    // Branches checked out in another worktree get git's `+`.
    let elsewhere = other_worktree_branches(repo);
    for b in &out {
        let mark = if b.current {
            "*"
        } else if elsewhere.contains(&b.name) {
            "+"
        } else {
            " "
        };
        text.push_str(&format!("{mark} {}\n", b.name));
    }
    Ok((out, text))
}

/// Short names of the branches that the repository's other worktrees have checked out
/// (read from their `HEAD` files under the common directory).
fn other_worktree_branches(repo: &gix::Repository) -> Vec<String> {
    let common = repo.common_dir().to_path_buf();
    let own = repo.git_dir().to_path_buf();
    let mut heads = vec![common.clone()];
    if let Ok(dir) = std::fs::read_dir(common.join("worktrees")) {
        heads.extend(dir.flatten().map(|e| e.path()));
    }
    heads
        .into_iter()
        .filter(|d| *d != own)
        .filter_map(|d| std::fs::read_to_string(d.join("HEAD")).ok())
        .filter_map(|h| h.trim().strip_prefix("ref: refs/heads/").map(str::to_string))
        .collect()
}

fn resolve(repo: &gix::Repository, rev: &str) -> Result<gix::ObjectId, Failure> {
    let unknown = || {
        fail(
            ErrorKind::NotFound,
            format!("unknown revision \"{rev}\": name a branch, a tag, a commit hash or an expression such as HEAD~2"),
        )
    };
    let spec = repo.rev_parse_single(rev.as_bytes().as_bstr()).map_err(|_| unknown())?;
    let obj = spec.object().map_err(|_| unknown())?;
    let commit = obj
        .peel_to_commit()
        .map_err(|_| fail(ErrorKind::InvalidArgument, format!("\"{rev}\" does not name a commit")))?;
    Ok(commit.id)
}

/// HEAD's commit, or none on an unborn branch.
fn head_commit_id(repo: &gix::Repository) -> Option<gix::ObjectId> {
    repo.head_id().ok().map(|id| id.detach())
}

fn commit_info(c: &gix::Commit<'_>) -> Result<Commit, Failure> {
    let author = c.author().map_err(io)?;
    let msg = c.message_raw().map_err(io)?;
    Ok(Commit {
        id: c.id.to_string(),
        author: author.name.to_str_lossy().into_owned(),
        email: author.email.to_str_lossy().into_owned(),
        time: author.time().map(|t| t.seconds).unwrap_or(0),
        summary: msg.lines().next().map(|l| l.to_str_lossy().into_owned()).unwrap_or_default(),
        parents: c.parent_ids().map(|p| p.to_string()).collect(),
    })
}

/// git's default `log`/`show` header for `c`.
fn header(c: &gix::Commit<'_>) -> Result<String, Failure> {
    let author = c.author().map_err(io)?;
    let time = author.time().map_err(io)?;
    let mut s = format!("commit {}\n", c.id);
    let parents: Vec<_> = c.parent_ids().collect();
    if parents.len() > 1 {
        s.push_str(&format!(
            "Merge: {}\n",
            parents.iter().map(|p| p.shorten_or_id().to_string()).collect::<Vec<_>>().join(" ")
        ));
    }
    s.push_str(&format!("Author: {} <{}>\n", author.name.to_str_lossy(), author.email.to_str_lossy()));
    s.push_str(&format!("Date:   {}\n\n", time.format_or_unix(gix::date::time::format::DEFAULT)));
    let msg = c.message_raw().map_err(io)?.to_str_lossy().into_owned();
    for line in msg.trim_end_matches('\n').lines() {
        s.push_str(&format!("    {line}\n"));
    }
    Ok(s)
}

/// Does `c` change anything under `specs` (always, without specs)? As git's default
/// history simplification decides: a commit is left out when those paths are the same
/// as in one of its parents; a root commit is shown when it has any of them.
fn touches(repo: &gix::Repository, c: &gix::Commit<'_>, specs: &[String]) -> Result<bool, Failure> {
    if specs.is_empty() {
        return Ok(true);
    }
    let at = |tree: &gix::Tree<'_>| -> Result<Vec<Option<(u16, gix::ObjectId)>>, Failure> {
        specs
            .iter()
            .map(|s| {
                let s = s.trim_end_matches('/');
                if s.is_empty() || s == "." {
                    return Ok(Some((0o040000, tree.id)));
                }
                Ok(tree.lookup_entry_by_path(s).map_err(io)?.map(|e| (e.mode().value(), e.object_id())))
            })
            .collect()
    };
    let mine = at(&c.tree().map_err(io)?)?;
    let mut parents = c.parent_ids().peekable();
    if parents.peek().is_none() {
        return Ok(mine.iter().any(Option::is_some));
    }
    for p in parents {
        let tree = repo.find_commit(p).map_err(io)?.tree().map_err(io)?;
        if at(&tree)? == mine {
            return Ok(false);
        }
    }
    Ok(true)
}

fn log(
    repo: &gix::Repository,
    rev: Option<&str>,
    n: usize,
    specs: &[String],
) -> Result<(Vec<Commit>, String), Failure> {
    let start = match rev {
        Some(r) => resolve(repo, r)?,
        None => match head_commit_id(repo) {
            Some(id) => id,
            None => return Ok((Vec::new(), String::new())),
        },
    };
    let mut commits = Vec::new();
    let mut text = String::new();
    let walk = repo
        .rev_walk([start])
        .sorting(gix::revision::walk::Sorting::ByCommitTime(Default::default()))
        .all()
        .map_err(io)?;
    for info in walk {
        if commits.len() == n {
            break;
        }
        let info = info.map_err(io)?;
        let c = info.object().map_err(io)?;
        if !touches(repo, &c, specs)? {
            continue;
        }
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&header(&c)?);
        commits.push(commit_info(&c)?);
    }
    Ok((commits, text))
}

/// Every blob of a tree: path → (mode bits, id).
fn tree_files(repo: &gix::Repository, tree: Option<gix::ObjectId>) -> Result<BTreeMap<String, staged::Side>, Failure> {
    let mut map = BTreeMap::new();
    let Some(tree) = tree else { return Ok(map) };
    let tree = repo.find_tree(tree).map_err(io)?;
    let mut rec = gix::traverse::tree::Recorder::default();
    tree.traverse().breadthfirst(&mut rec).map_err(io)?;
    for e in rec.records {
        if e.mode.is_tree() {
            continue;
        }
        map.insert(e.filepath.to_str_lossy().into_owned(), (e.mode.value() as u32, e.oid));
    }
    Ok(map)
}

/// One side of a patch: a blob's bytes, or for a submodule (a commit recorded in the
/// tree) the line git shows for it.
fn side(repo: &gix::Repository, mode: u32, id: gix::ObjectId) -> Result<Vec<u8>, Failure> {
    if mode == 0o160000 {
        return Ok(format!("Subproject commit {id}\n").into_bytes());
    }
    blob(repo, id)
}

fn blob(repo: &gix::Repository, id: gix::ObjectId) -> Result<Vec<u8>, Failure> {
    Ok(repo.find_blob(id).map_err(io)?.data.clone())
}

fn short(id: &gix::ObjectId) -> String {
    id.to_hex_with_len(7).to_string()
}

/// `prefix` + `path` as git's diff headers show it: quoted with C escapes (octal for
/// bytes that are not ASCII) when the name needs it; spaces alone do not.
fn diff_name(prefix: &str, path: &[u8]) -> String {
    let plain = format!("{prefix}{}", String::from_utf8_lossy(path));
    let needs = path.iter().any(|&b| b == b'"' || b == b'\\' || !(0x20..0x7f).contains(&b));
    if !needs {
        return plain;
    }
    quote_bytes(&[prefix.as_bytes(), path].concat())
}

/// One file's patch, in git's format. `old`/`new`: (mode, id, bytes) or None.
fn file_patch(
    path: &[u8],
    old: Option<(u32, gix::ObjectId, &[u8])>,
    new: Option<(u32, gix::ObjectId, &[u8])>,
) -> String {
    let (a_name, b_name) = (diff_name("a/", path), diff_name("b/", path));
    let mut s = format!("diff --git {a_name} {b_name}\n");
    match (&old, &new) {
        (None, Some((m, id, _))) => s.push_str(&format!("new file mode {m:o}\nindex 0000000..{}\n", short(id))),
        (Some((m, id, _)), None) => s.push_str(&format!("deleted file mode {m:o}\nindex {}..0000000\n", short(id))),
        (Some((om, oid, _)), Some((nm, nid, _))) => {
            if om != nm {
                s.push_str(&format!("old mode {om:o}\nnew mode {nm:o}\n"));
                if oid != nid {
                    s.push_str(&format!("index {}..{}\n", short(oid), short(nid)));
                }
            } else {
                s.push_str(&format!("index {}..{} {om:o}\n", short(oid), short(nid)));
            }
        }
        (None, None) => return String::new(),
    }
    let o = old.as_ref().map(|x| x.2).unwrap_or(b"");
    let n = new.as_ref().map(|x| x.2).unwrap_or(b"");
    if old.as_ref().is_some_and(|x| x.1 == new.as_ref().map(|y| y.1).unwrap_or(x.1)) && o == n {
        return s; // mode change only
    }
    let binary = o.iter().take(8000).any(|b| *b == 0) || n.iter().take(8000).any(|b| *b == 0);
    let a = if old.is_some() { a_name } else { "/dev/null".into() };
    let b = if new.is_some() { b_name } else { "/dev/null".into() };
    if binary {
        s.push_str(&format!("Binary files {a} and {b} differ\n"));
        return s;
    }
    let (os, ns) = (String::from_utf8_lossy(o), String::from_utf8_lossy(n));
    let diff = similar::TextDiff::configure().algorithm(similar::Algorithm::Myers).diff_lines(os.as_ref(), ns.as_ref());
    // Like git, end a name holding a space with a tab, so that it cannot run into more.
    let tab = |n: &str| if n.contains(' ') && n != "/dev/null" { "\t" } else { "" };
    s.push_str(&format!("--- {a}{}\n+++ {b}{}\n", tab(&a), tab(&b)));
    let mut u = diff.unified_diff();
    u.context_radius(3).missing_newline_hint(true);
    for hunk in u.iter_hunks() {
        s.push_str(&hunk.to_string());
    }
    s
}

fn show(
    repo: &gix::Repository,
    rev: &str,
    specs: &[String],
    stderr: &mut String,
) -> Result<(Commit, Vec<FileStatus>, String), Failure> {
    let id = resolve(repo, rev)?;
    let c = repo.find_commit(id).map_err(io)?;
    let mut text = header(&c)?;
    let new_tree = Some(c.tree_id().map_err(io)?.detach());
    let parents: Vec<gix::ObjectId> = c.parent_ids().map(|p| p.detach()).collect();
    if parents.len() > 1 {
        // A merge: git shows a combined diff of the paths that differ from every parent
        // (none for a clean merge). Those paths are listed; their combined patch is not
        // written here.
        let new = tree_files(repo, new_tree)?;
        let olds = parents
            .iter()
            .map(|p| tree_files(repo, Some(repo.find_commit(*p).map_err(io)?.tree_id().map_err(io)?.detach())))
            .collect::<Result<Vec<_>, Failure>>()?;
        let paths: std::collections::BTreeSet<&String> = olds.iter().flat_map(|o| o.keys()).chain(new.keys()).collect();
        let mut files = Vec::new();
        for p in paths {
            if selected(specs, p) && olds.iter().all(|o| o.get(p) != new.get(p)) {
                let mut f = FileStatus::new(p.clone(), p.as_bytes().to_vec());
                f.index = if new.contains_key(p) { "M" } else { "D" }.into();
                files.push(f);
            }
        }
        // git ends a merge's header with the separator its (combined) diff would follow.
        text.push('\n');
        if !files.is_empty() {
            stderr.push_str("warning: this merge changed paths against every parent; they are listed in `files`, their combined diff (`git show --cc`) is not shown\n");
        }
        return Ok((commit_info(&c)?, files, text));
    }
    let parent = parents.first().copied();
    let old_tree = match parent {
        Some(p) => Some(repo.find_commit(p).map_err(io)?.tree_id().map_err(io)?.detach()),
        None => None,
    };
    let (files, patch) = tree_diff(repo, &tree_files(repo, old_tree)?, &tree_files(repo, new_tree)?, specs, stderr)?;
    if !patch.is_empty() {
        text.push('\n');
        text.push_str(&patch);
    }
    Ok((commit_info(&c)?, files, text))
}

fn tree_diff(
    repo: &gix::Repository,
    old: &BTreeMap<String, staged::Side>,
    new: &BTreeMap<String, staged::Side>,
    specs: &[String],
    stderr: &mut String,
) -> Result<(Vec<FileStatus>, String), Failure> {
    let paths: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut changes = Vec::new();
    for p in paths {
        let (o, n) = (old.get(p), new.get(p));
        if o == n || !selected(specs, p) {
            continue;
        }
        changes.push(PathChange {
            path: p.as_bytes().to_vec(),
            from: None,
            old: o.copied(),
            new: n.copied(),
            new_data: None,
        });
    }
    let changes = exact_renames(repo, changes);
    emit(repo, &changes, true, stderr)
}

/// One path's change between two sides, each side (mode, id); `from` for a rename,
/// `new_data` when the new side's content is not in the object database (the working
/// tree).
struct PathChange {
    path: Vec<u8>,
    from: Option<Vec<u8>>,
    old: Option<staged::Side>,
    new: Option<staged::Side>,
    new_data: Option<Vec<u8>>,
}

/// git's exact rename detection, unless the repository turns `diff.renames` off: a
/// deleted path and an added path with the same content are one rename (a source with
/// the same file name preferred), listed at the new path.
fn exact_renames(repo: &gix::Repository, changes: Vec<PathChange>) -> Vec<PathChange> {
    use std::collections::{HashMap, HashSet};
    if repo.config_snapshot().boolean("diff.renames") == Some(false) {
        return changes;
    }
    let mut deleted: Vec<(Vec<u8>, gix::ObjectId)> =
        changes.iter().filter(|c| c.new.is_none()).filter_map(|c| c.old.map(|(_, id)| (c.path.clone(), id))).collect();
    let added: Vec<(&[u8], gix::ObjectId)> = changes
        .iter()
        .filter(|c| c.old.is_none())
        .filter_map(|c| c.new.map(|(_, id)| (c.path.as_slice(), id)))
        .collect();
    let sources = staged::pair_exact(&added, &mut deleted);
    let pairs: HashMap<Vec<u8>, Vec<u8>> =
        added.iter().zip(sources).filter_map(|((p, _), s)| s.map(|s| (p.to_vec(), s))).collect();
    let used: HashSet<&Vec<u8>> = pairs.values().collect();
    let olds: HashMap<Vec<u8>, Option<staged::Side>> =
        changes.iter().filter(|c| used.contains(&c.path)).map(|c| (c.path.clone(), c.old)).collect();
    changes
        .into_iter()
        .filter(|c| !(c.new.is_none() && used.contains(&c.path)))
        .map(|mut c| {
            if let Some(from) = pairs.get(&c.path) {
                c.old = olds.get(from).copied().flatten();
                c.from = Some(from.clone());
            }
            c
        })
        .collect()
}

/// Patches and file entries for `changes`, in git's format; `staged` puts the letter
/// in the index column (show) rather than the working-tree one (diff).
fn emit(
    repo: &gix::Repository,
    changes: &[PathChange],
    staged: bool,
    stderr: &mut String,
) -> Result<(Vec<FileStatus>, String), Failure> {
    let mut files = Vec::new();
    let mut patch = String::new();
    for c in changes {
        let kind = |m: u32| m & 0o170000;
        let letter = match (c.old, c.new) {
            (None, None) => continue,
            _ if c.from.is_some() => "R",
            (None, Some(_)) => "A",
            (Some(_), None) => "D",
            (Some((om, _)), Some((nm, _))) if kind(om) != kind(nm) => "T",
            _ => "M",
        };
        let old_bytes = c.old.map(|(m, id)| side(repo, m, id)).transpose()?;
        let loaded = match (&c.new_data, c.new) {
            (None, Some((m, id))) => Some(side(repo, m, id)?),
            _ => None,
        };
        let new_bytes = c.new_data.as_deref().or(loaded.as_deref()).unwrap_or(b"");
        let old = c.old.map(|(m, id)| (m, id, old_bytes.as_deref().unwrap_or(b"")));
        let new = c.new.map(|(m, id)| (m, id, new_bytes));
        match (&c.from, letter) {
            (Some(from), _) => {
                let (om, nm) = (c.old.map_or(0, |x| x.0), c.new.map_or(0, |x| x.0));
                patch.push_str(&format!("diff --git {} {}\n", diff_name("a/", from), diff_name("b/", &c.path)));
                if om != nm {
                    patch.push_str(&format!("old mode {om:o}\nnew mode {nm:o}\n"));
                }
                patch.push_str(&format!(
                    "similarity index 100%\nrename from {}\nrename to {}\n",
                    diff_name("", from),
                    diff_name("", &c.path)
                ));
            }
            // A change of kind is a deletion and an addition, as git prints it.
            (None, "T") => {
                patch.push_str(&file_patch(&c.path, old, None));
                patch.push_str(&file_patch(&c.path, None, new));
            }
            (None, _) => patch.push_str(&file_patch(&c.path, old, new)),
        }
        let mut f = FileStatus::new(lossy(c.path.as_bstr(), stderr), c.path.clone());
        if let Some(from) = &c.from {
            f.from = Some(lossy(from.as_bstr(), stderr));
            f.raw_from = Some(from.clone());
        }
        if staged {
            f.index = letter.into();
        } else {
            f.worktree = letter.into();
        }
        files.push(f);
    }
    Ok((files, patch))
}

/// The working tree against HEAD (`git diff HEAD`): the paths where HEAD and the index
/// differ, or the index and the working tree (judged from stats, see worktree.rs), are
/// read and compared with HEAD. A path in HEAD but not in the index is deleted, as git
/// shows it.
fn diff_head(
    repo: &gix::Repository,
    cx: &Context,
    specs: &[String],
    stderr: &mut String,
) -> Result<(Vec<FileStatus>, String), Failure> {
    use std::collections::BTreeSet;
    let want = |p: &gix::bstr::BStr| selected(specs, &p.to_str_lossy());
    let index = repo.index_or_empty().map_err(io)?;
    // HEAD's side where the index's cached tree does not vouch for it (staged.rs).
    let head = staged::HeadSide::read(repo, &index, head_tree(repo)?).map_err(io)?;
    let mut candidates: BTreeSet<Vec<u8>> = BTreeSet::new();
    for (p, _, _) in staged::changes(&index, &head, false).unwrap_or_default() {
        if want(p.as_bstr()) {
            candidates.insert(p);
        }
    }
    let (workdir, rel) = root_rel(repo, cx)?;
    let scan = worktree::scan(repo, &index, &workdir, &rel, want, |p| submodule_head(&workdir, p, cx))?;
    for w in &scan.warnings {
        stderr.push_str(w);
        stderr.push('\n');
    }
    candidates.extend(scan.changes.iter().map(|(p, _)| p.to_vec()));
    let exec_bit = repo.filesystem_options().map_err(io)?.executable_bit;
    // The working-tree side of every candidate the index still has.
    let mut present: Vec<(&[u8], u32, &worktree::Entry)> = Vec::new();
    for p in &candidates {
        let Some(e) = index.entry_by_path(p.as_bstr()) else { continue };
        if e.mode.is_submodule() {
            continue;
        }
        if let Ok(Some(w)) = scan.listing.lookup(p)
            && matches!(w.kind, cheng_sdk::host::EntryKind::File | cheng_sdk::host::EntryKind::Symlink)
        {
            present.push((p.as_slice(), worktree::git_mode(w, e.mode.bits(), exec_bit), w));
        }
    }
    let paths: Vec<&gix::bstr::BStr> = present.iter().map(|(p, ..)| p.as_bstr()).collect();
    let contents = worktree::read_worktree(&scan.listing, &workdir, &paths);
    let mut work: BTreeMap<&[u8], (staged::Side, Vec<u8>)> = BTreeMap::new();
    let mut pipeline = None;
    let mut unreadable: BTreeSet<&[u8]> = BTreeSet::new();
    for ((p, mode, w), data) in present.iter().zip(contents) {
        let Some(data) = data else {
            let why = if std::str::from_utf8(p).is_err() {
                "its name is not UTF-8, which the sandbox cannot open"
            } else {
                "it could not be read"
            };
            stderr.push_str(&format!("warning: \"{}\" is left out of the patch: {why}\n", p.to_str_lossy()));
            unreadable.insert(p);
            continue;
        };
        let data = if w.kind == cheng_sdk::host::EntryKind::Symlink {
            data
        } else {
            worktree::clean(repo, &index, &mut pipeline, p.as_bstr(), data)?
        };
        let id = worktree::hash(repo, &data)?;
        work.insert(p, ((*mode, id), data));
    }
    let mut changes = Vec::new();
    for p in &candidates {
        if unreadable.contains(p.as_slice()) {
            continue;
        }
        let before = head.get(&index, p.as_bstr());
        // A submodule is not entered: its side is the commit its checkout is at.
        let (new, new_data) = match index.entry_by_path(p.as_bstr()) {
            Some(e) if e.mode.is_submodule() => {
                (Some((e.mode.bits(), submodule_head(&workdir, p.as_bstr(), cx).unwrap_or(e.id))), None)
            }
            _ => match work.remove(p.as_slice()) {
                Some((side, data)) => (Some(side), Some(data)),
                None => (None, None),
            },
        };
        if before == new {
            continue;
        }
        changes.push(PathChange { path: p.clone(), from: None, old: before, new, new_data });
    }
    let changes = exact_renames(repo, changes);
    emit(repo, &changes, false, stderr)
}
