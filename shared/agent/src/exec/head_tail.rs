//! Keeping the start and the end of a long output.
//!
//! The interesting parts of a command's output are usually its first lines (what
//! ran) and its last lines (how it ended: the error, the summary). [`HeadTail`]
//! keeps both within a fixed memory budget however much a process prints, and
//! [`preview`] does the same for a string that is already in memory.

use std::collections::VecDeque;

/// A byte sink that keeps the first `head` and the last `tail` bytes written.
#[derive(Debug)]
pub(crate) struct HeadTail {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: usize,
}

impl HeadTail {
    /// A sink keeping at most `head_cap + tail_cap` bytes.
    pub(crate) fn new(head_cap: usize, tail_cap: usize) -> Self {
        Self {
            head_cap,
            tail_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    /// Appends bytes.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        if self.head.len() < self.head_cap {
            let take = bytes.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if self.tail_cap == 0 || bytes.is_empty() {
            return;
        }
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// Bytes that were dropped from the middle.
    pub(crate) fn omitted(&self) -> usize {
        self.total - self.head.len() - self.tail.len()
    }

    /// The kept text, with a marker where the middle was dropped. Invalid UTF-8
    /// becomes U+FFFD; a character cut by the head or tail edge is dropped whole.
    pub(crate) fn render(&self) -> String {
        let omitted = self.omitted();
        if omitted == 0 {
            let mut all = self.head.clone();
            all.extend(self.tail.iter());
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head = trim_partial_end(&self.head);
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let tail = trim_partial_start(&tail);
        format!(
            "{}\n\n… {omitted} bytes of output omitted …\n\n{}",
            String::from_utf8_lossy(head),
            String::from_utf8_lossy(tail)
        )
    }
}

/// Drops a UTF-8 sequence cut off at the end of `bytes`.
fn trim_partial_end(bytes: &[u8]) -> &[u8] {
    let mut end = bytes.len();
    // A cut sequence is at most 3 continuation/lead bytes long.
    for back in 1..=3.min(bytes.len()) {
        let b = bytes[bytes.len() - back];
        if b & 0b1100_0000 == 0b1100_0000 {
            // Lead byte: is the sequence it starts complete?
            let need = if b >= 0b1111_0000 {
                4
            } else if b >= 0b1110_0000 {
                3
            } else {
                2
            };
            if back < need {
                end = bytes.len() - back;
            }
            break;
        }
        if b & 0b1000_0000 == 0 {
            break;
        }
    }
    &bytes[..end]
}

/// Drops continuation bytes at the start of `bytes` (the rest of a cut character).
fn trim_partial_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|&&b| b & 0b1100_0000 == 0b1000_0000)
        .count();
    &bytes[skip..]
}

/// The first `head` and last `tail` characters of `text` (cut at line ends where
/// one is near), or `None` when the text is short enough to show whole.
pub(crate) fn preview(text: &str, head: usize, tail: usize) -> Option<(String, String)> {
    let chars = text.chars().count();
    if chars <= head + tail {
        return None;
    }
    let head_end = text.char_indices().nth(head).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .nth(chars - tail)
        .map_or(text.len(), |(i, _)| i);
    let mut head_text = &text[..head_end];
    // Prefer to end the head at a line break if one is in its last quarter.
    if let Some(nl) = head_text.rfind('\n')
        && nl >= head_end * 3 / 4
    {
        head_text = &text[..nl];
    }
    let mut tail_text = &text[tail_start..];
    if let Some(nl) = tail_text.find('\n')
        && nl <= tail_text.len() / 4
    {
        tail_text = &tail_text[nl + 1..];
    }
    Some((head_text.to_string(), tail_text.to_string()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut buf = HeadTail::new(10, 10);
        buf.push(b"hello ");
        buf.push(b"world");
        assert_eq!(buf.render(), "hello world");
        assert_eq!(buf.omitted(), 0);
    }

    #[test]
    fn long_output_keeps_head_and_tail_with_marker() {
        let mut buf = HeadTail::new(5, 5);
        for chunk in [&b"01234"[..], b"56789", b"abcdefghij", b"KLMNO"] {
            buf.push(chunk);
        }
        assert_eq!(buf.total, 25);
        assert_eq!(buf.omitted(), 15);
        let text = buf.render();
        assert!(text.starts_with("01234"));
        assert!(text.ends_with("KLMNO"));
        assert!(text.contains("15 bytes of output omitted"));
    }

    #[test]
    fn tail_follows_many_small_writes() {
        let mut buf = HeadTail::new(2, 3);
        for b in b"abcdefgh" {
            buf.push(&[*b]);
        }
        let text = buf.render();
        assert!(text.starts_with("ab"));
        assert!(text.ends_with("fgh"));
    }

    #[test]
    fn cut_characters_are_dropped_not_mangled() {
        // "é" is two bytes; cut it at both edges.
        let mut buf = HeadTail::new(3, 3);
        buf.push("aaéxxxxxxéb".as_bytes());
        let text = buf.render();
        assert!(!text.contains('\u{FFFD}'), "{text:?}");
        assert!(text.starts_with("aa"));
        assert!(text.ends_with("éb"));
    }

    #[test]
    fn preview_splits_long_text_only() {
        assert!(preview("short", 10, 10).is_none());
        let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let (head, tail) = preview(&text, 50, 30).unwrap();
        assert!(head.starts_with("line 0"));
        assert!(tail.trim_end().ends_with("line 99"));
        assert!(head.len() <= 50 && tail.len() <= 30);
    }
}
