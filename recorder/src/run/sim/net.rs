//! The simulated transport (issue 51 item 2): the scripted [`Target`]'s connections and answers,
//! handed to the production HTTP/1.1 parser and [`Exchange`] at the times the target sends them,
//! so every request's class and stamps are the ones a recording would give.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use percentes_formats::journal::records::RequestRecord;
use percentes_formats::schedule::{mix64, Entry};

use super::super::client::service_mean;
use super::super::connect::{connect_verdict, transport_verdict};
use super::super::context::WorkerContext;
use super::super::dispatch::idle_expired;
use super::super::ground::{Clock, Transport};
use super::super::http2::Carried;
use super::super::state::Shared;
use super::beside::{Answered, AnsweredLog, InEffect, Victim, Waiting};
use super::exec::SimClock;
use super::{Events, Target, S};
use percentes_response::exchange::{Exchange, Rule, Verdict};
use percentes_response::http1;

/// A request's own draw from its index and the target's seed: the same on every run, spread
/// over the whole range. Seed 0 gives the draws the simulation gave before it had a seed.
fn draw(index: u64, seed: u64) -> u64 {
    let stream = if seed == 0 { 0 } else { mix64(seed) };
    mix64(index.wrapping_add(0x9e37_79b9_7f4a_7c15) ^ stream)
}

/// A written HTTP/1.1 request's path and body.
fn split_request(request: &[u8]) -> (&str, &[u8]) {
    let end = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(request.len(), |i| i + 4);
    let line = request.split(|&b| b == b'\r').next().unwrap_or_default();
    let path = std::str::from_utf8(line)
        .ok()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("");
    (path, &request[end..])
}

/// What the target does with one request written at `written_ns`.
enum Reply {
    /// Head at the first time, each token at the next ones, the end at the last.
    Answer {
        head: u64,
        tokens: Vec<u64>,
        end: u64,
    },
    /// The head, then a reset.
    Reset { head: u64 },
    /// A whole answer of this status at the time, no stream (an injected fault's).
    Status { head: u64, status: u16 },
    /// Nothing, ever.
    Silent,
}

/// The simulated transport: connections (idle ones from the warm pool or a finished request,
/// others connected in line at the target's connect time) to the scripted [`Target`].
pub(super) struct Net {
    clock: SimClock,
    target: Target,
    model: String,
    /// When each of the target's slots is next free.
    slots: RefCell<Vec<u64>>,
    /// Idle keep-alive connections, most recently used last.
    idle: RefCell<Vec<Idle>>,
    /// The next connection's id.
    next_id: Cell<u64>,
    /// How long a connection may sit idle (`target.idle_limit_ms`).
    idle_limit: Duration,
    /// The worker's service-time mean (`client::service_mean`), s.
    service_s: Cell<Option<f64>>,
    rules: Vec<Rc<Rule>>,
    /// The world's fault, and when it is in effect.
    victim: Victim,
    effect: Arc<InEffect>,
    /// The requests waiting for a slot (what a probe of the target's gauge reads).
    waiting: Arc<Waiting>,
    /// Every request it answered whole (what a scrape of its metrics reads).
    answered: Arc<AnsweredLog>,
}

/// An idle connection in the simulated pool.
#[derive(Clone, Copy, Debug)]
struct Idle {
    id: u64,
    /// When it went idle, ns after the epoch.
    since_ns: u64,
    /// Whether it carried a request before (its next one is `connection_reused`).
    carried: bool,
}

impl Net {
    /// A new connection's id.
    fn connection_id(&self) -> u64 {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        id
    }

    /// Puts connection `id` in the pool, idle from now.
    fn keep(&self, id: u64, carried: bool) {
        let since_ns = self.clock.now_ns();
        self.idle.borrow_mut().push(Idle {
            id,
            since_ns,
            carried,
        });
    }

    /// The connections to `target`, each kept idle up to `idle_limit`, its answers held to
    /// `rules`, on `clock`; `victim`'s fault served while it is in effect.
    pub(super) fn new(
        (clock, target, idle_limit): (SimClock, Target, Duration),
        rules: Vec<Rule>,
        victim: Victim,
    ) -> Net {
        Net {
            clock,
            slots: RefCell::new(vec![0; target.slots.unwrap_or(0)]),
            target,
            model: "mock".into(),
            idle: RefCell::new(Vec::new()),
            next_id: Cell::new(0),
            idle_limit,
            service_s: Cell::new(None),
            rules: rules.into_iter().map(Rc::new).collect(),
            victim,
            effect: Arc::new(InEffect::default()),
            waiting: Arc::new(Waiting::default()),
            answered: Arc::new(AnsweredLog::default()),
        }
    }

    /// When the world's fault is in effect (the fault plan's thread writes it).
    pub(super) fn effect(&self) -> Arc<InEffect> {
        Arc::clone(&self.effect)
    }

    /// The requests waiting for a slot (the probes read it).
    pub(super) fn waiting(&self) -> Arc<Waiting> {
        Arc::clone(&self.waiting)
    }

    /// Every request it answered whole (the scrapes read it).
    pub(super) fn answered(&self) -> Arc<AnsweredLog> {
        Arc::clone(&self.answered)
    }

    /// The target's reply to a request written at `written`; `reasoning` marks each of its
    /// tokens reasoning or not, where the answer is scripted ([`Target::answers`]).
    fn serve(&self, entry: &Entry, written: u64, reasoning: Option<&[bool]>) -> Reply {
        let t = &self.target;
        if t.silent.is_some_and(|(a, b)| (a..b).contains(&written)) {
            return Reply::Silent;
        }
        if let Some(reply) = self.faulted(written) {
            return reply;
        }
        let ttft = match t.ttft_spread_ns {
            0 => t.ttft_ns,
            spread => t.ttft_ns + draw(entry.index, t.seed) % spread,
        };
        let start = match t.slots {
            None => written,
            Some(_) => {
                let mut slots = self.slots.borrow_mut();
                let (i, &free) = slots
                    .iter()
                    .enumerate()
                    .min_by_key(|&(_, &f)| f)
                    .expect("a slot");
                let start = free.max(written);
                slots[i] = start + ttft + t.tpot_ns * u64::from(t.tokens.saturating_sub(1));
                self.waiting.add(written, start);
                start
            }
        };
        let head = written.max(start + t.head_ns.min(ttft));
        if t.reset_every
            .is_some_and(|n| n > 0 && entry.index % n == n - 1)
        {
            return Reply::Reset { head };
        }
        let kinds: Vec<bool> = match reasoning {
            Some(kinds) => kinds.to_vec(),
            None => vec![false; t.tokens as usize],
        };
        let mut at = start + ttft;
        let mut tokens: Vec<u64> = Vec::with_capacity(kinds.len());
        for (k, &thinking) in kinds.iter().enumerate() {
            if k > 0 {
                at += match (thinking, t.reasoning_gap_ns) {
                    (true, Some(gap)) => gap,
                    _ => t.tpot_ns,
                };
            }
            tokens.push(at);
        }
        let mut head = head;
        if let Some((a, b)) = t.stall {
            // The first send due inside the stall waits for its end; all after it as long.
            let held = std::iter::once(head)
                .chain(tokens.iter().copied())
                .find(|at| (a..b).contains(at))
                .map(|at| b - at);
            if let Some(by) = held {
                let push = |at: &mut u64| {
                    if *at >= b - by {
                        *at += by;
                    }
                };
                push(&mut head);
                tokens.iter_mut().for_each(push);
            }
        }
        let end = tokens.last().copied().unwrap_or(head);
        self.answered
            .add(Answered::of(written, (head, &tokens, end)));
        Reply::Answer { head, tokens, end }
    }

    /// The world's fault's reply to a request written at `written`, while it is in effect: a
    /// gone victim's connection is reset, else its status answers (where it has one).
    fn faulted(&self, written: u64) -> Option<Reply> {
        if !self.effect.at(written) {
            return None;
        }
        if self.victim.gone {
            return Some(Reply::Reset { head: written });
        }
        let head = written + self.target.head_ns;
        self.victim
            .status
            .map(|status| Reply::Status { head, status })
    }

    /// The bytes of a streamed chat answer's head, its `k`-th token's event, and its end, as a
    /// chunked HTTP/1.1 response.
    fn head_bytes() -> Vec<u8> {
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec()
    }

    fn chunk(text: &str) -> Vec<u8> {
        Net::chunk_bytes(text.as_bytes())
    }

    fn chunk_bytes(payload: &[u8]) -> Vec<u8> {
        let mut out = format!("{:x}\r\n", payload.len()).into_bytes();
        out.extend_from_slice(payload);
        out.extend_from_slice(b"\r\n");
        out
    }

    fn token_bytes(&self, index: u64, k: u32, last: bool) -> Vec<u8> {
        let role = if k == 0 { r#""role":"assistant","# } else { "" };
        let finish = if last { r#""stop""# } else { "null" };
        Net::chunk(&format!(
            "data: {{\"id\":\"cmpl-{index}\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"{}\",\"choices\":[{{\"index\":0,\"delta\":{{{role}\"content\":\"t{k} \"}},\"finish_reason\":{finish}}}]}}\n\n",
            self.model
        ))
    }

    fn end_bytes(&self, index: u64, tokens: u32) -> Vec<u8> {
        let mut out = Net::chunk(&format!(
            "data: {{\"id\":\"cmpl-{index}\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"{}\",\"choices\":[],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\n",
            self.model,
            8 + tokens
        ));
        out.extend(Net::chunk("data: [DONE]\n\n"));
        out.extend(b"0\r\n\r\n");
        out
    }

    /// What the client reads of an answer, each at its time: the head (with the scripted
    /// answer's prologue), each token's event, and the end.
    fn deliveries(
        &self,
        index: u64,
        (head, tokens, end): (u64, &[u64], u64),
        events: Option<Events>,
    ) -> Vec<(u64, Vec<u8>)> {
        let last = tokens.len().saturating_sub(1);
        let mut deliveries = vec![(head, Net::head_bytes())];
        match events {
            Some(events) => {
                if !events.prologue.is_empty() {
                    deliveries[0].1.extend(Net::chunk_bytes(&events.prologue));
                }
                for (&at, (bytes, _)) in tokens.iter().zip(&events.tokens) {
                    deliveries.push((at, Net::chunk_bytes(bytes)));
                }
                // An empty chunk would end the body early: only a payload is framed.
                let mut tail = match events.epilogue.is_empty() {
                    true => Vec::new(),
                    false => Net::chunk_bytes(&events.epilogue),
                };
                tail.extend(b"0\r\n\r\n");
                deliveries.push((end, tail));
            }
            None => {
                for (k, &at) in tokens.iter().enumerate() {
                    deliveries.push((at, self.token_bytes(index, k as u32, k == last)));
                }
                deliveries.push((end, self.end_bytes(index, tokens.len() as u32)));
            }
        }
        deliveries
    }

    /// Hands `deliveries` (each at its time) to the production parser and `exchange`, as the
    /// client's reads would: the verdict once the answer ends, breaks, or its fate is known.
    async fn deliver(
        &self,
        (id, deliveries): (u64, Vec<(u64, Vec<u8>)>),
        record: &mut RequestRecord,
        exchange: &mut Exchange,
    ) -> Verdict {
        let mut parser = http1::Parser::default();
        let mut events = Vec::new();
        for (at, bytes) in deliveries {
            self.clock.sleep_until(at).await;
            let now = self.clock.now_ns();
            record.bytes_received += bytes.len() as u64;
            parser.read(&bytes, &mut events);
            let mut ended = false;
            for event in events.drain(..) {
                ended |= event == http1::Event::End;
                exchange.on_http(event, now);
            }
            if exchange.decided().is_some() {
                return exchange.finish(false, None, now);
            }
            if ended {
                if self.target.keep_alive {
                    self.keep(id, true);
                }
                return exchange.finish(true, None, now);
            }
        }
        exchange.finish(false, None, self.clock.now_ns())
    }

    /// The connect of a request that found no idle connection, begun at `now`: its verdict
    /// when it fails, else when it completes.
    fn connect(&self, now: u64) -> Result<u64, Verdict> {
        let t = &self.target;
        if now < t.up_ns || (self.victim.gone && self.effect.at(now)) {
            return Err(connect_verdict(&std::io::Error::from_raw_os_error(
                libc::ECONNREFUSED,
            )));
        }
        let mut syn = now;
        if let Some((a, b)) = t.syn_drop {
            // Linux retransmits a SYN after 1 s, then 2 s, 4 s, ...
            let mut wait = S;
            while (a..b).contains(&syn) {
                syn += wait;
                wait *= 2;
            }
        }
        Ok(syn + t.connect_ns)
    }
}

impl Transport for Net {
    async fn warm(&self, ctx: &WorkerContext) {
        for _ in 0..ctx.plan.connections_per_worker {
            let now = self.clock.monotonic_ns();
            if ctx.stop.load(Ordering::Relaxed) || now >= self.clock.monotonic_epoch_ns() {
                break;
            }
            // Before the epoch the target's times (its start, a SYN-drop window) read as 0.
            let Ok(done) = self.connect(0) else {
                break;
            };
            self.clock.sleep(Duration::from_nanos(done)).await;
            let id = self.connection_id();
            self.keep(id, false);
            ctx.shared.pool.opened_ahead.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn retire_expired(&self, shared: &Shared, ahead: Duration) {
        let now = self.clock.now_ns();
        let mut idle = self.idle.borrow_mut();
        let before = idle.len();
        idle.retain(|c| {
            let idle_for = Duration::from_nanos(now.saturating_sub(c.since_ns));
            !idle_expired(idle_for, ahead, self.idle_limit)
        });
        let expired = (before - idle.len()) as u64;
        shared.pool.expired.fetch_add(expired, Ordering::Relaxed);
    }

    fn idle_capacity(&self) -> usize {
        self.idle.borrow().len()
    }

    fn service_s(&self) -> Option<f64> {
        self.service_s.get()
    }

    async fn open_spare(&self, _: &WorkerContext, deadline_ns: u64) -> Result<bool, ()> {
        let done = self.connect(self.clock.now_ns()).map_err(|_| ())?;
        if done > deadline_ns {
            self.clock.sleep_until(deadline_ns).await;
            return Err(());
        }
        self.clock.sleep_until(done).await;
        let id = self.connection_id();
        self.keep(id, false);
        Ok(true)
    }

    fn rule(&self, route: u32) -> Rc<Rule> {
        Rc::clone(&self.rules[route as usize])
    }

    async fn talk(
        &self,
        ctx: &WorkerContext,
        entry: &Entry,
        record: &mut RequestRecord,
        exchange: &mut Exchange,
        _: &mut Carried,
    ) -> Verdict {
        let clock = &self.clock;
        // As `Local::take`: the expired go first, then the most recently used.
        self.retire_expired(&ctx.shared, Duration::ZERO);
        let pooled = self.idle.borrow_mut().pop();
        let id = match pooled {
            Some(c) => {
                record.connection_reused = c.carried;
                c.id
            }
            None => self.connection_id(),
        };
        if pooled.is_none() {
            let now = clock.now_ns();
            record.connect_start_ns = Some(now);
            match self.connect(now) {
                Ok(done) => clock.sleep_until(done).await,
                Err(verdict) => {
                    record.terminal_ns = clock.now_ns();
                    return verdict;
                }
            }
            record.connect_end_ns = Some(clock.now_ns());
        }
        record.connection_id = id;
        let template = &ctx.templates[entry.route as usize];
        let request = template.bytes_of(entry, &ctx.plan.params);
        record.bytes_sent = request.len() as u64;
        let events = self.target.answers.as_ref().map(|answers| {
            let (head, body) = split_request(&request);
            (answers.0)(entry.index, head, body)
        });
        let written = clock.now_ns();
        record.request_written_ns = Some(written);
        let kinds: Option<Vec<bool>> = events
            .as_ref()
            .map(|e| e.tokens.iter().map(|(_, r)| *r).collect());
        let (head, tokens, end) = match self.serve(entry, written, kinds.as_deref()) {
            Reply::Silent => {
                // Nothing comes: the caller's deadline ends the wait.
                std::future::pending::<()>().await;
                unreachable!("a pending future never ends")
            }
            Reply::Reset { head } => {
                clock.sleep_until(head).await;
                let reset = std::io::Error::from_raw_os_error(libc::ECONNRESET);
                return exchange.finish(false, Some(transport_verdict(&reset)), clock.now_ns());
            }
            Reply::Status { head, status } => {
                let body = r#"{"error":{"message":"injected","type":"server_error"}}"#;
                let answer = format!(
                    "HTTP/1.1 {status} Injected\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                let deliveries = vec![(head, answer.into_bytes())];
                return self.deliver((id, deliveries), record, exchange).await;
            }
            Reply::Answer { head, tokens, end } => (head, tokens, end),
        };
        let deliveries = self.deliveries(entry.index, (head, &tokens, end), events);
        self.deliver((id, deliveries), record, exchange).await
    }

    fn served(&self, seconds: f64) {
        self.service_s
            .set(Some(service_mean(self.service_s.get(), seconds)));
    }
}
