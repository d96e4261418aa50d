//! `executor init`: lays out a workspace. It never overwrites: what is already there is kept
//! and reported as kept, so running it twice is safe.

use std::path::Path;

use anyhow::{Context, Result};

use crate::config::{self, Env};
use crate::store;

pub(crate) const WORKER_POLICY: &str = crate::policy::WORKER_CONTRACT;
const CONDUCTOR_POLICY: &str = crate::policy::CONDUCTOR_CONTRACT;

/// The example workspace's repository and verification, replacing the template's defaults.
const EXAMPLE_REPO: &str = "example-repo";
const EXAMPLE_NOTE: &str = "---\ngid: EXAMPLE-1\n---\n# Write an example file\n\nCreate EXECUTOR_EXAMPLE.md describing this task.\n";

pub async fn run(dir: &Path, example: bool) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config_text = if example {
        config::TEMPLATE
            .replace(
                "# repository = \".\"              # the git repository workers change",
                &format!("repository = \"{EXAMPLE_REPO}\"    # the git repository workers change"),
            )
            .replace(
                "# verify = []                   # local CI",
                "verify = [\"sh\", \"-c\", \"test -s EXECUTOR_EXAMPLE.md\"]  # local CI",
            )
            // The example worker runs only where it is asked for by name: `auto` never
            // picks it, so a real task is never marked done by it.
            .replacen(
                "# kind = \"auto\"",
                "kind = \"example\"                # the bundled example worker: no real work\n# kind = \"auto\"",
                1,
            )
    } else {
        config::TEMPLATE.to_string()
    };
    let example_config_written = example && !dir.join(config::FILE_NAME).exists();
    if example && !example_config_written {
        eprintln!(
            "note: executor.toml is already there, so the example's settings are not applied"
        );
    }
    let files: [(&str, &str); 3] = [
        (config::FILE_NAME, config_text.as_str()),
        ("roles/worker-policy.json", WORKER_POLICY),
        ("roles/conductor-policy.json", CONDUCTOR_POLICY),
    ];
    for (name, contents) in files {
        let path = dir.join(name);
        if path.exists() {
            println!("kept     {name} (already there)");
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, contents)
            .with_context(|| format!("cannot write {}", path.display()))?;
        println!("created  {name}");
    }
    let prompts = dir.join("prompts");
    std::fs::create_dir_all(&prompts)
        .with_context(|| format!("cannot create {}", prompts.display()))?;
    for (name, contents) in crate::prompts::builtin_files() {
        let path = prompts.join(name);
        if path.exists() {
            continue;
        }
        std::fs::write(&path, contents)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let analyzer_prompt = prompts.join(crate::analyzer::PROMPT_FILE);
    if !analyzer_prompt.exists() {
        std::fs::write(&analyzer_prompt, crate::analyzer::BUILTIN_PROMPT)
            .with_context(|| format!("cannot write {}", analyzer_prompt.display()))?;
    }
    // What is there now must load: an owner's earlier edit that no longer does is named here.
    crate::prompts::PromptSet::load(&prompts)?;
    crate::analyzer::PromptTemplate::load(Some(&analyzer_prompt))?;
    println!("ready    prompts/ (one template per worker phase, and the analyzer's)");

    let settings = config::load(&dir.join(config::FILE_NAME), &Env::from_process())?;
    if inside_a_repository(dir) {
        ignore_own_files(dir)?;
    }
    if let Some(plans) = &settings.plans {
        std::fs::create_dir_all(&plans.dir)
            .with_context(|| format!("cannot create {}", plans.dir.display()))?;
        println!("ready    plans folder {}", plans.dir.display());
    }
    store::open(&settings.storage)
        .await
        .with_context(|| format!("cannot open {}", settings.storage.display()))?;
    println!("ready    {}", settings.storage.display());
    if example_config_written {
        make_example(dir, settings.plans.as_ref().map(|p| p.dir.as_path()))?;
        println!(
            "\nexample ready: cd {} && executor run --once && executor show EXAMPLE-1",
            dir.display()
        );
        return Ok(());
    }
    println!(
        "\nnext: cd {} && executor add --title \"...\"  (or drop a note into the plans folder), then executor queue",
        dir.display()
    );
    Ok(())
}

/// What executor keeps in a workspace, as `.gitignore` lines anchored to its folder: the
/// config and prompts the owner edits, the queue's database, the logs, the run worktrees,
/// the runner's lock, the confined workers' homes and the service's secrets.
const OWN_FILES: [&str; 11] = [
    "/executor.toml",
    "/executor.env",
    "/executor.db",
    "/executor.db-*",
    "/roles/",
    "/prompts/",
    "/plans/",
    "/logs/",
    "/worktrees/",
    "/runner.lock",
    "/.executor/",
];

fn inside_a_repository(dir: &Path) -> bool {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["rev-parse", "--is-inside-work-tree"])
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout.starts_with(b"true"))
}

/// A workspace made inside a git repository keeps its files out of it: `.gitignore` gets
/// the lines it does not have yet; the owner's own lines stay as they are.
fn ignore_own_files(dir: &Path) -> Result<()> {
    let path = dir.join(".gitignore");
    let existing = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let have = existing.as_deref().unwrap_or("");
    let missing: Vec<&str> = OWN_FILES
        .iter()
        .copied()
        .filter(|line| !have.lines().any(|l| l.trim() == *line))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut text = have.to_string();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(
        "# executor's workspace (executor init): its config, state, logs and worktrees\n",
    );
    for line in &missing {
        text.push_str(line);
        text.push('\n');
    }
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    println!(
        "{}  .gitignore (executor's files stay out of this repository)",
        if existing.is_some() {
            "updated"
        } else {
            "created"
        }
    );
    Ok(())
}

/// A throwaway repository with one commit, and one plan note for it.
fn make_example(dir: &Path, plans: Option<&Path>) -> Result<()> {
    let repo = dir.join(EXAMPLE_REPO);
    std::fs::create_dir_all(&repo).with_context(|| format!("cannot create {}", repo.display()))?;
    std::fs::write(
        repo.join("README.md"),
        "# Example project\n\nA throwaway repository for executor's example run.\n",
    )
    .with_context(|| format!("cannot write in {}", repo.display()))?;
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "README.md"][..],
        &[
            "-c",
            "user.name=executor",
            "-c",
            "user.email=executor@localhost",
            "commit",
            "-q",
            "-m",
            "Example project",
        ][..],
    ] {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .output()
            .context("cannot run git (the example needs it)")?;
        anyhow::ensure!(
            out.status.success(),
            "git {} failed in {}: {}",
            args.join(" "),
            repo.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    println!("created  {EXAMPLE_REPO}/ (a git repository with one commit)");
    if let Some(plans) = plans {
        std::fs::write(plans.join("example.md"), EXAMPLE_NOTE)
            .with_context(|| format!("cannot write in {}", plans.display()))?;
        println!("created  plans/example.md (task EXAMPLE-1)");
    }
    Ok(())
}
