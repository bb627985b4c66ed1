//! Carve-outs: the workspace paths the path rules protect, made read-only (a write
//! rule that is not `allow`) or unreadable (a read rule that is not `allow`) inside a
//! command's own mount namespace, whatever let it run — an operator rule, a learned
//! rule, the known-safe list or a person's confined answer. Full access lifts them for
//! that one command; the host's own git (`workspace_git_write`) keeps its own model.
//!
//! Which paths: the workspace root's entries, and the entries of its dot-directories
//! (`.vscode`, `.github/workflows`, `.aws`), each checked against the rules — a
//! directory by what the rules say of a file inside it — plus, in the root's `.git`,
//! what git runs or reads later: `hooks/`, `config`, `config.worktree` and `info/`
//! (objects, refs, the index and `HEAD` stay writable, so `git add` and `git commit`
//! still work). A read-only one is bound over itself read-only; an unreadable file has
//! `/dev/null` bound over it, an unreadable directory an empty read-only `tmpfs`.
//!
//! Finding them costs one directory listing of the root (and one per dot-directory),
//! never a walk of the tree: a protected file deeper down (`app/.env`) is not carved
//! out for commands, and a protected path that does not exist when the command starts
//! can be created by it — the run reports such paths at the root afterwards
//! ([`created_since`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::policy::files::{Access, FileRules};
use crate::policy::process::RuleDecision;

/// What is done to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Bound over itself, read-only.
    ReadOnly = 0,
    /// A file with `/dev/null` bound over it.
    HideFile = 1,
    /// A directory with an empty read-only tmpfs over it.
    HideDir = 2,
}

/// One carve-out: a workspace-relative path and what is done to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Carve {
    /// Relative to the workspace root.
    pub rel: String,
    /// What is done.
    pub kind: Kind,
    /// The mount flags the path's mount is locked with (kept on a read-only remount).
    pub locked: u64,
}

/// Carve-outs for one command, at most this many (the root of a workspace rarely
/// holds more than a handful).
pub(crate) const MAX: usize = 256;

/// A name inside a directory, for asking what the rules say of its contents.
const INSIDE: &str = "cheng-carve-probe";

/// What git runs or reads later, inside the root's `.git`.
const GIT_LATER: &[&str] = &["hooks", "config", "config.worktree", "info"];

fn guarded(rules: &FileRules, rel: &str, dir: bool, access: Access) -> bool {
    let probe = if dir { format!("{rel}/{INSIDE}") } else { rel.to_string() };
    rules.check(&probe, access).decision != RuleDecision::Allow
        || (dir && rules.check(rel, access).decision != RuleDecision::Allow)
}

/// The carve-outs for a workspace, and the root's entry names they were found among
/// (for [`created_since`] after the command).
pub(crate) struct Plan {
    /// What is done, parents first.
    pub carves: Vec<Carve>,
    /// The root's entries when the plan was made.
    pub names: Vec<String>,
}

/// The carve-outs for a workspace at `root` under `rules`.
pub(crate) fn plan(rules: &FileRules, root: &Path) -> Plan {
    let mut out = Vec::new();
    let mut names = Vec::new();
    let look = |rel: String, out: &mut Vec<Carve>, deeper: bool| -> Option<bool> {
        let md = std::fs::symlink_metadata(root.join(&rel)).ok()?;
        let dir = md.is_dir();
        if guarded(rules, &rel, dir, Access::Write) {
            out.push(Carve { rel: rel.clone(), kind: Kind::ReadOnly, locked: locked_flags(&root.join(&rel)) });
            // Beneath a read-only directory, a secret is still hidden below.
        }
        if guarded(rules, &rel, dir, Access::Read) {
            let kind = if dir { Kind::HideDir } else { Kind::HideFile };
            out.push(Carve { rel, kind, locked: 0 });
            return Some(false);
        }
        Some(dir && deeper)
    };
    let Ok(entries) = std::fs::read_dir(root) else { return Plan { carves: out, names } };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        names.push(name.to_string());
        if cheng_contract::paths::is_git_dir_name(name) {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                for inner in GIT_LATER {
                    let rel = format!("{name}/{inner}");
                    let p = root.join(&rel);
                    if p.symlink_metadata().is_ok() {
                        out.push(Carve { rel, kind: Kind::ReadOnly, locked: locked_flags(&p) });
                    }
                }
            }
            continue;
        }
        if look(name.to_string(), &mut out, name.starts_with('.')) == Some(true)
            && let Ok(children) = std::fs::read_dir(root.join(name))
        {
            for c in children.flatten().take(MAX) {
                if let Some(child) = c.file_name().to_str() {
                    look(format!("{name}/{child}"), &mut out, false);
                }
            }
        }
    }
    // Deeper paths after their parents, so that a path beneath a read-only directory
    // is mounted into the read-only view (and hidden there).
    out.sort_by_key(|c| c.rel.matches('/').count());
    out.truncate(MAX);
    Plan { carves: out, names }
}

/// The flags the mount holding `path` is locked with, as `MS_*` bits: a read-only
/// remount inside a user namespace must keep them.
fn locked_flags(path: &Path) -> u64 {
    let Ok(c) = CString::new(path.as_os_str().as_bytes()) else { return 0 };
    // SAFETY: statvfs into a zeroed struct with a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let f = st.f_flag;
    let mut m = 0u64;
    for (st_bit, ms_bit) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f & st_bit != 0 {
            m |= ms_bit;
        }
    }
    m
}

/// The carve-outs as the command's init reads them: each path relative to the
/// command's working directory (`cwd_rel`, workspace-relative), as a C string.
pub(crate) fn c_paths(carves: &[Carve], cwd_rel: &str) -> Vec<(CString, Kind, u64)> {
    let depth = if cwd_rel == "." { 0 } else { cwd_rel.split('/').filter(|p| !p.is_empty()).count() };
    let up = "../".repeat(depth);
    carves
        .iter()
        .filter_map(|c| {
            let path = if up.is_empty() { format!("./{}", c.rel) } else { format!("{up}{}", c.rel) };
            CString::new(path).ok().map(|p| (p, c.kind, c.locked))
        })
        .collect()
}

/// The root entries a command created that the rules protect from writing (they did
/// not exist when it started, so no carve-out kept them from being made).
pub(crate) fn created_since(rules: &FileRules, root: &Path, before: &[String]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(root) else { return Vec::new() };
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let dir = e.file_type().is_ok_and(|t| t.is_dir());
            (!before.contains(&name) && guarded(rules, &name, dir, Access::Write)).then_some(name)
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_and_its_dot_directories_are_carved_and_git_keeps_its_objects() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        for d in [".git/hooks", ".git/objects", ".git/refs", ".vscode", ".github/workflows", ".aws", "src"] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for f in [".git/config", ".git/HEAD", ".env", ".env.example", ".aws/credentials", "src/main.rs", ".envrc"] {
            std::fs::write(r.join(f), "x").unwrap();
        }
        let rules = FileRules::defaults();
        let got: Vec<(String, Kind)> = plan(&rules, r).carves.into_iter().map(|c| (c.rel, c.kind)).collect();
        for want in [
            (".git/hooks", Kind::ReadOnly),
            (".git/config", Kind::ReadOnly),
            (".vscode", Kind::ReadOnly),
            (".github/workflows", Kind::ReadOnly),
            (".envrc", Kind::ReadOnly),
            (".env", Kind::HideFile),
            (".aws/credentials", Kind::HideFile),
        ] {
            assert!(got.contains(&(want.0.to_string(), want.1)), "{want:?} in {got:?}");
        }
        for not in [".git/objects", ".git/refs", ".git/HEAD", ".env.example", "src", "src/main.rs", ".github"] {
            assert!(!got.iter().any(|(p, _)| p == not), "{not} in {got:?}");
        }
        // Parents before what lies beneath them.
        let depth: Vec<usize> = got.iter().map(|(p, _)| p.matches('/').count()).collect();
        assert!(depth.windows(2).all(|w| w[0] <= w[1]), "{got:?}");
        let c = c_paths(&plan(&rules, r).carves, "src/deep");
        assert!(c.iter().all(|(p, ..)| p.to_str().unwrap().starts_with("../../")), "{c:?}");
        // A protected file made afterwards at the root is reported.
        let before = plan(&rules, r).names;
        std::fs::write(r.join(".mcp.json"), "{}").unwrap();
        std::fs::write(r.join("ordinary.txt"), "").unwrap();
        assert_eq!(created_since(&rules, r, &before), vec![".mcp.json".to_string()]);
    }
}
