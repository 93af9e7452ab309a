//! MONGODB-AWS end to end against loopback stand-ins (there is no AWS
//! here): a fake server side that verifies the SigV4 signature with the
//! secret it knows and checks the nonces (`support::cloud::AuthProxy`,
//! forwarding everything else to a real SecantusDB), and loopback HTTP
//! servers for the ECS, EC2 (IMDSv2) and STS endpoints. Each credential
//! source has a test that fails without it; each failure is a clear error
//! that shows no secret.

// Timing real servers is this crate's job; the one-clock rule is the library's.
#![allow(clippy::disallowed_methods)]

mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bson::doc;
use mongo_inline::unversioned::{set_cloud_environment, CloudEnvironment};
use mongo_inline::{Client, ClientOptions, ErrorKind};
use support::cloud::{AuthProxy, AwsIdentity, Canned, HttpStub};
use support::server::TestServer;

const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";
const TOKEN: &str = "SESSIONTOKEN/secret+value==";

fn identity(key: &str, token: Option<&str>) -> AwsIdentity {
    AwsIdentity {
        access_key_id: key.into(),
        secret_access_key: SECRET.into(),
        session_token: token.map(str::to_owned),
    }
}

fn proxy() -> AuthProxy {
    let server = TestServer::shared_standalone();
    AuthProxy::start(
        server.port(),
        vec![
            identity("AKIDLAMBDA", Some(TOKEN)),
            identity("AKIDPERMANENT", None),
            identity("AKIDTEMPORARY", Some(TOKEN)),
        ],
    )
}

fn variables(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn client(uri: &str, environment: CloudEnvironment) -> Client {
    let mut options = ClientOptions::parse(uri).unwrap();
    set_cloud_environment(&mut options, environment);
    Client::with_options(options).unwrap()
}

fn aws_uri(proxy: &AuthProxy) -> String {
    proxy.uri("?authMechanism=MONGODB-AWS&serverSelectionTimeoutMS=5000&timeoutMS=3000")
}

fn ping(client: &Client) -> mongo_inline::Result<()> {
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .run()
        .map(|_| ())
}

/// Nothing secret in the error's Display or Debug.
#[track_caller]
fn assert_clean(error: &mongo_inline::Error) {
    for text in [error.to_string(), format!("{error:?}")] {
        for secret in [SECRET, TOKEN, "WEBIDENTITYJWT"] {
            assert!(!text.contains(secret), "{text}");
        }
    }
}

fn credentials_json(key: &str, token_field: &str, expiration: &str) -> String {
    format!(
        r#"{{"Code":"Success","AccessKeyId":"{key}","SecretAccessKey":"{SECRET}","{token_field}":"{TOKEN}","Expiration":"{expiration}"}}"#
    )
}

#[test]
fn lambda_environment_variables_authenticate() {
    let proxy = proxy();
    let environment = CloudEnvironment {
        variables: Some(variables(&[
            ("AWS_ACCESS_KEY_ID", "AKIDLAMBDA"),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_SESSION_TOKEN", TOKEN),
        ])),
        ..CloudEnvironment::default()
    };
    let client = client(&aws_uri(&proxy), environment);
    let coll = client
        .database("cloud_auth")
        .collection::<bson::Document>("lambda");
    coll.insert_one(doc! { "x": 1 }).run().unwrap();
    assert_eq!(proxy.starts(), ["MONGODB-AWS"]);
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
}

#[test]
fn uri_credentials_and_session_token_authenticate() {
    let proxy = proxy();
    let uri = proxy.uri(&format!(
        "?authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:{}&\
         serverSelectionTimeoutMS=5000",
        TOKEN
            .replace('/', "%2F")
            .replace('+', "%2B")
            .replace('=', "%3D")
    ));
    let uri = uri.replacen(
        "mongodb://",
        &format!("mongodb://AKIDTEMPORARY:{}@", SECRET.replace('/', "%2F")),
        1,
    );
    // The URI's credentials win over the environment's.
    let environment = CloudEnvironment {
        variables: Some(variables(&[
            ("AWS_ACCESS_KEY_ID", "AKIDNOBODY"),
            ("AWS_SECRET_ACCESS_KEY", "nope"),
        ])),
        ..CloudEnvironment::default()
    };
    ping(&client(&uri, environment)).unwrap();
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
}

#[test]
fn a_wrong_secret_is_refused_by_the_server_and_never_shown() {
    let proxy = proxy();
    let environment = CloudEnvironment {
        variables: Some(variables(&[
            ("AWS_ACCESS_KEY_ID", "AKIDPERMANENT"),
            ("AWS_SECRET_ACCESS_KEY", "WRONG/K7MDENG+bPxRfiCYEXAMPLEKEY"),
        ])),
        ..CloudEnvironment::default()
    };
    let e = ping(&client(&aws_uri(&proxy), environment)).unwrap_err();
    assert!(matches!(e.kind(), ErrorKind::Authentication { .. }), "{e}");
    assert!(
        e.to_string().contains("Authentication failed. (code 18)"),
        "{e}"
    );
    assert!(!e.to_string().contains("WRONG/K7MDENG"), "{e}");
    assert_eq!(proxy.failures(), ["signature mismatch"]);
}

#[test]
fn ecs_container_credentials_are_fetched_once_and_cached() {
    let proxy = proxy();
    let stub = HttpStub::start(&[(
        "GET /v2/credentials/task-1",
        Canned::Reply(
            200,
            credentials_json("AKIDTEMPORARY", "Token", "2099-01-01T00:00:00Z"),
        ),
    )]);
    let environment = CloudEnvironment {
        variables: Some(variables(&[(
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "/v2/credentials/task-1",
        )])),
        ecs: Some(stub.base()),
        ..CloudEnvironment::default()
    };
    let uri = format!("{}&appName=ecs_cache", aws_uri(&proxy));
    let client = client(&uri, environment);
    ping(&client).unwrap();
    // The server closes the socket: the next operation authenticates a new
    // one, with the cached credentials.
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand", "mode": { "times": 1 },
            "data": { "failCommands": ["ping"], "closeConnection": true, "appName": "ecs_cache" },
        })
        .run()
        .unwrap();
    let _ = ping(&client);
    ping(&client).unwrap();
    assert_eq!(proxy.successes(), 2, "{:?}", proxy.failures());
    assert_eq!(stub.received().len(), 1, "one fetch for two sockets");
}

#[test]
fn ec2_instance_credentials_through_imdsv2() {
    let proxy = proxy();
    let stub = HttpStub::start(&[
        (
            "PUT /latest/api/token",
            Canned::Reply(200, "IMDSTOKEN".into()),
        ),
        (
            "GET /latest/meta-data/iam/security-credentials/",
            Canned::Reply(200, "instance-role\n".into()),
        ),
        (
            "GET /latest/meta-data/iam/security-credentials/instance-role",
            Canned::Reply(
                200,
                credentials_json("AKIDTEMPORARY", "Token", "2099-01-01T00:00:00Z"),
            ),
        ),
    ]);
    let environment = CloudEnvironment {
        variables: Some(HashMap::new()),
        ec2: Some(stub.base()),
        ..CloudEnvironment::default()
    };
    ping(&client(&aws_uri(&proxy), environment)).unwrap();
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
    let received = stub.received();
    assert_eq!(received.len(), 3);
    assert_eq!(received[0].method, "PUT");
    assert_eq!(
        received[0]
            .headers
            .get("x-aws-ec2-metadata-token-ttl-seconds")
            .map(String::as_str),
        Some("30")
    );
    for request in &received[1..] {
        assert_eq!(
            request
                .headers
                .get("x-aws-ec2-metadata-token")
                .map(String::as_str),
            Some("IMDSTOKEN")
        );
    }
}

#[test]
fn eks_web_identity_is_exchanged_at_sts() {
    let proxy = proxy();
    let token_file = std::env::temp_dir().join(format!("h36-web-identity-{}", std::process::id()));
    std::fs::write(&token_file, "WEBIDENTITYJWT\n").unwrap();
    let sts_reply = format!(
        r#"{{"AssumeRoleWithWebIdentityResponse":{{"AssumeRoleWithWebIdentityResult":{{"Credentials":{}}}}}}}"#,
        credentials_json("AKIDTEMPORARY", "SessionToken", "2099-01-01T00:00:00Z")
    );
    let stub = HttpStub::start(&[("POST /", Canned::Reply(200, sts_reply))]);
    let environment = CloudEnvironment {
        variables: Some(variables(&[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.to_str().unwrap()),
            ("AWS_ROLE_ARN", "arn:aws:iam::123:role/app"),
            ("AWS_ROLE_SESSION_NAME", "handler"),
        ])),
        sts: Some(format!("{}/", stub.base())),
        ..CloudEnvironment::default()
    };
    ping(&client(&aws_uri(&proxy), environment)).unwrap();
    std::fs::remove_file(&token_file).unwrap();
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
    let request = &stub.received()[0];
    assert_eq!(
        request.headers.get("accept").map(String::as_str),
        Some("application/json")
    );
    assert_eq!(
        request.body,
        "Action=AssumeRoleWithWebIdentity&RoleSessionName=handler&\
         RoleArn=arn%3Aaws%3Aiam%3A%3A123%3Arole%2Fapp&WebIdentityToken=WEBIDENTITYJWT&\
         Version=2011-06-15"
    );
}

#[test]
fn expired_credentials_are_refused_before_the_conversation() {
    let proxy = proxy();
    let stub = HttpStub::start(&[(
        "GET /creds",
        Canned::Reply(
            200,
            credentials_json("AKIDTEMPORARY", "Token", "2020-01-01T00:00:00Z"),
        ),
    )]);
    let environment = CloudEnvironment {
        variables: Some(variables(&[(
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "/creds",
        )])),
        ecs: Some(stub.base()),
        ..CloudEnvironment::default()
    };
    let e = ping(&client(&aws_uri(&proxy), environment)).unwrap_err();
    assert!(e.to_string().contains("expire within five minutes"), "{e}");
    assert_clean(&e);
    assert!(
        proxy.starts().is_empty(),
        "no saslStart with expired credentials"
    );
}

#[test]
fn malformed_metadata_json_is_a_clear_error() {
    let proxy = proxy();
    let stub = HttpStub::start(&[(
        "GET /creds",
        Canned::Reply(
            200,
            format!(r#"{{"AccessKeyId":"AKID","SecretAccessKey":"{SECRET}""#),
        ),
    )]);
    let environment = CloudEnvironment {
        variables: Some(variables(&[(
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "/creds",
        )])),
        ecs: Some(stub.base()),
        ..CloudEnvironment::default()
    };
    let e = ping(&client(&aws_uri(&proxy), environment)).unwrap_err();
    assert!(
        e.to_string()
            .contains("the ECS endpoint's reply is not valid JSON"),
        "{e}"
    );
    assert_clean(&e);
}

#[test]
fn a_hanging_metadata_service_is_bounded_by_the_deadline() {
    let proxy = proxy();
    let stub = HttpStub::start(&[("PUT /latest/api/token", Canned::Hang)]);
    let environment = CloudEnvironment {
        variables: Some(HashMap::new()),
        ec2: Some(stub.base()),
        ..CloudEnvironment::default()
    };
    let uri = proxy.uri("?authMechanism=MONGODB-AWS&timeoutMS=700");
    let started = Instant::now();
    let e = ping(&client(&uri, environment)).unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(e.to_string().contains("timed out"), "{e}");
    assert!(e.to_string().contains("EC2 metadata service"), "{e}");
}

#[test]
fn a_server_nonce_that_does_not_extend_ours_is_refused() {
    let proxy = proxy();
    *proxy.forge_nonce.lock().unwrap() = true;
    let environment = CloudEnvironment {
        variables: Some(variables(&[
            ("AWS_ACCESS_KEY_ID", "AKIDPERMANENT"),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
        ])),
        ..CloudEnvironment::default()
    };
    let e = ping(&client(&aws_uri(&proxy), environment)).unwrap_err();
    assert!(
        e.to_string()
            .contains("nonce does not start with the client's"),
        "{e}"
    );
    assert_clean(&e);
    assert_eq!(proxy.successes(), 0);
}
