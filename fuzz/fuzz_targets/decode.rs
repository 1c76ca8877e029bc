//! Arbitrary bytes through the descriptor decoder, the validators and the
//! annotated dump, for every kind and arch: nothing panics, and whatever
//! decodes re-encodes to the same bytes.
#![no_main]

use apir_ir::target::descriptor::Descriptor;
use apir_ir::target::dump::annotate;
use apir_ir::target::validate::{check_m4d_active_channels, mem_nd_valid, tensor_nd_valid};
use apir_ir::target::{Arch, DescriptorKind, Dtype, MemorySet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, bytes)) = data.split_first() else { return };
    let kind = if sel & 8 == 0 { DescriptorKind::Tensor(sel % 4 + 1) } else { DescriptorKind::MemPattern(sel % 4 + 1) };
    let arch = Arch::ALL[usize::from(sel >> 4) % 3];
    let dtype = Dtype::from_code((sel >> 2) % 11).unwrap_or(Dtype::F32);
    if let Ok(d) = Descriptor::decode(kind, bytes) {
        let _ = annotate(&d, arch);
        if d.index_addr.is_none() {
            assert_eq!(d.encode().as_slice(), bytes);
        }
    }
    let _ = mem_nd_valid(bytes, kind, dtype, arch, MemorySet::SP);
    let _ = tensor_nd_valid(bytes, kind, dtype, arch, MemorySet::S);
    let _ = check_m4d_active_channels(bytes, u32::from(sel), arch);
});
