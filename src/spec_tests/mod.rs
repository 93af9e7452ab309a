//! The specifications' JSON tests for the pure rules, run as unit tests so
//! that the rules need not be public.
//!
//! Each runner reads its files from `$MONGO_SPEC_TESTS` or
//! `<crate>/../shared/spec-tests` at run time ([`files`]), names every
//! failure by file and test, and says loudly and skips when the directory
//! is absent:
//!
//! - [`sdam`]: discovery and monitoring on the topology description;
//! - [`rtt`]: the round-trip-time average;
//! - [`server_selection`] and [`max_staleness`]: selection from a topology;
//! - [`uri`]: the connection-string and URI-options specs;
//! - [`auth`]: the auth spec's connection-string tests.
//!
//! The monitor's runner (`proto::monitor::spec_tests`) drives the SDAM,
//! server-selection and max-staleness files through the monitor with the
//! same readers and comparisons ([`sdam_fixture`], [`selection_fixture`]).

mod auth;
// One loader for every spec runner: these and the integration tests'
// (unified format, DNS seedlist) share the test support's.
#[path = "../../tests/support/spec.rs"]
pub(crate) mod files;
mod max_staleness;
mod rtt;
mod sdam;
pub(crate) mod sdam_fixture;
pub(crate) mod selection_fixture;
mod server_selection;
mod uri;
