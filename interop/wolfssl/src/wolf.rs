//! The only unsafe code of the peer: a small safe face on wolfSSL's C API (through wolfssl-sys).
//! Datagrams go through our own IO callbacks, so a session runs over a UDP socket or over
//! in-memory queues alike, and we see every datagram (to notice a HelloRetryRequest).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, OnceLock};
use std::time::Duration;
use wolfssl_sys as sys;

const SUCCESS: c_int = sys::WOLFSSL_SUCCESS as c_int;
const WANT_READ: c_int = sys::WOLFSSL_ERROR_WANT_READ as c_int;
const WANT_WRITE: c_int = sys::WOLFSSL_ERROR_WANT_WRITE as c_int;
const ZERO_RETURN: c_int = sys::WOLFSSL_ERROR_ZERO_RETURN as c_int;
const APP_DATA_READY: c_int = sys::wolfSSL_ErrorCodes_APP_DATA_READY as c_int;
const CBIO_WANT_READ: c_int = sys::IOerrors_WOLFSSL_CBIO_ERR_WANT_READ as c_int;
const CBIO_GENERAL: c_int = sys::IOerrors_WOLFSSL_CBIO_ERR_GENERAL as c_int;
const PEM: c_int = sys::WOLFSSL_FILETYPE_PEM as c_int;

/// Where a session's datagrams go and come from.
pub trait Datagrams {
    fn send(&mut self, datagram: &[u8]) -> std::io::Result<()>;
    /// The next datagram, or None when none is waiting.
    fn recv(&mut self) -> Option<Vec<u8>>;
    /// Waits up to `timeout` for a datagram; whether one is waiting.
    fn wait(&mut self, timeout: Duration) -> bool;
    /// A stable identity of the peer's address, which DTLS 1.2 cookies are bound to.
    fn peer_id(&self) -> Vec<u8>;
    /// Connection IDs: the CID our records carry inbound (RFC 9146 §6 lets such a record come
    /// from a new address).
    fn expect_cid(&mut self, _cid: Vec<u8>) {}
    /// Called once wolfSSL deprotected application data: the session follows the address the
    /// last datagram handed to wolfSSL came from; returns it when that is a new one.
    fn follow_sender(&mut self) -> Option<String> {
        None
    }
    /// A client moves to a new local port; returns the new address.
    fn rebind(&mut self) -> Result<String, String> {
        Err("this transport cannot move".into())
    }
}

/// `-v`: every datagram's size and first record on stderr.
pub static TRACE: AtomicBool = AtomicBool::new(false);

fn trace(arrow: &str, datagram: &[u8]) {
    if TRACE.load(Ordering::Relaxed) {
        let head: Vec<String> = datagram.iter().take(16).map(|b| format!("{b:02x}")).collect();
        eprintln!("wolfssl-peer: {arrow} {} B: {}", datagram.len(), head.join(""));
    }
}

/// The state our IO callbacks reach through wolfSSL's IO context pointer.
struct Io {
    transport: Box<dyn Datagrams>,
    hrr: bool,
}

/// The SHA-256 of "HelloRetryRequest": the random of a ServerHello that is an HRR (RFC 8446 §4.1.3).
const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2,
    0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// Whether a datagram carries a plaintext HelloRetryRequest (a DTLSPlaintext handshake record).
fn carries_hrr(mut datagram: &[u8]) -> bool {
    while datagram.len() >= 13 {
        let length = usize::from(u16::from_be_bytes([datagram[11], datagram[12]]));
        let Some(body) = datagram.get(13..13 + length) else { return false };
        // Handshake header: type, length(3), message_seq(2), fragment offset(3), fragment length(3).
        let first_fragment = body.len() >= 12 && body[6..9] == [0, 0, 0];
        if datagram[0] == 22 && first_fragment && body[0] == 2 && body.get(14..46) == Some(&HRR_RANDOM[..]) {
            return true;
        }
        datagram = &datagram[13 + length..];
    }
    false
}

/// `ClientHello` in the first record of a datagram (a plaintext handshake record).
pub fn is_client_hello(datagram: &[u8]) -> bool {
    datagram.len() > 13 + 12 && datagram[0] == 22 && datagram[13] == 1
}

unsafe extern "C" fn io_recv(
    _ssl: *mut sys::WOLFSSL,
    buf: *mut c_char,
    size: c_int,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: ctx is the Box<Io> an Ssl installed and keeps alive until wolfSSL_free.
    let io = unsafe { &mut *ctx.cast::<Io>() };
    let Some(datagram) = io.transport.recv() else { return CBIO_WANT_READ };
    trace("<-", &datagram);
    io.hrr |= carries_hrr(&datagram);
    let n = datagram.len().min(usize::try_from(size).unwrap_or(0));
    // SAFETY: wolfSSL hands us a buffer of `size` bytes; we copy at most that many.
    unsafe { ptr::copy_nonoverlapping(datagram.as_ptr(), buf.cast::<u8>(), n) };
    n as c_int
}

unsafe extern "C" fn io_send(
    _ssl: *mut sys::WOLFSSL,
    buf: *mut c_char,
    size: c_int,
    ctx: *mut c_void,
) -> c_int {
    // SAFETY: as in io_recv; buf holds `size` bytes for the duration of the call.
    let (io, datagram) = unsafe {
        (
            &mut *ctx.cast::<Io>(),
            std::slice::from_raw_parts(buf.cast::<u8>(), usize::try_from(size).unwrap_or(0)),
        )
    };
    io.hrr |= carries_hrr(datagram);
    trace("->", datagram);
    match io.transport.send(datagram) {
        Ok(()) => size,
        Err(_) => CBIO_GENERAL,
    }
}

/// DTLS 1.2's HelloVerifyRequest cookie: the peer's address under a per-process secret (our IO
/// has no socket for wolfSSL's own cookie code to ask).
unsafe extern "C" fn gen_cookie(
    ssl: *mut sys::WOLFSSL,
    buf: *mut u8,
    size: c_int,
    _ctx: *mut c_void,
) -> c_int {
    use std::hash::{BuildHasher, Hasher};
    static SECRET: OnceLock<std::collections::hash_map::RandomState> = OnceLock::new();
    // SAFETY: the IO context of every Ssl is its Box<Io> (see io_recv).
    let io = unsafe { &*sys::wolfSSL_GetIOReadCtx(ssl).cast::<Io>() };
    let mut cookie = Vec::new();
    for round in 0u8..4 {
        let mut hasher = SECRET.get_or_init(Default::default).build_hasher();
        hasher.write_u8(round);
        hasher.write(&io.transport.peer_id());
        cookie.extend_from_slice(&hasher.finish().to_be_bytes());
    }
    let n = cookie.len().min(usize::try_from(size).unwrap_or(0));
    // SAFETY: buf holds `size` bytes.
    unsafe { ptr::copy_nonoverlapping(cookie.as_ptr(), buf, n) };
    n as c_int
}

/// The external PSK, one per process.
struct Psk {
    identity: CString,
    key: Vec<u8>,
}
static PSK: OnceLock<Psk> = OnceLock::new();
/// The TLS 1.3 suite a PSK goes with (wolfSSL's name); must outlive every handshake.
static PSK_SUITE: OnceLock<CString> = OnceLock::new();

fn copy_key(key: *mut u8, key_max: c_uint) -> c_uint {
    let Some(psk) = PSK.get() else { return 0 };
    if psk.key.len() > key_max as usize {
        return 0;
    }
    // SAFETY: wolfSSL's key buffer holds key_max bytes.
    unsafe { ptr::copy_nonoverlapping(psk.key.as_ptr(), key, psk.key.len()) };
    psk.key.len() as c_uint
}

unsafe extern "C" fn psk_client(
    _ssl: *mut sys::WOLFSSL,
    _hint: *const c_char,
    identity: *mut c_char,
    id_max: c_uint,
    key: *mut u8,
    key_max: c_uint,
) -> c_uint {
    let Some(psk) = PSK.get() else { return 0 };
    let id = psk.identity.as_bytes_with_nul();
    if id.len() > id_max as usize + 1 {
        return 0;
    }
    // SAFETY: the identity buffer holds id_max + 1 bytes (wolfSSL's MAX_PSK_ID_LEN + NUL).
    unsafe { ptr::copy_nonoverlapping(id.as_ptr().cast::<c_char>(), identity, id.len()) };
    copy_key(key, key_max)
}

unsafe extern "C" fn psk_client_tls13(
    ssl: *mut sys::WOLFSSL,
    hint: *const c_char,
    identity: *mut c_char,
    id_max: c_uint,
    key: *mut u8,
    key_max: c_uint,
    suite: *mut *const c_char,
) -> c_uint {
    // SAFETY: suite points at wolfSSL's out-parameter; PSK_SUITE lives as long as the process.
    unsafe { *suite = PSK_SUITE.get().map_or(ptr::null(), |s| s.as_ptr()) };
    // SAFETY: the same buffers as the classic callback.
    unsafe { psk_client(ssl, hint, identity, id_max, key, key_max) }
}

unsafe extern "C" fn psk_server(
    _ssl: *mut sys::WOLFSSL,
    identity: *const c_char,
    key: *mut u8,
    key_max: c_uint,
) -> c_uint {
    let Some(psk) = PSK.get() else { return 0 };
    // SAFETY: wolfSSL passes the client's identity NUL-terminated.
    if identity.is_null() || unsafe { CStr::from_ptr(identity) } != psk.identity.as_c_str() {
        return 0;
    }
    copy_key(key, key_max)
}

unsafe extern "C" fn psk_server_tls13(
    ssl: *mut sys::WOLFSSL,
    identity: *const c_char,
    key: *mut u8,
    key_max: c_uint,
    suite: *mut *const c_char,
) -> c_uint {
    // SAFETY: as in psk_client_tls13.
    unsafe { *suite = PSK_SUITE.get().map_or(ptr::null(), |s| s.as_ptr()) };
    // SAFETY: the same buffers as the classic callback.
    unsafe { psk_server(ssl, identity, key, key_max) }
}

fn c_string(text: &str) -> Result<CString, String> {
    CString::new(text).map_err(|_| format!("{text:?} contains a NUL"))
}

/// wolfSSL's text for an error code.
fn error_text(code: c_int) -> String {
    let mut buf = [0 as c_char; 128];
    // SAFETY: wolfSSL_ERR_error_string writes at most WOLFSSL_MAX_ERROR_SZ (80) bytes, NUL included.
    unsafe { sys::wolfSSL_ERR_error_string(code.unsigned_abs().into(), buf.as_mut_ptr()) };
    // SAFETY: NUL-terminated above.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned();
    format!("{text} ({code})")
}

fn check(what: &str, ret: c_int) -> Result<(), String> {
    if ret == SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {}", error_text(ret)))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Dtls13,
    Dtls12,
}

/// A WOLFSSL_CTX: the settings every session of a role shares.
pub struct Context {
    ctx: *mut sys::WOLFSSL_CTX,
    pub role: Role,
}

impl Context {
    pub fn new(role: Role, version: Version) -> Result<Context, String> {
        static INIT: Once = Once::new();
        // SAFETY: wolfSSL_Init is called once, before any other call.
        INIT.call_once(|| unsafe {
            sys::wolfSSL_Init();
        });
        // SAFETY: the method functions return static tables; CTX_new takes ownership of them.
        let ctx = unsafe {
            let method = match (role, version) {
                (Role::Client, Version::Dtls13) => sys::wolfDTLSv1_3_client_method(),
                (Role::Server, Version::Dtls13) => sys::wolfDTLSv1_3_server_method(),
                (Role::Client, Version::Dtls12) => sys::wolfDTLSv1_2_client_method(),
                (Role::Server, Version::Dtls12) => sys::wolfDTLSv1_2_server_method(),
            };
            sys::wolfSSL_CTX_new(method)
        };
        if ctx.is_null() {
            return Err("wolfSSL_CTX_new failed".into());
        }
        // SAFETY: ctx is valid; the callbacks are 'static functions of the right types.
        unsafe {
            sys::wolfSSL_CTX_SetIORecv(ctx, Some(io_recv));
            sys::wolfSSL_CTX_SetIOSend(ctx, Some(io_send));
            sys::wolfSSL_CTX_SetGenCookie(ctx, Some(gen_cookie));
            // No peer check unless set_verify below asks for one (PSK has no certificates).
            sys::wolfSSL_CTX_set_verify(ctx, sys::WOLFSSL_VERIFY_NONE as c_int, None);
        }
        Ok(Context { ctx, role })
    }

    /// A PSK for every session of this process: classic callbacks for DTLS 1.2, the TLS 1.3 ones
    /// (which also name the suite the key goes with) for 1.3.
    pub fn use_psk(&self, identity: &str, key: &[u8], suite_13: &str) -> Result<(), String> {
        let psk = Psk { identity: c_string(identity)?, key: key.to_vec() };
        let _ = PSK.set(psk);
        let _ = PSK_SUITE.set(c_string(suite_13)?);
        // SAFETY: ctx is valid; the callbacks are 'static and read only 'static data.
        unsafe {
            match self.role {
                Role::Client => {
                    sys::wolfSSL_CTX_set_psk_client_callback(self.ctx, Some(psk_client));
                    sys::wolfSSL_CTX_set_psk_client_tls13_callback(self.ctx, Some(psk_client_tls13));
                }
                Role::Server => {
                    sys::wolfSSL_CTX_set_psk_server_callback(self.ctx, Some(psk_server));
                    sys::wolfSSL_CTX_set_psk_server_tls13_callback(self.ctx, Some(psk_server_tls13));
                    let hint = c_string(identity)?;
                    check(
                        "wolfSSL_CTX_use_psk_identity_hint",
                        sys::wolfSSL_CTX_use_psk_identity_hint(self.ctx, hint.as_ptr()),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// A server that takes up to `max` bytes of 0-RTT early data and says so in its tickets.
    pub fn accept_early_data(&self, max: u32) -> Result<(), String> {
        // SAFETY: ctx is valid.
        match unsafe { sys::wolfSSL_CTX_set_max_early_data(self.ctx, max) } {
            // 0 on success in this build (no OPENSSL_EXTRA).
            0 => Ok(()),
            error => Err(format!("wolfSSL_CTX_set_max_early_data failed: {}", error_text(error))),
        }
    }

    /// psk_ke: the PSK alone, no (EC)DHE.
    pub fn psk_without_dhe(&self) -> Result<(), String> {
        // SAFETY: ctx is valid.
        match unsafe { sys::wolfSSL_CTX_no_dhe_psk(self.ctx) } {
            // This one says success with 0.
            0 => Ok(()),
            error => Err(format!("wolfSSL_CTX_no_dhe_psk failed: {}", error_text(error))),
        }
    }

    pub fn use_chain(&self, chain: &str, key: &str) -> Result<(), String> {
        let (chain, key) = (c_string(chain)?, c_string(key)?);
        // SAFETY: ctx is valid; the paths are NUL-terminated and wolfSSL only reads them.
        unsafe {
            check("loading --cert", sys::wolfSSL_CTX_use_certificate_chain_file(self.ctx, chain.as_ptr()))?;
            check("loading --key", sys::wolfSSL_CTX_use_PrivateKey_file(self.ctx, key.as_ptr(), PEM))
        }
    }

    /// Checks the peer's chain against `ca`; `require` (a server's --mutual) fails a peer without one.
    pub fn verify_with(&self, ca: &str, require: bool) -> Result<(), String> {
        let ca = c_string(ca)?;
        let mut mode = sys::WOLFSSL_VERIFY_PEER as c_int;
        if require {
            mode |= sys::WOLFSSL_VERIFY_FAIL_IF_NO_PEER_CERT as c_int;
        }
        // SAFETY: ctx is valid; the path is NUL-terminated.
        unsafe {
            check(
                "loading --ca",
                sys::wolfSSL_CTX_load_verify_locations(self.ctx, ca.as_ptr(), ptr::null()),
            )?;
            sys::wolfSSL_CTX_set_verify(self.ctx, mode, None);
        }
        Ok(())
    }

    pub fn set_suites(&self, list: &str) -> Result<(), String> {
        let list = c_string(list)?;
        // SAFETY: ctx is valid; the list is NUL-terminated.
        match unsafe { sys::wolfSSL_CTX_set_cipher_list(self.ctx, list.as_ptr()) } {
            SUCCESS => Ok(()),
            _ => Err(format!(
                "--suite {list:?}: no such suite in this wolfSSL build (or not for this version)"
            )),
        }
    }

    /// The groups offered (supported_groups), in order of preference.
    pub fn set_groups(&self, groups: &[u16]) -> Result<(), String> {
        let mut ids: Vec<c_int> = groups.iter().map(|&g| c_int::from(g)).collect();
        // SAFETY: ctx is valid; ids holds `len` ints, copied by wolfSSL.
        check("wolfSSL_CTX_set_groups", unsafe {
            sys::wolfSSL_CTX_set_groups(self.ctx, ids.as_mut_ptr(), ids.len() as c_int)
        })
    }

    /// A session over `transport`.
    pub fn session(&self, transport: Box<dyn Datagrams>) -> Result<Ssl, String> {
        // SAFETY: ctx is valid and outlives the session (Ssl borrows nothing, but every Context lives
        // until the end of main; wolfSSL reference-counts the CTX besides).
        let ssl = unsafe { sys::wolfSSL_new(self.ctx) };
        if ssl.is_null() {
            return Err("wolfSSL_new failed".into());
        }
        let io = Box::into_raw(Box::new(Io { transport, hrr: false }));
        // SAFETY: ssl is valid; io stays allocated until Ssl's drop, after wolfSSL_free.
        unsafe {
            sys::wolfSSL_SetIOReadCtx(ssl, io.cast());
            sys::wolfSSL_SetIOWriteCtx(ssl, io.cast());
            sys::wolfSSL_dtls_set_using_nonblock(ssl, 1);
            // A server takes a ClientHello that comes in fragments (a post-quantum key share
            // makes it 1.4 kB); off by default in wolfSSL, a no-op for a client.
            sys::wolfSSL_dtls13_allow_ch_frag(ssl, 1);
        }
        Ok(Ssl { ssl, io, resent: 0, read_ahead: Vec::new() })
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: ctx came from wolfSSL_CTX_new; sessions hold their own reference.
        unsafe { sys::wolfSSL_CTX_free(self.ctx) };
    }
}

/// A resumable session (with its ticket) taken from a finished handshake.
pub struct Session(*mut sys::WOLFSSL_SESSION);

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: from wolfSSL_get1_session, which gave us a reference of our own.
        unsafe { sys::wolfSSL_SESSION_free(self.0) };
    }
}

/// What one call into wolfSSL came to.
pub enum Step<T> {
    Done(T),
    /// Needs a datagram first.
    WantRead,
    /// The peer closed (close_notify).
    Closed,
}

/// A WOLFSSL: one session.
pub struct Ssl {
    ssl: *mut sys::WOLFSSL,
    io: *mut Io,
    /// Retransmission rounds our timer set off (wolfSSL_dtls_got_timeout calls).
    pub resent: u32,
    /// Application records that came before the handshake ended (a server that answers
    /// accepted 0-RTT data at once), read then, for the caller.
    pub read_ahead: Vec<Vec<u8>>,
}

impl Ssl {
    fn io(&mut self) -> &mut Io {
        // SAFETY: io is valid until drop; wolfSSL uses it only inside our calls into it.
        unsafe { &mut *self.io }
    }

    fn step<T>(&mut self, what: &str, ret: c_int, done: impl FnOnce(c_int) -> T) -> Result<Step<T>, String> {
        if ret > 0 {
            return Ok(Step::Done(done(ret)));
        }
        // SAFETY: ssl is valid.
        match unsafe { sys::wolfSSL_get_error(self.ssl, ret) } {
            WANT_READ | WANT_WRITE => Ok(Step::WantRead),
            ZERO_RETURN => Ok(Step::Closed),
            error => Err(format!("{what}: {}", error_text(error))),
        }
    }

    /// One go at the handshake (connect or accept by the CTX's side).
    pub fn handshake_step(&mut self, role: Role) -> Result<Step<()>, String> {
        loop {
            // SAFETY: ssl is valid.
            let ret = unsafe {
                match role {
                    Role::Client => sys::wolfSSL_connect(self.ssl),
                    Role::Server => sys::wolfSSL_accept(self.ssl),
                }
            };
            // SAFETY: ssl is valid.
            if ret <= 0 && unsafe { sys::wolfSSL_get_error(self.ssl, ret) } == APP_DATA_READY {
                // wolfSSL hands application data that overtook the handshake's end to a read
                // first; the handshake goes on after it.
                let mut buf = vec![0u8; 1 << 14];
                // SAFETY: ssl is valid; buf holds buf.len() bytes.
                let n = unsafe { sys::wolfSSL_read(self.ssl, buf.as_mut_ptr().cast(), buf.len() as c_int) };
                if n <= 0 {
                    return Err("handshake: application data was announced but none could be read".into());
                }
                buf.truncate(n as usize);
                self.read_ahead.push(buf);
                continue;
            }
            return self.step("handshake", ret, |_| ());
        }
    }

    /// Runs the handshake over a real transport: waits for datagrams, retransmits on wolfSSL's timer.
    pub fn handshake(&mut self, role: Role) -> Result<(), String> {
        loop {
            match self.handshake_step(role)? {
                Step::Done(()) => return Ok(()),
                Step::Closed => return Err("the peer closed during the handshake".into()),
                Step::WantRead => self.wait_or_retransmit()?,
            }
        }
    }

    /// Waits for a datagram for as long as wolfSSL's retransmission timer says, then tells it of the
    /// timeout if none came.
    pub fn wait_or_retransmit(&mut self) -> Result<(), String> {
        let timeout = self.timeout();
        if self.io().transport.wait(timeout) {
            return Ok(());
        }
        self.resent += 1;
        // SAFETY: ssl is valid.
        let ret = unsafe { sys::wolfSSL_dtls_got_timeout(self.ssl) };
        match self.step("retransmission", ret, |_| ())? {
            Step::Closed => Err("the peer closed".into()),
            _ => Ok(()),
        }
    }

    /// wolfSSL's current retransmission timeout (it reports seconds, quartered on DTLS 1.3's hint).
    pub fn timeout(&self) -> Duration {
        // SAFETY: ssl is valid.
        let (seconds, quick) = unsafe {
            (sys::wolfSSL_dtls_get_current_timeout(self.ssl), sys::wolfSSL_dtls13_use_quick_timeout(self.ssl))
        };
        let timeout = Duration::from_secs(seconds.max(1) as u64);
        if quick != 0 {
            timeout / 4
        } else {
            timeout
        }
    }

    pub fn transport(&mut self) -> &mut dyn Datagrams {
        &mut *self.io().transport
    }

    pub fn read(&mut self, buf: &mut [u8]) -> Result<Step<usize>, String> {
        // SAFETY: ssl is valid; buf holds buf.len() bytes.
        let ret = unsafe { sys::wolfSSL_read(self.ssl, buf.as_mut_ptr().cast(), buf.len() as c_int) };
        self.step("read", ret, |n| n as usize)
    }

    pub fn write(&mut self, data: &[u8]) -> Result<(), String> {
        // SAFETY: ssl is valid; data holds data.len() bytes.
        let ret = unsafe { sys::wolfSSL_write(self.ssl, data.as_ptr().cast(), data.len() as c_int) };
        match self.step("write", ret, |_| ())? {
            Step::Done(()) => Ok(()),
            _ => Err("write did not complete".into()),
        }
    }

    /// A client's 0-RTT: sends the ClientHello (of a resumption) and `data` as early data.
    pub fn write_early_data(&mut self, data: &[u8]) -> Result<Step<usize>, String> {
        let mut written: c_int = 0;
        // SAFETY: ssl is valid; data holds data.len() bytes; written is our out-parameter.
        let ret = unsafe {
            sys::wolfSSL_write_early_data(self.ssl, data.as_ptr().cast(), data.len() as c_int, &mut written)
        };
        self.step("write_early_data", ret, |n| n as usize)
    }

    /// A server's accept that takes early data: Done(n) with n bytes of it, Done(0) once no
    /// more can come (the handshake then goes on with `handshake`).
    pub fn read_early_data(&mut self, buf: &mut [u8]) -> Result<Step<usize>, String> {
        let mut read: c_int = 0;
        // SAFETY: ssl is valid; buf holds buf.len() bytes; read is our out-parameter.
        let ret = unsafe {
            sys::wolfSSL_read_early_data(self.ssl, buf.as_mut_ptr().cast(), buf.len() as c_int, &mut read)
        };
        if ret >= 0 {
            return Ok(Step::Done(ret as usize));
        }
        self.step("read_early_data", ret, |n| n as usize)
    }

    /// Whether the handshake is complete.
    pub fn is_done(&self) -> bool {
        // SAFETY: ssl is valid.
        unsafe { sys::wolfSSL_is_init_finished(self.ssl) == 1 }
    }

    /// What became of a client's early data: accepted, rejected or not_sent.
    pub fn early_data_status(&self) -> &'static str {
        // SAFETY: ssl is valid.
        match unsafe { sys::wolfSSL_get_early_data_status(self.ssl) } as u32 {
            sys::WOLFSSL_EARLY_DATA_ACCEPTED => "accepted",
            sys::WOLFSSL_EARLY_DATA_REJECTED => "rejected",
            _ => "not_sent",
        }
    }

    /// Sends a KeyUpdate (DTLS 1.3).
    pub fn update_keys(&mut self) -> Result<(), String> {
        // SAFETY: ssl is valid.
        let ret = unsafe { sys::wolfSSL_update_keys(self.ssl) };
        if ret == SUCCESS || ret == sys::WOLFSSL_ERROR_WANT_WRITE as c_int {
            Ok(())
        } else {
            Err(format!("wolfSSL_update_keys: {}", error_text(ret)))
        }
    }

    /// Sends close_notify (once; no wait for the peer's).
    pub fn shutdown(&mut self) {
        // SAFETY: ssl is valid.
        unsafe { sys::wolfSSL_shutdown(self.ssl) };
    }

    /// The server name to check the peer's certificate against, also sent as SNI.
    pub fn expect_name(&mut self, name: &str) -> Result<(), String> {
        let name_c = c_string(name)?;
        // SAFETY: ssl is valid; wolfSSL copies the name.
        unsafe {
            check("wolfSSL_check_domain_name", sys::wolfSSL_check_domain_name(self.ssl, name_c.as_ptr()))?;
            check(
                "wolfSSL_UseSNI",
                sys::wolfSSL_UseSNI(
                    self.ssl,
                    sys::WOLFSSL_SNI_HOST_NAME as u8,
                    name_c.as_ptr().cast(),
                    name.len() as u16,
                ),
            )
        }
    }

    /// The client's first key share (else wolfSSL picks one itself).
    pub fn key_share(&mut self, group: u16) -> Result<(), String> {
        // SAFETY: ssl is valid.
        check("wolfSSL_UseKeyShare", unsafe { sys::wolfSSL_UseKeyShare(self.ssl, group) })
    }

    /// No HelloRetryRequest cookie exchange on a DTLS 1.3 server.
    pub fn no_hrr_cookie(&mut self) -> Result<(), String> {
        // SAFETY: ssl is valid.
        check("wolfSSL_disable_hrr_cookie", unsafe { sys::wolfSSL_disable_hrr_cookie(self.ssl) })
    }

    /// Negotiates Connection IDs (RFC 9146 / RFC 9147 §9): the peer is to put `cid` on its records.
    pub fn use_cid(&mut self, cid: &[u8]) -> Result<(), String> {
        let mut cid = cid.to_vec();
        // SAFETY: ssl is valid; wolfSSL copies the CID.
        unsafe {
            check("wolfSSL_dtls_cid_use", sys::wolfSSL_dtls_cid_use(self.ssl))?;
            check(
                "wolfSSL_dtls_cid_set",
                sys::wolfSSL_dtls_cid_set(self.ssl, cid.as_mut_ptr(), cid.len() as c_uint),
            )
        }
    }

    /// The CIDs each way, when negotiated: (on what we send, on what we receive).
    pub fn cids(&mut self) -> Option<(Vec<u8>, Vec<u8>)> {
        // SAFETY: ssl is valid; the buffers hold the sizes wolfSSL reported.
        unsafe {
            if sys::wolfSSL_dtls_cid_is_enabled(self.ssl) != 1 {
                return None;
            }
            let mut tx_size: c_uint = 0;
            let mut rx_size: c_uint = 0;
            sys::wolfSSL_dtls_cid_get_tx_size(self.ssl, &mut tx_size);
            sys::wolfSSL_dtls_cid_get_rx_size(self.ssl, &mut rx_size);
            let mut tx = vec![0u8; tx_size as usize];
            let mut rx = vec![0u8; rx_size as usize];
            if tx_size > 0 {
                sys::wolfSSL_dtls_cid_get_tx(self.ssl, tx.as_mut_ptr(), tx_size);
            }
            if rx_size > 0 {
                sys::wolfSSL_dtls_cid_get_rx(self.ssl, rx.as_mut_ptr(), rx_size);
            }
            Some((tx, rx))
        }
    }

    pub fn resume(&mut self, session: &Session) -> Result<(), String> {
        // SAFETY: both valid; wolfSSL copies the session.
        check("wolfSSL_set_session", unsafe { sys::wolfSSL_set_session(self.ssl, session.0) })
    }

    /// The session to resume later, if it holds a ticket yet.
    pub fn ticket_session(&mut self) -> Option<Session> {
        // wolfSSL_SESSION_has_ticket needs OPENSSL_EXTRA; the ticket's length says as much.
        let mut size: u32 = 0;
        // SAFETY: ssl is valid; a null buffer and a zero size ask for the length only.
        unsafe { sys::wolfSSL_get_SessionTicket(self.ssl, ptr::null_mut(), &mut size) };
        if size == 0 {
            return None;
        }
        // SAFETY: ssl is valid; get1 hands us a reference, freed by Session's drop.
        let session = unsafe { sys::wolfSSL_get1_session(self.ssl) };
        (!session.is_null()).then(|| Session(session))
    }

    /// The handshake line's fields.
    pub fn describe(&mut self) -> String {
        let text = |p: *const c_char| {
            if p.is_null() {
                "none".to_string()
            } else {
                // SAFETY: wolfSSL returns static NUL-terminated names.
                unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
            }
        };
        // SAFETY: ssl is valid.
        let (version, suite, group, resumed) = unsafe {
            let suite = sys::wolfSSL_get_current_cipher_suite(self.ssl);
            (
                text(sys::wolfSSL_get_version(self.ssl)),
                text(sys::wolfSSL_get_cipher_name_iana_from_suite((suite >> 8) as u8, suite as u8)),
                text(sys::wolfSSL_get_curve_name(self.ssl)),
                sys::wolfSSL_session_reused(self.ssl) == 1,
            )
        };
        let hrr = self.io().hrr;
        format!(
            "version={version} suite={suite} group={group} hrr={hrr} resumed={resumed} resent={}",
            self.resent
        )
    }
}

impl Drop for Ssl {
    fn drop(&mut self) {
        // SAFETY: ssl came from wolfSSL_new and io from Box::into_raw; wolfSSL is done with io once freed.
        unsafe {
            sys::wolfSSL_free(self.ssl);
            drop(Box::from_raw(self.io));
        }
    }
}
