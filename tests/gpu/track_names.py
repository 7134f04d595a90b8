#!/usr/bin/env python3
"""The GPU track names of a kreplay trace of a CUDA process, read straight from the trace's
protobuf wire format (no Perfetto package needed on the GPU machine): every GPU track group
under a process track must be named `GPU N: DEVICE (PROGRAM PID)`, with PROGRAM and PID its
process track's, and hold only `stream S` tracks (at least one), `stream S copies` tracks and
the `GPU busy %` counter.

Usage: track_names.py TRACE.pftrace DEVICE_NAME [ORDINAL]   (ORDINAL defaults to 0)
Prints the groups, `RESULT` lines and `PASS`/`FAIL track_names`; exit status 1 on a failure.
"""
import re
import sys


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(field number, wire type, value) of each field of a message; LEN values as bytes."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield num, wt, v


def tracks(data):
    """uuid -> {name, parent, pid, process, counter} of every TrackDescriptor (packet field 60)."""
    out = {}
    for num, _, packet in fields(data):
        if num != 1:
            continue
        for pnum, _, desc in fields(packet):
            if pnum != 60:
                continue
            t = {"name": None, "parent": None, "pid": None, "process": None, "counter": False}
            uuid = None
            for dnum, _, v in fields(desc):
                if dnum == 1:
                    uuid = v
                elif dnum == 2:
                    t["name"] = v.decode()
                elif dnum == 5:
                    t["parent"] = v
                elif dnum == 8:
                    t["counter"] = True
                elif dnum == 3:
                    for qnum, _, q in fields(v):
                        if qnum == 1:
                            t["pid"] = q
                        elif qnum == 6:
                            t["process"] = q.decode()
            out[uuid] = t
    return out


def main():
    path, device = sys.argv[1], sys.argv[2]
    ordinal = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    ts = tracks(open(path, "rb").read())
    bad = []
    groups = [
        (u, t) for u, t in ts.items()
        if t["name"] and t["name"].startswith("GPU ") and ts.get(t["parent"], {}).get("pid") is not None
    ]
    for u, g in groups:
        p = ts[g["parent"]]
        children = sorted({t["name"] for t in ts.values() if t["parent"] == u})
        print(f"group {g['name']!r}: {children}")
        want = f"GPU {ordinal}: {device} ({p['process']} {p['pid']})"
        if g["name"] != want:
            bad.append(f"group {g['name']!r}, want {want!r}")
        streams = [c for c in children if re.fullmatch(r"stream \d+", c)]
        others = [c for c in children if not re.fullmatch(r"stream \d+( copies)?|GPU busy %", c)]
        if not streams:
            bad.append(f"no stream track under {g['name']!r}")
        if others:
            bad.append(f"unexpected tracks {others} under {g['name']!r}")
        print(f"RESULT stream_tracks {len(streams)}")
    print(f"RESULT gpu_groups {len(groups)}")
    if len(groups) != 1:
        bad.append(f"{len(groups)} GPU groups, want 1")
    for b in bad:
        print(f"  {b}")
    print("FAIL track_names" if bad else "PASS track_names")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
