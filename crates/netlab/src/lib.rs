//! The real-socket testbed of the handover experiments, for tests and the lab (root only):
//! client, router and server in network namespaces joined by veth, nftables NAT, and a userspace
//! relay on a TUN device in the router that delays, loses, duplicates and reorders packets (the
//! kernel here has no netem). Nothing in here is needed to use the drivers of `fastshake-net`.
#![forbid(unsafe_code)]

pub mod relay;
pub mod testbed;
