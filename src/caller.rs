//! Who is asking: the identity a face hands the engine with each request.
//!
//! The stdio server, the CLI and the Node API act for the local user, who sees everything the
//! config enables. The HTTP face authenticates each request (an OAuth access token or the
//! static bearer token) and passes the caller it proved; toolRules may match on it (subject,
//! groups), so one user never sees another's tools. A caller is built only by a face from what
//! it verified — never from a value a client sent unverified.

/// The identity behind one request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Caller {
    /// The token's issuer (`iss`); `None` for the local user and the static bearer token.
    pub issuer: Option<String>,
    /// The token's subject (`sub`); `None` for the local user.
    pub subject: Option<String>,
    /// Groups or roles the token asserts (the configured claim, e.g. `groups` or `roles`).
    pub groups: Vec<String>,
    /// Scopes the token grants (`scope`, space-separated in the token).
    pub scopes: Vec<String>,
    /// The token the caller presented, once verified (signed JWTs only): what RFC 8693 token
    /// exchange trades for their token at a downstream server. Not part of who they are.
    pub presented: Option<Presented>,
    /// A name a person reads (the token's `preferred_username`, `email` or `name`): shown where
    /// someone must recognise the caller (the sign-in page names whom a link is for), since a
    /// subject is often an opaque id. Never part of who they are: anyone's token may claim any.
    pub name: Option<String>,
}

/// A verified bearer token a caller presented. Its `Debug` shows no character of it, so a
/// caller logged or asserted on never prints a live credential.
#[derive(Clone, PartialEq, Eq)]
pub struct Presented {
    token: std::sync::Arc<str>,
    expires_at: Option<u64>,
}

impl Presented {
    /// `token`, verified, valid until `expires_at` (seconds since the epoch, its `exp`).
    #[must_use]
    pub fn new(token: &str, expires_at: Option<u64>) -> Self {
        Self {
            token: token.into(),
            expires_at,
        }
    }

    /// The token itself: only for the identity provider that issued it.
    #[must_use]
    pub fn token(&self) -> &str {
        &self.token
    }

    /// When it expires (seconds since the epoch), if it says.
    #[must_use]
    pub fn expires_at(&self) -> Option<u64> {
        self.expires_at
    }
}

impl std::fmt::Debug for Presented {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Presented")
            .field("token", &"<redacted>")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

impl Caller {
    /// The local user (stdio, CLI, Node API): no identity to match rules against.
    #[must_use]
    pub fn local() -> Self {
        Self::default()
    }

    /// Whether this is the local user rather than an authenticated remote one.
    #[must_use]
    pub fn is_local(&self) -> bool {
        self.subject.is_none()
    }

    /// The caller of one MCP request: the one the HTTP face authenticated and left in the HTTP
    /// request's extensions (rmcp hands a handler the request's `http::request::Parts`), or
    /// the local user when there is none (stdio).
    #[must_use]
    pub fn of_request(extensions: &rmcp::model::Extensions) -> Self {
        extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Self>())
            .cloned()
            .unwrap_or_else(Self::local)
    }

    /// A remote caller with `subject` in `groups` (for tests of the rules that match callers).
    #[cfg(test)]
    #[must_use]
    pub fn member(subject: &str, groups: &[&str]) -> Self {
        Self {
            subject: Some(subject.to_owned()),
            groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            ..Self::default()
        }
    }

    /// Who the caller is, whole and unambiguous: what state bound to a caller (a call waiting
    /// for its next round, a forwarded request's owner) is compared against. Never shown.
    #[must_use]
    pub fn identity(&self) -> String {
        match (&self.issuer, &self.subject) {
            // JSON strings: no issuer/subject pair can read as another.
            (issuer, Some(subject)) => serde_json::json!([issuer, subject]).to_string(),
            _ => "local".to_owned(),
        }
    }

    /// The identity of the caller a face left in an HTTP request's extensions, or the local
    /// user's when there is none (no auth).
    #[must_use]
    pub fn identity_in(extensions: &http::Extensions) -> String {
        extensions
            .get::<Self>()
            .map_or_else(|| Self::local().identity(), Self::identity)
    }

    /// How the audit log and logs name the caller: `issuer#subject`, the subject alone, or
    /// `local`. Bounded, so a long claim cannot flood a log line, and inert: control and
    /// invisible characters (bidi overrides, which reorder what a person reads in the audit
    /// log) are written as `\u{…}`.
    #[must_use]
    pub fn label(&self) -> String {
        const MAX: usize = 200;
        let label = match (&self.issuer, &self.subject) {
            (Some(issuer), Some(subject)) => format!("{issuer}#{subject}"),
            (None, Some(subject)) => subject.clone(),
            _ => "local".to_owned(),
        };
        let label = inert(label);
        if label.len() <= MAX {
            return label;
        }
        let mut end = MAX;
        while !label.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}…", &label[..end])
    }
}

impl Caller {
    /// [`Caller::label`] with the caller's readable name before it, when the token gave one:
    /// `alice@example.com (https://id.example#8f3a…)`. Bounded and inert like the label.
    #[must_use]
    pub fn described(&self) -> String {
        const MAX: usize = 100;
        match &self.name {
            Some(name) => {
                let name = inert(name.clone());
                let name = crate::text::cut_chars(&name, MAX);
                format!("{name} ({})", self.label())
            }
            None => self.label(),
        }
    }
}

/// `text` with its control and invisible characters written as `\u{…}`.
fn inert(text: String) -> String {
    use crate::trust::poison::is_invisible;
    if !text.chars().any(|c| c.is_control() || is_invisible(c)) {
        return text;
    }
    text.chars()
        .map(|c| {
            if c.is_control() || is_invisible(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Caller;

    #[test]
    fn the_caller_of_a_request_is_the_one_the_http_face_left_in_its_parts() {
        let mut extensions = rmcp::model::Extensions::new();
        assert_eq!(Caller::of_request(&extensions), Caller::local(), "stdio: no parts");
        let alice = Caller {
            subject: Some("alice".into()),
            groups: vec!["admins".into()],
            ..Caller::default()
        };
        let (mut parts, ()) = http::Request::new(()).into_parts();
        extensions.insert(parts.clone());
        assert_eq!(
            Caller::of_request(&extensions),
            Caller::local(),
            "parts without a caller"
        );
        parts.extensions.insert(alice.clone());
        extensions.insert(parts);
        assert_eq!(Caller::of_request(&extensions), alice);
    }

    #[test]
    fn a_presented_token_never_shows_in_debug_output() {
        let caller = Caller {
            subject: Some("alice".into()),
            presented: Some(super::Presented::new("eyJ.secret-token-characters.sig", Some(7))),
            ..Caller::default()
        };
        let shown = format!("{caller:?} {caller:#?}");
        assert!(!shown.contains("secret-token-characters"), "{shown}");
        assert!(
            shown.contains("<redacted>") && shown.contains("expires_at: Some(7)"),
            "{shown}"
        );
        assert_eq!(
            caller.presented.as_ref().map(super::Presented::token),
            Some("eyJ.secret-token-characters.sig")
        );
    }

    #[test]
    fn local_caller_is_labelled_local() {
        assert!(Caller::local().is_local());
        assert_eq!(Caller::local().label(), "local");
    }

    #[test]
    fn remote_caller_label_names_issuer_and_subject_and_is_bounded() {
        let caller = Caller {
            issuer: Some("https://id.example".into()),
            subject: Some("alice".into()),
            ..Caller::default()
        };
        assert_eq!(caller.label(), "https://id.example#alice");
        let long = Caller {
            subject: Some("é".repeat(300)),
            ..Caller::default()
        };
        assert!(long.label().len() <= 200 + '…'.len_utf8());
    }

    #[test]
    fn described_puts_the_readable_name_before_the_label_bounded_and_inert() {
        let opaque = Caller {
            issuer: Some("https://id.example".into()),
            subject: Some("AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ".into()),
            ..Caller::default()
        };
        assert_eq!(opaque.described(), opaque.label(), "no name: the label");
        let named = Caller {
            name: Some("alice@example.com".into()),
            ..opaque.clone()
        };
        assert_eq!(
            named.described(),
            "alice@example.com (https://id.example#AAAAAAAAAAAAAAAAAAAAAIkzqFVrSaSaFHy782bbtaQ)"
        );
        let tricky = Caller {
            name: Some(format!("bob\u{202e}{}", "x".repeat(300))),
            ..opaque
        };
        let described = tricky.described();
        assert!(described.starts_with("bob\\u{202e}x"), "{described}");
        assert!(described.chars().count() < 100 + 10 + 200, "{described}");
    }

    #[test]
    fn a_label_shows_bidi_overrides_and_controls_as_escapes() {
        let tricky = Caller {
            subject: Some("alice\u{202e}nimda\u{1b}[2J".to_owned()),
            ..Caller::default()
        };
        assert_eq!(tricky.label(), "alice\\u{202e}nimda\\u{1b}[2J");
    }
}
