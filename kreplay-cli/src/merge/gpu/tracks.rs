//! The GPU tracks of a process and their names, from what the tool said of each device
//! (`GpuDevice` records, stream version 7).
//!
//! A CUDA device is named as Nsight Systems names it: the group `GPU 0: NVIDIA H200 (PROGRAM
//! PID)`, its streams `stream 7` (CUPTI's stream id) or, where the tool recorded the
//! application's `CUstream` handle (`kreplay replay`), `stream 0x…` and `default stream`. An HSA
//! agent keeps its handle, with its name when known: `GPU agent 0x…: NAME (PROGRAM PID)`
//! holding `queue 0x…` tracks. A device the stream does not describe (a version-6 stream) is
//! named as an HSA agent without a name, as before the records existed.
//!
//! Uuids do not depend on the names: the group's key is the process and the device, a queue's
//! its handle or id, its replay track's the handle's complement, a copy track's its engine's
//! (under a fixed pattern). A description that arrives after the device's tracks were made
//! (further out of order than the merge's window) cannot rename them: it is logged and counted
//! ([`Gpu::late_descriptions`]).

use std::io::Write;

use kreplay_common::stream::{GpuDevice, UNKNOWN_ORDINAL, gpu_runtime, queue_ids};

use super::super::FastMap;
use super::Gpu;
use crate::perfetto::{TraceWriter, Track, WriterError, name_hash};

/// The key of the copy track of `engine` under its device's group.
fn copy_key(engine: u64) -> u64 {
    !0xc0b1 ^ engine
}

/// The name of the track group of device `agent` of process `pid` (named `process`).
pub fn group_name(desc: Option<&GpuDevice>, agent: u64, process: &str, pid: u32) -> String {
    let who = format!("({process} {pid})");
    match desc {
        Some(d) if d.runtime == gpu_runtime::CUDA => {
            let ordinal = match d.ordinal {
                UNKNOWN_ORDINAL => agent,
                o => u64::from(o),
            };
            if d.name.is_empty() {
                format!("GPU {ordinal} {who}")
            } else {
                format!("GPU {ordinal}: {} {who}", d.name)
            }
        }
        Some(d) if !d.name.is_empty() => format!("GPU agent {agent:#x}: {} {who}", d.name),
        _ => format!("GPU agent {agent:#x} {who}"),
    }
}

/// The name of the track of queue (stream) `queue` of a device.
pub fn queue_name(desc: Option<&GpuDevice>, queue: u64) -> String {
    match desc.map(|d| (d.runtime, d.queues)) {
        Some((gpu_runtime::CUDA, queue_ids::STREAM_ID)) => format!("stream {queue}"),
        // `CUstream` 0 is the default stream.
        Some((gpu_runtime::CUDA, _)) if queue == 0 => "default stream".to_owned(),
        Some((gpu_runtime::CUDA, _)) => format!("stream {queue:#x}"),
        _ => format!("queue {queue:#x}"),
    }
}

/// The name of the copy track of `engine` of a device: on CUDA its stream's name and
/// `copies`; on HSA `copies` for the unnamed copy engine (0), else `copies 0x…`.
pub fn copy_track_name(desc: Option<&GpuDevice>, engine: u64) -> String {
    match desc {
        Some(d) if d.runtime == gpu_runtime::CUDA => {
            format!("{} copies", queue_name(desc, engine))
        }
        _ if engine == 0 => "copies".to_owned(),
        _ => format!("copies {engine:#x}"),
    }
}

/// The name of the track of replay slices that cannot nest under their dispatch on `queue`.
pub fn replay_track_name(desc: Option<&GpuDevice>, queue: u64) -> String {
    format!("{} replay", queue_name(desc, queue))
}

impl Gpu {
    /// Takes the tool's description of a device of process `pid`, for the tracks made after it.
    pub fn describe(&mut self, pid: u32, d: &GpuDevice) {
        if self.devices.contains_key(&(pid, d.device))
            && self.descriptions.get(&(pid, d.device)) != Some(d)
        {
            tracing::debug!(pid, device = d.device, "GPU description after its tracks");
            self.late_descriptions += 1;
        }
        self.descriptions.insert((pid, d.device), d.clone());
    }

    /// The description of device `device` of `pid`, if the stream had one.
    fn description(&self, pid: u32, device: u64) -> Option<&GpuDevice> {
        self.descriptions.get(&(pid, device))
    }

    /// The track group of `agent` of `pid`, under the process's track, made on first use.
    pub(super) fn device<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        agent: u64,
        process_name: &dyn Fn(u32) -> String,
    ) -> Result<Track, WriterError> {
        if let Some(&t) = self.devices.get(&(pid, agent)) {
            return Ok(t);
        }
        let pname = process_name(pid);
        let process = w.process_track(pid as i32, &pname)?;
        let key = name_hash(&format!("GPU {pid}/{agent:x}"));
        let name = group_name(self.description(pid, agent), agent, &pname, pid);
        let t = w.child_track(process, key, &name)?;
        self.devices.insert((pid, agent), t);
        Ok(t)
    }

    /// The track of queue (stream) `queue` of `agent`, made on first use.
    pub(super) fn queue<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        agent: u64,
        device: Track,
        queue: u64,
    ) -> Result<Track, WriterError> {
        let desc = &self.descriptions;
        child_once(
            &mut self.queues,
            (pid, agent, queue),
            w,
            device,
            queue,
            || queue_name(desc.get(&(pid, agent)), queue),
        )
    }

    /// The copy track of `engine` of `agent`, made on first use.
    pub(super) fn copy_track<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        agent: u64,
        device: Track,
        engine: u64,
    ) -> Result<Track, WriterError> {
        let desc = &self.descriptions;
        let key = (pid, agent, engine);
        child_once(
            &mut self.copy_tracks,
            key,
            w,
            device,
            copy_key(engine),
            || copy_track_name(desc.get(&(pid, agent)), engine),
        )
    }

    /// The replay track of `queue` of `agent` (track group `device`), made on first use.
    pub(super) fn replay_track<W: Write>(
        &mut self,
        w: &mut TraceWriter<W>,
        pid: u32,
        agent: u64,
        device: Track,
        queue: u64,
    ) -> Result<Track, WriterError> {
        let desc = &self.descriptions;
        let key = (pid, device.uuid(), queue);
        child_once(&mut self.replay_tracks, key, w, device, !queue, || {
            replay_track_name(desc.get(&(pid, agent)), queue)
        })
    }
}

/// The track `map` holds for `key`; on first use a child of `device` under `track_key`, named
/// by `name`, which is then kept there.
fn child_once<W: Write, K: std::hash::Hash + Eq>(
    map: &mut FastMap<K, Track>,
    key: K,
    w: &mut TraceWriter<W>,
    device: Track,
    track_key: u64,
    name: impl FnOnce() -> String,
) -> Result<Track, WriterError> {
    if let Some(&t) = map.get(&key) {
        return Ok(t);
    }
    let t = w.child_track(device, track_key, &name())?;
    map.insert(key, t);
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuda(queues: u8, ordinal: u32, name: &str) -> GpuDevice {
        GpuDevice {
            pid: 1234,
            device: 0,
            runtime: gpu_runtime::CUDA,
            queues,
            ordinal,
            name: name.into(),
        }
    }

    #[test]
    fn cuda_devices_are_named_as_nsight_systems_names_them() {
        let h200 = cuda(queue_ids::STREAM_ID, 0, "NVIDIA H200");
        let d = Some(&h200);
        assert_eq!(
            group_name(d, 0, "python3", 1234),
            "GPU 0: NVIDIA H200 (python3 1234)"
        );
        assert_eq!(queue_name(d, 7), "stream 7");
        assert_eq!(copy_track_name(d, 7), "stream 7 copies");
        assert_eq!(replay_track_name(d, 13), "stream 13 replay");
        let nameless = cuda(queue_ids::STREAM_ID, 1, "");
        assert_eq!(group_name(Some(&nameless), 1, "app", 9), "GPU 1 (app 9)");
        let unknown = cuda(queue_ids::STREAM_ID, UNKNOWN_ORDINAL, "");
        assert_eq!(group_name(Some(&unknown), 3, "app", 9), "GPU 3 (app 9)");
        // Handles (kreplay replay's launches): the default stream is 0.
        let handles = cuda(queue_ids::HANDLE, 0, "NVIDIA H200");
        assert_eq!(queue_name(Some(&handles), 0), "default stream");
        assert_eq!(queue_name(Some(&handles), 0x5555_0000), "stream 0x55550000");
        assert_eq!(
            replay_track_name(Some(&handles), 0),
            "default stream replay"
        );
    }

    #[test]
    fn hsa_agents_keep_their_handles_with_their_name_when_known() {
        let mi300 = GpuDevice {
            pid: 1234,
            device: 0x7f00,
            runtime: gpu_runtime::HSA,
            queues: queue_ids::HANDLE,
            ordinal: UNKNOWN_ORDINAL,
            name: "AMD Instinct MI300X (gfx942)".into(),
        };
        let d = Some(&mi300);
        assert_eq!(
            group_name(d, 0x7f00, "app", 1234),
            "GPU agent 0x7f00: AMD Instinct MI300X (gfx942) (app 1234)"
        );
        assert_eq!(queue_name(d, 0x9e00), "queue 0x9e00");
        assert_eq!(copy_track_name(d, 0), "copies");
        assert_eq!(copy_track_name(d, 0x51), "copies 0x51");
        assert_eq!(replay_track_name(d, 0x9e00), "queue 0x9e00 replay");
        // Undescribed (a version-6 stream): the agent and queue names, whatever the runtime.
        assert_eq!(
            group_name(None, 0, "python3", 1234),
            "GPU agent 0x0 (python3 1234)"
        );
        assert_eq!(queue_name(None, 7), "queue 0x7");
        assert_eq!(copy_track_name(None, 7), "copies 0x7");
    }
}
