//! MongoDB's rules for database and collection names, checked before an
//! operation sends anything. A name the server refuses would cost a round
//! trip to learn so; worse, some are not refused but read as something else
//! (database `a.b` is collection `b.coll` of database `a` on the wire's
//! `db.coll` namespaces, and a `\0` ends the name early in the server's C
//! strings). `client.database("")` stays infallible, as in the official
//! driver; the operation fails instead.

use super::Namespace;
use crate::error::{Error, Result};

/// What a database name must not hold, on every platform the server runs
/// on (the server's own list).
const FORBIDDEN_IN_DATABASE: &[char] = &['/', '\\', '.', ' ', '"', '$', '\0'];

/// The database whose name is allowed its `$`.
const EXTERNAL_DATABASE: &str = "$external";

/// The server's limit: database names have fewer than 64 bytes.
const MAX_DATABASE_NAME_BYTES: usize = 63;

impl Namespace {
    /// Checks both names against MongoDB's naming rules; the error names
    /// the name and what is wrong with it.
    pub fn check(&self) -> Result<()> {
        check_database_name(&self.db)?;
        check_collection_name(&self.coll)
    }
}

/// Checks a database name: not empty, under 64 bytes, and none of
/// `/ \ . " $`, space or NUL.
pub fn check_database_name(name: &str) -> Result<()> {
    // The server's one exception to its own list: the database of users
    // that authenticate elsewhere (X.509, LDAP, AWS, OIDC), where such
    // users are created and listed.
    if name == EXTERNAL_DATABASE {
        return Ok(());
    }
    if name.is_empty() {
        return Err(Error::invalid_argument("the database name is empty"));
    }
    if let Some(c) = name.chars().find(|c| FORBIDDEN_IN_DATABASE.contains(c)) {
        return Err(Error::invalid_argument(format!(
            "the database name {} contains {}, which database names must not contain",
            shown(name),
            describe(c)
        )));
    }
    if name.len() > MAX_DATABASE_NAME_BYTES {
        return Err(Error::invalid_argument(format!(
            "the database name {} is {} bytes long; the limit is {MAX_DATABASE_NAME_BYTES}",
            shown(name),
            name.len()
        )));
    }
    Ok(())
}

/// Checks a collection name: not empty, and no `$` or NUL (dots are
/// allowed: `a.b` is a collection of its own).
pub fn check_collection_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid_argument("the collection name is empty"));
    }
    if let Some(c) = name.chars().find(|c| matches!(c, '$' | '\0')) {
        return Err(Error::invalid_argument(format!(
            "the collection name {} contains {}, which collection names must not contain",
            shown(name),
            describe(c)
        )));
    }
    Ok(())
}

/// A name as an error shows it: quoted, unless it may be a connection
/// string pasted in the wrong place (then it may hold a password).
fn shown(name: &str) -> String {
    if name.contains("://") || name.contains('@') {
        "(not shown: it looks like a connection string)".to_string()
    } else {
        format!("{name:?}")
    }
}

fn describe(c: char) -> String {
    match c {
        '\0' => "a NUL character".to_string(),
        ' ' => "a space".to_string(),
        c => format!("{c:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(result: Result<()>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn good_names_pass() {
        for (db, coll) in [
            ("test", "coll"),
            ("a-b_c", "a.b.c"),
            ("é", "system.profile"),
            (&"d".repeat(63)[..], "x y"),
            ("$external", "users"),
        ] {
            assert!(Namespace::new(db, coll).check().is_ok(), "{db}.{coll}");
        }
    }

    #[test]
    fn bad_database_names_name_the_problem() {
        assert_eq!(
            message(check_database_name("")),
            "invalid argument: the database name is empty"
        );
        for (name, what) in [
            ("a.b", "'.'"),
            ("a/b", "'/'"),
            ("a\\b", "'\\\\'"),
            ("a b", "a space"),
            ("a\"b", "'\"'"),
            ("$a", "'$'"),
            ("$externals", "'$'"),
            ("a\0b", "a NUL character"),
        ] {
            let text = message(check_database_name(name));
            assert!(text.contains(what), "{name:?}: {text}");
            assert!(text.contains("database name"), "{name:?}: {text}");
        }
        let text = message(check_database_name(&"d".repeat(64)));
        assert!(text.contains("64 bytes long"), "{text}");
    }

    #[test]
    fn bad_collection_names_name_the_problem() {
        assert_eq!(
            message(Namespace::new("db", "").check()),
            "invalid argument: the collection name is empty"
        );
        for (name, what) in [("a$b", "'$'"), ("a\0", "a NUL character")] {
            let text = message(Namespace::new("db", name).check());
            assert!(text.contains(what), "{name:?}: {text}");
            assert!(text.contains("collection name"), "{name:?}: {text}");
        }
        // A connection string in the wrong place is not quoted.
        let text = message(check_database_name("mongodb://u:SECRET@h"));
        assert!(!text.contains("SECRET") && text.contains("'/'"), "{text}");
        // The database is checked first.
        let text = message(Namespace::new("", "").check());
        assert!(text.contains("database name is empty"), "{text}");
    }
}
