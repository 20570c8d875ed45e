//! The live terminal view: raw mode and the alternate screen restored on every exit path
//! (signals, keys, panics), keys to sort and scroll, a sampler thread feeding snapshots.

use super::host_has_pmu;
use super::model::{snapshot, sort_rows, Snapshot, SortKey};
use super::render::draw;
use anyhow::{anyhow, Context, Result};
use counterpoint_core::machine::Machine;
use counterpoint_host::Host;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// The live view.

pub(super) static LIVE_STOP: AtomicBool = AtomicBool::new(false);
/// Set by the main thread once the terminal is restored.
pub(super) static LIVE_DONE: AtomicBool = AtomicBool::new(false);

pub(super) extern "C" fn on_stop_signal(_sig: libc::c_int) {
    LIVE_STOP.store(true, Ordering::SeqCst);
}

/// Puts the terminal back (raw mode off, main screen) however the live view ends.
pub(super) struct TerminalGuard;

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        ratatui::restore();
    }
}

/// State of the live view between refreshes.
pub(super) struct View {
    pub(super) key: SortKey,
    pub(super) reverse: bool,
    pub(super) help: bool,
    pub(super) selected: usize,
    pub(super) latest: Option<Snapshot>,
    pub(super) intervals: u64,
    /// Whether the host counts hardware events (the IPC, MPKI and BW columns are shown).
    pub(super) pmu: bool,
    /// A one-key message for the footer (a refused key), cleared by the next key.
    pub(super) status: Option<String>,
}

impl View {
    /// A fresh view sorted by `key`, before any snapshot.
    pub(super) fn new(key: SortKey, reverse: bool, pmu: bool) -> Self {
        View {
            key,
            reverse,
            help: false,
            selected: 0,
            latest: None,
            intervals: 0,
            pmu,
            status: None,
        }
    }
}

/// What a key press does to the view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyOutcome {
    /// End the view.
    Quit,
    /// Redraw.
    Changed,
    /// Not a key of the view.
    Ignored,
}

/// Apply one key press: sort keys only ever select a column on screen (the hardware ones are
/// skipped without a PMU; their digit is refused with a footer message).
pub(super) fn on_key(
    view: &mut View,
    code: ratatui::crossterm::event::KeyCode,
    modifiers: ratatui::crossterm::event::KeyModifiers,
) -> KeyOutcome {
    use ratatui::crossterm::event::{KeyCode, KeyModifiers};
    view.status = None;
    match code {
        KeyCode::Char('q') | KeyCode::Esc => return KeyOutcome::Quit,
        KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => return KeyOutcome::Quit,
        KeyCode::Char('s') | KeyCode::Right | KeyCode::Tab => {
            view.key = view.key.step_shown(1, view.pmu)
        }
        KeyCode::Char('S') | KeyCode::Left | KeyCode::BackTab => {
            view.key = view.key.step_shown(-1, view.pmu)
        }
        KeyCode::Char('r') => view.reverse = !view.reverse,
        KeyCode::Char('?') | KeyCode::Char('h') => view.help = !view.help,
        KeyCode::Down | KeyCode::Char('j') => view.selected += 1,
        KeyCode::Up | KeyCode::Char('k') => view.selected = view.selected.saturating_sub(1),
        KeyCode::PageDown => view.selected += 10,
        KeyCode::PageUp => view.selected = view.selected.saturating_sub(10),
        KeyCode::Home => view.selected = 0,
        KeyCode::Char(c @ '1'..='8') => {
            let k = SortKey::ALL[c as usize - '1' as usize];
            if k.shown(view.pmu) {
                view.key = k;
            } else {
                view.status = Some(format!(
                    "{c}: {} needs a hardware PMU, which this host lacks (column hidden); \
                     sort by 1-{}",
                    k.header(),
                    SortKey::shown_count(view.pmu)
                ));
            }
        }
        _ => return KeyOutcome::Ignored,
    }
    KeyOutcome::Changed
}

pub(super) fn run_live(
    host: Host,
    interval_ns: u64,
    key: SortKey,
    reverse: bool,
    code_note: Option<String>,
) -> Result<ExitCode> {
    use ratatui::crossterm::event::{self as ev, Event, KeyEventKind};

    // SIGTERM/SIGINT end the view through the normal path, so the terminal is restored.
    // SIGHUP keeps its default (exit): the terminal is gone, there is nothing to restore, and
    // crossterm spins reading a hung-up tty, so the normal path would never run.
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        counterpoint_host::signals::handle_unless_ignored(
            &[libc::SIGTERM, libc::SIGINT],
            on_stop_signal,
        )
    };
    let online = host.online().clone();
    let pmu = host_has_pmu(&host);
    // Sampling blocks for an interval: it runs on its own thread so keys stay responsive.
    let (tx, rx) = mpsc::channel::<Result<Snapshot, String>>();
    let sampler = std::thread::spawn(move || {
        let mut host = host;
        host.set_stop_flag(&LIVE_STOP);
        // A key pressed on the main thread stops the sampler within 50 ms.
        host.set_wait_slice(std::time::Duration::from_millis(50));
        while !LIVE_STOP.load(Ordering::SeqCst) {
            let msg = host
                .advance(interval_ns)
                .map(|obs| {
                    let mut s = snapshot(&obs, &online, pmu, host.counter_sources());
                    s.code_note = code_note.clone();
                    s
                })
                .map_err(|e| e.to_string());
            let failed = msg.is_err();
            if tx.send(msg).is_err() || failed {
                return;
            }
        }
        // Asked to stop (a key or a signal): the main thread restores the terminal within
        // ~100 ms. If it is stuck (blocked in terminal input), restore it from here and exit
        // (after 10 s: 2 s could pass for a main thread starved on a loaded machine).
        let t0 = std::time::Instant::now();
        while !LIVE_DONE.load(Ordering::SeqCst) {
            if t0.elapsed() > Duration::from_secs(10) {
                ratatui::restore();
                eprintln!("counterpoint top: stopped (the terminal did not answer)");
                std::process::exit(1);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    });

    let guard = TerminalGuard;
    let mut terminal = ratatui::try_init().context("cannot set up the terminal")?;
    let mut view = View::new(key, reverse, pmu);
    let result = (|| -> Result<()> {
        let mut dirty = true;
        loop {
            if LIVE_STOP.load(Ordering::SeqCst) {
                return Ok(());
            }
            loop {
                match rx.try_recv() {
                    Ok(Ok(s)) => {
                        view.latest = Some(s);
                        view.intervals += 1;
                        dirty = true;
                    }
                    Ok(Err(e)) => return Err(anyhow!("sampling failed: {e}")),
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        return Err(anyhow!("the sampling thread stopped"))
                    }
                }
            }
            if dirty {
                if let Some(s) = view.latest.as_mut() {
                    sort_rows(&mut s.rows, view.key, view.reverse);
                    view.selected = view.selected.min(s.rows.len().saturating_sub(1));
                }
                terminal
                    .draw(|f| draw(f, &view))
                    .context("drawing the view")?;
                dirty = false;
            }
            if !ev::poll(Duration::from_millis(100)).context("reading the terminal")? {
                continue;
            }
            match ev::read().context("reading the terminal")? {
                Event::Key(k) if k.kind == KeyEventKind::Press => {
                    match on_key(&mut view, k.code, k.modifiers) {
                        KeyOutcome::Quit => return Ok(()),
                        KeyOutcome::Changed => dirty = true,
                        KeyOutcome::Ignored => {}
                    }
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }
        }
    })();
    LIVE_STOP.store(true, Ordering::SeqCst);
    drop(rx);
    drop(terminal);
    drop(guard);
    LIVE_DONE.store(true, Ordering::SeqCst);
    // The sampler sees the flag within 50 ms (the wait in `advance` is cut short).
    let _ = sampler.join();
    result.map(|()| ExitCode::SUCCESS)
}
