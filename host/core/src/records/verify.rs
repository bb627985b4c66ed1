//! `cheng records verify`: walk the audit log's chain, rotated files first, and report
//! either that it holds, or the first place it breaks, by sequence number.
//!
//! What each break means:
//! - **edited**: a line's text no longer hashes to the `prev` the next line recorded
//!   (the named record, or the next one's `prev`, was changed — whitespace added at
//!   either end of a line too: lines are hashed exactly as written), or a record does
//!   not hash to what a head holds for it;
//! - **removed**: sequence numbers jump (the records between are gone), or the chain
//!   does not start at record 1 (its first records, or its oldest files, are gone:
//!   nothing removes old records), or not at the first link a head names;
//! - **inserted**: a line that is not a link of the chain (a blank line among them), or
//!   a sequence number seen already;
//! - **reordered**: a sequence number lower than the one before it;
//! - **truncated**: the chain ends before the link a head holds (the tail was cut).
//!
//! The heads: the log's own head file (`audit.head`, written after each group commit,
//! so only lines of the last commit window are not covered by it), and with `--expect`
//! one the operator kept elsewhere, which also catches a log rewritten together with its
//! head file. Either may be of format 1 (the latest link alone) or 2 (the first link as
//! well); the walk says which it checked.
//!
//! Lines that are not JSON and start like a line the host writes (`{"seq":`) are
//! fragments of writes cut short (a full disk, a kill): counted, never part of the
//! chain. Lines before the chain's first link are a log written before the chain
//! existed: counted as unchained.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::chain::{self, Head, Link};

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
    /// The log ends before a head's link.
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
    /// The line number in `file` (0: the break is not at a line, such as a cut tail).
    pub line: usize,
    /// What was found, in a sentence.
    pub message: String,
}

/// A head the log was checked against, as the walk reports it.
#[derive(Debug, Clone, Serialize)]
pub struct HeadSeen {
    /// Where it was read.
    pub file: PathBuf,
    /// Its format: 1, the latest link alone; 2, the first link as well.
    pub version: u8,
    /// The first link's sequence number (format 2).
    pub first_seq: Option<u64>,
    /// The latest link's sequence number.
    pub seq: u64,
}

impl HeadSeen {
    fn of(head: &Head, file: &Path) -> HeadSeen {
        HeadSeen {
            file: file.to_path_buf(),
            version: head.version,
            first_seq: head.first.map(|f| f.seq),
            seq: head.last.seq,
        }
    }
}

/// The outcome of a walk.
#[derive(Debug, Clone, Serialize)]
pub struct Verification {
    /// True when the chain holds from record 1 to its last link, and matches both ends
    /// of every head it was checked against.
    pub ok: bool,
    /// Chained lines walked (records' lines and seals).
    pub links: u64,
    /// The first link's sequence number (1 unless the start of the chain is gone).
    pub first_seq: u64,
    /// SHA-256 of the first link's line.
    pub first_sha256: String,
    /// The last link.
    pub last_seq: u64,
    /// SHA-256 of the last link's line: what `--head` prints.
    pub last_sha256: String,
    /// The link the head file holds, when it holds one.
    pub head_seq: Option<u64>,
    /// The head file, when there is one with a head in it.
    pub head: Option<HeadSeen>,
    /// The head given with `--expect`.
    pub expected: Option<HeadSeen>,
    /// Lines that are not JSON (fragments of cut writes).
    pub fragments: u64,
    /// Lines before the chain's first link (written before the chain existed).
    pub unchained: u64,
    /// The files walked, oldest first.
    pub files: Vec<PathBuf>,
    /// What the walk checked, in sentences: how lines are hashed, which heads of which
    /// format.
    pub checked: Vec<String>,
    /// The first break, when there is one.
    pub problem: Option<Problem>,
}

impl Verification {
    /// The head the walk found (the first and last links), as `--head` prints it and
    /// `--expect` reads it.
    pub fn found_head(&self) -> Head {
        let link = |seq: u64, hash: &str| Link {
            seq,
            hash: hex::decode(hash).ok().and_then(|h| h.try_into().ok()).unwrap_or(chain::GENESIS),
        };
        Head::new(link(self.first_seq, &self.first_sha256), link(self.last_seq, &self.last_sha256))
    }
}

#[derive(serde::Deserialize)]
struct LinkFields {
    seq: u64,
    prev: String,
}

/// What one line of the log is.
enum Kind {
    /// A link of the chain: its `seq`, and its `prev` when that is a hash.
    Link(u64, Option<[u8; 32]>),
    /// JSON without a place in the chain (a record written before the chain existed).
    Unchained,
    /// An empty line (between two newlines).
    Blank,
    /// Not JSON: starts like a chained line (a write cut short), starts like JSON, or
    /// neither.
    NotJson { chained_start: bool, json_start: bool },
}

/// Walk the log at `path` (`audit.jsonl`; its rotated files beside it and its head file
/// are found by name).
pub fn verify(path: &Path) -> std::io::Result<Verification> {
    verify_expecting(path, None)
}

/// [`verify`], and check the log against `expected`, a head the operator kept elsewhere
/// (read from the file named with it): the chain must start at its first link and hold
/// its latest link.
pub fn verify_expecting(path: &Path, expected: Option<(&Head, &Path)>) -> std::io::Result<Verification> {
    let head_file = chain::head_path(path);
    // The head first: it is written after the log is synced, so a log read after it
    // holds at least the head's link.
    let head = match chain::read_head_file(&head_file)? {
        None => None,
        Some(text) if text.trim_ascii().is_empty() => None,
        Some(text) => Some(chain::parse_head(&text).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} holds no head of a known format", head_file.display()),
            )
        })?),
    };
    let files = chain::files(path);
    let mut checked =
        vec!["each line hashed exactly as written (whitespace included); the chain must start at record 1".to_string()];
    let describe = |what: &str, h: &Head, file: &Path| match h.first {
        Some(f) => format!(
            "{what} {} (format {}): first link {}, latest link {}",
            file.display(),
            h.version,
            f.seq,
            h.last.seq
        ),
        None => format!(
            "{what} {} (format {}): latest link {} only (no first link: written before heads kept one)",
            file.display(),
            h.version,
            h.last.seq
        ),
    };
    match &head {
        Some(h) => checked.push(describe("head file", h, &head_file)),
        None => checked.push(format!(
            "no head in {}: a cut tail is not caught (keep `verify --head` elsewhere and check with --expect)",
            head_file.display()
        )),
    }
    if let Some((h, file)) = expected {
        checked.push(describe("expected head", h, file));
    }
    let mut v = Verification {
        ok: true,
        links: 0,
        first_seq: 0,
        first_sha256: hex::encode(chain::GENESIS),
        last_seq: 0,
        last_sha256: hex::encode(chain::GENESIS),
        head_seq: head.map(|h| h.last.seq),
        head: head.as_ref().map(|h| HeadSeen::of(h, &head_file)),
        expected: expected.map(|(h, f)| HeadSeen::of(h, f)),
        fragments: 0,
        unchained: 0,
        files: files.clone(),
        checked,
        problem: None,
    };
    // Every line first (so a break can be told apart: a missing record that turns up
    // later was moved, not removed), then the walk.
    struct Entry {
        file: usize,
        line: usize,
        kind: Kind,
        hash: [u8; 32],
    }
    let mut entries = Vec::new();
    for (f, file) in files.iter().enumerate() {
        let text = std::fs::read(file)?;
        let mut pieces = text.split(|&b| b == b'\n').enumerate().peekable();
        while let Some((i, line)) = pieces.next() {
            let last_piece = pieces.peek().is_none();
            // What follows the last newline: nothing, or a write cut short (or still
            // under way).
            if last_piece && line.is_empty() {
                break;
            }
            let kind = if line.is_empty() {
                Kind::Blank
            } else {
                match serde_json::from_slice::<serde_json::Value>(line) {
                    Ok(value) if !last_piece => match serde_json::from_value::<LinkFields>(value) {
                        Ok(l) => Kind::Link(l.seq, hex::decode(&l.prev).ok().and_then(|p| p.try_into().ok())),
                        Err(_) => Kind::Unchained,
                    },
                    _ => {
                        const START: &[u8] = b"{\"seq\":";
                        Kind::NotJson {
                            chained_start: line.starts_with(START) || START.starts_with(line),
                            json_start: line.starts_with(b"{"),
                        }
                    }
                }
            };
            entries.push(Entry { file: f, line: i + 1, kind, hash: chain::hash(line) });
        }
    }
    let seq_at = |e: &Entry| match e.kind {
        Kind::Link(s, _) => Some(s),
        _ => None,
    };
    let seen_later = |from: usize, seq: u64| entries[from..].iter().any(|e| seq_at(e) == Some(seq));
    let count = |seq: u64| entries.iter().filter(|e| seq_at(e) == Some(seq)).count();
    let mut first: Option<Link> = None;
    let mut last: Option<Link> = None;
    let mut before_chain: Option<[u8; 32]> = None;
    for (j, e) in entries.iter().enumerate() {
        let at = |kind, seq, message: String| Problem { kind, seq, file: files[e.file].clone(), line: e.line, message };
        let after = last.map_or(0, |l| l.seq);
        let (seq, prev) = match e.kind {
            Kind::Link(seq, prev) => (seq, prev),
            Kind::Unchained if last.is_none() => {
                v.unchained += 1;
                before_chain = Some(e.hash);
                continue;
            }
            Kind::NotJson { chained_start, json_start }
                if (last.is_some() && chained_start) || (last.is_none() && json_start) =>
            {
                v.fragments += 1;
                continue;
            }
            Kind::Blank => {
                v.problem = Some(at(
                    Break::Inserted,
                    after + 1,
                    format!("a blank line stands after record {after}: the host never writes one"),
                ));
                break;
            }
            Kind::Unchained | Kind::NotJson { .. } => {
                v.problem = Some(at(
                    Break::Inserted,
                    after + 1,
                    format!("a line without a place in the chain stands after record {after}"),
                ));
                break;
            }
        };
        let problem = match last {
            None if seq != 1 && seen_later(j, 1) => {
                Some(at(Break::Reordered, 1, format!("record {seq} comes before record 1")))
            }
            None if seq != 1 => Some(at(
                Break::Removed,
                1,
                format!(
                    "the chain starts at record {seq}: records 1 to {} are missing (nothing removes old records)",
                    seq.saturating_sub(1)
                ),
            )),
            None => {
                let expected = before_chain.unwrap_or(chain::GENESIS);
                (prev != Some(expected))
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
        // Each head's latest link: the record it names must hash to it.
        let differs = |h: &Head| h.last.seq == seq && h.last.hash != e.hash;
        let name = match (head.as_ref().filter(|h| differs(h)), expected.filter(|(h, _)| differs(h))) {
            (Some(_), _) => Some("its head file".to_string()),
            (None, Some((_, file))) => Some(format!("the expected head ({})", file.display())),
            (None, None) => None,
        };
        if let Some(name) = name {
            v.problem = Some(at(Break::Edited, seq, format!("record {seq} does not hash to what {name} holds for it")));
            break;
        }
        v.links += 1;
        let link = Link { seq, hash: e.hash };
        first.get_or_insert(link);
        last = Some(link);
    }
    if let Some(f) = first {
        v.first_seq = f.seq;
        v.first_sha256 = hex::encode(f.hash);
    }
    if let Some(l) = last {
        v.last_seq = l.seq;
        v.last_sha256 = hex::encode(l.hash);
    }
    // Each head's ends: the chain starts at its first link, and reaches its latest.
    let log_end = files.last().cloned().unwrap_or_else(|| path.to_path_buf());
    let heads = head
        .iter()
        .map(|h| (h, "its head file".to_string()))
        .chain(expected.iter().map(|(h, file)| (*h, format!("the expected head ({})", file.display()))));
    for (h, name) in heads {
        if v.problem.is_some() {
            break;
        }
        let problem = |kind, seq, line, message| Problem { kind, seq, file: log_end.clone(), line, message };
        if let (Some(want), Some(got)) = (h.first, first)
            && want != got
        {
            v.problem = Some(if want.seq < got.seq {
                problem(
                    Break::Removed,
                    want.seq,
                    0,
                    format!(
                        "the chain starts at record {}, but {name} names record {} as its first",
                        got.seq, want.seq
                    ),
                )
            } else {
                problem(
                    Break::Edited,
                    want.seq.min(got.seq),
                    0,
                    format!(
                        "the chain's first record ({}) is not the first link {name} holds (record {})",
                        got.seq, want.seq
                    ),
                )
            });
        } else if h.last.seq > v.last_seq {
            v.problem = Some(problem(
                Break::Truncated,
                v.last_seq + 1,
                0,
                format!(
                    "the log ends at record {}, but {name} holds record {}: the tail was cut",
                    v.last_seq, h.last.seq
                ),
            ));
        }
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
    fn the_start_of_the_chain_is_anchored() {
        // Control: an untouched log starts at record 1, as its head file says (format 2).
        let (_d, path) = log(60);
        let v = verify(&path).unwrap();
        assert!(v.ok, "{v:?}");
        let head = v.head.clone().unwrap();
        assert_eq!((head.version, head.first_seq, v.first_seq), (2, Some(1), 1));

        // The first lines of the oldest file removed.
        let first = chain::rotated(&path, 1);
        let mut l = lines(&first);
        let now_first = seq(&l[2]);
        l.drain(..2);
        write(&first, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Removed, 1), "{}", p.message);
        assert!(p.message.contains(&format!("starts at record {now_first}")), "{}", p.message);

        // The oldest rotated file removed, and the head file gone with it: still caught.
        let (_d, path) = log(60);
        std::fs::remove_file(chain::rotated(&path, 1)).unwrap();
        std::fs::remove_file(chain::head_path(&path)).unwrap();
        let v = verify(&path).unwrap();
        let p = v.problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Removed, 1), "{}", p.message);
        assert!(v.head.is_none());

        // The first two records swapped: reordered, not removed.
        let (_d, path) = log(60);
        let first = chain::rotated(&path, 1);
        let mut l = lines(&first);
        l.swap(0, 1);
        write(&first, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Reordered, 1), "{}", p.message);
    }

    #[test]
    fn whitespace_and_blank_lines_are_caught() {
        // Trailing whitespace on a record in the middle: its hash changed.
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let victim = seq(&l[1]);
        l[1].push(' ');
        write(&path, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Edited, victim), "{}", p.message);

        // Leading whitespace on the last record: caught against the head file.
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let last = l.len() - 1;
        let victim = seq(&l[last]);
        l[last].insert(0, '\t');
        write(&path, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Edited, victim), "{}", p.message);

        // A carriage return (a CRLF line end) on one record.
        let (_d, path) = log(60);
        let mut l = lines(&path);
        let victim = seq(&l[0]);
        l[0].push('\r');
        write(&path, &l);
        let p = verify(&path).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Edited, victim), "{}", p.message);

        // A blank line, a line of spaces, and whitespace after the last newline.
        for extra in ["", "   "] {
            let (_d, path) = log(60);
            let mut l = lines(&path);
            let before = seq(&l[0]);
            l.insert(1, extra.to_string());
            write(&path, &l);
            let p = verify(&path).unwrap().problem.unwrap();
            assert_eq!((p.kind, p.seq), (Break::Inserted, before + 1), "{extra:?}: {}", p.message);
        }
        let (_d, path) = log(60);
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(b" \t");
        std::fs::write(&path, text).unwrap();
        assert_eq!(verify(&path).unwrap().problem.unwrap().kind, Break::Inserted);

        // Control: a write cut short (a prefix of a chained line) is a fragment, not a break.
        let (_d, path) = log(60);
        let mut text = std::fs::read(&path).unwrap();
        text.extend_from_slice(b"{\"seq\":999,\"prev\":\"0f");
        std::fs::write(&path, text).unwrap();
        let v = verify(&path).unwrap();
        assert!(v.ok && v.fragments == 1, "{v:?}");
    }

    #[test]
    fn a_head_kept_elsewhere_catches_a_rewritten_head_file() {
        let (_d, path) = log(60);
        let saved = verify(&path).unwrap().found_head();
        let elsewhere = Path::new("/kept/head.json");
        // Control: the log as it was holds against it.
        let v = verify_expecting(&path, Some((&saved, elsewhere))).unwrap();
        assert!(v.ok, "{v:?}");
        assert_eq!(v.expected.as_ref().map(|e| (e.version, e.first_seq, e.seq)), Some((2, Some(1), saved.last.seq)));

        // The last two records cut and the head file rewritten to match: the log's own
        // head is fooled, the one kept elsewhere is not.
        let mut l = lines(&path);
        l.truncate(l.len() - 2);
        write(&path, &l);
        let forged = verify(&path).unwrap();
        std::fs::write(chain::head_path(&path), serde_json::to_string(&forged.found_head()).unwrap()).unwrap();
        assert!(verify(&path).unwrap().ok);
        let p = verify_expecting(&path, Some((&saved, elsewhere))).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Truncated, saved.last.seq - 1), "{}", p.message);
        assert!(p.message.contains("/kept/head.json"), "{}", p.message);

        // A head whose first link is not this chain's (a start rewritten since it was
        // kept).
        let (_d, path) = log(60);
        let theirs = Head::new(Link { seq: 1, hash: [7; 32] }, saved.last);
        let p = verify_expecting(&path, Some((&theirs, elsewhere))).unwrap().problem.unwrap();
        assert_eq!((p.kind, p.seq), (Break::Edited, 1), "{}", p.message);
    }

    #[test]
    fn a_head_of_format_1_is_read_and_said_so() {
        let (_d, path) = log(60);
        let v = verify(&path).unwrap();
        std::fs::write(
            chain::head_path(&path),
            format!("{{\"seq\":{},\"sha256\":\"{}\"}}\n", v.last_seq, v.last_sha256),
        )
        .unwrap();
        let v = verify(&path).unwrap();
        assert!(v.ok, "{v:?}");
        assert_eq!(v.head.as_ref().map(|h| (h.version, h.first_seq)), Some((1, None)));
        assert!(v.checked.iter().any(|c| c.contains("(format 1)")), "{:?}", v.checked);
        // The start is checked all the same.
        let mut l = lines(&chain::rotated(&path, 1));
        l.remove(0);
        write(&chain::rotated(&path, 1), &l);
        assert_eq!(verify(&path).unwrap().problem.unwrap().kind, Break::Removed);
        // A head file that holds no head is an error, not "no head".
        std::fs::write(chain::head_path(&path), "{\"seq\": \"x\"}").unwrap();
        assert!(verify(&path).unwrap_err().to_string().contains("no head of a known format"));
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
