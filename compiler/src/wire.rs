//! Wire output as data: the descriptors `encode-wire` attached, collected in
//! op order then the op table's role order, and rendered as an annotated
//! dump, hex lines, raw bytes or JSON (docs/tools.md).

use apir_ir::target::descriptor::{Descriptor, DescriptorBytes};
use apir_ir::target::dump::annotate;
use apir_ir::target::DescriptorKind;
use apir_ir::{Module, Op, OpKind, SourceMap};
use serde::Serialize;

/// One encoded operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireOperand {
    /// Role name.
    pub role: String,
    /// Descriptor struct.
    pub kind: DescriptorKind,
    /// Active channels travelling beside the descriptor.
    pub channels: u32,
    /// The validated bytes.
    pub bytes: DescriptorBytes,
}

/// One op's descriptors.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireOp {
    /// Index among the module's ISA ops, in program order.
    pub index: usize,
    /// Text op.
    pub op: &'static str,
    /// Encoder name (`TensorCopy`; `Custom` for `isa.custom`).
    pub encoder: &'static str,
    /// `file:line:col` of the op (empty for ops built in code).
    pub loc: String,
    /// Operands in the op table's role order (source order for `isa.custom`).
    pub operands: Vec<WireOperand>,
}

/// Collects the descriptors of every ISA op, with their source locations.
/// Fails, naming the first operand without bytes, if `encode-wire` has not
/// run.
pub fn collect(m: &Module, sources: &SourceMap) -> Result<Vec<WireOp>, String> {
    collect_from(m, sources, true, 0)
}

/// [`collect`] with control over locations (skipped for raw bytes, which
/// do not show them) and the index of the first op.
pub fn collect_from(
    m: &Module,
    sources: &SourceMap,
    locations: bool,
    first_index: usize,
) -> Result<Vec<WireOp>, String> {
    let mut out = Vec::new();
    for op in m.top_ops() {
        let data = &m.ops[op];
        let Some((encoder, order)) = wire_order(m, op) else {
            continue;
        };
        let loc = if locations && sources.get(data.span.file).is_some() {
            sources.location(data.span)
        } else {
            String::new()
        };
        let mut operands = Vec::new();
        for i in order {
            let o = &data.operands[i];
            let (kind, bytes) = encoded(m, op, i, &loc)?;
            let channels = o.lowered().and_then(|l| l.fold).map_or(0, |f| f.channels);
            operands.push(WireOperand {
                role: m.str(o.role).to_string(),
                kind,
                channels,
                bytes: bytes.clone(),
            });
        }
        out.push(WireOp {
            index: first_index + out.len(),
            op: data.kind.name(),
            encoder,
            loc,
            operands,
        });
    }
    Ok(out)
}

/// The descriptor kind and bytes of operand `i` of `op`, or the error naming
/// the operand (at `loc`, if not empty) when `encode-wire` has not run.
fn encoded<'m>(
    m: &'m Module,
    op: Op,
    i: usize,
    loc: &str,
) -> Result<(DescriptorKind, &'m DescriptorBytes), String> {
    let data = &m.ops[op];
    let o = &data.operands[i];
    let l = o.lowered();
    match (l.and_then(|l| l.kind), l.and_then(|l| l.wire.as_ref())) {
        (Some(kind), Some(bytes)) => Ok((kind, bytes)),
        _ => Err(format!(
            "operand `{}` of `{}`{} has no descriptor bytes: run the `lower-to-wire` pipeline (or `encode-wire`) first",
            m.str(o.role),
            data.kind.name(),
            if loc.is_empty() { String::new() } else { format!(" at {loc}") }
        )),
    }
}

/// Operand indices of an op in wire order: the op table's role order
/// (source order for `isa.custom`).
type Order = smallvec::SmallVec<[usize; 4]>;

/// The encoder name and wire order of `op`'s operands; `None` for ops
/// without descriptors.
fn wire_order(m: &Module, op: Op) -> Option<(&'static str, Order)> {
    let data = &m.ops[op];
    match data.kind {
        OpKind::Isa(isa) => {
            let info = isa.info();
            let enc = info.encoder(m.arch).map_or("", |e| e.encoder);
            let mut order: Order = (0..data.operands.len()).collect();
            order.sort_by_key(|&i| {
                isa.role_of(data.operands[i].role)
                    .map_or(usize::MAX, |r| r.0)
            });
            Some((enc, order))
        }
        OpKind::Custom => Some(("Custom", (0..data.operands.len()).collect())),
        _ => None,
    }
}

/// [`binary`] of the ops of `m`, appended to `out` without collecting them
/// first; returns the number of ops with descriptors. Fails as [`collect`]
/// does (without a location) on an operand without bytes.
pub fn append_binary(m: &Module, out: &mut Vec<u8>) -> Result<usize, String> {
    let mut ops = 0;
    for op in m.top_ops() {
        let Some((_, order)) = wire_order(m, op) else {
            continue;
        };
        for i in order {
            out.extend_from_slice(encoded(m, op, i, "")?.1);
        }
        ops += 1;
    }
    Ok(ops)
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    apir_ir::printer::write_hex(&mut s, bytes);
    s
}

/// `--emit=wire-dump`: a header per descriptor, then one line per field.
pub fn dump(m: &Module, ops: &[WireOp]) -> String {
    let mut out = String::new();
    for op in ops {
        for o in &op.operands {
            out.push_str(&format!(
                "// op {} {} ({}) {} {} channels={}{}\n",
                op.index,
                op.op,
                op.encoder,
                o.role,
                o.kind,
                o.channels,
                if op.loc.is_empty() {
                    String::new()
                } else {
                    format!(" @ {}", op.loc)
                }
            ));
            match Descriptor::decode(o.kind, &o.bytes) {
                Ok(d) => out.push_str(&annotate(&d, m.arch)),
                Err(e) => out.push_str(&format!("<undecodable: {e}>\n")),
            }
        }
    }
    out
}

/// `--emit=wire-hex`: one line per operand: op index, role, kind, channels,
/// lowercase hex.
pub fn hex_lines(ops: &[WireOp]) -> String {
    let mut out = String::new();
    for op in ops {
        for o in &op.operands {
            out.push_str(&format!(
                "{} {} {} {} {}\n",
                op.index,
                o.role,
                o.kind,
                o.channels,
                hex(&o.bytes)
            ));
        }
    }
    out
}

/// `--emit=wire-bin`: the descriptors back to back.
pub fn binary(ops: &[WireOp]) -> Vec<u8> {
    ops.iter()
        .flat_map(|op| op.operands.iter().flat_map(|o| o.bytes.iter().copied()))
        .collect()
}

#[derive(Serialize)]
struct JsonOperand<'a> {
    role: &'a str,
    kind: &'static str,
    channels: u32,
    bytes: String,
}

#[derive(Serialize)]
struct JsonOp<'a> {
    index: usize,
    op: &'static str,
    encoder: &'static str,
    loc: &'a str,
    operands: Vec<JsonOperand<'a>>,
}

/// A diagnostic in JSON output.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct JsonDiagnostic {
    /// `error`, `warning`, `note` or `internal error`.
    pub severity: String,
    /// Message.
    pub message: String,
    /// `file:line:col` or `null`.
    pub loc: Option<String>,
    /// Secondary messages ("first defined here", "did you mean ..."), each
    /// with its `file:line:col` or `null`; left out when there are none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<JsonNote>,
}

/// A note of a [`JsonDiagnostic`].
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct JsonNote {
    /// Message.
    pub message: String,
    /// `file:line:col` or `null`.
    pub loc: Option<String>,
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    arch: &'static str,
    ops: Vec<JsonOp<'a>>,
    diagnostics: &'a [JsonDiagnostic],
}

/// `--emit=json`: `{"arch", "ops": [...], "diagnostics": [...]}`.
pub fn json(arch: apir_ir::Arch, ops: &[WireOp], diagnostics: &[JsonDiagnostic]) -> String {
    let doc = JsonDoc {
        arch: arch.name(),
        ops: ops
            .iter()
            .map(|op| JsonOp {
                index: op.index,
                op: op.op,
                encoder: op.encoder,
                loc: &op.loc,
                operands: op
                    .operands
                    .iter()
                    .map(|o| JsonOperand {
                        role: &o.role,
                        kind: o.kind.name(),
                        channels: o.channels,
                        bytes: hex(&o.bytes),
                    })
                    .collect(),
            })
            .collect(),
        diagnostics,
    };
    let mut s =
        serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
