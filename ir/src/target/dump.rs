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
    let form = match form_bits(word) {
        0 => "plain",
        1 => "two-window",
        _ => "invalid",
    };
    match Addr4::decode(word & !(3 << FORM_SHIFT), arch) {
        Ok(a) if word & (1 << 31) == 0 && form != "invalid" => {
            format!(
                "{word:#010x} (region {}, partition {}, byte {:#x}, form {form})",
                a.mem, a.partition, a.byte
            )
        }
        Ok(_) if word & (1 << 31) != 0 => format!("{word:#010x} (invalid: reserved bit 31 is set)"),
        Ok(_) => format!("{word:#010x} (invalid: form {})", form_bits(word)),
        Err(e) => format!("{word:#010x} (invalid: {e})"),
    }
}

/// The annotated dump of a decoded descriptor, one line per field.
pub fn annotate(d: &Descriptor, arch: Arch) -> String {
    let bytes = d.encode();
    let mut out = String::new();
    for f in d.fields() {
        let hex: Vec<String> = bytes[f.offset..f.offset + f.len]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let value = match f.value {
            FieldValue::Addr(w) => describe_addr4(w, arch),
            FieldValue::Step(s) => s.to_string(),
            FieldValue::Num(n) => n.to_string(),
        };
        let _ = writeln!(
            out,
            "+{:#04x} | {:<11} | {} = {}",
            f.offset,
            hex.join(" "),
            f.name,
            value
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::DescriptorKind;

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
