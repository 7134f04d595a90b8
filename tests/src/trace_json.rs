//! Reading slices out of a decoded trace (`decode_trace`'s JSON).
use serde_json::Value;

/// (track name, slice) of every slice on tracks whose name starts with `prefix`.
pub fn slices_on<'a>(d: &'a Value, prefix: &str) -> Vec<(&'a str, &'a Value)> {
    let mut v = Vec::new();
    for (uuid, t) in d["tracks"].as_object().unwrap() {
        let name = t["name"].as_str().unwrap_or("");
        if name.starts_with(prefix) {
            for s in d["slices"][uuid].as_array().into_iter().flatten() {
                v.push((name, s));
            }
        }
    }
    v
}

/// A slice's start.
pub fn ts(s: &Value) -> u64 {
    s["ts"].as_u64().unwrap()
}

/// A slice's end.
pub fn end(s: &Value) -> u64 {
    ts(s) + s["dur"].as_u64().unwrap()
}

/// The slice a flow reference (`{track, ts, name}`) names.
pub fn slice_at<'a>(d: &'a Value, r: &Value) -> &'a Value {
    d["slices"][r["track"].as_u64().unwrap().to_string()]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["ts"] == r["ts"] && s["name"] == r["name"])
        .unwrap()
}

/// A GPU track group: a track named `GPU …` right under a process's track.
#[derive(Debug)]
pub struct GpuGroup {
    /// The group's name.
    pub name: String,
    /// The name of the process track it hangs under.
    pub process: String,
    /// That process's pid.
    pub pid: u64,
    /// The names of the tracks under the group, sorted, each once (overflow lanes share their
    /// track's name).
    pub tracks: Vec<String>,
}

/// The GPU track groups of a trace, in track-uuid order.
pub fn gpu_groups(d: &Value) -> Vec<GpuGroup> {
    let tracks = d["tracks"].as_object().unwrap();
    let name = |t: &Value| t["name"].as_str().unwrap_or("").to_owned();
    let mut out = Vec::new();
    for (uuid, t) in tracks {
        let Some(parent) = t["parent"].as_u64().map(|p| &tracks[&p.to_string()]) else {
            continue;
        };
        if parent["kind"] != "process" || !name(t).starts_with("GPU ") {
            continue;
        }
        let mut children: Vec<String> = tracks
            .values()
            .filter(|c| c["parent"].as_u64().map(|p| p.to_string()).as_deref() == Some(uuid))
            .map(name)
            .collect();
        children.sort_unstable();
        children.dedup();
        out.push(GpuGroup {
            name: name(t),
            process: name(parent),
            pid: parent["pid"].as_u64().unwrap(),
            tracks: children,
        });
    }
    out
}
