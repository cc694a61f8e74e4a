//! The in-memory network both pairs use: every datagram a side sends passes a [`Filter`], which
//! decides its [`Fate`] (and may alter its bytes), is kept in the pair's log, and arrives a fixed
//! one-way delay later (plus whatever its fate adds).

use fastshake_core::Instant;
use std::net::SocketAddr;
use std::time::Duration;

/// Which way a datagram goes: sent by the client (or another client), or by the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    ToServer,
    ToClient,
}

/// What the network does with one datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Deliver,
    Drop,
    /// Delivered twice, at the same time.
    Duplicate,
    /// Delivered once, this much later than the link's delay.
    Late(Duration),
    /// Delivered on time, and a copy this much later.
    DuplicateLate(Duration),
}

impl Fate {
    /// When the copies of a datagram due at `on_time` arrive.
    fn arrivals(self, on_time: Instant) -> impl Iterator<Item = Instant> {
        let (first, second) = match self {
            Fate::Deliver => (Some(on_time), None),
            Fate::Drop => (None, None),
            Fate::Duplicate => (Some(on_time), Some(on_time)),
            Fate::Late(extra) => (Some(on_time + extra), None),
            Fate::DuplicateLate(extra) => (Some(on_time), Some(on_time + extra)),
        };
        first.into_iter().chain(second)
    }
}

/// One datagram on the wire, as the filter sees it and the log keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub dir: Dir,
    /// Its place among every datagram sent, both ways (its index in the log), from 0.
    pub nth: usize,
    /// Its place among the datagrams sent in its direction, from 0.
    pub index: usize,
    /// When it was sent.
    pub at: Instant,
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub payload: Vec<u8>,
    /// What the filter decided (`Deliver` while the filter runs).
    pub fate: Fate,
}

/// Decides each datagram's fate; it may also change the bytes (a corrupting link), and the
/// peer and the log then see the changed ones.
pub type Filter = Box<dyn FnMut(&mut Datagram) -> Fate>;

/// A network that delivers everything.
pub fn deliver_all() -> Filter {
    Box::new(|_| Fate::Deliver)
}

/// A network that loses the datagrams `lost` picks and delivers the rest.
pub fn drop_if(mut lost: impl FnMut(&Datagram) -> bool + 'static) -> Filter {
    Box::new(move |d| if lost(d) { Fate::Drop } else { Fate::Deliver })
}

/// A deterministic extra delay per call, from 0 up to `max` in steps of `max / 1000` (an LCG
/// seeded with `seed`): return it as `Fate::Late` to reorder datagrams.
pub fn jitter(max: Duration, seed: u64) -> impl FnMut() -> Duration {
    let mut state = seed;
    move || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let thousandths = ((state >> 33) % 1000) as u32;
        max * thousandths / 1000
    }
}

/// Datagrams on their way, in order of arrival (by time, then in the order they were sent).
#[derive(Default)]
pub(crate) struct InFlight {
    queue: Vec<(Instant, Datagram)>,
}

impl InFlight {
    /// Files the copies of `d` that its fate lets through, due `delay` after it was sent.
    pub(crate) fn send(&mut self, d: &Datagram, delay: Duration) {
        for at in d.fate.arrivals(d.at + delay) {
            let i = self.queue.partition_point(|(t, _)| *t <= at);
            self.queue.insert(i, (at, d.clone()));
        }
    }

    /// When the next datagram arrives.
    pub(crate) fn next_arrival(&self) -> Option<Instant> {
        self.queue.first().map(|(t, _)| *t)
    }

    /// The first datagram due by `now` that `pick` accepts, taken off the wire.
    pub(crate) fn pop_due(&mut self, now: Instant, pick: impl Fn(&Datagram) -> bool) -> Option<Datagram> {
        let i = self.queue.iter().take_while(|(t, _)| *t <= now).position(|(_, d)| pick(d))?;
        Some(self.queue.remove(i).1)
    }

    /// Every datagram still on its way, taken off the wire.
    pub(crate) fn take_all(&mut self) -> Vec<Datagram> {
        self.queue.drain(..).map(|(_, d)| d).collect()
    }
}

/// Counts of what was sent: every datagram gets its place overall and in its direction.
#[derive(Default)]
pub(crate) struct Counter {
    sent: usize,
    to_server: usize,
    to_client: usize,
}

impl Counter {
    /// A datagram with its places filled in, not yet filtered.
    pub(crate) fn datagram(
        &mut self,
        dir: Dir,
        at: Instant,
        src: SocketAddr,
        dst: SocketAddr,
        payload: Vec<u8>,
    ) -> Datagram {
        let in_dir = match dir {
            Dir::ToServer => &mut self.to_server,
            Dir::ToClient => &mut self.to_client,
        };
        let d = Datagram { dir, nth: self.sent, index: *in_dir, at, src, dst, payload, fate: Fate::Deliver };
        self.sent += 1;
        *in_dir += 1;
        d
    }

    /// How many datagrams were sent in `dir`.
    pub(crate) fn sent(&self, dir: Dir) -> usize {
        match dir {
            Dir::ToServer => self.to_server,
            Dir::ToClient => self.to_client,
        }
    }
}

/// Runs `d` through `filter` and, whatever its fate, into `log`; then onto the wire.
pub(crate) fn transmit(
    mut d: Datagram,
    filter: &mut Filter,
    delay: Duration,
    log: &mut Vec<Datagram>,
    wire: &mut InFlight,
) {
    d.fate = filter(&mut d);
    wire.send(&d, delay);
    log.push(d);
}
