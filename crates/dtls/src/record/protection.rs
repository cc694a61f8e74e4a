//! Writing one record, plain or protected (RFC 5246 §6.2.3.3, RFC 6347 §4.1.2.1), with a
//! Connection ID when the peer asked for one (RFC 9146 §4: `tls12_cid` outside,
//! DTLSInnerPlaintext inside).

use super::header::{ContentType, RecordHeader, DTLS_1_2, HEADER_LEN};
use crate::crypto::{seal_in_place, DirectionKeys};
use crate::suite::RecordCipher;

/// The epoch-1 keys of one session, oriented for this side.
pub(crate) struct Keys {
    pub cipher: RecordCipher,
    pub read: DirectionKeys,
    pub write: DirectionKeys,
}

/// Record protection for one write: the cipher, the keys, and the peer's Connection ID.
#[derive(Clone, Copy)]
pub(crate) struct Protect<'a> {
    pub cipher: RecordCipher,
    pub keys: &'a DirectionKeys,
    /// The peer's Connection ID (RFC 9146); empty: records without one.
    pub cid: &'a [u8],
}

/// Bytes a record around `plaintext_len` bytes takes on the wire (with a CID: the CID in the
/// header and the real content type after the plaintext).
pub(crate) fn record_len(protect: Option<Protect<'_>>, plaintext_len: usize) -> usize {
    let cid = protect.map_or(0, |p| if p.cid.is_empty() { 0 } else { p.cid.len() + 1 });
    HEADER_LEN + protect.map_or(0, |p| p.cipher.overhead()) + plaintext_len + cid
}

/// Writes one record into `out` (exactly `record_len` bytes long): header, then the
/// plaintext (concatenation of `parts`), protected when `protect` is given.
pub(crate) fn write_record(
    out: &mut [u8],
    content_type: ContentType,
    epoch: u16,
    seq: u64,
    protect: Option<Protect<'_>>,
    parts: &[&[u8]],
) {
    let cid = protect.map_or(&[][..], |p| p.cid);
    // RFC 9146 §4: a record with a CID carries tls12_cid outside and DTLSInnerPlaintext
    // (content, real type, no padding) inside.
    let (outer_type, inner_type_len) =
        if cid.is_empty() { (content_type, 0) } else { (ContentType::Tls12Cid, 1) };
    let plain_len: usize = parts.iter().map(|p| p.len()).sum::<usize>() + inner_type_len;
    let header_len = HEADER_LEN + cid.len();
    let length = out.len() - header_len;
    let header = RecordHeader {
        content_type: outer_type,
        version: DTLS_1_2,
        epoch,
        seq,
        length: length as u16,
        cid_len: cid.len() as u8,
    };
    header.write(&mut out[..header_len], cid);
    let start = match protect {
        Some(_) => {
            out[header_len..header_len + 8].copy_from_slice(&header.epoch_seq().to_be_bytes());
            header_len + 8
        }
        None => header_len,
    };
    let mut pos = start;
    for p in parts {
        out[pos..pos + p.len()].copy_from_slice(p);
        pos += p.len();
    }
    if inner_type_len == 1 {
        out[pos] = content_type as u8;
    }
    if let Some(p) = protect {
        let (payload, tag) = out[start..].split_at_mut(plain_len);
        seal_in_place(p.cipher, p.keys, header.epoch_seq(), outer_type as u8, DTLS_1_2, cid, payload, tag);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record with a CID, opened by hand from its wire bytes with the additional data spelled
    /// out as RFC 9146 §5.3 lists it, so the layout and the AAD do not depend on the code that
    /// wrote them.
    #[test]
    fn connection_id_record_matches_rfc9146_layout_and_additional_data() {
        use ccm::aead::generic_array::GenericArray;
        use ccm::aead::{AeadInPlace, KeyInit};
        let keys = DirectionKeys { key: [7; 16], salt: [1, 2, 3, 4] };
        let cid = [0xc1, 0xd2, 0xe3];
        let protect = Protect { cipher: RecordCipher::Aes128Ccm8, keys: &keys, cid: &cid };
        let content = b"hello";
        let mut out = vec![0u8; record_len(Some(protect), content.len())];
        write_record(&mut out, ContentType::ApplicationData, 1, 0x0102_0304_0506, Some(protect), &[content]);
        // Header: tls12_cid, version, epoch 1, sequence number, CID, length.
        assert_eq!(out[0], 25);
        assert_eq!(&out[1..3], &[0xfe, 0xfd]);
        assert_eq!(&out[3..11], &[0, 1, 1, 2, 3, 4, 5, 6]);
        assert_eq!(&out[11..14], &cid);
        let length = u16::from_be_bytes([out[14], out[15]]) as usize;
        assert_eq!(length, out.len() - 16);
        // Body: 8-byte explicit nonce, then DTLSInnerPlaintext (content + real type) and the tag.
        let explicit = &out[16..24];
        let inner_len = length - 8 - 8;
        assert_eq!(inner_len, content.len() + 1);
        let mut aad = vec![0xff; 8];
        aad.extend_from_slice(&[25, cid.len() as u8, 25, 0xfe, 0xfd]);
        aad.extend_from_slice(&out[3..11]);
        aad.extend_from_slice(&cid);
        aad.extend_from_slice(&(inner_len as u16).to_be_bytes());
        let mut nonce = keys.salt.to_vec();
        nonce.extend_from_slice(explicit);
        let mut body = out[24..24 + inner_len].to_vec();
        let tag = out[24 + inner_len..].to_vec();
        let aead = ccm::Ccm::<aes::Aes128, ccm::consts::U8, ccm::consts::U12>::new(GenericArray::from_slice(
            &keys.key,
        ));
        aead.decrypt_in_place_detached(
            GenericArray::from_slice(&nonce),
            &aad,
            &mut body,
            GenericArray::from_slice(&tag),
        )
        .expect("authenticates under the RFC 9146 additional data");
        assert_eq!(&body[..content.len()], content);
        assert_eq!(body[content.len()], ContentType::ApplicationData as u8);
    }
}
