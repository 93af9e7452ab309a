//! Writes the logging spec's messages ([`LogMessage`], built by the pure
//! core) as `log` records: the unstructured form as the record's text and
//! every structured field as a key-value pair, so that a logger with
//! key-value support (`env_logger` with its `kv` feature, `tracing` through
//! `tracing-log`) shows `commandName`, `durationMS` and the rest.
//!
//! Configuration is the application's logger's, plus the spec's
//! environment variables (`MONGODB_LOG_ALL`, `MONGODB_LOG_COMMAND`, ...,
//! `MONGODB_LOG_MAX_DOCUMENT_LENGTH`, `MONGODB_LOG_PATH`), read once per
//! process. When a component variable is set, only what the variables allow
//! is logged; and when the application installed no logger, the first
//! client installs a plain one that writes to `MONGODB_LOG_PATH` (stderr by
//! default), so that logging needs no code change.

use std::io::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

use bson::Bson;
use log::kv::{Key, Source, Value, VisitSource};

use crate::proto::logging::{Component, LogDestination, LogMessage, LogSettings};

static SETTINGS: OnceLock<LogSettings> = OnceLock::new();

/// The environment's logging settings, read on first use.
pub(crate) fn settings() -> &'static LogSettings {
    SETTINGS.get_or_init(|| LogSettings::from_env(|name| std::env::var(name).ok()))
}

/// Whether a `level` message of `component` would be written: checked
/// before a message is built (building one renders documents as JSON).
pub(crate) fn enabled(component: Component, level: log::Level) -> bool {
    settings().allows(component, level) && log::log_enabled!(target: component.target(), level)
}

/// The length [`set_max_document_length`] set; `usize::MAX` when unset.
static MAX_DOCUMENT_LENGTH: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Sets the longest a document (a command, a reply) in a log message may
/// be, in characters, for the whole process; `None` goes back to
/// `MONGODB_LOG_MAX_DOCUMENT_LENGTH`, or the spec's default of 1000. Set
/// in code, it wins over the environment, as the logging spec requires;
/// an application that wants the environment to win reads the variable
/// itself and passes it here.
pub fn set_max_document_length(length: Option<usize>) {
    MAX_DOCUMENT_LENGTH.store(length.unwrap_or(usize::MAX), Ordering::Relaxed);
}

/// The longest a document in a message may be, in characters.
pub(crate) fn max_document_length() -> usize {
    match MAX_DOCUMENT_LENGTH.load(Ordering::Relaxed) {
        usize::MAX => settings().max_document_length,
        set => set,
    }
}

/// Writes `message`, if its component and level are enabled.
pub(crate) fn emit(message: &LogMessage) {
    if !enabled(message.component, message.level) {
        return;
    }
    let fields = Fields(&message.fields);
    log::logger().log(
        &log::Record::builder()
            .target(message.component.target())
            .level(message.level)
            .module_path_static(Some(module_path!()))
            .args(format_args!("{}", message.text))
            .key_values(&fields)
            .build(),
    );
}

/// A message's fields as `log` key-value pairs: strings, integers, doubles
/// and booleans as themselves (so a logger keeps their types), anything
/// else in `Bson`'s display form
/// (the builders put documents in as relaxed Extended JSON strings).
struct Fields<'a>(&'a bson::Document);

impl Source for Fields<'_> {
    fn visit<'kvs>(&'kvs self, visitor: &mut dyn VisitSource<'kvs>) -> Result<(), log::kv::Error> {
        for (key, value) in self.0 {
            let key = Key::from_str(key);
            match value {
                Bson::String(text) => visitor.visit_pair(key, Value::from(text.as_str()))?,
                Bson::Int32(n) => visitor.visit_pair(key, Value::from(*n))?,
                Bson::Int64(n) => visitor.visit_pair(key, Value::from(*n))?,
                Bson::Double(n) => visitor.visit_pair(key, Value::from(*n))?,
                Bson::Boolean(b) => visitor.visit_pair(key, Value::from(*b))?,
                other => visitor.visit_pair(key, Value::from_display(other))?,
            }
        }
        Ok(())
    }
}

/// Installs the fallback logger when the environment configures logging
/// and the application has no logger of its own; once per process. A
/// logger the application installs later is refused by `log` (one logger
/// per process), so applications with their own set it before the first
/// client, as usual.
pub(crate) fn install_env_logger() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let settings = settings();
        if !settings.configured() {
            return;
        }
        let logger = EnvLogger {
            out: Mutex::new(open(&settings.destination)),
        };
        // Leaked once per process: `log` keeps its logger for good.
        if log::set_logger(Box::leak(Box::new(logger))).is_ok() {
            log::set_max_level(settings.max_level());
        }
    });
}

/// Where the fallback logger writes: a bad path falls back to stderr, as
/// the spec requires (no error).
fn open(destination: &LogDestination) -> Box<dyn std::io::Write + Send> {
    match destination {
        LogDestination::Stdout => Box::new(std::io::stdout()),
        LogDestination::Stderr => Box::new(std::io::stderr()),
        LogDestination::File(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_or_else(
                |_| Box::new(std::io::stderr()) as Box<dyn std::io::Write + Send>,
                |file| Box::new(file),
            ),
    }
}

/// The fallback logger: one line per record, its level, target, text and
/// fields.
struct EnvLogger {
    out: Mutex<Box<dyn std::io::Write + Send>>,
}

impl log::Log for EnvLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        Component::from_target(metadata.target())
            .is_some_and(|c| settings().allows(c, metadata.level()))
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let line = format_record(record);
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "{line}");
    }

    fn flush(&self) {
        let _ = self.out.lock().unwrap_or_else(|p| p.into_inner()).flush();
    }
}

/// A record as one line: level, target, text, then `key=value` for each
/// field (the CLI's `-v` prints these too).
pub(crate) fn format_record(record: &log::Record<'_>) -> String {
    struct Line(String);
    impl<'kvs> VisitSource<'kvs> for Line {
        fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), log::kv::Error> {
            use std::fmt::Write as _;
            let _ = write!(self.0, " {key}={value}");
            Ok(())
        }
    }
    let mut line = Line(format!(
        "{:<5} {}: {}",
        record.level(),
        record.target(),
        record.args()
    ));
    let _ = record.key_values().visit(&mut line);
    line.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_records_fields_keep_their_types_and_order() {
        let fields = bson::doc! {
            "message": "Command started", "requestId": 7, "operationId": 9_i64,
            "durationMS": 1.5, "awaited": false, "other": [1],
        };
        let source = Fields(&fields);
        let text = format_record(
            &log::Record::builder()
                .target("mongo_inline::command")
                .level(log::Level::Debug)
                .args(format_args!("text"))
                .key_values(&source)
                .build(),
        );
        assert_eq!(
            text,
            "DEBUG mongo_inline::command: text message=Command started requestId=7 \
             operationId=9 durationMS=1.5 awaited=false other=[1]"
        );
        let request_id = source.get(Key::from_str("requestId")).unwrap();
        assert_eq!(request_id.to_i64(), Some(7));
        let message = source.get(Key::from_str("message")).unwrap();
        assert_eq!(message.to_borrowed_str(), Some("Command started"));
    }
}
