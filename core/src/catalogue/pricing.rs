//! Prices. On-demand prices are data (karpenter's us-east-1 table, applied to every region as
//! upstream does when it has no table for the region). Spot prices are **synthetic**: no registry
//! package ships usable spot prices, so a deterministic sample is derived here.
//!
//! `spot(type, zone ID) = on-demand × r`, where `r = 0.30 + 0.20 × u` and `u ∈ [0, 1)` comes from the
//! 64-bit FNV-1a hash of `"<type>\0<zone ID>"` (top 53 bits). The band [0.30, 0.50] matches the
//! spot/on-demand ratios observed for 16 us-east-1 types (0.31–0.49, median 0.42).

/// Lower end of the synthetic spot/on-demand ratio.
pub const SPOT_RATIO_MIN: f64 = 0.30;
/// Upper end (exclusive) of the synthetic spot/on-demand ratio.
pub const SPOT_RATIO_MAX: f64 = 0.50;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// 64-bit FNV-1a.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_continue(FNV_OFFSET, bytes)
}

/// FNV-1a from state `h` over `bytes` (hashing `a` then `b` equals hashing their concatenation).
fn fnv1a64_continue(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    h
}

/// The synthetic spot/on-demand ratio of `(instance type, zone ID)`, in [0.30, 0.50).
pub fn spot_ratio(instance_type: &str, zone_id: &str) -> f64 {
    // The hash of `"<type>\0<zone ID>"`, without building the key.
    let h = fnv1a64_continue(fnv1a64_continue(fnv1a64(instance_type.as_bytes()), &[0]), zone_id.as_bytes());
    let u = (h >> 11) as f64 / (1u64 << 53) as f64;
    SPOT_RATIO_MIN + (SPOT_RATIO_MAX - SPOT_RATIO_MIN) * u
}

/// The synthetic spot price of a type in a zone, given its on-demand price.
pub fn synthetic_spot_price(instance_type: &str, zone_id: &str, on_demand: f64) -> f64 {
    on_demand * spot_ratio(instance_type, zone_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_reference_vectors() {
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
    }

    #[test]
    fn ratio_hashes_type_nul_zone_id() {
        for (t, z) in [("m5.large", "use1-az1"), ("u-6tb1.metal", "apne2-az10"), ("", "")] {
            let key = format!("{t}\0{z}");
            let u = (fnv1a64(key.as_bytes()) >> 11) as f64 / (1u64 << 53) as f64;
            assert_eq!(spot_ratio(t, z), SPOT_RATIO_MIN + (SPOT_RATIO_MAX - SPOT_RATIO_MIN) * u);
        }
    }

    #[test]
    fn ratio_is_in_band_and_spread() {
        let mut min: f64 = 1.0;
        let mut max: f64 = 0.0;
        for i in 0..2000 {
            let r = spot_ratio(&format!("t{i}.large"), "use1-az1");
            assert!((SPOT_RATIO_MIN..SPOT_RATIO_MAX).contains(&r));
            min = min.min(r);
            max = max.max(r);
        }
        assert!(min < 0.31 && max > 0.49, "{min} {max}");
        assert_eq!(spot_ratio("m5.large", "use1-az1"), spot_ratio("m5.large", "use1-az1"));
        assert_ne!(spot_ratio("m5.large", "use1-az1"), spot_ratio("m5.large", "use1-az2"));
    }
}
