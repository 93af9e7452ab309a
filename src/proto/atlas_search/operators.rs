//! The Atlas Search operators: one marker type, one constructor taking the
//! operator's required fields, and the setters of its optional fields each.
//! Field names and shapes are the Atlas Search operator reference's
//! (<https://www.mongodb.com/docs/atlas/atlas-search/operators-and-collectors/>).

use super::*;

/// The `autocomplete` operator; made by [`autocomplete`](autocomplete()).
pub struct Autocomplete;

/// Searches for a word or phrase that contains a sequence of characters
/// from an incomplete input string (the fields must be indexed with the
/// `autocomplete` type). See the
/// [autocomplete reference](https://www.mongodb.com/docs/atlas/atlas-search/autocomplete/).
pub fn autocomplete(
    path: impl StringOrArray,
    query: impl StringOrArray,
) -> SearchOperator<Autocomplete> {
    SearchOperator::new(
        "autocomplete",
        doc! { "path": path.to_bson(), "query": query.to_bson() },
    )
}

impl SearchOperator<Autocomplete> {
    /// Whether the query's tokens may match in any order (`tokenOrder`).
    pub fn token_order(self, token_order: TokenOrder) -> Self {
        self.with("tokenOrder", token_order.name())
    }

    /// Fuzzy matching options (`fuzzy`: `maxEdits`, `prefixLength`,
    /// `maxExpansions`).
    pub fn fuzzy(self, fuzzy: Document) -> Self {
        self.with("fuzzy", fuzzy)
    }

    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `compound` operator; made by [`compound`](compound()).
pub struct Compound;

/// Combines operators into one query: clauses that must, must not, should
/// or (without scoring) must match. See the
/// [compound reference](https://www.mongodb.com/docs/atlas/atlas-search/compound/).
pub fn compound() -> SearchOperator<Compound> {
    SearchOperator::new("compound", doc! {})
}

/// The clause list as the array the server reads.
fn clauses(clauses: impl IntoIterator<Item = impl SearchOperatorParam>) -> Vec<Bson> {
    clauses.into_iter().map(Parameter::to_bson).collect()
}

impl SearchOperator<Compound> {
    /// Clauses every result must match (`must`).
    pub fn must(self, must: impl IntoIterator<Item = impl SearchOperatorParam>) -> Self {
        self.with("must", clauses(must))
    }

    /// Clauses no result may match (`mustNot`).
    pub fn must_not(self, must_not: impl IntoIterator<Item = impl SearchOperatorParam>) -> Self {
        self.with("mustNot", clauses(must_not))
    }

    /// Clauses a result should match, scoring higher when it does
    /// (`should`).
    pub fn should(self, should: impl IntoIterator<Item = impl SearchOperatorParam>) -> Self {
        self.with("should", clauses(should))
    }

    /// Clauses every result must match, without affecting the score
    /// (`filter`).
    pub fn filter(self, filter: impl IntoIterator<Item = impl SearchOperatorParam>) -> Self {
        self.with("filter", clauses(filter))
    }

    /// How many `should` clauses a result must match
    /// (`minimumShouldMatch`).
    pub fn minimum_should_match(self, minimum_should_match: i32) -> Self {
        self.with("minimumShouldMatch", minimum_should_match)
    }

    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `embeddedDocument` operator; made by
/// [`embedded_document`](embedded_document()).
pub struct EmbeddedDocument;

/// Requires `operator` to match within one element of an array of
/// embedded documents (as `$elemMatch` does), for fields indexed as
/// `embeddedDocuments`. See the
/// [embeddedDocument reference](https://www.mongodb.com/docs/atlas/atlas-search/embedded-document/).
pub fn embedded_document(
    path: impl StringOrArray,
    operator: impl SearchOperatorParam,
) -> SearchOperator<EmbeddedDocument> {
    SearchOperator::new(
        "embeddedDocument",
        doc! { "path": path.to_bson(), "operator": operator.to_bson() },
    )
}

impl SearchOperator<EmbeddedDocument> {
    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `equals` operator; made by [`equals`](equals()).
pub struct Equals;

/// Matches documents whose field `path` equals `value`. See the
/// [equals reference](https://www.mongodb.com/docs/atlas/atlas-search/equals/).
pub fn equals(path: impl StringOrArray, value: impl Into<Bson>) -> SearchOperator<Equals> {
    SearchOperator::new(
        "equals",
        doc! { "path": path.to_bson(), "value": value.into() },
    )
}

impl SearchOperator<Equals> {
    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `exists` operator; made by [`exists`](exists()).
pub struct Exists;

/// Matches documents that have the indexed field `path`. See the
/// [exists reference](https://www.mongodb.com/docs/atlas/atlas-search/exists/).
pub fn exists(path: impl StringOrArray) -> SearchOperator<Exists> {
    SearchOperator::new("exists", doc! { "path": path.to_bson() })
}

impl SearchOperator<Exists> {
    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `facet` collector; made by [`facet`](fn@facet).
pub struct Facet;

/// Groups the results by the values or ranges of the faceted fields and
/// counts each group, for a `$searchMeta` stage; `facets` maps each facet's
/// name to its definition (see the [`facet`](mod@facet) module). See the
/// [facet reference](https://www.mongodb.com/docs/atlas/atlas-search/facet/).
pub fn facet(facets: Document) -> SearchOperator<Facet> {
    SearchOperator::new("facet", doc! { "facets": facets })
}

impl SearchOperator<Facet> {
    /// The operator whose results are grouped (`operator`; all documents
    /// without one).
    pub fn operator(self, operator: impl SearchOperatorParam) -> Self {
        self.with("operator", operator.to_bson())
    }
}

/// The `geoShape` operator; made by [`geo_shape`](geo_shape()).
pub struct GeoShape;

/// Matches shapes in the relation `relation` to `geometry` (a GeoJSON
/// geometry), for fields indexed with `indexShapes: true`. See the
/// [geoShape reference](https://www.mongodb.com/docs/atlas/atlas-search/geoShape/).
pub fn geo_shape(
    path: impl StringOrArray,
    relation: Relation,
    geometry: Document,
) -> SearchOperator<GeoShape> {
    SearchOperator::new(
        "geoShape",
        doc! { "path": path.to_bson(), "relation": relation.name(), "geometry": geometry },
    )
}

impl SearchOperator<GeoShape> {
    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `geoWithin` operator; made by [`geo_within`](geo_within()).
pub struct GeoWithin;

/// Matches geographic points within a box, a circle or a geometry (set with
/// one of [`geo_box`](SearchOperator::geo_box),
/// [`circle`](SearchOperator::circle) or
/// [`geometry`](SearchOperator::geometry)). See the
/// [geoWithin reference](https://www.mongodb.com/docs/atlas/atlas-search/geoWithin/).
pub fn geo_within(path: impl StringOrArray) -> SearchOperator<GeoWithin> {
    SearchOperator::new("geoWithin", doc! { "path": path.to_bson() })
}

impl SearchOperator<GeoWithin> {
    /// The box to search within (`box`: `bottomLeft` and `topRight`
    /// points).
    pub fn geo_box(self, geo_box: Document) -> Self {
        self.with("box", geo_box)
    }

    /// The circle to search within (`circle`: a `center` point and a
    /// `radius` in meters).
    pub fn circle(self, circle: Document) -> Self {
        self.with("circle", circle)
    }

    /// The GeoJSON Polygon or MultiPolygon to search within (`geometry`).
    pub fn geometry(self, geometry: Document) -> Self {
        self.with("geometry", geometry)
    }

    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `in` operator; made by [`search_in`](search_in()).
pub struct SearchIn;

/// Matches documents whose field `path` holds one of the values `value`
/// (a single value or an array). See the
/// [in reference](https://www.mongodb.com/docs/atlas/atlas-search/in/).
pub fn search_in(path: impl StringOrArray, value: impl Into<Bson>) -> SearchOperator<SearchIn> {
    SearchOperator::new("in", doc! { "path": path.to_bson(), "value": value.into() })
}

impl SearchOperator<SearchIn> {
    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `moreLikeThis` operator; made by [`more_like_this`](more_like_this()).
pub struct MoreLikeThis;

/// Matches documents similar to the document or documents `like`. See the
/// [moreLikeThis reference](https://www.mongodb.com/docs/atlas/atlas-search/moreLikeThis/).
pub fn more_like_this(like: impl DocumentOrArray) -> SearchOperator<MoreLikeThis> {
    SearchOperator::new("moreLikeThis", doc! { "like": like.to_bson() })
}

impl SearchOperator<MoreLikeThis> {
    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `near` operator; made by [`near`](near()).
pub struct Near;

/// Scores numbers, dates or GeoJSON points by their distance from
/// `origin`: a result `pivot` away scores half the maximum. See the
/// [near reference](https://www.mongodb.com/docs/atlas/atlas-search/near/).
pub fn near(
    path: impl StringOrArray,
    origin: impl NearOrigin,
    pivot: impl BsonNumber,
) -> SearchOperator<Near> {
    SearchOperator::new(
        "near",
        doc! { "path": path.to_bson(), "origin": origin.to_bson(), "pivot": pivot.to_bson() },
    )
}

impl SearchOperator<Near> {
    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `phrase` operator; made by [`phrase`](phrase()).
pub struct Phrase;

/// Matches documents containing the terms of `query` in order, analyzed as
/// the index configures. See the
/// [phrase reference](https://www.mongodb.com/docs/atlas/atlas-search/phrase/).
pub fn phrase(path: impl StringOrArray, query: impl StringOrArray) -> SearchOperator<Phrase> {
    SearchOperator::new(
        "phrase",
        doc! { "path": path.to_bson(), "query": query.to_bson() },
    )
}

impl SearchOperator<Phrase> {
    /// How many words may separate the phrase's terms (`slop`).
    pub fn slop(self, slop: i32) -> Self {
        self.with("slop", slop)
    }

    /// The name of the index's synonym mapping to use (`synonyms`).
    pub fn synonyms(self, synonyms: impl AsRef<str>) -> Self {
        self.with("synonyms", synonyms.as_ref())
    }

    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `queryString` operator; made by [`query_string`](query_string()).
pub struct QueryString;

/// Matches the Lucene-style query `query` (`AND`, `OR`, field names),
/// searching `default_path` where the query names no field. See the
/// [queryString reference](https://www.mongodb.com/docs/atlas/atlas-search/queryString/).
pub fn query_string(
    default_path: impl StringOrArray,
    query: impl AsRef<str>,
) -> SearchOperator<QueryString> {
    SearchOperator::new(
        "queryString",
        doc! { "defaultPath": default_path.to_bson(), "query": query.as_ref() },
    )
}

/// The `range` operator; made by [`range`](range()).
pub struct Range;

/// Matches numbers, dates, strings or ObjectIds within the bounds set with
/// [`gt`](SearchOperator::gt), [`gte`](SearchOperator::gte),
/// [`lt`](SearchOperator::lt) and [`lte`](SearchOperator::lte). See the
/// [range reference](https://www.mongodb.com/docs/atlas/atlas-search/range/).
pub fn range(path: impl StringOrArray) -> SearchOperator<Range> {
    SearchOperator::new("range", doc! { "path": path.to_bson() })
}

impl SearchOperator<Range> {
    /// Matches values greater than `gt`.
    pub fn gt(self, gt: impl RangeValue) -> Self {
        self.with("gt", gt.to_bson())
    }

    /// Matches values greater than or equal to `gte`.
    pub fn gte(self, gte: impl RangeValue) -> Self {
        self.with("gte", gte.to_bson())
    }

    /// Matches values less than `lt`.
    pub fn lt(self, lt: impl RangeValue) -> Self {
        self.with("lt", lt.to_bson())
    }

    /// Matches values less than or equal to `lte`.
    pub fn lte(self, lte: impl RangeValue) -> Self {
        self.with("lte", lte.to_bson())
    }

    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `regex` operator; made by [`regex`](regex()).
pub struct Regex;

/// Matches the field `path` against the regular expression `query` (the
/// query is not analyzed). See the
/// [regex reference](https://www.mongodb.com/docs/atlas/atlas-search/regex/).
pub fn regex(path: impl StringOrArray, query: impl AsRef<str>) -> SearchOperator<Regex> {
    SearchOperator::new(
        "regex",
        doc! { "path": path.to_bson(), "query": query.as_ref() },
    )
}

impl SearchOperator<Regex> {
    /// Whether to allow running against an analyzed field
    /// (`allowAnalyzedField`).
    pub fn allow_analyzed_field(self, allow_analyzed_field: bool) -> Self {
        self.with("allowAnalyzedField", allow_analyzed_field)
    }

    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `text` operator; made by [`text`](text()).
pub struct Text;

/// Full-text search of `query` in the field `path`, with the index's
/// analyzer (the standard analyzer if it names none). See the
/// [text reference](https://www.mongodb.com/docs/atlas/atlas-search/text/).
pub fn text(path: impl StringOrArray, query: impl StringOrArray) -> SearchOperator<Text> {
    SearchOperator::new(
        "text",
        doc! { "path": path.to_bson(), "query": query.to_bson() },
    )
}

impl SearchOperator<Text> {
    /// Fuzzy matching options (`fuzzy`: `maxEdits`, `prefixLength`,
    /// `maxExpansions`).
    pub fn fuzzy(self, fuzzy: Document) -> Self {
        self.with("fuzzy", fuzzy)
    }

    /// Whether a result needs any or all of the query's terms
    /// (`matchCriteria`).
    pub fn match_criteria(self, match_criteria: MatchCriteria) -> Self {
        self.with("matchCriteria", match_criteria.name())
    }

    /// The name of the index's synonym mapping to use (`synonyms`).
    pub fn synonyms(self, synonyms: impl AsRef<str>) -> Self {
        self.with("synonyms", synonyms.as_ref())
    }

    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}

/// The `wildcard` operator; made by [`wildcard`](wildcard()).
pub struct Wildcard;

/// Matches the field `path` against `query`, where `?` stands for one
/// character and `*` for any run of characters. See the
/// [wildcard reference](https://www.mongodb.com/docs/atlas/atlas-search/wildcard/).
pub fn wildcard(path: impl StringOrArray, query: impl AsRef<str>) -> SearchOperator<Wildcard> {
    SearchOperator::new(
        "wildcard",
        doc! { "path": path.to_bson(), "query": query.as_ref() },
    )
}

impl SearchOperator<Wildcard> {
    /// Whether to allow running against an analyzed field
    /// (`allowAnalyzedField`).
    pub fn allow_analyzed_field(self, allow_analyzed_field: bool) -> Self {
        self.with("allowAnalyzedField", allow_analyzed_field)
    }

    /// How to modify the results' scores (`score`).
    pub fn score(self, score: Document) -> Self {
        self.with("score", score)
    }
}
