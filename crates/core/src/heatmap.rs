//! SchedTask's page heatmaps (seed 004, Kallurkar & Sarangi): a 512-bit Bloom-filter-like map of
//! the physical code pages a SuperFunction type executed during one epoch, and the overlap
//! between two types as the popcount of the AND of their maps.
//!
//! The index of a page is the paper's hash over the physical page number `x`:
//! `(x + (x>>9) + (x>>18) + (x>>27) + (x>>36) + (x>>45)) mod 512`, so every bit of the page
//! number moves the index. The sum is taken modulo 2^64 (wrapping): 512 divides 2^64, so the
//! result mod 512 is the same as with unbounded integers.
//!
//! ```
//! use counterpoint_core::heatmap::{page_index, PageHeatmap};
//!
//! // Page 5 -> bit 5; page 512 -> 512 + 1 = 513 -> bit 1.
//! assert_eq!((page_index(5), page_index(512)), (5, 1));
//! let mut a = PageHeatmap::new();
//! a.insert_page(5);
//! a.insert_page(512);
//! let mut b = PageHeatmap::new();
//! b.insert_page(5);
//! assert_eq!(a.overlap(&b), 1);
//! ```

use serde::{Deserialize, Serialize};

/// Bits in a heatmap (the paper's register width).
pub const HEATMAP_BITS: usize = 512;
/// 64-bit words in a heatmap.
const WORDS: usize = HEATMAP_BITS / 64;
/// Page size the paper's physical page numbers assume (4 KiB).
pub const PAGE_BYTES: u64 = 4096;

/// The paper's bit index of physical page number `page`.
pub fn page_index(page: u64) -> usize {
    let x = page;
    let sum = x
        .wrapping_add(x >> 9)
        .wrapping_add(x >> 18)
        .wrapping_add(x >> 27)
        .wrapping_add(x >> 36)
        .wrapping_add(x >> 45);
    (sum % HEATMAP_BITS as u64) as usize
}

/// A 512-bit page heatmap. All bits are cleared at the start of each epoch ([`Self::clear`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PageHeatmap {
    words: [u64; WORDS],
}

impl PageHeatmap {
    /// An empty map.
    pub fn new() -> Self {
        Self::default()
    }

    /// Mark physical page number `page` as executed.
    pub fn insert_page(&mut self, page: u64) {
        self.set_bit(page_index(page));
    }

    /// Mark the page holding physical byte address `addr` (4 KiB pages).
    pub fn insert_addr(&mut self, addr: u64) {
        self.insert_page(addr / PAGE_BYTES);
    }

    /// Set bit `bit` (taken mod 512).
    pub fn set_bit(&mut self, bit: usize) {
        let b = bit % HEATMAP_BITS;
        self.words[b / 64] |= 1u64 << (b % 64);
    }

    /// Whether bit `bit` (mod 512) is set.
    pub fn bit(&self, bit: usize) -> bool {
        let b = bit % HEATMAP_BITS;
        self.words[b / 64] & (1u64 << (b % 64)) != 0
    }

    /// Clear every bit (the start of an epoch).
    pub fn clear(&mut self) {
        self.words = [0; WORDS];
    }

    /// Number of set bits (an estimate, from below, of the distinct pages executed).
    pub fn popcount(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }

    /// Whether no bit is set.
    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|&w| w == 0)
    }

    /// The paper's overlap: the Hamming weight of `self AND other`.
    pub fn overlap(&self, other: &Self) -> u32 {
        self.words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| (a & b).count_ones())
            .sum()
    }

    /// Add `other`'s bits to this map.
    pub fn union_with(&mut self, other: &Self) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    /// The set bits, ascending.
    pub fn bits(&self) -> impl Iterator<Item = usize> + '_ {
        (0..HEATMAP_BITS).filter(move |&b| self.bit(b))
    }

    /// The map as 128 hex digits, bit 511 first (for logs and JSON).
    pub fn to_hex(&self) -> String {
        self.words
            .iter()
            .rev()
            .map(|w| format!("{w:016x}"))
            .collect()
    }
}

/// The per-epoch overlap table: for each SuperFunction type, the overlap with every other type,
/// and the other types ranked from most to least overlapping (ties by index, so the ranking is
/// deterministic).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OverlapTable {
    /// `overlap[i][j]` = popcount(map_i AND map_j); the diagonal is each map's popcount.
    pub overlap: Vec<Vec<u32>>,
    /// `ranked[i]` = the other types `j` with a non-zero overlap, most overlapping first.
    pub ranked: Vec<Vec<usize>>,
}

impl OverlapTable {
    /// The table of `maps` (one per type, indexed like the types).
    pub fn build(maps: &[PageHeatmap]) -> Self {
        let n = maps.len();
        let overlap: Vec<Vec<u32>> = (0..n)
            .map(|i| (0..n).map(|j| maps[i].overlap(&maps[j])).collect())
            .collect();
        let ranked = (0..n)
            .map(|i| {
                let mut others: Vec<usize> =
                    (0..n).filter(|&j| j != i && overlap[i][j] > 0).collect();
                others.sort_by(|&a, &b| overlap[i][b].cmp(&overlap[i][a]).then(a.cmp(&b)));
                others
            })
            .collect();
        Self { overlap, ranked }
    }

    /// Overlap of types `i` and `j` (0 when out of range).
    pub fn get(&self, i: usize, j: usize) -> u32 {
        self.overlap
            .get(i)
            .and_then(|r| r.get(j))
            .copied()
            .unwrap_or(0)
    }

    /// The types ranked by overlap with `i` (empty when out of range).
    pub fn ranked(&self, i: usize) -> &[usize] {
        self.ranked.get(i).map_or(&[], |r| r.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_matches_hand_computed_vectors() {
        // x = 0 -> 0.
        assert_eq!(page_index(0), 0);
        // x = 511 -> 511 (all shifts are 0).
        assert_eq!(page_index(511), 511);
        // x = 512 = 2^9: 512 + 1 = 513 -> 513 mod 512 = 1.
        assert_eq!(page_index(512), 1);
        // x = 1000: 1000>>9 = 1; 1001 mod 512 = 489.
        assert_eq!(page_index(1000), 489);
        // x = 2^18 = 262144: x>>9 = 512, x>>18 = 1; 262144 + 512 + 1 = 262657;
        // 262657 mod 512 = 262657 - 513*512 (= 262656) = 1.
        assert_eq!(page_index(1 << 18), 1);
        // x = 0x12345 = 74565: x>>9 = 145; 74710 mod 512: 145*512 = 74240, 74710 - 74240 = 470.
        assert_eq!(page_index(0x12345), 470);
        // x = 2^45: shifts give 2^36, 2^27, 2^18, 2^9, 1; every term but the last is a multiple
        // of 512 -> 1.
        assert_eq!(page_index(1 << 45), 1);
        // x = 2^45 + 2^44: x>>45 = 1, x>>36 = 2^9 + 2^8, x>>27 = 2^18 + 2^17, ... only the
        // 2^8 of x>>36 and the 1 of x>>45 survive mod 512 -> 256 + 1 = 257.
        assert_eq!(page_index((1 << 45) | (1 << 44)), 257);
        // u64::MAX: wrapping sum; each term is 2^k - 1 for k = 64, 55, 46, 37, 28, 19, each
        // = 511 mod 512, so 6 * 511 = 3066 mod 512 = 3066 - 5*512 = 506.
        assert_eq!(page_index(u64::MAX), 506);
    }

    #[test]
    fn addresses_map_through_their_4k_page() {
        let mut a = PageHeatmap::new();
        // 0x0040_1234 is in page 0x401 = 1025: 1025 + 2 = 1027 mod 512 = 3.
        a.insert_addr(0x0040_1234);
        assert_eq!(a.bits().collect::<Vec<_>>(), vec![3]);
        assert_eq!(a.popcount(), 1);
    }

    #[test]
    fn overlap_is_popcount_of_and() {
        // The paper's slide 11 idea: A = {1, 7, 13}, B = {0, 5, 6, 7, 13} -> common {7, 13} = 2.
        let mut a = PageHeatmap::new();
        let mut b = PageHeatmap::new();
        for bit in [1, 7, 13] {
            a.set_bit(bit);
        }
        for bit in [0, 5, 6, 7, 13] {
            b.set_bit(bit);
        }
        assert_eq!(a.overlap(&b), 2);
        assert_eq!(b.overlap(&a), 2);
        assert_eq!(a.overlap(&a), 3);
        // Bits in different words: 63, 64, 511.
        let mut c = PageHeatmap::new();
        let mut d = PageHeatmap::new();
        for bit in [63, 64, 511] {
            c.set_bit(bit);
            d.set_bit(bit);
        }
        d.set_bit(200);
        assert_eq!(c.overlap(&d), 3);
        assert_eq!(d.popcount(), 4);
        // Two pages colliding on one bit (5 and 512 + 4 = 516 -> 516 + 1 = 517 mod 512 = 5)
        // count once: a Bloom filter undercounts.
        let mut e = PageHeatmap::new();
        e.insert_page(5);
        e.insert_page(516);
        assert_eq!(e.popcount(), 1);
    }

    #[test]
    fn clear_resets_an_epoch_and_union_merges() {
        let mut a = PageHeatmap::new();
        a.set_bit(10);
        let mut b = PageHeatmap::new();
        b.set_bit(300);
        a.union_with(&b);
        assert_eq!(a.bits().collect::<Vec<_>>(), vec![10, 300]);
        assert!(a.bit(300) && !a.bit(301));
        a.clear();
        assert!(a.is_empty());
        assert_eq!(a.popcount(), 0);
    }

    #[test]
    fn hex_puts_bit_511_first() {
        let mut a = PageHeatmap::new();
        a.set_bit(0);
        a.set_bit(511);
        let h = a.to_hex();
        assert_eq!(h.len(), 128);
        assert!(h.starts_with("8000"));
        assert!(h.ends_with("0001"));
    }

    #[test]
    fn overlap_table_ranks_the_paper_example() {
        // Slide 18: overlap(A,B) = 3, overlap(A,C) = 1, overlap(B,C) = 2.
        // A = {0,1,2,3}, B = {0,1,2,4,5}, C = {3,4,5}: A&B = {0,1,2} = 3, A&C = {3} = 1,
        // B&C = {4,5} = 2.
        let map = |bits: &[usize]| {
            let mut m = PageHeatmap::new();
            for &b in bits {
                m.set_bit(b);
            }
            m
        };
        let t = OverlapTable::build(&[map(&[0, 1, 2, 3]), map(&[0, 1, 2, 4, 5]), map(&[3, 4, 5])]);
        assert_eq!(t.overlap, vec![vec![4, 3, 1], vec![3, 5, 2], vec![1, 2, 3]]);
        assert_eq!(t.ranked(0), &[1, 2]);
        assert_eq!(t.ranked(1), &[0, 2]);
        assert_eq!(t.ranked(2), &[1, 0]);
        assert_eq!(t.get(0, 9), 0);
        assert!(t.ranked(9).is_empty());
        // No overlap -> not ranked.
        let t = OverlapTable::build(&[map(&[1]), map(&[2])]);
        assert!(t.ranked(0).is_empty());
    }
}
