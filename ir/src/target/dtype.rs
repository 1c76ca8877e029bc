//! Element types (docs/hardware.md, "Element types"). Codes are
//! project-defined except code 9, which the reference's two-window validator
//! passes for the data window.

use std::fmt;

/// An element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(missing_docs)]
pub enum Dtype {
    U8,
    I8,
    U16,
    I16,
    F16,
    Bf16,
    F8e4m3,
    F8e5m2,
    I32,
    U32,
    F32,
}

/// `(dtype, code, name, bytes)`: the one table of element types.
const TABLE: [(Dtype, u8, &str, u32); 11] = [
    (Dtype::U8, 0, "u8", 1),
    (Dtype::I8, 1, "i8", 1),
    (Dtype::U16, 2, "u16", 2),
    (Dtype::I16, 3, "i16", 2),
    (Dtype::F16, 4, "f16", 2),
    (Dtype::Bf16, 5, "bf16", 2),
    (Dtype::F8e4m3, 6, "f8e4m3", 1),
    (Dtype::F8e5m2, 7, "f8e5m2", 1),
    (Dtype::I32, 8, "i32", 4),
    (Dtype::U32, 9, "u32", 4),
    (Dtype::F32, 10, "f32", 4),
];

impl Dtype {
    /// Every dtype in code order.
    pub fn all() -> impl Iterator<Item = Dtype> {
        TABLE.iter().map(|e| e.0)
    }

    fn entry(self) -> &'static (Dtype, u8, &'static str, u32) {
        &TABLE[self as usize]
    }

    /// The wire code.
    pub fn code(self) -> u8 {
        self.entry().1
    }

    /// The IR spelling (`f32`).
    pub fn name(self) -> &'static str {
        self.entry().2
    }

    /// Size of one element in bytes.
    pub fn bytes(self) -> u32 {
        self.entry().3
    }

    /// Whether the type holds integers (usable as gather indices).
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            Dtype::U8 | Dtype::I8 | Dtype::U16 | Dtype::I16 | Dtype::I32 | Dtype::U32
        )
    }

    /// Parses the IR spelling.
    pub fn from_name(s: &str) -> Option<Dtype> {
        TABLE.iter().find(|e| e.2 == s).map(|e| e.0)
    }

    /// The dtype with wire code `code`.
    pub fn from_code(code: u8) -> Option<Dtype> {
        TABLE.iter().find(|e| e.1 == code).map(|e| e.0)
    }

    /// All spellings, for "expected one of" messages.
    pub fn names() -> impl Iterator<Item = &'static str> {
        TABLE.iter().map(|e| e.2)
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_indexed_by_discriminant() {
        for (i, d) in Dtype::all().enumerate() {
            assert_eq!(d as usize, i);
            assert_eq!(d.code() as usize, i);
            assert_eq!(Dtype::from_name(d.name()), Some(d));
            assert_eq!(Dtype::from_code(d.code()), Some(d));
        }
        assert_eq!(Dtype::from_code(9), Some(Dtype::U32));
        assert_eq!(Dtype::U32.bytes(), 4);
        assert_eq!(Dtype::Bf16.bytes(), 2);
        assert_eq!(Dtype::from_code(11), None);
        // The validators' alignment check relies on power-of-two sizes.
        assert!(Dtype::all().all(|d| d.bytes().is_power_of_two()));
    }
}
