//! `--emit=timeline-svg`: each kernel's simulated timeline as an SVG Gantt
//! chart.
//!
//! # Layout
//!
//! One document, [`WIDTH`] px wide: a heading and a legend, then one panel
//! per kernel, stacked vertically, grouped by core (cores in ascending
//! order, a core's kernels in issue order). A panel has a title (`@name`,
//! core, policy, buffering depth, and where the kernel runs on the time
//! axis), a line of figures (makespan, lower bound and makespan / bound,
//! stall and its share of the makespan, step count), then three lanes, one
//! per in-order resource of the simulator: `M2S queue` (SDMA loads, HBM ->
//! dataram), `S2M queue` (SDMA flushes, dataram -> HBM) and `compute` (the
//! core: compute steps, core copies by `VEC_MEMCPY` / `C_MEMCPY`, and
//! stalls), and a time axis in microseconds with ticks at round steps (1, 2
//! or 5 x 10^k µs, about ten per panel) and light grid lines. The part of
//! the lanes where the kernel runs is shaded darker than the rest of the
//! axis. A dashed red line marks the kernel's lower bound (from its start).
//! Under the axis, one line per access (at most [`MAX_ACCESS_LINES`], then
//! a count of the rest): its index, direction and tensor, and the plan's
//! reason for its accessor (accessor, method, buffers, copies, time per
//! element against indexing), or just the accessor when the plan records
//! no reasons.
//!
//! **Time axes** ([`Axis`]): kernels are placed by [`Placement`], the rule
//! the trace and the schedule JSON (`offset_ns`) use too: each core's axis
//! starts at 0 and a core's kernels run one after another on it in issue
//! order, each from where the previous one ended. With [`Axis::Core`] (the
//! default) every panel of a core spans `[0, end of the core's last kernel]`
//! in its plot area ([`PLOT_W`] px), so a core's panels form a staircase at
//! one scale, and a core with a single kernel fills the width; compare cores
//! by the figures and the axis labels, not by bar lengths. With
//! [`Axis::Global`] every panel spans `[0, end of the last kernel on any
//! core]`: all cores share one scale, and kernels that run at the same time
//! on different cores are drawn one above the other.
//!
//! **Stalls:** an `sdma.wait` is an event of zero duration at the moment the
//! core resumes; the stall drawn for it (hatched grey) is the interval from
//! the end of the previous core event to that moment, exactly what the
//! simulator sums into `stall_ns`. A wait that does not block draws nothing.
//!
//! **Tooltips:** every bar has a `<title>`: for a single event its step
//! index, kind, copy id, access / tile / slot and bytes for copies, the
//! iterations for a compute step, and start / end in µs; for a merged bar the
//! step range, and per kind the event count, busy time (and its share of the
//! bar's span) and bytes.
//!
//! # Bounded output
//!
//! Plans can have hundreds of thousands of steps, so events are merged per
//! lane, in lane order, before drawing:
//! 1. an event narrower than [`SMALL_PX`] = 3 px is merged into the previous
//!    bar of the same lane when that bar is of the same kind, was itself made
//!    of such small events, and ends less than [`MERGE_PX`] = 1 px before the
//!    event starts (that sub-pixel gap is absorbed into the bar). Events at
//!    least 3 px wide are always drawn on their own, with a white outline
//!    where they are 4 px or wider, so individual steps stay distinguishable
//!    at any scale where they could be;
//! 2. where bars still narrower than 1 px of *different* kinds follow each
//!    other less than 1 px apart (on the core lane: compute and stall
//!    alternating every step), they are collected into buckets at least
//!    [`BUCKET_PX`] = 3 px wide;
//! 3. a bar made of several events is drawn as one band per kind, stacked
//!    from the lane's bottom, each as tall as the share of the bar's time
//!    span that kind was busy. A stretch of back-to-back loads fills the
//!    lane; loads merged across sub-pixel idle gaps, busy a third of the
//!    time, draw a third-height band; a bucket where the core computes 30%
//!    and stalls 70% draws a 30% compute band under a 70% stall band. So
//!    everywhere, the drawn area of each kind is proportional to its time.
//!
//! Whatever the number of steps, a lane thus draws at most about two bars per
//! pixel of width (a panel stays under about 2 MB in the worst case), and
//! usually far fewer: a reference-style plan of 10^6 steps, compute and
//! stall alternating throughout, draws about a thousand bars in about
//! 300 KB. Bars narrower than 0.5 px are widened to 0.5 px so a lone event
//! stays visible.
//!
//! Output is deterministic: coordinates are printed with two decimals and
//! times with three (ns precision in µs), and text is XML-escaped.

use crate::schedule::{KernelSchedule, Placement};
use apir_ir::staging::{method_name, Dir, Step};
use apir_passes::staging::sim::Lane;
use std::fmt::Write as _;

/// Document width, px.
pub const WIDTH: f64 = 1200.0;
/// Left edge of every plot area, px (the lane labels sit left of it).
const PLOT_X: f64 = 112.0;
/// Width of every plot area, px: it spans the panel's time axis.
pub const PLOT_W: f64 = 1056.0;
/// Lane height, px.
const LANE_H: f64 = 22.0;
/// Space between lanes, px.
const LANE_GAP: f64 = 8.0;
/// Gaps narrower than this between merged events are absorbed, and bars
/// narrower than this of alternating kinds are bucketed, px.
pub const MERGE_PX: f64 = 1.0;
/// Events narrower than this may be merged with their neighbours of the
/// same kind, px.
pub const SMALL_PX: f64 = 3.0;
/// Minimum width of a bucket of alternating sub-pixel events, px.
pub const BUCKET_PX: f64 = 3.0;
/// Narrowest bar drawn, px.
const MIN_BAR_PX: f64 = 0.5;
/// Bars at least this wide get a white outline separating them.
const OUTLINE_PX: f64 = 4.0;
/// Height of the heading, legend and notes, px.
const HEADER_H: f64 = 92.0;
/// Height of one kernel panel without its access lines, px.
const PANEL_H: f64 = 190.0;
/// Height of one access line (accessor and reason) under a panel, px.
const ACCESS_H: f64 = 14.0;
/// Most access lines a panel shows (then one line counts the rest).
pub const MAX_ACCESS_LINES: usize = 16;

/// The access lines of a panel: one per access, at most
/// [`MAX_ACCESS_LINES`], then one counting the others.
fn access_lines(ks: &KernelSchedule) -> Vec<String> {
    let n = ks.accesses.len().max(ks.kernel.accesses.len());
    let mut out: Vec<String> = (0..n.min(MAX_ACCESS_LINES))
        .map(|i| {
            let (dir, tensor) = match ks.accesses.get(i) {
                Some(a) => (a.dir, format!("%{}", a.tensor)),
                None => ("access", String::new()),
            };
            let accessor = ks.plan.accessors.get(i).map_or("index", |a| a.name());
            match ks.plan.reasons.get(i) {
                Some(r) => format!("{i} {dir} {tensor} — {r}"),
                None => format!("{i} {dir} {tensor} — {accessor}"),
            }
        })
        .collect();
    if n > MAX_ACCESS_LINES {
        out.push(format!(
            "… and {} more accesses (their reasons are in --emit=schedule-json)",
            n - MAX_ACCESS_LINES
        ));
    }
    out
}

/// Height of the panel of `ks`, px.
fn panel_height(ks: &KernelSchedule) -> f64 {
    PANEL_H + ACCESS_H * access_lines(ks).len() as f64
}

/// Which time axis the panels share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Axis {
    /// One axis per core, spanning its kernels one after another.
    #[default]
    Core,
    /// One axis for all cores, spanning the longest core's time.
    Global,
}

/// What a bar shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// An SDMA copy HBM -> dataram (M2S queue).
    Load,
    /// An SDMA copy dataram -> HBM (S2M queue).
    Flush,
    /// A `gpsimd.compute` step.
    Compute,
    /// A `gpsimd.memcpy` on the core (VEC_MEMCPY or C_MEMCPY).
    CoreCopy,
    /// The core blocked in `sdma.wait`.
    Stall,
}

const KINDS: [Kind; 5] = [
    Kind::Load,
    Kind::Flush,
    Kind::Compute,
    Kind::CoreCopy,
    Kind::Stall,
];

impl Kind {
    /// CSS class (also the fill).
    fn class(self) -> &'static str {
        match self {
            Kind::Load => "load",
            Kind::Flush => "flush",
            Kind::Compute => "compute",
            Kind::CoreCopy => "copy",
            Kind::Stall => "stall",
        }
    }

    /// Singular name, for tooltips.
    fn one(self) -> &'static str {
        match self {
            Kind::Load => "load",
            Kind::Flush => "flush",
            Kind::Compute => "compute",
            Kind::CoreCopy => "core copy",
            Kind::Stall => "stall",
        }
    }

    /// Plural name, for tooltips.
    fn many(self) -> &'static str {
        match self {
            Kind::Load => "loads",
            Kind::Flush => "flushes",
            Kind::Compute => "compute steps",
            Kind::CoreCopy => "core copies",
            Kind::Stall => "stalls",
        }
    }

    /// Legend text.
    fn legend(self) -> &'static str {
        match self {
            Kind::Load => "load (SDMA m2s)",
            Kind::Flush => "flush (SDMA s2m)",
            Kind::Compute => "compute",
            Kind::CoreCopy => "core copy (vec/c memcpy)",
            Kind::Stall => "stall (core in sdma.wait)",
        }
    }
}

/// The lanes top to bottom: simulator lane, label, `data-lane`.
const LANES: [(Lane, &str); 3] = [(Lane::M2s, "m2s"), (Lane::S2m, "s2m"), (Lane::Core, "core")];

fn row_of(lane: Lane) -> usize {
    match lane {
        Lane::M2s => 0,
        Lane::S2m => 1,
        Lane::Core => 2,
    }
}

/// Totals of one kind within a bar.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Part {
    /// Events.
    count: u64,
    /// Busy time, ns.
    ns: f64,
    /// Bytes copied.
    bytes: u64,
}

impl Part {
    fn add(&mut self, o: &Part) {
        self.count += o.count;
        self.ns += o.ns;
        self.bytes += o.bytes;
    }
}

/// One event to draw: a step's interval on its lane, or a stall.
#[derive(Clone, Copy, Debug)]
struct Seg {
    kind: Kind,
    t0: f64,
    t1: f64,
    step: usize,
    /// Copy id (copies) or the waited copy (stalls).
    copy: u32,
    bytes: u64,
}

/// Events of one kind merged by rule 1.
#[derive(Clone, Copy, Debug)]
struct Run {
    kind: Kind,
    t0: f64,
    t1: f64,
    first: usize,
    last: usize,
    copy: u32,
    part: Part,
    /// Made of events narrower than [`SMALL_PX`].
    small: bool,
}

/// A bar (pure: one kind) or a bucket of stacked bars (several kinds).
#[derive(Clone, Debug)]
struct Piece {
    t0: f64,
    t1: f64,
    first: usize,
    last: usize,
    copy: u32,
    /// Per kind, in [`KINDS`] order; kinds absent have `count == 0`.
    parts: [Part; 5],
}

impl Piece {
    /// Each kind present with its totals and its share of the piece's span
    /// (the shares add up to at most 1).
    fn shares(&self) -> Vec<(Kind, &Part, f64)> {
        let busy: f64 = self.parts.iter().map(|p| p.ns).sum();
        let span = (self.t1 - self.t0).max(busy);
        KINDS
            .iter()
            .zip(&self.parts)
            .filter(|(_, p)| p.count > 0)
            .map(|(k, p)| (*k, p, if span > 0.0 { p.ns / span } else { 0.0 }))
            .collect()
    }
}

/// Merges one lane's events (in lane order) into bars; see the module doc.
struct LaneBuilder {
    /// px per ns.
    scale: f64,
    run: Option<Run>,
    bucket: Option<Piece>,
    out: Vec<Piece>,
}

impl LaneBuilder {
    fn new(scale: f64) -> Self {
        LaneBuilder {
            scale,
            run: None,
            bucket: None,
            out: Vec::new(),
        }
    }

    fn px(&self, ns: f64) -> f64 {
        ns * self.scale
    }

    /// Rule 1.
    fn push(&mut self, s: Seg) {
        let small = self.px(s.t1 - s.t0) < SMALL_PX;
        let part = Part {
            count: 1,
            ns: s.t1 - s.t0,
            bytes: s.bytes,
        };
        if let Some(r) = &mut self.run {
            if small && r.small && r.kind == s.kind && (s.t0 - r.t1) * self.scale < MERGE_PX {
                r.t1 = r.t1.max(s.t1);
                r.last = s.step;
                r.part.add(&part);
                return;
            }
        }
        let run = Run {
            kind: s.kind,
            t0: s.t0,
            t1: s.t1,
            first: s.step,
            last: s.step,
            copy: s.copy,
            part,
            small,
        };
        if let Some(done) = self.run.replace(run) {
            self.close_run(done);
        }
    }

    /// Rule 2.
    fn close_run(&mut self, r: Run) {
        let mut parts = [Part::default(); 5];
        parts[r.kind as usize] = r.part;
        let piece = Piece {
            t0: r.t0,
            t1: r.t1,
            first: r.first,
            last: r.last,
            copy: r.copy,
            parts,
        };
        if self.px(r.t1 - r.t0) >= MERGE_PX {
            self.flush_bucket();
            self.out.push(piece);
            return;
        }
        match &mut self.bucket {
            Some(b) if (r.t0 - b.t1) * self.scale < MERGE_PX => {
                b.t1 = b.t1.max(r.t1);
                b.last = r.last;
                b.parts[r.kind as usize].add(&r.part);
            }
            _ => {
                self.flush_bucket();
                self.bucket = Some(piece);
            }
        }
        let full = self
            .bucket
            .as_ref()
            .is_some_and(|b| (b.t1 - b.t0) * self.scale >= BUCKET_PX);
        if full {
            self.flush_bucket();
        }
    }

    fn flush_bucket(&mut self) {
        if let Some(b) = self.bucket.take() {
            self.out.push(b);
        }
    }

    fn finish(mut self) -> Vec<Piece> {
        if let Some(r) = self.run.take() {
            self.close_run(r);
        }
        self.flush_bucket();
        self.out
    }
}

/// Each lane's bars, in [`LANES`] order.
fn pieces(ks: &KernelSchedule, scale: f64) -> [Vec<Piece>; 3] {
    let mut lanes = [
        LaneBuilder::new(scale),
        LaneBuilder::new(scale),
        LaneBuilder::new(scale),
    ];
    let mut prev_core_end = 0.0f64;
    let mut copies = 0u32;
    for e in &ks.schedule.events {
        let Some(step) = ks.plan.steps.get(e.step) else {
            continue;
        };
        let row = row_of(e.lane);
        let seg = |kind, t0, t1, copy, bytes| Seg {
            kind,
            t0,
            t1,
            step: e.step,
            copy,
            bytes,
        };
        let s = match *step {
            Step::Copy(c) => {
                copies += 1;
                let kind = match (e.lane, c.dir) {
                    (Lane::Core, _) => Kind::CoreCopy,
                    (_, Dir::M2s) => Kind::Load,
                    (_, Dir::S2m) => Kind::Flush,
                };
                Some(seg(kind, e.start, e.end, copies - 1, u64::from(c.bytes)))
            }
            Step::Wait { copy } => {
                (e.start > prev_core_end).then(|| seg(Kind::Stall, prev_core_end, e.start, copy, 0))
            }
            Step::Compute { .. } => Some(seg(Kind::Compute, e.start, e.end, 0, 0)),
        };
        if let Some(s) = s.filter(|s| s.t1 > s.t0) {
            lanes[row].push(s);
        }
        if e.lane == Lane::Core {
            prev_core_end = prev_core_end.max(e.end);
        }
    }
    lanes.map(LaneBuilder::finish)
}

/// `s` escaped for XML text and attribute values: the markup characters
/// as entities, and every character XML 1.0 forbids in a document (the
/// control characters but tab, line feed and carriage return; U+FFFE,
/// U+FFFF) or discourages (DEL, the C1 controls) as U+FFFD `�`, so that
/// the document is well-formed whatever strings the input holds (a plan's
/// `reasons` may hold any character). Every string the SVG takes from the
/// input is written through here.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// ns as µs with three decimals.
fn us(ns: f64) -> String {
    format!("{:.3}", ns / 1000.0)
}

/// A byte count for people: `512 B`, `4.0 KiB`, `16.0 MiB`.
fn size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if b < KIB * KIB {
        format!("{:.1} KiB", b / KIB)
    } else if b < KIB * KIB * KIB {
        format!("{:.1} MiB", b / (KIB * KIB))
    } else {
        format!("{:.1} GiB", b / (KIB * KIB * KIB))
    }
}

/// A coordinate with two decimals.
fn px(x: f64) -> String {
    format!("{x:.2}")
}

/// The tick step for an axis spanning `span_us`: 1, 2 or 5 x 10^k µs giving
/// at most about `target` intervals, and the decimals its labels need.
fn tick_step(span_us: f64, target: f64) -> (f64, usize) {
    let raw = (span_us / target).max(1e-9);
    let mut exp = raw.log10().floor() as i32;
    // Guard against log10 rounding either way.
    if 10f64.powi(exp) > raw {
        exp -= 1;
    }
    if 10f64.powi(exp + 1) <= raw {
        exp += 1;
    }
    let (m, exp) = [1.0, 2.0, 5.0]
        .iter()
        .find(|&&m| m * 10f64.powi(exp) >= raw)
        .map_or((1.0, exp + 1), |&m| (m, exp));
    (m * 10f64.powi(exp), usize::try_from(-exp).unwrap_or(0))
}

/// A one-event tooltip.
fn describe_one(ks: &KernelSchedule, kind: Kind, p: &Piece) -> String {
    let step = p.first;
    let (t0, t1) = (us(p.t0), us(p.t1));
    match (kind, ks.plan.steps.get(step)) {
        (Kind::Stall, _) => format!(
            "step {step}: stall in sdma.wait for copy #{}, {t0}–{t1} µs ({} µs)",
            p.copy,
            us(p.t1 - p.t0)
        ),
        (_, Some(Step::Copy(c))) => {
            let how = if kind == Kind::CoreCopy {
                format!(
                    "gpsimd.memcpy #{} {} {}",
                    p.copy,
                    c.dir.name(),
                    method_name(c.method)
                )
            } else {
                format!("sdma.copy #{} {} queue {}", p.copy, c.dir.name(), c.queue)
            };
            format!(
                "step {step}: {}, {how} (access {}, tile {}, slot {}), {} B, {t0}–{t1} µs",
                kind.one(),
                c.access,
                c.tile,
                c.slot,
                c.bytes
            )
        }
        (_, Some(Step::Compute { first, count })) => format!(
            "step {step}: compute, iterations {first}–{}, {t0}–{t1} µs",
            (first + count).saturating_sub(1)
        ),
        _ => format!("step {step}: {}, {t0}–{t1} µs", kind.one()),
    }
}

/// A merged bar's tooltip.
fn describe_merged(p: &Piece) -> String {
    let mut s = format!(
        "steps {}–{} merged, {}–{} µs",
        p.first,
        p.last,
        us(p.t0),
        us(p.t1)
    );
    for (i, (k, part, share)) in p.shares().into_iter().enumerate() {
        s.push_str(if i == 0 { ": " } else { "; " });
        let _ = write!(
            s,
            "{} {}, busy {} µs ({:.0}%)",
            part.count,
            k.many(),
            us(part.ns),
            share * 100.0
        );
        if part.bytes > 0 {
            let _ = write!(s, ", {} B", part.bytes);
        }
    }
    s
}

/// Appends one bar.
fn rect(out: &mut String, kind: Kind, x: f64, y: f64, w: f64, h: f64, title: &str) {
    let class = if w >= OUTLINE_PX && h >= LANE_H {
        " ev"
    } else {
        ""
    };
    let _ = writeln!(
        out,
        "<rect class=\"{}{class}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"><title>{}</title></rect>",
        kind.class(),
        px(x),
        px(y),
        px(w),
        px(h),
        escape(title)
    );
}

/// Appends one kernel's panel with its top at `top`: the kernel starts at
/// `offset` ns on an axis spanning `[0, span]` ns.
fn panel(out: &mut String, ks: &KernelSchedule, top: f64, offset: f64, span: f64) {
    let f = &ks.schedule.figures;
    let span = span.max(offset + f.makespan_ns).max(1.0);
    let scale = PLOT_W / span;
    let x_at = |ns: f64| PLOT_X + (offset + ns) * scale;
    let name = escape(&ks.kernel.name);
    let _ = writeln!(
        out,
        "<g class=\"kernel\" data-kernel=\"{name}\" data-core=\"{}\">",
        ks.kernel.core
    );
    let _ = writeln!(
        out,
        "<text class=\"title\" x=\"8\" y=\"{}\">@{name} — core {}, policy {}, depth {}, from {} to {} µs</text>",
        px(top + 18.0),
        ks.kernel.core,
        escape(ks.plan.policy.name()),
        ks.plan.depth,
        us(offset),
        us(offset + f.makespan_ns)
    );
    let mut figures = format!(
        "makespan {} µs · lower bound {} µs",
        us(f.makespan_ns),
        us(f.lower_bound_ns)
    );
    if f.lower_bound_ns > 0.0 {
        let _ = write!(
            figures,
            " (makespan = {:.2}× bound)",
            f.makespan_ns / f.lower_bound_ns
        );
    }
    let _ = write!(figures, " · stall {} µs", us(f.stall_ns));
    if f.makespan_ns > 0.0 {
        let _ = write!(
            figures,
            " ({:.1}% of makespan)",
            f.stall_ns / f.makespan_ns * 100.0
        );
    }
    let _ = write!(
        figures,
        " · {} steps, {} in, {} out",
        ks.plan.steps.len(),
        size(f.bytes_in),
        size(f.bytes_out)
    );
    let _ = writeln!(
        out,
        "<text class=\"figures\" x=\"8\" y=\"{}\">{}</text>",
        px(top + 36.0),
        escape(&figures)
    );

    // One line per access: its accessor and why (the plan's reasons).
    for (k, line) in access_lines(ks).iter().enumerate() {
        let _ = writeln!(
            out,
            "<text class=\"access\" x=\"8\" y=\"{}\">{}</text>",
            px(top + PANEL_H - 6.0 + ACCESS_H * k as f64),
            escape(line)
        );
    }

    let lanes_top = top + 60.0;
    let lanes_bottom = lanes_top + 3.0 * LANE_H + 2.0 * LANE_GAP;
    let axis_y = lanes_bottom + 6.0;
    let (step_us, decimals) = tick_step(span / 1000.0, 10.0);
    let ticks: Vec<f64> = (0..)
        .map(|i| f64::from(i) * step_us)
        .take_while(|&t| t * 1000.0 <= span * (1.0 + 1e-9))
        .collect();

    // Lane backgrounds, darker where the kernel runs, and grid.
    for row in 0..LANES.len() {
        let y = lanes_top + row as f64 * (LANE_H + LANE_GAP);
        let _ = writeln!(
            out,
            "<rect class=\"bg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            px(PLOT_X),
            px(y),
            px(PLOT_W),
            px(LANE_H)
        );
        let _ = writeln!(
            out,
            "<rect class=\"span\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            px(x_at(0.0)),
            px(y),
            px((f.makespan_ns * scale).max(MIN_BAR_PX)),
            px(LANE_H)
        );
    }
    for &t in &ticks {
        let x = PLOT_X + t * 1000.0 * scale;
        let _ = writeln!(
            out,
            "<line class=\"grid\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
            px(lanes_top - 2.0),
            px(axis_y),
            x = px(x)
        );
    }

    // Lanes.
    let lanes = pieces(ks, scale);
    for (row, ((lane, key), bars)) in LANES.iter().zip(&lanes).enumerate() {
        let y = lanes_top + row as f64 * (LANE_H + LANE_GAP);
        let _ = writeln!(out, "<g class=\"lane\" data-lane=\"{key}\">");
        let _ = writeln!(
            out,
            "<text class=\"lane-label\" x=\"{}\" y=\"{}\">{}</text>",
            px(PLOT_X - 8.0),
            px(y + LANE_H / 2.0 + 4.0),
            lane.name()
        );
        for p in bars {
            let x0 = x_at(p.t0);
            let w = ((p.t1 - p.t0) * scale).max(MIN_BAR_PX);
            let shares = p.shares();
            if let [(kind, part, _)] = shares[..] {
                if part.count == 1 {
                    rect(out, kind, x0, y, w, LANE_H, &describe_one(ks, kind, p));
                    continue;
                }
            }
            // Merged: stacked from the lane's bottom, each kind as tall as
            // its share of the bar's span.
            let title = describe_merged(p);
            let mut band_y = y + LANE_H;
            for (kind, _, share) in shares {
                let h = LANE_H * share;
                band_y -= h;
                rect(out, kind, x0, band_y, w, h, &title);
            }
        }
        let _ = writeln!(out, "</g>");
    }

    // Lower bound.
    if f.lower_bound_ns > 0.0 && offset + f.lower_bound_ns <= span {
        let x = x_at(f.lower_bound_ns);
        let _ = writeln!(
            out,
            "<line class=\"bound\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"><title>lower bound {} µs</title></line>",
            px(lanes_top - 8.0),
            px(lanes_bottom + 2.0),
            us(f.lower_bound_ns),
            x = px(x)
        );
        let _ = writeln!(
            out,
            "<text class=\"bound-label\" x=\"{}\" y=\"{}\">lower bound</text>",
            px(x - 4.0),
            px(lanes_top - 4.0)
        );
    }

    // Axis.
    let _ = writeln!(out, "<g class=\"axis\">");
    let _ = writeln!(
        out,
        "<line class=\"axis-line\" x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>",
        px(PLOT_X),
        px(PLOT_X + PLOT_W),
        y = px(axis_y)
    );
    let _ = writeln!(
        out,
        "<text class=\"axis-title\" x=\"{}\" y=\"{}\">time (µs)</text>",
        px(PLOT_X - 8.0),
        px(axis_y + 16.0)
    );
    for &t in &ticks {
        let x = PLOT_X + t * 1000.0 * scale;
        let _ = writeln!(
            out,
            "<line class=\"tick\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
            px(axis_y),
            px(axis_y + 4.0),
            x = px(x)
        );
        let _ = writeln!(
            out,
            "<text class=\"tick-label\" x=\"{}\" y=\"{}\">{t:.decimals$}</text>",
            px(x),
            px(axis_y + 16.0)
        );
    }
    let _ = writeln!(out, "</g>");
    let _ = writeln!(out, "</g>");
}

const STYLE: &str = "<style>
text{font-family:sans-serif;font-size:12px;fill:#222}
.heading{font-size:16px;font-weight:bold}
.title{font-size:14px;font-weight:bold}
.note{font-size:11px;fill:#555}
.access{font-size:11px;fill:#333}
.lane-label,.axis-title{text-anchor:end}
.tick-label{text-anchor:middle;font-size:11px}
.bound-label{text-anchor:end;font-size:10px;fill:#c0392b}
.bg{fill:#f8f8f8}
.span{fill:#ebebeb}
.grid{stroke:#dcdcdc;stroke-width:1}
.axis-line,.tick{stroke:#444;stroke-width:1}
.bound{stroke:#c0392b;stroke-width:1.5;stroke-dasharray:4 3}
.load{fill:#4e79a7}
.flush{fill:#f28e2b}
.compute{fill:#59a14f}
.copy{fill:#b07aa1}
.stall{fill:url(#stall-hatch)}
.ev{stroke:#fff;stroke-width:0.75}
</style>
<defs>
<pattern id=\"stall-hatch\" patternUnits=\"userSpaceOnUse\" width=\"6\" height=\"6\" patternTransform=\"rotate(45)\">
<rect width=\"6\" height=\"6\" fill=\"#d0d0d0\"/>
<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#808080\" stroke-width=\"2.5\"/>
</pattern>
</defs>
";

/// Appends the heading, legend and notes.
fn header(out: &mut String, kernels: usize, axis: Axis) {
    let _ = writeln!(
        out,
        "<text class=\"heading\" x=\"8\" y=\"22\">apir staging timeline — {kernels} kernel{}</text>",
        if kernels == 1 { "" } else { "s" }
    );
    let _ = writeln!(out, "<g class=\"legend\">");
    let y = 34.0;
    let mut x = 8.0;
    for kind in KINDS {
        let _ = writeln!(
            out,
            "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"14\" height=\"14\"/>",
            kind.class(),
            px(x),
            px(y)
        );
        let _ = writeln!(
            out,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            px(x + 19.0),
            px(y + 11.5),
            kind.legend()
        );
        x += 19.0 + kind.legend().chars().count() as f64 * 6.5 + 22.0;
    }
    let _ = writeln!(
        out,
        "<line class=\"bound\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
        px(y - 2.0),
        px(y + 16.0),
        x = px(x + 4.0)
    );
    let _ = writeln!(
        out,
        "<text x=\"{}\" y=\"{}\">lower bound</text>",
        px(x + 12.0),
        px(y + 11.5)
    );
    let _ = writeln!(out, "</g>");
    let axes = match axis {
        Axis::Core => {
            "Each core has its own time axis from 0: its kernels run one after another \
             in issue order, each panel drawn at its kernel's place on its core's axis."
        }
        Axis::Global => {
            "All cores share one time axis from 0 (cores run at the same time); a core's \
             kernels run one after another in issue order."
        }
    };
    let _ = writeln!(out, "<text class=\"note\" x=\"8\" y=\"66\">{axes}</text>");
    let _ = writeln!(
        out,
        "<text class=\"note\" x=\"8\" y=\"80\">Events too small to draw one by one are merged; \
         a merged bar's height shows the share of its time each kind was busy. \
         Hover a bar for details.</text>"
    );
}

/// The SVG document for `kernels` (in issue order): one panel per kernel,
/// grouped by core, on one time axis per core or one for all (see the
/// module doc for the layout and the merging rules).
pub fn svg(kernels: &[KernelSchedule], axis: Axis) -> String {
    let height = HEADER_H
        + if kernels.is_empty() {
            PANEL_H
        } else {
            kernels.iter().map(panel_height).sum()
        };
    let mut out = String::new();
    let _ = writeln!(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>");
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">",
        w = WIDTH,
        h = height
    );
    out.push_str(STYLE);
    let _ = writeln!(
        out,
        "<rect width=\"{WIDTH}\" height=\"{height}\" fill=\"#fff\"/>"
    );
    header(&mut out, kernels.len(), axis);
    if kernels.is_empty() {
        let _ = writeln!(
            out,
            "<text x=\"8\" y=\"{}\">no planned kernels</text>",
            px(HEADER_H + 20.0)
        );
    }
    let placement = Placement::new(kernels);
    let mut order: Vec<usize> = (0..kernels.len()).collect();
    order.sort_by_key(|&i| kernels[i].kernel.core);
    let mut top = HEADER_H;
    for &i in &order {
        let ks = &kernels[i];
        let span = match axis {
            Axis::Core => placement
                .core_end
                .get(&ks.kernel.core)
                .copied()
                .unwrap_or(0.0),
            Axis::Global => placement.end(),
        };
        panel(&mut out, ks, top, placement.offsets[i], span);
        top += panel_height(ks);
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::collect;
    use crate::Compilation;
    use apir_ir::staging::{Accessor, Copy, Kernel, KernelPlan, Method, Policy, SimParams, Slot};
    use apir_passes::staging::sim::Schedule;
    use roxmltree::{Document, Node};

    /// `@relu` over `n` f32 elements (the tensors do not overlap up to 2^25).
    fn relu(n: u64) -> String {
        format!(
            "module @relu attributes {{arch = \"v2\"}} {{
  %in  = mem.hbm {{addr = 0x40000000}} : tensor<{n}xf32>
  %out = mem.hbm {{addr = 0x48000000}} : tensor<{n}xf32>
  gpsimd.kernel @relu {{core = 0, cycles_per_element = 2}} {{
    gpsimd.read  %in[[1, {n}]]
    gpsimd.write %out[[1, {n}]]
  }}
}}
"
        )
    }

    const TWO: &str = "module @two attributes {arch = \"v2\"} {
  %in  = mem.hbm {addr = 0x40000000} : tensor<4096xf32>
  %out = mem.hbm {addr = 0x40100000} : tensor<4096xf32>
  %a = mem.hbm {addr = 0x40200000} : tensor<65536xf32>
  %b = mem.hbm {addr = 0x40300000} : tensor<65536xf32>
  gpsimd.kernel @relu {core = 0, cycles_per_element = 2} {
    gpsimd.read  %in[[1, 4096]]
    gpsimd.write %out[[1, 4096]]
  }
  gpsimd.kernel @scale {core = 1, cycles_per_element = 1} {
    gpsimd.read  %a[[1, 64], [64, 64]]
    gpsimd.write %b[[1, 4096]]
  }
}
";

    const REFERENCE: &str = "schedule-staging{policy=reference},check-coherency";

    /// A pipelined plan whose every copy is an SDMA burst of a full 4 KiB
    /// buffer (VEC_MEMCPY made too slow to be chosen, two buffers a
    /// group), so loads, flushes and stalls all show.
    const SDMA_ONLY: &str =
        "schedule-staging{buffers=2, vec-fixed-ns=1000000, c-fixed-ns=1000000},check-coherency";

    /// Core 0 runs @first then @second (twice as long); core 1 runs @other,
    /// as long as @first. In module order @other comes between them.
    const SHARED: &str = "module @shared attributes {arch = \"v2\"} {
  %a = mem.hbm {addr = 0x40000000} : tensor<8192xf32>
  %b = mem.hbm {addr = 0x40100000} : tensor<8192xf32>
  %c = mem.hbm {addr = 0x40200000} : tensor<8192xf32>
  %d = mem.hbm {addr = 0x40300000} : tensor<8192xf32>
  gpsimd.kernel @first {core = 0, cycles_per_element = 2} {
    gpsimd.read  %a[[1, 4096]]
    gpsimd.write %b[[1, 4096]]
  }
  gpsimd.kernel @other {core = 1, cycles_per_element = 2} {
    gpsimd.read  %a[[1, 4096]]
    gpsimd.write %d[[1, 4096]]
  }
  gpsimd.kernel @second {core = 0, cycles_per_element = 2} {
    gpsimd.read  %b[[1, 8192]]
    gpsimd.write %c[[1, 8192]]
  }
}
";

    fn kernels(text: &str, pipeline: &str) -> Vec<KernelSchedule> {
        let mut c = Compilation::parse("k.apir", text, None)
            .map_err(|e| e.to_string())
            .unwrap();
        c.run(pipeline).unwrap();
        collect(&c.module, &c.sources).unwrap()
    }

    /// `@relu` over 2^20 elements (over 5000 steps), planned by `pipeline`;
    /// compiled once per pipeline.
    fn big(pipeline: &str) -> &'static [KernelSchedule] {
        use std::sync::OnceLock;
        static PIPELINED: OnceLock<Vec<KernelSchedule>> = OnceLock::new();
        static REFERENCED: OnceLock<Vec<KernelSchedule>> = OnceLock::new();
        let cell = if pipeline == REFERENCE {
            &REFERENCED
        } else {
            &PIPELINED
        };
        cell.get_or_init(|| kernels(&relu(1 << 20), pipeline))
    }

    fn parse(s: &str) -> Document<'_> {
        Document::parse(s).expect("the SVG is well-formed XML")
    }

    fn has_class(n: &Node, c: &str) -> bool {
        n.attribute("class")
            .is_some_and(|a| a.split(' ').any(|x| x == c))
    }

    fn num(n: &Node, attr: &str) -> f64 {
        n.attribute(attr).unwrap().parse().unwrap()
    }

    fn panels<'a>(doc: &'a Document<'a>) -> Vec<Node<'a, 'a>> {
        doc.descendants()
            .filter(|n| n.has_tag_name("g") && has_class(n, "kernel"))
            .collect()
    }

    fn lane<'a>(panel: Node<'a, 'a>, key: &str) -> Node<'a, 'a> {
        panel
            .children()
            .find(|n| n.has_tag_name("g") && n.attribute("data-lane") == Some(key))
            .unwrap_or_else(|| panic!("no lane {key}"))
    }

    /// The data bars under `n` (any kind).
    fn bars<'a>(n: Node<'a, 'a>) -> Vec<Node<'a, 'a>> {
        n.descendants()
            .filter(|r| r.has_tag_name("rect") && KINDS.iter().any(|k| has_class(r, k.class())))
            .collect()
    }

    fn texts(n: Node, class: &str) -> Vec<String> {
        n.descendants()
            .filter(|t| t.has_tag_name("text") && has_class(t, class))
            .map(|t| t.text().unwrap_or("").to_string())
            .collect()
    }

    fn tooltip(r: &Node) -> String {
        r.children()
            .find(|c| c.has_tag_name("title"))
            .and_then(|t| t.text())
            .unwrap()
            .into()
    }

    /// Drawn area of `kind` under `n`, in lane-heights x px.
    /// Stall, load and flush areas equal the simulated times at the panel's
    /// scale (within 2 px + 1%).
    fn assert_areas_match_figures(p: Node, f: &apir_passes::staging::sim::Figures, what: &str) {
        let scale = PLOT_W / f.makespan_ns;
        for (kind, ns) in [
            (Kind::Stall, f.stall_ns),
            (Kind::Load, f.m2s_busy_ns),
            (Kind::Flush, f.s2m_busy_ns),
        ] {
            let a = area(p, kind);
            assert!(
                (a - ns * scale).abs() < 2.0 + 0.01 * a,
                "{what}: {kind:?} {a}"
            );
        }
    }

    fn area(n: Node, kind: Kind) -> f64 {
        bars(n)
            .iter()
            .filter(|r| has_class(r, kind.class()))
            .map(|r| num(r, "width") * num(r, "height") / LANE_H)
            .sum()
    }

    #[test]
    fn relu_is_well_formed_with_three_labelled_lanes_and_tooltips() {
        let k = kernels(&relu(4096), SDMA_ONLY);
        let s = svg(&k, Axis::Core);
        let doc = parse(&s);
        let root = doc.root_element();
        assert!(root.has_tag_name(("http://www.w3.org/2000/svg", "svg")));
        assert_eq!(root.attribute("width"), Some("1200"));
        let ps = panels(&doc);
        assert_eq!(ps.len(), 1);
        let p = ps[0];
        assert_eq!(p.attribute("data-kernel"), Some("relu"));
        assert_eq!(
            texts(p, "lane-label"),
            ["M2S queue", "S2M queue", "compute"]
        );
        let title = &texts(p, "title")[0];
        assert!(
            title.contains("@relu") && title.contains("core 0"),
            "{title}"
        );
        assert!(title.contains("pipelined"), "{title}");
        let f = &k[0].schedule.figures;
        let figures = &texts(p, "figures")[0];
        for want in [
            format!("makespan {} µs", us(f.makespan_ns)),
            format!("lower bound {} µs", us(f.lower_bound_ns)),
            format!("stall {} µs", us(f.stall_ns)),
        ] {
            assert!(figures.contains(&want), "{figures} lacks {want}");
        }
        // Each lane draws only its own kinds, and every bar says what it is.
        let kinds_on = |key: &str| -> Vec<String> {
            let mut v: Vec<String> = bars(lane(p, key))
                .iter()
                .map(|r| {
                    r.attribute("class")
                        .unwrap()
                        .split(' ')
                        .next()
                        .unwrap()
                        .to_string()
                })
                .collect();
            v.dedup();
            v.sort();
            v.dedup();
            v
        };
        assert_eq!(kinds_on("m2s"), ["load"]);
        assert_eq!(kinds_on("s2m"), ["flush"]);
        assert_eq!(kinds_on("core"), ["compute", "stall"]);
        for r in bars(p) {
            let t = tooltip(&r);
            assert!(t.starts_with("step ") && t.contains(" µs"), "{t}");
            if has_class(&r, "load") || has_class(&r, "flush") {
                assert!(t.contains("4096 B") && t.contains("sdma.copy #"), "{t}");
            }
        }
        // Not merged at this scale: one bar per copy and per compute step.
        let copies = k[0].plan.copies().count();
        let computes = k[0]
            .plan
            .steps
            .iter()
            .filter(|s| matches!(s, Step::Compute { .. }))
            .count();
        assert_eq!(
            bars(lane(p, "m2s")).len() + bars(lane(p, "s2m")).len(),
            copies
        );
        let core = lane(p, "core");
        assert_eq!(
            bars(core)
                .iter()
                .filter(|r| has_class(r, "compute"))
                .count(),
            computes
        );
    }

    #[test]
    fn bars_are_placed_and_sized_in_time() {
        for pipeline in [SDMA_ONLY, REFERENCE] {
            let k = kernels(&relu(4096), pipeline);
            let s = svg(&k, Axis::Core);
            let doc = parse(&s);
            let p = panels(&doc)[0];
            let f = &k[0].schedule.figures;
            let scale = PLOT_W / f.makespan_ns;
            assert!(f.stall_ns > 0.0);
            assert!((area(p, Kind::Stall) - f.stall_ns * scale).abs() < 0.05);
            let compute_ns: f64 = k[0]
                .schedule
                .events
                .iter()
                .filter(|e| matches!(k[0].plan.steps[e.step], Step::Compute { .. }))
                .map(|e| e.end - e.start)
                .sum();
            assert!((area(p, Kind::Compute) - compute_ns * scale).abs() < 0.05);
            // The first load starts at 0 and the last bar ends at the makespan.
            let m2s = bars(lane(p, "m2s"));
            assert!((num(&m2s[0], "x") - PLOT_X).abs() < 0.01);
            let end = bars(p)
                .iter()
                .map(|r| num(r, "x") + num(r, "width"))
                .fold(0.0, f64::max);
            assert!((end - (PLOT_X + PLOT_W)).abs() < 0.02, "{end}");
        }
    }

    /// The tick labels of panel `p`: numbers at a 1/2/5 x 10^k step from 0,
    /// placed at their time on an axis spanning `[0, span_ns]`, within it;
    /// returns the step.
    fn check_axis(p: Node, span_ns: f64) -> f64 {
        assert_eq!(texts(p, "axis-title"), ["time (µs)"]);
        let labels: Vec<Node> = p
            .descendants()
            .filter(|t| t.has_tag_name("text") && has_class(t, "tick-label"))
            .collect();
        assert!((5..=11).contains(&labels.len()), "{} ticks", labels.len());
        let values: Vec<f64> = labels
            .iter()
            .map(|t| t.text().unwrap().parse().unwrap())
            .collect();
        assert_eq!(values[0], 0.0);
        let step = values[1];
        let exp = step.log10().floor();
        let mantissa = step / 10f64.powf(exp);
        assert!(
            [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9),
            "step {step}"
        );
        for (i, (v, t)) in values.iter().zip(&labels).enumerate() {
            assert!((v - i as f64 * step).abs() < step * 1e-6);
            assert!(*v * 1000.0 <= span_ns * (1.0 + 1e-9));
            let x = PLOT_X + v * 1000.0 * PLOT_W / span_ns;
            assert!((num(t, "x") - x).abs() < 0.01);
        }
        step
    }

    #[test]
    fn axis_is_in_microseconds_at_round_steps() {
        let small = kernels(&relu(4096), "lower-staging");
        let s = svg(&small, Axis::Core);
        let doc = parse(&s);
        // 8.753 µs: ticks every 1 µs.
        assert_eq!(
            check_axis(panels(&doc)[0], small[0].schedule.figures.makespan_ns),
            1.0
        );
        let two = kernels(TWO, REFERENCE);
        let s = svg(&two, Axis::Core);
        let doc = parse(&s);
        for (p, k) in panels(&doc).into_iter().zip(&two) {
            check_axis(p, k.schedule.figures.makespan_ns);
        }
        assert_eq!(tick_step(8.753, 10.0), (1.0, 0));
        assert_eq!(tick_step(17_875.08, 10.0), (2000.0, 0));
        assert_eq!(tick_step(1.0, 10.0), (0.1, 1));
        assert_eq!(tick_step(0.35, 10.0), (0.05, 2));
        assert_eq!(tick_step(10.0, 10.0), (1.0, 0));
        assert_eq!(tick_step(0.001, 10.0), (0.0001, 4));
    }

    #[test]
    fn a_big_kernel_stays_small_and_faithful() {
        for pipeline in ["lower-staging", REFERENCE] {
            let k = big(pipeline);
            assert!(k[0].plan.steps.len() > 5000);
            let s = svg(k, Axis::Core);
            assert!(s.len() < 300_000, "{pipeline}: {} bytes", s.len());
            let doc = parse(&s);
            let p = panels(&doc)[0];
            let mut total = 0;
            for key in ["m2s", "s2m", "core"] {
                let n = bars(lane(p, key)).len();
                assert!(n > 0, "{pipeline}: no bar on {key}");
                total += n;
            }
            assert!(total < 1500, "{pipeline}: {total} bars");
            assert!(bars(p).iter().any(|r| tooltip(r).contains("merged")));
            // Merging keeps each kind's drawn area proportional to its time.
            let f = &k[0].schedule.figures;
            assert_areas_match_figures(p, f, pipeline);
            check_axis(p, f.makespan_ns);
        }
    }

    #[test]
    fn alternating_sub_pixel_steps_are_stacked_by_share() {
        // Reference policy: every compute step is followed by a stall, each
        // far narrower than a pixel.
        let s = svg(big(REFERENCE), Axis::Core);
        let doc = parse(&s);
        let core = lane(panels(&doc)[0], "core");
        let mut by_x: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
        for r in bars(core) {
            let e = by_x
                .entry(r.attribute("x").unwrap().to_string())
                .or_default();
            e.0 += num(&r, "height");
            e.1 += 1;
        }
        let stacked = by_x.values().filter(|(_, n)| *n > 1).count();
        assert!(stacked > 100, "{stacked} stacked buckets");
        for (x, (h, _)) in &by_x {
            assert!((h - LANE_H).abs() < 0.05, "bucket at {x} is {h} px tall");
        }
        // The M2S queue idles while the core computes and flushes: its merged
        // bar is only as tall as the queue's share of busy time.
        let f = &big(REFERENCE)[0].schedule.figures;
        let duty = f.m2s_busy_ns / f.makespan_ns;
        assert!(duty < 0.5);
        let m2s = lane(panels(&doc)[0], "m2s");
        for r in bars(m2s) {
            assert!((num(&r, "height") - LANE_H * duty).abs() < 0.1 * LANE_H);
        }
        // Buckets are at least BUCKET_PX wide, but for the lane's last one.
        let last_x = bars(core).iter().map(|r| num(r, "x")).fold(0.0, f64::max);
        for r in bars(core) {
            assert!(num(&r, "width") >= BUCKET_PX - 0.01 || num(&r, "x") == last_x);
        }
    }

    #[test]
    fn a_million_steps_stay_under_two_megabytes() {
        // A synthetic reference-style plan: load (every 8th by VEC_MEMCPY),
        // wait, compute, flush, wait; 200k tiles.
        let tiles = 200_000u32;
        let dma = |dir, tile| {
            Step::Copy(Copy {
                dir,
                method: Method::Dma,
                queue: 0,
                access: u32::from(dir == Dir::S2m),
                tile,
                slot: u32::from(dir == Dir::S2m),
                hbm: 0x4000_0000 + u64::from(tile) * 4096,
                dram: 0x80000,
                bytes: 4096,
            })
        };
        let mut steps = Vec::with_capacity(tiles as usize * 5);
        let mut copy = 0u32;
        for t in 0..tiles {
            if t.trailing_zeros() >= 3 {
                let Step::Copy(mut c) = dma(Dir::M2s, t) else {
                    unreachable!()
                };
                c.method = Method::VecMemcpy;
                steps.push(Step::Copy(c));
                copy += 1;
            } else {
                steps.push(dma(Dir::M2s, t));
                steps.push(Step::Wait { copy });
                copy += 1;
            }
            steps.push(Step::Compute {
                first: u64::from(t) * 1024,
                count: 1024,
            });
            steps.push(dma(Dir::S2m, t));
            steps.push(Step::Wait { copy });
            copy += 1;
        }
        let kernel = Kernel {
            op: apir_ir::Op::from_u32(0),
            name: "big".into(),
            core: 3,
            cycles_per_element: 2,
            accesses: Vec::new(),
            elements: u64::from(tiles) * 1024,
        };
        let plan = KernelPlan {
            policy: Policy::Reference,
            depth: 1,
            accessors: vec![Accessor::Stream, Accessor::Stream],
            params: SimParams::default(),
            reasons: Vec::new(),
            slots: vec![
                Slot {
                    access: 0,
                    dram: 0x80000,
                    bytes: 4096,
                },
                Slot {
                    access: 1,
                    dram: 0x81000,
                    bytes: 4096,
                },
            ],
            steps,
        };
        let schedule = Schedule::run(&kernel, &plan);
        assert!(schedule.events.len() > 900_000);
        let ks = KernelSchedule {
            kernel,
            plan,
            schedule,
            accesses: Vec::new(),
            descriptors: Vec::new(),
            bound: apir_passes::staging::bound::Bound {
                ns: 0.0,
                compute_ns: 0.0,
                core_ns: 0.0,
                m2s_ns: 0.0,
                s2m_ns: 0.0,
                accesses: Vec::new(),
            },
        };
        let s = svg(std::slice::from_ref(&ks), Axis::Core);
        assert!(s.len() < 1_000_000, "{} bytes", s.len());
        let doc = parse(&s);
        let p = panels(&doc)[0];
        for key in ["m2s", "s2m", "core"] {
            assert!(!bars(lane(p, key)).is_empty(), "no bar on {key}");
        }
        for kind in KINDS {
            assert!(area(p, kind) > 0.0, "no {kind:?}");
        }
        assert_areas_match_figures(p, &ks.schedule.figures, "synthetic");
    }

    #[test]
    fn output_is_deterministic() {
        for text in [relu(4096), TWO.to_string()] {
            let a = svg(&kernels(&text, "lower-staging"), Axis::Core);
            let b = kernels(&text, "lower-staging");
            assert_eq!(a, svg(&b, Axis::Core));
            assert_eq!(svg(&b, Axis::Core), svg(&b, Axis::Core));
        }
    }

    #[test]
    fn two_kernels_give_two_titled_panels() {
        let k = kernels(TWO, "lower-staging");
        let s = svg(&k, Axis::Core);
        let doc = parse(&s);
        let ps = panels(&doc);
        assert_eq!(ps.len(), 2);
        let names: Vec<_> = ps
            .iter()
            .map(|p| p.attribute("data-kernel").unwrap())
            .collect();
        assert_eq!(names, ["relu", "scale"]);
        let titles = texts(doc.root_element(), "title");
        assert_eq!(titles.len(), 2);
        assert!(titles[0].starts_with("@relu — core 0"), "{}", titles[0]);
        assert!(titles[1].starts_with("@scale — core 1"), "{}", titles[1]);
        assert_eq!(texts(doc.root_element(), "lane-label").len(), 6);
        let ys: Vec<f64> = ps
            .iter()
            .map(|p| {
                num(
                    &p.descendants().find(|t| has_class(t, "title")).unwrap(),
                    "y",
                )
            })
            .collect();
        // Each panel has a line per access (two each).
        let each = PANEL_H + 2.0 * ACCESS_H;
        assert!((ys[1] - ys[0] - each).abs() < 1e-9);
        assert_eq!(num(&doc.root_element(), "height"), HEADER_H + 2.0 * each);
        let lines = texts(ps[1], "access");
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].starts_with("0 read %a — tcm: vec copies"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("ns per element vs 50 indexed"),
            "{}",
            lines[0]
        );
        // @scale stages its transposed input by VEC_MEMCPY (short runs): core
        // copies on the compute lane.
        let copies: Vec<_> = bars(lane(ps[1], "core"))
            .into_iter()
            .filter(|r| has_class(r, "copy"))
            .collect();
        assert!(!copies.is_empty());
        assert!(copies
            .iter()
            .any(|r| tooltip(r).contains("gpsimd.memcpy #")));
        // The legend names every kind once.
        let legend = doc.descendants().find(|n| has_class(n, "legend")).unwrap();
        for kind in KINDS {
            assert_eq!(
                bars(legend)
                    .iter()
                    .filter(|r| has_class(r, kind.class()))
                    .count(),
                1
            );
        }
    }

    /// The leftmost and rightmost x of the data bars under `n`.
    fn extent(n: Node) -> (f64, f64) {
        bars(n).iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| {
            (lo.min(num(r, "x")), hi.max(num(r, "x") + num(r, "width")))
        })
    }

    /// The tick labels of `p` with their x.
    fn ticks(p: Node) -> Vec<(String, String)> {
        p.descendants()
            .filter(|t| t.has_tag_name("text") && has_class(t, "tick-label"))
            .map(|t| {
                (
                    t.text().unwrap().to_string(),
                    t.attribute("x").unwrap().to_string(),
                )
            })
            .collect()
    }

    /// Time spent computing, ns.
    fn compute_ns(k: &KernelSchedule) -> f64 {
        k.schedule
            .events
            .iter()
            .filter(|e| matches!(k.plan.steps[e.step], Step::Compute { .. }))
            .map(|e| e.end - e.start)
            .sum()
    }

    #[test]
    fn kernels_of_one_core_are_laid_one_after_the_other() {
        let k = kernels(SHARED, "lower-staging");
        let names: Vec<_> = k.iter().map(|k| k.kernel.name.as_str()).collect();
        assert_eq!(names, ["first", "other", "second"]);
        let mk: Vec<f64> = k.iter().map(|k| k.schedule.figures.makespan_ns).collect();
        assert!(mk[2] > 1.5 * mk[0], "{mk:?}");
        let placement = Placement::new(&k);
        assert_eq!(placement.offsets, [0.0, 0.0, mk[0]]);
        let core0 = mk[0] + mk[2];
        assert_eq!(placement.core_end[&0], core0);
        assert_eq!(placement.core_end[&1], mk[1]);

        let s = svg(&k, Axis::Core);
        let doc = parse(&s);
        let ps = panels(&doc);
        // Grouped by core, each core's kernels in issue order.
        let shown: Vec<_> = ps
            .iter()
            .map(|p| {
                (
                    p.attribute("data-kernel").unwrap(),
                    p.attribute("data-core").unwrap(),
                )
            })
            .collect();
        assert_eq!(shown, [("first", "0"), ("second", "0"), ("other", "1")]);
        let (first, second, other) = (ps[0], ps[1], ps[2]);

        // Core 0: one axis for both panels, @second right after @first.
        let scale = PLOT_W / core0;
        assert_eq!(check_axis(first, core0), check_axis(second, core0));
        assert_eq!(ticks(first), ticks(second));
        let (f0, f1) = extent(first);
        let (s0, s1) = extent(second);
        assert!((f0 - PLOT_X).abs() < 0.01, "{f0}");
        assert!((f1 - (PLOT_X + mk[0] * scale)).abs() < 0.02, "{f1}");
        assert!((s0 - (PLOT_X + mk[0] * scale)).abs() < 0.01, "{s0}");
        assert!(
            s0 >= f1 - 0.02,
            "@second starts at {s0}, @first ends at {f1}"
        );
        assert!((s1 - (PLOT_X + PLOT_W)).abs() < 0.02, "{s1}");
        // Bars keep the core's scale, and the lower bound is drawn from the
        // kernel's start.
        assert!((area(second, Kind::Compute) - compute_ns(&k[2]) * scale).abs() < 0.05);
        let bound = second
            .descendants()
            .find(|n| n.has_tag_name("line") && has_class(n, "bound"))
            .unwrap();
        let lb = k[2].schedule.figures.lower_bound_ns;
        assert!((num(&bound, "x1") - (PLOT_X + (mk[0] + lb) * scale)).abs() < 0.01);
        // The shaded span is where the kernel runs.
        let span = second
            .descendants()
            .find(|n| n.has_tag_name("rect") && has_class(n, "span"))
            .unwrap();
        assert!((num(&span, "x") - s0).abs() < 0.01);
        assert!((num(&span, "width") - mk[2] * scale).abs() < 0.01);
        let title = &texts(second, "title")[0];
        assert!(
            title.ends_with(&format!("from {} to {} µs", us(mk[0]), us(core0))),
            "{title}"
        );

        // Core 1 has its own axis: its only kernel fills the width.
        check_axis(other, mk[1]);
        let (o0, o1) = extent(other);
        assert!((o0 - PLOT_X).abs() < 0.01 && (o1 - (PLOT_X + PLOT_W)).abs() < 0.02);
        assert!(texts(doc.root_element(), "note")[0].starts_with("Each core has its own time axis"));
    }

    #[test]
    fn the_global_axis_puts_every_core_on_one_scale() {
        let k = kernels(SHARED, "lower-staging");
        let mk: Vec<f64> = k.iter().map(|k| k.schedule.figures.makespan_ns).collect();
        let end = Placement::new(&k).end();
        assert_eq!(end, mk[0] + mk[2]);
        let s = svg(&k, Axis::Global);
        let doc = parse(&s);
        let ps = panels(&doc);
        assert_eq!(ps.len(), 3);
        // One axis: the same ticks at the same places in every panel.
        for p in &ps {
            check_axis(*p, end);
            assert_eq!(ticks(*p), ticks(ps[0]));
        }
        let scale = PLOT_W / end;
        // @other (core 1) runs from 0 for as long as @first, at the same
        // scale: it ends where @first ends, short of the width.
        let other = ps[2];
        assert_eq!(other.attribute("data-kernel"), Some("other"));
        let (o0, o1) = extent(other);
        let (_, f1) = extent(ps[0]);
        assert!((o0 - PLOT_X).abs() < 0.01, "{o0}");
        assert!((o1 - (PLOT_X + mk[1] * scale)).abs() < 0.02, "{o1}");
        assert!((o1 - f1).abs() < 0.02, "{o1} vs {f1}");
        assert!(o1 < PLOT_X + 0.5 * PLOT_W, "{o1}");
        assert!((area(other, Kind::Compute) - compute_ns(&k[1]) * scale).abs() < 0.05);
        // Core 0 is the longest, so its panels are as on its own axis.
        let per_core = svg(&k, Axis::Core);
        let per_core = parse(&per_core);
        let core_ps = panels(&per_core);
        for i in 0..2 {
            let rects = |p: Node| -> Vec<String> {
                bars(p)
                    .iter()
                    .map(|r| format!("{:?}", r.attributes().collect::<Vec<_>>()))
                    .collect()
            };
            assert_eq!(rects(ps[i]), rects(core_ps[i]));
        }
        assert!(texts(doc.root_element(), "note")[0].starts_with("All cores share one time axis"));
    }

    #[test]
    fn text_is_escaped() {
        let mut k = kernels(&relu(4096), "lower-staging");
        let name = "a<b&\"c'd>";
        k[0].kernel.name = name.into();
        let s = svg(&k, Axis::Core);
        let doc = parse(&s);
        let p = panels(&doc)[0];
        assert_eq!(p.attribute("data-kernel"), Some(name));
        assert!(texts(p, "title")[0].starts_with(&format!("@{name} — ")));
        assert_eq!(escape("<&>\"'x"), "&lt;&amp;&gt;&quot;&apos;x");
    }

    /// A plan's reasons (any string the input writes) and a kernel's name
    /// holding characters XML 1.0 forbids still give a well-formed
    /// document: each such character is U+FFFD, tab, line feed and
    /// carriage return stay.
    #[test]
    fn characters_xml_forbids_are_replaced() {
        let mut k = kernels(&relu(4096), "lower-staging");
        let evil = "evil \u{1b}[2J \u{1} \u{b} \u{0} \u{7f}\u{85} \u{fffe}\u{ffff} tab\tend";
        k[0].plan.reasons = vec![evil.to_string(); k[0].plan.accessors.len()];
        k[0].kernel.name = "k\u{1b}\u{c}".into();
        let s = svg(&k, Axis::Core);
        let doc = parse(&s);
        let p = panels(&doc)[0];
        assert_eq!(p.attribute("data-kernel"), Some("k\u{fffd}\u{fffd}"));
        let shown = "evil \u{fffd}[2J \u{fffd} \u{fffd} \u{fffd} \u{fffd}\u{fffd} \u{fffd}\u{fffd} tab\tend";
        let access = texts(p, "access");
        assert!(!access.is_empty());
        for line in &access {
            assert!(line.ends_with(&format!(" — {shown}")), "{line:?}");
        }
        assert!(
            !s.chars()
                .any(|c| c.is_control() && !matches!(c, '\t' | '\n')),
            "{s:?}"
        );
        assert_eq!(escape("a\u{1b}<\r\n"), "a\u{fffd}&lt;\r\n");
    }

    #[test]
    fn no_kernels_is_still_a_document() {
        let s = svg(&[], Axis::Core);
        let doc = parse(&s);
        assert!(panels(&doc).is_empty());
        assert!(s.contains("no planned kernels"));
    }

    #[test]
    fn sizes_are_human() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(4096), "4.0 KiB");
        assert_eq!(size(16 << 20), "16.0 MiB");
    }
}
