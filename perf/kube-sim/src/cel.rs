//! The compile check of DRA CEL selectors (`device` expressions), as far as it can be done
//! without cel-go: parsing with the `cel` crate's ANTLR parser, built from cel-go's grammar, so
//! syntax errors carry cel-go's messages and positions (`ERROR: <input>:1:46: Syntax error:
//! mismatched input '<EOF>' expecting {…}`, with the source line and a caret), rendered as
//! cel-go's `Issues.String()` does; then a small type check over the parsed expression in the
//! environment the real compiler declares: the one variable `device` (`driver` a string,
//! `attributes` a map of maps of attribute values, `capacity` a map of maps of quantities),
//! comprehension and `cel.bind` variables, and type names. It reports undeclared references
//! (`undeclared reference to 'x' (in container '')`), unknown fields of `device`
//! (`undefined field 'x'`), field selection on a primitive value, `&&`/`||`/`!` and `==`/`!=`
//! applied to values of clearly wrong or mismatched types (`found no matching overload for …`),
//! and a result that is clearly not a bool (`must evaluate to bool or the unknown type, not
//! int`). It does not know the signatures of functions (an unknown function or one called with
//! wrong arguments passes), does not estimate costs (the "too complex" limit), and gives up
//! (accepts) wherever a type is not evident.

use cel::common::ast::{Expr, IdedExpr, LiteralValue, SourceInfo, operators};
use std::collections::HashSet;

/// The longest expression the real server compiles (`CELSelectorExpressionMaxLength`).
pub(crate) const MAX_LENGTH: usize = 10 * 1024;

/// The type of a sub-expression, as far as it is evident.
#[derive(Debug, Clone, PartialEq)]
enum T {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Null,
    List(Box<T>),
    Map(Box<T>, Box<T>),
    /// `google.protobuf.Any`: an attribute value (accepted as a result).
    Any,
    /// Not evident (accepted everywhere).
    Dyn,
    Device,
    Quantity,
    Type,
}

impl T {
    fn name(&self) -> String {
        match self {
            T::Bool => "bool".into(),
            T::Int => "int".into(),
            T::Uint => "uint".into(),
            T::Double => "double".into(),
            T::String => "string".into(),
            T::Bytes => "bytes".into(),
            T::Null => "null_type".into(),
            T::List(e) => format!("list({})", e.name()),
            T::Map(k, v) => format!("map({}, {})", k.name(), v.name()),
            T::Any => "any".into(),
            T::Dyn => "dyn".into(),
            T::Device => "kubernetes.DRADevice".into(),
            T::Quantity => "kubernetes.Quantity".into(),
            T::Type => "type".into(),
        }
    }

    /// A primitive whose type cel-go knows for certain.
    fn primitive(&self) -> bool {
        matches!(
            self,
            T::Bool | T::Int | T::Uint | T::Double | T::String | T::Bytes | T::Null
        )
    }
}

struct Checker<'a> {
    source: &'a str,
    info: &'a SourceInfo,
    scopes: Vec<String>,
    errors: Vec<(usize, String)>,
}

/// `(line, column)` of a byte offset, both 1-based, and the line's text.
fn position(source: &str, offset: usize) -> (usize, usize, &str) {
    let mut start = 0;
    for (i, line) in source.split_inclusive('\n').enumerate() {
        let end = start + line.len();
        if offset < end || end == source.len() {
            let col = source[start..offset.min(end)].chars().count() + 1;
            return (i + 1, col, line.trim_end_matches('\n'));
        }
        start = end;
    }
    (1, 1, source)
}

/// cel-go's rendering of one issue: location, message, the source line and a caret.
fn render(source: &str, line: usize, col: usize, msg: &str) -> String {
    let text = source.lines().nth(line.saturating_sub(1)).unwrap_or("");
    format!(
        "ERROR: <input>:{line}:{col}: {msg}\n | {text}\n | {}^",
        ".".repeat(col.saturating_sub(1))
    )
}

impl Checker<'_> {
    fn error(&mut self, id: u64, msg: String) {
        let offset = self
            .info
            .offset_for(id)
            .map_or(0, |(start, _)| start as usize);
        self.errors.push((offset, msg));
    }

    fn declared(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s == name)
    }

    fn check(&mut self, e: &IdedExpr) -> T {
        match &e.expr {
            Expr::Literal(l) => match l {
                LiteralValue::Boolean(_) => T::Bool,
                LiteralValue::Bytes(_) => T::Bytes,
                LiteralValue::Double(_) => T::Double,
                LiteralValue::Int(_) => T::Int,
                LiteralValue::Null => T::Null,
                LiteralValue::String(_) => T::String,
                LiteralValue::UInt(_) => T::Uint,
            },
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::Select(s) => {
                let operand = self.check(&s.operand);
                let field = self.select(e.id, &operand, &s.field);
                if s.test { T::Bool } else { field }
            }
            Expr::List(l) => {
                let types: Vec<T> = l.elements.iter().map(|x| self.check(x)).collect();
                let elem = match types.first() {
                    Some(f) if types.iter().all(|t| t == f) => f.clone(),
                    _ => T::Dyn,
                };
                T::List(Box::new(elem))
            }
            Expr::Map(m) => {
                for entry in &m.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(me) = &entry.expr {
                        self.check(&me.key);
                        self.check(&me.value);
                    }
                }
                T::Map(Box::new(T::Dyn), Box::new(T::Dyn))
            }
            Expr::Struct(s) => {
                for entry in &s.entries {
                    if let cel::common::ast::EntryExpr::StructField(f) = &entry.expr {
                        self.check(&f.value);
                    }
                }
                T::Dyn
            }
            Expr::Comprehension(c) => {
                self.check(&c.iter_range);
                let accu = self.check(&c.accu_init);
                let depth = self.scopes.len();
                self.scopes.push(c.iter_var.clone());
                if let Some(v) = &c.iter_var2 {
                    self.scopes.push(v.clone());
                }
                self.scopes.push(c.accu_var.clone());
                self.check(&c.loop_cond);
                self.check(&c.loop_step);
                let result = self.check(&c.result);
                self.scopes.truncate(depth);
                match (&accu, &result) {
                    (T::Bool, _) | (_, T::Bool) => T::Bool,
                    (T::List(_), _) => T::List(Box::new(T::Dyn)),
                    _ => T::Dyn,
                }
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::Unspecified => T::Dyn,
        }
    }

    fn ident(&mut self, id: u64, name: &str) -> T {
        if self.declared(name) {
            return T::Dyn;
        }
        match name {
            "device" => T::Device,
            "int" | "uint" | "double" | "bool" | "string" | "bytes" | "list" | "map"
            | "null_type" | "type" | "dyn" => T::Type,
            _ => {
                self.error(
                    id,
                    format!("undeclared reference to '{name}' (in container '')"),
                );
                T::Dyn
            }
        }
    }

    fn select(&mut self, id: u64, operand: &T, field: &str) -> T {
        match operand {
            T::Device => match field {
                "driver" => T::String,
                "attributes" => T::Map(
                    Box::new(T::String),
                    Box::new(T::Map(Box::new(T::String), Box::new(T::Any))),
                ),
                "capacity" => T::Map(
                    Box::new(T::String),
                    Box::new(T::Map(Box::new(T::String), Box::new(T::Quantity))),
                ),
                "allowMultipleAllocations" => T::Bool,
                _ => {
                    self.error(id, format!("undefined field '{field}'"));
                    T::Dyn
                }
            },
            T::Map(_, v) => (**v).clone(),
            t if t.primitive() => {
                self.error(
                    id,
                    format!("type '{}' does not support field selection", t.name()),
                );
                T::Dyn
            }
            _ => T::Dyn,
        }
    }

    fn no_overload(&mut self, id: u64, func: &str, args: &[T]) {
        let list: Vec<String> = args.iter().map(T::name).collect();
        self.error(
            id,
            format!(
                "found no matching overload for '{func}' applied to '({})'",
                list.join(", ")
            ),
        );
    }

    fn call(&mut self, id: u64, call: &cel::common::ast::CallExpr) -> T {
        // `cel.bind(name, init, expr)` (ext.Bindings): `name` is declared inside `expr`.
        if call.func_name == "bind"
            && call.args.len() == 3
            && matches!(call.target.as_deref(), Some(IdedExpr { expr: Expr::Ident(t), .. }) if t == "cel")
            && let Expr::Ident(var) = &call.args[0].expr
        {
            self.check(&call.args[1]);
            self.scopes.push(var.clone());
            let t = self.check(&call.args[2]);
            self.scopes.pop();
            return t;
        }
        let target = call.target.as_deref().map(|t| self.check(t));
        let args: Vec<T> = call.args.iter().map(|a| self.check(a)).collect();
        let f = call.func_name.as_str();
        match f {
            operators::LOGICAL_AND | operators::LOGICAL_OR | operators::LOGICAL_NOT => {
                if args.iter().any(|a| a.primitive() && *a != T::Bool) {
                    self.no_overload(id, f, &args);
                }
                T::Bool
            }
            operators::EQUALS | operators::NOT_EQUALS => {
                if let [a, b] = args.as_slice()
                    && a.primitive()
                    && b.primitive()
                    && a != b
                    && *a != T::Null
                    && *b != T::Null
                {
                    self.no_overload(id, f, &args);
                }
                T::Bool
            }
            operators::LESS
            | operators::LESS_EQUALS
            | operators::GREATER
            | operators::GREATER_EQUALS
            | operators::IN
            | operators::NOT_STRICTLY_FALSE => T::Bool,
            operators::CONDITIONAL => match args.as_slice() {
                [_, a, b] if a == b => a.clone(),
                _ => T::Dyn,
            },
            operators::INDEX | operators::OPT_INDEX => match args.first() {
                Some(T::Map(_, v)) => (**v).clone(),
                Some(T::List(e)) => (**e).clone(),
                _ => T::Dyn,
            },
            operators::ADD
            | operators::SUBSTRACT
            | operators::MULTIPLY
            | operators::DIVIDE
            | operators::MODULO => match args.as_slice() {
                [a, b] if a == b && a.primitive() => a.clone(),
                _ => T::Dyn,
            },
            operators::NEGATE => args.first().cloned().unwrap_or(T::Dyn),
            "size" => T::Int,
            "startsWith" | "endsWith" | "contains" | "matches" | "isGreaterThan" | "isLessThan"
            | "isSorted" | "isQuantity" | "isSemver" | "isURL" => T::Bool,
            "int" => T::Int,
            "uint" => T::Uint,
            "double" => T::Double,
            "string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "format" => T::String,
            "bool" => T::Bool,
            "bytes" => T::Bytes,
            "compareTo" => T::Int,
            _ => {
                let _ = target;
                T::Dyn
            }
        }
    }
}

/// Checks a selector expression; the error is the detail of the real server's `Invalid` (or
/// `Required`-free) field error, e.g. `compilation failed: ERROR: <input>:1:5: …`.
pub(crate) fn compile(expression: &str) -> Result<(), String> {
    let parsed = cel::parser::Parser::new()
        .enable_optional_syntax(true)
        .parse_with_source_info(expression);
    let (ast, info) = match parsed {
        Ok(x) => x,
        Err(errs) => {
            let mut seen = HashSet::new();
            let mut issues: Vec<(isize, isize, String)> = errs
                .errors
                .iter()
                .map(|e| (e.pos.0.max(1), e.pos.1.max(1), e.msg.clone()))
                .filter(|i| seen.insert(i.clone()))
                .collect();
            issues.sort_by_key(|(l, c, _)| (*l, *c));
            let text: Vec<String> = issues
                .iter()
                .map(|(l, c, m)| render(expression, *l as usize, *c as usize, m))
                .collect();
            return Err(format!("compilation failed: {}", text.join("\n")));
        }
    };
    let mut checker = Checker {
        source: expression,
        info: &info,
        scopes: Vec::new(),
        errors: Vec::new(),
    };
    let t = checker.check(&ast);
    if !checker.errors.is_empty() {
        let mut errors = std::mem::take(&mut checker.errors);
        errors.sort_by_key(|(o, _)| *o);
        let text: Vec<String> = errors
            .iter()
            .map(|(offset, msg)| {
                let (line, col, _) = position(checker.source, *offset);
                render(checker.source, line, col, msg)
            })
            .collect();
        return Err(format!("compilation failed: {}", text.join("\n")));
    }
    match t {
        T::Bool | T::Any | T::Dyn => Ok(()),
        other => Err(format!(
            "must evaluate to bool or the unknown type, not {}",
            other.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syntax_errors_as_cel_go_renders_them() {
        let e = compile(r#"device.attributes["gpu.example.com"].model =="#).unwrap_err();
        assert_eq!(
            e,
            "compilation failed: ERROR: <input>:1:46: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | device.attributes[\"gpu.example.com\"].model ==\n | .............................................^"
        );
    }

    #[test]
    fn valid_selectors() {
        for ok in [
            r#"device.driver == "gpu.example.com""#,
            r#"device.attributes["gpu.example.com"].model == "a100""#,
            r#"device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0"#,
            r#"cel.bind(dra, device.attributes["dra.example.com"], dra.a && dra.b)"#,
            r#"device.attributes["x"].exists(k, k.startsWith("m"))"#,
            r#"has(device.attributes["x"].model)"#,
            r#"device.attributes["x"].model"#,
            "true",
        ] {
            assert_eq!(compile(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn type_errors() {
        assert_eq!(
            compile("foo == 1").unwrap_err(),
            "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo' (in container '')\n | foo == 1\n | ^"
        );
        assert!(
            compile("device.vendor == 1")
                .unwrap_err()
                .contains("undefined field 'vendor'")
        );
        assert_eq!(
            compile("1 + 2").unwrap_err(),
            "must evaluate to bool or the unknown type, not int"
        );
        assert_eq!(
            compile("device.driver").unwrap_err(),
            "must evaluate to bool or the unknown type, not string"
        );
        assert!(
            compile("device.driver == 1")
                .unwrap_err()
                .contains("found no matching overload for '_==_' applied to '(string, int)'")
        );
    }
}
