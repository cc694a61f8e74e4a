//! The operating system's randomness, drawn here for the engines (which never read it
//! themselves): RNG seeds, cookie keys and ticket keys.

use fastshake_dtls::{TicketKey, TicketKeys};
use rand_core::{OsRng, RngCore};

/// A fresh 32-byte seed from the operating system, for one engine's RNG.
pub fn os_seed() -> [u8; 32] {
    let mut seed = [0u8; 32];
    OsRng.fill_bytes(&mut seed);
    seed
}

/// The DTLS 1.3 early-data register every worker of one server shares, under a random origin
/// no other server (another node of a fleet, this one restarted) has.
pub(super) fn os_early_data_register() -> std::sync::Arc<fastshake_dtls::EarlyDataRegister> {
    let mut origin = [0u8; 8];
    OsRng.fill_bytes(&mut origin);
    std::sync::Arc::new(fastshake_dtls::EarlyDataRegister::new(origin))
}

/// A fresh cookie key from the operating system.
pub(super) fn os_cookie_key() -> [u8; 16] {
    let mut key = [0u8; 16];
    OsRng.fill_bytes(&mut key);
    key
}

/// A fresh ticket key from the operating system, with a random id.
pub fn os_ticket_key() -> TicketKey {
    let mut key = [0u8; 16];
    OsRng.fill_bytes(&mut key);
    TicketKey::new(OsRng.next_u32(), key)
}

/// Ticket keys for a server: one fresh key from the operating system, no previous key.
pub fn os_ticket_keys() -> TicketKeys {
    let mut key = [0u8; 16];
    OsRng.fill_bytes(&mut key);
    TicketKeys::new(OsRng.next_u32(), key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_seeds_differ() {
        assert_ne!(os_seed(), os_seed());
    }
}
