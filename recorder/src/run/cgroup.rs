//! The recorder's own control group, read each telemetry second (issue 16 item 5, SPEC §2 G2.3).
//!
//! In a container, /proc/stat is the node's CPU: busy with other pods (the gate fails for load
//! that never touched the recorder) or idle while the recorder's own quota throttles it (the gate
//! passes while the client is starved). The cgroup's accounting is what the recorder could
//! actually use, so it is journaled beside /proc/stat as `cgroup-cpu` events, and the analyzer's
//! G2.3 reads it where there is a quota.
//!
//! Both interfaces are read: the unified hierarchy (v2: `cpu.stat`, `cpu.max`) and the legacy
//! `cpu` and `cpuacct` controllers (v1: `cpu.stat`, `cpu.cfs_quota_us`, `cpu.cfs_period_us`,
//! `cpuacct.usage`). The quota that binds is the tightest one on the way from the recorder's
//! cgroup up to its hierarchy's root (a Kubernetes pod's limit may sit on the pod's cgroup, not
//! the container's), and usage is read at that level, since the quota caps its whole subtree.

use std::path::{Path, PathBuf};

use percentes_formats::journal::cgroup::CgroupCpu;

use crate::error::RecordError;

/// Where the recorder's CPU accounting and its binding quota are read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cgroup {
    /// 1 or 2.
    pub version: u8,
    /// The cgroup path whose quota binds (as /proc/self/cgroup names it), or the recorder's own
    /// when there is no quota.
    pub path: String,
    /// The directory holding `cpu.stat` and the quota files.
    pub cpu_dir: PathBuf,
    /// The file holding cumulative usage: v2 `cpu.stat` (`usage_usec`), v1 `cpuacct.usage`.
    pub usage_file: PathBuf,
}

/// One cumulative reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub usage_ns: u64,
    pub throttled_ns: u64,
    pub periods: u64,
    pub throttled_periods: u64,
}

/// A quota: CPU time per period, us (0: none), and the period, us.
type Quota = (u64, u64);

impl Cgroup {
    /// Finds this process's cgroup CPU accounting under `root` (`/` on a live system; a test's
    /// folder otherwise), or says why there is none to read (of kind
    /// [`crate::ErrorKind::Host`]; a recording then reads /proc/stat for G2.3).
    pub fn discover(root: &Path) -> Result<Cgroup, RecordError> {
        let unread = |what: &str| {
            let what = what.to_owned();
            move |e: std::io::Error| RecordError::host(format!("cannot read {what}: {e}"))
        };
        let cgroups = std::fs::read_to_string(root.join("proc/self/cgroup"))
            .map_err(unread("/proc/self/cgroup"))?;
        let mountinfo = std::fs::read_to_string(root.join("proc/self/mountinfo"))
            .map_err(unread("/proc/self/mountinfo"))?;
        let mounts = cgroup_mounts(&mountinfo);
        let under = |mount: &Mount, path: &str| -> Option<PathBuf> {
            let relative = path.strip_prefix(mount.root.as_str())?;
            let dir = root
                .join(mount.point.trim_start_matches('/'))
                .join(relative.trim_start_matches('/'));
            dir.is_dir().then_some(dir)
        };
        // v2 when the unified hierarchy has the cpu controller.
        if let (Some(path), Some(mount)) = (
            membership(&cgroups, None),
            mounts.iter().find(|m| m.version == 2),
        ) {
            if let Some(dir) = under(mount, &path) {
                let stop = root.join(mount.point.trim_start_matches('/'));
                if std::fs::read_to_string(stop.join("cgroup.controllers"))
                    .is_ok_and(|c| c.split_whitespace().any(|c| c == "cpu"))
                    || dir.join("cpu.max").is_file()
                {
                    let (bind, bind_path) = binding(&dir, &stop, &path, read_quota_v2);
                    return Ok(Cgroup {
                        version: 2,
                        path: bind_path,
                        usage_file: bind.join("cpu.stat"),
                        cpu_dir: bind,
                    });
                }
            }
        }
        let cpu = mounts
            .iter()
            .find(|m| m.version == 1 && m.controllers.iter().any(|c| c == "cpu"));
        let acct = mounts
            .iter()
            .find(|m| m.version == 1 && m.controllers.iter().any(|c| c == "cpuacct"));
        let (Some(cpu), Some(acct)) = (cpu, acct) else {
            return Err(RecordError::host("no cgroup CPU controller is mounted (neither cgroup v2 with cpu nor v1 cpu and cpuacct)"));
        };
        let (Some(cpu_path), Some(acct_path)) = (
            membership(&cgroups, Some("cpu")),
            membership(&cgroups, Some("cpuacct")),
        ) else {
            return Err(RecordError::host(
                "/proc/self/cgroup names no cpu or cpuacct cgroup",
            ));
        };
        let (Some(cpu_dir), Some(acct_dir)) = (under(cpu, &cpu_path), under(acct, &acct_path))
        else {
            return Err(RecordError::host(format!(
                "the recorder's cgroup {cpu_path} is not visible under the cpu and cpuacct mounts"
            )));
        };
        let stop = root.join(cpu.point.trim_start_matches('/'));
        let (bind, bind_path) = binding(&cpu_dir, &stop, &cpu_path, read_quota_v1);
        // Usage at the same level in the cpuacct hierarchy when it exists there (co-mounted
        // controllers always do), else the recorder's own.
        let levels_up = cpu_dir
            .components()
            .count()
            .saturating_sub(bind.components().count());
        let mut usage_dir = acct_dir.clone();
        for _ in 0..levels_up {
            usage_dir.pop();
        }
        if !usage_dir.join("cpuacct.usage").is_file() {
            usage_dir = acct_dir;
        }
        Ok(Cgroup {
            version: 1,
            path: bind_path,
            cpu_dir: bind,
            usage_file: usage_dir.join("cpuacct.usage"),
        })
    }

    /// The quota in force now; (0, period) when there is none.
    pub fn quota(&self) -> Quota {
        match self.version {
            2 => read_quota_v2(&self.cpu_dir),
            _ => read_quota_v1(&self.cpu_dir),
        }
        .unwrap_or((0, 100_000))
    }

    /// The cumulative counters now; `None` when a file cannot be read.
    pub fn counters(&self) -> Option<Counters> {
        let stat = std::fs::read_to_string(self.cpu_dir.join("cpu.stat")).ok()?;
        let field = |name: &str| -> u64 {
            stat.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
                .unwrap_or(0)
        };
        Some(match self.version {
            2 => Counters {
                usage_ns: field("usage_usec").saturating_mul(1000),
                throttled_ns: field("throttled_usec").saturating_mul(1000),
                periods: field("nr_periods"),
                throttled_periods: field("nr_throttled"),
            },
            _ => Counters {
                usage_ns: std::fs::read_to_string(&self.usage_file)
                    .ok()?
                    .trim()
                    .parse()
                    .ok()?,
                throttled_ns: field("throttled_time"),
                periods: field("nr_periods"),
                throttled_periods: field("nr_throttled"),
            },
        })
    }

    /// One interval's sample from two readings.
    pub fn sample(&self, before: Counters, after: Counters, interval_ns: u64) -> CgroupCpu {
        let (quota_us, period_us) = self.quota();
        CgroupCpu {
            version: self.version,
            usage_ns: after.usage_ns.saturating_sub(before.usage_ns),
            throttled_ns: after.throttled_ns.saturating_sub(before.throttled_ns),
            periods: after.periods.saturating_sub(before.periods),
            throttled_periods: after
                .throttled_periods
                .saturating_sub(before.throttled_periods),
            quota_us,
            period_us,
            interval_ns,
        }
    }

    /// The CPU weight of the group whose quota binds (or the recorder's own), with the
    /// kernel's default for its version: v2 `cpu.weight` (default 100), v1 `cpu.shares`
    /// (default 1024). `None` when the file cannot be read (the root group has none).
    pub fn weight(&self) -> Option<(u64, u64)> {
        let (file, default) = match self.version {
            2 => ("cpu.weight", 100),
            _ => ("cpu.shares", 1 << 10),
        };
        let text = std::fs::read_to_string(self.cpu_dir.join(file)).ok()?;
        Some((text.trim().parse().ok()?, default))
    }

    /// The `cgroup-cpu` host fact: what is read, and the quota at the start.
    pub fn fact(&self) -> String {
        let quota = match self.quota() {
            (0, _) => "no CPU quota (G2.3 reads /proc/stat)".to_owned(),
            (q, p) => format!(
                "quota {q} us per {p} us ({:.2} cores; G2.3 reads the cgroup)",
                q as f64 / p as f64
            ),
        };
        format!(
            "v{} {}: {quota}; usage and throttling journaled each second as cgroup-cpu events",
            self.version, self.path
        )
    }
}

/// The tightest quota from `dir` up to `stop` (inclusive): its directory and cgroup path; the
/// starting directory when no level has a quota.
fn binding(
    dir: &Path,
    stop: &Path,
    path: &str,
    read: fn(&Path) -> Option<Quota>,
) -> (PathBuf, String) {
    let mut best: Option<(f64, PathBuf, String)> = None;
    let mut at = dir.to_path_buf();
    let mut at_path = path.to_owned();
    loop {
        if let Some((q, p)) = read(&at).filter(|(q, p)| *q > 0 && *p > 0) {
            let cores = q as f64 / p as f64;
            if best.as_ref().is_none_or(|(b, _, _)| cores < *b) {
                best = Some((cores, at.clone(), at_path.clone()));
            }
        }
        if at == stop || !at.pop() || !at.starts_with(stop) {
            break;
        }
        at_path = match at_path.rsplit_once('/') {
            Some(("", _)) | None => "/".into(),
            Some((parent, _)) => parent.into(),
        };
    }
    best.map_or_else(|| (dir.to_path_buf(), path.to_owned()), |(_, d, p)| (d, p))
}

/// v2 `cpu.max`: `max 100000` or `50000 100000`.
fn read_quota_v2(dir: &Path) -> Option<Quota> {
    let text = std::fs::read_to_string(dir.join("cpu.max")).ok()?;
    parse_cpu_max(&text)
}

pub(crate) fn parse_cpu_max(text: &str) -> Option<Quota> {
    let mut fields = text.split_whitespace();
    let quota = fields.next()?;
    let period: u64 = fields.next()?.parse().ok()?;
    Some((
        if quota == "max" {
            0
        } else {
            quota.parse().ok()?
        },
        period,
    ))
}

/// v1 `cpu.cfs_quota_us` (-1: none) and `cpu.cfs_period_us`.
fn read_quota_v1(dir: &Path) -> Option<Quota> {
    let quota: i64 = std::fs::read_to_string(dir.join("cpu.cfs_quota_us"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let period: u64 = std::fs::read_to_string(dir.join("cpu.cfs_period_us"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((u64::try_from(quota).unwrap_or(0), period))
}

/// The cgroup path of this process for a v1 controller (`Some("cpu")`) or the unified hierarchy
/// (`None`), from /proc/self/cgroup's `ID:CONTROLLERS:PATH` lines.
fn membership(cgroups: &str, controller: Option<&str>) -> Option<String> {
    cgroups.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = match controller {
            None => id == "0" && controllers.is_empty(),
            Some(c) => controllers.split(',').any(|x| x == c),
        };
        matches.then(|| path.to_owned())
    })
}

/// A cgroup filesystem mount from /proc/self/mountinfo.
#[derive(Debug, PartialEq, Eq)]
struct Mount {
    version: u8,
    /// The cgroup path the mount shows at its mount point (`/` outside a cgroup namespace).
    root: String,
    point: String,
    /// v1 controllers from the super options.
    controllers: Vec<String>,
}

fn cgroup_mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let fields: Vec<&str> = before.split_whitespace().collect();
            let (root, point) = (fields.get(3)?, fields.get(4)?);
            let mut after = after.split_whitespace();
            let fstype = after.next()?;
            let _source = after.next()?;
            let options = after.next().unwrap_or("");
            let version = match fstype {
                "cgroup2" => 2,
                "cgroup" => 1,
                _ => return None,
            };
            Some(Mount {
                version,
                root: unescape(root),
                point: unescape(point),
                controllers: options.split(',').map(str::to_owned).collect(),
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as octal (`\040`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = std::str::from_utf8(&bytes[i + 1..i + 4]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(digits, 8) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let file = root.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }

    fn scratch(name: &str) -> percentes_testkit::Scratch {
        percentes_testkit::Scratch::new(&format!("cgroup-{name}"))
    }

    /// A Kubernetes-shaped v2 tree: the pod's cgroup carries a 1.5-core limit, the container's a
    /// 2-core one; the pod's binds, and usage is read there.
    #[test]
    fn v2_reads_the_tightest_quota_on_the_way_up_and_its_usage() {
        let root = scratch("v2");
        write(&root, "proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
        write(
            &root,
            "proc/self/mountinfo",
            "30 1 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        write(
            &root,
            "sys/fs/cgroup/cgroup.controllers",
            "cpuset cpu io memory\n",
        );
        write(&root, "sys/fs/cgroup/kubepods/cpu.max", "max 100000\n");
        write(
            &root,
            "sys/fs/cgroup/kubepods/pod1/cpu.max",
            "150000 100000\n",
        );
        write(
            &root,
            "sys/fs/cgroup/kubepods/pod1/cpu.stat",
            "usage_usec 2000000\nuser_usec 1500000\nsystem_usec 500000\nnr_periods 40\nnr_throttled 3\nthrottled_usec 120000\n",
        );
        write(
            &root,
            "sys/fs/cgroup/kubepods/pod1/ctr/cpu.max",
            "200000 100000\n",
        );
        write(
            &root,
            "sys/fs/cgroup/kubepods/pod1/ctr/cpu.stat",
            "usage_usec 1\n",
        );
        let cg = Cgroup::discover(&root).unwrap();
        assert_eq!((cg.version, cg.path.as_str()), (2, "/kubepods/pod1"));
        assert_eq!(cg.quota(), (150_000, 100_000));
        let c = cg.counters().unwrap();
        assert_eq!(
            c,
            Counters {
                usage_ns: 2_000_000_000,
                throttled_ns: 120_000_000,
                periods: 40,
                throttled_periods: 3
            }
        );
        let later = Counters {
            usage_ns: c.usage_ns + 750_000_000,
            periods: c.periods + 10,
            ..c
        };
        let s = cg.sample(c, later, 1_000_000_000);
        // 0.75 s of CPU in 1 s against 1.5 cores: half the quota.
        assert_eq!(s.busy_of_quota(), Some(0.5));
        assert_eq!((s.periods, s.throttled_ns), (10, 0));
        assert!(cg.fact().contains("1.50 cores"), "{}", cg.fact());
        std::fs::remove_dir_all(root).unwrap();
    }

    /// This machine's shape: v1 with cpu and cpuacct mounted apart; a quota of -1 is none.
    #[test]
    fn v1_reads_cpu_and_cpuacct_and_minus_one_is_no_quota() {
        let root = scratch("v1");
        write(
            &root,
            "proc/self/cgroup",
            "4:memory:/x\n2:cpuacct:/job\n1:cpu:/job\n0::/\n",
        );
        write(
            &root,
            "proc/self/mountinfo",
            "24 1 0:20 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n25 1 0:21 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n26 1 0:22 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        );
        write(&root, "sys/fs/cgroup/unified/cgroup.controllers", "");
        write(&root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
        write(&root, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
        write(&root, "sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "5000\n");
        write(&root, "sys/fs/cgroup/cpu/job/cpu.cfs_period_us", "100000\n");
        write(
            &root,
            "sys/fs/cgroup/cpu/job/cpu.stat",
            "nr_periods 12\nnr_throttled 11\nthrottled_time 900000000\n",
        );
        write(
            &root,
            "sys/fs/cgroup/cpuacct/job/cpuacct.usage",
            "61000000\n",
        );
        let cg = Cgroup::discover(&root).unwrap();
        assert_eq!((cg.version, cg.path.as_str()), (1, "/job"));
        assert_eq!(cg.quota(), (5000, 100_000));
        assert_eq!(
            cg.counters().unwrap(),
            Counters {
                usage_ns: 61_000_000,
                throttled_ns: 900_000_000,
                periods: 12,
                throttled_periods: 11
            }
        );
        // Without the job's quota, the root's -1 is no quota: the recorder's own cgroup is read.
        write(&root, "sys/fs/cgroup/cpu/job/cpu.cfs_quota_us", "-1\n");
        let cg = Cgroup::discover(&root).unwrap();
        assert_eq!((cg.path.as_str(), cg.quota().0), ("/job", 0));
        assert!(cg.fact().contains("no CPU quota"), "{}", cg.fact());
        std::fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn no_controller_says_why_and_mountinfo_escapes_are_read() {
        let root = scratch("none");
        write(&root, "proc/self/cgroup", "0::/\n");
        write(
            &root,
            "proc/self/mountinfo",
            "1 0 8:1 / / rw - ext4 /dev/root rw\n",
        );
        let why = Cgroup::discover(&root).unwrap_err();
        assert_eq!(why.kind(), crate::ErrorKind::Host, "{why}");
        assert!(
            why.to_string().contains("no cgroup CPU controller"),
            "{why}"
        );
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
        assert_eq!(unescape(r"/plain\"), r"/plain\");
        assert_eq!(parse_cpu_max("max 100000\n"), Some((0, 100_000)));
        assert_eq!(parse_cpu_max("garbage"), None);
        std::fs::remove_dir_all(root).unwrap();
    }
}
