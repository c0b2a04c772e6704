//! The subset of Go's `text/template` that scheduler_perf's object templates use: `{{ .Name }}`
//! (a field of the environment: `Index`, `Count` and the op's `templateParams`) and calls of
//! scheduler_perf's arithmetic helpers with fields and number literals as arguments
//! (`{{ Mod .Index 25 }}`, `{{ DivideInt 30000 .Count }}`), with `{{-`/`-}}` trimming. Anything
//! else (pipelines, `if`/`range`, parentheses, other functions) is an error naming the action,
//! never a silent pass-through.

use std::collections::BTreeMap;
use std::fmt;

/// A value in the template environment.
#[derive(Debug, Clone, PartialEq)]
pub enum TValue {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl TValue {
    /// From a YAML/JSON parameter value; `None` for lists, maps and null.
    pub fn from_json(v: &serde_json::Value) -> Option<TValue> {
        match v {
            serde_json::Value::Bool(b) => Some(TValue::Bool(*b)),
            serde_json::Value::Number(n) => Some(match n.as_i64() {
                Some(i) => TValue::Int(i),
                None => TValue::Float(n.as_f64()?),
            }),
            serde_json::Value::String(s) => Some(TValue::Str(s.clone())),
            _ => None,
        }
    }

    /// scheduler_perf's `toFloat64`: numbers, and strings that parse as numbers.
    fn to_f64(&self) -> Result<f64, String> {
        match self {
            TValue::Int(i) => Ok(*i as f64),
            TValue::Float(f) => Ok(*f),
            TValue::Str(s) => s
                .parse()
                .map_err(|_| format!("cannot cast {s:?} to float64")),
            TValue::Bool(b) => Err(format!("cannot cast {b} to float64")),
        }
    }
}

impl fmt::Display for TValue {
    /// As Go's `fmt` prints them (`%v`): floats in shortest form, `2` not `2.0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TValue::Int(i) => write!(f, "{i}"),
            TValue::Float(x) if x.fract() == 0.0 && x.abs() < 1e21 => write!(f, "{}", *x as i64),
            TValue::Float(x) => write!(f, "{x}"),
            TValue::Str(s) => f.write_str(s),
            TValue::Bool(b) => write!(f, "{b}"),
        }
    }
}

pub type Env = BTreeMap<String, TValue>;

/// True when `text` contains no action, so one parse serves every index.
pub fn is_static(text: &str) -> bool {
    !text.contains("{{")
}

/// Expands every action in `text` with `env`.
pub fn render(text: &str, env: &Env) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        let mut before = &rest[..start];
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| format!("unclosed action at {:?}", short(&rest[start..])))?;
        let mut action = &after[..end];
        let mut tail = &after[end + 2..];
        if let Some(a) = action.strip_prefix('-') {
            before = before.trim_end();
            action = a;
        }
        if let Some(a) = action.strip_suffix('-') {
            tail = tail.trim_start();
            action = a;
        }
        out.push_str(before);
        out.push_str(&eval(action.trim(), env)?.to_string());
        rest = tail;
    }
    out.push_str(rest);
    Ok(out)
}

fn short(s: &str) -> &str {
    &s[..s.len().min(40)]
}

fn eval(action: &str, env: &Env) -> Result<TValue, String> {
    if action.contains(['(', ')', '|']) || action.starts_with("if ") || action.starts_with("range ")
    {
        return Err(format!("unsupported template action {{{{{action}}}}}"));
    }
    let words: Vec<&str> = action.split_whitespace().collect();
    let arg = |w: &str| -> Result<TValue, String> {
        if let Some(field) = w.strip_prefix('.') {
            return env
                .get(field)
                .cloned()
                .ok_or_else(|| format!("template field .{field} is not defined"));
        }
        if let Some(s) = w.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
            return Ok(TValue::Str(s.to_string()));
        }
        if let Ok(i) = w.parse::<i64>() {
            return Ok(TValue::Int(i));
        }
        w.parse::<f64>()
            .map(TValue::Float)
            .map_err(|_| format!("unsupported template operand {w:?} in {{{{{action}}}}}"))
    };
    match words.as_slice() {
        [] => Err("empty template action".into()),
        [single] if !single.starts_with(char::is_uppercase) => arg(single),
        [func, args @ ..] => {
            let args: Vec<TValue> = args.iter().map(|w| arg(w)).collect::<Result<_, _>>()?;
            call(func, &args).map_err(|e| format!("{{{{{action}}}}}: {e}"))
        }
    }
}

/// scheduler_perf's `getTemplateFuncs`.
fn call(func: &str, args: &[TValue]) -> Result<TValue, String> {
    let nums: Vec<f64> = args.iter().map(TValue::to_f64).collect::<Result<_, _>>()?;
    let two = || -> Result<(f64, f64), String> {
        match nums.as_slice() {
            [a, b] => Ok((*a, *b)),
            _ => Err(format!("{func} takes 2 arguments, got {}", nums.len())),
        }
    };
    let div = |a: f64, b: f64| {
        if b == 0.0 {
            Err("division by zero".to_string())
        } else {
            Ok(a / b)
        }
    };
    Ok(match func {
        "AddFloat" => TValue::Float(nums.iter().sum()),
        "AddInt" => TValue::Int(nums.iter().sum::<f64>() as i64),
        "MultiplyFloat" => TValue::Float(nums.iter().product()),
        "MultiplyInt" => TValue::Int(nums.iter().product::<f64>() as i64),
        "SubtractFloat" => {
            let (a, b) = two()?;
            TValue::Float(a - b)
        }
        "SubtractInt" => {
            let (a, b) = two()?;
            TValue::Int((a - b) as i64)
        }
        "DivideFloat" => {
            let (a, b) = two()?;
            TValue::Float(div(a, b)?)
        }
        "DivideInt" => {
            let (a, b) = two()?;
            TValue::Int(div(a, b)? as i64)
        }
        "Mod" => {
            let (a, b) = two()?;
            let (a, b) = (a as i64, b as i64);
            if b == 0 {
                return Err("integer divide by zero".into());
            }
            TValue::Int(a % b)
        }
        other => return Err(format!("function {other:?} not defined")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(index: i64, count: i64) -> Env {
        Env::from([
            ("Index".to_string(), TValue::Int(index)),
            ("Count".to_string(), TValue::Int(count)),
        ])
    }

    #[test]
    fn fields_and_helpers_as_scheduler_perf_evaluates_them() {
        let e = env(27, 4);
        assert_eq!(render("name: n-{{.Index}}", &e).unwrap(), "name: n-27");
        assert_eq!(
            render("a: {{ .Index }}/{{ .Count }}", &e).unwrap(),
            "a: 27/4"
        );
        assert_eq!(render("{{Mod .Index 25}}", &e).unwrap(), "2");
        assert_eq!(render("{{ DivideInt 30000 .Count }}", &e).unwrap(), "7500");
        assert_eq!(render("{{ DivideInt .Index 10 }}", &e).unwrap(), "2");
        assert_eq!(render("{{ DivideFloat .Index 2 }}", &e).unwrap(), "13.5");
        assert_eq!(render("{{ AddInt .Index 1 2 }}", &e).unwrap(), "30");
        assert_eq!(render("x  {{- .Index -}}  y", &e).unwrap(), "x27y");
        assert!(is_static("cpu: 1") && !is_static("{{.Index}}"));
    }

    #[test]
    fn unsupported_actions_are_errors() {
        let e = env(0, 1);
        assert!(
            render("{{ .Missing }}", &e)
                .unwrap_err()
                .contains(".Missing")
        );
        assert!(render("{{ if .Index }}x{{ end }}", &e).is_err());
        assert!(
            render("{{ Nope .Index }}", &e)
                .unwrap_err()
                .contains("Nope")
        );
        assert!(render("{{ Mod .Index 0 }}", &e).is_err());
        assert!(render("{{ .Index ", &e).unwrap_err().contains("unclosed"));
    }
}
