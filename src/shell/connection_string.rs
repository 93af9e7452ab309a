//! The connection-string entry points that log the parser's warnings (an
//! ignored unknown option or invalid value): the parser in `proto::uri`
//! hands them back, and logging is the shell's.

use crate::error::{Error, Result};
use crate::proto::options::{ClientOptions, ConnectionString, ResolverConfig};

impl ClientOptions {
    /// Parses a connection string (`mongodb://` or `mongodb+srv://`, as
    /// text or an already parsed [`ConnectionString`]) when `.run()`,
    /// logging each warning (an ignored unknown option or invalid value)
    /// through `log::warn!`, as the official driver's
    /// `ClientOptions::parse(uri).run()`. Unlike the official driver, no
    /// DNS look-up happens here: a `mongodb+srv` host is kept in
    /// [`Self::srv_host`] and resolved by the client, before its first
    /// operation, so `hosts` is empty until then.
    pub fn parse<C, E>(conn_str: C) -> ParseConnectionString
    where
        C: TryInto<ConnectionString, Error = E>,
        E: Into<Error>,
    {
        ParseConnectionString {
            conn_str: conn_str.try_into().map_err(Into::into),
            resolver_config: None,
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

/// `ClientOptions::parse(uri).run()`; made into options by `run`.
#[must_use = "nothing happens until `run`"]
pub struct ParseConnectionString {
    conn_str: Result<ConnectionString>,
    resolver_config: Option<ResolverConfig>,
}

impl std::fmt::Debug for ParseConnectionString {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The string may hold a password.
        f.debug_struct("ParseConnectionString")
            .field("resolver_config", &self.resolver_config)
            .finish_non_exhaustive()
    }
}

impl ParseConnectionString {
    /// The DNS name servers the client's look-ups ask (the `mongodb+srv`
    /// SRV and TXT records, and the members' addresses), instead of the
    /// system's: they become [`ClientOptions::name_servers`].
    pub fn resolver_config(mut self, resolver_config: ResolverConfig) -> Self {
        self.resolver_config = Some(resolver_config);
        self
    }

    /// The options the connection string gives, validated.
    pub fn run(self) -> Result<ClientOptions> {
        let conn_str = self.conn_str?;
        log_warnings(conn_str.warnings());
        let mut options = conn_str.into_options()?;
        if let Some(resolver_config) = self.resolver_config {
            options.name_servers = Some(resolver_config.name_servers().to_vec());
        }
        options.validate()?;
        Ok(options)
    }
}
