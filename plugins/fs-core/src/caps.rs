//! Every cap the file tools apply, in one place.

/// `read_file`: default bytes of content returned.
pub const READ_DEFAULT_BYTES: u64 = 262_144;
/// `read_file`: the most bytes of content one call may return.
pub const READ_MAX_BYTES: u64 = 1_048_576;
/// Binary detection: a NUL byte within this many leading bytes marks a file as binary.
pub const BINARY_SNIFF_BYTES: usize = 8192;

/// `list_dir`: default depth (1 = the directory itself).
pub const LIST_DEFAULT_DEPTH: u32 = 1;
/// `list_dir`: deepest listing.
pub const LIST_MAX_DEPTH: u32 = 8;
/// `list_dir`: default number of entries.
pub const LIST_DEFAULT_ENTRIES: u32 = 500;
/// `list_dir`: the most entries one call may return.
pub const LIST_MAX_ENTRIES: u32 = 5000;
/// Directories never descended into by listings, and named as skipped.
pub const SKIPPED_DIRS: &[&str] = &[".git", "node_modules"];

/// `find_files`: default and most paths returned.
pub const FIND_DEFAULT_RESULTS: u32 = 1000;
/// `find_files`: the most paths one call may return.
pub const FIND_MAX_RESULTS: u32 = 10_000;
/// `find_files`: default (and largest) walk depth.
pub const FIND_DEFAULT_DEPTH: u32 = 32;

/// `read_files`: the most paths in one call.
pub const READ_FILES_MAX_PATHS: usize = 50;
/// `read_files`: default bytes per file.
pub const READ_FILES_DEFAULT_PER_FILE: u64 = 65_536;
/// `read_files`: default bytes for all files together.
pub const READ_FILES_DEFAULT_TOTAL: u64 = 524_288;

/// `search_files`: default matches returned.
pub const SEARCH_DEFAULT_MATCHES: u32 = 200;
/// `search_files`: the most matches one call may return.
pub const SEARCH_MAX_MATCHES: u32 = 2000;
/// `search_files`: most context lines on each side.
pub const SEARCH_MAX_CONTEXT: u32 = 5;
/// `search_files`: files larger than this are skipped by default.
pub const SEARCH_DEFAULT_MAX_FILE_BYTES: u64 = 1_048_576;
/// `search_files`: longest line text returned per match (longer lines are cut).
pub const SEARCH_LINE_CHARS: usize = 500;

/// `write_file` and `edit_file`: the largest content accepted.
pub const WRITE_MAX_BYTES: usize = 10 << 20;
