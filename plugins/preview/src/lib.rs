//! The `preview` component: `workspace_preview`, read-only and bounded.
//!
//! - `markdown`: Markdown (tables, task lists, footnotes, strikethrough) to HTML with
//!   pulldown-cmark, then sanitized with ammonia: no scripts, no event handlers, no
//!   `javascript:` or other unsafe URL schemes, raw HTML reduced to an allow-list.
//! - `html`: an HTML document to a text summary (title, headings, links, text), read in
//!   one pass by the `cheng-html` crate (the standard's tokenizer, no tree); scripts,
//!   styles and templates dropped, entities decoded.
//! - `artifact_summary`: metadata for any file — size, kind sniffed from its first
//!   bytes, line count for text, image dimensions (PNG, JPEG, GIF, WebP, SVG), PDF page
//!   count (files up to 32 MiB), SHA-256.
//!
//! `path` wins over `content`. The preview is cut to `max_bytes` keeping its head and
//! tail.

use std::io::Read;

use cheng_fs_core::text::looks_binary;
use cheng_html::summarize_html;
use cheng_sdk::host;
use cheng_sdk::prelude::*;
use sha2::{Digest, Sha256};

/// Default and largest preview.
pub const MAX_PREVIEW_BYTES: usize = 524_288;
/// Largest source rendered by `markdown` and `html`.
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;
/// Largest PDF whose pages are counted.
const MAX_PDF_SCAN: u64 = 32 << 20;
/// Files up to this size are read whole for `artifact_summary` (digest, line count);
/// larger ones (a sparse 10 GB file, say) are described from their head only.
const MAX_SCAN_BYTES: u64 = 64 << 20;

#[derive(Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Markdown,
    Html,
    ArtifactSummary,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewInput {
    operation: Operation,
    /// Wins over content.
    #[serde(default)]
    path: Option<String>,
    /// Inline source.
    #[serde(default)]
    content: Option<String>,
    /// Default 524288.
    #[serde(default)]
    #[schemars(range(min = 1, max = 524288))]
    max_bytes: Option<u64>,
}

#[derive(Serialize, JsonSchema, Default)]
pub struct PreviewOutput {
    operation: String,
    // True when a preview was made.
    success: bool,
    summary: String,
    /// html, text or metadata.
    format: String,
    preview: String,
    // The preview was cut to max_bytes, head and tail kept.
    preview_truncated: bool,
    source_bytes: u64,
    source_path: Option<String>,
    // artifact_summary only.
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    error_kind: Option<String>,
    terminal: bool,
    error: Option<String>,
}

pub struct WorkspacePreview;
impl Tool for WorkspacePreview {
    const NAME: &'static str = "workspace_preview";
    const DESCRIPTION: &'static str = "Preview a file or inline content, read-only: markdown to sanitized HTML; \
        html to a text summary (title, headings, links, text); artifact_summary: size, kind, lines, image size, \
        PDF pages, sha256.";
    const NEEDS: Needs = Needs::READ;
    type Input = PreviewInput;
    type Output = PreviewOutput;

    fn run(input: PreviewInput, cx: &Context) -> Result<PreviewOutput, Failure> {
        let max = match input.max_bytes {
            None => MAX_PREVIEW_BYTES,
            Some(n) if (1..=MAX_PREVIEW_BYTES as u64).contains(&n) => n as usize,
            Some(n) => {
                return Err(Failure::invalid_argument(format!(
                    "max_bytes {n} is out of range: use 1 to {MAX_PREVIEW_BYTES}"
                )));
            }
        };
        let op_name = match input.operation {
            Operation::Markdown => "markdown",
            Operation::Html => "html",
            Operation::ArtifactSummary => "artifact_summary",
        };
        let mut out = PreviewOutput { operation: op_name.into(), success: true, ..Default::default() };
        if input.operation == Operation::ArtifactSummary {
            let meta = match &input.path {
                Some(p) => {
                    let r = cx.resolve(p)?;
                    out.source_path = Some(r.rel.clone());
                    // Streamed through this tool's own mount: the host's rules first.
                    host::may_read(std::slice::from_ref(&r.rel))?;
                    file_metadata(&r.path, &r.rel)?
                }
                None => {
                    let c = input
                        .content
                        .as_deref()
                        .ok_or_else(|| Failure::invalid_argument("give `path` (a workspace file) or `content`"))?;
                    bytes_metadata(c.as_bytes())
                }
            };
            out.source_bytes = meta["size"].as_u64().unwrap_or(0);
            out.format = "metadata".into();
            out.summary = format!(
                "{}: {} bytes, {}{}",
                out.source_path.as_deref().unwrap_or("content"),
                out.source_bytes,
                meta["kind"].as_str().unwrap_or("unknown"),
                match (meta.get("width"), meta.get("height")) {
                    (Some(w), Some(h)) => format!(", {w}×{h}"),
                    _ => String::new(),
                }
            );
            let (p, t) = bound(&serde_json::to_string_pretty(&meta).unwrap_or_default(), max, false);
            out.preview = p;
            out.preview_truncated = t;
            out.metadata = meta.as_object().cloned();
            return Ok(out);
        }
        let source: String = match &input.path {
            Some(p) => {
                let r = cx.resolve(p)?;
                let bytes = host::read_file(&r.rel, MAX_SOURCE_BYTES)?;
                if looks_binary(&bytes) {
                    return Err(Failure::new(
                        ErrorKind::BinaryFile,
                        format!("\"{p}\" is a binary file; use operation artifact_summary to describe it"),
                    ));
                }
                out.source_path = Some(r.rel);
                String::from_utf8_lossy(&bytes).into_owned()
            }
            None => input
                .content
                .clone()
                .ok_or_else(|| Failure::invalid_argument("give `path` (a workspace file) or `content`"))?,
        };
        out.source_bytes = source.len() as u64;
        match input.operation {
            Operation::Markdown => {
                let html = render_markdown(&source);
                let (p, t) = bound(&html, max, true);
                out.summary = format!(
                    "Rendered {} bytes of Markdown to {} bytes of sanitized HTML{}",
                    source.len(),
                    html.len(),
                    if t { " (cut: head and tail kept)" } else { "" }
                );
                out.format = "html".into();
                out.preview = p;
                out.preview_truncated = t;
            }
            Operation::Html => {
                let s = summarize_html(&source);
                let text = s.render();
                let (p, t) = bound(&text, max, false);
                out.summary = format!(
                    "{}: {} headings, {} links, {} characters of text",
                    s.title.as_deref().map(|t| format!("\"{t}\"")).unwrap_or_else(|| "An untitled page".into()),
                    s.headings.len(),
                    s.links.len(),
                    s.text.chars().count()
                );
                out.format = "text".into();
                out.preview = p;
                out.preview_truncated = t;
            }
            Operation::ArtifactSummary => unreachable!("handled above"),
        }
        Ok(out)
    }
}

cheng_sdk::export_tools!(WorkspacePreview);

/// Markdown to sanitized HTML.
pub fn render_markdown(src: &str) -> String {
    use pulldown_cmark::{Options, Parser, html};
    let opts =
        Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let mut raw = String::with_capacity(src.len() * 3 / 2);
    html::push_html(&mut raw, Parser::new_ext(src, opts));
    let mut b = ammonia::Builder::default();
    // Task-list checkboxes are the only inputs: every `input` becomes a disabled
    // checkbox, whatever its own attributes said (an `<input>` whose type was dropped
    // would otherwise render as a text box).
    b.add_tags(["input"])
        .add_tag_attributes("input", ["checked"])
        .set_tag_attribute_value("input", "type", "checkbox")
        .set_tag_attribute_value("input", "disabled", "")
        .add_tag_attributes("sup", ["class"])
        .add_tag_attributes("div", ["class"])
        .add_generic_attributes(["id"])
        .id_prefix(Some("user-content-"));
    b.clean(&raw).to_string()
}

/// Cut `s` to at most `max` bytes keeping head and tail, with a marker between them.
/// For HTML the cuts move to tag boundaries so no tag is split.
fn bound(s: &str, max: usize, html: bool) -> (String, bool) {
    if !html {
        return cheng_fs_core::text::head_tail(s, max);
    }
    let Some((mut head_end, mut tail_start)) = cheng_fs_core::text::head_tail_cuts(s, max) else {
        return (s.to_string(), false);
    };
    if let Some(i) = s[..head_end].rfind('>') {
        head_end = i + 1;
    }
    if let Some(i) = s[tail_start..].find('<') {
        tail_start += i;
    }
    let omitted = tail_start - head_end;
    (
        format!(
            "{}\n<p>{}</p>\n{}",
            &s[..head_end],
            cheng_fs_core::text::omitted_marker(omitted as u64),
            &s[tail_start..]
        ),
        true,
    )
}

/// The kind of a file from its first bytes (and its name, for text).
fn sniff(head: &[u8], name: &str) -> &'static str {
    let starts = |m: &[u8]| head.starts_with(m);
    if starts(b"\x89PNG\r\n\x1a\n") {
        "image/png"
    } else if starts(&[0xFF, 0xD8, 0xFF]) {
        "image/jpeg"
    } else if starts(b"GIF87a") || starts(b"GIF89a") {
        "image/gif"
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        "image/webp"
    } else if starts(b"%PDF-") {
        "application/pdf"
    } else if starts(b"PK\x03\x04") {
        "application/zip"
    } else if starts(&[0x1F, 0x8B]) {
        "application/gzip"
    } else if starts(b"\0asm") {
        "application/wasm"
    } else if starts(b"\x7fELF") {
        "application/x-elf"
    } else if looks_binary(head) {
        "application/octet-stream"
    } else {
        let text = String::from_utf8_lossy(&head[..head.len().min(4096)]);
        let t = text.trim_start();
        if t.starts_with("<svg") || (t.starts_with("<?xml") && text.contains("<svg")) {
            "image/svg+xml"
        } else if t.starts_with("<!DOCTYPE html") || t.starts_with("<!doctype html") || t.starts_with("<html") {
            "text/html"
        } else {
            let ext = name.rsplit_once('.').map(|x| x.1.to_ascii_lowercase()).unwrap_or_default();
            match ext.as_str() {
                "md" | "markdown" => "text/markdown",
                "json" => "application/json",
                "toml" => "application/toml",
                "yaml" | "yml" => "application/yaml",
                "html" | "htm" => "text/html",
                "csv" => "text/csv",
                "rs" | "py" | "js" | "ts" | "go" | "java" | "c" | "h" | "cpp" | "sh" => "text/x-source",
                _ => "text/plain",
            }
        }
    }
}

/// Width and height from an SVG's root element (`width`/`height`, else `viewBox`).
fn svg_size(text: &str) -> Option<(f64, f64)> {
    let start = text.find("<svg")?;
    let tag = &text[start..start + text[start..].find('>')?];
    let attr = |name: &str| -> Option<String> {
        let key = format!(" {name}=");
        let i = tag.find(&key)? + key.len();
        let q = tag[i..].chars().next()?;
        let rest = &tag[i + 1..];
        Some(rest[..rest.find(q)?].to_string())
    };
    let num = |v: String| v.trim_end_matches("px").trim().parse::<f64>().ok();
    if let (Some(w), Some(h)) = (attr("width").and_then(num), attr("height").and_then(num)) {
        return Some((w, h));
    }
    let vb = attr("viewBox")?;
    let parts: Vec<f64> = vb.split([' ', ',']).filter(|p| !p.is_empty()).filter_map(|p| p.parse().ok()).collect();
    (parts.len() == 4).then(|| (parts[2], parts[3]))
}

/// Pages of a PDF, counted from its `/Type /Page` objects.
fn pdf_pages(bytes: &[u8]) -> u64 {
    let mut n = 0;
    let mut i = 0;
    while let Some(pos) = find(&bytes[i..], b"/Type") {
        let mut j = i + pos + 5;
        while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'\n' || bytes[j] == b'\r') {
            j += 1;
        }
        if bytes[j..].starts_with(b"/Page") && !bytes[j..].starts_with(b"/Pages") {
            n += 1;
        }
        i = j;
    }
    n
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn describe(meta: &mut serde_json::Value, head: &[u8], kind: &str) {
    if kind.starts_with("image/")
        && kind != "image/svg+xml"
        && let Ok(sz) = imagesize::blob_size(head)
    {
        meta["width"] = sz.width.into();
        meta["height"] = sz.height.into();
    }
    if kind == "image/svg+xml"
        && let Some((w, h)) = svg_size(&String::from_utf8_lossy(head))
    {
        meta["width"] = w.into();
        meta["height"] = h.into();
    }
}

fn bytes_metadata(bytes: &[u8]) -> serde_json::Value {
    let kind = sniff(bytes, "");
    let mut meta = serde_json::json!({
        "size": bytes.len(),
        "kind": kind,
        "sha256": hex(&Sha256::digest(bytes)),
    });
    if !looks_binary(bytes) {
        meta["line_count"] = count_lines(bytes, true).into();
    }
    describe(&mut meta, &bytes[..bytes.len().min(256 * 1024)], kind);
    if kind == "application/pdf" {
        meta["page_count"] = pdf_pages(bytes).into();
    }
    meta
}

fn count_lines(bytes: &[u8], last: bool) -> u64 {
    let n = bytes.iter().filter(|b| **b == b'\n').count() as u64;
    n + u64::from(last && !bytes.is_empty() && !bytes.ends_with(b"\n"))
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Metadata of a workspace file, streamed (any size).
fn file_metadata(guest: &std::path::Path, rel: &str) -> Result<serde_json::Value, Failure> {
    let io = |e: std::io::Error| Failure::new(ErrorKind::Io, format!("cannot read \"{rel}\": {e}"));
    let md = std::fs::metadata(guest).map_err(io)?;
    if md.is_dir() {
        return Err(Failure::invalid_argument(format!("\"{rel}\" is a directory; use list_dir to see what it holds")));
    }
    // A FIFO would block the open, a device could never end: only regular files.
    if !md.is_file() {
        return Err(Failure::invalid_argument(format!(
            "\"{rel}\" is not a regular file (a FIFO, socket or device); only regular files are described"
        )));
    }
    let mut f = std::fs::File::open(guest).map_err(io)?;
    let mut head = Vec::new();
    (&mut f).take(256 * 1024).read_to_end(&mut head).map_err(io)?;
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let kind = sniff(&head, name);
    let text = !looks_binary(&head);
    let mut hasher = Sha256::new();
    hasher.update(&head);
    let mut lines = count_lines(&head, false);
    let mut last = head.last().copied();
    let mut pdf = if kind == "application/pdf" && md.len() <= MAX_PDF_SCAN { Some(head.clone()) } else { None };
    let mut buf = vec![0u8; 256 * 1024];
    // Past the scan cap only the head is looked at: no digest, no line count.
    let whole = md.len() <= MAX_SCAN_BYTES;
    if whole {
        loop {
            let n = f.read(&mut buf).map_err(io)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            lines += count_lines(&buf[..n], false);
            last = Some(buf[n - 1]);
            if let Some(p) = pdf.as_mut() {
                p.extend_from_slice(&buf[..n]);
            }
        }
    }
    let mut meta = serde_json::json!({
        "path": rel,
        "size": md.len(),
        "kind": kind,
        "sha256": if whole { hex(&hasher.finalize()).into() } else { serde_json::Value::Null },
    });
    if !whole {
        meta["note"] = format!(
            "larger than {} MiB: only its first 256 KiB were read (no sha256, no line count)",
            MAX_SCAN_BYTES >> 20
        )
        .into();
    }
    if text && whole {
        meta["line_count"] = (lines + u64::from(last.is_some_and(|b| b != b'\n'))).into();
    }
    describe(&mut meta, &head, kind);
    if let Some(p) = pdf {
        meta["page_count"] = pdf_pages(&p).into();
    }
    Ok(meta)
}
