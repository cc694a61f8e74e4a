//! X.509 for fastshake: chain validation against trust anchors, certified keys that sign, a test PKI.
#![forbid(unsafe_code)]
