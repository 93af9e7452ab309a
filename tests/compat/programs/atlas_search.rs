//! `mongodb::atlas_search`: `$search` and `$searchMeta` stages built from
//! operators, stage options and facets, put in an `aggregate` pipeline.
//! SecantusDB has no Atlas Search: it refuses the stage with
//! `CommandNotSupported` (115), which the aggregate returns as the server's
//! command error.

use mongodb::atlas_search::{self, facet, search, search_meta, MatchCriteria, TokenOrder};
use mongodb::bson::{doc, DateTime, Document};
use mongodb::error::{CommandError, ErrorKind, Result};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let search_stage = search(
        atlas_search::compound()
            .must(vec![
                atlas_search::text("plot", "baseball")
                    .match_criteria(MatchCriteria::All)
                    .unit(),
                atlas_search::range("year").gte(1990).lt(2000).unit(),
            ])
            .should(atlas_search::autocomplete("title", "the").token_order(TokenOrder::Any))
            .minimum_should_match(1),
    )
    .index("movies")
    .highlight(doc! { "path": "plot" })
    .into_stage();
    assert_eq!(
        search_stage,
        doc! { "$search": {
            "compound": {
                "must": [
                    { "text": { "path": "plot", "query": "baseball", "matchCriteria": "all" } },
                    { "range": { "path": "year", "gte": 1990, "lt": 2000 } },
                ],
                "should": [
                    { "autocomplete": { "path": "title", "query": "the", "tokenOrder": "any" } },
                ],
                "minimumShouldMatch": 1,
            },
            "index": "movies",
            "highlight": { "path": "plot" },
        } }
    );

    let start = DateTime::from_millis(0);
    let meta_stage = search_meta(
        atlas_search::facet(doc! {
            "directorsFacet": facet::string("directors").num_buckets(7),
            "yearFacet": facet::number("year", [2000, 2005, 2010]),
        })
        .operator(atlas_search::range("released").gte(start)),
    )
    .index("movies")
    .into_stage();
    assert_eq!(
        meta_stage,
        doc! { "$searchMeta": {
            "facet": {
                "facets": {
                    "directorsFacet": { "type": "string", "path": "directors", "numBuckets": 7 },
                    "yearFacet": { "type": "number", "path": "year", "boundaries": [2000, 2005, 2010] },
                },
                "operator": { "range": { "path": "released", "gte": start } },
            },
            "index": "movies",
        } }
    );

    let client = Client::with_uri_str(uri)?;
    let movies = client.database("compat_atlas_search").collection::<Document>("movies");
    movies.drop().run()?;
    movies.insert_one(doc! { "title": "The Natural", "plot": "baseball", "year": 1984 }).run()?;
    for stage in [search_stage, meta_stage] {
        let refused = movies.aggregate(vec![stage, doc! { "$limit": 10 }]).run().unwrap_err();
        match *refused.kind {
            ErrorKind::Command(CommandError { code, ref code_name, .. }) => {
                assert_eq!((code, code_name.as_str()), (115, "CommandNotSupported"));
            }
            ref other => panic!("expected the server's refusal, got {other:?}"),
        }
    }
    Ok(())
}
