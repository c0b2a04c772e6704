//! Configuration loading (upstream's fallback rules) and hot reload, including the atomic
//! `..data` symlink swap a ConfigMap volume update performs.

use magma_engine::conf::DEFAULT_SCHEDULER_CONF;
use magma_engine::{Profile, Sampling};
use magma_kube::reload::{ConfigSource, ReloadError, load, watch};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

/// A fresh, empty directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "magma-reload-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const WEIGHTED: &str = r#"actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: nodeorder
    arguments:
      leastrequested.weight: 7
"#;

const WEIGHTED_2: &str = r#"actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: nodeorder
    arguments:
      leastrequested.weight: 3
"#;

const BAD_ACTION: &str = r#"actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: predicates
"#;

const ZERO_CANDIDATES: &str = r#"actions: "allocate"
tiers:
- plugins:
  - name: predicates
configurations:
- name: allocate
  arguments:
    candidateNodeCount: 0
"#;

fn profile(yaml: &str) -> Profile {
    Profile::parse(yaml, Sampling::default()).unwrap()
}

fn default_profile() -> Profile {
    profile(DEFAULT_SCHEDULER_CONF)
}

#[test]
fn load_semantics() {
    let dir = TempDir::new("load");
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let valid = write("valid.conf", WEIGHTED);
    let bad_yaml = write("bad-yaml.conf", "actions: [unclosed\n  tiers: {");
    let bad_action = write("bad-action.conf", BAD_ACTION);
    let zero = write("zero.conf", ZERO_CANDIDATES);
    let missing = dir.path().join("missing.conf");
    let s = Sampling::default();

    // No path: the built-in default, whatever disable_default says.
    for disable in [false, true] {
        let l = load(None, disable, s).unwrap();
        assert_eq!(l.source, ConfigSource::Default);
        assert_eq!(l.profile, default_profile());
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    }

    // A valid file is used either way.
    for disable in [false, true] {
        let l = load(Some(&valid), disable, s).unwrap();
        assert_eq!(l.source, ConfigSource::File(valid.clone()));
        assert_eq!(l.profile, profile(WEIGHTED));
        assert_ne!(l.profile, default_profile());
    }

    // Missing or invalid: the default plus a warning naming the file, or fatal with
    // --disable-default-scheduler-config.
    for (path, reason) in [
        (&missing, "cannot read"),
        (&bad_yaml, "YAML"),
        (&bad_action, "enqueue"),
        (&zero, "candidateNodeCount"),
    ] {
        let l = load(Some(path), false, s).unwrap();
        assert_eq!(l.source, ConfigSource::Default, "{}", path.display());
        assert_eq!(l.profile, default_profile());
        assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
        assert!(
            l.warnings[0].contains(&path.display().to_string()),
            "{:?}",
            l.warnings
        );
        assert!(l.warnings[0].contains(reason), "{:?}", l.warnings);

        let e = load(Some(path), true, s).unwrap_err();
        let text = e.to_string();
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains(reason), "{text}");
        match path == &missing {
            true => assert!(matches!(e, ReloadError::Read { .. }), "{e:?}"),
            false => assert!(matches!(e, ReloadError::Invalid { .. }), "{e:?}"),
        }
    }

    // The profile's own warnings are passed on.
    let with_unsupported = write(
        "unsupported.conf",
        "actions: allocate\ntiers:\n- plugins:\n  - name: predicates\n    arguments:\n      predicate.PodAffinityEnable: true\n",
    );
    let l = load(Some(&with_unsupported), true, s).unwrap();
    assert_eq!(l.warnings, l.profile.warnings);
}

/// What the watcher hands to its callback.
type Delivery = Result<Profile, String>;

/// Receives what the watcher delivers.
fn recorder() -> (impl Fn(Delivery) + Send + 'static, mpsc::Receiver<Delivery>) {
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    (
        move |r| {
            let _ = tx.lock().unwrap().send(r);
        },
        rx,
    )
}

const WAIT: Duration = Duration::from_secs(5);

fn next(rx: &mpsc::Receiver<Delivery>) -> Delivery {
    rx.recv_timeout(WAIT)
        .expect("no reload delivered within 5 s")
}

fn quiet(rx: &mpsc::Receiver<Delivery>) {
    if let Ok(r) = rx.recv_timeout(Duration::from_millis(600)) {
        panic!("unexpected delivery: {r:?}");
    }
}

#[test]
fn reload_on_plain_rewrite() {
    let dir = TempDir::new("plain");
    let path = dir.path().join("agent-scheduler.conf");
    std::fs::write(&path, DEFAULT_SCHEDULER_CONF).unwrap();
    let (cb, rx) = recorder();
    let w = watch(path.clone(), Sampling::default(), cb).unwrap();

    std::fs::write(&path, WEIGHTED).unwrap();
    assert_eq!(next(&rx), Ok(profile(WEIGHTED)));

    // Same bytes again, an unrelated file, and a semantically equal rewrite: nothing.
    std::fs::write(&path, WEIGHTED).unwrap();
    std::fs::write(dir.path().join("other"), "x").unwrap();
    std::fs::write(&path, format!("# a comment\n{WEIGHTED}")).unwrap();
    quiet(&rx);

    // Invalid: Err, then a valid one is delivered.
    std::fs::write(&path, BAD_ACTION).unwrap();
    let e = next(&rx).unwrap_err();
    assert!(
        e.contains("enqueue") && e.contains("agent-scheduler.conf"),
        "{e}"
    );
    std::fs::write(&path, WEIGHTED_2).unwrap();
    assert_eq!(next(&rx), Ok(profile(WEIGHTED_2)));

    // Dropping the watcher stops it.
    drop(w);
    std::fs::write(&path, WEIGHTED).unwrap();
    quiet(&rx);
}

/// A Kubernetes ConfigMap volume: `<file> -> ..data/<file>`, `..data -> ..<timestamp>`, updated
/// by writing a new timestamped directory and renaming a temporary symlink over `..data`.
struct ConfigMapVolume {
    dir: TempDir,
    generation: usize,
}

impl ConfigMapVolume {
    const KEY: &str = "agent-scheduler.conf";

    fn new(content: &str) -> ConfigMapVolume {
        let dir = TempDir::new("configmap");
        let v = ConfigMapVolume { dir, generation: 0 };
        let ts = v.write_timestamped(content);
        std::os::unix::fs::symlink(&ts, v.dir.path().join("..data")).unwrap();
        std::os::unix::fs::symlink(
            Path::new("..data").join(Self::KEY),
            v.dir.path().join(Self::KEY),
        )
        .unwrap();
        v
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join(Self::KEY)
    }

    /// Returns the new directory's name (relative, as the kubelet's symlink target is).
    fn write_timestamped(&self, content: &str) -> String {
        let name = format!("..2026_01_01_00_00_{:02}.123", self.generation);
        let d = self.dir.path().join(&name);
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join(Self::KEY), content).unwrap();
        name
    }

    /// The kubelet's atomic update (`AtomicWriter`): new dir, `..data_tmp` symlink, rename over
    /// `..data`, remove the old dir.
    fn update(&mut self, content: &str) {
        let old = std::fs::read_link(self.dir.path().join("..data")).unwrap();
        self.generation += 1;
        let ts = self.write_timestamped(content);
        let tmp = self.dir.path().join("..data_tmp");
        std::os::unix::fs::symlink(&ts, &tmp).unwrap();
        std::fs::rename(&tmp, self.dir.path().join("..data")).unwrap();
        std::fs::remove_dir_all(self.dir.path().join(old)).unwrap();
    }
}

#[test]
fn reload_on_configmap_symlink_swap() {
    let mut cm = ConfigMapVolume::new(DEFAULT_SCHEDULER_CONF);
    let l = load(Some(&cm.path()), true, Sampling::default()).unwrap();
    assert_eq!(l.profile, default_profile());

    let (cb, rx) = recorder();
    let _w = watch(cm.path(), Sampling::default(), cb).unwrap();

    cm.update(WEIGHTED);
    assert_eq!(next(&rx), Ok(profile(WEIGHTED)));

    // An invalid update is reported and a following valid one delivered.
    cm.update("actions: allocate\ntiers: [[[\n");
    let e = next(&rx).unwrap_err();
    assert!(e.contains("YAML"), "{e}");
    cm.update(WEIGHTED_2);
    assert_eq!(next(&rx), Ok(profile(WEIGHTED_2)));

    // An update with the same content delivers nothing.
    cm.update(WEIGHTED_2);
    quiet(&rx);
}

#[test]
fn missing_file_at_start_is_delivered_once_it_appears() {
    let dir = TempDir::new("appear");
    let path = dir.path().join("agent-scheduler.conf");
    let (cb, rx) = recorder();
    let _w = watch(path.clone(), Sampling::default(), cb).unwrap();
    std::fs::write(&path, WEIGHTED).unwrap();
    assert_eq!(next(&rx), Ok(profile(WEIGHTED)));
    // Removal is reported (the caller keeps its profile); restoring the same content is not a
    // change.
    std::fs::remove_file(&path).unwrap();
    assert!(next(&rx).unwrap_err().contains("cannot read"));
    std::fs::write(&path, WEIGHTED).unwrap();
    quiet(&rx);
}

#[test]
fn watching_a_missing_directory_fails_clearly() {
    let dir = TempDir::new("nodir");
    let path = dir.path().join("no-such-dir").join("agent-scheduler.conf");
    let (cb, _rx) = recorder();
    let e = watch(path, Sampling::default(), cb).unwrap_err();
    assert!(matches!(e, ReloadError::Watch { .. }), "{e:?}");
    assert!(e.to_string().contains("no-such-dir"), "{e}");
}
