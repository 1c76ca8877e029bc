//! The staging cost model: the one table of simulator parameters
//! ([`PARAMS`]: name, help, bounds, default with its unit and provenance,
//! and the [`SimParams`] field it sets), and the published NeuronCore DMA
//! figures they relate to. The plan header (`gpsimd.plan`, see
//! [`super::ops`]), the simulator and `schedule-staging`'s options all read
//! it; each default is written here only.
//!
//! How the model relates to the published figures:
//! - a GpSimd core's staging copies use one SDMA queue per direction (one
//!   M2S ring for loads, one S2M ring for flushes, running concurrently), so
//!   a ring moves bytes at one engine's bandwidth, 27.2 B/ns; the 16 engines
//!   a NeuronCore is paired with are not modelled as parallel lanes for one
//!   core's staging (project-defined);
//! - every descriptor pays the published fixed cost of about 1300 ns before
//!   its bytes move, so a 4 KiB copy spends 1300 ns on overhead and 150.6
//!   ns on data: that is why the published guidance asks for payloads of
//!   4 KiB or more per partition, and why the planner prefers large buffers
//!   and sends copies too small to amortise the fixed cost through
//!   VEC_MEMCPY;
//! - NeuronCore-v4's engines are published at 38.4 GB/s; the model keeps
//!   one default for every arch (`dma_bytes_per_us` can be set per run).

/// Where a default comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A published figure (AWS Neuron documentation).
    Published,
    /// Chosen by the project (no published figure; see the note).
    Project,
}

impl Source {
    /// `pub` or `proj`, as the cost-model table prints it.
    pub fn short(self) -> &'static str {
        match self {
            Source::Published => "pub",
            Source::Project => "proj",
        }
    }
}

use super::sdma::{DATARAM_BASE, DATARAM_END};
use crate::text::ConstText;

/// Simulator and cost-model parameters (docs/staging.md). Integer units keep
/// them exact in IR text: nanoseconds, bytes per microsecond, MHz, bytes.
/// The default of each is its row of [`PARAMS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SimParams {
    /// DMA fixed cost per descriptor, ns.
    pub dma_fixed_ns: u64,
    /// DMA bandwidth per queue, bytes per microsecond.
    pub dma_bytes_per_us: u64,
    /// Core clock, MHz.
    pub clock_mhz: u64,
    /// Unbuffered access per element, ns (blocks compute).
    pub index_ns: u64,
    /// VEC_MEMCPY fixed cost per copy, ns.
    pub vec_fixed_ns: u64,
    /// VEC_MEMCPY bandwidth, bytes per microsecond.
    pub vec_bytes_per_us: u64,
    /// C_MEMCPY fixed cost per copy, ns.
    pub c_fixed_ns: u64,
    /// C_MEMCPY bandwidth, bytes per microsecond.
    pub c_bytes_per_us: u64,
    /// Staging budget in the dataram, bytes.
    pub budget: u64,
}

impl Default for SimParams {
    /// Every parameter at its default from [`PARAMS`].
    fn default() -> Self {
        let mut p = SimParams {
            dma_fixed_ns: 0,
            dma_bytes_per_us: 0,
            clock_mhz: 0,
            index_ns: 0,
            vec_fixed_ns: 0,
            vec_bytes_per_us: 0,
            c_fixed_ns: 0,
            c_bytes_per_us: 0,
            budget: 0,
        };
        for q in PARAMS {
            *(q.field)(&mut p) = q.default;
        }
        p
    }
}

/// One parameter of the cost model: its `gpsimd.plan` attribute name (the
/// pass option spells `_` as `-`), help, bounds, default and where the
/// default comes from, and the [`SimParams`] field it sets.
#[derive(Clone, Copy, Debug)]
pub struct ParamInfo {
    /// The parameter's name (`gpsimd.plan` attribute; the pass option
    /// spells `_` as `-`).
    pub name: &'static str,
    /// One-line help.
    pub help: &'static str,
    /// Smallest allowed value.
    pub min: u64,
    /// Largest allowed value.
    pub max: u64,
    /// The default value, in `unit`.
    pub default: u64,
    /// The unit.
    pub unit: &'static str,
    /// Published or project-defined.
    pub source: Source,
    /// Where it comes from, or why it was chosen.
    pub note: &'static str,
    /// The field.
    pub field: fn(&mut SimParams) -> &mut u64,
}

impl ParamInfo {
    /// The default as IR and pipeline text (`1300`).
    pub fn default_text(&self) -> &'static str {
        PARAMS
            .iter()
            .position(|p| p.name == self.name)
            .map_or("", |i| DEFAULT_TEXT[i].as_str())
    }
}

/// The largest time or bandwidth figure a parameter may take.
const MAX_FIGURE: u64 = 1 << 40;

/// DMA fixed cost per descriptor.
pub const DMA_FIXED_NS: ParamInfo = ParamInfo {
    name: "dma_fixed_ns",
    help: "DMA fixed cost per descriptor, ns",
    min: 0,
    max: MAX_FIGURE,
    default: 1300,
    unit: "ns per descriptor",
    source: Source::Published,
    note: "NKI DMA bandwidth guide: descriptor setup, synchronisation and semaphore-to-start latency, about 1300 ns",
    field: |p| &mut p.dma_fixed_ns,
};

/// DMA bandwidth of one queue.
pub const DMA_BYTES_PER_US: ParamInfo = ParamInfo {
    name: "dma_bytes_per_us",
    help: "DMA bandwidth per queue, bytes per microsecond",
    min: 1,
    max: MAX_FIGURE,
    default: 27_200,
    unit: "bytes per microsecond",
    source: Source::Published,
    note: "NKI DMA overview: 27.2 GB/s per DMA engine on NeuronCore-v2 and -v3 (38.4 GB/s on -v4); one engine per ring",
    field: |p| &mut p.dma_bytes_per_us,
};

/// Core clock.
pub const CLOCK_MHZ: ParamInfo = ParamInfo {
    name: "clock_mhz",
    help: "core clock, MHz",
    min: 1,
    max: 1 << 20,
    default: 1400,
    unit: "MHz",
    source: Source::Published,
    note: "NeuronCore-v2 engine clock, 1.4 GHz",
    field: |p| &mut p.clock_mhz,
};

/// One unbuffered (indexed) element access.
pub const INDEX_NS: ParamInfo = ParamInfo {
    name: "index_ns",
    help: "unbuffered access per element, ns",
    min: 0,
    max: MAX_FIGURE,
    default: 50,
    unit: "ns per element",
    source: Source::Project,
    note: "one address translation and one HBM access per element, blocking the core; no published figure",
    field: |p| &mut p.index_ns,
};

/// VEC_MEMCPY fixed cost per copy.
pub const VEC_FIXED_NS: ParamInfo = ParamInfo {
    name: "vec_fixed_ns",
    help: "VEC_MEMCPY fixed cost per copy, ns",
    min: 0,
    max: MAX_FIGURE,
    default: 100,
    unit: "ns per copy",
    source: Source::Project,
    note: "the core's vector memcpy: call and setup; no published figure",
    field: |p| &mut p.vec_fixed_ns,
};

/// VEC_MEMCPY bandwidth.
pub const VEC_BYTES_PER_US: ParamInfo = ParamInfo {
    name: "vec_bytes_per_us",
    help: "VEC_MEMCPY bandwidth, bytes per microsecond",
    min: 1,
    max: MAX_FIGURE,
    default: 8000,
    unit: "bytes per microsecond",
    source: Source::Project,
    note:
        "the core's vector memcpy, 8 B/ns; runs on the core and blocks compute; no published figure",
    field: |p| &mut p.vec_bytes_per_us,
};

/// C_MEMCPY fixed cost per copy.
pub const C_FIXED_NS: ParamInfo = ParamInfo {
    name: "c_fixed_ns",
    help: "C_MEMCPY fixed cost per copy, ns",
    min: 0,
    max: MAX_FIGURE,
    default: 100,
    unit: "ns per copy",
    source: Source::Project,
    note: "the core's scalar memcpy: call and setup; no published figure",
    field: |p| &mut p.c_fixed_ns,
};

/// C_MEMCPY bandwidth.
pub const C_BYTES_PER_US: ParamInfo = ParamInfo {
    name: "c_bytes_per_us",
    help: "C_MEMCPY bandwidth, bytes per microsecond",
    min: 1,
    max: MAX_FIGURE,
    default: 1000,
    unit: "bytes per microsecond",
    source: Source::Project,
    note: "the core's scalar memcpy, 1 B/ns; blocks compute; no published figure",
    field: |p| &mut p.c_bytes_per_us,
};

/// Staging budget in the dataram.
pub const BUDGET: ParamInfo = ParamInfo {
    name: "budget",
    help: "staging budget in the dataram, bytes (at most 65536)",
    min: 1,
    max: (DATARAM_END - DATARAM_BASE) as u64,
    default: 16_384,
    unit: "bytes",
    source: Source::Published,
    note: "the custom-op TCM pool of 16 KiB (a stream takes 4 KiB of it)",
    field: |p| &mut p.budget,
};

/// Every simulator parameter, in the order they are printed (in the plan
/// header and among `schedule-staging`'s options).
pub static PARAMS: &[ParamInfo] = &PARAM_TABLE;

/// [`PARAMS`] as a constant, for the tables computed from it at compile time.
pub const PARAM_TABLE: [ParamInfo; 9] = [
    DMA_FIXED_NS,
    DMA_BYTES_PER_US,
    CLOCK_MHZ,
    INDEX_NS,
    VEC_FIXED_NS,
    VEC_BYTES_PER_US,
    C_FIXED_NS,
    C_BYTES_PER_US,
    BUDGET,
];

/// Each parameter's default as IR and pipeline text, in [`PARAMS`] order.
pub static DEFAULT_TEXT: [ConstText<20>; PARAM_TABLE.len()] = {
    let mut out = [ConstText::EMPTY; PARAM_TABLE.len()];
    let mut i = 0;
    while i < PARAM_TABLE.len() {
        out[i] = ConstText::decimal(PARAM_TABLE[i].default);
        i += 1;
    }
    out
};

/// DMA engines a NeuronCore (v2 to v4) is paired with (NKI DMA overview);
/// the model gives one core's staging one engine per direction.
pub const PUBLISHED_DMA_ENGINES_PER_CORE: u32 = 16;

/// Payload per partition needed to saturate a DMA engine, bytes (NKI DMA
/// bandwidth guide: "4 KiB or more").
pub const PUBLISHED_SATURATING_PAYLOAD: u64 = 4096;

#[cfg(test)]
mod tests {
    use super::*;

    /// At the published saturating payload the fixed cost still dominates
    /// one descriptor (1300 ns against 150.6 ns of transfer): the model is
    /// consistent with the guidance to use payloads of at least 4 KiB.
    #[test]
    fn the_saturating_payload_amortises_little_of_the_fixed_cost() {
        let transfer_ns =
            PUBLISHED_SATURATING_PAYLOAD as f64 * 1000.0 / DMA_BYTES_PER_US.default as f64;
        assert!((transfer_ns - 150.588).abs() < 0.01);
        assert!((DMA_FIXED_NS.default as f64) > 8.0 * transfer_ns);
        let names: Vec<&str> = PARAMS.iter().map(|f| f.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "a parameter is listed twice");
    }

    /// Each row sets its own field, its default is within its bounds, and
    /// its default text spells its default.
    #[test]
    fn rows_set_their_fields_with_defaults_in_bounds() {
        let d = SimParams::default();
        for (i, p) in PARAMS.iter().enumerate() {
            let mut x = d;
            *(p.field)(&mut x) += 1;
            let changed = PARAMS
                .iter()
                .filter(|q| *(q.field)(&mut x.clone()) != *(q.field)(&mut d.clone()))
                .count();
            assert_eq!(changed, 1, "{}", p.name);
            assert_eq!(*(p.field)(&mut d.clone()), p.default, "{}", p.name);
            assert!((p.min..=p.max).contains(&p.default), "{}", p.name);
            assert_eq!(p.default_text(), p.default.to_string());
            assert_eq!(DEFAULT_TEXT[i].as_str(), p.default.to_string());
        }
    }
}
