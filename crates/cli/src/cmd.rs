//! One module per subcommand, and the one way they print to stdout.

/// `print!` that returns an error instead of panicking: `out!("{x}")?`.
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cmd::write_stdout(&format!($($arg)*))
    };
}

/// `println!` that returns an error instead of panicking: `outln!("{x}")?`.
macro_rules! outln {
    () => {
        $crate::cmd::write_stdout("\n")
    };
    ($($arg:tt)*) => {
        $crate::cmd::write_stdout(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub mod bench;
pub mod child;
pub mod metrics;

// [mod: counters]
pub mod heatmap;
pub mod stat;

// [mod: sim]
pub mod simulate;
pub mod simulate_plot;

// [mod: policy]
pub mod experiment;
pub mod policies;

// [mod: host]
pub mod agent;
pub mod burn;
pub mod calibrate;
pub mod overhead;
pub mod top;
pub mod topology;

// [mod: selfmon]
pub mod bench_selfmon;

// [mod: lockprof]
pub mod lockprof;

// [mod: broker]
pub mod bench_broker;
pub mod daemon;

// [mod: replica]
pub mod bench_c2c;
// [mods: requests]
pub mod requests;

/// The error of a write to a stdout nobody reads any more (a closed pipe, `| head`): `main` ends
/// the command quietly on it, with the status a process killed by SIGPIPE has.
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout closed")
    }
}

impl std::error::Error for StdoutClosed {}

/// Writes `text` to stdout and flushes it. `println!` panics when stdout cannot be written
/// (`> /dev/full`); this returns "writing to stdout: ..." instead, or [`StdoutClosed`] for a
/// closed pipe (only seen where SIGPIPE is not at its default: `stat`, `agent`).
pub fn write_stdout(text: impl AsRef<[u8]>) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_ref()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("writing to stdout")),
    }
}

/// Whether `err` is (or wraps) a closed stdout.
pub fn is_stdout_closed(err: &anyhow::Error) -> bool {
    err.chain().any(|c| c.is::<StdoutClosed>())
}

/// Bounds of every instruction-pointer sampling period (`heatmap --period-us`, `top` and
/// `agent --heatmap-period-us`), µs of a thread's CPU time: the kernel does not sample a
/// cpu-clock faster than every 10 µs; 10 s is one sample in a long while.
pub const HEATMAP_PERIOD_US_MIN: u64 = 10;
/// See [`HEATMAP_PERIOD_US_MIN`].
pub const HEATMAP_PERIOD_US_MAX: u64 = 10_000_000;

/// `err` and its causes joined by ": ", as anyhow's `{:#}` does, except that a cause whose text
/// already ends the message before it is not repeated: a library error that spells out its
/// `source` in its own message (thiserror's `"...: {source}"`) would otherwise print the OS
/// error twice ("Permission denied (os error 13): Permission denied (os error 13)").
pub fn error_chain(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.is_empty() {
            out = text;
        } else if !text.is_empty() && out != text && !out.ends_with(&format!(": {text}")) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// The most a small input file given on the command line (a calibration table, a benchmark's
/// JSON) may hold: far above any real one (a few KiB), and refused before it is read, so
/// `/dev/zero` or a path to a disk image ends with a message instead of an out-of-memory kill.
pub const MAX_INPUT_FILE_BYTES: u64 = 16 << 20;

/// Reads the text file `path` given by option `flag`, refusing one above
/// [`MAX_INPUT_FILE_BYTES`] before reading it whole.
pub fn read_input_file(flag: &str, path: &std::path::Path) -> anyhow::Result<String> {
    use anyhow::Context as _;
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_INPUT_FILE_BYTES + 1).read_to_end(&mut bytes))
        .with_context(|| format!("{flag} {}", path.display()))?;
    if bytes.len() as u64 > MAX_INPUT_FILE_BYTES {
        anyhow::bail!(
            "{flag} {}: larger than {} MiB, not a file this option reads",
            path.display(),
            MAX_INPUT_FILE_BYTES >> 20
        );
    }
    String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("{flag} {}: not UTF-8 text ({e})", path.display()))
}

/// The longest run `--seconds` accepts (`burn`, `calibrate`): a week, far past any useful run
/// and far inside what a `Duration` holds.
pub const MAX_RUN_SECONDS: f64 = 7.0 * 86_400.0;

/// clap's parser for a run length in decimal seconds: finite, above zero, at most a week.
pub fn parse_run_seconds(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v <= MAX_RUN_SECONDS => Ok(v),
        _ => Err(format!(
            "expected seconds in (0, {MAX_RUN_SECONDS}] (above zero, at most a week), e.g. 0.5"
        )),
    }
}

/// Fail now, before any work, if the file `path` given by option `flag` could not be written
/// at the end: it is a directory, its directory does not exist, or that directory refuses a
/// new file (probed with an empty hidden file, then removed). Nothing is created or truncated
/// at `path` itself.
pub fn check_output_file(flag: &str, path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if path.is_dir() {
        anyhow::bail!("{flag} {}: a directory, not a file", path.display());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!("{flag} {}: no directory {}", path.display(), dir.display());
    }
    probe_write(dir).with_context(|| {
        format!(
            "{flag} {}: cannot write into {}",
            path.display(),
            dir.display()
        )
    })
}

/// Whether `dir` takes a new file: writes an empty hidden probe there, then removes it (best
/// effort: the probe is empty and hidden if it cannot be removed).
fn probe_write(dir: &std::path::Path) -> std::io::Result<()> {
    let probe = dir.join(".counterpoint-write-check");
    std::fs::write(&probe, b"")?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// The nearest proper ancestor of `path` that exists (as a name: a dangling link counts), or
/// "." for a relative name with none: where creating `path` would start.
pub fn nearest_existing_ancestor(path: &std::path::Path) -> &std::path::Path {
    path.ancestors()
        .skip(1)
        .find(|a| !a.as_os_str().is_empty() && std::fs::symlink_metadata(a).is_ok())
        .unwrap_or(std::path::Path::new("."))
}

/// `--sysfs-root` must be a directory: event names resolve against it, and a root that is
/// not there would leave every PMU "missing" with no word about the root itself.
pub fn check_sysfs_root(root: &std::path::Path) -> anyhow::Result<()> {
    match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(m) => anyhow::bail!(
            "--sysfs-root {}: not a directory ({})",
            root.display(),
            counterpoint_host::files::kind(m.file_type())
        ),
        Err(e) => anyhow::bail!("--sysfs-root {}: {e}", root.display()),
    }
}

/// Fail now, before any work, if the `what` (report, results) of `--out DIR` cannot be written
/// into `dir`: an existing directory must take a file (an empty probe file is written and
/// removed); a missing one is created only when the first file is written (so a run refused
/// or interrupted later leaves no empty directory behind), and its nearest existing ancestor
/// must be a directory that takes a file.
pub fn check_out_dir(dir: &std::path::Path, what: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if dir.exists() && !dir.is_dir() {
        anyhow::bail!(
            "--out {}: not a directory (--out names a directory to write the {what} into)",
            dir.display()
        );
    }
    if dir.is_dir() {
        return probe_write(dir)
            .with_context(|| format!("cannot write into the {what} directory {}", dir.display()));
    }
    let ancestor = nearest_existing_ancestor(dir);
    if !ancestor.is_dir() {
        anyhow::bail!(
            "cannot create the {what} directory {}: {} is not a directory",
            dir.display(),
            ancestor.display()
        );
    }
    probe_write(ancestor).with_context(|| {
        format!(
            "cannot create the {what} directory {} (its parent {} takes no file)",
            dir.display(),
            ancestor.display()
        )
    })
}

/// clap's parser for a number of CPUs (`--hungry-cpus`): finite and above zero.
pub fn parse_cpus(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        Ok(_) => Err("expected a number of CPUs above 0 and finite, e.g. 0.5 or 2".into()),
        Err(_) => Err("not a number: expected a number of CPUs above 0, e.g. 0.5 or 2".into()),
    }
}

/// `--interval` (`1s`, `250ms`, `2.5s`, `1m`) in nanoseconds, through the host's one duration
/// parser; a unit it does not know (`100us`) is named as such rather than as a bad number.
pub fn parse_interval(s: &str) -> anyhow::Result<u64> {
    use counterpoint_host::duration::{parse_interval_ns, DurationError};
    match parse_interval_ns(s) {
        Err(DurationError::NotANumber { flag, text, number }) => {
            let unit_at = number
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .len();
            if unit_at < number.len() && number[..unit_at].trim().parse::<f64>().is_ok() {
                let unit = &text.trim()[unit_at..];
                anyhow::bail!(
                    "{flag} {text:?}: the unit {unit:?} is not supported (units: ms, s, m, h; \
                     e.g. 250ms, 1s)"
                );
            }
            Err(DurationError::NotANumber { flag, text, number }.into())
        }
        other => Ok(other?),
    }
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    /// What thiserror's `#[error("opening thread {tid}: {source}")]` derives.
    #[derive(Debug)]
    struct SpelledOut {
        tid: u32,
        source: std::io::Error,
    }

    impl std::fmt::Display for SpelledOut {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "opening thread {}: {}", self.tid, self.source)
        }
    }

    impl std::error::Error for SpelledOut {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn a_cause_the_message_already_spells_out_is_printed_once() {
        let err = anyhow::Error::new(SpelledOut {
            tid: 7,
            source: std::io::Error::from_raw_os_error(libc::EACCES),
        })
        .context("opening the samplers");
        let text = error_chain(&err);
        assert_eq!(
            text,
            "opening the samplers: opening thread 7: Permission denied (os error 13)"
        );
    }

    /// Only a whole ": cause" suffix counts as spelled out: "exit status 12" then "2" is two
    /// facts.
    #[test]
    fn a_cause_that_only_ends_the_last_word_is_kept() {
        let err = anyhow::Error::msg("2").context("the child failed with exit status 12");
        assert_eq!(error_chain(&err), "the child failed with exit status 12: 2");
    }

    #[test]
    fn causes_not_in_the_message_are_all_printed() {
        let err = anyhow::Error::new(std::io::Error::from_raw_os_error(libc::ENOENT))
            .context("reading x.toml")
            .context("loading the scenario");
        assert_eq!(
            error_chain(&err),
            format!("{err:#}"),
            "without repetition the chain is anyhow's own"
        );
        assert!(error_chain(&err).ends_with("No such file or directory (os error 2)"));
    }
}
