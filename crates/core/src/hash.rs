//! SHA-256 digests as the project writes them (64 lowercase hex digits): of bytes, and of a file
//! read in 1 MiB pieces (a model of hundreds of megabytes is never held whole for its digest).

use std::io::Read as _;
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::{Error, Result};

/// SHA-256 of `bytes`, as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// SHA-256 of the file at `path`, as 64 lowercase hex digits.
pub fn sha256_file(path: &Path) -> Result<String> {
    let io = |source| Error::io(path, source);
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_and_bytes_digests_agree_with_the_published_vector() {
        // FIPS 180-2's "abc" vector.
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex(b"abc"), abc);
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("abc");
        std::fs::write(&file, b"abc").expect("write");
        assert_eq!(sha256_file(&file).expect("digest"), abc);
        // Longer than one read.
        let big = vec![7u8; (1 << 20) + 3];
        std::fs::write(&file, &big).expect("write");
        assert_eq!(sha256_file(&file).expect("digest"), sha256_hex(&big));
        let missing = dir.path().join("missing");
        let err = sha256_file(&missing).expect_err("a missing file").to_string();
        assert!(err.contains("missing"), "{err}");
    }
}
