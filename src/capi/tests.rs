//! The boundary itself, without a server: panics become errors, pointers
//! and BSON are checked, what is handed out is freed. (The C tests in
//! tests/capi/ cover every function against a server.)

use super::*;

/// Takes an error's fields and frees it.
fn take_error(error: *mut MiError) -> Option<(i32, i32, String, Vec<String>)> {
    if error.is_null() {
        return None;
    }
    // SAFETY: a live error just returned by the library.
    let fields = unsafe {
        let e = &*error;
        let labels = (0..e.label_count)
            .map(|i| {
                CStr::from_ptr(*e.labels.add(i))
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        (
            e.domain,
            e.code,
            CStr::from_ptr(e.message).to_string_lossy().into_owned(),
            labels,
        )
    };
    // SAFETY: freed once.
    unsafe { mi_error_free(error) };
    Some(fields)
}

#[test]
fn a_panic_becomes_an_internal_error() {
    let error = boundary(|| panic!("deliberate test panic"));
    let (domain, code, message, labels) = take_error(error).expect("an error");
    assert_eq!(domain, Domain::Internal as i32);
    assert_eq!(code, 0);
    assert!(message.contains("deliberate test panic"), "{message}");
    assert!(labels.is_empty());
    quiet_boundary(|| panic!("swallowed, not unwound"));
}

#[test]
fn labels_and_codes_reach_c() {
    let mut failure = Failure::new(Domain::Command, "with labels");
    failure.code = 91;
    failure.labels = vec!["RetryableWriteError".into(), "NoWritesPerformed".into()];
    let error = failure.into_raw();
    let label = CString::new("NoWritesPerformed").unwrap();
    let other = CString::new("TransientTransactionError").unwrap();
    // SAFETY: a live error and NUL-terminated labels.
    unsafe {
        assert!(mi_error_has_label(error, label.as_ptr()));
        assert!(!mi_error_has_label(error, other.as_ptr()));
        assert!(!mi_error_has_label(error, ptr::null()));
    }
    let (domain, code, _, labels) = take_error(error).unwrap();
    assert_eq!((domain, code), (Domain::Command as i32, 91));
    assert_eq!(labels, ["RetryableWriteError", "NoWritesPerformed"]);
}

#[test]
fn a_driver_error_keeps_its_kind_code_and_labels() {
    let command = crate::error::CommandError {
        base_backoff: None,
        raw_response: None,
        code: 112,
        code_name: "WriteConflict".into(),
        message: "conflict".into(),
        topology_version: None,
        address: None,
    };
    let error = crate::Error::from(command).with_labels(["TransientTransactionError"]);
    let failure = ops::failure(&error);
    assert_eq!(failure.domain, Domain::Command);
    assert_eq!(failure.code, 112);
    assert_eq!(failure.labels, ["TransientTransactionError"]);
    assert!(failure.message.contains("conflict"));
    let failure = ops::failure(&crate::Error::invalid_argument("bad thing"));
    assert_eq!((failure.domain, failure.code), (Domain::Argument, 0));
}

#[test]
fn the_official_kinds_keep_the_domains_c_callers_saw_before() {
    use crate::error::ErrorKind;
    let cases = [
        (
            crate::Error::network_message(None, "reset"),
            Domain::Network,
        ),
        (crate::Error::dns_resolve("no SRV records"), Domain::Network),
        (
            crate::Error::protocol(None, "short frame"),
            Domain::Protocol,
        ),
        (
            ErrorKind::InvalidTlsConfig {
                message: "tlsCAFile".into(),
            }
            .into(),
            Domain::Argument,
        ),
        (crate::Error::transaction("twice"), Domain::Client),
        (ErrorKind::SessionsNotSupported.into(), Domain::Client),
        (ErrorKind::Shutdown.into(), Domain::Client),
        (crate::Error::internal("a rule"), Domain::Internal),
    ];
    for (error, domain) in cases {
        assert_eq!(ops::failure(&error).domain, domain, "{error:?}");
    }
}

#[test]
fn bson_must_be_exactly_one_document() {
    let mut bytes = Vec::new();
    bson::doc! { "a": 1 }.to_writer(&mut bytes).unwrap();
    assert!(parse_document(&bytes, "d").is_ok());
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(parse_document(&longer, "d")
        .unwrap_err()
        .message
        .contains("declares 12 bytes but 13 were given"));
    assert!(parse_document(&bytes[..4], "d").is_err());
    let mut corrupt = bytes.clone();
    corrupt[4] = 0x7f; // an element type that does not exist
    assert!(parse_document(&corrupt, "d").is_err());
    let mut negative = bytes;
    negative[..4].copy_from_slice(&(-1i32).to_le_bytes());
    assert!(parse_document(&negative, "d").is_err());
}

#[test]
fn a_dollar_shaped_sub_document_arrives_as_given() {
    // A filter on a stored `{"$oid": ...}` sub-document (MongoDB 5.0+ allows
    // `$` field names) must query that document, not an ObjectId.
    let given = bson::doc! { "ref": { "$oid": "0123456789abcdef01234567" } };
    let mut bytes = Vec::new();
    given.to_writer(&mut bytes).unwrap();
    let parsed = parse_document(&bytes, "filter").unwrap();
    assert_eq!(parsed, given);
    assert!(parsed.get_document("ref").is_ok());
}

#[test]
fn json_round_trips_through_bson_buffers() {
    let json = CString::new(r#"{"n": {"$numberLong": "7"}, "s": "é"}"#).unwrap();
    let mut buffer = MiBuffer {
        data: ptr::null_mut(),
        len: 0,
    };
    let mut text: *mut c_char = ptr::null_mut();
    // SAFETY: valid string and out-parameters; everything is freed below.
    unsafe {
        assert!(take_error(mi_bson_from_json(json.as_ptr(), &mut buffer)).is_none());
        assert!(take_error(mi_bson_to_json(buffer.data, buffer.len, &mut text)).is_none());
        assert_eq!(CStr::from_ptr(text).to_str().unwrap(), r#"{"n":7,"s":"é"}"#);
        mi_string_free(text);
        mi_buffer_free(&mut buffer);
        assert!(buffer.data.is_null() && buffer.len == 0);
        mi_buffer_free(&mut buffer);
    }
}

#[test]
fn null_arguments_are_named() {
    let mut client: *mut MiClient = ptr::null_mut();
    // SAFETY: NULL is what is under test; `client` is writable.
    let (_, _, message, _) =
        take_error(unsafe { mi_client_new(ptr::null(), &mut client) }).unwrap();
    assert_eq!(message, "argument `uri` is NULL");
    let uri = CString::new("mongodb://127.0.0.1:1/").unwrap();
    // SAFETY: as above.
    let (_, _, message, _) =
        take_error(unsafe { mi_client_new(uri.as_ptr(), ptr::null_mut()) }).unwrap();
    assert_eq!(message, "argument `out` is NULL");
    let mut count = 0u64;
    // SAFETY: `count` is writable; the rest is NULL on purpose.
    let error = unsafe {
        mi_count_documents(
            ptr::null_mut(),
            ptr::null_mut(),
            ptr::null(),
            ptr::null(),
            ptr::null(),
            0,
            ptr::null(),
            0,
            &mut count,
        )
    };
    assert_eq!(take_error(error).unwrap().0, Domain::Argument as i32);
}

#[test]
fn a_client_is_made_without_io_and_freed() {
    let uri = CString::new("mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100").unwrap();
    let mut client: *mut MiClient = ptr::null_mut();
    let (mut tokens, mut has_bucket) = (0.0, false);
    // SAFETY: valid arguments; the client is freed once.
    unsafe {
        assert!(take_error(mi_client_new(uri.as_ptr(), &mut client)).is_none());
        assert!(take_error(mi_client_retry_tokens(client, &mut tokens, &mut has_bucket)).is_none());
        assert!(has_bucket && tokens == 1000.0);
        let (name, version) = (CString::new("odm").unwrap(), CString::new("1.0").unwrap());
        let appended =
            mi_client_append_metadata(client, name.as_ptr(), version.as_ptr(), ptr::null());
        assert!(take_error(appended).is_none());
        let bad = CString::new("a|b").unwrap();
        let refused = mi_client_append_metadata(client, bad.as_ptr(), ptr::null(), ptr::null());
        let refused = take_error(refused).unwrap();
        assert_eq!(refused.0, Domain::Argument as i32, "{}", refused.2);
        assert!(refused.2.contains("must not contain '|'"), "{}", refused.2);
        mi_cursor_close(ptr::null_mut(), 10);
        // Before any operation the first event callback is accepted.
        assert!(take_error(mi_client_set_event_callback(client, None, ptr::null_mut())).is_none());
        mi_client_free(client);
    }
}
