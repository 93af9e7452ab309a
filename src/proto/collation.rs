//! Collations (`collation`): language rules for string comparison, in the
//! official driver's shape (`Collation::builder().locale("en")...build()`).

use bson::{Bson, Document};
use serde::{Deserialize, Serialize};
use typed_builder::TypedBuilder;

/// The language rules an operation compares strings by.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, TypedBuilder)]
#[serde(rename_all = "camelCase")]
#[builder(field_defaults(default, setter(into)))]
#[non_exhaustive]
pub struct Collation {
    /// The ICU locale, e.g. `"en"` or `"simple"` (required).
    #[builder(!default)]
    pub locale: String,
    /// The comparison level.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strength: Option<CollationStrength>,
    /// Whether case is compared at strength 1 or 2 (`caseLevel`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case_level: Option<bool>,
    /// Whether upper or lower case sorts first (`caseFirst`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub case_first: Option<CollationCaseFirst>,
    /// Whether digit strings compare as numbers (`numericOrdering`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numeric_ordering: Option<bool>,
    /// Whether whitespace and punctuation are base characters (`alternate`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alternate: Option<CollationAlternate>,
    /// With `alternate: shifted`, which characters are ignorable (`maxVariable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_variable: Option<CollationMaxVariable>,
    /// Whether text is normalized before comparison (`normalization`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normalization: Option<bool>,
    /// Whether diacritics sort from the back of the string (`backwards`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backwards: Option<bool>,
}

impl Collation {
    /// The collation as the document sent to the server.
    pub fn to_document(&self) -> Document {
        // A struct of strings, booleans and small integers always serializes.
        bson::to_document(self).unwrap_or_default()
    }
}

impl From<Collation> for Bson {
    fn from(collation: Collation) -> Self {
        Bson::Document(collation.to_document())
    }
}

/// The ICU comparison level (`strength`), sent as 1 to 5.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CollationStrength {
    /// Base characters only.
    Primary,
    /// Base characters and diacritics.
    Secondary,
    /// Also case (the default).
    Tertiary,
    /// Also punctuation, with `alternate: shifted`.
    Quaternary,
    /// Every difference, code points included.
    Identical,
}

impl From<CollationStrength> for u32 {
    fn from(strength: CollationStrength) -> Self {
        match strength {
            CollationStrength::Primary => 1,
            CollationStrength::Secondary => 2,
            CollationStrength::Tertiary => 3,
            CollationStrength::Quaternary => 4,
            CollationStrength::Identical => 5,
        }
    }
}

impl TryFrom<u32> for CollationStrength {
    type Error = crate::error::Error;

    fn try_from(level: u32) -> crate::error::Result<Self> {
        Ok(match level {
            1 => CollationStrength::Primary,
            2 => CollationStrength::Secondary,
            3 => CollationStrength::Tertiary,
            4 => CollationStrength::Quaternary,
            5 => CollationStrength::Identical,
            _ => {
                return Err(crate::error::Error::invalid_argument(format!(
                    "invalid collation strength: {level} (1 to 5)"
                )))
            }
        })
    }
}

impl Serialize for CollationStrength {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_i32(u32::from(*self) as i32)
    }
}

impl<'de> Deserialize<'de> for CollationStrength {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let level = u32::deserialize(deserializer)?;
        Self::try_from(level).map_err(serde::de::Error::custom)
    }
}

/// Which case sorts first (`caseFirst`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CollationCaseFirst {
    /// Upper case first.
    Upper,
    /// Lower case first.
    Lower,
    /// The locale's default.
    Off,
}

/// Whether whitespace and punctuation are base characters (`alternate`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CollationAlternate {
    /// They are base characters.
    NonIgnorable,
    /// They are ignorable (up to `maxVariable`).
    Shifted,
}

/// Which characters `alternate: shifted` ignores (`maxVariable`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum CollationMaxVariable {
    /// Whitespace and punctuation.
    Punct,
    /// Whitespace only.
    Space,
}

impl std::fmt::Display for CollationStrength {
    /// The strength's number, as the official driver prints it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&u32::from(*self), f)
    }
}

/// `as_str`, `Display` and `FromStr` over the server's names of a
/// collation enum's values, as the official driver's.
macro_rules! collation_names {
    ($name:ident { $($variant:ident => $text:literal),* $(,)? }) => {
        impl $name {
            /// The server's name of this value.
            pub fn as_str(&self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = crate::error::Error;

            fn from_str(s: &str) -> crate::error::Result<Self> {
                match s {
                    $($text => Ok($name::$variant),)*
                    _ => Err(crate::error::Error::invalid_argument(format!(
                        concat!("invalid ", stringify!($name), ": {}"),
                        s
                    ))),
                }
            }
        }
    };
}

collation_names!(CollationCaseFirst { Upper => "upper", Lower => "lower", Off => "off" });
collation_names!(CollationAlternate { NonIgnorable => "non-ignorable", Shifted => "shifted" });
collation_names!(CollationMaxVariable { Punct => "punct", Space => "space" });
