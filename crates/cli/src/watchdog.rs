//! `--timeout SECONDS` of the subcommands that run a program (`jit run`, `gc run`, `memref
//! run`): a program that loops forever, or waits forever, ends with one `locus:` line and
//! exit status [`TIMEOUT_EXIT_STATUS`] instead of hanging.
//!
//! The program runs in this process, on the main thread, so it cannot be interrupted and
//! unwound: a watchdog thread waits for the deadline and, if the run has not finished by
//! then, writes the line and ends the process with `_exit` (no destructors or `atexit`
//! handlers run while the program's threads are still running; output the program left in
//! C's stdio buffers is lost, as under `timeout(1)`).

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// The exit status when `--timeout` fires: 124, as `timeout(1)` exits.
pub const TIMEOUT_EXIT_STATUS: i32 = 124;

/// The help text of every `--timeout` option.
pub const HELP: &str = "End the run after this many seconds (decimals allowed) with a \
                        `locus:` line and exit status 124, as timeout(1) does; the time \
                        includes compiling the program";

/// Parses `--timeout`'s value: a positive number of seconds.
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not a number of seconds"))?;
    if seconds <= 0.0 {
        return Err(format!("`{text}`: the timeout must be more than 0 seconds"));
    }
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("`{text}`: {e}"))
}

/// A running watchdog; dropping it (the run finished) stops it.
pub struct Watchdog {
    cancel: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    /// The process that started it: a child the program forked has no watchdog thread
    /// to join (joining one panicked there).
    pid: u32,
}

/// Starts a watchdog that ends the process after `limit` (none: no watchdog), naming `what`
/// (the file run) in its line.
pub fn start(limit: Option<Duration>, what: &str) -> Watchdog {
    let Some(limit) = limit else {
        return Watchdog {
            cancel: None,
            thread: None,
            pid: std::process::id(),
        };
    };
    // Made before the deadline, so the watchdog only writes and exits when it fires.
    let line = format!(
        "locus: {what}: not finished after {} seconds (--timeout): ended, exit status {}\n",
        limit.as_secs_f64(),
        TIMEOUT_EXIT_STATUS
    );
    let (cancel, cancelled) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("locus-timeout".into())
        .spawn(move || {
            if let Err(RecvTimeoutError::Timeout) = cancelled.recv_timeout(limit) {
                fire(line.as_bytes());
            }
        })
        .ok();
    Watchdog {
        cancel: Some(cancel),
        thread,
        pid: std::process::id(),
    }
}

/// Writes `line` to standard error with `write(2)` (no lock the program's threads might
/// hold) and ends the process.
fn fire(line: &[u8]) -> ! {
    let mut rest = line;
    while !rest.is_empty() {
        // SAFETY: writes initialised bytes of `line`.
        let n = unsafe { libc::write(2, rest.as_ptr().cast(), rest.len()) };
        match usize::try_from(n) {
            Ok(n) if n > 0 => rest = &rest[n.min(rest.len())..],
            _ => break,
        }
    }
    // SAFETY: `_exit` ends the process at once; nothing of this process runs afterwards.
    unsafe { libc::_exit(TIMEOUT_EXIT_STATUS) }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.cancel.take());
        if let Some(thread) = self.thread.take() {
            if std::process::id() == self.pid {
                let _ = thread.join();
            } else {
                // A fork's copy of the handle names a thread only the parent has.
                std::mem::forget(thread);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_positive_numbers() {
        assert_eq!(parse_seconds("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_seconds("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_seconds("0").is_err());
        assert!(parse_seconds("-1").is_err());
        assert!(parse_seconds("soon").is_err());
        assert!(parse_seconds("1e300").is_err());
        assert!(parse_seconds("NaN").is_err());
    }

    #[test]
    fn a_finished_run_stops_the_watchdog() {
        let started = std::time::Instant::now();
        drop(start(Some(Duration::from_secs(60)), "x"));
        assert!(started.elapsed() < Duration::from_secs(10));
    }
}
