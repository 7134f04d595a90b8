//! `kreplay audit --prometheus` under pressure: with more clients than descriptors it serves
//! only as many as leave the audit its own (it neither spins a core nor dies of `EMFILE`),
//! keeps serving once the clients leave, and stops cleanly on Ctrl-C.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kreplay_tests::{kreplay_bin, make_sim, require_root, sim_dir};

/// CPU seconds (user + system) process `pid` has used.
fn cpu_s(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn get_metrics(port: u16) -> Result<String, std::io::Error> {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")?;
    let mut out = String::new();
    s.read_to_string(&mut out)?;
    Ok(out)
}

/// Kills and reaps the audit when the test ends, failed or not: a live audit's system-wide
/// probes would slow every later test's calls.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The audit's descriptor limit (`kreplay_cli::audit::server::MAX_CONNECTIONS` is 64).
const LIMIT: usize = 176;

/// Descriptors process `pid` has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

#[test]
fn with_more_clients_than_descriptors_the_audit_lives_waits_and_serves_again() {
    require_root!();
    make_sim(&[]);
    let d = sim_dir();
    let libs = ["libamdhip64.so.6", "libhsa-runtime64.so.1"]
        .map(|l| format!("--lib {}", d.join(l).display()))
        .join(" ");
    // The audit's own descriptors (BPF maps, about 50 probe links, the listener) take about
    // 150: fewer than the 64 connections it may serve at once are left for clients.
    let script = format!(
        "ulimit -n {LIMIT}; exec {} audit --json --interval 1h --prometheus 127.0.0.1:0 {libs}",
        kreplay_bin().display()
    );
    let child = Command::new("sh")
        .args(["-c", &script])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start kreplay audit");
    let mut child = Killed(child);
    let pid = child.0.id();
    let (tx, rx) = mpsc::channel::<(bool, String)>();
    for (is_out, pipe) in [
        (
            true,
            Box::new(child.0.stdout.take().unwrap()) as Box<dyn Read + Send>,
        ),
        (false, Box::new(child.0.stderr.take().unwrap())),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send((is_out, line));
            }
        });
    }
    // The channel closes when kreplay's pipes do.
    drop(tx);
    let wait_for = |want: &dyn Fn(bool, &str) -> bool| -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok((o, l)) if want(o, &l) => return l,
                Ok((_, l)) => eprintln!("[kreplay] {l}"),
                Err(e) => panic!("kreplay audit ended or went quiet: {e}"),
            }
        }
    };
    let running = wait_for(&|o, l| !o && l.starts_with("kreplay: audit running"));
    let port: u16 = running
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|s| s.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("{running}"));

    // More idle connections than descriptors left: those past the cap wait in the listen
    // queue, and then connecting times out.
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let idle: Vec<TcpStream> = (0..400)
        .map_while(|_| TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    assert!(idle.len() > 100, "{} clients connected", idle.len());
    assert!(
        open_fds(pid) < LIMIT - 16,
        "{} descriptors open with {} clients: none left for the audit",
        open_fds(pid),
        idle.len()
    );
    let (t0, c0) = (Instant::now(), cpu_s(pid));
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_s(pid) - c0;
    let wall = t0.elapsed().as_secs_f64();
    assert!(
        used < 0.25 * wall,
        "kreplay audit used {used:.2} s of CPU in {wall:.2} s while out of descriptors"
    );
    drop(idle);
    // Descriptors free again: the endpoint answers (the idle ones it held time out).
    let deadline = Instant::now() + Duration::from_secs(20);
    let answer = loop {
        match get_metrics(port) {
            Ok(a) if a.starts_with("HTTP/1.1 200 OK") => break a,
            other => eprintln!("/metrics: {other:?}"),
        }
        if Instant::now() >= deadline {
            let said: Vec<String> = rx.try_iter().map(|(_, l)| l).collect();
            panic!(
                "no /metrics answer after the idle clients left; kreplay {:?} said {said:?}",
                child.0.try_wait()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(answer.contains("kreplay_"), "{answer}");

    // SAFETY: plain signal send to our child.
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    wait_for(&|o, l| o && l.contains("\"kind\":\"final\""));
    let status = child.0.wait().unwrap();
    assert!(status.success(), "{status}");
}
