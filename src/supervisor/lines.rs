//! Reading a worker's output as lines of bytes: never split inside a UTF-8 sequence (a line
//! is only cut at `\n`), and never hold more than a bounded amount of one line in memory,
//! however long the worker makes it.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};
use tokio::sync::mpsc;

/// One line of output, without its `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub bytes: Vec<u8>,
    /// The line was longer than the cap; `bytes` holds its first `cap` bytes.
    pub truncated: bool,
}

impl Line {
    /// The line as text; invalid UTF-8 becomes U+FFFD.
    pub fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        text.strip_suffix('\r').unwrap_or(&text).to_string()
    }
}

/// Reads `reader` to its end, sending each line tagged with `tag`; stops early when the
/// receiver is gone. A last line without `\n` is still a line.
pub async fn read_lines<R, T>(
    mut reader: R,
    cap: usize,
    tag: T,
    out: mpsc::Sender<(T, Line)>,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    T: Copy,
{
    let mut current = Vec::new();
    let mut truncated = false;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            if !current.is_empty() || truncated {
                let line = Line {
                    bytes: current,
                    truncated,
                };
                let _ = out.send((tag, line)).await;
            }
            return Ok(());
        }
        let (consumed, newline) = match chunk.iter().position(|&b| b == b'\n') {
            Some(at) => (at + 1, Some(at)),
            None => (chunk.len(), None),
        };
        let content = &chunk[..newline.unwrap_or(consumed)];
        let room = cap.saturating_sub(current.len());
        if content.len() > room {
            truncated = true;
        }
        current.extend_from_slice(&content[..content.len().min(room)]);
        reader.consume(consumed);
        if newline.is_some() {
            let line = Line {
                bytes: std::mem::take(&mut current),
                truncated,
            };
            truncated = false;
            if out.send((tag, line)).await.is_err() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn collect(input: &[u8], cap: usize) -> Vec<Line> {
        let (tx, mut rx) = mpsc::channel(1024);
        // A tiny buffer forces lines and UTF-8 sequences across reads.
        let reader = tokio::io::BufReader::with_capacity(3, input);
        read_lines(reader, cap, (), tx).await.expect("read");
        let mut lines = Vec::new();
        while let Some(((), line)) = rx.recv().await {
            lines.push(line);
        }
        lines
    }

    #[tokio::test]
    async fn splits_on_newlines_only_keeping_utf8_whole() {
        let lines = collect("héllo wörld\n[STATUS:x] ok\r\nlast".as_bytes(), 1024).await;
        let texts: Vec<String> = lines.iter().map(Line::text).collect();
        assert_eq!(texts, ["héllo wörld", "[STATUS:x] ok", "last"]);
        assert!(lines.iter().all(|l| !l.truncated));
    }

    #[tokio::test]
    async fn a_line_past_the_cap_is_cut_and_the_next_line_is_whole() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\nnext\n");
        let lines = collect(&input, 10).await;
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].bytes, vec![b'x'; 10]);
        assert!(lines[0].truncated);
        assert_eq!(lines[1].text(), "next");
        assert!(!lines[1].truncated);
    }

    #[tokio::test]
    async fn invalid_utf8_is_replaced_not_fatal() {
        let lines = collect(b"ok \xff\xfe end\n", 1024).await;
        assert_eq!(lines[0].text(), "ok \u{fffd}\u{fffd} end");
    }
}
