//! A benchmark laid out in (simulated) physical memory: every SuperFunction type's code lines,
//! grouped by 4 KiB page, its shared data and lock lines, and each thread's private data and
//! user buffer. The layout is fixed per benchmark (it does not depend on the run's seed): which
//! pages of a module a handler runs is drawn once from a constant seed, so `read` and `pread`
//! share some pages of `vfs` and `filemap` and not others, as real handlers do.

use super::workload::{self, Benchmark, Device, SfKind};
use super::SimError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Lines per 4 KiB page.
pub const LINES_PER_PAGE: u64 = 64;
/// Lines of a code page that hot paths use (kernel code is not dense: error paths, other
/// cases; 12 of 64 makes a system call's footprint 10-25 KB). An estimate.
pub const HOT_LINES_PER_PAGE: u64 = 12;
/// Physical page number of the first simulated page (1 MiB), for the heatmap hash.
pub const PAGE_BASE: u64 = 0x100;
/// Lines of each thread's user buffer.
pub const BUFFER_LINES: u64 = 64;

/// One SuperFunction type as laid out.
#[derive(Clone, Debug)]
pub struct SfType {
    /// `app:NAME`, a system call's name, `irq:...` or `bh:...`.
    pub name: String,
    /// Kind.
    pub kind: SfKind,
    /// Hot code lines in execution order (page by page).
    pub code: Vec<u64>,
    /// Distinct code pages (physical page numbers).
    pub pages: Vec<u64>,
    /// Read-mostly shared data lines.
    pub shared: Vec<u64>,
    /// Lock lines (written by every invocation).
    pub locks: Vec<u64>,
    /// Mean instructions per invocation.
    pub instructions: f64,
    /// User-buffer lines touched per invocation.
    pub copy_lines: u32,
    /// Whether it writes the user buffer.
    pub writes_buffer: bool,
    /// Never-seen data lines per invocation (handlers) ...
    pub stream_lines: u32,
    /// ... or per 1000 instructions (the application).
    pub stream_per_kinstr: f64,
}

/// A system call of the benchmark's mix.
#[derive(Clone, Copy, Debug)]
pub struct MixEntry {
    /// Its type index.
    pub ty: u16,
    /// Cumulative probability (the mix is drawn by one uniform number).
    pub cumulative: f64,
    /// Probability that it blocks.
    pub block_prob: f64,
    /// The device it blocks on.
    pub device: Option<Device>,
}

/// The laid-out benchmark.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The benchmark's name.
    pub name: &'static str,
    /// Every type; index 0 is the application.
    pub types: Vec<SfType>,
    /// The system-call mix.
    pub mix: Vec<MixEntry>,
    /// `irq:disk`, `bh:block`, `irq:net`, `bh:net_rx` type indices.
    pub disk: (u16, u16),
    /// See `disk`.
    pub net: (u16, u16),
    /// Threads.
    pub threads: u32,
    /// First line of the threads' private data (`private_lines` per thread).
    pub private_base: u64,
    /// Private lines per thread.
    pub private_lines: u64,
    /// First line of the threads' buffers ([`BUFFER_LINES`] per thread).
    pub buffer_base: u64,
    /// Lines laid out (every id below this is versioned; streaming lines lie above).
    pub lines: u64,
    /// Mean application segment, instructions (derived from the OS share).
    pub app_instructions: f64,
    /// Mean device latency, µs.
    pub block_us: f64,
    /// The benchmark's stated or estimated OS share (the target of `app_instructions`).
    pub os_share: f64,
}

/// Hands out pages.
struct Alloc {
    next_page: u64,
}

impl Alloc {
    fn pages(&mut self, n: u64) -> u64 {
        let p = self.next_page;
        self.next_page += n;
        p
    }
}

/// Hot lines of code page `p` (a run of [`HOT_LINES_PER_PAGE`] at a page-dependent offset).
fn hot_lines(p: u64) -> impl Iterator<Item = u64> {
    // A hashed offset: hot code sits anywhere in a page, so pages spread over the cache sets.
    let off = (p.wrapping_mul(0x9e37_79b9) >> 7) % (LINES_PER_PAGE - HOT_LINES_PER_PAGE);
    (0..HOT_LINES_PER_PAGE).map(move |k| p * LINES_PER_PAGE + off + k)
}

/// A stable 64-bit hash of a name (FNV-1a), to seed per-handler choices.
fn name_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

impl Layout {
    /// Lay out `b`.
    pub fn build(b: &Benchmark) -> Result<Self, SimError> {
        let mut alloc = Alloc { next_page: 0 };
        // Kernel modules: code pages, then data pages.
        let mods: Vec<(u64, u32, u64, u32, u32)> = workload::MODULES
            .iter()
            .map(|&(_, code, data, locks)| {
                let cp = alloc.pages(code as u64);
                let dp = alloc.pages((data as u64 + locks as u64).div_ceil(LINES_PER_PAGE));
                (cp, code, dp, data, locks)
            })
            .collect();
        let app = b.app;
        let app_code = alloc.pages(app.code_pages as u64);
        let app_shared = alloc.pages((app.shared_lines as u64).div_ceil(LINES_PER_PAGE));
        let private_lines = app.private_lines as u64;
        let private_base = alloc.pages((private_lines * b.threads as u64).div_ceil(LINES_PER_PAGE))
            * LINES_PER_PAGE;
        let buffer_base =
            alloc.pages(BUFFER_LINES * b.threads as u64 / LINES_PER_PAGE + 1) * LINES_PER_PAGE;
        let lines = alloc.next_page * LINES_PER_PAGE;

        let mut types = vec![SfType {
            name: format!("app:{}", app.name),
            kind: SfKind::App,
            code: (app_code..app_code + app.code_pages as u64)
                .flat_map(hot_lines)
                .collect(),
            pages: (app_code..app_code + app.code_pages as u64)
                .map(|p| p + PAGE_BASE)
                .collect(),
            shared: (0..app.shared_lines as u64)
                .map(|k| app_shared * LINES_PER_PAGE + k)
                .collect(),
            locks: Vec::new(),
            instructions: 0.0, // set below from the OS share
            copy_lines: 0,
            writes_buffer: true,
            stream_lines: 0,
            stream_per_kinstr: app.stream_per_kinstr,
        }];
        let index = |name: &str, types: &mut Vec<SfType>| -> Result<u16, SimError> {
            if let Some(i) = types.iter().position(|t| t.name == name) {
                return Ok(i as u16);
            }
            let hd = workload::handler(name)?;
            let mut rng = ChaCha8Rng::seed_from_u64(name_hash(hd.name));
            let (mut code, mut pages, mut shared, mut locks) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for &(m, frac) in hd.modules {
                let (mi, ..) = workload::module(m)?;
                let (cp, ncode, dp, ndata, nlocks) = mods[mi];
                for p in cp..cp + ncode as u64 {
                    if rng.gen::<f64>() < frac {
                        code.extend(hot_lines(p));
                        pages.push(p + PAGE_BASE);
                    }
                }
                let d0 = dp * LINES_PER_PAGE;
                for k in 0..ndata as u64 {
                    if rng.gen::<f64>() < frac {
                        shared.push(d0 + k);
                    }
                }
                // A handler that runs a real share of a module takes its locks.
                if frac >= 0.3 {
                    locks.extend((0..nlocks as u64).map(|k| d0 + ndata as u64 + k));
                }
            }
            types.push(SfType {
                name: hd.name.to_string(),
                kind: hd.kind,
                code,
                pages,
                shared,
                locks,
                instructions: hd.instructions,
                copy_lines: hd.copy_lines,
                writes_buffer: hd.writes_buffer,
                stream_lines: hd.stream_lines,
                stream_per_kinstr: 0.0,
            });
            Ok((types.len() - 1) as u16)
        };
        let disk = (
            index("irq:disk", &mut types)?,
            index("bh:block", &mut types)?,
        );
        let net = (
            index("irq:net", &mut types)?,
            index("bh:net_rx", &mut types)?,
        );
        let total_w: f64 = b.syscalls.iter().map(|s| s.1).sum();
        if total_w <= 0.0 || b.threads == 0 || !(b.os_share > 0.0 && b.os_share < 1.0) {
            return Err(SimError::Invalid(format!(
                "benchmark {}: needs system calls with positive weights, threads, and an OS share in (0, 1)",
                b.name
            )));
        }
        let mut mix = Vec::new();
        let mut cum = 0.0;
        // OS instructions per application segment: each call, plus when it blocks the
        // interrupt, the bottom half and the call's completion (30 % of the call again).
        let mut os_per_segment = 0.0;
        for &(name, w, p) in b.syscalls {
            let ty = index(name, &mut types)?;
            let hd = workload::handler(name)?;
            cum += w / total_w;
            mix.push(MixEntry {
                ty,
                cumulative: cum,
                block_prob: if hd.device.is_some() { p } else { 0.0 },
                device: hd.device,
            });
            let (irq, bh) = match hd.device {
                Some(Device::Disk) => disk,
                Some(Device::Net) => net,
                None => (0, 0),
            };
            let blocked = if hd.device.is_some() {
                p * (types[irq as usize].instructions
                    + types[bh as usize].instructions
                    + 0.3 * hd.instructions)
            } else {
                0.0
            };
            os_per_segment += w / total_w * (hd.instructions + blocked);
        }
        if let Some(last) = mix.last_mut() {
            last.cumulative = 1.0;
        }
        let app_instructions = os_per_segment * (1.0 - b.os_share) / b.os_share;
        types[0].instructions = app_instructions;
        Ok(Self {
            name: b.name,
            types,
            mix,
            disk,
            net,
            threads: b.threads,
            private_base,
            private_lines,
            buffer_base,
            lines,
            app_instructions,
            block_us: b.block_us,
            os_share: b.os_share,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_benchmark_lays_out_and_related_calls_share_pages() {
        for b in workload::BENCHMARKS {
            let l = Layout::build(b).unwrap();
            assert!(l.types.len() >= 5, "{}", b.name);
            assert!(l.app_instructions > 0.0);
            assert!(l.types.iter().all(|t| !t.code.is_empty()));
            // Code lines lie below the laid-out range and in their listed pages.
            for t in &l.types {
                assert!(t.code.iter().all(|&c| c < l.lines));
                assert!(t
                    .code
                    .iter()
                    .all(|&c| t.pages.contains(&(c / LINES_PER_PAGE + PAGE_BASE))));
            }
        }
        let l = Layout::build(workload::benchmark("FileSrv").unwrap()).unwrap();
        let pages = |n: &str| {
            let t = l.types.iter().find(|t| t.name == n).unwrap();
            t.pages.clone()
        };
        let common = |a: &[u64], b: &[u64]| a.iter().filter(|p| b.contains(p)).count();
        // pread and pwrite share entry, vfs, ext3 and filemap pages; pread and the disk IRQ
        // share none.
        assert!(common(&pages("pread"), &pages("pwrite")) >= 10);
        assert_eq!(common(&pages("pread"), &pages("irq:disk")), 0);
    }

    #[test]
    fn the_os_share_is_met_by_construction() {
        // FileSrv: 90 % OS -> the application segment is 1/9 of the OS work per segment.
        let b = workload::benchmark("filesrv").unwrap();
        let l = Layout::build(b).unwrap();
        let os: f64 = {
            let total: f64 = b.syscalls.iter().map(|s| s.1).sum();
            b.syscalls
                .iter()
                .map(|&(n, w, p)| {
                    let h = workload::handler(n).unwrap();
                    let extra = if h.device.is_some() {
                        p * (2500.0 + 4000.0 + 0.3 * h.instructions)
                    } else {
                        0.0
                    };
                    w / total * (h.instructions + extra)
                })
                .sum()
        };
        assert!((l.app_instructions - os / 9.0).abs() < 1e-6);
        assert!(workload::benchmark("nope").is_err());
    }
}
