//! `c_function!`: writes an `mi_*` function's `extern "C"` shell from a
//! list of its arguments by kind, so that each function states only what
//! differs (its arguments and its body) and every one checks its pointers
//! and catches panics the same way.
//!
//! ```text
//! c_function! {
//!     /// docs, with a `# Safety` section
//!     fn mi_replace_one(
//!         t: target,                          // client, session, db, coll
//!         filter: document filter_len,        // BSON: pointer and length
//!         options: options options_len,       // NULL, or an options document
//!         result: mut MiBuffer,               // a handle or output pointer, not NULL
//!     ) { ...body returning Result<(), Failure>... }
//! }
//! ```
//!
//! Kinds: `target` (a collection: `client, session, db, coll`),
//! `db_target` (`client, session, db`), `client_target` (`client,
//! session`), `str` (a NUL-terminated string), `document LEN`, `documents
//! LENGTHS COUNT` (parallel arrays), `options LEN`, `mut TYPE` (a non-NULL
//! pointer to `TYPE`, named in the error when NULL) and `raw TYPE` (passed
//! through unchecked, for the body to check). Each argument is checked in
//! order, and the first bad one is the error, named as its parameter.

/// See the module documentation.
macro_rules! c_function {
    (
        $(#[$meta:meta])*
        fn $name:ident($($args:tt)*) $body:block
    ) => {
        c_function!(@arg [$(#[$meta])*] $name [] [] [$($args)*] $body);
    };

    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$t:ident: target $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name
            [$($p)*
                client: *mut $crate::capi::MiClient,
                session: *mut $crate::capi::MiSession,
                db: *const ::std::ffi::c_char,
                coll: *const ::std::ffi::c_char,
            ]
            [$($l)*
                // SAFETY: valid or NULL by the function's contract.
                let $t = unsafe { $crate::capi::target(client, session, db, coll) }?;
            ]
            [$($($rest)*)?] $body);
    };
    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$t:ident: db_target $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name
            [$($p)*
                client: *mut $crate::capi::MiClient,
                session: *mut $crate::capi::MiSession,
                db: *const ::std::ffi::c_char,
            ]
            [$($l)*
                // SAFETY: valid or NULL by the function's contract.
                let $t = unsafe { $crate::capi::db_target(client, session, db) }?;
            ]
            [$($($rest)*)?] $body);
    };
    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$t:ident: client_target $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name
            [$($p)*
                client: *mut $crate::capi::MiClient,
                session: *mut $crate::capi::MiSession,
            ]
            [$($l)*
                // SAFETY: valid or NULL by the function's contract.
                let $t = unsafe { $crate::capi::client_target(client, session) }?;
            ]
            [$($($rest)*)?] $body);
    };
    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$n:ident: str $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name
            [$($p)* $n: *const ::std::ffi::c_char,]
            [$($l)*
                // SAFETY: NULL or NUL-terminated by the function's contract.
                let $n = unsafe { $crate::capi::str_arg($n, stringify!($n)) }?;
            ]
            [$($($rest)*)?] $body);
    };
    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$n:ident: document $len:ident $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name
            [$($p)* $n: *const u8, $len: usize,]
            [$($l)*
                // SAFETY: NULL or `len` readable bytes by the function's contract.
                let $n = unsafe { $crate::capi::document_arg($n, $len, stringify!($n)) }?;
            ]
            [$($($rest)*)?] $body);
    };
    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$n:ident: documents $lens:ident $count:ident $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name
            [$($p)* $n: *const *const u8, $lens: *const usize, $count: usize,]
            [$($l)*
                // SAFETY: NULL or `count` elements each by the function's contract.
                let $n = unsafe {
                    $crate::capi::document_list($n, $lens, $count, stringify!($n))
                }?;
            ]
            [$($($rest)*)?] $body);
    };
    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$n:ident: options $len:ident $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name
            [$($p)* $n: *const u8, $len: usize,]
            [$($l)*
                // SAFETY: NULL or `len` readable bytes by the function's contract.
                let $n = unsafe { $crate::capi::options_arg($n, $len, stringify!($n)) }?;
            ]
            [$($($rest)*)?] $body);
    };
    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$n:ident: mut $ty:ty $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name
            [$($p)* $n: *mut $ty,]
            [$($l)*
                // SAFETY: NULL or valid and used by this call only, by the
                // function's contract.
                let $n = unsafe { $crate::capi::handle($n, stringify!($n)) }?;
            ]
            [$($($rest)*)?] $body);
    };
    (@arg $meta:tt $name:ident [$($p:tt)*] [$($l:tt)*]
        [$n:ident: raw $ty:ty $(, $($rest:tt)*)?] $body:block) => {
        c_function!(@arg $meta $name [$($p)* $n: $ty,] [$($l)*] [$($($rest)*)?] $body);
    };

    (@arg [$($meta:tt)*] $name:ident [$($p:tt)*] [$($l:tt)*] [] $body:block) => {
        $($meta)*
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($p)*) -> *mut $crate::capi::MiError {
            $crate::capi::boundary(|| {
                $($l)*
                $body
            })
        }
    };
}
