//! Where a datagram goes: the endpoint's routing decision, made once per datagram from the first
//! record's header and the endpoint's tables, before anything is opened, and returned as a value
//! so that every path a datagram can take is named in one place. The header is read once, in
//! [`Incoming`], which a driver that routes by Connection ID (workers, a fleet) reads too.

use super::incoming::{HelloInfo, HelloScan, Incoming};
use super::{ConnectionHandle, Endpoint, EndpointDataSink};
use crate::record::{ContentType, Records};
use fastshake_core::Instant;
use std::net::SocketAddr;

/// The routing decision for one datagram.
pub(super) enum Route {
    /// Its first record carries one of our Connection IDs (RFC 9146 §4): that session, whatever
    /// the source address.
    ConnectionId(ConnectionHandle),
    /// It arrived at a session's own socket (IPC, TCS): that session, whatever the source.
    SessionSocket(ConnectionHandle),
    /// A whole ClientHello: a copy of the one a session at this address started from goes to
    /// that session (it resends its flight if its answer was lost); another starts (or restarts)
    /// a handshake, where the cookie decides between a HelloVerifyRequest and a new session
    /// (RFC 6347 §4.2.1, §4.2.8). Told apart once the ClientHello is parsed, once.
    ClientHello(HelloInfo),
    /// A fragment of a ClientHello, kept until the rest arrives.
    PartialHello,
    /// Traffic of the session at this address; `replacement` is a new handshake from the same
    /// address that may replace it once complete.
    Address { session: ConnectionHandle, replacement: Option<ConnectionHandle> },
    /// No session takes it.
    Drop,
}

impl Endpoint {
    /// `bytes` with its first record's header read, for routing by CID and then
    /// [`Endpoint::handle_incoming`] or [`Endpoint::open_in_place`].
    pub fn incoming<'a>(&self, bytes: &'a mut [u8]) -> Incoming<'a> {
        Incoming::new(bytes, self.cid_len())
    }

    /// Decides where a datagram goes from its first record's header; only a datagram that
    /// starts with an epoch-0 handshake record can hold a ClientHello, so only those are looked
    /// into further, and session traffic is handed to its session unread.
    pub(super) fn route(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        incoming: &Incoming<'_>,
    ) -> Route {
        if let Some(cid) = incoming.connection_id() {
            return self.by_cid.get(cid, &self.connections).map_or(Route::Drop, Route::ConnectionId);
        }
        if let Some(&h) = self.by_local.get(&local) {
            return Route::SessionSocket(h);
        }
        let existing = self.by_addr.get(&remote, &self.connections);
        if let Some(first) =
            incoming.first.filter(|h| h.content_type == ContentType::Handshake && h.epoch == 0)
        {
            match self.scan_client_hello(now, remote, incoming.bytes, &first) {
                HelloScan::Complete(hello) => return Route::ClientHello(hello),
                HelloScan::Partial if existing.is_none() => return Route::PartialHello,
                HelloScan::Partial | HelloScan::None => {}
            }
        }
        match existing {
            Some(session) => Route::Address { session, replacement: self.pending.get(&remote).copied() },
            None => Route::Drop,
        }
    }

    /// Carries out the routing decision.
    pub(super) fn dispatch(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        incoming: Incoming<'_>,
        route: Route,
        on_data: EndpointDataSink<'_>,
    ) {
        match route {
            Route::ConnectionId(h) | Route::SessionSocket(h) => {
                self.deliver(now, local, remote, h, incoming, on_data)
            }
            Route::ClientHello(hello) => self.client_hello(now, local, remote, &hello, incoming, on_data),
            Route::PartialHello => {}
            Route::Address { session, replacement: None } => {
                self.deliver(now, local, remote, session, incoming, on_data)
            }
            Route::Address { session, replacement: Some(new) } => {
                // Both the established session and the handshake replacing it live on this
                // address: handshake records go to the new one (a copy, as opening records works
                // in place), protected records to the established one, which drops what it
                // cannot authenticate.
                let (mut handshake_records, mut protected_records) = (false, false);
                for (rh, _) in Records::new(incoming.bytes).map_while(Result::ok) {
                    handshake_records |= rh.content_type != ContentType::ApplicationData;
                    protected_records |= rh.epoch != 0;
                }
                if handshake_records {
                    let mut copy = incoming.bytes.to_vec();
                    let copy = Incoming { bytes: &mut copy, first: incoming.first, cid13: incoming.cid13 };
                    self.deliver(now, local, remote, new, copy, None);
                }
                if protected_records {
                    self.deliver(now, local, remote, session, incoming, on_data);
                }
            }
            Route::Drop => self.stats.datagrams_dropped += 1,
        }
    }

    /// Hands the datagram to session `h`.
    pub(super) fn deliver(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        h: ConnectionHandle,
        incoming: Incoming<'_>,
        on_data: EndpointDataSink<'_>,
    ) {
        let Some(slot) = self.connections.get_mut(&h) else { return };
        let Incoming { bytes, first, .. } = incoming;
        let received = match on_data {
            Some(f) => {
                let mut sink = |d: &[u8]| f(h, d);
                slot.conn.handle_datagram_at(now, local, remote, bytes, first, Some(&mut sink))
            }
            None => slot.conn.handle_datagram_at(now, local, remote, bytes, first, None),
        };
        slot.activity.note(now, received);
        self.after(h);
    }
}
