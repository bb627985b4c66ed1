//! `edit_file`: replace exact text in a file; ambiguous or missing matches are refused
//! with the ways forward; the write is atomic.

use cheng_sdk::host;
use cheng_sdk::prelude::*;

use crate::write_file::check_writable;
use cheng_fs_core::lines::read_text;

pub struct EditFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    path: String,
    old_text: String,
    new_text: String,
    #[serde(default)]
    replace_all: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    // True when the file was changed.
    success: bool,
    // One sentence on what changed.
    summary: String,
    path: String,
    replacements: u64,
    /// Start line of each replacement, in the new file.
    lines: Vec<u64>,
}

fn line_of(text: &str, byte: usize) -> u64 {
    memchr::memchr_iter(b'\n', &text.as_bytes()[..byte]).count() as u64 + 1
}

/// Why `old` was not found, and what to try.
fn not_found_hint(content: &str, old: &str) -> String {
    let crlf_file = content.contains("\r\n");
    let crlf_old = old.contains("\r\n");
    if crlf_file && !crlf_old && content.contains(&old.replace('\n', "\r\n")) {
        return "the file uses CRLF line endings (\\r\\n) and old_text uses LF; repeat old_text with \\r\\n line endings".into();
    }
    if !crlf_file && crlf_old && content.contains(&old.replace("\r\n", "\n")) {
        return "the file uses LF line endings and old_text has CRLF; repeat old_text with \\n line endings".into();
    }
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if squash(content).contains(&squash(old)) {
        return "the text exists with different whitespace or indentation; read the lines again and copy them exactly"
            .into();
    }
    "check whitespace, indentation and line endings (the comparison is exact), or read the file again: it may have changed".into()
}

impl Tool for EditFile {
    const NAME: &'static str = "edit_file";
    const DESCRIPTION: &'static str = "Replace exact text in a file. old_text must occur once (whitespace and line \
        endings count) unless replace_all; if it occurs more often, add surrounding lines.";
    const NEEDS: Needs = Needs::WRITE;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        if input.old_text.is_empty() {
            return Err(Failure::invalid_argument(
                "old_text is empty; give the exact text to replace (to create a file, use write_file)",
            ));
        }
        let (rel, data) = read_text(cx, &input.path)?;
        check_writable(cx, &rel)?;
        let content = String::from_utf8(data).map_err(|_| {
            Failure::invalid_argument(format!("\"{}\" is not valid UTF-8; it cannot be edited as text", input.path))
        })?;
        let found: Vec<usize> = content.match_indices(&input.old_text).map(|(i, _)| i).collect();
        if found.is_empty() {
            return Err(Failure::invalid_argument(format!(
                "old_text was not found in {}: {}",
                rel,
                not_found_hint(&content, &input.old_text)
            )));
        }
        if found.len() > 1 && !input.replace_all {
            let lines: Vec<String> = found.iter().map(|&i| line_of(&content, i).to_string()).collect();
            return Err(Failure::invalid_argument(format!(
                "old_text appears {} times in {} (lines {}); nothing was changed. Include more surrounding lines \
                 in old_text so it matches exactly one place, or set replace_all=true to replace every occurrence",
                found.len(),
                rel,
                lines.join(", ")
            )));
        }
        // Build the new text and note where each replacement lands in it.
        let mut out = String::with_capacity(content.len() + found.len() * input.new_text.len());
        let mut starts = Vec::with_capacity(found.len());
        let mut last = 0;
        for &i in &found {
            out.push_str(&content[last..i]);
            starts.push(out.len());
            out.push_str(&input.new_text);
            last = i + input.old_text.len();
        }
        out.push_str(&content[last..]);
        host::write_file(&rel, out.as_bytes(), false, true)?;
        let lines: Vec<u64> = starts.iter().map(|&b| line_of(&out, b)).collect();
        let n = found.len() as u64;
        Ok(Output {
            success: true,
            summary: format!(
                "Replaced {n} occurrence{} in {} (line{} {})",
                if n == 1 { "" } else { "s" },
                rel,
                if n == 1 { "" } else { "s" },
                lines.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
            ),
            path: rel,
            replacements: n,
            lines,
        })
    }
}
