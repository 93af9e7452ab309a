//! No copy of a command or a reply for command events when nobody listens.
//!
//! A counting global allocator adds up the heap bytes allocated while a
//! client without an event handler and one with a handler (that ignores the
//! events) each insert and read back a large document. The handler's client
//! pays for the events' copies (the command with its document sequence
//! folded in, and the reply); the client without one must not: it
//! allocates less by at least most of the document's size for each. Before
//! the fix, the command's copy was made twice on every command, listened to
//! or not. (Totals, not peaks: a copy made after the largest buffer is
//! freed does not move the peak.)

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use bson::{doc, Document};
use mongo_inline::event::EventHandler;
use mongo_inline::options::ClientOptions;
use mongo_inline::Client;
use support::server::TestServer;

struct Counting;

static TOTAL: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            TOTAL.fetch_add(layout.size(), Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `work` and returns its result and the heap bytes it allocated.
fn allocated_during<R>(work: impl FnOnce() -> R) -> (R, usize) {
    let base = TOTAL.load(Ordering::Relaxed);
    let result = work();
    (result, TOTAL.load(Ordering::Relaxed) - base)
}

const DOCUMENT_BYTES: usize = 4_000_000;

/// The bytes allocated by an insert and of a read of one large document.
fn peaks(client: &Client, id: i32) -> (usize, usize) {
    let coll = client.database("copies").collection::<Document>("big");
    let filler = "x".repeat(DOCUMENT_BYTES);
    let document = doc! { "_id": id, "filler": filler.as_str() };
    drop(filler);
    let ((), insert) = allocated_during(|| {
        coll.insert_one(document).run().unwrap();
    });
    let (found, read) = allocated_during(|| coll.find_one(doc! { "_id": id }).run().unwrap());
    assert!(found.is_some());
    (insert, read)
}

/// One test: the allocator counts every thread, so nothing else may run in
/// this binary at the same time.
#[test]
fn without_a_handler_no_event_copies_are_made() {
    let server = TestServer::start();
    let options = ClientOptions::parse(server.uri()).run().unwrap();
    let quiet = Client::with_options(options.clone()).unwrap();
    let mut listening = options;
    // Listens, and drops every event.
    listening.command_event_handler = Some(EventHandler::callback(drop));
    let listened = Client::with_options(listening).unwrap();
    // Warm both up (selection, handshake, buffers) before measuring.
    quiet
        .database("copies")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    listened
        .database("copies")
        .run_command(doc! { "ping": 1 })
        .run()
        .unwrap();
    let (quiet_insert, quiet_read) = peaks(&quiet, 1);
    let (listened_insert, listened_read) = peaks(&listened, 2);
    println!(
        "insert of {} MB: {:.1} MB allocated without a handler, {:.1} MB with one; \
         read: {:.1} MB without, {:.1} MB with",
        DOCUMENT_BYTES / 1_000_000,
        quiet_insert as f64 / 1e6,
        listened_insert as f64 / 1e6,
        quiet_read as f64 / 1e6,
        listened_read as f64 / 1e6,
    );
    let most = DOCUMENT_BYTES * 9 / 10;
    assert!(
        listened_insert >= quiet_insert + most,
        "the command's event copy is made without a handler: {quiet_insert} vs {listened_insert}"
    );
    assert!(
        listened_read >= quiet_read + most,
        "the reply's event copy is made without a handler: {quiet_read} vs {listened_read}"
    );
}
