//! Patches in git's format: `diff` (the working tree against HEAD) and `show` (a
//! commit against its first parent), with exact renames paired as git pairs them.

use super::*;

/// Every blob of a tree: path → (mode bits, id).
pub(crate) fn tree_files(
    repo: &gix::Repository,
    tree: Option<gix::ObjectId>,
) -> Result<BTreeMap<String, staged::Side>, Failure> {
    let mut map = BTreeMap::new();
    let Some(tree) = tree else { return Ok(map) };
    let tree = repo.find_tree(tree).map_err(io)?;
    let mut rec = gix::traverse::tree::Recorder::default();
    tree.traverse().breadthfirst(&mut rec).map_err(io)?;
    for e in rec.records {
        if e.mode.is_tree() {
            continue;
        }
        map.insert(e.filepath.to_str_lossy().into_owned(), (e.mode.value() as u32, e.oid));
    }
    Ok(map)
}

/// One side of a patch: a blob's bytes, or for a submodule (a commit recorded in the
/// tree) the line git shows for it.
pub(crate) fn side(repo: &gix::Repository, mode: u32, id: gix::ObjectId) -> Result<Vec<u8>, Failure> {
    if mode == 0o160000 {
        return Ok(format!("Subproject commit {id}\n").into_bytes());
    }
    blob(repo, id)
}

pub(crate) fn blob(repo: &gix::Repository, id: gix::ObjectId) -> Result<Vec<u8>, Failure> {
    Ok(repo.find_blob(id).map_err(io)?.data.clone())
}

pub(crate) fn short(id: &gix::ObjectId) -> String {
    id.to_hex_with_len(7).to_string()
}

/// One file's patch, in git's format. `old`/`new`: (mode, id, bytes) or None.
pub(crate) fn file_patch(
    path: &[u8],
    old: Option<(u32, gix::ObjectId, &[u8])>,
    new: Option<(u32, gix::ObjectId, &[u8])>,
) -> String {
    let (a_name, b_name) = (diff_name("a/", path), diff_name("b/", path));
    let mut s = format!("diff --git {a_name} {b_name}\n");
    match (&old, &new) {
        (None, Some((m, id, _))) => s.push_str(&format!("new file mode {m:o}\nindex 0000000..{}\n", short(id))),
        (Some((m, id, _)), None) => s.push_str(&format!("deleted file mode {m:o}\nindex {}..0000000\n", short(id))),
        (Some((om, oid, _)), Some((nm, nid, _))) => {
            if om != nm {
                s.push_str(&format!("old mode {om:o}\nnew mode {nm:o}\n"));
                if oid != nid {
                    s.push_str(&format!("index {}..{}\n", short(oid), short(nid)));
                }
            } else {
                s.push_str(&format!("index {}..{} {om:o}\n", short(oid), short(nid)));
            }
        }
        (None, None) => return String::new(),
    }
    let o = old.as_ref().map(|x| x.2).unwrap_or(b"");
    let n = new.as_ref().map(|x| x.2).unwrap_or(b"");
    // A file the host's path rules protect from reading (a likely secret): its lines
    // are never shown, whatever revision they come from.
    let name = String::from_utf8_lossy(path).into_owned();
    if cheng_sdk::host::path_rules(std::slice::from_ref(&name), false).first()
        != Some(&cheng_sdk::host::PathRule::Allow)
    {
        s.push_str(
            "Contents not shown: a path rule protects this file (read_file on it asks a person; the operator's \
             [[files.rules]] can allow it)\n",
        );
        return s;
    }
    if old.as_ref().is_some_and(|x| x.1 == new.as_ref().map(|y| y.1).unwrap_or(x.1)) && o == n {
        return s; // mode change only
    }
    let binary = o.iter().take(8000).any(|b| *b == 0) || n.iter().take(8000).any(|b| *b == 0);
    let a = if old.is_some() { a_name } else { "/dev/null".into() };
    let b = if new.is_some() { b_name } else { "/dev/null".into() };
    if binary {
        s.push_str(&format!("Binary files {a} and {b} differ\n"));
        return s;
    }
    let (os, ns) = (String::from_utf8_lossy(o), String::from_utf8_lossy(n));
    let diff = similar::TextDiff::configure().algorithm(similar::Algorithm::Myers).diff_lines(os.as_ref(), ns.as_ref());
    // Like git, end a name holding a space with a tab, so that it cannot run into more.
    let tab = |n: &str| if n.contains(' ') && n != "/dev/null" { "\t" } else { "" };
    s.push_str(&format!("--- {a}{}\n+++ {b}{}\n", tab(&a), tab(&b)));
    let mut u = diff.unified_diff();
    u.context_radius(3).missing_newline_hint(true);
    for hunk in u.iter_hunks() {
        s.push_str(&hunk.to_string());
    }
    s
}

pub(crate) fn show(
    repo: &gix::Repository,
    rev: &str,
    specs: &Pathspecs,
    stderr: &mut String,
) -> Result<(Commit, Vec<FileStatus>, String), Failure> {
    let id = resolve(repo, rev)?;
    let c = repo.find_commit(id).map_err(io)?;
    let mut text = header(&c)?;
    let new_tree = Some(c.tree_id().map_err(io)?.detach());
    let parents: Vec<gix::ObjectId> = c.parent_ids().map(|p| p.detach()).collect();
    if parents.len() > 1 {
        // A merge: git shows a combined diff of the paths that differ from every parent
        // (none for a clean merge). Those paths are listed; their combined patch is not
        // written here.
        let new = tree_files(repo, new_tree)?;
        let olds = parents
            .iter()
            .map(|p| tree_files(repo, Some(repo.find_commit(*p).map_err(io)?.tree_id().map_err(io)?.detach())))
            .collect::<Result<Vec<_>, Failure>>()?;
        let paths: std::collections::BTreeSet<&String> = olds.iter().flat_map(|o| o.keys()).chain(new.keys()).collect();
        let mut files = Vec::new();
        for p in paths {
            if specs.matches(p) && olds.iter().all(|o| o.get(p) != new.get(p)) {
                let mut f = FileStatus::new(p.clone(), p.as_bytes().to_vec());
                f.index = if new.contains_key(p) { "M" } else { "D" }.into();
                files.push(f);
            }
        }
        // git ends a merge's header with the separator its (combined) diff would follow.
        text.push('\n');
        if !files.is_empty() {
            stderr.push_str("warning: this merge changed paths against every parent; they are listed in `files`, their combined diff (`git show --cc`) is not shown\n");
        }
        return Ok((commit_info(&c)?, files, text));
    }
    let parent = parents.first().copied();
    let old_tree = match parent {
        Some(p) => Some(repo.find_commit(p).map_err(io)?.tree_id().map_err(io)?.detach()),
        None => None,
    };
    let (files, patch) = tree_diff(repo, &tree_files(repo, old_tree)?, &tree_files(repo, new_tree)?, specs, stderr)?;
    if !patch.is_empty() {
        text.push('\n');
        text.push_str(&patch);
    }
    Ok((commit_info(&c)?, files, text))
}

pub(crate) fn tree_diff(
    repo: &gix::Repository,
    old: &BTreeMap<String, staged::Side>,
    new: &BTreeMap<String, staged::Side>,
    specs: &Pathspecs,
    stderr: &mut String,
) -> Result<(Vec<FileStatus>, String), Failure> {
    let paths: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    let mut changes = Vec::new();
    for p in paths {
        let (o, n) = (old.get(p), new.get(p));
        if o == n || !specs.matches(p) {
            continue;
        }
        changes.push(PathChange {
            path: p.as_bytes().to_vec(),
            from: None,
            old: o.copied(),
            new: n.copied(),
            new_data: None,
        });
    }
    let changes = exact_renames(repo, changes);
    emit(repo, &changes, true, stderr)
}

/// One path's change between two sides, each side (mode, id); `from` for a rename,
/// `new_data` when the new side's content is not in the object database (the working
/// tree).
pub(crate) struct PathChange {
    path: Vec<u8>,
    from: Option<Vec<u8>>,
    old: Option<staged::Side>,
    new: Option<staged::Side>,
    new_data: Option<Vec<u8>>,
}

/// git's exact rename detection, unless the repository turns `diff.renames` off: a
/// deleted path and an added path with the same content are one rename (a source with
/// the same file name preferred), listed at the new path.
pub(crate) fn exact_renames(repo: &gix::Repository, changes: Vec<PathChange>) -> Vec<PathChange> {
    use std::collections::{HashMap, HashSet};
    if repo.config_snapshot().boolean("diff.renames") == Some(false) {
        return changes;
    }
    let mut deleted: Vec<(Vec<u8>, gix::ObjectId)> =
        changes.iter().filter(|c| c.new.is_none()).filter_map(|c| c.old.map(|(_, id)| (c.path.clone(), id))).collect();
    let added: Vec<(&[u8], gix::ObjectId)> = changes
        .iter()
        .filter(|c| c.old.is_none())
        .filter_map(|c| c.new.map(|(_, id)| (c.path.as_slice(), id)))
        .collect();
    let sources = staged::pair_exact(&added, &mut deleted);
    let pairs: HashMap<Vec<u8>, Vec<u8>> =
        added.iter().zip(sources).filter_map(|((p, _), s)| s.map(|s| (p.to_vec(), s))).collect();
    let used: HashSet<&Vec<u8>> = pairs.values().collect();
    let olds: HashMap<Vec<u8>, Option<staged::Side>> =
        changes.iter().filter(|c| used.contains(&c.path)).map(|c| (c.path.clone(), c.old)).collect();
    changes
        .into_iter()
        .filter(|c| !(c.new.is_none() && used.contains(&c.path)))
        .map(|mut c| {
            if let Some(from) = pairs.get(&c.path) {
                c.old = olds.get(from).copied().flatten();
                c.from = Some(from.clone());
            }
            c
        })
        .collect()
}

/// Patches and file entries for `changes`, in git's format; `staged` puts the letter
/// in the index column (show) rather than the working-tree one (diff).
pub(crate) fn emit(
    repo: &gix::Repository,
    changes: &[PathChange],
    staged: bool,
    stderr: &mut String,
) -> Result<(Vec<FileStatus>, String), Failure> {
    let mut files = Vec::new();
    let mut patch = String::new();
    for c in changes {
        let kind = |m: u32| m & 0o170000;
        let letter = match (c.old, c.new) {
            (None, None) => continue,
            _ if c.from.is_some() => "R",
            (None, Some(_)) => "A",
            (Some(_), None) => "D",
            (Some((om, _)), Some((nm, _))) if kind(om) != kind(nm) => "T",
            _ => "M",
        };
        let old_bytes = c.old.map(|(m, id)| side(repo, m, id)).transpose()?;
        let loaded = match (&c.new_data, c.new) {
            (None, Some((m, id))) => Some(side(repo, m, id)?),
            _ => None,
        };
        let new_bytes = c.new_data.as_deref().or(loaded.as_deref()).unwrap_or(b"");
        let old = c.old.map(|(m, id)| (m, id, old_bytes.as_deref().unwrap_or(b"")));
        let new = c.new.map(|(m, id)| (m, id, new_bytes));
        match (&c.from, letter) {
            (Some(from), _) => {
                let (om, nm) = (c.old.map_or(0, |x| x.0), c.new.map_or(0, |x| x.0));
                patch.push_str(&format!("diff --git {} {}\n", diff_name("a/", from), diff_name("b/", &c.path)));
                if om != nm {
                    patch.push_str(&format!("old mode {om:o}\nnew mode {nm:o}\n"));
                }
                patch.push_str(&format!(
                    "similarity index 100%\nrename from {}\nrename to {}\n",
                    diff_name("", from),
                    diff_name("", &c.path)
                ));
            }
            // A change of kind is a deletion and an addition, as git prints it.
            (None, "T") => {
                patch.push_str(&file_patch(&c.path, old, None));
                patch.push_str(&file_patch(&c.path, None, new));
            }
            (None, _) => patch.push_str(&file_patch(&c.path, old, new)),
        }
        let mut f = FileStatus::new(lossy(c.path.as_bstr(), stderr), c.path.clone());
        if let Some(from) = &c.from {
            f.from = Some(lossy(from.as_bstr(), stderr));
            f.raw_from = Some(from.clone());
        }
        if staged {
            f.index = letter.into();
        } else {
            f.worktree = letter.into();
        }
        files.push(f);
    }
    Ok((files, patch))
}

/// The working tree against HEAD (`git diff HEAD`): the paths where HEAD and the index
/// differ, or the index and the working tree (judged from stats, see worktree.rs), are
/// read and compared with HEAD. A path in HEAD but not in the index is deleted, as git
/// shows it.
pub(crate) fn diff_head(
    repo: &gix::Repository,
    cx: &Context,
    specs: &Pathspecs,
    stderr: &mut String,
) -> Result<(Vec<FileStatus>, String), Failure> {
    use std::collections::BTreeSet;
    let want = |p: &gix::bstr::BStr| specs.matches(&p.to_str_lossy());
    let index = repo.index_or_empty().map_err(io)?;
    // HEAD's side where the index's cached tree does not vouch for it (staged.rs).
    let head = staged::HeadSide::read(repo, &index, head_tree(repo)?).map_err(io)?;
    let mut candidates: BTreeSet<Vec<u8>> = BTreeSet::new();
    for (p, _, _) in staged::changes(&index, &head, false).unwrap_or_default() {
        if want(p.as_bstr()) {
            candidates.insert(p);
        }
    }
    let (workdir, rel) = root_rel(repo, cx)?;
    let scan = worktree::scan(repo, &index, &workdir, &rel, want, |p| submodule_head(&workdir, p, cx))?;
    for w in &scan.warnings {
        stderr.push_str(w);
        stderr.push('\n');
    }
    candidates.extend(scan.changes.iter().map(|(p, _)| p.to_vec()));
    let exec_bit = repo.filesystem_options().map_err(io)?.executable_bit;
    // The working-tree side of every candidate the index still has.
    let mut present: Vec<(&[u8], u32, &worktree::Entry)> = Vec::new();
    for p in &candidates {
        let Some(e) = index.entry_by_path(p.as_bstr()) else { continue };
        if e.mode.is_submodule() {
            continue;
        }
        if let Ok(Some(w)) = scan.listing.lookup(p)
            && matches!(w.kind, cheng_sdk::host::EntryKind::File | cheng_sdk::host::EntryKind::Symlink)
        {
            present.push((p.as_slice(), worktree::git_mode(w, e.mode.bits(), exec_bit), w));
        }
    }
    let paths: Vec<&gix::bstr::BStr> = present.iter().map(|(p, ..)| p.as_bstr()).collect();
    let contents = worktree::read_worktree(&scan.listing, &workdir, &paths);
    let mut work: BTreeMap<&[u8], (staged::Side, Vec<u8>)> = BTreeMap::new();
    let mut pipeline = None;
    let mut unreadable: BTreeSet<&[u8]> = BTreeSet::new();
    for ((p, mode, w), data) in present.iter().zip(contents) {
        let Some(data) = data else {
            let why = if std::str::from_utf8(p).is_err() {
                "its name is not UTF-8, which the sandbox cannot open"
            } else {
                "it could not be read"
            };
            stderr.push_str(&format!("warning: \"{}\" is left out of the patch: {why}\n", p.to_str_lossy()));
            unreadable.insert(p);
            continue;
        };
        let data = if w.kind == cheng_sdk::host::EntryKind::Symlink {
            data
        } else {
            worktree::clean(repo, &index, &mut pipeline, p.as_bstr(), data)?
        };
        let id = worktree::hash(repo, &data)?;
        work.insert(p, ((*mode, id), data));
    }
    let mut changes = Vec::new();
    for p in &candidates {
        if unreadable.contains(p.as_slice()) {
            continue;
        }
        let before = head.get(&index, p.as_bstr());
        // A submodule is not entered: its side is the commit its checkout is at.
        let (new, new_data) = match index.entry_by_path(p.as_bstr()) {
            Some(e) if e.mode.is_submodule() => {
                (Some((e.mode.bits(), submodule_head(&workdir, p.as_bstr(), cx).unwrap_or(e.id))), None)
            }
            _ => match work.remove(p.as_slice()) {
                Some((side, data)) => (Some(side), Some(data)),
                None => (None, None),
            },
        };
        if before == new {
            continue;
        }
        changes.push(PathChange { path: p.clone(), from: None, old: before, new, new_data });
    }
    let changes = exact_renames(repo, changes);
    emit(repo, &changes, false, stderr)
}
