//! Headless Chromium opens data channels to `fastshake webrtc serve` and gets every message
//! echoed once and intact: DTLS 1.3 with the X25519MLKEM768 hybrid by default, DTLS 1.2 when
//! the server asks for it; a reliable, an unreliable and a 64 KiB channel, each closed by
//! resetting its stream, and a channel opened again under the first one's label.
//!
//! The browser and the server run in a network namespace of their own whose only interface is
//! loopback (`unshare -n`): Chromium then reaches nothing else, and gathers loopback candidates
//! only with `--allow-loopback-in-peer-connection`. The page reports its result to the server
//! (`POST /report`), which prints it and exits.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Whether this process may make a network namespace (root, or user namespaces allowed).
fn can_unshare() -> bool {
    Command::new("unshare").args(["-n", "true"]).status().is_ok_and(|s| s.success())
}

/// What one page load printed: the server's lines and the page's report.
struct Run {
    server: String,
    report: Value,
    /// The browser's stdout and stderr (its log, with `--enable-logging=stderr`).
    browser: String,
}

/// Runs the server with `server_args` and the page with `query` in a namespace of their own.
fn run(server_args: &[&str], query: &str) -> Option<Run> {
    run_with(server_args, &[], query)
}

/// [`run`] with extra browser flags.
fn run_with(server_args: &[&str], browser_args: &[&str], query: &str) -> Option<Run> {
    let Some(browser) = fastshake_interop::chromium() else {
        assert!(
            std::env::var_os("FASTSHAKE_REQUIRE_CHROMIUM").is_none(),
            "FASTSHAKE_REQUIRE_CHROMIUM is set but no chromium is on the PATH"
        );
        eprintln!("no chromium on the PATH (apt-get install chromium): the WebRTC browser tests are skipped");
        return None;
    };
    if !can_unshare() {
        assert!(
            std::env::var_os("FASTSHAKE_REQUIRE_CHROMIUM").is_none(),
            "FASTSHAKE_REQUIRE_CHROMIUM is set but `unshare -n` fails here (not root?)"
        );
        eprintln!("cannot make a network namespace (not root?): the WebRTC browser tests are skipped");
        return None;
    }
    let version = Command::new(&browser).arg("--version").output().ok();
    if let Some(v) = version {
        eprintln!("browser: {}", String::from_utf8_lossy(&v.stdout).trim());
    }
    let profile = tempdir();
    // The namespace is the test's own, so a fixed port cannot collide with anything.
    let script = format!(
        r#"set -e
ip link set lo up
"$FASTSHAKE" webrtc serve --http 127.0.0.1:8080 --until-reports 1 {args} &
server=$!
for i in $(seq 1 100); do (exec 3<>/dev/tcp/127.0.0.1/8080) 2>/dev/null && break; sleep 0.05; done
"$BROWSER" --headless --no-sandbox --disable-gpu --no-first-run --use-fake-ui-for-media-stream \
    --allow-loopback-in-peer-connection --user-data-dir="$PROFILE" {browser_args} \
    "http://127.0.0.1:8080/?report&{query}" >"$PROFILE/chromium.log" 2>&1 &
browser=$!
status=0
wait $server || status=$?
kill $browser 2>/dev/null || true
wait $browser 2>/dev/null || true
exit $status
"#,
        args = server_args.join(" "),
        browser_args = browser_args.join(" "),
    );
    let mut child = Command::new("timeout")
        .args(["120", "unshare", "-n", "bash", "-c", &script])
        .env("FASTSHAKE", env!("CARGO_BIN_EXE_fastshake"))
        .env("BROWSER", &browser)
        .env("PROFILE", &profile)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash");
    let started = std::time::Instant::now();
    let output = loop {
        if child.try_wait().expect("wait").is_some() || started.elapsed() > Duration::from_secs(130) {
            break child.wait_with_output().expect("output");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let server = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let log = std::fs::read_to_string(profile.join("chromium.log")).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&profile);
    let report = server
        .lines()
        .find_map(|l| l.strip_prefix("report: "))
        .unwrap_or_else(|| panic!("no report from the page\nserver:\n{server}\n{stderr}\nchromium:\n{log}"));
    let report: Value = serde_json::from_str(report).expect("the report is JSON");
    assert!(output.status.success(), "server: {:?}\n{server}\n{stderr}", output.status);
    assert_eq!(
        report["ok"], true,
        "the page failed: {report:#}\nserver:\n{server}\n{stderr}\nchromium:\n{log}"
    );
    Some(Run { server, report, browser: log })
}

fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("fastshake-webrtc-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(0);
    h.finish()
}

/// Connections per browser run, one after the other, each opening every channel of the case.
const SESSIONS: usize = 20;

/// A case's page query: its channels, in [`SESSIONS`] connections in a row.
fn cases(query: &str) -> String {
    format!("{query}&sessions={SESSIONS}")
}

/// The first session's channels, after checking every channel of every session: all sent
/// messages echoed, none twice, none changed.
fn channels(report: &Value) -> &Vec<Value> {
    let sessions = report["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), SESSIONS, "{report:#}");
    for session in sessions {
        assert_eq!(session["ok"], true, "{session:#}");
        for c in session["channels"].as_array().expect("channels") {
            assert_eq!(c["echoed"], c["sent"], "{c}");
            assert_eq!(c["duplicated"], 0, "{c}");
        }
    }
    report["channels"].as_array().expect("channels")
}

#[test]
fn chromium_opens_channels_over_dtls13_with_the_hybrid_group_by_default() {
    let Some(run) = run(&[], &cases("cases=reliable,unreliable,big,reopen&n=20")) else { return };
    // Chromium names DTLS 1.3 by its wire version (RFC 9147: 0xFEFC).
    assert_eq!(run.report["tls_version"], "FEFC", "{:#}", run.report);
    assert_eq!(run.report["dtls_role"], "client", "we answered a=setup:passive");
    assert!(
        run.server.lines().any(|l| l.contains("DTLS 1.3") && l.contains("x25519mlkem768")),
        "the server names the version and the hybrid group:\n{}",
        run.server
    );
    let channels = channels(&run.report);
    let labels: Vec<&str> = channels.iter().map(|c| c["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["reliable", "unreliable", "big", "reliable"]);
    assert_eq!(channels[2]["size"], 65536, "the 64 KiB messages came back whole");
    // The DTLS client opens even stream ids (RFC 8832 §6); each channel closed both ways
    // (stream reset, RFC 8831 §6.7), so the browser opened the next on the id it freed.
    assert!(channels.iter().all(|c| c["id"] == 0), "{channels:?}");
    assert!(channels.iter().all(|c| c["closed"] == true), "{channels:?}");
    assert_eq!(
        run.server.lines().filter(|l| l.contains("closed") && l.contains("channel 0")).count(),
        4 * SESSIONS,
        "{}",
        run.server
    );
}

#[test]
fn chromium_speaks_dtls12_to_a_server_that_asks_for_it() {
    let Some(run) = run(&["--dtls", "1.2"], &cases("cases=reliable&n=20")) else { return };
    assert_eq!(run.report["tls_version"], "FEFD", "{:#}", run.report);
    assert!(run.server.lines().any(|l| l.contains("DTLS 1.2")), "{}", run.server);
    channels(&run.report);
}

#[test]
fn chromium_with_snap_opens_the_association_from_the_two_inits_in_sdp() {
    // Chromium puts its INIT in the offer (a=sctp-init) behind a field trial.
    let Some(run) =
        run_with(&[], &["--force-fieldtrials=WebRTC-Sctp-Snap/Enabled/"], &cases("cases=reliable,big&n=20"))
    else {
        return;
    };
    assert!(
        run.server.lines().any(|l| l.contains("SCTP open (Snap handshake")),
        "no INIT, INIT-ACK or cookie on the wire:\n{}",
        run.server
    );
    channels(&run.report);
}

#[test]
fn chromium_opens_channels_to_a_full_ice_server() {
    // No a=ice-lite: Chromium answers our triggered checks, and nominates a pair we validated.
    let Some(run) = run(&["--ice", "full", "--verbose"], &cases("cases=reliable,unreliable,big&n=20")) else {
        return;
    };
    channels(&run.report);
    assert!(run.server.lines().any(|l| l.contains("Selected(")), "{}", run.server);
}

#[test]
fn chromium_opens_twenty_sessions_in_a_row_each_echoing_its_message() {
    // The page's benchmark mode: a new connection per session, one message echoed in each.
    let Some(run) = run(&[], "bench=20") else { return };
    let sessions = run.report["bench"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 20, "{:#}", run.report);
    assert_eq!(
        run.server.lines().filter(|l| l.contains("DTLS 1.3") && l.contains("x25519mlkem768")).count(),
        20
    );
}

/// The server's line for a handshake that went through STUN, if any.
fn dtls_in_stun_line(server: &str) -> Option<&str> {
    server.lines().find(|l| l.contains("DTLS handshake in STUN"))
}

/// Chromium with DTLS in STUN (draft-hancke-webrtc-sped, behind a field trial) and the log of
/// its ICE and DTLS transports, which says how the exchange ended.
const DTLS_IN_STUN: [&str; 4] = [
    "--force-fieldtrials=WebRTC-IceHandshakeDtls/Enabled/",
    "--enable-logging=stderr",
    "--log-level=0",
    "--vmodule=*/webrtc/p2p/*=1",
];

/// The browser's log says the exchange succeeded (its controller reached COMPLETE, not OFF).
fn assert_browser_completed_it(run: &Run, what: &str) {
    assert!(
        run.browser.contains("DTLS-STUN piggyback complete with success=1")
            && !run.browser.contains("not supported by peer"),
        "{what}: the browser did not complete DTLS in STUN:\n{}",
        run.browser
    );
}

#[test]
fn chromium_with_dtls_in_stun_runs_the_handshake_in_its_checks_and_our_responses() {
    // Chromium 156's default ClientHello carries the hybrid share and takes two datagrams: the
    // first rides a check, the second a later one or plain.
    for ice in ["lite", "full"] {
        let Some(run) = run_with(&["--ice", ice], &DTLS_IN_STUN, &cases("cases=reliable,big&n=20")) else {
            return;
        };
        channels(&run.report);
        let line = dtls_in_stun_line(&run.server)
            .unwrap_or_else(|| panic!("{ice}: the server took no DTLS from a check:\n{}", run.server));
        assert!(!line.contains(" 0 datagrams taken"), "{ice}: {line}");
        assert!(
            run.server.lines().any(|l| l.contains("DTLS 1.3") && l.contains("x25519mlkem768")),
            "{}",
            run.server
        );
        assert_browser_completed_it(&run, ice);
    }
}

#[test]
fn chromium_with_dtls_in_stun_and_a_one_datagram_client_hello_gets_our_flight_in_the_response() {
    // Without the hybrid share the ClientHello is one datagram: it rides the first check, and
    // our first flight the response to it.
    let mut flags = DTLS_IN_STUN.to_vec();
    flags.push("--disable-features=WebRtcPqcForDtls");
    for dtls in ["both", "1.2"] {
        let Some(run) = run_with(&["--dtls", dtls], &flags, &cases("cases=reliable&n=20")) else { return };
        channels(&run.report);
        let line = dtls_in_stun_line(&run.server)
            .unwrap_or_else(|| panic!("{dtls}: the server took no DTLS from a check:\n{}", run.server));
        assert!(!line.contains(" 0 datagrams taken") && !line.contains(" 0 sent"), "{dtls}: {line}");
        assert_browser_completed_it(&run, dtls);
    }
}

#[test]
fn chromium_with_dtls_in_stun_falls_back_to_plain_dtls_when_the_server_has_it_off() {
    let Some(run) = run_with(&["--no-dtls-in-stun"], &DTLS_IN_STUN, &cases("cases=reliable&n=20")) else {
        return;
    };
    channels(&run.report);
    assert!(dtls_in_stun_line(&run.server).is_none(), "{}", run.server);
    assert!(run.browser.contains("not supported by peer"), "the browser noticed:\n{}", run.browser);
}
