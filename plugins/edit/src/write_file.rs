//! `write_file`: create or replace a whole file, atomically, through the host.

use cheng_sdk::host;
use cheng_sdk::prelude::*;

use cheng_fs_core::caps::WRITE_MAX_BYTES;

pub struct WriteFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    path: String,
    content: String,
    /// Create missing parent directories.
    #[serde(default)]
    create_dirs: bool,
    /// False refuses an existing file.
    #[serde(default = "cheng_fs_core::defaults::yes")]
    overwrite: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    // True when the file was written.
    success: bool,
    // One sentence on what was written.
    summary: String,
    path: String,
    bytes_written: u64,
    // True when the file did not exist before.
    created: bool,
}

/// Refuse paths this call may not write (protected paths, outside the grant), by
/// asking the host — whose refusal is then on record as its denial.
pub(crate) fn check_writable(_cx: &Context, rel: &str) -> Result<(), Failure> {
    host::may_write(&[rel.to_string()])
}

impl Tool for WriteFile {
    const NAME: &'static str = "write_file";
    const DESCRIPTION: &'static str =
        "Create or replace a whole text file (atomic; keeps permissions). To change part of a file, use edit_file.";
    const NEEDS: Needs = Needs::WRITE;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        if input.content.len() > WRITE_MAX_BYTES {
            return Err(Failure::new(
                ErrorKind::TooLarge,
                format!(
                    "content is {} bytes; the limit is {WRITE_MAX_BYTES}. Write the file in parts or generate it with a command",
                    input.content.len()
                ),
            ));
        }
        let target = cx.resolve_for_create(&input.path)?;
        if target.exists && target.path.is_dir() {
            return Err(Failure::invalid_argument(format!("\"{}\" is a directory", input.path)));
        }
        check_writable(cx, &target.rel)?;
        let w = host::write_file(&target.rel, input.content.as_bytes(), input.create_dirs, input.overwrite)?;
        let verb = if w.created { "Created" } else { "Replaced" };
        Ok(Output {
            success: true,
            summary: format!("{verb} {} ({} bytes)", target.rel, w.bytes_written),
            path: target.rel,
            bytes_written: w.bytes_written,
            created: w.created,
        })
    }
}
