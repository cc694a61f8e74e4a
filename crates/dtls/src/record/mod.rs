//! The DTLS 1.2 record layer (RFC 6347 §4.1): the header, a datagram split into its records,
//! epochs and sequence numbers, the anti-replay window, and the protection of epoch 1 with
//! AEAD ciphers, including `tls12_cid` records (RFC 9146). Beside it, DTLS 1.3's: the unified
//! header and record keys ([`unified`]) and the ACK message ([`ack`]).

pub mod ack;
mod header;
mod layer;
mod layer13;
mod protection;
mod replay;
mod split;
pub mod unified;

pub use header::{ContentType, RecordHeader, DTLS_1_0, DTLS_1_2, HEADER_LEN, MAX_PLAINTEXT, MAX_SEQ};
pub(crate) use layer::{RecordLayer, Unopened};
pub(crate) use layer13::{epoch, Framing, RecordReader13, RecordWriter13, Unopened13};
pub(crate) use protection::{record_len, write_record, Keys, Protect};
pub use replay::ReplayWindow;
pub use split::Records;
pub(crate) use split::SplitRecord;
