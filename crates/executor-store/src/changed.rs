//! Change hints: a signal that the store may have changed, for a reader that would
//! otherwise poll it (the console's live feed), so its next read follows a write at once
//! instead of waiting for its timer.
//!
//! - SQLite: the database's folder is watched (inotify on Linux, the platform's watcher
//!   elsewhere) for writes to the database file and its write-ahead log, which every
//!   process that commits appends to: the daemon's own runner, a command, another daemon.
//! - Postgres: `LISTEN executor_changes`; triggers on the tables the feed reads (messages,
//!   events, decisions) `NOTIFY` it at each commit that wrote them, from any host.
//!
//! A hint is never data: the reader reads the store after it, and still reads on a slow
//! timer in case one was lost. So this must never fail or slow a write (nothing here is on
//! a write's path), and a reader must never take a hint for what changed.

use std::ffi::OsString;
use std::path::Path;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{StoreError, StoreResult};

/// The Postgres channel the change triggers notify.
pub const CHANNEL: &str = "executor_changes";

/// A live source of change hints; readers [`ChangeHints::subscribe`] to it. Dropping it
/// stops the watching.
pub struct ChangeHints {
    hints: watch::Receiver<u64>,
    _source: Source,
}

enum Source {
    /// Kept alive for its callback; dropped, it stops watching.
    Files(#[allow(dead_code)] notify::RecommendedWatcher),
    Listener(JoinHandle<()>),
}

impl Drop for Source {
    fn drop(&mut self) {
        if let Source::Listener(task) = self {
            task.abort();
        }
    }
}

impl ChangeHints {
    /// A receiver whose `changed()` completes after each hint (several hints between two
    /// looks are one). Its `Err` means the source stopped: poll from then on.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.hints.clone()
    }
}

/// Hints of writes to SQLite database `db` by any process.
pub(crate) fn watch_files(db: &Path) -> StoreResult<ChangeHints> {
    let failed = |source: notify::Error| StoreError::ChangeWatch {
        path: db.to_path_buf(),
        source,
    };
    let folder = match db.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let name = db.file_name().map(OsString::from).unwrap_or_default();
    let mut wal = name.clone();
    wal.push("-wal");
    let names = [name, wal];
    let (tell, hints) = watch::channel(0u64);
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        // Only written bytes are a change: opening a connection touches the log's mode and
        // opens both files, and a read must not wake every reader.
        use notify::event::{EventKind, ModifyKind};
        if !matches!(
            event.kind,
            EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Any)
        ) {
            return;
        }
        let ours = event.paths.iter().any(|path| {
            path.file_name()
                .is_some_and(|n| names.iter().any(|m| m == n))
        });
        if ours {
            tell.send_modify(|n| *n = n.wrapping_add(1));
        }
    })
    .map_err(failed)?;
    notify::Watcher::watch(&mut watcher, &folder, notify::RecursiveMode::NonRecursive)
        .map_err(failed)?;
    Ok(ChangeHints {
        hints,
        _source: Source::Files(watcher),
    })
}

/// Hints of commits to the feed's tables on Postgres, from any host; a listener that lost
/// its connection hints once it is back (what it missed may have been a change).
pub(crate) async fn listen_postgres(pool: sqlx::PgPool) -> StoreResult<ChangeHints> {
    let mut heard = super::wake::listen_postgres_channel(pool, CHANNEL).await?;
    let (tell, hints) = watch::channel(0u64);
    let task = tokio::spawn(async move {
        while heard.recv().await.is_some() {
            heard.drain();
            tell.send_modify(|n| *n = n.wrapping_add(1));
        }
    });
    Ok(ChangeHints {
        hints,
        _source: Source::Listener(task),
    })
}
