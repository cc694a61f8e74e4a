//! Userspace delay relay: holds every packet of a TUN device for a fixed delay, then writes it back.
