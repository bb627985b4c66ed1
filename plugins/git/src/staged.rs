//! HEAD against the index, the other half of `git status`, guided by the index's
//! cached tree as git's own comparison is.
//!
//! The index's `TREE` extension records, for every directory whose entries have not
//! been staged since the last checkout or commit, the tree object those entries make.
//! Where that id equals HEAD's subtree, nothing below differs and nothing there is
//! read. Only the other directories are compared, entry by entry. Renames with the
//! same content are paired here; when additions and deletions remain that could be
//! renames with edits, the caller falls back to gix's full comparison, which scores
//! similarity.

use std::collections::BTreeMap;

use gix::bstr::{BStr, ByteSlice};
use gix::index::entry::{Flags, Stage};

/// One side of a path: (mode bits, id).
pub type Side = (u32, gix::ObjectId);

/// HEAD's entries where the cached tree cannot vouch for the index, and which index
/// entries it vouches for.
pub struct HeadSide {
    /// HEAD's files under the directories compared, by path.
    files: BTreeMap<Vec<u8>, Side>,
    /// Per index entry: true when its directory's cached tree equals HEAD's.
    vouched: Vec<bool>,
}

impl HeadSide {
    /// Read HEAD's tree `tree` where `index`'s cached tree does not match it.
    pub fn read(
        repo: &gix::Repository,
        index: &gix::index::State,
        tree: gix::ObjectId,
    ) -> Result<HeadSide, gix::Error> {
        let mut side = HeadSide { files: BTreeMap::new(), vouched: vec![false; index.entries().len()] };
        let mut same_dirs: Vec<Vec<u8>> = Vec::new();
        walk(repo, tree, &mut Vec::new(), index.tree(), &mut side.files, &mut same_dirs)?;
        for dir in same_dirs {
            let prefix = if dir.is_empty() { dir } else { [dir.as_slice(), b"/"].concat() };
            if let Some(range) = index.prefixed_entries_range(prefix.as_bstr()) {
                for v in &mut side.vouched[range] {
                    *v = true;
                }
            }
        }
        Ok(side)
    }

    /// HEAD's side of `path`, given the index.
    pub fn get(&self, index: &gix::index::State, path: &BStr) -> Option<Side> {
        if let Some(s) = self.files.get(path.as_bytes()) {
            return Some(*s);
        }
        let i = index.entry_index_by_path(path).ok()?;
        self.vouched[i].then(|| (index.entries()[i].mode.bits(), index.entries()[i].id))
    }
}

/// Collect HEAD's files under `prefix` (tree `id`), skipping every directory whose
/// cached tree node (`cache`, when valid) records the same tree.
fn walk(
    repo: &gix::Repository,
    id: gix::ObjectId,
    prefix: &mut Vec<u8>,
    cache: Option<&gix::index::extension::Tree>,
    files: &mut BTreeMap<Vec<u8>, Side>,
    same: &mut Vec<Vec<u8>>,
) -> Result<(), gix::Error> {
    if cache.is_some_and(|c| c.num_entries.is_some() && c.id == id) {
        same.push(prefix.clone());
        return Ok(());
    }
    let tree = repo.find_tree(id)?;
    let decoded = tree.decode()?;
    for e in &decoded.entries {
        let len = prefix.len();
        if len > 0 {
            prefix.push(b'/');
        }
        prefix.extend_from_slice(e.filename);
        if e.mode.is_tree() {
            let child = cache.and_then(|c| c.children.iter().find(|t| t.name.as_slice() == e.filename.as_bytes()));
            walk(repo, e.oid.to_owned(), prefix, child, files, same)?;
        } else {
            files.insert(prefix.clone(), (u32::from(e.mode.value()), e.oid.to_owned()));
        }
        prefix.truncate(len);
    }
    Ok(())
}

/// A staged change: path, git's letter, and the old path of a rename.
pub type Staged = (Vec<u8>, &'static str, Option<Vec<u8>>);

/// HEAD against the index, or `None` when rename detection by similarity could
/// matter (the caller then asks gix). `renames` says whether renames are detected at
/// all (`status.renames`, `diff.renames`).
pub fn changes(index: &gix::index::State, head: &HeadSide, renames: bool) -> Option<Vec<Staged>> {
    let mut index_side: BTreeMap<&[u8], Side> = BTreeMap::new();
    // Conflicted paths are reported from their stages by the caller, and are never the
    // source of a rename.
    let mut conflicted: std::collections::HashSet<&[u8]> = std::collections::HashSet::new();
    for (i, e) in index.entries().iter().enumerate() {
        if e.stage() != Stage::Unconflicted {
            conflicted.insert(e.path(index).as_bytes());
        }
        if head.vouched[i] || e.stage() != Stage::Unconflicted || e.flags.contains(Flags::INTENT_TO_ADD) {
            continue;
        }
        index_side.insert(e.path(index).as_bytes(), (e.mode.bits(), e.id));
    }
    let kind = |m: u32| m & 0o170000;
    let mut out: Vec<Staged> = Vec::new();
    let mut added: Vec<usize> = Vec::new();
    let mut deleted: Vec<(Vec<u8>, gix::ObjectId)> = Vec::new();
    let paths: std::collections::BTreeSet<&[u8]> =
        head.files.keys().map(Vec::as_slice).chain(index_side.keys().copied()).collect();
    for p in paths {
        if conflicted.contains(p) {
            continue;
        }
        match (head.files.get(p), index_side.get(p)) {
            (Some(a), Some(b)) if a == b => {}
            (Some((am, _)), Some((bm, _))) => {
                out.push((p.to_vec(), if kind(*am) != kind(*bm) { "T" } else { "M" }, None))
            }
            (None, Some(_)) => {
                added.push(out.len());
                out.push((p.to_vec(), "A", None));
            }
            (Some((_, id)), None) => deleted.push((p.to_vec(), *id)),
            (None, None) => {}
        }
    }
    if renames && !added.is_empty() && !deleted.is_empty() {
        let adds: Vec<(&[u8], gix::ObjectId)> =
            added.iter().map(|&k| (out[k].0.as_slice(), index_side[out[k].0.as_slice()].1)).collect();
        let sources = pair_exact(&adds, &mut deleted);
        let unpaired = sources.iter().filter(|s| s.is_none()).count();
        for (&k, source) in added.iter().zip(sources) {
            if let Some(from) = source {
                out[k].1 = "R";
                out[k].2 = Some(from);
            }
        }
        if unpaired > 0 && !deleted.is_empty() {
            return None;
        }
    }
    out.extend(deleted.into_iter().map(|(p, _)| (p, "D", None)));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Some(out)
}

/// git's exact rename pass: for each addition (path, content id), the deletion with
/// the same content it pairs with — a source with the same file name preferred — taken
/// out of `deleted`.
pub fn pair_exact(
    added: &[(&[u8], gix::ObjectId)],
    deleted: &mut Vec<(Vec<u8>, gix::ObjectId)>,
) -> Vec<Option<Vec<u8>>> {
    use crate::worktree::split;
    added
        .iter()
        .map(|(path, id)| {
            let pick = deleted
                .iter()
                .position(|(p, d)| d == id && split(p).1 == split(path).1)
                .or_else(|| deleted.iter().position(|(_, d)| d == id));
            pick.map(|j| deleted.remove(j).0)
        })
        .collect()
}
