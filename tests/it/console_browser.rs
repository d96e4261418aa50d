//! The console in a real browser: Debian's headless Chromium driven through chromedriver
//! (WebDriver, `fantoccini`) against a running daemon. The dashboard loads; approving an
//! escalation resumes the run and the page follows without a reload; a live worker's lines
//! appear on its Run page; a stale approve says it changed nothing. Each page's screenshot
//! is written under `target/console-screenshots/`.
//!
//! Without Chromium or chromedriver the tests say they skipped and why; in CI (`CI` set)
//! they must run, and `.ci/run` installs both.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::console::{console_address, get, pending, post, ASKING_WORKER, WAIT};
use crate::console_pages::console_workspace;
use crate::daemon::Daemon;
use crate::support::eventually;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why the browser cannot run here, if it cannot.
fn missing() -> Option<String> {
    for path in [CHROMIUM, CHROMEDRIVER] {
        if !std::path::Path::new(path).exists() {
            return Some(format!(
                "{path} is not installed (apt-get install chromium chromium-driver)"
            ));
        }
    }
    None
}

/// The driver and a browser session, or `None` after saying why the test is skipped
/// (never in CI, where the browser must run).
async fn browser() -> Option<(Driver, Client)> {
    if let Some(why) = missing() {
        assert!(
            std::env::var_os("CI").is_none(),
            "the browser tests must run in CI: {why}"
        );
        eprintln!("skipped: {why}");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let profile = tempfile::tempdir().expect("a browser profile");
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_string(),
        json!({
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1280,1000",
                     format!("--user-data-dir={}", profile.path().display())],
        }),
    );
    // chromedriver answers once it is listening: try until then.
    let start = std::time::Instant::now();
    let client = loop {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(caps.clone())
            .connect(&driver.url)
            .await
        {
            Ok(client) => break client,
            Err(_) if start.elapsed() < WAIT => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "the browser did not start in CI: {error}"
                );
                eprintln!("skipped: the browser did not start: {error}");
                return None;
            }
        }
    };
    // The profile folder lives as long as the test process; the OS cleans /tmp.
    std::mem::forget(profile);
    Some((driver, client))
}

fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"));
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir).expect("the screenshots folder");
    dir
}

async fn shoot(client: &Client, name: &str) {
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(screenshots().join(name), png).expect("write the screenshot");
}

/// Waits (with a generous deadline) until `script` returns true in the page.
async fn until(client: &Client, what: &str, script: &str) {
    let start = std::time::Instant::now();
    loop {
        let value = client
            .execute(&format!("return Boolean({script});"), vec![])
            .await
            .expect("the page answers");
        if value == json!(true) {
            return;
        }
        let page = client.source().await.unwrap_or_default();
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for {what}; the page:\n{page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
}

#[test]
fn approving_in_the_browser_resumes_the_run_without_a_reload_and_a_stale_approve_changes_nothing() {
    runtime().block_on(async {
        let Some((_driver, client)) = browser().await else {
            return;
        };
        let ws = console_workspace(ASKING_WORKER);
        let _daemon = Daemon::start(&ws);
        let address = console_address(&ws);
        let first = eventually(WAIT, "the worker's question", || {
            pending(&address).first().and_then(|e| e["id"].as_i64())
        });

        client
            .goto(&format!("http://{address}/"))
            .await
            .expect("open the dashboard");
        let card = format!("#escalation-{first}");
        client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css(&card))
            .await
            .expect("the escalation on the dashboard");
        shoot(&client, "needs-you.png").await;

        // Approve with a note; the page is never reloaded (the marker stays).
        client
            .execute("window.__notReloaded = true;", vec![])
            .await
            .expect("mark the page");
        client
            .find(Locator::Css(&format!("{card} input[name=note]")))
            .await
            .expect("the note")
            .send_keys("go ahead")
            .await
            .expect("type the note");
        client
            .find(Locator::Css(&format!("{card} button.approve")))
            .await
            .expect("the approve button")
            .click()
            .await
            .expect("click approve");
        until(
            &client,
            "the approval's notice",
            "document.querySelector('#notices [data-outcome=done]')",
        )
        .await;
        eventually(WAIT, "the run to complete", || {
            (get(&address, "/api/v1/tasks/T-1")["task"]["status"] == "done").then_some(())
        });
        until(
            &client,
            "the answered escalation to leave the page",
            &format!("!document.querySelector('{card}')"),
        )
        .await;
        until(&client, "the same page", "window.__notReloaded === true").await;
        shoot(&client, "needs-you-approved.png").await;

        // A fresh run asks again; its question comes to the open page by itself.
        let (code, body) = post(&address, "/api/v1/tasks/T-1/retry", "{}");
        assert_eq!(code, 200, "{body}");
        let second = eventually(WAIT, "the fresh run's question", || {
            pending(&address).first().and_then(|e| e["id"].as_i64())
        });
        let card = format!("#escalation-{second}");
        until(
            &client,
            "the new question on the open page",
            &format!("document.querySelector('{card}')"),
        )
        .await;
        // The page stops listening (as a page that lost its connection), the question is
        // answered elsewhere, and the page's approve is then stale.
        client
            .execute("window.executorConsole.stop();", vec![])
            .await
            .expect("stop the live feed");
        until(
            &client,
            "the page's last refresh to end",
            &format!(
                "document.querySelector('{card}') && !document.querySelector('.htmx-request')"
            ),
        )
        .await;
        let (code, body) = post(
            &address,
            &format!("/api/v1/escalations/{second}/decide"),
            r#"{"answer":"deny","note":"not today"}"#,
        );
        assert_eq!(code, 200, "{body}");
        client
            .find(Locator::Css(&format!("{card} button.approve")))
            .await
            .expect("the stale approve button")
            .click()
            .await
            .expect("click the stale approve");
        until(
            &client,
            "the stale answer's notice",
            "(document.querySelector('#notices [data-outcome=unchanged]') || {}).textContent \
             ?.includes('already answered')",
        )
        .await;
        shoot(&client, "needs-you-stale.png").await;
        let answered = get(&address, "/api/v1/escalations?all=true");
        let answer = answered
            .as_array()
            .and_then(|all| all.iter().find(|e| e["id"] == second))
            .expect("the second escalation");
        assert_eq!(
            answer["resolution"], "deny",
            "the stale approve changed nothing"
        );
        client.close().await.expect("close the browser");
    });
}

#[test]
fn a_live_workers_lines_appear_on_its_run_page_as_it_writes_them() {
    runtime().block_on(async {
        let Some((_driver, client)) = browser().await else {
            return;
        };
        let release = tempfile::tempdir().expect("temp dir");
        let marker = release.path().join("go-on");
        let worker = format!(
            "cat >/dev/null; echo '[STATUS:investigation] first step'; \
             while [ ! -f '{}' ]; do sleep 0.1; done; \
             echo '[STATUS:investigation] second step'; \
             while [ ! -f '{}.2' ]; do sleep 0.1; done; \
             echo done > CHANGED.md; echo '[DONE:implemented] all done'",
            marker.display(),
            marker.display()
        );
        let ws = console_workspace(&worker);
        let _daemon = Daemon::start(&ws);
        let address = console_address(&ws);
        let run_id = eventually(WAIT, "the worker's first line", || {
            let runs = get(&address, "/api/v1/runs");
            let run = runs.as_array()?.first()?.clone();
            let id = run["id"].as_i64()?;
            let shown = crate::console::call(&address, "GET", &format!("/runs/{id}"), &[], "").1;
            shown.as_str()?.contains("first step").then_some(id)
        });
        client
            .goto(&format!("http://{address}/runs/{run_id}"))
            .await
            .expect("open the run page");
        until(
            &client,
            "the first line",
            "document.querySelector('#lines').textContent.includes('first step')",
        )
        .await;
        client
            .execute("window.__notReloaded = true;", vec![])
            .await
            .expect("mark the page");
        std::fs::write(&marker, "").expect("let the worker go on");
        until(
            &client,
            "the second line, live",
            "document.querySelector('#lines').textContent.includes('second step')",
        )
        .await;
        until(&client, "the same page", "window.__notReloaded === true").await;
        shoot(&client, "run.png").await;
        std::fs::write(marker.with_extension("2"), "").expect("let the worker finish");
        eventually(WAIT, "the run to complete", || {
            (get(&address, "/api/v1/tasks/T-1")["task"]["status"] == "done").then_some(())
        });
        let run_row = format!("#run-{run_id}");
        let run_page = format!("/runs/{run_id}");
        for (path, name, row) in [
            ("/runs", "runs.png", run_row.as_str()),
            ("/queue", "queue.png", "#task-T-1"),
            (run_page.as_str(), "run-diff.png", "#diff-files"),
            ("/goals/T-1", "goal.png", "#node-T-1"),
            ("/system", "system.png", "#confinement"),
        ] {
            client
                .goto(&format!("http://{address}{path}"))
                .await
                .expect("open the page");
            until(&client, path, &format!("document.querySelector('{row}')")).await;
            shoot(&client, name).await;
        }
        client.close().await.expect("close the browser");
    });
}

#[test]
fn the_insights_page_draws_its_charts_from_the_figures_with_or_without_script() {
    let ws = crate::stats::three_runs_worked();
    let config = std::fs::read_to_string(ws.path().join("executor.toml")).expect("config");
    ws.write_config(&format!(
        "{config}\n[web]\nenabled = true\nlisten = \"127.0.0.1:0\"\n"
    ));
    let _daemon = Daemon::start(&ws);
    let address = console_address(&ws);
    // Without a browser's script: the charts are in the page as served.
    let (code, served) = crate::console::call(&address, "GET", "/insights", &[], "");
    let served = served.as_str().unwrap_or_default().to_string();
    assert_eq!(code, 200, "{served}");
    assert!(
        served.contains("<svg") && served.contains("<rect"),
        "{served}"
    );
    assert!(served.contains("small sample"), "{served}");
    runtime().block_on(async {
        let Some((_driver, client)) = browser().await else {
            return;
        };
        client
            .goto(&format!("http://{address}/insights"))
            .await
            .expect("open Insights");
        until(
            &client,
            "the charts",
            "document.querySelectorAll('#charts svg rect.bar').length >= 5",
        )
        .await;
        let tiles = client
            .find(Locator::Id("tiles"))
            .await
            .expect("the tiles")
            .text()
            .await
            .expect("their text");
        assert!(tiles.contains("3\nruns") || tiles.contains("3 runs"), "{tiles}");
        // The day's bar holds two completed runs and one abandoned, each titled.
        let titles = client
            .execute(
                "return Array.from(document.querySelectorAll('#charts svg rect.bar title')).map(t => t.textContent);",
                vec![],
            )
            .await
            .expect("the bars' titles");
        let titles = titles.to_string();
        assert!(titles.contains(": 2 completed"), "{titles}");
        assert!(titles.contains(": 1 abandoned"), "{titles}");
        assert!(titles.contains("merged: 0"), "{titles}");
        shoot(&client, "insights.png").await;
        client.close().await.expect("close the browser");
    });
}
