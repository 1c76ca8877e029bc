//! The walk every per-operand lowering pass shares: visit each operand of
//! each ISA op in program order, compute its lowered form from the module,
//! attach it, and collect every diagnostic instead of stopping at the first.

use apir_ir::{Changed, Diagnostic, Diagnostics, Item, Module, Op, OpKind, Operand};

/// A located error about operand `i` of `op`: "`isa.x` operand `role`: msg".
pub(crate) fn operand_error(
    m: &Module,
    op: Op,
    i: usize,
    msg: impl std::fmt::Display,
) -> Diagnostic {
    let o = &m.ops[op].operands[i];
    Diagnostic::error(
        o.span,
        format!(
            "`{}` operand `{}`: {msg}",
            m.ops[op].kind.name(),
            m.str(o.role)
        ),
    )
}

/// Runs `compute` on every operand of every ISA op (table ops and
/// `isa.custom`); `Ok(Some(v))` is handed to `attach`, which stores it and
/// returns whether the operand changed; `Ok(None)` leaves the operand alone.
pub(crate) fn lower_operands<T>(
    m: &mut Module,
    mut compute: impl FnMut(&Module, Op, usize) -> Result<Option<T>, Diagnostic>,
    mut attach: impl FnMut(&mut Operand, T) -> bool,
) -> Result<Changed, Diagnostics> {
    let mut diags = Vec::new();
    let mut changed = Changed::No;
    // The body is not edited here (only operands are): it is walked by
    // index, without a copy of its op list.
    for at in 0..m.body.len() {
        let Item::Op(op) = m.body[at] else { continue };
        if !matches!(m.ops[op].kind, OpKind::Isa(_) | OpKind::Custom) {
            continue;
        }
        for i in 0..m.ops[op].operands.len() {
            match compute(m, op, i) {
                Ok(Some(v)) => {
                    if attach(&mut m.ops[op].operands[i], v) {
                        changed = Changed::Yes;
                    }
                }
                Ok(None) => {}
                Err(d) => {
                    let data = &m.ops[op];
                    let role = m.str(data.operands[i].role);
                    diags.push(d.about(op, data.kind.name(), Some(role)));
                }
            }
        }
    }
    if diags.is_empty() {
        Ok(changed)
    } else {
        Err(diags)
    }
}
