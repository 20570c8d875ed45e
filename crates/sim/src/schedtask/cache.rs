//! A set-associative LRU cache over 64-byte line numbers, with per-line versions so that a copy
//! made stale by another core's write is recognized (the coherence miss of a bouncing line).

/// Ways per set the paper's caches have (4-way L1 i/d and L2).
pub const WAYS: usize = 4;

/// One private cache.
#[derive(Clone, Debug)]
pub struct Cache {
    /// `sets * WAYS` entries; in each set the most recently used way comes first. A tag is the
    /// line number + 1 (0 = empty).
    tags: Vec<u64>,
    /// The version of the line each entry copied.
    vers: Vec<u32>,
    set_mask: u64,
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Present and current.
    Hit,
    /// Present but another core wrote the line since it was copied.
    Stale,
    /// Not present.
    Miss,
}

impl Cache {
    /// A cache of `bytes` with 64-byte lines and [`WAYS`] ways (`bytes / 64 / WAYS` must be a
    /// power of two).
    pub fn new(bytes: usize) -> Self {
        let sets = (bytes / 64 / WAYS).max(1).next_power_of_two();
        Self {
            tags: vec![0; sets * WAYS],
            vers: vec![0; sets * WAYS],
            set_mask: sets as u64 - 1,
        }
    }

    /// Look `line` up expecting version `ver`, and leave it most recently used at version `ver`
    /// (filled on a miss, evicting the set's least recently used line).
    #[inline]
    pub fn access(&mut self, line: u64, ver: u32) -> Lookup {
        let base = ((line & self.set_mask) as usize) * WAYS;
        let tag = line + 1;
        let set = &mut self.tags[base..base + WAYS];
        let vers = &mut self.vers[base..base + WAYS];
        let (found, pos) = match set.iter().position(|&t| t == tag) {
            Some(p) => (
                if vers[p] == ver {
                    Lookup::Hit
                } else {
                    Lookup::Stale
                },
                p,
            ),
            None => (Lookup::Miss, WAYS - 1),
        };
        // Move to front (LRU order).
        set.copy_within(0..pos, 1);
        vers.copy_within(0..pos, 1);
        set[0] = tag;
        vers[0] = ver;
        found
    }

    /// Whether `line` is present (any version), without touching the LRU order.
    pub fn contains(&self, line: u64) -> bool {
        let base = ((line & self.set_mask) as usize) * WAYS;
        self.tags[base..base + WAYS].contains(&(line + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_evicts_the_least_recent_of_a_set() {
        // 512 bytes = 8 lines = 2 sets of 4 ways: even lines share set 0.
        let mut c = Cache::new(512);
        for l in [0, 2, 4, 6] {
            assert_eq!(c.access(l, 0), Lookup::Miss);
        }
        assert_eq!(c.access(0, 0), Lookup::Hit); // 0 becomes most recent; 2 is now LRU
        assert_eq!(c.access(8, 0), Lookup::Miss); // evicts 2
        assert!(!c.contains(2));
        assert!(c.contains(0) && c.contains(4) && c.contains(6) && c.contains(8));
        assert_eq!(c.access(1, 0), Lookup::Miss); // set 1 is independent
        assert!(c.contains(0));
    }

    #[test]
    fn a_newer_version_makes_the_copy_stale() {
        let mut c = Cache::new(32 * 1024);
        assert_eq!(c.access(77, 3), Lookup::Miss);
        assert_eq!(c.access(77, 3), Lookup::Hit);
        assert_eq!(c.access(77, 4), Lookup::Stale);
        assert_eq!(c.access(77, 4), Lookup::Hit);
    }
}
