//! The audit log's hash chain, and where a writer stands on it.
//!
//! Every line the host writes starts with `"seq"` (its place in the log, from 1, never
//! reset by rotation) and `"prev"` (the SHA-256, in hex, of the line before it exactly
//! as written — every byte between the two newlines, whitespace included — 64 zeros
//! before the first). Editing, removing, inserting or reordering a line breaks the chain
//! at that place; the host never writes a blank line or a line with whitespace at either
//! end, so one found in the log was put there.
//!
//! Several processes append to one log (a server and `cheng call`s on the same state
//! directory), so a line is chained and written under an exclusive `flock` on the head
//! file, `audit.head`, which never moves. The head file also anchors both ends of the
//! chain as of the last group commit, written after the log itself is synced:
//! `{"version":2,"seq":…,"sha256":…,"first":{"seq":1,"sha256":…}}` — the latest link
//! (a log whose tail was cut is caught against it) and the first (the chain starts
//! there). A head file of format 1 (`{"seq","sha256"}` alone, written before the first
//! link was kept) is read as it is and rewritten as format 2 at the next commit.
//!
//! Rotation (`[records] max_bytes`): when the next line would take the file past the
//! size, the writer appends a *seal* line (`{"seq","prev","sealed":"audit.N.jsonl"}`),
//! renames the file to that name, and starts a new one whose first line chains to the
//! seal. Rotated files are numbered from 1, oldest first, and none is ever removed: a
//! chain that does not start at record 1 lost its start. A writer in another process
//! sees the seal (its file grew behind its back) and reopens the log by name.
//!
//! Should rotation ever drop old files (retention), it must first append a chained
//! record of what it drops — the files, and the last link they hold — and move the head
//! file's first link past them; `verify` would then accept a chain starting after that
//! link only where such a record stands. Until then there is no such record, and no
//! start but record 1 is accepted.

use std::fs::{File, OpenOptions};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// `prev` of the first line.
pub const GENESIS: [u8; 32] = [0; 32];

/// One link of the chain: a line's place and its hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// The line's sequence number (0: no line yet).
    pub seq: u64,
    /// SHA-256 of the line as written, newline excluded.
    pub hash: [u8; 32],
}

impl Link {
    /// Before the first line.
    pub const START: Link = Link { seq: 0, hash: GENESIS };
}

/// SHA-256 of a line's bytes (without its newline).
pub fn hash(line: &[u8]) -> [u8; 32] {
    Sha256::digest(line).into()
}

/// The name of the `n`-th rotated file of the log at `path`: `audit.jsonl` → `audit.3.jsonl`.
pub fn rotated(path: &Path, n: u64) -> PathBuf {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{n}"),
    };
    path.with_file_name(name)
}

/// The rotated files of the log at `path`, oldest first.
pub fn rotated_files(path: &Path) -> Vec<(u64, PathBuf)> {
    let Some(dir) = path.parent() else { return Vec::new() };
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let ext = path.extension().map(|e| format!(".{}", e.to_string_lossy())).unwrap_or_default();
    let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name.strip_prefix(&format!("{stem}."))?.strip_suffix(ext.as_str())?.parse::<u64>().ok()?;
            Some((n, path.with_file_name(name)))
        })
        .collect();
    out.sort();
    out
}

/// Every file of the log at `path`, oldest first: its rotated files, then the log
/// itself when it exists.
pub fn files(path: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = rotated_files(path).into_iter().map(|(_, p)| p).collect();
    if path.exists() {
        files.push(path.to_path_buf());
    }
    files
}

/// The head file of the log at `path` (`audit.jsonl` → `audit.head`).
pub fn head_path(path: &Path) -> PathBuf {
    path.with_extension("head")
}

/// `{"seq":S,"prev":"<hex>",` + the rest of `object` (a JSON object's text) + newline,
/// after a newline of its own when `fresh_line` (a cut write may have left a fragment).
pub fn chained(link: Link, object: &[u8], fresh_line: bool) -> Vec<u8> {
    let mut line = Vec::with_capacity(object.len() + 112);
    if fresh_line {
        line.push(b'\n');
    }
    line.extend_from_slice(b"{\"seq\":");
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut n = link.seq;
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    line.extend_from_slice(&digits[at..]);
    line.extend_from_slice(b",\"prev\":\"");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for b in link.hash {
        line.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
    }
    line.push(b'"');
    match object.strip_prefix(b"{") {
        Some(rest) if rest.trim_ascii_start() != b"}" => {
            line.push(b',');
            line.extend_from_slice(rest);
        }
        _ => line.push(b'}'),
    }
    line.push(b'\n');
    line
}

/// The line's own bytes: `chained`'s output without the newline that ends it and the
/// one it may start with (and nothing else: a line is hashed exactly as written).
pub fn content(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_prefix(b"\n").unwrap_or(line)
}

/// The `seq` a line carries, when it is a chained line.
pub fn seq_of(line: &[u8]) -> Option<u64> {
    #[derive(serde::Deserialize)]
    struct Seq {
        seq: u64,
        #[allow(dead_code)]
        prev: String,
    }
    serde_json::from_slice::<Seq>(line).ok().map(|s| s.seq)
}

/// The last complete (newline-ended), non-empty line of `file`, read backwards in
/// blocks. A fragment after the last newline (a cut write) is not a line. Each byte is
/// read and searched once, however long the line (a record may hold a result of a
/// mebibyte on one line).
pub fn last_line(file: &mut File) -> std::io::Result<Option<Vec<u8>>> {
    const BLOCK: u64 = 64 << 10;
    let mut start = file.metadata()?.len();
    // Where the candidate line ends (the offset of its newline), once the last newline
    // is found; and the candidate's bytes read so far, in blocks from last to first.
    let mut line_end: Option<u64> = None;
    let mut parts: Vec<Vec<u8>> = Vec::new();
    let joined = |first: &[u8], parts: &[Vec<u8>]| {
        let mut line = first.to_vec();
        for p in parts.iter().rev() {
            line.extend_from_slice(p);
        }
        line
    };
    while start > 0 {
        let from = start.saturating_sub(BLOCK);
        let mut block = vec![0; (start - from) as usize];
        file.seek(SeekFrom::Start(from))?;
        file.read_exact(&mut block)?;
        // The part of the block still to search: up to the candidate's newline.
        let mut hi = block.len();
        while let Some(i) = memchr::memrchr(b'\n', &block[..hi]) {
            let at = from + i as u64;
            match line_end {
                // The last newline: what follows it is a fragment.
                None => {}
                // A newline before the candidate: the candidate is whole.
                Some(end) if at + 1 < end => return Ok(Some(joined(&block[i + 1..hi], &parts))),
                // An empty line is no line: look before it.
                Some(_) => {}
            }
            line_end = Some(at);
            parts.clear();
            hi = i;
        }
        if line_end.is_some() {
            block.truncate(hi);
            parts.push(block);
        }
        start = from;
    }
    // The first line of the file.
    Ok(match line_end {
        Some(end) if end > 0 => Some(joined(&[], &parts)),
        _ => None,
    })
}

/// The chain's latest link as the files at `path` hold it: the last line of the log,
/// or of its newest rotated file when the log is empty. A log written before the chain
/// (lines without `seq`) continues from its last line's hash. The line is taken as
/// written (see [`content`]).
pub fn tip(path: &Path) -> std::io::Result<Link> {
    let mut candidates = vec![path.to_path_buf()];
    candidates.extend(rotated_files(path).into_iter().rev().map(|(_, p)| p));
    for p in candidates {
        let mut f = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if let Some(line) = last_line(&mut f)? {
            return Ok(Link { seq: seq_of(&line).unwrap_or(0), hash: hash(&line) });
        }
    }
    Ok(Link::START)
}

/// Open the log at `path` for appending (created `0600`).
pub fn open_log(path: &Path) -> std::io::Result<File> {
    let file = OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    use std::os::unix::fs::PermissionsExt as _;
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    Ok(file)
}

/// The writer's side: the open log, the latest link it knows, and the file's size and
/// identity when it learnt it.
pub struct Writer {
    /// The log, opened for appending.
    pub file: File,
    /// The latest link.
    pub tip: Link,
    /// The log's size after the latest line this writer knows of.
    end: u64,
    /// Start the next line on a fresh line (a write was cut short).
    fresh_line: bool,
}

impl Writer {
    /// Open the log at `path` and find the chain's tip.
    pub fn open(path: &Path) -> std::io::Result<Writer> {
        let file = open_log(path)?;
        Ok(Writer { file, tip: Link::START, end: u64::MAX, fresh_line: false })
    }

    /// Once each time the head lock is taken: make sure `tip` is the chain's real tip.
    /// The fast path is one `fstat`: the file is as this writer left it. Otherwise
    /// another process wrote (or rotated: the file this writer holds was sealed and
    /// renamed, or a write of its was cut), so the log is reopened by name when it moved
    /// and the tip read back from the files.
    pub fn catch_up(&mut self, path: &Path) -> std::io::Result<()> {
        let held = rustix::fs::fstat(&self.file)?;
        if u64::try_from(held.st_size).ok() == Some(self.end) {
            return Ok(());
        }
        let moved = match std::fs::metadata(path) {
            Ok(m) => m.ino() != held.st_ino || m.dev() != held.st_dev,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
            Err(e) => return Err(e),
        };
        if moved {
            self.file = open_log(path)?;
        }
        self.tip = tip(path)?;
        let len = self.file.metadata()?.len();
        // A file that does not end with a newline ends in a fragment of a cut write.
        self.fresh_line = len > 0 && {
            let mut last = [0u8; 1];
            let mut f = File::open(path)?;
            f.seek(SeekFrom::Start(len - 1))?;
            f.read_exact(&mut last)?;
            last[0] != b'\n'
        };
        self.end = len;
        Ok(())
    }

    /// Under the head lock, caught up since it was taken: chain `object` (a JSON
    /// object's text) and write it in one `write`, rotating first when `max_bytes` (0:
    /// never) says so.
    pub fn append(&mut self, path: &Path, object: &[u8], max_bytes: u64) -> std::io::Result<()> {
        if max_bytes > 0 && self.end > 0 && self.end + object.len() as u64 + 112 > max_bytes {
            self.rotate(path)?;
        }
        self.write_line(object)
    }

    fn write_line(&mut self, object: &[u8]) -> std::io::Result<()> {
        let next = Link { seq: self.tip.seq + 1, hash: self.tip.hash };
        let line = chained(next, object, self.fresh_line);
        match self.file.write_all(&line) {
            Ok(()) => {
                self.tip = Link { seq: next.seq, hash: hash(content(&line)) };
                self.end += line.len() as u64;
                self.fresh_line = false;
                Ok(())
            }
            Err(e) => {
                // Part of the line may stand in the file: the next one starts on a
                // fresh line and re-reads the tip.
                self.fresh_line = true;
                self.end = u64::MAX;
                Err(e)
            }
        }
    }

    /// Seal the log and move it aside as the next rotated file; start a new one.
    fn rotate(&mut self, path: &Path) -> std::io::Result<()> {
        let n = rotated_files(path).last().map_or(1, |(n, _)| n + 1);
        let aside = rotated(path, n);
        let name = aside.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        let seal = serde_json::to_vec(&serde_json::json!({ "sealed": name })).unwrap_or_default();
        self.write_line(&seal)?;
        self.file.sync_data()?;
        std::fs::rename(path, &aside)?;
        self.file = open_log(path)?;
        if let Some(dir) = path.parent() {
            // The rename and the new file survive a crash with the directory synced.
            File::open(dir)?.sync_all()?;
        }
        self.end = 0;
        Ok(())
    }
}

/// An exclusive `flock` on the head file, released on drop.
pub struct HeadLock<'a>(&'a File);

impl<'a> HeadLock<'a> {
    /// Wait for the lock.
    pub fn take(head: &'a File) -> std::io::Result<HeadLock<'a>> {
        rustix::fs::flock(head, rustix::fs::FlockOperation::LockExclusive)?;
        Ok(HeadLock(head))
    }
}

impl Drop for HeadLock<'_> {
    fn drop(&mut self) {
        let _ = rustix::fs::flock(self.0, rustix::fs::FlockOperation::Unlock);
    }
}

/// Open (create) the head file of the log at `path`: never blocking on the open, and
/// refused unless it is a regular file.
pub fn open_head(path: &Path) -> std::io::Result<File> {
    cheng_policy::hostfile::open_lock(&head_path(path), HEAD_CAP.kind).map_err(host_file_error)
}

/// The head file format this host writes: 2, the first link and the latest.
pub const HEAD_VERSION: u8 = 2;

/// The most bytes a head file may hold (it holds one line of about 200).
pub const HEAD_CAP: cheng_policy::hostfile::Limit = cheng_policy::hostfile::AUDIT_HEAD;

/// What a head file holds: the chain's first link and its latest, as of a group commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// Its format: 1, the latest link alone (written before the first link was kept);
    /// 2, both.
    pub version: u8,
    /// The chain's first link (format 2).
    pub first: Option<Link>,
    /// The latest link.
    pub last: Link,
}

impl Head {
    /// A head of this host's format.
    pub fn new(first: Link, last: Link) -> Head {
        Head { version: HEAD_VERSION, first: Some(first), last }
    }
}

/// As JSON, in this order: `{"version":2,"seq":…,"sha256":…,"first":{"seq":…,"sha256":…}}`
/// (the latest link's fields at the top, as format 1 had them).
impl serde::Serialize for Head {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(serde::Serialize)]
        struct LinkText {
            seq: u64,
            sha256: String,
        }
        #[derive(serde::Serialize)]
        struct HeadText {
            version: u8,
            seq: u64,
            sha256: String,
            #[serde(skip_serializing_if = "Option::is_none")]
            first: Option<LinkText>,
        }
        HeadText {
            version: self.version,
            seq: self.last.seq,
            sha256: hex::encode(self.last.hash),
            first: self.first.map(|f| LinkText { seq: f.seq, sha256: hex::encode(f.hash) }),
        }
        .serialize(serializer)
    }
}

/// A head's text, in either format (whitespace around it is no matter: `cheng records
/// verify --head` prints it pretty); `None` when `text` is no head. Format 1 has no
/// `first` (nor, as the host wrote it, a `version`); format 2 has both.
pub fn parse_head(text: &[u8]) -> Option<Head> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct LinkText {
        seq: u64,
        sha256: String,
    }
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct HeadText {
        version: Option<u8>,
        seq: u64,
        sha256: String,
        first: Option<LinkText>,
    }
    let link = |seq: u64, sha256: &str| -> Option<Link> {
        let hash: [u8; 32] = hex::decode(sha256).ok()?.try_into().ok()?;
        Some(Link { seq, hash })
    };
    let h: HeadText = serde_json::from_slice(text).ok()?;
    let last = link(h.seq, &h.sha256)?;
    match (h.version, h.first) {
        (None | Some(1), None) => Some(Head { version: 1, first: None, last }),
        (Some(HEAD_VERSION), Some(f)) => Some(Head::new(link(f.seq, &f.sha256)?, last)),
        _ => None,
    }
}

/// The head file at `head_path` (or a head kept elsewhere), read as a file the host
/// does not trust ([`cheng_policy::hostfile`]): a regular file of at most [`HEAD_CAP`],
/// opened without blocking (a FIFO or device put in its place must neither hang nor
/// flood the host). `Ok(None)` when there is none; the error names the file and the
/// limit it broke.
pub fn read_head_file(head_path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match cheng_policy::hostfile::read(head_path, HEAD_CAP) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(host_file_error(e)),
    }
}

/// A host file's refusal as an I/O error, its message kept (it names the file).
fn host_file_error(e: cheng_policy::hostfile::HostFileError) -> std::io::Error {
    use cheng_policy::hostfile::HostFileError;
    let kind = match &e {
        HostFileError::Io { source, .. } => source.kind(),
        HostFileError::NotFound { .. } => std::io::ErrorKind::NotFound,
        _ => std::io::ErrorKind::InvalidData,
    };
    std::io::Error::new(kind, e.to_string())
}

/// The head as the (open) head file holds it.
pub fn read_head(mut head: &File) -> Option<Head> {
    let mut text = Vec::new();
    head.seek(SeekFrom::Start(0)).ok()?;
    head.take(HEAD_CAP.bytes + 1).read_to_end(&mut text).ok()?;
    parse_head(&text)
}

/// The chain's first link as the files at `path` hold it: the first chained line of the
/// oldest file that has one.
pub fn first_link(path: &Path) -> std::io::Result<Option<Link>> {
    use std::io::BufRead as _;
    for p in files(path) {
        let file = match File::open(&p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        let mut reader = std::io::BufReader::new(file);
        let mut line = Vec::new();
        loop {
            line.clear();
            if reader.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            // A fragment at the end is no line.
            let Some(body) = line.strip_suffix(b"\n") else { break };
            if let Some(seq) = seq_of(body) {
                return Ok(Some(Link { seq, hash: hash(body) }));
            }
        }
    }
    Ok(None)
}

/// Under the head lock: record `link` in the head file of the log at `path` (and sync
/// it) unless the file holds a later one already. The first link is kept from the head
/// file, or read from the log when the head file has none (a new log, or a head of
/// format 1). Call after the log is synced up to `link`.
pub fn write_head(mut head: &File, path: &Path, link: Link) -> std::io::Result<()> {
    let held = read_head(head);
    if link.seq == 0 || held.is_some_and(|h| h.last.seq >= link.seq) {
        return Ok(());
    }
    let first = match held.and_then(|h| h.first) {
        Some(f) => f,
        None => match first_link(path)? {
            Some(f) => f,
            None if link.seq == 1 => link,
            // The log holds no chained line although one was synced: moved away under
            // this writer. Nothing true can be written.
            None => return Ok(()),
        },
    };
    let mut text = serde_json::to_vec(&Head::new(first, link)).map_err(std::io::Error::other)?;
    text.push(b'\n');
    // Written over the old text (never shorter: sequence numbers only grow), then cut
    // to its length, so a reader never finds the file empty.
    head.seek(SeekFrom::Start(0))?;
    head.write_all(&text)?;
    head.set_len(text.len() as u64)?;
    head.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chained_line_is_the_object_with_seq_and_prev_first() {
        let l = chained(Link { seq: 7, hash: [0xab; 32] }, br#"{"id":"x"}"#, false);
        let v: serde_json::Value = serde_json::from_slice(&l).unwrap();
        assert_eq!(v["seq"], 7);
        assert_eq!(v["prev"], "ab".repeat(32));
        assert_eq!(v["id"], "x");
        assert!(l.ends_with(b"\n") && !l.starts_with(b"\n"));
        assert!(chained(Link::START, b"{}", true).starts_with(b"\n{\"seq\":0"));
        assert_eq!(seq_of(content(&l)), Some(7));
    }

    #[test]
    fn the_last_line_skips_a_fragment_and_spans_blocks() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.jsonl");
        let long = "x".repeat(200_000);
        std::fs::write(&p, format!("one\n{long}\npartial")).unwrap();
        assert_eq!(last_line(&mut File::open(&p).unwrap()).unwrap().unwrap(), long.as_bytes());
        std::fs::write(&p, "only\n").unwrap();
        assert_eq!(last_line(&mut File::open(&p).unwrap()).unwrap().unwrap(), b"only");
        std::fs::write(&p, "").unwrap();
        assert_eq!(last_line(&mut File::open(&p).unwrap()).unwrap(), None);
        std::fs::write(&p, "a\nb\n\n").unwrap();
        assert_eq!(last_line(&mut File::open(&p).unwrap()).unwrap().unwrap(), b"b");
        std::fs::write(&p, "no newline").unwrap();
        assert_eq!(last_line(&mut File::open(&p).unwrap()).unwrap(), None);
        std::fs::write(&p, "\n\n\n").unwrap();
        assert_eq!(last_line(&mut File::open(&p).unwrap()).unwrap(), None);
        // Lines and fragments of every length around the block size, first lines and
        // empty lines between them.
        for len in [1, 2, 65_535, 65_536, 65_537, 131_072, 300_001] {
            let line = "y".repeat(len);
            for (text, want) in [
                (format!("{line}\n"), Some(&line)),
                (format!("a\n{line}\n"), Some(&line)),
                (format!("{line}\n\n\n{}", "z".repeat(len)), Some(&line)),
                (format!("{line}\nb\n"), None),
            ] {
                std::fs::write(&p, &text).unwrap();
                let got = last_line(&mut File::open(&p).unwrap()).unwrap();
                match want {
                    Some(w) => assert_eq!(got.as_deref(), Some(w.as_bytes()), "{len}"),
                    None => assert_eq!(got.as_deref(), Some(&b"b"[..]), "{len}"),
                }
            }
        }
    }

    #[test]
    fn heads_of_both_formats_parse_and_others_do_not() {
        let h = Head::new(Link { seq: 1, hash: [1; 32] }, Link { seq: 9, hash: [9; 32] });
        let text = serde_json::to_string(&h).unwrap();
        assert!(text.starts_with(r#"{"version":2,"seq":9,"sha256":"0909"#), "{text}");
        assert_eq!(parse_head(text.as_bytes()), Some(h));
        // Pretty, as `verify --head` prints it.
        assert_eq!(parse_head(serde_json::to_string_pretty(&h).unwrap().as_bytes()), Some(h));
        let v1 = format!("{{\"seq\":9,\"sha256\":\"{}\"}}\n", "09".repeat(32));
        assert_eq!(parse_head(v1.as_bytes()), Some(Head { version: 1, first: None, last: h.last }));
        for bad in [
            "".to_string(),
            "{}".to_string(),
            // Format 2 without its first link, format 1 with one, a format not known.
            text.replace(",\"first\"", ",\"other\""),
            v1.replace('}', &format!(",\"first\":{{\"seq\":1,\"sha256\":\"{}\"}}}}", "01".repeat(32))),
            text.replace("\"version\":2", "\"version\":3"),
            v1.replace("09", "0g"),
        ] {
            assert_eq!(parse_head(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn the_head_keeps_its_first_link_and_never_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.jsonl");
        let first = chained(Link { seq: 1, hash: GENESIS }, br#"{"id":"a"}"#, false);
        let second = chained(Link { seq: 2, hash: hash(content(&first)) }, br#"{"id":"b"}"#, false);
        std::fs::write(&p, [first.clone(), second.clone()].concat()).unwrap();
        let head = open_head(&p).unwrap();
        let l1 = Link { seq: 1, hash: hash(content(&first)) };
        let l2 = Link { seq: 2, hash: hash(content(&second)) };
        // A head of format 1 becomes format 2, its first link read from the log.
        std::fs::write(head_path(&p), format!("{{\"seq\":1,\"sha256\":\"{}\"}}", hex::encode(l1.hash))).unwrap();
        write_head(&head, &p, l2).unwrap();
        assert_eq!(read_head(&head), Some(Head::new(l1, l2)));
        // An older link changes nothing; the first link is kept from the head file.
        write_head(&head, &p, l1).unwrap();
        assert_eq!(read_head(&head), Some(Head::new(l1, l2)));
        std::fs::write(&p, &second).unwrap();
        let l3 = Link { seq: 3, hash: [3; 32] };
        write_head(&head, &p, l3).unwrap();
        assert_eq!(read_head(&head), Some(Head::new(l1, l3)));
        assert_eq!(first_link(&p).unwrap(), Some(l2));
    }

    #[test]
    fn a_line_is_hashed_exactly_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.jsonl");
        let line = chained(Link { seq: 1, hash: GENESIS }, br#"{"id":"a"}"#, false);
        std::fs::write(&p, &line).unwrap();
        let exact = tip(&p).unwrap();
        assert_eq!(exact, Link { seq: 1, hash: hash(&line[..line.len() - 1]) });
        // Whitespace at either end is part of the line.
        std::fs::write(&p, [b" ", &line[..line.len() - 1], b"\t\n"].concat()).unwrap();
        assert_ne!(tip(&p).unwrap().hash, exact.hash);
        // A fresh line's leading newline is not.
        assert_eq!(content(&chained(Link { seq: 1, hash: GENESIS }, br#"{"id":"a"}"#, true)), &line[..line.len() - 1]);
    }

    #[test]
    fn a_head_file_that_is_no_regular_file_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.jsonl");
        assert_eq!(read_head_file(&head_path(&p)).unwrap(), None);
        let c = std::ffi::CString::new(head_path(&p).as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let t = std::time::Instant::now();
        let e = read_head_file(&head_path(&p)).unwrap_err().to_string();
        assert!(e.contains("FIFO") && e.contains("audit.head"), "{e}");
        assert!(open_head(&p).is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        std::fs::remove_file(head_path(&p)).unwrap();
        std::fs::write(head_path(&p), vec![b' '; HEAD_CAP.bytes as usize + 1]).unwrap();
        let e = read_head_file(&head_path(&p)).unwrap_err().to_string();
        assert!(e.contains("over the 64 KiB limit for an audit head file"), "{e}");
    }

    #[test]
    fn rotated_names_sort_by_number() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("audit.jsonl");
        for n in [10, 2, 1] {
            std::fs::write(rotated(&p, n), "").unwrap();
        }
        std::fs::write(dir.path().join("audit.x.jsonl"), "").unwrap();
        let ns: Vec<u64> = rotated_files(&p).into_iter().map(|(n, _)| n).collect();
        assert_eq!(ns, [1, 2, 10]);
        assert_eq!(head_path(&p), dir.path().join("audit.head"));
    }
}
