//! A byte-level TCP proxy that holds every server → client chunk for a fixed
//! delay before passing it on, so round trips can be counted through
//! protocols the topology simulator cannot parse (TLS). Each chunk leaves
//! `delay` after it arrived, not `delay` after the previous one left: a
//! burst of chunks (a TLS server flight) costs one delay, as on a real link.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

/// The proxy; it runs until the process exits.
pub struct DelayProxy {
    port: u16,
    delay_us: Arc<AtomicU64>,
}

impl DelayProxy {
    /// Listens on 127.0.0.1 (an ephemeral port) and forwards every accepted
    /// socket to 127.0.0.1:`upstream`.
    pub fn start(upstream: u16) -> DelayProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("the proxy binds");
        let port = listener.local_addr().expect("a local address").port();
        let delay_us = Arc::new(AtomicU64::new(0));
        let delay = delay_us.clone();
        thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                forward(client, server, delay.clone());
            }
        });
        DelayProxy { port, delay_us }
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Holds server → client bytes this long from now on.
    pub fn set_delay(&self, delay: Duration) {
        self.delay_us
            .store(delay.as_micros() as u64, Ordering::SeqCst);
    }
}

fn forward(client: TcpStream, server: TcpStream, delay_us: Arc<AtomicU64>) {
    let (Ok(mut client_read), Ok(mut server_write)) = (client.try_clone(), server.try_clone())
    else {
        return;
    };
    thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut server_write);
        let _ = server_write.shutdown(Shutdown::Write);
    });
    // One thread reads and stamps chunks, another sends each when due.
    let (chunks, due) = mpsc::channel::<(Instant, Vec<u8>)>();
    let mut server_read = server;
    thread::spawn(move || {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(n) = server_read.read(&mut buffer) {
            if n == 0 {
                break;
            }
            let held = Duration::from_micros(delay_us.load(Ordering::SeqCst));
            if chunks
                .send((Instant::now() + held, buffer[..n].to_vec()))
                .is_err()
            {
                break;
            }
        }
    });
    let mut client_write = client;
    thread::spawn(move || {
        for (when, bytes) in due {
            let now = Instant::now();
            if when > now {
                thread::sleep(when - now);
            }
            if client_write.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = client_write.shutdown(Shutdown::Both);
    });
}
