//! The training run of the profile-guided build (`.ci/pgo-build`): a mixed
//! workload through the public API in every deployment shape, so that the
//! compiler learns which paths an application's operations take.
//!
//! ```text
//! SECANTUSD=.venv/bin/secantusd-py pgo_training [ROUNDS] [--capi PROGRAM]
//! ```
//!
//! It starts its own servers (SecantusDB as a standalone, as a one-member
//! replica set and with TLS and SCRAM-SHA-256) and the topology simulator of
//! the tests in front of them (a replica set seeded with a secondary, one
//! with three seeds, two mongos, a load balancer), and in each runs ROUNDS
//! (default 150) rounds of the same mix of common operations: `insert_one`,
//! `find_one` as a `Document`, as raw bytes and as a typed struct, a `find`
//! whose cursor needs `getMore`, `update_one`, `find_one_and_update`,
//! `replace_one`, `delete_one`, `count_documents`, `aggregate`, `distinct`
//! and a command, and on the deployments that have them a secondary read
//! and a transaction.
//!
//! With `--capi PROGRAM` it also runs `PROGRAM URI ROUNDS SECONDARIES
//! TRANSACTIONS` in every deployment: `benches/capi/pgo_training.c`, the same
//! mix through the C ABI, linked with the instrumented C library, which is
//! compiled apart from this program's copy of the library and so learns only
//! from what the C program does.
//!
//! No operation is weighted towards any benchmark: `find_one` by `_id` is
//! one operation of the mix like the others. What a profile cannot teach is
//! the cold path (a failover, a network error, a hostile reply): those
//! functions stay in the build, optimised for size and placed apart from the
//! hot code, which is what the profile is for. Every step's result is
//! checked, so a training run that silently fails (and would train the error
//! paths instead) stops with an error.

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

#[path = "../../tests/support/mod.rs"]
mod support;

use std::process::ExitCode;

use bson::{doc, Document, RawDocumentBuf};
use mongo_inline::options::ReadPreference;
use mongo_inline::{Client, ClientSession};
use serde::{Deserialize, Serialize};
use support::server::TestServer;
use support::sim::Shape;

const DEFAULT_ROUNDS: u32 = 150;
const SEEDED: i32 = 100;

#[derive(Debug, Serialize, Deserialize)]
struct Item {
    #[serde(rename = "_id")]
    id: i32,
    name: String,
    n: i64,
}

/// What a deployment offers beyond plain reads and writes.
#[derive(Clone, Copy)]
struct Abilities {
    secondaries: bool,
    transactions: bool,
}

const USAGE: &str = "usage: pgo_training [ROUNDS > 0] [--capi PROGRAM]";

fn main() -> ExitCode {
    let mut rounds = DEFAULT_ROUNDS;
    let mut c_program: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--capi" {
            let Some(program) = args.next() else {
                eprintln!("{USAGE}");
                return ExitCode::from(2);
            };
            c_program = Some(program);
        } else {
            match arg.parse::<u32>() {
                Ok(n) if n > 0 => rounds = n,
                _ => {
                    eprintln!("{USAGE}");
                    return ExitCode::from(2);
                }
            }
        }
    }
    let replica_set = TestServer::start();
    let standalone = TestServer::start_standalone();
    let no_extras = Abilities {
        secondaries: false,
        transactions: false,
    };
    let mut targets = vec![
        (
            "standalone SecantusDB".to_owned(),
            standalone.uri(),
            no_extras,
        ),
        (
            "one-member replica set".to_owned(),
            replica_set.uri(),
            Abilities {
                secondaries: false,
                transactions: true,
            },
        ),
        (
            "TLS + SCRAM-SHA-256".to_owned(),
            support::tls::scram_sha_256_uri(support::tls::tls_auth_server().port()),
            no_extras,
        ),
    ];
    let shapes = Shape::all(&replica_set);
    for shape in &shapes {
        let secondaries = shape.name.starts_with("replica set");
        targets.push((
            format!("simulated {}", shape.name),
            shape.seed_uri(),
            Abilities {
                secondaries,
                transactions: secondaries || shape.name == "two mongos",
            },
        ));
    }
    for (name, uri, abilities) in &targets {
        let started = std::time::Instant::now();
        if let Err(error) = train(uri, rounds, *abilities) {
            eprintln!("pgo_training: {name}: {error}");
            return ExitCode::FAILURE;
        }
        println!(
            "pgo_training: {name}: {rounds} rounds in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        if let Some(program) = &c_program {
            let started = std::time::Instant::now();
            if let Err(error) = train_c_abi(program, uri, rounds, *abilities) {
                eprintln!("pgo_training: {name}, through the C ABI: {error}");
                return ExitCode::FAILURE;
            }
            println!(
                "pgo_training: {name}: {rounds} rounds through the C ABI in {:.1} s",
                started.elapsed().as_secs_f64()
            );
        }
    }
    ExitCode::SUCCESS
}

/// Runs the C ABI's training program against `uri`; its own checks decide
/// whether it succeeded.
fn train_c_abi(program: &str, uri: &str, rounds: u32, abilities: Abilities) -> Outcome {
    let flag = |on: bool| if on { "1" } else { "0" };
    let status = std::process::Command::new(program)
        .arg(uri)
        .arg(rounds.to_string())
        .arg(flag(abilities.secondaries))
        .arg(flag(abilities.transactions))
        .status()
        .map_err(|error| format!("{program} did not start: {error}"))?;
    check(status.success(), &format!("{program} exited with {status}"))
}

type Outcome = Result<(), Box<dyn std::error::Error>>;

fn check(ok: bool, what: &str) -> Outcome {
    if ok {
        Ok(())
    } else {
        Err(format!("unexpected result: {what}").into())
    }
}

fn train(uri: &str, rounds: u32, abilities: Abilities) -> Outcome {
    let client = Client::with_uri_str(uri)?;
    let docs = client.database("pgo").collection::<Document>("items");
    docs.drop().run()?;
    docs.insert_many(
        (0..SEEDED).map(|i| doc! { "_id": i, "name": format!("item {i}"), "n": 0_i64 }),
    )
    .run()?;
    let typed = docs.clone_with_type::<Item>();
    let raw = docs.clone_with_type::<RawDocumentBuf>();
    for round in 0..rounds {
        let id = SEEDED + i32::try_from(round)?;
        let key = id % SEEDED;
        typed
            .insert_one(Item {
                id,
                name: format!("new {round}"),
                n: 1,
            })
            .run()?;
        check(
            docs.find_one(doc! { "_id": key }).run()?.is_some(),
            "find_one as Document",
        )?;
        check(
            raw.find_one(doc! { "_id": key }).run()?.is_some(),
            "find_one as RawDocumentBuf",
        )?;
        check(
            typed
                .find_one(doc! { "_id": id })
                .run()?
                .is_some_and(|item| item.n == 1),
            "find_one as a struct",
        )?;
        let batch: Vec<Document> = docs
            .find(doc! { "_id": { "$lt": SEEDED } })
            .sort(doc! { "_id": 1 })
            .batch_size(16)
            .limit(40)
            .run()?
            .collect::<mongo_inline::Result<_>>()?;
        check(batch.len() == 40, "a cursor over several batches")?;
        let updated = docs
            .update_one(doc! { "_id": key }, doc! { "$inc": { "n": 1 } })
            .run()?;
        check(updated.matched_count == 1, "update_one")?;
        docs.find_one_and_update(doc! { "_id": key }, doc! { "$set": { "seen": true } })
            .run()?;
        typed
            .replace_one(
                doc! { "_id": id },
                Item {
                    id,
                    name: format!("replaced {round}"),
                    n: 2,
                },
            )
            .run()?;
        let counted = docs
            .count_documents(doc! { "_id": { "$lt": SEEDED } })
            .run()?;
        check(counted == u64::try_from(SEEDED)?, "count_documents")?;
        let grouped: Vec<Document> = docs
            .aggregate([
                doc! { "$match": { "_id": { "$lt": SEEDED } } },
                doc! { "$group": { "_id": null, "total": { "$sum": "$n" } } },
            ])
            .run()?
            .collect::<mongo_inline::Result<_>>()?;
        check(grouped.len() == 1, "aggregate")?;
        let names = docs.distinct("name", doc! { "_id": { "$lt": 3 } }).run()?;
        check(names.len() == 3, "distinct")?;
        client
            .database("pgo")
            .run_command(doc! { "ping": 1 })
            .run()?;
        if abilities.secondaries {
            let options = mongo_inline::options::CollectionOptions::builder()
                .selection_criteria(mongo_inline::options::SelectionCriteria::from(
                    ReadPreference::secondary_preferred(None),
                ))
                .build();
            let from_secondary = client
                .database(docs.database_name())
                .collection_with_options::<Document>(docs.name(), options)
                .find_one(doc! { "_id": key })
                .run()?;
            check(from_secondary.is_some(), "a secondary read")?;
        }
        if abilities.transactions {
            let mut session = client.start_session().run()?;
            transfer(&docs, &mut session, key, (key + 1) % SEEDED)?;
        }
        let deleted = docs.delete_one(doc! { "_id": id }).run()?;
        check(deleted.deleted_count == 1, "delete_one")?;
    }
    check(
        docs.estimated_document_count().run()? == u64::try_from(SEEDED)?,
        "the round's inserts were all deleted",
    )?;
    drop(client);
    Ok(())
}

fn transfer(
    docs: &mongo_inline::Collection<Document>,
    session: &mut ClientSession,
    from: i32,
    to: i32,
) -> Outcome {
    session.start_transaction().and_run(|session| {
        docs.update_one(doc! { "_id": from }, doc! { "$inc": { "n": -1 } })
            .session(&mut *session)
            .run()?;
        docs.update_one(doc! { "_id": to }, doc! { "$inc": { "n": 1 } })
            .session(&mut *session)
            .run()?;
        Ok(())
    })?;
    Ok(())
}
