//! Kubernetes resource quantities (`100m`, `1.5Gi`, `2e3`, `64Ki`) parsed exactly, without
//! floating point, into the integer units the engine counts in: millicores for CPU, whole units
//! (bytes, devices, pods) for everything else. Rounding follows `resource.Quantity`: values are
//! rounded up (`MilliValue`/`Value` use ceiling), so `0.1m` CPU counts as 1m.
//!
//! Owns the parser; uses only the model's error type.

use super::ModelError;

/// Largest amount the engine accepts for any resource (2^62): far above any real node, low
/// enough that sums over thousands of pods cannot overflow an `i64`.
pub const MAX_AMOUNT: i64 = 1 << 62;

/// Parse `s` and return its value multiplied by `scale` (1 for units, 1000 for milli-units),
/// rounded up. Negative values and values above [`MAX_AMOUNT`] are rejected.
pub fn parse_scaled(resource: &str, s: &str, scale: i64) -> Result<i64, ModelError> {
    let bad = |why: &'static str| ModelError::Quantity {
        resource: resource.to_owned(),
        value: s.to_owned(),
        why,
    };
    let t = s.trim();
    if t.is_empty() {
        return Err(bad("empty quantity"));
    }
    let (negative, body) = match t.as_bytes()[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    // Split number and suffix.
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    if num.is_empty() || num == "." {
        return Err(bad("missing digits"));
    }
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if frac_part.contains('.') {
        return Err(bad("more than one decimal point"));
    }
    // value = digits * 10^exp10 * 2^exp2, digits an integer (read without allocating: this runs
    // for every quantity of every pod compiled).
    let mut digits: u128 = 0;
    let mut significant = 0usize;
    for b in int_part.bytes().chain(frac_part.bytes()) {
        if significant == 0 && b == b'0' {
            continue;
        }
        significant += 1;
        if significant > 30 {
            return Err(bad("too many digits"));
        }
        digits = digits * 10 + u128::from(b - b'0');
    }
    let mut exp10: i32 = -(frac_part.len() as i32);
    let mut exp2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        s if s.starts_with(['e', 'E']) => {
            let e: i32 = s[1..].parse().map_err(|_| bad("invalid exponent"))?;
            if !(-40..=40).contains(&e) {
                return Err(bad("exponent out of range"));
            }
            exp10 += e;
        }
        _ => return Err(bad("unknown suffix")),
    }
    if negative && digits != 0 {
        return Err(bad("negative quantity"));
    }
    // scaled = ceil(digits * 2^exp2 * scale * 10^exp10)
    let too_big = || bad("quantity too large");
    let mut n: u128 = digits
        .checked_mul(1u128 << exp2)
        .and_then(|v| v.checked_mul(scale as u128))
        .ok_or_else(too_big)?;
    if exp10 >= 0 {
        for _ in 0..exp10 {
            n = n.checked_mul(10).ok_or_else(too_big)?;
            if n > MAX_AMOUNT as u128 {
                return Err(too_big());
            }
        }
    } else {
        let mut div: u128 = 1;
        for _ in 0..(-exp10) {
            div = div.saturating_mul(10);
        }
        n = n.div_ceil(div);
    }
    if n > MAX_AMOUNT as u128 {
        return Err(too_big());
    }
    Ok(n as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> i64 {
        parse_scaled("memory", s, 1).unwrap()
    }
    fn m(s: &str) -> i64 {
        parse_scaled("cpu", s, 1000).unwrap()
    }

    #[test]
    fn decimal_and_binary_suffixes() {
        assert_eq!(v("1Ki"), 1024);
        assert_eq!(v("1.5Gi"), 1536 * 1024 * 1024);
        assert_eq!(v("256Gi"), 256 << 30);
        assert_eq!(v("1k"), 1000);
        assert_eq!(v("1M"), 1_000_000);
        assert_eq!(v("12e3"), 12_000);
        assert_eq!(v("12E3"), 12_000);
        assert_eq!(v("0"), 0);
        assert_eq!(v("+5"), 5);
    }

    #[test]
    fn cpu_in_millis_rounds_up() {
        assert_eq!(m("100m"), 100);
        assert_eq!(m("1"), 1000);
        assert_eq!(m("0.5"), 500);
        assert_eq!(m("2.25"), 2250);
        assert_eq!(m("0.1m"), 1, "sub-milli values round up like MilliValue");
        assert_eq!(m("1500u"), 2);
        assert_eq!(m("32"), 32_000);
    }

    #[test]
    fn memory_fractions_round_up() {
        assert_eq!(v("1.5"), 2);
        assert_eq!(v("100m"), 1);
    }

    #[test]
    fn rejects_bad_input() {
        for s in [
            "",
            "-1",
            "-1Gi",
            "abc",
            "1.2.3",
            "1Zi",
            "1e999",
            "99999999999999999999Ei",
            ".",
        ] {
            assert!(
                parse_scaled("memory", s, 1).is_err(),
                "{s:?} must be rejected"
            );
        }
        let err = parse_scaled("cpu", "-2", 1000).unwrap_err().to_string();
        assert!(
            err.contains("cpu") && err.contains("-2") && err.contains("negative"),
            "{err}"
        );
    }

    #[test]
    fn negative_zero_is_zero() {
        assert_eq!(v("-0"), 0);
    }
}
