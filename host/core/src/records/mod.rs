//! Call records and the audit log.
//!
//! Every call gets a record: its id, run, role and tool, the arguments as sent (whole up
//! to 64 KiB, else head, tail, size and SHA-256), its status (`ok`, `error`, `denied`,
//! or `running` while it runs), a short preview, its duration, the result, any approval
//! it waited on and every refusal the host issued during it (`denials`). Records are
//! appended to a JSON Lines file in the state directory (`audit.jsonl`): a `running`
//! line, carrying the arguments, before the tool runs, and a final line that carries
//! them only when no `running` line was written; readers fold the two.
//!
//! The log knows whether its last write succeeded ([`AuditLog::is_healthy`]); the call
//! pipeline refuses calls while it is not (see `[records] on_failure`).
//!
//! Durability without an fsync per call: a record is written to the file — handed to
//! the operating system — before its call goes on (the `running` line before the tool
//! runs, the final line before the result is returned), so killing the host never loses
//! a call; one background thread fsyncs in batches (group commit, a window of 100 ms by
//! default), so a machine crash loses at most one window.
//!
//! Tamper evidence ([`chain`]): every line carries `seq` and `prev`, the SHA-256 of the
//! line before it exactly as written, and both ends of the chain are also kept outside
//! the log (`audit.head`: the first link and the latest, written after each group commit
//! and by [`AuditLog::flush`], which a process calls on its way out);
//! [`verify()`] walks the chain across rotated files (`[records] max_bytes`) and names
//! the first record edited, removed (from the middle or the start), inserted or
//! reordered, or a cut tail — against the head file, and with [`verify_expecting`]
//! against a head the operator kept elsewhere.
//!
//! The head file's lock is what lets several processes append to one chain. Rather
//! than three system calls around every line (lock, `fstat` to see what others wrote,
//! unlock), a writer keeps the lock while it is busy: it takes it (and catches up) at
//! its first line, and a small thread lets go of it once the writer has been idle for
//! [`LEASE_IDLE`] or has held it for [`LEASE_MAX`] — another process waits at most that
//! long for its turn.
//!
//! # Example
//!
//! ```
//! use cheng_core::records::{AuditLog, Filter};
//!
//! let dir = std::env::temp_dir().join(format!("audit-doc-{}", std::process::id()));
//! let log = AuditLog::open(&dir.join("audit.jsonl"), std::time::Duration::from_millis(100)).unwrap();
//! assert!(log.read(&Filter::default()).unwrap().is_empty());
//! # std::fs::remove_dir_all(&dir).unwrap();
//! ```

pub mod chain;
mod verify;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::Condvar;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::approvals::ApprovalOutcome;
use crate::capability::Denial;

pub use verify::{Break, HeadSeen, Problem, Verification, verify, verify_expecting};

pub use crate::context::Status;

/// The audit log's file in a host's state directory (what `cheng_host::HostBuilder`
/// writes when given a state directory and no other log).
pub fn audit_log_in(state_dir: &Path) -> PathBuf {
    state_dir.join("audit.jsonl")
}

/// Longest preview kept in a record.
pub const PREVIEW_CHARS: usize = 200;
/// Results up to this size are stored whole; larger ones as head and tail.
pub const RESULT_WHOLE_BYTES: usize = 1 << 20;
/// Arguments up to this size are stored whole; larger ones as head and tail.
pub const ARGUMENTS_WHOLE_BYTES: usize = 64 << 10;
/// Bytes kept from each end of a larger result.
pub const RESULT_EDGE_BYTES: usize = 64 << 10;
/// The default group-commit window.
pub const DEFAULT_COMMIT_WINDOW: Duration = Duration::from_millis(100);
/// A writer lets go of the head lock once it has written nothing for this long.
pub const LEASE_IDLE: Duration = Duration::from_millis(1);
/// A writer lets go of the head lock after holding it this long, busy or not.
pub const LEASE_MAX: Duration = Duration::from_millis(10);

/// The record of one call.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CallRecord {
    /// Call id.
    pub id: String,
    /// Run id.
    pub run: String,
    /// Role.
    pub role: String,
    /// The workspace the call worked in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub workspace: String,
    /// Tool name as called.
    pub tool: String,
    /// The arguments as sent: whole up to [`ARGUMENTS_WHOLE_BYTES`], else a
    /// [`Truncated`] summary. Absent from a final line whose `running` line has them.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub arguments: serde_json::Value,
    /// Status.
    pub status: Status,
    /// A short preview of the result.
    pub preview: String,
    /// Duration in milliseconds (fractional).
    pub duration_ms: f64,
    /// The result: whole up to [`RESULT_WHOLE_BYTES`], else a [`Truncated`] summary.
    pub result: serde_json::Value,
    /// The error kind, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// Approvals the call waited on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<ApprovalOutcome>,
    /// Every refusal the host issued during the call (grants, policy, approvals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub denials: Vec<Denial>,
    /// Every network request the component made (method, URL, status, bytes, refusal).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requests: Vec<RequestRecord>,
    /// Every command the call ran without asking anyone, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unasked: Vec<UnaskedRecord>,
    /// Unix time (ms) the call started.
    pub started_at_ms: u64,
}

/// The record of something an operator did outside a tool call (`tool` names it, such
/// as `cheng.rules.revoke`), for the audit log: run and role `operator`, status ok.
pub fn operator_record(
    tool: &str,
    workspace: String,
    arguments: serde_json::Value,
    result: serde_json::Value,
) -> CallRecord {
    CallRecord {
        id: crate::new_id(),
        run: "operator".into(),
        role: "operator".into(),
        workspace,
        tool: tool.into(),
        arguments,
        status: Status::Ok,
        preview: preview(&result),
        duration_ms: 0.0,
        result,
        error_kind: None,
        approvals: Vec::new(),
        denials: Vec::new(),
        requests: Vec::new(),
        unasked: Vec::new(),
        started_at_ms: crate::unix_ms(),
    }
}

/// A command a call ran without asking anyone: no card was shown, and it ran in the
/// confined tier (reading only the system, the workspace and the toolchains).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnaskedRecord {
    /// The command as shown to people.
    pub command: String,
    /// Why nobody was asked: `known_safe` (on the known-safe list of read-only programs
    /// and argument forms), `rule` (an operator's allow rule), `run` (a person's answer
    /// "for this run") or `learned` (a learned rule, saved by an answer "always").
    pub by: String,
    /// The known-safe entry (`ls`, `git status`) or the remembered answer's rule id
    /// that admitted it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// The tier it ran at: always `confined`.
    pub tier: String,
    /// Whether its rule let it use the network.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub network: bool,
    /// The hosts it could reach, when its rule names hosts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
}

/// One network request of a call, as its record keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// `GET`, `POST`, …
    pub method: String,
    /// The URL as the component asked for it (cut to 512 bytes).
    pub url: String,
    /// The response status, when one arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Response body bytes passed to the component.
    pub bytes: u64,
    /// True when the egress guard refused it (nothing was sent).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub refused: bool,
    /// What went wrong: the refusal, a network error, a cut at the deadline or cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How a result too large to keep whole is stored.
#[derive(Debug, Clone, Serialize)]
pub struct Truncated {
    /// Always true.
    pub truncated: bool,
    /// Size of the whole result (JSON text), in bytes.
    pub size: usize,
    /// SHA-256 of the whole result (JSON text).
    pub sha256: String,
    /// Its first bytes.
    pub head: String,
    /// Its last bytes.
    pub tail: String,
}

/// The result as a record keeps it.
pub fn stored_result(result: &serde_json::Value) -> serde_json::Value {
    stored(result, RESULT_WHOLE_BYTES)
}

/// The arguments as a record keeps them.
pub fn stored_arguments(arguments: &serde_json::Value) -> serde_json::Value {
    stored(arguments, ARGUMENTS_WHOLE_BYTES)
}

/// `value` whole when its JSON text is at most `whole` bytes, else its head and tail
/// with its size and digest.
fn stored(value: &serde_json::Value, whole: usize) -> serde_json::Value {
    let text = value.to_string();
    if text.len() <= whole {
        return value.clone();
    }
    let edge = RESULT_EDGE_BYTES.min(whole / 2);
    let head_end = text.floor_char_boundary(edge);
    let tail_start = text.ceil_char_boundary(text.len() - edge);
    serde_json::to_value(Truncated {
        truncated: true,
        size: text.len(),
        sha256: hex::encode(Sha256::digest(text.as_bytes())),
        head: text[..head_end].to_string(),
        tail: text[tail_start..].to_string(),
    })
    .unwrap_or(serde_json::Value::Null)
}

/// A one-line preview: the summary if the result has one, else the start of its JSON.
pub fn preview(result: &serde_json::Value) -> String {
    let text = match result.get("summary").and_then(|s| s.as_str()) {
        Some(s) => s.to_string(),
        None => result.to_string(),
    };
    let mut p: String = text.chars().take(PREVIEW_CHARS).collect();
    if text.chars().count() > PREVIEW_CHARS {
        p.push('…');
    }
    p
}

/// Which records to read.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    /// Only this status.
    pub status: Option<Status>,
    /// Only this tool.
    pub tool: Option<String>,
    /// Only this run.
    pub run: Option<String>,
    /// Only the last N (after the other filters).
    pub last: Option<usize>,
}

/// Errors of the audit log.
#[derive(Debug, thiserror::Error)]
#[error("audit log {path}: {source}")]
pub struct AuditError {
    /// The file.
    pub path: String,
    /// The error.
    #[source]
    pub source: std::io::Error,
}

/// The append-only audit log.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<AuditInner>,
}

struct AuditInner {
    path: PathBuf,
    writer: Mutex<Appender>,
    /// The head file: the lock every writer of this log takes, and the chain's latest
    /// synced link.
    head: File,
    /// The head file opened again for the sync thread. `flock` locks belong to an open
    /// file, so one shared by both threads would let the sync thread's unlock release
    /// an append's lock; two opens exclude each other like two processes.
    head_for_sync: File,
    /// Rotate past this size (0: never).
    max_bytes: u64,
    dirty: AtomicBool,
    /// The latest link this writer made durable and wrote to the head file: a sync with
    /// nothing after it has nothing to do.
    synced_seq: std::sync::atomic::AtomicU64,
    stop: AtomicBool,
    healthy: AtomicBool,
    /// Wakes the lease thread when a writer takes the head lock.
    leased: Arc<(Mutex<bool>, Condvar)>,
    /// How long the head lock is kept: idle, and in all.
    lease_idle: Duration,
    lease_max: Duration,
}

/// The writer and its hold on the head lock.
struct Appender {
    chain: chain::Writer,
    /// Since when the head lock is held, and when the latest line was written under it.
    lease: Option<(Instant, Instant)>,
}

impl Appender {
    /// Let go of the head lock (`head`, the file it was taken on), if held.
    fn release(&mut self, head: &File) {
        if self.lease.take().is_some() {
            let _ = rustix::fs::flock(head, rustix::fs::FlockOperation::Unlock);
        }
    }
}

impl AuditInner {
    /// Make everything appended so far durable, then record the chain's latest link in
    /// the head file. The descriptor is a clone, so appends are not blocked meanwhile.
    fn sync(&self) -> std::io::Result<()> {
        self.sync_from(self.writer.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// [`AuditInner::sync`], the writer already held (`w`).
    fn sync_from(&self, mut w: std::sync::MutexGuard<'_, Appender>) -> std::io::Result<()> {
        // The head file is written under its lock, taken on the other open file: this
        // process's own hold on it goes first.
        w.release(&self.head);
        let tip = w.chain.tip;
        if tip.seq <= self.synced_seq.load(Ordering::Acquire) {
            return Ok(());
        }
        let file = w.chain.file.try_clone()?;
        drop(w);
        file.sync_data()?;
        let _lock = chain::HeadLock::take(&self.head_for_sync)?;
        chain::write_head(&self.head_for_sync, &self.path, tip)?;
        self.synced_seq.fetch_max(tip.seq, Ordering::AcqRel);
        Ok(())
    }
}

impl Drop for AuditInner {
    fn drop(&mut self) {
        // `sync` lets go of the head lock; without it, let go here.
        self.writer.get_mut().unwrap_or_else(|p| p.into_inner()).release(&self.head);
        if self.dirty.load(Ordering::Acquire) {
            let _ = self.sync();
        }
    }
}

impl AuditLog {
    /// Open (or create) the log at `path`, fsyncing in batches every `window`, never
    /// rotating.
    pub fn open(path: &Path, window: Duration) -> Result<AuditLog, AuditError> {
        Self::open_rotating(path, window, 0)
    }

    /// Open (or create) the log at `path`, fsyncing in batches every `window`, and
    /// moving it aside as `audit.N.jsonl` before it passes `max_bytes` (0: never).
    pub fn open_rotating(path: &Path, window: Duration, max_bytes: u64) -> Result<AuditLog, AuditError> {
        Self::open_leasing(path, window, max_bytes, (LEASE_IDLE, LEASE_MAX))
    }

    /// [`AuditLog::open_rotating`], keeping the head lock for `lease.0` after the latest
    /// line and `lease.1` in all.
    fn open_leasing(
        path: &Path,
        window: Duration,
        max_bytes: u64,
        lease: (Duration, Duration),
    ) -> Result<AuditLog, AuditError> {
        let err = |source| AuditError { path: path.display().to_string(), source };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        // It holds arguments and results (file contents among them): the operator's alone,
        // like the tokens, whatever the umask says.
        let writer = chain::Writer::open(path).map_err(err)?;
        // The head file is read as a file the host does not trust: one that is not a
        // regular file of a head's size stops the start, naming it and the limit.
        let head_file = chain::head_path(path);
        if let Err(e) = cheng_policy::hostfile::read(&head_file, chain::HEAD_CAP)
            && !e.is_not_found()
        {
            let source = std::io::Error::new(std::io::ErrorKind::InvalidData, e.reason());
            return Err(AuditError { path: head_file.display().to_string(), source });
        }
        let head = chain::open_head(path).map_err(err)?;
        let head_for_sync = chain::open_head(path).map_err(err)?;
        let leased = Arc::new((Mutex::new(false), Condvar::new()));
        let inner = Arc::new(AuditInner {
            path: path.to_path_buf(),
            writer: Mutex::new(Appender { chain: writer, lease: None }),
            head,
            head_for_sync,
            max_bytes,
            dirty: AtomicBool::new(false),
            synced_seq: std::sync::atomic::AtomicU64::new(0),
            stop: AtomicBool::new(false),
            healthy: AtomicBool::new(true),
            leased: leased.clone(),
            lease_idle: lease.0,
            lease_max: lease.1,
        });
        // The lease thread: it lets go of the head lock when the writer is idle or has
        // held it long enough. It sleeps on `leased` without holding the log, so the
        // log is dropped when its last handle is.
        let weak = Arc::downgrade(&inner);
        std::thread::Builder::new()
            .name("cheng-audit-lease".into())
            .spawn(move || {
                loop {
                    {
                        let (flag, wake) = &*leased;
                        let mut taken = flag.lock().unwrap_or_else(|p| p.into_inner());
                        while !*taken {
                            if weak.strong_count() == 0 {
                                return;
                            }
                            taken =
                                wake.wait_timeout(taken, Duration::from_secs(1)).unwrap_or_else(|p| p.into_inner()).0;
                        }
                        *taken = false;
                    }
                    loop {
                        let Some(inner) = weak.upgrade() else { return };
                        let wait = inner.release_when_due();
                        drop(inner);
                        match wait {
                            Some(d) => std::thread::sleep(d),
                            None => break,
                        }
                    }
                }
            })
            .map_err(err)?;
        // The one background thread: once a window it makes everything appended durable.
        let weak = Arc::downgrade(&inner);
        let window = window.max(Duration::from_millis(1));
        std::thread::Builder::new()
            .name("cheng-audit-sync".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(window);
                    let Some(inner) = weak.upgrade() else { break };
                    if inner.stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if inner.dirty.swap(false, Ordering::AcqRel)
                        && let Err(e) = inner.sync()
                    {
                        inner.healthy.store(false, Ordering::Release);
                        tracing::error!(target: "cheng::records", "cannot sync the audit log: {e}");
                    }
                }
            })
            .map_err(err)?;
        Ok(AuditLog { inner })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Make everything appended so far durable now, and the head file with it (at
    /// shutdown).
    pub fn flush(&self) -> Result<(), AuditError> {
        self.inner.sync().map_err(|source| AuditError { path: self.inner.path.display().to_string(), source })
    }

    /// [`AuditLog::flush`] for a process about to end, from wherever it ends: a signal
    /// handler's task, a panic hook (where the panicking thread may hold the writer: it
    /// is waited for at most `patience`, then the flush is given up).
    pub fn flush_at_exit(&self, patience: Duration) -> Result<(), AuditError> {
        let err = |source| AuditError { path: self.inner.path.display().to_string(), source };
        let until = Instant::now() + patience;
        let w = loop {
            match self.inner.writer.try_lock() {
                Ok(w) => break w,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < until => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(std::sync::TryLockError::WouldBlock) => {
                    return Err(err(std::io::Error::new(
                        std::io::ErrorKind::WouldBlock,
                        "the writer stayed busy: the head file was not brought up to date",
                    )));
                }
            }
        };
        self.inner.sync_from(w).map_err(err)
    }

    /// Whether the last write (or sync) of the log succeeded.
    pub fn is_healthy(&self) -> bool {
        self.inner.healthy.load(Ordering::Acquire)
    }

    /// Append a record: written to the file (handed to the OS) before this returns.
    pub fn append(&self, record: &CallRecord) -> Result<(), AuditError> {
        append_line(&self.inner, record)
    }

    /// Records matching `filter`, oldest first; a call's final line wins over its
    /// `running` line.
    pub fn read(&self, filter: &Filter) -> Result<Vec<CallRecord>, AuditError> {
        read_log(&self.inner.path, filter)
    }
}

impl AuditInner {
    /// Let go of the head lock if the writer has been idle or has held it long enough;
    /// otherwise how long until it may be due.
    fn release_when_due(&self) -> Option<Duration> {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let (since, last) = w.lease?;
        let due = (last + self.lease_idle).min(since + self.lease_max);
        let now = Instant::now();
        if now < due {
            return Some(due - now);
        }
        w.release(&self.head);
        None
    }

    /// Chain `object` and write it under the head lock, taking the lock when this writer
    /// does not hold it already.
    fn append(&self, w: &mut Appender, object: &[u8]) -> std::io::Result<()> {
        if w.lease.is_none() {
            rustix::fs::flock(&self.head, rustix::fs::FlockOperation::LockExclusive)?;
            // Other writers only write under the lock: what they did is seen here, once.
            if let Err(e) = w.chain.catch_up(&self.path) {
                let _ = rustix::fs::flock(&self.head, rustix::fs::FlockOperation::Unlock);
                return Err(e);
            }
            let now = Instant::now();
            w.lease = Some((now, now));
            let (flag, wake) = &*self.leased;
            *flag.lock().unwrap_or_else(|p| p.into_inner()) = true;
            wake.notify_one();
        }
        match w.chain.append(&self.path, object, self.max_bytes) {
            Ok(()) => {
                if let Some((_, last)) = &mut w.lease {
                    *last = Instant::now();
                }
                Ok(())
            }
            Err(e) => {
                w.release(&self.head);
                Err(e)
            }
        }
    }
}

fn append_line(inner: &AuditInner, record: &CallRecord) -> Result<(), AuditError> {
    let mut object = Vec::with_capacity(256);
    serde_json::to_writer(&mut object, record).unwrap_or_default();
    let mut w = inner.writer.lock().unwrap_or_else(|p| p.into_inner());
    // Chained and written under the head file's lock, shared with every other process
    // writing this log (held while this writer is busy, see the module's docs); one
    // `write` per line, so O_APPEND lands it whole.
    let written = inner.append(&mut w, &object);
    drop(w);
    inner.healthy.store(written.is_ok(), Ordering::Release);
    written.map_err(|source| AuditError { path: inner.path.display().to_string(), source })?;
    inner.dirty.store(true, Ordering::Release);
    Ok(())
}

/// Read records from the log at `path` and its rotated files, oldest first (see
/// [`AuditLog::read`]). A line that does not parse as a record (cut by a crash, a
/// rotation's seal) is skipped.
pub fn read_log(path: &Path, filter: &Filter) -> Result<Vec<CallRecord>, AuditError> {
    let mut order: Vec<String> = Vec::new();
    let mut latest: HashMap<String, CallRecord> = HashMap::new();
    let mut opened = Vec::new();
    for p in chain::files(path) {
        opened.push(File::open(&p).map_err(|source| AuditError { path: p.display().to_string(), source })?);
    }
    for line in opened.into_iter().flat_map(|f| BufReader::new(f).lines()) {
        let Ok(line) = line else { continue };
        let Ok(rec) = serde_json::from_str::<CallRecord>(&line) else { continue };
        if !latest.contains_key(&rec.id) {
            order.push(rec.id.clone());
        }
        let mut rec = rec;
        if let Some(prev) = latest.remove(&rec.id) {
            // A final line wins over its running line (whichever reached the file first),
            // and keeps the arguments only the running line carries.
            let (fin, run) = if rec.status == Status::Running { (prev, rec) } else { (rec, prev) };
            rec = fin;
            if rec.arguments.is_null() {
                rec.arguments = run.arguments;
            }
        }
        latest.insert(rec.id.clone(), rec);
    }
    let mut out: Vec<CallRecord> = order
        .into_iter()
        .filter_map(|id| latest.remove(&id))
        .filter(|r| filter.status.is_none_or(|s| r.status == s))
        .filter(|r| filter.tool.as_ref().is_none_or(|t| &r.tool == t))
        .filter(|r| filter.run.as_ref().is_none_or(|run| &r.run == run))
        .collect();
    if let Some(n) = filter.last {
        let skip = out.len().saturating_sub(n);
        out.drain(..skip);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn status_names_are_the_serialized_ones() {
        for st in [Status::Ok, Status::Error, Status::Denied, Status::Running] {
            assert_eq!(serde_json::to_value(st).unwrap(), st.as_str());
        }
    }

    fn rec(id: &str, status: Status, tool: &str) -> CallRecord {
        CallRecord {
            id: id.into(),
            run: "r".into(),
            role: "developer".into(),
            workspace: String::new(),
            tool: tool.into(),
            arguments: serde_json::json!({"path": "x"}),
            status,
            preview: String::new(),
            duration_ms: 1.0,
            result: serde_json::json!({}),
            error_kind: None,
            approvals: vec![],
            denials: vec![],
            requests: vec![],
            unasked: vec![],
            started_at_ms: 0,
        }
    }

    #[test]
    fn latest_line_wins_and_filters_apply() {
        let dir = tempfile_dir("fold");
        let log = AuditLog::open(&dir.join("audit.jsonl"), Duration::from_millis(5)).unwrap();
        // A running line, then its final line.
        log.append(&rec("a", Status::Running, "read_file")).unwrap();
        log.append(&rec("b", Status::Denied, "write_file")).unwrap();
        log.append(&rec("a", Status::Ok, "read_file")).unwrap();
        let all = log.read(&Filter::default()).unwrap();
        // One record per call, in first-seen order, the final status kept.
        assert_eq!(
            all.iter().map(|r| (r.id.as_str(), r.status)).collect::<Vec<_>>(),
            [("a", Status::Ok), ("b", Status::Denied)]
        );
        // Filters by status and tool; last N.
        assert_eq!(log.read(&Filter { status: Some(Status::Denied), ..Default::default() }).unwrap().len(), 1);
        assert_eq!(log.read(&Filter { tool: Some("read_file".into()), ..Default::default() }).unwrap()[0].id, "a");
        assert_eq!(log.read(&Filter { last: Some(1), ..Default::default() }).unwrap()[0].id, "b");
        // A torn last line (a writer killed mid-write, under the head lock as every
        // writer writes) is skipped, not fatal.
        {
            let head = chain::open_head(&dir.join("audit.jsonl")).unwrap();
            let _lock = chain::HeadLock::take(&head).unwrap();
            std::fs::OpenOptions::new()
                .append(true)
                .open(dir.join("audit.jsonl"))
                .unwrap()
                .write_all(b"{\"seq\":4,\"prev\":\"ab")
                .unwrap();
        }
        assert_eq!(log.read(&Filter::default()).unwrap().len(), 2);
        // The next record starts on a line of its own and chains to the last whole line;
        // the fragment is counted, never part of the chain.
        log.append(&rec("d", Status::Ok, "read_file")).unwrap();
        assert_eq!(log.read(&Filter::default()).unwrap().len(), 3);
        let v = verify(&dir.join("audit.jsonl")).unwrap();
        assert!(v.ok, "{v:?}");
        assert_eq!((v.links, v.fragments, v.last_seq), (4, 1, 4));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_busy_writer_keeps_the_head_lock_and_lets_go_when_idle() {
        use rustix::fs::{FlockOperation, flock};
        let dir = tempfile_dir("lease");
        let path = dir.join("audit.jsonl");
        let never = Duration::from_secs(3600);
        // Two writers with open files of their own, as two processes have.
        let a =
            AuditLog::open_leasing(&path, never, 0, (Duration::from_millis(300), Duration::from_millis(600))).unwrap();
        let b = AuditLog::open(&path, never).unwrap();
        let probe = chain::open_head(&path).unwrap();
        a.append(&rec("a1", Status::Ok, "think")).unwrap();
        // `a` keeps the lock after its line...
        assert!(flock(&probe, FlockOperation::NonBlockingLockExclusive).is_err(), "the lock is held after a line");
        // ...and `b` gets its turn when `a` lets go, then `a` chains after `b`'s line.
        let t = Instant::now();
        b.append(&rec("b1", Status::Ok, "think")).unwrap();
        let waited = t.elapsed();
        assert!(waited >= Duration::from_millis(100) && waited < Duration::from_secs(5), "{waited:?}");
        a.append(&rec("a2", Status::Ok, "think")).unwrap();
        b.append(&rec("b2", Status::Ok, "think")).unwrap();
        let v = verify(&path).unwrap();
        assert!(v.ok && v.last_seq == 4, "{v:?}");
        // Idle, each lets go: the lock is free again.
        let t = Instant::now();
        while flock(&probe, FlockOperation::NonBlockingLockExclusive).is_err() {
            assert!(t.elapsed() < Duration::from_secs(5), "the lock was never let go");
            std::thread::sleep(Duration::from_millis(5));
        }
        flock(&probe, FlockOperation::Unlock).unwrap();
        // A flush lets go of the lock at once (the head file is written under it), and
        // the head file then holds the latest link.
        a.append(&rec("a3", Status::Ok, "think")).unwrap();
        assert!(flock(&probe, FlockOperation::NonBlockingLockExclusive).is_err());
        a.flush().unwrap();
        flock(&probe, FlockOperation::NonBlockingLockExclusive).expect("a flush lets go of the lock");
        flock(&probe, FlockOperation::Unlock).unwrap();
        assert_eq!(chain::read_head(&probe).map(|h| h.last.seq), Some(5));
        drop((a, b));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_flush_at_exit_brings_the_head_up_even_after_a_panic_in_the_writer() {
        let dir = tempfile_dir("exit");
        let path = dir.join("audit.jsonl");
        let never = Duration::from_secs(3600);
        let log = AuditLog::open(&path, never).unwrap();
        log.append(&rec("a", Status::Running, "think")).unwrap();
        log.append(&rec("a", Status::Ok, "think")).unwrap();
        // A thread panics holding the writer (the mutex is poisoned).
        let inner = log.inner.clone();
        let _ = std::thread::spawn(move || {
            let _w = inner.writer.lock().unwrap();
            panic!("a panic while appending");
        })
        .join();
        assert!(log.inner.writer.is_poisoned());
        let head = chain::open_head(&path).unwrap();
        assert_eq!(chain::read_head(&head), None, "nothing synced before the flush");
        log.flush_at_exit(Duration::from_secs(1)).unwrap();
        let h = chain::read_head(&head).unwrap();
        assert_eq!((h.version, h.first.map(|f| f.seq), h.last.seq), (2, Some(1), 2));
        assert!(verify(&path).unwrap().ok);
        // Held by another thread for longer than the patience: given up, said so.
        let inner = log.inner.clone();
        let (held, release) = (std::sync::Arc::new(std::sync::Barrier::new(2)), std::sync::mpsc::channel::<()>());
        let h2 = held.clone();
        let t = std::thread::spawn(move || {
            let _w = inner.writer.lock().unwrap_or_else(|p| p.into_inner());
            h2.wait();
            let _ = release.1.recv();
        });
        held.wait();
        assert!(log.flush_at_exit(Duration::from_millis(20)).is_err());
        release.0.send(()).unwrap();
        t.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_head_file_that_breaks_the_rule_stops_the_start() {
        let dir = tempfile_dir("badhead");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.jsonl");
        std::fs::write(dir.join("audit.head"), vec![b'x'; 65 << 10]).unwrap();
        let e = AuditLog::open(&path, DEFAULT_COMMIT_WINDOW).err().unwrap().to_string();
        assert!(e.contains("audit.head") && e.contains("over the 64 KiB limit for an audit head file"), "{e}");
        std::fs::remove_file(dir.join("audit.head")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", dir.join("audit.head")).unwrap();
        let e = AuditLog::open(&path, DEFAULT_COMMIT_WINDOW).err().unwrap().to_string();
        assert!(e.contains("audit.head") && e.contains("character device"), "{e}");
        // Control: a head file of a head's size opens.
        std::fs::remove_file(dir.join("audit.head")).unwrap();
        std::fs::write(dir.join("audit.head"), "").unwrap();
        assert!(AuditLog::open(&path, DEFAULT_COMMIT_WINDOW).is_ok());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn large_results_keep_head_tail_size_and_digest() {
        let big = serde_json::json!({"content": "x".repeat(RESULT_WHOLE_BYTES + 10)});
        let stored = stored_result(&big);
        // Truncated, with the whole size and digest.
        assert_eq!(stored["truncated"], true);
        assert_eq!(stored["size"], big.to_string().len());
        assert_eq!(stored["sha256"], hex::encode(Sha256::digest(big.to_string().as_bytes())));
        assert_eq!(stored["head"].as_str().unwrap().len(), RESULT_EDGE_BYTES);
        // Small results are kept as they are.
        let small = serde_json::json!({"a": 1});
        assert_eq!(stored_result(&small), small);
    }

    fn tempfile_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("cheng-audit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }
}
