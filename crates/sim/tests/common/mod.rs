//! Test helpers: a scripted app and a sink that remember everything.
#![allow(dead_code, clippy::new_ret_no_self)]

use fastshake_core::{Instant, SansIo, Transmit};
use fastshake_sim::apps::{App, NodeEvent};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::rc::Rc;

/// A datagram an app received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    pub at: u64,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub payload: Vec<u8>,
}

/// What a [`Scripted`] app saw.
#[derive(Debug, Default)]
pub struct Log {
    pub received: Vec<Received>,
    pub events: Vec<(u64, NodeEvent)>,
}

pub type SharedLog = Rc<RefCell<Log>>;

/// Sends given datagrams at given times; records what arrives and the node events.
pub struct Scripted {
    plan: VecDeque<(u64, Transmit)>,
    due: VecDeque<Transmit>,
    log: SharedLog,
}

impl Scripted {
    /// `plan`: (time in ns, datagram), any order.
    pub fn new(mut plan: Vec<(u64, Transmit)>) -> (Box<dyn App>, SharedLog) {
        plan.sort_by_key(|(t, _)| *t);
        let log = SharedLog::default();
        (Box::new(Scripted { plan: plan.into(), due: VecDeque::new(), log: log.clone() }), log)
    }

    /// An app that only listens.
    pub fn sink() -> (Box<dyn App>, SharedLog) {
        Self::new(Vec::new())
    }
}

impl SansIo for Scripted {
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]) {
        self.log.borrow_mut().received.push(Received {
            at: now.as_nanos(),
            local,
            remote,
            payload: datagram.to_vec(),
        });
    }

    fn poll_transmit(&mut self, _now: Instant) -> Option<Transmit> {
        self.due.pop_front()
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.plan.front().map(|(t, _)| Instant::from_nanos(*t))
    }

    fn handle_timeout(&mut self, now: Instant) {
        while self.plan.front().is_some_and(|(t, _)| *t <= now.as_nanos()) {
            if let Some((_, tx)) = self.plan.pop_front() {
                self.due.push_back(tx);
            }
        }
    }
}

impl App for Scripted {
    fn handle_node_event(&mut self, now: Instant, event: &NodeEvent) {
        self.log.borrow_mut().events.push((now.as_nanos(), event.clone()));
    }
}

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

pub fn tx(src: Option<&str>, dst: &str, payload: &[u8]) -> Transmit {
    Transmit { src: src.map(addr), dst: addr(dst), payload: payload.to_vec() }
}

pub const MS: u64 = 1_000_000;
