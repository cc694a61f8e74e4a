//! boringssl-peer: a DTLS 1.3 (and 1.2) peer on BoringSSL, through the `boring` crate, for
//! fastshake's certificate-compression interop tests: BoringSSL speaks RFC 8879 in DTLS 1.3 (it
//! is Chromium's, which compresses certificates with Brotli).
//!
//!   boringssl-peer server --listen 127.0.0.1:0 --cert CHAIN.pem --key KEY.pem [--ca CA.pem --mutual]
//!                         [--compress zlib,brotli,zstd|none] [--dtls 1.3|1.2]
//!   boringssl-peer client --connect HOST:PORT --ca CA.pem [--server-name NAME]
//!                         [--cert CHAIN.pem --key KEY.pem] [--compress ..] [--dtls ..]
//!
//! `--compress` registers those algorithms in that order (BoringSSL compresses with the first
//! one the peer lists); all three by default. The server says "listening on ADDR" on stderr once bound,
//! serves one client, and echoes every record (also printed on stdout); the client sends each
//! line of stdin as one record and prints the replies. Each prints one line on stderr once its
//! handshake is done: "handshake done: version=.. suite=.. group=.. compressed=ALG|none
//! decompressed=ALG|none datagrams_out=N", where the compression fields name what BoringSSL
//! asked of this program's callbacks: the algorithm it compressed its own chain with and the
//! one the peer's chain came in.

use boring::ssl::{
    CertificateCompressionAlgorithm, CertificateCompressor, SslContext, SslContextBuilder, SslFiletype,
    SslMethod, SslVerifyMode, SslVersion,
};
use boring::x509::store::X509StoreBuilder;
use boring::x509::X509;
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::time::Duration;

/// RFC 8879 code points.
const ZLIB: u16 = 1;
const BROTLI: u16 = 2;
const ZSTD: u16 = 3;

/// What BoringSSL asked of the callbacks (0: nothing).
static COMPRESSED_WITH: AtomicU16 = AtomicU16::new(0);
static DECOMPRESSED_WITH: AtomicU16 = AtomicU16::new(0);
static DATAGRAMS_OUT: AtomicU64 = AtomicU64::new(0);

fn name(code: u16) -> &'static str {
    match code {
        ZLIB => "zlib",
        BROTLI => "brotli",
        ZSTD => "zstd",
        _ => "none",
    }
}

/// Largest certificate message this peer takes decompressed.
const MAX_CERTIFICATE: u64 = 64 * 1024;

struct Zlib;

impl CertificateCompressor for Zlib {
    const ALGORITHM: CertificateCompressionAlgorithm = CertificateCompressionAlgorithm::ZLIB;
    const CAN_COMPRESS: bool = true;
    const CAN_DECOMPRESS: bool = true;

    fn compress<W: Write>(&self, input: &[u8], output: &mut W) -> std::io::Result<()> {
        COMPRESSED_WITH.store(ZLIB, Ordering::Relaxed);
        let mut encoder = flate2::write::ZlibEncoder::new(output, flate2::Compression::best());
        encoder.write_all(input)?;
        encoder.finish().map(|_| ())
    }

    fn decompress<W: Write>(&self, input: &[u8], output: &mut W) -> std::io::Result<()> {
        DECOMPRESSED_WITH.store(ZLIB, Ordering::Relaxed);
        // BoringSSL checks the length it was promised; this bounds what we write.
        let mut out = Vec::new();
        flate2::read::ZlibDecoder::new(input).take(MAX_CERTIFICATE).read_to_end(&mut out)?;
        output.write_all(&out)
    }
}

struct Brotli;

impl CertificateCompressor for Brotli {
    const ALGORITHM: CertificateCompressionAlgorithm = CertificateCompressionAlgorithm::BROTLI;
    const CAN_COMPRESS: bool = true;
    const CAN_DECOMPRESS: bool = true;

    fn compress<W: Write>(&self, input: &[u8], output: &mut W) -> std::io::Result<()> {
        COMPRESSED_WITH.store(BROTLI, Ordering::Relaxed);
        let params = brotli::enc::BrotliEncoderParams { quality: 11, lgwin: 22, ..Default::default() };
        let mut out = Vec::new();
        brotli::BrotliCompress(&mut &input[..], &mut out, &params)?;
        output.write_all(&out)
    }

    fn decompress<W: Write>(&self, input: &[u8], output: &mut W) -> std::io::Result<()> {
        DECOMPRESSED_WITH.store(BROTLI, Ordering::Relaxed);
        let mut out = Vec::new();
        brotli::Decompressor::new(input, 4096).take(MAX_CERTIFICATE).read_to_end(&mut out)?;
        output.write_all(&out)
    }
}

/// Zstandard has no constant in `boring`: registered through the C API.
mod zstd_ffi {
    use super::{COMPRESSED_WITH, DECOMPRESSED_WITH, ZSTD};
    use std::os::raw::c_int;
    use std::sync::atomic::Ordering;

    unsafe extern "C" fn compress(
        _ssl: *mut boring_sys::SSL,
        out: *mut boring_sys::CBB,
        input: *const u8,
        input_len: usize,
    ) -> c_int {
        COMPRESSED_WITH.store(ZSTD, Ordering::Relaxed);
        // SAFETY: BoringSSL passes a valid buffer of `input_len` bytes.
        let input = unsafe { std::slice::from_raw_parts(input, input_len) };
        let Ok(compressed) = zstd::bulk::compress(input, 19) else { return 0 };
        // SAFETY: `out` is BoringSSL's live CBB; the bytes are ours for the call.
        unsafe { boring_sys::CBB_add_bytes(out, compressed.as_ptr(), compressed.len()) }
    }

    unsafe extern "C" fn decompress(
        _ssl: *mut boring_sys::SSL,
        out: *mut *mut boring_sys::CRYPTO_BUFFER,
        uncompressed_len: usize,
        input: *const u8,
        input_len: usize,
    ) -> c_int {
        DECOMPRESSED_WITH.store(ZSTD, Ordering::Relaxed);
        // SAFETY: BoringSSL passes a valid buffer of `input_len` bytes.
        let input = unsafe { std::slice::from_raw_parts(input, input_len) };
        let Ok(plain) = zstd::bulk::decompress(input, uncompressed_len) else { return 0 };
        if plain.len() != uncompressed_len {
            return 0;
        }
        // SAFETY: CRYPTO_BUFFER_new copies the bytes; `out` is BoringSSL's to fill.
        let buffer = unsafe { boring_sys::CRYPTO_BUFFER_new(plain.as_ptr(), plain.len(), std::ptr::null_mut()) };
        if buffer.is_null() {
            return 0;
        }
        unsafe { *out = buffer };
        1
    }

    pub fn register(ctx: &mut super::SslContextBuilder) -> bool {
        // SAFETY: a live context; the callbacks are `'static` functions.
        unsafe {
            boring_sys::SSL_CTX_add_cert_compression_alg(ctx.as_ptr(), ZSTD, Some(compress), Some(decompress)) == 1
        }
    }
}

/// One UDP peer as the byte stream BoringSSL reads and writes: each read is one datagram, each
/// write one datagram (BoringSSL writes a whole packet per call in DTLS).
struct Datagrams {
    socket: UdpSocket,
}

impl Read for Datagrams {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.socket.recv(buf)
    }
}

impl Write for Datagrams {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        DATAGRAMS_OUT.fetch_add(1, Ordering::Relaxed);
        self.socket.send(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[derive(Default)]
struct Options {
    listen: Option<String>,
    connect: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    ca: Option<String>,
    mutual: bool,
    server_name: Option<String>,
    compress: Option<String>,
    dtls: Option<String>,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--listen" => o.listen = Some(value()?),
            "--connect" => o.connect = Some(value()?),
            "--cert" => o.cert = Some(value()?),
            "--key" => o.key = Some(value()?),
            "--ca" => o.ca = Some(value()?),
            "--mutual" => o.mutual = true,
            "--server-name" => o.server_name = Some(value()?),
            "--compress" => o.compress = Some(value()?),
            "--dtls" => o.dtls = Some(value()?),
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(o)
}

fn context(o: &Options, server: bool) -> Result<SslContext, String> {
    fn e(what: &'static str) -> impl Fn(boring::error::ErrorStack) -> String {
        move |err| format!("{what}: {err}")
    }
    let mut ctx = SslContext::builder(SslMethod::dtls()).map_err(e("context"))?;
    let version = match o.dtls.as_deref().unwrap_or("1.3") {
        "1.3" => SslVersion::DTLS1_3,
        "1.2" => SslVersion::DTLS1_2,
        other => return Err(format!("--dtls {other}: 1.3 or 1.2")),
    };
    ctx.set_min_proto_version(Some(version)).map_err(e("version"))?;
    ctx.set_max_proto_version(Some(version)).map_err(e("version"))?;
    if let Some(cert) = &o.cert {
        ctx.set_certificate_chain_file(cert).map_err(e("--cert"))?;
        let key = o.key.as_ref().ok_or("--cert needs --key")?;
        ctx.set_private_key_file(key, SslFiletype::PEM).map_err(e("--key"))?;
    }
    if let Some(ca) = &o.ca {
        let pem = std::fs::read(ca).map_err(|err| format!("--ca {ca}: {err}"))?;
        let mut store = X509StoreBuilder::new().map_err(e("store"))?;
        for cert in X509::stack_from_pem(&pem).map_err(e("--ca"))? {
            store.add_cert(cert).map_err(e("--ca"))?;
        }
        ctx.set_verify_cert_store(store.build()).map_err(e("--ca"))?;
    }
    let mode = match (server, o.mutual, o.ca.is_some()) {
        (true, true, _) => SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT,
        (false, _, true) => SslVerifyMode::PEER,
        _ => SslVerifyMode::NONE,
    };
    ctx.set_verify(mode);
    for algorithm in o.compress.as_deref().unwrap_or("zlib,brotli,zstd").split(',') {
        match algorithm {
            "zlib" => ctx.add_certificate_compression_algorithm(Zlib).map_err(e("zlib"))?,
            "brotli" => ctx.add_certificate_compression_algorithm(Brotli).map_err(e("brotli"))?,
            "zstd" if zstd_ffi::register(&mut ctx) => {}
            "zstd" => return Err("zstd could not be registered".into()),
            "none" | "" => {}
            other => return Err(format!("--compress: unknown algorithm {other}")),
        }
    }
    Ok(ctx.build())
}

fn report(ssl: &boring::ssl::SslRef) {
    eprintln!(
        "handshake done: version={} suite={} group={} compressed={} decompressed={} datagrams_out={}",
        ssl.version_str(),
        ssl.current_cipher().and_then(|c| c.standard_name()).unwrap_or("?"),
        ssl.curve_name().unwrap_or("none"),
        name(COMPRESSED_WITH.load(Ordering::Relaxed)),
        name(DECOMPRESSED_WITH.load(Ordering::Relaxed)),
        DATAGRAMS_OUT.load(Ordering::Relaxed),
    );
}

fn serve(o: &Options) -> Result<(), String> {
    let ctx = context(o, true)?;
    let addr = o.listen.as_deref().unwrap_or("127.0.0.1:0");
    let socket = UdpSocket::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    eprintln!("listening on {}", socket.local_addr().map_err(|e| e.to_string())?);
    // The first datagram names the client; the socket then talks to it alone.
    let mut first = [0u8; 1];
    let (_, client) = socket.peek_from(&mut first).map_err(|e| format!("recv: {e}"))?;
    socket.connect(client).map_err(|e| format!("connect {client}: {e}"))?;
    socket.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    let mut ssl = boring::ssl::Ssl::new(&ctx).map_err(|e| e.to_string())?;
    ssl.set_mtu(1200).map_err(|e| e.to_string())?;
    let mut stream = ssl.accept(Datagrams { socket }).map_err(|e| format!("handshake: {e}"))?;
    report(stream.ssl());
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                std::io::stdout().write_all(&buf[..n]).ok();
                std::io::stdout().flush().ok();
                stream.write_all(&buf[..n]).map_err(|e| format!("write: {e}"))?;
            }
            // The client went quiet: the session is over.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
}

fn connect(o: &Options) -> Result<(), String> {
    let ctx = context(o, false)?;
    let target = o.connect.as_deref().ok_or("client needs --connect")?;
    let peer: SocketAddr = target
        .to_socket_addrs()
        .map_err(|e| format!("{target}: {e}"))?
        .next()
        .ok_or_else(|| format!("{target}: no address"))?;
    let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    socket.connect(peer).map_err(|e| e.to_string())?;
    socket.set_read_timeout(Some(Duration::from_secs(30))).map_err(|e| e.to_string())?;
    let mut ssl = boring::ssl::Ssl::new(&ctx).map_err(|e| e.to_string())?;
    ssl.set_mtu(1200).map_err(|e| e.to_string())?;
    if let Some(name) = &o.server_name {
        ssl.set_hostname(name).map_err(|e| e.to_string())?;
        ssl.param_mut().set_host(name).map_err(|e| e.to_string())?;
    }
    let mut stream = ssl.connect(Datagrams { socket }).map_err(|e| format!("handshake: {e}"))?;
    report(stream.ssl());
    let mut buf = vec![0u8; 16 * 1024];
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        stream.write_all(format!("{line}\n").as_bytes()).map_err(|e| format!("write: {e}"))?;
        let n = stream.read(&mut buf).map_err(|e| format!("read: {e}"))?;
        std::io::stdout().write_all(&buf[..n]).ok();
        std::io::stdout().flush().ok();
    }
    let _ = stream.shutdown();
    Ok(())
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.split_first() {
        Some((mode, rest)) if mode == "server" => parse(rest).and_then(|o| serve(&o)),
        Some((mode, rest)) if mode == "client" => parse(rest).and_then(|o| connect(&o)),
        _ => Err("usage: boringssl-peer server|client [options]".into()),
    };
    if let Err(e) = result {
        eprintln!("boringssl-peer: {e}");
        std::process::exit(1);
    }
}
