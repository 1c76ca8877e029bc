//! Properties of the wire library: decode(encode(d)) == d over random valid
//! descriptors, and the decoder, validators and dump never panic on random
//! bytes. Plus a table of descriptors whose bytes were computed by hand from
//! the reference page.

use apir_ir::target::addr4::{Addr4, Form};
use apir_ir::target::descriptor::{num_offset, step_offset, Descriptor};
use apir_ir::target::dump::annotate;
use apir_ir::target::validate::{
    check_m4d_active_channels, descriptor_failures, descriptor_valid, mem_nd_valid,
    plain_descriptor_ok, tensor_nd_valid,
};
use apir_ir::target::{Arch, DescriptorKind, Direction, Dtype, MemorySet};
use apir_ir::Memory;
use proptest::prelude::*;

fn arch() -> impl Strategy<Value = Arch> {
    prop_oneof![Just(Arch::V2), Just(Arch::V3), Just(Arch::V4)]
}

fn kind() -> impl Strategy<Value = DescriptorKind> {
    (1u8..=4, any::<bool>()).prop_map(|(n, t)| {
        if t {
            DescriptorKind::Tensor(n)
        } else {
            DescriptorKind::MemPattern(n)
        }
    })
}

/// A descriptor every validator accepts: a legal f32-aligned ADDR4, nonzero
/// nums, nonzero step2, unit-filled unused slots; sometimes two-window.
fn valid_descriptor() -> impl Strategy<Value = (Arch, Descriptor)> {
    (
        arch(),
        kind(),
        any::<bool>(),
        0u32..128,
        0u32..0x1000,
        any::<bool>(),
        prop::array::uniform4(any::<i16>()),
        prop::array::uniform4(1u16..=u16::MAX),
    )
        .prop_map(|(arch, kind, psum, partition, byte, two, steps, nums)| {
            let mem = if psum { Memory::Psum } else { Memory::Sbuf };
            let n = usize::from(kind.slots());
            let two = two && n == 4;
            let form = if two { Form::TwoWindow } else { Form::Plain };
            let addr = Addr4 {
                mem,
                partition,
                byte: byte * 4,
                form,
            }
            .encode(arch)
            .unwrap();
            let mut d = Descriptor::unit(kind, addr);
            for i in 0..n {
                d.steps[i] = if steps[i] == 0 { 1 } else { steps[i] };
                d.nums[i] = nums[i];
            }
            if two {
                d.steps[0] = 1;
                d.steps[1] = 1;
                d.index_addr = Some(
                    Addr4 {
                        mem: Memory::Sbuf,
                        partition,
                        byte: byte * 4,
                        form: Form::Plain,
                    }
                    .encode(arch)
                    .unwrap(),
                );
            }
            (arch, d)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn decode_inverts_encode((arch, d) in valid_descriptor()) {
        let bytes = d.encode();
        prop_assert_eq!(bytes.len(), 4 + 4 * usize::from(d.kind.slots()));
        prop_assert_eq!(Descriptor::decode(d.kind, &bytes).unwrap(), d);
        let dir = match d.kind { DescriptorKind::Tensor(_) => Direction::Read, DescriptorKind::MemPattern(_) => Direction::Write };
        prop_assert_eq!(descriptor_valid(&bytes, d.kind, Dtype::F32, arch, dir, MemorySet::SP), Ok(()));
    }

    /// The fast path and the full checks give the same verdict on valid
    /// descriptors with one random byte changed.
    #[test]
    fn fast_path_agrees_with_the_full_checks((arch, d) in valid_descriptor(), at in 0usize..20, byte in any::<u8>(), dtype in prop_oneof![Just(Dtype::F32), Just(Dtype::Bf16), Just(Dtype::U8)], psum_ok in any::<bool>()) {
        let mut bytes = d.encode();
        let at = at % bytes.len();
        bytes[at] = byte;
        let mems = if psum_ok { MemorySet::SP } else { MemorySet::S };
        let n = usize::from(d.kind.slots());
        let full = descriptor_failures(&bytes, d.kind, dtype, arch, Direction::Read, mems);
        let plain = bytes[3] & 0xE0 == 0;
        prop_assert_eq!(plain_descriptor_ok(&bytes, n, dtype, arch, mems), plain && full.is_empty(), "{:?}", full);
        prop_assert_eq!(descriptor_valid(&bytes, d.kind, dtype, arch, Direction::Read, mems).err(), full.first().cloned());
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..24), kind in kind(), arch in arch(), ch in any::<u32>()) {
        if let Ok(d) = Descriptor::decode(kind, &bytes) {
            let _ = annotate(&d, arch);
            prop_assert_eq!(d.encode().len(), bytes.len());
        }
        let _ = mem_nd_valid(&bytes, kind, Dtype::Bf16, arch, MemorySet::SP);
        let _ = tensor_nd_valid(&bytes, kind, Dtype::U8, arch, MemorySet::S);
        let _ = check_m4d_active_channels(&bytes, ch, arch);
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Bytes computed by hand from the reference page: ADDR4 @+0, strides at
/// +4+2i, counts at +(4+2N)+2i (so 4D: step3 @+0xA, num0 @+0xC, num3 @+0x12),
/// unused slots {1, 1}, and the 0x20 form marker in byte +3.
#[test]
fn hand_checked_bytes() {
    // 4D: PSUM partition 0 byte 0 (ADDR4 = 1 << 25), slots {1,512},{-4,3},{16,5},{2,7}.
    let mut d = Descriptor::unit(DescriptorKind::MemPattern(4), 0x0200_0000);
    d.steps = [1, -4, 16, 2];
    d.nums = [512, 3, 5, 7];
    let want = hex("00000002") // ADDR4 = 1 << 25, little-endian
        .into_iter()
        .chain(hex("0100fcff10000200")) // steps 1, -4, 16, 2 (step3 @+0xA = 02 00)
        .chain(hex("0002030005000700")) // nums 512 @+0xC, 3, 5, 7 @+0x12
        .collect::<Vec<u8>>();
    assert_eq!(d.encode().as_slice(), want.as_slice());
    assert_eq!(&d.encode()[0xA..0xC], &[2, 0]);
    assert_eq!(&d.encode()[0xC..0xE], &[0, 2]);
    assert_eq!(&d.encode()[0x12..0x14], &[7, 0]);
    assert_eq!(
        (step_offset(4, 3), num_offset(4, 0), num_offset(4, 3)),
        (0xA, 0xC, 0x12)
    );

    // 3D with one surviving dim: unit fill in slots 1 and 2; count base +0xA.
    // SBUF partition 1 byte 8: 0x40000 + 8 = 0x00040008.
    let mut d = Descriptor::unit(DescriptorKind::Tensor(3), 0x0004_0008);
    d.steps[0] = 2;
    d.nums[0] = 100;
    assert_eq!(
        d.encode().as_slice(),
        hex("08000400020001000100640001000100").as_slice()
    );

    // Two-window 4D: data ADDR4 with 0x20 in byte +3, index ADDR4 at +4.
    let mut d = Descriptor::unit(DescriptorKind::Tensor(4), 0x2000_0010);
    d.index_addr = Some(0x0000_2000);
    d.nums = [64, 1, 1, 1];
    let b = d.encode();
    assert_eq!(b[3] & 0x60, 0x20);
    assert_eq!(
        b.as_slice(),
        hex("1000002000200000010001004000010001000100").as_slice()
    );

    // 1D: 8 bytes, num at +6.
    let mut d = Descriptor::unit(DescriptorKind::Tensor(1), 0);
    d.nums[0] = 0xFFFF;
    assert_eq!(d.encode().as_slice(), hex("000000000100ffff").as_slice());
}
