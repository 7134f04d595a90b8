//! The annotation names of the GPU records a merge renders (dispatches, snapshots, restores,
//! declines) and the argument lists built from them.

use std::io::Write;

use crate::perfetto::{Annotation, AnnotationName, TraceWriter, Value};

/// Annotation names of GPU records.
pub struct GpuNames {
    pub(super) grid: AnnotationName,
    pub(super) workgroup: AnnotationName,
    pub(super) correlation: AnnotationName,
    pub(super) kernel_object: AnnotationName,
    pub(super) external_id: AnnotationName,
    pub(super) bytes: AnnotationName,
    pub(super) regions: AnnotationName,
    pub(super) skipped: AnnotationName,
    pub(super) pass: AnnotationName,
    pub(super) reason: AnnotationName,
    pub(super) region: AnnotationName,
    pub(super) offset: AnnotationName,
    pub(super) group_segment: AnnotationName,
    pub(super) private_segment: AnnotationName,
    pub(super) queue: AnnotationName,
    pub(super) direction: AnnotationName,
    pub(super) gbps: AnnotationName,
    pub(super) gpu_us: AnnotationName,
    /// The chunked-restore fields of snapshot and restore slices.
    pub chunk: super::replay_args::ChunkNames,
}

impl GpuNames {
    /// Interns the names on `w`.
    pub fn new<W: Write>(w: &mut TraceWriter<W>) -> Self {
        Self {
            grid: w.annotation_name("grid"),
            workgroup: w.annotation_name("workgroup"),
            correlation: w.annotation_name("correlation"),
            kernel_object: w.annotation_name("kernel_object"),
            external_id: w.annotation_name("external_id"),
            bytes: w.annotation_name("bytes"),
            regions: w.annotation_name("regions"),
            skipped: w.annotation_name("skipped"),
            pass: w.annotation_name("pass"),
            reason: w.annotation_name("reason"),
            region: w.annotation_name("region"),
            offset: w.annotation_name("offset"),
            group_segment: w.annotation_name("group_segment"),
            private_segment: w.annotation_name("private_segment"),
            queue: w.annotation_name("queue"),
            direction: w.annotation_name("direction"),
            gbps: w.annotation_name("GB/s"),
            gpu_us: w.annotation_name("gpu_us"),
            chunk: super::replay_args::ChunkNames::new(w),
        }
    }
}

impl GpuNames {
    /// `bytes`, `regions` (and `skipped`, `pass` when given) of a snapshot or restore.
    pub fn copy_args(
        &self,
        bytes: u64,
        regions: u64,
        skipped: Option<u64>,
        pass: Option<u32>,
        correlation: u64,
    ) -> Vec<Annotation<'static>> {
        let mut v = Vec::with_capacity(10);
        if let Some(p) = pass {
            v.push(Annotation {
                name: self.pass,
                value: Value::Uint(u64::from(p)),
            });
        }
        v.push(Annotation {
            name: self.bytes,
            value: Value::Uint(bytes),
        });
        v.push(Annotation {
            name: self.regions,
            value: Value::Uint(regions),
        });
        if let Some(s) = skipped {
            v.push(Annotation {
                name: self.skipped,
                value: Value::Uint(s),
            });
        }
        v.push(Annotation {
            name: self.correlation,
            value: Value::Uint(correlation),
        });
        v
    }

    /// `pass` and `correlation` of a replay pass, and `gpu_us`, the GPU's own time of it, where
    /// it was measured.
    pub fn pass_args(&self, pass: u32, correlation: u64, gpu_ns: u64) -> Vec<Annotation<'static>> {
        let mut a = vec![
            Annotation {
                name: self.pass,
                value: Value::Uint(u64::from(pass)),
            },
            Annotation {
                name: self.correlation,
                value: Value::Uint(correlation),
            },
        ];
        if gpu_ns > 0 {
            a.push(Annotation {
                name: self.gpu_us,
                value: Value::Double(gpu_ns as f64 / 1e3),
            });
        }
        a
    }

    /// `pass`, `bytes` and `correlation` of a replay step.
    pub fn step_args(&self, pass: u32, bytes: u64, correlation: u64) -> [Annotation<'static>; 3] {
        [
            Annotation {
                name: self.pass,
                value: Value::Uint(u64::from(pass)),
            },
            Annotation {
                name: self.bytes,
                value: Value::Uint(bytes),
            },
            Annotation {
                name: self.correlation,
                value: Value::Uint(correlation),
            },
        ]
    }

    /// `reason` and `correlation` of a decline.
    pub fn decline_args<'a>(&self, reason: &'a str, correlation: u64) -> [Annotation<'a>; 2] {
        [
            Annotation {
                name: self.reason,
                value: Value::Str(reason),
            },
            Annotation {
                name: self.correlation,
                value: Value::Uint(correlation),
            },
        ]
    }

    /// `pass`, `region`, `offset` and `correlation` of a nondeterminism report.
    pub fn nondeterministic_args(
        &self,
        pass: u32,
        region: u64,
        offset: u64,
        correlation: u64,
    ) -> [Annotation<'static>; 4] {
        [
            Annotation {
                name: self.pass,
                value: Value::Uint(u64::from(pass)),
            },
            Annotation {
                name: self.region,
                value: Value::Pointer(region),
            },
            Annotation {
                name: self.offset,
                value: Value::Uint(offset),
            },
            Annotation {
                name: self.correlation,
                value: Value::Uint(correlation),
            },
        ]
    }
}
