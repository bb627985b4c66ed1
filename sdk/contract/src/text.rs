//! Text the host and tools show: output cut to its head and tail with one marker, and
//! the escaping that keeps an approval card to what it says.
//!
//! # Example
//!
//! ```
//! use cheng_contract::text::{escape_line, head_tail};
//!
//! let (cut, was_cut) = head_tail(&"x".repeat(1000), 200);
//! assert!(was_cut && cut.len() <= 200 && cut.contains("bytes omitted"));
//! assert_eq!(escape_line("ls\n\u{202e}gpj.exe"), "ls\\n\\u{202e}gpj.exe");
//! ```

/// The longest prefix of `s` of at most `max` bytes that ends on a char boundary.
pub fn cut_at_char(s: &str, max: usize) -> &str {
    &s[..s.floor_char_boundary(max)]
}

/// The line put between the head and the tail of cut text.
pub fn omitted_marker(bytes: u64) -> String {
    format!("[… {bytes} bytes omitted …]")
}

/// Bytes kept free for the marker (and the newlines around it) when text is cut.
pub const MARKER_ROOM: usize = 64;

/// Where to cut `s` so that its head and tail fit in `max` bytes with room for the
/// marker between them: the end of the head and the start of the tail, both on char
/// boundaries; `None` when `s` fits whole.
pub fn head_tail_cuts(s: &str, max: usize) -> Option<(usize, usize)> {
    if s.len() <= max {
        return None;
    }
    let half = (max - MARKER_ROOM.min(max / 2)) / 2;
    let head_end = s.floor_char_boundary(half);
    let tail_start = s.ceil_char_boundary(s.len() - half);
    Some((head_end, tail_start))
}

/// `s` in at most `max` bytes: whole, or its head and tail with the marker line between
/// them; and whether it was cut.
pub fn head_tail(s: &str, max: usize) -> (String, bool) {
    match head_tail_cuts(s, max) {
        None => (s.to_string(), false),
        Some((head, tail)) => {
            (format!("{}\n{}\n{}", &s[..head], omitted_marker((tail - head) as u64), &s[tail..]), true)
        }
    }
}

/// Whether `c` is shown escaped on a card or in a log line: control characters (C0, DEL,
/// C1 — newlines and ANSI escape sequences among them), bidirectional controls, and the
/// invisible formatting characters that make text look like something else (zero-width
/// spaces and joiners, the Arabic letter mark, word joiners, the byte-order mark, line
/// and paragraph separators, variation selectors, tag characters, fillers).
pub fn is_hidden_char(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
            | 0x200B..=0x200F | 0x2028..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
            | 0xFEFF | 0xFFA0 | 0xFFF9..=0xFFFB | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF)
}

/// `s` as one visible line: every [`is_hidden_char`] written as an escape (`\n`, `\r`,
/// `\t`, else `\u{…}`), so a newline cannot start a forged line and an escape sequence
/// is shown rather than interpreted. The one escaper for approval cards, whatever sends
/// them and whoever shows them.
pub fn escape_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_hidden_char(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// `s` cut to at most `max` characters, with `…` when cut.
pub fn cut_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_tail_stays_within_the_cap() {
        // Whole when it fits.
        assert_eq!(head_tail("abc", 3), ("abc".to_string(), false));
        // Cut text, marker included, never exceeds the cap.
        for max in [100, 101, 257, 4096] {
            let s = "é".repeat(5000);
            let (cut, was) = head_tail(&s, max);
            assert!(was && cut.len() <= max, "{max}: {}", cut.len());
            // No character is split.
            assert!(!cut.contains('\u{FFFD}'));
        }
        // The marker counts what was left out.
        let s = "a".repeat(1000);
        let (h, t) = head_tail_cuts(&s, 200).unwrap();
        assert!(head_tail(&s, 200).0.contains(&omitted_marker((t - h) as u64)));
    }

    #[test]
    fn hidden_characters_are_shown() {
        // Newlines, carriage returns and ANSI sequences become visible escapes.
        assert_eq!(escape_line("a\nb\r\x1b[2J"), "a\\nb\\r\\u{1b}[2J");
        // Bidi overrides, zero-width characters, the Arabic letter mark and the BOM.
        for c in ['\u{202e}', '\u{2066}', '\u{200b}', '\u{200c}', '\u{200d}', '\u{061c}', '\u{feff}', '\u{2028}'] {
            assert_eq!(escape_line(&c.to_string()), format!("\\u{{{:x}}}", c as u32));
        }
        // Ordinary text, including non-Latin scripts and emoji, is left alone.
        assert_eq!(escape_line("cargo test -- 日本 ✓"), "cargo test -- 日本 ✓");
    }

    #[test]
    fn chars_are_cut_with_an_ellipsis() {
        assert_eq!(cut_chars("abcdef", 3), "abc…");
        assert_eq!(cut_chars("abc", 3), "abc");
    }
}
