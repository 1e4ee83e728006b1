//! Disjoint sets (union-find), shared by the step's islands ([`super::world`]) and the Newton iterate's contact
//! groups ([`super::newton`]).

/// Disjoint sets with path halving; groups come out ordered by their smallest member.
#[derive(Clone, Debug, Default)]
pub(crate) struct UnionFind {
    parent: Vec<usize>,
    merged: Vec<bool>,
}

impl UnionFind {
    pub(crate) fn new(n: usize) -> UnionFind {
        let mut sets = UnionFind::default();
        sets.reset(n);
        sets
    }

    /// `n` singletons again, reusing the buffers.
    pub(crate) fn reset(&mut self, n: usize) {
        self.parent.clear();
        self.parent.extend(0..n);
        self.merged.clear();
        self.merged.resize(n, false);
    }

    pub(crate) fn find(&mut self, mut i: usize) -> usize {
        while self.parent[i] != i {
            self.parent[i] = self.parent[self.parent[i]];
            i = self.parent[i];
        }
        i
    }

    pub(crate) fn union(&mut self, a: usize, b: usize) {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra != rb {
            let (lo, hi) = (ra.min(rb), ra.max(rb));
            self.parent[hi] = lo;
            self.merged[lo] = true;
        }
    }

    pub(crate) fn was_merged(&mut self, i: usize) -> bool {
        let r = self.find(i);
        self.merged[r]
    }

    pub(crate) fn clear_merged(&mut self) {
        self.merged.iter_mut().for_each(|m| *m = false);
    }

    pub(crate) fn groups(&mut self) -> Vec<Vec<usize>> {
        let n = self.parent.len();
        let mut index_of_root = vec![usize::MAX; n];
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for i in 0..n {
            let r = self.find(i);
            if index_of_root[r] == usize::MAX {
                index_of_root[r] = groups.len();
                groups.push(Vec::new());
            }
            groups[index_of_root[r]].push(i);
        }
        groups
    }
}
