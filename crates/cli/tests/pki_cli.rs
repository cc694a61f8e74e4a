//! `fastshake pki` options: chain length, chosen server names, key kinds, and clear refusals.

use std::path::{Path, PathBuf};

use fastshake_pki::{
    certificates_from_pem, verify_client_chain, verify_server_chain, CertifiedKey, TrustAnchors,
};
use fastshake_testkit::peers::{run, Fastshake, Finished, STEP};

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pki-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

const FASTSHAKE: Fastshake = Fastshake(env!("CARGO_BIN_EXE_fastshake"));

fn fastshake_pki(dir: &Path, args: &[&str]) -> Finished {
    let mut command = FASTSHAKE.command();
    command.arg("pki").arg("--out").arg(dir).args(args);
    run("fastshake pki", command, 6 * STEP)
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

#[test]
fn chain_len_one_with_chosen_names_validates_with_the_crate() {
    let dir = out_dir("names");
    let output = fastshake_pki(
        &dir,
        &["--chain-len", "1", "--server-name", "dtls.test", "--server-name", "10.1.2.3", "--days", "2"],
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{}", output.stderr);
    assert!(stdout.contains("server names: dtls.test, 10.1.2.3"), "{stdout}");
    assert!(stdout.contains("key p256"), "{stdout}");

    let anchors = TrustAnchors::from_pem(&read(&dir, "ca.pem")).unwrap();
    let server = CertifiedKey::from_pem(&read(&dir, "server.pem"), &read(&dir, "server.key")).unwrap();
    let client = CertifiedKey::from_pem(&read(&dir, "client.pem"), &read(&dir, "client.key")).unwrap();
    assert_eq!(server.chain.len(), 1, "chain length 1: the leaf alone");
    for name in ["dtls.test", "10.1.2.3"] {
        verify_server_chain(&server.chain, &anchors, now(), Some(name)).expect(name);
    }
    assert!(verify_server_chain(&server.chain, &anchors, now(), Some("localhost")).is_err());
    verify_client_chain(&client.chain, &anchors, now()).unwrap();
    // Valid for the two days asked, not three.
    assert!(verify_client_chain(&client.chain, &anchors, now() + 3 * 86_400).is_err());
    assert_eq!(certificates_from_pem(&read(&dir, "ca.pem")).unwrap().len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn private_keys_are_readable_by_the_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = out_dir("modes");
    assert!(fastshake_pki(&dir, &["--chain-len", "1"]).status.success());
    for key in ["server.key", "client.key"] {
        let mode = std::fs::metadata(dir.join(key)).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{key} mode {mode:o}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_options_fail_with_a_clear_message() {
    let dir = out_dir("bad");
    let cases: [(&[&str], &str); 4] = [
        (&["--chain-len", "0"], "chain length 0"),
        (&["--key", "dsa"], "unknown key kind"),
        (&["--server-name", "not a name"], "server name"),
        (&["--days", "0"], "0 days"),
    ];
    for (args, message) in cases {
        let output = fastshake_pki(&dir, args);
        let stderr = &output.stderr;
        assert!(!output.status.success(), "{args:?} accepted");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    assert!(!dir.join("ca.pem").exists(), "nothing written on failure");
}
