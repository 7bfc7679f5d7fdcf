//! Formatting and drawing helpers of the page, kept apart from the components so they are tested
//! natively.

/// `$0.0832` (4 decimals below $1, 2 above), with `*` when the price is synthetic.
pub fn price(usd: f64, synthetic: bool) -> String {
    // A sum of no prices is -0.0 (float sums start there): show it as $0.
    let usd = usd + 0.0;
    let mark = if synthetic { "*" } else { "" };
    if usd >= 1.0 {
        format!("${usd:.2}{mark}")
    } else {
        format!("${usd:.4}{mark}")
    }
}

/// CPU cores as kubectl shows them: `1.93`, `500m`.
pub fn cpu(cores: f64) -> String {
    if cores == 0.0 {
        "0".into()
    } else if cores < 1.0 {
        format!("{}m", (cores * 1000.0).round())
    } else {
        let s = format!("{cores:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// Bytes in binary units: `6.7Gi`, `512Mi`.
pub fn bytes(b: f64) -> String {
    const UNITS: [(&str, f64); 4] = [("Ti", 1099511627776.0), ("Gi", 1073741824.0), ("Mi", 1048576.0), ("Ki", 1024.0)];
    for (unit, size) in UNITS {
        if b >= size {
            let v = b / size;
            return if v >= 10.0 { format!("{v:.0}{unit}") } else { format!("{v:.1}{unit}") };
        }
    }
    format!("{b:.0}")
}

/// Milliseconds as Go prints a duration, trimmed: `0s`, `1m30s`, `2h0m5s`, `1d3h`.
pub fn duration(ms: u64) -> String {
    let total = ms / 1000;
    let (d, h, m, s) = (total / 86_400, total / 3_600 % 24, total / 60 % 60, total % 60);
    let frac = ms % 1000;
    let secs = if frac == 0 { format!("{s}s") } else { format!("{s}.{}s", format!("{frac:03}").trim_end_matches('0')) };
    match (d, h, m) {
        (0, 0, 0) => secs,
        (0, 0, _) => format!("{m}m{secs}"),
        (0, _, _) => format!("{h}h{m}m{secs}"),
        _ => format!("{d}d{h}h{m}m"),
    }
}

/// Part of a whole as a percentage in 0..=100 (0 for an empty whole).
pub fn percent(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        0.0
    } else {
        (part / whole * 100.0).clamp(0.0, 100.0)
    }
}

/// A step line through `(t, value)` points from 0 to `end`, scaled into `width` × `height`
/// (SVG coordinates: y grows downwards). The value holds until the next point.
pub fn step_path(points: &[(f64, f64)], end: f64, width: f64, height: f64, max_value: f64) -> String {
    let x = |t: f64| if end <= 0.0 { 0.0 } else { (t / end * width).clamp(0.0, width) };
    let y = |v: f64| if max_value <= 0.0 { height } else { height - (v / max_value * height).clamp(0.0, height) };
    let mut path = format!("M0,{:.1}", y(0.0));
    for &(t, v) in points {
        if t > end {
            break;
        }
        path.push_str(&format!(" H{:.1} V{:.1}", x(t), y(v)));
    }
    path.push_str(&format!(" H{:.1}", x(end)));
    path
}

/// A "nice" upper bound for an axis: 1, 2 or 5 × a power of ten, at least `v`.
pub fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let magnitude = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * magnitude >= v - 1e-12 {
            return m * magnitude;
        }
    }
    10.0 * magnitude
}

/// Does `text` match the search box (case-insensitive substring; an empty search matches all)?
pub fn matches(search: &str, texts: &[&str]) -> bool {
    let search = search.trim().to_lowercase();
    search.is_empty() || texts.iter().any(|t| t.to_lowercase().contains(&search))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(price(0.0832, false), "$0.0832");
        assert_eq!(price(0.03, true), "$0.0300*");
        assert_eq!(price(12.5, false), "$12.50");
        assert_eq!(price([].iter().sum::<f64>(), false), "$0.0000");
        assert_eq!(cpu(1.93), "1.93");
        assert_eq!(cpu(2.0), "2");
        assert_eq!(cpu(0.5), "500m");
        assert_eq!(bytes(6903.0 * 1048576.0), "6.7Gi");
        assert_eq!(bytes(512.0 * 1048576.0), "512Mi");
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(90_000), "1m30s");
        assert_eq!(duration(7_205_000), "2h0m5s");
        assert_eq!(duration(1_500), "1.5s");
        assert_eq!(duration(2 * 86_400_000 + 3_600_000), "2d1h0m");
        assert_eq!(percent(1.0, 4.0), 25.0);
        assert_eq!(percent(1.0, 0.0), 0.0);
    }

    #[test]
    fn step_paths_hold_each_value() {
        let p = step_path(&[(0.0, 1.0), (50.0, 2.0)], 100.0, 200.0, 100.0, 2.0);
        assert_eq!(p, "M0,100.0 H0.0 V50.0 H100.0 V0.0 H200.0");
        assert_eq!(nice_ceiling(0.34), 0.5);
        assert_eq!(nice_ceiling(3.0), 5.0);
        assert_eq!(nice_ceiling(10.0), 10.0);
    }

    #[test]
    fn search_is_case_insensitive() {
        assert!(matches("", &["x"]));
        assert!(matches("M5", &["m5.large"]));
        assert!(!matches("c6", &["m5.large", "default"]));
    }
}
