//! The model hosts an agent's own configuration names, so the wall lets the agent reach
//! them as it lets the hosts of `*_BASE_URL` variables: Codex's `config.toml`
//! (`[model_providers.<id>] base_url`), Claude Code's `settings.json` (`env` variables
//! ending in `_BASE_URL`), pi's `models.json` (`providers.<id>.baseUrl`).
//!
//! What it must never do: fail a worker's start over a file it cannot read (a missing or
//! malformed file names no host; the agent reports its own configuration errors).

use std::path::Path;

use super::settings::HostPort;
use super::AgentFamily;

/// The hosts the configuration folder `dir` of `agent` names as its model providers.
pub fn configured(agent: AgentFamily, dir: &Path) -> Vec<HostPort> {
    let read = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let urls: Vec<String> = match agent {
        AgentFamily::Codex => read("config.toml")
            .and_then(|text| text.parse::<toml::Table>().ok())
            .map(|config| codex_urls(&config))
            .unwrap_or_default(),
        AgentFamily::Claude => read("settings.json")
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .map(|settings| claude_urls(&settings))
            .unwrap_or_default(),
        AgentFamily::Pi => read("models.json")
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
            .map(|models| pi_urls(&models))
            .unwrap_or_default(),
        AgentFamily::Command => Vec::new(),
    };
    urls.iter().filter_map(|url| host_of_url(url)).collect()
}

/// The host and port a URL dials, in the wall's one spelling of a host.
pub fn host_of_url(text: &str) -> Option<HostPort> {
    let url = url::Url::parse(text).ok()?;
    Some(HostPort {
        host: super::host::canonical(url.host_str()?),
        port: url.port_or_known_default()?,
    })
}

fn codex_urls(config: &toml::Table) -> Vec<String> {
    let Some(providers) = config.get("model_providers").and_then(|p| p.as_table()) else {
        return Vec::new();
    };
    providers
        .values()
        .filter_map(|p| p.get("base_url")?.as_str().map(String::from))
        .collect()
}

fn claude_urls(settings: &serde_json::Value) -> Vec<String> {
    let Some(env) = settings.get("env").and_then(|e| e.as_object()) else {
        return Vec::new();
    };
    env.iter()
        .filter(|(key, _)| key.ends_with("_BASE_URL"))
        .filter_map(|(_, value)| value.as_str().map(String::from))
        .collect()
}

fn pi_urls(models: &serde_json::Value) -> Vec<String> {
    let Some(providers) = models.get("providers").and_then(|p| p.as_object()) else {
        return Vec::new();
    };
    providers
        .values()
        .filter_map(|p| p.get("baseUrl")?.as_str().map(String::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hp(host: &str, port: u16) -> HostPort {
        HostPort {
            host: host.into(),
            port,
        }
    }

    #[test]
    fn each_agents_configured_providers_are_its_hosts() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(
            dir.path().join("config.toml"),
            "model = \"gpt-oss:20b\"\nmodel_provider = \"ollama\"\n\n[model_providers.ollama]\nname = \"Ollama\"\nbase_url = \"http://127.0.0.1:11434/v1\"\n\n[model_providers.proxy]\nbase_url = \"https://LLM.Example.com./v1\"\n",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("settings.json"),
            r#"{"env": {"ANTHROPIC_BASE_URL": "http://localhost:4000", "OTHER": "http://x.example"}}"#,
        )
        .expect("write");
        std::fs::write(
            dir.path().join("models.json"),
            r#"{"providers": {"local": {"baseUrl": "http://[::1]:8080/v1", "api": "openai-completions"}}}"#,
        )
        .expect("write");
        assert_eq!(
            configured(AgentFamily::Codex, dir.path()),
            [hp("127.0.0.1", 11434), hp("llm.example.com", 443)]
        );
        assert_eq!(
            configured(AgentFamily::Claude, dir.path()),
            [hp("localhost", 4000)]
        );
        assert_eq!(configured(AgentFamily::Pi, dir.path()), [hp("::1", 8080)]);
        assert!(configured(AgentFamily::Command, dir.path()).is_empty());
    }

    #[test]
    fn a_missing_or_malformed_configuration_names_no_host() {
        let dir = tempfile::tempdir().expect("temp dir");
        assert!(configured(AgentFamily::Codex, dir.path()).is_empty());
        std::fs::write(dir.path().join("config.toml"), "[model_providers\n").expect("write");
        std::fs::write(dir.path().join("settings.json"), "{").expect("write");
        assert!(configured(AgentFamily::Codex, dir.path()).is_empty());
        assert!(configured(AgentFamily::Claude, dir.path()).is_empty());
    }
}
