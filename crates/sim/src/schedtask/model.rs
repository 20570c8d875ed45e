//! The event-driven OS-execution model: cores with private caches running SuperFunction
//! invocations from per-core queues, threads alternating application segments and system
//! calls, blocking calls completed by an interrupt and a bottom half, and a [`Technique`]
//! deciding where each invocation runs and what an idle core steals.

use super::cache::{Cache, Lookup};
use super::layout::{Layout, BUFFER_LINES, LINES_PER_PAGE, PAGE_BASE};
use super::workload::{Device, SfKind};
use super::{Options, Outcome, SimError, Technique};
use counterpoint_core::heatmap::{OverlapTable, PageHeatmap};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// No thread (interrupts and bottom halves run on behalf of nobody).
const NO_THREAD: u32 = u32::MAX;
/// Items an idle SchedTask core steals at once (the paper steals "multiple SuperFunctions").
pub const STEAL_BATCH: usize = 4;
/// SelectiveOffload offloads a call only when its mean length reaches this (instructions).
pub const OFFLOAD_MIN_INSTRUCTIONS: f64 = 2000.0;
/// Lines of its I/O buffer an application segment writes (estimated).
pub const APP_BUFFER_LINES: u64 = 16;

/// What a finished invocation leads to.
#[derive(Clone, Copy, Debug)]
enum Then {
    /// An application segment: the thread makes a system call next.
    App,
    /// A system call that returns: the thread runs application code next.
    Sys,
    /// A system call that blocks on `device` until an interrupt.
    Block { device: Device, sys: u16 },
    /// An interrupt: its bottom half follows, then the blocked call `sys` of the item's
    /// thread completes.
    Bh { bh: u16, sys: u16 },
    /// A bottom half that wakes the item's thread, whose call `sys` then completes.
    Wake { sys: u16 },
}

/// One SuperFunction invocation waiting or running.
#[derive(Clone, Copy, Debug)]
struct Item {
    ty: u16,
    instructions: u32,
    /// The thread it runs for (for interrupts: the thread it will wake, data-wise nobody).
    thread: u32,
    then: Then,
}

impl Item {
    fn kind(&self, l: &Layout) -> SfKind {
        l.types[self.ty as usize].kind
    }
    /// Whether it is a thread's own work (application or system call), not an interrupt.
    fn is_thread_work(&self, l: &Layout) -> bool {
        matches!(self.kind(l), SfKind::App | SfKind::Syscall)
    }
}

struct Core {
    queue: VecDeque<Item>,
    queued_instructions: u64,
    running: Option<Item>,
    icache: Cache,
    dcache: Cache,
    l2: Cache,
    /// Last types run, most recent first (SLICC-like routing).
    recent: [u16; 4],
    busy_cycles: u64,
}

impl Core {
    fn load(&self) -> u64 {
        self.queued_instructions + self.running.map_or(0, |i| i.instructions as u64)
    }
    fn push(&mut self, it: Item) {
        self.queued_instructions += it.instructions as u64;
        self.queue.push_back(it);
    }
    fn pop(&mut self) -> Option<Item> {
        let it = self.queue.pop_front()?;
        self.queued_instructions -= it.instructions as u64;
        Some(it)
    }
    fn take_at(&mut self, i: usize) -> Option<Item> {
        let it = self.queue.remove(i)?;
        self.queued_instructions -= it.instructions as u64;
        Some(it)
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    CoreDone(u32),
    Interrupt { thread: u32, device: u8, sys: u16 },
    Epoch,
}

/// Measured counts of the window.
#[derive(Default, Clone, Copy)]
struct Counts {
    instructions: u64,
    os_instructions: u64,
    i_accesses: u64,
    i_misses: u64,
    d_accesses: u64,
    d_misses: u64,
    bounces: u64,
    invocations: u64,
}

/// Allocation state of the core-partitioning techniques.
#[derive(Default)]
struct Alloc {
    /// SchedTask: cores per type (empty: not allocated).
    cores_of: Vec<Vec<u32>>,
    /// SchedTask: types per core.
    types_of: Vec<Vec<u16>>,
    /// Offloading techniques: the OS partition is cores `app_cores..cores`.
    app_cores: u32,
    /// Overlap table of the last epoch.
    overlap: OverlapTable,
    /// Whether a profile exists yet (SchedTask runs Linux-like before its first epoch).
    ready: bool,
}

/// One run.
pub struct Model<'a> {
    l: &'a Layout,
    o: Options,
    tech: Technique,
    cores: Vec<Core>,
    home: Vec<u32>,
    last_core: Vec<u32>,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    versions: Vec<u32>,
    writer: Vec<u8>,
    next_stream: u64,
    rng: ChaCha8Rng,
    rr: u32,
    now: u64,
    epoch_cycles: u64,
    window: (u64, u64),
    epoch_time: Vec<u64>,
    epoch_maps: Vec<PageHeatmap>,
    epoch_busy_os: u64,
    epoch_busy_all: u64,
    alloc: Alloc,
    counts: Counts,
    type_cycles: Vec<u64>,
    epochs_done: u32,
}

fn exp_draw(rng: &mut ChaCha8Rng, mean: f64) -> f64 {
    let u: f64 = rng.gen::<f64>();
    -mean * (1.0 - u).ln()
}

impl<'a> Model<'a> {
    /// A model of `l` under `tech`, seeded by `seed`.
    pub fn new(l: &'a Layout, tech: Technique, o: Options, seed: u64) -> Result<Self, SimError> {
        if o.cores < 2 || o.cores > 255 {
            return Err(SimError::Invalid(format!(
                "schedtask: cores must be 2..=255, got {}",
                o.cores
            )));
        }
        if !(o.freq_ghz > 0.0 && o.epoch_ms > 0.0) || o.measure_epochs == 0 {
            return Err(SimError::Invalid(
                "schedtask: freq_ghz and epoch_ms must be positive and measure_epochs at least 1"
                    .into(),
            ));
        }
        let n = o.cores as usize;
        let cores = (0..n)
            .map(|_| Core {
                queue: VecDeque::new(),
                queued_instructions: 0,
                running: None,
                icache: Cache::new(o.l1_bytes),
                dcache: Cache::new(o.l1_bytes),
                l2: Cache::new(o.l2_bytes),
                recent: [u16::MAX; 4],
                busy_cycles: 0,
            })
            .collect();
        let epoch_cycles = (o.epoch_ms * 1e6 * o.freq_ghz).round() as u64;
        let start = epoch_cycles * o.warmup_epochs as u64;
        let end = start + epoch_cycles * o.measure_epochs as u64;
        let nt = l.types.len();
        let mut m = Self {
            l,
            o,
            tech,
            cores,
            home: Vec::new(),
            last_core: Vec::new(),
            events: BinaryHeap::new(),
            seq: 0,
            versions: vec![0; l.lines as usize],
            writer: vec![u8::MAX; l.lines as usize],
            next_stream: l.lines,
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5c4e_d7a5_0000_0000),
            rr: 0,
            now: 0,
            epoch_cycles,
            window: (start, end),
            epoch_time: vec![0; nt],
            epoch_maps: vec![PageHeatmap::new(); nt],
            epoch_busy_os: 0,
            epoch_busy_all: 0,
            alloc: Alloc {
                app_cores: o.cores / 2,
                ..Alloc::default()
            },
            counts: Counts::default(),
            type_cycles: vec![0; nt],
            epochs_done: 0,
        };
        m.rehome();
        Ok(m)
    }

    fn push_ev(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, ev)));
    }

    /// Application cores: all for Linux, SLICC and SchedTask; the first `app_cores` for the
    /// offloading techniques.
    fn app_range(&self) -> u32 {
        match self.tech {
            Technique::SelectiveOffload | Technique::FlexSc | Technique::RegionSched => {
                self.alloc.app_cores
            }
            _ => self.o.cores,
        }
    }

    /// Spread threads over the application cores (round robin).
    fn rehome(&mut self) {
        let n = self.app_range();
        let threads = self.l.threads as usize;
        if self.home.len() != threads {
            self.home = (0..threads as u32).map(|t| t % n).collect();
            self.last_core = self.home.clone();
        }
        for h in self.home.iter_mut() {
            if *h >= n {
                *h %= n;
            }
        }
    }

    /// Run to the end of the window.
    pub fn run(mut self) -> Outcome {
        for t in 0..self.l.threads {
            let it = self.app_item(t);
            self.dispatch(it, self.home[t as usize]);
        }
        self.push_ev(self.epoch_cycles, Ev::Epoch);
        while let Some(Reverse((t, _, ev))) = self.events.pop() {
            if t >= self.window.1 {
                break;
            }
            self.now = t;
            match ev {
                Ev::CoreDone(c) => self.core_done(c),
                Ev::Interrupt {
                    thread,
                    device,
                    sys,
                } => {
                    let (irq, bh) = if device == 0 { self.l.disk } else { self.l.net };
                    let it = Item {
                        ty: irq,
                        instructions: self.draw_instr(irq),
                        thread,
                        then: Then::Bh { bh, sys },
                    };
                    self.dispatch(it, u32::MAX);
                }
                Ev::Epoch => self.epoch(),
            }
        }
        self.outcome()
    }

    fn draw_instr(&mut self, ty: u16) -> u32 {
        let mean = self.l.types[ty as usize].instructions;
        // At least 100 instructions: an exponential draw near zero is no invocation.
        exp_draw(&mut self.rng, mean).clamp(100.0, 50.0 * mean.max(100.0)) as u32
    }

    fn app_item(&mut self, thread: u32) -> Item {
        Item {
            ty: 0,
            instructions: self.draw_instr(0),
            thread,
            then: Then::App,
        }
    }

    fn core_done(&mut self, c: u32) {
        let Some(done) = self.cores[c as usize].running.take() else {
            return;
        };
        // What the finished invocation leads to.
        let next = match done.then {
            Then::App => {
                let u: f64 = self.rng.gen();
                let e = *self
                    .l
                    .mix
                    .iter()
                    .find(|e| u < e.cumulative)
                    .unwrap_or(&self.l.mix[self.l.mix.len() - 1]);
                let blocks = e.device.is_some() && self.rng.gen::<f64>() < e.block_prob;
                Some(Item {
                    ty: e.ty,
                    instructions: self.draw_instr(e.ty),
                    thread: done.thread,
                    then: match (blocks, e.device) {
                        (true, Some(device)) => Then::Block { device, sys: e.ty },
                        _ => Then::Sys,
                    },
                })
            }
            Then::Sys => Some(self.app_item(done.thread)),
            Then::Block { device, sys } => {
                let lat = exp_draw(&mut self.rng, self.l.block_us) * 1e3 * self.o.freq_ghz;
                let at = self.now + lat.max(1.0) as u64;
                self.push_ev(
                    at,
                    Ev::Interrupt {
                        thread: done.thread,
                        device: matches!(device, Device::Net) as u8,
                        sys,
                    },
                );
                None
            }
            Then::Bh { bh, sys } => Some(Item {
                ty: bh,
                instructions: self.draw_instr(bh),
                thread: done.thread,
                then: Then::Wake { sys },
            }),
            Then::Wake { sys } => {
                let n = (self.draw_instr(sys) as f64 * 0.3).max(100.0) as u32;
                Some(Item {
                    ty: sys,
                    instructions: n,
                    thread: done.thread,
                    then: Then::Sys,
                })
            }
        };
        if let Some(it) = next {
            self.dispatch(it, c);
        }
        if self.cores[c as usize].running.is_none() {
            self.next_on(c);
        }
    }

    /// Start the next queued item on idle core `c`, stealing if its queue is empty.
    fn next_on(&mut self, c: u32) {
        if let Some(it) = self.cores[c as usize].pop() {
            self.start(c, it);
            return;
        }
        let stolen = self.steal(c);
        let mut first = None;
        for it in stolen {
            if first.is_none() {
                first = Some(it);
            } else {
                self.cores[c as usize].push(it);
            }
        }
        if let Some(it) = first {
            self.start(c, it);
        }
    }

    /// Queue `it` (coming from core `from`, `u32::MAX` for a device) where the technique says.
    fn dispatch(&mut self, it: Item, from: u32) {
        let c = self.route(&it, from);
        let core = &mut self.cores[c as usize];
        if core.running.is_none() && core.queue.is_empty() {
            self.start(c, it);
        } else {
            core.push(it);
        }
    }

    fn least_loaded(&self, cands: impl Iterator<Item = u32>) -> u32 {
        let mut best = (u64::MAX, 0u32);
        for c in cands {
            let l = self.cores[c as usize].load();
            if l < best.0 {
                best = (l, c);
            }
        }
        best.1
    }

    /// Among `cands`, the thread's last core when it is within one mean invocation of the
    /// least loaded (keeping its data warm), else the least loaded.
    fn pick_affine(&self, cands: &[u32], it: &Item) -> u32 {
        let best = self.least_loaded(cands.iter().copied());
        if it.thread != NO_THREAD && (it.thread as usize) < self.last_core.len() {
            let last = self.last_core[it.thread as usize];
            if cands.contains(&last) {
                let slack = self.l.types[it.ty as usize].instructions as u64;
                if self.cores[last as usize].load()
                    <= self.cores[best as usize].load().saturating_add(slack)
                {
                    return last;
                }
            }
        }
        best
    }

    fn next_rr(&mut self, lo: u32, hi: u32) -> u32 {
        let span = (hi - lo).max(1);
        self.rr = self.rr.wrapping_add(1);
        lo + self.rr % span
    }

    fn route(&mut self, it: &Item, from: u32) -> u32 {
        let l = self.l;
        let n = self.o.cores;
        let kind = it.kind(l);
        let thread = it.thread as usize;
        let home = if thread < self.home.len() {
            self.home[thread]
        } else {
            0
        };
        let app = self.alloc.app_cores;
        match self.tech {
            Technique::Linux => match kind {
                SfKind::App | SfKind::Syscall => home,
                // irqbalance spreads interrupts; the softirq runs where its IRQ ran.
                SfKind::Irq => self.next_rr(0, n),
                SfKind::BottomHalf => from.min(n - 1),
            },
            Technique::SelectiveOffload => match kind {
                SfKind::App => home,
                SfKind::Syscall => {
                    if l.types[it.ty as usize].instructions >= OFFLOAD_MIN_INSTRUCTIONS {
                        self.least_loaded(app..n)
                    } else {
                        home
                    }
                }
                SfKind::Irq => self.next_rr(app, n),
                SfKind::BottomHalf => from.min(n - 1),
            },
            Technique::FlexSc => match kind {
                SfKind::App => home,
                SfKind::Syscall => self.least_loaded(app..n),
                // FlexSC moves system calls only; interrupts stay with Linux.
                SfKind::Irq => self.next_rr(0, n),
                SfKind::BottomHalf => from.min(n - 1),
            },
            Technique::RegionSched => match kind {
                SfKind::App => home,
                _ => {
                    // Each OS region type has two fixed OS cores; it takes the less loaded.
                    let os = (n - app).max(1);
                    let a = app + (it.ty as u32 * 7) % os;
                    let b = app + (it.ty as u32 * 13 + 5) % os;
                    self.least_loaded([a, b].into_iter())
                }
            },
            Technique::Slicc => {
                // Follow the code: the least loaded core that ran this type recently, unless it
                // is far busier than the least loaded core.
                let best = self.least_loaded(0..n);
                let warm = self.least_loaded(
                    (0..n).filter(|&c| self.cores[c as usize].recent.contains(&it.ty)),
                );
                let has_warm = self.cores.iter().any(|c| c.recent.contains(&it.ty));
                let slack = 2 * l.types[it.ty as usize].instructions as u64;
                if has_warm
                    && self.cores[warm as usize].load()
                        <= self.cores[best as usize].load().saturating_add(slack)
                {
                    warm
                } else if it.is_thread_work(l) {
                    self.pick_affine(&(0..n).collect::<Vec<_>>(), it)
                } else {
                    best
                }
            }
            Technique::SchedTask(_) => {
                if !self.alloc.ready {
                    // Before the first profile: Linux.
                    return match kind {
                        SfKind::App | SfKind::Syscall => home,
                        SfKind::Irq => self.next_rr(0, n),
                        SfKind::BottomHalf => from.min(n - 1),
                    };
                }
                let cands = &self.alloc.cores_of[it.ty as usize];
                if cands.is_empty() {
                    // A type not seen last epoch: the least loaded core.
                    self.least_loaded(0..n)
                } else {
                    self.pick_affine(cands, it)
                }
            }
        }
    }

    /// What idle core `c` takes from others.
    fn steal(&mut self, c: u32) -> Vec<Item> {
        let l = self.l;
        let n = self.o.cores;
        let app = self.alloc.app_cores;
        let longest = |m: &Self, range: std::ops::Range<u32>, ok: &dyn Fn(&Item) -> bool| {
            let mut best: Option<(usize, u32, usize)> = None;
            for v in range {
                if v == c {
                    continue;
                }
                let q = &m.cores[v as usize].queue;
                if let Some(pos) = q.iter().position(ok) {
                    if best.map_or(true, |b| q.len() > b.0) {
                        best = Some((q.len(), v, pos));
                    }
                }
            }
            best.map(|(_, v, pos)| (v, pos))
        };
        let thread_work = |it: &Item| it.is_thread_work(l);
        let one = |m: &mut Self, found: Option<(u32, usize)>| -> Vec<Item> {
            match found.and_then(|(v, pos)| m.cores[v as usize].take_at(pos)) {
                Some(it) => {
                    if it.thread != NO_THREAD && it.kind(l) != SfKind::Irq {
                        // Linux idle balancing migrates the thread.
                        let app_cores = m.app_range();
                        if let Some(h) = m.home.get_mut(it.thread as usize) {
                            if c < app_cores {
                                *h = c;
                            }
                        }
                    }
                    vec![it]
                }
                None => vec![],
            }
        };
        match self.tech {
            Technique::Linux | Technique::Slicc => {
                let f = longest(self, 0..n, &thread_work);
                one(self, f)
            }
            Technique::SelectiveOffload | Technique::FlexSc | Technique::RegionSched => {
                let range = if c < app { 0..app } else { app..n };
                let f = longest(self, range, &|_: &Item| true);
                one(self, f)
            }
            Technique::SchedTask(v) => {
                if !self.alloc.ready {
                    let f = longest(self, 0..n, &thread_work);
                    return one(self, f);
                }
                if !v.stealing {
                    return vec![];
                }
                let mine = self.alloc.types_of[c as usize].clone();
                // 1. The same type first.
                if let Some(got) = self.steal_type(c, |ty| mine.contains(&ty)) {
                    return got;
                }
                // 2. Then the type overlapping most with ours (or, without the overlap table,
                // the longest queue's first item).
                if v.overlap {
                    let mut order: Vec<(u32, u16)> = Vec::new();
                    for &t in &mine {
                        for &o in self.alloc.overlap.ranked(t as usize) {
                            order.push((self.alloc.overlap.get(t as usize, o), o as u16));
                        }
                    }
                    order.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
                    for (_, o) in order {
                        if let Some(got) = self.steal_type(c, |ty| ty == o) {
                            return got;
                        }
                    }
                    vec![]
                } else {
                    let f = longest(self, 0..n, &|_: &Item| true);
                    one(self, f)
                }
            }
        }
    }

    /// Up to [`STEAL_BATCH`] waiting items whose type passes `want`, from the core holding the
    /// most of them.
    fn steal_type(&mut self, c: u32, want: impl Fn(u16) -> bool) -> Option<Vec<Item>> {
        let mut best: Option<(usize, u32)> = None;
        for (v, core) in self.cores.iter().enumerate() {
            if v as u32 == c {
                continue;
            }
            let k = core.queue.iter().filter(|it| want(it.ty)).count();
            if k > 0 && best.map_or(true, |b| k > b.0) {
                best = Some((k, v as u32));
            }
        }
        let (_, v) = best?;
        let core = &mut self.cores[v as usize];
        let mut got = Vec::new();
        let mut i = 0;
        while i < core.queue.len() && got.len() < STEAL_BATCH {
            if want(core.queue[i].ty) {
                if let Some(it) = core.take_at(i) {
                    got.push(it);
                }
            } else {
                i += 1;
            }
        }
        Some(got)
    }

    /// Run `it` on idle core `c` now: walk its lines through the caches, charge the stalls.
    fn start(&mut self, c: u32, it: Item) {
        let l = self.l;
        let o = self.o;
        let ty = &l.types[it.ty as usize];
        let instr = it.instructions as u64;
        let mut rng_u: u64 = self.rng.gen::<u64>() | 1; // xorshift must not start at 0
        let mut next_u = || {
            // xorshift64*: cheap per-invocation offsets from one ChaCha draw.
            rng_u ^= rng_u >> 12;
            rng_u ^= rng_u << 25;
            rng_u ^= rng_u >> 27;
            rng_u.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let core = &mut self.cores[c as usize];
        let (mut i_miss, mut i_l2, mut i_far) = (0u64, 0u64, 0u64);
        let (mut d_miss, mut d_bounce) = (0u64, 0u64);
        // Code: a contiguous run of the type's hot lines, about one line per 16 instructions
        // (a 64-byte line holds ~16 x86 instructions).
        let n_code = ((instr / 16).max(1) as usize).min(ty.code.len());
        let start = (next_u() as usize) % ty.code.len().max(1);
        let map = &mut self.epoch_maps[it.ty as usize];
        let mut last_page = u64::MAX;
        // (Two slices instead of an index modulo the length: a division per line costs more
        // than the cache lookup.)
        let (tail, head) = ty.code.split_at(start);
        for &line in head.iter().chain(tail).take(n_code) {
            let page = line / LINES_PER_PAGE;
            if page != last_page {
                map.insert_page(page + PAGE_BASE);
                last_page = page;
            }
            if core.icache.access(line, 0) != Lookup::Hit {
                i_miss += 1;
                if core.l2.access(line, 0) == Lookup::Hit {
                    i_l2 += 1;
                } else {
                    i_far += 1;
                }
            }
        }
        // Data: each touch returns its stall cycles before exposure.
        let versions = &mut self.versions;
        let writer = &mut self.writer;
        let mut touch = |core: &mut Core, line: u64, write: bool| -> u64 {
            let li = line as usize;
            let ver = versions[li];
            let mut cost = 0;
            if core.dcache.access(line, ver) != Lookup::Hit {
                d_miss += 1;
                let other_wrote = writer[li] != u8::MAX && writer[li] as u32 != c;
                cost = match core.l2.access(line, ver) {
                    Lookup::Hit => o.l2_hit_cycles,
                    Lookup::Stale => {
                        d_bounce += 1;
                        o.bounce_cycles
                    }
                    // Last written by another core: its cache has the current copy.
                    Lookup::Miss if other_wrote => {
                        d_bounce += 1;
                        o.bounce_cycles
                    }
                    Lookup::Miss => o.l3_hit_cycles,
                };
            }
            if write {
                let nv = versions[li].wrapping_add(1);
                versions[li] = nv;
                writer[li] = c as u8;
                core.dcache.access(line, nv);
                core.l2.access(line, nv);
            }
            cost
        };
        let (mut stall_random, mut stall_lock, mut stall_seq) = (0u64, 0u64, 0u64);
        if !ty.shared.is_empty() {
            let n = ((instr / 50).max(1) as usize).min(ty.shared.len());
            let s = (next_u() as usize) % ty.shared.len();
            let (tail, head) = ty.shared.split_at(s);
            // Some shared lines are written (reference counts, LRU lists, statistics).
            let threshold = (o.shared_write_fraction * (1u64 << 24) as f64) as u64;
            for &line in head.iter().chain(tail).take(n) {
                let write = (next_u() >> 40) < threshold;
                stall_random += touch(core, line, write);
            }
        }
        for &lk in &ty.locks {
            stall_lock += touch(core, lk, true);
        }
        if it.thread != NO_THREAD && matches!(ty.kind, SfKind::App | SfKind::Syscall) {
            let buf = l.buffer_base + it.thread as u64 * BUFFER_LINES;
            if ty.kind == SfKind::App {
                let p0 = l.private_base + it.thread as u64 * l.private_lines;
                let n = ((instr / 30).max(1)).min(l.private_lines);
                let s = next_u() % l.private_lines.max(1);
                for k in s..s + n {
                    let k = if k >= l.private_lines {
                        k - l.private_lines
                    } else {
                        k
                    };
                    stall_random += touch(core, p0 + k, false);
                }
                // The application fills and consumes part of its I/O buffer.
                for k in 0..APP_BUFFER_LINES {
                    stall_seq += touch(core, buf + k, true);
                }
            } else {
                for k in 0..(ty.copy_lines as u64).min(BUFFER_LINES) {
                    stall_seq += touch(core, buf + k, ty.writes_buffer);
                }
            }
        }
        let stream = ty.stream_lines as u64 + (ty.stream_per_kinstr * instr as f64 / 1000.0) as u64;
        for _ in 0..stream {
            let line = self.next_stream;
            self.next_stream += 1;
            core.dcache.access(line, 0);
            core.l2.access(line, 0);
            d_miss += 1;
            stall_seq += o.memory_cycles;
        }
        // Cycles: base CPI plus the stalls. Front-end (i-side) misses stall fully; the
        // out-of-order core hides part of a random data miss, an atomic on a lock line waits
        // for it, and prefetchers hide most of a sequential copy.
        let stall_i = i_l2 * o.l2_hit_cycles + i_far * o.l3_hit_cycles;
        let cycles = (instr as f64 * o.base_cpi
            + stall_i as f64
            + o.random_stall_exposed * stall_random as f64
            + o.lock_stall_exposed * stall_lock as f64
            + o.sequential_stall_exposed * stall_seq as f64)
            .max(1.0) as u64;
        // Bookkeeping.
        core.recent.copy_within(0..3, 1);
        core.recent[0] = it.ty;
        core.running = Some(it);
        let end = self.now + cycles;
        let (w0, w1) = self.window;
        let busy = end.min(w1).saturating_sub(self.now.max(w0));
        core.busy_cycles += busy;
        self.epoch_time[it.ty as usize] += cycles;
        self.epoch_busy_all += cycles;
        if ty.kind != SfKind::App {
            self.epoch_busy_os += cycles;
        }
        if self.now >= w0 && self.now < w1 {
            let cn = &mut self.counts;
            cn.instructions += instr;
            if ty.kind != SfKind::App {
                cn.os_instructions += instr;
            }
            cn.i_accesses += (instr / 4).max(n_code as u64);
            cn.i_misses += i_miss;
            cn.d_accesses += ((instr as f64 * 0.35) as u64).max(d_miss);
            cn.d_misses += d_miss;
            cn.bounces += d_bounce;
            cn.invocations += 1;
            self.type_cycles[it.ty as usize] += busy;
        }
        if it.thread != NO_THREAD
            && (it.thread as usize) < self.last_core.len()
            && it.is_thread_work(l)
        {
            self.last_core[it.thread as usize] = c;
        }
        self.push_ev(end, Ev::CoreDone(c));
    }

    /// End of an epoch: the partitioning techniques re-plan from its profile.
    fn epoch(&mut self) {
        self.epochs_done += 1;
        let n = self.o.cores;
        match self.tech {
            Technique::FlexSc | Technique::RegionSched if self.epoch_busy_all > 0 => {
                let share = self.epoch_busy_os as f64 / self.epoch_busy_all as f64;
                let os = ((share * n as f64).round() as u32).clamp(1, n - 1);
                self.alloc.app_cores = n - os;
                self.rehome();
            }
            Technique::SchedTask(v) => self.talloc(v),
            _ => {}
        }
        for t in self.epoch_time.iter_mut() {
            *t = 0;
        }
        for m in self.epoch_maps.iter_mut() {
            m.clear();
        }
        self.epoch_busy_os = 0;
        self.epoch_busy_all = 0;
        self.push_ev(self.now + self.epoch_cycles, Ev::Epoch);
    }

    /// TAlloc: cores per type in proportion to last epoch's time; types that must share a core
    /// are packed with the types they overlap most.
    fn talloc(&mut self, v: super::SchedTaskVariant) {
        let n = self.o.cores as usize;
        let nt = self.l.types.len();
        let total: u64 = self.epoch_time.iter().sum();
        if total == 0 {
            return;
        }
        self.alloc.overlap = OverlapTable::build(&self.epoch_maps);
        let share: Vec<f64> = self
            .epoch_time
            .iter()
            .map(|&t| t as f64 / total as f64 * n as f64)
            .collect();
        let mut cores_of: Vec<Vec<u32>> = vec![Vec::new(); nt];
        let mut types_of: Vec<Vec<u16>> = vec![Vec::new(); n];
        if v.random_allocation {
            // Ablation: as many cores per type, but chosen at random.
            for t in 0..nt {
                if share[t] <= 0.0 {
                    continue;
                }
                let k = (share[t].round() as usize).clamp(1, n);
                let mut picked: Vec<u32> = Vec::new();
                while picked.len() < k {
                    let c = self.rng.gen_range(0..n as u32);
                    if !picked.contains(&c) {
                        picked.push(c);
                    }
                }
                for &c in &picked {
                    types_of[c as usize].push(t as u16);
                }
                cores_of[t] = picked;
            }
        } else {
            let mut order: Vec<usize> = (0..nt).filter(|&t| share[t] > 0.0).collect();
            order.sort_by(|&a, &b| share[b].total_cmp(&share[a]).then(a.cmp(&b)));
            let mut next = 0u32;
            let mut pieces: Vec<(usize, f64)> = Vec::new();
            for &t in &order {
                let whole = (share[t].floor() as u32).min(n as u32 - next);
                for _ in 0..whole {
                    cores_of[t].push(next);
                    types_of[next as usize].push(t as u16);
                    next += 1;
                }
                let frac = share[t] - whole as f64;
                if frac > 1e-9 {
                    pieces.push((t, frac));
                }
            }
            // Pack the fractional pieces onto the remaining cores: seed each core with the
            // largest piece left, then add the piece overlapping most with what the core has
            // (without the overlap table: the next largest) while it fits.
            pieces.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let mut left = pieces;
            while !left.is_empty() && (next as usize) < n {
                let (t0, f0) = left.remove(0);
                let c = next;
                next += 1;
                let mut load = f0;
                let mut here = vec![t0];
                loop {
                    let score = |t: usize| -> u32 {
                        here.iter().map(|&h| self.alloc.overlap.get(h, t)).sum()
                    };
                    let pick = left
                        .iter()
                        .enumerate()
                        .filter(|(_, p)| load + p.1 <= 1.05)
                        .max_by(|a, b| {
                            let (sa, sb) = if v.overlap {
                                (score(a.1 .0), score(b.1 .0))
                            } else {
                                (0, 0)
                            };
                            sa.cmp(&sb)
                                .then(a.1 .1.total_cmp(&b.1 .1))
                                .then(b.0.cmp(&a.0))
                        })
                        .map(|(i, _)| i);
                    match pick {
                        Some(i) => {
                            let (t, f) = left.remove(i);
                            load += f;
                            here.push(t);
                        }
                        None => break,
                    }
                }
                for &t in &here {
                    cores_of[t].push(c);
                    types_of[c as usize].push(t as u16);
                }
            }
            // Pieces left when the cores ran out join the core serving the type they overlap
            // most (else the core serving the fewest types).
            for (t, _) in left {
                let mut best = (0u32, 0usize);
                for (c, here) in types_of.iter().enumerate() {
                    let s: u32 = here
                        .iter()
                        .map(|&h| {
                            if v.overlap {
                                self.alloc.overlap.get(h as usize, t)
                            } else {
                                0
                            }
                        })
                        .sum();
                    if s > best.0 {
                        best = (s, c);
                    }
                }
                let c = if best.0 > 0 {
                    best.1
                } else {
                    (0..n).min_by_key(|&c| types_of[c].len()).unwrap_or(0)
                };
                cores_of[t].push(c as u32);
                types_of[c].push(t as u16);
            }
        }
        self.alloc.cores_of = cores_of;
        self.alloc.types_of = types_of;
        self.alloc.ready = true;
    }

    fn outcome(self) -> Outcome {
        let (w0, w1) = self.window;
        let window = (w1 - w0) as f64;
        let cores = self.o.cores as f64;
        let c = self.counts;
        let busy: u64 = self.cores.iter().map(|c| c.busy_cycles).sum();
        let ratio = |a: u64, b: u64| {
            if b == 0 {
                f64::NAN
            } else {
                a as f64 / b as f64
            }
        };
        let type_total: u64 = self.type_cycles.iter().sum();
        let mut type_share: Vec<(String, f64)> = self
            .l
            .types
            .iter()
            .zip(&self.type_cycles)
            .map(|(t, &cy)| (t.name.clone(), ratio(cy, type_total)))
            .collect();
        type_share.sort_by(|a, b| b.1.total_cmp(&a.1));
        let allocation = self
            .alloc
            .cores_of
            .iter()
            .enumerate()
            .filter(|(_, v)| !v.is_empty())
            .map(|(t, v)| (self.l.types[t].name.clone(), v.len() as u32))
            .collect();
        Outcome {
            benchmark: self.l.name.to_string(),
            technique: self.tech.label(),
            instructions: c.instructions,
            window_cycles: w1 - w0,
            throughput_ipc: c.instructions as f64 / window,
            per_core_ipc: c.instructions as f64 / window / cores,
            icache_hit_rate: 1.0 - ratio(c.i_misses, c.i_accesses),
            dcache_hit_rate: 1.0 - ratio(c.d_misses, c.d_accesses),
            idle_fraction: 1.0 - busy as f64 / (window * cores),
            os_instruction_share: ratio(c.os_instructions, c.instructions),
            bounces_per_kinstr: 1000.0 * ratio(c.bounces, c.instructions),
            invocations: c.invocations,
            type_time_share: type_share,
            last_allocation: allocation,
            epochs: self.epochs_done,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedtask::{layout::Layout, workload, SchedTaskVariant};

    fn filesrv() -> Layout {
        Layout::build(workload::benchmark("FileSrv").unwrap()).unwrap()
    }

    fn small() -> Options {
        Options {
            cores: 4,
            epoch_ms: 0.3,
            ..Options::default()
        }
    }

    /// A map with bits `lo..hi`.
    fn bits(lo: usize, hi: usize) -> PageHeatmap {
        let mut m = PageHeatmap::new();
        for b in lo..hi {
            m.set_bit(b);
        }
        m
    }

    fn planned(v: SchedTaskVariant) -> (Vec<Vec<u32>>, Vec<Vec<u16>>) {
        let l = filesrv();
        let mut m = Model::new(&l, Technique::SchedTask(v), small(), 1).unwrap();
        // Types 1 and 2 take a core each; 3, 4, 5, 6 half a core each. 3 overlaps 5 (bits
        // 0..40 vs 10..50: 30 in common) and 4 overlaps 6 (100..140 vs 110..150); across the
        // pairs they share a few bits (3 and 4: 35..40 vs 100: none; 5 and 4: none).
        m.epoch_time = vec![0; l.types.len()];
        m.epoch_time[1] = 250;
        m.epoch_time[2] = 250;
        for t in 3..=6 {
            m.epoch_time[t] = 125;
        }
        m.epoch_maps = vec![PageHeatmap::new(); l.types.len()];
        m.epoch_maps[3] = bits(0, 40);
        m.epoch_maps[4] = bits(100, 140);
        m.epoch_maps[5] = bits(10, 50);
        m.epoch_maps[6] = bits(110, 150);
        m.talloc(v);
        (m.alloc.cores_of, m.alloc.types_of)
    }

    #[test]
    fn talloc_gives_cores_in_proportion_and_pairs_overlapping_types() {
        let (cores_of, types_of) = planned(SchedTaskVariant::FULL);
        // 4 cores: 250/1000 of the time is one core each for types 1 and 2.
        assert_eq!(cores_of[1], vec![0]);
        assert_eq!(cores_of[2], vec![1]);
        // The half-core types share the last two cores by overlap: {3, 5} and {4, 6}.
        assert_eq!(types_of[2], vec![3, 5]);
        assert_eq!(types_of[3], vec![4, 6]);
        assert!(cores_of[0].is_empty() && cores_of[7].is_empty());
    }

    #[test]
    fn without_the_overlap_table_talloc_packs_by_size_then_index() {
        let (_, types_of) = planned(SchedTaskVariant {
            overlap: false,
            ..SchedTaskVariant::FULL
        });
        assert_eq!(types_of[2], vec![3, 4]);
        assert_eq!(types_of[3], vec![5, 6]);
    }

    #[test]
    fn runs_are_pure_functions_of_the_seed() {
        let l = filesrv();
        for t in Technique::all() {
            let a = Model::new(&l, t, small(), 7).unwrap().run();
            let b = Model::new(&l, t, small(), 7).unwrap().run();
            assert_eq!(a, b, "{}", t.label());
            assert!(a.instructions > 0);
            assert!(
                (0.0..=1.0).contains(&a.idle_fraction),
                "{}",
                a.idle_fraction
            );
            assert!(a.icache_hit_rate > 0.0 && a.icache_hit_rate <= 1.0);
            assert!(a.dcache_hit_rate > 0.0 && a.dcache_hit_rate <= 1.0);
        }
        let a = Model::new(&l, Technique::Linux, small(), 7).unwrap().run();
        let c = Model::new(&l, Technique::Linux, small(), 8).unwrap().run();
        assert_ne!(a.instructions, c.instructions);
    }

    #[test]
    fn the_measured_os_share_follows_the_profile() {
        // FileSrv's profile says 90 % of instructions are the OS's.
        let l = filesrv();
        let o = Options {
            cores: 8,
            ..Options::default()
        };
        let r = Model::new(&l, Technique::Linux, o, 3).unwrap().run();
        assert!(
            (r.os_instruction_share - 0.9).abs() < 0.02,
            "{}",
            r.os_instruction_share
        );
    }

    #[test]
    fn schedtask_allocates_after_its_first_epoch_and_linux_never_does() {
        let l = filesrv();
        let r = Model::new(&l, Technique::SCHEDTASK, small(), 2)
            .unwrap()
            .run();
        assert!(r.epochs >= 1);
        let cores: u32 = r.last_allocation.iter().map(|a| a.1).sum();
        // Every core serves at least one type (types sharing a core count once each).
        assert!(cores >= 4, "{:?}", r.last_allocation);
        let r = Model::new(&l, Technique::Linux, small(), 2).unwrap().run();
        assert!(r.last_allocation.is_empty());
    }

    #[test]
    fn bad_options_are_refused() {
        let l = filesrv();
        let o = Options {
            cores: 1,
            ..Options::default()
        };
        assert!(Model::new(&l, Technique::Linux, o, 1).is_err());
        let o = Options {
            epoch_ms: 0.0,
            ..Options::default()
        };
        assert!(Model::new(&l, Technique::Linux, o, 1).is_err());
    }
}
