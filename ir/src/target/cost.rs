//! The staging cost model's numbers, as data with their provenance: the
//! defaults of every simulator parameter ([`crate::staging::SimParams`],
//! whose table of names and bounds is [`crate::staging::PARAMS`]), and the
//! published NeuronCore DMA figures they relate to.
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

/// One number of the cost model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Figure {
    /// The parameter's name (`gpsimd.plan` attribute; the pass option
    /// spells `_` as `-`).
    pub name: &'static str,
    /// The default value, in `unit`.
    pub default: u64,
    /// The unit.
    pub unit: &'static str,
    /// Published or project-defined.
    pub source: Source,
    /// Where it comes from, or why it was chosen.
    pub note: &'static str,
}

/// DMA fixed cost per descriptor.
pub const DMA_FIXED_NS: Figure = Figure {
    name: "dma_fixed_ns",
    default: 1300,
    unit: "ns per descriptor",
    source: Source::Published,
    note: "NKI DMA bandwidth guide: descriptor setup, synchronisation and semaphore-to-start latency, about 1300 ns",
};

/// DMA bandwidth of one queue.
pub const DMA_BYTES_PER_US: Figure = Figure {
    name: "dma_bytes_per_us",
    default: 27_200,
    unit: "bytes per microsecond",
    source: Source::Published,
    note: "NKI DMA overview: 27.2 GB/s per DMA engine on NeuronCore-v2 and -v3 (38.4 GB/s on -v4); one engine per ring",
};

/// Core clock.
pub const CLOCK_MHZ: Figure = Figure {
    name: "clock_mhz",
    default: 1400,
    unit: "MHz",
    source: Source::Published,
    note: "NeuronCore-v2 engine clock, 1.4 GHz",
};

/// One unbuffered (indexed) element access.
pub const INDEX_NS: Figure = Figure {
    name: "index_ns",
    default: 50,
    unit: "ns per element",
    source: Source::Project,
    note: "one address translation and one HBM access per element, blocking the core; no published figure",
};

/// VEC_MEMCPY fixed cost per copy.
pub const VEC_FIXED_NS: Figure = Figure {
    name: "vec_fixed_ns",
    default: 100,
    unit: "ns per copy",
    source: Source::Project,
    note: "the core's vector memcpy: call and setup; no published figure",
};

/// VEC_MEMCPY bandwidth.
pub const VEC_BYTES_PER_US: Figure = Figure {
    name: "vec_bytes_per_us",
    default: 8000,
    unit: "bytes per microsecond",
    source: Source::Project,
    note:
        "the core's vector memcpy, 8 B/ns; runs on the core and blocks compute; no published figure",
};

/// C_MEMCPY fixed cost per copy.
pub const C_FIXED_NS: Figure = Figure {
    name: "c_fixed_ns",
    default: 100,
    unit: "ns per copy",
    source: Source::Project,
    note: "the core's scalar memcpy: call and setup; no published figure",
};

/// C_MEMCPY bandwidth.
pub const C_BYTES_PER_US: Figure = Figure {
    name: "c_bytes_per_us",
    default: 1000,
    unit: "bytes per microsecond",
    source: Source::Project,
    note: "the core's scalar memcpy, 1 B/ns; blocks compute; no published figure",
};

/// Staging budget in the dataram.
pub const BUDGET: Figure = Figure {
    name: "budget",
    default: 16_384,
    unit: "bytes",
    source: Source::Published,
    note: "the custom-op TCM pool of 16 KiB (a stream takes 4 KiB of it)",
};

/// Every figure, in the order of the simulator parameters.
pub const FIGURES: [Figure; 9] = [
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
        let names: Vec<&str> = FIGURES.iter().map(|f| f.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "a figure is listed twice");
    }
}
