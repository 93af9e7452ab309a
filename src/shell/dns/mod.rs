//! DNS: the SRV and TXT look-ups of `mongodb+srv` and the A/AAAA look-ups
//! of member host names, through hickory-resolver.
//!
//! hickory-resolver is async-only, so each look-up builds a Tokio
//! current-thread runtime, runs the resolver on the calling thread until
//! the answers are in (or the deadline passes) and drops both: no thread
//! is started, nothing is cached and nothing runs between look-ups, so a
//! forked child inherits no resolver state. The resolver reads
//! `/etc/resolv.conf` (name servers, search list, `ndots`, `timeout`,
//! `attempts`), consults `/etc/hosts` before DNS for host names, checks
//! that answers match the question and follows CNAME chains, asks again
//! over TCP when a UDP answer is truncated, and moves on to the next name
//! server when one fails (SERVFAIL, REFUSED, no answer).
//!
//! What this module keeps of the driver's own rules: the look-up waits
//! for the first operation (callers ask only then), SRV and TXT are asked
//! together, the members a scan is about to connect to are looked up in
//! one batch, and every look-up ends by the deadline the caller passes
//! (connectTimeoutMS or the operation's timeoutMS, whichever comes first).
//!
//! ```text
//!  look-up ──> current-thread runtime ──> hickory Resolver ──> name server 1
//!                 (dropped after)              │  SERVFAIL/no answer └─> name server 2 ...
//!                                              └── deadline ──> timeout error naming the records
//! ```

#[cfg(test)]
mod tests;

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use hickory_resolver::config::{
    LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig as Servers, ResolverOpts,
    ServerOrderingStrategy,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::NetError;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::{Resolver, TokioResolver};

use crate::error::{Error, Result};
use crate::proto::options::ClientOptions;
use crate::proto::srv::SrvTarget;
use crate::shell::clock::{Clock, SystemClock};

/// How many answers the resolver of one look-up may keep: it lives for
/// one look-up only, so its cache holds no more than that look-up's own.
const CACHE_SIZE: u64 = 64;

/// Which name servers to ask and how (the system's `resolv.conf`, or the
/// name servers a client was given), and the clock the deadlines are
/// read from.
#[derive(Clone, Debug)]
pub struct ResolverConfig {
    /// The name servers, search list and domain.
    servers: Servers,
    /// The resolver's options: `ndots`, per-server timeout, attempts.
    options: ResolverOpts,
    /// Whether to consult `/etc/hosts` before DNS (host look-ups only).
    use_hosts_file: bool,
    /// Addresses already known for some names (from a batched look-up),
    /// consulted before anything else.
    pub known_hosts: Vec<(String, Vec<IpAddr>)>,
    /// Where the look-ups read the time (the system's unless the client
    /// gives its own).
    pub(crate) clock: Arc<dyn Clock>,
}

impl ResolverConfig {
    /// The system configuration: `/etc/resolv.conf` and `/etc/hosts`.
    /// An unreadable `resolv.conf` gives the C library's default (a name
    /// server on 127.0.0.1).
    pub fn system() -> ResolverConfig {
        let (servers, options) =
            hickory_resolver::system_conf::read_system_conf().unwrap_or_else(|_| {
                let local = NameServerConfig::udp_and_tcp(IpAddr::from([127, 0, 0, 1]));
                (
                    Servers::from_name_servers(vec![local]),
                    ResolverOpts::default(),
                )
            });
        ResolverConfig::new(servers, options, true)
    }

    /// The configuration a client's look-ups use: the name servers its
    /// options set ([`ClientOptions::with_name_servers`]), else the
    /// system's, on the client's clock.
    pub(crate) fn for_client(options: &ClientOptions, clock: Arc<dyn Clock>) -> ResolverConfig {
        let config = match options.name_servers() {
            Some(servers) => ResolverConfig::with_name_servers(servers.to_vec()),
            None => ResolverConfig::system(),
        };
        ResolverConfig { clock, ..config }
    }

    /// The given name servers only (UDP, and TCP for truncated answers, on
    /// each address's port): no search list, no `/etc/hosts`.
    pub fn with_name_servers(name_servers: Vec<SocketAddr>) -> ResolverConfig {
        let servers = name_servers
            .into_iter()
            .map(|address| {
                let mut server = NameServerConfig::udp_and_tcp(address.ip());
                for connection in &mut server.connections {
                    connection.port = address.port();
                }
                server
            })
            .collect();
        let servers = Servers::from_name_servers(servers);
        ResolverConfig::new(servers, ResolverOpts::default(), false)
    }

    /// `options` as read, with the choices this driver makes on top.
    fn new(servers: Servers, mut options: ResolverOpts, use_hosts_file: bool) -> ResolverConfig {
        options.cache_size = CACHE_SIZE;
        // A and AAAA asked together, IPv4 addresses tried first (as the
        // connection opener tries them in order).
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        // One name server at a time, each attempt starting at the next one:
        // with two servers asked in parallel, the first one's quick SERVFAIL
        // would end every attempt before the other answered.
        options.num_concurrent_reqs = 1;
        options.server_ordering_strategy = ServerOrderingStrategy::RoundRobin;
        options.attempts = options.attempts.max(servers.name_servers().len());
        ResolverConfig {
            servers,
            options,
            use_hosts_file,
            known_hosts: Vec::new(),
            clock: Arc::new(SystemClock),
        }
    }

    /// A resolver for one look-up; `hosts_file` says whether it reads
    /// `/etc/hosts` (host look-ups do, SRV and TXT need not).
    fn resolver(&self, hosts_file: bool) -> std::result::Result<TokioResolver, DnsError> {
        let mut options = self.options.clone();
        options.use_hosts_file = if hosts_file && self.use_hosts_file {
            ResolveHosts::Always
        } else {
            ResolveHosts::Never
        };
        Resolver::builder_with_config(self.servers.clone(), TokioRuntimeProvider::default())
            .with_options(options)
            .build()
            .map_err(|e| DnsError::failed(format!("cannot set up the resolver: {e}")))
    }
}

/// A failed look-up, before it is told which record it was about.
#[derive(Debug)]
struct DnsError {
    timed_out: bool,
    message: String,
}

impl DnsError {
    fn failed(message: String) -> DnsError {
        DnsError {
            timed_out: false,
            message,
        }
    }

    fn timed_out(message: String) -> DnsError {
        DnsError {
            timed_out: true,
            message,
        }
    }

    /// What the resolver said, as this module reports it.
    fn from_resolver(error: &NetError) -> DnsError {
        match error {
            NetError::Timeout => DnsError::timed_out("no name server answered in time".into()),
            other => DnsError::failed(other.to_string()),
        }
    }

    /// The error of a failed look-up of a host's addresses: an I/O error
    /// (of kind `TimedOut` when no answer came in time), as a socket's
    /// connect would fail.
    fn context(self, what: &str) -> Error {
        let message = format!("DNS look-up of the {what} failed: {}", self.message);
        if self.timed_out {
            Error::network(
                None,
                &message,
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time"),
            )
        } else {
            Error::network_message(None, message)
        }
    }
}

impl DnsError {
    /// The error of a failed look-up of a `mongodb+srv` URI's SRV or TXT
    /// records: [`ErrorKind::DnsResolve`](crate::error::ErrorKind::DnsResolve),
    /// except that running out of time stays an I/O timeout (as every
    /// deadline that passes on the network is).
    fn srv_context(self, what: &str) -> Error {
        if self.timed_out {
            return self.context(what);
        }
        Error::dns_resolve(format!(
            "DNS look-up of the {what} failed: {}",
            self.message
        ))
    }
}

/// Runs `look_up` on a resolver of its own, on a current-thread runtime
/// built for it, until it ends or `deadline` passes; the runtime (its
/// sockets, timers and tasks) is gone when this returns.
fn run_look_up<T, F, Fut>(
    config: &ResolverConfig,
    hosts_file: bool,
    deadline: Option<Instant>,
    look_up: F,
) -> std::result::Result<T, DnsError>
where
    F: FnOnce(TokioResolver) -> Fut,
    Fut: Future<Output = T>,
{
    let time_left = match deadline {
        Some(deadline) => {
            let left = deadline.saturating_duration_since(config.clock.now());
            if left.is_zero() {
                return Err(DnsError::timed_out("no time left to ask".into()));
            }
            Some(left)
        }
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| DnsError::failed(format!("cannot start the look-up: {e}")))?;
    runtime.block_on(async {
        let resolver = config.resolver(hosts_file)?;
        match time_left {
            Some(left) => tokio::time::timeout(left, look_up(resolver))
                .await
                .map_err(|_| DnsError::timed_out("no answer before the deadline".into())),
            None => Ok(look_up(resolver).await),
        }
    })
}

/// What the SRV and TXT look-ups of one `mongodb+srv` host found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrvLookup {
    /// The SRV targets (empty when the name has none), each with its TTL.
    pub targets: Vec<SrvTarget>,
    /// The TXT records, each as its list of strings.
    pub txt_records: Vec<Vec<Vec<u8>>>,
    /// The smallest TTL of the TXT records, in seconds (none without
    /// records).
    pub txt_ttl: Option<u32>,
}

/// Asks for the SRV records of `srv_name` and the TXT records of `host`
/// at the same time: one round trip when the name server answers both.
/// A name with no records of a type gives an empty list, not an error.
pub fn lookup_srv_and_txt(
    config: &ResolverConfig,
    srv_name: &str,
    host: &str,
    deadline: Option<Instant>,
) -> Result<SrvLookup> {
    let both = format!("SRV record {srv_name} and TXT record {host}");
    let (srv, txt) = run_look_up(config, false, deadline, |resolver| async move {
        let srv_name = absolute(srv_name);
        let host = absolute(host);
        tokio::join!(
            resolver.srv_lookup(srv_name.as_str()),
            resolver.txt_lookup(host.as_str())
        )
    })
    .map_err(|e| e.srv_context(&both))?;
    let srv = records_or_none(srv).map_err(|e| e.srv_context(&format!("SRV record {srv_name}")))?;
    let txt = records_or_none(txt).map_err(|e| e.srv_context(&format!("TXT record {host}")))?;
    let targets = srv
        .iter()
        .filter_map(|record| match &record.data {
            RData::SRV(srv) => Some(SrvTarget {
                host: srv.target.to_ascii(),
                port: srv.port,
                ttl: record.ttl,
            }),
            _ => None,
        })
        .collect();
    let mut txt_ttl = None;
    let mut txt_records = Vec::new();
    for record in &txt {
        if let RData::TXT(text) = &record.data {
            txt_records.push(text.txt_data.iter().map(|s| s.to_vec()).collect());
            txt_ttl = Some(txt_ttl.map_or(record.ttl, |t: u32| t.min(record.ttl)));
        }
    }
    Ok(SrvLookup {
        targets,
        txt_records,
        txt_ttl,
    })
}

/// The answers of a look-up; "no such name" and "no records" are none.
fn records_or_none(
    outcome: std::result::Result<hickory_resolver::lookup::Lookup, NetError>,
) -> std::result::Result<Vec<hickory_resolver::proto::rr::Record>, DnsError> {
    match outcome {
        Ok(lookup) => Ok(lookup.answers().to_vec()),
        Err(e) if e.is_no_records_found() => Ok(Vec::new()),
        Err(e) => Err(DnsError::from_resolver(&e)),
    }
}

/// `name` as a fully qualified name: the SRV and TXT names of a
/// `mongodb+srv` URI are never completed from the search list.
fn absolute(name: &str) -> String {
    if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.")
    }
}

/// Resolves a member's host name to socket addresses by `deadline`: IP
/// literals as they are, addresses a batched look-up found, then the
/// resolver (`/etc/hosts` first when the configuration says so, then A
/// and AAAA asked together for each name of the search list).
pub fn resolve_host(
    config: &ResolverConfig,
    host: &str,
    port: u16,
    deadline: Option<Instant>,
) -> Result<Vec<SocketAddr>> {
    if let Ok(ip) = IpAddr::from_str(host) {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let known = config
        .known_hosts
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case(host));
    if let Some((_, ips)) = known {
        return Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect());
    }
    let found = run_look_up(config, true, deadline, |resolver| async move {
        resolver.lookup_ip(host).await
    })
    .map_err(|e| e.context(&format!("A/AAAA records of {host}")))?;
    match found {
        Ok(lookup) if lookup.iter().next().is_some() => {
            Ok(lookup.iter().map(|ip| SocketAddr::new(ip, port)).collect())
        }
        Err(e) if !e.is_no_records_found() => {
            Err(DnsError::from_resolver(&e).context(&format!("address of {host}")))
        }
        _ => Err(Error::network_message(
            None,
            format!("the host name {host:?} has no A or AAAA records"),
        )),
    }
}

/// A host name's addresses, as a batched look-up found them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedHost {
    /// The name asked.
    pub host: String,
    /// Its addresses, IPv4 first.
    pub ips: Vec<IpAddr>,
    /// The smallest TTL of the answer's records, in seconds.
    pub ttl: u32,
}

/// Looks several host names up at once (the members a scan is about to
/// connect to), so the scan waits for one round trip instead of one per
/// member. Returns what was found; a host missing from the result is left
/// to [`resolve_host`] (which gives the error that names it). When no
/// host was found and the look-ups failed (no name server answered), the
/// failure is returned, for every host to report.
pub fn resolve_hosts(
    config: &ResolverConfig,
    hosts: &[String],
    deadline: Option<Instant>,
) -> Result<Vec<ResolvedHost>> {
    let names: Vec<&String> = hosts
        .iter()
        .filter(|host| IpAddr::from_str(host).is_err())
        .collect();
    if names.is_empty() {
        return Ok(Vec::new());
    }
    let what = || {
        let listed: Vec<&str> = names.iter().map(|h| h.as_str()).collect();
        format!("A/AAAA records of {}", listed.join(", "))
    };
    let asked = &names;
    let outcomes = run_look_up(config, true, deadline, |resolver| async move {
        let look_ups = asked.iter().map(|host| resolver.lookup_ip(host.as_str()));
        futures_util::future::join_all(look_ups).await
    })
    .map_err(|e| e.context(&what()))?;
    let mut found = Vec::new();
    let mut failure = None;
    for (host, outcome) in names.iter().zip(outcomes) {
        match outcome {
            Ok(lookup) => {
                let ips: Vec<IpAddr> = lookup.iter().collect();
                let ttl = lookup.as_lookup().answers().iter().map(|r| r.ttl).min();
                if !ips.is_empty() {
                    found.push(ResolvedHost {
                        host: (*host).clone(),
                        ips,
                        ttl: ttl.unwrap_or(0),
                    });
                }
            }
            Err(e) if !e.is_no_records_found() => failure = Some(DnsError::from_resolver(&e)),
            Err(_) => {}
        }
    }
    match failure {
        Some(failure) if found.is_empty() => Err(failure.context(&what())),
        _ => Ok(found),
    }
}
