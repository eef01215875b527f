//! What the mock says of its own service in vLLM's names (`GET /metrics`), so that the
//! recorder's scrapes and the analyzer's server-side evidence (SPEC §2) can be tested against a
//! server whose timing is known: the first-token histogram observes, for each completion
//! request, the time from the request read whole to its first token written to the socket; the
//! end-to-end histogram, to its last byte written. The buckets are vLLM 0.32's defaults up to
//! 80 s (the mock never serves longer).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// vLLM's default first-token buckets, seconds.
pub const FIRST_TOKEN_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0,
];
/// vLLM's default request-latency buckets, seconds.
pub const REQUEST_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
];

/// A cumulative histogram as Prometheus exposes one.
#[derive(Debug)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, seconds: f64) {
        for (bound, count) in self.bounds.iter().zip(&mut self.counts) {
            if seconds <= *bound {
                *count += 1;
            }
        }
        self.sum += seconds;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let _ = writeln!(out, "# TYPE {name} histogram");
        for (bound, count) in self.bounds.iter().zip(&self.counts) {
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound:?}\"}} {count}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {:?}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// The mock's own service statistics.
#[derive(Debug)]
pub struct ServiceStats {
    first_token: Histogram,
    end_to_end: Histogram,
    finished: BTreeMap<&'static str, u64>,
    prompt_tokens: u64,
    generation_tokens: u64,
}

impl Default for ServiceStats {
    fn default() -> ServiceStats {
        ServiceStats {
            first_token: Histogram::new(FIRST_TOKEN_BUCKETS),
            end_to_end: Histogram::new(REQUEST_BUCKETS),
            finished: BTreeMap::new(),
            prompt_tokens: 0,
            generation_tokens: 0,
        }
    }
}

impl ServiceStats {
    /// A request's first token was written, `since` after it was read.
    pub fn first_token(&mut self, since: Duration) {
        self.first_token.observe(since.as_secs_f64());
    }

    /// A request was answered whole (`reason` as its finish_reason), `since` after it was read.
    pub fn finished(&mut self, since: Duration, reason: &'static str, tokens: (u32, u32)) {
        self.end_to_end.observe(since.as_secs_f64());
        *self.finished.entry(reason).or_insert(0) += 1;
        self.prompt_tokens += u64::from(tokens.0);
        self.generation_tokens += u64::from(tokens.1);
    }

    /// The vLLM-named series, with `running` and `capacity` for the KV-cache gauge (the share of
    /// decode slots in use: the mock's stand-in for cache blocks).
    pub fn render(&self, out: &mut String, model: &str, (running, capacity): (u64, u32)) {
        let labels = format!("model_name=\"{model}\"");
        let _ = writeln!(out, "# TYPE vllm:kv_cache_usage_perc gauge");
        let used = running as f64 / f64::from(capacity.max(1));
        let _ = writeln!(out, "vllm:kv_cache_usage_perc{{{labels}}} {used:?}");
        let _ = writeln!(out, "# TYPE vllm:num_preemptions_total counter");
        let _ = writeln!(out, "vllm:num_preemptions_total{{{labels}}} 0");
        let _ = writeln!(out, "# TYPE vllm:request_success_total counter");
        for reason in ["length", "stop"] {
            let n = self.finished.get(reason).copied().unwrap_or(0);
            let _ = writeln!(
                out,
                "vllm:request_success_total{{finished_reason=\"{reason}\",{labels}}} {n}"
            );
        }
        let _ = writeln!(out, "# TYPE vllm:prompt_tokens_total counter");
        let _ = writeln!(
            out,
            "vllm:prompt_tokens_total{{{labels}}} {}",
            self.prompt_tokens
        );
        let _ = writeln!(out, "# TYPE vllm:generation_tokens_total counter");
        let _ = writeln!(
            out,
            "vllm:generation_tokens_total{{{labels}}} {}",
            self.generation_tokens
        );
        self.first_token
            .render(out, "vllm:time_to_first_token_seconds", &labels);
        self.end_to_end
            .render(out, "vllm:e2e_request_latency_seconds", &labels);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_with_sum_and_count() {
        let mut stats = ServiceStats::default();
        stats.first_token(Duration::from_millis(3));
        stats.first_token(Duration::from_millis(30));
        stats.finished(Duration::from_millis(400), "length", (10, 4));
        let mut out = String::new();
        stats.render(&mut out, "m", (1, 4));
        for line in [
            "vllm:kv_cache_usage_perc{model_name=\"m\"} 0.25",
            "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.001\"} 0",
            "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.005\"} 1",
            "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.04\"} 2",
            "vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"+Inf\"} 2",
            "vllm:time_to_first_token_seconds_count{model_name=\"m\"} 2",
            "vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"0.3\"} 0",
            "vllm:e2e_request_latency_seconds_bucket{model_name=\"m\",le=\"0.5\"} 1",
            "vllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 1",
            "vllm:generation_tokens_total{model_name=\"m\"} 4",
        ] {
            assert!(out.lines().any(|l| l == line), "{line} not in\n{out}");
        }
    }
}
