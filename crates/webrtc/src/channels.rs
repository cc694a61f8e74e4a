//! The layer both sides of a session share above DTLS: one SCTP association carried in DTLS
//! records (RFC 8261), its streams named as data channels by DCEP (RFC 8832), and channels
//! closed by resetting their streams both ways (RFC 8831 §6.7, RFC 6525).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use fastshake_core::Instant;
use fastshake_dtls as dtls;
use fastshake_sctp as sctp;

use crate::dcep::{ChannelEvent, ChannelType, Channels, DtlsRole, Outgoing, Reliability};
use crate::peer::{PeerError, PeerEvent, MAX_MESSAGE_SIZE, SCTP_PORT};

/// SCTP packets go inside DTLS records, which add at most 37 bytes in DTLS 1.2 with AES-GCM
/// (13 header, 8 explicit nonce, 16 tag) and fewer in 1.3: a packet this large stays within
/// the DTLS MTU.
const SCTP_MTU: usize = dtls::DEFAULT_MTU - 64;

/// How the SCTP association inside DTLS is opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SctpSetup {
    /// The RFC 9260 four-way handshake, as browsers and pion open it.
    #[default]
    Regular,
    /// Seed 004's alternative handshake, cookieless (DTLS already proved the peer): the INIT
    /// opens the association and carries the channels' DCEP OPENs in ALT-DATA, so the first
    /// SCTP packet carries data. A server accepts it beside regular INITs; a peer that does not
    /// know it answers the INIT the regular way and the OPENs follow as DATA.
    Alternative,
    /// SNAP (draft-hancke-tsvwg-snap): our INIT goes in the offer's a=sctp-init and the
    /// answerer's comes back in the answer, so no handshake packet goes at all and the first
    /// packet carries data. An answer without a=sctp-init falls back to the regular handshake.
    Snap,
}

/// How far a channel's close has come: both directions of its stream must be reset before
/// the id may be used again (RFC 8831 §6.7).
#[derive(Clone, Copy, Debug, Default)]
struct Closing {
    /// The peer reset its outgoing stream (our incoming one).
    incoming: bool,
    /// Our reset of the outgoing stream was answered.
    outgoing: bool,
    /// We asked for the outgoing reset.
    requested: bool,
}

/// Most bytes of channel messages held before the association exists (a few maximum-size
/// messages); beyond it a send is refused as SCTP refuses one into a full buffer.
const MAX_HELD_BYTES: usize = 4 * MAX_MESSAGE_SIZE;

/// One association and its channels.
pub(crate) struct ChannelLayer {
    sctp: sctp::Endpoint,
    association: Option<sctp::AssociationHandle>,
    /// Where the association points at the SCTP endpoint: the DTLS peer when it began.
    remote: Option<SocketAddr>,
    channels: Channels,
    closing: HashMap<u16, Closing>,
    /// Our channels' OPENs and the messages sent on them before the association existed, in
    /// order: they ride with the handshake (in the INIT or behind the COOKIE-ECHO) or go the
    /// moment the association is there.
    pending: Vec<Outgoing>,
    /// Why the association ended, until the session takes it.
    ended: Option<String>,
    /// SNAP: our INIT, and the peer's once signalled; the association opens from both when
    /// DTLS is up (draft-hancke-tsvwg-snap).
    snap: Option<sctp::SnapInit>,
    peer_snap: Option<Vec<u8>>,
    /// The peer's SCTP port (its SDP's a=sctp-port).
    remote_port: u16,
}

impl ChannelLayer {
    /// The layer of a DTLS `role`; the DTLS server's SCTP side waits for the INIT.
    pub(crate) fn new(role: DtlsRole, setup: SctpSetup, seed: [u8; 32]) -> ChannelLayer {
        let server = role == DtlsRole::Server;
        let config = sctp::Config {
            local_port: SCTP_PORT,
            // A server answers both handshakes (browsers and pion send regular INITs); a client
            // offers the one asked for.
            mode: match (server, setup) {
                (true, _) | (false, SctpSetup::Alternative) => sctp::HandshakeMode::Both,
                (false, SctpSetup::Regular | SctpSetup::Snap) => sctp::HandshakeMode::Regular,
            },
            // Inside DTLS every INIT comes from the authenticated peer: no cookie is needed to
            // prove its address (seed 004 §III-E, the `cookieless` option's protected case).
            cookieless: server,
            accept_alt_data: true,
            fetch_path_cookies: false,
            // Either DTLS role may meet an INIT: the offerer learns its role from the answer.
            listen: true,
            mtu: SCTP_MTU,
            streams_out: 1024,
            streams_in: 1024,
            receive_window: (4 * MAX_MESSAGE_SIZE) as u32,
            max_associations: 1,
            max_associations_per_ip: 1,
            stream_reset: true,
            // Channels of limited retransmissions or lifetime need PR-SCTP (RFC 8831 §6.1);
            // browsers and pion announce it.
            partial_reliability: true,
            // DTLS authenticates every packet: no out-of-the-blue flood can arrive.
            ootb_answers: None,
            ..sctp::Config::default()
        };
        ChannelLayer {
            sctp: sctp::Endpoint::new(Arc::new(config), seed),
            association: None,
            remote: None,
            channels: Channels::new(role),
            closing: HashMap::new(),
            pending: Vec::new(),
            ended: None,
            snap: None,
            peer_snap: None,
            remote_port: SCTP_PORT,
        }
    }

    /// Our DTLS role, once the answer settled it (the offerer's): it decides who starts the
    /// association and the parity of our channels' stream ids (RFC 8832 §6). Channels asked
    /// for before stay queued and open with the new parity.
    pub(crate) fn set_role(&mut self, role: DtlsRole) {
        if self.channels.role() != role && self.channels.is_empty() {
            self.channels = Channels::new(role);
        }
    }

    /// Our SNAP INIT, for the SDP's a=sctp-init (made once; later calls give the same bytes).
    pub(crate) fn snap_offer(&mut self) -> Vec<u8> {
        self.snap.get_or_insert_with(|| self.sctp.snap_init()).bytes().to_vec()
    }

    /// The peer's SNAP INIT from its SDP, checked now so that a bad one is refused with the
    /// offer or answer that carried it.
    pub(crate) fn snap_answer(&mut self, peer_init: &[u8]) -> Result<(), sctp::SnapError> {
        sctp::validate_snap_init(peer_init)?;
        self.peer_snap = Some(peer_init.to_vec());
        Ok(())
    }

    /// The peer's SCTP port, from its SDP.
    pub(crate) fn set_remote_port(&mut self, port: u16) {
        self.remote_port = port;
    }

    /// Why the association ended, once: the session ends with it.
    pub(crate) fn take_ended(&mut self) -> Option<String> {
        self.ended.take()
    }

    /// The DTLS session with `remote` is up. With both SNAP INITs either side opens the
    /// association at once; otherwise the DTLS client starts it, its channels' OPENs riding in
    /// the INIT when the alternative handshake is on.
    pub(crate) fn dtls_connected(&mut self, now: Instant, remote: SocketAddr) {
        self.remote = Some(remote);
        if let (Some(ours), Some(peer)) = (self.snap.take(), self.peer_snap.take()) {
            match self.sctp.connect_snap(now, None, remote, self.remote_port, ours, &peer) {
                Ok(handle) => {
                    self.association = Some(handle);
                    // Open at once: what waited goes in the first packet.
                    self.flush_pending();
                }
                Err(e) => self.ended = Some(format!("SNAP: {e}")),
            }
            return;
        }
        if self.channels.role() != DtlsRole::Client {
            return;
        }
        // What waited rides with the handshake: in the alternative handshake's INIT, else behind
        // the COOKIE-ECHO (RFC 9260 §5.1), so the first byte does not wait for the association
        // to open and then for the DCEP ACK (RFC 8831 §6.6 lets data follow the OPEN at once).
        // It goes reliably, whatever the channel: no message here can be abandoned.
        let options = sctp::ConnectOptions {
            zero_rtt: std::mem::take(&mut self.pending).into_iter().map(sctp_message).collect(),
            ..sctp::ConnectOptions::default()
        };
        self.association = Some(self.sctp.connect(now, None, remote, self.remote_port, options));
    }

    /// Hands what waited for the association to SCTP.
    fn flush_pending(&mut self) {
        for outgoing in std::mem::take(&mut self.pending) {
            let stream = outgoing.stream;
            if let Err(e) = self.send_outgoing(outgoing) {
                self.ended.get_or_insert_with(|| format!("sending on stream {stream}: {e}"));
            }
        }
    }

    /// An SCTP packet from the DTLS session.
    pub(crate) fn handle_packet(&mut self, now: Instant, local: SocketAddr, packet: &mut [u8]) {
        if let Some(remote) = self.remote {
            self.sctp.handle_datagram(now, local, remote, packet);
        }
    }

    /// The next SCTP packet to seal into a DTLS record.
    pub(crate) fn poll_packet(&mut self, now: Instant) -> Option<Vec<u8>> {
        self.sctp.poll_transmit(now).map(|t| t.payload)
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.sctp.poll_timeout()
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        self.sctp.handle_timeout(now);
    }

    /// The channels.
    pub(crate) fn channels(&self) -> &Channels {
        &self.channels
    }

    /// Opens a channel of ours and gives its stream id; messages may be sent on it at once
    /// (RFC 8831 §6.6: they follow the OPEN, ordered until the peer's ACK). Before the
    /// association exists the OPEN waits, and rides with the handshake when it starts.
    pub(crate) fn open(&mut self, label: &str, channel_type: ChannelType) -> Result<u16, PeerError> {
        let (stream, open) = self.channels.open(label, "", channel_type, 0)?;
        self.send_or_hold(open)?;
        Ok(stream)
    }

    /// Sends on channel `stream`.
    pub(crate) fn send(&mut self, stream: u16, data: &[u8], binary: bool) -> Result<(), PeerError> {
        let outgoing = self.channels.send(stream, data, binary)?;
        self.send_or_hold(outgoing)
    }

    fn send_or_hold(&mut self, outgoing: Outgoing) -> Result<(), PeerError> {
        if self.association.is_some() {
            return self.send_outgoing(outgoing);
        }
        let held: usize = self.pending.iter().map(|o| o.data.len()).sum();
        if held + outgoing.data.len() > MAX_HELD_BYTES {
            return Err(PeerError::Sctp(sctp::Error::SendBufferFull));
        }
        self.pending.push(outgoing);
        Ok(())
    }

    /// Closes channel `stream`: our outgoing stream is reset once what was queued on it left;
    /// the peer answers by resetting its own (RFC 8831 §6.7), and then the channel is closed.
    pub(crate) fn close(&mut self, stream: u16) -> Result<(), PeerError> {
        self.channels.close(stream)?;
        self.request_reset(stream)
    }

    fn request_reset(&mut self, stream: u16) -> Result<(), PeerError> {
        let association = self.association.ok_or(PeerError::NotConnected)?;
        let state = self.closing.entry(stream).or_default();
        if !state.requested {
            state.requested = true;
            self.sctp.reset_streams(association, &[stream]).map_err(PeerError::Sctp)?;
        }
        Ok(())
    }

    fn send_outgoing(&mut self, outgoing: Outgoing) -> Result<(), PeerError> {
        let association = self.association.ok_or(PeerError::NotConnected)?;
        // Each message goes with its channel's reliability (RFC 8831 §6.1): DCEP's OPEN and ACK
        // reliably, user messages as the channel type says, whichever side opened it. SCTP
        // takes the stream's reliability when the message is queued, so setting it before each
        // one is per message. PR-SCTP carries the unreliable kinds when the peer announced it
        // too; otherwise SCTP carries them reliably, as §6.1 allows.
        let reliability = match outgoing.reliability {
            Reliability::Reliable => sctp::Reliability::Reliable,
            Reliability::MaxRetransmits(n) => sctp::Reliability::MaxRetransmits(n),
            Reliability::MaxLifetimeMs(ms) => {
                sctp::Reliability::Lifetime(std::time::Duration::from_millis(u64::from(ms)))
            }
        };
        self.sctp
            .set_stream_reliability(association, outgoing.stream, reliability)
            .map_err(PeerError::Sctp)?;
        self.sctp.send(association, sctp_message(outgoing)).map_err(PeerError::Sctp)
    }

    /// Handles what SCTP reported; returns whether anything happened. The association's end is
    /// kept for [`ChannelLayer::take_ended`].
    pub(crate) fn drain(&mut self, events: &mut VecDeque<PeerEvent>) -> bool {
        let mut progress = false;
        while let Some((handle, event)) = self.sctp.poll_event() {
            progress = true;
            match event {
                sctp::Event::Connected { handshake, zero_rtt_accepted, .. } => {
                    self.association = Some(handle);
                    events.push_back(PeerEvent::SctpConnected { handshake, zero_rtt: zero_rtt_accepted });
                }
                sctp::Event::Message(m) => self.message(m, events),
                sctp::Event::IncomingStreamsReset { streams } => {
                    for stream in streams {
                        // Only streams that carry a channel: an empty list means every stream.
                        if self.channels.get(stream).is_none() && !self.closing.contains_key(&stream) {
                            continue;
                        }
                        self.closing.entry(stream).or_default().incoming = true;
                        // The peer closed it: close ours too (RFC 8831 §6.7).
                        let _ = self.channels.close(stream);
                        if let Err(e) = self.request_reset(stream) {
                            events
                                .push_back(PeerEvent::ChannelError(format!("closing stream {stream}: {e}")));
                        }
                        self.maybe_closed(stream, events);
                    }
                }
                sctp::Event::OutgoingStreamsReset { streams, .. } => {
                    for stream in streams {
                        if let Some(state) = self.closing.get_mut(&stream) {
                            state.outgoing = true;
                        }
                        self.maybe_closed(stream, events);
                    }
                }
                sctp::Event::Closed => self.ended = Some("SCTP association closed".into()),
                sctp::Event::Aborted { reason } => {
                    self.ended = Some(format!("SCTP association aborted: {reason}"))
                }
                sctp::Event::Failed(error) => self.ended = Some(format!("SCTP failed: {error}")),
                sctp::Event::AltCookie { .. } => {}
            }
        }
        if self.association.is_some() && !self.pending.is_empty() {
            progress = true;
            self.flush_pending();
        }
        progress
    }

    fn maybe_closed(&mut self, stream: u16, events: &mut VecDeque<PeerEvent>) {
        if self.closing.get(&stream).is_some_and(|s| s.incoming && s.outgoing) {
            self.closing.remove(&stream);
            if let Some(channel) = self.channels.reset(stream) {
                events.push_back(PeerEvent::ChannelClosed { stream, label: channel.label });
            }
        }
    }

    fn message(&mut self, m: sctp::Message, events: &mut VecDeque<PeerEvent>) {
        match self.channels.handle(m.stream, m.ppid, &m.data) {
            Ok(Some(ChannelEvent::Opened { stream, label, protocol, channel_type, ack, .. })) => {
                if let Err(e) = self.send_outgoing(ack) {
                    events.push_back(PeerEvent::ChannelError(format!("ACK on stream {stream}: {e}")));
                }
                events.push_back(PeerEvent::ChannelOpened { stream, label, protocol, channel_type });
            }
            Ok(Some(ChannelEvent::Acked { stream })) => events.push_back(PeerEvent::ChannelAcked { stream }),
            Ok(Some(ChannelEvent::Message { stream, data, binary })) => {
                events.push_back(PeerEvent::Message { stream, data, binary })
            }
            Ok(None) => {}
            Err(e) => {
                // RFC 8832 §6: a broken or misplaced OPEN is answered by closing the channel.
                if let Some(stream) = e.stream_to_reset() {
                    let _ = self.request_reset(stream);
                }
                events.push_back(PeerEvent::ChannelError(e.to_string()));
            }
        }
    }
}

/// A DCEP layer message as SCTP carries it.
fn sctp_message(outgoing: Outgoing) -> sctp::Message {
    sctp::Message {
        stream: outgoing.stream,
        unordered: outgoing.unordered,
        ppid: outgoing.ppid,
        data: outgoing.data,
    }
}
