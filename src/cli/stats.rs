//! `executor stats`: the outcome figures of the runs started in the last days
//! ([`crate::ops::analytics`]), as a table (all runs, then per agent, source and label) or,
//! with `--json`, the whole report (per day too), the document `/api/v1/analytics` serves.
//!
//! What it must never do: print a rate whose denominator is zero as a number, or leave out
//! that a group is a small sample.

use anyhow::Result;

use crate::core::analytics::{Figures, SMALL_SAMPLE};
use crate::ops::analytics::Report;

/// Prints `report` as a table.
pub fn print(report: &Report) -> Result<()> {
    let all = &report.figures.all;
    println!(
        "runs started since {} ({} days): {}{}",
        report.since.format("%Y-%m-%d %H:%M UTC"),
        report.days,
        all.started,
        if report.cut {
            " (the newest 100000 only)"
        } else {
            ""
        }
    );
    if all.started == 0 {
        println!("nothing to count yet");
        return Ok(());
    }
    println!(
        "{:<24} {:>7} {:>9} {:>9} {:>9} {:>7} {:>5}  {:<15} {:>10} {:>11} {:>9} {:>7}",
        "group",
        "started",
        "completed",
        "abandoned",
        "cancelled",
        "success",
        "clean",
        "PR/CI/rev/merge",
        "t complete",
        "$/completed",
        "$/merged",
        "esc/run"
    );
    row("all", all);
    let groups = [
        ("agent", &report.figures.by_agent),
        ("source", &report.figures.by_source),
        ("label", &report.figures.by_label),
    ];
    for (kind, group) in groups {
        for (name, figures) in group {
            row(&format!("{kind} {name}"), figures);
        }
    }
    if all.started < SMALL_SAMPLE
        || groups
            .iter()
            .any(|(_, g)| g.values().any(|f| f.small_sample))
    {
        println!("* fewer than {SMALL_SAMPLE} runs: a small sample, its rates are anecdotes");
    }
    Ok(())
}

fn row(name: &str, f: &Figures) {
    let funnel = format!(
        "{}/{}/{}/{}",
        f.funnel.pr_opened, f.funnel.ci_green, f.funnel.review_passed, f.funnel.merged
    );
    println!(
        "{:<24} {:>7} {:>9} {:>9} {:>9} {:>7} {:>5}  {:<15} {:>10} {:>11} {:>9} {:>7}",
        format!("{name}{}", if f.small_sample { " *" } else { "" }),
        f.started,
        f.completed,
        f.abandoned,
        f.cancelled,
        percent(f.success_rate),
        f.clean_success,
        funnel,
        duration(f.time_to_complete.median_s),
        dollars(f.cost_per_completed_usd),
        dollars(f.cost_per_merged_usd),
        per_run(f.escalations_per_run),
    );
}

pub(crate) fn percent(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".to_string(), |r| format!("{:.0}%", r * 100.0))
}

pub(crate) fn dollars(cost: Option<f64>) -> String {
    cost.map_or_else(|| "-".to_string(), |c| format!("${c:.2}"))
}

/// A count per run, or `-` with no runs.
pub(crate) fn per_run(count: Option<f64>) -> String {
    count.map_or_else(|| "-".to_string(), |c| format!("{c:.2}"))
}

/// Seconds as the largest whole unit that reads well.
pub(crate) fn duration(seconds: Option<f64>) -> String {
    match seconds {
        None => "-".to_string(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) if s < 7200.0 => format!("{:.0} min", s / 60.0),
        Some(s) => format!("{:.1} h", s / 3600.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_rates_print_as_a_dash_and_durations_in_their_unit() {
        assert_eq!(percent(None), "-");
        assert_eq!(percent(Some(2.0 / 3.0)), "67%");
        assert_eq!(dollars(Some(4.5)), "$4.50");
        assert_eq!(duration(Some(90.0)), "90 s");
        assert_eq!(duration(Some(3600.0)), "60 min");
        assert_eq!(duration(Some(36000.0)), "10.0 h");
        assert_eq!(duration(None), "-");
    }
}
