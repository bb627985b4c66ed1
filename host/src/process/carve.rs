//! Carve-outs: the workspace paths the path rules protect, made read-only (a write
//! rule that is not `allow`) or unreadable (a read rule that is not `allow`) inside a
//! command's own mount namespace, whatever let it run — an operator rule, a learned
//! rule, the known-safe list or a person's confined answer. Full access lifts them for
//! that one command; the host's own git (`workspace_git_write`) keeps its own model.
//!
//! Which paths: every entry of the workspace, at any depth, checked against the rules
//! (a directory by what the rules say of a file inside it), and in every `.git`
//! directory what git runs or reads later: `hooks/`, `config`, `config.worktree` and
//! `info/` (objects, refs, the index and `HEAD` stay writable, so `git add` and `git
//! commit` still work). A read-only one is bound over itself read-only; an unreadable
//! file has an empty, unreadable file bound over it read-only (reading it fails with
//! "Permission denied", writing it with "Read-only file system"), an unreadable
//! directory an empty read-only `tmpfs`. Symbolic links are not followed into; `.git`
//! is not walked; an unreadable directory is not walked beneath.
//!
//! The walk is made once per workspace and kept ([`Trees`]): each directory it read is
//! watched (inotify), and before each command only the directories something changed
//! since are read again — so a command in an unchanged workspace costs no directory
//! listing at all. The same pass after a command finds the protected paths it created
//! (they did not exist for a carve-out to keep), which its result reports. A workspace
//! with more than [`MAX_DIRS`] directories is walked breadth-first to that many, and
//! the result says so; where the kernel gives no watch (the per-user limit), the whole
//! walk is made again for every command.

use std::collections::{BTreeMap, HashMap};
use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rustix::fs::inotify;

use crate::policy::files::{Access, FileRules};
use crate::policy::process::RuleDecision;

/// What is done to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    /// Bound over itself, read-only.
    ReadOnly = 0,
    /// A file with an empty unreadable file bound over it, read-only.
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

/// Carve-outs for one command, at most this many; the rest are said in its result.
pub(crate) const MAX: usize = 256;

/// Directories walked per workspace, at most (breadth-first, so the shallow ones
/// always are).
pub(crate) const MAX_DIRS: usize = 10_000;

/// A name inside a directory, for asking what the rules say of its contents.
const INSIDE: &str = "cheng-carve-probe";

/// What each watch reports: entries made, removed or moved, and the directory itself
/// removed or moved.
const WATCH: inotify::WatchFlags = inotify::WatchFlags::CREATE
    .union(inotify::WatchFlags::DELETE)
    .union(inotify::WatchFlags::MOVED_FROM)
    .union(inotify::WatchFlags::MOVED_TO)
    .union(inotify::WatchFlags::DELETE_SELF)
    .union(inotify::WatchFlags::MOVE_SELF)
    .union(inotify::WatchFlags::ONLYDIR)
    .union(inotify::WatchFlags::DONT_FOLLOW)
    .union(inotify::WatchFlags::EXCL_UNLINK);

/// `path` is `parent` or lies beneath it (workspace-relative; "" is the root).
fn under(path: &str, parent: &str) -> bool {
    parent.is_empty() || path == parent || path.strip_prefix(parent).is_some_and(|r| r.starts_with('/'))
}

/// A directory's device and inode.
fn identity(path: &Path) -> Option<(u64, u64)> {
    path.symlink_metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// What git runs or reads later, inside a `.git` directory.
const GIT_LATER: &[&str] = &["hooks", "config", "config.worktree", "info"];

fn guarded(rules: &FileRules, rel: &str, dir: bool, access: Access) -> bool {
    let probe = if dir { format!("{rel}/{INSIDE}") } else { rel.to_string() };
    rules.check(&probe, access).decision != RuleDecision::Allow
        || (dir && rules.check(rel, access).decision != RuleDecision::Allow)
}

/// `rel` lies in a `.git` directory (a carve-out of what git runs later, not a rule's).
fn in_git(rel: &str) -> bool {
    rel.split('/').any(cheng_contract::paths::is_git_dir_name)
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

/// The carve-outs one command gets.
pub(crate) struct Plan {
    /// What is done, parents first.
    pub carves: Vec<Carve>,
    /// Protected paths that were not carved out: beyond [`MAX`], or beneath the
    /// [`MAX_DIRS`] directories walked (`true`).
    pub incomplete: bool,
}

/// One directory the walk read.
struct Dir {
    /// The carve-outs among its entries.
    carves: Vec<Carve>,
    /// The subdirectories walked beneath it.
    subdirs: Vec<String>,
    /// Its watch.
    wd: Option<i32>,
    /// The watches on the `.git` directories among its entries.
    git_wds: Vec<i32>,
}

/// The namespace prepared with a plan's carve-outs, and that plan's carve-outs.
struct Kept {
    ns: Arc<super::spawn::Namespace>,
    carves: Vec<Carve>,
}

/// One workspace's walk, kept up to date by watching every directory it read.
pub(crate) struct Tree {
    rules: Arc<FileRules>,
    root: PathBuf,
    /// The watches; `None` where the kernel gave none (each plan walks again).
    watch: Option<OwnedFd>,
    /// Watch descriptor → the directory it watches.
    wds: HashMap<i32, String>,
    /// Watch descriptor of a `.git` directory → (the directory holding it, its own path).
    git_wds: HashMap<i32, (String, String)>,
    /// The root's device and inode when walked: another directory put in its place is
    /// walked again.
    root_id: Option<(u64, u64)>,
    /// The namespace commands enter, while nothing happened to a path it carves out.
    kept: Option<Kept>,
    /// Workspace-relative directory ("" for the root) → what was read of it.
    dirs: BTreeMap<String, Dir>,
    /// More directories than [`MAX_DIRS`].
    overflow: bool,
}

impl Tree {
    /// Walk the workspace at `root` under `rules`.
    pub(crate) fn new(rules: Arc<FileRules>, root: &Path) -> Tree {
        let watch = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok();
        let mut t = Tree {
            rules,
            root: root.to_path_buf(),
            watch,
            wds: HashMap::new(),
            git_wds: HashMap::new(),
            root_id: identity(root),
            kept: None,
            dirs: BTreeMap::new(),
            overflow: false,
        };
        t.walk(vec![String::new()]);
        t
    }

    /// Bring the walk up to date: read again the directories something changed in
    /// since the last look. Returns the protected paths that appeared meanwhile (made
    /// by the command that just ran), a directory's contents not listed beneath it.
    pub(crate) fn refresh(&mut self) -> Vec<String> {
        let mut changed = self.changed();
        // Another directory where the root was (the old one moved away): all again.
        let root_id = identity(&self.root);
        if root_id != self.root_id {
            self.root_id = root_id;
            self.kept = None;
            changed = None;
        }
        // Nothing changed (the usual case, before and after most commands): no work.
        if changed.as_ref().is_some_and(Vec::is_empty) {
            return Vec::new();
        }
        let before = self.read_only();
        match changed {
            Some(dirty) => {
                for rel in dirty {
                    self.reread(rel);
                }
            }
            None => {
                self.kept = None;
                for (_, d) in std::mem::take(&mut self.dirs) {
                    self.unwatch(d.wd);
                    self.unwatch_git(&d.git_wds);
                }
                self.overflow = false;
                self.walk(vec![String::new()]);
            }
        }
        let after = self.read_only();
        let mut made: Vec<String> = after.into_iter().filter(|p| !before.contains(p)).collect();
        made.sort();
        let mut out: Vec<String> = Vec::new();
        for p in made {
            if !out.iter().any(|o| under(&p, o)) {
                out.push(p);
            }
        }
        out
    }

    /// The read-only carve-outs of the rules' own (not those inside `.git`).
    fn read_only(&self) -> std::collections::HashSet<String> {
        self.dirs
            .values()
            .flat_map(|d| d.carves.iter())
            .filter(|c| c.kind == Kind::ReadOnly && !in_git(&c.rel))
            .map(|c| c.rel.clone())
            .collect()
    }

    /// The directories changed since the last look, parents first; `None` when the
    /// whole workspace is to be walked again (no watches, or the kernel's queue of
    /// changes overflowed).
    fn changed(&mut self) -> Option<Vec<String>> {
        let fd = self.watch.as_ref()?;
        let mut dirty: Vec<String> = Vec::new();
        // The paths events name, only while a namespace is kept that they could stale.
        let track = self.kept.is_some();
        let mut touched: Vec<String> = Vec::new();
        let mut buf = [MaybeUninit::<u8>::uninit(); 8192];
        let mut reader = inotify::Reader::new(fd, &mut buf);
        loop {
            match reader.next() {
                Ok(ev) if ev.events().contains(inotify::ReadFlags::QUEUE_OVERFLOW) => return None,
                Ok(ev) => {
                    let name = ev.file_name().and_then(|n| n.to_str().ok()).filter(|n| !n.is_empty());
                    let ignored = ev.events().contains(inotify::ReadFlags::IGNORED);
                    let rel = if let Some(rel) = self.wds.get(&ev.wd()) {
                        rel.clone()
                    } else if let Some((parent, git)) = self.git_wds.get(&ev.wd()) {
                        // Inside a `.git`: only what git runs later matters to the walk.
                        if track {
                            touched.push(name.map_or_else(|| git.clone(), |n| join(git, n)));
                        }
                        if name.is_none_or(|n| GIT_LATER.contains(&n)) && !dirty.contains(parent) {
                            dirty.push(parent.clone());
                        }
                        if ignored {
                            self.git_wds.remove(&ev.wd());
                        }
                        continue;
                    } else {
                        continue;
                    };
                    if track {
                        touched.push(name.map_or_else(|| rel.clone(), |n| join(&rel, n)));
                    }
                    if !dirty.contains(&rel) {
                        dirty.push(rel);
                    }
                    if ignored {
                        self.wds.remove(&ev.wd());
                    }
                }
                Err(rustix::io::Errno::INTR) => continue,
                Err(_) => break,
            }
        }
        // A carve-out is a mount on one directory entry: whatever happened to it or to
        // one of its parents (renamed over, removed, moved away) may have detached it
        // from the kept namespace.
        if let Some(k) = &self.kept
            && touched.iter().any(|t| k.carves.iter().any(|c| under(&c.rel, t)))
        {
            self.kept = None;
        }
        dirty.sort_by_key(|d| if d.is_empty() { 0 } else { d.matches('/').count() + 1 });
        Some(dirty)
    }

    /// The namespace with `plan`'s carve-outs for commands to enter: the kept one while
    /// nothing happened to its carved paths and the plan is the same, else made now.
    /// `None` where none can be kept (no watches to tell when it goes stale) or made.
    pub(crate) fn namespace(&mut self, plan: &Plan) -> Option<Arc<super::spawn::Namespace>> {
        self.watch.as_ref()?;
        if plan.carves.is_empty() {
            return None;
        }
        if let Some(k) = &self.kept
            && k.carves == plan.carves
        {
            return Some(k.ns.clone());
        }
        self.kept = None;
        let root = std::fs::File::open(&self.root).ok()?;
        let made = super::spawn::Namespace::prepare(root.as_raw_fd(), &c_paths(&plan.carves, "."));
        match made {
            Ok(ns) => {
                let ns = Arc::new(ns);
                self.kept = Some(Kept { ns: ns.clone(), carves: plan.carves.clone() });
                Some(ns)
            }
            Err(e) => {
                tracing::debug!(target: "cheng::process", "no namespace kept for {}: {e}", self.root.display());
                None
            }
        }
    }

    /// Read `rel` again: subdirectories kept stay as walked, vanished ones are
    /// forgotten, new ones are walked.
    fn reread(&mut self, rel: String) {
        let Some(old) = self.dirs.remove(&rel) else { return };
        self.unwatch(old.wd);
        self.unwatch_git(&old.git_wds);
        let Some(new) = self.read(&rel) else {
            for sub in old.subdirs {
                self.forget(&sub);
            }
            return;
        };
        for sub in old.subdirs.iter().filter(|s| !new.subdirs.contains(s)) {
            self.forget(sub);
        }
        let added: Vec<String> = new.subdirs.iter().filter(|s| !old.subdirs.contains(s)).cloned().collect();
        self.dirs.insert(rel, new);
        self.walk(added);
    }

    /// Forget `rel` and what was walked beneath it.
    fn forget(&mut self, rel: &str) {
        if let Some(d) = self.dirs.remove(rel) {
            self.unwatch(d.wd);
            self.unwatch_git(&d.git_wds);
            for sub in &d.subdirs {
                self.forget(sub);
            }
        }
    }

    fn unwatch_git(&mut self, wds: &[i32]) {
        for wd in wds {
            if let Some(fd) = &self.watch
                && self.git_wds.remove(wd).is_some()
            {
                let _ = inotify::remove_watch(fd, *wd);
            }
        }
    }

    fn unwatch(&mut self, wd: Option<i32>) {
        if let (Some(fd), Some(wd)) = (&self.watch, wd)
            && self.wds.remove(&wd).is_some()
        {
            let _ = inotify::remove_watch(fd, wd);
        }
    }

    /// The carve-outs, parents first.
    pub(crate) fn plan(&self) -> Plan {
        let mut carves: Vec<Carve> = self.dirs.values().flat_map(|d| d.carves.iter().cloned()).collect();
        carves.sort_by_key(|c| c.rel.matches('/').count());
        let incomplete = self.overflow || carves.len() > MAX;
        carves.truncate(MAX);
        Plan { carves, incomplete }
    }

    /// Walk `start` and what lies beneath, breadth-first.
    fn walk(&mut self, start: Vec<String>) {
        let mut queue = std::collections::VecDeque::from(start);
        while let Some(rel) = queue.pop_front() {
            if self.dirs.len() >= MAX_DIRS {
                self.overflow = true;
                return;
            }
            if let Some(dir) = self.read(&rel) {
                queue.extend(dir.subdirs.iter().cloned());
                self.dirs.insert(rel, dir);
            }
        }
    }

    /// Watch and read one directory.
    fn read(&mut self, rel: &str) -> Option<Dir> {
        let path = if rel.is_empty() { self.root.clone() } else { self.root.join(rel) };
        // Watched before it is read, so nothing made meanwhile goes unseen.
        let mut wd = None;
        if let Some(fd) = &self.watch {
            match inotify::add_watch(fd, &path, WATCH) {
                Ok(w) => {
                    self.wds.insert(w, rel.to_string());
                    wd = Some(w);
                }
                Err(rustix::io::Errno::NOSPC) => {
                    tracing::info!(target: "cheng::process",
                        "no more inotify watches for the path rules' walk of {}: it is made again for every command",
                        self.root.display());
                    self.watch = None;
                    self.wds.clear();
                }
                Err(_) => {}
            }
        }
        let entries = std::fs::read_dir(&path).ok()?;
        let mut dir = Dir { carves: Vec::new(), subdirs: Vec::new(), wd, git_wds: Vec::new() };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let Ok(ft) = e.file_type() else { continue };
            let child = join(rel, name);
            if cheng_contract::paths::is_git_dir_name(name) && ft.is_dir() {
                // Watched too (not walked): what git runs later being replaced there.
                if let Some(fd) = &self.watch
                    && let Ok(w) = inotify::add_watch(fd, path.join(name), WATCH)
                {
                    self.git_wds.insert(w, (rel.to_string(), child.clone()));
                    dir.git_wds.push(w);
                }
                for inner in GIT_LATER {
                    let g = format!("{child}/{inner}");
                    let p = self.root.join(&g);
                    if p.symlink_metadata().is_ok() {
                        dir.carves.push(Carve { rel: g, kind: Kind::ReadOnly, locked: locked_flags(&p) });
                    }
                }
                continue;
            }
            // A link is carved by what it points at, and never walked into.
            let is_dir = if ft.is_symlink() {
                match std::fs::metadata(path.join(name)) {
                    Ok(m) => m.is_dir(),
                    Err(_) => continue,
                }
            } else {
                ft.is_dir()
            };
            if guarded(&self.rules, &child, is_dir, Access::Write) {
                let locked = locked_flags(&path.join(name));
                dir.carves.push(Carve { rel: child.clone(), kind: Kind::ReadOnly, locked });
            }
            if guarded(&self.rules, &child, is_dir, Access::Read) {
                let (kind, locked) = if is_dir { (Kind::HideDir, 0) } else { (Kind::HideFile, hidden().1) };
                dir.carves.push(Carve { rel: child, kind, locked });
                continue;
            }
            if ft.is_dir() {
                dir.subdirs.push(child);
            }
        }
        Some(dir)
    }
}

/// The empty, unreadable file bound over unreadable files, and the mount flags it is
/// locked with: one in the temporary directory, or `/dev/null` where none can be made
/// (reading then finds nothing rather than failing).
pub(crate) fn hidden() -> &'static (CString, u64) {
    static HIDDEN: OnceLock<(CString, u64)> = OnceLock::new();
    HIDDEN.get_or_init(|| {
        let made = || -> Option<PathBuf> {
            // SAFETY: getuid cannot fail.
            let uid = unsafe { libc::getuid() };
            let dir = std::env::temp_dir().join(format!("cheng-{uid}-protected"));
            let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
            let md = dir.symlink_metadata().ok()?;
            if !md.is_dir() || md.uid() != uid || md.permissions().mode() & 0o077 != 0 {
                return None;
            }
            let file = dir.join("protected");
            let _ = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o000).open(&file);
            let md = file.symlink_metadata().ok()?;
            (md.is_file() && md.uid() == uid && md.len() == 0 && md.permissions().mode() & 0o777 == 0).then_some(file)
        };
        let file = made().unwrap_or_else(|| PathBuf::from("/dev/null"));
        let locked = locked_flags(&file);
        (CString::new(file.as_os_str().as_bytes()).unwrap_or_else(|_| c"/dev/null".to_owned()), locked)
    })
}

/// The kept walks, one per workspace (and rules).
#[derive(Default)]
pub(crate) struct Trees {
    trees: Mutex<HashMap<PathBuf, Arc<Mutex<Tree>>>>,
}

impl std::fmt::Debug for Trees {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trees").finish_non_exhaustive()
    }
}

/// Workspaces whose walks are kept, at most (the rest are walked again).
const KEPT: usize = 64;

impl Trees {
    /// The kept walk of `root` under `rules`, made (off the async threads) when there is
    /// none yet or the rules changed; brought up to date before it is returned.
    pub(crate) async fn get(&self, rules: &Arc<FileRules>, root: &Path) -> Arc<Mutex<Tree>> {
        let kept = self.trees.lock().unwrap_or_else(|e| e.into_inner()).get(root).cloned();
        if let Some(t) = kept {
            let same = Arc::ptr_eq(&t.lock().unwrap_or_else(|e| e.into_inner()).rules, rules);
            if same {
                return t;
            }
        }
        let (r, p) = (rules.clone(), root.to_path_buf());
        let tree = match tokio::task::spawn_blocking(move || Tree::new(r, &p)).await {
            Ok(t) => t,
            Err(_) => Tree::new(rules.clone(), root),
        };
        let tree = Arc::new(Mutex::new(tree));
        let mut trees = self.trees.lock().unwrap_or_else(|e| e.into_inner());
        if trees.len() >= KEPT {
            trees.clear();
        }
        trees.insert(root.to_path_buf(), tree.clone());
        tree
    }
}

/// The carve-outs for a workspace at `root` under `rules`, walked now (an MCP server's,
/// once at its start).
#[cfg(feature = "mcp-sources")]
pub(crate) fn plan(rules: &Arc<FileRules>, root: &Path) -> Plan {
    Tree::new(rules.clone(), root).plan()
}

/// A carve-out a command ran into, as its error output shows: a write refused
/// ("Read-only file system") or a read refused ("Permission denied", or "No such file
/// or directory" beneath a hidden directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hit {
    /// The carved path, workspace-relative.
    pub rel: String,
    /// A write (else a read).
    pub write: bool,
    /// Which rule carved it, and how to change it.
    pub message: String,
}

/// Hits recorded per command, at most.
const MAX_HITS: usize = 16;

/// The carve-outs `stderr` shows a command ran into (each path and access once).
pub(crate) fn hits(rules: &FileRules, carves: &[Carve], stderr: &str) -> Vec<Hit> {
    let mut out: Vec<Hit> = Vec::new();
    for line in stderr.lines() {
        let write = line.contains("Read-only file system");
        let read = line.contains("Permission denied");
        let missing = line.contains("No such file or directory");
        if !(write || read || missing) {
            continue;
        }
        for c in carves {
            let relevant = match c.kind {
                Kind::ReadOnly => write,
                Kind::HideFile => write || read,
                Kind::HideDir => write || read || missing,
            };
            if !relevant || !mentions(line, &c.rel) {
                continue;
            }
            if out.iter().any(|h| h.rel == c.rel && h.write == write) || out.len() >= MAX_HITS {
                continue;
            }
            let access = if write { Access::Write } else { Access::Read };
            let rule = if in_git(&c.rel) {
                "what git runs or reads later (hooks, config, info) is read-only to commands".to_string()
            } else {
                let direct = rules.check(&c.rel, access);
                let inside = format!("{}/{INSIDE}", c.rel);
                let v = if direct.decision == RuleDecision::Allow { rules.check(&inside, access) } else { direct };
                v.message(&c.rel, access)
            };
            out.push(Hit {
                rel: c.rel.clone(),
                write,
                message: format!(
                    "a command's {} of \"{}\" was stopped by the path rules' carve-out: {rule}",
                    if write { "write" } else { "read" },
                    cheng_contract::text::escape_line(&c.rel)
                ),
            });
        }
    }
    out
}

/// `line` names `rel` as a path (not a longer name that begins with it).
fn mentions(line: &str, rel: &str) -> bool {
    line.match_indices(rel).any(|(i, _)| {
        let before = line[..i].chars().next_back();
        let after = line[i + rel.len()..].chars().next();
        before.is_none_or(|c| matches!(c, '/' | ' ' | '\'' | '"' | '`' | ':' | '(' | '‘' | '“'))
            && after.is_none_or(|c| !(c.is_alphanumeric() || matches!(c, '.' | '_' | '-')))
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(t: &Tree) -> Vec<(String, Kind)> {
        t.plan().carves.into_iter().map(|c| (c.rel, c.kind)).collect()
    }

    #[test]
    fn every_depth_is_carved_git_keeps_its_objects_and_changes_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        for d in [
            ".git/hooks",
            ".git/objects",
            ".git/refs",
            ".vscode",
            ".github/workflows",
            ".aws",
            "src",
            "app/config",
            "packages/web/.vscode",
            "vendor/lib/.git/hooks",
        ] {
            std::fs::create_dir_all(r.join(d)).unwrap();
        }
        for f in [
            ".git/config",
            ".git/HEAD",
            ".env",
            ".env.example",
            ".aws/credentials",
            "src/main.rs",
            ".envrc",
            "app/.env",
            "app/config/server.pem",
            "packages/web/.vscode/tasks.json",
        ] {
            std::fs::write(r.join(f), "x").unwrap();
        }
        std::os::unix::fs::symlink(r.join("app"), r.join("link")).unwrap();
        let rules = Arc::new(FileRules::defaults());
        let mut t = Tree::new(rules.clone(), r);
        let got = kinds(&t);
        for want in [
            (".git/hooks", Kind::ReadOnly),
            (".git/config", Kind::ReadOnly),
            (".vscode", Kind::ReadOnly),
            (".github/workflows", Kind::ReadOnly),
            (".envrc", Kind::ReadOnly),
            (".env", Kind::HideFile),
            (".aws/credentials", Kind::HideFile),
            ("app/.env", Kind::HideFile),
            ("app/config/server.pem", Kind::HideFile),
            ("packages/web/.vscode", Kind::ReadOnly),
            ("vendor/lib/.git/hooks", Kind::ReadOnly),
        ] {
            assert!(got.contains(&(want.0.to_string(), want.1)), "{want:?} in {got:?}");
        }
        for not in
            [".git/objects", ".git/refs", ".git/HEAD", ".env.example", "src", "src/main.rs", ".github", "link/.env"]
        {
            assert!(!got.iter().any(|(p, _)| p == not), "{not} in {got:?}");
        }
        // Parents before what lies beneath them.
        let depth: Vec<usize> = got.iter().map(|(p, _)| p.matches('/').count()).collect();
        assert!(depth.windows(2).all(|w| w[0] <= w[1]), "{got:?}");
        let c = c_paths(&t.plan().carves, "src/deep");
        assert!(c.iter().all(|(p, ..)| p.to_str().unwrap().starts_with("../../")), "{c:?}");

        // Nothing changed: nothing new.
        assert!(t.refresh().is_empty());
        // Protected paths made afterwards, at the root and deep down, are reported once
        // (a new protected directory, not each file in it) and carved from then on.
        std::fs::write(r.join(".mcp.json"), "{}").unwrap();
        std::fs::write(r.join("ordinary.txt"), "").unwrap();
        std::fs::create_dir_all(r.join("src/deep/.claude/commands")).unwrap();
        std::fs::write(r.join("src/deep/.claude/commands/x.md"), "").unwrap();
        std::fs::write(r.join("src/deep/.env.local"), "K=v").unwrap();
        assert_eq!(t.refresh(), vec![".mcp.json".to_string(), "src/deep/.claude".to_string()]);
        let got = kinds(&t);
        assert!(got.contains(&("src/deep/.env.local".to_string(), Kind::HideFile)), "{got:?}");
        assert!(got.contains(&(".mcp.json".to_string(), Kind::ReadOnly)), "{got:?}");
        // A protected file removed or moved is no longer carved where it was (its mount
        // would fail), and is where it went (a new protected path, so reported).
        std::fs::remove_file(r.join("app/.env")).unwrap();
        std::fs::rename(r.join("packages"), r.join("moved")).unwrap();
        assert_eq!(t.refresh(), vec!["moved/web/.vscode".to_string()]);
        let got = kinds(&t);
        assert!(!got.iter().any(|(p, _)| p == "app/.env" || p.starts_with("packages/")), "{got:?}");
        assert!(got.contains(&("moved/web/.vscode".to_string(), Kind::ReadOnly)), "{got:?}");
        // The same as a fresh walk.
        assert_eq!(kinds(&t), kinds(&Tree::new(rules.clone(), r)));
    }

    /// Run `argv` (an absolute program first) with working directory `cwd`, entering
    /// `ns` when given and mounting `carve` otherwise: its exit code and output.
    fn run(cwd: &Path, argv: &[&str], carve: &[Carve], ns: Option<&super::super::spawn::Namespace>) -> (i32, String) {
        use super::super::spawn;
        use std::io::Read;
        let dir = std::fs::File::open(cwd).unwrap();
        let argv: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
        let carve_c = c_paths(carve, ".");
        let cwd_c = CString::new(cwd.as_os_str().as_bytes()).unwrap();
        let spec = spawn::ChildSpec {
            carve: &carve_c,
            enter: ns.map(|ns| (ns, cwd_c.as_c_str())),
            ..spawn::ChildSpec::plain(Path::new(&argv[0]), &argv, dir.as_raw_fd())
        };
        let child = spawn::spawn(&spec).unwrap();
        let mut out = String::new();
        std::fs::File::from(child.stderr).read_to_string(&mut out).unwrap();
        std::fs::File::from(child.stdout).read_to_string(&mut out).unwrap();
        let code = loop {
            match spawn::try_reap(child.pidfd.as_raw_fd(), child.init.as_ref()).unwrap() {
                Some(spawn::Exit::Code(c)) => break c,
                Some(spawn::Exit::Signal(s)) => break 128 + s,
                None => std::thread::sleep(std::time::Duration::from_millis(2)),
            }
        };
        (code, out)
    }

    /// The namespace a workspace's commands enter holds the carve-outs without their
    /// being mounted per command (the command is given none to mount), is kept while
    /// nothing happens to a carved path, and is made again when one is replaced — a
    /// rename over `.env` or over `.git/config`, a new `.vscode` — or the root itself is
    /// another directory, so the new file is protected as the old one was.
    #[test]
    fn the_kept_namespace_holds_the_carve_outs_and_follows_replacements() {
        if !super::super::spawn::isolation() {
            assert!(std::env::var_os("CI").is_none(), "CI runs where user namespaces are allowed");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path().join("ws");
        std::fs::create_dir_all(r.join(".git/hooks")).unwrap();
        std::fs::create_dir_all(r.join(".vscode")).unwrap();
        std::fs::create_dir_all(r.join("app")).unwrap();
        std::fs::write(r.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(r.join(".vscode/tasks.json"), "{}").unwrap();
        std::fs::write(r.join(".env"), "one-secret").unwrap();
        std::fs::write(r.join("app/.env"), "app-secret").unwrap();
        std::fs::write(r.join("notes.txt"), "plain").unwrap();
        let mut t = Tree::new(Arc::new(FileRules::defaults()), &r);
        let plan = t.plan();
        let ns = t.namespace(&plan).expect("a namespace is made");
        let write = "/bin/sh";
        let attempt = |ns: &super::super::spawn::Namespace, cwd: &Path| {
            run(
                cwd,
                &[write, "-c", "cat .env app/.env; echo x >> .git/config; echo x >> .vscode/tasks.json; cat notes.txt"],
                &[],
                Some(ns),
            )
        };
        let (_, out) = attempt(&ns, &r);
        assert!(!out.contains("secret"), "{out}");
        assert!(out.contains("Permission denied") && out.contains("Read-only file system"), "{out}");
        assert!(out.contains("plain"), "control: {out}");
        assert_eq!(std::fs::read_to_string(r.join(".git/config")).unwrap(), "[core]\n");
        // From a subdirectory, by its path inside the namespace.
        let (_, out) = run(&r.join("app"), &["/bin/cat", ".env"], &[], Some(&ns));
        assert!(out.contains("Permission denied") && !out.contains("secret"), "{out}");
        // Control: neither entered nor mounted, the same command reads and writes.
        let (_, out) = run(&r, &["/bin/cat", ".env"], &[], None);
        assert!(out.contains("one-secret"), "control: {out}");

        // Nothing happened: the same namespace; an unrelated file made: still the same.
        std::fs::write(r.join("app/other.txt"), "x").unwrap();
        t.refresh();
        let again = t.namespace(&t.plan()).unwrap();
        assert!(Arc::ptr_eq(&ns, &again));

        // Replaced from outside: renamed over, or a directory put in the old one's place.
        for (what, replace) in [
            (
                ".env",
                &(|r: &Path| {
                    std::fs::write(r.join(".env.new"), "two-secret").unwrap();
                    std::fs::rename(r.join(".env.new"), r.join(".env")).unwrap();
                }) as &dyn Fn(&Path),
            ),
            (".git/config", &|r: &Path| {
                std::fs::write(r.join(".git/config.lock"), "[core]\n").unwrap();
                std::fs::rename(r.join(".git/config.lock"), r.join(".git/config")).unwrap();
            }),
            (".vscode", &|r: &Path| {
                std::fs::rename(r.join(".vscode"), r.join("old-vscode")).unwrap();
                std::fs::create_dir(r.join(".vscode")).unwrap();
                std::fs::write(r.join(".vscode/tasks.json"), "{}").unwrap();
            }),
            ("app", &|r: &Path| {
                std::fs::rename(r.join("app"), r.join("old-app")).unwrap();
                std::fs::create_dir(r.join("app")).unwrap();
                std::fs::write(r.join("app/.env"), "app-secret-two").unwrap();
            }),
        ] {
            let before = t.namespace(&t.plan()).unwrap();
            replace(&r);
            t.refresh();
            let now = t.namespace(&t.plan()).unwrap();
            assert!(!Arc::ptr_eq(&before, &now), "{what}: the namespace is made again");
            let (_, out) = attempt(&now, &r);
            assert!(!out.contains("secret"), "{what}: {out}");
            assert_eq!(out.matches("Read-only file system").count(), 2, "{what}: {out}");
            assert_eq!(std::fs::read_to_string(r.join(".git/config")).unwrap(), "[core]\n", "{what}");
            // What the stale namespace would have let through, had it been kept.
            let (_, stale) = attempt(&before, &r);
            assert!(stale.contains("secret") || stale.matches("Read-only file system").count() < 2, "{what}: {stale}");
            std::fs::write(r.join(".git/config"), "[core]\n").unwrap();
            std::fs::write(r.join(".vscode/tasks.json"), "{}").unwrap();
            t.refresh();
        }

        // The root itself replaced by another directory at the same path.
        let before = t.namespace(&t.plan()).unwrap();
        std::fs::rename(&r, dir.path().join("old-ws")).unwrap();
        std::fs::create_dir_all(r.join(".git")).unwrap();
        std::fs::write(r.join(".env"), "three-secret").unwrap();
        std::fs::write(r.join("notes.txt"), "plain").unwrap();
        t.refresh();
        let now = t.namespace(&t.plan()).unwrap();
        assert!(!Arc::ptr_eq(&before, &now));
        let (_, out) = run(&r, &["/bin/cat", ".env", "notes.txt"], &[], Some(&now));
        assert!(out.contains("Permission denied") && !out.contains("secret") && out.contains("plain"), "{out}");
    }

    #[test]
    fn error_output_names_the_carve_outs_a_command_ran_into() {
        let rules = FileRules::defaults();
        let carves = vec![
            Carve { rel: ".git/hooks".into(), kind: Kind::ReadOnly, locked: 0 },
            Carve { rel: ".env".into(), kind: Kind::HideFile, locked: 0 },
            Carve { rel: ".aws".into(), kind: Kind::HideDir, locked: 0 },
            Carve { rel: ".vscode".into(), kind: Kind::ReadOnly, locked: 0 },
        ];
        let stderr = "cat: .env: Permission denied\n\
                      cat: .env.example: Permission denied\n\
                      sh: 1: cannot create .git/hooks/pre-commit: Read-only file system\n\
                      cat: .aws/credentials: No such file or directory\n\
                      cat: .env: Permission denied\n\
                      touch: cannot touch '.vscode/tasks.json': Read-only file system\n\
                      grep: .vscode: something else\n";
        let got: Vec<(String, bool)> = hits(&rules, &carves, stderr).into_iter().map(|h| (h.rel, h.write)).collect();
        assert_eq!(
            got,
            vec![
                (".env".to_string(), false),
                (".git/hooks".to_string(), true),
                (".aws".to_string(), false),
                (".vscode".to_string(), true)
            ]
        );
        let h = hits(&rules, &carves, "touch: cannot touch '.vscode/tasks.json': Read-only file system");
        assert!(h[0].message.contains("[[files.rules]]"), "{}", h[0].message);
        assert!(hits(&rules, &carves, "all fine\n").is_empty());
    }
}
