//! Interned names: every identifier in a module is stored once and referred
//! to by a 4-byte [`Symbol`].

use indexmap::IndexSet;
use std::hash::BuildHasherDefault;

/// An interned string; compare and hash as an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(u32);

impl Symbol {
    /// The symbol's position in its table.
    pub fn index(self) -> u32 {
        self.0
    }

    /// The symbol at position `i` of some table (tests of foreign symbols).
    #[cfg(test)]
    pub(crate) fn from_raw(i: u32) -> Symbol {
        Symbol(i)
    }
}

/// The string table of one module. It starts with the op-encoder table's
/// role names ([`crate::target::encoders::role_names`]), so that a role
/// name has the same symbol in every module.
#[derive(Debug, Clone)]
pub struct Interner {
    set: IndexSet<Box<str>, BuildHasherDefault<rustc_hash::FxHasher>>,
}

impl Default for Interner {
    fn default() -> Self {
        let names = crate::target::encoders::role_names();
        let mut set = IndexSet::with_capacity_and_hasher(names.len(), Default::default());
        for name in names {
            set.insert((*name).into());
        }
        Interner { set }
    }
}

impl Interner {
    /// A table holding the role names.
    pub fn new() -> Self {
        Self::default()
    }

    /// Interns `s`, returning its symbol.
    #[inline(always)]
    pub fn intern(&mut self, s: &str) -> Symbol {
        // Most names interned are roles, whose symbols are fixed: a few
        // length-first comparisons beat hashing (and are built into the
        // caller, the rest is not).
        let roles = crate::target::encoders::role_names();
        if let Some(i) = roles
            .iter()
            .position(|r| crate::target::encoders::short_eq(r, s))
        {
            return Symbol(i as u32);
        }
        self.intern_other(s)
    }

    /// [`Interner::intern`] of a name that is not a role.
    #[inline(never)]
    fn intern_other(&mut self, s: &str) -> Symbol {
        if let Some(i) = self.set.get_index_of(s) {
            return Symbol(i as u32);
        }
        let (i, _) = self.set.insert_full(s.into());
        Symbol(i as u32)
    }

    /// The symbol of `s` if it was interned.
    pub fn lookup(&self, s: &str) -> Option<Symbol> {
        self.set.get_index_of(s).map(|i| Symbol(i as u32))
    }

    /// Whether `sym` is a symbol of this interner.
    pub fn contains(&self, sym: Symbol) -> bool {
        (sym.0 as usize) < self.set.len()
    }

    /// The string of `sym`.
    ///
    /// # Panics
    /// If `sym` comes from another interner.
    pub fn get(&self, sym: Symbol) -> &str {
        &self.set[sym.0 as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interning_is_stable() {
        let mut i = Interner::new();
        let a = i.intern("dst");
        let b = i.intern("src");
        assert_ne!(a, b);
        assert_eq!(i.intern("dst"), a);
        assert_eq!(i.get(b), "src");
        assert_eq!(i.lookup("src"), Some(b));
        assert_eq!(i.lookup("nope"), None);
    }

    #[test]
    fn role_names_have_the_same_symbol_in_every_table() {
        use crate::target::encoders::{role_names, IsaOp};
        let mut a = Interner::new();
        a.intern("something else");
        let b = Interner::new();
        for (k, name) in role_names().iter().enumerate() {
            assert_eq!(a.lookup(name), Some(Symbol(k as u32)));
            assert_eq!(b.lookup(name), a.lookup(name));
        }
        // role_of agrees with the lookup by text for every role of every op,
        // and finds nothing for names that are not its roles.
        for op in IsaOp::all() {
            for (i, r) in op.info().roles.iter().enumerate() {
                let sym = a.lookup(r.name).unwrap();
                assert_eq!(op.role_of(sym).map(|x| x.0), Some(i));
            }
            for name in role_names().iter().copied().chain(["something else"]) {
                let sym = a.lookup(name).unwrap();
                assert_eq!(
                    op.role_of(sym).map(|x| x.0),
                    op.info().role(name).map(|x| x.0),
                    "{} {name}",
                    op.info().name
                );
            }
        }
    }
}
