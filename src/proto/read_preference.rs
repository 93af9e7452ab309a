//! Read preferences: which members a read may go to.
//!
//! This is the value type shared by the URI parser, server selection and the
//! command builder. The rules that apply it live in [`crate::select`].

use std::collections::BTreeMap;
use std::time::Duration;

use bson::{doc, Document};

use crate::error::{Error, Result};

/// A tag set: every tag must match a member's tag for the member to match.
pub type TagSet = BTreeMap<String, String>;

/// The read preference modes of the server-selection spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReadPreferenceMode {
    /// Only the primary.
    #[default]
    Primary,
    /// The primary if there is one, else a secondary.
    PrimaryPreferred,
    /// Only secondaries.
    Secondary,
    /// Secondaries if there are any, else the primary.
    SecondaryPreferred,
    /// Any data-bearing member inside the latency window.
    Nearest,
}

impl ReadPreferenceMode {
    /// The spec's camel-case name (`primaryPreferred`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ReadPreferenceMode::Primary => "primary",
            ReadPreferenceMode::PrimaryPreferred => "primaryPreferred",
            ReadPreferenceMode::Secondary => "secondary",
            ReadPreferenceMode::SecondaryPreferred => "secondaryPreferred",
            ReadPreferenceMode::Nearest => "nearest",
        }
    }

    /// Parses a mode name, ignoring ASCII case as the URI spec asks.
    pub fn parse(name: &str) -> Result<Self> {
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

/// A read preference: a mode, optional tag sets, optional max staleness and
/// an optional hedge document (passed through to mongos).
#[derive(Clone, Debug, PartialEq, Default)]
#[non_exhaustive]
pub struct ReadPreference {
    /// Which kinds of member may serve the read.
    pub mode: ReadPreferenceMode,
    /// Tag sets, tried in order; empty means "any member".
    pub tag_sets: Vec<TagSet>,
    /// How far behind the primary a secondary may be; `None` means no limit.
    pub max_staleness: Option<Duration>,
    /// The `hedge` document for mongos, when set.
    pub hedge: Option<Document>,
}

impl ReadPreference {
    /// A read preference with this mode and nothing else.
    pub fn new(mode: ReadPreferenceMode) -> Self {
        ReadPreference {
            mode,
            ..Default::default()
        }
    }

    /// `primary`.
    pub fn primary() -> Self {
        Self::new(ReadPreferenceMode::Primary)
    }

    /// This read preference with tag sets.
    pub fn with_tag_sets(mut self, tag_sets: Vec<TagSet>) -> Self {
        self.tag_sets = tag_sets;
        self
    }

    /// This read preference with a max staleness.
    pub fn with_max_staleness(mut self, max_staleness: Duration) -> Self {
        self.max_staleness = Some(max_staleness);
        self
    }

    /// Checks what the spec forbids regardless of the topology: tag sets or
    /// max staleness with mode `primary`.
    pub fn validate(&self) -> Result<()> {
        if self.mode == ReadPreferenceMode::Primary {
            if self.tag_sets.iter().any(|t| !t.is_empty()) {
                return Err(Error::invalid_argument(
                    "read preference mode primary cannot be combined with tag sets",
                ));
            }
            if self.max_staleness.is_some() {
                return Err(Error::invalid_argument(
                    "read preference mode primary cannot be combined with maxStalenessSeconds",
                ));
            }
            if self.hedge.is_some() {
                return Err(Error::invalid_argument(
                    "read preference mode primary cannot be combined with hedge",
                ));
            }
        }
        Ok(())
    }

    /// The `$readPreference` document as the spec writes it.
    pub fn to_document(&self) -> Document {
        let mut d = doc! { "mode": self.mode.as_str() };
        if !self.tag_sets.is_empty() {
            let sets: Vec<Document> = self
                .tag_sets
                .iter()
                .map(|t| {
                    t.iter()
                        .map(|(k, v)| (k.clone(), v.clone().into()))
                        .collect()
                })
                .collect();
            d.insert("tags", sets);
        }
        if let Some(s) = self.max_staleness {
            d.insert("maxStalenessSeconds", s.as_secs() as i64);
        }
        if let Some(h) = &self.hedge {
            d.insert("hedge", h.clone());
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primary_rejects_tags_and_staleness() {
        let mut tags = TagSet::new();
        tags.insert("dc".into(), "ny".into());
        assert!(ReadPreference::primary()
            .with_tag_sets(vec![tags.clone()])
            .validate()
            .is_err());
        assert!(ReadPreference::primary()
            .with_max_staleness(Duration::from_secs(90))
            .validate()
            .is_err());
        assert!(ReadPreference::new(ReadPreferenceMode::Secondary)
            .with_tag_sets(vec![tags])
            .validate()
            .is_ok());
    }

    #[test]
    fn document_shape() {
        let rp = ReadPreference::new(ReadPreferenceMode::SecondaryPreferred)
            .with_max_staleness(Duration::from_secs(120));
        assert_eq!(
            rp.to_document(),
            doc! { "mode": "secondaryPreferred", "maxStalenessSeconds": 120_i64 }
        );
        assert_eq!(
            ReadPreferenceMode::parse("PRIMARYpreferred").unwrap(),
            ReadPreferenceMode::PrimaryPreferred
        );
    }
}
