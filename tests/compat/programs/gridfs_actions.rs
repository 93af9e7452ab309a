//! GridFS through the builders at their official path
//! (`mongodb::action::gridfs`), named by type as a helper that takes one
//! does, with their setters; and the bucket's find options converted to a
//! collection's (`From<GridFsFindOptions> for FindOptions`, likewise for
//! `find_one`), to run the same query on the files collection directly.

use std::io::{Read, Write};

use mongodb::action::gridfs::{
    Delete, DeleteByName, Drop, Find, FindOne, OpenDownloadStream, OpenDownloadStreamByName,
    OpenUploadStream, Rename, RenameByName,
};
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::Result;
use mongodb::gridfs::FilesCollectionDocument;
use mongodb::options::{
    FindOneOptions, FindOptions, GridFsFindOneOptions, GridFsFindOptions, GridFsUploadOptions,
};
use mongodb::sync::Client;

fn store(upload: OpenUploadStream<'_>, bytes: &[u8]) -> Result<Bson> {
    let mut stream = upload.chunk_size_bytes(4).metadata(doc! { "kind": "note" }).run()?;
    stream.write_all(bytes).expect("write");
    stream.close().expect("close");
    Ok(stream.id().clone())
}

fn read(download: OpenDownloadStream<'_>) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    download.run()?.read_to_end(&mut bytes).expect("read");
    Ok(bytes)
}

fn read_first_revision(download: OpenDownloadStreamByName<'_>) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    download.revision(0).run()?.read_to_end(&mut bytes).expect("read");
    Ok(bytes)
}

fn longest_first(find: Find<'_>) -> Result<Vec<FilesCollectionDocument>> {
    find.sort(doc! { "length": -1 }).batch_size(1).limit(5).run()?.collect()
}

fn second(find: FindOne<'_>) -> Result<Option<FilesCollectionDocument>> {
    find.sort(doc! { "length": 1 }).skip(1).run()
}

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_gridfs_actions");
    let bucket = db.gridfs_bucket(None);
    let drop: Drop<'_> = bucket.drop();
    drop.run()?;

    let first = store(bucket.open_upload_stream("a.txt"), b"first text")?;
    let second_id = store(
        bucket
            .open_upload_stream("a.txt")
            .with_options(GridFsUploadOptions::builder().chunk_size_bytes(8).build())
            .id(Bson::Int32(7)),
        b"second, longer text",
    )?;
    assert_eq!(second_id, Bson::Int32(7));
    assert_eq!(read(bucket.open_download_stream(first.clone()))?, b"first text");
    assert_eq!(read_first_revision(bucket.open_download_stream_by_name("a.txt"))?, b"first text");

    let files = longest_first(bucket.find(doc! { "filename": "a.txt" }))?;
    assert_eq!(files.len(), 2);
    assert_eq!(files[0].id, Bson::Int32(7));
    assert_eq!(second(bucket.find_one(doc! {}))?.map(|f| f.length), Some(19));

    // The bucket's query options as the files collection's own.
    let files_coll = db.collection::<Document>("fs.files");
    let options: FindOptions = GridFsFindOptions::builder().sort(doc! { "length": -1 }).limit(1).build().into();
    let longest: Vec<Document> = files_coll.find(doc! {}).with_options(options).run()?.collect::<Result<_>>()?;
    assert_eq!(longest.len(), 1);
    assert_eq!(longest[0].get("_id"), Some(&Bson::Int32(7)));
    let options = FindOneOptions::from(GridFsFindOneOptions::builder().sort(doc! { "length": 1 }).build());
    let shortest = files_coll.find_one(doc! {}).with_options(options).run()?.expect("a file");
    assert_eq!(shortest.get("_id"), Some(&first));

    let rename: Rename<'_> = bucket.rename(first.clone(), "b.txt");
    rename.run()?;
    let rename_all: RenameByName<'_> = bucket.rename_by_name("a.txt", "c.txt");
    rename_all.run()?;
    let names: Vec<String> = longest_first(bucket.find(doc! {}))?.into_iter().filter_map(|f| f.filename).collect();
    assert_eq!(names, ["c.txt", "b.txt"]);

    let delete: Delete<'_> = bucket.delete(first);
    delete.run()?;
    let delete_all: DeleteByName<'_> = bucket.delete_by_name("c.txt");
    delete_all.run()?;
    assert!(bucket.find(doc! {}).run()?.next().is_none());
    db.drop().run()?;
    Ok(())
}
