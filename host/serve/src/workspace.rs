//! Which directory a session works in. A workspace is given (`--workspace DIR`), or
//! chosen from what the client says its roots are — never stumbled into:
//!
//! - **Given**: every session works there; the client's roots are not asked.
//! - **From the roots**: a client that declares the `roots` capability is asked
//!   (`roots/list`) before its first call; one root is the workspace; of several, the
//!   one that holds the server's current directory (a stdio client starts the server
//!   where it runs), else the call is refused with the list. A
//!   `notifications/roots/list_changed` makes the next call ask again (calls in flight
//!   keep theirs). Over HTTP a root must also match one of `[serve] workspaces` (globs
//!   the operator allows): any other is refused.
//! - **No roots**: over stdio, the current directory; over HTTP, nothing (refused).
//!
//! Whatever the source, a directory that is `/`, the user's home, or holds the home or
//! the state directory is refused unless given with `--workspace`: an agent must not
//! get the user's keys and shell start-up files because a client was started from `~`.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// Why no workspace could be had for a call (shown to the agent and the operator).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoWorkspace(pub String);

/// How sessions get their workspace.
#[derive(Debug, Clone)]
pub enum WorkspaceChoice {
    /// Given with `--workspace`: every session works here.
    Given(PathBuf),
    /// From each session's roots, within what is allowed; else the fallback.
    FromRoots(Roots),
}

/// The rules for a workspace chosen from roots.
#[derive(Debug, Clone)]
pub struct Roots {
    /// When set, a root must match one of these (`[serve] workspaces`); over HTTP it
    /// must be set for roots to count at all.
    allowed: Option<(GlobSet, Vec<String>)>,
    /// Directories never served unless given, with what each is: the home, the state
    /// directory.
    guarded: Vec<(PathBuf, &'static str)>,
    /// The directory whose root wins among several (the server's current directory).
    here: Option<PathBuf>,
}

impl WorkspaceChoice {
    /// `--workspace DIR`: [`WorkspaceChoice::Given`] the directory [`resolve_given`] makes
    /// of `dir`.
    pub fn given(dir: &Path) -> WorkspaceChoice {
        WorkspaceChoice::Given(resolve_given(dir))
    }

    /// Roots within `allowed` (globs; empty: any directory that is not guarded), with
    /// `state_dir` and the home guarded.
    pub fn from_roots(allowed: &[String], state_dir: &Path) -> Result<WorkspaceChoice, NoWorkspace> {
        let allowed = if allowed.is_empty() {
            None
        } else {
            let mut set = GlobSetBuilder::new();
            for pattern in allowed {
                if !pattern.starts_with('/') {
                    return Err(NoWorkspace(format!(
                        "[serve] workspaces: \"{pattern}\" is not an absolute path or glob (e.g. \"/srv/work/*\")"
                    )));
                }
                // `*` stays within one directory: `/srv/work/*` allows `/srv/work/a`, not
                // `/srv/work/a/b` nor, through `..`, anything else (roots are resolved first).
                let glob = GlobBuilder::new(pattern)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| NoWorkspace(format!("[serve] workspaces: \"{pattern}\" is not a glob: {e}")))?;
                set.add(glob);
            }
            let set = set.build().map_err(|e| NoWorkspace(format!("[serve] workspaces: {e}")))?;
            Some((set, allowed.to_vec()))
        };
        let mut guarded: Vec<(PathBuf, &str)> = home_dir().into_iter().map(|h| (h, "the home directory")).collect();
        guarded.push((
            std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf()),
            "the server's state directory",
        ));
        let here = std::env::current_dir().ok().and_then(|d| std::fs::canonicalize(d).ok());
        Ok(WorkspaceChoice::FromRoots(Roots { allowed, guarded, here }))
    }

    /// The workspace when the client names no roots: the given one; over stdio the
    /// current directory, when it is not refused; over HTTP none.
    pub fn fallback(&self, stdio: bool) -> Result<PathBuf, NoWorkspace> {
        match self {
            WorkspaceChoice::Given(dir) => Ok(dir.clone()),
            WorkspaceChoice::FromRoots(r) if stdio => {
                let here = r.here.clone().ok_or_else(|| {
                    NoWorkspace("the current directory cannot be read; start cheng serve with --workspace DIR".into())
                })?;
                r.admit_guarded(&here, "the current directory")?;
                Ok(here)
            }
            WorkspaceChoice::FromRoots(r) => Err(NoWorkspace(match &r.allowed {
                Some((_, globs)) => format!(
                    "this session has no workspace: the client declared no roots, and this server serves only \
                     directories it names as roots within [serve] workspaces ({}). Declare a root, or ask the \
                     operator for a token pinned to a workspace (cheng token add --role R --workspace DIR)",
                    globs.join(", ")
                ),
                None => "this session has no workspace: start cheng serve with --workspace DIR, or list the \
                         directories sessions may choose in [serve] workspaces"
                    .into(),
            })),
        }
    }

    /// The workspace among the client's roots (`file://` URIs).
    pub fn pick(&self, roots: &[String], stdio: bool) -> Result<PathBuf, NoWorkspace> {
        let r = match self {
            WorkspaceChoice::Given(dir) => return Ok(dir.clone()),
            WorkspaceChoice::FromRoots(r) => r,
        };
        if roots.is_empty() {
            return self.fallback(stdio);
        }
        if !stdio && r.allowed.is_none() {
            return self.fallback(false);
        }
        let mut dirs = Vec::new();
        for uri in roots {
            let dir = root_path(uri)?;
            dirs.push(
                std::fs::canonicalize(&dir)
                    .map_err(|e| NoWorkspace(format!("the client's root {} cannot be opened: {e}", dir.display())))?,
            );
        }
        let chosen = if dirs.len() == 1 {
            dirs.remove(0)
        } else {
            let holding: Vec<&PathBuf> =
                dirs.iter().filter(|d| r.here.as_ref().is_some_and(|here| here.starts_with(d))).collect();
            match holding.iter().max_by_key(|d| d.components().count()) {
                Some(d) => (*d).clone(),
                None => {
                    let list: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
                    return Err(NoWorkspace(format!(
                        "the client names {} roots ({}) and none holds the server's current directory: name one \
                         root, or start cheng serve with --workspace DIR",
                        dirs.len(),
                        list.join(", ")
                    )));
                }
            }
        };
        if !chosen.is_dir() {
            return Err(NoWorkspace(format!("the client's root {} is not a directory", chosen.display())));
        }
        if let Some((set, globs)) = &r.allowed
            && !set.is_match(&chosen)
        {
            return Err(NoWorkspace(format!(
                "the client's root {} is not among the workspaces this server allows ([serve] workspaces: {})",
                chosen.display(),
                globs.join(", ")
            )));
        }
        r.admit_guarded(&chosen, "the client's root")?;
        Ok(chosen)
    }

    /// Whether roots are asked at all.
    pub fn asks_roots(&self) -> bool {
        matches!(self, WorkspaceChoice::FromRoots(_))
    }

    /// One line for the operator: where sessions work.
    pub fn describe(&self, stdio: bool) -> String {
        match self {
            WorkspaceChoice::Given(d) => d.display().to_string(),
            WorkspaceChoice::FromRoots(r) => {
                let fallback = match self.fallback(stdio) {
                    Ok(d) => format!("else {}", d.display()),
                    Err(_) if stdio => {
                        "else none: the current directory is refused (--workspace DIR to give one)".into()
                    }
                    Err(_) => "else none".into(),
                };
                match &r.allowed {
                    Some((_, globs)) => format!("the client's roots within {} ({fallback})", globs.join(", ")),
                    None => format!("the client's roots ({fallback})"),
                }
            }
        }
    }
}

impl Roots {
    /// Refuse `/`, a guarded directory, or one that holds a guarded directory.
    fn admit_guarded(&self, dir: &Path, what: &str) -> Result<(), NoWorkspace> {
        // The host's rule for a found workspace; the server says it in its own words.
        let why = cheng_host::guard::found_workspace_refusal(dir, &self.guarded);
        match why {
            None => Ok(()),
            Some(why) => Err(NoWorkspace(format!(
                "{what}, {}, is {why}: it is not served as a workspace unless given explicitly. Start cheng serve \
                 with --workspace {} (or a project directory inside it), or from a project directory",
                dir.display(),
                dir.display()
            ))),
        }
    }
}

/// The directory a root URI names (`file:///path`; percent-escapes decoded).
fn root_path(uri: &str) -> Result<PathBuf, NoWorkspace> {
    let url =
        url::Url::parse(uri).map_err(|e| NoWorkspace(format!("the client's root \"{uri}\" is not a URI: {e}")))?;
    if url.scheme() != "file" {
        return Err(NoWorkspace(format!("the client's root \"{uri}\" is not a file:// URI")));
    }
    url.to_file_path().map_err(|_| NoWorkspace(format!("the client's root \"{uri}\" names no local directory")))
}

/// The user's home directory, resolved.
fn home_dir() -> Option<PathBuf> {
    let home = directories::BaseDirs::new()?.home_dir().to_path_buf();
    Some(std::fs::canonicalize(&home).unwrap_or(home))
}

/// A workspace given on the command line, as calls and their records name it: absolute
/// and resolved (symbolic links and `..` followed), whatever the current directory was —
/// `--workspace tb/ws` is recorded as `/home/me/tb/ws`. A directory that does not resolve
/// (it does not exist) is made absolute as written; its calls fail as they would have.
pub fn resolve_given(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).or_else(|_| std::path::absolute(dir)).unwrap_or_else(|_| dir.to_path_buf())
}

/// Whether the current directory may be the workspace of a command that was given
/// none (`cheng call`, `cheng mcp diff`): the same refusal as for sessions.
pub fn current_dir_default(state_dir: &Path) -> Result<PathBuf, NoWorkspace> {
    WorkspaceChoice::from_roots(&[], state_dir)?.fallback(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(allowed: &[&str], here: Option<&Path>, guarded: &[&Path]) -> WorkspaceChoice {
        let mut c = WorkspaceChoice::from_roots(
            &allowed.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            Path::new("/nonexistent-state"),
        )
        .unwrap();
        if let WorkspaceChoice::FromRoots(r) = &mut c {
            r.here = here.map(Path::to_path_buf);
            r.guarded = guarded.iter().map(|p| (p.to_path_buf(), "the home directory")).collect();
        }
        c
    }

    fn uri(p: &Path) -> String {
        url::Url::from_file_path(p).unwrap().to_string()
    }

    #[test]
    fn a_given_workspace_is_absolute_and_resolved() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("tb/ws")).unwrap();
        std::os::unix::fs::symlink(base.join("tb"), base.join("link")).unwrap();
        for spelled in [base.join("tb/ws"), base.join("link/ws"), base.join("tb/../tb/./ws")] {
            assert_eq!(resolve_given(&spelled), base.join("tb/ws"), "{}", spelled.display());
        }
        let WorkspaceChoice::Given(dir) = WorkspaceChoice::given(&base.join("link/ws")) else { panic!("not given") };
        assert_eq!(dir, base.join("tb/ws"));
        // Relative to the current directory (the test process's; made absolute, not left
        // relative): a missing one is absolute as written.
        let here = std::env::current_dir().unwrap();
        assert_eq!(resolve_given(Path::new("no-such-dir-cheng/ws")), here.join("no-such-dir-cheng/ws"));
        assert!(resolve_given(Path::new(".")).is_absolute());
    }

    #[test]
    fn one_root_is_the_workspace_and_several_need_the_current_directory() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let (a, b) = (base.join("a"), base.join("b"));
        std::fs::create_dir_all(a.join("src")).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let c = roots(&[], Some(&a.join("src")), &[]);
        assert_eq!(c.pick(&[uri(&b)], true).unwrap(), b);
        assert_eq!(c.pick(&[uri(&b), uri(&a)], true).unwrap(), a);
        let far = roots(&[], Some(&base), &[]);
        let e = far.pick(&[uri(&a), uri(&b)], true).unwrap_err().0;
        assert!(e.contains("2 roots") && e.contains(&a.display().to_string()), "{e}");
        assert!(c.pick(&["https://example.com/".into()], true).unwrap_err().0.contains("file://"));
    }

    #[test]
    fn the_home_the_root_and_what_holds_them_are_refused_unless_given() {
        let t = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(t.path()).unwrap().join("home");
        std::fs::create_dir_all(home.join("project")).unwrap();
        let c = roots(&[], Some(&home), &[&home]);
        let e = c.fallback(true).unwrap_err().0;
        assert!(e.contains("--workspace") && e.contains(&home.display().to_string()), "{e}");
        assert!(c.pick(&[uri(&home)], true).is_err());
        assert!(c.pick(&[uri(home.parent().unwrap())], true).unwrap_err().0.contains("holds"));
        assert!(c.pick(&["file:///".into()], true).unwrap_err().0.contains("root"));
        // Positive control: a project inside the home is fine, and a given home is served.
        assert_eq!(c.pick(&[uri(&home.join("project"))], true).unwrap(), home.join("project"));
        assert_eq!(WorkspaceChoice::Given(home.clone()).fallback(true).unwrap(), home);
    }

    #[test]
    fn over_http_a_root_must_be_allowed_and_no_root_is_no_workspace() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("work/one")).unwrap();
        std::fs::create_dir_all(base.join("other")).unwrap();
        let glob = format!("{}/work/*", base.display());
        let c = roots(&[&glob], None, &[]);
        assert_eq!(c.pick(&[uri(&base.join("work/one"))], false).unwrap(), base.join("work/one"));
        let e = c.pick(&[uri(&base.join("other"))], false).unwrap_err().0;
        assert!(e.contains("not among the workspaces"), "{e}");
        assert!(c.pick(&[], false).unwrap_err().0.contains("no workspace"));
        // Without [serve] workspaces, HTTP roots are never trusted.
        let open = roots(&[], None, &[]);
        assert!(open.pick(&[uri(&base.join("other"))], false).is_err());
        assert!(WorkspaceChoice::from_roots(&["work/*".into()], Path::new("/x")).is_err());
    }
}
