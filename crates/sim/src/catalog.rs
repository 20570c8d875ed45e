//! The one catalog: named program profiles, servers and machines.
//!
//! Every experiment takes its programs and machines from here, so what a policy achieves on the
//! calibrated baseline is a prediction, not a fit. The source of each parameter is documented
//! in `docs/sim-catalog.md`; values marked calibrated there were chosen once, for the baseline
//! scheduler only (see `docs/calibration.md`).

use crate::spec::{
    LlcSharing, MachineSpec, MemoryKind, MissCurve, Model, Phase, PhysicsV2, Profile, ProfileV2,
    Program, RequestClass, Server, SmtSpec,
};
use std::collections::BTreeMap;

/// Named programs, servers and machines.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    programs: BTreeMap<String, Program>,
    servers: BTreeMap<String, Server>,
    machines: BTreeMap<String, MachineSpec>,
}

const KB: f64 = 1024.0;
const MB: f64 = 1024.0 * 1024.0;

/// SPEC CPU2000 programs: (name, instructions in 10^9, cpi_core, llc_apki, m_ref at 512 KB,
/// alpha, m_min, mlp, fp_fraction). Rows marked `cal` were fitted once by the calibration
/// (docs/calibration.md); the others are estimates from published characterizations
/// (docs/sim-catalog.md). Instruction counts of gzip, mesa and parser make their solo times on
/// `masa-2x2ht` match MASA's (171.5, 134.2 and 246 s); those of the other programs in MASA's
/// shells make every shell last about 1085 s alone (the paper sizes Shell_FP, 7 x mesa, and
/// Shell_L2C, 5 x parser, "to have the same duration as the other shells").
#[rustfmt::skip]
type SpecRow = (&'static str, f64, f64, f64, f64, f64, f64, f64, f64);
#[rustfmt::skip]
const SPEC: &[SpecRow] = &[
    // CINT2000
    ("gzip",     GZIP_GI,   0.6959,  3.505, 0.08,   0.5,    0.01, 1.5,   0.0),    // cal
    ("gcc",      259.2,     1.0,    12.0,   0.20,   0.5,    0.02, 1.5,   0.0),
    ("crafty",   439.7,     0.8,     4.0,   0.05,   0.5,    0.01, 1.5,   0.0),
    ("eon",      402.3,     0.9,     2.0,   0.03,   0.5,    0.01, 1.5,   0.25),
    ("gap",      274.6,     0.9,    10.0,   0.25,   0.4,    0.03, 1.5,   0.0),
    ("bzip2",    332.4,     0.9,     8.0,   0.15,   0.5,    0.02, 1.5,   0.0),
    ("vpr",      196.5,     1.1,    14.0,   0.25,   0.5,    0.03, 1.5,   0.0),
    ("mcf",       38.3,     1.2,    70.0,   0.70,   0.3,    0.20, 2.0,   0.0),
    ("parser",   PARSER_GI, 0.5389,  9.641, 0.2466, 0.8951, 0.03, 1.5,   0.0),    // cal
    ("perlbmk",  354.1,     0.9,     5.0,   0.06,   0.5,    0.01, 1.5,   0.0),
    ("vortex",   285.6,     0.95,    9.0,   0.15,   0.5,    0.02, 1.5,   0.0),
    ("twolf",    136.4,     1.2,    20.0,   0.35,   0.6,    0.03, 1.5,   0.0),
    // CFP2000
    ("wupwise",  60.0,     0.9,    30.0,   0.95,   0.3,    0.10, 2.0,   0.40),   // cal
    ("swim",     150.0,     0.8,    51.64,  0.90,   0.1,    0.60, 5.926, 0.45),   // cal
    ("mgrid",    131.7,     0.8,    25.0,   0.60,   0.2,    0.30, 3.0,   0.50),
    ("mesa",     MESA_GI,   0.8395,  7.019, 0.06,   0.5,    0.01, 1.5,   0.4383), // cal
    ("art",       58.4,     1.0,    80.0,   0.7492, 0.5,    0.15, 5.86,  0.30),   // cal
    ("facerec",  182.0,     0.9,    15.0,   0.40,   0.4,    0.10, 2.0,   0.40),
    ("lucas",    115.6,     0.85,   25.0,   0.70,   0.1,    0.50, 3.0,   0.50),
    ("sixtrack", 344.9,     0.9,     2.0,   0.05,   0.5,    0.01, 1.5,   0.50),
];
/// Second-model rows (docs/sim-catalog.md, "Model v2", has the source of each column):
/// (name, base_cpi, branch_mpki, fp_dep_cycles, llc_apki, floor, working sets as (KB,
/// fraction of LLC accesses), demand mlp, writeback_fraction, stream_fraction, streams).
/// Every knee uses `KNEE_SHARPNESS`. `mlp` is the overlap out-of-order execution finds
/// without prefetching (pointer chasing about 1.2, independent array loads 1.5-3); the
/// machine's prefetcher adds to it for the stream share of the misses
/// (`ProfileV2::effective_mlp`). These are the estimates (`base_cpi`: the value before session
/// 15, MASA's fitted one of session 14 for gzip, mesa and parser); [`SPEC_V2_FIT`] then sets
/// every program's core CPI from its measured CPI.
type SpecV2Row = (
    &'static str,
    f64,
    f64,
    f64,
    f64,
    f64,
    &'static [(f64, f64)],
    f64,
    f64,
    f64,
    f64,
);
#[rustfmt::skip]
const SPEC_V2: &[SpecV2Row] = &[
    // CINT2000                                                                          mlp  wb    strm  n
    ("gzip",     0.5020,      6.0, 0.0, 8.0,  0.01,  &[(192.0, 0.25)],                1.5, 0.3,  0.3,  2.0),
    ("gcc",      0.80,        6.0, 0.0, 12.0, 0.03,  &[(384.0, 0.25), (2048.0, 0.10)], 1.5, 0.3,  0.2,  2.0),
    ("crafty",   0.75,        7.0, 0.0, 5.0,  0.005, &[(256.0, 0.15)],                1.5, 0.2,  0.1,  1.0),
    ("eon",      0.80,        2.5, 0.8, 2.0,  0.005, &[(64.0, 0.20)],                 1.5, 0.2,  0.2,  2.0),
    ("gap",      0.80,        2.5, 0.0, 9.0,  0.05,  &[(1024.0, 0.25)],               2.0, 0.3,  0.2,  2.0),
    ("bzip2",    0.75,        6.5, 0.0, 8.0,  0.02,  &[(768.0, 0.20)],                1.5, 0.35, 0.3,  2.0),
    ("vpr",      0.85,        9.0, 0.0, 12.0, 0.03,  &[(1024.0, 0.30)],               1.3, 0.25, 0.1,  1.0),
    ("mcf",      0.90,        9.0, 0.0, 75.0, 0.45,  &[(512.0, 0.15), (8192.0, 0.30)], 1.2, 0.3,  0.2,  2.0),
    ("parser",   0.4037,      7.5, 0.0, 10.0, 0.02,  &[(256.0, 0.12), (1536.0, 0.10)], 1.2, 0.3,  0.1,  1.0),
    ("perlbmk",  0.80,        3.0, 0.0, 5.0,  0.01,  &[(256.0, 0.10)],                1.5, 0.25, 0.1,  1.0),
    ("vortex",   0.80,        1.5, 0.0, 9.0,  0.03,  &[(1024.0, 0.20)],               1.5, 0.3,  0.2,  2.0),
    ("twolf",    0.85,       10.0, 0.0, 18.0, 0.02,  &[(1024.0, 0.40)],               1.2, 0.25, 0.05, 1.0),
    // CFP2000
    ("wupwise",  0.75,        0.5, 1.2, 18.0, 0.25,  &[(768.0, 0.30)],                1.5, 0.35, 0.7,  4.0),
    ("swim",     0.80,        0.2, 0.8, 45.0, 0.85,  &[(256.0, 0.10)],                2.0, 0.45, 0.95, 9.0),
    ("mgrid",    0.70,        0.1, 0.6, 25.0, 0.50,  &[(256.0, 0.20)],                2.0, 0.3,  0.9,  9.0),
    ("mesa",     0.5382,      2.0, 0.6, 5.0,  0.01,  &[(128.0, 0.20)],                1.5, 0.3,  0.5,  2.0),
    ("art",      0.80,        1.0, 2.5, 60.0, 0.15,  &[(3072.0, 0.60)],               3.0, 0.15, 0.2,  2.0),
    ("facerec",  0.80,        1.5, 1.0, 12.0, 0.20,  &[(1024.0, 0.30)],               2.0, 0.3,  0.5,  3.0),
    ("lucas",    0.75,        0.1, 1.2, 22.0, 0.60,  &[(256.0, 0.10)],                2.0, 0.45, 0.4,  4.0),
    ("sixtrack", 0.75,        0.8, 1.5, 2.0,  0.01,  &[(128.0, 0.10)],                1.5, 0.2,  0.3,  2.0),
];
/// The v2 fit of each SPEC CPU2000 program (`calibrate_v2 -- --fit`, stage 0; docs/calibration.md,
/// "Session 15", refitted in "Session 16" for NetBurst's sector reads and prefetch depth): (name, `base_cpi`, share of the estimated `fp_dep_cycles` kept, scale of the
/// estimated miss curve). `base_cpi` makes the program's CPI alone on `xeon-2800` the one Weaver &
/// McKee measured on that 2.8 GHz Xeon; where `base_cpi` would fall below its floor (0.4) the
/// estimated FP dependency latency gives way first; where even that cannot give the measured
/// CPI (`paper::CLOCK_SCALING_SPLITS`), the miss curve is scaled to the program's 1.3 -> 1.7 GHz
/// speed-up on the Pentium 4 as well.
/// The lowest `base_cpi` the v2 fit gives a NetBurst program: the core retires at most three
/// uops a cycle, about 0.4 CPI for x86 code of 1.2-1.4 uops per instruction (est). Shared by
/// `calibrate_v2` and the tests that check its results.
pub const NETBURST_BASE_CPI_FLOOR: f64 = 0.4;
// Fitted numbers: one may fall near a constant such as pi/3 by chance (lucas's base).
#[allow(clippy::approx_constant)]
#[rustfmt::skip]
pub const SPEC_V2_FIT: &[(&str, f64, f64, f64)] = &[
    ("gzip", 1.1485, 1.0000, 1.0000),
    ("parser", 1.2337, 1.0000, 1.0000),
    ("mesa", 1.6509, 1.0000, 1.0000),
    ("wupwise", 0.4000, 0.3063, 0.1898),
    ("swim", 0.4254, 1.0000, 0.6672),
    ("art", 1.4790, 1.0000, 1.0000),
    ("vpr", 2.5156, 1.0000, 1.0000),
    ("gcc", 1.3169, 1.0000, 1.0000),
    ("mcf", 2.2084, 1.0000, 0.5427),
    ("crafty", 1.3201, 1.0000, 1.0000),
    ("eon", 1.2123, 1.0000, 1.0000),
    ("perlbmk", 1.1434, 1.0000, 1.0000),
    ("gap", 1.0655, 1.0000, 1.0000),
    ("vortex", 0.8243, 1.0000, 1.0000),
    ("bzip2", 1.5725, 1.0000, 1.0000),
    ("twolf", 1.3897, 1.0000, 1.0000),
    ("mgrid", 0.6095, 1.0000, 0.4475),
    ("facerec", 2.6093, 1.0000, 1.0000),
    ("lucas", 1.0471, 1.0000, 0.6023),
    ("sixtrack", 0.4000, 0.4872, 1.0000),
];
/// Steepness of every working-set knee (a smoothed LRU cliff).
const KNEE_SHARPNESS: f64 = 3.0;
/// Zhang's SMP under v2: sustained bandwidth of its 533 MT/s x 8 B front-side bus (peak
/// `ZHANG_FSB_PEAK_GB_PER_S`), fitted by `calibrate_v2 -- --fit` to the default scheduler's NP
/// and unfairness: 47 % of the peak, the lower end of its range (2.0-3.4 GB/s) since session
/// 14 dropped the row-conflict loss (docs/calibration.md); MASA's 400 MT/s bus takes the same
/// share of its peak.
const ZHANG_V2_SUSTAINED_GB_PER_S: f64 = 2.002;
const ZHANG_FSB_PEAK_GB_PER_S: f64 = 4.264;
/// Sustained bandwidth of Weaver & McKee's 2.8 GHz Xeon under v2 (est: its bus is not in the
/// files; 47 % of a 533 MT/s bus, the share Zhang's fit gives the same generation).
const XEON2800_V2_SUSTAINED_GB_PER_S: f64 = 2.0;
const MASA_FSB_PEAK_GB_PER_S: f64 = 3.2;
/// Sustained bandwidth of a Pentium 4 on the i850 with PC800 RDRAM (the `p4-1300` / `p4-1700`
/// machines under v2): The Tech Report's Sandra memory test, "a modified, more intensive
/// version of Stream", has "the RDRAM system [...] shy of 50% of its 3.2GB/s theoretical peak"
/// (techreport.com/articles.x/2843/4): about 1.5 GB/s, est from that wording (range 1.2-1.6).
const P4_I850_SUSTAINED_GB_PER_S: f64 = 1.5;
/// Share of a CPU's ticks that woken daemons and kernel threads take on an otherwise idle
/// server (est, range 0.02-1 %): a few to a few tens of wake-ups a second (journal commits
/// and write-back every 5 s, workqueues, logging, cron, an idle shell) of tens to a couple of
/// hundred microseconds each, so well under 1 % of a CPU. Only these move a Linux 2.6 O(1)
/// rotation's phase (docs/sim-catalog.md, "Model v2").
const BACKGROUND_TICK_SHARE: f64 = 0.001;
/// v2 core CPI of MASA's probes INT, FP and L2C (MASA's own builds of gzip, mesa and parser),
/// calibrated by `calibrate_v2 -- --fit` so that each runs alone on `masa-2x2ht` in MASA's
/// published solo time; they keep the programs' misses (the same data), not their core CPI
/// (the catalog's gzip, mesa and parser are Weaver & McKee's gcc builds).
const MASA_PROBE_BASE: [(&str, f64); 3] = [("INT", 0.5031), ("FP", 0.5389), ("L2C", 0.4000)];

/// The estimated v2 profile of SPEC CPU2000 program `name` ([`SPEC_V2`]), before the fit of
/// [`SPEC_V2_FIT`]: what `calibrate_v2` fits from.
pub fn spec_v2_estimate(name: &str) -> Option<ProfileV2> {
    SPEC_V2.iter().find(|r| r.0 == name).map(profile_v2)
}

fn profile_v2(row: &SpecV2Row) -> ProfileV2 {
    let &(
        _,
        base_cpi,
        branch_mpki,
        fp_dep_cycles,
        llc_apki,
        floor,
        sets,
        mlp,
        writeback_fraction,
        stream_fraction,
        streams,
    ) = row;
    ProfileV2 {
        base_cpi,
        branch_mpki,
        fp_dep_cycles,
        llc_apki,
        miss_curve: MissCurve::Knees {
            floor,
            sets: sets.iter().map(|&(kb, f)| (kb * KB, f)).collect(),
            sharpness: KNEE_SHARPNESS,
        },
        mlp,
        writeback_fraction,
        stream_fraction,
        streams,
        dma_lines_pki: 0.0,
    }
}

/// Second-model request profiles of Zhang et al.'s servers (docs/sim-catalog.md, "Servers
/// under model v2"): (class, base_cpi, branch_mpki, fp_dep_cycles, llc_apki, floor, working
/// sets (KB, fraction), demand mlp, writeback_fraction, stream_fraction, streams,
/// dma_lines_pki). All **est** from published characterizations of the two kinds of server:
/// tuple-at-a-time query engines are branchy, call-heavy and L2-bound (Ailamaki et al., VLDB
/// 1999; Boncz et al., CIDR 2005), scans stream (Q1, Q6) and index joins chase pointers (Q3,
/// Q12; seed 000: Q3 needs much more memory bandwidth than Q6); a web server's payload crosses
/// the bus by the NIC's DMA at about a byte per 8 cycles of protocol work (the "1 GHz per
/// Gbit/s" rule of TCP processing, Foong et al., ISPASS 2003), while its own misses are
/// kernel and socket-buffer data.
type SrvV2Row = (
    &'static str,
    f64,
    f64,
    f64,
    f64,
    f64,
    &'static [(f64, f64)],
    f64,
    f64,
    f64,
    f64,
    f64,
);
#[rustfmt::skip]
const SRV_V2: &[SrvV2Row] = &[
    //                base  br    fp   apki  floor  sets                                mlp  wb   strm streams dma
    ("small-clip",    0.90, 8.0,  0.0, 25.0, 0.05,  &[(512.0, 0.30)],                  1.3, 0.3, 0.2, 1.0,    1.0),
    ("large-clip",    0.90, 5.0,  0.0, 20.0, 0.10,  &[(256.0, 0.30)],                  1.5, 0.3, 0.3, 1.0,    3.0),
    ("Q3",            0.90, 10.0, 0.5, 25.0, 0.20,  &[(512.0, 0.20), (16384.0, 0.30)], 1.2, 0.2, 0.2, 2.0,    0.0),
    ("Q6",            0.90, 10.0, 0.5, 25.0, 0.10,  &[(128.0, 0.30)],                  1.5, 0.1, 0.8, 1.0,    0.0),
    ("Q12",           0.90, 10.0, 0.5, 25.0, 0.12,  &[(512.0, 0.20), (8192.0, 0.10)],  1.3, 0.2, 0.4, 2.0,    0.0),
    ("Q1",            0.90, 10.0, 0.5, 25.0, 0.08,  &[(256.0, 0.30)],                  1.5, 0.1, 0.8, 1.0,    0.0),
];

/// The v2 profile of request class `class` (None when `SRV_V2` has no row for it: the class
/// then runs its v1 profile under v2).
fn server_v2(class: &str) -> Option<ProfileV2> {
    let &(_, base, br, fp, apki, floor, sets, mlp, wb, sf, streams, dma) =
        SRV_V2.iter().find(|r| r.0 == class)?;
    let mut v = profile_v2(&("", base, br, fp, apki, floor, sets, mlp, wb, sf, streams));
    v.dma_lines_pki = dma;
    Some(v)
}

fn with_v2(mut p: Profile, v: Option<ProfileV2>) -> Profile {
    p.v2 = v;
    p
}

const GZIP_GI: f64 = 462.6;
const MESA_GI: f64 = 295.5;
const PARSER_GI: f64 = 511.9;

/// A one-phase profile with a power-law miss curve referenced at 512 KB.
#[allow(clippy::too_many_arguments)]
fn prof(
    cpi_core: f64,
    llc_apki: f64,
    m_ref: f64,
    alpha: f64,
    m_min: f64,
    mlp: f64,
    fp: f64,
) -> Profile {
    Profile {
        cpi_core,
        llc_apki,
        miss_curve: MissCurve::PowerLaw {
            m_ref,
            c_ref_bytes: 512.0 * KB,
            alpha,
            m_min,
        },
        mlp,
        fp_fraction: fp,
        code_pages: 0,
        v2: None,
    }
}

fn program(name: &str, giga_instructions: f64, p: Profile) -> Program {
    Program {
        name: name.into(),
        phases: vec![Phase {
            instructions: (giga_instructions * 1e9) as u64,
            profile: p,
        }],
    }
}

impl Catalog {
    /// The built-in catalog.
    pub fn builtin() -> Self {
        let mut c = Catalog::default();
        for &(name, gi, cpi, apki, m_ref, alpha, m_min, mlp, fp) in SPEC {
            let mut p = prof(cpi, apki, m_ref, alpha, m_min, mlp, fp);
            p.v2 = spec_v2_estimate(name).map(|mut v| {
                if let Some(&(_, base, fp_share, miss_scale)) =
                    SPEC_V2_FIT.iter().find(|f| f.0 == name)
                {
                    v.base_cpi = base;
                    v.fp_dep_cycles *= fp_share;
                    v.miss_curve = v.miss_curve.scaled(miss_scale);
                }
                v
            });
            c.programs.insert(name.into(), program(name, gi, p));
        }
        // MASA's probe programs are SPEC programs under other names (the paper's INT = gzip,
        // FP = mesa, L2C = parser); MEM streams like swim.
        for (probe, of) in [
            ("INT", "gzip"),
            ("FP", "mesa"),
            ("L2C", "parser"),
            ("MEM", "swim"),
        ] {
            let mut p = c.programs[of].clone();
            p.name = probe.into();
            if let Some(&(_, base)) = MASA_PROBE_BASE.iter().find(|b| b.0 == probe) {
                for ph in &mut p.phases {
                    if let Some(v2) = &mut ph.profile.v2 {
                        v2.base_cpi = base;
                    }
                }
            }
            c.programs.insert(probe.into(), p);
        }
        // Servers (Zhang et al.): web-clip (Apache serving video clips) and TPC-H on MySQL.
        c.servers.insert(
            "web-clip".into(),
            Server {
                name: "web-clip".into(),
                classes: vec![
                    RequestClass {
                        name: "small-clip".into(),
                        weight: 0.7,
                        instructions: 20_000_000,
                        profile: with_v2(
                            prof(1.1, 15.0, 0.50, 0.3, 0.15, 2.0, 0.0),
                            server_v2("small-clip"),
                        ),
                    },
                    RequestClass {
                        name: "large-clip".into(),
                        weight: 0.3,
                        instructions: 200_000_000,
                        profile: with_v2(
                            prof(1.0, 25.0, 0.70, 0.2, 0.40, 3.0, 0.0),
                            server_v2("large-clip"),
                        ),
                    },
                ],
            },
        );
        // [Zhang07]: "Q3, Q6 and Q12 all exhibit similar execution time", with different
        // bandwidth needs. Q6 keeps 1.5e9 instructions; Q3 and Q12 take the counts that give
        // them Q6's time alone on zhang-smp under v2 (CPIs 5.01, 1.63 and 2.61, `solo_v2`;
        // `tests/model_v2.rs::tpch_q3_q6_q12_take_similar_times`). Under v1 the same counts
        // leave Q3 and Q12 within about 25 % of Q6's time (docs/sim-catalog.md, "Servers under
        // model v2").
        c.servers.insert(
            "tpch".into(),
            Server {
                name: "tpch".into(),
                classes: vec![
                    RequestClass {
                        name: "Q3".into(),
                        weight: 1.0,
                        instructions: 488_000_000,
                        profile: with_v2(
                            prof(1.0, 30.0, 0.60, 0.3, 0.20, 2.0, 0.02),
                            server_v2("Q3"),
                        ),
                    },
                    RequestClass {
                        name: "Q6".into(),
                        weight: 1.0,
                        instructions: 1_500_000_000,
                        profile: with_v2(
                            prof(0.8, 8.0, 0.30, 0.3, 0.05, 2.0, 0.05),
                            server_v2("Q6"),
                        ),
                    },
                    RequestClass {
                        name: "Q12".into(),
                        weight: 1.0,
                        instructions: 937_000_000,
                        profile: with_v2(
                            prof(0.9, 18.0, 0.45, 0.3, 0.10, 2.0, 0.03),
                            server_v2("Q12"),
                        ),
                    },
                    RequestClass {
                        name: "Q1".into(),
                        weight: 1.0,
                        instructions: 3_000_000_000,
                        profile: with_v2(
                            prof(0.9, 6.0, 0.25, 0.3, 0.05, 2.0, 0.10),
                            server_v2("Q1"),
                        ),
                    },
                ],
            },
        );
        // Machines.
        let mut add = |m: MachineSpec| {
            c.machines.insert(m.name.clone(), m);
        };
        // Zhang et al.: two single-core processors sharing one front-side bus.
        add(c_machine_zhang());
        // Weaver & McKee's "sampaka12" (IISWC 2008 raw data): a "2-way 2800MHz/0.5MB" Xeon,
        // where every SPEC CPU2000 program of the catalog was measured alone (gcc -O2 builds).
        // Zhang's SMP with the files' 512 KB L2; its bus and latency are not in the files (est:
        // the 533 MT/s generation's, its own constant so that a refit of Zhang's bandwidth does
        // not move the measured CPIs' machine). calibrate_v2 derives each program's v2 core CPI
        // here from its measured CPI.
        add({
            let zhang = c_machine_zhang();
            MachineSpec {
                name: "xeon-2800".into(),
                llc_bytes: (512.0 * KB) as u64,
                v2: PhysicsV2 {
                    sustained_bandwidth_gb_per_s: XEON2800_V2_SUSTAINED_GB_PER_S,
                    ..zhang.v2
                },
                ..zhang
            }
        });
        // Weaver & McKee's "domori24": a "4-way 3467MHz/2.0MB" NetBurst Xeon, where the same
        // gcc builds ran (est: a dual Xeon 5070, Dempsey, two cores per package with a 2 MB L2
        // each, 1066 MT/s buses, the 5000P chipset with FB-DIMM; none of it is in the files
        // but the clock and the L2). A check of the v2 profiles only (xeon3460_check).
        add(c_machine_xeon3460());
        // MASA: dual Xeon with Hyper-Threading, 512 KB L2 per package, shared FSB.
        add(c_machine_masa());
        // The same dual Xeon with Hyper-Threading disabled in the BIOS.
        add(MachineSpec {
            name: "masa-2x1".into(),
            threads_per_core: 1,
            ..c_machine_masa()
        });
        // Intel's Pentium 4 (Willamette) SPEC CPU2000 systems of 2001, one processor at 1.3 or
        // 1.7 GHz: 256 KB L2, 400 MT/s FSB, i850 with two PC800 RDRAM channels (1.6 GB/s
        // each, 3.2 GB/s together). The clock-scaling experiment runs each program alone on
        // both: only the clock differs, so the speed-up says how much of a program's time is
        // memory.
        for (name, ghz) in [("p4-1300", 1.3), ("p4-1700", 1.7)] {
            add(c_machine_willamette(name, ghz));
        }
        // Modern shapes: per-package memory controllers, SMT, one LLC per package or per CCX.
        let modern = |name: &str, packages, cores, threads, llc_domains, llc_mb: f64| MachineSpec {
            name: name.into(),
            packages,
            cores_per_package: cores,
            threads_per_core: threads,
            llc_domains_per_package: llc_domains,
            llc_bytes: (llc_mb * MB) as u64,
            line_bytes: 64,
            freq_ghz: 2.5,
            mem_latency_ns: 90.0,
            memory: MemoryKind::PerPackage,
            peak_bandwidth_gb_per_s: 60.0,
            rho_cap: 0.95,
            smt: modern_smt(),
            model: Model::V1,
            v2: PhysicsV2 {
                branch_penalty_cycles: 16.0,
                llc_hit_cycles: 40.0,
                sustained_bandwidth_gb_per_s: 45.0,
                row_conflict_loss: 0.0,
                background_tick_share: BACKGROUND_TICK_SHARE,
                // Modern L2 streamer: 32 streams (one per 4 KB page tracked), runs well
                // ahead of demand (est: depth 8 of the up to 20 lines it may run ahead).
                prefetch_streams: 32.0,
                prefetch_depth_lines: 8.0,
                // Broadcast snooping between sockets (QPI source snoop): a snoop request and
                // its data-less response, two header flits of about 8 bytes each, per line
                // another socket moves (est).
                snoop_bytes_per_line: 16.0,
                lines_per_read: 1.0,
                sectored_llc: false,
                smt: None,
                // A Core-lineage core (est: Core 2's, fitted on the Q6600's CPIs; Nehalem and
                // its successors run the same instructions at least as fast per clock).
                core_cpi_scale: CORE2_CORE_CPI_SCALE,
                // Nehalem and its successors partition the reorder buffer and the store
                // buffers between two active threads (docs/sim-catalog.md, `smt_window_share`).
                smt_window_share: SMT_WINDOW_SHARE,
                llc_sharing: LlcSharing::Foa,
            },
        };
        add(modern("xeon-4x8x1", 4, 8, 1, 1, 20.0));
        add(modern("xeon-4s-32t", 4, 4, 2, 1, 16.0));
        add(modern("bench-8", 1, 8, 1, 1, 16.0));
        add(modern("bench-64", 4, 16, 1, 2, 16.0));
        add(modern("bench-512", 8, 64, 1, 8, 32.0));
        add(modern("bench-1024", 16, 64, 1, 8, 32.0));
        // Seed 001 (Döbel & Härtig): two Xeon X5650 (Westmere-EP), 6 cores x 2 threads, 12 MB
        // L3 each, one memory controller per socket (docs/sim-catalog.md, docs/replica.md).
        // v2's sustained bandwidth per socket is the platform's too, not the modern shapes'
        // 45 GB/s (docs/sim-catalog.md, machine physics table).
        let x5650 = modern("x5650-2s", 2, 6, 2, 1, 12.0);
        add(MachineSpec {
            name: "x5650-2s".into(),
            freq_ghz: 2.66,
            mem_latency_ns: 70.0,
            peak_bandwidth_gb_per_s: 20.0,
            v2: PhysicsV2 {
                sustained_bandwidth_gb_per_s: 20.0,
                ..x5650.v2
            },
            ..x5650
        });
        for &(name, gi, cpi, apki, curve, mlp) in SPEC_INT_2006 {
            let curve = match curve {
                Curve2006::Power(m_ref, alpha, m_min) => MissCurve::PowerLaw {
                    m_ref,
                    c_ref_bytes: 512.0 * KB,
                    alpha,
                    m_min,
                },
                Curve2006::Knee(ws_mb, m_fit) => knee_curve(ws_mb * MB, m_fit),
            };
            let p = Profile {
                cpi_core: cpi,
                llc_apki: apki,
                miss_curve: curve,
                mlp,
                fp_fraction: 0.0,
                code_pages: 0,
                // Replica programs run the first model (docs/replica.md).
                v2: None,
            };
            c.programs.insert(name.into(), program(name, gi, p));
        }
        // A generic dual core with a shared L2 (Core 2 Duo E6600 class: 2.4 GHz, 4 MB shared
        // 16-way L2, 1066 MT/s front-side bus: 8.5 GB/s theoretical, sustained ~65 %).
        add(c_machine_core2("dualcore-shared-l2", 2.4, 80.0, 5.5));
        // Tian et al.'s Xeon 5150 (Woodcrest, JSSPP 2012): the same core and 4 MB shared L2
        // at 2.66 GHz on a 1333 MT/s front-side bus to the 5000-series chipset's FB-DIMM
        // memory. The corun-slowdown check runs its pairs on this machine only.
        add(c_machine_core2(
            "xeon-5150",
            2.66,
            XEON5150_LATENCY_NS,
            XEON5150_SUSTAINED_GB_PER_S,
        ));
        // A modern 2-socket, 32-core machine (Xeon Gold 6142 class: 16 cores x 2 threads per
        // socket, 22 MB L3 per socket, six DDR4-2666 channels per socket's controller).
        add(MachineSpec {
            name: "modern-2s-32c".into(),
            packages: 2,
            cores_per_package: 16,
            threads_per_core: 2,
            llc_domains_per_package: 1,
            llc_bytes: (22.0 * MB) as u64,
            line_bytes: 64,
            freq_ghz: 2.6,
            mem_latency_ns: 90.0,
            memory: MemoryKind::PerPackage,
            peak_bandwidth_gb_per_s: 100.0,
            rho_cap: 0.95,
            smt: modern_smt(),
            model: Model::V1,
            v2: PhysicsV2 {
                branch_penalty_cycles: 16.0,
                llc_hit_cycles: 70.0,
                // 6 x 21.3 GB/s = 128 GB/s theoretical per socket; sustained ~78 %.
                sustained_bandwidth_gb_per_s: 100.0,
                row_conflict_loss: 0.0,
                background_tick_share: BACKGROUND_TICK_SHARE,
                prefetch_streams: 32.0,
                prefetch_depth_lines: 8.0,
                // UPI with an in-memory directory and snoop filter: most misses need no
                // snoop of the other socket; est half of a broadcast's 16 bytes per line.
                snoop_bytes_per_line: 8.0,
                lines_per_read: 1.0,
                sectored_llc: false,
                smt: None,
                // A Core-lineage core (est: Core 2's, fitted on the Q6600's CPIs; Nehalem and
                // its successors run the same instructions at least as fast per clock).
                core_cpi_scale: CORE2_CORE_CPI_SCALE,
                // Nehalem and its successors partition the reorder buffer and the store
                // buffers between two active threads (docs/sim-catalog.md, `smt_window_share`).
                smt_window_share: SMT_WINDOW_SHARE,
                llc_sharing: LlcSharing::Foa,
            },
        });
        c
    }

    /// A program by name.
    pub fn program(&self, name: &str) -> Option<Program> {
        self.programs.get(name).cloned()
    }
    /// A server (request stream) by name.
    pub fn server(&self, name: &str) -> Option<Server> {
        self.servers.get(name).cloned()
    }
    /// A machine by name.
    pub fn machine(&self, name: &str) -> Option<MachineSpec> {
        self.machines.get(name).cloned()
    }
    /// Names of every program, sorted.
    pub fn program_names(&self) -> Vec<String> {
        self.programs.keys().cloned().collect()
    }
    /// Names of every server, sorted.
    pub fn server_names(&self) -> Vec<String> {
        self.servers.keys().cloned().collect()
    }
    /// Names of every machine, sorted.
    pub fn machine_names(&self) -> Vec<String> {
        self.machines.keys().cloned().collect()
    }
    /// Replace or add a program (calibration and tests).
    pub fn set_program(&mut self, p: Program) {
        self.programs.insert(p.name.clone(), p);
    }
    /// Replace or add a machine (calibration and tests).
    pub fn set_machine(&mut self, m: MachineSpec) {
        self.machines.insert(m.name.clone(), m);
    }
}

/// LLC miss curve of an SPEC INT 2006 program (estimates, docs/sim-catalog.md).
#[derive(Clone, Copy)]
enum Curve2006 {
    /// Power law referenced at 512 KB: (m_ref, alpha, m_min).
    Power(f64, f64, f64),
    /// A working set of this many MB: every access misses below 80 % of it, `m_fit` at or
    /// above it, linear between (a cyclic pattern under LRU, smoothed).
    Knee(f64, f64),
}

/// SPEC CPU2006 integer programs for the replica experiment (seed 001), on an L3 behind a
/// 256 KB L2: (name, instructions in 10^9, cpi_core, L3 accesses per kilo-instruction, L3 miss
/// curve, mlp). All **est** (docs/sim-catalog.md gives the basis of each).
#[rustfmt::skip]
const SPEC_INT_2006: &[(&str, f64, f64, f64, Curve2006, f64)] = &[
    ("400.perlbench",  2400.0, 0.8,  1.2, Curve2006::Knee(2.0, 0.05),        1.5),
    ("401.bzip2",      2400.0, 0.9,  4.5, Curve2006::Power(0.45, 0.5, 0.05), 1.5),
    ("403.gcc",        1100.0, 1.0,  7.0, Curve2006::Power(0.60, 0.4, 0.10), 1.5),
    ("429.mcf",         330.0, 1.2, 60.0, Curve2006::Power(0.90, 0.25, 0.25), 2.0),
    ("445.gobmk",      1600.0, 1.0,  2.0, Curve2006::Knee(3.0, 0.10),        1.5),
    ("456.hmmer",      2200.0, 0.7,  2.5, Curve2006::Knee(1.0, 0.02),        1.5),
    ("458.sjeng",      2600.0, 0.9,  0.8, Curve2006::Knee(6.0, 0.30),        1.5),
    // Shaped to seed 001's miss table: its libquantum fits in half an L3 (570 L3 misses with
    // two replicas) but not in a third (387,000 with three).
    ("462.libquantum", 1800.0, 0.6, 25.0, Curve2006::Knee(5.0, 0.002),       4.0),
    ("464.h264ref",    3200.0, 0.7,  1.5, Curve2006::Knee(2.0, 0.05),        1.5),
    ("471.omnetpp",     600.0, 1.1, 20.0, Curve2006::Power(0.95, 0.35, 0.20), 1.5),
    ("473.astar",      1100.0, 1.0,  8.0, Curve2006::Power(0.55, 0.45, 0.08), 1.5),
    ("483.xalancbmk",  1100.0, 1.0, 10.0, Curve2006::Power(0.60, 0.45, 0.08), 1.5),
];

/// The [`Curve2006::Knee`] curve as a stack-distance table.
pub fn knee_curve(ws_bytes: f64, m_fit: f64) -> MissCurve {
    MissCurve::Table {
        points: vec![(0.8 * ws_bytes, 1.0), (ws_bytes, m_fit)],
    }
}

/// Weaver & McKee's second NetBurst machine (est, see its entry in `builtin`): the 2.8 GHz
/// Xeon's NetBurst physics with Prescott's deeper pipeline (31 stages, est from the 2.8 GHz
/// part's 20), a 2 MB L2 at 27 cycles (est), the 5000P's memory latency measured with a Xeon
/// 5160, 113 ns [AT2294], and a 1066 MT/s x 8 B bus at the 65 % sustained share this catalog
/// takes for the Core 2 buses (5.5 GB/s, est).
fn c_machine_xeon3460() -> MachineSpec {
    MachineSpec {
        name: "xeon-3460".into(),
        packages: 2,
        cores_per_package: 2,
        threads_per_core: 1,
        llc_domains_per_package: 2,
        llc_bytes: (2.0 * MB) as u64,
        freq_ghz: 3.467,
        mem_latency_ns: XEON5150_LATENCY_NS,
        peak_bandwidth_gb_per_s: 5.5,
        v2: PhysicsV2 {
            branch_penalty_cycles: 31.0,
            llc_hit_cycles: 27.0,
            sustained_bandwidth_gb_per_s: 5.5,
            ..netburst_v2()
        },
        ..c_machine_zhang()
    }
}

/// Zhang et al.'s SMP: two single-core processors sharing one front-side bus.
fn c_machine_zhang() -> MachineSpec {
    MachineSpec {
        name: "zhang-smp".into(),
        packages: 2,
        cores_per_package: 1,
        threads_per_core: 1,
        llc_domains_per_package: 1,
        llc_bytes: (1.0 * MB) as u64,
        line_bytes: 64,
        freq_ghz: 2.8,
        mem_latency_ns: 110.0,
        memory: MemoryKind::SharedBus,
        // Sustained, not the 4.26 GB/s of a 533 MT/s x 8 B bus (calibrated).
        peak_bandwidth_gb_per_s: 2.0,
        rho_cap: 0.95,
        smt: p4_smt(),
        model: Model::V1,
        v2: PhysicsV2 {
            // 533 MT/s x 8 B = 4.26 GB/s theoretical; sustained where the v2 fit of the
            // baseline lands inside the range calibrate_v2 searches (2.0-3.4 GB/s;
            // docs/calibration.md).
            sustained_bandwidth_gb_per_s: ZHANG_V2_SUSTAINED_GB_PER_S,
            ..netburst_v2()
        },
    }
}

fn c_machine_masa() -> MachineSpec {
    MachineSpec {
        name: "masa-2x2ht".into(),
        packages: 2,
        cores_per_package: 1,
        threads_per_core: 2,
        llc_domains_per_package: 1,
        llc_bytes: (512.0 * KB) as u64,
        line_bytes: 64,
        freq_ghz: 2.0,
        mem_latency_ns: 120.0,
        memory: MemoryKind::SharedBus,
        peak_bandwidth_gb_per_s: 3.2,
        rho_cap: 0.95,
        smt: p4_smt(),
        model: Model::V1,
        v2: PhysicsV2 {
            // 400 MT/s x 8 B = 3.2 GB/s theoretical; sustained at the same share of its
            // peak as the Zhang platform's fit gives (same chipset generation).
            sustained_bandwidth_gb_per_s: ZHANG_V2_SUSTAINED_GB_PER_S * MASA_FSB_PEAK_GB_PER_S
                / ZHANG_FSB_PEAK_GB_PER_S,
            ..netburst_v2()
        },
    }
}

/// Memory latency of the Xeon 5150 system, ns: AnandTech's measurement of a Xeon 5160 (the
/// same die at 3.0 GHz) on the 5000P chipset with FB-DIMM DDR2-667, 113 ns (338 cycles)
/// [AT2294] (docs/sim-catalog.md).
const XEON5150_LATENCY_NS: f64 = 113.0;
/// Sustained bandwidth of one Xeon 5150's front-side bus, GB/s: 1333 MT/s x 8 B = 10.7 GB/s
/// theoretical, at the ~65 % sustained share this catalog takes for Core 2 front-side buses
/// (est: no STREAM figure of the platform was found; one thread reads 3.7 GB/s [AT2294]).
const XEON5150_SUSTAINED_GB_PER_S: f64 = 6.9;

/// A dual-core Core 2 (Merom / Conroe / Woodcrest) with its 4 MB 16-way L2 shared by both cores
/// on one front-side bus, at `ghz`, with memory latency `latency_ns` and sustained bandwidth
/// `sustained_gb_per_s` (both models read it: v1 as its peak, v2 as the sustained figure).
fn c_machine_core2(name: &str, ghz: f64, latency_ns: f64, sustained_gb_per_s: f64) -> MachineSpec {
    MachineSpec {
        name: name.into(),
        packages: 1,
        cores_per_package: 2,
        threads_per_core: 1,
        llc_domains_per_package: 1,
        llc_bytes: (4.0 * MB) as u64,
        line_bytes: 64,
        freq_ghz: ghz,
        mem_latency_ns: latency_ns,
        memory: MemoryKind::SharedBus,
        peak_bandwidth_gb_per_s: sustained_gb_per_s,
        rho_cap: 0.95,
        smt: SmtSpec::default(),
        model: Model::V1,
        v2: PhysicsV2 {
            branch_penalty_cycles: 15.0,
            llc_hit_cycles: 14.0,
            sustained_bandwidth_gb_per_s: sustained_gb_per_s,
            row_conflict_loss: 0.0,
            background_tick_share: BACKGROUND_TICK_SHARE,
            // Core Solo/Duo class prefetchers: 16 forward streams (Intel IA-32 optimization
            // manual, 2006); depth two lines, est.
            prefetch_streams: 16.0,
            prefetch_depth_lines: 2.0,
            // One shared bus: every snoop is that bus's own transaction, already queued.
            snoop_bytes_per_line: 0.0,
            // A read miss fetches its own 64-byte line only.
            lines_per_read: 1.0,
            sectored_llc: false,
            smt: None,
            // Core 2 runs NetBurst's instructions in fewer cycles (fitted on Weaver & McKee's
            // Core 2 Quad CPIs, docs/calibration.md "Session 20").
            core_cpi_scale: CORE2_CORE_CPI_SCALE,
            smt_window_share: SMT_WINDOW_SHARE,
            llc_sharing: LlcSharing::Foa,
        },
    }
}

/// A single Pentium 4 (Willamette) at `ghz` on an i850 board: the machines of Intel's 2001
/// SPEC CPU2000 submissions at 1.3 and 1.7 GHz (docs/sim-catalog.md, [DeMone01]).
fn c_machine_willamette(name: &str, ghz: f64) -> MachineSpec {
    MachineSpec {
        name: name.into(),
        packages: 1,
        cores_per_package: 1,
        threads_per_core: 1,
        llc_domains_per_package: 1,
        // 256 KB L2 on the Willamette die (Hinton et al. 2001).
        llc_bytes: (256.0 * KB) as u64,
        line_bytes: 64,
        freq_ghz: ghz,
        // Unloaded latency est, as the MASA platform's (the same FSB; RDRAM was not faster).
        mem_latency_ns: 120.0,
        memory: MemoryKind::SharedBus,
        // 400 MT/s x 8 B, as the MASA platform's FSB.
        peak_bandwidth_gb_per_s: MASA_FSB_PEAK_GB_PER_S,
        rho_cap: 0.95,
        smt: SmtSpec::default(),
        model: Model::V1,
        v2: PhysicsV2 {
            // Measured on the platform, not carried over from another board's fit.
            sustained_bandwidth_gb_per_s: P4_I850_SUSTAINED_GB_PER_S,
            ..netburst_v2()
        },
    }
}

/// NetBurst (Pentium 4 / Xeon of 2002-2005) core physics for the second model.
fn netburst_v2() -> PhysicsV2 {
    PhysicsV2 {
        // 20-stage misprediction pipeline (Hinton et al., Intel Technology Journal Q1 2001).
        branch_penalty_cycles: 20.0,
        // L2 load-to-use (Northwood / Prestonia class), est.
        llc_hit_cycles: 18.0,
        sustained_bandwidth_gb_per_s: 2.8,
        row_conflict_loss: 0.0,
        background_tick_share: BACKGROUND_TICK_SHARE,
        // Hardware prefetcher: 8 independent streams, small strides only, never across a
        // 4 KB page, and it "attempts to stay 256 bytes ahead of current data access
        // locations" (Intel IA-32 optimization manual, 2006, chapter 6): four of this
        // model's 64-byte lines (the manual's "two cache lines ahead" are 128-byte sectors).
        prefetch_streams: 8.0,
        prefetch_depth_lines: 4.0,
        // One shared bus: every snoop is that bus's own transaction, already queued.
        snoop_bytes_per_line: 0.0,
        // Every read miss fetches a sector of two adjacent 64-byte lines (Intel's IA-32
        // optimization manual, 2006, Table 1-1); a write moves 64 bytes.
        lines_per_read: 2.0,
        // The L2's 128-byte sectors as capacity (one tag per sector) are left out: with the
        // catalog's spatial-locality estimates they put MASA's parser build past its measured
        // solo time at the floor of its core CPI (docs/calibration.md, "Session 17").
        sectored_llc: false,
        // Hyper-Threading sharing refitted for v2's core CPIs on MASA's pinned tables
        // (calibrate_v2 -- --fit; docs/calibration.md).
        smt: NETBURST_V2_SMT,
        // The reference core: every program's `base_cpi` was fitted on a NetBurst Xeon.
        core_cpi_scale: 1.0,
        // NetBurst's Hyper-Threading splits the reorder buffer (126 entries) and the load (48)
        // and store (24) buffers in halves while both threads run (Marr et al., Intel
        // Technology Journal Q1 2002; the sizes as ExtremeTech and Shanley give them,
        // docs/sim-catalog.md).
        smt_window_share: SMT_WINDOW_SHARE,
        llc_sharing: LlcSharing::Foa,
    }
}

/// A Core 2 core's execution time per instruction against NetBurst's
/// (`PhysicsV2::core_cpi_scale`), fitted by `calibrate_v2 -- --fit` (stage 4) on Weaver &
/// McKee's CPIs of the six core-bound SPEC CPU2000 programs alone on a Core 2 Quad Q6600
/// (`paper::CORE2_CORE_PROGRAMS` of `paper::CORE2_Q6600_SOLO`), run on `dualcore-shared-l2`
/// (the same core, L2 and bus); the other fourteen are `examples/core2_check.rs`'s validation.
const CORE2_CORE_CPI_SCALE: f64 = 0.4787;

/// Share of the out-of-order window a Hyper-Threading thread keeps beside a running sibling:
/// half, the static partition of Intel's implementations (`PhysicsV2::smt_window_share`).
const SMT_WINDOW_SHARE: f64 = 0.5;

/// Pentium 4 Hyper-Threading under v2, calibrated by `calibrate_v2 -- --fit` on MASA's
/// pinned tables for v2's core CPIs (v1's `p4_smt` was fitted for v1's); the issue width is
/// the same 3. All three end inside their ranges (0-10). Refitted in session 20 with the
/// window split between running threads (`SMT_WINDOW_SHARE`; MASA tables' loss 164.89 ->
/// 153.84).
const NETBURST_V2_SMT: Option<SmtSpec> = Some(SmtSpec {
    issue_width: 3.0,
    issue_penalty: 1.6394,
    same_unit_penalty: 1.2931,
    fp_unit_weight: 9.8758,
});

/// SMT sharing of a modern 4-wide core, under both models. The issue width and the FP-unit
/// weight are estimates; the issue and same-unit penalties keep their estimated split (0.35 :
/// 0.30) and their sum is fitted by `calibrate_v2 -- --fit` (stage 5): two copies of
/// 400.perlbench, the core-bound program of `paper::SMT_CORE_PROGRAMS`, on the two threads of
/// one `modern-2s-32c` core retire 1.137 times one copy, as two copies on one Xeon E5-2699 v4
/// core score against one (De Gelas, AnandTech 2016; docs/calibration.md, "Session 21"). The
/// estimates (sum 0.65) gave 1.71. The sum is a lump: the front end the threads take turns at,
/// the shared ports and the shared L1 and L2 all act through the sibling's issue rate.
fn modern_smt() -> SmtSpec {
    SmtSpec {
        issue_width: 4.0,
        issue_penalty: 2.3510,
        same_unit_penalty: 2.0152,
        fp_unit_weight: 2.0,
    }
}

/// Pentium 4 Hyper-Threading: issue and functional-unit sharing (calibrated).
fn p4_smt() -> SmtSpec {
    SmtSpec {
        issue_width: 3.0,
        issue_penalty: 1.702,
        same_unit_penalty: 1.835,
        fp_unit_weight: 7.473,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 001's platform keeps its own memory system under v2: the modern shapes it is built
    /// from sustain 45 GB/s per socket, a Westmere-EP socket 20 (docs/sim-catalog.md).
    #[test]
    fn x5650_sustains_its_own_bandwidth_under_v2() {
        let m = Catalog::builtin().machine("x5650-2s").unwrap();
        assert_eq!(m.v2.sustained_bandwidth_gb_per_s, 20.0);
        assert!(m.v2.sustained_bandwidth_gb_per_s <= m.peak_bandwidth_gb_per_s);
    }

    /// Every server request class has a v2 profile (a row of `SRV_V2` under its name).
    #[test]
    fn every_request_class_has_a_v2_profile() {
        let c = Catalog::builtin();
        for s in c.server_names() {
            for class in c.server(&s).map(|s| s.classes).unwrap_or_default() {
                assert!(class.profile.v2.is_some(), "{s}/{}", class.name);
                assert!(class.profile.validate().is_ok(), "{s}/{}", class.name);
            }
        }
    }
}
