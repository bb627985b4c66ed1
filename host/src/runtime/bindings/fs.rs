//! `cheng:tool/fs`: reads, directory listings, atomic writes and removals done by the
//! host through the workspace guard — reads only under a mount of the call's grant,
//! writes only under a read-write one and never on a protected path — and by the path
//! rules (`[files]`): reading or changing a file a rule protects is refused or asked of
//! a person (listing names is not reading). Every refusal of a right goes into the
//! call's record (and the `cheng::denials` log).
//!
//! Work that may wait on the disk for long — a write's two syncs, a removal's sync, the
//! threads of a large `stat-dirs` — runs on the runtime's blocking threads, never on the
//! async worker that runs the call: with many calls in flight, a slow disk would
//! otherwise hold up every call and session on that worker. Short local reads and
//! listings stay on the worker, as the guest's own WASI file calls do
//! (`allow_blocking_current_thread`, measured faster; see `runtime::call`).

use std::sync::Arc;
use std::time::Instant;

use super::generated::cheng::tool::fs::{self as wfs, Host, PathRule, WriteResult};
use super::generated::cheng::tool::types::{ErrorKind, Failure};
use super::{ChengView, ImportError, denied, failure as fail, refused};
use crate::approvals::{Offer, Scope};
use crate::call::{Answer, say, why_not};
use crate::capability::{self, Refused};
use crate::guard::{Guard, ReadError, WriteError};
use crate::policy::files::{Access, Verdict};
use crate::policy::process::RuleDecision;

impl ChengView<'_> {
    /// The capability check: may this call read (any mount covering `path`) or write (a
    /// read-write mount, and not a protected path) there? A denial goes into the call's
    /// record. The path rules come after it ([`ChengView::fs_ruled`]).
    fn fs_access(&self, path: &str, write: bool) -> Result<(Arc<Guard>, String), Failure> {
        let caps = self.caps()?;
        let root = caps.guard.root().to_string_lossy();
        match capability::fs(&caps.mounts, &caps.protected, path, write, &root) {
            Ok(rel) => Ok((caps.guard.clone(), rel)),
            Err(Refused::Denied(d)) => Err(refused(&caps.scope, d)),
            Err(Refused::Invalid { kind, message }) => Err(fail(kind, message)),
        }
    }

    /// What the path rules say of `access` to `rel` for this component. The built-in
    /// git reader reads `.git` (it is a repository's reader) and the files the rules
    /// protect from reading, which it hashes and compares but never shows: its patches
    /// leave their lines out (it asks [`Host::path_rules`], which answers by the rules
    /// alone). Every other reading and writing of a file's contents goes by the rules.
    fn verdict(&self, rel: &str, access: Access) -> Result<Verdict<'_>, Failure> {
        let caps = self.caps()?;
        if access == Access::Read && caps.reads_git {
            return Ok(Verdict { decision: RuleDecision::Allow, rule: None });
        }
        Ok(caps.file_rules.check(rel, access))
    }

    /// The first statement of every `fs` function that reads or changes a file's
    /// contents: the capability check, then the path rules — allowed; refused (the
    /// denial names the rule and how to change it); or asked of a person, whose yes
    /// holds for the rest of the call (once) or of the run ("this run"). Every refusal
    /// is recorded.
    async fn fs_ruled(&mut self, path: &str, write: bool) -> Result<Arc<Guard>, Failure> {
        let (guard, rel) = self.fs_access(path, write)?;
        let access = if write { Access::Write } else { Access::Read };
        let (decision, message) = {
            let v = self.verdict(&rel, access)?;
            // The words only for a path a rule speaks of (most paths: none).
            (v.decision, (v.decision != RuleDecision::Allow).then(|| v.message(&rel, access)))
        };
        match (decision, message) {
            (RuleDecision::Forbid, Some(message)) => {
                let caps = self.caps()?;
                Err(refused(&caps.scope, capability::path_rule(&rel, write, message)))
            }
            (RuleDecision::Prompt, Some(message)) => {
                self.ask_path(&rel, access, message).await?;
                Ok(guard)
            }
            _ => Ok(guard),
        }
    }

    /// `read-files` (`ask`: a protected file asks a person) and `read-unprotected` (it
    /// is not read and comes back not granted): each path alone, all of them within
    /// [`MAX_READ_MANY`].
    async fn read_many(&mut self, paths: Vec<String>, max_bytes_each: u64, ask: bool) -> Vec<Result<Vec<u8>, Failure>> {
        let mut total = 0u64;
        let mut out = Vec::with_capacity(paths.len());
        for path in paths {
            let checked = match ask {
                true => self.fs_ruled(&path, false).await,
                false => self.fs_unprotected(&path),
            };
            let r = checked.and_then(|g| {
                let left = MAX_READ_MANY.saturating_sub(total);
                g.read(&path, max_bytes_each.min(MAX_READ).min(left)).map_err(read_failure)
            });
            if let Ok(d) = &r {
                total += d.len() as u64;
            }
            out.push(r);
        }
        out
    }

    /// The capability check, then the path rules without asking: a file they protect
    /// from reading (and nobody answered for) is not granted.
    fn fs_unprotected(&self, path: &str) -> Result<Arc<Guard>, Failure> {
        let (guard, rel) = self.fs_access(path, false)?;
        let decision = self.verdict(&rel, Access::Read)?.decision;
        if self.without_asking(decision, &rel, Access::Read) == PathRule::Allow {
            return Ok(guard);
        }
        Err(fail(
            cheng_contract::ErrorKind::NotGranted,
            format!("\"{rel}\" is protected by a path rule and was not read"),
        ))
    }

    /// What `decision` for `access` to `rel` comes to without asking anyone: a prompt
    /// a person already answered (for this call or this run) is allowed.
    fn without_asking(&self, decision: RuleDecision, rel: &str, access: Access) -> PathRule {
        match decision {
            RuleDecision::Allow => PathRule::Allow,
            RuleDecision::Forbid => PathRule::Refuse,
            RuleDecision::Prompt if self.answered(rel, access) => PathRule::Allow,
            RuleDecision::Prompt => PathRule::Ask,
        }
    }

    /// `may-write` and `may-read`: every capability check first, so a refusal comes
    /// before anyone is asked, then the path rules of each path.
    async fn may(&mut self, paths: &[String], write: bool) -> Result<(), Failure> {
        for p in paths {
            self.fs_access(p, write)?;
        }
        for p in paths {
            self.fs_ruled(p, write).await?;
        }
        Ok(())
    }

    /// Whether a person already let this call or this run have `access` to `rel`.
    fn answered(&self, rel: &str, access: Access) -> bool {
        let Ok(caps) = self.caps() else { return false };
        caps.paths_answered.lock().unwrap_or_else(|p| p.into_inner()).contains(&answer_key(rel, access))
            || caps.spawner.run_grants.has_path(&caps.scope.cx.run, access.as_str(), rel, caps.spawner.run_idle)
    }

    /// Ask a person for `access` to the protected file `rel` (`why`: the rule and how
    /// to change it), unless this call or this run already has the answer.
    async fn ask_path(&mut self, rel: &str, access: Access, why: String) -> Result<(), Failure> {
        if self.answered(rel, access) {
            return Ok(());
        }
        let caps = self.caps()?;
        let run = caps.scope.cx.run.clone();
        let spawner = caps.spawner.clone();
        let write = access == Access::Write;
        let scope = caps.scope.clone();
        let broker = caps.broker.clone();
        let shown = cheng_contract::paths::display_path(rel);
        let summary = match access {
            Access::Read => format!("read the protected file {shown}"),
            Access::Write => format!("write the protected file {shown}"),
        };
        let card = scope.card(summary, why, String::new()).with_offer(Offer {
            scopes: vec![Scope::Once, Scope::Run],
            once_only: None,
            prefixes: Vec::new(),
            prefix: 0,
            tiers: Vec::new(),
            hosts: Vec::new(),
            full: String::new(),
        });
        let started = Instant::now();
        let answer = scope.ask(&broker, card, |d| capability::path_approval(rel, write, why_not(d))).await;
        self.ctx.budget.add_wait(started.elapsed());
        match answer {
            Answer::Go { granted, .. } => {
                if granted.scope == Some(Scope::Run) {
                    spawner.run_grants.grant_path(&run, access.as_str(), rel);
                }
                let caps = self.caps()?;
                caps.paths_answered.lock().unwrap_or_else(|p| p.into_inner()).insert(answer_key(rel, access));
                Ok(())
            }
            Answer::Cancelled => {
                let nothing = if write { "nothing was written" } else { "nothing was read" };
                Err(fail(cheng_contract::ErrorKind::Cancelled, say::cancelled_waiting(nothing)))
            }
            Answer::Refused { denial, .. } => Err(denied(&denial)),
        }
    }

    /// Whether this host runs the fs imports' long blocking work on the call's own async
    /// worker (only for the benchmark that measures the difference; see
    /// `HostBuilder::blocking_fs_on_workers`).
    fn on_worker(&self) -> bool {
        self.caps().is_ok_and(|c| c.fs_on_worker)
    }
}

/// How a person's answer for `access` to `rel` is kept for the rest of a call.
fn answer_key(rel: &str, access: Access) -> String {
    format!("{}:{rel}", access.as_str())
}

/// Run `work` on the runtime's blocking threads and wait for it without holding the
/// async worker (or on the worker itself when `on_worker`). A panic inside `work` is
/// raised again here, so the call ends as "crashed" as for a panic in the import itself;
/// a runtime shutting down before `work` started is a fault. If the call is dropped
/// while `work` runs (cancelled, out of time), `work` still finishes: a write is then
/// done whole, as one that finished just before the cancellation would be.
async fn off_worker<R: Send + 'static>(
    on_worker: bool,
    work: impl FnOnce() -> R + Send + 'static,
) -> wasmtime::Result<R> {
    if on_worker {
        return Ok(work());
    }
    tokio::task::spawn_blocking(work).await.map_err(|e| match e.try_into_panic() {
        Ok(panic) => std::panic::resume_unwind(panic),
        Err(e) => super::fault(format_args!("a blocking file operation did not run ({e})")),
    })
}

fn failure(e: WriteError) -> Failure {
    let kind: ErrorKind = e.kind().into();
    Failure { kind, message: e.to_string(), terminal: kind != ErrorKind::Io }
}

fn read_failure(e: ReadError) -> Failure {
    let kind: ErrorKind = e.kind().into();
    Failure { kind, message: e.to_string(), terminal: kind != ErrorKind::Io }
}

/// The most one `read-file` may return, whatever the guest asks.
pub const MAX_READ: u64 = 256 << 20;
/// The most one `read-files` may return in total.
pub const MAX_READ_MANY: u64 = 256 << 20;

impl Host for ChengView<'_> {
    async fn read_file(&mut self, path: String, max_bytes: u64) -> Result<Vec<u8>, ImportError> {
        let guard = self.fs_ruled(&path, false).await?;
        Ok(guard.read(&path, max_bytes.min(MAX_READ)).map_err(read_failure)?)
    }

    async fn read_files(
        &mut self,
        paths: Vec<String>,
        max_bytes_each: u64,
    ) -> wasmtime::Result<Vec<Result<Vec<u8>, Failure>>> {
        Ok(self.read_many(paths, max_bytes_each, true).await)
    }

    async fn read_unprotected(
        &mut self,
        paths: Vec<String>,
        max_bytes_each: u64,
    ) -> wasmtime::Result<Vec<Result<Vec<u8>, Failure>>> {
        Ok(self.read_many(paths, max_bytes_each, false).await)
    }

    async fn write_file(
        &mut self,
        path: String,
        contents: Vec<u8>,
        create_dirs: bool,
        overwrite: bool,
    ) -> Result<WriteResult, ImportError> {
        let guard = self.fs_ruled(&path, true).await?;
        let write = move || guard.write_atomic(&path, &contents, create_dirs, overwrite);
        let w = off_worker(self.on_worker(), write).await.map_err(ImportError::Fault)?.map_err(failure)?;
        Ok(WriteResult { created: w.created, bytes_written: w.bytes })
    }

    async fn may_write(&mut self, paths: Vec<String>) -> Result<(), ImportError> {
        Ok(self.may(&paths, true).await?)
    }

    async fn may_read(&mut self, paths: Vec<String>) -> Result<(), ImportError> {
        Ok(self.may(&paths, false).await?)
    }

    async fn path_rules(&mut self, paths: Vec<String>, write: bool) -> wasmtime::Result<Vec<PathRule>> {
        let access = if write { Access::Write } else { Access::Read };
        let Ok(caps) = self.caps() else { return Ok(vec![PathRule::Refuse; paths.len()]) };
        let root = caps.guard.root().to_string_lossy().into_owned();
        let mut out = Vec::with_capacity(paths.len());
        for p in &paths {
            let Ok(rel) = cheng_contract::paths::lexical(p, &root).map(|r| r.normalized()) else {
                out.push(PathRule::Refuse);
                continue;
            };
            // The rules as written, for every component (the git reader included: it
            // asks in order to leave protected files' lines out of its patches).
            out.push(self.without_asking(caps.file_rules.check(&rel, access).decision, &rel, access));
        }
        Ok(out)
    }

    async fn remove_file(&mut self, path: String) -> Result<(), ImportError> {
        let guard = self.fs_ruled(&path, true).await?;
        let remove = move || guard.remove_file(&path);
        Ok(off_worker(self.on_worker(), remove).await.map_err(ImportError::Fault)?.map_err(failure)?)
    }

    async fn read_dir(&mut self, path: String, sizes: bool) -> Result<Vec<wfs::DirEntry>, ImportError> {
        let (guard, _) = self.fs_access(&path, false)?;
        let entries = guard.read_dir(&path, sizes).map_err(failure)?;
        Ok(entries.into_iter().map(wfs::DirEntry::from).collect())
    }

    async fn stat_dirs(&mut self, paths: Vec<String>) -> wasmtime::Result<Vec<Result<Vec<wfs::EntryStat>, Failure>>> {
        // Grants are checked (and refusals logged) here; the listings, one `lstat` per
        // entry, are spread over a few threads when there are many directories, as git
        // spreads its own stats over threads for a large index. Measured on 2 cores:
        // for 20,000 entries in 801 directories more threads than cores pay off (43 ms
        // on one thread, 35 on two, 27 on four, no less on eight); for 2,000 entries
        // in 41 directories four threads cost more than they save (the workspace_git
        // bench went from 0.9x to 1.1x of git). So: one thread per core, two per core
        // for a large listing.
        let checked: Vec<Result<_, Failure>> = paths.iter().map(|p| self.fs_access(p, false).map(|(g, _)| g)).collect();
        let job = Arc::new(StatDirs { paths, checked });
        let n = job.paths.len();
        if n < 8 {
            return Ok((0..n).map(|i| job.list(i)).collect());
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let workers = if n >= 256 { cores * 2 } else { cores }.clamp(2, 8);
        // Each part on a thread of the runtime's blocking pool, awaited; or, for the
        // benchmark's "before", on threads the call's worker waits for.
        let parts: Vec<Option<Vec<(usize, Listed)>>> = if self.on_worker() {
            std::thread::scope(|s| {
                let handles: Vec<_> = (0..workers)
                    .map(|w| {
                        let job = &job;
                        s.spawn(move || job.part(w, workers))
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().ok()).collect()
            })
        } else {
            let handles = (0..workers).map(|w| {
                let job = job.clone();
                tokio::task::spawn_blocking(move || job.part(w, workers))
            });
            futures::future::join_all(handles).await.into_iter().map(Result::ok).collect()
        };
        let mut out: Vec<Option<Listed>> = (0..n).map(|_| None).collect();
        let mut faults = 0;
        for part in parts {
            match part {
                Some(done) => {
                    for (i, r) in done {
                        out[i] = Some(r);
                    }
                }
                None => faults += 1,
            }
        }
        // A worker only lists and converts; if one panicked anyway (or never ran), the
        // listing is incomplete, and the guest must not take it for the directories'
        // contents.
        if faults > 0 {
            return Err(super::fault(format!("{faults} stat-dirs worker(s) panicked or did not run")));
        }
        Ok(out.into_iter().flatten().collect())
    }
}

/// One directory's `stat-dirs` answer.
type Listed = Result<Vec<wfs::EntryStat>, Failure>;

/// A `stat-dirs` request whose grants are checked: what its listing threads share.
struct StatDirs {
    paths: Vec<String>,
    /// Each path's guard, or the refusal it got.
    checked: Vec<Result<Arc<Guard>, Failure>>,
}

impl StatDirs {
    /// The listing of the `i`-th directory.
    fn list(&self, i: usize) -> Listed {
        let guard = self.checked[i].as_ref().map_err(Clone::clone)?;
        Ok(guard
            .read_dir_stat(&self.paths[i])
            .map_err(failure)?
            .into_iter()
            .map(|(e, st)| entry_stat(e, &st))
            .collect())
    }

    /// The listings of every `step`-th directory from the `first`, with their indices.
    fn part(&self, first: usize, step: usize) -> Vec<(usize, Listed)> {
        (first..self.paths.len()).step_by(step).map(|i| (i, self.list(i))).collect()
    }
}

// Field widths differ between targets; the casts are the portable spelling.
#[allow(clippy::unnecessary_cast)]
fn entry_stat(e: crate::guard::DirEntry, st: &rustix::fs::Stat) -> wfs::EntryStat {
    wfs::EntryStat {
        name: e.name,
        valid_utf8: e.valid_utf8,
        kind: e.kind.into(),
        mode: st.st_mode as u32,
        size: st.st_size as u64,
        mtime_seconds: st.st_mtime as i64,
        mtime_nanoseconds: st.st_mtime_nsec as u32,
        ctime_seconds: st.st_ctime as i64,
        ctime_nanoseconds: st.st_ctime_nsec as u32,
        device: st.st_dev as u64,
        inode: st.st_ino as u64,
        uid: st.st_uid as u32,
        gid: st.st_gid as u32,
    }
}
