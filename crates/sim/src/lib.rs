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
//!
//! ```
//! use fastshake_core::Instant;
//! use fastshake_sim::apps::{Echo, Pinger, PingerConfig};
//! use fastshake_sim::link::{LinkConfig, LossModel};
//! use fastshake_sim::{Action, Role, Simulator};
//!
//! let mut sim = Simulator::new(42);
//! let client = sim.add_node("client", Role::Host);
//! let server = sim.add_node("server", Role::Host);
//! let c0 = sim.add_interface(client, "eth0", "10.0.0.2".parse().unwrap()).unwrap();
//! let s0 = sim.add_interface(server, "eth0", "10.0.0.1".parse().unwrap()).unwrap();
//! let wire = LinkConfig { delay_ms: 10.0, loss: LossModel::Bernoulli { p: 0.01 }, ..LinkConfig::default() };
//! sim.connect("wire", c0, s0, wire).unwrap();
//! let config = PingerConfig {
//!     server: "10.0.0.1:7".parse().unwrap(),
//!     count: 20,
//!     interval_ms: 0.0,
//!     payload: 32,
//!     start_ms: 0.0,
//!     retry_ms: Some(100.0), // stop-and-wait, resend after 100 ms
//! };
//! let ping = sim.add_app(client, "ping", 5000, Box::new(Pinger::new(config))).unwrap();
//! sim.add_app(server, "echo", 7, Box::new(Echo::new())).unwrap();
//! sim.schedule(Instant::from_millis(50), Action::InterfaceDown(c0));
//! sim.schedule(Instant::from_millis(250), Action::InterfaceUp(c0));
//! sim.run_until(Instant::from_millis(10_000));
//! let stats = sim.app_stats(ping).unwrap();
//! assert_eq!(stats.replies, 20);
//! assert!(stats.retransmissions >= 1); // the request in flight at 50 ms was lost
//! ```
#![forbid(unsafe_code)]

pub mod apps;
pub mod dist;
mod event;
pub mod fuzzing;
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
