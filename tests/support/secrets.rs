//! Connection strings that go wrong in every way we know, each holding
//! [`SECRET`] as a password (or another secret), for the tests that check
//! no channel (CLI messages, errors, Debug, logs, events, the C ABI) ever
//! shows it.

/// The secret: distinctive enough that any appearance is a leak.
pub const SECRET: &str = "pw7Kq9SeCrEt";

/// Failing or odd connection strings against `host` (`h:port`), each with
/// [`SECRET`] in it: a misspelt scheme, a bad option value, an unknown
/// option, a bad port, an unsupported mechanism, unescaped delimiters in
/// the password, secrets in option values. `host` should refuse
/// connections or lack a server, so that operations fail quickly.
pub fn failing_uris(host: &str) -> Vec<String> {
    let s = SECRET;
    [
        format!("MONGODB://u:{s}@{host}/"),
        format!(" mongodb://u:{s}@{host}/"),
        format!("mongo://u:{s}@{host}/"),
        format!("mongodb:/u:{s}@{host}/"),
        format!("mongodb:u:{s}@{host}/"),
        format!("mongodb://u:{s}@{host}/?tls=maybe"),
        format!("mongodb://u:{s}@{host}/?nosuch=1"),
        format!("mongodb://u:{s}@{host}/?connectTimeoutMS=soon"),
        format!("mongodb://u:{s}@{host}:99999/"),
        format!("mongodb://u:{s}@h:x/"),
        format!("mongodb://u:{s}@{host}/?authMechanism=NOSUCH"),
        format!("mongodb://u:{s}@{host}/?authMechanism=MONGODB-X509"),
        format!("mongodb://u:{s}@{host}/?authMechanism=GSSAPI"),
        format!("mongodb://u:{s}@{host}/?authMechanism=MONGODB-OIDC"),
        format!("mongodb://u:{s}@{host}/?authMechanism=MONGODB-AWS"),
        format!("mongodb://u:{s}@{host}/?authMechanism=SCRAM-SHA-1&authSource="),
        format!("mongodb://u:{s}:x@{host}/"),
        format!("mongodb://u:{s}/x@{host}/"),
        format!("mongodb://u:{s}?x@{host}/"),
        format!("mongodb://u:{s}#x@{host}/"),
        format!("mongodb://u:{s}@x@{host}/"),
        format!("mongodb://u:{s}%zz@{host}/"),
        format!("mongodb://u%:{s}@{host}/"),
        format!("mongodb://u:{s}%40x@{host}/"),
        format!("mongodb://u:{s}@/"),
        format!("mongodb://u:{s}@[::1/"),
        format!("mongodb://u:{s}@{host},{host}/?directConnection=true"),
        format!("mongodb+srv://u:{s}@{host}/"),
        format!("mongodb://u:{s}@{host}/?replicaSet="),
        format!("mongodb://u:{s}@{host}/?w=-1"),
        format!("mongodb://u:{s}@{host}/?readPreference=nearest&maxStalenessSeconds=1"),
        format!("mongodb://u:{s}@{host}/?w=0&journal=true"),
        format!("mongodb://{host}/?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:{s}"),
        format!("mongodb://{host}/?authMechanismProperties=TOKEN:{s}&authMechanism=NOSUCH"),
        format!("mongodb://{host}/?proxyHost=p&proxyPassword={s}&proxyPort=x"),
        format!("mongodb://{host}/?tls=true&tlsCertificateKeyFile=/nonexistent&tlsCertificateKeyFilePassword={s}"),
        format!("mongodb://u:{s}@{host}/?serverSelectionTimeoutMS=300&connectTimeoutMS=300"),
        format!("mongodb://u:{s}@{host}/?authMechanism=PLAIN&serverSelectionTimeoutMS=300"),
    ]
    .into()
}
