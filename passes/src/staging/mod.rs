//! The staging backend's shared parts: HBM footprints, staging groups and
//! tile layouts, and the simulator.

pub mod bound;
pub mod footprint;
pub mod layout;
pub mod sim;
