//! Text helpers shared by the readers.

use crate::caps::BINARY_SNIFF_BYTES;

/// Whether `head` (a file's first bytes) marks the file as binary.
pub fn looks_binary(head: &[u8]) -> bool {
    head[..head.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub fn cut_at_char(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
