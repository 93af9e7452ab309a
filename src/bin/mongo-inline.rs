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
//! mongo-inline [URI] put DB FILENAME [--bucket NAME]   (GridFS: the file from stdin)
//! mongo-inline [URI] get DB FILENAME [--revision N] [--bucket NAME]   (to stdout)
//! mongo-inline [URI] ls DB [FILTER] [--bucket NAME]
//! mongo-inline [URI] rm DB FILENAME [--bucket NAME]
//! mongo-inline [URI] watch [DB.COLLECTION|DB|*] [PIPELINE] [--max-time-ms N] [--limit N]
//! ```
//! Documents go in and come out as Extended JSON: one relaxed document per
//! line for results, one result document for writes (`{"acknowledged":
//! false}` for a `w=0` write, of which nothing is known). Errors and
//! connection string warnings go to stderr; the exit status is 1 when the
//! operation or connection fails, 2 on bad usage. No message quotes an
//! argument that may hold a password (one with `://` or `@`): it is named
//! by its position instead, as stderr often lands in shared logs. A closed stdout (`... | head`) is not a
//! failure: the operation has already succeeded. Every operation has a time
//! limit ([`DEFAULT_TIMEOUT`] unless `--timeout-ms` or the URI's `timeoutMS`
//! says otherwise), enforced by the driver's `timeoutMS`.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::time::Duration;

use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use mongo_inline::options::UpdateModifications;
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
                               from stdin; one bad line and nothing is
                               inserted), prints {insertedCount, insertedIds}
  update NS FILTER UPDATE [--many] [--upsert]
                               UPDATE is an operator document or a pipeline
                               array; prints {matchedCount, modifiedCount[, upsertedId]}
  delete NS FILTER [--many]    prints {deletedCount}
  count NS [FILTER]            prints the number of matching documents
  aggregate NS PIPELINE        prints the pipeline's results, one per line
  put DB FILENAME              stores stdin as a GridFS file, prints {_id, length}
  get DB FILENAME [--revision N]
                               writes a GridFS file (latest revision: -1) to stdout
  ls DB [FILTER]               prints the GridFS files documents, one per line
  rm DB FILENAME               deletes every revision of a GridFS file
  --bucket NAME                the GridFS bucket (default: fs)
  watch [TARGET [PIPELINE]] [--max-time-ms N] [--limit N]
                               prints the change events of a collection
                               (DB.COLLECTION), a database (DB) or the whole
                               deployment (* or nothing), one per line, as they
                               come; stops after N events (--limit) or about
                               N ms (--max-time-ms), else runs until killed

  URI        a mongodb:// connection string (default: $MONGODB_URI, else
             mongodb://127.0.0.1:27017)
  NS         DB.COLLECTION, or COLLECTION with --db NAME or the URI's database
  --db NAME  the database (default: the URI's database, else admin for run)
  -v, -vv    the driver's log (command, topology, serverSelection messages
             with their fields) on stderr, at debug (-v) or trace (-vv)
  --timeout-ms N
             the time limit of the operation, in milliseconds (0: none);
             default: the URI's timeoutMS, else 60000. Giving both with
             different values is an error.
  $MONGO_INLINE_STATE_FILE
             a file in which a run leaves what the next may reuse (the
             SCRAM keys, sealed under the password): as sensitive as the
             URI; mode 0600 in a directory only this user can write
  COMMAND, FILTER, DOC, UPDATE, PIPELINE: Extended JSON (canonical or relaxed)
  update and delete change one document unless --many is given.
  With w=0 in the URI a write prints {acknowledged: false}: the server
  reports nothing, so there are no counts.

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

/// Whether `arg` may hold credentials: a connection string, even a
/// misspelt one (`MONGODB://`, `mongo://`, a leading space), or anything
/// with a user-information `@`.
fn may_hold_credentials(arg: &str) -> bool {
    arg.contains("://") || arg.contains('@')
}

/// `arg` as a message shows it: quoted, or, when it may hold credentials,
/// only its position (1 is the first argument after the program's name).
fn quoted(arg: &str, position: usize) -> String {
    if may_hold_credentials(arg) {
        format!("argument {position} (not shown: it may hold a password)")
    } else {
        format!("{arg:?}")
    }
}

/// The error for a first argument that is not a subcommand.
fn unknown_subcommand(arg: &str, position: usize) -> Failure {
    if may_hold_credentials(arg) {
        Failure::usage(format!(
            "argument {position} is not a subcommand but looks like a connection string; \
             give at most one, first, starting with exactly \"mongodb://\" or \
             \"mongodb+srv://\" (the argument is not shown: it may hold a password)"
        ))
    } else {
        Failure::usage(format!("unknown subcommand {arg:?}"))
    }
}

fn main() -> ExitCode {
    match arguments().and_then(|args| run(&verbosity(args))) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) if f.status == 0 => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("mongo-inline: {}", f.message);
            ExitCode::from(f.status)
        }
    }
}

/// `args` without `-v` (the driver's logs at debug on stderr) and `-vv`
/// (at trace), which may stand anywhere; installs the logger they ask for.
fn verbosity(args: Vec<String>) -> Vec<String> {
    let level = args
        .iter()
        .filter_map(|a| match a.as_str() {
            "-v" | "--verbose" => Some(log::LevelFilter::Debug),
            "-vv" => Some(log::LevelFilter::Trace),
            _ => None,
        })
        .max();
    if let Some(level) = level {
        if log::set_logger(&STDERR_LOGGER).is_ok() {
            log::set_max_level(level);
        }
    }
    args.into_iter()
        .filter(|a| !matches!(a.as_str(), "-v" | "--verbose" | "-vv"))
        .collect()
}

/// Writes each log record to stderr on one line: level, target, the
/// message, then the structured fields as `key=value`.
struct StderrLogger;

static STDERR_LOGGER: StderrLogger = StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("mongo_inline")
    }

    fn log(&self, record: &log::Record<'_>) {
        struct Line(String);
        impl<'kvs> log::kv::VisitSource<'kvs> for Line {
            fn visit_pair(
                &mut self,
                key: log::kv::Key<'kvs>,
                value: log::kv::Value<'kvs>,
            ) -> Result<(), log::kv::Error> {
                use std::fmt::Write as _;
                let _ = write!(self.0, " {key}={value}");
                Ok(())
            }
        }
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut line = Line(format!(
            "{} {}: {}",
            record.level(),
            record.target(),
            record.args()
        ));
        let _ = record.key_values().visit(&mut line);
        eprintln!("{}", line.0);
    }

    fn flush(&self) {}
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

/// Names the state file a run starts warm from and leaves for the next
/// (opt-in; see `ClientOptions::state_file`).
const STATE_FILE_VARIABLE: &str = "MONGO_INLINE_STATE_FILE";

/// The client for `uri`, with the time limit `--timeout-ms` gives, else
/// the URI's `timeoutMS`, else [`DEFAULT_TIMEOUT`]; the URI's warnings go to
/// stderr.
/// `timeout_flag` is `--timeout-ms`'s position and value.
fn connect(uri: &str, timeout_flag: Option<(usize, &str)>) -> Result<Client, Failure> {
    let (parsed, warnings) = ClientOptions::parse_with_warnings(uri)?;
    for warning in warnings {
        eprintln!("mongo-inline: warning: {warning}");
    }
    let timeout = match timeout_flag {
        Some((position, text)) => Some(text.parse::<u64>().map(Duration::from_millis).map_err(
            |_| {
                Failure::usage(format!(
                    "--timeout-ms {} is not a number of milliseconds",
                    quoted(text, position)
                ))
            },
        )?),
        None if parsed.timeout().is_some() => None,
        None => Some(DEFAULT_TIMEOUT),
    };
    let state_file = std::env::var_os(STATE_FILE_VARIABLE).filter(|v| !v.is_empty());
    let options = if timeout.is_none() && state_file.is_none() {
        parsed
    } else {
        let code = ClientOptions::builder()
            .timeout(timeout)
            .state_file(state_file.map(std::path::PathBuf::from))
            .build();
        ClientOptions::parse_with(uri, code)?
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
    // Positions count from 1, the first argument after the program's name.
    let subcommand_position = args.len() - rest.len() + 1;
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
        "put" | "rm" => ArgSpec::new(2, 2, &["--bucket", "--timeout-ms"], &[]),
        "get" => ArgSpec::new(2, 2, &["--bucket", "--revision", "--timeout-ms"], &[]),
        "ls" => ArgSpec::new(1, 2, &["--bucket", "--timeout-ms"], &[]),
        "watch" => ArgSpec::new(0, 2, &["--max-time-ms", "--limit", "--timeout-ms"], &[]),
        other => return Err(unknown_subcommand(other, subcommand_position)),
    };
    let args = spec.parse(subcommand, rest, subcommand_position + 1)?;
    let client = connect(&uri, args.valued_at("--timeout-ms"))?;
    let mut out = std::io::stdout().lock();
    match subcommand.as_str() {
        "run" => run_command(&client, &args, &mut out),
        "find" => find(&client, &args, &mut out),
        "insert" => insert(&client, &args, &mut out),
        "update" => update(&client, &args, &mut out),
        "delete" => delete(&client, &args, &mut out),
        "count" => count(&client, &args, &mut out),
        "aggregate" => aggregate(&client, &args, &mut out),
        "put" => gridfs_put(&client, &args, &mut out),
        "get" => gridfs_get(&client, &args, &mut out),
        "ls" => gridfs_ls(&client, &args, &mut out),
        "rm" => gridfs_rm(&client, &args, &mut out),
        "watch" => watch(&client, &args, &mut out),
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

/// A subcommand's parsed arguments, each with its position on the command
/// line (for messages that must not quote it).
struct Args {
    positional: Vec<(usize, String)>,
    valued: Vec<(&'static str, usize, String)>,
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

    /// Parses `args`, the first of which is at `first_position`.
    fn parse(
        &self,
        subcommand: &str,
        args: &[String],
        first_position: usize,
    ) -> Result<Args, Failure> {
        let mut parsed = Args {
            positional: Vec::new(),
            valued: Vec::new(),
            flags: Vec::new(),
        };
        let mut i = 0;
        while i < args.len() {
            let arg = args[i].as_str();
            let position = first_position + i;
            if let Some(&name) = self.valued.iter().find(|n| **n == arg) {
                let value = args
                    .get(i + 1)
                    .ok_or_else(|| Failure::usage(format!("{name} needs a value")))?;
                parsed.valued.push((name, position + 1, value.clone()));
                i += 2;
            } else if let Some(&name) = self.flags.iter().find(|n| **n == arg) {
                parsed.flags.push(name);
                i += 1;
            } else if arg.starts_with("--") {
                return Err(Failure::usage(format!(
                    "{subcommand} does not take the option {}",
                    quoted(arg, position)
                )));
            } else {
                parsed.positional.push((position, arg.to_string()));
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
            let (position, arg) = &parsed.positional[self.max_positional];
            return Err(Failure::usage(format!(
                "unexpected argument {}",
                quoted(arg, *position)
            )));
        }
        Ok(parsed)
    }
}

impl Args {
    fn value(&self, name: &str) -> Option<&str> {
        self.valued_at(name).map(|(_, v)| v)
    }

    /// The value of the option `name` and its position.
    fn valued_at(&self, name: &str) -> Option<(usize, &str)> {
        self.valued
            .iter()
            .rev()
            .find(|(n, _, _)| *n == name)
            .map(|(_, position, v)| (*position, v.as_str()))
    }

    /// The positional argument at `index` (which the spec guarantees).
    fn positional(&self, index: usize) -> &str {
        &self.positional[index].1
    }

    fn flag(&self, name: &str) -> bool {
        self.flags.contains(&name)
    }

    fn document(&self, index: usize, what: &str) -> Result<Option<Document>, Failure> {
        self.positional
            .get(index)
            .map(|(_, text)| parse_document(text, what))
            .transpose()
    }

    /// The collection the first positional argument names.
    fn collection(&self, client: &Client) -> Result<Collection<Document>, Failure> {
        let (position, ns) = &self.positional[0];
        let shown = quoted(ns, *position);
        let collection_part = match (ns.split_once('.'), self.value("--db")) {
            (Some((_, coll)), None) => coll,
            _ => ns.as_str(),
        };
        if collection_part.is_empty() {
            return Err(Failure::usage(format!(
                "{shown} names no collection: write DB.COLLECTION, or COLLECTION with --db"
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
                        "{shown} names no database: write DB.COLLECTION, or give --db or a database in the URI"
                    )))
                }
            },
        };
        Ok(client.database(&db).collection(coll))
    }
}

fn run_command(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let command = parse_document(args.positional(0), "the command")?;
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
    if let Some((position, limit)) = args.valued_at("--limit") {
        let limit: i64 = limit
            .parse()
            .ok()
            .filter(|l: &i64| *l >= 0)
            .ok_or_else(|| {
                Failure::usage(format!(
                    "--limit {} is not a count",
                    quoted(limit, position)
                ))
            })?;
        options = options.limit(limit);
    }
    if let Some((position, skip)) = args.valued_at("--skip") {
        let skip: u64 = skip.parse().map_err(|_| {
            Failure::usage(format!("--skip {} is not a count", quoted(skip, position)))
        })?;
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

/// How much BSON one `insert_many` call takes from the documents held. A
/// call's documents exist about four more times while it runs (taken out,
/// encoded, batched, framed), so a chunk is kept small beside the input;
/// 2 MiB is still hundreds of documents a round trip.
const INSERT_CHUNK_BYTES: usize = 2 * 1024 * 1024;

fn insert(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let coll = args.collection(client)?.clone_with_type::<RawDocumentBuf>();
    let documents = if args.positional.len() > 1 {
        let mut documents = Documents::default();
        for (i, (_, text)) in args.positional[1..].iter().enumerate() {
            documents.push(parse_document(text, &format!("document {}", i + 1))?)?;
        }
        documents
    } else {
        Documents::read_lines(std::io::stdin().lock())?
    };
    if documents.count == 0 {
        return Err(Failure::usage("no documents to insert"));
    }
    // Every document parsed before the first is sent: a bad line anywhere
    // inserts nothing.
    let mut acknowledged = true;
    for chunk in documents.chunks(INSERT_CHUNK_BYTES) {
        acknowledged &= coll.insert_many(&chunk?).run()?.acknowledged;
    }
    if !acknowledged {
        return print_unacknowledged(out);
    }
    let mut line = format!("{{\"insertedCount\":{},\"insertedIds\":[", documents.count);
    for (i, document) in documents.iter().enumerate() {
        let id = document
            .and_then(|d| d.get("_id").ok().flatten().map(|id| id.to_raw_bson()))
            .and_then(|id| Bson::try_from(id).ok())
            .ok_or_else(|| Failure::failed("a held document lost its _id"))?;
        if i > 0 {
            line.push(',');
        }
        line.push_str(&id.into_relaxed_extjson().to_string());
    }
    line.push_str("]}");
    print_text(out, &line)
}

/// Documents to insert, held as their BSON one after another in one buffer
/// (about the size of the JSON they came from, where `Document`s took
/// three times as much), each with an `_id`, first when it was generated.
#[derive(Default)]
struct Documents {
    bson: Vec<u8>,
    count: usize,
}

impl Documents {
    /// One document per non-blank line; the first bad line is an error.
    fn read_lines(mut input: impl BufRead) -> Result<Documents, Failure> {
        let mut documents = Documents::default();
        let mut line = Vec::new();
        for number in 1.. {
            line.clear();
            let read = input
                .read_until(b'\n', &mut line)
                .map_err(|e| Failure::failed(format!("reading stdin: {e}")))?;
            if read == 0 {
                break;
            }
            let what = format!("stdin line {number}");
            let text = std::str::from_utf8(&line)
                .map_err(|_| Failure::usage(format!("{what} is not valid UTF-8")))?;
            if text.trim().is_empty() {
                continue;
            }
            documents.push(parse_document(text, &what)?)?;
        }
        Ok(documents)
    }

    fn push(&mut self, mut document: Document) -> Result<(), Failure> {
        if !document.contains_key("_id") {
            let mut with_id = bson::doc! { "_id": mongo_inline::new_object_id() };
            with_id.extend(document);
            document = with_id;
        }
        document.to_writer(&mut self.bson).map_err(|e| {
            Failure::usage(format!(
                "document {} cannot be encoded as BSON: {e}",
                self.count + 1
            ))
        })?;
        self.count += 1;
        Ok(())
    }

    /// The documents in order, each borrowed from the buffer.
    fn iter(&self) -> impl Iterator<Item = Option<&RawDocument>> {
        let mut rest = self.bson.as_slice();
        std::iter::from_fn(move || {
            let length = rest.get(..4)?;
            let length = u32::from_le_bytes(length.try_into().ok()?) as usize;
            if length < 5 {
                // Not a document's length: stop rather than loop on it.
                rest = &[];
                return Some(None);
            }
            let (document, after) = rest.split_at(length.min(rest.len()));
            rest = after;
            Some(RawDocument::from_bytes(document).ok())
        })
    }

    /// The documents in runs of about `bytes` BSON bytes each (at least one
    /// document per run), as the driver takes them.
    fn chunks(
        &self,
        bytes: usize,
    ) -> impl Iterator<Item = Result<Vec<RawDocumentBuf>, Failure>> + '_ {
        let mut documents = self.iter().peekable();
        std::iter::from_fn(move || {
            documents.peek()?;
            let mut chunk = Vec::new();
            let mut size = 0;
            while size < bytes {
                let Some(document) = documents.next() else {
                    break;
                };
                let Some(document) = document else {
                    return Some(Err(Failure::failed("a held document is not valid BSON")));
                };
                size += document.as_bytes().len();
                chunk.push(document.to_raw_document_buf());
            }
            Some(Ok(chunk))
        })
    }
}

fn update(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let coll = args.collection(client)?;
    let filter = parse_document(args.positional(1), "the filter")?;
    let update = match parse_json(args.positional(2), "the update")? {
        Bson::Document(d) => UpdateModifications::from(d),
        Bson::Array(stages) => UpdateModifications::from(
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
    if !result.acknowledged {
        return print_unacknowledged(out);
    }
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
    let filter = parse_document(args.positional(1), "the filter")?;
    let result = if args.flag("--many") {
        coll.delete_many(filter).run()?
    } else {
        coll.delete_one(filter).run()?
    };
    if !result.acknowledged {
        return print_unacknowledged(out);
    }
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
    let pipeline = parse_pipeline(args.positional(1))?;
    for document in coll.aggregate(pipeline).run()? {
        print_line(out, Bson::Document(document?))?;
    }
    Ok(())
}

fn parse_pipeline(text: &str) -> Result<Vec<Document>, Failure> {
    let Bson::Array(stages) = parse_json(text, "the pipeline")? else {
        return Err(Failure::usage(
            "the pipeline must be a JSON array of stages",
        ));
    };
    stages
        .into_iter()
        .map(|stage| match stage {
            Bson::Document(d) => Ok(d),
            _ => Err(Failure::usage("every pipeline stage must be a JSON object")),
        })
        .collect()
}

/// The longest a `watch` `getMore` waits on the server: `--max-time-ms` is
/// kept to within about this, and an idle stream costs a round trip a second.
const WATCH_AWAIT: Duration = Duration::from_secs(1);

/// `watch`: change events as they come, until `--limit` events or about
/// `--max-time-ms`. Each `next_if_any` is one bounded `getMore`, so the
/// time limit is checked at least once a [`WATCH_AWAIT`].
fn watch(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let limit = count_option(args, "--limit")?;
    let max_time = count_option(args, "--max-time-ms")?.map(Duration::from_millis);
    let pipeline = match args.positional.get(1) {
        Some((_, text)) => parse_pipeline(text)?,
        None => Vec::new(),
    };
    // The handles outlive the builder, which borrows their client.
    let target = args.positional.first().map(|(_, t)| t.as_str());
    let target = target.filter(|t| *t != "*");
    let split = target.map(|t| t.split_once('.').unwrap_or((t, "")));
    let database = split.map(|(db, _)| client.database(db));
    let collection = match (split, &database) {
        (Some((_, coll)), Some(db)) if !coll.is_empty() => Some(db.collection::<Document>(coll)),
        _ => None,
    };
    let action = match (&collection, &database) {
        (Some(coll), _) => coll.watch(),
        (None, Some(db)) => db.watch(),
        (None, None) => client.watch(),
    };
    // A zero maxAwaitTimeMS would be the server's default, not no wait.
    let await_time = max_time
        .map_or(WATCH_AWAIT, |t| t.min(WATCH_AWAIT))
        .max(Duration::from_millis(1));
    let mut stream = action
        .pipeline(pipeline)
        .max_await_time(await_time)
        .run()?
        .with_type::<Document>();
    let deadline = max_time.map(|t| wall_clock() + t);
    let mut printed = 0;
    while limit.is_none_or(|limit| printed < limit) && deadline.is_none_or(|d| wall_clock() < d) {
        match stream.next_if_any()? {
            Some(event) => {
                // stdout is line-buffered: each event is out at once.
                print_line(out, Bson::Document(event))?;
                printed += 1;
            }
            None if !stream.is_alive() => break,
            None => {}
        }
    }
    Ok(())
}

/// The time, for `watch --max-time-ms`: a limit the user sets on this
/// program's run, not a rule of the driver, whose one clock is the shell's.
#[allow(clippy::disallowed_methods)]
fn wall_clock() -> std::time::Instant {
    std::time::Instant::now()
}

/// A non-negative integer option such as `--limit`.
fn count_option(args: &Args, name: &str) -> Result<Option<u64>, Failure> {
    args.valued_at(name)
        .map(|(position, text)| {
            text.parse::<u64>().map_err(|_| {
                Failure::usage(format!("{name} {} is not a count", quoted(text, position)))
            })
        })
        .transpose()
}

/// The result of a `w=0` write: the server said nothing, so there is
/// nothing to count.
/// The GridFS bucket `--bucket` names (`fs` by default) in the database
/// the first positional argument names.
fn bucket(client: &Client, args: &Args) -> mongo_inline::gridfs::GridFsBucket {
    let mut options = mongo_inline::options::GridFsBucketOptions::default();
    if let Some(name) = args.value("--bucket") {
        options = options.bucket_name(name.to_string());
    }
    client.database(args.positional(0)).gridfs_bucket(options)
}

/// An I/O failure of a GridFS stream: the driver's error when it holds one.
fn stream_failure(e: std::io::Error, writing_output: bool) -> Failure {
    if writing_output && e.kind() == std::io::ErrorKind::BrokenPipe {
        return Failure::output_closed();
    }
    Failure::failed(e.to_string())
}

fn gridfs_put(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let bucket = bucket(client, args);
    let mut upload = bucket.open_upload_stream(args.positional(1)).run()?;
    // One chunk in memory however large the input: io::copy writes through
    // the stream's chunk buffer. Dropping the stream on an error deletes
    // the chunks already written, so a failed put stores nothing.
    let length = std::io::copy(&mut std::io::stdin().lock(), &mut upload)
        .map_err(|e| Failure::failed(format!("reading stdin or storing it: {e}")))?;
    upload.close().map_err(|e| stream_failure(e, false))?;
    let id = upload.id().clone();
    print_line(
        out,
        Bson::Document(bson::doc! { "_id": id, "length": length as i64 }),
    )
}

fn gridfs_get(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let bucket = bucket(client, args);
    let mut open = bucket.open_download_stream_by_name(args.positional(1));
    if let Some((position, text)) = args.valued_at("--revision") {
        let revision = text.parse::<i32>().map_err(|_| {
            Failure::usage(format!(
                "--revision {} is not a whole number",
                quoted(text, position)
            ))
        })?;
        open = open.revision(revision);
    }
    let mut download = open.run()?;
    // io::copy moves the file through a small buffer on the stack: the
    // chunk in the download stream is the only one in memory.
    copy_out(&mut download, out)?;
    out.flush().map_err(|e| stream_failure(e, true))
}

/// Copies `download` to `out`, telling a failed read (the driver's error)
/// from a failed write (a closed pipe is not the download's failure).
fn copy_out(download: &mut impl std::io::Read, out: &mut impl Write) -> Result<(), Failure> {
    let mut writer = WriteFailures { out, failure: None };
    match std::io::copy(download, &mut writer) {
        Ok(_) => Ok(()),
        Err(e) => Err(match writer.failure {
            Some(write_error) => stream_failure(write_error, true),
            None => stream_failure(e, false),
        }),
    }
}

/// A writer that remembers its own failure, so that an error out of
/// `io::copy` can be told from the reader's.
struct WriteFailures<'a, W: Write> {
    out: &'a mut W,
    failure: Option<std::io::Error>,
}

impl<W: Write> WriteFailures<'_, W> {
    fn note(&mut self, e: &std::io::Error) {
        // write_all retries an interrupted write.
        if e.kind() != std::io::ErrorKind::Interrupted {
            self.failure = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
    }
}

impl<W: Write> Write for WriteFailures<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.out.write(buf).inspect_err(|e| self.note(e))
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush().inspect_err(|e| self.note(e))
    }
}

fn gridfs_ls(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let filter = args.document(1, "the filter")?;
    let bucket = bucket(client, args);
    for file in bucket
        .find(filter.unwrap_or_default())
        .sort(bson::doc! { "filename": 1, "uploadDate": 1 })
        .run()?
    {
        let file = bson::to_bson(&file?).map_err(|e| Failure::failed(e.to_string()))?;
        print_line(out, file)?;
    }
    Ok(())
}

fn gridfs_rm(client: &Client, args: &Args, out: &mut impl Write) -> Result<(), Failure> {
    let bucket = bucket(client, args);
    bucket.delete_by_name(args.positional(1)).run()?;
    print_line(
        out,
        Bson::Document(bson::doc! { "deleted": args.positional(1) }),
    )
}

fn print_unacknowledged(out: &mut impl Write) -> Result<(), Failure> {
    print_line(out, Bson::Document(bson::doc! { "acknowledged": false }))
}

fn print_line(out: &mut impl Write, value: Bson) -> Result<(), Failure> {
    print_text(out, &value.into_relaxed_extjson().to_string())
}

fn print_text(out: &mut impl Write, text: &str) -> Result<(), Failure> {
    writeln!(out, "{text}").map_err(|e| {
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
