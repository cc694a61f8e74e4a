//! The Connection IDs an endpoint issues (RFC 9146; RFC 9147 §9): made here, unique among its
//! sessions and led by its prefix (a fleet's node and worker), so a record routes to its
//! session by CID alone wherever it arrives; registered when issued and forgotten when retired.

use super::{ConnectionHandle, Endpoint, Output};
use crate::error::Error;
use crate::handshake::ClientHello;

impl Endpoint {
    /// The CID for a new session whose client offers `connection_id`, when we issue non-empty
    /// ones; empty otherwise.
    pub(super) fn issue_cid(&mut self, ch: &ClientHello<'_>) -> Vec<u8> {
        match self.role.config.mobility.connection_id {
            Some(len) if len > 0 && ch.extensions.connection_id.is_some() => self.fresh_cid(len),
            _ => Vec::new(),
        }
    }

    /// Routes every CID session `h` was issued to it.
    pub(super) fn register_cids(&mut self, h: ConnectionHandle) {
        let Some(slot) = self.connections.get(&h) else { return };
        for cid in slot.conn.own_connection_ids() {
            self.by_cid.insert(cid, h);
        }
    }

    /// `count` fresh CIDs registered for `h`, sent in a NewConnectionId; on refusal they are
    /// unregistered again.
    fn issue_more(&mut self, h: ConnectionHandle, count: u8, immediate: bool) -> Result<(), Error> {
        let len = self.cid_len();
        let cids: Vec<Box<[u8]>> = (0..count).map(|_| self.fresh_cid(len).into()).collect();
        for cid in &cids {
            self.by_cid.insert(cid, h);
        }
        let now = self.clock;
        let slot = self.connections.get_mut(&h).ok_or(Error::UnknownConnection)?;
        let result = slot.conn.issue_connection_ids13(now, cids.clone(), immediate);
        if result.is_err() {
            for cid in &cids {
                self.by_cid.remove(cid, h);
            }
        }
        result
    }

    /// The peer of `h` asked for spare CIDs: they go out (fewer, even none, is an answer too:
    /// RFC 9147 §9).
    pub(super) fn answer_cid_request(&mut self, h: ConnectionHandle, count: u8) {
        // A NewConnectionId of ours still unacknowledged: this request stays unanswered (§9:
        // one at a time); the peer's own timer resends it.
        if self.issue_more(h, count, false).is_ok() {
            // Asked from within `after`, past the point where output is queued.
            let queued = matches!(self.output.back(), Some(Output::Connection(last)) if *last == h);
            if !queued && self.connections.get(&h).is_some_and(|s| s.conn.has_output()) {
                self.output.push_back(Output::Connection(h));
            }
        }
    }

    /// DTLS 1.3: gives the client of session `h` `count` more CIDs of this endpoint (RFC 9147
    /// §9) in a NewConnectionId resent until acknowledged ([`crate::Connection::new_connection_ids`]);
    /// they route to `h` from now on, and with `immediate` the CIDs they replace stop routing
    /// once the client writes one of the new ones.
    pub fn new_connection_ids(
        &mut self,
        h: ConnectionHandle,
        count: u8,
        immediate: bool,
    ) -> Result<(), Error> {
        let result = self.issue_more(h, count, immediate);
        self.after(h);
        result
    }

    /// DTLS 1.3: asks the client of session `h` for `count` spare CIDs
    /// ([`crate::Connection::request_connection_ids`]).
    pub fn request_connection_ids(&mut self, h: ConnectionHandle, count: u8) -> Result<(), Error> {
        let now = self.clock;
        let slot = self.connections.get_mut(&h).ok_or(Error::UnknownConnection)?;
        let result = slot.conn.request_connection_ids(now, count);
        self.after(h);
        result
    }

    /// DTLS 1.3: session `h` writes the client's next spare CID from now on
    /// ([`crate::Connection::use_spare_connection_id`]).
    pub fn use_spare_connection_id(&mut self, h: ConnectionHandle) -> bool {
        self.connections.get_mut(&h).is_some_and(|s| s.conn.use_spare_connection_id())
    }
}
