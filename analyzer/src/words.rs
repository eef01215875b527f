//! How a count prints as a share of another, for every report file that prints one.

/// `count` of `n` as a percentage with two decimals, or more where two would print 0 or 100 for
/// a share that is neither.
pub fn percent_of(count: u64, n: u64) -> String {
    let value = 100.0 * count as f64 / n.max(1) as f64;
    let mut text = format!("{value:.2} %");
    for digits in 3..=9 {
        let printed: f64 = text.trim_end_matches(" %").parse().unwrap_or(value);
        if (printed == 0.0) == (count == 0) && (printed == 100.0) == (count == n) {
            break;
        }
        text = format!("{value:.digits$} %");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::percent_of;

    #[test]
    fn a_percentage_never_prints_as_all_or_none_when_it_is_neither() {
        assert_eq!(percent_of(2350, 3570), "65.83 %");
        assert_eq!(percent_of(0, 10), "0.00 %");
        assert_eq!(percent_of(10, 10), "100.00 %");
        // 99,999 of 100,000 rounds to 100.00 at two decimals; it takes three.
        assert_eq!(percent_of(99_999, 100_000), "99.999 %");
        assert_eq!(percent_of(1, 1_000_000), "0.0001 %");
    }
}
