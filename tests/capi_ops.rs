//! The C ABI's operations against SecantusDB, from Rust: what its error
//! messages never show (a connection string's password), the result
//! documents of `w: 0` writes, names the server would refuse, refused
//! before anything is sent, and the compression and cloud authentication
//! settings reaching the wire (the topology simulator, the MONGODB-AWS and
//! MONGODB-OIDC stand-in server). Needs the `capi` feature (`.ci/capi` runs it:
//! `cargo test --features capi --test capi_ops`).

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]
#![cfg(feature = "capi")]

mod support;

use std::ffi::{CStr, CString};
use std::ptr;

use bson::{doc, Document};
use mongo_inline::capi::*;
use support::secrets::{failing_uris, SECRET};
use support::server::{free_port, TestServer};

/// An error's domain and message; the error is freed.
fn take_error(error: *mut MiError) -> Option<(i32, String)> {
    if error.is_null() {
        return None;
    }
    // SAFETY: a live error just returned by the library, freed once.
    unsafe {
        let fields = (
            (*error).domain,
            CStr::from_ptr((*error).message)
                .to_string_lossy()
                .into_owned(),
        );
        mi_error_free(error);
        Some(fields)
    }
}

fn bson(document: &Document) -> Vec<u8> {
    let mut bytes = Vec::new();
    document.to_writer(&mut bytes).unwrap();
    bytes
}

/// The document in `buffer`; the buffer is freed.
fn take_buffer(buffer: &mut MiBuffer) -> Document {
    // SAFETY: a buffer the library filled.
    let document = unsafe {
        let bytes = std::slice::from_raw_parts(buffer.data, buffer.len);
        Document::from_reader(bytes).unwrap()
    };
    // SAFETY: freed once.
    unsafe { mi_buffer_free(buffer) };
    document
}

fn empty_buffer() -> MiBuffer {
    MiBuffer {
        data: ptr::null_mut(),
        len: 0,
    }
}

/// A client for `uri`, or the error's message.
fn new_client(uri: &str) -> Result<*mut MiClient, String> {
    let uri = CString::new(uri).unwrap();
    let mut client = ptr::null_mut();
    // SAFETY: valid string and out-parameter.
    match take_error(unsafe { mi_client_new(uri.as_ptr(), &mut client) }) {
        None => Ok(client),
        Some((_, message)) => Err(message),
    }
}

fn cstr(text: &str) -> CString {
    CString::new(text).unwrap()
}

/// What a C operation gave: its result document, or its error's domain
/// and message.
type Outcome<T> = Result<T, (i32, String)>;

/// Runs `call`, a C entry point given a result buffer to fill: the
/// document it filled, or its error (both freed).
fn filled(call: impl FnOnce(*mut MiBuffer) -> *mut MiError) -> Outcome<Document> {
    let mut result = empty_buffer();
    match take_error(call(&mut result)) {
        None => Ok(take_buffer(&mut result)),
        Some(e) => Err(e),
    }
}

/// `mi_client_run_command` of `{ping: 1}` on `db`: the reply or the error.
fn ping(client: *mut MiClient, db: &str) -> Outcome<Document> {
    let command = bson(&doc! { "ping": 1 });
    let db = cstr(db);
    // SAFETY: a live client, valid arguments.
    filled(|reply| unsafe {
        mi_client_run_command(
            client,
            ptr::null_mut(),
            db.as_ptr(),
            command.as_ptr(),
            command.len(),
            reply,
        )
    })
}

fn insert_one(
    client: *mut MiClient,
    db: &str,
    coll: &str,
    document: &Document,
) -> Outcome<Document> {
    let bytes = bson(document);
    let (db, coll) = (cstr(db), cstr(coll));
    // SAFETY: a live client, valid arguments.
    filled(|result| unsafe {
        mi_insert_one(
            client,
            ptr::null_mut(),
            db.as_ptr(),
            coll.as_ptr(),
            bytes.as_ptr(),
            bytes.len(),
            ptr::null(),
            0,
            result,
        )
    })
}

fn insert_many(
    client: *mut MiClient,
    db: &str,
    coll: &str,
    documents: &[Document],
) -> Outcome<Document> {
    let bytes: Vec<Vec<u8>> = documents.iter().map(bson).collect();
    let pointers: Vec<*const u8> = bytes.iter().map(|b| b.as_ptr()).collect();
    let lengths: Vec<usize> = bytes.iter().map(Vec::len).collect();
    let (db, coll) = (cstr(db), cstr(coll));
    // SAFETY: a live client, `count` documents and lengths.
    filled(|result| unsafe {
        mi_insert_many(
            client,
            ptr::null_mut(),
            db.as_ptr(),
            coll.as_ptr(),
            pointers.as_ptr(),
            lengths.as_ptr(),
            documents.len(),
            ptr::null(),
            0,
            result,
        )
    })
}

/// `mi_update_many` (`many`) or `mi_update_one`.
fn update(
    client: *mut MiClient,
    db: &str,
    coll: &str,
    filter: &Document,
    change: &Document,
    many: bool,
) -> Outcome<Document> {
    let (filter, change) = (bson(filter), bson(change));
    let (db, coll) = (cstr(db), cstr(coll));
    let entry = if many { mi_update_many } else { mi_update_one };
    // SAFETY: a live client, valid arguments, no options.
    filled(|result| unsafe {
        entry(
            client,
            ptr::null_mut(),
            db.as_ptr(),
            coll.as_ptr(),
            filter.as_ptr(),
            filter.len(),
            change.as_ptr(),
            change.len(),
            ptr::null(),
            0,
            result,
        )
    })
}

/// `mi_delete_many` (`many`) or `mi_delete_one`.
fn delete(
    client: *mut MiClient,
    db: &str,
    coll: &str,
    filter: &Document,
    many: bool,
) -> Outcome<Document> {
    let filter = bson(filter);
    let (db, coll) = (cstr(db), cstr(coll));
    let entry = if many { mi_delete_many } else { mi_delete_one };
    // SAFETY: a live client, valid arguments.
    filled(|result| unsafe {
        entry(
            client,
            ptr::null_mut(),
            db.as_ptr(),
            coll.as_ptr(),
            filter.as_ptr(),
            filter.len(),
            ptr::null(),
            0,
            result,
        )
    })
}

fn count(client: *mut MiClient, db: &str, coll: &str) -> Outcome<u64> {
    let filter = bson(&doc! {});
    let (db, coll) = (cstr(db), cstr(coll));
    let mut n = 0u64;
    // SAFETY: a live client, valid arguments.
    let error = unsafe {
        mi_count_documents(
            client,
            ptr::null_mut(),
            db.as_ptr(),
            coll.as_ptr(),
            filter.as_ptr(),
            filter.len(),
            ptr::null(),
            0,
            &mut n,
        )
    };
    match take_error(error) {
        None => Ok(n),
        Some(e) => Err(e),
    }
}

fn free(client: *mut MiClient) {
    // SAFETY: a live client, freed once.
    unsafe { mi_client_free(client) };
}

#[test]
fn no_c_error_shows_a_password() {
    let refused = format!("127.0.0.1:{}", free_port());
    let mut uris = failing_uris(&refused);
    let live = TestServer::shared().address();
    uris.push(format!(
        "mongodb://u:{SECRET}@{live}/?directConnection=true&serverSelectionTimeoutMS=2000"
    ));
    let mut operation_errors = 0;
    for uri in &uris {
        let client = match new_client(uri) {
            Err(message) => {
                assert!(
                    !message.contains(SECRET),
                    "mi_client_new({uri:?}): {message}"
                );
                continue;
            }
            Ok(client) => client,
        };
        if let Err((_, message)) = ping(client, "secrets") {
            operation_errors += 1;
            assert!(!message.contains(SECRET), "ping with {uri:?}: {message}");
        }
        if let Err((_, message)) = insert_one(client, "secrets", "c", &doc! { "x": 1 }) {
            assert!(!message.contains(SECRET), "insert with {uri:?}: {message}");
        }
        free(client);
    }
    assert!(
        operation_errors > 0,
        "no operation failed: the sweep checked no operation error"
    );
}

fn fresh_collection() -> String {
    format!("c_{}", bson::oid::ObjectId::new())
}

#[test]
fn w0_writes_say_acknowledged_false_without_counts() {
    let uri = format!("{}&w=0", TestServer::shared().uri());
    let client = new_client(&uri).unwrap();
    let coll = fresh_collection();
    let unacknowledged = doc! { "acknowledged": false };
    assert_eq!(
        insert_one(client, "capi_ops", &coll, &doc! { "_id": 1 }),
        Ok(unacknowledged.clone())
    );
    assert_eq!(
        insert_many(
            client,
            "capi_ops",
            &coll,
            &[doc! { "_id": 1 }, doc! { "_id": 2 }]
        ),
        Ok(unacknowledged.clone())
    );
    for many in [false, true] {
        assert_eq!(
            update(
                client,
                "capi_ops",
                &coll,
                &doc! { "_id": 1 },
                &doc! { "$set": { "y": 1 } },
                many
            ),
            Ok(unacknowledged.clone())
        );
        assert_eq!(
            delete(client, "capi_ops", &coll, &doc! { "_id": 9 }, many),
            Ok(unacknowledged.clone())
        );
    }
    free(client);

    // Acknowledged writes still report their counts.
    let client = new_client(&TestServer::shared().uri()).unwrap();
    let coll = fresh_collection();
    assert_eq!(
        insert_one(client, "capi_ops", &coll, &doc! { "_id": 1 }),
        Ok(doc! { "insertedId": 1 })
    );
    let updated = update(
        client,
        "capi_ops",
        &coll,
        &doc! { "_id": 1 },
        &doc! { "$set": { "y": 1 } },
        false,
    )
    .unwrap();
    assert_eq!(updated.get_i64("matchedCount"), Ok(1), "{updated}");
    assert!(!updated.contains_key("acknowledged"), "{updated}");
    free(client);
}

#[test]
fn bad_names_are_refused_before_anything_is_sent() {
    // Nothing listens: a name that got as far as the network would fail
    // with a server selection error instead.
    let uri = format!(
        "mongodb://127.0.0.1:{}/?serverSelectionTimeoutMS=200",
        free_port()
    );
    let client = new_client(&uri).unwrap();
    let document = doc! { "x": 1 };
    for (db, coll, problem) in [
        ("", "c", "database name is empty"),
        ("db", "", "collection name is empty"),
        ("a.b", "c", "'.'"),
        ("a/b", "c", "'/'"),
        ("a\\b", "c", "'\\\\'"),
        ("a b", "c", "a space"),
        ("a\"b", "c", "'\"'"),
        ("a$b", "c", "'$'"),
        ("db", "a$b", "'$'"),
    ] {
        let outcomes = [
            insert_one(client, db, coll, &document).map(drop),
            insert_many(client, db, coll, std::slice::from_ref(&document)).map(drop),
            update(
                client,
                db,
                coll,
                &doc! {},
                &doc! { "$set": { "y": 1 } },
                true,
            )
            .map(drop),
            delete(client, db, coll, &doc! {}, false).map(drop),
            count(client, db, coll).map(drop),
        ];
        for outcome in outcomes {
            let (domain, message) = outcome.unwrap_err();
            assert_eq!(
                domain,
                Domain::Argument as i32,
                "{db:?}.{coll:?}: {message}"
            );
            assert!(message.contains(problem), "{db:?}.{coll:?}: {message}");
        }
    }
    let (domain, message) = ping(client, "a.b").unwrap_err();
    assert_eq!(domain, Domain::Argument as i32, "{message}");
    assert!(message.contains("database name"), "{message}");
    free(client);
}

// The database functions are exported from the library under their C
// names but not re-exported as Rust items: declared here as a C caller
// would, the handles opaque.
unsafe extern "C" {
    fn mi_run_cursor_command(
        client: *mut std::ffi::c_void,
        session: *mut std::ffi::c_void,
        db: *const std::ffi::c_char,
        command: *const u8,
        command_len: usize,
        options: *const u8,
        options_len: usize,
        out: *mut *mut std::ffi::c_void,
    ) -> *mut MiError;
}

/// `mi_run_cursor_command` reads `timeoutMS` and `timeoutMode` from its
/// options and applies CSOT's cursor rules to them: the invalid
/// combinations are refused before anything is sent (nothing listens).
#[test]
fn run_cursor_commands_timeout_options_follow_the_cursor_rules() {
    let uri = format!(
        "mongodb://127.0.0.1:{}/?serverSelectionTimeoutMS=200",
        free_port()
    );
    let client = new_client(&uri).unwrap();
    let command = bson(&doc! { "find": "c" });
    let db = cstr("capi_ops_cursor_timeout");
    for (options, problem) in [
        (doc! { "timeoutMode": "iteration" }, "needs a timeoutMS"),
        (
            doc! { "timeoutMS": 100, "timeoutMode": "cursorLifetime", "cursorType": "tailable" },
            "not allowed for a tailable cursor",
        ),
    ] {
        let options = bson(&options);
        let mut cursor: *mut std::ffi::c_void = ptr::null_mut();
        // SAFETY: a live client, valid arguments.
        let error = unsafe {
            mi_run_cursor_command(
                client.cast(),
                ptr::null_mut(),
                db.as_ptr(),
                command.as_ptr(),
                command.len(),
                options.as_ptr(),
                options.len(),
                &mut cursor,
            )
        };
        let (domain, message) = take_error(error).expect("an error");
        assert_eq!(domain, Domain::Argument as i32, "{message}");
        assert!(message.contains(problem), "{message}");
        assert!(cursor.is_null());
    }
    free(client);
}

/// `compressors=` in the URI a C caller passes: each compressor carries
/// the C functions' commands and replies (the simulator speaks them in
/// front of SecantusDB, which compresses nothing, and records what came
/// compressed).
#[test]
fn compressors_in_a_c_clients_uri_compress_its_operations() {
    let sim = support::sim::Simulator::standalone(TestServer::shared());
    for (name, id) in [("snappy", 1), ("zlib", 2), ("zstd", 3)] {
        sim.reset_observations();
        let seed = sim.seed_uri(&[0]);
        let separator = if seed.contains('?') { '&' } else { '?' };
        let client = new_client(&format!(
            "{seed}{separator}compressors={name}&zlibCompressionLevel=9&serverSelectionTimeoutMS=5000"
        ))
        .unwrap();
        let coll = fresh_collection();
        let text = "compressible ".repeat(20);
        insert_one(client, "capi_compression", &coll, &doc! { "text": text }).unwrap();
        assert_eq!(count(client, "capi_compression", &coll), Ok(1), "{name}");
        free(client);
        let handshake = &sim.handshakes(0)[0];
        assert_eq!(
            handshake.get_array("compression").unwrap(),
            &vec![bson::Bson::String(name.into())]
        );
        let compressed = sim.compressed(0);
        for command in ["insert", "aggregate"] {
            assert!(
                compressed.contains(&(command.to_string(), id)),
                "{name}: {command} not compressed: {compressed:?}"
            );
        }
    }
}

fn aws_proxy() -> support::cloud::AuthProxy {
    support::cloud::AuthProxy::start(
        TestServer::shared_standalone().port(),
        vec![support::cloud::AwsIdentity {
            access_key_id: "AKIDCAPI".into(),
            secret_access_key: "capi/secret+KEY".into(),
            session_token: Some("CAPI/token=".into()),
        }],
    )
}

/// MONGODB-AWS from C: the credentials and the session token
/// (`authMechanismProperties`) in the URI; the stand-in server verifies the
/// SigV4 signature with the secret it knows.
#[test]
fn mongodb_aws_settings_in_a_c_clients_uri_authenticate() {
    let proxy = aws_proxy();
    let uri = proxy
        .uri(
            "?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:CAPI%2Ftoken%3D\
             &serverSelectionTimeoutMS=5000",
        )
        .replacen("mongodb://", "mongodb://AKIDCAPI:capi%2Fsecret%2BKEY@", 1);
    let client = new_client(&uri).unwrap();
    insert_one(client, "capi_cloud", &fresh_collection(), &doc! { "x": 1 }).unwrap();
    free(client);
    assert_eq!(proxy.starts(), ["MONGODB-AWS"]);
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
}

/// A C OIDC callback: writes a token the stand-in server accepts.
unsafe extern "C" fn oidc_token(
    user_data: *mut std::ffi::c_void,
    _timeout_ms: i64,
    _username: *const std::ffi::c_char,
    token: *mut std::ffi::c_char,
    capacity: usize,
) -> i64 {
    // SAFETY: the test passes a live counter.
    unsafe { *user_data.cast::<u32>() += 1 };
    let jwt = support::cloud::jwt("capi-user");
    if jwt.len() >= capacity {
        return -1;
    }
    // SAFETY: `capacity` writable bytes, by the ABI's contract.
    unsafe {
        ptr::copy_nonoverlapping(jwt.as_ptr(), token.cast::<u8>(), jwt.len());
        *token.add(jwt.len()) = 0;
    }
    jwt.len() as i64
}

/// MONGODB-OIDC from C: the mechanism and its properties in the URI, the
/// token from a C callback (`mi_client_new_with_oidc_callback`), called
/// once and cached.
#[test]
fn mongodb_oidc_with_a_c_callback_authenticates() {
    let proxy = aws_proxy();
    let uri = cstr(
        &proxy.uri("?authMechanism=MONGODB-OIDC&serverSelectionTimeoutMS=5000&timeoutMS=3000"),
    );
    let mut calls = 0u32;
    let mut client = ptr::null_mut();
    // SAFETY: a valid URI, callback and counter (alive until the client is freed).
    let error = unsafe {
        mi_client_new_with_oidc_callback(
            uri.as_ptr(),
            Some(oidc_token),
            (&raw mut calls).cast(),
            &mut client,
        )
    };
    assert_eq!(take_error(error), None);
    let coll = fresh_collection();
    insert_one(client, "capi_cloud", &coll, &doc! { "x": 1 }).unwrap();
    assert_eq!(count(client, "capi_cloud", &coll), Ok(1));
    free(client);
    assert_eq!(calls, 1);
    assert_eq!(proxy.starts(), ["MONGODB-OIDC"]);
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
}
