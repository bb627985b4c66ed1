//! The parsed document: headings and their anchors (GitHub's slugs), the lines inside
//! code, and the findings `diagnostics` reports.

use std::collections::HashMap;

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use crate::*;

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
pub(crate) struct Slugger {
    pub(crate) seen: HashMap<String, usize>,
}

impl Slugger {
    pub(crate) fn slug(&mut self, text: &str) -> String {
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

pub(crate) struct Doc<'a> {
    pub(crate) text: &'a str,
    pub(crate) line_starts: Vec<usize>,
    pub(crate) headings: Vec<Heading>,
    /// 1-based line ranges (inclusive) inside code blocks.
    pub(crate) code_lines: Vec<(usize, usize)>,
    /// Fenced blocks whose fence is never closed: their opening line.
    pub(crate) unclosed_fences: Vec<usize>,
    /// (target, line, is_image, alt/text empty)
    pub(crate) links: Vec<(String, usize, bool, bool)>,
    /// Anchors from raw HTML (`id=` / `name=`).
    pub(crate) html_anchors: Vec<String>,
}

pub(crate) fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS
}

impl<'a> Doc<'a> {
    pub(crate) fn new(text: &'a str) -> Doc<'a> {
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
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.line_starts.partition_point(|s| *s <= offset)
    }

    pub(crate) fn lines(&self) -> Vec<&'a str> {
        self.text.split('\n').collect()
    }

    pub(crate) fn in_code(&self, line: usize) -> bool {
        self.code_lines.iter().any(|(a, b)| line >= *a && line <= *b)
    }

    pub(crate) fn anchors(&self) -> Vec<String> {
        let mut a: Vec<String> = self.headings.iter().map(|h| h.anchor.clone()).collect();
        a.extend(self.html_anchors.iter().cloned());
        a
    }

    /// Per-line findings that also have mechanical fixes.
    pub(crate) fn line_findings(&self) -> Vec<(usize, &'static str, usize, String)> {
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

    pub(crate) fn diagnostics(&self) -> Vec<Diagnostic> {
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

pub(crate) fn level_num(l: HeadingLevel) -> u8 {
    match l {
        HeadingLevel::H1 => 1,
        HeadingLevel::H2 => 2,
        HeadingLevel::H3 => 3,
        HeadingLevel::H4 => 4,
        HeadingLevel::H5 => 5,
        HeadingLevel::H6 => 6,
    }
}
