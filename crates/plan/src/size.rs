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

/// A memory size as a setting keeps it (`memory_cap = "512MiB"` in a run's config.toml): written
/// in the largest binary unit that divides it exactly, so Display and FromStr round-trip; read
/// with [`parse_size`]'s units. Two spellings of one size (`512MiB`, `0.5GiB`) are equal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bytes(pub u64);

impl Bytes {
    /// A size of at least 1 MiB, as the flags that take a cap or a budget need (`--memory-cap 0`
    /// would stop every pass, `--budget 0` fit nothing).
    pub fn at_least_1mib(text: &str) -> Result<Bytes, String> {
        let bytes = parse_size(text)?;
        if bytes < 1 << 20 {
            return Err(format!("{} is less than 1 MiB: give a size such as 512MiB", format_size(bytes)));
        }
        Ok(Bytes(bytes))
    }
}

impl std::fmt::Display for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0;
        for (unit, shift) in [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)] {
            if n > 0 && n.trailing_zeros() >= shift {
                return write!(f, "{}{unit}", n >> shift);
            }
        }
        write!(f, "{n}")
    }
}

impl std::str::FromStr for Bytes {
    type Err = String;

    fn from_str(text: &str) -> Result<Bytes, String> {
        parse_size(text).map(Bytes)
    }
}

impl serde::Serialize for Bytes {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Bytes {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Bytes, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

/// `--budget`: what this machine has free now (`auto`), or a size of at least 1 MiB. Read and
/// written as its text (`auto`, `3GiB`), as a step's request keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetSize {
    /// This machine's free memory when the plan is made.
    Auto,
    /// A size.
    Size(Bytes),
}

impl std::fmt::Display for BudgetSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetSize::Auto => f.write_str("auto"),
            BudgetSize::Size(bytes) => write!(f, "{bytes}"),
        }
    }
}

impl std::str::FromStr for BudgetSize {
    type Err = String;

    fn from_str(text: &str) -> Result<BudgetSize, String> {
        if text == "auto" { Ok(BudgetSize::Auto) } else { Bytes::at_least_1mib(text).map(BudgetSize::Size) }
    }
}

impl serde::Serialize for BudgetSize {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for BudgetSize {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<BudgetSize, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
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

    #[test]
    fn bytes_round_trip_through_their_text_in_the_largest_exact_unit() {
        for (text, shown) in [
            ("512MiB", "512MiB"),
            ("0.5GiB", "512MiB"),
            ("2G", "2GiB"),
            ("4GB", "3906250KiB"),
            ("1000001", "1000001"),
            ("1536KiB", "1536KiB"),
        ] {
            let bytes: Bytes = text.parse().expect(text);
            assert_eq!(bytes.to_string(), shown, "{text}");
            assert_eq!(shown.parse::<Bytes>(), Ok(bytes), "{shown}");
        }
        assert_eq!(Bytes(0).to_string(), "0");
        assert!(Bytes::at_least_1mib("1MiB").is_ok());
        assert!(Bytes::at_least_1mib("1000KiB").expect_err("small").contains("less than 1 MiB"));
        assert!("lots".parse::<Bytes>().is_err());
    }
}
