//! Keeping a connection string's secrets out of parse errors and warnings.
//!
//! The parser quotes what it could not understand, and when a password holds
//! an unescaped `/`, `?` or `#` the parser cannot even tell where the
//! password ends (`mongodb://alice:SECRET/x@host/` reads as host
//! `alice:SECRET`). So every message is scrubbed afterwards of anything that
//! may be a secret: the user-information part up to the *last* `@`, split at
//! every delimiter that could have cut it, raw and percent-decoded, and the
//! values of the options that carry secrets.

use crate::error::{Error, ErrorKind};

/// What stands in for a secret in a message.
const MASK: &str = "****";

/// Options whose values are secrets (`authMechanismProperties` values may be
/// tokens).
const SECRET_OPTIONS: &[&str] = &[
    "authMechanismProperties",
    "proxyPassword",
    "tlsCertificateKeyFilePassword",
];

/// The shortest piece of a secret masked wherever it occurs; shorter ones
/// (even a whole short secret) only where they stand alone.
const MIN_FRAGMENT: usize = 3;

/// Characters that may have ended a password early in the parser's eyes.
const DELIMITERS: &[char] = &['/', '?', '#', '&', '=', ',', ':', '@', '[', ']'];

/// The pieces of a connection string that must not appear in messages.
pub(super) struct Secrets {
    /// Longest first, so that a piece is masked before its own parts.
    fragments: Vec<String>,
    /// The user information seems to hold an unescaped delimiter.
    misplaced_at: bool,
}

impl Secrets {
    /// The secrets of `uri`, found without parsing it.
    pub(super) fn of(uri: &str) -> Secrets {
        let rest = uri.split_once("://").map_or(uri, |(_, rest)| rest);
        let mut secrets = Vec::new();
        let mut misplaced_at = false;
        if let Some(at) = rest.rfind('@') {
            let userinfo = &rest[..at];
            // The parser ends the user information at the first '/' or '?'.
            misplaced_at = userinfo.contains(['/', '?']);
            let password = userinfo.split_once(':').map_or(
                // No ':' before a misplaced delimiter: all of it may be the
                // password's tail.
                if misplaced_at { userinfo } else { "" },
                |(_, password)| password,
            );
            secrets.push(password.to_string());
        }
        let query = rest.split_once('?').map_or("", |(_, query)| query);
        // An unescaped '&' in a secret value cuts it short: what follows it
        // up to the next known option may be the rest of the secret.
        let mut in_secret = false;
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(key);
            if SECRET_OPTIONS.iter().any(|o| o.eq_ignore_ascii_case(&key)) {
                in_secret = true;
                secrets.push(value.to_string());
                // A property's value is what follows its key.
                for property in decode(value).split(',') {
                    if let Some((_, value)) = property.split_once(':') {
                        secrets.push(value.to_string());
                    }
                }
            } else if super::OPTION_NAMES
                .iter()
                .any(|o| o.eq_ignore_ascii_case(&key))
            {
                in_secret = false;
            } else if in_secret {
                secrets.push(pair.to_string());
            }
        }
        let mut fragments: Vec<String> = Vec::new();
        for secret in secrets {
            for text in [secret.clone(), decode(&secret)] {
                // Pieces shorter than MIN_FRAGMENT would mask ordinary words
                // of the message and reveal next to nothing.
                fragments.extend(
                    text.split(DELIMITERS)
                        .filter(|f| f.len() >= MIN_FRAGMENT)
                        .map(str::to_string),
                );
                if !text.is_empty() {
                    fragments.push(text);
                }
            }
        }
        fragments.sort_by_key(|f| std::cmp::Reverse(f.len()));
        fragments.dedup();
        Secrets {
            fragments,
            misplaced_at,
        }
    }

    /// `message` with every secret masked. A piece shorter than
    /// [`MIN_FRAGMENT`] is masked only where it stands alone (not inside a
    /// word of the message), so that a one-letter password does not mask
    /// every such letter.
    pub(super) fn scrub(&self, message: &str) -> String {
        let mut message = message.to_string();
        for fragment in &self.fragments {
            if fragment.len() >= MIN_FRAGMENT {
                message = message.replace(fragment.as_str(), MASK);
            } else {
                message = mask_standalone(&message, fragment);
            }
        }
        message
    }

    /// `error` with its message scrubbed, and a hint when an unescaped
    /// character in the user information is the likely cause.
    pub(super) fn scrub_error(&self, error: Error) -> Error {
        let ErrorKind::InvalidArgument { message } = error.kind() else {
            return error;
        };
        let mut message = self.scrub(message);
        if self.misplaced_at {
            message.push_str(
                " (the connection string has an '@' after a '/' or '?': if the user name or \
                 password holds '/', '?' or '#', percent-encode it as %2F, %3F or %23)",
            );
        }
        Error::invalid_argument(message)
    }
}

/// `message` with each occurrence of `fragment` that no letter or digit
/// touches replaced by [`MASK`].
fn mask_standalone(message: &str, fragment: &str) -> String {
    let touches = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(fragment) {
        let before = rest[..at].chars().last().or_else(|| out.chars().last());
        let after = rest[at + fragment.len()..].chars().next();
        out.push_str(&rest[..at]);
        if touches(before) || touches(after) {
            out.push_str(fragment);
        } else {
            out.push_str(MASK);
        }
        rest = &rest[at + fragment.len()..];
    }
    out.push_str(rest);
    out
}

/// Percent-decodes what decodes; leaves a bad escape as it is.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| std::str::from_utf8(h).ok())
            .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_password_is_masked_where_it_stands_alone_only() {
        let secrets = Secrets::of("mongodb://alice:p@host/");
        assert_eq!(
            secrets.scrub(r#"option appname: host "alice:p" has port "p""#),
            r#"option appname: host "alice:****" has port "****""#
        );
    }

    #[test]
    fn pieces_of_a_cut_password_are_masked_raw_and_decoded() {
        let secrets = Secrets::of("mongodb://alice:abc%2Fdef/ghi@host/?w=1");
        assert_eq!(
            secrets.scrub("abc/def, abc%2Fdef, ghi and xabcx"),
            "****/****, ****, **** and x****x"
        );
    }

    #[test]
    fn secret_option_values_are_masked_with_what_an_ampersand_cut_off() {
        let secrets = Secrets::of(
            "mongodb://h/?authMechanismProperties=AWS_SESSION_TOKEN:tok1&tok2=x&w=1&proxyPassword=pw3",
        );
        let scrubbed = secrets.scrub("tok1 tok2=x pw3 w=1");
        assert_eq!(scrubbed, "**** **** **** w=1");
    }
}
