//! Duty-cycled MAC models on IEEE 802.15.4 frames: X-MAC, beacon-enabled mode, TSCH.
