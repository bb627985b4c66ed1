//! Bounded capture of a child's output: the first half of the cap is kept as it
//! arrives, the last half as a sliding tail, and everything in between is counted and
//! dropped. Memory stays at the cap whatever the child prints (a 1 GB flood or a
//! 100 MB line without a newline alike).

use std::collections::VecDeque;

use tokio::io::{AsyncRead, AsyncReadExt};

/// Head and tail of a byte stream, at most `cap` bytes in all.
#[derive(Debug)]
pub struct HeadTail {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl HeadTail {
    /// Keep at most `cap` bytes (half head, half tail).
    pub fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        HeadTail { head_cap, tail_cap: cap - head_cap, head: Vec::new(), tail: VecDeque::new(), total: 0 }
    }

    /// Take in a chunk.
    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len() as u64;
        if self.head.len() < self.head_cap {
            let n = (self.head_cap - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..n]);
            chunk = &chunk[n..];
        }
        if chunk.is_empty() || self.tail_cap == 0 {
            return;
        }
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_cap..]);
        } else {
            let excess = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..excess);
            self.tail.extend(chunk);
        }
    }

    /// Bytes seen in all.
    #[cfg(test)]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The text (invalid UTF-8 replaced) and whether anything was dropped. When cut, a
    /// marker line between head and tail says how many bytes are missing; the cut
    /// points move to character boundaries so no character is split.
    pub fn finish(self) -> (String, bool) {
        let kept = self.head.len() + self.tail.len();
        let mut tail: Vec<u8> = self.tail.into();
        if self.total <= kept as u64 {
            let mut all = self.head;
            all.append(&mut tail);
            return (String::from_utf8_lossy(&all).into_owned(), false);
        }
        let mut head = self.head;
        // Drop a character cut in half at the end of the head…
        let head_end = utf8_prefix_end(&head);
        let cut_head = head.len() - head_end;
        head.truncate(head_end);
        // …and continuation bytes at the start of the tail.
        let skip = tail.iter().take(3).take_while(|b| (**b & 0xC0) == 0x80).count();
        let omitted = self.total - kept as u64 + (cut_head + skip) as u64;
        let mut text = String::from_utf8_lossy(&head).into_owned();
        text.push_str(&format!("\n[… {omitted} bytes omitted …]\n"));
        text.push_str(&String::from_utf8_lossy(&tail[skip..]));
        (text, true)
    }
}

/// The length of `bytes` without a trailing, incomplete UTF-8 sequence.
fn utf8_prefix_end(bytes: &[u8]) -> usize {
    let n = bytes.len();
    for back in 1..=3.min(n) {
        let b = bytes[n - back];
        if b & 0xC0 == 0x80 {
            continue; // continuation byte: keep looking for the lead byte
        }
        let need = if b >= 0xF0 {
            4
        } else if b >= 0xE0 {
            3
        } else if b >= 0xC0 {
            2
        } else {
            1
        };
        return if need > back { n - back } else { n };
    }
    n
}

/// Read `stream` to its end into a [`HeadTail`] of `cap` bytes.
pub async fn drain<R: AsyncRead + Unpin>(mut stream: R, cap: usize) -> HeadTail {
    let mut out = HeadTail::new(cap);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) => break,
            Ok(n) => out.push(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut h = HeadTail::new(16);
        h.push(b"hello ");
        h.push(b"world");
        assert_eq!(h.finish(), ("hello world".to_string(), false));
    }

    #[test]
    fn exactly_the_cap_is_not_cut() {
        let mut h = HeadTail::new(8);
        h.push(b"abcdefgh");
        assert_eq!(h.finish(), ("abcdefgh".to_string(), false));
    }

    #[test]
    fn long_output_keeps_head_and_tail() {
        let mut h = HeadTail::new(8);
        for chunk in [&b"0123"[..], b"456789", b"abcdefghij", b"XYZ"] {
            h.push(chunk);
        }
        let (text, cut) = h.finish();
        assert!(cut);
        assert!(text.starts_with("0123\n"), "{text}");
        assert!(text.ends_with("\nhXYZ") || text.ends_with("iXYZ") || text.ends_with("jXYZ"), "{text}");
        // 23 bytes in, 8 kept.
        assert!(text.contains("[… 15 bytes omitted …]"), "{text}");
    }

    #[test]
    fn one_huge_chunk_stays_bounded() {
        let mut h = HeadTail::new(1024);
        let big = vec![b'x'; 10 << 20];
        h.push(&big);
        h.push(b"END");
        assert_eq!(h.total(), (10 << 20) + 3);
        let (text, cut) = h.finish();
        assert!(cut && text.ends_with("xEND") && text.len() < 1100);
    }

    #[test]
    fn cuts_move_to_character_boundaries() {
        // "é" is two bytes; put one across the head boundary and one across the tail's.
        let mut h = HeadTail::new(6);
        h.push("aaé".as_bytes()); // 4 bytes: head holds "aa" + first byte of é? head cap 3
        h.push(&[b'-'; 20]);
        h.push("éb".as_bytes());
        let (text, cut) = h.finish();
        assert!(cut);
        assert!(!text.contains('\u{FFFD}'), "{text:?}");
        assert!(text.starts_with("aa\n"), "{text:?}");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        let mut h = HeadTail::new(64);
        h.push(&[0x66, 0xFF, 0x6F]);
        assert_eq!(h.finish().0, "f\u{FFFD}o");
    }
}
