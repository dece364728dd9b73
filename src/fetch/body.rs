//! A response body as its chunks arrive, copied as little as possible: a
//! body that comes in one chunk (most pages, read from one socket buffer)
//! is kept as that chunk, shared and never copied; a body in several
//! chunks is gathered once into a buffer sized from `Content-Length` (no
//! growth by doubling, no re-copies). Nothing is zero-filled first.

use bytes::{Bytes, BytesMut};

/// The body read so far.
#[derive(Debug, Default)]
pub struct BodyBuffer {
    /// The only chunk, while there is one.
    first: Option<Bytes>,
    /// Everything, once a second chunk came.
    gathered: BytesMut,
    /// The expected size (`Content-Length`, capped), for the buffer.
    hint: usize,
}

impl BodyBuffer {
    /// An empty body expected to be about `hint` bytes.
    pub fn with_hint(hint: usize) -> Self {
        BodyBuffer {
            hint,
            ..Default::default()
        }
    }

    /// Bytes so far.
    pub fn len(&self) -> usize {
        self.first.as_ref().map_or(0, Bytes::len) + self.gathered.len()
    }

    /// Whether nothing came yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds the next chunk.
    pub fn push(&mut self, chunk: Bytes) {
        if chunk.is_empty() {
            return;
        }
        if self.first.is_none() && self.gathered.is_empty() {
            self.first = Some(chunk);
            return;
        }
        if let Some(first) = self.first.take() {
            let want = self.hint.max(first.len() + chunk.len());
            self.gathered.reserve(want);
            self.gathered.extend_from_slice(&first);
        }
        self.gathered.extend_from_slice(&chunk);
    }

    /// The body.
    pub fn finish(self) -> Bytes {
        match self.first {
            Some(first) => first,
            None => self.gathered.freeze(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_chunk_is_kept_without_a_copy() {
        let chunk = Bytes::from(vec![7u8; 1000]);
        let at = chunk.as_ptr();
        let mut body = BodyBuffer::with_hint(1000);
        body.push(Bytes::new());
        body.push(chunk);
        assert_eq!(body.len(), 1000);
        let out = body.finish();
        assert_eq!(out.as_ptr(), at, "the chunk itself, not a copy");
    }

    #[test]
    fn several_chunks_are_gathered_in_order_into_one_buffer() {
        let mut body = BodyBuffer::with_hint(9);
        for part in ["abc", "de", "", "fghi"] {
            body.push(Bytes::from(part));
        }
        assert_eq!(body.len(), 9);
        assert_eq!(&body.finish()[..], b"abcdefghi");
        let empty = BodyBuffer::default();
        assert!(empty.is_empty());
        assert!(empty.finish().is_empty());
    }
}
