//! Log messages in unified tests: `observeLogMessages` on a client entity
//! and `expectLogMessages` (unified-test-format.md, "expectedLogMessage").
//!
//! One process-wide `log` logger keeps every record of the driver's spec
//! components that a test thread logs while it observes logs, with its
//! structured fields read back from the record's key-value pairs (what any
//! logger sees). The logger is global, so each record is told apart by
//! client through its `topologyId` field (the format's suggestion for
//! drivers that configure logging globally).

use std::cell::Cell;
use std::sync::{Mutex, Once};

use bson::{Bson, Document};
use log::kv::{Key, Value, VisitSource};
use mongo_inline::event::{
    COMMAND_LOG_TARGET, CONNECTION_LOG_TARGET, SERVER_SELECTION_LOG_TARGET, TOPOLOGY_LOG_TARGET,
};

use super::matching::{self, Entities};

/// One record as the test logger kept it.
#[derive(Clone, Debug)]
pub struct Captured {
    thread: std::thread::ThreadId,
    /// The spec's component name.
    pub component: &'static str,
    pub level: log::Level,
    /// The record's key-value pairs.
    pub fields: Document,
}

struct Capture(Mutex<Vec<Captured>>);

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

thread_local! {
    /// Whether this thread's test observes logs: the driver builds log
    /// messages only when a logger wants them, so other tests pay nothing.
    static OBSERVING: Cell<bool> = const { Cell::new(false) };
}

/// The spec's component name of a `log` target.
fn component(target: &str) -> Option<&'static str> {
    [
        (COMMAND_LOG_TARGET, "command"),
        (TOPOLOGY_LOG_TARGET, "topology"),
        (SERVER_SELECTION_LOG_TARGET, "serverSelection"),
        (CONNECTION_LOG_TARGET, "connection"),
    ]
    .into_iter()
    .find(|(t, _)| *t == target)
    .map(|(_, name)| name)
}

impl log::Log for Capture {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        OBSERVING.with(Cell::get) && component(metadata.target()).is_some()
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut fields = Fields(Document::new());
        let _ = record.key_values().visit(&mut fields);
        let captured = Captured {
            thread: std::thread::current().id(),
            component: component(record.target()).unwrap_or("?"),
            level: record.level(),
            fields: fields.0,
        };
        self.0.lock().unwrap().push(captured);
    }

    fn flush(&self) {}
}

/// A record's key-value pairs back as a document, each value with the type
/// the driver gave it.
struct Fields(Document);

impl<'kvs> VisitSource<'kvs> for Fields {
    fn visit_pair(&mut self, key: Key<'kvs>, value: Value<'kvs>) -> Result<(), log::kv::Error> {
        let value = if let Some(text) = value.to_borrowed_str() {
            Bson::String(text.to_string())
        } else if let Some(b) = value.to_bool() {
            Bson::Boolean(b)
        } else if let Some(n) = value.to_i64() {
            Bson::Int64(n)
        } else if let Some(n) = value.to_f64() {
            Bson::Double(n)
        } else {
            Bson::String(value.to_string())
        };
        self.0.insert(key.as_str(), value);
        Ok(())
    }
}

/// Starts keeping this thread's log records (the test's client observes
/// logs); installs the logger on first use.
pub fn observe_on_this_thread() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        log::set_logger(&CAPTURE).expect("the unified runner's logger is the only one");
        log::set_max_level(log::LevelFilter::Trace);
        // SecantusDB's replica-set hello reply is 1,060 characters of
        // relaxed JSON, over the spec's default of 1000, and
        // redacted-commands.json matches whole replies as documents
        // ($$matchAsDocument). No logging spec test checks truncation
        // (src/proto/logging.rs's unit tests do).
        mongo_inline::event::set_log_max_document_length(Some(1 << 20));
    });
    OBSERVING.with(|o| o.set(true));
    // Whatever an earlier test on this thread left.
    CAPTURE
        .0
        .lock()
        .unwrap()
        .retain(|c| c.thread != std::thread::current().id());
}

/// Stops keeping this thread's records and drops them.
pub fn stop_observing() {
    OBSERVING.with(|o| o.set(false));
    let me = std::thread::current().id();
    CAPTURE.0.lock().unwrap().retain(|c| c.thread != me);
}

/// The records this thread kept for the client of `topology_id`.
pub fn captured_for(topology_id: &str) -> Vec<Captured> {
    let me = std::thread::current().id();
    CAPTURE
        .0
        .lock()
        .unwrap()
        .iter()
        .filter(|c| c.thread == me && c.fields.get_str("topologyId") == Ok(topology_id))
        .cloned()
        .collect()
}

/// Checks `observeLogMessages`: component names and level names only.
pub fn parse_observe(spec: &Bson) -> Result<Vec<(String, log::LevelFilter)>, String> {
    let spec = spec
        .as_document()
        .ok_or_else(|| format!("observeLogMessages is not a document: {spec}"))?;
    let mut wanted = Vec::new();
    for (name, level) in spec {
        if !["command", "topology", "serverSelection", "connection"].contains(&name.as_str()) {
            return Err(format!("observeLogMessages: unknown component {name:?}"));
        }
        let level = level
            .as_str()
            .and_then(level_filter)
            .ok_or_else(|| format!("observeLogMessages.{name}: unknown level {level}"))?;
        wanted.push((name.clone(), level));
    }
    Ok(wanted)
}

/// A spec level name as `log`'s (the driver's mapping: emergency, alert
/// and critical at error, notice at info).
fn level_filter(name: &str) -> Option<log::LevelFilter> {
    let filter = match name {
        "off" => log::LevelFilter::Off,
        "emergency" | "alert" | "critical" | "error" => log::LevelFilter::Error,
        "warn" => log::LevelFilter::Warn,
        "notice" | "info" => log::LevelFilter::Info,
        "debug" => log::LevelFilter::Debug,
        "trace" => log::LevelFilter::Trace,
        _ => return None,
    };
    Some(filter)
}

/// Checks one `expectedLogMessagesForClient` against the records of its
/// client, already filtered to what the client observes.
pub fn check_client(
    expected: &Document,
    observed: Vec<Captured>,
    entities: &dyn Entities,
) -> Result<(), String> {
    let messages = expected
        .get_array("messages")
        .map_err(|_| "expectLogMessages: messages is required".to_string())?;
    let ignore = expected
        .get_array("ignoreMessages")
        .map(|a| a.to_vec())
        .unwrap_or_default();
    let ignore_extra = expected.get_bool("ignoreExtraMessages").unwrap_or(false);
    let observed: Vec<Captured> = observed
        .into_iter()
        .filter(|c| {
            !ignore.iter().any(|i| {
                i.as_document()
                    .is_some_and(|i| check_message(i, c, entities).is_ok())
            })
        })
        .collect();
    for (i, wanted) in messages.iter().enumerate() {
        let wanted = wanted
            .as_document()
            .ok_or("expectLogMessages: a message is not a document")?;
        let Some(actual) = observed.get(i) else {
            return Err(format!(
                "log message {i}: expected {wanted}, but only {} were logged: {:?}",
                observed.len(),
                summaries(&observed)
            ));
        };
        check_message(wanted, actual, entities)
            .map_err(|e| format!("log message {i}: {e} (logged: {:?})", summaries(&observed)))?;
    }
    if !ignore_extra && observed.len() > messages.len() {
        return Err(format!(
            "{} log messages expected, {} logged: {:?}",
            messages.len(),
            observed.len(),
            summaries(&observed)
        ));
    }
    Ok(())
}

fn summaries(observed: &[Captured]) -> Vec<String> {
    observed
        .iter()
        .map(|c| {
            format!(
                "{} {} {}",
                c.level,
                c.component,
                c.fields.get_str("message").unwrap_or("?")
            )
        })
        .collect()
}

/// One `expectedLogMessage` against one record.
fn check_message(
    wanted: &Document,
    actual: &Captured,
    entities: &dyn Entities,
) -> Result<(), String> {
    let level = wanted.get_str("level").map_err(|_| "level is required")?;
    let filter = level_filter(level).ok_or_else(|| format!("unknown level {level}"))?;
    if filter != actual.level.to_level_filter() {
        return Err(format!("level: expected {level}, logged {}", actual.level));
    }
    let component = wanted
        .get_str("component")
        .map_err(|_| "component is required")?;
    if component != actual.component {
        return Err(format!(
            "component: expected {component}, logged {}",
            actual.component
        ));
    }
    let data = wanted
        .get_document("data")
        .map_err(|_| "data is required")?;
    matching::matches(
        &Bson::Document(data.clone()),
        Some(&Bson::Document(actual.fields.clone())),
        true,
        entities,
    )
    .map_err(|e| format!("data: {e}"))?;
    if let Ok(redacted) = wanted.get_bool("failureIsRedacted") {
        check_redaction(redacted, &actual.fields)?;
    }
    Ok(())
}

/// The driver's redacted failure keeps only the code, code name and labels
/// and says "REDACTED" (command logging spec, "Security").
pub fn check_redaction(redacted: bool, fields: &Document) -> Result<(), String> {
    let failure = fields
        .get_str("failure")
        .map_err(|_| format!("failureIsRedacted: no failure in {fields}"))?;
    if failure.contains("REDACTED") != redacted {
        return Err(format!(
            "failureIsRedacted: {redacted}, but the failure is {failure:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    struct NoEntities;
    impl Entities for NoEntities {
        fn value(&self, _: &str) -> Option<Bson> {
            None
        }
        fn session_lsid(&self, _: &str) -> Option<Document> {
            None
        }
    }

    fn captured(message: &str, level: log::Level) -> Captured {
        Captured {
            thread: std::thread::current().id(),
            component: "command",
            level,
            fields: doc! { "message": message, "commandName": "ping", "requestId": 3_i64 },
        }
    }

    fn expected(messages: Vec<Bson>) -> Document {
        doc! { "client": "c", "messages": messages }
    }

    fn started() -> Bson {
        Bson::Document(doc! {
            "level": "debug", "component": "command",
            "data": { "message": "Command started", "requestId": { "$$type": ["int", "long"] } },
        })
    }

    #[test]
    fn messages_match_in_order_exactly_unless_extras_are_ignored() {
        let logged = vec![
            captured("Command started", log::Level::Debug),
            captured("Command succeeded", log::Level::Debug),
        ];
        let only_started = expected(vec![started()]);
        assert!(check_client(&only_started, logged.clone(), &NoEntities).is_err());
        let mut lenient = only_started.clone();
        lenient.insert("ignoreExtraMessages", true);
        assert!(check_client(&lenient, logged.clone(), &NoEntities).is_ok());
        let mut ignoring = only_started;
        ignoring.insert(
            "ignoreMessages",
            vec![Bson::Document(doc! {
                "level": "debug", "component": "command", "data": { "message": "Command succeeded" },
            })],
        );
        assert!(check_client(&ignoring, logged, &NoEntities).is_ok());
    }

    #[test]
    fn level_component_and_data_are_each_checked() {
        let at_info = vec![captured("Command started", log::Level::Info)];
        assert!(check_client(&expected(vec![started()]), at_info, &NoEntities).is_err());
        let mut other = captured("Command started", log::Level::Debug);
        other.component = "topology";
        assert!(check_client(&expected(vec![started()]), vec![other], &NoEntities).is_err());
        let mut untyped = captured("Command started", log::Level::Debug);
        untyped.fields.insert("requestId", "3");
        assert!(check_client(&expected(vec![started()]), vec![untyped], &NoEntities).is_err());
        // No message logged where one is expected.
        assert!(check_client(&expected(vec![started()]), vec![], &NoEntities).is_err());
    }

    #[test]
    fn a_redacted_failure_must_say_so_and_a_plain_one_must_not() {
        let redacted = doc! { "failure": "server error 18 (AuthenticationFailed), details REDACTED for a sensitive command" };
        let plain = doc! { "failure": "command failed with code 18: bad password" };
        assert!(check_redaction(true, &redacted).is_ok());
        assert!(check_redaction(true, &plain).is_err());
        assert!(check_redaction(false, &plain).is_ok());
        assert!(check_redaction(false, &redacted).is_err());
        assert!(check_redaction(true, &doc! {}).is_err());
    }
}
