//! The exchange against a scripted server replaying the auth spec's
//! SCRAM-SHA-256 conversation (user "user", password "pencil", nonce
//! injected).

use super::*;

const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const SERVER_FIRST: &str =
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                            p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

fn nonce() -> ClientNonce {
    ClientNonce::scram(NONCE)
}

/// Drives a conversation the way the shell does, with `run` standing in
/// for the socket.
fn authenticate(
    auth: &mut Authenticator,
    reply: &Document,
    speculation: Speculation,
    run: &mut dyn FnMut(&str, Document) -> Result<Document>,
) -> Result<()> {
    let (mut conversation, mut next) = auth.begin(reply, speculation, &nonce())?;
    while let Next::Send { db, command } = next {
        let answer = run(&db, command)?;
        next = auth.step(&mut conversation, &answer)?;
    }
    Ok(())
}

/// [`authenticate`], handing back the conversation for what its outcome
/// says about its keys.
fn converse(
    auth: &mut Authenticator,
    run: &mut dyn FnMut(&str, Document) -> Result<Document>,
) -> (Result<()>, Conversation) {
    let (mut conversation, mut next) = auth
        .begin(&doc! { "ok": 1 }, Speculation::None, &nonce())
        .unwrap();
    let outcome = loop {
        let Next::Send { db, command } = next else {
            break Ok(());
        };
        match run(&db, command).and_then(|answer| auth.step(&mut conversation, &answer)) {
            Ok(following) => next = following,
            Err(error) => break Err(error),
        }
    };
    (outcome, conversation)
}

fn credential(uri: &str) -> Credential {
    crate::ClientOptions::parse(uri)
        .run()
        .unwrap()
        .credential()
        .unwrap()
        .clone()
}

fn authenticator(uri: &str) -> Authenticator {
    let options = crate::ClientOptions::parse(uri).run().unwrap();
    Authenticator::new(options.credential().unwrap(), options.default_database()).unwrap()
}

fn payload_text(command: &Document) -> String {
    match command.get("payload") {
        Some(Bson::Binary(b)) => String::from_utf8(b.bytes.clone()).unwrap(),
        other => panic!("no binary payload: {other:?}"),
    }
}

fn server_reply(payload: &str, done: bool) -> Document {
    doc! { "ok": 1, "conversationId": 1, "done": done, "payload": binary(payload.as_bytes().to_vec()) }
}

/// Answers saslStart and saslContinue as the spec's server does; records
/// what it was sent.
fn scripted(
    sent: &mut Vec<(String, Document)>,
) -> impl FnMut(&str, Document) -> Result<Document> + '_ {
    move |db, command| {
        sent.push((db.to_owned(), command.clone()));
        if command.contains_key("saslStart") {
            assert_eq!(payload_text(&command), format!("n,,n=user,r={NONCE}"));
            Ok(server_reply(SERVER_FIRST, false))
        } else {
            assert_eq!(payload_text(&command), CLIENT_FINAL);
            Ok(server_reply(SERVER_FINAL, true))
        }
    }
}

#[test]
fn speculative_scram_finishes_in_one_round_trip_and_reuses_the_keys() {
    let mut auth = authenticator("mongodb://user:pencil@h/?authMechanism=SCRAM-SHA-256");
    for socket in 0..3 {
        let mut hello = doc! { "hello": 1 };
        let speculation = auth.prepare_handshake(&mut hello, &nonce()).unwrap();
        let spec = hello.get_document("speculativeAuthenticate").unwrap();
        assert_eq!(spec.get_str("mechanism"), Ok("SCRAM-SHA-256"));
        assert_eq!(spec.get_str("db"), Ok("admin"));
        assert!(
            !hello.contains_key("saslSupportedMechs"),
            "mechanism was named"
        );
        let reply = doc! { "ok": 1, "speculativeAuthenticate": server_reply(SERVER_FIRST, false) };
        let mut sent = Vec::new();
        authenticate(&mut auth, &reply, speculation, &mut scripted(&mut sent)).unwrap();
        assert_eq!(sent.len(), 1, "socket {socket}: only saslContinue is sent");
        assert!(sent[0].1.contains_key("saslContinue"));
    }
    assert_eq!(auth.derivations(), 1, "PBKDF2 ran once for three sockets");
}

#[test]
fn without_speculation_the_conversation_starts_with_sasl_start() {
    let mut auth =
        authenticator("mongodb://user:pencil@h/?authMechanism=SCRAM-SHA-256&authSource=db1");
    let mut hello = doc! { "hello": 1 };
    let speculation = auth.prepare_handshake(&mut hello, &nonce()).unwrap();
    let mut sent = Vec::new();
    authenticate(
        &mut auth,
        &doc! { "ok": 1 },
        speculation,
        &mut scripted(&mut sent),
    )
    .unwrap();
    assert_eq!(sent.len(), 2);
    assert_eq!(
        sent[0].0, "db1",
        "authSource is where the conversation runs"
    );
    assert_eq!(
        sent[0].1.get_document("options").unwrap(),
        &doc! { "skipEmptyExchange": true }
    );
}

#[test]
fn negotiation_asks_for_the_users_mechanisms_and_falls_back_to_sha1() {
    let mut auth = authenticator("mongodb://user:pencil@h/app");
    let mut hello = doc! { "hello": 1 };
    let speculation = auth.prepare_handshake(&mut hello, &nonce()).unwrap();
    assert_eq!(hello.get_str("saslSupportedMechs"), Ok("app.user"));
    // The server lists only SCRAM-SHA-1 and ignored the SHA-256 speculation.
    let reply = doc! { "ok": 1, "saslSupportedMechs": ["SCRAM-SHA-1"] };
    let mut sent = Vec::new();
    let e = authenticate(
        &mut auth,
        &reply,
        speculation,
        &mut |db: &str, command: Document| {
            sent.push((db.to_owned(), command.clone()));
            Ok(doc! { "ok": 0, "errmsg": "Authentication failed.", "code": 18 })
        },
    )
    .unwrap_err();
    assert_eq!(sent[0].1.get_str("mechanism"), Ok("SCRAM-SHA-1"));
    assert!(matches!(e.kind(), ErrorKind::Authentication { .. }));
    let text = e.to_string();
    assert!(text.contains("SCRAM-SHA-1 for user \"user\""), "{text}");
    assert!(text.contains("Authentication failed. (code 18)"), "{text}");
    assert!(!text.contains("pencil"));
    assert_eq!(
        negotiated(&doc! { "saslSupportedMechs": ["SCRAM-SHA-1", "SCRAM-SHA-256"] }),
        ScramMechanism::Sha256
    );
    assert_eq!(negotiated(&doc! {}), ScramMechanism::Sha1);
}

#[test]
fn a_server_that_does_not_know_the_password_is_refused() {
    let mut auth = authenticator("mongodb://user:pencil@h/?authMechanism=SCRAM-SHA-256");
    let mut hello = doc! { "hello": 1 };
    let speculation = auth.prepare_handshake(&mut hello, &nonce()).unwrap();
    let reply = doc! { "ok": 1, "speculativeAuthenticate": server_reply(SERVER_FIRST, false) };
    let e = authenticate(&mut auth, &reply, speculation, &mut |_: &str, _| {
        Ok(server_reply(
            "v=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
            true,
        ))
    })
    .unwrap_err();
    assert!(e.to_string().contains("signature is wrong"), "{e}");
}

#[test]
fn a_server_that_never_finishes_is_refused() {
    let mut auth = authenticator("mongodb://user:pencil@h/?authMechanism=SCRAM-SHA-256");
    let speculation = auth.prepare_handshake(&mut doc! {}, &nonce()).unwrap();
    let reply = doc! { "ok": 1, "speculativeAuthenticate": server_reply(SERVER_FIRST, false) };
    let mut rounds = 0;
    let e = authenticate(&mut auth, &reply, speculation, &mut |_: &str, _| {
        rounds += 1;
        Ok(server_reply(SERVER_FINAL, false))
    })
    .unwrap_err();
    assert!(e.to_string().contains("did not finish"), "{e}");
    assert_eq!(rounds, 3);
}

#[test]
fn plain_sends_the_rfc4616_message_to_external() {
    let mut auth = authenticator("mongodb://user:pencil@h/?authMechanism=PLAIN");
    let mut hello = doc! {};
    let speculation = auth.prepare_handshake(&mut hello, &nonce()).unwrap();
    assert!(hello.is_empty(), "PLAIN neither negotiates nor speculates");
    let mut sent = Vec::new();
    authenticate(
        &mut auth,
        &doc! { "ok": 1 },
        speculation,
        &mut |db: &str, command: Document| {
            sent.push((db.to_owned(), command));
            Ok(doc! { "ok": 1, "conversationId": 1, "done": true, "payload": binary(Vec::new()) })
        },
    )
    .unwrap();
    assert_eq!(sent[0].0, "$external");
    // The auth spec's example payload: BinData(0, "AHVzZXIAcGVuY2ls").
    assert_eq!(payload_text(&sent[0].1).as_bytes(), b"\0user\0pencil");
}

#[test]
fn x509_speculates_with_authenticate_and_falls_back() {
    let mut auth = authenticator("mongodb://h/?authMechanism=MONGODB-X509");
    let mut hello = doc! {};
    let speculation = auth.prepare_handshake(&mut hello, &nonce()).unwrap();
    assert_eq!(
        hello.get_document("speculativeAuthenticate").unwrap(),
        &doc! { "authenticate": 1, "mechanism": "MONGODB-X509", "db": "$external" }
    );
    let mut sent = 0;
    let mut run = |db: &str, command: Document| {
        assert_eq!(db, "$external");
        assert_eq!(
            command,
            doc! { "authenticate": 1, "mechanism": "MONGODB-X509" }
        );
        sent += 1;
        Ok(doc! { "ok": 1 })
    };
    let accepted =
        doc! { "ok": 1, "speculativeAuthenticate": { "dbname": "$external", "user": "CN=x" } };
    authenticate(&mut auth, &accepted, speculation, &mut run).unwrap();
    let speculation = auth.prepare_handshake(&mut doc! {}, &nonce()).unwrap();
    authenticate(&mut auth, &doc! { "ok": 1 }, speculation, &mut run).unwrap();
    assert_eq!(
        sent, 1,
        "only the hello without a speculative answer costs a command"
    );
}

#[test]
fn mechanisms_this_driver_cannot_run_are_refused_by_name() {
    let e =
        Authenticator::new(&credential("mongodb://u@h/?authMechanism=GSSAPI"), None).unwrap_err();
    assert!(e.to_string().contains("GSSAPI is not supported"), "{e}");
}

#[test]
fn a_user_without_a_password_is_refused_before_any_io() {
    let e = Authenticator::new(&credential("mongodb://alice@h/"), None).unwrap_err();
    assert!(e.to_string().contains("\"alice\" has no password"), "{e}");
    assert!(
        Authenticator::new(&credential("mongodb://h/?authMechanism=MONGODB-X509"), None).is_ok()
    );
}

#[test]
fn x509_needs_tls_and_a_client_certificate() {
    let auth = authenticator("mongodb://h/?authMechanism=MONGODB-X509");
    for (tls, certificate) in [(false, false), (true, false), (false, true)] {
        let e = auth.check_transport(tls, certificate).unwrap_err();
        assert!(e.to_string().contains("tlsCertificateKeyFile"), "{e}");
    }
    assert_eq!(auth.check_transport(true, true).unwrap(), None);
    let plain = authenticator("mongodb://u:p@h/?authMechanism=PLAIN");
    assert_eq!(
        plain.check_transport(false, false).unwrap(),
        Some(TransportWarning::PlainWithoutTls),
        "a warning, not an error"
    );
    assert_eq!(plain.check_transport(true, false).unwrap(), None);
}

#[test]
fn debug_output_never_shows_the_password() {
    let auth = authenticator("mongodb://user:s3cret@h/");
    assert!(!format!("{auth:?}").contains("s3cret"));
}

fn jwt_of(next: &Next) -> String {
    match next {
        Next::Send { db, command } => {
            assert_eq!(db, "$external");
            assert_eq!(command.get_str("mechanism"), Ok("MONGODB-OIDC"));
            let Some(Bson::Binary(b)) = command.get("payload") else {
                panic!("no payload: {command}")
            };
            let payload = Document::from_reader(b.bytes.as_slice()).unwrap();
            payload.get_str("jwt").unwrap().to_owned()
        }
        other => panic!("expected a saslStart, got {other:?}"),
    }
}

#[test]
fn oidc_speculates_with_the_cached_token_and_replaces_a_refused_one_once() {
    let mut auth = authenticator(
        "mongodb://h/?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test",
    );
    let done = doc! { "ok": 1, "conversationId": 1, "done": true, "payload": binary(Vec::new()) };
    // First socket: no token yet, so no speculation; the shell fetches one.
    let mut hello = doc! {};
    let speculation = auth.prepare_handshake(&mut hello, &nonce()).unwrap();
    assert!(hello.is_empty(), "no speculation without a cached token");
    let (mut conversation, next) = auth
        .begin(&doc! { "ok": 1 }, speculation, &nonce())
        .unwrap();
    assert!(matches!(next, Next::Fetch(Need::OidcToken)), "{next:?}");
    let next = auth
        .provide(&mut conversation, Secret::OidcToken("t1".into()))
        .unwrap();
    assert_eq!(jwt_of(&next), "t1");
    assert!(matches!(
        auth.step(&mut conversation, &done).unwrap(),
        Next::Done
    ));
    // Second socket: speculation with the cached token, which the server
    // accepts inside the hello.
    let mut hello = doc! {};
    let speculation = auth.prepare_handshake(&mut hello, &nonce()).unwrap();
    let speculative = hello.get_document("speculativeAuthenticate").unwrap();
    assert_eq!(speculative.get_str("db"), Ok("$external"));
    let reply = doc! { "ok": 1, "speculativeAuthenticate": done.clone() };
    let (_, next) = auth.begin(&reply, speculation, &nonce()).unwrap();
    assert!(matches!(next, Next::Done));
    // Third socket: the server ignores the speculation and refuses the
    // cached token (18): a fresh one is fetched, once.
    let speculation = auth.prepare_handshake(&mut doc! {}, &nonce()).unwrap();
    let (mut conversation, next) = auth
        .begin(&doc! { "ok": 1 }, speculation, &nonce())
        .unwrap();
    assert_eq!(jwt_of(&next), "t1");
    let refused = doc! { "ok": 0, "code": 18, "errmsg": "Authentication failed." };
    let next = auth.step(&mut conversation, &refused).unwrap();
    assert!(matches!(next, Next::Fetch(Need::OidcToken)), "{next:?}");
    let next = auth
        .provide(&mut conversation, Secret::OidcToken("t2".into()))
        .unwrap();
    assert_eq!(jwt_of(&next), "t2");
    let e = auth.step(&mut conversation, &refused).unwrap_err();
    assert!(e.to_string().contains("(code 18)"), "{e}");
    assert!(!e.to_string().contains("t2"));
}

/// The spec's server, but refusing a wrong proof as a real one does.
fn checking(sent: &mut Vec<Document>) -> impl FnMut(&str, Document) -> Result<Document> + '_ {
    move |_, command| {
        sent.push(command.clone());
        if command.contains_key("saslStart") {
            Ok(server_reply(SERVER_FIRST, false))
        } else if payload_text(&command) == CLIENT_FINAL {
            Ok(server_reply(SERVER_FINAL, true))
        } else {
            Ok(doc! { "ok": 0, "code": 18, "errmsg": "Authentication failed." })
        }
    }
}

const SPEC_URI: &str = "mongodb://user:pencil@h/?authMechanism=SCRAM-SHA-256";
const BINDING: Binding = Binding([7; 32]);

/// One process's run: a fresh authenticator given the file's entries,
/// authenticating `sockets` sockets side by side, as a scan's members do
/// (each takes a step before any takes the next), and each once more
/// after refused stored keys, as the shell does; returns the first
/// failure, what it would write and how often PBKDF2 ran.
fn process_run_on(
    uri: &str,
    stored: Vec<SealedScramKeys>,
    sockets: usize,
) -> (Result<()>, Option<Vec<SealedScramKeys>>, usize) {
    let mut auth = authenticator(uri);
    auth.use_state_file(BINDING, stored);
    let mut sent = Vec::new();
    let mut run = checking(&mut sent);
    let mut live: Vec<(Conversation, Result<Next>)> = (0..sockets)
        .map(|_| {
            let (conversation, next) = auth
                .begin(&doc! { "ok": 1 }, Speculation::None, &nonce())
                .unwrap();
            (conversation, Ok(next))
        })
        .collect();
    while live
        .iter()
        .any(|(_, next)| matches!(next, Ok(Next::Send { .. })))
    {
        for (conversation, next) in &mut live {
            if let Ok(Next::Send { db, command }) = std::mem::replace(next, Ok(Next::Done)) {
                *next = run(&db, command).and_then(|answer| auth.step(conversation, &answer));
            }
        }
    }
    let mut first_failure = Ok(());
    for (conversation, next) in live {
        let (outcome, conversation) = match next {
            Err(_) if auth.stored_keys_refused(&conversation) => converse(&mut auth, &mut run),
            next => (next.map(|_| ()), conversation),
        };
        match outcome {
            Ok(()) => auth
                .keys_accepted(&conversation, [9; state_file::NONCE_BYTES])
                .unwrap(),
            Err(error) => first_failure = first_failure.and(Err(error)),
        }
    }
    let written = auth.take_state_change().map(|(binding, sealed)| {
        assert_eq!(binding, BINDING);
        sealed
    });
    (first_failure, written, auth.derivations())
}

/// [`process_run_on`] one socket.
fn process_run(
    uri: &str,
    stored: Vec<SealedScramKeys>,
) -> (Result<()>, Option<Vec<SealedScramKeys>>, usize) {
    process_run_on(uri, stored, 1)
}

#[test]
fn a_second_process_authenticates_from_the_state_file_without_pbkdf2() {
    let (outcome, written, derivations) = process_run(SPEC_URI, Vec::new());
    outcome.unwrap();
    assert_eq!(derivations, 1);
    let written = written.expect("the first process writes its keys");
    assert_eq!(written.len(), 1);

    let (outcome, rewritten, derivations) = process_run(SPEC_URI, written);
    outcome.expect("the unsealed keys give the spec's proof");
    assert_eq!(derivations, 0, "no PBKDF2 in the second process");
    assert_eq!(rewritten, None, "nothing changed, nothing written");
}

#[test]
fn stored_keys_under_another_password_fail_and_are_dropped() {
    let (_, written, _) = process_run(SPEC_URI, Vec::new());
    // A copy of the file used with another password: the keys unseal to
    // garbage, the server refuses, PBKDF2 runs and is refused too.
    let (outcome, rewritten, derivations) = process_run(
        "mongodb://user:crayon@h/?authMechanism=SCRAM-SHA-256",
        written.unwrap(),
    );
    let error = outcome.unwrap_err();
    assert!(
        matches!(*error.kind, ErrorKind::Authentication { .. }),
        "{error}"
    );
    assert_eq!(derivations, 1, "fell back to PBKDF2");
    assert_eq!(rewritten, Some(Vec::new()), "the refused entry is dropped");
}

#[test]
fn tampered_stored_keys_fall_back_to_pbkdf2_and_are_replaced() {
    let (_, written, _) = process_run(SPEC_URI, Vec::new());
    let mut tampered = written.unwrap();
    tampered[0].sealed_bytes_mut()[3] ^= 0x40;
    let (outcome, rewritten, derivations) = process_run(SPEC_URI, tampered.clone());
    outcome.expect("the fallback authenticates");
    assert_eq!(derivations, 1);
    let rewritten = rewritten.expect("the good keys replace the tampered ones");
    assert_eq!(rewritten.len(), 1);
    assert_ne!(rewritten, tampered);
    let (outcome, _, derivations) = process_run(SPEC_URI, rewritten);
    outcome.unwrap();
    assert_eq!(derivations, 0);
}

#[test]
fn a_wrong_server_key_fails_the_signature_check_and_drops_the_entry() {
    let (_, written, _) = process_run(SPEC_URI, Vec::new());
    let mut tampered = written.unwrap();
    // The last byte belongs to ServerKey: the server accepts the proof,
    // the client refuses the server's signature, then retries with PBKDF2.
    let last = tampered[0].sealed_bytes_mut().len() - 1;
    tampered[0].sealed_bytes_mut()[last] ^= 1;
    let (outcome, rewritten, derivations) = process_run(SPEC_URI, tampered);
    outcome.expect("the fallback authenticates");
    assert_eq!(derivations, 1);
    assert_eq!(rewritten.map(|r| r.len()), Some(1));
}

#[test]
fn sockets_side_by_side_derive_and_seal_their_keys_once() {
    let (outcome, written, derivations) = process_run_on(SPEC_URI, Vec::new(), 3);
    outcome.unwrap();
    assert_eq!(derivations, 1, "the second and third socket reuse the keys");
    assert_eq!(written.map(|w| w.len()), Some(1));
}

#[test]
fn stored_keys_refused_on_sockets_side_by_side_are_dropped_and_every_socket_retries() {
    let (_, written, _) = process_run(SPEC_URI, Vec::new());
    let mut tampered = written.unwrap();
    tampered[0].sealed_bytes_mut()[3] ^= 0x40;
    // All three sockets prove with the tampered keys before the first
    // refusal comes back: each refusal is the stored keys', so each socket
    // starts over, and PBKDF2 runs once for the three.
    let (outcome, rewritten, derivations) = process_run_on(SPEC_URI, tampered.clone(), 3);
    outcome.expect("every socket authenticates on its second try");
    assert_eq!(derivations, 1);
    let rewritten = rewritten.expect("the good keys replace the tampered ones");
    assert_eq!(rewritten.len(), 1);
    assert_ne!(rewritten, tampered);
    let (outcome, _, derivations) = process_run_on(SPEC_URI, rewritten, 3);
    outcome.unwrap();
    assert_eq!(derivations, 0);
}
