//! Tests of the GPU render's holding and forgetting of dispatches.

use super::*;

fn dispatch(correlation: u64, submit_ns: u64, start_ns: u64, end_ns: u64) -> Dispatch {
    Dispatch {
        pid: 1,
        tid: 1,
        agent: 0xa,
        queue: 0xb,
        kernel: format!("k{correlation}"),
        correlation,
        kernel_object: 0,
        grid: [1, 1, 1],
        workgroup: [1, 1, 1],
        submit_ns,
        start_ns,
        end_ns,
        group_segment: 0,
        private_segment: 0,
    }
}

#[test]
fn dispatches_wait_for_their_start_and_are_forgotten_after_their_end() {
    let mut w = TraceWriter::new(Vec::new());
    let mut gpu = Gpu::new(&mut w);
    let name = |pid: u32| format!("pid {pid}");
    let mut skipped = 0;
    gpu.hold(&mut w, 1, &dispatch(1, 10, 100, 200), None, None, &name)
        .unwrap();
    gpu.hold(&mut w, 1, &dispatch(2, 20, 50, 60), None, None, &name)
        .unwrap();
    assert_eq!((gpu.held(), gpu.remembered()), (2, 2));
    gpu.advance(&mut w, 49, &mut skipped).unwrap();
    assert_eq!(gpu.dispatches, 0, "nothing has started at 49");
    gpu.advance(&mut w, 100, &mut skipped).unwrap();
    assert_eq!(
        (gpu.dispatches, gpu.held()),
        (2, 0),
        "written in start order"
    );
    gpu.advance(&mut w, 60 + FORGET_AFTER_NS, &mut skipped)
        .unwrap();
    assert_eq!(gpu.remembered(), 2, "forgotten only after FORGET_AFTER_NS");
    gpu.advance(&mut w, 61 + FORGET_AFTER_NS, &mut skipped)
        .unwrap();
    assert_eq!(gpu.remembered(), 1);
    gpu.advance(&mut w, 201 + FORGET_AFTER_NS, &mut skipped)
        .unwrap();
    assert_eq!((gpu.remembered(), skipped), (0, 0));
}

#[test]
fn a_dispatch_reusing_a_correlation_id_is_not_forgotten_with_the_old_one() {
    let mut w = TraceWriter::new(Vec::new());
    let mut gpu = Gpu::new(&mut w);
    let name = |pid: u32| format!("pid {pid}");
    let mut skipped = 0;
    gpu.hold(&mut w, 1, &dispatch(7, 10, 20, 30), None, None, &name)
        .unwrap();
    gpu.advance(&mut w, 20, &mut skipped).unwrap();
    let later = 40 + FORGET_AFTER_NS;
    gpu.hold(
        &mut w,
        1,
        &dispatch(7, later, later + 1, later + 2),
        None,
        None,
        &name,
    )
    .unwrap();
    gpu.advance(&mut w, later + 1, &mut skipped).unwrap();
    assert_eq!(
        gpu.remembered(),
        1,
        "the new dispatch 7 is still remembered"
    );
    assert_eq!(gpu.dispatches, 2);
}

#[test]
fn work_that_comes_after_later_work_was_written_goes_on_a_late_sequence_and_is_not_lost() {
    let mut w = TraceWriter::new(Vec::new());
    let mut gpu = Gpu::new(&mut w);
    let name = |pid: u32| format!("pid {pid}");
    let mut skipped = 0;
    gpu.hold(&mut w, 1, &dispatch(1, 90, 100, 200), None, None, &name)
        .unwrap();
    gpu.advance(&mut w, 300, &mut skipped).unwrap();
    assert_eq!((gpu.dispatches, gpu.late.len()), (1, 0));
    // Two records from a buffer handed over late, in order among themselves: one late sequence.
    gpu.hold(&mut w, 1, &dispatch(2, 10, 50, 60), None, None, &name)
        .unwrap();
    gpu.advance(&mut w, 300, &mut skipped).unwrap();
    gpu.hold(&mut w, 1, &dispatch(3, 65, 70, 80), None, None, &name)
        .unwrap();
    gpu.advance(&mut w, 300, &mut skipped).unwrap();
    assert_eq!((gpu.dispatches, gpu.late.len()), (3, 1));
    // One earlier still than that sequence's last event: a second late sequence.
    gpu.hold(&mut w, 1, &dispatch(4, 30, 40, 45), None, None, &name)
        .unwrap();
    gpu.advance(&mut w, 300, &mut skipped).unwrap();
    assert_eq!((gpu.dispatches, gpu.late.len(), skipped), (4, 2, 0));
    // In time again: the GPU sequence.
    gpu.hold(&mut w, 1, &dispatch(5, 300, 310, 320), None, None, &name)
        .unwrap();
    gpu.advance(&mut w, 400, &mut skipped).unwrap();
    assert_eq!((gpu.dispatches, gpu.late.len(), skipped), (5, 2, 0));
}
