//! A real Prometheus (Debian's `prometheus`) scraping `kreplay audit`'s `/metrics` on loopback
//! every second, with its own storage in a scratch directory, and queries of its HTTP API.
use std::{
    io::{Read, Write},
    net::{SocketAddr, TcpListener, TcpStream},
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};

/// A free loopback port (bound, then released for the caller to use).
pub fn free_port() -> Result<u16> {
    let l = TcpListener::bind("127.0.0.1:0").context("binding a loopback port")?;
    Ok(l.local_addr()?.port())
}

/// The scrape configuration: one job, `target` every second.
pub fn config(target: SocketAddr) -> String {
    format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         scrape_configs:\n  - job_name: kreplay-audit\n    static_configs:\n      \
         - targets: ['{target}']\n"
    )
}

/// A running Prometheus, killed and reaped when dropped.
pub struct Prometheus {
    child: Child,
    /// Its web address (loopback).
    pub addr: SocketAddr,
}

impl Prometheus {
    /// Starts Prometheus in `dir` scraping `target`, and waits until its API answers.
    pub fn start(dir: &Path, target: SocketAddr) -> Result<Self> {
        // A fresh store: an earlier run's samples must not count.
        let _ = std::fs::remove_dir_all(dir.join("data"));
        std::fs::create_dir_all(dir)?;
        let cfg = dir.join("prometheus.yml");
        std::fs::write(&cfg, config(target))?;
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting prometheus")?;
        let p = Prometheus { child, addr };
        let t0 = Instant::now();
        while http_get(p.addr, "/-/ready").is_err() {
            if t0.elapsed() > Duration::from_secs(60) {
                bail!("prometheus did not become ready in 60 s");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        Ok(p)
    }

    /// The first value of an instant query's result (`None`: empty result).
    pub fn query_value(&self, promql: &str) -> Result<Option<f64>> {
        let body = http_get(
            self.addr,
            &format!("/api/v1/query?query={}", encode(promql)),
        )?;
        let v: serde_json::Value =
            serde_json::from_str(&body).with_context(|| format!("query answer {body:?}"))?;
        if v["status"] != "success" {
            bail!("query {promql:?} failed: {body}");
        }
        Ok(v["data"]["result"]
            .get(0)
            .and_then(|r| r["value"][1].as_str())
            .and_then(|s| s.parse().ok()))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        // SAFETY: kill(2) on our own child's pid, which is not reaped yet (no reuse).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query string value.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// GET `path` from `addr` over HTTP/1.0; the body of a 200 answer.
pub fn http_get(addr: SocketAddr, path: &str) -> Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if !head.starts_with("HTTP/1.1 200") && !head.starts_with("HTTP/1.0 200") {
        bail!("GET {path}: {}", head.lines().next().unwrap_or(""));
    }
    Ok(body.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_are_percent_encoded() {
        assert_eq!(
            encode("count_over_time(up[30m])"),
            "count_over_time%28up%5B30m%5D%29"
        );
    }

    #[test]
    fn config_scrapes_one_loopback_target_every_second() {
        let c = config("127.0.0.1:9464".parse().unwrap());
        assert!(c.contains("scrape_interval: 1s\n"), "{c}");
        assert!(c.contains("- targets: ['127.0.0.1:9464']\n"), "{c}");
    }
}
