//! `executor doctor`: one line per check, a failure named with its fix, exit 1 when any
//! check failed.

use crate::support::{git, Workspace};

fn doctor(ws: &Workspace) -> (Option<i32>, String) {
    let out = crate::support::confined(&mut ws.command(&["doctor"]))
        .output()
        .expect("doctor");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The line of check `name` (its first word: `base` for the base branch).
fn line<'a>(report: &'a str, name: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no {name} line in {report}"))
}

#[test]
fn a_healthy_workspace_passes_every_check() {
    let ws = crate::runner::workspace(&["/bin/true"], &["/bin/true"], "");
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(0), "{report}");
    for name in [
        "config",
        "store",
        "agent",
        "git",
        "repository",
        "base",
        "verify",
        "confinement",
    ] {
        assert!(line(&report, name).starts_with("ok"), "{name}: {report}");
    }
    let json = ws.json(&["doctor", "--json"]);
    let checks = json.as_array().expect("a list of checks");
    assert!(checks.iter().all(|c| c["level"] != "fail"), "{json}");
    assert!(checks.iter().any(|c| c["check"] == "base branch"));
}

#[test]
fn a_missing_base_branch_and_verify_program_fail_with_the_fix() {
    let ws = crate::runner::workspace(
        &["/bin/true"],
        &["no-such-verify-program-7", "--all"],
        "base_branch = \"master\"\n",
    );
    git(&ws.path().join("repo"), &["branch", "feature-x"]);
    let (code, report) = doctor(&ws);
    assert_eq!(code, Some(1), "{report}");
    let base = line(&report, "base");
    assert!(base.starts_with("FAIL"), "{report}");
    assert!(
        base.contains("base_branch = \"master\"")
            && base.contains("main")
            && base.contains("feature-x"),
        "{base}"
    );
    let verify = line(&report, "verify");
    assert!(
        verify.starts_with("FAIL") && verify.contains("no-such-verify-program-7"),
        "{verify}"
    );
}

#[test]
fn the_example_worker_and_a_missing_wall_are_warnings() {
    let ws = Workspace::init();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(
        &config
            .replacen(
                "\n[sandbox]\n",
                "\n[sandbox]\nbwrap = \"/nonexistent/bwrap\"\n",
                1,
            )
            .replacen("# repository = \".\"", "repository = \"nowhere\"", 1),
    );
    // The workspace names the bundled example worker: doctor says it is the one chosen,
    // and that it does no real work.
    let out = crate::support::confined(&mut ws.command(&["doctor"]))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("doctor");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    let agent = line(&report, "agent");
    assert!(
        agent.starts_with("ok")
            && agent.contains("executor-example-worker")
            && agent.contains("no real work"),
        "{agent}"
    );
    let wall = line(&report, "confinement");
    assert!(
        wall.starts_with("warn") && wall.contains("/nonexistent/bwrap"),
        "{wall}"
    );
    // Not a git repository: a failure that says what to set.
    let repo = line(&report, "repository");
    assert!(
        repo.starts_with("FAIL") && repo.contains("[runner] repository"),
        "{repo}"
    );
}

/// GitHub `GET /user`, Gitea `GET /user`, Asana `GET /users/me` and Zulip `GET
/// /users/me`, each answering its own good credential as the service does and refusing
/// any other with the service's 401.
fn fake_services() -> crate::fake_server::FakeServer {
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::get;
    use axum::Json;
    use serde_json::{json, Value};
    fn answer(
        headers: &HeaderMap,
        good: &str,
        ok: Value,
        refused: Value,
    ) -> (StatusCode, Json<Value>) {
        let given = headers.get("authorization").and_then(|v| v.to_str().ok());
        if given == Some(good) {
            (StatusCode::OK, Json(ok))
        } else {
            (StatusCode::UNAUTHORIZED, Json(refused))
        }
    }
    let router = axum::Router::new()
        .route(
            "/gh/user",
            get(|h: HeaderMap| async move {
                answer(
                    &h,
                    "Bearer gh-good",
                    json!({"login": "octo-owner", "id": 1, "type": "User"}),
                    json!({"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest", "status": "401"}),
                )
            }),
        )
        .route(
            "/gitea/api/v1/user",
            get(|h: HeaderMap| async move {
                answer(
                    &h,
                    "token gitea-good",
                    json!({"id": 3, "login": "gitea-owner", "full_name": "", "email": "o@example.com"}),
                    json!({"message": "user does not exist [uid: 0, name: ]", "url": "https://gitea.example.com/api/swagger"}),
                )
            }),
        )
        .route(
            "/asana/users/me",
            get(|h: HeaderMap| async move {
                answer(
                    &h,
                    "Bearer asana-good",
                    json!({"data": {"gid": "12", "name": "Asana Owner", "email": "o@example.com", "resource_type": "user"}}),
                    serde_json::from_str(&crate::fake_asana::fixture("error_401.json")).unwrap(),
                )
            }),
        )
        .route(
            "/api/v1/users/me",
            get(|h: HeaderMap| async move {
                let given = h.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
                let bot = match given {
                    "Basic b3JjaGVzdHJhdG9yLWJvdEB6dWxpcC5leGFtcGxlOm9yY2gta2V5" => Some("Executor"),
                    "Basic d29ya2VyLWJvdEB6dWxpcC5leGFtcGxlOndvcmtlci1rZXk=" => Some("Executor worker"),
                    _ => None,
                };
                match bot {
                    Some(name) => (
                        StatusCode::OK,
                        Json(json!({"result": "success", "msg": "", "user_id": 9, "full_name": name, "is_bot": true})),
                    ),
                    None => (
                        StatusCode::UNAUTHORIZED,
                        Json(json!({"result": "error", "msg": "Invalid API key", "code": "INVALID_API_KEY"})),
                    ),
                }
            }),
        );
    crate::fake_server::FakeServer::start("Services", router)
}

fn token_workspace(url: &str) -> Workspace {
    let ws = crate::runner::workspace(&["/bin/true"], &["/bin/true"], "");
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{}kind = \"github\"\ngithub_repository = \"o/r\"\napi_url = \"{url}/gh\"\ntoken_env = \"DOCTOR_GH_TOKEN\"\n\n\
         [sources.asana]\napi_url = \"{url}/asana\"\ntoken_env = \"DOCTOR_ASANA_TOKEN\"\nprojects = [\"1\"]\n\n\
         [sources.gitea_issues]\napi_url = \"{url}/gitea/api/v1\"\nrepositories = [\"o/r\"]\nlabels = [\"executor\"]\ntoken_env = \"DOCTOR_GITEA_TOKEN\"\n\n\
         [chat.owner]\nname = \"Owner\"\nuser_id = 8\n\n[chat.zulip]\nsite = \"{url}\"\nstream = \"executor\"\nreceive = \"none\"\n\n\
         [chat.personas.orchestrator]\nname = \"Executor\"\nemail = \"orchestrator-bot@zulip.example\"\nkey_env = \"DOCTOR_ZULIP_ORCH\"\n\n\
         [chat.personas.worker]\nname = \"Executor worker\"\nemail = \"worker-bot@zulip.example\"\nkey_env = \"DOCTOR_ZULIP_WORKER\"\n",
        config
    ));
    ws
}

fn doctor_with(ws: &Workspace, args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = ws.command(args);
    for name in [
        "DOCTOR_GH_TOKEN",
        "DOCTOR_ASANA_TOKEN",
        "DOCTOR_GITEA_TOKEN",
        "DOCTOR_ZULIP_ORCH",
        "DOCTOR_ZULIP_WORKER",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    let out = command.output().expect("doctor");
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

const GOOD: [(&str, &str); 5] = [
    ("DOCTOR_GH_TOKEN", "gh-good"),
    ("DOCTOR_ASANA_TOKEN", "asana-good"),
    ("DOCTOR_GITEA_TOKEN", "gitea-good"),
    ("DOCTOR_ZULIP_ORCH", "orch-key"),
    ("DOCTOR_ZULIP_WORKER", "worker-key"),
];

fn token_lines(report: &str) -> Vec<&str> {
    report
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("token"))
        .collect()
}

#[test]
fn every_configured_token_is_tried_with_one_authenticated_read() {
    let services = fake_services();
    let ws = token_workspace(&services.url());
    let (code, report) = doctor_with(&ws, &["doctor"], &GOOD);
    assert_eq!(code, Some(0), "{report}");
    let tokens = token_lines(&report);
    assert_eq!(tokens.len(), 5, "{report}");
    for (what, who) in [
        ("GitHub token", "octo-owner"),
        ("Asana token", "Asana Owner"),
        ("Gitea token (issues)", "gitea-owner"),
        ("chat persona orchestrator", "Executor"),
        ("chat persona worker", "Executor worker"),
    ] {
        let line = tokens
            .iter()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("{what}: {report}"));
        assert!(
            line.starts_with("ok") && line.contains(&format!("authenticated as {who}")),
            "{line}"
        );
    }
    assert!(line(&report, "personas").starts_with("ok"), "{report}");
    // Never a secret on the screen.
    for (_, secret) in GOOD {
        assert!(!report.contains(secret), "{report}");
    }

    // A wrong token and a missing one: each named with its fix; the rest still ok.
    let mut bad = GOOD.to_vec();
    bad[0] = ("DOCTOR_GH_TOKEN", "gh-expired");
    bad.retain(|(name, _)| *name != "DOCTOR_ASANA_TOKEN");
    let (code, report) = doctor_with(&ws, &["doctor"], &bad);
    assert_eq!(code, Some(1), "{report}");
    let tokens = token_lines(&report);
    let github = tokens.iter().find(|l| l.contains("GitHub token")).unwrap();
    assert!(
        github.starts_with("FAIL") && github.contains("401") && !github.contains("gh-expired"),
        "{github}"
    );
    let asana = tokens.iter().find(|l| l.contains("Asana token")).unwrap();
    assert!(
        asana.starts_with("FAIL") && asana.contains("DOCTOR_ASANA_TOKEN is not set"),
        "{asana}"
    );
    assert!(
        tokens
            .iter()
            .find(|l| l.contains("Gitea"))
            .unwrap()
            .starts_with("ok"),
        "{report}"
    );

    // --offline: present is enough, no call is made (the services are gone).
    drop(services);
    let (code, report) = doctor_with(&ws, &["doctor", "--offline"], &bad);
    assert_eq!(code, Some(1), "{report}");
    let tokens = token_lines(&report);
    assert!(
        tokens
            .iter()
            .find(|l| l.contains("GitHub token"))
            .unwrap()
            .starts_with("ok"),
        "{report}"
    );
    assert!(
        tokens
            .iter()
            .find(|l| l.contains("Asana token"))
            .unwrap()
            .starts_with("FAIL"),
        "{report}"
    );
}

#[test]
fn two_personas_with_one_bot_fail() {
    let services = fake_services();
    let ws = token_workspace(&services.url());
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&config.replace("worker-bot@zulip.example", "orchestrator-bot@zulip.example"));
    let (code, report) = doctor_with(&ws, &["doctor", "--offline"], &GOOD);
    assert_eq!(code, Some(1), "{report}");
    let personas = line(&report, "personas");
    assert!(
        personas.starts_with("FAIL") && personas.contains("own Zulip bot"),
        "{personas}"
    );
}

#[test]
fn the_agent_login_is_found_without_printing_it() {
    let ws = crate::runner::workspace(&["/bin/true"], &["/bin/true"], "");
    let bin = ws.path().join("agent-bin");
    std::fs::create_dir(&bin).expect("bin");
    std::fs::write(
        bin.join("claude"),
        "#!/bin/sh\necho '2.1.0 (Claude Code)'\n",
    )
    .expect("claude");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(bin.join("claude"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    let claude = config.replace(
        "kind = \"command\"",
        &format!(
            "kind = \"claude\"\nprogram = \"{}\"\nenv = [\"ANTHROPIC_API_KEY\"]",
            bin.join("claude").display()
        ),
    );
    ws.write_config(&claude);
    let doctor = |key: Option<&str>| {
        let mut command = ws.command(&["doctor", "--offline"]);
        command.env_remove("ANTHROPIC_API_KEY");
        if let Some(key) = key {
            command.env("ANTHROPIC_API_KEY", key);
        }
        String::from_utf8_lossy(&command.output().expect("doctor").stdout).into_owned()
    };
    let with_key = doctor(Some("sk-ant-secret-1"));
    let login = line(&with_key, "login");
    assert!(
        login.starts_with("ok") && login.contains("ANTHROPIC_API_KEY"),
        "{with_key}"
    );
    assert!(!with_key.contains("sk-ant-secret-1"), "{with_key}");
    let without = doctor(None);
    let login = line(&without, "login");
    assert!(
        login.starts_with("warn") && login.contains("[agent] env"),
        "{without}"
    );
    // A subscription login in the folder workers are given.
    std::fs::create_dir(ws.path().join("agent-home")).unwrap();
    std::fs::write(ws.path().join("agent-home/.credentials.json"), "{}").unwrap();
    ws.write_config(&format!(
        "{claude}\n[sandbox]\nagent_config = \"agent-home\"\n"
    ));
    let logged_in = doctor(None);
    let login = line(&logged_in, "login");
    assert!(
        login.starts_with("ok") && login.contains("agent-home"),
        "{logged_in}"
    );
}
