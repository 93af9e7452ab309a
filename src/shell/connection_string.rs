//! The connection-string entry points that log the parser's warnings (an
//! ignored unknown option or invalid value): the parser in `proto::uri`
//! hands them back, and logging is the shell's.

use crate::error::Result;
use crate::proto::options::ClientOptions;

impl ClientOptions {
    /// Parses a connection string (`mongodb://` or `mongodb+srv://`), logging
    /// each warning (an ignored unknown option or invalid value) through
    /// `log::warn!`. No DNS look-up happens here: a `mongodb+srv` host is kept
    /// in [`Self::srv_host`] for the SRV resolver.
    pub fn parse(uri: &str) -> Result<Self> {
        let (options, warnings) = Self::parse_with_warnings(uri)?;
        log_warnings(&warnings);
        Ok(options)
    }

    /// Parses `uri` and lays the options set in `code` over it.
    ///
    /// An option set in both places must have the same value in both, else
    /// the error names the option and both values. Cross-option rules (e.g.
    /// `loadBalanced` with `replicaSet`) are checked on the merged result.
    pub fn parse_with(uri: &str, code: ClientOptions) -> Result<Self> {
        let (from_uri, warnings) = crate::proto::uri::parse_unvalidated(uri)?;
        log_warnings(&warnings);
        let merged = crate::proto::options::merge(from_uri, code)?;
        merged.validate()?;
        Ok(merged)
    }
}

fn log_warnings(warnings: &[String]) {
    for warning in warnings {
        log::warn!("{warning}");
    }
}
