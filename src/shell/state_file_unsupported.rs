//! The state file where file ownership and modes cannot be checked: the
//! option is refused rather than ignored.

use std::path::Path;

use crate::error::{Error, Result};
use crate::proto::state_file::{Binding, SealedScramKeys, StateContents};

/// Never built: opening one is an error.
#[derive(Debug)]
pub(crate) struct StateFile;

impl StateFile {
    /// Refuses: the file's permissions cannot be checked on this platform.
    pub(crate) fn open(path: &Path) -> Result<(StateFile, StateContents)> {
        Err(Error::invalid_argument(format!(
            "state file {}: supported on Unix only, where its owner and mode can be checked",
            path.display()
        )))
    }

    /// Unreachable: no value exists.
    pub(crate) fn save(&self, _: Binding, _: &[SealedScramKeys], _: u64) {}

    /// Unreachable: no value exists.
    pub(crate) fn bind(
        &mut self,
        _: &StateContents,
        _: Binding,
        _: Option<std::sync::Arc<crate::shell::tls::ChainMemory>>,
    ) {
    }

    /// Unreachable: no value exists.
    pub(crate) fn fresh_srv(&self, _: u64) -> Option<crate::proto::state_file::SrvAnswer> {
        None
    }

    /// Unreachable: no value exists.
    pub(crate) fn fresh_host(&self, _: &str, _: u64) -> Option<Vec<std::net::IpAddr>> {
        None
    }

    /// Unreachable: no value exists.
    pub(crate) fn remember(&self, _: crate::proto::state_file::Item) {}

    /// Unreachable: no value exists.
    pub(crate) fn save_new_items(&self, _: u64) {}

    /// Unreachable: no value exists.
    pub(crate) fn first_scan_order(
        &self,
        _: u64,
        _: std::time::Duration,
    ) -> Vec<crate::proto::address::ServerAddress> {
        Vec::new()
    }

    /// Unreachable: no value exists.
    pub(crate) fn save_topology(
        &self,
        _: &crate::proto::sdam::TopologyDescription,
        _: std::time::Duration,
        _: u64,
    ) {
    }
}
