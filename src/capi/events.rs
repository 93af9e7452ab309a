//! Command and SDAM events, and log records, handed to C callbacks.
//!
//! Both run inline, on the thread of the call that caused them, while the
//! client is busy: a call back into the same client fails with
//! MI_ERROR_CLIENT (the client notices the re-entry on its thread).

use std::ffi::{c_char, c_void, CString};
use std::ptr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bson::Document;

use crate::proto::event::command::ConnectionInfo;
use crate::proto::event::sdam::sdam_log_message;
use crate::proto::event::{CommandEvent, EventSink as DriverEvents, SdamEvent};

/// `mi_event_callback`.
pub type MiEventCallback =
    Option<unsafe extern "C" fn(user_data: *mut c_void, event: *const MiEvent)>;

/// `mi_log_callback`.
pub type MiLogCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: i32,
        target: *const c_char,
        message: *const c_char,
    ),
>;

/// `mi_event`: valid only during the callback; every pointer may be NULL
/// where the kind has no such field.
#[repr(C)]
#[derive(Debug)]
pub struct MiEvent {
    /// `MI_EVENT_COMMAND_STARTED` (1), `_SUCCEEDED` (2), `_FAILED` (3) or `MI_EVENT_SDAM` (4).
    pub kind: i32,
    /// The command's name (command events).
    pub command_name: *const c_char,
    /// The database (started events).
    pub database_name: *const c_char,
    /// The wire request id (command events).
    pub request_id: i32,
    /// Microseconds from sending to the reply or failure (succeeded and failed events).
    pub duration_micros: i64,
    /// The server, `host:port`.
    pub server_address: *const c_char,
    /// The command as sent (started) or the reply (succeeded), as BSON; empty when redacted.
    pub document: *const u8,
    /// The length of `document`.
    pub document_len: usize,
    /// The failure (failed events) or the SDAM logging spec's description (SDAM events).
    pub message: *const c_char,
    /// Every field of the event as a BSON document (see `event_fields`).
    pub fields: *const u8,
    /// The length of `fields`.
    pub fields_len: usize,
}

/// The C callback and its user data.
#[derive(Clone, Copy)]
struct EventSink {
    callback: unsafe extern "C" fn(*mut c_void, *const MiEvent),
    user_data: *mut c_void,
}

// SAFETY: `mi_client_set_event_callback` documents that the callback and its
// user data are used from whichever thread is using the client at the time;
// the pointer is only passed back to the callback, never dereferenced here.
unsafe impl Send for EventSink {}
// SAFETY: as for `Send`; the sink itself is immutable once stored.
unsafe impl Sync for EventSink {}

/// The handler installed in a client whose C user registered a callback;
/// the callback can be replaced or removed later.
#[derive(Default)]
pub(crate) struct EventSlot {
    sink: Mutex<Option<EventSink>>,
}

impl EventSlot {
    /// Replaces the callback (`None` removes it).
    pub(crate) fn set(&self, callback: MiEventCallback, user_data: *mut c_void) {
        let sink = callback.map(|callback| EventSink {
            callback,
            user_data,
        });
        *self.sink.lock().unwrap_or_else(|p| p.into_inner()) = sink;
    }

    fn deliver(&self, event: &MiEvent) {
        let sink = *self.sink.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sink) = sink {
            // SAFETY: the caller registered this function and user data for
            // exactly this use; `event` and everything it points to live
            // until the call returns, as `mi_event` documents.
            unsafe { (sink.callback)(sink.user_data, event) }
        }
    }
}

fn c_text(s: &str) -> CString {
    CString::new(s.replace('\0', "?")).unwrap_or_default()
}

fn ptr_or_null(s: &Option<CString>) -> *const c_char {
    s.as_ref().map_or(ptr::null(), |s| s.as_ptr())
}

/// What one command event carries into an [`MiEvent`], borrowed from it.
struct CommandFields<'a> {
    kind: i32,
    name: &'a str,
    database: Option<&'a str>,
    request_id: i32,
    duration: Option<Duration>,
    connection: &'a ConnectionInfo,
    document: Option<&'a Document>,
    message: Option<String>,
}

/// The fields of each command event kind (1 started, 2 succeeded, 3
/// failed); `None` for a kind this ABI does not know.
fn command_fields(event: &CommandEvent) -> Option<CommandFields<'_>> {
    Some(match event {
        CommandEvent::Started {
            command,
            database_name,
            command_name,
            request_id,
            connection,
        } => CommandFields {
            kind: 1,
            name: command_name,
            database: Some(database_name.as_str()),
            request_id: *request_id,
            duration: None,
            connection,
            document: Some(command),
            message: None,
        },
        CommandEvent::Succeeded {
            reply,
            command_name,
            request_id,
            duration,
            connection,
        } => CommandFields {
            kind: 2,
            name: command_name,
            database: None,
            request_id: *request_id,
            duration: Some(*duration),
            connection,
            document: Some(reply),
            message: None,
        },
        CommandEvent::Failed {
            failure,
            command_name,
            request_id,
            duration,
            connection,
        } => CommandFields {
            kind: 3,
            name: command_name,
            database: None,
            request_id: *request_id,
            duration: Some(*duration),
            connection,
            document: None,
            message: Some(failure.to_string()),
        },
        #[allow(unreachable_patterns)]
        _ => return None,
    })
}

/// A document's bytes; empty if it cannot be written.
fn bytes_of(document: &Document) -> Vec<u8> {
    let mut bytes = Vec::new();
    if document.to_writer(&mut bytes).is_err() {
        bytes.clear();
    }
    bytes
}

fn ptr_or_null_bytes(bytes: &[u8]) -> *const u8 {
    if bytes.is_empty() {
        ptr::null()
    } else {
        bytes.as_ptr()
    }
}

impl DriverEvents for EventSlot {
    fn handle_command_event(&self, event: &CommandEvent) {
        let fields = bytes_of(&super::event_fields::command_event(event));
        let Some(CommandFields {
            kind,
            name,
            database,
            request_id,
            duration,
            connection,
            document,
            message,
        }) = command_fields(event)
        else {
            return;
        };
        let name = Some(c_text(name));
        let database = database.map(c_text);
        let address = Some(c_text(&connection.address.to_string()));
        let message = message.as_deref().map(c_text);
        // A document that cannot be written is passed on as empty.
        let bytes = document.map(bytes_of).unwrap_or_default();
        self.deliver(&MiEvent {
            kind,
            command_name: ptr_or_null(&name),
            database_name: ptr_or_null(&database),
            request_id,
            duration_micros: duration
                .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
            server_address: ptr_or_null(&address),
            document: ptr_or_null_bytes(&bytes),
            document_len: bytes.len(),
            message: ptr_or_null(&message),
            fields: ptr_or_null_bytes(&fields),
            fields_len: fields.len(),
        });
    }

    fn handle_sdam_event(&self, event: &SdamEvent) {
        // A server description change has no log message (the spec leaves
        // it to the topology change that follows) but has its fields.
        let message = sdam_log_message(event).map(|m| c_text(&m));
        let fields = bytes_of(&super::event_fields::sdam_event(event));
        self.deliver(&MiEvent {
            kind: 4,
            command_name: ptr::null(),
            database_name: ptr::null(),
            request_id: 0,
            duration_micros: 0,
            server_address: ptr::null(),
            document: ptr::null(),
            document_len: 0,
            message: ptr_or_null(&message),
            fields: ptr_or_null_bytes(&fields),
            fields_len: fields.len(),
        });
    }
}

/// A new slot, shared between the C handle (to change the callback) and
/// the client (to deliver events).
pub(crate) fn new_slot() -> Arc<EventSlot> {
    Arc::new(EventSlot::default())
}

/// The C log callback and its user data.
#[derive(Clone, Copy)]
struct LogSink {
    callback: unsafe extern "C" fn(*mut c_void, i32, *const c_char, *const c_char),
    user_data: *mut c_void,
}

// SAFETY: `mi_set_log_callback` documents that the callback may be called
// from any thread that uses the library; the user data is only passed back.
unsafe impl Send for LogSink {}
// SAFETY: as for `Send`.
unsafe impl Sync for LogSink {}

/// The process's `log` logger once a C caller asked for log records.
struct CLogger {
    sink: Mutex<Option<LogSink>>,
}

static LOGGER: CLogger = CLogger {
    sink: Mutex::new(None),
};

impl log::Log for CLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.target().starts_with("mongo_inline")
    }

    fn log(&self, record: &log::Record<'_>) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let sink = *self.sink.lock().unwrap_or_else(|p| p.into_inner());
        let Some(sink) = sink else {
            return;
        };
        let target = c_text(record.target());
        let message = c_text(&record.args().to_string());
        // SAFETY: registered by the caller for this use; both strings live
        // until the call returns.
        unsafe {
            (sink.callback)(
                sink.user_data,
                record.level() as i32,
                target.as_ptr(),
                message.as_ptr(),
            )
        }
    }

    fn flush(&self) {}
}

/// Installs (or replaces, or with `None` removes) the log callback for
/// records up to `max_level` (1 error … 5 trace; 0 turns logging off).
pub(crate) fn set_log_callback(
    callback: MiLogCallback,
    user_data: *mut c_void,
    max_level: i32,
) -> Result<(), super::error::Failure> {
    use super::error::{Domain, Failure};
    let filter = match max_level {
        0 => log::LevelFilter::Off,
        1 => log::LevelFilter::Error,
        2 => log::LevelFilter::Warn,
        3 => log::LevelFilter::Info,
        4 => log::LevelFilter::Debug,
        5 => log::LevelFilter::Trace,
        _ => {
            return Err(Failure::argument(
                "max_level",
                &format!("must be 0 (off) to 5 (trace), not {max_level}"),
            ))
        }
    };
    let installed = log::set_logger(&LOGGER).is_ok() || logger_is_ours();
    if !installed {
        return Err(Failure::new(
            Domain::Client,
            "another logger is already installed in this process",
        ));
    }
    *LOGGER.sink.lock().unwrap_or_else(|p| p.into_inner()) = callback.map(|callback| LogSink {
        callback,
        user_data,
    });
    log::set_max_level(filter);
    Ok(())
}

fn logger_is_ours() -> bool {
    std::ptr::addr_eq(log::logger(), &LOGGER as &dyn log::Log)
}
