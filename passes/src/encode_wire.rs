//! `encode-wire`: packs every operand into its `4 + 4N` descriptor bytes
//! (unit fill `{1, 1}`, two-window form for `local_gather`'s `src`), then runs
//! the arch's validators for the role (`mem<N>d_valid` / `tensor<N>d_valid`,
//! `check_m4d_active_channels`) on the bytes just written and attaches them
//! (`wire<"...">`). A descriptor that fails its validator is a compiler bug:
//! it is reported as an internal error with the op's location and the
//! validator's reason, and never emitted.

use apir_ir::lowering::{descriptor_of, role_choice, validate_bytes};
use apir_ir::{Changed, Diagnostic, Diagnostics, Module, Pass, PassContext};

/// The encode-wire pass.
#[derive(Debug, Default, Clone, Copy)]
pub struct EncodeWire;

impl Pass for EncodeWire {
    fn name(&self) -> &'static str {
        "encode-wire"
    }

    fn op_local(&self) -> bool {
        true
    }

    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<Changed, Diagnostics> {
        let mut diags = Vec::new();
        let mut changed = Changed::No;
        for op in crate::isa_ops(m) {
            let opname = m.ops[op].kind.name();
            for i in 0..m.ops[op].operands.len() {
                let o = &m.ops[op].operands[i];
                let role = m.str(o.role);
                let desc = match descriptor_of(m, op, i) {
                    Ok(d) => d,
                    Err(msg) => {
                        diags.push(Diagnostic::error(
                            o.span,
                            format!("`{opname}` operand `{role}` cannot be encoded: {msg}"),
                        ));
                        continue;
                    }
                };
                let bytes = desc.encode();
                let choice =
                    role_choice(m, op, i).map_err(|msg| vec![Diagnostic::internal(o.span, msg)])?;
                let channels = o.lowered().and_then(|l| l.fold).map_or(0, |f| f.channels);
                if let Err(bad) =
                    validate_bytes(&bytes, &choice, m.buffers[o.buffer].dtype, m.arch, channels)
                {
                    diags.push(Diagnostic::internal(
                        o.span,
                        format!("`{opname}` operand `{role}`: the encoded {} failed its validator at {bad}", choice.kind),
                    ));
                    continue;
                }
                cx.count(
                    "descriptors-encoded",
                    "Number of descriptors encoded and validated",
                    1,
                );
                cx.count(
                    "bytes-encoded",
                    "Number of descriptor bytes written",
                    bytes.len() as u64,
                );
                let o = &mut m.ops[op].operands[i];
                if o.lowered().and_then(|l| l.wire.as_ref()) != Some(&bytes) {
                    o.lowered_mut().wire = Some(bytes);
                    changed = Changed::Yes;
                }
            }
        }
        if diags.is_empty() {
            Ok(changed)
        } else {
            Err(diags)
        }
    }
}
