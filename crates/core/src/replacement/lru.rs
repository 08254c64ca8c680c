//! LRU by the OS's knowledge of references: a page moves to the most-recently-used end at every
//! reference the OS can see (a page walk that sets the accessed bit, or the fault that made it
//! resident); the victim is the least recently used. A doubly linked list threaded through a
//! slab, found by a hash map: O(1) per operation.

use super::{PageRef, Replacement, Sees, Victim};
use crate::fasthash::FastMap;

const NIL: u32 = u32::MAX;

#[derive(Default)]
pub struct Lru {
    nodes: Vec<(PageRef, u32, u32)>, // page, prev, next
    free: Vec<u32>,
    at: FastMap<PageRef, u32>,
    head: Option<u32>, // most recent
    tail: Option<u32>, // least recent
    sees: Sees,
}

impl Lru {
    /// LRU hearing of the references `sees` names.
    pub fn seeing(sees: Sees) -> Lru {
        Lru { sees, ..Default::default() }
    }

    fn unlink(&mut self, i: u32) {
        let (_, prev, next) = self.nodes[i as usize];
        if prev != NIL {
            self.nodes[prev as usize].2 = next;
        } else {
            self.head = (next != NIL).then_some(next);
        }
        if next != NIL {
            self.nodes[next as usize].1 = prev;
        } else {
            self.tail = (prev != NIL).then_some(prev);
        }
    }
    fn push_front(&mut self, i: u32) {
        let old = self.head.unwrap_or(NIL);
        self.nodes[i as usize].1 = NIL;
        self.nodes[i as usize].2 = old;
        if old != NIL {
            self.nodes[old as usize].1 = i;
        } else {
            self.tail = Some(i);
        }
        self.head = Some(i);
    }
}

impl Replacement for Lru {
    fn name(&self) -> String {
        "lru".into()
    }
    fn on_insert(&mut self, p: PageRef) {
        if let Some(&i) = self.at.get(&p) {
            self.unlink(i);
            self.push_front(i);
            return;
        }
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i as usize] = (p, NIL, NIL);
                i
            }
            None => {
                self.nodes.push((p, NIL, NIL));
                (self.nodes.len() - 1) as u32
            }
        };
        self.at.insert(p, i);
        self.push_front(i);
    }
    fn on_reference(&mut self, p: PageRef) {
        if let Some(&i) = self.at.get(&p) {
            self.unlink(i);
            self.push_front(i);
        }
    }
    fn on_remove(&mut self, p: PageRef) {
        if let Some(i) = self.at.remove(&p) {
            self.unlink(i);
            self.free.push(i);
        }
    }
    fn victim(&mut self) -> Option<Victim> {
        let i = self.tail?;
        let p = self.nodes[i as usize].0;
        self.on_remove(p);
        Some(Victim::whole(p))
    }
    fn sees_every_reference(&self) -> bool {
        self.sees == Sees::Every
    }
    fn len(&self) -> usize {
        self.at.len()
    }
}
