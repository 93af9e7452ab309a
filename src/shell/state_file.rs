//! The state file on disk (its contents: [`crate::proto::state_file`]).
//!
//! - **Who may touch it.** The file must be a regular file owned by this
//!   process's user with no permissions for group or others, in a directory
//!   owned by the user that neither group nor others can write. Anything
//!   else is refused when the client is built, with an error naming the
//!   path and what is wrong: a file someone else could read holds keys, and
//!   one someone else could write could feed us entries. Because nobody
//!   else can write the directory, nobody can swap the file or a temporary
//!   between our checks and our use.
//! - **Never slower or wrong.** A missing file is an empty one; a torn,
//!   garbled or foreign one is logged, read as empty and rewritten; a
//!   failed write is logged, and the operation goes on.
//! - **Concurrent writers.** Each write re-reads the file, replaces this
//!   client's entries, writes a new file (mode 0600) under a name of its own
//!   (process id and OS randomness) and renames it over the old one, which
//!   is atomic: a reader sees the old file or the new one, never a mix; the
//!   last writer wins, and a lost entry costs one PBKDF2 later.
//! - **The topology.** Each scan's result is written when it differs
//!   from the file's or that is half a heartbeat old (one write, with
//!   anything else learned since), so that a new process's first scan
//!   checks the last primary first
//!   ([`crate::proto::state_file::RememberedTopology`]).
//! - **Fork.** A child's writes use a temporary name of its own and re-read
//!   the file first. Nothing waits to be written between operations (a
//!   write happens inside the authentication that changed the keys), so a
//!   child inherits no pending write of its parent's.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::{Error, Result};
use crate::proto::address::ServerAddress;
use crate::proto::sdam::TopologyDescription;
use crate::proto::state_file::{
    Binding, HostAddresses, Item, RememberedTopology, SealedScramKeys, SrvAnswer, StateContents,
    MAX_FILE_BYTES,
};
use crate::shell::tls::ChainMemory;

/// The state file a client reads at start and writes when its keys change,
/// it verified a new certificate chain or looked a name up.
#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
    directory: PathBuf,
    /// What this client's entries are bound to (once [`StateFile::bind`]).
    binding: Option<Binding>,
    /// The client's verified chains (TLS clients).
    chains: Option<Arc<ChainMemory>>,
    dns: Mutex<Dns>,
    /// The last topology the file held for this client, or this client
    /// wrote since: what a newly seen one is compared with.
    topology: Mutex<Option<RememberedTopology>>,
}

/// The DNS answers the file held for this client, and those looked up
/// since the last write.
#[derive(Debug, Default)]
struct Dns {
    srv: Option<SrvAnswer>,
    hosts: Vec<HostAddresses>,
    unsaved: Vec<Item>,
}

impl StateFile {
    /// Checks who may touch `path` and its directory, and reads it: an
    /// error when the permissions are wrong, empty contents when the file
    /// is missing or unreadable as a state file.
    pub(crate) fn open(path: &Path) -> Result<(StateFile, StateContents)> {
        let directory = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let file = StateFile {
            path: path.to_path_buf(),
            directory,
            binding: None,
            chains: None,
            dns: Mutex::new(Dns::default()),
            topology: Mutex::new(None),
        };
        file.check_directory()?;
        let contents = file.read()?;
        Ok((file, contents))
    }

    /// Replaces `binding`'s entries with `sealed` (re-reading the file first,
    /// so that other clients' entries stay), atomically. Failures are logged:
    /// a state file never fails an operation.
    pub(crate) fn save(&self, binding: Binding, sealed: &[SealedScramKeys], now_unix: u64) {
        if let Err(error) = self.try_save(binding, sealed, now_unix) {
            log::warn!(target: "mongo_inline::state_file", "not saved: {error}");
        }
    }

    fn try_save(&self, binding: Binding, sealed: &[SealedScramKeys], now_unix: u64) -> Result<()> {
        self.check_directory()?;
        let mut contents = self.read()?;
        // What else was learned first, keys last (where the tampering test
        // finds them).
        self.add_new_items(&mut contents, now_unix);
        contents.replace(binding, sealed, now_unix);
        self.write_atomically(&contents.encode())
    }

    /// Takes from `contents` what it holds for `binding` (the chains into
    /// `chains`, the DNS answers), and binds what this client writes from
    /// now on to `binding`.
    pub(crate) fn bind(
        &mut self,
        contents: &StateContents,
        binding: Binding,
        chains: Option<Arc<ChainMemory>>,
    ) {
        if let Some(memory) = &chains {
            memory.load(contents.verified_chains(binding));
        }
        let dns = Dns {
            srv: contents.srv_answer(binding),
            hosts: contents.host_addresses(binding),
            unsaved: Vec::new(),
        };
        self.binding = Some(binding);
        self.chains = chains;
        self.dns = Mutex::new(dns);
        self.topology = Mutex::new(contents.topology(binding));
    }

    /// The order the remembered topology gives the first scan at
    /// `now_ms` (unix milliseconds): empty when there is none, or it is
    /// older than `heartbeat_frequency`.
    pub(crate) fn first_scan_order(
        &self,
        now_ms: u64,
        heartbeat_frequency: std::time::Duration,
    ) -> Vec<ServerAddress> {
        lock(&self.topology)
            .as_ref()
            .map(|t| t.first_scan_order(now_ms, heartbeat_frequency))
            .unwrap_or_default()
    }

    /// Remembers `description`, just seen at `now_ms`, when it differs
    /// from what the file holds or that is half a heartbeat old (see
    /// [`RememberedTopology::worth_writing_over`]), with anything else
    /// learned since the last write; a failure is logged.
    pub(crate) fn save_topology(
        &self,
        description: &TopologyDescription,
        heartbeat_frequency: std::time::Duration,
        now_ms: u64,
    ) {
        let Some(binding) = self.binding else {
            return;
        };
        let Some(seen) = RememberedTopology::of(description, now_ms) else {
            return;
        };
        let mut remembered = lock(&self.topology);
        if !seen.worth_writing_over(remembered.as_ref(), heartbeat_frequency) {
            return;
        }
        let now_unix = now_ms / 1000;
        let saved = self.check_directory().and_then(|()| {
            let mut contents = self.read()?;
            self.add_new_items(&mut contents, now_unix);
            contents.remember(binding, &[Item::Topology(seen.clone())], now_unix);
            self.write_atomically(&contents.encode())
        });
        match saved {
            Ok(()) => *remembered = Some(seen),
            Err(error) => log::warn!(target: "mongo_inline::state_file", "not saved: {error}"),
        }
    }

    /// The SRV and TXT answers, if the file holds them and they are fresh
    /// at `now_unix`.
    pub(crate) fn fresh_srv(&self, now_unix: u64) -> Option<SrvAnswer> {
        self.dns().srv.as_ref()?.fresh_at(now_unix)
    }

    /// `host`'s addresses, if the file holds them and they are fresh at
    /// `now_unix`.
    pub(crate) fn fresh_host(&self, host: &str, now_unix: u64) -> Option<Vec<IpAddr>> {
        self.dns()
            .hosts
            .iter()
            .find(|h| h.host.eq_ignore_ascii_case(host) && h.fresh_at(now_unix))
            .map(|h| h.ips.clone())
    }

    /// Keeps a DNS answer for the next write.
    pub(crate) fn remember(&self, item: Item) {
        let mut dns = self.dns();
        match &item {
            Item::Srv(answer) => dns.srv = Some(answer.clone()),
            Item::Host(addresses) => {
                dns.hosts
                    .retain(|h| !h.host.eq_ignore_ascii_case(&addresses.host));
                dns.hosts.push(addresses.clone());
            }
            Item::Scram(_) | Item::Chain(_) | Item::Topology(_) => {}
        }
        dns.unsaved.push(item);
    }

    fn dns(&self) -> std::sync::MutexGuard<'_, Dns> {
        lock(&self.dns)
    }

    /// The chains verified and names looked up since the last write.
    fn take_new_items(&self) -> Vec<Item> {
        let mut items: Vec<Item> = self
            .chains
            .as_ref()
            .map(|memory| memory.take_unsaved().into_iter().map(Item::Chain).collect())
            .unwrap_or_default();
        items.append(&mut self.dns().unsaved);
        items
    }

    /// Writes what this client learned since the last write (chains, DNS
    /// answers), if anything (a failure is logged).
    pub(crate) fn save_new_items(&self, now_unix: u64) {
        let Some(binding) = self.binding else {
            return;
        };
        let items = self.take_new_items();
        if items.is_empty() {
            return;
        }
        let saved = self.check_directory().and_then(|()| {
            let mut contents = self.read()?;
            contents.remember(binding, &items, now_unix);
            self.write_atomically(&contents.encode())
        });
        if let Err(error) = saved {
            log::warn!(target: "mongo_inline::state_file", "not saved: {error}");
        }
    }

    fn add_new_items(&self, contents: &mut StateContents, now_unix: u64) {
        if let Some(binding) = self.binding {
            contents.remember(binding, &self.take_new_items(), now_unix);
        }
    }

    fn refuse(&self, what: String) -> Error {
        Error::invalid_argument(format!("state file {}: {what}", self.path.display()))
    }

    fn check_directory(&self) -> Result<()> {
        use std::os::unix::fs::MetadataExt as _;
        let metadata = std::fs::metadata(&self.directory).map_err(|e| {
            self.refuse(format!(
                "its directory {} cannot be read ({e})",
                self.directory.display()
            ))
        })?;
        if !metadata.is_dir() {
            return Err(self.refuse(format!("{} is not a directory", self.directory.display())));
        }
        let uid = current_uid(&self.directory)?;
        if metadata.uid() != uid {
            return Err(self.refuse(format!(
                "its directory {} belongs to another user (uid {}); it must be this user's \
                 (uid {uid})",
                self.directory.display(),
                metadata.uid()
            )));
        }
        if metadata.mode() & 0o022 != 0 {
            return Err(self.refuse(format!(
                "its directory {} is writable by its group or others (mode {:o}); make it \
                 0700 or 0755",
                self.directory.display(),
                metadata.mode() & 0o7777
            )));
        }
        Ok(())
    }

    fn check_file(&self, metadata: &std::fs::Metadata) -> Result<()> {
        use std::os::unix::fs::MetadataExt as _;
        if !metadata.is_file() {
            return Err(self.refuse("it is not a regular file".into()));
        }
        let uid = current_uid(&self.directory)?;
        if metadata.uid() != uid {
            return Err(self.refuse(format!(
                "it belongs to another user (uid {}); it must be this user's (uid {uid})",
                metadata.uid()
            )));
        }
        if metadata.mode() & 0o077 != 0 {
            return Err(self.refuse(format!(
                "its group or others have access (mode {:o}); it must be 0600",
                metadata.mode() & 0o7777
            )));
        }
        Ok(())
    }

    /// The contents: empty when there is no file or it is not a state file
    /// (logged); an error when its permissions are wrong.
    fn read(&self) -> Result<StateContents> {
        let mut file = match std::fs::File::open(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(StateContents::default())
            }
            Err(e) => return Err(self.refuse(format!("it cannot be opened ({e})"))),
        };
        let metadata = file
            .metadata()
            .map_err(|e| self.refuse(format!("it cannot be examined ({e})")))?;
        self.check_file(&metadata)?;
        let mut bytes = Vec::new();
        let limit = MAX_FILE_BYTES as u64 + 1;
        if let Err(e) = Read::by_ref(&mut file).take(limit).read_to_end(&mut bytes) {
            log::warn!(target: "mongo_inline::state_file", "{}: unreadable ({e}); starting cold", self.path.display());
            return Ok(StateContents::default());
        }
        match StateContents::decode(&bytes) {
            Ok(contents) => Ok(contents),
            Err(e) => {
                log::warn!(target: "mongo_inline::state_file", "{}: {e}; starting cold, it will be rewritten", self.path.display());
                Ok(StateContents::default())
            }
        }
    }

    fn write_atomically(&self, bytes: &[u8]) -> Result<()> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "state".into());
        let nonce = crate::shell::rng::client_nonce()?;
        let suffix: String = nonce.bytes()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let temporary = self
            .directory
            .join(format!(".{name}.{}.{suffix}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary)
            .and_then(|mut file| file.write_all(bytes))
            .and_then(|()| std::fs::rename(&temporary, &self.path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&temporary);
            return Err(self.refuse(format!("it cannot be written ({e})")));
        }
        Ok(())
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain data: still usable after a panic elsewhere.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// This process's (effective) user: the owner of `/proc/self` on Linux;
/// elsewhere the owner of a file it creates in `directory`.
fn current_uid(directory: &Path) -> Result<u32> {
    use std::os::unix::fs::MetadataExt as _;
    if let Ok(metadata) = std::fs::metadata("/proc/self") {
        return Ok(metadata.uid());
    }
    let probe = directory.join(format!(".mongo-inline-uid.{}", std::process::id()));
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe)
        .and_then(|file| file.metadata());
    let _ = std::fs::remove_file(&probe);
    created.map(|m| m.uid()).map_err(|e| {
        Error::invalid_argument(format!(
            "state file: cannot tell this process's user in {} ({e})",
            directory.display()
        ))
    })
}

#[cfg(test)]
mod tests;
