//! Pieces every fastshake engine and driver shares.
//!
//! - [`Instant`]: a point in time the caller passes in. Engines never read a clock, so the same
//!   engine runs on a real socket (the driver maps its monotonic clock onto `Instant`) and inside
//!   the simulator (virtual time).
//! - [`SansIo`]: the one trait through which a driver (real or simulated) moves datagrams and
//!   time through an endpoint.
//! - [`CookieMac`]: the keyed MAC behind every stateless cookie (DTLS HelloVerifyRequest, SCTP
//!   state cookie and ALT-COOKIE), with key rotation and constant-time verification; 16 bytes.
//! - [`codec`]: the one bounds-checked reader and big-endian writer of wire fields.
//! - [`TimerTable`]: named deadlines, one slot per kind of timer, for every engine's timers.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod codec;
mod cookie;
mod time;
mod timer;

pub use cookie::{CookieMac, COOKIE_LEN, COOKIE_TAG_LEN, MIN_COOKIE_TAG_LEN};
pub use time::Instant;
pub use timer::{TimerKind, TimerTable};

use std::net::SocketAddr;

/// A datagram an endpoint wants sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The local address to send from; `None` lets the driver choose (the endpoint's only one).
    pub src: Option<SocketAddr>,
    /// Where the datagram goes.
    pub dst: SocketAddr,
    /// The UDP payload.
    pub payload: Vec<u8>,
}

/// A sans-IO endpoint as a driver sees it: datagrams and time in, datagrams and a deadline out.
///
/// The real-socket drivers and the simulator both drive endpoints through this trait, so one
/// engine runs unchanged on either.
pub trait SansIo {
    /// A datagram arrived at local address `local` from `remote`. The buffer may be decrypted or
    /// otherwise rewritten in place.
    fn handle_datagram(&mut self, now: Instant, local: SocketAddr, remote: SocketAddr, datagram: &mut [u8]);

    /// The next datagram to send, if any. Call until it returns `None`.
    fn poll_transmit(&mut self, now: Instant) -> Option<Transmit>;

    /// When [`SansIo::handle_timeout`] should next be called, if ever.
    fn poll_timeout(&self) -> Option<Instant>;

    /// The deadline returned by [`SansIo::poll_timeout`] has passed.
    fn handle_timeout(&mut self, now: Instant);
}

/// Implements [`SansIo`] for an engine type whose inherent methods of the same names and
/// signatures do the work (the DTLS and SCTP endpoints), so that the trait adds no code of its own.
#[macro_export]
macro_rules! sans_io_by_inherent_methods {
    ($engine:ty) => {
        impl $crate::SansIo for $engine {
            fn handle_datagram(
                &mut self,
                now: $crate::Instant,
                local: ::std::net::SocketAddr,
                remote: ::std::net::SocketAddr,
                datagram: &mut [u8],
            ) {
                <$engine>::handle_datagram(self, now, local, remote, datagram)
            }
            fn poll_transmit(&mut self, now: $crate::Instant) -> Option<$crate::Transmit> {
                <$engine>::poll_transmit(self, now)
            }
            fn poll_timeout(&self) -> Option<$crate::Instant> {
                <$engine>::poll_timeout(self)
            }
            fn handle_timeout(&mut self, now: $crate::Instant) {
                <$engine>::handle_timeout(self, now)
            }
        }
    };
}
