//! A tool's output as compact JSON, written inside the component with strings escaped a
//! run at a time.
//!
//! `serde_json` looks at every byte of every string on its own; compiled to WebAssembly
//! that is most of a large read's cost (a 1 MiB file's content took longer to encode
//! than to read, check and cut together). This writer tests eight bytes at once for
//! anything JSON must escape and copies the runs between such bytes whole. It writes
//! exactly what `serde_json::to_string` writes (same field order, same escapes, same
//! numbers) for everything a tool's output is made of; what it does not handle itself
//! (non-string map keys, `RawValue`) it reports as [`Unsupported`], and the caller
//! falls back to `serde_json` for that output.

use std::fmt::Write as _;

use serde::Serialize;
use serde::ser::{self, Impossible};

/// Why [`to_string`] did not write a value.
#[derive(Debug)]
pub(crate) enum Error {
    /// A shape this writer leaves to `serde_json` (the caller falls back to it).
    Unsupported,
    /// The value's own `Serialize` failed, with its message.
    Custom(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Unsupported => f.write_str("a shape left to serde_json"),
            Error::Custom(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error::Custom(msg.to_string())
    }
}

/// `value` as compact JSON, byte for byte what `serde_json::to_string` gives, falling
/// back to `serde_json` for shapes this writer does not handle.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut w = Writer { out: String::with_capacity(256) };
    match value.serialize(&mut w) {
        Ok(()) => Ok(w.out),
        Err(Error::Unsupported) => serde_json::to_string(value),
        Err(Error::Custom(m)) => Err(<serde_json::Error as ser::Error>::custom(m)),
    }
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` that is zero (exact per byte: no carry crosses a
/// byte, since each byte's low seven bits plus 0x7f stay below 0x100).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    !(((x & !HI) + (!HI)) | x) & HI
}

/// The high bit of each byte of `x` that JSON must escape: below 0x20, `"` or `\`.
#[inline(always)]
fn escape_bytes(x: u64) -> u64 {
    // A byte is below 0x20 when its high bit is clear and its low seven bits plus 0x60
    // do not reach 0x80.
    let control = !(((x & !HI) + LO * 0x60) | x) & HI;
    control | zero_bytes(x ^ (LO * b'"' as u64)) | zero_bytes(x ^ (LO * b'\\' as u64))
}

/// Whether JSON must escape `b` inside a string.
#[inline(always)]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The index of the first byte at or after `from` that JSON must escape.
#[inline]
fn next_escape(bytes: &[u8], mut from: usize) -> Option<usize> {
    while from + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[from..from + 8]);
        let hits = escape_bytes(u64::from_le_bytes(word));
        if hits != 0 {
            return Some(from + (hits.trailing_zeros() / 8) as usize);
        }
        from += 8;
    }
    bytes[from..].iter().position(|&b| needs_escape(b)).map(|i| from + i)
}

/// Append `s` to `out` as a JSON string, quotes included.
pub(crate) fn write_str(out: &mut String, s: &str) {
    // Room for a few escapes as well, so that a long string grows the output once
    // rather than twice (each growth copies everything written so far).
    out.reserve(s.len() + s.len() / 16 + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    while let Some(i) = next_escape(bytes, start) {
        // `i` is an ASCII byte, so both slices end on character boundaries.
        out.push_str(&s[start..i]);
        match bytes[i] {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x08 => out.push_str("\\b"),
            0x0c => out.push_str("\\f"),
            b => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push_str("\\u00");
                out.push(HEX[usize::from(b >> 4)] as char);
                out.push(HEX[usize::from(b & 0xf)] as char);
            }
        }
        start = i + 1;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

struct Writer {
    out: String,
}

impl Writer {
    fn integer(&mut self, v: impl std::fmt::Display) -> Result<(), Error> {
        // An integer's `Display` is its JSON form.
        write!(self.out, "{v}").map_err(|_| Error::Unsupported)
    }

    fn float<F: Serialize>(&mut self, v: F) -> Result<(), Error> {
        // serde_json's shortest round-trip form (and `null` for NaN and infinities).
        self.out.push_str(&serde_json::to_string(&v).map_err(|e| Error::Custom(e.to_string()))?);
        Ok(())
    }

    fn open(&mut self, c: char, len: Option<usize>) -> Compound<'_> {
        self.out.push(c);
        if len == Some(0) {
            self.out.push(if c == '[' { ']' } else { '}' });
            return Compound { w: self, state: State::Empty };
        }
        Compound { w: self, state: State::First }
    }

    /// `{"variant":` before a variant's content.
    fn variant(&mut self, variant: &str) {
        self.out.push('{');
        write_str(&mut self.out, variant);
        self.out.push(':');
    }
}

#[derive(PartialEq)]
enum State {
    Empty,
    First,
    Rest,
}

struct Compound<'w> {
    w: &'w mut Writer,
    state: State,
}

impl Compound<'_> {
    fn comma(&mut self) {
        if self.state == State::Rest {
            self.w.out.push(',');
        }
        self.state = State::Rest;
    }

    fn close(self, c: char) {
        if self.state != State::Empty {
            self.w.out.push(c);
        }
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.comma();
        value.serialize(&mut *self.w)
    }

    fn field<T: Serialize + ?Sized>(&mut self, key: &str, value: &T) -> Result<(), Error> {
        self.comma();
        write_str(&mut self.w.out, key);
        self.w.out.push(':');
        value.serialize(&mut *self.w)
    }
}

impl<'w> ser::Serializer for &'w mut Writer {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Compound<'w>;
    type SerializeTuple = Compound<'w>;
    type SerializeTupleStruct = Compound<'w>;
    type SerializeTupleVariant = Compound<'w>;
    type SerializeMap = Compound<'w>;
    type SerializeStruct = Compound<'w>;
    type SerializeStructVariant = Compound<'w>;

    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.out.push_str(if v { "true" } else { "false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_i128(self, v: i128) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_u128(self, v: u128) -> Result<(), Error> {
        self.integer(v)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.float(v)
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.float(v)
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(&mut self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(&mut self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Error> {
        use ser::SerializeSeq;
        let mut seq = self.serialize_seq(Some(v.len()))?;
        for b in v {
            seq.serialize_element(b)?;
        }
        seq.end()
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Error> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        self.out.push_str("null");
        Ok(())
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Result<(), Error> {
        // serde_json's raw values travel as a newtype with a private name: leave them
        // (and anything else named like serde_json's internals) to serde_json.
        if name.starts_with("$serde_json") {
            return Err(Error::Unsupported);
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.variant(variant);
        value.serialize(&mut *self)?;
        self.out.push('}');
        Ok(())
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Compound<'w>, Error> {
        Ok(self.open('[', len))
    }
    fn serialize_tuple(self, len: usize) -> Result<Compound<'w>, Error> {
        Ok(self.open('[', Some(len)))
    }
    fn serialize_tuple_struct(self, _name: &'static str, len: usize) -> Result<Compound<'w>, Error> {
        Ok(self.open('[', Some(len)))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'w>, Error> {
        self.variant(variant);
        Ok(self.open('[', Some(len)))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Compound<'w>, Error> {
        Ok(self.open('{', len))
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<Compound<'w>, Error> {
        Ok(self.open('{', Some(len)))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Compound<'w>, Error> {
        self.variant(variant);
        Ok(self.open('{', Some(len)))
    }
}

/// The three sequence traits differ only in their method's name.
macro_rules! sequence {
    ($($trait:ident :: $method:ident),+) => {$(
        impl ser::$trait for Compound<'_> {
            type Ok = ();
            type Error = Error;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
                self.element(value)
            }
            fn end(self) -> Result<(), Error> {
                self.close(']');
                Ok(())
            }
        }
    )+};
}

sequence!(SerializeSeq::serialize_element, SerializeTuple::serialize_element, SerializeTupleStruct::serialize_field);

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        self.element(value)
    }
    fn end(self) -> Result<(), Error> {
        let w = &mut *self.w;
        if self.state != State::Empty {
            w.out.push(']');
        }
        w.out.push('}');
        Ok(())
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Error> {
        self.comma();
        key.serialize(KeyWriter { out: &mut self.w.out })?;
        self.w.out.push(':');
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Error> {
        value.serialize(&mut *self.w)
    }
    fn end(self) -> Result<(), Error> {
        self.close('}');
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Error> {
        self.close('}');
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Result<(), Error> {
        self.field(key, value)
    }
    fn end(self) -> Result<(), Error> {
        let w = &mut *self.w;
        if self.state != State::Empty {
            w.out.push('}');
        }
        w.out.push('}');
        Ok(())
    }
}

/// Methods of a key writer that leave the key to serde_json.
macro_rules! refuse_scalars {
    ($($method:ident($ty:ty)),+) => {$(
        fn $method(self, _v: $ty) -> Result<(), Error> {
            Err(Error::Unsupported)
        }
    )+};
}

/// A map key: strings (and what serializes as one) are written here; any other key
/// goes to serde_json, which knows how it quotes numbers and refuses the rest.
struct KeyWriter<'a> {
    out: &'a mut String,
}

impl ser::Serializer for KeyWriter<'_> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Impossible<(), Error>;
    type SerializeTuple = Impossible<(), Error>;
    type SerializeTupleStruct = Impossible<(), Error>;
    type SerializeTupleVariant = Impossible<(), Error>;
    type SerializeMap = Impossible<(), Error>;
    type SerializeStruct = Impossible<(), Error>;
    type SerializeStructVariant = Impossible<(), Error>;

    fn serialize_str(self, v: &str) -> Result<(), Error> {
        write_str(self.out, v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        write_str(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_unit_variant(self, _name: &'static str, _index: u32, variant: &'static str) -> Result<(), Error> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, name: &'static str, value: &T) -> Result<(), Error> {
        if name.starts_with("$serde_json") {
            return Err(Error::Unsupported);
        }
        value.serialize(self)
    }
    refuse_scalars!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64)
    );
    fn serialize_bytes(self, _v: &[u8]) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_none(self) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, _value: &T) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _value: &T,
    ) -> Result<(), Error> {
        Err(Error::Unsupported)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<Self::SerializeSeq, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_tuple(self, _len: usize) -> Result<Self::SerializeTuple, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_tuple_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeTupleStruct, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<Self::SerializeMap, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_struct(self, _name: &'static str, _len: usize) -> Result<Self::SerializeStruct, Error> {
        Err(Error::Unsupported)
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _len: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        Err(Error::Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Both writers on the same value: identical text.
    fn same<T: Serialize>(v: &T) {
        assert_eq!(to_string(v).unwrap(), serde_json::to_string(v).unwrap());
    }

    #[test]
    fn every_byte_escapes_as_serde_json_does_at_every_offset() {
        // Each ASCII byte, and a few multi-byte characters, at each position of a word
        // and across word boundaries.
        let mut specials: Vec<String> = (0u8..0x80).map(|b| (b as char).to_string()).collect();
        specials.extend(["é", "€", "𝄞", "\u{7f}", "\u{2028}"].map(String::from));
        for s in &specials {
            for pad in 0..20 {
                same(&format!("{}{s}{}", "a".repeat(pad), "b".repeat(19 - pad)));
                same(&format!("{s}{}{s}", "x".repeat(pad)));
            }
        }
        same(&"");
        same(&"\"\\\n\r\t\u{8}\u{c}\u{0}\u{1f}");
    }

    #[test]
    fn long_text_with_lines_quotes_and_controls() {
        let mut s = String::new();
        for i in 0..5000 {
            s.push_str(&format!("line {i}: \"quoted\" path\\to\\{i}\tcol\r\n"));
            if i % 97 == 0 {
                s.push('\u{1}');
                s.push('é');
            }
        }
        same(&s);
    }

    #[derive(Serialize)]
    enum Shape {
        Unit,
        New(u8),
        Tuple(i32, String),
        Struct { a: Option<f64>, b: Vec<bool> },
        EmptyTuple(),
        EmptyStruct {},
    }

    #[derive(Serialize)]
    struct Out {
        success: bool,
        count: u64,
        neg: i64,
        big: u128,
        ratio: f64,
        nan: f64,
        small: f32,
        c: char,
        none: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u8>,
        items: Vec<Shape>,
        empty: Vec<u8>,
        map: BTreeMap<String, Vec<u32>>,
        empty_map: BTreeMap<String, u8>,
        tuple: (u8, &'static str),
        unit: (),
        bytes: &'static [u8],
        value: serde_json::Value,
        #[serde(flatten)]
        extra: BTreeMap<String, String>,
    }

    #[test]
    fn every_shape_matches_serde_json() {
        let out = Out {
            success: true,
            count: u64::MAX,
            neg: i64::MIN,
            big: u128::MAX,
            ratio: 0.1 + 0.2,
            nan: f64::NAN,
            small: 1e-7,
            c: '"',
            none: None,
            skipped: None,
            items: vec![
                Shape::Unit,
                Shape::New(7),
                Shape::Tuple(-1, "t\n".into()),
                Shape::Struct { a: Some(1e300), b: vec![true, false] },
                Shape::EmptyTuple(),
                Shape::EmptyStruct {},
            ],
            empty: vec![],
            map: BTreeMap::from([("k\"ey".to_string(), vec![1, 2]), ("z".to_string(), vec![])]),
            empty_map: BTreeMap::new(),
            tuple: (1, "two"),
            unit: (),
            bytes: b"ab",
            value: serde_json::json!({"n": null, "x": [1, 2.5, -3, "s"], "o": {}}),
            extra: BTreeMap::from([("flat".to_string(), "tened".to_string())]),
        };
        same(&out);
    }

    #[test]
    fn non_string_keys_fall_back_to_serde_json() {
        let numbers = BTreeMap::from([(1u32, "a"), (2, "b")]);
        assert!(matches!(numbers.serialize(&mut Writer { out: String::new() }), Err(Error::Unsupported)));
        same(&numbers);
        let bools = BTreeMap::from([(true, 1u8)]);
        same(&bools);
    }

    #[test]
    fn a_failing_serialize_is_an_error_not_a_fallback() {
        struct Bad;
        impl Serialize for Bad {
            fn serialize<S: ser::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
                Err(ser::Error::custom("no"))
            }
        }
        assert_eq!(to_string(&Bad).unwrap_err().to_string(), "no");
    }
}
