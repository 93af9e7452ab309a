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
    let mut options = ClientOptions::parse(uri).run().unwrap();
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

// MONGODB-OIDC: the fake server checks each JWT's signature.

fn oidc_uri(proxy: &AuthProxy, properties: &str, app: &str) -> String {
    proxy.uri(&format!(
        "?authMechanism=MONGODB-OIDC&authMechanismProperties={properties}&\
         serverSelectionTimeoutMS=5000&timeoutMS=3000&appName={app}"
    ))
}

fn token_file(name: &str, contents: &str) -> std::path::PathBuf {
    let path = std::env::temp_dir().join(format!("h36-{name}-{}", std::process::id()));
    std::fs::write(&path, contents).unwrap();
    path
}

/// Makes the server close the client's socket on its next `ping`, so that
/// the operation after it authenticates a new one.
fn drop_socket(client: &Client, app: &str) {
    client
        .database("admin")
        .run_command(doc! {
            "configureFailPoint": "failCommand", "mode": { "times": 1 },
            "data": { "failCommands": ["ping"], "closeConnection": true, "appName": app },
        })
        .run()
        .unwrap();
    assert!(ping(client).is_err());
}

#[test]
fn oidc_environment_test_reads_the_token_file() {
    let proxy = proxy();
    let path = token_file(
        "oidc-test",
        &format!("{}\n", support::cloud::jwt("test-user")),
    );
    let environment = CloudEnvironment {
        variables: Some(variables(&[("OIDC_TOKEN_FILE", path.to_str().unwrap())])),
        ..CloudEnvironment::default()
    };
    let client = client(
        &oidc_uri(&proxy, "ENVIRONMENT:test", "oidc_test"),
        environment,
    );
    let coll = client
        .database("cloud_auth")
        .collection::<bson::Document>("oidc");
    coll.insert_one(doc! { "x": 1 }).run().unwrap();
    std::fs::remove_file(path).unwrap();
    assert_eq!(proxy.starts(), ["MONGODB-OIDC"]);
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
}

fn counting_callback(
    subject: &'static str,
) -> (
    mongo_inline::options::oidc::Callback,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use mongo_inline::options::oidc;
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = calls.clone();
    let callback = oidc::Callback::machine(move |context| {
        assert_eq!(context.version, 1);
        assert!(context.timeout.is_some());
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(oidc::IdpServerResponse::new(support::cloud::jwt(subject)))
    });
    (callback, calls)
}

fn callback_client(
    proxy: &AuthProxy,
    app: &str,
    callback: mongo_inline::options::oidc::Callback,
) -> Client {
    let uri = proxy.uri(&format!(
        "?authMechanism=MONGODB-OIDC&serverSelectionTimeoutMS=5000&timeoutMS=3000&appName={app}"
    ));
    let mut options = ClientOptions::parse(&uri).run().unwrap();
    let mut credential = options.credential().cloned().unwrap_or_default();
    credential.oidc_callback = callback;
    let code = ClientOptions::builder().credential(credential).build();
    options = ClientOptions::parse_with(&uri, code).unwrap();
    set_cloud_environment(&mut options, CloudEnvironment::default());
    Client::with_options(options).unwrap()
}

#[test]
fn oidc_callback_token_is_cached_and_speculated_on_a_new_socket() {
    let proxy = proxy();
    let (callback, calls) = counting_callback("machine");
    let client = callback_client(&proxy, "oidc_cache", callback);
    ping(&client).unwrap();
    drop_socket(&client, "oidc_cache");
    ping(&client).unwrap();
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the cached token is reused"
    );
    assert_eq!(
        proxy.starts(),
        ["MONGODB-OIDC"],
        "the second socket needs no saslStart"
    );
    assert_eq!(
        proxy.speculative(),
        1,
        "the second socket speculated with the cached token"
    );
}

#[test]
fn oidc_reauthenticates_once_on_reauthentication_required() {
    use mongo_inline::options::oidc;
    let proxy = proxy();
    // When each call came: the spec's 100 ms is between calls, whatever
    // else the machine was doing before the second one. (A call is noted
    // a moment before it runs, so the bound allows a few ms of that.)
    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
    let recorder = calls.clone();
    let callback = oidc::Callback::machine(move |_| {
        recorder.lock().unwrap().push(Instant::now());
        Ok(oidc::IdpServerResponse::new(support::cloud::jwt("machine")))
    });
    let client = callback_client(&proxy, "oidc_reauth", callback);
    let coll = client
        .database("cloud_auth")
        .collection::<bson::Document>("reauth");
    coll.find(doc! {}).run().unwrap().for_each(drop);
    *proxy.reauthenticate_next_find.lock().unwrap() = true;
    coll.find(doc! {}).run().unwrap().for_each(drop);
    assert!(
        !*proxy.reauthenticate_next_find.lock().unwrap(),
        "the 391 was sent"
    );
    let calls = calls.lock().unwrap().clone();
    assert_eq!(calls.len(), 2, "a fresh token for reauthentication");
    assert_eq!(proxy.starts(), ["MONGODB-OIDC", "MONGODB-OIDC"]);
    assert!(
        calls[1] - calls[0] >= Duration::from_millis(90),
        "callbacks 100 ms apart: {:?}",
        calls[1] - calls[0]
    );
}

#[test]
fn oidc_human_flow_is_refused_clearly() {
    use mongo_inline::options::oidc;
    let proxy = proxy();
    let callback = oidc::Callback::human(|_| Ok(oidc::IdpServerResponse::new("x")));
    let uri = proxy.uri("?authMechanism=MONGODB-OIDC");
    let mut credential = ClientOptions::parse(&uri)
        .run()
        .unwrap()
        .credential()
        .cloned()
        .unwrap();
    credential.oidc_callback = callback;
    let code = ClientOptions::builder().credential(credential).build();
    let e = ClientOptions::parse_with(&uri, code)
        .and_then(Client::with_options)
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("human (browser) flow is not supported"),
        "{e}"
    );
}

#[test]
fn oidc_azure_and_gcp_metadata_tokens() {
    let proxy = proxy();
    let azure_reply = format!(
        r#"{{"access_token":"{}","expires_in":"3599"}}"#,
        support::cloud::jwt("azure")
    );
    let stub = HttpStub::start(&[
        (
            "GET /metadata/identity/oauth2/token",
            Canned::Reply(200, azure_reply),
        ),
        (
            "GET /computeMetadata/v1/instance/service-accounts/default/identity",
            Canned::Reply(200, support::cloud::jwt("gcp")),
        ),
    ]);
    let environment = CloudEnvironment {
        variables: Some(HashMap::new()),
        azure: Some(stub.base()),
        gcp: Some(stub.base()),
        ..CloudEnvironment::default()
    };
    let uri = oidc_uri(
        &proxy,
        "ENVIRONMENT:azure,TOKEN_RESOURCE:api%3A%2F%2Fapp",
        "oidc_azure",
    );
    let uri = uri.replacen("mongodb://", "mongodb://client-7@", 1);
    ping(&client(&uri, environment.clone())).unwrap();
    let uri = oidc_uri(
        &proxy,
        "ENVIRONMENT:gcp,TOKEN_RESOURCE:audience-1",
        "oidc_gcp",
    );
    ping(&client(&uri, environment)).unwrap();
    assert_eq!(proxy.successes(), 2, "{:?}", proxy.failures());
    let received = stub.received();
    assert_eq!(
        received[0].target,
        "/metadata/identity/oauth2/token?api-version=2018-02-01&resource=api%3A%2F%2Fapp&client_id=client-7"
    );
    assert_eq!(
        received[0].headers.get("metadata").map(String::as_str),
        Some("true")
    );
    assert_eq!(
        received[1].target,
        "/computeMetadata/v1/instance/service-accounts/default/identity?audience=audience-1"
    );
    assert_eq!(
        received[1]
            .headers
            .get("metadata-flavor")
            .map(String::as_str),
        Some("Google")
    );
}

#[test]
fn oidc_k8s_reads_the_federated_token_file_and_failures_are_clear() {
    let proxy = proxy();
    let path = token_file("k8s", &support::cloud::jwt("k8s"));
    let environment = CloudEnvironment {
        variables: Some(variables(&[(
            "AZURE_FEDERATED_TOKEN_FILE",
            path.to_str().unwrap(),
        )])),
        ..CloudEnvironment::default()
    };
    ping(&client(
        &oidc_uri(&proxy, "ENVIRONMENT:k8s", "oidc_k8s"),
        environment,
    ))
    .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
    // A token the provider did not sign: the server refuses, the token is not shown.
    let path = token_file("k8s-bad", "forged.jwt.value");
    let environment = CloudEnvironment {
        variables: Some(variables(&[(
            "AZURE_FEDERATED_TOKEN_FILE",
            path.to_str().unwrap(),
        )])),
        ..CloudEnvironment::default()
    };
    let e = ping(&client(
        &oidc_uri(&proxy, "ENVIRONMENT:k8s", "oidc_k8s_bad"),
        environment,
    ))
    .unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(e.to_string().contains("MONGODB-OIDC"), "{e}");
    assert!(e.to_string().contains("(code 18)"), "{e}");
    assert!(
        !e.to_string().contains("forged.jwt.value") && !format!("{e:?}").contains("forged.jwt")
    );
}

/// The CLI run as a Lambda handler or a test harness would: credentials
/// only in its environment.
fn cli(uri: &str, environment: &[(&str, &str)]) -> std::process::Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_mongo-inline"));
    command
        .arg(uri)
        .args(["run", "--db", "admin", r#"{"ping": 1}"#]);
    for name in [
        "MONGODB_URI",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "OIDC_TOKEN_FILE",
    ] {
        command.env_remove(name);
    }
    command.envs(environment.iter().copied());
    command.output().unwrap()
}

#[test]
fn the_cli_authenticates_with_both_mechanisms_from_the_environment() {
    let proxy = proxy();
    let output = cli(
        &proxy.uri("?authMechanism=MONGODB-AWS"),
        &[
            ("AWS_ACCESS_KEY_ID", "AKIDLAMBDA"),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_SESSION_TOKEN", TOKEN),
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("\"ok\""));
    let path = token_file("cli-oidc", &support::cloud::jwt("cli"));
    let output = cli(
        &proxy.uri("?authMechanism=MONGODB-OIDC&authMechanismProperties=ENVIRONMENT:test"),
        &[("OIDC_TOKEN_FILE", path.to_str().unwrap())],
    );
    std::fs::remove_file(&path).unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(proxy.starts(), ["MONGODB-AWS", "MONGODB-OIDC"]);
    assert_eq!(proxy.successes(), 2, "{:?}", proxy.failures());
    // Without credentials anywhere, a clear error that shows nothing secret
    // (the EC2 endpoint does not answer here).
    let output = cli(&proxy.uri("?authMechanism=MONGODB-AWS&timeoutMS=300"), &[]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("MONGODB-AWS"), "{stderr}");
}

/// The C ABI's OIDC callback: the token comes from C, through
/// `mi_client_new_with_oidc_callback`.
#[cfg(feature = "capi")]
#[test]
fn the_c_abi_passes_an_oidc_callback() {
    use mongo_inline::capi::*;
    use std::ffi::{c_char, c_void, CString};

    unsafe extern "C" fn token(
        user_data: *mut c_void,
        timeout_ms: i64,
        username: *const c_char,
        out: *mut c_char,
        capacity: usize,
    ) -> i64 {
        assert!(timeout_ms > 0 && username.is_null());
        // SAFETY: the test passes a live String as user data.
        let jwt = unsafe { &*(user_data as *const String) };
        assert!(jwt.len() <= capacity);
        // SAFETY: the driver's buffer holds `capacity` bytes.
        unsafe { std::ptr::copy_nonoverlapping(jwt.as_ptr(), out.cast(), jwt.len()) };
        jwt.len() as i64
    }

    let proxy = proxy();
    let jwt = support::cloud::jwt("c-caller");
    let uri = CString::new(proxy.uri("?authMechanism=MONGODB-OIDC&timeoutMS=3000")).unwrap();
    let mut client = std::ptr::null_mut();
    // SAFETY: valid arguments; `jwt` outlives the client.
    let error = unsafe {
        mi_client_new_with_oidc_callback(
            uri.as_ptr(),
            Some(token),
            &jwt as *const String as *mut c_void,
            &mut client,
        )
    };
    assert!(error.is_null());
    let command = {
        let mut bytes = Vec::new();
        doc! { "ping": 1 }.to_writer(&mut bytes).unwrap();
        bytes
    };
    let db = CString::new("admin").unwrap();
    let mut reply = MiBuffer {
        data: std::ptr::null_mut(),
        len: 0,
    };
    // SAFETY: a live client, valid arguments; the reply is freed once.
    unsafe {
        let error = mi_client_run_command(
            client,
            std::ptr::null_mut(),
            db.as_ptr(),
            command.as_ptr(),
            command.len(),
            &mut reply,
        );
        assert!(error.is_null());
        mi_buffer_free(&mut reply);
        mi_client_free(client);
    }
    assert_eq!(proxy.starts(), ["MONGODB-OIDC"]);
    assert_eq!(proxy.successes(), 1, "{:?}", proxy.failures());
}
