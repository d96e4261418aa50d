//! The `executor.toml` that `executor init` writes: every section present, every key shown
//! with its default. Commented keys are the defaults; uncomment one to change it.

pub const TEMPLATE: &str = r#"# executor configuration. Paths are relative to this file.
# Secrets never go here: they come from the environment or from files named below.

[storage]
# sqlite://PATH (embedded, one file) or postgres://USER@HOST:PORT/DB (shared queue).
# EXECUTOR_STORAGE_URL overrides this; a Postgres password comes from PGPASSWORD,
# password_file, or EXECUTOR_STORAGE_URL, never from this file.
url = "sqlite://executor.db"
# password_file = "secrets/pg-password"

[runner]
# max_workers = 2               # live worker processes at most
# loop_sleep = "60s"            # between forge polls while workers are alive
# no_output_timeout = "30m"     # no meaningful output for this long: the worker is stopped
# hard_timeout = "3h"           # wall-clock cap per worker
# repository = "."              # the git repository workers change
# base_branch = "main"
# branch_prefix = "executor/"
# worktrees_dir = "worktrees"
# logs_dir = "logs"
# stop_grace = "10s"            # between TERM and KILL when a worker is stopped
# retry_backoff = "5s"          # first wait before retrying a worker (doubles, max 1 min)
# lease_ttl = "60s"             # a runner's claim on a run; another runner may take it over after
# max_worker_attempts = 3       # workers ending without [DONE] before the run is abandoned
# keep_worktrees = "7d"         # a finished run's worktree is removed after this (branch kept)
# worktrees = true              # false: workers run in the repository itself, nothing committed
# commit_author = "Your Name <you@example.com>"  # who run commits are by (unset: the
#                               # repository's user.name / user.email); each carries
#                               # Executor-Run: and Executor-Task: trailers

[analyzer]
# no_output_timeout = "5m"
# hard_timeout = "15m"
# qualifying_sources = ["plans", "cli", "import", "asana", "github", "gitea"]  # others are skipped
# owner = ["your Asana user gid", "Your Name"]  # who `assigned_to_other` means is not you
# Rule filters skip tasks before any model is paid: [[analyzer.rules]] with id, reason and
# when (docs: "Analyzer").

[agent]
# kind = "auto"                 # auto (claude, else codex, else pi) | claude | codex | pi | command | example
# command = []                  # argv of the worker when kind = "command"
# program = "claude"            # the claude / codex CLI, when not on PATH by that name
# model = "..."                 # unset: the agent's own default
# allowed_tools = []            # claude: pre-approved tools (--allowedTools); the hook
#                               # still judges every call; pi: its only tools (--tools)
# max_turns = 100              # claude: --max-turns (unset: no cap)
# env = []                      # variables workers get from executor's environment, e.g.
#                               # ["ANTHROPIC_API_KEY", "CODEX_HOME"]; executor's own
#                               # secrets (GITHUB_TOKEN, PGPASSWORD, ...) are refused
# hooks = true                  # claude: every tool call is decided by roles/worker-policy.json
# usage_limit_backoff = "30m"   # the pause after the agent reports a usage limit without
#                               # a reset (a reset it gives is waited for; docs: "Usage limits")

[forge]
# kind = "local"                # local | github | gitea
# verify = []                   # local CI, run in the worktree: e.g. ["cargo", "test"]
# max_ci_attempts = 3           # failed verifications answered by a fix_ci worker
# github_repository = "owner/name"   # kind = "github": the repository's GitHub name
# gitea_repository = "owner/name"    # kind = "gitea": its Gitea name; api_url is then
#                               # Gitea's (https://HOST/api/v1), token_env GITEA_TOKEN
# api_url = "https://api.github.com" # GitHub Enterprise: https://HOST/api/v3
# token_env = "GITHUB_TOKEN"    # the variable holding the token (never given to workers)
# token_file = "secrets/github-token" # or a file holding it
# remote = "origin"             # where run branches are pushed
# required_checks = []          # green before review and completion
# required_labels = []          # on every draft PR
# resolve_acknowledged = false  # resolve threads ending in [ACKNOWLEDGED: ...]
# ci_workflow = "ci.yml"        # dispatched when a head has no CI at all
# ci_start_grace = "5m"         # CI may take this long to appear after a push
# max_effect_failures = 5       # failed GitHub writes in a row before the owner is asked
# webhook_secret_env = "GITHUB_WEBHOOK_SECRET"  # or webhook_secret_file: GitHub's webhook
#                               # deliveries on [web] listen, POST /webhooks/github (docs: "GitHub")
# webhook_poll = "10m"          # the PR poll while webhooks come in (else runner.loop_sleep)
# auto_merge = { enabled = false, method = "squash", require_approval = true, delete_branch = true }
#                               # executor merges a complete run's PR itself once it is out of
#                               # draft, green, reviewed and approved (docs: "Auto-merge")

[sources.plans]
# One task per markdown note; front matter keys: title, priority, source, gid.
# enabled = true
path = "plans"
# initial_status = "approved"   # approved (the owner wrote these) | pending (analyze first)
# settle = "300ms"              # the daemon takes a note in once it has gone this long unwritten
# Asana and GitHub issues are read when you add [sources.asana] or [sources.github_issues]
# (docs: "Asana", "GitHub issues").

# [sources.gitea_issues]        # Gitea issues by label (docs: "Gitea issues")
# api_url = "https://gitea.example.com/api/v1"
# repositories = ["owner/name"]
# labels = ["executor"]         # an issue with any one of these is work
# token_env = "GITEA_TOKEN"     # the variable holding the token; or token_file
# include_closed = false        # the first read leaves out closed issues
# poll_interval = "5m"

[chat]
# The log always hears what needs you; Zulip and webhooks are added below (docs: "Chat").
# window = 20                   # a run's latest messages an escalation shows
# retry_base = "5s"             # a notifier that is down is retried, doubling up to
# retry_max = "5m"              # retry_max; nothing is lost, order is kept

# [chat.log]
# priorities = ["urgent", "action"]   # urgent: escalations; action: runs done or abandoned;
#                                     # info: every worker line and decision

# [chat.owner]                  # only the owner's answers count in chat
# name = "Your Full Name"       # for @**mentions**
# email = "you@example.zulipchat.com"   # and/or user_id = 8

# [chat.zulip]
# site = "https://example.zulipchat.com"
# stream = "executor"
# topic = "executor"
# priorities = ["urgent", "action", "info"]
# receive = "events"            # events (long poll) | webhook (outgoing webhook) | none
# webhook_listen = "127.0.0.1:8451"     # receive = "webhook": POST /zulip
# webhook_token_env = "ZULIP_WEBHOOK_TOKEN"

# [chat.personas.orchestrator]  # each persona is its own Zulip bot
# name = "Executor"
# email = "executor-bot@example.zulipchat.com"
# key_env = "ZULIP_ORCHESTRATOR_KEY"    # or key_file = "secrets/orchestrator.key"

# [chat.personas.worker]
# name = "Executor worker"
# email = "executor-worker-bot@example.zulipchat.com"
# key_env = "ZULIP_WORKER_KEY"

# [[chat.webhooks]]
# name = "ops"
# kind = "json"                 # json | slack (an incoming-webhook URL)
# url_env = "EXECUTOR_OPS_WEBHOOK_URL"  # the URL is a secret; or url_file
# priorities = ["urgent", "action"]

[conductor]
# goal_labels = ["goal"]        # a task with one of these labels is split into subtasks
#                               # first (docs: "Goals and subtasks")
# max_depth = 2                 # a failing subtask is split again, this deep at most
# review_rounds = 0             # review rounds before integration (0: none)
# build_log = "BUILD_LOG.md"    # the record step appends each completed run here

[policy]
# ask_model_first = []          # escalations a model looks at before you: action kinds
#                               # (merge_pr), escalation kinds (needs_decision) or rule ids;
#                               # it may deny them or leave them to you, never approve
# judge_timeout = "5m"

[sandbox]
# The wall every worker runs inside (docs: "Confinement").
# mode = "auto"                 # auto: confine where bubblewrap works, else run unconfined
#                               # (strictly judged) and say so | required | off
# minimum = "bubblewrap"        # the least wall `required` takes; "landlock": Landlock and
#                               # seccomp alone where bubblewrap cannot run (docs: "Confinement")
# network = "allowlist"         # allowlist: only the agent's model API and `allow`, through
#                               # executor's proxy | none | host
# allow = []                    # more "host:port"; "127.0.0.1:PORT" forwards a local port
# read_only = []                # more paths a worker sees, e.g. "~/.cargo", "~/.rustup"
# read_write = []               # paths a worker may write besides its worktree
# agent_config = "agent-home"   # copied into each run's private home as the agent's config
# max_processes = 4096          # each worker at most: a pids cgroup of its own where one can
#                               # be had, else RLIMIT_NPROC (never for root; `executor doctor`)
# max_file_size = "4G"
# max_memory = "50%"            # each worker at most (a size, a share, or "none"); needs
#                               # a delegated cgroup v2 (`executor doctor` says)
# max_disk = "25%"              # what a run's worker writes at most (worktree, home, /tmp):
#                               # a size, a share of the free space (at most 32G), or "none"

[web]
# The owner's console: pages, the JSON API, /metrics (docs: "The console").
# enabled = true                # false: no console (webhooks are still served on listen)
# listen = "127.0.0.1:8450"     # loopback needs no login; any other address needs a token
# token_file = "secrets/console-token"   # or token_env = "EXECUTOR_CONSOLE_TOKEN"
# read_only_token_file = "secrets/console-read-token"   # or read_only_token_env: reads only

[spend]
# Each worker's tokens, turns and cost come from its agent's own result events (docs:
# "Spend"). Codex reports tokens but no cost: price them here, US dollars per million.
# [spend.prices.codex]
# input_per_mtok = 1.25
# cached_input_per_mtok = 0.125
# output_per_mtok = 10.0

[budget]
# Caps on what workers spend, each off unless set (docs: "Budgets"). Over its task's cap a
# run starts no new worker and asks you; over the day's cap no new task is taken that day.
# per_task_usd = 5.0
# per_task_tokens = 2000000     # fresh input, output and cached tokens together
# per_day_usd = 20.0
# day_offset = "+00:00"         # a budget day begins at midnight of this offset from UTC
"#;

#[cfg(test)]
mod tests {
    use super::TEMPLATE;

    /// The configuration reference (`docs/configuration.md`) is this template, byte for
    /// byte: a change to one without the other fails here.
    #[test]
    fn the_configuration_reference_is_the_template() {
        let page = include_str!("../../docs/configuration.md");
        let section = page
            .find("## Configuration reference")
            .map(|at| &page[at..])
            .expect("docs/configuration.md has a configuration reference");
        let open = section.find("```toml\n").expect("its toml block") + "```toml\n".len();
        let close = section[open..].find("\n```").expect("the block's end") + open + 1;
        assert_eq!(
            &section[open..close],
            TEMPLATE,
            "docs/configuration.md's reference differs from src/config/template.rs: copy the template into it"
        );
    }
}
