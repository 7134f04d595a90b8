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
