//! `raw.test`: protocol violations actix-web would refuse to produce,
//! served by hand on a plain TCP listener.
//!
//! - `/http10`: an HTTP/1.0 response with a close-delimited body linking to
//!   `/http10-link`;
//! - `/premature-eof`: Content-Length 100000, 100 bytes, then EOF;
//! - `/bad-chunked`: a chunk size that is not hexadecimal;
//! - `/stalled-headers`: half a header, then silence;
//! - `/big-headers`: a head of about 80 KB in 80 headers (over trawl's
//!   default 64 KiB cap, under the HTTP parser's own limits);
//! - `/endless-headers`: headers that never end (the parser's limit);
//! - anything else (robots.txt included): 404.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The host name of the raw server.
pub const HOST: &str = "raw.test";

/// Paths the hostile root page links to on the raw server.
pub const PATHS: &[&str] = &[
    "/http10",
    "/premature-eof",
    "/bad-chunked",
    "/stalled-headers",
    "/big-headers",
    "/endless-headers",
];

/// Headers of `/big-headers`, of [`BIG_HEADER_BYTES`] each.
pub const BIG_HEADERS: usize = 80;

/// Value length of each header of `/big-headers`.
pub const BIG_HEADER_BYTES: usize = 1000;

/// A running raw server; stops when dropped.
pub struct RawServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RawServer {
    /// Binds a free port on 127.0.0.1 and serves until dropped.
    pub fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(conn) = conn {
                    std::thread::spawn(move || serve(conn));
                }
            }
        });
        Ok(RawServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect(self.addr);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(mut conn: TcpStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
    let path = {
        let mut reader = BufReader::new(&conn);
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() {
            return;
        }
        // Skip the headers.
        let mut header = String::new();
        while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
            header.clear();
        }
        line.split_whitespace().nth(1).unwrap_or("/").to_owned()
    };
    let response: &[u8] = match path.as_str() {
        "/http10" => b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html><body><a href=\"/http10-link\">next</a></body></html>",
        "/premature-eof" => b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n<html><body>only the beginning of a long page ... ... ... ... ...",
        "/bad-chunked" => b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\nnot a chunk\r\n",
        "/big-headers" => {
            let mut head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 0\r\n".to_vec();
            for n in 0..BIG_HEADERS {
                let value = "x".repeat(BIG_HEADER_BYTES);
                head.extend_from_slice(format!("X-Filler-{n}: {value}\r\n").as_bytes());
            }
            head.extend_from_slice(b"\r\n");
            let _ = conn.write_all(&head);
            return;
        }
        "/endless-headers" => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\n");
            let line = format!("X-More: {}\r\n", "y".repeat(1000));
            // Stops when the client hangs up (or after 1 MB).
            for _ in 0..1000 {
                if conn.write_all(line.as_bytes()).is_err() {
                    return;
                }
            }
            return;
        }
        "/stalled-headers" => {
            let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Ty");
            std::thread::sleep(Duration::from_secs(30));
            return;
        }
        _ => b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    };
    let _ = conn.write_all(response);
}
