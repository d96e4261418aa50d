//! Building a client of one outside service: its base URL checked, its credential made a
//! header that no `Debug` prints, and a `reqwest` client with the timeouts, the user agent
//! and no redirects.

use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderValue};
use url::Url;

/// Who executor says it is: `executor/VERSION`, the product, not the crate that holds the
/// client.
pub const USER_AGENT: &str = concat!("executor/", env!("CARGO_PKG_VERSION"));

/// The timeouts and the user agent of a client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpOptions {
    /// The whole request, body included; `None` for a client whose requests each set their
    /// own (Zulip's long poll).
    pub timeout: Option<Duration>,
    pub connect_timeout: Duration,
    pub user_agent: String,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            timeout: Some(Duration::from_secs(30)),
            connect_timeout: Duration::from_secs(10),
            user_agent: USER_AGENT.to_owned(),
        }
    }
}

/// A `reqwest` client with `options` and `headers` sent on every request. Redirects are
/// never followed: one could carry the credential to a host nobody configured. The error
/// names the fault, never a URL or a header.
pub fn build(options: &HttpOptions, headers: HeaderMap) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .user_agent(options.user_agent.clone())
        .default_headers(headers)
        .connect_timeout(options.connect_timeout)
        .redirect(reqwest::redirect::Policy::none());
    if let Some(timeout) = options.timeout {
        builder = builder.timeout(timeout);
    }
    builder
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {}", e.without_url()))
}

/// `Accept: <value>` as the one default header.
pub fn accept(value: &'static str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::ACCEPT, HeaderValue::from_static(value));
    headers
}

/// `url` fit to be a client's base: http(s), without credentials (the credential goes in a
/// header; one in the URL would end up in logs), query or fragment. `what` names it in the
/// error ("the API base URL").
pub fn base_url(mut url: Url, what: &str) -> Result<Url, String> {
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err(format!("{what} {url} is not an http(s) URL"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!("{what} must not carry credentials"));
    }
    url.set_query(None);
    url.set_fragment(None);
    Ok(url)
}

/// A credential that cannot go in a header (a newline or a control character inside it).
/// Says nothing about the value.
#[derive(Debug, thiserror::Error)]
#[error("the credential cannot be sent in a header")]
pub struct Unfit;

/// The `Authorization` header `value` (`Bearer …`, `token …`, `Basic …`), marked sensitive
/// so no `Debug` of a request prints it.
pub fn authorization(value: &str) -> Result<HeaderValue, Unfit> {
    let mut header = HeaderValue::from_str(value).map_err(|_| Unfit)?;
    header.set_sensitive(true);
    Ok(header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_url_is_checked_and_cleaned() {
        let url = |s: &str| Url::parse(s).expect("url");
        assert_eq!(
            base_url(url("https://gitea.example.com/api/v1?x=1#f"), "the API URL")
                .expect("fine")
                .as_str(),
            "https://gitea.example.com/api/v1"
        );
        let error = base_url(url("https://me:pw@example.com/"), "the API URL").expect_err("creds");
        assert!(!error.contains("pw"), "{error}");
        assert!(base_url(url("ftp://example.com/"), "the API URL").is_err());
        assert!(base_url(url("mailto:me@example.com"), "the API URL").is_err());
    }

    #[test]
    fn an_authorization_header_never_prints() {
        let header = authorization("token gta_secret").expect("header");
        assert!(!format!("{header:?}").contains("gta_secret"));
        assert!(authorization("token bad\nline").is_err());
    }
}
