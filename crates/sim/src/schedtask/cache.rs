//! A set-associative LRU cache over 64-byte line numbers, with per-line versions so that a copy
//! made stale by another core's write is recognized (the coherence miss of a bouncing line).

/// Ways per set the paper's caches have (4-way L1 i/d and L2).
pub const WAYS: usize = 4;

/// One set: tags (line number + 1, 0 = empty) and the versions their copies hold, most
/// recently used first.
#[derive(Clone, Copy, Debug, Default)]
struct Set {
    tags: [u64; WAYS],
    vers: [u32; WAYS],
}

/// One private cache.
#[derive(Clone, Debug)]
pub struct Cache {
    sets: Vec<Set>,
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
    /// A cache of `bytes` with 64-byte lines and [`WAYS`] ways (the set count is rounded up to
    /// a power of two).
    pub fn new(bytes: usize) -> Self {
        let sets = (bytes / 64 / WAYS).max(1).next_power_of_two();
        Self {
            sets: vec![Set::default(); sets],
            set_mask: sets as u64 - 1,
        }
    }

    /// Look `line` up expecting version `ver`, and leave it most recently used at version `ver`
    /// (filled on a miss, evicting the set's least recently used line).
    #[inline]
    pub fn access(&mut self, line: u64, ver: u32) -> Lookup {
        let set = &mut self.sets[(line & self.set_mask) as usize];
        let tag = line + 1;
        let (found, pos) = if set.tags[0] == tag {
            let r = if set.vers[0] == ver {
                Lookup::Hit
            } else {
                Lookup::Stale
            };
            set.vers[0] = ver;
            return r;
        } else if set.tags[1] == tag {
            (true, 1)
        } else if set.tags[2] == tag {
            (true, 2)
        } else if set.tags[3] == tag {
            (true, 3)
        } else {
            (false, WAYS - 1)
        };
        let r = if !found {
            Lookup::Miss
        } else if set.vers[pos] == ver {
            Lookup::Hit
        } else {
            Lookup::Stale
        };
        // Move to front (LRU order), by hand: a memmove call costs more than four copies.
        let mut i = pos;
        while i > 0 {
            set.tags[i] = set.tags[i - 1];
            set.vers[i] = set.vers[i - 1];
            i -= 1;
        }
        set.tags[0] = tag;
        set.vers[0] = ver;
        r
    }

    /// Whether `line` is present (any version), without touching the LRU order.
    pub fn contains(&self, line: u64) -> bool {
        self.sets[(line & self.set_mask) as usize]
            .tags
            .contains(&(line + 1))
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
