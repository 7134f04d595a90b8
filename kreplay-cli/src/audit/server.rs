//! A minimal HTTP/1.1 server for `/metrics` on tokio: one request per connection, bounded
//! request size and time, at most [`MAX_CONNECTIONS`] connections at once (fewer when the
//! descriptor limit is low: [`connection_cap`]), and a backoff
//! when `accept` fails (out of file descriptors: `EMFILE`/`ENFILE`) instead of a busy loop.
use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::net::{TcpListener, TcpStream};

/// Largest request head read.
const MAX_REQUEST: usize = 8192;
/// Time a client gets to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once, at most; further ones wait in the listen queue.
pub const MAX_CONNECTIONS: usize = 64;
/// Descriptors kept free for the audit itself (map reads, /proc, new probe links).
const RESERVE_FDS: u64 = 32;

/// How many connections may be served at once: [`MAX_CONNECTIONS`], fewer when the process's
/// descriptor limit leaves less than that beside those open now and [`RESERVE_FDS`] (at
/// least 1). A client never takes a descriptor the audit needs.
pub fn connection_cap() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the valid local it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return MAX_CONNECTIONS;
    }
    let open = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count()) as u64;
    let free = lim.rlim_cur.saturating_sub(open + RESERVE_FDS);
    (free as usize).clamp(1, MAX_CONNECTIONS)
}
/// The first and the longest wait after a failed `accept`.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(1));

/// Errors setting up the endpoint.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address does not parse.
    #[error("--prometheus {0}: expected PORT, :PORT, HOST:PORT or [IPV6]:PORT")]
    BadAddress(String),
    /// bind failed.
    #[error("--prometheus {addr}: cannot listen: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
}

/// Parses `--prometheus`: a bare port or `:PORT` binds loopback (127.0.0.1); any other
/// address only when written out, as an address or as `HOST:PORT` with a name the resolver
/// knows (`localhost:9464`; its first IPv4 address, else its first).
pub fn parse_addr(text: &str) -> Result<SocketAddr, ServeError> {
    let t = text.trim();
    let bad = || ServeError::BadAddress(text.to_string());
    if let Ok(port) = t.trim_start_matches(':').parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = t.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    let all: Vec<SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(t)
        .map_err(|_| bad())?
        .collect();
    all.iter()
        .find(|a| a.is_ipv4())
        .or(all.first())
        .copied()
        .ok_or_else(bad)
}

/// Binds the listener (before the audit starts, so a busy port fails fast).
pub fn bind(addr: SocketAddr) -> Result<std::net::TcpListener, ServeError> {
    let l =
        std::net::TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
    l.set_nonblocking(true)
        .map_err(|source| ServeError::Bind { addr, source })?;
    Ok(l)
}

/// The `/metrics` text being served: the audit replaces it, each scrape takes the current one.
/// Either holds the lock only to swap or copy one pointer, never while the text is built.
#[derive(Clone, Debug, Default)]
pub struct Published(Arc<Mutex<Arc<str>>>);

impl Published {
    /// Starts with `text`.
    pub fn new(text: String) -> Published {
        Published(Arc::new(Mutex::new(text.into())))
    }

    /// Replaces the text (built by the caller, outside the lock).
    pub fn set(&self, text: String) {
        let text: Arc<str> = text.into();
        if let Ok(mut t) = self.0.lock() {
            *t = text;
        }
    }

    /// The current text.
    pub fn get(&self) -> Arc<str> {
        self.0.lock().map(|t| t.clone()).unwrap_or_default()
    }
}

/// Serves `body` at `/metrics`, at most `cap` connections at once ([`connection_cap`]),
/// until the task is dropped.
pub async fn serve(listener: TcpListener, body: Published, cap: usize) {
    let slots = Arc::new(tokio::sync::Semaphore::new(cap.max(1)));
    let mut backoff = BACKOFF.0;
    loop {
        // A slot first: at the cap, connections wait in the kernel's queue, not in ours.
        let Ok(slot) = slots.clone().acquire_owned().await else {
            return;
        };
        let (stream, peer) = match listener.accept().await {
            Ok(c) => {
                backoff = BACKOFF.0;
                c
            }
            Err(e) => {
                // Out of descriptors (EMFILE/ENFILE) or another transient failure: the
                // connection stays queued, so wait instead of failing again at once.
                tracing::debug!(error = %e, ?backoff, "accept failed; waiting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF.1);
                continue;
            }
        };
        let body = body.clone();
        tokio::spawn(async move {
            if let Err(e) = handle(stream, &body).await {
                tracing::debug!(%peer, error = %e, "metrics request failed");
            }
            drop(slot);
        });
    }
}

/// The `/metrics` endpoint on a thread of its own (`kreplay-metrics`, at the trace reader's
/// raised priority when kreplay may set it), with a runtime of its own: nothing the audit's
/// loop does (rescanning `/proc`, attaching probes, reading the kernel maps) delays an answer.
/// Stops, and its thread ends, when dropped.
pub struct Endpoint {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Endpoint {
    /// Starts serving `body` on `listener` ([`bind`]'s), at most `cap` connections at once.
    pub fn start(
        listener: std::net::TcpListener,
        body: Published,
        cap: usize,
    ) -> std::io::Result<Endpoint> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _in_runtime = rt.enter();
            TcpListener::from_std(listener)?
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("kreplay-metrics".into())
            .spawn(move || {
                // A few milliseconds of work a second: with root it asks for the reader
                // thread's priority, so that busy cores delay its answers as little as they can.
                match crate::probes::priority::raise_current_thread() {
                    Ok(nice) => tracing::debug!("metrics thread runs at nice {nice}"),
                    Err(e) => tracing::debug!("metrics thread keeps its priority: {e}"),
                }
                rt.block_on(async {
                    tokio::select! {
                        _ = serve(listener, body, cap) => {}
                        _ = stopped => {}
                    }
                });
            })?;
        Ok(Endpoint {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn handle(mut stream: TcpStream, body: &Published) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let read = tokio::time::timeout(REQUEST_TIMEOUT, async {
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < MAX_REQUEST {
            stream.readable().await?;
            let n = match stream.try_read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        std::io::Result::Ok(())
    })
    .await;
    if !matches!(read, Ok(Ok(()))) {
        return Ok(());
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, text) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            body.get(),
        ),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", Arc::from("try /metrics\n")),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            Arc::from("GET only\n"),
        ),
    };
    let mut resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    )
    .into_bytes();
    if method != "HEAD" {
        resp.extend_from_slice(text.as_bytes());
    }
    write_all(&mut stream, &resp).await
}

/// Writes every byte (tokio's `io-util` extension traits are not enabled in this crate).
async fn write_all(stream: &mut TcpStream, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        stream.writable().await?;
        match stream.try_write(data) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_default_to_loopback() {
        assert_eq!(parse_addr("9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(parse_addr(":9464").unwrap().to_string(), "127.0.0.1:9464");
        assert_eq!(parse_addr("0.0.0.0:80").unwrap().to_string(), "0.0.0.0:80");
        assert_eq!(parse_addr("[::1]:9").unwrap().to_string(), "[::1]:9");
        assert_eq!(
            parse_addr("localhost").unwrap_err().to_string(),
            "--prometheus localhost: expected PORT, :PORT, HOST:PORT or [IPV6]:PORT"
        );
        // A host name with a port resolves (through /etc/hosts: no network).
        let a = parse_addr("localhost:9464").unwrap();
        assert!(a.ip().is_loopback() && a.port() == 9464, "{a}");
        for bad in ["localhost:", ":", "localhost:99999"] {
            assert!(parse_addr(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn serves_the_latest_metrics_and_404_until_dropped() {
        use std::io::{Read, Write};
        let std_l = bind(parse_addr("0").unwrap()).unwrap();
        let addr = std_l.local_addr().unwrap();
        let body = Published::new("m 1\n".to_string());
        let endpoint = Endpoint::start(std_l, body.clone(), 4).unwrap();
        body.set("m 2\n".to_string());
        for (path, want) in [
            (
                "/metrics",
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: 4\r\nConnection: close\r\n\r\nm 2\n",
            ),
            (
                "/",
                "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\ntry /metrics\n",
            ),
        ] {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .unwrap();
            let mut got = String::new();
            s.read_to_string(&mut got).unwrap();
            assert_eq!(got, want);
        }
        let busy = bind(addr).unwrap_err().to_string();
        assert_eq!(
            busy,
            format!("--prometheus {addr}: cannot listen: Address already in use (os error 98)")
        );
        // Its thread runs at the raised priority where kreplay may set it (root).
        let nice = std::fs::read_dir("/proc/self/task").unwrap().find_map(|t| {
            let t = t.unwrap().path();
            let comm = std::fs::read_to_string(t.join("comm")).unwrap();
            let stat = std::fs::read_to_string(t.join("stat")).unwrap();
            // The nice value is the 19th field, the 17th after the command's closing ')'.
            (comm == "kreplay-metrics\n").then(|| {
                let rest = &stat[stat.rfind(')').unwrap() + 2..];
                rest.split_whitespace()
                    .nth(16)
                    .unwrap()
                    .parse::<i32>()
                    .unwrap()
            })
        });
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            assert_eq!(nice, Some(crate::probes::priority::READER_NICE));
        } else {
            assert!(nice.is_some(), "no kreplay-metrics thread");
        }
        // Dropped, the endpoint stops and closes its listener: the port is free again.
        drop(endpoint);
        drop(bind(addr).unwrap());
    }
}
