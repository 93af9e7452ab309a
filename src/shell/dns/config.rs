//! Which name servers to ask and how: the system's `resolv.conf`, or the
//! name servers a client was given.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use crate::proto::options::ClientOptions;
use crate::shell::clock::{Clock, SystemClock};
use crate::shell::rng::SharedRng;

/// Where the system's resolver configuration lives.
const RESOLV_CONF: &str = "/etc/resolv.conf";

/// Which name servers to ask and how, as `/etc/resolv.conf` would say,
/// and the clock and generator the look-ups use.
#[derive(Clone, Debug)]
pub struct ResolverConfig {
    /// The name servers, asked in order.
    pub name_servers: Vec<SocketAddr>,
    /// Domains appended to names with fewer than `ndots` dots.
    pub search: Vec<String>,
    /// The `ndots` option.
    pub ndots: usize,
    /// How long to wait for one name server before asking the next.
    pub attempt_timeout: Duration,
    /// How many rounds over the name servers.
    pub attempts: usize,
    /// Whether to consult `/etc/hosts` before DNS (host look-ups only).
    pub use_hosts_file: bool,
    /// Addresses already known for some names (from a batched look-up),
    /// consulted before anything else.
    pub known_hosts: Vec<(String, Vec<IpAddr>)>,
    /// Where the look-ups read the time (the system's unless the client
    /// gives its own).
    pub(crate) clock: Arc<dyn Clock>,
    /// Where the questions' ids are drawn, shared by the copies of this
    /// configuration.
    pub(crate) query_ids: SharedRng,
}

impl ResolverConfig {
    /// The system configuration: `/etc/resolv.conf` and `/etc/hosts`.
    /// A missing file gives the C library's defaults (a name server on
    /// 127.0.0.1).
    pub fn system() -> ResolverConfig {
        let text = std::fs::read_to_string(RESOLV_CONF).unwrap_or_default();
        ResolverConfig::from_resolv_conf(&text)
    }

    /// The configuration a client's look-ups use: the name servers its
    /// options set ([`ClientOptions::with_name_servers`]), else the system's,
    /// on the client's clock, the ids drawn from `rng`.
    pub(crate) fn for_client(
        options: &ClientOptions,
        clock: Arc<dyn Clock>,
        rng: fastrand::Rng,
    ) -> ResolverConfig {
        let config = match options.name_servers() {
            Some(servers) => ResolverConfig::with_name_servers(servers.to_vec()),
            None => ResolverConfig::system(),
        };
        ResolverConfig {
            clock,
            query_ids: SharedRng::new(rng),
            ..config
        }
    }

    /// The given name servers only: no search list, no `/etc/hosts`.
    pub fn with_name_servers(name_servers: Vec<SocketAddr>) -> ResolverConfig {
        ResolverConfig {
            name_servers,
            search: Vec::new(),
            ndots: 1,
            attempt_timeout: Duration::from_secs(5),
            attempts: 2,
            use_hosts_file: false,
            known_hosts: Vec::new(),
            clock: Arc::new(SystemClock),
            query_ids: SharedRng::new(crate::shell::rng::from_os()),
        }
    }

    /// Parses the text of a `resolv.conf` (resolv.conf(5)): `nameserver`,
    /// `search`/`domain` and the `ndots`, `timeout` and `attempts` options;
    /// anything else is ignored, as the C library does.
    pub fn from_resolv_conf(text: &str) -> ResolverConfig {
        let mut config = ResolverConfig::with_name_servers(Vec::new());
        config.use_hosts_file = true;
        for line in text.lines() {
            let line = line.split(['#', ';']).next().unwrap_or("");
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    // A zone index (fe80::1%eth0) cannot be parsed by std; skip it.
                    if let Some(ip) = words.next().and_then(|w| IpAddr::from_str(w).ok()) {
                        config.name_servers.push(SocketAddr::new(ip, 53));
                    }
                }
                Some("search") | Some("domain") => {
                    config.search = words
                        .map(|w| w.trim_end_matches('.').to_ascii_lowercase())
                        .collect();
                }
                Some("options") => {
                    for option in words {
                        let (key, value) = option.split_once(':').unwrap_or((option, ""));
                        let value: Option<u64> = value.parse().ok();
                        match (key, value) {
                            ("ndots", Some(n)) => config.ndots = n.min(15) as usize,
                            ("timeout", Some(n)) => {
                                config.attempt_timeout = Duration::from_secs(n.clamp(1, 30))
                            }
                            ("attempts", Some(n)) => config.attempts = n.clamp(1, 5) as usize,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        if config.name_servers.is_empty() {
            config
                .name_servers
                .push(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 53));
        }
        config
    }
}
