//! Options structs from a document of the official option names (the CRUD,
//! index and GridFS specs' spelling: `maxTimeMS`, `let`, `readPreference`,
//! `arrayFilters`...), for callers that hold options as BSON: the C ABI.
//!
//! Every struct declared with `options_struct!` gets `set_named`, which
//! matches a name against each field's official name and converts the value
//! with [`OptionValue`]; a field whose type has no `OptionValue` does not
//! compile, so no option can be left out of the documents C callers send.

use std::time::Duration;

use bson::{Bson, Document};

use crate::error::{Error, Result};
use crate::proto::coll_options::{
    ChangeStreamPreAndPostImages, ClusteredIndex, CommitQuorum, CursorType, Hint,
    IndexOptionDefaults, IndexVersion, ReturnDocument, Sphere2DIndexVersion, TextIndexVersion,
    TimeseriesOptions, ValidationAction, ValidationLevel,
};
use crate::proto::collation::Collation;
use crate::proto::concern::{Acknowledgment, ReadConcern, WriteConcern};
use crate::proto::cursor_timeout::TimeoutMode;
use crate::proto::read_preference::SelectionCriteria;
use crate::proto::read_preference::{
    HedgedReadOptions, ReadPreference, ReadPreferenceMode, TagSet,
};

/// A value an options document can give a field of this type.
pub(crate) trait OptionValue: Sized {
    /// Appended to the field's camelCase name to make the option's name
    /// (`MS` for durations: `max_time` is `maxTimeMS`).
    const NAME_SUFFIX: &'static str = "";

    /// The value of option `key`, or an error naming it and what it needs.
    fn from_option(key: &str, value: Bson) -> Result<Self>;
}

/// The official name of the option a struct field holds.
pub(crate) fn official_name(field: &str, suffix: &str) -> String {
    match field {
        "let_vars" => "let".to_string(),
        "selection_criteria" => "readPreference".to_string(),
        "expire_after" | "expire_after_seconds" => "expireAfterSeconds".to_string(),
        "version" => "v".to_string(),
        "sphere_2d_index_version" => "2dsphereIndexVersion".to_string(),
        // The text index options the server spells in snake case.
        "default_language" | "language_override" => field.to_string(),
        _ => {
            let mut name = String::with_capacity(field.len() + suffix.len());
            let mut upper = false;
            for c in field.chars() {
                if c == '_' {
                    upper = true;
                } else if upper {
                    name.push(c.to_ascii_uppercase());
                    upper = false;
                } else {
                    name.push(c);
                }
            }
            name.push_str(suffix);
            name
        }
    }
}

/// The error for an option whose value has the wrong type or range.
pub(crate) fn mistyped(key: &str, wanted: &str, value: &Bson) -> Error {
    Error::invalid_argument(format!("option \"{key}\" must be {wanted}, not {value}"))
}

/// The error for a name no field of the options struct `type_name` has:
/// `FindOneAndUpdateOptions` names the operation `find_one_and_update`.
pub(crate) fn unknown_field(type_name: &str, key: &str) -> Error {
    let stem = type_name.strip_suffix("Options").unwrap_or(type_name);
    let mut operation = String::new();
    for (i, c) in stem.char_indices() {
        if c.is_ascii_uppercase() && i > 0 {
            operation.push('_');
        }
        operation.push(c.to_ascii_lowercase());
    }
    unknown(&operation, key)
}

/// The error for a name no option of `what` has.
pub(crate) fn unknown(what: &str, key: &str) -> Error {
    Error::invalid_argument(format!("unknown {what} option \"{key}\""))
}

fn integer(key: &str, value: &Bson) -> Result<i64> {
    match value {
        Bson::Int32(n) => Ok(i64::from(*n)),
        Bson::Int64(n) => Ok(*n),
        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Ok(*f as i64),
        _ => Err(mistyped(key, "an integer", value)),
    }
}

impl OptionValue for bool {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        value
            .as_bool()
            .ok_or_else(|| mistyped(key, "a boolean", &value))
    }
}

impl OptionValue for i64 {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        integer(key, &value)
    }
}

impl OptionValue for i32 {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        i32::try_from(integer(key, &value)?).map_err(|_| mistyped(key, "a 32-bit integer", &value))
    }
}

impl OptionValue for u32 {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        u32::try_from(integer(key, &value)?)
            .map_err(|_| mistyped(key, "a non-negative 32-bit integer", &value))
    }
}

impl OptionValue for u64 {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        u64::try_from(integer(key, &value)?)
            .map_err(|_| mistyped(key, "a non-negative integer", &value))
    }
}

impl OptionValue for f64 {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        match value {
            Bson::Double(f) => Ok(f),
            Bson::Int32(n) => Ok(f64::from(n)),
            Bson::Int64(n) => Ok(n as f64),
            other => Err(mistyped(key, "a number", &other)),
        }
    }
}

impl OptionValue for Bson {
    fn from_option(_key: &str, value: Bson) -> Result<Self> {
        Ok(value)
    }
}

impl OptionValue for String {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        match value {
            Bson::String(s) => Ok(s),
            other => Err(mistyped(key, "a string", &other)),
        }
    }
}

impl OptionValue for Document {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        match value {
            Bson::Document(d) => Ok(d),
            other => Err(mistyped(key, "a document", &other)),
        }
    }
}

impl OptionValue for Vec<Document> {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        let Bson::Array(items) = value else {
            return Err(mistyped(key, "an array of documents", &value));
        };
        items
            .into_iter()
            .map(|item| Document::from_option(key, item))
            .collect()
    }
}

impl OptionValue for Duration {
    const NAME_SUFFIX: &'static str = "MS";

    /// Milliseconds, or whole seconds for an option named `...Seconds`.
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        let n = u64::from_option(key, value)?;
        Ok(if key.ends_with("Seconds") {
            Duration::from_secs(n)
        } else {
            Duration::from_millis(n)
        })
    }
}

/// Options whose value is read by their serde form (the official
/// driver's), with what they need named in the error.
macro_rules! serde_option_value {
    ($($ty:ty => $wanted:literal),* $(,)?) => {
        $(
            impl OptionValue for $ty {
                fn from_option(key: &str, value: Bson) -> Result<Self> {
                    bson::from_bson(value.clone()).map_err(|_| mistyped(key, $wanted, &value))
                }
            }
        )*
    };
}

serde_option_value! {
    IndexVersion => "an index version number",
    TextIndexVersion => "a text index version number",
    Sphere2DIndexVersion => "a 2dsphere index version number",
    CommitQuorum => "a number of members or a name (\"majority\", \"votingMembers\", a tag)",
    TimeseriesOptions => "a document with a string \"timeField\"",
    IndexOptionDefaults => "a document with a document \"storageEngine\"",
    ChangeStreamPreAndPostImages => "a document with a boolean \"enabled\"",
}

impl OptionValue for ClusteredIndex {
    /// The index, or `true` for the default one (as a listing gives it).
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        ClusteredIndex::from_listed(&value).ok_or_else(|| {
            mistyped(
                key,
                "a document with \"key\" and \"unique\", or true",
                &value,
            )
        })
    }
}

impl OptionValue for Hint {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        match value {
            Bson::String(name) => Ok(Hint::Name(name)),
            Bson::Document(keys) => Ok(Hint::Keys(keys)),
            other => Err(mistyped(key, "an index name or key pattern", &other)),
        }
    }
}

impl OptionValue for Collation {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        let document = Document::from_option(key, value)?;
        bson::from_document(document)
            .map_err(|e| Error::invalid_argument(format!("option \"{key}\": {e}")))
    }
}

impl OptionValue for ValidationLevel {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        bson::from_bson(value.clone()).map_err(|_| mistyped(key, "off, strict or moderate", &value))
    }
}

impl OptionValue for ValidationAction {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        bson::from_bson(value.clone()).map_err(|_| mistyped(key, "error or warn", &value))
    }
}

impl OptionValue for CursorType {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        match value.as_str() {
            Some("nonTailable") => Ok(CursorType::NonTailable),
            Some("tailable") => Ok(CursorType::Tailable),
            Some("tailableAwait") => Ok(CursorType::TailableAwait),
            _ => Err(mistyped(
                key,
                "nonTailable, tailable or tailableAwait",
                &value,
            )),
        }
    }
}

impl OptionValue for TimeoutMode {
    /// The CSOT spec's spelling: `cursorLifetime` or `iteration`.
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        match value.as_str() {
            Some("cursorLifetime") => Ok(TimeoutMode::CursorLifetime),
            Some("iteration") => Ok(TimeoutMode::Iteration),
            _ => Err(mistyped(key, "cursorLifetime or iteration", &value)),
        }
    }
}

/// An operation's own `timeoutMS` and `timeoutMode`, from an options
/// document. The Rust API sets them on the operation's builder
/// (`.timeout`, `.timeout_mode`), not in its options struct, so they are
/// taken out of the document before the struct reads the rest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct OperationTimeout {
    /// `timeoutMS`; zero keeps CSOT's rules without a limit.
    pub timeout: Option<Duration>,
    /// `timeoutMode`, for an operation that opens a cursor.
    pub mode: Option<TimeoutMode>,
}

impl OperationTimeout {
    /// Takes `timeoutMS` (and, when `with_mode`, `timeoutMode`) out of
    /// `pairs`, the last of each winning as in a document. Without
    /// `with_mode` a `timeoutMode` stays, for the options struct to refuse
    /// as an option the operation does not have.
    pub(crate) fn take(pairs: &mut Vec<(String, Bson)>, with_mode: bool) -> Result<Self> {
        let mut taken = OperationTimeout::default();
        let mut error = None;
        pairs.retain(|(key, value)| {
            let read = match key.as_str() {
                "timeoutMS" => Duration::from_option(key, value.clone()).map(|t| {
                    taken.timeout = Some(t);
                }),
                "timeoutMode" if with_mode => {
                    TimeoutMode::from_option(key, value.clone()).map(|m| {
                        taken.mode = Some(m);
                    })
                }
                _ => return true,
            };
            if let Err(e) = read {
                error.get_or_insert(e);
            }
            false
        });
        error.map_or(Ok(taken), Err)
    }
}

impl OptionValue for ReturnDocument {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        match value.as_str().map(str::to_ascii_lowercase).as_deref() {
            Some("before") => Ok(ReturnDocument::Before),
            Some("after") => Ok(ReturnDocument::After),
            _ => Err(mistyped(key, "before or after", &value)),
        }
    }
}

impl OptionValue for ReadConcern {
    /// `{level: "majority"}`.
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        let mut level = None;
        for (field, value) in Document::from_option(key, value)? {
            match (field.as_str(), value) {
                ("level", Bson::String(l)) => level = Some(l),
                (field, _) => return Err(unknown(key, field)),
            }
        }
        let level = level.ok_or_else(|| {
            Error::invalid_argument(format!("option \"{key}\" needs a string \"level\""))
        })?;
        Ok(ReadConcern::new(level))
    }
}

impl OptionValue for WriteConcern {
    /// `{w, j, wtimeout}` (`wtimeoutMS` too).
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        let mut concern = WriteConcern::default();
        for (field, value) in Document::from_option(key, value)? {
            match (field.as_str(), value) {
                ("w", Bson::String(w)) => concern.w = Some(Acknowledgment::from(w.as_str())),
                ("w", value) => {
                    concern.w = Some(Acknowledgment::Nodes(u32::from_option("w", value)?));
                }
                ("j" | "journal", value) => concern.journal = Some(bool::from_option("j", value)?),
                ("wtimeout" | "wtimeoutMS", value) => {
                    concern.w_timeout = Some(Duration::from_option("wtimeoutMS", value)?);
                }
                (field, _) => return Err(unknown(key, field)),
            }
        }
        Ok(concern)
    }
}

impl OptionValue for ReadPreference {
    /// `{mode, tagSets?, maxStalenessSeconds?, hedge?}`, or the mode alone.
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        let document = match value {
            Bson::String(mode) => bson::doc! { "mode": mode },
            other => Document::from_option(key, other)?,
        };
        let mut mode = ReadPreferenceMode::Primary;
        let mut tag_sets = Vec::new();
        let mut max_staleness = None;
        let mut hedge = None;
        for (field, value) in document {
            match field.as_str() {
                "mode" => mode = ReadPreferenceMode::parse(&String::from_option("mode", value)?)?,
                "tagSets" => {
                    let sets = Vec::<Document>::from_option("tagSets", value)?;
                    tag_sets = sets.into_iter().map(tag_set).collect::<Result<_>>()?;
                }
                "maxStalenessSeconds" => {
                    let seconds = i64::from_option("maxStalenessSeconds", value)?;
                    // -1 is the spec's "no maximum".
                    max_staleness = u64::try_from(seconds).ok().map(Duration::from_secs);
                }
                "hedge" => {
                    let document = Document::from_option("hedge", value)?;
                    let enabled = match document.get("enabled") {
                        Some(enabled) => bool::from_option("hedge.enabled", enabled.clone())?,
                        None => {
                            return Err(Error::invalid_argument(format!(
                                "{key}: hedge needs a boolean \"enabled\""
                            )))
                        }
                    };
                    hedge = Some(HedgedReadOptions { enabled });
                }
                other => return Err(unknown(key, other)),
            }
        }
        ReadPreference::from_parts(mode, tag_sets, max_staleness, hedge)
    }
}

fn tag_set(document: Document) -> Result<TagSet> {
    document
        .into_iter()
        .map(|(tag, value)| Ok((tag, String::from_option("tagSets", value)?)))
        .collect()
}

impl OptionValue for SelectionCriteria {
    fn from_option(key: &str, value: Bson) -> Result<Self> {
        ReadPreference::from_option(key, value).map(SelectionCriteria::ReadPreference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::coll_options::{FindOptions, IndexOptions, InsertOneOptions};

    #[test]
    fn official_names_of_fields() {
        assert_eq!(official_name("max_time", "MS"), "maxTimeMS");
        assert_eq!(official_name("let_vars", ""), "let");
        assert_eq!(official_name("array_filters", ""), "arrayFilters");
        assert_eq!(official_name("selection_criteria", ""), "readPreference");
        assert_eq!(official_name("expire_after", "MS"), "expireAfterSeconds");
    }

    #[test]
    fn a_find_options_document_sets_each_named_field() {
        let mut options = FindOptions::default();
        let document = bson::doc! {
            "sort": { "x": -1 }, "limit": 5_i64, "maxTimeMS": 250, "let": { "v": 1 },
            "hint": "x_1", "readPreference": { "mode": "secondaryPreferred" },
            "collation": { "locale": "fr" }, "cursorType": "tailable",
        };
        for (key, value) in document {
            options.set_named(&key, value).unwrap();
        }
        assert_eq!(options.limit, Some(5));
        assert_eq!(options.max_time, Some(Duration::from_millis(250)));
        assert_eq!(options.hint, Some(Hint::Name("x_1".into())));
        assert_eq!(options.cursor_type, Some(CursorType::Tailable));
        assert!(options.let_vars.is_some() && options.selection_criteria.is_some());
    }

    #[test]
    fn timeout_ms_and_timeout_mode_are_taken_out_of_an_options_document() {
        // An options list keeps every element of the document, in order.
        let mut pairs = vec![
            ("timeoutMS".to_string(), Bson::Int32(50)),
            ("limit".to_string(), Bson::Int32(1)),
            ("timeoutMode".to_string(), Bson::from("iteration")),
            ("timeoutMS".to_string(), Bson::Int64(75)),
        ];
        let taken = OperationTimeout::take(&mut pairs, true).unwrap();
        assert_eq!(taken.timeout, Some(Duration::from_millis(75)));
        assert_eq!(taken.mode, Some(TimeoutMode::Iteration));
        assert_eq!(pairs, vec![("limit".to_string(), Bson::Int32(1))]);

        let mut pairs = vec![("timeoutMode".to_string(), Bson::from("iteration"))];
        let taken = OperationTimeout::take(&mut pairs, false).unwrap();
        assert_eq!(taken, OperationTimeout::default());
        let error = InsertOneOptions::from_named(pairs).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("unknown insert_one option \"timeoutMode\""),
            "{error}"
        );

        for (key, value, wanted) in [
            ("timeoutMS", Bson::Int32(-1), "non-negative"),
            ("timeoutMS", Bson::from("5"), "integer"),
            (
                "timeoutMode",
                Bson::from("forever"),
                "cursorLifetime or iteration",
            ),
        ] {
            let mut pairs = vec![(key.to_string(), value)];
            let error = OperationTimeout::take(&mut pairs, true).unwrap_err();
            assert!(
                error.to_string().contains(key) && error.to_string().contains(wanted),
                "{error}"
            );
        }
    }

    #[test]
    fn unknown_and_mistyped_options_are_named() {
        let mut options = FindOptions::default();
        let error = options.set_named("limt", Bson::Int32(1)).unwrap_err();
        assert!(
            error.to_string().contains("unknown find option \"limt\""),
            "{error}"
        );
        let error = options
            .set_named("limit", Bson::String("5".into()))
            .unwrap_err();
        assert!(error.to_string().contains("must be an integer"), "{error}");
        let error = options.set_named("batchSize", Bson::Int32(-1)).unwrap_err();
        assert!(error.to_string().contains("batchSize"), "{error}");
        let mut index = IndexOptions::default();
        index
            .set_named("expireAfterSeconds", Bson::Int32(60))
            .unwrap();
        assert_eq!(index.expire_after, Some(Duration::from_secs(60)));
    }

    #[test]
    fn typed_index_and_collection_options_are_read_from_their_documents() {
        use crate::proto::coll_options::{
            CreateCollectionOptions, CreateIndexOptions, TimeseriesGranularity,
        };
        let options = CreateIndexOptions::from_named([("commitQuorum".into(), Bson::Int32(2))]);
        assert_eq!(options.unwrap().commit_quorum, Some(CommitQuorum::Nodes(2)));
        let error = CreateIndexOptions::from_named([("commitQuorum".into(), Bson::Boolean(true))])
            .unwrap_err();
        assert!(error.to_string().contains("commitQuorum"), "{error}");

        let mut index = IndexOptions::default();
        index.set_named("v", Bson::Int32(1)).unwrap();
        index
            .set_named("2dsphereIndexVersion", Bson::Int64(3))
            .unwrap();
        assert_eq!(index.version, Some(IndexVersion::V1));
        assert_eq!(
            index.sphere_2d_index_version,
            Some(Sphere2DIndexVersion::V3)
        );

        let created = CreateCollectionOptions::from_named([
            (
                "timeseries".into(),
                Bson::Document(bson::doc! { "timeField": "at", "granularity": "minutes" }),
            ),
            ("clusteredIndex".into(), Bson::Boolean(true)),
            ("expireAfterSeconds".into(), Bson::Int32(3600)),
            (
                "changeStreamPreAndPostImages".into(),
                Bson::Document(bson::doc! { "enabled": true }),
            ),
        ])
        .unwrap();
        let series = created.timeseries.unwrap();
        assert_eq!(series.granularity, Some(TimeseriesGranularity::Minutes));
        assert_eq!(created.clustered_index, Some(ClusteredIndex::default()));
        // Whole seconds, as the option's name says (not milliseconds).
        assert_eq!(
            created.expire_after_seconds,
            Some(Duration::from_secs(3600))
        );
        assert!(created.change_stream_pre_and_post_images.unwrap().enabled);
        let error = CreateCollectionOptions::from_named([(
            "timeseries".into(),
            Bson::Document(bson::doc! { "metaField": "m" }),
        )])
        .unwrap_err();
        assert!(error.to_string().contains("timeField"), "{error}");
    }
}
