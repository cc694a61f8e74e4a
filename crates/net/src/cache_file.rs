//! A client's handshake cache (seed 003: RFC 7924 server objects and client-certificate tickets,
//! per server) kept in a file across runs. The format is the engine's versioned store format
//! (`fastshake_dtls::MemoryCacheStore::to_bytes`); the file is written with mode 0600 (the
//! tickets name our chain in servers' caches) and replaced whole, through a temporary file and
//! a rename, so a crash never leaves half a cache. A missing file is an empty cache; an
//! unreadable or corrupt one is an empty cache and a warning, never an error.

use fastshake_dtls::{CacheStore, CachedServer, MemoryCacheStore};
use std::io::Write;
use std::path::{Path, PathBuf};

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
        let (entries, warning) = match std::fs::read(&path) {
            Ok(bytes) => match MemoryCacheStore::from_bytes(&bytes) {
                Ok(entries) => (entries, None),
                Err(error) => (
                    MemoryCacheStore::new(),
                    Some(format!("ignoring the cache in {} ({error:?}); starting empty", path.display())),
                ),
            },
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => (MemoryCacheStore::new(), None),
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
        use std::os::unix::fs::OpenOptionsExt;
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let mut file =
            std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        file.write_all(&self.entries.to_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &self.path)
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
}
