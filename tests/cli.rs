//! The `mongo-inline` command-line tool against SecantusDB: each
//! subcommand's output, Extended JSON in and out, and exit statuses.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use bson::oid::ObjectId;
use serde_json::{json, Value};
use support::server::TestServer;

fn cli(args: &[&str]) -> Output {
    let uri = TestServer::shared().uri();
    Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .arg(&uri)
        .args(args)
        .env_remove("MONGODB_URI")
        .output()
        .unwrap()
}

fn cli_with_stdin(args: &[&str], stdin: &str) -> Output {
    let uri = TestServer::shared().uri();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .arg(&uri)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// stdout's lines as JSON values, after checking the command succeeded.
fn lines(output: &Output) -> Vec<Value> {
    assert!(
        output.status.success(),
        "status {:?}, stderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?}: {e}")))
        .collect()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn fresh_namespace() -> String {
    format!("cli.c_{}", ObjectId::new())
}

#[test]
fn insert_find_update_delete_and_count() {
    let ns = fresh_namespace();
    let ns = ns.as_str();
    let inserted = lines(&cli(&[
        "insert",
        ns,
        r#"{"_id": 1, "name": "Ada", "born": 1815}"#,
        r#"{"_id": 2, "name": "Grace", "born": 1906, "at": {"$date": "2020-01-02T03:04:05Z"}}"#,
        r#"{"_id": 3, "name": "Alan", "born": 1912, "big": {"$numberLong": "9007199254740993"}}"#,
    ]));
    assert_eq!(
        inserted,
        [json!({ "insertedCount": 3, "insertedIds": [1, 2, 3] })]
    );

    let found = lines(&cli(&[
        "find",
        ns,
        r#"{"born": {"$gt": 1900}}"#,
        "--sort",
        r#"{"born": -1}"#,
        "--projection",
        r#"{"name": 1, "at": 1, "big": 1}"#,
    ]));
    assert_eq!(
        found,
        [
            json!({ "_id": 3, "name": "Alan", "big": 9007199254740993_i64 }),
            json!({ "_id": 2, "name": "Grace", "at": { "$date": "2020-01-02T03:04:05Z" } }),
        ],
        "relaxed Extended JSON: dates as $date, 64-bit integers as exact numbers"
    );
    let limited = lines(&cli(&[
        "find",
        ns,
        "--sort",
        r#"{"_id": 1}"#,
        "--limit",
        "2",
    ]));
    assert_eq!(limited.len(), 2);
    assert_eq!(limited[1]["_id"], 2);
    let skipped = lines(&cli(&[
        "find",
        ns,
        "{}",
        "--sort",
        r#"{"_id": 1}"#,
        "--skip",
        "2",
    ]));
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["_id"], 3);

    assert_eq!(
        lines(&cli(&[
            "update",
            ns,
            r#"{"born": {"$gt": 1800}}"#,
            r#"{"$inc": {"born": 1}}"#
        ])),
        [json!({ "matchedCount": 1, "modifiedCount": 1 })]
    );
    assert_eq!(
        lines(&cli(&[
            "update",
            ns,
            r#"{"born": {"$gt": 1800}}"#,
            r#"[{"$set": {"seen": true}}]"#,
            "--many"
        ])),
        [json!({ "matchedCount": 3, "modifiedCount": 3 })]
    );
    assert_eq!(
        lines(&cli(&[
            "update",
            ns,
            r#"{"_id": 4}"#,
            r#"{"$set": {"name": "Edsger"}}"#,
            "--upsert"
        ])),
        [json!({ "matchedCount": 0, "modifiedCount": 0, "upsertedId": 4 })]
    );
    assert_eq!(lines(&cli(&["count", ns])), [json!(4)]);
    assert_eq!(lines(&cli(&["count", ns, r#"{"seen": true}"#])), [json!(3)]);

    assert_eq!(
        lines(&cli(&["delete", ns, r#"{"seen": true}"#])),
        [json!({ "deletedCount": 1 })]
    );
    assert_eq!(
        lines(&cli(&["delete", ns, r#"{"seen": true}"#, "--many"])),
        [json!({ "deletedCount": 2 })]
    );
    assert_eq!(lines(&cli(&["count", ns])), [json!(1)]);
}

#[test]
fn insert_reads_documents_from_stdin_and_aggregate_prints_results() {
    let ns = fresh_namespace();
    let ns = ns.as_str();
    let stdin = "{\"k\": \"a\", \"v\": 1}\n\n{\"k\": \"b\", \"v\": 2}\n{\"k\": \"a\", \"v\": 3}\n";
    let inserted = lines(&cli_with_stdin(&["insert", ns], stdin));
    assert_eq!(inserted[0]["insertedCount"], 3);
    assert_eq!(inserted[0]["insertedIds"].as_array().map(Vec::len), Some(3));
    assert!(
        inserted[0]["insertedIds"][0]["$oid"].is_string(),
        "generated ids are ObjectIds: {inserted:?}"
    );
    let grouped = lines(&cli(&[
        "aggregate",
        ns,
        r#"[{"$group": {"_id": "$k", "total": {"$sum": "$v"}}}, {"$sort": {"_id": 1}}]"#,
    ]));
    assert_eq!(
        grouped,
        [
            json!({ "_id": "a", "total": 4 }),
            json!({ "_id": "b", "total": 2 })
        ]
    );
    // A collection named with --db instead of DB.COLLECTION.
    let (db, coll) = ns.split_once('.').unwrap();
    assert_eq!(lines(&cli(&["count", coll, "--db", db])), [json!(3)]);
    // An empty result prints nothing and succeeds.
    assert!(lines(&cli(&["find", ns, r#"{"k": "none"}"#])).is_empty());
}

#[test]
fn bad_usage_exits_2_and_failures_exit_1() {
    let usage = [
        vec!["nosuch", "cli.x"],
        vec!["find"],
        vec!["find", "cli.x", "{not json"],
        vec!["find", "cli.x", "[1]"],
        vec!["find", "cli.x", "--limit", "many"],
        vec!["find", "cli.x", "--limit"],
        vec!["find", "cli.x", "--many"],
        vec!["update", "cli.x", "{}"],
        vec!["delete", "cli.x", "{}", "{}"],
        vec!["aggregate", "cli.x", r#"{"$match": {}}"#],
        vec!["count", "nodatabase"],
    ];
    for args in &usage {
        let output = cli(args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(output.stdout.is_empty(), "{args:?}");
        assert!(
            stderr(&output).contains("usage:"),
            "{args:?}: {}",
            stderr(&output)
        );
    }
    let message = stderr(&cli(&["count", "nodatabase"]));
    assert!(message.contains("names no database"), "{message}");

    // A duplicate key: the write error on stderr, exit status 1.
    let ns = fresh_namespace();
    lines(&cli(&["insert", &ns, r#"{"_id": 1}"#]));
    let output = cli(&["insert", &ns, r#"{"_id": 1}"#]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("11000"), "{}", stderr(&output));
    // A server-side error (an unknown operator) is a failure, not usage.
    let output = cli(&["find", &ns, r#"{"$nosuch": 1}"#]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(!stderr(&output).contains("usage:"));

    // Nothing listening: a failure naming the server.
    let port = support::server::free_port();
    let output = Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .args([
            &format!("mongodb://127.0.0.1:{port}/?connectTimeoutMS=500"),
            "count",
            "cli.x",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains(&format!("127.0.0.1:{port}")));

    // `run` still works, with --db.
    let ping = lines(&cli(&["run", "--db", "cli", r#"{"ping": 1}"#]));
    assert_eq!(ping[0]["ok"], 1.0);
}

fn cli_at(uri: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .arg(uri)
        .args(args)
        .env_remove("MONGODB_URI")
        .output()
        .unwrap()
}

#[test]
fn a_closed_stdout_after_a_successful_insert_is_not_a_failure() {
    let ns = fresh_namespace();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .arg(TestServer::shared().uri())
        .args(["insert", &ns, r#"{"n": 1}"#])
        .env_remove("MONGODB_URI")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before the tool can have connected, let alone
    // written its result (`mongo-inline insert ... | head -c0`).
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    // A retrying script would have inserted twice on exit status 1.
    let count = lines(&cli(&["count", &ns]));
    assert_eq!(count, [json!(1)]);
}

#[test]
fn connection_string_warnings_go_to_stderr() {
    let uri = format!(
        "{}&noSuchOption=1&connectTimeoutMS=soon",
        TestServer::shared().uri()
    );
    let output = cli_at(&uri, &["run", r#"{"ping": 1}"#]);
    assert_eq!(lines(&output)[0]["ok"], 1.0);
    let message = stderr(&output);
    assert!(
        message.contains("warning") && message.contains("noSuchOption"),
        "{message}"
    );
    assert!(message.contains("connectTimeoutMS"), "{message}");
}

#[test]
fn a_namespace_ending_in_a_dot_names_no_collection() {
    for ns in ["a.", "."] {
        let output = cli(&["count", ns]);
        assert_eq!(output.status.code(), Some(2), "{ns}: {}", stderr(&output));
        let message = stderr(&output);
        assert!(message.contains("names no collection"), "{ns}: {message}");
    }
}

#[test]
fn a_non_utf8_argument_is_a_usage_error_that_quotes_nothing() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    let uri = OsStr::from_bytes(b"mongodb://alice:SECRET@127.0.0.1:1/\xff");
    let output = Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .arg(uri)
        .args(["count", "a.b"])
        .env_remove("MONGODB_URI")
        .output()
        .unwrap();
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(message.contains("not valid UTF-8"), "{message}");
    assert!(!message.contains("SECRET"), "{message}");
    assert!(!message.contains("panicked"), "{message}");
}

#[test]
fn a_password_with_a_slash_is_not_printed() {
    let output = cli_at("mongodb://alice:SECRET/x@127.0.0.1:1/", &["count", "a.b"]);
    let message = stderr(&output);
    assert_ne!(output.status.code(), Some(0), "{message}");
    assert!(!message.contains("SECRET"), "{message}");
}

/// A server that answers each socket's handshake and then never replies
/// again: the listening address.
fn silent_after_handshake_server() -> String {
    use std::net::TcpListener;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let hello = bson::doc! {
                    "ismaster": true, "helloOk": true, "isWritablePrimary": true,
                    "maxWireVersion": 21, "minWireVersion": 0,
                    "maxBsonObjectSize": 16_777_216, "maxMessageSizeBytes": 48_000_000,
                    "maxWriteBatchSize": 100_000, "logicalSessionTimeoutMinutes": 30,
                    "ok": 1.0,
                };
                let mut answered = false;
                while let Ok(Some(frame)) = support::raw::read_frame(&mut stream) {
                    if answered {
                        continue; // Swallow every request; never reply.
                    }
                    answered = true;
                    let reply = if frame.op_code == support::raw::OP_QUERY {
                        support::raw::encode_op_reply(1, frame.request_id, &hello)
                    } else {
                        support::raw::OpMsg {
                            flags: 0,
                            body: hello.clone(),
                            sequences: Vec::new(),
                        }
                        .encode(1, frame.request_id)
                    };
                    if stream.write_all(&reply).is_err() {
                        return;
                    }
                }
            });
        }
    });
    address
}

#[test]
fn the_cli_gives_up_on_a_server_that_stops_answering() {
    let address = silent_after_handshake_server();
    let uri = format!("mongodb://{address}/?directConnection=true");
    for (uri, args) in [
        (uri.clone(), vec!["--timeout-ms", "1000"]),
        (format!("{uri}&timeoutMS=1000"), vec![]),
    ] {
        let started = std::time::Instant::now();
        let mut all = vec!["count", "cli.x"];
        all.extend(args.iter().copied());
        let output = cli_at(&uri, &all);
        let elapsed = started.elapsed();
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{uri} {args:?}: {message}");
        assert!(message.contains("timed out"), "{uri} {args:?}: {message}");
        assert!(elapsed < std::time::Duration::from_secs(10), "{elapsed:?}");
    }
    // Both given, differently: an error rather than a silent choice.
    let output = cli_at(
        &format!("{uri}&timeoutMS=1000"),
        &["count", "cli.x", "--timeout-ms", "2000"],
    );
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("timeoutMS"), "{}", stderr(&output));
    // The default is documented.
    let help = cli_at(&uri, &["--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--timeout-ms") && help.contains("60000"),
        "{help}"
    );
}

/// The CLI run with `args` and `MONGODB_URI` set to `env_uri` (or unset).
fn cli_env(args: &[&str], env_uri: Option<&str>) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mongo-inline"));
    command.args(args).env_remove("MONGODB_URI");
    if let Some(uri) = env_uri {
        command.env("MONGODB_URI", uri);
    }
    command.output().unwrap()
}

#[test]
fn no_cli_message_shows_a_password() {
    use support::secrets::{failing_uris, SECRET};
    let refused = format!("127.0.0.1:{}", support::server::free_port());
    for uri in failing_uris(&refused) {
        let uri = uri.as_str();
        let option = format!("--uri={uri}");
        let runs: [(&str, Vec<&str>, Option<&str>); 8] = [
            ("first", vec![uri, "count", "a.b"], None),
            ("MONGODB_URI", vec!["count", "a.b"], Some(uri)),
            ("twice", vec![uri, uri, "count", "a.b"], None),
            ("an unknown option", vec!["count", "a.b", &option], None),
            ("a second positional", vec!["count", "a.b", "{}", uri], None),
            ("a namespace", vec!["count", uri], None),
            ("--limit's value", vec!["find", "a.b", "--limit", uri], None),
            (
                "--timeout-ms's value",
                vec!["count", "a.b", "--timeout-ms", uri],
                None,
            ),
        ];
        for (how, args, env_uri) in runs {
            let output = cli_env(&args, env_uri);
            let all = format!(
                "{}{}",
                stderr(&output),
                String::from_utf8_lossy(&output.stdout)
            );
            assert_ne!(output.status.code(), Some(0), "{uri:?} as {how}: {all}");
            assert!(!all.contains(SECRET), "{uri:?} as {how}: {all}");
            assert!(!all.contains("panicked"), "{uri:?} as {how}: {all}");
        }
    }
    // A misspelt connection string is named by its position and kind.
    let output = cli_env(&[&format!("MONGODB://u:{SECRET}@h/"), "count", "a.b"], None);
    let message = stderr(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(
        message.contains("argument 1") && message.contains("connection string"),
        "{message}"
    );
    let output = cli_env(
        &["count", "a.b", &format!("--uri=mongodb://u:{SECRET}@h/")],
        None,
    );
    let message = stderr(&output);
    assert!(message.contains("argument 3"), "{message}");
    // Arguments that cannot hold a password are still quoted.
    let message = stderr(&cli_env(&["nosuch", "a.b"], None));
    assert!(message.contains("\"nosuch\""), "{message}");
}

#[test]
fn w0_writes_print_acknowledged_false_instead_of_counts() {
    let uri = format!("{}&w=0", TestServer::shared().uri());
    let ns = fresh_namespace();
    let unacknowledged = [json!({ "acknowledged": false })];
    let inserted = lines(&cli_at(
        &uri,
        &[
            "insert",
            &ns,
            r#"{"_id": 1}"#,
            r#"{"_id": 1}"#,
            r#"{"_id": 2}"#,
        ],
    ));
    assert_eq!(inserted, unacknowledged);
    let stdin_insert = Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .args([&uri, "insert", &ns])
        .env_remove("MONGODB_URI")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            child.stdin.take().unwrap().write_all(b"{\"_id\": 3}\n")?;
            child.wait_with_output()
        })
        .unwrap();
    assert_eq!(lines(&stdin_insert), unacknowledged);
    let update = [
        &uri,
        "update",
        &ns,
        r#"{"_id": 1}"#,
        r#"{"$set": {"y": 1}}"#,
    ];
    assert_eq!(lines(&cli_at(update[0], &update[1..])), unacknowledged);
    let update_many = [&uri, "update", &ns, "{}", r#"{"$set": {"z": 1}}"#, "--many"];
    assert_eq!(
        lines(&cli_at(update_many[0], &update_many[1..])),
        unacknowledged
    );
    assert_eq!(
        lines(&cli_at(&uri, &["delete", &ns, r#"{"_id": 9}"#])),
        unacknowledged
    );
    // Acknowledged, the same writes report what they did.
    let ns = fresh_namespace();
    let output = cli(&[
        "insert",
        &ns,
        r#"{"_id": 1}"#,
        r#"{"_id": 1}"#,
        r#"{"_id": 2}"#,
    ]);
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(stderr(&output).contains("11000"), "{}", stderr(&output));
}

#[test]
fn bad_names_fail_before_anything_is_sent() {
    // Nothing listens: a name that reached the network would fail with a
    // server selection error naming the address instead.
    let port = support::server::free_port();
    let uri = format!("mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=200");
    for (args, problem) in [
        (vec!["insert", "a b.c", "{}"], "a space"),
        (vec!["insert", "db.a$b", "{}"], "'$'"),
        (vec!["count", "c", "--db", ""], "database name is empty"),
        (vec!["count", "c", "--db", "a.b"], "'.'"),
        (vec!["find", "c", "--db", "a/b"], "'/'"),
        (
            vec!["update", "a\"b.c", "{}", r#"{"$set": {"y": 1}}"#],
            "'\"'",
        ),
        (vec!["delete", "a$b.c", "{}"], "'$'"),
        (vec!["aggregate", "a\\b.c", "[]"], "'\\\\'"),
        (vec!["run", "--db", "a.b", r#"{"ping": 1}"#], "'.'"),
    ] {
        let output = cli_at(&uri, &args);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(1), "{args:?}: {message}");
        assert!(message.contains(problem), "{args:?}: {message}");
        assert!(message.contains("name"), "{args:?}: {message}");
        assert!(!message.contains(&port.to_string()), "{args:?}: {message}");
    }
}

#[test]
fn a_bad_line_anywhere_on_stdin_inserts_nothing() {
    let good = "{\"n\": 1}\n{\"n\": 2}\n";
    for (stdin, bad_line) in [
        (format!("{{bad\n{good}"), 1),
        (format!("{good}[1]\n{good}"), 3),
        (format!("{good}{good}{{\"n\": "), 5),
        (
            format!("{good}\n{{\"n\": {{\"$numberLong\": \"x\"}}}}\n"),
            4,
        ),
    ] {
        let ns = fresh_namespace();
        let output = cli_with_stdin(&["insert", &ns], &stdin);
        let message = stderr(&output);
        assert_eq!(output.status.code(), Some(2), "{stdin:?}: {message}");
        assert!(
            message.contains(&format!("stdin line {bad_line}")),
            "{stdin:?}: {message}"
        );
        assert_eq!(lines(&cli(&["count", &ns])), [json!(0)], "{stdin:?}");
    }
    // Many lines, more than one chunk's worth, all inserted with their ids.
    let ns = fresh_namespace();
    let stdin: String = (0..3000)
        .map(|i| format!("{{\"_id\": {i}, \"pad\": \"{}\"}}\n", "x".repeat(3000)))
        .collect();
    let inserted = lines(&cli_with_stdin(&["insert", &ns], &stdin));
    assert_eq!(inserted[0]["insertedCount"], 3000);
    let ids = inserted[0]["insertedIds"].as_array().unwrap();
    assert_eq!(ids.len(), 3000);
    assert_eq!((ids[0].clone(), ids[2999].clone()), (json!(0), json!(2999)));
    assert_eq!(lines(&cli(&["count", &ns])), [json!(3000)]);
}

#[test]
fn gridfs_put_get_ls_and_rm_stream_files() {
    let db = format!("cli_gridfs_{}", bson::oid::ObjectId::new());
    // Three chunks of the default 255 KiB, the last one partial.
    let content: String = (0..600_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let put = lines(&cli_with_stdin(
        &["put", &db, "backup.txt", "--bucket", "b"],
        &content,
    ));
    assert_eq!(put[0]["length"], 600_000);
    lines(&cli_with_stdin(
        &["put", &db, "backup.txt", "--bucket", "b"],
        "second",
    ));

    let latest = cli(&["get", &db, "backup.txt", "--bucket", "b"]);
    assert!(latest.status.success(), "{}", stderr(&latest));
    assert_eq!(latest.stdout, b"second");
    let first = cli(&["get", &db, "backup.txt", "--bucket", "b", "--revision", "0"]);
    assert!(
        first.stdout == content.as_bytes(),
        "the first revision differs"
    );

    let listed = lines(&cli(&[
        "ls",
        &db,
        r#"{"length": {"$gt": 10}}"#,
        "--bucket",
        "b",
    ]));
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["filename"], "backup.txt");
    assert_eq!(listed[0]["chunkSize"], 255 * 1024);

    lines(&cli(&["rm", &db, "backup.txt", "--bucket", "b"]));
    assert!(lines(&cli(&["ls", &db, "--bucket", "b"])).is_empty());
    let missing = cli(&["get", &db, "backup.txt", "--bucket", "b"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("no file named \"backup.txt\""),
        "{}",
        stderr(&missing)
    );
    assert!(missing.stdout.is_empty());
}

#[test]
fn verbose_prints_the_drivers_structured_log_to_stderr_without_secrets() {
    let user = format!("u_{}", ObjectId::new());
    let create = format!(r#"{{"createUser": "{user}", "pwd": "hunter2-not-logged", "roles": []}}"#);
    let output = cli(&["-v", "run", "--db", "cli", &create]);
    assert_eq!(lines(&output)[0]["ok"], 1.0);
    let log = stderr(&output);
    let started = log
        .lines()
        .find(|l| l.contains("message=Command started") && l.contains("commandName=createUser"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        started.starts_with("DEBUG mongo_inline::command: Command \"createUser\" started"),
        "{started}"
    );
    for field in [
        "databaseName=cli",
        "requestId=",
        "operationId=",
        "serverHost=",
        "serverPort=",
    ] {
        assert!(started.contains(field), "{field} in {started}");
    }
    // A sensitive command is logged as an empty document.
    assert!(started.contains("command={}"), "{started}");
    assert!(!log.contains("hunter2"), "{log}");
    assert!(log.contains("message=Server selection succeeded"), "{log}");
    assert!(
        log.contains("message=Starting topology monitoring"),
        "{log}"
    );
    // Without -v: nothing.
    let quiet = cli(&["run", "--db", "cli", r#"{"ping": 1}"#]);
    assert_eq!(stderr(&quiet), "");
    cli(&[
        "run",
        "--db",
        "cli",
        &format!(r#"{{"dropUser": "{user}"}}"#),
    ]);
}

#[test]
fn the_environment_configures_logging_without_a_code_change() {
    let output = Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .arg(TestServer::shared().uri())
        .args(["run", "--db", "cli", r#"{"ping": 1}"#])
        .env_remove("MONGODB_URI")
        .env("MONGODB_LOG_ALL", "off")
        .env("MONGODB_LOG_COMMAND", "debug")
        .env("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "8")
        .output()
        .unwrap();
    assert_eq!(lines(&output)[0]["ok"], 1.0);
    let log = stderr(&output);
    let started = log
        .lines()
        .find(|l| l.contains("message=Command started"))
        .unwrap_or_else(|| panic!("{log}"));
    // Cut to 8 characters, then "...".
    assert!(started.ends_with(r#" command={"ping":..."#), "{started}");
    // Only the command component is on.
    assert!(!log.contains("mongo_inline::topology"), "{log}");
    assert!(!log.contains("mongo_inline::server_selection"), "{log}");
}

#[test]
fn watch_prints_change_events_until_its_limit_or_time() {
    let ns = fresh_namespace();
    let uri = TestServer::shared().uri();
    let mut watcher = Command::new(env!("CARGO_BIN_EXE_mongo-inline"))
        .args([
            uri.as_str(),
            "watch",
            ns.as_str(),
            "--limit",
            "2",
            "--max-time-ms",
            "15000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The watch opens its stream at some point after starting: insert
    // until it has seen two inserts and exited.
    for n in 0..150 {
        if watcher.try_wait().unwrap().is_some() {
            break;
        }
        lines(&cli(&["insert", ns.as_str(), &format!(r#"{{"n": {n}}}"#)]));
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let events = lines(&watcher.wait_with_output().unwrap());
    assert_eq!(events.len(), 2, "{events:?}");
    for event in &events {
        assert_eq!(event["operationType"], "insert");
        assert!(event["_id"]["_data"].is_string(), "{event}");
        assert!(event["fullDocument"]["n"].is_number(), "{event}");
    }

    // Nothing matches the pipeline: it stops after about the time given,
    // printing nothing.
    let quiet = cli(&[
        "watch",
        ns.as_str(),
        r#"[{"$match": {"operationType": "drop"}}]"#,
        "--max-time-ms",
        "300",
    ]);
    assert!(lines(&quiet).is_empty());
    let bad = cli(&["watch", ns.as_str(), "--max-time-ms", "soon"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("--max-time-ms \"soon\" is not a count"));
}
