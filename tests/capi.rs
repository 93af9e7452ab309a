//! Keeps `include/mongo_inline.h` in step with `src/capi/`: the header is
//! written by hand (for its ownership notes), so these tests check what a
//! generator would guarantee: the same functions, and the `#[repr(C)]`
//! structs' fields in the same order. (`.ci/capi` also compares the header
//! with the built library's exported symbols and runs the C tests.)

use std::collections::BTreeSet;
use std::path::Path;

fn read(path: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every source file of the C ABI, so that a function in a module added
/// later is not missed.
fn capi_sources() -> String {
    let mut paths: Vec<_> = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src/capi"))
        .expect("src/capi")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "rs"))
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| std::fs::read_to_string(path).expect("a C ABI source"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifier starting at `text`, if any.
fn identifier(text: &str) -> &str {
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    &text[..end]
}

/// Names of the exported functions: the next `fn` after each
/// `#[unsafe(no_mangle)]` attribute or `c_function!` invocation (the macro
/// writes the attribute for the shells it generates).
fn exported_functions(source: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for marker in ["#[unsafe(no_mangle)]", "c_function! {"] {
        for after in source.split(marker).skip(1) {
            let at = after.find("fn ").expect("a function after the marker");
            let name = identifier(&after[at + 3..]);
            // The macro's own definition names a fragment (`$name`), not a function.
            if name.starts_with("mi_") {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// Names of the functions the header declares: `mi_name(` outside comments
/// and outside the callback typedefs.
fn declared_functions(header: &str) -> BTreeSet<String> {
    let code = strip_c_comments(header);
    let mut names = BTreeSet::new();
    for (at, _) in code.match_indices("mi_") {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let name = identifier(&code[at..]);
        if code[at + name.len()..].starts_with('(') {
            names.insert(name.to_string());
        }
    }
    names
}

fn strip_c_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("a closed comment");
        rest = &rest[start + end + 2..];
    }
    out.push_str(rest);
    out
}

/// Field names of `pub struct rust_name { pub a: .., pub b: .. }`.
fn rust_fields(source: &str, rust_name: &str) -> Vec<String> {
    let start = source
        .find(&format!("pub struct {rust_name} {{"))
        .unwrap_or_else(|| panic!("no struct {rust_name}"));
    // Doc comments may hold braces, so the body ends at the first `}` of code.
    let code: String = source[start..]
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let body = &code[..code.find('}').unwrap()];
    body.lines()
        .filter_map(|line| line.trim().strip_prefix("pub "))
        .filter(|line| !line.starts_with("struct"))
        .map(|line| identifier(line).to_string())
        .collect()
}

/// Field names of `typedef struct c_name { type a; type *b; } c_name;`.
fn c_fields(header: &str, c_name: &str) -> Vec<String> {
    let code = strip_c_comments(header);
    let start = code
        .find(&format!("typedef struct {c_name} {{"))
        .unwrap_or_else(|| panic!("no struct {c_name}"));
    let body_start = start + code[start..].find('{').unwrap() + 1;
    let body = &code[body_start..body_start + code[body_start..].find('}').unwrap()];
    body.split(';')
        .map(str::trim)
        .filter(|decl| !decl.is_empty())
        .map(|decl| {
            let last = decl.rsplit([' ', '*']).next().unwrap();
            last.to_string()
        })
        .collect()
}

#[test]
fn the_header_declares_exactly_the_exported_functions() {
    let exported = exported_functions(&capi_sources());
    let declared = declared_functions(&read("include/mongo_inline.h"));
    assert!(exported.len() >= 30, "found only {exported:?}");
    let missing: Vec<_> = exported.difference(&declared).collect();
    let stale: Vec<_> = declared.difference(&exported).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "not declared in the header: {missing:?}; declared but not exported: {stale:?}"
    );
}

#[test]
fn the_header_structs_have_the_rust_fields_in_order() {
    let source = capi_sources();
    let header = read("include/mongo_inline.h");
    for (rust, c) in [
        ("MiError", "mi_error"),
        ("MiBuffer", "mi_buffer"),
        ("MiEvent", "mi_event"),
    ] {
        let rust_fields = rust_fields(&source, rust);
        assert!(!rust_fields.is_empty(), "{rust} has no fields?");
        assert_eq!(rust_fields, c_fields(&header, c), "{rust} vs {c}");
    }
}

#[test]
fn the_header_domains_match_the_rust_enum() {
    let source = read("src/capi/error.rs");
    let header = strip_c_comments(&read("include/mongo_inline.h"));
    let start = source.find("pub enum Domain {").unwrap();
    let body = &source[start..start + source[start..].find('}').unwrap()];
    let values: Vec<i32> = body
        .lines()
        .filter_map(|line| line.split_once(" = "))
        .map(|(_, value)| value.trim_end_matches(',').trim().parse().unwrap())
        .collect();
    assert_eq!(values, (1..=12).collect::<Vec<_>>());
    for (name, value) in [
        ("MI_ERROR_ARGUMENT", 1),
        ("MI_ERROR_NETWORK", 2),
        ("MI_ERROR_COMMAND", 3),
        ("MI_ERROR_WRITE", 4),
        ("MI_ERROR_SERVER_SELECTION", 5),
        ("MI_ERROR_TIMEOUT", 6),
        ("MI_ERROR_PROTOCOL", 7),
        ("MI_ERROR_AUTHENTICATION", 8),
        ("MI_ERROR_TLS", 9),
        ("MI_ERROR_INCOMPATIBLE_SERVER", 10),
        ("MI_ERROR_CLIENT", 11),
        ("MI_ERROR_INTERNAL", 12),
    ] {
        assert!(
            header.contains(&format!("{name} = {value}")),
            "{name} is not {value} in the header"
        );
    }
}
