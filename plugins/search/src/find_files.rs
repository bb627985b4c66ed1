//! `find_files`: workspace files whose path matches a glob, honouring ignore files.

use cheng_sdk::prelude::*;

use cheng_fs_core::caps::{FIND_DEFAULT_DEPTH, FIND_DEFAULT_RESULTS, FIND_MAX_RESULTS};
use cheng_fs_core::walk::{PathGlob, WalkOptions, walk_files};

pub struct FindFiles;

fn default_results() -> u32 {
    FIND_DEFAULT_RESULTS
}
fn default_depth() -> u32 {
    FIND_DEFAULT_DEPTH
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// Glob, e.g. "**/*.rs" or "src/**/mod.rs"; without "/" it matches file names at any depth.
    pattern: String,
    #[serde(default = "cheng_fs_core::defaults::dot")]
    path: String,
    #[serde(default = "default_results")]
    #[schemars(range(min = 1, max = 10_000))]
    max_results: u32,
    #[serde(default = "default_depth")]
    #[schemars(range(min = 1, max = 32))]
    max_depth: u32,
    // Honours .gitignore, .ignore and .git/info/exclude.
    #[serde(default = "cheng_fs_core::defaults::yes")]
    respect_gitignore: bool,
    #[serde(default)]
    include_hidden: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    // True when the search ran.
    success: bool,
    // One sentence on what was found.
    summary: String,
    paths: Vec<String>,
    // True when max_results cut the list short.
    truncated: bool,
    /// Entries that could not be read, and why.
    skipped: Vec<String>,
}

impl Tool for FindFiles {
    const NAME: &'static str = "find_files";
    const DESCRIPTION: &'static str = "Find files by glob over paths, sorted. Skips ignored and hidden files by \
        default. When truncated, narrow the pattern or path.";
    const NEEDS: Needs = Needs::READ;
    type Input = Input;
    type Output = Output;

    fn run(input: Input, cx: &Context) -> Result<Output, Failure> {
        let cap = input.max_results.clamp(1, FIND_MAX_RESULTS) as usize;
        let glob = PathGlob::new(&input.pattern, "pattern")?;
        let base = cx.resolve(&input.path)?;
        if !base.path.is_dir() {
            return Err(Failure::invalid_argument(format!("\"{}\" is not a directory", input.path)));
        }
        let mut out =
            Output { success: true, summary: String::new(), paths: Vec::new(), truncated: false, skipped: Vec::new() };
        let opts = WalkOptions {
            respect_ignores: input.respect_gitignore,
            max_depth: input.max_depth as usize,
            hidden: input.include_hidden,
        };
        let mut paths = Vec::new();
        let mut truncated = false;
        walk_files(cx, &base.rel, &opts, &mut out.skipped, &mut |f| {
            if !glob.is_match(f.under_base()) {
                return true;
            }
            if paths.len() >= cap {
                truncated = true;
                return false;
            }
            paths.push(f.rel);
            true
        })?;
        out.paths = paths;
        out.truncated = truncated;
        let n = out.paths.len();
        out.summary = if out.truncated {
            format!(
                "Found more than {n} files matching \"{}\" in {}; showing the first {n}. Narrow the pattern or the path, or raise max_results (at most {FIND_MAX_RESULTS})",
                input.pattern, base.rel
            )
        } else {
            format!("Found {n} files matching \"{}\" in {}", input.pattern, base.rel)
        };
        Ok(out)
    }
}
