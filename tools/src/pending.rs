//! Temporary output files in flight, removed if the process is stopped by
//! SIGINT, SIGTERM or SIGHUP before they are renamed over their
//! destination, so that an interrupted `-o` leaves nothing behind (a run
//! that fails removes its own when the file is dropped).
//!
//! The first file registered starts a thread that waits for those signals
//! (a thread, not a signal handler: removing files and taking a lock are
//! not async-signal-safe). On one, it removes every file still registered,
//! then ends the process as the signal's default action would, so the exit
//! status still says which signal it was.

use std::path::PathBuf;
use std::sync::{Mutex, Once};

/// Files to remove on a signal.
static FILES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A file registered for removal on a signal, until this is dropped (once
/// the file is renamed over its destination or removed).
pub(crate) struct Pending(PathBuf);

/// Creates a temporary file with `create` and registers it for removal on
/// a signal while the guard lives. The listener is running before the file
/// exists, and the list is held while it is made, so a signal at any point
/// finds it registered (the listener waits for the lock).
pub(crate) fn create<E>(
    create: impl FnOnce() -> Result<tempfile::NamedTempFile, E>,
) -> Result<(tempfile::NamedTempFile, Pending), E> {
    listen();
    let mut files = lock();
    let tmp = create()?;
    files.push(tmp.path().to_path_buf());
    let guard = Pending(tmp.path().to_path_buf());
    Ok((tmp, guard))
}

impl Pending {
    /// Runs `finish` (the rename over the destination) with the list held,
    /// then stops tracking the file: a signal meanwhile waits, so the run
    /// either ends before the rename, its destination as it was, or after
    /// it, its output complete.
    pub(crate) fn finish<R>(self, finish: impl FnOnce() -> R) -> R {
        let mut files = lock();
        let r = finish();
        if let Some(i) = files.iter().position(|p| *p == self.0) {
            files.swap_remove(i);
        }
        r
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut files = lock();
        if let Some(i) = files.iter().position(|p| *p == self.0) {
            files.swap_remove(i);
        }
    }
}

fn lock() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    // A panic while holding the lock leaves a list that is still usable.
    FILES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts the listener once, and returns when it has registered its
/// signals or could not. The signals are registered on the listener's own
/// thread: when no thread can be made, none is registered and each signal
/// keeps its default action (an interrupted run leaves its temporary
/// file, as without the listener). Registered before the spawn, they would
/// be caught with nothing to act on them, and SIGINT would be ignored.
#[cfg(unix)]
fn listen() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    static START: Once = Once::new();
    START.call_once(|| {
        let (ready, registered) = std::sync::mpsc::sync_channel::<()>(1);
        let spawned = std::thread::Builder::new()
            .name("apir-signals".into())
            .spawn(move || {
                let Ok(mut signals) =
                    signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
                else {
                    return;
                };
                let _ = ready.send(());
                if let Some(sig) = signals.forever().next() {
                    // Held until the process ends: no file is made, and
                    // none renamed, after these are removed.
                    let mut files = lock();
                    for f in files.drain(..) {
                        let _ = std::fs::remove_file(f);
                    }
                    let _ = signal_hook::low_level::emulate_default_handler(sig);
                    // Only for a signal whose default is not to end.
                    std::process::exit(128 + sig);
                }
            });
        if spawned.is_ok() {
            // Ends when the listener has registered (a message) or given
            // up (the sender dropped).
            let _ = registered.recv();
        }
    });
}

#[cfg(not(unix))]
fn listen() {
    static START: Once = Once::new();
    START.call_once(|| {});
}
