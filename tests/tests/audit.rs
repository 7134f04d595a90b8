//! `kreplay audit` end to end: real uprobes on the simulated ROCm runtime with its latency
//! knobs (exact counts, exact histogram buckets), the JSON schema of docs/audit-json.md, bad
//! input, and a real Prometheus server scraping `--prometheus` and answering PromQL.
use std::{
    io::{BufRead, BufReader, Read, Write},
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use kreplay_tests::{kreplay_bin, require_root, scratch, sim_dir, workload};
use serde_json::Value;

/// A child process killed (and reaped) when the test ends, pass or fail.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The simulated runtime's libraries, for `--lib` (system-wide attachment before the
/// workload starts).
fn sim_libs() -> Vec<String> {
    let d = sim_dir();
    ["libamdhip64.so.6", "libhsa-runtime64.so.1"]
        .iter()
        .flat_map(|l| ["--lib".to_string(), d.join(l).display().to_string()])
        .collect()
}

/// A running `kreplay audit`: its stdout is collected, stderr lines are forwarded so the
/// test can wait for the "audit running" line.
struct Audit {
    child: Reaped,
    stderr: mpsc::Receiver<String>,
    stdout: std::thread::JoinHandle<String>,
}

impl Audit {
    fn start(args: &[&str]) -> Audit {
        Audit::start_with_line(args).0
    }

    /// Starts `kreplay audit ARGS`; returns it and its "audit running" line once printed.
    fn start_with_line(args: &[&str]) -> (Audit, String) {
        let mut child = Command::new(kreplay_bin())
            .arg("audit")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kreplay audit");
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = BufReader::new(out).read_to_string(&mut s);
            s
        });
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("[kreplay] {line}");
                let _ = tx.send(line);
            }
        });
        let audit = Audit {
            child: Reaped(child),
            stderr: rx,
            stdout,
        };
        let line = audit.wait_line("kreplay: audit running", Duration::from_secs(60));
        (audit, line)
    }

    fn wait_line(&self, prefix: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(l) if l.starts_with(prefix) => return l,
                Ok(_) => {}
                Err(e) => panic!("no '{prefix}' line from kreplay audit: {e}"),
            }
        }
    }

    /// Stops with SIGINT; returns stdout (the final report last) after a clean exit.
    fn stop(mut self) -> String {
        // SAFETY: plain signal send to our child.
        unsafe { libc::kill(self.child.0.id() as i32, libc::SIGINT) };
        self.finish()
    }

    /// Waits (bounded) for kreplay to exit by itself; returns stdout. Detaching every probe
    /// costs the kernel one grace period each, which stretches to minutes on a loaded host: the
    /// bound catches a hang, not a slow exit.
    fn finish(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(300);
        let status = loop {
            if let Some(s) = self.child.0.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "kreplay audit did not stop");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "kreplay audit failed: {status}");
        let handle = std::mem::replace(&mut self.stdout, std::thread::spawn(String::new));
        handle.join().unwrap()
    }
}

/// Parses the JSON lines of `--json` and checks every object against docs/audit-json.md.
fn reports(stdout: &str) -> Vec<Value> {
    let v: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    v.iter().for_each(check_schema);
    v
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort();
    k
}

/// The exact key sets and value types of schema kreplay-audit/1.
fn check_schema(r: &Value) {
    assert_eq!(
        keys(r),
        [
            "elapsed_s",
            "host",
            "kind",
            "omitted_processes",
            "overhead",
            "processes",
            "schema",
            "uncounted",
            "window_s"
        ]
    );
    assert_eq!(r["schema"], "kreplay-audit/1");
    assert!(r["kind"] == "interval" || r["kind"] == "final");
    assert!(r["host"].is_string() && r["elapsed_s"].is_f64() || r["elapsed_s"].is_u64());
    assert!(r["omitted_processes"].is_u64());
    assert_eq!(
        keys(&r["overhead"]),
        [
            "bpf_run_time_ns",
            "intercepted_calls",
            "measured",
            "ns_per_call"
        ]
    );
    assert!(r["overhead"]["measured"].is_boolean());
    assert_eq!(
        keys(&r["uncounted"]),
        ["missing_entry", "starts_full", "stats_full"]
    );
    for p in r["processes"].as_array().unwrap() {
        assert_eq!(
            keys(p),
            [
                "apis",
                "calls",
                "comm",
                "pid",
                "runtime_ns",
                "runtime_share"
            ]
        );
        assert!(p["pid"].is_u64() && p["comm"].is_string() && p["runtime_share"].is_number());
        let mut sum = 0;
        for a in p["apis"].as_array().unwrap() {
            assert_eq!(
                keys(a),
                [
                    "api",
                    "buckets",
                    "calls",
                    "calls_per_s",
                    "layer",
                    "p50_ns",
                    "p90_ns",
                    "p99_ns",
                    "total_ns"
                ]
            );
            let in_buckets: u64 = a["buckets"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| {
                    assert_eq!(keys(b), ["count", "le_ns"]);
                    b["count"].as_u64().unwrap()
                })
                .sum();
            assert_eq!(in_buckets, a["calls"].as_u64().unwrap(), "{a}");
            sum += in_buckets;
        }
        assert_eq!(sum, p["calls"].as_u64().unwrap());
    }
}

/// The final report's entry for `pid`.
fn process(report: &Value, pid: u32) -> &Value {
    report["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == pid)
        .unwrap_or_else(|| panic!("pid {pid} not in {report}"))
}

/// (calls, [(le_ns, count)]) of one API of a process entry; (0, []) when absent.
fn api(p: &Value, name: &str) -> (u64, Vec<(Option<u64>, u64)>) {
    p["apis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["api"] == name)
        .map_or((0, Vec::new()), |a| {
            (
                a["calls"].as_u64().unwrap(),
                a["buckets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|b| (b["le_ns"].as_u64(), b["count"].as_u64().unwrap()))
                    .collect(),
            )
        })
}

#[test]
fn saxpy_counts_and_latency_buckets_are_exact() {
    require_root!();
    let mut args = sim_libs();
    args.extend(["--json", "--interval", "1s"].map(String::from));
    let a = Audit::start(&args.iter().map(String::as_str).collect::<Vec<_>>());
    // One buffer, one launch: the kernel takes 2.8 ms, so the synchronize after it waits more
    // than 2^21 ns (2.10 ms, the margin is for the launch's own time); how much longer
    // depends on scheduling on a loaded host, so its bucket is checked against the latency
    // the report itself gives for that single call. Every copy takes at least 3 ms.
    let mut run = Command::new(workload("saxpy"))
        .args(["1", "1000", "1"])
        .env("KRSIM_KERNEL_LATENCY_US", "2800")
        .env("KRSIM_COPY_LATENCY_US", "3000")
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = run.id();
    assert!(run.wait().unwrap().success());
    let stdout = a.stop();
    let all = reports(&stdout);
    let last = all.last().expect("a final report");
    assert_eq!(last["kind"], "final");
    assert!(all[..all.len() - 1].iter().all(|r| r["kind"] == "interval"));
    // System-wide: other processes using the simulated runtime may show up too.
    let p = process(last, pid);
    assert_eq!(p["comm"], "saxpy");
    assert_eq!(api(p, "hipMalloc").0, 2);
    assert_eq!(api(p, "hipFree").0, 2);
    assert_eq!(api(p, "hipLaunchKernel").0, 1);
    let sync = p["apis"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["api"] == "hipDeviceSynchronize")
        .expect("hipDeviceSynchronize");
    let sync_ns = sync["total_ns"].as_u64().unwrap();
    assert!(sync_ns > 1 << 21, "{sync}");
    // le semantics: the bucket of a latency is the smallest power of two at or above it.
    assert_eq!(
        api(p, "hipDeviceSynchronize"),
        (1, vec![(Some(sync_ns.next_power_of_two()), 1)])
    );
    assert_eq!(sync["p50_ns"].as_u64(), Some(sync_ns.next_power_of_two()));
    let (copies, buckets) = api(p, "hipMemcpy");
    assert_eq!(copies, 3);
    assert!(
        buckets
            .iter()
            .all(|(le, _)| le.is_none_or(|le| le > 1 << 21)),
        "{buckets:?}"
    );
    // The interval reports add up to at most the final one, per API.
    let intervals: u64 = all[..all.len() - 1]
        .iter()
        .filter_map(|r| {
            r["processes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|x| x["pid"] == pid)
        })
        .map(|x| api(x, "hipMalloc").0)
        .sum();
    assert!(intervals <= 2, "{intervals}");
    let o = &last["overhead"];
    assert_eq!(o["measured"], true, "{o}");
    assert!(o["intercepted_calls"].as_u64().unwrap() >= p["calls"].as_u64().unwrap());
    assert!(o["ns_per_call"].as_f64().unwrap() > 0.0);
}

fn spawn_pid_target(n: u64) -> (Reaped, BufReader<std::process::ChildStdout>) {
    let (child, out) = kreplay_tests::spawn_pid_target(n);
    (Reaped(child), out)
}

#[test]
fn pid_mode_counts_the_calls_after_attach_and_ends_with_the_target() {
    require_root!();
    let (mut target, mut target_out) = spawn_pid_target(25);
    let pid = target.0.id();
    let mut a = Audit::start(&["--json", "-p", &pid.to_string(), "--interval", "30s"]);
    target.0.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let mut line = String::new();
    target_out.read_line(&mut line).unwrap();
    assert_eq!(line, "done\n");
    target.0.wait().unwrap();
    // The target's exit ends the audit by itself.
    let stdout = a.finish();
    let all = reports(&stdout);
    assert_eq!(all.len(), 1, "only the final report: {stdout}");
    let p = process(&all[0], pid);
    assert_eq!(p["comm"], "pid_target");
    assert_eq!(api(p, "hipMalloc").0, 25, "the warm-up call is not counted");
    assert_eq!(api(p, "hipFree").0, 25);
    assert_eq!(all[0]["processes"].as_array().unwrap().len(), 1);
}

#[test]
fn bad_input_is_one_clear_line() {
    let bin = kreplay_bin();
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = busy.local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let mut sleeper = Reaped(Command::new("sleep").arg("30").spawn().unwrap());
    let spid = sleeper.0.id().to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["audit", "-p", "999999999"],
            "kreplay: error: no such process: 999999999".into(),
        ),
        (
            vec!["audit", "-p", &spid],
            format!(
                "kreplay: error: process {spid} (sleep) maps no supported GPU runtime library \
                 (looked for libhsa-runtime64.so*, libamdhip64.so*, libcuda.so*, libcudart.so*, \
                 libroctx64.so*)"
            ),
        ),
        (
            vec!["audit", "--duration", "soon"],
            "error: invalid value 'soon' for '--duration <DURATION>': invalid duration 'soon'"
                .into(),
        ),
        (
            vec!["audit", "--prometheus", &addr],
            format!(
                "kreplay: error: --prometheus {addr}: cannot listen: Address already in use (os error 98)"
            ),
        ),
        (
            vec!["audit", "--prometheus", "localhost"],
            "kreplay: error: --prometheus localhost: expected PORT, :PORT, HOST:PORT or [IPV6]:PORT"
                .into(),
        ),
    ];
    for (args, want) in cases {
        let out = Command::new(&bin).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}");
        if want.starts_with("kreplay:") {
            assert_eq!(stderr, format!("{want}\n"), "{args:?}");
        } else {
            assert!(
                stderr.starts_with(&want),
                "{args:?}:\n{stderr}\nwanted: {want}"
            );
        }
    }
    let _ = sleeper.0.kill();
    drop(busy);
}

/// Starts Prometheus on a free port, picking another when the one chosen was taken before
/// Prometheus bound it (other tests bind ephemeral ports too); waits until it is ready.
fn start_prometheus(prometheus: &Path, config: &Path, dir: &Path) -> (Reaped, u16) {
    for _attempt in 0..5 {
        let port = free_port();
        let mut prom = Reaped(
            Command::new(prometheus)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
                .spawn()
                .expect("start prometheus"),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Some(status) = prom.0.try_wait().unwrap() {
                eprintln!("prometheus on port {port} exited ({status}); trying another port");
                break;
            }
            if http_get(port, "/-/ready").is_some_and(|(s, _)| s == "HTTP/1.1 200 OK") {
                return (prom, port);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    panic!(
        "Prometheus did not start (log: {})",
        std::fs::read_to_string(dir.join("prometheus.log")).unwrap_or_default()
    );
}

/// The port in "... metrics at http://127.0.0.1:PORT/metrics" of the audit's running line.
fn metrics_port(running: &str) -> u16 {
    let url = running
        .split("metrics at http://")
        .nth(1)
        .unwrap_or_else(|| panic!("no metrics URL in {running:?}"));
    let hostport = url.split('/').next().unwrap();
    hostport.rsplit(':').next().unwrap().parse().unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET http://127.0.0.1:port/path; (status line, body).
fn http_get(port: u16, path: &str) -> Option<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut resp = String::new();
    s.read_to_string(&mut resp).ok()?;
    let (head, body) = resp.split_once("\r\n\r\n")?;
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((head.lines().next()?.to_string(), body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

fn url_encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The scalar value of an instant PromQL query, if it has exactly one sample.
fn promql(port: u16, query: &str) -> Option<f64> {
    let (_, body) = http_get(port, &format!("/api/v1/query?query={}", url_encode(query)))?;
    let v: Value = serde_json::from_str(&body).ok()?;
    let result = v["data"]["result"].as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn a_real_prometheus_scrapes_the_audit_and_promql_returns_the_counts() {
    require_root!();
    let prometheus = PathBuf::from("/usr/bin/prometheus");
    assert!(
        prometheus.exists(),
        "the Debian package `prometheus` is needed (cargo xtask setup installs it)"
    );
    // kreplay binds port 0 and says which port it got: no window in which another test can
    // take a port picked in advance.
    let mut args = sim_libs();
    args.extend(["--prometheus".to_string(), "127.0.0.1:0".to_string()]);
    let (a, running) = Audit::start_with_line(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let kport = metrics_port(&running);
    let (status, _) = http_get(kport, "/metrics").expect("kreplay serves /metrics");
    assert_eq!(status, "HTTP/1.1 200 OK");

    let dir = scratch("audit-prometheus");
    let _ = std::fs::remove_dir_all(dir.join("data"));
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  \
             - job_name: kreplay\n    static_configs:\n      - targets: ['127.0.0.1:{kport}']\n"
        ),
    )
    .unwrap();
    let (_prom, pport) = start_prometheus(&prometheus, &config, &dir);

    // Workload: 2 buffers × 3 iterations = 6 launches and 4 hipMalloc.
    let mut run = Command::new(workload("saxpy"))
        .args(["2", "1000", "3"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = run.id();
    assert!(run.wait().unwrap().success());
    let sel = |api: &str| format!("{{api=\"{api}\",comm=\"saxpy\",pid=\"{pid}\"}}");
    let pid_query = format!("kreplay_audit_calls_total{}", sel("hipLaunchKernel"));
    let deadline = Instant::now() + Duration::from_secs(60);
    let launches = loop {
        if let Some(v) = promql(pport, &format!("sum({pid_query})")) {
            break v;
        }
        assert!(
            Instant::now() < deadline,
            "Prometheus never returned the launch count (log: {})",
            dir.join("prometheus.log").display()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(launches, 6.0);
    let malloc = sel("hipMalloc");
    assert_eq!(
        promql(pport, &format!("kreplay_audit_calls_total{malloc}")),
        Some(4.0)
    );
    assert_eq!(
        promql(
            pport,
            &format!("kreplay_audit_call_duration_seconds_count{malloc}")
        ),
        Some(4.0)
    );
    let inf = format!("{{api=\"hipMalloc\",pid=\"{pid}\",le=\"+Inf\"}}");
    assert_eq!(
        promql(
            pport,
            &format!("kreplay_audit_call_duration_seconds_bucket{inf}")
        ),
        Some(4.0)
    );
    // Fleet-style query: summed over every audited process (others may use the simulated
    // runtime at the same time, so at least this workload's calls).
    let fleet = promql(pport, "sum(kreplay_audit_calls_total{api=\"hipMalloc\"})");
    assert!(fleet.is_some_and(|v| v >= 4.0), "{fleet:?}");
    assert_eq!(promql(pport, "kreplay_audit_dropped_label_pids"), Some(0.0));
    assert!(promql(pport, "kreplay_audit_overhead_seconds_per_call").is_some_and(|v| v > 0.0));
    a.stop();
}
