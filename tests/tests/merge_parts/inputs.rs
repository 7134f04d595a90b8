//! What `kreplay merge` makes of its inputs: a torn stream keeps every chunk before the
//! damage, a missing file is one clear error, and a directory is read for its stream files
//! alone.
use kreplay_common::stream::StreamKind;
use kreplay_tests::decode_trace;
use serde_json::json;

use super::{MAIN, call, fresh_dir, merge, names, s, slices, stderr, track, write_stream};

#[test]
fn a_truncated_stream_keeps_every_chunk_before_the_damage_and_says_where() {
    let dir = fresh_dir("torn");
    let path = dir.join("probes-500-501.krs");
    let mut recs = names(MAIN, "main");
    for i in 0..10u64 {
        recs.push(call(
            MAIN,
            "hipDeviceSynchronize",
            1000 * (i + 1),
            1000 * (i + 1) + 10,
        ));
    }
    // Two records per chunk: names, then 5 chunks of calls.
    write_stream(&path, StreamKind::Probes, &recs, 2);
    let full = std::fs::read(&path).unwrap();
    // Walk the chunk length fields to the start of the last chunk.
    let (mut at, mut last_chunk, mut last_len) = (40, 0, 0);
    while at < full.len() {
        let len = u32::from_le_bytes(full[at..at + 4].try_into().unwrap()) as usize;
        (last_chunk, last_len) = (at, len);
        at += 16 + len;
    }
    assert_eq!(at, full.len());
    std::fs::write(&path, &full[..full.len() - 7]).unwrap();
    let out = dir.join("torn.pftrace");
    let o = merge(&[&path], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.starts_with("kreplay: warning:"))
        .collect();
    assert_eq!(
        warnings,
        [format!(
            "kreplay: warning: {}: torn chunk payload ({} of {last_len} bytes) at byte offset \
             {last_chunk}; kept the 5 complete chunks before it",
            path.display(),
            last_len - 7
        )
        .as_str()]
    );
    let d = decode_trace(&out);
    assert_eq!(d["errors"], json!([]));
    let main = track(&d, "thread", "main", None);
    let ts: Vec<u64> = slices(&d, &main[0]).iter().map(|s| s.1).collect();
    assert_eq!(ts, [1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000]);
}

#[test]
fn a_missing_input_is_one_clear_line_and_no_trace() {
    let dir = fresh_dir("missing");
    let missing = dir.join("nope.krs");
    let out = dir.join("missing.pftrace");
    let o = merge(&[&missing], &out);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(
        err.lines().collect::<Vec<_>>(),
        [format!(
            "kreplay: error: cannot read {}: No such file or directory (os error 2)",
            missing.display()
        )]
    );
    assert!(!out.exists());
}

#[test]
fn a_directory_input_skips_files_that_are_not_streams_with_a_warning() {
    let dir = fresh_dir("mixed");
    write_stream(
        &dir.join("probes-500-501.krs"),
        StreamKind::Probes,
        &[call(MAIN, "hipDeviceSynchronize", 10, 20)],
        8,
    );
    std::fs::write(dir.join("junk.krs"), b"not a stream at all, just text").unwrap();
    std::fs::write(dir.join("notes.txt"), b"ignored: not *.krs").unwrap();
    let out = dir.join("mixed.pftrace");
    let o = merge(&[&dir], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("warning")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(
        warnings[0].contains(&format!(
            "{}: not a kreplay stream",
            dir.join("junk.krs").display()
        )),
        "{err}"
    );
    let d = decode_trace(&out);
    assert_eq!(d["errors"], json!([]));
    let t = track(&d, "thread", "thread 501", None);
    assert_eq!(slices(&d, &t[0]), [s("hipDeviceSynchronize", 10, 10, 0)]);
}

#[test]
fn a_directory_without_streams_is_an_error() {
    let dir = fresh_dir("empty");
    let o = merge(&[&dir], &dir.join("x.pftrace"));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o).trim_end(),
        format!(
            "kreplay: error: no stream files (*.krs) in {}",
            dir.display()
        )
    );
}
