//! The cpu-clock IP sampler on a real thread of this process: a thread that only reads
//! /dev/zero spends its CPU time in the kernel, so its samples are kernel samples on kernel
//! pages (and, where tracefs shows the syscall tracepoints, inside `read`). Nothing here
//! asserts a speed: the test waits (up to a generous deadline) for a number of samples.

use counterpoint_core::superfunction::SuperFunction;
use counterpoint_counters::sampling::{thread_heatmaps, CodeSampler, SyscallTracepoints};
use std::io::Read;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[test]
fn a_thread_reading_dev_zero_gets_kernel_pages() {
    let stop = Arc::new(AtomicBool::new(false));
    let tid = Arc::new(AtomicU32::new(0));
    let reader = {
        let (stop, tid) = (stop.clone(), tid.clone());
        std::thread::spawn(move || {
            // SAFETY: gettid has no arguments and cannot fail.
            tid.store(unsafe { libc::gettid() } as u32, Ordering::SeqCst);
            let mut f = std::fs::File::open("/dev/zero").expect("/dev/zero");
            let mut buf = vec![0u8; 1 << 20];
            while !stop.load(Ordering::Relaxed) {
                f.read_exact(&mut buf).expect("read /dev/zero");
            }
        })
    };
    while tid.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let t = tid.load(Ordering::SeqCst);
    let tracepoints = SyscallTracepoints::find().ok();
    let mut sampler = CodeSampler::new(100_000, true, tracepoints);
    match sampler.watch(t) {
        Ok(true) => {}
        Ok(false) => panic!("the reader thread {t} is gone"),
        Err(e) => {
            // No perf_event (or kernel samples refused) here: nothing to observe.
            eprintln!("skipped: {e}");
            stop.store(true, Ordering::SeqCst);
            reader.join().expect("reader");
            return;
        }
    }
    let mut samples = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while samples.len() < 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        sampler.drain(&mut samples);
    }
    stop.store(true, Ordering::SeqCst);
    reader.join().expect("reader");
    assert!(
        samples.len() >= 100,
        "only {} samples in 120 s",
        samples.len()
    );
    assert!(samples.iter().all(|s| s.tid == t));
    let h = thread_heatmaps(&samples, &[], sampler.syscalls_visible());
    let c = &h[0].code.code;
    // 1 MiB cleared by the kernel per call of a few loop instructions: kernel time dominates.
    assert!(
        c.kernel_samples > c.user_samples,
        "kernel {} vs user {}",
        c.kernel_samples,
        c.user_samples
    );
    assert!(c.kernel.popcount() >= 1);
    if sampler.syscalls_visible() {
        // read(2) is where the kernel time goes.
        assert_eq!(c.dominant(), Some(SuperFunction::Syscall(0)), "{c:?}");
        assert!(c.syscalls.iter().any(|s| s.nr == 0 && !s.kernel.is_empty()));
    } else {
        assert_eq!(c.dominant(), Some(SuperFunction::Kernel));
    }
}
