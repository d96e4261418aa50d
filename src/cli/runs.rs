//! `executor runs` (every run, newest first, with its state, branch and PR) and `executor
//! logs RUN` (the human-readable work logs of one run's workers, in order; `-f` follows them
//! until the run stops being live).
//!
//! What it must never do: change anything, or print a log of another run.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use chrono::{DateTime, NaiveDateTime, Utc};

pub(crate) use super::shown::{local_time, stage};
use super::BadInput;
use crate::core::record::Run;
use crate::core::spend::{SpendRow, SpendTotal};
use crate::store::Store;

/// A run as `executor runs --json` and the console's `GET /api/v1/runs` give it: every
/// column of the run, and what its workers spent (`spend`: tokens, turns and cost summed,
/// `null` before any worker reported a spend). The one serializer of both.
#[derive(Debug, serde::Serialize)]
pub struct RunDocument<'a> {
    #[serde(flatten)]
    pub run: &'a Run,
    pub spend: Option<SpendTotal>,
}

/// The documents of `runs`, each with its spend from `spent` (rows of at least those runs).
pub fn documents<'a>(runs: &'a [Run], spent: &[SpendRow]) -> Vec<RunDocument<'a>> {
    let by_run = crate::core::spend::by(spent, |r| r.run_id);
    runs.iter()
        .map(|run| RunDocument {
            run,
            spend: by_run.get(&run.id).copied(),
        })
        .collect()
}

/// Which runs `executor runs` lists: those in `state` (all when `None`), older than run
/// `before`, at most `limit` of them, newest first.
#[derive(Debug, Default)]
pub struct Page<'a> {
    pub state: Option<&'a str>,
    pub limit: Option<u32>,
    pub before: Option<i64>,
}

/// `executor runs`. A page (`--limit`) reads only its runs and their spend.
pub async fn list(store: &dyn Store, page: &Page<'_>, json: bool) -> Result<()> {
    let states: Vec<crate::core::run::RunState> = page
        .state
        .map(crate::core::run::RunState::from_column)
        .into_iter()
        .collect();
    // One run more than the page is read, to tell whether there are older ones.
    let wanted = page.limit.map_or(u32::MAX, |limit| limit.saturating_add(1));
    let mut runs = store.runs_page(&states, page.before, wanted).await?;
    let more = page.limit.is_some_and(|limit| runs.len() > limit as usize);
    let rows = match page.limit {
        Some(limit) => {
            runs.truncate(limit as usize);
            let ids: Vec<i64> = runs.iter().map(|r| r.id).collect();
            store.spend_of_runs(&ids).await?
        }
        None => store.spend(None).await?,
    };
    if runs.is_empty() && !json {
        println!("no runs");
        return Ok(());
    }
    // A page with older runs after it: the table says how to see them.
    let next = match (page.limit, runs.last()) {
        (Some(limit), Some(last)) if more => Some(format!(
            "(the newest {limit}; older ones: executor runs{} --limit {limit} --before {})",
            page.state
                .map(|s| format!(" --state {s}"))
                .unwrap_or_default(),
            last.id
        )),
        _ => None,
    };
    if json {
        return super::output::print_json(&documents(&runs, &rows));
    }
    let spent = crate::core::spend::by(&rows, |r| r.run_id);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    // The last column (branch or PR) is cut with … to fit `COLUMNS` when it is set.
    const BEFORE_LAST: usize = 6 + 2 + 12 + 2 + 22 + 2 + 24 + 2 + 19 + 2 + 8 + 2;
    let last_width = super::output::columns().map(|c| c.saturating_sub(BEFORE_LAST).max(6));
    let table = (|| -> std::io::Result<()> {
        writeln!(
            out,
            "{:>6}  {:<12}  {:<22}  {:<24}  {:<19}  {:>8}  {}",
            "RUN",
            "STATE",
            "STAGE",
            "TASK",
            "UPDATED",
            "COST",
            last_width.map_or_else(
                || "BRANCH / PR".to_string(),
                |w| super::output::fit("BRANCH / PR", w)
            )
        )?;
        for run in &runs {
            let last = super::output::printable(
                run.pr_url
                    .as_deref()
                    .or(run.branch_name.as_deref())
                    .unwrap_or("-"),
            );
            writeln!(
                out,
                "{:>6}  {:<12}  {:<22}  {:<24}  {:<19}  {:>8}  {}",
                run.id,
                run.state.as_str(),
                stage(run),
                super::output::printable(&run.task_gid),
                local_time(&run.updated_at),
                spent.get(&run.id).map_or_else(|| "-".to_string(), cost),
                last_width.map_or_else(|| last.clone(), |w| super::output::fit(&last, w))
            )?;
        }
        if let Some(next) = &next {
            writeln!(out, "{next}")?;
        }
        out.flush()
    })();
    quiet_pipe(table)
}

/// A run's cost as its column shows it: `$0.0123` under a dollar, `$4.57` from one, with
/// `+` when some of its workers' cost is not known.
pub(crate) fn cost(total: &crate::core::spend::SpendTotal) -> String {
    let unknown = if total.unpriced_workers > 0 { "+" } else { "" };
    if total.cost_usd >= 1.0 {
        format!("${:.2}{unknown}", total.cost_usd)
    } else {
        format!("${:.4}{unknown}", total.cost_usd)
    }
}

/// A reader that went away (`runs | head`) is no error: what it wanted was printed.
fn quiet_pipe(result: std::io::Result<()>) -> Result<()> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other?),
    }
}

/// How many of `workers` (recorded as started, with no end) are live processes: `alive`
/// answers for a pid and its recorded start time, so a stopped worker, or a pid reused by
/// another process, is not counted.
pub(crate) fn live_workers(
    workers: &[crate::core::record::WorkerRecord],
    alive: impl Fn(u32, Option<u64>) -> bool,
) -> i64 {
    let live = workers.iter().filter(|w| {
        u32::try_from(w.pid)
            .is_ok_and(|pid| alive(pid, w.start_time.and_then(|t| u64::try_from(t).ok())))
    });
    live.count() as i64
}

/// Whether process `pid` is running and is the one that started at `start_time` (when
/// known).
pub(crate) fn process_alive(pid: u32, start_time: Option<u64>) -> bool {
    match (crate::supervisor::group::start_time(pid), start_time) {
        (Some(now), Some(recorded)) => now == recorded,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// The escalation `run` waits on, if it waits on the owner.
pub(crate) fn waiting_on(run: &Run) -> Option<i64> {
    match run.lifecycle.as_ref()?.stage {
        crate::core::lifecycle::Stage::WaitingOnOwner { escalation } => Some(escalation),
        _ => None,
    }
}

/// When a work log was started, from its name (`{phase}_{YYYY-MM-DD-HH-MM-SS-mmm}`, or
/// the older `{phase}_{YYYY-MM-DD-HH-MM-SS}`), and whether the name has only seconds.
fn log_stamp(path: &Path) -> Option<(DateTime<Utc>, bool)> {
    let stem = path.file_stem()?.to_str()?;
    let (_, stamp) = stem.rsplit_once('_')?;
    if let Ok(at) = NaiveDateTime::parse_from_str(stamp, "%Y-%m-%d-%H-%M-%S-%3f") {
        return Some((at.and_utc(), false));
    }
    let at = NaiveDateTime::parse_from_str(stamp, "%Y-%m-%d-%H-%M-%S").ok()?;
    Some((at.and_utc(), true))
}

/// The work logs (`logs/{gid}/{phase}_{stamp}.md`) written while `run` lived, in the order
/// they were started. `next_start` is when the task's next run started: nothing from then
/// on is this run's.
pub(crate) fn run_logs(
    logs_dir: &Path,
    run: &Run,
    next_start: Option<DateTime<Utc>>,
) -> Vec<PathBuf> {
    let started = run.started_at.unwrap_or(run.updated_at);
    // A run that is over ended at its completion, or at its last update when none was
    // kept (an abandoned run); a live one has no end yet.
    let ended = (!run.state.is_active())
        .then(|| run.completed_at.unwrap_or(run.updated_at) + chrono::Duration::seconds(1));
    let Ok(entries) = std::fs::read_dir(logs_dir.join(&run.task_gid)) else {
        return Vec::new();
    };
    let mut found: Vec<(DateTime<Utc>, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter_map(|p| {
            let (at, whole_seconds) = log_stamp(&p)?;
            // A name with only seconds may be up to a second before the run's start.
            let slack = if whole_seconds {
                chrono::Duration::seconds(1)
            } else {
                chrono::Duration::zero()
            };
            let mine = at + slack >= started
                && ended.is_none_or(|end| at <= end)
                && next_start.is_none_or(|next| at + slack < next);
            mine.then_some((at, p))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// The run `target` names: a run id, else a task gid (its latest run).
pub(crate) fn find_run(runs: &[Run], target: &str) -> Option<(Run, Option<DateTime<Utc>>)> {
    let run = target
        .parse::<i64>()
        .ok()
        .and_then(|id| runs.iter().find(|r| r.id == id))
        .or_else(|| {
            runs.iter()
                .filter(|r| r.task_gid == target)
                .max_by_key(|r| r.id)
        })?;
    let next_start = runs
        .iter()
        .filter(|r| r.task_gid == run.task_gid && r.id > run.id)
        .map(|r| r.started_at.unwrap_or(r.updated_at))
        .min();
    Some((run.clone(), next_start))
}

/// `executor logs RUN [-f]`: `RUN` is a run id or a task gid (its latest run).
pub async fn logs(store: &dyn Store, logs_dir: &Path, target: &str, follow: bool) -> Result<()> {
    let find = || async { store.runs(None).await.map(|runs| find_run(&runs, target)) };
    let Some((mut run, mut next_start)) = find().await? else {
        return Err(BadInput(format!(
            "no run {target}, and no task {target} with a run: give a run id or a task gid (`executor runs` lists them)"
        ))
        .into());
    };
    let run_id = run.id;
    // How much of each file was printed already.
    let mut printed: Vec<(PathBuf, u64)> = Vec::new();
    let mut told_waiting = None;
    loop {
        print_new(&run_logs(logs_dir, &run, next_start), &mut printed);
        // A run waiting on the owner writes nothing until answered: say so, once per question.
        if let Some(escalation) = waiting_on(&run).filter(|e| told_waiting != Some(*e)) {
            eprintln!(
                "run {run_id} is waiting on the owner: escalation {escalation} (`executor escalations` shows it, `executor decide {escalation} approve|deny` answers)"
            );
            told_waiting = Some(escalation);
        }
        // Once the run is no longer live, this round printed what its last worker wrote.
        if !follow || !run.state.is_active() {
            if printed.is_empty() {
                eprintln!("run {run_id} of {} has no work log yet", run.task_gid);
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        match find().await? {
            Some((now, next)) if now.id == run_id => (run, next_start) = (now, next),
            _ => return Ok(()),
        }
    }
}

/// Prints what `paths` hold beyond what `printed` says was printed, each file under a
/// header the first time.
fn print_new(paths: &[PathBuf], printed: &mut Vec<(PathBuf, u64)>) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for path in paths {
        let text = std::fs::read(path).unwrap_or_default();
        let entry = match printed.iter().position(|(p, _)| p == path) {
            Some(i) => i,
            None => {
                let _ = writeln!(out, "==> {} <==", path.display());
                printed.push((path.clone(), 0));
                printed.len() - 1
            }
        };
        let done = usize::try_from(printed[entry].1)
            .unwrap_or(usize::MAX)
            .min(text.len());
        let _ = out.write_all(&text[done..]);
        printed[entry].1 = text.len() as u64;
    }
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::lifecycle::{RunView, Stage};
    use crate::core::run::RunState;
    use chrono::TimeZone;

    fn at(secs: u32, millis: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 3, 1, 10, 0, secs).unwrap()
            + chrono::Duration::milliseconds(i64::from(millis))
    }

    fn run(id: i64, state: RunState, started: DateTime<Utc>, updated: DateTime<Utc>) -> Run {
        Run {
            id,
            task_gid: "T-1".into(),
            worktree_path: None,
            branch_name: None,
            pr_url: None,
            pr_number: None,
            thread_id: None,
            started_at: Some(started),
            updated_at: updated,
            completed_at: None,
            state,
            ci_attempts: 0,
            worker_session_id: None,
            worker_last_update: None,
            worker_pid: None,
            worker_stuck_count: 0,
            lifecycle: None,
            lease_epoch: 0,
        }
    }

    fn touch(dir: &Path, name: &str) {
        std::fs::create_dir_all(dir.join("T-1")).unwrap();
        std::fs::write(dir.join("T-1").join(name), "x").unwrap();
    }

    fn names(paths: &[PathBuf]) -> Vec<String> {
        paths
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn logs_of_one_second_are_listed_in_the_order_they_started() {
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "fix_ci_2026-03-01-10-00-05-900.md");
        touch(dir.path(), "queued_2026-03-01-10-00-05-100.md");
        touch(dir.path(), "verify_2026-03-01-10-00-05-500.md");
        let live = run(1, RunState::InProgress, at(5, 0), at(6, 0));
        assert_eq!(
            names(&run_logs(dir.path(), &live, None)),
            [
                "queued_2026-03-01-10-00-05-100.md",
                "verify_2026-03-01-10-00-05-500.md",
                "fix_ci_2026-03-01-10-00-05-900.md"
            ]
        );
    }

    #[test]
    fn an_ended_run_without_a_completion_time_shows_only_its_own_logs() {
        let dir = tempfile::tempdir().unwrap();
        // Run 2 was abandoned (no completed_at); run 5 of the same task came later.
        touch(dir.path(), "queued_2026-03-01-10-00-01-000.md");
        touch(dir.path(), "queued_2026-03-01-10-00-30-000.md");
        let two = run(2, RunState::Abandoned, at(1, 0), at(3, 0));
        let five = run(5, RunState::Complete, at(30, 0), at(40, 0));
        let runs = [two.clone(), five];
        let (found, next) = find_run(&runs, "2").unwrap();
        assert_eq!(found.id, 2);
        assert_eq!(next, Some(at(30, 0)));
        assert_eq!(
            names(&run_logs(dir.path(), &found, next)),
            ["queued_2026-03-01-10-00-01-000.md"]
        );
        // Even a run still marked live stops at the next run's start.
        let mut live = two;
        live.state = RunState::InProgress;
        assert_eq!(
            names(&run_logs(dir.path(), &live, next)),
            ["queued_2026-03-01-10-00-01-000.md"]
        );
    }

    #[test]
    fn a_task_gid_names_its_latest_run_and_older_log_names_still_count() {
        let runs = [
            run(3, RunState::Abandoned, at(1, 0), at(2, 0)),
            run(7, RunState::InProgress, at(10, 0), at(11, 0)),
        ];
        assert_eq!(find_run(&runs, "T-1").map(|(r, _)| r.id), Some(7));
        assert_eq!(find_run(&runs, "3").map(|(r, _)| r.id), Some(3));
        assert!(find_run(&runs, "EXAMPLE-1").is_none());
        // A name with only seconds, from an older executor, up to a second before the start.
        let dir = tempfile::tempdir().unwrap();
        touch(dir.path(), "queued_2026-03-01-10-00-09.md");
        let late = run(7, RunState::InProgress, at(9, 700), at(11, 0));
        assert_eq!(names(&run_logs(dir.path(), &late, None)).len(), 1);
    }

    #[test]
    fn only_workers_whose_process_lives_are_live() {
        let worker = |pid: i64, start_time: Option<i64>| crate::core::record::WorkerRecord {
            id: pid,
            run_id: 1,
            phase: "queued".into(),
            host: "here".into(),
            pid,
            start_time,
            started_at: at(0, 0),
            ended_at: None,
            outcome: None,
        };
        let recorded = [worker(10, Some(5)), worker(11, Some(7)), worker(12, None)];
        // 10 runs as recorded; 11's pid now belongs to a process started later; 12 is gone.
        let alive = |pid: u32, start: Option<u64>| match pid {
            10 => start == Some(5),
            11 => start == Some(8),
            _ => false,
        };
        assert_eq!(live_workers(&recorded, alive), 1);
        let me = std::process::id();
        assert!(process_alive(me, None));
        let started = crate::supervisor::group::start_time(me);
        assert!(process_alive(me, started));
        assert!(!process_alive(me, started.map(|t| t + 1)));
    }

    #[test]
    fn a_run_waiting_on_the_owner_says_which_question() {
        let mut waiting = run(4, RunState::InProgress, at(1, 0), at(2, 0));
        assert_eq!(stage(&waiting), "-");
        let mut view = RunView {
            stage: Stage::WaitingOnOwner { escalation: 12 },
            ..RunView::default()
        };
        waiting.lifecycle = Some(view.clone());
        assert_eq!(stage(&waiting), "waiting: escalation 12");
        assert_eq!(waiting_on(&waiting), Some(12));
        view.stage = Stage::Verifying;
        waiting.lifecycle = Some(view);
        assert_eq!(stage(&waiting), "verifying");
        assert_eq!(waiting_on(&waiting), None);
    }
}
