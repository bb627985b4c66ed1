//! `read_file`: a text file's content, whole or by line range, capped in bytes.

use cheng_sdk::prelude::*;

use cheng_fs_core::caps::{READ_DEFAULT_BYTES, READ_MAX_BYTES};
use cheng_fs_core::lines::{Output, read_text, select};

pub struct ReadFile;

fn default_max_bytes() -> u64 {
    READ_DEFAULT_BYTES
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    path: String,
    #[schemars(range(min = 1))]
    start_line: Option<u64>,
    #[schemars(range(min = 1))]
    end_line: Option<u64>,
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 1, max = 1_048_576))]
    max_bytes: u64,
}

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    const DESCRIPTION: &'static str = "Read a text file, whole or lines start_line to end_line (1-based, inclusive). \
        If max_bytes cuts it (truncated), continue from end_line + 1. Binary files are refused.";
    const NEEDS: Needs = Needs::READ;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        let max_bytes = input.max_bytes.clamp(1, READ_MAX_BYTES) as usize;
        let start = input.start_line.unwrap_or(1);
        if start == 0 {
            return Err(Failure::invalid_argument("start_line is 1-based; use 1 for the first line"));
        }
        if let Some(end) = input.end_line
            && end < start
        {
            return Err(Failure::invalid_argument(format!(
                "end_line ({end}) is before start_line ({start}); give a range with end_line >= start_line"
            )));
        }
        let (rel, data) = read_text(cx, &input.path)?;
        let size = data.len() as u64;
        select(data, start, input.end_line, max_bytes, &rel, size)
    }
}
