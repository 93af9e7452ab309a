//! Runs the auth spec's connection-string tests
//! (`auth/tests/legacy/*.json`): each URI is parsed and its credential
//! resolved by the auth spec's rules ([`resolve_credential`]);
//! a valid case must match the expected credential field by field, an
//! invalid one must fail in one of the two steps.

use bson::{Bson, Document};

use super::files::{self as spec, Report};
use crate::proto::auth::resolve_credential;
use crate::proto::options::ClientOptions;

/// Cases that need a feature the project does not have yet: (file, description, reason).
const SKIPS: &[(&str, &str, &str)] = &[(
    "connection-string.json",
    "should throw an exception if username and password provided (MONGODB-AWS)",
    "contradicts \"should use username and password if specified (MONGODB-AWS)\" in the same \
     file (both give a user name and password); this driver follows the issue and the official \
     drivers: URI credentials are the first source",
)];

fn run_case(case: &Document) -> Result<(), String> {
    let uri = case.get_str("uri").map_err(|e| format!("no uri: {e}"))?;
    let valid = case
        .get_bool("valid")
        .map_err(|e| format!("no valid: {e}"))?;
    let outcome = ClientOptions::parse(uri).run().and_then(|options| {
        options
            .credential()
            .map(|c| resolve_credential(c, options.default_database()))
            .transpose()
    });
    let credential = match (outcome, valid) {
        (Err(_), false) => return Ok(()),
        (Ok(c), false) => return Err(format!("expected an error, got {c:?}")),
        (Err(e), true) => return Err(format!("expected success, got {e}")),
        (Ok(c), true) => c,
    };
    let expected = match case.get("credential") {
        None | Some(Bson::Null) => {
            return match credential {
                None => Ok(()),
                Some(c) => Err(format!("expected no credential, got {c:?}")),
            }
        }
        Some(Bson::Document(d)) => d,
        Some(other) => return Err(format!("credential is {other:?}")),
    };
    let credential = credential.ok_or("expected a credential, got none")?;
    let text = |value: &Option<String>| value.clone().map(Bson::String).unwrap_or(Bson::Null);
    let fields = [
        ("username", text(&credential.username)),
        ("password", text(&credential.password)),
        ("source", text(&credential.source)),
        (
            "mechanism",
            text(&credential.mechanism_name().map(str::to_string)),
        ),
    ];
    for (name, actual) in fields {
        let wanted = expected.get(name).cloned().unwrap_or(Bson::Null);
        if wanted != actual {
            return Err(format!("{name}: expected {wanted}, got {actual}"));
        }
    }
    let wanted = expected
        .get("mechanism_properties")
        .cloned()
        .unwrap_or(Bson::Null);
    let actual = credential
        .mechanism_properties
        .clone()
        .map(Bson::Document)
        .unwrap_or(Bson::Null);
    if wanted != actual {
        // Property order is not part of the test.
        let same = match (&wanted, &actual) {
            (Bson::Document(w), Bson::Document(a)) => {
                w.len() == a.len() && w.iter().all(|(k, v)| a.get(k) == Some(v))
            }
            _ => false,
        };
        if !same {
            return Err(format!(
                "mechanism_properties: expected {wanted}, got {actual}"
            ));
        }
    }
    Ok(())
}

#[test]
fn auth_connection_string_spec() {
    let Some(dir) = spec::dir("auth/tests/legacy") else {
        return;
    };
    let mut report = Report::new("auth");
    for path in spec::json_files(&dir) {
        let file = spec::name(&path);
        let doc = spec::load(&path);
        let tests = doc.get_array("tests").expect("a tests array");
        for test in tests {
            let case = test.as_document().expect("a test document");
            let description = case.get_str("description").unwrap_or("?").to_string();
            if let Some((_, _, reason)) = SKIPS
                .iter()
                .find(|(f, d, _)| *f == file && *d == description)
            {
                report.skip(&file, &description, reason);
                continue;
            }
            report.run(&file, &description, || run_case(case));
        }
    }
    report.finish();
}
