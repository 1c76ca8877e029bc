//! `apir-dis`'s command line.

use apir_ir::Arch;
use clap::Parser;
use std::path::PathBuf;

/// Decode NeuronCore descriptor bytes and check them with the hardware
/// model's validators.
#[derive(Parser, Debug)]
#[command(
    name = "apir-dis",
    version,
    after_help = "Examples:\n  apir-dis --kind MEM_PATTERN4D --arch v2 --hex 0000000201000100010001000002010001000100\n  apir-opt examples/batchnorm.apir -p lower-to-wire --emit=wire-bin | apir-dis\n  apir-opt examples/batchnorm.apir -p lower-to-wire --emit=wire-hex | apir-dis --arch v2\n  apir-opt examples/batchnorm.apir -p lower-to-wire --emit=json | apir-dis --json\n  apir-dis examples/tensor3d.hex --kind TENSOR3D --arch v4 --dtype bf16 --channels 64 --json\n  apir-dis --kind SDMA --hex ff0f00c0000008000000004000000000\n\nInputs: without --kind, INPUT is what apir-opt -p lower-to-wire writes: --emit=wire-bin\n(framed: arch, op, role, kind, dtype and channels travel with each descriptor),\n--emit=json, or --emit=wire-hex lines (give --arch, and --dtype if not f32); every\ndescriptor is decoded and checked. With --kind, INPUT (or --hex) is one descriptor.\n\nKinds: TENSOR1D..TENSOR4D (sources), MEM_PATTERN1D..MEM_PATTERN4D (destinations),\nSDMA (16-byte SDMA_CME_BD_DESC staging descriptors). --arch is required for every\nkind but SDMA, whose layout is the same on every arch (--arch is then ignored);\n--dtype and --channels do not apply to SDMA. An SDMA descriptor does not say which\nway it moves bytes (the ring does: M2S HBM -> dataram, S2M dataram -> HBM), so the\ndecoded transfer is printed as `hbm ADDR <-> dram ADDR`.\nExit codes: 0 valid, 1 invalid descriptor or unreadable input, 2 bad usage."
)]
pub struct Args {
    /// Input file: apir-opt's wire-bin, wire-hex or json output, or (with
    /// --kind) one descriptor as hex text (raw bytes with --binary); `-` or
    /// nothing reads stdin.
    pub input: Option<PathBuf>,
    /// Descriptor struct of a single descriptor's bytes (not needed for
    /// apir-opt's outputs, which name it).
    #[arg(long)]
    pub kind: Option<String>,
    /// Arch whose validators run (required, except for SDMA).
    #[arg(long, value_parser = crate::arch_parser())]
    pub arch: Option<Arch>,
    /// Element type of the operand (alignment check) [default: f32].
    #[arg(long)]
    pub dtype: Option<String>,
    /// Active channel count travelling beside the descriptor; runs
    /// check_m4d_active_channels.
    #[arg(long)]
    pub channels: Option<u32>,
    /// The bytes as hex on the command line instead of INPUT (needs --kind).
    #[arg(long, conflicts_with = "input", requires = "kind")]
    pub hex: Option<String>,
    /// INPUT holds one descriptor's raw bytes, not hex text (needs --kind).
    #[arg(long, requires = "kind")]
    pub binary: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}
