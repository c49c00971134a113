//! Sizes on the command line: `4096`, `64K`, `64M`, `1G`, `2T` (powers of 1024; `KiB`,
//! `kb` and friends are accepted too). Anything else, or an overflow, is an error with a
//! message saying what was expected.

/// Parse a size in bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(split);
    let bad = || format!("bad size '{s}': expected a number of bytes, optionally with K, M, G or T");
    if digits.is_empty() {
        return Err(bad());
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(bad()),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift).ok_or_else(|| format!("bad size '{s}': too large"))
}

pub use nvs_bench::human;

#[cfg(test)]
mod tests {
    use super::*;

    /// Suffixes are powers of 1024; junk, empty strings and overflow are refused.
    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("64m"), Ok(64 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        for bad in ["", "K", "12Q", "-1", "1.5G", "1 G", "99999999999999999999", "20000000T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
