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
    /// Glob over paths, e.g. "**/*.rs" or "src/**/mod.rs"; without "/" it matches file names at any depth ("*.toml").
    pattern: String,
    /// Directory to search, relative to the workspace root (default: the root).
    #[serde(default = "cheng_fs_core::defaults::dot")]
    path: String,
    /// Most paths to return (default 1000, at most 10000).
    #[serde(default = "default_results")]
    #[schemars(range(min = 1, max = 10_000))]
    max_results: u32,
    /// Deepest directory level to descend (default 32).
    #[serde(default = "default_depth")]
    #[schemars(range(min = 1, max = 32))]
    max_depth: u32,
    /// Skip what .gitignore, .ignore and .git/info/exclude exclude (default true).
    #[serde(default = "cheng_fs_core::defaults::yes")]
    respect_gitignore: bool,
    /// Include files and directories whose names start with "." (default false).
    #[serde(default)]
    include_hidden: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct Output {
    /// True when the search ran.
    success: bool,
    /// One sentence on what was found.
    summary: String,
    /// Matching files, relative to the workspace root, sorted by path.
    paths: Vec<String>,
    /// True when max_results cut the list short.
    truncated: bool,
    /// Entries that could not be read (with why), e.g. names that are not UTF-8.
    skipped: Vec<String>,
}

impl Tool for FindFiles {
    const NAME: &'static str = "find_files";
    const DESCRIPTION: &'static str = "Find workspace files by glob (\"**/*.rs\", \"*.toml\", \"src/**/test_*.py\"), \
        sorted by path. Honours .gitignore/.ignore by default and skips hidden files unless include_hidden. \
        Returns at most max_results paths; when truncated, narrow the pattern or the path.";
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
            sizes: false,
        };
        let mut paths = Vec::new();
        let mut truncated = false;
        walk_files(cx, &base.rel, &opts, &mut out.skipped, &mut |f| {
            if !glob.is_match(&f.under_base) {
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
