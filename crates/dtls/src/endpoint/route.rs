//! Where a datagram goes: the endpoint's routing decision, made once per datagram from the first
//! record's header and the endpoint's tables, before anything is opened, and returned as a value
//! so that every path a datagram can take is named in one place.

use super::hello::{HelloInfo, HelloScan};
use super::{ConnectionHandle, Endpoint, EndpointDataSink};
use crate::record::{ContentType, RecordHeader, Records};
use fastshake_core::codec::Reader;
use fastshake_core::Instant;
use std::net::SocketAddr;

/// The routing decision for one datagram.
pub(super) enum Route {
    /// Its first record carries one of our Connection IDs (RFC 9146 §4): that session, whatever
    /// the source address.
    ConnectionId(ConnectionHandle),
    /// It arrived at a session's own socket (IPC, TCS): that session, whatever the source.
    SessionSocket(ConnectionHandle),
    /// A copy of the ClientHello a session at this address started from: the session resends
    /// its flight if its answer was lost.
    HelloCopy(ConnectionHandle),
    /// A whole ClientHello starting (or restarting) a handshake: the cookie decides between a
    /// HelloVerifyRequest and a new session (RFC 6347 §4.2.1, §4.2.8).
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
    /// Decides where a datagram goes. The first record's header is read once; only a datagram
    /// that starts with an epoch-0 handshake record can hold a ClientHello, so only those are
    /// looked into further, and session traffic is handed to its session unread.
    pub(super) fn route(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &[u8],
    ) -> Route {
        if self.config_error.is_some() {
            return Route::Drop;
        }
        let first = RecordHeader::parse(&mut Reader::new(datagram), self.cid_len()).ok();
        if let Some(h) = first.filter(|h| h.content_type == ContentType::Tls12Cid) {
            // type, version, epoch and sequence number, then the CID (RFC 9146 §4).
            let cid = &datagram[11..11 + h.cid_len as usize];
            return self.by_cid.get(cid).map_or(Route::Drop, |&h| Route::ConnectionId(h));
        }
        if let Some(&h) = self.by_local.get(&local) {
            return Route::SessionSocket(h);
        }
        let existing = self.by_addr.get(&remote).copied();
        let pending = self.pending.get(&remote).copied();
        if first.is_some_and(|h| h.content_type == ContentType::Handshake && h.epoch == 0) {
            match self.scan_client_hello(now, remote, datagram) {
                HelloScan::Complete(hello) => {
                    // A copy of the ClientHello that started a session goes to it; a different
                    // one, or the same client starting over with a higher message_seq, is a new
                    // handshake (RFC 6347 §4.2.8).
                    let copy_of = [pending, existing].into_iter().flatten().find(|h| {
                        self.connections
                            .get(h)
                            .zip(hello.random(datagram))
                            .is_some_and(|(s, random)| s.conn.started_from(&random, hello.message_seq))
                    });
                    return match copy_of {
                        Some(h) => Route::HelloCopy(h),
                        None => Route::ClientHello(hello),
                    };
                }
                HelloScan::Partial if existing.is_none() => return Route::PartialHello,
                HelloScan::Partial | HelloScan::None => {}
            }
        }
        match existing {
            Some(session) => Route::Address { session, replacement: pending },
            None => Route::Drop,
        }
    }

    /// Carries out the routing decision.
    pub(super) fn dispatch(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        datagram: &mut [u8],
        route: Route,
        on_data: EndpointDataSink<'_>,
    ) {
        match route {
            Route::ConnectionId(h) | Route::SessionSocket(h) | Route::HelloCopy(h) => {
                self.deliver(now, local, remote, h, datagram, on_data)
            }
            Route::ClientHello(hello) => {
                self.handle_new_client_hello(now, remote, &hello, datagram, datagram.len())
            }
            Route::PartialHello => {}
            Route::Address { session, replacement: None } => {
                self.deliver(now, local, remote, session, datagram, on_data)
            }
            Route::Address { session, replacement: Some(new) } => {
                // Both the established session and the handshake replacing it live on this
                // address: handshake records go to the new one (a copy, as opening records works
                // in place), protected records to the established one, which drops what it
                // cannot authenticate.
                let (mut handshake_records, mut protected_records) = (false, false);
                for (rh, _) in Records::new(datagram).map_while(Result::ok) {
                    handshake_records |= rh.content_type != ContentType::ApplicationData;
                    protected_records |= rh.epoch != 0;
                }
                if handshake_records {
                    let mut copy = datagram.to_vec();
                    self.deliver(now, local, remote, new, &mut copy, None);
                }
                if protected_records {
                    self.deliver(now, local, remote, session, datagram, on_data);
                }
            }
            Route::Drop => self.stats.datagrams_dropped += 1,
        }
    }

    /// Hands the datagram to session `h`.
    fn deliver(
        &mut self,
        now: Instant,
        local: SocketAddr,
        remote: SocketAddr,
        h: ConnectionHandle,
        datagram: &mut [u8],
        on_data: EndpointDataSink<'_>,
    ) {
        let Some(conn) = self.connections.get_mut(&h).map(|s| &mut s.conn) else { return };
        match on_data {
            Some(f) => {
                let mut sink = |d: &[u8]| f(h, d);
                conn.handle_datagram_at(now, local, remote, datagram, Some(&mut sink))
            }
            None => conn.handle_datagram_at(now, local, remote, datagram, None),
        }
        self.after(h);
    }
}

impl HelloInfo {
    /// The client random of the ClientHello, if its body parses.
    fn random(&self, datagram: &[u8]) -> Option<[u8; 32]> {
        crate::handshake::ClientHello::parse(self.body(datagram)).ok().map(|ch| ch.random)
    }
}
