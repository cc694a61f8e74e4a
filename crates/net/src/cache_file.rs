//! What a client keeps in files across runs, both written alike: with mode 0600 and replaced
//! whole, through a temporary file and a rename, so a crash never leaves half a file; a missing
//! file is an empty cache.
//!
//! - [`FileCacheStore`]: the DTLS handshake cache (seed 003: RFC 7924 server objects and
//!   client-certificate tickets, per server), in the engine's versioned store format
//!   (`fastshake_dtls::MemoryCacheStore::to_bytes`); mode 0600 because the tickets name our chain
//!   in servers' caches. An unreadable or corrupt file is an empty cache and a warning, never an
//!   error.
//! - [`AltCookieFile`]: the SCTP ALT-COOKIEs (seed 004), one per (local address, server
//!   address), one `LOCAL SERVER HEX` line each; mode 0600 because a cookie proves that we own
//!   the address. A damaged line is skipped (the server hands out a fresh cookie anyway); a file
//!   that cannot be read is an error.

use fastshake_dtls::{CacheStore, CachedServer, MemoryCacheStore};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// The file's contents; `None` when there is no file.
fn read_if_present(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error),
    }
}

/// Replaces `path` with `bytes` at once (a temporary file beside it, then a rename), mode 0600.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.to_path_buf().into_os_string();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A [`CacheStore`] backed by a file.
#[derive(Debug)]
pub struct FileCacheStore {
    path: PathBuf,
    entries: MemoryCacheStore,
}

impl FileCacheStore {
    /// The cache in `path`, and a warning when the file was there but could not be used.
    pub fn open(path: impl Into<PathBuf>) -> (FileCacheStore, Option<String>) {
        let path = path.into();
        let (entries, warning) = match read_if_present(&path) {
            Ok(Some(bytes)) => match MemoryCacheStore::from_bytes(&bytes) {
                Ok(entries) => (entries, None),
                Err(error) => (
                    MemoryCacheStore::new(),
                    Some(format!("ignoring the cache in {} ({error}); starting empty", path.display())),
                ),
            },
            Ok(None) => (MemoryCacheStore::new(), None),
            Err(error) => (
                MemoryCacheStore::new(),
                Some(format!("cannot read the cache {} ({error}); starting empty", path.display())),
            ),
        };
        (FileCacheStore { path, entries }, warning)
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Servers with an entry.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Writes the whole cache to the file (mode 0600), replacing it at once.
    pub fn save(&self) -> std::io::Result<()> {
        write_private(&self.path, &self.entries.to_bytes())
    }
}

impl CacheStore for FileCacheStore {
    fn load(&self, server: &str) -> Option<CachedServer> {
        self.entries.load(server)
    }

    /// Keeps the entry in memory; [`FileCacheStore::save`] writes the file.
    fn store(&mut self, server: &str, entry: CachedServer) {
        self.entries.store(server, entry);
    }
}

/// SCTP ALT-COOKIEs kept in a file (see the module documentation).
#[derive(Debug)]
pub struct AltCookieFile {
    path: PathBuf,
    /// (local key, server address, cookie), in the order they were stored.
    entries: Vec<(String, String, Vec<u8>)>,
}

impl AltCookieFile {
    /// The cookies in `path`: none when there is no file, an error when it cannot be read.
    pub fn open(path: impl Into<PathBuf>) -> std::io::Result<AltCookieFile> {
        let path = path.into();
        let mut entries = Vec::new();
        let bytes = read_if_present(&path)?.unwrap_or_default();
        for line in String::from_utf8_lossy(&bytes).lines() {
            let mut fields = line.split_whitespace();
            if let (Some(local), Some(server), Some(cookie), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            {
                // A damaged line is skipped: the server hands out a fresh cookie anyway.
                if let Ok(cookie) = hex::decode(cookie) {
                    entries.push((local.to_string(), server.to_string(), cookie));
                }
            }
        }
        Ok(AltCookieFile { path, entries })
    }

    /// The key of a local address: its IP, and its port only when the user fixed it. The cookie
    /// proves ownership of the source address; an ephemeral port changes every run.
    pub fn local_key(local: Option<SocketAddr>, port_fixed: bool) -> String {
        match local {
            Some(a) if port_fixed => a.to_string(),
            Some(a) => a.ip().to_string(),
            None => "*".to_string(),
        }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The cookie for the path from `local` (a [`AltCookieFile::local_key`]) to `server`.
    pub fn get(&self, local: &str, server: SocketAddr) -> Option<Vec<u8>> {
        let server = server.to_string();
        self.entries.iter().find(|(l, s, _)| l == local && *s == server).map(|(_, _, c)| c.clone())
    }

    /// Keeps `cookie` for the path, in place of the one it had; [`AltCookieFile::save`] writes it.
    pub fn put(&mut self, local: String, server: SocketAddr, cookie: Vec<u8>) {
        let server = server.to_string();
        self.entries.retain(|(l, s, _)| !(*l == local && *s == server));
        self.entries.push((local, server, cookie));
    }

    /// Writes every cookie to the file (mode 0600), replacing it at once.
    pub fn save(&self) -> std::io::Result<()> {
        let mut text = String::new();
        for (local, server, cookie) in &self.entries {
            text.push_str(&format!("{local} {server} {}\n", hex::encode(cookie)));
        }
        write_private(&self.path, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn missing_corrupt_and_saved_files() {
        let dir = std::env::temp_dir().join(format!("fastshake-cache-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache");
        let (store, warning) = FileCacheStore::open(&path);
        assert!(store.is_empty() && warning.is_none(), "a missing file is an empty cache");

        std::fs::write(&path, b"FSHC\x01\x00\x05garbage").unwrap();
        let (mut store, warning) = FileCacheStore::open(&path);
        assert!(store.is_empty() && warning.is_some(), "a corrupt file: empty, with a warning");

        store.store("localhost@127.0.0.1:4433", CachedServer::default());
        store.save().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (again, warning) = FileCacheStore::open(&path);
        assert!(warning.is_none());
        assert_eq!(again.load("localhost@127.0.0.1:4433"), Some(CachedServer::default()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn alt_cookies_skip_damaged_lines_and_save_privately() {
        let dir = std::env::temp_dir().join(format!("fastshake-cookie-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cookies");
        assert!(AltCookieFile::open(&path).unwrap().get("*", "127.0.0.1:9899".parse().unwrap()).is_none());

        let server: SocketAddr = "192.0.2.1:9899".parse().unwrap();
        std::fs::write(&path, "10.0.0.1 192.0.2.1:9899 zz\nnot a line\n10.0.0.1 192.0.2.1:9899 0a0b\n")
            .unwrap();
        let mut cookies = AltCookieFile::open(&path).unwrap();
        assert_eq!(cookies.get("10.0.0.1", server), Some(vec![0x0a, 0x0b]), "damaged lines are skipped");

        cookies.put("10.0.0.1".into(), server, vec![1, 2, 3]);
        cookies.put("10.0.0.2:4000".into(), server, vec![4]);
        cookies.save().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = AltCookieFile::open(&path).unwrap();
        assert_eq!(again.get("10.0.0.1", server), Some(vec![1, 2, 3]), "a new cookie replaces the old");
        assert_eq!(again.get("10.0.0.2:4000", server), Some(vec![4]));

        std::fs::create_dir_all(dir.join("dir")).unwrap();
        assert!(AltCookieFile::open(dir.join("dir")).is_err(), "an unreadable file is an error");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_local_key_has_the_port_only_when_fixed() {
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        assert_eq!(AltCookieFile::local_key(Some(a), true), "10.0.0.1:4000");
        assert_eq!(AltCookieFile::local_key(Some(a), false), "10.0.0.1");
        assert_eq!(AltCookieFile::local_key(None, false), "*");
    }
}
