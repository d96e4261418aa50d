//! One integration-test binary (one link, one build): the real `executor` binary in temp
//! workspaces, the real SQLite, and the real Postgres named by `EXECUTOR_TEST_PG`.

mod analyzer;
mod asana;
mod asana_intake;
mod chat_runs;
mod cli;
mod daemon;
mod escalations;
mod fake_asana;
mod fake_github;
mod fake_webhook;
mod fake_zulip;
mod github_batch;
mod github_client;
mod github_issues;
mod github_issues_intake;
mod github_observe;
mod github_runs;
mod hook;
mod model_server;
mod pg_adoption;
mod policy;
mod real_agents;
mod real_runs;
mod reanalyze;
mod runner;
mod store_conformance;
mod supervisor;
mod support;
mod triage;
mod webhook;
mod worktree;
mod zulip;
