//! Cutting secrets out of text that came from outside or from the transport (a proxy that
//! echoes a request's headers, a connection error quoting a URL) before it goes into an
//! error, a `Debug` print or a log line.

use url::Url;

use executor_core::secret::Secret;

/// The secrets one client must never show, each replaced by `***` wherever it appears.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a whole URL goes before the parts inside it.
    secrets: Vec<Secret>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// A redactor of `secrets` (empty ones are ignored).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a Secret>) -> Self {
        let mut redactor = Self::default();
        for secret in secrets {
            redactor.add(secret.expose());
        }
        redactor
    }

    /// A redactor of a URL that is itself the secret (a Slack webhook's path embeds its
    /// token): the URL, and every part of it that could hold a token. Short or plain-word
    /// parts (`services`, `hooks`) hold no token and are too common to blank out.
    pub fn of_url(url: &Secret) -> Self {
        let url = url.expose();
        let mut parts: Vec<String> = vec![url.to_owned()];
        if let Ok(parsed) = Url::parse(url) {
            parts.push(parsed.as_str().to_owned());
            let path = parsed.path();
            if path.len() > 1 {
                parts.push(path.to_owned());
            }
            if let Some(query) = parsed.query() {
                parts.push(query.to_owned());
            }
            if let Some(segments) = parsed.path_segments() {
                parts.extend(segments.map(str::to_owned));
            }
            parts.extend(parsed.query_pairs().map(|(_, value)| value.into_owned()));
            if let Some(password) = parsed.password() {
                parts.push(password.to_owned());
            }
        }
        parts.retain(|s| s.len() >= 12 || (s.len() >= 6 && s.bytes().any(|b| b.is_ascii_digit())));
        let mut redactor = Self::default();
        for part in parts {
            redactor.add(&part);
        }
        redactor
    }

    fn add(&mut self, value: &str) {
        if value.is_empty() || self.secrets.iter().any(|s| s.expose() == value) {
            return;
        }
        self.secrets.push(Secret::new(value));
        self.secrets
            .sort_by_key(|s| std::cmp::Reverse(s.expose().len()));
    }

    /// `text` with every secret replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.expose()) {
                out = out.replace(secret.expose(), "***");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_secret_is_cut_out_and_the_redactor_prints_none() {
        let token = Secret::new("gta_echoed");
        let redactor = Redactor::new([&token, &Secret::new("")]);
        assert_eq!(
            redactor.scrub("Authorization: token gta_echoed, again gta_echoed"),
            "Authorization: token ***, again ***"
        );
        assert_eq!(format!("{redactor:?}"), "Redactor(1 secrets)");
    }

    #[test]
    fn a_secret_url_is_cut_out_whole_and_in_its_parts() {
        let url = Secret::new("https://hooks.slack.com/services/T0001/B0002/XXXXsecretXXXX");
        let redactor = Redactor::of_url(&url);
        assert_eq!(
            redactor.scrub(
                "posting to https://hooks.slack.com/services/T0001/B0002/XXXXsecretXXXX failed"
            ),
            "posting to *** failed"
        );
        assert_eq!(
            redactor.scrub("no_service: XXXXsecretXXXX"),
            "no_service: ***"
        );
        assert_eq!(redactor.scrub("services hooks"), "services hooks");
    }
}
