//! What the tests of every percentes crate share. A dev-dependency only: nothing here reaches a
//! build users run.
//!
//! Tests used to name a folder `percentes-NAME-PID` under the system's temporary folder and leave
//! it behind: about 40 MB a run of the whole suite, which on a machine that runs it often (a
//! developer's, a CI runner that keeps its disk) piled up to gigabytes. Every test's folder now
//! comes from here, named `percentes-test-PID.NS-...` (the process and its PID namespace):
//! - [`Scratch`] is one test's own folder, removed when the test passes and kept, its path
//!   printed, when it fails, for whoever looks into the failure;
//! - [`shared_folder`] is a folder the tests of one process share (a helper that writes each
//!   test's files by name into one place), left for the run's end;
//! - what a finished process left (its shared folders, a failed or killed test's scratch) is
//!   removed by the next process of the same PID namespace that asks for a folder here, once it
//!   is [`LEFT_FOR`] old, so a machine holds at most the last runs' leftovers. A process in
//!   another namespace (a container's tests sharing the host's /tmp) cannot tell whether the
//!   maker still runs, and leaves its folders alone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The prefix of every folder made here, which the sweep of leftovers goes by: nothing else in
/// the temporary folder is ever touched.
const PREFIX: &str = "percentes-test-";

/// How long a finished process's folders are kept before a later process removes them: long
/// enough to look into a failure, short enough that leftovers never pile up.
pub const LEFT_FOR: Duration = Duration::from_secs(600);

/// Removes, once a process, the folders here that processes of its PID namespace no longer
/// running left, once they are [`LEFT_FOR`] old. Only where `/proc` tells which processes run
/// (Linux); elsewhere nothing is swept.
fn sweep_leftovers() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| sweep(&std::env::temp_dir()));
}

/// Removes the folders in `dir` that [`sweep_leftovers`] would.
fn sweep(dir: &Path) {
    let ours = namespace();
    if ours == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, ns)) = name.to_str().and_then(maker) else {
            continue;
        };
        if ns != ours {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|at| at.elapsed().ok())
            .is_some_and(|age| age >= LEFT_FOR);
        if old && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The process that made a folder named `percentes-test-PID.NS-...` and its PID namespace;
/// `None` for any other name.
fn maker(name: &str) -> Option<(u32, u64)> {
    let rest = name.strip_prefix(PREFIX)?;
    let (maker, _) = rest.split_once('-')?;
    let (pid, ns) = maker.split_once('.')?;
    Some((pid.parse().ok()?, ns.parse().ok()?))
}

/// This process's PID namespace, the inode `/proc/self/ns/pid` names (`pid:[N]`); 0 where it
/// cannot be read (no /proc: not Linux), which no folder is swept under.
fn namespace() -> u64 {
    static NS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NS.get_or_init(|| {
        std::fs::read_link("/proc/self/ns/pid")
            .ok()
            .and_then(|link| {
                let link = link.to_str()?.to_owned();
                link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
            })
            .unwrap_or(0)
    })
}

/// `PID.NS`: who makes a folder here.
fn this_maker() -> String {
    format!("{}.{}", std::process::id(), namespace())
}

/// A folder the tests of this process share, `percentes-test-PID.NS-NAME`, made if missing. Left
/// for the run's end: a later process removes it ([`LEFT_FOR`] after this one ends). For a
/// helper that writes each test's files by a name of their own into one place; a test that can
/// hold a folder of its own takes a [`Scratch`].
///
/// # Panics
/// When the folder cannot be made.
pub fn shared_folder(name: &str) -> PathBuf {
    sweep_leftovers();
    let path = std::env::temp_dir().join(format!("{PREFIX}{}-{name}", this_maker()));
    if let Err(e) = std::fs::create_dir_all(&path) {
        panic!("cannot make the shared test folder {}: {e}", path.display());
    }
    path
}

/// Scratch folders made by this process so far: each gets a number of its own, so two tests
/// running in parallel that ask for the same name never share (or remove) each other's folder.
static MADE: AtomicU64 = AtomicU64::new(0);

/// A fresh, empty folder for one test: `percentes-test-PID.NS-N-NAME` under [`std::env::temp_dir`].
/// It reads as the folder's [`Path`] (`scratch.join("run.pj")`, `&*scratch`). Dropped at the end
/// of a passing test, it is removed with what the test wrote into it; dropped while the test
/// panics (an assertion failed), it is kept and its path written to standard error.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Makes the folder, removing first whatever a run of a process with the same id left
    /// under the same name (a killed run).
    ///
    /// # Panics
    /// When the folder cannot be made: the test cannot run, and says where it tried.
    pub fn new(name: &str) -> Scratch {
        sweep_leftovers();
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{PREFIX}{}-{n}-{name}", this_maker()));
        let _ = std::fs::remove_dir_all(&path);
        if let Err(e) = std::fs::create_dir_all(&path) {
            panic!("cannot make the scratch folder {}: {e}", path.display());
        }
        Scratch { path }
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps the folder past the test (a test whose files another process still writes, or a
    /// benchmark's output); gives its path.
    pub fn keep(self) -> PathBuf {
        let path = self.path.clone();
        std::mem::forget(self);
        path
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.path
    }
}

impl AsRef<std::ffi::OsStr> for Scratch {
    fn as_ref(&self) -> &std::ffi::OsStr {
        self.path.as_os_str()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("kept for inspection: {}", self.path.display());
        } else {
            // A file a child process still holds open is removed from the folder all the same
            // (Linux); what cannot be removed is left, never a second failure of the test.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    #[test]
    fn a_passing_test_leaves_nothing_and_names_never_collide() {
        let a = Scratch::new("testkit");
        let b = Scratch::new("testkit");
        assert_ne!(a.path(), b.path());
        std::fs::create_dir_all(a.join("deep/er")).unwrap();
        std::fs::write(a.join("deep/er/file"), b"x").unwrap();
        let (kept_a, kept_b) = (a.to_path_buf(), b.to_path_buf());
        assert!(kept_a.is_dir() && kept_b.is_dir());
        drop(a);
        drop(b);
        assert!(!kept_a.exists() && !kept_b.exists());
    }

    #[test]
    fn a_failing_test_keeps_its_folder() {
        let path = std::thread::spawn(|| {
            let scratch = Scratch::new("testkit-failed");
            let path = scratch.to_path_buf();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                let _scratch = scratch;
                panic!("the test's assertion failed");
            }));
            assert!(result.is_err());
            path
        })
        .join()
        .unwrap();
        assert!(path.is_dir(), "a failed test's scratch folder must be kept");
        let _ = std::fs::remove_dir_all(&path);
    }

    #[test]
    fn the_sweep_reads_the_maker_from_the_name_alone() {
        assert_eq!(maker("percentes-test-4242.77-7-cli-init"), Some((4242, 77)));
        assert_eq!(maker("percentes-test-4242.77-record"), Some((4242, 77)));
        assert_eq!(maker("percentes-test-99.1-0-v1-2"), Some((99, 1)));
        // Not ours, or from before the namespace was in the name: never swept.
        assert_eq!(maker("percentes-cli-4242-init"), None);
        assert_eq!(maker("percentes-analysis-4242"), None);
        assert_eq!(maker("percentes-test-cli-init"), None);
        assert_eq!(maker("percentes-test-4242-7-cli-init"), None);
        assert_eq!(maker("other-test-1-2"), None);
        let ours = Some((std::process::id(), namespace()));
        assert_ne!(
            namespace(),
            0,
            "/proc/self/ns/pid names this process's namespace"
        );
        let shared = shared_folder("testkit-shared");
        assert!(shared.is_dir());
        assert_eq!(maker(&shared.file_name().unwrap().to_string_lossy()), ours);
        let scratch = Scratch::new("testkit-name");
        assert_eq!(maker(&scratch.file_name().unwrap().to_string_lossy()), ours);
        std::fs::remove_dir_all(&shared).unwrap();
    }

    #[test]
    fn the_sweep_takes_old_folders_of_finished_processes_of_its_namespace_only() {
        let dir = Scratch::new("testkit-sweep");
        let old = SystemTime::now() - LEFT_FOR - Duration::from_secs(60);
        let make = |name: &str, at: SystemTime| {
            let path = dir.join(name);
            std::fs::create_dir_all(path.join("inner")).unwrap();
            std::fs::File::open(&path)
                .unwrap()
                .set_modified(at)
                .unwrap();
            path
        };
        let ns = namespace();
        // No process has this id (above the kernel's largest, 2^22).
        let gone = make(&format!("percentes-test-999999999.{ns}-0-old"), old);
        let recent = make(
            &format!("percentes-test-999999999.{ns}-1-recent"),
            SystemTime::now(),
        );
        let running = make(
            &format!("percentes-test-{}.{ns}-shared", std::process::id()),
            old,
        );
        let elsewhere = make(&format!("percentes-test-999999999.{}-0-old", ns + 1), old);
        let not_ours = make("percentes-999999999-old", old);
        sweep(&dir);
        assert!(
            !gone.exists(),
            "an old folder of a finished process is swept"
        );
        assert!(
            recent.exists(),
            "a finished process's recent folder is left to look into"
        );
        assert!(
            running.exists(),
            "a running process's folder is never swept"
        );
        assert!(
            elsewhere.exists(),
            "another PID namespace's folder is never swept: its process may be running"
        );
        assert!(not_ours.exists(), "only folders made here are swept");
    }

    #[test]
    fn kept_folders_outlive_their_scratch() {
        let path = Scratch::new("testkit-kept").keep();
        assert!(path.is_dir());
        let _ = std::fs::remove_dir_all(&path);
    }
}
