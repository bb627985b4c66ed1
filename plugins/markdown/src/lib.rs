//! The `markdown` component: `workspace_markdown`, read-only Markdown analysis.
//!
//! - `outline`: headings (ATX and setext; not inside code) with level, 1-based line and
//!   the anchor GitHub gives them (duplicates suffixed `-1`, `-2`…).
//! - `diagnostics`: findings with a stable `code`, line, column and message.
//! - `format_suggestions`: mechanical fixes as `edit_file` inputs (`old_text` exact and
//!   unique in the file, `new_text`), checked by applying them in order to a copy; the
//!   tool never writes.
//! - `link_check_local`: every relative link and anchor checked against the workspace
//!   (files through the host's guarded listing, anchors against the target's outline);
//!   external links are listed, never fetched.

use std::collections::{BTreeMap, HashMap};

use cheng_sdk::host::{self, EntryKind};
use cheng_sdk::prelude::*;
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

/// Largest Markdown file analysed.
pub const MAX_FILE_BYTES: u64 = 8 << 20;
/// Most diagnostics, suggestions or links reported.
pub const MAX_ITEMS: usize = 1000;

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Outline,
    Diagnostics,
    FormatSuggestions,
    LinkCheckLocal,
}

impl Operation {
    fn name(self) -> &'static str {
        match self {
            Operation::Outline => "outline",
            Operation::Diagnostics => "diagnostics",
            Operation::FormatSuggestions => "format_suggestions",
            Operation::LinkCheckLocal => "link_check_local",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkdownInput {
    operation: Operation,
    path: String,
}

#[derive(Serialize, JsonSchema, Clone)]
pub struct Heading {
    /// 1 to 6.
    level: u8,
    /// The heading's text as rendered (markup removed).
    text: String,
    /// 1-based line where it starts.
    line: usize,
    /// The anchor GitHub gives it (without `#`).
    anchor: String,
}

#[derive(Serialize, JsonSchema, Clone)]
pub struct Diagnostic {
    /// Stable code, e.g. duplicate-heading, broken-local-link.
    code: String,
    /// 1-based line.
    line: usize,
    /// 1-based column (characters).
    column: usize,
    /// What is wrong and what to do.
    message: String,
}

#[derive(Serialize, JsonSchema, Clone)]
pub struct Edit {
    /// The diagnostic code it fixes (the first, when it fixes several).
    code: String,
    /// Every diagnostic code it fixes.
    codes: Vec<String>,
    /// 1-based line where `old_text` starts.
    line: usize,
    /// The file, for edit_file.
    path: String,
    /// Exact, unique text to replace (edit_file's old_text).
    old_text: String,
    /// Its replacement (edit_file's new_text).
    new_text: String,
}

#[derive(Serialize, JsonSchema, Clone)]
pub struct Link {
    /// The target as written.
    target: String,
    /// 1-based line.
    line: usize,
    /// local, anchor or external.
    kind: String,
    /// local and anchor links: whether it resolves; external links: not checked (null).
    ok: Option<bool>,
}

#[derive(Serialize, JsonSchema, Default)]
pub struct MarkdownOutput {
    operation: String,
    path: String,
    // True when the analysis ran.
    success: bool,
    summary: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    outline: Option<Vec<Heading>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    diagnostics: Option<Vec<Diagnostic>>,
    /// Apply in order.
    #[serde(skip_serializing_if = "Option::is_none")]
    suggested_edits: Option<Vec<Edit>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<Vec<Link>>,
    error_kind: Option<String>,
    terminal: bool,
    error: Option<String>,
}

pub struct WorkspaceMarkdown;
impl Tool for WorkspaceMarkdown {
    const NAME: &'static str = "workspace_markdown";
    const DESCRIPTION: &'static str = "Read-only Markdown analysis: outline (headings, GitHub anchors), diagnostics, \
        format_suggestions (edit_file replacements) or link_check_local (relative links and anchors).";
    const NEEDS: Needs = Needs::READ;
    type Input = MarkdownInput;
    type Output = MarkdownOutput;

    fn run(input: MarkdownInput, cx: &Context) -> Result<MarkdownOutput, Failure> {
        let resolved = cx.resolve(&input.path)?;
        let bytes = host::read_file(&resolved.rel, MAX_FILE_BYTES)?;
        if cheng_fs_core::text::looks_binary(&bytes) {
            return Err(Failure::new(
                ErrorKind::BinaryFile,
                format!("\"{}\" is a binary file, not Markdown", input.path),
            ));
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let doc = Doc::new(&text);
        let rel = resolved.rel.clone();
        let mut out = MarkdownOutput {
            operation: input.operation.name().into(),
            path: rel.clone(),
            success: true,
            ..Default::default()
        };
        match input.operation {
            Operation::Outline => {
                let h = doc.headings.clone();
                out.summary = format!("{} headings in {rel}", h.len());
                out.outline = Some(h);
            }
            Operation::Diagnostics => {
                let mut d = doc.diagnostics();
                d.extend(check_links(&doc, &rel).0);
                d.sort_by_key(|x| (x.line, x.column));
                d.truncate(MAX_ITEMS);
                out.summary = summarize_codes(&d, &rel);
                out.diagnostics = Some(d);
            }
            Operation::FormatSuggestions => {
                let edits = suggestions(&doc, &rel);
                out.summary = if edits.is_empty() {
                    format!("No mechanical fixes for {rel}")
                } else {
                    format!("{} edit_file replacements for {rel}; apply them in order", edits.len())
                };
                out.suggested_edits = Some(edits);
            }
            Operation::LinkCheckLocal => {
                let (d, links) = check_links(&doc, &rel);
                let external = links.iter().filter(|l| l.kind == "external").count();
                out.summary = format!(
                    "{} links in {rel}: {} local or anchor ({} broken), {external} external (listed, not fetched)",
                    links.len(),
                    links.len() - external,
                    d.len()
                );
                out.diagnostics = Some(d);
                out.links = Some(links);
            }
        }
        Ok(out)
    }
}

cheng_sdk::export_tools!(WorkspaceMarkdown);

fn summarize_codes(d: &[Diagnostic], rel: &str) -> String {
    if d.is_empty() {
        return format!("No findings in {rel}");
    }
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for x in d {
        *by.entry(x.code.as_str()).or_default() += 1;
    }
    let parts: Vec<String> = by.iter().map(|(c, n)| format!("{c} ×{n}")).collect();
    format!("{} findings in {rel}: {}", d.len(), parts.join(", "))
}

/// GitHub's heading slug: lower-cased; letters, numbers, `-` and `_` kept; spaces become
/// `-`; everything else (punctuation, symbols, emoji) dropped.
pub fn slug(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                Some(c)
            } else if c == ' ' {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// Slugs made unique the way GitHub does: a repeat gets `-1`, `-2`…
#[derive(Default)]
struct Slugger {
    seen: HashMap<String, usize>,
}

impl Slugger {
    fn slug(&mut self, text: &str) -> String {
        let original = slug(text);
        let mut s = original.clone();
        while self.seen.contains_key(&s) {
            let n = self.seen.get_mut(&original).map(|n| {
                *n += 1;
                *n
            });
            s = format!("{original}-{}", n.unwrap_or(1));
        }
        self.seen.insert(s.clone(), 0);
        s
    }
}

struct Doc<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
    headings: Vec<Heading>,
    /// 1-based line ranges (inclusive) inside code blocks.
    code_lines: Vec<(usize, usize)>,
    /// Fenced blocks whose fence is never closed: their opening line.
    unclosed_fences: Vec<usize>,
    /// (target, line, is_image, alt/text empty)
    links: Vec<(String, usize, bool, bool)>,
    /// Anchors from raw HTML (`id=` / `name=`).
    html_anchors: Vec<String>,
}

fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

impl<'a> Doc<'a> {
    fn new(text: &'a str) -> Doc<'a> {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        let mut d = Doc {
            text,
            line_starts,
            headings: Vec::new(),
            code_lines: Vec::new(),
            unclosed_fences: Vec::new(),
            links: Vec::new(),
            html_anchors: Vec::new(),
        };
        let mut slugger = Slugger::default();
        let mut heading: Option<(u8, usize, String)> = None;
        let mut link: Option<(String, usize, bool, String)> = None;
        for (ev, range) in Parser::new_ext(text, options()).into_offset_iter() {
            match ev {
                Event::Start(Tag::Heading { level, .. }) => {
                    heading = Some((level_num(level), d.line_of(range.start), String::new()))
                }
                Event::End(TagEnd::Heading(_)) => {
                    if let Some((level, line, t)) = heading.take() {
                        let t = t.trim().to_string();
                        let anchor = slugger.slug(&t);
                        d.headings.push(Heading { level, text: t, line, anchor });
                    }
                }
                Event::Start(Tag::CodeBlock(kind)) => {
                    let first = d.line_of(range.start);
                    let last = d.line_of(range.end.saturating_sub(1).max(range.start));
                    d.code_lines.push((first, last));
                    if let CodeBlockKind::Fenced(_) = kind {
                        let src = &text[range.clone()];
                        let open = src.trim_start();
                        let fence_char = open.chars().next().unwrap_or('`');
                        let fence_len = open.chars().take_while(|c| *c == fence_char).count();
                        let body_lines: Vec<&str> = src.trim_end_matches('\n').lines().collect();
                        let closed = body_lines.len() > 1
                            && body_lines.last().is_some_and(|l| {
                                let t = l.trim();
                                t.chars().all(|c| c == fence_char) && t.chars().count() >= fence_len
                            });
                        if !closed {
                            d.unclosed_fences.push(first);
                        }
                    }
                }
                Event::Start(Tag::Link { dest_url, .. }) => {
                    link = Some((dest_url.to_string(), d.line_of(range.start), false, String::new()))
                }
                Event::Start(Tag::Image { dest_url, .. }) => {
                    link = Some((dest_url.to_string(), d.line_of(range.start), true, String::new()))
                }
                Event::End(TagEnd::Link) | Event::End(TagEnd::Image) => {
                    if let Some((url, line, img, t)) = link.take() {
                        d.links.push((url, line, img, t.trim().is_empty()));
                    }
                }
                Event::Text(t) | Event::Code(t) => {
                    if let Some(h) = heading.as_mut() {
                        h.2.push_str(&t);
                    }
                    if let Some(l) = link.as_mut() {
                        l.3.push_str(&t);
                    }
                }
                Event::Html(h) | Event::InlineHtml(h) => {
                    for attr in ["id=\"", "name=\""] {
                        let mut rest: &str = &h;
                        while let Some(i) = rest.find(attr) {
                            let after = &rest[i + attr.len()..];
                            if let Some(end) = after.find('"') {
                                d.html_anchors.push(after[..end].to_string());
                            }
                            rest = after;
                        }
                    }
                }
                _ => {}
            }
        }
        d
    }

    /// 1-based line of a byte offset.
    fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|s| *s <= offset)
    }

    fn lines(&self) -> Vec<&'a str> {
        self.text.split('\n').collect()
    }

    fn in_code(&self, line: usize) -> bool {
        self.code_lines.iter().any(|(a, b)| line >= *a && line <= *b)
    }

    fn anchors(&self) -> Vec<String> {
        let mut a: Vec<String> = self.headings.iter().map(|h| h.anchor.clone()).collect();
        a.extend(self.html_anchors.iter().cloned());
        a
    }

    /// Per-line findings that also have mechanical fixes.
    fn line_findings(&self) -> Vec<(usize, &'static str, usize, String)> {
        let lines = self.lines();
        let mut out = Vec::new();
        let heading_lines: Vec<usize> = self.headings.iter().map(|h| h.line).collect();
        let mut blank_run = 0;
        for (i, raw) in lines.iter().enumerate() {
            let n = i + 1;
            let line = raw.trim_end_matches('\r');
            if self.in_code(n) {
                blank_run = 0;
                continue;
            }
            if line.trim().is_empty() {
                blank_run += 1;
                if blank_run == 2 && n < lines.len() {
                    out.push((n, "multiple-blank-lines", 1, "more than one blank line in a row".to_string()));
                }
            } else {
                blank_run = 0;
            }
            let trimmed = line.trim_end_matches([' ', '\t']);
            let trailing = &line[trimmed.len()..];
            if !trailing.is_empty() && !trimmed.is_empty() {
                let next_blank = lines.get(i + 1).is_none_or(|l| l.trim().is_empty());
                let hard_break = trailing == "  " && !next_blank;
                if !hard_break {
                    out.push((
                        n,
                        "trailing-whitespace",
                        trimmed.chars().count() + 1,
                        format!("{} trailing whitespace characters", trailing.chars().count()),
                    ));
                }
            } else if !trailing.is_empty() && !line.is_empty() && trimmed.is_empty() && n < lines.len() {
                out.push((n, "trailing-whitespace", 1, "a blank line holding whitespace".to_string()));
            }
            let hashes = line.chars().take_while(|c| *c == '#').count();
            if (1..=6).contains(&hashes) && !heading_lines.contains(&n) {
                let after = line[hashes..].chars().next();
                if after.is_some_and(|c| !c.is_whitespace() && c != '#') && !line.starts_with("#!") {
                    out.push((
                        n,
                        "missing-space-atx-heading",
                        hashes + 1,
                        "no space after the `#`s, so this is not a heading".to_string(),
                    ));
                }
            }
        }
        out
    }

    fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut d = Vec::new();
        let diag = |code: &str, line: usize, column: usize, message: String| Diagnostic {
            code: code.into(),
            line,
            column,
            message,
        };
        // Headings.
        let mut first_seen: HashMap<(String, u8), usize> = HashMap::new();
        let mut prev_level = 0u8;
        let mut h1 = None;
        for h in &self.headings {
            let key = (h.text.to_lowercase(), h.level);
            if let Some(first) = first_seen.get(&key) {
                d.push(diag(
                    "duplicate-heading",
                    h.line,
                    1,
                    format!("heading \"{}\" repeats line {first}; its anchor becomes #{}", h.text, h.anchor),
                ));
            } else {
                first_seen.insert(key, h.line);
            }
            if prev_level > 0 && h.level > prev_level + 1 {
                d.push(diag(
                    "heading-hierarchy-jump",
                    h.line,
                    1,
                    format!(
                        "level {} heading follows a level {prev_level} heading; use level {}",
                        h.level,
                        prev_level + 1
                    ),
                ));
            }
            prev_level = h.level;
            if h.level == 1 {
                match h1 {
                    None => h1 = Some(h.line),
                    Some(first) => d.push(diag(
                        "multiple-top-level-headings",
                        h.line,
                        1,
                        format!("a second level-1 heading (the first is on line {first}); a document has one title"),
                    )),
                }
            }
        }
        // Links and images.
        for (url, line, img, empty_text) in &self.links {
            if url.trim().is_empty() {
                d.push(diag(
                    "empty-link-target",
                    *line,
                    1,
                    format!("{} has an empty target", if *img { "an image" } else { "a link" }),
                ));
            }
            if *img && *empty_text {
                d.push(diag(
                    "missing-alt-text",
                    *line,
                    1,
                    format!("image \"{url}\" has no alt text; describe it between the brackets"),
                ));
            }
        }
        for line in &self.unclosed_fences {
            d.push(diag(
                "unclosed-code-fence",
                *line,
                1,
                "this code fence is never closed, so the rest of the file is code".to_string(),
            ));
        }
        for (line, code, col, msg) in self.line_findings() {
            d.push(diag(code, line, col, msg));
        }
        d
    }
}

fn level_num(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}

/// Lines `a..=b` (1-based) of `lines`, joined with their newlines, and whether the
/// span ends at the end of the file.
fn span(lines: &[&str], a: usize, b: usize) -> String {
    let mut s = lines[a - 1..b].join("\n");
    if b < lines.len() {
        s.push('\n');
    }
    s
}

/// The mechanical fix of one line.
fn fix_line(line: &str, codes: &[&str]) -> String {
    let mut l = line.to_string();
    let cr = l.ends_with('\r');
    if cr {
        l.pop();
    }
    if codes.contains(&"trailing-whitespace") {
        l = l.trim_end_matches([' ', '\t']).to_string();
    }
    if codes.contains(&"missing-space-atx-heading") {
        let hashes = l.chars().take_while(|c| *c == '#').count();
        l = format!("{} {}", &l[..hashes], &l[hashes..]);
    }
    if cr {
        l.push('\r');
    }
    l
}

fn suggestions(doc: &Doc<'_>, rel: &str) -> Vec<Edit> {
    let lines = doc.lines();
    let findings = doc.line_findings();
    // Lines to rewrite (with their codes) and lines to drop (extra blank lines).
    let mut rewrite: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    let mut drop: Vec<usize> = Vec::new();
    for (line, code, _, _) in &findings {
        if *code == "multiple-blank-lines" {
            drop.push(*line);
        } else {
            rewrite.entry(*line).or_default().push(code);
        }
    }
    // Further blank lines of a run are dropped too (the finding names only the second).
    let mut extra = Vec::new();
    for &l in &drop {
        let mut n = l + 1;
        while n < lines.len() && lines[n - 1].trim().is_empty() && !doc.in_code(n) {
            extra.push(n);
            n += 1;
        }
    }
    drop.extend(extra);
    let mut touched: Vec<usize> = rewrite.keys().copied().chain(drop.iter().copied()).collect();
    touched.sort_unstable();
    touched.dedup();
    // Group neighbouring lines, then widen each group until its text is unique.
    let mut groups: Vec<(usize, usize)> = Vec::new();
    for l in touched {
        match groups.last_mut() {
            Some((_, b)) if l <= *b + 1 => *b = l,
            _ => groups.push((l, l)),
        }
    }
    let mut edits = Vec::new();
    let mut working = doc.text.to_string();
    let mut gi = 0;
    while gi < groups.len() {
        let (mut a, mut b) = groups[gi];
        loop {
            let old = span(&lines, a, b);
            let unique = !old.is_empty() && working.matches(old.as_str()).count() == 1;
            if unique || (a == 1 && b == lines.len()) {
                break;
            }
            if a > 1 {
                a -= 1;
            }
            if b < lines.len() {
                b += 1;
            }
            // Swallow a following group that the widening reached.
            while gi + 1 < groups.len() && groups[gi + 1].0 <= b + 1 {
                b = b.max(groups[gi + 1].1);
                groups.remove(gi + 1);
            }
        }
        let old = span(&lines, a, b);
        let mut new_lines: Vec<String> = Vec::new();
        for n in a..=b {
            if drop.contains(&n) {
                continue;
            }
            match rewrite.get(&n) {
                Some(codes) => new_lines.push(fix_line(lines[n - 1], codes)),
                None => new_lines.push(lines[n - 1].to_string()),
            }
        }
        let mut new = new_lines.join("\n");
        if b < lines.len() {
            new.push('\n');
        }
        let mut codes: Vec<String> = Vec::new();
        for n in a..=b {
            let here: Vec<&str> = rewrite.get(&n).cloned().unwrap_or_default();
            for c in here.into_iter().chain(drop.contains(&n).then_some("multiple-blank-lines")) {
                if !codes.iter().any(|x| x == c) {
                    codes.push(c.to_string());
                }
            }
        }
        let code = codes.first().cloned().unwrap_or_else(|| "format".into());
        // Check it applies to the file as it will be when the earlier edits are in.
        if working.matches(old.as_str()).count() == 1 && old != new {
            working = working.replacen(old.as_str(), &new, 1);
            edits.push(Edit { code, codes, line: a, path: rel.into(), old_text: old, new_text: new });
        }
        gi += 1;
    }
    // An unclosed fence: close it at the end of the file.
    if let Some(&open) = doc.unclosed_fences.first() {
        let fence: String = lines[open - 1].trim_start().chars().take_while(|c| *c == '`' || *c == '~').collect();
        let mut a = lines.len();
        while a > 1 && lines[a - 1].is_empty() {
            a -= 1;
        }
        let mut start = a;
        loop {
            let old = span(&lines, start, lines.len());
            if working.ends_with(old.as_str()) && working.matches(old.as_str()).count() == 1 || start == 1 {
                let mut new = old.trim_end_matches('\n').to_string();
                new.push_str(&format!("\n{fence}\n"));
                if working.matches(old.as_str()).count() == 1 {
                    edits.push(Edit {
                        code: "unclosed-code-fence".into(),
                        codes: vec!["unclosed-code-fence".into()],
                        line: start,
                        path: rel.into(),
                        old_text: old,
                        new_text: new,
                    });
                }
                break;
            }
            start -= 1;
        }
    }
    edits.truncate(MAX_ITEMS);
    edits
}

/// Lexically join `base_dir` and `target` (workspace-relative); None when it climbs
/// above the root.
fn join(base_dir: &str, target: &str) -> Option<String> {
    let mut parts: Vec<&str> = if target.starts_with('/') || base_dir == "." || base_dir.is_empty() {
        Vec::new()
    } else {
        base_dir.split('/').collect()
    };
    for seg in target.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            s => parts.push(s),
        }
    }
    Some(if parts.is_empty() { ".".to_string() } else { parts.join("/") })
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_external(url: &str) -> bool {
    if url.starts_with("//") {
        return true;
    }
    match url.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
        }
        None => false,
    }
}

/// Whether `rel` exists (file or directory), through the host's guarded listings.
fn exists(rel: &str, cache: &mut HashMap<String, Option<Vec<(String, EntryKind)>>>) -> Option<EntryKind> {
    if rel == "." {
        return Some(EntryKind::Dir);
    }
    let (dir, name) = match rel.rsplit_once('/') {
        Some((d, n)) => (d.to_string(), n),
        None => (".".to_string(), rel),
    };
    let listing = cache
        .entry(dir.clone())
        .or_insert_with(|| host::read_dir(&dir, false).ok().map(|v| v.into_iter().map(|e| (e.name, e.kind)).collect()));
    listing.as_ref()?.iter().find(|(n, _)| n == name).map(|(_, k)| *k)
}

fn anchor_matches(anchors: &[String], wanted: &str) -> bool {
    let w = percent_decode(wanted).to_lowercase();
    let w = w.strip_prefix("user-content-").unwrap_or(&w);
    anchors.iter().any(|a| a.to_lowercase() == w)
}

fn check_links(doc: &Doc<'_>, rel: &str) -> (Vec<Diagnostic>, Vec<Link>) {
    let base_dir = rel.rsplit_once('/').map(|(d, _)| d).unwrap_or(".");
    let own = doc.anchors();
    let mut listings = HashMap::new();
    let mut other_anchors: HashMap<String, Option<Vec<String>>> = HashMap::new();
    let mut diags = Vec::new();
    let mut links = Vec::new();
    for (url, line, _img, _) in &doc.links {
        let url = url.trim();
        if url.is_empty() {
            continue;
        }
        if is_external(url) {
            links.push(Link { target: url.into(), line: *line, kind: "external".into(), ok: None });
            continue;
        }
        if let Some(anchor) = url.strip_prefix('#') {
            let ok = anchor.is_empty() || anchor_matches(&own, anchor);
            if !ok {
                diags.push(Diagnostic {
                    code: "broken-anchor".into(),
                    line: *line,
                    column: 1,
                    message: format!("no heading here has the anchor #{anchor}"),
                });
            }
            links.push(Link { target: url.into(), line: *line, kind: "anchor".into(), ok: Some(ok) });
            continue;
        }
        let (path_part, anchor) = match url.split_once('#') {
            Some((p, a)) => (p, Some(a)),
            None => (url, None),
        };
        let path_part = path_part.split('?').next().unwrap_or(path_part);
        let decoded = percent_decode(path_part);
        let Some(target) = join(base_dir, &decoded) else {
            diags.push(Diagnostic {
                code: "link-outside-workspace".into(),
                line: *line,
                column: 1,
                message: format!("\"{url}\" points above the workspace root"),
            });
            links.push(Link { target: url.into(), line: *line, kind: "local".into(), ok: Some(false) });
            continue;
        };
        let kind = exists(&target, &mut listings);
        let mut ok = kind.is_some();
        if !ok {
            diags.push(Diagnostic {
                code: "broken-local-link".into(),
                line: *line,
                column: 1,
                message: format!("\"{url}\" does not exist (looked for {target})"),
            });
        } else if let Some(a) = anchor.filter(|a| !a.is_empty()) {
            let is_md = target.ends_with(".md") || target.ends_with(".markdown");
            if kind == Some(EntryKind::File) && is_md {
                let anchors = other_anchors.entry(target.clone()).or_insert_with(|| {
                    host::read_file(&target, MAX_FILE_BYTES).ok().map(|b| {
                        let t = String::from_utf8_lossy(&b).into_owned();
                        Doc::new(&t).anchors()
                    })
                });
                if let Some(list) = anchors
                    && !anchor_matches(list, a)
                {
                    ok = false;
                    diags.push(Diagnostic {
                        code: "broken-anchor".into(),
                        line: *line,
                        column: 1,
                        message: format!("{target} has no heading with the anchor #{a}"),
                    });
                }
            }
        }
        links.push(Link { target: url.into(), line: *line, kind: "local".into(), ok: Some(ok) });
    }
    diags.truncate(MAX_ITEMS);
    links.truncate(MAX_ITEMS);
    (diags, links)
}
