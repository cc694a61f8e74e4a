//! A server's listening address, held by this process alone unless the operator says otherwise.
//!
//! Workers of one server share their port with SO_REUSEPORT, and TCS binds temporary sockets on
//! it later. But the kernel lets *any* process of the same user join such a port, and then hands
//! new peers to either process at random: a second server started by mistake on the same address
//! would silently take half the clients. So after binding, a server counts the sockets on its
//! address (`/proc/net/udp`, `/proc/net/udp6`, per network namespace) and refuses with "address in
//! use" when there are more than its own, unless [`PortSharing::WithOtherProcesses`] was asked for.
//!
//! Counting covers a server that starts second. A server that starts first cannot stop a later
//! one from joining: its sockets have SO_REUSEPORT, for its own workers. So it also marks the
//! address as its own ([`ExclusiveClaim`]), and a server asked to share looks for that mark and
//! refuses to join an address whose holder did not ask to share it.
#![forbid(unsafe_code)]

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

/// Whether processes other than this one may listen on a server's address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PortSharing {
    /// This process alone: an address another socket holds is refused with `AddrInUse`.
    #[default]
    Exclusive,
    /// Other processes that ask for it too may listen on the address (SO_REUSEPORT): the kernel
    /// spreads new peers over every process's sockets by address and port.
    WithOtherProcesses,
}

/// Most tries to find a free port for a server on port 0 whose first pick another socket took
/// meanwhile.
const PORT_ATTEMPTS: usize = 8;

/// Binds `count` (at least one) sockets on `addr` with SO_REUSEPORT, so that they and later
/// sockets of this process (TCS) share it; port 0 means one free port for all. With
/// [`PortSharing::Exclusive`], fails with `AddrInUse` when any other socket holds the address.
pub(crate) fn bind_reusable(addr: SocketAddr, count: usize, sharing: PortSharing) -> io::Result<Listeners> {
    let count = count.max(1);
    if sharing == PortSharing::WithOtherProcesses {
        let sockets = bind_all(addr, count)?;
        let bound = sockets[0].local_addr()?.as_socket().unwrap_or(addr);
        // Looked for after binding: a holder that marks its address after this look counts its
        // sockets after marking, finds these and refuses itself.
        if let Some(holder) = claimed_by_another(bound) {
            return Err(io::Error::new(io::ErrorKind::AddrInUse, HeldExclusively { holder }));
        }
        return Ok(Listeners { sockets, claim: None });
    }
    let mut last_error = None;
    for _ in 0..PORT_ATTEMPTS {
        // A socket bound with SO_REUSEPORT to port 0 may be given a port another such socket of
        // this user holds; a plain socket is given a port nobody holds.
        let target = if addr.port() == 0 { free_port(addr)? } else { addr };
        let sockets = match bind_all(target, count) {
            Ok(sockets) => sockets,
            Err(error) if error.kind() == io::ErrorKind::AddrInUse && addr.port() == 0 => {
                last_error = Some(error);
                continue;
            }
            Err(error) => return Err(in_use_error(target, error)),
        };
        // Marked before counting (see `WithOtherProcesses` above for why in this order).
        let claim = match ExclusiveClaim::take(target) {
            Ok(claim) => claim,
            Err(error) if error.kind() == io::ErrorKind::AddrInUse && addr.port() == 0 => {
                last_error = Some(error);
                continue;
            }
            Err(error) => return Err(in_use_error(target, error)),
        };
        match sockets_on(target) {
            Some(found) if found > count => {
                drop(sockets);
                let error = io::Error::new(
                    io::ErrorKind::AddrInUse,
                    SharedByAnother { addr: target, others: found - count },
                );
                if addr.port() != 0 {
                    return Err(error);
                }
                last_error = Some(error);
            }
            // No /proc to count with: what the kernel refused is all that can be refused.
            _ => return Ok(Listeners { sockets, claim: claim.map(Arc::new) }),
        }
    }
    Err(last_error.unwrap_or_else(|| io::Error::from(io::ErrorKind::AddrInUse)))
}

/// A server's listening sockets, and its mark on their address when it holds it alone.
#[derive(Debug)]
pub(crate) struct Listeners {
    pub sockets: Vec<socket2::Socket>,
    /// Kept by every listener, so the mark goes with the last of them.
    pub claim: Option<Arc<ExclusiveClaim>>,
}

/// An address held by a server that did not ask to share it, marked by an abstract Unix socket
/// named after it. The mark is as private as the address: it lives in the server's network
/// namespace and goes with the socket, however the process ends (no file is left behind).
#[derive(Debug)]
pub(crate) struct ExclusiveClaim {
    #[cfg(target_os = "linux")]
    _mark: std::os::unix::net::UnixDatagram,
}

/// The start of every mark's name; the port and the IP address follow.
const CLAIM_PREFIX: &str = "fastshake.udp-exclusive.";

impl ExclusiveClaim {
    /// Marks `addr` as held alone; `AddrInUse` when another server holds it so already. `None`
    /// where there are no abstract sockets to mark with.
    fn take(addr: SocketAddr) -> io::Result<Option<ExclusiveClaim>> {
        #[cfg(target_os = "linux")]
        {
            use std::os::linux::net::SocketAddrExt;
            let name = format!("{CLAIM_PREFIX}{}.{}", addr.port(), addr.ip());
            let mark = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
            Ok(Some(ExclusiveClaim { _mark: std::os::unix::net::UnixDatagram::bind_addr(&mark)? }))
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = addr;
            Ok(None)
        }
    }
}

/// The address of a mark on one that overlaps `addr`, from `/proc/net/unix` (which shows an
/// abstract name as `@name`); `None` when there is none, or no such table.
fn claimed_by_another(addr: SocketAddr) -> Option<SocketAddr> {
    let table = std::fs::read_to_string("/proc/net/unix").ok()?;
    table.lines().skip(1).filter_map(|line| line.split_whitespace().nth(7)).find_map(|path| {
        let (port, ip) = path.strip_prefix('@')?.strip_prefix(CLAIM_PREFIX)?.split_once('.')?;
        let held = SocketAddr::new(ip.parse().ok()?, port.parse().ok()?);
        (held.port() == addr.port() && overlaps(held.ip(), addr.ip())).then_some(held)
    })
}

fn bind_all(addr: SocketAddr, count: usize) -> io::Result<Vec<socket2::Socket>> {
    let first = crate::mobility::reusable_udp_socket(addr)?;
    let bound = first.local_addr()?.as_socket().unwrap_or(addr);
    let mut sockets = vec![first];
    for _ in 1..count {
        sockets.push(crate::mobility::reusable_udp_socket(bound)?);
    }
    Ok(sockets)
}

/// A port on `addr`'s IP that no socket holds now.
fn free_port(addr: SocketAddr) -> io::Result<SocketAddr> {
    std::net::UdpSocket::bind(addr)?.local_addr()
}

/// The kernel's own "in use", with the address and the way to share it on purpose.
fn in_use_error(addr: SocketAddr, error: io::Error) -> io::Error {
    if error.kind() != io::ErrorKind::AddrInUse {
        return error;
    }
    io::Error::new(io::ErrorKind::AddrInUse, SharedByAnother { addr, others: 1 })
}

/// Why a server refused its address.
#[derive(Debug)]
struct SharedByAnother {
    addr: SocketAddr,
    others: usize,
}

impl fmt::Display for SharedByAnother {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "address already in use: {} other socket(s) listen on {} (to share the port with other \
             processes on purpose, start every one of them with --reuse-port)",
            self.others, self.addr
        )
    }
}

impl std::error::Error for SharedByAnother {}

/// Why a server asked to share its address refused it.
#[derive(Debug)]
struct HeldExclusively {
    holder: SocketAddr,
}

impl fmt::Display for HeldExclusively {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "address already in use: a server that did not ask to share it listens on {} (to share \
             the port, start every server on it with --reuse-port)",
            self.holder
        )
    }
}

impl std::error::Error for HeldExclusively {}

/// How many UDP sockets of this network namespace hold `addr` (or a wildcard that covers it),
/// from `/proc/net/udp` and `/proc/net/udp6`; `None` where neither can be read.
pub(crate) fn sockets_on(addr: SocketAddr) -> Option<usize> {
    let tables: Vec<String> =
        ["/proc/net/udp", "/proc/net/udp6"].iter().filter_map(|p| std::fs::read_to_string(p).ok()).collect();
    if tables.is_empty() {
        return None;
    }
    Some(
        tables
            .iter()
            .flat_map(|table| table.lines().skip(1))
            .filter_map(local_address)
            .filter(|held| held.port() == addr.port() && overlaps(held.ip(), addr.ip()))
            .count(),
    )
}

/// The local address of one line of `/proc/net/udp{,6}`: `sl local_address rem_address ...`,
/// the address as the kernel's 32-bit words in host byte order, then `:PORT` in hex.
fn local_address(line: &str) -> Option<SocketAddr> {
    let field = line.split_whitespace().nth(1)?;
    let (ip_hex, port_hex) = field.split_once(':')?;
    let port = u16::from_str_radix(port_hex, 16).ok()?;
    let mut bytes = Vec::with_capacity(16);
    for word in ip_hex.as_bytes().chunks(8) {
        let word = u32::from_str_radix(std::str::from_utf8(word).ok()?, 16).ok()?;
        bytes.extend_from_slice(&word.to_ne_bytes());
    }
    let ip = match bytes.len() {
        4 => IpAddr::V4(Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3])),
        16 => {
            let octets: [u8; 16] = bytes.try_into().ok()?;
            let v6 = Ipv6Addr::from(octets);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether a socket bound to `held` takes datagrams meant for `ours` (or the other way round):
/// the same address, or a wildcard of either.
fn overlaps(held: IpAddr, ours: IpAddr) -> bool {
    held == ours || held.is_unspecified() || ours.is_unspecified()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_addresses_as_the_kernel_writes_them() {
        // 127.0.0.1:6001 and [::1]:6001 as /proc/net/udp{,6} print them on a little-endian host.
        let v4 =
            "  1: 0100007F:1771 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2";
        let v6 = "  2: 00000000000000000000000001000000:1771 00000000000000000000000000000000:0000 07 0 0";
        if cfg!(target_endian = "little") {
            assert_eq!(local_address(v4), Some("127.0.0.1:6001".parse().unwrap()));
            assert_eq!(local_address(v6), Some("[::1]:6001".parse().unwrap()));
        }
        assert_eq!(local_address("  sl  local_address rem_address"), None);
        assert_eq!(local_address("garbage"), None);
    }

    #[test]
    fn counts_the_sockets_it_binds_and_refuses_a_taken_address() {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let ours = bind_reusable(loopback, 3, PortSharing::Exclusive).unwrap();
        let addr = ours.sockets[0].local_addr().unwrap().as_socket().unwrap();
        assert_ne!(addr.port(), 0);
        assert_eq!(sockets_on(addr), Some(3));
        // Another server on the same address: refused, whether it would share or not, for
        // ours did not ask to share...
        let error = bind_reusable(addr, 1, PortSharing::Exclusive).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert!(error.to_string().contains("--reuse-port"), "{error}");
        let error = bind_reusable(addr, 2, PortSharing::WithOtherProcesses).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert!(error.to_string().contains("did not ask to share it listens on"), "{error}");
        // ... also on the wildcard address, which would take ours' peers too...
        let wildcard = SocketAddr::from((Ipv4Addr::UNSPECIFIED, addr.port()));
        assert!(bind_reusable(wildcard, 1, PortSharing::WithOtherProcesses).is_err());
        // ... and their sockets are gone again, so the address is still held by ours alone.
        assert_eq!(sockets_on(addr), Some(3));
        drop(ours);
        assert_eq!(sockets_on(addr), Some(0));
        // Once the holder has gone, its mark has too.
        assert_eq!(claimed_by_another(addr), None);
    }

    #[test]
    fn servers_that_all_ask_to_share_share() {
        let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let first = bind_reusable(loopback, 2, PortSharing::WithOtherProcesses).unwrap();
        let addr = first.sockets[0].local_addr().unwrap().as_socket().unwrap();
        let joined = bind_reusable(addr, 2, PortSharing::WithOtherProcesses).unwrap();
        assert_eq!(sockets_on(addr), Some(4));
        // One that would hold it alone is refused.
        assert!(bind_reusable(addr, 1, PortSharing::Exclusive).is_err());
        assert_eq!(sockets_on(addr), Some(4));
        drop((first, joined));
    }

    #[test]
    fn a_plain_socket_on_the_address_is_refused_too() {
        let plain = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = plain.local_addr().unwrap();
        let error = bind_reusable(addr, 2, PortSharing::Exclusive).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert!(error.to_string().contains(&addr.to_string()), "{error}");
    }
}
