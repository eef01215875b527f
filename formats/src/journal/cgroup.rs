//! The `cgroup-cpu` event (JOURNAL.md §Events): one telemetry second of the recorder's own
//! control group, its CPU usage and throttling against its quota. Written by the recorder beside
//! the host's /proc/stat reading, read by the analyzer's G2.3 (SPEC §2). The detail's form lives
//! here so that the writer and the reader cannot drift apart.

/// One second of the recorder's cgroup CPU accounting: differences over the interval, and the
/// quota in force at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupCpu {
    /// The cgroup interface: 1 (cpu and cpuacct controllers) or 2 (the unified hierarchy).
    pub version: u8,
    /// CPU time the cgroup used in the interval (v2 `usage_usec`, v1 `cpuacct.usage`), ns.
    pub usage_ns: u64,
    /// Time the cgroup spent throttled in the interval (v2 `throttled_usec`, v1
    /// `throttled_time`), ns.
    pub throttled_ns: u64,
    /// Enforcement periods that elapsed in the interval (`nr_periods`).
    pub periods: u64,
    /// Periods in which the cgroup was throttled (`nr_throttled`).
    pub throttled_periods: u64,
    /// CPU time allowed per period (v2 `cpu.max`'s first field, v1 `cpu.cfs_quota_us`), us;
    /// 0 when there is no quota (`max`, or -1).
    pub quota_us: u64,
    /// The enforcement period, us.
    pub period_us: u64,
    /// The interval the differences cover, ns.
    pub interval_ns: u64,
}

impl CgroupCpu {
    /// The quota in cores (quota over period); `None` without a quota.
    pub fn quota_cores(&self) -> Option<f64> {
        (self.quota_us > 0 && self.period_us > 0)
            .then(|| self.quota_us as f64 / self.period_us as f64)
    }

    /// The share of the quota used over the interval (1.0 = the whole quota); `None` without a
    /// quota or an interval.
    pub fn busy_of_quota(&self) -> Option<f64> {
        let cores = self.quota_cores()?;
        (self.interval_ns > 0).then(|| self.usage_ns as f64 / (cores * self.interval_ns as f64))
    }

    /// The event's value: [`Self::busy_of_quota`] in parts per million, rounded.
    pub fn value(&self) -> Option<i64> {
        self.busy_of_quota().map(|b| (b * 1e6).round() as i64)
    }

    /// The event's detail, `key=value` pairs in a fixed order.
    pub fn detail(&self) -> String {
        format!(
            "version={} usage_ns={} throttled_ns={} periods={} throttled_periods={} quota_us={} period_us={} interval_ns={}",
            self.version,
            self.usage_ns,
            self.throttled_ns,
            self.periods,
            self.throttled_periods,
            self.quota_us,
            self.period_us,
            self.interval_ns
        )
    }

    /// Reads a detail [`Self::detail`] wrote; `None` when any field is missing, repeated,
    /// unknown or not a number (the reader then skips the event, as JOURNAL.md says).
    pub fn parse(detail: &str) -> Option<CgroupCpu> {
        let mut fields: [Option<u64>; 8] = [None; 8];
        const KEYS: [&str; 8] = [
            "version",
            "usage_ns",
            "throttled_ns",
            "periods",
            "throttled_periods",
            "quota_us",
            "period_us",
            "interval_ns",
        ];
        for pair in detail.split_whitespace() {
            let (key, value) = pair.split_once('=')?;
            let slot = KEYS.iter().position(|k| *k == key)?;
            if fields[slot].is_some() {
                return None;
            }
            fields[slot] = Some(value.parse().ok()?);
        }
        let [version, usage_ns, throttled_ns, periods, throttled_periods, quota_us, period_us, interval_ns] =
            fields;
        let version = u8::try_from(version?).ok().filter(|v| *v == 1 || *v == 2)?;
        Some(CgroupCpu {
            version,
            usage_ns: usage_ns?,
            throttled_ns: throttled_ns?,
            periods: periods?,
            throttled_periods: throttled_periods?,
            quota_us: quota_us?,
            period_us: period_us?,
            interval_ns: interval_ns?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detail_reads_back_as_written_and_a_malformed_one_is_skipped() {
        let c = CgroupCpu {
            version: 2,
            usage_ns: 250_000_000,
            throttled_ns: 40_000_000,
            periods: 10,
            throttled_periods: 3,
            quota_us: 50_000,
            period_us: 100_000,
            interval_ns: 1_000_000_000,
        };
        assert_eq!(CgroupCpu::parse(&c.detail()), Some(c));
        // Half a core for a second is 500 ms; 250 ms used is half the quota.
        assert_eq!(c.quota_cores(), Some(0.5));
        assert_eq!(c.busy_of_quota(), Some(0.5));
        assert_eq!(c.value(), Some(500_000));
        let unlimited = CgroupCpu { quota_us: 0, ..c };
        assert_eq!((unlimited.busy_of_quota(), unlimited.value()), (None, None));
        let detail = c.detail();
        for broken in [
            detail.replace("usage_ns=250000000 ", ""),
            detail.replace("version=2", "version=3"),
            detail.replace("periods=10", "periods=ten"),
            format!("{detail} periods=1"),
            format!("{detail} extra=1"),
            detail.replace('=', ":"),
        ] {
            assert_eq!(CgroupCpu::parse(&broken), None, "{broken}");
        }
    }
}
