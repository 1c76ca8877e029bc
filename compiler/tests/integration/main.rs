//! The integration tests of `apir-compiler`, in one test binary (one link
//! for the crate instead of one per file). The inputs they share stay in
//! `compiler/tests/`: the lowering corpus (`corpus/`), the staging corpus
//! (`staging/`) and the insta snapshots (`snapshots/`, see [`snapshots`]).

mod built_modules;
mod canonicalize;
mod chunked_stream;
mod driver;
mod manager;
mod parallel_stream;
mod pass_snapshots;
mod semantics;
mod staging_oracle;
mod staging_replay;
mod staging_snapshots;
mod wire_props;
mod wire_snapshots;

/// Runs `f` with insta's snapshots in `compiler/tests/snapshots/`, named
/// as the snapshot names say (`<test file>__<name>`), whatever module the
/// test sits in.
pub fn snapshots(f: impl FnOnce()) {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s.bind(f);
}
