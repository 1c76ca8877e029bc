//! `encode-wire`: packs every operand into its `4 + 4N` descriptor bytes
//! (unit fill `{1, 1}`, two-window form for `local_gather`'s `src`), then runs
//! the arch's validators for the role (`mem<N>d_valid` / `tensor<N>d_valid`,
//! `check_m4d_active_channels`) on the bytes just written and attaches them
//! (`wire<"...">`). A descriptor that fails its validator is a compiler bug:
//! it is reported as an internal error with the op's location and the
//! validator's reason, and never emitted.

use crate::operands::{lower_operands, operand_error};
use apir_ir::lowering::{descriptor_with, role_choice, validate_bytes, LoweringTally};
use apir_ir::target::descriptor::DescriptorBytes;
use apir_ir::{
    Changed, Diagnostic, Diagnostics, LoweredForm, Module, Op, Pass, PassContext, PassInfo,
};

/// The encode-wire pass.
#[derive(Debug, Default, Clone, Copy)]
pub struct EncodeWire;

impl EncodeWire {
    /// The pass's declaration: name, summary, options and constructor.
    pub const INFO: PassInfo = PassInfo {
        name: "encode-wire",
        summary: "Pack descriptor bytes and check them with the arch's validators",
        options: &[],
        create: |_| Ok(Box::new(EncodeWire)),
    };
}

impl Pass for EncodeWire {
    fn name(&self) -> &'static str {
        Self::INFO.name
    }

    fn op_local(&self) -> bool {
        true
    }

    fn attaches(&self) -> Option<LoweredForm> {
        Some(LoweredForm::Wire)
    }

    fn fork(&self) -> Option<Box<dyn Pass + Send>> {
        Some(Box::new(*self))
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let (mut encoded, mut bytes_total) = (0, 0);
        let changed = lower_operands(m, encode, |o, bytes| {
            encoded += 1;
            bytes_total += bytes.len() as u64;
            if o.lowered().and_then(|l| l.wire.as_ref()) == Some(&bytes) {
                return false;
            }
            o.lowered_mut().wire = Some(bytes);
            true
        });
        count(cx, encoded, bytes_total);
        changed
    }

    fn lowered_counter(&self) -> Option<fn(&LoweringTally, &mut PassContext)> {
        Some(|t, cx| count(cx, t.operands, t.bytes))
    }
}

/// The pass's statistics for `encoded` descriptors of `bytes` bytes in all.
fn count(cx: &mut PassContext, encoded: u64, bytes: u64) {
    if encoded > 0 {
        cx.count(
            "descriptors-encoded",
            "Number of descriptors encoded and validated",
            encoded,
        );
        cx.count("bytes-encoded", "Number of descriptor bytes written", bytes);
    }
}

/// The validated bytes of operand `i` of `op`; a validator failure is an
/// internal error, and such bytes are never attached.
fn encode(m: &Module, op: Op, i: usize) -> Result<Option<DescriptorBytes>, Diagnostic> {
    let o = &m.ops[op].operands[i];
    let choice = role_choice(m, op, i)
        .map_err(|msg| operand_error(m, op, i, format!("cannot be encoded: {msg}")))?;
    let desc = descriptor_with(m, op, i, &choice)
        .map_err(|msg| operand_error(m, op, i, format!("cannot be encoded: {msg}")))?;
    let bytes = desc.encode();
    let channels = o.lowered().and_then(|l| l.fold).map_or(0, |f| f.channels);
    validate_bytes(&bytes, &choice, m.buffers[o.buffer].dtype, m.arch, channels).map_err(
        |bad| {
            Diagnostic::internal(
                o.span,
                format!(
                    "`{}` operand `{}`: the encoded {} failed its validator at {bad}",
                    m.ops[op].kind.name(),
                    m.str(o.role),
                    choice.kind
                ),
            )
        },
    )?;
    Ok(Some(bytes))
}
