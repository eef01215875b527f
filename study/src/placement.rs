//! Placement: the target's processes and the recorder on separate CPUs of one host, as a cluster
//! keeps them on separate nodes (`[testbed.placement]`, SPEC §2 "Placement").
//!
//! On a shared host the target (a serving engine takes every core it can) starves the recorder,
//! and the client gate then fails the run for a reason that is the testbed's, not the client's
//! or the service's. So the study runner makes one control group per side under its own:
//! `percentes-study-PID/target` with the target's CPUs, where every replica and the proxy start
//! (each replica, optionally, in a group of its own below it with a CPU quota, so that it cannot
//! take its neighbour's share, as a replica on its own GPU could not), and
//! `percentes-study-PID/recorder` with the recorder's CPUs and a CPU quota, which this process
//! joins before it records. The recorder then journals the cgroup's usage against that quota,
//! which is what G2.3 reads under v0.3 and later, and `target-placement` says what was placed
//! where.
//!
//! A cpuset, not an affinity mask (`taskset`): a serving engine sets its own threads' affinity
//! (vLLM's CPU backend binds its OpenMP threads), and an affinity mask is the process's to
//! change, while a cpuset bounds whatever it asks for.
//!
//! cgroup v1 (separate `cpuset`, `cpu` and `cpuacct` hierarchies, as on this project's VMs) and
//! v2 (the unified hierarchy, where this process's cgroup must let it enable `cpuset` and `cpu`
//! for its children) are both handled. Everything made is removed when the placement is dropped,
//! after this process has moved back to where it was.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{bail, Context, Result};

/// The CFS period the quotas are written against, microseconds (the kernel's default).
const PERIOD_US: u64 = 100_000;

/// `[testbed.placement]`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PlacementPlan {
    /// The CPUs the target's processes (replicas, proxy) may run on.
    pub target_cpus: Vec<usize>,
    /// The CPUs the recorder (this process) may run on; disjoint from `target_cpus`.
    pub recorder_cpus: Vec<usize>,
    /// The recorder's CPU quota, in CPUs (default: one per recorder CPU). G2.3 reads its usage
    /// against this.
    #[serde(default)]
    pub recorder_quota_cpus: Option<f64>,
    /// Each replica's own CPU quota, in CPUs, when set: a replica cannot take a lost
    /// neighbour's share of the target's CPUs, as a replica on its own node or GPU could not.
    #[serde(default)]
    pub replica_quota_cpus: Option<f64>,
}

impl PlacementPlan {
    /// The plan in range on a host with `online` CPUs.
    pub fn check(&self, online: usize) -> Result<()> {
        for (key, cpus) in [
            ("target_cpus", &self.target_cpus),
            ("recorder_cpus", &self.recorder_cpus),
        ] {
            if cpus.is_empty() {
                bail!("[testbed.placement] {key} is empty: name at least one CPU");
            }
            if let Some(cpu) = cpus.iter().find(|&&c| c >= online) {
                bail!(
                    "[testbed.placement] {key} names CPU {cpu}, and this host has CPUs 0-{} only",
                    online.saturating_sub(1)
                );
            }
        }
        if let Some(cpu) = self
            .target_cpus
            .iter()
            .find(|c| self.recorder_cpus.contains(c))
        {
            bail!("[testbed.placement] CPU {cpu} is in both target_cpus and recorder_cpus: the point of placement is that they share none");
        }
        for (key, quota, most) in [
            (
                "recorder_quota_cpus",
                self.recorder_quota_cpus,
                self.recorder_cpus.len(),
            ),
            (
                "replica_quota_cpus",
                self.replica_quota_cpus,
                self.target_cpus.len(),
            ),
        ] {
            if let Some(q) = quota {
                if !(q.is_finite() && q >= 0.01 && q <= most as f64) {
                    bail!("[testbed.placement] {key} = {q} must lie in 0.01..={most} (the CPUs it may run on)");
                }
            }
        }
        Ok(())
    }

    /// What was placed where, in words (the `target-placement` host fact).
    fn describe(&self, tag: &str, unified: bool) -> String {
        format!(
            "cgroup {}: the target (replicas and proxy) in {tag}/target on CPUs {}{}; the recorder (and the study runner) in {tag}/recorder on CPUs {} with a CPU quota of {:.2} CPUs ({} us per {PERIOD_US} us) and a CPU weight of {} ({tag} and {tag}/recorder)",
            if unified { "v2" } else { "v1" },
            cpu_list(&self.target_cpus),
            self.replica_quota_cpus.map_or(String::new(), |q| format!(", each replica in a group of its own there with a CPU quota of {q:.2} CPUs")),
            cpu_list(&self.recorder_cpus),
            self.recorder_quota(),
            (self.recorder_quota() * PERIOD_US as f64).round() as u64,
            if unified {
                format!("{RECORDER_WEIGHT_V2} of cpu.weight")
            } else {
                format!("{RECORDER_SHARES_V1} of cpu.shares")
            },
        )
    }

    fn recorder_quota(&self) -> f64 {
        self.recorder_quota_cpus
            .unwrap_or(self.recorder_cpus.len() as f64)
    }
}

/// The CPUs online on this host (not this process's share of them).
pub fn online_cpus() -> usize {
    // SAFETY: sysconf reads a number; no memory is involved.
    #[allow(unsafe_code)]
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// A CPU list as the kernel writes one (`1`, `0,2`).
fn cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Which hierarchy layout the host has, and where.
#[derive(Clone, Debug, PartialEq)]
enum Layout {
    /// cgroup v2: one mount.
    Unified(PathBuf),
    /// cgroup v1: the `cpuset`, `cpu` and `cpuacct` mounts (cpu and cpuacct may be one).
    Split {
        cpuset: PathBuf,
        cpu: PathBuf,
        cpuacct: PathBuf,
    },
}

impl Layout {
    /// Each hierarchy to make groups in, with the controller it stands for, and whether the
    /// layout is v2's.
    fn mounts(&self) -> (Vec<(PathBuf, &'static str)>, bool) {
        match self {
            Layout::Unified(at) => (vec![(at.clone(), "unified")], true),
            Layout::Split {
                cpuset,
                cpu,
                cpuacct,
            } => {
                let mut m = vec![(cpuset.clone(), "cpuset"), (cpu.clone(), "cpu")];
                if cpuacct != cpu {
                    m.push((cpuacct.clone(), "cpuacct"));
                }
                (m, false)
            }
        }
    }
}

/// Reads the layout from `/proc/self/mountinfo` and `/proc/self/cgroup` under `root`, and the
/// cgroup this process is in on each hierarchy it will use.
fn discover(root: &Path) -> Result<(Layout, Vec<PathBuf>)> {
    let mountinfo = std::fs::read_to_string(root.join("proc/self/mountinfo"))
        .context("cannot read /proc/self/mountinfo to find the cgroup mounts")?;
    let membership = std::fs::read_to_string(root.join("proc/self/cgroup"))
        .context("cannot read /proc/self/cgroup")?;
    let mut v1: Vec<(Vec<String>, PathBuf)> = Vec::new();
    let mut unified = None;
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split(' ').nth(4).unwrap_or_default();
        let mut right = right.split(' ');
        let fstype = right.next().unwrap_or_default();
        let options = right.nth(1).unwrap_or_default();
        let at = root.join(mount_point.trim_start_matches('/'));
        match fstype {
            "cgroup2" => unified = Some(at),
            "cgroup" => v1.push((options.split(',').map(str::to_owned).collect(), at)),
            _ => {}
        }
    }
    let v1_mount = |controller: &str| {
        v1.iter()
            .find(|(options, _)| options.iter().any(|o| o == controller))
            .map(|(_, at)| at.clone())
    };
    let v1_member = |controller: &str| {
        membership.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then(|| PathBuf::from(path.trim_start_matches('/')))
        })
    };
    if let (Some(cpuset), Some(cpu), Some(cpuacct)) =
        (v1_mount("cpuset"), v1_mount("cpu"), v1_mount("cpuacct"))
    {
        let homes = ["cpuset", "cpu", "cpuacct"]
            .iter()
            .map(|c| v1_member(c).with_context(|| format!("/proc/self/cgroup names no {c} cgroup")))
            .collect::<Result<Vec<_>>>()?;
        return Ok((
            Layout::Split {
                cpuset,
                cpu,
                cpuacct,
            },
            homes,
        ));
    }
    if let Some(at) = unified {
        let home = membership
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .context("/proc/self/cgroup names no cgroup v2 membership")?;
        return Ok((
            Layout::Unified(at),
            vec![PathBuf::from(home.trim_start_matches('/'))],
        ));
    }
    bail!("no cgroup hierarchy with the cpuset and cpu controllers is mounted; placement needs one (cgroup v2, or v1's cpuset, cpu and cpuacct)")
}

/// The placement in force: the groups made, the files a target process writes itself into, and
/// where this process came from.
#[derive(Debug)]
pub struct Placed {
    /// Directories made, deepest last (removed in reverse).
    made: Vec<PathBuf>,
    /// Per hierarchy: this process's original cgroup directory, and the recorder's.
    homes: Vec<(PathBuf, PathBuf)>,
    /// Per hierarchy: the target's group directory.
    target: Vec<PathBuf>,
    /// A replica's own quota, in CPUs, if any.
    replica_quota: Option<f64>,
    /// Whether the hierarchy at the same index carries the cpu controller (a quota goes there).
    has_cpu: Vec<bool>,
    /// v2: the quota file is `cpu.max`; v1: `cpu.cfs_quota_us` and `cpu.cfs_period_us`.
    unified: bool,
    /// What was placed where, in words (the `target-placement` host fact).
    pub description: String,
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .with_context(|| format!("cannot write {text:?} to {}", path.display()))
}

fn make(dir: &Path, made: &mut Vec<PathBuf>) -> Result<()> {
    if !dir.is_dir() {
        std::fs::create_dir(dir).with_context(|| {
            format!(
                "cannot make the control group {} (placement needs root, or a delegated cgroup)",
                dir.display()
            )
        })?;
        made.push(dir.to_path_buf());
    }
    Ok(())
}

/// cgroup v1 starts a cpuset empty, and a group with no CPUs or memory nodes takes no task: the
/// parent gets all of this process's, each child its own CPUs and the same memory nodes.
fn v1_cpusets(
    origin: &Path,
    parent: &Path,
    children: [(&PathBuf, &String); 2],
    made: &mut Vec<PathBuf>,
) -> Result<()> {
    let read = |a: &str, b: &str, what: &str| {
        std::fs::read_to_string(origin.join(a))
            .or_else(|_| std::fs::read_to_string(origin.join(b)))
            .with_context(|| format!("cannot read the {what} of this process's cpuset"))
    };
    let mems = read("cpuset.effective_mems", "cpuset.mems", "memory nodes")?;
    let all = read("cpuset.effective_cpus", "cpuset.cpus", "CPUs")?;
    write(&parent.join("cpuset.cpus"), all.trim())?;
    write(&parent.join("cpuset.mems"), mems.trim())?;
    for (dir, cpus) in children {
        make(dir, made)?;
        write(&dir.join("cpuset.cpus"), cpus)?;
        write(&dir.join("cpuset.mems"), mems.trim())?;
    }
    Ok(())
}

/// The CPU weight the recorder's groups get: the most cgroup v2 allows (`cpu.weight`, default
/// 100), and on v1 the most `cpu.shares` allows (default 1024). Issue 52: with the default,
/// root-level tasks of equal weight starved a placed recorder (G2.4 read 4.5 ms). A weight
/// decides only when the CPU is contended; the quota still bounds the recorder's use.
pub const RECORDER_WEIGHT_V2: u64 = 10_000;
/// [`RECORDER_WEIGHT_V2`] on cgroup v1.
pub const RECORDER_SHARES_V1: u64 = 262_144;

fn set_weight(dir: &Path, unified: bool) -> Result<()> {
    if unified {
        write(&dir.join("cpu.weight"), &RECORDER_WEIGHT_V2.to_string())
    } else {
        write(&dir.join("cpu.shares"), &RECORDER_SHARES_V1.to_string())
    }
}

/// The recorder's group gets its quota, and it and the study's group the most CPU weight: the
/// study's group against its siblings, the recorder's against the target's.
fn hold_for_recorder(parent: &Path, recorder: &Path, quota: f64, unified: bool) -> Result<()> {
    set_quota(recorder, quota, unified)?;
    set_weight(parent, unified)?;
    set_weight(recorder, unified)
}

fn set_quota(dir: &Path, cpus: f64, unified: bool) -> Result<()> {
    let quota_us = (cpus * PERIOD_US as f64).round() as u64;
    if unified {
        write(&dir.join("cpu.max"), &format!("{quota_us} {PERIOD_US}"))
    } else {
        write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
        write(&dir.join("cpu.cfs_quota_us"), &quota_us.to_string())
    }
}

impl Placed {
    /// Makes the groups under `root` (`/` on a live system) and moves this process into the
    /// recorder's. `tag` names the parent group (`percentes-study-PID`).
    pub fn apply(plan: &PlacementPlan, root: &Path, tag: &str) -> Result<Placed> {
        let (layout, homes) = discover(root)?;
        let mut made = Vec::new();
        let result = Self::build(plan, &layout, &homes, tag, &mut made);
        match result {
            Ok(placed) => Ok(placed),
            Err(e) => {
                for dir in made.iter().rev() {
                    let _ = std::fs::remove_dir(dir);
                }
                Err(e)
            }
        }
    }

    fn build(
        plan: &PlacementPlan,
        layout: &Layout,
        homes: &[PathBuf],
        tag: &str,
        made: &mut Vec<PathBuf>,
    ) -> Result<Placed> {
        let (mounts, unified) = layout.mounts();
        let (target_cpus, recorder_cpus) =
            (cpu_list(&plan.target_cpus), cpu_list(&plan.recorder_cpus));
        let mut placed = Placed {
            made: Vec::new(),
            homes: Vec::new(),
            target: Vec::new(),
            replica_quota: plan.replica_quota_cpus,
            has_cpu: Vec::new(),
            unified,
            description: String::new(),
        };
        for ((mount, kind), home) in mounts.iter().zip(homes) {
            let origin = mount.join(home);
            let parent = origin.join(tag);
            if unified {
                // v2: the parent must hand cpuset and cpu down before children can use them.
                write(&origin.join("cgroup.subtree_control"), "+cpuset +cpu").with_context(|| {
                    format!("cgroup v2: cannot enable cpuset and cpu below {} (run under a delegated cgroup with no processes of its own, e.g. `systemd-run --scope -p Delegate=yes`)", origin.display())
                })?;
            }
            make(&parent, made)?;
            if unified {
                write(&parent.join("cgroup.subtree_control"), "+cpuset +cpu")?;
            }
            let (target, recorder) = (parent.join("target"), parent.join("recorder"));
            if *kind == "cpuset" && !unified {
                v1_cpusets(
                    &origin,
                    &parent,
                    [(&target, &target_cpus), (&recorder, &recorder_cpus)],
                    made,
                )?;
            } else {
                make(&target, made)?;
                make(&recorder, made)?;
                if unified {
                    if plan.replica_quota_cpus.is_some() {
                        write(&target.join("cgroup.subtree_control"), "+cpuset +cpu")?;
                    }
                    write(&target.join("cpuset.cpus"), &target_cpus)?;
                    write(&recorder.join("cpuset.cpus"), &recorder_cpus)?;
                }
            }
            let has_cpu = unified || *kind == "cpu";
            if has_cpu {
                hold_for_recorder(&parent, &recorder, plan.recorder_quota(), unified)?;
            }
            placed.has_cpu.push(has_cpu);
            placed.homes.push((origin, recorder));
            placed.target.push(target);
        }
        // This process, every thread of it, into the recorder's groups.
        let me = std::process::id().to_string();
        for (_, recorder) in &placed.homes {
            write(&recorder.join("cgroup.procs"), &me)?;
        }
        placed.description = plan.describe(tag, unified);
        placed.made = std::mem::take(made);
        Ok(placed)
    }

    /// The `cgroup.procs` files a target process named `name` writes itself into before it
    /// runs. With a replica quota every target process gets a group of its own below the
    /// target's (cgroup v2 lets no process sit beside child groups), and a replica's carries
    /// the quota; without one they all share the target's group.
    pub fn target_procs(&mut self, name: &str) -> Result<Vec<PathBuf>> {
        let mut files = Vec::new();
        for i in 0..self.target.len() {
            let Some(quota) = self.replica_quota else {
                files.push(self.target[i].join("cgroup.procs"));
                continue;
            };
            let dir = self.target[i].join(name);
            if !dir.is_dir() {
                make(&dir, &mut self.made)?;
                let cpuset = self.target[i].join("cpuset.mems");
                if !self.unified && cpuset.is_file() {
                    // v1: a new cpuset starts empty.
                    let cpus = std::fs::read_to_string(self.target[i].join("cpuset.cpus"))?;
                    let mems = std::fs::read_to_string(cpuset)?;
                    write(&dir.join("cpuset.cpus"), cpus.trim())?;
                    write(&dir.join("cpuset.mems"), mems.trim())?;
                }
                if self.has_cpu[i] && name.starts_with("replica") {
                    set_quota(&dir, quota, self.unified)?;
                }
            }
            files.push(dir.join("cgroup.procs"));
        }
        Ok(files)
    }
}

impl Drop for Placed {
    fn drop(&mut self) {
        let me = std::process::id().to_string();
        for (origin, _) in &self.homes {
            let _ = std::fs::write(origin.join("cgroup.procs"), &me);
        }
        // A group still holding a process (a replica's last moments) refuses rmdir for a while.
        for dir in self.made.iter().rev() {
            for _ in 0..50 {
                if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

/// The paths a child writes "0" into (itself) between fork and exec, prepared before the fork:
/// in the child only open(2), write(2) and close(2) run, which are async-signal-safe.
#[derive(Debug)]
pub struct Joiner(Vec<CString>);

impl Joiner {
    /// Prepares the files.
    pub fn new(files: &[PathBuf]) -> Result<Joiner> {
        use std::os::unix::ffi::OsStrExt;
        files
            .iter()
            .map(|f| {
                CString::new(f.as_os_str().as_bytes()).map_err(|_| {
                    crate::StudyError::new(
                        crate::ErrorKind::Io,
                        format!("the cgroup path {} holds a NUL", f.display()),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()
            .map(Joiner)
    }

    /// Joins every group: run in the child after fork, before exec.
    pub fn join(&self) -> std::io::Result<()> {
        for path in &self.0 {
            // SAFETY: open, write and close on a NUL-terminated path prepared before the fork;
            // async-signal-safe, no allocation.
            #[allow(unsafe_code)]
            unsafe {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                let rc = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                if rc != 1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> PlacementPlan {
        PlacementPlan {
            target_cpus: vec![1],
            recorder_cpus: vec![0],
            recorder_quota_cpus: None,
            replica_quota_cpus: Some(0.5),
        }
    }

    #[test]
    fn a_plan_that_shares_a_cpu_or_names_one_the_host_lacks_is_refused() {
        plan().check(2).unwrap();
        let mut p = plan();
        p.recorder_cpus = vec![1];
        assert!(p.check(2).unwrap_err().to_string().contains("both"));
        let mut p = plan();
        p.target_cpus = vec![2];
        assert!(p
            .check(2)
            .unwrap_err()
            .to_string()
            .contains("CPUs 0-1 only"));
        let mut p = plan();
        p.replica_quota_cpus = Some(1.5);
        assert!(p.check(2).unwrap_err().to_string().contains("0.01..=1"));
        let mut p = plan();
        p.recorder_cpus.clear();
        assert!(p.check(2).unwrap_err().to_string().contains("empty"));
    }

    /// A fake v1 host (three hierarchies, the process in `/`): the groups are made with the
    /// CPUs, memory nodes and quotas asked, this process's pid is written into the recorder's,
    /// a replica gets its own quota group, and dropping the placement removes them all.
    #[test]
    fn v1_groups_are_made_with_their_cpus_and_quotas_and_removed() {
        let root = percentes_testkit::Scratch::new("placement");
        std::fs::create_dir_all(root.join("proc/self")).unwrap();
        let mut mountinfo = String::new();
        for (i, c) in ["cpuset", "cpu", "cpuacct"].iter().enumerate() {
            let at = root.join(format!("sys/fs/cgroup/{c}"));
            std::fs::create_dir_all(&at).unwrap();
            mountinfo.push_str(&format!(
                "{} 31 0:2{i} / /sys/fs/cgroup/{c} rw,relatime - cgroup cgroup rw,{c}\n",
                32 + i
            ));
        }
        std::fs::write(
            root.join("sys/fs/cgroup/cpuset/cpuset.effective_cpus"),
            "0-1\n",
        )
        .unwrap();
        std::fs::write(
            root.join("sys/fs/cgroup/cpuset/cpuset.effective_mems"),
            "0\n",
        )
        .unwrap();
        std::fs::write(root.join("proc/self/mountinfo"), mountinfo).unwrap();
        std::fs::write(
            root.join("proc/self/cgroup"),
            "4:cpuacct:/\n3:cpuset:/\n1:cpu:/\n0::/\n",
        )
        .unwrap();
        let group = root.join("sys/fs/cgroup");
        {
            let mut placed = Placed::apply(&plan(), &root, "percentes-study-7").unwrap();
            let read = |p: &str| std::fs::read_to_string(group.join(p)).unwrap();
            assert_eq!(read("cpuset/percentes-study-7/target/cpuset.cpus"), "1");
            assert_eq!(read("cpuset/percentes-study-7/recorder/cpuset.cpus"), "0");
            assert_eq!(read("cpuset/percentes-study-7/recorder/cpuset.mems"), "0");
            assert_eq!(
                read("cpu/percentes-study-7/recorder/cpu.cfs_quota_us"),
                "100000"
            );
            let me = std::process::id().to_string();
            for c in ["cpuset", "cpu", "cpuacct"] {
                assert_eq!(
                    read(&format!("{c}/percentes-study-7/recorder/cgroup.procs")),
                    me
                );
            }
            let files = placed.target_procs("replica-1").unwrap();
            assert_eq!(files.len(), 3);
            assert!(files[0].ends_with("cpuset/percentes-study-7/target/replica-1/cgroup.procs"));
            assert_eq!(
                read("cpu/percentes-study-7/target/replica-1/cpu.cfs_quota_us"),
                "50000"
            );
            let proxy = placed.target_procs("proxy").unwrap();
            assert!(proxy[1].ends_with("cpu/percentes-study-7/target/proxy/cgroup.procs"));
            assert!(!group
                .join("cpu/percentes-study-7/target/proxy/cpu.cfs_quota_us")
                .exists());
            assert!(
                placed.description.contains("on CPUs 1"),
                "{}",
                placed.description
            );
            assert!(
                placed.description.contains("quota of 1.00 CPUs"),
                "{}",
                placed.description
            );
            // Issue 52: the study's group and the recorder's weigh the most v1 allows, so
            // tasks beside them cannot starve the recorder; the target's keeps the default.
            for group_dir in ["percentes-study-7", "percentes-study-7/recorder"] {
                assert_eq!(read(&format!("cpu/{group_dir}/cpu.shares")), "262144");
            }
            assert!(!group
                .join("cpu/percentes-study-7/target/cpu.shares")
                .exists());
            assert!(
                placed
                    .description
                    .contains("CPU weight of 262144 of cpu.shares"),
                "{}",
                placed.description
            );
            // A fake cgroupfs keeps the files the kernel would not: clear them so rmdir works.
            for entry in walk(&group) {
                if entry.is_file()
                    && entry
                        .components()
                        .any(|c| c.as_os_str() == "percentes-study-7")
                {
                    std::fs::remove_file(entry).unwrap();
                }
            }
        }
        assert!(!group.join("cpuset/percentes-study-7").exists());
        assert!(!group.join("cpu/percentes-study-7").exists());
        // This process was moved back where it was.
        assert_eq!(
            std::fs::read_to_string(group.join("cpu/cgroup.procs")).unwrap(),
            std::process::id().to_string()
        );
        std::fs::remove_dir_all(&root).unwrap();
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(walk(&path));
            }
            out.push(path);
        }
        out
    }
}
