//! The cluster hash slot of a key, as Redis computes it: CRC16 (XMODEM) of the key's hash
//! tag (the part between the first `{` and the next `}`, when not empty), modulo 16384.
//! The watchdog groups renewals by slot with it, since one script may only touch keys of
//! one slot.

/// The number of hash slots in a Redis Cluster.
pub(crate) const SLOTS: u16 = 16384;

/// The slot of `key`.
pub(crate) fn slot_of(key: &[u8]) -> u16 {
    crc16_xmodem(hash_tag(key)) % SLOTS
}

fn hash_tag(key: &[u8]) -> &[u8] {
    let tag = key.iter().position(|b| *b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let len = rest.iter().position(|b| *b == b'}')?;
        (len > 0).then(|| &rest[..len])
    });
    tag.unwrap_or(key)
}

fn crc16_xmodem(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for byte in bytes {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::slot_of;

    #[test]
    fn slots_match_cluster_keyslot() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.0.
        for (key, slot) in [
            ("a", 15495),
            ("b", 3300),
            ("k6", 325),
            ("abc", 7638),
            ("x{abc}y", 7638),
            ("redis-locks:{abc}:fence", 7638),
            ("{}abc", 5980),
            ("{}a", 10875),
            ("123456789", 12739),
        ] {
            assert_eq!(slot_of(key.as_bytes()), slot, "{key}");
        }
        // An empty tag does not count: the whole key is hashed.
        assert_ne!(slot_of(b"{}a"), slot_of(b"a"));
    }
}
