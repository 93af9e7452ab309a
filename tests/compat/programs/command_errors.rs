//! Matching a command error (`ErrorKind::Command(CommandError)`), error
//! labels and `Error` as a `std::error::Error`.

use mongodb::bson::doc;
use mongodb::error::{CommandError, Error, ErrorKind, Result, TRANSIENT_TRANSACTION_ERROR};
use mongodb::sync::Client;

pub fn run(uri: &str) -> Result<()> {
    let client = Client::with_uri_str(uri)?;
    let db = client.database("compat_command_errors");

    let error = db.run_command(doc! { "noSuchCommand": 1 }).run().unwrap_err();
    match *error.kind {
        ErrorKind::Command(CommandError { code, ref code_name, .. }) => {
            assert_eq!(code, 59);
            assert_eq!(code_name, "CommandNotFound");
        }
        ref other => panic!("expected a command error, got {other:?}"),
    }
    assert!(!error.contains_label(TRANSIENT_TRANSACTION_ERROR));
    assert!(error.labels().is_empty());

    let boxed: Box<dyn std::error::Error> = Box::new(error.clone());
    assert!(!boxed.to_string().is_empty());

    let made: Error = Error::custom("mine".to_string());
    assert!(matches!(*made.kind, ErrorKind::Custom(_)));
    assert!(made.to_string().contains("mine"));
    Ok(())
}
