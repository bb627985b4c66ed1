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
