//! The space on the data directory's filesystem, for the operator's
//! disk alert (`trawl_storage_available_bytes`): a crawl fills its disk
//! with WARC files and stores, and RocksDB stops writing when it is full.

use std::path::Path;

/// A filesystem's size and the bytes free to this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Space {
    /// Bytes an unprivileged writer may still use (`f_bavail`).
    pub available: u64,
    /// The filesystem's size.
    pub capacity: u64,
}

/// The space of the filesystem holding `path`.
pub fn space(path: &Path) -> std::io::Result<Space> {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c_path` is a NUL-terminated string that outlives the call,
    // and `stat` points at a writable statvfs.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: statvfs returned 0, so it filled `stat`.
    let stat = unsafe { stat.assume_init() };
    space_of(&stat)
}

/// The fields' types differ by platform (32-bit `c_ulong`s on some).
#[allow(clippy::unnecessary_cast)]
fn space_of(stat: &libc::statvfs) -> std::io::Result<Space> {
    let block = stat.f_frsize as u64;
    Ok(Space {
        available: (stat.f_bavail as u64).saturating_mul(block),
        capacity: (stat.f_blocks as u64).saturating_mul(block),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_has_a_filesystem_with_room_in_it() {
        let dir = tempfile::tempdir().unwrap();
        let s = space(dir.path()).unwrap();
        assert!(s.capacity > 0);
        assert!(s.available <= s.capacity, "{s:?}");
    }

    #[test]
    fn a_missing_path_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(space(&dir.path().join("nowhere")).is_err());
    }
}
