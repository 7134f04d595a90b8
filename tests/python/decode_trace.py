#!/usr/bin/env python3
"""Decode a Perfetto trace with the official generated protos and print a JSON summary.

The independent check on kreplay's Perfetto writer: it shares no code with it. It uses the
`perfetto` PyPI package's `perfetto_trace_pb2` (generated from Perfetto's own .proto files)
and the protobuf runtime only; trace_processor is not used (it downloads a binary).

Usage: decode_trace.py TRACE.pftrace  ->  JSON on stdout:

  packets        number of TracePackets
  sequences      {seq id: {packets, flags: [first packet's flags, ...distinct later ones],
                  flags_ok, monotonic, first_packet_on_sequence, event_names_defined,
                  annotation_names_defined}}
  tracks         {uuid: {kind, name, parent, pid, tid, unit}} (kind: process, thread,
                  counter, named)
  slices         {uuid: [{name, ts, dur, depth, args, flow_ids, terminating_flow_ids}]},
                 rebuilt like trace processor: events of a track sorted by timestamp (stable),
                 SLICE_BEGIN pushes, SLICE_END pops the innermost open slice
  instants       {uuid: [{name, ts, args}]}
  counters       {uuid: [[ts, value], ...]}
  flows          {flow id: {"from": [ref], "to": [ref]}}, ref = {track, name, ts}
  errors         every rule broken: descriptor twice or after first use, event on an undefined
                 track, parent not defined, bad sequence flags, iid 0, iid used before it was
                 defined on its sequence, iid redefined with another name, END with nothing
                 open, BEGIN never closed, flow without exactly one start and one end
"""

import json
import sys

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CLEARED = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
NEEDS = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
TE = pb.TrackEvent


def annotation_value(a):
    """A debug annotation's value as {type: value}."""
    kind = a.WhichOneof("value")
    mapping = {
        "uint_value": "uint",
        "int_value": "int",
        "string_value": "string",
        "pointer_value": "pointer",
        "double_value": "double",
        "bool_value": "bool",
    }
    if kind not in mapping:
        return {"unsupported": kind}
    return {mapping[kind]: getattr(a, kind)}


class Sequence:
    """Incremental state of one trusted_packet_sequence_id."""

    def __init__(self):
        self.packets = 0
        self.flags = []
        self.monotonic = True
        self.last_ts = None
        self.cleared = False
        self.first_marked = None
        self.event_names = {}
        self.annotation_names = {}
        self.defined = {"event name": 0, "annotation name": 0}


def decode(data):
    trace = pb.Trace()
    trace.ParseFromString(data)
    errors = []
    seqs = {}
    tracks = {}
    events = {}  # uuid -> [(ts, order, kind, payload)]
    counters = {}

    def intern(table, entries, what, seq_id):
        seqs[seq_id].defined[what] += len(entries)
        for e in entries:
            if e.iid == 0:
                errors.append(f"seq {seq_id}: {what} iid 0 defined for {e.name!r}")
            elif e.iid in table and table[e.iid] != e.name:
                errors.append(
                    f"seq {seq_id}: {what} iid {e.iid} redefined "
                    f"({table[e.iid]!r} -> {e.name!r})"
                )
            table[e.iid] = e.name

    def lookup(table, iid, what, seq_id):
        if iid == 0:
            errors.append(f"seq {seq_id}: {what} iid 0 used")
            return None
        if iid not in table:
            errors.append(f"seq {seq_id}: {what} iid {iid} used before it was defined")
            return None
        return table[iid]

    for order, p in enumerate(trace.packet):
        seq_id = p.trusted_packet_sequence_id
        seq = seqs.setdefault(seq_id, Sequence())
        flags = p.sequence_flags
        if seq.packets == 0:
            seq.first_marked = p.first_packet_on_sequence
        seq.packets += 1
        # Keep the first packet's flags and each distinct later value once.
        if seq.packets == 1 or flags not in seq.flags[1:]:
            seq.flags.append(flags)
        if flags & CLEARED:
            seq.cleared = True
            seq.event_names.clear()
            seq.annotation_names.clear()
        if p.HasField("interned_data"):
            if not seq.cleared:
                errors.append(f"seq {seq_id}: interned data before the state was cleared")
            intern(seq.event_names, p.interned_data.event_names, "event name", seq_id)
            intern(
                seq.annotation_names,
                p.interned_data.debug_annotation_names,
                "annotation name",
                seq_id,
            )

        if p.HasField("track_descriptor"):
            d = p.track_descriptor
            uuid = d.uuid
            if uuid in tracks:
                errors.append(f"track {uuid}: descriptor written twice")
            if uuid in events or uuid in counters:
                errors.append(f"track {uuid}: descriptor after its first event")
            if d.HasField("parent_uuid") and d.parent_uuid not in tracks:
                errors.append(f"track {uuid}: parent {d.parent_uuid} not defined before it")
            info = {
                "kind": "named",
                "name": d.name if d.HasField("name") else None,
                "parent": d.parent_uuid if d.HasField("parent_uuid") else None,
                "pid": None,
                "tid": None,
                "unit": None,
            }
            if d.HasField("process"):
                info.update(kind="process", pid=d.process.pid, name=d.process.process_name)
            elif d.HasField("thread"):
                info.update(
                    kind="thread",
                    pid=d.thread.pid,
                    tid=d.thread.tid,
                    name=d.thread.thread_name,
                )
            elif d.HasField("counter"):
                info.update(kind="counter", unit=pb.CounterDescriptor.Unit.Name(d.counter.unit))
            tracks[uuid] = info

        if p.HasField("track_event"):
            ev = p.track_event
            ts = p.timestamp
            if seq.last_ts is not None and ts < seq.last_ts:
                seq.monotonic = False
            seq.last_ts = ts
            if not (flags & NEEDS) and (ev.HasField("name_iid") or ev.debug_annotations):
                errors.append(f"seq {seq_id}: interned ids without SEQ_NEEDS_INCREMENTAL_STATE")
            uuid = ev.track_uuid
            if uuid not in tracks:
                errors.append(f"track {uuid}: event at {ts} before (or without) its descriptor")
            name = None
            if ev.HasField("name_iid"):
                name = lookup(seq.event_names, ev.name_iid, "event name", seq_id)
            elif ev.HasField("name"):
                name = ev.name
            args = {}
            for a in ev.debug_annotations:
                if a.HasField("name_iid"):
                    aname = lookup(seq.annotation_names, a.name_iid, "annotation name", seq_id)
                else:
                    aname = a.name
                args[aname] = annotation_value(a)
            payload = {
                "name": name,
                "args": args,
                "flow_ids": list(ev.flow_ids),
                "terminating_flow_ids": list(ev.terminating_flow_ids),
            }
            if ev.type == TE.TYPE_COUNTER:
                value = (
                    ev.double_counter_value
                    if ev.HasField("double_counter_value")
                    else ev.counter_value
                )
                counters.setdefault(uuid, []).append((ts, order, value))
            else:
                events.setdefault(uuid, []).append((ts, order, ev.type, payload))

    slices, instants = rebuild(events, errors)
    flows = {}
    for uuid, items in list(slices.items()) + list(instants.items()):
        for s in items:
            ref = {"track": uuid, "name": s["name"], "ts": s["ts"]}
            for f in s["flow_ids"]:
                flows.setdefault(f, {"from": [], "to": []})["from"].append(ref)
            for f in s["terminating_flow_ids"]:
                flows.setdefault(f, {"from": [], "to": []})["to"].append(ref)
    for f, ends in flows.items():
        if len(ends["from"]) != 1 or len(ends["to"]) != 1:
            errors.append(
                f"flow {f}: {len(ends['from'])} start(s) and {len(ends['to'])} end(s)"
            )

    sequences = {}
    for seq_id, s in seqs.items():
        first, later = (s.flags[0], s.flags[1:]) if s.flags else (None, [])
        ok = first == (CLEARED | NEEDS) and all(f == NEEDS for f in later)
        if not ok:
            errors.append(f"seq {seq_id}: sequence flags {s.flags}, expected [3, 2]")
        if s.first_marked is not True:
            errors.append(f"seq {seq_id}: first packet lacks first_packet_on_sequence")
        sequences[seq_id] = {
            "packets": s.packets,
            "flags": s.flags,
            "flags_ok": ok,
            "monotonic": s.monotonic,
            "first_packet_on_sequence": s.first_marked,
            "event_names_defined": s.defined["event name"],
            "annotation_names_defined": s.defined["annotation name"],
        }

    return {
        "packets": len(trace.packet),
        "sequences": sequences,
        "tracks": tracks,
        "slices": slices,
        "instants": instants,
        "counters": {
            u: [[ts, v] for ts, _, v in sorted(vals, key=lambda x: (x[0], x[1]))]
            for u, vals in counters.items()
        },
        "flows": flows,
        "errors": errors,
    }


def rebuild(events, errors):
    """Slices and instants per track, as trace processor pairs BEGIN and END events."""
    slices, instants = {}, {}
    for uuid, evs in events.items():
        evs.sort(key=lambda e: (e[0], e[1]))
        stack = []
        out = slices.setdefault(uuid, [])
        for ts, _, kind, payload in evs:
            if kind == TE.TYPE_SLICE_BEGIN:
                s = dict(payload, ts=ts, dur=None, depth=len(stack))
                out.append(s)
                stack.append(s)
            elif kind == TE.TYPE_SLICE_END:
                if not stack:
                    errors.append(f"track {uuid}: SLICE_END at {ts} with no open slice")
                    continue
                s = stack.pop()
                s["dur"] = ts - s["ts"]
            elif kind == TE.TYPE_INSTANT:
                instants.setdefault(uuid, []).append(dict(payload, ts=ts))
            else:
                errors.append(f"track {uuid}: unexpected event type {kind} at {ts}")
        for s in stack:
            errors.append(f"track {uuid}: slice {s['name']!r} at {s['ts']} never ends")
        if not out:
            del slices[uuid]
    return slices, instants


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: decode_trace.py TRACE.pftrace")
    with open(sys.argv[1], "rb") as f:
        summary = decode(f.read())
    # JSON object keys must be strings: uuids and ids become decimal strings.
    json.dump(summary, sys.stdout, sort_keys=True, default=str)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
