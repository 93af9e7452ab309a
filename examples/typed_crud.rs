//! Typed CRUD with `Collection<T>`: insert, find with options, update,
//! replace, delete and count, with a struct as the collection's type.
//!
//! ```text
//! MONGODB_URI='mongodb://127.0.0.1:27017/' cargo run --example typed_crud
//! ```

use mongo_inline::bson::{doc, oid::ObjectId};
use mongo_inline::options::ReturnDocument;
use mongo_inline::Client;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Book {
    #[serde(rename = "_id", skip_serializing_if = "Option::is_none")]
    id: Option<ObjectId>,
    title: String,
    author: String,
    year: i32,
    copies: i32,
}

fn book(title: &str, author: &str, year: i32) -> Book {
    Book {
        id: None,
        title: title.into(),
        author: author.into(),
        year,
        copies: 1,
    }
}

fn main() -> mongo_inline::Result<()> {
    let uri = std::env::var("MONGODB_URI").unwrap_or_else(|_| "mongodb://127.0.0.1:27017/".into());
    let client = Client::with_uri_str(&uri)?;
    let books = client.database("examples").collection::<Book>("books");
    books.drop().run()?;

    let inserted = books
        .insert_one(book("Dune", "Frank Herbert", 1965))
        .run()?;
    println!("inserted {}", inserted.inserted_id);
    books
        .insert_many([
            book("Neuromancer", "William Gibson", 1984),
            book("Hyperion", "Dan Simmons", 1989),
            book("The Left Hand of Darkness", "Ursula K. Le Guin", 1969),
        ])
        .run()?;

    // Options by name on the builder, as in the official driver.
    let classics: Vec<Book> = books
        .find(doc! { "year": { "$lt": 1980 } })
        .sort(doc! { "year": 1 })
        .limit(10)
        .run()?
        .collect::<mongo_inline::Result<_>>()?;
    let titles: Vec<&str> = classics.iter().map(|b| b.title.as_str()).collect();
    println!("before 1980: {titles:?}");
    assert_eq!(titles, ["Dune", "The Left Hand of Darkness"]);

    let updated = books
        .update_one(doc! { "title": "Dune" }, doc! { "$inc": { "copies": 2 } })
        .run()?;
    assert_eq!(updated.modified_count, 1);

    let after = books
        .find_one_and_update(
            doc! { "title": "Hyperion" },
            doc! { "$set": { "copies": 5 } },
        )
        .return_document(ReturnDocument::After)
        .run()?
        .expect("Hyperion is there");
    assert_eq!(after.copies, 5);

    let mut dune = books
        .find_one(doc! { "title": "Dune" })
        .run()?
        .expect("Dune is there");
    assert_eq!(dune.copies, 3);
    dune.year = 1966; // the first book edition
    books.replace_one(doc! { "_id": dune.id }, &dune).run()?;

    let deleted = books
        .delete_many(doc! { "author": "William Gibson" })
        .run()?;
    assert_eq!(deleted.deleted_count, 1);
    let left = books.count_documents(doc! {}).run()?;
    println!(
        "{left} books left; Dune is now {:?}",
        books.find_one(doc! { "_id": dune.id }).run()?
    );
    assert_eq!(left, 3);
    Ok(())
}
