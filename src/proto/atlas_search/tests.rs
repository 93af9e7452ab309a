//! Every operator family's stage document, field for field, as the Atlas
//! Search reference spells it (and as the official driver writes it).

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document};

use super::*;

fn search_body(stage: Document) -> Document {
    stage.get_document("$search").unwrap().clone()
}

#[test]
fn autocomplete_writes_path_query_and_its_options() {
    let stage = autocomplete("title", "pre")
        .token_order(TokenOrder::Sequential)
        .fuzzy(doc! { "maxEdits": 1 })
        .score(doc! { "boost": { "value": 2 } })
        .into_stage();
    assert_eq!(
        stage,
        doc! { "$search": { "autocomplete": {
            "path": "title",
            "query": "pre",
            "tokenOrder": "sequential",
            "fuzzy": { "maxEdits": 1 },
            "score": { "boost": { "value": 2 } },
        } } }
    );
    let any = autocomplete("title", "pre").token_order(TokenOrder::Any);
    assert_eq!(
        search_body(any.into_stage()),
        doc! { "autocomplete": { "path": "title", "query": "pre", "tokenOrder": "any" } }
    );
}

#[test]
fn string_or_array_parameters_take_one_string_or_a_list() {
    let paths: &[&str] = &["title", "plot"];
    let queries: &[String] = &["a".to_string(), "b".to_string()];
    assert_eq!(
        search_body(text(paths, queries).into_stage()),
        doc! { "text": { "path": ["title", "plot"], "query": ["a", "b"] } }
    );
    assert_eq!(
        search_body(phrase(String::from("plot"), "new york").into_stage()),
        doc! { "phrase": { "path": "plot", "query": "new york" } }
    );
}

#[test]
fn compound_nests_each_clause_as_its_operator_document() {
    let stage = compound()
        .must(vec![
            text("description", "varieties").unit(),
            compound().should(text("description", "Fuji")).unit(),
        ])
        .must_not(exists("banned"))
        .should([doc! { "text": { "path": "a", "query": "b" } }])
        .filter(range("year").gte(2000))
        .minimum_should_match(1)
        .score(doc! { "constant": { "value": 1 } })
        .into_stage();
    assert_eq!(
        stage,
        doc! { "$search": { "compound": {
            "must": [
                { "text": { "path": "description", "query": "varieties" } },
                { "compound": { "should": [
                    { "text": { "path": "description", "query": "Fuji" } },
                ] } },
            ],
            "mustNot": [{ "exists": { "path": "banned" } }],
            "should": [{ "text": { "path": "a", "query": "b" } }],
            "filter": [{ "range": { "path": "year", "gte": 2000 } }],
            "minimumShouldMatch": 1,
            "score": { "constant": { "value": 1 } },
        } } }
    );
}

#[test]
fn embedded_document_equals_exists_and_in_write_their_fields() {
    let score = doc! { "boost": { "value": 3 } };
    assert_eq!(
        search_body(
            embedded_document("items", text("items.tags", "school"))
                .score(score.clone())
                .into_stage()
        ),
        doc! { "embeddedDocument": {
            "path": "items",
            "operator": { "text": { "path": "items.tags", "query": "school" } },
            "score": score.clone(),
        } }
    );
    let id = ObjectId::from_bytes([7; 12]);
    assert_eq!(
        search_body(equals("owner", id).score(score.clone()).into_stage()),
        doc! { "equals": { "path": "owner", "value": id, "score": score.clone() } }
    );
    assert_eq!(
        search_body(exists("rating").score(score.clone()).into_stage()),
        doc! { "exists": { "path": "rating", "score": score.clone() } }
    );
    assert_eq!(
        search_body(
            search_in("genres", vec!["Drama", "Comedy"])
                .score(score.clone())
                .into_stage()
        ),
        doc! { "in": { "path": "genres", "value": ["Drama", "Comedy"], "score": score } }
    );
}

#[test]
fn facet_collects_string_number_and_date_facets_for_search_meta() {
    let start = DateTime::from_millis(0);
    let end = DateTime::from_millis(1_000);
    let stage = search_meta(
        facet(doc! {
            "directors": facet::string("directors").num_buckets(7),
            "years": facet::number("year", [2000, 2010]).default_bucket("other"),
            "released": facet::date("released", [start, end]).default_bucket("later"),
        })
        .operator(range("released").gte(start).lte(end)),
    )
    .index("movies")
    .count(doc! { "type": "total" })
    .into_stage();
    assert_eq!(
        stage,
        doc! { "$searchMeta": {
            "facet": {
                "facets": {
                    "directors": { "type": "string", "path": "directors", "numBuckets": 7 },
                    "years": {
                        "type": "number", "path": "year", "boundaries": [2000, 2010],
                        "default": "other",
                    },
                    "released": {
                        "type": "date", "path": "released", "boundaries": [start, end],
                        "default": "later",
                    },
                },
                "operator": { "range": { "path": "released", "gte": start, "lte": end } },
            },
            "index": "movies",
            "count": { "type": "total" },
        } }
    );
    assert_eq!(
        exists("a").into_stage_meta(),
        doc! { "$searchMeta": { "exists": { "path": "a" } } }
    );
}

#[test]
fn geo_operators_write_relation_and_the_chosen_shape() {
    let point = doc! { "type": "Point", "coordinates": [1.0, 2.0] };
    assert_eq!(
        search_body(
            geo_shape("address.location", Relation::Disjoint, point.clone())
                .score(doc! { "constant": { "value": 1 } })
                .into_stage()
        ),
        doc! { "geoShape": {
            "path": "address.location",
            "relation": "disjoint",
            "geometry": point.clone(),
            "score": { "constant": { "value": 1 } },
        } }
    );
    let relations = [
        (Relation::Contains, "contains"),
        (Relation::Intersects, "intersects"),
        (Relation::Within, "within"),
        (Relation::Other("touches".into()), "touches"),
    ];
    for (relation, name) in relations {
        let spec = search_body(geo_shape("p", relation, point.clone()).into_stage());
        assert_eq!(
            spec.get_document("geoShape").unwrap().get_str("relation"),
            Ok(name)
        );
    }
    let corners = doc! { "bottomLeft": point.clone(), "topRight": point.clone() };
    let circle = doc! { "center": point.clone(), "radius": 1600 };
    assert_eq!(
        search_body(
            geo_within("loc")
                .geo_box(corners.clone())
                .circle(circle.clone())
                .geometry(point.clone())
                .score(doc! {})
                .into_stage()
        ),
        doc! { "geoWithin": {
            "path": "loc", "box": corners, "circle": circle, "geometry": point, "score": {},
        } }
    );
}

#[test]
fn more_like_this_takes_one_document_or_several() {
    let like = doc! { "title": "The Godfather" };
    assert_eq!(
        search_body(more_like_this(like.clone()).score(doc! {}).into_stage()),
        doc! { "moreLikeThis": { "like": like.clone(), "score": {} } }
    );
    let several = [like.clone(), doc! { "genre": "action" }];
    assert_eq!(
        search_body(more_like_this(&several[..]).into_stage()),
        doc! { "moreLikeThis": { "like": [like, { "genre": "action" }] } }
    );
}

#[test]
fn near_takes_a_number_a_date_or_a_point_as_origin() {
    assert_eq!(
        search_body(near("runtime", 279, 2).score(doc! {}).into_stage()),
        doc! { "near": { "path": "runtime", "origin": 279, "pivot": 2, "score": {} } }
    );
    let when = DateTime::from_millis(5);
    assert_eq!(
        search_body(near("released", when, 7_776_000_000_i64).into_stage()),
        doc! { "near": { "path": "released", "origin": when, "pivot": 7_776_000_000_i64 } }
    );
    let point = doc! { "type": "Point", "coordinates": [-8.6, 41.1] };
    assert_eq!(
        search_body(near("loc", point.clone(), 1000.5).into_stage()),
        doc! { "near": { "path": "loc", "origin": point, "pivot": 1000.5 } }
    );
    let unsigned = search_body(near("n", 1_u32, 1.5_f32).into_stage());
    assert_eq!(
        unsigned.get_document("near").unwrap().get("pivot"),
        Some(&Bson::Double(1.5))
    );
}

#[test]
fn phrase_query_string_regex_and_wildcard_write_their_options() {
    assert_eq!(
        search_body(
            phrase("title", ["men", "women"].as_slice())
                .slop(5)
                .synonyms("mySynonyms")
                .score(doc! {})
                .into_stage()
        ),
        doc! { "phrase": {
            "path": "title", "query": ["men", "women"], "slop": 5,
            "synonyms": "mySynonyms", "score": {},
        } }
    );
    assert_eq!(
        search_body(query_string("title", "Rocky AND (IV OR 4)").into_stage()),
        doc! { "queryString": { "defaultPath": "title", "query": "Rocky AND (IV OR 4)" } }
    );
    assert_eq!(
        search_body(
            regex("title", "(.*) Seattle")
                .allow_analyzed_field(true)
                .score(doc! {})
                .into_stage()
        ),
        doc! { "regex": {
            "path": "title", "query": "(.*) Seattle", "allowAnalyzedField": true, "score": {},
        } }
    );
    assert_eq!(
        search_body(
            wildcard("title", "Green D*")
                .allow_analyzed_field(false)
                .score(doc! {})
                .into_stage()
        ),
        doc! { "wildcard": {
            "path": "title", "query": "Green D*", "allowAnalyzedField": false, "score": {},
        } }
    );
}

#[test]
fn range_takes_numbers_dates_strings_and_object_ids() {
    assert_eq!(
        search_body(
            range("runtime")
                .gt(2)
                .gte(2.5)
                .lt(10_i64)
                .lte(11_u32)
                .score(doc! {})
                .into_stage()
        ),
        doc! { "range": {
            "path": "runtime", "gt": 2, "gte": 2.5, "lt": 10_i64, "lte": 11, "score": {},
        } }
    );
    let id = ObjectId::from_bytes([1; 12]);
    let upper = String::from("c");
    assert_eq!(
        search_body(range("title").gte("a").lt(&upper).into_stage()),
        doc! { "range": { "path": "title", "gte": "a", "lt": "c" } }
    );
    assert_eq!(
        search_body(range("_id").gt(id).lte(upper).into_stage()),
        doc! { "range": { "path": "_id", "gt": id, "lte": "c" } }
    );
}

#[test]
fn text_writes_fuzzy_match_criteria_and_synonyms() {
    assert_eq!(
        search_body(
            text("plot", "baseball")
                .fuzzy(doc! {})
                .match_criteria(MatchCriteria::All)
                .synonyms("words")
                .score(doc! {})
                .into_stage()
        ),
        doc! { "text": {
            "path": "plot", "query": "baseball", "fuzzy": {}, "matchCriteria": "all",
            "synonyms": "words", "score": {},
        } }
    );
    for (criteria, name) in [
        (MatchCriteria::Any, "any"),
        (MatchCriteria::Other("some".into()), "some"),
    ] {
        let spec = search_body(text("p", "q").match_criteria(criteria).into_stage());
        assert_eq!(
            spec.get_document("text").unwrap().get_str("matchCriteria"),
            Ok(name)
        );
    }
    let other = autocomplete("p", "q").token_order(TokenOrder::Other("x".into()));
    let spec = search_body(other.into_stage());
    assert_eq!(
        spec.get_document("autocomplete")
            .unwrap()
            .get_str("tokenOrder"),
        Ok("x")
    );
}

#[test]
fn search_writes_every_stage_option_beside_the_operator() {
    let stage = search(text("title", "dune"))
        .index("movies")
        .concurrent(true)
        .count(doc! { "type": "lowerBound" })
        .highlight(doc! { "path": "title" })
        .return_stored_source(false)
        .search_after("token-a")
        .search_before(String::from("token-b"))
        .score_details(true)
        .sort(doc! { "released": -1 })
        .into_stage();
    assert_eq!(
        stage,
        doc! { "$search": {
            "text": { "path": "title", "query": "dune" },
            "index": "movies",
            "concurrent": true,
            "count": { "type": "lowerBound" },
            "highlight": { "path": "title" },
            "returnStoredSource": false,
            "searchAfter": "token-a",
            "searchBefore": "token-b",
            "scoreDetails": true,
            "sort": { "released": -1 },
        } }
    );
}

#[test]
fn a_setter_called_twice_keeps_the_last_value() {
    let stage = search(exists("a").score(doc! { "x": 1 }).score(doc! { "x": 2 }))
        .index("one")
        .index("two")
        .into_stage();
    assert_eq!(
        stage,
        doc! { "$search": { "exists": { "path": "a", "score": { "x": 2 } }, "index": "two" } }
    );
}
