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

use super::BadInput;
use crate::core::record::Run;
use crate::store::Store;

/// `executor runs`.
pub async fn list(store: &dyn Store, state: Option<&str>, json: bool) -> Result<()> {
    let mut runs = store.runs(None).await?;
    if let Some(state) = state {
        runs.retain(|r| r.state.as_str() == state);
    }
    runs.sort_by_key(|r| std::cmp::Reverse(r.id));
    if json {
        return super::output::print_json(&runs);
    }
    if runs.is_empty() {
        println!("no runs");
        return Ok(());
    }
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    writeln!(
        out,
        "{:>6}  {:<12}  {:<24}  {:<20}  BRANCH / PR",
        "RUN", "STATE", "TASK", "UPDATED"
    )?;
    for run in &runs {
        writeln!(
            out,
            "{:>6}  {:<12}  {:<24}  {:<20}  {}",
            run.id,
            run.state.as_str(),
            run.task_gid,
            crate::core::time::format_utc(&run.updated_at),
            run.pr_url
                .as_deref()
                .or(run.branch_name.as_deref())
                .unwrap_or("-")
        )?;
    }
    Ok(())
}

/// The work logs (`logs/{gid}/{phase}_{YYYY-MM-DD-HH-MM-SS}.md`) written while `run` lived,
/// oldest first.
fn run_logs(logs_dir: &Path, run: &Run) -> Vec<PathBuf> {
    let start = run.started_at.unwrap_or(run.updated_at) - chrono::Duration::seconds(1);
    let end = run
        .completed_at
        .filter(|_| !run.state.is_active())
        .map(|t| t + chrono::Duration::seconds(1));
    let Ok(entries) = std::fs::read_dir(logs_dir.join(&run.task_gid)) else {
        return Vec::new();
    };
    let mut found: Vec<(DateTime<Utc>, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?;
            let (_, stamp) = stem.rsplit_once('_')?;
            let at = NaiveDateTime::parse_from_str(stamp, "%Y-%m-%d-%H-%M-%S").ok()?;
            Some((at.and_utc(), p))
        })
        .filter(|(at, _)| *at >= start && end.is_none_or(|end| *at <= end))
        .collect();
    found.sort();
    found.into_iter().map(|(_, p)| p).collect()
}

/// `executor logs RUN [-f]`.
pub async fn logs(store: &dyn Store, logs_dir: &Path, run_id: i64, follow: bool) -> Result<()> {
    let find = || async {
        store
            .runs(None)
            .await
            .map(|runs| runs.into_iter().find(|r| r.id == run_id))
    };
    let Some(mut run) = find().await? else {
        return Err(BadInput(format!("no run {run_id} (`executor runs` lists them)")).into());
    };
    // How much of each file was printed already.
    let mut printed: Vec<(PathBuf, u64)> = Vec::new();
    loop {
        print_new(&run_logs(logs_dir, &run), &mut printed);
        // Once the run is no longer live, this round printed what its last worker wrote.
        if !follow || !run.state.is_active() {
            if printed.is_empty() {
                eprintln!("run {run_id} of {} has no work log yet", run.task_gid);
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        match find().await? {
            Some(now) => run = now,
            None => return Ok(()),
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
