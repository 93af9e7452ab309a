//! The state file (issue 41) against a TLS + SCRAM-SHA-256 server: a new
//! client skips PBKDF2, and each security rule holds end to end.
//!
//! Whether a client ran PBKDF2 shows in the file: a client that derived
//! keys seals them under a fresh nonce and rewrites its entry, one that
//! unsealed them from the file leaves the file's bytes as they were.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bson::doc;
use mongo_inline::event::sdam::SdamEvent;
use mongo_inline::options::ClientOptions;
use mongo_inline::unversioned::{state_file_chains, state_file_entries};
use mongo_inline::{Client, ErrorKind};

use crate::support::sim::Simulator;
use crate::support::tls::{certs, encoded, plain_auth_server, tls_auth_server, PASSWORD};

/// A directory of this test's own (mode 0700), removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("target/test-servers")
            .join(format!("state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        Scratch(dir)
    }

    fn file(&self) -> PathBuf {
        self.0.join("mongo-inline.state")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// alice on the shared TLS + SCRAM server; `query` varies the connection
/// string (and with it the entries' binding).
fn uri(password: &str, query: &str) -> String {
    format!(
        "mongodb://alice:{}@localhost:{}/?tls=true&tlsCAFile={}&serverSelectionTimeoutMS=5000{query}",
        encoded(password),
        tls_auth_server().port(),
        certs().path("ca.pem")
    )
}

const SHA_256: &str = "&authMechanism=SCRAM-SHA-256";

fn client(uri: &str, state_file: &Path) -> mongo_inline::Result<Client> {
    let code = ClientOptions::builder()
        .state_file(state_file.to_path_buf())
        .build();
    Client::with_options(ClientOptions::parse_with(uri, code)?)
}

fn ping(uri: &str, state_file: &Path) -> mongo_inline::Result<()> {
    client(uri, state_file)?
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .map(drop)
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap()
}

#[test]
fn a_new_client_starts_from_the_state_file_which_never_holds_the_password() {
    let scratch = Scratch::new("warm");
    let file = scratch.file();
    ping(&uri(PASSWORD, SHA_256), &file).unwrap();
    let first = read(&file);
    assert_eq!(state_file_entries(&first), Ok(1));
    assert_eq!(state_file_chains(&first), Ok(1), "the verified chain");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "created 0600");
    for secret in [PASSWORD.to_string(), encoded(PASSWORD)] {
        let needle = secret.as_bytes();
        assert!(
            !first.windows(needle.len()).any(|w| w == needle),
            "the password is in the file"
        );
    }
    let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
    let written = inode();
    ping(&uri(PASSWORD, SHA_256), &file).unwrap();
    assert_eq!(read(&file), first, "the second client ran no PBKDF2");
    // Every write renames a new file into place: the same inode means the
    // second client wrote nothing, so it verified no chain again either.
    assert_eq!(inode(), written, "the second client rewrote the file");
}

#[test]
fn another_connection_string_never_reads_the_entries() {
    let scratch = Scratch::new("binding");
    let file = scratch.file();
    ping(&uri(PASSWORD, SHA_256), &file).unwrap();
    // Negotiated rather than named mechanism, another authSource spelling:
    // other connection strings, each with an entry of its own.
    ping(&uri(PASSWORD, ""), &file).unwrap();
    ping(&uri(PASSWORD, "&authSource=admin"), &file).unwrap();
    let after = read(&file);
    assert_eq!(
        state_file_entries(&after),
        Ok(3),
        "the first entry was kept"
    );
    for query in [SHA_256, "", "&authSource=admin"] {
        ping(&uri(PASSWORD, query), &file).unwrap();
    }
    assert_eq!(read(&file), after, "each found its own entry");
}

#[test]
fn a_copied_file_authenticates_nobody_without_the_password() {
    let original = Scratch::new("copy-from");
    ping(&uri(PASSWORD, SHA_256), &original.file()).unwrap();
    let other = Scratch::new("copy-to");
    std::fs::copy(original.file(), other.file()).unwrap();
    let error = ping(&uri("not-the-password", SHA_256), &other.file()).unwrap_err();
    assert!(
        matches!(*error.kind, ErrorKind::Authentication { .. }),
        "{error}"
    );
    assert_eq!(
        state_file_entries(&read(&other.file())),
        Ok(0),
        "the refused entry is dropped"
    );
}

#[test]
fn a_tampered_entry_fails_over_to_pbkdf2_and_is_replaced() {
    let scratch = Scratch::new("tampered");
    let file = scratch.file();
    ping(&uri(PASSWORD, SHA_256), &file).unwrap();
    let bytes = tamper_with_the_last_entry(&file);

    ping(&uri(PASSWORD, SHA_256), &file).expect("the fallback to PBKDF2 authenticates");
    let replaced = read(&file);
    assert_ne!(replaced, bytes, "the tampered entry was replaced");
    ping(&uri(PASSWORD, SHA_256), &file).unwrap();
    assert_eq!(
        read(&file),
        replaced,
        "the replacement works without PBKDF2"
    );
}

/// The file's last entry (the keys come after a verified chain and DNS
/// answers) ends with its 64 sealed key bytes, then the file's 32-byte
/// digest: a bit of the client key flipped, then the digest
/// fixed as a deliberate tamperer would. Returns the tampered file.
fn tamper_with_the_last_entry(file: &Path) -> Vec<u8> {
    let mut bytes = read(file);
    let body = bytes.len() - 32;
    bytes[body - 64] ^= 0x10;
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes[..body]);
    bytes[body..].copy_from_slice(digest.as_ref());
    std::fs::write(file, &bytes).unwrap();
    assert_eq!(state_file_entries(&bytes), Ok(1));
    bytes
}

/// Three members authenticate side by side (issue 37 item 7), each with
/// the tampered keys unless a retry replaced them first (every reply is
/// delayed, so usually all three): each refusal of the stored keys sends
/// its member back to PBKDF2, not only the first, so no check fails, and
/// the file gets the good keys.
#[test]
fn members_refusing_a_tampered_entry_side_by_side_all_fall_back() {
    let scratch = Scratch::new("tampered-side-by-side");
    let file = scratch.file();
    let sim = Simulator::mongos(plain_auth_server(), 3);
    let hosts: Vec<String> = (0..3).map(|i| sim.address(i)).collect();
    let uri = format!(
        "mongodb://alice:{}@{}/?serverSelectionTimeoutMS=5000{SHA_256}",
        encoded(PASSWORD),
        hosts.join(",")
    );
    ping(&uri, &file).unwrap();
    let bytes = tamper_with_the_last_entry(&file);
    for i in 0..3 {
        sim.delay_replies(i, Duration::from_millis(50));
    }
    sim.reset_observations();

    let options = ClientOptions::parse_with(
        &uri,
        ClientOptions::builder().state_file(file.clone()).build(),
    )
    .unwrap();
    let (builder, recorder) = crate::support::events::recorded_builder(options);
    let client = builder.build().unwrap();
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .expect("the members fall back to PBKDF2 and authenticate");
    let failed: Vec<SdamEvent> = recorder
        .sdam()
        .into_iter()
        .filter(|e| matches!(e, SdamEvent::ServerHeartbeatFailed(_)))
        .collect();
    assert!(failed.is_empty(), "no member's check fails: {failed:?}");
    // The simulator answers the hello itself (no speculation): a saslStart
    // with the tampered keys, and one more with PBKDF2's.
    let starts: Vec<usize> = (0..3)
        .map(|i| sim.commands(i).iter().filter(|c| *c == "saslStart").count())
        .collect();
    assert!(
        starts.iter().all(|n| (1..=2).contains(n)) && starts.contains(&2),
        "{starts:?}"
    );
    drop(client);
    let replaced = read(&file);
    assert_ne!(replaced, bytes, "the tampered entry was replaced");
    ping(&uri, &file).unwrap();
    assert_eq!(read(&file), replaced, "the replacement works");
}

#[test]
fn a_state_file_others_can_read_is_refused_when_the_client_is_built() {
    let scratch = Scratch::new("mode");
    let file = scratch.file();
    ping(&uri(PASSWORD, SHA_256), &file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let error = client(&uri(PASSWORD, SHA_256), &file)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&file.display().to_string()) && error.contains("must be 0600"),
        "{error}"
    );
    assert!(!error.contains(PASSWORD), "{error}");
    std::fs::set_permissions(&scratch.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let error = client(&uri(PASSWORD, SHA_256), &file)
        .unwrap_err()
        .to_string();
    assert!(error.contains("writable by its group or others"), "{error}");
}

#[test]
fn concurrent_processes_never_corrupt_the_file() {
    let scratch = Scratch::new("concurrent");
    let file = scratch.file();
    let queries = [SHA_256, "", "&authSource=admin"];
    let running: Vec<_> = (0..6)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
                .args([
                    &uri(PASSWORD, queries[i % 3]),
                    "run",
                    "--db",
                    "admin",
                    r#"{"ping": 1}"#,
                ])
                .env("MONGO_INLINE_STATE_FILE", &file)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for child in running {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let entries = state_file_entries(&read(&file)).expect("a whole state file");
    assert!((1..=3).contains(&entries), "{entries} entries");
    let leftovers: Vec<_> = std::fs::read_dir(&scratch.0).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
}

#[test]
fn forked_children_use_and_rewrite_the_file_without_harm() {
    let scratch = Scratch::new("fork");
    let file = scratch.file();
    let parent = client(&uri(PASSWORD, SHA_256), &file).unwrap();
    let admin = parent.database("admin");
    admin.run_command(doc! { "ping": 1 }).run().unwrap();
    let mut children = Vec::new();
    for child in 0..3 {
        // SAFETY: the child runs only the driver's code and leaves through
        // `_exit`, never returning into the test harness.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let query = ["", "&authSource=admin", "&appname=child"][child];
            let ok = admin.run_command(doc! { "ping": 1 }).run().is_ok()
                && ping(&uri(PASSWORD, query), &file).is_ok();
            // SAFETY: ends the child without the parent's destructors.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        children.push(pid);
    }
    admin.run_command(doc! { "ping": 1 }).run().unwrap();
    for pid in children {
        let mut status = 0;
        // SAFETY: waits for a child this test forked.
        let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(waited, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child failed: {status:#x}"
        );
    }
    let entries = state_file_entries(&read(&file)).expect("a whole state file");
    assert!((1..=3).contains(&entries), "{entries} entries");
    ping(&uri(PASSWORD, SHA_256), &file).unwrap();
}
