//! `list_dir`: a directory's entries, optionally a few levels deep, capped in count.

use cheng_sdk::host;
use cheng_sdk::prelude::*;

use cheng_fs_core::caps::{LIST_DEFAULT_DEPTH, LIST_DEFAULT_ENTRIES, LIST_MAX_DEPTH, LIST_MAX_ENTRIES, SKIPPED_DIRS};

pub struct ListDir;

fn default_depth() -> u32 {
    LIST_DEFAULT_DEPTH
}
fn default_entries() -> u32 {
    LIST_DEFAULT_ENTRIES
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    #[serde(default = "cheng_fs_core::defaults::dot")]
    path: String,
    /// 1 = this directory only.
    #[serde(default = "default_depth")]
    #[schemars(range(min = 1, max = 8))]
    max_depth: u32,
    #[serde(default = "default_entries")]
    #[schemars(range(min = 1, max = 5000))]
    max_entries: u32,
    #[serde(default = "cheng_fs_core::defaults::yes")]
    include_hidden: bool,
}

#[derive(Serialize, JsonSchema, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

#[derive(Serialize, JsonSchema)]
pub struct Entry {
    /// Path relative to the listed directory ("src/main.rs" when listing deeper).
    name: String,
    /// file, dir, symlink (not followed) or other.
    kind: Kind,
    /// Size in bytes (files; 0 otherwise).
    size: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    // True when the directory was listed.
    success: bool,
    // One sentence on what was listed.
    summary: String,
    path: String,
    /// Depth-first; name relative to path.
    entries: Vec<Entry>,
    // True when max_entries cut the listing short.
    truncated: bool,
    /// Directories not entered (.git, node_modules).
    skipped: Vec<String>,
    /// Names that are not UTF-8, \xNN-escaped; they cannot be opened.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    not_utf8: Vec<String>,
}

impl Tool for ListDir {
    const NAME: &'static str = "list_dir";
    const DESCRIPTION: &'static str = "List a directory's entries, optionally several levels deep. When truncated, \
        list a subdirectory or lower max_depth.";
    const NEEDS: Needs = Needs::READ;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        let depth = input.max_depth.clamp(1, LIST_MAX_DEPTH);
        let cap = input.max_entries.clamp(1, LIST_MAX_ENTRIES) as usize;
        let target = cx.resolve(&input.path)?;
        if !target.path.is_dir() {
            return Err(Failure::invalid_argument(format!(
                "\"{}\" is a file, not a directory; use read_file to read it",
                input.path
            )));
        }
        let mut out = Output {
            success: true,
            summary: String::new(),
            path: target.rel.clone(),
            entries: Vec::new(),
            truncated: false,
            skipped: Vec::new(),
            not_utf8: Vec::new(),
        };
        walk(&target.rel, "", depth, cap, input.include_hidden, &mut out)?;
        let n = out.entries.len();
        out.summary = if out.truncated {
            format!(
                "Listed the first {n} entries of {} (max_entries reached); list a subdirectory, lower \
                 max_depth, or raise max_entries (at most {LIST_MAX_ENTRIES})",
                target.rel
            )
        } else {
            format!("Listed {n} entries of {}", target.rel)
        };
        if !out.skipped.is_empty() {
            out.summary.push_str(&format!("; skipped {}", out.skipped.join(", ")));
        }
        if !out.not_utf8.is_empty() {
            out.summary.push_str(&format!(
                "; {} names are not valid UTF-8 and are shown escaped (they cannot be read by name)",
                out.not_utf8.len()
            ));
        }
        Ok(out)
    }
}

/// List `dir_rel` (relative to the workspace root) through the host: one call per
/// directory, names that are not UTF-8 shown escaped.
fn walk(dir_rel: &str, prefix: &str, depth: u32, cap: usize, hidden: bool, out: &mut Output) -> Result<(), Failure> {
    let items = host::read_dir(dir_rel, true)?;
    for item in items {
        if !hidden && item.name.starts_with('.') {
            continue;
        }
        let rel = if prefix.is_empty() { item.name.clone() } else { format!("{prefix}/{}", item.name) };
        let kind = match item.kind {
            host::EntryKind::File => Kind::File,
            host::EntryKind::Dir => Kind::Dir,
            host::EntryKind::Symlink => Kind::Symlink,
            host::EntryKind::Other => Kind::Other,
        };
        if kind == Kind::Dir && SKIPPED_DIRS.contains(&item.name.as_str()) {
            out.skipped.push(rel);
            continue;
        }
        if out.entries.len() >= cap {
            out.truncated = true;
            return Ok(());
        }
        if !item.valid_utf8 {
            out.not_utf8.push(rel.clone());
        }
        out.entries.push(Entry { name: rel.clone(), kind, size: item.size });
        // A directory whose name is not UTF-8 cannot be named to the host: listed, not entered.
        if kind == Kind::Dir && depth > 1 && item.valid_utf8 {
            let child = if dir_rel == "." { item.name.clone() } else { format!("{dir_rel}/{}", item.name) };
            walk(&child, &rel, depth - 1, cap, hidden, out)?;
            if out.truncated {
                return Ok(());
            }
        }
    }
    Ok(())
}
