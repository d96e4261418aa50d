//! A credential (an API token, a bot key, a webhook URL that embeds one) that cannot be
//! printed: `Debug` and `Display` show `***`. The one `Secret` type of executor; every client
//! of an outside service takes its credential as one.
//!
//! It is read from the environment or a file the config names, never from the config file
//! itself: [`Secret::from_env`] and [`Secret::from_file`] live beside the HTTP layer
//! (`executor::http::secret`), as reading is I/O and this module does none.
//!
//! What it must never do: show its value anywhere but through [`Secret::expose`], which
//! the one place building a request's header (or URL, for a webhook) calls.

use std::fmt;
use std::sync::Arc;

/// A value that prints as `***`. Cloning shares the one copy.
#[derive(Clone)]
pub struct Secret(Arc<str>);

impl Secret {
    /// A value held in memory already (tests, or a value the config layer read).
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::from(value.into()))
    }

    /// The value itself, for the one place that builds the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value could not go in a header: whitespace or control characters inside
    /// it would make a broken header, and the header builder's error would be far from the
    /// cause.
    pub fn is_malformed(value: &str) -> bool {
        value.chars().any(|c| c.is_whitespace() || c.is_control())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_prints_as_stars() {
        let secret = Secret::new("ghs_supersecret");
        assert_eq!(format!("{secret}"), "***");
        assert_eq!(format!("{secret:?}"), "***");
        assert_eq!(secret.expose(), "ghs_supersecret");
        assert!(Secret::is_malformed("ghs two"));
        assert!(!Secret::is_malformed("ghs_two"));
    }
}
