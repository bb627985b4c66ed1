//! Reading text: whole files through the host, binary refusal, and picking a line
//! range under a byte cap — shared by read_file, read_files, edit_file and apply_patch.

use cheng_sdk::prelude::*;

use crate::caps::{BINARY_SNIFF_BYTES, READ_MAX_BYTES};
use crate::text::{cut_at_char, looks_binary};

#[derive(Serialize, JsonSchema)]
pub struct Output {
    // True when the file was read.
    pub success: bool,
    // One sentence on what was returned.
    pub summary: String,
    pub path: String,
    // The text of lines `start_line` to `end_line`.
    pub content: String,
    pub start_line: u64,
    // 0 for an empty file.
    pub end_line: u64,
    pub total_lines: u64,
    // True when the byte cap cut the requested range short.
    pub truncated: bool,
    /// Whole file, in bytes.
    pub size: u64,
}

/// The most a reader loads to count lines; larger files are refused.
pub const LOAD_MAX: u64 = 256 << 20;

/// Read `path` whole through the host (one call; the host applies the workspace rules,
/// symlinks included), refusing binary files. Returns the normalized relative path.
pub fn read_text(cx: &Context, path: &str) -> Result<(String, Vec<u8>), Failure> {
    let rel =
        cheng_sdk::path_rules::lexical_with_aliases(path, &[cx.sandbox_root(), &cx.guest_root().to_string_lossy()])
            .map_err(|r| Failure::path_refused(r.message(path, cx.sandbox_root())))?
            .normalized();
    let data = cheng_sdk::host::read_file(&cx.host_path(path), LOAD_MAX)?;
    check_text(path, &data)?;
    Ok((rel, data))
}

/// Refuse binary content.
pub fn check_text(path: &str, data: &[u8]) -> Result<(), Failure> {
    if looks_binary(data) {
        return Err(Failure::new(
            ErrorKind::BinaryFile,
            format!(
                "\"{path}\" looks binary (a NUL byte in its first {} KiB); only text can be read or edited",
                BINARY_SNIFF_BYTES / 1024
            ),
        ));
    }
    Ok(())
}

/// Pick lines `start..=end` of `data`, at most `max_bytes` of them. `data` is taken so
/// that the picked text becomes the output without a copy.
pub fn select(
    mut data: Vec<u8>,
    start: u64,
    end: Option<u64>,
    max_bytes: usize,
    rel: &str,
    size: u64,
) -> Result<Output, Failure> {
    // One pass over the newlines: the total count, and the byte range of lines
    // start..=end. A line is the text up to and including '\n'; a last line without a
    // newline still counts.
    let mut from = if start == 1 { Some(0) } else { None };
    let mut to = None;
    let mut seen: u64 = 0;
    for i in memchr::memchr_iter(b'\n', &data) {
        seen += 1;
        if seen == start - 1 {
            from = Some(i + 1);
        }
        if end.is_some_and(|e| seen == e) {
            to = Some(i + 1);
        }
    }
    let total = seen + u64::from(!data.is_empty() && !data.ends_with(b"\n"));
    if total == 0 {
        return Ok(Output {
            success: true,
            summary: format!("{rel} is empty"),
            path: rel.to_string(),
            content: String::new(),
            start_line: 1,
            end_line: 0,
            total_lines: 0,
            truncated: false,
            size,
        });
    }
    if start > total {
        return Err(Failure::invalid_argument(format!(
            "start_line {start} is past the end of {rel}, which has {total} lines"
        )));
    }
    let end = end.unwrap_or(total).min(total);
    let from = from.unwrap_or(data.len());
    let to = to.unwrap_or(data.len());
    data.truncate(to);
    data.drain(..from);
    let text = String::from_utf8(data).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let (content, last, truncated) = if text.len() <= max_bytes {
        (text, end, false)
    } else {
        let cut = cut_at_char(&text, max_bytes);
        match cut.rfind('\n') {
            Some(i) => {
                let kept = &cut[..=i];
                let lines = kept.matches('\n').count() as u64;
                (kept.to_string(), start + lines - 1, true)
            }
            // A single line longer than the cap: return its head.
            None => (cut.to_string(), start, true),
        }
    };
    let summary = if truncated && !content.ends_with('\n') {
        format!(
            "Line {start} of {rel} alone is longer than max_bytes ({max_bytes} bytes); showing its \
             first {} bytes. Raise max_bytes (at most {READ_MAX_BYTES}) or use search_files to find \
             what you need in it.",
            content.len()
        )
    } else if truncated {
        format!(
            "Showing lines {start}-{last} of {total} of {rel}: the requested lines exceed max_bytes \
             ({max_bytes} bytes). Continue with start_line={}, or raise max_bytes (at most {READ_MAX_BYTES}).",
            last + 1
        )
    } else if start == 1 && last == total {
        format!("Read all {total} lines of {rel}")
    } else {
        format!("Read lines {start}-{last} of {total} of {rel}")
    };
    Ok(Output {
        success: true,
        summary,
        path: rel.to_string(),
        content,
        start_line: start,
        end_line: last,
        total_lines: total,
        truncated,
        size,
    })
}
