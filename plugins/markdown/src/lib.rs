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

use std::collections::BTreeMap;

use cheng_sdk::host;
use cheng_sdk::prelude::*;

mod doc;
mod fixes;
mod links;

use doc::Doc;
pub use doc::slug;
use fixes::suggestions;
use links::check_links;

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
