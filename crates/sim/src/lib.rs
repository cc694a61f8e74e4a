//! Deterministic discrete-event network simulator in virtual time.
//!
//! A [`Simulator`] holds nodes (hosts, routers, NATs) with interfaces, point-to-point links
//! between interfaces, and applications on hosts. Applications are sans-IO endpoints
//! ([`fastshake_core::SansIo`], via [`apps::App`]): the simulator hands them datagrams and
//! timeouts in virtual time and sends what they poll out, as a real driver would. Every random
//! choice comes from one seeded RNG in event order, so a seed fixes a run byte for byte.
//!
//! - [`link`]: delay, jitter, rate, MTU, loss, duplication, reordering;
//! - [`nat`]: RFC 4787 mapping and filtering;
//! - [`mac`] and [`radio`]: duty-cycled IEEE 802.15.4 MACs and radio energy;
//! - [`pcap`]: captures readable by Wireshark and tshark;
//! - [`scenario`]: TOML scenarios, sweeps and summaries.
#![forbid(unsafe_code)]

pub mod apps;
pub mod dist;
mod event;
pub mod link;
pub mod mac;
pub mod nat;
pub mod packet;
pub mod pcap;
pub mod radio;
pub mod scenario;
pub mod workload;
mod world;

pub use world::{
    Action, AppId, BuildError, IfaceId, LinkId, MacId, NetCounters, NodeId, Role, Simulator,
    MAX_TIMEOUTS_PER_INSTANT,
};
