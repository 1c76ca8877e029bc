//! SDMA descriptor properties (docs/hardware.md): `decode(encode(d)) == d`; the
//! validator accepts exactly the descriptors the rules describe (checked
//! against an independent statement of them); every descriptor
//! `split_transfer` returns validates, and together they cover the transfer
//! contiguously, in order, with the packet flags on the ends; arbitrary bytes
//! never panic the decoder, the validator or the dump.

use apir_ir::target::sdma::{
    annotate, split_transfer, split_transfer_at, validate, SdmaDescriptor, SplitError,
    DATARAM_BASE, DATARAM_END, DESCRIPTOR_SIZE, MAX_DESCRIPTOR_BYTES, QUEUES,
};
use proptest::prelude::*;

/// Dataram addresses around and inside the window.
fn dram() -> impl Strategy<Value = u32> {
    prop_oneof![
        DATARAM_BASE..DATARAM_END,
        DATARAM_BASE - 16..DATARAM_BASE + 16,
        DATARAM_END - 0x100..DATARAM_END + 16,
        any::<u32>(),
    ]
}

/// HBM addresses, with the top of the address space well represented.
fn hbm() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..1 << 40, u64::MAX - 0x2_0000..=u64::MAX, any::<u64>(),]
}

/// Any descriptor that has an encoding (length 1..=65536; every other field
/// any value its wire field holds).
fn encodable() -> impl Strategy<Value = SdmaDescriptor> {
    (
        prop_oneof![
            1u32..=16,
            1u32..=MAX_DESCRIPTOR_BYTES,
            Just(MAX_DESCRIPTOR_BYTES)
        ],
        prop_oneof![0u8..QUEUES as u8, any::<u8>()],
        any::<bool>(),
        any::<bool>(),
        dram(),
        hbm(),
    )
        .prop_map(|(length, queue, first, last, dram, hbm)| SdmaDescriptor {
            length,
            queue,
            first,
            last,
            dram,
            hbm,
        })
}

/// The validity rules of docs/hardware.md and the module doc, stated on values.
fn rules_hold(d: &SdmaDescriptor) -> bool {
    let dram_end = u64::from(d.dram) + u64::from(d.length);
    let hbm_end = u128::from(d.hbm) + u128::from(d.length);
    u32::from(d.queue) < QUEUES
        && d.dram >= DATARAM_BASE
        && dram_end <= u64::from(DATARAM_END)
        && hbm_end <= 1u128 << 64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn decode_inverts_encode(d in encodable()) {
        let bytes = d.encode();
        prop_assert_eq!(SdmaDescriptor::decode(&bytes), Ok(d));
        prop_assert_eq!(validate(&bytes).is_ok(), rules_hold(&d), "{:?}", validate(&bytes));
        // Encoded values never set a reserved bit.
        prop_assert_eq!(bytes[3] & 0x3f, 0);
    }

    #[test]
    fn split_descriptors_validate_and_cover_the_transfer(
        hbm in hbm(),
        dram in dram(),
        bytes in prop_oneof![0u64..=16, 0u64..=0x2_0000, Just(0x1_0000u64)],
        queue in prop_oneof![0u8..QUEUES as u8, any::<u8>()],
        max in prop_oneof![
            Just(MAX_DESCRIPTOR_BYTES),
            1u32..=64,
            1u32..=MAX_DESCRIPTOR_BYTES,
            Just(0u32),
            Just(MAX_DESCRIPTOR_BYTES + 1),
        ],
    ) {
        let result = split_transfer_at(hbm, dram, bytes, queue, max);
        if max == MAX_DESCRIPTOR_BYTES {
            prop_assert_eq!(&result, &split_transfer(hbm, dram, bytes, queue));
        }
        let fits = (1..=MAX_DESCRIPTOR_BYTES).contains(&max)
            && u32::from(queue) < QUEUES
            && (DATARAM_BASE..DATARAM_END).contains(&dram)
            && u64::from(dram) + bytes <= u64::from(DATARAM_END)
            && u128::from(hbm) + u128::from(bytes) <= 1u128 << 64;
        let ds = match result {
            Ok(ds) => ds,
            Err(e) => {
                prop_assert!(!fits, "rejected a legal transfer: {}", e);
                return Ok(());
            }
        };
        prop_assert!(fits, "accepted an illegal transfer: {:?}", ds);
        prop_assert_eq!(ds.len() as u64, bytes.div_ceil(u64::from(max)));
        let mut at = 0u64;
        for (i, d) in ds.iter().enumerate() {
            let encoded = d.encode();
            prop_assert_eq!(validate(&encoded), Ok(()), "{}", d);
            prop_assert!(d.length >= 1 && d.length <= max);
            prop_assert_eq!(u128::from(d.hbm), u128::from(hbm) + u128::from(at));
            prop_assert_eq!(u64::from(d.dram), u64::from(dram) + at);
            prop_assert_eq!(d.queue, queue);
            prop_assert_eq!((d.first, d.last), (i == 0, i + 1 == ds.len()));
            at += u64::from(d.length);
        }
        prop_assert_eq!(at, bytes);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
        let decoded = SdmaDescriptor::decode(&bytes);
        let valid = validate(&bytes);
        let dump = annotate(&bytes);
        if bytes.len() != DESCRIPTOR_SIZE {
            prop_assert!(decoded.is_err() && dump.is_err());
            prop_assert_eq!(valid.map_err(|e| e.offset), Err(0));
            return Ok(());
        }
        let d = decoded.expect("16 bytes always decode");
        prop_assert_eq!(dump.map(|s| s.lines().count()), Ok(5));
        // Re-encoding reproduces the bytes unless reserved bits were set.
        let reserved = bytes[3] & 0x3f != 0;
        prop_assert_eq!(d.encode()[..] == bytes[..], !reserved);
        // The validator accepts exactly the rule-abiding, reserved-free bytes.
        prop_assert_eq!(valid.is_ok(), rules_hold(&d) && !reserved, "{:?}", valid);
    }

    #[test]
    fn random_16_bytes_never_panic(bytes in any::<[u8; 16]>()) {
        let d = SdmaDescriptor::decode(&bytes).expect("16 bytes always decode");
        let valid = validate(&bytes);
        prop_assert!(annotate(&bytes).is_ok());
        prop_assert_eq!(valid.is_ok(), rules_hold(&d) && bytes[3] & 0x3f == 0);
        if let Err(e) = valid {
            prop_assert!([2usize, 3, 4, 8].contains(&e.offset), "{}", e);
            prop_assert_eq!(e.check.as_str(), "sdma_desc_valid");
        }
    }
}

#[test]
fn split_error_messages() {
    let cases = [
        (
            split_transfer(0, DATARAM_BASE, 1, 16),
            "queue 16 is not a queue id (0..=15)",
        ),
        (
            split_transfer(0, DATARAM_END - 4, 8, 0),
            "8 bytes at dataram address 0x8fffc do not fit in the dataram window [0x80000, 0x90000)",
        ),
        (
            split_transfer(u64::MAX - 1, DATARAM_BASE, 3, 0),
            "HBM address 0xfffffffffffffffe with 3 bytes runs past the end of the 64-bit address space",
        ),
        (
            split_transfer_at(0, DATARAM_BASE, 1, 0, 0),
            "0 bytes per descriptor is not in 1..=65536",
        ),
    ];
    for (result, message) in cases {
        let e: SplitError = result.expect_err(message);
        assert_eq!(e.to_string(), message);
    }
}
