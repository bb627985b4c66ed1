//! The call's context: who is calling, where the workspace is, and the path rules.

use std::path::{Path, PathBuf};

use cheng_contract::paths::{lexical_with_aliases, not_found_message, symlink_message};

use crate::Failure;
use crate::wit::cheng::tool::types::CallContext;

/// Facts about the current call, and the workspace path resolver.
#[derive(Debug, Clone)]
pub struct Context {
    sandbox_root: String,
    guest_root: String,
    run_id: String,
    role: String,
    call_id: String,
    protected: Vec<String>,
}

/// A workspace path that passed every rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The path relative to the workspace root, normalized (`.` for the root).
    pub rel: String,
    /// The path to open inside the component (under the workspace mount).
    pub path: PathBuf,
    /// Whether the target exists (always true from [`Context::resolve`]).
    pub exists: bool,
}

impl Context {
    pub(crate) fn from_wit(ctx: CallContext) -> Self {
        let cx = Context {
            sandbox_root: ctx.sandbox_root,
            guest_root: ctx.guest_root,
            run_id: ctx.run_id,
            role: ctx.role,
            call_id: ctx.call_id,
            protected: ctx.protected,
        };
        // Enter the workspace so that relative paths in `std::fs` calls resolve inside
        // it. Components without a filesystem grant have no such directory; that is fine.
        if !cx.guest_root.is_empty() {
            let _ = std::env::set_current_dir(&cx.guest_root);
        }
        cx
    }

    /// The workspace root as the host sees it (quoted in refusals).
    pub fn sandbox_root(&self) -> &str {
        &self.sandbox_root
    }

    /// Where the workspace is mounted inside this component; empty without a grant.
    pub fn guest_root(&self) -> &Path {
        Path::new(&self.guest_root)
    }

    /// The run this call belongs to.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The role the call runs under.
    pub fn role(&self) -> &str {
        &self.role
    }

    /// This call's id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Whether writing the workspace-relative path `rel` (normalized, as in
    /// [`Resolved::rel`]) is forbidden: it is, or lies under, a `.git` directory (at any
    /// depth), the host's configuration file or its state directory.
    pub fn is_protected(&self, rel: &str) -> bool {
        cheng_contract::paths::is_protected(rel, &self.protected)
    }

    /// `path` as the host's workspace rules expect it: a path under this component's
    /// mount point (`/workspace/...`) becomes relative; anything else is passed as sent,
    /// so that the host's refusals quote what the model wrote.
    pub fn host_path<'a>(&self, path: &'a str) -> std::borrow::Cow<'a, str> {
        if let Some(rest) = path.strip_prefix(self.guest_root.as_str()).filter(|_| !self.guest_root.is_empty())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            let rel = rest.trim_start_matches('/');
            return if rel.is_empty() { ".".into() } else { rel.to_string().into() };
        }
        path.into()
    }

    /// Resolve a path a model sent to an existing file or directory in the workspace.
    ///
    /// Applies the lexical rules (see [`crate::path_rules`]), then checks each segment
    /// from the root to the target: a symbolic link anywhere on the way, the target
    /// included, is refused; a missing segment is `File does not exist: <path>`.
    pub fn resolve(&self, path: &str) -> Result<Resolved, Failure> {
        self.walk(path, false)
    }

    /// Like [`Context::resolve`], but the target (and, when `create_dirs` is wanted,
    /// its missing parent directories) may not exist yet: for tools that create files.
    /// Existing segments are still checked for symbolic links.
    pub fn resolve_for_create(&self, path: &str) -> Result<Resolved, Failure> {
        self.walk(path, true)
    }

    fn walk(&self, path: &str, allow_missing: bool) -> Result<Resolved, Failure> {
        if self.guest_root.is_empty() {
            return Err(Failure::new(crate::ErrorKind::NotGranted, "this tool has no access to the workspace"));
        }
        let roots = [self.sandbox_root.as_str(), self.guest_root.as_str()];
        let rel = lexical_with_aliases(path, &roots)
            .map_err(|r| Failure::path_refused(r.message(path, &self.sandbox_root)))?;
        let mut cur = PathBuf::from(&self.guest_root);
        let mut so_far: Vec<&str> = Vec::new();
        let segments = rel.segments();
        let mut missing_from: Option<usize> = None;
        for (i, seg) in segments.iter().enumerate() {
            if missing_from.is_some() {
                // Below a missing directory only plain names make sense.
                if seg == ".." {
                    return Err(Failure::not_found(not_found_message(path)));
                }
                cur.push(seg);
                continue;
            }
            if seg == ".." {
                // Every directory this leaves was checked to be a real directory, so
                // folding it lexically agrees with the kernel.
                cur.pop();
                so_far.pop();
                continue;
            }
            cur.push(seg);
            so_far.push(seg);
            match std::fs::symlink_metadata(&cur) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(Failure::path_refused(symlink_message(path, &so_far.join("/"), &self.sandbox_root)));
                }
                Ok(meta) => {
                    let last = i + 1 == segments.len();
                    if !last && !meta.is_dir() {
                        return Err(Failure::not_found(format!(
                            "{} (\"{}\" is a file, not a directory)",
                            not_found_message(path),
                            so_far.join("/")
                        )));
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && allow_missing => {
                    missing_from = Some(i);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(Failure::not_found(not_found_message(path)));
                }
                Err(e) => return Err(Failure::io(&format!("cannot inspect \"{path}\""), &e)),
            }
        }
        if rel.trailing_slash() && missing_from.is_none() && !cur.is_dir() {
            return Err(Failure::not_found(format!(
                "{} (the path ends in \"/\" but is not a directory)",
                not_found_message(path)
            )));
        }
        Ok(Resolved { rel: rel.normalized(), path: cur, exists: missing_from.is_none() })
    }
}
