//! [`fnv1a`]: a hash of a text that every build and platform computes alike.

/// The 64-bit FNV-1a hash of `text`: stable across builds and platforms, unlike the standard
/// library's hasher, so two processes (or two runs of a tool) derive the same name from the
/// same text.
pub(crate) fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_its_reference_values() {
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
