use super::*;

fn parse_ok(text: &str) -> Settings {
    parse(Path::new("/ws/executor.toml"), text, &Env::default()).expect("config parses")
}

fn parse_err(text: &str) -> String {
    parse(Path::new("/ws/executor.toml"), text, &Env::default())
        .expect_err("config must be refused")
        .to_string()
}

#[test]
fn the_template_parses_to_the_defaults() {
    let settings = parse_ok(TEMPLATE);
    assert_eq!(
        settings.storage,
        StorageTarget::Sqlite(PathBuf::from("/ws/executor.db"))
    );
    assert_eq!(
        settings.plans,
        Some(PlansSettings {
            dir: PathBuf::from("/ws/plans"),
            initial_status: QueueStatus::Approved,
            settle: Duration::from_millis(300),
        })
    );
    assert_eq!(settings.raw.runner.max_workers, 2);
    assert_eq!(
        settings.raw.runner.no_output_timeout,
        Duration::from_secs(1800)
    );
    assert_eq!(settings.raw.runner.hard_timeout, Duration::from_secs(10800));
    assert_eq!(settings.raw.analyzer.hard_timeout, Duration::from_secs(900));
}

#[test]
fn every_commented_key_in_the_template_is_a_real_key() {
    let uncommented: String = TEMPLATE
        .lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(rest) if rest.contains(" = ") || rest.starts_with('[') => rest,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(uncommented.contains("\nmax_workers = 2"), "{uncommented}");
    assert!(uncommented.contains("\npassword_file = "), "{uncommented}");
    let settings = parse_ok(&uncommented);
    let chat = &settings.raw.chat;
    assert!(chat.zulip.is_some());
    assert_eq!(chat.personas.len(), 2);
    assert_eq!(chat.webhooks.len(), 1);
}

#[test]
fn an_empty_file_is_all_defaults() {
    let settings = parse_ok("");
    assert_eq!(
        settings.storage,
        StorageTarget::Sqlite(PathBuf::from("/ws/executor.db"))
    );
}

#[test]
fn a_misspelt_key_is_named_with_its_line() {
    let err = parse_err("[storage]\nurl = \"sqlite://x.db\"\n\n[runner]\nmax_wrokers = 3\n");
    assert!(err.contains("/ws/executor.toml"), "{err}");
    assert!(err.contains("line 5"), "{err}");
    assert!(err.contains("max_wrokers"), "{err}");
}

#[test]
fn a_wrong_type_is_named_with_its_line() {
    let err = parse_err("[runner]\nmax_workers = \"two\"\n");
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("max_workers"), "{err}");
}

#[test]
fn an_unknown_section_is_refused() {
    let err = parse_err("[storag]\nurl = \"sqlite://x.db\"\n");
    assert!(err.contains("storag"), "{err}");
    assert!(err.contains("line 1"), "{err}");
}

#[test]
fn an_unknown_storage_scheme_is_named_with_its_line() {
    let err = parse_err("# comment\n[storage]\nurl = \"mysql://db/x\"\n");
    assert_eq!(
        err,
        "/ws/executor.toml, line 3, `storage.url`: unknown scheme `mysql` (expected sqlite:// or postgres://)"
    );
}

#[test]
fn a_password_in_the_config_file_is_refused() {
    let err = parse_err("[storage]\nurl = \"postgres://u:hunter2@db/x\"\n");
    assert!(err.contains("storage.url"), "{err}");
    assert!(
        !err.contains("hunter2"),
        "the error must not echo the secret: {err}"
    );
}

#[test]
fn postgres_url_takes_the_password_from_the_environment() {
    let env = Env {
        storage_url: None,
        pg_password: Some("s3cret".into()),
    };
    let settings = parse(
        Path::new("/ws/executor.toml"),
        "[storage]\nurl = \"postgres://postgres@127.0.0.1:5432/test\"\n",
        &env,
    )
    .expect("parses");
    assert_eq!(
        settings.storage,
        StorageTarget::Postgres {
            url: "postgres://postgres@127.0.0.1:5432/test".into(),
            password: Some("s3cret".into())
        }
    );
    assert!(!settings.storage.display().contains("s3cret"));
}

#[test]
fn a_password_file_that_cannot_be_read_is_named() {
    let err =
        parse_err("[storage]\nurl = \"postgres://u@db/x\"\npassword_file = \"missing-secret\"\n");
    assert!(err.contains("line 3, `storage.password_file`"), "{err}");
    assert!(err.contains("/ws/missing-secret"), "{err}");
}

#[test]
fn the_environment_url_overrides_the_file_and_names_itself_in_errors() {
    let env = Env {
        storage_url: Some("redis://x".into()),
        pg_password: None,
    };
    let err = parse(Path::new("/ws/executor.toml"), "", &env)
        .expect_err("bad env url")
        .to_string();
    assert!(err.starts_with(STORAGE_URL_ENV), "{err}");
}

#[test]
fn plans_initial_status_is_checked() {
    let err = parse_err("[sources.plans]\ninitial_status = \"done\"\n");
    assert!(err.contains("line 2"), "{err}");
    assert!(err.contains("sources.plans.initial_status"), "{err}");
}

#[test]
fn zero_workers_is_refused() {
    let err = parse_err("[runner]\nmax_workers = 0\n");
    assert!(err.contains("line 2, `runner.max_workers`"), "{err}");
}

#[test]
fn durations_read_as_humans_write_them() {
    let settings = parse_ok("[runner]\nno_output_timeout = \"90s\"\nhard_timeout = \"1h 30m\"\n");
    assert_eq!(
        settings.raw.runner.no_output_timeout,
        Duration::from_secs(90)
    );
    assert_eq!(settings.raw.runner.hard_timeout, Duration::from_secs(5400));
}

#[test]
fn a_password_as_a_url_parameter_is_refused_too() {
    let err = parse_err("[storage]\nurl = \"postgres://u@db/x?password=hunter2\"\n");
    assert!(err.contains("line 2, `storage.url`"), "{err}");
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn a_malformed_postgres_url_is_named_with_its_line() {
    let err = parse_err("[storage]\nurl = \"postgres://u@db:notaport/x\"\n");
    assert!(err.contains("line 2, `storage.url`"), "{err}");
    assert!(err.contains("not a valid Postgres URL"), "{err}");
}

#[test]
fn an_environment_url_is_never_echoed() {
    let env = Env {
        storage_url: Some("hunter2".into()),
        pg_password: None,
    };
    let err = parse(Path::new("/ws/executor.toml"), "", &env)
        .expect_err("not a URL")
        .to_string();
    assert!(!err.contains("hunter2"), "{err}");
}

#[test]
fn zero_durations_are_refused() {
    let err = parse_err("[runner]\nloop_sleep = \"0s\"\n");
    assert!(err.contains("line 2, `runner.loop_sleep`"), "{err}");
    let err = parse_err("[analyzer]\nhard_timeout = \"0s\"\n");
    assert!(err.contains("`analyzer.hard_timeout`"), "{err}");
}

#[test]
fn agent_env_hands_the_agent_its_own_variables_only() {
    let settings =
        parse_ok("[agent]\nkind = \"claude\"\nenv = [\"ANTHROPIC_API_KEY\", \"CODEX_HOME\"]\n");
    let names: Vec<&str> = settings
        .raw
        .agent
        .env
        .iter()
        .map(|n| n.get_ref().as_str())
        .collect();
    assert_eq!(names, ["ANTHROPIC_API_KEY", "CODEX_HOME"]);

    for secret in [
        "GITHUB_TOKEN",
        "gh_token",
        "PGPASSWORD",
        "EXECUTOR_STORAGE_URL",
        "ZULIP_API_KEY",
    ] {
        let err = parse_err(&format!("[agent]\n\nenv = [\"HOME\", \"{secret}\"]\n"));
        assert!(
            err.contains("line 3") && err.contains("agent.env") && err.contains(secret),
            "{secret}: {err}"
        );
        assert!(err.contains("executor's own secrets"), "{err}");
    }
    let err = parse_err("[agent]\nenv = [\"NOT A NAME\"]\n");
    assert!(err.contains("not an environment variable name"), "{err}");
}

#[test]
fn zero_max_turns_is_refused() {
    let err = parse_err("[agent]\nmax_turns = 0\n");
    assert!(
        err.contains("line 2") && err.contains("agent.max_turns"),
        "{err}"
    );
}

#[test]
fn the_usage_limit_back_off_is_half_an_hour_unless_set_and_never_zero() {
    assert_eq!(
        parse_ok("").raw.agent.usage_limit_backoff,
        std::time::Duration::from_secs(1800)
    );
    assert_eq!(
        parse_ok("[agent]\nusage_limit_backoff = \"2h\"\n")
            .raw
            .agent
            .usage_limit_backoff,
        std::time::Duration::from_secs(7200)
    );
    let err = parse_err("[agent]\nusage_limit_backoff = \"0s\"\n");
    assert!(err.contains("agent.usage_limit_backoff"), "{err}");
}

#[test]
fn worktrees_can_be_turned_off() {
    assert!(parse_ok("").raw.runner.worktrees);
    assert!(
        !parse_ok("[runner]\nworktrees = false\n")
            .raw
            .runner
            .worktrees
    );
}

#[test]
fn a_gitea_forge_names_its_repository_and_api_and_reads_gitea_token_unless_told() {
    let gitea = "[forge]\nkind = \"gitea\"\ngitea_repository = \"mkowalski/lumen-browser\"\napi_url = \"https://gitea.example.com/api/v1\"\n";
    let settings = parse_ok(gitea);
    let forge = &settings.raw.forge;
    assert_eq!(forge.token_variable(), "GITEA_TOKEN");
    assert_eq!(forge.repository(), Some(("mkowalski", "lumen-browser")));
    let told = parse_ok(&format!("{gitea}token_env = \"MY_GITEA\"\n"));
    assert_eq!(told.raw.forge.token_variable(), "MY_GITEA");
    // On GitHub the default stays GitHub's.
    let github = parse_ok("[forge]\nkind = \"github\"\ngithub_repository = \"o/r\"\n");
    assert_eq!(github.raw.forge.token_variable(), "GITHUB_TOKEN");

    let err = parse_err("[forge]\nkind = \"gitea\"\napi_url = \"https://g.example.com/api/v1\"\n");
    assert!(err.contains("forge.gitea_repository"), "{err}");
    let err = parse_err("[forge]\nkind = \"gitea\"\ngitea_repository = \"lumen\"\n");
    assert!(
        err.contains("line 3") && err.contains("not owner/name"),
        "{err}"
    );
    let err = parse_err("[forge]\nkind = \"gitea\"\ngitea_repository = \"o/r\"\n");
    assert!(err.contains("forge.api_url"), "{err}");
    let err = parse_err(&format!(
        "[agent]\nenv = [\"MY_GITEA\"]\n\n{gitea}token_env = \"MY_GITEA\"\n"
    ));
    assert!(err.contains("never reaches a worker"), "{err}");
}

#[test]
fn a_github_forge_names_its_repository_and_keeps_its_token_from_workers() {
    let settings = parse_ok("[forge]\nkind = \"github\"\ngithub_repository = \"mkowalski/lumen-browser\"\nrequired_labels = [\"executor\"]\n");
    assert_eq!(settings.raw.forge.token_env.get_ref(), "GITHUB_TOKEN");
    assert_eq!(
        settings.raw.forge.api_url.get_ref(),
        "https://api.github.com"
    );

    let err = parse_err("[forge]\nkind = \"github\"\n");
    assert!(err.contains("forge.github_repository"), "{err}");
    let err = parse_err("[forge]\nkind = \"github\"\ngithub_repository = \"lumen\"\n");
    assert!(
        err.contains("line 3") && err.contains("not owner/name"),
        "{err}"
    );
    let err =
        parse_err("[agent]\nenv = [\"MY_FORGE_KEY\"]\n\n[forge]\ntoken_env = \"MY_FORGE_KEY\"\n");
    assert!(
        err.contains("line 2") && err.contains("never reaches a worker"),
        "{err}"
    );
}

#[test]
fn the_owners_rule_filters_load_and_judge() {
    let text = format!(
        "[analyzer]\n{}",
        crate::core::filter::OWNER_RULES_TOML.replace("[[rules]]", "[[analyzer.rules]]")
    );
    let settings = parse_ok(&text);
    let filters = settings.raw.analyzer.filters().expect("compiled");
    assert_eq!(filters.rule_count(), 5);
}

#[test]
fn a_bad_rule_is_named_with_its_line() {
    let err = parse_err(
        "[analyzer]\n\n[[analyzer.rules]]\nid = \"ok\"\nwhen = { closed = true }\n\n[[analyzer.rules]]\nid = \"figma\"\nwhen = { text_matches = \"(figma\" }\n",
    );
    assert!(err.contains("line 8"), "{err}");
    assert!(err.contains("analyzer.rules"), "{err}");
    assert!(err.contains("`figma`"), "{err}");
    let err = parse_err("[[analyzer.rules]]\nid = \"x\"\nwhen = { title_has = \"a\" }\n");
    assert!(err.contains("title_has"), "{err}");
}

#[test]
fn an_asana_source_reads_its_scope_and_names_a_bad_one() {
    let settings = parse_ok(
        "[sources.asana]\nprojects = [\"1209512345678901\"]\nsections = [\"1209512345678905\"]\npoll_interval = \"2m\"\ntoken_env = \"MY_ASANA\"\n",
    );
    let asana = settings.raw.sources.asana.expect("configured");
    assert_eq!(asana.poll_interval, Duration::from_secs(120));
    assert_eq!(asana.token_env.get_ref(), "MY_ASANA");
    let scope = asana.scope().expect("a scope");
    assert_eq!(scope.projects, ["1209512345678901"]);
    assert_eq!(scope.sections, ["1209512345678905"]);

    let err = parse_err("[runner]\n\n[sources.asana]\nprojects = [\"not-a-gid\"]\n");
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("sources.asana"), "{err}");
    let err = parse_err("[sources.asana]\nprojects = [\"1\"]\nprojcts = [\"2\"]\n");
    assert!(err.contains("projcts"), "{err}");
    let err =
        parse_err("[sources.asana]\nprojects = [\"1\"]\n\n[agent]\nenv = [\"ASANA_TOKEN\"]\n");
    assert!(err.contains("never reaches a worker"), "{err}");
}

const CHAT: &str = r#"
[chat.owner]
name = "Marek Kowalski"
email = "user8@lumen.zulipchat.com"

[chat.zulip]
site = "https://lumen.zulipchat.com"
stream = "executor"

[chat.personas.orchestrator]
name = "Executor"
email = "executor-bot@lumen.zulipchat.com"
key_env = "ZULIP_ORCHESTRATOR_KEY"
"#;

#[test]
fn chat_defaults_and_a_minimal_zulip() {
    let settings = parse_ok(CHAT);
    let chat = &settings.raw.chat;
    assert_eq!(chat.window, 20);
    let zulip = chat.zulip.as_ref().expect("zulip");
    assert_eq!(zulip.topic, "executor");
    assert_eq!(zulip.receive, chat::Receive::Events);
    assert_eq!(zulip.priorities.len(), 3);
    assert_eq!(
        chat.log.priorities,
        [
            crate::core::outbox::Priority::Urgent,
            crate::core::outbox::Priority::Action
        ]
    );
}

#[test]
fn zulip_needs_an_owner_and_an_orchestrator_persona() {
    let no_owner = CHAT.replace(
        "[chat.owner]\nname = \"Marek Kowalski\"\nemail = \"user8@lumen.zulipchat.com\"\n",
        "",
    );
    let err = parse_err(&no_owner);
    assert!(err.contains("chat.owner"), "{err}");
    let no_persona = CHAT.replace("[chat.personas.orchestrator]", "[chat.personas.worker]");
    let err = parse_err(&no_persona);
    assert!(err.contains("orchestrator"), "{err}");
}

#[test]
fn chat_mistakes_are_named() {
    let err = parse_err(&CHAT.replace("[chat.personas.orchestrator]", "[chat.personas.boss]"));
    assert!(err.contains("`boss` is not a persona"), "{err}");
    assert!(err.contains("line 10"), "{err}");
    let err = parse_err(&format!("{CHAT}\n[chat.log]\npriorities = [\"loud\"]\n"));
    assert!(err.contains("loud"), "{err}");
    let err = parse_err(&CHAT.replace("https://lumen.zulipchat.com", "lumen"));
    assert!(err.contains("chat.zulip.site"), "{err}");
    let err = parse_err(&CHAT.replace("key_env = \"ZULIP_ORCHESTRATOR_KEY\"", ""));
    assert!(err.contains("key_env or key_file"), "{err}");
    let err = parse_err(&format!(
        "{CHAT}\n[agent]\nenv = [\"ZULIP_ORCHESTRATOR_KEY\"]\n"
    ));
    assert!(err.contains("never reaches a worker"), "{err}");
    for (extra, var) in [
        (
            "[[chat.webhooks]]\nname = \"ops\"\nkind = \"json\"\nurl_env = \"PAGER_URL\"\n",
            "PAGER_URL",
        ),
        ("", "ZULIP_WEBHOOK_TOKEN"),
    ] {
        let err = parse_err(&format!("{CHAT}\n{extra}\n[agent]\nenv = [\"{var}\"]\n"));
        assert!(
            err.contains(var) && err.contains("never reaches a worker"),
            "{err}"
        );
    }
    let err = parse_err("[[chat.webhooks]]\nname = \"ops\"\nkind = \"json\"\n");
    assert!(err.contains("url_env or url_file"), "{err}");
}

#[test]
fn the_consoles_tokens_never_reach_a_worker_and_prices_name_an_agent() {
    let err = parse_err(
        "[agent]\nenv = [\"HOME_DIR\", \"CONSOLE_TOKEN\"]\n\n[web]\ntoken_env = \"CONSOLE_TOKEN\"\n",
    );
    assert!(
        err.contains("CONSOLE_TOKEN") && err.contains("never reaches a worker"),
        "{err}"
    );
    let err = parse_err(
        "[agent]\nenv = [\"READ_TOKEN\"]\n\n[web]\nread_only_token_env = \"READ_TOKEN\"\n",
    );
    assert!(err.contains("READ_TOKEN"), "{err}");
    let err = parse_err("[spend.prices.gpt]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n");
    assert!(
        err.contains("`gpt` is not an agent") && err.contains("line 1"),
        "{err}"
    );
    let err = parse_err("[budget]\nday_offset = \"CET\"\n");
    assert!(err.contains("not an offset from UTC"), "{err}");
    let settings = parse_ok("[budget]\nper_day_usd = 20.0\nday_offset = \"+02:00\"\n");
    assert_eq!(settings.raw.budget.per_day_usd, Some(20.0));
    assert_eq!(settings.raw.budget.day_offset.local_minus_utc(), 7200);
    assert!(parse_ok("").raw.web.enabled, "the console is on by default");
}

#[test]
fn auto_merge_is_off_by_default_reads_its_table_and_names_a_bad_method() {
    let github = "[forge]\nkind = \"github\"\ngithub_repository = \"mkowalski/lumen-browser\"\n";
    assert_eq!(parse_ok(github).raw.forge.auto_merge.settings(), None);
    let on = parse_ok(&format!(
        "{github}auto_merge = {{ enabled = true, method = \"rebase\", require_approval = false }}\n"
    ));
    assert_eq!(
        on.raw.forge.auto_merge.settings(),
        Some(crate::core::merge::AutoMerge {
            method: crate::core::merge::MergeMethod::Rebase,
            require_approval: false,
            delete_branch: true,
        })
    );
    let err = parse_err(&format!(
        "{github}auto_merge = {{ enabled = true, method = \"fast-forward\" }}\n"
    ));
    assert!(
        err.contains("forge.auto_merge.method") && err.contains("line 4"),
        "{err}"
    );
    let err = parse_err("[forge]\nauto_merge = { enabled = true }\n");
    assert!(
        err.contains("forge.auto_merge") && err.contains("local"),
        "{err}"
    );
}
