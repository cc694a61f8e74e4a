//! The DTLS 1.3 ACK message (RFC 9147 §7): the record numbers of the handshake records a peer
//! received, so that only the others are sent again. It travels in records of its own content
//! type (26), protected like application data once keys exist.

use fastshake_core::codec::{put_u16, put_u64, DecodeError, Reader};

/// Record content type `ack` (RFC 9147 §7, IANA TLS ContentType 26).
pub const CONTENT_ACK: u8 = 26;

/// Bytes of one record number on the wire: a 64-bit epoch and a 64-bit sequence number.
const RECORD_NUMBER_LEN: usize = 16;

/// A record's number: its epoch and its sequence number in that epoch (RFC 9147 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RecordNumber {
    /// The epoch, widened to 64 bits.
    pub epoch: u64,
    /// The sequence number in the epoch.
    pub seq: u64,
}

/// An ACK's body as received: the record numbers it names, read one at a time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ack<'a> {
    numbers: &'a [u8],
}

impl<'a> Ack<'a> {
    /// Reads an ACK body (`record_numbers<0..2^16-1>`). A list whose length is not a whole
    /// number of record numbers, or that is followed by anything, is a decode_error.
    pub fn parse(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let numbers = r.vec16()?;
        r.finish()?;
        if numbers.len() % RECORD_NUMBER_LEN != 0 {
            return Err(DecodeError::Invalid("ACK record_numbers"));
        }
        Ok(Ack { numbers })
    }

    /// How many record numbers the ACK names.
    pub fn len(&self) -> usize {
        self.numbers.len() / RECORD_NUMBER_LEN
    }

    /// Whether it names none (an empty ACK, which RFC 9147 §7.1 sends to say "nothing since").
    pub fn is_empty(&self) -> bool {
        self.numbers.is_empty()
    }

    /// The record numbers in the order sent (§7 asks for increasing order; a receiver must not
    /// rely on it).
    pub fn numbers(&self) -> impl Iterator<Item = RecordNumber> + 'a {
        self.numbers.chunks_exact(RECORD_NUMBER_LEN).map(|n| {
            let (epoch, seq) = n.split_at(8);
            RecordNumber {
                epoch: u64::from_be_bytes(epoch.try_into().expect("8 bytes")),
                seq: u64::from_be_bytes(seq.try_into().expect("8 bytes")),
            }
        })
    }
}

/// The most record numbers one ACK can name (its list has a 16-bit length).
pub const MAX_ACKED: usize = (u16::MAX as usize) / RECORD_NUMBER_LEN;

/// Appends an ACK body naming `numbers` (sorted and without repeats, as §7 asks) to `out`; at
/// most [`MAX_ACKED`] of them, the lowest, fit.
pub fn write_ack(out: &mut Vec<u8>, numbers: &[RecordNumber]) {
    let mut sorted = numbers.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    sorted.truncate(MAX_ACKED);
    put_u16(out, (sorted.len() * RECORD_NUMBER_LEN) as u16);
    for n in sorted {
        put_u64(out, n.epoch);
        put_u64(out, n.seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_empty_ack_is_two_bytes() {
        let mut out = Vec::new();
        write_ack(&mut out, &[]);
        assert_eq!(out, [0, 0]);
        let ack = Ack::parse(&out).unwrap();
        assert!(ack.is_empty());
        assert_eq!(ack.numbers().count(), 0);
    }

    #[test]
    fn the_wire_form_is_epoch_then_sequence_number_big_endian() {
        let mut out = Vec::new();
        write_ack(&mut out, &[RecordNumber { epoch: 2, seq: 0x0102 }]);
        assert_eq!(out, [0, 16, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 1, 2]);
    }

    #[test]
    fn a_ragged_or_padded_list_is_refused() {
        assert!(Ack::parse(&[0, 15]).is_err(), "shorter than its length");
        let mut ragged = vec![0, 15];
        ragged.extend_from_slice(&[0; 15]);
        assert!(Ack::parse(&ragged).is_err(), "15 bytes are no record number");
        let mut padded = Vec::new();
        write_ack(&mut padded, &[RecordNumber { epoch: 0, seq: 1 }]);
        padded.push(0);
        assert!(Ack::parse(&padded).is_err(), "a byte after the list");
        assert!(Ack::parse(&[]).is_err());
    }

    #[test]
    fn more_numbers_than_fit_keep_the_lowest() {
        let many: Vec<_> =
            (0..MAX_ACKED as u64 + 10).rev().map(|seq| RecordNumber { epoch: 3, seq }).collect();
        let mut out = Vec::new();
        write_ack(&mut out, &many);
        let ack = Ack::parse(&out).unwrap();
        assert_eq!(ack.len(), MAX_ACKED);
        assert_eq!(ack.numbers().last(), Some(RecordNumber { epoch: 3, seq: MAX_ACKED as u64 - 1 }));
    }

    proptest! {
        #[test]
        fn an_ack_reads_back_sorted_and_without_repeats(
            numbers in proptest::collection::vec((0u64..5, any::<u64>()), 0..50),
        ) {
            let numbers: Vec<_> = numbers.into_iter().map(|(epoch, seq)| RecordNumber { epoch, seq }).collect();
            let mut out = Vec::new();
            write_ack(&mut out, &numbers);
            let read: Vec<_> = Ack::parse(&out).unwrap().numbers().collect();
            let mut expected = numbers.clone();
            expected.sort_unstable();
            expected.dedup();
            prop_assert_eq!(read, expected);
        }
    }
}
