//! An example plugin: counts lines, words and bytes of the text files under a path,
//! reading only through its grant (the host's batched listing and reads).

use cheng_sdk::host::{self, EntryKind};
use cheng_sdk::prelude::*;

/// Files counted at most in one call.
const MAX_FILES: usize = 1000;

#[cheng_sdk::schema]
#[serde(deny_unknown_fields)]
struct Input {
    /// A file or directory, relative to the workspace root (directories are walked).
    #[serde(default = "dot")]
    path: String,
}

fn dot() -> String {
    ".".into()
}

#[cheng_sdk::schema]
struct Count {
    /// The file, relative to the workspace root.
    path: String,
    lines: u64,
    words: u64,
    bytes: u64,
}

#[cheng_sdk::schema]
struct Output {
    success: bool,
    summary: String,
    /// One entry per text file, in path order.
    files: Vec<Count>,
    /// The sums over all files.
    total: Count,
    /// Binary files that were not counted.
    skipped_binary: Vec<String>,
}

fn walk(dir: &str, out: &mut Vec<String>) -> Result<(), Failure> {
    for e in host::read_dir(dir, false)? {
        let rel = if dir == "." { e.name.clone() } else { format!("{dir}/{}", e.name) };
        match e.kind {
            EntryKind::File if e.valid_utf8 => out.push(rel),
            EntryKind::Dir if e.valid_utf8 && e.name != ".git" => walk(&rel, out)?,
            _ => {}
        }
        if out.len() >= MAX_FILES {
            break;
        }
    }
    Ok(())
}

struct WordCount;
impl Tool for WordCount {
    const NAME: &'static str = "count";
    const DESCRIPTION: &'static str = "Count lines, words and bytes of the text files under a path.";
    const NEEDS: Needs = Needs::READ;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        let path = cx.host_path(&input.path).into_owned();
        // A directory is walked; anything else is read as one file.
        let mut paths = Vec::new();
        match host::read_dir(&path, false) {
            Ok(_) => walk(&path, &mut paths)?,
            Err(f) if f.kind == ErrorKind::InvalidArgument => paths.push(path.clone()),
            Err(f) => return Err(f),
        }
        paths.truncate(MAX_FILES);
        let mut files = Vec::new();
        let mut skipped_binary = Vec::new();
        let mut total = Count { path: path.clone(), lines: 0, words: 0, bytes: 0 };
        for (p, data) in paths.iter().zip(host::read_files(&paths, 16 << 20)) {
            let data = data?;
            if data.contains(&0) {
                skipped_binary.push(p.clone());
                continue;
            }
            let text = String::from_utf8_lossy(&data);
            let c = Count {
                path: p.clone(),
                lines: text.lines().count() as u64,
                words: text.split_whitespace().count() as u64,
                bytes: data.len() as u64,
            };
            total.lines += c.lines;
            total.words += c.words;
            total.bytes += c.bytes;
            files.push(c);
        }
        let summary =
            format!("{} files: {} lines, {} words, {} bytes", files.len(), total.lines, total.words, total.bytes);
        Ok(Output { success: true, summary, files, total, skipped_binary })
    }
}

cheng_sdk::export_tools!(WordCount);
