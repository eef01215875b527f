//! The plots' scales in numbers and words: where an axis ends and how many steps it takes,
//! a tick's label, a decade's label, a caption cut into lines.

/// `text` cut at spaces into lines of at most `width` characters (a longer word stands alone).
pub(crate) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// A latency in seconds at a decade tick, in the unit people read it in: `1 µs`, `10 ms`, `1 s`.
pub(super) fn decade_label(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{} s", tick(seconds))
    } else if seconds >= 1e-3 {
        format!("{} ms", tick(seconds * 1e3))
    } else {
        format!("{} µs", tick(seconds * 1e6))
    }
}

/// A tick label with as few decimals as its value needs, at most three: 1.25 reads 1.25, not
/// 1.2; 0.5 reads 0.5; 20 reads 20.
pub(super) fn tick(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.round() {
        return format!("{v:.0}");
    }
    let text = format!("{v:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// The axis top for data up to `high`, and its number of steps: the lowest `n x step` at or
/// above `high` with `step` a round number (1, 2, 2.5 or 5 times a power of ten) and 4 to 8
/// steps, fewer steps at a tie. 33 reads 35 in 7 steps of 5, 102 reads 120 in 6 of 20, 1.2
/// reads 1.2 in 6 of 0.2.
pub fn fitted_axis(high: f64) -> (f64, u32) {
    if high.is_nan() || high <= 0.0 {
        return (1.0, 5);
    }
    let base = 10f64.powf((high / 8.0).log10().floor());
    let mut best: Option<(f64, u32)> = None;
    for magnitude in [base, base * 10.0] {
        for m in [1.0, 2.0, 2.5, 5.0] {
            let step = m * magnitude;
            let n = (high / step * (1.0 - 1e-12)).ceil().max(1.0);
            if !(4.0..=8.0).contains(&n) {
                continue;
            }
            let (top, steps) = (n * step, n as u32);
            let better = |(t, k): (f64, u32)| {
                top < t * (1.0 - 1e-12) || (top <= t * (1.0 + 1e-12) && steps < k)
            };
            if best.is_none_or(better) {
                best = Some((top, steps));
            }
        }
    }
    best.unwrap_or_else(|| (round_up(high), 5))
}

/// The axis top at or above `v` whose five tick steps are round numbers (1, 2, 2.5 or 5 times a
/// power of ten): 40.4 ms becomes 50, so the ticks read 10, 20, ... instead of 8.1, 16.1, ...
pub fn round_up(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 {
        return 1.0;
    }
    let step = v / 5.0;
    let magnitude = 10f64.powf(step.log10().floor());
    let nice = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| m * magnitude >= step * (1.0 - f64::EPSILON))
        .unwrap_or(10.0);
    5.0 * nice * magnitude
}

/// The 1-2-5 value (1, 2 or 5 times a power of ten) at or below `v` (> 0).
pub(super) fn log_floor(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    [5.0, 2.0, 1.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|x| *x <= v * (1.0 + 1e-12))
        .unwrap_or(decade)
}

/// The 1-2-5 value at or above `v` (> 0).
pub(super) fn log_ceil(v: f64) -> f64 {
    let decade = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * decade)
        .find(|x| *x >= v * (1.0 - 1e-12))
        .unwrap_or(decade * 10.0)
}
