//! Kubernetes resource quantities (`500m`, `1.5Gi`, `2e3`), parsed exactly.
//!
//! upstream: `k8s.io/apimachinery/pkg/api/resource`. A quantity is a signed decimal number with an
//! optional binary-SI (`Ki`…`Ei`), decimal-SI (`n`, `u`, `m`, `k`…`E`) or exponent (`e3`, `E-2`)
//! suffix. We hold the value as an integer count of nano-units, which represents every suffix
//! exactly; like upstream, precision finer than a nano-unit is rounded up. Resource arithmetic in
//! this crate never uses floating point.

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

const NANO: i128 = 1_000_000_000;

/// How a quantity prefers to be printed; upstream keeps the suffix family of the parsed text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Format {
    /// `Ki`, `Mi`, … (memory-like quantities).
    BinarySi,
    /// `m`, `k`, `M`, … (cpu-like quantities and plain numbers).
    #[default]
    DecimalSi,
    /// `e3`, `E6`, …
    DecimalExponent,
}

/// An exact Kubernetes quantity.
#[derive(Debug, Clone, Copy, Default)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

/// Why a string is not a valid quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("quantity is empty")]
    Empty,
    #[error("quantity {0:?} does not match the pattern <number><suffix> (for example 500m, 1.5Gi, 2e3)")]
    Syntax(String),
    #[error("quantity {0:?} has an unknown suffix {1:?} (expected one of n u m k M G T P E Ki Mi Gi Ti Pi Ei, or an exponent such as e3)")]
    Suffix(String, String),
    #[error("quantity {0:?} is too large")]
    Overflow(String),
}

impl Quantity {
    pub const ZERO: Quantity = Quantity { nanos: 0, format: Format::DecimalSi };

    /// Parses the Kubernetes quantity syntax.
    pub fn parse(text: &str) -> Result<Quantity, QuantityError> {
        let s = text.trim();
        if s.is_empty() {
            return Err(QuantityError::Empty);
        }
        let syntax = || QuantityError::Syntax(text.to_string());
        let overflow = || QuantityError::Overflow(text.to_string());
        let (negative, rest) = match s.as_bytes()[0] {
            b'+' => (false, &s[1..]),
            b'-' => (true, &s[1..]),
            _ => (false, s),
        };
        let number_len = rest.bytes().take_while(|b| b.is_ascii_digit() || *b == b'.').count();
        let (number, suffix) = rest.split_at(number_len);
        let (int_part, frac_part) = match number.split_once('.') {
            Some((i, f)) => {
                if f.contains('.') {
                    return Err(syntax());
                }
                (i, f)
            }
            None => (number, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(syntax());
        }
        // Value = digits × 10^(exp10) × 2^(exp2), with digits = int_part ++ frac_part.
        let (exp10, exp2, format): (i32, u32, Format) = match suffix {
            "" => (0, 0, Format::DecimalSi),
            "n" => (-9, 0, Format::DecimalSi),
            "u" => (-6, 0, Format::DecimalSi),
            "m" => (-3, 0, Format::DecimalSi),
            "k" => (3, 0, Format::DecimalSi),
            "M" => (6, 0, Format::DecimalSi),
            "G" => (9, 0, Format::DecimalSi),
            "T" => (12, 0, Format::DecimalSi),
            "P" => (15, 0, Format::DecimalSi),
            "E" => (18, 0, Format::DecimalSi),
            "Ki" => (0, 10, Format::BinarySi),
            "Mi" => (0, 20, Format::BinarySi),
            "Gi" => (0, 30, Format::BinarySi),
            "Ti" => (0, 40, Format::BinarySi),
            "Pi" => (0, 50, Format::BinarySi),
            "Ei" => (0, 60, Format::BinarySi),
            other => {
                let exp = other
                    .strip_prefix('e')
                    .or_else(|| other.strip_prefix('E'))
                    .ok_or_else(|| QuantityError::Suffix(text.to_string(), other.to_string()))?;
                let digits = exp.strip_prefix(['+', '-']).unwrap_or(exp);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 4 {
                    return Err(QuantityError::Suffix(text.to_string(), other.to_string()));
                }
                let e: i32 = exp.parse().map_err(|_| syntax())?;
                (e, 0, Format::DecimalExponent)
            }
        };
        // Strip leading zeros so long zero-padded inputs do not overflow.
        let mut digits: String = int_part.trim_start_matches('0').to_string();
        digits.push_str(frac_part);
        let digits = digits.trim_start_matches('0');
        let mut scale = exp10 - frac_part.len() as i32 + 9; // power of ten applied to `digits`, in nano-units
                                                            // Drop trailing zeros of the fraction into the scale to keep the mantissa small.
        let trimmed = digits.trim_end_matches('0');
        scale += (digits.len() - trimmed.len()) as i32;
        let digits = trimmed;
        if digits.is_empty() {
            return Ok(Quantity { nanos: 0, format });
        }
        if digits.len() > 38 {
            return Err(overflow());
        }
        let mantissa: i128 = digits.parse().map_err(|_| overflow())?;
        let shifted = mantissa.checked_mul(1i128 << exp2).ok_or_else(overflow)?;
        let nanos = if scale >= 0 {
            let factor = 10i128.checked_pow(scale as u32).ok_or_else(overflow)?;
            shifted.checked_mul(factor).ok_or_else(overflow)?
        } else {
            // Finer than a nano-unit: round up (away from zero), as upstream does.
            match 10i128.checked_pow((-scale) as u32) {
                Some(divisor) => (shifted + divisor - 1) / divisor,
                None => 1,
            }
        };
        Ok(Quantity { nanos: if negative { -nanos } else { nanos }, format })
    }

    /// A whole number of units (cores, bytes, pods).
    pub fn from_units(units: i64) -> Quantity {
        Quantity { nanos: units as i128 * NANO, format: Format::DecimalSi }
    }

    /// Thousandths of a unit (millicores).
    pub fn from_millis(millis: i64) -> Quantity {
        Quantity { nanos: millis as i128 * 1_000_000, format: Format::DecimalSi }
    }

    /// A number of bytes, printed with binary suffixes.
    pub fn from_bytes(bytes: i64) -> Quantity {
        Quantity { nanos: bytes as i128 * NANO, format: Format::BinarySi }
    }

    /// `n` mebibytes.
    pub fn from_mebibytes(mib: i64) -> Quantity {
        Quantity::from_bytes(mib * 1024 * 1024)
    }

    /// `n` gibibytes.
    pub fn from_gibibytes(gib: i64) -> Quantity {
        Quantity::from_bytes(gib * 1024 * 1024 * 1024)
    }

    pub fn with_format(mut self, format: Format) -> Quantity {
        self.format = format;
        self
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// The exact value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The value in thousandths, rounded up (upstream `MilliValue`).
    pub fn milli_value(&self) -> i128 {
        div_ceil(self.nanos, 1_000_000)
    }

    /// The value in whole units, rounded up (upstream `Value`).
    pub fn value(&self) -> i128 {
        div_ceil(self.nanos, NANO)
    }

    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// The value as a float, for display and price arithmetic only.
    pub fn as_f64(&self) -> f64 {
        self.nanos as f64 / NANO as f64
    }

    pub fn checked_add(self, other: Quantity) -> Option<Quantity> {
        Some(Quantity { nanos: self.nanos.checked_add(other.nanos)?, format: self.format })
    }

    /// Multiplies by an integer factor (saturating).
    pub fn times(self, factor: i64) -> Quantity {
        Quantity { nanos: self.nanos.saturating_mul(factor as i128), format: self.format }
    }

    pub fn max(self, other: Quantity) -> Quantity {
        if other.nanos > self.nanos {
            Quantity { nanos: other.nanos, format: self.format }
        } else {
            self
        }
    }

    pub fn min(self, other: Quantity) -> Quantity {
        if other.nanos < self.nanos {
            Quantity { nanos: other.nanos, format: self.format }
        } else {
            self
        }
    }
}

fn div_ceil(a: i128, b: i128) -> i128 {
    let q = a / b;
    if a % b > 0 {
        q + 1
    } else {
        q
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Quantity {}
impl std::hash::Hash for Quantity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.nanos.hash(state)
    }
}
impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

// Arithmetic saturates instead of panicking: quantities come from user input.
impl Add for Quantity {
    type Output = Quantity;
    fn add(self, rhs: Quantity) -> Quantity {
        Quantity { nanos: self.nanos.saturating_add(rhs.nanos), format: self.format }
    }
}
impl Sub for Quantity {
    type Output = Quantity;
    fn sub(self, rhs: Quantity) -> Quantity {
        Quantity { nanos: self.nanos.saturating_sub(rhs.nanos), format: self.format }
    }
}
impl AddAssign for Quantity {
    fn add_assign(&mut self, rhs: Quantity) {
        *self = *self + rhs;
    }
}
impl SubAssign for Quantity {
    fn sub_assign(&mut self, rhs: Quantity) {
        *self = *self - rhs;
    }
}
impl Neg for Quantity {
    type Output = Quantity;
    fn neg(self) -> Quantity {
        Quantity { nanos: self.nanos.saturating_neg(), format: self.format }
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl fmt::Display for Quantity {
    /// Canonical form, as upstream prints it: the largest suffix of the quantity's family that
    /// keeps the number an integer (`1536Mi`, `1500m`, `2`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.nanos;
        if n == 0 {
            return f.write_str("0");
        }
        let sign = if n < 0 { "-" } else { "" };
        let abs = n.unsigned_abs();
        let nano = NANO as u128;
        if self.format == Format::BinarySi && abs.is_multiple_of(nano) {
            let units = abs / nano;
            const SUFFIXES: [(&str, u32); 6] = [("Ei", 60), ("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)];
            for (suffix, shift) in SUFFIXES {
                if units.is_multiple_of(1u128 << shift) {
                    return write!(f, "{sign}{}{suffix}", units >> shift);
                }
            }
            if units < 1024 {
                return write!(f, "{sign}{units}");
            }
            // Not a multiple of 1024: upstream falls back to decimal notation.
        }
        const DECIMAL: [(&str, u32); 10] =
            [("E", 27), ("P", 24), ("T", 21), ("G", 18), ("M", 15), ("k", 12), ("", 9), ("m", 6), ("u", 3), ("n", 0)];
        for (suffix, pow) in DECIMAL {
            let d = 10u128.pow(pow);
            if abs.is_multiple_of(d) {
                return write!(f, "{sign}{}{suffix}", abs / d);
            }
        }
        unreachable!("every integer is a multiple of 10^0")
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    /// Accepts a string (`"500m"`) or a bare YAML/JSON number (`2`, `0.5`), as the API server does.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a Kubernetes quantity such as \"500m\", \"1Gi\" or 2")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Quantity, E> {
                Quantity::parse(v).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity::from_units(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Quantity, E> {
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Quantity, E> {
                if !v.is_finite() {
                    return Err(E::custom(format!("quantity {v} is not a finite number")));
                }
                Quantity::parse(&v.to_string()).map_err(E::custom)
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// k8s-openapi carries quantities as strings; this bridges the two.
impl TryFrom<&k8s_openapi::apimachinery::pkg::api::resource::Quantity> for Quantity {
    type Error = QuantityError;
    fn try_from(q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity) -> Result<Self, Self::Error> {
        Quantity::parse(&q.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap()
    }

    #[test]
    fn parses_every_suffix_family_exactly() {
        assert_eq!(q("500m").milli_value(), 500);
        assert_eq!(q("1.5").milli_value(), 1500);
        assert_eq!(q("0.1").milli_value(), 100);
        assert_eq!(q(".5").milli_value(), 500);
        assert_eq!(q("1Ki").value(), 1024);
        assert_eq!(q("1.5Gi").value(), 1_610_612_736);
        assert_eq!(q("2e3").value(), 2000);
        assert_eq!(q("2E-3").milli_value(), 2);
        assert_eq!(q("1k").value(), 1000);
        assert_eq!(q("128974848").value(), 128_974_848);
        assert_eq!(q("129e6").value(), 129_000_000);
        assert_eq!(q("123Mi").value(), 128_974_848);
        assert_eq!(q("1n").nanos(), 1);
        assert_eq!(q("-2").value(), -2);
        assert_eq!(q("+3").value(), 3);
        assert_eq!(q("1Ei").value(), 1 << 60);
        assert_eq!(q("0000000000000000000000000000000000000000001").value(), 1);
    }

    #[test]
    fn rounds_sub_nano_precision_up() {
        assert_eq!(q("0.1n").nanos(), 1);
        assert_eq!(q("1.0000000001").nanos(), 1_000_000_001);
        assert_eq!(q("100u").milli_value(), 1);
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in ["", "abc", "1..2", "1.2.3", "1Q", "1e", "1ee3", "Gi", "1 Gi", "1e99999", "1e40", "--1"] {
            assert!(Quantity::parse(bad).is_err(), "{bad} should fail");
        }
    }

    #[test]
    fn prints_canonically() {
        assert_eq!(q("1536Mi").to_string(), "1536Mi");
        assert_eq!(q("1.5Gi").to_string(), "1536Mi");
        assert_eq!(q("1500m").to_string(), "1500m");
        assert_eq!(q("2000m").to_string(), "2");
        assert_eq!(q("0.5").to_string(), "500m");
        assert_eq!(q("1000").to_string(), "1k");
        assert_eq!(Quantity::from_mebibytes(6903).to_string(), "6903Mi");
        assert_eq!(Quantity::from_units(29).to_string(), "29");
        assert_eq!(q("-1Gi").to_string(), "-1Gi");
    }

    #[test]
    fn compares_by_value_across_formats() {
        assert_eq!(q("1Gi"), q("1073741824"));
        assert!(q("1G") < q("1Gi"));
        assert_eq!(q("1") + q("500m"), q("1.5"));
        assert_eq!(q("1") - q("1500m"), q("-500m"));
    }

    #[test]
    fn deserializes_strings_and_numbers() {
        let v: Vec<Quantity> = serde_json::from_str(r#"["1Gi", 2, 0.5]"#).unwrap();
        assert_eq!(v, vec![q("1Gi"), q("2"), q("500m")]);
        assert!(serde_json::from_str::<Quantity>(r#""1Qi""#).is_err());
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,24}") {
            let _ = Quantity::parse(&s);
        }

        #[test]
        fn display_round_trips(millis in -1_000_000_000_000i64..1_000_000_000_000i64, binary in proptest::bool::ANY) {
            let value = if binary { Quantity::from_bytes(millis) } else { Quantity::from_millis(millis) };
            proptest::prop_assert_eq!(Quantity::parse(&value.to_string()).unwrap(), value);
        }
    }
}
