//! Objects that carry their shape: the metadata convention (FORMAT.md, "Object
//! metadata") — UTF-8 `key=value` lines stored with the object, under its commit.
//! `dtype` is a NumPy type string (`<f8`, `<i4`, `|u1`, ...), `shape` the dimensions,
//! comma-separated, slowest first (C order); any other key is a user attribute.

use crate::error::{Error, Result};

/// An object's metadata: ordered `key=value` pairs (keys unique).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Meta {
    pairs: Vec<(String, String)>,
}

/// Plain element types with a NumPy type string (this machine's byte order: little).
pub trait Element: bytemuck::Pod {
    /// The NumPy type string.
    const DTYPE: &'static str;
}

macro_rules! element {
    ($($t:ty => $s:literal),* $(,)?) => { $(impl Element for $t { const DTYPE: &'static str = $s; })* };
}
element!(f64 => "<f8", f32 => "<f4", i64 => "<i8", i32 => "<i4", i16 => "<i2", i8 => "|i1",
         u64 => "<u8", u32 => "<u4", u16 => "<u2", u8 => "|u1");

impl Meta {
    /// No metadata.
    pub fn new() -> Meta {
        Meta::default()
    }

    /// Set `key` to `value` (replacing an earlier value). A key is 1 or more bytes
    /// without `=` or a line break; a value has no line break: else `to_bytes` refuses.
    pub fn set(mut self, key: &str, value: &str) -> Meta {
        match self.pairs.iter_mut().find(|(k, _)| k == key) {
            Some(pair) => pair.1 = value.to_string(),
            None => self.pairs.push((key.to_string(), value.to_string())),
        }
        self
    }

    /// The element type, as a NumPy type string (`<f8`).
    pub fn dtype(self, dtype: &str) -> Meta {
        self.set("dtype", dtype)
    }

    /// The dimensions, slowest first.
    pub fn shape(self, dims: &[u64]) -> Meta {
        let s: Vec<String> = dims.iter().map(u64::to_string).collect();
        self.set("shape", &s.join(","))
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The element type, if set.
    pub fn dtype_str(&self) -> Option<&str> {
        self.get("dtype")
    }

    /// The dimensions, if set and well formed (`None` for a bad list).
    pub fn dims(&self) -> Option<Vec<u64>> {
        let s = self.get("shape")?;
        if s.is_empty() {
            return Some(Vec::new()); // a scalar
        }
        s.split(',').map(|d| d.trim().parse().ok()).collect()
    }

    /// Every pair, in order.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The bytes stored with an object (`Object::meta`): one `key=value\n` per pair.
    /// Refuses keys and values that would not read back as written, and more than
    /// [`nvs_core::META_MAX`] bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = String::new();
        for (k, v) in &self.pairs {
            if k.is_empty() || k.contains(['=', '\n', '\r']) || v.contains(['\n', '\r']) {
                return Err(Error::BadMeta {
                    what: format!("key {k:?} / value {v:?}: no '=' in keys, no line breaks"),
                });
            }
            out.push_str(k);
            out.push('=');
            out.push_str(v);
            out.push('\n');
        }
        if out.len() > nvs_core::META_MAX {
            return Err(Error::BadMeta { what: format!("{} bytes, more than {}", out.len(), nvs_core::META_MAX) });
        }
        Ok(out.into_bytes())
    }

    /// Parse stored metadata (empty bytes: no pairs). Refuses what `to_bytes` would not
    /// have written (not UTF-8, a line without `=`, a key twice).
    pub fn parse(bytes: &[u8]) -> Result<Meta> {
        let text = std::str::from_utf8(bytes).map_err(|e| Error::BadMeta { what: format!("not UTF-8: {e}") })?;
        let mut m = Meta::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            let (k, v) = line.split_once('=').ok_or_else(|| Error::BadMeta { what: format!("no '=' in {line:?}") })?;
            if m.get(k).is_some() {
                return Err(Error::BadMeta { what: format!("key {k:?} twice") });
            }
            m = m.set(k, v);
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let m = Meta::new().dtype(f64::DTYPE).shape(&[100, 2, 3]).set("units", "K").set("step", "7");
        let b = m.to_bytes().unwrap();
        assert_eq!(b, b"dtype=<f8\nshape=100,2,3\nunits=K\nstep=7\n");
        let back = Meta::parse(&b).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.dims(), Some(vec![100, 2, 3]));
        assert_eq!(back.dtype_str(), Some("<f8"));
        assert_eq!(Meta::new().shape(&[]).dims(), Some(vec![]));
        assert!(Meta::new().set("a=b", "c").to_bytes().is_err());
        assert!(Meta::new().set("a", "c\nd").to_bytes().is_err());
        assert!(Meta::new().set("a", &"x".repeat(2000)).to_bytes().is_err());
        assert!(Meta::parse(b"no pair here").is_err());
        assert!(Meta::parse(b"a=1\na=2\n").is_err());
        assert!(Meta::parse(&[0xff, b'=', b'1']).is_err());
        assert_eq!(Meta::parse(b"").unwrap(), Meta::new());
        assert_eq!(Meta::new().set("shape", "1,x").dims(), None);
    }
}
