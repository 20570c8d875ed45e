//! Counterpoint's abstract events resolved to each microarchitecture's own events.
//!
//! Three names have no generic perf event with one meaning across vendors: `mem-transactions`
//! (cache lines moved between the last-level cache and memory: Zhang's bus transactions),
//! `fp-ops` (floating-point operations retired) and `llc-misses` (last-level cache misses, which
//! the generic `cache-misses` only means on Intel). [`ALIASES`] maps them, per
//! microarchitecture, to a vendor event; the microarchitecture comes from sysfs
//! (`bus/event_source/devices/<cpu PMU>/caps/pmu_name`, which Intel kernels fill) or, where sysfs
//! does not say (AMD), from the CPU family and model in `/proc/cpuinfo`. Encodings are those of
//! Linux perf's pmu-events tables (`tools/perf/pmu-events/arch/x86/*`). A name with no row for the
//! machine is plainly unavailable, with the reason.

use crate::pmu::PmuTree;
use std::path::PathBuf;

/// Memory-bus transactions (see [`counterpoint_core::event::MEM_TRANSACTIONS`]).
pub const MEM_TRANSACTIONS: &str = counterpoint_core::event::MEM_TRANSACTIONS;
/// Floating-point operations retired (see [`counterpoint_core::event::FP_OPS`]).
pub const FP_OPS: &str = counterpoint_core::event::FP_OPS;
/// Last-level cache misses by the vendor's own LLC-miss event.
pub const LLC_MISSES: &str = counterpoint_core::event::LLC_MISSES;

/// The abstract names this module resolves.
pub const ABSTRACT: [&str; 3] = [MEM_TRANSACTIONS, FP_OPS, LLC_MISSES];

/// A microarchitecture family with one set of encodings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Micro {
    /// Intel Nehalem and Westmere (`pmu_name` nehalem, westmere).
    IntelNehalem,
    /// Intel Sandy Bridge and Ivy Bridge.
    IntelSandyBridge,
    /// Intel Haswell: no floating-point arithmetic counter at all.
    IntelHaswell,
    /// Intel Broadwell (first with `FP_ARITH_INST_RETIRED`, no 512-bit forms).
    IntelBroadwell,
    /// Intel Skylake and later big cores (Skylake-X, Ice Lake, Sapphire Rapids, hybrid P-cores).
    IntelSkylake,
    /// AMD family 17h models 00h-2Fh (Zen, Zen+).
    AmdZen1,
    /// AMD family 17h, later models (Zen 2).
    AmdZen2,
    /// AMD family 19h models 00h-0Fh and 20h-5Fh (Zen 3).
    AmdZen3,
    /// AMD family 19h, other models (Zen 4).
    AmdZen4,
    /// AMD family 1Ah (Zen 5).
    AmdZen5,
}

/// One row: on `micro`, `name` is counted by `event` (perf syntax on the core PMU, which
/// [`resolve`] puts in front) as a proxy for what `why` says.
pub struct Alias {
    /// The microarchitecture family the row is for.
    pub micro: Micro,
    /// The abstract name ([`MEM_TRANSACTIONS`], [`FP_OPS`], [`LLC_MISSES`]).
    pub name: &'static str,
    /// `event=0x..,umask=0x..` terms for the core PMU.
    pub terms: &'static str,
    /// The vendor's name for the event.
    pub vendor_event: &'static str,
    /// What the counter is a proxy for, and how good a proxy.
    pub why: &'static str,
}

/// The table. Intel's `LONGEST_LAT_CACHE.MISS` (event 0x2e, umask 0x41) is architectural: the
/// same on every Intel core since Nehalem.
pub const ALIASES: &[Alias] = &[
    // --- Intel Nehalem / Westmere ---
    Alias { micro: Micro::IntelNehalem, name: MEM_TRANSACTIONS, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "each LLC miss fetches a line over the memory bus (demand, RFO, code, L1 prefetch; not L2 prefetches or writebacks)" },
    Alias { micro: Micro::IntelNehalem, name: LLC_MISSES, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "cacheable requests that miss the L3" },
    Alias { micro: Micro::IntelNehalem, name: FP_OPS, terms: "event=0x10,umask=0x04", vendor_event: "FP_COMP_OPS_EXE.SSE_FP",
        why: "SSE floating-point uops executed (speculative; x87 not included)" },
    // --- Intel Sandy Bridge / Ivy Bridge ---
    Alias { micro: Micro::IntelSandyBridge, name: MEM_TRANSACTIONS, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "each LLC miss fetches a line over the memory bus (not L2 prefetches or writebacks)" },
    Alias { micro: Micro::IntelSandyBridge, name: LLC_MISSES, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "cacheable requests that miss the L3" },
    Alias { micro: Micro::IntelSandyBridge, name: FP_OPS, terms: "event=0x10,umask=0xf0", vendor_event: "FP_COMP_OPS_EXE.SSE_* (packed/scalar, single/double)",
        why: "SSE floating-point uops executed, the four SSE umask bits together (speculative; 256-bit AVX is SIMD_FP_256, not included)" },
    // --- Intel Haswell ---
    Alias { micro: Micro::IntelHaswell, name: MEM_TRANSACTIONS, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "each LLC miss fetches a line over the memory bus (not L2 prefetches or writebacks)" },
    Alias { micro: Micro::IntelHaswell, name: LLC_MISSES, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "cacheable requests that miss the L3" },
    // --- Intel Broadwell ---
    Alias { micro: Micro::IntelBroadwell, name: MEM_TRANSACTIONS, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "each LLC miss fetches a line over the memory bus (not L2 prefetches or writebacks)" },
    Alias { micro: Micro::IntelBroadwell, name: LLC_MISSES, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "cacheable requests that miss the L3" },
    Alias { micro: Micro::IntelBroadwell, name: FP_OPS, terms: "event=0xc7,umask=0x3f", vendor_event: "FP_ARITH_INST_RETIRED.{SCALAR,128B_PACKED,256B_PACKED}_{SINGLE,DOUBLE}",
        why: "floating-point arithmetic instructions retired, every width (one per instruction, not per lane)" },
    // --- Intel Skylake and later ---
    Alias { micro: Micro::IntelSkylake, name: MEM_TRANSACTIONS, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "each LLC miss fetches a line over the memory bus (not L2 prefetches or writebacks)" },
    Alias { micro: Micro::IntelSkylake, name: LLC_MISSES, terms: "event=0x2e,umask=0x41", vendor_event: "LONGEST_LAT_CACHE.MISS",
        why: "cacheable requests that miss the L3" },
    Alias { micro: Micro::IntelSkylake, name: FP_OPS, terms: "event=0xc7,umask=0xff", vendor_event: "FP_ARITH_INST_RETIRED.* (scalar to 512-bit, single and double)",
        why: "floating-point arithmetic instructions retired, every width (one per instruction, not per lane)" },
    // --- AMD Zen 1 / Zen 2 (family 17h): ls_refills_from_sys, event 0x43 ---
    Alias { micro: Micro::AmdZen1, name: MEM_TRANSACTIONS, terms: "event=0x43,umask=0x48", vendor_event: "ls_refills_from_sys.ls_mabresp_{lcl,rmt}_dram",
        why: "demand data-cache fills from local (0x08) or remote (0x40) DRAM or IO: lines brought from memory" },
    Alias { micro: Micro::AmdZen1, name: LLC_MISSES, terms: "event=0x43,umask=0x58", vendor_event: "ls_refills_from_sys.ls_mabresp_{lcl_dram,rmt_cache,rmt_dram}",
        why: "demand fills from beyond this CCX's L3 (DRAM or another die's cache): L3 misses of demand loads" },
    Alias { micro: Micro::AmdZen1, name: FP_OPS, terms: "event=0x03,umask=0xff", vendor_event: "fp_ret_sse_avx_ops.all",
        why: "retired SSE/AVX FLOPs (multiply-add counts 2)" },
    Alias { micro: Micro::AmdZen2, name: MEM_TRANSACTIONS, terms: "event=0x43,umask=0x48", vendor_event: "ls_refills_from_sys.ls_mabresp_{lcl,rmt}_dram",
        why: "demand data-cache fills from local (0x08) or remote (0x40) DRAM or IO: lines brought from memory" },
    Alias { micro: Micro::AmdZen2, name: LLC_MISSES, terms: "event=0x43,umask=0x58", vendor_event: "ls_refills_from_sys.ls_mabresp_{lcl_dram,rmt_cache,rmt_dram}",
        why: "demand fills from beyond this CCX's L3 (DRAM or another die's cache): L3 misses of demand loads" },
    Alias { micro: Micro::AmdZen2, name: FP_OPS, terms: "event=0x03,umask=0xff", vendor_event: "fp_ret_sse_avx_ops.all",
        why: "retired SSE/AVX FLOPs (multiply-add counts 2)" },
    // --- AMD Zen 3 (family 19h): ls_dmnd_fills_from_sys, event 0x43 ---
    Alias { micro: Micro::AmdZen3, name: MEM_TRANSACTIONS, terms: "event=0x43,umask=0x48", vendor_event: "ls_dmnd_fills_from_sys.mem_io_{local,remote}",
        why: "demand data-cache fills from DRAM or IO in this (0x08) or another (0x40) node" },
    Alias { micro: Micro::AmdZen3, name: LLC_MISSES, terms: "event=0x43,umask=0x5c", vendor_event: "ls_dmnd_fills_from_sys.{ext_cache_local,mem_io_local,ext_cache_remote,mem_io_remote}",
        why: "demand fills from beyond this CCX's L3: L3 misses of demand loads" },
    Alias { micro: Micro::AmdZen3, name: FP_OPS, terms: "event=0x03,umask=0xff", vendor_event: "fp_ret_sse_avx_ops.all",
        why: "retired SSE/AVX FLOPs (multiply-add counts 2)" },
    // --- AMD Zen 4 (family 19h) and Zen 5 (family 1Ah): dram_io_near/far, event 0x43 ---
    Alias { micro: Micro::AmdZen4, name: MEM_TRANSACTIONS, terms: "event=0x43,umask=0x48", vendor_event: "ls_dmnd_fills_from_sys.dram_io_{near,far}",
        why: "demand data-cache fills from DRAM or MMIO in this (0x08) or another (0x40) NUMA node" },
    Alias { micro: Micro::AmdZen4, name: LLC_MISSES, terms: "event=0x43,umask=0x5c", vendor_event: "ls_dmnd_fills_from_sys.{near_cache,dram_io_near,far_cache,dram_io_far}",
        why: "demand fills from beyond this CCX's L3: L3 misses of demand loads" },
    Alias { micro: Micro::AmdZen4, name: FP_OPS, terms: "event=0x03,umask=0x1f", vendor_event: "fp_ret_sse_avx_ops.all",
        why: "retired SSE/AVX FLOPs including bfloat16 multiply-accumulate (each MAC counts 2)" },
    Alias { micro: Micro::AmdZen5, name: MEM_TRANSACTIONS, terms: "event=0x43,umask=0x48", vendor_event: "ls_dmnd_fills_from_sys.dram_io_{near,far}",
        why: "demand data-cache fills from DRAM or MMIO in this (0x08) or another (0x40) NUMA node" },
    Alias { micro: Micro::AmdZen5, name: LLC_MISSES, terms: "event=0x43,umask=0x5c", vendor_event: "ls_dmnd_fills_from_sys.{near_cache,dram_io_near,far_cache,dram_io_far}",
        why: "demand fills from beyond this CCX's L3: L3 misses of demand loads" },
    Alias { micro: Micro::AmdZen5, name: FP_OPS, terms: "event=0x03,umask=0x0f", vendor_event: "fp_ret_sse_avx_ops.all",
        why: "retired SSE/AVX FLOPs of all types (each MAC counts 2)" },
];

/// Where the machine says what it is: the core PMU's name in the tree, and `pmu_name`/cpuinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MachineId {
    /// The core PMU to put the event on (`cpu`, or `cpu_core` on hybrid Intel).
    pub pmu: String,
    /// The family of encodings, when the table knows this CPU.
    pub micro: Option<Micro>,
    /// What was read, for messages (`pmu_name haswell`, `AMD family 25 model 0x61`).
    pub seen: String,
}

/// `caps/pmu_name` (as Linux's intel PMU driver names them) to a family of encodings.
pub fn intel_micro(pmu_name: &str) -> Option<Micro> {
    Some(match pmu_name {
        "nehalem" | "westmere" => Micro::IntelNehalem,
        "sandybridge" | "ivybridge" => Micro::IntelSandyBridge,
        "haswell" => Micro::IntelHaswell,
        "broadwell" => Micro::IntelBroadwell,
        "skylake" | "icelake" | "sapphire_rapids" | "granite_rapids" | "alderlake_hybrid"
        | "meteorlake_hybrid" | "lunarlake_hybrid" | "arrowlake_hybrid" => Micro::IntelSkylake,
        _ => return None,
    })
}

/// AMD family and model (decimal family as cpuinfo prints it) to a Zen generation, as perf's
/// `mapfile.csv` splits them.
pub fn amd_micro(family: u32, model: u32) -> Option<Micro> {
    Some(match family {
        0x17 if model <= 0x2f => Micro::AmdZen1,
        0x17 => Micro::AmdZen2,
        0x19 if model <= 0x0f || (0x20..=0x5f).contains(&model) => Micro::AmdZen3,
        0x19 => Micro::AmdZen4,
        0x1a => Micro::AmdZen5,
        _ => return None,
    })
}

/// `(vendor_id, cpu family, model)` of the first processor in cpuinfo text.
pub fn parse_cpuinfo(text: &str) -> Option<(String, u32, u32)> {
    let mut vendor = None;
    let mut family = None;
    let mut model = None;
    for line in text.lines() {
        if line.trim().is_empty() && vendor.is_some() {
            break;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        match k {
            "vendor_id" => vendor = Some(v.to_string()),
            "cpu family" => family = v.parse().ok(),
            "model" => model = v.parse().ok(),
            _ => {}
        }
    }
    Some((vendor?, family?, model?))
}

/// Where cpuinfo is for a tree: a `cpuinfo` file at the tree's root (fixtures), else
/// `/proc/cpuinfo` for the live `/sys`.
fn cpuinfo_path(tree: &PmuTree) -> Option<PathBuf> {
    let fixture = tree.root().join("cpuinfo");
    if fixture.exists() {
        return Some(fixture);
    }
    (tree.root() == std::path::Path::new("/sys")).then(|| PathBuf::from("/proc/cpuinfo"))
}

/// What this machine is, from the tree (and cpuinfo when sysfs does not say).
pub fn identify(tree: &PmuTree) -> Option<MachineId> {
    let pmus = tree.list();
    let pmu = ["cpu_core", "cpu"]
        .into_iter()
        .find(|p| pmus.iter().any(|x| x == p))?
        .to_string();
    let caps = tree
        .root()
        .join("bus/event_source/devices")
        .join(&pmu)
        .join("caps/pmu_name");
    if let Ok(name) = std::fs::read_to_string(&caps) {
        let name = name.trim().to_string();
        return Some(MachineId {
            micro: intel_micro(&name),
            seen: format!("pmu_name {name}"),
            pmu,
        });
    }
    let text = cpuinfo_path(tree).and_then(|p| std::fs::read_to_string(p).ok());
    match text.as_deref().and_then(parse_cpuinfo) {
        Some((vendor, family, model)) => Some(MachineId {
            micro: if vendor == "AuthenticAMD" || vendor == "HygonGenuine" {
                amd_micro(family, model)
            } else {
                None
            },
            seen: format!("{vendor} family {family:#x} model {model:#x}"),
            pmu,
        }),
        None => Some(MachineId {
            micro: None,
            seen: "no caps/pmu_name and no cpuinfo".into(),
            pmu,
        }),
    }
}

/// The row for `name` on `micro`.
pub fn lookup(micro: Micro, name: &str) -> Option<&'static Alias> {
    ALIASES.iter().find(|a| a.micro == micro && a.name == name)
}

/// `name` as a perf event on this machine (`cpu/event=0x2e,umask=0x41/`), or why it has none.
pub fn resolve(name: &str, tree: &PmuTree) -> Result<(String, &'static Alias), String> {
    let Some(id) = identify(tree) else {
        return Err("no hardware PMU on this machine".into());
    };
    let Some(micro) = id.micro else {
        return Err(format!(
            "no vendor event for this CPU ({}) in the alias table",
            id.seen
        ));
    };
    match lookup(micro, name) {
        Some(a) => Ok((format!("{}/{}/", id.pmu, a.terms), a)),
        None => Err(format!("the {micro:?} PMU has no such event ({})", id.seen)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_micro_has_memory_and_llc_rows_and_fp_where_the_pmu_has_one() {
        use Micro::*;
        for m in [
            IntelNehalem,
            IntelSandyBridge,
            IntelHaswell,
            IntelBroadwell,
            IntelSkylake,
            AmdZen1,
            AmdZen2,
            AmdZen3,
            AmdZen4,
            AmdZen5,
        ] {
            assert!(lookup(m, MEM_TRANSACTIONS).is_some(), "{m:?}");
            assert!(lookup(m, LLC_MISSES).is_some(), "{m:?}");
            assert_eq!(lookup(m, FP_OPS).is_some(), m != IntelHaswell, "{m:?}");
        }
        // One row per (micro, name).
        for (i, a) in ALIASES.iter().enumerate() {
            assert!(!a.why.is_empty() && !a.vendor_event.is_empty());
            assert!(ALIASES[..i]
                .iter()
                .all(|b| (b.micro, b.name) != (a.micro, a.name)));
        }
    }

    #[test]
    fn amd_generations_follow_perfs_mapfile() {
        assert_eq!(amd_micro(23, 0x01), Some(Micro::AmdZen1));
        assert_eq!(amd_micro(23, 0x08), Some(Micro::AmdZen1));
        assert_eq!(amd_micro(23, 0x31), Some(Micro::AmdZen2));
        assert_eq!(amd_micro(23, 0x71), Some(Micro::AmdZen2));
        assert_eq!(amd_micro(25, 0x01), Some(Micro::AmdZen3));
        assert_eq!(amd_micro(25, 0x21), Some(Micro::AmdZen3));
        assert_eq!(amd_micro(25, 0x11), Some(Micro::AmdZen4));
        assert_eq!(amd_micro(25, 0x61), Some(Micro::AmdZen4));
        assert_eq!(amd_micro(26, 0x02), Some(Micro::AmdZen5));
        assert_eq!(amd_micro(21, 0x02), None);
    }

    #[test]
    fn cpuinfo_first_processor() {
        let text = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 97\n\nprocessor\t: 1\n";
        assert_eq!(
            parse_cpuinfo(text),
            Some(("AuthenticAMD".to_string(), 25, 97))
        );
        assert_eq!(parse_cpuinfo("garbage"), None);
    }
}
