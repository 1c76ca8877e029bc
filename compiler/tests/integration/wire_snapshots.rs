//! Annotated wire dumps for every op-encoder on every arch where it exists,
//! every role. Each snapshot is named `<op>-<arch>`, its description names
//! the op, its encoder and the arch, and its body starts with the input
//! module, so a reviewer sees the input next to the bytes: the input is
//! derived from the op's row of the op-encoder table, and a change to one
//! row moves that op's snapshots (input and bytes) and no other. Each role gets a pattern with as many surviving free dims as
//! its descriptor has slots, so every step and num field carries a distinct
//! value; the gather source gets unit steps in slots 0 and 1 (its two-window
//! form has no stride fields there).

use apir_compiler::{wire, Compilation};
use apir_ir::target::{Arch, IsaOp, WindowForm};

/// IR text for `op` on `arch`: one SBUF tile for SBUF roles, one PSUM tile
/// for PSUM-only roles, an integer tile for integer roles.
fn module_text(op: IsaOp, arch: Arch) -> String {
    let info = op.info();
    let mut text = format!(
        "module attributes {{arch = \"{arch}\"}} {{\n  %s = mem.sbuf {{partition = 0, byte = 0}} : tile<128x4096xf32>\n  %p = mem.psum {{partition = 0, byte = 0}} : tile<128x4096xf32>\n  %i = mem.sbuf {{partition = 0, byte = 0x10000}} : tile<128x4096xu16>\n  {}",
        info.name
    );
    for (k, r) in info.roles.iter().enumerate() {
        let (buf, free) = if r.dtype.allows(apir_ir::Dtype::F32) {
            if r.mems.contains(apir_ir::Memory::Sbuf) {
                ("s", 4096)
            } else {
                ("p", 4096)
            }
        } else {
            ("i", 4096)
        };
        // Slots innermost first: steps 1, 3, 12, 24 ... with nums 2, 3, 2, 2.
        let n = usize::from(r.slots);
        let (steps, nums): (Vec<i64>, Vec<u64>) = match r.form {
            WindowForm::TwoWindow => (vec![1, 1, 8, 64], vec![2, 4, 8, 2]),
            WindowForm::Plain => (vec![1, 3, 12, 48], vec![3, 4, 4, 2]),
        };
        let mut dims = vec![format!("[{free}, 32]")];
        for i in (0..n).rev() {
            dims.push(format!("[{}, {}]", steps[i], nums[i]));
        }
        let sep = if k == 0 { " " } else { ", " };
        // Start at partition 32 (+ one element for a non-zero byte field).
        text.push_str(&format!(
            "{sep}{} = %{buf}[{}] + {}",
            r.name,
            dims.join(", "),
            32 * free + 4 * (k as u64)
        ));
    }
    text.push_str("\n}\n");
    text
}

#[test]
fn every_encoder_on_every_arch() {
    let mut count = 0;
    for op in IsaOp::all() {
        for arch in op.info().archs() {
            let text = module_text(op, arch);
            let mut c = Compilation::parse("wire.apir", &text, None)
                .map_err(|e| e.into_error())
                .unwrap_or_else(|e| panic!("{text}\n{e}"));
            c.run("lower-to-wire")
                .unwrap_or_else(|e| panic!("{text}\n{e}"));
            let ops = wire::collect(&c.module, &c.sources).unwrap();
            let name = format!("{}-{}", op.info().name.trim_start_matches("isa."), arch);
            let encoder = op.info().encoder(arch).map_or("", |e| e.encoder);
            let body = format!(
                "// input\n{text}// wire dump\n{}",
                wire::dump(&c.module, &ops)
            );
            crate::snapshots(|| {
                insta::with_settings!({
                    description => format!("{} ({encoder} encoder) on {arch}", op.info().name),
                    omit_expression => true,
                }, {
                    insta::assert_snapshot!(format!("wire_snapshots__{name}"), body);
                });
            });
            count += 1;
        }
    }
    // One snapshot per (op, arch) of the table, however the table grows.
    let expected: usize = IsaOp::all().map(|op| op.info().archs().count()).sum();
    assert_eq!(count, expected);
    assert!(count > 0);
}
