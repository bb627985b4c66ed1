//! The directory walk shared by find_files and search_files: the `ignore` crate's
//! sequential walker (its parallel one needs threads), sorted by name, `.git` never
//! entered, symlinks never followed, global git excludes never read (they live outside
//! the workspace).

use std::path::Path;

use cheng_sdk::prelude::*;

/// A walk over `root` (a guest path).
pub fn walker(root: &Path, respect_ignores: bool, max_depth: usize, hidden: bool) -> ignore::Walk {
    let mut b = ignore::WalkBuilder::new(root);
    b.hidden(!hidden)
        .git_ignore(respect_ignores)
        .git_exclude(respect_ignores)
        .ignore(respect_ignores)
        .parents(respect_ignores)
        .git_global(false)
        .follow_links(false)
        .max_depth(Some(max_depth))
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git");
    b.build()
}

/// `path` relative to the workspace mount, with `/` separators.
pub fn rel_to_root(cx: &Context, path: &Path) -> String {
    path.strip_prefix(cx.guest_root()).unwrap_or(path).to_string_lossy().into_owned()
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
    pub fn is_match(&self, rel: &Path) -> bool {
        if self.by_name {
            rel.file_name().is_some_and(|n| self.set.is_match(n))
        } else {
            self.set.is_match(rel)
        }
    }
}
