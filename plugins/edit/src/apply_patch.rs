//! `apply_patch`: apply a unified diff (git-style headers accepted) to one or more
//! files, all or nothing: every hunk of every file is checked before any file is
//! written.

use cheng_sdk::host;
use cheng_sdk::prelude::*;

use crate::write_file::check_writable;
use cheng_fs_core::lines::read_text;

pub struct ApplyPatch;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    // A unified diff: for each file a "--- old" / "+++ new" header (a/ and b/ prefixes and "diff --git"
    // lines accepted; /dev/null for added or deleted files) followed by "@@" hunks.
    patch: String,
}

#[derive(Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Modified,
    Added,
    Deleted,
}

#[derive(Serialize, JsonSchema)]
pub struct FileOut {
    /// The file, relative to the workspace root (the new name for a rename).
    path: String,
    /// What happened to it.
    action: Action,
    /// Hunks applied.
    hunks: u64,
    /// For a renamed file: its old name (now gone).
    #[serde(skip_serializing_if = "Option::is_none")]
    renamed_from: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    // True when every file was patched.
    success: bool,
    // One sentence on what changed.
    summary: String,
    // One entry per file, in patch order.
    files: Vec<FileOut>,
}

/// One file's part of the patch.
struct Section {
    old: Option<String>,
    new: Option<String>,
    text: String,
    hunks: u64,
    /// A git rename with no change to the content (`rename from` / `rename to`, no hunks).
    rename_only: bool,
}

/// The paths of a git extended header's `rename from` / `rename to` lines, from line `i`
/// (just after `diff --git`) to the first line that is not part of the header; and
/// where the header ends.
fn rename_header(lines: &[&str], mut i: usize) -> (Option<String>, Option<String>, usize) {
    let (mut from, mut to) = (None, None);
    while let Some(l) = lines.get(i) {
        if l.starts_with("diff --git ") || l.starts_with("--- ") || l.starts_with("@@ ") {
            break;
        }
        let l = l.trim_end_matches(['\n', '\r']);
        if let Some(p) = l.strip_prefix("rename from ") {
            from = header_path(&format!("x{p}"), "x");
        } else if let Some(p) = l.strip_prefix("rename to ") {
            to = header_path(&format!("x{p}"), "x");
        }
        i += 1;
    }
    (from, to, i)
}

/// A header path: without a timestamp, unquoted; None for /dev/null.
fn header_path(line: &str, marker: &str) -> Option<String> {
    let rest = line[marker.len()..].trim_end_matches(['\n', '\r']);
    let rest = rest.split('\t').next().unwrap_or(rest);
    let rest = if rest.len() >= 2 && rest.starts_with('"') && rest.ends_with('"') {
        let inner = &rest[1..rest.len() - 1];
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('t') => out.push('\t'),
                    Some('n') => out.push('\n'),
                    Some(o) => out.push(o),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        out
    } else {
        rest.trim_end().to_string()
    };
    if rest == "/dev/null" { None } else { Some(rest) }
}

/// `@@ -a,b +c,d @@` → (b, d).
fn hunk_counts(line: &str) -> Option<(u64, u64)> {
    let body = line.strip_prefix("@@ ")?;
    let end = body.find(" @@")?;
    let mut parts = body[..end].split(' ');
    let count = |p: &str, sign: char| -> Option<u64> {
        let p = p.strip_prefix(sign)?;
        Some(match p.split_once(',') {
            Some((_, n)) => n.parse().ok()?,
            None => 1,
        })
    };
    Some((count(parts.next()?, '-')?, count(parts.next()?, '+')?))
}

fn split(patch: &str) -> Result<Vec<Section>, Failure> {
    let lines: Vec<&str> = patch.split_inclusive('\n').collect();
    let mut sections = Vec::new();
    let mut git = false;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.starts_with("diff --git ") {
            git = true;
            let (from, to, end) = rename_header(&lines, i + 1);
            let next_is_patch = lines.get(end).is_some_and(|l| l.starts_with("--- "));
            if let (Some(from), Some(to), false) = (&from, &to, next_is_patch) {
                // A pure rename: the content moves as it is.
                sections.push(Section {
                    old: Some(from.clone()),
                    new: Some(to.clone()),
                    text: String::new(),
                    hunks: 0,
                    rename_only: true,
                });
                i = end;
                continue;
            }
            i += 1;
            continue;
        }
        if !(line.starts_with("--- ") && lines.get(i + 1).is_some_and(|l| l.starts_with("+++ "))) {
            i += 1;
            continue;
        }
        let mut old = header_path(line, "--- ");
        let mut new = header_path(lines[i + 1], "+++ ");
        let prefixed = |p: &Option<String>, pre: &str| p.as_ref().is_none_or(|p| p.starts_with(pre));
        if git || (prefixed(&old, "a/") && prefixed(&new, "b/")) {
            old = old.map(|p| p.strip_prefix("a/").map(str::to_string).unwrap_or(p));
            new = new.map(|p| p.strip_prefix("b/").map(str::to_string).unwrap_or(p));
        }
        let mut text =
            format!("--- {}\n+++ {}\n", old.as_deref().unwrap_or("/dev/null"), new.as_deref().unwrap_or("/dev/null"));
        let mut j = i + 2;
        let mut hunks = 0;
        while j < lines.len() && lines[j].starts_with("@@ ") {
            let (mut o, mut n) = hunk_counts(lines[j])
                .ok_or_else(|| Failure::invalid_argument(format!("malformed hunk header {:?}", lines[j].trim_end())))?;
            hunks += 1;
            text.push_str(lines[j]);
            j += 1;
            while j < lines.len() && (o > 0 || n > 0 || lines[j].starts_with('\\')) {
                let l = lines[j];
                match l.as_bytes().first() {
                    Some(b' ') => {
                        o = o.saturating_sub(1);
                        n = n.saturating_sub(1);
                    }
                    Some(b'-') => o = o.saturating_sub(1),
                    Some(b'+') => n = n.saturating_sub(1),
                    Some(b'\\') => {}
                    // An empty line inside a hunk is an empty context line.
                    Some(b'\n') | Some(b'\r') => {
                        o = o.saturating_sub(1);
                        n = n.saturating_sub(1);
                    }
                    _ => break,
                }
                text.push_str(if l == "\n" { " \n" } else { l });
                j += 1;
            }
            if o > 0 || n > 0 {
                return Err(Failure::invalid_argument(format!(
                    "hunk #{hunks} for {} ends early: its header promises more lines than it has",
                    new.as_deref().or(old.as_deref()).unwrap_or("?")
                )));
            }
        }
        if hunks == 0 && old.is_some() && new.is_some() {
            return Err(Failure::invalid_argument(format!(
                "the patch for {} has no hunks",
                new.as_deref().unwrap_or("?")
            )));
        }
        sections.push(Section { old, new, text, hunks, rename_only: false });
        i = j;
    }
    if sections.is_empty() {
        return Err(Failure::invalid_argument(
            "no file patches found: each file needs a \"--- old\" line, a \"+++ new\" line and \"@@\" hunks",
        ));
    }
    Ok(sections)
}

/// A planned change, checked and ready to write.
enum Change {
    Write { rel: String, content: String, created: bool },
    Remove { rel: String },
}

impl Tool for ApplyPatch {
    const NAME: &'static str = "apply_patch";
    const DESCRIPTION: &'static str = "Apply a unified diff (git-style headers and renames accepted) to one or more \
        files, all or nothing: if any hunk fails, no file changes.";
    const NEEDS: Needs = Needs::WRITE;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        let sections = split(&input.patch)?;
        let mut changes: Vec<Change> = Vec::new();
        let mut files = Vec::new();
        for s in &sections {
            let parse = || {
                diffy::Patch::from_str(&s.text).map_err(|e| {
                    Failure::invalid_argument(format!(
                        "cannot parse the patch for {}: {e}",
                        s.new.as_deref().or(s.old.as_deref()).unwrap_or("?")
                    ))
                })
            };
            let (base, old_rel) = match &s.old {
                Some(old) => {
                    let (rel, data) = read_text(cx, old)?;
                    check_writable(cx, &rel)?;
                    let text = String::from_utf8(data).map_err(|_| {
                        Failure::invalid_argument(format!("{old} is not valid UTF-8; it cannot be patched as text"))
                    })?;
                    (text, Some(rel))
                }
                None => (String::new(), None),
            };
            let display = s.new.as_deref().or(s.old.as_deref()).unwrap_or("?");
            let patched = if s.rename_only {
                base
            } else {
                let parsed = parse()?;
                diffy::apply(&base, &parsed).map_err(|e| {
                    let n: usize = e.to_string().rsplit('#').next().and_then(|n| n.parse().ok()).unwrap_or(1);
                    let at = parsed.hunks().get(n.saturating_sub(1)).map(|h| h.old_range().start()).unwrap_or(0);
                    Failure::invalid_argument(format!(
                        "hunk #{n} for {display} (at line {at} of the old file) does not apply: its context or removed \
                     lines do not match the file. No file was changed; read the file again and regenerate the patch"
                    ))
                })?
            };
            match (&s.new, old_rel) {
                (None, Some(rel)) => {
                    if !patched.is_empty() {
                        return Err(Failure::invalid_argument(format!(
                            "the patch deletes {rel} but does not remove all of its lines; no file was changed"
                        )));
                    }
                    files.push(FileOut {
                        path: rel.clone(),
                        action: Action::Deleted,
                        hunks: s.hunks,
                        renamed_from: None,
                    });
                    changes.push(Change::Remove { rel });
                }
                (Some(new), old_rel) => {
                    let t = cx.resolve_for_create(new)?;
                    check_writable(cx, &t.rel)?;
                    let created = old_rel.is_none();
                    if created && t.exists {
                        return Err(Failure::invalid_argument(format!(
                            "the patch adds {} but it already exists; no file was changed",
                            t.rel
                        )));
                    }
                    let renamed_from = old_rel.filter(|o| *o != t.rel);
                    files.push(FileOut {
                        path: t.rel.clone(),
                        action: if created { Action::Added } else { Action::Modified },
                        hunks: s.hunks,
                        renamed_from: renamed_from.clone(),
                    });
                    changes.push(Change::Write { rel: t.rel, content: patched, created });
                    if let Some(from) = renamed_from {
                        changes.push(Change::Remove { rel: from });
                    }
                }
                (None, None) => {
                    return Err(Failure::invalid_argument("a file patch names /dev/null on both sides"));
                }
            }
        }
        // Every hunk applies: now write.
        for c in &changes {
            match c {
                Change::Write { rel, content, created } => {
                    host::write_file(rel, content.as_bytes(), *created, true)?;
                }
                Change::Remove { rel } => host::remove_file(rel)?,
            }
        }
        let count = |a: Action| files.iter().filter(|f| f.action == a).count();
        let summary = format!(
            "Patched {} files: {} modified, {} added, {} deleted",
            files.len(),
            count(Action::Modified),
            count(Action::Added),
            count(Action::Deleted)
        );
        Ok(Output { success: true, summary, files })
    }
}
