//! The schema, as an ordered list of migrations per backend.
//!
//! A migration is applied once, in order, inside one transaction, and recorded. Migrations
//! only add (tables, columns, indexes) and carry data forward; none may drop, rename or
//! rewrite what an owner's database already holds. Never edit a migration that has shipped:
//! append a new one.

/// One schema step.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

pub const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("sql/sqlite/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "workers",
        sql: include_str!("sql/sqlite/0002_workers.sql"),
    },
    Migration {
        version: 3,
        name: "escalations",
        sql: include_str!("sql/sqlite/0003_escalations.sql"),
    },
    Migration {
        version: 4,
        name: "leases",
        sql: include_str!("sql/sqlite/0004_leases.sql"),
    },
    Migration {
        version: 5,
        name: "pr_memory",
        sql: include_str!("sql/sqlite/0005_pr_memory.sql"),
    },
    Migration {
        version: 6,
        name: "task_facts",
        sql: include_str!("sql/sqlite/0006_task_facts.sql"),
    },
    Migration {
        version: 7,
        name: "source_cursors",
        sql: include_str!("sql/sqlite/0007_source_cursors.sql"),
    },
    Migration {
        version: 8,
        name: "outbox",
        sql: include_str!("sql/sqlite/0008_outbox.sql"),
    },
    Migration {
        version: 9,
        name: "conductor",
        sql: include_str!("sql/sqlite/0009_conductor.sql"),
    },
    Migration {
        version: 10,
        name: "decision_confined",
        sql: include_str!("sql/sqlite/0010_decision_confined.sql"),
    },
    Migration {
        version: 11,
        name: "lifecycle",
        sql: include_str!("sql/sqlite/0011_lifecycle.sql"),
    },
    Migration {
        version: 12,
        name: "webhook_deliveries",
        sql: include_str!("sql/sqlite/0012_webhook_deliveries.sql"),
    },
    Migration {
        version: 13,
        name: "run_task_text",
        sql: include_str!("sql/sqlite/0013_run_task_text.sql"),
    },
    Migration {
        version: 14,
        name: "component_errors",
        sql: include_str!("sql/sqlite/0014_component_errors.sql"),
    },
    Migration {
        version: 15,
        name: "worker_spend",
        sql: include_str!("sql/sqlite/0015_worker_spend.sql"),
    },
    Migration {
        version: 16,
        name: "agent_pauses",
        sql: include_str!("sql/sqlite/0016_agent_pauses.sql"),
    },
    Migration {
        version: 17,
        name: "console_reads",
        sql: include_str!("sql/sqlite/0017_console_reads.sql"),
    },
    Migration {
        version: 18,
        name: "net_refusals",
        sql: include_str!("sql/sqlite/0018_net_refusals.sql"),
    },
    Migration {
        version: 19,
        name: "service_pauses",
        sql: include_str!("sql/sqlite/0019_service_pauses.sql"),
    },
];

pub const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "initial",
        sql: include_str!("sql/postgres/0001_initial.sql"),
    },
    Migration {
        version: 2,
        name: "workers",
        sql: include_str!("sql/postgres/0002_workers.sql"),
    },
    Migration {
        version: 3,
        name: "escalations",
        sql: include_str!("sql/postgres/0003_escalations.sql"),
    },
    Migration {
        version: 4,
        name: "leases",
        sql: include_str!("sql/postgres/0004_leases.sql"),
    },
    Migration {
        version: 5,
        name: "pr_memory",
        sql: include_str!("sql/postgres/0005_pr_memory.sql"),
    },
    Migration {
        version: 6,
        name: "task_facts",
        sql: include_str!("sql/postgres/0006_task_facts.sql"),
    },
    Migration {
        version: 7,
        name: "source_cursors",
        sql: include_str!("sql/postgres/0007_source_cursors.sql"),
    },
    Migration {
        version: 8,
        name: "outbox",
        sql: include_str!("sql/postgres/0008_outbox.sql"),
    },
    Migration {
        version: 9,
        name: "conductor",
        sql: include_str!("sql/postgres/0009_conductor.sql"),
    },
    Migration {
        version: 10,
        name: "decision_confined",
        sql: include_str!("sql/postgres/0010_decision_confined.sql"),
    },
    Migration {
        version: 11,
        name: "lifecycle",
        sql: include_str!("sql/postgres/0011_lifecycle.sql"),
    },
    Migration {
        version: 12,
        name: "webhook_deliveries",
        sql: include_str!("sql/postgres/0012_webhook_deliveries.sql"),
    },
    Migration {
        version: 13,
        name: "run_task_text",
        sql: include_str!("sql/postgres/0013_run_task_text.sql"),
    },
    Migration {
        version: 14,
        name: "component_errors",
        sql: include_str!("sql/postgres/0014_component_errors.sql"),
    },
    Migration {
        version: 15,
        name: "worker_spend",
        sql: include_str!("sql/postgres/0015_worker_spend.sql"),
    },
    Migration {
        version: 16,
        name: "agent_pauses",
        sql: include_str!("sql/postgres/0016_agent_pauses.sql"),
    },
    Migration {
        version: 17,
        name: "console_reads",
        sql: include_str!("sql/postgres/0017_console_reads.sql"),
    },
    Migration {
        version: 18,
        name: "net_refusals",
        sql: include_str!("sql/postgres/0018_net_refusals.sql"),
    },
    Migration {
        version: 19,
        name: "change_hints",
        sql: include_str!("sql/postgres/0019_change_hints.sql"),
    },
    Migration {
        version: 20,
        name: "service_pauses",
        sql: include_str!("sql/postgres/0020_service_pauses.sql"),
    },
];

/// The highest version in `migrations`.
pub fn latest(migrations: &[Migration]) -> i64 {
    migrations.iter().map(|m| m.version).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_consecutive_from_one() {
        for list in [SQLITE, POSTGRES] {
            for (index, migration) in list.iter().enumerate() {
                assert_eq!(migration.version, index as i64 + 1, "{}", migration.name);
            }
        }
    }

    #[test]
    fn no_migration_drops_or_renames_anything() {
        for migration in SQLITE.iter().chain(POSTGRES) {
            let sql = migration.sql.to_ascii_uppercase();
            for forbidden in [
                "DROP ",
                "RENAME ",
                "TRUNCATE ",
                "DELETE FROM",
                "ALTER COLUMN",
                "SET NOT NULL",
                "SET DATA TYPE",
            ] {
                assert!(
                    !sql.contains(forbidden),
                    "migration {} contains {forbidden}",
                    migration.name
                );
            }
        }
    }
}
