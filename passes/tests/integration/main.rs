//! The integration tests of `apir-passes`, in one test binary (one link for
//! the crate instead of one per file).

mod canonicalize_ap;
mod staging_aliasing;
mod staging_props;
