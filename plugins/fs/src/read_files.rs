//! `read_files`: several text files in one call; one bad path fails only itself.

use cheng_sdk::prelude::*;

use cheng_fs_core::caps::{
    READ_FILES_DEFAULT_PER_FILE, READ_FILES_DEFAULT_TOTAL, READ_FILES_MAX_PATHS, READ_MAX_BYTES,
};
use cheng_fs_core::lines::{LOAD_MAX, check_text, select};

pub struct ReadFiles;

fn per_file() -> u64 {
    READ_FILES_DEFAULT_PER_FILE
}
fn total() -> u64 {
    READ_FILES_DEFAULT_TOTAL
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    #[schemars(length(min = 1, max = 50))]
    paths: Vec<String>,
    #[serde(default = "per_file")]
    #[schemars(range(min = 1, max = 1_048_576))]
    max_bytes_per_file: u64,
    #[serde(default = "total")]
    #[schemars(range(min = 1, max = 1_048_576))]
    max_total_bytes: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct FileOut {
    /// The path as given.
    path: String,
    /// The text (from the first line; cut at a line boundary when over a cap).
    content: String,
    /// Lines in the whole file.
    total_lines: u64,
    /// True when a cap cut the content.
    truncated: bool,
    /// Why this file could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    error_kind: Option<String>,
    /// The message for that.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    // True when the call ran (individual files may still have failed).
    success: bool,
    // One sentence on what was read.
    summary: String,
    // One entry per path, in the order given.
    files: Vec<FileOut>,
}

impl Tool for ReadFiles {
    const NAME: &'static str = "read_files";
    const DESCRIPTION: &'static str = "Read several text files at once; a file that fails does not fail the \
        rest. Caps cut content at line boundaries (truncated).";
    const NEEDS: Needs = Needs::READ;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        if input.paths.is_empty() || input.paths.len() > READ_FILES_MAX_PATHS {
            return Err(Failure::invalid_argument(format!(
                "paths has {} entries; give between 1 and {READ_FILES_MAX_PATHS} (split larger sets over several calls)",
                input.paths.len()
            )));
        }
        let per_file = input.max_bytes_per_file.clamp(1, READ_MAX_BYTES) as usize;
        let mut left = input.max_total_bytes.clamp(1, READ_MAX_BYTES) as usize;
        let mut files = Vec::new();
        let (mut ok, mut cut, mut failed) = (0, 0, 0);
        // One host call for every file.
        let host_paths: Vec<String> = input.paths.iter().map(|p| cx.host_path(p).into_owned()).collect();
        let loaded = cheng_sdk::host::read_files(&host_paths, LOAD_MAX);
        for (path, data) in input.paths.into_iter().zip(loaded) {
            let read = data.and_then(|data| {
                check_text(&path, &data)?;
                let rel = cx.host_path(&path).into_owned();
                if left == 0 {
                    return Err(Failure::new(
                        ErrorKind::TooLarge,
                        "max_total_bytes was used up by the files before this one; read it in another call",
                    ));
                }
                let size = data.len() as u64;
                select(data, 1, None, per_file.min(left), &rel, size)
            });
            match read {
                Ok(o) => {
                    left = left.saturating_sub(o.content.len());
                    ok += 1;
                    cut += usize::from(o.truncated);
                    files.push(FileOut {
                        path,
                        content: o.content,
                        total_lines: o.total_lines,
                        truncated: o.truncated,
                        error_kind: None,
                        error: None,
                    });
                }
                Err(f) => {
                    failed += 1;
                    files.push(FileOut {
                        path,
                        content: String::new(),
                        total_lines: 0,
                        truncated: false,
                        error_kind: Some(f.kind.code().to_string()),
                        error: Some(f.message),
                    });
                }
            }
        }
        let mut summary = format!("Read {ok} files");
        if cut > 0 {
            summary.push_str(&format!(", {cut} of them cut by a byte cap (continue with read_file and start_line)"));
        }
        if failed > 0 {
            summary.push_str(&format!("; {failed} could not be read (see their errors)"));
        }
        Ok(Output { success: true, summary, files })
    }
}
