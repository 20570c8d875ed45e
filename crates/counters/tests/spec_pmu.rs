//! Event lists resolved against fixture PMU trees of machines we have (this VM) and do not have
//! (Intel, Intel hybrid, AMD).

use counterpoint_counters::pmu::PmuError;
use counterpoint_counters::spec::{parse_event_list, Source, SpecError};
use counterpoint_counters::PmuTree;
use std::path::PathBuf;

fn tree(name: &str) -> PmuTree {
    PmuTree::new(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/pmu")
            .join(name),
    )
}

#[test]
fn vm_tree_lists_real_pmus() {
    let t = tree("vm");
    assert_eq!(
        t.list(),
        vec!["breakpoint", "msr", "software", "tracepoint", "uprobe"]
    );
    assert_eq!(t.pmu("software").unwrap().type_, 1);
    assert_eq!(t.pmu("tracepoint").unwrap().type_, 2);
    assert_eq!(t.pmu("breakpoint").unwrap().type_, 5);
}

#[test]
fn vm_msr_tsc_by_pmu_and_bare_name() {
    let t = tree("vm");
    let msr_type = t.pmu("msr").unwrap().type_;
    let l = parse_event_list("msr/tsc/,tsc,msr/event=0x4/", &t).unwrap();
    let v: Vec<_> = l.events().collect();
    assert_eq!(v.len(), 3);
    assert_eq!((v[0].type_, v[0].config), (msr_type, 0));
    assert_eq!(v[0].source, Source::Pmu("msr".into()));
    assert_eq!(v[1].name, "msr/tsc/");
    assert_eq!(v[2].config, 4);
}

#[test]
fn vm_uprobe_formats() {
    let t = tree("vm");
    let l = parse_event_list("uprobe/retprobe,ref_ctr_offset=0x10/", &t).unwrap();
    let e = l.events().next().unwrap();
    assert_eq!(e.config, 1 | (0x10 << 32));
}

#[test]
fn unknown_pmu_lists_present_ones() {
    let t = tree("vm");
    let err = parse_event_list("cpu/event=0x3c/", &t).unwrap_err();
    match &err {
        SpecError::Pmu(PmuError::UnknownPmu { pmu, available }) => {
            assert_eq!(pmu, "cpu");
            assert!(available.contains(&"msr".to_string()));
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("unknown PMU 'cpu'") && msg.contains("msr"),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
}

#[test]
fn intel_terms_and_named_events() {
    let t = tree("intel");
    let cpu = t.pmu("cpu").unwrap();
    assert_eq!(cpu.type_, 4);
    let l = parse_event_list(
        "cpu/event=0x3c,umask=0x01,cmask=2,inv,edge/,cpu/cpu-cycles/u,cpu/mem-loads,ldlat=5/",
        &t,
    )
    .unwrap();
    let v: Vec<_> = l.events().collect();
    assert_eq!(
        v[0].config,
        0x3c | (1 << 8) | (2 << 24) | (1 << 23) | (1 << 18)
    );
    assert_eq!(v[1].config, 0x3c);
    assert!(v[1].exclude_kernel && !v[1].exclude_user);
    // The alias sets ldlat=3; the override after it wins.
    assert_eq!(v[2].config, 0xcd | (1 << 8));
    assert_eq!(v[2].config1, 5);
}

#[test]
fn intel_scale_and_unit() {
    let t = tree("intel");
    let l = parse_event_list("power/energy-pkg/,cpu/topdown-total-slots/", &t).unwrap();
    let v: Vec<_> = l.events().collect();
    assert_eq!(v[0].type_, 21);
    assert_eq!(v[0].unit.as_deref(), Some("Joules"));
    assert!((v[0].scale - 2.328_306_436_538_696_3e-10).abs() < 1e-20);
    assert_eq!(v[1].scale, 2.0);
    assert_eq!(v[1].unit, None);
}

#[test]
fn unknown_term_and_too_wide() {
    let t = tree("intel");
    match parse_event_list("cpu/evnt=1/", &t).unwrap_err() {
        SpecError::Pmu(PmuError::UnknownTerm {
            term, available, ..
        }) => {
            assert_eq!(term, "evnt");
            assert!(available.contains(&"event".to_string()));
        }
        other => panic!("{other:?}"),
    }
    match parse_event_list("cpu/umask=0x100/", &t).unwrap_err() {
        SpecError::Pmu(PmuError::ValueTooWide { bits, value, .. }) => {
            assert_eq!((bits, value), (8, 0x100));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        parse_event_list("cpu/edge=2/", &t),
        Err(SpecError::Pmu(PmuError::ValueTooWide { bits: 1, .. }))
    ));
    assert!(matches!(
        parse_event_list("cpu/event=zz/", &t),
        Err(SpecError::BadValue { .. })
    ));
}

#[test]
fn unknown_named_event_suggests_pmu_events() {
    let t = tree("intel");
    let err = parse_event_list("cpu/cpu-cycle/", &t).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cpu/cpu-cycles/"), "{msg}");
    let err = parse_event_list("energy-pkgs", &t).unwrap_err();
    assert!(err.to_string().contains("energy-pkg"), "{err}");
}

#[test]
fn hybrid_bare_alias_expands_per_core_pmu() {
    let t = tree("hybrid");
    let core = t.pmu("cpu_core").unwrap();
    let atom = t.pmu("cpu_atom").unwrap();
    assert_eq!((core.type_, atom.type_), (4, 10));
    assert_eq!(core.cpus.as_ref().unwrap().to_list(), "0-7");
    assert_eq!(atom.cpus.as_ref().unwrap().to_list(), "8-15");
    let l = parse_event_list("topdown-retiring", &t).unwrap();
    let v: Vec<_> = l.events().collect();
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].name, "cpu_atom/topdown-retiring/");
    assert_eq!((v[0].type_, v[0].config), (10, 0xc2));
    assert_eq!((v[1].type_, v[1].config), (4, 0x80 << 8));
    // Groups on one PMU.
    let g = parse_event_list("{cpu_core/cpu-cycles/,cpu_core/instructions/}", &t).unwrap();
    assert_eq!(g.groups.len(), 1);
    assert_eq!(g.groups[0].members.len(), 2);
    // ldlat exists only on cpu_core.
    assert!(parse_event_list("cpu_atom/event=1,ldlat=3/", &t).is_err());
    assert!(parse_event_list("cpu_core/event=1,ldlat=3/", &t).is_ok());
}

#[test]
fn amd_split_event_field_and_uncore() {
    let t = tree("amd");
    let l = parse_event_list(
        "cpu/event=0x1c0/,amd_l3/event=0x04,umask=0xff,enallslices,enallcores,threadmask=0x3/,amd_df/event=0x207,umask=0x38/",
        &t,
    )
    .unwrap();
    let v: Vec<_> = l.events().collect();
    assert_eq!(v[0].config, 0xc0 | (1 << 32));
    assert_eq!(v[1].type_, 11);
    assert_eq!(
        v[1].config,
        0x04 | (0xff << 8) | (1 << 46) | (1 << 47) | (3 << 56)
    );
    assert_eq!(v[1].cpus.as_ref().unwrap().to_list(), "0,8,16");
    assert_eq!(v[2].config, 0x07 | (0x38 << 8) | (0x2 << 32));
    assert!(matches!(
        parse_event_list("cpu/event=0x1000/", &t),
        Err(SpecError::Pmu(PmuError::ValueTooWide { bits: 12, .. }))
    ));
}

#[test]
fn commas_inside_pmu_terms_do_not_split() {
    let t = tree("intel");
    let l = parse_event_list("{cpu/event=0x3c,umask=0x1/,instructions},task-clock", &t).unwrap();
    assert_eq!(l.groups.len(), 2);
    assert_eq!(l.groups[0].members.len(), 2);
    assert!(matches!(
        parse_event_list("cpu/event=0x3c,umask=1", &t),
        Err(SpecError::Syntax { .. })
    ));
}

#[test]
fn tracepoint_from_tracefs_fixture() {
    let t = tree("vm");
    let l = parse_event_list("sched:sched_switch", &t).unwrap();
    let e = l.events().next().unwrap();
    assert_eq!((e.type_, e.config), (2, 314));
    assert!(parse_event_list("sched:no_such_tp", &t).is_err());
}

#[test]
fn hybrid_generic_hardware_event_is_one_per_core_pmu() {
    let t = tree("hybrid");
    let l = parse_event_list("cycles:u,LLC-load-misses,task-clock", &t).unwrap();
    let v: Vec<_> = l.events().collect();
    assert_eq!(v.len(), 5);
    assert_eq!(v[0].name, "cpu_atom/cycles:u/");
    assert_eq!((v[0].type_, v[0].config), (0, 10 << 32));
    assert!(v[0].exclude_kernel);
    assert_eq!(v[1].name, "cpu_core/cycles:u/");
    assert_eq!(v[1].config, 4 << 32);
    assert_eq!(v[1].cpus.as_ref().unwrap().to_list(), "0-7");
    assert_eq!(v[1].canonical, "cycles");
    assert_eq!((v[2].type_, v[2].config), (3, 2 | (1 << 16) | (10 << 32)));
    // Software events are not per PMU.
    assert_eq!(v[4].name, "task-clock");
    // On a non-hybrid machine nothing is expanded.
    let l = parse_event_list("cycles", &tree("intel")).unwrap();
    assert_eq!(l.events().next().unwrap().config, 0);
}

#[test]
fn tracepoint_without_tracefs_says_so() {
    let t = tree("intel");
    let err = parse_event_list("sched:sched_switch", &t).unwrap_err();
    assert!(matches!(err, SpecError::NoTracefs { .. }), "{err}");
    assert!(err.to_string().contains("tracefs"), "{err}");
    // With tracefs present, an unknown tracepoint is an unknown event.
    assert!(matches!(
        parse_event_list("sched:nope", &tree("vm")),
        Err(SpecError::UnknownEvent { .. })
    ));
}
