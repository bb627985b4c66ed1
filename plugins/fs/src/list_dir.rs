//! `list_dir`: a directory's entries, optionally a few levels deep, capped in count.

use cheng_sdk::prelude::*;

use crate::caps::{LIST_DEFAULT_DEPTH, LIST_DEFAULT_ENTRIES, LIST_MAX_DEPTH, LIST_MAX_ENTRIES, SKIPPED_DIRS};

pub struct ListDir;

fn default_path() -> String {
    ".".to_string()
}
fn default_depth() -> u32 {
    LIST_DEFAULT_DEPTH
}
fn default_entries() -> u32 {
    LIST_DEFAULT_ENTRIES
}
fn yes() -> bool {
    true
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Directory relative to the workspace root (default: the root).
    #[serde(default = "default_path")]
    path: String,
    /// How deep to list: 1 = this directory only (default 1, at most 8).
    #[serde(default = "default_depth")]
    #[schemars(range(min = 1, max = 8))]
    max_depth: u32,
    /// Most entries to return (default 500, at most 5000).
    #[serde(default = "default_entries")]
    #[schemars(range(min = 1, max = 5000))]
    max_entries: u32,
    /// Include names starting with "." (default true).
    #[serde(default = "yes")]
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
    /// True when the directory was listed.
    success: bool,
    /// One sentence on what was listed.
    summary: String,
    /// The directory listed, relative to the workspace root.
    path: String,
    /// Entries in depth-first order, names sorted within each directory.
    entries: Vec<Entry>,
    /// True when max_entries cut the listing short.
    truncated: bool,
    /// Directories not descended into (e.g. .git, node_modules), relative to the listed directory.
    skipped: Vec<String>,
}

impl Tool for ListDir {
    const NAME: &'static str = "list_dir";
    const DESCRIPTION: &'static str = "List a workspace directory: names, kinds (file/dir/symlink/other) \
        and sizes, one level by default or up to 8 levels deep (max_depth). .git and node_modules are \
        not descended into and are reported in `skipped`. Capped at max_entries; when truncated, list \
        a subdirectory or lower max_depth.";
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
        };
        walk(&target.path, "", depth, cap, input.include_hidden, &mut out)?;
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
        Ok(out)
    }
}

fn walk(dir: &std::path::Path, prefix: &str, depth: u32, cap: usize, hidden: bool, out: &mut Output) -> Result<(), Failure> {
    let rd = std::fs::read_dir(dir).map_err(|e| Failure::io(&format!("cannot list \"{}\"", display(prefix)), &e))?;
    let mut items: Vec<(String, Kind, u64)> = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| Failure::io("cannot read a directory entry", &e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !hidden && name.starts_with('.') {
            continue;
        }
        let ft = entry.file_type().map_err(|e| Failure::io("cannot read an entry's type", &e))?;
        let (kind, size) = if ft.is_symlink() {
            (Kind::Symlink, 0)
        } else if ft.is_dir() {
            (Kind::Dir, 0)
        } else if ft.is_file() {
            (Kind::File, entry.metadata().map(|m| m.len()).unwrap_or(0))
        } else {
            (Kind::Other, 0)
        };
        items.push((name, kind, size));
    }
    items.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, kind, size) in items {
        let rel = if prefix.is_empty() { name.clone() } else { format!("{prefix}/{name}") };
        if kind == Kind::Dir && SKIPPED_DIRS.contains(&name.as_str()) {
            out.skipped.push(rel);
            continue;
        }
        if out.entries.len() >= cap {
            out.truncated = true;
            return Ok(());
        }
        out.entries.push(Entry { name: rel.clone(), kind, size });
        if kind == Kind::Dir && depth > 1 {
            walk(&dir.join(&name), &rel, depth - 1, cap, hidden, out)?;
            if out.truncated {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn display(prefix: &str) -> &str {
    if prefix.is_empty() { "." } else { prefix }
}
