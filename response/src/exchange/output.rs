//! A response's generated output as it arrives, by kind and by delivery: what becomes its
//! kind-8 stream record (formats/JOURNAL.md "8 stream").

use percentes_formats::journal::stream::{
    Delivery, KindTally, OutputKind, StreamRecord, DELIVERIES_MAX,
};

/// The output tally of one response.
#[derive(Debug)]
pub struct Output {
    /// One tally per kind, in the order the kinds first arrived.
    kinds: Vec<KindTally>,
    deliveries: Vec<Delivery>,
    deliveries_total: u32,
    /// When the latest delivery was read.
    last_delivery_ns: Option<u64>,
    /// The usage's reasoning tokens, when reported.
    pub reasoning_tokens: Option<u32>,
    /// Deltas read after this time are not counted: they came after the request's deadline, by
    /// which it was censored (SPEC §3; nothing a record holds is after its terminal time).
    until_ns: u64,
}

impl Output {
    /// A tally that counts nothing read after `until_ns` (a request's deadline).
    pub fn until(until_ns: u64) -> Output {
        Output {
            kinds: Vec::new(),
            deliveries: Vec::new(),
            deliveries_total: 0,
            last_delivery_ns: None,
            reasoning_tokens: None,
            until_ns,
        }
    }

    /// One delta of `kind`, read at `now_ns`. Deltas read at the same instant (one read of the
    /// socket) are one delivery.
    pub fn delta(&mut self, kind: OutputKind, now_ns: u64) {
        if now_ns > self.until_ns {
            return;
        }
        match self.kinds.iter_mut().find(|k| k.kind == kind as u8) {
            Some(tally) => {
                tally.last_ns = now_ns;
                tally.deltas = tally.deltas.saturating_add(1);
            }
            None => self.kinds.push(KindTally {
                kind: kind as u8,
                first_ns: now_ns,
                last_ns: now_ns,
                deltas: 1,
            }),
        }
        match self.last_delivery_ns {
            Some(last) if last == now_ns => {
                // Past the listed limit a delivery is only counted, not listed.
                if self.deliveries.len() == self.deliveries_total as usize {
                    if let Some(d) = self.deliveries.last_mut() {
                        d.deltas = d.deltas.saturating_add(1);
                    }
                }
            }
            last => {
                // §3: a gap under 1 us is recorded as 1 us; the first delivery has none.
                let gap_us = last.map_or(0, |last| {
                    (now_ns.saturating_sub(last) / 1000).clamp(1, u64::from(u32::MAX)) as u32
                });
                if self.deliveries.len() < DELIVERIES_MAX {
                    self.deliveries.push(Delivery { gap_us, deltas: 1 });
                }
                self.deliveries_total = self.deliveries_total.saturating_add(1);
                self.last_delivery_ns = Some(now_ns);
            }
        }
    }

    /// Whether any generated output arrived.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// The first delta of any kind, ns from the epoch.
    pub fn first_ns(&self) -> Option<u64> {
        self.kinds.iter().map(|k| k.first_ns).min()
    }

    /// Deltas of one kind so far.
    pub fn deltas(&self, kind: OutputKind) -> u32 {
        self.kinds
            .iter()
            .find(|k| k.kind == kind as u8)
            .map_or(0, |k| k.deltas)
    }

    /// The kind-8 record of request `index`, `None` when no output arrived. Its invariants are
    /// asserted here, just before it is encoded: a record that breaks them is a bug of this
    /// tally, never something a server can cause.
    pub fn record(&self, index: u64) -> Option<StreamRecord> {
        if self.kinds.is_empty() {
            return None;
        }
        let record = StreamRecord {
            index,
            kinds: self.kinds.clone(),
            reasoning_tokens: self.reasoning_tokens,
            deliveries: self.deliveries.clone(),
            deliveries_total: self.deliveries_total,
        };
        if let Err(why) = record.check() {
            panic!("the recorder made a stream record that breaks JOURNAL.md's rules: {why}: {record:?}");
        }
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_read_together_are_one_delivery_and_gaps_are_floored() {
        let mut out = Output::until(u64::MAX);
        out.delta(OutputKind::Reasoning, 1_000_000);
        out.delta(OutputKind::Reasoning, 1_000_000);
        out.delta(OutputKind::Reasoning, 21_000_000);
        out.delta(OutputKind::Answer, 21_000_500);
        out.delta(OutputKind::Answer, 31_000_500);
        let r = out.record(4).unwrap();
        assert_eq!(r.first_ns(), Some(1_000_000));
        assert_eq!(
            r.deliveries
                .iter()
                .map(|d| (d.gap_us, d.deltas))
                .collect::<Vec<_>>(),
            [(0, 2), (20_000, 1), (1, 1), (10_000, 1)]
        );
        assert_eq!(r.tally(OutputKind::Reasoning).unwrap().deltas, 3);
        assert_eq!(r.tally(OutputKind::Answer).unwrap().first_ns, 21_000_500);
        assert_eq!(r.deliveries_total, 4);
    }

    #[test]
    fn nothing_after_the_deadline_counts_and_no_output_is_no_record() {
        let mut out = Output::until(5_000);
        assert!(out.record(1).is_none());
        out.delta(OutputKind::ToolCall, 4_000);
        out.delta(OutputKind::ToolCall, 6_000);
        let r = out.record(1).unwrap();
        assert_eq!((r.deltas(), r.deliveries_total), (1, 1));
    }

    #[test]
    fn past_the_listed_limit_deliveries_are_counted_only() {
        let mut out = Output::until(u64::MAX);
        for i in 0..(DELIVERIES_MAX as u64 + 10) {
            out.delta(OutputKind::Answer, 1_000 + i * 2_000);
            out.delta(OutputKind::Answer, 1_000 + i * 2_000);
        }
        let r = out.record(0).unwrap();
        assert_eq!(r.deliveries.len(), DELIVERIES_MAX);
        assert_eq!(r.deliveries_total as usize, DELIVERIES_MAX + 10);
        assert_eq!(r.deltas() as usize, 2 * (DELIVERIES_MAX + 10));
        assert!(r.deliveries.iter().all(|d| d.deltas == 2));
    }
}
