//! The `report/` directory: `report.md` (every table ours vs the paper, findings, figures),
//! `results.json` (everything, machine-readable) and one SVG bar chart per figure (plotters).

use crate::result::{BarFigure, ExperimentResult, FigureOptions};
use plotters::prelude::*;
use std::fs;
use std::path::{Path, PathBuf};

/// Why the report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A file could not be written.
    #[error("cannot write {}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A figure could not be drawn.
    #[error("cannot draw {path}: {message}")]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// What plotters said.
        message: String,
    },
    /// The results could not be encoded.
    #[error("cannot encode JSON: {0}")]
    Json(#[from] serde_json::Error),
}

fn write(path: &Path, text: &str) -> Result<(), ReportError> {
    write_atomic(path, text.as_bytes()).map_err(|source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Write `bytes` to `path` whole or not at all: into a new file beside it (`.NAME.PID.tmp`),
/// flushed to the disk, then renamed over `path`, and the directory flushed. A full disk or
/// any failed write leaves an existing `path` as it was (it was left truncated) and removes
/// the partial file. The new file keeps an existing file's permissions; a symbolic link is
/// written through, dangling or not (its target is replaced, not the link). Written in place
/// instead, as a plain write would: a path that is not a regular file (`/dev/null`,
/// `/dev/stdout`, a FIFO: renaming over it would replace the device or pipe), and a path whose
/// directory takes no new file (not writable, or the name too long for the temporary one).
/// An existing file this process may not write is refused as a plain write would refuse it
/// (a rename would have replaced it anyway). Hard links to the old file keep the old content.
/// Several files that belong together: [`FileSet`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut set = FileSet::new();
    set.stage_io(path, bytes)?;
    set.commit_io().map_err(|(_, e)| e)
}

/// Files written together, so that a reader of their directory finds either all the new ones or
/// all the old ones, never a mix: each is first written beside its name as [`write_atomic`]
/// writes one (`.NAME.PID.tmp`, flushed), and only [`FileSet::commit`] renames them over their
/// names, one after another, once every one is written. A set dropped before its commit (a
/// failed write, a stop) removes its temporary files and every directory it created that is
/// still empty, and has changed no name. What a rename cannot do atomically stays as it is:
/// a path written in place (see [`write_atomic`]) is written at the commit, in its turn; and a
/// rename that fails during the commit (the directory changed under the run) leaves the files
/// renamed before it and removes the others' temporaries.
#[derive(Default)]
pub struct FileSet {
    /// In the order they were staged (and are committed).
    pending: Vec<Pending>,
    /// Directories [`FileSet::create_dir`] made, outermost first.
    created: Vec<PathBuf>,
    committed: bool,
}

enum Pending {
    /// A flushed temporary file, renamed over `target` at the commit.
    Rename {
        tmp: PathBuf,
        target: PathBuf,
        /// The path the caller named (errors name it).
        named: PathBuf,
        dir: PathBuf,
    },
    /// Written in place at the commit: a device or FIFO, or a directory that takes no new file.
    InPlace {
        target: PathBuf,
        named: PathBuf,
        bytes: Vec<u8>,
    },
}

impl Pending {
    fn named(&self) -> &Path {
        match self {
            Pending::Rename { named, .. } | Pending::InPlace { named, .. } => named,
        }
    }
}

impl FileSet {
    /// An empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Create `dir` and its missing parents; those created are removed again (when empty) if
    /// the set is dropped without its commit, so an interrupted first run leaves no empty
    /// directory behind.
    pub fn create_dir(&mut self, dir: &Path) -> Result<(), ReportError> {
        let missing: Vec<&Path> = dir
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty())
            .take_while(|a| fs::symlink_metadata(a).is_err())
            .collect();
        for d in missing.into_iter().rev() {
            match fs::create_dir(d) {
                Ok(()) => self.created.push(d.to_path_buf()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    return Err(ReportError::Io {
                        path: d.to_path_buf(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }

    /// Write `bytes` beside `path` (see the type), leaving `path` itself as it is until the
    /// commit. Staging a path again replaces its earlier bytes.
    pub fn stage(&mut self, path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
        self.stage_io(path, bytes)
            .map_err(|source| ReportError::Io {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Rename every staged file over its name, in the order staged, then flush their
    /// directories. An error names the file whose rename or write failed.
    pub fn commit(self) -> Result<(), ReportError> {
        self.commit_io()
            .map_err(|(path, source)| ReportError::Io { path, source })
    }

    fn stage_io(&mut self, path: &Path, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write as _;
        let target = match fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => resolve_link(path)?,
            _ => path.to_path_buf(),
        };
        // Staged before (under this name or through a link): the last bytes win, and the
        // earlier temporary file must not be renamed as well.
        if let Some(i) = self.pending.iter().position(|p| match p {
            Pending::Rename { target: t, .. } | Pending::InPlace { target: t, .. } => *t == target,
        }) {
            if let Pending::Rename { tmp, .. } = self.pending.remove(i) {
                let _ = fs::remove_file(tmp);
            }
        }
        let in_place = |bytes: &[u8]| Pending::InPlace {
            target: target.clone(),
            named: path.to_path_buf(),
            bytes: bytes.to_vec(),
        };
        // The permissions the replacement keeps, when there is a file to replace.
        let permissions = match fs::metadata(&target) {
            Ok(meta) if !meta.is_file() => {
                self.pending.push(in_place(bytes));
                return Ok(());
            }
            Ok(meta) => {
                // Writable by this process, as a plain write would need (opened, not truncated).
                drop(fs::OpenOptions::new().write(true).open(&target)?);
                Some(meta.permissions())
            }
            Err(_) => None,
        };
        let name = target.file_name().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file name")
        })?;
        let dir = target
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let mut tmp_name = std::ffi::OsString::from(".");
        tmp_name.push(name);
        tmp_name.push(format!(".{}.tmp", std::process::id()));
        let tmp = dir.join(tmp_name);
        let create = || {
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)
        };
        let mut file = match create() {
            Ok(f) => f,
            // Left by an earlier run of this process id that was killed mid-write.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                fs::remove_file(&tmp)?;
                create()?
            }
            // The directory takes no new file, or the temporary name is too long: in place.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ENAMETOOLONG)
                ) =>
            {
                self.pending.push(in_place(bytes));
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let written = (|| {
            file.write_all(bytes)?;
            // Delayed allocation reports a full disk at the flush, not at the write.
            file.sync_all()?;
            if let Some(p) = permissions {
                file.set_permissions(p)?;
            }
            Ok(())
        })();
        match written {
            Ok(()) => {
                self.pending.push(Pending::Rename {
                    tmp,
                    target,
                    named: path.to_path_buf(),
                    dir,
                });
                Ok(())
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                Err(e)
            }
        }
    }

    fn commit_io(mut self) -> Result<(), (PathBuf, std::io::Error)> {
        let pending = std::mem::take(&mut self.pending);
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut rest = pending.into_iter();
        while let Some(p) = rest.next() {
            let named = p.named().to_path_buf();
            let done = match p {
                Pending::Rename {
                    tmp, target, dir, ..
                } => {
                    let r = fs::rename(&tmp, &target);
                    if r.is_err() {
                        let _ = fs::remove_file(&tmp);
                    }
                    if !dirs.contains(&dir) {
                        dirs.push(dir);
                    }
                    r
                }
                Pending::InPlace { target, bytes, .. } => fs::write(&target, bytes),
            };
            if let Err(e) = done {
                // The rest stay unwritten: their temporaries go with the set (and a directory
                // it made goes only if nothing reached it).
                self.pending = rest.collect();
                return Err((named, e));
            }
        }
        self.committed = true;
        // The renames reach the disk with their directories (best effort: some file systems
        // refuse to sync a directory).
        for d in dirs {
            if let Ok(d) = fs::File::open(&d) {
                let _ = d.sync_all();
            }
        }
        Ok(())
    }
}

impl Drop for FileSet {
    fn drop(&mut self) {
        for p in &self.pending {
            if let Pending::Rename { tmp, .. } = p {
                let _ = fs::remove_file(tmp);
            }
        }
        if !self.committed {
            // Innermost first; a directory that holds anything (another process's file)
            // refuses and stays.
            for d in self.created.iter().rev() {
                let _ = fs::remove_dir(d);
            }
        }
    }
}

/// Where the symbolic link `path` points, relative to its own directory, followed to the end
/// (the last link may dangle: the file it names is then created).
fn resolve_link(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    // A bound, as the kernel's 40 (ELOOP) does.
    for _ in 0..40 {
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = fs::read_link(&p)?;
                p = match p.parent() {
                    Some(parent) if to.is_relative() => parent.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::from_raw_os_error(libc::ELOOP))
}

/// The Markdown of a set of results (also used for `docs/experiments.md`).
pub fn markdown(results: &[ExperimentResult], preamble: &str) -> String {
    let mut md = format!("{REPORT_TITLE}\n\n");
    md.push_str(preamble);
    md.push('\n');
    for r in results {
        md.push_str(&format!("## {} (`{}`)\n\n", r.title, r.experiment));
        if let Some(source) = crate::paper::source(&r.experiment) {
            md.push_str(&format!("Published figures: {source}.\n\n"));
        }
        md.push_str(&format!(
            "Machine: {}. {}Model: {}. Seeds: {} ({}){}. Values are mean ± sample standard deviation over seeds.\n\n",
            r.machine,
            if r.run_length.is_empty() {
                String::new()
            } else {
                format!("Simulated runs: {}. ", r.run_length)
            },
            if r.model.is_empty() { "not recorded" } else { &r.model },
            r.seeds.len(),
            r.seeds
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if r.seeds_note.is_empty() {
                String::new()
            } else {
                format!(": {}", r.seeds_note)
            }
        ));
        for t in &r.tables {
            md.push_str(&t.markdown());
            md.push('\n');
        }
        for f in &r.figures {
            md.push_str(&format!("![{}]({})\n\n", f.title, f.file));
        }
        for (file, title, _) in &r.svgs {
            md.push_str(&format!("![{title}]({file})\n\n"));
        }
        if r.figures.iter().any(has_error_bars) {
            md.push_str(crate::result::ERROR_BARS);
            md.push_str("\n\n");
        }
        if !r.findings.is_empty() {
            md.push_str("Findings:\n\n");
            for f in &r.findings {
                md.push_str(&format!("- {f}\n"));
            }
            md.push('\n');
        }
    }
    md
}

/// Whether any bar of `fig` has an error bar.
fn has_error_bars(fig: &BarFigure) -> bool {
    fig.series
        .iter()
        .any(|s| s.errors.iter().any(|e| e.is_some()))
}

/// The note under a figure's legend when it has error bars, one line each.
const ERROR_BAR_NOTE: [&str; 3] = ["error bars:", "95 % CI of", "the mean"];

/// `seeds` in words: `seed 3`, `seeds 1 and 2`, `seeds 1 to 5` (consecutive), or listed.
pub fn seeds_in_words(seeds: &[u64]) -> String {
    let consecutive = seeds.windows(2).all(|w| w[1] == w[0].wrapping_add(1));
    match seeds {
        [] => "no seeds".to_string(),
        [s] => format!("seed {s}"),
        [a, b] => format!("seeds {a} and {b}"),
        [a, .., b] if consecutive => format!("seeds {a} to {b}"),
        _ => format!(
            "seeds {}",
            seeds
                .iter()
                .map(|s| s.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// The opening of `report.md`, after its title: how the report was made (`counterpoint
/// experiment NAME` over `seeds`, `elapsed_s`), which experiments ran over other seeds and why
/// (their sections say it too), and how the tables' tags and verdicts are to be read. Written
/// here, not by the command, so that what the verdict rule says is the rule's own constant.
pub fn preamble(name: &str, seeds: &[u64], elapsed_s: f64, results: &[ExperimentResult]) -> String {
    let mut out = format!(
        "Generated by `counterpoint experiment {name}` with {} seed(s) ({}) in {elapsed_s:.1} s.",
        seeds.len(),
        seeds_in_words(seeds)
    );
    let other: Vec<String> = results
        .iter()
        .filter(|r| r.seeds != seeds)
        .map(|r| {
            format!(
                "`{}` ran over {} ({})",
                r.experiment,
                r.seeds.len(),
                seeds_in_words(&r.seeds)
            )
        })
        .collect();
    if !other.is_empty() {
        out.push_str(&format!(
            " Not every experiment ran over all of them: {}; its section says why.",
            other.join("; ")
        ));
    }
    out.push_str("\n\n");
    out.push_str(
        "**Tags.** Every table row and JSON entry ends with its basis: `calibrated`, a baseline \
         figure the simulator was fitted to (the default scheduler on Zhang's SPEC mix at slice \
         jitter 0, MASA's pinned placements) or an input taken from a seed, so agreeing with it shows only that \
         the fit worked; `predicted`, a simulated figure nothing was fitted to, which is every \
         simulated policy result (no profile or model parameter was tuned towards one); \
         `measured`, measured on this machine and not simulated at all (the `requests` rows, a \
         real PostgreSQL). A finding says a published result is *reproduced* when our 95 % \
         interval agrees with it as that finding states (an ordering: our paired difference has \
         the paper's sign, its interval excludes zero and holds the published difference, or, \
         for a published difference under 0.01, our interval shows none either; DI: the \
         interval's upper end is within the published bound; MASA's swaps: the same order), *sign reproduced, size not* when only the sign agrees, *not reproduced* when it \
         does not, and *not decided* when the interval straddles the published bound.\n\n",
    );
    out.push_str(&format!(
        "**Verdicts.** A gain's verdict comes from its 95 % confidence interval over seeds \
         (Student's t, paired by seed): \"gain\" when the whole interval lies above +{r}, \
         \"loss\" when it lies below -{r}, and \"no measurable gain\" otherwise — an interval \
         that includes zero, or that clears it by no more than {r} (below the reports' last \
         digit: 0.001 of NP, 0.1 % of a gain). One seed gives no interval and decides nothing \
         (\"undecided: one seed\").\n",
        r = crate::summary::RESOLUTION
    ));
    let has = |names: &[&str]| {
        results
            .iter()
            .any(|r| names.contains(&r.experiment.as_str()))
    };
    let mut terms = Vec::new();
    if has(&[
        "zhang-spec",
        "zhang-server",
        "di-vs-oracle",
        "model-validation",
    ]) {
        terms.push(
            "*Normalized performance* (NP), as Zhang et al. define it (HotOS'07 §2.1): per \
             task, its speed in the mix over its speed alone on the same machine, over the CPU \
             time it had (time alone / time in the mix, or instructions per CPU-second in the \
             mix / alone); a mix's NP is the geometric mean over its tasks, 1 when sharing \
             slows nobody. *Unfairness*: the coefficient of variation of the tasks' NPs \
             (population standard deviation / mean), 0 when every task is slowed alike. *NP \
             gain over linux*: a policy's NP minus the default scheduler's at the same seed \
             (and slice jitter)."
                .to_string(),
        );
    }
    if has(&["masa-placement", "masa-testcases", "model-validation"]) {
        terms.push(format!(
            "MASA's placements (Nakajima & Pallipadi's notation) name both packages: `(A, B)` is \
             a package with Hyper-Threading on, A and B on its two logical CPUs; `[A, B]` a \
             package with HT off, A and B time-sharing its one CPU. INT, FP and L2C are the \
             paper's probe programs, its builds of 164.gzip (integer), 177.mesa (floating \
             point) and 197.parser (heavy on the L2 cache): the catalog's `{}`, `{}` and `{}`.",
            crate::masa::INT,
            crate::masa::FP,
            crate::masa::L2C
        ));
    }
    if !terms.is_empty() {
        out.push_str("\n**Terms.** ");
        out.push_str(&terms.join(" "));
        out.push('\n');
    }
    out
}

/// The first line of every `report.md` this module writes (how [`is_own_file`] knows one).
pub const REPORT_TITLE: &str = "# Counterpoint experiments: seed results on the simulated machine";

/// The files of a report, named relative to its directory, in the order they are written:
/// the SVG figures, then `report.md`, then `results.json` (last: it is what tells the report's
/// experiments apart).
pub fn render(
    results: &[ExperimentResult],
    preamble: &str,
) -> Result<Vec<(String, Vec<u8>)>, ReportError> {
    let mut files = Vec::new();
    for r in results {
        for f in &r.figures {
            let mut svg = String::new();
            let options = r.figure_options.get(&f.file).cloned().unwrap_or_default();
            draw_bars_svg(&mut svg, Path::new(&f.file), f, &options)?;
            files.push((f.file.clone(), svg.into_bytes()));
        }
        for (file, _, svg) in &r.svgs {
            files.push((file.clone(), svg.clone().into_bytes()));
        }
    }
    files.push((
        "report.md".to_string(),
        markdown(results, preamble).into_bytes(),
    ));
    files.push((
        "results.json".to_string(),
        serde_json::to_string_pretty(results)?.into_bytes(),
    ));
    Ok(files)
}

/// How a [`write_set`] ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetWritten {
    /// Every file was renamed over its name, and then the files to remove were removed but
    /// for these (name, why), which are still there.
    Whole {
        /// Files asked to be removed that could not be (other than already gone).
        not_removed: Vec<(String, String)>,
    },
    /// `stop` said so before the renames began: no name was changed and every temporary file
    /// (and directory the set made) was removed.
    Stopped,
}

/// Write `files` (names relative to `dir`) into `dir` as one [`FileSet`]: all the new files or,
/// after an error or a stop, all the old ones. `stop` is asked before each file is written and
/// once more before the renames; once they begin they run to the end (a caller that defers
/// its stop signals over this call keeps the set whole). Once every new file is in place, the
/// files `remove` names (the replaced report's own that the new one does not write:
/// [`replaced_figures`]) are removed; before that, after an error or a stop, they stay with
/// the old set they belong to.
pub fn write_set(
    dir: &Path,
    files: &[(String, Vec<u8>)],
    remove: &[String],
    stop: &dyn Fn() -> bool,
) -> Result<SetWritten, ReportError> {
    let mut set = FileSet::new();
    set.create_dir(dir)?;
    for (name, bytes) in files {
        if stop() {
            return Ok(SetWritten::Stopped);
        }
        set.stage(&dir.join(name), bytes)?;
    }
    if stop() {
        return Ok(SetWritten::Stopped);
    }
    set.commit()?;
    let mut not_removed = Vec::new();
    for name in remove {
        match fs::remove_file(dir.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => not_removed.push((name.clone(), e.to_string())),
        }
    }
    if !remove.is_empty() {
        // The removals reach the disk with the directory (best effort, as the renames).
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(SetWritten::Whole { not_removed })
}

/// The figure files a `report.md` links, as [`markdown`] writes them (`![caption](NAME.svg)`
/// on a line of its own), each once; only plain names in the report's own directory (no `/`,
/// not hidden).
pub fn linked_figures(md: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in md.lines() {
        let Some(inner) = line.strip_prefix("![").and_then(|l| l.strip_suffix(')')) else {
            continue;
        };
        let Some((_, file)) = inner.rsplit_once("](") else {
            continue;
        };
        let plain = !file.contains(['/', '\\']) && !file.starts_with('.');
        if plain
            && file.len() > ".svg".len()
            && file.ends_with(".svg")
            && !out.iter().any(|f| f == file)
        {
            out.push(file.to_string());
        }
    }
    out
}

/// The largest `report.md` read for its figures: ours are tens of KB; a larger file is no
/// report of this module, and nothing is taken from it.
const MAX_REPORT_MD_BYTES: u64 = 16 << 20;

/// The files of the report in `dir` that a new report naming `new` would leave behind, to be
/// removed once the new one is written ([`write_set`]): the figures its `report.md` links
/// ([`linked_figures`]), when that `report.md` is one this module wrote (its first line is
/// [`REPORT_TITLE`]), that are regular files (not links) plotters drew ([`is_plotters_svg`])
/// and that `new` does not name. A file the old report does not link, or that is not a
/// figure it drew, is never among them. (A replaced report's figures stayed beside the new
/// report; CLI probe, session 29.)
pub fn replaced_figures(dir: &Path, new: &[&str]) -> Vec<String> {
    use std::io::Read as _;
    let md_path = dir.join("report.md");
    // Not a regular file (a FIFO would block the read): no report of ours.
    if !fs::metadata(&md_path).is_ok_and(|m| m.is_file()) {
        return Vec::new();
    }
    let mut md = String::new();
    let read = fs::File::open(&md_path)
        .and_then(|f| f.take(MAX_REPORT_MD_BYTES + 1).read_to_string(&mut md));
    if read.is_err()
        || md.len() as u64 > MAX_REPORT_MD_BYTES
        || !md.starts_with(&format!("{REPORT_TITLE}\n"))
    {
        return Vec::new();
    }
    linked_figures(&md)
        .into_iter()
        .filter(|name| !new.contains(&name.as_str()))
        .filter(|name| {
            let path = dir.join(name);
            if !fs::symlink_metadata(&path).is_ok_and(|m| m.is_file()) {
                return false;
            }
            let mut head = Vec::new();
            fs::File::open(&path)
                .and_then(|f| f.take(4096).read_to_end(&mut head))
                .is_ok()
                && is_plotters_svg(&head)
        })
        .collect()
}

/// Write `report.md`, `results.json` and the SVG figures into `dir` (created if needed), all
/// or none of them ([`write_set`]).
pub fn write_report(
    dir: &Path,
    results: &[ExperimentResult],
    preamble: &str,
) -> Result<(), ReportError> {
    write_set(dir, &render(results, preamble)?, &[], &|| false).map(|_| ())
}

/// Whether an SVG is one plotters drew (every figure Counterpoint writes): it opens with
/// plotters' own first tag, `<svg width=".." height=".." viewBox="0 0 .." xmlns=..>`, which
/// an editor's file (an XML declaration first, or other attributes) does not.
pub fn is_plotters_svg(bytes: &[u8]) -> bool {
    let first = bytes.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let Ok(first) = std::str::from_utf8(first) else {
        return false;
    };
    let Some(rest) = first.strip_prefix("<svg width=\"") else {
        return false;
    };
    rest.contains("\" height=\"")
        && rest.contains("\" viewBox=\"0 0 ")
        && rest.ends_with("\" xmlns=\"http://www.w3.org/2000/svg\">")
}

/// Whether `bytes`, found under `name` in a report directory, is a file a report of this
/// module wrote (so a new report may replace it): `report.md` opening with [`REPORT_TITLE`],
/// `results.json` a JSON array of entries naming their experiment, an SVG plotters drew.
/// Any other name is not a report's.
pub fn is_own_file(name: &str, bytes: &[u8]) -> bool {
    if name == "report.md" {
        bytes.starts_with(format!("{REPORT_TITLE}\n").as_bytes())
    } else if name == "results.json" {
        report_experiments(bytes).is_some()
    } else if name.ends_with(".svg") {
        is_plotters_svg(bytes)
    } else {
        false
    }
}

/// The experiments a report's `results.json` holds, in its order; `None` when the text is not
/// one (not a JSON array of objects each with a string `experiment`). Read as a stream, the
/// rest of each entry skipped: a large file is not held whole.
pub fn report_experiments(json: impl std::io::Read) -> Option<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Entry {
        experiment: String,
    }
    let entries: Vec<Entry> = serde_json::from_reader(json).ok()?;
    Some(entries.into_iter().map(|e| e.experiment).collect())
}

/// Ten distinguishable colours (matplotlib's tab10), so series up to ten never share one.
pub const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Width of the legend column right of a plot, px, for these entry names.
pub fn legend_width(names: &[&str]) -> u32 {
    let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0) as u32;
    (longest * 9 + 52).clamp(120, 460)
}

/// A framed legend in `area` (a column beside the plot, never over the data): one swatch and
/// name per entry, from the top. `line` draws a stroke instead of a filled square.
pub fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    entries: &[(String, RGBAColor)],
    line: bool,
) -> Result<(), String> {
    if entries.is_empty() {
        return Ok(());
    }
    let (w, _) = area.dim_in_pixel();
    let row = 22i32;
    let top = 40i32;
    let right = w as i32 - 8;
    let bottom = top + 8 + row * entries.len() as i32;
    area.draw(&Rectangle::new(
        [(4, top - 4), (right, bottom)],
        ShapeStyle::from(&BLACK).stroke_width(1),
    ))
    .map_err(|e| e.to_string())?;
    for (i, (name, color)) in entries.iter().enumerate() {
        let y = top + 6 + row * i as i32;
        if line {
            area.draw(&PathElement::new(
                vec![(12, y + 6), (30, y + 6)],
                color.stroke_width(2),
            ))
            .map_err(|e| e.to_string())?;
        } else {
            area.draw(&Rectangle::new([(12, y), (26, y + 14)], color.filled()))
                .map_err(|e| e.to_string())?;
        }
        area.draw(&Text::new(name.clone(), (36, y), ("sans-serif", 19)))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The y range of a bar chart over bar ends `lo..hi` (values ± errors): zero-based unless
/// every bar is positive and their spread is under a quarter of the tallest, in which case the
/// axis starts just below the lowest end so the differences show; returns (min, max, whether
/// the axis was cut above zero). The range ends on a labelled tick at or beyond the highest
/// end (and, below zero, the lowest), so no bar ends past the last number on the axis
/// (replica's 270.3 stood above a top label of 250 on an axis running to 297; report audit,
/// session 29).
pub fn bar_y_range(lo: f64, hi: f64) -> (f64, f64, bool) {
    let lo_all = lo.min(0.0);
    let hi_all = hi.max(0.0);
    let span = (hi_all - lo_all).max(1e-9);
    let (ymin, ymax, cut) = if lo > 0.0 && hi > 0.0 && (hi - lo) < 0.25 * hi {
        let spread = (hi - lo).max(hi * 0.02);
        let step = nice_step(spread / 4.0);
        let ymin = ((lo - 0.5 * spread) / step).floor() * step;
        let ymin = ymin.max(0.0);
        (ymin, hi + 0.25 * spread, ymin > 0.0)
    } else {
        let pad = span * 0.1;
        (
            if lo_all < 0.0 { lo_all - pad } else { 0.0 },
            hi_all + pad,
            false,
        )
    };
    let (ymin, ymax) = to_ticks(ymin, ymax, lo_all, hi_all);
    (ymin, ymax, cut)
}

/// Most labels on a bar chart's y axis (plotters' default, set explicitly where the charts
/// are drawn so that [`y_ticks`] finds the same ones).
pub const Y_LABELS: usize = 11;

/// The labelled ticks plotters draws on a y axis over `lo..hi` with [`Y_LABELS`].
pub fn y_ticks(lo: f64, hi: f64) -> Vec<f64> {
    use plotters::coord::ranged1d::Ranged;
    plotters::coord::types::RangedCoordf64::from(lo..hi).key_points(Y_LABELS)
}

/// `ymin..ymax` widened, a tick step at a time, until a labelled tick lies at or above `top`
/// and, when the axis goes below zero, at or below `bottom`.
fn to_ticks(mut ymin: f64, mut ymax: f64, bottom: f64, top: f64) -> (f64, f64) {
    let eps = 1e-9 * (ymax - ymin).abs().max(1e-12);
    for _ in 0..8 {
        let t = y_ticks(ymin, ymax);
        let (Some(&first), Some(&last)) = (t.first(), t.last()) else {
            break;
        };
        let step = if t.len() > 1 {
            t[1] - t[0]
        } else {
            ymax - ymin
        };
        let mut done = true;
        if last + eps < top {
            ymax = last + step;
            done = false;
        }
        if ymin < 0.0 && first - eps > bottom {
            ymin = first - step;
            done = false;
        }
        if done {
            break;
        }
    }
    (ymin, ymax)
}

/// A tick value without floating-point noise (0.7, not 0.7000000000000001).
pub fn short(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// 1, 2 or 5 times a power of ten, at least `x`.
fn nice_step(x: f64) -> f64 {
    let p = 10f64.powf(x.max(1e-12).log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= x {
            return m * p;
        }
    }
    10.0 * p
}

/// A grouped bar chart with error bars: categories named under the x axis, the legend in its
/// own column to the right of the plot, and a y axis that either starts at zero (a solid
/// baseline) or, when the bars differ by little, just below them (said in the axis label).
pub fn draw_bars(path: &Path, fig: &BarFigure) -> Result<(), ReportError> {
    draw_bars_with(path, fig, &FigureOptions::default())
}

/// [`draw_bars`] with `options` (an x axis label, a floor for the error bars).
pub fn draw_bars_with(
    path: &Path,
    fig: &BarFigure,
    options: &FigureOptions,
) -> Result<(), ReportError> {
    let mut svg = String::new();
    draw_bars_svg(&mut svg, path, fig, options)?;
    write(path, &svg)
}

/// [`draw_bars_with`] into `svg` (`path` only names the figure in errors).
fn draw_bars_svg(
    svg: &mut String,
    path: &Path,
    fig: &BarFigure,
    options: &FigureOptions,
) -> Result<(), ReportError> {
    let err = |e: String| ReportError::Plot {
        path: path.to_path_buf(),
        message: e,
    };
    let ncat = fig.categories.len().max(1);
    // An error bar's ends: value ± error, the lower one no lower than the floor.
    let whisker = |v: f64, e: f64| {
        let lo = v - e;
        (options.floor.map_or(lo, |f| lo.max(f.min(v))), v + e)
    };
    let ends = || {
        fig.series.iter().flat_map(|s| {
            s.values
                .iter()
                .zip(&s.errors)
                .filter_map(|(v, e)| v.map(|v| whisker(v, e.unwrap_or(0.0))))
        })
    };
    let lo = ends().map(|e| e.0).fold(f64::INFINITY, f64::min);
    let hi = ends().map(|e| e.1).fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let (ymin, ymax, cut) = bar_y_range(lo, hi);
    let base = if cut { ymin } else { 0.0 };
    let names: Vec<&str> = fig.series.iter().map(|s| s.name.as_str()).collect();
    let bars_note: &[&str] = if has_error_bars(fig) {
        &ERROR_BAR_NOTE
    } else {
        &[]
    };
    let legend_w = legend_width(&[&names[..], bars_note].concat());
    let plot_w = (ncat as u32 * 90).clamp(720, 2400);
    let root = SVGBackend::with_string(svg, (plot_w + legend_w, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
    let (plot, legend) = root.split_horizontally(plot_w);
    let y_desc = if cut {
        format!("{} (axis from {}, not 0)", fig.y_label, short(ymin))
    } else {
        fig.y_label.clone()
    };
    let mut chart = ChartBuilder::on(&plot)
        .caption(&fig.title, ("sans-serif", 24))
        .margin(12)
        // Room for the categories' names, and the axis' own label under them.
        .x_label_area_size(if options.x_label.is_some() { 80 } else { 48 })
        .y_label_area_size(95)
        .build_cartesian_2d(0f64..ncat as f64, ymin..ymax)
        .map_err(|e| err(e.to_string()))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(Y_LABELS)
        .y_label_formatter(&|v| short(*v))
        .y_desc(y_desc.as_str())
        .label_style(("sans-serif", 19))
        .axis_desc_style(("sans-serif", 19))
        .draw()
        .map_err(|e| err(e.to_string()))?;
    if !cut {
        // The zero baseline, marked as such.
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 0.0), (ncat as f64, 0.0)],
                BLACK.stroke_width(2),
            )))
            .map_err(|e| err(e.to_string()))?;
    }
    let nser = fig.series.len().max(1) as f64;
    let group = 0.8;
    let width = group / nser;
    let mut entries = Vec::new();
    for (si, s) in fig.series.iter().enumerate() {
        let color = PALETTE[si % PALETTE.len()];
        entries.push((s.name.clone(), color.to_rgba()));
        let x0 = |ci: usize| ci as f64 + (1.0 - group) / 2.0 + si as f64 * width;
        chart
            .draw_series(s.values.iter().enumerate().filter_map(|(ci, v)| {
                v.map(|v| {
                    Rectangle::new([(x0(ci), base), (x0(ci) + width * 0.9, v)], color.filled())
                })
            }))
            .map_err(|e| err(e.to_string()))?;
        chart
            .draw_series(
                s.values
                    .iter()
                    .zip(&s.errors)
                    .enumerate()
                    .filter_map(|(ci, (v, e))| {
                        let (lo, hi) = whisker((*v)?, (*e)?);
                        let xm = x0(ci) + width * 0.45;
                        Some(PathElement::new(vec![(xm, lo), (xm, hi)], BLACK))
                    }),
            )
            .map_err(|e| err(e.to_string()))?;
    }
    // Category names under the axis, centred on their group.
    let label =
        ("sans-serif", 19)
            .into_text_style(&plot)
            .pos(plotters::style::text_anchor::Pos::new(
                plotters::style::text_anchor::HPos::Center,
                plotters::style::text_anchor::VPos::Top,
            ));
    for (ci, name) in fig.categories.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(ci as f64 + 0.5, ymin));
        plot.draw(&Text::new(name.clone(), (px, py + 8), label.clone()))
            .map_err(|e| err(e.to_string()))?;
    }
    if let Some(x_label) = &options.x_label {
        let (px, py) = chart.backend_coord(&(ncat as f64 / 2.0, ymin));
        plot.draw(&Text::new(x_label.clone(), (px, py + 40), label.clone()))
            .map_err(|e| err(e.to_string()))?;
    }
    draw_legend(&legend, &entries, false).map_err(err)?;
    // What the error bars are, under the legend's frame (it ends at 48 + 22 px per entry).
    let below = 48 + 22 * entries.len() as i32 + 16;
    for (i, line) in bars_note.iter().enumerate() {
        legend
            .draw(&Text::new(
                line.to_string(),
                (12, below + 22 * i as i32),
                ("sans-serif", 19),
            ))
            .map_err(|e| err(e.to_string()))?;
    }
    root.present().map_err(|e| err(e.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::result::{BarSeries, Table};

    #[test]
    fn write_atomic_replaces_keeps_permissions_and_follows_links() {
        use std::os::unix::fs::{symlink, PermissionsExt};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        write_atomic(&path, b"first").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"first");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o640)).unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
        // A link is written through: it stays a link to the new content.
        let link = dir.path().join("link.txt");
        symlink(&path, &link).unwrap();
        write_atomic(&link, b"third").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read(&path).unwrap(), b"third");
        // Nothing left beside them.
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn write_atomic_creates_the_target_of_a_dangling_link() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("result.json");
        symlink("elsewhere/real.json", &link).unwrap();
        fs::create_dir(dir.path().join("elsewhere")).unwrap();
        write_atomic(&link, b"new").unwrap();
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            fs::read(dir.path().join("elsewhere/real.json")).unwrap(),
            b"new"
        );
    }

    #[test]
    fn write_atomic_writes_devices_in_place() {
        use std::os::unix::fs::FileTypeExt;
        write_atomic(Path::new("/dev/null"), b"gone").unwrap();
        assert!(fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    /// The names in `dir`, sorted.
    fn names_in(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    /// Files written as a set are all new once committed, and before the commit (a dropped
    /// set: an error or a stop) all old, with no temporary file left.
    #[test]
    fn a_file_set_changes_nothing_until_its_commit() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.json"), dir.path().join("b.csv"));
        fs::write(&a, "old a").unwrap();
        fs::write(&b, "old b").unwrap();
        let mut set = FileSet::new();
        set.stage(&a, b"new a").unwrap();
        set.stage(&b, b"new b").unwrap();
        // Staged, not renamed: the old files are in place beside the temporaries.
        assert_eq!(fs::read_to_string(&a).unwrap(), "old a");
        assert_eq!(names_in(dir.path()).len(), 4);
        drop(set);
        assert_eq!(fs::read_to_string(&a).unwrap(), "old a");
        assert_eq!(fs::read_to_string(&b).unwrap(), "old b");
        assert_eq!(names_in(dir.path()), ["a.json", "b.csv"]);
        let mut set = FileSet::new();
        set.stage(&a, b"new a").unwrap();
        // Staged twice: the last bytes win, and one temporary file was left to rename.
        set.stage(&b, b"first b").unwrap();
        set.stage(&b, b"new b").unwrap();
        set.commit().unwrap();
        assert_eq!(fs::read_to_string(&a).unwrap(), "new a");
        assert_eq!(fs::read_to_string(&b).unwrap(), "new b");
        assert_eq!(names_in(dir.path()), ["a.json", "b.csv"]);
    }

    /// A write that fails part way (here: into a directory that is not there) leaves every
    /// file of the set as it was, and the temporaries of those staged before it are removed.
    #[test]
    fn a_failed_stage_leaves_the_old_set() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), "old a").unwrap();
        let files = vec![
            ("a".to_string(), b"new a".to_vec()),
            ("missing/b".to_string(), b"new b".to_vec()),
        ];
        let err = write_set(dir.path(), &files, &[], &|| false).unwrap_err();
        assert!(err.to_string().contains("missing/b"), "{err}");
        assert_eq!(fs::read_to_string(dir.path().join("a")).unwrap(), "old a");
        assert_eq!(names_in(dir.path()), ["a"]);
    }

    /// A stop before the renames writes nothing: the old files stay, the temporaries go, and
    /// a directory the set made is removed again.
    #[test]
    fn a_stopped_set_writes_nothing_and_removes_what_it_made() {
        use std::cell::Cell;
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), "old a").unwrap();
        let files = vec![
            ("a".to_string(), b"new a".to_vec()),
            ("b".to_string(), b"new b".to_vec()),
        ];
        // Stopped after the first file was staged.
        let asked = Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 1
        };
        assert_eq!(
            write_set(dir.path(), &files, &[], &stop).unwrap(),
            SetWritten::Stopped
        );
        assert_eq!(fs::read_to_string(dir.path().join("a")).unwrap(), "old a");
        assert_eq!(names_in(dir.path()), ["a"]);
        // Stopped once every file was staged, before the renames, into a directory it had to
        // make (two levels): asked before each file, then before the commit.
        let new = dir.path().join("new/report");
        asked.set(0);
        let at_commit = || {
            asked.set(asked.get() + 1);
            asked.get() == files.len() + 1
        };
        assert_eq!(
            write_set(&new, &files, &[], &at_commit).unwrap(),
            SetWritten::Stopped
        );
        assert_eq!(asked.get(), files.len() + 1);
        assert!(!dir.path().join("new").exists());
        assert_eq!(
            write_set(&new, &files, &[], &|| false).unwrap(),
            SetWritten::Whole {
                not_removed: vec![]
            }
        );
        assert_eq!(names_in(&new), ["a", "b"]);
    }

    /// The header counts the seeds asked for, names an experiment that ran over others, and
    /// gives the verdict rule with its resolution (it said "includes zero" only, "5 seeds"
    /// beside schedtask's 2, and `(1..=5)`; report audit, session 29).
    #[test]
    fn the_preamble_says_the_seeds_and_the_verdict_rule() {
        assert_eq!(seeds_in_words(&[1, 2, 3, 4, 5]), "seeds 1 to 5");
        assert_eq!(seeds_in_words(&[1, 2]), "seeds 1 and 2");
        assert_eq!(seeds_in_words(&[4]), "seed 4");
        assert_eq!(seeds_in_words(&[1, 3, 9]), "seeds 1, 3, 9");
        let all = [1, 2, 3, 4, 5];
        let results = [
            ExperimentResult::new("zhang-spec", "Z", "m", &all),
            ExperimentResult::new("schedtask", "S", "m", &all[..2]),
        ];
        let p = preamble("all", &all, 40.6, &results);
        assert!(
            p.starts_with(
                "Generated by `counterpoint experiment all` with 5 seed(s) (seeds 1 to 5) in \
                 40.6 s. Not every experiment ran over all of them: `schedtask` ran over 2 \
                 (seeds 1 and 2); its section says why.\n"
            ),
            "{p}"
        );
        assert!(!p.contains("..="), "{p}");
        // The tags, `measured` among them (it was used and never defined), and the terms of
        // the experiments present only.
        for tag in ["`calibrated`", "`predicted`", "`measured`", "*reproduced*"] {
            assert!(p.contains(tag), "{tag}: {p}");
        }
        assert!(p.contains("*Normalized performance* (NP)"), "{p}");
        assert!(
            p.contains("*Unfairness*: the coefficient of variation"),
            "{p}"
        );
        assert!(!p.contains("Hyper-Threading"), "{p}");
        let masa = [ExperimentResult::new("masa-placement", "M", "m", &all)];
        let p = preamble("masa-placement", &all, 1.0, &masa);
        assert!(
            p.contains("`(A, B)` is a package with Hyper-Threading on"),
            "{p}"
        );
        assert!(p.contains("`[A, B]` a package with HT off"), "{p}");
        assert!(p.contains("164.gzip (integer), 177.mesa (floating point) and 197.parser"));
        assert!(!p.contains("Not every experiment"), "{p}");
        assert!(
            p.contains("or that clears it by no more than 0.0005 (below"),
            "{p}"
        );
    }

    #[test]
    fn own_report_files_are_told_from_others() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = with_figures("leak", &["leak.svg"]);
        r.findings.push("f".into());
        let files = render(&[r], "pre\n").unwrap();
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["leak.svg", "report.md", "results.json"]);
        for (name, bytes) in &files {
            assert!(is_own_file(name, bytes), "{name}");
        }
        assert_eq!(
            report_experiments(&files[2].1[..]).unwrap(),
            vec!["leak".to_string()]
        );
        write_set(dir.path(), &files, &[], &|| false).unwrap();
        // What someone else wrote under the same names.
        assert!(!is_own_file("report.md", b"# My notes\n"));
        assert!(!is_own_file("results.json", b"{\"results\": []}"));
        assert!(!is_own_file("results.json", b"[{\"name\": \"x\"}]"));
        assert!(!is_own_file(
            "leak.svg",
            b"<?xml version=\"1.0\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>"
        ));
        assert!(!is_own_file("notes.txt", b"anything"));
    }

    /// A result of `experiment` with one figure per name in `figures`.
    fn with_figures(experiment: &str, figures: &[&str]) -> ExperimentResult {
        let mut r = ExperimentResult::new(experiment, experiment, "m", &[1]);
        for f in figures {
            r.figures.push(BarFigure {
                file: f.to_string(),
                title: format!("{f} (a caption with ](brackets)"),
                y_label: "y".into(),
                categories: vec!["a".into()],
                series: vec![BarSeries {
                    name: "ours".into(),
                    values: vec![Some(1.0)],
                    errors: vec![None],
                }],
            });
        }
        r
    }

    /// A report replacing another removes the old one's figures it does not write, once it is
    /// written, and nothing else: not a file the old report does not link, not one it links
    /// that plotters did not draw, not a link (a replaced report's figures stayed; CLI probe,
    /// session 29). A stop before the renames keeps them with the old report.
    #[test]
    fn a_replaced_reports_own_figures_go_with_it() {
        use std::os::unix::fs::symlink;
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let old = [with_figures(
            "a",
            &["a-1.svg", "a-2.svg", "shared.svg", "edited.svg", "link.svg"],
        )];
        write_set(d, &render(&old, "pre\n").unwrap(), &[], &|| false).unwrap();
        assert_eq!(
            linked_figures(&fs::read_to_string(d.join("report.md")).unwrap()),
            ["a-1.svg", "a-2.svg", "shared.svg", "edited.svg", "link.svg"]
        );
        // Someone's own files: an SVG plotters drew that the report does not link, a linked
        // figure edited by hand, a linked name that is a link to a figure elsewhere.
        fs::copy(d.join("a-1.svg"), d.join("unlinked.svg")).unwrap();
        fs::write(d.join("edited.svg"), "<?xml version=\"1.0\"?>\n<svg/>").unwrap();
        fs::copy(d.join("a-1.svg"), d.join("elsewhere.svg")).unwrap();
        fs::remove_file(d.join("link.svg")).unwrap();
        symlink("elsewhere.svg", d.join("link.svg")).unwrap();
        fs::write(d.join("notes.txt"), "mine").unwrap();

        let new = render(&[with_figures("b", &["b-1.svg", "shared.svg"])], "pre\n").unwrap();
        let names: Vec<&str> = new.iter().map(|(n, _)| n.as_str()).collect();
        let gone = replaced_figures(d, &names);
        assert_eq!(gone, ["a-1.svg", "a-2.svg"]);
        // Stopped before the renames: the old report is whole, its figures with it.
        let before = names_in(d);
        assert_eq!(
            write_set(d, &new, &gone, &|| true).unwrap(),
            SetWritten::Stopped
        );
        assert_eq!(names_in(d), before);
        assert_eq!(
            write_set(d, &new, &gone, &|| false).unwrap(),
            SetWritten::Whole {
                not_removed: vec![]
            }
        );
        assert_eq!(
            names_in(d),
            [
                "b-1.svg",
                "edited.svg",
                "elsewhere.svg",
                "link.svg",
                "notes.txt",
                "report.md",
                "results.json",
                "shared.svg",
                "unlinked.svg"
            ]
        );
        // A report.md that is not ours gives nothing to remove.
        fs::write(d.join("report.md"), "# My notes\n![x](b-1.svg)\n").unwrap();
        assert!(replaced_figures(d, &[]).is_empty());
        assert_eq!(
            linked_figures("![x](../up.svg)\n![x](.hidden.svg)\n![x](a/b.svg)\n![x](.svg)\n"),
            Vec::<String>::new()
        );
    }

    #[test]
    fn writes_markdown_json_and_svg() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = ExperimentResult::new("zhang-spec", "Zhang SPEC", "2-CPU SMP", &[1, 2]);
        r.put("linux", "normalized_performance", &[0.80, 0.82]);
        r.put_paper("linux", "normalized_performance", 0.818);
        let mut t = Table::new("NP", &["policy", "ours", "paper"]);
        t.row(vec!["linux".into(), "0.81".into(), "0.818".into()]);
        r.tables.push(t);
        r.figures.push(BarFigure {
            file: "zhang-spec.svg".into(),
            title: "NP".into(),
            y_label: "normalized performance".into(),
            categories: vec!["linux".into(), "bus-pair".into()],
            series: vec![
                BarSeries {
                    name: "ours".into(),
                    values: vec![Some(0.81), Some(0.88)],
                    errors: vec![Some(0.01), None],
                },
                BarSeries {
                    name: "paper".into(),
                    values: vec![Some(0.818), Some(0.883)],
                    errors: vec![None, None],
                },
            ],
        });
        r.findings.push("close".into());
        write_report(dir.path(), &[r], "pre\n").unwrap();
        let md = fs::read_to_string(dir.path().join("report.md")).unwrap();
        assert!(md.contains("| linux | 0.81 | 0.818 |"));
        assert!(md.contains("![NP](zhang-spec.svg)"));
        // The error bars are said to be 95 % intervals, in the report beside the figure and
        // in the figure itself (they were ±1 std in some figures, unsaid; report audit).
        assert!(md.contains(&format!(
            "![NP](zhang-spec.svg)\n\n{}\n",
            crate::result::ERROR_BARS
        )));
        let svg = fs::read_to_string(dir.path().join("zhang-spec.svg")).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("<rect"));
        for line in ERROR_BAR_NOTE {
            assert!(svg.contains(&format!("\n{line}\n</text>")), "{line}");
        }
        let json: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(dir.path().join("results.json")).unwrap())
                .unwrap();
        assert_eq!(json[0]["paper"]["linux"]["normalized_performance"], 0.818);
    }
}
