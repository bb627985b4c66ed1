//! `status`: porcelain v1 lines and `files` — HEAD against the index (`staged.rs`),
//! the index against the working tree (`worktree.rs`), untracked files from the same
//! listings.

use super::*;

pub(crate) fn status(
    repo: &gix::Repository,
    cx: &Context,
    specs: &Pathspecs,
    stderr: &mut String,
) -> Result<Vec<FileStatus>, Failure> {
    use gix::diff::index::ChangeRef;
    let want = |p: &gix::bstr::BStr| specs.matches(&p.to_str_lossy());
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
        if !specs.matches(&shown) {
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
pub(crate) fn untracked(
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
