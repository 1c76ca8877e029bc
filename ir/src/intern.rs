//! Interned names: every identifier in a module is stored once and referred
//! to by a 4-byte [`Symbol`].

use indexmap::IndexSet;
use std::hash::BuildHasherDefault;

/// An interned string; compare and hash as an integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(u32);

/// The string table of one module.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    set: IndexSet<Box<str>, BuildHasherDefault<rustc_hash::FxHasher>>,
}

impl Interner {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Interns `s`, returning its symbol.
    pub fn intern(&mut self, s: &str) -> Symbol {
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
}
