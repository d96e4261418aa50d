//! `[sources.gitea_issues]`: a Gitea host, the token for it, the repositories whose
//! labelled issues are work, and how often to read them.
//!
//! ```toml
//! [sources.gitea_issues]
//! api_url = "https://gitea.example.com/api/v1"
//! repositories = ["owner/name"]
//! labels = ["executor"]
//! # token_env = "GITEA_TOKEN"
//! # token_file = "secrets/gitea-token"
//! # include_closed = false
//! # poll_interval = "5m"
//! ```
//!
//! What it must never do: hold the token. It names the variable or the file the token is
//! in, and a variable named here never reaches a worker.

use crate::http::secret::ReadSecret as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use url::Url;

use super::{line_of, line_of_section, ConfigError};
use crate::http::secret::{Secret, SecretError};
use crate::sources::gitea_issues::GiteaIssuesScope;

/// The variable holding the token when `token_env` is left out.
pub const DEFAULT_TOKEN_ENV: &str = "GITEA_TOKEN";

const SECTION: &str = "[sources.gitea_issues]";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GiteaIssuesSource {
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The API, `https://HOST/api/v1` (with Gitea's sub-path, if it has one).
    pub api_url: Spanned<String>,
    /// The variable holding the access token.
    #[serde(default = "default_token_env")]
    pub token_env: Spanned<String>,
    /// Or a file holding it (relative to the config file); wins over `token_env`.
    #[serde(default)]
    pub token_file: Option<PathBuf>,
    /// `owner/name` each; at least one.
    pub repositories: Vec<Spanned<String>>,
    /// An issue carrying any one of these labels is read.
    pub labels: Vec<String>,
    /// Whether the first read takes issues closed already.
    #[serde(default)]
    pub include_closed: bool,
    #[serde(default = "default_poll_interval", with = "humantime_serde")]
    pub poll_interval: Duration,
}

impl GiteaIssuesSource {
    /// The scope, as the Gitea issues source reads it.
    pub fn scope(&self) -> Result<GiteaIssuesScope, String> {
        let scope = GiteaIssuesScope {
            labels: self
                .labels
                .iter()
                .map(|label| label.trim().to_owned())
                .collect(),
            include_closed: self.include_closed,
        };
        if let Some(problem) = scope.problem("Gitea") {
            return Err(problem);
        }
        Ok(scope)
    }

    /// `api_url`, when it is an http(s) URL without credentials.
    pub fn api_url(&self) -> Result<Url, String> {
        let text = self.api_url.get_ref().trim();
        let url = Url::parse(text).map_err(|_| format!("`{text}` is not a URL"))?;
        if !url.username().is_empty() || url.password().is_some() {
            // Not echoed: the part before `@` is a secret.
            return Err(
                "the URL carries credentials; the token belongs in token_env or token_file"
                    .to_string(),
            );
        }
        if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
            return Err(format!("`{text}` is not an http(s) URL"));
        }
        Ok(url)
    }

    /// The repositories as `(owner, name)`, those that are `owner/name`.
    pub fn repositories(&self) -> Vec<(String, String)> {
        self.repositories
            .iter()
            .filter_map(|r| owner_and_name(r.get_ref()))
            .collect()
    }

    /// The token, from `token_file` (relative to `root`, the config file's folder) or the
    /// variable `token_env`.
    pub fn token(&self, root: &Path) -> Result<Secret, SecretError> {
        match &self.token_file {
            Some(file) => Secret::from_file(&root.join(file)),
            None => Secret::from_env(self.token_env.get_ref()),
        }
    }
}

/// `owner/name` split, when both are there and the name holds no further `/`.
fn owner_and_name(text: &str) -> Option<(String, String)> {
    let (owner, name) = text.trim().split_once('/')?;
    let valid = !owner.trim().is_empty() && !name.trim().is_empty() && !name.contains('/');
    valid.then(|| (owner.trim().to_owned(), name.trim().to_owned()))
}

/// Checks what the types cannot, for `config::parse`: the labels, the URL, the
/// repositories, the interval, and that the token's variable is not given to workers.
pub(super) fn validate(
    section: &GiteaIssuesSource,
    agent_env: &[Spanned<String>],
    path: &Path,
    text: &str,
) -> Result<(), ConfigError> {
    let at_section = |key: &'static str, message: String| ConfigError::Invalid {
        path: path.to_path_buf(),
        line: line_of_section(text, SECTION),
        key,
        message,
    };
    let at =
        |key: &'static str, span: std::ops::Range<usize>, message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            line: line_of(text, span.start),
            key,
            message,
        };
    section
        .scope()
        .map_err(|message| at_section("sources.gitea_issues.labels", message))?;
    section.api_url().map_err(|message| {
        at(
            "sources.gitea_issues.api_url",
            section.api_url.span(),
            message,
        )
    })?;
    if section.repositories.is_empty() {
        return Err(at_section(
            "sources.gitea_issues.repositories",
            "name at least one repository as \"owner/name\"".into(),
        ));
    }
    for repository in &section.repositories {
        if owner_and_name(repository.get_ref()).is_none() {
            return Err(at(
                "sources.gitea_issues.repositories",
                repository.span(),
                format!("`{}` is not owner/name", repository.get_ref()),
            ));
        }
    }
    if section.poll_interval.is_zero() {
        return Err(at_section(
            "sources.gitea_issues.poll_interval",
            "poll_interval must be longer than zero".into(),
        ));
    }
    if let Some(name) = agent_env
        .iter()
        .find(|name| name.get_ref() == section.token_env.get_ref())
    {
        return Err(at(
            "agent.env",
            name.span(),
            format!(
                "`{}` holds the Gitea token (sources.gitea_issues.token_env), which never reaches a worker",
                name.get_ref()
            ),
        ));
    }
    Ok(())
}

fn default_true() -> bool {
    true
}

fn default_token_env() -> Spanned<String> {
    Spanned::new(0..0, DEFAULT_TOKEN_ENV.to_string())
}

fn default_poll_interval() -> Duration {
    Duration::from_secs(5 * 60)
}

#[cfg(test)]
mod tests {
    use super::super::{parse, Env};
    use super::*;

    const PATH: &str = "/ws/executor.toml";

    fn parse_text(text: &str) -> Result<super::super::Settings, String> {
        parse(Path::new(PATH), text, &Env::default()).map_err(|e| e.to_string())
    }

    fn section(body: &str) -> String {
        format!("[sources.gitea_issues]\n{body}")
    }

    const MINIMAL: &str = "api_url = \"https://gitea.example.com/api/v1\"\nrepositories = [\"mkowalski/lumen-browser\"]\nlabels = [\"executor\"]\n";

    #[test]
    fn a_minimal_section_takes_the_defaults() {
        let settings = parse_text(&section(MINIMAL)).expect("valid");
        let gitea = settings.raw.sources.gitea_issues.expect("section");
        assert!(gitea.enabled);
        assert_eq!(gitea.token_env.get_ref(), "GITEA_TOKEN");
        assert_eq!(gitea.token_file, None);
        assert!(!gitea.include_closed);
        assert_eq!(gitea.poll_interval, Duration::from_secs(300));
        assert_eq!(
            gitea.api_url().expect("url").as_str(),
            "https://gitea.example.com/api/v1"
        );
        assert_eq!(
            gitea.repositories(),
            [("mkowalski".to_owned(), "lumen-browser".to_owned())]
        );
        let scope = gitea.scope().expect("scope");
        assert_eq!(scope.labels, ["executor"]);
        assert!(parse_text("")
            .expect("empty")
            .raw
            .sources
            .gitea_issues
            .is_none());
    }

    #[test]
    fn every_key_reads() {
        let text = section(
            "enabled = false\napi_url = \"http://127.0.0.1:3000/git/api/v1\"\ntoken_env = \"MY_GITEA\"\ntoken_file = \"secrets/gitea-token\"\nrepositories = [\"a/b\", \"c/d\"]\nlabels = [\" executor \", \"agent-ok\"]\ninclude_closed = true\npoll_interval = \"90s\"\n",
        );
        let gitea = parse_text(&text)
            .expect("valid")
            .raw
            .sources
            .gitea_issues
            .expect("section");
        assert!(!gitea.enabled && gitea.include_closed);
        assert_eq!(gitea.token_env.get_ref(), "MY_GITEA");
        assert_eq!(
            gitea.token_file.as_deref(),
            Some(Path::new("secrets/gitea-token"))
        );
        assert_eq!(gitea.repositories().len(), 2);
        assert_eq!(
            gitea.scope().expect("scope").labels,
            ["executor", "agent-ok"]
        );
        assert_eq!(gitea.poll_interval, Duration::from_secs(90));
    }

    #[test]
    fn what_cannot_work_is_named_with_its_key_and_line() {
        let cases: Vec<(String, &str, &str)> = vec![
            (
                section("repositories = [\"a/b\"]\nlabels = [\"x\"]\n"),
                "api_url",
                "line 1",
            ),
            (
                section("api_url = \"gitea.example.com\"\nrepositories = [\"a/b\"]\nlabels = [\"x\"]\n"),
                "`sources.gitea_issues.api_url`: `gitea.example.com` is not a URL",
                "line 2",
            ),
            (
                section("api_url = \"ftp://gitea.example.com/api/v1\"\nrepositories = [\"a/b\"]\nlabels = [\"x\"]\n"),
                "is not an http(s) URL",
                "line 2",
            ),
            (
                section("api_url = \"https://bot:hunter2@gitea.example.com/api/v1\"\nrepositories = [\"a/b\"]\nlabels = [\"x\"]\n"),
                "carries credentials",
                "line 2",
            ),
            (
                section("api_url = \"https://g.example.com/api/v1\"\nrepositories = []\nlabels = [\"x\"]\n"),
                "`sources.gitea_issues.repositories`: name at least one repository",
                "line 1",
            ),
            (
                format!("# top\n{}", section("api_url = \"https://g.example.com/api/v1\"\nrepositories = [\"a/b\",\n  \"just-a-name\"]\nlabels = [\"x\"]\n")),
                "`just-a-name` is not owner/name",
                "line 5",
            ),
            (
                section("api_url = \"https://g.example.com/api/v1\"\nrepositories = [\"a/b/c\"]\nlabels = [\"x\"]\n"),
                "`a/b/c` is not owner/name",
                "line 3",
            ),
            (
                section("api_url = \"https://g.example.com/api/v1\"\nrepositories = [\"a/b\"]\nlabels = []\n"),
                "`sources.gitea_issues.labels`: no labels to read Gitea issues by",
                "line 1",
            ),
            (
                section("api_url = \"https://g.example.com/api/v1\"\nrepositories = [\"a/b\"]\nlabels = [\"a,b\"]\n"),
                "holds a comma",
                "line 1",
            ),
            (
                section(&format!("{MINIMAL}poll_interval = \"0s\"\n")),
                "poll_interval must be longer than zero",
                "line 1",
            ),
            (
                section(&format!("{MINIMAL}label = \"x\"\n")),
                "unknown field `label`",
                "line 5",
            ),
            (
                format!(
                    "[agent]\nenv = [\"MY_GITEA\"]\n\n{}",
                    section(&format!("{MINIMAL}token_env = \"MY_GITEA\"\n"))
                ),
                "`agent.env`: `MY_GITEA` holds the Gitea token",
                "line 2",
            ),
            (
                format!("[agent]\nenv = [\"GITEA_TOKEN\"]\n\n{}", section(MINIMAL)),
                "`GITEA_TOKEN` is one of executor's own secrets",
                "line 2",
            ),
        ];
        for (text, expected, line) in cases {
            let error = parse_text(&text).expect_err(&text);
            assert!(error.contains(expected), "{expected:?} not in {error:?}");
            assert!(error.contains(line), "{line:?} not in {error:?}");
            assert!(!error.contains("hunter2"), "{error}");
        }
    }

    #[test]
    fn the_templates_commented_example_is_a_valid_section() {
        let example: String = super::super::TEMPLATE
            .lines()
            .skip_while(|line| !line.starts_with("# [sources.gitea_issues]"))
            .take_while(|line| !line.trim().is_empty())
            .map(|line| line.strip_prefix("# ").unwrap_or(line))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(example.starts_with(SECTION), "{example}");
        let gitea = parse_text(&example)
            .expect("the example parses")
            .raw
            .sources
            .gitea_issues
            .expect("section");
        assert_eq!(gitea.token_env.get_ref(), DEFAULT_TOKEN_ENV);
        assert_eq!(gitea.poll_interval, default_poll_interval());
        assert!(!gitea.include_closed);
    }

    #[test]
    fn the_token_comes_from_the_named_file_or_variable() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("secrets")).expect("secrets dir");
        std::fs::write(dir.path().join("secrets/gitea-token"), "gta_fromfile\n").expect("token");
        let text = section(&format!(
            "{MINIMAL}token_env = \"EXECUTOR_TEST_SURELY_UNSET_GITEA\"\n"
        ));
        let mut gitea = parse_text(&text)
            .expect("valid")
            .raw
            .sources
            .gitea_issues
            .expect("section");
        let error = gitea.token(dir.path()).expect_err("unset variable");
        assert!(
            error
                .to_string()
                .contains("EXECUTOR_TEST_SURELY_UNSET_GITEA"),
            "{error}"
        );
        gitea.token_file = Some(PathBuf::from("secrets/gitea-token"));
        assert_eq!(
            gitea.token(dir.path()).expect("from file").expose(),
            "gta_fromfile"
        );
    }
}
