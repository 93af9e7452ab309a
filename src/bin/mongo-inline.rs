//! `mongo-inline`: the driver as a command-line tool for scripts.
//!
//! ```text
//! mongo-inline [URI] run [--db NAME] '<command as Extended JSON>'
//! ```
//! Prints the reply as relaxed Extended JSON on one line; on failure prints
//! the error on stderr and exits non-zero.

use std::process::ExitCode;

use bson::{Bson, Document};
use mongo_inline::Client;

const USAGE: &str = "\
usage: mongo-inline [URI] run [--db NAME] '<command as Extended JSON>'

  URI        a mongodb:// connection string (default: $MONGODB_URI, else
             mongodb://127.0.0.1:27017)
  run        runs one command on the primary and prints the reply
  --db NAME  the database to run it on (default: the URI's database, else admin)

exit status: 0 on success, 1 when the command or connection fails, 2 on bad usage";

/// A failure and the exit status it maps to.
struct Failure {
    message: String,
    status: u8,
}

impl Failure {
    fn usage(message: impl Into<String>) -> Self {
        Failure {
            message: format!("{}\n\n{USAGE}", message.into()),
            status: 2,
        }
    }
}

impl From<mongo_inline::Error> for Failure {
    fn from(e: mongo_inline::Error) -> Self {
        Failure {
            message: e.to_string(),
            status: 1,
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("mongo-inline: {}", f.message);
            ExitCode::from(f.status)
        }
    }
}

fn run(args: &[String]) -> Result<(), Failure> {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return Ok(());
    }
    let mut rest = args;
    let uri = match rest.first() {
        Some(first) if first.starts_with("mongodb://") || first.starts_with("mongodb+srv://") => {
            rest = &rest[1..];
            first.clone()
        }
        _ => std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017".into()),
    };
    let (subcommand, rest) = rest
        .split_first()
        .ok_or_else(|| Failure::usage("missing subcommand"))?;
    match subcommand.as_str() {
        "run" => run_command(&uri, rest),
        other => Err(Failure::usage(format!("unknown subcommand {other:?}"))),
    }
}

fn run_command(uri: &str, args: &[String]) -> Result<(), Failure> {
    let mut db_name = None;
    let mut command_text = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--db" => {
                let name = args
                    .get(i + 1)
                    .ok_or_else(|| Failure::usage("--db needs a database name"))?;
                db_name = Some(name.clone());
                i += 2;
            }
            text if command_text.is_none() => {
                command_text = Some(text.to_string());
                i += 1;
            }
            extra => return Err(Failure::usage(format!("unexpected argument {extra:?}"))),
        }
    }
    let command_text = command_text.ok_or_else(|| Failure::usage("missing the command"))?;
    let command = parse_extended_json(&command_text)?;
    let client = Client::with_uri_str(uri)?;
    let db = match db_name {
        Some(name) => client.database(&name),
        None => client
            .default_database()
            .unwrap_or_else(|| client.database("admin")),
    };
    let reply = db.run_command(command)?;
    println!("{}", Bson::Document(reply).into_relaxed_extjson());
    Ok(())
}

fn parse_extended_json(text: &str) -> Result<Document, Failure> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Failure::usage(format!("the command is not valid JSON: {e}")))?;
    match Bson::try_from(json) {
        Ok(Bson::Document(d)) => Ok(d),
        Ok(_) => Err(Failure::usage("the command must be a JSON object")),
        Err(e) => Err(Failure::usage(format!(
            "the command is not valid Extended JSON: {e}"
        ))),
    }
}
