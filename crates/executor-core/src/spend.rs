//! What the workers spent: each worker's tokens, turns and cost as its agent reported them
//! (the agent adapters turn a result event into a [`Spend`]), and their sums per run, task,
//! day and agent for `show`, `runs`, `status`, the console and the metrics.
//!
//! Token counts are normalised so that they add up across agents: `input_tokens` are the
//! tokens the model read fresh (Claude's `input_tokens` plus `cache_creation_input_tokens`,
//! Codex's `input_tokens` less its `cached_input_tokens`), `cached_tokens` the ones it read
//! from a cache. A cost the agent did not report is priced from `[spend.prices]` when there
//! is a price for that agent, and else left unknown: it is never guessed.
//!
//! What it must never do: invent a cost, or count a worker twice.

use std::collections::BTreeMap;

use chrono::{DateTime, FixedOffset, NaiveDate, Utc};
use serde::{Deserialize, Serialize};

/// One worker's spend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub turns: i64,
    /// In US dollars: the agent's own figure, or executor's from the price table; `None`
    /// when neither is known.
    pub cost_usd: Option<f64>,
    /// Whether `cost_usd` was priced by executor (the agent reported none).
    #[serde(default)]
    pub priced: bool,
}

/// US dollars per million tokens, for an agent that reports tokens but no cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    pub input_per_mtok: f64,
    #[serde(default)]
    pub cached_input_per_mtok: f64,
    pub output_per_mtok: f64,
}

impl Prices {
    /// What `spend`'s tokens cost at these prices.
    pub fn cost(&self, spend: &Spend) -> f64 {
        let per = |tokens: i64, price: f64| tokens as f64 * price / 1_000_000.0;
        per(spend.input_tokens, self.input_per_mtok)
            + per(spend.cached_tokens, self.cached_input_per_mtok)
            + per(spend.output_tokens, self.output_per_mtok)
    }
}

impl Spend {
    /// `self` with a cost from `prices` when the agent reported none.
    pub fn priced_by(mut self, prices: Option<&Prices>) -> Self {
        if self.cost_usd.is_none() {
            if let Some(prices) = prices {
                self.cost_usd = Some(prices.cost(&self));
                self.priced = true;
            }
        }
        self
    }
}

/// One worker's recorded spend, with what it is summed by.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpendRow {
    pub worker_id: i64,
    pub run_id: i64,
    pub task_gid: String,
    pub agent: String,
    #[serde(serialize_with = "crate::time::serde_utc::required")]
    pub at: DateTime<Utc>,
    #[serde(flatten)]
    pub spend: Spend,
}

/// A sum of workers' spend.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SpendTotal {
    pub workers: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cached_tokens: i64,
    pub turns: i64,
    /// The known costs added up.
    pub cost_usd: f64,
    /// Workers whose cost is not known (an agent that reports none, with no price set):
    /// `cost_usd` leaves them out.
    pub unpriced_workers: i64,
}

impl SpendTotal {
    pub fn add(&mut self, spend: &Spend) {
        self.workers += 1;
        self.input_tokens += spend.input_tokens;
        self.output_tokens += spend.output_tokens;
        self.cached_tokens += spend.cached_tokens;
        self.turns += spend.turns;
        match spend.cost_usd {
            Some(cost) => self.cost_usd += cost,
            None => self.unpriced_workers += 1,
        }
    }

    /// Every token, fresh, cached and written.
    pub fn tokens(&self) -> i64 {
        self.input_tokens + self.output_tokens + self.cached_tokens
    }

    /// The sum of `rows`.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a SpendRow>) -> Self {
        let mut total = SpendTotal::default();
        for row in rows {
            total.add(&row.spend);
        }
        total
    }

    /// `$0.0123 · 1.2k in, 300 out, 5k cached · 4 turns`, and how many workers have no
    /// known cost.
    pub fn line(&self) -> String {
        let unpriced = match self.unpriced_workers {
            0 => String::new(),
            n => format!(" (+{n} worker(s) without a cost)"),
        };
        format!(
            "${:.4}{unpriced} · {} in, {} out, {} cached · {} turn(s)",
            self.cost_usd,
            short(self.input_tokens),
            short(self.output_tokens),
            short(self.cached_tokens),
            self.turns
        )
    }
}

/// A count as a person reads it: `950`, `12.3k`, `4.1M`.
pub fn short(n: i64) -> String {
    match n.abs() {
        0..=9_999 => n.to_string(),
        10_000..=999_999 => format!("{:.1}k", n as f64 / 1_000.0),
        _ => format!("{:.1}M", n as f64 / 1_000_000.0),
    }
}

/// The sums of `rows` by a key.
pub fn by<K: Ord>(rows: &[SpendRow], key: impl Fn(&SpendRow) -> K) -> BTreeMap<K, SpendTotal> {
    let mut sums = BTreeMap::new();
    for row in rows {
        sums.entry(key(row))
            .or_insert_with(SpendTotal::default)
            .add(&row.spend);
    }
    sums
}

/// The day `at` falls in, for a day that begins at `offset` from UTC midnight (a budget's
/// day may start at the owner's midnight, or at 04:00).
pub fn day_of(at: DateTime<Utc>, offset: FixedOffset) -> NaiveDate {
    at.with_timezone(&offset).date_naive()
}

/// How many days `status` lists.
pub const DAYS_SHOWN: usize = 14;

/// Spend as `status` and the console show it: today's, by day, by agent, and all of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SpendReport {
    /// The day "today" is, in the budget's days.
    pub day: String,
    pub today: SpendTotal,
    pub total: SpendTotal,
    pub by_agent: BTreeMap<String, SpendTotal>,
    /// The latest days with any spend, newest last.
    pub by_day: BTreeMap<String, SpendTotal>,
}

impl SpendReport {
    /// The report of `rows` on the day `now` falls in.
    pub fn of(rows: &[SpendRow], now: DateTime<Utc>, offset: FixedOffset) -> Self {
        let today = day_of(now, offset);
        let days = by(rows, |r| day_of(r.at, offset));
        let skip = days.len().saturating_sub(DAYS_SHOWN);
        SpendReport {
            day: today.to_string(),
            today: days.get(&today).copied().unwrap_or_default(),
            total: SpendTotal::of(rows),
            by_agent: by(rows, |r| r.agent.clone()),
            by_day: days
                .into_iter()
                .skip(skip)
                .map(|(day, total)| (day.to_string(), total))
                .collect(),
        }
    }
}

/// A task's spend as `show` gives it: all of it, and by run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TaskSpend {
    pub total: SpendTotal,
    pub by_run: BTreeMap<i64, SpendTotal>,
    pub by_agent: BTreeMap<String, SpendTotal>,
}

impl TaskSpend {
    pub fn of(rows: &[SpendRow]) -> Self {
        TaskSpend {
            total: SpendTotal::of(rows),
            by_run: by(rows, |r| r.run_id),
            by_agent: by(rows, |r| r.agent.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        worker_id: i64,
        run_id: i64,
        gid: &str,
        agent: &str,
        at: &str,
        spend: Spend,
    ) -> SpendRow {
        SpendRow {
            worker_id,
            run_id,
            task_gid: gid.to_string(),
            agent: agent.to_string(),
            at: at.parse().unwrap(),
            spend,
        }
    }

    fn spend(input: i64, output: i64, cost: Option<f64>) -> Spend {
        Spend {
            input_tokens: input,
            output_tokens: output,
            cached_tokens: 10,
            turns: 2,
            cost_usd: cost,
            priced: false,
        }
    }

    #[test]
    fn a_cost_the_agent_did_not_report_is_priced_only_from_the_table() {
        let prices = Prices {
            input_per_mtok: 1.25,
            cached_input_per_mtok: 0.125,
            output_per_mtok: 10.0,
        };
        let unreported = Spend {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cached_tokens: 2_000_000,
            ..Spend::default()
        };
        let priced = unreported.priced_by(Some(&prices));
        assert!((priced.cost_usd.unwrap() - (1.25 + 0.25 + 1.0)).abs() < 1e-9);
        assert!(priced.priced);
        assert_eq!(unreported.priced_by(None).cost_usd, None);
        let reported = Spend {
            cost_usd: Some(0.5),
            ..unreported
        };
        assert_eq!(reported.priced_by(Some(&prices)), reported);
    }

    #[test]
    fn spend_is_summed_per_run_task_day_and_agent() {
        let rows = [
            row(
                1,
                1,
                "T-1",
                "claude",
                "2026-03-01T10:00:00Z",
                spend(100, 20, Some(0.25)),
            ),
            row(
                2,
                1,
                "T-1",
                "claude",
                "2026-03-01T23:30:00Z",
                spend(300, 60, Some(0.5)),
            ),
            row(
                3,
                2,
                "T-1",
                "codex",
                "2026-03-02T01:00:00Z",
                spend(200, 40, None),
            ),
            row(
                4,
                3,
                "T-2",
                "pi",
                "2026-03-02T09:00:00Z",
                spend(5, 7, Some(0.0)),
            ),
        ];
        let runs = by(&rows, |r| r.run_id);
        assert_eq!(runs[&1].input_tokens, 400);
        assert_eq!(runs[&1].workers, 2);
        assert!((runs[&1].cost_usd - 0.75).abs() < 1e-12);
        let tasks = by(&rows, |r| r.task_gid.clone());
        assert_eq!(tasks["T-1"].output_tokens, 120);
        assert_eq!(tasks["T-1"].unpriced_workers, 1);
        assert_eq!(tasks["T-1"].turns, 6);
        assert_eq!(tasks["T-2"].cached_tokens, 10);
        let agents = by(&rows, |r| r.agent.clone());
        assert_eq!(agents.keys().collect::<Vec<_>>(), ["claude", "codex", "pi"]);
        // UTC days, then days that begin at 01:00 UTC (UTC+1's midnight is 23:00 UTC).
        let utc = FixedOffset::east_opt(0).unwrap();
        let days = by(&rows, |r| day_of(r.at, utc));
        assert_eq!(days.len(), 2);
        assert_eq!(
            days[&NaiveDate::from_ymd_opt(2026, 3, 1).unwrap()].workers,
            2
        );
        let plus_one = FixedOffset::east_opt(3600).unwrap();
        let days = by(&rows, |r| day_of(r.at, plus_one));
        assert_eq!(
            days[&NaiveDate::from_ymd_opt(2026, 3, 1).unwrap()].workers,
            1
        );
        assert_eq!(
            days[&NaiveDate::from_ymd_opt(2026, 3, 2).unwrap()].workers,
            3
        );
        let total = SpendTotal::of(&rows);
        assert_eq!((total.workers, total.tokens()), (4, 605 + 127 + 40));
        assert_eq!(
            total.line(),
            "$0.7500 (+1 worker(s) without a cost) · 605 in, 127 out, 40 cached · 8 turn(s)"
        );
        let report = SpendReport::of(&rows, "2026-03-02T12:00:00Z".parse().unwrap(), utc);
        assert_eq!(report.day, "2026-03-02");
        assert_eq!((report.today.workers, report.total.workers), (2, 4));
        assert_eq!(report.by_day.len(), 2);
        assert_eq!(report.by_agent["codex"].unpriced_workers, 1);
        let task = TaskSpend::of(&rows[..3]);
        assert_eq!((task.by_run[&1].workers, task.by_run[&2].workers), (2, 1));
        assert_eq!(short(12_345), "12.3k");
        assert_eq!(short(4_100_000), "4.1M");
    }
}
