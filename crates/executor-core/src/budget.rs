//! `[budget]`: caps on what workers spend, per task (dollars, tokens) and per day
//! (dollars), and the two decisions they make: whether a run may start another worker
//! (over its task's cap it asks the owner instead), and whether dispatch may take a new
//! task today (over the day's cap it waits for the next day, whose start is configurable).
//!
//! What it must never do: stop a worker already running (a cap is checked before a worker
//! starts), or count a cost it does not know (an unpriced worker adds tokens only).

use chrono::{DateTime, Duration, FixedOffset, NaiveTime, Utc};
use serde::{Deserialize, Serialize};

use super::spend::{day_of, SpendRow, SpendTotal};

/// The caps; each is off when unset.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// What one task's workers may cost in all, in US dollars.
    #[serde(default)]
    pub per_task_usd: Option<f64>,
    /// How many tokens (fresh input, output and cached) one task's workers may use.
    #[serde(default)]
    pub per_task_tokens: Option<i64>,
    /// What all workers together may cost in one day, in US dollars.
    #[serde(default)]
    pub per_day_usd: Option<f64>,
    /// Where the budget's days begin: the midnight of this offset from UTC (`"+02:00"`:
    /// a day runs from 22:00 UTC to 22:00 UTC).
    #[serde(default = "utc", with = "offset_text")]
    pub day_offset: FixedOffset,
}

fn utc() -> FixedOffset {
    FixedOffset::east_opt(0).expect("UTC is an offset")
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            per_task_usd: None,
            per_task_tokens: None,
            per_day_usd: None,
            day_offset: utc(),
        }
    }
}

mod offset_text {
    use chrono::FixedOffset;
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<FixedOffset, D::Error> {
        let text = String::deserialize(d)?;
        text.parse::<FixedOffset>().map_err(|_| {
            serde::de::Error::custom(format!(
                "`{text}` is not an offset from UTC like \"+02:00\" or \"-05:00\""
            ))
        })
    }
}

/// Which cap a task or a day is over.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "over", rename_all = "snake_case")]
pub enum Over {
    PerTaskUsd {
        spent: f64,
        cap: f64,
    },
    PerTaskTokens {
        spent: i64,
        cap: i64,
    },
    PerDayUsd {
        spent: f64,
        cap: f64,
        #[serde(serialize_with = "crate::time::serde_utc::required")]
        resumes_at: DateTime<Utc>,
    },
}

impl Over {
    /// The owner's sentence.
    pub fn sentence(&self) -> String {
        match self {
            Over::PerTaskUsd { spent, cap } => {
                format!("its workers spent ${spent:.4}, over [budget] per_task_usd = {cap}")
            }
            Over::PerTaskTokens { spent, cap } => {
                format!("its workers used {spent} tokens, over [budget] per_task_tokens = {cap}")
            }
            Over::PerDayUsd {
                spent,
                cap,
                resumes_at,
            } => format!(
                "today's workers spent ${spent:.4}, over [budget] per_day_usd = {cap}; dispatch resumes at {} UTC",
                resumes_at.format("%Y-%m-%d %H:%M")
            ),
        }
    }
}

impl Budget {
    /// Whether a task that spent `spent` is over one of its caps (dollars first).
    pub fn task_over(&self, spent: &SpendTotal) -> Option<Over> {
        if let Some(cap) = self.per_task_usd {
            if spent.cost_usd >= cap {
                return Some(Over::PerTaskUsd {
                    spent: spent.cost_usd,
                    cap,
                });
            }
        }
        match self.per_task_tokens {
            Some(cap) if spent.tokens() >= cap => Some(Over::PerTaskTokens {
                spent: spent.tokens(),
                cap,
            }),
            _ => None,
        }
    }

    /// Whether the day `now` falls in is over its cap, from every worker's `rows`.
    pub fn day_over(&self, rows: &[SpendRow], now: DateTime<Utc>) -> Option<Over> {
        let cap = self.per_day_usd?;
        let today = day_of(now, self.day_offset);
        let spent = SpendTotal::of(
            rows.iter()
                .filter(|r| day_of(r.at, self.day_offset) == today),
        )
        .cost_usd;
        (spent >= cap).then(|| Over::PerDayUsd {
            spent,
            cap,
            resumes_at: self.next_day(now),
        })
    }

    /// When the budget day after the one `now` falls in begins.
    pub fn next_day(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        let tomorrow = day_of(now, self.day_offset) + Duration::days(1);
        let local = tomorrow.and_time(NaiveTime::MIN);
        // A fixed offset has no gaps or folds: the local midnight is one instant.
        (local - Duration::seconds(i64::from(self.day_offset.local_minus_utc()))).and_utc()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spend::Spend;

    fn total(cost: f64, tokens: i64) -> SpendTotal {
        let mut t = SpendTotal::default();
        t.add(&Spend {
            input_tokens: tokens,
            cost_usd: Some(cost),
            ..Spend::default()
        });
        t
    }

    fn row(at: &str, cost: f64) -> SpendRow {
        SpendRow {
            worker_id: 1,
            run_id: 1,
            task_gid: "T-1".into(),
            agent: "claude".into(),
            at: at.parse().unwrap(),
            spend: Spend {
                cost_usd: Some(cost),
                ..Spend::default()
            },
        }
    }

    #[test]
    fn a_task_over_its_dollars_or_tokens_is_over_and_no_cap_means_never() {
        let budget = Budget {
            per_task_usd: Some(1.0),
            per_task_tokens: Some(1000),
            ..Budget::default()
        };
        assert_eq!(budget.task_over(&total(0.5, 10)), None);
        assert_eq!(
            budget.task_over(&total(1.0, 10)),
            Some(Over::PerTaskUsd {
                spent: 1.0,
                cap: 1.0
            })
        );
        assert_eq!(
            budget.task_over(&total(0.1, 1000)),
            Some(Over::PerTaskTokens {
                spent: 1000,
                cap: 1000
            })
        );
        assert_eq!(Budget::default().task_over(&total(1e9, i64::MAX)), None);
    }

    #[test]
    fn a_day_over_its_cap_pauses_until_the_next_day_begins_at_its_offset() {
        let budget = Budget {
            per_day_usd: Some(2.0),
            day_offset: "+02:00".parse().unwrap(),
            ..Budget::default()
        };
        // 21:30 UTC on the 1st is the 1st at +02:00 until 22:00 UTC.
        let rows = [
            row("2026-03-01T10:00:00Z", 1.5),
            row("2026-03-01T21:30:00Z", 0.5),
            row("2026-03-01T22:30:00Z", 0.25),
        ];
        let now = "2026-03-01T21:45:00Z".parse().unwrap();
        let over = budget.day_over(&rows, now).expect("over");
        assert_eq!(
            over,
            Over::PerDayUsd {
                spent: 2.0,
                cap: 2.0,
                resumes_at: "2026-03-01T22:00:00Z".parse().unwrap()
            }
        );
        assert!(over.sentence().contains("resumes at 2026-03-01 22:00 UTC"));
        // The next day has only its own spend.
        let later = "2026-03-01T23:00:00Z".parse().unwrap();
        assert_eq!(budget.day_over(&rows, later), None);
        assert_eq!(Budget::default().day_over(&rows, now), None);
        let utc = Budget::default();
        assert_eq!(
            utc.next_day("2026-03-01T00:00:00Z".parse().unwrap()),
            "2026-03-02T00:00:00Z".parse::<DateTime<Utc>>().unwrap()
        );
    }
}
