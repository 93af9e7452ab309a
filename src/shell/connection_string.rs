//! The connection-string entry points that log the parser's warnings (an
//! ignored unknown option or invalid value): the parser in `proto::uri`
//! hands them back, and logging is the shell's.

use crate::error::Result;
use crate::proto::options::ClientOptions;

impl ClientOptions {
    /// Parses a connection string (`mongodb://` or `mongodb+srv://`) when
    /// `.run()`, logging each warning (an ignored unknown option or invalid
    /// value) through `log::warn!`, as the official driver's
    /// `ClientOptions::parse(uri).run()`. Unlike the official driver, no
    /// DNS look-up happens here: a `mongodb+srv` host is kept in
    /// [`Self::srv_host`] and resolved by the client, before its first
    /// operation, so `hosts` is empty until then.
    pub fn parse(uri: impl AsRef<str>) -> ParseConnectionString {
        ParseConnectionString {
            uri: uri.as_ref().to_string(),
        }
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

/// `ClientOptions::parse(uri).run()`; parsed by `run`.
#[must_use = "nothing happens until `run`"]
pub struct ParseConnectionString {
    uri: String,
}

impl std::fmt::Debug for ParseConnectionString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The string may hold a password.
        f.debug_struct("ParseConnectionString")
            .finish_non_exhaustive()
    }
}

impl ParseConnectionString {
    /// The options the connection string gives, validated.
    pub fn run(self) -> Result<ClientOptions> {
        let (options, warnings) = ClientOptions::parse_with_warnings(&self.uri)?;
        log_warnings(&warnings);
        Ok(options)
    }
}
