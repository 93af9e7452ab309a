//! The unified format's matching rules ("Evaluating Matches"): expected
//! values against actual ones, with the special operators (`$$exists`,
//! `$$type`, `$$unsetOrMatches`, `$$sessionLsid`, `$$matchesEntity`,
//! `$$lte`, `$$matchAsDocument`, `$$matchAsRoot`, `$$matchesHexBytes`).
//!
//! Root-level documents (an operation's result, a command as sent, a reply)
//! may carry fields the expectation does not name; nested documents may not.
//! Numbers compare by value across int32, int64 and double.

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

fn numeric(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
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
            return operator_matches(path, operator, operand, actual, entities);
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
        _ => match (numeric(expected), numeric(actual)) {
            (Some(e), Some(a)) if e == a => Ok(()),
            (Some(_), Some(_)) => Err(format!("{path}: expected {expected}, found {actual}")),
            _ if expected == actual => Ok(()),
            _ => Err(format!("{path}: expected {expected:?}, found {actual:?}")),
        },
    }
}

fn operator_matches(
    path: &str,
    operator: &str,
    operand: &Bson,
    actual: Option<&Bson>,
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
        "$$unsetOrMatches" => match actual {
            None => Ok(()),
            Some(_) => matches_at(path, operand, actual, true, entities),
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
            matches_at(path, &value, actual, true, entities)
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
