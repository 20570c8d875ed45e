//! Workloads: where a task's instructions come from — programs and shells as phase
//! sequences, servers as requests drawn from weighted classes by the task's own stream.

use super::*;

pub(super) fn seq_source(
    programs: &[crate::spec::Program],
    intern: &mut impl FnMut(&Profile) -> Result<u32, SimError>,
) -> Result<Source, SimError> {
    let mut phases = Vec::new();
    let mut ends = Vec::new();
    for p in programs {
        if p.phases.is_empty() || p.instructions() == 0 {
            return Err(SimError::Invalid(format!("program {} has no work", p.name)));
        }
        for (i, ph) in p.phases.iter().enumerate() {
            phases.push((intern(&ph.profile)?, ph.instructions.max(1)));
            ends.push(i + 1 == p.phases.len());
        }
    }
    Ok(Source::Seq {
        phases,
        ends_program: ends,
        pos: 0,
    })
}

pub(super) fn first_phase(src: &mut Source) -> (u32, u64) {
    match src {
        Source::Seq { phases, .. } => phases[0],
        Source::Server { classes, rng } => draw(classes, rng),
    }
}

pub(super) fn draw(classes: &[(f64, u32, u64)], rng: &mut ChaCha8Rng) -> (u32, u64) {
    let u: f64 = rng.gen();
    let i = classes
        .iter()
        .position(|c| u < c.0)
        .unwrap_or(classes.len() - 1);
    (classes[i].1, classes[i].2)
}

pub(super) enum Next {
    /// Next phase (profile, instructions), whether the finished phase ended a program, and
    /// whether the next phase starts a new process (a shell's or a repetition's next program:
    /// its data is in none of the finished program's cache lines). A server's next request
    /// ends one (a completion) but runs in the same process, on the same warm cache.
    Phase(u32, u64, bool, bool),
    Done,
}

pub(super) fn next_phase(src: &mut Source, repeat: bool) -> Next {
    match src {
        Source::Seq {
            phases,
            ends_program,
            pos,
        } => {
            let ended = ends_program[*pos];
            if *pos + 1 < phases.len() {
                *pos += 1;
            } else if repeat {
                *pos = 0;
            } else {
                return Next::Done;
            }
            let (p, n) = phases[*pos];
            Next::Phase(p, n, ended, ended)
        }
        Source::Server { classes, rng } => {
            let (p, n) = draw(classes, rng);
            Next::Phase(p, n, true, false)
        }
    }
}
