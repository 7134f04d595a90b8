//! A tool process SIGKILLed while it flushes leaves a stream whose every complete chunk
//! reads back: the rows come out gapless from the first, and any torn tail is reported.
//! The test binary re-runs itself as the writer child.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use kreplay_common::stream::{DamageKind, Record, StreamKind, StreamReader};
use kreplay_tool::record::{self, ENV_OUTPUT_DIR};
use support::call;

const CHILD: &str = "KREPLAY_TEST_WRITER_CHILD";

/// The child: records rows 0, 1, 2, ... and flushes every 64 rows until killed.
fn writer_child() -> ! {
    let rec = record::global();
    for i in 0.. {
        rec.record(call(i));
        if i % 64 == 63 {
            record::flush_global().expect("flush");
        }
    }
    unreachable!()
}

#[test]
fn a_killed_writer_leaves_every_complete_chunk_readable() {
    if std::env::var_os(CHILD).is_some() {
        writer_child();
    }
    let dir = std::env::temp_dir().join(format!("kreplay-killed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_writer_leaves_every_complete_chunk_readable",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env(ENV_OUTPUT_DIR, &dir)
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let path = dir.join(StreamKind::Tool.file_name(child.id()));
    // Let it write for a while, then SIGKILL it mid-stream.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::fs::metadata(&path).map_or(0, |m| m.len()) < 2_000_000 {
        assert!(
            std::time::Instant::now() < deadline,
            "child wrote too little"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let mut reader = StreamReader::open(&path).unwrap();
    let mut next = 0u64;
    for rec in reader.by_ref() {
        if let Record::ApiCall(c) = rec {
            assert_eq!(c.ret, next, "rows must be gapless");
            next += 1;
        }
    }
    assert!(next >= 10_000, "only {next} rows read back");
    assert_eq!(next % 64, 0, "each flush writes whole batches of 64");
    // A kill between chunks leaves a clean end; one inside a write() leaves a torn chunk.
    if let Some(d) = reader.damage() {
        eprintln!("after {next} rows: {d}");
        assert!(
            matches!(
                d.kind,
                DamageKind::TornChunkHeader { .. } | DamageKind::TornPayload { .. }
            ),
            "{d}"
        );
        assert!(d.offset < std::fs::metadata(&path).unwrap().len());
    }
    std::fs::remove_dir_all(dir).unwrap();
}
