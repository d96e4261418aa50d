//! The GitHub token. It comes from the environment or from a file the config names, never
//! from the config file itself, and it cannot be printed: `Debug` and `Display` show `***`.
//! Errors name the variable or the file, never what was in them.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

/// A token that prints as `***`. Cloning shares the one copy.
#[derive(Clone)]
pub struct Secret(Arc<str>);

/// Why a token could not be read. Never carries the token or the file's content.
#[derive(Debug, Error)]
pub enum SecretError {
    #[error("the environment variable {var} is not set")]
    MissingEnv { var: String },
    #[error("the environment variable {var} is empty or not valid UTF-8")]
    EmptyEnv { var: String },
    #[error("cannot read the token file {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the token file {path} is empty")]
    EmptyFile { path: PathBuf },
    #[error("the token from {origin} holds whitespace or control characters inside it")]
    Malformed { origin: String },
}

impl Secret {
    /// A token held in memory already (tests, or a value the config layer read).
    pub fn new(value: impl Into<String>) -> Self {
        Self(Arc::from(value.into()))
    }

    /// The token in the environment variable `var`.
    pub fn from_env(var: &str) -> Result<Self, SecretError> {
        match std::env::var(var) {
            Ok(value) if !value.trim().is_empty() => Self::checked(value.trim(), var),
            Ok(_) | Err(std::env::VarError::NotUnicode(_)) => Err(SecretError::EmptyEnv {
                var: var.to_owned(),
            }),
            Err(std::env::VarError::NotPresent) => Err(SecretError::MissingEnv {
                var: var.to_owned(),
            }),
        }
    }

    /// The token in the file at `path`, without the trailing newline editors and `echo` add.
    pub fn from_file(path: &Path) -> Result<Self, SecretError> {
        // read_to_string's error for invalid UTF-8 does not quote the bytes, so the content
        // cannot leak through it.
        let text = std::fs::read_to_string(path).map_err(|source| SecretError::Read {
            path: path.to_owned(),
            source,
        })?;
        let value = text.trim_end_matches(['\n', '\r']).trim();
        if value.is_empty() {
            return Err(SecretError::EmptyFile {
                path: path.to_owned(),
            });
        }
        Self::checked(value, &path.display().to_string())
    }

    /// The token itself, for the one place that builds the `Authorization` header.
    pub fn expose(&self) -> &str {
        &self.0
    }

    fn checked(value: &str, origin: &str) -> Result<Self, SecretError> {
        // A token with a space or newline inside would make a broken header, and the error
        // from the header builder would be far from the cause.
        if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(SecretError::Malformed {
                origin: origin.to_owned(),
            });
        }
        Ok(Self::new(value))
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
    }

    #[test]
    fn a_token_file_loses_its_trailing_newline_and_errors_name_only_the_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "ghs_fromfile\n").expect("write token");
        assert_eq!(
            Secret::from_file(&path).expect("read").expose(),
            "ghs_fromfile"
        );

        std::fs::write(&path, "ghs_two words\n").expect("write token");
        let error = Secret::from_file(&path).expect_err("malformed");
        let shown = format!("{error} {error:?}");
        assert!(shown.contains("token"), "{shown}");
        assert!(!shown.contains("ghs_two"), "{shown}");

        std::fs::write(&path, "\n").expect("write token");
        assert!(matches!(
            Secret::from_file(&path),
            Err(SecretError::EmptyFile { .. })
        ));
        let missing = dir.path().join("absent");
        let error = Secret::from_file(&missing).expect_err("missing");
        assert!(error.to_string().contains("absent"));
    }

    #[test]
    fn a_missing_variable_is_named() {
        let error = Secret::from_env("EXECUTOR_TEST_SURELY_UNSET_TOKEN").expect_err("unset");
        assert!(error
            .to_string()
            .contains("EXECUTOR_TEST_SURELY_UNSET_TOKEN"));
    }
}
