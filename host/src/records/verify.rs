//! `cheng records verify`: walk the audit log's chain, rotated files first, and report
//! either that it holds, or the first place it breaks, by sequence number.
//!
//! What each break means:
//! - **edited**: a line's text no longer hashes to the `prev` the next line recorded
//!   (the named record, or the next one's `prev`, was changed);
//! - **removed**: sequence numbers jump (the records between are gone);
//! - **inserted**: a line that is not a link of the chain, or a sequence number
//!   seen already;
//! - **reordered**: a sequence number lower than the one before it;
//! - **truncated**: the chain ends before the link the head file holds (the tail
//!   was cut); the head file is written after each group commit, so only lines of
//!   the last commit window are not covered by it.
//!
//! Lines that are not JSON at all are fragments of writes cut short (a full disk, a
//! kill): they are counted, never part of the chain. Lines before the chain's first
//! link are a log written before the chain existed: counted as unchained.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::chain::{self, Link};

/// What a break in the chain is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Break {
    /// A record's text changed.
    Edited,
    /// Records are missing.
    Removed,
    /// A line that is not the next link.
    Inserted,
    /// Records out of order.
    Reordered,
    /// The log ends before the head file's link.
    Truncated,
}

/// Where the chain breaks first.
#[derive(Debug, Clone, Serialize)]
pub struct Problem {
    /// What kind of break.
    pub kind: Break,
    /// The sequence number it concerns (the edited record, the first missing one, …).
    pub seq: u64,
    /// The file, and the line in it (from 1), where the walk noticed.
    pub file: PathBuf,
    /// The line number in `file`.
    pub line: usize,
    /// What was found, in a sentence.
    pub message: String,
}

/// The outcome of a walk.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// True when the chain holds from its first link to its last, and reaches the head.
    pub ok: bool,
    /// Chained lines walked (records' lines and seals).
    pub links: u64,
    /// The first link's sequence number (above 1 when older files were removed).
    pub first_seq: u64,
    /// The last link.
    pub last_seq: u64,
    /// SHA-256 of the last link's line: what `--head` prints.
    pub last_sha256: String,
    /// The link the head file holds, when it holds one.
    pub head_seq: Option<u64>,
    /// Lines that are not JSON (fragments of cut writes).
    pub fragments: u64,
    /// Lines before the chain's first link (written before the chain existed).
    pub unchained: u64,
    /// The files walked, oldest first.
    pub files: Vec<PathBuf>,
    /// The first break, when there is one.
    pub problem: Option<Problem>,
}

#[derive(serde::Deserialize)]
struct LinkFields {
    seq: u64,
    prev: String,
}

/// Walk the log at `path` (`audit.jsonl`; its rotated files beside it and its head file
/// are found by name).
pub fn verify(path: &Path) -> std::io::Result<Verification> {
    let files = chain::files(path);
    let head = match std::fs::File::open(chain::head_path(path)) {
        Ok(f) => chain::read_head(&f),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let mut v = Verification {
        ok: true,
        links: 0,
        first_seq: 0,
        last_seq: 0,
        last_sha256: hex::encode(chain::GENESIS),
        head_seq: head.map(|h| h.seq),
        fragments: 0,
        unchained: 0,
        files: files.clone(),
        problem: None,
    };
    // Every line first (so a break can be told apart: a missing record that turns up
    // later was moved, not removed), then the walk.
    struct Entry {
        file: usize,
        line: usize,
        link: Option<(u64, Option<[u8; 32]>)>,
        hash: [u8; 32],
    }
    let mut entries = Vec::new();
    for (f, file) in files.iter().enumerate() {
        let text = std::fs::read(file)?;
        for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = chain::content(raw);
            if line.is_empty() {
                continue;
            }
            let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
                v.fragments += 1;
                continue;
            };
            let link = serde_json::from_value::<LinkFields>(value)
                .ok()
                .map(|l| (l.seq, hex::decode(&l.prev).ok().and_then(|p| <[u8; 32]>::try_from(p).ok())));
            entries.push(Entry { file: f, line: i + 1, link, hash: chain::hash(line) });
        }
    }
    let seen_later = |from: usize, seq: u64| entries[from..].iter().any(|e| e.link.is_some_and(|(s, _)| s == seq));
    let count = |seq: u64| entries.iter().filter(|e| e.link.is_some_and(|(s, _)| s == seq)).count();
    let mut last: Option<Link> = None;
    let mut before_chain: Option<[u8; 32]> = None;
    for (j, e) in entries.iter().enumerate() {
        let at = |kind, seq, message: String| Problem { kind, seq, file: files[e.file].clone(), line: e.line, message };
        let Some((seq, prev)) = e.link else {
            if last.is_none() {
                v.unchained += 1;
                before_chain = Some(e.hash);
                continue;
            }
            let after = last.map_or(0, |l| l.seq);
            v.problem = Some(at(
                Break::Inserted,
                after + 1,
                format!("a line without a place in the chain stands after record {after}"),
            ));
            break;
        };
        let problem = match last {
            None => {
                v.first_seq = seq;
                let expected = before_chain.unwrap_or(chain::GENESIS);
                (seq == 1 && prev != Some(expected))
                    .then(|| at(Break::Edited, 1, "the first record's prev is not the chain's start".to_string()))
            }
            Some(l) if seq == l.seq + 1 && prev == Some(l.hash) => None,
            Some(l) if seq == l.seq + 1 => Some(at(
                Break::Edited,
                l.seq,
                format!("record {} was edited: its text no longer hashes to the prev record {seq} holds", l.seq),
            )),
            Some(l) if seq > l.seq + 1 && seen_later(j, l.seq + 1) => {
                Some(at(Break::Reordered, l.seq + 1, format!("record {seq} comes before record {}", l.seq + 1)))
            }
            Some(l) if seq > l.seq + 1 => {
                Some(at(Break::Removed, l.seq + 1, format!("records {} to {} are missing", l.seq + 1, seq - 1)))
            }
            Some(l) if count(seq) > 1 => {
                Some(at(Break::Inserted, seq, format!("record {seq} appears again after record {}", l.seq)))
            }
            Some(l) => Some(at(Break::Reordered, seq, format!("record {seq} comes after record {}", l.seq))),
        };
        if problem.is_some() {
            v.problem = problem;
            break;
        }
        if let Some(h) = head
            && h.seq == seq
            && h.hash != e.hash
        {
            v.problem =
                Some(at(Break::Edited, seq, format!("record {seq} does not hash to what the head file holds for it")));
            break;
        }
        v.links += 1;
        last = Some(Link { seq, hash: e.hash });
    }
    if let Some(l) = last {
        v.last_seq = l.seq;
        v.last_sha256 = hex::encode(l.hash);
    }
    if v.problem.is_none()
        && let Some(h) = head
        && h.seq > v.last_seq
    {
        let file = files.last().cloned().unwrap_or_else(|| path.to_path_buf());
        v.problem = Some(Problem {
            kind: Break::Truncated,
            seq: v.last_seq + 1,
            file,
            line: 0,
            message: format!(
                "the log ends at record {}, but its head file holds record {}: the tail was cut",
                v.last_seq, h.seq
            ),
        });
    }
    v.ok = v.problem.is_none();
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{AuditLog, CallRecord, Status};

    fn record(i: usize) -> CallRecord {
        CallRecord {
            id: format!("call-{i}"),
            run: "r".into(),
            role: "developer".into(),
            workspace: String::new(),
            tool: "think".into(),
            arguments: serde_json::json!({"thought": "x".repeat(i % 50)}),
            status: Status::Ok,
            preview: String::new(),
            duration_ms: 1.0,
            result: serde_json::json!({}),
            error_kind: None,
            approvals: Vec::new(),
            denials: Vec::new(),
            requests: Vec::new(),
            unasked: Vec::new(),
            started_at_ms: 0,
        }
    }

    /// A log of `n` records rotated every ~2 KiB, synced (so the head file holds the
    /// last link), in a fresh directory.
    fn log(n: usize) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::open_rotating(&path, std::time::Duration::from_secs(60), 2048).unwrap();
        for i in 0..n {
            log.append(&record(i)).unwrap();
        }
        log.flush().unwrap();
        (dir, path)
    }

    fn lines(p: &Path) -> Vec<String> {
        std::fs::read_to_string(p).unwrap().lines().map(str::to_string).collect()
    }

    fn write(p: &Path, lines: &[String]) {
        std::fs::write(p, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    }

    fn seq(line: &str) -> u64 {
        serde_json::from_str::<serde_json::Value>(line).unwrap()["seq"].as_u64().unwrap()
    }

    #[test]
    fn an_untouched_rotated_log_verifies() {
        let (_d, path) = log(60);
        let v = verify(&path).unwrap();
        assert!(v.ok, "{v:?}");
        assert!(v.files.len() >= 4, "rotated into several files: {:?}", v.files);
        // 60 records and one seal per rotated file, numbered without a gap.
        assert_eq!(v.links, 60 + (v.files.len() as u64 - 1));
        assert_eq!((v.first_seq, v.last_seq, v.head_seq), (1, v.links, Some(v.links)));
        // Readers see every record once, across the files, in order.
        let recs = crate::records::read_log(&path, &Default::default()).unwrap();
        assert_eq!(recs.len(), 60);
        assert_eq!(recs[59].id, "call-59");
    }

    #[test]
    fn each_kind_of_tampering_is_named_with_its_record() {
        // Edited: one character of a record in a rotated file.
        let (_d, path) = log(60);
        let first = chain::rotated(&path, 1);
        let mut l = lines(&first);
        let victim = seq(&l[2]);
        l[2] = l[2].replace("call-", "kall-");
        write(&first, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Edited, victim), "{}", p.message);

        // Removed: a line from the middle of the current file.
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let gone = seq(&l[1]);
        l.remove(1);
        write(&path, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Removed, gone), "{}", p.message);

        // Reordered: two lines swapped.
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let second = seq(&l[1]);
        l.swap(1, 2);
        write(&path, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Reordered, second), "{}", p.message);

        // Inserted: a line copied in again, and a record with no place in the chain.
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let copied = l[0].clone();
        l.insert(2, copied.clone());
        write(&path, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Inserted, seq(&copied)), "{}", p.message);
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let forged = serde_json::to_string(&record(999)).unwrap();
        l.insert(1, forged);
        write(&path, &l);
        assert_eq!(verify(&path).unwrap().problem.unwrap().kind, Break::Inserted);

        // Truncated: the last lines cut after the head file recorded them.
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let kept = seq(&l[0]);
        l.truncate(1);
        write(&path, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Truncated, kept + 1), "{}", p.message);

        // A whole rotated file removed from the middle: its records are missing.
        let (_d, path) = log(60);
        let second = chain::rotated(&path, 2);
        let missing = seq(&lines(&second)[0]);
        std::fs::remove_file(&second).unwrap();
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Removed, missing), "{}", p.message);

        // The last record edited: caught against the head file.
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let last = l.len() - 1;
        l[last] = l[last].replace("call-", "kall-");
        let edited = seq(&l[last]);
        write(&path, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Edited, edited), "{}", p.message);
    }

    #[test]
    fn a_second_writer_continues_the_chain_across_its_rotations() {
        // Two logs open on one file (as two processes would have): each sees what the
        // other wrote, rotations included, and the chain stays one.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let a = AuditLog::open_rotating(&path, std::time::Duration::from_secs(60), 2048).unwrap();
        let b = AuditLog::open_rotating(&path, std::time::Duration::from_secs(60), 2048).unwrap();
        for i in 0..80 {
            let w = if i % 3 == 0 { &a } else { &b };
            w.append(&record(i)).unwrap();
        }
        a.flush().unwrap();
        b.flush().unwrap();
        let v = verify(&path).unwrap();
        assert!(v.ok, "{v:?}");
        assert_eq!(crate::records::read_log(&path, &Default::default()).unwrap().len(), 80);
        assert_eq!(v.head_seq, Some(v.last_seq));
    }
}
