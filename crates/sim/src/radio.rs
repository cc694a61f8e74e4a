//! Radio on-time and energy accounting per node.
