//! Text helpers shared by the readers.

use crate::caps::BINARY_SNIFF_BYTES;

/// Whether `head` (a file's first bytes) marks the file as binary.
pub fn looks_binary(head: &[u8]) -> bool {
    head[..head.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

pub use cheng_sdk::text::{cut_at_char, head_tail, head_tail_cuts, omitted_marker};
