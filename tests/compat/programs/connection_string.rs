//! The connection string's own types: `ConnectionString::parse` with its
//! fields, one changed and given to `ClientOptions::parse`; `AuthMechanism`
//! parsed and checking a credential; `DriverInfo` and `ServerApi` built by
//! their builders; a client made from the options runs a command.

use mongodb::bson::doc;
use mongodb::error::Result;
use mongodb::options::{
    AuthMechanism, ClientOptions, ConnectionString, Credential, DriverInfo, HostInfo, ServerApi,
    ServerApiVersion,
};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let mut parsed = ConnectionString::parse(uri)?;
    match &parsed.host_info {
        HostInfo::HostIdentifiers(hosts) => assert!(!hosts.is_empty()),
        other => panic!("a seed list, not {other:?}"),
    }
    parsed.app_name = Some("compat-connection-string".to_string());
    let mut options = ClientOptions::parse(parsed).run()?;
    assert_eq!(options.app_name.as_deref(), Some("compat-connection-string"));

    let mechanism: AuthMechanism = "SCRAM-SHA-256".parse()?;
    assert_eq!(mechanism, AuthMechanism::ScramSha256);
    assert_eq!(mechanism.as_str(), "SCRAM-SHA-256");
    let credential = Credential::builder()
        .username("ada".to_string())
        .password("secret".to_string())
        .mechanism(mechanism.clone())
        .build();
    mechanism.validate_credential(&credential)?;
    let with_password = Credential::builder().password("secret".to_string()).build();
    assert!(AuthMechanism::MongoDbX509.validate_credential(&with_password).is_err());

    let api = ServerApi::builder().version(ServerApiVersion::V1).strict(false).build();
    assert_eq!(api.version, ServerApiVersion::V1);
    assert_eq!(api.strict, Some(false));

    options.driver_info = Some(
        DriverInfo::builder()
            .name("compat")
            .version("1.0".to_string())
            .build(),
    );
    let client = Client::with_options(options)?;
    client.database("admin").run_command(doc! { "ping": 1 }).run()?;
    Ok(())
}
