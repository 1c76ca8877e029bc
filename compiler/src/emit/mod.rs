//! The emitters: everything `apir-opt --emit` writes besides IR text, each
//! computed from a lowered or planned module as data first and rendered
//! second.
//!
//! - [`wire`]: the descriptors `encode-wire` attached, as an annotated
//!   dump, hex lines, the framed `wire-bin` stream (and its reader) or
//!   JSON;
//! - [`schedule`]: each kernel's staging plan read back and simulated, its
//!   SDMA descriptors, `--emit=schedule-json` and `--emit=trace-json`;
//! - [`timeline`]: `--emit=timeline-svg`, one Gantt panel per kernel.

pub mod schedule;
pub mod timeline;
pub mod wire;
