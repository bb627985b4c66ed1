//! Approvals from another terminal on the same machine: `cheng approvals` lists what
//! waits, `cheng approve ID` and `cheng decline ID` answer, by talking to the running
//! `cheng serve` processes of a state directory. Each server listens on its own Unix
//! socket, `<state dir>/approvals/<pid>.sock` — several stdio servers (one per client
//! window) can share a state directory — and the CLI asks every live one. The sockets
//! are the operator's alone: directory 0700, socket 0600, every connection's peer must
//! be the same user, and never a process a host started or anything it forked — see
//! `peer.rs` for how that is told (its namespaces, its ancestry, its cgroup). A
//! refused connection is closed unanswered and recorded in `<state dir>/access.jsonl`.
//! The broker's rules hold — the first answer wins, a late one changes nothing — and
//! each answer is recorded as `socket:uid <n>`.
//!
//! The protocol is one JSON line each way: `{"op": "list"}` answers with the pending
//! requests; `{"op": "answer", "id": "…", "answer": {…}}` (an
//! [`cheng_host::approvals::Answer`]: `decision`, and `scope`, `tier`, `hosts`,
//! `prefix`, `every_workspace`, `expires_in_ms`, `message`; or the older `"approve":
//! true`) with `{"result": "applied" | "too_late" | "unknown"}` or `{"error": …}` for
//! an answer the card does not offer; `{"op": "answer_run", "run": "…", "answer": {…}}`
//! answers every request of one run, with `{"answered": [ids]}`. Answers here are the
//! operator's: they may pick "always" and full access.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;

use cheng_host::Host;
use cheng_host::approvals::{Answer, Answered, Route};

/// The directory of the servers' sockets in `state_dir`.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("approvals")
}

/// Longest request line accepted.
const MAX_LINE: usize = 64 << 10;

/// Listen on this process's socket until `shutdown` fires; the socket file is removed
/// at the end. Sockets left by servers that died are removed first.
pub async fn serve(host: Host, state_dir: &Path, shutdown: CancellationToken) -> std::io::Result<()> {
    let dir = dir(state_dir);
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
    // SAFETY: getuid has no failure mode and no memory effects.
    let me = unsafe { libc::getuid() };
    // The directory itself, not a link to one, and the operator's own.
    let meta = std::fs::symlink_metadata(&dir)?;
    if !meta.is_dir() || std::os::unix::fs::MetadataExt::uid(&meta) != me {
        return Err(std::io::Error::other(format!(
            "{} is not a directory owned by this user; remove it and start again",
            dir.display()
        )));
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    for stale in sockets(&dir) {
        // Only a socket nobody listens on is stale (a busy server's backlog is not).
        if let Err(e) = UnixStream::connect(&stale).await
            && e.kind() == std::io::ErrorKind::ConnectionRefused
        {
            let _ = std::fs::remove_file(&stale);
        }
    }
    let at = dir.join(format!("{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&at);
    let listener = UnixListener::bind(&at)?;
    std::fs::set_permissions(&at, std::fs::Permissions::from_mode(0o600))?;
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.cancelled() => break,
        };
        let Ok((stream, _)) = accepted else { continue };
        let cred = stream.peer_cred().ok();
        let uid = cred.map(|c| c.uid());
        let pid = cred.and_then(|c| c.pid()).unwrap_or(0);
        let verdict = match uid == Some(me) {
            false => Err(format!("a connection from another user ({uid:?}) refused")),
            true => {
                let hosts = host_pids(&dir);
                super::peer::vet(std::os::fd::AsRawFd::as_raw_fd(&stream), pid, &hosts).map_err(|r| r.to_string())
            }
        };
        if let Err(why) = verdict {
            tracing::warn!(target: "cheng::denials", pid, "approvals socket: {why}");
            super::http::append_access(
                &state_dir.join("access.jsonl"),
                &json!({"remote": format!("approvals socket, pid {pid}"), "status": "refused", "reason": why}),
            );
            continue;
        }
        let host = host.clone();
        tokio::spawn(async move {
            let _ = handle(host, stream, me).await;
        });
    }
    let _ = std::fs::remove_file(&at);
    Ok(())
}

/// The pids of the servers with a socket in `dir` (this one included).
fn host_pids(dir: &Path) -> Vec<i32> {
    let mut pids: Vec<i32> = sockets(dir).iter().filter_map(|p| p.file_stem()?.to_str()?.parse().ok()).collect();
    pids.push(std::process::id() as i32);
    pids
}

/// The socket files in `dir`, oldest name first.
fn sockets(dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .collect();
    found.sort();
    found
}

async fn handle(host: Host, stream: UnixStream, uid: u32) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut line = String::new();
    let mut reader = BufReader::new(read).take(MAX_LINE as u64);
    // A client that connects and says nothing does not hold a task forever.
    tokio::time::timeout(std::time::Duration::from_secs(10), reader.read_line(&mut line))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "no request within 10 s"))??;
    let reply = match serde_json::from_str::<Value>(&line) {
        Ok(req) => match req["op"].as_str() {
            Some("list") => json!({"pending": host.approvals().pending()}),
            Some("answer") => match (req["id"].as_str(), answer_of(&req)) {
                (Some(id), Ok(answer)) => {
                    match host.approvals().answer_with(id, answer, &format!("socket:uid {uid}"), Route::Operator) {
                        Answered::Applied => json!({"result": "applied"}),
                        Answered::TooLate => json!({"result": "too_late"}),
                        Answered::Unknown => json!({"result": "unknown"}),
                        Answered::Invalid(why) => json!({"error": why}),
                    }
                }
                (None, _) => json!({"error": "answer needs \"id\""}),
                (_, Err(why)) => json!({"error": why}),
            },
            Some("answer_run") => match (req["run"].as_str(), answer_of(&req)) {
                (Some(run), Ok(answer)) => {
                    let by = format!("socket:uid {uid}");
                    json!({"answered": host.approvals().answer_run(run, &answer, &by, Route::Operator)})
                }
                (None, _) => json!({"error": "answer_run needs \"run\""}),
                (_, Err(why)) => json!({"error": why}),
            },
            _ => json!({"error": "op must be \"list\", \"answer\" or \"answer_run\""}),
        },
        Err(e) => json!({"error": format!("not a JSON request: {e}")}),
    };
    write.write_all(format!("{reply}\n").as_bytes()).await
}

/// The answer in a request: `answer` (an [`Answer`]), or the older `approve: bool`.
fn answer_of(req: &Value) -> Result<Answer, String> {
    if let Some(a) = req.get("answer") {
        return serde_json::from_value(a.clone()).map_err(|e| format!("\"answer\" is not an answer: {e}"));
    }
    match req["approve"].as_bool() {
        Some(true) => Ok(Answer::yes()),
        Some(false) => Ok(Answer::no()),
        None => Err("answer needs \"answer\" (or \"approve\": true|false)".into()),
    }
}

/// Why the CLI's request could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens on the socket.
    #[error("no `cheng serve` is running for this state directory ({0}): start one, or pass its --state-dir")]
    NotRunning(String),
    /// The exchange failed.
    #[error("the approvals socket: {0}")]
    Io(#[from] std::io::Error),
    /// The answer was not JSON.
    #[error("the approvals socket answered something that is not JSON: {0}")]
    Garbled(String),
}

/// Send one request to every live server of `state_dir` and merge the replies: the
/// pending requests of all of them; for an answer, the server that knew the id.
pub async fn request(state_dir: &Path, req: &Value) -> Result<Value, ClientError> {
    let dir = dir(state_dir);
    let mut replies = Vec::new();
    for at in sockets(&dir) {
        let Ok(mut stream) = UnixStream::connect(&at).await else { continue };
        stream.write_all(format!("{req}\n").as_bytes()).await?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).await?;
        replies.push(serde_json::from_str::<Value>(&line).map_err(|_| ClientError::Garbled(line))?);
    }
    if replies.is_empty() {
        return Err(ClientError::NotRunning(dir.display().to_string()));
    }
    if let Some(e) = replies.iter().find(|r| r.get("error").is_some()) {
        return Ok(e.clone());
    }
    if req["op"] == "answer_run" {
        let answered: Vec<Value> =
            replies.iter().flat_map(|r| r["answered"].as_array().cloned().unwrap_or_default()).collect();
        return Ok(json!({"answered": answered}));
    }
    if req["op"] == "list" {
        let pending: Vec<Value> =
            replies.iter().flat_map(|r| r["pending"].as_array().cloned().unwrap_or_default()).collect();
        return Ok(json!({"pending": pending}));
    }
    // Ids are unique across servers: at most one knows it.
    Ok(replies.into_iter().find(|r| r["result"] != "unknown").unwrap_or_else(|| json!({"result": "unknown"})))
}
