//! The console's Insights page: the outcome figures ([`crate::ops::analytics`]) of the last
//! days as tiles, three charts and the per-group tables. The charts are SVG drawn on the
//! server from the figures (no script, no CDN: the page reads the same with JavaScript
//! off), each bar titled with its number.
//!
//! What it must never do: put text of a task or a source into the SVG unescaped (the
//! template escapes every value; this module gives it numbers and names), or read more
//! than one report's window.

use axum::extract::{Query, State};
use axum::response::Response;
use minijinja::context;
use serde::{Deserialize, Serialize};

use super::pages::{feed, page, unavailable};
use super::Console;
use crate::core::analytics::Figures;
use crate::core::clock::Clock;

/// The drawing area of a chart, in SVG units.
pub const WIDTH: f64 = 640.0;
pub const HEIGHT: f64 = 160.0;

/// The widest a day's bar is drawn, whatever few days the window holds.
const MAX_BAR: f64 = 48.0;

/// One bar (or a segment of a stacked bar) of a chart.
#[derive(Debug, Serialize, PartialEq)]
pub struct Bar {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
    /// Its colour's class (`completed`, `abandoned`, …).
    pub kind: &'static str,
    /// What the bar says, shown on hover and to a screen reader.
    pub title: String,
}

/// A chart's bars and the labels under them.
#[derive(Debug, Serialize, PartialEq, Default)]
pub struct Chart {
    pub bars: Vec<Bar>,
    /// Each label's place (`x`, `y`) and text.
    pub labels: Vec<(f64, f64, String)>,
    /// The largest value, the top of the scale.
    pub max: f64,
}

/// Runs per day, stacked by how they ended: `days` is `(day, figures)` oldest first.
pub fn runs_per_day(days: &[(&String, &Figures)]) -> Chart {
    let max = days.iter().map(|(_, f)| f.started).max().unwrap_or(0) as f64;
    let slot = WIDTH / days.len().max(1) as f64;
    let mut chart = Chart {
        max,
        ..Chart::default()
    };
    for (i, (day, f)) in days.iter().enumerate() {
        let width = (slot * 0.8).min(MAX_BAR);
        let x = i as f64 * slot + (slot - width) / 2.0;
        let mut top = HEIGHT;
        for (kind, n) in [
            ("completed", f.completed),
            ("abandoned", f.abandoned),
            ("cancelled", f.cancelled),
            ("open", f.open),
        ] {
            if n == 0 {
                continue;
            }
            let height = scaled(n as f64, max);
            top -= height;
            chart.bars.push(Bar {
                x,
                y: top,
                width,
                height,
                kind,
                title: format!("{day}: {n} {kind}"),
            });
        }
        // A label under every bar when they fit, else under every seventh.
        if days.len() <= 14 || i % 7 == 0 {
            chart
                .labels
                .push((x, HEIGHT + 16.0, day.get(5..).unwrap_or(day).to_string()));
        }
    }
    chart
}

/// The share of the width the longest horizontal bar takes (its label follows it).
const BAR_SHARE: f64 = 0.6;

/// Horizontal bars of `(name, value, shown)`, the longest [`BAR_SHARE`] of the width, each
/// labelled after its end.
pub fn bars(rows: &[(String, f64, String)], kind: &'static str) -> Chart {
    let max = rows.iter().map(|(_, v, _)| *v).fold(0.0, f64::max);
    let slot = HEIGHT / rows.len().max(1) as f64;
    let mut chart = Chart {
        max,
        ..Chart::default()
    };
    for (i, (name, value, shown)) in rows.iter().enumerate() {
        let y = i as f64 * slot + slot * 0.15;
        let width = if max > 0.0 {
            value / max * WIDTH * BAR_SHARE
        } else {
            0.0
        };
        chart.bars.push(Bar {
            x: 0.0,
            y,
            width,
            height: slot * 0.7,
            kind,
            title: format!("{name}: {shown}"),
        });
        chart.labels.push((
            width + 6.0,
            y + slot * 0.5 + 4.0,
            format!("{name}: {shown}"),
        ));
    }
    chart
}

fn scaled(value: f64, max: f64) -> f64 {
    if max <= 0.0 {
        0.0
    } else {
        value / max * HEIGHT
    }
}

#[derive(Deserialize)]
pub(super) struct InsightsQuery {
    days: Option<u32>,
}

/// `GET /insights?days=N`.
pub(super) async fn show(State(c): State<Console>, Query(q): Query<InsightsQuery>) -> Response {
    let events = feed(&c, None).await;
    let days = q.days.unwrap_or(crate::ops::analytics::DEFAULT_DAYS);
    let now = crate::core::clock::SystemClock.now();
    let report = match crate::ops::analytics::report(c.store.as_ref(), now, days).await {
        Ok(report) => report,
        Err(error) => return unavailable(error),
    };
    let f = &report.figures;
    let per_day: Vec<(&String, &Figures)> = f.by_day.iter().collect();
    let all = &f.all;
    let funnel: Vec<(String, f64, String)> = [
        ("runs", all.started),
        ("PR opened", all.funnel.pr_opened),
        ("CI green", all.funnel.ci_green),
        ("review passed", all.funnel.review_passed),
        ("merged", all.funnel.merged),
    ]
    .into_iter()
    .map(|(name, n)| (name.to_string(), n as f64, n.to_string()))
    .collect();
    let funnel = bars(&funnel, "funnel");
    let cost: Vec<(String, f64, String)> = f
        .by_agent
        .iter()
        .filter_map(|(agent, g)| {
            let c = g.cost_per_completed_usd?;
            Some((agent.clone(), c, format!("${c:.2} per completed run")))
        })
        .collect();
    let groups: Vec<_> = [
        ("Agent", &f.by_agent),
        ("Source", &f.by_source),
        ("Label", &f.by_label),
    ]
    .into_iter()
    .map(|(name, group)| {
        let rows: Vec<_> = group.iter().map(|(key, g)| row(key, g)).collect();
        context! { name, rows }
    })
    .collect();
    page(
        &c,
        "insights.html",
        context! { title => "Insights", path => "/insights", csrf => &*c.csrf, events,
        days => report.days, cut => report.cut, since => report.since.format("%Y-%m-%d").to_string(),
        all => row("all runs", all), per_day => runs_per_day(&per_day), funnel,
        cost => bars(&cost, "cost"), groups, width => WIDTH, height => HEIGHT },
    )
}

/// One group's figures as the page's table shows them.
fn row(name: &str, f: &Figures) -> minijinja::Value {
    use super::super::stats::{dollars, duration as minutes, per_run, percent};
    context! { name, started => f.started, completed => f.completed, abandoned => f.abandoned,
    cancelled => f.cancelled, open => f.open, success => percent(f.success_rate),
    clean => f.clean_success, merged => f.funnel.merged,
    median => minutes(f.time_to_complete.median_s), p95 => minutes(f.time_to_complete.p95_s),
    per_completed => dollars(f.cost_per_completed_usd), per_merged => dollars(f.cost_per_merged_usd),
    cost => format!("${:.2}", f.cost_usd),
    escalations => per_run(f.escalations_per_run),
    answer => minutes(f.escalation_answer.median_s), small => f.small_sample }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn day(completed: usize, abandoned: usize, open: usize) -> Figures {
        Figures {
            started: completed + abandoned + open,
            completed,
            abandoned,
            open,
            ..Figures::default()
        }
    }

    #[test]
    fn a_days_bar_stacks_its_endings_to_its_share_of_the_busiest_day() {
        let (a, b) = ("2026-11-01".to_string(), "2026-11-02".to_string());
        let (busy, quiet) = (day(3, 1, 0), day(1, 0, 1));
        let chart = runs_per_day(&[(&a, &busy), (&b, &quiet)]);
        assert_eq!(chart.max, 4.0);
        let first: Vec<_> = chart
            .bars
            .iter()
            .filter(|b| b.title.starts_with("2026-11-01"))
            .collect();
        assert_eq!(first.len(), 2);
        let total: f64 = first.iter().map(|b| b.height).sum();
        assert!(
            (total - HEIGHT).abs() < 1e-9,
            "the busiest day fills the chart"
        );
        assert_eq!(first[0].kind, "completed");
        assert!((first[0].height - HEIGHT * 0.75).abs() < 1e-9);
        assert!(
            (first[1].y + first[1].height - first[0].y).abs() < 1e-9,
            "stacked"
        );
        let second_total: f64 = chart
            .bars
            .iter()
            .filter(|b| b.title.starts_with("2026-11-02"))
            .map(|b| b.height)
            .sum();
        assert!((second_total - HEIGHT / 2.0).abs() < 1e-9);
        assert_eq!(chart.labels[0].2, "11-01");
    }

    #[test]
    fn horizontal_bars_scale_to_the_largest_and_an_empty_chart_draws_nothing() {
        let chart = bars(
            &[("a".into(), 2.0, "2".into()), ("b".into(), 1.0, "1".into())],
            "funnel",
        );
        assert!((chart.bars[0].width - WIDTH * BAR_SHARE).abs() < 1e-9);
        assert!((chart.bars[1].width - WIDTH * BAR_SHARE / 2.0).abs() < 1e-9);
        assert!(
            chart.labels[1].0 > chart.bars[1].width,
            "the label follows its bar"
        );
        assert_eq!(chart.bars[1].title, "b: 1");
        assert!(bars(&[], "cost").bars.is_empty());
        let zero = bars(&[("a".into(), 0.0, "0".into())], "cost");
        assert_eq!(zero.bars[0].width, 0.0);
    }
}
