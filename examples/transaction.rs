//! A transfer between two accounts in a transaction with
//! `ClientSession::with_transaction`, which retries the whole transaction on
//! `TransientTransactionError` and the commit on
//! `UnknownTransactionCommitResult`. Needs a replica set (SecantusDB without
//! `--standalone` is a one-member set).
//!
//! ```text
//! MONGODB_URI='mongodb://127.0.0.1:27017/?directConnection=true' cargo run --example transaction
//! ```

use mongo_inline::bson::doc;
use mongo_inline::error::{Error, Result};
use mongo_inline::{Client, ClientSession, Collection};
use serde::{Deserialize, Serialize};

#[derive(Debug, Serialize, Deserialize)]
struct Account {
    #[serde(rename = "_id")]
    owner: String,
    balance: i64,
}

/// Moves `amount` from `from` to `to`, refusing to overdraw: the callback's
/// error aborts the transaction, so neither update is applied.
fn transfer(
    accounts: &Collection<Account>,
    session: &mut ClientSession,
    from: &str,
    to: &str,
    amount: i64,
) -> Result<()> {
    session.start_transaction().and_run(|session| {
        let debited = accounts
            .update_one(
                doc! { "_id": from, "balance": { "$gte": amount } },
                doc! { "$inc": { "balance": -amount } },
            )
            .session(&mut *session)
            .run()?;
        if debited.modified_count == 0 {
            return Err(Error::invalid_argument(format!(
                "{from} cannot pay {amount}"
            )));
        }
        accounts
            .update_one(doc! { "_id": to }, doc! { "$inc": { "balance": amount } })
            .session(&mut *session)
            .run()?;
        Ok(())
    })
}

fn balances(accounts: &Collection<Account>) -> Result<Vec<(String, i64)>> {
    accounts
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .run()?
        .map(|a| a.map(|a| (a.owner, a.balance)))
        .collect()
}

fn main() -> Result<()> {
    let uri = std::env::var("MONGODB_URI")
        .unwrap_or_else(|_| "mongodb://127.0.0.1:27017/?directConnection=true".into());
    let client = Client::with_uri_str(&uri)?;
    let accounts = client
        .database("examples")
        .collection::<Account>("accounts");
    accounts.drop().run()?;
    accounts
        .insert_many([
            Account {
                owner: "alice".into(),
                balance: 100,
            },
            Account {
                owner: "bob".into(),
                balance: 20,
            },
        ])
        .run()?;

    let mut session = client.start_session().run()?;
    transfer(&accounts, &mut session, "alice", "bob", 30)?;
    println!("after alice pays bob 30: {:?}", balances(&accounts)?);
    assert_eq!(
        balances(&accounts)?,
        [("alice".into(), 70), ("bob".into(), 50)]
    );

    let refused = transfer(&accounts, &mut session, "bob", "alice", 500).unwrap_err();
    println!("bob pays alice 500: {refused}");
    // Aborted: nothing moved.
    assert_eq!(
        balances(&accounts)?,
        [("alice".into(), 70), ("bob".into(), 50)]
    );
    Ok(())
}
