//! One upload to the blob store, hashed and counted as its bytes go: the attachment
//! upload route, a device push's private notes, the export archive and `import` all
//! stream through it, so the sha256 an upload is finished with is always the hash of
//! what was written.

use bytes::Bytes;
use futures::future::BoxFuture;
use sha2::Digest;

use crate::error::Result;

/// An upload under way. Dropped unfinished, it is aborted.
pub trait BlobUpload: Send {
    /// Add the next bytes.
    fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, Result<()>>;

    /// Finish: the bytes become the blob `sha256` (the hash of what was written, which
    /// the caller computed while streaming), or the export the upload was begun for.
    fn finish<'a>(self: Box<Self>, sha256: &'a str) -> BoxFuture<'a, Result<()>>;
}

/// An upload under way with the hash and size of what went up so far. Dropped
/// unfinished, it is aborted (as its [`BlobUpload`] is).
pub struct HashedUpload {
    upload: Box<dyn BlobUpload>,
    hasher: sha2::Sha256,
    size: u64,
}

/// What a finished upload held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uploaded {
    /// SHA-256 (hex) of the bytes.
    pub sha256: String,
    pub size: u64,
}

impl HashedUpload {
    pub fn new(upload: Box<dyn BlobUpload>) -> Self {
        Self {
            upload,
            hasher: sha2::Sha256::new(),
            size: 0,
        }
    }

    /// Add the next bytes.
    pub async fn write(&mut self, chunk: Bytes) -> Result<()> {
        self.hasher.update(&chunk);
        self.size += chunk.len() as u64;
        self.upload.write(chunk).await
    }

    /// The SHA-256 (hex) of what went up so far.
    pub fn sha256(&self) -> String {
        crate::vault::observe::hex(&self.hasher.clone().finalize())
    }

    /// Finish with the hash of what was written: the bytes become the blob of that
    /// sha256 (or the export the upload was begun for).
    pub async fn finish(self) -> Result<Uploaded> {
        let sha256 = crate::vault::observe::hex(&self.hasher.finalize());
        self.upload.finish(&sha256).await?;
        Ok(Uploaded {
            sha256,
            size: self.size,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures::future::BoxFuture;
    use futures::FutureExt;

    use super::*;

    /// What the store was handed: the bytes, and the sha256 the upload was finished with.
    #[derive(Default)]
    struct Seen {
        bytes: Vec<u8>,
        finished: Option<String>,
    }

    struct Recording(Arc<Mutex<Seen>>);

    impl BlobUpload for Recording {
        fn write(&mut self, chunk: Bytes) -> BoxFuture<'_, Result<()>> {
            self.0.lock().unwrap().bytes.extend_from_slice(&chunk);
            async { Ok(()) }.boxed()
        }

        fn finish<'a>(self: Box<Self>, sha256: &'a str) -> BoxFuture<'a, Result<()>> {
            self.0.lock().unwrap().finished = Some(sha256.to_string());
            async { Ok(()) }.boxed()
        }
    }

    /// The three callers that hashed beside their own loop now hash here: in chunks or
    /// whole, the upload is finished with the hash and size of exactly what went up.
    #[test]
    fn an_upload_is_finished_with_the_hash_of_what_went_up() {
        for chunks in [vec![], vec![&b"abc"[..]], vec![&b"a"[..], b"", b"bc"]] {
            let seen = Arc::new(Mutex::new(Seen::default()));
            let mut upload = HashedUpload::new(Box::new(Recording(seen.clone())));
            let done = futures::executor::block_on(async {
                for c in &chunks {
                    upload.write(Bytes::copy_from_slice(c)).await?;
                }
                upload.finish().await
            })
            .unwrap();
            let seen = seen.lock().unwrap();
            let whole = chunks.concat();
            assert_eq!(seen.bytes, whole);
            assert_eq!(done.sha256, crate::vault::observe::sha256_hex(&whole));
            assert_eq!(seen.finished.as_deref(), Some(done.sha256.as_str()));
            assert_eq!(done.size, whole.len() as u64);
        }
        assert_eq!(
            crate::vault::observe::sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
