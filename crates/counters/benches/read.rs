//! Criterion: ns per counter read — our layer, raw read(2) on the same fd, perf-event2's
//! read_full, and a group of three. (No user-space rdpmc path exists without a hardware PMU.)

use counterpoint_counters::readbench::{group3, open_fixture, ours, raw};
use criterion::{criterion_group, criterion_main, Criterion};
use std::hint::black_box;

fn reads(c: &mut Criterion) {
    let mut fx = match open_fixture() {
        Ok(f) => f,
        Err(e) => {
            eprintln!("cannot open task-clock counters: {e}");
            return;
        }
    };
    let mut g = c.benchmark_group("read");
    g.bench_function("ours_single", |b| {
        b.iter(|| black_box(ours(black_box(&fx.single)).ok()))
    });
    g.bench_function("raw_read2_single", |b| {
        b.iter(|| black_box(raw(black_box(&fx.single))))
    });
    g.bench_function("perf_event2_read_full", |b| {
        b.iter(|| black_box(fx.single.read_full().ok()))
    });
    g.bench_function("group_of_three", |b| {
        b.iter(|| black_box(group3(black_box(&fx.group)).ok()))
    });
    g.finish();
}

criterion_group!(benches, reads);
criterion_main!(benches);
