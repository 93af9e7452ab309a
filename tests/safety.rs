//! Safety under real-world faults: options the driver cannot honour are
//! refused at client construction, secrets never reach error messages, and
//! documents nested too deep are refused before they are serialised.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use bson::{doc, Document};
use mongo_inline::{Client, ClientOptions, ErrorKind};

use support::server::TestServer;

fn construction_error(uri: &str) -> String {
    let error = Client::with_uri_str(uri).expect_err(uri);
    assert!(
        matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
        "{uri}: {error:?}"
    );
    error.to_string()
}

#[test]
fn a_client_refuses_unbuilt_features_instead_of_connecting_without_them() {
    for (uri, named) in [
        (
            "mongodb://alice:SECRET@127.0.0.1:1/?authMechanism=GSSAPI",
            "GSSAPI",
        ),
        ("mongodb://127.0.0.1:1/?proxyHost=p.example", "proxyHost"),
    ] {
        let message = construction_error(uri);
        assert!(message.contains("not supported yet"), "{uri}: {message}");
        assert!(message.contains(named), "{uri}: {message}");
        assert!(!message.contains("SECRET"), "{uri}: {message}");
    }
    // The same through options built from a parsed URI and the builder.
    let options = ClientOptions::parse("mongodb://127.0.0.1:1/?proxyHost=p.example")
        .run()
        .unwrap();
    let error = Client::with_options(options.clone()).unwrap_err();
    assert!(error.to_string().contains("not supported yet"), "{error}");
    let error = Client::builder(options).build().unwrap_err();
    assert!(error.to_string().contains("not supported yet"), "{error}");
    // Plain text asked for explicitly is fine.
    Client::with_uri_str("mongodb://127.0.0.1:1/?tls=false").unwrap();
}

/// `{ a: { a: ... { a: 1 } } }`, `levels` documents deep.
fn nested(levels: usize) -> Document {
    let mut document = doc! { "a": 1 };
    for _ in 1..levels {
        document = doc! { "a": document };
    }
    document
}

#[test]
fn documents_nested_ten_thousand_deep_are_refused_before_serialisation() {
    let server = TestServer::shared();
    let client = Client::with_uri_str(server.uri()).unwrap();
    let db = client.database("safety");
    let coll = db.collection::<Document>("deep");
    let deep = nested(10_000);

    let error = coll.insert_one(&deep).run().unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("nested deeper than"), "{error}");

    // The command owns the document; the driver must also drop it safely.
    let error = db
        .run_command(doc! { "insert": "deep", "documents": [deep] })
        .run()
        .unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("nested deeper than"), "{error}");

    // The client is still usable, and a document within the limit is sent.
    coll.insert_one(nested(50)).run().unwrap();
}

/// Passwords with every character that can confuse a URI parser; each
/// holds the markers `Qz7k` and `Wv9j`, which no message may contain.
const ODD_PASSWORDS: &[&str] = &[
    "Qz7k/Wv9j",
    "Qz7k?Wv9j",
    "Qz7k#Wv9j",
    "Qz7k@Wv9j",
    "Qz7k:Wv9j",
    "Qz7k%Wv9j",
    "Qz7k%2FWv9j",
    "Qz7k%zzWv9j",
    "Qz7k,Wv9j",
    "Qz7k&Wv9j=1",
    "[Qz7k]Wv9j",
    "Qz7k Wv9j",
];

/// Connection strings that fail (or warn) on every path of the parser we
/// could reach, with `{pw}` standing for the password.
const FAILING_URIS: &[&str] = &[
    "mongodb://alice:{pw}@host/",
    "mongodb://alice:{pw}/x@host/",
    "mongodb://alice:{pw}@host:99999/",
    "mongodb://alice:{pw}@host:0/",
    "mongodb://alice:{pw}@/db",
    "mongodb://alice:{pw}@h1,,h2/",
    "mongodb://alice:{pw}@[::1/",
    "mongodb://alice:{pw}@[zz]:1/",
    "mongodb://alice:{pw}@host/bad db",
    "mongodb://alice:{pw}@host/?w=x&unknownOpt=1&tls=yes",
    "mongodb://alice:{pw}@host/?authMechanism=NOPE",
    "mongodb://alice:{pw}@host/?authMechanism=MONGODB-X509",
    "mongodb://alice:{pw}@host/?tls=true&ssl=false",
    "mongodb://alice:{pw}@host/?novalue",
    "mongodb://alice:{pw}@host/?appname=%zz",
    "mongodb+srv://alice:{pw}@a,b/",
    "mongodb+srv://alice:{pw}@a:27017/",
    "mongodb://alice:{pw}@host/?authSource=",
    "mongodb://host/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:{pw}&authMechanismProperties=bad",
    "mongodb://host/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:{pw}&readPreference=bad",
    "mongodb://host/?authMechanism=SCRAM-SHA-256&authMechanismProperties=AWS_SESSION_TOKEN:{pw}",
    "mongodb://host/?proxyHost=p&proxyUsername=u&proxyPassword={pw}&proxyPort=0",
    "mongodb://host/?proxyPassword={pw}",
    "mongodb://host/?tlsCertificateKeyFilePassword={pw}&tlsInsecure=maybe",
    "{pw}://alice:{pw}@host/",
];

fn assert_no_secret(context: &str, text: &str) {
    assert!(
        !text.contains("Qz7k") && !text.contains("Wv9j"),
        "{context}: a secret leaked into {text:?}"
    );
}

#[test]
fn no_uri_parse_error_or_warning_quotes_a_password_or_token() {
    let mut errors = 0;
    for template in FAILING_URIS {
        for password in ODD_PASSWORDS {
            let uri = template.replace("{pw}", password);
            match ClientOptions::parse_with_warnings(&uri) {
                Ok((options, warnings)) => {
                    for warning in warnings {
                        assert_no_secret(&uri, &warning);
                    }
                    let shown = format!("{options:?}");
                    assert_no_secret(&uri, &shown);
                }
                Err(error) => {
                    errors += 1;
                    assert_no_secret(&uri, &error.to_string());
                    assert_no_secret(&uri, &format!("{error:?}"));
                }
            }
            if let Err(error) = Client::with_uri_str(&uri) {
                assert_no_secret(&uri, &error.to_string());
            }
        }
    }
    assert!(
        errors > FAILING_URIS.len() * ODD_PASSWORDS.len() / 2,
        "{errors}"
    );
}

#[test]
fn a_password_cut_short_by_a_slash_is_not_quoted_and_the_fix_is_named() {
    let error = ClientOptions::parse("mongodb://alice:SECRET/x@host/")
        .run()
        .unwrap_err();
    let message = error.to_string();
    assert!(!message.contains("SECRET"), "{message}");
    assert!(message.contains("%2F"), "{message}");
}

#[test]
fn debug_output_hides_auth_mechanism_property_values() {
    let options = ClientOptions::parse(
        "mongodb://AKIDQz7k:Wv9jKEY@h/?authMechanism=MONGODB-AWS\
         &authMechanismProperties=AWS_SESSION_TOKEN:Qz7kTOKEN",
    )
    .run()
    .unwrap();
    let shown = format!("{options:?}");
    assert_no_secret("Debug of ClientOptions", &shown.replace("AKIDQz7k", ""));
    assert!(shown.contains("AWS_SESSION_TOKEN"), "{shown}");
    let credential = format!("{:?}", options.credential().unwrap());
    assert!(!credential.contains("Qz7kTOKEN"), "{credential}");
}

#[test]
fn conflicting_auth_mechanism_properties_are_named_without_values() {
    let mut credential = mongo_inline::options::Credential::default();
    credential.mechanism = Some(mongo_inline::options::AuthMechanism::MongoDbAws);
    credential.mechanism_properties = Some(doc! { "AWS_SESSION_TOKEN": "Qz7kCODE" });
    let code = ClientOptions::builder().credential(credential).build();
    let error = ClientOptions::parse_with(
        "mongodb://h/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:Wv9jURI",
        code,
    )
    .unwrap_err();
    let message = error.to_string();
    assert!(message.contains("authMechanismProperties"), "{message}");
    assert_no_secret("merge conflict", &message);
}

#[test]
fn a_filter_nested_ten_thousand_deep_is_refused_on_a_main_thread_sized_stack() {
    let server = TestServer::shared();
    let uri = server.uri();
    // Filters are cloned into the command before the wire refuses them;
    // that costs far less stack per level than serialising, so a
    // process's main thread (8 MiB) survives where serialisation did not.
    let outcome = std::thread::Builder::new()
        .stack_size(8 << 20)
        .spawn(move || {
            let client = Client::with_uri_str(&uri).unwrap();
            let coll = client.database("safety").collection::<Document>("deep");
            let error = coll
                .find(nested(10_000))
                .run()
                .map(|_| ())
                .unwrap_err()
                .to_string();
            let count_error = coll
                .count_documents(nested(10_000))
                .run()
                .unwrap_err()
                .to_string();
            (error, count_error)
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(outcome.0.contains("nested deeper than"), "{}", outcome.0);
    assert!(outcome.1.contains("nested deeper than"), "{}", outcome.1);
}
