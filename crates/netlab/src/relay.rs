//! Userspace delay relay: holds every packet of a TUN device for a fixed delay, then writes it back.
//!
//! The kernel of the test machine has no netem, so the router namespace of the testbed
//! (`crate::testbed`) routes every packet into a TUN device; this relay reads each one, holds it
//! for the configured delay and writes it back unchanged, and the kernel forwards it on.
//!
//! On top of the delay it can spoil the path the way real networks do, each by a seeded
//! Bernoulli trial per packet (one random stream per trial kind, so turning one on does not
//! change the draws of another): loss, duplication (a copy leaves right after the original or a
//! little later) and reordering (a packet is held back by an extra delay, so the packets behind
//! it overtake it). Without reordering and with copies right behind their originals, packets
//! leave in the order they arrived.
//!
//! Signals: SIGTERM and SIGINT stop the relay (it returns its counters), SIGUSR1 prints a counter
//! line on standard output and goes on.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use std::collections::BinaryHeap;
use std::fmt;
use std::io::{self, Write};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::signal::unix::{signal, SignalKind};

/// Largest packet the relay reads from the TUN device (an IPv4 datagram cannot be larger).
const MAX_PACKET: usize = 65_535;
/// Capacity of each pooled buffer: every packet up to an Ethernet MTU fits without a reallocation.
const POOLED_BUFFER_CAPACITY: usize = 2_048;
/// Printed first on the line of counters, so a supervisor can find it among other output.
pub const COUNTERS_PREFIX: &str = "relay counters:";
/// Printed once the device is attached and the signal handlers are installed.
pub const READY_PREFIX: &str = "relay ready:";

/// What the relay does to the packets of one TUN device.
#[derive(Clone, Debug)]
pub struct RelayConfig {
    /// Name of an existing TUN device (the testbed creates it, persistent, before the relay runs).
    pub tun_name: String,
    /// How long every packet is held.
    pub delay: Duration,
    /// Probability in [0, 1] that a packet is dropped instead of held (a Bernoulli trial per packet).
    pub loss: f64,
    /// Seed of the loss, duplication and reordering trials, so a run can be repeated.
    pub seed: u64,
    /// Probability in [0, 1] that a packet that is not lost is sent twice.
    pub duplicate: f64,
    /// How long after the original its copy leaves (zero: right behind it).
    pub duplicate_delay: Duration,
    /// Probability in [0, 1] that a packet is held back by `reorder_delay` on top of the delay.
    pub reorder: f64,
    /// The extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Most packets held at once; beyond it packets are dropped and counted.
    pub queue_limit: usize,
    /// Stop when standard input reaches its end: a supervisor gives the relay a pipe, so the
    /// relay ends with it even if the supervisor is killed.
    pub stop_when_stdin_closes: bool,
}

impl RelayConfig {
    pub const DEFAULT_QUEUE_LIMIT: usize = 4_096;

    pub fn new(tun_name: impl Into<String>, delay: Duration) -> Self {
        RelayConfig {
            tun_name: tun_name.into(),
            delay,
            loss: 0.0,
            seed: 0,
            duplicate: 0.0,
            duplicate_delay: Duration::ZERO,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            queue_limit: Self::DEFAULT_QUEUE_LIMIT,
            stop_when_stdin_closes: false,
        }
    }
}

/// What the relay saw and did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RelayCounters {
    pub received: u64,
    pub forwarded: u64,
    pub dropped_queue_full: u64,
    pub dropped_loss: u64,
    /// Packets sent twice (the copies are not in `received`, and are in `forwarded`).
    pub duplicated: u64,
    /// Packets held back by the reordering delay.
    pub reordered: u64,
    pub write_errors: u64,
    /// Largest number of packets held at once.
    pub max_queued: u64,
}

impl fmt::Display for RelayCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{COUNTERS_PREFIX} received={} forwarded={} dropped_queue_full={} dropped_loss={} \
             duplicated={} reordered={} write_errors={} max_queued={}",
            self.received,
            self.forwarded,
            self.dropped_queue_full,
            self.dropped_loss,
            self.duplicated,
            self.reordered,
            self.write_errors,
            self.max_queued
        )
    }
}

/// The counter line could not be parsed.
#[derive(Debug, thiserror::Error)]
#[error("not a relay counter line: {0:?}")]
pub struct CountersParseError(String);

impl FromStr for RelayCounters {
    type Err = CountersParseError;

    fn from_str(line: &str) -> Result<Self, Self::Err> {
        let bad = || CountersParseError(line.to_string());
        let rest = line.trim().strip_prefix(COUNTERS_PREFIX).ok_or_else(bad)?;
        let mut counters = RelayCounters::default();
        for field in rest.split_whitespace() {
            let (key, value) = field.split_once('=').ok_or_else(bad)?;
            let value: u64 = value.parse().map_err(|_| bad())?;
            let slot = match key {
                "received" => &mut counters.received,
                "forwarded" => &mut counters.forwarded,
                "dropped_queue_full" => &mut counters.dropped_queue_full,
                "dropped_loss" => &mut counters.dropped_loss,
                "duplicated" => &mut counters.duplicated,
                "reordered" => &mut counters.reordered,
                "write_errors" => &mut counters.write_errors,
                "max_queued" => &mut counters.max_queued,
                _ => return Err(bad()),
            };
            *slot = value;
        }
        Ok(counters)
    }
}

/// A packet waiting for its time; the earliest due first, and in arrival order among equals.
struct Held {
    due: Instant,
    /// Arrival order (a copy comes right after its original).
    order: u64,
    packet: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.order) == (other.due, other.order)
    }
}

impl Eq for Held {}

impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Held {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.order).cmp(&(self.due, self.order))
    }
}

/// Seeded Bernoulli trials, one per packet.
struct Trials {
    probability: f64,
    rng: ChaCha20Rng,
}

impl Trials {
    /// Trials on random stream `stream` of `seed`: each kind of trial draws from its own.
    fn new(probability: f64, seed: u64, stream: u64) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        rng.set_stream(stream);
        Trials { probability: probability.clamp(0.0, 1.0), rng }
    }

    fn next_hits(&mut self) -> bool {
        if self.probability <= 0.0 {
            return false;
        }
        // 53 random bits give a uniform f64 in [0, 1).
        let uniform = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        uniform < self.probability
    }
}

/// The queue and buffer pool of the relay, apart from any I/O so it can be tested alone.
struct DelayLine {
    delay: Duration,
    duplicate_delay: Duration,
    reorder_delay: Duration,
    queue_limit: usize,
    queue: BinaryHeap<Held>,
    next_order: u64,
    pool: Vec<Vec<u8>>,
    loss: Trials,
    duplicate: Trials,
    reorder: Trials,
    counters: RelayCounters,
}

impl DelayLine {
    fn new(config: &RelayConfig) -> Self {
        let queue_limit = config.queue_limit.max(1);
        DelayLine {
            delay: config.delay,
            duplicate_delay: config.duplicate_delay,
            reorder_delay: config.reorder_delay,
            queue_limit,
            queue: BinaryHeap::with_capacity(queue_limit),
            next_order: 0,
            pool: Vec::new(),
            // Stream 0 is what the loss trials always drew from: a seed still loses the same packets.
            loss: Trials::new(config.loss, config.seed, 0),
            duplicate: Trials::new(config.duplicate, config.seed, 1),
            reorder: Trials::new(config.reorder, config.seed, 2),
            counters: RelayCounters::default(),
        }
    }

    /// Takes a packet read at `now`: holds a copy of it (or two) or drops it.
    fn accept(&mut self, now: Instant, packet: &[u8]) {
        self.counters.received += 1;
        if self.loss.next_hits() {
            self.counters.dropped_loss += 1;
            return;
        }
        // Every trial is drawn for every packet that is not lost, so each stream stays in step
        // with the packets whatever the others decide.
        let reordered = self.reorder.next_hits();
        let duplicated = self.duplicate.next_hits();
        let mut due = now + self.delay;
        if reordered {
            due += self.reorder_delay;
        }
        if !self.hold(due, packet) {
            self.counters.dropped_queue_full += 1;
            return;
        }
        self.counters.reordered += u64::from(reordered);
        if duplicated && self.hold(due + self.duplicate_delay, packet) {
            self.counters.duplicated += 1;
        }
    }

    /// Queues a copy of `packet` due at `due`, unless the queue is full.
    fn hold(&mut self, due: Instant, packet: &[u8]) -> bool {
        if self.queue.len() >= self.queue_limit {
            return false;
        }
        // Buffers come back to the pool after each write: no allocation per packet once warm.
        let mut buffer = self.pool.pop().unwrap_or_else(|| Vec::with_capacity(POOLED_BUFFER_CAPACITY));
        buffer.clear();
        buffer.extend_from_slice(packet);
        let order = self.next_order;
        self.next_order += 1;
        self.queue.push(Held { due, order, packet: buffer });
        self.counters.max_queued = self.counters.max_queued.max(self.queue.len() as u64);
        true
    }

    fn next_due(&self) -> Option<Instant> {
        self.queue.peek().map(|held| held.due)
    }

    /// The earliest packet if its time has come.
    fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        if self.queue.peek()?.due <= now {
            self.queue.pop().map(|held| held.packet)
        } else {
            None
        }
    }

    fn recycle(&mut self, buffer: Vec<u8>) {
        if self.pool.len() < self.queue_limit {
            self.pool.push(buffer);
        }
    }
}

fn print_line(line: &str) {
    let mut out = io::stdout().lock();
    // A supervisor that has gone away must not stop the relay.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// The delay line shared by the reading and the writing thread.
struct Shared {
    line: Mutex<DelayLine>,
    /// Signalled when a packet is queued or the relay stops.
    queued: Condvar,
    stopping: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, DelayLine> {
        self.line.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.queued.notify_all();
    }
}

/// Reads packets and queues them, timestamped as soon as they are read.
fn read_loop(device: &tun_rs::SyncDevice, shared: &Shared) -> io::Result<()> {
    let mut scratch = vec![0u8; MAX_PACKET];
    while !shared.stopping.load(Ordering::SeqCst) {
        let length = device.recv(&mut scratch)?;
        let now = Instant::now();
        if let Some(packet) = scratch.get(..length) {
            shared.lock().accept(now, packet);
            shared.queued.notify_one();
        }
    }
    Ok(())
}

/// Writes every packet back when it is due. A thread sleeping on a condition variable wakes
/// within tens of microseconds of its deadline; an async timer rounds up to whole milliseconds,
/// which added about 1 ms each way.
fn write_loop(device: &tun_rs::SyncDevice, shared: &Shared) {
    let mut outgoing: Vec<Vec<u8>> = Vec::new();
    let mut line = shared.lock();
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let now = Instant::now();
        match line.next_due() {
            None => {
                line = shared.queued.wait(line).unwrap_or_else(|p| p.into_inner());
                continue;
            }
            Some(due) if due > now => {
                line = shared
                    .queued
                    .wait_timeout(line, due - now)
                    .map(|(guard, _)| guard)
                    .unwrap_or_else(|p| p.into_inner().0);
                continue;
            }
            Some(_) => {}
        }
        while let Some(packet) = line.pop_due(now) {
            outgoing.push(packet);
        }
        // The reader must not wait for the writes.
        drop(line);
        let mut written = 0;
        let mut failed = 0;
        for packet in &outgoing {
            match device.send(packet) {
                Ok(_) => written += 1,
                Err(_) => failed += 1,
            }
        }
        line = shared.lock();
        line.counters.forwarded += written;
        line.counters.write_errors += failed;
        for packet in outgoing.drain(..) {
            line.recycle(packet);
        }
    }
}

/// Runs the relay on the existing TUN device `config.tun_name` until SIGTERM or SIGINT, and
/// returns what it counted. Prints a `relay ready:` line once it is attached, and the counters
/// on SIGUSR1. The packets are moved by two threads of their own (see `write_loop` for why);
/// the reading one stays blocked on the device after the return, until the process exits.
pub async fn run_relay(config: &RelayConfig) -> io::Result<RelayCounters> {
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut report = signal(SignalKind::user_defined1())?;
    let device = tun_rs::DeviceBuilder::new()
        .name(&config.tun_name)
        .build_sync()
        .map_err(|e| io::Error::new(e.kind(), format!("TUN device {}: {e}", config.tun_name)))?;
    let device = Arc::new(device);
    let line = DelayLine::new(config);
    let queue_limit = line.queue_limit;
    let shared =
        Arc::new(Shared { line: Mutex::new(line), queued: Condvar::new(), stopping: AtomicBool::new(false) });

    let (failed, mut read_failure) = tokio::sync::oneshot::channel::<io::Error>();
    {
        let (device, shared) = (Arc::clone(&device), Arc::clone(&shared));
        std::thread::Builder::new().name("relay-read".into()).spawn(move || {
            if let Err(e) = read_loop(&device, &shared) {
                shared.stop();
                let _ = failed.send(e);
            }
        })?;
    }
    let writer = {
        let (device, shared) = (Arc::clone(&device), Arc::clone(&shared));
        std::thread::Builder::new().name("relay-write".into()).spawn(move || write_loop(&device, &shared))?
    };
    print_line(&format!(
        "{READY_PREFIX} tun={} delay_us={} loss={} duplicate={} duplicate_delay_us={} reorder={} \
         reorder_delay_us={} seed={} queue_limit={queue_limit}",
        config.tun_name,
        config.delay.as_micros(),
        config.loss,
        config.duplicate,
        config.duplicate_delay.as_micros(),
        config.reorder,
        config.reorder_delay.as_micros(),
        config.seed,
    ));

    let supervisor_gone = async {
        if config.stop_when_stdin_closes {
            let mut stdin = tokio::io::stdin();
            let mut sink = [0u8; 256];
            // Whatever the supervisor writes is ignored; only the end matters.
            while let Ok(1..) = tokio::io::AsyncReadExt::read(&mut stdin, &mut sink).await {}
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(supervisor_gone);
    let outcome = loop {
        tokio::select! {
            _ = &mut supervisor_gone => break Ok(()),
            _ = terminate.recv() => break Ok(()),
            _ = interrupt.recv() => break Ok(()),
            _ = report.recv() => print_line(&shared.lock().counters.to_string()),
            failure = &mut read_failure => {
                break Err(failure.unwrap_or_else(|_| io::Error::other("the reading thread ended")))
            }
        }
    };
    shared.stop();
    let _ = writer.join();
    let counters = shared.lock().counters;
    outcome.map(|()| counters)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(delay_ms: u64, queue_limit: usize, loss: f64) -> RelayConfig {
        RelayConfig {
            queue_limit,
            loss,
            seed: 7,
            ..RelayConfig::new("unused", Duration::from_millis(delay_ms))
        }
    }

    #[test]
    fn packets_leave_in_order_only_when_due() {
        let mut line = DelayLine::new(&config(30, 16, 0.0));
        let start = Instant::now();
        line.accept(start, b"first");
        line.accept(start + Duration::from_millis(10), b"second");
        assert!(line.pop_due(start + Duration::from_millis(29)).is_none());
        assert_eq!(line.pop_due(start + Duration::from_millis(30)).as_deref(), Some(&b"first"[..]));
        assert!(line.pop_due(start + Duration::from_millis(39)).is_none());
        assert_eq!(line.pop_due(start + Duration::from_millis(40)).as_deref(), Some(&b"second"[..]));
        assert_eq!(line.counters.received, 2);
    }

    #[test]
    fn a_full_queue_drops_and_counts() {
        let mut line = DelayLine::new(&config(5, 2, 0.0));
        let now = Instant::now();
        for _ in 0..5 {
            line.accept(now, b"x");
        }
        assert_eq!(line.counters.received, 5);
        assert_eq!(line.counters.dropped_queue_full, 3);
        assert_eq!(line.counters.max_queued, 2);
    }

    #[test]
    fn buffers_are_reused() {
        let mut line = DelayLine::new(&config(0, 4, 0.0));
        let now = Instant::now();
        line.accept(now, b"abc");
        let buffer = line.pop_due(now).expect("due at once");
        let pointer = buffer.as_ptr();
        line.recycle(buffer);
        line.accept(now, b"defg");
        let again = line.pop_due(now).expect("due at once");
        assert_eq!(again.as_ptr(), pointer);
        assert_eq!(again, b"defg");
    }

    #[test]
    fn loss_is_seeded_and_near_its_probability() {
        let run = || {
            let mut line = DelayLine::new(&config(0, 20_000, 0.25));
            let now = Instant::now();
            for _ in 0..10_000 {
                line.accept(now, b"p");
            }
            line.counters.dropped_loss
        };
        let dropped = run();
        assert_eq!(dropped, run());
        assert!((2_200..2_800).contains(&dropped), "dropped {dropped} of 10000 at p=0.25");
    }

    #[test]
    fn counters_round_trip_through_their_line() {
        let counters = RelayCounters {
            received: 9,
            forwarded: 7,
            dropped_queue_full: 1,
            dropped_loss: 1,
            duplicated: 2,
            reordered: 4,
            write_errors: 0,
            max_queued: 3,
        };
        assert_eq!(counters.to_string().parse::<RelayCounters>().unwrap(), counters);
        // A line without the later fields still reads (they are zero).
        let older = "relay counters: received=3 forwarded=3 dropped_queue_full=0 dropped_loss=0 \
                     write_errors=0 max_queued=1";
        assert_eq!(older.parse::<RelayCounters>().unwrap().received, 3);
        assert!("relay counters: received=x".parse::<RelayCounters>().is_err());
        assert!("something else".parse::<RelayCounters>().is_err());
    }

    fn spoiling(duplicate: f64, duplicate_delay_ms: u64, reorder: f64, reorder_delay_ms: u64) -> RelayConfig {
        RelayConfig {
            duplicate,
            duplicate_delay: Duration::from_millis(duplicate_delay_ms),
            reorder,
            reorder_delay: Duration::from_millis(reorder_delay_ms),
            ..config(30, 20_000, 0.0)
        }
    }

    /// Every packet due by `until`, in the order they leave.
    fn drain(line: &mut DelayLine, until: Instant) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| line.pop_due(until)).collect()
    }

    #[test]
    fn a_copy_leaves_right_behind_its_original_or_its_extra_delay_later() {
        let start = Instant::now();
        let mut line = DelayLine::new(&spoiling(1.0, 0, 0.0, 0));
        line.accept(start, b"a");
        line.accept(start + Duration::from_millis(1), b"b");
        let out = drain(&mut line, start + Duration::from_millis(31));
        assert_eq!(out, vec![b"a".to_vec(), b"a".to_vec(), b"b".to_vec(), b"b".to_vec()]);
        assert_eq!(line.counters.duplicated, 2);
        assert_eq!(line.counters.received, 2);

        let mut line = DelayLine::new(&spoiling(1.0, 5, 0.0, 0));
        line.accept(start, b"a");
        line.accept(start + Duration::from_millis(1), b"b");
        assert_eq!(drain(&mut line, start + Duration::from_millis(31)), vec![b"a".to_vec(), b"b".to_vec()]);
        assert!(line.pop_due(start + Duration::from_millis(34)).is_none());
        assert_eq!(line.pop_due(start + Duration::from_millis(35)).as_deref(), Some(&b"a"[..]));
        assert_eq!(line.pop_due(start + Duration::from_millis(36)).as_deref(), Some(&b"b"[..]));
    }

    #[test]
    fn a_reordered_packet_is_overtaken_by_those_behind_it() {
        let start = Instant::now();
        let mut line = DelayLine::new(&spoiling(0.0, 0, 1.0, 10));
        line.accept(start, b"late");
        // The same trials for every packet: switch reordering off for the rest by hand.
        line.reorder = Trials::new(0.0, 0, 2);
        line.accept(start + Duration::from_millis(2), b"first");
        line.accept(start + Duration::from_millis(4), b"second");
        assert_eq!(
            drain(&mut line, start + Duration::from_millis(40)),
            vec![b"first".to_vec(), b"second".to_vec(), b"late".to_vec()]
        );
        assert_eq!(line.counters.reordered, 1);
        assert_eq!(line.next_due(), None);
    }

    #[test]
    fn duplication_and_reordering_are_seeded_near_their_probabilities_and_leave_loss_alone() {
        let run = |duplicate: f64, reorder: f64| {
            let mut line = DelayLine::new(&RelayConfig { loss: 0.1, ..spoiling(duplicate, 0, reorder, 10) });
            let now = Instant::now();
            for _ in 0..10_000 {
                line.accept(now, b"p");
            }
            line.counters
        };
        let spoiled = run(0.2, 0.05);
        assert_eq!(spoiled, run(0.2, 0.05));
        let kept = spoiled.received - spoiled.dropped_loss;
        assert!((1_500..2_100).contains(&spoiled.duplicated), "{spoiled:?}");
        assert!((330..570).contains(&spoiled.reordered), "{spoiled:?}");
        assert_eq!(spoiled.max_queued, kept + spoiled.duplicated);
        // The loss stream is the one a relay without the other trials draws: the same packets go.
        assert_eq!(spoiled.dropped_loss, run(0.0, 0.0).dropped_loss);
    }

    #[test]
    fn a_copy_never_overfills_the_queue() {
        let mut line = DelayLine::new(&RelayConfig { queue_limit: 3, ..spoiling(1.0, 0, 0.0, 0) });
        let now = Instant::now();
        line.accept(now, b"a");
        line.accept(now, b"b");
        assert_eq!(line.queue.len(), 3);
        assert_eq!((line.counters.duplicated, line.counters.dropped_queue_full), (1, 0));
        line.accept(now, b"c");
        assert_eq!(line.counters.dropped_queue_full, 1);
    }
}
