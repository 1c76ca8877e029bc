//! Annotated descriptor dumps: one line per field,
//! `offset | bytes | field = value`, with ADDR4 decoded into region,
//! partition, byte and form. The snapshot format for binary output, shared by
//! `apir-opt --emit=wire-dump` and `apir-dis`.

use super::addr4::{Addr4, FORM_SHIFT};
use super::arch::Arch;
use super::descriptor::{form_bits, Descriptor, FieldValue};
use std::fmt::Write;

/// Describes an ADDR4 word: decoded fields, or why it does not decode.
pub fn describe_addr4(word: u32, arch: Arch) -> String {
    let mut out = String::new();
    describe_addr4_into(&mut out, word, arch);
    out
}

/// [`describe_addr4`], appended to `out`.
pub fn describe_addr4_into(out: &mut String, word: u32, arch: Arch) {
    // `{word:#010x}`: the word as eight hex digits.
    out.push_str("0x");
    crate::printer::write_hex(out, &word.to_be_bytes());
    let form = match form_bits(word) {
        0 => "plain",
        1 => "two-window",
        _ => "invalid",
    };
    match Addr4::decode(word & !(3 << FORM_SHIFT), arch) {
        Ok(a) if word & (1 << 31) == 0 && form != "invalid" => {
            let mut num = itoa::Buffer::new();
            out.push_str(" (region ");
            out.push_str(a.mem.name());
            out.push_str(", partition ");
            out.push_str(num.format(a.partition));
            out.push_str(", byte ");
            push_hex(out, a.byte);
            out.push_str(", form ");
            out.push_str(form);
            out.push(')');
        }
        Ok(_) if word & (1 << 31) != 0 => out.push_str(" (invalid: reserved bit 31 is set)"),
        Ok(_) => {
            let _ = write!(out, " (invalid: form {})", form_bits(word));
        }
        Err(e) => {
            let _ = write!(out, " (invalid: {e})");
        }
    }
}

/// Lowercase hex digits.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// `{v:#x}`: `0x`, then the hex digits of `v` without leading zeros.
fn push_hex(out: &mut String, v: u32) {
    out.push_str("0x");
    let digits = (32 - v.leading_zeros()).div_ceil(4).max(1);
    for shift in (0..digits).rev() {
        out.push(char::from(HEX[((v >> (4 * shift)) & 15) as usize]));
    }
}

/// The annotated dump of a decoded descriptor, one line per field.
pub fn annotate(d: &Descriptor, arch: Arch) -> String {
    let mut out = String::new();
    annotate_into(&mut out, d, arch);
    out
}

/// [`annotate`], appended to `out`.
pub fn annotate_into(out: &mut String, d: &Descriptor, arch: Arch) {
    let bytes = d.encode();
    let mut num = itoa::Buffer::new();
    d.each_field(|offset, len, name, value| {
        match u8::try_from(offset) {
            // `+{:#04x} | ` for the offsets a descriptor has.
            Ok(o) => {
                out.push_str("+0x");
                out.push(char::from(HEX[usize::from(o >> 4)]));
                out.push(char::from(HEX[usize::from(o & 15)]));
                out.push_str(" | ");
            }
            Err(_) => {
                let _ = write!(out, "+{offset:#04x} | ");
            }
        }
        // The field's bytes, two hex digits each, padded to 11 columns.
        let start = out.len();
        for (i, b) in bytes[offset..offset + len].iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
        let width = out.len() - start;
        out.extend(std::iter::repeat_n(' ', 11usize.saturating_sub(width)));
        out.push_str(" | ");
        name.write(out);
        out.push_str(" = ");
        match value {
            FieldValue::Addr(w) => describe_addr4_into(out, w, arch),
            FieldValue::Step(v) => out.push_str(num.format(v)),
            FieldValue::Num(v) => out.push_str(num.format(v)),
        }
        out.push('\n');
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::DescriptorKind;

    /// Each line is `+{offset:#04x} | {bytes:<11} | name = value`, the
    /// bytes as two-digit hex separated by blanks, for descriptors of every
    /// kind with extreme steps and nums.
    #[test]
    fn dump_lines_have_the_documented_form() {
        for kind in [
            DescriptorKind::Tensor(1),
            DescriptorKind::Tensor(4),
            DescriptorKind::MemPattern(3),
        ] {
            for (step, num) in [(0i16, 0u16), (-1, 65535), (i16::MIN, 0xab), (i16::MAX, 1)] {
                let mut d = Descriptor::unit(kind, 0x0200_0010 | u32::from(num));
                for i in 0..usize::from(kind.slots()) {
                    d.steps[i] = step;
                    d.nums[i] = num;
                }
                let bytes = d.encode();
                let mut want = String::new();
                for f in d.fields() {
                    let hex: Vec<String> = bytes[f.offset..f.offset + f.len]
                        .iter()
                        .map(|b| format!("{b:02x}"))
                        .collect();
                    let value = match f.value {
                        FieldValue::Addr(w) => describe_addr4(w, Arch::V2),
                        FieldValue::Step(s) => s.to_string(),
                        FieldValue::Num(n) => n.to_string(),
                    };
                    want.push_str(&format!(
                        "+{:#04x} | {:<11} | {} = {}\n",
                        f.offset,
                        hex.join(" "),
                        f.name,
                        value
                    ));
                }
                assert_eq!(annotate(&d, Arch::V2), want);
            }
        }
    }

    /// The description is the documented form, `{word:#010x} (region R,
    /// partition P, byte {byte:#x}, form F)` or `{word:#010x} (invalid:
    /// why)`, for words across every field's range on every arch.
    #[test]
    fn addr4_descriptions_have_the_documented_form() {
        let mut words = vec![0, 1, 0x10, u32::MAX, 1 << 31, 0x0200_0010, 0x0100_0000];
        let mut x = 0x9e37_79b9u32;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            words.push(x);
            words.push(x & 0x03ff_ffff);
        }
        for arch in Arch::ALL {
            for &word in &words {
                let form = match form_bits(word) {
                    0 => "plain",
                    1 => "two-window",
                    _ => "invalid",
                };
                let want = match Addr4::decode(word & !(3 << FORM_SHIFT), arch) {
                    Ok(a) if word & (1 << 31) == 0 && form != "invalid" => format!(
                        "{word:#010x} (region {}, partition {}, byte {:#x}, form {form})",
                        a.mem, a.partition, a.byte
                    ),
                    Ok(_) if word & (1 << 31) != 0 => {
                        format!("{word:#010x} (invalid: reserved bit 31 is set)")
                    }
                    Ok(_) => format!("{word:#010x} (invalid: form {})", form_bits(word)),
                    Err(e) => format!("{word:#010x} (invalid: {e})"),
                };
                assert_eq!(describe_addr4(word, arch), want, "{word:#x} on {arch}");
            }
        }
    }

    #[test]
    fn dump_lines() {
        let mut d = Descriptor::unit(DescriptorKind::MemPattern(2), 0x0200_0010);
        d.nums[0] = 512;
        assert_eq!(
            annotate(&d, Arch::V2),
            "+0x00 | 10 00 00 02 | addr4 = 0x02000010 (region PSUM, partition 0, byte 0x10, form plain)\n\
             +0x04 | 01 00       | step0 = 1\n\
             +0x06 | 01 00       | step1 = 1\n\
             +0x08 | 00 02       | num0 = 512\n\
             +0x0a | 01 00       | num1 = 1\n"
        );
    }
}
