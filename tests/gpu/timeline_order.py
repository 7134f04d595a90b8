#!/usr/bin/env python3
"""The GPU timeline's clock check on a real trace (the H200's, from tests/gpu/gpu_timeline.sh):
every GPU slice that a flow ties to its launch or copy call starts after that call began, and ends
before the first synchronizing call of the process that began after the call returned, returns
(a stream, context or device synchronize, or a blocking copy to the host). For a program that
queues all its work on one stream, as tests/gpu/train_step.py does, each of them waits for
everything launched before it, from any thread (PyTorch launches the backward pass from its
autograd thread and synchronizes on the main thread).

Usage: timeline_order.py DECODED.json   (decode_trace.py's output for the trace)
Prints `RESULT` lines and `PASS`/`FAIL timeline_order`; exit status 1 on a violation.
"""
import bisect
import json
import sys

# Calls that return only when the work queued before them on their stream has finished.
SYNCS = {
    "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize",
    "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize",
    "cudaMemcpy", "cuMemcpyDtoH_v2",
}


def main():
    d = json.load(open(sys.argv[1]))
    # Every slice's end by (track, ts), and the synchronizing calls, by start.
    ends, syncs = {}, []
    for track, slices in d["slices"].items():
        for s in slices:
            ends[(int(track), s["ts"])] = s["ts"] + s["dur"]
            if s["name"] in SYNCS:
                syncs.append((s["ts"], s["ts"] + s["dur"], s["name"]))
    syncs.sort()
    checked = early = late = unsynced = 0
    for fid, f in d["flows"].items():
        src, dst = f["from"][0], f["to"][0]
        call_ts = src["ts"]
        call_end = ends.get((src["track"], call_ts))
        end = ends[(dst["track"], dst["ts"])]
        checked += 1
        if dst["ts"] < call_ts:
            early += 1
            if early <= 3:
                print(f"EARLY {dst['name'][:60]} starts {call_ts - dst['ts']} ns before {src['name']}")
        i = bisect.bisect_left(syncs, (call_end, 0, ""))
        if i == len(syncs):
            unsynced += 1
            continue
        s_ts, s_end, s_name = syncs[i]
        if end > s_end:
            late += 1
            if late <= 3:
                print(f"LATE {dst['name'][:60]} ends {end - s_end} ns after {s_name} returned")
    print(f"RESULT flows_checked {checked}")
    print(f"RESULT gpu_before_call {early}")
    print(f"RESULT gpu_after_sync {late}")
    print(f"RESULT no_sync_after {unsynced}")
    ok = checked > 0 and early == 0 and late == 0
    print(f"{'PASS' if ok else 'FAIL'} timeline_order ({checked} flows, {early} early, {late} late)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
