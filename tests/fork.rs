//! A client used, then forked: each child must get its own sockets, its own
//! server sessions (never the parent's `lsid`) and its own ObjectIds (never
//! a sibling's), so that every insert of every process lands.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bson::{doc, Bson, Document};
use mongo_inline::{Client, ClientOptions};

use support::events::Recorder;
use support::server::TestServer;

const CHILDREN: usize = 4;

/// The `lsid`s and generated `_id`s of the inserts a recorder saw, as text.
fn lsids_and_ids(recorder: &Recorder) -> (Vec<String>, Vec<String>) {
    let mut lsids = Vec::new();
    let mut ids = Vec::new();
    for insert in recorder.named("insert") {
        let lsid = insert
            .get_document("lsid")
            .expect("every insert has an lsid");
        lsids.push(lsid.to_string());
        for document in insert.get_array("documents").into_iter().flatten() {
            if let Some(Bson::ObjectId(id)) = document.as_document().and_then(|d| d.get("_id")) {
                ids.push(id.to_hex());
            }
        }
    }
    (lsids, ids)
}

/// What one child does: inserts without `_id` in an implicit and in an
/// explicit session, then writes the lsids and ids it sent to `report`.
fn child_work(
    client: &Client,
    recorder: &Recorder,
    child: usize,
    report: &Path,
) -> mongo_inline::Result<()> {
    // The recorder is a copy of the parent's: forget what the parent sent.
    recorder.clear_commands();
    let coll = client.database("fork").collection::<Document>("docs");
    coll.insert_one(doc! { "child": child as i32, "session": "implicit" })
        .run()?;
    let mut session = client.start_session().run()?;
    coll.insert_one(doc! { "child": child as i32, "session": "explicit" })
        .session(&mut session)
        .run()?;
    drop(session);
    coll.insert_one(doc! { "child": child as i32, "session": "implicit again" })
        .run()?;
    let (lsids, ids) = lsids_and_ids(recorder);
    let mut text = String::new();
    for lsid in lsids {
        text.push_str(&format!("lsid {lsid}\n"));
    }
    for id in ids {
        text.push_str(&format!("id {id}\n"));
    }
    fs::write(report, text).expect("the child writes its report");
    Ok(())
}

fn report_path(dir: &Path, child: usize) -> PathBuf {
    dir.join(format!("child-{child}"))
}

#[test]
fn forked_children_share_no_session_and_no_object_id_with_their_parent() {
    let server = TestServer::shared();
    let recorder = Arc::new(Recorder::default());
    let options = ClientOptions::parse(server.uri()).run().unwrap();
    let client = recorder.client_for(options).unwrap();
    let coll = client.database("fork").collection::<Document>("docs");
    coll.drop().run().ok();

    // The parent has a socket and a pooled session before it forks.
    coll.insert_one(doc! { "parent": 1 }).run().unwrap();
    let mut session = client.start_session().run().unwrap();
    coll.insert_one(doc! { "parent": 2 })
        .session(&mut session)
        .run()
        .unwrap();
    drop(session);

    let dir = std::env::temp_dir().join(format!("mongo-inline-fork-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let mut children = Vec::new();
    for child in 0..CHILDREN {
        // SAFETY: the child runs only the driver's single-threaded code and
        // leaves through `_exit`, never returning into the test harness or
        // touching locks another thread of the parent could have held.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let report = report_path(&dir, child);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                child_work(&client, &recorder, child, &report)
            }));
            let status = match outcome {
                Ok(Ok(())) => 0,
                Ok(Err(error)) => {
                    fs::write(report.with_extension("err"), error.to_string()).ok();
                    1
                }
                Err(_) => 2,
            };
            // SAFETY: ends the child at once, without running the parent's
            // destructors or exit handlers (its servers, its test harness).
            unsafe { libc::_exit(status) };
        }
        children.push((child, pid));
    }

    // The parent carries on with its pooled session while the children run.
    let mut session = client.start_session().run().unwrap();
    coll.insert_one(doc! { "parent": 3 })
        .session(&mut session)
        .run()
        .unwrap();
    drop(session);
    coll.insert_one(doc! { "parent": 4 }).run().unwrap();

    for (child, pid) in &children {
        let mut status = 0;
        // SAFETY: waits for a child this test forked; `status` is a valid
        // place for the exit status.
        let waited = unsafe { libc::waitpid(*pid, &mut status, 0) };
        assert_eq!(waited, *pid);
        let error = fs::read_to_string(report_path(&dir, *child).with_extension("err"));
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child {child} failed (status {status:#x}): {}",
            error.unwrap_or_default()
        );
    }

    let (parent_lsids, parent_ids) = lsids_and_ids(&recorder);
    let parent_lsids: HashSet<String> = parent_lsids.into_iter().collect();
    let mut owner_of_lsid: HashMap<String, String> = parent_lsids
        .iter()
        .map(|lsid| (lsid.clone(), "parent".to_string()))
        .collect();
    let mut all_ids: Vec<String> = parent_ids;
    for child in 0..CHILDREN {
        let report = fs::read_to_string(report_path(&dir, child)).unwrap();
        let mut child_lsids = HashSet::new();
        for line in report.lines() {
            if let Some(lsid) = line.strip_prefix("lsid ") {
                child_lsids.insert(lsid.to_string());
            } else if let Some(id) = line.strip_prefix("id ") {
                all_ids.push(id.to_string());
            }
        }
        assert!(!child_lsids.is_empty(), "child {child} reported no lsid");
        for lsid in child_lsids {
            let me = format!("child {child}");
            if let Some(other) = owner_of_lsid.insert(lsid.clone(), me.clone()) {
                panic!("{me} sent {other}'s lsid {lsid}");
            }
        }
    }
    fs::remove_dir_all(&dir).ok();

    let distinct: HashSet<&String> = all_ids.iter().collect();
    assert_eq!(distinct.len(), all_ids.len(), "repeated _id: {all_ids:?}");
    assert_eq!(all_ids.len(), 4 + 3 * CHILDREN);
    let count = coll.count_documents(doc! {}).run().unwrap();
    assert_eq!(count, (4 + 3 * CHILDREN) as u64, "every insert landed");
}

/// Forks once; the child runs `work` and reports its outcome through the
/// exit status (0: Ok, 1: Err with the message in `report`, 2: panic).
fn in_child(report: &Path, work: impl FnOnce() -> Result<String, String>) {
    // SAFETY: as above: the child runs only the driver's single-threaded
    // code and leaves through `_exit`.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
        let status = match outcome {
            Ok(Ok(text)) => {
                fs::write(report, text).ok();
                0
            }
            Ok(Err(text)) => {
                fs::write(report, text).ok();
                1
            }
            Err(_) => 2,
        };
        // SAFETY: ends the child at once (see above).
        unsafe { libc::_exit(status) };
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    let text = fs::read_to_string(report).unwrap_or_default();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed (status {status:#x}): {text}"
    );
}

#[test]
fn a_session_created_before_fork_never_sends_the_parents_lsid_in_the_child() {
    let server = TestServer::shared();
    let recorder = Arc::new(Recorder::default());
    let options = ClientOptions::parse(server.uri()).run().unwrap();
    let client = recorder.client_for(options).unwrap();
    let coll = client
        .database("fork")
        .collection::<Document>("inherited_session");
    coll.drop().run().ok();
    let mut session = client.start_session().run().unwrap();
    coll.insert_one(doc! { "by": "parent" })
        .session(&mut session)
        .run()
        .unwrap();
    let parent_lsid = session.id().clone();
    // A transaction open at the fork is the parent's.
    let mut in_transaction = client.start_session().run().unwrap();
    in_transaction.start_transaction().run().unwrap();
    coll.insert_one(doc! { "by": "parent txn" })
        .session(&mut in_transaction)
        .run()
        .unwrap();
    let transaction_lsid = in_transaction.id().clone();
    let (mut session, mut in_transaction) = (Some(session), Some(in_transaction));

    let dir = std::env::temp_dir().join(format!("mongo-inline-fork-s-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let report = dir.join("child");
    in_child(&report, || {
        recorder.clear_commands();
        // Owned here, so that the child drops them (the parent keeps its
        // copies: the fork copied the address space).
        let mut session = session.take().expect("the session");
        let mut in_transaction = in_transaction.take().expect("the session");
        coll.insert_one(doc! { "by": "child" })
            .session(&mut session)
            .run()
            .map_err(|e| e.to_string())?;
        let refused = coll
            .insert_one(doc! { "by": "child txn" })
            .session(&mut in_transaction)
            .run()
            .expect_err("the parent's transaction cannot continue in the child");
        if !refused.to_string().contains("parent process") {
            return Err(format!("unclear error: {refused}"));
        }
        drop(in_transaction);
        drop(session);
        let lsids: Vec<String> = recorder
            .commands()
            .iter()
            .filter_map(|event| match event {
                mongo_inline::event::command::CommandEvent::Started(e) => {
                    e.command.get_document("lsid").ok().map(|l| l.to_string())
                }
                _ => None,
            })
            .collect();
        Ok(lsids.join("\n"))
    });
    let child_lsids = fs::read_to_string(&report).unwrap();
    fs::remove_dir_all(&dir).ok();
    assert!(
        !child_lsids.is_empty(),
        "the child sent a command with an lsid"
    );
    for lsid in child_lsids.lines() {
        assert_ne!(
            lsid,
            parent_lsid.to_string(),
            "the child sent the parent's lsid"
        );
        assert_ne!(
            lsid,
            transaction_lsid.to_string(),
            "the child sent the parent's lsid"
        );
    }
    // The parent's sessions carry on, its transaction included.
    let (mut session, mut in_transaction) = (session.unwrap(), in_transaction.unwrap());
    coll.insert_one(doc! { "by": "parent again" })
        .session(&mut session)
        .run()
        .unwrap();
    in_transaction.commit_transaction().run().unwrap();
    assert_eq!(session.id(), &parent_lsid);
    let count = coll.count_documents(doc! {}).run().unwrap();
    assert_eq!(count, 4, "parent, parent txn, child, parent again");
}
