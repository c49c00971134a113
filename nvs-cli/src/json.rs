//! `--json` output: one JSON object per line, keys in a fixed order (a stable format for
//! scripts, documented in the README). Names are bytes: `name` is the name as UTF-8
//! (invalid bytes as U+FFFD), `name_hex` its exact bytes.

use std::fmt::Write as _;

/// A JSON object being written, one `key: value` at a time.
pub struct Obj(String);

impl Obj {
    pub fn new() -> Obj {
        Obj(String::from("{"))
    }

    fn key(&mut self, k: &str) {
        if self.0.len() > 1 {
            self.0.push(',');
        }
        self.0.push_str(&string(k));
        self.0.push(':');
    }

    pub fn str(mut self, k: &str, v: &str) -> Obj {
        self.key(k);
        self.0.push_str(&string(v));
        self
    }

    pub fn num(mut self, k: &str, v: u64) -> Obj {
        self.key(k);
        let _ = write!(self.0, "{v}");
        self
    }

    pub fn bool(mut self, k: &str, v: bool) -> Obj {
        self.key(k);
        self.0.push_str(if v { "true" } else { "false" });
        self
    }

    /// A name: `name` (UTF-8, lossy) and `name_hex` (its bytes).
    pub fn name(self, k: &str, v: &[u8]) -> Obj {
        let hex: String = v.iter().map(|b| format!("{b:02x}")).collect();
        self.str(k, &String::from_utf8_lossy(v)).str(&format!("{k}_hex"), &hex)
    }

    /// The object and a newline.
    pub fn line(mut self) -> String {
        self.0.push_str("}\n");
        self.0
    }
}

/// `s` as a JSON string literal.
fn string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_what_json_needs() {
        let line = Obj::new().name("name", b"a\"b\\c\nd\x01\xff").num("v", 3).bool("ok", true).line();
        assert_eq!(
            line,
            "{\"name\":\"a\\\"b\\\\c\\nd\\u0001\u{fffd}\",\"name_hex\":\"6122625c630a6401ff\",\"v\":3,\"ok\":true}\n"
        );
    }
}
