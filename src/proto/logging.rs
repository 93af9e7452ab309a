//! The logging spec (`source/logging/logging.md`) as values: its
//! components and their `log` targets, its severity levels, the
//! `MONGODB_LOG_*` environment configuration, and the truncation of
//! documents. Nothing here logs: the builders of each component's messages
//! return a [`LogMessage`] and the shell (`shell/logging.rs`) writes it as a
//! `log` record whose key-value pairs are the message's structured fields.

use bson::{Bson, Document};

/// A logging spec component; each is one `log` target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Component {
    /// Command logging (`mongo_inline::command`).
    Command,
    /// SDAM logging (`mongo_inline::topology`).
    Topology,
    /// Server selection logging (`mongo_inline::server_selection`).
    ServerSelection,
    /// Connection logging (`mongo_inline::connection`).
    Connection,
}

/// The `log` target of connection messages (the logging spec's
/// `connection` component).
pub const CONNECTION_LOG_TARGET: &str = "mongo_inline::connection";

impl Component {
    /// Every component, in the spec's order.
    pub const ALL: [Component; 4] = [
        Component::Command,
        Component::Topology,
        Component::ServerSelection,
        Component::Connection,
    ];

    /// The `log` target the component's messages are written under.
    pub fn target(self) -> &'static str {
        match self {
            Component::Command => crate::proto::event::COMMAND_LOG_TARGET,
            Component::Topology => crate::proto::event::TOPOLOGY_LOG_TARGET,
            Component::ServerSelection => crate::proto::select::LOG_TARGET,
            Component::Connection => CONNECTION_LOG_TARGET,
        }
    }

    /// The component of a `log` target, if it is one of the spec's.
    pub fn from_target(target: &str) -> Option<Component> {
        Component::ALL.into_iter().find(|c| c.target() == target)
    }

    /// The environment variable that sets the component's level.
    pub fn env_var(self) -> &'static str {
        match self {
            Component::Command => "MONGODB_LOG_COMMAND",
            Component::Topology => "MONGODB_LOG_TOPOLOGY",
            Component::ServerSelection => "MONGODB_LOG_SERVER_SELECTION",
            Component::Connection => "MONGODB_LOG_CONNECTION",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The spec's default `maxDocumentLength`, in characters.
pub const DEFAULT_MAX_DOCUMENT_LENGTH: usize = 1000;

/// A spec severity name as a `log` level filter, case-insensitively.
/// `log` has no emergency, alert, critical or notice: the first three are
/// written at error (the closest, more severe level, as `log` has none
/// less severe that is still an error), notice at info (the closest less
/// severe).
pub fn parse_level(text: &str) -> Option<log::LevelFilter> {
    let level = match text.to_ascii_lowercase().as_str() {
        "off" => log::LevelFilter::Off,
        "emergency" | "alert" | "critical" | "error" => log::LevelFilter::Error,
        "warn" | "warning" => log::LevelFilter::Warn,
        "notice" | "info" => log::LevelFilter::Info,
        "debug" => log::LevelFilter::Debug,
        "trace" => log::LevelFilter::Trace,
        _ => return None,
    };
    Some(level)
}

/// Where the fallback logger writes (`MONGODB_LOG_PATH`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogDestination {
    /// Standard error: the default, and the fallback for a bad path.
    Stderr,
    /// Standard output.
    Stdout,
    /// A file, appended to.
    File(String),
}

/// The logging configuration the environment gives (the spec's fallback
/// method): a level per component, the document length, the destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSettings {
    levels: [Option<log::LevelFilter>; 4],
    /// Documents in messages are cut to this many characters.
    pub max_document_length: usize,
    /// Where the fallback logger writes.
    pub destination: LogDestination,
}

impl Default for LogSettings {
    fn default() -> Self {
        LogSettings {
            levels: [None; 4],
            max_document_length: DEFAULT_MAX_DOCUMENT_LENGTH,
            destination: LogDestination::Stderr,
        }
    }
}

impl LogSettings {
    /// The settings `var` (an environment look-up) gives. A component's
    /// variable wins over `MONGODB_LOG_ALL`; an invalid value counts as
    /// unset, as the spec requires (no error).
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Self {
        let all = var("MONGODB_LOG_ALL").and_then(|v| parse_level(v.trim()));
        let mut settings = LogSettings::default();
        for component in Component::ALL {
            let own = var(component.env_var()).and_then(|v| parse_level(v.trim()));
            settings.levels[component.index()] = own.or(all);
        }
        if let Some(length) =
            var("MONGODB_LOG_MAX_DOCUMENT_LENGTH").and_then(|v| v.trim().parse::<usize>().ok())
        {
            settings.max_document_length = length;
        }
        settings.destination = match var("MONGODB_LOG_PATH") {
            None => LogDestination::Stderr,
            Some(path) if path.eq_ignore_ascii_case("stdout") => LogDestination::Stdout,
            Some(path) if path.eq_ignore_ascii_case("stderr") || path.is_empty() => {
                LogDestination::Stderr
            }
            Some(path) => LogDestination::File(path),
        };
        settings
    }

    /// Whether any component's level was set: then the environment decides
    /// what is logged; otherwise the application's logger alone does.
    pub fn configured(&self) -> bool {
        self.levels.iter().any(Option::is_some)
    }

    /// The component's level: off when unset.
    pub fn level(&self, component: Component) -> log::LevelFilter {
        self.levels[component.index()].unwrap_or(log::LevelFilter::Off)
    }

    /// The most verbose level of any component.
    pub fn max_level(&self) -> log::LevelFilter {
        Component::ALL
            .into_iter()
            .map(|c| self.level(c))
            .max()
            .unwrap_or(log::LevelFilter::Off)
    }

    /// Whether a `level` message of `component` passes the environment's
    /// levels (always, when the environment sets none).
    pub fn allows(&self, component: Component, level: log::Level) -> bool {
        !self.configured() || level <= self.level(component)
    }
}

/// One log message of a spec component: its level, its structured fields
/// (`message` first, then the spec's names and casing; an absent value is
/// left out, never null) and the spec's unstructured form.
#[derive(Clone, Debug, PartialEq)]
pub struct LogMessage {
    /// The component, and so the `log` target.
    pub component: Component,
    /// The level.
    pub level: log::Level,
    /// The structured fields.
    pub fields: Document,
    /// The unstructured form, the record's text.
    pub text: String,
}

/// `text` cut to `max` characters with "..." after it when longer (the
/// spec's naive truncation; the ellipsis does not count).
pub fn truncate(mut text: String, max: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(max) {
        text.truncate(cut);
        text.push_str("...");
    }
    text
}

/// `document` as relaxed Extended JSON, cut to `max` characters.
pub fn document_text(document: &Document, max: usize) -> String {
    truncate(crate::proto::log_json::relaxed(document), max)
}

/// Adds `serverHost` and, for TCP, `serverPort` (an int32) to `fields`.
pub fn insert_server(fields: &mut Document, address: &crate::proto::address::ServerAddress) {
    fields.insert("serverHost", address.host());
    if let Some(port) = address.port() {
        fields.insert("serverPort", Bson::Int32(i32::from(port)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    #[test]
    fn nothing_is_configured_by_default_and_the_logger_decides() {
        let settings = LogSettings::from_env(env(&[]));
        assert!(!settings.configured());
        assert!(settings.allows(Component::Command, log::Level::Trace));
        assert_eq!(settings.max_document_length, 1000);
        assert_eq!(settings.destination, LogDestination::Stderr);
    }

    #[test]
    fn a_component_variable_wins_over_all_and_bad_values_count_as_unset() {
        let settings = LogSettings::from_env(env(&[
            ("MONGODB_LOG_ALL", "info"),
            ("MONGODB_LOG_COMMAND", "DEBUG"),
            ("MONGODB_LOG_TOPOLOGY", "loud"),
            ("MONGODB_LOG_CONNECTION", "off"),
            ("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "-5"),
        ]));
        assert_eq!(settings.level(Component::Command), log::LevelFilter::Debug);
        // An invalid value is as if unset: MONGODB_LOG_ALL applies.
        assert_eq!(settings.level(Component::Topology), log::LevelFilter::Info);
        assert_eq!(
            settings.level(Component::ServerSelection),
            log::LevelFilter::Info
        );
        assert_eq!(settings.level(Component::Connection), log::LevelFilter::Off);
        assert!(settings.allows(Component::Command, log::Level::Debug));
        assert!(!settings.allows(Component::Topology, log::Level::Debug));
        assert!(!settings.allows(Component::Connection, log::Level::Error));
        assert_eq!(settings.max_document_length, 1000);
        assert_eq!(settings.max_level(), log::LevelFilter::Debug);
    }

    #[test]
    fn only_the_named_component_logs_when_only_it_is_set() {
        let settings = LogSettings::from_env(env(&[
            ("MONGODB_LOG_SERVER_SELECTION", "notice"),
            ("MONGODB_LOG_MAX_DOCUMENT_LENGTH", "20"),
            ("MONGODB_LOG_PATH", "StdOut"),
        ]));
        assert!(settings.allows(Component::ServerSelection, log::Level::Info));
        assert!(!settings.allows(Component::ServerSelection, log::Level::Debug));
        assert!(!settings.allows(Component::Command, log::Level::Error));
        assert_eq!(settings.max_document_length, 20);
        assert_eq!(settings.destination, LogDestination::Stdout);
        let file = LogSettings::from_env(env(&[("MONGODB_LOG_PATH", "/tmp/x.log")]));
        assert_eq!(file.destination, LogDestination::File("/tmp/x.log".into()));
    }

    #[test]
    fn truncation_is_naive_counts_characters_and_appends_an_ellipsis() {
        assert_eq!(truncate("abcdef".into(), 6), "abcdef");
        assert_eq!(truncate("abcdef".into(), 4), "abcd...");
        // Never mid code point.
        assert_eq!(truncate("ééé".into(), 2), "éé...");
        let document = bson::doc! { "a": "x".repeat(50) };
        let text = document_text(&document, 10);
        assert_eq!(text, "{\"a\":\"xxxx...");
    }

    #[test]
    fn every_component_has_its_own_target_and_variable() {
        for component in Component::ALL {
            assert_eq!(Component::from_target(component.target()), Some(component));
        }
        assert_eq!(parse_level("Warn"), Some(log::LevelFilter::Warn));
        assert_eq!(parse_level("verbose"), None);
    }
}
