//! `client.shutdown().run()` and `.immediate(true)`.

use mongodb::bson::{doc, Document};
use mongodb::error::Result;
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let coll = client.database("compat_shutdown").collection::<Document>("c");
    coll.insert_one(doc! { "x": 1 }).run()?;
    let mut session = client.start_session().run()?;
    coll.find_one(doc! {}).session(&mut session).run()?;
    drop(session);
    drop(coll);
    client.shutdown().run();

    let other = Client::with_uri_str(uri)?;
    other.database("admin").run_command(doc! { "ping": 1 }).run()?;
    other.shutdown().immediate(true).run();
    Ok(())
}
