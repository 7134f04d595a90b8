//! A record that is intact (its chunk's CRC holds) but cannot be shown, such as a call that
//! returns before it was entered, is left out with its file and place named, and the merge
//! goes on: every other record is in the trace.

use super::*;

#[test]
fn a_call_that_ends_before_it_begins_is_left_out_by_name_and_the_merge_goes_on() {
    let dir = fresh_dir("bad-record");
    let input = dir.join("probes-500.krs");
    let mut recs = names(MAIN, "main");
    recs.extend([
        call(MAIN, "hipMalloc", 1000, 1500),
        // Its exit time below its entry (as a writer bug or a flipped bit would leave it).
        call(MAIN, "hipMemcpy", 2000, 0),
        call(MAIN, "hipDeviceSynchronize", 3000, 3200),
    ]);
    write_stream(&input, StreamKind::Probes, &recs, 100);
    let out = dir.join("t.pftrace");
    let o = merge(&[&input], &out);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o)
            .lines()
            .filter(|l| l.contains("left out"))
            .collect::<Vec<_>>(),
        [format!(
            "kreplay: warning: {}: record 4 (ApiCall at 2000 ns) left out: it ends at 0 ns, before it begins",
            input.display()
        )]
    );
    let d = decode_trace(&out);
    assert_eq!(d["errors"], json!([]), "decoder errors");
    let thread = track(&d, "thread", "main", None);
    assert_eq!(thread.len(), 1, "{:?}", d["tracks"]);
    let names: Vec<String> = slices(&d, &thread[0]).into_iter().map(|s| s.0).collect();
    assert_eq!(names, ["hipMalloc", "hipDeviceSynchronize"]);
}
