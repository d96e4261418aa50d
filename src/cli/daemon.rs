//! `executor daemon`: the long-running process. It keeps the queue in line with the plans
//! folder (watched, so a note is taken in as soon as it has settled: one save is one event,
//! see [`crate::core::settle`]; rescanned on a timer as well, because file watchers can miss
//! events), runs approved tasks (a runner pass starts when
//! an intake brings approved work, when a command from another process wakes it, see
//! [`crate::store::wake`], and on the reconciling timer), and beats a heartbeat that
//! `executor status` reads.
//!
//! While the wake-up channel is live, the full reconciling pass (approved tasks, answered
//! escalations) runs every `runner.loop_sleep`; the heartbeat still looks at parents of
//! subtasks and the record step's answers. Without the channel (another daemon holds the
//! socket, Postgres refused to listen) every heartbeat is a full pass, as before. It stops on SIGINT or SIGTERM; killed harder, it loses nothing
//! that was committed, and the next start takes in whatever changed meanwhile.
//!
//! Polled sources (Asana, GitHub issues), when configured, are read every `poll_interval` in
//! the background,
//! and pending tasks are analyzed (rule filters, then the agent) whenever there are some,
//! under the analyzer's own lock.
//!
//! A failure inside one pass (a busy database, an unreadable folder, Asana down) is logged
//! and the daemon goes on; only a failure to start is fatal.

use crate::http::secret::ReadSecret as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::config::Settings;
use crate::core::clock::{Clock, SystemClock};
use crate::core::queue::QueueStatus;
use crate::core::record::Heartbeat;
use crate::core::settle::Settling;
use crate::ops::intake::PlansIntake;
use crate::ops::source_intake::SourceIntake;
use crate::runner::drive::Runner;
use crate::runner::engine::{failed_pass, log_ended, Note, Scheduler};
use crate::store::wake::{Heard, Wakes};
use crate::store::Store;
use crate::web::github_webhook::PrLook;
use std::sync::Arc;
use tokio::task::JoinHandle;

const HEARTBEAT_EVERY: Duration = Duration::from_secs(5);

pub async fn run(settings: &Settings, shared: Arc<dyn Store>, clock: &SystemClock) -> Result<()> {
    super::doctor::preflight(settings)?;
    let runner = super::build_runner(settings, Arc::clone(&shared))?;
    let _leases = super::LeaseKeeper::start(&runner);
    let chat = super::chat::build(settings, runner.settings.notices.clone()).await?;
    let chat_tasks = start_chat(chat, &shared).await?;
    // GitHub's webhook deliveries, when a secret is configured: each asks for a PR look now.
    // The web server starts before the daemon says it runs: a console that cannot start
    // stops the daemon before it says so, and the moment it says so is not followed by the
    // server's start before the plans folder is first read.
    let (looks_tx, mut looks_rx) = mpsc::unbounded_channel::<PrLook>();
    let (web, webhooks) = start_web(settings, &runner, &shared, looks_tx).await?;
    let mut daemon = Daemon::start(settings, &shared, clock, runner).await?;
    daemon.webhooks = webhooks;
    // The paths each file event names; a failed event names the folder (a full look).
    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<Vec<PathBuf>>();
    // Keep the watcher alive for the daemon's lifetime: dropping it stops the events.
    let _watcher = watch_plans(daemon.intake.as_ref(), events_tx)?;

    tracing::info!(pid = daemon.heartbeat.pid, storage = %settings.storage.display(), "executor daemon started");
    daemon.ingest().await;
    daemon.start_background();
    // The first pass reconciles what a previous runner left, then works approved tasks.
    daemon.engine.start();

    let mut beat_timer = tokio::time::interval(HEARTBEAT_EVERY);
    let mut rescan_timer = tokio::time::interval(settings.raw.runner.loop_sleep);
    beat_timer.tick().await;
    rescan_timer.tick().await;
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);

    loop {
        tokio::select! {
            signal = &mut shutdown => {
                tracing::info!(%signal, "stopping");
                break;
            }
            Some(mut paths) = events_rx.recv() => {
                // A write starts its note's settle time again; nothing is taken in yet.
                let now = std::time::Instant::now();
                while let Ok(more) = events_rx.try_recv() {
                    paths.extend(more);
                }
                for path in &paths {
                    daemon.settling.touch(path, now);
                }
            }
            _ = settled(daemon.settling.next_due()) => daemon.on_settled().await,
            heard = next_wake(&mut daemon.wakes) => daemon.on_heard(heard).await,
            Some(look) = looks_rx.recv() => {
                while looks_rx.try_recv().is_ok() {}
                tracing::debug!(event = %look.event, prs = ?look.prs, "a webhook asks for a PR look");
                // The delivery says something changed: the look reads GitHub again instead
                // of the client's cached answers (one that came during the last look gets a
                // look of its own).
                daemon.engine.look_at_prs(true);
            }
            note = daemon.engine.next() => {
                if let Note::Ended { kind, passed } = &note {
                    log_ended(*kind, passed);
                    if let Err(error) = passed {
                        daemon.record_error(&format!("{}: {error:#}", failed_pass(*kind))).await;
                    }
                }
                daemon.engine.heard(&note).await;
            }
            _ = rescan_timer.tick() => daemon.on_rescan().await,
            _ = beat_timer.tick() => daemon.on_beat().await?,
        }
    }

    if let Some(web) = web {
        web.abort();
    }
    for task in chat_tasks {
        task.abort();
    }
    daemon.stop().await
}

/// The daemon's state between the events its loop hears: the scheduler of runs, the plans
/// intake, the polled sources, the analyzer and the heartbeat.
struct Daemon<'a> {
    settings: &'a Settings,
    shared: Arc<dyn Store>,
    clock: &'a SystemClock,
    runner: Runner,
    engine: Scheduler,
    /// Where background work says approved work may be waiting.
    changed: mpsc::UnboundedSender<Note>,
    sources: Vec<Arc<tokio::sync::Mutex<SourceIntake>>>,
    source_polls: Vec<Option<JoinHandle<()>>>,
    /// The analyzer runs here unless another process (`executor analyze --once`) holds its
    /// lock; then that one analyzes, and this daemon tries the lock again on each beat.
    analyzer_lock: Option<super::lock::RunnerLock>,
    analyzer: Option<Arc<crate::analyzer::Analyzer>>,
    /// Why the analyzer could not be built the last time this daemon tried, said once.
    analyzer_failed: Option<String>,
    analysis: Option<JoinHandle<()>>,
    heartbeat: Heartbeat,
    /// Commands from other processes (`go`, `decide`, …) wake this daemon at once.
    wakes: Option<Wakes>,
    intake: Option<PlansIntake>,
    /// One save is one event: a note is taken in once it has gone `settle` unwritten.
    settling: Settling,
    /// GitHub's webhook deliveries are served, so the PR poll only reconciles.
    webhooks: bool,
}

impl<'a> Daemon<'a> {
    async fn start(
        settings: &'a Settings,
        shared: &Arc<dyn Store>,
        clock: &'a SystemClock,
        runner: Runner,
    ) -> Result<Daemon<'a>> {
        let engine = Scheduler::new(runner.clone());
        let sources: Vec<_> = super::source_intakes(settings)?
            .into_iter()
            .map(|s| Arc::new(tokio::sync::Mutex::new(s)))
            .collect();
        let started_at = clock.now();
        let heartbeat = Heartbeat {
            component: "daemon".to_string(),
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            pid: i64::from(std::process::id()),
            started_at,
            beat_at: started_at,
            stopped_at: None,
        };
        shared
            .beat(&heartbeat)
            .await
            .context("cannot record the daemon's heartbeat")?;
        let intake = settings.plans.clone().map(PlansIntake::new);
        let settle = intake.as_ref().map_or(Duration::ZERO, |i| i.settle());
        let mut daemon = Daemon {
            settings,
            shared: Arc::clone(shared),
            clock,
            changed: engine.sender(),
            runner,
            engine,
            source_polls: sources.iter().map(|_| None).collect(),
            sources,
            analyzer_lock: None,
            analyzer: None,
            analyzer_failed: None,
            analysis: None,
            heartbeat,
            wakes: listen(shared.as_ref()).await,
            intake,
            settling: Settling::new(settle),
            webhooks: false,
        };
        daemon.take_analyzer(true)?;
        Ok(daemon)
    }

    /// Takes the plans folder in, leaving the notes still being written for when they
    /// settle.
    async fn ingest(&mut self) {
        if let Some(intake) = self.intake.as_mut() {
            ingest(intake, self.shared.as_ref(), self.clock, &self.settling).await;
        }
    }

    fn start_background(&mut self) {
        start_source_polls(
            &self.sources,
            &self.shared,
            &mut self.source_polls,
            &self.changed,
        );
        self.start_analysis();
    }

    fn start_analysis(&mut self) {
        start_analysis(
            self.analyzer.as_ref(),
            &self.shared,
            &mut self.analysis,
            self.settings.raw.runner.loop_sleep,
            &self.changed,
        );
    }

    fn take_analyzer(&mut self, first: bool) -> Result<()> {
        take_analyzer(
            self.settings,
            &self.shared,
            &mut self.analyzer_lock,
            &mut self.analyzer,
            &mut self.analyzer_failed,
            first,
        )
    }

    async fn on_settled(&mut self) {
        if self.settling.take_settled(std::time::Instant::now()) {
            self.ingest().await;
            self.engine.wake().await;
        }
    }

    async fn on_heard(&mut self, heard: Option<Heard>) {
        let Some(heard) = heard else {
            tracing::warn!("the wake-up listener stopped; commands from other processes are picked up on the heartbeat");
            self.wakes = None;
            return;
        };
        // One pass answers every wake-up that came meanwhile.
        if let Some(wakes) = self.wakes.as_mut() {
            wakes.drain();
        }
        tracing::debug!(?heard, "woken");
        if heard == Heard::Reconnected {
            self.ingest().await;
        }
        self.engine.wake().await;
        self.start_analysis();
    }

    async fn on_rescan(&mut self) {
        self.ingest().await;
        self.engine.wake().await;
        // With webhooks, the poll only reconciles what a delivery missed.
        if self
            .engine
            .pr_look_due(self.webhooks, self.settings.raw.forge.webhook_poll)
        {
            self.engine.look_at_prs(false);
        }
    }

    async fn on_beat(&mut self) -> Result<()> {
        reload_contract(&self.runner);
        start_source_polls(
            &self.sources,
            &self.shared,
            &mut self.source_polls,
            &self.changed,
        );
        self.take_analyzer(false)?;
        self.start_analysis();
        self.heartbeat.beat_at = self.clock.now();
        self.beat().await;
        if self.wakes.is_some() {
            // A wake-up left to a pass that was just ending its claims.
            self.engine.retry_deferred().await;
            self.engine.look_in_process().await;
        } else {
            self.engine.wake().await;
        }
        Ok(())
    }

    /// Keeps `message` as the daemon's last error, where `executor status` shows it with its
    /// time and count (best effort: the store may be what failed).
    async fn record_error(&self, message: &str) {
        let recorded = self
            .shared
            .record_component_error(
                &self.heartbeat.component,
                &self.heartbeat.host,
                message,
                self.clock.now(),
            )
            .await;
        if let Err(error) = recorded {
            tracing::warn!(%error, "cannot record the daemon's last error");
        }
    }

    /// Records the daemon's heartbeat, and the analyzer's while this daemon holds its lock
    /// (so `executor status` says who analyzes).
    async fn beat(&self) {
        let store = self.shared.as_ref();
        if let Err(error) = store.beat(&self.heartbeat).await {
            tracing::warn!(%error, "cannot record the heartbeat");
        }
        if self.analyzer_lock.is_some() {
            let analyzing = Heartbeat {
                component: "analyzer".to_string(),
                ..self.heartbeat.clone()
            };
            if let Err(error) = store.beat(&analyzing).await {
                tracing::warn!(%error, "cannot record the analyzer's heartbeat");
            }
        }
    }

    /// Stops everything the daemon started and records its stop.
    async fn stop(mut self) -> Result<()> {
        for poll in self.source_polls.iter_mut().filter_map(Option::take) {
            poll.abort();
        }
        if let Some(pass) = self.analysis.take() {
            pass.abort();
        }
        // Stopping a pass stops its workers (each is killed with its process); their runs
        // stay `in_progress` for the recovery that the next start will do.
        self.engine.stop();
        self.heartbeat.beat_at = self.clock.now();
        self.heartbeat.stopped_at = Some(self.heartbeat.beat_at);
        if self.analyzer_lock.is_some() {
            let analyzing = Heartbeat {
                component: "analyzer".to_string(),
                ..self.heartbeat.clone()
            };
            if let Err(error) = self.shared.beat(&analyzing).await {
                tracing::warn!(%error, "cannot record the analyzer's stop");
            }
        }
        self.shared
            .beat(&self.heartbeat)
            .await
            .context("cannot record the daemon's stop")
    }
}

/// Listens for wake-ups from other processes; `None` (said why) when it cannot, and
/// commands are then picked up on the heartbeat.
async fn listen(store: &dyn Store) -> Option<Wakes> {
    match store.listen_wakes().await {
        Ok(wakes) => {
            tracing::info!(address = %wakes.address, "listening for wake-ups");
            Some(wakes)
        }
        Err(error) => {
            tracing::warn!(
                error = format!("{error:#}"),
                "cannot listen for wake-ups; commands from other processes are picked up on the heartbeat"
            );
            None
        }
    }
}

/// Watches the plans folder, when there is one (created if missing), sending the paths of
/// each change.
fn watch_plans(
    intake: Option<&PlansIntake>,
    events: mpsc::UnboundedSender<Vec<PathBuf>>,
) -> Result<Option<notify::RecommendedWatcher>> {
    let Some(intake) = intake else {
        return Ok(None);
    };
    let dir = intake.dir().to_path_buf();
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the plans folder {}", dir.display()))?;
    let folder = dir.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let paths = match event {
            Ok(event) if event.kind.is_access() => return,
            Ok(event) if !event.paths.is_empty() => event.paths,
            Ok(_) | Err(_) => vec![folder.clone()],
        };
        let _ = events.send(paths);
    })
    .context("cannot start the file watcher")?;
    watcher
        .watch(&dir, RecursiveMode::Recursive)
        .with_context(|| format!("cannot watch {}", dir.display()))?;
    tracing::info!(folder = %dir.display(), "watching the plans folder");
    Ok(Some(watcher))
}

/// How often the outbox is looked at when nothing new was told (rows waiting for their
/// retry become due this way).
const OUTBOX_EVERY: Duration = Duration::from_secs(1);

/// How often the topic is read when replies come by the outgoing webhook.
const WEBHOOK_CATCH_UP_EVERY: Duration = Duration::from_secs(60);

/// Starts chat: the outbox's delivery, and the owner's replies by the event queue or the
/// outgoing webhook. The tasks run until aborted; a chat server that is down is retried
/// inside them and never stops the daemon.
async fn start_chat(
    chat: super::chat::ChatParts,
    store: &Arc<dyn Store>,
) -> Result<Vec<JoinHandle<()>>> {
    use crate::config::chat::Receive;
    let mut tasks = Vec::new();
    if let Some(deliverer) = chat.deliverer {
        let store = Arc::clone(store);
        let wake = chat.notices.wake();
        tracing::info!(notifiers = ?deliverer.notifiers(), "delivering chat messages");
        tasks.push(tokio::spawn(async move {
            loop {
                match deliverer.deliver_due(store.as_ref()).await {
                    Ok(report) if report.sent > 0 => {
                        tracing::debug!(sent = report.sent, failing = ?report.failing, "chat messages delivered")
                    }
                    Ok(_) => {}
                    Err(error) => tracing::warn!(%error, "cannot read the outbox"),
                }
                tokio::select! {
                    _ = wake.notified() => {}
                    _ = tokio::time::sleep(OUTBOX_EVERY) => {}
                }
            }
        }));
    }
    if let Some(receiver) = chat.receiver {
        match (chat.receive, chat.webhook) {
            (Receive::Events, _) => {
                let store = Arc::clone(store);
                tasks.push(tokio::spawn(async move { receiver.listen(store).await }));
            }
            (Receive::Webhook, Some((listen, token))) => {
                // The webhook brings only what mentions the bot, at once; a regular read of
                // the topic brings the rest, and anything the endpoint could not take.
                let reader = receiver.clone();
                let reading = Arc::clone(store);
                tasks.push(tokio::spawn(async move {
                    loop {
                        if let Err(error) = reader.catch_up(reading.as_ref()).await {
                            tracing::warn!(%error, "cannot read the chat topic; trying again later");
                        }
                        tokio::time::sleep(WEBHOOK_CATCH_UP_EVERY).await;
                    }
                }));
                let (bound, task) = crate::chat::receive::serve_outgoing_webhook(
                    listen,
                    token,
                    receiver,
                    Arc::clone(store),
                )
                .await
                .with_context(|| {
                    format!("cannot listen for Zulip's outgoing webhook on {listen}")
                })?;
                tracing::info!(address = %bound, "listening for Zulip's outgoing webhook at /zulip");
                tasks.push(task);
            }
            (Receive::Webhook, None) | (Receive::None, _) => {}
        }
    }
    Ok(tasks)
}

/// The next wake-up, or never when this daemon does not listen.
async fn next_wake(wakes: &mut Option<Wakes>) -> Option<Heard> {
    match wakes {
        Some(wakes) => wakes.recv().await,
        None => std::future::pending().await,
    }
}

/// Takes an edited worker contract for the next workers; an edit that does not validate
/// changes nothing and is reported (once per edit).
fn reload_contract(runner: &Runner) {
    use crate::runner::contract::Reload;
    let Some(cell) = &runner.settings.worker_contract else {
        return;
    };
    match cell.reload_if_changed() {
        Reload::Unchanged => {}
        Reload::Reloaded => tracing::info!("reloaded the worker contract; new workers are judged by it"),
        Reload::KeptLastGood(error) => tracing::error!(
            "the edited worker contract does not validate, so the last good one stays in force: {error}"
        ),
    }
}

/// Serves `[web] listen`: the console (pages, JSON API, metrics) unless `[web] enabled =
/// false`, and GitHub's webhook when the forge is GitHub and a webhook secret is configured
/// (from the environment or a file, never the config file). A secret or token that cannot
/// be read, or a console on an address other than loopback without a token, stops the
/// daemon at its start; an address that cannot be bound (another daemon has the port) is
/// logged and the daemon goes on without its web server. Also says whether webhooks are
/// served.
async fn start_web(
    settings: &Settings,
    runner: &Runner,
    store: &Arc<dyn Store>,
    looks: mpsc::UnboundedSender<PrLook>,
) -> Result<(Option<JoinHandle<()>>, bool)> {
    let web = &settings.raw.web;
    let listen = &web.listen;
    let mut app = axum::Router::new();
    let webhook = webhook_router(settings, runner, store, looks)?;
    let webhooks = webhook.is_some();
    if let Some(router) = webhook {
        app = app.merge(router);
    }
    let console = web.enabled;
    if console {
        if !super::console::is_loopback(listen) && !web.has_token() {
            return Err(super::BadInput(format!(
                "[web] listen = \"{listen}\" is not a loopback address, so the console needs a token: set [web] token_file or token_env (docs: \"The console\"), or [web] enabled = false to serve webhooks only"
            ))
            .into());
        }
        let access = super::console::access::Access::load(&settings.root, web)
            .map_err(|e| super::BadInput(e.to_string()))?;
        let access = Arc::new(access);
        app = app
            .merge(super::console::router(
                Arc::new(settings.clone()),
                Arc::clone(store),
                Arc::clone(&access),
                runner.settings.forge.as_ref().map(|f| f.client.clone()),
            ))
            .merge(super::metrics::router(Arc::clone(store), access));
    }
    if !console && !webhooks {
        return Ok((None, false));
    }
    let (bound, task) = match crate::web::serve(listen, app).await {
        Ok(served) => served,
        Err(error) => {
            tracing::error!(
                %error,
                "cannot listen on {listen} ([web] listen): no console and no webhooks this time; \
                 set another [web] listen or [web] enabled = false"
            );
            return Ok((None, false));
        }
    };
    if webhooks {
        tracing::info!(address = %bound, path = crate::web::github_webhook::PATH, "listening for GitHub webhook deliveries");
    }
    if console {
        tracing::info!(address = %bound, api = super::console::API, "serving the console's JSON API");
    }
    Ok((Some(task), webhooks))
}

/// GitHub's webhook route, when a secret is configured and the forge is GitHub.
fn webhook_router(
    settings: &Settings,
    runner: &Runner,
    store: &Arc<dyn Store>,
    looks: mpsc::UnboundedSender<PrLook>,
) -> Result<Option<axum::Router>> {
    use crate::forge::github::Secret;
    let forge = &settings.raw.forge;
    let secret = match (&forge.webhook_secret_file, &forge.webhook_secret_env) {
        (Some(file), _) => Secret::from_file(&settings.root.join(file)),
        (None, Some(var)) => Secret::from_env(var),
        (None, None) => return Ok(None),
    }
    .map_err(|e| super::BadInput(format!("the GitHub webhook secret: {e}")))?;
    if !runner
        .settings
        .forge
        .as_ref()
        .is_some_and(|f| f.is_github())
    {
        tracing::warn!("a GitHub webhook secret is configured but [forge] kind is not \"github\"; no webhook is served");
        return Ok(None);
    }
    Ok(Some(crate::web::github_webhook::router(
        secret,
        Arc::clone(store),
        Arc::clone(&runner.settings.clock),
        looks,
    )))
}

/// Polls each source whose interval has passed, unless its last poll is still going. A
/// failed poll is recorded by the intake (the log and `executor status`) and tried again at
/// the next interval; nothing else waits on it.
fn start_source_polls(
    sources: &[Arc<tokio::sync::Mutex<SourceIntake>>],
    store: &Arc<dyn Store>,
    polls: &mut [Option<JoinHandle<()>>],
    changed: &mpsc::UnboundedSender<Note>,
) {
    for (source, poll) in sources.iter().zip(polls.iter_mut()) {
        if poll.as_ref().is_some_and(|p| !p.is_finished()) {
            continue;
        }
        let (source, store) = (Arc::clone(source), Arc::clone(store));
        let changed = changed.clone();
        *poll = Some(tokio::spawn(async move {
            let mut source = source.lock().await;
            if source.due() {
                // Failures are recorded and logged inside.
                if let Ok(report) = source.poll(store.as_ref(), &SystemClock).await {
                    if report.created + report.updated > 0 {
                        let _ = changed.send(Note::NewWork);
                    }
                }
            }
        }));
    }
}

/// Takes the analyzer's lock and builds the analyzer, if this daemon has not yet; says so
/// the first time the lock is held elsewhere. Only a config that cannot make an analyzer
/// at start is an error: later (the prompt was edited while another analyzer held the
/// lock) the daemon logs why, once, leaves the lock free and tries again on the next beat,
/// running everything else meanwhile. Pending tasks wait for the analyzer.
fn take_analyzer(
    settings: &Settings,
    store: &Arc<dyn Store>,
    lock: &mut Option<super::lock::RunnerLock>,
    analyzer: &mut Option<Arc<crate::analyzer::Analyzer>>,
    failed: &mut Option<String>,
    first: bool,
) -> Result<()> {
    if analyzer.is_some() {
        return Ok(());
    }
    match super::lock::acquire_as(
        &settings.root.join(super::analyze::ANALYZER_LOCK),
        "analyzer",
    ) {
        Ok(taken) => match super::analyze::build(settings, Arc::clone(store)) {
            Ok(built) => {
                *analyzer = Some(Arc::new(built));
                *lock = Some(taken);
                if failed.take().is_some() {
                    tracing::info!("the analyzer is built again: this daemon analyzes now");
                } else if !first {
                    tracing::info!("the analyzer's lock is free again: this daemon analyzes now");
                }
            }
            Err(error) if first => return Err(error),
            Err(error) => {
                let why = format!("{error:#}");
                if failed.as_deref() != Some(why.as_str()) {
                    tracing::error!(
                        error = why,
                        "cannot build the analyzer; the daemon goes on and pending tasks wait until it is fixed (tried again every few seconds)"
                    );
                }
                *failed = Some(why);
            }
        },
        Err(error) if first => {
            tracing::warn!(%error, "another analyzer runs; this daemon analyzes once it is done")
        }
        Err(_) => {}
    }
    Ok(())
}

/// Analyzes the pending tasks, one at a time until none is left, unless the last pass is
/// still going.
fn start_analysis(
    analyzer: Option<&Arc<crate::analyzer::Analyzer>>,
    store: &Arc<dyn Store>,
    pass: &mut Option<JoinHandle<()>>,
    backoff: Duration,
    changed: &mpsc::UnboundedSender<Note>,
) {
    let Some(analyzer) = analyzer else {
        return;
    };
    if pass.as_ref().is_some_and(|p| !p.is_finished()) {
        return;
    }
    let (analyzer, store) = (Arc::clone(analyzer), Arc::clone(store));
    let changed = changed.clone();
    *pass = Some(tokio::spawn(async move {
        match store
            .tasks_page(Some(&QueueStatus::Pending), i64::MIN, 1)
            .await
        {
            Ok(pending) if pending.is_empty() => return,
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "cannot look for pending tasks");
                return;
            }
        }
        let analyzed = analyzer
            .analyze_pending(
                |a| tracing::info!(gid = %a.gid, status = %a.status(), "{}", a.describe()),
            )
            .await;
        let troubled = match analyzed {
            Ok(report) => {
                tracing::info!(
                    analyzed = report.analyzed(),
                    failed = report.analysis_failed,
                    left_pending = report.errors.len(),
                    "analysis pass done"
                );
                if report.analyzed() > 0 {
                    let _ = changed.send(Note::NewWork);
                }
                !report.errors.is_empty()
            }
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "the analysis pass stopped");
                true
            }
        };
        // Tasks left pending by a failure are not tried again at every heartbeat (and the
        // agent paid each time): the next pass waits a loop's sleep.
        if troubled {
            tokio::time::sleep(backoff).await;
        }
    }));
}

/// Resolves when the next note settles; never while none is settling.
async fn settled(due: Option<std::time::Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due.into()).await,
        None => std::future::pending().await,
    }
}

/// Takes the plans folder in, leaving the notes still being written for when they settle.
async fn ingest(
    intake: &mut PlansIntake,
    store: &dyn Store,
    clock: &SystemClock,
    settling: &Settling,
) {
    let unsettled = settling.unsettled(std::time::Instant::now());
    if let Err(error) = intake.ingest_settled(store, clock, &unsettled).await {
        tracing::error!(%error, "plans folder scan failed; retrying on the next change or timer");
    }
}

/// Resolves with the name of the signal that asked the daemon to stop.
async fn shutdown_signal() -> &'static str {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => "SIGINT",
                _ = term.recv() => "SIGTERM",
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                "SIGINT"
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
        "Ctrl-C"
    }
}
