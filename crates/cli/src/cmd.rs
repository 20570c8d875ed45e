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
pub mod bench_stop;
pub mod child;
pub mod metrics;
pub mod negative;

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
    elide_middle(&out, MAX_ERROR_CHARS)
}

pub use counterpoint_core::text::printable;

/// Columns `text` takes on a terminal (a CJK character two, a combining mark none).
pub fn display_width(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `text` padded with spaces on the right to `width` terminal columns: `{:<w$}` counts
/// characters, and a CJK name shifted the rest of its row (CLI probe, session 27).
pub fn pad_right(text: &str, width: usize) -> String {
    let w = display_width(text);
    format!("{text}{}", " ".repeat(width.saturating_sub(w)))
}

/// The longest error message printed whole. Messages quote the input they refuse, and a
/// scenario with a 1 MB key gave a 2 MB error line (CLI probe, session 27).
pub const MAX_ERROR_CHARS: usize = 4000;

/// `text` cut to about `max` characters by leaving out its middle, which says how much it left
/// out: the start names the file, line and field, the end the advice.
pub fn elide_middle(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        return text.to_string();
    }
    let (head, tail) = (max * 2 / 3, max / 3);
    let start: String = text.chars().take(head).collect();
    let end: String = text.chars().skip(n - tail).collect();
    format!(
        "{start} [... {} characters left out ...] {end}",
        n - head - tail
    )
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

/// Catch the stop signals (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT) of a command that writes its
/// output files as one set (`simulate --out`, `experiment`): a watcher thread ends the command
/// with "interrupted by SIGNAL" and the shell's status for it (128 + its number) within 50 ms,
/// except while something holds `counterpoint_experiment::exit::guard` (the renames of
/// [`write_out_set`]; a `requests` run entering its cluster) or while a `requests` run has the
/// stop in hand (it ends the command itself, saying what became of its cluster). Without it
/// the default action killed the command between two renames, leaving a mix of new and old
/// files.
pub fn exit_on_interrupt() -> anyhow::Result<()> {
    use anyhow::Context as _;
    use counterpoint_host::signals;
    signals::install_only(signals::INTERRUPTING).context("catching Ctrl-C")?;
    std::thread::Builder::new()
        .name("interrupt".into())
        .spawn(|| loop {
            std::thread::sleep(std::time::Duration::from_millis(50));
            if signals::stop_requested() {
                // Held to the exit: nothing that takes the guard can begin after the check.
                let _guard = counterpoint_experiment::exit::guard();
                if counterpoint_experiment::requests::exit_allowed() {
                    end_interrupted(None);
                }
            }
        })
        .context("starting the interrupt watcher")?;
    Ok(())
}

/// Say which signal ended the command, with what was done about it, and exit with 128 + its
/// number. Called by one thread only: the watcher of [`exit_on_interrupt`] exits only while no
/// one holds the exit guard or has taken the stop on itself, and they only while holding it.
pub fn end_interrupted(what_was_done: Option<&str>) -> ! {
    use counterpoint_host::signals;
    let sig = signals::received().unwrap_or(libc::SIGINT);
    match what_was_done {
        None => eprintln!("counterpoint: interrupted by {}", signals::name(sig)),
        Some(what) => eprintln!(
            "counterpoint: interrupted by {}: {what}",
            signals::name(sig)
        ),
    }
    std::process::exit(128 + sig)
}

/// Write `files` (names relative to `dir`) into `dir` as one set
/// (`counterpoint_experiment::report::write_set`): every new file or, after an error or a stop
/// signal, every old one, and no temporary file left. The exit guard is held over the whole
/// write, so the watcher of [`exit_on_interrupt`] cannot end the command between two renames: a
/// signal that comes while the temporary files are written stops the write before any rename
/// (the directory stays as it was), one that comes during the renames lets them finish; either
/// way the command then ends with "interrupted by SIGNAL: ..." saying which. `what` names the
/// set in the message ("report", "results"). `remove` names the replaced set's own files that
/// the new one does not write (`report::replaced_figures`): removed once the new set is in
/// place, never before, so a stop or an error leaves them with the old set; one that cannot
/// be removed is named on stderr. Returns the names of `remove` that are gone.
pub fn write_out_set(
    dir: &std::path::Path,
    files: &[(String, Vec<u8>)],
    remove: &[String],
    what: &str,
) -> anyhow::Result<Vec<String>> {
    use anyhow::Context as _;
    use counterpoint_experiment::report::{write_set, SetWritten};
    use counterpoint_host::signals;
    let _no_exit = counterpoint_experiment::exit::guard();
    let written = write_set(dir, files, remove, &signals::stop_requested)
        .with_context(|| format!("writing the {what} into {}", dir.display()))?;
    let mut removed = remove.to_vec();
    if let SetWritten::Whole { not_removed } = &written {
        removed.retain(|r| not_removed.iter().all(|(n, _)| n != r));
        for (name, why) in not_removed {
            eprintln!(
                "counterpoint: the replaced {what}'s {} was left in {}: {why}",
                printable(name),
                dir.display()
            );
        }
    }
    match written {
        SetWritten::Stopped => end_interrupted(Some(&format!(
            "nothing was written ({} is as it was)",
            dir.display()
        ))),
        SetWritten::Whole { .. } if signals::stop_requested() => end_interrupted(Some(&format!(
            "{} holds the new {what}, written whole before stopping",
            dir.display()
        ))),
        SetWritten::Whole { .. } => Ok(removed),
    }
}

/// Refuse to overwrite, in `--out dir`, any of the files `names` that exists and that `is_own`
/// (given the name and path) does not recognize as written by this command: a hand-written
/// `report.md` or `result.json` was replaced without a word. Absent names, dangling links
/// (their target is created) and devices or FIFOs (written in place, as asked) pass; a directory
/// in a file's place does not. `writer` names the command in the message ("`counterpoint
/// simulate --out`"), which names every such file and the `--force` that overwrites them.
///
/// With `force` only the directories are refused: `--force` overwrites files, and nothing
/// writes a file over a directory.
pub fn refuse_foreign_outputs(
    dir: &std::path::Path,
    names: &[&str],
    is_own: &dyn Fn(&str, &std::path::Path) -> bool,
    writer: &str,
    force: bool,
) -> anyhow::Result<()> {
    let mut foreign = Vec::new();
    let mut dirs = Vec::new();
    for name in names {
        let path = dir.join(name);
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => dirs.push(path.display().to_string()),
            Ok(m) if !force && m.is_file() && !is_own(name, &path) => {
                foreign.push(path.display().to_string())
            }
            _ => {}
        }
    }
    // No flag writes a file over a directory: advising --force there was wrong (CLI probe,
    // session 27: with it the run failed with "Is a directory").
    if !dirs.is_empty() {
        anyhow::bail!(
            "--out {}: {} {} a directory where this run writes a file; move {} away or choose \
             another directory",
            dir.display(),
            dirs.join(", "),
            if dirs.len() == 1 { "is" } else { "are each" },
            if dirs.len() == 1 { "it" } else { "them" }
        );
    }
    match foreign.len() {
        0 => Ok(()),
        1 => anyhow::bail!(
            "--out {}: {} does not look like a file {writer} wrote, and this run would \
             overwrite it; move it away, choose another directory, or pass --force to \
             overwrite it",
            dir.display(),
            foreign[0]
        ),
        _ => anyhow::bail!(
            "--out {}: {} do not look like files {writer} wrote, and this run would \
             overwrite them; move them away, choose another directory, or pass --force to \
             overwrite them",
            dir.display(),
            foreign.join(", ")
        ),
    }
}

/// The first line of the file `path` (with its newline), at most 4 KiB of it: enough to tell
/// a file's kind by its header without reading a large one whole. `None` when unreadable.
pub fn first_line(path: &std::path::Path) -> Option<Vec<u8>> {
    use std::io::{BufRead as _, Read as _};
    let file = std::fs::File::open(path).ok()?;
    let mut line = Vec::new();
    std::io::BufReader::new(file.take(4096))
        .read_until(b'\n', &mut line)
        .ok()?;
    Some(line)
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

/// Seconds in words: `42 s`, `12 min`, `3.5 h`, `70 days` (estimates of long work).
pub(crate) fn human_time(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else if s < 172_800.0 {
        format!("{:.1} h", s / 3600.0)
    } else {
        format!("{:.0} days", s / 86_400.0)
    }
}

#[cfg(test)]
mod tests {
    use super::{display_width, elide_middle, error_chain, pad_right, printable};

    #[test]
    fn names_are_padded_to_terminal_columns() {
        assert_eq!(display_width("数据库"), 6);
        assert_eq!(pad_right("数据库", 8), "数据库  ");
        assert_eq!(pad_right("web", 8), "web     ");
        // Too wide already: left as it is.
        assert_eq!(pad_right("数据库", 4), "数据库");
    }

    #[test]
    fn control_characters_are_escaped_for_a_terminal() {
        assert_eq!(printable("gzip#0"), "gzip#0");
        assert_eq!(printable("red\u{1b}[31mx\u{7}"), "red\\u{1b}[31mx\\u{7}");
        assert_eq!(printable("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(printable("日本"), "日本");
    }

    #[test]
    fn a_long_message_keeps_its_start_and_end() {
        assert_eq!(elide_middle("short", 10), "short");
        let long = format!("f.toml:3:1: {}: unknown field", "k".repeat(1_000_000));
        let cut = elide_middle(&long, 4000);
        assert!(cut.len() < 4100, "{}", cut.len());
        assert!(cut.starts_with("f.toml:3:1: kkk"), "{cut}");
        assert!(cut.ends_with("kkk: unknown field"), "{cut}");
        assert!(
            cut.contains("[... 996028 characters left out ...]"),
            "{cut}"
        );
        // Characters, not bytes: never a cut inside a UTF-8 sequence.
        let wide = "é".repeat(9000);
        assert_eq!(
            elide_middle(&wide, 4000)
                .chars()
                .filter(|&c| c == 'é')
                .count(),
            3999
        );
    }

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
