//! Safety under real-world faults: options the driver cannot honour are
//! refused at client construction, secrets never reach error messages, and
//! documents nested too deep are refused before they are serialised.

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
fn a_client_refuses_tls_and_credentials_instead_of_connecting_without_them() {
    for (uri, named) in [
        ("mongodb://127.0.0.1:1/?tls=true", "tls"),
        ("mongodb://127.0.0.1:1/?ssl=true", "tls"),
        ("mongodb://127.0.0.1:1/?tlsCAFile=/ca.pem", "tlsCAFile"),
        ("mongodb://alice:SECRET@127.0.0.1:1/", "credentials"),
        (
            "mongodb://alice:SECRET@127.0.0.1:1/?authMechanism=SCRAM-SHA-256",
            "SCRAM-SHA-256",
        ),
        ("mongodb://127.0.0.1:1/?compressors=zstd", "compressors"),
    ] {
        let message = construction_error(uri);
        assert!(message.contains("not supported yet"), "{uri}: {message}");
        assert!(message.contains(named), "{uri}: {message}");
        assert!(!message.contains("SECRET"), "{uri}: {message}");
    }
    // The same through options built from a parsed URI and the builder.
    let options = ClientOptions::parse("mongodb://127.0.0.1:1/?tls=true").unwrap();
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
    let client = Client::with_uri_str(&server.uri()).unwrap();
    let db = client.database("safety");
    let coll = db.collection::<Document>("deep");
    let deep = nested(10_000);

    let error = coll.insert_one(&deep, None).unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("nested deeper than"), "{error}");

    // The command owns the document; the driver must also drop it safely.
    let error = db
        .run_command(doc! { "insert": "deep", "documents": [deep] })
        .unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::InvalidArgument { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("nested deeper than"), "{error}");

    // The client is still usable, and a document within the limit is sent.
    coll.insert_one(nested(50), None).unwrap();
}
