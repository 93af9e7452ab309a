//! The README's side-by-side program: the official sync API's shape, with
//! mongo-inline. Kept in the README's narrow layout on purpose.

use mongo_inline::bson::doc;
use mongo_inline::options::{IndexModel, IndexOptions};
use mongo_inline::Client;
use serde::{Deserialize, Serialize};

#[rustfmt::skip]
#[derive(Serialize, Deserialize)]
struct Person { name: String, born: i32 }

#[rustfmt::skip]
fn main() -> mongo_inline::Result<()> {
  let uri = std::env::var("MONGODB_URI").unwrap();
  let client = Client::with_uri_str(&uri)?;
  let people = client
    .database("app")
    .collection::<Person>("people");
  people.drop().run()?;
  let unique = IndexOptions::default()
    .unique(true);
  people.create_index(
    IndexModel::new(doc! { "name": 1 })
      .options(unique),
  ).run()?;
  let ada = Person { name: "Ada".into(), born: 1815 };
  people.insert_one(&ada).run()?;
  let old = people
    .find(doc! { "born": { "$lt": 1900 } })
    .sort(doc! { "born": 1 })
    .limit(10)
    .run()?;
  for p in old { println!("{}", p?.name); }

  let mut s = client.start_session().run()?;
  s.start_transaction().run()?;
  people
    .update_one(doc! { "name": "Ada" },
                doc! { "$set": { "born": 1816 } })
    .session(&mut s)
    .run()?;
  s.commit_transaction().run()?;

  match people.insert_one(&ada).run() {
    Err(e) if e.code() == Some(11000) => println!("dup"),
    other => { other?; }
  }
  Ok(())
}
