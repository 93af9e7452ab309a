//! `mongo-inline`: the driver as a command-line tool for scripts.
//!
//! ```text
//! mongo-inline [URI] run [--db NAME] COMMAND
//! mongo-inline [URI] find NS [FILTER] [--sort JSON] [--projection JSON] [--limit N] [--skip N]
//! mongo-inline [URI] insert NS [DOCUMENT...]       (no DOCUMENT: one per line on stdin)
//! mongo-inline [URI] update NS FILTER UPDATE [--many] [--upsert]
//! mongo-inline [URI] delete NS FILTER [--many]
//! mongo-inline [URI] count NS [FILTER]
//! mongo-inline [URI] aggregate NS PIPELINE
//! ```
//! Documents go in and come out as Extended JSON: one relaxed document per
//! line for results, one result document for writes. Errors and connection
//! string warnings go to stderr; the exit status is 1 when the operation or
//! connection fails, 2 on bad usage. A closed stdout (`... | head`) is not a
//! failure: the operation has already succeeded. Every operation has a time
//! limit ([`DEFAULT_TIMEOUT`] unless `--timeout-ms` or the URI's `timeoutMS`
//! says otherwise), enforced by the driver's `timeoutMS`.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

use bson::{Bson, Document};
use mongo_inline::options::UpdateModification;
use mongo_inline::options::{FindOptions, UpdateOptions};
use mongo_inline::{Client, ClientOptions, Collection};

/// The time limit of each operation when neither `--timeout-ms` nor the
/// URI's `timeoutMS` gives one: a script must not hang on a server that
/// stopped answering.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

const USAGE: &str = "\
usage: mongo-inline [URI] SUBCOMMAND ARGS...

  run [--db NAME] COMMAND      runs one command on the primary, prints the reply
  find NS [FILTER] [--sort DOC] [--projection DOC] [--limit N] [--skip N]
                               prints the matching documents, one per line
  insert NS [DOC...]           inserts the documents (none given: one per line
                               from stdin), prints {insertedCount, insertedIds}
  update NS FILTER UPDATE [--many] [--upsert]
                               UPDATE is an operator document or a pipeline
                               array; prints {matchedCount, modifiedCount[, upsertedId]}
  delete NS FILTER [--many]    prints {deletedCount}
  count NS [FILTER]            prints the number of matching documents
  aggregate NS PIPELINE        prints the pipeline's results, one per line

  URI        a mongodb:// connection string (default: $MONGODB_URI, else
             mongodb://127.0.0.1:27017)
  NS         DB.COLLECTION, or COLLECTION with --db NAME or the URI's database
  --db NAME  the database (default: the URI's database, else admin for run)
  --timeout-ms N
             the time limit of the operation, in milliseconds (0: none);
             default: the URI's timeoutMS, else 60000. Giving both with
             different values is an error.
  COMMAND, FILTER, DOC, UPDATE, PIPELINE: Extended JSON (canonical or relaxed)
  update and delete change one document unless --many is given.

output: relaxed Extended JSON, one value per line
errors and connection string warnings: on stderr
exit status: 0 on success (also when stdout is closed early, e.g. by head),
             1 when the operation or connection fails or times out, 2 on bad usage";

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

    fn failed(message: impl Into<String>) -> Self {
        Failure {
            message: message.into(),
            status: 1,
        }
    }

    /// Whoever reads stdout stopped reading: nothing more to print, and the
    /// operation itself succeeded.
    fn output_closed() -> Self {
        Failure {
            message: String::new(),
            status: 0,
        }
    }
}

impl From<mongo_inline::Error> for Failure {
    fn from(e: mongo_inline::Error) -> Self {
        Failure::failed(e.to_string())
    }
}

fn main() -> ExitCode {
    match arguments().and_then(|args| run(&args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) if f.status == 0 => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("mongo-inline: {}", f.message);
            ExitCode::from(f.status)
        }
    }
}

/// The command-line arguments; one that is not UTF-8 is a usage error that
/// quotes nothing (it may be a connection string with a password).
fn arguments() -> Result<Vec<String>, Failure> {
    std::env::args_os()
        .skip(1)
        .enumerate()
        .map(|(i, arg)| {
            arg.into_string()
                .map_err(|_| Failure::usage(format!("argument {} is not valid UTF-8", i + 1)))
        })
        .collect()
}

/// The client for `uri`, with the time limit `--timeout-ms` gives, else
/// the URI's `timeoutMS`, else [`DEFAULT_TIMEOUT`]; the URI's warnings go to
/// stderr.
fn connect(uri: &str, timeout_flag: Option<&str>) -> Result<Client, Failure> {
    let (parsed, warnings) = ClientOptions::parse_with_warnings(uri)?;
    for warning in warnings {
        eprintln!("mongo-inline: warning: {warning}");
    }
    let timeout = match timeout_flag {
        Some(text) => Some(
            text.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| {
                    Failure::usage(format!(
                        "--timeout-ms {text:?} is not a number of milliseconds"
                    ))
                })?,
        ),
        None if parsed.timeout_setting().is_some() => None,
        None => Some(DEFAULT_TIMEOUT),
    };
    let options = match timeout {
        Some(timeout) => {
            let code = ClientOptions::builder().timeout(timeout).build()?;
            ClientOptions::parse_with(uri, code)?
        }
        None => parsed,
    };
    Ok(Client::with_options(options)?)
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
    let spec = match subcommand.as_str() {
        "run" => ArgSpec::new(1, 1, &["--db", "--timeout-ms"], &[]),
        "find" => ArgSpec::new(
            1,
            2,
            &[
                "--db",
                "--sort",
                "--projection",
                "--limit",
                "--skip",
                "--timeout-ms",
            ],
            &[],
        ),
        "insert" => ArgSpec::new(1, usize::MAX, &["--db", "--timeout-ms"], &[]),
        "update" => ArgSpec::new(3, 3, &["--db", "--timeout-ms"], &["--many", "--upsert"]),
        "delete" => ArgSpec::new(2, 2, &["--db", "--timeout-ms"], &["--many"]),
        "count" => ArgSpec::new(1, 2, &["--db", "--timeout-ms"], &[]),
        "aggregate" => ArgSpec::new(2, 2, &["--db", "--timeout-ms"], &[]),
        other => return Err(Failure::usage(format!("unknown subcommand {other:?}"))),
    };
    let args = spec.parse(subcommand, rest)?;
    let client = connect(&uri, args.value("--timeout-ms"))?;
    let mut out = std::io::stdout().lock();
    match subcommand.as_str() {
        "run" => run_command(&client, &args, &mut out),
        "find" => find(&client, &args, &mut out),
        "insert" => insert(&client, &args, &mut out),
        "update" => update(&client, &args, &mut out),
        "delete" => delete(&client, &args, &mut out),
        "count" => count(&client, &args, &mut out),
        "aggregate" => aggregate(&client, &args, &mut out),
        _ => unreachable!("the subcommand was checked above"),
    }
}

/// What a subcommand accepts: a range of positional arguments, options
/// that take a value, and flags.
struct ArgSpec {
    min_positional: usize,
    max_positional: usize,
    valued: &'static [&'static str],
    flags: &'static [&'static str],
}

/// A subcommand's parsed arguments.
struct Args {
    positional: Vec<String>,
    valued: Vec<(&'static str, String)>,
    flags: Vec<&'static str>,
}

impl ArgSpec {
    fn new(
        min_positional: usize,
        max_positional: usize,
        valued: &'static [&'static str],
        flags: &'static [&'static str],
    ) -> Self {
        ArgSpec {
            min_positional,
            max_positional,
            valued,
            flags,
        }
    }

    fn parse(&self, subcommand: &str, args: &[String]) -> Result<Args, Failure> {
        let mut parsed = Args {
            positional: Vec::new(),
            valued: Vec::new(),
            flags: Vec::new(),
        };
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].as_str();
            if let Some(&name) = self.valued.iter().find(|n| **n == arg) {
                let value = args
                    .get(i + 1)
                    .ok_or_else(|| Failure::usage(format!("{name} needs a value")))?;
                parsed.valued.push((name, value.clone()));
                i += 2;
            } else if let Some(&name) = self.flags.iter().find(|n| **n == arg) {
                parsed.flags.push(name);
                i += 1;
            } else if arg.starts_with("--") {
                return Err(Failure::usage(format!(
                    "{subcommand} does not take the option {arg:?}"
                )));
            } else {
                parsed.positional.push(arg.to_string());
                i += 1;
            }
        }
        let n = parsed.positional.len();
        if n < self.min_positional {
            return Err(Failure::usage(format!(
                "{subcommand} needs {} argument{}, got {n}",
                if self.max_positional > self.min_positional {
                    format!("at least {}", self.min_positional)
                } else {
                    self.min_positional.to_string()
                },
                if self.min_positional == 1 { "" } else { "s" }
            )));
        }
        if n > self.max_positional {
            return Err(Failure::usage(format!(
                "unexpected argument {:?}",
                parsed.positional[self.max_positional]
            )));
        }
        Ok(parsed)
    }
}

impl Args {
    fn value(&self, name: &str) -> Option<&str> {
        self.valued
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, name: &str) -> bool {
        self.flags.contains(&name)
    }

    fn document(&self, index: usize, what: &str) -> Result<Option<Document>, Failure> {
        self.positional
            .get(index)
            .map(|text| parse_document(text, what))
            .transpose()
    }

    /// The collection the first positional argument names.
    fn collection(&self, client: &Client) -> Result<Collection<Document>, Failure> {
        let ns = &self.positional[0];
        let collection_part = match (ns.split_once('.'), self.value("--db")) {
            (Some((_, coll)), None) => coll,
            _ => ns.as_str(),
        };
        if collection_part.is_empty() {
            return Err(Failure::usage(format!(
                "{ns:?} names no collection: write DB.COLLECTION, or COLLECTION with --db"
            )));
        }
        let (db, coll) = match (ns.split_once('.'), self.value("--db")) {
            (_, Some(db)) => (db.to_string(), ns.as_str()),
            (Some((db, coll)), None) if !db.is_empty() && !coll.is_empty() => {
                (db.to_string(), coll)
            }
            _ => match client.default_database() {
                Some(db) => (db.name().to_string(), ns.as_str()),
                None => {
                    return Err(Failure::usage(format!(
                        "{ns:?} names no database: write DB.COLLECTION, or give --db or a database in the URI"
                    )))
                }
            },
        };
        Ok(client.database(&db).collection(coll))
    }
}

fn run_command(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let command = parse_document(&args.positional[0], "the command")?;
    let db = match args.value("--db") {
        Some(name) => client.database(name),
        None => client
            .default_database()
            .unwrap_or_else(|| client.database("admin")),
    };
    let reply = db.run_command(command).run()?;
    print_line(out, Bson::Document(reply))
}

fn find(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let coll = args.collection(client)?;
    let filter = args.document(1, "the filter")?;
    let mut options = FindOptions::default();
    if let Some(sort) = args.value("--sort") {
        options = options.sort(parse_document(sort, "--sort")?);
    }
    if let Some(projection) = args.value("--projection") {
        options = options.projection(parse_document(projection, "--projection")?);
    }
    if let Some(limit) = args.value("--limit") {
        let limit: i64 = limit
            .parse()
            .ok()
            .filter(|l: &i64| *l >= 0)
            .ok_or_else(|| Failure::usage(format!("--limit {limit:?} is not a count")))?;
        options = options.limit(limit);
    }
    if let Some(skip) = args.value("--skip") {
        let skip: u64 = skip
            .parse()
            .map_err(|_| Failure::usage(format!("--skip {skip:?} is not a count")))?;
        options = options.skip(skip);
    }
    for document in coll
        .find(filter.unwrap_or_default())
        .with_options(options)
        .run()?
    {
        print_line(out, Bson::Document(document?))?;
    }
    Ok(())
}

fn insert(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let coll = args.collection(client)?;
    let mut documents = Vec::new();
    if args.positional.len() > 1 {
        for (i, text) in args.positional[1..].iter().enumerate() {
            documents.push(parse_document(text, &format!("document {}", i + 1))?);
        }
    } else {
        for (i, line) in std::io::stdin().lock().lines().enumerate() {
            let line = line.map_err(|e| Failure::failed(format!("reading stdin: {e}")))?;
            if line.trim().is_empty() {
                continue;
            }
            documents.push(parse_document(&line, &format!("stdin line {}", i + 1))?);
        }
    }
    if documents.is_empty() {
        return Err(Failure::usage("no documents to insert"));
    }
    let result = coll.insert_many(documents).run()?;
    let ids: Vec<Bson> = result.inserted_ids.into_values().collect();
    let mut reply = Document::new();
    reply.insert("insertedCount", ids.len() as i64);
    reply.insert("insertedIds", ids);
    print_line(out, Bson::Document(reply))
}

fn update(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let coll = args.collection(client)?;
    let filter = parse_document(&args.positional[1], "the filter")?;
    let update = match parse_json(&args.positional[2], "the update")? {
        Bson::Document(d) => UpdateModification::from(d),
        Bson::Array(stages) => UpdateModification::from(
            stages
                .into_iter()
                .map(|stage| match stage {
                    Bson::Document(d) => Ok(d),
                    _ => Err(Failure::usage("every pipeline stage must be a JSON object")),
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        _ => {
            return Err(Failure::usage(
                "the update must be a JSON object or a pipeline array",
            ))
        }
    };
    let options = UpdateOptions::default().upsert(args.flag("--upsert"));
    let result = if args.flag("--many") {
        coll.update_many(filter, update)
            .with_options(options)
            .run()?
    } else {
        coll.update_one(filter, update)
            .with_options(options)
            .run()?
    };
    let mut reply = Document::new();
    reply.insert("matchedCount", result.matched_count as i64);
    reply.insert("modifiedCount", result.modified_count as i64);
    if let Some(id) = result.upserted_id {
        reply.insert("upsertedId", id);
    }
    print_line(out, Bson::Document(reply))
}

fn delete(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let coll = args.collection(client)?;
    let filter = parse_document(&args.positional[1], "the filter")?;
    let result = if args.flag("--many") {
        coll.delete_many(filter).run()?
    } else {
        coll.delete_one(filter).run()?
    };
    let mut reply = Document::new();
    reply.insert("deletedCount", result.deleted_count as i64);
    print_line(out, Bson::Document(reply))
}

fn count(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let coll = args.collection(client)?;
    let filter = args.document(1, "the filter")?;
    let n = coll.count_documents(filter.unwrap_or_default()).run()?;
    print_line(out, Bson::Int64(n as i64))
}

fn aggregate(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let coll = args.collection(client)?;
    let Bson::Array(stages) = parse_json(&args.positional[1], "the pipeline")? else {
        return Err(Failure::usage(
            "the pipeline must be a JSON array of stages",
        ));
    };
    let pipeline = stages
        .into_iter()
        .map(|stage| match stage {
            Bson::Document(d) => Ok(d),
            _ => Err(Failure::usage("every pipeline stage must be a JSON object")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    for document in coll.aggregate(pipeline).run()? {
        print_line(out, Bson::Document(document?))?;
    }
    Ok(())
}

fn print_line(out: &mut impl Write, value: Bson) -> Result<(), Failure> {
    writeln!(out, "{}", value.into_relaxed_extjson()).map_err(|e| {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            Failure::output_closed()
        } else {
            Failure::failed(format!("writing the output: {e}"))
        }
    })
}

fn parse_json(text: &str, what: &str) -> Result<Bson, Failure> {
    let json: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Failure::usage(format!("{what} is not valid JSON: {e}")))?;
    Bson::try_from(json)
        .map_err(|e| Failure::usage(format!("{what} is not valid Extended JSON: {e}")))
}

fn parse_document(text: &str, what: &str) -> Result<Document, Failure> {
    match parse_json(text, what)? {
        Bson::Document(d) => Ok(d),
        _ => Err(Failure::usage(format!("{what} must be a JSON object"))),
    }
}
