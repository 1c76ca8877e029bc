//! Text computed at compile time from the tables, so that a fact written
//! once as a number or in one spelling can appear as text elsewhere (a
//! default as IR or pipeline text, a parameter name spelled as a pass
//! option) without being written twice.
//!
//! ```
//! use apir_ir::text::ConstText;
//! static DEFAULT: ConstText<20> = ConstText::decimal(27_200);
//! static OPTION: ConstText<32> = ConstText::replaced("dma_bytes_per_us", b'_', b'-');
//! static HELP: ConstText<32> = ConstText::joined(&["at most ", DEFAULT.as_str(), " B/us"]);
//! assert_eq!(DEFAULT.as_str(), "27200");
//! assert_eq!(OPTION.as_str(), "dma-bytes-per-us");
//! assert_eq!(HELP.as_str(), "at most 27200 B/us");
//! ```

/// ASCII text of at most `N` bytes, built by `const fn`s. A text that does
/// not fit is a compile-time error where it is built in a constant.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConstText<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> ConstText<N> {
    /// The empty text.
    pub const EMPTY: ConstText<N> = ConstText {
        bytes: [0; N],
        len: 0,
    };

    /// `v` in decimal, as IR text and pipeline text write integers.
    pub const fn decimal(v: u64) -> ConstText<N> {
        let mut digits = [0u8; 20];
        let mut n = 0;
        let mut rest = v;
        loop {
            digits[n] = b'0' + (rest % 10) as u8;
            n += 1;
            rest /= 10;
            if rest == 0 {
                break;
            }
        }
        assert!(n <= N, "ConstText too small for the number");
        let mut out = Self::EMPTY;
        while out.len < n {
            out.bytes[out.len] = digits[n - 1 - out.len];
            out.len += 1;
        }
        out
    }

    /// `s` with every byte `from` replaced by `to` (ASCII bytes only, so
    /// the result stays UTF-8).
    pub const fn replaced(s: &str, from: u8, to: u8) -> ConstText<N> {
        assert!(from.is_ascii() && to.is_ascii(), "replace ASCII bytes only");
        let s = s.as_bytes();
        assert!(s.len() <= N, "ConstText too small for the text");
        let mut out = Self::EMPTY;
        while out.len < s.len() {
            let b = s[out.len];
            out.bytes[out.len] = if b == from { to } else { b };
            out.len += 1;
        }
        out
    }

    /// `parts` one after another (whole UTF-8 strings, so the result stays
    /// UTF-8).
    pub const fn joined(parts: &[&str]) -> ConstText<N> {
        let mut out = Self::EMPTY;
        let mut p = 0;
        while p < parts.len() {
            let s = parts[p].as_bytes();
            assert!(out.len + s.len() <= N, "ConstText too small for the text");
            let mut i = 0;
            while i < s.len() {
                out.bytes[out.len] = s[i];
                out.len += 1;
                i += 1;
            }
            p += 1;
        }
        out
    }

    /// The text.
    pub const fn as_str(&self) -> &str {
        match std::str::from_utf8(self.bytes.split_at(self.len).0) {
            Ok(s) => s,
            // Unreachable: only ASCII bytes or whole UTF-8 strings go in.
            Err(_) => "",
        }
    }
}

impl<const N: usize> std::fmt::Debug for ConstText<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> std::fmt::Display for ConstText<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_and_replaced() {
        for v in [0, 1, 9, 10, 1300, 16_384, 1 << 40, u64::MAX] {
            assert_eq!(ConstText::<20>::decimal(v).as_str(), v.to_string());
        }
        assert_eq!(
            ConstText::<16>::replaced("c_fixed_ns", b'_', b'-').as_str(),
            "c-fixed-ns"
        );
        assert_eq!(ConstText::<4>::EMPTY.as_str(), "");
    }
}
