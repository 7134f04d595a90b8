#!/usr/bin/env python3
"""Per-phase cost of each replayed dispatch, from a `kreplay replay` trace.

Usage: replay_phases.py TRACE.pftrace [--csv FILE]

Decodes the trace with tests/python/decode_trace.py (the `perfetto` PyPI package's protos) and
groups the replay slices by their `correlation` argument: the dispatch slice (its end is the
replay's end), `snapshot`, `pass N` and `restore` (pass N+1). Per dispatch:

  window      snapshot start -> dispatch end (what the application waits, less the drain)
  snapshot    the snapshot slice (inventory, module variables, allocation, copy, hashing,
              one-pass restore readied)
  passes      sum of the `pass N` slices (submit + cuCtxSynchronize)
  restores    sum of the restore slices
  gap_hash    sum over passes k < last of (restore k+1 start - pass k end): on the CUDA
              path with the determinism check on, engine/replay.rs hash_regions (nothing else
              runs there)
  tail        dispatch end - last pass end: the last pass's hash_regions plus the snapshot's
              drop (its device copies and hash buffer freed)
  other       window - everything above

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
    for uuid, items in t["slices"].items():
        for s in items:
            corr = val(s["args"], "correlation")
            if corr is None or s["dur"] is None:
                continue
            d = by.setdefault(corr, {"passes": [], "restores": []})
            name = s["name"] or ""
            if name == "snapshot":
                d["snapshot"] = s
            elif name == "restore":
                d["restores"].append(s)
            elif name.startswith("pass "):
                d["passes"].append(s)
            elif "grid" in s["args"]:
                d["dispatch"] = s
    rows = []
    for corr, d in sorted(by.items()):
        if "snapshot" not in d or "dispatch" not in d or not d["passes"]:
            continue
        snap, disp = d["snapshot"], d["dispatch"]
        passes = sorted(d["passes"], key=lambda s: s["ts"])
        restores = sorted(d["restores"], key=lambda s: s["ts"])
        end = disp["ts"] + disp["dur"]
        window = end - snap["ts"]
        gap_hash = 0
        for p, r in zip(passes, restores):
            gap_hash += r["ts"] - (p["ts"] + p["dur"])
        tail = end - (passes[-1]["ts"] + passes[-1]["dur"])
        sp = sum(p["dur"] for p in passes)
        sr = sum(r["dur"] for r in restores)
        other = window - snap["dur"] - sp - sr - gap_hash - tail
        rows.append({
            "corr": corr,
            "kernel": disp["name"],
            "passes": len(passes),
            "regions": val(snap["args"], "regions"),
            "bytes": val(snap["args"], "bytes"),
            "placement": val(snap["args"], "placement"),
            "check": val(snap["args"], "check"),
            "window": window,
            "snapshot": snap["dur"],
            "passes_ns": sp,
            "restores": sr,
            "gap_hash": gap_hash,
            "tail": tail,
            "other": other,
            "dirty_chunks": sum(val(r["args"], "dirty_chunks") or 0 for r in restores),
            "restore_checks": ",".join(sorted({str(val(r["args"], "check")) for r in restores})),
        })
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
    print(f"{'phase':<10} {'median_ms':>10} {'mean_ms':>10} {'p90_ms':>10} {'total_s':>9} {'per_pass_ms':>12}")
    for k in ["window", "snapshot", "passes_ns", "restores", "gap_hash", "tail", "other"]:
        v = sorted(r[k] / 1e6 for r in rows)
        p = rows[0]["passes"]
        per = statistics.median(v) / (p if k in ("passes_ns",) else max(p - 1, 1)) if k in ("passes_ns", "restores", "gap_hash") else float("nan")
        print(f"{k:<10} {statistics.median(v):10.3f} {statistics.mean(v):10.3f} "
              f"{v[min(n - 1, int(0.9 * n))]:10.3f} {sum(v) / 1e3:9.3f} {per:12.3f}")
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
