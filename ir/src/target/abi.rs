//! The reference runtime's staging ABI layouts (docs/hardware.md, "Runtime
//! staging structs"; recovered from the GpSimd runtime), for code generators that
//! emit accessor objects.
//!
//! The model is ILP32 Xtensa: pointers, references, `size_t` and `int` are 4
//! bytes aligned to 4, but `uint64_t` is 8 bytes aligned to **8** (not i386's
//! 4), so a struct holding one is 8-aligned and its size a multiple of 8.
//! Members are laid out in declaration order, each at the first offset that
//! its alignment allows, and the size is rounded up to the struct's alignment.
//!
//! Where the reference page states an offset the field is marked
//! [`Provenance::Reference`]. The page's member tables for the stream types
//! are not in the copy we have: it gives their sizes (48 and 56 bytes), the
//! component sizes (`Q7PtrType` 0x10, `int`/`size_t`/pointer 4,
//! `unique_ptr<T, fn-ptr deleter>` 8), the member names (in its pseudocode),
//! `backup_buffer_` @0x18, `buffer_ptr_` @0x1c for `T = u8`, and the
//! accessors' enforcer reference @0x30. The other stream offsets follow from
//! those and the layout rules under one assumed declaration order (`data_`,
//! `data_size_`, `data_idx_`, `backup_buffer_`, `buffer_ptr_`, `buffer_size_`,
//! `buffer_idx_`) and are marked [`Provenance::Inferred`]; in particular the
//! order of `data_size_` and `data_idx_` (0x10, 0x14) is a guess.

use super::dtype::Dtype;

/// Bytes of a pointer, reference, `size_t` or `int` (ILP32).
pub const POINTER_BYTES: u32 = 4;
/// Alignment of `uint64_t` on Xtensa (8, where i386 would give 4).
pub const U64_ALIGN: u32 = 8;

/// `BUFFER_SIZE_BYTES` (`TensorStreamAccessor.h:18`, `4*1024`): the one
/// dataram bounce buffer a stream owns.
pub const BUFFER_SIZE_BYTES: u32 = 4096;

/// Elements in a stream's buffer, `BUFFER_SIZE_BYTES / sizeof(T)`
/// (`TensorStreamAccessor.h:149`): 1024 for `f32`, 4096 for `u8`.
pub fn stream_buffer_elements(dtype: Dtype) -> u32 {
    BUFFER_SIZE_BYTES / dtype.bytes()
}

/// Where a field's offset comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Provenance {
    /// The reference page states it (DWARF, or its compile-verify notes).
    Reference,
    /// Derived from the page's sizes, member list and the ILP32 layout rules
    /// under an assumed declaration order (see the module doc).
    Inferred,
}

/// One member of an ABI struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiField {
    /// Member name as in the reference headers.
    pub name: &'static str,
    /// C++ type, for readers.
    pub ty: &'static str,
    /// Byte offset in the struct.
    pub offset: u32,
    /// Size in bytes.
    pub size: u32,
    /// Alignment in bytes under the ILP32 Xtensa model.
    pub align: u32,
    /// The struct type of the member, when it is one of this module's
    /// layouts.
    pub layout: Option<&'static AbiLayout>,
    /// Where the offset comes from.
    pub provenance: Provenance,
}

/// An ABI struct: name, size, alignment and members in declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbiLayout {
    /// Type name as in the reference (`TensorStream<float>`).
    pub name: &'static str,
    /// `sizeof`.
    pub size: u32,
    /// `alignof`.
    pub align: u32,
    /// Members with storage, in declaration order.
    pub fields: &'static [AbiField],
}

impl AbiLayout {
    /// The member called `name`.
    pub fn field(&self, name: &str) -> Option<&'static AbiField> {
        self.fields.iter().find(|f| f.name == name)
    }
}

const fn member(
    name: &'static str,
    ty: &'static str,
    offset: u32,
    size: u32,
    align: u32,
    provenance: Provenance,
) -> AbiField {
    AbiField {
        name,
        ty,
        offset,
        size,
        align,
        layout: None,
        provenance,
    }
}

const fn nested(
    name: &'static str,
    layout: &'static AbiLayout,
    offset: u32,
    size: u32,
    provenance: Provenance,
) -> AbiField {
    AbiField {
        name,
        ty: layout.name,
        offset,
        size,
        align: layout.align,
        layout: Some(layout),
        provenance,
    }
}

use Provenance::{Inferred, Reference};

/// `Q7PtrType`, 16 bytes: the device pointer every accessor stores (the
/// 64-bit HBM address and a cached translation context).
pub const Q7_PTR_TYPE: AbiLayout = AbiLayout {
    name: "Q7PtrType",
    size: 16,
    align: U64_ALIGN,
    fields: &[
        member("hbm_addr", "uint64_t", 0x0, 8, U64_ALIGN, Reference),
        member("ctx_ptr", "void*", 0x8, 4, 4, Reference),
        member("is_nullptr", "bool", 0xC, 1, 1, Reference),
    ],
};

/// `at::TensorTcmAccessor<read_only>`, 16 bytes (DWARF `DW_AT_byte_size:
/// 16`): only the `Q7PtrType`. `read_only` is a template value parameter with
/// no storage, so `<true>` and `<false>` share this layout; there is no vtable
/// and no coherency-enforcer member.
pub const TENSOR_TCM_ACCESSOR: AbiLayout = AbiLayout {
    name: "TensorTcmAccessor<read_only>",
    size: 16,
    align: U64_ALIGN,
    fields: &[nested("data_", &Q7_PTR_TYPE, 0x0, 16, Reference)],
};

/// The members of `TensorStream<T>` for a `T` of `elem_size` bytes aligned
/// to `elem_align`. The offsets are written out, not computed, and hold for
/// `sizeof(T) <= 4` only (a wider `T` shifts `buffer_ptr_` and the members
/// after it); the unit tests recompute them with the layout rules.
const fn stream_fields(elem: &'static str, elem_size: u32, elem_align: u32) -> [AbiField; 7] {
    [
        nested("data_", &Q7_PTR_TYPE, 0x00, 16, Inferred),
        member("data_size_", "size_t", 0x10, 4, 4, Inferred),
        member("data_idx_", "size_t", 0x14, 4, 4, Inferred),
        member(
            "backup_buffer_",
            elem,
            0x18,
            elem_size,
            elem_align,
            Reference,
        ),
        member(
            "buffer_ptr_",
            "std::unique_ptr<T, void (*)(T*)>",
            0x1C,
            8,
            4,
            Reference,
        ),
        member("buffer_size_", "size_t", 0x24, 4, 4, Inferred),
        member("buffer_idx_", "size_t", 0x28, 4, 4, Inferred),
    ]
}

const TENSOR_STREAM_F32_FIELDS: [AbiField; 7] = stream_fields("float", 4, 4);
const TENSOR_STREAM_U8_FIELDS: [AbiField; 7] = stream_fields("uint8_t", 1, 1);

/// `TensorStream<float>`, 48 bytes: the stream state (HBM pointer, element
/// count and cursor, the owned 4 KiB dataram buffer and its cursor, and a
/// one-element backup buffer used when the dataram allocation fails).
pub const TENSOR_STREAM_F32: AbiLayout = AbiLayout {
    name: "TensorStream<float>",
    size: 48,
    align: U64_ALIGN,
    fields: &TENSOR_STREAM_F32_FIELDS,
};

/// `TensorStream<uint8_t>`, 48 bytes: as for `float`; `backup_buffer_` is one
/// byte and `buffer_ptr_` re-aligns to 0x1c.
pub const TENSOR_STREAM_U8: AbiLayout = AbiLayout {
    name: "TensorStream<uint8_t>",
    size: 48,
    align: U64_ALIGN,
    fields: &TENSOR_STREAM_U8_FIELDS,
};

/// The members of a read or write stream accessor over `stream`.
const fn accessor_fields(stream: &'static AbiLayout) -> [AbiField; 2] {
    [
        nested("stream_", stream, 0x00, 48, Inferred),
        member(
            "coherency_enforcer_",
            "CoherencyEnforcer&",
            0x30,
            POINTER_BYTES,
            POINTER_BYTES,
            Reference,
        ),
    ]
}

const ACCESSOR_F32_FIELDS: [AbiField; 2] = accessor_fields(&TENSOR_STREAM_F32);
const ACCESSOR_U8_FIELDS: [AbiField; 2] = accessor_fields(&TENSOR_STREAM_U8);

/// `TensorReadStreamAccessor<float>`, 56 bytes: the stream and the reference
/// to the tensor's coherency enforcer @0x30. No vtable.
pub const TENSOR_READ_STREAM_ACCESSOR_F32: AbiLayout = AbiLayout {
    name: "TensorReadStreamAccessor<float>",
    size: 56,
    align: U64_ALIGN,
    fields: &ACCESSOR_F32_FIELDS,
};

/// `TensorReadStreamAccessor<uint8_t>`, 56 bytes.
pub const TENSOR_READ_STREAM_ACCESSOR_U8: AbiLayout = AbiLayout {
    name: "TensorReadStreamAccessor<uint8_t>",
    size: 56,
    align: U64_ALIGN,
    fields: &ACCESSOR_U8_FIELDS,
};

/// `TensorWriteStreamAccessor<float>`, 56 bytes, laid out as the read
/// accessor.
pub const TENSOR_WRITE_STREAM_ACCESSOR_F32: AbiLayout = AbiLayout {
    name: "TensorWriteStreamAccessor<float>",
    size: 56,
    align: U64_ALIGN,
    fields: &ACCESSOR_F32_FIELDS,
};

/// `TensorWriteStreamAccessor<uint8_t>`, 56 bytes.
pub const TENSOR_WRITE_STREAM_ACCESSOR_U8: AbiLayout = AbiLayout {
    name: "TensorWriteStreamAccessor<uint8_t>",
    size: 56,
    align: U64_ALIGN,
    fields: &ACCESSOR_U8_FIELDS,
};

/// Every layout of this module.
pub const LAYOUTS: [&AbiLayout; 8] = [
    &Q7_PTR_TYPE,
    &TENSOR_TCM_ACCESSOR,
    &TENSOR_STREAM_F32,
    &TENSOR_STREAM_U8,
    &TENSOR_READ_STREAM_ACCESSOR_F32,
    &TENSOR_READ_STREAM_ACCESSOR_U8,
    &TENSOR_WRITE_STREAM_ACCESSOR_F32,
    &TENSOR_WRITE_STREAM_ACCESSOR_U8,
];

/// `TensorStream<T>` for an element type the reference covers (`f32`, `u8`).
pub fn tensor_stream(dtype: Dtype) -> Option<&'static AbiLayout> {
    match dtype {
        Dtype::F32 => Some(&TENSOR_STREAM_F32),
        Dtype::U8 => Some(&TENSOR_STREAM_U8),
        _ => None,
    }
}

/// `TensorReadStreamAccessor<T>` (`write = false`) or
/// `TensorWriteStreamAccessor<T>` (`write = true`) for `f32` or `u8`.
pub fn stream_accessor(dtype: Dtype, write: bool) -> Option<&'static AbiLayout> {
    match (dtype, write) {
        (Dtype::F32, false) => Some(&TENSOR_READ_STREAM_ACCESSOR_F32),
        (Dtype::U8, false) => Some(&TENSOR_READ_STREAM_ACCESSOR_U8),
        (Dtype::F32, true) => Some(&TENSOR_WRITE_STREAM_ACCESSOR_F32),
        (Dtype::U8, true) => Some(&TENSOR_WRITE_STREAM_ACCESSOR_U8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn align_up(x: u32, a: u32) -> u32 {
        x.div_ceil(a) * a
    }

    /// Every number the reference (and docs/hardware.md) states, written out.
    #[test]
    fn sizes_and_offsets_from_the_reference() {
        let sizes: Vec<(&str, u32)> = LAYOUTS.iter().map(|l| (l.name, l.size)).collect();
        assert_eq!(
            sizes,
            [
                ("Q7PtrType", 16),
                ("TensorTcmAccessor<read_only>", 16),
                ("TensorStream<float>", 48),
                ("TensorStream<uint8_t>", 48),
                ("TensorReadStreamAccessor<float>", 56),
                ("TensorReadStreamAccessor<uint8_t>", 56),
                ("TensorWriteStreamAccessor<float>", 56),
                ("TensorWriteStreamAccessor<uint8_t>", 56),
            ]
        );
        let stated: Vec<(&str, &str, u32, u32)> = LAYOUTS
            .iter()
            .flat_map(|l| l.fields.iter().map(move |f| (l, f)))
            .filter(|(_, f)| f.provenance == Provenance::Reference)
            .map(|(l, f)| (l.name, f.name, f.offset, f.size))
            .collect();
        assert_eq!(
            stated,
            [
                ("Q7PtrType", "hbm_addr", 0x0, 8),
                ("Q7PtrType", "ctx_ptr", 0x8, 4),
                ("Q7PtrType", "is_nullptr", 0xC, 1),
                ("TensorTcmAccessor<read_only>", "data_", 0x0, 16),
                ("TensorStream<float>", "backup_buffer_", 0x18, 4),
                ("TensorStream<float>", "buffer_ptr_", 0x1C, 8),
                ("TensorStream<uint8_t>", "backup_buffer_", 0x18, 1),
                ("TensorStream<uint8_t>", "buffer_ptr_", 0x1C, 8),
                (
                    "TensorReadStreamAccessor<float>",
                    "coherency_enforcer_",
                    0x30,
                    4
                ),
                (
                    "TensorReadStreamAccessor<uint8_t>",
                    "coherency_enforcer_",
                    0x30,
                    4
                ),
                (
                    "TensorWriteStreamAccessor<float>",
                    "coherency_enforcer_",
                    0x30,
                    4
                ),
                (
                    "TensorWriteStreamAccessor<uint8_t>",
                    "coherency_enforcer_",
                    0x30,
                    4
                ),
            ]
        );
        // The staging asymmetry: no enforcer in the TCM accessor.
        assert!(TENSOR_TCM_ACCESSOR.field("coherency_enforcer_").is_none());
        assert_eq!(BUFFER_SIZE_BYTES, 4 * 1024);
        assert_eq!(stream_buffer_elements(Dtype::F32), 1024);
        assert_eq!(stream_buffer_elements(Dtype::U8), 4096);
    }

    /// Members in declaration order do not overlap, fit in the struct, sit
    /// at their alignment, and are exactly where the ILP32 Xtensa rules put
    /// them; the struct's alignment is its widest member's and its size is
    /// the end of the last member rounded up to it.
    #[test]
    fn layouts_follow_the_ilp32_xtensa_rules() {
        for l in LAYOUTS {
            let mut end = 0;
            let mut align = 1;
            for f in l.fields {
                assert!(f.align.is_power_of_two(), "{}.{}", l.name, f.name);
                assert_eq!(f.offset % f.align, 0, "{}.{} misaligned", l.name, f.name);
                assert!(f.offset >= end, "{}.{} overlaps", l.name, f.name);
                assert_eq!(
                    f.offset,
                    align_up(end, f.align),
                    "{}.{} is not where the layout rules put it",
                    l.name,
                    f.name
                );
                end = f.offset + f.size;
                assert!(end <= l.size, "{}.{} runs past the struct", l.name, f.name);
                align = align.max(f.align);
            }
            assert_eq!(l.align, align, "{}", l.name);
            assert_eq!(l.size, align_up(end, align), "{}", l.name);
        }
    }

    /// Primitive sizes and alignments of the model, and nested members
    /// agree with the layouts they name.
    #[test]
    fn member_types_agree_with_the_model() {
        for l in LAYOUTS {
            for f in l.fields {
                let expected = match f.ty {
                    "uint64_t" => Some((8, U64_ALIGN)),
                    "void*" | "size_t" | "CoherencyEnforcer&" => {
                        Some((POINTER_BYTES, POINTER_BYTES))
                    }
                    "float" => Some((4, 4)),
                    "bool" | "uint8_t" => Some((1, 1)),
                    // Raw pointer + function-pointer deleter.
                    "std::unique_ptr<T, void (*)(T*)>" => Some((2 * POINTER_BYTES, POINTER_BYTES)),
                    _ => None,
                };
                match (f.layout, expected) {
                    (Some(inner), None) => {
                        assert_eq!(
                            (f.size, f.align),
                            (inner.size, inner.align),
                            "{}.{}",
                            l.name,
                            f.name
                        );
                        assert_eq!(f.ty, inner.name);
                    }
                    (None, Some(sa)) => assert_eq!((f.size, f.align), sa, "{}.{}", l.name, f.name),
                    _ => panic!("{}.{}: unknown member type {}", l.name, f.name, f.ty),
                }
            }
        }
        // The stream holds the element type it is instantiated with.
        assert_eq!(
            TENSOR_STREAM_U8.field("backup_buffer_").map(|f| f.ty),
            Some("uint8_t")
        );
        assert_eq!(
            TENSOR_READ_STREAM_ACCESSOR_U8
                .field("stream_")
                .and_then(|f| f.layout),
            Some(&TENSOR_STREAM_U8)
        );
    }

    #[test]
    fn lookups() {
        assert_eq!(tensor_stream(Dtype::F32), Some(&TENSOR_STREAM_F32));
        assert_eq!(tensor_stream(Dtype::Bf16), None);
        assert_eq!(
            stream_accessor(Dtype::U8, true).map(|l| l.name),
            Some("TensorWriteStreamAccessor<uint8_t>")
        );
        assert_eq!(
            stream_accessor(Dtype::F32, false).map(|l| l.name),
            Some("TensorReadStreamAccessor<float>")
        );
        assert_eq!(stream_accessor(Dtype::I32, false), None);
    }
}
