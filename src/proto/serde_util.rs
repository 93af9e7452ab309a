//! The `#[serde(with = ..)]` helpers behind the public types' `Serialize`
//! and `Deserialize` impls, which follow the official driver's wire shapes
//! (its `serde_util`): durations as whole milliseconds or seconds, unsigned
//! counts as BSON's signed integers, `limit` as its absolute value.
//!
//! These impls are for users (storing options, logging events); the driver
//! builds its commands with its own encoder, never through them.
//!
//! Reading is a superset of the official: a duration is read from a number
//! (the unit the field is written in) and from serde's own `Duration` form
//! `{ secs, nanos }`, which the official crate reads for the fields it
//! derives without a helper, so a value written by either crate reads back.

use std::time::Duration;

use bson::{Bson, Document};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration as read: a number in the field's unit, or `{ secs, nanos }`.
#[derive(Deserialize)]
#[serde(untagged)]
enum DurationForm {
    // First: an untagged `Bson` would take the struct form too.
    Struct { secs: u64, nanos: u32 },
    Number(Bson),
}

fn read_duration<'de, D: Deserializer<'de>>(
    deserializer: D,
    from_count: fn(u64) -> Duration,
) -> Result<Option<Duration>, D::Error> {
    match Option::<DurationForm>::deserialize(deserializer)? {
        None => Ok(None),
        Some(DurationForm::Struct { secs, nanos }) => Ok(Some(Duration::new(secs, nanos))),
        Some(DurationForm::Number(number)) => match non_negative(&number) {
            Some(count) => Ok(Some(from_count(count))),
            None => Err(D::Error::custom(format!(
                "a duration must be a non-negative whole number, not {number}"
            ))),
        },
    }
}

/// A whole, non-negative BSON number (what the server and the official
/// crate write counts and durations as).
pub(crate) fn non_negative(number: &Bson) -> Option<u64> {
    match number {
        Bson::Int32(n) => u64::try_from(*n).ok(),
        Bson::Int64(n) => u64::try_from(*n).ok(),
        Bson::Double(d) if d.fract() == 0.0 && *d >= 0.0 && *d < u64::MAX as f64 => Some(*d as u64),
        _ => None,
    }
}

/// A count written as an `i32` when it fits, else an `i64` (as the official
/// driver writes `maxTimeMS` and its kin).
fn write_count<S: Serializer>(count: u128, serializer: S) -> Result<S::Ok, S::Error> {
    if let Ok(small) = i32::try_from(count) {
        serializer.serialize_i32(small)
    } else {
        let large = i64::try_from(count).map_err(serde::ser::Error::custom)?;
        serializer.serialize_i64(large)
    }
}

/// `Option<Duration>` as whole milliseconds (`maxTimeMS`, `wtimeout`, ...).
pub(crate) mod millis {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => write_count(duration.as_millis(), serializer),
            None => serializer.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        read_duration(deserializer, Duration::from_millis)
    }
}

/// `Option<Duration>` as whole seconds (`maxStalenessSeconds`, ...).
pub(crate) mod seconds {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(duration) => write_count(u128::from(duration.as_secs()), serializer),
            None => serializer.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        read_duration(deserializer, Duration::from_secs)
    }
}

/// An `Option<u32>` written as an `i32` (an error when it does not fit).
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn u32_as_i32<S: Serializer>(
    value: &Option<u32>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    narrowed::<u32, i32, S>(*value, "i32", serializer)
}

/// An `Option<u64>` written as an `i64` (an error when it does not fit).
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn u64_as_i64<S: Serializer>(
    value: &Option<u64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    narrowed::<u64, i64, S>(*value, "i64", serializer)
}

/// `value` written as the signed type the server reads, `wide` naming it in
/// the error when it does not fit.
fn narrowed<N, W, S>(value: Option<N>, wide: &str, serializer: S) -> Result<S::Ok, S::Error>
where
    N: Copy + std::fmt::Display,
    W: TryFrom<N> + Serialize,
    S: Serializer,
{
    match value {
        Some(n) => W::try_from(n)
            .map_err(|_| serde::ser::Error::custom(format!("{n} does not fit in an {wide}")))?
            .serialize(serializer),
        None => serializer.serialize_none(),
    }
}

/// A `u64` written as an `i64` (an error when it does not fit).
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn u64_as_i64_always<S: Serializer>(
    value: &u64,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    u64_as_i64(&Some(*value), serializer)
}

/// A `u64` read from any whole, non-negative BSON number.
pub(crate) fn u64_from_number<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let number = Bson::deserialize(deserializer)?;
    non_negative(&number)
        .ok_or_else(|| D::Error::custom(format!("could not deserialize u64 from {number}")))
}

/// An `Option<u64>` read from any whole, non-negative BSON number (a
/// capped collection's `size`, which the server may report as a double).
pub(crate) fn option_u64_from_number<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    match Option::<Bson>::deserialize(deserializer)? {
        None => Ok(None),
        Some(number) => non_negative(&number)
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("could not deserialize u64 from {number}"))),
    }
}

/// `limit` as its absolute value (a negative `limit` means "one batch" to
/// the driver, not to the server).
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn absolute_value<S: Serializer>(
    value: &Option<i64>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match value {
        Some(n) => serializer.serialize_i64(n.saturating_abs()),
        None => serializer.serialize_none(),
    }
}

/// `batch_size` as the aggregate command's `cursor: { batchSize }` (an empty
/// `cursor` document when unset).
#[allow(clippy::trivially_copy_pass_by_ref)]
pub(crate) fn batch_size_as_cursor<S: Serializer>(
    value: &Option<u32>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut cursor = Document::new();
    if let Some(n) = value {
        let n = i32::try_from(*n).map_err(|_| {
            serde::ser::Error::custom("batch size must be able to fit into a signed 32-bit integer")
        })?;
        cursor.insert("batchSize", n);
    }
    cursor.serialize(serializer)
}

/// An `Option<bool>` written always, unset as `true` (the bulk write's
/// `ordered`, whose default is ordered).
#[allow(clippy::trivially_copy_pass_by_ref, clippy::ref_option)]
pub(crate) fn bool_or_true<S: Serializer>(
    value: &Option<bool>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.serialize_bool(value.unwrap_or(true))
}

/// An error as its message (what the official driver's events write).
pub(crate) fn error_as_string<S: Serializer>(
    error: &crate::error::Error,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_str(error)
}

#[cfg(test)]
mod tests;
