//! Random bits from the kernel (`/dev/urandom`), the one source for tokens and for the
//! part of an id that keeps it unique across hosts. An error is returned, never a
//! guess from the clock: a caller that needs secrecy fails; one that needs only
//! uniqueness decides itself.

use std::io::Read;

/// Eight random bytes from the kernel.
pub fn random_u64() -> std::io::Result<u64> {
    let mut bytes = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(u64::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    #[test]
    fn draws_differ() {
        let a = super::random_u64().unwrap();
        let b = super::random_u64().unwrap();
        assert_ne!(a, b);
    }
}
