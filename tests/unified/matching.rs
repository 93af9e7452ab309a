//! The unified format's matching rules ("Evaluating Matches"): expected
//! values against actual ones, with the special operators (`$$exists`,
//! `$$type`, `$$unsetOrMatches`, `$$sessionLsid`, `$$matchesEntity`,
//! `$$lte`, `$$matchAsDocument`, `$$matchAsRoot`, `$$matchesHexBytes`).
//!
//! Root-level documents (an operation's result, a command as sent, a reply)
//! may carry fields the expectation does not name; nested documents may not.
//! Numbers compare by value across int32, int64 and double, exactly (an
//! int64 is never rounded through a double). [`exactly`] is the outcome's
//! rule instead: no operators, no extra fields, the same types.

use bson::{Bson, Document};

/// What the matcher needs from the runner: entity values by name.
pub trait Entities {
    /// The BSON value of an entity (a saved result, or a session's lsid).
    fn value(&self, name: &str) -> Option<Bson>;
    /// The lsid of a session entity.
    fn session_lsid(&self, name: &str) -> Option<Document>;
}

/// Whether `actual` (absent when `None`) matches `expected`; the error says
/// where and why not.
pub fn matches(
    expected: &Bson,
    actual: Option<&Bson>,
    root: bool,
    entities: &dyn Entities,
) -> Result<(), String> {
    matches_at("", expected, actual, root, entities)
}

/// Operations whose result is an iterable of documents: each element of
/// their result array is a root-level document. Any other array (a
/// `distinct`'s values, a list of names) matches element by element with
/// no extra fields allowed.
const DOCUMENT_ITERABLES: &[&str] = &[
    "find",
    "aggregate",
    "listCollections",
    "listCollectionObjects",
    "listDatabases",
    "listDatabaseObjects",
    "listIndexes",
    "listSearchIndexes",
    "runCursorCommand",
];

/// `expectResult` of `operation` against its result: a document at the
/// root is root-level, and so are the documents of an iterable result.
pub fn expect_result(
    operation: &str,
    expected: &Bson,
    actual: &Bson,
    entities: &dyn Entities,
) -> Result<(), String> {
    let root = !matches!(actual, Bson::Array(_)) || DOCUMENT_ITERABLES.contains(&operation);
    matches(expected, Some(actual), root, entities)
}

fn numeric(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// Whether two numbers are equal by value ("flexible numeric
/// comparisons"): integers as integers, a double only with an integer it
/// equals exactly.
fn same_number(expected: &Bson, actual: &Bson) -> Option<bool> {
    let integer = |b: &Bson| match b {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    };
    match (expected, actual) {
        (Bson::Double(a), Bson::Double(b)) => Some(a == b),
        (Bson::Double(d), other) | (other, Bson::Double(d)) => {
            let i = integer(other)?;
            // Beyond ±2^63 or fractional, no integer equals it; otherwise
            // compare as integers so that 2^53 + 1 is not 2^53.
            let fits = d.fract() == 0.0 && *d >= -(2f64.powi(63)) && *d < 2f64.powi(63);
            Some(fits && *d as i64 == i)
        }
        _ => Some(integer(expected)? == integer(actual)?),
    }
}

fn special_operator(document: &Document) -> Option<(&str, &Bson)> {
    if document.len() != 1 {
        return None;
    }
    let (key, value) = document.iter().next()?;
    key.starts_with("$$").then_some((key.as_str(), value))
}

fn matches_at(
    path: &str,
    expected: &Bson,
    actual: Option<&Bson>,
    root: bool,
    entities: &dyn Entities,
) -> Result<(), String> {
    if let Bson::Document(expected_doc) = expected {
        if let Some((operator, operand)) = special_operator(expected_doc) {
            return operator_matches(path, operator, operand, actual, root, entities);
        }
    }
    let Some(actual) = actual else {
        return Err(format!("{path}: expected {expected}, found nothing"));
    };
    match expected {
        Bson::Document(expected_doc) => {
            let Bson::Document(actual_doc) = actual else {
                return Err(format!("{path}: expected a document, found {actual}"));
            };
            for (key, value) in expected_doc {
                let child = format!("{path}.{key}");
                matches_at(&child, value, actual_doc.get(key), false, entities)?;
            }
            if !root {
                if let Some(extra) = actual_doc.keys().find(|k| !expected_doc.contains_key(*k)) {
                    return Err(format!(
                        "{path}: unexpected field {extra:?} in nested document {actual_doc}"
                    ));
                }
            }
            Ok(())
        }
        Bson::Array(expected_items) => {
            let Bson::Array(actual_items) = actual else {
                return Err(format!("{path}: expected an array, found {actual}"));
            };
            if expected_items.len() != actual_items.len() {
                return Err(format!(
                    "{path}: expected {} elements, found {}: {actual}",
                    expected_items.len(),
                    actual_items.len()
                ));
            }
            for (i, (e, a)) in expected_items.iter().zip(actual_items).enumerate() {
                // Elements of a root-level array (e.g. a find's documents)
                // are root-level documents themselves.
                matches_at(&format!("{path}[{i}]"), e, Some(a), root, entities)?;
            }
            Ok(())
        }
        _ => match same_number(expected, actual) {
            Some(true) => Ok(()),
            Some(false) => Err(format!("{path}: expected {expected}, found {actual}")),
            None if expected == actual => Ok(()),
            None => Err(format!("{path}: expected {expected:?}, found {actual:?}")),
        },
    }
}

fn operator_matches(
    path: &str,
    operator: &str,
    operand: &Bson,
    actual: Option<&Bson>,
    root: bool,
    entities: &dyn Entities,
) -> Result<(), String> {
    match operator {
        "$$exists" => {
            let want = operand.as_bool().ok_or("$$exists needs a boolean")?;
            if want == actual.is_some() {
                Ok(())
            } else if want {
                Err(format!("{path}: expected to exist"))
            } else {
                Err(format!("{path}: expected to be absent, found {actual:?}"))
            }
        }
        "$$type" => {
            let Some(actual) = actual else {
                return Err(format!("{path}: expected a value of type {operand}"));
            };
            let names: Vec<&str> = match operand {
                Bson::String(s) => vec![s.as_str()],
                Bson::Array(a) => a.iter().filter_map(Bson::as_str).collect(),
                _ => return Err("$$type needs a string or an array".into()),
            };
            if names.iter().any(|n| type_matches(n, actual)) {
                Ok(())
            } else {
                Err(format!("{path}: expected type {operand}, found {actual:?}"))
            }
        }
        // Neither operator changes whether the value is a root document.
        "$$unsetOrMatches" => match actual {
            None => Ok(()),
            Some(_) => matches_at(path, operand, actual, root, entities),
        },
        "$$sessionLsid" => {
            let name = operand.as_str().ok_or("$$sessionLsid needs a string")?;
            let lsid = entities
                .session_lsid(name)
                .ok_or_else(|| format!("no session entity {name:?}"))?;
            matches_at(path, &Bson::Document(lsid), actual, false, entities)
        }
        "$$matchesEntity" => {
            let name = operand.as_str().ok_or("$$matchesEntity needs a string")?;
            let value = entities
                .value(name)
                .ok_or_else(|| format!("no entity {name:?}"))?;
            matches_at(path, &value, actual, root, entities)
        }
        "$$lte" => {
            let (Some(limit), Some(value)) = (numeric(operand), actual.and_then(numeric)) else {
                return Err(format!("{path}: $$lte {operand} against {actual:?}"));
            };
            if value <= limit {
                Ok(())
            } else {
                Err(format!("{path}: {value} is not <= {limit}"))
            }
        }
        "$$matchAsDocument" => {
            let Some(Bson::String(text)) = actual else {
                return Err(format!("{path}: expected a JSON string, found {actual:?}"));
            };
            let json: serde_json::Value =
                serde_json::from_str(text).map_err(|e| format!("{path}: not JSON: {e}"))?;
            let parsed = Bson::try_from(json).map_err(|e| format!("{path}: {e}"))?;
            if !matches!(parsed, Bson::Document(_)) {
                return Err(format!("{path}: the JSON is not an object: {text}"));
            }
            // The decoded document matches like a nested one: no extra fields.
            matches_at(path, operand, Some(&parsed), false, entities)
        }
        "$$matchAsRoot" => matches_at(path, operand, actual, true, entities),
        "$$matchesHexBytes" => {
            let want = operand.as_str().ok_or("$$matchesHexBytes needs a string")?;
            let Some(Bson::Binary(binary)) = actual else {
                return Err(format!("{path}: expected binary data, found {actual:?}"));
            };
            let hex: String = binary.bytes.iter().map(|b| format!("{b:02x}")).collect();
            if hex.eq_ignore_ascii_case(want) {
                Ok(())
            } else {
                Err(format!("{path}: bytes {hex} are not {want}"))
            }
        }
        other => Err(format!("{path}: unknown special operator {other}")),
    }
}

/// The outcome's rule ("the documents MUST match exactly"): the same keys
/// in any order, the same types and values, no special operators.
pub fn exactly(path: &str, expected: &Bson, actual: &Bson) -> Result<(), String> {
    match (expected, actual) {
        (Bson::Document(e), Bson::Document(a)) => {
            if let Some(extra) = a.keys().find(|k| !e.contains_key(*k)) {
                return Err(format!("{path}: unexpected field {extra:?} in {a}"));
            }
            for (key, value) in e {
                let child = format!("{path}.{key}");
                let found = a
                    .get(key)
                    .ok_or_else(|| format!("{child}: expected {value}, found nothing"))?;
                exactly(&child, value, found)?;
            }
            Ok(())
        }
        (Bson::Array(e), Bson::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "{path}: expected {} elements, found {}: {actual}",
                    e.len(),
                    a.len()
                ));
            }
            for (i, (x, y)) in e.iter().zip(a).enumerate() {
                exactly(&format!("{path}[{i}]"), x, y)?;
            }
            Ok(())
        }
        _ if expected == actual => Ok(()),
        _ => Err(format!("{path}: expected {expected:?}, found {actual:?}")),
    }
}

fn type_matches(name: &str, value: &Bson) -> bool {
    matches!(
        (name, value),
        ("double", Bson::Double(_))
            | ("string", Bson::String(_))
            | ("object", Bson::Document(_))
            | ("array", Bson::Array(_))
            | ("binData", Bson::Binary(_))
            | ("undefined", Bson::Undefined)
            | ("objectId", Bson::ObjectId(_))
            | ("bool", Bson::Boolean(_))
            | ("date", Bson::DateTime(_))
            | ("null", Bson::Null)
            | ("regex", Bson::RegularExpression(_))
            | ("dbPointer", Bson::DbPointer(_))
            | ("javascript", Bson::JavaScriptCode(_))
            | ("symbol", Bson::Symbol(_))
            | ("javascriptWithScope", Bson::JavaScriptCodeWithScope(_))
            | ("int", Bson::Int32(_))
            | ("timestamp", Bson::Timestamp(_))
            | ("long", Bson::Int64(_))
            | ("decimal", Bson::Decimal128(_))
            | ("minKey", Bson::MinKey)
            | ("maxKey", Bson::MaxKey)
            | (
                "number",
                Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
            )
    )
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    struct NoEntities;
    impl Entities for NoEntities {
        fn value(&self, _: &str) -> Option<Bson> {
            None
        }
        fn session_lsid(&self, _: &str) -> Option<Document> {
            None
        }
    }

    fn check(expected: Document, actual: Document, root: bool) -> Result<(), String> {
        matches(
            &Bson::Document(expected),
            Some(&Bson::Document(actual)),
            root,
            &NoEntities,
        )
    }

    #[test]
    fn root_documents_allow_extra_fields_nested_ones_do_not() {
        assert!(check(doc! { "a": 1 }, doc! { "a": 1, "b": 2 }, true).is_ok());
        assert!(check(
            doc! { "a": { "x": 1 } },
            doc! { "a": { "x": 1, "y": 2 } },
            true
        )
        .is_err());
    }

    struct OneEntity(Bson);
    impl Entities for OneEntity {
        fn value(&self, name: &str) -> Option<Bson> {
            (name == "e").then(|| self.0.clone())
        }
        fn session_lsid(&self, _: &str) -> Option<Document> {
            None
        }
    }

    #[test]
    fn unset_or_matches_keeps_its_place_a_nested_operand_allows_no_extra_fields() {
        let expected = doc! { "w": { "$$unsetOrMatches": { "a": 1 } } };
        assert!(check(expected.clone(), doc! { "w": { "a": 1 } }, true).is_ok());
        // The lax form matched the operand as a root document.
        assert!(check(expected, doc! { "w": { "a": 1, "b": 2 } }, true).is_err());
        // At the root the operand is still root-level.
        let whole = doc! { "$$unsetOrMatches": { "a": 1 } };
        assert!(check(whole, doc! { "a": 1, "b": 2 }, true).is_ok());
    }

    #[test]
    fn matches_entity_keeps_its_place_a_nested_entity_allows_no_extra_fields() {
        let entities = OneEntity(Bson::Document(doc! { "a": 1 }));
        let expected = Bson::Document(doc! { "w": { "$$matchesEntity": "e" } });
        let nested =
            |actual: Document| matches(&expected, Some(&Bson::Document(actual)), true, &entities);
        assert!(nested(doc! { "w": { "a": 1 } }).is_ok());
        assert!(nested(doc! { "w": { "a": 1, "b": 2 } }).is_err());
        assert!(matches(&expected, None, true, &entities).is_err());
    }

    #[test]
    fn only_iterables_of_documents_have_root_level_elements() {
        let expected = Bson::Array(vec![Bson::Document(doc! { "x": 1 })]);
        let actual = Bson::Array(vec![Bson::Document(doc! { "x": 1, "y": 1 })]);
        assert!(expect_result("find", &expected, &actual, &NoEntities).is_ok());
        assert!(expect_result("aggregate", &expected, &actual, &NoEntities).is_ok());
        // A distinct's values are values, not root documents.
        assert!(expect_result("distinct", &expected, &actual, &NoEntities).is_err());
        // A document result is root-level.
        let one = Bson::Document(doc! { "x": 1 });
        let more = Bson::Document(doc! { "x": 1, "y": 1 });
        assert!(expect_result("findOneAndUpdate", &one, &more, &NoEntities).is_ok());
    }

    #[test]
    fn large_int64_values_are_not_compared_through_doubles() {
        let big = 1_i64 << 53;
        assert!(check(doc! { "n": big + 1 }, doc! { "n": big }, true).is_err());
        assert!(check(doc! { "n": big + 1 }, doc! { "n": big as f64 }, true).is_err());
        assert!(check(doc! { "n": big }, doc! { "n": big as f64 }, true).is_ok());
        assert!(check(doc! { "n": 1 }, doc! { "n": 1.5 }, true).is_err());
        assert!(check(doc! { "n": i64::MAX }, doc! { "n": i64::MAX as f64 }, true).is_err());
    }

    #[test]
    fn the_outcome_matches_exactly_types_and_fields() {
        let exact = |e: Document, a: Document| exactly("", &Bson::Document(e), &Bson::Document(a));
        assert!(exact(doc! { "_id": 1, "x": 1 }, doc! { "x": 1, "_id": 1 }).is_ok());
        // An int32 widened to int64 matches flexibly but not exactly.
        assert!(check(doc! { "x": 1 }, doc! { "x": 1_i64 }, false).is_ok());
        assert!(exact(doc! { "_id": 1, "x": 1 }, doc! { "_id": 1, "x": 1_i64 }).is_err());
        assert!(exact(doc! { "_id": 1 }, doc! { "_id": 1, "y": 1 }).is_err());
        assert!(exact(doc! { "_id": { "$$exists": true } }, doc! { "_id": 1 }).is_err());
        let big = 1_i64 << 53;
        assert!(exact(doc! { "n": big + 1 }, doc! { "n": big }).is_err());
    }

    #[test]
    fn numbers_compare_by_value_and_operators_apply() {
        assert!(check(doc! { "n": 1 }, doc! { "n": 1.0 }, true).is_ok());
        assert!(check(doc! { "n": 1 }, doc! { "n": 2_i64 }, true).is_err());
        assert!(check(doc! { "w": { "$$exists": false } }, doc! { "w": 1 }, true).is_err());
        assert!(check(doc! { "w": { "$$exists": false } }, doc! {}, true).is_ok());
        assert!(check(doc! { "w": { "$$unsetOrMatches": 1 } }, doc! {}, true).is_ok());
        assert!(check(
            doc! { "w": { "$$unsetOrMatches": 1 } },
            doc! { "w": 2 },
            true
        )
        .is_err());
        assert!(check(
            doc! { "t": { "$$type": ["int", "long"] } },
            doc! { "t": 1_i64 },
            true
        )
        .is_ok());
        assert!(check(doc! { "t": { "$$type": "string" } }, doc! { "t": 1 }, true).is_err());
        assert!(check(doc! { "t": { "$$lte": 5 } }, doc! { "t": 6 }, true).is_err());
    }
}
