//! Keeping track of everything a command starts, so that all of it can be stopped.
//!
//! Two mechanisms, chosen once per host:
//! - **cgroup** (preferred): each command runs in a fresh cgroup v2 directory beside
//!   the host's own; the child joins it before `exec` (see [`super::spawn`]), so every descendant is in it
//!   whatever it does (`setsid`, double forks). Stopping is `SIGTERM` to each member,
//!   a grace period, then `cgroup.kill`.
//! - **walk** (where no writable cgroup v2 with `cgroup.kill` exists): the host becomes
//!   a child subreaper, so orphans of a command are re-parented to it instead of init;
//!   the command's tree is found by walking `/proc` from the child, from every process
//!   seen in the tree before (matched by start time, so a reused pid is not taken), and
//!   from its process group. Stopping freezes the tree with `SIGSTOP` until no new
//!   process appears, sends `SIGTERM` and `SIGCONT`, waits the grace period, then
//!   freezes again and sends `SIGKILL`.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How command trees are contained on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mechanism {
    /// A cgroup v2 directory per command, under this one.
    Cgroup(PathBuf),
    /// A `/proc` walk with the host as child subreaper.
    Walk,
}

impl std::fmt::Display for Mechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mechanism::Cgroup(p) => write!(f, "cgroup v2 under {}", p.display()),
            Mechanism::Walk => f.write_str("child subreaper and process walk (no writable cgroup v2 with cgroup.kill)"),
        }
    }
}

/// The mechanism available here (probed once).
pub fn detect() -> &'static Mechanism {
    static M: OnceLock<Mechanism> = OnceLock::new();
    M.get_or_init(|| match cgroup_base() {
        Some(base) => Mechanism::Cgroup(base),
        None => Mechanism::Walk,
    })
}

/// Find this process's cgroup v2 directory and check that a child cgroup with
/// `cgroup.kill` can be made in it.
fn cgroup_base() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mount = mountinfo.lines().find_map(|l| {
        let (left, right) = l.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2").then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let rel = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let base = mount.join(rel.trim_start_matches('/'));
    let probe = base.join(format!("cheng-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    let ok = probe.join("cgroup.kill").exists() && probe.join("cgroup.procs").exists();
    let _ = std::fs::remove_dir(&probe);
    ok.then_some(base)
}

/// Make this process a child subreaper (once).
fn become_subreaper() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        // SAFETY: prctl with integer arguments has no memory effects.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc != 0 {
            tracing::warn!(target: "cheng::process", "cannot become a child subreaper: {}", std::io::Error::last_os_error());
        }
    });
}

/// A cgroup made for one command.
pub struct CgroupDir {
    dir: PathBuf,

    /// `cgroup.procs`, open for writing, for the child to join before `exec`.
    pub procs: OwnedFd,
}

/// Prepare containment for one command: for the cgroup mechanism, a fresh cgroup.
pub fn prepare(mech: &Mechanism, id: &str) -> std::io::Result<Option<CgroupDir>> {
    match mech {
        Mechanism::Cgroup(base) => {
            let dir = base.join(format!("cheng-{}-{id}", std::process::id()));
            std::fs::create_dir(&dir)?;
            let procs = std::fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs"));
            match procs {
                Ok(f) => Ok(Some(CgroupDir { dir, procs: f.into() })),
                Err(e) => {
                    let _ = std::fs::remove_dir(&dir);
                    Err(e)
                }
            }
        }
        Mechanism::Walk => {
            become_subreaper();
            Ok(None)
        }
    }
}

/// Whether process `pid` exists.
fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence and permission.
    unsafe { libc::kill(pid, 0) == 0 || *libc::__errno_location() == libc::EPERM }
}

/// The host pid in a name this module or [`super::run`] made (`<prefix><pid>-<id>`).
fn owner(name: &str, prefix: &str) -> Option<i32> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

/// Kill and remove what hosts that died left behind: the cgroups of their commands
/// (every process still in one is killed) and the temporary directories of their
/// commands and MCP servers.
/// Run once when a host starts; a host that is still running keeps its own.
pub fn reap_stale(mech: &Mechanism) {
    if let Mechanism::Cgroup(base) = mech {
        for e in std::fs::read_dir(base).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(pid) = owner(&name, "cheng-") else { continue };
            if alive(pid) {
                continue;
            }
            let dir = e.path();
            let _ = std::fs::write(dir.join("cgroup.kill"), "1");
            for _ in 0..100 {
                if std::fs::remove_dir(&dir).is_ok() {
                    tracing::info!(target: "cheng::process", cgroup = %dir.display(), "removed a dead host's command cgroup");
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    for e in std::fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let dead = |prefix| owner(&name, prefix).is_some_and(|pid| !alive(pid));
        if dead("cheng-cmd-") || dead("cheng-mcp-") {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The running tree of one command.
pub struct Tree {
    child: i32,
    cgroup: Option<CgroupDir>,
    /// Walk mechanism: every (pid, start time) seen in the tree.
    known: HashMap<i32, u64>,
    finished: bool,
}

impl Tree {
    /// Track the tree of `child` (its process group leader).
    pub fn new(child: i32, cgroup: Option<CgroupDir>) -> Self {
        let mut known = HashMap::new();
        if let Some(st) = stat(child) {
            known.insert(child, st.start);
        }
        Tree { child, cgroup, known, finished: false }
    }

    /// Live members of the tree now (zombies excluded).
    pub fn members(&mut self) -> Vec<i32> {
        match &self.cgroup {
            Some(cg) => cgroup_members(&cg.dir),
            None => self.walk(),
        }
    }

    fn walk(&mut self) -> Vec<i32> {
        let table = process_table();
        let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
        for (pid, st) in &table {
            children.entry(st.ppid).or_default().push(*pid);
        }
        let mut queue: Vec<i32> = Vec::new();
        for (pid, st) in &table {
            let seen = self.known.get(pid).is_some_and(|start| *start == st.start);
            if seen || st.pgid == self.child {
                queue.push(*pid);
            }
        }
        let mut found = HashSet::new();
        while let Some(pid) = queue.pop() {
            if found.insert(pid)
                && let Some(c) = children.get(&pid)
            {
                queue.extend(c);
            }
        }
        let mut live = Vec::new();
        for pid in found {
            if let Some(st) = table.get(&pid) {
                self.known.insert(pid, st.start);
                if st.state != 'Z' {
                    live.push(pid);
                }
            }
        }
        live
    }

    /// Stop every member: `SIGTERM`, up to `grace` to go, then `SIGKILL`. Returns once
    /// nothing of the tree runs (or after a bounded number of attempts).
    pub fn terminate(&mut self, grace: Duration) {
        let members = self.freeze();
        if !members.is_empty() {
            for &pid in &members {
                signal(pid, libc::SIGTERM);
                signal(pid, libc::SIGCONT);
            }
            let until = Instant::now() + grace;
            while Instant::now() < until {
                if self.members().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        self.kill_all();
        self.finished = true;
    }

    /// `SIGKILL` to everything, until nothing is left.
    pub fn kill_all(&mut self) {
        for _ in 0..100 {
            if let Some(cg) = &self.cgroup {
                let _ = std::fs::write(cg.dir.join("cgroup.kill"), "1");
            } else {
                for pid in self.freeze() {
                    signal(pid, libc::SIGKILL);
                }
            }
            if self.members().is_empty() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.reap();
    }

    /// Walk mechanism: `SIGSTOP` the tree until no new process appears, so that it
    /// cannot grow while it is being stopped. Returns the members.
    fn freeze(&mut self) -> Vec<i32> {
        if self.cgroup.is_some() {
            return self.members();
        }
        let mut stopped = HashSet::new();
        for _ in 0..100 {
            let now = self.members();
            let fresh: Vec<i32> = now.iter().copied().filter(|p| !stopped.contains(p)).collect();
            if fresh.is_empty() {
                return now;
            }
            for pid in fresh {
                signal(pid, libc::SIGSTOP);
                stopped.insert(pid);
            }
        }
        self.members()
    }

    /// Reap orphans re-parented to the host (walk mechanism); the direct child is left
    /// to its owner.
    fn reap(&mut self) {
        let me = std::process::id() as i32;
        if let Some(cg) = &self.cgroup {
            // Members re-parented to the host (when it is a subreaper) are reaped here,
            // or the cgroup would stay populated by zombies.
            let procs = std::fs::read_to_string(cg.dir.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                if pid != self.child && stat(pid).is_some_and(|st| st.ppid == me) {
                    let mut status = 0;
                    // SAFETY: waitpid on a specific pid with a valid status pointer.
                    unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
                }
            }
            return;
        }
        for (pid, _) in self.known.iter() {
            if *pid == self.child {
                continue;
            }
            if stat(*pid).is_some_and(|st| st.ppid == me) {
                let mut status = 0;
                // SAFETY: waitpid on a specific pid with a valid status pointer.
                unsafe { libc::waitpid(*pid, &mut status, libc::WNOHANG) };
            }
        }
    }

    /// Record that the tree is known to be empty (nothing to stop on drop).
    pub fn mark_empty(&mut self) {
        self.finished = true;
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        // A tree dropped while running (the call was abandoned) is killed outright.
        if !self.finished {
            self.kill_all();
        }
        if let Some(cg) = &self.cgroup {
            // Usually empty at once; if a member is still exiting, retry in the
            // background rather than hold up the call.
            if std::fs::remove_dir(&cg.dir).is_err() {
                let dir = cg.dir.clone();
                std::thread::spawn(move || {
                    for _ in 0..600 {
                        std::thread::sleep(Duration::from_millis(50));
                        if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                            return;
                        }
                        let _ = std::fs::write(dir.join("cgroup.kill"), "1");
                    }
                    tracing::warn!(target: "cheng::process", "could not remove {}", dir.display());
                });
            }
        }
    }
}

fn cgroup_members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .filter(|pid| stat(*pid).is_some_and(|st| st.state != 'Z'))
        .collect()
}

fn signal(pid: i32, sig: i32) {
    if pid > 1 {
        // SAFETY: kill with a positive pid and a valid signal number.
        unsafe { libc::kill(pid, sig) };
    }
}

/// The fields of `/proc/<pid>/stat` that tracking needs.
#[derive(Debug, Clone, Copy)]
pub struct Stat {
    /// State letter (R, S, Z, T…).
    pub state: char,
    /// Parent pid.
    pub ppid: i32,
    /// Process group.
    pub pgid: i32,
    /// Start time in clock ticks since boot.
    pub start: u64,
}

/// Parse `/proc/<pid>/stat`.
pub fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name is in parentheses and may hold anything; fields follow the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgid: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

fn process_table() -> HashMap<i32, Stat> {
    let mut out = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else { return out };
    for e in dir.flatten() {
        if let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok())
            && let Some(st) = stat(pid)
        {
            out.insert(pid, st);
        }
    }
    out
}

/// The raw descriptor of a cgroup's `cgroup.procs`, for [`join_in_child`].
pub fn procs_fd(cg: &Option<CgroupDir>) -> Option<i32> {
    cg.as_ref().map(|c| c.procs.as_raw_fd())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "1234 (a) b (c)) S 1 1234 1234 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
        let st = parse_stat(line).unwrap();
        assert_eq!((st.state, st.ppid, st.pgid, st.start), ('S', 1, 1234, 98765));
    }

    #[test]
    fn own_stat_is_readable() {
        let st = stat(std::process::id() as i32).unwrap();
        assert!(st.state != 'Z' && st.start > 0);
    }
}
