//! `executor init`: lays out a workspace. It never overwrites: what is already there is kept
//! and reported as kept, so running it twice is safe.

use std::path::Path;

use anyhow::{Context, Result};

use crate::config::{self, Env};
use crate::store;

const WORKER_POLICY: &str = include_str!("../assets/roles/worker-policy.json");
const CONDUCTOR_POLICY: &str = include_str!("../assets/roles/conductor-policy.json");

pub async fn run(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let files: [(&str, &str); 3] = [
        (config::FILE_NAME, config::TEMPLATE),
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
    // What is there now must load: an owner's earlier edit that no longer does is named here.
    crate::prompts::PromptSet::load(&prompts)?;
    println!("ready    prompts/ (one template per worker phase)");

    let settings = config::load(&dir.join(config::FILE_NAME), &Env::from_process())?;
    if let Some(plans) = &settings.plans {
        std::fs::create_dir_all(&plans.dir)
            .with_context(|| format!("cannot create {}", plans.dir.display()))?;
        println!("ready    plans folder {}", plans.dir.display());
    }
    store::open(&settings.storage)
        .await
        .with_context(|| format!("cannot open {}", settings.storage.display()))?;
    println!("ready    {}", settings.storage.display());
    println!(
        "\nnext: cd {} && executor add --title \"...\"  (or drop a note into the plans folder), then executor queue",
        dir.display()
    );
    Ok(())
}
