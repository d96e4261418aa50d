//! A worker's disk budget (`[sandbox] max_disk`): what it has written in its places (its
//! worktree, its home) is measured while it runs, and past the budget the supervisor stops
//! it. Its `/tmp`, inside the wall, is a tmpfs of the budget's size, so the kernel holds it.
//!
//! The measure is a walk of the places (allocated blocks, not following links or crossing
//! into other file systems), repeated every half second at most and, for a big tree, ten
//! times as long as the walk took: a budget checked this way can be passed by what the
//! worker writes between two walks, and no single file passes `max_file_size` (which the
//! wall lowers to the budget when the budget is smaller).
//!
//! What it must never do: follow a link out of the places (a worker could point one at
//! the whole disk), or hold the supervisor's loop while it walks.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a worker's writes are counted, and how much it may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskBudget {
    pub places: Vec<PathBuf>,
    pub max: u64,
}

/// The bytes allocated under `places`, each counted once.
pub fn used(places: &[PathBuf]) -> u64 {
    let mut seen = std::collections::HashSet::new();
    places.iter().map(|p| walk(p, None, &mut seen)).sum()
}

fn walk(path: &Path, device: Option<u64>, seen: &mut std::collections::HashSet<(u64, u64)>) -> u64 {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return 0;
    };
    if device.is_some_and(|d| d != meta.dev()) || !seen.insert((meta.dev(), meta.ino())) {
        return 0;
    }
    let mut total = meta.blocks() * 512;
    if meta.is_dir() {
        if let Ok(entries) = std::fs::read_dir(path) {
            for entry in entries.flatten() {
                total += walk(&entry.path(), Some(meta.dev()), seen);
            }
        }
    }
    total
}

/// Resolves when the worker has written more than its budget, with what it has written.
pub async fn exceeded(budget: DiskBudget) -> u64 {
    let mut pause = Duration::from_millis(500);
    loop {
        tokio::time::sleep(pause).await;
        let places = budget.places.clone();
        let started = std::time::Instant::now();
        let used = tokio::task::spawn_blocking(move || used(&places))
            .await
            .unwrap_or(0);
        if used > budget.max {
            return used;
        }
        pause = (started.elapsed() * 10).max(Duration::from_millis(500));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measure_counts_what_is_written_once_and_follows_no_link() {
        let dir = tempfile::tempdir().expect("tmp");
        let place = dir.path().join("wt");
        std::fs::create_dir_all(&place).expect("mkdir");
        let before = used(std::slice::from_ref(&place));
        std::fs::write(place.join("a"), vec![1u8; 1 << 20]).expect("write");
        std::fs::hard_link(place.join("a"), place.join("b")).expect("link");
        let outside = dir.path().join("big");
        std::fs::write(&outside, vec![1u8; 4 << 20]).expect("write");
        std::os::unix::fs::symlink(&outside, place.join("c")).expect("symlink");
        let after = used(std::slice::from_ref(&place));
        let grown = after - before;
        assert!(
            (1 << 20..2 << 20).contains(&grown),
            "one MiB counted once, the link's target not at all: {grown}"
        );
    }
}
