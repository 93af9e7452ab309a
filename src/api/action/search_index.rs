//! Atlas Search index management on a collection, in the official 3.x
//! shape: `create_search_index(es)`, `update_search_index`,
//! `drop_search_index`, `list_search_indexes`. The commands run through
//! the collection's database's `run_command`, which adds no read or write
//! concern, as index-management.md asks of them.

use std::borrow::Cow;
use std::marker::PhantomData;

use bson::Document;

use super::{
    option_setters, session_setter, untyped, Aggregate, ExplicitSession, Multiple, Single,
};
use crate::api::client_session::ClientSession;
use crate::api::coll::Collection;
use crate::api::cursor::Cursor;
use crate::error::Result;
use crate::proto::coll_options::AggregateOptions;
use crate::proto::search_index::{
    self, CreateSearchIndexOptions, DropSearchIndexOptions, ListSearchIndexOptions,
    SearchIndexModel, UpdateSearchIndexOptions,
};

impl<T> Collection<T> {
    /// Creates the search indexes of `models`; `run` returns their names.
    ///
    /// Search indexes need Atlas (or a deployment with `mongot`); other
    /// servers refuse the command, and `run` returns their error.
    pub fn create_search_indexes(
        &self,
        models: impl IntoIterator<Item = SearchIndexModel>,
    ) -> CreateSearchIndex<'_, Multiple> {
        CreateSearchIndex::new(self, models.into_iter().collect())
    }

    /// Creates one search index; `run` returns its name.
    pub fn create_search_index(&self, model: SearchIndexModel) -> CreateSearchIndex<'_, Single> {
        CreateSearchIndex::new(self, vec![model])
    }

    /// Replaces the definition of the search index `name`.
    pub fn update_search_index(
        &self,
        name: impl Into<String>,
        definition: Document,
    ) -> UpdateSearchIndex<'_> {
        UpdateSearchIndex {
            coll: untyped(self),
            name: name.into(),
            definition,
            options: UpdateSearchIndexOptions::default(),
            session: None,
        }
    }

    /// Drops the search index `name`.
    pub fn drop_search_index(&self, name: impl Into<String>) -> DropSearchIndex<'_> {
        DropSearchIndex {
            coll: untyped(self),
            name: name.into(),
            options: DropSearchIndexOptions::default(),
            session: None,
        }
    }

    /// Lists the collection's search indexes (with `name`, only that one).
    pub fn list_search_indexes(&self) -> ListSearchIndexes<'_> {
        ListSearchIndexes {
            // The stage is known at `run`, once `name` is.
            aggregate: Aggregate::on_collection(self, Vec::new()),
            name: None,
            aggregate_options: AggregateOptions::default(),
            options: ListSearchIndexOptions::default(),
        }
    }
}

/// Runs `command` on `coll`'s database, in `session` if given.
fn run_on_database<T>(
    coll: &Collection<T>,
    command: Document,
    session: Option<&mut ClientSession>,
) -> Result<Document> {
    let db = coll.client().database(&coll.ns().db);
    let action = db.run_command(command);
    match session {
        Some(session) => action.session(session).run(),
        None => action.run(),
    }
}

/// `create_search_index` (mode [`Single`]: `run` returns the index's name)
/// and `create_search_indexes` (mode [`Multiple`]: the names, in order).
#[must_use = "nothing is sent until `run`"]
pub struct CreateSearchIndex<'a, Mode> {
    coll: Cow<'a, Collection<Document>>,
    models: Vec<SearchIndexModel>,
    options: CreateSearchIndexOptions,
    session: Option<&'a mut ClientSession>,
    mode: PhantomData<Mode>,
}

impl<'a, Mode> CreateSearchIndex<'a, Mode> {
    fn new<T>(coll: &'a Collection<T>, models: Vec<SearchIndexModel>) -> Self {
        CreateSearchIndex {
            coll: untyped(coll),
            models,
            options: CreateSearchIndexOptions::default(),
            session: None,
            mode: PhantomData,
        }
    }

    option_setters!(CreateSearchIndexOptions {});
    session_setter!();

    /// Sends `createSearchIndexes`; the names of the indexes, in order.
    fn create(self) -> Result<Vec<String>> {
        // Every option (none yet) must be put into the command here.
        let CreateSearchIndexOptions {} = self.options;
        let command = search_index::create_command(&self.coll.ns().coll, &self.models);
        let reply = run_on_database(&self.coll, command, self.session)?;
        search_index::created_names(&reply)
    }
}

impl CreateSearchIndex<'_, Multiple> {
    /// Sends `createSearchIndexes`; the names of the indexes, in order.
    pub fn run(self) -> Result<Vec<String>> {
        self.create()
    }
}

impl CreateSearchIndex<'_, Single> {
    /// Sends `createSearchIndexes`; the index's name.
    pub fn run(self) -> Result<String> {
        let mut names = self.create()?;
        names.pop().ok_or_else(|| {
            crate::error::Error::protocol(None, "createSearchIndexes created no index")
        })
    }
}

/// `update_search_index`: replaces an index's definition.
#[must_use = "nothing is sent until `run`"]
pub struct UpdateSearchIndex<'a> {
    coll: Cow<'a, Collection<Document>>,
    name: String,
    definition: Document,
    options: UpdateSearchIndexOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> UpdateSearchIndex<'a> {
    option_setters!(UpdateSearchIndexOptions {});
    session_setter!();

    /// Sends `updateSearchIndex`.
    pub fn run(self) -> Result<()> {
        // Every option (none yet) must be put into the command here.
        let UpdateSearchIndexOptions {} = self.options;
        let command =
            search_index::update_command(&self.coll.ns().coll, &self.name, self.definition);
        run_on_database(&self.coll, command, self.session).map(|_| ())
    }
}

/// `drop_search_index`.
#[must_use = "nothing is sent until `run`"]
pub struct DropSearchIndex<'a> {
    coll: Cow<'a, Collection<Document>>,
    name: String,
    options: DropSearchIndexOptions,
    session: Option<&'a mut ClientSession>,
}

impl<'a> DropSearchIndex<'a> {
    option_setters!(DropSearchIndexOptions {});
    session_setter!();

    /// Sends `dropSearchIndex`. Dropping an index of a collection that does
    /// not exist succeeds, as in the official driver (`NamespaceNotFound`,
    /// 26).
    pub fn run(self) -> Result<()> {
        // Every option (none yet) must be put into the command here.
        let DropSearchIndexOptions {} = self.options;
        let command = search_index::drop_command(&self.coll.ns().coll, &self.name);
        match run_on_database(&self.coll, command, self.session) {
            Err(e) if e.code() == Some(26) => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

/// `list_search_indexes`: an aggregation with `$listSearchIndexes`.
#[must_use = "nothing is sent until `run`"]
pub struct ListSearchIndexes<'a> {
    aggregate: Aggregate<'a>,
    name: Option<String>,
    aggregate_options: AggregateOptions,
    options: ListSearchIndexOptions,
}

impl<'a> ListSearchIndexes<'a> {
    option_setters!(ListSearchIndexOptions {});

    /// Lists only the index `name`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// The aggregation's options (`batch_size`, `comment`, ...).
    pub fn aggregate_options(mut self, options: AggregateOptions) -> Self {
        self.aggregate_options = options;
        self
    }

    fn aggregate(self) -> Aggregate<'a> {
        // Every option (none yet) must be put into the stage here.
        let ListSearchIndexOptions {} = self.options;
        let pipeline = search_index::list_pipeline(self.name.as_deref());
        self.aggregate
            .with_pipeline(pipeline)
            .without_concerns()
            .with_options(self.aggregate_options)
    }

    /// Lists in `session`; run the returned aggregation for a session cursor.
    pub fn session<'s>(self, session: &'s mut ClientSession) -> Aggregate<'a, ExplicitSession<'s>> {
        self.aggregate().session(session)
    }

    /// Runs the aggregation.
    pub fn run(self) -> Result<Cursor<Document>> {
        self.aggregate().run()
    }
}
