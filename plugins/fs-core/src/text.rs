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

/// Bytes kept free for the marker when text is cut to its head and tail.
const MARKER_ROOM: usize = 64;

/// Where to cut `s` so that its head and tail fit in `max` bytes with room for a
/// marker between them: the end of the head and the start of the tail, both on char
/// boundaries; `None` when `s` fits whole.
pub fn head_tail_cuts(s: &str, max: usize) -> Option<(usize, usize)> {
    if s.len() <= max {
        return None;
    }
    let half = (max - MARKER_ROOM.min(max / 2)) / 2;
    let head_end = cut_at_char(s, half).len();
    let mut tail_start = s.len() - half;
    while !s.is_char_boundary(tail_start) {
        tail_start += 1;
    }
    Some((head_end, tail_start))
}

/// `s` in at most `max` bytes: whole, or its head and tail with a line saying how many
/// bytes were left out between them; and whether it was cut.
pub fn head_tail(s: &str, max: usize) -> (String, bool) {
    match head_tail_cuts(s, max) {
        None => (s.to_string(), false),
        Some((head, tail)) => (format!("{}\n[… {} bytes omitted …]\n{}", &s[..head], tail - head, &s[tail..]), true),
    }
}
