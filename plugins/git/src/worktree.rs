//! The working tree against the index: the half of `git status` that looks at files,
//! and the candidate set of `git diff HEAD`.
//!
//! gix's own comparison stats every tracked file through WASI, one call each. Here one
//! host call (`stat-dirs`) lists every directory that holds tracked files with each
//! entry's `lstat`, and git's rules decide from those stats alone: a type or
//! executable-bit change is a change; a different size is a modification; an entry
//! whose stat still matches the index (compared with the repository's stat options —
//! modification and change times, inode, owner, size) is unchanged unless it is racily
//! clean. Only the entries left undecided are read, in one batched host read, passed
//! through the repository's clean filters (line-ending conversion; external filter
//! drivers cannot run in the sandbox, such files are compared as they are) and hashed.
//! The listings are kept for the untracked-file walk.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use cheng_sdk::host::EntryKind;
use cheng_sdk::{ErrorKind, Failure};
use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::stat::Time;
use gix::index::entry::{Flags, Mode, Stage, Stat};

/// How a tracked path differs in the working tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Gone (or its directory is no longer a directory).
    Deleted,
    /// Content or executable bit changed.
    Modified,
    /// A file became a symlink or the other way round.
    TypeChanged,
    /// Added with `git add --intent-to-add`.
    IntentToAdd,
    /// A merge conflict, with git's two-letter code (`UU`, `AA`, `DU`, …).
    Unmerged(&'static str),
}

/// One directory entry from the host's listing with its `lstat`.
pub struct Entry {
    /// The name's bytes (escapes from the host undone).
    pub name: Vec<u8>,
    /// Whether the name could be used to open it (UTF-8).
    pub valid_utf8: bool,
    /// What it is.
    pub kind: EntryKind,
    /// File type and permission bits (`st_mode`).
    pub mode: u32,
    /// Size in bytes.
    pub size: u64,
    /// The stat as the index records one (times, inode, owner, size cut to 32 bits).
    pub stat: Stat,
    /// The index has this path (at any stage).
    pub tracked: bool,
}

/// The listings of the working tree's tracked directories.
pub struct Listing {
    /// Repository-relative directory (no trailing slash; empty for the root) → its
    /// entries sorted by name, or `None` when it could not be listed (gone, replaced by
    /// a file or a symlink).
    dirs: HashMap<Vec<u8>, Option<Vec<Entry>>>,
    /// Every directory that holds tracked paths, at any depth.
    pub tracked_dirs: HashSet<Vec<u8>>,
    /// The working tree as a workspace-relative path for the host (`.` for the root).
    pub root_rel: String,
}

impl Listing {
    /// The workspace-relative host path of a repository-relative path, if it can be
    /// named (the host takes paths as UTF-8 strings).
    pub fn host_path(&self, rel: &[u8]) -> Option<String> {
        let rel = std::str::from_utf8(rel).ok()?;
        Some(match (self.root_rel.as_str(), rel.is_empty()) {
            (".", true) => ".".into(),
            (".", false) => rel.into(),
            (r, true) => r.into(),
            (r, false) => format!("{r}/{rel}"),
        })
    }

    /// The listing of a tracked directory: `Some(None)` when it could not be listed,
    /// `None` when it was not asked for.
    pub fn dir(&self, dir: &[u8]) -> Option<Option<&[Entry]>> {
        self.dirs.get(dir).map(|l| l.as_deref())
    }

    /// What the listing says of a repository-relative path: `Ok(Some)` found,
    /// `Ok(None)` gone, `Err(())` its directory could not be asked about.
    pub fn lookup(&self, path: &[u8]) -> Result<Option<&Entry>, ()> {
        let (dir, name) = split(path);
        Ok(self.dirs.get(dir).ok_or(())?.as_deref().and_then(|list| slot(list, name).map(|i| &list[i])))
    }

    /// [`Listing::lookup`], marking what it finds as tracked.
    fn find_tracked(&mut self, path: &[u8]) -> Result<Option<&Entry>, ()> {
        let (dir, name) = split(path);
        let Some(list) = self.dirs.get_mut(dir).ok_or(())? else { return Ok(None) };
        Ok(slot(list, name).map(|i| {
            list[i].tracked = true;
            &list[i]
        }))
    }
}

/// Where `name` is in a listing sorted by name.
fn slot(list: &[Entry], name: &[u8]) -> Option<usize> {
    list.binary_search_by(|e| e.name.as_slice().cmp(name)).ok()
}

/// Split a repository-relative path into its directory and name.
pub fn split(path: &[u8]) -> (&[u8], &[u8]) {
    match path.iter().rposition(|b| *b == b'/') {
        Some(i) => (&path[..i], &path[i + 1..]),
        None => (&[], path),
    }
}

/// The host listing escapes bytes that are not UTF-8 as `\xNN`; undo that.
pub fn unescape(name: &str) -> Vec<u8> {
    let b = name.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && b.get(i + 1) == Some(&b'x')
            && i + 3 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 2..i + 4]).ok().and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 4;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

/// List every tracked directory of `index` in one host call.
pub fn list(index: &gix::index::State, root_rel: &str) -> Listing {
    let mut tracked_dirs: HashSet<Vec<u8>> = HashSet::new();
    tracked_dirs.insert(Vec::new());
    let mut last_parent: &[u8] = &[];
    for e in index.entries() {
        let p: &[u8] = e.path(index);
        let (parent, _) = split(p);
        if parent == last_parent {
            continue;
        }
        last_parent = parent;
        let mut d = parent;
        while !d.is_empty() && tracked_dirs.insert(d.to_vec()) {
            d = split(d).0;
        }
    }
    let mut listing = Listing { dirs: HashMap::new(), tracked_dirs, root_rel: root_rel.to_string() };
    let mut names: Vec<Vec<u8>> = listing.tracked_dirs.iter().cloned().collect();
    names.sort();
    // Directories whose names are not UTF-8 cannot be named to the host: left out
    // (their entries are not judged).
    let (asked, paths): (Vec<Vec<u8>>, Vec<String>) =
        names.into_iter().filter_map(|d| listing.host_path(&d).map(|h| (d, h))).unzip();
    for (dir, result) in asked.into_iter().zip(cheng_sdk::host::stat_dirs(&paths)) {
        let entries = result.ok().map(|list| {
            list.into_iter()
                .map(|s| Entry {
                    name: if s.valid_utf8 { s.name.into_bytes() } else { unescape(&s.name) },
                    valid_utf8: s.valid_utf8,
                    kind: s.kind,
                    mode: s.mode,
                    size: s.size,
                    // Truncated to 32 bits, as the index stores them.
                    stat: Stat {
                        mtime: Time { secs: s.mtime.0 as u32, nsecs: s.mtime.1 },
                        ctime: Time { secs: s.ctime.0 as u32, nsecs: s.ctime.1 },
                        dev: s.device as u32,
                        ino: s.inode as u32,
                        uid: s.uid,
                        gid: s.gid,
                        size: s.size as u32,
                    },
                    tracked: false,
                })
                .collect::<Vec<_>>()
        });
        listing.dirs.insert(dir, entries);
    }
    listing
}

/// git's two-letter code for a conflict from the stages present (bit 1: base,
/// 2: ours, 3: theirs).
fn conflict_code(stages: u8) -> &'static str {
    match stages {
        0b0010 => "DD",
        0b0100 => "AU",
        0b1000 => "UA",
        0b0110 => "UD",
        0b1010 => "DU",
        0b1100 => "AA",
        _ => "UU",
    }
}

/// What the index records of a path.
pub struct Recorded<'a> {
    /// Its mode (file, executable, symlink, submodule).
    pub mode: Mode,
    /// Its stat when it was last staged or refreshed.
    pub stat: &'a Stat,
    /// Whether its blob is the empty one (a recorded size of 0 is then no smudge).
    pub empty_blob: bool,
}

/// The repository's rules for comparing stats.
pub struct Rules {
    /// `core.symlinks`: links are links (else a file where a link was is unchanged).
    pub symlinks: bool,
    /// `core.fileMode`: the executable bit counts.
    pub executable_bit: bool,
    /// `core.checkStat`, `core.trustCTime` and the rest of the stat options.
    pub stat: gix::index::entry::stat::Options,
    /// When the index was written (an entry changed within the same second is racy).
    pub timestamp: filetime::FileTime,
}

/// What the stats alone say of one unconflicted path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Unchanged.
    Same,
    /// Changed, and how.
    Changed(Change),
    /// Undecided: read the file, clean it and hash it.
    Read,
}

/// Judge one tracked path by git's rules from its working-tree entry `w` (its `lstat`):
/// type and executable bit first, then the stat against the recorded one — a different
/// size (recorded size not 0) is a modification, a matching stat is unchanged unless
/// racily clean or smudged, anything else is read. A submodule is judged by whether its
/// checkout moved (`submodule_moved`), never by its files.
pub fn judge(e: &Recorded<'_>, w: Option<&Entry>, rules: &Rules, submodule_moved: impl FnOnce() -> bool) -> Verdict {
    let Some(w) = w else { return Verdict::Changed(Change::Deleted) };
    let type_change = match e.mode {
        Mode::COMMIT => match w.kind {
            EntryKind::Dir => {
                return if submodule_moved() { Verdict::Changed(Change::Modified) } else { Verdict::Same };
            }
            _ => true,
        },
        Mode::SYMLINK => w.kind != EntryKind::Symlink && (rules.symlinks || w.kind != EntryKind::File),
        _ => match w.kind {
            EntryKind::File => false,
            // A directory where a file was: gone, as git reports it.
            EntryKind::Dir => return Verdict::Changed(Change::Deleted),
            _ => true,
        },
    };
    if type_change {
        return Verdict::Changed(Change::TypeChanged);
    }
    if rules.executable_bit && w.kind == EntryKind::File && e.mode != Mode::SYMLINK {
        let exec_index = e.mode == Mode::FILE_EXECUTABLE;
        if exec_index != (w.mode & 0o100 != 0) {
            return Verdict::Changed(Change::Modified);
        }
    }
    if e.stat.matches(&w.stat, rules.stat) {
        let smudged = e.stat.size == 0 && !e.empty_blob;
        if smudged || e.stat.is_racy(rules.timestamp, rules.stat) { Verdict::Read } else { Verdict::Same }
    } else if e.stat.size != w.stat.size && e.stat.size != 0 {
        Verdict::Changed(Change::Modified)
    } else {
        Verdict::Read
    }
}

/// What a scan found: changed tracked paths in index order, the listings, and notes
/// for stderr.
pub struct Scan {
    pub changes: Vec<(BString, Change)>,
    pub listing: Listing,
    pub warnings: Vec<String>,
}

/// Compare the working tree with `index`. `want` selects the paths to judge (the
/// pathspecs); every tracked directory is listed either way (the untracked walk uses
/// the listings). `submodule_head` gives the commit a submodule's checkout is at.
pub fn scan(
    repo: &gix::Repository,
    index: &gix::index::State,
    workdir: &Path,
    root_rel: &str,
    want: impl Fn(&BStr) -> bool,
    submodule_head: impl Fn(&BStr) -> Option<gix::ObjectId>,
) -> Result<Scan, Failure> {
    let mut listing = list(index, root_rel);
    let caps = repo.filesystem_options().map_err(crate::io)?;
    let rules = Rules {
        symlinks: caps.symlink,
        executable_bit: caps.executable_bit,
        stat: repo.stat_options().map_err(crate::io)?,
        timestamp: index.timestamp(),
    };
    let mut changes: Vec<(BString, Change)> = Vec::new();
    let mut warnings = Vec::new();
    // Entries to read and hash, by their position in `index`.
    let mut undecided: Vec<usize> = Vec::new();
    let entries = index.entries();
    let mut i = 0;
    while i < entries.len() {
        let e = &entries[i];
        let path: &BStr = e.path(index);
        let found = listing.find_tracked(path);
        if e.stage() != Stage::Unconflicted {
            let mut stages = 0u8;
            while i < entries.len() && entries[i].path(index) == path && entries[i].stage() != Stage::Unconflicted {
                stages |= 1 << entries[i].stage_raw();
                i += 1;
            }
            if want(path) {
                changes.push((path.to_owned(), Change::Unmerged(conflict_code(stages))));
            }
            continue;
        }
        i += 1;
        if e.flags.contains(Flags::SKIP_WORKTREE) || !want(path) {
            continue;
        }
        let found = match found {
            Ok(found) => found,
            Err(()) => {
                warnings.push(format!(
                    "warning: \"{}\" is under a directory whose name is not UTF-8; not compared",
                    path.to_str_lossy()
                ));
                continue;
            }
        };
        if e.flags.contains(Flags::INTENT_TO_ADD) {
            changes.push((path.to_owned(), if found.is_some() { Change::IntentToAdd } else { Change::Deleted }));
            continue;
        }
        let submodule_moved = || submodule_head(path).is_some_and(|head| head != e.id);
        let recorded = Recorded { mode: e.mode, stat: &e.stat, empty_blob: e.id.is_empty_blob() };
        match judge(&recorded, found, &rules, submodule_moved) {
            Verdict::Same => {}
            Verdict::Changed(c) => changes.push((path.to_owned(), c)),
            Verdict::Read => undecided.push(i - 1),
        }
    }
    if !undecided.is_empty() {
        let paths: Vec<&BStr> = undecided.iter().map(|&k| entries[k].path(index)).collect();
        let contents = read_worktree(&listing, workdir, &paths);
        let mut pipeline = None;
        for (k, content) in contents.into_iter().enumerate() {
            let e = &entries[undecided[k]];
            let path = paths[k];
            let same = match content {
                Some(data) => {
                    let link = listing.lookup(path).ok().flatten().is_some_and(|w| w.kind == EntryKind::Symlink);
                    let data = if link { data } else { clean(repo, index, &mut pipeline, path, data)? };
                    let id = hash(repo, &data)?;
                    id == e.id
                }
                None => false,
            };
            if !same {
                changes.push((path.to_owned(), Change::Modified));
            }
        }
        // Keep index order.
        changes.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Ok(Scan { changes, listing, warnings })
}

/// The blob id of `data`.
pub fn hash(repo: &gix::Repository, data: &[u8]) -> Result<gix::ObjectId, Failure> {
    gix::objs::compute_hash(repo.object_hash(), gix::object::Kind::Blob, data).map_err(crate::io)
}

/// Working-tree `data` at `path` as git would store it: after the clean filters the
/// repository's attributes and configuration ask for (line endings). An external filter
/// driver cannot run here; its files are taken as they are.
pub fn clean<'r>(
    repo: &'r gix::Repository,
    index: &gix::index::State,
    pipeline: &mut Option<gix::filter::Pipeline<'r>>,
    path: &BStr,
    data: Vec<u8>,
) -> Result<Vec<u8>, Failure> {
    if pipeline.is_none() {
        *pipeline = Some(repo.filter_pipeline(None).map_err(crate::io)?.0);
    }
    let (Some(p), Ok(rela)) = (pipeline.as_mut(), gix::path::from_bstr(path)) else { return Ok(data) };
    Ok(match p.convert_to_git(data.as_slice(), &rela, index) {
        Ok(gix::filter::plumbing::pipeline::convert::ToGitOutcome::Buffer(buf)) => buf.to_vec(),
        _ => data,
    })
}

/// Read working-tree files (and the targets of symlinks) for repository-relative
/// `paths`: `None` for what cannot be read. Files come through the host in batches; a
/// link's target through WASI (reading a link follows nothing).
pub fn read_worktree(listing: &Listing, workdir: &Path, paths: &[&BStr]) -> Vec<Option<Vec<u8>>> {
    const BATCH_BYTES: u64 = 64 << 20;
    let mut out: Vec<Option<Vec<u8>>> = vec![None; paths.len()];
    // A batch: positions in `out`, and the host paths to read.
    let mut batch: (Vec<usize>, Vec<String>) = (Vec::new(), Vec::new());
    let mut batch_bytes = 0u64;
    let flush = |(ks, names): &mut (Vec<usize>, Vec<String>), out: &mut Vec<Option<Vec<u8>>>| {
        if names.is_empty() {
            return;
        }
        for ((k, name), r) in ks.iter().zip(names.iter()).zip(cheng_sdk::host::read_files(names, u64::MAX)) {
            out[*k] = match r {
                Ok(d) => Some(d),
                // Over the batch's budget: alone.
                Err(f) if f.kind == ErrorKind::TooLarge => cheng_sdk::host::read_file(name, u64::MAX).ok(),
                Err(_) => None,
            };
        }
        ks.clear();
        names.clear();
    };
    for (k, path) in paths.iter().enumerate() {
        let found = listing.lookup(path).ok().flatten();
        if found.is_some_and(|e| e.kind == EntryKind::Symlink) {
            let Ok(rel) = gix::path::from_bstr(*path) else { continue };
            let guest: PathBuf = workdir.join(rel);
            out[k] = std::fs::read_link(&guest).ok().and_then(|t| t.to_str().map(|s| s.as_bytes().to_vec()));
            continue;
        }
        let Some(host) = listing.host_path(path) else { continue };
        let size = found.map_or(0, |e| e.size);
        if batch_bytes + size > BATCH_BYTES {
            flush(&mut batch, &mut out);
            batch_bytes = 0;
        }
        batch_bytes += size;
        batch.0.push(k);
        batch.1.push(host);
    }
    flush(&mut batch, &mut out);
    out
}

/// A worktree file's mode as git would record it: from the listing's `st_mode`
/// (symlink, executable or not; the index's bit when the repository ignores it).
pub fn git_mode(e: &Entry, index_mode: u32, executable_bit: bool) -> u32 {
    match e.kind {
        EntryKind::Symlink => 0o120000,
        _ if !executable_bit && index_mode == 0o100755 => 0o100755,
        _ if executable_bit && e.mode & 0o100 != 0 => 0o100755,
        _ => 0o100644,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(size: u32, mtime: u32) -> Stat {
        Stat {
            mtime: Time { secs: mtime, nsecs: 0 },
            ctime: Time { secs: mtime, nsecs: 0 },
            dev: 1,
            ino: 7,
            uid: 0,
            gid: 0,
            size,
        }
    }

    fn entry(kind: EntryKind, mode: u32, st: Stat) -> Entry {
        Entry { name: b"f".to_vec(), valid_utf8: true, kind, mode, size: st.size as u64, stat: st, tracked: true }
    }

    /// The repository's defaults, with the index written long after the entries' times.
    fn rules() -> Rules {
        Rules {
            symlinks: true,
            executable_bit: true,
            stat: Default::default(),
            timestamp: filetime::FileTime::from_unix_time(2_000_000_000, 0),
        }
    }

    fn judge_file(recorded: Stat, mode: Mode, w: &Entry) -> Verdict {
        judge(&Recorded { mode, stat: &recorded, empty_blob: false }, Some(w), &rules(), || false)
    }

    #[test]
    fn stats_decide_what_they_can() {
        let st = stat(10, 1_000);
        // The same stat: unchanged, nothing read.
        assert_eq!(judge_file(st, Mode::FILE, &entry(EntryKind::File, 0o100644, st)), Verdict::Same);
        // Another size: modified, nothing read.
        assert_eq!(
            judge_file(st, Mode::FILE, &entry(EntryKind::File, 0o100644, stat(11, 1_000))),
            Verdict::Changed(Change::Modified)
        );
        // The same size, another time: only the content can tell.
        assert_eq!(judge_file(st, Mode::FILE, &entry(EntryKind::File, 0o100644, stat(10, 1_001))), Verdict::Read);
        // Gone.
        let r = Recorded { mode: Mode::FILE, stat: &st, empty_blob: false };
        assert_eq!(judge(&r, None, &rules(), || false), Verdict::Changed(Change::Deleted));
    }

    #[test]
    fn types_and_modes_come_first() {
        let st = stat(10, 1_000);
        // The executable bit set in the working tree: modified, whatever the stat says.
        assert_eq!(
            judge_file(st, Mode::FILE, &entry(EntryKind::File, 0o100755, st)),
            Verdict::Changed(Change::Modified)
        );
        // ...unless core.fileMode is off.
        let off = Rules { executable_bit: false, ..rules() };
        let r = Recorded { mode: Mode::FILE, stat: &st, empty_blob: false };
        assert_eq!(judge(&r, Some(&entry(EntryKind::File, 0o100755, st)), &off, || false), Verdict::Same);
        // A file turned symlink, and a symlink turned file: type changes.
        assert_eq!(
            judge_file(st, Mode::FILE, &entry(EntryKind::Symlink, 0o120777, st)),
            Verdict::Changed(Change::TypeChanged)
        );
        assert_eq!(
            judge_file(st, Mode::SYMLINK, &entry(EntryKind::File, 0o100644, st)),
            Verdict::Changed(Change::TypeChanged)
        );
        // Without core.symlinks a link checked out as a file is no type change.
        let nolinks = Rules { symlinks: false, ..rules() };
        let r = Recorded { mode: Mode::SYMLINK, stat: &st, empty_blob: false };
        assert_eq!(judge(&r, Some(&entry(EntryKind::File, 0o100644, st)), &nolinks, || false), Verdict::Same);
        // A directory where a file was: the file is gone.
        assert_eq!(judge_file(st, Mode::FILE, &entry(EntryKind::Dir, 0o040755, st)), Verdict::Changed(Change::Deleted));
    }

    #[test]
    fn racy_and_smudged_entries_are_read() {
        // Changed in the second the index was written: racily clean, so read.
        let st = stat(10, 1_000);
        let racy = Rules { timestamp: filetime::FileTime::from_unix_time(1_000, 0), ..rules() };
        let r = Recorded { mode: Mode::FILE, stat: &st, empty_blob: false };
        assert_eq!(judge(&r, Some(&entry(EntryKind::File, 0o100644, st)), &racy, || false), Verdict::Read);
        // A recorded size of 0 for a blob that is not empty (smudged by git): read.
        let zero = stat(0, 1_000);
        assert_eq!(judge_file(zero, Mode::FILE, &entry(EntryKind::File, 0o100644, zero)), Verdict::Read);
        // A truly empty file with the same stat: unchanged.
        let r = Recorded { mode: Mode::FILE, stat: &zero, empty_blob: true };
        assert_eq!(judge(&r, Some(&entry(EntryKind::File, 0o100644, zero)), &rules(), || false), Verdict::Same);
    }

    #[test]
    fn a_submodule_is_its_checkouts_head() {
        let st = stat(0, 1_000);
        let r = Recorded { mode: Mode::COMMIT, stat: &st, empty_blob: false };
        let dir = entry(EntryKind::Dir, 0o040755, st);
        // Moved on: modified; where the index says: unchanged; its files are not read.
        assert_eq!(judge(&r, Some(&dir), &rules(), || true), Verdict::Changed(Change::Modified));
        assert_eq!(judge(&r, Some(&dir), &rules(), || false), Verdict::Same);
    }

    #[test]
    fn escaped_names_and_paths_split_back() {
        // The host's `\xNN` escapes are undone; other backslashes stay.
        assert_eq!(unescape("a\\xFFb\\x4"), b"a\xffb\\x4".to_vec());
        assert_eq!(split(b"a/b/c.txt"), (&b"a/b"[..], &b"c.txt"[..]));
        assert_eq!(split(b"top"), (&b""[..], &b"top"[..]));
    }
}
