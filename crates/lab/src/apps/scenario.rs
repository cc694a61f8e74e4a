//! The engine apps a scenario file can name: [`engine_apps`] turns `[[app]]` entries of the kinds
//! below into DTLS and SCTP apps for [`fastshake_sim::scenario::Scenario::build_with`] (and
//! `run_with`); `ping` and `echo` it leaves to the simulator. Every engine seed is drawn from the
//! simulator's RNG, so a run is reproducible from the scenario's seed.
//!
//! | kind | settings (default) |
//! | --- | --- |
//! | `dtls-server` | `dtls` (`"1.2"`), `groups`, `suite` (`psk`), `psk_identity` (`sensor-1`), `psk` (hex, `00112233…eeff`), `mobility` (`standard`), `session_ports_from` (50000), `tickets` (true), `client_auth` (`require`), `echo` (true), `mtu`, `retransmit_ms`, `handshake_timeout_s` |
//! | `dtls-client` | `server` (required), `dtls`, `groups`, `suite`, `psk_identity`, `psk`, `mobility`, `sessions` (1), `resume` (false), `records` (1), `record_len` (32), `record_interval_ms` (0), `record_rto_ms` (1000), `max_record_rto_ms` (16000), `stall_after_s` (300), `start_ms` (0), `close` (true), `mtu`, `retransmit_ms`, `handshake_timeout_s` |
//! | `sctp-server` | `sctp_port` (5001), `handshake` (`both`), `cookieless` (false), `zero_rtt` (true), `echo` (true), `rto_initial_ms`, `rto_min_ms`, `mtu` |
//! | `sctp-client` | `server` (required), `server_port` (5001), `sctp_port` (5000), `handshake` (`alt`), `associations` (1), `messages` (1), `message_len` (32), `zero_rtt` (false), `cache_cookie` (false), `start_ms` (0), `interval_ms` (1000), `rto_initial_ms`, `rto_min_ms`, `mtu` |
//!
//! DTLS (the engine of `fastshake_dtls`):
//! - `dtls`: the version, `"1.2"` (RFC 6347, the default), `"1.3"` (RFC 9147) or `"both"` (a
//!   server: 1.3 with clients that offer it; a client: offers both in one ClientHello). A 1.3
//!   handshake's kind in the summary has a `dtls13-` prefix (`dtls13-full`).
//! - `suite`: `psk` (`TLS_PSK_WITH_AES_128_CCM_8`, RFC 7925), `psk-gcm`, `ecdsa`
//!   (`TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8` with the lab's fixed test PKI: chains of 3, P-256,
//!   validated at a fixed date), `ecdsa-gcm`, or an IANA name. Client and server name the same one.
//!   In DTLS 1.3 the same names pick the credentials and the AEAD: `psk` and `ecdsa`
//!   `TLS_AES_128_CCM_8_SHA256` (the 1.2 suites' AEAD, so a comparison changes the version
//!   only), `psk-gcm` and `ecdsa-gcm` `TLS_AES_128_GCM_SHA256`; or a DTLS 1.3 IANA name, with
//!   the PSK.
//! - `groups` (DTLS 1.3 only): key-exchange groups, most preferred first, of `x25519mlkem768`,
//!   `x25519`, `secp256r1`. A client sends a key share for the first (default
//!   `["x25519", "secp256r1"]`; `[]` with a PSK: psk_ke, no (EC)DHE, RFC 8446 §4.2.9); a server
//!   asks a client for the first it supports with a HelloRetryRequest (default: all, the hybrid
//!   first).
//! - `mobility`: `standard`, `ipc`, `tcs` or `cid` (seed 001, RFC 9146): the engine's `Mobility`
//!   is `MobilityMode::client_mobility` / `server_mobility`, and a server carries out
//!   `MobilityMode::socket_action` on simulated ports from `session_ports_from` on.
//! - A client runs `sessions` sessions one after another, each from a fresh UDP port (the app's
//!   `port`, then the next…); with `resume`, each is followed by one resuming it with the ticket
//!   (RFC 5077) it gave (the server's `tickets`; without them, by session ID), so it plans
//!   2 × `sessions` handshakes. Each session sends `records` requests one at a time and waits for
//!   each echo, resending on a doubling timer; a request unanswered for `stall_after_s` fails
//!   the session. `record_interval_ms` spaces the requests, so a session lasts across what the
//!   scenario's events do to the network.
//! - `retransmit_ms` and `handshake_timeout_s` set the handshake's first retransmission timeout
//!   (engine default 1 s; tinyDTLS uses 2 s on duty-cycled links) and how long a handshake may
//!   take (60 s).
//!
//! SCTP over UDP encapsulation (the engine of `fastshake_sctp`; the app's `port` is the UDP
//! port, 9899 by RFC 6951):
//! - server `handshake`: `both` (regular and seed 004's alternative), `regular`, `alt-only`;
//!   `cookieless` opens an association on an INIT with an empty ALT-COOKIE (no cookie round
//!   trip); `zero_rtt` accepts data in the INIT (ALT-DATA).
//! - client `handshake`: `alt` (offers ALT-COOKIE) or `regular`. Association `k` runs from SCTP
//!   port `sctp_port + k`; `zero_rtt` puts the first message in the INIT, `cache_cookie` offers
//!   the ALT-COOKIE of an earlier association (one round trip). Each association sends
//!   `messages` messages one at a time, each after the echo of the one before, then shuts down;
//!   the next opens `interval_ms` later.

use super::dtls_client::{DtlsClientLoop, SeedTemplate, SessionPlan};
use super::dtls_server::DtlsEchoServer;
use super::sctp_client::{SctpClientLoop, SctpPlan};
use super::sctp_server::SctpEchoServer;
use crate::pki::{LabPki, WALL_CLOCK};
use fastshake_core::Instant;
use fastshake_dtls::dtls13::Suite13;
use fastshake_dtls::{
    CipherSuite, ClientAuth, ClientConfig, MobilityMode, NamedGroup, ServerConfig, TicketKeys, Versions,
};
use fastshake_sctp::{Config as SctpConfig, HandshakeMode};
use fastshake_sim::apps::App;
use fastshake_sim::dist::ms_to_ns;
use fastshake_sim::scenario::{AppSpec, ScenarioError};
use fastshake_sim::Simulator;
use serde::Deserialize;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The app kinds [`engine_apps`] makes.
pub const KINDS: [&str; 4] = ["dtls-server", "dtls-client", "sctp-server", "sctp-client"];

/// The default pre-shared key, as in the README's examples.
const DEFAULT_PSK_IDENTITY: &str = "sensor-1";
const DEFAULT_PSK: &str = "00112233445566778899aabbccddeeff";
/// The server name in the test PKI's server certificate.
const SERVER_NAME: &str = "localhost";
/// The key of the tickets a server issues (one key: a simulated run never rotates it).
const TICKET_KEY: [u8; 16] = [0x7c; 16];

/// Makes the engine app `spec` names, `None` for a kind it does not know (see the module
/// documentation). Pass it to `Scenario::build_with` or `Scenario::run_with`.
pub fn engine_apps(spec: &AppSpec, sim: &mut Simulator) -> Result<Option<Box<dyn App>>, ScenarioError> {
    let mut seed = [0u8; 32];
    let app: Box<dyn App> = match spec.kind.as_str() {
        "dtls-server" => {
            let s: DtlsServerSettings = spec.settings_as()?;
            sim.rng().fill_bytes(&mut seed);
            let mode = s.common().mode(spec)?;
            let config = s.config(spec, mode)?;
            let server = DtlsEchoServer::new(config, seed, s.echo).map_err(|e| bad(spec, e.to_string()))?;
            Box::new(server.with_mobility(mode, s.session_ports_from))
        }
        "dtls-client" => {
            let s: DtlsClientSettings = spec.settings_as()?;
            sim.rng().fill_bytes(&mut seed);
            let config = s.config(spec)?;
            let plan = SessionPlan {
                server: s.server,
                base_port: spec.port,
                sessions: s.sessions,
                resume: s.resume,
                early_data: false,
                records: s.records,
                record_len: s.record_len,
                move_mid_session: false,
                close: s.close,
                record_rto: ms(s.record_rto_ms).max(Duration::from_millis(1)),
                max_record_rto: ms(s.max_record_rto_ms).max(Duration::from_millis(1)),
                stall_after: secs(s.stall_after_s),
                first_start: Instant::from_nanos(ms_to_ns(s.start_ms)),
                seeds: SeedTemplate(seed),
            };
            Box::new(DtlsClientLoop::new(config, plan).with_record_interval(ms(s.record_interval_ms)))
        }
        "sctp-server" => {
            let s: SctpServerSettings = spec.settings_as()?;
            sim.rng().fill_bytes(&mut seed);
            let mode = match s.handshake.as_str() {
                "both" => HandshakeMode::Both,
                "regular" => HandshakeMode::Regular,
                "alt-only" => HandshakeMode::AltOnly,
                other => return Err(bad(spec, format!("handshake `{other}`: both, regular or alt-only"))),
            };
            let config = SctpConfig {
                local_port: s.sctp_port,
                listen: true,
                mode,
                cookieless: s.cookieless,
                accept_alt_data: s.zero_rtt,
                ..s.engine()
            };
            Box::new(SctpEchoServer::new(fastshake_sctp::Endpoint::new(Arc::new(config), seed), s.echo))
        }
        "sctp-client" => {
            let s: SctpClientSettings = spec.settings_as()?;
            sim.rng().fill_bytes(&mut seed);
            let mode = match s.handshake.as_str() {
                "alt" => HandshakeMode::Both,
                "regular" => HandshakeMode::Regular,
                other => return Err(bad(spec, format!("handshake `{other}`: alt or regular"))),
            };
            let plan = SctpPlan {
                server: s.server,
                server_port: s.server_port,
                base_port: s.sctp_port,
                associations: s.associations,
                messages: s.messages,
                message_len: s.message_len,
                zero_rtt: s.zero_rtt,
                cache_cookie: s.cache_cookie,
                first_start: Instant::from_nanos(ms_to_ns(s.start_ms)),
                interval: ms(s.interval_ms),
                config: SctpConfig { mode, ..s.engine() },
                seeds: SeedTemplate(seed),
            };
            Box::new(SctpClientLoop::new(plan, spec.port))
        }
        _ => return Ok(None),
    };
    Ok(Some(app))
}

fn bad(spec: &AppSpec, what: String) -> ScenarioError {
    ScenarioError::Format(format!("app on `{}` ({}): {what}", spec.node, spec.kind))
}

fn ms(ms: f64) -> Duration {
    Duration::from_nanos(ms_to_ns(ms))
}

fn secs(s: f64) -> Duration {
    ms(s * 1000.0)
}

fn yes() -> bool {
    true
}

/// What both DTLS kinds take: the version, groups, suite, its key, the mobility strategy and
/// engine timers.
#[derive(Debug)]
struct DtlsCommon<'a> {
    /// As written: any TOML value, so a version written as a number is refused by name.
    dtls: Option<&'a toml::Value>,
    groups: Option<&'a [String]>,
    suite: &'a str,
    psk_identity: Option<&'a str>,
    /// Hex.
    psk: Option<&'a str>,
    mobility: Option<&'a str>,
    mtu: Option<usize>,
    retransmit_ms: Option<f64>,
    handshake_timeout_s: Option<f64>,
}

/// A DTLS kind's settings: the fields of [`DtlsCommon`], then the kind's own (serde's `flatten`
/// and `deny_unknown_fields` do not go together, so the common fields are written into each
/// struct here, once).
macro_rules! dtls_settings {
    (struct $name:ident { $($(#[$meta:meta])* $field:ident: $ty:ty,)* }) => {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $name {
            #[serde(default)]
            dtls: Option<toml::Value>,
            #[serde(default)]
            groups: Option<Vec<String>>,
            #[serde(default = "default_suite")]
            suite: String,
            #[serde(default)]
            psk_identity: Option<String>,
            #[serde(default)]
            psk: Option<String>,
            #[serde(default)]
            mobility: Option<String>,
            #[serde(default)]
            mtu: Option<usize>,
            #[serde(default)]
            retransmit_ms: Option<f64>,
            #[serde(default)]
            handshake_timeout_s: Option<f64>,
            $($(#[$meta])* $field: $ty,)*
        }

        impl $name {
            fn common(&self) -> DtlsCommon<'_> {
                DtlsCommon {
                    dtls: self.dtls.as_ref(),
                    groups: self.groups.as_deref(),
                    suite: &self.suite,
                    psk_identity: self.psk_identity.as_deref(),
                    psk: self.psk.as_deref(),
                    mobility: self.mobility.as_deref(),
                    mtu: self.mtu,
                    retransmit_ms: self.retransmit_ms,
                    handshake_timeout_s: self.handshake_timeout_s,
                }
            }
        }
    };
}

fn default_suite() -> String {
    "psk".into()
}

/// A DTLS side's credentials, from the suite.
enum Credentials {
    Psk { identity: Vec<u8>, key: Vec<u8> },
    Certificate(LabPki),
}

impl DtlsCommon<'_> {
    /// `dtls`: the versions the app speaks.
    fn versions(&self, spec: &AppSpec) -> Result<Versions, ScenarioError> {
        let Some(value) = self.dtls else { return Ok(Versions::Dtls12) };
        match value.as_str() {
            Some("1.2") => Ok(Versions::Dtls12),
            Some("1.3") => Ok(Versions::Dtls13),
            Some("both") => Ok(Versions::Both),
            _ => Err(bad(spec, format!("dtls = {value}: accepted values are \"1.2\", \"1.3\" and \"both\""))),
        }
    }

    /// `groups`, or the engine's default for the role (DTLS 1.3 only).
    fn groups(&self, spec: &AppSpec, versions: Versions) -> Result<Option<Vec<NamedGroup>>, ScenarioError> {
        let Some(names) = self.groups else { return Ok(None) };
        if !versions.dtls13() {
            return Err(bad(
                spec,
                "groups: DTLS 1.3 key-exchange groups, for dtls = \"1.3\" or \"both\"".into(),
            ));
        }
        let group = |name: &String| {
            NamedGroup::WITH_HYBRID.into_iter().find(|g| g.name() == name).ok_or_else(|| {
                bad(spec, format!("groups: unknown group `{name}`: x25519mlkem768, x25519 or secp256r1"))
            })
        };
        names.iter().map(group).collect::<Result<_, _>>().map(Some)
    }

    /// The DTLS 1.2 suite `suite` names, and with `versions` including 1.3 the DTLS 1.3 one.
    fn suites(
        &self,
        spec: &AppSpec,
        versions: Versions,
    ) -> Result<(CipherSuite, Option<Suite13>), ScenarioError> {
        let short = match self.suite {
            "psk" => Some((CipherSuite::PskWithAes128Ccm8, Suite13::Aes128Ccm8Sha256)),
            "psk-gcm" => Some((CipherSuite::PskWithAes128GcmSha256, Suite13::Aes128GcmSha256)),
            "ecdsa" => Some((CipherSuite::EcdheEcdsaWithAes128Ccm8, Suite13::Aes128Ccm8Sha256)),
            "ecdsa-gcm" => Some((CipherSuite::EcdheEcdsaWithAes128GcmSha256, Suite13::Aes128GcmSha256)),
            _ => None,
        };
        if let Some((suite, suite13)) = short {
            return Ok((suite, versions.dtls13().then_some(suite13)));
        }
        let name = self.suite;
        if let Some(suite13) = Suite13::from_iana_name(name) {
            if !versions.dtls13() {
                return Err(bad(spec, format!("suite `{name}` is a DTLS 1.3 suite: set dtls = \"1.3\"")));
            }
            // A DTLS 1.3 suite names no credentials: the PSK's 1.2 suite stands beside it.
            return Ok((CipherSuite::PskWithAes128Ccm8, Some(suite13)));
        }
        let suite = CipherSuite::from_iana_name(name).ok_or_else(|| {
            let names = if versions.dtls13() {
                "psk, psk-gcm, ecdsa, ecdsa-gcm or a DTLS 1.3 IANA name"
            } else {
                "psk, psk-gcm, ecdsa, ecdsa-gcm or an IANA name"
            };
            bad(spec, format!("suite `{name}`: {names}"))
        })?;
        if versions == Versions::Dtls13 {
            return Err(bad(
                spec,
                format!("suite `{name}` is a DTLS 1.2 suite: with dtls = \"1.3\" psk, psk-gcm, ecdsa, ecdsa-gcm or a DTLS 1.3 IANA name"),
            ));
        }
        if suite == CipherSuite::EcdheRsaWithAes128GcmSha256 {
            return Err(bad(spec, "the lab's test PKI has ECDSA keys only".into()));
        }
        Ok((suite, versions.dtls13().then_some(Suite13::Aes128Ccm8Sha256)))
    }

    fn credentials(&self, spec: &AppSpec, suite: CipherSuite) -> Result<Credentials, ScenarioError> {
        if suite.is_psk() {
            let identity = self.psk_identity.unwrap_or(DEFAULT_PSK_IDENTITY).as_bytes().to_vec();
            let key = hex::decode(self.psk.unwrap_or(DEFAULT_PSK))
                .map_err(|e| bad(spec, format!("psk is not hex: {e}")))?;
            return Ok(Credentials::Psk { identity, key });
        }
        if self.psk_identity.is_some() || self.psk.is_some() {
            return Err(bad(spec, format!("suite `{}` takes no PSK", self.suite)));
        }
        LabPki::kept().map(Credentials::Certificate).map_err(|e| bad(spec, format!("test PKI: {e:#}")))
    }

    fn mode(&self, spec: &AppSpec) -> Result<MobilityMode, ScenarioError> {
        self.mobility.map_or(Ok(MobilityMode::Standard), |m| m.parse().map_err(|e| bad(spec, e)))
    }

    /// `mtu`, first retransmission timeout and handshake timeout, where given.
    fn engine(&self) -> (Option<usize>, Option<Duration>, Option<Duration>) {
        (self.mtu, self.retransmit_ms.map(ms), self.handshake_timeout_s.map(secs))
    }
}

dtls_settings! {
    struct DtlsServerSettings {
        #[serde(default = "yes")]
        tickets: bool,
        #[serde(default = "default_client_auth")]
        client_auth: String,
        #[serde(default = "yes")]
        echo: bool,
        #[serde(default = "default_session_ports")]
        session_ports_from: u16,
    }
}

fn default_client_auth() -> String {
    "require".into()
}

fn default_session_ports() -> u16 {
    50_000
}

impl DtlsServerSettings {
    fn config(&self, spec: &AppSpec, mode: MobilityMode) -> Result<Arc<ServerConfig>, ScenarioError> {
        let common = self.common();
        let versions = common.versions(spec)?;
        let (suite, suite13) = common.suites(spec, versions)?;
        let mut config = match common.credentials(spec, suite)? {
            Credentials::Psk { identity, key } => {
                ServerConfig { versions: Versions::Dtls12, ..ServerConfig::psk(identity, key) }
            }
            Credentials::Certificate(pki) => {
                let mut config =
                    ServerConfig { versions: Versions::Dtls12, ..ServerConfig::certificate(pki.server) };
                config.client_auth = match self.client_auth.as_str() {
                    "require" => ClientAuth::Require,
                    "optional" => ClientAuth::Optional,
                    "none" => ClientAuth::None,
                    other => {
                        return Err(bad(spec, format!("client_auth `{other}`: require, optional or none")))
                    }
                };
                config.client_trust_anchors = Some(pki.anchors);
                config.wall_clock = Some(WALL_CLOCK);
                config
            }
        };
        config.suites = vec![suite];
        config.versions = versions;
        config.suites13 = suite13.map_or(config.suites13, |s| vec![s]);
        config.groups = common.groups(spec, versions)?.unwrap_or(config.groups);
        config.mobility = mode.server_mobility();
        if self.tickets {
            config.tickets = Some(TicketKeys::new(1, TICKET_KEY));
        }
        let (mtu, retransmit, timeout) = common.engine();
        config.mtu = mtu.unwrap_or(config.mtu);
        config.initial_retransmit = retransmit.unwrap_or(config.initial_retransmit);
        config.handshake_timeout = timeout.unwrap_or(config.handshake_timeout);
        config.validate().map_err(|e| bad(spec, e.to_string()))?;
        Ok(Arc::new(config))
    }
}

dtls_settings! {
    struct DtlsClientSettings {
        server: SocketAddr,
        #[serde(default = "one")]
        sessions: u32,
        #[serde(default)]
        resume: bool,
        #[serde(default = "one_record")]
        records: u16,
        #[serde(default = "default_len")]
        record_len: usize,
        #[serde(default)]
        record_interval_ms: f64,
        #[serde(default = "default_rto")]
        record_rto_ms: f64,
        #[serde(default = "default_max_rto")]
        max_record_rto_ms: f64,
        #[serde(default = "default_stall")]
        stall_after_s: f64,
        #[serde(default)]
        start_ms: f64,
        #[serde(default = "yes")]
        close: bool,
    }
}

fn one() -> u32 {
    1
}
fn one_record() -> u16 {
    1
}
fn default_len() -> usize {
    32
}
fn default_rto() -> f64 {
    1000.0
}
fn default_max_rto() -> f64 {
    16_000.0
}
fn default_stall() -> f64 {
    300.0
}

impl DtlsClientSettings {
    fn config(&self, spec: &AppSpec) -> Result<Arc<ClientConfig>, ScenarioError> {
        let common = self.common();
        let versions = common.versions(spec)?;
        let (suite, suite13) = common.suites(spec, versions)?;
        let mut config = match common.credentials(spec, suite)? {
            Credentials::Psk { identity, key } => {
                ClientConfig { versions: Versions::Dtls12, ..ClientConfig::psk(identity, key) }
            }
            Credentials::Certificate(pki) => {
                let mut config = ClientConfig {
                    versions: Versions::Dtls12,
                    ..ClientConfig::certificate(pki.anchors, Some(SERVER_NAME.into()))
                };
                config.certified_key = Some(pki.client);
                config.wall_clock = Some(WALL_CLOCK);
                config
            }
        };
        config.suites = vec![suite];
        config.versions = versions;
        config.suites13 = suite13.map_or(config.suites13, |s| vec![s]);
        config.groups = common.groups(spec, versions)?.unwrap_or(config.groups);
        config.mobility = common.mode(spec)?.client_mobility();
        let (mtu, retransmit, timeout) = common.engine();
        config.mtu = mtu.unwrap_or(config.mtu);
        config.initial_retransmit = retransmit.unwrap_or(config.initial_retransmit);
        config.handshake_timeout = timeout.unwrap_or(config.handshake_timeout);
        config.validate().map_err(|e| bad(spec, e.to_string()))?;
        Ok(Arc::new(config))
    }
}

/// SCTP engine timers and packet size, where given.
fn sctp_engine(rto_initial_ms: Option<f64>, rto_min_ms: Option<f64>, mtu: Option<usize>) -> SctpConfig {
    let default = SctpConfig::default();
    SctpConfig {
        rto_initial: rto_initial_ms.map_or(default.rto_initial, ms),
        rto_min: rto_min_ms.map_or(default.rto_min, ms),
        mtu: mtu.unwrap_or(default.mtu),
        ..default
    }
}

/// An SCTP kind's settings: the kind's own, then the engine's timers and MTU (see
/// `dtls_settings!` for why a macro), which `engine` turns into the engine's configuration.
macro_rules! sctp_settings {
    (struct $name:ident { $($(#[$meta:meta])* $field:ident: $ty:ty,)* }) => {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $name {
            $($(#[$meta])* $field: $ty,)*
            #[serde(default)]
            rto_initial_ms: Option<f64>,
            #[serde(default)]
            rto_min_ms: Option<f64>,
            #[serde(default)]
            mtu: Option<usize>,
        }

        impl $name {
            fn engine(&self) -> SctpConfig {
                sctp_engine(self.rto_initial_ms, self.rto_min_ms, self.mtu)
            }
        }
    };
}

sctp_settings! {
    struct SctpServerSettings {
        #[serde(default = "default_sctp_server_port")]
        sctp_port: u16,
        #[serde(default = "default_server_handshake")]
        handshake: String,
        #[serde(default)]
        cookieless: bool,
        #[serde(default = "yes")]
        zero_rtt: bool,
        #[serde(default = "yes")]
        echo: bool,
    }
}

fn default_sctp_server_port() -> u16 {
    5001
}
fn default_server_handshake() -> String {
    "both".into()
}

sctp_settings! {
    struct SctpClientSettings {
        server: SocketAddr,
        #[serde(default = "default_sctp_server_port")]
        server_port: u16,
        #[serde(default = "default_sctp_client_port")]
        sctp_port: u16,
        #[serde(default = "default_client_handshake")]
        handshake: String,
        #[serde(default = "one")]
        associations: u32,
        #[serde(default = "one")]
        messages: u32,
        #[serde(default = "default_len")]
        message_len: usize,
        #[serde(default)]
        zero_rtt: bool,
        #[serde(default)]
        cache_cookie: bool,
        #[serde(default)]
        start_ms: f64,
        #[serde(default = "default_interval")]
        interval_ms: f64,
    }
}

fn default_sctp_client_port() -> u16 {
    5000
}
fn default_client_handshake() -> String {
    "alt".into()
}
fn default_interval() -> f64 {
    1000.0
}
