//! Allocation-free helpers for rendering one record: a grid or block label (`64x1x1`) written
//! into a stack buffer, and a fixed-capacity list of annotations: allocated per slice, both
//! showed in the merge's profile.

use std::mem::MaybeUninit;

use crate::perfetto::Annotation;

/// `AxBxC` of three numbers, in a stack buffer (three u64 take at most 62 bytes).
pub struct Dim3 {
    bytes: [u8; 64],
    len: usize,
}

impl Dim3 {
    /// The label of `v`.
    pub fn new(v: [u64; 3]) -> Self {
        let mut d = Dim3 {
            bytes: [0; 64],
            len: 0,
        };
        for (i, n) in v.into_iter().enumerate() {
            if i > 0 {
                d.bytes[d.len] = b'x';
                d.len += 1;
            }
            d.push_decimal(n);
        }
        d
    }

    fn push_decimal(&mut self, mut n: u64) {
        let mut digits = [0u8; 20];
        let mut k = digits.len();
        loop {
            k -= 1;
            digits[k] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let len = digits.len() - k;
        self.bytes[self.len..self.len + len].copy_from_slice(&digits[k..]);
        self.len += len;
    }

    /// The label.
    pub fn as_str(&self) -> &str {
        // Only ASCII digits and `x` are ever written.
        std::str::from_utf8(&self.bytes[..self.len]).unwrap_or("")
    }
}

/// Most annotations one slice carries: kernel, grid, block, six user arguments, size,
/// pointer, stream, result, return value, external id.
pub const MAX_ANNOTATIONS: usize = 15;

/// A list of at most [`MAX_ANNOTATIONS`] annotations on the stack, its unused slots left
/// uninitialised (filling all fifteen for every slice showed in the merge's profile).
pub struct Annotations<'a> {
    items: [MaybeUninit<Annotation<'a>>; MAX_ANNOTATIONS],
    len: usize,
}

impl Default for Annotations<'_> {
    fn default() -> Self {
        Self::new()
    }
}

impl<'a> Annotations<'a> {
    /// An empty list.
    pub fn new() -> Self {
        Annotations {
            items: [const { MaybeUninit::uninit() }; MAX_ANNOTATIONS],
            len: 0,
        }
    }

    /// Appends `a`; past [`MAX_ANNOTATIONS`] it is left out (a debug build asserts).
    pub fn push(&mut self, a: Annotation<'a>) {
        debug_assert!(self.len < MAX_ANNOTATIONS, "too many annotations");
        if self.len < MAX_ANNOTATIONS {
            self.items[self.len].write(a);
            self.len += 1;
        }
    }

    /// The annotations, in the order pushed.
    pub fn as_slice(&self) -> &[Annotation<'a>] {
        // SAFETY: `push` initialised items[..len] (len never exceeds MAX_ANNOTATIONS), and
        // MaybeUninit<T> has T's layout, so they are `len` valid, contiguous annotations.
        unsafe { std::slice::from_raw_parts(self.items.as_ptr().cast(), self.len) }
    }
}

/// Entry `i` of `v` (a stream's or a sequence's), which grows to hold it.
pub fn stream_slot<T>(v: &mut Vec<Option<T>>, i: usize) -> &mut Option<T> {
    if v.len() <= i {
        v.resize_with(i + 1, || None);
    }
    &mut v[i]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dim3_labels_match_format() {
        for v in [
            [1, 1, 1],
            [0, 0, 0],
            [64, 8, 1],
            [u64::MAX, 10, 4_294_967_295],
        ] {
            assert_eq!(Dim3::new(v).as_str(), format!("{}x{}x{}", v[0], v[1], v[2]));
        }
    }

    #[test]
    fn a_stream_slot_grows_the_vector_to_hold_it() {
        let mut v: Vec<Option<u32>> = Vec::new();
        *stream_slot(&mut v, 2) = Some(7);
        assert_eq!(v, [None, None, Some(7)]);
        assert_eq!(*stream_slot(&mut v, 0), None);
        assert_eq!(v.len(), 3);
    }

    #[test]
    fn annotations_keep_the_order_pushed_and_stop_at_the_cap() {
        use crate::perfetto::{AnnotationName, Value};
        let a = |i: u64| Annotation {
            name: AnnotationName(i as u32),
            value: Value::Uint(i),
        };
        let mut list = Annotations::new();
        assert_eq!(list.as_slice(), []);
        for i in 0..3 {
            list.push(a(i));
        }
        assert_eq!(list.as_slice(), [a(0), a(1), a(2)]);
        if cfg!(debug_assertions) {
            return; // Past the cap a debug build asserts.
        }
        for i in 3..20 {
            list.push(a(i));
        }
        assert_eq!(list.as_slice().len(), MAX_ANNOTATIONS);
        assert_eq!(list.as_slice()[MAX_ANNOTATIONS - 1], a(14));
    }
}
