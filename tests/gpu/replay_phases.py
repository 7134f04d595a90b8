#!/usr/bin/env python3
"""Per-phase cost of each replayed dispatch, from a `kreplay replay` trace.

Usage: replay_phases.py TRACE.pftrace [--csv FILE]

Decodes the trace with tests/python/decode_trace.py (the `perfetto` PyPI package's protos) and
groups the replay slices by their `correlation` argument: `snapshot` (with its parts
`snapshot: allocate`, `snapshot: copy`, `snapshot: hash`, `snapshot: ready restore`), `pass N`,
`restore`, `hash pass`, `compare pass` and `release`. Per dispatch:

  window      snapshot start -> the end of its last slice (the release of its buffers)
  snapshot    the snapshot slice, and its parts: alloc, copy, hash, ready
  passes      sum of the `pass N` slices (submit + wait)
  restores    sum of the restore slices
  hash        sum of the `hash pass` slices (the determinism check's own hashing)
  compare     sum of the `compare pass` slices
  release     the snapshot's and the check's buffers kept or freed
  unsliced    window - everything above: time in no slice (recording, bookkeeping)
  overhead    window - passes
  target      2 x (snapshot copy + restore copy) + 1 ms, the restore copy being the bytes
              restored at the snapshot copy's rate

Prints the median, mean and p90 of each over the replayed dispatches, in milliseconds, with the
snapshot's regions and bytes and the restores' dirty chunks. --csv writes one row a dispatch.
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from decode_trace import decode  # noqa: E402


def val(args, name):
    v = args.get(name)
    if not v:
        return None
    return next(iter(v.values()))


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: replay_phases.py TRACE.pftrace [--csv FILE]")
    with open(sys.argv[1], "rb") as f:
        t = decode(f.read())
    by = {}
    parts = {"snapshot: allocate": "alloc", "snapshot: copy": "copy", "snapshot: hash": "hash_snap",
             "snapshot: ready restore": "ready", "hash pass": "hash", "compare pass": "compare",
             "release": "release"}
    for uuid, items in t["slices"].items():
        for s in items:
            corr = val(s["args"], "correlation")
            if corr is None or s["dur"] is None:
                continue
            d = by.setdefault(corr, {"passes": [], "restores": [], "all": []})
            name = s["name"] or ""
            if "grid" in s["args"]:
                d["dispatch"] = s
                continue
            d["all"].append(s)
            if name == "snapshot":
                d["snapshot"] = s
            elif name == "restore":
                d["restores"].append(s)
            elif name.startswith("pass "):
                d["passes"].append(s)
            elif name in parts:
                d.setdefault(parts[name], []).append(s)
    rows = []
    for corr, d in sorted(by.items()):
        if "snapshot" not in d or not d["passes"]:
            continue
        snap = d["snapshot"]
        start = snap["ts"]
        end = max(s["ts"] + s["dur"] for s in d["all"])
        window = end - start
        total = lambda k: sum(s["dur"] for s in d.get(k, []))
        sp = sum(p["dur"] for p in d["passes"])
        sr = sum(r["dur"] for r in d["restores"])
        copy_ns = total("copy")
        snap_bytes = val(snap["args"], "bytes") or 0
        restored = sum(val(r["args"], "bytes") or 0 for r in d["restores"])
        rate = snap_bytes / copy_ns if copy_ns else 0
        restore_copy = restored / rate if rate else 0
        row = {
            "corr": corr,
            "kernel": d["dispatch"]["name"] if "dispatch" in d else "?",
            "passes": len(d["passes"]),
            "regions": val(snap["args"], "regions"),
            "bytes": snap_bytes,
            "placement": val(snap["args"], "placement"),
            "check": val(snap["args"], "check"),
            "window": window,
            "snapshot": snap["dur"],
            "alloc": total("alloc"),
            "copy": copy_ns,
            "hash_snap": total("hash_snap"),
            "ready": total("ready"),
            "passes_ns": sp,
            "restores": sr,
            "hash": total("hash"),
            "compare": total("compare"),
            "release": total("release"),
            "overhead": window - sp,
            "target": 2 * (copy_ns + restore_copy) + 1e6,
            "restored_bytes": restored,
            "dirty_chunks": sum(val(r["args"], "dirty_chunks") or 0 for r in d["restores"]),
            "restore_checks": ",".join(sorted({str(val(r["args"], "check")) for r in d["restores"]})),
        }
        row["unsliced"] = window - row["snapshot"] - sp - sr - row["hash"] - row["compare"] - row["release"]
        rows.append(row)
    if not rows:
        sys.exit("no replayed dispatch in the trace")
    n = len(rows)
    print(f"dispatches: {n}  passes: {sorted({r['passes'] for r in rows})}")
    regs = [r["regions"] for r in rows]
    mb = [r["bytes"] / 1e6 for r in rows]
    print(f"snapshot regions: median {statistics.median(regs)} min {min(regs)} max {max(regs)}; "
          f"MB: median {statistics.median(mb):.1f} min {min(mb):.1f} max {max(mb):.1f}; "
          f"placement {sorted({str(r['placement']) for r in rows})} check {sorted({str(r['check']) for r in rows})} "
          f"restore checks {sorted({r['restore_checks'] for r in rows})}")
    print(f"{'phase':<10} {'median_ms':>10} {'mean_ms':>10} {'p90_ms':>10} {'total_s':>9}")
    for k in ["window", "snapshot", "alloc", "copy", "hash_snap", "ready", "passes_ns", "restores",
              "hash", "compare", "release", "unsliced", "overhead", "target"]:
        v = sorted(r[k] / 1e6 for r in rows)
        print(f"{k:<10} {statistics.median(v):10.3f} {statistics.mean(v):10.3f} "
              f"{v[min(n - 1, int(0.9 * n))]:10.3f} {sum(v) / 1e3:9.3f}")
    met = sum(1 for r in rows if r["overhead"] <= r["target"])
    print(f"overhead <= target in {met} of {n} dispatches; median restored bytes "
          f"{statistics.median(r['restored_bytes'] for r in rows):.0f}")
    print(f"dirty chunks per dispatch (all restores): median {statistics.median(r['dirty_chunks'] for r in rows)}")
    if "--csv" in sys.argv:
        path = sys.argv[sys.argv.index("--csv") + 1]
        keys = list(rows[0].keys())
        with open(path, "w") as f:
            f.write(",".join(keys) + "\n")
            for r in rows:
                f.write(",".join(str(r[k]) for k in keys) + "\n")


if __name__ == "__main__":
    main()
