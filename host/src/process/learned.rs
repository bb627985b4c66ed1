//! Remembered answers: rules a person saved by answering "always", and grants for the
//! rest of a run ("this run").
//!
//! A learned rule names one executable (its resolved path, so a different program of
//! the same name never matches), the words the command starts with (the program as
//! typed, then an argument prefix), the working directory within the workspace, the
//! workspace (or every workspace), the environment entries the request set, the hosts
//! it may reach, who saved it from which card, and an optional expiry. It admits only a
//! command started directly — never through a launcher or a shell, never an
//! interpreter given code, never a program that lies where commands can write — and
//! the command it admits runs confined, with the hosts it names: "always" never means
//! full access.
//!
//! The rules live in the state directory (`learned-rules.json`, never the workspace
//! and never `cheng.toml`), read with the cap for their kind, written whole and
//! atomically under a lock (`learned-rules.lock`) so that every host sharing the state
//! directory sees each save, match count and revoke; a host re-reads the file when it
//! changed. The operator's `forbid` rules are checked first and always win.
//!
//! Grants for "this run" are kept in memory only, for that run, until it has been idle
//! for the server's idle window, and at most twelve hours.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::policy::hostfile;

/// The file of learned rules in a state directory.
pub const FILE: &str = "learned-rules.json";
const LOCK: &str = "learned-rules.lock";

/// The longest a "this run" grant lasts.
pub const RUN_GRANT_MAX: Duration = Duration::from_secs(12 * 3600);

/// One saved rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LearnedRule {
    /// Its id (`cheng rules revoke ID`).
    pub id: String,
    /// The executable, resolved.
    pub program: PathBuf,
    /// The words a command must start with: the program as typed, then arguments.
    pub words: Vec<String>,
    /// The working directory, relative to the workspace (`.` for its root).
    pub cwd: String,
    /// The workspace; none for every workspace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<PathBuf>,
    /// The environment entries the request set, which a command must set alike.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, String)>,
    /// The hosts its commands may reach (none: no network).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The rule in words, as the card showed it.
    pub text: String,
    /// The command of the card it was saved from.
    pub command: String,
    /// Who saved it (`operator:<token>`, `socket:uid 1000`, `terminal`).
    pub saved_by: String,
    /// The card (approval request id) it was saved from.
    pub card: String,
    /// The run that asked.
    pub run: String,
    /// When it was saved (ms since the epoch).
    pub saved_at_ms: u64,
    /// When it stops applying (ms since the epoch); none for never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
    /// How many commands it admitted.
    #[serde(default)]
    pub matches: u64,
    /// When it last admitted one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_match_ms: Option<u64>,
}

/// A command, as remembered answers see it.
#[derive(Debug, Clone, Copy)]
pub struct Probe<'a> {
    /// The executable, resolved.
    pub program: &'a Path,
    /// The words: the program as typed, then the arguments.
    pub words: &'a [String],
    /// The working directory, workspace-relative.
    pub cwd: &'a str,
    /// The workspace.
    pub workspace: &'a Path,
    /// The request's environment entries, sorted.
    pub env: &'a [(String, String)],
    /// Now, in ms since the epoch.
    pub now_ms: u64,
}

impl LearnedRule {
    /// Whether this rule admits `p`.
    pub fn admits(&self, p: &Probe<'_>) -> bool {
        self.program == p.program
            && p.words.len() >= self.words.len()
            && self.words.first() == p.words.first()
            && self.words.iter().zip(p.words).all(|(a, b)| a == b)
            && self.cwd == p.cwd
            && self.workspace.as_deref().is_none_or(|w| w == p.workspace)
            && self.env == p.env
            && self.expires_at_ms.is_none_or(|t| p.now_ms < t)
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct StoreFile {
    version: u32,
    rules: Vec<LearnedRule>,
}

/// Rules indexed by program, for a lookup that does not scan them all.
#[derive(Debug, Default)]
pub struct Index {
    rules: Vec<LearnedRule>,
    by_program: HashMap<PathBuf, Vec<usize>>,
}

impl Index {
    /// Index `rules`.
    pub fn new(rules: Vec<LearnedRule>) -> Index {
        let mut by_program: HashMap<PathBuf, Vec<usize>> = HashMap::new();
        for (i, r) in rules.iter().enumerate() {
            by_program.entry(r.program.clone()).or_default().push(i);
        }
        Index { rules, by_program }
    }

    /// The first rule admitting `p`, the longest prefix first.
    pub fn find(&self, p: &Probe<'_>) -> Option<&LearnedRule> {
        self.by_program
            .get(p.program)?
            .iter()
            .map(|&i| &self.rules[i])
            .filter(|r| r.admits(p))
            .max_by_key(|r| r.words.len())
    }

    /// Every rule.
    pub fn rules(&self) -> &[LearnedRule] {
        &self.rules
    }
}

/// Why the rules could not be read or written. The message names the file.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(pub String);

/// What identifies the file's version on disk (changed: read again).
type Stamp = Option<(u64, u64, i64, i64, u64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.size()))
}

/// The learned rules of one state directory.
#[derive(Debug)]
pub struct Store {
    dir: Option<PathBuf>,
    cache: Mutex<(Stamp, std::sync::Arc<Index>)>,
}

impl Store {
    /// The rules in `state` (none without a state directory: nothing is remembered
    /// beyond a run).
    pub fn new(state: Option<&Path>) -> Store {
        Store { dir: state.map(Path::to_path_buf), cache: Mutex::new((None, std::sync::Arc::new(Index::default()))) }
    }

    /// Whether rules can be saved here.
    pub fn can_save(&self) -> bool {
        self.dir.is_some()
    }

    /// The file's path.
    pub fn path(&self) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(FILE))
    }

    /// The rules in force now, read again when the file changed. A file that cannot be
    /// read gives no rules (every command asks), logged once per change.
    pub fn current(&self) -> std::sync::Arc<Index> {
        let Some(path) = self.path() else { return std::sync::Arc::new(Index::default()) };
        let now = stamp(&path);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.0 != now || now.is_none() && !cache.1.rules.is_empty() {
            let index = match read(&path) {
                Ok(rules) => Index::new(rules),
                Err(e) => {
                    tracing::warn!(target: "cheng::process", "learned rules not used: {e}");
                    Index::default()
                }
            };
            *cache = (now, std::sync::Arc::new(index));
        }
        cache.1.clone()
    }

    /// Change the file under its lock: `f` gets the rules as they are on disk.
    fn update<T>(&self, f: impl FnOnce(&mut Vec<LearnedRule>) -> T) -> Result<T, StoreError> {
        let Some(dir) = &self.dir else {
            return Err(StoreError("no state directory: rules cannot be saved (give one with --state-dir)".into()));
        };
        std::fs::create_dir_all(dir).map_err(|e| StoreError(format!("{}: {e}", dir.display())))?;
        let lock = hostfile::open_lock(&dir.join(LOCK), "a lock file").map_err(|e| StoreError(e.to_string()))?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
            .map_err(|e| StoreError(format!("locking {}: {e}", dir.join(LOCK).display())))?;
        let path = dir.join(FILE);
        let mut rules = match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            _ => read(&path)?,
        };
        let out = f(&mut rules);
        let text = serde_json::to_vec_pretty(&StoreFile { version: 1, rules })
            .map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        crate::atomic::write_atomic(&path, &text).map_err(|e| StoreError(format!("{}: {e}", path.display())))?;
        Ok(out)
    }

    /// Save `rule`.
    pub fn save(&self, rule: LearnedRule) -> Result<(), StoreError> {
        self.update(|rules| rules.push(rule))
    }

    /// Remove the rule `id`; the rule removed, if there was one.
    pub fn revoke(&self, id: &str) -> Result<Option<LearnedRule>, StoreError> {
        self.update(|rules| rules.iter().position(|r| r.id == id).map(|i| rules.remove(i)))
    }

    /// Count a match of rule `id` at `now_ms`.
    pub fn matched(&self, id: &str, now_ms: u64) -> Result<(), StoreError> {
        self.update(|rules| {
            if let Some(r) = rules.iter_mut().find(|r| r.id == id) {
                r.matches += 1;
                r.last_match_ms = Some(now_ms);
            }
        })
    }

    /// Every rule on disk now.
    pub fn list(&self) -> Result<Vec<LearnedRule>, StoreError> {
        match self.path() {
            Some(p) if p.exists() => read(&p),
            _ => Ok(Vec::new()),
        }
    }
}

fn read(path: &Path) -> Result<Vec<LearnedRule>, StoreError> {
    let bytes = hostfile::read(path, hostfile::LEARNED_RULES).map_err(|e| StoreError(e.to_string()))?;
    let file: StoreFile = serde_json::from_slice(&bytes)
        .map_err(|e| StoreError(format!("{}: not a learned rules file: {e}", path.display())))?;
    if file.version != 1 {
        return Err(StoreError(format!("{}: version {} is not one this host reads", path.display(), file.version)));
    }
    Ok(file.rules)
}

/// A "this run" grant.
#[derive(Debug, Clone)]
pub struct RunGrant {
    /// The rule it acts as (never saved).
    pub rule: LearnedRule,
    /// When it was given.
    pub given: std::time::Instant,
}

/// One run's grants, and when the run last made a call.
#[derive(Debug)]
struct RunEntry {
    last: std::time::Instant,
    grants: Vec<RunGrant>,
    /// Protected files a person let this run read or write (`read:<path>`,
    /// `write:<path>`), with when.
    paths: Vec<(String, std::time::Instant)>,
}

impl RunEntry {
    fn new(now: std::time::Instant) -> RunEntry {
        RunEntry { last: now, grants: Vec::new(), paths: Vec::new() }
    }

    /// Drop what is no longer live at `now` — everything when the run was idle for
    /// `idle`, else what is older than [`RUN_GRANT_MAX`] — and mark the run used.
    fn expire(&mut self, now: std::time::Instant, idle: Duration) {
        if now.duration_since(self.last) >= idle {
            self.grants.clear();
            self.paths.clear();
        }
        self.grants.retain(|g| now.duration_since(g.given) < RUN_GRANT_MAX);
        self.paths.retain(|(_, given)| now.duration_since(*given) < RUN_GRANT_MAX);
        self.last = now;
    }
}

/// The grants for "this run", per run.
#[derive(Debug, Default)]
pub struct RunGrants {
    runs: Mutex<HashMap<String, RunEntry>>,
    /// Whether any run holds a grant: a call of a run without one (nearly every call)
    /// passes [`RunGrants::touch`] without taking the lock.
    any: std::sync::atomic::AtomicBool,
}

impl RunGrants {
    /// Remember `rule` for `run`.
    pub fn grant(&self, run: &str, rule: LearnedRule) {
        let now = std::time::Instant::now();
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let entry = runs.entry(run.to_string()).or_insert_with(|| RunEntry::new(now));
        entry.last = now;
        entry.grants.push(RunGrant { rule, given: now });
        self.any.store(true, std::sync::atomic::Ordering::Release);
    }

    /// The grant of `run` admitting `p`, when one does and is still live (its run idle
    /// less than `idle`, the grant younger than [`RUN_GRANT_MAX`]).
    pub fn find(&self, run: &str, p: &Probe<'_>, idle: Duration) -> Option<LearnedRule> {
        let now = std::time::Instant::now();
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let entry = runs.get_mut(run)?;
        entry.expire(now, idle);
        let found = entry.grants.iter().filter(|g| g.rule.admits(p)).max_by_key(|g| g.rule.words.len());
        let found = found.map(|g| g.rule.clone());
        if entry.grants.is_empty() && entry.paths.is_empty() {
            runs.remove(run);
            self.any.store(!runs.is_empty(), std::sync::atomic::Ordering::Release);
        }
        found
    }

    /// Remember that a person let `run` have `access` to the protected file `path`.
    pub fn grant_path(&self, run: &str, access: &str, path: &str) {
        let now = std::time::Instant::now();
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let entry = runs.entry(run.to_string()).or_insert_with(|| RunEntry::new(now));
        entry.last = now;
        entry.paths.push((format!("{access}:{path}"), now));
        self.any.store(true, std::sync::atomic::Ordering::Release);
    }

    /// Whether `run` holds a live grant of `access` to `path` (same limits as
    /// [`RunGrants::find`]).
    pub fn has_path(&self, run: &str, access: &str, path: &str, idle: Duration) -> bool {
        if !self.any.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        let now = std::time::Instant::now();
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(entry) = runs.get_mut(run) else { return false };
        entry.expire(now, idle);
        let key = format!("{access}:{path}");
        entry.paths.iter().any(|(k, _)| *k == key)
    }

    /// Keep `run`'s grants alive (it made a call).
    pub fn touch(&self, run: &str) {
        if !self.any.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        if let Some(entry) = self.runs.lock().unwrap_or_else(|p| p.into_inner()).get_mut(run) {
            entry.last = std::time::Instant::now();
        }
    }

    /// The live grants of every run, as `(run, rule)`, oldest first within a run.
    pub fn list(&self, idle: Duration) -> Vec<(String, LearnedRule)> {
        let now = std::time::Instant::now();
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<(String, LearnedRule)> = runs
            .iter()
            .filter(|(_, e)| now.duration_since(e.last) < idle)
            .flat_map(|(run, e)| {
                e.grants
                    .iter()
                    .filter(|g| now.duration_since(g.given) < RUN_GRANT_MAX)
                    .map(|g| (run.clone(), g.rule.clone()))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.saved_at_ms.cmp(&b.1.saved_at_ms)));
        out
    }

    /// Forget `run`'s grants (it ended).
    pub fn end(&self, run: &str) {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.remove(run);
        self.any.store(!runs.is_empty(), std::sync::atomic::Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(program: &str, words: &[&str]) -> LearnedRule {
        LearnedRule {
            id: crate::new_id(),
            program: program.into(),
            words: words.iter().map(|s| s.to_string()).collect(),
            cwd: ".".into(),
            workspace: Some("/ws".into()),
            env: vec![],
            hosts: vec![],
            text: String::new(),
            command: String::new(),
            saved_by: "operator:t".into(),
            card: "c".into(),
            run: "r".into(),
            saved_at_ms: 0,
            expires_at_ms: None,
            matches: 0,
            last_match_ms: None,
        }
    }

    fn words(w: &[&str]) -> Vec<String> {
        w.iter().map(|s| s.to_string()).collect()
    }

    fn probe<'a>(program: &'a str, words: &'a [String], workspace: &'a str) -> Probe<'a> {
        Probe { program: Path::new(program), words, cwd: ".", workspace: Path::new(workspace), env: &[], now_ms: 10 }
    }

    #[test]
    fn a_rule_admits_its_prefix_in_its_place_only() {
        let r = rule("/usr/bin/cargo", &["cargo", "test"]);
        let w = words(&["cargo", "test", "--quiet"]);
        assert!(r.admits(&probe("/usr/bin/cargo", &w, "/ws")));
        // Another workspace, another executable of the same name, another subcommand.
        assert!(!r.admits(&probe("/usr/bin/cargo", &w, "/other")));
        assert!(!r.admits(&probe("/tmp/evil/cargo", &w, "/ws")));
        assert!(!r.admits(&probe("/usr/bin/cargo", &words(&["cargo", "publish"]), "/ws")));
        assert!(!r.admits(&probe("/usr/bin/cargo", &words(&["cargo"]), "/ws")));
        // Another directory, other environment, expired.
        let mut p = probe("/usr/bin/cargo", &w, "/ws");
        p.cwd = "sub";
        assert!(!r.admits(&p));
        let env = vec![("RUSTFLAGS".to_string(), "-C x".to_string())];
        let p = Probe { env: &env, ..probe("/usr/bin/cargo", &w, "/ws") };
        assert!(!r.admits(&p));
        let expired = LearnedRule { expires_at_ms: Some(10), ..r.clone() };
        assert!(!expired.admits(&probe("/usr/bin/cargo", &w, "/ws")));
        // Every workspace.
        let everywhere = LearnedRule { workspace: None, ..r };
        assert!(everywhere.admits(&probe("/usr/bin/cargo", &w, "/other")));
    }

    #[test]
    fn the_store_saves_counts_and_revokes_for_every_host_sharing_it() {
        let dir = tempfile::tempdir().unwrap();
        let a = Store::new(Some(dir.path()));
        let b = Store::new(Some(dir.path()));
        assert!(b.current().rules().is_empty());
        let r = rule("/usr/bin/cargo", &["cargo", "test"]);
        a.save(r.clone()).unwrap();
        // The other host sees it, and its matches.
        let w = words(&["cargo", "test"]);
        assert_eq!(b.current().find(&probe("/usr/bin/cargo", &w, "/ws")).map(|r| r.id.clone()), Some(r.id.clone()));
        b.matched(&r.id, 99).unwrap();
        let listed = a.list().unwrap();
        assert_eq!((listed[0].matches, listed[0].last_match_ms), (1, Some(99)));
        assert_eq!(a.revoke(&r.id).unwrap().map(|r| r.id), Some(r.id.clone()));
        assert!(b.current().find(&probe("/usr/bin/cargo", &w, "/ws")).is_none());
        assert_eq!(a.revoke(&r.id).unwrap(), None);
    }

    #[test]
    fn a_damaged_file_gives_no_rules_and_is_not_overwritten_by_a_save() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), b"{not json").unwrap();
        let s = Store::new(Some(dir.path()));
        assert!(s.current().rules().is_empty());
        assert!(s.save(rule("/bin/ls", &["ls"])).is_err());
        assert_eq!(std::fs::read(dir.path().join(FILE)).unwrap(), b"{not json");
    }

    #[test]
    fn run_grants_end_with_their_run_and_when_idle() {
        let g = RunGrants::default();
        g.grant("r1", rule("/usr/bin/cargo", &["cargo", "test"]));
        let w = words(&["cargo", "test"]);
        let p = probe("/usr/bin/cargo", &w, "/ws");
        assert!(g.find("r1", &p, Duration::from_secs(60)).is_some());
        assert!(g.find("r2", &p, Duration::from_secs(60)).is_none());
        std::thread::sleep(Duration::from_millis(20));
        assert!(g.find("r1", &p, Duration::from_millis(10)).is_none(), "idle past the window");
        g.grant("r1", rule("/usr/bin/cargo", &["cargo", "test"]));
        g.end("r1");
        assert!(g.find("r1", &p, Duration::from_secs(60)).is_none());
    }
}

/// Where a remembered answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remembered {
    /// A "this run" answer.
    Run,
    /// A learned rule ("always").
    Learned,
}

impl Remembered {
    /// Its name in records (`run`, `learned`).
    pub fn as_str(self) -> &'static str {
        match self {
            Remembered::Run => "run",
            Remembered::Learned => "learned",
        }
    }
}

/// What remembered answers compare of a command: its words (the program as typed, then
/// the arguments) and the request's environment entries, sorted.
fn words_and_env(p: &super::Prepared) -> (Vec<String>, Vec<(String, String)>) {
    let words = std::iter::once(p.argv0.clone()).chain(p.args.iter().cloned()).collect();
    let mut env = p.request_env.clone();
    env.sort();
    (words, env)
}

impl super::Spawner {
    /// The remembered answer admitting `p` in `run`, if any: a grant of this run first,
    /// then a learned rule. Only a command whose card would offer more than once can
    /// be admitted (never a launcher chain, a shell, an interpreter given code, a
    /// program where commands write, a workspace holding the host's files).
    pub(crate) fn remembered(&self, p: &super::Prepared, run: &str) -> Option<(Remembered, LearnedRule)> {
        let offer = p.offer.as_ref()?;
        if !offer.scopes.contains(&crate::approvals::Scope::Run) {
            return None;
        }
        let program = p.program_id.as_deref()?;
        let (words, env) = words_and_env(p);
        let probe =
            Probe { program, words: &words, cwd: &p.cwd_rel, workspace: &p.root, env: &env, now_ms: crate::unix_ms() };
        if let Some(rule) = self.run_grants.find(run, &probe, self.run_idle) {
            return Some((Remembered::Run, rule));
        }
        self.learned.current().find(&probe).map(|r| (Remembered::Learned, r.clone()))
    }

    /// Remember a yes with scope "this run" or "always" for `p`: the rule it makes
    /// (with `words` of the command kept), saved for "always". Returns the rule.
    pub(crate) fn remember(
        &self,
        p: &super::Prepared,
        run: &str,
        granted: &crate::approvals::Granted,
        card: &str,
        by: &str,
    ) -> Result<Option<LearnedRule>, StoreError> {
        use crate::approvals::Scope;
        let (Some(scope), Some(offer), Some(program)) = (granted.scope, &p.offer, &p.program_id) else {
            return Ok(None);
        };
        if scope == Scope::Once {
            return Ok(None);
        }
        let n = granted.prefix.unwrap_or(offer.prefix);
        let Some(preview) = offer.prefixes.iter().find(|x| x.words == n) else { return Ok(None) };
        let (mut words, env) = words_and_env(p);
        words.truncate(n);
        let now = crate::unix_ms();
        let every = granted.every_workspace && scope == Scope::Always;
        let text = if every {
            format!("{} (in any workspace, working directory {})", preview.text, p.cwd_rel)
        } else {
            preview.text.clone()
        };
        let rule = LearnedRule {
            id: crate::new_id(),
            program: program.clone(),
            words,
            cwd: p.cwd_rel.clone(),
            workspace: (!every).then(|| p.root.clone()),
            env,
            hosts: granted.hosts.clone().unwrap_or_default(),
            text,
            command: p.display.clone(),
            saved_by: by.to_string(),
            card: card.to_string(),
            run: run.to_string(),
            saved_at_ms: now,
            expires_at_ms: granted.expires_in_ms.map(|ms| now.saturating_add(ms)),
            matches: 0,
            last_match_ms: None,
        };
        match scope {
            Scope::Run => self.run_grants.grant(run, rule.clone()),
            _ => self.learned.save(rule.clone())?,
        }
        Ok(Some(rule))
    }
}
