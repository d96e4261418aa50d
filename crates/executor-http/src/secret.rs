//! Reading a [`Secret`] from where the config says it is: an environment variable or a
//! file. Errors name the variable or the file, never what was in them.

use std::path::{Path, PathBuf};

use thiserror::Error;

pub use executor_core::secret::Secret;

/// Why a secret could not be read. Never carries the secret or the file's content.
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

/// Reading a [`Secret`] is I/O, so it lives here and not beside the type in the core: bring
/// this trait into scope to call `Secret::from_env` and `Secret::from_file`.
pub trait ReadSecret: Sized {
    /// The secret in the environment variable `var`.
    fn from_env(var: &str) -> Result<Self, SecretError>;
    /// The secret in the file at `path`, without the trailing newline editors and `echo`
    /// add.
    fn from_file(path: &Path) -> Result<Self, SecretError>;
}

impl ReadSecret for Secret {
    fn from_env(var: &str) -> Result<Self, SecretError> {
        match std::env::var(var) {
            Ok(value) if !value.trim().is_empty() => checked(value.trim(), var),
            Ok(_) | Err(std::env::VarError::NotUnicode(_)) => Err(SecretError::EmptyEnv {
                var: var.to_owned(),
            }),
            Err(std::env::VarError::NotPresent) => Err(SecretError::MissingEnv {
                var: var.to_owned(),
            }),
        }
    }

    fn from_file(path: &Path) -> Result<Self, SecretError> {
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
        checked(value, &path.display().to_string())
    }
}

fn checked(value: &str, origin: &str) -> Result<Secret, SecretError> {
    if Secret::is_malformed(value) {
        return Err(SecretError::Malformed {
            origin: origin.to_owned(),
        });
    }
    Ok(Secret::new(value))
}

#[cfg(test)]
mod tests {
    use super::*;

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
