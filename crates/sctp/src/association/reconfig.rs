//! Stream reset (RFC 6525): our Outgoing SSN Reset Requests, the peer's, and the
//! Re-configuration Responses both ways. The other requests of the RE-CONFIG chunk (Incoming SSN
//! Reset, SSN/TSN Reset, Add Streams) are answered "Denied".
//!
//! Our side: the streams the user resets take no new message; once what was queued on them has
//! been sent, one request carries them (and the TSN of our last queued chunk), retransmitted on
//! the Re-configuration Timer until it is answered; streams asked for meanwhile go in the next
//! request. The peer's side: its streams are reset once every TSN up to its last one arrived,
//! at once or later ("In progress"); the queue holds what the peer sent after the reset.

use std::collections::BTreeSet;

use fastshake_core::Instant;

use super::timer::Timer;
use super::Association;
use crate::packet::{
    Chunk, ReconfigChunk, ReconfigParam, ReconfigResult, COMMON_HEADER_LEN, OUTGOING_SSN_RESET_HEADER_LEN,
};
use crate::queue::Delivery;
use crate::{AssociationState, Error, Event};

/// Our request in flight.
#[derive(Debug)]
struct InFlight {
    /// The Outgoing SSN Reset Request as sent: a retransmission repeats it (§5.1.1).
    request: ReconfigParam,
    request_seq: u32,
    streams: Vec<u16>,
    /// The peer answered "In progress": expiries retransmit without counting errors (§5.1.1).
    in_progress: bool,
}

/// Where a request's sequence number stands against the ones the peer used (§5.2.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SeqCheck {
    /// The next one: a new request.
    Next,
    /// One of the last two: a retransmission, answered with the result it had.
    Repeat(ReconfigResult),
    /// Anything else.
    Bad,
}

/// Stream reset state of one association.
#[derive(Debug, Default)]
pub(super) struct Reconfig {
    /// Both sides announced RE-CONFIG: requests may go (§5.1.1).
    negotiated: bool,
    /// Our next Re-configuration Request Sequence Number; the first is our initial TSN (§4.1).
    next_request_seq: u32,
    /// Streams to reset that no request carries yet, in the order asked.
    queued: Vec<u16>,
    /// Streams queued or in the request in flight: they take no new message (§5.1.2 A1).
    paused: BTreeSet<u16>,
    /// At most one request in flight (§5.1.1).
    in_flight: Option<InFlight>,
    /// The peer's next Re-configuration Request Sequence Number; the first is its initial TSN.
    peer_next_seq: u32,
    /// The peer's last two requests and their results, newest first (§5.2.1).
    answered: [Option<(u32, ReconfigResult)>; 2],
    /// The peer's latest Outgoing SSN Reset Request: its last TSN and streams as listed.
    last_incoming: Option<(u32, Vec<u16>)>,
}

impl Reconfig {
    /// The association is set up: `negotiated` when both sides announced RE-CONFIG.
    pub(super) fn start(&mut self, negotiated: bool, our_initial_tsn: u32, peer_initial_tsn: u32) {
        *self = Reconfig {
            negotiated,
            next_request_seq: our_initial_tsn,
            peer_next_seq: peer_initial_tsn,
            ..Reconfig::default()
        };
    }

    /// Whether `stream` is being reset (and takes no message).
    pub(super) fn is_paused(&self, stream: u16) -> bool {
        self.paused.contains(&stream)
    }

    /// Whether our request is in flight: it named our last assigned TSN, which must then stay
    /// assigned (partial reliability may not hand unsent TSNs back meanwhile).
    pub(super) fn request_in_flight(&self) -> bool {
        self.in_flight.is_some()
    }

    fn check_seq(&self, seq: u32) -> SeqCheck {
        if seq == self.peer_next_seq {
            return SeqCheck::Next;
        }
        match self.answered.iter().flatten().find(|(s, _)| *s == seq) {
            Some((_, result)) => SeqCheck::Repeat(*result),
            None => SeqCheck::Bad,
        }
    }

    fn record(&mut self, seq: u32, result: ReconfigResult) {
        self.answered = [Some((seq, result)), self.answered[0]];
        self.peer_next_seq = seq.wrapping_add(1);
    }

    /// A reset of incoming streams was done: requests answered "In progress" were about it
    /// (there is one waiting reset at a time), and their retransmissions now get "Performed".
    fn incoming_reset_done(&mut self) {
        for (_, result) in self.answered.iter_mut().flatten() {
            if *result == ReconfigResult::InProgress {
                *result = ReconfigResult::Performed;
            }
        }
    }
}

impl Association {
    /// The most streams one Outgoing SSN Reset Request lists: the chunk fits a packet alone.
    fn max_reset_streams(&self) -> usize {
        (self.mtu() - COMMON_HEADER_LEN - 4 - OUTGOING_SSN_RESET_HEADER_LEN) / 2
    }

    /// The user resets `streams` of ours; the request goes at the next call that brings the time.
    pub(crate) fn reset_streams(&mut self, streams: &[u16]) -> Result<(), Error> {
        match self.state {
            AssociationState::Established => {}
            AssociationState::CookieWait | AssociationState::CookieEchoed => {
                return Err(Error::StreamResetUnsupported)
            }
            _ => return Err(Error::Closing),
        }
        // §5.1.1: nothing goes to a peer that did not announce RE-CONFIG.
        if !self.reconfig.negotiated {
            return Err(Error::StreamResetUnsupported);
        }
        if let Some(s) = streams.iter().find(|s| **s >= self.data.streams_out) {
            return Err(Error::InvalidStream(*s));
        }
        for s in streams {
            // A stream already being reset is reset by the request that has it.
            if self.reconfig.paused.insert(*s) {
                self.reconfig.queued.push(*s);
            }
        }
        self.user_pending = true;
        Ok(())
    }

    /// Queues the next Outgoing SSN Reset Request if none is in flight and the messages queued
    /// on its streams have all been sent once: the request names the TSN of our last queued
    /// chunk (§5.1.2 A3), and going after the data it does not overtake it.
    pub(super) fn start_stream_reset(&mut self, now: Instant) {
        let r = &self.reconfig;
        if self.state != AssociationState::Established || r.in_flight.is_some() || r.queued.is_empty() {
            return;
        }
        let n = r.queued.len().min(self.max_reset_streams());
        let streams: Vec<u16> = r.queued[..n].to_vec();
        if self.data.send.has_unsent_on(&streams.iter().copied().collect()) {
            return;
        }
        let r = &mut self.reconfig;
        r.queued.drain(..n);
        let request_seq = r.next_request_seq;
        r.next_request_seq = request_seq.wrapping_add(1);
        let request = ReconfigParam::OutgoingSsnReset {
            request_seq,
            // §4.1: we never send Incoming SSN Reset Requests, so this answers none of them.
            response_seq: r.peer_next_seq.wrapping_sub(1),
            last_tsn: self.data.send.last_assigned_tsn(),
            streams: streams.clone(),
        };
        self.control.push_back(Chunk::Reconfig(ReconfigChunk { params: vec![request.clone()] }));
        r.in_flight = Some(InFlight { request, request_seq, streams, in_progress: false });
        self.timers.set(Timer::Reconfig, now + self.paths.rto());
    }

    /// The Re-configuration Timer expired: the request goes again, counted against
    /// Association.Max.Retrans with the RTO doubled, unless the peer said "In progress"
    /// (§5.1.1). Returns false when the association failed.
    pub(super) fn on_reconfig_expiry(&mut self, now: Instant) -> bool {
        let Some(f) = &self.reconfig.in_flight else { return true };
        if !f.in_progress {
            if self.paths.count_error(self.config.max_retransmits) {
                self.fail(Error::RetransmitLimit);
                return false;
            }
            self.paths.rto.back_off();
        }
        self.control.push_back(Chunk::Reconfig(ReconfigChunk { params: vec![f.request.clone()] }));
        self.timers.set(Timer::Reconfig, now + self.paths.rto());
        true
    }

    /// A RE-CONFIG chunk (we announced the extension): requests are answered in one RE-CONFIG,
    /// responses end our request in flight.
    pub(super) fn on_reconfig(&mut self, now: Instant, chunk: ReconfigChunk) {
        use AssociationState::*;
        if matches!(self.state, CookieWait | CookieEchoed | Closed) || self.data.recv.is_none() {
            return;
        }
        // §3.1: other combinations are not RE-CONFIG chunks we can answer.
        if !chunk.is_allowed_combination() {
            return;
        }
        let mut responses = Vec::new();
        for param in chunk.params {
            if let ReconfigParam::Response { response_seq, result, .. } = param {
                self.on_reconfig_response(now, response_seq, result);
                continue;
            }
            let Some(seq) = param.request_seq() else { continue };
            let result = match self.reconfig.check_seq(seq) {
                SeqCheck::Repeat(result) => result,
                SeqCheck::Bad => ReconfigResult::BadSequenceNumber,
                SeqCheck::Next => {
                    let result = match &param {
                        ReconfigParam::OutgoingSsnReset { last_tsn, streams, .. } => {
                            self.on_peer_outgoing_reset(*last_tsn, streams)
                        }
                        // Incoming SSN Reset (§5.2.3), SSN/TSN Reset (§5.2.4) and Add Streams
                        // (§5.2.5, §5.2.6) are not implemented.
                        _ => ReconfigResult::Denied,
                    };
                    self.reconfig.record(seq, result);
                    result
                }
            };
            responses.push(ReconfigParam::Response { response_seq: seq, result, next_tsns: None });
        }
        if !responses.is_empty() {
            self.control.push_back(Chunk::Reconfig(ReconfigChunk { params: responses }));
        }
    }

    /// A new Outgoing SSN Reset Request of the peer (§5.2.2): our incoming `streams` (all when
    /// empty) start again at SSN 0 once everything up to `last_tsn` has arrived.
    fn on_peer_outgoing_reset(&mut self, last_tsn: u32, streams: &[u16]) -> ReconfigResult {
        let n = self.data.streams_in;
        let valid: Vec<u16> = if streams.is_empty() {
            (0..n).collect()
        } else {
            streams.iter().copied().filter(|s| *s < n).collect()
        };
        let Some(recv) = self.data.recv.as_mut() else { return ReconfigResult::Denied };
        if valid.is_empty() {
            // Only streams that do not exist: nothing to reset.
            return ReconfigResult::Denied;
        }
        let this = (last_tsn, streams.to_vec());
        if !recv.reset_pending() && self.reconfig.last_incoming.as_ref() == Some(&this) {
            // The request we did already, asked again under a new sequence number (as dcSCTP
            // does after "In progress"): with no data since, the streams are still at 0.
            return ReconfigResult::Performed;
        }
        self.reconfig.last_incoming = Some(this);
        // E2: "In progress" until the cumulative TSN reaches the peer's last TSN; E3, E4 then.
        let performed = recv.reset_streams(last_tsn, &valid);
        self.deliver_ready();
        if performed {
            ReconfigResult::Performed
        } else {
            ReconfigResult::InProgress
        }
    }

    /// A Re-configuration Response to our request in flight (§5.2.7); others are stale.
    fn on_reconfig_response(&mut self, now: Instant, seq: u32, result: ReconfigResult) {
        let Some(f) = self.reconfig.in_flight.as_mut() else { return };
        if f.request_seq != seq {
            return;
        }
        self.paths.peer_reachable();
        if result == ReconfigResult::InProgress {
            f.in_progress = true;
            self.timers.set(Timer::Reconfig, now + self.paths.rto());
            return;
        }
        self.timers.stop(Timer::Reconfig);
        let Some(f) = self.reconfig.in_flight.take() else { return };
        let performed = matches!(result, ReconfigResult::Performed | ReconfigResult::NothingToDo);
        if performed {
            self.data.send.reset_ssns(&f.streams);
        }
        for s in &f.streams {
            self.reconfig.paused.remove(s);
        }
        self.events.push_back(Event::OutgoingStreamsReset { streams: f.streams, performed });
    }

    /// Hands what the receive queue completed to the user: messages, and the resets of the
    /// peer's streams between them.
    pub(super) fn deliver_ready(&mut self) {
        let Some(recv) = self.data.recv.as_mut() else { return };
        for d in recv.take_deliveries() {
            match d {
                Delivery::Message(msg) => {
                    self.stats.messages_in += 1;
                    self.events.push_back(Event::Message(msg));
                }
                Delivery::StreamsReset(streams) => {
                    self.reconfig.incoming_reset_done();
                    self.events.push_back(Event::IncomingStreamsReset { streams });
                }
            }
        }
    }
}
