//! Scheduler configuration loading and hot reload: reads `--scheduler-conf` with upstream's
//! fallback rules ([`load`]) and watches it for changes ([`watch`]), handing every valid new
//! [`Profile`] (or the reason an update was rejected) to a callback. Parsing and validation belong
//! to the engine (`magma_engine::conf`); this module only touches the file system.
//!
//! Watch protocol:
//! 1. notify watches the file's **directory**, not the file: a ConfigMap volume update swaps the
//!    `..data` symlink atomically, so the file's own inode never changes and a file watch misses
//!    it. Every event in the directory (except our own opens and reads) counts as "maybe changed".
//! 2. notify's thread forwards a wake-up to a debounce thread over a channel. That thread waits
//!    until the directory has been quiet for [`DEBOUNCE`], so a multi-step update (editor save,
//!    symlink swap, truncate-then-write) is read once, complete.
//! 3. It re-reads the file (following symlinks) and compares the bytes with the last ones seen;
//!    equal bytes are ignored. New bytes are parsed: a valid profile different from the last one
//!    delivered is passed as `Ok`; an invalid one as `Err(reason)`, and the caller keeps the
//!    profile it has. An unreadable file is reported as `Err` as well.
//! 4. Dropping the [`ConfigWatcher`] stops notify and tells the debounce thread to exit, then
//!    waits for it (unless the drop happens inside the callback itself).

use magma_engine::conf::{ConfError, DEFAULT_SCHEDULER_CONF};
use magma_engine::{Profile, Sampling};
use notify::event::{AccessKind, AccessMode, EventKind};
use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// How long the directory must stay quiet before the file is re-read.
pub const DEBOUNCE: Duration = Duration::from_millis(150);

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// `--disable-default-scheduler-config` is set and the file cannot be read.
    #[error("cannot read scheduler configuration {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// `--disable-default-scheduler-config` is set and the file is not a valid configuration.
    #[error("invalid scheduler configuration {path}: {source}")]
    Invalid {
        path: PathBuf,
        #[source]
        source: ConfError,
    },
    /// The built-in default failed to compile (only possible with a bad sampling value).
    #[error("built-in default scheduler configuration: {0}")]
    Default(#[source] ConfError),
    #[error("cannot watch the directory {dir} of the scheduler configuration: {source}")]
    Watch {
        dir: PathBuf,
        #[source]
        source: notify::Error,
    },
    #[error("cannot start the configuration watch thread: {0}")]
    Thread(#[source] std::io::Error),
}

/// Where the running configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// The built-in default (no `--scheduler-conf`, or the file was missing or invalid).
    Default,
    File(PathBuf),
}

/// The result of [`load`].
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub profile: Profile,
    pub source: ConfigSource,
    /// For the log: why the default was used instead of the file, and the profile's own warnings.
    pub warnings: Vec<String>,
}

/// Load the configuration with upstream's rules: no path → the built-in default; a missing or
/// invalid file → a fatal error if `disable_default`, otherwise the default and a warning.
pub fn load(
    path: Option<&Path>,
    disable_default: bool,
    sampling: Sampling,
) -> Result<Loaded, ReloadError> {
    let default = |mut warnings: Vec<String>| {
        let profile =
            Profile::parse(DEFAULT_SCHEDULER_CONF, sampling).map_err(ReloadError::Default)?;
        warnings.extend(profile.warnings.iter().cloned());
        Ok(Loaded {
            profile,
            source: ConfigSource::Default,
            warnings,
        })
    };
    let Some(path) = path else {
        return default(Vec::new());
    };
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(source) if disable_default => {
            return Err(ReloadError::Read {
                path: path.to_owned(),
                source,
            });
        }
        Err(e) => {
            return default(vec![format!(
                "cannot read scheduler configuration {}: {e}; using the built-in default",
                path.display()
            )]);
        }
    };
    match Profile::parse(&text, sampling) {
        Ok(profile) => Ok(Loaded {
            warnings: profile.warnings.clone(),
            profile,
            source: ConfigSource::File(path.to_owned()),
        }),
        Err(source) if disable_default => Err(ReloadError::Invalid {
            path: path.to_owned(),
            source,
        }),
        Err(e) => default(vec![format!(
            "invalid scheduler configuration {}: {e}; using the built-in default",
            path.display()
        )]),
    }
}

/// A running watch of the configuration file; dropping it stops the watch.
pub struct ConfigWatcher {
    /// Dropped first so no more events arrive.
    watcher: Option<RecommendedWatcher>,
    stop: mpsc::Sender<Msg>,
    thread: Option<thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ConfigWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigWatcher").finish_non_exhaustive()
    }
}

impl Drop for ConfigWatcher {
    fn drop(&mut self) {
        drop(self.watcher.take());
        let _ = self.stop.send(Msg::Stop);
        if let Some(t) = self.thread.take()
            && t.thread().id() != thread::current().id()
        {
            let _ = t.join();
        }
    }
}

enum Msg {
    Changed,
    Stop,
}

/// Watch `path` (see the module doc) and call `on_change` from a background thread with each
/// new valid profile, or with the reason an update was rejected. The file's content when the
/// watch starts is the baseline: it is not delivered.
pub fn watch(
    path: PathBuf,
    sampling: Sampling,
    on_change: impl Fn(Result<Profile, String>) + Send + 'static,
) -> Result<ConfigWatcher, ReloadError> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let (tx, rx) = mpsc::channel::<Msg>();
    let events = tx.clone();
    let mut watcher =
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            // Our own reads open the file; they change nothing.
            Ok(ev) if is_noise(&ev.kind) => {}
            _ => {
                let _ = events.send(Msg::Changed);
            }
        })
        .map_err(|source| ReloadError::Watch {
            dir: dir.clone(),
            source,
        })?;
    watcher
        .watch(&dir, RecursiveMode::NonRecursive)
        .map_err(|source| ReloadError::Watch {
            dir: dir.clone(),
            source,
        })?;

    let mut state = State::new(path, sampling);
    let thread = thread::Builder::new()
        .name("magma-conf-watch".into())
        .spawn(move || {
            while let Ok(Msg::Changed) = rx.recv() {
                // Debounce: wait for DEBOUNCE of quiet.
                loop {
                    match rx.recv_timeout(DEBOUNCE) {
                        Ok(Msg::Changed) => continue,
                        Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        Err(mpsc::RecvTimeoutError::Timeout) => break,
                    }
                }
                if let Some(update) = state.reread() {
                    on_change(update);
                }
            }
        })
        .map_err(ReloadError::Thread)?;
    Ok(ConfigWatcher {
        watcher: Some(watcher),
        stop: tx,
        thread: Some(thread),
    })
}

fn is_noise(kind: &EventKind) -> bool {
    matches!(kind, EventKind::Access(a) if *a != AccessKind::Close(AccessMode::Write))
}

/// What the debounce thread remembers between reads.
struct State {
    path: PathBuf,
    sampling: Sampling,
    /// The bytes last read (`None` if the file could not be read).
    last_bytes: Option<Vec<u8>>,
    /// The last valid profile seen (baseline or delivered).
    last_good: Option<Profile>,
}

impl State {
    fn new(path: PathBuf, sampling: Sampling) -> State {
        let last_bytes = std::fs::read(&path).ok();
        let last_good = last_bytes
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            .and_then(|t| Profile::parse(t, sampling).ok());
        State {
            path,
            sampling,
            last_bytes,
            last_good,
        }
    }

    /// Re-read the file; `Some` when there is something to tell the caller.
    fn reread(&mut self) -> Option<Result<Profile, String>> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) => {
                // Report once per disappearance; the reappearance is then a change.
                return self.last_bytes.take().map(|_| {
                    Err(format!(
                        "cannot read scheduler configuration {}: {e}; keeping the current one",
                        self.path.display()
                    ))
                });
            }
        };
        if self.last_bytes.as_deref() == Some(&bytes[..]) {
            return None;
        }
        let parsed = std::str::from_utf8(&bytes)
            .map_err(|e| ConfError::Yaml(format!("not UTF-8: {e}")))
            .and_then(|t| Profile::parse(t, self.sampling));
        self.last_bytes = Some(bytes);
        match parsed {
            Ok(p) if self.last_good.as_ref() == Some(&p) => None,
            Ok(p) => {
                self.last_good = Some(p.clone());
                Some(Ok(p))
            }
            Err(e) => Some(Err(format!(
                "invalid scheduler configuration {}: {e}; keeping the current one",
                self.path.display()
            ))),
        }
    }
}
