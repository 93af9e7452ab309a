//! The FaaS pattern: one client for the life of the process, created on the
//! first invocation and reused by every later one (a warm start then costs
//! no DNS, TCP, TLS or authentication), with a time limit per invocation.
//!
//! The driver has no background threads, so a frozen-between-invocations
//! process (AWS Lambda, Cloud Functions) finds its client as it left it; the
//! first operation after a long freeze rescans the deployment inline.
//!
//! ```text
//! MONGODB_URI='mongodb://127.0.0.1:27017/' cargo run --example faas_handler
//! ```

// Timing real servers and processes is this crate's job; the one-clock rule
// (clippy.toml) is the library's.
#![allow(clippy::disallowed_methods)]

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use mongo_inline::bson::{doc, Document};
use mongo_inline::options::ReturnDocument;
use mongo_inline::{Client, Collection};

/// The one client of the process. `Client` is `Send + Sync`, so a `static`
/// holds it; clones share its socket.
static CLIENT: OnceLock<Client> = OnceLock::new();

fn client() -> mongo_inline::Result<&'static Client> {
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017/".into());
    let client = Client::with_uri_str(&uri)?;
    Ok(CLIENT.get_or_init(|| client))
}

/// One invocation: counts a page view and returns the new count.
fn handler(event: &Document) -> mongo_inline::Result<Document> {
    let page = event.get_str("page").unwrap_or("/");
    // Every operation of this handle gets at most 2 s (`timeoutMS`).
    let views: Collection<Document> = client()?
        .database("examples")
        .collection::<Document>("views")
        .with_timeout(Duration::from_secs(2));
    let counter = views
        .find_one_and_update(doc! { "_id": page }, doc! { "$inc": { "n": 1 } })
        .upsert(true)
        .return_document(ReturnDocument::After)
        .run()?
        .unwrap_or_default();
    Ok(doc! { "page": page, "views": counter.get("n").cloned().unwrap_or_default() })
}

fn main() -> mongo_inline::Result<()> {
    client()?
        .database("examples")
        .collection::<Document>("views")
        .drop()
        .run()?;
    // The platform calls the handler once per request; here, five requests.
    for i in 0..5 {
        let started = Instant::now();
        let reply = handler(&doc! { "page": "/home" })?;
        println!(
            "invocation {i}: {reply} in {:.1} ms{}",
            started.elapsed().as_secs_f64() * 1e3,
            if i == 0 {
                " (cold: connects)"
            } else {
                " (warm: reuses the client)"
            }
        );
        assert_eq!(reply.get_i32("views"), Ok(i + 1));
    }
    Ok(())
}
