//! Server-sent events framing (the `text/event-stream` format both providers stream in).
//!
//! A small incremental decoder: bytes go in as the network delivers them, complete
//! events come out. It works on bytes and decodes text one complete line at a time, so
//! a chunk boundary in the middle of a line, an event, or a multi-byte UTF-8 character
//! never matters. It is hand-written rather than taken from a crate because the rest of
//! the layer depends on its exact end-of-stream behaviour (an unfinished event is
//! dropped and reported by the caller as a truncated stream) and because it must stay
//! linear in the input size when a server sends a whole response in one write.

/// One dispatched server-sent event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field; `message` when the server sent none (the SSE default).
    pub event: String,
    /// The `data:` fields joined with `\n`.
    pub data: String,
}

/// Incremental SSE decoder. Feed it with [`SseDecoder::push`]; events are dispatched on
/// the blank line that ends them. Lines end in `\n` or `\r\n`.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    event: String,
    data: String,
    has_data: bool,
    seen_first_line: bool,
}

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next bytes and appends every event they complete to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(offset) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let end = start + offset;
            let mut line = &self.buf[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if !self.seen_first_line {
                self.seen_first_line = true;
                line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
            }
            let line = String::from_utf8_lossy(line).into_owned();
            self.line(&line, out);
            start = end + 1;
        }
        // One drain per chunk keeps decoding linear in the input size.
        self.buf.drain(..start);
    }

    /// Bytes received after the last complete line (an unfinished event at end of stream).
    pub fn pending(&self) -> usize {
        self.buf.len() + self.data.len()
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: if self.event.is_empty() {
                        "message".to_owned()
                    } else {
                        std::mem::take(&mut self.event)
                    },
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event.clear();
            self.data.clear();
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            return; // comment, used as keep-alive by some servers
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => value.clone_into(&mut self.event),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id` and `retry` only matter for browser reconnection, which we never do:
            // a broken model stream is an error, not something to resume.
            _ => {}
        }
    }
}

/// Encodes one event in the wire format (used by the mock server and tests).
pub fn encode_event(event: Option<&str>, data: &str) -> String {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in_pieces(bytes: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece) {
            decoder.push(chunk, &mut out);
        }
        out
    }

    #[test]
    fn events_survive_every_chunk_boundary() {
        let wire = "event: a\ndata: {\"t\":\"h\u{e9}llo \u{1f980}\"}\n\n: keep-alive\n\
                    data: one\ndata: two\n\nevent: b\r\ndata:tight\r\n\r\n";
        let expected = vec![
            SseEvent {
                event: "a".into(),
                data: "{\"t\":\"h\u{e9}llo \u{1f980}\"}".into(),
            },
            SseEvent {
                event: "message".into(),
                data: "one\ntwo".into(),
            },
            SseEvent {
                event: "b".into(),
                data: "tight".into(),
            },
        ];
        for piece in 1..=wire.len() {
            assert_eq!(
                decode_in_pieces(wire.as_bytes(), piece),
                expected,
                "piece {piece}"
            );
        }
    }

    #[test]
    fn unfinished_event_is_not_dispatched() {
        let mut decoder = SseDecoder::new();
        let mut out = Vec::new();
        decoder.push(b"event: x\ndata: partial", &mut out);
        assert!(out.is_empty());
        assert!(decoder.pending() > 0);
    }

    #[test]
    fn event_without_data_is_ignored_and_bom_is_stripped() {
        let mut out = Vec::new();
        SseDecoder::new().push("\u{feff}event: lonely\n\ndata: x\n\n".as_bytes(), &mut out);
        assert_eq!(
            out,
            vec![SseEvent {
                event: "message".into(),
                data: "x".into()
            }]
        );
    }

    #[test]
    fn encode_round_trips() {
        let wire = encode_event(Some("e"), "line1\nline2");
        let mut out = Vec::new();
        SseDecoder::new().push(wire.as_bytes(), &mut out);
        assert_eq!(out[0].data, "line1\nline2");
        assert_eq!(out[0].event, "e");
    }
}
