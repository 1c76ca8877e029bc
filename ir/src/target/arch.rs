//! Archs and memories (docs/hardware.md, "Archs and memories").

use std::fmt;

/// A NeuronCore generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Arch {
    /// trn1 / inf2.
    V2,
    /// trn2.
    V3,
    /// trn3.
    V4,
}

impl Arch {
    /// Every arch, oldest first.
    pub const ALL: [Arch; 3] = [Arch::V2, Arch::V3, Arch::V4];

    /// The spelling used in IR text and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Arch::V2 => "v2",
            Arch::V3 => "v3",
            Arch::V4 => "v4",
        }
    }

    /// Parses `v2`, `v3` or `v4`.
    pub fn from_name(s: &str) -> Option<Arch> {
        Arch::ALL.into_iter().find(|a| a.name() == s)
    }

    /// The partitions of an on-chip memory on this arch.
    pub fn partitions(self, mem: Memory) -> u32 {
        match mem {
            Memory::Sbuf | Memory::Psum => ON_CHIP_PARTITIONS,
            Memory::Hbm => 1,
        }
    }

    /// Bytes per partition of an on-chip memory (pub: 192/224/256 KiB SBUF,
    /// 16 KiB PSUM on every arch). HBM has no partitions; its "partition" is
    /// the whole 64-bit address space.
    pub fn bytes_per_partition(self, mem: Memory) -> u64 {
        match (mem, self) {
            (Memory::Sbuf, Arch::V2) => 0x30000,
            (Memory::Sbuf, Arch::V3) => 0x38000,
            (Memory::Sbuf, Arch::V4) => 0x40000,
            (Memory::Psum, _) => PSUM_BANKS * PSUM_BANK_BYTES,
            (Memory::Hbm, _) => u64::MAX,
        }
    }
}

/// Partitions of SBUF and PSUM on every arch (pub).
pub const ON_CHIP_PARTITIONS: u32 = 128;

/// PSUM banks per partition (pub).
pub const PSUM_BANKS: u64 = 8;
/// Bytes per PSUM bank (pub).
pub const PSUM_BANK_BYTES: u64 = 2048;

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A memory an access pattern can address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Memory {
    /// State buffer (on-chip, partitioned).
    Sbuf,
    /// Partial-sum buffer (on-chip, partitioned).
    Psum,
    /// Device DRAM, byte addressed, no partition axis.
    Hbm,
}

impl Memory {
    /// The buffer op that declares this memory (`mem.sbuf`, ...), from the
    /// op-definition table.
    pub fn op_name(self) -> &'static str {
        super::ops::OpCode::Buffer(self).name()
    }

    /// The short upper-case name used in messages (`SBUF`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Memory::Sbuf => "SBUF",
            Memory::Psum => "PSUM",
            Memory::Hbm => "HBM",
        }
    }

    /// Whether the memory has a partition axis (pair 0 of an AP).
    pub fn is_on_chip(self) -> bool {
        !matches!(self, Memory::Hbm)
    }
}

impl fmt::Display for Memory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of memories, as allowed for an operand role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemorySet(u8);

impl MemorySet {
    /// SBUF only (`S` in the op table).
    pub const S: MemorySet = MemorySet(1);
    /// PSUM only (`P`).
    pub const P: MemorySet = MemorySet(2);
    /// SBUF or PSUM (`SP`).
    pub const SP: MemorySet = MemorySet(3);
    /// HBM only (staging accesses).
    pub const HBM: MemorySet = MemorySet(4);

    fn bit(m: Memory) -> u8 {
        match m {
            Memory::Sbuf => 1,
            Memory::Psum => 2,
            Memory::Hbm => 4,
        }
    }

    /// Whether `m` is in the set.
    pub fn contains(self, m: Memory) -> bool {
        self.0 & Self::bit(m) != 0
    }

    /// The members, in declaration order.
    pub fn iter(self) -> impl Iterator<Item = Memory> {
        [Memory::Sbuf, Memory::Psum, Memory::Hbm]
            .into_iter()
            .filter(move |m| self.contains(*m))
    }
}

impl fmt::Display for MemorySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.iter().map(|m| m.name()).collect();
        f.write_str(&names.join(" or "))
    }
}

/// Partition start rule (pub, NKI allocator "ISA rules"): an on-chip operand
/// with `channels` active partitions starting at `start` is legal iff this
/// returns `None`; otherwise the rule it breaks. Takes 64-bit values so that
/// callers never truncate an out-of-range start or count before asking.
pub fn partition_start_rule(start: u64, channels: u64) -> Option<&'static str> {
    let total = u64::from(ON_CHIP_PARTITIONS);
    if channels == 0 {
        return Some("at least one partition must be active");
    }
    if start.checked_add(channels).is_none_or(|e| e > total) {
        return Some("start partition + channels must be at most 128");
    }
    let ok = match channels {
        65..=128 => start == 0,
        33..=64 => start == 0 || start == 64,
        _ => start.is_multiple_of(32),
    };
    if ok {
        None
    } else {
        Some(match channels {
            65..=128 => "more than 64 channels must start at partition 0",
            33..=64 => "33..64 channels must start at partition 0 or 64",
            _ => "1..32 channels must start at partition 0, 32, 64 or 96",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_matches_target_md() {
        assert_eq!(Arch::V2.bytes_per_partition(Memory::Sbuf), 192 * 1024);
        assert_eq!(Arch::V3.bytes_per_partition(Memory::Sbuf), 224 * 1024);
        assert_eq!(Arch::V4.bytes_per_partition(Memory::Sbuf), 256 * 1024);
        for a in Arch::ALL {
            assert_eq!(a.bytes_per_partition(Memory::Psum), 16 * 1024);
            assert_eq!(a.partitions(Memory::Sbuf), 128);
            assert_eq!(Arch::from_name(a.name()), Some(a));
        }
        assert_eq!(Arch::from_name("v5"), None);
    }

    #[test]
    fn partition_start_rule_table() {
        assert_eq!(partition_start_rule(0, 128), None);
        assert!(partition_start_rule(32, 96).is_some());
        assert_eq!(partition_start_rule(64, 64), None);
        assert!(partition_start_rule(32, 64).is_some());
        for p in [0, 32, 64, 96] {
            assert_eq!(partition_start_rule(p, 32), None);
        }
        assert!(partition_start_rule(16, 8).is_some());
        assert!(partition_start_rule(96, 33).is_some());
        assert!(partition_start_rule(0, 0).is_some());
        assert!(partition_start_rule(u64::MAX, 1).is_some());
        assert!(partition_start_rule(0, 1 << 40).is_some());
    }

    #[test]
    fn memory_sets() {
        assert!(MemorySet::SP.contains(Memory::Psum));
        assert!(!MemorySet::S.contains(Memory::Psum));
        assert_eq!(MemorySet::SP.to_string(), "SBUF or PSUM");
    }
}
