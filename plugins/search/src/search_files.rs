//! `search_files`: lines matching a regular expression (or a literal) across workspace
//! files, with context, honouring ignore files; ripgrep's searcher (grep-searcher) over
//! a line-only pattern (`line_regex`).

use cheng_sdk::prelude::*;
use grep_matcher::Matcher;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch};

use cheng_fs_core::caps::{
    SEARCH_DEFAULT_MATCHES, SEARCH_DEFAULT_MAX_FILE_BYTES, SEARCH_LINE_CHARS, SEARCH_MAX_CONTEXT, SEARCH_MAX_MATCHES,
};
use cheng_fs_core::walk::{PathGlob, WalkOptions, walk_files};

use crate::line_regex::{BuildError, LineRegex, Options};

/// The most memory a compiled search pattern may take; larger ones are refused with a
/// message naming the limit (a pattern like `a{1000}{1000}{1000}` would otherwise
/// exhaust the component's memory).
const REGEX_SIZE_LIMIT: usize = 8 << 20;
/// The most memory the lazy DFA's cache may take while searching.
const REGEX_DFA_LIMIT: usize = 32 << 20;

pub struct SearchFiles;

/// Files read per host call.
const BATCH_FILES: usize = 256;
/// The most of each file a batch reads: a batch holds at most `BATCH_FILES` times this
/// (16 MiB). A file larger than this (and no larger than `max_file_bytes`) is read on
/// its own when the search reaches it. The walk asks no sizes (a `stat` per file in the
/// host, ~4% of a search of many small files): the host's read refuses what is too large
/// before reading it.
const BATCH_FILE_BYTES: u64 = 64 << 10;

fn default_matches() -> u32 {
    SEARCH_DEFAULT_MATCHES
}
fn default_file_bytes() -> u64 {
    SEARCH_DEFAULT_MAX_FILE_BYTES
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Regex (Rust syntax), or plain text if literal.
    pattern: String,
    #[serde(default)]
    literal: bool,
    /// Directory or one file.
    #[serde(default = "cheng_fs_core::defaults::dot")]
    path: String,
    /// Only files matching it, e.g. "*.rs".
    glob: Option<String>,
    #[serde(default)]
    case_insensitive: bool,
    #[serde(default)]
    #[schemars(range(max = 5))]
    context_lines: u32,
    #[serde(default = "default_matches")]
    #[schemars(range(min = 1, max = 2000))]
    max_matches: u32,
    /// Skip larger files.
    #[serde(default = "default_file_bytes")]
    #[schemars(range(min = 1))]
    max_file_bytes: u64,
    // Honours .gitignore, .ignore and .git/info/exclude.
    #[serde(default = "cheng_fs_core::defaults::yes")]
    respect_gitignore: bool,
    #[serde(default)]
    include_hidden: bool,
}

#[derive(Serialize, JsonSchema, Clone)]
pub struct Match {
    /// File, relative to the workspace root.
    path: String,
    /// Line number, 1-based.
    line: u64,
    /// Byte column of the first match in the line, 1-based.
    column: u64,
    /// The line (without its line ending; very long lines are cut).
    text: String,
    /// Context lines before.
    before: Vec<String>,
    /// Context lines after.
    after: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    // True when the search ran.
    success: bool,
    // One sentence on what was found.
    summary: String,
    // In path order, then line order.
    matches: Vec<Match>,
    // True when max_matches stopped the search.
    truncated: bool,
    files_searched: u64,
    // Larger than max_file_bytes (of the files reached before max_matches stopped the search).
    files_skipped_large: u64,
    // Protected by the host's path rules (likely secrets such as .env, or files the rules refuse): never read, counted here. read_file on one of them asks a person.
    files_skipped_protected: u64,
}

fn line_text(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    let s = s.trim_end_matches(['\n', '\r']);
    if s.chars().count() > SEARCH_LINE_CHARS {
        let mut cut: String = s.chars().take(SEARCH_LINE_CHARS).collect();
        cut.push('…');
        cut
    } else {
        s.to_string()
    }
}

struct Collect<'a> {
    path: String,
    matcher: &'a LineRegex,
    out: &'a mut Vec<Match>,
    cap: usize,
    before: Vec<String>,
    full: bool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.out.len() >= self.cap {
            self.full = true;
            return Ok(false);
        }
        let column = self.matcher.find(m.bytes()).ok().flatten().map(|r| r.start() as u64 + 1).unwrap_or(1);
        self.out.push(Match {
            path: self.path.clone(),
            line: m.line_number().unwrap_or(0),
            column,
            text: line_text(m.bytes()),
            before: std::mem::take(&mut self.before),
            after: Vec::new(),
        });
        Ok(true)
    }

    fn context(&mut self, _s: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        match c.kind() {
            SinkContextKind::Before => self.before.push(line_text(c.bytes())),
            SinkContextKind::After => {
                if let Some(last) = self.out.last_mut() {
                    last.after.push(line_text(c.bytes()));
                }
            }
            SinkContextKind::Other => {}
        }
        Ok(true)
    }
}

impl Tool for SearchFiles {
    const NAME: &'static str = "search_files";
    const DESCRIPTION: &'static str = "Search file contents for a regex (or literal text) with optional context \
        lines. Skips ignored, hidden, binary and oversized files by default. When truncated, narrow the pattern, \
        path or glob.";
    const NEEDS: Needs = Needs::READ;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        if input.pattern.is_empty() {
            return Err(Failure::invalid_argument("pattern is empty; give the text or regular expression to find"));
        }
        let cap = input.max_matches.clamp(1, SEARCH_MAX_MATCHES) as usize;
        let context = input.context_lines.min(SEARCH_MAX_CONTEXT) as usize;
        let options = Options {
            case_insensitive: input.case_insensitive,
            literal: input.literal,
            size_limit: REGEX_SIZE_LIMIT,
            cache_limit: REGEX_DFA_LIMIT,
        };
        let matcher = LineRegex::new(&input.pattern, &options).map_err(|e| match e {
            BuildError::TooLarge => Failure::new(
                ErrorKind::TooLarge,
                format!(
                    "pattern is too large once compiled (over the {} MiB limit for a search pattern): use smaller \
                     repetition counts, or literal=true for plain text",
                    REGEX_SIZE_LIMIT >> 20
                ),
            ),
            BuildError::LineBreak => Failure::invalid_argument(
                "pattern contains a line break; search_files matches within single lines, so search for one \
                 line's text at a time (context_lines shows the lines around a match)",
            ),
            BuildError::Syntax(e) => Failure::invalid_argument(format!(
                "pattern is not a valid regular expression: {e}. Pass literal=true to search for it as plain text"
            )),
        })?;
        let glob = input.glob.as_deref().map(|g| PathGlob::new(g, "glob")).transpose()?;
        let base = cx.resolve(&input.path)?;
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(context)
            .after_context(context)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let mut matches = Vec::new();
        let mut files_searched = 0u64;
        let mut files_skipped_large = 0u64;
        let mut truncated = false;
        let mut skipped = Vec::new();
        // Gather the files first (one host call per directory), then read them in
        // batches (one host call per batch) and search the bytes in memory, in path order.
        let mut todo: Vec<String> = Vec::new();
        if base.path.is_file() {
            // A single file named by `path` is searched whatever its name.
            todo.push(base.rel.clone());
        } else {
            let opts = WalkOptions {
                respect_ignores: input.respect_gitignore,
                max_depth: usize::MAX,
                hidden: input.include_hidden,
            };
            walk_files(cx, &base.rel, &opts, &mut skipped, &mut |f| {
                if glob.as_ref().is_none_or(|g| g.is_match(f.under_base())) {
                    todo.push(f.rel);
                }
                true
            })?;
        }
        // Files the path rules protect are skipped and counted, never asked for one by
        // one: read through `read_unprotected`, they come back not granted.
        let mut files_skipped_protected = 0u64;
        let first_max = input.max_file_bytes.min(BATCH_FILE_BYTES);
        'batches: for names in todo.chunks(BATCH_FILES) {
            let loaded = cheng_sdk::host::read_unprotected(names, first_max);
            for (rel, data) in names.iter().zip(loaded) {
                // Larger than a batch reads of each: read again on its own, up to max_file_bytes.
                let data = match data {
                    Err(f) if f.kind == ErrorKind::TooLarge && first_max < input.max_file_bytes => {
                        cheng_sdk::host::read_unprotected(std::slice::from_ref(rel), input.max_file_bytes)
                            .pop()
                            .unwrap_or(Err(f))
                    }
                    other => other,
                };
                let data = match data {
                    Ok(data) => data,
                    Err(f) if f.kind == ErrorKind::TooLarge => {
                        files_skipped_large += 1;
                        continue;
                    }
                    Err(f) if f.kind == ErrorKind::NotGranted => {
                        files_skipped_protected += 1;
                        continue;
                    }
                    // A file that vanished meanwhile, or is no longer a file, is skipped.
                    Err(_) => continue,
                };
                files_searched += 1;
                let mut sink = Collect {
                    path: rel.clone(),
                    matcher: &matcher,
                    out: &mut matches,
                    cap,
                    before: Vec::new(),
                    full: false,
                };
                let _ = searcher.search_slice(&matcher, &data, &mut sink);
                if sink.full {
                    truncated = true;
                    break 'batches;
                }
            }
        }
        let n = matches.len();
        let files: std::collections::BTreeSet<&str> = matches.iter().map(|m| m.path.as_str()).collect();
        let mut summary = if truncated {
            format!(
                "Stopped at {n} matches (max_matches) after searching {files_searched} files; narrow the pattern, path or glob, or raise max_matches (at most {SEARCH_MAX_MATCHES})"
            )
        } else {
            format!("{n} matches in {} of {files_searched} files searched", files.len())
        };
        if files_skipped_large > 0 {
            summary.push_str(&format!("; {files_skipped_large} files over max_file_bytes were skipped"));
        }
        if files_skipped_protected > 0 {
            summary
                .push_str(&format!("; {files_skipped_protected} protected files (likely secrets) were not searched"));
        }
        Ok(Output {
            success: true,
            summary,
            matches,
            truncated,
            files_searched,
            files_skipped_large,
            files_skipped_protected,
        })
    }
}
