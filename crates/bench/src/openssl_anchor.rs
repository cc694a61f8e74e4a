//! OpenSSL's DTLS 1.2, both sides in memory: the anchor the engine benchmarks measure beside
//! (`bench handshake`, `bench caching`). Configured like our engine: DTLS 1.2 only, stateful
//! cookie exchange, no tickets, the same MTU.

use anyhow::{bail, Context};
use fastshake_pki::generate::TestPki;
use openssl::pkey::PKey;
use openssl::ssl::{
    ErrorCode, Ssl, SslContext, SslContextBuilder, SslMethod, SslOptions, SslSessionCacheMode, SslStream,
    SslVerifyMode, SslVersion,
};
use openssl::x509::X509;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::rc::Rc;
use std::time::Duration;

pub(crate) const PSK_IDENTITY: &[u8] = b"bench";
pub(crate) const PSK_KEY: [u8; 16] = *b"fastshake-bench!";
pub(crate) const MTU: usize = 1200;

/// A side's chain (leaf first, then intermediates), its PKCS#8 key, and the root its peer trusts.
pub(crate) struct PemChain<'a> {
    pub chain: &'a str,
    pub key: &'a [u8],
    pub root: &'a str,
}

/// One direction of an in-memory datagram link: each write is one datagram, each read returns
/// one whole datagram, an empty queue reads as WouldBlock (as a non-blocking UDP socket does).
pub(crate) struct DatagramPipe {
    inbox: Rc<RefCell<VecDeque<Vec<u8>>>>,
    outbox: Rc<RefCell<VecDeque<Vec<u8>>>>,
    /// Datagrams written so far.
    pub(crate) written: u32,
}

impl Read for DatagramPipe {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.inbox.borrow_mut().pop_front() {
            Some(datagram) => {
                let len = datagram.len().min(buf.len());
                buf[..len].copy_from_slice(&datagram[..len]);
                Ok(len)
            }
            None => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl Write for DatagramPipe {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.outbox.borrow_mut().push_back(buf.to_vec());
        self.written += 1;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// OpenSSL contexts configured like our engine: DTLS 1.2 only, one PSK suite, stateful cookie
/// exchange (HelloVerifyRequest), no session tickets, extended master secret (OpenSSL's
/// default), MTU 1200.
pub(crate) struct OpensslPair {
    client: SslContext,
    server: SslContext,
}

/// The anchor's cookie: a hash over a secret and the (fixed, in-memory) peer, like the keyed MAC
/// over the client's address that `openssl s_server` and our endpoint compute.
fn anchor_cookie() -> [u8; 16] {
    let digest = openssl::sha::sha256(b"cookie-secret|127.0.0.2:1024");
    let mut cookie = [0u8; 16];
    cookie.copy_from_slice(&digest[..16]);
    cookie
}

/// A client and a server context as our engine is configured: DTLS 1.2 only, one suite, no
/// tickets, our MTU rather than the path's.
fn dtls12_contexts(cipher: &str) -> anyhow::Result<(SslContextBuilder, SslContextBuilder)> {
    let mut client = SslContextBuilder::new(SslMethod::dtls())?;
    let mut server = SslContextBuilder::new(SslMethod::dtls())?;
    for ctx in [&mut client, &mut server] {
        ctx.set_min_proto_version(Some(SslVersion::DTLS1_2))?;
        ctx.set_max_proto_version(Some(SslVersion::DTLS1_2))?;
        ctx.set_cipher_list(cipher).with_context(|| format!("OpenSSL does not know {cipher}"))?;
        ctx.set_options(SslOptions::NO_QUERY_MTU | SslOptions::NO_TICKET);
    }
    Ok((client, server))
}

impl OpensslPair {
    pub(crate) fn new(cipher: &str) -> anyhow::Result<Self> {
        let (mut client, mut server) = dtls12_contexts(cipher)?;
        client.set_psk_client_callback(|_ssl, _hint, identity, psk| {
            identity[..PSK_IDENTITY.len()].copy_from_slice(PSK_IDENTITY);
            identity[PSK_IDENTITY.len()] = 0; // a C string
            psk[..PSK_KEY.len()].copy_from_slice(&PSK_KEY);
            Ok(PSK_KEY.len())
        });
        server.set_psk_server_callback(|_ssl, identity, psk| {
            if identity != Some(PSK_IDENTITY) {
                return Ok(0);
            }
            psk[..PSK_KEY.len()].copy_from_slice(&PSK_KEY);
            Ok(PSK_KEY.len())
        });
        add_anchor_cookies(&mut server);
        Ok(OpensslPair { client: client.build(), server: server.build() })
    }

    /// OpenSSL contexts for a certificate suite: the server sends `pki`'s server chain, the client
    /// validates it against the root and checks the name `localhost` (as our client does);
    /// with `mutual`, the server requires and validates the client's chain too. No tickets, no
    /// session cache: every handshake is a full one.
    pub(crate) fn with_certificates(cipher: &str, pki: &TestPki, mutual: bool) -> anyhow::Result<Self> {
        let server = PemChain {
            chain: &pki.server_chain_pem(),
            key: pki.server.key_pem.as_bytes(),
            root: pki.ca_pem(),
        };
        let client_chain = pki.client_chain_pem();
        let client =
            PemChain { chain: &client_chain, key: pki.client.key_pem.as_bytes(), root: pki.ca_pem() };
        Self::with_chains(cipher, &server, mutual.then_some(&client))
    }

    /// [`Self::with_certificates`] with each side's chain, key and root given apart (the two
    /// chains may come from different PKIs); `client` set means mutual authentication.
    pub(crate) fn with_chains(
        cipher: &str,
        server_chain: &PemChain<'_>,
        client_chain: Option<&PemChain<'_>>,
    ) -> anyhow::Result<Self> {
        let (mut client, mut server) = dtls12_contexts(cipher)?;
        for ctx in [&mut client, &mut server] {
            ctx.set_session_cache_mode(SslSessionCacheMode::OFF);
        }
        client.cert_store_mut().add_cert(X509::from_pem(server_chain.root.as_bytes())?)?;
        load_chain(&mut server, server_chain.chain, server_chain.key)?;
        client.set_verify(SslVerifyMode::PEER);
        client.verify_param_mut().set_host("localhost")?;
        if let Some(c) = client_chain {
            server.cert_store_mut().add_cert(X509::from_pem(c.root.as_bytes())?)?;
            load_chain(&mut client, c.chain, c.key)?;
            server.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        }
        add_anchor_cookies(&mut server);
        Ok(OpensslPair { client: client.build(), server: server.build() })
    }

    pub(crate) fn handshake(&self) -> anyhow::Result<OpensslSession> {
        let to_server = Rc::new(RefCell::new(VecDeque::new()));
        let to_client = Rc::new(RefCell::new(VecDeque::new()));
        let mut client_ssl = Ssl::new(&self.client)?;
        client_ssl.set_connect_state();
        client_ssl.set_mtu(MTU as u32)?;
        let mut server_ssl = Ssl::new(&self.server)?;
        server_ssl.set_accept_state();
        server_ssl.set_mtu(MTU as u32)?;
        let mut client = SslStream::new(
            client_ssl,
            DatagramPipe { inbox: Rc::clone(&to_client), outbox: Rc::clone(&to_server), written: 0 },
        )?;
        let mut server = SslStream::new(
            server_ssl,
            DatagramPipe { inbox: Rc::clone(&to_server), outbox: to_client, written: 0 },
        )?;
        let (mut client_done, mut server_done) = (false, false);
        for _ in 0..16 {
            if !client_done {
                client_done = step(client.do_handshake(), "client")?;
            }
            if !server_done {
                server_done = step(server.do_handshake(), "server")?;
            }
            if client_done && server_done {
                return Ok(OpensslSession { client, server, to_server });
            }
        }
        bail!("the OpenSSL in-memory handshake stalled")
    }

    pub(crate) fn rate(&self, slice: Duration) -> anyhow::Result<f64> {
        let start = std::time::Instant::now();
        let mut count: u64 = 0;
        while start.elapsed() < slice {
            for _ in 0..64 {
                self.handshake()?;
                count += 1;
            }
        }
        Ok(count as f64 / start.elapsed().as_secs_f64())
    }
}

/// The stateless-looking cookie exchange (HelloVerifyRequest) of our endpoint, on an OpenSSL server.
fn add_anchor_cookies(server: &mut SslContextBuilder) {
    server.set_options(SslOptions::COOKIE_EXCHANGE);
    server.set_cookie_generate_cb(|_ssl, out| {
        let cookie = anchor_cookie();
        out[..cookie.len()].copy_from_slice(&cookie);
        Ok(cookie.len())
    });
    server.set_cookie_verify_cb(|_ssl, cookie| openssl::memcmp::eq(cookie, &anchor_cookie()));
}

/// Our certificate (leaf first, then intermediates) and its PKCS#8 key into an OpenSSL context.
fn load_chain(ctx: &mut SslContextBuilder, chain_pem: &str, key_pem: &[u8]) -> anyhow::Result<()> {
    let mut chain = X509::stack_from_pem(chain_pem.as_bytes())?.into_iter();
    let leaf = chain.next().context("an empty certificate chain")?;
    ctx.set_certificate(&leaf)?;
    for intermediate in chain {
        ctx.add_extra_chain_cert(intermediate)?;
    }
    let key = PKey::private_key_from_pem(key_pem)?;
    ctx.set_private_key(&key)?;
    ctx.check_private_key()?;
    Ok(())
}

/// An established OpenSSL DTLS pair in memory.
pub(crate) struct OpensslSession {
    pub(crate) client: SslStream<DatagramPipe>,
    pub(crate) server: SslStream<DatagramPipe>,
    /// Datagrams on their way to the server.
    to_server: Rc<RefCell<VecDeque<Vec<u8>>>>,
}

impl OpensslSession {
    /// SSL_write for `count` records, then SSL_read them; returns (write MB/s, read MB/s).
    pub(crate) fn throughput(&mut self, size: usize, count: usize) -> anyhow::Result<(f64, f64)> {
        let data = vec![0x42u8; size];
        let start = std::time::Instant::now();
        for _ in 0..count {
            self.client.ssl_write(&data)?;
        }
        let write_secs = start.elapsed().as_secs_f64();
        if self.to_server.borrow().len() != count {
            bail!("OpenSSL wrote {} datagrams for {count} records", self.to_server.borrow().len());
        }
        let mut buf = vec![0u8; size + 64];
        let mut read = 0usize;
        let start = std::time::Instant::now();
        for _ in 0..count {
            read += self.server.ssl_read(&mut buf)?;
        }
        let read_secs = start.elapsed().as_secs_f64();
        if read != size * count {
            bail!("OpenSSL read {read} bytes of {}", size * count);
        }
        let megabytes = (size * count) as f64 / 1e6;
        Ok((megabytes / write_secs, megabytes / read_secs))
    }
}

/// Whether a handshake step finished; waiting for the peer is not an error.
fn step(result: Result<(), openssl::ssl::Error>, side: &str) -> anyhow::Result<bool> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.code() == ErrorCode::WANT_READ || e.code() == ErrorCode::WANT_WRITE => Ok(false),
        Err(e) => bail!("OpenSSL {side} handshake failed: {e}"),
    }
}
