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
    /// `slots[..bound]` are the ids handed out (`None`: removed); past
    /// `bound`, values of entries [`Arena::recycle`] let go, kept for
    /// [`Arena::push_with`] to fill again (never read as entries).
    slots: Vec<Option<V>>,
    bound: usize,
    free: Vec<K>,
    live: usize,
    unused: PhantomData<K>,
}

impl<K: EntityRef, V> Arena<K, V> {
    /// An empty arena.
    pub fn new() -> Self {
        Arena {
            slots: Vec::new(),
            bound: 0,
            free: Vec::new(),
            live: 0,
            unused: PhantomData,
        }
    }

    /// The slots of the ids handed out.
    #[inline]
    fn used(&self) -> &[Option<V>] {
        &self.slots[..self.bound]
    }

    /// The slots of the ids handed out, for changing them.
    #[inline]
    fn used_mut(&mut self) -> &mut [Option<V>] {
        &mut self.slots[..self.bound]
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
    /// or last cleared (or recycled): every stored id's index is below it
    /// (for tables indexed by id).
    pub fn id_bound(&self) -> usize {
        self.bound
    }

    /// Whether `k` names a stored entry (false for a removed id and for an
    /// id never handed out).
    pub fn contains(&self, k: K) -> bool {
        matches!(self.used().get(k.index()), Some(Some(_)))
    }

    /// The entry `k`, if stored.
    #[inline]
    pub fn get(&self, k: K) -> Option<&V> {
        self.used().get(k.index()).and_then(Option::as_ref)
    }

    /// The entry `k`, if stored, for changing it.
    #[inline]
    pub fn get_mut(&mut self, k: K) -> Option<&mut V> {
        self.used_mut().get_mut(k.index()).and_then(Option::as_mut)
    }

    /// Stored ids and entries, in id order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (K, &V)> + '_ {
        self.used()
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (K::new(i), v)))
    }

    /// Stored ids and entries, in id order, for changing the entries.
    pub fn iter_mut(&mut self) -> impl DoubleEndedIterator<Item = (K, &mut V)> + '_ {
        self.used_mut()
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
        self.used().iter().filter_map(Option::as_ref)
    }

    /// Stored entries, in id order, for changing them.
    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut V> + '_ {
        self.used_mut().iter_mut().filter_map(Option::as_mut)
    }

    /// Removes every entry and forgets every id: the next insertion gets
    /// id 0 again.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.bound = 0;
        self.free.clear();
        self.live = 0;
    }

    /// Forgets every entry as [`Arena::clear`] does (ids start from 0
    /// again), but keeps their values, at most one per id handed out so
    /// far, for the parser to read the next entries into in place: a
    /// producer that parses a batch of ops, empties the arena and parses
    /// the next batch reuses the ops' memory (their heap storage too)
    /// instead of dropping it and building it anew. The kept values are
    /// never read as entries; they are dropped with the arena, by
    /// [`Arena::clear`], or as entries stored in code replace them.
    pub fn recycle(&mut self) {
        self.bound = 0;
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
        // A freed id is always below `bound` and empty: `clear` and
        // `recycle` forget both together.
        if let Some(k) = self.free.pop() {
            self.slots[k.index()] = Some(v);
            return k;
        }
        match self.slots.get_mut(self.bound) {
            Some(spare) => *spare = Some(v),
            None => self.slots.push(Some(v)),
        }
        self.bound += 1;
        K::new(self.bound - 1)
    }

    /// Stores an entry built in place under the id [`Arena::push`] would
    /// give: `fill` gets a value that [`Arena::recycle`] kept, or `fresh()`
    /// where there is none, and must set all of it (a kept value holds an
    /// earlier entry). On `Err` nothing is stored (the value is kept for a
    /// later push) and the error is returned.
    pub(crate) fn push_with<E>(
        &mut self,
        fresh: impl FnOnce() -> V,
        fill: impl FnOnce(&mut V) -> Result<(), E>,
    ) -> Result<K, E> {
        if let Some(k) = self.free.pop() {
            let slot = &mut self.slots[k.index()];
            if let Err(e) = fill(slot.insert(fresh())) {
                *slot = None;
                self.free.push(k);
                return Err(e);
            }
            self.live += 1;
            return Ok(k);
        }
        if self.slots.len() == self.bound {
            self.slots.push(None);
        }
        fill(self.slots[self.bound].get_or_insert_with(fresh))?;
        self.bound += 1;
        self.live += 1;
        Ok(K::new(self.bound - 1))
    }

    /// Forgets every id from `bound` on (an earlier [`Arena::id_bound`]):
    /// undoes the insertions since then, provided none of them reused a
    /// freed id (the parser's undo of a half-read item; it never removes).
    /// Their values are kept as [`Arena::recycle`] keeps them.
    pub(crate) fn truncate(&mut self, bound: usize) {
        if bound >= self.bound {
            return;
        }
        let dropped = self.slots[bound..self.bound]
            .iter()
            .filter(|v| v.is_some())
            .count();
        self.bound = bound;
        self.live -= dropped;
        self.free.retain(|k| k.index() < bound);
    }

    /// Removes entry `k` and frees its id; `None` if it was not stored.
    pub(crate) fn remove(&mut self, k: K) -> Option<V> {
        let v = self.used_mut().get_mut(k.index())?.take()?;
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
            slots: self.used().to_vec(),
            bound: self.bound,
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

    #[test]
    fn recycled_values_are_filled_again_and_never_read_as_entries() {
        let mut a: Arena<Op, String> = Arena::new();
        let fill = |s: &str| {
            let s = s.to_string();
            move |v: &mut String| -> Result<(), ()> {
                v.clear();
                v.push_str(&s);
                Ok(())
            }
        };
        let x = a.push_with(String::new, fill("x")).unwrap();
        a.push("y".to_string());
        a.recycle();
        assert!(a.is_empty() && a.id_bound() == 0 && a.iter().next().is_none());
        assert!(!a.contains(x) && a.get(x).is_none());
        // The kept value comes back to be filled, under id 0 again.
        let mut kept = None;
        let z = a
            .push_with(String::new, |v| {
                kept = Some(v.clone());
                v.clear();
                v.push('z');
                Ok::<(), ()>(())
            })
            .unwrap();
        assert_eq!((z, kept.as_deref()), (x, Some("x")));
        // A failed fill stores nothing; its value waits for the next push.
        assert_eq!(a.push_with(String::new, |_| Err("no")), Err("no"));
        assert_eq!((a.len(), a.id_bound()), (1, 1));
        assert_eq!(a.push("w".to_string()), Op::from_u32(1));
        assert_eq!(a.values().collect::<Vec<_>>(), ["z", "w"]);
        // A freed id takes a fresh value, and a failed fill frees it again.
        assert_eq!(a.remove(z).as_deref(), Some("z"));
        assert_eq!(a.push_with(String::new, |_| Err(())), Err(()));
        assert!(!a.contains(z));
        assert_eq!(a.push_with(String::new, fill("v")), Ok(z));
        assert_eq!(a[z], "v");
        // Undone ids keep their values as a recycle does; a clone holds
        // only the entries.
        a.truncate(1);
        assert_eq!((a.len(), a.id_bound()), (1, 1));
        assert_eq!(a.clone().values().collect::<Vec<_>>(), ["v"]);
        assert_eq!(a.clone().capacity(), 1);
        a.clear();
        assert!(a.is_empty() && a.capacity() > 0);
        assert_eq!(a.push("u".to_string()), x);
    }
}
