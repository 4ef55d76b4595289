//! Memory sizes on the command line (`3GiB`, `512MiB`, `2.5G`, `4GB`) and in reports.

/// Parses a size: a number with an optional unit. `KiB`/`MiB`/`GiB`/`TiB` and the bare letters
/// `K`/`M`/`G`/`T` are powers of 1024; `KB`/`MB`/`GB`/`TB` are powers of 1000; no unit or `B` is bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 =
        number.parse().map_err(|_| format!("`{text}` is not a size (examples: 3GiB, 512MiB, 2.5G, 4GB)"))?;
    let factor: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024f64.powi(2),
        "g" | "gib" => 1024f64.powi(3),
        "t" | "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => return Err(format!("`{text}`: unknown unit `{other}` (use KiB, MiB, GiB, KB, MB, GB)")),
    };
    let bytes = value * factor;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    Ok(bytes as u64)
}

/// `1.23 GiB`, `456.7 MiB`, `12.0 KiB`, `10 B`.
pub fn format_size(bytes: u64) -> String {
    let b = bytes as f64;
    let k = 1024.0;
    if b >= k * k * k {
        format!("{:.2} GiB", b / (k * k * k))
    } else if b >= k * k {
        format!("{:.1} MiB", b / (k * k))
    } else if b >= k {
        format!("{:.1} KiB", b / k)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_binary_and_decimal_units() {
        assert_eq!(parse_size("3GiB"), Ok(3 << 30));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("2.5G"), Ok((2.5 * (1u64 << 30) as f64) as u64));
        assert_eq!(parse_size("4GB"), Ok(4_000_000_000));
        assert_eq!(parse_size("100"), Ok(100));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3 furlongs").expect_err("unit").contains("unknown unit"));
        assert_eq!(format_size(3 << 30), "3.00 GiB");
        assert_eq!(format_size(1536 << 10), "1.5 MiB");
    }
}
