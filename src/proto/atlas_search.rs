//! Builders for Atlas Search aggregation stages (`$search` and
//! `$searchMeta`), as the official driver's `mongodb::atlas_search` has them:
//! start from an operator's function ([`text`], [`compound`], [`range`], ...),
//! chain its optional setters, then finish with
//! [`into_stage`](SearchOperator::into_stage) (or wrap it in [`search`] /
//! [`search_meta`] first to set the stage's own options, such as the index).
//!
//! The builders only write the stage document; nothing here talks to a
//! server. The stage goes into a pipeline like any other document, and a
//! deployment without Atlas Search refuses it with its own error, which the
//! aggregate returns unchanged.
//!
//! ```
//! use mongo_inline::atlas_search::{self, search};
//! use mongo_inline::bson::doc;
//!
//! let stage = search(
//!     atlas_search::autocomplete("title", "pre")
//!         .fuzzy(doc! { "maxEdits": 1, "prefixLength": 1, "maxExpansions": 256 }),
//! )
//! .index("movies")
//! .into_stage();
//! assert_eq!(
//!     stage,
//!     doc! { "$search": {
//!         "autocomplete": {
//!             "path": "title",
//!             "query": "pre",
//!             "fuzzy": { "maxEdits": 1, "prefixLength": 1, "maxExpansions": 256 },
//!         },
//!         "index": "movies",
//!     } }
//! );
//! ```
//!
//! In a pipeline:
//!
//! ```
//! # use mongo_inline::bson::{doc, Document};
//! # fn main() -> mongo_inline::Result<()> {
//! # let Ok(uri) = std::env::var("MONGODB_URI") else { return Ok(()) };
//! # let client = mongo_inline::Client::with_uri_str(&uri)?;
//! use mongo_inline::atlas_search;
//! let movies = client.database("docs").collection::<Document>("atlas_search");
//! let pipeline = vec![
//!     atlas_search::text("title", "dune").into_stage(),
//!     doc! { "$limit": 10 },
//!     doc! { "$project": { "_id": 0, "title": 1 } },
//! ];
//! match movies.aggregate(pipeline).run() {
//!     Ok(cursor) => println!("{} matches", cursor.count()),
//!     // A deployment without Atlas Search refuses the stage.
//!     Err(error) => println!("no Atlas Search here: {error}"),
//! }
//! # Ok(())
//! # }
//! ```

mod operators;
#[cfg(test)]
mod tests;

pub use operators::*;

use std::marker::PhantomData;

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};

/// An Atlas Search operator being built: the operator's name and its
/// specification document. `T` is the operator (a marker type such as
/// [`Text`]), so that only that operator's setters are offered.
pub struct SearchOperator<T> {
    name: &'static str,
    spec: Document,
    _operator: PhantomData<T>,
}

impl<T> SearchOperator<T> {
    fn new(name: &'static str, spec: Document) -> Self {
        SearchOperator {
            name,
            spec,
            _operator: PhantomData,
        }
    }

    /// Sets `key` in the operator's specification; what every setter does.
    fn with(mut self, key: &str, value: impl Into<Bson>) -> Self {
        self.spec.insert(key, value);
        self
    }

    /// The operator as the document that names it: `{ <name>: <spec> }`.
    fn into_document(self) -> Document {
        doc! { self.name: self.spec }
    }

    /// The `$search` stage of this operator, with no stage options.
    pub fn into_stage(self) -> Document {
        search(self).into_stage()
    }

    /// The `$searchMeta` stage of this operator, with no stage options.
    pub fn into_stage_meta(self) -> Document {
        search_meta(self).into_stage()
    }

    /// The same operator with its type erased, so that operators of
    /// different kinds can go in one `Vec` (a `compound` clause list):
    ///
    /// ```
    /// use mongo_inline::atlas_search;
    /// let clauses = vec![
    ///     atlas_search::text("description", "varieties").unit(),
    ///     atlas_search::compound()
    ///         .should(atlas_search::text("description", "Fuji"))
    ///         .unit(),
    /// ];
    /// let stage = atlas_search::compound().must(clauses).into_stage();
    /// assert_eq!(stage.get_document("$search").unwrap().len(), 1);
    /// ```
    pub fn unit(self) -> SearchOperator<()> {
        SearchOperator::new(self.name, self.spec)
    }
}

/// One operator is a clause list of one: `compound().should(text(..))`.
impl<T> IntoIterator for SearchOperator<T> {
    type Item = SearchOperator<T>;
    type IntoIter = std::iter::Once<SearchOperator<T>>;

    fn into_iter(self) -> Self::IntoIter {
        std::iter::once(self)
    }
}

/// Starts a `$search` stage from `op`, so that the stage's options (index,
/// highlight, sort, ...) can be set before [`AtlasSearch::into_stage`].
pub fn search<T>(op: SearchOperator<T>) -> AtlasSearch {
    AtlasSearch {
        stage: op.into_document(),
    }
}

/// A `$search` stage being built. Start it with [`search`].
pub struct AtlasSearch {
    stage: Document,
}

impl AtlasSearch {
    fn with(mut self, key: &str, value: impl Into<Bson>) -> Self {
        self.stage.insert(key, value);
        self
    }

    /// Searches the index's segments in parallel on dedicated search nodes
    /// (`concurrent`).
    pub fn concurrent(self, value: bool) -> Self {
        self.with("concurrent", value)
    }

    /// How to count the results (`count`, e.g. `{ "type": "total" }`).
    pub fn count(self, value: Document) -> Self {
        self.with("count", value)
    }

    /// How to highlight the matched terms in the results (`highlight`).
    pub fn highlight(self, value: Document) -> Self {
        self.with("highlight", value)
    }

    /// The name of the search index to use (`index`; the server's default is
    /// `default`).
    pub fn index(self, value: impl Into<String>) -> Self {
        self.with("index", value.into())
    }

    /// Whether to return only the index's stored source fields instead of
    /// looking the whole documents up (`returnStoredSource`).
    pub fn return_stored_source(self, value: bool) -> Self {
        self.with("returnStoredSource", value)
    }

    /// The pagination token after which to return results (`searchAfter`).
    pub fn search_after(self, value: impl Into<String>) -> Self {
        self.with("searchAfter", value.into())
    }

    /// The pagination token before which to return results (`searchBefore`).
    pub fn search_before(self, value: impl Into<String>) -> Self {
        self.with("searchBefore", value.into())
    }

    /// Whether to return each result's score breakdown (`scoreDetails`).
    pub fn score_details(self, value: bool) -> Self {
        self.with("scoreDetails", value)
    }

    /// The fields to sort the results by (`sort`).
    pub fn sort(self, value: Document) -> Self {
        self.with("sort", value)
    }

    /// The stage document: `{ "$search": { <operator>, <options> } }`.
    pub fn into_stage(self) -> Document {
        doc! { "$search": self.stage }
    }
}

/// Starts a `$searchMeta` stage from `op` (usually a [`facet`](fn@facet) collector),
/// so that the stage's options can be set before
/// [`AtlasSearchMeta::into_stage`]:
///
/// ```
/// use mongo_inline::atlas_search::{facet, range, search_meta};
/// use mongo_inline::bson::{doc, DateTime};
/// let stage = search_meta(
///     facet(doc! {
///         "directorsFacet": facet::string("directors").num_buckets(7),
///         "yearFacet": facet::number("year", [2000, 2005, 2010, 2015]),
///     })
///     .operator(range("released").gte(DateTime::from_millis(0))),
/// )
/// .index("movies")
/// .into_stage();
/// let meta = stage.get_document("$searchMeta").unwrap();
/// assert_eq!(meta.get_str("index"), Ok("movies"));
/// ```
pub fn search_meta<T>(op: SearchOperator<T>) -> AtlasSearchMeta {
    AtlasSearchMeta {
        stage: op.into_document(),
    }
}

/// A `$searchMeta` stage being built. Start it with [`search_meta`].
pub struct AtlasSearchMeta {
    stage: Document,
}

impl AtlasSearchMeta {
    /// How to count the results (`count`, e.g. `{ "type": "total" }`).
    pub fn count(mut self, value: Document) -> Self {
        self.stage.insert("count", value);
        self
    }

    /// The name of the search index to use (`index`).
    pub fn index(mut self, value: impl Into<String>) -> Self {
        self.stage.insert("index", value.into());
        self
    }

    /// The stage document: `{ "$searchMeta": { <operator>, <options> } }`.
    pub fn into_stage(self) -> Document {
        doc! { "$searchMeta": self.stage }
    }
}

/// Whether `autocomplete` matches the query's tokens in any order or in
/// sequence (`tokenOrder`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum TokenOrder {
    /// The tokens may appear in any order (`any`).
    Any,
    /// The tokens must appear next to each other, in the query's order
    /// (`sequential`).
    Sequential,
    /// A value this version does not name, sent as given.
    Other(String),
}

impl TokenOrder {
    fn name(&self) -> &str {
        match self {
            TokenOrder::Any => "any",
            TokenOrder::Sequential => "sequential",
            TokenOrder::Other(name) => name,
        }
    }
}

/// Whether `text` matches documents with any or all of the query's terms
/// (`matchCriteria`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MatchCriteria {
    /// Documents with any of the terms (`any`).
    Any,
    /// Only documents with all of the terms (`all`).
    All,
    /// A value this version does not name, sent as given.
    Other(String),
}

impl MatchCriteria {
    fn name(&self) -> &str {
        match self {
            MatchCriteria::Any => "any",
            MatchCriteria::All => "all",
            MatchCriteria::Other(name) => name,
        }
    }
}

/// How the indexed shape must relate to the query's geometry for
/// `geoShape` (`relation`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Relation {
    /// The indexed geometry contains the query's (`contains`).
    Contains,
    /// The two geometries have nothing in common (`disjoint`).
    Disjoint,
    /// The two geometries intersect (`intersects`).
    Intersects,
    /// The indexed geometry is within the query's (`within`; not for a
    /// LineString or a Point).
    Within,
    /// A value this version does not name, sent as given.
    Other(String),
}

impl Relation {
    fn name(&self) -> &str {
        match self {
            Relation::Contains => "contains",
            Relation::Disjoint => "disjoint",
            Relation::Intersects => "intersects",
            Relation::Within => "within",
            Relation::Other(name) => name,
        }
    }
}

mod sealed {
    use bson::Bson;

    /// A value an operator takes in more than one form, as the BSON it
    /// becomes. Sealed: the public traits below say which forms each
    /// parameter takes, and only this module decides how each is written.
    // Reachable only as the supertrait of the public parameter traits, so
    // that users can name those traits but not add forms to them.
    #[allow(unnameable_types)]
    pub trait Parameter {
        /// The value as it goes into the operator's document.
        fn to_bson(self) -> Bson;
    }

    impl<T: Into<Bson>> Parameter for T {
        fn to_bson(self) -> Bson {
            self.into()
        }
    }

    /// A nested operator is written as the document that names it.
    impl<T> Parameter for super::SearchOperator<T> {
        fn to_bson(self) -> Bson {
            Bson::Document(self.into_document())
        }
    }
}

use sealed::Parameter;

/// A parameter that takes a string or an array of strings (a `path`, a
/// `query`).
pub trait StringOrArray: Parameter {}
impl StringOrArray for &str {}
impl StringOrArray for String {}
impl StringOrArray for &[&str] {}
impl StringOrArray for &[String] {}

/// A parameter that takes an operator: a built [`SearchOperator`] or the
/// operator's document as written.
pub trait SearchOperatorParam: Parameter {}
impl<T> SearchOperatorParam for SearchOperator<T> {}
impl SearchOperatorParam for Document {}

/// A parameter that takes a document or an array of documents
/// (`moreLikeThis`'s `like`).
pub trait DocumentOrArray: Parameter {}
impl DocumentOrArray for Document {}
impl DocumentOrArray for &[Document] {}

/// Implements a parameter trait for the numeric types the server reads as
/// BSON numbers.
macro_rules! numeric {
    ($trait:ident) => {
        impl $trait for i32 {}
        impl $trait for i64 {}
        impl $trait for u32 {}
        impl $trait for f32 {}
        impl $trait for f64 {}
    };
}

/// `near`'s origin: a number, a date, or a GeoJSON point document.
pub trait NearOrigin: Parameter {}
impl NearOrigin for DateTime {}
impl NearOrigin for Document {}
numeric!(NearOrigin);

/// A parameter that takes a BSON number (`near`'s pivot).
pub trait BsonNumber: Parameter {}
numeric!(BsonNumber);

/// A bound of [`range`]: a number, a date, a string or an ObjectId.
pub trait RangeValue: Parameter {}
numeric!(RangeValue);
impl RangeValue for DateTime {}
impl RangeValue for &str {}
impl RangeValue for &String {}
impl RangeValue for String {}
impl RangeValue for ObjectId {}

/// Facet definitions for the [`facet`](fn@facet) collector, written as the
/// values of its `facets` document:
///
/// ```
/// use mongo_inline::atlas_search::facet;
/// use mongo_inline::bson::doc;
/// let collector = facet(doc! {
///     "directorsFacet": facet::string("directors").num_buckets(7),
///     "yearFacet": facet::number("year", [2000, 2005, 2010, 2015]),
/// });
/// assert_eq!(
///     collector.into_stage_meta(),
///     doc! { "$searchMeta": { "facet": { "facets": {
///         "directorsFacet": { "type": "string", "path": "directors", "numBuckets": 7 },
///         "yearFacet": { "type": "number", "path": "year", "boundaries": [2000, 2005, 2010, 2015] },
///     } } } }
/// );
/// ```
pub mod facet {
    use std::marker::PhantomData;

    use bson::{doc, Bson, DateTime, Document};

    /// One facet definition; `T` is its kind ([`String`], [`Number`] or
    /// [`Date`]), so that only that kind's setters are offered.
    pub struct Facet<T> {
        spec: Document,
        _kind: PhantomData<T>,
    }

    impl<T> Facet<T> {
        fn new(spec: Document) -> Self {
            Facet {
                spec,
                _kind: PhantomData,
            }
        }
    }

    /// A facet is written as its definition document.
    impl<T> From<Facet<T>> for Bson {
        fn from(facet: Facet<T>) -> Bson {
            Bson::Document(facet.spec)
        }
    }

    /// The kind of a string facet; made by [`string`](fn@string).
    pub struct String;

    /// A facet counting the most frequent values of the string field
    /// `path`.
    pub fn string(path: impl AsRef<str>) -> Facet<String> {
        Facet::new(doc! { "type": "string", "path": path.as_ref() })
    }

    impl Facet<String> {
        /// The most categories to return (`numBuckets`; at most 1000).
        pub fn num_buckets(mut self, num: i32) -> Self {
            self.spec.insert("numBuckets", num);
            self
        }
    }

    /// The kind of a number facet; made by [`number`].
    pub struct Number;

    /// A facet counting the values of the numeric field `path` in the
    /// ranges between consecutive `boundaries`.
    pub fn number(
        path: impl AsRef<str>,
        boundaries: impl IntoIterator<Item = impl Into<Bson>>,
    ) -> Facet<Number> {
        let boundaries: Vec<Bson> = boundaries.into_iter().map(Into::into).collect();
        Facet::new(doc! { "type": "number", "path": path.as_ref(), "boundaries": boundaries })
    }

    impl Facet<Number> {
        /// The name of an extra bucket for the values outside the
        /// boundaries (`default`).
        pub fn default_bucket(mut self, bucket: impl AsRef<str>) -> Self {
            self.spec.insert("default", bucket.as_ref());
            self
        }
    }

    /// The kind of a date facet; made by [`date`].
    pub struct Date;

    /// A facet counting the values of the date field `path` in the ranges
    /// between consecutive `boundaries`.
    pub fn date(
        path: impl AsRef<str>,
        boundaries: impl IntoIterator<Item = DateTime>,
    ) -> Facet<Date> {
        let boundaries: Vec<DateTime> = boundaries.into_iter().collect();
        Facet::new(doc! { "type": "date", "path": path.as_ref(), "boundaries": boundaries })
    }

    impl Facet<Date> {
        /// The name of an extra bucket for the dates outside the boundaries
        /// (`default`).
        pub fn default_bucket(mut self, bucket: impl AsRef<str>) -> Self {
            self.spec.insert("default", bucket.as_ref());
            self
        }
    }
}
