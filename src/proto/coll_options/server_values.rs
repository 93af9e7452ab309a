//! The typed values of index and collection options that the server reads
//! as numbers, strings or small documents: index versions, `commitQuorum`,
//! and the time-series, clustered-index, index-defaults and pre/post-image
//! settings of `create`. Each has the official driver's shape and serde
//! form (what `createIndexes`/`create` send and `listIndexes`/
//! `listCollections` report); `to_bson` is the same value for the driver's
//! own command encoder.

use std::time::Duration;

use bson::{doc, Bson, Document};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A `u32` as the server's 32-bit `int`, as the official driver writes it
/// (an error beyond `i32::MAX`, which no version or count can be).
fn serialize_u32_as_i32<S: Serializer>(n: u32, serializer: S) -> Result<S::Ok, S::Error> {
    match i32::try_from(n) {
        Ok(n) => serializer.serialize_i32(n),
        Err(_) => Err(serde::ser::Error::custom(format!(
            "cannot serialize u32 {n} as i32"
        ))),
    }
}

/// A `u32` as BSON for a command: an `int`, or a `long` beyond `i32::MAX`
/// (which the server then refuses, naming the option).
pub(crate) fn u32_bson(n: u32) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(i64::from(n)), Bson::Int32)
}

/// Whole seconds as the official driver sends them: an `int`, or a `long`
/// when they do not fit one.
pub(crate) fn seconds_bson(duration: Duration) -> Bson {
    let seconds = duration.as_secs();
    match i32::try_from(seconds) {
        Ok(n) => Bson::Int32(n),
        Err(_) => Bson::Int64(i64::try_from(seconds).unwrap_or(i64::MAX)),
    }
}

/// Serde for `Option<Duration>` as whole seconds (`...Seconds` options).
pub(crate) mod duration_option_as_int_seconds {
    use super::*;

    /// Whole seconds, an `int` when they fit one, else a `long`.
    pub(crate) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value.map(|d| d.as_secs()) {
            Some(seconds) => match i32::try_from(seconds) {
                Ok(n) => serializer.serialize_i32(n),
                Err(_) => serializer
                    .serialize_i64(i64::try_from(seconds).map_err(serde::ser::Error::custom)?),
            },
            None => serializer.serialize_none(),
        }
    }

    /// A non-negative whole number of seconds.
    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(deserializer)?.map(Duration::from_secs))
    }
}

/// Declares a version enum: named versions, `Custom(u32)` for the others,
/// serialized as the server's `int`.
macro_rules! version_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $number:literal, )*
        }
    ) => {
        $(#[$meta])*
        pub enum $name {
            $( $(#[$variant_meta])* $variant, )*
            /// A version this driver does not name (a newer server's), sent
            /// as given.
            Custom(u32),
        }

        #[allow(deprecated)]
        impl $name {
            /// The version the server reports as `number`.
            pub(crate) fn from_number(number: i64) -> Option<Self> {
                match number {
                    $( $number => Some($name::$variant), )*
                    other => u32::try_from(other).ok().map($name::Custom),
                }
            }

            /// The version's number.
            fn number(&self) -> u32 {
                match self {
                    $( $name::$variant => $number, )*
                    $name::Custom(number) => *number,
                }
            }
        }

        impl From<$name> for Bson {
            fn from(version: $name) -> Bson {
                u32_bson(version.number())
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serialize_u32_as_i32(self.number(), serializer)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let number = i32::deserialize(deserializer)?;
                $name::from_number(i64::from(number)).ok_or_else(|| {
                    serde::de::Error::custom(format!("{number} is not a version"))
                })
            }
        }
    };
}

version_enum! {
    /// The index format version (`v`); MongoDB 3.2 and later refuse
    /// version 0 indexes.
    #[derive(Clone, Debug, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum IndexVersion {
        /// Version 0.
        #[deprecated]
        V0 = 0,
        /// Version 1.
        V1 = 1,
        /// Version 2 (the server's default).
        V2 = 2,
    }
}

version_enum! {
    /// The version of a `text` index (`textIndexVersion`).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum TextIndexVersion {
        /// Version 1.
        V1 = 1,
        /// Version 2.
        V2 = 2,
        /// Version 3 (the default since MongoDB 3.2).
        V3 = 3,
    }
}

version_enum! {
    /// The version of a `2dsphere` index (`2dsphereIndexVersion`).
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub enum Sphere2DIndexVersion {
        /// Version 2.
        V2 = 2,
        /// Version 3 (the default since MongoDB 3.2).
        V3 = 3,
    }
}

/// How many data-bearing voting members, the primary included, must finish
/// building an index before the primary marks it ready (`commitQuorum`,
/// MongoDB 4.4+).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum CommitQuorum {
    /// This many voting members; 0 turns quorum voting off.
    Nodes(u32),
    /// Every data-bearing voting member (the server's default).
    VotingMembers,
    /// A majority of the voting members.
    Majority,
    /// A replica set tag name.
    Custom(String),
}

impl CommitQuorum {
    /// The server's spelling: a number or a string.
    fn from_value(value: IntOrString) -> Self {
        match value {
            IntOrString::Int(n) => CommitQuorum::Nodes(n),
            IntOrString::String(s) => match s.as_str() {
                "votingMembers" => CommitQuorum::VotingMembers,
                "majority" => CommitQuorum::Majority,
                _ => CommitQuorum::Custom(s),
            },
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum IntOrString {
    Int(u32),
    String(String),
}

impl From<CommitQuorum> for Bson {
    fn from(quorum: CommitQuorum) -> Bson {
        match quorum {
            CommitQuorum::Nodes(n) => u32_bson(n),
            CommitQuorum::VotingMembers => Bson::from("votingMembers"),
            CommitQuorum::Majority => Bson::from("majority"),
            CommitQuorum::Custom(tag) => Bson::String(tag),
        }
    }
}

impl Serialize for CommitQuorum {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            CommitQuorum::Nodes(n) => serialize_u32_as_i32(*n, serializer),
            CommitQuorum::VotingMembers => serializer.serialize_str("votingMembers"),
            CommitQuorum::Majority => serializer.serialize_str("majority"),
            CommitQuorum::Custom(tag) => serializer.serialize_str(tag),
        }
    }
}

impl<'de> Deserialize<'de> for CommitQuorum {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IntOrString::deserialize(deserializer).map(CommitQuorum::from_value)
    }
}

/// The options of a time-series collection (`create`'s `timeseries`,
/// MongoDB 5.0+).
///
/// ```
/// use mongo_inline::options::{TimeseriesGranularity, TimeseriesOptions};
///
/// let readings = TimeseriesOptions::builder()
///     .time_field("at")
///     .meta_field(Some("sensor".to_string()))
///     .granularity(TimeseriesGranularity::Minutes)
///     .build();
/// assert_eq!(readings.time_field, "at");
/// ```
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, typed_builder::TypedBuilder)]
#[serde(rename_all = "camelCase")]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct TimeseriesOptions {
    /// The top-level field holding each measurement's time (a BSON date,
    /// required in every document).
    pub time_field: String,
    /// The top-level field naming the series (any type but an array).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub meta_field: Option<String>,
    /// The expected interval between measurements (`seconds` when unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub granularity: Option<TimeseriesGranularity>,
    /// The longest span of one bucket (`bucketMaxSpanSeconds`, 1 to
    /// 31,536,000 seconds, MongoDB 6.3+); set with `bucket_rounding`, not
    /// with `granularity`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "duration_option_as_int_seconds",
        rename = "bucketMaxSpanSeconds"
    )]
    pub bucket_max_span: Option<Duration>,
    /// The interval a new bucket's first timestamp is rounded down to
    /// (`bucketRoundingSeconds`, MongoDB 6.3+).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "duration_option_as_int_seconds",
        rename = "bucketRoundingSeconds"
    )]
    pub bucket_rounding: Option<Duration>,
}

impl From<TimeseriesOptions> for Bson {
    fn from(options: TimeseriesOptions) -> Bson {
        let mut fields = doc! { "timeField": options.time_field };
        if let Some(meta) = options.meta_field {
            fields.insert("metaField", meta);
        }
        if let Some(granularity) = options.granularity {
            fields.insert("granularity", granularity.as_str());
        }
        if let Some(span) = options.bucket_max_span {
            fields.insert("bucketMaxSpanSeconds", seconds_bson(span));
        }
        if let Some(rounding) = options.bucket_rounding {
            fields.insert("bucketRoundingSeconds", seconds_bson(rounding));
        }
        Bson::Document(fields)
    }
}

/// The expected interval between a time series' measurements.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub enum TimeseriesGranularity {
    /// Seconds apart.
    Seconds,
    /// Minutes apart.
    Minutes,
    /// Hours apart.
    Hours,
}

impl TimeseriesGranularity {
    /// The server's name for it.
    fn as_str(&self) -> &'static str {
        match self {
            TimeseriesGranularity::Seconds => "seconds",
            TimeseriesGranularity::Minutes => "minutes",
            TimeseriesGranularity::Hours => "hours",
        }
    }
}

/// The clustered index of a clustered collection (`create`'s
/// `clusteredIndex`, MongoDB 5.3+). The server requires `key` `{_id: 1}`
/// and `unique` `true`, which [`Default`] gives.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ClusteredIndex {
    /// The key pattern; `{_id: 1}`.
    pub key: Document,
    /// `true`.
    pub unique: bool,
    /// The index's name; the server generates one when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The index version; `2` when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub v: Option<i32>,
}

impl Default for ClusteredIndex {
    fn default() -> Self {
        ClusteredIndex {
            key: doc! { "_id": 1 },
            unique: true,
            name: None,
            v: None,
        }
    }
}

impl ClusteredIndex {
    /// `clusteredIndex` as `listCollections` reports it: the index, or
    /// `true` (Atlas' time-series collections) for the default one.
    pub(crate) fn from_listed(value: &Bson) -> Option<Self> {
        match value {
            Bson::Boolean(true) => Some(ClusteredIndex::default()),
            Bson::Document(_) => bson::from_bson(value.clone()).ok(),
            _ => None,
        }
    }
}

impl ClusteredIndex {
    /// A `clusteredIndex` field read through serde: the index document, or
    /// `true` for the default index (the shorthand Atlas lists for
    /// time-series collections); `false` is an error, as it says nothing.
    pub(crate) fn deserialize_self_or_true<'de, D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<ClusteredIndex>, D::Error> {
        use serde::de::Error as _;
        match Option::<Bson>::deserialize(deserializer)? {
            None => Ok(None),
            Some(Bson::Boolean(true)) => Ok(Some(ClusteredIndex::default())),
            Some(Bson::Document(index)) => bson::from_document(index)
                .map(Some)
                .map_err(|e| D::Error::custom(format!("clusteredIndex: {e}"))),
            Some(other) => Err(D::Error::custom(format!(
                "clusteredIndex must be an index document or true, not {other}"
            ))),
        }
    }
}

impl From<ClusteredIndex> for Bson {
    fn from(index: ClusteredIndex) -> Bson {
        let mut fields = doc! { "key": index.key, "unique": index.unique };
        if let Some(name) = index.name {
            fields.insert("name", name);
        }
        if let Some(v) = index.v {
            fields.insert("v", v);
        }
        Bson::Document(fields)
    }
}

/// The defaults of the indexes created on a collection, its `_id` index
/// included (`create`'s `indexOptionDefaults`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, typed_builder::TypedBuilder)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct IndexOptionDefaults {
    /// `{ <storage-engine-name>: <options> }`.
    pub storage_engine: Document,
}

impl From<IndexOptionDefaults> for Bson {
    fn from(defaults: IndexOptionDefaults) -> Bson {
        Bson::Document(doc! { "storageEngine": defaults.storage_engine })
    }
}

/// Whether change streams on a collection can return documents as they
/// were before and after each change (`create`'s
/// `changeStreamPreAndPostImages`, MongoDB 6.0+).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, typed_builder::TypedBuilder)]
#[serde(rename_all = "camelCase")]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct ChangeStreamPreAndPostImages {
    /// `true` to keep pre- and post-images.
    pub enabled: bool,
}

impl From<ChangeStreamPreAndPostImages> for Bson {
    fn from(images: ChangeStreamPreAndPostImages) -> Bson {
        Bson::Document(doc! { "enabled": images.enabled })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(deprecated)]
    fn versions_are_the_servers_numbers() {
        assert_eq!(Bson::from(IndexVersion::V2), Bson::Int32(2));
        assert_eq!(Bson::from(IndexVersion::V0), Bson::Int32(0));
        assert_eq!(IndexVersion::from_number(7), Some(IndexVersion::Custom(7)));
        assert_eq!(IndexVersion::from_number(-1), None);
        assert_eq!(Bson::from(TextIndexVersion::V3), Bson::Int32(3));
        assert_eq!(
            bson::from_bson::<Sphere2DIndexVersion>(Bson::Int32(3)).unwrap(),
            Sphere2DIndexVersion::V3
        );
        assert_eq!(
            bson::to_bson(&TextIndexVersion::Custom(4)).unwrap(),
            Bson::Int32(4)
        );
        // As the official driver: a version beyond an `int` cannot be written.
        assert!(bson::to_bson(&IndexVersion::Custom(u32::MAX)).is_err());
    }

    #[test]
    fn commit_quorum_is_a_number_or_a_name() {
        for (quorum, sent) in [
            (CommitQuorum::Nodes(2), Bson::Int32(2)),
            (CommitQuorum::VotingMembers, Bson::from("votingMembers")),
            (CommitQuorum::Majority, Bson::from("majority")),
            (CommitQuorum::Custom("dc".into()), Bson::from("dc")),
        ] {
            assert_eq!(bson::to_bson(&quorum).unwrap(), sent);
            assert_eq!(Bson::from(quorum.clone()), sent);
            assert_eq!(bson::from_bson::<CommitQuorum>(sent).unwrap(), quorum);
        }
    }

    #[test]
    fn collection_options_have_the_official_serde_form() {
        let series = TimeseriesOptions::builder()
            .time_field("at")
            .granularity(TimeseriesGranularity::Hours)
            .bucket_max_span(Duration::from_secs(7200))
            .build();
        let sent = doc! { "timeField": "at", "granularity": "hours", "bucketMaxSpanSeconds": 7200 };
        assert_eq!(
            bson::to_bson(&series).unwrap(),
            Bson::Document(sent.clone())
        );
        assert_eq!(Bson::from(series.clone()), Bson::Document(sent.clone()));
        assert_eq!(
            bson::from_document::<TimeseriesOptions>(sent).unwrap(),
            series
        );

        let clustered = ClusteredIndex::default();
        let sent = doc! { "key": { "_id": 1 }, "unique": true };
        assert_eq!(
            bson::to_bson(&clustered).unwrap(),
            Bson::Document(sent.clone())
        );
        assert_eq!(Bson::from(clustered.clone()), Bson::Document(sent));
        assert_eq!(
            ClusteredIndex::from_listed(&Bson::Boolean(true)),
            Some(clustered)
        );
        assert_eq!(ClusteredIndex::from_listed(&Bson::Boolean(false)), None);

        let defaults = IndexOptionDefaults::builder()
            .storage_engine(doc! { "wiredTiger": {} })
            .build();
        let sent = doc! { "storageEngine": { "wiredTiger": {} } };
        assert_eq!(
            bson::to_bson(&defaults).unwrap(),
            Bson::Document(sent.clone())
        );
        assert_eq!(Bson::from(defaults), Bson::Document(sent));
        let images = ChangeStreamPreAndPostImages::builder()
            .enabled(true)
            .build();
        assert_eq!(
            bson::to_bson(&images).unwrap(),
            Bson::Document(doc! { "enabled": true })
        );
    }
}
