//! Code shared by the integration tests and spec runners.
//!
//! Each test crate includes it with `mod support;` and uses what it needs.
#![allow(dead_code)]

pub mod cloud;
pub mod delay_proxy;
pub mod dns;
pub mod events;
pub mod heap;
pub mod peers;
pub mod raw;
pub mod secrets;
pub mod server;
pub mod sim;
pub mod spec;
pub mod tls;
pub mod tls_terminator;
