//! Server-managed object metadata: RFC 3339 timestamps (no date library needed), UIDs, and small
//! accessors for `metadata.*` fields of objects held as `serde_json::Value`.

use serde_json::{Map, Value};
use std::time::{SystemTime, UNIX_EPOCH};

/// `Value::pointer` (RFC 6901) without its allocations: serde_json's unescapes every reference
/// token into two new strings, which made JSON-pointer reads about 3% of kube-sim's CPU in the
/// DRA workloads; here a token without `~` (every token kube-sim writes) is looked up as it is.
pub trait Pointer {
    /// The value `pointer` names, as `Value::pointer`.
    fn at(&self, pointer: &str) -> Option<&Value>;
}

impl Pointer for Value {
    fn at(&self, pointer: &str) -> Option<&Value> {
        if pointer.is_empty() {
            return Some(self);
        }
        let mut target = self;
        for token in pointer.strip_prefix('/')?.split('/') {
            let unescaped;
            let token = if token.contains('~') {
                unescaped = token.replace("~1", "/").replace("~0", "~");
                unescaped.as_str()
            } else {
                token
            };
            target = match target {
                Value::Object(map) => map.get(token)?,
                Value::Array(list) => list.get(array_index(token)?)?,
                _ => return None,
            };
        }
        Some(target)
    }
}

/// An array index token as RFC 6901 has it (decimal, no sign, no leading zero).
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() != 1) {
        return None;
    }
    token.parse().ok()
}

/// Days since 1970-01-01 to a civil (year, month, day); Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days since 1970-01-01 of a civil date (the inverse of `civil_from_days`).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses a metav1.Time (`2026-01-02T03:04:05Z`, fractional seconds and numeric offsets
/// accepted); None when it is not RFC 3339.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        let f = &frac[..digits];
        let mut n: u32 = f.get(..digits.min(9))?.parse().ok()?;
        for _ in digits.min(9)..9 {
            n *= 10;
        }
        nanos = n;
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        o if o.len() == 6 && matches!(&o[..1], "+" | "-") && &o[3..4] == ":" => {
            let v = o[1..3].parse::<i64>().ok()? * 3600 + o[4..6].parse::<i64>().ok()? * 60;
            if o.starts_with('-') { -v } else { v }
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let secs = days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + std::time::Duration::new(secs, nanos))
}

fn split(t: SystemTime) -> (i64, u32, u32, u64, u64, u64) {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (y, mo, da) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    (y, mo, da, rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// `2026-01-02T03:04:05Z` (metav1.Time).
pub fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = split(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// The current time as metav1.Time.
pub fn now() -> String {
    rfc3339(SystemTime::now())
}

/// A random version-4 UUID string.
pub fn new_uid() -> String {
    let r: u128 = rand::random();
    let r = (r & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    let h = format!("{r:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// Lower-case alphanumerics for `generateName` suffixes, as the real server uses.
/// How many names a create with `generateName` tries in all (the real store's
/// `maxNameGenerationCreateAttempts`, RetryGenerateName, GA since v1.32).
pub const NAME_GENERATION_ATTEMPTS: usize = 8;

/// After a generated name `first` was found taken: the next names of `base` and a suffix from
/// `suffix`, up to [`NAME_GENERATION_ATTEMPTS`] in all, the first not `taken`, or the last one
/// tried when every one is (the create is then refused as it).
pub fn retry_generated_name(
    base: &str,
    first: String,
    taken: impl Fn(&str) -> bool,
    mut suffix: impl FnMut() -> String,
) -> Result<String, String> {
    let mut last = first;
    for _ in 1..NAME_GENERATION_ATTEMPTS {
        let name = format!("{base}{}", suffix());
        if !taken(&name) {
            return Ok(name);
        }
        last = name;
    }
    Err(last)
}

pub fn name_suffix() -> String {
    const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHA[rand::random_range(0..ALPHA.len())] as char)
        .collect()
}

/// `metadata` as a mutable map, created when missing.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("object");
    let m = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut().expect("metadata object")
}

/// A string field of `metadata`, or "".
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// Follows a dotted path (`spec.nodeName`); missing or null → None.
pub fn path<'a>(obj: &'a Value, dotted: &str) -> Option<&'a Value> {
    let mut cur = obj;
    for part in dotted.split('.') {
        cur = cur.get(part)?;
    }
    (!cur.is_null()).then_some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_name_found_taken_is_generated_again_eight_times_in_all() {
        let taken = ["gen-aaaaa", "gen-bbbbb"];
        let mut suffixes = ["bbbbb", "ccccc"].into_iter().map(str::to_owned);
        assert_eq!(
            retry_generated_name(
                "gen-",
                "gen-aaaaa".into(),
                |n| taken.contains(&n),
                || suffixes.next().unwrap()
            ),
            Ok("gen-ccccc".to_owned())
        );
        let mut tried = 1;
        let got = retry_generated_name(
            "gen-",
            "gen-aaaaa".into(),
            |_| true,
            || {
                tried += 1;
                format!("{tried:05}")
            },
        );
        assert_eq!((got, tried), (Err("gen-00008".to_owned()), 8));
    }

    #[test]
    fn pointer_reads_as_serde_jsons() {
        let v = serde_json::json!({"a": {"b/c": [1, {"d~e": true}], "": 2, "0": 3},
                                   "l": [[4], 5]});
        for p in [
            "",
            "/",
            "/a",
            "/a/b~1c",
            "/a/b~1c/0",
            "/a/b~1c/1/d~0e",
            "/a/b~1c/01",
            "/a/b~1c/+1",
            "/a/b~1c/2",
            "/a/",
            "/a/0",
            "/l/0/0",
            "/l/1/x",
            "a",
            "/missing/x",
            "/a/b~1c/-1",
        ] {
            assert_eq!(v.at(p), v.pointer(p), "{p}");
        }
    }
    use std::time::Duration;

    #[test]
    fn formats_times() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000) + Duration::from_micros(42);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn parses_times() {
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_rfc3339("2023-11-14T22:13:20Z"), Some(t));
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20.5Z"),
            Some(t + Duration::from_millis(500))
        );
        assert_eq!(parse_rfc3339("2023-11-14T23:13:20+01:00"), Some(t));
        assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        assert_eq!(
            parse_rfc3339("2000-02-29T00:00:00Z")
                .map(rfc3339)
                .as_deref(),
            Some("2000-02-29T00:00:00Z")
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn uids_look_like_uuids() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert_ne!(u, new_uid());
    }
}
