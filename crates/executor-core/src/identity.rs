//! Who a commit is by: `Name <email>`, read from `[runner] commit_author` or the
//! repository's `user.name` and `user.email`. Parsing only: asking git is the runner's.

/// Who the orchestrator's commits are authored and committed by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub name: String,
    pub email: String,
}

impl Identity {
    /// `Name <email>` (`[runner] commit_author`): both parts there, no control characters,
    /// no `<` or `>` inside either.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let (name, rest) = text.split_once('<')?;
        let email = rest.strip_suffix('>')?;
        let (name, email) = (name.trim(), email.trim());
        let fit = |part: &str| {
            !part.is_empty() && !part.chars().any(|c| c.is_control() || c == '<' || c == '>')
        };
        (fit(name) && fit(email)).then(|| Self {
            name: name.to_string(),
            email: email.to_string(),
        })
    }

    /// executor's own, for a repository (and owner) that names nobody.
    pub fn executor() -> Self {
        Self {
            name: "executor".into(),
            email: "executor@localhost".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_identity_is_a_name_and_an_email_in_angle_brackets() {
        assert_eq!(
            Identity::parse(" Ada Lovelace <ada@example.com> "),
            Some(Identity {
                name: "Ada Lovelace".into(),
                email: "ada@example.com".into()
            })
        );
        for bad in [
            "Ada",
            "<ada@example.com>",
            "Ada <>",
            "Ada <a<b>",
            "A\nda <a@b>",
        ] {
            assert_eq!(Identity::parse(bad), None, "{bad:?}");
        }
    }
}
