//! The restore-only-what-changed arguments of snapshot and restore slices: placement, check,
//! chunk size and bytes hashed (snapshot); placement, check, bytes checked, dirty chunks,
//! check time and failed regions (restore). Records from tools before these fields (placement 0) get none.

use std::io::Write;

use kreplay_common::stream::{Restore, Snapshot, snapshot_mode};

use crate::perfetto::{Annotation, AnnotationName, TraceWriter, Value};

/// Annotation names of the chunked-restore fields.
pub struct ChunkNames {
    placement: AnnotationName,
    check: AnnotationName,
    chunk_size: AnnotationName,
    bytes_hashed: AnnotationName,
    bytes_checked: AnnotationName,
    dirty_chunks: AnnotationName,
    check_ns: AnnotationName,
    failed_regions: AnnotationName,
}

impl ChunkNames {
    /// Interns the names on `w`.
    pub fn new<W: Write>(w: &mut TraceWriter<W>) -> Self {
        Self {
            placement: w.annotation_name("placement"),
            check: w.annotation_name("check"),
            chunk_size: w.annotation_name("chunk_size"),
            bytes_hashed: w.annotation_name("bytes_hashed"),
            bytes_checked: w.annotation_name("bytes_checked"),
            dirty_chunks: w.annotation_name("dirty_chunks"),
            check_ns: w.annotation_name("check_ns"),
            failed_regions: w.annotation_name("failed_regions"),
        }
    }

    fn mode(&self, placement: u8, check: u8, v: &mut Vec<Annotation<'static>>) {
        v.push(Annotation {
            name: self.placement,
            value: Value::Str(snapshot_mode::placement_name(placement)),
        });
        v.push(Annotation {
            name: self.check,
            value: Value::Str(snapshot_mode::check_name(check)),
        });
    }

    /// Appends a snapshot's fields to `v`.
    pub fn snapshot(&self, r: &Snapshot, v: &mut Vec<Annotation<'static>>) {
        if r.placement == snapshot_mode::UNKNOWN {
            return;
        }
        self.mode(r.placement, r.check, v);
        for (name, x) in [
            (self.chunk_size, r.chunk_size),
            (self.bytes_hashed, r.bytes_hashed),
        ] {
            v.push(Annotation {
                name,
                value: Value::Uint(x),
            });
        }
    }

    /// Appends a restore's fields to `v`.
    pub fn restore(&self, r: &Restore, v: &mut Vec<Annotation<'static>>) {
        if r.placement == snapshot_mode::UNKNOWN {
            return;
        }
        self.mode(r.placement, r.check, v);
        for (name, x) in [
            (self.bytes_checked, r.bytes_checked),
            (self.dirty_chunks, r.dirty_chunks),
            (self.check_ns, r.check_ns),
            (self.failed_regions, r.failed),
        ] {
            v.push(Annotation {
                name,
                value: Value::Uint(x),
            });
        }
    }
}
