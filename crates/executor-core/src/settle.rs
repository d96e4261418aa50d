//! Settling writes: one save is one event. Editors write a note in several steps (a first
//! write, then the rest; a temporary file, then a rename), so a note is taken in only once
//! no write has landed on it for the settle time. Each path settles on its own: a note being
//! typed into holds up only itself.
//!
//! Pure: the caller passes the instants (the daemon its monotonic clock, tests their own);
//! nothing here reads a clock or sleeps.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The paths written to recently, each with its last write.
#[derive(Debug, Clone)]
pub struct Settling {
    settle: Duration,
    last_write: HashMap<PathBuf, Instant>,
}

impl Settling {
    pub fn new(settle: Duration) -> Self {
        Self {
            settle,
            last_write: HashMap::new(),
        }
    }

    /// A write landed on `path` at `now`: its settle time starts again.
    pub fn touch(&mut self, path: &Path, now: Instant) {
        self.last_write.insert(path.to_path_buf(), now);
    }

    /// When the next path settles, if any is settling.
    pub fn next_due(&self) -> Option<Instant> {
        self.last_write.values().map(|at| *at + self.settle).min()
    }

    /// Forgets the paths settled at `now`; true when there were any (the caller takes them
    /// in).
    pub fn take_settled(&mut self, now: Instant) -> bool {
        let before = self.last_write.len();
        let settle = self.settle;
        self.last_write.retain(|_, at| now < *at + settle);
        self.last_write.len() < before
    }

    /// The paths still settling at `now`: a scan leaves these notes as they were.
    pub fn unsettled(&self, now: Instant) -> HashSet<PathBuf> {
        self.last_write
            .iter()
            .filter(|(_, at)| now < **at + self.settle)
            .map(|(path, _)| path.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SETTLE: Duration = Duration::from_millis(300);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn nothing_written_is_nothing_settling() {
        let settling = Settling::new(SETTLE);
        assert_eq!(settling.next_due(), None);
        assert!(settling.unsettled(Instant::now()).is_empty());
    }

    #[test]
    fn a_second_write_within_the_window_starts_it_again() {
        let t0 = Instant::now();
        let note = Path::new("/plans/a.md");
        let mut settling = Settling::new(SETTLE);
        settling.touch(note, t0);
        assert_eq!(settling.next_due(), Some(t0 + SETTLE));
        settling.touch(note, t0 + ms(100));
        assert_eq!(settling.next_due(), Some(t0 + ms(400)));
        // At the first write's deadline the note is still settling: it is not taken in.
        assert!(!settling.take_settled(t0 + ms(300)));
        assert!(settling.unsettled(t0 + ms(300)).contains(note));
        // Once quiet for the whole window it settles, once.
        assert!(settling.take_settled(t0 + ms(400)));
        assert!(!settling.take_settled(t0 + ms(500)));
        assert_eq!(settling.next_due(), None);
    }

    #[test]
    fn each_path_settles_on_its_own() {
        let t0 = Instant::now();
        let (a, b) = (Path::new("/plans/a.md"), Path::new("/plans/b.md"));
        let mut settling = Settling::new(SETTLE);
        settling.touch(a, t0);
        settling.touch(b, t0 + ms(200));
        assert!(settling.take_settled(t0 + ms(300)));
        let left = settling.unsettled(t0 + ms(300));
        assert_eq!(left.len(), 1);
        assert!(left.contains(b), "{left:?}");
        assert_eq!(settling.next_due(), Some(t0 + ms(500)));
    }
}
