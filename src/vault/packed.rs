//! A note's bytes as the catalog keeps them: one LZ4 block when that is smaller, else as
//! they are. The catalog holds every note's bytes for reads, search and grep, so at
//! scale they are most of a daemon's memory; markdown packs to about half, and a block
//! unpacks at several GB/s, so a read or a grep pays little for it.

use std::borrow::Cow;
use std::sync::Arc;

use lz4_flex::block::CompressTable;

/// The largest output buffer a [`Scratch`] keeps between notes.
const SCRATCH_KEPT: usize = 1 << 20;

/// What packing many notes in a row reuses: the encoder's hash table and its output
/// buffer (made for each note, they slowed a scan's packing: benches/README.md, "packed
/// note bytes"). Owned by a scan's job while it runs, never by a thread for good: kept
/// per thread, they would pin each thread's allocator pages, and an instance of 1,000
/// vaults has a thousand threads.
#[derive(Default)]
pub struct Scratch {
    table: CompressTable,
    out: Vec<u8>,
}

/// A note's bytes, packed. Clones share them.
#[derive(Clone)]
pub struct Packed {
    /// An LZ4 block when shorter than `len`, else the bytes themselves.
    data: Arc<[u8]>,
    len: usize,
}

impl Packed {
    /// `bytes` packed with a worker's [`Scratch`] (kept as they are when LZ4 does not
    /// make them smaller).
    pub fn with(bytes: &[u8], scratch: &mut Scratch) -> Self {
        let packed = Self::block(bytes, scratch);
        Self {
            data: packed.unwrap_or_else(|| bytes.into()),
            len: bytes.len(),
        }
    }

    /// `bytes` packed, sharing their allocation when LZ4 does not make them smaller.
    pub fn of(bytes: Arc<[u8]>) -> Self {
        match Self::block(&bytes, &mut Scratch::default()) {
            Some(data) => Self {
                data,
                len: bytes.len(),
            },
            None => Self::plain(bytes),
        }
    }

    /// The LZ4 block of `bytes`, when shorter than they are.
    fn block(bytes: &[u8], scratch: &mut Scratch) -> Option<Arc<[u8]>> {
        let Scratch { table, out } = scratch;
        out.resize(lz4_flex::block::get_maximum_output_size(bytes.len()), 0);
        let block = lz4_flex::block::compress_into_with_table(bytes, out, table)
            .ok()
            .filter(|n| *n < bytes.len())
            .map(|n| Arc::from(&out[..n]));
        if out.len() > SCRATCH_KEPT {
            // A large note's buffer (and table) is not kept for the next.
            *scratch = Scratch::default();
        }
        block
    }

    /// `bytes` kept as they are, sharing their allocation (bytes held only a moment, or
    /// bytes a caller already holds whole).
    pub fn plain(bytes: Arc<[u8]>) -> Self {
        Self {
            len: bytes.len(),
            data: bytes,
        }
    }

    /// The length of the bytes (not of what is kept).
    pub fn len(&self) -> usize {
        self.len
    }

    /// The same packed bytes in an allocation of the calling thread's: a scan's worker
    /// made these among short-lived allocations, and pages holding a few kept bytes
    /// among freed ones stay resident.
    pub fn moved_here(&self) -> Self {
        Self {
            data: Arc::from(&self.data[..]),
            len: self.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many bytes are kept for them.
    #[cfg(test)]
    fn kept_len(&self) -> usize {
        self.data.len()
    }

    /// The bytes: borrowed when kept as they are, else unpacked.
    pub fn bytes(&self) -> Cow<'_, [u8]> {
        match self.unpacked() {
            None => Cow::Borrowed(&self.data),
            Some(v) => Cow::Owned(v),
        }
    }

    /// The bytes in an `Arc` of their own (shared when kept as they are).
    pub fn to_arc(&self) -> Arc<[u8]> {
        match self.unpacked() {
            None => self.data.clone(),
            Some(v) => v.into(),
        }
    }

    fn unpacked(&self) -> Option<Vec<u8>> {
        if self.data.len() == self.len {
            return None;
        }
        // Only `block` packs, with this crate's own encoder and the length it read: a
        // block that does not unpack to it is memory gone bad, not input.
        Some(
            lz4_flex::block::decompress(&self.data, self.len)
                .expect("a block packed by Packed::block unpacks"),
        )
    }
}

impl std::fmt::Debug for Packed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Packed")
            .field("len", &self.len)
            .field("kept", &self.data.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_come_back_as_they_went_in_packed_or_not() {
        let text =
            "# A note\n\nThe same words again. The same words again. The same words again.\n"
                .repeat(20);
        let cases: [&[u8]; 5] = [b"", b"x", b"# A\n", text.as_bytes(), &[0xff, 0, 7, 0xfe]];
        for bytes in cases {
            let p = Packed::of(Arc::from(bytes));
            assert_eq!(p.len(), bytes.len());
            assert_eq!(&p.bytes()[..], bytes);
            assert_eq!(&p.to_arc()[..], bytes);
            assert!(p.kept_len() <= bytes.len());
        }
        let long = Packed::with(text.as_bytes(), &mut Scratch::default());
        assert!(long.kept_len() * 4 < text.len(), "repeated markdown packs");
        assert_eq!(
            long.bytes(),
            Packed::plain(Arc::from(text.as_bytes())).bytes()
        );
    }
}
