//! Moves in DTLS 1.3 (RFC 9147 §9): `connection_id` (RFC 9146 §3), `rrc` (RFC 9853 §2: "CH,
//! SH" in the TLS 1.3 column) and fastshake's `port_move` (the session's own server port, IPC
//! and TCS, as in DTLS 1.2) in ClientHello and ServerHello, the CID of a record
//! checked before it is opened, and NewConnectionId / RequestConnectionId after the handshake, in the post-handshake
//! flight and resent until acknowledged as KeyUpdate is. Address moves then run through the
//! same path check as DTLS 1.2 ([`crate::connection::path`]).

use super::client::MobilityOffer13;
use super::{Abort, Handshake13, Tls13};
use crate::alert::AlertDescription;
use crate::config::{ClientConfig, ServerConfig};
use crate::connection::VersionState;
use crate::connection::{Connection, EndpointEvent, Phase};
use crate::error::Error;
use crate::handshake::{
    encode_new_connection_id, encode_request_connection_id, parse_new_connection_id,
    parse_request_connection_id, ClientHello, Extensions, HandshakeType, CID_IMMEDIATE, CID_SPARE,
};
use crate::mobility::{ChallengeCookies, PathState, MAX_OWN_CIDS, MAX_SPARE_CIDS};
use crate::record::epoch;
use crate::record::unified::UnifiedHeader;
use fastshake_core::codec::Reader;
use fastshake_core::Instant;
use rand_chacha::ChaCha20Rng;
use rand_core::RngCore;

impl Connection {
    // ------------------------------------------------------------ negotiation

    /// Client: the mobility state for what the configuration offers, made at the first
    /// ClientHello (a second one offers the same CID); returns what the hello offers.
    pub(super) fn offer_mobility13(
        &mut self,
        config: &ClientConfig,
        rng: &mut ChaCha20Rng,
    ) -> MobilityOffer13 {
        let m = &config.mobility;
        if !m.any() {
            return MobilityOffer13::default();
        }
        let path = self.path.get_or_insert_with(|| {
            let mut own_cid = vec![0u8; m.connection_id.unwrap_or(0) as usize];
            rng.fill_bytes(&mut own_cid);
            Box::new(PathState { offered_cid: m.connection_id.is_some(), ..PathState::new(&own_cid, None) })
        });
        MobilityOffer13 {
            connection_id: path.offered_cid.then(|| path.own_cid().to_vec()),
            rrc: m.return_routability_check,
            port_move: m.follow_server_port,
        }
    }

    /// Client: the ServerHello's `connection_id`, `rrc` and `port_move`, each only as the
    /// answer to ours (unsolicited: unsupported_extension, RFC 8446 §4.2). With a CID agreed,
    /// the seed of the CIDs this client may issue later is drawn from `rng`. The mobility state
    /// goes when nothing was agreed.
    pub(super) fn accept_server_hello13(
        &mut self,
        config: &ClientConfig,
        ext: &Extensions<'_>,
        rng: &mut ChaCha20Rng,
    ) -> Result<(), Abort> {
        let offered = self.path.as_deref().is_some_and(|p| p.offered_cid);
        let m = &config.mobility;
        if (ext.connection_id.is_some() && !offered)
            || (ext.rrc && !m.return_routability_check)
            || (ext.port_move && !m.follow_server_port)
        {
            return Err(Abort::alert(AlertDescription::UnsupportedExtension));
        }
        if let Some(path) = self.path.as_deref_mut() {
            path.cid_negotiated = ext.connection_id.is_some();
            path.rrc = ext.rrc;
            path.port_move = ext.port_move;
            path.set_peer_cid(ext.connection_id.unwrap_or_default());
            if !path.cid_negotiated && !path.rrc && !path.port_move {
                self.path = None;
            } else if !path.cid_negotiated {
                path.set_own_cid(&[]);
            } else if !path.own_cid().is_empty() {
                let mut seed = [0u8; 32];
                rng.fill_bytes(&mut seed);
                path.cids13_made().seed = Some(seed);
            }
        }
        Ok(())
    }

    /// Client: EncryptedExtensions carries none of the mobility extensions: each is
    /// ServerHello's or DTLS 1.2's (RFC 8446 §4.2: illegal_parameter).
    pub(super) fn accept_encrypted_extensions13(&mut self, ext: &Extensions<'_>) -> Result<(), Abort> {
        if ext.connection_id.is_some() || ext.port_move || ext.rrc {
            return Err(Abort::alert(AlertDescription::IllegalParameter));
        }
        Ok(())
    }

    /// Server: what the ClientHello and our configuration agree on, as in DTLS 1.2
    /// (`issued_cid`: the endpoint's CID for this session), for the ServerHello.
    pub(super) fn negotiate_mobility13(
        &mut self,
        config: &ServerConfig,
        ch: &ClientHello<'_>,
        issued_cid: &[u8],
        rng: &mut ChaCha20Rng,
    ) -> MobilityOffer13 {
        if config.mobility.any() {
            let mut seed = [0u8; 32];
            rng.fill_bytes(&mut seed);
            let cookies = config
                .mobility
                .return_routability_check
                .then(|| Box::new(ChallengeCookies { seed, made: 0 }));
            self.path = Some(Box::new(PathState::new(issued_cid, cookies)));
        }
        crate::connection::server::negotiate_mobility(&mut self.path, config, ch);
        let path = self.path.as_deref();
        MobilityOffer13 {
            connection_id: path.filter(|p| p.cid_negotiated).map(|p| p.own_cid().to_vec()),
            rrc: path.is_some_and(|p| p.rrc),
            port_move: path.is_some_and(|p| p.port_move),
        }
    }

    // ------------------------------------------------------------ records

    /// A protected record whose CID is none of ours, or that lacks one once we asked for one,
    /// is dropped unopened (RFC 9146 §6 for 1.2; RFC 9147 §9); returns its length then.
    /// Without a CID negotiated the parser refuses the C bit itself.
    pub(super) fn foreign_cid13(&self, record: &[u8]) -> Option<usize> {
        let path = self.path.as_deref()?;
        let header = UnifiedHeader::parse(&mut Reader::new(record), path.own_cid().len() as u8).ok()?;
        let cid = &record[1..1 + header.cid_len as usize];
        let ours = match header.cid_len {
            0 => !path.cid_negotiated || path.own_cid().is_empty(),
            _ => path.is_own_cid(cid),
        };
        (!ours).then_some(header.header_len() + header.length as usize)
    }

    /// A record that authenticated carried our `cid`: once the peer writes one that an
    /// immediate NewConnectionId of ours gave it, the CIDs that one replaced are forgotten
    /// (and the endpoint stops routing them).
    pub(super) fn note_own_cid13(&mut self, cid: &[u8]) {
        let Some(cids) = self.path.as_deref_mut().and_then(|p| p.cids13_mut()) else { return };
        if cids.retiring.is_empty() || cids.retiring.iter().any(|c| **c == *cid) {
            return;
        }
        for old in std::mem::take(&mut cids.retiring) {
            self.push_endpoint_event(EndpointEvent::ConnectionIdRetired(old));
        }
    }

    // ------------------------------------------------------------ after the handshake

    /// Established 1.3 session with CIDs: the path state.
    fn cid_path13(&mut self) -> Result<&mut PathState, Error> {
        if !self.version.is13() {
            return Err(Error::NotNegotiated("Connection ID updates are DTLS 1.3's"));
        }
        if self.phase != Phase::Established {
            return Err(Error::NotEstablished);
        }
        self.path
            .as_deref_mut()
            .filter(|p| p.cid_negotiated)
            .ok_or(Error::NotNegotiated("connection_id was not negotiated"))
    }

    /// Whether a message of `msg_type` of ours awaits its acknowledgement.
    fn outstanding13(&self, msg_type: HandshakeType) -> bool {
        let hs = self.version.v13().and_then(|v| v.state.hs.as_deref());
        hs.is_some_and(|hs| hs.flight.messages.iter().any(|m| m.msg_type == msg_type && !m.done()))
    }

    /// Sends NewConnectionId with `cids` of ours (made by the endpoint or from the seed),
    /// resent until acknowledged. With `immediate` the peer writes the first from now on and
    /// our earlier CIDs are forgotten once it does; otherwise they are spares.
    pub(crate) fn issue_connection_ids13(
        &mut self,
        now: Instant,
        cids: Vec<Box<[u8]>>,
        immediate: bool,
    ) -> Result<(), Error> {
        let outstanding = self.outstanding13(HandshakeType::NewConnectionId);
        let path = self.cid_path13()?;
        // §9: not by a side that receives no CID; one at a time.
        if path.own_cid().is_empty() {
            return Err(Error::NotNegotiated("Connection IDs of ours: the peer writes none"));
        }
        if outstanding {
            return Err(Error::NotNegotiated("a NewConnectionId awaits its acknowledgement"));
        }
        let len = path.own_cid().len();
        let room = path.cids13_made().room();
        if cids.len() > room || cids.iter().any(|c| c.len() != len) || (immediate && cids.is_empty()) {
            return Err(Error::NotNegotiated("Connection IDs: too many, none, or of another length"));
        }
        let mut body = Vec::with_capacity(3 + cids.iter().map(|c| 1 + c.len()).sum::<usize>());
        let list: Vec<&[u8]> = cids.iter().map(|c| &c[..]).collect();
        encode_new_connection_id(&mut body, &list, if immediate { CID_IMMEDIATE } else { CID_SPARE });
        let mut cids = cids.into_iter();
        let first = if immediate { cids.next() } else { None };
        if let Some(first) = first {
            let old: Box<[u8]> = path.own_cid().into();
            path.set_own_cid(&first);
            let cids13 = path.cids13_made();
            cids13.retiring.push(old);
            cids13.retiring.append(&mut cids13.issued);
        }
        path.cids13_made().issued.extend(cids);
        self.send_post_handshake13(now, HandshakeType::NewConnectionId, body)
    }

    /// DTLS 1.3: gives the peer `count` more Connection IDs of this client (RFC 9147 §9) in a
    /// NewConnectionId, resent until acknowledged. With `immediate` the peer must write the
    /// first of them from now on, and the CIDs it replaces are forgotten once it does; else
    /// they are spares for the peer to move to. Refused unless the session is an established
    /// 1.3 one where the peer writes a CID, while another NewConnectionId awaits its
    /// acknowledgement, and past 8 CIDs in use. A server's CIDs come from its endpoint
    /// ([`crate::Endpoint::new_connection_ids`]).
    pub fn new_connection_ids(&mut self, now: Instant, count: u8, immediate: bool) -> Result<(), Error> {
        let path = self.cid_path13()?;
        let len = path.own_cid().len();
        let Some(cids13) = path.cids13_mut().filter(|c| c.seed.is_some()) else {
            return Err(Error::NotNegotiated("a server's Connection IDs come from its endpoint"));
        };
        let cids = (0..count.min(MAX_OWN_CIDS as u8)).filter_map(|_| cids13.make(len)).collect();
        self.issue_connection_ids13(now, cids, immediate)
    }

    /// DTLS 1.3: asks the peer for `count` spare Connection IDs (RequestConnectionId, RFC 9147
    /// §9), resent until acknowledged; they come in its NewConnectionId
    /// ([`Self::spare_connection_ids`]). Refused unless we write a CID to the peer, and while
    /// an earlier request is unanswered.
    pub fn request_connection_ids(&mut self, now: Instant, count: u8) -> Result<(), Error> {
        let path = self.cid_path13()?;
        if path.peer_cid().is_empty() {
            return Err(Error::NotNegotiated("the peer receives no Connection ID"));
        }
        let cids13 = path.cids13_made();
        if cids13.requested {
            return Err(Error::NotNegotiated("an earlier RequestConnectionId is unanswered"));
        }
        cids13.requested = true;
        let mut body = Vec::with_capacity(1);
        encode_request_connection_id(&mut body, count);
        self.send_post_handshake13(now, HandshakeType::RequestConnectionId, body)
    }

    /// The peer's spare Connection IDs held (at most 4), in the order it gave them.
    pub fn spare_connection_ids(&self) -> Vec<&[u8]> {
        let cids = self.path.as_deref().and_then(|p| p.cids13());
        cids.map_or(Vec::new(), |c| c.spares.iter().map(|c| &c[..]).collect())
    }

    /// DTLS 1.3: writes the peer's next spare Connection ID into our records from now on (RFC
    /// 9147 §9: a new CID for a new path, so the two paths cannot be linked by it). False
    /// when no spare is held.
    pub fn use_spare_connection_id(&mut self) -> bool {
        let Some(path) = self.path.as_deref_mut() else { return false };
        let Some(next) = path.cids13_mut().and_then(|c| c.spares.pop_front()) else { return false };
        path.set_peer_cid(&next);
        true
    }

    /// A request of the peer that waited for our last NewConnectionId to be acknowledged is
    /// answered once it is.
    pub(super) fn answer_owed_cids13(&mut self, now: Instant) {
        let owed = self.path.as_deref().and_then(|p| p.cids13()).and_then(|c| c.owed);
        let Some(count) = owed else { return };
        if self.outstanding13(HandshakeType::NewConnectionId) {
            return;
        }
        let is_server = self.server_config().is_some();
        let Some(path) = self.path.as_deref_mut() else { return };
        let len = path.own_cid().len();
        let Some(cids13) = path.cids13_mut() else { return };
        cids13.owed = None;
        let count = usize::from(count).min(cids13.room());
        if is_server {
            self.push_endpoint_event(EndpointEvent::ConnectionIdsRequested(count as u8));
            return;
        }
        let cids = (0..count).filter_map(|_| cids13.make(len)).collect();
        // Refused only if the session ended meanwhile.
        let _ = self.issue_connection_ids13(now, cids, false);
    }

    /// Every CID of ours the peer may write (the endpoint routes them to this session).
    /// Whether `cid` is one of ours the peer may write (the handshake's, issued or retiring).
    pub(crate) fn owns_connection_id(&self, cid: &[u8]) -> bool {
        self.path.as_deref().is_some_and(|p| p.cid_negotiated && !p.own_cid().is_empty() && p.is_own_cid(cid))
    }

    pub(crate) fn own_connection_ids(&self) -> Vec<&[u8]> {
        let Some(path) = self.path.as_deref().filter(|p| p.cid_negotiated && !p.own_cid().is_empty()) else {
            return Vec::new();
        };
        let mut all = vec![path.own_cid()];
        if let Some(c) = path.cids13() {
            all.extend(c.issued.iter().chain(&c.retiring).map(|c| &c[..]));
        }
        all
    }

    /// A post-handshake message of ours in a flight of its own (or added to the one still
    /// unacknowledged), resent until acknowledged (§5.8.1).
    fn send_post_handshake13(
        &mut self,
        now: Instant,
        msg_type: HandshakeType,
        body: Vec<u8>,
    ) -> Result<(), Error> {
        let Some(mut v13) = self.version.take13() else { return Err(Error::NotEstablished) };
        let hs = match v13.state.hs.take() {
            Some(hs) => Some(hs),
            None => self.post_handshake13(now, &v13),
        };
        let result = match hs {
            Some(mut hs) => {
                self.push_post_handshake13(now, &mut hs, &mut v13, msg_type, body);
                v13.state.hs = Some(hs);
                Ok(())
            }
            None => Err(Error::NotEstablished),
        };
        self.version = VersionState::Dtls13(v13);
        result
    }

    fn push_post_handshake13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        msg_type: HandshakeType,
        body: Vec<u8>,
    ) {
        if hs.flight.all_acked() {
            hs.begin_flight();
        }
        let epoch = v13.write.epoch().unwrap_or(epoch::APPLICATION);
        hs.push_message(epoch, msg_type, body, false);
        let mut record = std::mem::take(&mut v13.write);
        self.send_flight13(now, hs, &mut record, true);
        v13.write = record;
        if let Some(secrets) = v13.state.secrets.as_mut() {
            secrets.next_message_seq = hs.next_message_seq;
        }
    }

    /// The peer's NewConnectionId or RequestConnectionId (§9), acknowledged once the datagram
    /// is done. Either one from a peer that may not send it ends the session with
    /// unexpected_message, as §9 says.
    pub(super) fn on_connection_id_message13(
        &mut self,
        now: Instant,
        hs: &mut Handshake13,
        v13: &mut Tls13,
        msg_type: HandshakeType,
        body: &[u8],
    ) -> Result<(), Abort> {
        hs.ack_now = true;
        let is_server = self.server_config().is_some();
        let Some(path) = self.path.as_deref_mut().filter(|p| p.cid_negotiated) else {
            return Err(Abort::unexpected());
        };
        if msg_type == HandshakeType::NewConnectionId {
            let (cids, usage) = parse_new_connection_id(body).map_err(Abort::decode)?;
            // Only a peer that receives a CID (we write one) gives us more.
            if path.peer_cid().is_empty() {
                return Err(Abort::unexpected());
            }
            let mut fresh = cids.into_iter().filter(|c| !c.is_empty());
            if usage == CID_IMMEDIATE {
                let first = fresh.next().ok_or(Abort::alert(AlertDescription::IllegalParameter))?;
                path.set_peer_cid(first);
                // The peer replaced its CIDs: the spares it gave before go with them.
                path.cids13_made().spares.clear();
            }
            let cids13 = path.cids13_made();
            for cid in fresh {
                if cids13.spares.len() < MAX_SPARE_CIDS && !cids13.spares.iter().any(|s| **s == *cid) {
                    cids13.spares.push_back(cid.into());
                }
            }
            cids13.requested = false;
            return Ok(());
        }
        let count = parse_request_connection_id(body).map_err(Abort::decode)?;
        // Only a peer that writes a CID to us asks for more.
        if path.own_cid().is_empty() {
            return Err(Abort::unexpected());
        }
        let len = path.own_cid().len();
        let cids13 = path.cids13_made();
        // An excessive request is answered with fewer, maybe none (§9).
        let count = usize::from(count).min(cids13.room());
        let busy =
            hs.flight.messages.iter().any(|m| m.msg_type == HandshakeType::NewConnectionId && !m.done());
        if busy {
            cids13.owed = Some(count as u8);
            return Ok(());
        }
        if is_server {
            // The endpoint makes a server's CIDs (unique among its sessions, its prefix first).
            self.push_endpoint_event(EndpointEvent::ConnectionIdsRequested(count as u8));
            return Ok(());
        }
        let cids: Vec<Box<[u8]>> = (0..count).filter_map(|_| cids13.make(len)).collect();
        let list: Vec<&[u8]> = cids.iter().map(|c| &c[..]).collect();
        let mut answer = Vec::new();
        encode_new_connection_id(&mut answer, &list, CID_SPARE);
        cids13.issued.extend(cids);
        self.push_post_handshake13(now, hs, v13, HandshakeType::NewConnectionId, answer);
        Ok(())
    }
}
