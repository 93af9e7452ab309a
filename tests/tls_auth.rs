//! TLS and authentication against SecantusDB: certificates generated here
//! (rcgen), users created on a provisioned data directory before the server
//! restarts with `--auth`, and a counting TCP proxy to see how many sockets
//! and messages the driver uses.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "tls_auth/state_file.rs"]
mod state_file;
mod support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use bson::{doc, Document};
use mongo_inline::{Client, ErrorKind};
use support::server::{ServerOptions, TestServer};
use support::tls::encoded;
use support::tls::{certs, plain_auth_server, tls_args, tls_auth_server, PASSWORD};

/// A TCP proxy that counts the sockets it accepts and the wire messages
/// the client sends through it (readable only without TLS).
struct CountingProxy {
    port: u16,
    connections: Arc<AtomicUsize>,
    messages: Arc<AtomicUsize>,
}

impl CountingProxy {
    fn start(upstream: u16) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let messages = Arc::new(AtomicUsize::new(0));
        let (c, m) = (connections.clone(), messages.clone());
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                c.fetch_add(1, Ordering::SeqCst);
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    return;
                };
                let (client_read, server_write) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                let m = m.clone();
                thread::spawn(move || forward_counting(client_read, server_write, &m));
                thread::spawn(move || {
                    let (mut from, mut to) = (server, client);
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        CountingProxy {
            port,
            connections,
            messages,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn messages(&self) -> usize {
        self.messages.load(Ordering::SeqCst)
    }
}

/// Copies client bytes to the server; without TLS, counts each message by
/// its length prefix.
fn forward_counting(mut from: TcpStream, mut to: TcpStream, messages: &AtomicUsize) {
    let mut pending: Vec<u8> = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // Counted before forwarding: once the server has the message and
        // replies, the client may read the count at once.
        pending.extend_from_slice(&buffer[..n]);
        while pending.len() >= 4 {
            let len = i32::from_le_bytes(pending[..4].try_into().unwrap()).max(4) as usize;
            if pending.len() < len {
                break;
            }
            pending.drain(..len);
            messages.fetch_add(1, Ordering::SeqCst);
        }
        if to.write_all(&buffer[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Both);
}

fn ping(uri: &str) -> mongo_inline::Result<Document> {
    Client::with_uri_str(uri)?
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
}

fn scram_uri(port: u16, user: &str, query: &str) -> String {
    format!(
        "mongodb://{user}:{}@127.0.0.1:{port}/?serverSelectionTimeoutMS=5000{query}",
        encoded(PASSWORD)
    )
}

#[test]
fn scram_sha_256_and_sha_1_authenticate() {
    let port = plain_auth_server().port();
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-1"] {
        let uri = scram_uri(port, "alice", &format!("&authMechanism={mechanism}"));
        let client = Client::with_uri_str(&uri).unwrap();
        let coll = client.database("scram").collection::<Document>("c");
        coll.insert_one(doc! { "by": mechanism })
            .run()
            .unwrap_or_else(|e| panic!("{mechanism}: {e}"));
    }
    // Negotiated: alice has both (SHA-256 is chosen), legacy only SHA-1.
    ping(&scram_uri(port, "alice", "")).unwrap();
    ping(&scram_uri(port, "legacy", "")).unwrap();
}

#[test]
fn without_credentials_the_server_refuses_commands() {
    let port = plain_auth_server().port();
    let e = Client::with_uri_str(format!("mongodb://127.0.0.1:{port}/"))
        .unwrap()
        .database("scram")
        .run_command(doc! { "find": "c" })
        .run()
        .unwrap_err();
    assert_eq!(e.code(), Some(13), "{e}");
}

#[test]
fn a_wrong_password_is_an_authentication_error_without_the_password() {
    let port = plain_auth_server().port();
    let started = Instant::now();
    let uri = format!(
        "mongodb://alice:not-{}@127.0.0.1:{port}/?serverSelectionTimeoutMS=20000",
        encoded(PASSWORD)
    );
    let client = Client::with_uri_str(&uri).unwrap();
    let ping = || {
        client
            .database("admin")
            .run_command(doc! { "ping": 1 })
            .run()
    };
    let e = ping().unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Authentication { .. }),
        "{e:?}"
    );
    // No cooldown: the next operation tries the server again at once (a
    // server in its cooldown would fail selection without a check).
    let again = ping().unwrap_err();
    assert!(
        matches!(again.kind(), ErrorKind::Authentication { .. }),
        "{again:?}"
    );
    assert!(!e.is_network_error());
    let text = format!("{e} {e:?}");
    assert!(
        text.contains("SCRAM-SHA-256") && text.contains("alice"),
        "{text}"
    );
    assert!(!text.contains("pencil"), "{text}");
    // Reported at once, not after serverSelectionTimeoutMS.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn speculative_authentication_saves_a_round_trip() {
    let proxy = CountingProxy::start(plain_auth_server().port());
    let count = |query: &str| {
        let before = proxy.messages();
        let uri = scram_uri(proxy.port, "alice", query);
        let client = Client::with_uri_str(&uri).unwrap();
        client
            .database("admin")
            .run_command(doc! { "ping": 1 })
            .run()
            .unwrap();
        // Counted before the client closes: closing adds an endSessions,
        // which must have passed before the next count starts.
        let sent = proxy.messages() - before;
        drop(client);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while proxy.messages() < before + sent + 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        sent
    };
    // hello(+speculative saslStart), saslContinue, ping.
    assert_eq!(count("&authMechanism=SCRAM-SHA-256"), 3);
    // SCRAM-SHA-1 is named, so the speculation is SHA-1 too.
    assert_eq!(count("&authMechanism=SCRAM-SHA-1"), 3);
    // A user that only has SHA-1: the SHA-256 speculation fails, the
    // negotiated conversation takes saslStart + saslContinue.
    let before = proxy.messages();
    let client = Client::with_uri_str(scram_uri(proxy.port, "legacy", "")).unwrap();
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    assert_eq!(proxy.messages() - before, 4);
}

#[test]
fn auth_source_names_the_users_database() {
    let port = plain_auth_server().port();
    let uri = scram_uri(port, "bob", "&authSource=app");
    let client = Client::with_uri_str(&uri).unwrap();
    let coll = client.database("app").collection::<Document>("things");
    coll.insert_one(doc! { "x": 1 }).run().unwrap();
    // The URI's database is the default authSource.
    let uri = format!(
        "mongodb://bob:{}@127.0.0.1:{port}/app?serverSelectionTimeoutMS=5000",
        encoded(PASSWORD)
    );
    ping(&uri).unwrap();
    // Against admin, bob does not exist.
    let e = ping(&scram_uri(port, "bob", "")).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Authentication { .. }), "{e}");
}

fn tls_uri(host: &str, port: u16, query: &str) -> String {
    format!(
        "mongodb://alice:{}@{host}:{port}/?tls=true&serverSelectionTimeoutMS=5000{query}",
        encoded(PASSWORD)
    )
}

#[test]
fn tls_with_the_trusted_ca_uses_one_socket_for_scan_and_operations() {
    let proxy = CountingProxy::start(tls_auth_server().port());
    let ca = certs().path("ca.pem");
    let client = Client::with_uri_str(tls_uri(
        "localhost",
        proxy.port,
        &format!("&tlsCAFile={ca}"),
    ))
    .unwrap();
    let coll = client.database("tlsdb").collection::<Document>("c");
    for i in 0..3 {
        coll.insert_one(doc! { "i": i }).run().unwrap();
    }
    assert_eq!(
        coll.find_one(doc! { "i": 2 })
            .run()
            .unwrap()
            .unwrap()
            .get_i32("i"),
        Ok(2)
    );
    assert_eq!(
        proxy.connections(),
        1,
        "the scan's TLS socket carries the operations"
    );
}

#[test]
fn an_unknown_ca_is_a_clear_tls_error() {
    let port = tls_auth_server().port();
    let started = Instant::now();
    let other = certs().path("other-ca.pem");
    for query in [format!("&tlsCAFile={other}"), String::new()] {
        let e = ping(&tls_uri("localhost", port, &query)).unwrap_err();
        assert!(matches!(e.kind(), ErrorKind::Tls { .. }), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("unknown certificate authority"), "{text}");
        assert!(text.contains(&format!("localhost:{port}")), "{text}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_wrong_host_name_fails_unless_allowed() {
    let port = tls_auth_server().port();
    let ca = certs().path("ca.pem");
    let e = ping(&tls_uri("127.0.0.1", port, &format!("&tlsCAFile={ca}"))).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Tls { .. }), "{e:?}");
    assert!(e.to_string().contains("host name mismatch"), "{e}");
    assert!(e.to_string().contains("localhost"), "{e}");
    ping(&tls_uri(
        "127.0.0.1",
        port,
        &format!("&tlsCAFile={ca}&tlsAllowInvalidHostnames=true"),
    ))
    .unwrap();
    // The chain is still checked when only host names are let through.
    let other = certs().path("other-ca.pem");
    let e = ping(&tls_uri(
        "127.0.0.1",
        port,
        &format!("&tlsCAFile={other}&tlsAllowInvalidHostnames=true"),
    ))
    .unwrap_err();
    assert!(
        e.to_string().contains("unknown certificate authority"),
        "{e}"
    );
    for relaxed in ["&tlsInsecure=true", "&tlsAllowInvalidCertificates=true"] {
        ping(&tls_uri(
            "127.0.0.1",
            port,
            &format!("&tlsCAFile={other}{relaxed}"),
        ))
        .unwrap_or_else(|e| panic!("{relaxed}: {e}"));
    }
    // OCSP options are accepted (and fetch nothing).
    ping(&tls_uri(
        "localhost",
        port,
        &format!("&tlsCAFile={ca}&tlsDisableOCSPEndpointCheck=true"),
    ))
    .unwrap();
}

#[test]
fn a_client_certificate_is_accepted_and_authenticates_as_x509() {
    let server = TestServer::with_options(ServerOptions {
        standalone: true,
        extra_args: tls_args(true),
    });
    let ca = certs().path("ca.pem");
    let client_pem = certs().path("client.pem");
    let base = format!(
        "mongodb://localhost:{}/?tls=true&tlsCAFile={ca}&serverSelectionTimeoutMS=3000",
        server.port()
    );
    let e = ping(&base).unwrap_err();
    assert!(!e.to_string().is_empty());
    ping(&format!("{base}&tlsCertificateKeyFile={client_pem}")).unwrap();

    // MONGODB-X509 against the --auth server, with speculative authenticate.
    let port = tls_auth_server().port();
    let uri = format!(
        "mongodb://localhost:{port}/?tls=true&tlsCAFile={ca}&tlsCertificateKeyFile={client_pem}\
         &authMechanism=MONGODB-X509&serverSelectionTimeoutMS=5000"
    );
    let client = Client::with_uri_str(&uri).unwrap();
    client
        .database("x509db")
        .collection::<Document>("c")
        .insert_one(doc! { "x": 1 })
        .run()
        .unwrap();
    let e = client
        .database("other")
        .run_command(doc! { "find": "c" })
        .run()
        .unwrap_err();
    assert_eq!(
        e.code(),
        Some(13),
        "the X.509 user has only its own roles: {e}"
    );
    // Without a certificate there is nothing to authenticate with: an
    // error at construction, before any socket opens.
    let e = Client::with_uri_str(format!(
        "mongodb://localhost:{port}/?tls=true&tlsCAFile={ca}&authMechanism=MONGODB-X509"
    ))
    .unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::InvalidArgument { .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("MONGODB-X509"), "{e}");
    // A certificate the server has no user for is refused by the server.
    let e = ping(&format!(
        "mongodb://localhost:{port}/?tls=true&tlsCAFile={ca}&tlsCertificateKeyFile={}\
         &authMechanism=MONGODB-X509&serverSelectionTimeoutMS=5000",
        certs().path("stranger.pem")
    ))
    .unwrap_err();
    assert!(
        matches!(e.kind(), ErrorKind::Authentication { .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("MONGODB-X509"), "{e}");
}

#[test]
fn x509_over_srv_authenticates_against_external_whatever_the_txt_record_says() {
    use support::dns::{a, srv, txt, DnsServer};
    // Atlas's TXT record carries authSource=admin for every client.
    let host = "cluster0.test.build.10gen.cc";
    let member = "localhost.test.build.10gen.cc";
    let port = tls_auth_server().port();
    let dns = DnsServer::start(vec![
        srv(&format!("_mongodb._tcp.{host}"), port, member, 300),
        a(member, std::net::Ipv4Addr::LOCALHOST),
        txt(host, "authSource=admin"),
    ]);
    let uri = format!(
        "mongodb+srv://{host}/?tlsCAFile={}&tlsCertificateKeyFile={}&tlsAllowInvalidHostnames=true\
         &authMechanism=MONGODB-X509&serverSelectionTimeoutMS=5000",
        certs().path("ca.pem"),
        certs().path("client.pem")
    );
    let in_code = mongo_inline::ClientOptions::builder()
        .name_servers(vec![dns.address()])
        .build();
    let options = mongo_inline::ClientOptions::parse_with(&uri, in_code).unwrap();
    let client = Client::with_options(options).unwrap();
    client
        .database("x509db")
        .collection::<Document>("c")
        .insert_one(doc! { "over_srv": true })
        .run()
        .unwrap();
}

#[test]
fn an_encrypted_pkcs8_client_key_is_decrypted_with_its_password() {
    use support::tls::KEY_PASSWORD;
    let port = tls_auth_server().port();
    let base = format!(
        "mongodb://localhost:{port}/?tlsCAFile={}&tlsCertificateKeyFile={}\
         &authMechanism=MONGODB-X509&serverSelectionTimeoutMS=5000",
        certs().path("ca.pem"),
        certs().path("client-encrypted.pem")
    );
    let with_password =
        |password: &str| format!("{base}&tlsCertificateKeyFilePassword={}", encoded(password));
    let client = Client::with_uri_str(with_password(KEY_PASSWORD)).unwrap();
    client
        .database("x509db")
        .collection::<Document>("c")
        .insert_one(doc! { "encrypted_key": true })
        .run()
        .unwrap();
    for (uri, expected) in [
        (with_password("wrong horse"), "cannot be decrypted"),
        (
            format!("mongodb://localhost:{port}/?tls=true&tlsCAFile=/nonexistent/ca.pem"),
            "cannot be read",
        ),
        (
            base.clone(),
            "give its password in tlsCertificateKeyFilePassword",
        ),
    ] {
        let e = Client::with_uri_str(&uri).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::InvalidTlsConfig { .. }),
            "{e:?}"
        );
        assert!(e.to_string().contains(expected), "{e}");
        assert!(!e.to_string().contains("wrong horse"), "{e}");
    }
    // A password for a key that has none is a mistake, not a no-op.
    let e = Client::with_uri_str(format!(
        "mongodb://localhost:{port}/?tlsCertificateKeyFile={}&tlsCertificateKeyFilePassword=x",
        certs().path("client.pem")
    ))
    .unwrap_err();
    assert!(e.to_string().contains("is not encrypted"), "{e}");
}

/// `system_roots` trusts the system's store, here `SSL_CERT_FILE`: the test
/// runs itself again in a child process with the variable set (setting it
/// in this process would race the other tests' threads).
#[test]
fn system_roots_are_trusted_only_on_request() {
    const NAME: &str = "system_roots_are_trusted_only_on_request";
    // The child talks to this process's server, whose CA this process made.
    const PORT: &str = "MONGO_INLINE_TEST_SYSTEM_ROOTS_PORT";
    let Some(port) = std::env::var_os(PORT) else {
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", NAME, "--test-threads=1"])
            .env("SSL_CERT_FILE", certs().path("ca.pem"))
            .env_remove("SSL_CERT_DIR")
            .env(PORT, tls_auth_server().port().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "the child run failed: {status}");
        return;
    };
    let port: u16 = port.to_str().unwrap().parse().unwrap();
    let uri = tls_uri("localhost", port, "&serverSelectionTimeoutMS=3000");
    let client_with = |system_roots: Option<bool>| {
        let mut tls = mongo_inline::options::TlsOptions::default();
        tls.system_roots = system_roots;
        let in_code = mongo_inline::ClientOptions::builder().tls(tls).build();
        Client::with_options(mongo_inline::ClientOptions::parse_with(&uri, in_code).unwrap())
            .unwrap()
    };
    let ping = |client: &Client| {
        client
            .database("admin")
            .run_command(doc! { "ping": 1 })
            .run()
    };
    // The default trusts the webpki roots only, whatever SSL_CERT_FILE says.
    let e = ping(&client_with(None)).unwrap_err();
    assert!(
        e.to_string().contains("unknown certificate authority"),
        "{e}"
    );
    ping(&client_with(Some(true))).unwrap();
}

/// A TCP server without TLS that answers whatever comes first with
/// `reply` (closing the socket when `reply` is empty), then holds the
/// socket open for a while.
fn plain_peer(reply: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            thread::spawn(move || {
                let mut buffer = [0u8; 512];
                let _ = stream.read(&mut buffer);
                if reply.is_empty() {
                    return;
                }
                let _ = stream.write_all(reply);
                thread::sleep(Duration::from_secs(15));
            });
        }
    });
    port
}

#[test]
fn a_tls_client_meeting_a_plain_server_fails_at_once_saying_so() {
    // An OP_MSG header: what a MongoDB server without TLS might send back.
    let plain_reply: &[u8] = &[45, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0xdd, 7, 0, 0];
    for (reply, expected) in [
        (plain_reply, "does not speak TLS"),
        (&[][..], "may not speak TLS"),
    ] {
        let port = plain_peer(reply);
        let started = Instant::now();
        let e = ping(&format!(
            "mongodb://127.0.0.1:{port}/?tls=true&connectTimeoutMS=10000\
             &serverSelectionTimeoutMS=1000"
        ))
        .unwrap_err();
        assert!(e.to_string().contains(expected), "{e}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn a_plain_client_reset_by_a_tls_server_is_told_it_may_require_tls() {
    let port = tls_auth_server().port();
    // A scan's overlapped handshake, and the blocking one a load-balanced
    // client opens for its operation: each adds the hint on its own path.
    for options in ["", "&loadBalanced=true"] {
        let e = ping(&format!(
            "mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=1000{options}"
        ))
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("the server may require TLS (add tls=true"),
            "{options}: {e}"
        );
    }
}

/// Every log line of every target, at every level.
struct AllLogs {
    lines: std::sync::Mutex<Vec<String>>,
}

impl log::Log for AllLogs {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        self.lines.lock().unwrap().push(record.args().to_string());
    }
    fn flush(&self) {}
}

static ALL_LOGS: AllLogs = AllLogs {
    lines: std::sync::Mutex::new(Vec::new()),
};

#[test]
fn secrets_reach_no_event_log_or_error() {
    let _ = log::set_logger(&ALL_LOGS);
    log::set_max_level(log::LevelFilter::Trace);
    let port = plain_auth_server().port();
    let (client, recorder) = support::events::recorded_client(&scram_uri(port, "alice", ""));
    client
        .database("secrets")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    // A user's own saslStart through run_command is redacted too.
    let _ = client.database("admin").run_command(doc! {
        "saslStart": 1, "mechanism": "PLAIN",
        "payload": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: format!("\0alice\0{PASSWORD}").into_bytes() },
    }).run();
    let wrong = format!(
        "mongodb://alice:wrong-{}@127.0.0.1:{port}/?serverSelectionTimeoutMS=5000",
        encoded(PASSWORD)
    );
    let (wrong_client, wrong_recorder) = support::events::recorded_client(&wrong);
    let error = wrong_client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap_err();
    let mut seen = format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{error}\n{error:?}\n{client:?}\n{:?}",
        recorder.sdam(),
        recorder.commands(),
        wrong_recorder.sdam(),
        wrong_recorder.commands(),
        mongo_inline::ClientOptions::parse(&wrong).run().unwrap(),
    );
    seen.push_str(&ALL_LOGS.lines.lock().unwrap().join("\n"));
    for secret in [PASSWORD, "pencil", "speculativeAuthenticate", "c=biws"] {
        assert!(!seen.contains(secret), "{secret:?} leaked:\n{seen}");
    }
    assert!(
        seen.contains("ServerHeartbeatSucceeded"),
        "the events were recorded"
    );
}

/// The retryable reads spec: a handshake error, "a network error ... when
/// running the hello or saslContinue commands", is retried once. Here the
/// scan's new socket, the one the operation would use, answers its hello
/// and is then closed in the authentication step: the check succeeded, the
/// server becomes Unknown (SDAM, authentication step), and the operation
/// retries on a new socket. A command that is not retryable fails with the
/// handshake's network error, not with "no suitable server".
#[test]
fn a_network_error_while_authenticating_is_the_operations_retryable_error() {
    let port = plain_auth_server().port();
    let app = "auth-step-network-error";
    let uri = scram_uri(
        port,
        "alice",
        &format!("&directConnection=true&appName={app}"),
    );
    let admin = Client::with_uri_str(scram_uri(port, "alice", "")).unwrap();
    let fail_next_sasl_continue = || {
        admin
            .database("admin")
            .run_command(doc! {
                "configureFailPoint": "failCommand", "mode": { "times": 1 },
                "data": { "failCommands": ["saslContinue"], "closeConnection": true, "appName": app },
            })
            .run()
            .unwrap();
    };

    fail_next_sasl_continue();
    let (client, recorder) = support::events::recorded_client(&uri);
    let count = client
        .database("auth_step")
        .collection::<Document>("c")
        .count_documents(doc! {})
        .run();
    assert_eq!(count.unwrap(), 0);
    let commands: Vec<String> = recorder
        .commands()
        .iter()
        .map(|e| format!("{e:?}").split('(').next().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        commands,
        ["Started", "Succeeded"],
        "one attempt reached the server"
    );
    let types: Vec<String> = recorder
        .sdam()
        .iter()
        .filter_map(|e| match e {
            mongo_inline::event::sdam::SdamEvent::ServerDescriptionChanged(e) => {
                Some(format!("{:?}", e.new_description.server_type))
            }
            mongo_inline::event::sdam::SdamEvent::ServerHeartbeatFailed(e) => {
                panic!("the hello was answered, yet a heartbeat failed: {e:?}")
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        types,
        ["Standalone", "Unknown", "Standalone"],
        "the hello's reply, the failed authentication step, the retry's hello"
    );

    fail_next_sasl_continue();
    let error = Client::with_uri_str(&uri)
        .unwrap()
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::Io(_)),
        "runCommand is not retried, and its error is the handshake's: {error:?}"
    );
}

/// A TLS server in replica-set mode (setName "secantus"), no `--auth`.
fn tls_replica_set_member() -> &'static TestServer {
    static SERVER: OnceLock<TestServer> = OnceLock::new();
    SERVER.get_or_init(|| {
        TestServer::with_options(ServerOptions {
            standalone: false,
            extra_args: tls_args(false),
        })
    })
}

/// A cold ping of a TLS replica set seeded with `silent` members that
/// accept connections and never answer (no TLS handshake either).
fn cold_tls_ping_with_silent_members(silent: usize) -> Duration {
    let listeners: Vec<TcpListener> = (0..silent)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let mut seeds: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    seeds.push(format!("localhost:{}", tls_replica_set_member().port()));
    let uri = format!(
        "mongodb://{}/?replicaSet=secantus&tls=true&tlsCAFile={}&tlsAllowInvalidHostnames=true\
         &connectTimeoutMS=1000&serverSelectionTimeoutMS=4000",
        seeds.join(","),
        certs().path("ca.pem")
    );
    let started = Instant::now();
    ping(&uri).unwrap();
    let elapsed = started.elapsed();
    drop(listeners);
    elapsed
}

/// With the primary among the seeds, TLS handshakes to silent members and
/// to the primary share one wait. (Checked one by one, a scan that happens
/// to reach the primary first drops the silent members unchecked: the
/// next test shows the cost whatever the order.)
#[test]
fn five_silent_tls_members_cost_the_same_as_one() {
    tls_replica_set_member();
    let one = cold_tls_ping_with_silent_members(1);
    let five = cold_tls_ping_with_silent_members(5);
    println!("cold TLS ping: 1 silent member {one:?}, 5 silent members {five:?}");
    // One connectTimeoutMS (1 s) plus a few round trips; TLS handshakes
    // checked one after another would cost one connectTimeoutMS each.
    assert!(five < Duration::from_millis(1_800), "{five:?}");
    assert!(
        five < one + Duration::from_millis(500),
        "five cost {five:?}, one {one:?}"
    );
}

#[test]
fn a_scan_of_silent_tls_members_costs_one_connect_timeout() {
    // Nothing answers, so nothing removes a member from the scan: each is
    // checked whatever the scan's order.
    let listeners: Vec<TcpListener> = (0..5)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let seeds: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    let uri = format!(
        "mongodb://{}/?tls=true&tlsCAFile={}&connectTimeoutMS=1000\
         &serverSelectionTimeoutMS=4000&serverSelectionTryOnce=true",
        seeds.join(","),
        certs().path("ca.pem")
    );
    let started = Instant::now();
    let error = ping(&uri).unwrap_err();
    let elapsed = started.elapsed();
    println!("one scan of 5 silent TLS members: {elapsed:?} ({error})");
    assert!(
        error.to_string().contains("TLS handshake"),
        "the members timed out in the TLS handshake: {error}"
    );
    assert!(elapsed < Duration::from_millis(1_800), "{elapsed:?}");
    drop(listeners);
}

/// The members a scan connects to authenticate side by side, as their
/// hellos go: with every reply delayed, each member's saslStart arrives
/// before any member's saslContinue. One member after another, the first
/// member's whole conversation would come before the next one's saslStart
/// (three members: 1 + 3 × 2 delayed round trips instead of 1 + 2).
#[test]
fn a_scans_members_authenticate_side_by_side() {
    let sim = support::sim::Simulator::mongos(plain_auth_server(), 3);
    for i in 0..3 {
        sim.delay_replies(i, Duration::from_millis(100));
    }
    let hosts: Vec<String> = (0..3).map(|i| sim.address(i)).collect();
    let uri = format!(
        "mongodb://alice:{}@{}/?authMechanism=SCRAM-SHA-256&serverSelectionTimeoutMS=5000",
        encoded(PASSWORD),
        hosts.join(",")
    );
    ping(&uri).unwrap();
    let order = sim.arrival_order();
    let at = |name: &str| -> Vec<(usize, usize)> {
        order
            .iter()
            .enumerate()
            .filter(|(_, (_, command))| command == name)
            .map(|(position, (member, _))| (position, *member))
            .collect()
    };
    let (starts, continues) = (at("saslStart"), at("saslContinue"));
    let mut started: Vec<usize> = starts.iter().map(|(_, member)| *member).collect();
    started.sort();
    assert_eq!(
        started,
        vec![0, 1, 2],
        "every member authenticates: {order:?}"
    );
    let last_start = starts.iter().map(|(position, _)| *position).max().unwrap();
    let first_continue = continues
        .iter()
        .map(|(position, _)| *position)
        .min()
        .unwrap();
    assert!(
        last_start < first_continue,
        "a member's conversation waited for another's: {order:?}"
    );
}
