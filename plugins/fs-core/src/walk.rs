//! The directory walk shared by find_files and search_files.
//!
//! Directories are listed through the host (`read-dir`: one call per directory, names
//! that are not UTF-8 reported instead of ending the listing), in name order; ignore
//! rules are the `ignore` crate's own matchers, applied as ripgrep applies them:
//! `.ignore` files anywhere, `.gitignore` files and `.git/info/exclude` inside a git
//! repository, deeper files overriding shallower ones, parents of the searched
//! directory included, global git excludes never (they live outside the workspace).
//! `.git` is never entered and symlinks are never followed.

use std::path::{Path, PathBuf};

use cheng_sdk::host;
use cheng_sdk::prelude::*;
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// How to walk.
pub struct WalkOptions {
    /// Apply .gitignore / .ignore / .git/info/exclude.
    pub respect_ignores: bool,
    /// Deepest level below the base to descend (1 = the base's own entries).
    pub max_depth: usize,
    /// Include names starting with ".".
    pub hidden: bool,
}

/// A file the walk found.
pub struct Found {
    /// Relative to the workspace root.
    pub rel: String,
    /// Where the part relative to the walk's base starts in `rel`.
    base_len: usize,
}

impl Found {
    /// The path relative to the walk's base.
    pub fn under_base(&self) -> &str {
        &self.rel[self.base_len..]
    }
}

/// The ignore matchers of one directory, most specific first, and where the part of a
/// workspace-relative path below that directory starts.
struct Level {
    matchers: Vec<Gitignore>,
    prefix: usize,
}

/// The length of `rel` (a directory relative to the workspace root) with its slash, as
/// a prefix of the paths below it.
fn prefix_len(rel: &str) -> usize {
    if rel == "." { 0 } else { rel.len() + 1 }
}

/// The rules of the ignore file `name` in `dir`, matched against paths relative to the
/// directory they apply to. Their root is empty, not the directory's path: `ignore`
/// strips a matcher's root from each path by comparing `Path` components, which on WASI
/// (no byte-wise fast path) was a tenth of a walk's time; the walk hands each matcher
/// the path below its directory itself.
fn load(dir: &Path, name: &str) -> Option<Gitignore> {
    let file = dir.join(name);
    if !file.is_file() {
        return None;
    }
    let mut builder = GitignoreBuilder::new("");
    let _partial = builder.add(&file);
    let gi = builder.build().ok()?;
    (!gi.is_empty()).then_some(gi)
}

/// The matchers of one directory. `names`, when known (from its listing), saves a
/// lookup for ignore files that are not there.
fn level_for(guest_dir: &Path, rel: &str, in_repo: bool, repo_root: bool, names: Option<&[&str]>) -> Level {
    let has = |n: &str| names.is_none_or(|ns| ns.contains(&n));
    let mut matchers = Vec::new();
    if has(".ignore") {
        matchers.extend(load(guest_dir, ".ignore"));
    }
    if in_repo && has(".gitignore") {
        matchers.extend(load(guest_dir, ".gitignore"));
        if repo_root {
            matchers.extend(load(&guest_dir.join(".git").join("info"), "exclude"));
        }
    }
    Level { matchers, prefix: prefix_len(rel) }
}

/// Is `rel` (relative to the workspace root) ignored by the levels (deepest last in
/// `levels`)?
fn ignored(levels: &[Level], rel: &str, is_dir: bool) -> bool {
    for level in levels.iter().rev() {
        for m in &level.matchers {
            match m.matched(&rel[level.prefix..], is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
    }
    false
}

/// Walk files under `base_rel` (relative to the workspace root), calling `visit` on
/// each in path order until it returns false. Entries that cannot be walked (names that
/// are not UTF-8, unreadable directories) are reported in `skipped`.
pub fn walk_files(
    cx: &Context,
    base_rel: &str,
    opts: &WalkOptions,
    skipped: &mut Vec<String>,
    visit: &mut dyn FnMut(Found) -> bool,
) -> Result<(), Failure> {
    let guest_root = cx.guest_root().to_path_buf();
    let guest = |rel: &str| if rel == "." { guest_root.clone() } else { guest_root.join(rel) };
    // The ignore files of the base's ancestors apply too; a git repository is a
    // directory holding `.git` at or above the level in question.
    let mut levels = Vec::new();
    let mut in_repo = false;
    if opts.respect_ignores {
        let mut chain: Vec<String> = vec![".".into()];
        if base_rel != "." {
            let mut acc = String::new();
            for seg in base_rel.split('/') {
                acc = if acc.is_empty() { seg.to_string() } else { format!("{acc}/{seg}") };
                chain.push(acc.clone());
            }
        }
        // The last element is the base itself, handled by the walk.
        chain.pop();
        for rel in chain {
            let dir = guest(&rel);
            let repo_root = dir.join(".git").exists();
            in_repo |= repo_root;
            levels.push(level_for(&dir, &rel, in_repo, repo_root, None));
        }
    }
    let base_len = prefix_len(base_rel);
    walk_dir(&guest(base_rel), base_rel, base_len, 1, opts, in_repo, &mut levels, skipped, visit)?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn walk_dir(
    dir: &Path,
    rel: &str,
    base_len: usize,
    depth: usize,
    opts: &WalkOptions,
    in_repo: bool,
    levels: &mut Vec<Level>,
    skipped: &mut Vec<String>,
    visit: &mut dyn FnMut(Found) -> bool,
) -> Result<bool, Failure> {
    let entries = match host::read_dir(rel, false) {
        Ok(e) => e,
        Err(f) => {
            skipped.push(format!("{rel}: {}", f.message));
            return Ok(true);
        }
    };
    let repo_root = entries.iter().any(|e| e.name == ".git");
    let in_repo = in_repo || repo_root;
    let pushed = opts.respect_ignores;
    if pushed {
        let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        levels.push(level_for(dir, rel, in_repo, repo_root, Some(&names)));
    }
    let mut go_on = true;
    for e in entries {
        if e.name == ".git" || (!opts.hidden && e.name.starts_with('.')) {
            continue;
        }
        let mut child_rel = String::with_capacity(rel.len() + 1 + e.name.len());
        if rel != "." {
            child_rel.push_str(rel);
            child_rel.push('/');
        }
        child_rel.push_str(&e.name);
        if !e.valid_utf8 {
            skipped.push(format!("{child_rel}: the name is not valid UTF-8"));
            continue;
        }
        let is_dir = e.kind == host::EntryKind::Dir;
        if opts.respect_ignores && ignored(levels, &child_rel, is_dir) {
            continue;
        }
        let keep_going = match e.kind {
            host::EntryKind::File => visit(Found { rel: child_rel, base_len }),
            host::EntryKind::Dir if depth < opts.max_depth => {
                let child_dir: PathBuf = dir.join(&e.name);
                walk_dir(&child_dir, &child_rel, base_len, depth + 1, opts, in_repo, levels, skipped, visit)?
            }
            _ => true,
        };
        if !keep_going {
            go_on = false;
            break;
        }
    }
    if pushed {
        levels.pop();
    }
    Ok(go_on)
}

/// A glob for matching walked paths: a pattern without `/` matches file names at any
/// depth; one with `/` matches the path relative to the searched directory.
pub struct PathGlob {
    set: globset::GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    /// Compile `pattern`, naming the field in the error.
    pub fn new(pattern: &str, field: &str) -> Result<Self, Failure> {
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| Failure::invalid_argument(format!("{field} \"{pattern}\" is not a valid glob: {e}")))?;
        Ok(PathGlob { set: glob.compile_matcher(), by_name: !pattern.contains('/') })
    }

    /// Does `rel` (relative to the searched directory) match?
    pub fn is_match(&self, rel: &str) -> bool {
        if self.by_name {
            let name = rel.rsplit('/').next().unwrap_or(rel);
            self.set.is_match(name)
        } else {
            self.set.is_match(rel)
        }
    }
}
