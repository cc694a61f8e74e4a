//! The cells of the soak: every handshake mode over every link profile (see the grid in the
//! module above).

use serde::Serialize;
use std::time::Duration;

/// The handshake a cell's clients run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// TLS_PSK_WITH_AES_128_CCM_8 (RFC 7925's profile).
    Psk,
    /// TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8, both sides sending a chain of 3 (leaf and two
    /// intermediates, root not sent).
    Ecdsa,
    /// As `Ecdsa`, then the client resumes with the ticket it got (RFC 5077).
    Resumed,
    /// PSK with a Connection ID (RFC 9146) and the return-routability check (RFC 9853); the
    /// client's address changes in the middle of every session.
    Cid,
    /// DTLS 1.3, external PSK with x25519 (psk_dhe_ke), TLS_AES_128_CCM_8_SHA256.
    Psk13,
    /// DTLS 1.3, ECDHE-ECDSA with x25519, mutual, a chain of 3 each side,
    /// TLS_AES_128_CCM_8_SHA256.
    Ecdsa13,
    /// DTLS 1.3, external PSK with X25519MLKEM768: a 1.4 kB second ClientHello.
    Hybrid13,
    /// As `Ecdsa13`, then the client resumes with the NewSessionTicket it got after the
    /// handshake (RFC 8446 §4.6.1, psk_dhe_ke).
    Resumed13,
    /// As `Resumed13`, the resumed handshake sending its first request as 0-RTT early data
    /// (RFC 8446 §4.2.10); refused early data is sent again after the handshake.
    Early13,
    /// As `Psk13`, with Connection IDs (RFC 9147 §9) and the return-routability check
    /// (RFC 9853); the client's address changes in the middle of every session.
    Cid13,
}

impl Mode {
    /// Every mode: DTLS 1.2's four, then DTLS 1.3's six.
    pub const ALL: [Mode; 10] = [
        Mode::Psk,
        Mode::Ecdsa,
        Mode::Resumed,
        Mode::Cid,
        Mode::Psk13,
        Mode::Ecdsa13,
        Mode::Hybrid13,
        Mode::Resumed13,
        Mode::Early13,
        Mode::Cid13,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Mode::Psk => "psk",
            Mode::Ecdsa => "ecdsa",
            Mode::Resumed => "resumed",
            Mode::Cid => "cid",
            Mode::Psk13 => "psk13",
            Mode::Ecdsa13 => "ecdsa13",
            Mode::Hybrid13 => "hybrid13",
            Mode::Resumed13 => "resumed13",
            Mode::Early13 => "early13",
            Mode::Cid13 => "cid13",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Mode::Psk => "PSK, TLS_PSK_WITH_AES_128_CCM_8",
            Mode::Ecdsa => "ECDHE-ECDSA (AES_128_CCM_8), mutual, chain of 3 each side",
            Mode::Resumed => "ECDHE-ECDSA full handshake, then resumed by ticket",
            Mode::Cid => "PSK with Connection ID and rrc; the client moves mid-session",
            Mode::Psk13 => "DTLS 1.3 PSK + x25519, TLS_AES_128_CCM_8_SHA256",
            Mode::Ecdsa13 => "DTLS 1.3 ECDHE-ECDSA + x25519 (AES_128_CCM_8), mutual, chain of 3 each side",
            Mode::Hybrid13 => "DTLS 1.3 PSK + X25519MLKEM768 (AES_128_CCM_8)",
            Mode::Resumed13 => "DTLS 1.3 ECDHE-ECDSA full handshake, then resumed by its NewSessionTicket",
            Mode::Early13 => "DTLS 1.3 resumed by ticket with the first request as 0-RTT early data",
            Mode::Cid13 => "DTLS 1.3 PSK with Connection ID and rrc; the client moves mid-session",
        }
    }

    /// Whether each session is a full handshake followed by a resumption by its ticket.
    pub fn resumes(self) -> bool {
        matches!(self, Mode::Resumed | Mode::Resumed13 | Mode::Early13)
    }

    /// Whether the client moves in the middle of every session (Connection IDs).
    pub fn moves(self) -> bool {
        matches!(self, Mode::Cid | Mode::Cid13)
    }

    /// Whether the cell speaks DTLS 1.3.
    pub fn is_dtls13(self) -> bool {
        !matches!(self, Mode::Psk | Mode::Ecdsa | Mode::Resumed | Mode::Cid)
    }
}

/// Loss on each direction of a client's access link.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum Loss {
    None,
    /// Each datagram lost independently.
    Bernoulli {
        p: f64,
    },
    /// Gilbert–Elliott with every datagram lost in the bad state: `rate` in the long run, in
    /// bursts of `mean_burst` datagrams on average.
    Burst {
        rate: f64,
        mean_burst: f64,
    },
}

impl Loss {
    /// Gilbert–Elliott transition probabilities (good→bad, bad→good) for a burst model: the
    /// bad state lasts `mean_burst` datagrams on average, and is occupied `rate` of the time.
    pub fn gilbert_elliott(rate: f64, mean_burst: f64) -> (f64, f64) {
        let p_bg = 1.0 / mean_burst;
        (p_bg * rate / (1.0 - rate), p_bg)
    }
}

/// A TSCH hop between each client and the border router (the bench's link: 10 ms slots).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TschHop {
    /// L: timeslots per slotframe.
    pub slotframe: u32,
    /// C: dedicated cells per link and direction.
    pub cells: u32,
    /// Probability that a frame (and its ACK) arrives; the MAC retries up to 3 times.
    pub pdr: f64,
}

/// What a client's access link does to datagrams (the rest of the path is clean).
#[derive(Clone, Debug, Serialize)]
pub struct LinkProfile {
    pub name: &'static str,
    pub what: &'static str,
    /// One-way delay, and a uniform jitter in [0, jitter_ms] on top.
    pub delay_ms: f64,
    pub jitter_ms: f64,
    pub loss: Loss,
    pub duplicate: f64,
    /// Share of datagrams held back by `reorder_ms`, so later ones overtake them.
    pub reorder: f64,
    pub reorder_ms: f64,
    /// Largest UDP payload the path carries (the link drops larger datagrams); the engines'
    /// `mtu` is set to it. `None`: the engine's default (1,200), carried whole.
    pub mtu: Option<usize>,
    /// Only the client is told `mtu`; the server keeps its default, so it receives datagrams
    /// far larger than it sends (the MTU bounds what an engine sends, never what it accepts).
    pub client_mtu_only: bool,
    /// An IEEE 802.15.4 TSCH hop instead of a wire (delay and loss are the MAC's).
    pub tsch: Option<TschHop>,
    /// A NAT between the router and the server (port-restricted, RFC 4787): a client that
    /// changes address behind it reaches the server from a new port, as after a NAT rebinding.
    pub nat: bool,
    /// The handshake timeout a user of this link would configure, on both sides; the records of
    /// a session must also be echoed within it.
    #[serde(serialize_with = "secs")]
    pub handshake_timeout: Duration,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// IPv4 and UDP headers: a link's IP MTU is the profile's UDP payload MTU plus these.
pub const IP_UDP_HEADERS: usize = 28;

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// Links losing 30 % each way: a round trip fails with probability 0.51, and the RFC 6347
/// timer (1 s doubling to 60 s, kept backed off while losses go on) makes about 24 attempts
/// at a flight in 20 minutes, which all fail with probability about 1e-7. A user who must
/// get through such a link allows that long.
const LOSSY_TIMEOUT: Duration = Duration::from_secs(1200);
/// A TSCH hop: see the profile.
const TSCH_TIMEOUT: Duration = Duration::from_secs(3600);

impl LinkProfile {
    const fn wire(name: &'static str, what: &'static str) -> LinkProfile {
        LinkProfile {
            name,
            what,
            delay_ms: 30.0,
            jitter_ms: 0.0,
            loss: Loss::None,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_ms: 0.0,
            mtu: Some(1500 - IP_UDP_HEADERS),
            client_mtu_only: false,
            tsch: None,
            nat: false,
            handshake_timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Every profile of the full run.
    pub fn all() -> Vec<LinkProfile> {
        let seed_002_hop = TschHop { slotframe: 101, cells: 1, pdr: 1.0 };
        vec![
            LinkProfile { delay_ms: 1.0, ..Self::wire("clean", "1 ms, Ethernet MTU: the reference") },
            LinkProfile {
                delay_ms: 3000.0,
                jitter_ms: 20.0,
                // A round trip of 6 s is 6x the first retransmission timer: a user allows 5x the
                // default.
                handshake_timeout: Duration::from_secs(300),
                ..Self::wire(
                    "delay-3s",
                    "3 s one way (+0-20 ms): every flight is resent before its answer can come",
                )
            },
            LinkProfile {
                loss: Loss::Bernoulli { p: 0.3 },
                handshake_timeout: LOSSY_TIMEOUT,
                ..Self::wire("loss-30", "30 ms, 30 % of datagrams lost independently each way")
            },
            LinkProfile {
                loss: Loss::Burst { rate: 0.3, mean_burst: 4.0 },
                handshake_timeout: LOSSY_TIMEOUT,
                ..Self::wire(
                    "burst-30",
                    "30 ms, 30 % lost in bursts of 4 on average (Gilbert-Elliott, shared core link)",
                )
            },
            LinkProfile {
                jitter_ms: 10.0,
                duplicate: 0.3,
                reorder: 0.3,
                reorder_ms: 100.0,
                ..Self::wire("dup-reorder", "30 ms (+0-10), 30 % duplicated, 30 % held back 100 ms")
            },
            LinkProfile {
                mtu: Some(9000 - IP_UDP_HEADERS),
                client_mtu_only: true,
                ..Self::wire("jumbo", "30 ms, 9000-byte path: the client sends whole flights in one datagram, the server 1,200 B")
            },
            LinkProfile {
                mtu: Some(96),
                ..Self::wire("mtu-96", "30 ms, 96-byte datagrams (802.15.4 frame less headers)")
            },
            LinkProfile {
                delay_ms: 0.0,
                mtu: None,
                tsch: Some(seed_002_hop),
                // One frame per direction per 1.01 s slotframe: a flight with a chain of 3 is
                // about 25 frames, 25 s on the air, and every copy the 1 s timer resends queues
                // behind it. A user of such a hop allows an hour, as `bench sim` does.
                handshake_timeout: TSCH_TIMEOUT,
                ..Self::wire("tsch", "one TSCH hop, L = 101, C = 1, PDR 1 (seed 002, Table I)")
            },
            LinkProfile {
                delay_ms: 3000.0,
                jitter_ms: 20.0,
                loss: Loss::Burst { rate: 0.3, mean_burst: 4.0 },
                duplicate: 0.1,
                reorder: 0.1,
                reorder_ms: 1000.0,
                mtu: Some(96),
                nat: true,
                // The lossy links' allowance, and half as much again for 6 s round trips.
                handshake_timeout: Duration::from_secs(1800),
                ..Self::wire(
                    "worst-wan",
                    "3 s, 30 % burst loss, 10 % dup, 10 % held 1 s, MTU 96, behind a NAT",
                )
            },
            LinkProfile {
                delay_ms: 0.0,
                mtu: None,
                tsch: Some(TschHop { pdr: 0.7, ..seed_002_hop }),
                handshake_timeout: TSCH_TIMEOUT,
                ..Self::wire("worst-tsch", "TSCH hop as above with PDR 0.7 (3 MAC retries)")
            },
        ]
    }
}

/// One cell: a mode over a link profile.
#[derive(Clone, Debug)]
pub struct Cell {
    pub mode: Mode,
    pub link: LinkProfile,
}

impl Cell {
    /// `mode/link`, as `--only` matches it.
    pub fn name(&self) -> String {
        format!("{}/{}", self.mode.name(), self.link.name)
    }
}

/// The full grid: every mode over every profile.
pub fn grid() -> Vec<Cell> {
    let links = LinkProfile::all();
    Mode::ALL
        .iter()
        .flat_map(|&mode| links.iter().map(move |link| Cell { mode, link: link.clone() }))
        .collect()
}

/// Whether `name` matches one of the comma-separated `patterns` (`*` matches any run of
/// characters; a pattern without `*` matches as a substring).
pub fn selected(name: &str, patterns: &str) -> bool {
    patterns.split(',').map(str::trim).filter(|p| !p.is_empty()).any(|p| {
        if p.contains('*') {
            glob(p.as_bytes(), name.as_bytes())
        } else {
            name.contains(p)
        }
    })
}

fn glob(pattern: &[u8], text: &[u8]) -> bool {
    match pattern.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|i| glob(rest, &text[i..])),
        Some((c, rest)) => text.split_first().is_some_and(|(t, tail)| t == c && glob(rest, tail)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_meets_every_stress_dimension() {
        let cells = grid();
        for mode in Mode::ALL {
            let links: Vec<&LinkProfile> = cells.iter().filter(|c| c.mode == mode).map(|c| &c.link).collect();
            assert!(links.iter().any(|l| l.delay_ms >= 3000.0));
            assert!(links.iter().any(|l| matches!(l.loss, Loss::Bernoulli { p } if p >= 0.3)));
            assert!(links.iter().any(|l| matches!(l.loss, Loss::Burst { rate, .. } if rate >= 0.3)));
            assert!(links.iter().any(|l| l.duplicate > 0.0));
            assert!(links.iter().any(|l| l.reorder > 0.0));
            assert!(links.iter().any(|l| l.mtu == Some(96)));
            assert!(links.iter().any(|l| l.mtu == Some(1472)));
            assert!(links.iter().any(|l| l.tsch.is_some()));
        }
    }

    #[test]
    fn burst_loss_has_the_asked_rate_and_burst_length() {
        let (p_gb, p_bg) = Loss::gilbert_elliott(0.3, 4.0);
        assert!((p_bg - 0.25).abs() < 1e-12);
        assert!((p_gb / (p_gb + p_bg) - 0.3).abs() < 1e-12);
    }

    #[test]
    fn patterns_select_by_substring_or_glob() {
        assert!(selected("psk/loss-30", "loss"));
        assert!(selected("psk/loss-30", "cid/*, psk/*"));
        assert!(selected("cid/worst-wan", "*/worst-*"));
        assert!(!selected("ecdsa/clean", "psk/*,*/tsch"));
        assert!(!selected("psk/tsch", "*/worst-*"));
    }

    #[test]
    fn mode_names_are_distinct_and_13_selects_the_dtls_1_3_modes() {
        let mut names: Vec<&str> = Mode::ALL.iter().map(|m| m.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Mode::ALL.len());
        for cell in grid() {
            assert_eq!(selected(&cell.name(), "*13/*"), cell.mode.is_dtls13(), "{}", cell.name());
        }
        let of =
            |f: fn(Mode) -> bool| Mode::ALL.into_iter().filter(|&m| f(m)).map(Mode::name).collect::<Vec<_>>();
        assert_eq!(of(Mode::resumes), ["resumed", "resumed13", "early13"]);
        assert_eq!(of(Mode::moves), ["cid", "cid13"]);
        assert_eq!(of(Mode::is_dtls13), ["psk13", "ecdsa13", "hybrid13", "resumed13", "early13", "cid13"]);
        assert_eq!(grid().len(), Mode::ALL.len() * LinkProfile::all().len());
    }
}
