//! The regular state cookie and the ALT-COOKIE, both signed with the project's one cookie MAC
//! ([`fastshake_core::CookieMac`], SipHash-2-4-128 with a key epoch).

use std::net::IpAddr;
use std::time::Duration;

use fastshake_core::codec::{put_u16, put_u32, put_u64, put_u8, Reader};
use fastshake_core::{CookieMac, Instant, COOKIE_LEN};

const STATE_COOKIE_LABEL: &[u8] = b"sctp state cookie v1";
const ALT_COOKIE_LABEL: &[u8] = b"sctp alt cookie v1";
const STATE_COOKIE_VERSION: u8 = 2;
/// The flags byte after the addresses: stream reset negotiated. The byte is left off when no
/// flag is set, so a cookie of an endpoint without stream reset is what it always was.
const FLAG_RECONFIG: u8 = 0x01;
/// The same byte: partial reliability (RFC 3758) negotiated.
const FLAG_FORWARD_TSN: u8 = 0x02;
/// At most this many peer addresses travel in a state cookie.
pub(crate) const MAX_COOKIE_ADDRESSES: usize = 16;

/// Bytes of an ALT-COOKIE: the key epoch and a 128-bit tag over the client's IP address.
pub const ALT_COOKIE_LEN: usize = COOKIE_LEN;

/// Everything the server needs to build the association from a COOKIE-ECHO.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct StateCookie {
    pub(crate) local_tag: u32,
    pub(crate) peer_tag: u32,
    pub(crate) local_initial_tsn: u32,
    pub(crate) peer_initial_tsn: u32,
    pub(crate) peer_rwnd: u32,
    pub(crate) streams_out: u16,
    pub(crate) streams_in: u16,
    pub(crate) created: Instant,
    pub(crate) lifetime: Duration,
    pub(crate) peer_addresses: Vec<IpAddr>,
    /// The (our, peer's) verification tags of the association that existed when the INIT came,
    /// zero when none did: a restart must prove it saw them (RFC 9260 §5.2.2, §5.2.4 case A).
    pub(crate) tie_tags: (u32, u32),
    /// Both sides announced RE-CONFIG (RFC 6525 §5.1.1): stream resets may go both ways.
    pub(crate) reconfig: bool,
    /// Both sides announced PR-SCTP (RFC 3758 §3.3): FORWARD-TSN may go both ways.
    pub(crate) forward_tsn: bool,
}

/// Why a state cookie was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CookieError {
    /// Malformed or wrong MAC: silently discarded (RFC 9260 §5.1.5).
    Invalid,
    /// Authentic but older than its lifetime: answered with "Stale Cookie".
    Stale { by: Duration, peer_tag: u32 },
}

impl StateCookie {
    fn body(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(56 + 17 * self.peer_addresses.len());
        put_u8(&mut b, STATE_COOKIE_VERSION);
        put_u32(&mut b, self.local_tag);
        put_u32(&mut b, self.peer_tag);
        put_u32(&mut b, self.local_initial_tsn);
        put_u32(&mut b, self.peer_initial_tsn);
        put_u32(&mut b, self.peer_rwnd);
        put_u16(&mut b, self.streams_out);
        put_u16(&mut b, self.streams_in);
        put_u32(&mut b, self.tie_tags.0);
        put_u32(&mut b, self.tie_tags.1);
        put_u64(&mut b, self.created.as_nanos());
        put_u32(&mut b, u32::try_from(self.lifetime.as_millis()).unwrap_or(u32::MAX));
        let addrs = &self.peer_addresses[..self.peer_addresses.len().min(MAX_COOKIE_ADDRESSES)];
        put_u8(&mut b, addrs.len() as u8);
        for a in addrs {
            match a {
                IpAddr::V4(v4) => {
                    put_u8(&mut b, 4);
                    b.extend_from_slice(&v4.octets());
                }
                IpAddr::V6(v6) => {
                    put_u8(&mut b, 6);
                    b.extend_from_slice(&v6.octets());
                }
            }
        }
        let flags = (if self.reconfig { FLAG_RECONFIG } else { 0 })
            | (if self.forward_tsn { FLAG_FORWARD_TSN } else { 0 });
        if flags != 0 {
            put_u8(&mut b, flags);
        }
        b
    }

    /// The cookie: body then MAC over it.
    pub(crate) fn seal(&self, mac: &CookieMac) -> Vec<u8> {
        let mut b = self.body();
        let tag = mac.sign(&[STATE_COOKIE_LABEL, &b]);
        b.extend_from_slice(&tag);
        b
    }

    /// Verifies and decodes a cookie echoed at `now`.
    pub(crate) fn open(cookie: &[u8], mac: &CookieMac, now: Instant) -> Result<StateCookie, CookieError> {
        let split = cookie.len().checked_sub(COOKIE_LEN).ok_or(CookieError::Invalid)?;
        let (body, tag) = cookie.split_at(split);
        if !mac.verify(tag, &[STATE_COOKIE_LABEL, body]) {
            return Err(CookieError::Invalid);
        }
        let parsed = Self::decode(body).ok_or(CookieError::Invalid)?;
        let expires = parsed.created + parsed.lifetime;
        if now > expires {
            return Err(CookieError::Stale { by: now - expires, peer_tag: parsed.peer_tag });
        }
        Ok(parsed)
    }

    fn decode(body: &[u8]) -> Option<StateCookie> {
        let mut r = Reader::new(body);
        if r.u8().ok()? != STATE_COOKIE_VERSION {
            return None;
        }
        let local_tag = r.u32().ok()?;
        let peer_tag = r.u32().ok()?;
        let local_initial_tsn = r.u32().ok()?;
        let peer_initial_tsn = r.u32().ok()?;
        let peer_rwnd = r.u32().ok()?;
        let streams_out = r.u16().ok()?;
        let streams_in = r.u16().ok()?;
        let tie_tags = (r.u32().ok()?, r.u32().ok()?);
        let created = Instant::from_nanos(r.u64().ok()?);
        let lifetime = Duration::from_millis(u64::from(r.u32().ok()?));
        let n = r.u8().ok()?;
        let mut peer_addresses = Vec::new();
        for _ in 0..n {
            match r.u8().ok()? {
                4 => peer_addresses.push(IpAddr::from(r.array::<4>().ok()?)),
                6 => peer_addresses.push(IpAddr::from(r.array::<16>().ok()?)),
                _ => return None,
            }
        }
        let flags = r.u8().unwrap_or(0);
        Some(StateCookie {
            local_tag,
            peer_tag,
            local_initial_tsn,
            peer_initial_tsn,
            peer_rwnd,
            streams_out,
            streams_in,
            created,
            lifetime,
            peer_addresses,
            tie_tags,
            reconfig: flags & FLAG_RECONFIG != 0,
            forward_tsn: flags & FLAG_FORWARD_TSN != 0,
        })
    }
}

/// Bytes of an IP address as the MAC sees them (IPv4-mapped IPv6 folded to IPv4 so a dual-stack
/// socket does not change the cookie), in a stack buffer with its length.
fn ip_bytes(ip: IpAddr) -> ([u8; 16], usize) {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    let mut buf = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => {
            buf[..4].copy_from_slice(&v4.octets());
            (buf, 4)
        }
        IpAddr::V6(v6) => (v6.octets(), 16),
    }
}

/// An ALT-COOKIE for a client at `ip`. Bound to the address only, as in seed 004 §III-B: the UDP
/// encapsulation port may change behind a NAT between associations; its lifetime is the key's
/// (two rotations).
pub(crate) fn alt_cookie(mac: &CookieMac, ip: IpAddr) -> [u8; ALT_COOKIE_LEN] {
    let (buf, len) = ip_bytes(ip);
    mac.sign(&[ALT_COOKIE_LABEL, &buf[..len]])
}

/// Whether `cookie` is an ALT-COOKIE this server issued for `ip` under the current or previous key.
pub(crate) fn alt_cookie_valid(mac: &CookieMac, ip: IpAddr, cookie: &[u8]) -> bool {
    let (buf, len) = ip_bytes(ip);
    mac.verify(cookie, &[ALT_COOKIE_LABEL, &buf[..len]])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(now: Instant) -> StateCookie {
        StateCookie {
            local_tag: 1,
            peer_tag: 2,
            local_initial_tsn: 3,
            peer_initial_tsn: 4,
            peer_rwnd: 5,
            streams_out: 6,
            streams_in: 7,
            created: now,
            lifetime: Duration::from_secs(60),
            peer_addresses: vec!["10.0.0.1".parse().unwrap(), "::1".parse().unwrap()],
            tie_tags: (8, 9),
            reconfig: false,
            forward_tsn: false,
        }
    }

    #[test]
    fn state_cookie_round_trips_and_detects_tampering_and_age() {
        let mac = CookieMac::new([9; 16]);
        let t0 = Instant::from_millis(1000);
        let c = sample(t0).seal(&mac);
        assert_eq!(StateCookie::open(&c, &mac, t0), Ok(sample(t0)));
        for i in 0..c.len() {
            let mut bad = c.clone();
            bad[i] ^= 0x40;
            assert_eq!(StateCookie::open(&bad, &mac, t0), Err(CookieError::Invalid), "byte {i}");
        }
        let late = t0 + Duration::from_secs(61);
        assert_eq!(
            StateCookie::open(&c, &mac, late),
            Err(CookieError::Stale { by: Duration::from_secs(1), peer_tag: 2 })
        );
        assert_eq!(StateCookie::open(&c[..5], &mac, t0), Err(CookieError::Invalid));
    }

    #[test]
    fn the_reconfig_flag_adds_a_byte_only_when_set() {
        let mac = CookieMac::new([9; 16]);
        let t0 = Instant::from_millis(1000);
        let plain = sample(t0).seal(&mac);
        let with = StateCookie { reconfig: true, ..sample(t0) };
        let sealed = with.seal(&mac);
        assert_eq!(sealed.len(), plain.len() + 1);
        assert_eq!(StateCookie::open(&sealed, &mac, t0), Ok(with));
        assert_eq!(StateCookie::open(&plain, &mac, t0).map(|c| c.reconfig), Ok(false));
        let both = StateCookie { reconfig: true, forward_tsn: true, ..sample(t0) };
        assert_eq!(both.seal(&mac).len(), plain.len() + 1, "one byte for both flags");
        assert_eq!(StateCookie::open(&both.seal(&mac), &mac, t0), Ok(both));
    }

    #[test]
    fn alt_cookie_is_bound_to_address_and_key() {
        let mut mac = CookieMac::new([1; 16]);
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let c = alt_cookie(&mac, ip);
        assert_eq!(c.len(), ALT_COOKIE_LEN);
        assert!(alt_cookie_valid(&mac, ip, &c));
        assert!(alt_cookie_valid(&mac, "::ffff:192.0.2.7".parse().unwrap(), &c));
        assert!(!alt_cookie_valid(&mac, "192.0.2.8".parse().unwrap(), &c));
        mac.rotate([2; 16]);
        assert!(alt_cookie_valid(&mac, ip, &c));
        mac.rotate([3; 16]);
        assert!(!alt_cookie_valid(&mac, ip, &c), "expired after two rotations");
    }
}
