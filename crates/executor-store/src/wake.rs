//! Wake-ups: a command that changed the queue or answered an escalation tells a running
//! daemon at once, instead of leaving the work to the daemon's next timer.
//!
//! - SQLite: a unix datagram socket beside the database file (`executor.db.wake`), or, when
//!   that path is too long for a socket address (108 bytes), one under `$XDG_RUNTIME_DIR`
//!   or `/tmp`, named by a hash of the database path, in a folder only its user may enter.
//!   The socket itself is mode 0600: another user cannot poke the daemon.
//! - Postgres: `LISTEN executor_wake` / `NOTIFY executor_wake`, so a command on one host
//!   wakes every runner on every host. A lost listener connection is made again with
//!   back-off, and the daemon is told it may have missed a wake-up.
//!
//! A wake-up is a hint, never data: it is sent after the write committed, the daemon reads
//! the store after it, and its own timer finds the work anyway. So this module must never
//! fail a command for a wake-up it could not deliver (nobody listening is the normal case
//! when no daemon runs), and the daemon must never take a wake-up's kind as the truth about
//! what changed.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::{Store, StoreError, StoreResult};

/// The Postgres channel every runner listens on.
pub const CHANNEL: &str = "executor_wake";

/// What changed, as the sender says; the daemon reads the store whatever it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A task was added, approved, skipped, re-analyzed, cancelled or retried.
    Queue,
    /// An escalation was answered.
    Answer,
}

impl Wake {
    pub fn as_str(self) -> &'static str {
        match self {
            Wake::Queue => "queue",
            Wake::Answer => "answer",
        }
    }

    /// Reads a wake-up; anything unknown (a newer sender) is taken as a change of the queue,
    /// so it still wakes the daemon.
    pub fn parse(text: &str) -> Self {
        match text.trim() {
            "answer" => Wake::Answer,
            _ => Wake::Queue,
        }
    }
}

/// What a listener hears.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Heard {
    Wake(Wake),
    /// The listener was down for a while (a Postgres connection lost and made again):
    /// wake-ups may have been missed, so the daemon should look at everything.
    Reconnected,
}

/// Tells every daemon listening on `store` that `wake` happened. Never fails: a wake-up
/// that cannot be delivered only means the daemon finds the change on its next timer.
pub async fn notify(store: &dyn Store, wake: Wake) {
    if let Err(error) = store.wake(wake).await {
        tracing::debug!(%error, kind = wake.as_str(), "cannot wake a running daemon; it finds the change on its next pass");
    }
}

/// A live listener: wake-ups arrive on [`Wakes::recv`] until it is dropped (which stops the
/// listening and removes the socket file).
pub struct Wakes {
    heard: mpsc::Receiver<Heard>,
    task: JoinHandle<()>,
    socket: Option<SocketFile>,
    /// Where it listens, for the log.
    pub address: String,
}

impl Wakes {
    /// The next wake-up; `None` once the listener stopped for good.
    pub async fn recv(&mut self) -> Option<Heard> {
        self.heard.recv().await
    }

    /// Drops every wake-up already waiting: one pass answers them all.
    pub fn drain(&mut self) {
        while self.heard.try_recv().is_ok() {}
    }
}

impl Drop for Wakes {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(socket) = self.socket.take() {
            socket.remove();
        }
    }
}

/// Wake-ups waiting at most; more are dropped, as the pass they ask for is coming anyway.
const QUEUED: usize = 16;

// ---- SQLite: a unix datagram socket ----

/// The longest socket path: `sun_path` holds 108 bytes with the closing NUL.
const SUN_PATH_MAX: usize = 107;

/// The socket a daemon on `db` listens on, then the others a sender should also try (a
/// daemon started under another `$XDG_RUNTIME_DIR` falls back to `/tmp`).
pub fn socket_paths(db: &Path) -> Vec<PathBuf> {
    let canonical = std::fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    let runtime = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from);
    candidates(
        db,
        &canonical,
        runtime.as_deref(),
        nix::unistd::getuid().as_raw(),
        std::process::id(),
    )
}

/// The socket paths for `db`, best first: beside the database when the path (and the
/// temporary name it is bound under) fits a socket address; else in a private folder under
/// the runtime folder and under `/tmp`, named by a hash of the database's canonical path.
fn candidates(
    db: &Path,
    canonical: &Path,
    runtime: Option<&Path>,
    uid: u32,
    pid: u32,
) -> Vec<PathBuf> {
    let mut beside = db.as_os_str().to_owned();
    beside.push(".wake");
    let beside = PathBuf::from(beside);
    if fits(&beside) && fits(&temporary(&beside, pid)) {
        return vec![beside];
    }
    let digest = Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    let key: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("{key}.wake");
    let mut found = Vec::new();
    if let Some(runtime) = runtime.filter(|r| r.is_absolute()) {
        let path = runtime.join(format!("executor-{uid}")).join(&name);
        if fits(&path) && fits(&temporary(&path, pid)) {
            found.push(path);
        }
    }
    found.push(
        Path::new("/tmp")
            .join(format!("executor-{uid}"))
            .join(&name),
    );
    found
}

fn fits(path: &Path) -> bool {
    path.as_os_str().len() <= SUN_PATH_MAX
}

/// The name a socket is bound under before it is made private and moved into place.
fn temporary(path: &Path, pid: u32) -> PathBuf {
    path.with_file_name(format!(".{pid}.wtmp"))
}

/// Sends `wake` to every socket a daemon on `db` may listen on. Nobody listening (no file,
/// a stale file, a full buffer) is not an error.
pub(crate) fn send_datagram(db: &Path, wake: Wake) -> StoreResult<()> {
    let socket_error = |path: &Path, source| StoreError::WakeSocket {
        path: path.to_path_buf(),
        source,
    };
    let socket = std::os::unix::net::UnixDatagram::unbound().map_err(|e| socket_error(db, e))?;
    // A daemon too busy to read must never hold up a command.
    socket
        .set_nonblocking(true)
        .map_err(|e| socket_error(db, e))?;
    for path in socket_paths(db) {
        match socket.send_to(wake.as_str().as_bytes(), &path) {
            Ok(_) => {}
            Err(e) if nobody_listening(&e) => {}
            Err(e) => return Err(socket_error(&path, e)),
        }
    }
    Ok(())
}

fn nobody_listening(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::NotFound | ErrorKind::ConnectionRefused | ErrorKind::WouldBlock
    ) || error.raw_os_error() == Some(nix::libc::ENOTDIR)
}

/// The socket file a listener made, removed when it stops (unless another listener has
/// replaced it meanwhile).
struct SocketFile {
    path: PathBuf,
    inode: u64,
}

impl SocketFile {
    fn remove(self) {
        let ours = std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.inode);
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Listens on the socket for `db`. Fails when another daemon already listens there, or
/// when the socket cannot be made.
pub(crate) fn listen_socket(db: &Path) -> StoreResult<Wakes> {
    let path = socket_paths(db)
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::WakeSocket {
            path: db.to_path_buf(),
            source: std::io::Error::other("no socket path"),
        })?;
    let socket_error = |source| StoreError::WakeSocket {
        path: path.clone(),
        source,
    };
    let beside = path.parent() == db.parent();
    if !beside {
        if let Some(dir) = path.parent() {
            private_dir(dir).map_err(socket_error)?;
        }
    }
    // A live listener answers a connect; a stale file from a killed daemon refuses it.
    let probe = std::os::unix::net::UnixDatagram::unbound().map_err(socket_error)?;
    if probe.connect(&path).is_ok() {
        return Err(socket_error(std::io::Error::new(
            std::io::ErrorKind::AddrInUse,
            "another daemon listens for wake-ups on this database",
        )));
    }
    // Bound under a temporary name, made private, then moved into place, so the socket is
    // never reachable by another user and a stale file is replaced in one step.
    let temporary = temporary(&path, std::process::id());
    let _ = std::fs::remove_file(&temporary);
    let bound = std::os::unix::net::UnixDatagram::bind(&temporary).map_err(socket_error)?;
    let private = std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&temporary, &path));
    if let Err(error) = private {
        let _ = std::fs::remove_file(&temporary);
        return Err(socket_error(error));
    }
    let inode = std::fs::symlink_metadata(&path)
        .map_err(socket_error)?
        .ino();
    let socket = SocketFile {
        path: path.clone(),
        inode,
    };
    bound.set_nonblocking(true).map_err(socket_error)?;
    let bound = tokio::net::UnixDatagram::from_std(bound).map_err(socket_error)?;
    let (tx, heard) = mpsc::channel(QUEUED);
    let task = tokio::spawn(async move {
        let mut buffer = [0u8; 64];
        loop {
            match bound.recv(&mut buffer).await {
                Ok(n) => {
                    let text = String::from_utf8_lossy(&buffer[..n]);
                    if tx
                        .try_send(Heard::Wake(Wake::parse(&text)))
                        .is_err_and(|e| matches!(e, mpsc::error::TrySendError::Closed(_)))
                    {
                        return;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "cannot read the wake-up socket; the daemon's timer takes over");
                    return;
                }
            }
        }
    });
    Ok(Wakes {
        heard,
        task,
        socket: Some(socket),
        address: path.display().to_string(),
    })
}

/// Makes `dir` (mode 0700) or checks that it is this user's and private.
fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(dir)?;
    let uid = nix::unistd::getuid().as_raw();
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private folder of this user (it must be a folder, owned by uid {uid}, mode 0700)",
                dir.display()
            ),
        ));
    }
    Ok(())
}

// ---- Postgres: LISTEN / NOTIFY ----

/// Listens on [`CHANNEL`]. The first connection is made here (so a daemon that cannot
/// listen says so at its start); a lost one is made again in the background, with back-off.
pub(crate) async fn listen_postgres(pool: sqlx::PgPool) -> StoreResult<Wakes> {
    listen_postgres_channel(pool, CHANNEL).await
}

/// Listens on `channel` as [`listen_postgres`] does on [`CHANNEL`]; each notification is
/// heard as a wake-up of what its payload says.
pub(crate) async fn listen_postgres_channel(
    pool: sqlx::PgPool,
    channel: &'static str,
) -> StoreResult<Wakes> {
    let first = pg_listener(&pool, channel).await?;
    let (tx, heard) = mpsc::channel(QUEUED);
    let task = tokio::spawn(async move {
        let mut listener = Some(first);
        let mut backoff = Backoff::default();
        loop {
            let mut live = match listener.take() {
                Some(live) => live,
                None => match pg_listener(&pool, channel).await {
                    Ok(live) => {
                        tracing::info!(channel, "listening on Postgres again");
                        backoff = Backoff::default();
                        if tx.send(Heard::Reconnected).await.is_err() {
                            return;
                        }
                        live
                    }
                    Err(StoreError::Postgres(sqlx::Error::PoolClosed)) => return,
                    Err(error) => {
                        let wait = backoff.next_wait();
                        tracing::warn!(%error, channel, retry_in = ?wait, "cannot listen on Postgres");
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                },
            };
            loop {
                match live.try_recv().await {
                    Ok(Some(notification)) => {
                        let wake = Wake::parse(notification.payload());
                        if tx
                            .try_send(Heard::Wake(wake))
                            .is_err_and(|e| matches!(e, mpsc::error::TrySendError::Closed(_)))
                        {
                            return;
                        }
                    }
                    Ok(None) => {
                        tracing::warn!(
                            channel,
                            "the Postgres connection listening was lost; making it again"
                        );
                        break;
                    }
                    // The store is closing: so is the daemon.
                    Err(sqlx::Error::PoolClosed) => return,
                    Err(error) => {
                        tracing::warn!(%error, channel, "the Postgres connection listening failed; making it again");
                        break;
                    }
                }
            }
            drop(live);
            tokio::time::sleep(backoff.next_wait()).await;
        }
    });
    Ok(Wakes {
        heard,
        task,
        socket: None,
        address: format!("Postgres channel {channel}"),
    })
}

async fn pg_listener(
    pool: &sqlx::PgPool,
    channel: &str,
) -> StoreResult<sqlx::postgres::PgListener> {
    let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
    // A lost connection is made again by the loop above (which then says so), not silently
    // inside the listener.
    listener.eager_reconnect(false);
    listener.listen(channel).await?;
    Ok(listener)
}

/// The wait before making a lost connection again: 100 ms, doubling to 30 s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            next: Duration::from_millis(100),
        }
    }
}

impl Backoff {
    const MAX: Duration = Duration::from_secs(30);

    pub(crate) fn next_wait(&mut self) -> Duration {
        let wait = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_database_path_gets_its_socket_beside_it() {
        let db = Path::new("/home/o/project/executor.db");
        assert_eq!(
            candidates(db, db, Some(Path::new("/run/user/1000")), 1000, 42),
            [PathBuf::from("/home/o/project/executor.db.wake")]
        );
    }

    #[test]
    fn a_long_database_path_falls_back_to_a_private_folder_keyed_by_its_hash() {
        let long = format!("/home/o/{}/executor.db", "deep/".repeat(25));
        let db = Path::new(&long);
        let found = candidates(db, db, Some(Path::new("/run/user/1000")), 1000, 42);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].starts_with("/run/user/1000/executor-1000"),
            "{found:?}"
        );
        assert!(found[1].starts_with("/tmp/executor-1000"), "{found:?}");
        assert_eq!(found[0].file_name(), found[1].file_name());
        assert!(found.iter().all(|p| fits(p)), "{found:?}");
        let other = format!("/home/o/{}/other.db", "deep/".repeat(25));
        let elsewhere = candidates(Path::new(&other), Path::new(&other), None, 1000, 42);
        assert_eq!(elsewhere.len(), 1, "no runtime folder: /tmp only");
        assert_ne!(elsewhere[0].file_name(), found[1].file_name());
    }

    #[test]
    fn a_relative_runtime_folder_is_not_used() {
        let long = format!("/home/o/{}/executor.db", "deep/".repeat(25));
        let db = Path::new(&long);
        let found = candidates(db, db, Some(Path::new("run")), 7, 42);
        assert_eq!(found.len(), 1);
        assert!(found[0].starts_with("/tmp/executor-7"));
    }

    #[test]
    fn unknown_wake_ups_still_wake() {
        assert_eq!(Wake::parse("answer"), Wake::Answer);
        assert_eq!(Wake::parse("queue"), Wake::Queue);
        assert_eq!(Wake::parse("cancel-everything"), Wake::Queue);
        for wake in [Wake::Queue, Wake::Answer] {
            assert_eq!(Wake::parse(wake.as_str()), wake);
        }
    }

    #[test]
    fn the_reconnect_wait_doubles_to_a_ceiling() {
        let mut backoff = Backoff::default();
        let waits: Vec<u64> = (0..11)
            .map(|_| backoff.next_wait().as_millis() as u64)
            .collect();
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]
        );
    }

    #[tokio::test]
    async fn a_datagram_reaches_the_listener_and_a_second_listener_is_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("executor.db");
        send_datagram(&db, Wake::Queue).expect("nobody listening is fine");
        let mut wakes = listen_socket(&db).expect("listen");
        let socket = dir.path().join("executor.db.wake");
        let mode = std::fs::metadata(&socket).expect("socket file").mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(listen_socket(&db).is_err(), "one listener per database");
        send_datagram(&db, Wake::Answer).expect("send");
        assert_eq!(wakes.recv().await, Some(Heard::Wake(Wake::Answer)));
        drop(wakes);
        assert!(!socket.exists(), "the socket file goes with its listener");
    }

    #[tokio::test]
    async fn a_stale_socket_file_is_replaced() {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("executor.db");
        let stale = std::os::unix::net::UnixDatagram::bind(dir.path().join("executor.db.wake"))
            .expect("a socket");
        drop(stale);
        let mut wakes = listen_socket(&db).expect("the stale file is replaced");
        send_datagram(&db, Wake::Queue).expect("send");
        assert_eq!(wakes.recv().await, Some(Heard::Wake(Wake::Queue)));
    }
}
