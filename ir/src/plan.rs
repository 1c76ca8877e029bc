//! A staging plan as typed values: what `schedule-staging` writes into a
//! module ([`crate::Module::plans`]) and what reading a plan's ops back
//! gives. Reading, checking, writing and printing plans is
//! [`crate::staging`]'s; the text names come from the op-definition table
//! ([`crate::target::ops`]).

use crate::target::cost::SimParams;
use crate::target::encoders::ACCESSORS;
use crate::target::ops::{COPY_DIRS, COPY_METHODS, POLICIES};

/// Staging policy (`schedule-staging{policy=...}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// N-deep buffering; copies overlap compute.
    Pipelined,
    /// What the reference runtime's accessors do: one 4 KiB stream buffer
    /// refilled or flushed in place, every copy waited for at once.
    Reference,
}

impl Policy {
    /// Every policy, in the order of [`POLICIES`].
    pub const ALL: [Policy; 2] = [Policy::Pipelined, Policy::Reference];

    /// The text name.
    pub const fn name(self) -> &'static str {
        POLICIES[self as usize]
    }

    /// The policy called `s`.
    pub fn from_name(s: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// How a kernel reaches one access's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Accessor {
    /// Staged as a forward contiguous sweep (the stream family).
    Stream,
    /// Staged in caller-managed dataram tiles.
    Tcm,
    /// Unbuffered: one HBM access per element, no staging.
    Index,
}

impl Accessor {
    /// Every accessor, in the order of [`ACCESSORS`] (after `auto`).
    pub const ALL: [Accessor; 3] = [Accessor::Stream, Accessor::Tcm, Accessor::Index];

    /// The text name.
    pub fn name(self) -> &'static str {
        ACCESSORS[self as usize + 1]
    }

    /// The accessor called `s` (`auto` is not an accessor but a request).
    pub fn from_name(s: &str) -> Option<Accessor> {
        Accessor::ALL.into_iter().find(|a| a.name() == s)
    }

    /// Whether the accessor stages through a dataram buffer.
    pub fn is_buffered(self) -> bool {
        self != Accessor::Index
    }
}

/// Direction of a copy; the ring an SDMA descriptor goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// HBM -> dataram (the M2S ring).
    M2s,
    /// Dataram -> HBM (the S2M ring).
    S2m,
}

impl Dir {
    /// Both directions, in the order of [`COPY_DIRS`].
    pub const ALL: [Dir; 2] = [Dir::M2s, Dir::S2m];

    /// The text name.
    pub fn name(self) -> &'static str {
        COPY_DIRS[self as usize]
    }

    /// The direction called `s`.
    pub fn from_name(s: &str) -> Option<Dir> {
        Dir::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// The `neuron_memcpy` method of a copy (the one table in
/// [`crate::target::sdma`]).
pub use crate::target::sdma::MemcpyMethod as Method;

/// The name of a method in `gpsimd.memcpy {method = ...}` and in schedule
/// JSON: `dma`, `vec`, `c`.
pub fn method_name(m: Method) -> &'static str {
    COPY_METHODS[METHODS.iter().position(|x| *x == m).unwrap_or(0)]
}

/// The methods, in the order of [`COPY_METHODS`].
const METHODS: [Method; 3] = [Method::Dma, Method::VecMemcpy, Method::CMemcpy];

/// The core method called `s` (`vec` or `c`).
pub fn core_method(s: &str) -> Option<Method> {
    METHODS
        .into_iter()
        .filter(|m| *m != Method::Dma)
        .find(|m| method_name(*m) == s)
}

/// One dataram buffer of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// The access whose staging group owns the buffer.
    pub access: u32,
    /// First dataram byte address.
    pub dram: u32,
    /// Size in bytes.
    pub bytes: u32,
}

impl Slot {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        u64::from(self.dram) + u64::from(self.bytes)
    }
}

/// One copy between HBM and the dataram.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Copy {
    /// Direction.
    pub dir: Dir,
    /// Method.
    pub method: Method,
    /// SDMA queue id (0 for core copies).
    pub queue: u8,
    /// The access (index in body order) the copy stages.
    pub access: u32,
    /// The tile of that access.
    pub tile: u32,
    /// The buffer used.
    pub slot: u32,
    /// HBM byte address.
    pub hbm: u64,
    /// Dataram byte address.
    pub dram: u32,
    /// Bytes moved.
    pub bytes: u32,
}

/// One step of a plan, in issue order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// A copy (its id is its position among the copies).
    Copy(Copy),
    /// The core waits for copy `copy` to complete.
    Wait {
        /// Copy id.
        copy: u32,
    },
    /// The core runs iterations `[first, first + count)`.
    Compute {
        /// First iteration.
        first: u64,
        /// Iterations.
        count: u64,
    },
}

/// A kernel's staging plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelPlan {
    /// Policy.
    pub policy: Policy,
    /// Buffering depth (buffers per staging group).
    pub depth: u32,
    /// The accessor of each access, in body order.
    pub accessors: Vec<Accessor>,
    /// Simulator parameters.
    pub params: SimParams,
    /// Why each access got its accessor, one line per access in body
    /// order (`gpsimd.plan {reasons = [...]}`); empty when not recorded
    /// (a hand-written plan, `policy = "reference"`).
    pub reasons: Vec<String>,
    /// Dataram buffers.
    pub slots: Vec<Slot>,
    /// Steps in issue order.
    pub steps: Vec<Step>,
}

impl KernelPlan {
    /// The copies in id order.
    pub fn copies(&self) -> impl Iterator<Item = &Copy> {
        self.steps.iter().filter_map(|s| match s {
            Step::Copy(c) => Some(c),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(Policy::from_name(p.name()), Some(p));
        }
        for a in Accessor::ALL {
            assert_eq!(Accessor::from_name(a.name()), Some(a));
        }
        assert_eq!(Accessor::from_name("auto"), None);
        assert_eq!(Accessor::Index.name(), "index");
        for d in Dir::ALL {
            assert_eq!(Dir::from_name(d.name()), Some(d));
        }
        assert_eq!(
            METHODS.map(method_name),
            ["dma", "vec", "c"],
            "the order of COPY_METHODS"
        );
        assert_eq!(core_method("vec"), Some(Method::VecMemcpy));
        assert_eq!(core_method("dma"), None);
        assert_eq!(
            (Policy::Pipelined.name(), Dir::S2m.name()),
            ("pipelined", "s2m")
        );
    }
}
