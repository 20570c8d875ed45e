//! The lock a signal watcher takes before it ends the process (`counterpoint experiment`,
//! `simulate`): whoever must not be cut short by the exit holds it (a `requests` run entering
//! its PostgreSQL cluster, a command renaming its output files into place), and the watcher
//! waits for them.

static EXIT_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Hold off a signal watcher's exit while the guard lives. Poisoning is ignored: the lock
/// guards no data.
pub fn guard() -> std::sync::MutexGuard<'static, ()> {
    EXIT_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}
