//! [`Arena`]: an entity arena whose removed ids are reused.
//!
//! [`Module`](crate::Module) stores its ops and blocks in arenas of this
//! type. Removing an entry frees its slot; the next insertion takes the
//! most recently freed id before growing the arena, so a module that is
//! edited over and over (a kernel re-planned, ops split) holds only the
//! entries it uses. Iteration yields the stored entries only, in id order.
//!
//! An id whose entry was removed may later name another entry: code that
//! keeps ids across a removal must drop the removed ones.

use cranelift_entity::EntityRef;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Index, IndexMut};

/// Entries of type `V` named by ids of type `K`, with a free list of
/// removed ids.
pub struct Arena<K: EntityRef, V> {
    slots: Vec<Option<V>>,
    free: Vec<K>,
    live: usize,
    unused: PhantomData<K>,
}

impl<K: EntityRef, V> Arena<K, V> {
    /// An empty arena.
    pub fn new() -> Self {
        Arena {
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            unused: PhantomData,
        }
    }

    /// The number of stored entries (removed ones excluded).
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// One more than the highest id handed out since the arena was created
    /// or last cleared: every stored id's index is below it (for tables
    /// indexed by id).
    pub fn id_bound(&self) -> usize {
        self.slots.len()
    }

    /// Whether `k` names a stored entry (false for a removed id and for an
    /// id never handed out).
    pub fn contains(&self, k: K) -> bool {
        matches!(self.slots.get(k.index()), Some(Some(_)))
    }

    /// The entry `k`, if stored.
    pub fn get(&self, k: K) -> Option<&V> {
        self.slots.get(k.index()).and_then(Option::as_ref)
    }

    /// The entry `k`, if stored, for changing it.
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.slots.get_mut(k.index()).and_then(Option::as_mut)
    }

    /// Stored ids and entries, in id order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (K, &V)> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (K::new(i), v)))
    }

    /// Stored ids and entries, in id order, for changing the entries.
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (K, &mut V)> + '_ {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, v)| v.as_mut().map(|v| (K::new(i), v)))
    }

    /// Stored ids, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = K> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// Stored entries, in id order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + '_ {
        self.slots.iter().filter_map(Option::as_ref)
    }

    /// Stored entries, in id order, for changing them.
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + '_ {
        self.slots.iter_mut().filter_map(Option::as_mut)
    }

    /// Removes every entry and forgets every id: the next insertion gets
    /// id 0 again.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.live = 0;
    }

    /// The entries the arena has room for without growing.
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.slots.capacity()
    }

    /// Stores `v` under the most recently freed id, or a new one.
    ///
    /// Inside the crate: ops and blocks enter a module through its layout
    /// methods ([`crate::Module::append_op`] and the others), and the parser.
    pub(crate) fn push(&mut self, v: V) -> K {
        self.live += 1;
        // A freed id is always below `slots.len()` and empty: `clear`
        // forgets both together.
        if let Some(k) = self.free.pop() {
            self.slots[k.index()] = Some(v);
            return k;
        }
        self.slots.push(Some(v));
        K::new(self.slots.len() - 1)
    }

    /// Forgets every id from `bound` on (an earlier [`Arena::id_bound`]):
    /// undoes the insertions since then, provided none of them reused a
    /// freed id (the parser's undo of a half-read item; it never removes).
    pub(crate) fn truncate(&mut self, bound: usize) {
        if bound >= self.slots.len() {
            return;
        }
        let dropped = self.slots[bound..].iter().filter(|v| v.is_some()).count();
        self.slots.truncate(bound);
        self.live -= dropped;
        self.free.retain(|k| k.index() < bound);
    }

    /// Removes entry `k` and frees its id; `None` if it was not stored.
    pub(crate) fn remove(&mut self, k: K) -> Option<V> {
        let v = self.slots.get_mut(k.index())?.take()?;
        self.live -= 1;
        self.free.push(k);
        Some(v)
    }
}

impl<K: EntityRef, V> Default for Arena<K, V> {
    fn default() -> Self {
        Arena::new()
    }
}

impl<K: EntityRef, V: Clone> Clone for Arena<K, V> {
    fn clone(&self) -> Self {
        Arena {
            slots: self.slots.clone(),
            free: self.free.clone(),
            live: self.live,
            unused: PhantomData,
        }
    }
}

impl<K: EntityRef + fmt::Debug, V: fmt::Debug> fmt::Debug for Arena<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The entry `k`.
///
/// # Panics
/// If `k` is not stored (removed, or never handed out by this arena).
impl<K: EntityRef + fmt::Debug, V> Index<K> for Arena<K, V> {
    type Output = V;

    fn index(&self, k: K) -> &V {
        match self.get(k) {
            Some(v) => v,
            None => missing(k),
        }
    }
}

/// The entry `k`, for changing it.
///
/// # Panics
/// If `k` is not stored (removed, or never handed out by this arena).
impl<K: EntityRef + fmt::Debug, V> IndexMut<K> for Arena<K, V> {
    fn index_mut(&mut self, k: K) -> &mut V {
        match self.get_mut(k) {
            Some(v) => v,
            None => missing(k),
        }
    }
}

#[cold]
#[track_caller]
fn missing<K: fmt::Debug>(k: K) -> ! {
    panic!("{k:?} is not stored (removed, or from another module)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Op;

    #[test]
    fn removed_ids_are_reused_and_never_iterated() {
        let mut a: Arena<Op, &str> = Arena::new();
        let x = a.push("x");
        let y = a.push("y");
        let z = a.push("z");
        assert_eq!((a.len(), a.id_bound()), (3, 3));
        assert_eq!(a.remove(y), Some("y"));
        assert_eq!(a.remove(y), None);
        assert!(!a.contains(y) && a.get(y).is_none());
        assert_eq!(a.values().copied().collect::<Vec<_>>(), ["x", "z"]);
        assert_eq!(a.keys().collect::<Vec<_>>(), [x, z]);
        assert_eq!((a.len(), a.id_bound()), (2, 3));
        // The freed id comes back first, then the arena grows.
        assert_eq!(a.push("w"), y);
        assert_eq!(a.push("v"), Op::from_u32(3));
        assert_eq!(a[y], "w");
        a.clear();
        assert!(a.is_empty() && a.id_bound() == 0);
        assert_eq!(a.push("u"), x);
        assert!(!a.contains(Op::from_u32(7)));
        let caught = std::panic::catch_unwind(|| a[Op::from_u32(7)]);
        assert!(caught.is_err());
    }
}
