//! The last of a worker's output, bounded in bytes rather than lines: a worker that writes
//! a few huge lines must not take the runner's memory (or the run record's disk) with it.

use std::collections::VecDeque;

/// The most recent lines whose sizes add up to at most a cap; a line longer than a quarter
/// of the cap is cut (on a character boundary) and marked.
#[derive(Debug, Clone)]
pub struct Tail {
    lines: VecDeque<String>,
    bytes: usize,
    cap: usize,
}

impl Tail {
    pub fn new(cap: usize) -> Self {
        Tail {
            lines: VecDeque::new(),
            bytes: 0,
            cap: cap.max(64),
        }
    }

    pub fn push(&mut self, mut line: String) {
        let longest = self.cap / 4;
        if line.len() > longest {
            let mut end = longest.saturating_sub(16);
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
            line.push_str(" …[cut]");
        }
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.bytes > self.cap {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The newest `n` lines held, oldest first.
    pub fn newest(&self, n: usize) -> impl Iterator<Item = &str> {
        self.lines
            .iter()
            .skip(self.lines.len().saturating_sub(n))
            .map(String::as_str)
    }

    pub fn into_lines(self) -> Vec<String> {
        self.lines.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_lines_are_cut_and_the_total_stays_under_the_cap() {
        let mut tail = Tail::new(64 * 1024);
        for n in 0..300 {
            tail.push(format!("{n} {}", "é".repeat(512 * 1024)));
        }
        assert!(tail.bytes() <= 64 * 1024, "{} bytes", tail.bytes());
        let lines = tail.into_lines();
        assert!(lines
            .last()
            .is_some_and(|l| l.starts_with("299 ") && l.ends_with("[cut]")));
        assert!(lines.len() >= 3);
    }

    #[test]
    fn short_lines_are_kept_whole_newest_last() {
        let mut tail = Tail::new(100);
        for n in 0..50 {
            tail.push(format!("line {n}"));
        }
        let lines = tail.into_lines();
        assert_eq!(lines.last().map(String::as_str), Some("line 49"));
        assert!(lines.iter().all(|l| l.starts_with("line ")));
        assert!(lines.iter().map(String::len).sum::<usize>() <= 100);
    }
}
