//! Who may use the console: a request from loopback (its peer, its `Host` and no proxy's
//! forwarding header all say so) needs no login; any other needs a token, sent as
//! `Authorization: Bearer <token>` or, for a browser, as the cookie `/login` sets. A
//! read-only token reads every page, document and metric and changes nothing: every POST
//! with it is refused.
//!
//! What it must never do: compare a token in time that depends on where it differs, put a
//! token in a cookie, a page, a log line or an error, or let a request through that it
//! could not place (no peer address means not loopback).

use crate::http::secret::ReadSecret as _;
use std::net::SocketAddr;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::config::WebSection;
use crate::http::{Secret, SecretError};

/// The cookie `/login` sets.
pub const COOKIE: &str = "executor_console";

/// The console's tokens, as configured.
#[derive(Clone, Default)]
pub struct Access {
    full: Option<Secret>,
    read_only: Option<Secret>,
}

/// What a request may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// From this machine: everything, no login.
    Local,
    /// With the token: everything.
    Full,
    /// With the read-only token: reads only.
    ReadOnly,
}

/// Why a request is not let in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denied {
    /// Not from loopback, and no token is configured to let anyone else in.
    NotLoopback,
    /// No token, or not one of the console's.
    NoToken,
    /// A read-only token on a request that would change something.
    ReadOnly,
}

/// Why the tokens could not be read; names the setting, never a value.
#[derive(Debug, thiserror::Error)]
#[error("[web] {setting}: {source}")]
pub struct AccessError {
    setting: &'static str,
    #[source]
    source: SecretError,
}

fn read(
    root: &Path,
    file: Option<&Path>,
    env: Option<&str>,
    names: (&'static str, &'static str),
) -> Result<Option<Secret>, AccessError> {
    match (file, env) {
        (Some(file), _) => Secret::from_file(&root.join(file))
            .map(Some)
            .map_err(|source| AccessError {
                setting: names.0,
                source,
            }),
        (None, Some(var)) => Secret::from_env(var)
            .map(Some)
            .map_err(|source| AccessError {
                setting: names.1,
                source,
            }),
        (None, None) => Ok(None),
    }
}

impl Access {
    /// The tokens `[web]` names, read now (relative files against `root`).
    pub fn load(root: &Path, web: &WebSection) -> Result<Self, AccessError> {
        Ok(Access {
            full: read(
                root,
                web.token_file.as_deref(),
                web.token_env.as_deref(),
                ("token_file", "token_env"),
            )?,
            read_only: read(
                root,
                web.read_only_token_file.as_deref(),
                web.read_only_token_env.as_deref(),
                ("read_only_token_file", "read_only_token_env"),
            )?,
        })
    }

    /// Tokens given in memory (tests).
    #[cfg(test)]
    pub fn with_tokens(full: Option<&str>, read_only: Option<&str>) -> Self {
        Access {
            full: full.map(Secret::new),
            read_only: read_only.map(Secret::new),
        }
    }

    /// Whether anyone but loopback can be let in.
    pub fn has_token(&self) -> bool {
        self.full.is_some() || self.read_only.is_some()
    }

    /// What a presented token grants, if it is one of the console's.
    pub fn token_grant(&self, given: &str) -> Option<Grant> {
        // Both are compared, so the time taken says nothing about which one matched.
        let full = self
            .full
            .as_ref()
            .is_some_and(|t| same(t.expose().as_bytes(), given.as_bytes()));
        let read_only = self
            .read_only
            .as_ref()
            .is_some_and(|t| same(t.expose().as_bytes(), given.as_bytes()));
        match (full, read_only) {
            (true, _) => Some(Grant::Full),
            (false, true) => Some(Grant::ReadOnly),
            (false, false) => None,
        }
    }

    /// The cookie value for a token: derived from it, so the cookie never holds the token
    /// and changing the token logs every browser out.
    pub fn cookie_for(&self, grant: Grant) -> Option<String> {
        let token = match grant {
            Grant::Full => self.full.as_ref()?,
            Grant::ReadOnly => self.read_only.as_ref()?,
            Grant::Local => return None,
        };
        Some(session_value(token))
    }

    /// What a cookie value grants, if it is one `cookie_for` made.
    pub fn cookie_grant(&self, given: &str) -> Option<Grant> {
        let full = self
            .full
            .as_ref()
            .is_some_and(|t| same(session_value(t).as_bytes(), given.as_bytes()));
        let read_only = self
            .read_only
            .as_ref()
            .is_some_and(|t| same(session_value(t).as_bytes(), given.as_bytes()));
        match (full, read_only) {
            (true, _) => Some(Grant::Full),
            (false, true) => Some(Grant::ReadOnly),
            (false, false) => None,
        }
    }
}

fn session_value(token: &Secret) -> String {
    // HMAC keyed by the token: whoever holds the cookie cannot get the token back from it.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(token.expose().as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(b"executor console session");
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether `a` and `b` are equal, in time that depends on neither: both are hashed to one
/// length first, then every byte is compared.
fn same(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (Sha256::digest(a), Sha256::digest(b));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// The facts about a request that decide what it may do.
#[derive(Debug, Default)]
pub struct Asked<'a> {
    /// The connection's peer; `None` when it is not known.
    pub peer: Option<SocketAddr>,
    /// The `Host` header names a loopback host.
    pub loopback_host: bool,
    /// A proxy's `Forwarded` or `X-Forwarded-For` header is there: the request comes from
    /// wherever the proxy got it, not from the proxy's loopback address.
    pub forwarded: bool,
    /// The bearer token, from `Authorization`.
    pub bearer: Option<&'a str>,
    /// The session cookie's value.
    pub cookie: Option<&'a str>,
    /// Whether the request only reads (GET or HEAD).
    pub reads: bool,
}

/// What `asked` may do: the console's one access rule.
pub fn decide(access: &Access, asked: &Asked<'_>) -> Result<Grant, Denied> {
    let local =
        asked.peer.is_some_and(|p| p.ip().is_loopback()) && asked.loopback_host && !asked.forwarded;
    if local {
        return Ok(Grant::Local);
    }
    if !access.has_token() {
        return Err(Denied::NotLoopback);
    }
    let grant = asked
        .bearer
        .and_then(|t| access.token_grant(t))
        .or_else(|| asked.cookie.and_then(|c| access.cookie_grant(c)))
        .ok_or(Denied::NoToken)?;
    if grant == Grant::ReadOnly && !asked.reads {
        return Err(Denied::ReadOnly);
    }
    Ok(grant)
}

/// The bearer token of an `Authorization` header's value.
pub fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

/// The session cookie's value in a `Cookie` header's value.
pub fn session_cookie(value: &str) -> Option<&str> {
    value.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        (name == COOKIE).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer(ip: &str) -> Option<SocketAddr> {
        Some(SocketAddr::new(ip.parse().unwrap(), 50000))
    }

    fn remote(bearer: Option<&str>, reads: bool) -> Asked<'_> {
        Asked {
            peer: peer("192.0.2.7"),
            loopback_host: false,
            bearer,
            reads,
            ..Asked::default()
        }
    }

    #[test]
    fn loopback_needs_no_login_and_anything_else_needs_a_token() {
        let access = Access::with_tokens(Some("full-token"), Some("read-token"));
        let local = Asked {
            peer: peer("127.0.0.1"),
            loopback_host: true,
            reads: false,
            ..Asked::default()
        };
        assert_eq!(decide(&access, &local), Ok(Grant::Local));
        // A proxy on this machine passing on a request from elsewhere is not loopback.
        let proxied = Asked {
            forwarded: true,
            ..local
        };
        assert_eq!(decide(&access, &proxied), Err(Denied::NoToken));
        // Nor is a page whose name rebinds to 127.0.0.1.
        let rebound = Asked {
            peer: peer("127.0.0.1"),
            loopback_host: false,
            reads: true,
            ..Asked::default()
        };
        assert_eq!(decide(&access, &rebound), Err(Denied::NoToken));
        assert_eq!(
            decide(&Access::default(), &rebound),
            Err(Denied::NotLoopback)
        );
        // An unknown peer is not loopback.
        let unknown = Asked {
            peer: None,
            loopback_host: true,
            reads: true,
            ..Asked::default()
        };
        assert_eq!(decide(&access, &unknown), Err(Denied::NoToken));

        assert_eq!(decide(&access, &remote(None, true)), Err(Denied::NoToken));
        assert_eq!(
            decide(&access, &remote(Some("guess"), true)),
            Err(Denied::NoToken)
        );
        assert_eq!(
            decide(&access, &remote(Some("full-token"), false)),
            Ok(Grant::Full)
        );
        assert_eq!(
            decide(&access, &remote(Some("read-token"), true)),
            Ok(Grant::ReadOnly)
        );
        assert_eq!(
            decide(&access, &remote(Some("read-token"), false)),
            Err(Denied::ReadOnly)
        );
    }

    #[test]
    fn a_browsers_cookie_stands_for_its_token_without_holding_it() {
        let access = Access::with_tokens(Some("full-token"), Some("read-token"));
        let full = access.cookie_for(Grant::Full).unwrap();
        let read = access.cookie_for(Grant::ReadOnly).unwrap();
        assert!(!full.contains("full-token") && full != read);
        let with_cookie = |cookie| Asked {
            cookie: Some(cookie),
            ..remote(None, false)
        };
        assert_eq!(decide(&access, &with_cookie(&full)), Ok(Grant::Full));
        assert_eq!(decide(&access, &with_cookie(&read)), Err(Denied::ReadOnly));
        // The token itself is not a cookie, and another token's cookie opens nothing.
        assert_eq!(
            decide(&access, &with_cookie("full-token")),
            Err(Denied::NoToken)
        );
        let other = Access::with_tokens(Some("other"), None)
            .cookie_for(Grant::Full)
            .unwrap();
        assert_eq!(decide(&access, &with_cookie(&other)), Err(Denied::NoToken));
    }

    #[test]
    fn tokens_are_read_from_headers_and_compared_whole() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(
            session_cookie("a=1; executor_console=xyz; b=2"),
            Some("xyz")
        );
        assert_eq!(session_cookie("executor_consoleX=xyz"), None);
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(!same(b"", b"a"));
    }
}
