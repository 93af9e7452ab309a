//! A real SecantusDB server per test (or one shared per test binary).
//!
//! The server binary is found through `$SECANTUSD`, then
//! `<crate>/.venv/bin/secantusd-py` (what `.ci/run` installs), then
//! `secantusd-py` on `PATH`. It listens on a loopback port it picks itself with
//! `--storage-path :memory: --enable-test-commands`; startup takes about
//! 0.3 s, so dedicated servers are cheap, and [`TestServer::shared`] saves even
//! that for tests that only read and write their own collections.
//!
//! The server runs under a small `sh` watchdog that holds our end of a pipe:
//! when the test process goes away (even by `SIGKILL` or `abort`), the pipe
//! closes and the watchdog kills the server, so no server outlives its tests.
//! That matters for the shared server, which lives in a static and is never
//! dropped.
//!
//! Each server's stdout and stderr go to
//! `target/test-servers/secantusd-<pid>-<n>.log`; the file is deleted
//! when the server is dropped normally and kept (its path printed) when the
//! test panicked, so that directory holds only logs worth reading.

use std::fs::{self, OpenOptions};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use super::raw::{is_ok, RawConnection};

/// How long a server may take to answer its first hello.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);

/// Kills the server (argument list after `--`) when stdin reaches EOF, and
/// exits with the server's status when the server exits on its own.
/// The first argument names a file that receives the server's pid, which
/// [`TestServer`] needs to tell its own server's listener from another's.
const WATCHDOG: &str = r#"exec 3<&0
pid_file=$1
shift
"$@" </dev/null 3<&- &
server=$!
echo "$server" > "$pid_file"
{ read -r _ignored <&3; kill -9 "$server" 2>/dev/null; } &
watcher=$!
wait "$server"
status=$?
kill "$watcher" 2>/dev/null
exit "$status""#;

/// Options for starting a [`TestServer`].
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    /// Start with `--standalone` (no replica-set fields in hello).
    pub standalone: bool,
    /// Extra command-line arguments, e.g. `["--auth"]`.
    pub extra_args: Vec<String>,
}

/// A running SecantusDB process, stopped on drop.
#[derive(Debug)]
pub struct TestServer {
    options: ServerOptions,
    port: u16,
    log_path: PathBuf,
    /// The server's TMPDIR, where `:memory:` storage puts its files; a
    /// SIGKILLed server cannot clean it up, so we do.
    scratch_dir: PathBuf,
    child: Option<Child>,
    /// Our end of the watchdog's pipe; dropping it kills the server.
    lifeline: Option<ChildStdin>,
}

/// Where the server binary is, or a panic that says how to get it.
pub fn server_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SECANTUSD").filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        assert!(
            path.is_file(),
            "SECANTUSD points at {}, which does not exist; run `bash .ci/run` once or fix the variable",
            path.display()
        );
        return path;
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/secantusd-py");
    if venv.is_file() {
        return venv;
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("secantusd-py");
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!(
        "SecantusDB (secantusd-py) not found: set $SECANTUSD, or run `bash .ci/run` once \
         (it installs SecantusDB==0.7.0b3 into {}/.venv)",
        env!("CARGO_MANIFEST_DIR")
    );
}

fn log_dir() -> PathBuf {
    static SWEPT: OnceLock<()> = OnceLock::new();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/test-servers");
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    SWEPT.get_or_init(|| sweep_scratch_dirs(&dir));
    dir
}

/// Removes scratch directories left by test processes that are gone (the
/// shared server is never dropped, so its directory outlives its process).
fn sweep_scratch_dirs(dir: &Path) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // tmp-<pid>-<n>
        let owner = name
            .strip_prefix("tmp-")
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok());
        if let Some(pid) = owner {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
    }
}

/// A port that was free a moment ago (the OS picks it for a port-0 bind):
/// for a test that needs an address nothing listens on. Servers pick their
/// own port ([`TestServer::with_options`]).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("cannot bind a loopback port")
}

/// Whether the process `pid` holds the socket listening on
/// `127.0.0.1:<port>`, read from `/proc` (Linux), or `None` where `/proc`
/// cannot tell.
///
/// Another test process (or another test of this one) may have started its
/// server on the same port a moment earlier; our own server then fails to
/// bind, but until it exits, a hello on the port is answered by the other
/// one, and two tests sharing a server see each other's fail points.
fn listens_on(pid: u32, port: u16) -> Option<bool> {
    let table = fs::read_to_string("/proc/net/tcp").ok()?;
    let local = format!("0100007F:{port:04X}");
    const LISTEN: &str = "0A";
    let inode = table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&local.as_str()) && fields.get(3) == Some(&LISTEN))
            .then(|| fields.get(9).map(|inode| format!("socket:[{inode}]")))
            .flatten()
    });
    let Some(inode) = inode else {
        return Some(false);
    };
    let Ok(descriptors) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        // Gone already (it could not bind), or not ours to read.
        return Some(false);
    };
    Some(descriptors.flatten().any(|entry| {
        fs::read_link(entry.path()).is_ok_and(|target| target.as_os_str() == inode.as_str())
    }))
}

/// The port a server started with `--port 0` says it listens on
/// ("secantus listening on 127.0.0.1:PORT"), once it has said so.
fn listening_port(log: &Path) -> Option<u16> {
    const SAID: &str = "listening on 127.0.0.1:";
    let text = fs::read_to_string(log).ok()?;
    let line = text.lines().rev().find(|line| line.contains(SAID))?;
    let after = &line[line.find(SAID)? + SAID.len()..];
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn tail(path: &Path) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

impl TestServer {
    /// Starts a server advertising itself as a one-member replica set
    /// (`setName: "secantus"`).
    pub fn start() -> TestServer {
        Self::with_options(ServerOptions::default())
    }

    /// Starts a server with `--standalone` (a plain standalone hello).
    pub fn start_standalone() -> TestServer {
        Self::with_options(ServerOptions {
            standalone: true,
            ..ServerOptions::default()
        })
    }

    /// Starts a server with the given options on a port the server picks
    /// itself (`--port 0`, read back from its log), so that no other test or
    /// process can be handed the same port between our choosing it and the
    /// server binding it; tries again if a start fails.
    pub fn with_options(options: ServerOptions) -> TestServer {
        let mut last_error = String::new();
        for _ in 0..5 {
            match Self::start_on(0, options.clone()) {
                Ok(server) => return server,
                Err(e) => last_error = e,
            }
        }
        panic!("SecantusDB did not start after 5 attempts: {last_error}");
    }

    /// Starts a server on `port` (0: a port it picks); an error when it
    /// cannot listen there (another process holds the port) or does not
    /// answer in time.
    pub fn start_on(port: u16, options: ServerOptions) -> Result<TestServer, String> {
        let mut server = TestServer {
            options,
            port,
            log_path: PathBuf::new(),
            scratch_dir: PathBuf::new(),
            child: None,
            lifeline: None,
        };
        server.spawn_and_wait()?;
        Ok(server)
    }

    /// One replica-set-mode server per test binary, started on first use.
    ///
    /// Tests that use it must not kill, restart or reconfigure it (no
    /// fail points that outlive the test, no `--auth`), and should use their
    /// own database or collection names so parallel tests do not collide.
    pub fn shared() -> &'static TestServer {
        static SHARED: OnceLock<TestServer> = OnceLock::new();
        SHARED.get_or_init(TestServer::start)
    }

    /// One `--standalone` server per test binary; same rules as [`TestServer::shared`].
    pub fn shared_standalone() -> &'static TestServer {
        static SHARED: OnceLock<TestServer> = OnceLock::new();
        SHARED.get_or_init(TestServer::start_standalone)
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        static STARTS: AtomicUsize = AtomicUsize::new(0);
        let binary = server_binary();
        if self.log_path.as_os_str().is_empty() {
            let stem = format!(
                "{}-{}",
                std::process::id(),
                STARTS.fetch_add(1, Ordering::Relaxed)
            );
            let dir = log_dir();
            self.log_path = dir.join(format!("secantusd-{stem}.log"));
            self.scratch_dir = dir.join(format!("tmp-{stem}"));
        }
        fs::create_dir_all(&self.scratch_dir)
            .map_err(|e| format!("cannot create {}: {e}", self.scratch_dir.display()))?;
        // A restart must not read the pid of the server it replaced.
        let _ = fs::remove_file(self.pid_file());
        // Appending keeps the log of the run before a restart.
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| format!("cannot open {}: {e}", self.log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot clone log file handle: {e}"))?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(WATCHDOG)
            .arg("secantusd-watchdog")
            .arg(self.pid_file())
            .arg(&binary)
            .args(["--host", "127.0.0.1", "--port"])
            .arg(self.port.to_string())
            .args(["--storage-path", ":memory:", "--enable-test-commands"]);
        if self.options.standalone {
            command.arg("--standalone");
        }
        command
            .args(&self.options.extra_args)
            .env("TMPDIR", &self.scratch_dir)
            .stdin(Stdio::piped())
            .stdout(log)
            .stderr(log_err);
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot run sh to start {}: {e}", binary.display()))?;
        self.lifeline = child.stdin.take();
        self.child = Some(child);

        let started = Instant::now();
        loop {
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                self.child = None;
                self.lifeline = None;
                return Err(format!(
                    "server on port {} exited with {status} during startup; log {}:\n{}",
                    self.port,
                    self.log_path.display(),
                    tail(&self.log_path)
                ));
            }
            if self.port == 0 {
                self.port = listening_port(&self.log_path).unwrap_or(0);
            }
            if self.port != 0 && self.answers_hello() && self.own_server_listens() {
                return Ok(());
            }
            if started.elapsed() > STARTUP_TIMEOUT {
                self.stop();
                return Err(format!(
                    "server on port {} did not answer hello within {STARTUP_TIMEOUT:?}; log {}:\n{}",
                    self.port,
                    self.log_path.display(),
                    tail(&self.log_path)
                ));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    fn pid_file(&self) -> PathBuf {
        self.scratch_dir.join("server.pid")
    }

    /// Whether the listener on our port is our own server's. Where `/proc`
    /// cannot tell, a server still running after the port answered is taken
    /// as ours.
    fn own_server_listens(&mut self) -> bool {
        let running = self
            .child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)));
        let pid = fs::read_to_string(self.pid_file())
            .ok()
            .and_then(|text| text.trim().parse::<u32>().ok());
        match pid {
            Some(pid) => running && listens_on(pid, self.port).unwrap_or(true),
            None => false,
        }
    }

    fn answers_hello(&self) -> bool {
        if self
            .options
            .extra_args
            .iter()
            .any(|a| a == "--tls-cert-file")
        {
            // A TLS server does not answer a plain hello; a listening port will do.
            return TcpStream::connect_timeout(
                &self.address().parse().expect("a socket address"),
                Duration::from_millis(500),
            )
            .is_ok();
        }
        let Ok(mut conn) =
            RawConnection::connect_timeout(&self.address(), Duration::from_millis(500))
        else {
            return false;
        };
        conn.legacy_hello().map(|r| is_ok(&r)).unwrap_or(false)
    }

    fn stop(&mut self) {
        // Closing the pipe makes the watchdog SIGKILL the server and exit.
        self.lifeline = None;
        if let Some(mut child) = self.child.take() {
            if child.wait().is_err() {
                let _ = child.kill();
            }
        }
        if !self.scratch_dir.as_os_str().is_empty() {
            let _ = fs::remove_dir_all(&self.scratch_dir);
        }
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `127.0.0.1:<port>`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A connection string for this server: with `directConnection=true` in
    /// replica-set mode (its hosts list names only itself, so discovery would
    /// work too, but tests usually mean this one server), plain for standalone.
    pub fn uri(&self) -> String {
        if self.options.standalone {
            format!("mongodb://{}/", self.address())
        } else {
            format!("mongodb://{}/?directConnection=true", self.address())
        }
    }

    /// Whether the server was started with `--standalone`.
    pub fn is_standalone(&self) -> bool {
        self.options.standalone
    }

    /// The file that receives the server's stdout and stderr.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Whether the server process is running (false after [`TestServer::kill`]).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server with SIGKILL and waits for it to exit; data is lost
    /// (`:memory:` storage). Connections to it see a reset or EOF.
    pub fn kill(&mut self) {
        self.stop();
    }

    /// Kills the server if it runs and starts a fresh one on the same port,
    /// returning once it answers hello.
    pub fn restart(&mut self) {
        self.stop();
        // The old listener may linger for a moment; retry the same port.
        let mut last_error = String::new();
        for _ in 0..10 {
            match self.spawn_and_wait() {
                Ok(()) => return,
                Err(e) => last_error = e,
            }
            thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "SecantusDB did not restart on port {}: {last_error}",
            self.port
        );
    }

    /// Connects a raw (driver-less) connection to this server.
    pub fn raw_connection(&self) -> RawConnection {
        RawConnection::connect(&self.address()).unwrap_or_else(|e| {
            panic!(
                "cannot connect to SecantusDB at {} ({e}); log {}",
                self.address(),
                self.log_path.display()
            )
        })
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
        // Keep the log only when the test failed, so target/test-servers
        // holds exactly the logs worth reading.
        if thread::panicking() {
            eprintln!(
                "SecantusDB on port {} logged to {}",
                self.port,
                self.log_path.display()
            );
        } else {
            let _ = fs::remove_file(&self.log_path);
        }
    }
}

/// Waits until nothing accepts connections on `address` (at most `timeout`).
pub fn wait_until_refused(address: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if TcpStream::connect(address).is_err() {
            return true;
        }
        thread::sleep(Duration::from_millis(20));
    }
    false
}
