//! A confined worker's home: a folder of its own per run (the workers of one run share it,
//! so a later phase resumes the agent's session), holding only the agent's configuration,
//! copied once from a template. The owner's own `~/.claude` or `~/.codex` (their MCP
//! servers, hooks, other projects' sessions) is never loaded unless the owner names it.
//!
//! What it must never do: follow a symlink of the template out of it (links are copied as
//! links, never as what they point at), or hand one run's home to another.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::AgentFamily;

/// Makes `homes_dir/key` (owner-only) and, the first time, copies `template` into the
/// agent's configuration folder in it. Returns the home, absolute.
pub fn prepare(
    homes_dir: &Path,
    key: &str,
    agent: AgentFamily,
    template: Option<PathBuf>,
) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let safe: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let safe = safe.trim_start_matches('.');
    let home = homes_dir.join(if safe.is_empty() { "worker" } else { safe });
    let fresh = !home.exists();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&home)?;
    let home = home.canonicalize()?;
    if let Some((_, sub)) = agent.config_var() {
        let config = home.join(sub);
        if fresh {
            match template.filter(|t| t.is_dir()) {
                Some(template) => copy_tree(&template, &config)?,
                None => std::fs::create_dir_all(&config)?,
            }
        } else {
            std::fs::create_dir_all(&config)?;
        }
    }
    Ok(home)
}

/// Points the worker's environment at its home: `HOME`, and the agent's configuration
/// variable at the folder in it.
pub fn point_env(env: &mut HashMap<String, String>, home: &Path, agent: AgentFamily) {
    env.insert("HOME".to_string(), home.to_string_lossy().into_owned());
    for key in [
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        "XDG_CACHE_HOME",
        "XDG_STATE_HOME",
    ] {
        env.remove(key);
    }
    if let Some((var, sub)) = agent.config_var() {
        env.insert(
            var.to_string(),
            home.join(sub).to_string_lossy().into_owned(),
        );
    }
}

/// Copies the folder `from` to `to`: files, folders and symlinks (as links).
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
        // Sockets, fifos and devices are not configuration.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_home_holds_a_copy_of_the_template_made_once() {
        let dir = tempfile::tempdir().expect("tmp");
        let template = dir.path().join("template");
        std::fs::create_dir_all(template.join("skills")).expect("mkdir");
        std::fs::write(template.join("settings.json"), "{}").expect("write");
        std::fs::write(template.join("skills/a.md"), "a").expect("write");
        std::os::unix::fs::symlink("/etc/passwd", template.join("link")).expect("link");
        let homes = dir.path().join("homes");
        let home =
            prepare(&homes, "run-1", AgentFamily::Claude, Some(template.clone())).expect("home");
        assert_eq!(
            std::fs::read_to_string(home.join(".claude/skills/a.md")).expect("copied"),
            "a"
        );
        assert!(home
            .join(".claude/link")
            .symlink_metadata()
            .expect("link")
            .file_type()
            .is_symlink());
        // A session the agent wrote stays for the run's next worker; the template is not
        // copied over it again.
        std::fs::write(home.join(".claude/session.jsonl"), "s").expect("write");
        std::fs::write(template.join("settings.json"), "{\"new\":1}").expect("write");
        let again = prepare(&homes, "run-1", AgentFamily::Claude, Some(template)).expect("home");
        assert_eq!(again, home);
        assert!(home.join(".claude/session.jsonl").exists());
        assert_eq!(
            std::fs::read_to_string(home.join(".claude/settings.json")).expect("kept"),
            "{}"
        );
        let other = prepare(&homes, "run-2", AgentFamily::Codex, None).expect("home");
        assert_ne!(other, home);
        assert!(other.join(".codex").is_dir());
        assert!(!other.join(".claude").exists());
    }

    #[test]
    fn the_environment_points_at_the_home() {
        let mut env = HashMap::from([
            ("HOME".to_string(), "/home/owner".to_string()),
            (
                "XDG_CONFIG_HOME".to_string(),
                "/home/owner/.config".to_string(),
            ),
            ("CODEX_HOME".to_string(), "/home/owner/.codex".to_string()),
        ]);
        point_env(&mut env, Path::new("/h/run-1"), AgentFamily::Codex);
        assert_eq!(env["HOME"], "/h/run-1");
        assert_eq!(env["CODEX_HOME"], "/h/run-1/.codex");
        assert!(!env.contains_key("XDG_CONFIG_HOME"));
    }

    #[test]
    fn a_key_cannot_climb_out_of_the_homes_folder() {
        let dir = tempfile::tempdir().expect("tmp");
        let home = prepare(dir.path(), "../../etc", AgentFamily::Command, None).expect("home");
        assert!(home.starts_with(dir.path().canonicalize().expect("canon")));
    }
}
