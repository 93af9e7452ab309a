//! Read preferences and selection criteria, in the official driver's shapes
//! (`mongodb::options::{ReadPreference, ReadPreferenceOptions,
//! SelectionCriteria}`).
//!
//! [`ReadPreference`] is an enum of the five modes, each but `Primary`
//! carrying optional [`ReadPreferenceOptions`] (tag sets, max staleness,
//! hedge), so that "primary with tags" cannot be written. The selection
//! rules (`proto::select`) read it through the crate-internal accessors
//! below; what they add for writes and `$out` aggregates is their own
//! criteria type, never the public one.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::proto::sdam::ServerInfo;

/// A read preference tag set: a member matches when it has every tag of the
/// set with the same value.
pub type TagSet = HashMap<String, String>;

/// Which servers are suitable for an operation: a read preference, or a
/// predicate over the servers the topology offers.
#[derive(Clone)]
#[non_exhaustive]
pub enum SelectionCriteria {
    /// Servers by type, tags and staleness.
    ReadPreference(ReadPreference),
    /// A server is suitable when `predicate(server)` returns true. It
    /// filters the servers an operation could use in this topology (the
    /// single server, the load balancer, the mongoses, or a replica set's
    /// primary and secondaries) before the latency window; on the wire the
    /// operation says `primaryPreferred`, since any member may answer.
    Predicate(Predicate),
}

/// A predicate used to filter the servers considered suitable.
pub type Predicate = Arc<dyn Send + Sync + Fn(&ServerInfo) -> bool>;

/// Read preferences compare by value; predicates never compare equal (a
/// closure cannot be compared), as in the official driver.
impl PartialEq for SelectionCriteria {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::ReadPreference(a), Self::ReadPreference(b)) => a == b,
            _ => false,
        }
    }
}

impl From<ReadPreference> for SelectionCriteria {
    fn from(read_preference: ReadPreference) -> Self {
        SelectionCriteria::ReadPreference(read_preference)
    }
}

impl fmt::Debug for SelectionCriteria {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ReadPreference(rp) => f.debug_tuple("ReadPreference").field(rp).finish(),
            Self::Predicate(_) => f.write_str("Predicate"),
        }
    }
}

impl fmt::Display for SelectionCriteria {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ReadPreference(rp) => write!(f, "ReadPreference {rp}"),
            Self::Predicate(_) => f.write_str("Custom predicate"),
        }
    }
}

impl SelectionCriteria {
    /// The read preference, when these criteria are one.
    pub(crate) fn as_read_pref(&self) -> Option<&ReadPreference> {
        match self {
            Self::ReadPreference(rp) => Some(rp),
            Self::Predicate(_) => None,
        }
    }
}

/// How a read is routed among a replica set's members (ignored by a
/// standalone; passed on by a mongos).
#[allow(missing_docs)]
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ReadPreference {
    /// Only the primary.
    Primary,
    /// Only secondaries.
    Secondary {
        options: Option<ReadPreferenceOptions>,
    },
    /// The primary if there is one, else a secondary.
    PrimaryPreferred {
        options: Option<ReadPreferenceOptions>,
    },
    /// Secondaries if there are any, else the primary.
    SecondaryPreferred {
        options: Option<ReadPreferenceOptions>,
    },
    /// Any data-bearing member inside the latency window.
    Nearest {
        options: Option<ReadPreferenceOptions>,
    },
}

/// The options of a non-primary read preference.
#[allow(deprecated)]
#[derive(Clone, Debug, Default, PartialEq, typed_builder::TypedBuilder, Serialize, Deserialize)]
#[builder(field_defaults(default, setter(into)))]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ReadPreferenceOptions {
    /// Tag sets, tried in order until one matches some member; an empty
    /// set matches every member.
    #[serde(alias = "tag_sets", skip_serializing_if = "Option::is_none")]
    pub tag_sets: Option<Vec<TagSet>>,
    /// How far a secondary may lag behind the primary
    /// (`maxStalenessSeconds`, whole seconds on the wire); at least 90
    /// seconds, and at least `heartbeatFrequencyMS` + 10 s.
    #[serde(
        rename = "maxStalenessSeconds",
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::proto::serde_util::seconds"
    )]
    pub max_staleness: Option<Duration>,
    /// Hedged reads, for a sharded cluster (sent to mongos as given).
    #[deprecated(
        note = "hedged reads are deprecated as of MongoDB 8.0 and will be removed in a future \
                server version"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hedge: Option<HedgedReadOptions>,
}

/// Hedged reads: whether a mongos may send a read to two members of each
/// shard and take the first answer.
#[derive(Clone, Debug, PartialEq, typed_builder::TypedBuilder, Serialize, Deserialize)]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct HedgedReadOptions {
    /// Whether hedged reads are enabled.
    pub enabled: bool,
}

/// The read preference modes, as the selection rules and the wire name them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub(crate) enum ReadPreferenceMode {
    #[default]
    Primary,
    PrimaryPreferred,
    Secondary,
    SecondaryPreferred,
    Nearest,
}

impl ReadPreferenceMode {
    /// The spec's camel-case name (`primaryPreferred`, ...).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ReadPreferenceMode::Primary => "primary",
            ReadPreferenceMode::PrimaryPreferred => "primaryPreferred",
            ReadPreferenceMode::Secondary => "secondary",
            ReadPreferenceMode::SecondaryPreferred => "secondaryPreferred",
            ReadPreferenceMode::Nearest => "nearest",
        }
    }

    /// Parses a mode name, ignoring ASCII case as the URI spec asks.
    pub(crate) fn parse(name: &str) -> Result<Self> {
        let mode = match name.to_ascii_lowercase().as_str() {
            "primary" => ReadPreferenceMode::Primary,
            "primarypreferred" => ReadPreferenceMode::PrimaryPreferred,
            "secondary" => ReadPreferenceMode::Secondary,
            "secondarypreferred" => ReadPreferenceMode::SecondaryPreferred,
            "nearest" => ReadPreferenceMode::Nearest,
            _ => {
                return Err(Error::invalid_argument(format!(
                    "unknown read preference mode {name:?}"
                )))
            }
        };
        Ok(mode)
    }
}

impl fmt::Display for ReadPreference {
    /// `{ Mode: Secondary, Tag Sets: [..], Max Staleness: 90s }`, as the
    /// official driver writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut mode = self.mode().as_str().to_string();
        mode[0..1].make_ascii_uppercase();
        write!(f, "{{ Mode: {mode}")?;
        if let Some(options) = self.options() {
            if let Some(tag_sets) = &options.tag_sets {
                write!(f, ", Tag Sets: {tag_sets:?}")?;
            }
            if let Some(max_staleness) = &options.max_staleness {
                write!(f, ", Max Staleness: {max_staleness:?}")?;
            }
            #[allow(deprecated)]
            if let Some(hedge) = &options.hedge {
                write!(f, ", Hedge: {}", hedge.enabled)?;
            }
        }
        write!(f, " }}")
    }
}

impl ReadPreference {
    /// `Primary`: reads go only to the primary.
    pub fn primary() -> Self {
        Self::Primary
    }

    /// `Secondary` with these options.
    pub fn secondary(options: impl Into<Option<ReadPreferenceOptions>>) -> Self {
        Self::Secondary {
            options: options.into(),
        }
    }

    /// `PrimaryPreferred` with these options.
    pub fn primary_preferred(options: impl Into<Option<ReadPreferenceOptions>>) -> Self {
        Self::PrimaryPreferred {
            options: options.into(),
        }
    }

    /// `SecondaryPreferred` with these options.
    pub fn secondary_preferred(options: impl Into<Option<ReadPreferenceOptions>>) -> Self {
        Self::SecondaryPreferred {
            options: options.into(),
        }
    }

    /// `Nearest` with these options.
    pub fn nearest(options: impl Into<Option<ReadPreferenceOptions>>) -> Self {
        Self::Nearest {
            options: options.into(),
        }
    }

    /// A read preference of `mode` with these parts; an error for mode
    /// primary with non-empty tag sets, a max staleness or a hedge (the
    /// URI and read-preference specs).
    pub(crate) fn from_parts(
        mode: ReadPreferenceMode,
        tag_sets: Vec<TagSet>,
        max_staleness: Option<Duration>,
        hedge: Option<HedgedReadOptions>,
    ) -> Result<Self> {
        if mode == ReadPreferenceMode::Primary {
            let refused = if tag_sets.iter().any(|t| !t.is_empty()) {
                Some("tag sets")
            } else if max_staleness.is_some() {
                Some("maxStalenessSeconds")
            } else if hedge.is_some() {
                Some("hedge")
            } else {
                None
            };
            if let Some(what) = refused {
                return Err(Error::invalid_argument(format!(
                    "read preference mode primary cannot be combined with {what}"
                )));
            }
            return Ok(Self::Primary);
        }
        #[allow(deprecated)]
        let options =
            (!tag_sets.is_empty() || max_staleness.is_some() || hedge.is_some()).then(|| {
                ReadPreferenceOptions {
                    tag_sets: (!tag_sets.is_empty()).then_some(tag_sets),
                    max_staleness,
                    hedge,
                }
            });
        Ok(match mode {
            ReadPreferenceMode::Primary => unreachable!("returned above"),
            ReadPreferenceMode::Secondary => Self::Secondary { options },
            ReadPreferenceMode::PrimaryPreferred => Self::PrimaryPreferred { options },
            ReadPreferenceMode::SecondaryPreferred => Self::SecondaryPreferred { options },
            ReadPreferenceMode::Nearest => Self::Nearest { options },
        })
    }

    /// A read preference of `mode` alone (for the rules' tests).
    #[cfg(test)]
    pub(crate) fn with_mode(mode: ReadPreferenceMode) -> Self {
        Self::from_parts(mode, Vec::new(), None, None).expect("a mode alone is valid")
    }

    /// This read preference with tag sets (for the rules' tests).
    #[cfg(test)]
    pub(crate) fn with_tag_sets(self, tag_sets: Vec<TagSet>) -> Self {
        let max_staleness = self.max_staleness();
        Self::from_parts(self.mode(), tag_sets, max_staleness, None).expect("not primary")
    }

    /// This read preference with a max staleness (for the rules' tests).
    #[cfg(test)]
    pub(crate) fn with_max_staleness(self, max_staleness: Duration) -> Self {
        let tag_sets = self.tag_sets().to_vec();
        Self::from_parts(self.mode(), tag_sets, Some(max_staleness), None).expect("not primary")
    }

    /// The mode.
    pub(crate) fn mode(&self) -> ReadPreferenceMode {
        match self {
            Self::Primary => ReadPreferenceMode::Primary,
            Self::Secondary { .. } => ReadPreferenceMode::Secondary,
            Self::PrimaryPreferred { .. } => ReadPreferenceMode::PrimaryPreferred,
            Self::SecondaryPreferred { .. } => ReadPreferenceMode::SecondaryPreferred,
            Self::Nearest { .. } => ReadPreferenceMode::Nearest,
        }
    }

    /// The options, for a non-primary mode that has them.
    pub(crate) fn options(&self) -> Option<&ReadPreferenceOptions> {
        match self {
            Self::Primary => None,
            Self::Secondary { options }
            | Self::PrimaryPreferred { options }
            | Self::SecondaryPreferred { options }
            | Self::Nearest { options } => options.as_ref(),
        }
    }

    /// The tag sets; none means "any member".
    pub(crate) fn tag_sets(&self) -> &[TagSet] {
        self.options()
            .and_then(|o| o.tag_sets.as_deref())
            .unwrap_or_default()
    }

    /// The max staleness, when limited.
    pub(crate) fn max_staleness(&self) -> Option<Duration> {
        self.options().and_then(|o| o.max_staleness)
    }

    /// The `$readPreference` document as the spec writes it (tags in key
    /// order, so the same preference always gives the same bytes).
    pub(crate) fn to_document(&self) -> Document {
        let mut d = doc! { "mode": self.mode().as_str() };
        let tag_sets = self.tag_sets();
        if !tag_sets.is_empty() {
            let sets: Vec<Document> = tag_sets
                .iter()
                .map(|t| {
                    let sorted: BTreeMap<&String, &String> = t.iter().collect();
                    sorted
                        .into_iter()
                        .map(|(k, v)| (k.clone(), v.clone().into()))
                        .collect()
                })
                .collect();
            d.insert("tags", sets);
        }
        if let Some(s) = self.max_staleness() {
            d.insert("maxStalenessSeconds", s.as_secs() as i64);
        }
        #[allow(deprecated)]
        if let Some(h) = self.options().and_then(|o| o.hedge.as_ref()) {
            d.insert("hedge", doc! { "enabled": h.enabled });
        }
        d
    }
}

/// As the official driver writes it: `{ mode, tagSets, maxStalenessSeconds,
/// hedge }`, the options flattened beside the mode.
impl Serialize for ReadPreference {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Written<'a> {
            mode: &'static str,
            #[serde(flatten, skip_serializing_if = "Option::is_none")]
            options: Option<&'a ReadPreferenceOptions>,
        }
        Written {
            mode: self.mode().as_str(),
            options: self.options(),
        }
        .serialize(serializer)
    }
}

/// Reads `{ mode, ..options }` (the mode's case ignored); options on
/// `primary` are an error, as they are in a connection string.
impl<'de> Deserialize<'de> for ReadPreference {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Read {
            mode: String,
            #[serde(flatten)]
            options: ReadPreferenceOptions,
        }
        let read = Read::deserialize(deserializer)?;
        let mode = ReadPreferenceMode::parse(&read.mode).map_err(D::Error::custom)?;
        let options = Some(read.options);
        Ok(match mode {
            ReadPreferenceMode::Primary if !is_default(options.as_ref()) => {
                return Err(D::Error::custom(format!(
                    "cannot specify options for primary read preference, got {options:?}"
                )))
            }
            ReadPreferenceMode::Primary => ReadPreference::Primary,
            ReadPreferenceMode::Secondary => ReadPreference::Secondary { options },
            ReadPreferenceMode::PrimaryPreferred => ReadPreference::PrimaryPreferred { options },
            ReadPreferenceMode::SecondaryPreferred => {
                ReadPreference::SecondaryPreferred { options }
            }
            ReadPreferenceMode::Nearest => ReadPreference::Nearest { options },
        })
    }
}

/// Options that select nothing: no hedge, no staleness, no tags (or only
/// the empty tag set).
#[allow(deprecated)]
fn is_default(options: Option<&ReadPreferenceOptions>) -> bool {
    options.is_none_or(|o| {
        o.hedge.is_none()
            && o.max_staleness.is_none()
            && o.tag_sets
                .as_ref()
                .is_none_or(|sets| sets.iter().all(HashMap::is_empty))
    })
}

/// Read as a read preference (a predicate cannot be written down).
impl<'de> Deserialize<'de> for SelectionCriteria {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        ReadPreference::deserialize(deserializer).map(SelectionCriteria::ReadPreference)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primary_rejects_tags_and_staleness() {
        let tags: TagSet = [("dc".to_string(), "ny".to_string())].into();
        let primary = ReadPreferenceMode::Primary;
        assert!(ReadPreference::from_parts(primary, vec![tags.clone()], None, None).is_err());
        let ninety = Some(Duration::from_secs(90));
        assert!(ReadPreference::from_parts(primary, vec![], ninety, None).is_err());
        // An empty tag set matches everything: allowed with primary.
        assert_eq!(
            ReadPreference::from_parts(primary, vec![TagSet::new()], None, None).unwrap(),
            ReadPreference::Primary
        );
        let secondary = ReadPreference::from_parts(
            ReadPreferenceMode::Secondary,
            vec![tags.clone()],
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            secondary,
            ReadPreference::secondary(
                ReadPreferenceOptions::builder()
                    .tag_sets(vec![tags])
                    .build()
            )
        );
    }

    #[test]
    fn document_shape() {
        let rp = ReadPreference::secondary_preferred(
            ReadPreferenceOptions::builder()
                .max_staleness(Duration::from_secs(120))
                .tag_sets(vec![[("z", "1"), ("a", "2")]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect()])
                .build(),
        );
        assert_eq!(
            rp.to_document(),
            doc! {
                "mode": "secondaryPreferred",
                "tags": [{ "a": "2", "z": "1" }],
                "maxStalenessSeconds": 120_i64,
            }
        );
        assert_eq!(
            ReadPreferenceMode::parse("PRIMARYpreferred").unwrap(),
            ReadPreferenceMode::PrimaryPreferred
        );
        assert_eq!(ReadPreference::primary().to_string(), "{ Mode: Primary }");
    }
}
