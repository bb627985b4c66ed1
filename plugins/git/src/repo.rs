//! Finding and opening the repository inside the workspace (a `.git` file followed only
//! while it stays inside), resolving revisions, and checking pathspecs.

use super::*;

pub(crate) fn fail(kind: ErrorKind, msg: impl Into<String>) -> Failure {
    Failure::new(kind, msg)
}

pub(crate) fn io(e: impl std::fmt::Display) -> Failure {
    fail(ErrorKind::Io, format!("git: {e}"))
}

/// A pathspec as a model may write it, cut and escaped for an error message.
fn shown(p: &str) -> String {
    cheng_sdk::text::cut_chars(&cheng_sdk::text::escape_line(p), 200)
}

/// One pathspec: a path (the file, or everything under the directory) or a wildcard
/// pattern matched against the whole path as git matches one (`*` crosses `/`).
enum Spec {
    Prefix(String),
    Glob(globset::GlobMatcher),
}

/// The pathspecs of a request, checked once: relative, no `..`, no NUL, and no pathspec
/// magic (`:(top)`, `:(icase)`, `:!…`), which is refused rather than misread.
pub(crate) struct Pathspecs {
    specs: Vec<Spec>,
}

impl Pathspecs {
    /// Check and compile `specs`.
    pub(crate) fn new(specs: &[String]) -> Result<Pathspecs, Failure> {
        let mut out = Vec::new();
        for p in specs {
            if p.starts_with('/') || p.starts_with('\\') || (p.get(1..2) == Some(":") && !p.starts_with(':')) {
                return Err(fail(
                    ErrorKind::PathRefused,
                    format!("pathspec \"{}\" is absolute; give it relative to the repository root", shown(p)),
                ));
            }
            if p.split(['/', '\\']).any(|s| s == "..") {
                return Err(fail(
                    ErrorKind::PathRefused,
                    format!("pathspec \"{}\" climbs with `..`; give it relative to the repository root", shown(p)),
                ));
            }
            if p.contains('\0') {
                return Err(Failure::invalid_argument("a pathspec cannot contain NUL"));
            }
            if p.starts_with(':') {
                return Err(Failure::invalid_argument(format!(
                    "pathspec \"{}\" uses pathspec magic, which workspace_git does not support; give a path relative \
                     to the repository root, or a wildcard pattern such as *.txt",
                    shown(p)
                )));
            }
            let s = p.trim_end_matches('/');
            if s.contains(['*', '?', '[']) {
                let glob =
                    globset::GlobBuilder::new(s).literal_separator(false).backslash_escape(true).build().map_err(
                        |e| Failure::invalid_argument(format!("pathspec \"{}\" is not a valid pattern: {e}", shown(p))),
                    )?;
                out.push(Spec::Glob(glob.compile_matcher()));
            } else {
                out.push(Spec::Prefix(if s == "." { String::new() } else { s.to_string() }));
            }
        }
        Ok(Pathspecs { specs: out })
    }

    /// No pathspecs: everything is selected.
    pub(crate) fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// The plain paths among them (`""` for the whole tree), when there are only
    /// plain paths; `None` when a wildcard pattern is among them.
    pub(crate) fn plain(&self) -> Option<Vec<&str>> {
        self.specs
            .iter()
            .map(|s| match s {
                Spec::Prefix(p) => Some(p.as_str()),
                Spec::Glob(_) => None,
            })
            .collect()
    }

    /// Does `path` fall under one of them (always, when there are none)?
    pub(crate) fn matches(&self, path: &str) -> bool {
        self.specs.is_empty()
            || self.specs.iter().any(|s| match s {
                Spec::Prefix(p) => p.is_empty() || path == p || path.starts_with(&format!("{p}/")),
                Spec::Glob(g) => g.is_match(path),
            })
    }
}

/// Find and open the repository containing `dir`, within the workspace. A `.git` file
/// (a linked worktree, a submodule checkout) is followed when its `gitdir:` stays inside
/// the workspace, and refused when it points outside.
pub(crate) fn open_repo(dir: &Path, cx: &Context) -> Result<gix::Repository, Failure> {
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
pub(crate) fn options() -> gix::open::Options {
    // The index's trailing checksum is not verified on read, as git does not.
    gix::open::Options::isolated().config_overrides(["index.skipHash=true"])
}

/// The guest path of a `gitdir:` target (absolute on the host, or relative to `base`),
/// if it lies inside the workspace.
pub(crate) fn inside_workspace(target: &str, base: &Path, cx: &Context) -> Option<PathBuf> {
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

/// The commit the submodule checked out at `path` (repository-relative) is at: `None`
/// when it is not checked out, or its repository is outside the workspace.
pub(crate) fn submodule_head(workdir: &Path, path: &gix::bstr::BStr, cx: &Context) -> Option<gix::ObjectId> {
    let dir = workdir.join(gix::path::from_bstr(path).ok()?);
    std::fs::symlink_metadata(dir.join(".git")).ok()?;
    open_repo(&dir, cx).ok()?.head_id().ok().map(|id| id.detach())
}

/// HEAD's tree, or the empty tree before the first commit.
pub(crate) fn head_tree(repo: &gix::Repository) -> Result<gix::ObjectId, Failure> {
    match head_commit_id(repo)? {
        Some(id) => Ok(repo.find_commit(id).map_err(io)?.tree_id().map_err(io)?.detach()),
        None => Ok(gix::ObjectId::empty_tree(repo.object_hash())),
    }
}

/// The working tree: its guest path, and its workspace-relative path for the host.
pub(crate) fn root_rel(repo: &gix::Repository, cx: &Context) -> Result<(PathBuf, String), Failure> {
    let workdir = repo
        .workdir()
        .ok_or_else(|| fail(ErrorKind::InvalidArgument, "a bare repository has no working tree"))?
        .to_path_buf();
    let rel = cx.host_path(&workdir.to_string_lossy()).into_owned();
    Ok((workdir, rel))
}

pub(crate) fn resolve(repo: &gix::Repository, rev: &str) -> Result<gix::ObjectId, Failure> {
    let unknown = || {
        fail(
            ErrorKind::NotFound,
            format!(
                "unknown revision \"{}\": name a branch, a tag, a commit hash or an expression such as HEAD~2",
                shown(rev)
            ),
        )
    };
    let spec = repo.rev_parse_single(rev.as_bytes().as_bstr()).map_err(|_| unknown())?;
    let obj = spec.object().map_err(|_| unknown())?;
    let commit = obj
        .peel_to_commit()
        .map_err(|_| fail(ErrorKind::InvalidArgument, format!("\"{}\" does not name a commit", shown(rev))))?;
    Ok(commit.id)
}

/// HEAD's commit, or none on an unborn branch. A HEAD that cannot be read, or that
/// names an object the repository does not have, is an error (not an empty history).
pub(crate) fn head_commit_id(repo: &gix::Repository) -> Result<Option<gix::ObjectId>, Failure> {
    let broken = |why: String| fail(ErrorKind::NotFound, format!("the repository's HEAD is broken: {why}"));
    let head = repo.head().map_err(|e| broken(e.to_string()))?;
    if head.is_unborn() {
        return Ok(None);
    }
    let Some(id) = head.id() else { return Err(broken("it names no commit".into())) };
    let id = id.detach();
    if !repo.has_object(id) {
        return Err(broken(format!("it points at {id}, which is not in the repository")));
    }
    Ok(Some(id))
}
